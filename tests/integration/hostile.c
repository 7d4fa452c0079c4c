/* SPDX-License-Identifier: MIT */
/*
 * hostile: what a second local user, or code inside a sandbox, does to a
 * sandbox's agent, for the attack scenarios (t-agent-route.sh).
 *
 *   hostile listen ADDR LOG       stand in for an agent at ADDR: log each
 *                                 connection ("connection") and every byte
 *                                 it sends to LOG, answer each with a
 *                                 forged 200; runs until killed
 *   hostile slowloris ADDR N SECS open N connections that trickle a header
 *                                 byte a second, and every half second ask
 *                                 GET /v1/health on a fresh one; print the
 *                                 slowest answer in ms ("worst MS"), how
 *                                 many health requests got no 200
 *                                 ("failed N") and how many trickling
 *                                 connections the agent still kept at the
 *                                 end ("open N")
 *   hostile raw ADDR              send standard input on one connection and
 *                                 print the answer's status line
 *
 * ADDR is unix:PATH or tcp:PORT (127.0.0.1). A test fixture: bounded by its
 * arguments, no TLS.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static socklen_t addr_of(const char *addr, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un *su = (struct sockaddr_un *)ss;

		su->sun_family = AF_UNIX;
		snprintf(su->sun_path, sizeof(su->sun_path), "%s", addr + 5);
		return sizeof(*su);
	}
	if (strncmp(addr, "tcp:", 4) == 0) {
		struct sockaddr_in *si = (struct sockaddr_in *)ss;

		si->sin_family = AF_INET;
		si->sin_port = htons((uint16_t)atoi(addr + 4));
		si->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof(*si);
	}
	fprintf(stderr, "hostile: bad address '%s'\n", addr);
	exit(2);
}

static int dial(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t sl = addr_of(addr, &ss);
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int do_listen(const char *addr, const char *log)
{
	static const char forged[] = "HTTP/1.1 200 OK\r\nContent-Type: "
				     "application/json\r\nContent-Length: 2\r\n"
				     "Connection: close\r\n\r\n[]";
	struct sockaddr_storage ss;
	socklen_t sl = addr_of(addr, &ss);
	int one = 1, fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	FILE *f = fopen(log, "a");
	int tries = 0, rc;

	if (fd < 0 || f == NULL)
		return 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A port its last holder just let go of may take the kernel a
	 * moment to release: try for up to 10 s. */
	while ((rc = bind(fd, (struct sockaddr *)&ss, sl)) < 0 &&
	       errno == EADDRINUSE && tries++ < 100)
		usleep(100 * 1000);
	if (rc < 0 || listen(fd, 64) < 0) {
		fprintf(stderr, "hostile: cannot listen at %s: %s\n", addr,
			strerror(errno));
		return 1;
	}
	fprintf(f, "listening\n");
	fflush(f);
	for (;;) {
		char buf[4096];
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		ssize_t n;

		if (c < 0)
			continue;
		fprintf(f, "connection\n");
		fflush(f);
		for (;;) {
			struct pollfd p = {c, POLLIN, 0};

			if (poll(&p, 1, 1000) <= 0)
				break;
			n = recv(c, buf, sizeof(buf), 0);
			if (n <= 0)
				break;
			fwrite(buf, 1, (size_t)n, f);
			fflush(f);
			if (memmem(buf, (size_t)n, "\r\n\r\n", 4) != NULL &&
			    send(c, forged, sizeof(forged) - 1, MSG_NOSIGNAL) <
				    0)
				break;
		}
		close(c);
	}
}

/* Status line of one GET /v1/health on a fresh connection; "" if none
 * came within timeout_ms. */
static void health(const char *addr, char *line, size_t size, int timeout_ms)
{
	static const char req[] =
		"GET /v1/health?version=1 HTTP/1.1\r\n"
		"Host: localhost\r\nConnection: close\r\n\r\n";
	long long end = now_ms() + timeout_ms;
	size_t got = 0;
	int fd = dial(addr);

	line[0] = '\0';
	if (fd < 0)
		return;
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0)
		goto out;
	while (got + 1 < size && now_ms() < end) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		if (poll(&p, 1, (int)(end - now_ms())) <= 0)
			break;
		n = recv(fd, line + got, size - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		line[got] = '\0';
		if (strstr(line, "\r\n") != NULL)
			break;
	}
	if (strstr(line, "\r\n") != NULL)
		*strstr(line, "\r\n") = '\0';
	else
		line[0] = '\0';
out:
	close(fd);
}

/* Send the LEN bytes of DATA on the connection *FD (none when it is -1),
 * after reading a byte when PEEK: the connection is closed, and *FD set to
 * -1, when the agent has closed its end or the send fails. */
static void dribble(int *fd, const char *data, size_t len, bool peek)
{
	char c;

	if (*fd < 0)
		return;
	if ((peek && recv(*fd, &c, 1, MSG_DONTWAIT) == 0) ||
	    send(*fd, data, len, MSG_NOSIGNAL) < 0) {
		close(*fd);
		*fd = -1;
	}
}

static int do_slowloris(const char *addr, int n, int secs)
{
	static const char start[] = "GET /v1/health HTTP/1.1\r\nHost: x\r\n";
	long long end = now_ms() + secs * 1000LL, worst = 0, t0, last = 0;
	struct rlimit rl;
	int *fds = calloc((size_t)n, sizeof(*fds));
	int i, open = 0, failed = 0;
	char line[256];

	if (fds == NULL)
		return 1;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur < (rlim_t)n + 64) {
		rl.rlim_cur = (rlim_t)n + 64;
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
			rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (i = 0; i < n; i++) {
		fds[i] = dial(addr);
		if (fds[i] >= 0)
			fcntl(fds[i], F_SETFL, O_NONBLOCK);
		dribble(&fds[i], start, sizeof(start) - 1, false);
	}
	while (now_ms() < end) {
		if (now_ms() - last >= 1000) {
			last = now_ms();
			for (i = 0; i < n; i++)
				dribble(&fds[i], "X", 1, true);
		}
		t0 = now_ms();
		health(addr, line, sizeof(line), 10000);
		if (strncmp(line, "HTTP/1.1 200", 12) != 0)
			failed++;
		if (now_ms() - t0 > worst)
			worst = now_ms() - t0;
		usleep(500 * 1000);
	}
	for (i = 0; i < n; i++) {
		char c;

		if (fds[i] >= 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) != 0)
			open++;
		if (fds[i] >= 0)
			close(fds[i]);
	}
	printf("worst %lld\nfailed %d\nopen %d\n", worst, failed, open);
	free(fds);
	return 0;
}

static int do_raw(const char *addr)
{
	char buf[65536], *eol;
	size_t n = fread(buf, 1, sizeof(buf), stdin), got = 0;
	int fd = dial(addr);

	if (fd < 0 || send(fd, buf, n, MSG_NOSIGNAL) < 0)
		return 1;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t r;

		if (poll(&p, 1, 5000) <= 0)
			break;
		r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got + 1 >= sizeof(buf))
			break;
	}
	buf[got] = '\0';
	eol = strstr(buf, "\r\n");
	if (eol != NULL)
		*eol = '\0';
	printf("%s\n", buf);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && strcmp(argv[1], "listen") == 0)
		return do_listen(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "slowloris") == 0)
		return do_slowloris(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 3 && strcmp(argv[1], "raw") == 0)
		return do_raw(argv[2]);
	fprintf(stderr,
		"usage: hostile listen ADDR LOG | slowloris ADDR N SECS "
		"| raw ADDR\n");
	return 2;
}
