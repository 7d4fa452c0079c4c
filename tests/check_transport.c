/* SPDX-License-Identifier: MIT */
/*
 * The transport core beyond the seed's scenarios (those are in
 * check_transport_seed.c): connection reuse and concurrency, redirects,
 * the route policy and credential checks, the label decision, gone
 * sandboxes, typed file-extension refusals and the errno a user sees for
 * each outcome (SEMANTICS.md, errors). The deadlines are
 * check_transport_deadline.c's, transport_http and the stub agent itself
 * check_transport_http.c's.
 *
 * Everything runs on loopback against stub_agent and stub_provider; no
 * real agent or provider is involved.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "common/b64.h"
#include "common/proto.h"
#include "common/xalloc.h"
#include "client/provider.h"
#include "client/sbx_error.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"
#include "tests/transport_helpers.h"
#include "client/transport.h"
#include "client/transport_curl.h"

/* Deadline for the cases that measure one (small, to keep them quick). */
#define SHORT_MS 200L
/* Deadline for the cases that must not hit one. */
#define LONG_MS 5000L

static struct transport *new_transport(struct stub_provider *sp,
				       long response_ms)
{
	struct transport_config cfg;

	stub_transport_config(&cfg, response_ms, true);
	return stub_transport_new(sp, &cfg);
}

/* An agent whose activation succeeds and whose other routes answer
 * "pong" (tt_counting). */
#define PONG_AGENT                                                \
	{                                                         \
		.mu = PTHREAD_MUTEX_INITIALIZER, .type = TT_TEXT, \
		.body = "pong"                                    \
	}

static unsigned pong_activations(struct tt_counting *a)
{
	return th_locked_uint(&a->mu, &a->activations);
}

/* ---- connection reuse and concurrency ------------------------------------ */

/* Twenty sequential reads on one sandbox share one TCP connection. */
START_TEST(keep_alive_reuses_one_connection)
{
	struct tt_counting a = PONG_AGENT;
	struct tt_env e;
	struct transport_resp resp;
	struct sbx_error err;
	int i, rc;

	tt_env_start(&e, tt_counting_handler, &a, LONG_MS, TT_CONNECTED);
	for (i = 0; i < 20; i++) {
		rc = tt_get(e.t, "/v1/ping", &resp, &err);
		ck_assert_msg(rc == 0, "request %d: %d %s", i, rc, err.reason);
		ck_assert_int_eq(resp.status, 200);
		ck_assert_uint_eq(resp.body.len, 4);
		ck_assert_mem_eq(resp.body.data, "pong", 4);
		transport_resp_cleanup(&resp);
	}
	ck_assert_uint_eq(stub_agent_requests(e.s), 20);
	ck_assert_uint_eq(stub_agent_accepts(e.s), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 0);

	/* Forgetting the connection makes the next request fetch and
	 * activate afresh. */
	transport_forget(e.t, TT_SESSION);
	ck_assert(tt_slot_empty(e.t));
	stub_provider_set_route(e.sp, stub_agent_url(e.s));
	rc = tt_get(e.t, "/v1/ping", &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(pong_activations(&a), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL), 1);
	ck_assert(tt_slot_is(e.t, stub_agent_url(e.s)));

	tt_env_stop(&e);
}
END_TEST

#define THREADS 8
#define PER_THREAD 50

/* Counts every request by the id it carries (a query or a body). */
struct tally {
	pthread_mutex_t mu;
	unsigned seen[THREADS * PER_THREAD];
	unsigned strays;
	unsigned activations;
};

static enum stub_next tally_handler(struct stub_agent *s,
				    const struct stub_req *req, int fd,
				    void *arg)
{
	struct tally *ta = arg;
	const char *q = strstr(req->target, "?id=");
	char echo[32];
	unsigned id;
	int n = 0;

	(void)s;
	if (tt_is(req, "POST", "/v1/activate")) {
		pthread_mutex_lock(&ta->mu);
		ta->activations++;
		pthread_mutex_unlock(&ta->mu);
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	}
	if (tt_is(req, "GET", "/v1/echo") && q != NULL)
		n = sscanf(q + 4, "%u", &id);
	else if (tt_is(req, "POST", "/v1/echo"))
		n = sscanf(req->body, "{\"id\":%u}", &id);
	pthread_mutex_lock(&ta->mu);
	if (n == 1 && id < THREADS * PER_THREAD)
		ta->seen[id]++;
	else
		ta->strays++;
	pthread_mutex_unlock(&ta->mu);
	if (n != 1)
		return tt_answered(stub_reply(fd, 400, TT_TEXT, "no id"));
	snprintf(echo, sizeof(echo), "%u", id);
	return tt_answered(stub_reply(fd, 200, TT_TEXT, echo));
}

struct worker {
	struct transport *t;
	unsigned index;
	unsigned ok;
	char failure[1024];
};

/* Even workers send commands (never replayable), odd ones reads. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct transport_resp resp;
	struct sbx_error err;
	char path[64], body[64], want[32];
	unsigned j, id;
	int rc;

	for (j = 0; j < PER_THREAD; j++) {
		id = w->index * PER_THREAD + j;
		if (w->index % 2 == 0) {
			snprintf(body, sizeof(body), "{\"id\":%u}", id);
			rc = tt_send(w->t, "POST", "/v1/echo",
				     TRANSPORT_OP_EXEC, TRANSPORT_COMMAND, body,
				     &resp, &err);
		} else {
			snprintf(path, sizeof(path), "/v1/echo?id=%u", id);
			rc = tt_get(w->t, path, &resp, &err);
		}
		snprintf(want, sizeof(want), "%u", id);
		if (rc == 0 && resp.status == 200 && resp.body.data != NULL &&
		    strcmp(resp.body.data, want) == 0)
			w->ok++;
		else if (w->failure[0] == '\0')
			snprintf(w->failure, sizeof(w->failure),
				 "id %u: rc %d status %ld: %s", id, rc,
				 resp.status, err.reason);
		transport_resp_cleanup(&resp);
	}
	return NULL;
}

/*
 * Eight threads, fifty requests each, on one sandbox that has no
 * connection yet: every request succeeds with its own answer, the agent
 * sees each request exactly once, and the racing first requests share one
 * fetch and one activation.
 */
START_TEST(concurrent_requests_share_one_activation_without_replay)
{
	struct tally ta = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct worker w[THREADS];
	pthread_t th[THREADS];
	unsigned i;

	tt_env_start(&e, tally_handler, &ta, LONG_MS, TT_ROUTED);
	memset(w, 0, sizeof(w));
	for (i = 0; i < THREADS; i++) {
		w[i].t = e.t;
		w[i].index = i;
		ck_assert(pthread_create(&th[i], NULL, worker_main, &w[i]) ==
			  0);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < THREADS; i++)
		ck_assert_msg(w[i].ok == PER_THREAD, "worker %u: %u ok, %s", i,
			      w[i].ok, w[i].failure);
	pthread_mutex_lock(&ta.mu);
	for (i = 0; i < THREADS * PER_THREAD; i++)
		ck_assert_msg(ta.seen[i] == 1, "request %u seen %u times", i,
			      ta.seen[i]);
	ck_assert_uint_eq(ta.strays, 0);
	ck_assert_uint_eq(ta.activations, 1);
	pthread_mutex_unlock(&ta.mu);
	ck_assert_uint_eq(stub_agent_requests(e.s), THREADS * PER_THREAD + 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_RECORD), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_JUDGE), 1);

	tt_env_stop(&e);
}
END_TEST

/* ---- redirects, routes and credentials ----------------------------------- */

struct redirect {
	char location[128];
};

static enum stub_next redirect_handler(struct stub_agent *s,
				       const struct stub_req *req, int fd,
				       void *arg)
{
	struct redirect *r = arg;
	char extra[192];

	(void)s;
	(void)req;
	snprintf(extra, sizeof(extra), "Location: %s\r\n", r->location);
	return tt_answered(stub_reply_head(fd, 302, NULL, 0, extra));
}

/* A 302 to another agent is an error, and the other agent sees nothing. */
START_TEST(redirects_are_not_followed)
{
	struct tt_env e;
	struct transport_resp resp;
	struct stub_agent *a, *b;
	struct redirect r;
	struct sbx_error err;
	int rc;

	b = stub_agent_start(NULL, NULL);
	snprintf(r.location, sizeof(r.location), "%sv1/ping",
		 stub_agent_url(b));
	a = stub_agent_start(redirect_handler, &r);
	tt_env_start(&e, NULL, NULL, LONG_MS, 0);
	transport_test_set_connection(e.t, TT_SESSION, stub_agent_url(a),
				      tt_cred(7));

	rc = tt_get(e.t, "/v1/ping", &resp, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_int_eq(err.status, 302);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_COMMAND_FAILED");
	ck_assert(!err.retryable);
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(stub_agent_requests(a), 1);
	ck_assert_uint_eq(stub_agent_accepts(b), 0);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 0);

	transport_free(e.t);
	stub_agent_stop(a);
	stub_agent_stop(b);
	stub_provider_free(e.sp);
}
END_TEST

/* rc and err are a refusal: want_rc, the failure named, a command that
 * failed and may not be asked again, with errno -want_rc. */
static void assert_refused(int rc, const struct sbx_error *err, int want_rc,
			   const char *failure)
{
	ck_assert_int_eq(rc, want_rc);
	ck_assert_str_eq(sbx_code_name(err->code), "SANDBOX_COMMAND_FAILED");
	ck_assert_str_eq(err->failure, failure);
	ck_assert(!err->retryable);
	ck_assert_int_eq(sbx_error_errno(err), want_rc);
}

static void assert_transport_invalid(int rc, const struct sbx_error *err)
{
	assert_refused(rc, err, -EPROTO, SBX_FAIL_TRANSPORT_INVALID);
}

/* sp was asked for no route or credential, and to resume or stop
 * nothing. */
static void assert_nothing_resumed_or_routed(struct stub_provider *sp)
{
	ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_ROUTE), 0);
	ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_CREDENTIAL), 0);
	ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_RESUME), 0);
	ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_STOP), 0);
}

/* Both the kind and the caps of t's session are refused (assert_refused). */
static void assert_kind_and_caps_refused(struct transport *t, int want_rc,
					 const char *failure)
{
	struct transport_caps caps;
	enum transport_kind kind;
	struct sbx_error err;
	int rc;

	sbx_error_clear(&err);
	rc = transport_session_kind(t, TT_SESSION, TRANSPORT_OP_READ, &kind,
				    NULL, &err);
	assert_refused(rc, &err, want_rc, failure);
	sbx_error_clear(&err);
	rc = transport_session_caps(t, TT_SESSION, &caps, &err);
	assert_refused(rc, &err, want_rc, failure);
}

/*
 * A route the provider's policy refuses (wrong path, a query, a fragment,
 * user info, a name instead of the loopback literal, another host or
 * scheme) is agentTransportInvalid (-EPROTO) before the credential is read
 * and before anything connects; so is any route under a policy that
 * refuses all.
 */
START_TEST(route_policy_refusal_reads_no_credential)
{
	/* scheme and host, the port, then the rest */
	static const struct {
		const char *head, *tail;
	} routes[] = {
		{"http://127.0.0.1:", "/sub/"},
		{"http://127.0.0.1:", ""},
		{"http://127.0.0.1:", "/?x=1"},
		{"http://127.0.0.1:", "/#f"},
		{"http://user:pw@127.0.0.1:", "/"},
		{"http://localhost:", "/"},
		{"https://sandbox.example.com:", "/"},
		{"ftp://127.0.0.1:", "/"},
		{NULL, NULL}, /* a valid route under STUB_POLICY_REFUSE_ALL */
	};
	struct tt_counting a = PONG_AGENT;
	struct stub_agent *s = stub_agent_start(tt_counting_handler, &a);
	size_t i;

	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		struct stub_provider *sp = stub_provider_new();
		struct transport_resp resp;
		struct transport *t;
		struct sbx_error err;
		char route[160], checked[160];
		int rc;

		if (routes[i].head != NULL) {
			snprintf(route, sizeof(route), "%s%u%s", routes[i].head,
				 stub_agent_port(s), routes[i].tail);
		} else {
			snprintf(route, sizeof(route), "%s", stub_agent_url(s));
			stub_provider_set_policy(sp, STUB_POLICY_REFUSE_ALL);
		}
		stub_provider_set_route(sp, route);
		t = new_transport(sp, LONG_MS);
		rc = tt_get(t, "/v1/ping", &resp, &err);
		transport_resp_cleanup(&resp);
		assert_transport_invalid(rc, &err);
		stub_provider_last_checked_route(sp, checked, sizeof(checked));
		ck_assert_str_eq(checked, route);
		ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_CREDENTIAL),
				  0);
		ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_RECORD), 0);
		ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_JUDGE), 0);
		ck_assert(tt_slot_empty(t));
		transport_free(t);
		stub_provider_free(sp);
	}
	ck_assert_uint_eq(stub_agent_accepts(s), 0);
	stub_agent_stop(s);
}
END_TEST

/*
 * The per-boot credential must be exactly 44 characters of standard
 * base64 decoding to 32 bytes, untrimmed: 43 or 45 characters, a trailing
 * newline, the URL-safe alphabet, 44 characters that decode to 33 bytes
 * and a leading space are each agentTransportInvalid before activation; a
 * credential that is not there yet is a retryable unreachable error. A
 * valid one (the control) activates.
 */
START_TEST(credential_validation)
{
	char good[45], urlsafe[45], c33[45], b[64];
	struct {
		char text[64];
		size_t len;
	} bad[6];
	unsigned char raw[33];
	size_t i, nbad = 0;

	stub_provider_credential_for(7, good);
	/* 43 characters: the padding dropped */
	memcpy(bad[nbad].text, good, 43);
	bad[nbad++].len = 43;
	/* 45 characters */
	snprintf(bad[nbad].text, sizeof(bad[nbad].text), "%sA", good);
	bad[nbad++].len = 45;
	/* a trailing newline (the credential is not trimmed) */
	snprintf(bad[nbad].text, sizeof(bad[nbad].text), "%s\n", good);
	bad[nbad++].len = 45;
	/* the URL-safe alphabet: 0xfb bytes encode to "+/v7..." */
	stub_provider_credential_for(0xfb, urlsafe);
	ck_assert(strchr(urlsafe, '+') != NULL && strchr(urlsafe, '/'));
	for (i = 0; i < 44; i++)
		urlsafe[i] = urlsafe[i] == '+'	 ? '-'
			     : urlsafe[i] == '/' ? '_'
						 : urlsafe[i];
	memcpy(bad[nbad].text, urlsafe, 44);
	bad[nbad++].len = 44;
	/* 44 characters without padding: 33 bytes */
	memset(raw, 7, sizeof(raw));
	ck_assert_uint_eq(b64_encode(raw, sizeof(raw), c33), 44);
	memcpy(bad[nbad].text, c33, 44);
	bad[nbad++].len = 44;
	/* a leading space, 44 characters in all */
	b[0] = ' ';
	memcpy(b + 1, good, 43);
	memcpy(bad[nbad].text, b, 44);
	bad[nbad++].len = 44;

	for (i = 0; i <= nbad + 1; i++) {
		struct tt_counting a = PONG_AGENT;
		struct stub_provider *sp = stub_provider_new();
		struct stub_agent *s =
			stub_agent_start(tt_counting_handler, &a);
		struct transport_resp resp;
		struct transport *t;
		struct sbx_error err;
		int rc;

		stub_provider_set_route(sp, stub_agent_url(s));
		if (i < nbad)
			stub_provider_set_credential(sp, bad[i].text,
						     bad[i].len);
		else if (i == nbad)
			stub_provider_set_credential_errno(sp, -ENOENT);
		else
			stub_provider_set_generation(sp, 7);
		t = new_transport(sp, LONG_MS);
		rc = tt_get(t, "/v1/ping", &resp, &err);
		transport_resp_cleanup(&resp);
		if (i < nbad) {
			assert_transport_invalid(rc, &err);
		} else if (i == nbad) {
			ck_assert_int_lt(rc, 0);
			ck_assert_str_eq(sbx_code_name(err.code),
					 "SANDBOX_UNREACHABLE");
			ck_assert(err.retryable);
		} else {
			ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
			ck_assert_uint_eq(pong_activations(&a), 1);
			ck_assert(tt_slot_is(t, stub_agent_url(s)));
		}
		if (i <= nbad) {
			ck_assert_uint_eq(stub_agent_accepts(s), 0);
			ck_assert_uint_eq(
				stub_provider_calls(sp, STUB_CALL_RECORD), 0);
			ck_assert(tt_slot_empty(t));
		}
		ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_CREDENTIAL),
				  1);
		transport_free(t);
		stub_agent_stop(s);
		stub_provider_free(sp);
	}
}
END_TEST

/* ---- the label, gone sandboxes ------------------------------------------- */

static void record_with_label(struct provider_record *r, const char *value)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", TT_SESSION);
	r->state = PROVIDER_STATE_RUNNING;
	if (value != NULL) {
		r->labels = xcalloc(1, sizeof(*r->labels));
		r->labels[0].key = xstrdup(PROTO_TRANSPORT_LABEL);
		r->labels[0].value = xstrdup(value);
		r->nlabels = 1;
	}
}

/*
 * The label decides: absent is native, "native-file-v1" is the agent,
 * anything else (another version, empty) fails closed with
 * agentTransportInvalid; an existing session with an unknown label is
 * refused before any route or credential read, by every entry point.
 */
START_TEST(unknown_label_fails_closed_before_any_route_or_credential)
{
	static const char *const unknown[] = {"unknown", "", "native-file-v2",
					      "NATIVE-FILE-V1"};
	struct tt_env e;
	struct provider_record r;
	enum transport_kind kind;
	struct sbx_error err;
	size_t i;
	int rc;

	record_with_label(&r, NULL);
	sbx_error_clear(&err);
	ck_assert_int_eq(transport_kind_of(&r, &kind, &err), 0);
	ck_assert_int_eq(kind, TRANSPORT_NATIVE);
	provider_record_cleanup(&r);
	record_with_label(&r, PROTO_TRANSPORT_AGENT);
	ck_assert_int_eq(transport_kind_of(&r, &kind, &err), 0);
	ck_assert_int_eq(kind, TRANSPORT_AGENT);
	provider_record_cleanup(&r);
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		record_with_label(&r, unknown[i]);
		sbx_error_clear(&err);
		rc = transport_kind_of(&r, &kind, &err);
		assert_transport_invalid(rc, &err);
		provider_record_cleanup(&r);
	}

	tt_env_start(&e, NULL, NULL, SHORT_MS, 0);
	stub_provider_set_label(e.sp, STUB_LABEL_UNKNOWN);
	stub_provider_set_route(e.sp, "http://127.0.0.1:9/");
	assert_kind_and_caps_refused(e.t, -EPROTO, SBX_FAIL_TRANSPORT_INVALID);
	sbx_error_clear(&err);
	rc = transport_resume(e.t, TT_SESSION, NULL, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_COMMAND_FAILED");
	ck_assert_str_eq(err.failure, SBX_FAIL_TRANSPORT_INVALID);
	assert_nothing_resumed_or_routed(e.sp);
	ck_assert_uint_ge(stub_provider_calls(e.sp, STUB_CALL_RECORD), 3);

	tt_env_stop(&e);
}
END_TEST

/* A sandbox whose record is gone is sandboxGone (-ENOENT) everywhere,
 * and nothing is resumed, stopped, routed or read. */
START_TEST(gone_sandbox_is_enoent)
{
	struct tt_env e;
	struct sbx_error err;
	int rc;

	tt_env_start(&e, NULL, NULL, SHORT_MS, 0);
	stub_provider_set_gone(e.sp, true);
	assert_kind_and_caps_refused(e.t, -ENOENT, SBX_FAIL_GONE);
	sbx_error_clear(&err);
	rc = transport_resume(e.t, TT_SESSION, NULL, &err);
	assert_refused(rc, &err, -ENOENT, SBX_FAIL_GONE);
	assert_nothing_resumed_or_routed(e.sp);

	tt_env_stop(&e);
}
END_TEST

/* ---- typed refusals of the file extension -------------------------------- */

struct fs_refusal {
	int status;
	const char *body;
};

static enum stub_next fs_refusal_handler(struct stub_agent *s,
					 const struct stub_req *req, int fd,
					 void *arg)
{
	const struct fs_refusal *f = arg;

	(void)s;
	(void)req;
	return tt_answered(stub_reply(fd, f->status, TT_TEXT, f->body));
}

/*
 * A typed FS_ERROR answer (the agent sends them with 409, and 412 for a
 * failed validator) proves the agent holding the route answered: the
 * errno it names is the result, the route stays cached, and nothing is
 * refreshed or replayed.
 */
START_TEST(typed_fs_error_keeps_the_route)
{
	static const struct {
		struct fs_refusal answer;
		int err;
	} rows[] = {
		{{409, "FS_ERROR: EEXIST: File exists: a"}, EEXIST},
		{{409, "FS_ERROR: ENOTEMPTY: Directory not empty: a"},
		 ENOTEMPTY},
		{{409, "FS_ERROR: ELOOP: path leaves the session root: a"},
		 ELOOP},
		{{412, "FS_ERROR: ESTALE: the file changed: a"}, ESTALE},
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct tt_env e;
		struct transport_resp resp;
		struct sbx_error err;
		int rc;

		tt_env_start(&e, fs_refusal_handler, (void *)&rows[i].answer,
			     LONG_MS, TT_ROUTED | TT_CONNECTED);
		rc = tt_send(e.t, "POST", "/v1/ext/mkdir", TRANSPORT_OP_FILES,
			     TRANSPORT_SAFE, "{\"path\":\"a\"}", &resp, &err);
		transport_resp_cleanup(&resp);
		ck_assert_msg(rc == -rows[i].err, "row %zu: %d %s", i, rc,
			      err.reason);
		ck_assert_str_eq(sbx_code_name(err.code),
				 "SANDBOX_COMMAND_FAILED");
		ck_assert_str_eq(err.failure, SBX_FAIL_AGENT_REFUSED);
		ck_assert(!err.retryable);
		ck_assert_int_eq(err.status, rows[i].answer.status);
		ck_assert_int_eq(sbx_error_errno(&err), -rows[i].err);
		ck_assert(tt_slot_is(e.t, stub_agent_url(e.s)));
		ck_assert_uint_eq(stub_agent_requests(e.s), 1);
		ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE),
				  0);
		ck_assert_uint_eq(
			stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL), 0);
		tt_env_stop(&e);
	}
}
END_TEST

/* ---- the errno a user sees (SEMANTICS.md, errors) --------------------------------- */

/* Each refusal row of SEMANTICS.md's errors, with bounded (not NUL-terminated)
 * bodies. */
START_TEST(refusal_errno_mapping)
{
	static const struct {
		long status;
		const char *body;
		int err;
	} rows[] = {
		{404, "PATH_NOT_FOUND: No such file in the sandbox: a", ENOENT},
		{404, "JOB_NOT_FOUND: Job 'j' was not found", ENOENT},
		{404, "", ENOENT},
		{404, "gone", ENOENT},
		{400,
		 "PATH_REFUSED: Path '../a' refused: path traverses "
		 "upward",
		 EACCES},
		{400,
		 "PATH_REFUSED: Path 'l/x' refused: path leaves the "
		 "session root",
		 ELOOP},
		{400,
		 "REQUEST_INVALID: Request invalid: 'd' is not a regular "
		 "file",
		 EISDIR},
		{400,
		 "REQUEST_INVALID: Request invalid: 'f' is over the "
		 "33554432 byte transfer limit",
		 EFBIG},
		{400,
		 "REQUEST_INVALID: Request invalid: 40000000 bytes "
		 "exceeds the 33554432 byte transfer limit",
		 EFBIG},
		{401, "refused", EACCES},
		{401, "a capability is required", EACCES},
		{403,
		 "SANDBOX_CAPABILITY_REFUSED: Sandbox capability "
		 "refused: expired",
		 EACCES},
		{403, "the agent does not serve the code it is running",
		 EACCES},
		{413, "", EFBIG},
		{409, "FS_ERROR: EEXIST: File exists", EEXIST},
		{400, "FS_ERROR: ENOTDIR: Not a directory", ENOTDIR},
		{404, "FS_ERROR: ENOENT: No such file or directory", ENOENT},
		{400, "FS_ERROR: EISDIR: Is a directory", EISDIR},
		{422, "Failed to deserialize the JSON body", EIO},
		{405, "", EIO},
		{415, "Expected request with `Content-Type: application/json`",
		 EIO},
	};
	char copy[256];
	size_t i, n;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		/* No terminator after the body: the length is the bound. */
		n = strlen(rows[i].body);
		memcpy(copy, rows[i].body, n);
		memset(copy + n, 'Z', sizeof(copy) - n);
		ck_assert_msg(sbx_errno_for_refusal(rows[i].status, copy, n) ==
				      rows[i].err,
			      "row %zu (%ld %s): %d", i, rows[i].status,
			      rows[i].body,
			      sbx_errno_for_refusal(rows[i].status, copy, n));
	}
	/* A prefix cut by the length is not typed. */
	ck_assert_int_eq(sbx_errno_for_refusal(400, "PATH_NOT_FOUND: a", 9),
			 EIO);
	ck_assert_int_eq(sbx_errno_for_refusal(403, NULL, 0), EACCES);
	ck_assert_int_eq(sbx_errno_for_refusal(404, NULL, 0), ENOENT);
}
END_TEST

/* The outcome rows of SEMANTICS.md's errors, through sbx_error_set, with the binding
 * codes and retryable flags of doc/transport-rules.md 6. */
START_TEST(outcome_errno_mapping)
{
	static const struct {
		enum sbx_code code;
		const char *failure;
		const char *name;
		bool retryable;
		int err;
	} rows[] = {
		{SBX_COMMAND_FAILED, SBX_FAIL_GONE, "SANDBOX_COMMAND_FAILED",
		 false, ENOENT},
		{SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
		 "SANDBOX_COMMAND_FAILED", false, EACCES},
		{SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
		 "SANDBOX_COMMAND_FAILED", false, EPROTO},
		{SBX_UNREACHABLE, NULL, "SANDBOX_UNREACHABLE", true, EIO},
		{SBX_OUTCOME_UNKNOWN, NULL, "SANDBOX_OUTCOME_UNKNOWN", false,
		 EIO},
		{SBX_NOT_SUPPORTED, NULL, "OPERATION_NOT_SUPPORTED", false,
		 EOPNOTSUPP},
		{SBX_UNEXPECTED_FORMAT, NULL, "UNEXPECTED_RESPONSE_FORMAT",
		 false, EIO},
		{SBX_INVALID_INPUT, NULL, "INVALID_INPUT", false, EINVAL},
	};
	struct sbx_error err;
	char text[1024];
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		sbx_error_clear(&err);
		sbx_error_set(&err, rows[i].code, rows[i].failure, "%s %d",
			      "reason", (int)i);
		ck_assert_str_eq(sbx_code_name(err.code), rows[i].name);
		ck_assert_int_eq(err.retryable, rows[i].retryable);
		ck_assert_int_eq(sbx_error_errno(&err), -rows[i].err);
		sbx_error_describe(&err, text, sizeof(text));
		ck_assert_msg(
			strncmp(text, rows[i].name, strlen(rows[i].name)) == 0,
			"%s", text);
		ck_assert_ptr_nonnull(strstr(text, "reason"));
		if (rows[i].failure != NULL)
			ck_assert_ptr_nonnull(strstr(text, rows[i].failure));
	}
	/* An error never set is still a failure. */
	sbx_error_clear(&err);
	ck_assert_int_eq(sbx_error_errno(&err), -EIO);
	ck_assert_int_eq(sbx_error_errno(NULL), -EIO);
}
END_TEST

/* ---- who answers a loopback TCP connection -------------------------------- */

struct accepter {
	int lfd; /* the listener */
	uid_t fsuid; /* the file system uid the accepting thread takes */
	int afd; /* the accepted socket */
};

static void *accept_as(void *arg)
{
	struct accepter *ac = arg;

	setfsuid(ac->fsuid);
	ac->afd = accept(ac->lfd, NULL, NULL);
	return NULL;
}

static int loopback_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	return ntohs(sa.sin_port);
}

/* The listener's owner answers for the connection, not the accepted
 * socket's: accept(2) gives that one the accepting thread's file system
 * uid, which an agent thread that served a file route has changed to
 * the sandbox user's. Run as root, the accepting thread takes uid 65534;
 * otherwise the thread cannot change it and the two owners are the same. */
START_TEST(tcp_peer_is_the_listener_owner)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct accepter ac = {.fsuid = geteuid() == 0 ? 65534 : geteuid()};
	int cfd, port, lport;
	pthread_t th;

	ac.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(ac.lfd, 0);
	ck_assert_int_eq(bind(ac.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(ac.lfd, 4), 0);
	port = loopback_port(ac.lfd);
	sa.sin_port = htons((uint16_t)port);
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(cfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	lport = loopback_port(cfd);
	ck_assert_int_eq(pthread_create(&th, NULL, accept_as, &ac), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_ge(ac.afd, 0);
	ck_assert_int_eq(
		xfer_tcp_peer_uid("127.0.0.1", port, "127.0.0.1", lport),
		(long)geteuid());
	/* With the listener gone, the accepted socket is all there is. */
	close(ac.lfd);
	ck_assert_int_eq(
		xfer_tcp_peer_uid("127.0.0.1", port, "127.0.0.1", lport),
		(long)ac.fsuid);
	/* Nothing on that address and port: nobody can be told. */
	close(ac.afd);
	close(cfd);
	ck_assert_int_eq(xfer_tcp_peer_uid("127.0.0.1", port, "127.0.0.2", 1),
			 -1);
}
END_TEST

void transport_cases(Suite *s)
{
	TCASE_TABLE(s, "pool", NULL, NULL, 60, keep_alive_reuses_one_connection,
		    concurrent_requests_share_one_activation_without_replay);
	TCASE_TABLE(s, "policy", NULL, NULL, 30, redirects_are_not_followed,
		    route_policy_refusal_reads_no_credential,
		    credential_validation,
		    unknown_label_fails_closed_before_any_route_or_credential,
		    gone_sandbox_is_enoent, typed_fs_error_keeps_the_route);
	TCASE_TABLE(s, "errno", NULL, NULL, 0, refusal_errno_mapping,
		    outcome_errno_mapping);
	TCASE_TABLE(s, "listener", NULL, NULL, 0,
		    tcp_peer_is_the_listener_owner);
}
