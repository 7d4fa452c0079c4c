/* SPDX-License-Identifier: MIT */
/*
 * transport_curl: the curl engine of the transport core, and the only
 * file of the tree that includes libcurl (doc/internals/transport.md, "One
 * exchange"). It runs one HTTP exchange on a pooled (multi, easy) pair
 * through a small driver loop, phase by phase, each with the deadline its
 * caller gives: the response headers (body bytes that come meanwhile
 * pause the transfer, so the caller decides what to do with the answer
 * before reading it), then an error body bounded at XFER_ERROR_BODY_MAX,
 * or a success body into the request's sink or a bounded buffer.
 *
 * It knows no route, credential or replay rule: its callers
 * (transport.c for agents, transport_http.c for providers) say what to
 * send (struct xfer_spec) and decide what an outcome means. What it does
 * decide: agents are reached without a proxy, nothing follows a
 * redirect, a fresh connection is asked for when the spec says so, and a
 * new connection whose listener does not run as the spec's owner (or
 * root) is refused before anything is sent (XFER_FOREIGN).
 *
 * A pool keeps idle pairs, each with its multi's connection cache, so
 * consecutive exchanges reuse a kept-alive connection: one pool per
 * sandbox and one for provider requests.
 *
 * Thread-safety: a pool is thread-safe. A struct xfer, and the pair it
 * runs on, belong to one thread from xfer_init to xfer_finish; the
 * calling thread's cancel flag (transport_op_set_cancel) ends its exchange
 * within a second, and a deadline that passes marks the thread's
 * operation as timed out (transport_op_timed_out). Out of memory for a
 * handle is fatal.
 */
#ifndef SBFS_TRANSPORT_CURL_H
#define SBFS_TRANSPORT_CURL_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/buf.h"
#include "common/proto.h"
#include "client/transport.h"

/* An error body is read up to this many bytes; a longer one is an error. */
#define XFER_ERROR_BODY_MAX PROTO_ERROR_BODY_MAX
/* libcurl's own error text (CURL_ERROR_SIZE). */
#define XFER_ERROR_SIZE 256

/* libcurl initialised once per process: 0, or -EIO when it cannot be. */
int xfer_global_init(void) __attribute__((warn_unused_result));

/* ---- pools of idle handles ------------------------------------------------ */

struct xfer_handle; /* a (CURLM, CURL) pair */

struct xfer_pool {
	pthread_mutex_t lock;
	struct xfer_handle *idle;
	unsigned n; /* idle pairs */
	unsigned max; /* kept at the most; more are freed */
};

void xfer_pool_init(struct xfer_pool *p, unsigned max);
/* Free the idle pairs (none may be taken any more). */
void xfer_pool_cleanup(struct xfer_pool *p);
/* An idle pair, or a new one. */
struct xfer_handle *xfer_pool_take(struct xfer_pool *p);
/* Keep h for the next exchange, or free it when the pool is full. NULL is
 * ignored. */
void xfer_pool_give(struct xfer_pool *p, struct xfer_handle *h);

/* ---- one exchange ------------------------------------------------------------ */

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

/* What to send, and how. Strings are borrowed until xfer_finish. */
struct xfer_spec {
	const char *url;
	const char *method; /* "GET", "POST", "PUT", ... */
	const char *auth; /* an "Authorization: ..." line, or NULL */
	const char *const *headers; /* extra "Name: value" lines, or NULL */
	const char *key; /* Idempotency-Key value, or NULL */
	const char *client_id; /* X-Sandboxfs-Client value, or NULL */
	const char *content_type; /* of the body; NULL with none */
	const void *body;
	size_t body_len;
	long connect_ms;
	bool direct; /* an agent: never through a proxy */
	const char *unix_path; /* connect through this socket, or NULL */
	/* Each new connection's listener must run as owner (or root);
	 * route names it when it does not. */
	bool check_owner;
	uid_t owner;
	const char *route;
	const char *ca_file; /* extra trust, or NULL */
	const char *const *resolve; /* pinned resolution, or NULL */
	/* A new connection, never a kept-alive one (libcurl sends again on
	 * a fresh connection what a dead kept-alive one lost). */
	bool fresh;
};

struct curl_slist;

/* One exchange: the engine's state, and what the caller reads after. */
struct xfer {
	struct xfer_handle *h;
	const struct transport_req *req; /* sink, sink_arg */
	struct transport_resp *resp; /* status, headers, buffered body */
	long long total; /* the caller's: the exchange's deadline */
	size_t body_bytes; /* success-body bytes handed on so far */
	char errbuf[XFER_ERROR_SIZE]; /* libcurl's reason, or "" */
	struct buf errbody; /* the error body (XFER_ERRBODY) */
	int sink_err; /* the sink's (or the buffer's) refusal */
	char foreign[200]; /* why the listener was refused */
	/* The engine's own. */
	struct curl_slist *hdrs;
	struct curl_slist *pins;
	enum xfer_phase phase;
	long cur_status; /* status of the header block being read */
	bool headers_done;
	bool paused;
	bool done; /* libcurl finished the transfer */
	int result; /* its CURLcode */
	bool errbody_over;
	long long last_byte_ms;
	bool check_owner;
	bool unix_socket;
	uid_t owner;
	const char *route;
	int new_sock; /* the socket opened for a new connection */
};

/*
 * Who answers a loopback TCP connection from local_ip:local_port to
 * peer_ip:peer_port (from /proc/net/tcp or tcp6): the owner of the
 * listener on the peer's address, else, when there is none any more, the
 * owner of the accepted socket whose ends are this connection's. Not the
 * accepted socket first: accept(2) gives it the accepting thread's file
 * system uid (the kernel's sock_graft), which in the agent is the
 * sandbox user's once a thread has served a file route; only the
 * listener says whose program took the port. -1 when neither is found.
 */
long xfer_tcp_peer_uid(const char *peer_ip, int peer_port, const char *local_ip,
		       int local_port);

/* Start x on h for req, its answer into resp (status, headers; a success
 * body up to req->max_body, or TRANSPORT_DEFAULT_MAX_BODY). */
void xfer_init(struct xfer *x, struct xfer_handle *h,
	       const struct transport_req *req, struct transport_resp *resp);
/* Configure the exchange as spec says and queue it. 0, -ENOMEM, -EIO. */
int xfer_setup(struct xfer *x, const struct xfer_spec *spec)
	__attribute__((warn_unused_result));
/*
 * Drive the transfer until the phase's goal: the response headers
 * (XFER_HOLD) or the end of the body. deadline is absolute (ms, the
 * monotonic clock); idle_ms > 0 also ends the wait when no body byte
 * arrived for that long.
 */
enum xfer_outcome xfer_run(struct xfer *x, long long deadline, long idle_ms);
/* Go on with a held transfer into another phase. */
void xfer_resume_as(struct xfer *x, enum xfer_phase phase);
/* Detach the pair from the exchange (an unfinished transfer closes its
 * connection) and free what the exchange held; the pair goes back to its
 * pool by the caller. Safe to call twice. */
void xfer_finish(struct xfer *x);

#endif
