/* SPDX-License-Identifier: MIT */
/*
 * jobs_i: what the files of the job registry share (jobs.h): the registry,
 * its timer and the exec watches (jobs.c), a job's output, its poll
 * answers and its thread (jobs_run.c), and the routes (jobs_routes.c).
 *
 * One mutex (agent_jobs.lock) guards the registry, every job's output and
 * outcome, the held polls and the exec watches: a job's output arrives on
 * its own thread, polls on the HTTP workers, deadlines on the timer, and
 * each of them has to see one consistent state. Replies to held polls are
 * built under the mutex and sent after it is released (ajobs_send_replies),
 * so no HTTP call runs under it. The functions said to be "under the
 * mutex" want it held.
 */
#ifndef SBFS_AGENT_JOBS_I_H
#define SBFS_AGENT_JOBS_I_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/http.h"
#include "agent/jobs.h"
#include "agent/outlog.h"
#include "common/buf.h"
#include "common/dlist.h"
#include "common/proto.h"
#include "common/proto_exec.h"

/* A record's head: seq (8), length (4), stream (1), offset in it (8). */
#define REC_HEAD 21
/* A job id: a UUID in text, with its terminator. */
#define JOB_ID_SIZE 37

struct job {
	struct dlist_node link; /* in the registry, oldest first */
	char id[JOB_ID_SIZE];
	uint64_t ordinal;
	struct agent_jobs *reg;
	struct proto_exec_req req;
	char *cwd_rel;
	pthread_t thread;
	int cancel_fd; /* eventfd: its POLLIN stops the run */
	pid_t pid; /* the command's group while it is unreaped */
	bool flow; /* started with flowControl */
	pthread_cond_t room; /* flow: acknowledgements, cancel, stop */
	int64_t deadline; /* monotonic ms: the run's timeout */
	int64_t started_ms; /* ms since the epoch */
	int64_t ended_ms; /* ms since the epoch, once ended */
	int64_t ended_mono; /* monotonic ms, once ended */

	/* Kept output: records of REC_HEAD bytes plus data, in seq order. */
	struct outlog log;
	uint64_t ack_pos; /* flow: the first record not acknowledged */
	bool has_ack;
	uint64_t ack_seq; /* ... and what was acknowledged */
	uint64_t bytes[2]; /* kept per stream: the next frame's offset */
	size_t frames[2]; /* kept per stream */
	bool has_last;
	uint64_t last_seq; /* of the last kept frame */
	size_t max_frames; /* per stream, alien's jobs only */
	bool over; /* frames dropped (alien's jobs) */
	bool spill_warned;

	bool ended; /* the outcome below is set */
	bool has_exit;
	int32_t code;
	bool truncated;
	const char *err_code;
	char *err_message;
	bool delivered; /* a poll has returned the outcome */
	bool done; /* the thread has finished with the command */
};

/* A poll held for waitMs (the extension's long-poll). */
struct waiter {
	struct waiter *next;
	struct job *job;
	bool has_since;
	uint64_t since;
	size_t max;
	int64_t deadline;
	struct agent_deferred *d;
};

/* A held poll's answer, sent once the mutex is released. */
struct reply {
	struct reply *next;
	struct agent_deferred *d;
	struct buf body;
};

struct agent_jobs {
	struct agent *a;
	struct agent_spawner *sp;
	bool strict; /* alien's registry and output only */
	size_t cap; /* per stream, alien's jobs */
	uint64_t window; /* per flow-controlled job */
	unsigned max_running;
	int64_t retention_ms;
	size_t retention_count;
	uint64_t retention_bytes;
	char *spool; /* private directory, NULL: memory only */
	pthread_mutex_t lock;
	pthread_cond_t wake; /* the timer's: CLOCK_MONOTONIC */
	pthread_cond_t idle; /* execs dropped to zero */
	pthread_t timer;
	bool timer_started;
	bool stopping;
	struct dlist jobs; /* the registry, of struct job */
	size_t count; /* jobs in the registry */
	unsigned running; /* of them not ended */
	uint64_t kept; /* bytes every job's log holds */
	uint64_t ordinal;
	unsigned char *scratch; /* one record's bytes, for answers */
	struct waiter *waiters;
	struct agent_watch *watches;
	unsigned execs;
};

/* ---- a job (jobs_run.c) ------------------------------------------------- */

/* A job of the registry for req (taken: *req is left empty) in the
 * working directory *rel (taken), not started. */
struct job *ajob_new(struct agent_jobs *j, struct proto_exec_req *req,
		     char **rel);
/* NULL-safe; the job's thread must have been joined (or never made). */
void ajob_free(struct job *job);
/* The job's thread: it runs the command and records its output and end. */
void *ajob_main(void *arg);
/* Under the mutex: the job has ended (its outcome is set next). */
void ajob_mark_ended(struct agent_jobs *j, struct job *job);
/* Under the mutex: a flow-controlled job's poll acknowledges every record
 * up to since (those may be dropped when the job needs room). */
void ajob_acknowledge(struct job *job, uint64_t since);
/* Under the mutex: is there output a poll from since has not seen? */
bool ajob_has_news(const struct job *job, bool has_since, uint64_t since);
/* Under the mutex: the poll answer (doc/protocol-v1.md 3.6) into out:
 * the frames after since, at most max bytes of them (at least one), then
 * the ending once there is one. */
int ajob_encode_poll(struct agent_jobs *j, struct job *job, bool has_since,
		     uint64_t since, size_t max, struct buf *out);

/* ---- the registry (jobs.c; the held polls, jobs_run.c) ------------------- */

/* Under the mutex: the job with this id, or NULL. */
struct job *ajobs_find(struct agent_jobs *j, const char *id);
/* Under the mutex: room for one more job (evicting what may go), or
 * false. */
bool ajobs_make_room(struct agent_jobs *j);
/* Under the mutex: answer the held polls of job that can be answered now
 * (all of them when all is set; job NULL: those past their waitMs), moving
 * their replies to *replies. */
void ajobs_release_waiters(struct agent_jobs *j, struct job *job, bool all,
			   int64_t now, struct reply **replies);
/* Send the replies collected under the mutex; call without it. */
void ajobs_send_replies(struct reply *r);

#endif
