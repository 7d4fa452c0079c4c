/* SPDX-License-Identifier: MIT */
/*
 * sys_helpers: values under a lock, loopback sockets and stopping a
 * child, for the suites and for azure-fake alike (sys_helpers.h).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/sys_helpers.h"

int th_listen_loopback(int backlog, unsigned *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, backlog) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

int th_connect_loopback(unsigned port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

unsigned th_locked_uint(pthread_mutex_t *mu, const unsigned *value)
{
	unsigned n;

	pthread_mutex_lock(mu);
	n = *value;
	pthread_mutex_unlock(mu);
	return n;
}

void th_locked_set(pthread_mutex_t *mu, void *field, const void *value,
		   size_t size)
{
	pthread_mutex_lock(mu);
	memcpy(field, value, size);
	pthread_mutex_unlock(mu);
}

int th_child_stop(pid_t pid)
{
	int status = 0, i;

	kill(pid, SIGTERM);
	for (i = 0; i < 500; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return status;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void th_rmtree(const char *path)
{
	if (path != NULL)
		nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}
