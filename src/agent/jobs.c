/* SPDX-License-Identifier: MIT */
/*
 * jobs: POST /v1/jobs/start|poll|cancel and the registry behind them
 * (protocol.md 3.7), plus the timer thread shared with exec.
 *
 * One mutex guards the registry, every job's output and outcome, the held
 * polls and the exec watches: a job's output arrives on its own thread,
 * polls on the HTTP workers, deadlines on the timer, and each of them has
 * to see one consistent state. Replies to held polls are built under the
 * mutex and sent after it is released, so no HTTP call runs under it.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "agent/jobs.h"
#include "agent/routes.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/xalloc.h"

/* How long agent_jobs_free waits for exec threads to finish. */
#define EXEC_DRAIN_MS 5000
/* Bytes of bookkeeping per stored frame: seq, length, stream. */
#define REC_HEAD 13
/* The timer's longest sleep. */
#define TIMER_MAX_SLEEP_MS 3600000
/* A job id: a UUID in text, with its terminator. */
#define JOB_ID_SIZE 37

struct job {
	char id[JOB_ID_SIZE];
	uint64_t ordinal;
	struct agent_jobs *reg;
	struct proto_exec_req req;
	char *cwd_rel;
	pthread_t thread;
	int cancel_fd; /* eventfd: its POLLIN stops the run */
	pid_t pid; /* the command's group while it is unreaped */

	/* Kept output: records of REC_HEAD bytes plus data, in seq order. */
	struct buf out;
	size_t frames[2]; /* kept per stream */
	uint64_t last_seq; /* of the last kept frame */
	size_t max_frames; /* per stream */
	bool over; /* frames dropped by max_frames */

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
	size_t cap;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* the timer's: CLOCK_MONOTONIC */
	pthread_cond_t idle; /* execs dropped to zero */
	pthread_t timer;
	bool timer_started;
	bool stopping;
	struct job *slots[PROTO_MAX_JOBS];
	uint64_t ordinal;
	struct waiter *waiters;
	struct agent_watch *watches;
	unsigned execs;
};

/* ---- job output and answers (under the mutex) ---------------------------- */

static size_t stream_index(enum proto_frame_type t)
{
	return t == PROTO_FRAME_STDERR ? 1 : 0;
}

/* The record at off: fills f (data borrowed) and returns the next offset. */
static size_t rec_read(const struct job *job, size_t off, struct proto_frame *f)
{
	const unsigned char *p = (const unsigned char *)job->out.data + off;
	uint32_t len;

	memset(f, 0, sizeof(*f));
	memcpy(&f->seq, p, 8);
	memcpy(&len, p + 8, 4);
	f->type = p[12] ? PROTO_FRAME_STDERR : PROTO_FRAME_STDOUT;
	f->data = (unsigned char *)p + REC_HEAD;
	f->len = len;
	return off + REC_HEAD + len;
}

static bool wanted(bool has_since, uint64_t since, uint64_t seq)
{
	return !has_since || seq > since;
}

/* Is there output a poll from since has not seen? Frames are kept in seq
 * order, so the last one tells. */
static bool has_news(const struct job *job, bool has_since, uint64_t since)
{
	if (job->out.len == 0)
		return false;
	return !has_since || job->last_seq > since;
}

/* Can a held poll be answered now? all: yes; job: when it is that job's
 * and there is news or an ending; neither: when its waitMs has passed. */
static bool waiter_ready(const struct waiter *w, const struct job *job,
			 bool all, int64_t now)
{
	if (all)
		return true;
	if (job == NULL)
		return now >= w->deadline;
	return w->job == job &&
	       (job->ended || has_news(job, w->has_since, w->since));
}

/*
 * The poll answer: the frames after since, then the ending once there is
 * one. An answer that would pass AGENT_JOBS_MAX_ANSWER stops early and
 * says running, so the caller asks again from the last seq it got.
 */
static int encode_poll(struct job *job, bool has_since, uint64_t since,
		       struct buf *out)
{
	struct proto_job_poll p;
	struct proto_frame f;
	size_t off = 0, size = 0, end = 0, n = 0;
	bool cut = false, first = true;
	int rc;

	while (off < job->out.len) {
		size_t next = rec_read(job, off, &f);

		if (wanted(has_since, since, f.seq)) {
			size += proto_frame_output_len(f.seq, f.len) + 1;
			if (size > AGENT_JOBS_MAX_ANSWER && n > 0) {
				cut = true;
				break;
			}
			n++;
		}
		off = next;
		end = off;
	}
	memset(&p, 0, sizeof(p));
	p.running = !job->ended || cut;
	rc = proto_job_poll_encode_head(p.running, out);
	for (off = 0; rc == 0 && off < end;) {
		off = rec_read(job, off, &f);
		if (!wanted(has_since, since, f.seq))
			continue;
		rc = proto_job_poll_encode_frame(&f, first, out);
		first = false;
	}
	if (!p.running) {
		p.has_exit = job->has_exit;
		p.exit_code = job->code;
		p.truncated = job->truncated;
		p.has_error = job->err_code != NULL;
		p.err_code = (char *)job->err_code;
		p.err_message = job->err_message;
	}
	if (rc == 0)
		rc = proto_job_poll_encode_tail(&p, out);
	/* The caller now holds the ending: the slot may be reclaimed. */
	if (rc == 0 && !p.running)
		job->delivered = true;
	return rc;
}

/* Answer the held polls of job that can be answered now (all of them when
 * all is set), moving their replies to *replies. */
static void release_waiters(struct agent_jobs *j, struct job *job, bool all,
			    int64_t now, struct reply **replies)
{
	struct waiter **pp = &j->waiters;

	while (*pp != NULL) {
		struct waiter *w = *pp;
		struct reply *r;

		if (!waiter_ready(w, job, all, now)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		r = xcalloc(1, sizeof(*r));
		buf_init(&r->body, 0);
		r->d = w->d;
		if (encode_poll(w->job, w->has_since, w->since, &r->body) < 0) {
			buf_cleanup(&r->body);
			r->body.len = 0;
		}
		r->next = *replies;
		*replies = r;
		free(w);
	}
}

/* Send the replies collected under the mutex; call without it. */
static void send_replies(struct reply *r)
{
	while (r != NULL) {
		struct reply *next = r->next;

		if (r->body.data == NULL)
			agent_deferred_error(r->d, 500,
					     PROTO_ERR_OPERATION_FAILED,
					     "Agent operation 'poll a job' "
					     "failed: out of memory");
		else
			agent_deferred_json(r->d, 200, &r->body);
		buf_cleanup(&r->body);
		free(r);
		r = next;
	}
}

/* Keep one output frame of a job (its thread). */
static int job_output(void *ctx, enum proto_frame_type stream, uint64_t seq,
		      const unsigned char *p, size_t n)
{
	struct job *job = ctx;
	struct agent_jobs *j = job->reg;
	struct reply *replies = NULL;
	size_t si = stream_index(stream);
	unsigned char head[REC_HEAD];
	uint32_t len = (uint32_t)n;
	size_t mark;

	memcpy(head, &seq, 8);
	memcpy(head + 8, &len, 4);
	head[12] = (unsigned char)si;
	pthread_mutex_lock(&j->lock);
	/* Tiny lines would make the bookkeeping outgrow the output; past
	 * max_frames they are dropped like output past the cap. */
	if (job->frames[si] >= job->max_frames) {
		job->over = true;
		goto out;
	}
	mark = job->out.len;
	if (buf_append(&job->out, head, REC_HEAD) < 0 ||
	    buf_append(&job->out, p, n) < 0) {
		if (job->out.data != NULL) {
			job->out.len = mark;
			job->out.data[mark] = '\0';
		}
		job->over = true;
		goto out;
	}
	job->frames[si]++;
	job->last_seq = seq;
	release_waiters(j, job, false, 0, &replies);
out:
	pthread_mutex_unlock(&j->lock);
	send_replies(replies);
	return 0;
}

/* Record how the job ended, unless it already has (a cancel that came
 * first is the ending that happened). */
static void job_end(struct job *job, bool has_exit, int32_t code,
		    bool truncated, const char *err_code, const char *message)
{
	struct agent_jobs *j = job->reg;
	struct reply *replies = NULL;

	pthread_mutex_lock(&j->lock);
	if (!job->ended) {
		job->ended = true;
		job->has_exit = has_exit;
		job->code = code;
		job->truncated = truncated || job->over;
		job->err_code = err_code;
		job->err_message = err_code ? xstrdup(message) : NULL;
		release_waiters(j, job, false, 0, &replies);
	}
	pthread_mutex_unlock(&j->lock);
	send_replies(replies);
}

static void *job_main(void *arg)
{
	struct job *job = arg;
	struct agent_jobs *j = job->reg;
	struct agent_run_sink sink = {job_output, job, job->cancel_fd};
	char msg[AGENT_SPAWN_MSG_MAX];
	struct agent_run_result res;
	struct agent_cmd c;
	bool cancelled;
	int rc;

	pthread_mutex_lock(&j->lock);
	cancelled = job->ended;
	pthread_mutex_unlock(&j->lock);
	if (cancelled)
		goto done;
	rc = agent_spawn(j->sp, &job->req, job->cwd_rel, &c, msg);
	if (rc < 0) {
		job_end(job, false, 0, false, "spawnFailed", msg);
		goto done;
	}
	pthread_mutex_lock(&j->lock);
	job->pid = c.pid;
	pthread_mutex_unlock(&j->lock);
	agent_run(&c, job->req.timeout_ms, j->cap, &sink, &res);
	/* From here the pid may be reaped and reused: nobody kills it. */
	pthread_mutex_lock(&j->lock);
	job->pid = 0;
	pthread_mutex_unlock(&j->lock);
	agent_cmd_reap(&c);
	if (res.end == AGENT_RUN_EXITED)
		job_end(job, true, res.code, res.truncated, NULL, NULL);
	else if (res.end == AGENT_RUN_STOPPED)
		job_end(job, false, 0, false, "cancelled",
			"the job was cancelled");
	else
		job_end(job, false, 0, false, res.err_code, res.message);
done:
	pthread_mutex_lock(&j->lock);
	job->done = true;
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

static void job_free(struct job *job)
{
	if (job == NULL)
		return;
	proto_exec_req_cleanup(&job->req);
	free(job->cwd_rel);
	buf_cleanup(&job->out);
	free(job->err_message);
	if (job->cancel_fd >= 0)
		close(job->cancel_fd);
	free(job);
}

/* ---- the registry ------------------------------------------------------- */

static struct job *find(struct agent_jobs *j, const char *id)
{
	size_t i;

	for (i = 0; i < PROTO_MAX_JOBS; i++)
		if (j->slots[i] != NULL && strcmp(j->slots[i]->id, id) == 0)
			return j->slots[i];
	return NULL;
}

/*
 * A free slot, evicting the oldest finished job whose ending a poll has
 * delivered when all are taken (protocol.md 3.7). -1 when none can go:
 * evicting a running job, or an ending nobody has read, would lose it.
 */
static int make_room(struct agent_jobs *j)
{
	int i, victim = -1;

	for (i = 0; i < PROTO_MAX_JOBS; i++)
		if (j->slots[i] == NULL)
			return i;
	for (i = 0; i < PROTO_MAX_JOBS; i++) {
		struct job *job = j->slots[i];

		if (!job->ended || !job->delivered || !job->done)
			continue;
		if (victim < 0 || job->ordinal < j->slots[victim]->ordinal)
			victim = i;
	}
	if (victim < 0)
		return -1;
	/* done: the thread has nothing left but to return. */
	pthread_join(j->slots[victim]->thread, NULL);
	job_free(j->slots[victim]);
	j->slots[victim] = NULL;
	return victim;
}

/* A random (version 4) UUID. */
static int new_job_id(char id[JOB_ID_SIZE])
{
	unsigned char b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -EIO;
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(id, JOB_ID_SIZE,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}

/* ---- the timer ----------------------------------------------------------- */

static void *timer_main(void *arg)
{
	struct agent_jobs *j = arg;

	pthread_mutex_lock(&j->lock);
	while (!j->stopping) {
		int64_t now = agent_now_ms(), next = INT64_MAX;
		struct reply *replies = NULL;
		struct agent_watch *w;
		struct waiter *wt;
		struct timespec ts;

		for (w = j->watches; w != NULL; w = w->next) {
			if (w->fired)
				continue;
			if (now >= w->deadline) {
				/* The exec is stuck writing to a slow client;
				 * its own loop reports the timeout. */
				kill(-w->pgid, SIGKILL);
				w->fired = true;
			} else if (w->deadline < next) {
				next = w->deadline;
			}
		}
		release_waiters(j, NULL, false, now, &replies);
		for (wt = j->waiters; wt != NULL; wt = wt->next)
			if (wt->deadline < next)
				next = wt->deadline;
		if (replies != NULL) {
			pthread_mutex_unlock(&j->lock);
			send_replies(replies);
			pthread_mutex_lock(&j->lock);
			continue;
		}
		if (next == INT64_MAX) {
			pthread_cond_wait(&j->wake, &j->lock);
			continue;
		}
		/* Far deadlines are looked at again within the hour, which
		 * keeps the absolute time in the range every clock takes. */
		if (next - now > TIMER_MAX_SLEEP_MS)
			next = now + TIMER_MAX_SLEEP_MS;
		ts.tv_sec = (time_t)(next / 1000);
		ts.tv_nsec = (long)(next % 1000) * 1000000;
		pthread_cond_timedwait(&j->wake, &j->lock, &ts);
	}
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

int agent_jobs_new(struct agent *a, struct agent_jobs **out)
{
	struct agent_jobs *j = xcalloc(1, sizeof(*j));
	pthread_condattr_t ca;
	int rc;

	j->a = a;
	j->cap = a->cfg.output_cap ? a->cfg.output_cap
				   : PROTO_DEFAULT_OUTPUT_CAP;
	pthread_mutex_init(&j->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&j->idle, NULL);
	rc = agent_spawner_new(a, &j->sp);
	if (rc < 0)
		goto fail;
	rc = -pthread_create(&j->timer, NULL, timer_main, j);
	if (rc < 0)
		goto fail;
	j->timer_started = true;
	*out = j;
	return 0;
fail:
	agent_jobs_free(j);
	return rc;
}

void agent_jobs_free(struct agent_jobs *j)
{
	struct reply *replies = NULL;
	struct agent_watch *w;
	struct timespec ts;
	bool drained;
	size_t i;

	if (j == NULL)
		return;
	pthread_mutex_lock(&j->lock);
	j->stopping = true;
	for (w = j->watches; w != NULL; w = w->next)
		kill(-w->pgid, SIGKILL);
	for (i = 0; i < PROTO_MAX_JOBS; i++) {
		struct job *job = j->slots[i];
		uint64_t one = 1;

		if (job == NULL)
			continue;
		if (job->pid > 0)
			kill(-job->pid, SIGKILL);
		if (write(job->cancel_fd, &one, sizeof(one)) < 0)
			log_debug("jobs: cannot signal job %s", job->id);
	}
	release_waiters(j, NULL, true, 0, &replies);
	pthread_cond_broadcast(&j->wake);
	pthread_mutex_unlock(&j->lock);
	send_replies(replies);

	for (i = 0; i < PROTO_MAX_JOBS; i++) {
		if (j->slots[i] == NULL)
			continue;
		pthread_join(j->slots[i]->thread, NULL);
		job_free(j->slots[i]);
		j->slots[i] = NULL;
	}
	if (j->timer_started)
		pthread_join(j->timer, NULL);

	/* Exec threads end once their command is dead and the stream is
	 * closed; a client that never reads can hold one, so the wait is
	 * bounded. */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += EXEC_DRAIN_MS / 1000;
	pthread_mutex_lock(&j->lock);
	while (j->execs > 0) {
		for (w = j->watches; w != NULL; w = w->next)
			kill(-w->pgid, SIGKILL);
		if (pthread_cond_timedwait(&j->idle, &j->lock, &ts) ==
		    ETIMEDOUT)
			break;
	}
	drained = j->execs == 0;
	pthread_mutex_unlock(&j->lock);
	if (!drained) {
		log_warn("jobs: %u exec streams still open at shutdown",
			 j->execs);
		return;
	}
	agent_spawner_free(j->sp);
	pthread_cond_destroy(&j->wake);
	pthread_cond_destroy(&j->idle);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

const struct agent_spawner *agent_jobs_spawner(const struct agent_jobs *j)
{
	return j->sp;
}

size_t agent_jobs_output_cap(const struct agent_jobs *j)
{
	return j->cap;
}

int agent_jobs_exec_begin(struct agent_jobs *j)
{
	int rc = 0;

	pthread_mutex_lock(&j->lock);
	if (j->stopping)
		rc = -ESHUTDOWN;
	else
		j->execs++;
	pthread_mutex_unlock(&j->lock);
	return rc;
}

void agent_jobs_exec_end(struct agent_jobs *j)
{
	pthread_mutex_lock(&j->lock);
	if (--j->execs == 0)
		pthread_cond_broadcast(&j->idle);
	pthread_mutex_unlock(&j->lock);
}

void agent_jobs_watch_add(struct agent_jobs *j, struct agent_watch *w)
{
	pthread_mutex_lock(&j->lock);
	w->fired = false;
	w->next = j->watches;
	j->watches = w;
	pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->lock);
}

void agent_jobs_watch_del(struct agent_jobs *j, struct agent_watch *w)
{
	struct agent_watch **pp;

	pthread_mutex_lock(&j->lock);
	for (pp = &j->watches; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	pthread_mutex_unlock(&j->lock);
}

/* ---- routes -------------------------------------------------------------- */

/* The job id of a poll or cancel that names none we could hold. */
static int not_found(struct agent_req *r, const char *id)
{
	return agent_reply_error(r, 404, PROTO_ERR_JOB_NOT_FOUND,
				 "No such job in the sandbox: %s", id);
}

int agent_route_jobs_start(struct agent_req *r)
{
	struct agent *a = agent_req_agent(r);
	struct agent_jobs *j = a->jobs;
	struct proto_exec_req req;
	struct job *job = NULL;
	char reason[AGENT_SPAWN_MSG_MAX];
	const char *invalid;
	struct buf b = BUF_INIT(0);
	char *rel = NULL, id[JOB_ID_SIZE];
	size_t len;
	const char *body = agent_req_body(r, &len);
	int rc, slot;

	rc = proto_exec_req_decode(body, len, &req);
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	/* The order of alien's agent: the directory, then the request. */
	rc = agent_spawn_cwd(j->sp, req.cwd, req.flags & PROTO_EXEC_CWD_NUL,
			     &rel, reason, sizeof(reason));
	if (rc == -EACCES) {
		rc = agent_reply_error(r, 400, PROTO_ERR_PATH_REFUSED,
				       "Path '%s' refused: %s", req.cwd,
				       reason);
		goto out;
	}
	if (rc < 0)
		goto out;
	invalid = proto_exec_req_validate(&req);
	if (invalid != NULL) {
		rc = agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
				       "Request invalid: %s", invalid);
		goto out;
	}

	job = xcalloc(1, sizeof(*job));
	job->reg = j;
	job->req = req;
	memset(&req, 0, sizeof(req));
	job->cwd_rel = rel;
	rel = NULL;
	job->max_frames = j->cap / 4 + 1024;
	buf_init(&job->out,
		 2 * (j->cap + job->max_frames * REC_HEAD) + REC_HEAD);
	job->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (job->cancel_fd < 0 || new_job_id(job->id) < 0) {
		rc = job->cancel_fd < 0 ? -errno : -EIO;
		goto out;
	}

	pthread_mutex_lock(&j->lock);
	slot = j->stopping ? -1 : make_room(j);
	if (slot < 0) {
		pthread_mutex_unlock(&j->lock);
		rc = agent_reply_error(r, 429, PROTO_ERR_JOB_LIMIT,
				       "Job limit reached: the sandbox holds "
				       "%d jobs that are running or whose "
				       "ending has not been polled",
				       PROTO_MAX_JOBS);
		goto out;
	}
	job->ordinal = j->ordinal++;
	rc = -pthread_create(&job->thread, NULL, job_main, job);
	if (rc < 0) {
		pthread_mutex_unlock(&j->lock);
		goto out;
	}
	j->slots[slot] = job;
	memcpy(id, job->id, sizeof(id));
	job = NULL;
	pthread_mutex_unlock(&j->lock);
	log_debug("jobs: started %s", id);
	rc = proto_job_id_encode(id, &b);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
out:
	job_free(job);
	proto_exec_req_cleanup(&req);
	free(rel);
	buf_cleanup(&b);
	return rc;
}

int agent_route_jobs_poll(struct agent_req *r)
{
	struct agent *a = agent_req_agent(r);
	struct agent_jobs *j = a->jobs;
	struct proto_job_poll_req req;
	struct buf b = BUF_INIT(0);
	struct waiter *w;
	struct job *job;
	size_t len;
	const char *body = agent_req_body(r, &len);
	int rc;

	rc = proto_job_poll_req_decode(body, len, &req);
	if (rc == -EFBIG)
		return not_found(r, "(an id longer than 64 bytes)");
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	if (a->cfg.strict_v1)
		req.wait_ms = 0;
	pthread_mutex_lock(&j->lock);
	job = find(j, req.job_id);
	if (job == NULL) {
		pthread_mutex_unlock(&j->lock);
		return not_found(r, req.job_id);
	}
	if (req.wait_ms == 0 || job->ended || j->stopping ||
	    has_news(job, req.has_since, req.since_seq)) {
		rc = encode_poll(job, req.has_since, req.since_seq, &b);
		pthread_mutex_unlock(&j->lock);
		if (rc == 0)
			rc = agent_reply_json(r, 200, &b);
		buf_cleanup(&b);
		return rc;
	}
	/* Held until output past since, the ending, or waitMs. */
	w = xcalloc(1, sizeof(*w));
	w->job = job;
	w->has_since = req.has_since;
	w->since = req.since_seq;
	w->deadline = agent_deadline(req.wait_ms > AGENT_JOBS_MAX_WAIT_MS
					     ? AGENT_JOBS_MAX_WAIT_MS
					     : req.wait_ms);
	w->d = agent_reply_defer(r);
	w->next = j->waiters;
	j->waiters = w;
	pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->lock);
	return 0;
}

int agent_route_jobs_cancel(struct agent_req *r)
{
	struct agent *a = agent_req_agent(r);
	struct agent_jobs *j = a->jobs;
	char id[PROTO_JOB_ID_MAX + 1];
	struct reply *replies = NULL;
	struct buf b = BUF_INIT(0);
	struct job *job;
	uint64_t one = 1;
	size_t len;
	const char *body = agent_req_body(r, &len);
	int rc;

	rc = proto_job_id_decode(body, len, id);
	if (rc == -EFBIG)
		return not_found(r, "(an id longer than 64 bytes)");
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	pthread_mutex_lock(&j->lock);
	job = find(j, id);
	if (job == NULL) {
		pthread_mutex_unlock(&j->lock);
		return not_found(r, id);
	}
	if (!job->ended) {
		job->ended = true;
		job->err_code = "cancelled";
		job->err_message = xstrdup("the job was cancelled");
		release_waiters(j, job, false, 0, &replies);
	}
	/* Now rather than when the job's thread wakes: the answer means the
	 * group is gone. pid is set only while the leader is unreaped. */
	if (job->pid > 0)
		kill(-job->pid, SIGKILL);
	if (write(job->cancel_fd, &one, sizeof(one)) < 0)
		log_debug("jobs: cannot signal job %s", job->id);
	pthread_mutex_unlock(&j->lock);
	send_replies(replies);
	rc = buf_append_str(&b, "{}");
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	return rc;
}
