/* SPDX-License-Identifier: MIT */
/*
 * jobs: POST /v1/jobs/start|poll|cancel, GET /sandboxfs/v1/jobs and the
 * registry behind them (doc/protocol-v1.md 3.6, doc/commands.md "Jobs",
 * doc/protocol-ext.md "Jobs"), plus the timer thread shared with exec.
 *
 * One mutex guards the registry, every job's output and outcome, the held
 * polls and the exec watches: a job's output arrives on its own thread,
 * polls on the HTTP workers, deadlines on the timer, and each of them has
 * to see one consistent state. Replies to held polls are built under the
 * mutex and sent after it is released, so no HTTP call runs under it.
 *
 * A job's output is a log of records (outlog.h), each the frame's seq,
 * its length, its stream, where it starts in that stream, and its bytes.
 * A job started with flowControl also has an acknowledged position: a
 * poll acknowledges every record up to its sinceSeq; the job's thread
 * drops acknowledged records, oldest first, only when it needs room, and
 * waits (not reading the command's pipes) while the records nobody has
 * acknowledged fill the window.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "agent/jobs.h"
#include "agent/outlog.h"
#include "agent/routes.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/xalloc.h"

/* How long agent_jobs_free waits for exec threads to finish. */
#define EXEC_DRAIN_MS 5000
/* A record's head: seq (8), length (4), stream (1), offset in it (8). */
#define REC_HEAD 21
/* The timer's longest sleep. */
#define TIMER_MAX_SLEEP_MS 3600000
/* A job id: a UUID in text, with its terminator. */
#define JOB_ID_SIZE 37
/* Output a job keeps in memory before its log moves to a spool file. */
#define JOB_MEM_MAX (256UL * 1024)
/* How often a flow-controlled job whose output cannot be kept (the spool
 * is full) tries again. */
#define SPILL_RETRY_MS 1000

struct job {
	struct job *next; /* the registry, oldest first */
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
	struct job *first, *last;
	size_t count; /* jobs in the registry */
	unsigned running; /* of them not ended */
	uint64_t kept; /* bytes every job's log holds */
	uint64_t ordinal;
	unsigned char *scratch; /* one record's bytes, for answers */
	struct waiter *waiters;
	struct agent_watch *watches;
	unsigned execs;
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mono_ts(int64_t ms, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000;
}

/* ---- records (under the mutex) --------------------------------------------- */

static size_t stream_index(enum proto_frame_type t)
{
	return t == PROTO_FRAME_STDERR ? 1 : 0;
}

struct rec {
	uint64_t seq;
	uint32_t len;
	size_t stream;
	uint64_t off;
};

/* The head of the record at pos. */
static int rec_head(const struct job *job, uint64_t pos, struct rec *r)
{
	unsigned char h[REC_HEAD];
	int rc = outlog_read(&job->log, pos, h, sizeof(h));

	if (rc < 0)
		return rc;
	memcpy(&r->seq, h, 8);
	memcpy(&r->len, h + 8, 4);
	r->stream = h[12] ? 1 : 0;
	memcpy(&r->off, h + 13, 8);
	return 0;
}

static void job_mark_ended(struct agent_jobs *j, struct job *job)
{
	job->ended = true;
	job->ended_ms = wall_ms();
	job->ended_mono = clock_mono_ms();
	j->running--;
}

static bool wanted(bool has_since, uint64_t since, uint64_t seq)
{
	return !has_since || seq > since;
}

/* Is there output a poll from since has not seen? Frames are kept in seq
 * order, so the last one tells. */
static bool has_news(const struct job *job, bool has_since, uint64_t since)
{
	if (!job->has_last)
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
 * A flow-controlled job's poll acknowledges every record up to since:
 * those may be dropped when the job needs room. Acknowledging wakes the
 * job's thread if it waits for room.
 */
static void acknowledge(struct job *job, uint64_t since)
{
	struct rec r;

	if (job->has_ack && since <= job->ack_seq)
		return;
	while (job->ack_pos < job->log.tail) {
		if (rec_head(job, job->ack_pos, &r) < 0 || r.seq > since)
			break;
		job->ack_pos += REC_HEAD + r.len;
	}
	job->has_ack = true;
	job->ack_seq = since;
	pthread_cond_signal(&job->room);
}

/*
 * The poll answer: the frames after since, then the ending once there is
 * one. An answer whose frames would pass max bytes stops early (after at
 * least one frame) and says running, so the caller asks again from the
 * last seq it got. Frames of a flow-controlled job carry their offset, and
 * its ending the length of each stream.
 */
static int encode_poll(struct agent_jobs *j, struct job *job, bool has_since,
		       uint64_t since, size_t max, struct buf *out)
{
	struct proto_job_poll p;
	struct buf head = BUF_INIT(0);
	uint64_t pos = job->log.head;
	size_t n = 0, flen;
	bool cut = false;
	struct rec r;
	int rc = 0, err = 0;
	char *at;

	/* A client that polls from what it acknowledged starts there. */
	if (job->flow && has_since && job->has_ack && since >= job->ack_seq)
		pos = job->ack_pos;
	while (pos < job->log.tail) {
		struct proto_frame f;
		size_t mark = out->len;

		rc = rec_head(job, pos, &r);
		if (rc < 0)
			break;
		if (!wanted(has_since, since, r.seq)) {
			pos += REC_HEAD + r.len;
			continue;
		}
		rc = outlog_read(&job->log, pos + REC_HEAD, j->scratch, r.len);
		if (rc < 0)
			break;
		memset(&f, 0, sizeof(f));
		f.type = r.stream ? PROTO_FRAME_STDERR : PROTO_FRAME_STDOUT;
		f.seq = r.seq;
		f.data = j->scratch;
		f.len = r.len;
		f.has_off = job->flow;
		f.off = r.off;
		rc = proto_job_poll_encode_frame(&f, n == 0, out);
		if (rc < 0)
			break;
		if (out->len > max && n > 0) {
			out->len = mark;
			out->data[mark] = '\0';
			cut = true;
			break;
		}
		n++;
		pos += REC_HEAD + r.len;
	}
	if (rc < 0)
		goto out;
	memset(&p, 0, sizeof(p));
	p.running = !job->ended || cut;
	if (!p.running) {
		p.has_exit = job->has_exit;
		p.exit_code = job->code;
		p.truncated = job->truncated;
		p.has_error = job->err_code != NULL;
		p.err_code = (char *)job->err_code;
		p.err_message = job->err_message;
		p.has_bytes = job->flow;
		p.stdout_bytes = job->bytes[0];
		p.stderr_bytes = job->bytes[1];
	}
	rc = proto_job_poll_encode_tail(&p, out);
	/* The frames went first: the head, whose running depends on them,
	 * goes in front now. */
	if (rc == 0)
		rc = proto_job_poll_encode_head(p.running, &head);
	if (rc < 0)
		goto out;
	flen = out->len;
	at = buf_reserve(out, head.len, &err);
	if (at == NULL) {
		rc = err;
		goto out;
	}
	memmove(out->data + head.len, out->data, flen);
	memcpy(out->data, head.data, head.len);
	buf_commit(out, head.len);
	/* The caller now holds the ending: the job may be reclaimed. */
	if (!p.running)
		job->delivered = true;
out:
	buf_cleanup(&head);
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
		if (encode_poll(j, w->job, w->has_since, w->since, w->max,
				&r->body) < 0) {
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

/* Append one record. */
static int keep_record(struct agent_jobs *j, struct job *job, size_t si,
		       uint64_t seq, const unsigned char *p, size_t n)
{
	unsigned char head[REC_HEAD];
	uint32_t len = (uint32_t)n;
	uint64_t before = outlog_used(&job->log);
	int rc;

	memcpy(head, &seq, 8);
	memcpy(head + 8, &len, 4);
	head[12] = (unsigned char)si;
	memcpy(head + 13, &job->bytes[si], 8);
	rc = outlog_append(&job->log, head, REC_HEAD, p, n);
	if (rc < 0) {
		if (!job->spill_warned)
			log_warn("jobs: job %s: its output cannot be kept in "
				 "%s: %s%s",
				 job->id, j->spool ? j->spool : "memory",
				 strerror(-rc),
				 job->flow ? "; the job waits until it can"
					   : "; output is dropped");
		job->spill_warned = true;
		return rc;
	}
	j->kept += outlog_used(&job->log) - before;
	job->bytes[si] += n;
	job->frames[si]++;
	job->has_last = true;
	job->last_seq = seq;
	return 0;
}

/* Drop a flow-controlled job's acknowledged records, oldest first, until
 * n more bytes fit. */
static void drop_acknowledged(struct agent_jobs *j, struct job *job, size_t n)
{
	struct rec r;

	while (outlog_used(&job->log) + n > job->log.cap &&
	       job->log.head < job->ack_pos) {
		if (rec_head(job, job->log.head, &r) < 0)
			break;
		outlog_drop(&job->log, job->log.head + REC_HEAD + r.len);
		j->kept -= REC_HEAD + r.len;
	}
}

/* Keep one output frame of a job (its thread). */
static int job_output(void *ctx, enum proto_frame_type stream, uint64_t seq,
		      const unsigned char *p, size_t n)
{
	struct job *job = ctx;
	struct agent_jobs *j = job->reg;
	struct reply *replies = NULL;
	size_t si = stream_index(stream), need = REC_HEAD + n;
	struct timespec ts;
	int rc = 0;

	pthread_mutex_lock(&j->lock);
	if (!job->flow) {
		/* Tiny lines would make the bookkeeping outgrow the
		 * output; past max_frames they are dropped like output
		 * past the cap. */
		if (job->frames[si] >= job->max_frames ||
		    keep_record(j, job, si, seq, p, n) < 0)
			job->over = true;
		else
			release_waiters(j, job, false, 0, &replies);
		goto out;
	}
	for (;;) {
		int64_t until = job->deadline;

		if (job->ended || j->stopping) {
			rc = -ECANCELED;
			goto out;
		}
		if (job->log.tail - job->ack_pos + need <= job->log.cap) {
			drop_acknowledged(j, job, need);
			if (keep_record(j, job, si, seq, p, n) == 0)
				break;
			if (until > clock_mono_ms() + SPILL_RETRY_MS)
				until = clock_mono_ms() + SPILL_RETRY_MS;
		}
		/* The window is full: the pipes wait with us, and the
		 * command blocks on its writes, as with a real pipe. */
		if (clock_mono_ms() >= job->deadline) {
			rc = -ETIMEDOUT;
			goto out;
		}
		mono_ts(until, &ts);
		pthread_cond_timedwait(&job->room, &j->lock, &ts);
	}
	release_waiters(j, job, false, 0, &replies);
	if (j->kept > j->retention_bytes)
		pthread_cond_signal(&j->wake);
out:
	pthread_mutex_unlock(&j->lock);
	send_replies(replies);
	return rc;
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
		job_mark_ended(j, job);
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
	struct agent_run_sink sink = {job_output, job, job->cancel_fd,
				      job->flow};
	char msg[AGENT_SPAWN_MSG_MAX];
	struct agent_run_result res;
	struct agent_cmd c;
	bool cancelled;
	int rc;

	/* The HTTP worker that made this thread had taken on the exec
	 * user's file rights (resolve.h); the spool is the agent's own. */
	if (j->a->cfg.drop_privileges) {
		setfsgid(getegid());
		setfsuid(geteuid());
	}
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
	job->deadline = agent_deadline(job->req.timeout_ms);
	pthread_mutex_unlock(&j->lock);
	/* A flow-controlled job keeps everything: no cap. */
	agent_run(&c, job->req.timeout_ms, job->flow ? SIZE_MAX : j->cap, &sink,
		  &res);
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
	/* The timer reclaims finished jobs past the retention bounds. */
	pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

static void job_free(struct job *job)
{
	if (job == NULL)
		return;
	proto_exec_req_cleanup(&job->req);
	free(job->cwd_rel);
	outlog_cleanup(&job->log);
	free(job->err_message);
	if (job->cancel_fd >= 0)
		close(job->cancel_fd);
	pthread_cond_destroy(&job->room);
	free(job);
}

/* ---- the registry ------------------------------------------------------- */

static struct job *find(struct agent_jobs *j, const char *id)
{
	struct job *job;

	for (job = j->first; job != NULL; job = job->next)
		if (strcmp(job->id, id) == 0)
			return job;
	return NULL;
}

/* Take a finished job out of the registry and free it. Its thread has
 * nothing left but to return (done). */
static void evict(struct agent_jobs *j, struct job *victim)
{
	struct job **pp, *prev = NULL;

	for (pp = &j->first; *pp != NULL; prev = *pp, pp = &(*pp)->next) {
		if (*pp != victim)
			continue;
		*pp = victim->next;
		if (j->last == victim)
			j->last = prev;
		break;
	}
	j->count--;
	j->kept -= outlog_used(&victim->log);
	pthread_join(victim->thread, NULL);
	log_debug("jobs: %s forgotten", victim->id);
	job_free(victim);
}

static bool reclaimable(const struct job *job)
{
	return job->ended && job->done;
}

/* The oldest finished job that may go, one whose ending a poll has
 * delivered first (only_delivered: no other). */
static struct job *oldest_finished(struct agent_jobs *j, bool only_delivered)
{
	struct job *job, *any = NULL;

	for (job = j->first; job != NULL; job = job->next) {
		if (!reclaimable(job))
			continue;
		if (job->delivered)
			return job;
		if (any == NULL)
			any = job;
	}
	return only_delivered ? NULL : any;
}

/*
 * The retention bounds (not with --strict-v1): finished jobs older than
 * the retention time go, then the oldest finished ones while there are
 * more than the count or all jobs keep more output than the bytes.
 * Returns when the next one expires (INT64_MAX: none).
 */
static int64_t sweep(struct agent_jobs *j, int64_t now)
{
	int64_t next = INT64_MAX;
	size_t finished = 0;
	struct job *job, *nx;

	if (j->strict)
		return next;
	for (job = j->first; job != NULL; job = nx) {
		nx = job->next;
		if (!reclaimable(job))
			continue;
		if (now - job->ended_mono >= j->retention_ms) {
			evict(j, job);
			continue;
		}
		finished++;
		if (job->ended_mono + j->retention_ms < next)
			next = job->ended_mono + j->retention_ms;
	}
	while (finished > j->retention_count || j->kept > j->retention_bytes) {
		job = oldest_finished(j, false);
		if (job == NULL)
			break;
		evict(j, job);
		finished--;
	}
	return next;
}

/*
 * Room for one more job, or false. --strict-v1: alien's rule, at most
 * PROTO_MAX_JOBS jobs, evicting the oldest finished job whose ending a
 * poll has delivered (evicting a running job, or an ending nobody has
 * read, would lose it). Otherwise only running jobs count.
 */
static bool make_room(struct agent_jobs *j)
{
	struct job *victim;

	if (!j->strict) {
		(void)sweep(j, clock_mono_ms());
		return j->running < j->max_running;
	}
	if (j->count < PROTO_MAX_JOBS)
		return true;
	victim = oldest_finished(j, true);
	if (victim == NULL)
		return false;
	evict(j, victim);
	return true;
}

/* ---- the timer ----------------------------------------------------------- */

static void *timer_main(void *arg)
{
	struct agent_jobs *j = arg;

	pthread_mutex_lock(&j->lock);
	while (!j->stopping) {
		int64_t now = clock_mono_ms(), next;
		struct reply *replies = NULL;
		struct agent_watch *w;
		struct waiter *wt;
		struct timespec ts;

		next = sweep(j, now);
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
		mono_ts(next, &ts);
		pthread_cond_timedwait(&j->wake, &j->lock, &ts);
	}
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

/*
 * The spool: a directory of the agent's own, mode 0700, made in
 * --spool-dir (else $TMPDIR, else /tmp) and removed at exit. Its files
 * are unlinked as they are made. It must not be beneath the session
 * root, where a command could reach it.
 */
static int make_spool(struct agent_jobs *j)
{
	const struct agent_config *cfg = &j->a->cfg;
	const char *base = cfg->spool_dir, *tmp = getenv("TMPDIR");
	char *real, *root, *dir;
	size_t rl;
	int rc = 0;

	if (base == NULL)
		base = tmp != NULL && *tmp == '/' ? tmp : "/tmp";
	real = realpath(base, NULL);
	root = realpath(cfg->root, NULL);
	if (real == NULL || root == NULL) {
		rc = -errno;
		log_error("jobs: the spool directory %s: %s", base,
			  strerror(errno));
		goto out;
	}
	rl = strlen(root);
	if (strncmp(real, root, rl) == 0 &&
	    (real[rl] == '/' || real[rl] == '\0' || rl == 1)) {
		log_error("jobs: the spool directory %s is beneath the session "
			  "root %s",
			  real, root);
		rc = -EINVAL;
		goto out;
	}
	dir = xasprintf("%s/sandbox-agent.XXXXXX", real);
	if (mkdtemp(dir) == NULL) {
		rc = -errno;
		log_error("jobs: cannot make a spool directory in %s: %s", real,
			  strerror(errno));
		free(dir);
		goto out;
	}
	j->spool = dir;
out:
	free(real);
	free(root);
	return rc;
}

int agent_jobs_new(struct agent *a, struct agent_jobs **out)
{
	const struct agent_config *cfg = &a->cfg;
	struct agent_jobs *j = xcalloc(1, sizeof(*j));
	int rc;

	j->a = a;
	j->strict = cfg->strict_v1;
	j->cap = cfg->output_cap ? cfg->output_cap : PROTO_DEFAULT_OUTPUT_CAP;
	j->window = cfg->job_window ? cfg->job_window : AGENT_JOBS_WINDOW;
	/* Room for the largest record, whatever was asked. */
	if (j->window < 2 * (REC_HEAD + PROTO_MAX_FRAME_BYTES))
		j->window = 2 * (REC_HEAD + PROTO_MAX_FRAME_BYTES);
	j->max_running = cfg->max_running_jobs ? cfg->max_running_jobs
					       : AGENT_JOBS_MAX_RUNNING;
	j->retention_ms =
		(int64_t)(cfg->job_retention_s ? cfg->job_retention_s
					       : AGENT_JOBS_RETENTION_S) *
		1000;
	j->retention_count = cfg->job_retention_count
				     ? cfg->job_retention_count
				     : AGENT_JOBS_RETENTION_COUNT;
	j->retention_bytes = cfg->job_retention_bytes
				     ? cfg->job_retention_bytes
				     : AGENT_JOBS_RETENTION_BYTES;
	j->scratch = xmalloc(PROTO_MAX_FRAME_BYTES);
	pthread_mutex_init(&j->lock, NULL);
	clock_cond_init(&j->wake);
	pthread_cond_init(&j->idle, NULL);
	rc = make_spool(j);
	if (rc < 0)
		goto fail;
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
	struct job *job, *next;
	struct timespec ts;
	bool drained;

	if (j == NULL)
		return;
	pthread_mutex_lock(&j->lock);
	j->stopping = true;
	for (w = j->watches; w != NULL; w = w->next)
		kill(-w->pgid, SIGKILL);
	for (job = j->first; job != NULL; job = job->next) {
		uint64_t one = 1;

		if (job->pid > 0)
			kill(-job->pid, SIGKILL);
		if (write(job->cancel_fd, &one, sizeof(one)) < 0)
			log_debug("jobs: cannot signal job %s", job->id);
		pthread_cond_signal(&job->room);
	}
	release_waiters(j, NULL, true, 0, &replies);
	pthread_cond_broadcast(&j->wake);
	pthread_mutex_unlock(&j->lock);
	send_replies(replies);

	for (job = j->first; job != NULL; job = next) {
		next = job->next;
		pthread_join(job->thread, NULL);
		job_free(job);
	}
	j->first = j->last = NULL;
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
	if (j->spool != NULL && rmdir(j->spool) < 0)
		log_warn("jobs: cannot remove the spool directory %s: %s",
			 j->spool, strerror(errno));
	if (!drained) {
		log_warn("jobs: %u exec streams still open at shutdown",
			 j->execs);
		return;
	}
	agent_spawner_free(j->sp);
	pthread_cond_destroy(&j->wake);
	pthread_cond_destroy(&j->idle);
	pthread_mutex_destroy(&j->lock);
	free(j->scratch);
	free(j->spool);
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

unsigned agent_jobs_max_running(const struct agent_jobs *j)
{
	return j->strict ? PROTO_MAX_JOBS : j->max_running;
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

static struct job *job_new(struct agent_jobs *j, struct proto_exec_req *req,
			   char **rel)
{
	struct job *job = xcalloc(1, sizeof(*job));
	uint64_t cap;

	job->reg = j;
	job->req = *req;
	memset(req, 0, sizeof(*req));
	job->cwd_rel = *rel;
	*rel = NULL;
	job->flow = job->req.flow && !j->strict;
	job->cancel_fd = -1;
	clock_cond_init(&job->room);
	job->max_frames = j->cap / 4 + 1024;
	/* Alien's jobs keep everything under the cap; a flow-controlled one
	 * keeps its window. */
	cap = job->flow ? j->window
			: 2 * ((uint64_t)j->cap +
			       (uint64_t)job->max_frames * REC_HEAD) +
				  REC_HEAD;
	outlog_init(&job->log, cap, JOB_MEM_MAX, j->spool);
	job->started_ms = wall_ms();
	job->deadline = INT64_MAX;
	return job;
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
	unsigned running;
	bool room;
	int rc;

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

	job = job_new(j, &req, &rel);
	job->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (job->cancel_fd < 0 || ids_uuid(job->id) < 0) {
		rc = job->cancel_fd < 0 ? -errno : -EIO;
		goto out;
	}

	pthread_mutex_lock(&j->lock);
	room = !j->stopping && make_room(j);
	running = j->running;
	if (!room) {
		pthread_mutex_unlock(&j->lock);
		if (j->strict)
			rc = agent_reply_error(
				r, 429, PROTO_ERR_JOB_LIMIT,
				"Job limit reached: the sandbox holds %d "
				"jobs that are running or whose ending has "
				"not been polled",
				PROTO_MAX_JOBS);
		else
			rc = agent_reply_error(
				r, 429, PROTO_ERR_JOB_LIMIT,
				"Job limit reached: the sandbox runs %u jobs, "
				"the most it runs at once "
				"(sandbox-agent --max-running-jobs %u)",
				running, j->max_running);
		goto out;
	}
	job->ordinal = j->ordinal++;
	rc = -pthread_create(&job->thread, NULL, job_main, job);
	if (rc < 0) {
		pthread_mutex_unlock(&j->lock);
		goto out;
	}
	if (j->last != NULL)
		j->last->next = job;
	else
		j->first = job;
	j->last = job;
	j->count++;
	j->running++;
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

/* The answer bound a poll asked for (maxBytes, the extension). */
static size_t answer_max(const struct agent_jobs *j, uint64_t asked)
{
	if (j->strict || asked == 0 || asked > AGENT_JOBS_MAX_ANSWER)
		return AGENT_JOBS_MAX_ANSWER;
	return asked < AGENT_JOBS_MIN_ANSWER ? AGENT_JOBS_MIN_ANSWER
					     : (size_t)asked;
}

int agent_route_jobs_poll(struct agent_req *r)
{
	struct agent *a = agent_req_agent(r);
	struct agent_jobs *j = a->jobs;
	struct proto_job_poll_req req;
	struct buf b = BUF_INIT(0);
	struct waiter *w;
	struct job *job;
	size_t len, max;
	const char *body = agent_req_body(r, &len);
	int rc;

	rc = proto_job_poll_req_decode(body, len, &req);
	if (rc == -EFBIG)
		return not_found(r, "(an id longer than 64 bytes)");
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	if (a->cfg.strict_v1)
		req.wait_ms = 0;
	max = answer_max(j, req.max_bytes);
	pthread_mutex_lock(&j->lock);
	job = find(j, req.job_id);
	if (job == NULL) {
		pthread_mutex_unlock(&j->lock);
		return not_found(r, req.job_id);
	}
	if (job->flow && req.has_since)
		acknowledge(job, req.since_seq);
	if (req.wait_ms == 0 || job->ended || j->stopping ||
	    has_news(job, req.has_since, req.since_seq)) {
		rc = encode_poll(j, job, req.has_since, req.since_seq, max, &b);
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
	w->max = max;
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
		job_mark_ended(j, job);
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
	/* A job that waits for room stops waiting. */
	pthread_cond_signal(&job->room);
	pthread_mutex_unlock(&j->lock);
	send_replies(replies);
	rc = buf_append_str(&b, "{}");
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	return rc;
}

/* A job as the listing shows it; strings borrowed from the job. */
static void job_info(const struct job *job, struct proto_job_info *ji)
{
	memset(ji, 0, sizeof(*ji));
	memcpy(ji->job_id, job->id, sizeof(job->id));
	ji->argv = job->req.argv;
	ji->argc = job->req.argc;
	ji->cwd = job->req.cwd;
	/* KEY=VALUE entries: the encoder writes the names alone. */
	ji->env = job->req.env;
	ji->envc = job->req.envc;
	ji->timeout_ms = job->req.timeout_ms;
	ji->started_ms = job->started_ms;
	ji->flow = job->flow;
	if (!job->ended) {
		ji->state = PROTO_JOB_RUNNING;
		return;
	}
	ji->ended_ms = job->ended_ms;
	if (job->has_exit) {
		ji->state = PROTO_JOB_EXITED;
		ji->exit_code = job->code;
	} else if (job->err_code != NULL &&
		   strcmp(job->err_code, "cancelled") == 0) {
		ji->state = PROTO_JOB_CANCELLED;
	} else {
		ji->state = PROTO_JOB_FAILED;
		ji->err_code = (char *)(job->err_code ? job->err_code : "");
		ji->err_message = job->err_message;
	}
}

int agent_route_jobs_list(struct agent_req *r)
{
	struct agent *a = agent_req_agent(r);
	struct agent_jobs *j = a->jobs;
	struct buf b = BUF_INIT(0);
	struct proto_job_info ji;
	bool complete = true, first = true;
	struct job *job;
	int rc;

	rc = proto_job_list_encode_head(&b);
	pthread_mutex_lock(&j->lock);
	for (job = j->first; rc == 0 && job != NULL; job = job->next) {
		size_t mark = b.len;

		job_info(job, &ji);
		rc = proto_job_list_encode_entry(&ji, first, &b);
		/* Leave room for the tail under the clients' bound. */
		if (rc == 0 && b.len + 64 > PROTO_JOB_LIST_MAX_BYTES) {
			b.len = mark;
			b.data[mark] = '\0';
			complete = false;
			break;
		}
		first = false;
	}
	pthread_mutex_unlock(&j->lock);
	if (rc == 0)
		rc = proto_job_list_encode_tail(complete, &b);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	return rc;
}
