/* SPDX-License-Identifier: MIT */
/*
 * exec: POST /v1/exec (doc/protocol-v1.md 3.6). The route decodes the request and
 * resolves its working directory on the HTTP worker, commits 200
 * application/x-ndjson, and hands the command to a thread of its own, which
 * spawns it and writes its frames to the stream: output as it comes, then
 * exactly one terminal frame. The worker never waits for the command.
 *
 * Backpressure is the stream's queue (PROTO_FRAME_CHANNEL_DEPTH frames):
 * while it is full the thread blocks and the pipes are not read. A client
 * that goes away (the stream's gone descriptor) kills the process group,
 * and the registry's timer kills it at the deadline even while the thread
 * is blocked on a client that stopped reading.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/jobs.h"
#include "agent/routes.h"
#include "agent/spawn.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/xalloc.h"

/* The timer's kill comes this long after the run's own deadline, so that
 * a command the loop is watching is always reported as timed out. */
#define WATCH_GRACE_MS 500

struct exec_run {
	struct agent_jobs *jobs;
	struct agent_stream *s;
	struct proto_exec_req req;
	char *cwd_rel;
	struct buf line; /* one encoded frame */
};

/* Write one frame; -EPIPE once the client is gone. */
static int send_frame(struct exec_run *x, const struct proto_frame *f)
{
	int rc;

	buf_reset(&x->line);
	rc = proto_frame_encode(f, &x->line);
	if (rc < 0)
		return rc;
	return agent_stream_write(x->s, x->line.data, x->line.len);
}

static int send_error(struct exec_run *x, const char *code, const char *message)
{
	struct proto_frame f = {.type = PROTO_FRAME_ERROR,
				.err_code = (char *)code,
				.err_message = (char *)message};

	return send_frame(x, &f);
}

static int exec_output(void *ctx, enum proto_frame_type stream, uint64_t seq,
		       const unsigned char *p, size_t n)
{
	struct proto_frame f = {.type = stream,
				.seq = seq,
				.data = (unsigned char *)p,
				.len = n};

	return send_frame(ctx, &f);
}

static void exec_free(struct exec_run *x)
{
	proto_exec_req_cleanup(&x->req);
	free(x->cwd_rel);
	buf_cleanup(&x->line);
	free(x);
}

static void *exec_main(void *arg)
{
	struct exec_run *x = arg;
	struct agent_jobs *jobs = x->jobs;
	struct agent_run_sink sink = {exec_output, x,
				      agent_stream_gone_fd(x->s), false};
	char msg[AGENT_SPAWN_MSG_MAX];
	struct agent_run_result res;
	struct agent_watch watch;
	struct proto_frame f;
	struct agent_cmd c;
	int rc;

	rc = agent_spawn(agent_jobs_spawner(jobs), &x->req, x->cwd_rel, &c,
			 msg);
	if (rc < 0) {
		send_error(x, "spawnFailed", msg);
		goto out;
	}
	memset(&watch, 0, sizeof(watch));
	watch.pgid = c.pid;
	watch.deadline = agent_deadline(x->req.timeout_ms);
	if (watch.deadline < INT64_MAX - WATCH_GRACE_MS)
		watch.deadline += WATCH_GRACE_MS;
	agent_jobs_watch_add(jobs, &watch);
	agent_run(&c, x->req.timeout_ms, agent_jobs_output_cap(jobs), &sink,
		  &res);
	/* Disarmed before the reap: the timer must never signal a group id
	 * the kernel may have handed to someone else. */
	agent_jobs_watch_del(jobs, &watch);
	agent_cmd_reap(&c);
	switch (res.end) {
	case AGENT_RUN_EXITED:
		memset(&f, 0, sizeof(f));
		f.type = PROTO_FRAME_EXIT;
		f.code = res.code;
		f.truncated = res.truncated;
		send_frame(x, &f);
		break;
	case AGENT_RUN_STOPPED:
		/* Nobody is left to tell. */
		break;
	default:
		send_error(x, res.err_code, res.message);
		break;
	}
out:
	agent_stream_finish(x->s);
	exec_free(x);
	agent_jobs_exec_end(jobs);
	return NULL;
}

int agent_route_exec(struct agent_req *r)
{
	struct agent *a = agent_req_agent(r);
	struct agent_jobs *jobs = a->jobs;
	char reason[AGENT_SPAWN_MSG_MAX];
	struct exec_run *x = NULL;
	const char *invalid;
	pthread_attr_t attr;
	pthread_t thread;
	size_t len;
	const char *body = agent_req_body(r, &len);
	int rc;

	x = xcalloc(1, sizeof(*x));
	x->jobs = jobs;
	buf_init(&x->line, 0);
	rc = proto_exec_req_decode(body, len, &x->req);
	if (rc < 0) {
		rc = agent_reply_bad_body(r, rc);
		goto out;
	}
	/* Before anything is committed: a refused directory is an error
	 * answer, not a stream. */
	rc = agent_spawn_cwd(agent_jobs_spawner(jobs), x->req.cwd,
			     x->req.flags & PROTO_EXEC_CWD_NUL, &x->cwd_rel,
			     reason, sizeof(reason));
	if (rc == -EACCES) {
		rc = agent_reply_error(r, 400, PROTO_ERR_PATH_REFUSED,
				       "Path '%s' refused: %s", x->req.cwd,
				       reason);
		goto out;
	}
	if (rc < 0)
		goto out;
	rc = agent_jobs_exec_begin(jobs);
	if (rc < 0) {
		rc = agent_reply_error(r, 503, PROTO_ERR_OPERATION_FAILED,
				       "Agent operation 'run a command' "
				       "failed: the agent is stopping");
		goto out;
	}
	rc = agent_reply_stream(r, 200, "application/x-ndjson",
				PROTO_FRAME_CHANNEL_DEPTH, &x->s);
	if (rc < 0) {
		agent_jobs_exec_end(jobs);
		goto out;
	}
	/* The checks alien's agent makes once the stream is committed: the
	 * failure is the stream's one frame. */
	invalid = proto_exec_req_validate(&x->req);
	if (invalid != NULL) {
		char *m = xasprintf(PROTO_ERR_REQUEST_INVALID
				    ": Request invalid: %s",
				    invalid);

		send_error(x, "requestInvalid", m);
		free(m);
		agent_stream_finish(x->s);
		agent_jobs_exec_end(jobs);
		goto out;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&thread, &attr, exec_main, x);
	pthread_attr_destroy(&attr);
	if (rc < 0) {
		char text[AGENT_SPAWN_MSG_MAX];

		agent_errno_text(-rc, text, sizeof(text));
		send_error(x, "spawnFailed", text);
		agent_stream_finish(x->s);
		agent_jobs_exec_end(jobs);
		rc = 0;
		goto out;
	}
	return 0;
out:
	exec_free(x);
	return rc;
}
