/* SPDX-License-Identifier: MIT */
/*
 * transport_seed: the seed's provider calls in C, shared by the seed's
 * scenarios (check_transport_seed.c, check_transport_seed_bodies.c; the
 * mapping is told at the top of the first). Every function is inline in
 * this header so that a file that renames the stub_provider calls before
 * including a scenario file (check_azure_seed*.c, over the Azure
 * provider) gets these with the renaming too.
 */
#ifndef SBFS_TEST_TRANSPORT_SEED_H
#define SBFS_TEST_TRANSPORT_SEED_H

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/xalloc.h"
#include "client/sbx_error.h"
#include "client/transport.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"
#include "tests/transport_helpers.h"

/* The seed's AGENT_RESPONSE_TIMEOUT under #[cfg(test)]. */
#define RESPONSE_MS 200L
#define MAX_FRAMES 16

/* ---- the seed's provider calls in C -------------------------------------- */

/*
 * mockall refuses a call it has no expectation for, so each test lists the
 * calls it expects and every other call is a never().
 */
static inline void expect_only(struct stub_provider *sp, unsigned allowed)
{
	unsigned c;

	for (c = 0; c < STUB_CALL_COUNT; c++)
		if (c != STUB_CALL_ROUTE_ALLOWED && !(allowed & (1u << c)))
			stub_provider_never(sp, (enum stub_call)c);
}

#define CALL(c) (1u << (c))
/* get_sandbox, also behind the seed's judged_sandbox. */
#define GET_SANDBOX (CALL(STUB_CALL_RECORD) | CALL(STUB_CALL_JUDGE))

/* The decoded answer of run_command: the seed's CommandOutput stream. */
struct output {
	struct proto_ndjson split;
	struct proto_frame frames[MAX_FRAMES];
	size_t n;
};

static inline void output_init(struct output *o)
{
	memset(o, 0, sizeof(*o));
	proto_ndjson_init(&o->split);
}

static inline void output_cleanup(struct output *o)
{
	size_t i;

	for (i = 0; i < o->n; i++)
		proto_frame_cleanup(&o->frames[i]);
	proto_ndjson_cleanup(&o->split);
	o->n = 0;
}

static inline int collect_frames(void *arg, const void *data, size_t len)
{
	struct output *o = arg;
	const char *line;
	size_t n;
	int rc;

	rc = proto_ndjson_feed(&o->split, data, len);
	if (rc != 0)
		return rc;
	while (proto_ndjson_next(&o->split, &line, &n) == 1) {
		if (o->n == MAX_FRAMES)
			return -EFBIG;
		rc = proto_frame_decode(line, n, &o->frames[o->n]);
		if (rc != 0)
			return rc;
		o->n++;
	}
	return 0;
}

static inline bool terminal(const struct proto_frame *f)
{
	return f->type == PROTO_FRAME_EXIT || f->type == PROTO_FRAME_ERROR;
}

/*
 * provider.run_command(id, {command, args, timeout 5 s}): decide the
 * session's transport (one record read), then POST /v1/exec with the
 * client's body and decode the NDJSON frames into out. A stream that ends
 * without its terminal frame is outcome-unknown, as the seed's stream
 * reports it.
 */
static inline int run_command(struct transport *t, const char *id,
			      const char *const *argv, size_t argc,
			      struct output *out, struct sbx_error *err)
{
	struct proto_exec_req ereq;
	struct transport_req req;
	struct transport_resp resp;
	struct buf body = BUF_INIT(PROTO_EXEC_MAX_BODY);
	enum transport_kind kind;
	char *args[8];
	size_t i;
	int rc;

	ck_assert_uint_lt(argc, sizeof(args) / sizeof(args[0]));
	rc = transport_session_kind(t, id, TRANSPORT_OP_EXEC, &kind, NULL, err);
	if (rc != 0)
		return rc;
	if (kind != TRANSPORT_AGENT) {
		/* The seed's native path (execute_shell_command) is a
		 * provider call no scenario here may make. */
		sbx_error_set(err, SBX_NOT_SUPPORTED, NULL,
			      "%s: a native session", TRANSPORT_OP_EXEC);
		return -EOPNOTSUPP;
	}
	for (i = 0; i < argc; i++)
		args[i] = xstrdup(argv[i]);
	args[argc] = NULL;
	memset(&ereq, 0, sizeof(ereq));
	ereq.argv = args;
	ereq.argc = argc;
	ereq.timeout_ms = 5000;
	rc = proto_exec_req_encode(&ereq, &body);
	for (i = 0; i < argc; i++)
		free(args[i]);
	ck_assert_int_eq(rc, 0);

	memset(&req, 0, sizeof(req));
	req.op = TRANSPORT_OP_EXEC;
	req.cls = TRANSPORT_COMMAND;
	req.method = "POST";
	req.path = "/v1/exec";
	req.content_type = "application/json";
	req.body = body.data;
	req.body_len = body.len;
	req.sink = collect_frames;
	req.sink_arg = out;
	transport_resp_init(&resp);
	rc = transport_send(t, id, &req, &resp, err);
	transport_resp_cleanup(&resp);
	buf_cleanup(&body);
	if (rc == 0 && (out->n == 0 || !terminal(&out->frames[out->n - 1]) ||
			proto_ndjson_partial(&out->split))) {
		sbx_error_set(err, SBX_OUTCOME_UNKNOWN, NULL,
			      "%s: the stream ended without its terminal frame",
			      TRANSPORT_OP_EXEC);
		rc = -EIO;
	}
	return rc;
}

static const char *const TRUE_ARGV[] = {"true"};

/*
 * run_command of TRUE_ARGV on TT_SESSION, err cleared first: its rc. A
 * success must have streamed the seed's Exit 0 and nothing else; the
 * frames are dropped.
 */
static inline int run_true(struct transport *t, struct sbx_error *err)
{
	struct output out;
	int rc;

	output_init(&out);
	sbx_error_clear(err);
	rc = run_command(t, TT_SESSION, TRUE_ARGV, 1, &out, err);
	if (rc == 0) {
		ck_assert_uint_eq(out.n, 1);
		ck_assert_int_eq(out.frames[0].type, PROTO_FRAME_EXIT);
		ck_assert_int_eq(out.frames[0].code, 0);
	}
	output_cleanup(&out);
	return rc;
}

/*
 * provider.start_job(id, ...): decide the session's transport; a native
 * session has no jobs route (OPERATION_NOT_SUPPORTED), an agent session
 * would POST /v1/jobs/start.
 */
static inline int start_job(struct transport *t, const char *id,
			    struct sbx_error *err)
{
	static const char body[] =
		"{\"command\":[\"true\"],\"timeoutMs\":5000,\"cwd\":null,"
		"\"env\":{}}";
	struct transport_req req;
	struct transport_resp resp;
	enum transport_kind kind;
	int rc;

	rc = transport_session_kind(t, id, TRANSPORT_OP_JOB_START, &kind, NULL,
				    err);
	if (rc != 0)
		return rc;
	if (kind != TRANSPORT_AGENT) {
		sbx_error_set(err, SBX_NOT_SUPPORTED, NULL,
			      "%s: sandbox '%s' has no jobs route",
			      TRANSPORT_OP_JOB_START, id);
		return -EOPNOTSUPP;
	}
	memset(&req, 0, sizeof(req));
	req.op = TRANSPORT_OP_JOB_START;
	req.method = "POST";
	req.path = "/v1/jobs/start";
	req.content_type = "application/json";
	req.body = body;
	req.body_len = sizeof(body) - 1;
	req.max_body = 4096;
	transport_resp_init(&resp);
	rc = transport_send(t, id, &req, &resp, err);
	transport_resp_cleanup(&resp);
	return rc;
}

/* provider.request(id, method, path) + provider.send(id, request, op);
 * resp and err are initialised here, and how long the exchange took goes
 * into *elapsed when elapsed is set. */
static inline int raw_send(struct transport *t, const char *method,
			   const char *path, const char *op,
			   struct transport_resp *resp, long long *elapsed,
			   struct sbx_error *err)
{
	struct transport_req req;

	tt_req_init(&req, method, path, op,
		    strcmp(op, TRANSPORT_OP_READ) == 0 ? TRANSPORT_SAFE
						       : TRANSPORT_COMMAND);
	return tt_send_req(t, &req, resp, elapsed, err);
}

static const char EXIT_FRAME[] = "{\"t\":\"exit\",\"code\":0}\n";

#endif
