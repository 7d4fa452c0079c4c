/* SPDX-License-Identifier: MIT */
/*
 * buf: a growable byte buffer with a per-instance maximum (curl's dynbuf
 * idea). Anything whose size the remote side decides (response bodies,
 * request bodies, listings, output) goes through a buf, so a hostile peer
 * gets -EFBIG instead of our memory.
 *
 * The contents are always NUL-terminated (the terminator is not counted
 * in len and not counted against max), so text can be used in place.
 *
 * Not thread-safe: one owner at a time.
 */
#ifndef SBFS_BUF_H
#define SBFS_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct buf {
	char *data; /* NULL until the first append */
	size_t len; /* bytes in use */
	size_t cap; /* bytes allocated, excluding the terminator */
	size_t max; /* most bytes this buffer may hold; 0 = SIZE_MAX */
};

#define BUF_INIT(maxbytes)             \
	{                              \
		NULL, 0, 0, (maxbytes) \
	}

void buf_init(struct buf *b, size_t max);
/* Free the storage and reset to empty; max is kept. NULL-safe. */
void buf_cleanup(struct buf *b);
/* Forget the contents but keep the storage. */
void buf_reset(struct buf *b);

/* Append n bytes. Returns 0, -EFBIG when len would pass max (nothing is
 * appended then), or -ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n)
	__attribute__((warn_unused_result));
int buf_append_str(struct buf *b, const char *s)
	__attribute__((warn_unused_result));
int buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), warn_unused_result));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0), warn_unused_result));
/* Append s percent-encoded (RFC 3986): its unreserved bytes (A-Z a-z 0-9
 * - . _ ~) and those of keep (may be NULL, e.g. "/") as they are, every
 * other byte as %XX. Returns 0, -EFBIG or -ENOMEM as buf_append. */
int buf_append_escaped(struct buf *b, const char *s, const char *keep)
	__attribute__((warn_unused_result));

/* Make room for n more bytes and return a pointer to them (len unchanged);
 * commit with buf_commit(). NULL on -EFBIG/-ENOMEM (see *err). */
void *buf_reserve(struct buf *b, size_t n, int *err);
void buf_commit(struct buf *b, size_t n);

/* Hand the storage to the caller (free() it); the buf becomes empty. The
 * result is NUL-terminated and never NULL (an empty string when empty). */
char *buf_take(struct buf *b, size_t *len);

/* Drop the first n bytes. */
void buf_consume(struct buf *b, size_t n);

#endif
