/* SPDX-License-Identifier: MIT */
/*
 * token: the per-boot agent credential, and the only use of OpenSSL outside
 * TLS. A credential is 32 random bytes, carried as exactly 44 characters of
 * standard base64 with '=' padding and no newline (doc/protocol-v1.md 2).
 *
 * Thread-safe.
 */
#ifndef SBFS_TOKEN_H
#define SBFS_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#define TOKEN_RAW_BYTES 32
#define TOKEN_CHARS 44

/* Fill out[TOKEN_CHARS + 1] with a fresh credential. Returns 0 or -EIO when
 * the random generator fails. */
int token_generate(char out[TOKEN_CHARS + 1])
	__attribute__((warn_unused_result));

/* The client's check: exactly 44 bytes, strict standard base64, decoding to
 * exactly 32 bytes. No trimming: a trailing newline makes it invalid. */
bool token_valid(const char *s, size_t n);

/* Compare in constant time (for the given length). */
bool token_equal(const char *a, size_t alen, const char *b, size_t blen);

/* Wipe a secret (OPENSSL_cleanse), so the compiler cannot drop it. */
void token_wipe(void *p, size_t n);

/* Wipe and free a NUL-terminated secret; NULL-safe. */
void token_free(char *s);

/* Write a credential to path with mode 0600 through a temporary file and
 * rename, so a reader never sees a partial value. The file holds the 44
 * characters and no newline. Returns 0 or a negative errno. */
int token_write_file(const char *path, const char *token)
	__attribute__((warn_unused_result));

#endif
