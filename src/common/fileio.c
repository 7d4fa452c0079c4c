/* SPDX-License-Identifier: MIT */
/* fileio: see fileio.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/xalloc.h"

int file_write_atomic(const char *path, const void *data, size_t len,
		      mode_t mode)
{
	const char *slash = strrchr(path, '/');
	char *dir, *tmp;
	const char *p = data;
	int fd, dfd, rc = 0;

	dir = slash == NULL   ? xstrdup(".")
	      : slash == path ? xstrdup("/")
			      : xstrndup(path, (size_t)(slash - path));
	tmp = xasprintf("%s/.%s.XXXXXX", dir, slash != NULL ? slash + 1 : path);
	/* A name of its own: writers of the same file do not meet. */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	/* Exactly mode: neither the umask nor an inherited ACL. */
	if (fchmod(fd, mode) < 0)
		rc = -errno;
	while (rc == 0 && len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = w < 0 ? -errno : -EIO;
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		(void)unlink(tmp);
		goto out;
	}
	/* The rename is durable only once the directory is. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0)
			rc = -errno;
		close(dfd);
	}
out:
	free(tmp);
	free(dir);
	return rc;
}

int file_open_unlinked(const char *dir, const char *prefix)
{
	char *tmpl;
	int fd;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	tmpl = xasprintf("%s/%sXXXXXX", dir, prefix);
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	else
		unlink(tmpl);
	free(tmpl);
	return fd;
}
