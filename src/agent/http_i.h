/* SPDX-License-Identifier: MIT */
/*
 * http_i: what the files of the agent's HTTP server share, and the only
 * header besides http.c's own files that includes libmicrohttpd:
 *
 *   http.c         start and stop, the listening socket, the connections'
 *                  limit and deadlines, the hang-up watcher
 *   http_access.c  the access handler: routing, credential, activation,
 *                  framing, bodies, dispatch; the request accessors
 *   http_reply.c   replies, and the replies that outlive the access
 *                  handler: streams and deferred replies ("parks")
 *   http_cache.c   the reply cache of keyed requests
 *
 * libmicrohttpd rules the server is built around:
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
 *
 * Locks, outermost first: a park's mu, then the reply cache's; the
 * server's mu (the parks' list) and cmu (the connections) are taken alone,
 * except that the stop path takes a park's mu under mu.
 */
#ifndef SBFS_AGENT_HTTP_I_H
#define SBFS_AGENT_HTTP_I_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "agent/http.h"
#include "agent/routes.h"
#include "common/dlist.h"

/* Bodies of small JSON routes (mkdir, activate, extension metadata), and
 * what a refused request may send before it is answered. */
#define HTTP_SMALL_BODY (64UL * 1024)

struct rc_entry;
struct reply_cache;

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
	struct dlist_node link; /* in the server's tracks */
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
	struct dlist tracks; /* of struct conn_track */
	unsigned nlive;
	unsigned limit;
	long long idle_ms, request_ms;
	unsigned long evicted, expired;

	/* Parks whose connection side is alive, for the stop sweep and the
	 * hang-up watcher. */
	pthread_mutex_t mu;
	struct dlist parks; /* of struct park */
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
	const struct agent_route *route;
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

/* ---- parks: streams and deferred replies (http_reply.c) ----------------- */

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
	struct dlist_node link; /* in h's parks */
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

void park_unref(struct park *pk);
/* Under pk->mu: the client is gone (the gone_fd fires, writers wake). */
void park_mark_gone(struct park *pk);
/* Under pk->mu: let libmicrohttpd process the connection again. */
void park_resume(struct park *pk);
/* The connection side is done with the park (its response was freed, or
 * the request completed): the reply cache's entry is finished, the park
 * unregistered and the connection side's reference dropped. */
void park_release_conn(struct park *pk);
/* Take a reference on the registered park with this id (NULL if none). */
struct park *park_find(struct agent_http *h, uint64_t id);

/* ---- replies (http_reply.c) --------------------------------------------- */

/* Queue resp (always consumed) as the request's answer: 0, -EALREADY when
 * one was queued already, -EIO when the library refused it. */
int http_queue(struct agent_req *r, unsigned status, struct MHD_Response *resp);
/* A text/plain response of n bytes of text, copied, or taken (freed with
 * the response) unless copy. NULL on failure (text is then the caller's). */
struct MHD_Response *http_text_response(const char *text, size_t n, bool copy);
/* An empty response (NULL on failure). */
struct MHD_Response *http_empty_response(void);
/* Complete a deferred reply with resp (taken; NULL closes the connection
 * instead), from any thread. */
void http_deferred_complete(struct agent_deferred *d, unsigned status,
			    struct MHD_Response *resp);
/* The access handler's call after a deferred reply's connection was
 * resumed: send the completion, or close when there is none. */
enum MHD_Result http_deferred_resumed(struct agent_req *r);

/* ---- the reply cache (http_cache.c) ------------------------------------- */

/* Make the server's cache from SANDBOX_AGENT_REPLY_CACHE: 0, or -EINVAL
 * (logged) when it does not parse. h->rc is set either way. */
int rcache_init(struct agent_http *h);
/* At stop, after the library closed every connection: answer whatever
 * waits (the answers are discarded), log the counts, free. NULL-safe. */
void rcache_free(struct reply_cache *c);
bool rcache_enabled(const struct reply_cache *c);
/* Answers past their time: expired entries and waiters. Called about
 * once a second. */
void rcache_tick(struct reply_cache *c);

enum rc_begin {
	RC_RUN, /* first of its key: run the handler (r->rce is set) */
	RC_ANSWERED, /* answered from the cache, or refused */
	RC_PARKED, /* a repeat waiting for the first's answer */
};

/*
 * A request that carries an Idempotency-Key, once its body is read: the
 * first of its key runs; a repeat of a finished one is answered from the
 * cache; a repeat of a running one waits (parked) for its answer; the key
 * reused for another request is refused (422).
 */
enum rc_begin rcache_begin(struct agent_req *r, const char *key);
/* Record an answer in a running entry (replacing one recorded before: a
 * handler whose first reply could not be queued may give another). */
void rcache_record(struct reply_cache *c, struct rc_entry *e, unsigned status,
		   const char *ctype, const void *p, size_t n);
/* The answer of a running entry is not kept (only that it ran). */
void rcache_unkeep(struct reply_cache *c, struct rc_entry *e);
/* Finish e (from any thread, no park lock needed) and answer its
 * waiters. */
void rcache_finish(struct reply_cache *c, struct rc_entry *e);
/* Under pk->mu: the answer a stream or deferred reply carried is final. */
void rcache_park_finish(struct park *pk);
/* Under pk->mu: more of a stream's answer. */
void rcache_park_add(struct park *pk, const void *p, size_t n);

/* ---- the access handler (http_access.c) --------------------------------- */

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn,
				const char *url, const char *method,
				const char *version, const char *upload,
				size_t *upload_size, void **con_cls);
void http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		       enum MHD_RequestTerminationCode toe);

/* ---- connections (http.c) ------------------------------------------------ */

/* The connection entered phase (its deadline starts anew). */
void http_track_phase(struct agent_http *h, struct MHD_Connection *conn,
		      enum conn_phase phase);

#endif
