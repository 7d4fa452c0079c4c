/* SPDX-License-Identifier: MIT */
/*
 * http_cache: the reply cache of keyed requests (http.h, "the reply
 * cache"; doc/protocol-ext.md, "Idempotency keys").
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/http_i.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/xalloc.h"

/*
 * A request that must not run twice carries an Idempotency-Key
 * (doc/protocol-ext.md, "Idempotency keys"). The first request with a key
 * runs; its answer (status, content type, body) is kept under the key,
 * and a request repeating the key gets that answer instead of running
 * again, marked Idempotent-Replayed. A repeat that arrives while the first
 * still runs waits for its answer (at most wait_ms, then 409
 * REQUEST_IN_PROGRESS). The model is NFSv4.1's session reply cache: the
 * client may resend freely, the server executes at most once.
 *
 * Bounds: at most `entries` entries and `bytes` bytes of answers in all,
 * `entry` bytes for one answer (a larger one is remembered as run, not
 * kept: a repeat gets 409 REPLY_NOT_KEPT), and a finished entry lives
 * `ttl_ms`. Finished entries are evicted oldest first; running ones are
 * bounded by the connections.
 *
 * Locking: rc.mu guards everything here. It may be taken under a park's
 * mu (a stream's writer adding a chunk), never the other way round; the
 * waiters' completions are built under rc.mu and delivered after it is
 * released.
 */
#define RC_BUCKETS 1024
#define RC_ENTRIES 4096
#define RC_BYTES (16UL * 1024 * 1024)
#define RC_ENTRY_BYTES (1UL * 1024 * 1024)
#define RC_TTL_MS 120000L
#define RC_WAIT_MS 30000L

struct rc_waiter {
	struct agent_deferred *d;
	long long deadline;
	struct rc_waiter *next;
};

struct rc_entry {
	char key[PROTO_KEY_MAX + 1];
	uint64_t fp; /* method, path, query and body */
	bool done;
	bool kept; /* body holds the whole answer */
	bool answered; /* status and type are set */
	unsigned status;
	char ctype[96];
	struct buf body;
	long long done_ms;
	struct rc_waiter *waiters;
	struct rc_entry *hnext; /* bucket chain */
	struct dlist_node age; /* in the finished entries, by age */
};

struct rc_done {
	struct agent_deferred *d;
	unsigned status;
	struct MHD_Response *resp;
	struct rc_done *next;
};

struct rc_stats {
	unsigned long runs, replayed, waited, refused, evicted, expired;
};

struct reply_cache {
	pthread_mutex_t mu;
	bool enabled;
	struct agent_reply_cache_limits lim;
	struct rc_entry *buckets[RC_BUCKETS];
	struct dlist done; /* finished entries, oldest first */
	size_t entries;
	size_t bytes;
	struct rc_stats stats;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static size_t rc_bucket(const char *key)
{
	return (size_t)(fnv(14695981039346656037ULL, key, strlen(key)) %
			RC_BUCKETS);
}

/* Printable token characters only, at most PROTO_KEY_MAX of them. */
static bool rc_key_ok(const char *k)
{
	size_t n = strlen(k);

	return n > 0 && n <= PROTO_KEY_MAX &&
	       strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789-._~:") == n;
}

/* Under mu: the oldest finished entry, or NULL. */
static struct rc_entry *rc_oldest(const struct reply_cache *c)
{
	return dlist_item(c->done.first, struct rc_entry, age);
}

/* Under mu: forget a finished entry. */
static void rc_drop(struct reply_cache *c, struct rc_entry *e)
{
	struct rc_entry **pp = &c->buckets[rc_bucket(e->key)];

	while (*pp != NULL && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp == e)
		*pp = e->hnext;
	dlist_remove(&c->done, &e->age);
	c->bytes -= e->body.len;
	c->entries--;
	buf_cleanup(&e->body);
	free(e);
}

/* Under mu: make room for n more bytes (and an entry when entry is set)
 * by forgetting the oldest finished entries. */
static bool rc_room(struct reply_cache *c, size_t n, bool entry)
{
	struct rc_entry *e;

	while ((e = rc_oldest(c)) != NULL &&
	       ((entry && c->entries >= c->lim.entries) ||
		c->bytes + n > c->lim.bytes)) {
		c->stats.evicted++;
		rc_drop(c, e);
	}
	return c->bytes + n <= c->lim.bytes;
}

/* Under mu: the answer stops being kept (too large). */
static void rc_unkeep(struct reply_cache *c, struct rc_entry *e)
{
	c->bytes -= e->body.len;
	buf_cleanup(&e->body);
	buf_init(&e->body, 0);
	e->kept = false;
}

/* Under mu: add n answer bytes to a running entry, while it is kept. */
static void rc_add(struct reply_cache *c, struct rc_entry *e, const void *p,
		   size_t n)
{
	if (!e->kept || n == 0)
		return;
	if (e->body.len + n > c->lim.entry || !rc_room(c, n, false) ||
	    buf_append(&e->body, p, n) < 0) {
		rc_unkeep(c, e);
		return;
	}
	c->bytes += n;
}

static struct MHD_Response *rc_response(const struct rc_entry *e)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(
		e->body.len, e->body.data ? e->body.data : (char *)"",
		MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return NULL;
	if (e->ctype[0] != '\0')
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					e->ctype);
	MHD_add_response_header(resp, PROTO_HDR_REPLAYED, "true");
	return resp;
}

/* A typed refusal as a response (text/plain "CODE: message"). */
static struct MHD_Response *rc_refusal(const char *code, const char *msg)
{
	char *body = xasprintf("%s: %s", code, msg);
	struct MHD_Response *resp =
		http_text_response(body, strlen(body), false);

	if (resp == NULL)
		free(body);
	return resp;
}

/* Under mu: what a repeat of finished entry e gets. */
static struct MHD_Response *rc_answer(const struct rc_entry *e,
				      unsigned *status)
{
	if (e->kept && e->answered) {
		*status = e->status;
		return rc_response(e);
	}
	*status = 409;
	return rc_refusal(PROTO_ERR_REPLY_NOT_KEPT,
			  e->answered
				  ? "the request with this key ran, but its "
				    "answer was larger than the reply cache "
				    "keeps"
				  : "the request with this key ran, but its "
				    "answer was lost");
}

/* Under mu: a running entry is finished; its waiters' answers are built
 * and returned for delivery once mu is released. */
static struct rc_done *rc_finish_locked(struct reply_cache *c,
					struct rc_entry *e)
{
	struct rc_done *out = NULL;
	struct rc_waiter *w, *next;

	if (e->done)
		return NULL;
	e->done = true;
	e->done_ms = clock_mono_ms();
	dlist_push_back(&c->done, &e->age);
	for (w = e->waiters; w != NULL; w = next) {
		struct rc_done *dn = xcalloc(1, sizeof(*dn));

		next = w->next;
		dn->d = w->d;
		dn->resp = rc_answer(e, &dn->status);
		dn->next = out;
		out = dn;
		free(w);
	}
	e->waiters = NULL;
	return out;
}

/* Deliver built answers to waiters (no lock held). */
static void rc_deliver(struct rc_done *list)
{
	struct rc_done *dn, *next;

	for (dn = list; dn != NULL; dn = next) {
		next = dn->next;
		http_deferred_complete(dn->d, dn->status, dn->resp);
		free(dn);
	}
}

/* Finish e (from any thread, no park lock needed) and answer its
 * waiters. */
void rcache_finish(struct reply_cache *c, struct rc_entry *e)
{
	struct rc_done *list;

	pthread_mutex_lock(&c->mu);
	list = rc_finish_locked(c, e);
	pthread_mutex_unlock(&c->mu);
	rc_deliver(list);
}

/* Record an answer in a running entry (replacing one recorded before: a
 * handler whose first reply could not be queued may give another). */
void rcache_record(struct reply_cache *c, struct rc_entry *e, unsigned status,
		   const char *ctype, const void *p, size_t n)
{
	pthread_mutex_lock(&c->mu);
	if (!e->done) {
		c->bytes -= e->body.len;
		buf_cleanup(&e->body);
		buf_init(&e->body, 0);
		e->kept = true;
		e->answered = true;
		e->status = status;
		strlcpy_s(e->ctype, ctype ? ctype : "", sizeof(e->ctype));
		rc_add(c, e, p, n);
	}
	pthread_mutex_unlock(&c->mu);
}

/* The answer of a running entry is not kept (only that it ran). */
void rcache_unkeep(struct reply_cache *c, struct rc_entry *e)
{
	pthread_mutex_lock(&c->mu);
	if (!e->done)
		rc_unkeep(c, e);
	pthread_mutex_unlock(&c->mu);
}

/* Answers past their time: expired entries and waiters. Called about once a
 * second. */
void rcache_tick(struct reply_cache *c)
{
	struct rc_done *list = NULL;
	long long now = clock_mono_ms();
	struct rc_entry *old;
	size_t i;

	if (!c->enabled)
		return;
	pthread_mutex_lock(&c->mu);
	while ((old = rc_oldest(c)) != NULL &&
	       now - old->done_ms >= c->lim.ttl_ms) {
		c->stats.expired++;
		rc_drop(c, old);
	}
	for (i = 0; i < RC_BUCKETS; i++) {
		struct rc_entry *e;

		for (e = c->buckets[i]; e != NULL; e = e->hnext) {
			struct rc_waiter **pp = &e->waiters, *w;

			while ((w = *pp) != NULL) {
				struct rc_done *dn;

				if (w->deadline > now) {
					pp = &w->next;
					continue;
				}
				*pp = w->next;
				dn = xcalloc(1, sizeof(*dn));
				dn->d = w->d;
				dn->status = 409;
				dn->resp = rc_refusal(
					PROTO_ERR_IN_PROGRESS,
					"the request with this key is still "
					"running");
				dn->next = list;
				list = dn;
				free(w);
			}
		}
	}
	pthread_mutex_unlock(&c->mu);
	rc_deliver(list);
}

void rcache_free(struct reply_cache *c)
{
	struct rc_done *list = NULL;
	size_t i;

	if (c == NULL)
		return;
	log_debug("http: reply cache: %lu run, %lu replayed, %lu waited, "
		  "%lu refused, %lu evicted, %lu expired",
		  c->stats.runs, c->stats.replayed, c->stats.waited,
		  c->stats.refused, c->stats.evicted, c->stats.expired);
	pthread_mutex_lock(&c->mu);
	for (i = 0; i < RC_BUCKETS; i++) {
		while (c->buckets[i] != NULL) {
			struct rc_entry *e = c->buckets[i];
			struct rc_done *more = rc_finish_locked(c, e);

			while (more != NULL) {
				struct rc_done *next = more->next;

				more->next = list;
				list = more;
				more = next;
			}
			rc_drop(c, e);
		}
	}
	pthread_mutex_unlock(&c->mu);
	rc_deliver(list);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Under pk->mu: the answer a stream or deferred reply carried is final. */
void rcache_park_finish(struct park *pk)
{
	struct rc_done *list;

	if (pk->rce == NULL)
		return;
	pthread_mutex_lock(&pk->rc->mu);
	list = rc_finish_locked(pk->rc, pk->rce);
	pthread_mutex_unlock(&pk->rc->mu);
	pk->rce = NULL;
	rc_deliver(list);
}

/* Under pk->mu: more of a stream's answer. */
void rcache_park_add(struct park *pk, const void *p, size_t n)
{
	if (pk->rce == NULL)
		return;
	pthread_mutex_lock(&pk->rc->mu);
	rc_add(pk->rc, pk->rce, p, n);
	pthread_mutex_unlock(&pk->rc->mu);
}

static enum MHD_Result rc_hash_arg(void *cls, enum MHD_ValueKind kind,
				   const char *key, const char *value)
{
	uint64_t *h = cls;

	(void)kind;
	*h = fnv(*h, key, strlen(key) + 1);
	*h = fnv(*h, value ? value : "", value ? strlen(value) + 1 : 1);
	return MHD_YES;
}

/* How much of a large body the fingerprint reads, at each end. */
#define RC_FP_EDGE (32UL * 1024)

/*
 * What a keyed request is: method, path, query arguments and body (its
 * length and, past 64 KiB, its first and last 32 KiB: a repeat under the
 * same key is told apart from another request, not authenticated, and a
 * 16 MiB write should not cost a pass over its bytes). A repeat must be
 * this same request.
 */
static uint64_t rc_fingerprint(const struct agent_req *r)
{
	const char *b = r->body.data ? r->body.data : "";
	size_t n = r->body.len;
	uint64_t h = 14695981039346656037ULL;

	h = fnv(h, r->method, strlen(r->method) + 1);
	h = fnv(h, r->path, strlen(r->path) + 1);
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, rc_hash_arg,
				  &h);
	h = fnv(h, &n, sizeof(n));
	if (n <= 2 * RC_FP_EDGE)
		return fnv(h, b, n);
	h = fnv(h, b, RC_FP_EDGE);
	return fnv(h, b + n - RC_FP_EDGE, RC_FP_EDGE);
}

/* Under c->mu. */
static struct rc_entry *rc_find(struct reply_cache *c, const char *key)
{
	struct rc_entry *e;

	for (e = c->buckets[rc_bucket(key)]; e != NULL; e = e->hnext)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

/*
 * A request that carries an Idempotency-Key, once its body is read: the
 * first of its key runs; a repeat of a finished one is answered from the
 * cache; a repeat of a running one waits (parked) for its answer; the key
 * reused for another request is refused (422).
 */
enum rc_begin rcache_begin(struct agent_req *r, const char *key)
{
	struct reply_cache *c = r->h->rc;
	struct MHD_Response *resp = NULL;
	struct agent_deferred *d;
	struct rc_waiter *w;
	struct rc_entry *e;
	unsigned status = 0;
	uint64_t fp;

	if (!rc_key_ok(key)) {
		agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
				  "Request invalid: an %s is 1 to %d letters, "
				  "digits or '-._~:'",
				  PROTO_HDR_IDEMPOTENCY_KEY, PROTO_KEY_MAX);
		return RC_ANSWERED;
	}
	fp = rc_fingerprint(r);
	pthread_mutex_lock(&c->mu);
	e = rc_find(c, key);
	if (e == NULL) {
		rc_room(c, 0, true);
		e = xcalloc(1, sizeof(*e));
		strlcpy_s(e->key, key, sizeof(e->key));
		e->fp = fp;
		e->kept = true;
		buf_init(&e->body, 0);
		e->hnext = c->buckets[rc_bucket(key)];
		c->buckets[rc_bucket(key)] = e;
		c->entries++;
		c->stats.runs++;
		pthread_mutex_unlock(&c->mu);
		r->rce = e;
		return RC_RUN;
	}
	if (e->fp != fp) {
		c->stats.refused++;
		pthread_mutex_unlock(&c->mu);
		agent_reply_error(r, 422, PROTO_ERR_KEY_REUSED,
				  "the %s '%s' was used for another request",
				  PROTO_HDR_IDEMPOTENCY_KEY, key);
		return RC_ANSWERED;
	}
	if (e->done) {
		c->stats.replayed++;
		resp = rc_answer(e, &status);
		pthread_mutex_unlock(&c->mu);
		if (resp == NULL)
			return RC_ANSWERED;
		http_queue(r, status, resp);
		return RC_ANSWERED;
	}
	pthread_mutex_unlock(&c->mu);

	/* The first still runs: park this one (not under mu, see above) and
	 * look again, since it may have finished meanwhile. */
	d = agent_reply_defer(r);
	pthread_mutex_lock(&c->mu);
	c->stats.waited++;
	e = rc_find(c, key);
	if (e != NULL && !e->done) {
		w = xcalloc(1, sizeof(*w));
		w->d = d;
		w->deadline = clock_mono_ms() + c->lim.wait_ms;
		w->next = e->waiters;
		e->waiters = w;
		pthread_mutex_unlock(&c->mu);
		return RC_PARKED;
	}
	if (e != NULL) {
		resp = rc_answer(e, &status);
	} else {
		status = 409;
		resp = rc_refusal(PROTO_ERR_REPLY_NOT_KEPT,
				  "the request with this key ran, but its "
				  "answer is no longer kept");
	}
	pthread_mutex_unlock(&c->mu);
	http_deferred_complete(d, status, resp);
	return RC_PARKED;
}
void agent_reply_cache_defaults(struct agent_reply_cache_limits *l)
{
	l->entries = RC_ENTRIES;
	l->bytes = RC_BYTES;
	l->entry = RC_ENTRY_BYTES;
	l->ttl_ms = RC_TTL_MS;
	l->wait_ms = RC_WAIT_MS;
}

int agent_reply_cache_parse(const char *spec,
			    struct agent_reply_cache_limits *l)
{
	struct agent_reply_cache_limits out = *l;
	const char *p = spec;

	while (*p != '\0') {
		size_t klen = strcspn(p, "=,");
		unsigned long long v;
		char *end;

		if (p[klen] != '=')
			return -EINVAL;
		errno = 0;
		v = strtoull(p + klen + 1, &end, 10);
		if (errno != 0 || end == p + klen + 1 ||
		    (*end != ',' && *end != '\0') || v > (1ULL << 40))
			return -EINVAL;
		if (klen == 7 && strncmp(p, "entries", 7) == 0)
			out.entries = (size_t)v;
		else if (klen == 5 && strncmp(p, "bytes", 5) == 0)
			out.bytes = (size_t)v;
		else if (klen == 5 && strncmp(p, "entry", 5) == 0)
			out.entry = (size_t)v;
		else if (klen == 3 && strncmp(p, "ttl", 3) == 0)
			out.ttl_ms = (long)v;
		else if (klen == 4 && strncmp(p, "wait", 4) == 0)
			out.wait_ms = (long)v;
		else
			return -EINVAL;
		p = *end == ',' ? end + 1 : end;
	}
	*l = out;
	return 0;
}

bool agent_http_reply_cache(const struct agent *a)
{
	return a->http != NULL && a->http->rc->enabled;
}

int rcache_init(struct agent_http *h)
{
	const char *spec = getenv("SANDBOX_AGENT_REPLY_CACHE");
	struct reply_cache *c = xcalloc(1, sizeof(*c));

	pthread_mutex_init(&c->mu, NULL);
	agent_reply_cache_defaults(&c->lim);
	h->rc = c;
	if (spec != NULL && agent_reply_cache_parse(spec, &c->lim) < 0) {
		log_error("SANDBOX_AGENT_REPLY_CACHE='%s' is not a list of "
			  "entries=, bytes=, entry=, ttl= and wait= numbers",
			  spec);
		return -EINVAL;
	}
	/* Strict v1 is alien's agent exactly: the header is ignored. */
	c->enabled =
		!h->a->cfg.strict_v1 && c->lim.entries > 0 && c->lim.bytes > 0;
	return 0;
}

bool rcache_enabled(const struct reply_cache *c)
{
	return c->enabled;
}
