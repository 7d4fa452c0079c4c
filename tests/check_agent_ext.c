/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_ext: the file extension. The "fsops" case calls the
 * confined primitives in-process on a temporary root; the "wire" case
 * talks to a real sandbox-agent over HTTP and checks exact statuses and
 * bodies (attributes are compared with lstat of the file on disk). When
 * the tests run as root the agent acts as nobody, so fixtures made here
 * are handed to that user. GET tree is suite agent_ext_tree, writes with
 * times or that create and GET contents agent_ext_io.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/fsops.h"
#include "agent/resolve.h"
#include "common/buf.h"
#include "common/fdio.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "tests/check_suites.h"
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"

/* ---- fsops in-process ---------------------------------------------------- */

static struct agent fa;
static char *froot;
static mode_t fumask;
static bool no_openat2;

static void fsops_setup(void)
{
	int fd;

	memset(&fa, 0, sizeof(fa));
	froot = th_tmpdir("fsops");
	fa.cfg.root = froot;
	fa.root_fd = open(froot, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert(fa.root_fd >= 0);
	fumask = umask(022);
	/* valgrind (3.19) does not know openat2: these cases then have
	 * nothing to test in-process (the wire case still runs them in the
	 * agent, outside valgrind). */
	fd = agent_resolve_open(&fa, "", O_PATH, 0, RESOLVE_EXT);
	no_openat2 = fd == -ENOSYS;
	fdio_close(fd);
}

static void fsops_teardown(void)
{
	umask(fumask);
	close(fa.root_fd);
	th_rmtree(froot);
	free(froot);
}

#define NEED_OPENAT2()                                      \
	do {                                                \
		if (no_openat2) {                           \
			fprintf(stderr,                     \
				"%s: openat2 unavailable, " \
				"skipped\n",                \
				__func__);                  \
			return;                             \
		}                                           \
	} while (0)

START_TEST(fsops_confinement)
{
	struct stat st;
	char *t = NULL;
	int fd;

	NEED_OPENAT2();
	ta_make_dir(froot, "sub");
	ta_put_file(froot, "sub/f", "inside");
	ta_make_link(froot, "in", "sub");
	ta_make_link(froot, "abs", "/etc");
	ta_make_link(froot, "up", "../..");
	ta_make_link(froot, "sub/back", "../sub/f");

	/* a symlink that stays beneath is followed in the middle */
	ck_assert_int_eq(fsops_stat(&fa, "in/f", &st, &t), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_ptr_null(t);
	/* ... and at the end only by operations that act on the target */
	ck_assert_int_eq(fsops_stat(&fa, "sub/back", &st, &t), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_str_eq(t, "../sub/f");
	free(t);
	fd = fsops_open_read(&fa, "sub/back", &st);
	ck_assert_int_ge(fd, 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_size, 6);
	close(fd);

	/* escapes, absolute or upward, are refused as escapes */
	ck_assert_int_eq(fsops_stat(&fa, "abs/passwd", &st, NULL),
			 -FSOPS_ESCAPED);
	ck_assert_int_eq(fsops_stat(&fa, "up/etc", &st, NULL), -FSOPS_ESCAPED);
	ck_assert_int_eq(fsops_open_read(&fa, "abs", &st), -FSOPS_ESCAPED);
	ck_assert_int_eq(fsops_chmod(&fa, "abs", 0777, &st), -FSOPS_ESCAPED);
	ck_assert_int_eq(fsops_mkdir(&fa, "up/x", 0755, &st), -FSOPS_ESCAPED);
	/* but the link itself is an entry like any other */
	ck_assert_int_eq(fsops_stat(&fa, "abs", &st, &t), 0);
	ck_assert_str_eq(t, "/etc");
	free(t);
	ck_assert_int_eq(fsops_readlink(&fa, "up", &t), 0);
	ck_assert_str_eq(t, "../..");
	free(t);

	/* the root itself */
	ck_assert_int_eq(fsops_stat(&fa, "", &st, &t), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_ptr_null(t);
	ck_assert_int_eq(fsops_rmdir(&fa, ""), -EBUSY);
	ck_assert_int_eq(fsops_unlink(&fa, ""), -EISDIR);
	ck_assert_int_eq(fsops_mkdir(&fa, "", 0755, &st), -EEXIST);
	ck_assert_int_eq(fsops_rename(&fa, "", "x", 0), -EBUSY);
	ck_assert_int_eq(fsops_readlink(&fa, "", &t), -EINVAL);
}
END_TEST

START_TEST(fsops_create_mode_exact)
{
	struct stat st;

	NEED_OPENAT2();
	umask(077);
	ck_assert_int_eq(fsops_create(&fa, "f", 0666, true, false, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0666);
	ck_assert_int_eq(fsops_mkdir(&fa, "d", 0775, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0775);
	ck_assert_int_eq(fsops_create(&fa, "f", 0600, true, false, &st),
			 -EEXIST);
	/* an existing file keeps its mode */
	ck_assert_int_eq(fsops_create(&fa, "f", 0600, false, false, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0666);
}
END_TEST

START_TEST(fsops_fifo_and_types)
{
	struct stat st;
	long long t0;
	char *p;

	NEED_OPENAT2();
	p = ta_join(froot, "fifo");
	t0 = th_now_ms();
	ck_assert(mkfifo(p, 0644) == 0);
	ck_assert_int_eq(fsops_open_read(&fa, "fifo", &st), -EINVAL);
	ck_assert_int_eq(
		fsops_write(&fa, "fifo", 0, false, "x", 1, NULL, NULL, &st),
		-ENXIO);
	ck_assert_int_lt(th_now_ms() - t0, 2000);
	ck_assert_int_eq(fsops_open_read(&fa, "", &st), -EISDIR);
	ck_assert_int_eq(fsops_truncate(&fa, "", 0, &st), -EISDIR);
	free(p);
}
END_TEST

struct collect {
	char seen[64];
	size_t n;
};

static int collect_entry(void *ud, const char *name, const struct stat *st,
			 const char *target)
{
	struct collect *c = ud;
	int i;

	(void)target;
	if (c->n >= 7)
		return FSOPS_LIST_FULL;
	ck_assert(S_ISREG(st->st_mode));
	ck_assert_int_eq(sscanf(name, "n%d", &i), 1);
	ck_assert(i >= 0 && i < 64);
	c->seen[i]++;
	c->n++;
	return 0;
}

START_TEST(fsops_list_pages_by_cookie)
{
	struct collect c;
	char name[16];
	int64_t cursor = 0, next = -1;
	bool more = true;
	int i, pages = 0;

	NEED_OPENAT2();
	for (i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		ta_put_file(froot, name, "");
	}
	memset(&c, 0, sizeof(c));
	while (more) {
		c.n = 0;
		ck_assert_int_eq(fsops_list(&fa, "", cursor, collect_entry, &c,
					    &more, &next),
				 0);
		pages++;
		if (more) {
			ck_assert_uint_eq(c.n, 7);
			ck_assert(next != 0);
		}
		cursor = next;
	}
	ck_assert_int_eq(pages, 8);
	for (i = 0; i < 50; i++)
		ck_assert_msg(c.seen[i] == 1, "n%d seen %d times", i,
			      c.seen[i]);
	ck_assert_int_eq(
		fsops_list(&fa, "n1", 0, collect_entry, &c, &more, &next),
		-ENOTDIR);
	ck_assert_int_eq(
		fsops_list(&fa, "none", 0, collect_entry, &c, &more, &next),
		-ENOENT);
}
END_TEST

/* ---- the wire ------------------------------------------------------------ */

START_TEST(wire_stat_and_errors)
{
	struct th_resp r;

	ta_make_dir(ta_ag.root, "d");
	ta_put_file(ta_ag.root, "d/f", "12345");

	ta_ext_get(&ta_ag, "stat", "d/f", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, "d/f", NULL);
	ta_ext_get(&ta_ag, "stat", "/d//./f", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, "d/f", NULL);
	/* the root, as "" and as "/" */
	ta_ext_get(&ta_ag, "stat", "", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, ".", NULL);
	ta_ext_get(&ta_ag, "stat", "/", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, ".", NULL);

	ta_ext_expect_missing(&ta_ag, "stat", "d/nope");
	ta_ext_expect_get(&ta_ag, "stat", "d/f/x", NULL, 409,
			  "FS_ERROR: ENOTDIR: Not a directory: d/f/x");
	ta_ext_expect_get(
		&ta_ag, "stat", "d/../d/f", NULL, 400,
		"PATH_REFUSED: Path 'd/../d/f' refused: path traverses upward");
	ta_ext_expect_get(
		&ta_ag, "stat", "..", NULL, 400,
		"PATH_REFUSED: Path '..' refused: path traverses upward");

	/* no path at all: an untyped 400 like v1's query rejection */
	ta_ext_req(&ta_ag, "GET", "stat", NULL, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert_ptr_null(strstr(r.body.data ? r.body.data : "", "_"));
	th_resp_cleanup(&r);

	/* unknown operation: the empty 404 of an unknown route; a known
	 * one with the wrong method: an empty 405 */
	ta_ext_req(&ta_ag, "GET", "frobnicate?path=x", NULL, NULL, NULL, 0, &r);
	ta_expect_resp(&r, 404, "");
	ta_ext_req(&ta_ag, "GET", "mkdir?path=x", NULL, NULL, NULL, 0, &r);
	ta_expect_resp(&r, 405, "");
	ta_ext_req(&ta_ag, "POST", "stat?path=x", "application/json", NULL,
		   "{}", 2, &r);
	ta_expect_resp(&r, 405, "");
	/* the extension's GET routes are not HEAD routes: an empty 405 */
	ta_ext_req(&ta_ag, "HEAD", "stat?path=x", NULL, NULL, NULL, 0, &r);
	ta_expect_resp(&r, 405, "");
}
END_TEST

START_TEST(wire_symlinks)
{
	struct th_resp r;

	ta_make_dir(ta_ag.root, "sub");
	ta_put_file(ta_ag.root, "sub/f", "inside");
	ta_make_link(ta_ag.root, "abs", "/etc");
	ta_make_link(ta_ag.root, "up", "../../..");

	/* made through the extension: the target is stored as given */
	ta_ext_post(&ta_ag, "symlink", "{\"path\":\"in\",\"target\":\"sub\"}",
		    &r);
	ta_expect_attr(ta_ag.root, &r, "in", "sub");
	ta_ext_post(&ta_ag, "symlink", "{\"path\":\"lf\",\"target\":\"sub/f\"}",
		    &r);
	ta_expect_attr(ta_ag.root, &r, "lf", "sub/f");
	ta_ext_expect_post(&ta_ag, "symlink",
			   "{\"path\":\"in\",\"target\":\"x\"}", 409,
			   "FS_ERROR: EEXIST: File exists: in");
	ta_ext_expect_post(&ta_ag, "symlink",
			   "{\"path\":\"e\",\"target\":\"\"}", 400,
			   "REQUEST_INVALID: Request invalid: a symlink target "
			   "cannot be empty");

	/* stat and readlink never follow the last component */
	ta_ext_get(&ta_ag, "stat", "in", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, "in", "sub");
	ta_ext_get(&ta_ag, "stat", "abs", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, "abs", "/etc");
	ta_ext_expect_get(&ta_ag, "readlink", "up", NULL, 200,
			  "{\"target\":\"../../..\"}");
	ta_ext_expect_get(&ta_ag, "readlink", "sub/f", NULL, 409,
			  "FS_ERROR: EINVAL: Invalid argument: sub/f");

	/* inside: followed in the middle, and at the end by read */
	ta_ext_get(&ta_ag, "stat", "in/f", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, "sub/f", NULL);
	ta_ext_expect_get(&ta_ag, "read", "lf", NULL, 200, "inside");
	ta_ext_get(&ta_ag, "list", "in", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body.data, "\"name\":\"f\""));
	th_resp_cleanup(&r);

	/* escaping: absolute or upward, refused wherever it is followed */
	ta_ext_expect_escape(&ta_ag, "stat", "abs/passwd");
	ta_ext_expect_escape(&ta_ag, "stat", "up/etc");
	ta_ext_expect_escape(&ta_ag, "read", "abs");
	ta_ext_expect_escape(&ta_ag, "list", "up");
	ta_ext_expect_post(
		&ta_ag, "chmod", "{\"path\":\"abs\",\"mode\":511}", 409,
		"FS_ERROR: ELOOP: path leaves the session root: abs");
	ta_ext_expect_post(&ta_ag, "create",
			   "{\"path\":\"up/tmp/x\",\"mode\":420}", 409,
			   "FS_ERROR: ELOOP: path leaves the session root: "
			   "up/tmp/x");
	ta_ext_write(&ta_ag, "abs", "offset=0", "x", 1, &r);
	ta_expect_resp(&r, 409,
		       "FS_ERROR: ELOOP: path leaves the session root: abs");
	/* a link's own times can be set even when its target escapes */
	ta_ext_post(
		&ta_ag, "utimens",
		"{\"path\":\"abs\",\"mtime\":{\"sec\":1000000000,\"nsec\":7},"
		"\"nofollow\":true}",
		&r);
	ck_assert_int_eq(ta_expect_attr(ta_ag.root, &r, "abs", "/etc").mtime,
			 1000000000);
	ta_ext_expect_post(
		&ta_ag, "utimens", "{\"path\":\"abs\",\"mtime\":\"now\"}", 409,
		"FS_ERROR: ELOOP: path leaves the session root: abs");
	/* unlinking the escaping link is fine: it is the link itself */
	ta_ext_expect_post(&ta_ag, "unlink", "{\"path\":\"abs\"}", 204, "");
}
END_TEST

START_TEST(wire_list_20000)
{
	/* query members refused, and the answer */
	static const struct {
		const char *more, *want;
	} bad[] = {
		{"&limit=0", "REQUEST_INVALID: Request invalid: limit must be "
			     "from 1 to 8192"},
		{"&limit=8193",
		 "REQUEST_INVALID: Request invalid: limit must be "
		 "from 1 to 8192"},
		{"&cursor=abc",
		 "REQUEST_INVALID: Request invalid: cursor is not "
		 "one this agent sent"},
	};
	char name[32], target[128];
	char *seen = calloc(20000, 1);
	struct proto_list l;
	char *cursor = NULL;
	struct th_resp r;
	int i, pages = 0, total = 0;

	ck_assert_ptr_nonnull(seen);
	ta_make_dir(ta_ag.root, "big");
	for (i = 0; i < 20000; i++) {
		char *p;
		int fd;

		snprintf(name, sizeof(name), "big/f%05d", i);
		p = ta_join(ta_ag.root, name);
		fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		ck_assert(fd >= 0);
		ck_assert(fchmod(fd, 0644) == 0);
		close(fd);
		free(p);
	}
	for (;;) {
		size_t k;

		if (cursor == NULL) {
			ta_ext_get(&ta_ag, "list", "big", "&limit=1000", NULL,
				   &r);
		} else {
			char *c = ta_qenc(cursor);

			snprintf(target, sizeof(target),
				 "&limit=1000&cursor=%s", c);
			free(c);
			ta_ext_get(&ta_ag, "list", "big", target, NULL, &r);
		}
		ck_assert_msg(r.status == 200, "page %d: %ld", pages, r.status);
		ck_assert_int_eq(proto_list_decode(r.body.data, r.body.len, &l),
				 0);
		th_resp_cleanup(&r);
		pages++;
		ck_assert_uint_le(l.n, 1000);
		for (k = 0; k < l.n; k++) {
			ck_assert_int_eq(sscanf(l.entries[k].name, "f%d", &i),
					 1);
			ck_assert(i >= 0 && i < 20000);
			ck_assert_msg(seen[i] == 0, "%s twice",
				      l.entries[k].name);
			seen[i] = 1;
			ck_assert_int_eq(l.entries[k].attr.type, PROTO_FT_FILE);
			ck_assert_uint_eq(l.entries[k].attr.perm, 0644);
			total++;
		}
		free(cursor);
		cursor = l.next;
		l.next = NULL;
		if (cursor != NULL)
			ck_assert_uint_eq(l.n, 1000);
		proto_list_cleanup(&l);
		if (cursor == NULL)
			break;
		ck_assert_int_lt(pages, 30);
	}
	ck_assert_int_eq(total, 20000);
	ck_assert_int_eq(pages, 20);
	free(seen);

	/* limits and cursors are checked */
	for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++)
		ta_ext_expect_get(&ta_ag, "list", "big", bad[i].more, 400,
				  bad[i].want);
	ta_ext_expect_get(&ta_ag, "list", "big/f00001", NULL, 409,
			  "FS_ERROR: ENOTDIR: Not a directory: big/f00001");
}
END_TEST

START_TEST(wire_list_attrs)
{
	struct proto_list l;
	struct th_resp r;
	size_t k;

	ta_make_dir(ta_ag.root, "d");
	ta_put_file(ta_ag.root, "d/a \"q\"", "xyz");
	ta_put_file(ta_ag.root, "d/caf\xc3\xa9\n", "");
	ta_make_link(ta_ag.root, "d/l", "a \"q\"");
	ta_make_dir(ta_ag.root, "d/sub");
	ta_ext_get(&ta_ag, "list", "d", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(proto_list_decode(r.body.data, r.body.len, &l), 0);
	th_resp_cleanup(&r);
	ck_assert_uint_eq(l.n, 4);
	ck_assert_ptr_null(l.next);
	for (k = 0; k < l.n; k++) {
		const struct proto_dirent *e = &l.entries[k];
		struct stat st;
		char rel[64];

		snprintf(rel, sizeof(rel), "d/%s", e->name);
		ta_lstat_at(ta_ag.root, rel, &st);
		ck_assert_uint_eq(e->attr.ino, st.st_ino);
		ck_assert_uint_eq(e->attr.size, (uint64_t)st.st_size);
		ck_assert_uint_eq(e->attr.perm, st.st_mode & 07777);
		if (strcmp(e->name, "l") == 0) {
			ck_assert_int_eq(e->attr.type, PROTO_FT_SYMLINK);
			ck_assert_str_eq(e->target, "a \"q\"");
		} else {
			ck_assert_ptr_null(e->target);
		}
	}
	proto_list_cleanup(&l);
	/* the root is listed too, without "." or ".." */
	ta_ext_get(&ta_ag, "list", "/", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(proto_list_decode(r.body.data, r.body.len, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.entries[0].name, "d");
	proto_list_cleanup(&l);
	th_resp_cleanup(&r);
}
END_TEST

/* The header name of r is want (NULL: r has none). */
static void expect_header(const struct th_resp *r, const char *name,
			  const char *want)
{
	char *h = th_resp_header(r, name);

	if (want == NULL)
		ck_assert_ptr_null(h);
	else
		ck_assert_str_eq(h, want);
	free(h);
}

/* A read of path with the header range: its status and Content-Range.
 * The body is the caller's to check, and r to clean up. */
static void read_range(const char *path, const char *range, long status,
		       const char *content_range, struct th_resp *r)
{
	ta_ext_get(&ta_ag, "read", path, NULL, range, r);
	ck_assert_int_eq(r->status, status);
	expect_header(r, "Content-Range", content_range);
}

START_TEST(wire_read_ranges)
{
	char data[10000], hdr[160], etag[PROTO_ETAG_MAX];
	char *h, *old_etag;
	struct proto_attr a;
	struct th_resp r;
	size_t i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	{
		char *p = ta_join(ta_ag.root, "data");

		th_write_file(p, data, sizeof(data));
		ta_own(p);
		free(p);
	}
	ta_ext_get(&ta_ag, "stat", "data", NULL, NULL, &r);
	a = ta_expect_attr(ta_ag.root, &r, "data", NULL);
	proto_attr_etag(&a, etag);

	/* whole file */
	ta_ext_get(&ta_ag, "read", "data", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body.len, sizeof(data));
	ck_assert(memcmp(r.body.data, data, sizeof(data)) == 0);
	expect_header(&r, "ETag", etag);
	expect_header(&r, "X-Sandboxfs-Size", "10000");
	expect_header(&r, "Content-Type", "application/octet-stream");
	h = th_resp_header(&r, "Last-Modified");
	ck_assert_ptr_nonnull(h);
	ck_assert_ptr_nonnull(strstr(h, " GMT"));
	free(h);
	expect_header(&r, "Content-Range", NULL);
	th_resp_cleanup(&r);

	/* ranges: a-b, a-, -n, past the end clipped */
	read_range("data", "Range: bytes=10-19", 206, "bytes 10-19/10000", &r);
	ck_assert_uint_eq(r.body.len, 10);
	ck_assert(memcmp(r.body.data, data + 10, 10) == 0);
	expect_header(&r, "X-Sandboxfs-Size", "10000");
	th_resp_cleanup(&r);
	read_range("data", "Range: bytes=9990-", 206, "bytes 9990-9999/10000",
		   &r);
	ck_assert_uint_eq(r.body.len, 10);
	th_resp_cleanup(&r);
	read_range("data", "Range: bytes=-5", 206, "bytes 9995-9999/10000", &r);
	ck_assert(r.body.len == 5 && memcmp(r.body.data, data + 9995, 5) == 0);
	th_resp_cleanup(&r);
	read_range("data", "Range: bytes=9998-99999999", 206,
		   "bytes 9998-9999/10000", &r);
	ck_assert_uint_eq(r.body.len, 2);
	th_resp_cleanup(&r);

	/* unsatisfiable, and not one range */
	read_range("data", "Range: bytes=10000-", 416, "bytes */10000", &r);
	th_resp_cleanup(&r);
	ta_ext_get(&ta_ag, "read", "data", NULL, "Range: bytes=1-2,5-6", &r);
	ta_expect_resp(&r, 400,
		       "REQUEST_INVALID: Request invalid: Range is not a "
		       "single byte range");
	ta_ext_get(&ta_ag, "read", "data", NULL, "Range: bytes=5-1", &r);
	ta_expect_resp(&r, 400,
		       "REQUEST_INVALID: Request invalid: Range is not a "
		       "single byte range");

	/* validators */
	snprintf(hdr, sizeof(hdr), "If-Match: %s", etag);
	ta_ext_get(&ta_ag, "read", "data", NULL, hdr, &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);
	ta_ext_get(&ta_ag, "read", "data", NULL, "If-Match: \"0-0-0.0\"", &r);
	ta_expect_resp(&r, 412, "FS_ERROR: ESTALE: the file changed: data");
	ta_ext_get(&ta_ag, "read", "data", NULL, "If-Range: \"0-0-0.0\"", &r);
	ta_expect_resp(&r, 412, "FS_ERROR: ESTALE: the file changed: data");
	ta_ext_get(&ta_ag, "read", "data", NULL, "If-Match: *", &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);

	/* a write changes the validator; the old one is then refused */
	old_etag = strdup(etag);
	ta_ext_write(&ta_ag, "data", "append=1", "!!", 2, &r);
	a = ta_expect_attr(ta_ag.root, &r, "data", NULL);
	ck_assert_uint_eq(a.size, 10002);
	proto_attr_etag(&a, etag);
	ck_assert_str_ne(etag, old_etag);
	ta_ext_get(&ta_ag, "read", "data", NULL, "Range: bytes=-2", &r);
	ck_assert_int_eq(r.status, 206);
	expect_header(&r, "ETag", etag);
	ck_assert(r.body.len == 2 && memcmp(r.body.data, "!!", 2) == 0);
	th_resp_cleanup(&r);
	snprintf(hdr, sizeof(hdr), "If-Match: %s", old_etag);
	ta_ext_get(&ta_ag, "read", "data", NULL, hdr, &r);
	ta_expect_resp(&r, 412, "FS_ERROR: ESTALE: the file changed: data");
	free(old_etag);

	/* not regular files */
	ta_make_dir(ta_ag.root, "dir");
	ta_ext_expect_get(&ta_ag, "read", "dir", NULL, 409,
			  "FS_ERROR: EISDIR: Is a directory: dir");
	ta_ext_expect_missing(&ta_ag, "read", "missing");

	/* an empty file: the whole of it is empty, any range is past it */
	ta_put_file(ta_ag.root, "empty", "");
	ta_ext_expect_get(&ta_ag, "read", "empty", NULL, 200, "");
	read_range("empty", "Range: bytes=0-", 416, "bytes */0", &r);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(wire_fifo_read_does_not_hang)
{
	char *p = ta_join(ta_ag.root, "fifo");
	long long t0;
	struct th_resp r;
	char url[256];
	const char *h[] = {ta_ag.auth, NULL};

	ck_assert(mkfifo(p, 0666) == 0);
	ta_own(p);
	free(p);
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/read?path=fifo",
		 ta_ag.base);
	t0 = th_now_ms();
	ck_assert_int_eq(th_http_timeout("GET", url, h, NULL, 0, 5000, &r), 0);
	ck_assert_int_lt(th_now_ms() - t0, 5000);
	ta_expect_resp(&r, 409, "FS_ERROR: EINVAL: Invalid argument: fifo");
	ta_ext_get(&ta_ag, "stat", "fifo", NULL, NULL, &r);
	ta_expect_attr(ta_ag.root, &r, "fifo", NULL);
}
END_TEST

/* Receive until the peer ends the connection or ms pass: the bytes
 * received, and *ended. */
static size_t recv_until_end(int s, long long ms, bool *ended)
{
	struct timeval tv = {0, 200 * 1000};
	long long t0 = th_now_ms();
	size_t got = 0;
	char buf[65536];
	ssize_t n;

	*ended = false;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (th_now_ms() - t0 < ms) {
		n = recv(s, buf, sizeof(buf), 0);
		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
				      errno != EINTR)) {
			*ended = true;
			break;
		}
	}
	return got;
}

/* A file that shrinks while its bytes are being sent: the answer, whose
 * length was promised, ends short at once instead of waiting for bytes
 * that will never come (the connection's 60 s idle timeout). */
START_TEST(wire_read_of_a_shrinking_file_ends)
{
	const size_t size = 64U << 20;
	char *p = ta_join(ta_ag.root, "shrinks");
	struct sockaddr_in sa;
	struct th_resp r;
	char req[512], first[4096];
	size_t got;
	bool ended;
	int fd, s;

	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
	ta_own(p);
	s = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(s, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)ta_ag.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(req, sizeof(req),
		 "GET /sandboxfs/v1/read?path=shrinks HTTP/1.1\r\nHost: x\r\n"
		 "%s\r\nConnection: close\r\n\r\n",
		 ta_ag.auth);
	ck_assert_int_eq(send(s, req, strlen(req), 0), (ssize_t)strlen(req));
	/* The answer is under way (the sockets hold far less than 64 MiB),
	 * then the file shrinks. */
	ck_assert_int_gt(recv(s, first, sizeof(first), MSG_WAITALL), 0);
	ck_assert_int_eq(truncate(p, 4096), 0);
	got = recv_until_end(s, 10000, &ended);
	close(s);
	ck_assert_msg(ended,
		      "the answer did not end within 10 s of the "
		      "file shrinking (%zu bytes received)",
		      got);
	ck_assert_uint_lt(got + sizeof(first), size);
	/* The agent goes on serving, the file at its new size. */
	ta_ext_get(&ta_ag, "read", "shrinks", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body.len, 4096);
	th_resp_cleanup(&r);
	free(p);
}
END_TEST

START_TEST(wire_write_and_create)
{
	struct proto_attr a;
	struct th_resp r;

	/* write never creates */
	ta_ext_write(&ta_ag, "w", "offset=0", "hello", 5, &r);
	ta_expect_resp(&r, 404,
		       "PATH_NOT_FOUND: No such file in the sandbox: w");
	ta_ext_post(&ta_ag, "create",
		    "{\"path\":\"w\",\"mode\":438,\"exclusive\":true}", &r);
	a = ta_expect_attr(ta_ag.root, &r, "w", NULL);
	/* the mode is exactly what was asked, whatever the agent's umask */
	ck_assert_uint_eq(a.perm, 0666);
	ck_assert_uint_eq(a.size, 0);
	/* created as the user the agent acts as, never as root */
	if (geteuid() == 0)
		ck_assert_uint_eq(a.uid, TA_NOBODY);
	else
		ck_assert_uint_eq(a.uid, geteuid());
	ta_ext_expect_post(&ta_ag, "create",
			   "{\"path\":\"w\",\"mode\":420,\"exclusive\":true}",
			   409, "FS_ERROR: EEXIST: File exists: w");

	ta_ext_write(&ta_ag, "w", "offset=0", "hello", 5, &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).size, 5);
	ta_ext_write(&ta_ag, "w", "offset=10", "X", 1, &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).size, 11);
	ta_ext_write(&ta_ag, "w", "append=1", "tail", 4, &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).size, 15);
	ta_ext_write(&ta_ag, "w", "offset=1", "EL", 2, &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).size, 15);
	ta_expect_contents(ta_ag.root, "w", "hELlo\0\0\0\0\0Xtail", 15);

	ta_ext_write(&ta_ag, "w", "offset=x", "a", 1, &r);
	ta_expect_resp(&r, 400,
		       "REQUEST_INVALID: Request invalid: offset is not a "
		       "byte offset");
	ta_ext_write(&ta_ag, "w", "append=1&offset=0", "a", 1, &r);
	ta_expect_resp(&r, 400,
		       "REQUEST_INVALID: Request invalid: offset and "
		       "append=1 exclude each other");
	ta_ext_write(&ta_ag, "w", "nothing=1", "a", 1, &r);
	ta_expect_resp(&r, 400,
		       "REQUEST_INVALID: Request invalid: a write needs "
		       "offset=N or append=1");
	ta_make_dir(ta_ag.root, "dir");
	ta_ext_write(&ta_ag, "dir", "offset=0", "a", 1, &r);
	ta_expect_resp(&r, 409, "FS_ERROR: EISDIR: Is a directory: dir");

	/* create without exclusive opens what is there; truncate empties */
	ta_ext_post(&ta_ag, "create", "{\"path\":\"w\",\"mode\":384}", &r);
	a = ta_expect_attr(ta_ag.root, &r, "w", NULL);
	ck_assert_uint_eq(a.size, 15);
	ck_assert_uint_eq(a.perm, 0666);
	ta_ext_post(&ta_ag, "create",
		    "{\"path\":\"w\",\"mode\":384,\"truncate\":true}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).size, 0);
	ta_ext_expect_post(
		&ta_ag, "create", "{\"path\":\"nodir/w\",\"mode\":384}", 404,
		"PATH_NOT_FOUND: No such file in the sandbox: nodir/w");
	ta_ext_expect_post(&ta_ag, "create", "{\"path\":\"dir\",\"mode\":384}",
			   409, "FS_ERROR: EISDIR: Is a directory: dir");

	/* truncate, chmod, fsync */
	ta_ext_write(&ta_ag, "w", "offset=0", "0123456789", 10, &r);
	th_resp_cleanup(&r);
	ta_ext_post(&ta_ag, "truncate", "{\"path\":\"w\",\"size\":3}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).size, 3);
	ta_ext_post(&ta_ag, "truncate", "{\"path\":\"w\",\"size\":\"4096\"}",
		    &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).size, 4096);
	ta_ext_expect_post(&ta_ag, "truncate", "{\"path\":\"dir\",\"size\":0}",
			   409, "FS_ERROR: EISDIR: Is a directory: dir");
	/* No set-user-id or set-group-id bit on a file through the
	 * extension: dropped (the sticky bit stays). */
	ta_ext_post(&ta_ag, "chmod", "{\"path\":\"w\",\"mode\":1536}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).perm,
			  01000);
	ta_ext_post(&ta_ag, "chmod", "{\"path\":\"w\",\"mode\":3565}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).perm, 0755);
	ta_ext_post(&ta_ag, "create", "{\"path\":\"suid\",\"mode\":3565}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "suid", NULL).perm,
			  0755);
	ta_ext_write(&ta_ag, "sgid", "offset=0&create=6755", "x", 1, &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "sgid", NULL).perm,
			  0755);
	/* A directory keeps its set-group-id (group inheritance). */
	ta_ext_post(&ta_ag, "mkdir", "{\"path\":\"gdir\",\"mode\":3581}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "gdir", NULL).perm,
			  02775);
	ta_ext_post(&ta_ag, "chmod", "{\"path\":\"gdir\",\"mode\":3565}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "gdir", NULL).perm,
			  02755);
	ta_ext_post(&ta_ag, "chmod", "{\"path\":\"w\",\"mode\":384}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "w", NULL).perm, 0600);
	ta_ext_expect_post(&ta_ag, "fsync", "{\"path\":\"w\"}", 204, "");
	ta_ext_expect_post(&ta_ag, "fsync", "{\"path\":\"gone\"}", 404,
			   "PATH_NOT_FOUND: No such file in the sandbox: gone");
}
END_TEST

START_TEST(wire_dirs_and_names)
{
	struct proto_attr a;
	struct th_resp r;
	size_t len;
	char *text;

	ta_ext_post(&ta_ag, "mkdir", "{\"path\":\"d\",\"mode\":511}", &r);
	a = ta_expect_attr(ta_ag.root, &r, "d", NULL);
	ck_assert_int_eq(a.type, PROTO_FT_DIR);
	ck_assert_uint_eq(a.perm, 0777);
	ta_ext_expect_post(&ta_ag, "mkdir", "{\"path\":\"d\",\"mode\":493}",
			   409, "FS_ERROR: EEXIST: File exists: d");
	ta_ext_expect_post(&ta_ag, "mkdir", "{\"path\":\"x/y\",\"mode\":493}",
			   404,
			   "PATH_NOT_FOUND: No such file in the sandbox: x/y");
	ta_put_file(ta_ag.root, "d/f", "one");
	ta_put_file(ta_ag.root, "g", "two");

	ta_ext_expect_post(&ta_ag, "rmdir", "{\"path\":\"d\"}", 409,
			   "FS_ERROR: ENOTEMPTY: Directory not empty: d");
	ta_ext_expect_post(&ta_ag, "rmdir", "{\"path\":\"g\"}", 409,
			   "FS_ERROR: ENOTDIR: Not a directory: g");
	ta_ext_expect_post(&ta_ag, "unlink", "{\"path\":\"d\"}", 409,
			   "FS_ERROR: EISDIR: Is a directory: d");
	ta_ext_expect_post(&ta_ag, "rmdir", "{\"path\":\"/\"}", 409,
			   "FS_ERROR: EBUSY: Device or resource busy: /");

	/* rename: replace by default, noreplace, exchange */
	ta_ext_expect_post(&ta_ag, "rename",
			   "{\"from\":\"g\",\"to\":\"d/f\",\"noreplace\":true}",
			   409, "FS_ERROR: EEXIST: File exists: g -> d/f");
	ta_put_file(ta_ag.root, "h", "three");
	ta_ext_expect_post(&ta_ag, "rename",
			   "{\"from\":\"g\",\"to\":\"h\",\"exchange\":true}",
			   204, "");
	text = ta_slurp(ta_ag.root, "g", &len);
	ck_assert_str_eq(text, "three");
	free(text);
	ta_ext_expect_post(&ta_ag, "rename", "{\"from\":\"g\",\"to\":\"d/f\"}",
			   204, "");
	text = ta_slurp(ta_ag.root, "d/f", &len);
	ck_assert_str_eq(text, "three");
	free(text);
	ta_ext_expect_missing(&ta_ag, "stat", "g");
	ta_ext_expect_post(
		&ta_ag, "rename", "{\"from\":\"nope\",\"to\":\"n2\"}", 404,
		"PATH_NOT_FOUND: No such file in the sandbox: nope -> "
		"n2");
	ta_ext_expect_post(&ta_ag, "rename",
			   "{\"from\":\"h\",\"to\":\"n\",\"noreplace\":true,"
			   "\"exchange\":true}",
			   400,
			   "REQUEST_INVALID: Request invalid: noreplace and "
			   "exchange exclude each other");
	ta_ext_expect_post(&ta_ag, "rename", "{\"from\":\"h\",\"to\":\"../n\"}",
			   400,
			   "PATH_REFUSED: Path '../n' refused: path traverses "
			   "upward");

	/* hard link */
	ta_ext_post(&ta_ag, "link", "{\"from\":\"h\",\"to\":\"h2\"}", &r);
	ck_assert_uint_eq(ta_expect_attr(ta_ag.root, &r, "h2", NULL).nlink, 2);
	ta_ext_expect_post(&ta_ag, "link", "{\"from\":\"d\",\"to\":\"d2\"}",
			   409,
			   "FS_ERROR: EPERM: Operation not permitted: d -> d2");

	ta_ext_expect_post(&ta_ag, "unlink", "{\"path\":\"h2\"}", 204, "");
	ta_ext_expect_post(&ta_ag, "unlink", "{\"path\":\"h2\"}", 404,
			   "PATH_NOT_FOUND: No such file in the sandbox: h2");
	ta_ext_expect_post(&ta_ag, "unlink", "{\"path\":\"d/f\"}", 204, "");
	ta_ext_expect_post(&ta_ag, "rmdir", "{\"path\":\"d\"}", 204, "");
}
END_TEST

START_TEST(wire_times_and_statfs)
{
	struct proto_statfs s;
	struct proto_attr a, b;
	struct th_resp r;

	ta_put_file(ta_ag.root, "t", "x");
	ta_ext_get(&ta_ag, "stat", "t", NULL, NULL, &r);
	a = ta_expect_attr(ta_ag.root, &r, "t", NULL);
	ta_ext_post(&ta_ag, "utimens",
		    "{\"path\":\"t\",\"mtime\":{\"sec\":1000000000,\"nsec\":5},"
		    "\"atime\":\"omit\"}",
		    &r);
	b = ta_expect_attr(ta_ag.root, &r, "t", NULL);
	ck_assert_int_eq(b.mtime, 1000000000);
	ck_assert_uint_eq(b.mtime_ns, 5);
	ck_assert_int_eq(b.atime, a.atime);
	ck_assert_uint_eq(b.atime_ns, a.atime_ns);
	ta_ext_post(&ta_ag, "utimens", "{\"path\":\"t\",\"mtime\":\"now\"}",
		    &r);
	b = ta_expect_attr(ta_ag.root, &r, "t", NULL);
	ck_assert_int_gt(b.mtime, 1000000000);
	ta_ext_post(&ta_ag, "utimens", "{\"path\":\"t\",\"mtime\":\"soon\"}",
		    &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);

	ta_ext_req(&ta_ag, "GET", "statfs", NULL, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(proto_statfs_decode(r.body.data, r.body.len, &s), 0);
	ck_assert_uint_gt(s.bsize, 0);
	ck_assert_uint_gt(s.blocks, 0);
	ck_assert_uint_eq(s.namemax, 255);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(wire_malformed_bodies)
{
	struct th_resp r;

	ta_ext_req(&ta_ag, "POST", "mkdir", "text/plain", NULL,
		   "{\"path\":\"a\"}", 12, &r);
	ck_assert_int_eq(r.status, 415);
	th_resp_cleanup(&r);
	ta_ext_post(&ta_ag, "mkdir", "{\"path\":", &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert_ptr_null(strstr(r.body.data, "REQUEST_INVALID"));
	th_resp_cleanup(&r);
	ta_ext_post(&ta_ag, "mkdir", "{\"path\":1,\"mode\":493}", &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);
	ta_ext_post(&ta_ag, "chmod", "{\"path\":\"a\",\"mode\":4096}", &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);
	ta_ext_post(&ta_ag, "unlink",
		    "{\"path\":\"a\\u0000/../../etc/passwd\"}", &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(wire_health_and_auth)
{
	struct proto_health h;

	ta_health(&ta_ag, &h);
	ck_assert_int_eq(h.ext_files, PROTO_EXT_FILES_VERSION);
	ck_assert_uint_gt(h.ext_max_write, 0);

	/* the extension needs the credential like v1 */
	ta_ext_expect_no_credential(&ta_ag, "stat?path=");
}
END_TEST

START_TEST(wire_strict_v1)
{
	static const char *const ops[] = {
		"stat?path=",	   "list?path=", "read?path=x",
		"readlink?path=x", "statfs",	 "write?path=x&offset=0",
		"create",	   "mkdir",	 "unlink",
		"rmdir",	   "rename",	 "link",
		"symlink",	   "chmod",	 "truncate",
		"utimens",	   "fsync",
	};
	const char *args[] = {"--strict-v1", NULL};
	struct th_agent strict;
	struct proto_health h;
	struct th_resp r;
	size_t i;

	th_agent_start(&strict, args, true);
	ta_health_get(&strict, "", &r);
	ck_assert_ptr_null(strstr(r.body.data, "extensions"));
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h), 0);
	ck_assert_int_eq(h.ext_files, 0);
	th_resp_cleanup(&r);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		ta_ext_expect_no_route(&strict, ops[i], "{\"path\":\"x\"}");
	th_agent_stop(&strict);
}
END_TEST

void agent_ext_cases(Suite *s)
{
	TCASE_TABLE(s, "fsops", fsops_setup, fsops_teardown, 0,
		    fsops_confinement, fsops_create_mode_exact,
		    fsops_fifo_and_types, fsops_list_pages_by_cookie);
	TCASE_TABLE(
		s, "wire", ta_agent_setup, ta_agent_teardown, 120,
		wire_stat_and_errors, wire_symlinks, wire_list_20000,
		wire_list_attrs, wire_read_ranges, wire_fifo_read_does_not_hang,
		wire_read_of_a_shrinking_file_ends, wire_write_and_create,
		wire_dirs_and_names, wire_times_and_statfs,
		wire_malformed_bodies, wire_health_and_auth, wire_strict_v1);
}
