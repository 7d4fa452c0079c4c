/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_inodes: the mount's table of FUSE node ids (src/fs/inodes.c)
 * on its own: paths from ids, lookups counted and forgotten, renames
 * moving whole subtrees, names removed or renamed over leaving their
 * node detached, files unlinked while open, and a table that grows and
 * empties again.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fs/inodes.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

static uint64_t look(struct inodes *t, uint64_t parent, const char *name)
{
	uint64_t ino = 0;

	ck_assert_int_eq(inodes_lookup(t, parent, name, &ino), 0);
	ck_assert_uint_ne(ino, 0);
	return ino;
}

static void assert_path(struct inodes *t, uint64_t ino, const char *want)
{
	char buf[256];

	ck_assert_int_eq(inodes_path(t, ino, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, want);
}

START_TEST(paths_and_lookups)
{
	struct inodes *t = inodes_new();
	uint64_t a, b, c;
	char buf[256];

	assert_path(t, INODES_ROOT, "/");
	a = look(t, INODES_ROOT, "sb");
	b = look(t, a, "files");
	c = look(t, b, "x.c");
	assert_path(t, c, "/sb/files/x.c");
	/* The same name is the same node, counted again. */
	ck_assert_uint_eq(look(t, b, "x.c"), c);
	ck_assert_uint_eq(inodes_peek(t, b, "x.c"), c);
	ck_assert_uint_eq(inodes_peek(t, b, "y.c"), 0);
	ck_assert_int_eq(inodes_child_path(t, b, "y.c", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/sb/files/y.c");
	ck_assert_int_eq(
		inodes_child_path(t, INODES_ROOT, "z", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/z");
	/* Unknown ids have no path; nor does a path that does not fit. */
	ck_assert_int_eq(inodes_path(t, 999999, buf, sizeof(buf)), -ENOENT);
	ck_assert_int_eq(inodes_path(t, c, buf, 8), -ENAMETOOLONG);
	ck_assert_int_eq(inodes_lookup(t, 999999, "q", &a), -ENOENT);
	ck_assert_uint_eq(inodes_count(t), 4);
	/* Two lookups of x.c: one forget keeps it, the second frees it. */
	inodes_forget(t, c, 1);
	ck_assert_uint_eq(inodes_count(t), 4);
	inodes_forget(t, c, 1);
	ck_assert_uint_eq(inodes_count(t), 3);
	/* A forgotten directory stays while it has children. */
	c = look(t, b, "x.c");
	inodes_forget(t, b, 1);
	ck_assert_uint_eq(inodes_count(t), 4);
	assert_path(t, c, "/sb/files/x.c");
	inodes_forget(t, c, 1);
	ck_assert_uint_eq(inodes_count(t), 2);
	inodes_forget(t, a, 1);
	ck_assert_uint_eq(inodes_count(t), 1);
	/* The root is never forgotten. */
	inodes_forget(t, INODES_ROOT, 100);
	assert_path(t, INODES_ROOT, "/");
	inodes_free(t);
}
END_TEST

START_TEST(renames_move_subtrees)
{
	struct inodes *t = inodes_new();
	uint64_t d, e, f, g, h, p, x;
	char buf[256];

	d = look(t, INODES_ROOT, "d");
	e = look(t, INODES_ROOT, "e");
	f = look(t, d, "sub");
	g = look(t, f, "file");
	inodes_rename(t, INODES_ROOT, "d", e, "moved", false);
	assert_path(t, d, "/e/moved");
	assert_path(t, g, "/e/moved/sub/file");
	ck_assert_uint_eq(inodes_peek(t, INODES_ROOT, "d"), 0);
	/* Renamed over: the old target is detached, its id unusable. */
	h = look(t, INODES_ROOT, "target");
	inodes_rename(t, f, "file", INODES_ROOT, "target", false);
	assert_path(t, g, "/target");
	ck_assert_int_eq(inodes_path(t, h, buf, sizeof(buf)), -ENOENT);
	ck_assert_int_eq(inodes_lookup(t, h, "child", &x), -ENOENT);
	/* Exchange swaps the nodes of two names. */
	p = look(t, INODES_ROOT, "p");
	inodes_rename(t, INODES_ROOT, "p", INODES_ROOT, "target", true);
	assert_path(t, p, "/target");
	assert_path(t, g, "/p");
	/* A name the table does not know moves nothing and breaks
	 * nothing. */
	inodes_rename(t, INODES_ROOT, "nope", INODES_ROOT, "p", false);
	ck_assert_int_eq(inodes_path(t, g, buf, sizeof(buf)), -ENOENT);
	/* Find by path. */
	ck_assert_int_eq(inodes_find(t, "/e/moved/sub", &x, &h), 0);
	ck_assert_uint_eq(x, f);
	ck_assert_uint_eq(h, d);
	ck_assert_int_eq(inodes_find(t, "/e/gone", &x, &h), -ENOENT);
	/* Below /e: moved, sub; file and target were detached above,
	 * p now lives at the root. */
	{
		uint64_t ids[8];
		size_t n = inodes_below(t, "/e", ids, 8);

		ck_assert_uint_eq(n, 2);
		ck_assert(ids[0] != e && ids[1] != e);
		ck_assert(ids[0] == d || ids[1] == d);
		ck_assert(ids[0] == f || ids[1] == f);
		ck_assert_uint_eq(inodes_below(t, "/e", ids, 1), 1);
		ck_assert_uint_eq(inodes_below(t, "/nope", ids, 8), 0);
	}
	inodes_free(t);
}
END_TEST

START_TEST(removed_names_detach)
{
	struct inodes *t = inodes_new();
	uint64_t d, f, x;
	char buf[256];

	d = look(t, INODES_ROOT, "d");
	f = look(t, d, "f");
	inodes_remove(t, INODES_ROOT, "d");
	/* Below a removed directory nothing has a path. */
	ck_assert_int_eq(inodes_path(t, d, buf, sizeof(buf)), -ENOENT);
	ck_assert_int_eq(inodes_path(t, f, buf, sizeof(buf)), -ENOENT);
	/* ... unless asked for the path they had. */
	ck_assert_int_eq(
		inodes_path_flags(t, f, INODES_DETACHED_OK, buf, sizeof(buf)),
		0);
	ck_assert_str_eq(buf, "/d/f");
	/* Nothing new is made below a detached directory. */
	ck_assert_int_eq(inodes_lookup(t, d, "g", &x), -ENOENT);
	/* Removed in the sandbox while open: stale, whatever is asked. */
	{
		uint64_t v = look(t, INODES_ROOT, "v");

		inodes_vanish(t, INODES_ROOT, "v");
		ck_assert_int_eq(inodes_path(t, v, buf, sizeof(buf)), -ESTALE);
		ck_assert_int_eq(inodes_path_flags(t, v, INODES_DETACHED_OK,
						   buf, sizeof(buf)),
				 -ESTALE);
		ck_assert_uint_eq(inodes_peek(t, INODES_ROOT, "v"), 0);
		inodes_forget(t, v, 1);
	}
	/* The same name looked up again is a new node. */
	x = look(t, INODES_ROOT, "d");
	ck_assert_uint_ne(x, d);
	ck_assert_uint_eq(inodes_peek(t, INODES_ROOT, "d"), x);
	/* Detached nodes live until the kernel forgets them. */
	ck_assert_uint_eq(inodes_count(t), 4);
	inodes_forget(t, f, 1);
	inodes_forget(t, d, 1);
	ck_assert_uint_eq(inodes_count(t), 2);
	inodes_free(t);
}
END_TEST

START_TEST(unlinked_while_open)
{
	struct inodes *t = inodes_new();
	uint64_t d, f, x = 0;
	char buf[256];

	d = look(t, INODES_ROOT, "d");
	f = look(t, d, "f");
	ck_assert_uint_eq(inodes_open_child(t, d, "f"), 0);
	inodes_open(t, f);
	inodes_open(t, f);
	ck_assert_uint_eq(inodes_open_child(t, d, "f"), f);
	/* What ll.c does on unlink: rename to a hidden name, mark it. */
	inodes_rename(t, d, "f", d, ".hidden1", false);
	inodes_hide(t, f, "/d/f");
	/* Hidden: the hidden name, for its descriptors and for an open
	 * that looked the file up before it was hidden. */
	assert_path(t, f, "/d/.hidden1");
	/* The kernel forgets the name; the open files keep the node. */
	inodes_forget(t, f, 1);
	assert_path(t, f, "/d/.hidden1");
	ck_assert(!inodes_close(t, f, buf, sizeof(buf), &x));
	ck_assert(inodes_close(t, f, buf, sizeof(buf), &x));
	ck_assert_str_eq(buf, "/d/.hidden1");
	ck_assert_uint_eq(x, d);
	/* Gone once the last descriptor closed, hidden name and all. */
	ck_assert_int_eq(inodes_path(t, f, buf, sizeof(buf)), -ENOENT);
	ck_assert_int_eq(
		inodes_path_flags(t, f, INODES_DETACHED_OK, buf, sizeof(buf)),
		-ENOENT);
	ck_assert_uint_eq(inodes_count(t), 2);
	/* One the kernel still knows (an open of it is on its way): after
	 * the last close, the path it had before it was hidden, where the
	 * late open finds the file that has the name now. */
	f = look(t, d, "h");
	inodes_open(t, f);
	inodes_rename(t, d, "h", d, ".hidden2", false);
	inodes_hide(t, f, "/d/h");
	ck_assert(inodes_close(t, f, buf, sizeof(buf), &x));
	ck_assert_str_eq(buf, "/d/.hidden2");
	ck_assert_int_eq(inodes_path(t, f, buf, sizeof(buf)), -ENOENT);
	ck_assert_int_eq(
		inodes_path_flags(t, f, INODES_DETACHED_OK, buf, sizeof(buf)),
		0);
	ck_assert_str_eq(buf, "/d/h");
	inodes_forget(t, f, 1);
	ck_assert_uint_eq(inodes_count(t), 2);
	/* A plain file's last close removes nothing. */
	f = look(t, d, "g");
	inodes_open(t, f);
	ck_assert(!inodes_close(t, f, buf, sizeof(buf), &x));
	assert_path(t, f, "/d/g");
	inodes_free(t);
}
END_TEST

START_TEST(grows_and_empties)
{
	struct inodes *t = inodes_new();
	static uint64_t ids[20000];
	char name[32];
	uint64_t dir;
	size_t i;

	dir = look(t, INODES_ROOT, "big");
	for (i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "f%zu", i);
		ids[i] = look(t, dir, name);
	}
	ck_assert_uint_eq(inodes_count(t), 20002);
	for (i = 0; i < 20000; i += 997) {
		snprintf(name, sizeof(name), "/big/f%zu", i);
		assert_path(t, ids[i], name);
	}
	for (i = 0; i < 20000; i++)
		inodes_forget(t, ids[i], 1);
	inodes_forget(t, dir, 1);
	ck_assert_uint_eq(inodes_count(t), 1);
	inodes_free(t);
}
END_TEST

/* A file's identity: the sandbox's inode number and change time. An open
 * file keeps its own when its name shows another file (replaced in the
 * sandbox), so that the change events find the descriptors stale instead
 * of pointing them at the new file. */
START_TEST(open_files_keep_identity)
{
	struct inodes *t = inodes_new();
	uint64_t f, x = 0;
	int64_t ct = 0;
	char buf[256];

	f = look(t, INODES_ROOT, "f");
	inodes_set_fino(t, f, 100, 5);
	/* Not open: the name's file is the node's. */
	inodes_set_fino(t, f, 200, 6);
	inodes_open(t, f);
	ck_assert_uint_eq(inodes_open_fino(t, INODES_ROOT, "f", &x, &ct), 200);
	ck_assert_uint_eq(x, f);
	ck_assert_int_eq(ct, 6);
	/* Open: the same file changes (its change time), another does not
	 * replace it. */
	inodes_set_fino(t, f, 200, 7);
	inodes_set_fino(t, f, 300, 8);
	ck_assert_uint_eq(inodes_open_fino(t, INODES_ROOT, "f", &x, &ct), 200);
	ck_assert_int_eq(ct, 7);
	ck_assert(!inodes_close(t, f, buf, sizeof(buf), &x));
	inodes_set_fino(t, f, 300, 8);
	inodes_open(t, f);
	ck_assert_uint_eq(inodes_open_fino(t, INODES_ROOT, "f", &x, &ct), 300);
	inodes_free(t);
}
END_TEST

void fs_inodes_cases(Suite *s)
{
	TCASE_TABLE(s, "table", NULL, NULL, 0, paths_and_lookups,
		    renames_move_subtrees, removed_names_detach,
		    unlinked_while_open, grows_and_empties,
		    open_files_keep_identity);
}
