/* SPDX-License-Identifier: MIT */
/*
 * http_reply: the server's answers (http.h, "replies"), and the two kinds
 * of answers that outlive the access handler, streams (exec output) and
 * deferred replies (job long-polls): "parks", shared by the connection and
 * the writer (http_i.h). Every answer given to a keyed request is also
 * recorded in the reply cache before it is queued.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/http_i.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/xalloc.h"

/* The type of every text answer. */
#define TEXT_PLAIN "text/plain; charset=utf-8"
/* The block a stream's content reader is asked to fill. */
#define HTTP_STREAM_BLOCK (64U * 1024)

/* ---- parks ---------------------------------------------------------------- */

static struct park *park_new(struct agent_http *h, enum park_kind kind,
			     size_t size, struct MHD_Connection *conn,
			     unsigned depth)
{
	struct park *pk = xcalloc(1, size);

	pk->srv = h;
	pk->kind = kind;
	atomic_init(&pk->refs, 2); /* the connection side and the writer */
	pthread_mutex_init(&pk->mu, NULL);
	clock_cond_init(&pk->cv);
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

void park_unref(struct park *pk)
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
void park_mark_gone(struct park *pk)
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
void park_resume(struct park *pk)
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
	dlist_push_front(&h->parks, &pk->link);
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
	dlist_remove(&h->parks, &pk->link);
	pk->h = NULL;
	pthread_mutex_unlock(&h->mu);
}

/* The connection side is done with the park (its response was freed, or
 * the request completed). */
void park_release_conn(struct park *pk)
{
	pthread_mutex_lock(&pk->mu);
	park_mark_gone(pk);
	pk->conn = NULL;
	pk->suspended = false;
	/* What the stream carried so far is the answer a repeat gets: the
	 * cache may go with the server once the connection side let go. */
	rcache_park_finish(pk);
	pthread_mutex_unlock(&pk->mu);
	park_unregister(pk);
	park_unref(pk);
}

/* Take a reference on the registered park with this id (NULL if none). */
struct park *park_find(struct agent_http *h, uint64_t id)
{
	struct park *pk;

	pthread_mutex_lock(&h->mu);
	for (pk = dlist_item(h->parks.first, struct park, link); pk != NULL;
	     pk = dlist_item(pk->link.next, struct park, link)) {
		if (pk->id == id) {
			atomic_fetch_add(&pk->refs, 1);
			break;
		}
	}
	pthread_mutex_unlock(&h->mu);
	return pk;
}
/* ---- replies ---------------------------------------------------------------- */

int http_queue(struct agent_req *r, unsigned status, struct MHD_Response *resp)
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
		rcache_record(r->h->rc, r->rce, status, ctype, p, n);
}

struct MHD_Response *http_text_response(const char *text, size_t n, bool copy)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(n, (void *)text,
					       copy ? MHD_RESPMEM_MUST_COPY
						    : MHD_RESPMEM_MUST_FREE);
	if (resp != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					TEXT_PLAIN);
	return resp;
}

int agent_reply_json(struct agent_req *r, unsigned status, struct buf *b)
{
	return agent_reply_buf(r, status, "application/json", b);
}

/* b's bytes (taken) as a response of the content type; NULL on failure. */
static struct MHD_Response *buf_response(struct buf *b, const char *type)
{
	struct MHD_Response *resp;
	size_t len;
	char *data = buf_take(b, &len);

	if (data == NULL)
		return NULL;
	resp = MHD_create_response_from_buffer(len, data,
					       MHD_RESPMEM_MUST_FREE);
	if (resp == NULL)
		free(data);
	else
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					type);
	return resp;
}

int agent_reply_buf(struct agent_req *r, unsigned status, const char *type,
		    struct buf *b)
{
	struct MHD_Response *resp;

	rc_capture(r, status, type, b->data, b->len);
	resp = buf_response(b, type);
	if (resp == NULL)
		return -ENOMEM;
	return http_queue(r, status, resp);
}

struct MHD_Response *http_empty_response(void)
{
	return MHD_create_response_from_buffer(0, (void *)"",
					       MHD_RESPMEM_PERSISTENT);
}

int agent_reply_empty(struct agent_req *r, unsigned status)
{
	struct MHD_Response *resp = http_empty_response();

	if (resp == NULL)
		return -ENOMEM;
	rc_capture(r, status, NULL, "", 0);
	return http_queue(r, status, resp);
}

/* The longest error body the agent sends: well under the 4096 bytes a
 * client reads of one (doc/protocol-v1.md, errors). */
#define ERROR_BODY_SENT_MAX 1024
/* The longest message formatted for one. */
#define ERROR_MESSAGE_MAX (64 * 1024)

static char *typed_body(const char *code, const char *fmt, va_list ap,
			size_t *len) __attribute__((format(printf, 2, 0)));
static char *typed_bodyf(size_t *len, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "CODE: message" into a heap string (NULL on failure), at most
 * ERROR_BODY_SENT_MAX bytes. */
static char *typed_body(const char *code, const char *fmt, va_list ap,
			size_t *len)
{
	struct buf b = BUF_INIT(ERROR_MESSAGE_MAX);

	if (buf_printf(&b, "%s: ", code) < 0 || buf_vprintf(&b, fmt, ap) < 0) {
		buf_cleanup(&b);
		return NULL;
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
}

static char *typed_bodyf(size_t *len, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *text;

	va_start(ap, fmt);
	text = typed_body(code, fmt, ap, len);
	va_end(ap);
	return text;
}

/* A typed error's text as a response that owns it; NULL (the text freed)
 * on failure, or when there is no text. */
static struct MHD_Response *typed_response(char *text, size_t len)
{
	struct MHD_Response *resp;

	if (text == NULL)
		return NULL;
	resp = http_text_response(text, len, false);
	if (resp == NULL)
		free(text);
	return resp;
}

int agent_reply_error(struct agent_req *r, unsigned status, const char *code,
		      const char *fmt, ...)
{
	struct MHD_Response *resp;
	size_t len = 0;
	va_list ap;
	char *text;

	va_start(ap, fmt);
	text = typed_body(code, fmt, ap, &len);
	va_end(ap);
	resp = typed_response(text, len);
	if (resp == NULL)
		return -ENOMEM;
	rc_capture(r, status, TEXT_PLAIN, text, len);
	return http_queue(r, status, resp);
}

int agent_reply_text(struct agent_req *r, unsigned status, const char *text)
{
	struct MHD_Response *resp =
		http_text_response(text, strlen(text), true);

	if (resp == NULL)
		return -ENOMEM;
	rc_capture(r, status, TEXT_PLAIN, text, strlen(text));
	return http_queue(r, status, resp);
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

/*
 * A file's bytes as the body of an answer whose length is already
 * promised. Read as they are sent rather than with MHD's sendfile: when
 * the file shrinks under the answer, sendfile finds nothing more and the
 * library waits for the rest forever; here the connection ends short, so
 * the client sees an incomplete answer at once.
 */
struct fd_body {
	int fd;
	uint64_t off, len;
};

static ssize_t fd_body_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct fd_body *b = cls;
	ssize_t n;

	if (pos >= b->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max > b->len - pos)
		max = (size_t)(b->len - pos);
	do
		n = pread(b->fd, out, max, (off_t)(b->off + pos));
	while (n < 0 && errno == EINTR);
	return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void fd_body_free(void *cls)
{
	struct fd_body *b = cls;

	close(b->fd);
	free(b);
}

static struct MHD_Response *fd_response(int fd, off_t off, uint64_t len)
{
	struct fd_body *b = malloc(sizeof(*b));
	struct MHD_Response *resp = NULL;

	if (b != NULL) {
		b->fd = fd;
		b->off = (uint64_t)off;
		b->len = len;
		resp = MHD_create_response_from_callback(
			len, HTTP_STREAM_BLOCK, fd_body_read, b, fd_body_free);
	}
	if (resp == NULL) {
		free(b);
		close(fd);
	}
	return resp;
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
		resp = http_empty_response();
	} else {
		resp = fd_response(fd, off, len);
	}
	if (resp == NULL)
		return -ENOMEM;
	if (r->rce != NULL && !r->replied) {
		/* A file's bytes are not copied into the cache: a repeat
		 * learns the request ran, not its answer. */
		rcache_record(r->h->rc, r->rce, status, content_type, NULL, 0);
		rcache_unkeep(r->h->rc, r->rce);
	}
	if (content_type != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					content_type);
	for (i = 0; extra_headers != NULL && extra_headers[i] != NULL &&
		    extra_headers[i + 1] != NULL;
	     i += 2)
		MHD_add_response_header(resp, extra_headers[i],
					extra_headers[i + 1]);
	return http_queue(r, status, resp);
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
	rc = http_queue(r, status, resp);
	if (rc < 0) {
		park_unref(&s->pk);
		return rc;
	}
	if (r->rce != NULL) {
		/* The stream's chunks are the answer a repeat gets. */
		rcache_record(r->h->rc, r->rce, status, content_type, NULL, 0);
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

		clock_deadline_in(&ts, 1000);
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
	rcache_park_add(pk, p, n);
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
	rcache_park_finish(pk);
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

void http_deferred_complete(struct agent_deferred *d, unsigned status,
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
		rcache_record(pk->rc, pk->rce, status, ctype, p, n);
		rcache_park_finish(pk);
	}
	pthread_mutex_unlock(&pk->mu);
}

void agent_deferred_json(struct agent_deferred *d, unsigned status,
			 struct buf *b)
{
	deferred_rc(d, status, "application/json", b->data, b->len);
	http_deferred_complete(d, status, buf_response(b, "application/json"));
}

void agent_deferred_failed(struct agent_deferred *d, const char *op, int err)
{
	struct MHD_Response *resp;
	size_t len = 0;
	char *text;

	text = typed_bodyf(&len, PROTO_ERR_OPERATION_FAILED,
			   "Agent operation '%s' failed: %s", op,
			   strerror(err));
	resp = typed_response(text, len);
	if (resp != NULL)
		deferred_rc(d, 500, TEXT_PLAIN, text, len);
	http_deferred_complete(d, 500, resp);
}

/* The access handler's call after a deferred reply's connection was
 * resumed: send the completion, or close when there is none. */
enum MHD_Result http_deferred_resumed(struct agent_req *r)
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
	return http_queue(r, status, resp) == 0 ? MHD_YES : MHD_NO;
}
