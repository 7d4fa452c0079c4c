/* SPDX-License-Identifier: MIT */
/* transport_helpers: see transport_helpers.h. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/clock.h"
#include "tests/helpers.h"
#include "tests/transport_helpers.h"

const char *tt_cred(unsigned g)
{
	static __thread char text[4][45];
	static __thread unsigned next;
	char *out = text[next++ % 4];

	stub_provider_credential_for(g, out);
	return out;
}

/* ---- the stub agent's side ----------------------------------------------- */

bool tt_is(const struct stub_req *req, const char *method, const char *path)
{
	return strcmp(req->method, method) == 0 && strcmp(req->path, path) == 0;
}

enum stub_next tt_answered(int rc)
{
	return rc == 0 ? STUB_KEEP_OPEN : STUB_CLOSE;
}

enum stub_next tt_no_route(int fd)
{
	return tt_answered(stub_reply(fd, 404, NULL, NULL));
}

bool tt_header(const struct stub_req *req, const char *name, char *out,
	       size_t size)
{
	const char *p = req->headers;
	size_t n = strlen(name);

	while (p != NULL && *p != '\0') {
		const char *eol = strstr(p, "\r\n");
		size_t len = eol ? (size_t)(eol - p) : strlen(p);

		if (len > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1;

			while (*v == ' ')
				v++;
			snprintf(out, size, "%.*s",
				 (int)(len - (size_t)(v - p)), v);
			return true;
		}
		p = eol ? eol + 2 : NULL;
	}
	return false;
}

enum stub_next tt_silent_handler(struct stub_agent *s,
				 const struct stub_req *req, int fd, void *arg)
{
	(void)req;
	(void)fd;
	(void)arg;
	stub_wait(s, STUB_IDLE_MS);
	return STUB_CLOSE;
}

enum stub_next tt_health_handler(struct stub_agent *s,
				 const struct stub_req *req, int fd, void *arg)
{
	struct tt_health *h = arg;
	const char *answer;

	(void)s;
	if (!tt_is(req, "GET", "/v1/health"))
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	pthread_mutex_lock(&h->mu);
	h->polls++;
	answer = h->answer;
	pthread_mutex_unlock(&h->mu);
	return tt_answered(stub_reply(fd, 200, "application/json", answer));
}

enum stub_next tt_counting_handler(struct stub_agent *s,
				   const struct stub_req *req, int fd,
				   void *arg)
{
	struct tt_counting *c = arg;
	bool activate = tt_is(req, "POST", "/v1/activate");

	(void)s;
	pthread_mutex_lock(&c->mu);
	c->requests++;
	if (activate)
		c->activations++;
	pthread_mutex_unlock(&c->mu);
	if (activate)
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	return tt_answered(stub_reply(fd, 200, c->type, c->body));
}

enum stub_next tt_trickle_handler(struct stub_agent *s,
				  const struct stub_req *req, int fd, void *arg)
{
	const struct tt_trickle *tr = arg;
	int i;

	(void)req;
	if (stub_reply_head(fd, 200, TT_TEXT, tr->bytes, NULL) != 0)
		return STUB_CLOSE;
	for (i = 0; i < tr->bytes; i++)
		if (stub_send(fd, "t", 1) != 0 || !stub_wait(s, tr->gap_ms))
			break;
	return STUB_CLOSE;
}

/* ---- the client's side ---------------------------------------------------- */

void tt_req_init(struct transport_req *req, const char *method,
		 const char *path, const char *op, enum transport_class cls)
{
	memset(req, 0, sizeof(*req));
	req->op = op;
	req->cls = cls;
	req->method = method;
	req->path = path;
	req->max_body = 65536;
}

int tt_send_req(struct transport *t, const struct transport_req *req,
		struct transport_resp *resp, long long *elapsed,
		struct sbx_error *err)
{
	long long t0;
	int rc;

	transport_resp_init(resp);
	sbx_error_clear(err);
	t0 = th_now_ms();
	rc = transport_send(t, TT_SESSION, req, resp, err);
	if (elapsed != NULL)
		*elapsed = th_now_ms() - t0;
	return rc;
}

int tt_send(struct transport *t, const char *method, const char *path,
	    const char *op, enum transport_class cls, const char *json,
	    struct transport_resp *resp, struct sbx_error *err)
{
	struct transport_req req;

	tt_req_init(&req, method, path, op, cls);
	if (json != NULL) {
		req.content_type = "application/json";
		req.body = json;
		req.body_len = strlen(json);
	}
	return tt_send_req(t, &req, resp, NULL, err);
}

int tt_get(struct transport *t, const char *path, struct transport_resp *resp,
	   struct sbx_error *err)
{
	return tt_send(t, "GET", path, TRANSPORT_OP_READ, TRANSPORT_SAFE, NULL,
		       resp, err);
}

int tt_exec_post(struct transport *t, const char *path,
		 struct transport_resp *resp, struct sbx_error *err)
{
	return tt_send(t, "POST", path, TRANSPORT_OP_EXEC, TRANSPORT_COMMAND,
		       "{\"command\":[\"true\"],\"timeoutMs\":5000,"
		       "\"cwd\":null,\"env\":{}}",
		       resp, err);
}

void tt_http_req(struct transport_http_req *hr, const char *method,
		 const char *url, const char *json)
{
	memset(hr, 0, sizeof(*hr));
	hr->method = method;
	hr->url = url;
	hr->max_body = 65536;
	hr->connect_timeout_ms = 2000;
	hr->timeout_ms = 5000;
	if (json != NULL) {
		hr->content_type = "application/json";
		hr->body = json;
		hr->body_len = strlen(json);
	}
}

int tt_http_send(const struct transport_http_req *hr,
		 struct transport_resp *resp, struct sbx_error *err)
{
	transport_resp_init(resp);
	sbx_error_clear(err);
	return transport_http(hr, resp, err);
}

int tt_sink_to_buf(void *arg, const void *data, size_t len)
{
	return buf_append(arg, data, len);
}

bool tt_slot_empty(struct transport *t)
{
	char url[256];

	return !transport_test_cached_url(t, TT_SESSION, url, sizeof(url));
}

bool tt_slot_is(struct transport *t, const char *url)
{
	char have[256];

	return transport_test_cached_url(t, TT_SESSION, have, sizeof(have)) &&
	       strcmp(have, url) == 0;
}

bool tt_wait_flag(pthread_mutex_t *mu, pthread_cond_t *cond, const bool *flag,
		  long ms)
{
	long long until = clock_mono_ms() + ms;
	struct timespec ts;
	bool v;

	pthread_mutex_lock(mu);
	while (!*flag) {
		long long now = clock_mono_ms();

		if (now >= until)
			break;
		clock_deadline_in(&ts, (long)(until - now));
		pthread_cond_timedwait(cond, mu, &ts);
	}
	v = *flag;
	pthread_mutex_unlock(mu);
	return v;
}

bool tt_error_mentions(const struct sbx_error *err, const char *needle)
{
	char text[1024];

	sbx_error_describe(err, text, sizeof(text));
	return strstr(text, needle) != NULL;
}
