/* SPDX-License-Identifier: MIT */
/*
 * transport: the shared transport core (see transport.h for the rules it
 * implements, and doc/transport-rules.md for where they come from). This
 * is the only file that includes libcurl.
 *
 * Each request runs on a pooled (multi, easy) pair through a small driver
 * loop, so that every phase has its own deadline and the core can stop
 * after the response headers: a 401 is held unread (the write callback
 * pauses the transfer) while the credential is re-read, and its body is
 * read only after the slot lock is released.
 *
 * Locking: t->lock guards the slot list; slot->lock guards the cached
 * connection and is held while a connection is fetched and activated (the
 * seed does the same: one fetch per stale route, not one per waiting
 * request), never while an operation's own body is read; a thread waits
 * for it no longer than its operation deadline. slot->pool_lock guards
 * the idle handles.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/token.h"
#include "common/unixurl.h"
#include "common/sleep.h"
#include "common/xalloc.h"
#include "client/transport.h"

#define ERROR_BODY_MAX PROTO_ERROR_BODY_MAX

/* A cached connection: the agent's route and this boot's credential.
 * Immutable once made; shared by reference between the slot and the
 * requests that took it. */
struct conn {
	atomic_int refs;
	char *url; /* as the provider gave it: "http://127.0.0.1:4000/" */
	char *origin; /* url without its final '/', to join request paths */
	/* An http+unix route (doc/internals/transport.md, "Unix socket
	 * routes"): the socket libcurl connects to, reached through its
	 * directory held open here ("/proc/self/fd/N/NAME"), and the base
	 * request paths are joined to instead of origin. */
	char *unix_path;
	int sock_dirfd;
	char *base;
	/* Each new connection's listener must run as owner (or root). */
	bool check_owner;
	uid_t owner;
	char *token; /* 44 characters */
	char *auth; /* "Authorization: Bearer <token>" */
	/* The agent behind this connection advertised its reply cache in a
	 * health answer carried by it (doc/transport-rules.md 8.3). */
	atomic_bool keyed;
};

/* A pooled libcurl handle pair. The multi owns the connection cache, so a
 * handle keeps its TCP connection alive between requests. */
struct handle {
	CURLM *multi;
	CURL *easy;
	struct handle *next;
};

struct slot {
	char *id;
	pthread_mutex_t lock;
	struct conn *conn; /* NULL when empty */
	unsigned gen; /* activations so far */
	pthread_mutex_t pool_lock;
	struct handle *idle;
	unsigned nidle;
	struct slot *next;
};

struct transport {
	struct provider *prov;
	struct transport_config cfg;
	pthread_mutex_t lock;
	struct slot *slots;
	pthread_mutex_t id_lock; /* client_id */
	char client_id[PROTO_CLIENT_ID_MAX + 1]; /* "" when none */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_ALL);
}

/* ---- the calling thread's operation deadline ------------------------------ */

/* 0: none. Set by the filesystem layer around each operation, and by the
 * readiness wait around its loop (doc/transport-rules.md 9). */
static __thread long long op_deadline;
static __thread bool op_timed_out;
/* Set: a request of this thread gives up once *op_cancel is not 0. */
static __thread const int *op_cancel;

void transport_op_set_cancel(const int *flag)
{
	op_cancel = flag;
}

long long transport_now_ms(void)
{
	return clock_mono_ms();
}

void transport_op_set_deadline(long long deadline_ms)
{
	op_deadline = deadline_ms > 0 ? deadline_ms : 0;
}

long long transport_op_deadline(void)
{
	return op_deadline;
}

bool transport_op_timed_out(void)
{
	return op_timed_out;
}

void transport_op_clear_timed_out(void)
{
	op_timed_out = false;
}

/* The earlier of two deadlines, 0 meaning none. */
static long long earliest(long long a, long long b)
{
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	return a < b ? a : b;
}

static bool op_deadline_passed(void)
{
	return op_deadline != 0 && clock_mono_ms() >= op_deadline;
}

static void op_late(struct sbx_error *err, const char *op, const char *what)
{
	op_timed_out = true;
	sbx_error_set(err, SBX_UNREACHABLE, NULL,
		      "%s: the operation's deadline passed %s", op, what);
}

/* ---- connections -------------------------------------------------------- */

static void conn_unref(struct conn *c)
{
	if (c == NULL || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	free(c->url);
	free(c->origin);
	free(c->unix_path);
	free(c->base);
	if (c->sock_dirfd >= 0)
		close(c->sock_dirfd);
	token_free(c->token);
	token_free(c->auth);
	free(c);
}

static struct conn *conn_ref(struct conn *c)
{
	if (c != NULL)
		atomic_fetch_add(&c->refs, 1);
	return c;
}

static struct conn *conn_new(const char *url, const char *token, size_t len)
{
	struct conn *c = xcalloc(1, sizeof(*c));
	size_t ulen = strlen(url);

	atomic_init(&c->refs, 1);
	c->sock_dirfd = -1;
	c->url = xstrdup(url);
	c->origin = xstrndup(url, ulen > 0 && url[ulen - 1] == '/' ? ulen - 1
								   : ulen);
	c->token = xstrndup(token, len);
	c->auth = xasprintf("Authorization: Bearer %s", c->token);
	atomic_init(&c->keyed, false);
	return c;
}

/* Set the credential of a connection still being made (nobody else holds
 * it yet). */
static void conn_set_token(struct conn *c, const char *token, size_t len)
{
	token_free(c->token);
	token_free(c->auth);
	c->token = xstrndup(token, len);
	c->auth = xasprintf("Authorization: Bearer %s", c->token);
}

/* The seed's matches_request: same bearer and same URL origin. */
static bool conn_same(const struct conn *a, const struct conn *b)
{
	return a != NULL && b != NULL && strcmp(a->origin, b->origin) == 0 &&
	       token_equal(a->token, strlen(a->token), b->token,
			   strlen(b->token));
}

/* ---- slots and handles -------------------------------------------------- */

static struct slot *slot_get(struct transport *t, const char *id)
{
	struct slot *s;

	pthread_mutex_lock(&t->lock);
	for (s = t->slots; s != NULL; s = s->next)
		if (strcmp(s->id, id) == 0)
			break;
	if (s == NULL) {
		s = xcalloc(1, sizeof(*s));
		s->id = xstrdup(id);
		pthread_mutex_init(&s->lock, NULL);
		pthread_mutex_init(&s->pool_lock, NULL);
		s->next = t->slots;
		t->slots = s;
	}
	pthread_mutex_unlock(&t->lock);
	return s;
}

static void handle_free(struct handle *h)
{
	if (h == NULL)
		return;
	curl_multi_cleanup(h->multi);
	curl_easy_cleanup(h->easy);
	free(h);
}

static struct handle *handle_take(struct slot *s)
{
	struct handle *h;

	pthread_mutex_lock(&s->pool_lock);
	h = s->idle;
	if (h != NULL) {
		s->idle = h->next;
		s->nidle--;
	}
	pthread_mutex_unlock(&s->pool_lock);
	if (h != NULL)
		return h;
	h = xcalloc(1, sizeof(*h));
	h->multi = curl_multi_init();
	h->easy = curl_easy_init();
	if (h->multi == NULL || h->easy == NULL)
		fatalx("libcurl could not make a handle");
	return h;
}

static void handle_give(struct transport *t, struct slot *s, struct handle *h)
{
	if (h == NULL)
		return;
	pthread_mutex_lock(&s->pool_lock);
	if (s->nidle < t->cfg.max_idle_handles) {
		h->next = s->idle;
		s->idle = h;
		s->nidle++;
		h = NULL;
	}
	pthread_mutex_unlock(&s->pool_lock);
	handle_free(h);
}

/*
 * Take slot->lock, waiting no longer than the calling thread's operation
 * deadline: another request may hold it for a whole fetch and activation,
 * and an operation must not wait for that past its own deadline. Returns 0,
 * or -ETIMEDOUT (the operation is marked as timed out).
 */
static int slot_lock(struct slot *s)
{
	long long d = op_deadline;
	struct timespec ts;
	int rc;

	if (d == 0) {
		pthread_mutex_lock(&s->lock);
		return 0;
	}
	ts.tv_sec = (time_t)(d / 1000);
	ts.tv_nsec = (long)(d % 1000) * 1000000L;
	rc = pthread_mutex_clocklock(&s->lock, CLOCK_MONOTONIC, &ts);
	if (rc == 0)
		return 0;
	op_timed_out = true;
	return -ETIMEDOUT;
}

/* Clear the slot only if it still holds the connection the request used,
 * so a concurrent refresh is never clobbered. When the slot is busy past
 * the operation deadline, the holder is refreshing it anyway. */
static void slot_invalidate(struct slot *s, const struct conn *used)
{
	struct conn *old = NULL;

	if (slot_lock(s) < 0)
		return;
	if (s->conn != NULL && conn_same(s->conn, used)) {
		old = s->conn;
		s->conn = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	conn_unref(old);
}

/* ---- one HTTP exchange -------------------------------------------------- */

enum xfer_phase {
	XFER_HOLD, /* headers wanted; body bytes pause the transfer */
	XFER_ERRBODY, /* reading an error body, bounded at 4096 */
	XFER_BODY, /* reading a success body into the sink or buffer */
};

enum xfer_outcome {
	XFER_OK = 0, /* the phase completed */
	XFER_CONNECT, /* never connected: the request was not delivered */
	XFER_FOREIGN, /* the listener is not the agent's user: not sent */
	XFER_BROKEN, /* failed after connecting */
	XFER_TIMEOUT, /* a deadline passed */
	XFER_TOO_BIG, /* an error body over 4096 / a body over max_body */
	XFER_SINK, /* the sink refused (sink_err) */
};

struct xfer {
	struct handle *h;
	const struct transport_req *req;
	struct transport_resp *resp;
	struct curl_slist *hdrs;
	struct curl_slist *pins;
	const char *key; /* Idempotency-Key value, or NULL */
	bool fresh; /* a new connection, never a kept-alive one */
	long long total; /* the exchange's deadline (absolute ms) */
	size_t body_bytes; /* success-body bytes handed on so far */
	char errbuf[CURL_ERROR_SIZE];
	enum xfer_phase phase;
	long cur_status; /* status of the header block being read */
	bool headers_done;
	bool paused;
	bool done; /* libcurl finished the transfer */
	CURLcode result;
	struct buf errbody;
	bool errbody_over;
	int sink_err;
	long long last_byte_ms;
	/* The listener check (conn->check_owner): the socket opened for a
	 * new connection by this transfer, and why its listener was
	 * refused. */
	const struct conn *conn;
	int new_sock;
	char foreign[200];
};

static size_t xfer_header_cb(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	struct transport_resp *r = x->resp;
	size_t len = size * n;
	char line[512];
	char *v;

	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', len);

		x->cur_status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->etag[0] = '\0';
		r->content_type[0] = '\0';
		r->has_range = false;
		r->full_size = UINT64_MAX;
		r->replayed = false;
		return len;
	}
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
		/* End of a header block; 1xx blocks are followed by more. */
		if (x->cur_status >= 200) {
			x->headers_done = true;
			r->status = x->cur_status;
		}
		return len;
	}
	if (len >= sizeof(line))
		return len;
	memcpy(line, p, len);
	line[len] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	v = strchr(line, ':');
	if (v == NULL)
		return len;
	*v++ = '\0';
	while (*v == ' ' || *v == '\t')
		v++;
	if (strcasecmp(line, "ETag") == 0) {
		snprintf(r->etag, sizeof(r->etag), "%s", v);
	} else if (strcasecmp(line, "Content-Type") == 0) {
		snprintf(r->content_type, sizeof(r->content_type), "%s", v);
	} else if (strcasecmp(line, "Content-Range") == 0) {
		unsigned long long a, b, total;

		if (sscanf(v, "bytes %llu-%llu/%llu", &a, &b, &total) == 3) {
			r->has_range = true;
			r->range_start = a;
			if (r->full_size == UINT64_MAX)
				r->full_size = total;
		}
	} else if (strcasecmp(line, "X-Sandboxfs-Size") == 0) {
		r->full_size = strtoull(v, NULL, 10);
	} else if (strcasecmp(line, PROTO_HDR_REPLAYED) == 0) {
		r->replayed = strcasecmp(v, "true") == 0;
	}
	return len;
}

static size_t xfer_write_cb(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	int rc;

	x->last_byte_ms = clock_mono_ms();
	switch (x->phase) {
	case XFER_HOLD:
		x->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	case XFER_ERRBODY:
		if (x->errbody.len + len > ERROR_BODY_MAX) {
			x->errbody_over = true;
			return 0;
		}
		if (buf_append(&x->errbody, p, len) < 0)
			return 0;
		return len;
	case XFER_BODY:
		x->body_bytes += len;
		if (x->req->sink != NULL) {
			rc = x->req->sink(x->req->sink_arg, p, len);
			if (rc < 0) {
				x->sink_err = rc;
				return 0;
			}
			return len;
		}
		rc = buf_append(&x->resp->body, p, len);
		if (rc < 0) {
			x->sink_err = rc;
			return 0;
		}
		return len;
	}
	return 0;
}

/* ---- who listens (doc/transport-rules.md 2) ------------------------------- */

/*
 * A route's credential goes only to its agent: when the provider names
 * the user its agents run as (local sandboxes), every new connection's
 * listener is checked before the first request goes on it. libcurl tells
 * a transfer after its connection is made and before the request is sent
 * (the prerequest callback); the socket it opened for a new connection is
 * the one this transfer saw made (the open-socket callback). A reused
 * connection was checked when it was new.
 */
static curl_socket_t xfer_open_socket(void *ud, curlsocktype purpose,
				      struct curl_sockaddr *a)
{
	struct xfer *x = ud;
	int fd;

	(void)purpose;
	/* Close-on-exec: the mount starts agents. */
	fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	if (fd < 0)
		return CURL_SOCKET_BAD;
	x->new_sock = fd;
	return fd;
}

/* Parse one /proc/net/tcp{,6} address "HEX:PORT" into 4 or 16 bytes. */
static bool proc_net_addr(const char *p, bool six, unsigned char *addr,
			  unsigned *port)
{
	unsigned w[4], pt;
	int i, n = six ? 4 : 1;

	for (i = 0; i < n; i++) {
		if (sscanf(p + 8 * i, "%8X", &w[i]) != 1)
			return false;
		/* Each word is printed from the address's memory as a
		 * host-order number: copying it back gives the bytes. */
		memcpy(addr + 4 * i, &w[i], 4);
	}
	if (p[8 * n] != ':' || sscanf(p + 8 * n + 1, "%4X", &pt) != 1)
		return false;
	*port = pt;
	return true;
}

/*
 * The owner of the loopback socket that answers us: the accepted socket
 * whose local end is the agent's address and whose remote end is ours
 * (it has its listener's owner), else, while the kernel has not made it
 * yet, the listener on that address. -1 when none is found.
 */
static long tcp_peer_uid(const char *peer_ip, int peer_port,
			 const char *local_ip, int local_port)
{
	unsigned char want_peer[16], want_local[16], a[16], b[16];
	bool six = strchr(peer_ip, ':') != NULL;
	size_t alen = six ? 16 : 4;
	long listener = -1, found = -1;
	char line[512];
	FILE *f;

	if (inet_pton(six ? AF_INET6 : AF_INET, peer_ip, want_peer) != 1 ||
	    inet_pton(six ? AF_INET6 : AF_INET, local_ip, want_local) != 1)
		return -1;
	f = fopen(six ? "/proc/net/tcp6" : "/proc/net/tcp", "re");
	if (f == NULL)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f) != NULL) {
		char la[40], ra[40];
		unsigned st, lp, rp;
		unsigned long uid;

		if (sscanf(line, " %*u: %39s %39s %X %*s %*s %*s %lu", la, ra,
			   &st, &uid) != 4 ||
		    !proc_net_addr(la, six, a, &lp) ||
		    !proc_net_addr(ra, six, b, &rp))
			continue;
		if ((int)lp != peer_port || memcmp(a, want_peer, alen) != 0)
			continue;
		if ((int)rp == local_port && memcmp(b, want_local, alen) == 0)
			found = (long)uid;
		else if (st == 0x0A) /* TCP_LISTEN */
			listener = (long)uid;
	}
	fclose(f);
	return found >= 0 ? found : listener;
}

static int xfer_check_listener(void *ud, char *peer_ip, char *local_ip,
			       int peer_port, int local_port)
{
	struct xfer *x = ud;
	const struct conn *c = x->conn;
	long uid = -1;

	if (x->new_sock < 0)
		return CURL_PREREQFUNC_OK; /* checked when it was new */
	if (c->unix_path != NULL) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (getsockopt(x->new_sock, SOL_SOCKET, SO_PEERCRED, &cred,
			       &len) == 0)
			uid = (long)cred.uid;
	} else {
		long long until = clock_mono_ms() + 100;

		/* The accepted end may take a moment to appear. */
		while ((uid = tcp_peer_uid(peer_ip, peer_port, local_ip,
					   local_port)) < 0 &&
		       clock_mono_ms() < until)
			sleep_ms(2);
	}
	x->new_sock = -1;
	if (uid == (long)c->owner || uid == 0)
		return CURL_PREREQFUNC_OK;
	if (uid < 0)
		snprintf(x->foreign, sizeof(x->foreign),
			 "who listens at %s could not be told: nothing was "
			 "sent",
			 c->url);
	else
		snprintf(x->foreign, sizeof(x->foreign),
			 "the listener at %s runs as uid %ld, not as the "
			 "agent's user (uid %ld): nothing was sent",
			 c->url, uid, (long)c->owner);
	return CURL_PREREQFUNC_ABORT;
}

/* Configure h for req against conn (NULL for a plain provider request:
 * then url/headers/TLS come from http). */
static int xfer_setup(struct xfer *x, struct transport *t,
		      const struct conn *conn, const char *url,
		      const struct transport_http_req *http)
{
	const struct transport_req *req = x->req;
	CURL *e = x->h->easy;
	const char *const *extra = http ? http->headers : req->headers;
	const char *ctype = http ? http->content_type : req->content_type;
	const char *method = http ? http->method : req->method;
	const void *body = http ? http->body : req->body;
	size_t body_len = http ? http->body_len : req->body_len;
	long connect_ms =
		http ? http->connect_timeout_ms : t->cfg.connect_timeout_ms;
	const char *ca_file = NULL;
	const char *const *resolve = NULL;
	struct curl_slist *pins = NULL;
	char line[160];
	size_t i;

	curl_easy_reset(e);
	x->errbuf[0] = '\0';
	if (conn != NULL)
		x->hdrs = curl_slist_append(x->hdrs, conn->auth);
	for (i = 0; extra != NULL && extra[i] != NULL; i++)
		x->hdrs = curl_slist_append(x->hdrs, extra[i]);
	if (x->key != NULL) {
		snprintf(line, sizeof(line), "%s: %s",
			 PROTO_HDR_IDEMPOTENCY_KEY, x->key);
		x->hdrs = curl_slist_append(x->hdrs, line);
	}
	if (http == NULL && req->tag_client) {
		pthread_mutex_lock(&t->id_lock);
		if (t->client_id[0] != '\0') {
			snprintf(line, sizeof(line), "%s: %s", PROTO_HDR_CLIENT,
				 t->client_id);
			x->hdrs = curl_slist_append(x->hdrs, line);
		}
		pthread_mutex_unlock(&t->id_lock);
	}
	if (ctype != NULL) {
		snprintf(line, sizeof(line), "Content-Type: %s", ctype);
		x->hdrs = curl_slist_append(x->hdrs, line);
	} else {
		x->hdrs = curl_slist_append(x->hdrs, "Content-Type:");
	}
	/* One round trip: no "Expect: 100-continue" for large bodies. */
	x->hdrs = curl_slist_append(x->hdrs, "Expect:");
	if (x->hdrs == NULL)
		return -ENOMEM;

	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	if (conn != NULL && conn->unix_path != NULL)
		curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, conn->unix_path);
	if (conn != NULL && conn->check_owner) {
		x->conn = conn;
		x->new_sock = -1;
		curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION,
				 xfer_open_socket);
		curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
		curl_easy_setopt(e, CURLOPT_PREREQFUNCTION,
				 xfer_check_listener);
		curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
	}
	if (http == NULL) {
		/* The agent is reached directly, never through a proxy
		 * (doc/transport-rules.md 2); provider requests take the
		 * environment's proxy settings, as the Azure SDKs do
		 * (rules 10). */
		curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
		curl_easy_setopt(e, CURLOPT_PROXY, "");
	}
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	/* Large receive buffers: a ranged read of megabytes should take a
	 * few hundred recv() calls, not tens of thousands. */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	/* Reuse a pooled connection only while the agent surely keeps it
	 * open (its idle timeout is longer), so a reused connection is never
	 * found dead after the request went out. */
	curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, 30L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, xfer_header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, xfer_write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (http != NULL) {
		ca_file = http->ca_file;
		resolve = http->resolve;
	} else if (t->prov->ops->ca_file != NULL) {
		ca_file = t->prov->ops->ca_file(t->prov);
		if (t->prov->ops->resolve != NULL)
			resolve = t->prov->ops->resolve(t->prov);
	}
	if (ca_file != NULL)
		curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
	for (i = 0; resolve != NULL && resolve[i] != NULL; i++)
		pins = curl_slist_append(pins, resolve[i]);
	if (pins != NULL) {
		/* The list must outlive the transfer; xfer_finish frees it. */
		curl_easy_setopt(e, CURLOPT_RESOLVE, pins);
		x->pins = pins;
	}
	/* libcurl sends a request again, silently, when a kept-alive
	 * connection turns out dead before any answer byte; a fresh
	 * connection is never retried that way. So a request that must not
	 * reach the agent twice unknowingly goes on a fresh one
	 * (doc/transport-rules.md 8). */
	if (x->fresh)
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);

	if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else {
		if (strcmp(method, "POST") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
	}
	if (curl_multi_add_handle(x->h->multi, e) != CURLM_OK)
		return -EIO;
	return 0;
}

static void xfer_init(struct xfer *x, struct handle *h,
		      const struct transport_req *req,
		      struct transport_resp *resp)
{
	memset(x, 0, sizeof(*x));
	x->h = h;
	x->req = req;
	x->resp = resp;
	x->phase = XFER_HOLD;
	buf_init(&x->errbody, ERROR_BODY_MAX + 1);
	resp->status = 0;
	resp->full_size = UINT64_MAX;
	resp->body.max =
		req->max_body ? req->max_body : TRANSPORT_DEFAULT_MAX_BODY;
}

/* Detach the easy handle from its multi. An unfinished transfer closes its
 * connection (libcurl cannot reuse a half-read response). */
static void xfer_finish(struct xfer *x)
{
	if (x->h == NULL)
		return;
	curl_multi_remove_handle(x->h->multi, x->h->easy);
	curl_slist_free_all(x->hdrs);
	curl_slist_free_all(x->pins);
	x->hdrs = NULL;
	x->pins = NULL;
	x->h = NULL;
	buf_cleanup(&x->errbody);
}

/*
 * The failures that prove the request never left this host: no TCP
 * connection, or no TLS session over it (nothing is sent before the
 * handshake completes). The seed counts both as connect errors
 * (doc/transport-rules.md 4).
 */
static bool curl_is_connect_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_OPERATION_TIMEDOUT: /* only the connect timeout is
					  libcurl's; ours are below */
	case CURLE_PROXY:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_CLIENTCERT:
	case CURLE_USE_SSL_FAILED:
		return true;
	default:
		return false;
	}
}

/*
 * Drive the transfer until the phase's goal: response headers (XFER_HOLD)
 * or the end of the body. deadline is absolute (ms); idle_ms > 0 also ends
 * the wait when no byte arrived for that long.
 */
static enum xfer_outcome xfer_run(struct xfer *x, long long deadline,
				  long idle_ms)
{
	CURLM *m = x->h->multi;

	x->last_byte_ms = clock_mono_ms();
	for (;;) {
		CURLMsg *msg;
		int running = 0, left;
		long long now, wait;

		if (op_cancel != NULL &&
		    __atomic_load_n(op_cancel, __ATOMIC_RELAXED) != 0) {
			x->sink_err = -ECANCELED;
			return XFER_SINK;
		}
		if (curl_multi_perform(m, &running) != CURLM_OK)
			return XFER_BROKEN;
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			if (msg->msg == CURLMSG_DONE) {
				x->done = true;
				x->result = msg->data.result;
			}
		}
		if (x->phase == XFER_HOLD && x->headers_done)
			return XFER_OK;
		/* A refusal made while curl_easy_pause(CONT) delivered the
		 * bytes held during the header phase is not reported
		 * through the multi handle: look at our own flags. */
		if (x->errbody_over)
			return XFER_TOO_BIG;
		if (x->sink_err == -EFBIG && x->req->sink == NULL)
			return XFER_TOO_BIG;
		if (x->sink_err != 0)
			return XFER_SINK;
		if (x->done) {
			if (x->foreign[0] != '\0')
				return XFER_FOREIGN;
			if (x->result == CURLE_OK)
				return x->headers_done ? XFER_OK : XFER_BROKEN;
			if (x->errbody_over)
				return XFER_TOO_BIG;
			if (x->sink_err == -EFBIG && x->req->sink == NULL)
				return XFER_TOO_BIG;
			if (x->sink_err != 0)
				return XFER_SINK;
			if (!x->headers_done &&
			    curl_is_connect_error(x->result))
				return XFER_CONNECT;
			return XFER_BROKEN;
		}
		now = clock_mono_ms();
		if (now >= deadline || (idle_ms > 0 && x->headers_done &&
					now - x->last_byte_ms >= idle_ms)) {
			op_timed_out = true;
			return XFER_TIMEOUT;
		}
		wait = deadline - now;
		if (idle_ms > 0 && x->headers_done &&
		    x->last_byte_ms + idle_ms - now < wait)
			wait = x->last_byte_ms + idle_ms - now;
		if (wait > 1000)
			wait = 1000;
		if (wait < 1)
			wait = 1;
		curl_multi_poll(m, NULL, 0, (int)wait, NULL);
	}
}

/* Continue a held transfer into another phase. */
static void xfer_resume_as(struct xfer *x, enum xfer_phase phase)
{
	x->phase = phase;
	if (x->paused) {
		x->paused = false;
		curl_easy_pause(x->h->easy, CURLPAUSE_CONT);
	}
}

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

static const char *status_text(long status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 409:
		return "Conflict";
	case 412:
		return "Precondition Failed";
	case 413:
		return "Payload Too Large";
	case 415:
		return "Unsupported Media Type";
	case 416:
		return "Range Not Satisfiable";
	case 422:
		return "Unprocessable Entity";
	case 429:
		return "Too Many Requests";
	case 500:
		return "Internal Server Error";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	default:
		return "";
	}
}

static void body_reason(enum xfer_outcome o, char *out, size_t size)
{
	switch (o) {
	case XFER_TOO_BIG:
		snprintf(out, size, "its error body is longer than %d bytes",
			 ERROR_BODY_MAX);
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

static bool body_typed_not_found(const struct buf *b)
{
	static const char *const prefixes[] = {PROTO_ERR_PATH_NOT_FOUND ":",
					       PROTO_ERR_JOB_NOT_FOUND ":"};
	size_t i;

	for (i = 0; i < 2; i++) {
		size_t n = strlen(prefixes[i]);

		if (b->len >= n && memcmp(b->data, prefixes[i], n) == 0)
			return true;
	}
	return false;
}

static bool body_typed_fs(const struct buf *b)
{
	return proto_error_fs_errno(b->data, b->len) != 0;
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
	char text[ERROR_BODY_MAX + 1];

	body_text(body, text, sizeof(text));
	if (status >= 500) {
		unanswered(err, req, "the sandbox host returned %ld: %s",
			   status, text);
	} else {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
			      "%s returned %ld %s: %s", req->op, status,
			      status_text(status), text);
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

/* ---- fetch and activate (doc/transport-rules.md 2, 3) ---------------------- */

static void invalid_route(struct sbx_error *err)
{
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
		      "the provider did not report a valid agent route and "
		      "per-boot credential");
}

static void not_ready(struct sbx_error *err)
{
	sbx_error_set(err, SBX_UNREACHABLE, NULL,
		      "%s: the sandbox agent is not ready", TRANSPORT_OP_AGENT);
}

/*
 * An http+unix route's socket, before anything is read for it: its
 * directory is opened and held (libcurl connects through it, so the path
 * cannot be turned elsewhere meanwhile, and a path longer than a socket
 * address holds still works), and the socket there must be a socket
 * owned by the agent's user or root. conn gets the path libcurl uses.
 */
static int unix_route(struct conn *c, const char *url, struct sbx_error *err)
{
	char path[PATH_MAX], *slash;
	struct stat st;
	int rc;

	if (unixurl_parse(url, path, sizeof(path)) < 0) {
		invalid_route(err);
		return -EPROTO;
	}
	slash = strrchr(path, '/');
	*slash = '\0';
	c->sock_dirfd = open(slash == path ? "/" : path,
			     O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c->sock_dirfd < 0 ||
	    fstatat(c->sock_dirfd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = -errno;
		*slash = '/';
		if (rc == -ENOENT) {
			not_ready(err);
			return -EIO;
		}
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "%s: the agent's socket %s: %s",
			      TRANSPORT_OP_AGENT, path, strerror(-rc));
		return -EIO;
	}
	*slash = '/';
	if (!S_ISSOCK(st.st_mode) ||
	    (c->check_owner && st.st_uid != c->owner && st.st_uid != 0)) {
		sbx_error_set(err, SBX_COMMAND_FAILED,
			      SBX_FAIL_TRANSPORT_INVALID,
			      "%s: %s %s %ld, not to the agent's user "
			      "(uid %ld): refused, nothing was sent",
			      TRANSPORT_OP_AGENT, path,
			      S_ISSOCK(st.st_mode)
				      ? "belongs to uid"
				      : "is not a socket; it belongs to uid",
			      (long)st.st_uid, (long)c->owner);
		err->err = EPROTO;
		return -EPROTO;
	}
	c->unix_path =
		xasprintf("/proc/self/fd/%d/%s", c->sock_dirfd, slash + 1);
	if (strlen(c->unix_path) >=
	    sizeof(((struct sockaddr_un *)0)->sun_path)) {
		sbx_error_set(err, SBX_COMMAND_FAILED,
			      SBX_FAIL_TRANSPORT_INVALID,
			      "%s: the agent's socket name in %s is too long",
			      TRANSPORT_OP_AGENT, url);
		err->err = EPROTO;
		return -EPROTO;
	}
	c->base = xstrdup("http://localhost");
	return 0;
}

static int fetch_connection(struct transport *t, const char *id,
			    struct conn **out, struct sbx_error *err)
{
	struct provider *p = t->prov;
	char *url = NULL, *cred = NULL;
	struct conn *c = NULL;
	bool check = false;
	uid_t owner = 0;
	size_t len = 0;
	int rc;

	rc = p->ops->route(p, id, &url, err);
	if (rc < 0)
		goto out;
	/* The URL comes from the provider; refuse unexpected origins before
	 * attaching even this sandbox-scoped credential. */
	if (url == NULL || !p->ops->route_allowed(p, url)) {
		invalid_route(err);
		rc = -EPROTO;
		goto out;
	}
	if (p->ops->listener_uid != NULL &&
	    p->ops->listener_uid(p, &owner) == 0)
		check = true;
	if (unixurl_is(url)) {
		/* Checked before the credential is even read. */
		c = conn_new(url, "", 0);
		c->check_owner = check;
		c->owner = owner;
		rc = unix_route(c, url, err);
		if (rc < 0)
			goto out;
	}
	rc = p->ops->credential(p, id, &cred, &len, err);
	if (rc == -ENOENT) {
		not_ready(err);
		goto out;
	}
	if (rc < 0)
		goto out;
	if (!token_valid(cred, len)) {
		invalid_route(err);
		rc = -EPROTO;
		goto out;
	}
	if (c == NULL)
		c = conn_new(url, cred, len);
	else
		conn_set_token(c, cred, len);
	c->check_owner = check;
	c->owner = owner;
	*out = c;
	c = NULL;
	rc = 0;
out:
	if (cred != NULL) {
		token_wipe(cred, len);
		free(cred);
	}
	conn_unref(c);
	free(url);
	return rc;
}

static int record_gone(struct sbx_error *err, const char *op, const char *id)
{
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_GONE,
		      "%s: sandbox '%s' does not exist", op, id);
	return -ENOENT;
}

/* One exchange without refresh or replay (the seed's agent_protocol::send),
 * for activation and health-style requests on a known connection. */
static int send_plain(struct transport *t, struct slot *s,
		      const struct conn *conn, const struct transport_req *req,
		      struct transport_resp *resp, struct sbx_error *err);

static int activate_connection(struct transport *t, struct slot *s,
			       const char *id, const struct conn *conn,
			       struct sbx_error *err)
{
	struct provider *p = t->prov;
	struct provider_record rec;
	struct transport_resp resp;
	struct transport_req req = {
		.op = TRANSPORT_OP_ACTIVATE,
		/* It starts the image's code: never sent twice
		 * unknowingly, though the seed classifies it as
		 * unreachable when unanswered. */
		.cls = TRANSPORT_CHANGE,
		.method = "POST",
		.path = "/v1/activate",
		.max_body = 4096,
	};
	enum transport_kind kind;
	int rc;

	/* Any operation can be the first on a fresh boot, and activation
	 * starts image code: re-read and judge the record every time. */
	memset(&rec, 0, sizeof(rec));
	rc = p->ops->record(p, id, &rec, err);
	if (rc == -ENOENT)
		return record_gone(err, TRANSPORT_OP_ACTIVATE, id);
	if (rc < 0)
		return rc;
	if (p->ops->judge != NULL) {
		rc = p->ops->judge(p, &rec, err);
		if (rc < 0)
			goto out;
	}
	rc = transport_kind_of(&rec, &kind, err);
	if (rc < 0)
		goto out;
	if (kind != TRANSPORT_AGENT) {
		invalid_route(err);
		rc = -EPROTO;
		goto out;
	}
	transport_resp_init(&resp);
	rc = send_plain(t, s, conn, &req, &resp, err);
	transport_resp_cleanup(&resp);
out:
	provider_record_cleanup(&rec);
	return rc;
}

/* The seed's request(): the cached connection, fetched and activated when
 * the slot is empty. Returns a reference. */
static int slot_connection(struct transport *t, struct slot *s, const char *id,
			   const char *op, struct conn **out,
			   struct sbx_error *err)
{
	struct conn *c = NULL;
	int rc = 0;

	if (slot_lock(s) < 0) {
		op_late(err, op,
			"while another request refreshed the sandbox's "
			"connection");
		return -EIO;
	}
	if (s->conn == NULL) {
		rc = fetch_connection(t, id, &c, err);
		if (rc == 0) {
			rc = activate_connection(t, s, id, c, err);
			if (rc == 0) {
				s->conn = c;
				s->gen++;
			} else {
				conn_unref(c);
			}
		}
	}
	if (rc == 0)
		*out = conn_ref(s->conn);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- sending ------------------------------------------------------------- */

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

	return req->outlives_op ? d : earliest(d, op_deadline);
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
	struct handle *h;
	char *url;
	bool started;
};

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

	memset(a, 0, sizeof(*a));
	a->h = handle_take(s);
	a->url = join_url(conn, req->path);
	a->started = true;
	xfer_init(&a->x, a->h, req, resp);
	a->x.key = key;
	a->x.fresh = fresh;
	a->x.total = exchange_deadline(t, req, start);
	headers = earliest(start + t->cfg.response_timeout_ms, a->x.total);
	if (xfer_setup(&a->x, t, conn, a->url, NULL) < 0) {
		a->x.sink_err = -EIO;
		return XFER_SINK;
	}
	return xfer_run(&a->x, headers, 0);
}

static void attempt_end(struct transport *t, struct slot *s, struct attempt *a)
{
	if (!a->started)
		return;
	xfer_finish(&a->x);
	handle_give(t, s, a->h);
	free(a->url);
	a->started = false;
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
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "%s: the answer is larger than %zu bytes",
			      req->op, req->max_body);
		err->err = EFBIG;
		return -EFBIG;
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
		return -EIO;
	}
}

static int send_plain(struct transport *t, struct slot *s,
		      const struct conn *conn, const struct transport_req *req,
		      struct transport_resp *resp, struct sbx_error *err)
{
	struct attempt a;
	enum xfer_outcome o;
	int rc;

	if (op_deadline_passed()) {
		op_late(err, req->op, "before the request was sent");
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
	attempt_end(t, s, &a);
	return rc;
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

/* The reply cache's answers that say the first attempt's outcome cannot
 * be learnt (doc/protocol-ext.md, the reply cache). */
static bool body_outcome_unknowable(const struct buf *b)
{
	static const char *const prefixes[] = {PROTO_ERR_IN_PROGRESS ":",
					       PROTO_ERR_REPLY_NOT_KEPT ":",
					       PROTO_ERR_KEY_REUSED ":"};
	size_t i;

	for (i = 0; i < 3; i++) {
		size_t n = strlen(prefixes[i]);

		if (b->len >= n && memcmp(b->data, prefixes[i], n) == 0)
			return true;
	}
	return false;
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
	if (op_deadline_passed()) {
		op_late(err, req->op, "before the request was sent again");
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
			char text[ERROR_BODY_MAX + 1];

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
	attempt_end(t, s, &a);
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

/*
 * The rules of doc/transport-rules.md 4 - 6 and 8 for one request. When
 * answered_out is not NULL it receives a reference to the connection that
 * carried the final answer (NULL when none did).
 */
static int send_request(struct transport *t, struct slot *s, const char *id,
			const struct transport_req *req,
			struct transport_resp *resp, struct sbx_error *err,
			struct conn **answered_out)
{
	struct conn *used = NULL, *fresh = NULL, *previous = NULL;
	struct conn *answered = NULL;
	enum refresh_trigger trigger;
	enum xfer_outcome o;
	struct attempt a;
	char key_buf[PROTO_KEY_MAX + 1];
	const char *key = NULL;
	bool keyed, keep, got_answer;
	int rc;

	sbx_error_clear(err);
	memset(&a, 0, sizeof(a));
	if (op_deadline_passed()) {
		op_late(err, req->op, "before the request was sent");
		rc = -EIO;
		goto out;
	}
	rc = slot_connection(t, s, id, req->op, &used, err);
	if (rc < 0)
		goto out;

	/* A request that must not reach the agent twice unknowingly goes
	 * on a fresh connection, unless the agent keeps a reply cache: then
	 * its key makes a second delivery harmless (rules 8). */
	keyed = req->cls != TRANSPORT_SAFE && atomic_load(&used->keyed);
	if (keyed) {
		make_key(key_buf);
		key = key_buf;
	}
	o = attempt_start(t, s, used, req, resp, key,
			  req->cls != TRANSPORT_SAFE && !keyed, &a);
	switch (o) {
	case XFER_CONNECT:
		/* Never delivered: safe to refresh and replay. */
		trigger = REFRESH_CONNECT;
		goto refresh;
	case XFER_OK:
		break;
	case XFER_TIMEOUT:
		slot_invalidate(s, used);
		attempt_failed(err, req, o, &a.x);
		rc = -EIO;
		goto out;
	case XFER_SINK:
		/* It could not even be prepared: nothing was sent. */
		attempt_failed(err, req, o, &a.x);
		rc = -EIO;
		goto out;
	case XFER_FOREIGN:
		/* Someone else listens where the agent was: nothing was
		 * sent, nothing is replayed there. */
		slot_invalidate(s, used);
		attempt_failed(err, req, o, &a.x);
		rc = -EPROTO;
		goto out;
	default:
		attempt_failed(err, req, o, &a.x);
		rc = -EIO;
		if (keyed)
			goto ask_again;
		slot_invalidate(s, used);
		goto out;
	}

	if (resp->status == 404) {
		if (!read_error_body(t, &a.x, err)) {
			slot_invalidate(s, used);
			rc = -EIO;
			goto out;
		}
		if (body_typed_not_found(&a.x.errbody)) {
			/* A typed refusal is the agent's final answer. */
			refusal(err, req, 404, &a.x.errbody);
			rc = sbx_error_errno(err);
			answered = conn_ref(used);
			goto out;
		}
		/* An untyped 404 is a provider route miss. */
		trigger = REFRESH_NOT_FOUND;
		goto refresh;
	}
	if (resp->status == 401) {
		/* Keep the answer unread while the credential is re-read. */
		trigger = REFRESH_UNAUTHORIZED;
		goto refresh;
	}
	if (resp->status >= 200 && resp->status < 300) {
		rc = read_success_body(t, &a.x, err);
		if (rc == 0) {
			answered = conn_ref(used);
			goto out;
		}
		/* A body lost on the way can be asked for again under its
		 * key, unless some of it went to the caller's sink already
		 * (a buffered one is simply read again). */
		if (keyed && err->code != SBX_UNEXPECTED_FORMAT &&
		    (req->sink == NULL || a.x.body_bytes == 0) &&
		    clock_mono_ms() < a.x.total)
			goto ask_again;
		if (err->code != SBX_UNEXPECTED_FORMAT)
			slot_invalidate(s, used);
		goto out;
	}
	if (read_error_body(t, &a.x, err)) {
		char code[64];

		refusal(err, req, resp->status, &a.x.errbody);
		rc = sbx_error_errno(err);
		if (body_typed_fs(&a.x.errbody)) {
			answered = conn_ref(used);
			goto out;
		}
		/* A 5xx without the agent's typed body may come from a
		 * gateway that lost the request or its answer. */
		if (keyed && resp->status >= 500 &&
		    !proto_error_code(a.x.errbody.data, a.x.errbody.len, code,
				      sizeof(code)))
			goto ask_again;
	}
	slot_invalidate(s, used);
	rc = sbx_error_errno(err);
	goto out;

ask_again : {
	/* The first answer was lost; the agent keeps it under the key
	 * (rules 8.4): ask once more, on a fresh connection, within what is
	 * left of the exchange's deadline. */
	struct sbx_error first = *err;
	struct transport_req again = *req;
	long long left = a.x.total - clock_mono_ms();

	attempt_end(t, s, &a);
	if (left <= 0) {
		slot_invalidate(s, used);
		goto out;
	}
	again.deadline_ms = (long)left;
	again.outlives_op = true; /* left is already within it */
	log_debug("sandbox %s: %s: asking again with its idempotency key", id,
		  req->op);
	rc = final_attempt(t, s, used, &again, key, true, resp, err, &keep,
			   &got_answer);
	if (!got_answer) {
		/* Nothing learnt: the first failure stands. */
		*err = first;
		rc = sbx_error_errno(err);
	}
	if (got_answer)
		answered = conn_ref(used);
	else
		slot_invalidate(s, used);
	goto out;
}

refresh:
	if (slot_lock(s) < 0) {
		op_late(err, req->op,
			"while another request refreshed the sandbox's "
			"connection");
		rc = -EIO;
		goto out;
	}
	if (s->conn == NULL || conn_same(s->conn, used)) {
		previous = s->conn;
		s->conn = NULL;
		rc = fetch_connection(t, id, &fresh, err);
		if (rc < 0) {
			pthread_mutex_unlock(&s->lock);
			goto out;
		}
		if (trigger == REFRESH_UNAUTHORIZED && previous != NULL &&
		    strcmp(fresh->token, previous->token) == 0 &&
		    strcmp(fresh->url, previous->url) == 0) {
			/* The credential did not change: the refusal stands.
			 * Put the route back and read the body unlocked. */
			s->conn = previous;
			previous = NULL;
			pthread_mutex_unlock(&s->lock);
			check_response(t, &a.x, err);
			rc = sbx_error_errno(err);
			goto out;
		}
		rc = activate_connection(t, s, id, fresh, err);
		if (rc < 0) {
			pthread_mutex_unlock(&s->lock);
			goto out;
		}
		s->conn = fresh;
		s->gen++;
		fresh = NULL;
	}
	conn_unref(used);
	used = conn_ref(s->conn);
	pthread_mutex_unlock(&s->lock);
	if (used == NULL) {
		invalid_route(err);
		rc = -EPROTO;
		goto out;
	}
	/* A refused answer held unread is dropped. */
	attempt_end(t, s, &a);
	/* The replay: exactly once, on the connection the slot now holds. */
	keyed = req->cls != TRANSPORT_SAFE && atomic_load(&used->keyed);
	if (keyed && key == NULL) {
		make_key(key_buf);
		key = key_buf;
	}
	rc = final_attempt(t, s, used, req, keyed ? key : NULL,
			   req->cls != TRANSPORT_SAFE && !keyed, resp, err,
			   &keep, &got_answer);
	/* A failed retry must not pin the route for the next operation. */
	if (rc < 0 && !keep)
		slot_invalidate(s, used);
	if (got_answer)
		answered = conn_ref(used);
out:
	attempt_end(t, s, &a);
	if (rc == 0 && answered != NULL)
		learn_health(answered, req, resp);
	if (answered_out != NULL)
		*answered_out = answered;
	else
		conn_unref(answered);
	conn_unref(used);
	conn_unref(fresh);
	conn_unref(previous);
	if (rc < 0)
		log_failure(id, req, err);
	return rc;
}

int transport_send(struct transport *t, const char *id,
		   const struct transport_req *req, struct transport_resp *resp,
		   struct sbx_error *err)
{
	return send_request(t, slot_get(t, id), id, req, resp, err, NULL);
}

/* ---- transport decisions and lifecycle ---------------------------------- */

void transport_config_defaults(struct transport_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->connect_timeout_ms = 10000;
	cfg->response_timeout_ms = 60000;
	cfg->body_idle_timeout_ms = 0;
	cfg->ready_timeout_ms = 60000;
	cfg->ready_interval_ms = 500;
	cfg->running_timeout_ms = 120000;
	cfg->max_idle_handles = 16;
	cfg->new_sessions_use_agent = true;
}

int transport_new(struct provider *prov, const struct transport_config *cfg,
		  struct transport **out)
{
	struct transport *t;

	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return -EIO;
	t = xcalloc(1, sizeof(*t));
	t->prov = prov;
	if (cfg != NULL)
		t->cfg = *cfg;
	else
		transport_config_defaults(&t->cfg);
	if (t->cfg.connect_timeout_ms <= 0)
		t->cfg.connect_timeout_ms = 10000;
	if (t->cfg.response_timeout_ms <= 0)
		t->cfg.response_timeout_ms = 60000;
	if (t->cfg.body_idle_timeout_ms <= 0)
		t->cfg.body_idle_timeout_ms = t->cfg.response_timeout_ms;
	if (t->cfg.ready_timeout_ms <= 0)
		t->cfg.ready_timeout_ms = 60000;
	if (t->cfg.ready_interval_ms <= 0)
		t->cfg.ready_interval_ms = 500;
	if (t->cfg.running_timeout_ms <= 0)
		t->cfg.running_timeout_ms = 120000;
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->id_lock, NULL);
	*out = t;
	return 0;
}

int transport_set_client_id(struct transport *t, const char *id)
{
	if (id != NULL && !proto_client_id_valid(id))
		return -EINVAL;
	pthread_mutex_lock(&t->id_lock);
	strlcpy_s(t->client_id, id != NULL ? id : "", sizeof(t->client_id));
	pthread_mutex_unlock(&t->id_lock);
	return 0;
}

void transport_free(struct transport *t)
{
	struct slot *s, *next;

	if (t == NULL)
		return;
	for (s = t->slots; s != NULL; s = next) {
		struct handle *h, *hn;

		next = s->next;
		for (h = s->idle; h != NULL; h = hn) {
			hn = h->next;
			handle_free(h);
		}
		conn_unref(s->conn);
		pthread_mutex_destroy(&s->lock);
		pthread_mutex_destroy(&s->pool_lock);
		free(s->id);
		free(s);
	}
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->id_lock);
	free(t);
}

struct provider *transport_provider(const struct transport *t)
{
	return t->prov;
}

long transport_response_timeout_ms(const struct transport *t)
{
	return t->cfg.response_timeout_ms;
}

int transport_kind_of(const struct provider_record *rec,
		      enum transport_kind *kind, struct sbx_error *err)
{
	const char *label = provider_record_label(rec, PROTO_TRANSPORT_LABEL);

	/* Only authenticated provider metadata decides; an unknown version
	 * fails closed. */
	if (label == NULL) {
		*kind = TRANSPORT_NATIVE;
		return 0;
	}
	if (strcmp(label, PROTO_TRANSPORT_AGENT) == 0) {
		*kind = TRANSPORT_AGENT;
		return 0;
	}
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
		      "the sandbox's %s label is '%.64s', a transport this "
		      "client does not know (refused)",
		      PROTO_TRANSPORT_LABEL, label);
	return -EPROTO;
}

int transport_session_kind(struct transport *t, const char *id, const char *op,
			   enum transport_kind *kind,
			   struct provider_record *rec_out,
			   struct sbx_error *err)
{
	struct provider_record rec;
	int rc;

	sbx_error_clear(err);
	memset(&rec, 0, sizeof(rec));
	rc = t->prov->ops->record(t->prov, id, &rec, err);
	if (rc == -ENOENT)
		return record_gone(err, op, id);
	if (rc < 0)
		return rc;
	rc = transport_kind_of(&rec, kind, err);
	if (rc == 0 && rec_out != NULL) {
		*rec_out = rec;
		return 0;
	}
	provider_record_cleanup(&rec);
	return rc;
}

struct transport_caps transport_default_caps(const struct transport *t)
{
	struct transport_caps c = {
		.jobs = t->cfg.new_sessions_use_agent,
		.supervisor_isolation = t->cfg.new_sessions_use_agent,
	};

	return c;
}

int transport_session_caps(struct transport *t, const char *id,
			   struct transport_caps *caps, struct sbx_error *err)
{
	enum transport_kind kind;
	int rc;

	rc = transport_session_kind(t, id, TRANSPORT_OP_AGENT, &kind, NULL,
				    err);
	if (rc < 0)
		return rc;
	caps->jobs = kind == TRANSPORT_AGENT;
	caps->supervisor_isolation = kind == TRANSPORT_AGENT;
	return 0;
}

void transport_resp_init(struct transport_resp *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->body, 0);
	r->full_size = UINT64_MAX;
}

void transport_resp_cleanup(struct transport_resp *r)
{
	if (r != NULL)
		buf_cleanup(&r->body);
}

/* One readiness probe: health through the normal request path. */
static int ready_probe(struct transport *t, struct slot *s, const char *id,
		       long long deadline, struct proto_health *health,
		       struct sbx_error *err)
{
	struct transport_req req = {
		.op = TRANSPORT_OP_HEALTH,
		.cls = TRANSPORT_SAFE,
		.method = "GET",
		.path = "/v1/health?version=1",
		.max_body = 64 * 1024,
	};
	struct transport_resp resp;
	struct conn *answered = NULL;
	int rc;

	req.deadline_ms = (long)(deadline - clock_mono_ms());
	if (req.deadline_ms < 1)
		req.deadline_ms = 1;
	transport_resp_init(&resp);
	rc = send_request(t, s, id, &req, &resp, err, &answered);
	if (rc < 0)
		goto out;
	rc = proto_health_decode(resp.body.data, resp.body.len, health);
	if (rc < 0) {
		not_ready(err);
		rc = -EIO;
		goto out;
	}
	if (proto_health_ready(health)) {
		rc = 0;
		goto out;
	}
	if (health->protocol_version == PROTO_VERSION &&
	    strcmp(health->status, PROTO_STATUS_AWAITING) == 0 &&
	    answered != NULL) {
		/* Health is public and cannot reject a previous boot's
		 * credential: a fresh boot at the same URL needs a new
		 * credential and a policy-checked activation. Only the
		 * connection that carried this answer is dropped, never one
		 * a concurrent refresh put in its place. */
		slot_invalidate(s, answered);
	}
	not_ready(err);
	rc = -EIO;
out:
	conn_unref(answered);
	transport_resp_cleanup(&resp);
	return rc;
}

int transport_wait_ready(struct transport *t, const char *id,
			 struct proto_health *health_out, struct sbx_error *err)
{
	struct slot *s = slot_get(t, id);
	long long saved = op_deadline;
	long long deadline =
		earliest(clock_mono_ms() + t->cfg.ready_timeout_ms, saved);
	struct proto_health health;
	int rc;

	/* The readiness deadline bounds everything the probes do: waiting
	 * for the slot, the provider's fetch, the activation (rules 7). */
	op_deadline = deadline;
	for (;;) {
		long long now;

		memset(&health, 0, sizeof(health));
		sbx_error_clear(err);
		rc = ready_probe(t, s, id, deadline, &health, err);
		if (rc == 0) {
			if (health_out != NULL)
				*health_out = health;
			break;
		}
		now = clock_mono_ms();
		if (!err->retryable)
			break;
		if (now >= deadline) {
			op_timed_out = true;
			not_ready(err);
			rc = -EIO;
			break;
		}
		sleep_ms(deadline - now < t->cfg.ready_interval_ms
				 ? (long)(deadline - now)
				 : t->cfg.ready_interval_ms);
	}
	op_deadline = saved;
	return rc;
}

static bool state_asleep(enum provider_state st)
{
	return st == PROVIDER_STATE_STOPPED || st == PROVIDER_STATE_SUSPENDED;
}

static int wait_running(struct transport *t, const char *id,
			struct sbx_error *err)
{
	long long saved = op_deadline;
	long long deadline =
		earliest(clock_mono_ms() + t->cfg.running_timeout_ms, saved);
	struct provider_record rec;
	int rc;

	/* The record reads are bounded by the same deadline. */
	op_deadline = deadline;
	for (;;) {
		enum provider_state st;

		memset(&rec, 0, sizeof(rec));
		rc = t->prov->ops->record(t->prov, id, &rec, err);
		if (rc == -ENOENT) {
			rc = record_gone(err, "sandbox.resume", id);
			break;
		}
		if (rc < 0)
			break;
		st = rec.state;
		provider_record_cleanup(&rec);
		if (st == PROVIDER_STATE_RUNNING)
			break;
		if (st == PROVIDER_STATE_DELETING) {
			rc = record_gone(err, "sandbox.resume", id);
			break;
		}
		if (clock_mono_ms() >= deadline) {
			op_timed_out = true;
			sbx_error_set(err, SBX_UNREACHABLE, NULL,
				      "sandbox.resume: sandbox '%s' did not "
				      "reach Running (still %s)",
				      id, provider_state_name(st));
			rc = -EIO;
			break;
		}
		sleep_ms(t->cfg.ready_interval_ms);
	}
	op_deadline = saved;
	return rc;
}

int transport_resume(struct transport *t, const char *id,
		     struct proto_health *health_out, struct sbx_error *err)
{
	struct provider *p = t->prov;
	struct provider_record rec;
	enum transport_kind kind;
	struct sbx_error stop_err;
	bool woke = false;
	int rc_stop;
	char text[1024];
	int rc;

	sbx_error_clear(err);
	memset(&rec, 0, sizeof(rec));
	rc = p->ops->record(p, id, &rec, err);
	if (rc == -ENOENT)
		return record_gone(err, "sandbox.resume", id);
	if (rc < 0)
		goto fail;
	if (state_asleep(rec.state)) {
		rc = p->ops->resume(p, id, err);
		if (rc < 0)
			goto fail;
		woke = true;
		rc = wait_running(t, id, err);
		if (rc < 0)
			goto fail;
	}
	/* The label decides, from a fresh read; an unknown label fails
	 * closed before any route or credential is fetched. */
	rc = transport_session_kind(t, id, "sandbox.resume", &kind, NULL, err);
	if (rc < 0)
		goto fail;
	if (kind == TRANSPORT_AGENT) {
		rc = transport_wait_ready(t, id, health_out, err);
		if (rc < 0)
			goto fail;
	} else if (health_out != NULL) {
		memset(health_out, 0, sizeof(*health_out));
	}
	provider_record_cleanup(&rec);
	return 0;
fail:
	provider_record_cleanup(&rec);
	if (woke) {
		long long saved = op_deadline;

		/* Stop (never delete) only the sandbox this call woke, even
		 * when the caller's deadline is what ended the resume: the
		 * stop request has its own. */
		op_deadline = 0;
		sbx_error_clear(&stop_err);
		rc_stop = p->ops->stop(p, id, &stop_err);
		op_deadline = saved;
		if (rc_stop < 0)
			log_warn("sandbox %s: could not stop it again after a "
				 "failed resume: %s",
				 id,
				 sbx_error_describe(&stop_err, text,
						    sizeof(text)));
	}
	sbx_error_describe(err, text, sizeof(text));
	if (err->code != SBX_COMMAND_FAILED || err->retryable) {
		int e = err->err;
		char failure[sizeof(err->failure)];

		snprintf(failure, sizeof(failure), "%s", err->failure);
		sbx_error_set(err, SBX_COMMAND_FAILED,
			      failure[0] ? failure : NULL, "sandbox.resume: %s",
			      text);
		err->err = e ? e : EIO;
	}
	return rc < 0 ? rc : -EIO;
}

unsigned transport_generation(struct transport *t, const char *id)
{
	struct slot *s = slot_get(t, id);
	unsigned gen;

	pthread_mutex_lock(&s->lock);
	gen = s->gen;
	pthread_mutex_unlock(&s->lock);
	return gen;
}

void transport_forget(struct transport *t, const char *id)
{
	struct slot *s = slot_get(t, id);
	struct conn *old;

	pthread_mutex_lock(&s->lock);
	old = s->conn;
	s->conn = NULL;
	pthread_mutex_unlock(&s->lock);
	conn_unref(old);
}

/* ---- plain provider HTTP ------------------------------------------------ */

/*
 * Provider requests share a small pool of handles, so that a control
 * plane's connections (and TLS sessions) are kept alive between calls
 * instead of a handshake per call.
 */
#define HTTP_POOL_MAX 8

static pthread_mutex_t http_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle *http_pool;
static unsigned http_pool_n;

static struct handle *http_handle_take(void)
{
	struct handle *h;

	pthread_mutex_lock(&http_pool_lock);
	h = http_pool;
	if (h != NULL) {
		http_pool = h->next;
		http_pool_n--;
	}
	pthread_mutex_unlock(&http_pool_lock);
	if (h != NULL)
		return h;
	h = xcalloc(1, sizeof(*h));
	h->multi = curl_multi_init();
	h->easy = curl_easy_init();
	if (h->multi == NULL || h->easy == NULL)
		fatalx("libcurl could not make a handle");
	return h;
}

static void http_handle_give(struct handle *h)
{
	pthread_mutex_lock(&http_pool_lock);
	if (http_pool_n < HTTP_POOL_MAX) {
		h->next = http_pool;
		http_pool = h;
		http_pool_n++;
		h = NULL;
	}
	pthread_mutex_unlock(&http_pool_lock);
	handle_free(h);
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
	struct handle *h;
	struct xfer x;
	enum xfer_outcome o;
	long long deadline;
	int rc;

	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return -EIO;
	sbx_error_clear(err);
	deadline = earliest(clock_mono_ms() + (hreq->timeout_ms > 0
						       ? hreq->timeout_ms
						       : 60000),
			    op_deadline);
	if (clock_mono_ms() >= deadline) {
		op_late(err, "provider.http", "before the request was sent");
		return -ETIMEDOUT;
	}
	h = http_handle_take();
	resp->body.max = hreq->max_body;
	xfer_init(&x, h, &req, resp);
	/* A provider call that is not a GET may change something (a
	 * resume, a command through executeShellCommand): never on a
	 * kept-alive connection libcurl might silently send it on again
	 * (doc/transport-rules.md 8). */
	x.fresh = !safe;
	rc = xfer_setup(&x, NULL, NULL, hreq->url, hreq);
	if (rc < 0) {
		unanswered(err, &req, "the request could not be prepared");
		goto out;
	}
	o = xfer_run(&x, deadline, 0);
	if (o == XFER_OK) {
		/* Any status is an answer; the body is read whole. */
		xfer_resume_as(&x, XFER_BODY);
		o = xfer_run(&x, deadline, 0);
	}
	switch (o) {
	case XFER_OK:
		rc = 0;
		break;
	case XFER_TOO_BIG:
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "the answer is larger than %zu bytes",
			      hreq->max_body);
		rc = -EFBIG;
		break;
	case XFER_TIMEOUT:
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "no answer before the deadline");
		rc = -ETIMEDOUT;
		break;
	case XFER_CONNECT:
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "could not connect (%s)", x.errbuf);
		rc = -ECONNREFUSED;
		break;
	default:
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "the exchange failed (%s)",
			      x.errbuf[0] ? x.errbuf : "connection closed");
		rc = -EIO;
		break;
	}
out:
	xfer_finish(&x);
	http_handle_give(h);
	return rc;
}

/* ---- test hooks ----------------------------------------------------------- */

void transport_test_set_connection(struct transport *t, const char *id,
				   const char *url, const char *token)
{
	struct slot *s = slot_get(t, id);
	struct conn *old;

	pthread_mutex_lock(&s->lock);
	old = s->conn;
	s->conn = conn_new(url, token, strlen(token));
	pthread_mutex_unlock(&s->lock);
	conn_unref(old);
}

bool transport_test_cached_url(struct transport *t, const char *id, char *url,
			       size_t size)
{
	struct slot *s = slot_get(t, id);
	bool have;

	pthread_mutex_lock(&s->lock);
	have = s->conn != NULL;
	if (have)
		snprintf(url, size, "%s", s->conn->url);
	pthread_mutex_unlock(&s->lock);
	return have;
}
