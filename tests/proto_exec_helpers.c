/* SPDX-License-Identifier: MIT */
/* proto_exec_helpers: what the exec and job body suites share. */
#include "config.h"

#include <check.h>
#include <string.h>

#include "common/buf.h"
#include "tests/proto_exec_helpers.h"

int te_req_decode(const char *json, struct proto_exec_req *r)
{
	return proto_exec_req_decode(json, strlen(json), r);
}

void te_req_ok(const char *json, struct proto_exec_req *r)
{
	int rc = te_req_decode(json, r);

	ck_assert_msg(rc == 0, "%s: %d", json, rc);
}

char *te_frame_encode(const struct proto_frame *f)
{
	struct buf b = BUF_INIT(0);

	ck_assert_int_eq(proto_frame_encode(f, &b), 0);
	return buf_take(&b, NULL);
}

int te_frame_decode(const char *line, struct proto_frame *f)
{
	return proto_frame_decode(line, strlen(line), f);
}

void te_frame_ok(const char *line, struct proto_frame *f)
{
	int rc = te_frame_decode(line, f);

	ck_assert_msg(rc == 0, "%s: %d", line, rc);
}
