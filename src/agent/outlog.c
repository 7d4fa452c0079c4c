/* SPDX-License-Identifier: MIT */
/*
 * outlog: a job's kept output, in a memory ring and then a ring file.
 * Positions are absolute; a byte at position p sits at p modulo the
 * ring's size, so dropping the oldest bytes costs nothing and the file
 * never grows past cap.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/outlog.h"
#include "common/fdio.h"
#include "common/fileio.h"
#include "common/xalloc.h"

/* The memory ring's first size. */
#define MEM_MIN 4096

void outlog_init(struct outlog *l, uint64_t cap, size_t mem_max,
		 const char *dir)
{
	memset(l, 0, sizeof(*l));
	l->cap = cap;
	l->mem_max = dir != NULL ? mem_max : (size_t)-1;
	l->fd = -1;
	l->dir = dir;
}

void outlog_cleanup(struct outlog *l)
{
	if (l == NULL)
		return;
	free(l->mem);
	fdio_close(l->fd);
	outlog_init(l, l->cap, l->mem_max, l->dir);
}

/* Where pos falls in a ring of size bytes (into *at), and how many of n
 * bytes from there fit before the ring wraps to its start. */
static size_t ring_first(uint64_t size, uint64_t pos, size_t n, uint64_t *at)
{
	*at = pos % size;
	return size - *at < n ? (size_t)(size - *at) : n;
}

/* Copy between a linear buffer and the ring at pos, in at most two
 * pieces (the ring wraps once). */
static void mem_put(unsigned char *ring, size_t size, uint64_t pos,
		    const unsigned char *p, size_t n)
{
	uint64_t at;
	size_t first = ring_first(size, pos, n, &at);

	memcpy(ring + at, p, first);
	memcpy(ring, p + first, n - first);
}

static void mem_get(const unsigned char *ring, size_t size, uint64_t pos,
		    unsigned char *p, size_t n)
{
	uint64_t at;
	size_t first = ring_first(size, pos, n, &at);

	memcpy(p, ring + at, first);
	memcpy(p + first, ring, n - first);
}

/* One piece of a copy with the ring file at off: skip bytes into src
 * written there, or (src NULL) read from there into dst. 0 or -errno. */
static int file_piece(int fd, const unsigned char *src, unsigned char *dst,
		      size_t skip, size_t n, uint64_t off)
{
	if (src != NULL)
		return fdio_pwrite_all(fd, src + skip, n, off);
	return fdio_pread_all(fd, dst + skip, n, off);
}

/* The same between a linear buffer and the ring file: n bytes of src put
 * at pos, or (src NULL) got from pos into dst. 0 or -errno. */
static int file_copy(const struct outlog *l, uint64_t pos,
		     const unsigned char *src, unsigned char *dst, size_t n)
{
	uint64_t at;
	size_t first = ring_first(l->cap, pos, n, &at);
	int rc = file_piece(l->fd, src, dst, 0, first, at);

	if (rc == 0 && n > first)
		rc = file_piece(l->fd, src, dst, first, n - first, 0);
	return rc;
}

static int file_put(const struct outlog *l, uint64_t pos,
		    const unsigned char *p, size_t n)
{
	return file_copy(l, pos, p, NULL, n);
}

/* Room for need bytes kept at once: a larger memory ring, or the file. */
static int make_room(struct outlog *l, uint64_t need)
{
	unsigned char *ring;
	uint64_t used = outlog_used(l);
	size_t size;
	int fd, rc;

	if (l->fd >= 0 || need <= l->mem_size)
		return 0;
	if (need <= l->mem_max) {
		size = l->mem_size ? l->mem_size : MEM_MIN;
		while (size < need)
			size = size > l->mem_max / 2 ? l->mem_max : size * 2;
		ring = xmalloc(size);
		if (used > 0)
			mem_get(l->mem, l->mem_size, l->head, ring,
				(size_t)used);
		free(l->mem);
		/* The kept bytes now start at head modulo the new size. */
		l->mem = xmalloc(size);
		if (used > 0)
			mem_put(l->mem, size, l->head, ring, (size_t)used);
		free(ring);
		l->mem_size = size;
		return 0;
	}
	if (l->dir == NULL)
		return -EFBIG;
	fd = file_open_unlinked(l->dir, ".job-");
	if (fd < 0)
		return fd;
	l->fd = fd;
	ring = xmalloc(used > 0 ? (size_t)used : 1);
	if (used > 0)
		mem_get(l->mem, l->mem_size, l->head, ring, (size_t)used);
	rc = used > 0 ? file_put(l, l->head, ring, (size_t)used) : 0;
	free(ring);
	if (rc < 0) {
		close(fd);
		l->fd = -1;
		return rc;
	}
	free(l->mem);
	l->mem = NULL;
	l->mem_size = 0;
	return 0;
}

int outlog_append(struct outlog *l, const void *a, size_t an, const void *b,
		  size_t bn)
{
	uint64_t need = outlog_used(l) + an + bn;
	int rc;

	if (need > l->cap)
		return -ENOSPC;
	rc = make_room(l, need);
	if (rc < 0)
		return rc;
	if (l->fd < 0) {
		if (an > 0)
			mem_put(l->mem, l->mem_size, l->tail, a, an);
		if (bn > 0)
			mem_put(l->mem, l->mem_size, l->tail + an, b, bn);
	} else {
		rc = an > 0 ? file_put(l, l->tail, a, an) : 0;
		if (rc == 0 && bn > 0)
			rc = file_put(l, l->tail + an, b, bn);
		if (rc < 0)
			return rc;
	}
	l->tail += an + bn;
	return 0;
}

int outlog_read(const struct outlog *l, uint64_t pos, void *dst, size_t n)
{
	if (pos < l->head || pos + n > l->tail)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (l->fd < 0) {
		mem_get(l->mem, l->mem_size, pos, dst, n);
		return 0;
	}
	return file_copy(l, pos, NULL, dst, n);
}

void outlog_drop(struct outlog *l, uint64_t pos)
{
	if (pos > l->head && pos <= l->tail)
		l->head = pos;
}
