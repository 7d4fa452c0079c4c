/* SPDX-License-Identifier: MIT */
/*
 * stub_agent: a scriptable HTTP/1.1 server on 127.0.0.1 (kernel-chosen
 * port) for the transport tests. One thread accepts; every accepted
 * connection gets its own thread, which parses each request (request
 * line, headers, a Content-Length or chunked body) and hands it, with the
 * connection's socket, to a handler the test supplies. The handler writes
 * whatever the scenario needs on the socket: a normal reply, headers that
 * promise more than ever comes, a stall, nothing at all.
 *
 * It is a test fixture, not an HTTP server: raw sockets, no libraries, no
 * TLS, HTTP/1.1 only, a request of at most STUB_REQUEST_MAX bytes.
 *
 * Every wait inside the stub has a deadline: reads give up after
 * STUB_IDLE_MS of silence, and stalls (stub_wait) end early when the stub
 * stops. stub_agent_stop wakes every stall, shuts every connection down
 * and joins every thread.
 *
 * Thread-safety: the counters and stub_wait may be used from any thread;
 * a handler runs on its connection's thread, so handlers that share state
 * with the test lock it themselves. Handlers must not call Check
 * assertions (they are not on the test's thread): they record what they
 * saw and the test asserts it.
 */
#ifndef SBFS_TEST_STUB_AGENT_H
#define SBFS_TEST_STUB_AGENT_H

#include <stdbool.h>
#include <stddef.h>

/* Largest request (headers plus body) the stub reads. */
#define STUB_REQUEST_MAX (1024 * 1024)
/* Longest silence the stub waits for on a connection. */
#define STUB_IDLE_MS 30000

struct stub_agent;

/* One parsed request. Valid only during the handler call. */
struct stub_req {
	char method[16];
	char target[2048]; /* path with query, as sent */
	char path[2048]; /* target without the query */
	bool has_auth;
	char auth[512]; /* the Authorization value ("Bearer ...") */
	const char *headers; /* raw header lines, NUL-terminated */
	size_t headers_len;
	const char *body; /* NUL-terminated (dechunked) */
	size_t body_len;
	unsigned conn; /* 1-based index of the connection (accept order) */
	unsigned nth; /* 1-based index of the request on its connection */
	unsigned seq; /* 1-based index among all the stub's requests */
};

/* What the connection does after the handler. */
enum stub_next {
	STUB_KEEP_OPEN = 0, /* read the next request (keep-alive) */
	STUB_CLOSE, /* close the connection */
};

typedef enum stub_next stub_handler_fn(struct stub_agent *s,
				       const struct stub_req *req, int fd,
				       void *arg);

/*
 * Listen on 127.0.0.1 with an ephemeral port and serve every request with
 * fn(arg). fn NULL answers every request with an empty-body 404 (an agent
 * with no routes). Aborts the test on failure.
 */
struct stub_agent *stub_agent_start(stub_handler_fn *fn, void *arg);
/* Stop: wake every stall, shut every connection down, join every thread,
 * free. NULL-safe. */
void stub_agent_stop(struct stub_agent *s);

/* "http://127.0.0.1:PORT/" (borrowed, valid until stop). */
const char *stub_agent_url(const struct stub_agent *s);
unsigned stub_agent_port(const struct stub_agent *s);
/* Connections accepted so far. */
unsigned stub_agent_accepts(struct stub_agent *s);
/* Complete requests read so far (each counted before its handler runs). */
unsigned stub_agent_requests(struct stub_agent *s);
/* Wait until at least n requests were read; false after ms without. */
bool stub_agent_wait_requests(struct stub_agent *s, unsigned n, long ms);

/*
 * Stall for ms milliseconds, or less when the stub stops. Returns true
 * when the full time passed, false when the stop cut it short.
 */
bool stub_wait(struct stub_agent *s, long ms);

/* ---- writing answers (all return 0 or a negative errno) ---------------- */

/* Write all n bytes (never raises SIGPIPE). */
int stub_send(int fd, const void *p, size_t n);
int stub_sendf(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * The status line and headers only. content_length < 0 announces a
 * chunked body; extra is more "Name: value\r\n" lines, or NULL. ctype
 * NULL sends no Content-Type.
 */
int stub_reply_head(int fd, int status, const char *ctype,
		    long long content_length, const char *extra);
/* A complete answer with a Content-Length body. */
int stub_reply_n(int fd, int status, const char *ctype, const void *body,
		 size_t len);
/* As stub_reply_n for a string body (NULL: empty). */
int stub_reply(int fd, int status, const char *ctype, const char *body);

/* ---- addresses no agent answers on ------------------------------------- */

/*
 * A loopback URL ("http://127.0.0.1:PORT/") whose port refuses
 * connections: a port was bound to find a free number, then released.
 */
void stub_refused_url(char *url, size_t size);

/*
 * A loopback URL that swallows connection attempts: a listening socket
 * with a backlog of 0 whose accept queue is already full, so Linux drops
 * further SYNs and a connect() waits until its own deadline.
 */
struct stub_blackhole {
	int listen_fd;
	int filler_fd;
	char url[64];
};

/* 0, or -EAGAIN when this system answers the probe anyway (the caller
 * should skip), or another negative errno. */
int stub_blackhole_open(struct stub_blackhole *b);
void stub_blackhole_close(struct stub_blackhole *b);

#endif
