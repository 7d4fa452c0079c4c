/* SPDX-License-Identifier: MIT */
/*
 * The prefetched contents on their own (src/fs/prefetch.c), against a real
 * agent: when a directory is fetched (a second file opened in it, or a
 * file opened right after it was listed; never with attr_timeout 0), that
 * a body is the file's bytes and is handed once, that the subdirectories
 * of a listed directory are fetched ahead, that a file too large for an
 * answer is not served, and that a body whose attributes the mount no
 * longer holds (its own change forgot them) is not served.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_i.h"
#include "fs/prefetch.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/fs_helpers.h"
#include "tests/helpers.h"

static struct th_agent agent;
static char *parent, *root;
static struct tf_mount tm;

static void put(const char *rel, const char *data, size_t n)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	th_write_file(path, data, n);
}

static void agent_start(void)
{
	const char *args[] = {"--root", NULL, NULL};
	size_t big = PREFETCH_FILE_MAX + 1;
	char *bytes = xcalloc(1, big);

	parent = th_tmpdir("fsprefetch");
	ck_assert(asprintf(&root, "%s/root", parent) > 0);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	put("w/f1", "one", 3);
	put("w/f2", "two two", 7);
	put("w/f3", "three three three", 17);
	memset(bytes, 'b', big);
	put("w/big", bytes, big);
	put("w/sub/s", "below", 5);
	put("w/sub2/t", "t", 1);
	put("x/only", "alone", 5);
	free(bytes);
	th_give_to_exec_user(root);
	args[1] = root;
	th_agent_start(&agent, args, false);
}

static void agent_stop(void)
{
	th_agent_stop(&agent);
	th_rmtree(parent);
	free(parent);
	free(root);
}

static void setup(void)
{
	tf_mount_agent(&tm, &agent, 60.0);
}

static void teardown(void)
{
	tf_mount_free(&tm);
}

/* Take rel's body within a few seconds (a fetch ahead is queued after the
 * fetch that caused it): its bytes, NUL-terminated, or NULL. */
static char *take_soon(const char *rel, long ms)
{
	long long until = th_now_ms() + ms;
	char etag[PROTO_ETAG_MAX], now[PROTO_ETAG_MAX];
	struct proto_attr a;
	char *data;
	size_t len;

	do {
		if (prefetch_take(tm.fs, "demo", rel, &data, &len, etag)) {
			/* Served only as the version the mount holds. */
			ck_assert(
				cache_get(tm.fs->cache, "demo", rel, &a, NULL));
			proto_attr_etag(&a, now);
			ck_assert_str_eq(etag, now);
			ck_assert_uint_eq(a.size, len);
			data = xrealloc(data, len + 1);
			data[len] = '\0';
			return data;
		}
		usleep(20000);
	} while (th_now_ms() < until);
	return NULL;
}

static void assert_body(const char *rel, const char *want)
{
	char *got = take_soon(rel, 10000);

	ck_assert_msg(got != NULL, "no body for %s", rel);
	ck_assert_str_eq(got, want);
	free(got);
}

/* Wait for the fetch of w to end: a take of a name it does not hold
 * waits for as long as the fetch is under way. */
static void fetched_w(void)
{
	char *data, etag[PROTO_ETAG_MAX];
	size_t len;

	ck_assert(!prefetch_take(tm.fs, "demo", "w/none", &data, &len, etag));
}

/* The listing of w as a readdir through the mount would leave it. */
static void list_w(void)
{
	static const char *const names[] = {"f1",  "f2",  "f3",
					    "big", "sub", "sub2"};
	static const enum proto_ftype types[] = {PROTO_FT_FILE, PROTO_FT_FILE,
						 PROTO_FT_FILE, PROTO_FT_FILE,
						 PROTO_FT_DIR,	PROTO_FT_DIR};

	cache_dir_put(tm.fs->cache, "demo", "w", names, types, 6);
	prefetch_listed(tm.fs, "demo", "w");
}

START_TEST(one_open_fetches_nothing)
{
	char *data, etag[PROTO_ETAG_MAX];
	size_t len;

	/* A single cat: the same file again is still one file. */
	prefetch_opened(tm.fs, "demo", "x/only");
	prefetch_opened(tm.fs, "demo", "x/only");
	ck_assert_ptr_null(take_soon("x/only", 300));
	ck_assert(!prefetch_take(tm.fs, "demo", "x/only", &data, &len, etag));
}
END_TEST

START_TEST(second_file_fetches_the_directory)
{
	prefetch_opened(tm.fs, "demo", "w/f1");
	prefetch_opened(tm.fs, "demo", "w/f2");
	assert_body("w/f3", "three three three");
	assert_body("w/f1", "one");
	/* Handed once: the next reader reads from the agent. */
	ck_assert_ptr_null(take_soon("w/f3", 200));
	/* Too large for an answer: never there. */
	ck_assert_ptr_null(take_soon("w/big", 200));
	/* Nothing listed w: nothing below it is fetched ahead. */
	ck_assert_ptr_null(take_soon("w/sub/s", 500));
}
END_TEST

START_TEST(listed_directory_fetches_its_subdirectories)
{
	list_w();
	/* The first open after a listing is a walker's. */
	prefetch_opened(tm.fs, "demo", "w/f1");
	assert_body("w/f2", "two two");
	assert_body("w/sub/s", "below");
	assert_body("w/sub2/t", "t");
}
END_TEST

/* A change event made the mount forget the walker's listing before the
 * fetch: the subdirectories come from the agent's listing instead. */
START_TEST(listed_directory_forgotten_still_fetches_ahead)
{
	list_w();
	cache_dir_forget(tm.fs->cache, "demo", "w");
	prefetch_opened(tm.fs, "demo", "w/f1");
	assert_body("w/f2", "two two");
	assert_body("w/sub/s", "below");
	assert_body("w/sub2/t", "t");
}
END_TEST

START_TEST(forgotten_attributes_are_not_served)
{
	struct proto_attr a;

	prefetch_opened(tm.fs, "demo", "w/f1");
	prefetch_opened(tm.fs, "demo", "w/f2");
	assert_body("w/f1", "one");
	fetched_w();
	/* The mount's own change forgets the attributes: the body is of
	 * an older version now. */
	cache_forget(tm.fs->cache, "demo", "w/f2");
	ck_assert_ptr_null(take_soon("w/f2", 200));
	/* Other attributes than the body's (the file changed since). */
	ck_assert(cache_get(tm.fs->cache, "demo", "w/f3", &a, NULL));
	a.size++;
	cache_put(tm.fs->cache, "demo", "w/f3", &a, NULL);
	ck_assert_ptr_null(take_soon("w/f3", 200));
}
END_TEST

START_TEST(dropped_sandbox_holds_nothing)
{
	prefetch_opened(tm.fs, "demo", "w/f1");
	prefetch_opened(tm.fs, "demo", "w/f2");
	assert_body("w/f1", "one");
	fetched_w();
	prefetch_drop_sandbox(tm.fs, "demo");
	ck_assert_ptr_null(take_soon("w/f2", 200));
	ck_assert_ptr_null(take_soon("w/f3", 200));
}
END_TEST

START_TEST(no_window_no_fetch)
{
	/* attr_timeout 0: nothing may be answered from an older look. */
	tf_mount_free(&tm);
	tf_mount_agent(&tm, &agent, 0);
	list_w();
	prefetch_opened(tm.fs, "demo", "w/f1");
	prefetch_opened(tm.fs, "demo", "w/f2");
	ck_assert_ptr_null(take_soon("w/f3", 500));
}
END_TEST

void fs_prefetch_cases(Suite *s)
{
	TCase *tc;

	tc = TCASE_TABLE(s, "agent", setup, teardown, 60,
			 one_open_fetches_nothing,
			 second_file_fetches_the_directory,
			 listed_directory_fetches_its_subdirectories,
			 listed_directory_forgotten_still_fetches_ahead,
			 forgotten_attributes_are_not_served,
			 dropped_sandbox_holds_nothing, no_window_no_fetch);
	tcase_add_unchecked_fixture(tc, agent_start, agent_stop);
}
