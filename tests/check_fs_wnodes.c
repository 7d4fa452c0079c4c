/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_wnodes: a mount's write table (src/fs/wnodes.c) on its own,
 * with a flush function of the test's: one node per path and owner,
 * renames, removal while open, picking, losses, and the gathering window
 * (the flusher sends what waited longer than the window, every node
 * when asked for all, nothing runs with no window).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/wnodes.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

static int owner_a, owner_b; /* two sandboxes: only their addresses count */

/* The test's "agent": counts the flushes and takes the bytes. */
static pthread_mutex_t sent_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned sent;
static size_t sent_bytes;

static int flush(void *ctx, struct wnode *w)
{
	(void)ctx;
	if (!w->dirty)
		return 0;
	pthread_mutex_lock(&sent_lock);
	sent++;
	sent_bytes += w->data.len;
	pthread_mutex_unlock(&sent_lock);
	buf_reset(&w->data);
	w->dirty = false;
	return 0;
}

static unsigned sent_now(void)
{
	unsigned n;

	pthread_mutex_lock(&sent_lock);
	n = sent;
	pthread_mutex_unlock(&sent_lock);
	return n;
}

static void reset_sent(void)
{
	pthread_mutex_lock(&sent_lock);
	sent = 0;
	sent_bytes = 0;
	pthread_mutex_unlock(&sent_lock);
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Gather n bytes into w, as a write does. */
static void gather(struct wnode *w, size_t n)
{
	char b[64];

	memset(b, 'x', sizeof(b));
	pthread_mutex_lock(&w->lock);
	while (n > 0) {
		size_t k = n < sizeof(b) ? n : sizeof(b);

		ck_assert_int_eq(buf_append(&w->data, b, k), 0);
		n -= k;
	}
	wnode_dirtied(w);
	pthread_mutex_unlock(&w->lock);
}

START_TEST(one_node_per_path_and_owner)
{
	struct wnodes *t;
	struct wnode *a, *a2, *b, *c;

	ck_assert_int_eq(wnodes_new(1000, flush, NULL, &t), 0);
	a = wnode_get(t, &owner_a, "d/f");
	a2 = wnode_get(t, &owner_a, "d/f");
	b = wnode_get(t, &owner_b, "d/f");
	ck_assert_ptr_eq(a, a2);
	ck_assert_ptr_ne(a, b);
	c = wnode_find(t, &owner_a, "d/f");
	ck_assert_ptr_eq(c, a);
	ck_assert_ptr_null(wnode_find(t, &owner_a, "d/g"));
	wnode_put(c);
	wnode_put(a2);
	wnode_put(a);
	/* The last reference gone, the path has no node. */
	ck_assert_ptr_null(wnode_find(t, &owner_a, "d/f"));
	wnode_put(b);
	wnodes_free(t);
}
END_TEST

START_TEST(rename_and_removal)
{
	struct wnodes *t;
	struct wnode *f, *g, *other, *again, *n;
	char *rel;

	ck_assert_int_eq(wnodes_new(1000, flush, NULL, &t), 0);
	f = wnode_get(t, &owner_a, "d/f");
	g = wnode_get(t, &owner_a, "d/sub/g");
	other = wnode_get(t, &owner_a, "dd/f");
	wnodes_rekey(t, &owner_a, "d", "e/d2");
	rel = wnode_rel(f);
	ck_assert_str_eq(rel, "e/d2/f");
	free(rel);
	rel = wnode_rel(g);
	ck_assert_str_eq(rel, "e/d2/sub/g");
	free(rel);
	/* "dd" is not below "d". */
	rel = wnode_rel(other);
	ck_assert_str_eq(rel, "dd/f");
	free(rel);
	/* Removed while open: the path takes a new node. */
	pthread_mutex_lock(&f->lock);
	wnode_orphan(f);
	pthread_mutex_unlock(&f->lock);
	ck_assert_ptr_null(wnode_find(t, &owner_a, "e/d2/f"));
	again = wnode_get(t, &owner_a, "e/d2/f");
	ck_assert_ptr_ne(again, f);
	/* An orphan is not renamed either. */
	wnodes_rekey(t, &owner_a, "e", "x");
	rel = wnode_rel(f);
	ck_assert_str_eq(rel, "e/d2/f");
	free(rel);
	n = wnode_find(t, &owner_a, "x/d2/f");
	ck_assert_ptr_eq(n, again);
	wnode_put(n);
	wnode_put(again);
	wnode_put(f);
	wnode_put(g);
	wnode_put(other);
	wnodes_free(t);
}
END_TEST

static bool pick_dirty(const struct wnode *w, const void *arg)
{
	(void)arg;
	return w->dirty;
}

START_TEST(pick_and_losses)
{
	struct wnodes *t;
	struct wnode *a, *b, **v;
	size_t n;

	ck_assert_int_eq(wnodes_new(0, flush, NULL, &t), 0);
	a = wnode_get(t, &owner_a, "a");
	b = wnode_get(t, &owner_a, "b");
	gather(a, 10);
	n = wnodes_pick(t, pick_dirty, NULL, &v);
	ck_assert_uint_eq(n, 1);
	ck_assert_ptr_eq(v[0], a);
	wnodes_put(v, n);
	/* A loss is counted, with its errno, and tells later checks. */
	pthread_mutex_lock(&a->lock);
	ck_assert_uint_eq(a->err_gen, 0);
	wnode_lost(a, -ENOSPC);
	wnode_lost(a, 0);
	ck_assert_uint_eq(a->err_gen, 2);
	ck_assert_int_eq(a->err, -EIO);
	pthread_mutex_unlock(&a->lock);
	/* Changes are counted without a lock. */
	wnode_changed(b);
	wnode_changed(b);
	ck_assert_uint_eq(atomic_load(&b->gen), 2);
	wnode_put(a);
	wnode_put(b);
	wnodes_free(t);
}
END_TEST

START_TEST(window_sends_what_waited)
{
	struct wnodes *t;
	struct wnode *w;
	int i;

	reset_sent();
	ck_assert_int_eq(wnodes_new(50, flush, NULL, &t), 0);
	ck_assert_int_eq(wnodes_window_ms(t), 50);
	w = wnode_get(t, &owner_a, "f");
	gather(w, 100);
	/* The flusher sends it within a few ticks, though the file stays
	 * open and nothing else asks for it. */
	for (i = 0; i < 200 && sent_now() == 0; i++)
		nap_ms(10);
	ck_assert_uint_eq(sent_now(), 1);
	pthread_mutex_lock(&w->lock);
	ck_assert(!w->dirty);
	pthread_mutex_unlock(&w->lock);
	/* A second extent starts its own window. */
	gather(w, 5);
	for (i = 0; i < 200 && sent_now() == 1; i++)
		nap_ms(10);
	ck_assert_uint_eq(sent_now(), 2);
	ck_assert_uint_eq(sent_bytes, 105);
	wnode_put(w);
	wnodes_free(t);
}
END_TEST

START_TEST(all_sends_everything)
{
	struct wnodes *t;
	struct wnode *a, *b;

	reset_sent();
	/* A long window: only the table's end sends. */
	ck_assert_int_eq(wnodes_new(3600 * 1000L, flush, NULL, &t), 0);
	a = wnode_get(t, &owner_a, "a");
	b = wnode_get(t, &owner_b, "b");
	gather(a, 7);
	gather(b, 8);
	nap_ms(150);
	ck_assert_uint_eq(sent_now(), 0);
	/* What the table's end does first: every gathering node sent. */
	wnodes_flush_old(t, true);
	ck_assert_uint_eq(sent_now(), 2);
	ck_assert_uint_eq(sent_bytes, 15);
	gather(a, 9);
	wnode_put(b);
	wnode_put(a);
	wnodes_free(t);
}
END_TEST

START_TEST(no_window_no_flusher)
{
	struct wnodes *t;
	struct wnode *w;

	reset_sent();
	/* With no window the owner sends each write itself: nothing is sent
	 * behind its back. */
	ck_assert_int_eq(wnodes_new(0, flush, NULL, &t), 0);
	w = wnode_get(t, &owner_a, "f");
	gather(w, 3);
	nap_ms(200);
	ck_assert_uint_eq(sent_now(), 0);
	pthread_mutex_lock(&w->lock);
	ck_assert_int_eq(flush(NULL, w), 0);
	pthread_mutex_unlock(&w->lock);
	ck_assert_uint_eq(sent_now(), 1);
	wnode_put(w);
	wnodes_free(t);
}
END_TEST

void fs_wnodes_cases(Suite *s)
{
	TCASE_TABLE(s, "table", NULL, NULL, 60, one_node_per_path_and_owner,
		    rename_and_removal, pick_and_losses,
		    window_sends_what_waited, all_sends_everything,
		    no_window_no_flusher);
}
