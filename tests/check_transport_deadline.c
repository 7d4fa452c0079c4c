/* SPDX-License-Identifier: MIT */
/*
 * The transport's deadlines (doc/transport-rules.md 9): the response
 * deadline bounds a whole exchange, headers and body, however the bytes
 * trickle; the calling thread's operation deadline bounds everything done
 * for it (an exchange, the wait for a connection another request is
 * refreshing), except a request that says it outlives it; the readiness
 * deadline bounds the activation too, and a readiness probe drops only the
 * connection that carried its answer (rules 7). Also the connect deadline,
 * the response deadline of a silent agent, the idle deadline inside a
 * success body, a success body's bounds and the readiness wait's own
 * deadline.
 *
 * Everything runs on loopback against stub_agent and stub_provider.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "client/sbx_error.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"
#include "tests/transport_helpers.h"
#include "client/transport.h"

/* Deadline for the cases that measure one (small, to keep them quick). */
#define SHORT_MS 200L
/* Deadline for the cases that must not hit one. */
#define LONG_MS 5000L

/* req on t's session, its answer dropped: its rc, and how long it took in
 * *elapsed. */
static int timed(struct transport *t, const struct transport_req *req,
		 long long *elapsed, struct sbx_error *err)
{
	struct transport_resp resp;
	int rc;

	rc = tt_send_req(t, req, &resp, elapsed, err);
	transport_resp_cleanup(&resp);
	return rc;
}

/* A command whose output goes into streamed, or a buffered read of
 * read_path, on e's session: its rc, and how long it took in *elapsed. */
static int timed_send(struct tt_env *e, bool command, const char *read_path,
		      struct buf *streamed, long long *elapsed,
		      struct sbx_error *err)
{
	struct transport_req req;

	if (command) {
		tt_req_init(&req, "POST", "/v1/exec", TRANSPORT_OP_EXEC,
			    TRANSPORT_COMMAND);
		req.sink = tt_sink_to_buf;
		req.sink_arg = streamed;
	} else {
		tt_req_init(&req, "GET", read_path, TRANSPORT_OP_READ,
			    TRANSPORT_SAFE);
	}
	return timed(e->t, &req, elapsed, err);
}

/* What every case of a deadline that cuts one request short checks: rc
 * failed after lo_ms to hi_ms, as an unknown outcome for a command and an
 * unreachable sandbox for a read, with the one request e's agent saw. */
static void assert_cut_once(const struct tt_env *e, bool command, int rc,
			    long long elapsed, long long lo_ms, long long hi_ms,
			    const struct sbx_error *err)
{
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(elapsed >= lo_ms && elapsed < hi_ms, "%lld ms", elapsed);
	ck_assert_str_eq(sbx_code_name(err->code),
			 command ? "SANDBOX_OUTCOME_UNKNOWN"
				 : "SANDBOX_UNREACHABLE");
	ck_assert_uint_eq(stub_agent_requests(e->s), 1);
}

/*
 * A deadline that cuts a command and a read short, each on a fresh
 * scenario: the agent fn(arg) under response deadline response_ms on a
 * connected slot, the read of read_path, the cut after lo_ms to hi_ms
 * (assert_cut_once), then the case's own checks.
 */
struct cut_case {
	stub_handler_fn *fn;
	void *arg;
	long response_ms;
	const char *read_path;
	long long lo_ms, hi_ms;
	void (*check)(const struct tt_env *e, bool command,
		      const struct buf *streamed, const struct sbx_error *err);
};

/* Run c for a command (its output streamed) and then for a read. */
static void cut_command_and_read(const struct cut_case *c)
{
	int command;

	for (command = 0; command <= 1; command++) {
		struct tt_env e;
		struct buf streamed = BUF_INIT(4096);
		struct sbx_error err;
		long long elapsed;
		int rc;

		tt_env_start(&e, c->fn, c->arg, c->response_ms, TT_CONNECTED);
		rc = timed_send(&e, command, c->read_path, &streamed, &elapsed,
				&err);
		assert_cut_once(&e, command, rc, elapsed, c->lo_ms, c->hi_ms,
				&err);
		c->check(&e, command, &streamed, &err);
		buf_cleanup(&streamed);
		tt_env_stop(&e);
	}
}

/*
 * An agent that trickles one byte a second never lets the idle deadline
 * fire, but the response deadline bounds the whole exchange: a read (into
 * a buffer) and a command (into a sink) both fail at it, and neither is
 * sent again.
 */
/* What a trickling command streamed: less than the whole body. */
static void trickle_cut_check(const struct tt_env *e, bool command,
			      const struct buf *streamed,
			      const struct sbx_error *err)
{
	(void)e;
	(void)err;
	if (command)
		ck_assert_uint_lt(streamed->len, 5);
}

START_TEST(trickling_answer_fails_at_the_response_deadline)
{
	/* Five body bytes, one a second. */
	static struct tt_trickle trickle = {5, 1000};
	/* Not waited for to the trickle's end. */
	const struct cut_case c = {tt_trickle_handler,	  &trickle, 1500,
				   "/v1/files?path=slow", 1400,	    3500,
				   trickle_cut_check};

	cut_command_and_read(&c);
}
END_TEST

static int timed_get(struct transport *t, const char *path, long deadline_ms,
		     bool outlives_op, long long *elapsed,
		     struct sbx_error *err)
{
	struct transport_req req;

	tt_req_init(&req, "GET", path, TRANSPORT_OP_READ, TRANSPORT_SAFE);
	req.deadline_ms = deadline_ms;
	req.outlives_op = outlives_op;
	return timed(t, &req, elapsed, err);
}

/*
 * The calling thread's operation deadline cuts an exchange short of the
 * response deadline and says so (transport_op_timed_out); a request that
 * outlives the operation keeps its own deadline; once the operation's
 * deadline has passed nothing is sent at all; another thread is not
 * affected.
 */
START_TEST(operation_deadline_bounds_each_exchange)
{
	struct tt_env e;
	struct sbx_error err;
	long long elapsed;
	int rc;

	tt_env_start(&e, tt_silent_handler, NULL, 5000, TT_CONNECTED);

	ck_assert_int_eq(transport_op_deadline(), 0);
	transport_op_clear_timed_out();
	transport_op_set_deadline(transport_now_ms() + 400);
	rc = timed_get(e.t, "/v1/files?path=a", 0, false, &elapsed, &err);
	assert_cut_once(&e, false, rc, elapsed, 350, 2000, &err);
	ck_assert(transport_op_timed_out());

	/* Past the deadline: refused before anything is sent. */
	transport_test_set_connection(e.t, TT_SESSION, stub_agent_url(e.s),
				      tt_cred(7));
	rc = timed_get(e.t, "/v1/files?path=b", 0, false, &elapsed, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(elapsed < 200, "%lld ms", elapsed);
	ck_assert_uint_eq(stub_agent_requests(e.s), 1);

	/* A request that outlives the operation has its own deadline. */
	transport_op_set_deadline(transport_now_ms() + 300);
	rc = timed_get(e.t, "/v1/files?path=c", 1200, true, &elapsed, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(elapsed >= 1100 && elapsed < 3000, "%lld ms", elapsed);

	/* Cleared: the response deadline alone (5 s) would apply; a short
	 * deadline_ms of the request's own shows it is not the old one. */
	transport_op_set_deadline(0);
	transport_op_clear_timed_out();
	ck_assert(!transport_op_timed_out());
	transport_test_set_connection(e.t, TT_SESSION, stub_agent_url(e.s),
				      tt_cred(7));
	rc = timed_get(e.t, "/v1/files?path=d", 600, false, &elapsed, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(elapsed >= 550 && elapsed < 2500, "%lld ms", elapsed);

	tt_env_stop(&e);
}
END_TEST

/* An agent whose activation takes a while; everything else answers at
 * once. */
struct slow_activation {
	pthread_mutex_t mu;
	long activate_ms;
	unsigned activations;
	unsigned others;
	const char *health;
};

static enum stub_next slow_activation_handler(struct stub_agent *s,
					      const struct stub_req *req,
					      int fd, void *arg)
{
	struct slow_activation *a = arg;
	long ms;

	pthread_mutex_lock(&a->mu);
	ms = a->activate_ms;
	if (tt_is(req, "POST", "/v1/activate"))
		a->activations++;
	else
		a->others++;
	pthread_mutex_unlock(&a->mu);
	if (tt_is(req, "POST", "/v1/activate")) {
		if (!stub_wait(s, ms))
			return STUB_CLOSE;
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	}
	if (tt_is(req, "GET", "/v1/health"))
		return tt_answered(
			stub_reply(fd, 200, "application/json", a->health));
	return tt_answered(stub_reply(fd, 200, TT_TEXT, "pong"));
}

struct bg_get {
	struct transport *t;
	int rc;
	char reason[1024];
};

static void *bg_get_main(void *arg)
{
	struct bg_get *g = arg;
	struct transport_resp resp;
	struct sbx_error err;

	g->rc = tt_get(g->t, "/v1/ping", &resp, &err);
	snprintf(g->reason, sizeof(g->reason), "%s", err.reason);
	transport_resp_cleanup(&resp);
	return NULL;
}

/*
 * One thread holds the sandbox's slot while its activation takes two
 * seconds; a second thread whose operation deadline is 400 ms does not
 * wait for it past that deadline. The first request then succeeds.
 */
START_TEST(operation_deadline_bounds_the_wait_for_a_refresh)
{
	struct slow_activation a = {.mu = PTHREAD_MUTEX_INITIALIZER,
				    .activate_ms = 2000};
	struct tt_env e;
	struct bg_get g;
	struct sbx_error err;
	long long elapsed;
	pthread_t th;
	int rc;

	tt_env_start(&e, slow_activation_handler, &a, 5000, TT_ROUTED);
	memset(&g, 0, sizeof(g));
	g.t = e.t;
	ck_assert_int_eq(pthread_create(&th, NULL, bg_get_main, &g), 0);
	ck_assert(stub_agent_wait_requests(e.s, 1, 5000));

	transport_op_clear_timed_out();
	transport_op_set_deadline(transport_now_ms() + 400);
	rc = timed_get(g.t, "/v1/ping", 0, false, &elapsed, &err);
	transport_op_set_deadline(0);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(elapsed >= 350 && elapsed < 1500, "%lld ms", elapsed);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_UNREACHABLE");
	ck_assert(transport_op_timed_out());

	pthread_join(th, NULL);
	ck_assert_msg(g.rc == 0, "%d %s", g.rc, g.reason);
	pthread_mutex_lock(&a.mu);
	ck_assert_uint_eq(a.activations, 1);
	ck_assert_uint_eq(a.others, 1);
	pthread_mutex_unlock(&a.mu);

	tt_env_stop(&e);
}
END_TEST

/* Waiting for t's sandbox to be ready fails, as an unreachable sandbox,
 * after lo_ms to hi_ms. */
static void assert_ready_gives_up(struct transport *t, long long lo_ms,
				  long long hi_ms)
{
	struct sbx_error err;
	long long t0, elapsed;
	int rc;

	sbx_error_clear(&err);
	t0 = th_now_ms();
	rc = transport_wait_ready(t, TT_SESSION, NULL, &err);
	elapsed = th_now_ms() - t0;
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_UNREACHABLE");
	ck_assert_msg(elapsed >= lo_ms && elapsed < hi_ms, "%lld ms", elapsed);
}

/*
 * The readiness deadline bounds the activation it starts: an activation
 * that would take three seconds (under a five-second response deadline)
 * ends the wait at the 600 ms readiness deadline, and the caller's own
 * operation deadline is back in place afterwards.
 */
START_TEST(readiness_deadline_bounds_the_activation)
{
	struct slow_activation a = {
		.mu = PTHREAD_MUTEX_INITIALIZER,
		.activate_ms = 3000,
		.health = "{\"protocolVersion\":1,\"status\":\"ready\","
			  "\"imageCommand\":{\"status\":\"running\"}}",
	};
	struct transport_config cfg;
	struct tt_env e;
	struct sbx_error err;
	int rc;

	stub_transport_config(&cfg, 5000, true);
	cfg.ready_timeout_ms = 600;
	tt_env_start_cfg(&e, slow_activation_handler, &a, &cfg, TT_ROUTED);

	assert_ready_gives_up(e.t, 550, 2000);
	ck_assert_int_eq(transport_op_deadline(), 0);

	/* A quick activation passes. */
	pthread_mutex_lock(&a.mu);
	a.activate_ms = 0;
	pthread_mutex_unlock(&a.mu);
	cfg.ready_timeout_ms = 5000;
	transport_free(e.t);
	e.t = stub_transport_new(e.sp, &cfg);
	sbx_error_clear(&err);
	rc = transport_wait_ready(e.t, TT_SESSION, NULL, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);

	tt_env_stop(&e);
}
END_TEST

/* Health from two agents: the first says its boot awaits activation and,
 * while that answer is on its way, the slot is refreshed to the second
 * (as a concurrent request would); the second is ready. */
struct two_boots {
	pthread_mutex_t mu;
	struct transport *t;
	struct stub_agent *second;
	unsigned first_polls;
	struct tt_health ready; /* the second boot */
};

static const char AWAITING[] =
	"{\"protocolVersion\":1,\"status\":\"awaiting-network-verification\","
	"\"imageCommand\":{\"status\":\"running\"}}";
static const char READY[] = "{\"protocolVersion\":1,\"status\":\"ready\","
			    "\"imageCommand\":{\"status\":\"running\"}}";

static enum stub_next first_boot_handler(struct stub_agent *s,
					 const struct stub_req *req, int fd,
					 void *arg)
{
	struct two_boots *b = arg;

	(void)s;
	if (!tt_is(req, "GET", "/v1/health"))
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	pthread_mutex_lock(&b->mu);
	b->first_polls++;
	pthread_mutex_unlock(&b->mu);
	transport_test_set_connection(b->t, TT_SESSION,
				      stub_agent_url(b->second), tt_cred(8));
	return tt_answered(stub_reply(fd, 200, "application/json", AWAITING));
}

/*
 * A probe whose answer says awaiting-network-verification drops the
 * connection that carried it, not the one a concurrent refresh put in the
 * slot meanwhile: the next probe uses the refreshed connection, and
 * nothing is fetched or activated.
 */
START_TEST(readiness_probe_drops_only_its_own_connection)
{
	struct two_boots b = {
		.mu = PTHREAD_MUTEX_INITIALIZER,
		.ready = {.mu = PTHREAD_MUTEX_INITIALIZER, .answer = READY}};
	struct tt_env e;
	struct sbx_error err;
	char url[256];
	int rc;

	b.second = stub_agent_start(tt_health_handler, &b.ready);
	/* Connected to the first boot; no route is ever fetched. */
	tt_env_start(&e, first_boot_handler, &b, 5000, TT_CONNECTED);
	stub_provider_never(e.sp, STUB_CALL_ROUTE);
	b.t = e.t;

	sbx_error_clear(&err);
	rc = transport_wait_ready(b.t, TT_SESSION, NULL, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	pthread_mutex_lock(&b.mu);
	ck_assert_uint_eq(b.first_polls, 1);
	pthread_mutex_unlock(&b.mu);
	pthread_mutex_lock(&b.ready.mu);
	ck_assert_uint_eq(b.ready.polls, 1);
	pthread_mutex_unlock(&b.ready.mu);
	ck_assert_uint_eq(stub_provider_unexpected(e.sp), 0);
	ck_assert(transport_test_cached_url(b.t, TT_SESSION, url, sizeof(url)));
	ck_assert_str_eq(url, stub_agent_url(b.second));

	tt_env_stop(&e);
	stub_agent_stop(b.second);
}
END_TEST

/* ---- connect, response, idle and readiness deadlines --------------------- */

/*
 * A connect that nobody completes (a loopback listener whose accept queue
 * is full: Linux drops the SYNs) ends at the connect deadline, far before
 * the response deadline, as a retryable unreachable error. Both the first
 * fetch-and-activate and the refresh after a cached route's connect
 * failure are bounded so.
 */
START_TEST(connect_deadline_bounds_a_swallowed_connect)
{
	struct stub_blackhole bh;
	struct transport_config cfg;
	struct transport_resp resp;
	struct tt_env e;
	struct sbx_error err;
	long long t0, elapsed;
	int cached, rc;

	rc = stub_blackhole_open(&bh);
	if (rc == -EAGAIN) {
		/* Some network stacks complete the connect anyway; then no
		 * loopback address can stand for an unresponsive host. */
		fprintf(stderr, "connect deadline: skipped, this system "
				"completes connects to a full accept queue\n");
		return;
	}
	ck_assert_int_eq(rc, 0);
	for (cached = 0; cached <= 1; cached++) {
		stub_transport_config(&cfg, LONG_MS, true);
		cfg.connect_timeout_ms = 300;
		/* No agent: the route and the connection lead to bh. */
		tt_env_start_cfg(&e, NULL, NULL, &cfg, 0);
		stub_provider_set_route(e.sp, bh.url);
		if (cached)
			transport_test_set_connection(e.t, TT_SESSION, bh.url,
						      tt_cred(0));
		t0 = th_now_ms();
		rc = tt_exec_post(e.t, "/v1/exec", &resp, &err);
		elapsed = th_now_ms() - t0;
		transport_resp_cleanup(&resp);
		ck_assert_int_lt(rc, 0);
		ck_assert_msg(elapsed >= 250 && elapsed < 2500,
			      "cached=%d: %lld ms", cached, elapsed);
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_UNREACHABLE");
		ck_assert(err.retryable);
		ck_assert(tt_slot_empty(e.t));
		ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE),
				  1);
		tt_env_stop(&e);
	}
	stub_blackhole_close(&bh);
}
END_TEST

/*
 * An agent that reads the request and never answers: the error comes at
 * the response deadline, SANDBOX_UNREACHABLE (retryable) for a read and
 * SANDBOX_OUTCOME_UNKNOWN (not retryable) for a command; the request is
 * delivered once, the route is dropped and the provider is not asked for
 * a new one.
 */
START_TEST(response_deadline_is_never_replayed)
{
	int command;

	for (command = 0; command <= 1; command++) {
		struct tt_env e;
		struct transport_resp resp;
		struct sbx_error err;
		long long t0, elapsed;
		int rc;

		tt_env_start(&e, tt_silent_handler, NULL, SHORT_MS,
			     TT_ROUTED | TT_CONNECTED);
		t0 = th_now_ms();
		rc = command ? tt_exec_post(e.t, "/v1/exec", &resp, &err)
			     : tt_get(e.t, "/v1/files?path=a", &resp, &err);
		elapsed = th_now_ms() - t0;
		transport_resp_cleanup(&resp);
		assert_cut_once(&e, command, rc, elapsed, SHORT_MS - 20,
				3 * SHORT_MS, &err);
		ck_assert_int_eq(err.retryable, !command);
		ck_assert_int_eq(sbx_error_errno(&err), -EIO);
		ck_assert_uint_eq(stub_agent_accepts(e.s), 1);
		ck_assert(tt_slot_empty(e.t));
		ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE),
				  0);

		tt_env_stop(&e);
	}
}
END_TEST

/* A success whose body stops after a few bytes. */
static enum stub_next stalled_success_handler(struct stub_agent *s,
					      const struct stub_req *req,
					      int fd, void *arg)
{
	(void)req;
	(void)arg;
	if (stub_reply_head(fd, 200, "application/x-ndjson", 100, NULL) == 0 &&
	    stub_sendf(fd, "{\"t\":\"stdout\"") == 0)
		stub_wait(s, STUB_IDLE_MS);
	return STUB_CLOSE;
}

/*
 * A 200 whose body stalls ends at the body idle deadline: unreachable
 * (retryable) for a buffered read, outcome unknown for a streamed
 * command; never replayed.
 */
/* A stalled body: a read may be asked again, a command may not; what
 * the command streamed is what came before the stall; the provider is
 * not asked for a route. */
static void stalled_cut_check(const struct tt_env *e, bool command,
			      const struct buf *streamed,
			      const struct sbx_error *err)
{
	ck_assert_int_eq(err->retryable, !command);
	if (command)
		ck_assert_str_eq(streamed->data, "{\"t\":\"stdout\"");
	ck_assert_uint_eq(stub_provider_calls(e->sp, STUB_CALL_ROUTE), 0);
}

START_TEST(stalled_success_body_meets_the_idle_deadline)
{
	const struct cut_case c = {
		stalled_success_handler, NULL,		SHORT_MS,
		"/v1/files?path=a",	 SHORT_MS - 20, 3 * SHORT_MS,
		stalled_cut_check};

	cut_command_and_read(&c);
}
END_TEST

/*
 * A body that never pauses long enough for the idle deadline still ends
 * at the request's overall deadline_ms, and is not asked for again.
 */
START_TEST(overall_deadline_bounds_a_trickling_body)
{
	/* One byte every 50 ms: never silent for long. */
	struct tt_trickle trickle = {100, 50};
	struct tt_env e;
	struct transport_req req;
	struct sbx_error err;
	long long elapsed;
	int rc;

	tt_env_start(&e, tt_trickle_handler, &trickle, SHORT_MS, TT_CONNECTED);
	tt_req_init(&req, "GET", "/v1/files?path=slow", TRANSPORT_OP_READ,
		    TRANSPORT_SAFE);
	req.deadline_ms = 2 * SHORT_MS;
	rc = timed(e.t, &req, &elapsed, &err);
	assert_cut_once(&e, false, rc, elapsed, 2 * SHORT_MS - 20, 5 * SHORT_MS,
			&err);

	tt_env_stop(&e);
}
END_TEST

static enum stub_next big_success_handler(struct stub_agent *s,
					  const struct stub_req *req, int fd,
					  void *arg)
{
	char body[5000];

	(void)s;
	(void)req;
	(void)arg;
	memset(body, 'b', sizeof(body));
	return tt_answered(stub_reply_n(fd, 200, TT_TEXT, body, sizeof(body)));
}

static int refusing_sink(void *arg, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	(void)len;
	return -ECANCELED;
}

/*
 * A buffered success body over max_body is -EFBIG, and is not asked for
 * twice; a sink that refuses the bytes ends the transfer with its own
 * errno.
 */
START_TEST(success_body_bounds)
{
	struct tt_env e;
	struct transport_req req;
	struct transport_resp resp;
	struct sbx_error err;
	int rc;

	tt_env_start(&e, big_success_handler, NULL, LONG_MS, TT_CONNECTED);

	tt_req_init(&req, "GET", "/v1/files?path=big", TRANSPORT_OP_READ,
		    TRANSPORT_SAFE);
	req.max_body = 1000;
	rc = tt_send_req(e.t, &req, &resp, NULL, &err);
	ck_assert_int_eq(rc, -EFBIG);
	ck_assert_int_eq(sbx_error_errno(&err), -EFBIG);
	ck_assert_uint_le(resp.body.len, 1000);
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(stub_agent_requests(e.s), 1);

	/* The same body fits a larger bound. */
	req.max_body = 5000;
	rc = tt_send_req(e.t, &req, &resp, NULL, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_uint_eq(resp.body.len, 5000);
	transport_resp_cleanup(&resp);

	tt_req_init(&req, "POST", "/v1/exec", TRANSPORT_OP_EXEC,
		    TRANSPORT_COMMAND);
	req.sink = refusing_sink;
	rc = tt_send_req(e.t, &req, &resp, NULL, &err);
	ck_assert_int_eq(rc, -ECANCELED);
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(stub_agent_requests(e.s), 3);

	tt_env_stop(&e);
}
END_TEST

/*
 * Readiness is polled every ready_interval_ms and given up at
 * ready_timeout_ms with SANDBOX_UNREACHABLE: here the image command
 * failed, so the agent never counts as ready. The same agent reporting
 * ready passes at once and fills the health answer.
 */
START_TEST(readiness_wait_gives_up_at_its_deadline)
{
	struct tt_health h = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct transport_config cfg;
	struct proto_health health;
	struct tt_env e;
	struct sbx_error err;
	int rc;

	h.answer = "{\"protocolVersion\":1,\"status\":\"ready\","
		   "\"imageCommand\":{\"status\":\"failed\"}}";
	stub_transport_config(&cfg, SHORT_MS, true);
	cfg.ready_timeout_ms = 400;
	cfg.ready_interval_ms = 50;
	/* Connected, and routed too: a poll cut off by the deadline may
	 * drop the connection, and the provider can hand the route out
	 * again. */
	tt_env_start_cfg(&e, tt_health_handler, &h, &cfg,
			 TT_ROUTED | TT_CONNECTED);

	assert_ready_gives_up(e.t, 380, 1500);
	pthread_mutex_lock(&h.mu);
	ck_assert_uint_ge(h.polls, 3);
	ck_assert_uint_le(h.polls, 10);
	h.answer =
		"{\"protocolVersion\":1,\"status\":\"ready\","
		"\"imageCommand\":{\"status\":\"running\"},\"bootId\":\"b1\"}";
	pthread_mutex_unlock(&h.mu);

	sbx_error_clear(&err);
	memset(&health, 0, sizeof(health));
	rc = transport_wait_ready(e.t, TT_SESSION, &health, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_int_eq(health.protocol_version, 1);
	ck_assert_str_eq(health.status, "ready");
	ck_assert_str_eq(health.boot_id, "b1");

	tt_env_stop(&e);
}
END_TEST

void transport_deadline_cases(Suite *s)
{
	TCASE_TABLE(s, "deadlines", NULL, NULL, 60,
		    trickling_answer_fails_at_the_response_deadline,
		    operation_deadline_bounds_each_exchange,
		    operation_deadline_bounds_the_wait_for_a_refresh,
		    readiness_deadline_bounds_the_activation,
		    readiness_probe_drops_only_its_own_connection,
		    connect_deadline_bounds_a_swallowed_connect,
		    response_deadline_is_never_replayed,
		    stalled_success_body_meets_the_idle_deadline,
		    overall_deadline_bounds_a_trickling_body,
		    success_body_bounds,
		    readiness_wait_gives_up_at_its_deadline);
}
