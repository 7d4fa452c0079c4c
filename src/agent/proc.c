/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/proc.h"
#include "common/clock.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

void proc_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int proc_pidfd_open(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

void proc_pidfd_kill(int pidfd)
{
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

int proc_reap_bounded(pid_t pid, int pidfd, long long deadline)
{
	int status = -1;

	if (pid <= 0)
		return -1;
	while (pidfd >= 0 && clock_mono_ms() < deadline) {
		struct pollfd p = {pidfd, POLLIN, 0};
		int n = poll(&p, 1, (int)(deadline - clock_mono_ms()));

		if (n > 0 || (n < 0 && errno != EINTR))
			break;
	}
	if (waitpid(pid, &status, WNOHANG) == pid)
		return status;
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

ssize_t proc_read_bounded(int fd, void *p, size_t n, long long deadline)
{
	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		long long left = deadline - clock_mono_ms();
		ssize_t got;

		if (left <= 0 || poll(&pf, 1, (int)left) == 0)
			return -ETIMEDOUT;
		got = read(fd, p, n);
		if (got >= 0)
			return got;
		if (errno != EINTR && errno != EAGAIN)
			return 0;
	}
}

PROC_CHILD_CODE void proc_cloexec_from(int lowfd, int maxfd)
{
	int fd;

	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U,
		    CLOSE_RANGE_CLOEXEC) == 0)
		return;
	for (fd = lowfd; fd < maxfd; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
}

PROC_CHILD_CODE size_t proc_cat(char *dst, size_t pos, size_t dstsz,
				const char *s, size_t n)
{
	if (pos >= dstsz || n >= dstsz - pos)
		return dstsz;
	memcpy(dst + pos, s, n);
	dst[pos + n] = '\0';
	return pos + n;
}

PROC_CHILD_CODE int proc_runnable(const char *file)
{
	struct stat st;

	if (stat(file, &st) < 0)
		return errno;
	if (!S_ISREG(st.st_mode))
		return EACCES;
	return access(file, X_OK) == 0 ? 0 : errno;
}

PROC_CHILD_CODE static int try_direct(const char *cand, char *found,
				      size_t foundsz)
{
	if (proc_cat(found, 0, foundsz, cand, strlen(cand)) >= foundsz)
		return ENAMETOOLONG;
	return proc_runnable(found);
}

PROC_CHILD_CODE int proc_find_program(const char *prog, const char *path,
				      proc_try_fn *try_cand, const void *ctx,
				      char *found, size_t foundsz)
{
	const char *dir = path;
	size_t plen = strlen(prog);
	int err, last = ENOENT;

	if (plen == 0)
		return ENOENT;
	if (strchr(prog, '/') != NULL)
		return try_cand != NULL ? try_cand(ctx, prog, found, foundsz)
					: try_direct(prog, found, foundsz);
	for (;;) {
		const char *end = strchr(dir, ':');
		size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
		char cand[PATH_MAX];
		size_t pos;

		pos = dlen ? proc_cat(cand, 0, sizeof(cand), dir, dlen)
			   : proc_cat(cand, 0, sizeof(cand), ".", 1);
		pos = proc_cat(cand, pos, sizeof(cand), "/", 1);
		pos = proc_cat(cand, pos, sizeof(cand), prog, plen);
		if (pos < sizeof(cand)) {
			err = try_cand != NULL
				      ? try_cand(ctx, cand, found, foundsz)
				      : try_direct(cand, found, foundsz);
			if (err == 0)
				return 0;
			/* execvp: EACCES when something was found but could
			 * not run, ENOENT when nothing was. */
			if (err == EACCES)
				last = EACCES;
		}
		if (end == NULL)
			return last;
		dir = end + 1;
	}
}
