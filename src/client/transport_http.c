/* SPDX-License-Identifier: MIT */
/*
 * transport_http: plain HTTP for the providers' control planes (see
 * transport_http in transport.h): no agent rules, one bounded exchange on
 * the curl engine, proxies from the environment.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "client/transport.h"
#include "client/transport_curl.h"
#include "client/transport_i.h"

/* The idle handles a pool keeps at the most. */
#define HTTP_POOL_IDLE 8

struct transport_http_pool {
	struct xfer_pool xp;
};

struct transport_http_pool *transport_http_pool_new(void)
{
	struct transport_http_pool *p = xcalloc(1, sizeof(*p));

	xfer_pool_init(&p->xp, HTTP_POOL_IDLE);
	return p;
}

void transport_http_pool_free(struct transport_http_pool *p)
{
	if (p == NULL)
		return;
	xfer_pool_cleanup(&p->xp);
	free(p);
}

/* What became of the exchange, as transport_http tells it. */
static int http_outcome(const struct transport_http_req *hreq,
			enum xfer_outcome o, const struct xfer *x,
			struct sbx_error *err)
{
	switch (o) {
	case XFER_OK:
		return 0;
	case XFER_TOO_BIG:
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "the answer is larger than %zu bytes",
			      hreq->max_body);
		return -EFBIG;
	case XFER_TIMEOUT:
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "no answer before the deadline");
		return -ETIMEDOUT;
	case XFER_CONNECT:
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "could not connect (%s)", x->errbuf);
		return -ECONNREFUSED;
	default:
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "the exchange failed (%s)",
			      x->errbuf[0] ? x->errbuf : "connection closed");
		return -EIO;
	}
}

int transport_http(const struct transport_http_req *hreq,
		   struct transport_resp *resp, struct sbx_error *err)
{
	bool safe = strcmp(hreq->method, "GET") == 0 ||
		    strcmp(hreq->method, "HEAD") == 0;
	struct transport_req req = {
		.op = "provider.http",
		.cls = safe ? TRANSPORT_SAFE : TRANSPORT_CHANGE,
		.method = hreq->method,
		.path = "",
		.max_body = hreq->max_body,
	};
	struct xfer_spec spec = {
		.url = hreq->url,
		.method = hreq->method,
		.headers = hreq->headers,
		.content_type = hreq->content_type,
		.body = hreq->body,
		.body_len = hreq->body_len,
		.connect_ms = hreq->connect_timeout_ms,
		.ca_file = hreq->ca_file,
		.resolve = hreq->resolve,
		/* A provider call that is not a GET may change something
		 * (a resume, a command through executeShellCommand): never
		 * on a kept-alive connection libcurl might silently send it
		 * on again (doc/transport-rules.md 8). */
		.fresh = !safe,
	};
	struct xfer_pool once, *pool;
	struct xfer_handle *h;
	struct xfer x;
	enum xfer_outcome o;
	long long deadline;
	int rc;

	if (xfer_global_init() < 0)
		return -EIO;
	sbx_error_clear(err);
	deadline = tr_earliest(clock_mono_ms() + (hreq->timeout_ms > 0
							  ? hreq->timeout_ms
							  : 60000),
			       transport_op_deadline());
	if (clock_mono_ms() >= deadline) {
		tr_op_late(err, "provider.http", "before the request was sent");
		return -ETIMEDOUT;
	}
	/* Without a pool of the caller's, a pool that keeps nothing: the
	 * handle is freed when it is given back. */
	xfer_pool_init(&once, 0);
	pool = hreq->pool != NULL ? &hreq->pool->xp : &once;
	h = xfer_pool_take(pool);
	resp->body.max = hreq->max_body;
	xfer_init(&x, h, &req, resp);
	rc = xfer_setup(&x, &spec);
	if (rc < 0) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "%s: the request could not be prepared", req.op);
		goto out;
	}
	o = xfer_run(&x, deadline, 0);
	if (o == XFER_OK) {
		/* Any status is an answer; the body is read whole. */
		xfer_resume_as(&x, XFER_BODY);
		o = xfer_run(&x, deadline, 0);
	}
	rc = http_outcome(hreq, o, &x, err);
out:
	xfer_finish(&x);
	xfer_pool_give(pool, h);
	xfer_pool_cleanup(&once);
	return rc;
}
