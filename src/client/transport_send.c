/* SPDX-License-Identifier: MIT */
/*
 * transport_send: one request to an agent through the rules of
 * doc/transport-rules.md 4 - 6 and 8 (transport_i.h): the first attempt
 * on the slot's connection, the triage of what came back, the refresh of
 * a stale route or credential and the one replay after it, and the
 * second asking of a keyed request whose answer was lost; and what an
 * answer, or its absence, means for the caller (rules 6).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/httpstatus.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/xalloc.h"
#include "client/transport.h"
#include "client/transport_curl.h"
#include "client/transport_i.h"

/* ---- classification (doc/transport-rules.md 6) ----------------------------- */

static void unanswered(struct sbx_error *err, const struct transport_req *req,
		       const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void unanswered(struct sbx_error *err, const struct transport_req *req,
		       const char *fmt, ...)
{
	char reason[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (req->cls == TRANSPORT_COMMAND)
		sbx_error_set(err, SBX_OUTCOME_UNKNOWN, NULL,
			      "Sandbox operation '%s' did not report its "
			      "outcome and may have taken effect: %s",
			      req->op, reason);
	else
		sbx_error_set(err, SBX_UNREACHABLE, NULL, "%s: %s", req->op,
			      reason);
}

static void body_reason(enum xfer_outcome o, char *out, size_t size)
{
	switch (o) {
	case XFER_TOO_BIG:
		snprintf(out, size, "its error body is longer than %d bytes",
			 XFER_ERROR_BODY_MAX);
		break;
	case XFER_TIMEOUT:
		snprintf(out, size,
			 "its error body did not arrive before "
			 "the response deadline");
		break;
	default:
		snprintf(out, size, "its error body was cut off");
		break;
	}
}

/* A printable copy of an error body for a reason text. */
static void body_text(const struct buf *b, char *out, size_t size)
{
	size_t i, o = 0;

	for (i = 0; i < b->len && o + 1 < size; i++) {
		unsigned char c = (unsigned char)b->data[i];

		out[o++] =
			(c >= 0x20 && c != 0x7f) || c == '\n' ? (char)c : '?';
	}
	out[o] = '\0';
}

/* Whether an error body is typed with one of codes (NULL-terminated). */
static bool body_typed(const struct buf *b, const char *const *codes)
{
	size_t i, n;

	for (i = 0; codes[i] != NULL; i++) {
		n = strlen(codes[i]);
		if (b->len > n && memcmp(b->data, codes[i], n) == 0 &&
		    b->data[n] == ':')
			return true;
	}
	return false;
}

static bool body_typed_not_found(const struct buf *b)
{
	static const char *const codes[] = {PROTO_ERR_PATH_NOT_FOUND,
					    PROTO_ERR_JOB_NOT_FOUND, NULL};

	return body_typed(b, codes);
}

static bool body_typed_fs(const struct buf *b)
{
	return proto_error_fs_errno(b->data, b->len) != 0;
}

/* The reply cache's answers that say the first attempt's outcome cannot
 * be learnt (doc/protocol-ext.md, the reply cache). */
static bool body_outcome_unknowable(const struct buf *b)
{
	static const char *const codes[] = {PROTO_ERR_IN_PROGRESS,
					    PROTO_ERR_REPLY_NOT_KEPT,
					    PROTO_ERR_KEY_REUSED, NULL};

	return body_typed(b, codes);
}

/*
 * Read a non-2xx answer's body (bounded by 4096 bytes, by the response
 * deadline from now and by the exchange's own deadline) and classify it
 * (the seed's check_response). Returns true when the body was read; false
 * when reading it failed (err then holds the unanswered error).
 */
static bool read_error_body(struct transport *t, struct xfer *x,
			    struct sbx_error *err)
{
	long long deadline = clock_mono_ms() + t->cfg.response_timeout_ms;
	enum xfer_outcome o;
	char why[128];

	if (x->total != 0 && x->total < deadline)
		deadline = x->total;
	xfer_resume_as(x, XFER_ERRBODY);
	o = xfer_run(x, deadline, 0);
	if (o == XFER_OK)
		return true;
	body_reason(o, why, sizeof(why));
	unanswered(err, x->req, "the agent returned %ld but %s",
		   x->resp->status, why);
	err->status = x->resp->status;
	return false;
}

static void refusal(struct sbx_error *err, const struct transport_req *req,
		    long status, const struct buf *body)
{
	char text[XFER_ERROR_BODY_MAX + 1];

	body_text(body, text, sizeof(text));
	if (status >= 500) {
		unanswered(err, req, "the sandbox host returned %ld: %s",
			   status, text);
	} else {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
			      "%s returned %ld %s: %s", req->op, status,
			      http_status_text(status), text);
		err->err = sbx_errno_for_refusal(status, body->data, body->len);
	}
	err->status = status;
}

static int check_response(struct transport *t, struct xfer *x,
			  struct sbx_error *err)
{
	if (!read_error_body(t, x, err))
		return -1;
	refusal(err, x->req, x->resp->status, &x->errbody);
	return -1;
}

/* What an exchange that got no usable answer headers means for err. */
static void attempt_failed(struct sbx_error *err,
			   const struct transport_req *req, enum xfer_outcome o,
			   const struct xfer *x)
{
	if (o == XFER_FOREIGN) {
		sbx_error_set(err, SBX_COMMAND_FAILED,
			      SBX_FAIL_TRANSPORT_INVALID, "%s: %s", req->op,
			      x->foreign);
		err->err = EPROTO;
	} else if (o == XFER_TIMEOUT)
		unanswered(err, req,
			   "the agent did not answer before the "
			   "response deadline");
	else if (o == XFER_SINK)
		unanswered(err, req, "the request could not be prepared");
	else
		unanswered(err, req,
			   "the agent connection failed after "
			   "connecting (%s)",
			   x->errbuf[0] ? x->errbuf : "no answer");
}

/*
 * Read a 2xx body into the sink or buffer, until the exchange's deadline.
 * Failures after a success status are classified as unanswered: the
 * operation may have happened.
 */
static int read_success_body(struct transport *t, struct xfer *x,
			     struct sbx_error *err)
{
	const struct transport_req *req = x->req;
	long idle = req->idle_timeout_ms == 0 ? t->cfg.body_idle_timeout_ms
					      : req->idle_timeout_ms;
	enum xfer_outcome o;

	xfer_resume_as(x, XFER_BODY);
	o = xfer_run(x, x->total, idle > 0 ? idle : 0);
	switch (o) {
	case XFER_OK:
		return 0;
	case XFER_TOO_BIG:
		return sbx_error_fail(err, SBX_UNEXPECTED_FORMAT, NULL, EFBIG,
				      "%s: the answer is larger than %zu bytes",
				      req->op, req->max_body);
	case XFER_SINK:
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "%s: the answer could not be used (%s)", req->op,
			      strerror(-x->sink_err));
		err->err = -x->sink_err;
		return x->sink_err;
	case XFER_TIMEOUT:
		unanswered(err, req, "the answer stalled past its deadline");
		return -EIO;
	default:
		unanswered(err, req, "the answer was cut off (%s)",
			   x->errbuf[0] ? x->errbuf : "connection closed");
		if (req->cls == TRANSPORT_SAFE)
			snprintf(err->failure, sizeof(err->failure), "%s",
				 SBX_FAIL_BODY_CUT);
		return -EIO;
	}
}

static void log_failure(const char *id, const struct transport_req *req,
			const struct sbx_error *err)
{
	char text[1024];

	/* The caller logs the failure once, with more context; here it is
	 * only traced. */
	sbx_error_describe(err, text, sizeof(text));
	log_debug("sandbox %s: %s: %s", id, req->op, text);
}

/* ---- one exchange ------------------------------------------------------- */

/*
 * One exchange's deadline (doc/transport-rules.md 9): the request's own
 * limit, else the response deadline, for headers and body together; and
 * the calling thread's operation deadline unless the request outlives it.
 */
static long long exchange_deadline(const struct transport *t,
				   const struct transport_req *req,
				   long long start)
{
	long long d =
		start + (req->deadline_ms > 0 ? req->deadline_ms
					      : t->cfg.response_timeout_ms);

	return req->outlives_op ? d : tr_earliest(d, transport_op_deadline());
}

static char *join_url(const struct conn *c, const char *path)
{
	return xasprintf("%s%s",
			 c == NULL	   ? ""
			 : c->base != NULL ? c->base
					   : c->origin,
			 path);
}

/* One exchange on a pooled handle, up to its response headers. */
struct attempt {
	struct xfer x;
	struct xfer_handle *h;
	char *url;
	char client_id[PROTO_CLIENT_ID_MAX + 1];
	bool started;
};

/* What to send for req on conn, and how (doc/transport-rules.md 2, 8). */
static void agent_spec(struct transport *t, const struct conn *conn,
		       const struct transport_req *req, const char *key,
		       bool fresh, struct attempt *a, struct xfer_spec *spec)
{
	struct provider *p = t->prov;

	memset(spec, 0, sizeof(*spec));
	spec->url = a->url;
	spec->method = req->method;
	spec->auth = conn != NULL ? conn->auth : NULL;
	spec->headers = req->headers;
	spec->key = key;
	if (req->tag_client) {
		pthread_mutex_lock(&t->id_lock);
		memcpy(a->client_id, t->client_id, sizeof(a->client_id));
		pthread_mutex_unlock(&t->id_lock);
		spec->client_id = a->client_id;
	}
	spec->content_type = req->content_type;
	spec->body = req->body;
	spec->body_len = req->body_len;
	spec->connect_ms = t->cfg.connect_timeout_ms;
	spec->direct = true;
	if (conn != NULL) {
		spec->unix_path = conn->unix_path;
		spec->check_owner = conn->check_owner;
		spec->owner = conn->owner;
		spec->route = conn->url;
	}
	if (p->ops->ca_file != NULL) {
		spec->ca_file = p->ops->ca_file(p);
		if (p->ops->resolve != NULL)
			spec->resolve = p->ops->resolve(p);
	}
	spec->fresh = fresh;
}

/*
 * Start an exchange of req on conn and run it until the response headers
 * (which must come within the response deadline and the exchange's own).
 * key (may be NULL) is sent as the Idempotency-Key; fresh asks for a new
 * connection. XFER_SINK with sink_err -ENOMEM/-EIO when it could not even
 * be prepared.
 */
static enum xfer_outcome attempt_start(struct transport *t, struct slot *s,
				       const struct conn *conn,
				       const struct transport_req *req,
				       struct transport_resp *resp,
				       const char *key, bool fresh,
				       struct attempt *a)
{
	long long start = clock_mono_ms(), headers;
	struct xfer_spec spec;

	memset(a, 0, sizeof(*a));
	a->h = xfer_pool_take(&s->pool);
	a->url = join_url(conn, req->path);
	a->started = true;
	xfer_init(&a->x, a->h, req, resp);
	a->x.total = exchange_deadline(t, req, start);
	headers = tr_earliest(start + t->cfg.response_timeout_ms, a->x.total);
	agent_spec(t, conn, req, key, fresh, a, &spec);
	if (xfer_setup(&a->x, &spec) < 0) {
		a->x.sink_err = -EIO;
		return XFER_SINK;
	}
	return xfer_run(&a->x, headers, 0);
}

static void attempt_end(struct slot *s, struct attempt *a)
{
	if (!a->started)
		return;
	xfer_finish(&a->x);
	xfer_pool_give(&s->pool, a->h);
	free(a->url);
	a->started = false;
}

int tr_send_plain(struct transport *t, struct slot *s, const struct conn *conn,
		  const struct transport_req *req, struct transport_resp *resp,
		  struct sbx_error *err)
{
	struct attempt a;
	enum xfer_outcome o;
	int rc;

	if (tr_op_deadline_passed()) {
		tr_op_late(err, req->op, "before the request was sent");
		return -EIO;
	}
	o = attempt_start(t, s, conn, req, resp, NULL,
			  req->cls != TRANSPORT_SAFE, &a);
	if (o != XFER_OK) {
		attempt_failed(err, req, o, &a.x);
		rc = -EIO;
	} else if (resp->status < 200 || resp->status >= 300) {
		check_response(t, &a.x, err);
		rc = sbx_error_errno(err);
	} else {
		rc = read_success_body(t, &a.x, err);
	}
	attempt_end(s, &a);
	return rc;
}

/*
 * One more exchange that gives the final answer, with no refresh and no
 * replay after it: the replay after a refresh (doc/transport-rules.md 5
 * steps 4-6), and the second asking of a keyed request whose first answer
 * was lost (rules 8.4). Returns 0 or a negative errno with err filled;
 * *keep says the route answered for itself (a 2xx or a typed refusal), so
 * it stays cached; *answered says an answer (any status) arrived.
 */
static int final_attempt(struct transport *t, struct slot *s, struct conn *conn,
			 const struct transport_req *req, const char *key,
			 bool fresh, struct transport_resp *resp,
			 struct sbx_error *err, bool *keep, bool *answered)
{
	enum xfer_outcome o;
	struct attempt a;
	int rc = -EIO;

	*keep = false;
	*answered = false;
	transport_resp_cleanup(resp);
	transport_resp_init(resp);
	if (tr_op_deadline_passed()) {
		tr_op_late(err, req->op, "before the request was sent again");
		return -EIO;
	}
	o = attempt_start(t, s, conn, req, resp, key, fresh, &a);
	if (o != XFER_OK) {
		attempt_failed(err, req, o, &a.x);
	} else if (resp->status >= 200 && resp->status < 300) {
		/* The route answered; what happens to the body is the
		 * operation's business. */
		*answered = true;
		rc = read_success_body(t, &a.x, err);
		*keep = true;
	} else if (read_error_body(t, &a.x, err)) {
		*answered = true;
		if (key != NULL && body_outcome_unknowable(&a.x.errbody)) {
			char text[XFER_ERROR_BODY_MAX + 1];

			body_text(&a.x.errbody, text, sizeof(text));
			unanswered(err, req,
				   "its answer was lost, and asked again with "
				   "its idempotency key the agent said: %s",
				   text);
			*keep = true;
		} else {
			refusal(err, req, resp->status, &a.x.errbody);
			/* A typed answer came from this route: keep it. */
			*keep = body_typed_not_found(&a.x.errbody) ||
				body_typed_fs(&a.x.errbody);
		}
		rc = sbx_error_errno(err);
	}
	attempt_end(s, &a);
	return rc;
}

/* A version 4 UUID for an Idempotency-Key. */
static void make_key(char out[PROTO_KEY_MAX + 1])
{
	char id[IDS_UUID_LEN + 1];

	if (ids_uuid(id) < 0)
		fatal("getrandom");
	snprintf(out, PROTO_KEY_MAX + 1, "%s", id);
}

/* A health answer carried by conn says whether its agent keeps a reply
 * cache; the connection remembers it (doc/transport-rules.md 8.3). */
static void learn_health(struct conn *conn, const struct transport_req *req,
			 const struct transport_resp *resp)
{
	struct proto_health h;

	if (conn == NULL || req->sink != NULL ||
	    strcmp(req->op, TRANSPORT_OP_HEALTH) != 0)
		return;
	if (proto_health_decode(resp->body.data, resp->body.len, &h) < 0)
		return;
	atomic_store(&conn->keyed, h.ext_reply_cache >= 1);
}

enum refresh_trigger {
	REFRESH_CONNECT,
	REFRESH_NOT_FOUND,
	REFRESH_UNAUTHORIZED,
};

/* One request's way through the rules. */
struct sending {
	struct transport *t;
	struct slot *s;
	const char *id;
	const struct transport_req *req;
	struct transport_resp *resp;
	struct sbx_error *err;
	struct conn *used; /* the connection it goes on (a reference) */
	struct conn *answered; /* the one that carried the final answer */
	struct attempt a; /* the first attempt, until it is dropped */
	char key_buf[PROTO_KEY_MAX + 1];
	const char *key; /* its Idempotency-Key, once it has one */
	bool keyed; /* used's agent keeps a reply cache */
	int rc;
};

/* Where the triage of the first attempt leads. */
enum next_step {
	STEP_DONE, /* rc and err are the outcome */
	STEP_ASK_AGAIN, /* a keyed request's answer was lost (rules 8.4) */
	STEP_REFRESH, /* refresh the route or credential, replay (rules 5) */
};

/* Whether sn is keyed on used, given a key when it is and has none yet. */
static void choose_key(struct sending *sn)
{
	/* A request that must not reach the agent twice unknowingly goes
	 * on a fresh connection, unless the agent keeps a reply cache: then
	 * its key makes a second delivery harmless (rules 8). */
	sn->keyed =
		sn->req->cls != TRANSPORT_SAFE && atomic_load(&sn->used->keyed);
	if (sn->keyed && sn->key == NULL) {
		make_key(sn->key_buf);
		sn->key = sn->key_buf;
	}
}

static enum xfer_outcome first_attempt(struct sending *sn)
{
	choose_key(sn);
	return attempt_start(sn->t, sn->s, sn->used, sn->req, sn->resp, sn->key,
			     sn->req->cls != TRANSPORT_SAFE && !sn->keyed,
			     &sn->a);
}

/* The first attempt got no answer headers. */
static enum next_step triage_unanswered(struct sending *sn, enum xfer_outcome o,
					enum refresh_trigger *trigger)
{
	if (o == XFER_CONNECT) {
		/* Never delivered: safe to refresh and replay. */
		*trigger = REFRESH_CONNECT;
		return STEP_REFRESH;
	}
	attempt_failed(sn->err, sn->req, o, &sn->a.x);
	sn->rc = -EIO;
	switch (o) {
	case XFER_SINK:
		/* It could not even be prepared: nothing was sent. */
		return STEP_DONE;
	case XFER_FOREIGN:
		/* Someone else listens where the agent was: nothing was
		 * sent, nothing is replayed there. */
		sn->rc = -EPROTO;
		break;
	case XFER_TIMEOUT:
		break;
	default:
		if (sn->keyed)
			return STEP_ASK_AGAIN;
		break;
	}
	tr_slot_invalidate(sn->s, sn->used);
	return STEP_DONE;
}

/* A 404: typed, the agent's final answer; untyped, a provider route
 * miss. */
static enum next_step triage_not_found(struct sending *sn,
				       enum refresh_trigger *trigger)
{
	struct xfer *x = &sn->a.x;

	if (!read_error_body(sn->t, x, sn->err)) {
		tr_slot_invalidate(sn->s, sn->used);
		sn->rc = -EIO;
		return STEP_DONE;
	}
	if (body_typed_not_found(&x->errbody)) {
		/* A typed refusal is the agent's final answer. */
		refusal(sn->err, sn->req, 404, &x->errbody);
		sn->rc = sbx_error_errno(sn->err);
		sn->answered = tr_conn_ref(sn->used);
		return STEP_DONE;
	}
	*trigger = REFRESH_NOT_FOUND;
	return STEP_REFRESH;
}

static enum next_step triage_success(struct sending *sn)
{
	struct xfer *x = &sn->a.x;
	struct sbx_error *err = sn->err;

	sn->rc = read_success_body(sn->t, x, err);
	if (sn->rc == 0) {
		sn->answered = tr_conn_ref(sn->used);
		return STEP_DONE;
	}
	/* A body lost on the way can be asked for again under its key,
	 * unless some of it went to the caller's sink already (a buffered
	 * one is simply read again). */
	if (sn->keyed && err->code != SBX_UNEXPECTED_FORMAT &&
	    (sn->req->sink == NULL || x->body_bytes == 0) &&
	    clock_mono_ms() < x->total)
		return STEP_ASK_AGAIN;
	if (err->code != SBX_UNEXPECTED_FORMAT)
		tr_slot_invalidate(sn->s, sn->used);
	return STEP_DONE;
}

/* Any other status: a refusal, or a failure of the agent or a gateway. */
static enum next_step triage_refusal(struct sending *sn)
{
	struct xfer *x = &sn->a.x;
	char code[64];

	if (read_error_body(sn->t, x, sn->err)) {
		refusal(sn->err, sn->req, sn->resp->status, &x->errbody);
		if (body_typed_fs(&x->errbody)) {
			sn->rc = sbx_error_errno(sn->err);
			sn->answered = tr_conn_ref(sn->used);
			return STEP_DONE;
		}
		/* A 5xx without the agent's typed body may come from a
		 * gateway that lost the request or its answer. */
		if (sn->keyed && sn->resp->status >= 500 &&
		    !proto_error_code(x->errbody.data, x->errbody.len, code,
				      sizeof(code))) {
			sn->rc = sbx_error_errno(sn->err);
			return STEP_ASK_AGAIN;
		}
	}
	tr_slot_invalidate(sn->s, sn->used);
	sn->rc = sbx_error_errno(sn->err);
	return STEP_DONE;
}

/* The first attempt's answer headers came: what they lead to. */
static enum next_step triage_answer(struct sending *sn,
				    enum refresh_trigger *trigger)
{
	long status = sn->resp->status;

	if (status == 404)
		return triage_not_found(sn, trigger);
	if (status == 401) {
		/* Keep the answer unread while the credential is re-read. */
		*trigger = REFRESH_UNAUTHORIZED;
		return STEP_REFRESH;
	}
	if (status >= 200 && status < 300)
		return triage_success(sn);
	return triage_refusal(sn);
}

/*
 * The first answer was lost; the agent keeps it under the key (rules
 * 8.4): ask once more, on a fresh connection, within what is left of the
 * exchange's deadline. When that teaches nothing, the first failure
 * stands.
 */
static void ask_again(struct sending *sn)
{
	struct sbx_error first = *sn->err;
	struct transport_req again = *sn->req;
	long long left = sn->a.x.total - clock_mono_ms();
	bool keep, got_answer;

	attempt_end(sn->s, &sn->a);
	if (left <= 0) {
		tr_slot_invalidate(sn->s, sn->used);
		return;
	}
	again.deadline_ms = (long)left;
	again.outlives_op = true; /* left is already within it */
	log_debug("sandbox %s: %s: asking again with its idempotency key",
		  sn->id, sn->req->op);
	sn->rc = final_attempt(sn->t, sn->s, sn->used, &again, sn->key, true,
			       sn->resp, sn->err, &keep, &got_answer);
	if (got_answer) {
		sn->answered = tr_conn_ref(sn->used);
		return;
	}
	*sn->err = first;
	sn->rc = sbx_error_errno(sn->err);
	tr_slot_invalidate(sn->s, sn->used);
}

/*
 * Refresh the slot's connection (rules 5): fetch it again and activate
 * it, unless another request did so meanwhile (its connection is taken),
 * or the credential is unchanged after a 401 (the refusal stands, its
 * body is read unlocked). true when sn->used is now the connection to
 * replay on.
 */
static bool refresh(struct sending *sn, enum refresh_trigger trigger)
{
	struct slot *s = sn->s;
	struct conn *fresh = NULL, *previous = NULL;
	bool replay = false;

	if (tr_slot_lock(s) < 0) {
		tr_op_late(sn->err, sn->req->op,
			   "while another request refreshed the sandbox's "
			   "connection");
		sn->rc = -EIO;
		return false;
	}
	if (s->conn == NULL || tr_conn_same(s->conn, sn->used)) {
		previous = s->conn;
		s->conn = NULL;
		sn->rc = tr_fetch_connection(sn->t, sn->id, &fresh, sn->err);
		if (sn->rc < 0)
			goto unlock;
		if (trigger == REFRESH_UNAUTHORIZED && previous != NULL &&
		    strcmp(fresh->token, previous->token) == 0 &&
		    strcmp(fresh->url, previous->url) == 0) {
			/* The credential did not change: put the route
			 * back. */
			s->conn = previous;
			previous = NULL;
			pthread_mutex_unlock(&s->lock);
			check_response(sn->t, &sn->a.x, sn->err);
			sn->rc = sbx_error_errno(sn->err);
			goto out;
		}
		sn->rc = tr_activate_connection(sn->t, s, sn->id, fresh,
						sn->err);
		if (sn->rc < 0)
			goto unlock;
		s->conn = fresh;
		s->gen++;
		fresh = NULL;
	}
	tr_conn_unref(sn->used);
	sn->used = tr_conn_ref(s->conn);
	replay = true;
unlock:
	pthread_mutex_unlock(&s->lock);
	if (replay && sn->used == NULL) {
		tr_invalid_route(sn->err);
		sn->rc = -EPROTO;
		replay = false;
	}
out:
	tr_conn_unref(fresh);
	tr_conn_unref(previous);
	return replay;
}

/* The replay after a refresh: exactly once, on the connection the slot
 * now holds (rules 5, steps 4 - 6). */
static void replay(struct sending *sn)
{
	const struct transport_req *req = sn->req;
	bool keep, got_answer;

	/* A refused answer held unread is dropped. */
	attempt_end(sn->s, &sn->a);
	choose_key(sn);
	sn->rc = final_attempt(sn->t, sn->s, sn->used, req,
			       sn->keyed ? sn->key : NULL,
			       req->cls != TRANSPORT_SAFE && !sn->keyed,
			       sn->resp, sn->err, &keep, &got_answer);
	/* A failed retry must not pin the route for the next operation. */
	if (sn->rc < 0 && !keep)
		tr_slot_invalidate(sn->s, sn->used);
	if (got_answer)
		sn->answered = tr_conn_ref(sn->used);
}

int tr_send_request(struct transport *t, struct slot *s, const char *id,
		    const struct transport_req *req,
		    struct transport_resp *resp, struct sbx_error *err,
		    struct conn **answered_out)
{
	enum refresh_trigger trigger = REFRESH_CONNECT;
	struct sending sn = {
		.t = t, .s = s, .id = id, .req = req, .resp = resp, .err = err};
	enum next_step next;
	enum xfer_outcome o;

	sbx_error_clear(err);
	if (tr_op_deadline_passed()) {
		tr_op_late(err, req->op, "before the request was sent");
		sn.rc = -EIO;
		goto out;
	}
	sn.rc = tr_slot_connection(t, s, id, req->op, &sn.used, err);
	if (sn.rc < 0)
		goto out;
	o = first_attempt(&sn);
	next = o == XFER_OK ? triage_answer(&sn, &trigger)
			    : triage_unanswered(&sn, o, &trigger);
	if (next == STEP_ASK_AGAIN)
		ask_again(&sn);
	else if (next == STEP_REFRESH && refresh(&sn, trigger))
		replay(&sn);
out:
	attempt_end(s, &sn.a);
	if (sn.rc == 0 && sn.answered != NULL)
		learn_health(sn.answered, req, resp);
	if (answered_out != NULL)
		*answered_out = sn.answered;
	else
		tr_conn_unref(sn.answered);
	tr_conn_unref(sn.used);
	if (sn.rc < 0)
		log_failure(id, req, err);
	return sn.rc;
}

int transport_send(struct transport *t, const char *id,
		   const struct transport_req *req, struct transport_resp *resp,
		   struct sbx_error *err)
{
	return tr_send_request(t, tr_slot_get(t, id), id, req, resp, err, NULL);
}
