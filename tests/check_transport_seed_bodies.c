/* SPDX-License-Identifier: MIT */
/*
 * The seed's scenarios about error bodies (oversized, unfinished,
 * stalled, a stalled 401 that must not block its session), ported as
 * check_transport_seed.c tells; the suite "transport_seed_bodies", and a
 * second time over the Azure provider (check_azure_seed_bodies.c, which
 * includes this file).
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
#include "tests/transport_seed.h"
#include "client/transport.h"

static const char *const SEED_OPS[] = {
	TRANSPORT_OP_EXEC, TRANSPORT_OP_JOB_START, TRANSPORT_OP_READ};

struct scripted {
	int status;
	bool disconnect;
	bool stalled_until_stop; /* the stall was still on at the stop */
};

/*
 * method path as op on e->t, which must fail: SANDBOX_UNREACHABLE and
 * retryable for a read, SANDBOX_OUTCOME_UNKNOWN and final otherwise. With
 * what set, it must also fail within 3 x RESPONSE_MS (what is what must
 * not hang the operation).
 */
static void assert_op_fails(struct tt_env *e, const char *method,
			    const char *path, const char *op, const char *what,
			    struct sbx_error *err)
{
	bool read = strcmp(op, TRANSPORT_OP_READ) == 0;
	struct transport_resp resp;
	long long elapsed;
	int rc;

	rc = raw_send(e->t, method, path, op, &resp,
		      what != NULL ? &elapsed : NULL, err);
	transport_resp_cleanup(&resp);
	if (what != NULL)
		ck_assert_msg(elapsed < 3 * RESPONSE_MS,
			      "%s must not hang the operation (%lld ms)", what,
			      elapsed);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err->code),
			 read ? "SANDBOX_UNREACHABLE"
			      : "SANDBOX_OUTCOME_UNKNOWN");
	ck_assert_int_eq(err->retryable, read);
}

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
	struct sbx_error err;
	unsigned refreshes = status == 401;
	char text[1024];

	tt_env_start(&e, oversized_handler, &sc, RESPONSE_MS,
		     TT_ROUTED | TT_CONNECTED);
	stub_provider_set_generation(e.sp, 7);
	expect_only(e.sp, CALL(STUB_CALL_ROUTE) | CALL(STUB_CALL_CREDENTIAL));

	assert_op_fails(&e, "GET", "/v1/missing", op, NULL, &err);
	sbx_error_describe(&err, text, sizeof(text));
	ck_assert_msg(strstr(text, "4096") != NULL, "%d: %s", status, text);
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

	/* A loop test over 0..11: the status, then the operation. */
	oversized_row(statuses[_i / 3], SEED_OPS[_i % 3]);
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
		struct sbx_error err;

		tt_env_start(&e, unfinished_handler, &sc, RESPONSE_MS,
			     TT_CONNECTED);
		expect_only(e.sp, 0);

		assert_op_fails(&e, "GET", "/v1/missing", TRANSPORT_OP_EXEC,
				"an unfinished 404", &err);
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
	struct sbx_error err;

	tt_env_start(&e, stalled_error_handler, &sc, RESPONSE_MS, TT_CONNECTED);
	expect_only(e.sp, 0);

	assert_op_fails(&e, "POST", "/v1/test", op, "a stalled error body",
			&err);
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

	/* A loop test over 0..5: the status, then the operation. */
	stalled_error_row(statuses[_i / 3], SEED_OPS[_i % 3]);
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

	rc = raw_send(fc->t, "POST", "/v1/first", TRANSPORT_OP_EXEC, &resp,
		      NULL, &err);
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
	long long elapsed;
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
	rc = raw_send(e.t, "POST", "/v1/second", TRANSPORT_OP_READ, &resp,
		      &elapsed, &err);
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

void transport_seed_bodies_cases(Suite *s)
{
	TCase *tc = TCASE_TABLE(
		s, "seed", NULL, NULL, 60,
		unfinished_not_found_body_is_bounded_and_never_replayed,
		stalled_unauthorized_body_does_not_block_same_session);

	/* The seed's status-by-operation scenarios: one run a row. */
	tcase_add_loop_test(
		tc, oversized_error_bodies_are_bounded_without_replay, 0, 12);
	tcase_add_loop_test(
		tc, stalled_error_body_is_bounded_and_never_replayed, 0, 6);
}
