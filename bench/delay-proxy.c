/* SPDX-License-Identifier: MIT */
/*
 * delay-proxy: a TCP proxy on the loopback interface that adds a fixed
 * delay to each direction of every connection it forwards, as netem's
 * delay would on a link, for benchmarks on machines where netem is not
 * available.
 *
 *   delay-proxy [-b BYTES] [-p PORT_FILE] [-v] LISTEN_PORT HOST:PORT|unix:PATH
 *               DELAY_MS
 *
 * It listens on 127.0.0.1:LISTEN_PORT (0: the kernel picks one, written to
 * PORT_FILE and to standard output) and forwards each accepted connection
 * to HOST:PORT, which must be a loopback address. Every chunk read from one
 * side is held for DELAY_MS/2 from the moment it was read, then written to
 * the other side, so a request and its answer gain DELAY_MS together; the
 * order of the bytes is kept, and chunks read while earlier ones wait are
 * in flight at the same time (a pipe, not a stop-and-wait). A connection
 * also pays one round trip before its first bytes reach the target, as a
 * TCP handshake over such a link would. Half-closes are passed on once
 * the bytes before them have been delivered.
 *
 * What is held is bounded per direction (-b, default 64 MiB): when a
 * direction is full the proxy stops reading from its source, and TCP's
 * own flow control pushes back on the sender. Each connection pair has
 * one thread (poll), at most PROXY_MAX_CONNS at a time.
 *
 * It does not limit bandwidth, drop, duplicate or reorder anything, nor
 * model TCP's congestion window: only the delay. SIGTERM or SIGINT stops
 * it: it closes the listener and every connection and exits 0.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PROXY_CHUNK (64 * 1024)
#define PROXY_DEFAULT_MAXBUF ((size_t)64 * 1024 * 1024)
#define PROXY_MAX_CONNS 1024
#define PROXY_CONNECT_TIMEOUT_MS 5000
#define PROXY_MAX_DELAY_MS 600000

/* One chunk in flight: read at some time, due to be written at due_ns. */
struct chunk {
	struct chunk *next;
	int64_t due_ns;
	size_t len;
	size_t off; /* bytes of it already written */
	char data[];
};

/* One direction of a connection pair. */
struct dir {
	int from;
	int to;
	int64_t not_before_ns; /* nothing is due earlier (the handshake) */
	struct chunk *head;
	struct chunk *tail;
	size_t queued; /* bytes held, written or not */
	bool eof; /* the source said it will send nothing more */
	bool shut; /* the destination was told so (or is gone) */
};

struct conn {
	struct conn *next;
	pthread_t thread;
	int client;
	int64_t accepted_ns;
	bool done; /* the thread has finished and may be joined */
};

static struct {
	struct sockaddr_storage target;
	socklen_t target_len;
	int64_t half_delay_ns;
	int64_t rtt_ns;
	size_t maxbuf;
	bool verbose;
	int stop_pipe[2]; /* readable once the proxy stops */
	pthread_mutex_t lock;
	struct conn *conns;
	unsigned nconns;
} px = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_pipe = {-1, -1}};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line on stderr, in a single write so threads never interleave. */
static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "delay-proxy: ");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Forward at once what is due: the delay is the proxy's, not Nagle's. */
static void set_nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
			(const struct sockaddr_in6 *)sa;

		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

/* ---- one direction ------------------------------------------------------ */

/* A read or send of a non-blocking socket failed (not EINTR): 0 when it
 * would block, else -errno. */
static int io_failed(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

static void dir_drop(struct dir *d)
{
	struct chunk *c = d->head, *next;

	for (; c != NULL; c = next) {
		next = c->next;
		free(c);
	}
	d->head = d->tail = NULL;
	d->queued = 0;
}

/*
 * Read what the source has, while the direction has room. Returns 0, or
 * -errno when the source failed (a reset): the caller ends the pair.
 */
static int dir_read(struct dir *d, int64_t now)
{
	char buf[PROXY_CHUNK];
	struct chunk *c;
	size_t room;
	ssize_t n;
	int64_t due;

	while (!d->eof && d->queued < px.maxbuf) {
		room = px.maxbuf - d->queued;
		n = read(d->from, buf, room < sizeof(buf) ? room : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return io_failed();
		if (n == 0) {
			d->eof = true;
			return 0;
		}
		c = malloc(sizeof(*c) + (size_t)n);
		if (c == NULL)
			return -ENOMEM;
		due = now > d->not_before_ns ? now : d->not_before_ns;
		c->next = NULL;
		c->due_ns = due + px.half_delay_ns;
		c->len = (size_t)n;
		c->off = 0;
		memcpy(c->data, buf, (size_t)n);
		if (d->tail != NULL)
			d->tail->next = c;
		else
			d->head = c;
		d->tail = c;
		d->queued += (size_t)n;
	}
	return 0;
}

/*
 * Write the chunks that are due, in order, until the destination is full.
 * Passes a half-close on once everything before it is written. Returns 0,
 * or -errno when the destination failed.
 */
static int dir_flush(struct dir *d, int64_t now)
{
	struct chunk *c;
	ssize_t n;

	while ((c = d->head) != NULL && c->due_ns <= now) {
		n = send(d->to, c->data + c->off, c->len - c->off,
			 MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return io_failed();
		c->off += (size_t)n;
		if (c->off < c->len)
			continue;
		d->head = c->next;
		if (d->head == NULL)
			d->tail = NULL;
		d->queued -= c->len;
		free(c);
	}
	if (d->eof && d->head == NULL && !d->shut) {
		(void)shutdown(d->to, SHUT_WR);
		d->shut = true;
	}
	return 0;
}

/* True when the direction has a due chunk its destination did not take. */
static bool dir_blocked(const struct dir *d, int64_t now)
{
	return d->head != NULL && d->head->due_ns <= now;
}

/* ---- one connection pair ---------------------------------------------- */

/*
 * Connect to the target within PROXY_CONNECT_TIMEOUT_MS. Returns the
 * non-blocking socket, or -errno.
 */
static int connect_target(void)
{
	struct pollfd pfd;
	socklen_t len = sizeof(int);
	int fd, rc, soerr = 0;

	fd = socket(px.target.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = set_nonblock(fd);
	if (rc < 0)
		goto fail;
	if (connect(fd, (struct sockaddr *)&px.target, px.target_len) == 0)
		goto out;
	if (errno != EINPROGRESS) {
		rc = -errno;
		goto fail;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	do {
		rc = poll(&pfd, 1, PROXY_CONNECT_TIMEOUT_MS);
	} while (rc < 0 && errno == EINTR);
	if (rc == 0) {
		rc = -ETIMEDOUT;
		goto fail;
	}
	if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) {
		rc = -errno;
		goto fail;
	}
	if (soerr != 0) {
		rc = -soerr;
		goto fail;
	}
out:
	set_nodelay(fd);
	return fd;
fail:
	close(fd);
	return rc;
}

/* The socket d writes to is gone (reset, or closed by its peer while
 * bytes were still owed to it): what was owed is dropped. What that
 * socket already sent is still delivered by the other direction. */
static void dir_lost(struct dir *d)
{
	dir_drop(d);
	d->eof = true;
	d->shut = true;
}

/* poll(2) timeout until the earliest chunk that is not due yet. */
static int next_timeout(const struct dir *d, size_t n, int64_t now,
			struct timespec *ts)
{
	int64_t best = -1, wait;
	size_t i;

	for (i = 0; i < n; i++) {
		if (d[i].head == NULL || d[i].head->due_ns <= now)
			continue;
		wait = d[i].head->due_ns - now;
		if (best < 0 || wait < best)
			best = wait;
	}
	if (best < 0)
		return -1;
	ts->tv_sec = best / 1000000000;
	ts->tv_nsec = best % 1000000000;
	return 0;
}

static void pump(struct conn *cn, int server)
{
	/* d[0]: client to server, d[1]: server to client; pfd[i] is the
	 * socket d[i] reads from and d[1 - i] writes to. */
	struct dir d[2] = {
		{.from = cn->client, .to = server},
		{.from = server, .to = cn->client},
	};
	struct pollfd pfd[3];
	struct timespec ts;
	int64_t now;
	int rc = 0, i;

	/* The client's connect() returned before a handshake over the slow
	 * link could have: its first bytes pay that round trip here. */
	d[0].not_before_ns = cn->accepted_ns + px.rtt_ns;
	for (;;) {
		now = mono_ns();
		for (i = 0; i < 2; i++) {
			rc = dir_flush(&d[i], now);
			if (rc < 0)
				dir_lost(&d[i]);
		}
		if (d[0].shut && d[1].shut)
			break;
		for (i = 0; i < 2; i++) {
			pfd[i].fd = d[i].from;
			pfd[i].events = 0;
			pfd[i].revents = 0;
		}
		for (i = 0; i < 2; i++) {
			if (!d[i].eof && d[i].queued < px.maxbuf)
				pfd[i].events |= POLLIN;
			if (dir_blocked(&d[i], now))
				pfd[1 - i].events |= POLLOUT;
		}
		/* A socket nothing is wanted from is left out, or its
		 * POLLHUP would spin the loop; a failure shows at the
		 * next read or write. */
		for (i = 0; i < 2; i++)
			if (pfd[i].events == 0)
				pfd[i].fd = -1;
		pfd[2].fd = px.stop_pipe[0];
		pfd[2].events = POLLIN;
		rc = next_timeout(d, 2, now, &ts);
		rc = ppoll(pfd, 3, rc == 0 ? &ts : NULL, NULL);
		if (rc < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		rc = 0;
		if (pfd[2].revents != 0)
			break;
		now = mono_ns();
		for (i = 0; i < 2 && rc == 0; i++) {
			if (!(pfd[i].events & POLLIN) ||
			    !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			rc = dir_read(&d[i], now);
			if (rc < 0 && rc != -ENOMEM) {
				/* A reset: nothing more comes from it, and
				 * nothing more can go to it. */
				d[i].eof = true;
				dir_lost(&d[1 - i]);
				rc = 0;
			}
		}
		if (rc < 0)
			break;
	}
	if (rc < 0)
		say("connection ended: %s", strerror(-rc));
	dir_drop(&d[0]);
	dir_drop(&d[1]);
}

static void *conn_main(void *arg)
{
	struct conn *cn = arg;
	int server;

	server = connect_target();
	if (server < 0) {
		say("cannot connect to the target: %s", strerror(-server));
	} else {
		pump(cn, server);
		close(server);
	}
	close(cn->client);
	cn->client = -1;
	pthread_mutex_lock(&px.lock);
	cn->done = true;
	pthread_mutex_unlock(&px.lock);
	return NULL;
}

/* Join the threads that finished (all of them when wait_all). */
static void reap(bool wait_all)
{
	struct conn **pp, *cn;
	bool done;

	for (;;) {
		pthread_mutex_lock(&px.lock);
		for (pp = &px.conns; (cn = *pp) != NULL; pp = &cn->next)
			if (cn->done || wait_all)
				break;
		if (cn != NULL) {
			*pp = cn->next;
			px.nconns--;
		}
		pthread_mutex_unlock(&px.lock);
		if (cn == NULL)
			return;
		pthread_join(cn->thread, NULL);
		pthread_mutex_lock(&px.lock);
		done = cn->done;
		pthread_mutex_unlock(&px.lock);
		if (!done)
			say("a connection thread did not finish");
		free(cn);
	}
}

static void accept_one(int lfd)
{
	struct conn *cn;
	sigset_t all, old;
	int fd, rc;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	reap(false);
	if (px.nconns >= PROXY_MAX_CONNS) {
		say("too many connections (%d): refusing one", PROXY_MAX_CONNS);
		close(fd);
		return;
	}
	set_nodelay(fd);
	cn = calloc(1, sizeof(*cn));
	if (cn == NULL) {
		close(fd);
		return;
	}
	cn->client = fd;
	cn->accepted_ns = mono_ns();
	/* The threads inherit a mask with every signal blocked: the main
	 * thread takes them through its signalfd. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&cn->thread, NULL, conn_main, cn);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		say("cannot start a thread: %s", strerror(rc));
		close(fd);
		free(cn);
		return;
	}
	pthread_mutex_lock(&px.lock);
	cn->next = px.conns;
	px.conns = cn;
	px.nconns++;
	pthread_mutex_unlock(&px.lock);
	if (px.verbose)
		say("connection %u accepted", px.nconns);
}

/* ---- setup ------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: delay-proxy [-b BYTES] [-p PORT_FILE] [-v] "
		"LISTEN_PORT HOST:PORT DELAY_MS\n"
		"\n"
		"Forward connections to 127.0.0.1:LISTEN_PORT to HOST:PORT (a "
		"loopback\n"
		"address), holding every chunk DELAY_MS/2 in each direction, "
		"so "
		"a round\n"
		"trip gains DELAY_MS. LISTEN_PORT 0 lets the kernel choose; "
		"the "
		"port is\n"
		"printed on standard output.\n"
		"\n"
		"  -b BYTES      bytes held per direction of a connection "
		"(default 64M;\n"
		"                K, M, G suffixes)\n"
		"  -p PORT_FILE  write the listening port there once "
		"listening\n"
		"  -v            log each connection\n");
}

/* A decimal number in [min, max], with an optional K/M/G suffix when
 * suffix is true. Returns 0 or -EINVAL. */
static int parse_num(const char *s, long long min, long long max, bool suffix,
		     long long *out)
{
	unsigned long long mult = 1;
	long long v;
	char *end;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s)
		return -EINVAL;
	if (suffix && *end != '\0' && end[1] == '\0') {
		if (*end == 'K' || *end == 'k')
			mult = 1024;
		else if (*end == 'M' || *end == 'm')
			mult = 1024 * 1024;
		else if (*end == 'G' || *end == 'g')
			mult = 1024 * 1024 * 1024;
		else
			return -EINVAL;
		end++;
	}
	if (*end != '\0' || v > max / (long long)mult)
		return -EINVAL;
	v *= (long long)mult;
	if (v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* HOST:PORT or [V6]:PORT, resolved to a loopback address, or unix:PATH
 * (an agent on a Unix socket). */
static int parse_target(const char *arg)
{
	struct addrinfo hints, *res = NULL;
	char host[256];
	const char *port;
	size_t hlen;
	int rc;

	if (strncmp(arg, "unix:", 5) == 0) {
		struct sockaddr_un *su = (struct sockaddr_un *)&px.target;
		const char *path = arg + 5, *slash = strrchr(path, '/');
		char dir[4096];
		int dfd, n;

		memset(su, 0, sizeof(*su));
		su->sun_family = AF_UNIX;
		px.target_len = sizeof(*su);
		if (*path != '\0' && strlen(path) < sizeof(su->sun_path)) {
			memcpy(su->sun_path, path, strlen(path) + 1);
			return 0;
		}
		/* Too long for an address: through its directory, held
		 * open for the proxy's life. */
		if (slash == NULL || slash == path ||
		    (size_t)(slash - path) >= sizeof(dir))
			return -EINVAL;
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -errno;
		n = snprintf(su->sun_path, sizeof(su->sun_path),
			     "/proc/self/fd/%d/%s", dfd, slash + 1);
		if (n < 0 || (size_t)n >= sizeof(su->sun_path))
			return -EINVAL;
		return 0;
	}

	if (arg[0] == '[') {
		port = strstr(arg, "]:");
		if (port == NULL)
			return -EINVAL;
		hlen = (size_t)(port - arg - 1);
		memcpy(host, arg + 1, hlen < sizeof(host) ? hlen : 0);
		port += 2;
	} else {
		port = strrchr(arg, ':');
		if (port == NULL)
			return -EINVAL;
		hlen = (size_t)(port - arg);
		memcpy(host, arg, hlen < sizeof(host) ? hlen : 0);
		port++;
	}
	if (hlen == 0 || hlen >= sizeof(host) || *port == '\0')
		return -EINVAL;
	host[hlen] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		say("%s: %s", arg, gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EINVAL;
	if (!is_loopback(res->ai_addr)) {
		say("%s: not a loopback address", arg);
		goto out;
	}
	memcpy(&px.target, res->ai_addr, res->ai_addrlen);
	px.target_len = res->ai_addrlen;
	rc = 0;
out:
	freeaddrinfo(res);
	return rc;
}

static int listen_on(int port, int *bound)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd, one = 1, rc;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*bound = ntohs(sin.sin_port);
	return fd;
}

/* Write the port through a temporary file and a rename, so a reader
 * never sees a partial number. */
static int write_port_file(const char *path, int port)
{
	char *tmp = NULL;
	FILE *f;
	int rc = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	f = fopen(tmp, "w");
	if (f == NULL) {
		rc = -errno;
		goto out;
	}
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0 || rename(tmp, path) < 0) {
		rc = -errno;
		unlink(tmp);
	}
out:
	free(tmp);
	return rc;
}

int main(int argc, char **argv)
{
	const char *port_file = NULL;
	long long lport, delay, maxbuf = (long long)PROXY_DEFAULT_MAXBUF;
	struct pollfd pfd[2];
	struct signalfd_siginfo si;
	sigset_t sigs;
	int opt, lfd = -1, sfd = -1, bound = 0, status = 1, rc;

	while ((opt = getopt(argc, argv, "b:p:vh")) != -1) {
		switch (opt) {
		case 'b':
			if (parse_num(optarg, 1, (long long)1 << 40, true,
				      &maxbuf) < 0) {
				say("-b %s: not a size", optarg);
				return 2;
			}
			break;
		case 'p':
			port_file = optarg;
			break;
		case 'v':
			px.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 3) {
		usage(stderr);
		return 2;
	}
	if (parse_num(argv[optind], 0, 65535, false, &lport) < 0 ||
	    parse_num(argv[optind + 2], 0, PROXY_MAX_DELAY_MS, false, &delay) <
		    0) {
		usage(stderr);
		return 2;
	}
	if (parse_target(argv[optind + 1]) < 0) {
		say("%s: want a loopback HOST:PORT or unix:PATH",
		    argv[optind + 1]);
		return 2;
	}
	px.maxbuf = (size_t)maxbuf;
	px.rtt_ns = delay * 1000000;
	px.half_delay_ns = px.rtt_ns / 2;

	/* SIGTERM and SIGINT arrive through a signalfd; SIGPIPE is never
	 * wanted (send uses MSG_NOSIGNAL, this is for the rest). */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0 ||
	    (sfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0 ||
	    pipe2(px.stop_pipe, O_CLOEXEC) < 0) {
		say("setup: %s", strerror(errno));
		goto out;
	}
	lfd = listen_on((int)lport, &bound);
	if (lfd < 0) {
		say("cannot listen on 127.0.0.1:%lld: %s", lport,
		    strerror(-lfd));
		goto out;
	}
	if (port_file != NULL && (rc = write_port_file(port_file, bound)) < 0) {
		say("%s: %s", port_file, strerror(-rc));
		goto out;
	}
	printf("%d\n", bound);
	fflush(stdout);
	say("listening on 127.0.0.1:%d, forwarding to %s, %lld ms round "
	    "trip",
	    bound, argv[optind + 1], delay);

	pfd[0].fd = lfd;
	pfd[0].events = POLLIN;
	pfd[1].fd = sfd;
	pfd[1].events = POLLIN;
	for (;;) {
		rc = poll(pfd, 2, 1000);
		if (rc < 0 && errno != EINTR) {
			say("poll: %s", strerror(errno));
			goto out;
		}
		if (rc > 0 && (pfd[1].revents & POLLIN))
			break;
		if (rc > 0 && (pfd[0].revents & POLLIN))
			accept_one(lfd);
		else
			reap(false);
	}
	if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && px.verbose)
		say("signal %u: stopping", si.ssi_signo);
	status = 0;
out:
	if (lfd >= 0)
		close(lfd);
	if (px.stop_pipe[1] >= 0 && write(px.stop_pipe[1], "x", 1) < 0)
		say("cannot stop the connections: %s", strerror(errno));
	reap(true);
	if (port_file != NULL && bound != 0)
		unlink(port_file);
	if (sfd >= 0)
		close(sfd);
	if (px.stop_pipe[0] >= 0) {
		close(px.stop_pipe[0]);
		close(px.stop_pipe[1]);
	}
	return status;
}
