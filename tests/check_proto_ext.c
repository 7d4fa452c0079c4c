/* SPDX-License-Identifier: MIT */
/*
 * Suite proto_ext: the JSON of the file extension (proto_ext.c) that
 * describes entries: file types, content validators, exact encodings and
 * round trips of attributes, listing pages and subtrees, and refusal of
 * malformed input. The operation bodies, readlink and statfs answers and
 * directory contents are check_proto_ext_ops.c's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
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

static const char sample_json[] =
	"{\"type\":\"file\",\"mode\":2541,\"size\":1234,\"nlink\":2,"
	"\"uid\":65534,\"gid\":100,\"ino\":987654321,\"blocks\":8,\"rdev\":0,"
	"\"atime\":1700000000,\"atimeNsec\":1,\"mtime\":1700000001,"
	"\"mtimeNsec\":999999999,\"ctime\":1700000002,\"ctimeNsec\":500}";

static void assert_attr_eq(const struct proto_attr *x,
			   const struct proto_attr *y)
{
	ck_assert_int_eq(x->type, y->type);
	ck_assert_uint_eq(x->perm, y->perm);
	ck_assert_uint_eq(x->size, y->size);
	ck_assert_uint_eq(x->nlink, y->nlink);
	ck_assert_uint_eq(x->uid, y->uid);
	ck_assert_uint_eq(x->gid, y->gid);
	ck_assert_uint_eq(x->ino, y->ino);
	ck_assert_uint_eq(x->blocks, y->blocks);
	ck_assert_uint_eq(x->rdev, y->rdev);
	ck_assert_int_eq(x->atime, y->atime);
	ck_assert_int_eq(x->mtime, y->mtime);
	ck_assert_int_eq(x->ctime, y->ctime);
	ck_assert_uint_eq(x->atime_ns, y->atime_ns);
	ck_assert_uint_eq(x->mtime_ns, y->mtime_ns);
	ck_assert_uint_eq(x->ctime_ns, y->ctime_ns);
}

/* ---- types and validators ------------------------------------------------ */

START_TEST(ftype_names)
{
	static const char *const names[] = {"file",   "dir",  "symlink", "fifo",
					    "socket", "char", "block"};
	size_t i;

	for (i = 0; i < 7; i++) {
		enum proto_ftype t = proto_ftype_from_name(names[i]);

		ck_assert_int_eq(t, (int)(PROTO_FT_FILE + i));
		ck_assert_str_eq(proto_ftype_name(t), names[i]);
	}
	ck_assert_int_eq(proto_ftype_from_name("door"), PROTO_FT_UNKNOWN);
	ck_assert_int_eq(proto_ftype_from_name(NULL), PROTO_FT_UNKNOWN);
	ck_assert_str_eq(proto_ftype_name(PROTO_FT_UNKNOWN), "unknown");
	ck_assert_str_eq(proto_ftype_name((enum proto_ftype)99), "unknown");
}
END_TEST

START_TEST(etag_format)
{
	struct proto_attr a = tx_sample_attr();
	char e[PROTO_ETAG_MAX], e2[PROTO_ETAG_MAX];

	proto_attr_etag(&a, e);
	ck_assert_str_eq(e, "\"3ade68b1-4d2-6553f101.3b9ac9ff\"");
	a.mtime = -1;
	a.ino = UINT64_MAX;
	a.size = UINT64_MAX;
	a.mtime_ns = 999999999;
	proto_attr_etag(&a, e);
	ck_assert_str_eq(e, "\"ffffffffffffffff-ffffffffffffffff-"
			    "ffffffffffffffff.3b9ac9ff\"");
	ck_assert_uint_lt(strlen(e), PROTO_ETAG_MAX);
	/* any field of the validator changes it */
	a = tx_sample_attr();
	proto_attr_etag(&a, e);
	a.size++;
	proto_attr_etag(&a, e2);
	ck_assert_str_ne(e, e2);
	a = tx_sample_attr();
	a.mtime_ns--;
	proto_attr_etag(&a, e2);
	ck_assert_str_ne(e, e2);
}
END_TEST

/* ---- attributes ---------------------------------------------------------- */

START_TEST(attr_exact_and_round_trip)
{
	struct proto_attr a = tx_sample_attr(), d;
	struct buf b = BUF_INIT(0);
	char *target = (char *)1;

	ck_assert_int_eq(proto_attr_encode(&a, NULL, NULL, &b), 0);
	ck_assert_str_eq(b.data, sample_json);
	ck_assert_int_eq(proto_attr_decode(b.data, b.len, &d, &target), 0);
	assert_attr_eq(&a, &d);
	ck_assert_ptr_null(target);
	buf_cleanup(&b);

	/* a symlink with its target, and a name (listing form) */
	a.type = PROTO_FT_SYMLINK;
	a.perm = 0777;
	ck_assert_int_eq(proto_attr_encode(&a, "l", "../x \"y\"", &b), 0);
	ck_assert(strncmp(b.data, "{\"name\":\"l\",\"type\":\"symlink\",",
			  28) == 0);
	ck_assert_ptr_nonnull(
		strstr(b.data, ",\"target\":\"../x \\\"y\\\"\"}"));
	ck_assert_int_eq(proto_attr_decode(b.data, b.len, &d, &target), 0);
	assert_attr_eq(&a, &d);
	ck_assert_str_eq(target, "../x \"y\"");
	free(target);
	/* target not wanted */
	ck_assert_int_eq(proto_attr_decode(b.data, b.len, &d, NULL), 0);
	buf_cleanup(&b);
}
END_TEST

START_TEST(attr_integers_exact)
{
	struct proto_attr a = tx_sample_attr(), d;
	struct buf b = BUF_INIT(0);

	/* overlayfs with xino puts the layer in the high bits */
	a.ino = 0x8000000000000123ULL;
	a.size = 9007199254740993ULL; /* 2^53 + 1: a double cannot hold it */
	a.rdev = 9007199254740991ULL; /* 2^53 - 1: still a number */
	a.mtime = -5;
	a.atime = -9007199254740993LL;
	a.ctime = INT64_MIN;
	a.blocks = 0;
	ck_assert_int_eq(proto_attr_encode(&a, NULL, NULL, &b), 0);
	ck_assert_ptr_nonnull(
		strstr(b.data, "\"ctime\":\"-9223372036854775808\""));
	ck_assert_ptr_nonnull(strstr(b.data, "\"blocks\":0,"));
	ck_assert_ptr_nonnull(
		strstr(b.data, "\"ino\":\"9223372036854776099\""));
	ck_assert_ptr_nonnull(strstr(b.data, "\"size\":\"9007199254740993\""));
	ck_assert_ptr_nonnull(strstr(b.data, "\"rdev\":9007199254740991,"));
	ck_assert_ptr_nonnull(strstr(b.data, "\"mtime\":-5,"));
	ck_assert_ptr_nonnull(
		strstr(b.data, "\"atime\":\"-9007199254740993\""));
	ck_assert_int_eq(proto_attr_decode(b.data, b.len, &d, NULL), 0);
	assert_attr_eq(&a, &d);
	buf_cleanup(&b);
}
END_TEST

/* The decoder looks for members where the encoder puts them first: the
 * same attributes in another order (with an unknown member between)
 * decode the same. */
START_TEST(attr_members_in_any_order)
{
	static const char in_order[] =
		"{\"name\":\"n\",\"type\":\"file\",\"mode\":420,\"size\":5,"
		"\"nlink\":1,\"uid\":7,\"gid\":8,\"ino\":77,\"blocks\":8,"
		"\"rdev\":0,\"atime\":1,\"atimeNsec\":11,\"mtime\":2,"
		"\"mtimeNsec\":22,\"ctime\":3,\"ctimeNsec\":33}";
	static const char scrambled[] =
		"{\"ctimeNsec\":33,\"ctime\":3,\"x\":[1],\"mtimeNsec\":22,"
		"\"mtime\":2,\"atimeNsec\":11,\"atime\":1,\"rdev\":0,"
		"\"blocks\":8,\"ino\":77,\"gid\":8,\"type\":\"file\","
		"\"uid\":7,\"nlink\":1,\"size\":5,\"mode\":420,\"name\":\"n\"}";
	struct proto_attr a, d;

	ck_assert_int_eq(
		proto_attr_decode(in_order, sizeof(in_order) - 1, &a, NULL), 0);
	ck_assert_int_eq(
		proto_attr_decode(scrambled, sizeof(scrambled) - 1, &d, NULL),
		0);
	assert_attr_eq(&a, &d);
	ck_assert_uint_eq(d.ino, 77);
	ck_assert_uint_eq(d.ctime_ns, 33);
	ck_assert_uint_eq(d.uid, 7);
}
END_TEST

/* An input a decoder must refuse, and the error it must refuse it with. */
struct refusal {
	const char *json;
	int err;
};

/* Each of the n inputs of r, through decode, fails with its error. decode
 * frees what it decodes. */
static void assert_refused(int (*decode)(const char *json, size_t len),
			   const struct refusal *r, size_t n)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		rc = decode(r[i].json, strlen(r[i].json));
		ck_assert_msg(rc == r[i].err, "%s: %d, want %d", r[i].json, rc,
			      r[i].err);
	}
}

/* The members of an attribute of type t with the given mode, size, ino
 * and atimeNsec (JSON text), nlink 1 and every other member 0, in the
 * order the encoder writes them. */
#define ATTR_MEMBERS(t, mode, size, ino, atime_ns)                     \
	"\"type\":\"" t "\",\"mode\":" mode ",\"size\":" size          \
	",\"nlink\":1,\"uid\":0,\"gid\":0,\"ino\":" ino                \
	",\"blocks\":0,\"rdev\":0,\"atime\":0,\"atimeNsec\":" atime_ns \
	",\"mtime\":0,\"mtimeNsec\":0,\"ctime\":0,\"ctimeNsec\":0"

/* The JSON of a listing entry named by the %s argument (JSON text), a
 * file with every attribute zero but nlink and ino. */
#define ZERO_ENTRY_FMT \
	"{\"name\":%s," ATTR_MEMBERS("file", "0", "0", "1", "0") "}"

/* The text fmt formats, through decode (which frees what it decodes): 0
 * or the error. */
static int decode_fmt(int (*decode)(const char *json, size_t len),
		      const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int decode_fmt(int (*decode)(const char *json, size_t len),
		      const char *fmt, ...)
{
	va_list ap;
	char *j;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&j, fmt, ap);
	va_end(ap);
	ck_assert_int_ge(rc, 0);
	rc = decode(j, strlen(j));
	free(j);
	return rc;
}

static int attr_decode(const char *json, size_t len)
{
	struct proto_attr d;

	return proto_attr_decode(json, len, &d, NULL);
}

/* sample_json with the first occurrence of find overwritten by repl (as
 * long as find or shorter), decoded without a target: 0 or the error. */
static int attr_decode_patched(const char *find, const char *repl)
{
	char *j = strdup(sample_json);
	int rc;

	ck_assert_ptr_nonnull(j);
	memcpy(strstr(j, find), repl, strlen(repl));
	rc = attr_decode(j, strlen(j));
	free(j);
	return rc;
}

START_TEST(attr_bad_input)
{
	static const struct refusal bad[] = {
		{"not json", -EBADMSG},
		{"", -EBADMSG},
		{"{\"type\":\"file\"} x", -EBADMSG},
		{"[1,2]", -EINVAL},
		{"{}", -EINVAL},
		/* mode beyond the permission bits, nsec beyond a second,
		 * negative size, fractions, a string that is not digits */
		{"{" ATTR_MEMBERS("file", "4096", "0", "1", "0") "}", -EINVAL},
		{"{" ATTR_MEMBERS("file", "0", "0", "1", "1000000000") "}",
		 -EINVAL},
		{"{" ATTR_MEMBERS("file", "0", "-1", "1", "0") "}", -EINVAL},
		{"{" ATTR_MEMBERS("file", "0", "1.5", "1", "0") "}", -EINVAL},
		{"{" ATTR_MEMBERS("file", "0", "0", "\"1x\"", "0") "}",
		 -EINVAL},
		/* a u64 that does not fit */
		{"{" ATTR_MEMBERS("file", "0", "0", "\"18446744073709551616\"",
				  "0") "}",
		 -EINVAL},
	};
	/* each field with a wrong type, in turn: what of sample_json is
	 * overwritten, and with what */
	static const char *const wrong_types[][2] = {
		{"\"file\"", "12345 "},
		{"2541", "true"},
		{"1234,", "\"x\", "},
	};
	struct proto_attr d;
	char *t = NULL;
	size_t i;

	assert_refused(attr_decode, bad, sizeof(bad) / sizeof(bad[0]));
	for (i = 0; i < sizeof(wrong_types) / sizeof(wrong_types[0]); i++)
		ck_assert_int_eq(attr_decode_patched(wrong_types[i][0],
						     wrong_types[i][1]),
				 -EINVAL);

	/* a NUL in the target would cut it */
	ck_assert_int_eq(
		proto_attr_decode(
			S("{" ATTR_MEMBERS(
				"symlink", "511", "0", "1",
				"0") ","
				     "\"target\":\"a\\u0000/../../x\"}"),
			&d, &t),
		-EINVAL);
	ck_assert_ptr_null(t);
	/* an escaped backslash followed by u0000 is just text */
	ck_assert_int_eq(
		proto_attr_decode(
			S("{" ATTR_MEMBERS("symlink", "511", "0", "1",
					   "0") ","
						"\"target\":\"a\\\\u0000\"}"),
			&d, &t),
		0);
	ck_assert_str_eq(t, "a\\u0000");
	free(t);
	/* a type a newer agent might add decodes as unknown */
	ck_assert_int_eq(
		proto_attr_decode(S("{" ATTR_MEMBERS("door", "0", "0", "1",
						     "0") ",\"extra\":[1]}"),
				  &d, NULL),
		0);
	ck_assert_int_eq(d.type, PROTO_FT_UNKNOWN);
}
END_TEST

/* ---- listing pages ------------------------------------------------------- */

static const char *const odd_names[] = {
	"plain",
	"with \"quotes\" and \\backslash",
	"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", /* UTF-8 */
	"ctl\x01\x1f\n\t\x7f", /* control characters */
	"raw\xff\xfe", /* not UTF-8 */
	"...",
	".hidden",
};

#define NODD (sizeof(odd_names) / sizeof(odd_names[0]))

/* Decode a listing page, then free it: 0 or the error. */
static int list_decode(const char *json, size_t len)
{
	struct proto_list l;
	int rc = proto_list_decode(json, len, &l);

	if (rc == 0)
		proto_list_cleanup(&l);
	return rc;
}

START_TEST(list_round_trip)
{
	struct buf b = BUF_INIT(0);
	struct proto_list l;
	struct proto_attr a = tx_sample_attr();
	size_t i;

	ck_assert_int_eq(proto_list_begin(&b), 0);
	for (i = 0; i < NODD; i++) {
		a.ino = 100 + i;
		ck_assert_int_eq(proto_list_add(&b, i == 0, odd_names[i], &a,
						i == 1 ? "t\"\n" : NULL),
				 0);
	}
	ck_assert_int_eq(proto_list_end(&b, "123456789012345678"), 0);
	/* control characters are escaped, never raw */
	ck_assert_ptr_nonnull(strstr(b.data, "ctl\\u0001\\u001f\\n\\t"));
	ck_assert_ptr_null(memchr(b.data, '\n', b.len));
	ck_assert(strcmp(b.data + b.len - 30,
			 "],\"next\":\"123456789012345678\"}") == 0);

	ck_assert_int_eq(proto_list_decode(b.data, b.len, &l), 0);
	ck_assert_uint_eq(l.n, NODD);
	for (i = 0; i < NODD; i++) {
		ck_assert_str_eq(l.entries[i].name, odd_names[i]);
		ck_assert_uint_eq(l.entries[i].attr.ino, 100 + i);
		ck_assert_uint_eq(l.entries[i].attr.size, 1234);
		if (i == 1)
			ck_assert_str_eq(l.entries[i].target, "t\"\n");
		else
			ck_assert_ptr_null(l.entries[i].target);
	}
	ck_assert_str_eq(l.next, "123456789012345678");
	proto_list_cleanup(&l);
	proto_list_cleanup(&l); /* idempotent */
	buf_cleanup(&b);

	/* the last page: no "next"; an empty directory */
	ck_assert_int_eq(proto_list_begin(&b), 0);
	ck_assert_int_eq(proto_list_end(&b, NULL), 0);
	ck_assert_str_eq(b.data, "{\"entries\":[]}");
	ck_assert_int_eq(proto_list_decode(b.data, b.len, &l), 0);
	ck_assert_uint_eq(l.n, 0);
	ck_assert_ptr_null(l.next);
	ck_assert_ptr_null(l.entries);
	proto_list_cleanup(&l);
	buf_cleanup(&b);
}
END_TEST

/* rc, what an add to b that did not fit returned, is -EFBIG, and b holds
 * the before bytes it held before that add, as text. */
static void assert_add_refused(const struct buf *b, size_t before, int rc)
{
	ck_assert_int_eq(rc, -EFBIG);
	ck_assert_uint_eq(b->len, before);
	ck_assert_uint_eq(strlen(b->data), before);
}

START_TEST(list_add_rolls_back)
{
	struct proto_attr a = tx_sample_attr();
	struct buf b = BUF_INIT(420);
	struct proto_list l;
	size_t before;

	ck_assert_int_eq(proto_list_begin(&b), 0);
	ck_assert_int_eq(proto_list_add(&b, true, "one", &a, NULL), 0);
	before = b.len;
	/* the second entry does not fit: the page is left as it was */
	assert_add_refused(&b, before,
			   proto_list_add(&b, false, "two", &a, NULL));
	ck_assert_int_eq(proto_list_end(&b, "7"), 0);
	ck_assert_int_eq(proto_list_decode(b.data, b.len, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.entries[0].name, "one");
	ck_assert_str_eq(l.next, "7");
	proto_list_cleanup(&l);
	buf_cleanup(&b);
}
END_TEST

/* Decode {"entries":[<one entry named name_json>]}; 0 or the error. */
static int decode_one_name(const char *name_json)
{
	return decode_fmt(list_decode, "{\"entries\":[" ZERO_ENTRY_FMT "]}",
			  name_json);
}

START_TEST(list_bad_input)
{
	static const struct refusal bad[] = {
		{"{\"entries\":{}}", -EINVAL},
		{"{\"entries\":[1]}", -EINVAL},
		{"{}", -EINVAL},
		{"{\"entries\":[],\"next\":7}", -EINVAL},
		{"{\"entries\":[],\"next\":\"\"}", -EINVAL},
		{"{\"entries\":[", -EBADMSG},
	};
	struct proto_list l;
	struct buf b = BUF_INIT(0);
	struct proto_attr a = tx_sample_attr();
	char name[16];
	int i;

	ck_assert_int_eq(decode_one_name("\"ok\""), 0);
	/* names that would walk out of the directory */
	ck_assert_int_eq(decode_one_name("\"..\""), -EINVAL);
	ck_assert_int_eq(decode_one_name("\".\""), -EINVAL);
	ck_assert_int_eq(decode_one_name("\"a/b\""), -EINVAL);
	ck_assert_int_eq(decode_one_name("\"\""), -EINVAL);
	ck_assert_int_eq(decode_one_name("\"a\\u0000b\""), -EINVAL);
	ck_assert_int_eq(decode_one_name("7"), -EINVAL);
	ck_assert_int_eq(decode_one_name("null"), -EINVAL);

	assert_refused(list_decode, bad, sizeof(bad) / sizeof(bad[0]));

	/* more entries than any page may hold */
	ck_assert_int_eq(proto_list_begin(&b), 0);
	for (i = 0; i <= PROTO_EXT_LIST_MAX; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(proto_list_add(&b, i == 0, name, &a, NULL), 0);
	}
	ck_assert_int_eq(proto_list_end(&b, NULL), 0);
	ck_assert_int_eq(proto_list_decode(b.data, b.len, &l), -EFBIG);
	buf_cleanup(&b);
}
END_TEST

/* ---- subtrees ------------------------------------------------------------ */

/* Decode a subtree answer, then free it: 0 or the error. */
static int tree_decode(const char *json, size_t len)
{
	struct proto_tree t;
	int rc = proto_tree_decode(json, len, &t);

	if (rc == 0)
		proto_tree_cleanup(&t);
	return rc;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* One directory of a test tree: its path and how many entries it has
 * (names taken from odd_names in turn). */
struct tdir {
	const char *path;
	size_t n;
};

static const struct tdir tree_dirs[] = {
	{"", NODD},
	{"with \"quotes\" and \\backslash", 2},
	{"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", 1},
	{"ctl\x01\x1f\n\t\x7f", 0},
	{"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac/empty", 0},
	{"ctl\x01\x1f\n\t\x7f/.../.hidden/raw\xff\xfe", 3},
};

#define NTDIRS (sizeof(tree_dirs) / sizeof(tree_dirs[0]))

/* The second entry of a test directory is a symlink, the third a
 * directory, the others files. */
static enum proto_ftype tree_entry_type(size_t i)
{
	if (i == 1)
		return PROTO_FT_SYMLINK;
	return i == 2 ? PROTO_FT_DIR : PROTO_FT_FILE;
}

/* The entries of directory d as proto_list_add writes them. */
static void tree_entries(size_t d, struct buf *e)
{
	struct proto_attr a = tx_sample_attr();
	size_t i;

	buf_reset(e);
	for (i = 0; i < tree_dirs[d].n; i++) {
		a.ino = 1000 * d + i;
		a.type = tree_entry_type(i);
		ck_assert_int_eq(
			proto_list_add(e, i == 0, odd_names[i % NODD], &a,
				       i == 1 ? "../t \"\x01\"" : NULL),
			0);
	}
}

static void tree_encode(bool complete, struct buf *out)
{
	struct buf e = BUF_INIT(0);
	size_t d;

	ck_assert_int_eq(proto_tree_begin(out), 0);
	for (d = 0; d < NTDIRS; d++) {
		tree_entries(d, &e);
		ck_assert_int_eq(proto_tree_dir(out, d == 0, tree_dirs[d].path,
						e.data ? e.data : "", e.len),
				 0);
	}
	ck_assert_int_eq(proto_tree_end(out, complete), 0);
	buf_cleanup(&e);
}

START_TEST(tree_round_trip)
{
	struct buf b = BUF_INIT(0);
	struct proto_tree t;
	size_t d, i;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		bool complete = pass == 0;

		tree_encode(complete, &b);
		ck_assert(starts_with(b.data, "{\"dirs\":[{\"path\":\"\","
					      "\"entries\":[{\"name\":"
					      "\"plain\","));
		ck_assert_ptr_nonnull(strstr(
			b.data, "{\"path\":\"with \\\"quotes\\\" and "
				"\\\\backslash\",\"entries\":[{\"name\":"));
		/* control characters in paths are escaped, never raw */
		ck_assert_ptr_nonnull(strstr(
			b.data, "{\"path\":\"ctl\\u0001\\u001f\\n\\t\x7f\","
				"\"entries\":[]}"));
		ck_assert_ptr_null(memchr(b.data, '\n', b.len));
		ck_assert_ptr_null(memchr(b.data, '\x01', b.len));
		ck_assert(ends_with(b.data, complete
						    ? "],\"complete\":true}"
						    : "],\"complete\":false}"));

		memset(&t, 0, sizeof(t));
		ck_assert_int_eq(proto_tree_decode(b.data, b.len, &t), 0);
		ck_assert_int_eq(t.complete, complete);
		ck_assert_uint_eq(t.ndirs, NTDIRS);
		for (d = 0; d < NTDIRS; d++) {
			const struct proto_tree_dir *td = &t.dirs[d];

			ck_assert_str_eq(td->path, tree_dirs[d].path);
			ck_assert_uint_eq(td->n, tree_dirs[d].n);
			if (td->n == 0)
				ck_assert_ptr_null(td->entries);
			for (i = 0; i < td->n; i++) {
				const struct proto_dirent *e = &td->entries[i];
				struct proto_attr want = tx_sample_attr();

				want.ino = 1000 * d + i;
				want.type = tree_entry_type(i);
				ck_assert_str_eq(e->name, odd_names[i % NODD]);
				assert_attr_eq(&e->attr, &want);
				if (i == 1)
					ck_assert_str_eq(e->target,
							 "../t \"\x01\"");
				else
					ck_assert_ptr_null(e->target);
			}
		}
		proto_tree_cleanup(&t);
		ck_assert_ptr_null(t.dirs);
		ck_assert_uint_eq(t.ndirs, 0);
		proto_tree_cleanup(&t); /* idempotent */
		proto_tree_cleanup(NULL);
		buf_cleanup(&b);
	}
}
END_TEST

START_TEST(tree_exact_small)
{
	struct buf b = BUF_INIT(0);
	struct proto_tree t;

	/* nothing fitted: no directory at all */
	ck_assert_int_eq(proto_tree_begin(&b), 0);
	ck_assert_int_eq(proto_tree_end(&b, false), 0);
	ck_assert_str_eq(b.data, "{\"dirs\":[],\"complete\":false}");
	ck_assert_int_eq(proto_tree_decode(b.data, b.len, &t), 0);
	ck_assert_uint_eq(t.ndirs, 0);
	ck_assert_ptr_null(t.dirs);
	ck_assert(!t.complete);
	proto_tree_cleanup(&t);
	buf_cleanup(&b);

	/* empty directories, exactly */
	ck_assert_int_eq(proto_tree_begin(&b), 0);
	ck_assert_int_eq(proto_tree_dir(&b, true, "", "", 0), 0);
	ck_assert_int_eq(proto_tree_dir(&b, false, "a \"b\"", "", 0), 0);
	ck_assert_int_eq(proto_tree_dir(&b, false, "a \"b\"/c", "", 0), 0);
	ck_assert_int_eq(proto_tree_end(&b, true), 0);
	ck_assert_str_eq(b.data, "{\"dirs\":[{\"path\":\"\",\"entries\":[]},"
				 "{\"path\":\"a \\\"b\\\"\",\"entries\":[]},"
				 "{\"path\":\"a \\\"b\\\"/c\",\"entries\":[]}],"
				 "\"complete\":true}");
	ck_assert_int_eq(proto_tree_decode(b.data, b.len, &t), 0);
	ck_assert_uint_eq(t.ndirs, 3);
	ck_assert_str_eq(t.dirs[0].path, "");
	ck_assert_str_eq(t.dirs[1].path, "a \"b\"");
	ck_assert_str_eq(t.dirs[2].path, "a \"b\"/c");
	ck_assert_uint_eq(t.dirs[2].n, 0);
	ck_assert(t.complete);
	proto_tree_cleanup(&t);
	buf_cleanup(&b);

	/* unknown members are ignored; whitespace is JSON's business */
	ck_assert_int_eq(
		proto_tree_decode(
			S(" {\"later\":[1],\"dirs\":[{\"path\":\"x\","
			  "\"entries\":[],\"more\":{}}], \"complete\":true } "),
			&t),
		0);
	ck_assert_uint_eq(t.ndirs, 1);
	ck_assert_str_eq(t.dirs[0].path, "x");
	proto_tree_cleanup(&t);
}
END_TEST

START_TEST(tree_dir_rolls_back)
{
	struct buf e = BUF_INIT(0), b = BUF_INIT(700);
	struct proto_tree t;
	size_t before;

	tree_entries(1, &e); /* two entries, one with a target */
	ck_assert_int_eq(proto_tree_begin(&b), 0);
	ck_assert_int_eq(proto_tree_dir(&b, true, "d1", e.data, e.len), 0);
	before = b.len;
	/* the second listing does not fit: the answer is left as it was */
	assert_add_refused(&b, before,
			   proto_tree_dir(&b, false, "d2", e.data, e.len));
	ck_assert_int_eq(proto_tree_end(&b, false), 0);
	ck_assert_int_eq(proto_tree_decode(b.data, b.len, &t), 0);
	ck_assert_uint_eq(t.ndirs, 1);
	ck_assert_str_eq(t.dirs[0].path, "d1");
	ck_assert_uint_eq(t.dirs[0].n, 2);
	ck_assert(!t.complete);
	proto_tree_cleanup(&t);
	buf_cleanup(&b);
	buf_cleanup(&e);
}
END_TEST

/* Decode {"dirs":[<dirs>],"complete":true}; 0 or the error. */
static int decode_tree_dirs(const char *dirs)
{
	return decode_fmt(tree_decode, "{\"dirs\":[%s],\"complete\":true}",
			  dirs);
}

/* Decode a tree of one directory at path_json holding one entry named
 * name_json. */
static int decode_tree_one(const char *path_json, const char *name_json)
{
	return decode_fmt(tree_decode,
			  "{\"dirs\":[{\"path\":%s,\"entries\":[" ZERO_ENTRY_FMT
			  "]}],\"complete\":true}",
			  path_json, name_json);
}

START_TEST(tree_bad_input)
{
	static const char *const bad_paths[] = {
		"\"..\"",	 "\"a/..\"", "\"../a\"", "\"a/../b\"",
		"\".\"",	 "\"a/.\"",  "\"./a\"",	 "\"/\"",
		"\"/a\"",	 "\"a/\"",   "\"a//b\"", "\"//\"",
		"\"a\\u0000b\"", "7",	     "null",	 "true",
		"[\"a\"]",	 "{}",
	};
	static const char *const bad_names[] = {
		"\"..\"", "\".\"",	  "\"a/b\"", "\"/\"",
		"\"\"",	  "\"a\\u0000\"", "7",	     "null",
	};
	static const char *const bad_dirs[] = {
		"{\"entries\":[]}",
		"{\"path\":\"a\"}",
		"{\"path\":\"a\",\"entries\":{}}",
		"{\"path\":\"a\",\"entries\":null}",
		"{\"path\":\"a\",\"entries\":[1]}",
		"{\"path\":\"a\",\"entries\":[\"f\"]}",
		"1",
		"\"a\"",
		"[]",
	};
	static const struct refusal bad[] = {
		{"{\"complete\":true}", -EINVAL},
		{"{\"dirs\":{},\"complete\":true}", -EINVAL},
		{"{\"dirs\":null,\"complete\":true}", -EINVAL},
		/* "complete" is required and a boolean */
		{"{\"dirs\":[]}", -EINVAL},
		{"{\"dirs\":[],\"complete\":\"true\"}", -EINVAL},
		{"{\"dirs\":[],\"complete\":1}", -EINVAL},
		{"{\"dirs\":[],\"complete\":null}", -EINVAL},
		{"[]", -EINVAL},
		/* not JSON */
		{"", -EBADMSG},
		{"tree", -EBADMSG},
		{"{\"dirs\":[", -EBADMSG},
		{"{\"dirs\":[],\"complete\":true} x", -EBADMSG},
	};
	char *longc, *j;
	size_t i;

	/* sane ones first, so the refusals below are about one thing */
	ck_assert_int_eq(decode_tree_one("\"\"", "\"f\""), 0);
	ck_assert_int_eq(decode_tree_one("\"a\"", "\"f\""), 0);
	ck_assert_int_eq(decode_tree_one("\"a/b c/...\"", "\"..f\""), 0);
	for (i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++)
		ck_assert_msg(decode_tree_one(bad_paths[i], "\"f\"") == -EINVAL,
			      "path %s", bad_paths[i]);
	for (i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
		ck_assert_msg(decode_tree_one("\"a\"", bad_names[i]) == -EINVAL,
			      "name %s", bad_names[i]);
	/* a path component over 255 bytes is no name */
	longc = malloc(260);
	ck_assert_ptr_nonnull(longc);
	memset(longc, 'x', 255);
	longc[255] = '\0';
	if (asprintf(&j, "\"d/%s\"", longc) < 0)
		ck_abort();
	ck_assert_int_eq(decode_tree_one(j, "\"f\""), 0);
	free(j);
	longc[255] = 'x';
	longc[256] = '\0';
	if (asprintf(&j, "\"d/%s\"", longc) < 0)
		ck_abort();
	ck_assert_int_eq(decode_tree_one(j, "\"f\""), -EINVAL);
	free(j);
	free(longc);
	/* a bad directory anywhere in the answer refuses all of it */
	ck_assert_int_eq(decode_tree_dirs("{\"path\":\"\",\"entries\":[]},"
					  "{\"path\":\"a\",\"entries\":[]},"
					  "{\"path\":\"a/..\",\"entries\":[]}"),
			 -EINVAL);

	/* shapes */
	for (i = 0; i < sizeof(bad_dirs) / sizeof(bad_dirs[0]); i++)
		ck_assert_msg(decode_tree_dirs(bad_dirs[i]) == -EINVAL,
			      "dirs %s", bad_dirs[i]);
	assert_refused(tree_decode, bad, sizeof(bad) / sizeof(bad[0]));
}
END_TEST

START_TEST(tree_out_untouched_on_error)
{
	struct proto_tree t, keep;

	memset(&t, 0x5a, sizeof(t));
	keep = t;
	ck_assert_int_eq(proto_tree_decode(
				 S("{\"dirs\":[{\"path\":\"a\",\"entries\":[]},"
				   "{\"path\":\"..\",\"entries\":[]}],"
				   "\"complete\":true}"),
				 &t),
			 -EINVAL);
	ck_assert(memcmp(&t, &keep, sizeof(t)) == 0);
	ck_assert_int_eq(proto_tree_decode(S("{\"dirs\":[]}"), &t), -EINVAL);
	ck_assert(memcmp(&t, &keep, sizeof(t)) == 0);
}
END_TEST

/* n listing entries named f<i>, as proto_list_add writes them. */
static void many_entries(size_t n, struct buf *e)
{
	struct proto_attr a = tx_sample_attr();
	char name[16];
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%zu", i);
		ck_assert_int_eq(proto_list_add(e, i == 0, name, &a, NULL), 0);
	}
}

START_TEST(tree_entry_bound)
{
	struct buf half = BUF_INIT(0), one = BUF_INIT(0), b = BUF_INIT(0);
	struct proto_tree t;
	size_t i;

	many_entries(PROTO_EXT_TREE_MAX / 2, &half);
	many_entries(1, &one);

	/* exactly the bound, over two directories: accepted */
	ck_assert_int_eq(proto_tree_begin(&b), 0);
	ck_assert_int_eq(proto_tree_dir(&b, true, "", half.data, half.len), 0);
	ck_assert_int_eq(proto_tree_dir(&b, false, "a", half.data, half.len),
			 0);
	ck_assert_int_eq(proto_tree_end(&b, true), 0);
	ck_assert_int_eq(proto_tree_decode(b.data, b.len, &t), 0);
	ck_assert_uint_eq(t.ndirs, 2);
	ck_assert_uint_eq(t.dirs[0].n + t.dirs[1].n, PROTO_EXT_TREE_MAX);
	ck_assert_str_eq(t.dirs[1].entries[PROTO_EXT_TREE_MAX / 2 - 1].name,
			 "f32767");
	proto_tree_cleanup(&t);
	buf_cleanup(&b);

	/* one more, in a third directory: refused as too big */
	ck_assert_int_eq(proto_tree_begin(&b), 0);
	ck_assert_int_eq(proto_tree_dir(&b, true, "", half.data, half.len), 0);
	ck_assert_int_eq(proto_tree_dir(&b, false, "a", half.data, half.len),
			 0);
	ck_assert_int_eq(proto_tree_dir(&b, false, "b", one.data, one.len), 0);
	ck_assert_int_eq(proto_tree_end(&b, false), 0);
	ck_assert_int_eq(proto_tree_decode(b.data, b.len, &t), -EFBIG);
	buf_cleanup(&b);

	/* more directories than the bound, every one empty: too big too */
	ck_assert_int_eq(proto_tree_begin(&b), 0);
	for (i = 0; i <= PROTO_EXT_TREE_MAX; i++)
		ck_assert_int_eq(proto_tree_dir(&b, i == 0, "d", "", 0), 0);
	ck_assert_int_eq(proto_tree_end(&b, true), 0);
	ck_assert_int_eq(proto_tree_decode(b.data, b.len, &t), -EFBIG);
	buf_cleanup(&b);

	buf_cleanup(&half);
	buf_cleanup(&one);
}
END_TEST

void proto_ext_cases(Suite *s)
{
	TCASE_TABLE(s, "attr", NULL, NULL, 0, ftype_names, etag_format,
		    attr_exact_and_round_trip, attr_integers_exact,
		    attr_members_in_any_order, attr_bad_input);
	TCASE_TABLE(s, "list", NULL, NULL, 0, list_round_trip,
		    list_add_rolls_back, list_bad_input);
	TCASE_TABLE(s, "tree", NULL, NULL, 120, tree_round_trip,
		    tree_exact_small, tree_dir_rolls_back, tree_bad_input,
		    tree_out_untouched_on_error, tree_entry_bound);
}
