/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs_poll: the pollers of exec and jobs/ (fs_jobs_run.h): one
 * detached thread per followed job collects its output with the agent's
 * job poll (a long-poll with the extension), appends it to the job's
 * store and wakes its readers; while the agent does not answer for longer
 * than the mount's timeout the job is stale; a job with no end past its
 * timeout is unknown. Unmounting stops them (fs_jobs_free).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/agent_client.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "fs/fs_i.h"
#include "fs/fs_jobs_i.h"
#include "fs/fs_jobs_run.h"

/* Longest long-poll asked of an agent with the extension. It is also how
 * long unmounting may wait for a poller, so it stays short: a quiet job
 * costs one request per period. */
#define LONGPOLL_MS 3000L
/* Poll period without the extension: from the minimum, doubling while
 * nothing new comes, up to the maximum. */
#define POLL_MIN_MS 50L
#define POLL_MAX_MS 1000L
/* Backoff between retries of a poll the transport called retryable. */
#define RETRY_MIN_MS 200L
#define RETRY_MAX_MS 5000L
/* A job is followed until its timeout plus this (the protocol's
 * TERMINAL_FRAME_GRACE); after that its outcome is unknown. */
#define DEADLINE_GRACE_MS 60000ULL
/* The most output one poll answer may carry (the extension's maxBytes):
 * the answer is held whole while its frames are decoded one by one, so
 * this bounds the mount's memory per followed job. */
#define POLL_MAX_BYTES (4UL * 1024 * 1024)
/* How long a poller waits before asking again for output it could not
 * keep (the spill directory is full). */
#define KEEP_RETRY_MS 1000L

/* How long the agent may stay silent before its jobs are stale. */
static long fs_jobs_silence_ms(const struct fs_jobs *js)
{
	long ms = transport_response_timeout_ms(js->fs->t);

	return ms > 0 ? ms : 60000;
}

/* ---- pollers ------------------------------------------------------------- */

struct poller_arg {
	struct fs_jobs *js;
	struct fs_job *job;
};

/* A poller's own state between polls. */
struct poller {
	struct fs_jobs *js;
	struct fs_job *j;
	long wait; /* long-poll asked of the agent */
	long interval; /* without long-poll */
	long retry; /* after a failure */
	long long deadline;
	bool keep_warned; /* the store's failure is logged */
};

static long long job_deadline_ms(const struct fs_job *j)
{
	uint64_t lim = j->timeout_ms;

	if (lim > (uint64_t)LLONG_MAX / 4)
		return LLONG_MAX;
	return j->started_ms + (long long)(lim + DEADLINE_GRACE_MS);
}

/* Sleep up to ms, or until a cancel asks for a poll now. False when the
 * poller must stop. */
static bool poller_sleep(struct fs_job *j, long ms)
{
	struct timespec ts;
	bool go;

	clock_deadline_in(&ts, ms);
	pthread_mutex_lock(&j->lock);
	while (!j->stop && !j->kick)
		if (pthread_cond_timedwait(&j->cond, &j->lock, &ts) ==
		    ETIMEDOUT)
			break;
	j->kick = false;
	go = !j->stop;
	pthread_mutex_unlock(&j->lock);
	return go;
}

static void poller_end(struct fs_job *j, enum fs_job_state st)
{
	pthread_mutex_lock(&j->lock);
	fs_job_end(j, st, 0, NULL, NULL);
	pthread_mutex_unlock(&j->lock);
}

/* The poller's callback for each frame of an answer. */
struct take_ctx {
	struct fs_job *j;
	bool fresh;
	int err; /* the store refused a frame */
};

static int take(void *arg, const struct proto_frame *f)
{
	struct take_ctx *c = arg;
	int rc;

	pthread_mutex_lock(&c->j->lock);
	rc = fs_job_take_frame(c->j, f);
	pthread_mutex_unlock(&c->j->lock);
	if (rc > 0)
		c->fresh = true;
	if (rc < 0)
		c->err = rc;
	return rc < 0 ? rc : 0;
}

/* The agent answered: the job is not stale; take the answer's end. */
static bool answered(struct poller *pl, const struct proto_job_poll *p)
{
	struct fs_job *j = pl->j;
	bool back, trunc, running;

	pthread_mutex_lock(&j->lock);
	back = j->stale;
	j->stale = false;
	j->last_ok_ms = clock_mono_ms();
	j->synced = true;
	if (p != NULL)
		(void)fs_job_take_end(j, p);
	running = j->state == FS_JOB_ST_RUNNING;
	trunc = j->truncated && !j->truncated_logged && !running;
	if (trunc)
		j->truncated_logged = true;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	if (back)
		log_info("sandbox %s: job %s: the agent answers again",
			 pl->js->sbx_id, j->name);
	if (trunc)
		log_warn("sandbox %s: job %s: the agent did not keep all of "
			 "its output (its output cap, or output it had dropped "
			 "before this mount asked); its status says "
			 "\"output truncated\"",
			 pl->js->sbx_id, j->name);
	return running;
}

/* After an answer of a running job that took took_ms: how long to wait
 * before the next poll. */
static long next_poll(struct poller *pl, bool fresh, long long took_ms)
{
	long nap;

	if (fresh) {
		pl->interval = POLL_MIN_MS;
		return pl->wait > 0 ? 0 : POLL_MIN_MS;
	}
	/* a long-poll that ran its course */
	if (pl->wait > 0 && took_ms >= pl->wait / 2)
		return 0;
	/* A strict v1 agent ignores the long-poll and answers at once:
	 * back off as without it. */
	nap = pl->interval;
	pl->interval =
		pl->interval * 2 > POLL_MAX_MS ? POLL_MAX_MS : pl->interval * 2;
	return nap;
}

/* A poll that may be tried again failed: the job is stale once the agent
 * has not answered for the mount's timeout. How long to wait before the
 * next poll. */
static long poll_failed(struct poller *pl, const struct sbx_error *err)
{
	struct fs_jobs *js = pl->js;
	struct fs_job *j = pl->j;
	bool stale_now = false;
	char text[1024];
	long nap;

	/* Readers must not wait on an agent that does not answer: past the
	 * mount's timeout the job is stale until it does. */
	pthread_mutex_lock(&j->lock);
	if (!j->stale &&
	    clock_mono_ms() - j->last_ok_ms >= fs_jobs_silence_ms(js)) {
		j->stale = true;
		stale_now = true;
		pthread_cond_broadcast(&j->cond);
	}
	pthread_mutex_unlock(&j->lock);
	sbx_error_describe(err, text, sizeof(text));
	if (stale_now)
		log_warn("sandbox %s: job %s: the agent has not answered for "
			 "%ld s; readers fail and the status is unknown until "
			 "it does (%s)",
			 js->sbx_id, j->name, fs_jobs_silence_ms(js) / 1000,
			 text);
	else
		log_debug("sandbox %s: job %s: poll failed, retrying: %s",
			  js->sbx_id, j->name, text);
	nap = pl->retry;
	pl->retry = pl->retry * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : pl->retry * 2;
	return nap;
}

/* One poll and what it means for the job. Returns how long to sleep before
 * the next one, or -1 when following the job is over. */
static long poll_once(struct poller *pl)
{
	struct fs_jobs *js = pl->js;
	struct fs_job *j = pl->j;
	struct proto_job_poll_req req;
	struct take_ctx ctx = {j, false, 0};
	struct proto_job_poll p;
	struct sbx_error err;
	bool running;
	long long t0;
	long nap;
	int rc;

	memset(&req, 0, sizeof(req));
	strlcpy_s(req.job_id, j->agent_id, sizeof(req.job_id));
	pthread_mutex_lock(&j->lock);
	running = j->state == FS_JOB_ST_RUNNING && !j->stop;
	req.has_since = j->has_seq;
	req.since_seq = j->last_seq;
	pthread_mutex_unlock(&j->lock);
	if (!running)
		return -1;
	req.wait_ms = (uint64_t)pl->wait;
	/* What the mount took, it acknowledges by asking from there: a
	 * flow-controlled job's agent may then drop it (doc/protocol-ext.md,
	 * "Jobs"). */
	req.max_bytes = j->ext ? POLL_MAX_BYTES : 0;
	memset(&p, 0, sizeof(p));
	sbx_error_clear(&err);
	t0 = clock_mono_ms();
	rc = ac_job_poll_each(js->fs->t, js->sbx_id, &req, take, &ctx, &p,
			      &err);
	if (ctx.err != 0) {
		/* The store could not keep a frame: the mount asks for it
		 * again from the last one it kept, so the agent keeps the
		 * rest (and a flow-controlled job waits). */
		(void)answered(pl, NULL);
		if (!pl->keep_warned)
			log_warn("sandbox %s: job %s: its output cannot be "
				 "kept in %s (%s): readers past what is kept "
				 "get the error, and the mount asks again",
				 js->sbx_id, j->name, js->spool_dir,
				 strerror(-ctx.err));
		pl->keep_warned = true;
		return KEEP_RETRY_MS;
	}
	if (rc == 0) {
		if (pl->keep_warned)
			log_info("sandbox %s: job %s: its output is kept again",
				 js->sbx_id, j->name);
		pl->keep_warned = false;
		running = answered(pl, &p);
		proto_job_poll_cleanup(&p);
		pl->retry = RETRY_MIN_MS;
		if (!running)
			return -1;
		nap = next_poll(pl, ctx.fresh, clock_mono_ms() - t0);
	} else if (fs_job_not_found(&err)) {
		/* The agent lost or evicted the job (a restart, say): what
		 * was received stays readable, the end is not known. */
		log_warn("sandbox %s: job %s: the agent no longer knows it; "
			 "its status is unknown",
			 js->sbx_id, j->name);
		poller_end(j, FS_JOB_ST_UNKNOWN);
		return -1;
	} else if (err.retryable && clock_mono_ms() < pl->deadline) {
		nap = poll_failed(pl, &err);
	} else {
		(void)fs_jobs_fail(js->fs, js->sbx_id, "jobs", j->name, &err);
		poller_end(j, FS_JOB_ST_UNKNOWN);
		return -1;
	}
	if (clock_mono_ms() >= pl->deadline) {
		log_warn("sandbox %s: job %s: no end reported within its "
			 "timeout; its status is unknown",
			 js->sbx_id, j->name);
		poller_end(j, FS_JOB_ST_UNKNOWN);
		return -1;
	}
	return nap;
}

static void *poller_main(void *arg)
{
	struct poller_arg *pa = arg;
	struct poller pl;
	long nap;

	memset(&pl, 0, sizeof(pl));
	pl.js = pa->js;
	pl.j = pa->job;
	pl.deadline = job_deadline_ms(pl.j);
	pl.interval = POLL_MIN_MS;
	pl.retry = RETRY_MIN_MS;
	free(pa);
	if (pl.j->ext) {
		/* The answer must come well inside the response deadline. */
		pl.wait = transport_response_timeout_ms(pl.js->fs->t) / 2;
		if (pl.wait > LONGPOLL_MS)
			pl.wait = LONGPOLL_MS;
		if (pl.wait < 0)
			pl.wait = 0;
	}
	for (;;) {
		nap = poll_once(&pl);
		if (nap < 0)
			break;
		if (nap > 0 && !poller_sleep(pl.j, nap))
			break;
	}
	fs_job_unref(pl.j);
	pthread_mutex_lock(&pl.js->lock);
	if (--pl.js->pollers == 0)
		pthread_cond_broadcast(&pl.js->idle);
	pthread_mutex_unlock(&pl.js->lock);
	return NULL;
}

void fs_jobs_poller_start(struct fs_jobs *js, struct fs_job *j)
{
	struct poller_arg *pa = xmalloc(sizeof(*pa));
	pthread_attr_t attr;
	pthread_t tid;
	int rc;

	pa->js = js;
	pa->job = j;
	fs_job_ref(j);
	pthread_mutex_lock(&js->lock);
	js->pollers++;
	pthread_mutex_unlock(&js->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&tid, &attr, poller_main, pa);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		return;
	log_error("sandbox %s: job %s: cannot follow it (%s); its status is "
		  "unknown",
		  js->sbx_id, j->name, strerror(rc));
	poller_end(j, FS_JOB_ST_UNKNOWN);
	fs_job_unref(j);
	free(pa);
	pthread_mutex_lock(&js->lock);
	if (--js->pollers == 0)
		pthread_cond_broadcast(&js->idle);
	pthread_mutex_unlock(&js->lock);
}

/*
 * Follow an adopted job (start its poller) and wait, within the mount's
 * timeout, until the agent has said how it is: until then an adopted job
 * that ended long ago would read as running. A job started here is
 * followed already.
 */
int fs_jobs_follow(struct fs_jobs *js, struct fs_job *j)
{
	long long until;
	bool start;
	int rc = 0;

	pthread_mutex_lock(&j->lock);
	start = !j->followed && !j->stop;
	if (start) {
		j->followed = true;
		j->last_ok_ms = clock_mono_ms();
	}
	pthread_mutex_unlock(&j->lock);
	if (start)
		fs_jobs_poller_start(js, j);
	until = clock_mono_ms() + fs_jobs_silence_ms(js);
	pthread_mutex_lock(&j->lock);
	while (!j->synced && j->state == FS_JOB_ST_RUNNING && !j->stale &&
	       !j->stop && clock_mono_ms() < until) {
		fs_job_wait(j, WAIT_SLICE_MS);
		if (sbfs_interrupted()) {
			rc = -EINTR;
			break;
		}
	}
	pthread_mutex_unlock(&j->lock);
	return rc;
}

void fs_jobs_free(struct fs_jobs *js)
{
	unsigned running = 0;
	bool listed = false;
	struct timespec ts;
	size_t i;

	if (js == NULL)
		return;
	pthread_mutex_lock(&js->lock);
	js->stopping = true;
	for (i = 0; i < js->n; i++) {
		struct fs_job *j = js->v[i];

		pthread_mutex_lock(&j->lock);
		if (j->state == FS_JOB_ST_RUNNING && j->followed &&
		    j->agent_id[0] != '\0') {
			running++;
			/* Flow control and adoption need the job extension,
			 * which lists jobs. */
			listed = listed || j->flow || j->adopted;
		}
		j->stop = true;
		pthread_cond_broadcast(&j->cond);
		pthread_mutex_unlock(&j->lock);
	}
	/* Unmounting does not stop a job: it belongs to the sandbox. */
	if (running > 0)
		log_notice("sandbox %s: %u job%s still running keep%s running "
			   "in the sandbox; %s",
			   js->sbx_id, running, running == 1 ? "" : "s",
			   running == 1 ? "s" : "",
			   !listed ? "this agent cannot list its jobs, so "
				     "a new mount will not show them"
			   : running == 1 ? "after a remount it is under jobs/ "
					    "again, for as long as the agent "
					    "keeps it"
					  : "after a remount they are under "
					    "jobs/ again, for as long as the "
					    "agent keeps them");
	/* A poller inside a request returns within the long-poll (or the
	 * transport's deadlines); it uses the transport until then. */
	while (js->pollers > 0) {
		clock_deadline_in(&ts, 10000);
		if (pthread_cond_timedwait(&js->idle, &js->lock, &ts) ==
		    ETIMEDOUT)
			log_info("sandbox %s: waiting for %u job poller(s)",
				 js->sbx_id, js->pollers);
	}
	pthread_mutex_unlock(&js->lock);
	fs_jobs_destroy(js);
}
