/* SPDX-License-Identifier: MIT */
/*
 * http_access: the access handler. Everything decided from the request
 * line and headers (the route, the credential, the activation gate, the
 * content type, the framing, the declared length), the body read up to
 * the route's limit, the reply cache's say for a keyed request, and the
 * call of the route's handler; and the accessors handlers read the
 * request by (http.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/http_i.h"
#include "agent/resolve.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/token.h"
#include "common/xalloc.h"

/* A chunked body past its limit is read and thrown away to its end so the
 * 413 can be sent; past this much it is not worth the bandwidth, and the
 * connection is closed instead. */
#define HTTP_DISCARD_MAX (64UL * 1024 * 1024)

/* ---- small helpers -------------------------------------------------------- */

/* A copy of s fit for one log line: printable ASCII, bounded. */
static void log_safe(char *dst, size_t dstsz, const char *s)
{
	size_t i;

	for (i = 0; s != NULL && s[i] != '\0' && i + 1 < dstsz; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	dst[i] = '\0';
}
/* ---- request accessors ---------------------------------------------------- */

struct agent *agent_req_agent(const struct agent_req *r)
{
	return r->h->a;
}

const char *agent_req_path(const struct agent_req *r)
{
	return r->path;
}

const char *agent_req_query_n(const struct agent_req *r, const char *key,
			      size_t *len)
{
	const char *v = NULL;
	size_t n = 0;

	if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, key,
					  strlen(key), &v, &n) != MHD_YES)
		return NULL;
	if (v == NULL) {
		v = "";
		n = 0;
	}
	if (len != NULL)
		*len = n;
	return v;
}

const char *agent_req_query(const struct agent_req *r, const char *key)
{
	return agent_req_query_n(r, key, NULL);
}

int agent_req_query_dec(const struct agent_req *r, const char *key,
			uint64_t max, uint64_t *out)
{
	const char *s = agent_req_query(r, key);
	uint64_t v = 0;

	if (s == NULL)
		return 0;
	if (*s == '\0' || strlen(s) > 20)
		return -EINVAL;
	for (; *s != '\0'; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		d = (unsigned)(*s - '0');
		if (d > max || v > (max - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

const char *agent_req_header(const struct agent_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *agent_req_body(const struct agent_req *r, size_t *len)
{
	if (len != NULL)
		*len = r->body.len;
	return r->body.data != NULL ? r->body.data : "";
}

bool agent_req_is_json(const struct agent_req *r)
{
	const char *ct = agent_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
	size_t n;

	if (ct == NULL)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	n = strcspn(ct, "; \t");
	/* application/json, or any application/...+json (as axum). */
	if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
		return true;
	return n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
	       strncasecmp(ct + n - 5, "+json", 5) == 0;
}

/* ---- the access handler --------------------------------------------------- */

static size_t route_limit(const struct agent_http *h,
			  const struct agent_route *rt)
{
	switch (rt->limit) {
	case AGENT_LIM_NONE:
		return 0;
	case AGENT_LIM_SMALL:
		return HTTP_SMALL_BODY;
	case AGENT_LIM_FILES:
		return PROTO_HTTP_BODY_LIMIT;
	case AGENT_LIM_EXEC:
		return PROTO_EXEC_MAX_BODY;
	case AGENT_LIM_EXT_WRITE:
		return h->a->cfg.ext_max_write;
	}
	return 0;
}

static int reply_header_only(struct agent_req *r, unsigned status,
			     const char *name, const char *value)
{
	struct MHD_Response *resp = http_empty_response();

	if (resp == NULL)
		return -ENOMEM;
	MHD_add_response_header(resp, name, value);
	return http_queue(r, status, resp);
}

static int reply_unauthorized(struct agent_req *r, const char *text)
{
	struct MHD_Response *resp =
		http_text_response(text, strlen(text), true);

	if (resp == NULL)
		return -ENOMEM;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
				"Bearer");
	return http_queue(r, 401, resp);
}

/* doc/protocol-v1.md 2: "Authorization: Bearer <token>", compared in constant
 * time. */
static enum pending check_credential(const struct agent_req *r)
{
	const struct agent *a = r->h->a;
	const char *v = agent_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);

	if (v == NULL || strncmp(v, "Bearer ", 7) != 0)
		return PEND_NO_CREDENTIAL;
	v += 7;
	if (!token_equal(v, strlen(v), a->token, strlen(a->token)))
		return PEND_BAD_CREDENTIAL;
	return PEND_NONE;
}

static int reply_framing(struct agent_req *r);

static enum MHD_Result answer_pending(struct agent_req *r)
{
	switch (r->pending) {
	case PEND_NONE:
		break;
	case PEND_NOT_FOUND:
		/* An unknown path is an empty 404: clients read an untyped
		 * 404 as a stale route (doc/transport-rules.md 4). */
		agent_reply_empty(r, 404);
		break;
	case PEND_METHOD:
		reply_header_only(r, 405, MHD_HTTP_HEADER_ALLOW, r->allow);
		break;
	case PEND_NO_CREDENTIAL:
		reply_unauthorized(r, "a credential is required");
		break;
	case PEND_BAD_CREDENTIAL:
		reply_unauthorized(r, "the credential was refused");
		break;
	case PEND_NOT_ACTIVATED:
		agent_reply_error(r, 503, PROTO_ERR_NOT_ACTIVATED,
				  "the agent has not been activated for this "
				  "boot");
		break;
	case PEND_NOT_JSON:
		agent_reply_text(r, 415, AGENT_TEXT_JSON_TYPE);
		break;
	case PEND_FRAMING:
		reply_framing(r);
		break;
	}
	return r->replied ? MHD_YES : MHD_NO;
}

/* A Content-Length the request declares: -1 when none, -2 when garbled
 * (anything but decimal digits, a list included). */
static long long declared_length(const struct agent_req *r)
{
	const char *v = agent_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long n;
	char *end;

	if (v == NULL)
		return -1;
	if (*v < '0' || *v > '9')
		return -2;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || n > (unsigned long long)LLONG_MAX)
		return -2;
	return (long long)n;
}

struct framing {
	unsigned lengths; /* Content-Length headers */
	unsigned encodings; /* Transfer-Encoding headers */
	bool chunked; /* the one encoding is exactly "chunked" */
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind,
				     const char *key, const char *value)
{
	struct framing *f = cls;

	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		f->lengths++;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->encodings++;
		f->chunked = value != NULL && strcasecmp(value, "chunked") == 0;
	}
	return MHD_YES;
}

/*
 * A body whose end two readers could place differently is refused
 * (RFC 9112 6.3; doc/protocol-v1.md 1): Content-Length together with
 * Transfer-Encoding, Content-Length given twice (equal or not), an
 * encoding other than chunked alone. The library would pick one reading;
 * a proxy in front of the agent might pick the other.
 */
static const char *framing_error(const struct agent_req *r)
{
	struct framing f = {0, 0, false};

	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_framing, &f);
	if (f.lengths > 0 && f.encodings > 0)
		return "Content-Length and Transfer-Encoding together";
	if (f.lengths > 1)
		return "more than one Content-Length";
	if (f.encodings > 1 || (f.encodings == 1 && !f.chunked))
		return "a Transfer-Encoding other than chunked";
	return NULL;
}

/* 400 for ambiguous framing; the connection is closed after it, since
 * where the next request would begin is not known. */
static int reply_framing(struct agent_req *r)
{
	const char *why = framing_error(r);
	char text[128];
	struct MHD_Response *resp;

	snprintf(text, sizeof(text), "Invalid request framing: %s",
		 why != NULL ? why : "unreadable");
	resp = http_text_response(text, strlen(text), true);
	if (resp == NULL)
		return -ENOMEM;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	return http_queue(r, 400, resp);
}

/*
 * Everything decided from the request line and headers, before any of the
 * body is read: route, credential, activation, content type, declared
 * length.
 *
 * Only a body that must not be read is answered here, "early": the
 * library then reads none of it and closes the connection after the
 * answer. Refusals of requests with a small body wait until that body has
 * been read and dropped, because closing a socket with unread data makes
 * the kernel send a reset that can destroy the answer before the client
 * reads it, and the connection stays usable for the next request.
 */
static enum MHD_Result first_call(struct agent_req *r, const char *method,
				  const char *url)
{
	struct agent_http *h = r->h;
	const struct agent_route *rt;
	long long cl;
	bool known;

	cl = declared_length(r);
	rt = agent_route_find(method, url, h->a->cfg.strict_v1, &known,
			      r->allow, sizeof(r->allow));
	if (framing_error(r) != NULL) {
		/* Before anything else: the message itself is unreadable. */
		r->pending = PEND_FRAMING;
	} else if (rt == NULL) {
		r->pending = known ? PEND_METHOD : PEND_NOT_FOUND;
	} else {
		r->route = rt;
		r->limit = route_limit(h, rt);
		/* Credential first: an unauthenticated caller learns nothing
		 * about the agent's state. */
		if (!(rt->flags & AGENT_RT_PUBLIC))
			r->pending = check_credential(r);
		if (r->pending == PEND_NONE &&
		    !(rt->flags & AGENT_RT_UNGATED) &&
		    !atomic_load(&h->a->activated))
			r->pending = PEND_NOT_ACTIVATED;
		if (r->pending == PEND_NONE && (rt->flags & AGENT_RT_JSON) &&
		    !agent_req_is_json(r))
			r->pending = PEND_NOT_JSON;
	}
	if (r->pending != PEND_NONE) {
		r->limit = HTTP_SMALL_BODY;
		if (cl > (long long)HTTP_SMALL_BODY || cl == -2)
			return answer_pending(r);
		return MHD_YES;
	}
	if (cl == -2) {
		agent_reply_text(r, 400, "Invalid Content-Length");
		return r->replied ? MHD_YES : MHD_NO;
	}
	if (cl > (long long)r->limit) {
		agent_reply_text(r, 413, AGENT_TEXT_TOO_LARGE);
		return r->replied ? MHD_YES : MHD_NO;
	}
	buf_init(&r->body, r->limit);
	if (cl > 0) {
		int err = 0;

		/* One allocation for a declared body (44 MB writes). */
		if (buf_reserve(&r->body, (size_t)cl, &err) == NULL)
			r->no_memory = true;
	}
	return MHD_YES;
}

static enum MHD_Result take_body(struct agent_req *r, const char *data,
				 size_t *size)
{
	size_t n = *size;

	*size = 0;
	if (r->replied)
		return MHD_YES;
	if (r->pending != PEND_NONE) {
		/* Read to answer; a refused caller gets no more than this. */
		r->discarded += n;
		return r->discarded > HTTP_SMALL_BODY ? MHD_NO : MHD_YES;
	}
	if (!r->over_limit && !r->no_memory) {
		int rc = -EFBIG;

		if (r->limit > 0)
			rc = buf_append(&r->body, data, n);
		if (rc == 0)
			return MHD_YES;
		if (rc == -EFBIG)
			r->over_limit = true;
		else
			r->no_memory = true;
		buf_cleanup(&r->body);
	}
	r->discarded += n;
	return r->discarded > HTTP_DISCARD_MAX ? MHD_NO : MHD_YES;
}

static enum MHD_Result dispatch(struct agent_req *r)
{
	struct agent *a = r->h->a;
	const struct agent_route *rt = r->route;
	int rc;

	if (r->over_limit) {
		agent_reply_text(r, 413, AGENT_TEXT_TOO_LARGE);
		return r->replied ? MHD_YES : MHD_NO;
	}
	if (r->no_memory) {
		agent_reply_error(r, 500, PROTO_ERR_OPERATION_FAILED,
				  "Agent operation '%s' failed: %s", r->path,
				  strerror(ENOMEM));
		return r->replied ? MHD_YES : MHD_NO;
	}
	if (rcache_enabled(r->h->rc) && strcmp(r->method, "GET") != 0 &&
	    strcmp(r->method, "HEAD") != 0) {
		const char *key =
			agent_req_header(r, PROTO_HDR_IDEMPOTENCY_KEY);

		switch (key != NULL ? rcache_begin(r, key) : RC_RUN) {
		case RC_RUN:
			break;
		case RC_ANSWERED:
			return r->replied ? MHD_YES : MHD_NO;
		case RC_PARKED:
			goto parked;
		}
	}
	rc = agent_resolve_thread_creds(a);
	if (rc == 0 && (rt->flags & AGENT_RT_NO_HEAD) &&
	    strcmp(r->method, "HEAD") == 0)
		rc = agent_reply_empty(r, 405);
	else if (rc == 0)
		rc = rt->fn(r);
	if (!r->replied) {
		if (rc == 0) {
			log_error("http: %s %s: the handler gave no answer",
				  r->method, r->path);
			rc = -EIO;
		}
		agent_reply_error(r, 500, PROTO_ERR_OPERATION_FAILED,
				  "Agent operation '%s' failed: %s", r->path,
				  strerror(-rc));
	}
	if (r->rce != NULL) {
		/* A whole answer was recorded (or none could be given: a
		 * repeat then learns the request ran, not its answer). */
		rcache_finish(r->h->rc, r->rce);
		r->rce = NULL;
	}
	if (!r->replied)
		return MHD_NO;
parked:
	if (r->park != NULL) {
		bool parked;

		pthread_mutex_lock(&r->park->mu);
		parked = r->park->suspended_once;
		pthread_mutex_unlock(&r->park->mu);
		/* A deferral made while stopping was never parked. */
		if (!parked) {
			park_release_conn(r->park);
			r->park = NULL;
			return MHD_NO;
		}
	}
	return MHD_YES;
}

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn,
				const char *url, const char *method,
				const char *version, const char *upload,
				size_t *upload_size, void **con_cls)
{
	struct agent_http *h = cls;
	struct agent_req *r = *con_cls;
	enum MHD_Result ret;

	(void)version;
	if (r == NULL) {
		r = xcalloc(1, sizeof(*r));
		r->h = h;
		r->conn = conn;
		strlcpy_s(r->method, method, sizeof(r->method));
		r->path = xstrdup(url);
		*con_cls = r;
		ret = first_call(r, method, url);
	} else if (r->park != NULL) {
		return http_deferred_resumed(r);
	} else if (*upload_size > 0) {
		return take_body(r, upload, upload_size);
	} else if (r->replied) {
		return MHD_YES;
	} else if (r->pending != PEND_NONE) {
		ret = answer_pending(r);
	} else {
		ret = dispatch(r);
	}
	/* Answered (or parked): the request is in, its deadline is over. */
	if (r->replied || r->park != NULL)
		http_track_phase(h, conn, CP_HANDLING);
	return ret;
}

void http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		       enum MHD_RequestTerminationCode toe)
{
	struct agent_req *r = *con_cls;

	/* The connection waits for its next request. */
	http_track_phase(cls, conn, CP_IDLE);
	if (r == NULL)
		return;
	*con_cls = NULL;
	if (r->park != NULL)
		park_release_conn(r->park);
	if (log_get_level() >= LOG_LEVEL_DEBUG) {
		char m[16], p[256];

		log_safe(m, sizeof(m), r->method);
		log_safe(p, sizeof(p), r->path);
		log_debug("http: %s %s %u%s", m, p, r->status,
			  toe == MHD_REQUEST_TERMINATED_COMPLETED_OK
				  ? ""
				  : " (connection ended early)");
	}
	buf_cleanup(&r->body);
	free(r->path);
	free(r);
}
