/* SPDX-License-Identifier: MIT */
/* child_output: see child_output.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fdio.h"
#include "common/token.h"
#include "client/child_output.h"

void child_exec(const char *const *argv, char *const *envp, int out, int err,
		bool close_others)
{
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

	setpgid(0, 0);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 ||
	    dup2(err, 2) < 0)
		_exit(127);
#ifdef HAVE_CLOSE_RANGE
	if (close_others)
		close_range(3, ~0U, 0);
#else
	(void)close_others;
#endif
	execve(argv[0], (char *const *)argv, envp);
	_exit(127);
}

void child_fds_close(int *fds, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		fdio_close(fds[i]);
		fds[i] = -1;
	}
}

int child_output_drain(struct child_output *co, long long deadline)
{
	struct pollfd pfd[2] = {{co->fd[0], POLLIN, 0}, {co->fd[1], POLLIN, 0}};
	int open_fds = 2;

	while (open_fds > 0) {
		long long left = deadline - clock_mono_ms();
		int i, n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(pfd, 2, (int)(left > 1000 ? 1000 : left));
		if (n < 0 && errno != EINTR)
			return -errno;
		for (i = 0; i < 2 && n > 0; i++) {
			struct buf *b = co->buf[i];
			char chunk[16384];
			ssize_t got;

			if (pfd[i].fd < 0 || pfd[i].revents == 0)
				continue;
			got = read(pfd[i].fd, chunk, sizeof(chunk));
			if (got <= 0) {
				pfd[i].fd = -1;
				open_fds--;
				continue;
			}
			if (b->len + (size_t)got > co->cap[i] ||
			    buf_append(b, chunk, (size_t)got) < 0)
				co->over[i] = true;
			if (co->wipe)
				token_wipe(chunk, sizeof(chunk));
		}
	}
	return 0;
}
