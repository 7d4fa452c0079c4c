/* SPDX-License-Identifier: MIT */
/*
 * strv: a heap vector of heap strings (an argv, an environment, a list of
 * names), counted or NULL-terminated, freed whole. Thread-safe.
 */
#ifndef SBFS_COMMON_STRV_H
#define SBFS_COMMON_STRV_H

#include <stddef.h>

/* Free v[0..n) and v. NULL-safe. */
void strv_free(char **v, size_t n);
/* Free every string of v up to its NULL entry, and v. NULL-safe. */
void strv_free_null(char **v);
/* A NULL-terminated heap copy of v (NULL: an empty one); aborts when out
 * of memory, as xalloc does. */
char **strv_dup_null(const char *const *v);

#endif
