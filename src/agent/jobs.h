/* SPDX-License-Identifier: MIT */
/*
 * jobs: the agent's job registry (doc/protocol-v1.md 3.6, doc/commands.md "Jobs")
 * and what the command routes share. With --strict-v1 it is alien's: at
 * most PROTO_MAX_JOBS jobs, running jobs never evicted, the oldest
 * finished job whose ending a poll has delivered evicted when a start
 * needs room. Otherwise a limit holds on running jobs only, and finished
 * jobs are kept for hours, bounded by a count and by the bytes of output
 * all jobs keep; GET /sandboxfs/v1/jobs lists them. Output is kept for
 * replay by sinceSeq: for a job started the alien way under the same
 * per-stream cap as exec (the rest dropped, truncated), for one started
 * with flowControl all of it, in a window of output the client has not
 * acknowledged (memory, then an unlinked spool file): while the window is
 * full the job's pipes are not read, so the job blocks on its writes.
 * It also owns the spawner (how commands run, decided at start) and one
 * timer thread that answers long-polls at their waitMs, expires finished
 * jobs, and kills exec commands at their deadline even while the exec's
 * writer is blocked on a slow client.
 *
 * Thread-safe. Each job runs on a thread of its own while its command runs;
 * the routes never wait for a command.
 */
#ifndef SBFS_AGENT_JOBS_H
#define SBFS_AGENT_JOBS_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "agent/spawn.h"

/* The longest a job poll may be held with waitMs (the extension). */
#define AGENT_JOBS_MAX_WAIT_MS 30000
/* The largest poll answer; past it the frames are cut and the answer says
 * running so that the caller polls again from the last seq it got. A
 * caller's maxBytes (the extension) may ask for less, down to
 * AGENT_JOBS_MIN_ANSWER; one frame always goes. */
#define AGENT_JOBS_MAX_ANSWER (16UL * 1024 * 1024)
#define AGENT_JOBS_MIN_ANSWER (64UL * 1024)
/* Defaults of the registry's options (agent.h). */
#define AGENT_JOBS_MAX_RUNNING 64
#define AGENT_JOBS_WINDOW (16ULL * 1024 * 1024)
#define AGENT_JOBS_RETENTION_S 86400
#define AGENT_JOBS_RETENTION_COUNT 1000
#define AGENT_JOBS_RETENTION_BYTES (1ULL << 30)

/*
 * Make the registry and decide how commands run (agent_spawner_new: the
 * bubblewrap probe happens here). Fails when confinement was required and
 * does not work, so the agent refuses to start. a must outlive it.
 */
int agent_jobs_new(struct agent *a, struct agent_jobs **out)
	__attribute__((warn_unused_result));
/*
 * Kill every running job's and exec's process group, wait for them, answer
 * held polls, free. Call after the HTTP server has stopped. An exec whose
 * thread does not finish within a few seconds keeps the registry alive
 * (it is leaked, not freed under it). NULL-safe.
 */
void agent_jobs_free(struct agent_jobs *j);

/* The limit on running jobs in force (PROTO_MAX_JOBS with --strict-v1,
 * where it counts finished jobs not yet polled too). */
unsigned agent_jobs_max_running(const struct agent_jobs *j);

/* For exec.c: how commands run. */
const struct agent_spawner *agent_jobs_spawner(const struct agent_jobs *j);
/* The per-stream output cap in force. */
size_t agent_jobs_output_cap(const struct agent_jobs *j);

/*
 * Count an exec in flight, from its route to the end of its thread, so
 * that agent_jobs_free waits for it. _begin fails with -ESHUTDOWN once the
 * registry is being freed.
 */
int agent_jobs_exec_begin(struct agent_jobs *j)
	__attribute__((warn_unused_result));
void agent_jobs_exec_end(struct agent_jobs *j);

/*
 * An exec command the timer kills (SIGKILL to the group) once deadline
 * passes. Caller-owned; armed between _add and _del, which must come
 * before the command is reaped.
 */
struct agent_watch {
	struct agent_watch *next;
	pid_t pgid;
	int64_t deadline;
	bool fired;
};

void agent_jobs_watch_add(struct agent_jobs *j, struct agent_watch *w);
void agent_jobs_watch_del(struct agent_jobs *j, struct agent_watch *w);

#endif
