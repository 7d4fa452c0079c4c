/* SPDX-License-Identifier: MIT */
/*
 * spawn: running one command for /v1/exec and the jobs
 * (doc/protocol-v1.md 3.6, doc/commands.md), and reading its output.
 *
 * A command is started with fork/exec in its own session and process group,
 * stdin at /dev/null, stdout and stderr on pipes, every other descriptor
 * closed, an environment of PATH plus the request's env, as the exec user
 * when the agent runs as root, and, when confinement is on, inside
 * bubblewrap with only the system, a fresh /proc, /dev and /tmp, and the
 * session root at /sandbox: started by the zygote (zygote.h), one process
 * in that layout kept for the agent's life, or, where the zygote cannot
 * run, by a bubblewrap per command. agent_run() then turns the two pipes into
 * output frames (line-wise, cut at PROTO_MAX_FRAME_BYTES, or whatever each
 * read gives; one seq counter, the per-stream output cap) until the command
 * has exited and both pipes are closed, the deadline passes or the caller
 * stops it.
 *
 * It knows neither HTTP nor the job registry: callers pass a sink for the
 * frames. Thread-safe: a spawner is read-only once made, and a command
 * belongs to one thread at a time.
 */
#ifndef SBFS_AGENT_SPAWN_H
#define SBFS_AGENT_SPAWN_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "common/proto_exec.h"

struct agent_zygote_cmd;

/* Where bubblewrap mounts the session root. */
#define AGENT_SANDBOX_DIR "/sandbox"
/* The PATH every command starts with (doc/commands.md, "The process"). */
#define AGENT_DEFAULT_PATH \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* The longest message a spawn or run failure carries. */
#define AGENT_SPAWN_MSG_MAX 256

struct agent_spawner;

/*
 * Decide, once at start-up, how commands run: the canonical session root,
 * and for AGENT_CONFINE_AUTO or _BWRAP whether bubblewrap works, by running
 * `true` through the real spawn path as the exec user: first through the
 * zygote (started here), then, if that fails, with a bubblewrap of its
 * own. AUTO falls back to running unconfined; BWRAP fails with -ENOTSUP
 * when bubblewrap does not work. Logs the outcome at info. a must outlive
 * the spawner.
 */
int agent_spawner_new(const struct agent *a, struct agent_spawner **out)
	__attribute__((warn_unused_result));
/* Stops the zygote. Every command must have been reaped. NULL-safe. */
void agent_spawner_free(struct agent_spawner *sp);

/*
 * Resolve a request's working directory against the session root
 * (doc/protocol-v1.md 5): lexical refusals first, then the deepest existing
 * ancestor is canonicalised (symlinks allowed while the target stays
 * beneath the root); a part that does not exist yet is kept, so the spawn
 * fails later. cwd NULL is the root. has_nul: the JSON string held a NUL.
 * On success *rel is the heap path relative to the root ("" for the root).
 * A refusal is -EACCES with the reason ("path escapes the session root",
 * ...) in reason[reasonsz]; -ENOMEM otherwise.
 */
int agent_spawn_cwd(const struct agent_spawner *sp, const char *cwd,
		    bool has_nul, char **rel, char *reason, size_t reasonsz)
	__attribute__((warn_unused_result));

/* A started command. The leader's pid is also its process group id; it
 * stays unreaped (so the id cannot be reused) until agent_cmd_reap().
 * Started by the zygote, the leader is the command's init (pid 1 of its
 * own PID namespace, reaped by the zygote once released). */
struct agent_cmd {
	pid_t pid;
	int out_fd; /* read ends, non-blocking, close-on-exec */
	int err_fd;
	int pidfd; /* readable once the leader exits; -1 if unsupported */
	bool exited; /* the leader has exited (seen without reaping) */
	int32_t code; /* its exit code, -1 for a signal */
	struct agent_zygote_cmd *zc; /* NULL unless the zygote started it */
};

/*
 * Start req in the directory cwd_rel (from agent_spawn_cwd). Returns 0, or
 * a negative errno with the spawnFailed message (the errno text, as alien's
 * agent words it) in msg[AGENT_SPAWN_MSG_MAX].
 */
int agent_spawn(const struct agent_spawner *sp,
		const struct proto_exec_req *req, const char *cwd_rel,
		struct agent_cmd *out, char msg[AGENT_SPAWN_MSG_MAX])
	__attribute__((warn_unused_result));
/* SIGKILL the command's process group (started by the zygote: its init,
 * whose death takes the command's whole PID namespace). Safe until
 * agent_cmd_reap(). */
void agent_cmd_kill(const struct agent_cmd *c);
/* Wait for the leader to be gone and close the descriptors. The caller
 * kills first when it wants no wait. */
void agent_cmd_reap(struct agent_cmd *c);

/* Where agent_run() delivers output. */
struct agent_run_sink {
	/*
	 * One output frame (stdout or stderr), called on the running thread.
	 * May block (backpressure: the pipes are not read meanwhile). Returns
	 * 0, or a negative errno when nobody reads any more: the command is
	 * then killed and the run ends as stopped.
	 */
	int (*output)(void *ctx, enum proto_frame_type stream, uint64_t seq,
		      const unsigned char *p, size_t n);
	void *ctx;
	/* -1, or a descriptor whose POLLIN stops the run (cancel, client
	 * gone); the command is killed. */
	int stop_fd;
	/* Frames are what each read of a pipe gives (up to
	 * PROTO_MAX_FRAME_BYTES), not lines: for a client that takes the
	 * output as bytes (flow-controlled jobs), a flood of short lines
	 * then costs a frame per read, not per line. */
	bool chunks;
};

enum agent_run_end {
	AGENT_RUN_EXITED, /* code and truncated are set */
	AGENT_RUN_TIMEOUT, /* killed at the deadline */
	AGENT_RUN_STOPPED, /* killed for the sink or stop_fd */
	AGENT_RUN_READ_FAILED, /* a pipe read failed; the command exited */
	AGENT_RUN_WAIT_FAILED, /* the exit status could not be read */
};

struct agent_run_result {
	enum agent_run_end end;
	int32_t code;
	bool truncated;
	/* For the failures: the frame's code ("timeoutExceeded", ...) and
	 * message; NULL and "" for EXITED and STOPPED. */
	const char *err_code;
	char message[AGENT_SPAWN_MSG_MAX];
};

/*
 * Read c's output into sink under timeout_ms (counted from the call) and
 * cap bytes kept per stream (a frame that would pass it is dropped, still
 * taking a seq, and the result says truncated). Returns when the command
 * has exited and both pipes are closed, or at the deadline, or when
 * stopped; the command is killed in the last two cases. The leader is left
 * unreaped: call agent_cmd_reap() next.
 */
void agent_run(struct agent_cmd *c, uint64_t timeout_ms, size_t cap,
	       const struct agent_run_sink *sink, struct agent_run_result *res);

/* now + ms without overflow. */
int64_t agent_deadline(uint64_t ms);
/* "No such file or directory (os error 2)": errno text as alien's agent
 * reports it. */
void agent_errno_text(int err, char *out, size_t outsz);
/*
 * Make uid/gid the only identity of the calling process (supplementary
 * groups cleared, real, effective and saved ids set, checked, and uid 0
 * not regainable). 0, or -1 with errno set. Async-signal-safe: for a
 * child between fork and exec.
 */
int agent_drop_privileges(uid_t uid, gid_t gid);

#endif
