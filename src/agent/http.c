/* SPDX-License-Identifier: MIT */
/*
 * http: the agent's HTTP/1.1 server on libmicrohttpd 0.9.7x. It owns the
 * listening socket, the route table (method and path to handler, with each
 * route's body limit, credential, activation and JSON requirements), the
 * request bodies, the replies, and the two kinds of replies that outlive
 * the access handler: streams (exec output) and deferred replies (job
 * long-polls). It does not know what any route means; the handlers in
 * routes.h do.
 *
 * libmicrohttpd rules this module is built around:
 * - A response may be queued only from the access handler, and only
 *   before the body is read (an "early" answer, after which the library
 *   closes the connection) or after all of it was. So a Content-Length
 *   over the limit is answered at once, but a chunked body that passes
 *   the limit is counted and discarded to its end, then answered.
 * - A suspended connection is not polled: no timeout, and no notice when
 *   the peer goes away. Suspend only from the access handler or the
 *   content reader; resume from anywhere; never stop the daemon with a
 *   connection suspended.
 *
 * A stream or deferred reply is a "park": an object shared by the
 * connection (until its response is freed or the request completes) and
 * by the writer (until finish or completion), reference counted. The
 * connection pointer is used for a resume only under the park's lock and
 * only while the connection side holds it; the connection cannot be freed
 * while suspended, and the stop path resumes every suspended park before
 * stopping the daemon, so a resume never races a free.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "agent/http.h"
#include "agent/resolve.h"
#include "agent/routes.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/token.h"
#include "common/xalloc.h"

/* Bodies of small JSON routes (mkdir, activate, extension metadata). */
#define HTTP_SMALL_BODY (64UL * 1024)
/* A chunked body past its limit is read and thrown away to its end so the
 * 413 can be sent; past this much it is not worth the bandwidth, and the
 * connection is closed instead. */
#define HTTP_DISCARD_MAX (64UL * 1024 * 1024)
/* MHD's own connection limit is the agent's plus this per worker: room
 * for a connection that arrives at the limit to be taken in while an idle
 * or slow one makes way for it (see "connections" below). */
#define HTTP_ADMIT_SLACK_PER_THREAD 4
/* Per-connection memory: headers, and the read and chunk buffers. */
#define HTTP_CONNECTION_MEMORY (128U * 1024)
#define HTTP_STREAM_BLOCK (64U * 1024)
/* How long agent_http_stop waits for parked connections to let go. */
#define HTTP_STOP_WAIT_MS 5000

/* ---- routes --------------------------------------------------------------- */

enum {
	RT_PUBLIC = 1 << 0, /* no credential: health, the AWS hooks */
	RT_UNGATED = 1 << 1, /* served before activation */
	RT_JSON = 1 << 2, /* the body must be application/json */
	RT_EXT = 1 << 3, /* the file extension; absent with strict_v1 */
};

enum rt_limit {
	LIM_NONE, /* no body */
	LIM_SMALL, /* HTTP_SMALL_BODY */
	LIM_FILES, /* PROTO_HTTP_BODY_LIMIT */
	LIM_EXEC, /* PROTO_EXEC_MAX_BODY */
	LIM_EXT_WRITE, /* cfg.ext_max_write */
};

typedef int route_fn(struct agent_req *r);

struct route {
	const char *method;
	const char *path;
	unsigned flags;
	enum rt_limit limit;
	route_fn *fn; /* NULL: agent_route_ext(r, ext_op) */
	const char *ext_op;
};

static int route_aws_hook(struct agent_req *r);

/* clang-format off */
#define AWS "/aws/lambda-microvms/runtime/v1/"
#define AWS_HOOK(method, name) \
	{ method, AWS name, RT_PUBLIC | RT_UNGATED, LIM_SMALL, route_aws_hook, NULL }
#define EXT_GET(op) \
	{ "GET", "/sandboxfs/v1/" op, RT_EXT, LIM_NONE, NULL, op }
#define EXT_POST(op) \
	{ "POST", "/sandboxfs/v1/" op, RT_EXT | RT_JSON, LIM_SMALL, NULL, op }

static const struct route routes[] = {
	{ "GET", "/v1/health", RT_PUBLIC | RT_UNGATED, LIM_NONE, agent_route_health, NULL },
	{ "POST", "/v1/activate", RT_UNGATED, LIM_SMALL, agent_route_activate, NULL },
	{ "POST", "/v1/exec", RT_JSON, LIM_EXEC, agent_route_exec, NULL },
	{ "GET", "/v1/files", 0, LIM_NONE, agent_route_files_get, NULL },
	{ "PUT", "/v1/files", RT_JSON, LIM_FILES, agent_route_files_put, NULL },
	{ "POST", "/v1/mkdir", RT_JSON, LIM_SMALL, agent_route_mkdir, NULL },
	{ "POST", "/v1/jobs/start", RT_JSON, LIM_EXEC, agent_route_jobs_start, NULL },
	{ "POST", "/v1/jobs/poll", RT_JSON, LIM_EXEC, agent_route_jobs_poll, NULL },
	{ "POST", "/v1/jobs/cancel", RT_JSON, LIM_EXEC, agent_route_jobs_cancel, NULL },
	AWS_HOOK("GET", "ready"),	AWS_HOOK("POST", "ready"),
	AWS_HOOK("GET", "validate"),	AWS_HOOK("POST", "validate"),
	AWS_HOOK("GET", "run"),		AWS_HOOK("POST", "run"),
	AWS_HOOK("GET", "resume"),	AWS_HOOK("POST", "resume"),
	AWS_HOOK("GET", "suspend"),	AWS_HOOK("POST", "suspend"),
	AWS_HOOK("GET", "terminate"),	AWS_HOOK("POST", "terminate"),
	EXT_GET("stat"),
	EXT_GET("list"),
	EXT_GET("tree"),
	EXT_GET("contents"),
	EXT_GET("read"),
	EXT_GET("readlink"),
	EXT_GET("statfs"),
	EXT_GET("jobs"),
	EXT_GET("events"),
	{ "PUT", "/sandboxfs/v1/write", RT_EXT, LIM_EXT_WRITE, NULL, "write" },
	EXT_POST("truncate"),
	EXT_POST("create"),
	EXT_POST("mkdir"),
	EXT_POST("unlink"),
	EXT_POST("rmdir"),
	EXT_POST("rename"),
	EXT_POST("link"),
	EXT_POST("symlink"),
	EXT_POST("chmod"),
	EXT_POST("utimens"),
	EXT_POST("fsync"),
};
/* clang-format on */

/* ---- server and request state --------------------------------------------- */

struct park;
struct rc_entry;
struct reply_cache;

/*
 * Where a connection is, for its deadlines and for making way at the
 * connection limit. A connection waits for a request (IDLE) until the
 * request line arrives, receives the request (RECEIVING) until its
 * headers and body are in, and is HANDLING it until the answer is sent.
 */
enum conn_phase {
	CP_IDLE,
	CP_RECEIVING,
	CP_HANDLING,
};

struct conn_track {
	int fd; /* our duplicate of the client socket (-1: none) */
	enum conn_phase phase;
	long long since; /* when the phase began (monotonic ms) */
	bool shut; /* shut down by the agent, closing */
	struct conn_track *next, *prev;
};

struct agent_http {
	struct agent *a;
	struct MHD_Daemon *d;
	int listen_fd;
	atomic_bool stopping;
	/* The Unix socket's path and identity, to remove it at stop only
	 * while it is still ours. */
	char *sock_path;
	dev_t sock_dev;
	ino_t sock_ino;

	/* Every connection the library holds, under cmu. nlive counts those
	 * not shut down yet, against the limit. */
	pthread_mutex_t cmu;
	struct conn_track *tracks;
	unsigned nlive;
	unsigned limit;
	long long idle_ms, request_ms;
	unsigned long evicted, expired;

	/* Parks whose connection side is alive, for the stop sweep and the
	 * hang-up watcher. */
	pthread_mutex_t mu;
	struct park *parks;
	uint64_t next_id;
	int watch_epfd;
	int watch_wake;
	atomic_bool watch_stop;
	pthread_t watcher;
	bool watcher_started;

	struct reply_cache *rc; /* keyed requests' answers */
};

/* An answer decided from the headers alone, given once the (small) body
 * has been read and dropped. */
enum pending {
	PEND_NONE = 0,
	PEND_NOT_FOUND,
	PEND_METHOD,
	PEND_NO_CREDENTIAL,
	PEND_BAD_CREDENTIAL,
	PEND_NOT_ACTIVATED,
	PEND_NOT_JSON,
	PEND_FRAMING,
};

struct agent_req {
	struct agent_http *h;
	struct MHD_Connection *conn;
	const struct route *route;
	enum pending pending;
	char allow[64];
	char method[16];
	char *path;
	struct buf body;
	size_t limit;
	uint64_t discarded;
	bool over_limit; /* a chunked body passed the limit */
	bool no_memory; /* the body could not be stored */
	bool replied; /* a response was queued, or a park took over */
	unsigned status;
	struct park *park; /* a deferred reply waiting for its completion */
	/* The reply cache's entry of a keyed request being run, until its
	 * answer is recorded (or a stream or deferred reply takes it). */
	struct rc_entry *rce;
};

/* ---- parks: streams and deferred replies ---------------------------------- */

enum park_kind {
	PARK_STREAM,
	PARK_DEFER,
};

struct chunk {
	char *p;
	size_t n;
};

struct park {
	enum park_kind kind;
	atomic_uint refs;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* Under mu. conn is NULL once the connection side let go. */
	struct MHD_Connection *conn;
	bool suspended;
	bool suspended_once;
	bool gone;
	int gone_fd;

	struct agent_http *srv; /* fixed; used by the connection side only */
	/* Under the server's mu. */
	struct agent_http *h; /* NULL once unregistered */
	struct park *next, *prev;
	uint64_t id;
	int sock; /* duplicate of the client socket, watched; -1 */

	/* PARK_STREAM, under mu. */
	struct chunk *q;
	unsigned depth, head, count;
	size_t off;
	bool finished;

	/* PARK_DEFER, under mu. */
	struct MHD_Response *resp;
	unsigned status;
	bool done;

	/* Under mu: the reply cache's entry this stream or deferred reply
	 * answers, until it is finished; the cache (the server's) is alive
	 * while rce is set, since the connection side clears it first. */
	struct rc_entry *rce;
	struct reply_cache *rc;
};

struct agent_stream {
	struct park pk;
};

struct agent_deferred {
	struct park pk;
};

static struct park *park_new(struct agent_http *h, enum park_kind kind,
			     size_t size, struct MHD_Connection *conn,
			     unsigned depth)
{
	struct park *pk = xcalloc(1, size);

	pk->srv = h;
	pk->kind = kind;
	atomic_init(&pk->refs, 2); /* the connection side and the writer */
	pthread_mutex_init(&pk->mu, NULL);
	pthread_cond_init(&pk->cv, NULL);
	pk->conn = conn;
	pk->sock = -1;
	pk->gone_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pk->gone_fd < 0)
		fatal("eventfd");
	if (depth > 0) {
		pk->depth = depth;
		pk->q = xcalloc(depth, sizeof(*pk->q));
	}
	return pk;
}

static void park_unref(struct park *pk)
{
	unsigned i;

	if (atomic_fetch_sub(&pk->refs, 1) != 1)
		return;
	for (i = 0; i < pk->count; i++)
		free(pk->q[(pk->head + i) % pk->depth].p);
	free(pk->q);
	if (pk->resp != NULL)
		MHD_destroy_response(pk->resp);
	close(pk->gone_fd);
	pthread_cond_destroy(&pk->cv);
	pthread_mutex_destroy(&pk->mu);
	free(pk);
}

/* Under pk->mu. */
static void park_mark_gone(struct park *pk)
{
	uint64_t one = 1;

	if (pk->gone)
		return;
	pk->gone = true;
	if (write(pk->gone_fd, &one, sizeof(one)) < 0)
		log_debug("http: eventfd write: %s", strerror(errno));
	pthread_cond_broadcast(&pk->cv);
}

/* Under pk->mu: let libmicrohttpd process the connection again. */
static void park_resume(struct park *pk)
{
	if (pk->suspended && pk->conn != NULL) {
		pk->suspended = false;
		MHD_resume_connection(pk->conn);
	}
}

/* Under pk->mu, from the access handler or the content reader only. */
static void park_suspend(struct park *pk)
{
	pk->suspended = true;
	pk->suspended_once = true;
	MHD_suspend_connection(pk->conn);
}

static void park_register(struct agent_http *h, struct park *pk)
{
	const union MHD_ConnectionInfo *ci;
	struct epoll_event ev;

	ci = MHD_get_connection_info(pk->conn,
				     MHD_CONNECTION_INFO_CONNECTION_FD);
	pthread_mutex_lock(&h->mu);
	pk->h = h;
	pk->id = ++h->next_id;
	pk->next = h->parks;
	pk->prev = NULL;
	if (h->parks != NULL)
		h->parks->prev = pk;
	h->parks = pk;
	if (ci != NULL)
		pk->sock = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 3);
	if (pk->sock >= 0) {
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLRDHUP | EPOLLONESHOT;
		ev.data.u64 = pk->id;
		if (epoll_ctl(h->watch_epfd, EPOLL_CTL_ADD, pk->sock, &ev) <
		    0) {
			log_debug("http: cannot watch a connection: %s",
				  strerror(errno));
			close(pk->sock);
			pk->sock = -1;
		}
	}
	pthread_mutex_unlock(&h->mu);
}

static void park_unregister(struct park *pk)
{
	struct agent_http *h = pk->h;

	if (h == NULL)
		return;
	pthread_mutex_lock(&h->mu);
	if (pk->sock >= 0) {
		/* Closing the last descriptor would drop the registration
		 * too, but the socket itself lives on in the library. */
		epoll_ctl(h->watch_epfd, EPOLL_CTL_DEL, pk->sock, NULL);
		close(pk->sock);
		pk->sock = -1;
	}
	if (pk->prev != NULL)
		pk->prev->next = pk->next;
	else
		h->parks = pk->next;
	if (pk->next != NULL)
		pk->next->prev = pk->prev;
	pk->h = NULL;
	pthread_mutex_unlock(&h->mu);
}

static void park_rc_finish(struct park *pk);

/* The connection side is done with the park (its response was freed, or
 * the request completed). */
static void park_release_conn(struct park *pk)
{
	pthread_mutex_lock(&pk->mu);
	park_mark_gone(pk);
	pk->conn = NULL;
	pk->suspended = false;
	/* What the stream carried so far is the answer a repeat gets: the
	 * cache may go with the server once the connection side let go. */
	park_rc_finish(pk);
	pthread_mutex_unlock(&pk->mu);
	park_unregister(pk);
	park_unref(pk);
}

/* Take a reference on the registered park with this id (NULL if none). */
static struct park *park_find(struct agent_http *h, uint64_t id)
{
	struct park *pk;

	pthread_mutex_lock(&h->mu);
	for (pk = h->parks; pk != NULL; pk = pk->next) {
		if (pk->id == id) {
			atomic_fetch_add(&pk->refs, 1);
			break;
		}
	}
	pthread_mutex_unlock(&h->mu);
	return pk;
}

/* ---- the reply cache ------------------------------------------------------ */

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
	struct rc_entry *older, *newer; /* finished entries, by age */
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
	struct rc_entry *oldest, *newest;
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

/* Under mu. */
static void rc_unlink_done(struct reply_cache *c, struct rc_entry *e)
{
	if (e->older != NULL)
		e->older->newer = e->newer;
	else if (c->oldest == e)
		c->oldest = e->newer;
	if (e->newer != NULL)
		e->newer->older = e->older;
	else if (c->newest == e)
		c->newest = e->older;
	e->older = e->newer = NULL;
}

/* Under mu: forget a finished entry. */
static void rc_drop(struct reply_cache *c, struct rc_entry *e)
{
	struct rc_entry **pp = &c->buckets[rc_bucket(e->key)];

	while (*pp != NULL && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp == e)
		*pp = e->hnext;
	rc_unlink_done(c, e);
	c->bytes -= e->body.len;
	c->entries--;
	buf_cleanup(&e->body);
	free(e);
}

/* Under mu: make room for n more bytes (and an entry when entry is set)
 * by forgetting the oldest finished entries. */
static bool rc_room(struct reply_cache *c, size_t n, bool entry)
{
	while (c->oldest != NULL && ((entry && c->entries >= c->lim.entries) ||
				     c->bytes + n > c->lim.bytes)) {
		c->stats.evicted++;
		rc_drop(c, c->oldest);
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
	struct MHD_Response *resp;
	char *body = xasprintf("%s: %s", code, msg);

	resp = MHD_create_response_from_buffer(strlen(body), body,
					       MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(body);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; charset=utf-8");
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
	e->older = c->newest;
	e->newer = NULL;
	if (c->newest != NULL)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
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

static void deferred_complete(struct agent_deferred *d, unsigned status,
			      struct MHD_Response *resp);

/* Deliver built answers to waiters (no lock held). */
static void rc_deliver(struct rc_done *list)
{
	struct rc_done *dn, *next;

	for (dn = list; dn != NULL; dn = next) {
		next = dn->next;
		deferred_complete(dn->d, dn->status, dn->resp);
		free(dn);
	}
}

/* Finish e (from any thread, no park lock needed) and answer its
 * waiters. */
static void rc_finish(struct reply_cache *c, struct rc_entry *e)
{
	struct rc_done *list;

	pthread_mutex_lock(&c->mu);
	list = rc_finish_locked(c, e);
	pthread_mutex_unlock(&c->mu);
	rc_deliver(list);
}

/* Record an answer in a running entry (replacing one recorded before: a
 * handler whose first reply could not be queued may give another). */
static void rc_record(struct reply_cache *c, struct rc_entry *e,
		      unsigned status, const char *ctype, const void *p,
		      size_t n)
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
static void rc_unkeep_entry(struct reply_cache *c, struct rc_entry *e)
{
	pthread_mutex_lock(&c->mu);
	if (!e->done)
		rc_unkeep(c, e);
	pthread_mutex_unlock(&c->mu);
}

/* Answers past their time: expired entries and waiters. Called about once a
 * second. */
static void rc_tick(struct reply_cache *c)
{
	struct rc_done *list = NULL;
	long long now = clock_mono_ms();
	size_t i;

	if (!c->enabled)
		return;
	pthread_mutex_lock(&c->mu);
	while (c->oldest != NULL && now - c->oldest->done_ms >= c->lim.ttl_ms) {
		c->stats.expired++;
		rc_drop(c, c->oldest);
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

/* At stop, after the library closed every connection: answer whatever
 * waits (the answers are discarded) and free everything. */
static void rc_free(struct reply_cache *c)
{
	struct rc_done *list = NULL;
	size_t i;

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
}

/* Under pk->mu: the answer a stream or deferred reply carried is final. */
static void park_rc_finish(struct park *pk)
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
static void park_rc_add(struct park *pk, const void *p, size_t n)
{
	if (pk->rce == NULL)
		return;
	pthread_mutex_lock(&pk->rc->mu);
	rc_add(pk->rc, pk->rce, p, n);
	pthread_mutex_unlock(&pk->rc->mu);
}

/*
 * The hang-up watcher. A suspended connection is invisible to the library,
 * so a client that leaves an idle exec stream (or a long-poll) would
 * otherwise be noticed only when the next chunk fails to send: a command
 * with no output would run on to its timeout. Watching a duplicate of the
 * socket here, rather than asking every writer to poll it, keeps the rule
 * in one place and also lets the library reclaim the connection.
 */
static void track_tick(struct agent_http *h);

static void *watcher_main(void *arg)
{
	struct agent_http *h = arg;
	struct epoll_event evs[16];
	sigset_t all;
	int n, i;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&h->watch_stop)) {
		/* The reply cache's clock and the connections' deadlines
		 * ride on this loop's wake-ups. */
		rc_tick(h->rc);
		track_tick(h);
		n = epoll_wait(h->watch_epfd, evs, 16, 1000);
		for (i = 0; i < n; i++) {
			struct park *pk;

			if (evs[i].data.u64 == 0)
				continue; /* the wake-up eventfd */
			pk = park_find(h, evs[i].data.u64);
			if (pk == NULL)
				continue;
			pthread_mutex_lock(&pk->mu);
			park_mark_gone(pk);
			park_resume(pk);
			pthread_mutex_unlock(&pk->mu);
			park_unref(pk);
		}
	}
	return NULL;
}

/* ---- connections: the limit and the deadlines --------------------------- */

/*
 * Slow clients must not starve the agent (doc/security.md, "The agent's
 * connections"): a connection that has not sent its request line within
 * the idle timeout of the moment it began to wait, or the rest of its
 * request (headers and body) within the request timeout of its request
 * line, is shut down, however steadily it trickles bytes; and at the
 * connection limit a new connection is taken in by shutting down the
 * connection that has been waiting for (or receiving) a request the
 * longest. Connections handling a request are never chosen. The library
 * closes a connection whose socket was shut down; the track holds a
 * duplicate of the socket so that the descriptor it shuts down is always
 * that connection's, whenever the library closes its own.
 */

/* Under h->cmu. */
static void track_shut(struct agent_http *h, struct conn_track *t)
{
	if (t->shut)
		return;
	t->shut = true;
	h->nlive--;
	if (t->fd >= 0)
		shutdown(t->fd, SHUT_RDWR);
}

/* Under h->cmu: make way for keep, which just arrived past the limit. */
static void track_evict_oldest(struct agent_http *h,
			       const struct conn_track *keep)
{
	struct conn_track *t, *old = NULL;

	for (t = h->tracks; t != NULL; t = t->next)
		if (t != keep && !t->shut && t->phase != CP_HANDLING &&
		    (old == NULL || t->since < old->since))
			old = t;
	if (old != NULL) {
		h->evicted++;
		track_shut(h, old);
	}
}

static void on_connection(void *cls, struct MHD_Connection *conn,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct agent_http *h = cls;
	const union MHD_ConnectionInfo *ci;
	struct conn_track *t;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		t = xcalloc(1, sizeof(*t));
		ci = MHD_get_connection_info(conn,
					     MHD_CONNECTION_INFO_CONNECTION_FD);
		t->fd = ci != NULL ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 3)
				   : -1;
		t->phase = CP_IDLE;
		t->since = clock_mono_ms();
		pthread_mutex_lock(&h->cmu);
		t->next = h->tracks;
		if (h->tracks != NULL)
			h->tracks->prev = t;
		h->tracks = t;
		h->nlive++;
		if (h->nlive > h->limit)
			track_evict_oldest(h, t);
		pthread_mutex_unlock(&h->cmu);
		*socket_context = t;
		return;
	}
	t = *socket_context;
	if (t == NULL)
		return;
	*socket_context = NULL;
	pthread_mutex_lock(&h->cmu);
	if (t->prev != NULL)
		t->prev->next = t->next;
	else
		h->tracks = t->next;
	if (t->next != NULL)
		t->next->prev = t->prev;
	if (!t->shut)
		h->nlive--;
	pthread_mutex_unlock(&h->cmu);
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

static void track_phase(struct agent_http *h, struct MHD_Connection *conn,
			enum conn_phase phase)
{
	const union MHD_ConnectionInfo *ci;
	struct conn_track *t;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	t = ci != NULL ? ci->socket_context : NULL;
	if (t == NULL)
		return;
	pthread_mutex_lock(&h->cmu);
	if (t->phase != phase) {
		t->phase = phase;
		t->since = clock_mono_ms();
	}
	pthread_mutex_unlock(&h->cmu);
}

/* The request line arrived: the request's own deadline starts. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)uri;
	track_phase(cls, conn, CP_RECEIVING);
	return NULL;
}

/* Shut down the connections past their deadlines (the watcher's tick). */
static void track_tick(struct agent_http *h)
{
	long long now = clock_mono_ms();
	struct conn_track *t;
	unsigned n = 0;

	pthread_mutex_lock(&h->cmu);
	for (t = h->tracks; t != NULL; t = t->next) {
		if (t->shut || t->phase == CP_HANDLING)
			continue;
		if (now - t->since <
		    (t->phase == CP_IDLE ? h->idle_ms : h->request_ms))
			continue;
		track_shut(h, t);
		n++;
	}
	h->expired += n;
	pthread_mutex_unlock(&h->cmu);
	if (n > 0)
		log_debug("http: closed %u connection%s that did not send a "
			  "request in time",
			  n, n == 1 ? "" : "s");
}

/* ---- small helpers -------------------------------------------------------- */

/* A copy of s fit for one log line: printable ASCII, bounded. */
static void log_safe(char *dst, size_t dstsz, const char *s)
{
	size_t i;

	for (i = 0; s != NULL && s[i] != '\0' && i + 1 < dstsz; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	dst[i] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Form-style decoding for the path and the query arguments, in place:
 * '+' is a space and %XX a byte (what the original agent's query
 * extractor does, and what a client that encodes a space as '+' relies
 * on). A malformed escape stays as written. The result may hold a NUL;
 * its length is returned.
 */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *r = s, *w = s;

	(void)cls;
	(void)c;
	while (*r != '\0') {
		int hi, lo;

		if (*r == '+') {
			*w++ = ' ';
			r++;
		} else if (*r == '%' && (hi = hexval(r[1])) >= 0 &&
			   (lo = hexval(r[2])) >= 0) {
			*w++ = (char)(hi << 4 | lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	log_debug("http: libmicrohttpd: %s", line);
}

/* ---- replies ---------------------------------------------------------------- */

static int queue(struct agent_req *r, unsigned status,
		 struct MHD_Response *resp)
{
	enum MHD_Result ok;

	if (r->replied) {
		MHD_destroy_response(resp);
		return -EALREADY;
	}
	ok = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	if (ok != MHD_YES)
		return -EIO;
	r->replied = true;
	r->status = status;
	return 0;
}

/* The handler's answer to a keyed request, recorded before it is queued
 * (a repeat of the key gets it). */
static void rc_capture(struct agent_req *r, unsigned status, const char *ctype,
		       const void *p, size_t n)
{
	if (r->rce != NULL && !r->replied)
		rc_record(r->h->rc, r->rce, status, ctype, p, n);
}

static struct MHD_Response *text_response(const char *text, size_t n, bool copy)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(n, (void *)text,
					       copy ? MHD_RESPMEM_MUST_COPY
						    : MHD_RESPMEM_MUST_FREE);
	if (resp != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/plain; charset=utf-8");
	return resp;
}

int agent_reply_json(struct agent_req *r, unsigned status, struct buf *b)
{
	return agent_reply_buf(r, status, "application/json", b);
}

int agent_reply_buf(struct agent_req *r, unsigned status, const char *type,
		    struct buf *b)
{
	struct MHD_Response *resp;
	size_t len;
	char *data;

	rc_capture(r, status, type, b->data, b->len);
	data = buf_take(b, &len);
	if (data == NULL)
		return -ENOMEM;
	resp = MHD_create_response_from_buffer(len, data,
					       MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(data);
		return -ENOMEM;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return queue(r, status, resp);
}

static struct MHD_Response *empty_response(void)
{
	return MHD_create_response_from_buffer(0, (void *)"",
					       MHD_RESPMEM_PERSISTENT);
}

int agent_reply_empty(struct agent_req *r, unsigned status)
{
	struct MHD_Response *resp = empty_response();

	if (resp == NULL)
		return -ENOMEM;
	rc_capture(r, status, NULL, "", 0);
	return queue(r, status, resp);
}

static char *typed_body(const char *code, const char *fmt, va_list ap,
			size_t *len) __attribute__((format(printf, 2, 0)));

/* The longest error body the agent sends: well under the 4096 bytes a
 * client reads of one (doc/protocol-v1.md, errors). */
#define ERROR_BODY_SENT_MAX 1024

/* "CODE: message" into a heap string (NULL on failure), at most
 * ERROR_BODY_SENT_MAX bytes. */
static char *typed_body(const char *code, const char *fmt, va_list ap,
			size_t *len)
{
	struct buf b = BUF_INIT(64 * 1024);
	va_list cp;
	int n;

	if (buf_append_str(&b, code) < 0 || buf_append_str(&b, ": ") < 0)
		goto fail;
	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		goto fail;
	{
		int err = 0;
		char *p = buf_reserve(&b, (size_t)n, &err);

		if (p == NULL)
			goto fail;
		vsnprintf(p, (size_t)n + 1, fmt, ap);
		buf_commit(&b, (size_t)n);
	}
	if (b.len > ERROR_BODY_SENT_MAX) {
		/* A message that echoes a path near PATH_MAX would pass the
		 * 4096 bytes a client reads of an error body, and the answer
		 * would be lost: keep its start (the code and errno name)
		 * and its end. */
		size_t keep = (ERROR_BODY_SENT_MAX - 5) / 2;

		memcpy(b.data + keep, " ... ", 5);
		memmove(b.data + keep + 5, b.data + b.len - keep, keep);
		b.len = 2 * keep + 5;
		b.data[b.len] = '\0';
	}
	return buf_take(&b, len);
fail:
	buf_cleanup(&b);
	return NULL;
}

int agent_reply_error(struct agent_req *r, unsigned status, const char *code,
		      const char *fmt, ...)
{
	struct MHD_Response *resp;
	va_list ap;
	size_t len;
	char *body;

	va_start(ap, fmt);
	body = typed_body(code, fmt, ap, &len);
	va_end(ap);
	if (body == NULL)
		return -ENOMEM;
	rc_capture(r, status, "text/plain; charset=utf-8", body, len);
	resp = text_response(body, len, false);
	if (resp == NULL) {
		free(body);
		return -ENOMEM;
	}
	return queue(r, status, resp);
}

int agent_reply_text(struct agent_req *r, unsigned status, const char *text)
{
	struct MHD_Response *resp = text_response(text, strlen(text), true);

	if (resp == NULL)
		return -ENOMEM;
	rc_capture(r, status, "text/plain; charset=utf-8", text, strlen(text));
	return queue(r, status, resp);
}

int agent_reply_bad_body(struct agent_req *r, int decode_rc)
{
	switch (decode_rc) {
	case -EBADMSG:
		return agent_reply_text(r, 400, AGENT_TEXT_JSON_SYNTAX);
	case -EINVAL:
		return agent_reply_text(r, 422, AGENT_TEXT_JSON_SHAPE);
	case -EFBIG:
		return agent_reply_text(r, 413, AGENT_TEXT_TOO_LARGE);
	default:
		return agent_reply_error(r, 500, PROTO_ERR_OPERATION_FAILED,
					 "Agent operation 'decode' failed: %s",
					 strerror(-decode_rc));
	}
}

int agent_reply_fd(struct agent_req *r, unsigned status, int fd, off_t off,
		   uint64_t len, const char *content_type,
		   const char *const *extra_headers)
{
	struct MHD_Response *resp;
	size_t i;

	if (r->replied) {
		close(fd);
		return -EALREADY;
	}
	if (len == 0) {
		/* Nothing to send: no reason to keep the file open. */
		close(fd);
		resp = empty_response();
	} else {
		resp = MHD_create_response_from_fd_at_offset64(len, fd,
							       (uint64_t)off);
		if (resp == NULL)
			close(fd);
	}
	if (resp == NULL)
		return -ENOMEM;
	if (r->rce != NULL && !r->replied) {
		/* A file's bytes are not copied into the cache: a repeat
		 * learns the request ran, not its answer. */
		rc_record(r->h->rc, r->rce, status, content_type, NULL, 0);
		rc_unkeep_entry(r->h->rc, r->rce);
	}
	if (content_type != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					content_type);
	for (i = 0; extra_headers != NULL && extra_headers[i] != NULL &&
		    extra_headers[i + 1] != NULL;
	     i += 2)
		MHD_add_response_header(resp, extra_headers[i],
					extra_headers[i + 1]);
	return queue(r, status, resp);
}

/* ---- streams ---------------------------------------------------------------- */

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct park *pk = cls;
	struct chunk *c;
	ssize_t n;

	(void)pos;
	pthread_mutex_lock(&pk->mu);
	if (pk->gone || pk->conn == NULL || atomic_load(&pk->srv->stopping)) {
		pthread_mutex_unlock(&pk->mu);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (pk->count > 0) {
		c = &pk->q[pk->head];
		n = (ssize_t)(c->n - pk->off < max ? c->n - pk->off : max);
		memcpy(out, c->p + pk->off, (size_t)n);
		pk->off += (size_t)n;
		if (pk->off == c->n) {
			free(c->p);
			c->p = NULL;
			pk->off = 0;
			pk->head = (pk->head + 1) % pk->depth;
			pk->count--;
			pthread_cond_broadcast(&pk->cv);
		}
		pthread_mutex_unlock(&pk->mu);
		return n;
	}
	if (pk->finished) {
		pthread_mutex_unlock(&pk->mu);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	/* Nothing yet: park the connection until the writer queues more
	 * (returning 0 without suspending would spin the worker). */
	park_suspend(pk);
	pthread_mutex_unlock(&pk->mu);
	return 0;
}

static void stream_free(void *cls)
{
	park_release_conn(cls);
}

int agent_reply_stream(struct agent_req *r, unsigned status,
		       const char *content_type, unsigned depth,
		       struct agent_stream **out)
{
	struct MHD_Response *resp;
	struct agent_stream *s;
	int rc;

	if (r->replied)
		return -EALREADY;
	if (depth == 0)
		depth = 1;
	s = (struct agent_stream *)park_new(r->h, PARK_STREAM, sizeof(*s),
					    r->conn, depth);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN,
						 HTTP_STREAM_BLOCK, stream_read,
						 &s->pk, stream_free);
	if (resp == NULL) {
		atomic_store(&s->pk.refs, 1);
		park_unref(&s->pk);
		return -ENOMEM;
	}
	if (content_type != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					content_type);
	park_register(r->h, &s->pk);
	/* On failure the response is destroyed here, which releases the
	 * connection side through stream_free. */
	rc = queue(r, status, resp);
	if (rc < 0) {
		park_unref(&s->pk);
		return rc;
	}
	if (r->rce != NULL) {
		/* The stream's chunks are the answer a repeat gets. */
		rc_record(r->h->rc, r->rce, status, content_type, NULL, 0);
		pthread_mutex_lock(&s->pk.mu);
		s->pk.rce = r->rce;
		s->pk.rc = r->h->rc;
		pthread_mutex_unlock(&s->pk.mu);
		r->rce = NULL;
	}
	*out = s;
	return 0;
}

int agent_stream_write(struct agent_stream *s, const void *p, size_t n)
{
	struct park *pk = &s->pk;
	struct chunk *c;
	char *copy;

	if (n == 0)
		return 0;
	copy = xmalloc(n);
	memcpy(copy, p, n);
	pthread_mutex_lock(&pk->mu);
	/* Backpressure. The wait ends when the reader takes a chunk or the
	 * connection goes (the library's idle timeout closes one whose
	 * client stopped reading); the slices keep every wait bounded. */
	while (!pk->gone && pk->count == pk->depth) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&pk->cv, &pk->mu, &ts);
	}
	if (pk->gone) {
		pthread_mutex_unlock(&pk->mu);
		free(copy);
		return -EPIPE;
	}
	c = &pk->q[(pk->head + pk->count) % pk->depth];
	c->p = copy;
	c->n = n;
	pk->count++;
	park_rc_add(pk, p, n);
	park_resume(pk);
	pthread_mutex_unlock(&pk->mu);
	return 0;
}

int agent_stream_gone_fd(const struct agent_stream *s)
{
	return s->pk.gone_fd;
}

void agent_stream_finish(struct agent_stream *s)
{
	struct park *pk = &s->pk;

	pthread_mutex_lock(&pk->mu);
	pk->finished = true;
	park_rc_finish(pk);
	park_resume(pk);
	pthread_mutex_unlock(&pk->mu);
	park_unref(pk);
}

/* ---- deferred replies ----------------------------------------------------- */

struct agent_deferred *agent_reply_defer(struct agent_req *r)
{
	struct agent_deferred *d;

	d = (struct agent_deferred *)park_new(r->h, PARK_DEFER, sizeof(*d),
					      r->conn, 0);
	r->replied = true;
	r->park = &d->pk;
	if (r->rce != NULL) {
		d->pk.rce = r->rce;
		d->pk.rc = r->h->rc;
		r->rce = NULL;
	}
	park_register(r->h, &d->pk);
	pthread_mutex_lock(&d->pk.mu);
	/* Once stopping, nothing may suspend: the stop sweep may already
	 * have passed. The access handler then closes the connection. */
	if (!atomic_load(&r->h->stopping))
		park_suspend(&d->pk);
	pthread_mutex_unlock(&d->pk.mu);
	return d;
}

static void deferred_complete(struct agent_deferred *d, unsigned status,
			      struct MHD_Response *resp)
{
	struct park *pk = &d->pk;

	pthread_mutex_lock(&pk->mu);
	if (!pk->gone && !pk->done && resp != NULL) {
		pk->resp = resp;
		pk->status = status;
		resp = NULL;
	}
	pk->done = true;
	park_resume(pk);
	pthread_mutex_unlock(&pk->mu);
	if (resp != NULL)
		MHD_destroy_response(resp);
	park_unref(pk);
}

/* A deferred reply's answer, for the reply cache. */
static void deferred_rc(struct agent_deferred *d, unsigned status,
			const char *ctype, const void *p, size_t n)
{
	struct park *pk = &d->pk;

	pthread_mutex_lock(&pk->mu);
	if (pk->rce != NULL) {
		rc_record(pk->rc, pk->rce, status, ctype, p, n);
		park_rc_finish(pk);
	}
	pthread_mutex_unlock(&pk->mu);
}

void agent_deferred_json(struct agent_deferred *d, unsigned status,
			 struct buf *b)
{
	struct MHD_Response *resp;
	size_t len;
	char *data;

	deferred_rc(d, status, "application/json", b->data, b->len);
	data = buf_take(b, &len);

	resp = MHD_create_response_from_buffer(len, data,
					       MHD_RESPMEM_MUST_FREE);
	if (resp == NULL)
		free(data);
	else
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"application/json");
	deferred_complete(d, status, resp);
}

void agent_deferred_error(struct agent_deferred *d, unsigned status,
			  const char *code, const char *fmt, ...)
{
	struct MHD_Response *resp = NULL;
	va_list ap;
	size_t len;
	char *body;

	va_start(ap, fmt);
	body = typed_body(code, fmt, ap, &len);
	va_end(ap);
	if (body != NULL)
		deferred_rc(d, status, "text/plain; charset=utf-8", body, len);
	if (body != NULL) {
		resp = text_response(body, len, false);
		if (resp == NULL)
			free(body);
	}
	deferred_complete(d, status, resp);
}

/* The access handler's call after a deferred reply's connection was
 * resumed: send the completion, or close when there is none. */
static enum MHD_Result deferred_resumed(struct agent_req *r)
{
	struct park *pk = r->park;
	struct MHD_Response *resp;
	unsigned status;

	pthread_mutex_lock(&pk->mu);
	if (pk->suspended) {
		/* Not resumed yet (cannot happen: a suspended connection is
		 * not processed); keep waiting. */
		pthread_mutex_unlock(&pk->mu);
		return MHD_YES;
	}
	resp = pk->resp;
	pk->resp = NULL;
	status = pk->status;
	pthread_mutex_unlock(&pk->mu);
	r->park = NULL;
	park_release_conn(pk);
	if (resp == NULL)
		return MHD_NO;
	r->replied = false;
	return queue(r, status, resp) == 0 ? MHD_YES : MHD_NO;
}

/* ---- request accessors ---------------------------------------------------- */

struct agent *agent_req_agent(const struct agent_req *r)
{
	return r->h->a;
}

const char *agent_req_method(const struct agent_req *r)
{
	return r->method;
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

static int route_aws_hook(struct agent_req *r)
{
	return agent_reply_empty(r, 200);
}

static bool method_matches(const char *want, const char *got)
{
	/* A GET route answers HEAD too (the library drops the body). */
	return strcmp(want, got) == 0 ||
	       (strcmp(want, "GET") == 0 && strcmp(got, "HEAD") == 0);
}

/* The route for method and path; NULL with *path_known when only the
 * method is wrong, with the allowed methods in allow[]. */
static const struct route *route_find(const struct agent_http *h,
				      const char *method, const char *path,
				      bool *path_known, char *allow,
				      size_t allowsz)
{
	size_t i;

	*path_known = false;
	allow[0] = '\0';
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *rt = &routes[i];

		if ((rt->flags & RT_EXT) && h->a->cfg.strict_v1)
			continue;
		if (strcmp(rt->path, path) != 0)
			continue;
		if (method_matches(rt->method, method))
			return rt;
		*path_known = true;
		if (allow[0] != '\0')
			strlcpy_s(allow + strlen(allow), ", ",
				  allowsz - strlen(allow));
		strlcpy_s(allow + strlen(allow), rt->method,
			  allowsz - strlen(allow));
		if (strcmp(rt->method, "GET") == 0)
			strlcpy_s(allow + strlen(allow), ", HEAD",
				  allowsz - strlen(allow));
	}
	return NULL;
}

static size_t route_limit(const struct agent_http *h, const struct route *rt)
{
	switch (rt->limit) {
	case LIM_NONE:
		return 0;
	case LIM_SMALL:
		return HTTP_SMALL_BODY;
	case LIM_FILES:
		return PROTO_HTTP_BODY_LIMIT;
	case LIM_EXEC:
		return PROTO_EXEC_MAX_BODY;
	case LIM_EXT_WRITE:
		return h->a->cfg.ext_max_write;
	}
	return 0;
}

static int reply_header_only(struct agent_req *r, unsigned status,
			     const char *name, const char *value)
{
	struct MHD_Response *resp = empty_response();

	if (resp == NULL)
		return -ENOMEM;
	MHD_add_response_header(resp, name, value);
	return queue(r, status, resp);
}

static int reply_unauthorized(struct agent_req *r, const char *text)
{
	struct MHD_Response *resp = text_response(text, strlen(text), true);

	if (resp == NULL)
		return -ENOMEM;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
				"Bearer");
	return queue(r, 401, resp);
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
	resp = text_response(text, strlen(text), true);
	if (resp == NULL)
		return -ENOMEM;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	return queue(r, 400, resp);
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
	const struct route *rt;
	long long cl;
	bool known;

	cl = declared_length(r);
	rt = route_find(h, method, url, &known, r->allow, sizeof(r->allow));
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
		if (!(rt->flags & RT_PUBLIC))
			r->pending = check_credential(r);
		if (r->pending == PEND_NONE && !(rt->flags & RT_UNGATED) &&
		    !atomic_load(&h->a->activated))
			r->pending = PEND_NOT_ACTIVATED;
		if (r->pending == PEND_NONE && (rt->flags & RT_JSON) &&
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

enum rc_begin {
	RC_RUN, /* first of its key: run the handler (r->rce is set) */
	RC_ANSWERED, /* answered from the cache, or refused */
	RC_PARKED, /* a repeat waiting for the first's answer */
};

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
static enum rc_begin rc_begin(struct agent_req *r, const char *key)
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
		queue(r, status, resp);
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
	deferred_complete(d, status, resp);
	return RC_PARKED;
}

static enum MHD_Result dispatch(struct agent_req *r)
{
	struct agent *a = r->h->a;
	const struct route *rt = r->route;
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
	if (r->h->rc->enabled && strcmp(r->method, "GET") != 0 &&
	    strcmp(r->method, "HEAD") != 0) {
		const char *key =
			agent_req_header(r, PROTO_HDR_IDEMPOTENCY_KEY);

		switch (key != NULL ? rc_begin(r, key) : RC_RUN) {
		case RC_RUN:
			break;
		case RC_ANSWERED:
			return r->replied ? MHD_YES : MHD_NO;
		case RC_PARKED:
			goto parked;
		}
	}
	rc = agent_resolve_thread_creds(a);
	if (rc == 0)
		rc = rt->fn != NULL ? rt->fn(r)
				    : agent_route_ext(r, rt->ext_op);
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
		rc_finish(r->h->rc, r->rce);
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
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
		return deferred_resumed(r);
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
		track_phase(h, conn, CP_HANDLING);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct agent_req *r = *con_cls;

	/* The connection waits for its next request. */
	track_phase(cls, conn, CP_IDLE);
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

/* ---- start and stop ------------------------------------------------------- */

static int listen_tcp(const struct agent_config *cfg, int *fd_out,
		      unsigned *port_out)
{
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char port[16];
	int fd = -1, one = 1, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%u", cfg->port);
	rc = getaddrinfo(cfg->listen_host, port, &hints, &ai);
	if (rc != 0) {
		log_error("cannot resolve listen address '%s': %s",
			  cfg->listen_host, gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	/* Rebinding over TIME_WAIT after a restart; on Linux this never lets
	 * two listeners share a port. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		goto out;
	}
	if (ss.ss_family == AF_INET6)
		*port_out = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		*port_out = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	*fd_out = fd;
	fd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

/*
 * The address of path for bind or connect. A path longer than sun_path
 * holds is reached through its directory, opened into *dirfd (the caller
 * closes it after the call): "/proc/self/fd/N/NAME".
 */
static int unix_addr(const char *path, struct sockaddr_un *sa, int *dirfd)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	*dirfd = -1;
	if (strlen(path) < sizeof(sa->sun_path)) {
		memcpy(sa->sun_path, path, strlen(path) + 1);
		return 0;
	}
	if (slash == NULL || (size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*dirfd = open(slash == path ? "/" : dir,
		      O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return -errno;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s",
		     *dirfd, slash + 1);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path)) {
		close(*dirfd);
		*dirfd = -1;
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Is a listener at sa? A stale socket of a dead agent refuses. */
static bool unix_in_use(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool used;

	if (fd < 0)
		return true;
	used = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ||
	       errno != ECONNREFUSED;
	close(fd);
	return used;
}

/*
 * Listen on a Unix socket at cfg->socket_path, mode 0600 (whatever the
 * umask: only the agent's own user, and root, may connect). A socket
 * left there by an agent that died is replaced; anything else there, or
 * a socket something listens on, is -EADDRINUSE.
 */
static int listen_unix(struct agent_http *h, const struct agent_config *cfg)
{
	struct sockaddr_un sa;
	struct stat st;
	mode_t old;
	int fd = -1, dirfd = -1, rc;

	rc = unix_addr(cfg->socket_path, &sa, &dirfd);
	if (rc < 0)
		return rc;
	if (lstat(cfg->socket_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode) || unix_in_use(&sa)) {
			rc = -EADDRINUSE;
			goto out;
		}
		if (unlink(cfg->socket_path) < 0 && errno != ENOENT) {
			rc = -errno;
			goto out;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	/* The node is made with the umask's mode: none for anyone but the
	 * owner from the start, then exactly 0600. */
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	umask(old);
	if (rc == 0 &&
	    (chmod(cfg->socket_path, 0600) < 0 ||
	     lstat(cfg->socket_path, &st) < 0 || listen(fd, SOMAXCONN) < 0))
		rc = -errno;
	if (rc < 0)
		goto out;
	h->sock_path = xstrdup(cfg->socket_path);
	h->sock_dev = st.st_dev;
	h->sock_ino = st.st_ino;
	h->listen_fd = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

/* Remove our socket, unless someone replaced it meanwhile. */
static void unlink_socket(struct agent_http *h)
{
	struct stat st;

	if (h->sock_path == NULL)
		return;
	if (lstat(h->sock_path, &st) == 0 && st.st_dev == h->sock_dev &&
	    st.st_ino == h->sock_ino)
		unlink(h->sock_path);
	free(h->sock_path);
	h->sock_path = NULL;
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

static int rc_init(struct agent_http *h)
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

int agent_http_start(struct agent *a, unsigned *port_out)
{
	struct agent_http *h = xcalloc(1, sizeof(*h));
	unsigned threads = a->cfg.threads > 0 ? a->cfg.threads : 4;
	struct epoll_event ev;
	unsigned port = 0;
	int rc;

	h->a = a;
	h->listen_fd = -1;
	h->watch_epfd = -1;
	h->watch_wake = -1;
	pthread_mutex_init(&h->mu, NULL);
	rc = rc_init(h);
	if (rc < 0)
		goto fail;
	pthread_mutex_init(&h->cmu, NULL);
	h->limit = a->cfg.max_connections > 0 ? a->cfg.max_connections
					      : AGENT_HTTP_MAX_CONNECTIONS;
	h->idle_ms = 1000LL * (a->cfg.idle_timeout_s > 0
				       ? a->cfg.idle_timeout_s
				       : AGENT_HTTP_IDLE_TIMEOUT_S);
	h->request_ms = 1000LL * (a->cfg.request_timeout_s > 0
					  ? a->cfg.request_timeout_s
					  : AGENT_HTTP_REQUEST_TIMEOUT_S);
	if (a->cfg.socket_path != NULL)
		rc = listen_unix(h, &a->cfg);
	else
		rc = listen_tcp(&a->cfg, &h->listen_fd, &port);
	if (rc < 0)
		goto fail;
	h->watch_epfd = epoll_create1(EPOLL_CLOEXEC);
	h->watch_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->watch_epfd < 0 || h->watch_wake < 0) {
		rc = -errno;
		goto fail;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = 0;
	if (epoll_ctl(h->watch_epfd, EPOLL_CTL_ADD, h->watch_wake, &ev) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = -pthread_create(&h->watcher, NULL, watcher_main, h);
	if (rc < 0)
		goto fail;
	h->watcher_started = true;

	h->d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			MHD_USE_TURBO,
		0, NULL, NULL, on_request, h,
		/* First, so the library's own start-up messages use it. */
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
		MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
		MHD_OPTION_THREAD_POOL_SIZE, threads,
		MHD_OPTION_CONNECTION_LIMIT,
		h->limit + HTTP_ADMIT_SLACK_PER_THREAD * threads,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(h->idle_ms / 1000),
		MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		(size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
		MHD_OPTION_UNESCAPE_CALLBACK, unescape, h,
		MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
	if (h->d == NULL) {
		log_error("cannot start the HTTP server");
		rc = -EIO;
		goto fail;
	}
	a->http = h;
	*port_out = port;
	return 0;
fail:
	if (h->watcher_started) {
		atomic_store(&h->watch_stop, true);
		pthread_join(h->watcher, NULL);
	}
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	unlink_socket(h);
	pthread_mutex_destroy(&h->cmu);
	if (h->watch_epfd >= 0)
		close(h->watch_epfd);
	if (h->watch_wake >= 0)
		close(h->watch_wake);
	if (h->rc != NULL) {
		rc_free(h->rc);
		free(h->rc);
	}
	pthread_mutex_destroy(&h->mu);
	free(h);
	return rc;
}

/* Resume every suspended park; returns how many are still registered. */
static size_t stop_sweep(struct agent_http *h)
{
	struct park **list;
	struct park *pk;
	size_t n = 0, i;

	pthread_mutex_lock(&h->mu);
	for (pk = h->parks; pk != NULL; pk = pk->next)
		n++;
	list = xcalloc(n + 1, sizeof(*list));
	n = 0;
	for (pk = h->parks; pk != NULL; pk = pk->next) {
		atomic_fetch_add(&pk->refs, 1);
		list[n++] = pk;
	}
	pthread_mutex_unlock(&h->mu);
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&list[i]->mu);
		park_resume(list[i]);
		pthread_mutex_unlock(&list[i]->mu);
		park_unref(list[i]);
	}
	free(list);
	return n;
}

static bool any_suspended(struct agent_http *h)
{
	struct park *pk;
	bool any = false;

	pthread_mutex_lock(&h->mu);
	for (pk = h->parks; pk != NULL && !any; pk = pk->next) {
		pthread_mutex_lock(&pk->mu);
		any = pk->suspended;
		pthread_mutex_unlock(&pk->mu);
	}
	pthread_mutex_unlock(&h->mu);
	return any;
}

void agent_http_stop(struct agent *a)
{
	struct agent_http *h = a->http;
	struct timespec ts;
	uint64_t one = 1;
	int waited = 0;

	if (h == NULL)
		return;
	atomic_store(&h->stopping, true);
	/*
	 * No MHD_quiesce_daemon here: with a thread pool on epoll, libmicro-
	 * httpd 0.9.75 removes the listening socket from each worker's epoll
	 * set from this thread while the workers may be removing it
	 * themselves, and the loser of that race aborts the process. A
	 * connection accepted during the short sweep below is served like
	 * any other (nothing suspends any more) and closed by the stop.
	 *
	 * The library must not be stopped with a connection suspended. Once
	 * stopping is set nothing suspends again (content readers end the
	 * stream with an error, new deferrals are not parked), so resuming
	 * until none is suspended is enough; the library then closes them.
	 */
	while (stop_sweep(h) > 0 && waited < HTTP_STOP_WAIT_MS) {
		ts.tv_sec = 0;
		ts.tv_nsec = 10 * 1000 * 1000;
		nanosleep(&ts, NULL);
		waited += 10;
		if (!any_suspended(h) && waited >= 100)
			break;
	}
	MHD_stop_daemon(h->d);
	/* The library closes the listening socket it was given. */
	unlink_socket(h);
	atomic_store(&h->watch_stop, true);
	if (write(h->watch_wake, &one, sizeof(one)) < 0)
		log_debug("http: eventfd write: %s", strerror(errno));
	pthread_join(h->watcher, NULL);
	close(h->watch_epfd);
	close(h->watch_wake);
	log_debug("http: reply cache: %lu run, %lu replayed, %lu waited, "
		  "%lu refused, %lu evicted, %lu expired",
		  h->rc->stats.runs, h->rc->stats.replayed, h->rc->stats.waited,
		  h->rc->stats.refused, h->rc->stats.evicted,
		  h->rc->stats.expired);
	/* Every connection is closed: no park holds an entry any more. */
	rc_free(h->rc);
	free(h->rc);
	log_debug("http: connections: %lu made way at the limit, %lu past "
		  "their deadline",
		  h->evicted, h->expired);
	pthread_mutex_destroy(&h->cmu);
	pthread_mutex_destroy(&h->mu);
	a->http = NULL;
	free(h);
}
