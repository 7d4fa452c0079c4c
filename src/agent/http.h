/* SPDX-License-Identifier: MIT */
/*
 * http: the agent's HTTP/1.1 server on libmicrohttpd (a worker thread pool
 * on epoll, suspend/resume for replies that wait). It owns the wire: it
 * reads bodies up to each route's limit (refusing a larger Content-Length
 * before reading any of it), checks the bearer credential and the
 * activation gate, dispatches to the route handlers, and sends replies.
 * Handlers never see libmicrohttpd.
 *
 * Contract for handlers: a handler gets a request and must produce exactly
 * one reply through one of the agent_reply_* functions (or a stream or a
 * deferred reply) before it returns. Handlers run on worker threads and may
 * block briefly (file I/O); anything that waits (command output, a job
 * long-poll) uses a stream or a deferred reply instead.
 *
 * Thread-safe as described per function.
 */
#ifndef SBFS_AGENT_HTTP_H
#define SBFS_AGENT_HTTP_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "common/buf.h"

struct agent_req;

/* The connection bounds' defaults (sandbox-agent(8)): connections at
 * once, seconds a connection may wait for its request line, and seconds
 * from the request line to the end of the request's body. */
#define AGENT_HTTP_MAX_CONNECTIONS 512
#define AGENT_HTTP_IDLE_TIMEOUT_S 60
#define AGENT_HTTP_REQUEST_TIMEOUT_S 60

/*
 * Start serving on cfg->socket_path (a Unix socket, mode 0600, removed at
 * stop; *port_out is 0) or else cfg->listen_host:cfg->port (*port_out gets
 * the bound port). -EADDRINUSE when the port is taken, or when something
 * other than a dead agent's socket is at the path. Returns 0 or a negative
 * errno.
 *
 * At most cfg->max_connections connections are served at once; at the
 * limit, the one that has been waiting for or receiving a request the
 * longest is closed to make way. A connection that sends no request line
 * within cfg->idle_timeout_s of beginning to wait, or not the whole
 * request within cfg->request_timeout_s of its request line, is closed.
 * A request with ambiguous framing (Content-Length and Transfer-Encoding
 * together, Content-Length twice, an encoding other than chunked) is
 * answered 400 and its connection closed.
 */
int agent_http_start(struct agent *a, unsigned *port_out)
	__attribute__((warn_unused_result));
/* Stop accepting, finish or abort what is in flight, free the server. */
void agent_http_stop(struct agent *a);

/* ---- the reply cache (doc/protocol-ext.md, "Idempotency keys") --------- */

/*
 * A request other than GET or HEAD that carries an Idempotency-Key runs
 * at most once: its answer is kept under the key, a repeat gets it back
 * (marked Idempotent-Replayed: true), a repeat that comes while the first
 * runs waits for it, the key used for another request is refused (422).
 * Handlers do nothing for it: every agent_reply_* (streams and deferred
 * replies included) records the answer. Off with strict_v1.
 */
struct agent_reply_cache_limits {
	size_t entries; /* entries at most; 0 turns the cache off */
	size_t bytes; /* answer bytes kept in all */
	size_t entry; /* the largest answer kept (a larger one is
				 remembered as run, not kept) */
	long ttl_ms; /* how long a finished entry is kept */
	long wait_ms; /* how long a repeat waits for a running first */
};

/* 4096 entries, 16 MiB, 1 MiB, 120 s, 30 s. */
void agent_reply_cache_defaults(struct agent_reply_cache_limits *l);
/* Override l from "entries=N,bytes=N,entry=N,ttl=MS,wait=MS" (any
 * subset, any order): what SANDBOX_AGENT_REPLY_CACHE holds when
 * agent_http_start runs. -EINVAL for anything else (l unchanged). */
int agent_reply_cache_parse(const char *spec,
			    struct agent_reply_cache_limits *l)
	__attribute__((warn_unused_result));
/* Whether the reply cache serves requests (health advertises it). */
bool agent_http_reply_cache(const struct agent *a);

/* ---- the request (valid during the handler call only) ------------------ */

struct agent *agent_req_agent(const struct agent_req *r);
/* The URL path without the query, e.g. "/v1/files". */
const char *agent_req_path(const struct agent_req *r);
/* A decoded query argument, or NULL when absent. Decoding is
 * form-style, as the original agent's query extractor does: %XX escapes
 * and '+' for a space. A key given without '=' ("?path") reads as "". */
const char *agent_req_query(const struct agent_req *r, const char *key);
/* As agent_req_query, with the decoded length in *len: a value may hold
 * a NUL (%00), which a caller that checks paths must see. */
const char *agent_req_query_n(const struct agent_req *r, const char *key,
			      size_t *len);
/* A query argument that must be a decimal number, digits only, at most
 * max: 0 with *out set, 0 with *out untouched when the argument is absent,
 * -EINVAL when it is anything else. */
int agent_req_query_dec(const struct agent_req *r, const char *key,
			uint64_t max, uint64_t *out)
	__attribute__((warn_unused_result));
/* A request header (case-insensitive name), or NULL. */
const char *agent_req_header(const struct agent_req *r, const char *name);
/* The request body (NUL-terminated for convenience; len excludes it). */
const char *agent_req_body(const struct agent_req *r, size_t *len);
/* True when the request's Content-Type is application/json (parameters
 * such as charset allowed). */
bool agent_req_is_json(const struct agent_req *r);

/* ---- replies ----------------------------------------------------------- */

/* JSON answer; the body buffer's storage is taken (b is left empty). */
int agent_reply_json(struct agent_req *r, unsigned status, struct buf *b);
/* The same with another Content-Type. */
int agent_reply_buf(struct agent_req *r, unsigned status, const char *type,
		    struct buf *b);
/* Empty body (204 for write, mkdir and activate; empty 404/405). */
int agent_reply_empty(struct agent_req *r, unsigned status);
/* Typed error: text/plain; charset=utf-8 body "CODE: message". */
int agent_reply_error(struct agent_req *r, unsigned status, const char *code,
		      const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Untyped text body (framework-style rejections: 400, 413, 415, 422). */
int agent_reply_text(struct agent_req *r, unsigned status, const char *text);
/*
 * The framework-style answer for a body a proto decoder refused, from its
 * return value: -EBADMSG (not JSON) 400, -EINVAL (wrong shape) 422, -EFBIG
 * 413, each with the AGENT_TEXT_* body below; anything else 500
 * AGENT_OPERATION_FAILED.
 */
int agent_reply_bad_body(struct agent_req *r, int decode_rc);

/* The untyped texts of those rejections (axum's wording, doc/protocol-v1.md
 * 4). */
#define AGENT_TEXT_JSON_SYNTAX "Failed to parse the request body as JSON"
#define AGENT_TEXT_JSON_SHAPE \
	"Failed to deserialize the JSON body into the target type"
#define AGENT_TEXT_JSON_TYPE \
	"Expected request with `Content-Type: application/json`"
#define AGENT_TEXT_TOO_LARGE \
	"Failed to buffer the request body: length limit exceeded"
/* Raw bytes from an open file: len bytes at off, read as they are sent;
 * a file that shrinks under the answer ends the connection short (never
 * a stall). The fd is taken (closed after sending). extra_headers is a
 * NULL-terminated list of name, value pairs (may be NULL). */
int agent_reply_fd(struct agent_req *r, unsigned status, int fd, off_t off,
		   uint64_t len, const char *content_type,
		   const char *const *extra_headers);

/* ---- streamed replies (exec) -------------------------------------------- */

struct agent_stream;

/*
 * Commit status and content type now and send the body as it is written.
 * The body uses chunked encoding. At most `depth` writes are queued; a
 * writer blocks past that (backpressure).
 */
int agent_reply_stream(struct agent_req *r, unsigned status,
		       const char *content_type, unsigned depth,
		       struct agent_stream **out)
	__attribute__((warn_unused_result));
/*
 * Queue one chunk (copied). Blocks while the queue is full. Returns 0, or
 * -EPIPE once the client is gone (the writer should stop its work).
 * Thread-safe with respect to the server; one writer per stream.
 */
int agent_stream_write(struct agent_stream *s, const void *p, size_t n);
/*
 * A descriptor that becomes readable (POLLIN) once the client has gone;
 * the writer may poll it next to its own descriptors. Owned by the
 * stream. It fires when the server ends the connection (finished,
 * failed, timed out, server stopping) and also when the peer hangs up
 * while the stream is idle: libmicrohttpd does not watch a suspended
 * connection, so the server watches a duplicate of the client socket for
 * POLLRDHUP itself. The writer needs nothing beyond this descriptor.
 */
int agent_stream_gone_fd(const struct agent_stream *s);
/* End the body after the queued chunks, and release the writer's hold on
 * the stream. The writer must not use s afterwards. */
void agent_stream_finish(struct agent_stream *s);

/* ---- deferred replies (job long-poll) ----------------------------------- */

struct agent_deferred;

/* Park the request: its reply is given later, from any thread, by exactly
 * one agent_deferred_* completion (which releases the handle). A
 * completion after the client went away (or the server stopped) is
 * discarded. Never NULL. */
struct agent_deferred *agent_reply_defer(struct agent_req *r);
void agent_deferred_json(struct agent_deferred *d, unsigned status,
			 struct buf *b);
/* Complete d with 500 OPERATION_FAILED, "Agent operation 'op' failed:
 * <strerror(err)>" (err positive). */
void agent_deferred_failed(struct agent_deferred *d, const char *op, int err);

#endif
