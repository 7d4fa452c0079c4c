/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_ext: the file extension. The "fsops" case calls the
 * confined primitives in-process on a temporary root; the "wire" case
 * talks to a real sandbox-agent over HTTP and checks exact statuses and
 * bodies (attributes are compared with lstat of the file on disk). When
 * the tests run as root the agent acts as nobody, so fixtures made here
 * are handed to that user.
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
#include "tests/helpers.h"

#define NOBODY 65534

/* Hand a fixture to the user the agent acts as. */
static void own(const char *path)
{
	if (geteuid() == 0)
		ck_assert_msg(lchown(path, NOBODY, NOBODY) == 0, "chown %s",
			      path);
}

static char *join(const char *dir, const char *rel)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, rel) < 0)
		ck_abort_msg("asprintf");
	return p;
}

static void put_file(const char *dir, const char *rel, const char *text)
{
	char *p = join(dir, rel);

	th_write_file(p, text, strlen(text));
	own(p);
	free(p);
}

static void make_dir(const char *dir, const char *rel)
{
	char *p = join(dir, rel);

	ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s", p);
	own(p);
	free(p);
}

static void make_link(const char *dir, const char *rel, const char *target)
{
	char *p = join(dir, rel);

	ck_assert_msg(symlink(target, p) == 0, "symlink %s", p);
	own(p);
	free(p);
}

static char *slurp(const char *dir, const char *rel, size_t *len)
{
	char *p = join(dir, rel), *text = th_read_file(p, len);

	free(p);
	return text;
}

static void lstat_at(const char *dir, const char *rel, struct stat *st)
{
	char *p = join(dir, rel);

	ck_assert_msg(lstat(p, st) == 0, "lstat %s", p);
	free(p);
}

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
	if (fd >= 0)
		close(fd);
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
	make_dir(froot, "sub");
	put_file(froot, "sub/f", "inside");
	make_link(froot, "in", "sub");
	make_link(froot, "abs", "/etc");
	make_link(froot, "up", "../..");
	make_link(froot, "sub/back", "../sub/f");

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
	p = join(froot, "fifo");
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
		put_file(froot, name, "");
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

static struct th_agent ag;

static void wire_setup(void)
{
	th_agent_start(&ag, NULL, true);
	own(ag.root);
}

static void wire_teardown(void)
{
	th_agent_stop(&ag);
}

/* Percent-encode a query value. */
static char *qenc(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	ck_assert_ptr_nonnull(out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~' || c == '/') {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

/* One request to /sandboxfs/v1/<target> with the credential, an optional
 * content type and an optional extra header. */
static void ext_req(const char *method, const char *target, const char *ctype,
		    const char *extra, const void *body, size_t len,
		    struct th_resp *out)
{
	const char *h[4];
	char url[8192 + 256], ct[128];
	size_t n = 0;

	h[n++] = ag.auth;
	if (ctype != NULL) {
		snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
		h[n++] = ct;
	}
	if (extra != NULL)
		h[n++] = extra;
	h[n] = NULL;
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/%s", ag.base, target);
	th_http(method, url, h, body, len, out);
}

/* GET op?path=<p><more> */
static void ext_get(const char *op, const char *path, const char *more,
		    const char *extra, struct th_resp *out)
{
	char target[8192];
	char *e = qenc(path);

	snprintf(target, sizeof(target), "%s?path=%s%s", op, e,
		 more ? more : "");
	free(e);
	ext_req("GET", target, NULL, extra, NULL, 0, out);
}

static void ext_post(const char *op, const char *json, struct th_resp *out)
{
	ext_req("POST", op, "application/json", NULL, json, strlen(json), out);
}

static void ext_write(const char *path, const char *how, const void *data,
		      size_t n, struct th_resp *out)
{
	char target[8192];
	char *e = qenc(path);

	snprintf(target, sizeof(target), "write?path=%s&%s", e, how);
	free(e);
	ext_req("PUT", target, "application/octet-stream", NULL, data, n, out);
}

static void assert_resp(const struct th_resp *r, long status, const char *body)
{
	ck_assert_msg(r->status == status, "status %ld, wanted %ld: %s",
		      r->status, status, r->body.data ? r->body.data : "");
	ck_assert_msg(strcmp(r->body.data ? r->body.data : "", body) == 0,
		      "body '%s', wanted '%s'",
		      r->body.data ? r->body.data : "", body);
}

static void expect(struct th_resp *r, long status, const char *body)
{
	assert_resp(r, status, body);
	th_resp_cleanup(r);
}

/* A 200 attribute answer that matches lstat of rel on disk. */
static struct proto_attr expect_attr(struct th_resp *r, const char *rel,
				     const char *target)
{
	struct proto_attr a;
	struct stat st;
	char *t = NULL;

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status,
		      r->body.data ? r->body.data : "");
	ck_assert_int_eq(proto_attr_decode(r->body.data, r->body.len, &a, &t),
			 0);
	lstat_at(ag.root, rel, &st);
	ck_assert_uint_eq(a.perm, st.st_mode & 07777);
	ck_assert_uint_eq(a.size, (uint64_t)st.st_size);
	ck_assert_uint_eq(a.ino, st.st_ino);
	ck_assert_uint_eq(a.nlink, st.st_nlink);
	ck_assert_uint_eq(a.uid, st.st_uid);
	ck_assert_uint_eq(a.gid, st.st_gid);
	ck_assert_int_eq(a.mtime, st.st_mtim.tv_sec);
	ck_assert_uint_eq(a.mtime_ns, st.st_mtim.tv_nsec);
	ck_assert_uint_eq(a.blocks, (uint64_t)st.st_blocks);
	if (S_ISREG(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_FILE);
	else if (S_ISDIR(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_DIR);
	else if (S_ISLNK(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_SYMLINK);
	else if (S_ISFIFO(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_FIFO);
	if (target != NULL)
		ck_assert_str_eq(t, target);
	else
		ck_assert_ptr_null(t);
	free(t);
	th_resp_cleanup(r);
	return a;
}

START_TEST(wire_stat_and_errors)
{
	struct th_resp r;

	make_dir(ag.root, "d");
	put_file(ag.root, "d/f", "12345");

	ext_get("stat", "d/f", NULL, NULL, &r);
	expect_attr(&r, "d/f", NULL);
	ext_get("stat", "/d//./f", NULL, NULL, &r);
	expect_attr(&r, "d/f", NULL);
	/* the root, as "" and as "/" */
	ext_get("stat", "", NULL, NULL, &r);
	expect_attr(&r, ".", NULL);
	ext_get("stat", "/", NULL, NULL, &r);
	expect_attr(&r, ".", NULL);

	ext_get("stat", "d/nope", NULL, NULL, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: d/nope");
	ext_get("stat", "d/f/x", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ENOTDIR: Not a directory: d/f/x");
	ext_get("stat", "d/../d/f", NULL, NULL, &r);
	expect(&r, 400,
	       "PATH_REFUSED: Path 'd/../d/f' refused: path traverses upward");
	ext_get("stat", "..", NULL, NULL, &r);
	expect(&r, 400,
	       "PATH_REFUSED: Path '..' refused: path traverses upward");

	/* no path at all: an untyped 400 like v1's query rejection */
	ext_req("GET", "stat", NULL, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert_ptr_null(strstr(r.body.data ? r.body.data : "", "_"));
	th_resp_cleanup(&r);

	/* unknown operation: the empty 404 of an unknown route; a known
	 * one with the wrong method: an empty 405 */
	ext_req("GET", "frobnicate?path=x", NULL, NULL, NULL, 0, &r);
	expect(&r, 404, "");
	ext_req("GET", "mkdir?path=x", NULL, NULL, NULL, 0, &r);
	expect(&r, 405, "");
	ext_req("POST", "stat?path=x", "application/json", NULL, "{}", 2, &r);
	expect(&r, 405, "");
	/* the extension's GET routes are not HEAD routes: an empty 405 */
	ext_req("HEAD", "stat?path=x", NULL, NULL, NULL, 0, &r);
	expect(&r, 405, "");
}
END_TEST

START_TEST(wire_symlinks)
{
	struct th_resp r;

	make_dir(ag.root, "sub");
	put_file(ag.root, "sub/f", "inside");
	make_link(ag.root, "abs", "/etc");
	make_link(ag.root, "up", "../../..");

	/* made through the extension: the target is stored as given */
	ext_post("symlink", "{\"path\":\"in\",\"target\":\"sub\"}", &r);
	expect_attr(&r, "in", "sub");
	ext_post("symlink", "{\"path\":\"lf\",\"target\":\"sub/f\"}", &r);
	expect_attr(&r, "lf", "sub/f");
	ext_post("symlink", "{\"path\":\"in\",\"target\":\"x\"}", &r);
	expect(&r, 409, "FS_ERROR: EEXIST: File exists: in");
	ext_post("symlink", "{\"path\":\"e\",\"target\":\"\"}", &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: a symlink target "
	       "cannot be empty");

	/* stat and readlink never follow the last component */
	ext_get("stat", "in", NULL, NULL, &r);
	expect_attr(&r, "in", "sub");
	ext_get("stat", "abs", NULL, NULL, &r);
	expect_attr(&r, "abs", "/etc");
	ext_get("readlink", "up", NULL, NULL, &r);
	expect(&r, 200, "{\"target\":\"../../..\"}");
	ext_get("readlink", "sub/f", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: EINVAL: Invalid argument: sub/f");

	/* inside: followed in the middle, and at the end by read */
	ext_get("stat", "in/f", NULL, NULL, &r);
	expect_attr(&r, "sub/f", NULL);
	ext_get("read", "lf", NULL, NULL, &r);
	expect(&r, 200, "inside");
	ext_get("list", "in", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body.data, "\"name\":\"f\""));
	th_resp_cleanup(&r);

	/* escaping: absolute or upward, refused wherever it is followed */
	ext_get("stat", "abs/passwd", NULL, NULL, &r);
	expect(&r, 409,
	       "FS_ERROR: ELOOP: path leaves the session root: "
	       "abs/passwd");
	ext_get("stat", "up/etc", NULL, NULL, &r);
	expect(&r, 409,
	       "FS_ERROR: ELOOP: path leaves the session root: up/etc");
	ext_get("read", "abs", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ELOOP: path leaves the session root: abs");
	ext_get("list", "up", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ELOOP: path leaves the session root: up");
	ext_post("chmod", "{\"path\":\"abs\",\"mode\":511}", &r);
	expect(&r, 409, "FS_ERROR: ELOOP: path leaves the session root: abs");
	ext_post("create", "{\"path\":\"up/tmp/x\",\"mode\":420}", &r);
	expect(&r, 409,
	       "FS_ERROR: ELOOP: path leaves the session root: "
	       "up/tmp/x");
	ext_write("abs", "offset=0", "x", 1, &r);
	expect(&r, 409, "FS_ERROR: ELOOP: path leaves the session root: abs");
	/* a link's own times can be set even when its target escapes */
	ext_post("utimens",
		 "{\"path\":\"abs\",\"mtime\":{\"sec\":1000000000,\"nsec\":7},"
		 "\"nofollow\":true}",
		 &r);
	ck_assert_int_eq(expect_attr(&r, "abs", "/etc").mtime, 1000000000);
	ext_post("utimens", "{\"path\":\"abs\",\"mtime\":\"now\"}", &r);
	expect(&r, 409, "FS_ERROR: ELOOP: path leaves the session root: abs");
	/* unlinking the escaping link is fine: it is the link itself */
	ext_post("unlink", "{\"path\":\"abs\"}", &r);
	expect(&r, 204, "");
}
END_TEST

START_TEST(wire_list_20000)
{
	char name[32], target[128];
	char *seen = calloc(20000, 1);
	struct proto_list l;
	char *cursor = NULL;
	struct th_resp r;
	int i, pages = 0, total = 0;

	ck_assert_ptr_nonnull(seen);
	make_dir(ag.root, "big");
	for (i = 0; i < 20000; i++) {
		char *p;
		int fd;

		snprintf(name, sizeof(name), "big/f%05d", i);
		p = join(ag.root, name);
		fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		ck_assert(fd >= 0);
		ck_assert(fchmod(fd, 0644) == 0);
		close(fd);
		free(p);
	}
	for (;;) {
		size_t k;

		if (cursor == NULL) {
			ext_get("list", "big", "&limit=1000", NULL, &r);
		} else {
			char *c = qenc(cursor);

			snprintf(target, sizeof(target),
				 "&limit=1000&cursor=%s", c);
			free(c);
			ext_get("list", "big", target, NULL, &r);
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
	ext_get("list", "big", "&limit=0", NULL, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: limit must be from "
	       "1 to 8192");
	ext_get("list", "big", "&limit=8193", NULL, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: limit must be from "
	       "1 to 8192");
	ext_get("list", "big", "&cursor=abc", NULL, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: cursor is not one "
	       "this agent sent");
	ext_get("list", "big/f00001", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ENOTDIR: Not a directory: big/f00001");
}
END_TEST

START_TEST(wire_list_attrs)
{
	struct proto_list l;
	struct th_resp r;
	size_t k;

	make_dir(ag.root, "d");
	put_file(ag.root, "d/a \"q\"", "xyz");
	put_file(ag.root, "d/caf\xc3\xa9\n", "");
	make_link(ag.root, "d/l", "a \"q\"");
	make_dir(ag.root, "d/sub");
	ext_get("list", "d", NULL, NULL, &r);
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
		lstat_at(ag.root, rel, &st);
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
	ext_get("list", "/", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(proto_list_decode(r.body.data, r.body.len, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.entries[0].name, "d");
	proto_list_cleanup(&l);
	th_resp_cleanup(&r);
}
END_TEST

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
		char *p = join(ag.root, "data");

		th_write_file(p, data, sizeof(data));
		own(p);
		free(p);
	}
	ext_get("stat", "data", NULL, NULL, &r);
	a = expect_attr(&r, "data", NULL);
	proto_attr_etag(&a, etag);

	/* whole file */
	ext_get("read", "data", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body.len, sizeof(data));
	ck_assert(memcmp(r.body.data, data, sizeof(data)) == 0);
	h = th_resp_header(&r, "ETag");
	ck_assert_str_eq(h, etag);
	free(h);
	h = th_resp_header(&r, "X-Sandboxfs-Size");
	ck_assert_str_eq(h, "10000");
	free(h);
	h = th_resp_header(&r, "Content-Type");
	ck_assert_str_eq(h, "application/octet-stream");
	free(h);
	h = th_resp_header(&r, "Last-Modified");
	ck_assert_ptr_nonnull(h);
	ck_assert_ptr_nonnull(strstr(h, " GMT"));
	free(h);
	h = th_resp_header(&r, "Content-Range");
	ck_assert_ptr_null(h);
	th_resp_cleanup(&r);

	/* ranges: a-b, a-, -n, past the end clipped */
	ext_get("read", "data", NULL, "Range: bytes=10-19", &r);
	ck_assert_int_eq(r.status, 206);
	ck_assert_uint_eq(r.body.len, 10);
	ck_assert(memcmp(r.body.data, data + 10, 10) == 0);
	h = th_resp_header(&r, "Content-Range");
	ck_assert_str_eq(h, "bytes 10-19/10000");
	free(h);
	h = th_resp_header(&r, "X-Sandboxfs-Size");
	ck_assert_str_eq(h, "10000");
	free(h);
	th_resp_cleanup(&r);
	ext_get("read", "data", NULL, "Range: bytes=9990-", &r);
	ck_assert_int_eq(r.status, 206);
	ck_assert_uint_eq(r.body.len, 10);
	h = th_resp_header(&r, "Content-Range");
	ck_assert_str_eq(h, "bytes 9990-9999/10000");
	free(h);
	th_resp_cleanup(&r);
	ext_get("read", "data", NULL, "Range: bytes=-5", &r);
	ck_assert_int_eq(r.status, 206);
	ck_assert(r.body.len == 5 && memcmp(r.body.data, data + 9995, 5) == 0);
	h = th_resp_header(&r, "Content-Range");
	ck_assert_str_eq(h, "bytes 9995-9999/10000");
	free(h);
	th_resp_cleanup(&r);
	ext_get("read", "data", NULL, "Range: bytes=9998-99999999", &r);
	ck_assert_int_eq(r.status, 206);
	ck_assert_uint_eq(r.body.len, 2);
	h = th_resp_header(&r, "Content-Range");
	ck_assert_str_eq(h, "bytes 9998-9999/10000");
	free(h);
	th_resp_cleanup(&r);

	/* unsatisfiable, and not one range */
	ext_get("read", "data", NULL, "Range: bytes=10000-", &r);
	ck_assert_int_eq(r.status, 416);
	h = th_resp_header(&r, "Content-Range");
	ck_assert_str_eq(h, "bytes */10000");
	free(h);
	th_resp_cleanup(&r);
	ext_get("read", "data", NULL, "Range: bytes=1-2,5-6", &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: Range is not a "
	       "single byte range");
	ext_get("read", "data", NULL, "Range: bytes=5-1", &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: Range is not a "
	       "single byte range");

	/* validators */
	snprintf(hdr, sizeof(hdr), "If-Match: %s", etag);
	ext_get("read", "data", NULL, hdr, &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);
	ext_get("read", "data", NULL, "If-Match: \"0-0-0.0\"", &r);
	expect(&r, 412, "FS_ERROR: ESTALE: the file changed: data");
	ext_get("read", "data", NULL, "If-Range: \"0-0-0.0\"", &r);
	expect(&r, 412, "FS_ERROR: ESTALE: the file changed: data");
	ext_get("read", "data", NULL, "If-Match: *", &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);

	/* a write changes the validator; the old one is then refused */
	old_etag = strdup(etag);
	ext_write("data", "append=1", "!!", 2, &r);
	a = expect_attr(&r, "data", NULL);
	ck_assert_uint_eq(a.size, 10002);
	proto_attr_etag(&a, etag);
	ck_assert_str_ne(etag, old_etag);
	ext_get("read", "data", NULL, "Range: bytes=-2", &r);
	ck_assert_int_eq(r.status, 206);
	h = th_resp_header(&r, "ETag");
	ck_assert_str_eq(h, etag);
	free(h);
	ck_assert(r.body.len == 2 && memcmp(r.body.data, "!!", 2) == 0);
	th_resp_cleanup(&r);
	snprintf(hdr, sizeof(hdr), "If-Match: %s", old_etag);
	ext_get("read", "data", NULL, hdr, &r);
	expect(&r, 412, "FS_ERROR: ESTALE: the file changed: data");
	free(old_etag);

	/* not regular files */
	make_dir(ag.root, "dir");
	ext_get("read", "dir", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: EISDIR: Is a directory: dir");
	ext_get("read", "missing", NULL, NULL, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: missing");

	/* an empty file: the whole of it is empty, any range is past it */
	put_file(ag.root, "empty", "");
	ext_get("read", "empty", NULL, NULL, &r);
	expect(&r, 200, "");
	ext_get("read", "empty", NULL, "Range: bytes=0-", &r);
	ck_assert_int_eq(r.status, 416);
	h = th_resp_header(&r, "Content-Range");
	ck_assert_str_eq(h, "bytes */0");
	free(h);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(wire_fifo_read_does_not_hang)
{
	char *p = join(ag.root, "fifo");
	long long t0;
	struct th_resp r;
	char url[256];
	const char *h[] = {ag.auth, NULL};

	ck_assert(mkfifo(p, 0666) == 0);
	own(p);
	free(p);
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/read?path=fifo", ag.base);
	t0 = th_now_ms();
	ck_assert_int_eq(th_http_timeout("GET", url, h, NULL, 0, 5000, &r), 0);
	ck_assert_int_lt(th_now_ms() - t0, 5000);
	expect(&r, 409, "FS_ERROR: EINVAL: Invalid argument: fifo");
	ext_get("stat", "fifo", NULL, NULL, &r);
	expect_attr(&r, "fifo", NULL);
}
END_TEST

START_TEST(wire_write_and_create)
{
	struct proto_attr a;
	struct th_resp r;
	size_t len;
	char *text;

	/* write never creates */
	ext_write("w", "offset=0", "hello", 5, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: w");
	ext_post("create", "{\"path\":\"w\",\"mode\":438,\"exclusive\":true}",
		 &r);
	a = expect_attr(&r, "w", NULL);
	/* the mode is exactly what was asked, whatever the agent's umask */
	ck_assert_uint_eq(a.perm, 0666);
	ck_assert_uint_eq(a.size, 0);
	/* created as the user the agent acts as, never as root */
	if (geteuid() == 0)
		ck_assert_uint_eq(a.uid, NOBODY);
	else
		ck_assert_uint_eq(a.uid, geteuid());
	ext_post("create", "{\"path\":\"w\",\"mode\":420,\"exclusive\":true}",
		 &r);
	expect(&r, 409, "FS_ERROR: EEXIST: File exists: w");

	ext_write("w", "offset=0", "hello", 5, &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).size, 5);
	ext_write("w", "offset=10", "X", 1, &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).size, 11);
	ext_write("w", "append=1", "tail", 4, &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).size, 15);
	ext_write("w", "offset=1", "EL", 2, &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).size, 15);
	text = slurp(ag.root, "w", &len);
	ck_assert_uint_eq(len, 15);
	ck_assert(memcmp(text, "hELlo\0\0\0\0\0Xtail", 15) == 0);
	free(text);

	ext_write("w", "offset=x", "a", 1, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: offset is not a "
	       "byte offset");
	ext_write("w", "append=1&offset=0", "a", 1, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: offset and "
	       "append=1 exclude each other");
	ext_write("w", "nothing=1", "a", 1, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: a write needs "
	       "offset=N or append=1");
	make_dir(ag.root, "dir");
	ext_write("dir", "offset=0", "a", 1, &r);
	expect(&r, 409, "FS_ERROR: EISDIR: Is a directory: dir");

	/* create without exclusive opens what is there; truncate empties */
	ext_post("create", "{\"path\":\"w\",\"mode\":384}", &r);
	a = expect_attr(&r, "w", NULL);
	ck_assert_uint_eq(a.size, 15);
	ck_assert_uint_eq(a.perm, 0666);
	ext_post("create", "{\"path\":\"w\",\"mode\":384,\"truncate\":true}",
		 &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).size, 0);
	ext_post("create", "{\"path\":\"nodir/w\",\"mode\":384}", &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: nodir/w");
	ext_post("create", "{\"path\":\"dir\",\"mode\":384}", &r);
	expect(&r, 409, "FS_ERROR: EISDIR: Is a directory: dir");

	/* truncate, chmod, fsync */
	ext_write("w", "offset=0", "0123456789", 10, &r);
	th_resp_cleanup(&r);
	ext_post("truncate", "{\"path\":\"w\",\"size\":3}", &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).size, 3);
	ext_post("truncate", "{\"path\":\"w\",\"size\":\"4096\"}", &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).size, 4096);
	ext_post("truncate", "{\"path\":\"dir\",\"size\":0}", &r);
	expect(&r, 409, "FS_ERROR: EISDIR: Is a directory: dir");
	/* No set-user-id or set-group-id bit on a file through the
	 * extension: dropped (the sticky bit stays). */
	ext_post("chmod", "{\"path\":\"w\",\"mode\":1536}", &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).perm, 01000);
	ext_post("chmod", "{\"path\":\"w\",\"mode\":3565}", &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).perm, 0755);
	ext_post("create", "{\"path\":\"suid\",\"mode\":3565}", &r);
	ck_assert_uint_eq(expect_attr(&r, "suid", NULL).perm, 0755);
	ext_write("sgid", "offset=0&create=6755", "x", 1, &r);
	ck_assert_uint_eq(expect_attr(&r, "sgid", NULL).perm, 0755);
	/* A directory keeps its set-group-id (group inheritance). */
	ext_post("mkdir", "{\"path\":\"gdir\",\"mode\":3581}", &r);
	ck_assert_uint_eq(expect_attr(&r, "gdir", NULL).perm, 02775);
	ext_post("chmod", "{\"path\":\"gdir\",\"mode\":3565}", &r);
	ck_assert_uint_eq(expect_attr(&r, "gdir", NULL).perm, 02755);
	ext_post("chmod", "{\"path\":\"w\",\"mode\":384}", &r);
	ck_assert_uint_eq(expect_attr(&r, "w", NULL).perm, 0600);
	ext_post("fsync", "{\"path\":\"w\"}", &r);
	expect(&r, 204, "");
	ext_post("fsync", "{\"path\":\"gone\"}", &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: gone");
}
END_TEST

START_TEST(wire_dirs_and_names)
{
	struct proto_attr a;
	struct th_resp r;
	size_t len;
	char *text;

	ext_post("mkdir", "{\"path\":\"d\",\"mode\":511}", &r);
	a = expect_attr(&r, "d", NULL);
	ck_assert_int_eq(a.type, PROTO_FT_DIR);
	ck_assert_uint_eq(a.perm, 0777);
	ext_post("mkdir", "{\"path\":\"d\",\"mode\":493}", &r);
	expect(&r, 409, "FS_ERROR: EEXIST: File exists: d");
	ext_post("mkdir", "{\"path\":\"x/y\",\"mode\":493}", &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: x/y");
	put_file(ag.root, "d/f", "one");
	put_file(ag.root, "g", "two");

	ext_post("rmdir", "{\"path\":\"d\"}", &r);
	expect(&r, 409, "FS_ERROR: ENOTEMPTY: Directory not empty: d");
	ext_post("rmdir", "{\"path\":\"g\"}", &r);
	expect(&r, 409, "FS_ERROR: ENOTDIR: Not a directory: g");
	ext_post("unlink", "{\"path\":\"d\"}", &r);
	expect(&r, 409, "FS_ERROR: EISDIR: Is a directory: d");
	ext_post("rmdir", "{\"path\":\"/\"}", &r);
	expect(&r, 409, "FS_ERROR: EBUSY: Device or resource busy: /");

	/* rename: replace by default, noreplace, exchange */
	ext_post("rename", "{\"from\":\"g\",\"to\":\"d/f\",\"noreplace\":true}",
		 &r);
	expect(&r, 409, "FS_ERROR: EEXIST: File exists: g -> d/f");
	put_file(ag.root, "h", "three");
	ext_post("rename", "{\"from\":\"g\",\"to\":\"h\",\"exchange\":true}",
		 &r);
	expect(&r, 204, "");
	text = slurp(ag.root, "g", &len);
	ck_assert_str_eq(text, "three");
	free(text);
	ext_post("rename", "{\"from\":\"g\",\"to\":\"d/f\"}", &r);
	expect(&r, 204, "");
	text = slurp(ag.root, "d/f", &len);
	ck_assert_str_eq(text, "three");
	free(text);
	ext_get("stat", "g", NULL, NULL, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: g");
	ext_post("rename", "{\"from\":\"nope\",\"to\":\"n2\"}", &r);
	expect(&r, 404,
	       "PATH_NOT_FOUND: No such file in the sandbox: nope -> "
	       "n2");
	ext_post("rename",
		 "{\"from\":\"h\",\"to\":\"n\",\"noreplace\":true,"
		 "\"exchange\":true}",
		 &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: noreplace and "
	       "exchange exclude each other");
	ext_post("rename", "{\"from\":\"h\",\"to\":\"../n\"}", &r);
	expect(&r, 400,
	       "PATH_REFUSED: Path '../n' refused: path traverses "
	       "upward");

	/* hard link */
	ext_post("link", "{\"from\":\"h\",\"to\":\"h2\"}", &r);
	ck_assert_uint_eq(expect_attr(&r, "h2", NULL).nlink, 2);
	ext_post("link", "{\"from\":\"d\",\"to\":\"d2\"}", &r);
	expect(&r, 409, "FS_ERROR: EPERM: Operation not permitted: d -> d2");

	ext_post("unlink", "{\"path\":\"h2\"}", &r);
	expect(&r, 204, "");
	ext_post("unlink", "{\"path\":\"h2\"}", &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: h2");
	ext_post("unlink", "{\"path\":\"d/f\"}", &r);
	expect(&r, 204, "");
	ext_post("rmdir", "{\"path\":\"d\"}", &r);
	expect(&r, 204, "");
}
END_TEST

START_TEST(wire_times_and_statfs)
{
	struct proto_statfs s;
	struct proto_attr a, b;
	struct th_resp r;

	put_file(ag.root, "t", "x");
	ext_get("stat", "t", NULL, NULL, &r);
	a = expect_attr(&r, "t", NULL);
	ext_post("utimens",
		 "{\"path\":\"t\",\"mtime\":{\"sec\":1000000000,\"nsec\":5},"
		 "\"atime\":\"omit\"}",
		 &r);
	b = expect_attr(&r, "t", NULL);
	ck_assert_int_eq(b.mtime, 1000000000);
	ck_assert_uint_eq(b.mtime_ns, 5);
	ck_assert_int_eq(b.atime, a.atime);
	ck_assert_uint_eq(b.atime_ns, a.atime_ns);
	ext_post("utimens", "{\"path\":\"t\",\"mtime\":\"now\"}", &r);
	b = expect_attr(&r, "t", NULL);
	ck_assert_int_gt(b.mtime, 1000000000);
	ext_post("utimens", "{\"path\":\"t\",\"mtime\":\"soon\"}", &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);

	ext_req("GET", "statfs", NULL, NULL, NULL, 0, &r);
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

	ext_req("POST", "mkdir", "text/plain", NULL, "{\"path\":\"a\"}", 12,
		&r);
	ck_assert_int_eq(r.status, 415);
	th_resp_cleanup(&r);
	ext_post("mkdir", "{\"path\":", &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert_ptr_null(strstr(r.body.data, "REQUEST_INVALID"));
	th_resp_cleanup(&r);
	ext_post("mkdir", "{\"path\":1,\"mode\":493}", &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);
	ext_post("chmod", "{\"path\":\"a\",\"mode\":4096}", &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);
	ext_post("unlink", "{\"path\":\"a\\u0000/../../etc/passwd\"}", &r);
	ck_assert_int_eq(r.status, 422);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(wire_health_and_auth)
{
	struct proto_health h;
	struct th_resp r;
	char url[256];

	snprintf(url, sizeof(url), "%s/v1/health", ag.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h), 0);
	ck_assert_int_eq(h.ext_files, PROTO_EXT_FILES_VERSION);
	ck_assert_uint_gt(h.ext_max_write, 0);
	th_resp_cleanup(&r);

	/* the extension needs the credential like v1 */
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/stat?path=", ag.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 401);
	th_resp_cleanup(&r);
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
	static const char *const methods[] = {"GET", "PUT", "POST"};
	const char *args[] = {"--strict-v1", NULL};
	struct th_agent strict;
	struct proto_health h;
	struct th_resp r;
	char url[256], ct[] = "Content-Type: application/json";
	size_t i, m;

	th_agent_start(&strict, args, true);
	snprintf(url, sizeof(url), "%s/v1/health", strict.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_null(strstr(r.body.data, "extensions"));
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h), 0);
	ck_assert_int_eq(h.ext_files, 0);
	th_resp_cleanup(&r);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		for (m = 0; m < 3; m++) {
			const char *hd[] = {strict.auth, ct, NULL};

			snprintf(url, sizeof(url), "%s/sandboxfs/v1/%s",
				 strict.base, ops[i]);
			th_http(methods[m], url, hd, "{\"path\":\"x\"}", 12,
				&r);
			ck_assert_msg(r.status == 404 && r.body.len == 0,
				      "%s %s: %ld", methods[m], ops[i],
				      r.status);
			th_resp_cleanup(&r);
		}
	}
	th_agent_stop(&strict);
}
END_TEST

/* ---- GET tree ------------------------------------------------------------ */

struct dirvec {
	char **v;
	size_t *count; /* entries of each directory */
	size_t n, cap;
};

static void dirvec_push(struct dirvec *l, char *rel)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		l->count = realloc(l->count, l->cap * sizeof(*l->count));
		ck_assert(l->v != NULL && l->count != NULL);
	}
	l->count[l->n] = 0;
	l->v[l->n++] = rel;
}

static void dirvec_free(struct dirvec *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->count);
	memset(l, 0, sizeof(*l));
}

/* The directory rel (relative to the directory base, relative to the
 * root) on disk. */
static char *disk_dir(const char *base, const char *rel)
{
	char *p;

	if (asprintf(&p, "%s%s%s%s%s", ag.root, *base ? "/" : "", base,
		     *rel ? "/" : "", rel) < 0)
		ck_abort_msg("asprintf");
	return p;
}

/*
 * The directories of the tree at base, breadth first, siblings in the
 * order readdir gives them (getdents64's, the agent's), as paths relative
 * to base, with how many entries each holds. skip (may be NULL) and what
 * is below it are left out, as the agent leaves out a directory it cannot
 * list. Symlinks are never descended.
 */
static void bfs_dirs(const char *base, const char *skip, struct dirvec *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	dirvec_push(out, strdup(""));
	for (i = 0; i < out->n; i++) {
		char *abs = disk_dir(base, out->v[i]);
		DIR *d = opendir(abs);
		struct dirent *de;

		ck_assert_msg(d != NULL, "opendir %s", abs);
		while ((de = readdir(d)) != NULL) {
			struct stat st;
			char *rel, *p;

			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			out->count[i]++;
			p = join(abs, de->d_name);
			ck_assert_msg(lstat(p, &st) == 0, "lstat %s", p);
			free(p);
			if (*out->v[i] == '\0')
				rel = strdup(de->d_name);
			else if (asprintf(&rel, "%s/%s", out->v[i],
					  de->d_name) < 0)
				rel = NULL;
			ck_assert_ptr_nonnull(rel);
			if (S_ISDIR(st.st_mode) &&
			    (skip == NULL || strcmp(rel, skip) != 0))
				dirvec_push(out, rel);
			else
				free(rel);
		}
		closedir(d);
		free(abs);
	}
}

static size_t dirvec_index(const struct dirvec *l, const char *rel)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->v[i], rel) == 0)
			return i;
	ck_abort_msg("directory '%s' is not in the tree", rel);
	return 0;
}

/* One listing of a tree answer is the directory on disk, whole: the
 * same names in getdents64 order, each with its lstat attributes. */
static void check_tree_dir(const char *base, const struct proto_tree_dir *td)
{
	char *abs = disk_dir(base, td->path);
	DIR *d = opendir(abs);
	struct dirent *de;
	size_t k = 0;

	ck_assert_msg(d != NULL, "opendir %s", abs);
	while ((de = readdir(d)) != NULL) {
		const struct proto_dirent *e;
		struct stat st;
		char *p;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		ck_assert_msg(k < td->n, "'%s': '%s' missing", td->path,
			      de->d_name);
		e = &td->entries[k++];
		ck_assert_msg(strcmp(e->name, de->d_name) == 0,
			      "'%s': '%s' where '%s' was expected", td->path,
			      e->name, de->d_name);
		p = join(abs, de->d_name);
		ck_assert_msg(lstat(p, &st) == 0, "lstat %s", p);
		ck_assert_uint_eq(e->attr.ino, st.st_ino);
		ck_assert_uint_eq(e->attr.perm, st.st_mode & 07777);
		ck_assert_uint_eq(e->attr.size, (uint64_t)st.st_size);
		ck_assert_uint_eq(e->attr.nlink, st.st_nlink);
		ck_assert_uint_eq(e->attr.uid, st.st_uid);
		ck_assert_uint_eq(e->attr.gid, st.st_gid);
		ck_assert_uint_eq(e->attr.blocks, (uint64_t)st.st_blocks);
		ck_assert_int_eq(e->attr.mtime, st.st_mtim.tv_sec);
		ck_assert_uint_eq(e->attr.mtime_ns, st.st_mtim.tv_nsec);
		if (S_ISDIR(st.st_mode)) {
			ck_assert_int_eq(e->attr.type, PROTO_FT_DIR);
		} else if (S_ISLNK(st.st_mode)) {
			char t[256];
			ssize_t n = readlink(p, t, sizeof(t) - 1);

			ck_assert_int_ge(n, 0);
			t[n] = '\0';
			ck_assert_int_eq(e->attr.type, PROTO_FT_SYMLINK);
			ck_assert_ptr_nonnull(e->target);
			ck_assert_str_eq(e->target, t);
		} else {
			ck_assert(S_ISREG(st.st_mode));
			ck_assert_int_eq(e->attr.type, PROTO_FT_FILE);
		}
		if (!S_ISLNK(st.st_mode))
			ck_assert_ptr_null(e->target);
		free(p);
	}
	ck_assert_msg(k == td->n, "'%s': %zu entries, %zu on disk", td->path,
		      td->n, k);
	closedir(d);
	free(abs);
}

/* GET tree?path=<path><more>: a 200 JSON answer, decoded. */
static void get_tree(const char *path, const char *more, struct proto_tree *t)
{
	struct th_resp r;
	char *ct;

	ext_get("tree", path, more, NULL, &r);
	ck_assert_msg(r.status == 200, "tree '%s'%s: %ld %s", path,
		      more ? more : "", r.status,
		      r.body.data ? r.body.data : "");
	ct = th_resp_header(&r, "Content-Type");
	ck_assert_str_eq(ct, "application/json");
	free(ct);
	ck_assert_int_eq(proto_tree_decode(r.body.data, r.body.len, t), 0);
	th_resp_cleanup(&r);
}

/*
 * The test tree, 12 entries in 6 directories over four levels:
 *   f1  d1/{g, e1/, l -> ../f1}  d2/{h, x/{w, y/{z}}, <odd name>}
 */
#define TREE_ODD "caf\xc3\xa9 \"q\"\n"
/* How a tree answer of a non-empty directory begins. */
#define TREE_HEAD "{\"dirs\":[{\"path\":\"\",\"entries\":[{"

static void make_tree(void)
{
	put_file(ag.root, "f1", "one");
	make_dir(ag.root, "d1");
	put_file(ag.root, "d1/g", "gg");
	make_dir(ag.root, "d1/e1");
	make_link(ag.root, "d1/l", "../f1");
	make_dir(ag.root, "d2");
	put_file(ag.root, "d2/h", "hhh");
	make_dir(ag.root, "d2/x");
	put_file(ag.root, "d2/x/w", "w");
	make_dir(ag.root, "d2/x/y");
	put_file(ag.root, "d2/x/y/z", "zzzz");
	put_file(ag.root, "d2/" TREE_ODD, "");
}

START_TEST(wire_tree_whole)
{
	struct proto_tree t;
	struct dirvec want;
	struct th_resp r;
	size_t i;

	make_tree();
	bfs_dirs("", NULL, &want);
	ck_assert_uint_eq(want.n, 6);
	get_tree("", NULL, &t);
	ck_assert(t.complete);
	ck_assert_uint_eq(t.ndirs, want.n);
	for (i = 0; i < t.ndirs; i++) {
		ck_assert_str_eq(t.dirs[i].path, want.v[i]);
		check_tree_dir("", &t.dirs[i]);
	}
	/* breadth first: each level before the next */
	ck_assert_str_eq(t.dirs[0].path, "");
	ck_assert_str_eq(t.dirs[5].path, "d2/x/y");
	proto_tree_cleanup(&t);
	dirvec_free(&want);

	/* the answer's shape, literally */
	ext_get("tree", "", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert(strncmp(r.body.data, TREE_HEAD, sizeof(TREE_HEAD) - 1) == 0);
	ck_assert_ptr_nonnull(strstr(r.body.data,
				     "{\"path\":\"d2/x/y\","
				     "\"entries\":[{\"name\":\"z\","));
	ck_assert_ptr_nonnull(
		strstr(r.body.data, "{\"path\":\"d1/e1\",\"entries\":[]}"));
	ck_assert_str_eq(r.body.data + r.body.len - 18, "],\"complete\":true}");
	th_resp_cleanup(&r);

	/* a subtree: paths are relative to the directory asked for, which
	 * is normalised like any path */
	bfs_dirs("d2", NULL, &want);
	ck_assert_uint_eq(want.n, 3);
	get_tree("/d2//./", "&maxEntries=65536", &t);
	ck_assert(t.complete);
	ck_assert_uint_eq(t.ndirs, 3);
	for (i = 0; i < t.ndirs; i++) {
		ck_assert_str_eq(t.dirs[i].path, want.v[i]);
		check_tree_dir("d2", &t.dirs[i]);
	}
	ck_assert_str_eq(t.dirs[2].path, "x/y");
	proto_tree_cleanup(&t);
	dirvec_free(&want);

	/* a leaf directory, and an empty one */
	get_tree("d2/x/y", NULL, &t);
	ck_assert(t.complete);
	ck_assert_uint_eq(t.ndirs, 1);
	ck_assert_str_eq(t.dirs[0].path, "");
	check_tree_dir("d2/x/y", &t.dirs[0]);
	proto_tree_cleanup(&t);
	ext_get("tree", "d1/e1", NULL, NULL, &r);
	expect(&r, 200,
	       "{\"dirs\":[{\"path\":\"\",\"entries\":[]}],"
	       "\"complete\":true}");
}
END_TEST

START_TEST(wire_tree_budget)
{
	struct dirvec want;
	size_t total = 0, b, i;

	make_tree();
	bfs_dirs("", NULL, &want);
	for (i = 0; i < want.n; i++)
		total += want.count[i];
	ck_assert_uint_eq(total, 12);
	ck_assert_uint_eq(want.count[0], 3);
	/* every budget from one entry to more than the tree */
	for (b = 1; b <= total + 1; b++) {
		struct proto_tree t;
		char more[32];
		size_t sum = 0, last = 0;

		snprintf(more, sizeof(more), "&maxEntries=%zu", b);
		if (b < want.count[0]) {
			/* not even the directory asked for fits */
			struct th_resp r;

			ext_get("tree", "", more, NULL, &r);
			expect(&r, 200, "{\"dirs\":[],\"complete\":false}");
			continue;
		}
		get_tree("", more, &t);
		ck_assert_uint_ge(t.ndirs, 1);
		ck_assert_str_eq(t.dirs[0].path, "");
		for (i = 0; i < t.ndirs; i++) {
			size_t at = dirvec_index(&want, t.dirs[i].path);

			/* whole listings, in breadth-first order */
			check_tree_dir("", &t.dirs[i]);
			ck_assert_msg(i == 0 || at > last,
				      "budget %zu: '%s' out of order", b,
				      t.dirs[i].path);
			last = at;
			sum += t.dirs[i].n;
		}
		ck_assert_msg(sum <= b, "budget %zu: %zu entries", b, sum);
		/* complete exactly when every directory is in it */
		ck_assert_msg(t.complete == (t.ndirs == want.n),
			      "budget %zu: %zu of %zu dirs, complete %d", b,
			      t.ndirs, want.n, t.complete);
		if (b >= total)
			ck_assert_msg(t.complete, "budget %zu", b);
		else
			ck_assert_msg(!t.complete, "budget %zu", b);
		proto_tree_cleanup(&t);
	}
	dirvec_free(&want);
}
END_TEST

/* The first name readdir gives in the directory at path, "." and ".."
 * included (heap). */
static char *first_readdir_name(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char *name;

	ck_assert_msg(d != NULL, "opendir %s", path);
	de = readdir(d);
	ck_assert_ptr_nonnull(de);
	name = strdup(de->d_name);
	closedir(d);
	return name;
}

/*
 * The budget ends the walk: the answer is the first directories of the
 * breadth-first order that fit, so that what follows the last one named
 * is exactly what the client still has to list. Here the budget runs out
 * exactly after the first of a/ and b/ (one entry each): the second does
 * not fit, and the empty e/ below the first, which comes after it, must
 * not be sent either. Where the filesystem allows it, the directory that
 * does not fit is given a first getdents64 entry that is a real name
 * rather than "." (ext4 orders by hash; tmpfs always starts with "."),
 * the case in which its listing ends before any entry was taken.
 */
START_TEST(wire_tree_stops_at_first_misfit)
{
	struct proto_tree t;
	struct dirvec want;
	char *second, *first, last[64];
	int tries;
	size_t i, n;

	wire_setup();
	make_dir(ag.root, "a");
	make_dir(ag.root, "b");
	make_dir(ag.root, "a/e");
	make_dir(ag.root, "b/e");
	bfs_dirs("", NULL, &want);
	ck_assert_uint_eq(want.n, 5);
	second = join(ag.root, want.v[2]);
	for (tries = 0; tries < 200; tries++) {
		char name[32];
		bool dot;

		first = first_readdir_name(second);
		dot = strcmp(first, ".") == 0 || strcmp(first, "..") == 0;
		free(first);
		if (!dot)
			break;
		snprintf(name, sizeof(name), "%s/n%d", want.v[2], tries);
		put_file(ag.root, name, "");
	}
	free(second);
	dirvec_free(&want);
	bfs_dirs("", NULL, &want);
	ck_assert_uint_eq(want.n, 5);
	ck_assert_uint_eq(want.count[1], 1);

	get_tree("", "&maxEntries=3", &t);
	ck_assert(!t.complete);
	ck_assert_uint_ge(t.ndirs, 2);
	for (i = 0; i < t.ndirs; i++)
		check_tree_dir("", &t.dirs[i]);
	ck_assert_str_eq(t.dirs[0].path, want.v[0]);
	ck_assert_str_eq(t.dirs[1].path, want.v[1]);
	/* everything is freed and the agent stopped first, so that a
	 * failure here (the runner's child exits at once) leaves nothing */
	n = t.ndirs;
	snprintf(last, sizeof(last), "%s", t.dirs[n - 1].path);
	proto_tree_cleanup(&t);
	dirvec_free(&want);
	wire_teardown();
	ck_assert_msg(n == 2, "%zu directories sent, the last '%s'", n, last);
}
END_TEST

START_TEST(wire_tree_symlinks)
{
	struct proto_tree t;
	struct th_resp r;
	size_t i;

	make_dir(ag.root, "sub");
	put_file(ag.root, "sub/f", "inside");
	make_dir(ag.root, "sub/deeper");
	make_link(ag.root, "in", "sub");
	make_link(ag.root, "abs", "/etc");
	make_link(ag.root, "up", "../../..");

	/* links are entries, listed with their targets, never walked */
	get_tree("", NULL, &t);
	ck_assert(t.complete);
	ck_assert_uint_eq(t.ndirs, 3);
	ck_assert_str_eq(t.dirs[0].path, "");
	ck_assert_str_eq(t.dirs[1].path, "sub");
	ck_assert_str_eq(t.dirs[2].path, "sub/deeper");
	for (i = 0; i < t.ndirs; i++)
		check_tree_dir("", &t.dirs[i]);
	ck_assert_uint_eq(t.dirs[0].n, 4);
	proto_tree_cleanup(&t);

	/* the directory asked for may be a link that stays inside, as for
	 * list: its target is walked, paths relative to the link */
	get_tree("in", NULL, &t);
	ck_assert(t.complete);
	ck_assert_uint_eq(t.ndirs, 2);
	ck_assert_str_eq(t.dirs[0].path, "");
	ck_assert_str_eq(t.dirs[1].path, "deeper");
	check_tree_dir("sub", &t.dirs[0]);
	proto_tree_cleanup(&t);

	/* escapes are refused exactly as list refuses them */
	ext_get("tree", "up", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ELOOP: path leaves the session root: up");
	ext_get("tree", "abs", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ELOOP: path leaves the session root: abs");
	ext_get("tree", "abs/ssl", NULL, NULL, &r);
	expect(&r, 409,
	       "FS_ERROR: ELOOP: path leaves the session root: abs/ssl");
	ext_get("tree", "..", NULL, NULL, &r);
	expect(&r, 400,
	       "PATH_REFUSED: Path '..' refused: path traverses upward");
	ext_get("tree", "sub/../sub", NULL, NULL, &r);
	expect(&r, 400,
	       "PATH_REFUSED: Path 'sub/../sub' refused: path traverses "
	       "upward");
	ext_req("GET", "tree?path=sub%00x", NULL, NULL, NULL, 0, &r);
	expect(&r, 400,
	       "PATH_REFUSED: Path 'sub' refused: path carries a byte no "
	       "path may hold");
}
END_TEST

START_TEST(wire_tree_unreadable_left_out)
{
	struct proto_tree t;
	struct dirvec want;
	struct th_resp r;
	char *locked;
	size_t i;

	make_dir(ag.root, "a");
	put_file(ag.root, "a/f", "x");
	make_dir(ag.root, "locked");
	put_file(ag.root, "locked/secret", "s");
	make_dir(ag.root, "locked/below");
	make_dir(ag.root, "z");
	make_dir(ag.root, "z/deep");
	locked = join(ag.root, "locked");
	ck_assert(chmod(locked, 0) == 0);
	if (geteuid() == 0) {
		/* Root's agent has root's access to the files (the owner's,
		 * SEMANTICS.md): nothing is unreadable to it. */
		bfs_dirs("", NULL, &want);
		get_tree("", NULL, &t);
		ck_assert(t.complete);
		ck_assert_uint_eq(t.ndirs, want.n);
		proto_tree_cleanup(&t);
		dirvec_free(&want);
		ck_assert(chmod(locked, 0755) == 0);
		free(locked);
		return;
	}
	bfs_dirs("", "locked", &want);
	ck_assert_uint_eq(want.n, 4);

	get_tree("", NULL, &t);
	/* everything else is there, whole; the answer says it is not all */
	ck_assert(!t.complete);
	ck_assert_uint_eq(t.ndirs, want.n);
	for (i = 0; i < t.ndirs; i++) {
		ck_assert_str_eq(t.dirs[i].path, want.v[i]);
		ck_assert_str_ne(t.dirs[i].path, "locked");
		check_tree_dir("", &t.dirs[i]);
	}
	/* still an entry of its parent */
	ck_assert_uint_eq(t.dirs[0].n, 3);
	proto_tree_cleanup(&t);
	dirvec_free(&want);

	/* asked for itself, its error is the answer */
	ext_get("tree", "locked", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: EACCES: Permission denied: locked");
	ck_assert(chmod(locked, 0755) == 0);
	free(locked);
}
END_TEST

START_TEST(wire_tree_errors)
{
	static const char *const bad_limits[] = {
		"0",
		"65537",
		"-1",
		"",
		"abc",
		"1x",
		"1.5",
		"18446744073709551617",
		"99999999999999999999999",
	};
	const char *h[] = {NULL};
	struct proto_tree t;
	struct th_resp r;
	char more[64], url[256];
	size_t i;

	put_file(ag.root, "f", "x");
	make_dir(ag.root, "d");
	ext_get("tree", "nope", NULL, NULL, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: nope");
	ext_get("tree", "d/nope", NULL, NULL, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: d/nope");
	ext_get("tree", "f", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ENOTDIR: Not a directory: f");
	for (i = 0; i < sizeof(bad_limits) / sizeof(bad_limits[0]); i++) {
		snprintf(more, sizeof(more), "&maxEntries=%s", bad_limits[i]);
		ext_get("tree", "d", more, NULL, &r);
		assert_resp(&r, 400,
			    "REQUEST_INVALID: Request invalid: maxEntries "
			    "must be from 1 to 65536");
		th_resp_cleanup(&r);
	}
	/* the bounds themselves are fine */
	get_tree("d", "&maxEntries=1", &t);
	ck_assert(t.complete);
	proto_tree_cleanup(&t);
	get_tree("d", "&maxEntries=65536", &t);
	ck_assert(t.complete);
	proto_tree_cleanup(&t);

	/* no path: the untyped 400 of every GET */
	ext_req("GET", "tree", NULL, NULL, NULL, 0, &r);
	expect(&r, 400,
	       "Failed to deserialize query string: missing field `path`");
	ext_req("GET", "tree?maxEntries=5", NULL, NULL, NULL, 0, &r);
	expect(&r, 400,
	       "Failed to deserialize query string: missing field `path`");
	/* a GET route: other methods are an empty 405 */
	ext_req("POST", "tree?path=", "application/json", NULL, "{}", 2, &r);
	expect(&r, 405, "");
	ext_req("PUT", "tree?path=", NULL, NULL, "x", 1, &r);
	expect(&r, 405, "");
	/* the credential is needed */
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/tree?path=", ag.base);
	th_http("GET", url, h, NULL, 0, &r);
	ck_assert_int_eq(r.status, 401);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(wire_tree_advertised_and_strict_v1)
{
	static const char *const methods[] = {"GET", "PUT", "POST"};
	const char *args[] = {"--strict-v1", NULL};
	struct th_agent strict;
	struct th_resp r;
	char url[256], ct[] = "Content-Type: application/json";
	size_t m;

	/* version 2 of the extension is the one with tree */
	snprintf(url, sizeof(url), "%s/v1/health", ag.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(
		r.body.data, ",\"extensions\":{\"files\":4,\"maxWrite\":"));
	th_resp_cleanup(&r);

	th_agent_start(&strict, args, true);
	for (m = 0; m < 3; m++) {
		const char *hd[] = {strict.auth, ct, NULL};

		snprintf(url, sizeof(url),
			 "%s/sandboxfs/v1/tree?path=&maxEntries=5",
			 strict.base);
		th_http(methods[m], url, hd, "{}", 2, &r);
		ck_assert_msg(r.status == 404 && r.body.len == 0, "%s: %ld",
			      methods[m], r.status);
		th_resp_cleanup(&r);
	}
	th_agent_stop(&strict);
}
END_TEST

/* ---- PUT write with times ------------------------------------------------ */

static void lstat_root(const char *rel, struct stat *st)
{
	lstat_at(ag.root, rel, st);
}

static void assert_ts(const struct timespec *ts, long long sec, long nsec)
{
	ck_assert_msg(ts->tv_sec == sec && ts->tv_nsec == nsec,
		      "time %lld.%09ld, wanted %lld.%09ld",
		      (long long)ts->tv_sec, ts->tv_nsec, sec, nsec);
}

START_TEST(wire_write_times)
{
	struct timespec before, after;
	struct proto_attr a;
	struct th_resp r;
	struct stat st;
	size_t len;
	char *text;

	put_file(ag.root, "t", "");

	/* both given: exactly those, after the bytes */
	ext_write("t",
		  "offset=0&atime=1000000000.000000005"
		  "&mtime=1500000000.123456789",
		  "abc", 3, &r);
	a = expect_attr(&r, "t", NULL);
	ck_assert_uint_eq(a.size, 3);
	ck_assert_int_eq(a.atime, 1000000000);
	ck_assert_uint_eq(a.atime_ns, 5);
	ck_assert_int_eq(a.mtime, 1500000000);
	ck_assert_uint_eq(a.mtime_ns, 123456789);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, 1000000000, 5);
	assert_ts(&st.st_mtim, 1500000000, 123456789);
	text = slurp(ag.root, "t", &len);
	ck_assert(len == 3 && memcmp(text, "abc", 3) == 0);
	free(text);

	/* the fields of a timespec as they are: before the epoch too */
	ext_write("t", "append=1&atime=-1.500000000&mtime=0.000000000", "d", 1,
		  &r);
	ck_assert_uint_eq(expect_attr(&r, "t", NULL).size, 4);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, -1, 500000000);
	assert_ts(&st.st_mtim, 0, 0);

	/* one given: the other is left alone (atime) or as the write left
	 * it (mtime) */
	ext_write("t", "offset=0&mtime=1600000000.999999999", "A", 1, &r);
	th_resp_cleanup(&r);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, -1, 500000000);
	assert_ts(&st.st_mtim, 1600000000, 999999999);
	clock_gettime(CLOCK_REALTIME, &before);
	ext_write("t", "offset=1&atime=1234567890.000000001", "B", 1, &r);
	th_resp_cleanup(&r);
	clock_gettime(CLOCK_REALTIME, &after);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, 1234567890, 1);
	ck_assert_int_ge(st.st_mtim.tv_sec, before.tv_sec - 1);
	ck_assert_int_le(st.st_mtim.tv_sec, after.tv_sec + 1);

	/* "omit" is absence */
	ext_write("t", "offset=0&mtime=1000000000.000000000", "a", 1, &r);
	th_resp_cleanup(&r);
	clock_gettime(CLOCK_REALTIME, &before);
	ext_write("t", "offset=0&atime=omit&mtime=omit", "a", 1, &r);
	th_resp_cleanup(&r);
	lstat_root("t", &st);
	assert_ts(&st.st_atim, 1234567890, 1);
	ck_assert_int_ge(st.st_mtim.tv_sec, before.tv_sec - 1);

	/* "now": the agent's clock, for both */
	ext_write("t", "offset=0&atime=1.000000000&mtime=1.000000000", "a", 1,
		  &r);
	th_resp_cleanup(&r);
	clock_gettime(CLOCK_REALTIME, &before);
	ext_write("t", "offset=0&atime=now&mtime=now", "a", 1, &r);
	a = expect_attr(&r, "t", NULL);
	clock_gettime(CLOCK_REALTIME, &after);
	lstat_root("t", &st);
	ck_assert_int_ge(st.st_atim.tv_sec, before.tv_sec - 1);
	ck_assert_int_le(st.st_atim.tv_sec, after.tv_sec + 1);
	ck_assert_int_ge(st.st_mtim.tv_sec, before.tv_sec - 1);
	ck_assert_int_le(st.st_mtim.tv_sec, after.tv_sec + 1);
	ck_assert_int_eq(a.atime, st.st_atim.tv_sec);
	ck_assert_uint_eq(a.atime_ns, st.st_atim.tv_nsec);

	text = slurp(ag.root, "t", &len);
	ck_assert(len == 4 && memcmp(text, "aBcd", 4) == 0);
	free(text);

	/* times need what utimensat needs: on a file the agent's user does
	 * not own, a given time needs the owner's access, which root's agent
	 * has (root owns the sandbox: SEMANTICS.md, ownership) */
	if (geteuid() == 0) {
		char *p = join(ag.root, "theirs");

		th_write_file(p, "0123", 4);
		ck_assert(chmod(p, 0644) == 0);
		ext_write("theirs", "offset=0&atime=now&mtime=now", "a", 1, &r);
		ck_assert_uint_eq(expect_attr(&r, "theirs", NULL).uid, 0);
		ext_write("theirs", "offset=1&mtime=1.000000000", "b", 1, &r);
		ck_assert_int_eq(expect_attr(&r, "theirs", NULL).mtime, 1);
		text = slurp(ag.root, "theirs", &len);
		ck_assert(len == 4 && memcmp(text, "ab23", 4) == 0);
		free(text);
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
	size_t i, len;
	char *text;
	int which;

	put_file(ag.root, "t", "keep");
	lstat_root("t", &st0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (which = 0; which < 2; which++) {
			char *e = qenc(bad[i]);

			snprintf(how, sizeof(how), "offset=0&%s=%s",
				 which ? "mtime" : "atime", e);
			free(e);
			ext_write("t", how, "XXXXXXXX", 8, &r);
			ck_assert_msg(r.status == 400, "%s: %ld", how,
				      r.status);
			expect(&r, 400,
			       "REQUEST_INVALID: Request invalid: atime and "
			       "mtime must be SEC.NSEC, now or omit");
		}
	}
	/* one good, one bad: refused as well */
	ext_write("t", "offset=0&atime=now&mtime=soon", "XXXXXXXX", 8, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: atime and mtime must be "
	       "SEC.NSEC, now or omit");
	/* nothing was written, nothing moved */
	text = slurp(ag.root, "t", &len);
	ck_assert(len == 4 && memcmp(text, "keep", 4) == 0);
	free(text);
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
	size_t len;
	char *text;

	/* absent: made with exactly the mode, bytes and times in one go */
	ext_write("n",
		  "offset=0&create=640&exclusive=1&mtime=1000000000."
		  "000000007",
		  "new", 3, &r);
	a = expect_attr(&r, "n", NULL);
	ck_assert_uint_eq(a.size, 3);
	ck_assert_uint_eq(a.perm, 0640);
	lstat_root("n", &st);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	assert_ts(&st.st_mtim, 1000000000, 7);
	text = slurp(ag.root, "n", &len);
	ck_assert(len == 3 && memcmp(text, "new", 3) == 0);
	free(text);

	/* exclusive and present: EEXIST, nothing written */
	ext_write("n", "offset=0&create=600&exclusive=1", "XXXX", 4, &r);
	expect(&r, 409, "FS_ERROR: EEXIST: File exists: n");
	text = slurp(ag.root, "n", &len);
	ck_assert(len == 3 && memcmp(text, "new", 3) == 0);
	free(text);

	/* not exclusive and present: written as it is, its mode kept */
	ext_write("n", "offset=3&create=600", "er", 2, &r);
	a = expect_attr(&r, "n", NULL);
	ck_assert_uint_eq(a.size, 5);
	ck_assert_uint_eq(a.perm, 0640);

	/* an empty body makes an empty file; append creates too */
	ext_write("e", "offset=0&create=644&exclusive=true", "", 0, &r);
	ck_assert_uint_eq(expect_attr(&r, "e", NULL).size, 0);
	lstat_root("e", &st);
	ck_assert(S_ISREG(st.st_mode) && st.st_size == 0);
	ext_write("ap", "append=1&create=600", "a", 1, &r);
	ck_assert_uint_eq(expect_attr(&r, "ap", NULL).size, 1);

	/* without create nothing is made */
	ext_write("none", "offset=0", "a", 1, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: none");

	/* malformed: refused before anything happens */
	ext_write("bad", "offset=0&create=8", "a", 1, &r);
	ck_assert_int_eq(r.status, 400);
	th_resp_cleanup(&r);
	ext_write("bad", "offset=0&create=17777", "a", 1, &r);
	ck_assert_int_eq(r.status, 400);
	th_resp_cleanup(&r);
	ext_write("bad", "offset=0&create=", "a", 1, &r);
	ck_assert_int_eq(r.status, 400);
	th_resp_cleanup(&r);
	ext_write("bad", "offset=0&exclusive=1", "a", 1, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: exclusive needs "
	       "create");
	ext_write("bad", "offset=0&create=644&exclusive=2", "a", 1, &r);
	ck_assert_int_eq(r.status, 400);
	th_resp_cleanup(&r);
	{
		char *p = join(ag.root, "bad");

		ck_assert(lstat(p, &st) < 0 && errno == ENOENT);
		free(p);
	}

	/* the path rules hold: no way out, no symlink followed in between */
	ext_write("../out", "offset=0&create=644", "a", 1, &r);
	ck_assert_int_eq(r.status, 400);
	th_resp_cleanup(&r);
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

	make_dir(ag.root, "c");
	make_dir(ag.root, "c/sub");
	put_file(ag.root, "c/a", "alpha");
	put_file(ag.root, "c/b", "");
	put_file(ag.root, "c/big", "0123456789abcdef0123456789");
	put_file(ag.root, "c/sub/deep", "not this one");
	{
		char *p = join(ag.root, "c/link");
		char *q = join(ag.root, "c/fifo");

		ck_assert(symlink("a", p) == 0);
		ck_assert(mkfifo(q, 0600) == 0);
		free(p);
		free(q);
	}

	/* regular files only, each whole, with its attributes */
	ext_get("contents", "c", "&maxFile=20", NULL, &r);
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
	ext_get("contents", "c", NULL, NULL, &r);
	n = decode_contents(&r, files, 16);
	th_resp_cleanup(&r);
	ck_assert_uint_eq(n, 3);
	g = got_named(files, n, "big");
	ck_assert(g != NULL && g->len == 26);

	/* maxBytes ends the answer at the first file that does not fit */
	ext_get("contents", "c", "&maxBytes=4", NULL, &r);
	n = decode_contents(&r, files, 16);
	th_resp_cleanup(&r);
	ck_assert_uint_le(n, 1);
	if (n == 1)
		ck_assert_str_eq(files[0].name, "b");

	/* the root, an empty answer, errors */
	ext_get("contents", "", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);
	ext_get("contents", "c/sub/deep", NULL, NULL, &r);
	expect(&r, 409, "FS_ERROR: ENOTDIR: Not a directory: c/sub/deep");
	ext_get("contents", "nowhere", NULL, NULL, &r);
	expect(&r, 404, "PATH_NOT_FOUND: No such file in the sandbox: nowhere");
	ext_get("contents", "../x", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 400);
	th_resp_cleanup(&r);
	ext_get("contents", "c/link", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 409);
	th_resp_cleanup(&r);
	ext_get("contents", "c", "&maxFile=1048577", NULL, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: maxFile must be at "
	       "most 1048576");
	ext_get("contents", "c", "&maxBytes=x", NULL, &r);
	expect(&r, 400,
	       "REQUEST_INVALID: Request invalid: maxBytes must be "
	       "at most 16777216");
}
END_TEST

Suite *make_agent_ext_suite(void)
{
	Suite *s = suite_create("agent_ext");
	TCase *tc = tcase_create("fsops");

	tcase_add_checked_fixture(tc, fsops_setup, fsops_teardown);
	tcase_add_test(tc, fsops_confinement);
	tcase_add_test(tc, fsops_create_mode_exact);
	tcase_add_test(tc, fsops_fifo_and_types);
	tcase_add_test(tc, fsops_list_pages_by_cookie);
	suite_add_tcase(s, tc);

	tc = tcase_create("wire");
	tcase_add_checked_fixture(tc, wire_setup, wire_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, wire_stat_and_errors);
	tcase_add_test(tc, wire_symlinks);
	tcase_add_test(tc, wire_list_20000);
	tcase_add_test(tc, wire_list_attrs);
	tcase_add_test(tc, wire_read_ranges);
	tcase_add_test(tc, wire_fifo_read_does_not_hang);
	tcase_add_test(tc, wire_write_and_create);
	tcase_add_test(tc, wire_dirs_and_names);
	tcase_add_test(tc, wire_times_and_statfs);
	tcase_add_test(tc, wire_malformed_bodies);
	tcase_add_test(tc, wire_health_and_auth);
	tcase_add_test(tc, wire_strict_v1);
	suite_add_tcase(s, tc);

	tc = tcase_create("tree");
	tcase_add_checked_fixture(tc, wire_setup, wire_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, wire_tree_whole);
	tcase_add_test(tc, wire_tree_budget);
	tcase_add_test(tc, wire_tree_symlinks);
	tcase_add_test(tc, wire_tree_unreadable_left_out);
	tcase_add_test(tc, wire_tree_errors);
	tcase_add_test(tc, wire_tree_advertised_and_strict_v1);
	tcase_add_test(tc, wire_write_times);
	tcase_add_test(tc, wire_write_times_malformed);
	tcase_add_test(tc, wire_write_create);
	tcase_add_test(tc, wire_contents);
	suite_add_tcase(s, tc);

	/* its own agent, started and stopped by the test */
	tc = tcase_create("tree_budget_end");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, wire_tree_stops_at_first_misfit);
	suite_add_tcase(s, tc);
	return s;
}
