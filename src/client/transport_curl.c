/* SPDX-License-Identifier: MIT */
/*
 * transport_curl: the curl engine (see transport_curl.h). Each exchange
 * runs on a pooled (multi, easy) pair through xfer_run, so that every
 * phase has its own deadline and the core can stop after the response
 * headers: a 401 is held unread (the write callback pauses the transfer)
 * while the credential is re-read, and its body is read only after the
 * slot lock is released.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/sleep.h"
#include "common/xalloc.h"
#include "client/transport_curl.h"
#include "client/transport_i.h"

_Static_assert(XFER_ERROR_SIZE >= CURL_ERROR_SIZE,
	       "struct xfer holds libcurl's error text");

/* A pooled libcurl handle pair. The multi owns the connection cache, so a
 * handle keeps its TCP connection alive between requests. */
struct xfer_handle {
	CURLM *multi;
	CURL *easy;
	struct xfer_handle *next;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_ALL);
}

int xfer_global_init(void)
{
	pthread_once(&curl_once, curl_init_once);
	return curl_init_rc == CURLE_OK ? 0 : -EIO;
}

/* ---- pools ----------------------------------------------------------------- */

static void handle_free(struct xfer_handle *h)
{
	if (h == NULL)
		return;
	curl_multi_cleanup(h->multi);
	curl_easy_cleanup(h->easy);
	free(h);
}

void xfer_pool_init(struct xfer_pool *p, unsigned max)
{
	pthread_mutex_init(&p->lock, NULL);
	p->idle = NULL;
	p->n = 0;
	p->max = max;
}

void xfer_pool_cleanup(struct xfer_pool *p)
{
	struct xfer_handle *h, *next;

	for (h = p->idle; h != NULL; h = next) {
		next = h->next;
		handle_free(h);
	}
	p->idle = NULL;
	p->n = 0;
	pthread_mutex_destroy(&p->lock);
}

struct xfer_handle *xfer_pool_take(struct xfer_pool *p)
{
	struct xfer_handle *h;

	pthread_mutex_lock(&p->lock);
	h = p->idle;
	if (h != NULL) {
		p->idle = h->next;
		p->n--;
	}
	pthread_mutex_unlock(&p->lock);
	if (h != NULL)
		return h;
	h = xcalloc(1, sizeof(*h));
	h->multi = curl_multi_init();
	h->easy = curl_easy_init();
	if (h->multi == NULL || h->easy == NULL)
		fatalx("libcurl could not make a handle");
	return h;
}

void xfer_pool_give(struct xfer_pool *p, struct xfer_handle *h)
{
	if (h == NULL)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->n < p->max) {
		h->next = p->idle;
		p->idle = h;
		p->n++;
		h = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	handle_free(h);
}

/* ---- libcurl's callbacks ----------------------------------------------------- */

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
		if (x->errbody.len + len > XFER_ERROR_BODY_MAX) {
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

long xfer_tcp_peer_uid(const char *peer_ip, int peer_port, const char *local_ip,
		       int local_port)
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
	while (listener < 0 && fgets(line, sizeof(line), f) != NULL) {
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
	return listener >= 0 ? listener : found;
}

static int xfer_check_listener(void *ud, char *peer_ip, char *local_ip,
			       int peer_port, int local_port)
{
	struct xfer *x = ud;
	long uid = -1;

	if (x->new_sock < 0)
		return CURL_PREREQFUNC_OK; /* checked when it was new */
	if (x->unix_socket) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (getsockopt(x->new_sock, SOL_SOCKET, SO_PEERCRED, &cred,
			       &len) == 0)
			uid = (long)cred.uid;
	} else {
		long long until = clock_mono_ms() + 100;

		/* Neither end seen yet (the file is read while it changes):
		 * a moment more. */
		while ((uid = xfer_tcp_peer_uid(peer_ip, peer_port, local_ip,
						local_port)) < 0 &&
		       clock_mono_ms() < until)
			sleep_ms(2);
	}
	x->new_sock = -1;
	if (uid == (long)x->owner || uid == 0)
		return CURL_PREREQFUNC_OK;
	if (uid < 0)
		snprintf(x->foreign, sizeof(x->foreign),
			 "who listens at %s could not be told: nothing was "
			 "sent",
			 x->route);
	else
		snprintf(x->foreign, sizeof(x->foreign),
			 "the listener at %s runs as uid %ld, not as the "
			 "agent's user (uid %ld): nothing was sent",
			 x->route, uid, (long)x->owner);
	return CURL_PREREQFUNC_ABORT;
}

/* ---- one exchange ------------------------------------------------------------ */

void xfer_init(struct xfer *x, struct xfer_handle *h,
	       const struct transport_req *req, struct transport_resp *resp)
{
	memset(x, 0, sizeof(*x));
	x->h = h;
	x->req = req;
	x->resp = resp;
	x->phase = XFER_HOLD;
	x->new_sock = -1;
	buf_init(&x->errbody, XFER_ERROR_BODY_MAX + 1);
	resp->status = 0;
	resp->full_size = UINT64_MAX;
	resp->body.max =
		req->max_body ? req->max_body : TRANSPORT_DEFAULT_MAX_BODY;
}

/* The request's header lines, its own and ours. */
static int setup_headers(struct xfer *x, const struct xfer_spec *spec)
{
	char line[160];
	size_t i;

	if (spec->auth != NULL)
		x->hdrs = curl_slist_append(x->hdrs, spec->auth);
	for (i = 0; spec->headers != NULL && spec->headers[i] != NULL; i++)
		x->hdrs = curl_slist_append(x->hdrs, spec->headers[i]);
	if (spec->key != NULL) {
		snprintf(line, sizeof(line), "%s: %s",
			 PROTO_HDR_IDEMPOTENCY_KEY, spec->key);
		x->hdrs = curl_slist_append(x->hdrs, line);
	}
	if (spec->client_id != NULL && spec->client_id[0] != '\0') {
		snprintf(line, sizeof(line), "%s: %s", PROTO_HDR_CLIENT,
			 spec->client_id);
		x->hdrs = curl_slist_append(x->hdrs, line);
	}
	if (spec->content_type != NULL) {
		snprintf(line, sizeof(line), "Content-Type: %s",
			 spec->content_type);
		x->hdrs = curl_slist_append(x->hdrs, line);
	} else {
		x->hdrs = curl_slist_append(x->hdrs, "Content-Type:");
	}
	/* One round trip: no "Expect: 100-continue" for large bodies. */
	x->hdrs = curl_slist_append(x->hdrs, "Expect:");
	return x->hdrs == NULL ? -ENOMEM : 0;
}

/* Where the exchange goes: the socket, who must listen there, proxies,
 * trust and pinned names. */
static void setup_peer(struct xfer *x, const struct xfer_spec *spec)
{
	CURL *e = x->h->easy;
	struct curl_slist *pins = NULL;
	size_t i;

	if (spec->unix_path != NULL)
		curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, spec->unix_path);
	if (spec->check_owner) {
		x->check_owner = true;
		x->unix_socket = spec->unix_path != NULL;
		x->owner = spec->owner;
		x->route = spec->route;
		curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION,
				 xfer_open_socket);
		curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
		curl_easy_setopt(e, CURLOPT_PREREQFUNCTION,
				 xfer_check_listener);
		curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
	}
	if (spec->direct) {
		/* The agent is reached directly, never through a proxy
		 * (doc/transport-rules.md 2); provider requests take the
		 * environment's proxy settings, as the Azure SDKs do
		 * (rules 10). */
		curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
		curl_easy_setopt(e, CURLOPT_PROXY, "");
	}
	if (spec->ca_file != NULL)
		curl_easy_setopt(e, CURLOPT_CAINFO, spec->ca_file);
	for (i = 0; spec->resolve != NULL && spec->resolve[i] != NULL; i++)
		pins = curl_slist_append(pins, spec->resolve[i]);
	if (pins != NULL) {
		/* The list must outlive the transfer; xfer_finish frees it. */
		curl_easy_setopt(e, CURLOPT_RESOLVE, pins);
		x->pins = pins;
	}
}

int xfer_setup(struct xfer *x, const struct xfer_spec *spec)
{
	CURL *e = x->h->easy;

	curl_easy_reset(e);
	x->errbuf[0] = '\0';
	if (setup_headers(x, spec) < 0)
		return -ENOMEM;
	curl_easy_setopt(e, CURLOPT_URL, spec->url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	setup_peer(x, spec);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, spec->connect_ms);
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
	/* libcurl sends a request again, silently, when a kept-alive
	 * connection turns out dead before any answer byte; a fresh
	 * connection is never retried that way. So a request that must not
	 * reach the agent twice unknowingly goes on a fresh one
	 * (doc/transport-rules.md 8). */
	if (spec->fresh)
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);

	if (strcmp(spec->method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else {
		if (strcmp(spec->method, "POST") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST,
					 spec->method);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)spec->body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS,
				 spec->body ? spec->body : "");
	}
	if (curl_multi_add_handle(x->h->multi, e) != CURLM_OK)
		return -EIO;
	return 0;
}

void xfer_finish(struct xfer *x)
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

/* A refusal of the body's own (over its bound, or the sink's), if any. */
static enum xfer_outcome body_refused(const struct xfer *x)
{
	if (x->errbody_over)
		return XFER_TOO_BIG;
	if (x->sink_err == -EFBIG && x->req->sink == NULL)
		return XFER_TOO_BIG;
	if (x->sink_err != 0)
		return XFER_SINK;
	return XFER_OK;
}

/* What a finished transfer came to (its body was not refused). */
static enum xfer_outcome finished(const struct xfer *x)
{
	if (x->foreign[0] != '\0')
		return XFER_FOREIGN;
	if (x->result == CURLE_OK)
		return x->headers_done ? XFER_OK : XFER_BROKEN;
	if (!x->headers_done && curl_is_connect_error((CURLcode)x->result))
		return XFER_CONNECT;
	return XFER_BROKEN;
}

enum xfer_outcome xfer_run(struct xfer *x, long long deadline, long idle_ms)
{
	CURLM *m = x->h->multi;
	enum xfer_outcome o;

	x->last_byte_ms = clock_mono_ms();
	for (;;) {
		CURLMsg *msg;
		int running = 0, left;
		long long now, wait;

		if (tr_op_cancelled()) {
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
		o = body_refused(x);
		if (o != XFER_OK)
			return o;
		if (x->done)
			return finished(x);
		now = clock_mono_ms();
		if (now >= deadline || (idle_ms > 0 && x->headers_done &&
					now - x->last_byte_ms >= idle_ms)) {
			tr_op_mark_timed_out();
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

void xfer_resume_as(struct xfer *x, enum xfer_phase phase)
{
	x->phase = phase;
	if (x->paused) {
		x->paused = false;
		curl_easy_pause(x->h->easy, CURLPAUSE_CONT);
	}
}
