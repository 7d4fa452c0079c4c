/* SPDX-License-Identifier: MIT */
/*
 * unixurl: the route of an agent on a Unix socket (man/sandboxctl.1, the
 * record's agentUrl): "http+unix://" then the socket's absolute path
 * percent-encoded (its '/' as %2F), then "/". The path is the URL's host
 * part; the URL's path is exactly "/", with no user, query or fragment.
 *
 * Pure functions, no I/O. Thread-safe.
 */
#ifndef SBFS_UNIXURL_H
#define SBFS_UNIXURL_H

#include <stdbool.h>
#include <stddef.h>

#define UNIXURL_SCHEME "http+unix://"

/* True when url starts with the scheme (whether or not it is valid). */
bool unixurl_is(const char *url);

/*
 * Decode url into path (NUL-terminated, at most size bytes with the NUL).
 * The decoded path must be absolute, without NUL bytes, empty, "." or
 * ".." components or a trailing '/'; in the encoded form every byte is an
 * unreserved character (A-Z a-z 0-9 - . _ ~) or %XX. Returns 0, -EINVAL
 * for anything else, -ENAMETOOLONG when it does not fit.
 */
int unixurl_parse(const char *url, char *path, size_t size)
	__attribute__((warn_unused_result));

/* The URL of the socket at path (absolute), every byte but the unreserved
 * ones percent-encoded with upper-case digits (heap). */
char *unixurl_format(const char *path);

#endif
