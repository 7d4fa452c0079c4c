/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/xalloc.h"

enum how { BY_WRITE, BY_PWRITE, BY_PREAD };

/* All n bytes at c, however the kernel splits them: written (at off for
 * BY_PWRITE) or read at off. */
static int whole(int fd, char *c, size_t n, uint64_t off, enum how how)
{
	while (n > 0) {
		ssize_t k = how == BY_WRITE    ? write(fd, c, n)
			    : how == BY_PWRITE ? pwrite(fd, c, n, (off_t)off)
					       : pread(fd, c, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		c += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

/* The writers only read from p: the cast serves the one loop. */
int fdio_write_all(int fd, const void *p, size_t n)
{
	return whole(fd, (char *)(uintptr_t)p, n, 0, BY_WRITE);
}

int fdio_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	return whole(fd, (char *)(uintptr_t)p, n, off, BY_PWRITE);
}

int fdio_pread_all(int fd, void *p, size_t n, uint64_t off)
{
	return whole(fd, p, n, off, BY_PREAD);
}

int fdio_read_buf(int fd, struct buf *b, size_t chunk)
{
	ssize_t got;
	int err = 0;
	char *p;

	for (;;) {
		p = buf_reserve(b, chunk, &err);
		if (p == NULL)
			return err;
		got = read(fd, p, chunk);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return 0;
		buf_commit(b, (size_t)got);
	}
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

void fdio_close(int fd)
{
	int saved = errno;

	if (fd >= 0)
		close(fd);
	errno = saved;
}
