/* SPDX-License-Identifier: MIT */
/*
 * stub_agent: a scriptable in-process HTTP/1.1 server for the transport
 * tests (see stub_agent.h). It parses requests and counts connections; it
 * has no opinion about answers, which the tests' handlers write. It does
 * not speak TLS, does not interpret paths and does not pipeline answers.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/fdio.h"
#include "common/httpstatus.h"
#include "common/xalloc.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"

struct stub_conn {
	struct stub_agent *s;
	pthread_t thread;
	int fd; /* -1 once the connection thread closed it */
	unsigned index; /* accept order, 1-based */
	bool done; /* the thread has finished and may be joined */
	struct stub_conn *next;
};

struct stub_agent {
	stub_handler_fn *fn;
	void *arg;
	int listen_fd;
	int wake[2]; /* readable once the stub stops */
	unsigned port;
	char url[64];
	pthread_t acceptor;

	pthread_mutex_t mu;
	pthread_cond_t cond; /* stop, and every counted request */
	bool stopping;
	unsigned accepts;
	unsigned requests;
	struct stub_conn *conns;
};

static bool stopping(struct stub_agent *s)
{
	bool stop;

	pthread_mutex_lock(&s->mu);
	stop = s->stopping;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

bool stub_wait(struct stub_agent *s, long ms)
{
	struct timespec until;
	bool full = true;

	clock_deadline_in(&until, ms);
	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		if (pthread_cond_timedwait(&s->cond, &s->mu, &until) ==
		    ETIMEDOUT)
			break;
	}
	if (s->stopping)
		full = false;
	pthread_mutex_unlock(&s->mu);
	return full;
}

bool stub_agent_wait_requests(struct stub_agent *s, unsigned n, long ms)
{
	struct timespec until;
	bool reached;

	clock_deadline_in(&until, ms);
	pthread_mutex_lock(&s->mu);
	while (s->requests < n && !s->stopping) {
		if (pthread_cond_timedwait(&s->cond, &s->mu, &until) ==
		    ETIMEDOUT)
			break;
	}
	reached = s->requests >= n;
	pthread_mutex_unlock(&s->mu);
	return reached;
}

unsigned stub_agent_accepts(struct stub_agent *s)
{
	return th_locked_uint(&s->mu, &s->accepts);
}

unsigned stub_agent_requests(struct stub_agent *s)
{
	return th_locked_uint(&s->mu, &s->requests);
}

const char *stub_agent_url(const struct stub_agent *s)
{
	return s->url;
}

unsigned stub_agent_port(const struct stub_agent *s)
{
	return s->port;
}

/* ---- writing ------------------------------------------------------------- */

int stub_send(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int stub_sendf(int fd, const char *fmt, ...)
{
	va_list ap;
	char *text;
	int n, rc;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	rc = stub_send(fd, text, (size_t)n);
	free(text);
	return rc;
}

int stub_reply_head(int fd, int status, const char *ctype,
		    long long content_length, const char *extra)
{
	char length[64];
	char type[160];

	if (content_length < 0)
		snprintf(length, sizeof(length),
			 "Transfer-Encoding: chunked\r\n");
	else
		snprintf(length, sizeof(length), "Content-Length: %lld\r\n",
			 content_length);
	type[0] = '\0';
	if (ctype != NULL)
		snprintf(type, sizeof(type), "Content-Type: %s\r\n", ctype);
	return stub_sendf(fd, "HTTP/1.1 %d %s\r\n%s%s%s\r\n", status,
			  http_status_text(status), type, length,
			  extra ? extra : "");
}

int stub_reply_n(int fd, int status, const char *ctype, const void *body,
		 size_t len)
{
	int rc = stub_reply_head(fd, status, ctype, (long long)len, NULL);

	if (rc == 0 && len > 0)
		rc = stub_send(fd, body, len);
	return rc;
}

int stub_reply(int fd, int status, const char *ctype, const char *body)
{
	return stub_reply_n(fd, status, ctype, body ? body : "",
			    body ? strlen(body) : 0);
}

/* ---- reading requests ---------------------------------------------------- */

/*
 * Read more bytes into in. 1 when bytes arrived, 0 when the peer closed,
 * negative when the stub stops, the idle deadline passes or recv fails.
 */
static int fill(struct stub_agent *s, int fd, struct buf *in)
{
	struct pollfd pfd[2] = {
		{.fd = fd, .events = POLLIN},
		{.fd = s->wake[0], .events = POLLIN},
	};
	char chunk[16384];
	ssize_t n;
	int rc;

	for (;;) {
		rc = poll(pfd, 2, STUB_IDLE_MS);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return -ETIMEDOUT;
		if (pfd[1].revents != 0)
			return -ECANCELED;
		n = recv(fd, chunk, sizeof(chunk), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		if (buf_append(in, chunk, (size_t)n) != 0)
			return -EFBIG;
		return 1;
	}
}

/* Make sure in holds at least n bytes. */
static int need(struct stub_agent *s, int fd, struct buf *in, size_t n)
{
	int rc;

	while (in->len < n) {
		rc = fill(s, fd, in);
		if (rc <= 0)
			return rc == 0 ? -ECONNRESET : rc;
	}
	return 0;
}

/* Offset just past the next CRLF at or after from; fills as needed. */
static int line_end(struct stub_agent *s, int fd, struct buf *in, size_t from,
		    size_t *end)
{
	char *crlf;
	int rc;

	for (;;) {
		if (in->len > from) {
			crlf = memmem(in->data + from, in->len - from, "\r\n",
				      2);
			if (crlf != NULL) {
				*end = (size_t)(crlf - in->data) + 2;
				return 0;
			}
		}
		rc = fill(s, fd, in);
		if (rc <= 0)
			return rc == 0 ? -ECONNRESET : rc;
	}
}

/* The value of header name in the raw block, copied into out. */
static bool header_value(const char *headers, const char *name, char *out,
			 size_t size)
{
	size_t nlen = strlen(name);
	const char *line = headers;

	while (line != NULL && *line != '\0') {
		const char *eol = strstr(line, "\r\n");
		size_t len = eol ? (size_t)(eol - line) : strlen(line);

		if (len > nlen && strncasecmp(line, name, nlen) == 0 &&
		    line[nlen] == ':') {
			const char *v = line + nlen + 1;
			size_t vlen = len - nlen - 1;

			while (vlen > 0 && (*v == ' ' || *v == '\t')) {
				v++;
				vlen--;
			}
			while (vlen > 0 &&
			       (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
				vlen--;
			if (vlen >= size)
				vlen = size - 1;
			memcpy(out, v, vlen);
			out[vlen] = '\0';
			return true;
		}
		line = eol ? eol + 2 : NULL;
	}
	return false;
}

/* Decode a chunked body starting at in[pos]; returns the offset after it. */
static int read_chunked(struct stub_agent *s, int fd, struct buf *in,
			size_t pos, struct buf *body, size_t *after)
{
	size_t end, size;
	char *stop;
	int rc;

	for (;;) {
		rc = line_end(s, fd, in, pos, &end);
		if (rc != 0)
			return rc;
		errno = 0;
		size = strtoul(in->data + pos, &stop, 16);
		if (errno != 0 || stop == in->data + pos)
			return -EBADMSG;
		pos = end;
		if (size == 0)
			break;
		if (size > STUB_REQUEST_MAX)
			return -EFBIG;
		rc = need(s, fd, in, pos + size + 2);
		if (rc != 0)
			return rc;
		if (buf_append(body, in->data + pos, size) != 0)
			return -EFBIG;
		pos += size + 2;
	}
	/* Trailers, up to the empty line. */
	for (;;) {
		rc = line_end(s, fd, in, pos, &end);
		if (rc != 0)
			return rc;
		if (end == pos + 2) {
			*after = end;
			return 0;
		}
		pos = end;
	}
}

/*
 * Read one request from the connection (in may already hold bytes of it).
 * 1 with req, head and body filled; 0 when the peer closed between
 * requests; negative on errors, the idle deadline or the stop.
 */
static int read_request(struct stub_agent *s, int fd, struct buf *in,
			struct stub_req *req, struct buf *head,
			struct buf *body, bool *close_after)
{
	char value[64];
	char *hdr_end, *sp1, *sp2, *eol, *q;
	size_t head_len, pos = 0, len;
	long long clen = 0;
	int rc;

	for (;;) {
		hdr_end = in->len ? memmem(in->data, in->len, "\r\n\r\n", 4)
				  : NULL;
		if (hdr_end != NULL)
			break;
		rc = fill(s, fd, in);
		if (rc == 0 && in->len == 0)
			return 0;
		if (rc <= 0)
			return rc == 0 ? -ECONNRESET : rc;
	}
	head_len = (size_t)(hdr_end - in->data) + 4;

	/* Request line: METHOD SP TARGET SP VERSION */
	eol = memmem(in->data, head_len, "\r\n", 2);
	sp1 = memchr(in->data, ' ', (size_t)(eol - in->data));
	if (sp1 == NULL)
		return -EBADMSG;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (sp2 == NULL)
		return -EBADMSG;
	len = (size_t)(sp1 - in->data);
	if (len == 0 || len >= sizeof(req->method))
		return -EBADMSG;
	memcpy(req->method, in->data, len);
	req->method[len] = '\0';
	len = (size_t)(sp2 - sp1 - 1);
	if (len == 0 || len >= sizeof(req->target))
		return -EBADMSG;
	memcpy(req->target, sp1 + 1, len);
	req->target[len] = '\0';
	snprintf(req->path, sizeof(req->path), "%s", req->target);
	q = strchr(req->path, '?');
	if (q != NULL)
		*q = '\0';

	buf_reset(head);
	if (buf_append(head, eol + 2, (size_t)(hdr_end + 2 - (eol + 2))) != 0)
		return -EFBIG;
	req->headers = head->data ? head->data : "";
	req->headers_len = head->len;
	req->has_auth = header_value(req->headers, "Authorization", req->auth,
				     sizeof(req->auth));
	if (!req->has_auth)
		req->auth[0] = '\0';
	*close_after = header_value(req->headers, "Connection", value,
				    sizeof(value)) &&
		       strcasecmp(value, "close") == 0;

	if (header_value(req->headers, "Expect", value, sizeof(value)) &&
	    strcasecmp(value, "100-continue") == 0) {
		rc = stub_sendf(fd, "HTTP/1.1 100 Continue\r\n\r\n");
		if (rc != 0)
			return rc;
	}

	buf_reset(body);
	pos = head_len;
	if (header_value(req->headers, "Transfer-Encoding", value,
			 sizeof(value)) &&
	    strcasecmp(value, "chunked") == 0) {
		rc = read_chunked(s, fd, in, pos, body, &pos);
		if (rc != 0)
			return rc;
	} else {
		if (header_value(req->headers, "Content-Length", value,
				 sizeof(value)))
			clen = strtoll(value, NULL, 10);
		if (clen < 0 || clen > STUB_REQUEST_MAX)
			return -EFBIG;
		rc = need(s, fd, in, pos + (size_t)clen);
		if (rc != 0)
			return rc;
		if (clen > 0 &&
		    buf_append(body, in->data + pos, (size_t)clen) != 0)
			return -EFBIG;
		pos += (size_t)clen;
	}
	req->body = body->data ? body->data : "";
	req->body_len = body->len;
	/* Keep what follows (a pipelined next request). */
	buf_consume(in, pos);
	return 1;
}

static enum stub_next not_found(struct stub_agent *s,
				const struct stub_req *req, int fd, void *arg)
{
	(void)s;
	(void)req;
	(void)arg;
	return stub_reply(fd, 404, NULL, NULL) == 0 ? STUB_KEEP_OPEN
						    : STUB_CLOSE;
}

static void *conn_main(void *arg)
{
	struct stub_conn *c = arg;
	struct stub_agent *s = c->s;
	struct buf in = BUF_INIT(STUB_REQUEST_MAX);
	struct buf head = BUF_INIT(STUB_REQUEST_MAX);
	struct buf body = BUF_INIT(STUB_REQUEST_MAX);
	stub_handler_fn *fn = s->fn ? s->fn : not_found;
	struct stub_req *req = xcalloc(1, sizeof(*req));
	unsigned nth = 0;
	bool close_after = false;

	for (;;) {
		memset(req, 0, sizeof(*req));
		if (read_request(s, c->fd, &in, req, &head, &body,
				 &close_after) <= 0)
			break;
		pthread_mutex_lock(&s->mu);
		req->seq = ++s->requests;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->mu);
		req->conn = c->index;
		req->nth = ++nth;
		if (fn(s, req, c->fd, s->arg) == STUB_CLOSE || close_after ||
		    stopping(s))
			break;
	}
	free(req);
	buf_cleanup(&in);
	buf_cleanup(&head);
	buf_cleanup(&body);
	pthread_mutex_lock(&s->mu);
	close(c->fd);
	c->fd = -1;
	c->done = true;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Join the connection threads that have finished (keeps the list short
 * when a test opens hundreds of connections). */
static void reap(struct stub_agent *s)
{
	struct stub_conn **pp, *c;

	pthread_mutex_lock(&s->mu);
	pp = &s->conns;
	while ((c = *pp) != NULL) {
		if (c->done) {
			*pp = c->next;
			pthread_mutex_unlock(&s->mu);
			pthread_join(c->thread, NULL);
			free(c);
			pthread_mutex_lock(&s->mu);
			pp = &s->conns;
			continue;
		}
		pp = &c->next;
	}
	pthread_mutex_unlock(&s->mu);
}

static void *accept_main(void *arg)
{
	struct stub_agent *s = arg;
	struct pollfd pfd[2] = {
		{.fd = s->listen_fd, .events = POLLIN},
		{.fd = s->wake[0], .events = POLLIN},
	};
	struct stub_conn *c;
	int fd, rc;

	for (;;) {
		/* The stop is the bound here: stub_agent_stop wakes us. */
		rc = poll(pfd, 2, -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0 || pfd[1].revents != 0)
			break;
		fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		reap(s);
		c = xcalloc(1, sizeof(*c));
		c->s = s;
		c->fd = fd;
		pthread_mutex_lock(&s->mu);
		if (s->stopping) {
			pthread_mutex_unlock(&s->mu);
			close(fd);
			free(c);
			break;
		}
		c->index = ++s->accepts;
		c->next = s->conns;
		s->conns = c;
		if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
			/* No thread to serve it: drop the connection. */
			s->conns = c->next;
			close(fd);
			free(c);
		}
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

struct stub_agent *stub_agent_start(stub_handler_fn *fn, void *arg)
{
	struct stub_agent *s = xcalloc(1, sizeof(*s));

	s->fn = fn;
	s->arg = arg;
	pthread_mutex_init(&s->mu, NULL);
	clock_cond_init(&s->cond);
	ck_assert_msg(pipe2(s->wake, O_CLOEXEC) == 0, "pipe: %s",
		      strerror(errno));
	s->listen_fd = th_listen_loopback(128, &s->port);
	ck_assert_msg(s->listen_fd >= 0, "listen: %s", strerror(-s->listen_fd));
	snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%u/", s->port);
	ck_assert(pthread_create(&s->acceptor, NULL, accept_main, s) == 0);
	return s;
}

void stub_agent_stop(struct stub_agent *s)
{
	struct stub_conn *c, *next;
	char one = 1;

	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->cond);
	/* Unblock a handler stuck writing to a peer that does not read. */
	for (c = s->conns; c != NULL; c = c->next)
		if (c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->mu);
	if (write(s->wake[1], &one, 1) != 1)
		ck_abort_msg("stub wake: %s", strerror(errno));
	pthread_join(s->acceptor, NULL);
	/* No thread adds connections any more. */
	for (c = s->conns; c != NULL; c = next) {
		next = c->next;
		pthread_join(c->thread, NULL);
		free(c);
	}
	close(s->listen_fd);
	close(s->wake[0]);
	close(s->wake[1]);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* ---- addresses no agent answers on --------------------------------------- */

void stub_refused_url(char *url, size_t size)
{
	struct sockaddr_in sin;
	socklen_t slen = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ck_assert(getsockname(fd, (struct sockaddr *)&sin, &slen) == 0);
	/* Bound but never listening: nothing accepts on this port, and
	 * closing releases it. */
	close(fd);
	snprintf(url, size, "http://127.0.0.1:%u/", ntohs(sin.sin_port));
}

/* Start a non-blocking connect to port; the socket, or -errno. */
static int connect_start(unsigned port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 &&
	    errno != EINPROGRESS) {
		int saverr = errno;

		close(fd);
		return -saverr;
	}
	return fd;
}

/* 1 when the connect on fd completed within ms, 0 when it did not. */
static int connect_done(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLOUT};
	int soerr = 0;
	socklen_t len = sizeof(soerr);

	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 ||
	    soerr != 0)
		return 0;
	return 1;
}

int stub_blackhole_open(struct stub_blackhole *b)
{
	unsigned port;
	int probe, rc;

	memset(b, 0, sizeof(*b));
	b->listen_fd = -1;
	b->filler_fd = -1;
	rc = th_listen_loopback(0, &port);
	if (rc < 0)
		return rc;
	b->listen_fd = rc;
	/* Backlog 0 holds one established connection: this one fills it. */
	b->filler_fd = connect_start(port);
	if (b->filler_fd < 0) {
		rc = b->filler_fd;
		goto fail;
	}
	if (!connect_done(b->filler_fd, 1000)) {
		rc = -EAGAIN;
		goto fail;
	}
	/* The queue is full now: a further connect must not complete. */
	probe = connect_start(port);
	if (probe < 0) {
		rc = probe;
		goto fail;
	}
	rc = connect_done(probe, 200);
	close(probe);
	if (rc != 0) {
		rc = -EAGAIN;
		goto fail;
	}
	snprintf(b->url, sizeof(b->url), "http://127.0.0.1:%u/", port);
	return 0;
fail:
	stub_blackhole_close(b);
	return rc;
}

void stub_blackhole_close(struct stub_blackhole *b)
{
	fdio_close(b->filler_fd);
	fdio_close(b->listen_fd);
	b->filler_fd = -1;
	b->listen_fd = -1;
}
