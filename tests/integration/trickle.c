/* SPDX-License-Identifier: MIT */
/*
 * trickle: a loopback TCP relay for the deadline scenarios (t-deadline.sh).
 *
 *   trickle PORT_FILE TARGET_PORT|unix:PATH CONTROL_FILE
 *
 * Listens on 127.0.0.1 (a kernel-chosen port, written to PORT_FILE) and
 * relays each connection to 127.0.0.1:TARGET_PORT, or to the Unix socket
 * at PATH. Requests go through as
 * they come. Answers are HTTP/1.1: their status line and headers go through
 * at once; their body goes through at once too, unless CONTROL_FILE exists
 * when the body starts: then it is sent one byte a second, as an agent
 * that is alive but barely answering would. Bodies are delimited by
 * Content-Length; a body without one (chunked) is relayed to the end of the
 * connection.
 *
 * A test fixture: a thread per connection, no TLS, runs until killed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static unsigned target_port;
static const char *target_path; /* a Unix socket instead of a port */
static const char *control;

struct pair {
	int client, server;
};

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The answer's body length from its header block (-1: none given, read
 * to the end; 0 for statuses without a body). */
static long long body_length(const char *head)
{
	const char *p;
	int status = 0;

	if (sscanf(head, "HTTP/1.%*d %d", &status) == 1 &&
	    (status < 200 || status == 204 || status == 304))
		return 0;
	for (p = head; (p = strchr(p, '\n')) != NULL;) {
		p++;
		if (strncasecmp(p, "Content-Length:", 15) == 0)
			return strtoll(p + 15, NULL, 10);
	}
	return -1;
}

/* Server to client, with the bodies slowed down when asked. */
static void *answers_main(void *arg)
{
	struct pair *pr = arg;
	char head[65536], c;
	size_t hlen = 0;
	long long left = 0;
	bool in_body = false, slow = false;

	for (;;) {
		ssize_t n = read(pr->server, &c, 1);

		if (n <= 0)
			break;
		if (!in_body) {
			if (write_all(pr->client, &c, 1) < 0)
				break;
			if (hlen + 1 < sizeof(head))
				head[hlen++] = c;
			head[hlen] = '\0';
			if (hlen >= 4 &&
			    strcmp(head + hlen - 4, "\r\n\r\n") == 0) {
				left = body_length(head);
				hlen = 0;
				if (left != 0) {
					in_body = true;
					slow = access(control, F_OK) == 0;
				}
			}
			continue;
		}
		if (slow)
			sleep(1);
		if (write_all(pr->client, &c, 1) < 0)
			break;
		if (left > 0 && --left == 0)
			in_body = false;
	}
	shutdown(pr->client, SHUT_RDWR);
	shutdown(pr->server, SHUT_RDWR);
	return NULL;
}

static void *conn_main(void *arg)
{
	struct pair *pr = arg;
	struct sockaddr_in sa;
	pthread_t answers;
	char chunk[65536];

	struct sockaddr_un su;
	struct sockaddr *to = (struct sockaddr *)&sa;
	socklen_t tolen = sizeof(sa);

	if (target_path != NULL) {
		memset(&su, 0, sizeof(su));
		su.sun_family = AF_UNIX;
		snprintf(su.sun_path, sizeof(su.sun_path), "%s", target_path);
		to = (struct sockaddr *)&su;
		tolen = sizeof(su);
	}
	pr->server = socket(to->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)target_port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (pr->server < 0 || connect(pr->server, to, tolen) < 0 ||
	    pthread_create(&answers, NULL, answers_main, pr) != 0) {
		close(pr->client);
		if (pr->server >= 0)
			close(pr->server);
		free(pr);
		return NULL;
	}
	for (;;) {
		ssize_t n = read(pr->client, chunk, sizeof(chunk));

		if (n <= 0 || write_all(pr->server, chunk, (size_t)n) < 0)
			break;
	}
	shutdown(pr->server, SHUT_RDWR);
	shutdown(pr->client, SHUT_RDWR);
	pthread_join(answers, NULL);
	close(pr->client);
	close(pr->server);
	free(pr);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	FILE *f;
	int fd;

	if (argc != 4) {
		fprintf(stderr,
			"usage: trickle PORT_FILE TARGET_PORT|unix:PATH "
			"CONTROL_FILE\n");
		return 2;
	}
	if (strncmp(argv[2], "unix:", 5) == 0)
		target_path = argv[2] + 5;
	else
		target_port = (unsigned)strtoul(argv[2], NULL, 10);
	control = argv[3];
	signal(SIGPIPE, SIG_IGN);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		perror("trickle: listen");
		return 1;
	}
	f = fopen(argv[1], "w");
	if (f == NULL || fprintf(f, "%u\n", ntohs(sa.sin_port)) < 0 ||
	    fclose(f) != 0) {
		perror("trickle: port file");
		return 1;
	}
	for (;;) {
		struct pair *pr;
		pthread_t th;
		int c = accept(fd, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR)
				continue;
			perror("trickle: accept");
			return 1;
		}
		pr = calloc(1, sizeof(*pr));
		if (pr == NULL) {
			close(c);
			continue;
		}
		pr->client = c;
		pr->server = -1;
		if (pthread_create(&th, NULL, conn_main, pr) != 0) {
			close(c);
			free(pr);
			continue;
		}
		pthread_detach(th);
	}
}
