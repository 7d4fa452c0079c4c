/* SPDX-License-Identifier: MIT */
/*
 * Suite proto_ext_ops: the JSON of the file extension's operations
 * (proto_ext.c): exact encodings and round trips of the operation
 * bodies, the readlink and statfs answers and the contents of a
 * directory's small files, and refusal of malformed input.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/proto_ext_helpers.h"

/* The request struct holds heap strings; the encoder only reads them. */
#define CS(lit) ((char *)(lit))

/* ---- operation bodies ---------------------------------------------------- */

struct req_case {
	const char *op;
	struct proto_ext_req req;
	const char *json;
};

static void assert_req_eq(const struct proto_ext_req *x,
			  const struct proto_ext_req *y)
{
	ck_assert_str_eq(x->path, y->path);
	if (y->to != NULL)
		ck_assert_str_eq(x->to, y->to);
	else
		ck_assert_ptr_null(x->to);
	if (y->target != NULL)
		ck_assert_str_eq(x->target, y->target);
	else
		ck_assert_ptr_null(x->target);
	ck_assert_int_eq(x->has_mode, y->has_mode);
	ck_assert_uint_eq(x->mode, y->mode);
	ck_assert_int_eq(x->has_size, y->has_size);
	ck_assert_uint_eq(x->size, y->size);
	ck_assert_int_eq(x->exclusive, y->exclusive);
	ck_assert_int_eq(x->truncate, y->truncate);
	ck_assert_int_eq(x->noreplace, y->noreplace);
	ck_assert_int_eq(x->exchange, y->exchange);
	ck_assert_int_eq(x->nofollow, y->nofollow);
	ck_assert_int_eq(x->atime.how, y->atime.how);
	ck_assert_int_eq(x->atime.sec, y->atime.sec);
	ck_assert_uint_eq(x->atime.nsec, y->atime.nsec);
	ck_assert_int_eq(x->mtime.how, y->mtime.how);
	ck_assert_int_eq(x->mtime.sec, y->mtime.sec);
	ck_assert_uint_eq(x->mtime.nsec, y->mtime.nsec);
}

START_TEST(req_every_op_round_trip)
{
	static const struct req_case cases[] = {
		{"create",
		 {.path = CS("a/b"),
		  .has_mode = true,
		  .mode = 0640,
		  .exclusive = true,
		  .truncate = true},
		 "{\"path\":\"a/b\",\"mode\":416,\"exclusive\":true,"
		 "\"truncate\":true}"},
		{"create",
		 {.path = CS("c"), .has_mode = true, .mode = 0},
		 "{\"path\":\"c\",\"mode\":0}"},
		{"mkdir",
		 {.path = CS("/d"), .has_mode = true, .mode = 01777},
		 "{\"path\":\"/d\",\"mode\":1023}"},
		{"unlink", {.path = CS("x")}, "{\"path\":\"x\"}"},
		{"rmdir", {.path = CS("y")}, "{\"path\":\"y\"}"},
		{"fsync", {.path = CS("z")}, "{\"path\":\"z\"}"},
		{"rename",
		 {.path = CS("f"), .to = CS("g"), .noreplace = true},
		 "{\"from\":\"f\",\"to\":\"g\",\"noreplace\":true}"},
		{"rename",
		 {.path = CS("f"), .to = CS("g"), .exchange = true},
		 "{\"from\":\"f\",\"to\":\"g\",\"exchange\":true}"},
		{"rename",
		 {.path = CS("f"), .to = CS("g")},
		 "{\"from\":\"f\",\"to\":\"g\"}"},
		{"link",
		 {.path = CS("h"), .to = CS("i")},
		 "{\"from\":\"h\",\"to\":\"i\"}"},
		{"symlink",
		 {.path = CS("l"), .target = CS("/etc/passwd")},
		 "{\"path\":\"l\",\"target\":\"/etc/passwd\"}"},
		{"chmod",
		 {.path = CS("m"), .has_mode = true, .mode = 0755},
		 "{\"path\":\"m\",\"mode\":493}"},
		{"truncate",
		 {.path = CS("t"), .has_size = true, .size = 0},
		 "{\"path\":\"t\",\"size\":0}"},
		{"truncate",
		 {.path = CS("t"),
		  .has_size = true,
		  .size = 18446744073709551615ULL},
		 "{\"path\":\"t\",\"size\":\"18446744073709551615\"}"},
		{"utimens",
		 {.path = CS("u"),
		  .atime = {PROTO_TIME_NOW, 0, 0},
		  .mtime = {PROTO_TIME_SET, -12, 999999999}},
		 "{\"path\":\"u\",\"atime\":\"now\",\"mtime\":{\"sec\":-12,"
		 "\"nsec\":999999999}}"},
		{"utimens",
		 {.path = CS("v"),
		  .nofollow = true,
		  .atime = {PROTO_TIME_SET, 1700000000, 0}},
		 "{\"path\":\"v\",\"atime\":{\"sec\":1700000000,\"nsec\":0},"
		 "\"nofollow\":true}"},
		{"utimens", {.path = CS("w")}, "{\"path\":\"w\"}"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf b = BUF_INIT(0);
		struct proto_ext_req d;

		ck_assert_msg(proto_ext_req_encode(cases[i].op, &cases[i].req,
						   &b) == 0,
			      "encode %s", cases[i].op);
		ck_assert_msg(strcmp(b.data, cases[i].json) == 0, "%s: %s",
			      cases[i].op, b.data);
		ck_assert_int_eq(
			proto_ext_req_decode(cases[i].op, b.data, b.len, &d),
			0);
		assert_req_eq(&d, &cases[i].req);
		proto_ext_req_cleanup(&d);
		proto_ext_req_cleanup(&d);
		buf_cleanup(&b);
	}
}
END_TEST

START_TEST(req_decode_forms)
{
	struct proto_ext_req d;

	/* "omit", null and absence are the same; nsec may be left out;
	 * unknown fields and fields of other operations are ignored */
	ck_assert_int_eq(proto_ext_req_decode(
				 "utimens",
				 S("{\"path\":\"u\",\"atime\":\"omit\","
				   "\"mtime\":{\"sec\":\"5\"},\"mode\":\"zz\","
				   "\"future\":{}}"),
				 &d),
			 0);
	ck_assert_int_eq(d.atime.how, PROTO_TIME_OMIT);
	ck_assert_int_eq(d.mtime.how, PROTO_TIME_SET);
	ck_assert_int_eq(d.mtime.sec, 5);
	ck_assert_uint_eq(d.mtime.nsec, 0);
	ck_assert(!d.has_mode);
	proto_ext_req_cleanup(&d);
	ck_assert_int_eq(
		proto_ext_req_decode("utimens",
				     S("{\"path\":\"u\",\"atime\":null}"), &d),
		0);
	ck_assert_int_eq(d.atime.how, PROTO_TIME_OMIT);
	proto_ext_req_cleanup(&d);
	/* flags default to false */
	ck_assert_int_eq(proto_ext_req_decode("create",
					      S("{\"path\":\"\",\"mode\":420}"),
					      &d),
			 0);
	ck_assert_str_eq(d.path, "");
	ck_assert(!d.exclusive && !d.truncate);
	proto_ext_req_cleanup(&d);
}
END_TEST

START_TEST(req_bad_input)
{
	static const struct {
		const char *op;
		const char *json;
		int rc;
	} bad[] = {
		{"unlink", "nope", -EBADMSG},
		{"unlink", "", -EBADMSG},
		{"unlink", "{\"path\":\"x\"", -EBADMSG},
		{"unlink", "[\"x\"]", -EINVAL},
		{"unlink", "{}", -EINVAL},
		{"unlink", "{\"path\":7}", -EINVAL},
		{"unlink", "{\"path\":null}", -EINVAL},
		{"unlink", "{\"path\":\"a\\u0000b\"}", -EINVAL},
		{"create", "{\"path\":\"x\"}", -EINVAL},
		{"create", "{\"path\":\"x\",\"mode\":\"420\"x}", -EBADMSG},
		{"create", "{\"path\":\"x\",\"mode\":4096}", -EINVAL},
		{"create", "{\"path\":\"x\",\"mode\":-1}", -EINVAL},
		{"create", "{\"path\":\"x\",\"mode\":1.5}", -EINVAL},
		{"create", "{\"path\":\"x\",\"mode\":420,\"exclusive\":1}",
		 -EINVAL},
		{"create", "{\"path\":\"x\",\"mode\":420,\"truncate\":\"y\"}",
		 -EINVAL},
		{"mkdir", "{\"mode\":493}", -EINVAL},
		{"rename", "{\"path\":\"a\",\"to\":\"b\"}", -EINVAL},
		{"rename", "{\"from\":\"a\"}", -EINVAL},
		{"rename", "{\"from\":\"a\",\"to\":\"b\",\"noreplace\":0}",
		 -EINVAL},
		{"link", "{\"from\":\"a\",\"to\":[]}", -EINVAL},
		{"symlink", "{\"path\":\"a\"}", -EINVAL},
		{"symlink", "{\"path\":\"a\",\"target\":false}", -EINVAL},
		{"chmod", "{\"path\":\"a\",\"mode\":null}", -EINVAL},
		{"truncate", "{\"path\":\"a\"}", -EINVAL},
		{"truncate", "{\"path\":\"a\",\"size\":\"-1\"}", -EINVAL},
		{"truncate", "{\"path\":\"a\",\"size\":\"1e3\"}", -EINVAL},
		{"utimens", "{\"path\":\"a\",\"atime\":\"later\"}", -EINVAL},
		{"utimens", "{\"path\":\"a\",\"atime\":5}", -EINVAL},
		{"utimens", "{\"path\":\"a\",\"atime\":{\"nsec\":1}}", -EINVAL},
		{"utimens",
		 "{\"path\":\"a\",\"mtime\":{\"sec\":1,\"nsec\":1000000000}}",
		 -EINVAL},
		{"utimens", "{\"path\":\"a\",\"mtime\":{\"sec\":1.5}}",
		 -EINVAL},
		{"utimens", "{\"path\":\"a\",\"nofollow\":\"yes\"}", -EINVAL},
		{"frobnicate", "{\"path\":\"a\"}", -EINVAL},
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct proto_ext_req d;
		int rc = proto_ext_req_decode(bad[i].op, bad[i].json,
					      strlen(bad[i].json), &d);

		ck_assert_msg(rc == bad[i].rc, "%s %s: %d", bad[i].op,
			      bad[i].json, rc);
	}
}
END_TEST

START_TEST(req_encode_refuses)
{
	struct proto_ext_req q;
	struct buf b = BUF_INIT(0);

	memset(&q, 0, sizeof(q));
	ck_assert_int_eq(proto_ext_req_encode("unlink", &q, &b), -EINVAL);
	q.path = CS("x");
	ck_assert_int_eq(proto_ext_req_encode("frobnicate", &q, &b), -EINVAL);
	ck_assert_int_eq(proto_ext_req_encode("create", &q, &b), -EINVAL);
	ck_assert_int_eq(proto_ext_req_encode("rename", &q, &b), -EINVAL);
	ck_assert_int_eq(proto_ext_req_encode("symlink", &q, &b), -EINVAL);
	ck_assert_int_eq(proto_ext_req_encode("truncate", &q, &b), -EINVAL);
	q.has_mode = true;
	q.mode = 010000;
	ck_assert_int_eq(proto_ext_req_encode("chmod", &q, &b), -EINVAL);
	q.mtime.how = PROTO_TIME_SET;
	q.mtime.nsec = 1000000000;
	ck_assert_int_eq(proto_ext_req_encode("utimens", &q, &b), -EINVAL);
	ck_assert_uint_eq(b.len, 0);
	buf_cleanup(&b);
}
END_TEST

/* ---- readlink and statfs ------------------------------------------------- */

START_TEST(target_and_statfs)
{
	struct proto_statfs s = {4096, 4096, 1000, 500, 400, 65536, 60000, 255},
			    d;
	struct buf b = BUF_INIT(0);
	char *t = NULL;

	tx_str_body_round_trip(proto_target_encode, proto_target_decode,
			       "../a \"b\"\x01",
			       "{\"target\":\"../a \\\"b\\\"\\u0001\"}");
	ck_assert_int_eq(proto_target_decode(S("{}"), &t), -EINVAL);
	ck_assert_int_eq(proto_target_decode(S("{\"target\":1}"), &t), -EINVAL);
	ck_assert_int_eq(proto_target_decode(S("{\"target\""), &t), -EBADMSG);

	ck_assert_int_eq(proto_statfs_encode(&s, &b), 0);
	ck_assert_str_eq(b.data,
			 "{\"bsize\":4096,\"frsize\":4096,\"blocks\":1000,"
			 "\"bfree\":500,\"bavail\":400,\"files\":65536,"
			 "\"ffree\":60000,\"namemax\":255}");
	ck_assert_int_eq(proto_statfs_decode(b.data, b.len, &d), 0);
	ck_assert(memcmp(&s, &d, sizeof(s)) == 0);
	buf_cleanup(&b);
	/* a filesystem reporting "unlimited" inodes: exact too */
	s.files = UINT64_MAX;
	s.ffree = UINT64_MAX - 1;
	ck_assert_int_eq(proto_statfs_encode(&s, &b), 0);
	ck_assert_ptr_nonnull(
		strstr(b.data, "\"files\":\"18446744073709551615\""));
	ck_assert_int_eq(proto_statfs_decode(b.data, b.len, &d), 0);
	ck_assert(memcmp(&s, &d, sizeof(s)) == 0);
	buf_cleanup(&b);
	ck_assert_int_eq(proto_statfs_decode(S("{\"bsize\":1}"), &d), -EINVAL);
	ck_assert_int_eq(proto_statfs_decode(S("statfs"), &d), -EBADMSG);
}
END_TEST

/* ---- directory contents -------------------------------------------------- */

START_TEST(contents_round_trip_and_bad_input)
{
	struct proto_attr a = tx_sample_attr();
	struct buf out = BUF_INIT(0);
	struct proto_dirent ent;
	const char *data;
	size_t pos = 0;
	char *bad;

	a.size = 3;
	ck_assert_int_eq(proto_contents_add(&out, "x.c", &a, "abc", 3), 0);
	a.size = 0;
	ck_assert_int_eq(proto_contents_add(&out, "empty", &a, "", 0), 0);
	/* a size that is not the length: refused, out untouched */
	a.size = 9;
	ck_assert_int_eq(proto_contents_add(&out, "liar", &a, "abc", 3),
			 -EINVAL);

	memset(&ent, 0, sizeof(ent));
	ck_assert_int_eq(
		proto_contents_next(out.data, out.len, &pos, &ent, &data), 1);
	ck_assert_str_eq(ent.name, "x.c");
	ck_assert_uint_eq(ent.attr.size, 3);
	ck_assert_uint_eq(ent.attr.ino, 987654321);
	ck_assert(memcmp(data, "abc", 3) == 0);
	free(ent.name);
	ck_assert_int_eq(
		proto_contents_next(out.data, out.len, &pos, &ent, &data), 1);
	ck_assert_str_eq(ent.name, "empty");
	free(ent.name);
	ck_assert_int_eq(
		proto_contents_next(out.data, out.len, &pos, &ent, &data), 0);

	/* truncated: a byte of the first record's contents missing */
	pos = 0;
	ck_assert_int_eq(
		proto_contents_next(
			out.data,
			(size_t)(strchr(out.data, '\n') - out.data) + 1 + 2,
			&pos, &ent, &data),
		-EINVAL);
	/* no newline, not JSON, not a file, a name that walks out */
	pos = 0;
	ck_assert_int_lt(
		proto_contents_next(S("{\"name\":\"a\""), &pos, &ent, &data),
		0);
	pos = 0;
	ck_assert_int_lt(
		proto_contents_next(S("nonsense\nabc"), &pos, &ent, &data), 0);
	a = tx_sample_attr();
	a.type = PROTO_FT_DIR;
	a.size = 0;
	buf_reset(&out);
	ck_assert_int_eq(proto_contents_add(&out, "d", &a, "", 0), 0);
	pos = 0;
	ck_assert_int_eq(
		proto_contents_next(out.data, out.len, &pos, &ent, &data),
		-EINVAL);
	a.type = PROTO_FT_FILE;
	buf_reset(&out);
	ck_assert_int_eq(proto_contents_add(&out, "ok", &a, "", 0), 0);
	bad = strstr(out.data, "\"ok\"");
	ck_assert_ptr_nonnull(bad);
	memcpy(bad, "\"..\"", 4);
	pos = 0;
	ck_assert_int_eq(
		proto_contents_next(out.data, out.len, &pos, &ent, &data),
		-EINVAL);
	buf_cleanup(&out);
}
END_TEST

void proto_ext_ops_cases(Suite *s)
{
	TCASE_TABLE(s, "requests", NULL, NULL, 0, req_every_op_round_trip,
		    req_decode_forms, req_bad_input, req_encode_refuses,
		    target_and_statfs);
	TCASE_TABLE(s, "contents", NULL, NULL, 0,
		    contents_round_trip_and_bad_input);
}
