/* SPDX-License-Identifier: MIT */
/*
 * local_ctl_i: what the files of the local lifecycle share (local_ctl.h
 * is the contract).
 *
 *   local_ctl.c    setup, the exec user and identities of their own,
 *                  create, the state transitions (start, stop, restart)
 *                  and status
 *   local_copy.c   the copy of a tree into a new session root
 *   local_spawn.c  processes: the agent held by a pidfd, whether it
 *                  lives (its agent lock), stopping it, starting one
 *                  detached
 *   local_boot.c   one boot of an agent: its command line and
 *                  environment, its log, the wait for its health route
 *                  (a loopback HTTP GET of our own: libcurl stays in the
 *                  transport's curl engine)
 *   local_rm.c     removing a sandbox and its state directory
 *
 * Every function returns 0 or a negative errno and leaves a one-line
 * reason in err (may be NULL), as local_ctl.h says. Thread-safe as
 * local_ctl.h says: nothing here keeps state between calls.
 */
#ifndef SBFS_LOCAL_CTL_I_H
#define SBFS_LOCAL_CTL_I_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/proto_record.h"
#include "client/local_ctl.h"
#include "client/local_state.h"

#define LOCAL_AGENT_NAME "sandbox-agent"
/* Between two looks at a lock or a process. */
#define LOCAL_POLL_MS 50

/* ---- local_ctl.c ---------------------------------------------------------- */

/* 0 when id is a sandbox name, else -EINVAL with the reason. */
int local_id_check(const char *id, struct local_err *err)
	__attribute__((warn_unused_result));
/* RFC 3339 UTC, second resolution (heap). */
char *local_utc_now(void);
/* Give back uid, the identity of the sandbox at dir, if its claim still
 * names dir. */
void local_release_identity(unsigned long uid, const char *dir);

/* ---- local_copy.c ----------------------------------------------------------- */

/*
 * Copy the tree at from into the (empty) directory to, whose own mode and
 * times become from's: modes, symlinks and times kept, hard links copied
 * as separate files, devices and sockets skipped; everything handed to
 * uid:gid (set-id bits of files dropped) when chown_to. fn (may be NULL)
 * is told the progress (local_ctl_create_progress) and may end the copy.
 */
int local_copy_tree(const char *from, const char *to, bool chown_to, uid_t uid,
		    gid_t gid, local_progress_fn *fn, void *arg,
		    struct local_err *err) __attribute__((warn_unused_result));

/* ---- local_spawn.c ---------------------------------------------------------- */

/* A process we hold: by pidfd when the kernel has them, else by pid. */
struct local_proc {
	pid_t pid;
	int pidfd; /* -1: none */
};

#define LOCAL_PROC_NONE \
	{               \
		0, -1   \
	}

/* A pidfd of pid, or -1 (errno set; ENOSYS without pidfds). */
int local_pidfd_open(pid_t pid);
bool local_proc_alive(const struct local_proc *p);
/* SIGTERM, wait up to timeout_ms, then SIGKILL and wait a little more:
 * 0, or -ETIMEDOUT / the signal's -errno. */
int local_proc_kill(const struct local_proc *p, long timeout_ms);
/* Close the pidfd; p holds nothing after. */
void local_proc_close(struct local_proc *p);
/* The sandbox's live agent (local_spawn.c says how it is found): 1 and
 * *out, or 0. */
int local_agent_proc(struct local_ctl *c, const struct proto_record *rec,
		     struct local_proc *out);
/* local_proc_kill with the reason in err; agent is closed after. */
int local_stop_agent(struct local_proc *agent, long timeout_ms,
		     struct local_err *err);
/* Start argv detached (nobody's child; it outlives the caller) in dir,
 * its output appended to logpath after banner: 0 and *pidp, or the
 * exec's -errno. */
int local_spawn_detached(const char *const *argv, char *const *envp,
			 const char *dir, const char *logpath,
			 const char *banner, pid_t *pidp, struct local_err *err)
	__attribute__((warn_unused_result));

/* ---- local_boot.c ------------------------------------------------------------- */

/*
 * One boot of rec's agent: spawn it on its socket (boot/agent.sock),
 * record its pid, wait for its health answer and its credential: 0 and
 * its route in *url (heap). On failure the agent is gone again: -ECHILD
 * when it exited at start, -ETIMEDOUT, -EIO, or the spawn's errno.
 */
int local_boot(struct local_ctl *c, struct proto_record *rec, char **url,
	       struct local_err *err) __attribute__((warn_unused_result));
/* Empty boot/ (token, pid, socket, and any temporary file of them). */
void local_boot_clear(struct local_ctl *c, const char *id);

/* The most arguments an agent's command line has. */
#define LOCAL_ARGV_MAX 48

/* How an agent confines the commands it runs, as a record says. */
struct local_confine {
	long uid, gid; /* the exec user, given when we are root */
	uint64_t pids, memory, tmp_size; /* 0: the agent's default */
	const char *network; /* NULL: the agent's default */
	char text[4][48]; /* the numbers, as argv holds them */
};

/* Append to argv at argc the agent's options for cf (--exec-user as
 * root, --confine bwrap, the limits and the network); the new argc.
 * argv points into cf, which must live as long. */
size_t local_confine_args(struct local_confine *cf, const char **argv,
			  size_t argc);

/* ---- local_rm.c ----------------------------------------------------------------- */

/* Remove the sandbox's directory: renamed out of the namespace first, so
 * nobody opens its lock or record while the tree goes. */
int local_remove_dir(struct local_ctl *c, const char *id,
		     struct local_err *err);

#endif
