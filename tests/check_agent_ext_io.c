/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_ext_io: the file extension's writes that set times or
 * create the file (PUT write with atime, mtime, create and exclusive) and
 * GET contents, a directory's small files in one answer, against a real
 * sandbox-agent, with exact statuses and bodies.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/fsops.h"
#include "agent/resolve.h"
#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "tests/check_suites.h"
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"

/* ---- PUT write with times ------------------------------------------------ */

static void lstat_root(const char *rel, struct stat *st)
{
	ta_lstat_at(ta_ag.root, rel, st);
}

static void assert_ts(const struct timespec *ts, long long sec, long nsec)
{
	ck_assert_msg(ts->tv_sec == sec && ts->tv_nsec == nsec,
		      "time %lld.%09ld, wanted %lld.%09ld",
		      (long long)ts->tv_sec, ts->tv_nsec, sec, nsec);
}

/* PUT write of the n bytes data to rel with the query how; its 200
 * attribute answer, which must match lstat of rel (ta_expect_attr). */
static struct proto_attr write_attr(const char *rel, const char *how,
				    const void *data, size_t n)
{
	struct th_resp r;

	ta_ext_write(&ta_ag, rel, how, data, n, &r);
	return ta_expect_attr(ta_ag.root, &r, rel, NULL);
}

/* PUT write of the n bytes data to rel with the query how, whose answer
 * must have the given status (its body not looked at). */
static void write_status(const char *rel, const char *how, const void *data,
			 size_t n, long status)
{
	struct th_resp r;

	ta_ext_write(&ta_ag, rel, how, data, n, &r);
	ck_assert_int_eq(r.status, status);
	th_resp_cleanup(&r);
}

START_TEST(wire_write_times)
{
	struct timespec before, after;
	struct proto_attr a;
	struct th_resp r;
	struct stat st;

	ta_put_file(ta_ag.root, "t", "");

	/* both given: exactly those, after the bytes */
	a = write_attr("t",
		       "offset=0&atime=1000000000.000000005"
		       "&mtime=1500000000.123456789",
		       "abc", 3);
	ck_assert_uint_eq(a.size, 3);
	ck_assert_int_eq(a.atime, 1000000000);
	ck_assert_uint_eq(a.atime_ns, 5);
	ck_assert_int_eq(a.mtime, 1500000000);
	ck_assert_uint_eq(a.mtime_ns, 123456789);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, 1000000000, 5);
	assert_ts(&st.st_mtim, 1500000000, 123456789);
	ta_expect_contents(ta_ag.root, "t", "abc", 3);

	/* the fields of a timespec as they are: before the epoch too */
	ck_assert_uint_eq(
		write_attr("t", "append=1&atime=-1.500000000&mtime=0.000000000",
			   "d", 1)
			.size,
		4);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, -1, 500000000);
	assert_ts(&st.st_mtim, 0, 0);

	/* one given: the other is left alone (atime) or as the write left
	 * it (mtime) */
	ta_ext_write(&ta_ag, "t", "offset=0&mtime=1600000000.999999999", "A", 1,
		     &r);
	th_resp_cleanup(&r);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, -1, 500000000);
	assert_ts(&st.st_mtim, 1600000000, 999999999);
	clock_gettime(CLOCK_REALTIME, &before);
	ta_ext_write(&ta_ag, "t", "offset=1&atime=1234567890.000000001", "B", 1,
		     &r);
	th_resp_cleanup(&r);
	clock_gettime(CLOCK_REALTIME, &after);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, 1234567890, 1);
	ck_assert_int_ge(st.st_mtim.tv_sec, before.tv_sec - 1);
	ck_assert_int_le(st.st_mtim.tv_sec, after.tv_sec + 1);

	/* "omit" is absence */
	ta_ext_write(&ta_ag, "t", "offset=0&mtime=1000000000.000000000", "a", 1,
		     &r);
	th_resp_cleanup(&r);
	clock_gettime(CLOCK_REALTIME, &before);
	ta_ext_write(&ta_ag, "t", "offset=0&atime=omit&mtime=omit", "a", 1, &r);
	th_resp_cleanup(&r);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, 1234567890, 1);
	ck_assert_int_ge(st.st_mtim.tv_sec, before.tv_sec - 1);

	/* "now": the agent's clock, for both */
	ta_ext_write(&ta_ag, "t",
		     "offset=0&atime=1.000000000&mtime=1.000000000", "a", 1,
		     &r);
	th_resp_cleanup(&r);
	clock_gettime(CLOCK_REALTIME, &before);
	a = write_attr("t", "offset=0&atime=now&mtime=now", "a", 1);
	clock_gettime(CLOCK_REALTIME, &after);
	lstat_root("t", &st);
	ck_assert_int_ge(st.st_atim.tv_sec, before.tv_sec - 1);
	ck_assert_int_le(st.st_atim.tv_sec, after.tv_sec + 1);
	ck_assert_int_ge(st.st_mtim.tv_sec, before.tv_sec - 1);
	ck_assert_int_le(st.st_mtim.tv_sec, after.tv_sec + 1);
	ck_assert_int_eq(a.atime, st.st_atim.tv_sec);
	ck_assert_uint_eq(a.atime_ns, st.st_atim.tv_nsec);

	ta_expect_contents(ta_ag.root, "t", "aBcd", 4);

	/* times need what utimensat needs: on a file the agent's user does
	 * not own, a given time needs the owner's access, which root's agent
	 * has (root owns the sandbox: SEMANTICS.md, ownership) */
	if (geteuid() == 0) {
		char *p = ta_join(ta_ag.root, "theirs");

		th_write_file(p, "0123", 4);
		ck_assert(chmod(p, 0644) == 0);
		ck_assert_uint_eq(write_attr("theirs",
					     "offset=0&atime=now&mtime=now",
					     "a", 1)
					  .uid,
				  0);
		ck_assert_int_eq(write_attr("theirs",
					    "offset=1&mtime=1.000000000", "b",
					    1)
					 .mtime,
				 1);
		ta_expect_contents(ta_ag.root, "theirs", "ab23", 4);
		free(p);
	}
}
END_TEST

START_TEST(wire_write_times_malformed)
{
	static const char *const bad[] = {
		"",
		"1",
		"1.",
		"1.5",
		".000000001",
		"1.00000000",
		"1.0000000001",
		"1.00000000x",
		"1.-00000001",
		"x.000000000",
		"1e9.000000000",
		"99999999999999999999.000000000",
		"NOW",
		"now ",
		"Omit",
		"later",
	};
	struct stat st0, st;
	struct th_resp r;
	char how[128];
	size_t i;
	int which;

	ta_put_file(ta_ag.root, "t", "keep");
	lstat_root("t", &st0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (which = 0; which < 2; which++) {
			char *e = ta_qenc(bad[i]);

			snprintf(how, sizeof(how), "offset=0&%s=%s",
				 which ? "mtime" : "atime", e);
			free(e);
			ta_ext_write(&ta_ag, "t", how, "XXXXXXXX", 8, &r);
			ck_assert_msg(r.status == 400, "%s: %ld", how,
				      r.status);
			ta_expect_resp(
				&r, 400,
				"REQUEST_INVALID: Request invalid: atime and "
				"mtime must be SEC.NSEC, now or omit");
		}
	}
	/* one good, one bad: refused as well */
	ta_ext_write(&ta_ag, "t", "offset=0&atime=now&mtime=soon", "XXXXXXXX",
		     8, &r);
	ta_expect_resp(
		&r, 400,
		"REQUEST_INVALID: Request invalid: atime and mtime must be "
		"SEC.NSEC, now or omit");
	/* nothing was written, nothing moved */
	ta_expect_contents(ta_ag.root, "t", "keep", 4);
	lstat_root("t", &st);
	ck_assert_int_eq(st.st_size, 4);
	assert_ts(&st.st_mtim, st0.st_mtim.tv_sec, st0.st_mtim.tv_nsec);
	assert_ts(&st.st_ctim, st0.st_ctim.tv_sec, st0.st_ctim.tv_nsec);
}
END_TEST

/* ---- PUT write that creates (version 3) ------------------------------------ */

START_TEST(wire_write_create)
{
	struct proto_attr a;
	struct th_resp r;
	struct stat st;

	/* absent: made with exactly the mode, bytes and times in one go */
	a = write_attr("n",
		       "offset=0&create=640&exclusive=1&mtime=1000000000."
		       "000000007",
		       "new", 3);
	ck_assert_uint_eq(a.size, 3);
	ck_assert_uint_eq(a.perm, 0640);
	lstat_root("n", &st);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	assert_ts(&st.st_mtim, 1000000000, 7);
	ta_expect_contents(ta_ag.root, "n", "new", 3);

	/* exclusive and present: EEXIST, nothing written */
	ta_ext_write(&ta_ag, "n", "offset=0&create=600&exclusive=1", "XXXX", 4,
		     &r);
	ta_expect_resp(&r, 409, "FS_ERROR: EEXIST: File exists: n");
	ta_expect_contents(ta_ag.root, "n", "new", 3);

	/* not exclusive and present: written as it is, its mode kept */
	a = write_attr("n", "offset=3&create=600", "er", 2);
	ck_assert_uint_eq(a.size, 5);
	ck_assert_uint_eq(a.perm, 0640);

	/* an empty body makes an empty file; append creates too */
	ck_assert_uint_eq(
		write_attr("e", "offset=0&create=644&exclusive=true", "", 0)
			.size,
		0);
	lstat_root("e", &st);
	ck_assert(S_ISREG(st.st_mode) && st.st_size == 0);
	ck_assert_uint_eq(write_attr("ap", "append=1&create=600", "a", 1).size,
			  1);

	/* without create nothing is made */
	ta_ext_write(&ta_ag, "none", "offset=0", "a", 1, &r);
	ta_expect_resp(&r, 404,
		       "PATH_NOT_FOUND: No such file in the sandbox: none");

	/* malformed: refused before anything happens */
	write_status("bad", "offset=0&create=8", "a", 1, 400);
	write_status("bad", "offset=0&create=17777", "a", 1, 400);
	write_status("bad", "offset=0&create=", "a", 1, 400);
	ta_ext_write(&ta_ag, "bad", "offset=0&exclusive=1", "a", 1, &r);
	ta_expect_resp(&r, 400,
		       "REQUEST_INVALID: Request invalid: exclusive needs "
		       "create");
	write_status("bad", "offset=0&create=644&exclusive=2", "a", 1, 400);
	{
		char *p = ta_join(ta_ag.root, "bad");

		ck_assert(lstat(p, &st) < 0 && errno == ENOENT);
		free(p);
	}

	/* the path rules hold: no way out, no symlink followed in between */
	write_status("../out", "offset=0&create=644", "a", 1, 400);
}
END_TEST

/* ---- GET contents (version 4) ------------------------------------------------ */

struct got_file {
	char name[64];
	char data[64];
	size_t len;
	struct proto_attr a;
};

/* Decode an answer into files[] (at most max); the count. */
static size_t decode_contents(const struct th_resp *r, struct got_file *files,
			      size_t max)
{
	size_t pos = 0, n = 0;
	int rc;

	for (;;) {
		struct proto_dirent ent;
		const char *data;

		memset(&ent, 0, sizeof(ent));
		rc = proto_contents_next(r->body.data, r->body.len, &pos, &ent,
					 &data);
		ck_assert_int_ge(rc, 0);
		if (rc == 0)
			break;
		ck_assert_uint_lt(n, max);
		ck_assert_uint_lt(ent.attr.size, sizeof(files[n].data));
		snprintf(files[n].name, sizeof(files[n].name), "%s", ent.name);
		memcpy(files[n].data, data, ent.attr.size);
		files[n].len = ent.attr.size;
		files[n].a = ent.attr;
		free(ent.name);
		n++;
	}
	return n;
}

static const struct got_file *got_named(const struct got_file *files, size_t n,
					const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(files[i].name, name) == 0)
			return &files[i];
	return NULL;
}

START_TEST(wire_contents)
{
	struct got_file files[16];
	const struct got_file *g;
	char etag[PROTO_ETAG_MAX];
	struct th_resp r;
	struct stat st;
	size_t n;

	ta_make_dir(ta_ag.root, "c");
	ta_make_dir(ta_ag.root, "c/sub");
	ta_put_file(ta_ag.root, "c/a", "alpha");
	ta_put_file(ta_ag.root, "c/b", "");
	ta_put_file(ta_ag.root, "c/big", "0123456789abcdef0123456789");
	ta_put_file(ta_ag.root, "c/sub/deep", "not this one");
	{
		char *p = ta_join(ta_ag.root, "c/link");
		char *q = ta_join(ta_ag.root, "c/fifo");

		ck_assert(symlink("a", p) == 0);
		ck_assert(mkfifo(q, 0600) == 0);
		free(p);
		free(q);
	}

	/* regular files only, each whole, with its attributes */
	ta_ext_get(&ta_ag, "contents", "c", "&maxFile=20", NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.headers.data,
				     "Content-Type: application/octet-stream"));
	/* Streamed: each file goes out as it is read. */
	ck_assert_ptr_nonnull(
		strcasestr(r.headers.data, "Transfer-Encoding: chunked"));
	n = decode_contents(&r, files, 16);
	th_resp_cleanup(&r);
	ck_assert_uint_eq(n, 2);
	g = got_named(files, n, "a");
	ck_assert_ptr_nonnull(g);
	ck_assert(g->len == 5 && memcmp(g->data, "alpha", 5) == 0);
	lstat_root("c/a", &st);
	ck_assert_uint_eq(g->a.ino, st.st_ino);
	ck_assert_uint_eq(g->a.perm, st.st_mode & 07777);
	proto_attr_etag(&g->a, etag);
	ck_assert(etag[0] == '"');
	g = got_named(files, n, "b");
	ck_assert(g != NULL && g->len == 0);
	ck_assert_ptr_null(got_named(files, n, "big"));

	/* the default maxFile takes the big one too */
	ta_ext_get(&ta_ag, "contents", "c", NULL, NULL, &r);
	n = decode_contents(&r, files, 16);
	th_resp_cleanup(&r);
	ck_assert_uint_eq(n, 3);
	g = got_named(files, n, "big");
	ck_assert(g != NULL && g->len == 26);

	/* maxBytes ends the answer at the first file that does not fit */
	ta_ext_get(&ta_ag, "contents", "c", "&maxBytes=4", NULL, &r);
	n = decode_contents(&r, files, 16);
	th_resp_cleanup(&r);
	ck_assert_uint_le(n, 1);
	if (n == 1)
		ck_assert_str_eq(files[0].name, "b");

	/* the root, an empty answer, errors */
	ta_ext_get(&ta_ag, "contents", "", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);
	ta_ext_expect_get(&ta_ag, "contents", "c/sub/deep", NULL, 409,
			  "FS_ERROR: ENOTDIR: Not a directory: c/sub/deep");
	ta_ext_expect_missing(&ta_ag, "contents", "nowhere");
	ta_ext_get(&ta_ag, "contents", "../x", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 400);
	th_resp_cleanup(&r);
	ta_ext_get(&ta_ag, "contents", "c/link", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 409);
	th_resp_cleanup(&r);
	ta_ext_expect_get(
		&ta_ag, "contents", "c", "&maxFile=1048577", 400,
		"REQUEST_INVALID: Request invalid: maxFile must be at "
		"most 1048576");
	ta_ext_expect_get(&ta_ag, "contents", "c", "&maxBytes=x", 400,
			  "REQUEST_INVALID: Request invalid: maxBytes must be "
			  "at most 16777216");
}
END_TEST

void agent_ext_io_cases(Suite *s)
{
	TCASE_TABLE(s, "io", ta_agent_setup, ta_agent_teardown, 120,
		    wire_write_times, wire_write_times_malformed,
		    wire_write_create, wire_contents);
}
