/* SPDX-License-Identifier: MIT */
/*
 * Suites for the pure common modules: buf, b64, path, token, hmap and the
 * shared parts of proto (health, typed error bodies).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/b64.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/dlist.h"
#include "common/errname.h"
#include "common/fdio.h"
#include "common/fileio.h"
#include "common/hex.h"
#include "common/httpstatus.h"
#include "common/hmap.h"
#include "common/ids.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/strv.h"
#include "common/token.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

/* ---- buf ---------------------------------------------------------------- */

START_TEST(buf_append_respects_max)
{
	struct buf b = BUF_INIT(8);

	ck_assert_int_eq(buf_append(&b, "abcd", 4), 0);
	ck_assert_int_eq(buf_append(&b, "efgh", 4), 0);
	ck_assert_int_eq(buf_append(&b, "i", 1), -EFBIG);
	ck_assert_uint_eq(b.len, 8);
	ck_assert_str_eq(b.data, "abcdefgh");
	buf_cleanup(&b);
}
END_TEST

START_TEST(buf_printf_and_consume)
{
	struct buf b = BUF_INIT(0);
	size_t len;
	char *s;

	ck_assert_int_eq(buf_printf(&b, "%s-%d", "x", 42), 0);
	ck_assert_str_eq(b.data, "x-42");
	buf_consume(&b, 2);
	ck_assert_str_eq(b.data, "42");
	s = buf_take(&b, &len);
	ck_assert_str_eq(s, "42");
	ck_assert_uint_eq(len, 2);
	ck_assert_ptr_null(b.data);
	free(s);
	s = buf_take(&b, &len);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

/* buf_vprintf, through buf_printf (a caller of it). */
START_TEST(buf_vprintf_appends_within_max)
{
	struct buf b = BUF_INIT(8);

	ck_assert_int_eq(buf_printf(&b, "%s:", "ab"), 0);
	ck_assert_int_eq(buf_printf(&b, "%d", 12), 0);
	ck_assert_str_eq(b.data, "ab:12");
	/* Past the bound: refused whole, the text as it was. */
	ck_assert_int_eq(buf_printf(&b, "%s", "long"), -EFBIG);
	ck_assert_str_eq(b.data, "ab:12");
	ck_assert_uint_eq(b.len, 5);
	buf_cleanup(&b);
}
END_TEST

START_TEST(buf_reserve_commit)
{
	struct buf b = BUF_INIT(16);
	int err = 0;
	char *p = buf_reserve(&b, 10, &err);

	ck_assert_ptr_nonnull(p);
	memcpy(p, "0123456789", 10);
	buf_commit(&b, 10);
	ck_assert_ptr_null(buf_reserve(&b, 7, &err));
	ck_assert_int_eq(err, -EFBIG);
	ck_assert_str_eq(b.data, "0123456789");
	buf_cleanup(&b);
}
END_TEST

START_TEST(buf_escaped_keeps_unreserved)
{
	struct buf b = BUF_INIT(64);

	ck_assert_int_eq(buf_append_escaped(&b, "a/b c~%\xff", "/"), 0);
	ck_assert_str_eq(b.data, "a/b%20c~%25%FF");
	buf_reset(&b);
	ck_assert_int_eq(buf_append_escaped(&b, "a/b", NULL), 0);
	ck_assert_str_eq(b.data, "a%2Fb");
	/* Over the bound: refused as a whole byte's encoding. */
	buf_reset(&b);
	b.max = 4;
	ck_assert_int_eq(buf_append_escaped(&b, "ab c", NULL), -EFBIG);
	buf_cleanup(&b);
}
END_TEST

void buf_cases(Suite *s)
{
	TCASE_TABLE(s, "bounds", NULL, NULL, 0, buf_append_respects_max,
		    buf_printf_and_consume, buf_vprintf_appends_within_max,
		    buf_reserve_commit, buf_escaped_keeps_unreserved);
}

/* ---- hmap --------------------------------------------------------------- */

struct hm_item {
	struct hmap_node node;
	char key[16];
	int value;
};

static struct hm_item *hm_find(struct hmap *m, const char *key)
{
	uint64_t h = hmap_hash_str(key, HMAP_SEED);
	struct hmap_node *n;

	for (n = hmap_first(m, h); n != NULL; n = hmap_next(n, h)) {
		struct hm_item *it = hmap_entry(n, struct hm_item, node);

		if (strcmp(it->key, key) == 0)
			return it;
	}
	return NULL;
}

START_TEST(hmap_grows_finds_removes)
{
	enum { N = 5000 };
	static struct hm_item items[N];
	struct hmap m;
	char key[16];
	int i;

	hmap_init(&m, 3);
	ck_assert_uint_eq(m.nslots, 4);
	for (i = 0; i < N; i++) {
		snprintf(items[i].key, sizeof(items[i].key), "k%d", i);
		items[i].value = i;
		hmap_insert(&m, &items[i].node,
			    hmap_hash_str(items[i].key, HMAP_SEED));
	}
	ck_assert_uint_eq(hmap_count(&m), N);
	/* Doubled whenever full: never more entries than slots. */
	ck_assert_uint_ge(m.nslots, N);
	ck_assert_uint_lt(m.nslots, 2 * 8192 + 1);
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_ptr_eq(hm_find(&m, key), &items[i]);
	}
	ck_assert_ptr_null(hm_find(&m, "k5000"));
	for (i = 0; i < N; i += 2)
		hmap_remove(&m, &items[i].node);
	ck_assert_uint_eq(hmap_count(&m), N / 2);
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_ptr_eq(hm_find(&m, key),
				 i % 2 == 0 ? NULL : &items[i]);
	}
	hmap_cleanup(&m);
	ck_assert_ptr_null(m.slot);
	hmap_cleanup(NULL);
}
END_TEST

START_TEST(hmap_equal_hashes_and_walk)
{
	struct hm_item a = {.key = "a"}, b = {.key = "b"}, c = {.key = "c"};
	struct hmap_node *n, *next;
	size_t cursor = 0, seen = 0;
	struct hmap m;

	/* Three entries of one hash: the walk of that hash meets each, and
	 * the caller's key comparison tells them apart. */
	hmap_init(&m, 0);
	hmap_insert(&m, &a.node, 42);
	hmap_insert(&m, &b.node, 42);
	hmap_insert(&m, &c.node, 7);
	for (n = hmap_first(&m, 42); n != NULL; n = hmap_next(n, 42)) {
		struct hm_item *it = hmap_entry(n, struct hm_item, node);

		ck_assert(it == &a || it == &b);
		seen++;
	}
	ck_assert_uint_eq(seen, 2);
	ck_assert_ptr_null(hmap_first(&m, 43));
	ck_assert_ptr_eq(hmap_first(&m, 7), &c.node);
	/* Every entry once, each removed as soon as the walk is past it. */
	seen = 0;
	for (n = hmap_walk(&m, &cursor, NULL); n != NULL; n = next) {
		next = hmap_walk(&m, &cursor, n);
		hmap_remove(&m, n);
		seen++;
	}
	ck_assert_uint_eq(seen, 3);
	ck_assert_uint_eq(hmap_count(&m), 0);
	cursor = 0;
	ck_assert_ptr_null(hmap_walk(&m, &cursor, NULL));
	hmap_cleanup(&m);
}
END_TEST

START_TEST(hmap_hashes_are_fnv1a)
{
	/* FNV-1a 64 of "a" and of "" (the published test values). */
	ck_assert_uint_eq(hmap_hash_str("a", HMAP_SEED), 0xaf63dc4c8601ec8cULL);
	ck_assert_uint_eq(hmap_hash_str("", HMAP_SEED), HMAP_SEED);
	ck_assert_uint_eq(hmap_hash_bytes("ab", 2, HMAP_SEED),
			  hmap_hash_str("b", hmap_hash_str("a", HMAP_SEED)));
}
END_TEST

/* ---- dlist --------------------------------------------------------------- */

struct item {
	char name;
	struct dlist_node node;
};

/* The names of l's entries from first to last, and checked back again. */
static void expect_order(struct dlist *l, const char *want)
{
	char fwd[8] = "", back[8] = "";
	struct item *e;
	size_t n = 0, i;

	for (e = dlist_item(l->first, struct item, node); e != NULL;
	     e = dlist_item(e->node.next, struct item, node))
		fwd[n++] = e->name;
	ck_assert_str_eq(fwd, want);
	for (e = dlist_item(l->last, struct item, node), i = n; e != NULL;
	     e = dlist_item(e->node.prev, struct item, node))
		back[--i] = e->name;
	ck_assert_str_eq(back, want);
}

/* Entries join at either end and leave from the front, the middle and the
 * back; a removed entry's links are cleared; the last one out leaves the
 * list as it started. */
START_TEST(dlist_both_ends_and_anywhere)
{
	struct item it[4] = {
		{.name = 'a'}, {.name = 'b'}, {.name = 'c'}, {.name = 'd'}};
	struct dlist l = {NULL, NULL, 0};

	dlist_push_back(&l, &it[0].node);
	dlist_push_back(&l, &it[1].node);
	dlist_push_back(&l, &it[2].node);
	dlist_push_front(&l, &it[3].node);
	expect_order(&l, "dabc");
	ck_assert_uint_eq(l.n, 4);
	dlist_remove(&l, &it[1].node);
	ck_assert_ptr_null(it[1].node.prev);
	ck_assert_ptr_null(it[1].node.next);
	expect_order(&l, "dac");
	dlist_remove(&l, &it[3].node);
	expect_order(&l, "ac");
	ck_assert_ptr_eq(dlist_pop_front(&l), &it[0].node);
	expect_order(&l, "c");
	dlist_push_front(&l, &it[0].node);
	dlist_remove(&l, &it[2].node);
	expect_order(&l, "a");
	dlist_remove(&l, &it[0].node);
	ck_assert_ptr_null(l.first);
	ck_assert_ptr_null(l.last);
	ck_assert_uint_eq(l.n, 0);
	ck_assert_ptr_null(dlist_pop_front(&l));
	ck_assert_ptr_null(dlist_item(l.first, struct item, node));
}
END_TEST

/* A copy of a NULL-terminated vector is whole and apart from the
 * original; NULL copies as an empty one; both frees take NULL. */
START_TEST(strv_copies_and_frees)
{
	const char *const v[] = {"a", "", "b=c", NULL};
	char **c = strv_dup_null(v), **e = strv_dup_null(NULL);

	ck_assert_str_eq(c[0], "a");
	ck_assert_str_eq(c[1], "");
	ck_assert_str_eq(c[2], "b=c");
	ck_assert_ptr_null(c[3]);
	ck_assert_ptr_ne(c[0], v[0]);
	ck_assert_ptr_null(e[0]);
	strv_free_null(c);
	strv_free(e, 0);
	strv_free(NULL, 3);
	strv_free_null(NULL);
}
END_TEST

void hmap_cases(Suite *s)
{
	TCASE_TABLE(s, "table", NULL, NULL, 0, hmap_grows_finds_removes,
		    hmap_equal_hashes_and_walk, hmap_hashes_are_fnv1a);
	TCASE_TABLE(s, "dlist", NULL, NULL, 0, dlist_both_ends_and_anywhere);
	TCASE_TABLE(s, "strv", NULL, NULL, 0, strv_copies_and_frees);
}

/* ---- b64 ---------------------------------------------------------------- */

START_TEST(b64_rfc4648_vectors)
{
	static const char *const in[] = {"",	 "f",	  "fo",	   "foo",
					 "foob", "fooba", "foobar"};
	static const char *const out[] = {
		"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	char enc[16], dec[16];
	size_t i;

	for (i = 0; i < 7; i++) {
		long n;

		b64_encode(in[i], strlen(in[i]), enc);
		ck_assert_str_eq(enc, out[i]);
		n = b64_decode(out[i], strlen(out[i]), dec);
		ck_assert_int_eq(n, (long)strlen(in[i]));
		ck_assert(memcmp(dec, in[i], (size_t)n) == 0);
	}
}
END_TEST

START_TEST(b64_strict_decoding)
{
	char dec[16];

	ck_assert_int_eq(b64_decode("Zg=", 3, dec), -EINVAL);
	ck_assert_int_eq(b64_decode("Zh==", 4, dec), -EINVAL); /* bits */
	ck_assert_int_eq(b64_decode("Zm-v", 4, dec), -EINVAL); /* url-safe */
	ck_assert_int_eq(b64_decode("Zm9v\n", 5, dec), -EINVAL);
	ck_assert_int_eq(b64_decode("Zg==Zg==", 8, dec), -EINVAL);
	ck_assert(!b64_valid("Zg==Zg==", 8));
	ck_assert(b64_valid("Zm9vYmFy", 8));
	ck_assert(!b64_valid("Zm9 YmFy", 8));
}
END_TEST

START_TEST(http_status_phrases)
{
	ck_assert_str_eq(http_status_text(200), "OK");
	ck_assert_str_eq(http_status_text(404), "Not Found");
	ck_assert_str_eq(http_status_text(413), "Payload Too Large");
	ck_assert_str_eq(http_status_text(503), "Service Unavailable");
	/* Not listed: an empty phrase, which a status line may have. */
	ck_assert_str_eq(http_status_text(299), "");
	ck_assert_str_eq(http_status_text(-1), "");
}
END_TEST

START_TEST(hex_digit_values)
{
	static const char all[] = "0123456789abcdefABCDEF";
	size_t i;

	for (i = 0; i < 16; i++)
		ck_assert_int_eq(hex_digit(all[i]), (int)i);
	for (i = 16; i < 22; i++)
		ck_assert_int_eq(hex_digit(all[i]), (int)i - 6);
	ck_assert_int_eq(hex_digit('g'), -1);
	ck_assert_int_eq(hex_digit('G'), -1);
	ck_assert_int_eq(hex_digit('/'), -1);
	ck_assert_int_eq(hex_digit(' '), -1);
	ck_assert_int_eq(hex_digit('\0'), -1);
	ck_assert_int_eq(hex_digit((char)0xe1), -1);
}
END_TEST

void b64_cases(Suite *s)
{
	TCASE_TABLE(s, "codec", NULL, NULL, 0, b64_rfc4648_vectors,
		    b64_strict_decoding, hex_digit_values, http_status_phrases);
}

/* ---- path --------------------------------------------------------------- */

static enum path_verdict norm(const char *in, bool root, char *out)
{
	return path_normalize(in, strlen(in), root, out, 256);
}

START_TEST(path_normalize_rules)
{
	char out[256];

	ck_assert_int_eq(norm("/data/x", false, out), PATH_OK);
	ck_assert_str_eq(out, "data/x");
	ck_assert_int_eq(norm("data//./x/", false, out), PATH_OK);
	ck_assert_str_eq(out, "data/x");
	ck_assert_int_eq(norm("", false, out), PATH_EMPTY);
	ck_assert_int_eq(norm("", true, out), PATH_OK);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(norm("/", false, out), PATH_EMPTY);
	ck_assert_int_eq(norm("/", true, out), PATH_OK);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(norm("a/../b", false, out), PATH_UPWARD);
	ck_assert_int_eq(norm("..", true, out), PATH_UPWARD);
	ck_assert_int_eq(norm("a/..b", false, out), PATH_OK);
	ck_assert_str_eq(out, "a/..b");
	ck_assert_int_eq(path_normalize("a\0b", 3, false, out, 256),
			 PATH_BAD_BYTE);
	ck_assert_str_eq(path_verdict_reason(PATH_UPWARD),
			 "path traverses upward");
}
END_TEST

START_TEST(path_split_and_components)
{
	char p[] = "a/b/c", q[] = "c";
	const char *parent, *name;

	ck_assert(path_split(p, &parent, &name));
	ck_assert_str_eq(parent, "a/b");
	ck_assert_str_eq(name, "c");
	ck_assert(path_split(q, &parent, &name));
	ck_assert_str_eq(parent, "");
	ck_assert(!path_component_valid(".."));
	ck_assert(!path_component_valid("a/b"));
	ck_assert(path_component_valid("..."));
}
END_TEST

START_TEST(path_parent_join_and_keys)
{
	static const char *const not_keys[] = {"/a", "a/", "a//b", "a/../b",
					       "./a"};
	char parent[8], *j;
	size_t i;

	ck_assert_str_eq(path_parent("a/b/c", parent, sizeof(parent)), "c");
	ck_assert_str_eq(parent, "a/b");
	ck_assert_str_eq(path_parent("top", parent, sizeof(parent)), "top");
	ck_assert_str_eq(parent, "");
	/* cut to fit */
	ck_assert_str_eq(path_parent("abcdefghij/k", parent, 4), "k");
	ck_assert_str_eq(parent, "abc");
	j = path_join("", "x");
	ck_assert_str_eq(j, "x");
	free(j);
	j = path_join("a/b", "x");
	ck_assert_str_eq(j, "a/b/x");
	free(j);
	ck_assert(path_rel_valid(""));
	ck_assert(path_rel_valid("a/b c/.d"));
	for (i = 0; i < sizeof(not_keys) / sizeof(not_keys[0]); i++)
		ck_assert_msg(!path_rel_valid(not_keys[i]), "%s", not_keys[i]);
}
END_TEST

void path_cases(Suite *s)
{
	TCASE_TABLE(s, "lexical", NULL, NULL, 0, path_normalize_rules,
		    path_split_and_components, path_parent_join_and_keys);
}

/* ---- token -------------------------------------------------------------- */

START_TEST(token_generate_is_valid_and_fresh)
{
	char a[TOKEN_CHARS + 1], b[TOKEN_CHARS + 1];

	ck_assert_int_eq(token_generate(a), 0);
	ck_assert_int_eq(token_generate(b), 0);
	ck_assert_uint_eq(strlen(a), 44);
	ck_assert(token_valid(a, strlen(a)));
	ck_assert(!token_equal(a, 44, b, 44));
	ck_assert(token_equal(a, 44, a, 44));
}
END_TEST

START_TEST(token_validation_is_exact)
{
	char t[TOKEN_CHARS + 2];

	ck_assert_int_eq(token_generate(t), 0);
	t[44] = '\n';
	t[45] = '\0';
	ck_assert(!token_valid(t, 45)); /* no trimming */
	/* 33 bytes of base64 without padding decodes to 33, not 32 */
	ck_assert(!token_valid("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			       44));
	ck_assert(token_valid("BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ=",
			      44));
	ck_assert(!token_valid("BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ",
			       43));
}
END_TEST

START_TEST(token_file_is_private)
{
	char *dir = th_tmpdir("token");
	char path[512], t[TOKEN_CHARS + 1], *back;
	struct stat st;
	size_t len;

	snprintf(path, sizeof(path), "%s/token", dir);
	ck_assert_int_eq(token_generate(t), 0);
	ck_assert_int_eq(token_write_file(path, t), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	back = th_read_file(path, &len);
	ck_assert_uint_eq(len, 44);
	ck_assert(memcmp(back, t, 44) == 0);
	free(back);
	th_rmtree_free(dir);
}
END_TEST

static long long fake_now;

static long long fake_clock(void)
{
	return fake_now;
}

START_TEST(clock_source_seam)
{
	long long a = clock_mono_ms(), b;
	struct timespec ts, now;

	fake_now = 42;
	clock_set_source(fake_clock);
	ck_assert_int_eq(clock_mono_ms(), 42);
	/* The wall clock is the epoch's, whatever the seam says. */
	ck_assert(llabs(clock_wall_ms() - (long long)time(NULL) * 1000) < 2000);
	clock_set_source(NULL);
	b = clock_mono_ms();
	ck_assert(b >= a && b - a < 60000);
	/* A deadline is real time ahead, normalized. */
	clock_deadline_in(&ts, 1500);
	clock_gettime(CLOCK_MONOTONIC, &now);
	ck_assert(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
	ck_assert(ts.tv_sec - now.tv_sec >= 1 && ts.tv_sec - now.tv_sec <= 2);
}
END_TEST

START_TEST(ids_are_random_uuids)
{
	char a[IDS_UUID_LEN + 1], b[IDS_UUID_LEN + 1], h[32];
	size_t i;

	ck_assert_int_eq(ids_uuid(a), 0);
	ck_assert_int_eq(ids_uuid(b), 0);
	ck_assert_uint_eq(strlen(a), IDS_UUID_LEN);
	ck_assert_str_ne(a, b);
	for (i = 0; i < IDS_UUID_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23)
			ck_assert_int_eq(a[i], '-');
		else
			ck_assert(strchr("0123456789abcdef", a[i]) != NULL);
	}
	ck_assert_int_eq(a[14], '4'); /* version 4 */
	ck_assert(strchr("89ab", a[19]) != NULL); /* RFC 4122 variant */
	ck_assert_int_eq(ids_hex(h, sizeof(h), "m-", 8), 0);
	ck_assert_uint_eq(strlen(h), 2 + 16);
	ck_assert(strncmp(h, "m-", 2) == 0);
	/* Cut to fit, never past the buffer. */
	ck_assert_int_eq(ids_hex(h, 8, "m-", 8), 0);
	ck_assert_uint_eq(strlen(h), 6);
}
END_TEST

START_TEST(file_write_atomic_whole_with_mode)
{
	char dir[] = "/tmp/sbfs-fileio.XXXXXX", path[128], buf[64];
	struct stat st;
	mode_t old = umask(0077);
	FILE *f;
	size_t n;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	ck_assert_int_eq(file_write_atomic(path, "first", 5, 0644), 0);
	ck_assert_int_eq(file_write_atomic(path, "second", 6, 0640), 0);
	umask(old);
	ck_assert_int_eq(stat(path, &st), 0);
	/* Exactly the mode asked for, the umask notwithstanding. */
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "second");
	/* Nothing left beside it. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	/* A directory that is not there: the errno, nothing made. */
	ck_assert_int_eq(file_write_atomic("/nonexistent-dir/f", "x", 1, 0600),
			 -ENOENT);
}
END_TEST

/* A scratch file: readable and writable, private, closed across exec,
 * and without a name in its directory (which is empty again at once). */
START_TEST(file_open_unlinked_has_no_name)
{
	char dir[] = "/tmp/sbfs-fileio.XXXXXX", buf[4];
	struct stat st;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	fd = file_open_unlinked(dir, ".scratch-");
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "abc", 3), 3);
	ck_assert_int_eq(pread(fd, buf, 3, 0), 3);
	ck_assert_int_eq(memcmp(buf, "abc", 3), 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	ck_assert_int_eq(rmdir(dir), 0);
	/* Closing keeps errno, and -1 is no descriptor. */
	errno = EBADMSG;
	fdio_close(fd);
	ck_assert_int_eq(errno, EBADMSG);
	ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
	errno = EBADMSG;
	fdio_close(-1);
	ck_assert_int_eq(errno, EBADMSG);
	ck_assert_int_eq(file_open_unlinked("/nonexistent-dir", "x"), -ENOENT);
}
END_TEST

void token_cases(Suite *s)
{
	TCASE_TABLE(s, "credential", NULL, NULL, 0,
		    token_generate_is_valid_and_fresh,
		    token_validation_is_exact, token_file_is_private,
		    clock_source_seam, ids_are_random_uuids,
		    file_write_atomic_whole_with_mode,
		    file_open_unlinked_has_no_name);
}

/* ---- proto (shared parts) ----------------------------------------------- */

START_TEST(proto_health_round_trip)
{
	struct proto_health h = {.protocol_version = 1, .ext_files = 1}, d;
	struct buf b = BUF_INIT(0);

	strcpy(h.status, "ready");
	strcpy(h.image_status, "running");
	strcpy(h.boot_id, "b-1");
	ck_assert_int_eq(proto_health_encode(&h, &b), 0);
	ck_assert_int_eq(proto_health_decode(b.data, b.len, &d), 0);
	ck_assert_int_eq(d.protocol_version, 1);
	ck_assert_str_eq(d.status, "ready");
	ck_assert_str_eq(d.boot_id, "b-1");
	ck_assert_int_eq(d.ext_files, 1);
	ck_assert(proto_health_ready(&d));
	buf_cleanup(&b);
}
END_TEST

START_TEST(proto_health_seed_shapes)
{
	static const char ready[] =
		"{\"protocolVersion\":1,\"status\":\"ready\","
		"\"imageCommand\":{\"status\":\"running\"}}";
	static const char failed[] =
		"{\"protocolVersion\":1,\"status\":\"ready\","
		"\"imageCommand\":{\"status\":\"failed\"}}";
	static const char waiting[] = "{\"protocolVersion\":1,\"status\":"
				      "\"awaiting-network-verification\"}";
	struct proto_health h;

	ck_assert_int_eq(proto_health_decode(ready, strlen(ready), &h), 0);
	ck_assert(proto_health_ready(&h));
	ck_assert_int_eq(h.ext_files, 0);
	ck_assert_int_eq(proto_health_decode(failed, strlen(failed), &h), 0);
	ck_assert(!proto_health_ready(&h));
	ck_assert_int_eq(proto_health_decode(waiting, strlen(waiting), &h), 0);
	ck_assert(!proto_health_ready(&h));
	ck_assert_str_eq(h.status, PROTO_STATUS_AWAITING);
	ck_assert_int_eq(proto_health_decode("{", 1, &h), -EBADMSG);
	ck_assert_int_eq(proto_health_decode("[]", 2, &h), -EINVAL);
	ck_assert_int_eq(proto_health_decode("{} x", 4, &h), -EBADMSG);
}
END_TEST

START_TEST(proto_typed_error_bodies)
{
	static const char nf[] =
		"PATH_NOT_FOUND: No such file in the sandbox: x";
	static const char fs[] = "FS_ERROR: ENOTEMPTY: Directory not empty: d";
	char code[32];

	ck_assert(proto_error_code(nf, strlen(nf), code, sizeof(code)));
	ck_assert_str_eq(code, "PATH_NOT_FOUND");
	ck_assert(!proto_error_code("gone", 4, code, sizeof(code)));
	ck_assert(!proto_error_code("not activated", 13, code, sizeof(code)));
	ck_assert(!proto_error_code("", 0, code, sizeof(code)));
	ck_assert_int_eq(proto_error_fs_errno(fs, strlen(fs)), ENOTEMPTY);
	ck_assert_int_eq(proto_error_fs_errno(nf, strlen(nf)), 0);
	ck_assert_str_eq(errname_from_errno(ELOOP), "ELOOP");
	ck_assert_int_eq(errname_to_errno("EWHATEVER"), EIO);
}
END_TEST

void proto_cases(Suite *s)
{
	TCASE_TABLE(s, "shared", NULL, NULL, 0, proto_health_round_trip,
		    proto_health_seed_shapes, proto_typed_error_bodies);
}
