/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/unixaddr.h"

int unixaddr_fill(const char *path, struct sockaddr_un *sa, int *dirfd)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	*dirfd = -1;
	if (strlen(path) < sizeof(sa->sun_path)) {
		memcpy(sa->sun_path, path, strlen(path) + 1);
		return 0;
	}
	if (slash == NULL || (size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*dirfd = open(slash == path ? "/" : dir,
		      O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return -errno;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s",
		     *dirfd, slash + 1);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path)) {
		close(*dirfd);
		*dirfd = -1;
		return -ENAMETOOLONG;
	}
	return 0;
}
