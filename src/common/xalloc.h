/* SPDX-License-Identifier: MIT */
/*
 * xalloc: allocation wrappers that abort on failure, for small allocations
 * whose size we choose (tmux/sshfs model). Never use them for sizes a
 * remote peer decides: those go through struct buf with a maximum.
 *
 * Thread-safe.
 */
#ifndef SBFS_XALLOC_H
#define SBFS_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n) __attribute__((malloc, returns_nonnull));
void *xcalloc(size_t nmemb, size_t size)
	__attribute__((malloc, returns_nonnull));
void *xrealloc(void *p, size_t n) __attribute__((returns_nonnull));
char *xstrdup(const char *s) __attribute__((malloc, returns_nonnull));
char *xstrndup(const char *s, size_t n)
	__attribute__((malloc, returns_nonnull));
char *xasprintf(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), malloc, returns_nonnull));

/* Copy src into dst[size] always NUL-terminating; returns strlen(src) so the
 * caller can detect truncation (BSD strlcpy). */
size_t strlcpy_s(char *dst, const char *src, size_t size);

#endif
