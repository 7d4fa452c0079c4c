/* SPDX-License-Identifier: MIT */
/*
 * jobs: the job registry (jobs.h, doc/protocol-v1.md 3.6, doc/commands.md
 * "Jobs"): its bounds and evictions, the timer thread shared with exec,
 * the spool, and the exec watches. A job itself is jobs_run.c's, the
 * routes jobs_routes.c's; jobs_i.h is what they share.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/jobs_i.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

/* How long agent_jobs_free waits for exec threads to finish. */
#define EXEC_DRAIN_MS 5000
/* The timer's longest sleep. */
#define TIMER_MAX_SLEEP_MS 3600000

/* ---- the registry ------------------------------------------------------- */

struct job *ajobs_find(struct agent_jobs *j, const char *id)
{
	struct job *job;

	for (job = dlist_item(j->jobs.first, struct job, link); job != NULL;
	     job = dlist_item(job->link.next, struct job, link))
		if (strcmp(job->id, id) == 0)
			return job;
	return NULL;
}

/* Take a finished job out of the registry and free it. Its thread has
 * nothing left but to return (done). */
static void evict(struct agent_jobs *j, struct job *victim)
{
	dlist_remove(&j->jobs, &victim->link);
	j->count--;
	j->kept -= outlog_used(&victim->log);
	pthread_join(victim->thread, NULL);
	log_debug("jobs: %s forgotten", victim->id);
	ajob_free(victim);
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

	for (job = dlist_item(j->jobs.first, struct job, link); job != NULL;
	     job = dlist_item(job->link.next, struct job, link)) {
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
	for (job = dlist_item(j->jobs.first, struct job, link); job != NULL;
	     job = nx) {
		nx = dlist_item(job->link.next, struct job, link);
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
bool ajobs_make_room(struct agent_jobs *j)
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
		ajobs_release_waiters(j, NULL, false, now, &replies);
		for (wt = j->waiters; wt != NULL; wt = wt->next)
			if (wt->deadline < next)
				next = wt->deadline;
		if (replies != NULL) {
			pthread_mutex_unlock(&j->lock);
			ajobs_send_replies(replies);
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
		clock_deadline_in(&ts, next > now ? next - now : 0);
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
	clock_cond_init(&j->idle);
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
	for (job = dlist_item(j->jobs.first, struct job, link); job != NULL;
	     job = dlist_item(job->link.next, struct job, link)) {
		uint64_t one = 1;

		if (job->pid > 0)
			kill(-job->pid, SIGKILL);
		if (write(job->cancel_fd, &one, sizeof(one)) < 0)
			log_debug("jobs: cannot signal job %s", job->id);
		pthread_cond_signal(&job->room);
	}
	ajobs_release_waiters(j, NULL, true, 0, &replies);
	pthread_cond_broadcast(&j->wake);
	pthread_mutex_unlock(&j->lock);
	ajobs_send_replies(replies);

	for (job = dlist_item(j->jobs.first, struct job, link); job != NULL;
	     job = next) {
		next = dlist_item(job->link.next, struct job, link);
		pthread_join(job->thread, NULL);
		ajob_free(job);
	}
	memset(&j->jobs, 0, sizeof(j->jobs));
	if (j->timer_started)
		pthread_join(j->timer, NULL);

	/* Exec threads end once their command is dead and the stream is
	 * closed; a client that never reads can hold one, so the wait is
	 * bounded. */
	clock_deadline_in(&ts, EXEC_DRAIN_MS);
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
