/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/xalloc.h"

int fdio_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int fdio_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int fdio_pread_all(int fd, void *p, size_t n, uint64_t off)
{
	char *c = p;

	while (n > 0) {
		ssize_t r = pread(fd, c, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		c += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

char *fdio_read_text(const char *path, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *text;
	ssize_t n;
	int err;

	if (fd < 0)
		return NULL;
	text = xmalloc(max + 1);
	n = read(fd, text, max);
	err = errno;
	close(fd);
	if (n < 0) {
		free(text);
		errno = err;
		return NULL;
	}
	text[n] = '\0';
	return text;
}
