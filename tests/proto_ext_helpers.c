/* SPDX-License-Identifier: MIT */
/* proto_ext_helpers: what the file extension's JSON suites share. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/proto_ext_helpers.h"

struct proto_attr tx_sample_attr(void)
{
	struct proto_attr a;

	memset(&a, 0, sizeof(a));
	a.type = PROTO_FT_FILE;
	a.perm = 04755;
	a.size = 1234;
	a.nlink = 2;
	a.uid = 65534;
	a.gid = 100;
	a.ino = 987654321;
	a.blocks = 8;
	a.rdev = 0;
	a.atime = 1700000000;
	a.atime_ns = 1;
	a.mtime = 1700000001;
	a.mtime_ns = 999999999;
	a.ctime = 1700000002;
	a.ctime_ns = 500;
	return a;
}

void tx_str_body_round_trip(int (*encode)(const char *s, struct buf *out),
			    int (*decode)(const char *p, size_t n, char **s),
			    const char *s, const char *want)
{
	struct buf b = BUF_INIT(0);
	char *back = NULL;

	ck_assert_int_eq(encode(s, &b), 0);
	ck_assert_str_eq(b.data, want);
	ck_assert_int_eq(decode(b.data, b.len, &back), 0);
	ck_assert_str_eq(back, s);
	free(back);
	buf_cleanup(&b);
}
