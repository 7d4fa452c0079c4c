/* SPDX-License-Identifier: MIT */
/*
 * The seed's scenarios: every test of the `mod tests` of alien-bindings
 * 3.3.41's Azure agent transport (its rules: doc/transport-rules.md),
 * ported one for one to the transport core, under the seed's test names,
 * over the same parameter tables, with each of the seed's assertions and
 * call counts as a C assertion.
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
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"
#include "tests/transport_helpers.h"
#include "client/transport.h"

#include "tests/transport_seed.h"

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
		tt_assert_calls(e.sp, 3, 1, 1);
		tt_assert_last_id(e.sp, STUB_CALL_CREDENTIAL);
		ck_assert_uint_eq(
			stub_provider_calls(e.sp, STUB_CALL_NATIVE_EXEC), 0);

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
	if (wake)
		tt_assert_last_id(e.sp, STUB_CALL_STOP);
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
	/* A loop test over 0..3: wake in bit 1, unknown in bit 0. */
	failed_resume_row(_i >> 1, _i & 1);
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

	tt_assert_calls(e.sp, 3, 1, 1);
	tt_assert_last_id(e.sp, STUB_CALL_ROUTE);
	tt_assert_last_id(e.sp, STUB_CALL_CREDENTIAL);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_NATIVE_EXEC), 0);

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
	size_t i;
	int rc;

	tt_env_start(&e, boot_handler, &b, RESPONSE_MS,
		     TT_ROUTED | TT_ROLLBACK);
	expect_only(e.sp, GET_SANDBOX | CALL(STUB_CALL_ROUTE) |
				  CALL(STUB_CALL_CREDENTIAL));

	for (i = 0; i < 3; i++) {
		boot_set(&b, generations[i], 0);
		stub_provider_set_generation(e.sp, generations[i]);
		rc = run_true(e.t, &err);
		ck_assert_msg(rc == 0, "command %zu: %d %s", i, rc, err.reason);
	}
	pthread_mutex_lock(&b.mu);
	ck_assert_uint_eq(b.activations, 2);
	ck_assert_uint_eq(b.executions, 3);
	pthread_mutex_unlock(&b.mu);

	/* The unchanged credential remains refused. */
	boot_set(&b, 1, 1);
	rc = run_true(e.t, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_COMMAND_FAILED");
	ck_assert(!err.retryable);

	/* A 5xx never replays a command. */
	boot_set(&b, 1, 2);
	rc = run_true(e.t, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_OUTCOME_UNKNOWN");
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
	return th_locked_uint(&c->mu, &c->calls);
}

static void cached_routes_row(int connect_failure, int missing)
{
	struct counted_exec c = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct stub_agent *stale = NULL;
	struct sbx_error err;
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

	rc = run_true(e.t, &err);
	if (missing) {
		ck_assert_msg(rc < 0, "replacement 404 must "
				      "stop after one retry");
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_COMMAND_FAILED");
		ck_assert(tt_slot_empty(e.t));
	} else {
		ck_assert_msg(rc == 0, "stale route connect=%d: %s",
			      connect_failure, err.reason);
	}
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
	/* A loop test over 0..3: connect_failure in bit 1, missing in bit 0. */
	cached_routes_row(_i >> 1, _i & 1);
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

		rc = run_true(e.t, &err);
		ck_assert_msg(rc < 0, "delivery is ambiguous");
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_OUTCOME_UNKNOWN");
		ck_assert(!err.retryable);
		pthread_mutex_lock(&w.mu);
		ck_assert_uint_eq(w.delivered, 1);
		pthread_mutex_unlock(&w.mu);
		ck_assert_msg(exec_calls(&c) == 0, "must not replay");

		rc = run_true(e.t, &err);
		ck_assert_msg(rc == 0, "next call must refresh timeout=%d: %s",
			      timeout, err.reason);
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

		rc = raw_send(e.t, "GET", "/v1/missing", TRANSPORT_OP_READ,
			      &resp, NULL, &err);
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

	/* A loop test over 0..3: the code in bit 1, stale_first in bit 0. */
	typed_not_found_row(codes[_i >> 1], _i & 1);
}
END_TEST

void transport_seed_cases(Suite *s)
{
	TCase *tc = TCASE_TABLE(
		s, "seed", NULL, NULL, 60,
		reconnect_activates_a_fresh_boot_and_does_not_retry_authorization_refusal,
		commands_cross_the_agent_port_without_native_exec,
		a_cached_connection_activates_new_boots_and_only_replays_a_changed_credential,
		a_native_session_does_not_advertise_jobs_through_an_upgraded_binding,
		ambiguous_delivery_is_not_replayed_and_the_next_call_refreshes);

	/* The seed's two-parameter scenarios: one run a row. */
	tcase_add_loop_test(tc, failed_resume_stops_only_the_session_it_woke, 0,
			    4);
	tcase_add_loop_test(
		tc,
		cached_routes_refresh_once_after_not_found_or_connect_failure,
		0, 4);
	tcase_add_loop_test(
		tc, typed_not_found_preserves_route_without_replaying, 0, 4);
}
