/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_ext_tree: GET /sandboxfs/v1/tree (doc/protocol-ext.md)
 * against a real sandbox-agent: a subtree breadth first, each listing
 * compared with the directory on disk, the entry budget and the answer's
 * bound, symlinks never followed, what cannot be read left out, the
 * errors, health's advertisement and strict v1.
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

	if (asprintf(&p, "%s%s%s%s%s", ta_ag.root, *base ? "/" : "", base,
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
			p = ta_join(abs, de->d_name);
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
		p = ta_join(abs, de->d_name);
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

	ta_ext_get(&ta_ag, "tree", path, more, NULL, &r);
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
	ta_put_file(ta_ag.root, "f1", "one");
	ta_make_dir(ta_ag.root, "d1");
	ta_put_file(ta_ag.root, "d1/g", "gg");
	ta_make_dir(ta_ag.root, "d1/e1");
	ta_make_link(ta_ag.root, "d1/l", "../f1");
	ta_make_dir(ta_ag.root, "d2");
	ta_put_file(ta_ag.root, "d2/h", "hhh");
	ta_make_dir(ta_ag.root, "d2/x");
	ta_put_file(ta_ag.root, "d2/x/w", "w");
	ta_make_dir(ta_ag.root, "d2/x/y");
	ta_put_file(ta_ag.root, "d2/x/y/z", "zzzz");
	ta_put_file(ta_ag.root, "d2/" TREE_ODD, "");
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
	ta_ext_get(&ta_ag, "tree", "", NULL, NULL, &r);
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
	ta_ext_expect_get(&ta_ag, "tree", "d1/e1", NULL, 200,
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
			ta_ext_expect_get(&ta_ag, "tree", "", more, 200,
					  "{\"dirs\":[],\"complete\":false}");
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

	ta_agent_setup();
	ta_make_dir(ta_ag.root, "a");
	ta_make_dir(ta_ag.root, "b");
	ta_make_dir(ta_ag.root, "a/e");
	ta_make_dir(ta_ag.root, "b/e");
	bfs_dirs("", NULL, &want);
	ck_assert_uint_eq(want.n, 5);
	second = ta_join(ta_ag.root, want.v[2]);
	for (tries = 0; tries < 200; tries++) {
		char name[32];
		bool dot;

		first = first_readdir_name(second);
		dot = strcmp(first, ".") == 0 || strcmp(first, "..") == 0;
		free(first);
		if (!dot)
			break;
		snprintf(name, sizeof(name), "%s/n%d", want.v[2], tries);
		ta_put_file(ta_ag.root, name, "");
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
	ta_agent_teardown();
	ck_assert_msg(n == 2, "%zu directories sent, the last '%s'", n, last);
}
END_TEST

START_TEST(wire_tree_symlinks)
{
	static const char *const escapes[] = {"up", "abs", "abs/ssl"};
	struct proto_tree t;
	struct th_resp r;
	size_t i;

	ta_make_dir(ta_ag.root, "sub");
	ta_put_file(ta_ag.root, "sub/f", "inside");
	ta_make_dir(ta_ag.root, "sub/deeper");
	ta_make_link(ta_ag.root, "in", "sub");
	ta_make_link(ta_ag.root, "abs", "/etc");
	ta_make_link(ta_ag.root, "up", "../../..");

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
	for (i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++)
		ta_ext_expect_escape(&ta_ag, "tree", escapes[i]);
	ta_ext_expect_get(
		&ta_ag, "tree", "..", NULL, 400,
		"PATH_REFUSED: Path '..' refused: path traverses upward");
	ta_ext_expect_get(
		&ta_ag, "tree", "sub/../sub", NULL, 400,
		"PATH_REFUSED: Path 'sub/../sub' refused: path traverses "
		"upward");
	ta_ext_req(&ta_ag, "GET", "tree?path=sub%00x", NULL, NULL, NULL, 0, &r);
	ta_expect_resp(
		&r, 400,
		"PATH_REFUSED: Path 'sub' refused: path carries a byte no "
		"path may hold");
}
END_TEST

START_TEST(wire_tree_unreadable_left_out)
{
	struct proto_tree t;
	struct dirvec want;
	char *locked;
	size_t i;

	ta_make_dir(ta_ag.root, "a");
	ta_put_file(ta_ag.root, "a/f", "x");
	ta_make_dir(ta_ag.root, "locked");
	ta_put_file(ta_ag.root, "locked/secret", "s");
	ta_make_dir(ta_ag.root, "locked/below");
	ta_make_dir(ta_ag.root, "z");
	ta_make_dir(ta_ag.root, "z/deep");
	locked = ta_join(ta_ag.root, "locked");
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
	ta_ext_expect_get(&ta_ag, "tree", "locked", NULL, 409,
			  "FS_ERROR: EACCES: Permission denied: locked");
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
	struct proto_tree t;
	struct th_resp r;
	char more[64];
	size_t i;

	ta_put_file(ta_ag.root, "f", "x");
	ta_make_dir(ta_ag.root, "d");
	ta_ext_expect_missing(&ta_ag, "tree", "nope");
	ta_ext_expect_missing(&ta_ag, "tree", "d/nope");
	ta_ext_expect_get(&ta_ag, "tree", "f", NULL, 409,
			  "FS_ERROR: ENOTDIR: Not a directory: f");
	for (i = 0; i < sizeof(bad_limits) / sizeof(bad_limits[0]); i++) {
		snprintf(more, sizeof(more), "&maxEntries=%s", bad_limits[i]);
		ta_ext_get(&ta_ag, "tree", "d", more, NULL, &r);
		ta_assert_resp(&r, 400,
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
	ta_ext_req(&ta_ag, "GET", "tree", NULL, NULL, NULL, 0, &r);
	ta_expect_resp(
		&r, 400,
		"Failed to deserialize query string: missing field `path`");
	ta_ext_req(&ta_ag, "GET", "tree?maxEntries=5", NULL, NULL, NULL, 0, &r);
	ta_expect_resp(
		&r, 400,
		"Failed to deserialize query string: missing field `path`");
	/* a GET route: other methods are an empty 405 */
	ta_ext_req(&ta_ag, "POST", "tree?path=", "application/json", NULL, "{}",
		   2, &r);
	ta_expect_resp(&r, 405, "");
	ta_ext_req(&ta_ag, "PUT", "tree?path=", NULL, NULL, "x", 1, &r);
	ta_expect_resp(&r, 405, "");
	/* the credential is needed */
	ta_ext_expect_no_credential(&ta_ag, "tree?path=");
}
END_TEST

START_TEST(wire_tree_advertised_and_strict_v1)
{
	const char *args[] = {"--strict-v1", NULL};
	struct th_agent strict;
	struct th_resp r;

	/* version 2 of the extension is the one with tree */
	ta_health_get(&ta_ag, "", &r);
	ck_assert_ptr_nonnull(strstr(
		r.body.data, ",\"extensions\":{\"files\":4,\"maxWrite\":"));
	th_resp_cleanup(&r);

	th_agent_start(&strict, args, true);
	ta_ext_expect_no_route(&strict, "tree?path=&maxEntries=5", "{}");
	th_agent_stop(&strict);
}
END_TEST

void agent_ext_tree_cases(Suite *s)
{
	TCASE_TABLE(s, "tree", ta_agent_setup, ta_agent_teardown, 120,
		    wire_tree_whole, wire_tree_budget, wire_tree_symlinks,
		    wire_tree_unreadable_left_out, wire_tree_errors,
		    wire_tree_advertised_and_strict_v1);
	/* its own agent, started and stopped by the test */
	TCASE_TABLE(s, "tree_budget_end", NULL, NULL, 120,
		    wire_tree_stops_at_first_misfit);
}
