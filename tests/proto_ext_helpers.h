/* SPDX-License-Identifier: MIT */
/*
 * proto_ext_helpers: what the suites of the file extension's JSON
 * (check_proto_ext.c, check_proto_ext_ops.c, and check_proto_files.c
 * for the one-string bodies) share.
 */
#ifndef SBFS_TEST_PROTO_EXT_HELPERS_H
#define SBFS_TEST_PROTO_EXT_HELPERS_H

#include "common/buf.h"
#include "common/proto_files.h"

/* A string literal as the (pointer, length) pair the decoders take. */
#define S(lit) lit, sizeof(lit) - 1

/* An attribute with every member set to a distinct value (a file, mode
 * 04755, nanoseconds in every time). */
struct proto_attr tx_sample_attr(void);

/* A body of one string member (the path body, the readlink answer)
 * through its encoder and decoder: s encodes to exactly want, which
 * decodes back to s. A failure fails the running test. */
void tx_str_body_round_trip(int (*encode)(const char *s, struct buf *out),
			    int (*decode)(const char *p, size_t n, char **s),
			    const char *s, const char *want);

#endif
