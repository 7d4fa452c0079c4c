/* SPDX-License-Identifier: MIT */
/*
 * b64: standard base64 (RFC 4648 alphabet "+/", '=' padding), the encoding
 * the agent protocol uses for file contents and output. Strict decoding:
 * padding is required, no whitespace, no URL-safe alphabet; trailing bits
 * must be zero.
 *
 * Pure functions; thread-safe.
 */
#ifndef SBFS_B64_H
#define SBFS_B64_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the encoding of n bytes (without a terminator). */
size_t b64_encoded_len(size_t n);
/* Upper bound of the decoded length of an n-character encoding. */
size_t b64_decoded_max(size_t n);

/* Encode n bytes into out, which must hold b64_encoded_len(n) + 1 bytes;
 * the result is NUL-terminated. Returns the encoded length. */
size_t b64_encode(const void *in, size_t n, char *out);

/* Decode n characters into out (room for b64_decoded_max(n) bytes).
 * Returns the decoded length, or -EINVAL for anything that is not strict
 * standard base64. */
long b64_decode(const char *in, size_t n, void *out);

/* True when s[n] is strict standard base64. */
bool b64_valid(const char *s, size_t n);

#endif
