/* SPDX-License-Identifier: MIT */
/*
 * jobs_routes: POST /v1/jobs/start, poll and cancel (doc/protocol-v1.md
 * 3.6) and GET /sandboxfs/v1/jobs (doc/protocol-ext.md, "Jobs"), over the
 * registry (jobs_i.h).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agent/jobs_i.h"
#include "agent/routes.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/xalloc.h"

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

	job = ajob_new(j, &req, &rel);
	job->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (job->cancel_fd < 0 || ids_uuid(job->id) < 0) {
		rc = job->cancel_fd < 0 ? -errno : -EIO;
		goto out;
	}

	pthread_mutex_lock(&j->lock);
	room = !j->stopping && ajobs_make_room(j);
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
	rc = -pthread_create(&job->thread, NULL, ajob_main, job);
	if (rc < 0) {
		pthread_mutex_unlock(&j->lock);
		goto out;
	}
	dlist_push_back(&j->jobs, &job->link);
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
	ajob_free(job);
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
	job = ajobs_find(j, req.job_id);
	if (job == NULL) {
		pthread_mutex_unlock(&j->lock);
		return not_found(r, req.job_id);
	}
	if (job->flow && req.has_since)
		ajob_acknowledge(job, req.since_seq);
	if (req.wait_ms == 0 || job->ended || j->stopping ||
	    ajob_has_news(job, req.has_since, req.since_seq)) {
		rc = ajob_encode_poll(j, job, req.has_since, req.since_seq, max,
				      &b);
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
	job = ajobs_find(j, id);
	if (job == NULL) {
		pthread_mutex_unlock(&j->lock);
		return not_found(r, id);
	}
	if (!job->ended) {
		ajob_mark_ended(j, job);
		job->err_code = "cancelled";
		job->err_message = xstrdup("the job was cancelled");
		ajobs_release_waiters(j, job, false, 0, &replies);
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
	ajobs_send_replies(replies);
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
	for (job = dlist_item(j->jobs.first, struct job, link);
	     rc == 0 && job != NULL;
	     job = dlist_item(job->link.next, struct job, link)) {
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
