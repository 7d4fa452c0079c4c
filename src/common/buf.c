/* SPDX-License-Identifier: MIT */
/*
 * buf: bounded growable buffer. Growth doubles, never past max.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void buf_cleanup(struct buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

static size_t buf_limit(const struct buf *b)
{
	return b->max == 0 ? SIZE_MAX - 1 : b->max;
}

static int buf_grow(struct buf *b, size_t need)
{
	size_t limit = buf_limit(b);
	size_t cap;
	char *p;

	if (need > limit - b->len)
		return -EFBIG;
	need += b->len;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (cap > limit)
		cap = limit;
	p = realloc(b->data, cap + 1);
	if (p == NULL)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	int rc = buf_grow(b, n);

	if (rc < 0)
		return rc;
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	if (b->data != NULL)
		b->data[b->len] = '\0';
	return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n, rc;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return -EINVAL;
	rc = buf_grow(b, (size_t)n);
	if (rc < 0)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void *buf_reserve(struct buf *b, size_t n, int *err)
{
	int rc = buf_grow(b, n);

	if (rc < 0) {
		if (err != NULL)
			*err = rc;
		return NULL;
	}
	return b->data + b->len;
}

void buf_commit(struct buf *b, size_t n)
{
	b->len += n;
	b->data[b->len] = '\0';
}

char *buf_take(struct buf *b, size_t *len)
{
	char *p = b->data;

	if (len != NULL)
		*len = b->len;
	if (p == NULL)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	return p;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

int buf_append_escaped(struct buf *b, const char *s, const char *keep)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s;
	int rc = 0;

	for (; rc == 0 && *p != '\0'; p++) {
		char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};

		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
		    *p == '_' || *p == '~' ||
		    (keep != NULL && strchr(keep, *p) != NULL))
			rc = buf_append(b, p, 1);
		else
			rc = buf_append(b, enc, 3);
	}
	return rc;
}
