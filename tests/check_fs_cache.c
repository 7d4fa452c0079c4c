/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_cache: the mount's cache (src/fs/cache.c) on its own, without
 * FUSE or an agent: directory listings (put, each, lookup, kept in step by
 * add and remove, expiry, forgetting, size bounds, many names) and the
 * attribute and content maps (put, get, forget, expiry, eviction order).
 * Expiry is tested with a short attribute timeout and real sleeps.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/cache.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

#define SBX "sbx"
/* A timeout no test outlives, and a short one the expiry tests wait out. */
#define TTL_LONG 600.0
#define TTL_SHORT 0.2

static struct cache *c;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

static struct cache *new_cache(double ttl)
{
	struct cache *n = NULL;

	ck_assert_int_eq(cache_new(ttl, &n), 0);
	ck_assert_ptr_nonnull(n);
	return n;
}

static void long_setup(void)
{
	c = new_cache(TTL_LONG);
}

static void cache_teardown(void)
{
	cache_free(c);
	c = NULL;
}

/* What cache_dir_each gave: names joined with '|', and each type as a
 * digit, in the order given. */
struct seen {
	char names[4096];
	char types[256];
	size_t n;
};

static void seen_one(void *ud, const char *name, enum proto_ftype type)
{
	struct seen *s = ud;
	size_t len = strlen(s->names);

	snprintf(s->names + len, sizeof(s->names) - len, "%s%s",
		 s->n ? "|" : "", name);
	if (s->n + 1 < sizeof(s->types))
		s->types[s->n] = (char)('0' + type);
	s->n++;
}

static bool each(const char *sbx, const char *dir, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	return cache_dir_each(c, sbx, dir, seen_one, s);
}

/* cache_dir_lookup as one value: -1 no listing, 0 absent, 1 present. */
static int look(const char *sbx, const char *dir, const char *name)
{
	bool present = false;

	if (!cache_dir_lookup(c, sbx, dir, name, &present))
		return -1;
	return present ? 1 : 0;
}

static void put3(const char *sbx, const char *dir)
{
	static const char *const names[] = {"a", "b \"q\"", "caf\xc3\xa9"};
	static const enum proto_ftype types[] = {PROTO_FT_FILE, PROTO_FT_DIR,
						 PROTO_FT_SYMLINK};

	cache_dir_put(c, sbx, dir, names, types, 3);
}

static struct proto_attr attr_n(uint64_t n)
{
	struct proto_attr a = {.type = PROTO_FT_FILE,
			       .perm = 0644,
			       .size = n,
			       .ino = n + 1,
			       .nlink = 1,
			       .mtime = 1700000000 + (int64_t)n,
			       .mtime_ns = 123};

	return a;
}

/* ---- directory listings -------------------------------------------------- */

START_TEST(dir_put_each_lookup)
{
	struct seen s;

	ck_assert(!each(SBX, "d", &s));
	ck_assert_uint_eq(s.n, 0);
	ck_assert_int_eq(look(SBX, "d", "a"), -1);

	put3(SBX, "d");
	ck_assert(each(SBX, "d", &s));
	ck_assert_uint_eq(s.n, 3);
	ck_assert_str_eq(s.names, "a|b \"q\"|caf\xc3\xa9");
	ck_assert_str_eq(s.types, "123");
	ck_assert_int_eq(look(SBX, "d", "a"), 1);
	ck_assert_int_eq(look(SBX, "d", "b \"q\""), 1);
	ck_assert_int_eq(look(SBX, "d", "caf\xc3\xa9"), 1);
	ck_assert_int_eq(look(SBX, "d", "A"), 0);
	ck_assert_int_eq(look(SBX, "d", "b"), 0);
	ck_assert_int_eq(look(SBX, "d", "ab"), 0);

	/* a listing is its directory's only: not the parent's, a child's,
	 * another sandbox's or a prefix's */
	ck_assert_int_eq(look(SBX, "", "a"), -1);
	ck_assert_int_eq(look(SBX, "d/a", "x"), -1);
	ck_assert_int_eq(look(SBX, "dd", "a"), -1);
	ck_assert_int_eq(look("sbx2", "d", "a"), -1);
	ck_assert_int_eq(look("sb", "x/d", "a"), -1);
	ck_assert(!each("other", "d", &s));

	/* the root's listing ("") is one like any other */
	put3(SBX, "");
	ck_assert(each(SBX, "", &s));
	ck_assert_str_eq(s.names, "a|b \"q\"|caf\xc3\xa9");
	ck_assert_int_eq(look(SBX, "", "caf\xc3\xa9"), 1);

	/* a new listing replaces the old one whole */
	{
		static const char *const names[] = {"z"};
		static const enum proto_ftype types[] = {PROTO_FT_FIFO};

		cache_dir_put(c, SBX, "d", names, types, 1);
	}
	ck_assert(each(SBX, "d", &s));
	ck_assert_str_eq(s.names, "z");
	ck_assert_str_eq(s.types, "4");
	ck_assert_int_eq(look(SBX, "d", "a"), 0);
	ck_assert_int_eq(look(SBX, "d", "z"), 1);

	/* an empty directory is a listing: every name is absent */
	cache_dir_put(c, SBX, "empty", NULL, NULL, 0);
	ck_assert(each(SBX, "empty", &s));
	ck_assert_uint_eq(s.n, 0);
	ck_assert_int_eq(look(SBX, "empty", "a"), 0);

	/* a name given twice is one name, with the last type */
	{
		static const char *const names[] = {"x", "y", "x"};
		static const enum proto_ftype types[] = {
			PROTO_FT_FILE, PROTO_FT_FILE, PROTO_FT_DIR};

		cache_dir_put(c, SBX, "dup", names, types, 3);
	}
	ck_assert(each(SBX, "dup", &s));
	ck_assert_str_eq(s.names, "x|y");
	ck_assert_str_eq(s.types, "21");
}
END_TEST

START_TEST(dir_add_remove_in_step)
{
	struct seen s;

	put3(SBX, "d");
	/* a new name: appended, present */
	cache_dir_add(c, SBX, "d", "new", PROTO_FT_FILE);
	ck_assert_int_eq(look(SBX, "d", "new"), 1);
	ck_assert(each(SBX, "d", &s));
	ck_assert_str_eq(s.names, "a|b \"q\"|caf\xc3\xa9|new");
	ck_assert_str_eq(s.types, "1231");
	/* an existing name: its type changes, no second copy */
	cache_dir_add(c, SBX, "d", "a", PROTO_FT_DIR);
	ck_assert(each(SBX, "d", &s));
	ck_assert_str_eq(s.names, "a|b \"q\"|caf\xc3\xa9|new");
	ck_assert_str_eq(s.types, "2231");

	/* removed: absent, and no longer listed */
	cache_dir_remove(c, SBX, "d", "b \"q\"");
	ck_assert_int_eq(look(SBX, "d", "b \"q\""), 0);
	ck_assert_int_eq(look(SBX, "d", "a"), 1);
	ck_assert(each(SBX, "d", &s));
	ck_assert_str_eq(s.names, "a|caf\xc3\xa9|new");
	ck_assert_str_eq(s.types, "231");
	/* removing what is not there changes nothing */
	cache_dir_remove(c, SBX, "d", "never");
	cache_dir_remove(c, SBX, "d", "b \"q\"");
	ck_assert(each(SBX, "d", &s));
	ck_assert_str_eq(s.names, "a|caf\xc3\xa9|new");
	/* added back (a rename over, a file made again): present once */
	cache_dir_add(c, SBX, "d", "b \"q\"", PROTO_FT_SYMLINK);
	ck_assert_int_eq(look(SBX, "d", "b \"q\""), 1);
	ck_assert(each(SBX, "d", &s));
	ck_assert_uint_eq(s.n, 4);
	ck_assert_ptr_nonnull(strstr(s.names, "b \"q\""));
	ck_assert_ptr_null(strstr(strstr(s.names, "b \"q\"") + 1, "b \"q\""));

	/* a directory without a listing gets none from add or remove: a
	 * single name is not a listing */
	cache_dir_add(c, SBX, "nolist", "x", PROTO_FT_FILE);
	cache_dir_remove(c, SBX, "nolist", "x");
	ck_assert(!each(SBX, "nolist", &s));
	ck_assert_int_eq(look(SBX, "nolist", "x"), -1);
	ck_assert_int_eq(look(SBX, "nolist", "y"), -1);

	/* an empty listing grows from nothing */
	cache_dir_put(c, SBX, "e", NULL, NULL, 0);
	cache_dir_add(c, SBX, "e", "first", PROTO_FT_DIR);
	ck_assert(each(SBX, "e", &s));
	ck_assert_str_eq(s.names, "first");
	cache_dir_remove(c, SBX, "e", "first");
	ck_assert(each(SBX, "e", &s));
	ck_assert_uint_eq(s.n, 0);
	ck_assert_int_eq(look(SBX, "e", "first"), 0);
}
END_TEST

START_TEST(dir_expires)
{
	struct proto_attr a = attr_n(5), got;
	struct seen s;

	cache_free(c);
	c = new_cache(TTL_SHORT);
	put3(SBX, "d");
	cache_put(c, SBX, "d/a", &a, NULL);
	ck_assert_int_eq(look(SBX, "d", "a"), 1);
	ck_assert_int_eq(look(SBX, "d", "x"), 0);
	ck_assert(cache_get(c, SBX, "d/a", &got, NULL));
	sleep_ms(100);
	/* still fresh halfway; a change made now does not renew it */
	cache_dir_add(c, SBX, "d", "late", PROTO_FT_FILE);
	ck_assert_int_eq(look(SBX, "d", "late"), 1);
	sleep_ms(150);
	ck_assert_int_eq(look(SBX, "d", "a"), -1);
	ck_assert_int_eq(look(SBX, "d", "x"), -1);
	ck_assert(!each(SBX, "d", &s));
	ck_assert_uint_eq(s.n, 0);
	ck_assert(!cache_get(c, SBX, "d/a", &got, NULL));
	/* an expired listing is not revived by a change */
	cache_dir_add(c, SBX, "d", "a", PROTO_FT_FILE);
	ck_assert_int_eq(look(SBX, "d", "a"), -1);
	/* a new listing is fresh again for a whole timeout */
	put3(SBX, "d");
	ck_assert_int_eq(look(SBX, "d", "b \"q\""), 1);
	ck_assert(each(SBX, "d", &s));
	ck_assert_uint_eq(s.n, 3);
	sleep_ms(250);
	ck_assert(!each(SBX, "d", &s));
}
END_TEST

START_TEST(dir_ttl_zero_disables)
{
	struct proto_attr a = attr_n(1), got;
	char etag[PROTO_ETAG_MAX];
	struct seen s;

	cache_free(c);
	c = new_cache(0);
	put3(SBX, "d");
	ck_assert(!each(SBX, "d", &s));
	ck_assert_int_eq(look(SBX, "d", "a"), -1);
	cache_dir_add(c, SBX, "d", "x", PROTO_FT_FILE);
	ck_assert_int_eq(look(SBX, "d", "x"), -1);
	cache_put(c, SBX, "d/a", &a, "t");
	ck_assert(!cache_get(c, SBX, "d/a", &got, NULL));
	/* the content validators are kept regardless */
	cache_set_content(c, SBX, "d/a", "\"1-2-3.4\"");
	ck_assert(cache_get_content(c, SBX, "d/a", etag));
	ck_assert_str_eq(etag, "\"1-2-3.4\"");

	/* a negative timeout is no timeout either */
	cache_free(c);
	c = new_cache(-1.0);
	put3(SBX, "d");
	ck_assert_int_eq(look(SBX, "d", "a"), -1);
}
END_TEST

START_TEST(dir_forget_and_forget_tree)
{
	static const char *const dirs[] = {
		"", "a", "a/b", "a/b/c", "ab", "ab/c", "a b", "b/a",
	};
	struct proto_attr at = attr_n(9), got;
	char etag[PROTO_ETAG_MAX];
	size_t i;

	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		put3(SBX, dirs[i]);
		put3("sbx2", dirs[i]);
		put3("sb", dirs[i]);
	}
	/* forget: that one listing only */
	cache_dir_forget(c, SBX, "a");
	ck_assert_int_eq(look(SBX, "a", "a"), -1);
	ck_assert_int_eq(look(SBX, "a/b", "a"), 1);
	ck_assert_int_eq(look(SBX, "ab", "a"), 1);
	ck_assert_int_eq(look(SBX, "", "a"), 1);
	ck_assert_int_eq(look("sbx2", "a", "a"), 1);
	cache_dir_forget(c, SBX, "a"); /* twice is fine */
	cache_dir_forget(c, SBX, "never");
	put3(SBX, "a");

	/* forget_tree: the directory and everything below it, listings,
	 * attributes and validators; "a" is not a prefix of "ab" */
	cache_put(c, SBX, "a", &at, NULL);
	cache_put(c, SBX, "a/b/f", &at, NULL);
	cache_put(c, SBX, "ab", &at, NULL);
	cache_put(c, SBX, "ab/f", &at, NULL);
	cache_set_content(c, SBX, "a/b/f", "\"e1\"");
	cache_set_content(c, SBX, "ab/f", "\"e2\"");
	cache_forget_tree(c, SBX, "a");
	ck_assert_int_eq(look(SBX, "a", "a"), -1);
	ck_assert_int_eq(look(SBX, "a/b", "a"), -1);
	ck_assert_int_eq(look(SBX, "a/b/c", "a"), -1);
	ck_assert(!cache_get(c, SBX, "a", &got, NULL));
	ck_assert(!cache_get(c, SBX, "a/b/f", &got, NULL));
	ck_assert(!cache_get_content(c, SBX, "a/b/f", etag));
	ck_assert_int_eq(look(SBX, "ab", "a"), 1);
	ck_assert_int_eq(look(SBX, "ab/c", "a"), 1);
	ck_assert_int_eq(look(SBX, "a b", "a"), 1);
	ck_assert_int_eq(look(SBX, "b/a", "a"), 1);
	ck_assert_int_eq(look(SBX, "", "a"), 1);
	ck_assert(cache_get(c, SBX, "ab", &got, NULL));
	ck_assert(cache_get(c, SBX, "ab/f", &got, NULL));
	ck_assert(cache_get_content(c, SBX, "ab/f", etag));
	ck_assert_str_eq(etag, "\"e2\"");
	/* other sandboxes keep theirs, "sb" (a prefix of "sbx") too */
	ck_assert_int_eq(look("sbx2", "a", "a"), 1);
	ck_assert_int_eq(look("sbx2", "a/b", "a"), 1);
	ck_assert_int_eq(look("sb", "a/b/c", "a"), 1);

	/* the root's tree is the whole sandbox, and only that sandbox */
	cache_forget_tree(c, SBX, "");
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		ck_assert_msg(look(SBX, dirs[i], "a") == -1, "'%s' kept",
			      dirs[i]);
		ck_assert_msg(look("sbx2", dirs[i], "a") == 1, "sbx2 '%s'",
			      dirs[i]);
		ck_assert_msg(look("sb", dirs[i], "a") == 1, "sb '%s'",
			      dirs[i]);
	}
	ck_assert(!cache_get(c, SBX, "ab/f", &got, NULL));
	ck_assert(!cache_get_content(c, SBX, "ab/f", etag));

	/* dropping a sandbox is the same */
	cache_drop_sandbox(c, "sb");
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		ck_assert_int_eq(look("sb", dirs[i], "a"), -1);
		ck_assert_int_eq(look("sbx2", dirs[i], "a"), 1);
	}
}
END_TEST

#define MANY 10000

/* Checks each name against the expected order while there is one. */
struct order {
	const char *const *names;
	const enum proto_ftype *types;
	size_t n, bad;
};

static void order_one(void *ud, const char *name, enum proto_ftype type)
{
	struct order *o = ud;

	if (o->names != NULL && o->n < MANY &&
	    (strcmp(name, o->names[o->n]) != 0 || type != o->types[o->n]))
		o->bad++;
	o->n++;
}

START_TEST(dir_many_names)
{
	const char **names = calloc(MANY, sizeof(*names));
	enum proto_ftype *types = calloc(MANY, sizeof(*types));
	char name[32];
	struct order o;
	size_t i, gone = 0;
	bool present;

	ck_assert(names != NULL && types != NULL);
	for (i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "file-%05zu.c", i);
		names[i] = strdup(name);
		ck_assert_ptr_nonnull(names[i]);
		types[i] = i % 7 == 0 ? PROTO_FT_DIR : PROTO_FT_FILE;
	}
	cache_dir_put(c, SBX, "big", names, types, MANY);
	for (i = 0; i < MANY; i++) {
		ck_assert(cache_dir_lookup(c, SBX, "big", names[i], &present));
		ck_assert_msg(present, "%s", names[i]);
		snprintf(name, sizeof(name), "file-%05zu.h", i);
		ck_assert(cache_dir_lookup(c, SBX, "big", name, &present));
		ck_assert_msg(!present, "%s", name);
	}
	/* each gives them all, in order, with their types */
	memset(&o, 0, sizeof(o));
	o.names = names;
	o.types = types;
	ck_assert(cache_dir_each(c, SBX, "big", order_one, &o));
	ck_assert_uint_eq(o.n, MANY);
	ck_assert_uint_eq(o.bad, 0);

	/* every third one removed, then as many new ones added */
	for (i = 0; i < MANY; i += 3) {
		cache_dir_remove(c, SBX, "big", names[i]);
		gone++;
	}
	for (i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "added-%05zu", i);
		cache_dir_add(c, SBX, "big", name, PROTO_FT_SYMLINK);
	}
	for (i = 0; i < MANY; i++) {
		ck_assert(cache_dir_lookup(c, SBX, "big", names[i], &present));
		ck_assert_msg(present == (i % 3 != 0), "%s", names[i]);
		snprintf(name, sizeof(name), "added-%05zu", i);
		ck_assert(cache_dir_lookup(c, SBX, "big", name, &present));
		ck_assert_msg(present, "%s", name);
	}
	memset(&o, 0, sizeof(o));
	ck_assert(cache_dir_each(c, SBX, "big", order_one, &o));
	ck_assert_uint_eq(o.n, 2 * MANY - gone);

	for (i = 0; i < MANY; i++)
		free((char *)names[i]);
	free(names);
	free(types);
}
END_TEST

START_TEST(dir_bounded)
{
	char dir[32];
	size_t i, kept = 0;

	for (i = 0; i < CACHE_MAX_DIRS + 100; i++) {
		snprintf(dir, sizeof(dir), "d%zu", i);
		put3(SBX, dir);
	}
	for (i = 0; i < CACHE_MAX_DIRS + 100; i++) {
		snprintf(dir, sizeof(dir), "d%zu", i);
		if (look(SBX, dir, "a") == 1)
			kept++;
	}
	ck_assert_uint_le(kept, CACHE_MAX_DIRS);
	ck_assert_uint_ge(kept, CACHE_MAX_DIRS / 2);
	/* the oldest went first; the newest are all there */
	ck_assert_int_eq(look(SBX, "d0", "a"), -1);
	ck_assert_int_eq(look(SBX, "d99", "a"), -1);
	for (i = 100; i < CACHE_MAX_DIRS + 100; i++) {
		snprintf(dir, sizeof(dir), "d%zu", i);
		ck_assert_msg(look(SBX, dir, "a") == 1, "%s dropped", dir);
	}
	/* a listing put again is the newest again */
	put3(SBX, "d100");
	put3(SBX, "new");
	ck_assert_int_eq(look(SBX, "d100", "a"), 1);
	ck_assert_int_eq(look(SBX, "d101", "a"), -1);
	ck_assert_int_eq(look(SBX, "new", "a"), 1);
}
END_TEST

/* ---- attributes and validators ------------------------------------------- */

START_TEST(attr_put_get_forget)
{
	struct proto_attr a = attr_n(42), got;
	char *t = (char *)1;

	ck_assert(!cache_get(c, SBX, "f", &got, &t));
	ck_assert_ptr_eq(t, (char *)1); /* untouched on a miss */
	cache_put(c, SBX, "f", &a, NULL);
	memset(&got, 0, sizeof(got));
	ck_assert(cache_get(c, SBX, "f", &got, &t));
	ck_assert(memcmp(&got, &a, sizeof(a)) == 0);
	ck_assert_ptr_null(t);
	/* a symlink's target comes back as a copy the caller owns */
	a.type = PROTO_FT_SYMLINK;
	cache_put(c, SBX, "l", &a, "../x \"y\"");
	ck_assert(cache_get(c, SBX, "l", &got, &t));
	ck_assert_int_eq(got.type, PROTO_FT_SYMLINK);
	ck_assert_str_eq(t, "../x \"y\"");
	free(t);
	ck_assert(cache_get(c, SBX, "l", &got, NULL));
	/* a put replaces, target included */
	a = attr_n(43);
	cache_put(c, SBX, "l", &a, NULL);
	ck_assert(cache_get(c, SBX, "l", &got, &t));
	ck_assert_uint_eq(got.size, 43);
	ck_assert_ptr_null(t);
	/* keys are (sandbox, path) */
	ck_assert(!cache_get(c, "other", "f", &got, NULL));
	ck_assert(!cache_get(c, SBX, "f/", &got, NULL));
	ck_assert(!cache_get(c, SBX, "", &got, NULL));
	cache_put(c, SBX, "", &a, NULL);
	ck_assert(cache_get(c, SBX, "", &got, NULL));
	/* forget is one path only */
	cache_put(c, SBX, "fa", &a, NULL);
	cache_put(c, SBX, "f/x", &a, NULL);
	cache_forget(c, SBX, "f");
	ck_assert(!cache_get(c, SBX, "f", &got, NULL));
	ck_assert(cache_get(c, SBX, "fa", &got, NULL));
	ck_assert(cache_get(c, SBX, "f/x", &got, NULL));
	cache_forget(c, SBX, "f");
	cache_forget(c, SBX, "never");
}
END_TEST

START_TEST(attr_expires)
{
	struct proto_attr a = attr_n(1), got;

	cache_free(c);
	c = new_cache(TTL_SHORT);
	cache_put(c, SBX, "f", &a, "t");
	ck_assert(cache_get(c, SBX, "f", &got, NULL));
	sleep_ms(120);
	/* a put renews it */
	cache_put(c, SBX, "g", &a, NULL);
	cache_put(c, SBX, "f", &a, "t");
	sleep_ms(120);
	ck_assert(cache_get(c, SBX, "f", &got, NULL));
	ck_assert(cache_get(c, SBX, "g", &got, NULL));
	sleep_ms(120);
	ck_assert(!cache_get(c, SBX, "f", &got, NULL));
	ck_assert(!cache_get(c, SBX, "g", &got, NULL));
}
END_TEST

/* A sandbox whose changes are told keeps its entries longer, one that
 * stops being told goes back to the short timeout at once, and the others
 * never change. */
START_TEST(sandbox_ttl_overrides)
{
	struct proto_attr a = attr_n(1), got;

	cache_free(c);
	c = new_cache(TTL_SHORT);
	/* Held before the sandbox is told: not kept longer. */
	cache_put(c, "told", "before", &a, NULL);
	cache_sandbox_ttl(c, "told", TTL_LONG);
	sleep_ms(2);
	cache_put(c, "told", "f", &a, NULL);
	cache_put(c, SBX, "f", &a, NULL);
	put3("told", "d");
	put3(SBX, "d");
	sleep_ms(300);
	ck_assert(cache_get(c, "told", "f", &got, NULL));
	ck_assert_int_eq(look("told", "d", "a"), 1);
	ck_assert(!cache_get(c, "told", "before", &got, NULL));
	ck_assert(!cache_get(c, SBX, "f", &got, NULL));
	ck_assert_int_eq(look(SBX, "d", "a"), -1);
	/* Not told any more: what is older than the short timeout goes. */
	cache_sandbox_ttl(c, "told", TTL_SHORT);
	ck_assert(!cache_get(c, "told", "f", &got, NULL));
	ck_assert_int_eq(look("told", "d", "a"), -1);
	/* 0 keeps nothing for that sandbox alone. */
	cache_sandbox_ttl(c, "told", 0);
	cache_put(c, "told", "g", &a, NULL);
	cache_put(c, SBX, "g", &a, NULL);
	ck_assert(!cache_get(c, "told", "g", &got, NULL));
	ck_assert(cache_get(c, SBX, "g", &got, NULL));
}
END_TEST

/* What changed since a mark: the path itself, or everything of its
 * sandbox once a subtree or the sandbox is forgotten. */
START_TEST(changed_since_mark)
{
	struct proto_attr a = attr_n(1);
	uint64_t mark = cache_mark(c);

	ck_assert(!cache_changed_since(c, SBX, "x", mark));
	cache_forget(c, SBX, "x");
	ck_assert(cache_changed_since(c, SBX, "x", mark));
	ck_assert(!cache_changed_since(c, SBX, "y", mark));
	mark = cache_mark(c);
	cache_put(c, SBX, "y", &a, NULL);
	ck_assert(cache_changed_since(c, SBX, "y", mark));
	mark = cache_mark(c);
	cache_drop_sandbox(c, SBX);
	ck_assert(cache_changed_since(c, SBX, "z", mark));
}
END_TEST

START_TEST(attr_bounded_oldest_first)
{
	struct proto_attr a, got;
	char rel[32];
	size_t i;

	for (i = 0; i < CACHE_MAX_ATTRS; i++) {
		snprintf(rel, sizeof(rel), "f%zu", i);
		a = attr_n(i);
		cache_put(c, SBX, rel, &a, NULL);
	}
	/* f0 is put again: the newest now; f1 is then the oldest */
	a = attr_n(7);
	cache_put(c, SBX, "f0", &a, NULL);
	a = attr_n(1);
	cache_put(c, SBX, "extra", &a, NULL);
	ck_assert(!cache_get(c, SBX, "f1", &got, NULL));
	ck_assert(cache_get(c, SBX, "f0", &got, NULL));
	ck_assert_uint_eq(got.size, 7);
	ck_assert(cache_get(c, SBX, "extra", &got, NULL));
	for (i = 2; i < CACHE_MAX_ATTRS; i++) {
		snprintf(rel, sizeof(rel), "f%zu", i);
		ck_assert_msg(cache_get(c, SBX, rel, &got, NULL), "%s", rel);
		ck_assert_uint_eq(got.size, i);
	}
}
END_TEST

START_TEST(content_put_get_forget_bounded)
{
	char etag[PROTO_ETAG_MAX], rel[32], want[32];
	size_t i;

	ck_assert(!cache_get_content(c, SBX, "f", etag));
	cache_set_content(c, SBX, "f", "\"a-b-c.d\"");
	ck_assert(cache_get_content(c, SBX, "f", etag));
	ck_assert_str_eq(etag, "\"a-b-c.d\"");
	cache_set_content(c, SBX, "f", "\"e\"");
	ck_assert(cache_get_content(c, SBX, "f", etag));
	ck_assert_str_eq(etag, "\"e\"");
	ck_assert(!cache_get_content(c, "other", "f", etag));
	/* attributes and validators are forgotten apart */
	cache_forget(c, SBX, "f");
	ck_assert(cache_get_content(c, SBX, "f", etag));
	cache_forget_content(c, SBX, "f");
	ck_assert(!cache_get_content(c, SBX, "f", etag));
	cache_forget_content(c, SBX, "f");

	/* bounded, the oldest dropped first */
	for (i = 0; i < CACHE_MAX_CONTENT + 10; i++) {
		snprintf(rel, sizeof(rel), "c%zu", i);
		snprintf(want, sizeof(want), "\"%zu\"", i);
		cache_set_content(c, SBX, rel, want);
	}
	for (i = 0; i < 10; i++) {
		snprintf(rel, sizeof(rel), "c%zu", i);
		ck_assert_msg(!cache_get_content(c, SBX, rel, etag), "%s", rel);
	}
	for (i = 10; i < CACHE_MAX_CONTENT + 10; i++) {
		snprintf(rel, sizeof(rel), "c%zu", i);
		snprintf(want, sizeof(want), "\"%zu\"", i);
		ck_assert_msg(cache_get_content(c, SBX, rel, etag), "%s", rel);
		ck_assert_str_eq(etag, want);
	}
}
END_TEST

START_TEST(content_never_expires)
{
	char etag[PROTO_ETAG_MAX];

	cache_free(c);
	c = new_cache(TTL_SHORT);
	cache_set_content(c, SBX, "f", "\"v\"");
	sleep_ms(300);
	ck_assert(cache_get_content(c, SBX, "f", etag));
	ck_assert_str_eq(etag, "\"v\"");
}
END_TEST

START_TEST(attr_touch_keeps_access)
{
	struct proto_attr a = attr_n(7), got;

	/* A directory whose entries changed: a stat misses (times and links
	 * moved), a permission decision still has mode and owner. */
	a.type = PROTO_FT_DIR;
	a.perm = 0751;
	cache_put(c, SBX, "d", &a, NULL);
	cache_touch(c, SBX, "d");
	ck_assert(!cache_get(c, SBX, "d", &got, NULL));
	ck_assert(cache_get_access(c, SBX, "d", &got));
	ck_assert_uint_eq(got.perm, 0751);
	/* A fresh put makes it whole again. */
	cache_put(c, SBX, "d", &a, NULL);
	ck_assert(cache_get(c, SBX, "d", &got, NULL));
	/* Touching what is not there is nothing. */
	cache_touch(c, SBX, "nothing");
	ck_assert(!cache_get_access(c, SBX, "nothing", &got));
}
END_TEST

START_TEST(attr_forget_ino_finds_every_name)
{
	struct proto_attr a = attr_n(9), b = attr_n(10), got;
	char **v = NULL;
	size_t n, i;
	int seen = 0;

	a.ino = 77;
	a.nlink = 3;
	b.ino = 78;
	cache_put(c, SBX, "one", &a, NULL);
	cache_put(c, SBX, "d/two", &a, NULL);
	cache_put(c, SBX, "other", &b, NULL);
	cache_put(c, "elsewhere", "one", &a, NULL);
	n = cache_forget_ino(c, SBX, 77, &v);
	ck_assert_uint_eq(n, 2);
	for (i = 0; i < n; i++) {
		seen |= strcmp(v[i], "one") == 0 ? 1 : 0;
		seen |= strcmp(v[i], "d/two") == 0 ? 2 : 0;
		free(v[i]);
	}
	free(v);
	ck_assert_int_eq(seen, 3);
	ck_assert(!cache_get(c, SBX, "one", &got, NULL));
	ck_assert(!cache_get(c, SBX, "d/two", &got, NULL));
	ck_assert(cache_get(c, SBX, "other", &got, NULL));
	ck_assert(cache_get(c, "elsewhere", "one", &got, NULL));
	ck_assert_uint_eq(cache_forget_ino(c, SBX, 12345, &v), 0);
}
END_TEST

/* The attributes A of REL asked for before FORGET forgets GONE (nothing
 * when FORGET is NULL) and put after it: whether the cache then has REL,
 * its attributes in GOT. */
static bool put_across(void (*forget)(struct cache *, const char *,
				      const char *),
		       const char *gone, const char *rel,
		       const struct proto_attr *a, struct proto_attr *got)
{
	uint64_t mark = cache_mark(c);

	if (forget != NULL)
		forget(c, SBX, gone);
	cache_put_seen(c, SBX, rel, a, NULL, mark);
	return cache_get(c, SBX, rel, got, NULL);
}

START_TEST(answers_older_than_a_change_are_dropped)
{
	struct proto_attr old = attr_n(1), now = attr_n(2), got;
	const char *names[] = {"x"};
	const enum proto_ftype types[] = {PROTO_FT_FILE};
	bool present;
	uint64_t mark;

	/* A stat asked before a write answers after it: the write's
	 * attributes stay. */
	mark = cache_mark(c);
	cache_put(c, SBX, "f", &now, NULL);
	cache_put_seen(c, SBX, "f", &old, NULL, mark);
	ck_assert(cache_get(c, SBX, "f", &got, NULL));
	ck_assert_uint_eq(got.size, 2);
	/* ... and after a forget nothing comes back from the old answer. */
	ck_assert(!put_across(cache_forget, "f", "f", &old, &got));
	/* An answer asked for after the change is kept. */
	ck_assert(put_across(NULL, NULL, "f", &old, &got));
	ck_assert_uint_eq(got.size, 1);
	/* Other paths are not held back by a change. */
	ck_assert(put_across(cache_forget, "f", "g", &old, &got));

	/* A listing asked before a name was made here is dropped. */
	cache_dir_put(c, SBX, "d", NULL, NULL, 0);
	mark = cache_mark(c);
	cache_dir_add(c, SBX, "d", "new", PROTO_FT_FILE);
	cache_dir_put_seen(c, SBX, "d", names, types, 1, mark);
	ck_assert(cache_dir_lookup(c, SBX, "d", "new", &present));
	ck_assert(present);
	ck_assert(cache_dir_lookup(c, SBX, "d", "x", &present));
	ck_assert(!present);

	/* A subtree forgotten: every answer under way is old. */
	ck_assert(!put_across(cache_forget_tree, "elsewhere", "h", &old, &got));
}
END_TEST

void fs_cache_cases(Suite *s)
{
	TCASE_TABLE(s, "dirs", long_setup, cache_teardown, 120,
		    dir_put_each_lookup, dir_add_remove_in_step, dir_expires,
		    dir_ttl_zero_disables, dir_forget_and_forget_tree,
		    dir_many_names, dir_bounded);
	TCASE_TABLE(s, "attrs", long_setup, cache_teardown, 120,
		    attr_put_get_forget, attr_touch_keeps_access,
		    attr_forget_ino_finds_every_name,
		    answers_older_than_a_change_are_dropped, attr_expires,
		    sandbox_ttl_overrides, changed_since_mark,
		    attr_bounded_oldest_first, content_put_get_forget_bounded,
		    content_never_expires);
}
