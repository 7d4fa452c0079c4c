/* SPDX-License-Identifier: MIT */
/*
 * local_ctl: the lifecycle of local sandboxes (sandboxctl(1)), shared by
 * sandboxctl and the mount (which resumes a stopped sandbox on first
 * access): create, start, stop, restart, remove, and a status query.
 *
 * An agent sandbox (label alienAgentTransport=native-file-v1) runs one
 * sandbox-agent per boot, detached from the caller (double fork, setsid),
 * listening on a Unix socket in its owner-only directory (boot/agent.sock,
 * mode 0600; the record's agentUrl is http+unix://...) with a fresh
 * credential that the agent itself writes to boot/token. The agent works
 * in the sandbox's directory and gets its session root through the
 * environment, so no path of the sandbox is on its command line. It holds
 * a lock on agent.lock for its life: whether a sandbox's agent lives, and
 * which process it is, is asked of that lock, never of a pid alone. A
 * native sandbox (no label) has no process: start and stop only change
 * its recorded state.
 *
 * Every state transition holds the sandbox's lock (local_state_lock) and
 * records each step, so a reader of sandbox.json sees Resuming while an
 * agent boots and Running only once its health route answers. A start
 * that fails stops what it started and records Stopped: it never deletes.
 *
 * Functions return 0 or a negative errno and leave a one-line reason in
 * err (may be NULL); none prints. The credential is never read, logged or
 * copied by this module. Thread-safe for distinct struct local_ctl
 * values and for concurrent calls on one (it is read-only after init);
 * starting forks, which is safe in a threaded caller because the children
 * only call async-signal-safe functions before exec.
 */
#ifndef SBFS_LOCAL_CTL_H
#define SBFS_LOCAL_CTL_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/proto.h"
#include "common/proto_record.h"
#include "client/local_state.h"

#define LOCAL_CTL_START_TIMEOUT_MS 30000L
#define LOCAL_CTL_STOP_TIMEOUT_MS 10000L
#define LOCAL_CTL_HEALTH_TIMEOUT_MS 2000L
/* The exec user of a record that names none (made before sandboxes had
 * identities of their own). */
#define LOCAL_CTL_DEFAULT_USER "nobody"
#define LOCAL_CTL_DEFAULT_ID 65534

/*
 * The identities root gives its sandboxes (sandboxctl(1), "Identity"): a
 * uid, and the gid of the same number, out of 65536 from
 * LOCAL_CTL_DYNAMIC_BASE (0x7E000000). That is in the part of the 32-bit
 * range that systemd documents as unused (above its container ranges,
 * which end at 1879048191, below its foreign range at 2147352576, and
 * below 2^31, since some programs take ids for signed), and far above
 * what useradd hands out for users and their subordinate ids. Each
 * allocation is claimed, under a lock, by a file in
 * LOCAL_CTL_DYNAMIC_REGISTRY naming the sandbox's directory, whatever
 * state directory it is in; a claim whose directory is gone, or whose
 * record names another uid, is free again.
 */
#define LOCAL_CTL_DYNAMIC_BASE 2113929216UL
#define LOCAL_CTL_DYNAMIC_COUNT 65536UL
#define LOCAL_CTL_DYNAMIC_REGISTRY LOCAL_STATE_ROOT_DEFAULT "/uids"

struct local_ctl {
	char *state_dir; /* absolute, no trailing '/' */
	char *agent; /* the sandbox-agent binary */
	long start_timeout_ms; /* until the agent's health answers */
	long stop_timeout_ms; /* SIGTERM to SIGKILL */
	long lock_timeout_ms; /* waiting for another transition */
};

/*
 * Fill c: the state directory from state_dir_option (NULL: see
 * local_state_dir_resolve) and the agent binary: $SANDBOXFS_AGENT when
 * set, else the sandbox-agent next to the running program
 * (/proc/self/exe's directory) when it is executable, else the installed
 * one (sbindir, then bindir). Timeouts get the defaults above; callers may
 * change them afterwards.
 */
int local_ctl_init(struct local_ctl *c, const char *state_dir_option,
		   struct local_err *err) __attribute__((warn_unused_result));
void local_ctl_cleanup(struct local_ctl *c);

/* What a create has copied so far: the entries that are not directories,
 * and the bytes of regular files. */
struct local_copy_progress {
	uint64_t files;
	uint64_t bytes;
};

struct local_create_opts {
	const char *from; /* copy this tree into root/ (NULL: empty) */
	bool native; /* a native session: no label, no agent */
	const char *user; /* exec user NAME or UID:GID (root only) */
	bool strict_v1; /* the agent speaks protocol v1 only (recorded) */
	/* The limits of its commands (recorded); 0 takes the default. */
	uint64_t pids;
	uint64_t memory;
	uint64_t tmp_size;
	const char *network; /* "user" (NULL) or "none" */
};

/*
 * Create a sandbox: its directory, root/ (with a copy of opts->from:
 * modes, symlinks and times kept, hard links copied as separate files,
 * devices and sockets skipped, set-id bits dropped when root), boot/ (0700)
 * and a record in state Stopped, with its limits (the defaults filled in)
 * and network. When the caller is root, root/ and everything in it
 * belongs to the exec user, who is stored in the record: opts->user, else
 * an identity of the sandbox's own (LOCAL_CTL_DYNAMIC_BASE, recorded with
 * dynamicUser). -EINVAL for a bad name or limit, -EEXIST for a duplicate,
 * -EPERM for opts->user without root, -ENOENT for an unknown user or a
 * missing opts->from, -ENOSPC when no identity is free. A failed create
 * leaves nothing behind.
 */
int local_ctl_create(struct local_ctl *c, const char *id,
		     const struct local_create_opts *opts,
		     struct local_err *err) __attribute__((warn_unused_result));

/*
 * The same, telling fn how far the copy is: after each entry copied, after
 * each chunk (at most LOCAL_COPY_CHUNK bytes) of a file, and once more
 * with the totals before the record says Stopped. A negative return from
 * fn (-EINTR for an interrupted create) ends the create with that value,
 * and nothing is left behind.
 */
typedef int local_progress_fn(void *arg, const struct local_copy_progress *p);
int local_ctl_create_progress(struct local_ctl *c, const char *id,
			      const struct local_create_opts *opts,
			      local_progress_fn *fn, void *arg,
			      struct local_err *err)
	__attribute__((warn_unused_result));

/* The most a create copies between two progress calls. */
#define LOCAL_COPY_CHUNK (8UL * 1024 * 1024)

/*
 * Bring a sandbox to Running. An agent sandbox whose agent is alive stays
 * as it is; otherwise (never started, stopped, or its agent died) a new
 * boot starts. The state directory and the sandbox's directory are made
 * owner-only first (local_state_secure). -ETIMEDOUT when the agent's
 * health did not answer in start_timeout_ms, -EIO when it exited (err
 * points to agent.log), the exec's errno when the agent binary cannot
 * run, -EPROTO for an unknown transport label, -EBUSY while the record
 * says Creating or Deleting.
 */
int local_ctl_start(struct local_ctl *c, const char *id, struct local_err *err)
	__attribute__((warn_unused_result));

/*
 * Bring a sandbox to Stopped: SIGTERM to its agent (the process holding
 * its agent lock, signalled through a pidfd taken while it holds it),
 * SIGKILL after stop_timeout_ms, the credential removed, agentUrl cleared.
 * Stopping a stopped sandbox succeeds.
 */
int local_ctl_stop(struct local_ctl *c, const char *id, struct local_err *err)
	__attribute__((warn_unused_result));

/* Stop, then start a new boot (new credential; the same port when free),
 * holding the lock across both. */
int local_ctl_restart(struct local_ctl *c, const char *id,
		      struct local_err *err)
	__attribute__((warn_unused_result));

/*
 * Remove a sandbox and everything under its directory, and give back its
 * identity. A running one (or one whose agent is alive) is refused with
 * -EBUSY unless force, which stops it first; a corrupt record is refused
 * with -EBADMSG unless force. The record says Deleting while the session
 * root goes; when that fails the sandbox stays (Deleting) and another rm
 * finishes the job, as it does for what an interrupted rm left renamed
 * away (".rm-<id>-*"). Nothing is followed through a symlink
 * (local_state_rmtree).
 */
int local_ctl_rm(struct local_ctl *c, const char *id, bool force,
		 struct local_err *err) __attribute__((warn_unused_result));

struct local_status {
	struct proto_record rec;
	pid_t pid; /* the agent's pid, 0 when unknown */
	bool alive; /* the sandbox's agent lives (it holds its lock) */
	bool died; /* the record says Running, but its agent is gone */
	bool answered; /* health below is valid */
	struct proto_health health; /* the agent's GET /v1/health answer */
};

/* The record, whether its agent is alive, and its health (asked with a
 * LOCAL_CTL_HEALTH_TIMEOUT_MS deadline). Takes no lock. */
int local_ctl_status(struct local_ctl *c, const char *id,
		     struct local_status *out, struct local_err *err)
	__attribute__((warn_unused_result));
void local_status_cleanup(struct local_status *s);

/*
 * GET /v1/health?version=1 at a local route (local_state_route_valid, or
 * an http+unix URL) over a plain socket, everything within timeout_ms. 0
 * and *out when the agent answered 200 with a health object; -ETIMEDOUT,
 * a connect error, or -EPROTO for any other answer.
 */
int local_ctl_health(const char *url, long timeout_ms, struct proto_health *out)
	__attribute__((warn_unused_result));

/*
 * Whether the sandbox's agent lives, asked of the lock it holds on
 * agent.lock for its whole life (the kernel drops it when the agent dies,
 * however it dies, and a recycled pid never holds it): 1 alive (*pid, when
 * not NULL, gets its pid, 0 when it cannot be seen from here), 0 gone, -1
 * unknown (no agent.lock: no agent of sandboxctl's ever ran there).
 */
int local_ctl_agent_alive(const char *state_dir, const char *id, pid_t *pid);

/* True when rec says Running for an agent sandbox whose agent is gone
 * (killed, crashed, the machine restarted): it is in fact stopped. */
bool local_ctl_agent_died(struct local_ctl *c, const struct proto_record *rec);

/* True when pid is alive (not a zombie) and its command line is a
 * sandbox-agent started with --root root: how an agent of an older
 * sandboxctl, which took no lock, is recognised. */
bool local_ctl_agent_matches(pid_t pid, const char *root);

#endif
