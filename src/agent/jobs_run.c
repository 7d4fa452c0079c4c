/* SPDX-License-Identifier: MIT */
/*
 * jobs_run: one job (jobs_i.h): its thread, which runs the command and
 * keeps its output and its ending, and the poll answers made from them.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <time.h>
#include <unistd.h>

#include "agent/jobs_i.h"
#include "common/clock.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/xalloc.h"

/* Output a job keeps in memory before its log moves to a spool file. */
#define JOB_MEM_MAX (256UL * 1024)
/* How often a flow-controlled job whose output cannot be kept (the spool
 * is full) tries again. */
#define SPILL_RETRY_MS 1000

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

void ajob_mark_ended(struct agent_jobs *j, struct job *job)
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
bool ajob_has_news(const struct job *job, bool has_since, uint64_t since)
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
	       (job->ended || ajob_has_news(job, w->has_since, w->since));
}

/*
 * A flow-controlled job's poll acknowledges every record up to since:
 * those may be dropped when the job needs room. Acknowledging wakes the
 * job's thread if it waits for room.
 */
void ajob_acknowledge(struct job *job, uint64_t since)
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
int ajob_encode_poll(struct agent_jobs *j, struct job *job, bool has_since,
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
void ajobs_release_waiters(struct agent_jobs *j, struct job *job, bool all,
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
		if (ajob_encode_poll(j, w->job, w->has_since, w->since, w->max,
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
void ajobs_send_replies(struct reply *r)
{
	while (r != NULL) {
		struct reply *next = r->next;

		if (r->body.data == NULL)
			agent_deferred_failed(r->d, "poll a job", ENOMEM);
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
			ajobs_release_waiters(j, job, false, 0, &replies);
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
		clock_deadline_in(&ts, until > clock_mono_ms()
					       ? (long)(until - clock_mono_ms())
					       : 0);
		pthread_cond_timedwait(&job->room, &j->lock, &ts);
	}
	ajobs_release_waiters(j, job, false, 0, &replies);
	if (j->kept > j->retention_bytes)
		pthread_cond_signal(&j->wake);
out:
	pthread_mutex_unlock(&j->lock);
	ajobs_send_replies(replies);
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
		ajob_mark_ended(j, job);
		job->has_exit = has_exit;
		job->code = code;
		job->truncated = truncated || job->over;
		job->err_code = err_code;
		job->err_message = err_code ? xstrdup(message) : NULL;
		ajobs_release_waiters(j, job, false, 0, &replies);
	}
	pthread_mutex_unlock(&j->lock);
	ajobs_send_replies(replies);
}

void *ajob_main(void *arg)
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

void ajob_free(struct job *job)
{
	if (job == NULL)
		return;
	proto_exec_req_cleanup(&job->req);
	free(job->cwd_rel);
	outlog_cleanup(&job->log);
	free(job->err_message);
	fdio_close(job->cancel_fd);
	pthread_cond_destroy(&job->room);
	free(job);
}

struct job *ajob_new(struct agent_jobs *j, struct proto_exec_req *req,
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
