/* SPDX-License-Identifier: MIT */
/*
 * Suite proto_exec: the exec bodies (doc/protocol-v1.md 3.6, proto_exec.c)
 * as pure functions: request decoding in both spellings and its
 * validation, the four frame types and the NDJSON splitter. The job
 * bodies are check_proto_jobs.c's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/proto_exec_helpers.h"

/* ---- requests ----------------------------------------------------------- */

START_TEST(req_newest_spelling)
{
	struct proto_exec_req r;

	te_req_ok("{\"command\":[\"echo\",\"a; $(false)\"],"
		  "\"timeoutMs\":5000,\"cwd\":null,\"env\":{}}",
		  &r);
	ck_assert_uint_eq(r.argc, 2);
	ck_assert_str_eq(r.argv[0], "echo");
	ck_assert_str_eq(r.argv[1], "a; $(false)");
	ck_assert_ptr_null(r.argv[2]);
	ck_assert_uint_eq(r.timeout_ms, 5000);
	ck_assert_ptr_null(r.cwd);
	ck_assert_uint_eq(r.envc, 0);
	ck_assert_ptr_null(r.env[0]);
	ck_assert_uint_eq(r.flags, 0);
	ck_assert_ptr_null(proto_exec_req_validate(&r));
	proto_exec_req_cleanup(&r);
}
END_TEST

START_TEST(req_legacy_spelling)
{
	struct proto_exec_req r;

	te_req_ok("{\"command\":[\"/bin/pwd\"],\"deadlineMs\":7,"
		  "\"workingDirectory\":\"/work\","
		  "\"env\":{\"A\":\"1\",\"B\":\"x=y\"}}",
		  &r);
	ck_assert_uint_eq(r.timeout_ms, 7);
	ck_assert_str_eq(r.cwd, "/work");
	ck_assert_uint_eq(r.envc, 2);
	ck_assert_str_eq(r.env[0], "A=1");
	ck_assert_str_eq(r.env[1], "B=x=y");
	ck_assert_ptr_null(r.env[2]);
	proto_exec_req_cleanup(&r);

	/* The newer spelling wins when both are present. */
	te_req_ok("{\"command\":[\"x\"],\"deadlineMs\":7,"
		  "\"timeoutMs\":9,\"workingDirectory\":\"a\","
		  "\"cwd\":\"b\"}",
		  &r);
	ck_assert_uint_eq(r.timeout_ms, 9);
	ck_assert_str_eq(r.cwd, "b");
	proto_exec_req_cleanup(&r);

	/* A null cwd falls back to the other spelling, absent env is {}. */
	te_req_ok("{\"command\":[\"x\"],\"timeoutMs\":1,"
		  "\"cwd\":null,\"workingDirectory\":\"w\"}",
		  &r);
	ck_assert_str_eq(r.cwd, "w");
	ck_assert_uint_eq(r.envc, 0);
	proto_exec_req_cleanup(&r);
}
END_TEST

START_TEST(req_unknown_fields_ignored)
{
	struct proto_exec_req r;

	te_req_ok("{\"v\":1,\"op\":\"exec\",\"command\":[\"x\"],"
		  "\"timeoutMs\":18446744073709551615,"
		  "\"extra\":{\"deep\":[1,{\"cwd\":5}]}}",
		  &r);
	ck_assert_uint_eq(r.argc, 1);
	ck_assert_uint_eq(r.timeout_ms, UINT64_MAX);
	ck_assert_ptr_null(r.cwd);
	proto_exec_req_cleanup(&r);
}
END_TEST

START_TEST(req_shape_errors)
{
	static const char *const shape[] = {
		"[]",
		"{}",
		"{\"timeoutMs\":1}",
		"{\"command\":\"ls\",\"timeoutMs\":1}",
		"{\"command\":null,\"timeoutMs\":1}",
		"{\"command\":[\"a\",1],\"timeoutMs\":1}",
		"{\"command\":[\"a\"]}",
		"{\"command\":[\"a\"],\"timeoutMs\":\"5\"}",
		"{\"command\":[\"a\"],\"timeoutMs\":-1}",
		"{\"command\":[\"a\"],\"timeoutMs\":1.5}",
		"{\"command\":[\"a\"],\"timeoutMs\":1,\"cwd\":5}",
		"{\"command\":[\"a\"],\"timeoutMs\":1,\"env\":[]}",
		"{\"command\":[\"a\"],\"timeoutMs\":1,\"env\":{\"A\":1}}",
		"{\"command\":[\"a\"],\"timeoutMs\":1,\"env\":{\"A\":null}}",
	};
	static const char *const notjson[] = {
		"", "{", "{\"command\":[\"a\"],}", "nope", "{} {}",
	};
	struct proto_exec_req r;
	size_t i;

	for (i = 0; i < sizeof(shape) / sizeof(shape[0]); i++)
		ck_assert_msg(te_req_decode(shape[i], &r) == -EINVAL, "%s",
			      shape[i]);
	for (i = 0; i < sizeof(notjson) / sizeof(notjson[0]); i++)
		ck_assert_msg(te_req_decode(notjson[i], &r) == -EBADMSG, "%s",
			      notjson[i]);
}
END_TEST

static const char *reason_of(const char *json)
{
	struct proto_exec_req r;
	const char *reason;

	te_req_ok(json, &r);
	reason = proto_exec_req_validate(&r);
	proto_exec_req_cleanup(&r);
	return reason ? reason : "(valid)";
}

START_TEST(req_validation_reasons)
{
	ck_assert_str_eq(reason_of("{\"command\":[],\"timeoutMs\":1}"),
			 "command is empty");
	ck_assert_str_eq(reason_of("{\"command\":[\"a\"],\"timeoutMs\":0}"),
			 "a command must carry a non-zero deadline");
	ck_assert_str_eq(reason_of("{\"command\":[\"a\"],\"timeoutMs\":1,"
				   "\"env\":{\"A\":\"x\\u0000y\"}}"),
			 "an environment entry contains a NUL byte");
	ck_assert_str_eq(reason_of("{\"command\":[\"a\"],\"timeoutMs\":1,"
				   "\"env\":{\"A\\u0000\":\"x\"}}"),
			 "an environment entry contains a NUL byte");
	ck_assert_str_eq(reason_of("{\"command\":[\"a\"],\"timeoutMs\":1,"
				   "\"env\":{\"\":\"x\"}}"),
			 "an environment name must be non-empty and contain "
			 "no '='");
	ck_assert_str_eq(reason_of("{\"command\":[\"a\"],\"timeoutMs\":1,"
				   "\"env\":{\"A=B\":\"x\"}}"),
			 "an environment name must be non-empty and contain "
			 "no '='");
	/* An escaped backslash before "u0000" is not a NUL. */
	ck_assert_str_eq(reason_of("{\"command\":[\"a\"],\"timeoutMs\":1,"
				   "\"env\":{\"A\":\"\\\\u0000\"}}"),
			 "(valid)");
	/* A NUL outside env is not a validation failure. */
	ck_assert_str_eq(reason_of("{\"command\":[\"a\"],\"timeoutMs\":1,"
				   "\"other\":\"\\u0000\"}"),
			 "(valid)");
}
END_TEST

/* A request with a NUL where it matters or not: the flags it decodes
 * with, and its second argument and its cwd where the case names them
 * (NULL: not looked at). */
#define NCASES(v) (sizeof(v) / sizeof((v)[0]))

struct nul_case {
	const char *json;
	unsigned flags;
	const char *arg1, *cwd;
};

static const struct nul_case nul_cases[] = {
	{"{\"command\":[\"a\",\"b\\u0000c\"],\"timeoutMs\":1,\"cwd\":\"w\"}",
	 PROTO_EXEC_ARG_NUL, "b", NULL},
	{"{\"command\":[\"a\"],\"timeoutMs\":1,"
	 "\"workingDirectory\":\"w\\u0000x\"}",
	 PROTO_EXEC_CWD_NUL, NULL, NULL},
	/* The NUL is in the spelling that is not used. */
	{"{\"command\":[\"a\"],\"timeoutMs\":1,"
	 "\"workingDirectory\":\"w\\u0000x\",\"cwd\":\"ok\"}",
	 0, NULL, "ok"},
	/* Only the first "env" member counts, as for cJSON lookups. */
	{"{\"command\":[\"a\"],\"timeoutMs\":1,\"env\":{\"A\":\"1\"},"
	 "\"env\":{\"B\":\"\\u0000\"}}",
	 0, NULL, NULL},
};

START_TEST(req_nul_flags)
{
	const struct nul_case *c;
	struct proto_exec_req r;

	for (c = nul_cases; c < nul_cases + NCASES(nul_cases); c++) {
		te_req_ok(c->json, &r);
		ck_assert_uint_eq(r.flags, c->flags);
		if (c->arg1 != NULL)
			ck_assert_str_eq(r.argv[1], c->arg1);
		if (c->cwd != NULL)
			ck_assert_str_eq(r.cwd, c->cwd);
		proto_exec_req_cleanup(&r);
	}
}
END_TEST

START_TEST(req_env_last_key_wins)
{
	struct proto_exec_req r;

	te_req_ok("{\"command\":[\"a\"],\"timeoutMs\":1,"
		  "\"env\":{\"A\":\"1\",\"B\":\"2\",\"A\":\"3\"}}",
		  &r);
	ck_assert_uint_eq(r.envc, 2);
	ck_assert_str_eq(r.env[0], "A=3");
	ck_assert_str_eq(r.env[1], "B=2");
	proto_exec_req_cleanup(&r);
}
END_TEST

START_TEST(req_bounds)
{
	struct buf b = BUF_INIT(0);
	struct proto_exec_req r;
	int i;

	ck_assert_int_eq(buf_append_str(&b, "{\"timeoutMs\":1,\"command\":["),
			 0);
	for (i = 0; i <= PROTO_EXEC_MAX_ARGS; i++)
		ck_assert_int_eq(buf_append_str(&b, i ? ",\"a\"" : "\"a\""), 0);
	ck_assert_int_eq(buf_append_str(&b, "]}"), 0);
	ck_assert_int_eq(proto_exec_req_decode(b.data, b.len, &r), -EFBIG);
	buf_cleanup(&b);
}
END_TEST

START_TEST(req_encode_newest)
{
	static char a0[] = "sh", a1[] = "-c", a2[] = "echo \"hi\"";
	static char e0[] = "A=1", e1[] = "Q=x=\"y\"", w[] = "w";
	char *argv[] = {a0, a1, a2, NULL};
	char *env[] = {e0, e1, NULL};
	struct proto_exec_req r = {argv, 3, 5000, NULL, env, 2, 0, false};
	struct proto_exec_req back;
	struct buf b = BUF_INIT(0);

	ck_assert_int_eq(proto_exec_req_encode(&r, &b), 0);
	ck_assert_str_eq(b.data,
			 "{\"command\":[\"sh\",\"-c\",\"echo "
			 "\\\"hi\\\"\"],\"timeoutMs\":5000,\"cwd\":null,"
			 "\"env\":{\"A\":\"1\",\"Q\":\"x=\\\"y\\\"\"}}");
	ck_assert_int_eq(proto_exec_req_decode(b.data, b.len, &back), 0);
	ck_assert_str_eq(back.argv[2], "echo \"hi\"");
	ck_assert_str_eq(back.env[1], "Q=x=\"y\"");
	proto_exec_req_cleanup(&back);
	buf_cleanup(&b);

	r.cwd = w;
	r.envc = 0;
	r.env = NULL;
	ck_assert_int_eq(proto_exec_req_encode(&r, &b), 0);
	ck_assert_str_eq(b.data,
			 "{\"command\":[\"sh\",\"-c\",\"echo "
			 "\\\"hi\\\"\"],\"timeoutMs\":5000,\"cwd\":\"w\","
			 "\"env\":{}}");
	buf_cleanup(&b);
}
END_TEST

/* ---- frames ------------------------------------------------------------- */

START_TEST(frame_encode_all_types)
{
	char *s;
	struct proto_frame f = {.type = PROTO_FRAME_STDOUT,
				.data = (unsigned char *)"hello\n",
				.len = 6};

	s = te_frame_encode(&f);
	ck_assert_str_eq(
		s, "{\"t\":\"stdout\",\"seq\":0,\"data\":\"aGVsbG8K\"}\n");
	ck_assert_uint_eq(strlen(s) - 1, proto_frame_output_len(0, 6));
	free(s);

	f.type = PROTO_FRAME_STDERR;
	f.seq = 18446744073709551615ULL;
	f.len = 0;
	s = te_frame_encode(&f);
	ck_assert_str_eq(s, "{\"t\":\"stderr\",\"seq\":18446744073709551615,"
			    "\"data\":\"\"}\n");
	ck_assert_uint_eq(strlen(s) - 1, proto_frame_output_len(f.seq, 0));
	free(s);

	memset(&f, 0, sizeof(f));
	f.type = PROTO_FRAME_EXIT;
	f.code = -1;
	f.truncated = true;
	s = te_frame_encode(&f);
	ck_assert_str_eq(s,
			 "{\"t\":\"exit\",\"code\":-1,\"truncated\":true}\n");
	free(s);

	f.type = PROTO_FRAME_ERROR;
	f.err_code = (char *)"timeoutExceeded";
	f.err_message = (char *)"exceeded its \"300\"ms\ntimeout";
	s = te_frame_encode(&f);
	ck_assert_str_eq(s, "{\"t\":\"error\",\"code\":\"timeoutExceeded\","
			    "\"message\":\"exceeded its \\\"300\\\"ms\\n"
			    "timeout\"}\n");
	free(s);
}
END_TEST

START_TEST(frame_decode_all_types)
{
	struct proto_frame f;

	te_frame_ok("{\"t\":\"stdout\",\"seq\":7,\"data\":"
		    "\"aGVsbG8K\",\"extra\":1}",
		    &f);
	ck_assert_int_eq(f.type, PROTO_FRAME_STDOUT);
	ck_assert_uint_eq(f.seq, 7);
	ck_assert_uint_eq(f.len, 6);
	ck_assert_mem_eq(f.data, "hello\n", 6);
	proto_frame_cleanup(&f);

	te_frame_ok("{\"data\":\"\",\"seq\":0,\"t\":\"stderr\"}", &f);
	ck_assert_int_eq(f.type, PROTO_FRAME_STDERR);
	ck_assert_uint_eq(f.len, 0);
	proto_frame_cleanup(&f);

	te_frame_ok("{\"t\":\"exit\",\"code\":137,"
		    "\"truncated\":true}",
		    &f);
	ck_assert_int_eq(f.type, PROTO_FRAME_EXIT);
	ck_assert_int_eq(f.code, 137);
	ck_assert(f.truncated);
	proto_frame_cleanup(&f);

	/* A missing truncated flag reads as false. */
	te_frame_ok("{\"t\":\"exit\",\"code\":-1}", &f);
	ck_assert_int_eq(f.code, -1);
	ck_assert(!f.truncated);
	proto_frame_cleanup(&f);

	te_frame_ok("{\"t\":\"error\",\"code\":\"spawnFailed\","
		    "\"message\":\"No such file\"}",
		    &f);
	ck_assert_int_eq(f.type, PROTO_FRAME_ERROR);
	ck_assert_str_eq(f.err_code, "spawnFailed");
	ck_assert_str_eq(f.err_message, "No such file");
	proto_frame_cleanup(&f);
}
END_TEST

START_TEST(frame_decode_refusals)
{
	static const char *const bad[] = {
		"{\"t\":\"progress\",\"seq\":1,\"data\":\"\"}",
		"{\"t\":\"STDOUT\",\"seq\":1,\"data\":\"\"}",
		"{\"seq\":1,\"data\":\"\"}",
		"{\"t\":\"stdout\",\"data\":\"\"}",
		"{\"t\":\"stdout\",\"seq\":1}",
		"{\"t\":\"stdout\",\"seq\":-1,\"data\":\"\"}",
		"{\"t\":\"stdout\",\"seq\":1,\"data\":\"aGVsbG8\"}",
		"{\"t\":\"stdout\",\"seq\":1,\"data\":\"aGV sbG8=\"}",
		"{\"t\":\"stdout\",\"seq\":1,\"data\":\"-_8=\"}",
		"{\"t\":\"exit\"}",
		"{\"t\":\"exit\",\"code\":4294967296}",
		"{\"t\":\"exit\",\"code\":1,\"truncated\":1}",
		"{\"t\":\"error\",\"code\":\"x\"}",
		"{\"t\":\"error\",\"message\":\"x\"}",
		"[\"t\",\"exit\"]",
		"{\"t\":\"exit\",\"code\":0",
		"",
	};
	struct proto_frame f;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(te_frame_decode(bad[i], &f) == -EBADMSG, "%s",
			      bad[i]);
}
END_TEST

/* ---- the NDJSON splitter ------------------------------------------------- */

START_TEST(ndjson_split_across_feeds)
{
	static const char body[] = "{\"a\":1}\n\n{\"b\":2}\r\n\r\n{\"c\":3}\n";
	struct proto_ndjson s;
	const char *line;
	size_t len, i, got = 0;
	char seen[3][16];

	proto_ndjson_init(&s);
	/* One byte at a time: every line boundary falls inside a feed. */
	for (i = 0; i < sizeof(body) - 1; i++) {
		ck_assert_int_eq(proto_ndjson_feed(&s, body + i, 1), 0);
		while (proto_ndjson_next(&s, &line, &len) == 1) {
			ck_assert_uint_lt(got, 3);
			ck_assert_uint_lt(len, sizeof(seen[0]));
			memcpy(seen[got], line, len);
			seen[got][len] = '\0';
			got++;
		}
	}
	ck_assert_uint_eq(got, 3);
	ck_assert_str_eq(seen[0], "{\"a\":1}");
	ck_assert_str_eq(seen[1], "{\"b\":2}");
	ck_assert_str_eq(seen[2], "{\"c\":3}");
	ck_assert(!proto_ndjson_partial(&s));
	ck_assert_int_eq(proto_ndjson_feed(&s, "{\"d\"", 4), 0);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 0);
	ck_assert(proto_ndjson_partial(&s));
	proto_ndjson_cleanup(&s);
}
END_TEST

START_TEST(ndjson_many_lines_one_feed)
{
	static const char body[] = "1\n22\n\n333\n4444";
	struct proto_ndjson s;
	const char *line;
	size_t len;

	proto_ndjson_init(&s);
	ck_assert_int_eq(proto_ndjson_feed(&s, body, sizeof(body) - 1), 0);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 1);
	ck_assert_uint_eq(len, 1);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 1);
	ck_assert_uint_eq(len, 2);
	ck_assert_mem_eq(line, "22", 2);
	/* A feed while lines are still waiting keeps them. */
	ck_assert_int_eq(proto_ndjson_feed(&s, "4\n", 2), 0);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 1);
	ck_assert_mem_eq(line, "333", 3);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 1);
	ck_assert_uint_eq(len, 5);
	ck_assert_mem_eq(line, "44444", 5);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 0);
	ck_assert(!proto_ndjson_partial(&s));
	proto_ndjson_cleanup(&s);
}
END_TEST

START_TEST(ndjson_line_over_limit)
{
	size_t big = PROTO_MAX_LINE_BYTES + 1;
	char *p = malloc(big + 1);
	struct proto_ndjson s;
	const char *line;
	size_t len;

	ck_assert_ptr_nonnull(p);
	memset(p, 'x', big);
	p[big] = '\n';

	/* A complete line over the limit in one feed. */
	proto_ndjson_init(&s);
	ck_assert_int_eq(proto_ndjson_feed(&s, p, big + 1), -EFBIG);
	ck_assert_int_eq(proto_ndjson_feed(&s, "\n", 1), -EFBIG);
	proto_ndjson_cleanup(&s);

	/* The same line arriving in pieces fails before it is whole. */
	proto_ndjson_init(&s);
	ck_assert_int_eq(proto_ndjson_feed(&s, "ok\n", 3), 0);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 1);
	ck_assert_int_eq(proto_ndjson_feed(&s, p, big / 2), 0);
	ck_assert_int_eq(proto_ndjson_feed(&s, p, big - big / 2), -EFBIG);
	proto_ndjson_cleanup(&s);

	/* Exactly at the limit is accepted. */
	proto_ndjson_init(&s);
	ck_assert_int_eq(proto_ndjson_feed(&s, p + 1, big), 0);
	ck_assert_int_eq(proto_ndjson_next(&s, &line, &len), 1);
	ck_assert_uint_eq(len, PROTO_MAX_LINE_BYTES);
	proto_ndjson_cleanup(&s);
	free(p);
}
END_TEST

void proto_exec_cases(Suite *s)
{
	TCASE_TABLE(s, "request", NULL, NULL, 0, req_newest_spelling,
		    req_legacy_spelling, req_unknown_fields_ignored,
		    req_shape_errors, req_validation_reasons, req_nul_flags,
		    req_env_last_key_wins, req_bounds, req_encode_newest);
	TCASE_TABLE(s, "frame", NULL, NULL, 0, frame_encode_all_types,
		    frame_decode_all_types, frame_decode_refusals);
	TCASE_TABLE(s, "ndjson", NULL, NULL, 0, ndjson_split_across_feeds,
		    ndjson_many_lines_one_feed, ndjson_line_over_limit);
}
