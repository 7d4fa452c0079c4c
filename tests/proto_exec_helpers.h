/* SPDX-License-Identifier: MIT */
/*
 * proto_exec_helpers: what the suites of the exec and job bodies
 * (check_proto_exec.c, check_proto_jobs.c) share: the decoders of
 * proto_exec.h called on a C string, and the encoder of a frame into a
 * string. Each fails the running test (ck_assert) where it says so.
 */
#ifndef SBFS_TEST_PROTO_EXEC_HELPERS_H
#define SBFS_TEST_PROTO_EXEC_HELPERS_H

#include "common/proto_exec.h"

/* proto_exec_req_decode of the string json. */
int te_req_decode(const char *json, struct proto_exec_req *r);
/* te_req_decode of json, which must succeed (else the test fails). */
void te_req_ok(const char *json, struct proto_exec_req *r);
/* The frame's JSON line (heap); an encoder failure fails the test. */
char *te_frame_encode(const struct proto_frame *f);
/* proto_frame_decode of the string line. */
int te_frame_decode(const char *line, struct proto_frame *f);
/* te_frame_decode of line, which must succeed (else the test fails). */
void te_frame_ok(const char *line, struct proto_frame *f);

#endif
