/* SPDX-License-Identifier: MIT */
/*
 * The suite "transport_http": transport_http, the providers' plain client
 * (bounded, no redirects, deadlines), and the stub agent itself, which
 * every transport suite trusts. Everything runs on loopback against
 * stub_agent.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Deadline for the cases that measure one (small, to keep them quick). */
/* ---- transport_http ------------------------------------------------------ */

struct http_seen {
	pthread_mutex_t mu;
	char method[16];
	char target[2048];
	char auth[512];
	char headers[2048];
	char body[256];
	char location[128];
};

static enum stub_next http_handler(struct stub_agent *s,
				   const struct stub_req *req, int fd,
				   void *arg)
{
	struct http_seen *h = arg;
	char big[5000], extra[192];

	(void)s;
	pthread_mutex_lock(&h->mu);
	snprintf(h->method, sizeof(h->method), "%s", req->method);
	snprintf(h->target, sizeof(h->target), "%s", req->target);
	snprintf(h->auth, sizeof(h->auth), "%s", req->auth);
	snprintf(h->headers, sizeof(h->headers), "%s", req->headers);
	snprintf(h->body, sizeof(h->body), "%s", req->body);
	snprintf(extra, sizeof(extra), "Location: %s\r\n", h->location);
	pthread_mutex_unlock(&h->mu);
	if (strcmp(req->path, "/plain") == 0)
		return tt_answered(stub_reply(fd, 200, "application/json",
					      "{\"hello\":1}"));
	if (strcmp(req->path, "/redirect") == 0)
		return tt_answered(stub_reply_head(fd, 302, NULL, 0, extra));
	if (strcmp(req->path, "/big") == 0) {
		memset(big, 'b', sizeof(big));
		return tt_answered(
			stub_reply_n(fd, 200, TT_TEXT, big, sizeof(big)));
	}
	if (strcmp(req->path, "/stall") == 0) {
		stub_wait(s, STUB_IDLE_MS);
		return STUB_CLOSE;
	}
	return tt_answered(stub_reply(fd, 404, NULL, NULL));
}

/*
 * transport_http, the providers' plain client: a GET with extra headers
 * and a POST with a typed body arrive as sent; a 3xx is returned, not
 * followed (the target sees nothing); a body over max_body is -EFBIG; a
 * refused port and a silent server are errors within their deadlines.
 */
START_TEST(transport_http_is_bounded_and_follows_nothing)
{
	static const char *const headers[] = {"Authorization: Bearer secret",
					      "X-Test: 1", NULL};
	struct http_seen h = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct transport_http_req hr;
	struct transport_resp resp;
	struct stub_agent *s, *other;
	struct sbx_error err;
	char url[256], refused[64];
	long long t0, elapsed;
	int rc;

	other = stub_agent_start(NULL, NULL);
	snprintf(h.location, sizeof(h.location), "%splain",
		 stub_agent_url(other));
	s = stub_agent_start(http_handler, &h);

	snprintf(url, sizeof(url), "%splain?x=1", stub_agent_url(s));
	tt_http_req(&hr, "GET", url, NULL);
	hr.headers = headers;
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_int_eq(resp.status, 200);
	ck_assert_str_eq(resp.body.data, "{\"hello\":1}");
	ck_assert_str_eq(resp.content_type, "application/json");
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&h.mu);
	ck_assert_str_eq(h.method, "GET");
	ck_assert_str_eq(h.target, "/plain?x=1");
	ck_assert_str_eq(h.auth, "Bearer secret");
	ck_assert_ptr_nonnull(strstr(h.headers, "X-Test: 1\r\n"));
	pthread_mutex_unlock(&h.mu);

	snprintf(url, sizeof(url), "%splain", stub_agent_url(s));
	tt_http_req(&hr, "POST", url, "{\"a\":2}");
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&h.mu);
	ck_assert_str_eq(h.method, "POST");
	ck_assert_str_eq(h.body, "{\"a\":2}");
	ck_assert_ptr_nonnull(
		strstr(h.headers, "Content-Type: application/json\r\n"));
	pthread_mutex_unlock(&h.mu);

	snprintf(url, sizeof(url), "%sredirect", stub_agent_url(s));
	tt_http_req(&hr, "GET", url, NULL);
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_int_eq(resp.status, 302);
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(stub_agent_accepts(other), 0);

	snprintf(url, sizeof(url), "%sbig", stub_agent_url(s));
	tt_http_req(&hr, "GET", url, NULL);
	hr.max_body = 1000;
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_int_eq(rc, -EFBIG);
	transport_resp_cleanup(&resp);
	hr.max_body = 5000;
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_uint_eq(resp.body.len, 5000);
	transport_resp_cleanup(&resp);

	stub_refused_url(refused, sizeof(refused));
	tt_http_req(&hr, "GET", refused, NULL);
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_int_ne(err.code, SBX_OK);
	transport_resp_cleanup(&resp);

	snprintf(url, sizeof(url), "%sstall", stub_agent_url(s));
	tt_http_req(&hr, "GET", url, NULL);
	hr.timeout_ms = 300;
	transport_resp_init(&resp);
	sbx_error_clear(&err);
	t0 = th_now_ms();
	rc = transport_http(&hr, &resp, &err);
	elapsed = th_now_ms() - t0;
	ck_assert_int_lt(rc, 0);
	ck_assert_int_ne(err.code, SBX_OK);
	ck_assert_msg(elapsed >= 280 && elapsed < 2000, "%lld ms", elapsed);
	transport_resp_cleanup(&resp);

	stub_agent_stop(s);
	stub_agent_stop(other);
}
END_TEST

/* Send method to url through pool (NULL: none) and check the plain
 * answer. */
static void ask_plain(const char *method, const char *url,
		      struct transport_http_pool *pool)
{
	struct transport_http_req hr;
	struct transport_resp resp;
	struct sbx_error err;
	int rc;

	tt_http_req(&hr, method, url, strcmp(method, "GET") ? "{}" : NULL);
	hr.pool = pool;
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_str_eq(resp.body.data, "{\"hello\":1}");
	transport_resp_cleanup(&resp);
}

/*
 * A caller's pool keeps the connection between its requests (one accept
 * for three GETs); without a pool every request has a connection of its
 * own, and so has a POST even with one (it may change something, and is
 * never sent where a kept-alive connection could send it again).
 */
START_TEST(a_pool_keeps_the_connection_of_its_owner)
{
	struct http_seen h = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct transport_http_pool *pool = transport_http_pool_new();
	struct stub_agent *s = stub_agent_start(http_handler, &h);
	char url[256];
	int i;

	snprintf(url, sizeof(url), "%splain", stub_agent_url(s));
	for (i = 0; i < 3; i++)
		ask_plain("GET", url, pool);
	ck_assert_uint_eq(stub_agent_accepts(s), 1);
	ask_plain("GET", url, NULL);
	ask_plain("GET", url, NULL);
	ck_assert_uint_eq(stub_agent_accepts(s), 3);
	ask_plain("POST", url, pool);
	ck_assert_uint_eq(stub_agent_accepts(s), 4);
	ask_plain("GET", url, pool);
	ck_assert_uint_le(stub_agent_accepts(s), 5);
	transport_http_pool_free(pool);
	transport_http_pool_free(NULL);
	stub_agent_stop(s);
}
END_TEST

/* ---- the stub agent itself ----------------------------------------------- */

struct stall_probe {
	bool full; /* what stub_wait returned */
	unsigned nth;
};

static enum stub_next stall_probe_handler(struct stub_agent *s,
					  const struct stub_req *req, int fd,
					  void *arg)
{
	struct stall_probe *p = arg;

	if (strcmp(req->path, "/stall") == 0) {
		p->full = stub_wait(s, STUB_IDLE_MS);
		return STUB_CLOSE;
	}
	p->nth = req->nth;
	if (strcmp(req->path, "/last") == 0) {
		stub_reply(fd, 200, TT_TEXT, "last");
		return STUB_CLOSE;
	}
	return tt_answered(stub_reply(fd, 200, TT_TEXT, "more"));
}

/*
 * The fixtures the other cases trust: two requests on one connection are
 * one accept and two requests; a stalled handler ends as soon as the stub
 * stops; the refused URL refuses.
 */
START_TEST(stub_agent_counts_and_stops_promptly)
{
	static const char two[] = "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
				  "POST /last HTTP/1.1\r\nHost: x\r\n"
				  "Content-Length: 3\r\n\r\nabc";
	static const char stall[] = "GET /stall HTTP/1.1\r\nHost: x\r\n\r\n";
	struct stall_probe p = {.full = true};
	struct buf out = BUF_INIT(65536);
	struct stub_agent *s;
	char refused[64];
	unsigned port;
	long long t0;

	s = stub_agent_start(stall_probe_handler, &p);
	ck_assert_int_gt(
		th_raw(stub_agent_port(s), two, sizeof(two) - 1, &out, 2000),
		0);
	ck_assert_ptr_nonnull(strstr(out.data, "HTTP/1.1 200 OK\r\n"));
	ck_assert_ptr_nonnull(strstr(out.data, "\r\n\r\nmore"));
	ck_assert_ptr_nonnull(strstr(out.data, "\r\n\r\nlast"));
	ck_assert_uint_eq(stub_agent_accepts(s), 1);
	ck_assert_uint_eq(stub_agent_requests(s), 2);

	buf_reset(&out);
	ck_assert_int_eq(
		th_raw(stub_agent_port(s), stall, sizeof(stall) - 1, &out, 100),
		0);
	ck_assert(stub_agent_wait_requests(s, 3, 2000));
	t0 = th_now_ms();
	stub_agent_stop(s);
	ck_assert_int_lt(th_now_ms() - t0, 1000);
	ck_assert(!p.full);
	ck_assert_uint_eq(p.nth, 2);

	stub_refused_url(refused, sizeof(refused));
	ck_assert_int_eq(sscanf(refused, "http://127.0.0.1:%u/", &port), 1);
	ck_assert_int_eq(th_raw(port, stall, sizeof(stall) - 1, &out, 500), -1);
	buf_cleanup(&out);
}
END_TEST

void transport_http_cases(Suite *s)
{
	TCASE_TABLE(s, "http", NULL, NULL, 30,
		    transport_http_is_bounded_and_follows_nothing,
		    a_pool_keeps_the_connection_of_its_owner);
	TCASE_TABLE(s, "stub", NULL, NULL, 30,
		    stub_agent_counts_and_stops_promptly);
}
