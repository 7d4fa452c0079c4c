/* SPDX-License-Identifier: MIT */
/*
 * The seed's scenarios: every test of the `mod tests` of alien-bindings
 * 3.3.41's Azure agent transport (shared/seed/), ported one for one to the
 * transport core, under the seed's test names, over the same parameter
 * tables, with each of the seed's assertions and call counts as a C
 * assertion.
 *
 * The seed's axum routers and raw tokio listeners become stub_agent
 * handlers; its MockSandboxDataPlaneApi becomes stub_provider, where
 * times(n) is a call count and never() (and every call the mock has no
 * expectation for, which mockall refuses) is stub_provider_never. Its Rust
 * calls map as follows: run_command and start_job are a session-kind
 * decision (one record read) followed by one transport_send of the
 * matching agent route; get_or_create and resume are transport_resume;
 * request + send are one transport_send; connection_slot is
 * transport_test_set_connection / transport_test_cached_url;
 * AGENT_RESPONSE_TIMEOUT is the configured response deadline.
 *
 * Beyond the seed it only adds assertions that make a seed expectation
 * exact in C (marked "C addition" in the test's comment); the further
 * transport scenarios live in check_transport.c.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/xalloc.h"
#include "client/sbx_error.h"
#include "tests/check_suites.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"
#include "tests/transport_helpers.h"
#include "client/transport.h"

/* The seed's AGENT_RESPONSE_TIMEOUT under #[cfg(test)]. */
#define RESPONSE_MS 200L
#define MAX_FRAMES 16

/* ---- the seed's provider calls in C -------------------------------------- */

/*
 * mockall refuses a call it has no expectation for, so each test lists the
 * calls it expects and every other call is a never().
 */
static void expect_only(struct stub_provider *sp, unsigned allowed)
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

static void output_init(struct output *o)
{
	memset(o, 0, sizeof(*o));
	proto_ndjson_init(&o->split);
}

static void output_cleanup(struct output *o)
{
	size_t i;

	for (i = 0; i < o->n; i++)
		proto_frame_cleanup(&o->frames[i]);
	proto_ndjson_cleanup(&o->split);
	o->n = 0;
}

static int collect_frames(void *arg, const void *data, size_t len)
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

static bool terminal(const struct proto_frame *f)
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
static int run_command(struct transport *t, const char *id,
		       const char *const *argv, size_t argc, struct output *out,
		       struct sbx_error *err)
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
 * provider.start_job(id, ...): decide the session's transport; a native
 * session has no jobs route (OPERATION_NOT_SUPPORTED), an agent session
 * would POST /v1/jobs/start.
 */
static int start_job(struct transport *t, const char *id, struct sbx_error *err)
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

/* provider.request(id, method, path) + provider.send(id, request, op). */
static int raw_send(struct transport *t, const char *method, const char *path,
		    const char *op, struct transport_resp *resp,
		    struct sbx_error *err)
{
	struct transport_req req;

	memset(&req, 0, sizeof(req));
	req.op = op;
	req.cls = strcmp(op, TRANSPORT_OP_READ) == 0 ? TRANSPORT_SAFE
						     : TRANSPORT_COMMAND;
	req.method = method;
	req.path = path;
	req.max_body = 65536;
	return transport_send(t, TT_SESSION, &req, resp, err);
}

static const char EXIT_FRAME[] = "{\"t\":\"exit\",\"code\":0}\n";
struct reconnect_agent {
	pthread_mutex_t mu;
	bool refused;
	unsigned calls; /* activations; health reads it */
	unsigned bad_auth; /* activations without the boot's bearer */
	char bearer[64];
};

static enum stub_next reconnect_handler(struct stub_agent *s,
					const struct stub_req *req, int fd,
					void *arg)
{
	struct reconnect_agent *a = arg;
	const char *status;
	char body[256];
	bool refused;

	(void)s;
	if (tt_is(req, "POST", "/v1/activate")) {
		pthread_mutex_lock(&a->mu);
		if (strcmp(req->auth, a->bearer) != 0)
			a->bad_auth++;
		a->calls++;
		refused = a->refused;
		pthread_mutex_unlock(&a->mu);
		return tt_answered(
			stub_reply(fd, refused ? 401 : 204, NULL, NULL));
	}
	if (tt_is(req, "GET", "/v1/health")) {
		/* Health is public: an old bearer token still receives 200. */
		pthread_mutex_lock(&a->mu);
		status = a->calls == 0 ? PROTO_STATUS_AWAITING
				       : PROTO_STATUS_READY;
		pthread_mutex_unlock(&a->mu);
		snprintf(body, sizeof(body),
			 "{\"protocolVersion\":1,\"status\":\"%s\","
			 "\"imageCommand\":{\"status\":\"running\"}}",
			 status);
		return tt_answered(
			stub_reply(fd, 200, "application/json", body));
	}
	return tt_no_route(fd);
}

/*
 * Seed: for (cached_boot, refused, resume) in six rows, a Running sandbox
 * whose agent awaits activation is readied by get_or_create (resume =
 * false) or resume (true) within 5 s; a refused activation is
 * SANDBOX_COMMAND_FAILED, not retryable; activation happens exactly once
 * (calls == 1, also through a cached old-boot connection that health does
 * not reject); get_sandbox times(3), agent_port_url and read_file times(1),
 * execute_shell_command never; the activation carries the boot's bearer.
 * Both Rust entry points are transport_resume here.
 */
START_TEST(
	reconnect_activates_a_fresh_boot_and_does_not_retry_authorization_refusal)
{
	static const struct {
		bool cached_boot, refused, resume;
	} rows[] = {
		{false, false, false}, {false, true, false},
		{true, false, false},  {true, true, false},
		{true, false, true},   {true, true, true},
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct reconnect_agent a = {.mu = PTHREAD_MUTEX_INITIALIZER};
		struct tt_env e;
		struct sbx_error err;
		long long t0, elapsed;
		char id[64];
		int rc;

		a.refused = rows[i].refused;
		snprintf(a.bearer, sizeof(a.bearer), "Bearer %s", tt_cred(4));
		tt_env_start(&e, reconnect_handler, &a, RESPONSE_MS,
			     TT_ROUTED | TT_ROLLBACK);
		stub_provider_set_generation(e.sp, 4);
		expect_only(e.sp, GET_SANDBOX | CALL(STUB_CALL_ROUTE) |
					  CALL(STUB_CALL_CREDENTIAL));
		/* .with_agent(false): a rollback binding */
		if (rows[i].cached_boot)
			transport_test_set_connection(e.t, TT_SESSION,
						      stub_agent_url(e.s),
						      tt_cred(3));

		sbx_error_clear(&err);
		t0 = th_now_ms();
		rc = transport_resume(e.t, TT_SESSION, NULL, &err);
		elapsed = th_now_ms() - t0;
		ck_assert_msg(elapsed < 5000,
			      "row %zu: cached health must refresh and "
			      "activate a fresh boot (%lld ms)",
			      i, elapsed);
		if (rows[i].refused) {
			ck_assert_int_lt(rc, 0);
			ck_assert_str_eq(sbx_code_name(err.code),
					 "SANDBOX_COMMAND_FAILED");
			ck_assert(!err.retryable);
		} else {
			ck_assert_msg(rc == 0, "row %zu: %d %s", i, rc,
				      err.reason);
		}
		pthread_mutex_lock(&a.mu);
		ck_assert_uint_eq(a.calls, 1);
		ck_assert_uint_eq(a.bad_auth, 0);
		pthread_mutex_unlock(&a.mu);
		ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_RECORD),
				  3);
		ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE),
				  1);
		ck_assert_uint_eq(
			stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL), 1);
		stub_provider_last_id(e.sp, STUB_CALL_CREDENTIAL, id,
				      sizeof(id));
		ck_assert_str_eq(id, TT_SESSION);
		ck_assert_uint_eq(
			stub_provider_calls(e.sp, STUB_CALL_NATIVE_EXEC), 0);
		ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);

		tt_env_stop(&e);
	}
}
END_TEST

static enum stub_next forbid_activation(struct stub_agent *s,
					const struct stub_req *req, int fd,
					void *arg)
{
	(void)s;
	(void)arg;
	if (tt_is(req, "POST", "/v1/activate"))
		return tt_answered(stub_reply(fd, 403, NULL, NULL));
	return tt_no_route(fd);
}

static void failed_resume_row(int wake, int unknown)
{
	struct tt_env e;
	unsigned allowed = GET_SANDBOX;
	struct sbx_error err;
	char id[64];
	int rc;

	tt_env_start(&e, forbid_activation, NULL, RESPONSE_MS, TT_ROUTED);
	stub_provider_set_generation(e.sp, 4);
	stub_provider_set_label(e.sp, unknown ? STUB_LABEL_UNKNOWN
					      : STUB_LABEL_AGENT);
	stub_provider_set_stopped_reads(e.sp, wake ? 2 : 0);
	if (wake)
		allowed |= CALL(STUB_CALL_RESUME) | CALL(STUB_CALL_STOP);
	if (!unknown)
		allowed |= CALL(STUB_CALL_ROUTE) | CALL(STUB_CALL_CREDENTIAL);
	expect_only(e.sp, allowed);

	sbx_error_clear(&err);
	rc = transport_resume(e.t, TT_SESSION, NULL, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_COMMAND_FAILED");
	ck_assert(!err.retryable);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_RESUME),
			  (unsigned)wake);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_STOP),
			  (unsigned)wake);
	if (wake) {
		stub_provider_last_id(e.sp, STUB_CALL_STOP, id, sizeof(id));
		ck_assert_str_eq(id, TT_SESSION);
	}
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE),
			  (unsigned)!unknown);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL),
			  (unsigned)!unknown);
	ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);

	tt_env_stop(&e);
}

/*
 * Seed: for wake in [false, true] and unknown_transport in [false, true],
 * with the record Stopped for its first two reads when waking and an agent
 * that refuses activation (403): resume fails with SANDBOX_COMMAND_FAILED,
 * not retryable; resume_sandbox and stop_sandbox times(wake) (the stop for
 * "session"), delete_sandbox never (the C provider interface has no
 * delete), agent_port_url and read_file times(!unknown_transport).
 */
START_TEST(failed_resume_stops_only_the_session_it_woke)
{
	int wake, unknown;

	for (wake = 0; wake <= 1; wake++)
		for (unknown = 0; unknown <= 1; unknown++)
			failed_resume_row(wake, unknown);
}
END_TEST

struct exec_agent {
	pthread_mutex_t mu;
	unsigned execs;
	char auth[512];
	char *body;
	size_t body_len;
};

static enum stub_next exec_echo_handler(struct stub_agent *s,
					const struct stub_req *req, int fd,
					void *arg)
{
	static const char frames[] =
		"{\"t\":\"stdout\",\"seq\":0,\"data\":\"b2s=\"}\n"
		"{\"t\":\"exit\",\"code\":0,\"truncated\":false}\n";
	struct exec_agent *a = arg;

	(void)s;
	if (tt_is(req, "POST", "/v1/activate"))
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	if (tt_is(req, "POST", "/v1/exec")) {
		pthread_mutex_lock(&a->mu);
		a->execs++;
		snprintf(a->auth, sizeof(a->auth), "%s", req->auth);
		free(a->body);
		a->body = xstrndup(req->body, req->body_len);
		a->body_len = req->body_len;
		pthread_mutex_unlock(&a->mu);
		return tt_answered(stub_reply(fd, 200, TT_TEXT, frames));
	}
	return tt_no_route(fd);
}

/*
 * Seed: through a rollback binding (with_agent(false)), capabilities().jobs
 * is false but session_capabilities of the agent session has jobs; the
 * command ["echo", "a; $(false)"] crosses the agent port with the boot's
 * bearer and timeoutMs 5000 and streams Stdout "ok", Exit 0, then ends;
 * get_sandbox times(3), agent_port_url times(1) for ("group", "session",
 * AGENT_PORT), read_file times(1) for ("group", "session",
 * NATIVE_TOKEN_PATH), execute_shell_command never. The group, port and
 * token path are the provider's own business in C: the core only passes
 * the id.
 */
START_TEST(commands_cross_the_agent_port_without_native_exec)
{
	static const char *const argv[] = {"echo", "a; $(false)"};
	struct exec_agent a = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct proto_exec_req sent;
	struct transport_caps caps;
	struct sbx_error err;
	struct output out;
	char bearer[64];
	char id[64];
	int rc;

	tt_env_start(&e, exec_echo_handler, &a, RESPONSE_MS,
		     TT_ROUTED | TT_ROLLBACK);
	stub_provider_set_generation(e.sp, 7);
	expect_only(e.sp, GET_SANDBOX | CALL(STUB_CALL_ROUTE) |
				  CALL(STUB_CALL_CREDENTIAL));

	ck_assert_msg(!transport_default_caps(e.t).jobs,
		      "new sessions use the rollback binding");
	sbx_error_clear(&err);
	ck_assert_int_eq(transport_session_caps(e.t, TT_SESSION, &caps, &err),
			 0);
	ck_assert_msg(caps.jobs, "the existing agent session supports jobs");

	/* A rollback binding still uses the session's agent; it must never
	 * native-exec it. */
	output_init(&out);
	rc = run_command(e.t, TT_SESSION, argv, 2, &out, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_uint_eq(out.n, 2);
	ck_assert_int_eq(out.frames[0].type, PROTO_FRAME_STDOUT);
	ck_assert_uint_eq(out.frames[0].len, 2);
	ck_assert_mem_eq(out.frames[0].data, "ok", 2);
	ck_assert_int_eq(out.frames[1].type, PROTO_FRAME_EXIT);
	ck_assert_int_eq(out.frames[1].code, 0);
	ck_assert(!proto_ndjson_partial(&out.split));
	output_cleanup(&out);

	snprintf(bearer, sizeof(bearer), "Bearer %s", tt_cred(7));
	pthread_mutex_lock(&a.mu);
	ck_assert_uint_eq(a.execs, 1);
	ck_assert_str_eq(a.auth, bearer);
	ck_assert_int_eq(proto_exec_req_decode(a.body, a.body_len, &sent), 0);
	pthread_mutex_unlock(&a.mu);
	ck_assert_uint_eq(sent.argc, 2);
	ck_assert_str_eq(sent.argv[0], "echo");
	ck_assert_str_eq(sent.argv[1], "a; $(false)");
	ck_assert_uint_eq(sent.timeout_ms, 5000);
	proto_exec_req_cleanup(&sent);

	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_RECORD), 3);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 1);
	stub_provider_last_id(e.sp, STUB_CALL_ROUTE, id, sizeof(id));
	ck_assert_str_eq(id, TT_SESSION);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL), 1);
	stub_provider_last_id(e.sp, STUB_CALL_CREDENTIAL, id, sizeof(id));
	ck_assert_str_eq(id, TT_SESSION);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_NATIVE_EXEC), 0);
	ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);

	tt_env_stop(&e);
	free(a.body);
}
END_TEST

struct boot {
	pthread_mutex_t mu;
	unsigned generation;
	unsigned activated; /* generation + 1 once that boot is activated */
	unsigned executions;
	unsigned activations;
	unsigned refusal;
	unsigned bad_auth; /* activations without the boot's bearer */
};

static enum stub_next boot_handler(struct stub_agent *s,
				   const struct stub_req *req, int fd,
				   void *arg)
{
	struct boot *b = arg;
	char bearer[64];
	int rc;

	(void)s;
	pthread_mutex_lock(&b->mu);
	snprintf(bearer, sizeof(bearer), "Bearer %s", tt_cred(b->generation));
	if (tt_is(req, "POST", "/v1/activate")) {
		if (strcmp(req->auth, bearer) != 0)
			b->bad_auth++;
		b->activated = b->generation + 1;
		b->activations++;
		pthread_mutex_unlock(&b->mu);
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	}
	if (tt_is(req, "POST", "/v1/exec")) {
		if (strcmp(req->auth, bearer) != 0 || b->refusal == 1) {
			pthread_mutex_unlock(&b->mu);
			return tt_answered(
				stub_reply(fd, 401, TT_TEXT, "refused"));
		}
		if (b->activated != b->generation + 1 || b->refusal == 2) {
			pthread_mutex_unlock(&b->mu);
			return tt_answered(
				stub_reply(fd, 503, TT_TEXT, "not activated"));
		}
		b->executions++;
		pthread_mutex_unlock(&b->mu);
		rc = stub_reply(fd, 200, TT_TEXT, EXIT_FRAME);
		return tt_answered(rc);
	}
	pthread_mutex_unlock(&b->mu);
	return tt_no_route(fd);
}

static void boot_set(struct boot *b, unsigned generation, unsigned refusal)
{
	pthread_mutex_lock(&b->mu);
	b->generation = generation;
	b->refusal = refusal;
	pthread_mutex_unlock(&b->mu);
}

/*
 * Seed: commands on generations 0, 0, 1 each stream Exit 0 and end; only
 * two distinct boots activate (activations == 2, executions == 3, each
 * activation with its boot's bearer); with an unchanged credential still
 * refused (401) the command is SANDBOX_COMMAND_FAILED, not retryable; a 5xx
 * ("not activated") is SANDBOX_OUTCOME_UNKNOWN and is not replayed
 * (activations == 2, executions == 3 still); get_sandbox times(7) (five
 * commands keep their policy reads), agent_port_url and read_file
 * times(3), execute_shell_command never.
 */
START_TEST(
	a_cached_connection_activates_new_boots_and_only_replays_a_changed_credential)
{
	static const unsigned generations[] = {0, 0, 1};
	struct boot b = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct sbx_error err;
	struct output out;
	size_t i;
	int rc;

	tt_env_start(&e, boot_handler, &b, RESPONSE_MS,
		     TT_ROUTED | TT_ROLLBACK);
	expect_only(e.sp, GET_SANDBOX | CALL(STUB_CALL_ROUTE) |
				  CALL(STUB_CALL_CREDENTIAL));

	for (i = 0; i < 3; i++) {
		boot_set(&b, generations[i], 0);
		stub_provider_set_generation(e.sp, generations[i]);
		output_init(&out);
		sbx_error_clear(&err);
		rc = run_command(e.t, TT_SESSION, TRUE_ARGV, 1, &out, &err);
		ck_assert_msg(rc == 0, "command %zu: %d %s", i, rc, err.reason);
		ck_assert_uint_eq(out.n, 1);
		ck_assert_int_eq(out.frames[0].type, PROTO_FRAME_EXIT);
		ck_assert_int_eq(out.frames[0].code, 0);
		output_cleanup(&out);
	}
	pthread_mutex_lock(&b.mu);
	ck_assert_uint_eq(b.activations, 2);
	ck_assert_uint_eq(b.executions, 3);
	pthread_mutex_unlock(&b.mu);

	/* The unchanged credential remains refused. */
	boot_set(&b, 1, 1);
	output_init(&out);
	sbx_error_clear(&err);
	rc = run_command(e.t, TT_SESSION, TRUE_ARGV, 1, &out, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_COMMAND_FAILED");
	ck_assert(!err.retryable);
	output_cleanup(&out);

	/* A 5xx never replays a command. */
	boot_set(&b, 1, 2);
	output_init(&out);
	sbx_error_clear(&err);
	rc = run_command(e.t, TT_SESSION, TRUE_ARGV, 1, &out, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_OUTCOME_UNKNOWN");
	output_cleanup(&out);
	pthread_mutex_lock(&b.mu);
	ck_assert_uint_eq(b.activations, 2);
	ck_assert_uint_eq(b.executions, 3);
	ck_assert_uint_eq(b.bad_auth, 0);
	pthread_mutex_unlock(&b.mu);

	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_NATIVE_EXEC), 0);
	tt_assert_calls(e.sp, 7, 3, 3);

	tt_env_stop(&e);
}
END_TEST

/*
 * Seed: through an upgraded binding (with_agent(true)) capabilities().jobs
 * is true, but a record without the transport label (a native session)
 * has neither jobs nor supervisor_isolation, and start_job on it is
 * OPERATION_NOT_SUPPORTED; get_sandbox times(2), execute_shell_command
 * and agent_port_url never.
 */
START_TEST(a_native_session_does_not_advertise_jobs_through_an_upgraded_binding)
{
	struct tt_env e;
	struct transport_caps existing;
	struct sbx_error err;
	int rc;

	tt_env_start(&e, NULL, NULL, RESPONSE_MS, 0);
	stub_provider_set_label(e.sp, STUB_LABEL_NONE);
	expect_only(e.sp, GET_SANDBOX);

	ck_assert_msg(transport_default_caps(e.t).jobs,
		      "new sessions use the agent image");
	sbx_error_clear(&err);
	ck_assert_int_eq(transport_session_caps(e.t, "native", &existing, &err),
			 0);
	ck_assert(!existing.jobs);
	ck_assert(!existing.supervisor_isolation);

	sbx_error_clear(&err);
	rc = start_job(e.t, "native", &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "OPERATION_NOT_SUPPORTED");

	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_RECORD), 2);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_NATIVE_EXEC), 0);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 0);
	ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);

	tt_env_stop(&e);
}
END_TEST

struct counted_exec {
	pthread_mutex_t mu;
	bool missing; /* the replacement answers an untyped 404 too */
	unsigned calls;
};

static enum stub_next counted_exec_handler(struct stub_agent *s,
					   const struct stub_req *req, int fd,
					   void *arg)
{
	struct counted_exec *c = arg;
	bool missing;

	(void)s;
	if (tt_is(req, "POST", "/v1/activate"))
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	if (tt_is(req, "POST", "/v1/exec")) {
		pthread_mutex_lock(&c->mu);
		c->calls++;
		missing = c->missing;
		pthread_mutex_unlock(&c->mu);
		if (missing)
			return tt_answered(
				stub_reply(fd, 404, TT_TEXT, "gone"));
		return tt_answered(stub_reply(fd, 200, TT_TEXT, EXIT_FRAME));
	}
	return tt_no_route(fd);
}

static unsigned exec_calls(struct counted_exec *c)
{
	unsigned n;

	pthread_mutex_lock(&c->mu);
	n = c->calls;
	pthread_mutex_unlock(&c->mu);
	return n;
}

static void cached_routes_row(int connect_failure, int missing)
{
	struct counted_exec c = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct stub_agent *stale = NULL;
	struct sbx_error err;
	struct output out;
	char stale_url[64];
	int rc;

	c.missing = missing;
	tt_env_start(&e, counted_exec_handler, &c, RESPONSE_MS, TT_ROUTED);
	if (connect_failure) {
		stub_refused_url(stale_url, sizeof(stale_url));
	} else {
		stale = stub_agent_start(NULL, NULL);
		snprintf(stale_url, sizeof(stale_url), "%s",
			 stub_agent_url(stale));
	}
	stub_provider_set_generation(e.sp, 7);
	expect_only(e.sp, GET_SANDBOX | CALL(STUB_CALL_ROUTE) |
				  CALL(STUB_CALL_CREDENTIAL));
	/* An already-activated connection becomes stale when
	 * the provider moves the port. */
	transport_test_set_connection(e.t, TT_SESSION, stale_url, tt_cred(7));

	output_init(&out);
	sbx_error_clear(&err);
	rc = run_command(e.t, TT_SESSION, TRUE_ARGV, 1, &out, &err);
	if (missing) {
		ck_assert_msg(rc < 0, "replacement 404 must "
				      "stop after one retry");
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_COMMAND_FAILED");
		ck_assert(tt_slot_empty(e.t));
	} else {
		ck_assert_msg(rc == 0, "stale route connect=%d: %s",
			      connect_failure, err.reason);
		ck_assert_uint_eq(out.n, 1);
		ck_assert_int_eq(out.frames[0].type, PROTO_FRAME_EXIT);
		ck_assert_int_eq(out.frames[0].code, 0);
	}
	output_cleanup(&out);
	ck_assert_uint_eq(exec_calls(&c), 1);
	tt_assert_calls(e.sp, 2, 1, 1);

	stub_agent_stop(stale);
	tt_env_stop(&e);
}

/*
 * Seed: for connect_failure and replacement_missing in [false, true], an
 * activated connection cached at a stale URL (a closed port, or an agent
 * with no routes: untyped 404) is refreshed once; the command then
 * succeeds (Exit 0, end) or, when the replacement also answers an untyped
 * 404, fails with SANDBOX_COMMAND_FAILED after that one retry and leaves
 * the slot empty; the replacement sees exactly one exec (calls == 1);
 * get_sandbox times(2), agent_port_url and read_file times(1),
 * execute_shell_command never.
 */
START_TEST(cached_routes_refresh_once_after_not_found_or_connect_failure)
{
	int connect_failure, missing;

	for (connect_failure = 0; connect_failure <= 1; connect_failure++)
		for (missing = 0; missing <= 1; missing++)
			cached_routes_row(connect_failure, missing);
}
END_TEST

struct swallow {
	pthread_mutex_t mu;
	bool timeout;
	unsigned delivered;
};

/* The request reaches the server, but no response reaches the caller. */
static enum stub_next swallow_handler(struct stub_agent *s,
				      const struct stub_req *req, int fd,
				      void *arg)
{
	struct swallow *w = arg;
	bool timeout;

	(void)req;
	(void)fd;
	pthread_mutex_lock(&w->mu);
	w->delivered++;
	timeout = w->timeout;
	pthread_mutex_unlock(&w->mu);
	if (timeout)
		stub_wait(s, 500);
	return STUB_CLOSE;
}

/*
 * Seed: for timeout in [false, true], a command sent on a cached route
 * whose server reads the request and then drops the connection (at once,
 * or after 500 ms against a 100 ms client timeout, here the response
 * deadline) is SANDBOX_OUTCOME_UNKNOWN, not retryable, delivered once and
 * never replayed (the fresh agent saw 0 execs); the next command refreshes
 * and streams Exit 0, end (delivered still 1, calls 1); get_sandbox
 * times(3), agent_port_url and read_file times(1), execute_shell_command
 * never.
 */
START_TEST(ambiguous_delivery_is_not_replayed_and_the_next_call_refreshes)
{
	int timeout;

	for (timeout = 0; timeout <= 1; timeout++) {
		struct counted_exec c = {.mu = PTHREAD_MUTEX_INITIALIZER};
		struct swallow w = {.mu = PTHREAD_MUTEX_INITIALIZER};
		struct tt_env e;
		struct stub_agent *stale;
		struct sbx_error err;
		struct output out;
		int rc;

		w.timeout = timeout;
		tt_env_start(&e, counted_exec_handler, &c, RESPONSE_MS,
			     TT_ROUTED);
		stale = stub_agent_start(swallow_handler, &w);
		stub_provider_set_generation(e.sp, 7);
		expect_only(e.sp, GET_SANDBOX | CALL(STUB_CALL_ROUTE) |
					  CALL(STUB_CALL_CREDENTIAL));
		transport_test_set_connection(
			e.t, TT_SESSION, stub_agent_url(stale), tt_cred(7));

		output_init(&out);
		sbx_error_clear(&err);
		rc = run_command(e.t, TT_SESSION, TRUE_ARGV, 1, &out, &err);
		ck_assert_msg(rc < 0, "delivery is ambiguous");
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_OUTCOME_UNKNOWN");
		ck_assert(!err.retryable);
		output_cleanup(&out);
		pthread_mutex_lock(&w.mu);
		ck_assert_uint_eq(w.delivered, 1);
		pthread_mutex_unlock(&w.mu);
		ck_assert_msg(exec_calls(&c) == 0, "must not replay");

		output_init(&out);
		sbx_error_clear(&err);
		rc = run_command(e.t, TT_SESSION, TRUE_ARGV, 1, &out, &err);
		ck_assert_msg(rc == 0, "next call must refresh timeout=%d: %s",
			      timeout, err.reason);
		ck_assert_uint_eq(out.n, 1);
		ck_assert_int_eq(out.frames[0].type, PROTO_FRAME_EXIT);
		ck_assert_int_eq(out.frames[0].code, 0);
		output_cleanup(&out);
		pthread_mutex_lock(&w.mu);
		ck_assert_uint_eq(w.delivered, 1);
		pthread_mutex_unlock(&w.mu);
		ck_assert_uint_eq(exec_calls(&c), 1);

		tt_assert_calls(e.sp, 3, 1, 1);

		stub_agent_stop(stale);
		tt_env_stop(&e);
	}
}
END_TEST

struct typed_missing {
	pthread_mutex_t mu;
	const char *code;
	unsigned calls;
};

static enum stub_next typed_missing_handler(struct stub_agent *s,
					    const struct stub_req *req, int fd,
					    void *arg)
{
	struct typed_missing *m = arg;
	const char *body;

	(void)s;
	if (tt_is(req, "POST", "/v1/activate"))
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	if (tt_is(req, "GET", "/v1/missing")) {
		pthread_mutex_lock(&m->mu);
		m->calls++;
		pthread_mutex_unlock(&m->mu);
		/* The agent's ApiError: coded plain text. */
		if (strcmp(m->code, PROTO_ERR_PATH_NOT_FOUND) == 0)
			body = "PATH_NOT_FOUND: No such file in the sandbox: "
			       "missing";
		else
			body = "JOB_NOT_FOUND: Job 'missing' was not found";
		return tt_answered(stub_reply(fd, 404, TT_TEXT, body));
	}
	return tt_no_route(fd);
}

static void typed_not_found_row(const char *code, int stale_first)
{
	struct typed_missing m = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct stub_agent *stale;
	struct sbx_error err;
	unsigned expected;
	char url[256];
	int rc;

	m.code = code;
	tt_env_start(&e, typed_missing_handler, &m, RESPONSE_MS, TT_ROUTED);
	stale = stub_agent_start(NULL, NULL);
	stub_provider_set_generation(e.sp, 7);
	expect_only(e.sp, stale_first ? GET_SANDBOX | CALL(STUB_CALL_ROUTE) |
						CALL(STUB_CALL_CREDENTIAL)
				      : 0);
	transport_test_set_connection(e.t, TT_SESSION,
				      stub_agent_url(stale_first ? stale : e.s),
				      tt_cred(7));

	for (expected = 1; expected <= 2; expected++) {
		struct transport_resp resp;

		transport_resp_init(&resp);
		sbx_error_clear(&err);
		rc = raw_send(e.t, "GET", "/v1/missing", TRANSPORT_OP_READ,
			      &resp, &err);
		transport_resp_cleanup(&resp);
		ck_assert_int_lt(rc, 0);
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_COMMAND_FAILED");
		ck_assert_msg(tt_error_mentions(&err, code), "%s", err.reason);
		ck_assert(!err.retryable);
		ck_assert_int_eq(rc, -ENOENT);
		pthread_mutex_lock(&m.mu);
		ck_assert_uint_eq(m.calls, expected);
		pthread_mutex_unlock(&m.mu);
		ck_assert_msg(transport_test_cached_url(e.t, TT_SESSION, url,
							sizeof(url)),
			      "typed 404 keeps route");
		ck_assert_str_eq(url, stub_agent_url(e.s));
	}
	tt_assert_calls(e.sp, (unsigned)stale_first, (unsigned)stale_first,
			(unsigned)stale_first);

	stub_agent_stop(stale);
	tt_env_stop(&e);
}

/*
 * Seed: for code in [PATH_NOT_FOUND, JOB_NOT_FOUND] and stale_first in
 * [false, true], two reads of /v1/missing each fail with
 * SANDBOX_COMMAND_FAILED naming the code, not retryable, after exactly one
 * agent call each (calls == 1, then 2), and the slot keeps the agent's
 * route; only a stale first route costs a refresh: get_sandbox,
 * agent_port_url and read_file times(stale_first), execute_shell_command
 * never. (C addition: the typed answer is ENOENT, SEMANTICS.md.)
 */
START_TEST(typed_not_found_preserves_route_without_replaying)
{
	static const char *const codes[] = {PROTO_ERR_PATH_NOT_FOUND,
					    PROTO_ERR_JOB_NOT_FOUND};
	int ci, stale_first;

	for (ci = 0; ci < 2; ci++)
		for (stale_first = 0; stale_first <= 1; stale_first++)
			typed_not_found_row(codes[ci], stale_first);
}
END_TEST

static const char *const SEED_OPS[] = {
	TRANSPORT_OP_EXEC, TRANSPORT_OP_JOB_START, TRANSPORT_OP_READ};

struct scripted {
	int status;
	bool disconnect;
	bool stalled_until_stop; /* the stall was still on at the stop */
};

/* Headers announce 100000 bytes; 4097 come; then a stall. */
static enum stub_next oversized_handler(struct stub_agent *s,
					const struct stub_req *req, int fd,
					void *arg)
{
	struct scripted *sc = arg;
	char body[4097];

	(void)req;
	memset(body, 'x', sizeof(body));
	if (stub_reply_head(fd, sc->status, NULL, 100000, NULL) == 0 &&
	    stub_send(fd, body, sizeof(body)) == 0)
		stub_wait(s, RESPONSE_MS * 10);
	return STUB_CLOSE;
}

static void oversized_row(int status, const char *op)
{
	struct scripted sc = {.status = status};
	struct tt_env e;
	bool read = strcmp(op, TRANSPORT_OP_READ) == 0;
	struct transport_resp resp;
	struct sbx_error err;
	unsigned refreshes = status == 401;
	char text[1024];
	int rc;

	tt_env_start(&e, oversized_handler, &sc, RESPONSE_MS,
		     TT_ROUTED | TT_CONNECTED);
	stub_provider_set_generation(e.sp, 7);
	expect_only(e.sp, CALL(STUB_CALL_ROUTE) | CALL(STUB_CALL_CREDENTIAL));

	transport_resp_init(&resp);
	sbx_error_clear(&err);
	rc = raw_send(e.t, "GET", "/v1/missing", op, &resp, &err);
	transport_resp_cleanup(&resp);
	sbx_error_describe(&err, text, sizeof(text));
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(strstr(text, "4096") != NULL, "%d: %s", status, text);
	ck_assert_str_eq(sbx_code_name(err.code),
			 read ? "SANDBOX_UNREACHABLE"
			      : "SANDBOX_OUTCOME_UNKNOWN");
	ck_assert_int_eq(err.retryable, read);
	if (status != 401)
		ck_assert(tt_slot_empty(e.t));
	ck_assert_uint_eq(stub_agent_requests(e.s), 1);
	ck_assert_uint_eq(stub_agent_accepts(e.s), 1);
	ck_assert_uint_le(stub_provider_calls(e.sp, STUB_CALL_ROUTE),
			  refreshes);
	ck_assert_uint_le(stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL),
			  refreshes);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_RECORD), 0);
	ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);

	tt_env_stop(&e);
}

/*
 * Seed: for status in [401, 403, 404, 500] and each of runCommand,
 * jobStart and readFile, an error answer announcing 100000 bytes whose
 * first 4097 arrive fails with an error naming the 4096 bound,
 * SANDBOX_UNREACHABLE (retryable) for readFile and SANDBOX_OUTCOME_UNKNOWN
 * (not retryable) otherwise, and except after a 401 the slot is empty; a
 * 401 may check the credential, but nothing replays (the server accepts
 * once); get_sandbox never. (C addition: only a 401 reads the route and
 * credential, at most once.)
 */
START_TEST(oversized_error_bodies_are_bounded_without_replay)
{
	static const int statuses[] = {401, 403, 404, 500};
	size_t si, oi;

	for (si = 0; si < 4; si++)
		for (oi = 0; oi < 3; oi++)
			oversized_row(statuses[si], SEED_OPS[oi]);
}
END_TEST

/* A typed 404 whose body promises 100 bytes and brings 15. */
static enum stub_next unfinished_handler(struct stub_agent *s,
					 const struct stub_req *req, int fd,
					 void *arg)
{
	struct scripted *sc = arg;

	(void)req;
	if (stub_sendf(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 100\r\n"
			   "\r\nPATH_NOT_FOUND:") == 0 &&
	    !sc->disconnect)
		stub_wait(s, RESPONSE_MS * 10);
	return STUB_CLOSE;
}

/*
 * Seed: for disconnect in [false, true], a 404 whose body starts
 * "PATH_NOT_FOUND:" and then stalls or is cut off must not hang runCommand
 * (it ends within 3 x AGENT_RESPONSE_TIMEOUT) and is
 * SANDBOX_OUTCOME_UNKNOWN, not retryable, with the slot empty;
 * agent_port_url never (nor any other provider call). (C addition: the
 * agent saw one request.)
 */
START_TEST(unfinished_not_found_body_is_bounded_and_never_replayed)
{
	int disconnect;

	for (disconnect = 0; disconnect <= 1; disconnect++) {
		struct scripted sc = {.disconnect = disconnect};
		struct tt_env e;
		struct transport_resp resp;
		struct sbx_error err;
		long long t0, elapsed;
		int rc;

		tt_env_start(&e, unfinished_handler, &sc, RESPONSE_MS,
			     TT_CONNECTED);
		expect_only(e.sp, 0);

		transport_resp_init(&resp);
		sbx_error_clear(&err);
		t0 = th_now_ms();
		rc = raw_send(e.t, "GET", "/v1/missing", TRANSPORT_OP_EXEC,
			      &resp, &err);
		elapsed = th_now_ms() - t0;
		transport_resp_cleanup(&resp);
		ck_assert_msg(elapsed < 3 * RESPONSE_MS,
			      "an unfinished 404 must not hang the operation "
			      "(%lld ms)",
			      elapsed);
		ck_assert_int_lt(rc, 0);
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_OUTCOME_UNKNOWN");
		ck_assert(!err.retryable);
		ck_assert(tt_slot_empty(e.t));
		ck_assert_uint_eq(stub_agent_requests(e.s), 1);
		ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE),
				  0);
		ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);

		tt_env_stop(&e);
	}
}
END_TEST

/* An error whose body promises 100 bytes, brings 13, then never more. */
static enum stub_next stalled_error_handler(struct stub_agent *s,
					    const struct stub_req *req, int fd,
					    void *arg)
{
	struct scripted *sc = arg;

	(void)req;
	if (stub_reply_head(fd, sc->status, NULL, 100, NULL) == 0 &&
	    stub_sendf(fd, "partial error") == 0)
		sc->stalled_until_stop = !stub_wait(s, STUB_IDLE_MS);
	return STUB_CLOSE;
}

static void stalled_error_row(int status, const char *op)
{
	struct scripted sc = {.status = status};
	struct tt_env e;
	bool idempotent = strcmp(op, TRANSPORT_OP_READ) == 0;
	struct transport_resp resp;
	struct sbx_error err;
	long long t0, elapsed;
	int rc;

	tt_env_start(&e, stalled_error_handler, &sc, RESPONSE_MS, TT_CONNECTED);
	expect_only(e.sp, 0);

	transport_resp_init(&resp);
	sbx_error_clear(&err);
	t0 = th_now_ms();
	rc = raw_send(e.t, "POST", "/v1/test", op, &resp, &err);
	elapsed = th_now_ms() - t0;
	transport_resp_cleanup(&resp);
	ck_assert_msg(elapsed < 3 * RESPONSE_MS,
		      "a stalled error body must not hang the "
		      "operation (%lld ms)",
		      elapsed);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code),
			 idempotent ? "SANDBOX_UNREACHABLE"
				    : "SANDBOX_OUTCOME_UNKNOWN");
	ck_assert_int_eq(err.retryable, idempotent);
	ck_assert_msg(tt_error_mentions(&err, "body"), "%s", err.reason);
	ck_assert(tt_slot_empty(e.t));
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 0);
	ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);

	transport_free(e.t);
	stub_agent_stop(e.s);
	ck_assert(sc.stalled_until_stop);
	stub_provider_free(e.sp);
}

/*
 * Seed: for status in [403, 500] and each of runCommand, jobStart and
 * readFile, an error body that stalls after "partial error" must not hang
 * the operation (3 x AGENT_RESPONSE_TIMEOUT); the error is
 * SANDBOX_UNREACHABLE (retryable) for readFile and SANDBOX_OUTCOME_UNKNOWN
 * (not retryable) otherwise, mentions "body", and the slot is empty;
 * agent_port_url never; the server was still stalled when aborted.
 */
START_TEST(stalled_error_body_is_bounded_and_never_replayed)
{
	static const int statuses[] = {403, 500};
	size_t si, oi;

	for (si = 0; si < 2; si++)
		for (oi = 0; oi < 3; oi++)
			stalled_error_row(statuses[si], SEED_OPS[oi]);
}
END_TEST

struct first_second {
	pthread_mutex_t mu;
	unsigned calls; /* /v1/first */
};

static enum stub_next first_second_handler(struct stub_agent *s,
					   const struct stub_req *req, int fd,
					   void *arg)
{
	struct first_second *f = arg;

	if (tt_is(req, "POST", "/v1/first")) {
		pthread_mutex_lock(&f->mu);
		f->calls++;
		pthread_mutex_unlock(&f->mu);
		/* A 401 whose streamed body never yields. */
		if (stub_reply_head(fd, 401, NULL, -1, NULL) == 0)
			stub_wait(s, STUB_IDLE_MS);
		return STUB_CLOSE;
	}
	if (tt_is(req, "POST", "/v1/second"))
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	return tt_no_route(fd);
}

/* tokio::sync::Notify */
struct notify {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool fired;
};

static void notify_refresh(struct stub_provider *sp, enum stub_call call,
			   const char *id, void *arg)
{
	struct notify *n = arg;

	(void)sp;
	(void)call;
	(void)id;
	pthread_mutex_lock(&n->mu);
	n->fired = true;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->mu);
}

/* The first call, parked on its own thread. */
struct first_call {
	struct transport *t;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	int rc;
	struct sbx_error err;
};

static void *first_call_main(void *arg)
{
	struct first_call *fc = arg;
	struct transport_resp resp;
	struct sbx_error err;
	int rc;

	transport_resp_init(&resp);
	sbx_error_clear(&err);
	rc = raw_send(fc->t, "POST", "/v1/first", TRANSPORT_OP_EXEC, &resp,
		      &err);
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&fc->mu);
	fc->rc = rc;
	fc->err = err;
	fc->done = true;
	pthread_cond_broadcast(&fc->cond);
	pthread_mutex_unlock(&fc->mu);
	return NULL;
}

/*
 * Seed: a runCommand answered by a 401 whose body never comes refreshes
 * its credential (read_file notifies) while still reading nothing; a
 * second call on the same session (readFile, POST /v1/second) then
 * finishes with 204 within 3 x AGENT_RESPONSE_TIMEOUT, without needing the
 * first call to finish or its body deadline to expire (C: the second call
 * ends while the first is still parked); the first then meets its body
 * deadline within 3 x AGENT_RESPONSE_TIMEOUT as SANDBOX_OUTCOME_UNKNOWN,
 * not retryable, and was not replayed (calls == 1); agent_port_url and
 * read_file times(1), get_sandbox never.
 */
START_TEST(stalled_unauthorized_body_does_not_block_same_session)
{
	struct first_second f = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct notify refreshed = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct first_call fc = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct transport_resp resp;
	struct sbx_error err;
	long long t0, elapsed;
	pthread_t first;
	bool first_done;
	int rc;

	clock_cond_init(&refreshed.cond);
	clock_cond_init(&fc.cond);
	tt_env_start(&e, first_second_handler, &f, RESPONSE_MS,
		     TT_ROUTED | TT_CONNECTED);
	stub_provider_set_generation(e.sp, 7);
	stub_provider_set_hook(e.sp, STUB_CALL_CREDENTIAL, notify_refresh,
			       &refreshed);
	expect_only(e.sp, CALL(STUB_CALL_ROUTE) | CALL(STUB_CALL_CREDENTIAL));

	fc.t = e.t;
	ck_assert(pthread_create(&first, NULL, first_call_main, &fc) == 0);
	ck_assert_msg(tt_wait_flag(&refreshed.mu, &refreshed.cond,
				   &refreshed.fired, 3 * RESPONSE_MS),
		      "the first call must refresh its credential");
	pthread_mutex_lock(&fc.mu);
	first_done = fc.done;
	pthread_mutex_unlock(&fc.mu);
	ck_assert_msg(!first_done,
		      "first call should be reading its stalled body: %s",
		      fc.err.reason);

	/* Leave the first call parked in its body read. The second call
	 * must finish without needing the first call to finish or its body
	 * deadline to expire. */
	transport_resp_init(&resp);
	sbx_error_clear(&err);
	t0 = th_now_ms();
	rc = raw_send(e.t, "POST", "/v1/second", TRANSPORT_OP_READ, &resp,
		      &err);
	elapsed = th_now_ms() - t0;
	pthread_mutex_lock(&fc.mu);
	first_done = fc.done;
	pthread_mutex_unlock(&fc.mu);
	ck_assert_msg(elapsed < 3 * RESPONSE_MS,
		      "a stalled 401 body must not hold the session cache lock "
		      "(%lld ms)",
		      elapsed);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_int_eq(resp.status, 204);
	ck_assert_msg(!first_done, "the second call waited for the first");
	transport_resp_cleanup(&resp);

	ck_assert_msg(tt_wait_flag(&fc.mu, &fc.cond, &fc.done, 3 * RESPONSE_MS),
		      "the stalled 401 must meet its body deadline");
	pthread_join(first, NULL);
	ck_assert_int_lt(fc.rc, 0);
	ck_assert_str_eq(sbx_code_name(fc.err.code), "SANDBOX_OUTCOME_UNKNOWN");
	ck_assert(!fc.err.retryable);
	pthread_mutex_lock(&f.mu);
	ck_assert_msg(f.calls == 1, "the first operation must not replay");
	pthread_mutex_unlock(&f.mu);
	tt_assert_calls(e.sp, 0, 1, 1);

	tt_env_stop(&e);
	pthread_cond_destroy(&refreshed.cond);
	pthread_cond_destroy(&fc.cond);
}
END_TEST

Suite *make_transport_seed_suite(void)
{
	Suite *s = suite_create("transport_seed");
	TCase *tc = tcase_create("seed");

	/* Loopback only; the longest scenario waits a few response
	 * deadlines per row. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(
		tc,
		reconnect_activates_a_fresh_boot_and_does_not_retry_authorization_refusal);
	tcase_add_test(tc, failed_resume_stops_only_the_session_it_woke);
	tcase_add_test(tc, commands_cross_the_agent_port_without_native_exec);
	tcase_add_test(
		tc,
		a_cached_connection_activates_new_boots_and_only_replays_a_changed_credential);
	tcase_add_test(
		tc,
		a_native_session_does_not_advertise_jobs_through_an_upgraded_binding);
	tcase_add_test(
		tc,
		cached_routes_refresh_once_after_not_found_or_connect_failure);
	tcase_add_test(
		tc,
		ambiguous_delivery_is_not_replayed_and_the_next_call_refreshes);
	tcase_add_test(tc, typed_not_found_preserves_route_without_replaying);
	tcase_add_test(tc, oversized_error_bodies_are_bounded_without_replay);
	tcase_add_test(tc,
		       unfinished_not_found_body_is_bounded_and_never_replayed);
	tcase_add_test(tc, stalled_error_body_is_bounded_and_never_replayed);
	tcase_add_test(tc,
		       stalled_unauthorized_body_does_not_block_same_session);
	suite_add_tcase(s, tc);
	return s;
}
