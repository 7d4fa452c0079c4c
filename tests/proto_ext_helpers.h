/* SPDX-License-Identifier: MIT */
/*
 * proto_ext_helpers: what the suites of the file extension's JSON
 * (check_proto_ext.c, check_proto_ext_ops.c) share.
 */
#ifndef SBFS_TEST_PROTO_EXT_HELPERS_H
#define SBFS_TEST_PROTO_EXT_HELPERS_H

#include "common/proto_files.h"

/* A string literal as the (pointer, length) pair the decoders take. */
#define S(lit) lit, sizeof(lit) - 1

/* An attribute with every member set to a distinct value (a file, mode
 * 04755, nanoseconds in every time). */
struct proto_attr tx_sample_attr(void);

#endif
