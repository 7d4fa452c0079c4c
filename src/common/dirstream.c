/* SPDX-License-Identifier: MIT */
/* dirstream: see dirstream.h. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/dirstream.h"

DIR *dirstream_open(int fd)
{
	int dup_fd = dup(fd), e;
	DIR *d;

	if (dup_fd < 0)
		return NULL;
	d = fdopendir(dup_fd);
	if (d == NULL) {
		e = errno;
		close(dup_fd);
		errno = e;
		return NULL;
	}
	/* A dup shares the file offset: a directory read before would
	 * otherwise look empty. */
	rewinddir(d);
	return d;
}

struct dirent *dirstream_next(DIR *d)
{
	struct dirent *de;

	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			break;
	return de;
}
