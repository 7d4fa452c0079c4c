/* SPDX-License-Identifier: MIT */
/*
 * confine-probe: the attacks of the confinement tests, one per call, each
 * printing one line that says what came back (the errno's name on a
 * failure), so that a test compares words, not exit codes:
 *
 *   confine-probe connect ADDR PORT     "connected: <first line read>"
 *                                       or "error: <ERRNO>" (3 s bound)
 *   confine-probe listen ADDR PORT TEXT SECONDS
 *                                       "listening", then answers every
 *                                       connection with TEXT and a
 *                                       newline; exits after SECONDS
 *   confine-probe ptrace PID            "attached" or "error: <ERRNO>"
 *   confine-probe signal PID            "signalled" (signal 0) or
 *                                       "error: <ERRNO>"
 *
 * Exit 0 when the call succeeded, 1 when it failed, 2 for a usage error.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int report(int err)
{
	const char *name = strerrorname_np(err);

	if (name != NULL)
		printf("error: %s\n", name);
	else
		printf("error: errno %d\n", err);
	return 1;
}

static int addr_of(const char *host, const char *port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)atoi(port));
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

static int do_connect(const char *host, const char *port)
{
	struct sockaddr_in sa;
	struct pollfd p;
	socklen_t len = sizeof(int);
	char line[256];
	int fd, err = 0;
	ssize_t n;

	if (addr_of(host, port, &sa) < 0)
		return report(EINVAL);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return report(errno);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != EINPROGRESS)
			return report(errno);
		p.fd = fd;
		p.events = POLLOUT;
		if (poll(&p, 1, 3000) != 1)
			return report(ETIMEDOUT);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			return report(errno);
		if (err != 0)
			return report(err);
	}
	p.fd = fd;
	p.events = POLLIN;
	if (poll(&p, 1, 3000) != 1)
		return report(ETIMEDOUT);
	n = read(fd, line, sizeof(line) - 1);
	if (n < 0)
		return report(errno);
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	printf("connected: %s\n", line);
	close(fd);
	return 0;
}

static int do_listen(const char *host, const char *port, const char *text,
		     const char *secs)
{
	time_t end = time(NULL) + atoi(secs);
	struct sockaddr_in sa;
	int fd, one = 1;

	if (addr_of(host, port, &sa) < 0)
		return report(EINVAL);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return report(errno);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 16) < 0)
		return report(errno);
	printf("listening\n");
	fflush(stdout);
	while (time(NULL) < end) {
		struct pollfd p = {fd, POLLIN, 0};
		int c;

		if (poll(&p, 1, 1000) != 1)
			continue;
		c = accept(fd, NULL, NULL);
		if (c < 0)
			continue;
		if (write(c, text, strlen(text)) < 0 || write(c, "\n", 1) < 0)
			perror("write");
		close(c);
	}
	return 0;
}

static int do_ptrace(const char *pidarg)
{
	pid_t pid = (pid_t)atoi(pidarg);

	if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) < 0)
		return report(errno);
	ptrace(PTRACE_DETACH, pid, NULL, NULL);
	printf("attached\n");
	return 0;
}

static int do_signal(const char *pidarg)
{
	if (kill((pid_t)atoi(pidarg), 0) < 0)
		return report(errno);
	printf("signalled\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "connect") == 0)
		return do_connect(argv[2], argv[3]);
	if (argc == 6 && strcmp(argv[1], "listen") == 0)
		return do_listen(argv[2], argv[3], argv[4], argv[5]);
	if (argc == 3 && strcmp(argv[1], "ptrace") == 0)
		return do_ptrace(argv[2]);
	if (argc == 3 && strcmp(argv[1], "signal") == 0)
		return do_signal(argv[2]);
	fprintf(stderr, "usage: confine-probe connect ADDR PORT | listen ADDR "
			"PORT TEXT SECONDS | ptrace PID | signal PID\n");
	return 2;
}
