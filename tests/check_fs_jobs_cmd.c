/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_jobs_cmd: what a write to exec becomes (fs_jobs_store.c): a
 * shell line or a JSON request, their refusals and bounds, the cmd file,
 * and the shell line a native exec gets. A job's life after it starts is
 * check_fs_jobs.c's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/proto_exec.h"
#include "fs/fs_jobs_i.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

#define TIMEOUT_MS 86400000ULL

static char why[256];

static int parse(const char *text, struct fs_cmd *c)
{
	why[0] = '\0';
	return fs_cmd_parse(text, strlen(text), TIMEOUT_MS, c, why,
			    sizeof(why));
}

/* ---- commands ------------------------------------------------------------ */

START_TEST(cmd_shell_line)
{
	struct fs_cmd c;

	ck_assert_int_eq(parse("  make test \n", &c), 0);
	ck_assert_str_eq(c.line, "make test");
	ck_assert_uint_eq(c.req.argc, 3);
	ck_assert_str_eq(c.req.argv[0], "/bin/sh");
	ck_assert_str_eq(c.req.argv[1], "-c");
	ck_assert_str_eq(c.req.argv[2], "make test");
	ck_assert_ptr_null(c.req.argv[3]);
	ck_assert_uint_eq(c.req.timeout_ms, TIMEOUT_MS);
	ck_assert_ptr_null(c.req.cwd);
	ck_assert_uint_eq(c.req.envc, 0);
	ck_assert_ptr_null(proto_exec_req_validate(&c.req));
	fs_cmd_cleanup(&c);

	/* Inner newlines stay: the text is one script for sh -c. */
	ck_assert_int_eq(parse("\techo a\necho b\r\n\n", &c), 0);
	ck_assert_str_eq(c.line, "echo a\necho b");
	fs_cmd_cleanup(&c);
}
END_TEST

START_TEST(cmd_json_request)
{
	struct fs_cmd c;

	ck_assert_int_eq(parse(" {\"command\":[\"ls\",\"-l\",\"a b\"],"
			       "\"cwd\":\"sub/dir\",\"env\":{\"A\":\"1\","
			       "\"B\":\"x=y\"},\"timeoutMs\":1500}\n",
			       &c),
			 0);
	ck_assert_ptr_null(c.line);
	ck_assert_uint_eq(c.req.argc, 3);
	ck_assert_str_eq(c.req.argv[0], "ls");
	ck_assert_str_eq(c.req.argv[1], "-l");
	ck_assert_str_eq(c.req.argv[2], "a b");
	ck_assert_str_eq(c.req.cwd, "sub/dir");
	ck_assert_uint_eq(c.req.envc, 2);
	ck_assert_str_eq(c.req.env[0], "A=1");
	ck_assert_str_eq(c.req.env[1], "B=x=y");
	ck_assert_uint_eq(c.req.timeout_ms, 1500);
	fs_cmd_cleanup(&c);
}
END_TEST

START_TEST(cmd_json_timeout_default)
{
	struct fs_cmd c;

	/* missing */
	ck_assert_int_eq(parse("{\"command\":[\"true\"]}", &c), 0);
	ck_assert_uint_eq(c.req.timeout_ms, TIMEOUT_MS);
	fs_cmd_cleanup(&c);
	/* null */
	ck_assert_int_eq(
		parse("{\"command\":[\"true\"],\"timeoutMs\":null}", &c), 0);
	ck_assert_uint_eq(c.req.timeout_ms, TIMEOUT_MS);
	fs_cmd_cleanup(&c);
	/* the legacy spelling is the user's, not replaced */
	ck_assert_int_eq(parse("{\"command\":[\"true\"],\"deadlineMs\":7}", &c),
			 0);
	ck_assert_uint_eq(c.req.timeout_ms, 7);
	fs_cmd_cleanup(&c);
	/* a bad timeout is not papered over by the default */
	ck_assert_int_eq(
		parse("{\"command\":[\"true\"],\"timeoutMs\":\"9\"}", &c),
		-EINVAL);
	ck_assert_int_eq(parse("{\"command\":[\"true\"],\"timeoutMs\":-1}", &c),
			 -EINVAL);
}
END_TEST

START_TEST(cmd_refused)
{
	static const char *const bad[] = {
		"",
		"   \n",
		"\n\n\t",
		"{",
		"{}",
		"{\"command\":[]}",
		"{\"command\":\"ls\"}",
		"{\"command\":[\"ls\"],\"timeoutMs\":0}",
		"{\"command\":[\"ls\"],\"env\":{\"\":\"v\"}}",
		"{\"command\":[\"ls\"],\"env\":{\"A=B\":\"v\"}}",
		"{\"command\":[\"ls\"],\"env\":{\"A\":\"v\\u0000w\"}}",
		"{\"command\":[\"l\\u0000s\"]}",
		"{\"command\":[\"ls\"],\"cwd\":\"a\\u0000\"}",
		"{\"command\":[\"ls\"]} trailing",
	};
	struct fs_cmd c;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(parse(bad[i], &c) == -EINVAL, "accepted: %s",
			      bad[i]);
		/* and says why, for the log */
		ck_assert_msg(why[0] != '\0', "no reason for %s", bad[i]);
	}
	ck_assert_int_eq(parse(" \n", &c), -EINVAL);
	ck_assert_str_eq(why, "the request is empty");
	ck_assert_int_eq(parse("{bad", &c), -EINVAL);
	ck_assert_str_eq(why, "the request is not valid JSON");
	ck_assert_int_eq(parse("{\"command\":\"ls\"}", &c), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "\"command\", an array of strings"));
	ck_assert_int_eq(parse("{\"command\":[]}", &c), -EINVAL);
	ck_assert_str_eq(why, "the JSON request is invalid: command is empty");
	/* a NUL byte in a shell line */
	ck_assert_int_eq(fs_cmd_parse("echo a\0b\n", 9, TIMEOUT_MS, &c, why,
				      sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "the shell script holds a NUL byte");
}
END_TEST

START_TEST(cmd_too_long)
{
	size_t n = FS_CMD_MAX + 1;
	char *text = malloc(n);
	struct fs_cmd c;

	ck_assert_ptr_nonnull(text);
	memset(text, 'x', n);
	ck_assert_int_eq(fs_cmd_parse(text, n, TIMEOUT_MS, &c, NULL, 0),
			 -EFBIG);
	/* whitespace around does not count */
	memset(text, ' ', n);
	memcpy(text + 10, "true", 4);
	ck_assert_int_eq(fs_cmd_parse(text, n, TIMEOUT_MS, &c, NULL, 0), 0);
	ck_assert_str_eq(c.line, "true");
	fs_cmd_cleanup(&c);
	free(text);
}
END_TEST

START_TEST(cmd_file_json)
{
	struct timespec ts = {1700000000, 0};
	struct buf b = BUF_INIT(0);
	struct fs_cmd c;

	ck_assert_int_eq(parse("{\"command\":[\"echo\",\"a\\\"b\"],"
			       "\"env\":{\"SECRET\":\"hunter2\",\"K\":\"v\"},"
			       "\"timeoutMs\":5000}",
			       &c),
			 0);
	ck_assert_int_eq(fs_cmd_json(&c, &ts, &b), 0);
	ck_assert_str_eq(b.data,
			 "{\"command\":[\"echo\",\"a\\\"b\"],\"cwd\":null,"
			 "\"env\":[\"SECRET\",\"K\"],\"timeoutMs\":5000,"
			 "\"startedAt\":\"2023-11-14T22:13:20Z\"}\n");
	ck_assert_ptr_null(strstr(b.data, "hunter2"));
	fs_cmd_cleanup(&c);
	buf_reset(&b);

	ck_assert_int_eq(parse("make test\n", &c), 0);
	ck_assert_int_eq(fs_cmd_json(&c, &ts, &b), 0);
	ck_assert_str_eq(b.data,
			 "{\"command\":[\"/bin/sh\",\"-c\",\"make test\"],"
			 "\"cwd\":null,\"env\":[],\"timeoutMs\":86400000,"
			 "\"startedAt\":\"2023-11-14T22:13:20Z\"}\n");
	fs_cmd_cleanup(&c);
	buf_reset(&b);

	ck_assert_int_eq(parse("{\"command\":[\"pwd\"],\"cwd\":\"src\"}", &c),
			 0);
	ck_assert_int_eq(fs_cmd_json(&c, &ts, &b), 0);
	ck_assert_str_eq(b.data, "{\"command\":[\"pwd\"],\"cwd\":\"src\","
				 "\"env\":[],\"timeoutMs\":86400000,"
				 "\"startedAt\":\"2023-11-14T22:13:20Z\"}\n");
	fs_cmd_cleanup(&c);
	buf_cleanup(&b);
}
END_TEST

START_TEST(cmd_native_shell_line)
{
	struct buf b = BUF_INIT(0);
	struct fs_cmd c;

	ck_assert_int_eq(parse("  ls -l | wc -l\n", &c), 0);
	ck_assert_int_eq(fs_cmd_shell(&c, &b), 0);
	ck_assert_str_eq(b.data, "ls -l | wc -l");
	fs_cmd_cleanup(&c);
	buf_reset(&b);

	ck_assert_int_eq(parse("{\"command\":[\"echo\",\"it's\",\"$HOME\","
			       "\"\"],\"env\":{\"A_1\":\"x y\"}}",
			       &c),
			 0);
	ck_assert_int_eq(fs_cmd_shell(&c, &b), 0);
	ck_assert_str_eq(b.data, "A_1='x y' 'echo' 'it'\\''s' '$HOME' ''");
	fs_cmd_cleanup(&c);
	buf_reset(&b);

	/* a name the shell cannot assign */
	ck_assert_int_eq(
		parse("{\"command\":[\"env\"],\"env\":{\"1A\":\"x\"}}", &c), 0);
	ck_assert_int_eq(fs_cmd_shell(&c, &b), -EINVAL);
	fs_cmd_cleanup(&c);
	ck_assert_int_eq(
		parse("{\"command\":[\"env\"],\"env\":{\"A-B\":\"x\"}}", &c),
		0);
	ck_assert_int_eq(fs_cmd_shell(&c, &b), -EINVAL);
	fs_cmd_cleanup(&c);
	buf_cleanup(&b);
}
END_TEST

void fs_jobs_cmd_cases(Suite *s)
{
	TCASE_TABLE(s, "cmd", NULL, NULL, 0, cmd_shell_line, cmd_json_request,
		    cmd_json_timeout_default, cmd_refused, cmd_too_long,
		    cmd_file_json, cmd_native_shell_line);
}
