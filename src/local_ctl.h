/* SPDX-License-Identifier: MIT */
/*
 * local_ctl: the lifecycle of local sandboxes (design.md 4.1), shared by
 * sandboxctl and the mount (which resumes a stopped sandbox on first
 * access): create, start, stop, restart, remove, and a status query.
 *
 * An agent sandbox (label alienAgentTransport=native-file-v1) runs one
 * sandbox-agent per boot, detached from the caller (double fork, setsid),
 * listening on 127.0.0.1 with a fresh credential that the agent itself
 * writes to boot/token. A native sandbox (no label) has no process: start
 * and stop only change its recorded state.
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

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/proto.h"
#include "common/proto_record.h"
#include "local_state.h"

#define LOCAL_CTL_START_TIMEOUT_MS 30000L
#define LOCAL_CTL_STOP_TIMEOUT_MS 10000L
#define LOCAL_CTL_HEALTH_TIMEOUT_MS 2000L
/* The exec user when root and nothing else is asked for. */
#define LOCAL_CTL_DEFAULT_USER "nobody"
#define LOCAL_CTL_DEFAULT_ID 65534

struct local_ctl {
	char *state_dir; /* absolute, no trailing '/' */
	char *agent; /* the sandbox-agent binary */
	long start_timeout_ms; /* until the agent's health answers */
	long stop_timeout_ms; /* SIGTERM to SIGKILL */
	long lock_timeout_ms; /* waiting for another transition */
};

/*
 * Fill c: the state directory from state_dir_option (NULL: see
 * local_state_dir_resolve) and the agent binary from local_ctl_agent_path.
 * Timeouts get the defaults above; callers may change them afterwards.
 */
int local_ctl_init(struct local_ctl *c, const char *state_dir_option,
		   struct local_err *err) __attribute__((warn_unused_result));
void local_ctl_cleanup(struct local_ctl *c);

/*
 * The sandbox-agent binary (heap): $SANDBOXFS_AGENT when set, else the
 * sandbox-agent next to the running program (/proc/self/exe's directory)
 * when it is executable, else the installed one (sbindir, then bindir).
 */
char *local_ctl_agent_path(void);

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
};

/*
 * Create a sandbox: its directory, root/ (with a copy of opts->from:
 * modes, symlinks and times kept, hard links copied as separate files,
 * devices and sockets skipped, set-id bits dropped when root), boot/ (0700)
 * and a record in state Stopped. When the caller is root, root/ and
 * everything in it belongs to the exec user (default nobody, 65534:65534),
 * who is stored in the record. -EINVAL for a bad name, -EEXIST for a
 * duplicate, -EPERM for opts->user without root, -ENOENT for an unknown
 * user or a missing opts->from. A failed create leaves nothing behind.
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
 * as it is; otherwise a new boot starts: the previously recorded port when
 * it is free, else one the kernel picks. -ETIMEDOUT when the agent's
 * health did not answer in start_timeout_ms, -EIO when it exited (err
 * points to agent.log), the exec's errno when the agent binary cannot
 * run, -EPROTO for an unknown transport label, -EBUSY while the record
 * says Creating or Deleting.
 */
int local_ctl_start(struct local_ctl *c, const char *id, struct local_err *err)
	__attribute__((warn_unused_result));

/*
 * Bring a sandbox to Stopped: SIGTERM to the recorded agent (only when
 * /proc/PID/cmdline shows a sandbox-agent serving this sandbox's root),
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
 * Remove a sandbox and everything under its directory. A running one (or
 * one whose agent is alive) is refused with -EBUSY unless force, which
 * stops it first; a corrupt record is refused with -EBADMSG unless force.
 */
int local_ctl_rm(struct local_ctl *c, const char *id, bool force,
		 struct local_err *err) __attribute__((warn_unused_result));

struct local_status {
	struct proto_record rec;
	pid_t pid; /* the agent's pid, 0 when unknown */
	bool alive; /* that pid is our agent for this root */
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
 * GET /v1/health?version=1 at a local route (local_state_route_valid) over
 * a plain socket, everything within timeout_ms. 0 and *out when the agent
 * answered 200 with a health object; -ETIMEDOUT, a connect error, or
 * -EPROTO for any other answer.
 */
int local_ctl_health(const char *url, long timeout_ms, struct proto_health *out)
	__attribute__((warn_unused_result));

/* True when pid is alive (not a zombie) and its command line is a
 * sandbox-agent started with --root root. */
bool local_ctl_agent_matches(pid_t pid, const char *root);

#endif
