/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_dirsnap: the listings readers are part way through
 * (src/fs/dirsnap.c), on its own: offsets that name a snapshot and an
 * entry, a reader that comes back answered from its own snapshot however
 * many listings came after, a snapshot gone once its reader got to the
 * end, and the bounds (least recently used first, never a held one).
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "fs/dirsnap.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

static struct dirsnaps *t;

static void snaps_teardown(void)
{
	dirsnaps_free(t);
	t = NULL;
}

/* A published snapshot of ino with n entries "p0".."p<n-1>", held. */
static struct dirsnap *listing(uint64_t ino, const char *prefix, size_t n)
{
	struct dirsnap *s = dirsnap_begin(ino, 7);
	char name[64];
	struct stat st;
	size_t i;

	for (i = 0; i < n; i++) {
		memset(&st, 0, sizeof(st));
		st.st_size = (off_t)i;
		snprintf(name, sizeof(name), "%s%zu", prefix, i);
		dirsnap_add(s, name, &st, i % 2 == 0);
	}
	dirsnaps_publish(t, s);
	return s;
}

START_TEST(offsets_name_the_snapshot_and_the_next_entry)
{
	struct dirsnap *s;
	uint32_t gen;
	size_t next, k;

	t = dirsnaps_new(8, 1000);
	dirsnap_parse(0, &gen, &next);
	ck_assert_uint_eq(gen, 0);
	ck_assert_uint_eq(next, 0);
	s = listing(5, "a", 3);
	ck_assert_uint_ne(s->gen, 0);
	ck_assert_uint_eq(s->mark, 7);
	ck_assert_str_eq(s->e[1].name, "a1");
	ck_assert(s->e[0].plus && !s->e[1].plus);
	for (k = 0; k < s->n; k++) {
		uint64_t off = dirsnap_off(s, k);

		/* Positive as a loff_t, and increasing. */
		ck_assert(off > 0 && off < (1ull << 63));
		ck_assert(k == 0 || off > dirsnap_off(s, k - 1));
		dirsnap_parse(off, &gen, &next);
		ck_assert_uint_eq(gen, s->gen);
		ck_assert_uint_eq(next, k + 1);
	}
	dirsnaps_put(t, s, false);
}
END_TEST

START_TEST(a_reader_comes_back_to_its_own_snapshot)
{
	struct dirsnap *first, *second, *again;
	uint32_t gen;
	size_t next;

	t = dirsnaps_new(8, 1000);
	first = listing(5, "old", 4);
	dirsnap_parse(dirsnap_off(first, 1), &gen, &next);
	dirsnaps_put(t, first, false);
	/* The directory changed and another reader listed it. */
	second = listing(5, "new", 2);
	dirsnaps_put(t, second, false);
	again = dirsnaps_get(t, 5, gen);
	ck_assert_ptr_eq(again, first);
	ck_assert_uint_eq(again->n, 4);
	ck_assert_str_eq(again->e[next].name, "old2");
	dirsnaps_put(t, again, false);
	/* Another directory's generation, or none: not found. */
	ck_assert_ptr_null(dirsnaps_get(t, 6, gen));
	ck_assert_ptr_null(dirsnaps_get(t, 5, 0));
	ck_assert_uint_eq(dirsnaps_count(t), 2);
}
END_TEST

START_TEST(a_snapshot_read_to_the_end_goes)
{
	struct dirsnap *s, *held;
	uint32_t gen;

	t = dirsnaps_new(8, 1000);
	s = listing(5, "a", 3);
	gen = s->gen;
	/* Held twice (a second reader from the same offset): it stays
	 * until the last one lets go. */
	held = dirsnaps_get(t, 5, gen);
	ck_assert_ptr_eq(held, s);
	dirsnaps_put(t, s, true);
	ck_assert_uint_eq(dirsnaps_count(t), 1);
	ck_assert_str_eq(held->e[2].name, "a2");
	dirsnaps_put(t, held, false);
	ck_assert_uint_eq(dirsnaps_count(t), 0);
	ck_assert_ptr_null(dirsnaps_get(t, 5, gen));
}
END_TEST

START_TEST(bounds_drop_the_least_recent_never_a_held_one)
{
	struct dirsnap *s[4], *held;
	uint32_t gen[4];
	size_t i;

	t = dirsnaps_new(2, 1000);
	for (i = 0; i < 3; i++) {
		s[i] = listing(10 + i, "x", 1);
		gen[i] = s[i]->gen;
		dirsnaps_put(t, s[i], false);
	}
	/* Three kept, two allowed: the first went. */
	ck_assert_uint_eq(dirsnaps_count(t), 2);
	ck_assert_ptr_null(dirsnaps_get(t, 10, gen[0]));
	/* Using the second makes the third the least recent. */
	held = dirsnaps_get(t, 11, gen[1]);
	ck_assert_ptr_nonnull(held);
	s[3] = listing(13, "x", 1);
	ck_assert_ptr_null(dirsnaps_get(t, 12, gen[2]));
	/* Held ones stay even over the bound. */
	ck_assert_uint_eq(dirsnaps_count(t), 2);
	dirsnaps_put(t, held, false);
	dirsnaps_put(t, s[3], false);

	/* The entry bound: a listing bigger than it is kept while held,
	 * dropped when let go. */
	snaps_teardown();
	t = dirsnaps_new(8, 10);
	s[0] = listing(20, "big", 25);
	ck_assert_uint_eq(dirsnaps_count(t), 1);
	ck_assert_str_eq(s[0]->e[24].name, "big24");
	dirsnaps_put(t, s[0], false);
	ck_assert_uint_eq(dirsnaps_count(t), 0);
}
END_TEST

START_TEST(a_dropped_listing_frees_its_entries)
{
	struct dirsnap *s = dirsnap_begin(1, 0);

	/* Not published: dropped by its filler (a listing that failed). */
	dirsnap_add(s, "a", NULL, true);
	ck_assert(!s->e[0].plus);
	ck_assert_int_eq(s->e[0].st.st_size, 0);
	dirsnap_drop(s);
	dirsnap_drop(NULL);
}
END_TEST

void fs_dirsnap_cases(Suite *s)
{
	TCASE_TABLE(s, "snapshots", NULL, snaps_teardown, 30,
		    offsets_name_the_snapshot_and_the_next_entry,
		    a_reader_comes_back_to_its_own_snapshot,
		    a_snapshot_read_to_the_end_goes,
		    bounds_drop_the_least_recent_never_a_held_one,
		    a_dropped_listing_frees_its_entries);
}
