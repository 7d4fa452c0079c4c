/* SPDX-License-Identifier: MIT */
/*
 * http: the agent's HTTP/1.1 server on libmicrohttpd 0.9.7x (http.h). This
 * file starts and stops it: the listening socket (TCP or a Unix socket of
 * its own), the library's daemon, the connections' limit and deadlines,
 * and the hang-up watcher that also drives the reply cache's clock. What
 * a request gets is http_access.c's, the answers http_reply.c's, the reply
 * cache http_cache.c's; http_i.h says how they share the server and the
 * library's rules they are built around. The routes are routes.c's: this
 * server does not know what any route means.
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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/http_i.h"
#include "common/clock.h"
#include "common/fdio.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/unixaddr.h"
#include "common/xalloc.h"

/* MHD's own connection limit is the agent's plus this per worker: room
 * for a connection that arrives at the limit to be taken in while an idle
 * or slow one makes way for it (see "connections" below). */
#define HTTP_ADMIT_SLACK_PER_THREAD 4
/* Per-connection memory: headers, and the read and chunk buffers. */
#define HTTP_CONNECTION_MEMORY (128U * 1024)
/* How long agent_http_stop waits for parked connections to let go. */
#define HTTP_STOP_WAIT_MS 5000

/* ---- the hang-up watcher ------------------------------------------------ */

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
		rcache_tick(h->rc);
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

	for (t = dlist_item(h->tracks.first, struct conn_track, link);
	     t != NULL; t = dlist_item(t->link.next, struct conn_track, link))
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
		dlist_push_front(&h->tracks, &t->link);
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
	dlist_remove(&h->tracks, &t->link);
	if (!t->shut)
		h->nlive--;
	pthread_mutex_unlock(&h->cmu);
	fdio_close(t->fd);
	free(t);
}

void http_track_phase(struct agent_http *h, struct MHD_Connection *conn,
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
	http_track_phase(cls, conn, CP_RECEIVING);
	return NULL;
}

/* Shut down the connections past their deadlines (the watcher's tick). */
static void track_tick(struct agent_http *h)
{
	long long now = clock_mono_ms();
	struct conn_track *t;
	unsigned n = 0;

	pthread_mutex_lock(&h->cmu);
	for (t = dlist_item(h->tracks.first, struct conn_track, link);
	     t != NULL; t = dlist_item(t->link.next, struct conn_track, link)) {
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
		} else if (*r == '%' && (hi = hex_digit(r[1])) >= 0 &&
			   (lo = hex_digit(r[2])) >= 0) {
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
	fdio_close(fd);
	freeaddrinfo(ai);
	return rc;
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

	rc = unixaddr_fill(cfg->socket_path, &sa, &dirfd);
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
	fdio_close(fd);
	fdio_close(dirfd);
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
/* The connection bounds of cfg, defaults for the zeros. */
static void limits_set(struct agent_http *h, const struct agent_config *cfg)
{
	h->limit = cfg->max_connections > 0 ? cfg->max_connections
					    : AGENT_HTTP_MAX_CONNECTIONS;
	h->idle_ms =
		1000LL * (cfg->idle_timeout_s > 0 ? cfg->idle_timeout_s
						  : AGENT_HTTP_IDLE_TIMEOUT_S);
	h->request_ms = 1000LL * (cfg->request_timeout_s > 0
					  ? cfg->request_timeout_s
					  : AGENT_HTTP_REQUEST_TIMEOUT_S);
}

static int watcher_start(struct agent_http *h)
{
	struct epoll_event ev;
	int rc;

	h->watch_epfd = epoll_create1(EPOLL_CLOEXEC);
	h->watch_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->watch_epfd < 0 || h->watch_wake < 0)
		return -errno;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = 0;
	if (epoll_ctl(h->watch_epfd, EPOLL_CTL_ADD, h->watch_wake, &ev) < 0)
		return -errno;
	rc = -pthread_create(&h->watcher, NULL, watcher_main, h);
	if (rc == 0)
		h->watcher_started = true;
	return rc;
}

static int daemon_start(struct agent_http *h, unsigned threads)
{
	h->d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			MHD_USE_TURBO,
		0, NULL, NULL, http_on_request, h,
		/* First, so the library's own start-up messages use it. */
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
		MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
		MHD_OPTION_THREAD_POOL_SIZE, threads,
		MHD_OPTION_CONNECTION_LIMIT,
		h->limit + HTTP_ADMIT_SLACK_PER_THREAD * threads,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(h->idle_ms / 1000),
		MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		(size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
		http_on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
		on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
		MHD_OPTION_UNESCAPE_CALLBACK, unescape, h,
		MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
	if (h->d == NULL) {
		log_error("cannot start the HTTP server");
		return -EIO;
	}
	return 0;
}

/* Stop the watcher and free what start made (each part only if made). */
static void server_free(struct agent_http *h)
{
	uint64_t one = 1;

	if (h->watcher_started) {
		atomic_store(&h->watch_stop, true);
		if (write(h->watch_wake, &one, sizeof(one)) < 0)
			log_debug("http: eventfd write: %s", strerror(errno));
		pthread_join(h->watcher, NULL);
	}
	fdio_close(h->watch_epfd);
	fdio_close(h->watch_wake);
	/* Every connection is closed: no park holds an entry any more. */
	rcache_free(h->rc);
	pthread_mutex_destroy(&h->cmu);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

int agent_http_start(struct agent *a, unsigned *port_out)
{
	struct agent_http *h = xcalloc(1, sizeof(*h));
	unsigned threads = a->cfg.threads > 0 ? a->cfg.threads : 4;
	unsigned port = 0;
	int rc;

	h->a = a;
	h->listen_fd = -1;
	h->watch_epfd = -1;
	h->watch_wake = -1;
	pthread_mutex_init(&h->mu, NULL);
	pthread_mutex_init(&h->cmu, NULL);
	limits_set(h, &a->cfg);
	rc = rcache_init(h);
	if (rc < 0)
		goto fail;
	if (a->cfg.socket_path != NULL)
		rc = listen_unix(h, &a->cfg);
	else
		rc = listen_tcp(&a->cfg, &h->listen_fd, &port);
	if (rc == 0)
		rc = watcher_start(h);
	if (rc == 0)
		rc = daemon_start(h, threads);
	if (rc < 0)
		goto fail;
	a->http = h;
	*port_out = port;
	return 0;
fail:
	fdio_close(h->listen_fd);
	unlink_socket(h);
	server_free(h);
	return rc;
}

/* Resume every suspended park; returns how many are still registered. */
static size_t stop_sweep(struct agent_http *h)
{
	struct park **list;
	struct park *pk;
	size_t n = 0, i;

	pthread_mutex_lock(&h->mu);
	for (pk = dlist_item(h->parks.first, struct park, link); pk != NULL;
	     pk = dlist_item(pk->link.next, struct park, link))
		n++;
	list = xcalloc(n + 1, sizeof(*list));
	n = 0;
	for (pk = dlist_item(h->parks.first, struct park, link); pk != NULL;
	     pk = dlist_item(pk->link.next, struct park, link)) {
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
	for (pk = dlist_item(h->parks.first, struct park, link);
	     pk != NULL && !any;
	     pk = dlist_item(pk->link.next, struct park, link)) {
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
	log_debug("http: connections: %lu made way at the limit, %lu past "
		  "their deadline",
		  h->evicted, h->expired);
	a->http = NULL;
	server_free(h);
}
