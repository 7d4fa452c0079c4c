/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs: MOUNT/<sandbox>/exec and jobs/ (SEMANTICS.md,
 * SEMANTICS.md "Jobs"). What is written to exec through one open file is
 * one request, started as an agent job (or, for a native session, run
 * through the provider's native exec) when the writer reads the job id
 * back or the file is flushed, and recorded in the sandbox's job table.
 * jobs/ shows the table and, with the agent's job extension, every job the
 * agent keeps (a job found there is adopted on first look). One detached
 * poller thread per followed job collects its output with the agent's job
 * poll, appending it to the job's store and waking readers; while the
 * agent does not answer for longer than the mount's timeout, the job is
 * stale and blocked readers fail. The job files serve the store, the
 * status and the exit code, and ctl cancels.
 *
 * The records, stores and text forms are fs_jobs_store.c's; this file
 * only adds FUSE handles, blocking reads and the agent and provider calls.
 * It does not parse paths (fs.c does) or decide the transport (sandbox.c
 * did, in sbfs_enter).
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

/* A blocked read wakes this often to notice an interrupted request. */
#define WAIT_SLICE_MS 200
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
/* How long a cancel waits for the agent's final answer to show. */
#define CANCEL_WAIT_MS 2000L
/* The most output one poll answer may carry (the extension's maxBytes):
 * the answer is held whole while its frames are decoded one by one, so
 * this bounds the mount's memory per followed job. */
#define POLL_MAX_BYTES (4UL * 1024 * 1024)
/* How long a poller waits before asking again for output it could not
 * keep (the spill directory is full). */
#define KEEP_RETRY_MS 1000L
/* How long the agent's job listing is used before it is asked again. */
#define LISTING_MS 1000LL
#define DEFAULT_JOB_TIMEOUT_S 86400L
/* Largest native exec output kept per stream. */
#define NATIVE_OUTPUT_MAX PROTO_MAX_TRANSFER_BYTES

/* Wait on the job's condition variable (its lock held) for at most ms. */
static void job_wait(struct fs_job *j, long ms)
{
	struct timespec ts;

	clock_deadline_in(&ts, ms);
	pthread_cond_timedwait(&j->cond, &j->lock, &ts);
}

/* sbfs_fail's errno as a negative value, whichever sign it comes with. */
static int fail(struct sbfs *fs, const char *id, const char *op,
		const char *path, const struct sbx_error *err)
{
	int rc = sbfs_fail(fs, id, op, path, err);

	if (rc > 0)
		rc = -rc;
	return rc < 0 ? rc : -EIO;
}

static bool job_not_found(const struct sbx_error *e)
{
	return e->status == 404 &&
	       strstr(e->reason, PROTO_ERR_JOB_NOT_FOUND ":") != NULL;
}

static struct fs_jobs *jobs_of(struct sbx *sb)
{
	struct fs_jobs *js;

	pthread_mutex_lock(&sb->lock);
	if (sb->jobs == NULL) {
		js = fs_jobs_new(sb->fs->spool_dir, FS_JOBS_MAX,
				 FS_STORE_MEM_MAX);
		js->fs = sb->fs;
		strlcpy_s(js->sbx_id, sb->id, sizeof(js->sbx_id));
		sb->jobs = js;
	}
	js = sb->jobs;
	pthread_mutex_unlock(&sb->lock);
	return js;
}

static uint64_t default_timeout_ms(const struct sbfs *fs)
{
	long s = fs->o.job_timeout_s > 0 ? fs->o.job_timeout_s
					 : DEFAULT_JOB_TIMEOUT_S;

	return (uint64_t)s * 1000;
}

/* ---- the agent's job extension ------------------------------------------- */

static long long wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long the agent may stay silent before its jobs are stale. */
static long silence_ms(const struct fs_jobs *js)
{
	long ms = transport_response_timeout_ms(js->fs->t);

	return ms > 0 ? ms : 60000;
}

/*
 * Does the sandbox's agent speak the job extension (flow control, the
 * listing, the running-jobs limit)? From the health the mount holds for
 * the current connection, else one health request, whose answer is kept
 * for that connection. A stopped sandbox has no route, so asking never
 * resumes it; an agent that cannot be reached is taken as not speaking
 * it for now.
 */
static bool agent_jobs_ext(struct sbx *sb, struct fs_jobs *js)
{
	struct transport *t = sb->fs->t;
	unsigned gen = transport_generation(t, sb->id);
	struct proto_health h;
	struct sbx_error err;
	bool known = false, v = false;
	char text[1024];

	pthread_mutex_lock(&sb->lock);
	if (sb->kind != TRANSPORT_AGENT) {
		known = true;
	} else if (sb->health_known && sb->health_gen == gen) {
		known = true;
		v = sb->health.ext_jobs >= 1;
	}
	pthread_mutex_unlock(&sb->lock);
	if (known)
		return v;
	pthread_mutex_lock(&js->lock);
	known = js->ext_known && js->ext_gen == gen;
	v = js->ext_jobs;
	pthread_mutex_unlock(&js->lock);
	if (known)
		return v;
	sbx_error_clear(&err);
	if (ac_health(t, sb->id, &h, &err) < 0) {
		log_debug("sandbox %s: jobs: the agent's health: %s", sb->id,
			  sbx_error_describe(&err, text, sizeof(text)));
		return false;
	}
	v = h.ext_jobs >= 1;
	pthread_mutex_lock(&js->lock);
	js->ext_known = true;
	js->ext_gen = transport_generation(t, sb->id);
	js->ext_jobs = v;
	pthread_mutex_unlock(&js->lock);
	return v;
}

/* The agent's listing, at most LISTING_MS old, in js->listing. False when
 * the agent cannot list its jobs now (then only the table is shown). */
static bool listing_fresh(struct sbx *sb, struct fs_jobs *js)
{
	struct proto_job_list l;
	struct sbx_error err;
	char text[1024];
	bool fresh;

	pthread_mutex_lock(&js->lock);
	fresh = js->listing_ms != 0 &&
		clock_mono_ms() - js->listing_ms < LISTING_MS;
	pthread_mutex_unlock(&js->lock);
	if (fresh)
		return true;
	if (!agent_jobs_ext(sb, js))
		return false;
	memset(&l, 0, sizeof(l));
	sbx_error_clear(&err);
	if (ac_job_list(sb->fs->t, sb->id, &l, &err) < 0) {
		log_debug("sandbox %s: jobs: the agent's listing: %s", sb->id,
			  sbx_error_describe(&err, text, sizeof(text)));
		return false;
	}
	pthread_mutex_lock(&js->lock);
	proto_job_list_cleanup(&js->listing);
	js->listing = l;
	js->listing_ms = clock_mono_ms();
	pthread_mutex_unlock(&js->lock);
	return true;
}

/* A job of the agent's listing as this mount records it: not followed
 * yet, its state unknown until a poll says. */
static struct fs_job *adopted_job(struct fs_jobs *js,
				  const struct proto_job_info *ji)
{
	struct buf cj = BUF_INIT(0);
	struct timespec started;
	long long ago;
	struct fs_cmd c;
	struct fs_job *j;

	memset(&c, 0, sizeof(c));
	c.req.argv = ji->argv;
	c.req.argc = ji->argc;
	c.req.cwd = ji->cwd;
	c.req.env = ji->env;
	c.req.envc = ji->envc;
	c.req.timeout_ms = ji->timeout_ms;
	started.tv_sec = (time_t)(ji->started_ms / 1000);
	started.tv_nsec = (long)(ji->started_ms % 1000) * 1000000L;
	if (fs_cmd_json(&c, &started, &cj) < 0)
		buf_reset(&cj);
	j = fs_job_new(ji->job_id, ji->job_id, cj.data ? cj.data : "", cj.len,
		       ji->timeout_ms, js->spool_dir, js->mem_max);
	buf_cleanup(&cj);
	j->ext = true;
	j->flow = ji->flow;
	j->adopted = true;
	j->followed = false;
	j->synced = false;
	j->started = started;
	j->changed = started;
	/* Its deadline counts from when it started, not from now. */
	ago = wall_ms() - ji->started_ms;
	if (ago > 0 && ago < j->started_ms)
		j->started_ms -= ago;
	return j;
}

/*
 * The job named name: the table's, else one of the agent's listing,
 * adopted into the table. A reference for the caller, or NULL.
 */
static struct fs_job *lookup(struct sbx *sb, struct fs_jobs *js,
			     const char *name)
{
	struct fs_job *j = fs_jobs_find(js, name), *have;
	size_t i;

	if (j != NULL || strcmp(name, "latest") == 0 || !fs_job_name_ok(name))
		return j;
	if (!listing_fresh(sb, js))
		return NULL;
	pthread_mutex_lock(&js->lock);
	for (i = 0; i < js->listing.n; i++) {
		if (strcmp(js->listing.jobs[i].job_id, name) == 0) {
			j = adopted_job(js, &js->listing.jobs[i]);
			break;
		}
	}
	pthread_mutex_unlock(&js->lock);
	if (j == NULL)
		return NULL;
	have = fs_jobs_adopt(js, j);
	fs_job_unref(j);
	return have;
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
	bool running, stale_now = false;
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
		if (ctx.fresh) {
			pl->interval = POLL_MIN_MS;
			nap = pl->wait > 0 ? 0 : POLL_MIN_MS;
		} else if (pl->wait > 0 &&
			   clock_mono_ms() - t0 >= pl->wait / 2) {
			/* a long-poll that ran its course */
			nap = 0;
		} else {
			/* A strict v1 agent ignores the long-poll and
			 * answers at once: back off as without it. */
			nap = pl->interval;
			pl->interval = pl->interval * 2 > POLL_MAX_MS
					       ? POLL_MAX_MS
					       : pl->interval * 2;
		}
	} else if (job_not_found(&err)) {
		/* The agent lost or evicted the job (a restart, say): what
		 * was received stays readable, the end is not known. */
		log_warn("sandbox %s: job %s: the agent no longer knows it; "
			 "its status is unknown",
			 js->sbx_id, j->name);
		poller_end(j, FS_JOB_ST_UNKNOWN);
		return -1;
	} else if (err.retryable && clock_mono_ms() < pl->deadline) {
		char text[1024];

		/* Readers must not wait on an agent that does not answer:
		 * past the mount's timeout the job is stale until it does. */
		pthread_mutex_lock(&j->lock);
		if (!j->stale &&
		    clock_mono_ms() - j->last_ok_ms >= silence_ms(js)) {
			j->stale = true;
			stale_now = true;
			pthread_cond_broadcast(&j->cond);
		}
		pthread_mutex_unlock(&j->lock);
		sbx_error_describe(&err, text, sizeof(text));
		if (stale_now)
			log_warn("sandbox %s: job %s: the agent has not "
				 "answered for %ld s; readers fail and the "
				 "status is unknown until it does (%s)",
				 js->sbx_id, j->name, silence_ms(js) / 1000,
				 text);
		else
			log_debug("sandbox %s: job %s: poll failed, retrying: "
				  "%s",
				  js->sbx_id, j->name, text);
		nap = pl->retry;
		pl->retry = pl->retry * 2 > RETRY_MAX_MS ? RETRY_MAX_MS
							 : pl->retry * 2;
	} else {
		(void)fail(js->fs, js->sbx_id, "jobs", j->name, &err);
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

static void poller_start(struct fs_jobs *js, struct fs_job *j)
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
static int follow(struct fs_jobs *js, struct fs_job *j)
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
		poller_start(js, j);
	until = clock_mono_ms() + silence_ms(js);
	pthread_mutex_lock(&j->lock);
	while (!j->synced && j->state == FS_JOB_ST_RUNNING && !j->stale &&
	       !j->stop && clock_mono_ms() < until) {
		job_wait(j, WAIT_SLICE_MS);
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

/* ---- starting a command -------------------------------------------------- */

/* A job that exists only here (native, unknown), not yet in the table. */
static struct fs_job *local_job(struct fs_jobs *js, const struct buf *cj,
				uint64_t timeout_ms)
{
	return fs_job_new("", "", cj->data, cj->len, timeout_ms, js->spool_dir,
			  js->mem_max);
}

/* A command whose outcome cannot be known: recorded as such, never sent
 * again. */
static int record_unknown(struct sbx *sb, struct fs_jobs *js,
			  const struct fs_cmd *cmd, const struct buf *cj,
			  const struct sbx_error *err, struct fs_job **out)
{
	struct fs_job *j = local_job(js, cj, cmd->req.timeout_ms);

	fs_job_end(j, FS_JOB_ST_UNKNOWN, 0, NULL, NULL);
	(void)fs_jobs_add(js, j, "unknown");
	(void)fail(sb->fs, sb->id, "exec", "", err);
	*out = j;
	return -EIO;
}

/*
 * The agent answered and did not start the job. A refusal of the request
 * (4xx) is logged here, as a warning naming the sandbox (sbfs_fail would
 * keep EINVAL and ENOENT to debug); the running-jobs limit is EAGAIN.
 */
static int refused(struct sbx *sb, uint64_t max_running,
		   const struct sbx_error *err)
{
	char limit[64] = "";

	if (err->status == 429) {
		if (max_running > 0)
			snprintf(limit, sizeof(limit), " of %llu",
				 (unsigned long long)max_running);
		log_warn("sandbox %s: exec: refused: the sandbox already runs "
			 "its limit%s jobs; try again when one has ended (%s)",
			 sb->id, limit, err->reason);
		return -EAGAIN;
	}
	if (err->status >= 400 && err->status < 500) {
		log_warn("sandbox %s: exec: the agent refused the request: %s",
			 sb->id, err->reason);
		return sbx_error_errno(err);
	}
	return fail(sb->fs, sb->id, "exec", "", err);
}

static int exec_agent(struct sbx *sb, struct fs_jobs *js,
		      const struct fs_cmd *cmd, const struct buf *cj, bool ext,
		      uint64_t max_running, struct fs_job **out)
{
	char jid[PROTO_JOB_ID_MAX + 1];
	struct sbx_error err;
	struct fs_job *j;
	int rc;

	sbx_error_clear(&err);
	rc = ac_job_start(sb->fs->t, sb->id, &cmd->req, jid, &err);
	if (rc < 0 && err.code == SBX_OUTCOME_UNKNOWN)
		return record_unknown(sb, js, cmd, cj, &err, out);
	if (rc < 0)
		return refused(sb, max_running, &err);
	/* The agent's id names the directory when it is a safe name. */
	j = fs_job_new(fs_job_name_ok(jid) ? jid : "", jid, cj->data, cj->len,
		       cmd->req.timeout_ms, js->spool_dir, js->mem_max);
	j->ext = ext;
	j->flow = cmd->req.flow;
	(void)fs_jobs_add(js, j, "job");
	log_debug("sandbox %s: job %s started", sb->id, j->name);
	poller_start(js, j);
	*out = j;
	return 0;
}

/* A failure of a command that did start (an error frame's code, such as
 * timeoutExceeded), as opposed to a refusal or a broken transport. */
static bool command_failure(const struct sbx_error *e)
{
	return e->code == SBX_COMMAND_FAILED && e->failure[0] != '\0' &&
	       strcmp(e->failure, SBX_FAIL_AGENT_REFUSED) != 0 &&
	       strcmp(e->failure, SBX_FAIL_TRANSPORT_INVALID) != 0 &&
	       strcmp(e->failure, SBX_FAIL_GONE) != 0 &&
	       strcmp(e->failure, SBX_FAIL_INVALID_REQUEST) != 0;
}

static void store_all(const struct sbx *sb, struct fs_store *s,
		      const struct buf *b)
{
	int rc = b->len > 0 ? fs_store_append(s, b->data, b->len) : 0;

	if (rc < 0)
		log_warn("sandbox %s: exec: output past what the mount can "
			 "keep is dropped (%s)",
			 sb->id, strerror(-rc));
}

static int exec_native(struct sbx *sb, struct fs_jobs *js,
		       const struct fs_cmd *cmd, const struct buf *cj,
		       struct fs_job **out)
{
	struct provider *p = sb->fs->prov;
	struct provider_exec_result res;
	struct buf line = BUF_INIT(0);
	struct sbx_error err;
	struct fs_job *j;
	int rc;

	memset(&res, 0, sizeof(res));
	buf_init(&res.out, NATIVE_OUTPUT_MAX);
	buf_init(&res.err, NATIVE_OUTPUT_MAX);
	sbx_error_clear(&err);
	if (p->ops->native_exec == NULL) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	rc = fs_cmd_shell(cmd, &line);
	if (rc < 0)
		goto out;
	rc = p->ops->native_exec(p, sb->id, line.data, cmd->req.cwd, &res,
				 &err);
	if (rc < 0 && err.code == SBX_OUTCOME_UNKNOWN) {
		rc = record_unknown(sb, js, cmd, cj, &err, out);
		goto out;
	}
	if (rc < 0 && !command_failure(&err)) {
		rc = fail(sb->fs, sb->id, "exec", "", &err);
		goto out;
	}
	/* Filled and ended before anyone can see it. */
	j = local_job(js, cj, cmd->req.timeout_ms);
	store_all(sb, &j->out, &res.out);
	store_all(sb, &j->err, &res.err);
	if (rc < 0)
		fs_job_end(j, FS_JOB_ST_FAILED, 0, err.failure, err.reason);
	else if (res.has_exit)
		fs_job_end(j, FS_JOB_ST_EXITED, res.exit_code, NULL, NULL);
	else
		fs_job_end(j, FS_JOB_ST_UNKNOWN, 0, NULL, NULL);
	(void)fs_jobs_add(js, j, "native");
	*out = j;
	rc = 0;
out:
	provider_exec_result_cleanup(&res);
	buf_cleanup(&line);
	return rc;
}

/* ---- exec ---------------------------------------------------------------- */

/*
 * One open exec file: what was written through it since the last start
 * (one request, however many writes it took), and the id of the last job
 * started through it with how much of it was read.
 */
struct exec_handle {
	pthread_mutex_t lock;
	struct buf pending;
	bool overflow; /* more than FS_CMD_MAX was written: refused */
	char id[FS_JOB_NAME_MAX + 2];
	size_t id_len;
	size_t id_off;
};

static struct exec_handle *exec_handle(const struct fuse_file_info *fi)
{
	return fi != NULL ? (struct exec_handle *)(uintptr_t)fi->fh : NULL;
}

/* Start what is pending (the handle's lock held). Every refusal is
 * logged once, here or where the agent's answer is judged. */
static int exec_start(struct sbx *sb, struct exec_handle *h)
{
	struct fs_jobs *js = jobs_of(sb);
	struct buf cj = BUF_INIT(0);
	struct fs_job *j = NULL;
	enum transport_kind kind;
	uint64_t max_running;
	char why[256];
	struct timespec now;
	struct fs_cmd cmd;
	size_t len;
	char *text;
	bool ext, flow;
	int rc;

	if (h->overflow) {
		h->overflow = false;
		buf_reset(&h->pending);
		log_warn("sandbox %s: exec: the request is refused: it is "
			 "longer than %lu bytes",
			 sb->id, (unsigned long)FS_CMD_MAX);
		return -EFBIG;
	}
	text = buf_take(&h->pending, &len);
	why[0] = '\0';
	rc = fs_cmd_parse(text, len, default_timeout_ms(sb->fs), &cmd, why,
			  sizeof(why));
	free(text);
	if (rc < 0) {
		log_warn("sandbox %s: exec: the request is refused: %s", sb->id,
			 why[0] ? why : strerror(-rc));
		return rc;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	rc = fs_cmd_json(&cmd, &now, &cj);
	if (rc < 0)
		goto out;
	pthread_mutex_lock(&sb->lock);
	kind = sb->kind;
	ext = sb->ext;
	flow = sb->health_known && sb->health.ext_jobs >= 1;
	max_running = sb->health.ext_max_running;
	pthread_mutex_unlock(&sb->lock);
	/* With the job extension the agent keeps all of the output. */
	cmd.req.flow = flow;
	if (kind == TRANSPORT_NATIVE)
		rc = exec_native(sb, js, &cmd, &cj, &j);
	else
		rc = exec_agent(sb, js, &cmd, &cj, ext, max_running, &j);
	if (j != NULL) {
		h->id_len =
			(size_t)snprintf(h->id, sizeof(h->id), "%s\n", j->name);
		h->id_off = 0;
		fs_job_unref(j);
	}
out:
	fs_cmd_cleanup(&cmd);
	buf_cleanup(&cj);
	return rc;
}

int fs_exec_getattr(struct sbx *sb, struct stat *st)
{
	sbfs_synth_stat(sb->fs, st, false, sbfs_control_mode(sb->fs, true), 0);
	return 0;
}

int fs_exec_open(struct sbx *sb, struct fuse_file_info *fi)
{
	struct exec_handle *h = xcalloc(1, sizeof(*h));

	(void)sb;
	pthread_mutex_init(&h->lock, NULL);
	buf_init(&h->pending, FS_CMD_MAX);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* The id read back is not the file's (empty) content. */
	fi->direct_io = 1;
	return 0;
}

/* A write only gathers: a script written line by line is one request,
 * started at the read of its id or the flush (SEMANTICS.md, "Jobs"). */
int fs_exec_write(struct sbx *sb, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);

	(void)sb;
	(void)off;
	if (h == NULL)
		return -EBADF;
	if (size > INT_MAX)
		return -EFBIG;
	pthread_mutex_lock(&h->lock);
	/* Past the bound the request is refused when it would start; the
	 * rest of it is taken and thrown away until then. */
	if (h->overflow || buf_append(&h->pending, buf, size) < 0) {
		h->overflow = true;
		buf_reset(&h->pending);
	}
	pthread_mutex_unlock(&h->lock);
	return (int)size;
}

int fs_exec_read(struct sbx *sb, char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);
	size_t n;
	int rc = 0;

	/* A stream, Plan 9 clone style: the id is read once after each
	 * start, whatever the offset (the write moved it). */
	(void)off;
	if (h == NULL)
		return -EBADF;
	pthread_mutex_lock(&h->lock);
	if (h->pending.len > 0 || h->overflow)
		rc = exec_start(sb, h);
	if (rc == 0) {
		n = h->id_len - h->id_off;
		if (n > size)
			n = size;
		memcpy(buf, h->id + h->id_off, n);
		h->id_off += n;
		rc = (int)n;
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

/* Every close flushes: what is pending starts (a close with nothing
 * pending, as a shell's closing of extra descriptors, starts nothing). */
int fs_exec_flush(struct sbx *sb, struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);
	int rc = 0;

	if (h == NULL)
		return 0;
	pthread_mutex_lock(&h->lock);
	if (h->pending.len > 0 || h->overflow)
		rc = exec_start(sb, h);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int fs_exec_release(struct sbx *sb, struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);

	(void)sb;
	if (h == NULL)
		return 0;
	buf_cleanup(&h->pending);
	pthread_mutex_destroy(&h->lock);
	free(h);
	fi->fh = 0;
	return 0;
}

/* ---- jobs/ --------------------------------------------------------------- */

/* One open job file. */
struct job_handle {
	struct fs_job *job;
	enum fs_job_file f;
	pthread_mutex_t lock; /* guards the status snapshot */
	char text[FS_JOB_MSG_MAX + 128];
	size_t len;
};

static struct job_handle *job_handle(const struct fuse_file_info *fi)
{
	return fi != NULL ? (struct job_handle *)(uintptr_t)fi->fh : NULL;
}

static void set_time(struct stat *st, const struct timespec *ts)
{
	st->st_mtim = *ts;
	st->st_ctim = *ts;
}

/* Files whose contents depend on what the agent says of the job. */
static bool followed_file(enum fs_job_file f)
{
	return f != FS_JOB_DIR && f != FS_JOB_CMD;
}

int fs_jobs_getattr(struct sbx *sb, const char *job, enum fs_job_file f,
		    struct stat *st)
{
	struct fs_jobs *js = jobs_of(sb);
	char name[FS_JOB_NAME_MAX + 1], text[FS_JOB_MSG_MAX + 128];
	struct fs_job *j;
	int n, rc;

	if (job == NULL) {
		sbfs_synth_stat(sb->fs, st, true, 0555, 0);
		return 0;
	}
	if (strcmp(job, "latest") == 0 && f == FS_JOB_DIR) {
		if (!fs_jobs_latest(js, name, sizeof(name)))
			return -ENOENT;
		sbfs_synth_stat(sb->fs, st, false, 0777, (off_t)strlen(name));
		st->st_mode = S_IFLNK | 0777;
		return 0;
	}
	j = lookup(sb, js, job);
	if (j == NULL)
		return -ENOENT;
	if (followed_file(f) && f != FS_JOB_CTL) {
		rc = follow(js, j);
		if (rc < 0) {
			fs_job_unref(j);
			return rc;
		}
	}
	pthread_mutex_lock(&j->lock);
	switch (f) {
	case FS_JOB_DIR:
		sbfs_synth_stat(sb->fs, st, true, 0555, 0);
		set_time(st, &j->started);
		break;
	case FS_JOB_CMD:
		sbfs_synth_stat(sb->fs, st, false, 0444, (off_t)j->cmd_len);
		set_time(st, &j->started);
		break;
	case FS_JOB_STDOUT:
	case FS_JOB_STDERR:
		sbfs_synth_stat(sb->fs, st, false, 0444,
				(off_t)(f == FS_JOB_STDOUT ? j->out.size
							   : j->err.size));
		set_time(st, &j->changed);
		break;
	case FS_JOB_STATUS:
		sbfs_synth_stat(
			sb->fs, st, false, 0444,
			(off_t)fs_job_status_line(j, text, sizeof(text)));
		set_time(st, &j->changed);
		break;
	case FS_JOB_EXIT:
		n = fs_job_exit_text(j, text, sizeof(text));
		sbfs_synth_stat(sb->fs, st, false, 0444, n > 0 ? n : 0);
		set_time(st, &j->changed);
		break;
	case FS_JOB_CTL:
		sbfs_synth_stat(sb->fs, st, false,
				sbfs_control_mode(sb->fs, false), 0);
		set_time(st, &j->started);
		break;
	}
	pthread_mutex_unlock(&j->lock);
	fs_job_unref(j);
	return 0;
}

static const char *const job_files[] = {
	"cmd", "stdout", "stderr", "status", "exit", "ctl",
};

int fs_jobs_readdir(struct sbx *sb, const char *job, void *buf,
		    fuse_fill_dir_t filler)
{
	struct fs_jobs *js = jobs_of(sb);
	char latest[FS_JOB_NAME_MAX + 1];
	struct fs_job *j;
	char **names;
	size_t i, k, n;

	if (job != NULL) {
		j = lookup(sb, js, job);
		if (j == NULL)
			return -ENOENT;
		fs_job_unref(j);
	}
	if (filler(buf, ".", NULL, 0, 0) || filler(buf, "..", NULL, 0, 0))
		return 0;
	if (job != NULL) {
		for (i = 0; i < sizeof(job_files) / sizeof(job_files[0]); i++)
			if (filler(buf, job_files[i], NULL, 0, 0))
				break;
		return 0;
	}
	fs_jobs_names(js, &names, &n);
	for (i = 0; i < n; i++)
		if (filler(buf, names[i], NULL, 0, 0))
			goto out;
	/* The agent's jobs this mount has not looked at yet. */
	if (listing_fresh(sb, js)) {
		bool full = false;

		pthread_mutex_lock(&js->lock);
		for (k = 0; !full && k < js->listing.n; k++) {
			const char *id = js->listing.jobs[k].job_id;
			bool have = !fs_job_name_ok(id);

			for (i = 0; !have && i < n; i++)
				have = strcmp(names[i], id) == 0;
			if (!have)
				full = filler(buf, id, NULL, 0, 0) != 0;
		}
		pthread_mutex_unlock(&js->lock);
		if (full)
			goto out;
	}
	if (fs_jobs_latest(js, latest, sizeof(latest)))
		(void)filler(buf, "latest", NULL, 0, 0);
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return 0;
}

int fs_jobs_readlink(struct sbx *sb, char *buf, size_t size)
{
	char name[FS_JOB_NAME_MAX + 1];

	if (size == 0)
		return -EINVAL;
	if (!fs_jobs_latest(jobs_of(sb), name, sizeof(name)))
		return -ENOENT;
	strlcpy_s(buf, name, size);
	return 0;
}

int fs_jobs_open(struct sbx *sb, const char *job, enum fs_job_file f,
		 struct fuse_file_info *fi)
{
	struct fs_jobs *js = jobs_of(sb);
	struct job_handle *h;
	struct fs_job *j;
	int acc = fi->flags & O_ACCMODE, rc;

	if (job == NULL || f == FS_JOB_DIR)
		return -EISDIR;
	if (f == FS_JOB_CTL ? acc == O_RDONLY : acc != O_RDONLY)
		return -EACCES;
	j = lookup(sb, js, job);
	if (j == NULL)
		return -ENOENT;
	if (followed_file(f)) {
		rc = follow(js, j);
		if (rc < 0) {
			fs_job_unref(j);
			return rc;
		}
	}
	h = xcalloc(1, sizeof(*h));
	h->job = j;
	h->f = f;
	pthread_mutex_init(&h->lock, NULL);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* Everything but cmd changes while the job runs: no page cache,
	 * and reads past the current size reach us (to block). */
	if (f == FS_JOB_CMD)
		fi->keep_cache = 1;
	else
		fi->direct_io = 1;
	return 0;
}

static int serve(const char *text, size_t len, char *buf, size_t size,
		 off_t off)
{
	size_t n;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= len)
		return 0;
	n = len - (size_t)off;
	if (n > size)
		n = size;
	memcpy(buf, text + off, n);
	return (int)n;
}

/*
 * stdout or stderr: what is there at off, else wait while the job runs.
 * A reader at the end never waits on what cannot come: output the mount
 * could not keep is an error (ENOSPC, EDQUOT as they are, anything else
 * EIO), never the end of a shorter file, and so is an agent silent for
 * longer than the mount's timeout.
 */
static int read_stream(struct fs_job *j, bool err, char *buf, size_t size,
		       off_t off)
{
	struct fs_store *s = err ? &j->err : &j->out;
	size_t got = 0;
	int rc;

	if (off < 0)
		return -EINVAL;
	if (size > INT_MAX)
		size = INT_MAX;
	pthread_mutex_lock(&j->lock);
	while ((uint64_t)off >= s->size && j->state == FS_JOB_ST_RUNNING &&
	       !j->stop && !j->stale && j->keep_err == 0) {
		job_wait(j, WAIT_SLICE_MS);
		if (sbfs_interrupted()) {
			rc = -EINTR;
			goto out;
		}
	}
	if ((uint64_t)off >= s->size && j->keep_err != 0) {
		rc = j->keep_err == ENOSPC || j->keep_err == EDQUOT
			     ? -j->keep_err
			     : -EIO;
		goto out;
	}
	if ((uint64_t)off >= s->size && j->state == FS_JOB_ST_RUNNING &&
	    j->stale) {
		rc = -EIO;
		goto out;
	}
	rc = fs_store_read(s, buf, size, (uint64_t)off, &got);
	if (rc == 0)
		rc = (int)got;
out:
	pthread_mutex_unlock(&j->lock);
	return rc;
}

/* exit: wait for the end. */
static int read_exit(struct fs_job *j, char *buf, size_t size, off_t off)
{
	char text[32];
	int n;

	pthread_mutex_lock(&j->lock);
	while (j->state == FS_JOB_ST_RUNNING && !j->stop && !j->stale) {
		job_wait(j, WAIT_SLICE_MS);
		if (sbfs_interrupted()) {
			pthread_mutex_unlock(&j->lock);
			return -EINTR;
		}
	}
	n = fs_job_exit_text(j, text, sizeof(text));
	pthread_mutex_unlock(&j->lock);
	if (n == -EAGAIN)
		return -EIO; /* unmounting */
	if (n < 0)
		return n;
	return serve(text, (size_t)n, buf, size, off);
}

static int read_status(struct job_handle *h, char *buf, size_t size, off_t off)
{
	int rc;

	/* A read at 0 takes a fresh line; the rest of one read sequence
	 * comes from the same line. */
	pthread_mutex_lock(&h->lock);
	if (off == 0 || h->len == 0) {
		pthread_mutex_lock(&h->job->lock);
		h->len = fs_job_status_line(h->job, h->text, sizeof(h->text));
		pthread_mutex_unlock(&h->job->lock);
	}
	rc = serve(h->text, h->len, buf, size, off);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

/*
 * A job that ended made its changes to the files before its end reached
 * this mount: before the end is shown, the change events the agent had
 * by then are applied, so that what a reader does next (stat, cat of the
 * job's output file) sees them (doc/internals/cache.md).
 */
static void settle(struct sbx *sb, struct fs_job *j)
{
	bool first;

	pthread_mutex_lock(&j->lock);
	first = j->state != FS_JOB_ST_RUNNING && !j->settled;
	if (first)
		j->settled = true;
	pthread_mutex_unlock(&j->lock);
	if (first)
		(void)sbfs_events_sync(sb, SBFS_EVENTS_SETTLE_MS);
}

int fs_jobs_read(struct sbx *sb, const char *job, enum fs_job_file f, char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);
	int rc;

	(void)job;
	if (h == NULL)
		return -EBADF;
	switch (f) {
	case FS_JOB_CMD:
		return serve(h->job->cmd, h->job->cmd_len, buf, size, off);
	case FS_JOB_STDOUT:
		rc = read_stream(h->job, false, buf, size, off);
		break;
	case FS_JOB_STDERR:
		rc = read_stream(h->job, true, buf, size, off);
		break;
	case FS_JOB_STATUS:
		rc = read_status(h, buf, size, off);
		break;
	case FS_JOB_EXIT:
		rc = read_exit(h->job, buf, size, off);
		break;
	case FS_JOB_DIR:
		return -EISDIR;
	default:
		return -EBADF;
	}
	settle(sb, h->job);
	return rc;
}

static int job_cancel(struct sbx *sb, struct fs_job *j)
{
	struct sbx_error err;
	long long until;
	bool running;
	int rc;

	pthread_mutex_lock(&j->lock);
	running = j->state == FS_JOB_ST_RUNNING;
	pthread_mutex_unlock(&j->lock);
	/* Cancelling a job that has ended changes nothing. */
	if (!running || j->agent_id[0] == '\0')
		return 0;
	sbx_error_clear(&err);
	rc = ac_job_cancel(sb->fs->t, sb->id, j->agent_id, &err);
	if (rc < 0 && !job_not_found(&err))
		return fail(sb->fs, sb->id, "cancel", j->name, &err);
	/* The agent's final poll answer decides the status: have the
	 * poller ask now, and give it a moment so that a status read
	 * right after the cancel shows it. */
	until = clock_mono_ms() + CANCEL_WAIT_MS;
	pthread_mutex_lock(&j->lock);
	j->kick = true;
	pthread_cond_broadcast(&j->cond);
	while (j->state == FS_JOB_ST_RUNNING && !j->stop &&
	       clock_mono_ms() < until && !sbfs_interrupted())
		job_wait(j, WAIT_SLICE_MS);
	pthread_mutex_unlock(&j->lock);
	return 0;
}

int fs_jobs_write(struct sbx *sb, const char *job, enum fs_job_file f,
		  const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);
	size_t n = size;
	int rc;

	(void)job;
	(void)off;
	if (h == NULL || f != FS_JOB_CTL)
		return -EBADF;
	if (size > INT_MAX)
		return -EINVAL;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t' || buf[n - 1] == '\r'))
		n--;
	while (n > 0 && (*buf == ' ' || *buf == '\t')) {
		buf++;
		n--;
	}
	if (n != 6 || memcmp(buf, "cancel", 6) != 0)
		return -EINVAL;
	rc = job_cancel(sb, h->job);
	return rc < 0 ? rc : (int)size;
}

int fs_jobs_release(struct sbx *sb, const char *job, enum fs_job_file f,
		    struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);

	(void)sb;
	(void)job;
	(void)f;
	if (h == NULL)
		return 0;
	fs_job_unref(h->job);
	pthread_mutex_destroy(&h->lock);
	free(h);
	fi->fh = 0;
	return 0;
}
