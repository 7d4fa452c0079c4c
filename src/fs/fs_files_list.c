/* SPDX-License-Identifier: MIT */
/*
 * fs_files_list: listings of files/ through the file extension
 * (fs_files_i.h): from the cache when fresh, else a subtree in one answer
 * (GET tree), else page by page (GET list); what comes back is
 * remembered, each directory's listing whole (doc/internals/cache.md).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/agent_client.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "common/strv.h"
#include "fs/cache.h"
#include "fs/fs_files_i.h"
#include "fs/fs_i.h"
#include "fs/prefetch.h"
#include "fs/readahead.h"
#include "fs/wnodes.h"

#define LIST_PAGE 4096
/* The largest listing remembered (SEMANTICS.md, memory). */
#define LISTING_KEEP_MAX 16384

/* Remember one directory's whole listing: its entries' attributes and
 * its names. */
static void remember_listing(struct sbx *sb, const char *dir,
			     const struct proto_dirent *ents, size_t n,
			     uint64_t mark)
{
	const char **names = xcalloc(n + 1, sizeof(*names));
	enum proto_ftype *types = xcalloc(n + 1, sizeof(*types));
	size_t i;

	for (i = 0; i < n; i++) {
		char *child = path_join(dir, ents[i].name);

		cache_put_seen(sb->fs->cache, sb->id, child, &ents[i].attr,
			       ents[i].target, mark);
		free(child);
		names[i] = ents[i].name;
		types[i] = ents[i].attr.type;
	}
	cache_dir_put_seen(sb->fs->cache, sb->id, dir, names, types, n, mark);
	free(names);
	free(types);
}

struct names {
	char **v;
	size_t n, cap;
};

static void collect_name(void *ud, const char *name, enum proto_ftype type)
{
	struct names *nm = ud;

	(void)type;
	if (nm->n == nm->cap) {
		nm->cap = nm->cap ? nm->cap * 2 : 64;
		nm->v = xrealloc(nm->v, nm->cap * sizeof(*nm->v));
	}
	nm->v[nm->n++] = xstrdup(name);
}

static void names_free(struct names *nm)
{
	strv_free(nm->v, nm->n);
	memset(nm, 0, sizeof(*nm));
}

/*
 * Fill from the cached listing of rel when it and every child's attributes
 * are fresh. Returns 1 when filled, 0 when the caller must ask the agent.
 */
static int readdir_cached(struct sbx *sb, const char *rel, void *buf,
			  fuse_fill_dir_t filler)
{
	struct names nm = {NULL, 0, 0};
	struct proto_attr *attrs;
	char **targets;
	size_t i;
	int filled = 0;

	if (!cache_dir_each(sb->fs->cache, sb->id, rel, collect_name, &nm))
		return 0;
	attrs = xcalloc(nm.n + 1, sizeof(*attrs));
	targets = xcalloc(nm.n + 1, sizeof(*targets));
	for (i = 0; i < nm.n; i++) {
		char *child = path_join(rel, nm.v[i]);
		bool ok = cache_get(sb->fs->cache, sb->id, child, &attrs[i],
				    NULL);

		free(child);
		if (!ok)
			goto out;
	}
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	for (i = 0; i < nm.n; i++) {
		struct stat st;

		sbfs_attr_to_stat(sb, &attrs[i], &st);
		if (filler(buf, nm.v[i], &st, 0, FUSE_FILL_DIR_PLUS))
			break;
	}
	filled = 1;
out:
	free(attrs);
	free(targets);
	names_free(&nm);
	return filled;
}

/* Walkers (find, ls -R, rsync, grep -r) list a directory right after its
 * parent: then a larger subtree is worth one answer. */
#define TREE_BUDGET_FIRST 2048
#define TREE_BUDGET_WALK 16384

/* Ask for rel's subtree; remember every listing in the answer. Returns 1
 * when rel's own listing came with it, 0 when it did not (too large), or
 * a negative errno. */
static int fetch_tree(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];
	struct proto_tree tree;
	struct sbx_error err;
	unsigned budget = TREE_BUDGET_FIRST;
	uint64_t mark;
	bool present = false;
	size_t i;
	int rc, have = 0;

	if (*rel != '\0') {
		const char *name = path_parent(rel, parent, sizeof(parent));

		if (cache_dir_lookup(sb->fs->cache, sb->id, parent, name,
				     &present) &&
		    present)
			budget = TREE_BUDGET_WALK;
	}
	memset(&tree, 0, sizeof(tree));
	sbx_error_clear(&err);
	mark = cache_mark(sb->fs->cache);
	rc = ac_tree(sb->fs->t, sb->id, rel, budget, &tree, &err);
	if (rc < 0)
		return files_fail(sb, "list", rel, &err);
	for (i = 0; i < tree.ndirs; i++) {
		struct proto_tree_dir *d = &tree.dirs[i];
		char *dir = *d->path == '\0' ? xstrdup(rel)
					     : path_join(rel, d->path);

		remember_listing(sb, dir, d->entries, d->n, mark);
		if (*d->path == '\0')
			have = 1;
		free(dir);
	}
	proto_tree_cleanup(&tree);
	return have;
}

int files_readdir(struct sbx *sb, const char *rel, void *buf,
		  fuse_fill_dir_t filler, off_t off, struct fuse_file_info *fi,
		  enum fuse_readdir_flags fl)
{
	struct proto_list page;
	struct sbx_error err;
	struct proto_dirent *all = NULL;
	size_t nall = 0, capall = 0, i;
	char *cursor = NULL;
	uint64_t mark;
	int rc = 0;

	(void)off;
	(void)fi;
	(void)fl;
	/* The agent lists what it has, and a listing of rel may bring those
	 * of the directories below it: files made here and not created yet,
	 * and gathered bytes, go first (their names and sizes show in the
	 * entries, and no listing kept here loses them). */
	files_flush_tree(sb, rel);
	if (sb->ext_contents)
		prefetch_listed(sb->fs, sb->id, rel);
	if (readdir_cached(sb, rel, buf, filler))
		return 0;
	if (sb->ext_tree) {
		rc = fetch_tree(sb, rel);
		if (rc < 0)
			return rc;
		if (rc == 1 && readdir_cached(sb, rel, buf, filler))
			return 0;
	}
	/* A directory too large for one answer: page through it. */
	mark = cache_mark(sb->fs->cache);
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	for (;;) {
		memset(&page, 0, sizeof(page));
		sbx_error_clear(&err);
		rc = ac_list(sb->fs->t, sb->id, rel, cursor, LIST_PAGE, &page,
			     &err);
		free(cursor);
		cursor = NULL;
		if (rc < 0) {
			rc = files_fail(sb, "list", rel, &err);
			break;
		}
		for (i = 0; i < page.n; i++) {
			struct proto_dirent *d = &page.entries[i];
			struct stat st;

			sbfs_attr_to_stat(sb, &d->attr, &st);
			filler(buf, d->name, &st, 0, FUSE_FILL_DIR_PLUS);
			if (nall == LISTING_KEEP_MAX) {
				/* Too large to remember: the kernel keeps
				 * what it was given, and holding it here
				 * too would only double the memory. */
				proto_dirents_free(all, nall);
				all = NULL;
				capall = 0;
				nall = LISTING_KEEP_MAX + 1;
			}
			if (nall > LISTING_KEEP_MAX)
				continue;
			if (nall == capall) {
				capall = capall ? capall * 2 : 256;
				all = xrealloc(all, capall * sizeof(*all));
			}
			/* Keep the entry (ownership moves) for the cache. */
			all[nall++] = *d;
			memset(d, 0, sizeof(*d));
		}
		if (page.next != NULL)
			cursor = xstrdup(page.next);
		proto_list_cleanup(&page);
		if (cursor == NULL)
			break;
	}
	if (rc == 0 && nall <= LISTING_KEEP_MAX)
		remember_listing(sb, rel, all, nall, mark);
	if (all != NULL)
		proto_dirents_free(all, nall);
	return rc;
}
