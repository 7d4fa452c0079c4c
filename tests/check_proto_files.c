/* SPDX-License-Identifier: MIT */
/*
 * Suite for the v1 file bodies of proto_files: the read answer, the write
 * body and the {"path"} body, their refusals, and the reasons given for
 * bad base64. (The extension's half has its own suite.)
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

/* A string literal and its length. */
#define LIT(s) s, strlen(s)

START_TEST(contents_round_trip)
{
	struct buf out = BUF_INIT(0), back = BUF_INIT(16);
	static const unsigned char data[] = {0, 1, 2, 3, 0xff};

	ck_assert_int_eq(proto_file_contents_encode(data, sizeof(data), &out),
			 0);
	ck_assert_str_eq(out.data, "{\"contentsBase64\":\"AAECA/8=\"}");
	ck_assert_uint_eq(out.len, proto_file_contents_size(sizeof(data)));
	ck_assert_int_eq(proto_file_contents_decode(out.data, out.len, &back),
			 0);
	ck_assert_uint_eq(back.len, sizeof(data));
	ck_assert(memcmp(back.data, data, sizeof(data)) == 0);
	buf_cleanup(&out);
	buf_cleanup(&back);
	/* Empty contents. */
	ck_assert_int_eq(proto_file_contents_encode("", 0, &out), 0);
	ck_assert_str_eq(out.data, "{\"contentsBase64\":\"\"}");
	ck_assert_int_eq(proto_file_contents_decode(out.data, out.len, &back),
			 0);
	ck_assert_uint_eq(back.len, 0);
	buf_cleanup(&out);
	buf_cleanup(&back);
}
END_TEST

START_TEST(contents_in_pieces)
{
	struct buf whole = BUF_INIT(0), parts = BUF_INIT(0);
	unsigned char data[100];
	size_t i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 37);
	ck_assert_int_eq(proto_file_contents_encode(data, sizeof(data), &whole),
			 0);
	ck_assert_int_eq(proto_file_contents_begin(&parts), 0);
	ck_assert_int_eq(proto_file_contents_add(&parts, data, 33), 0);
	ck_assert_int_eq(proto_file_contents_add(&parts, data + 33, 66), 0);
	ck_assert_int_eq(proto_file_contents_add(&parts, data + 99, 1), 0);
	ck_assert_int_eq(proto_file_contents_end(&parts), 0);
	ck_assert_str_eq(parts.data, whole.data);
	buf_cleanup(&whole);
	buf_cleanup(&parts);
}
END_TEST

START_TEST(contents_refusals)
{
	struct buf c = BUF_INIT(2);

	ck_assert_int_eq(proto_file_contents_decode(LIT("{"), &c), -EBADMSG);
	ck_assert_int_eq(proto_file_contents_decode(LIT("[]"), &c), -EINVAL);
	ck_assert_int_eq(proto_file_contents_decode(LIT("{}"), &c), -EINVAL);
	ck_assert_int_eq(
		proto_file_contents_decode(LIT("{\"contentsBase64\":1}"), &c),
		-EINVAL);
	ck_assert_int_eq(proto_file_contents_decode(
				 LIT("{\"contentsBase64\":\"AA\"}"), &c),
			 -EILSEQ);
	/* Three bytes do not fit a buffer of two: nothing is kept. */
	ck_assert_int_eq(proto_file_contents_decode(
				 LIT("{\"contentsBase64\":\"AAAA\"}"), &c),
			 -EFBIG);
	ck_assert_uint_eq(c.len, 0);
	/* A NUL escape would shorten the string cJSON gives us. */
	ck_assert_int_eq(
		proto_file_contents_decode(
			LIT("{\"contentsBase64\":\"AA==\\u0000AA\"}"), &c),
		-EILSEQ);
	buf_cleanup(&c);
}
END_TEST

static int write_decode(const char *body, struct proto_file_write *w, char *why)
{
	why[0] = '\0';
	return proto_file_write_decode_why(body, strlen(body), w, why, 96);
}

START_TEST(write_round_trip)
{
	struct proto_file_write w;
	struct buf b = BUF_INIT(0);
	char why[96];

	ck_assert_int_eq(proto_file_write_encode("dir/\"q\"\n", "hi", 2, &b),
			 0);
	ck_assert_str_eq(b.data, "{\"path\":\"dir/\\\"q\\\"\\n\","
				 "\"contentsBase64\":\"aGk=\"}");
	ck_assert_int_eq(write_decode(b.data, &w, why), 0);
	ck_assert_str_eq(w.path, "dir/\"q\"\n");
	ck_assert_uint_eq(w.len, 2);
	ck_assert(memcmp(w.data, "hi", 2) == 0);
	proto_file_write_cleanup(&w);
	buf_cleanup(&b);
	/* Empty contents: no data. Unknown members are ignored. */
	ck_assert_int_eq(write_decode("{\"x\":[1],\"path\":\"e\","
				      "\"contentsBase64\":\"\"}",
				      &w, why),
			 0);
	ck_assert_ptr_null(w.data);
	ck_assert_uint_eq(w.len, 0);
	proto_file_write_cleanup(&w);
}
END_TEST

START_TEST(write_refusals)
{
	struct proto_file_write w = {NULL, NULL, 0};
	char why[96];

	ck_assert_int_eq(write_decode("{\"path\":", &w, why), -EBADMSG);
	ck_assert_int_eq(write_decode("{\"path\":\"a\"}", &w, why), -EINVAL);
	ck_assert_int_eq(write_decode("{\"contentsBase64\":\"\"}", &w, why),
			 -EINVAL);
	ck_assert_int_eq(write_decode("{\"path\":null,\"contentsBase64\":\"\"}",
				      &w, why),
			 -EINVAL);
	/* A real NUL escape is refused; an escaped backslash before "u0000"
	 * is just text. */
	ck_assert_int_eq(write_decode("{\"path\":\"a\\u0000b\","
				      "\"contentsBase64\":\"\"}",
				      &w, why),
			 -EINVAL);
	ck_assert_int_eq(write_decode("{\"path\":\"a\\\\u0000b\","
				      "\"contentsBase64\":\"\"}",
				      &w, why),
			 0);
	ck_assert_str_eq(w.path, "a\\u0000b");
	proto_file_write_cleanup(&w);
	ck_assert_int_eq(write_decode("{\"path\":\"a\\\\\\u0000b\","
				      "\"contentsBase64\":\"\"}",
				      &w, why),
			 -EINVAL);
}
END_TEST

START_TEST(write_base64_reasons)
{
	static const struct {
		const char *b64, *why;
	} cases[] = {
		{"aGV!bG8=", "Invalid symbol 33, offset 3."},
		{"aGVsbG8", "Invalid padding"},
		{"aGVsb", "Invalid input length: 5"},
		{"aGVsbG9=", "Invalid last symbol 57, offset 6."},
		{"aGVsbGx=", "Invalid last symbol 120, offset 6."},
		{"aA==aGVs", "Invalid symbol 61, offset 2."},
		{"a===", "Invalid symbol 61, offset 1."},
		{"aGVs-G8=", "Invalid symbol 45, offset 4."},
	};
	struct proto_file_write w;
	char body[256], why[96];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(body, sizeof(body),
			 "{\"path\":\"f\",\"contentsBase64\":\"%s\"}",
			 cases[i].b64);
		ck_assert_int_eq(write_decode(body, &w, why), -EILSEQ);
		ck_assert_msg(strcmp(why, cases[i].why) == 0,
			      "%s: '%s', want '%s'", cases[i].b64, why,
			      cases[i].why);
	}
}
END_TEST

START_TEST(write_over_limit)
{
	/* One byte over, a multiple of 3: the base64 has no padding. */
	size_t n = PROTO_MAX_TRANSFER_BYTES + 1, elen = n / 3 * 4, i;
	char *body = malloc(elen + 64);
	struct proto_file_write w = {NULL, NULL, 0};
	size_t off;

	ck_assert_ptr_nonnull(body);
	off = (size_t)sprintf(body, "{\"path\":\"f\",\"contentsBase64\":\"");
	for (i = 0; i < elen; i++)
		body[off + i] = 'A';
	strcpy(body + off + elen, "\"}");
	ck_assert_int_eq(proto_file_write_decode(body, strlen(body), &w),
			 -EFBIG);
	/* The size, for the message; nothing else is handed out. */
	ck_assert_uint_eq(w.len, n);
	ck_assert_ptr_null(w.path);
	ck_assert_ptr_null(w.data);
	free(body);
}
END_TEST

START_TEST(path_body)
{
	char *p = NULL;

	tx_str_body_round_trip(proto_path_encode, proto_path_decode,
			       "a b/\xc3\xa9", "{\"path\":\"a b/\xc3\xa9\"}");
	ck_assert_int_eq(proto_path_decode(LIT("{}"), &p), -EINVAL);
	ck_assert_int_eq(proto_path_decode(LIT("{\"path\":3}"), &p), -EINVAL);
	ck_assert_int_eq(proto_path_decode(LIT("nope"), &p), -EBADMSG);
	ck_assert_int_eq(proto_path_decode(LIT("{\"path\":\"\\u0000\"}"), &p),
			 -EINVAL);
	/* Not NUL-terminated input is read to its length only. */
	ck_assert_int_eq(proto_path_decode("{\"path\":\"x\"}GARBAGE", 12, &p),
			 0);
	ck_assert_str_eq(p, "x");
	free(p);
}
END_TEST

void proto_files_cases(Suite *s)
{
	TCASE_TABLE(s, "v1", NULL, NULL, 0, contents_round_trip,
		    contents_in_pieces, contents_refusals, write_round_trip,
		    write_refusals, write_base64_reasons, write_over_limit,
		    path_body);
}
