/* SPDX-License-Identifier: MIT */
/*
 * fs_files: MOUNT/<sandbox>/files/ through the agent's file extension
 * (doc/protocol-ext.md).
 *
 * Consistency (SEMANTICS.md): close-to-open. An open of a file whose pages
 * the kernel may hold asks the agent for the file's validator and keeps
 * the pages only when it is unchanged; an open of a file never read through
 * this mount costs no round trip at all (the first read brings the data
 * and the validator). Attributes from listings and stats are reused for
 * the attribute timeout.
 *
 * Reads are exact (SEMANTICS.md): a read returns every byte asked for up
 * to the end of the file, or fails. What the readahead window and the
 * prefetched contents hold only saves requests; whatever they do not hold
 * is read directly, and bytes of two versions of a file are never mixed
 * in one answer.
 *
 * Writes are gathered per path into one extent (up to the agent's largest
 * write) and sent when the next write is not contiguous, when the extent is
 * full, at most write_window after its first byte, and at flush (close),
 * fsync and before any operation that must see them (stat, read, truncate,
 * rename). Bytes that could not be stored put every open file that was
 * open for writing at the time in error: its later writes, fsyncs and
 * close fail, so no program ends with a hole and a clean close.
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
#include <sys/statvfs.h>
#include <time.h>

#include "client/agent_client.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_i.h"
#include "fs/prefetch.h"
#include "fs/readahead.h"
#include "fs/wnodes.h"

#define LIST_PAGE 4096
/* The largest listing remembered (SEMANTICS.md, memory). */
#define LISTING_KEEP_MAX 16384
/* ---- per-path write state (wnodes.h) --------------------------------------- */

static struct sbx *owner_sb(const struct wnode *w)
{
	return (struct sbx *)(uintptr_t)w->owner;
}

static void path_changed(struct sbx *sb, const char *rel);

/*
 * A change through rel reached a file with other names (a link count over
 * one, in a of before or after the change): the other names' attributes
 * and pages are forgotten here and in the kernel, so that they show the
 * change at once. Each name is a file of its own to the kernel (the
 * path-based API), so this cannot be left to it.
 */
static void links_changed(struct sbx *sb, const char *rel,
			  const struct proto_attr *a)
{
	char **v = NULL;
	size_t i, n;

	if (a == NULL || a->nlink <= 1 || a->type == PROTO_FT_DIR)
		return;
	n = cache_forget_ino(sb->fs->cache, sb->id, a->ino, &v);
	for (i = 0; i < n; i++) {
		if (strcmp(v[i], rel) != 0) {
			path_changed(sb, v[i]);
			cache_forget_content(sb->fs->cache, sb->id, v[i]);
			sbfs_kernel_forget(sb->fs, sb->id, v[i]);
		}
		free(v[i]);
	}
	free(v);
}

/* Send w's extent (w->lock held). A failure is recorded as a loss: the
 * writers are told (handle_error), whoever caused the flush. */
static int wnode_flush_locked(struct sbx *sb, struct wnode *w)
{
	struct proto_attr a;
	struct sbx_error err;
	char *rel;
	int rc;

	if (!w->dirty)
		return 0;
	if (w->orphan) {
		buf_reset(&w->data);
		w->dirty = false;
		w->has_times = false;
		return 0;
	}
	rel = wnode_rel(w);
	sbx_error_clear(&err);
	rc = ac_write_range(sb->fs->t, sb->id, rel,
			    w->append ? UINT64_MAX : w->off, w->data.data,
			    w->data.len, w->mk_pending ? &w->mk : NULL,
			    w->has_times ? w->times : NULL, &a, &err);
	w->has_times = false;
	w->mk_pending = false;
	/* Either way the bytes are no longer ours to send again. */
	buf_reset(&w->data);
	w->dirty = false;
	wnode_changed(w);
	if (rc < 0) {
		rc = sbfs_fail(sb->fs, sb->id, "write", rel, &err);
		wnode_lost(w, rc);
	} else {
		links_changed(sb, rel, &a);
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	}
	free(rel);
	return rc;
}

/*
 * Flush the pending extent of a path, if a descriptor holds one, before an
 * operation that must see it. A failure is the writers' (recorded as a
 * loss), not this operation's: the operation goes on with what the agent
 * has.
 */
static void flush_path(struct sbx *sb, const char *rel)
{
	struct wnode *w = wnode_find(sb->fs->writes, sb, rel);

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->lock);
	(void)wnode_flush_locked(sb, w);
	pthread_mutex_unlock(&w->lock);
	wnode_put(w);
}

struct tree_pick {
	struct sbx *sb;
	const char *rel;
	size_t n;
};

/* Dirty, at or below rel ("" is the root). */
static bool pick_tree(const struct wnode *w, const void *arg)
{
	const struct tree_pick *t = arg;

	return w->owner == t->sb && w->dirty &&
	       (t->n == 0 || (strncmp(w->rel, t->rel, t->n) == 0 &&
			      (w->rel[t->n] == '\0' || w->rel[t->n] == '/')));
}

/* Pending bytes (a file not yet created among them), directly in dir. */
static bool pick_new_child(const struct wnode *w, const void *arg)
{
	const struct tree_pick *t = arg;
	const char *rest;

	if (w->owner != t->sb || !w->dirty || w->orphan)
		return false;
	if (t->n > 0 &&
	    (strncmp(w->rel, t->rel, t->n) != 0 || w->rel[t->n] != '/'))
		return false;
	rest = w->rel + (t->n > 0 ? t->n + 1 : 0);
	return strchr(rest, '/') == NULL;
}

/* Flush every pending extent at or below rel (before a rename or removal
 * of a directory). Failures are the writers' (see flush_path). */
static void flush_tree(struct sbx *sb, const char *rel)
{
	struct tree_pick t = {sb, rel, strlen(rel)};
	struct wnode **v;
	size_t i, n = wnodes_pick(sb->fs->writes, pick_tree, &t, &v);

	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&v[i]->lock);
		(void)wnode_flush_locked(sb, v[i]);
		pthread_mutex_unlock(&v[i]->lock);
	}
	wnodes_put(v, n);
}

/* Send what is gathered for the files directly in dir, creating those
 * this mount made and has not created yet: dir's own times and link count
 * are asked about, or its listing with its entries' sizes. */
static void flush_new_children(struct sbx *sb, const char *dir)
{
	struct tree_pick t = {sb, dir, strlen(dir)};
	struct wnode **v;
	size_t i, n = wnodes_pick(sb->fs->writes, pick_new_child, &t, &v);

	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&v[i]->lock);
		(void)wnode_flush_locked(sb, v[i]);
		pthread_mutex_unlock(&v[i]->lock);
	}
	wnodes_put(v, n);
}

/* Count a change to rel's bytes made through this mount without its
 * node's extent (truncate, rename over it). */
static void path_changed(struct sbx *sb, const char *rel)
{
	struct wnode *w = wnode_find(sb->fs->writes, sb, rel);

	if (w == NULL)
		return;
	wnode_changed(w);
	wnode_put(w);
}

int fs_files_flush_node(void *ctx, struct wnode *w)
{
	(void)ctx;
	return wnode_flush_locked(owner_sb(w), w);
}

/* ---- open files ------------------------------------------------------------ */

/* An open file. */
struct handle {
	struct sbx *sb;
	struct wnode *w;
	int flags;
	bool writer; /* open for writing */
	/* Guarded by w->lock: the losses seen when opened, and this open
	 * file's error once it has seen one (sticky until close). */
	unsigned err_seen;
	int err;
	pthread_mutex_t lock; /* guards everything below */
	unsigned gen; /* w->gen that the cached bytes below belong to */
	char etag[PROTO_ETAG_MAX]; /* the version of the bytes last read */
	struct ra_stream *ra; /* the readahead window, for readers */
	bool pf_tried; /* prefetched contents looked for */
	char *pf_data; /* the whole file, prefetched (else NULL) */
	size_t pf_len;
};

/* This open file's sticky error (w->lock held): 0, or the errno of bytes
 * it (or another writer of the file) lost since it was opened. Readers
 * are never in error. */
static int handle_error(struct handle *h)
{
	if (!h->writer)
		return 0;
	if (h->err == 0 && h->w->err_gen != h->err_seen)
		h->err = h->w->err < 0 ? h->w->err : -EIO;
	return h->err;
}

/* What the readahead workers need to fetch a chunk of the file. */
struct fetch_ctx {
	struct sbx *sb;
	struct wnode *w;
};

static int fetch_chunk(void *ctx, uint64_t off, size_t len,
		       const char *if_match, void *dst, size_t *got, char *etag,
		       uint64_t *size)
{
	struct fetch_ctx *fc = ctx;
	struct sbx_error err;
	char *rel = wnode_rel(fc->w);
	int rc;

	sbx_error_clear(&err);
	rc = ac_read_range(fc->sb->fs->t, fc->sb->id, rel, off, len, if_match,
			   dst, got, etag, size, &err);
	/* The reader's own read meets a lasting error and reports it. */
	if (rc < 0)
		log_debug("sandbox %s: readahead of %s at %llu: %s", fc->sb->id,
			  rel, (unsigned long long)off, err.reason);
	free(rel);
	return rc < 0 ? sbx_error_errno(&err) : 0;
}

static void fetch_ctx_free(void *ctx)
{
	struct fetch_ctx *fc = ctx;

	wnode_put(fc->w);
	free(fc);
}

static struct handle *handle_new(struct sbx *sb, const char *rel, int flags)
{
	struct handle *h = xcalloc(1, sizeof(*h));

	h->sb = sb;
	h->w = wnode_get(sb->fs->writes, sb, rel);
	h->flags = flags;
	h->writer = (flags & O_ACCMODE) != O_RDONLY;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_lock(&h->w->lock);
	h->w->opens++;
	h->err_seen = h->w->err_gen;
	h->gen = atomic_load(&h->w->gen);
	pthread_mutex_unlock(&h->w->lock);
	if ((flags & O_ACCMODE) != O_WRONLY) {
		struct fetch_ctx *fc = xcalloc(1, sizeof(*fc));

		fc->sb = sb;
		fc->w = wnode_get(sb->fs->writes, sb, rel);
		h->ra = ra_stream_new(sb->fs->ra, fetch_chunk, fetch_ctx_free,
				      fc);
	}
	return h;
}

static void handle_free(struct handle *h)
{
	ra_stream_close(h->ra);
	free(h->pf_data);
	wnode_put(h->w);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static void handle_close(struct handle *h)
{
	pthread_mutex_lock(&h->w->lock);
	h->w->opens--;
	pthread_mutex_unlock(&h->w->lock);
	handle_free(h);
}

/* Drop what h holds of the file's bytes when the file changed through
 * this mount since it was read (h->lock held). */
static void handle_sync(struct handle *h)
{
	unsigned gen = atomic_load(&h->w->gen);

	if (gen == h->gen)
		return;
	h->gen = gen;
	free(h->pf_data);
	h->pf_data = NULL;
	h->pf_len = 0;
	h->etag[0] = '\0';
	if (h->ra != NULL)
		ra_invalidate(h->ra);
}

/* ---- helpers -------------------------------------------------------------- */

static struct handle *fh(struct fuse_file_info *fi)
{
	return fi != NULL ? (struct handle *)(uintptr_t)fi->fh : NULL;
}

static int fail(struct sbx *sb, const char *op, const char *rel,
		const struct sbx_error *err)
{
	return sbfs_fail(sb->fs, sb->id, op, rel, err);
}

/*
 * Keep the parent's cached listing in step with a change this mount made
 * (a no-op when the parent has no listing cached).
 */
static void listing_add(struct sbx *sb, const char *rel, enum proto_ftype t)
{
	char parent[PATH_MAX_BYTES + 1];
	const char *name = path_parent(rel, parent, sizeof(parent));

	cache_dir_add(sb->fs->cache, sb->id, parent, name, t);
	/* The directory's own times and link count moved: its next stat
	 * asks the agent. */
	cache_touch(sb->fs->cache, sb->id, parent);
}

static void listing_remove(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];
	const char *name = path_parent(rel, parent, sizeof(parent));

	cache_dir_remove(sb->fs->cache, sb->id, parent, name);
	cache_touch(sb->fs->cache, sb->id, parent);
}

static void listing_forget_parent(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];

	path_parent(rel, parent, sizeof(parent));
	cache_dir_forget(sb->fs->cache, sb->id, parent);
	cache_touch(sb->fs->cache, sb->id, parent);
}

/* A name the parent's fresh listing does not hold does not exist (as
 * fresh as any cached attribute): no round trip for it. */
static bool listed_absent(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];
	const char *name;
	bool present = true;

	if (*rel == '\0')
		return false;
	name = path_parent(rel, parent, sizeof(parent));
	return cache_dir_lookup(sb->fs->cache, sb->id, parent, name,
				&present) &&
	       !present;
}

static int stat_remote(struct sbx *sb, const char *rel, struct proto_attr *a)
{
	uint64_t mark = cache_mark(sb->fs->cache);
	struct sbx_error err;
	char *target = NULL;
	int rc;

	sbx_error_clear(&err);
	rc = ac_stat(sb->fs->t, sb->id, rel, a, &target, &err);
	if (rc < 0) {
		if (sbx_error_errno(&err) == -ENOENT)
			cache_forget(sb->fs->cache, sb->id, rel);
		return fail(sb, "stat", rel, &err);
	}
	cache_put_seen(sb->fs->cache, sb->id, rel, a, target, mark);
	free(target);
	return 0;
}

static int ext_op(struct sbx *sb, const char *op, const char *rel,
		  struct proto_ext_req *req, struct proto_attr *a)
{
	struct sbx_error err;
	int rc;

	if (sb->fs->o.ro)
		return -EROFS;
	sbx_error_clear(&err);
	rc = ac_ext_op(sb->fs->t, sb->id, op, req, a, &err);
	if (rc < 0) {
		rc = fail(sb, op, rel, &err);
		/* The agent knows better than our listing. */
		if (rc == -EEXIST || rc == -ENOENT)
			listing_forget_parent(sb, rel);
		return rc;
	}
	return 0;
}

/* Show a mode that waits for the last close as the file's mode. */
static void pending_mode(struct sbx *sb, const char *rel, struct proto_attr *a)
{
	struct wnode *w = wnode_find(sb->fs->writes, sb, rel);

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->has_final_mode)
		a->perm = w->final_mode;
	pthread_mutex_unlock(&w->lock);
	wnode_put(w);
}

/* Apply a deferred mode (w->lock held, after the last flush). */
static int apply_final_mode(struct sbx *sb, struct wnode *w)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	char *rel;

	if (!w->has_final_mode)
		return 0;
	w->has_final_mode = false;
	rel = wnode_rel(w);
	memset(&req, 0, sizeof(req));
	req.path = rel;
	req.has_mode = true;
	req.mode = w->final_mode;
	rc = ext_op(sb, "chmod", rel, &req, &a);
	if (rc == 0)
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	free(rel);
	return rc;
}

/*
 * The attributes of a file not created yet (libfuse asks right after the
 * create and after each setattr): known here, so asking must not create it
 * ahead of its bytes.
 */
static bool pending_attr(struct sbx *sb, const char *rel, struct proto_attr *a)
{
	struct wnode *w = wnode_find(sb->fs->writes, sb, rel);
	bool known = false;
	struct timespec now;
	uint64_t end;
	int i;

	if (w == NULL)
		return false;
	pthread_mutex_lock(&w->lock);
	if (w->mk_pending) {
		/* Its one extent starts at 0: a write anywhere else has
		 * created it already. */
		*a = w->planned;
		end = (w->append ? 0 : w->off) + w->data.len;
		a->size = end;
		a->blocks = (end + 511) / 512;
		if (w->has_final_mode)
			a->perm = w->final_mode;
		clock_gettime(CLOCK_REALTIME, &now);
		for (i = 0; w->has_times && i < 2; i++) {
			int64_t *sec = i == 0 ? &a->atime : &a->mtime;
			uint32_t *ns = i == 0 ? &a->atime_ns : &a->mtime_ns;

			if (w->times[i].how == PROTO_TIME_SET) {
				*sec = w->times[i].sec;
				*ns = w->times[i].nsec;
			} else if (w->times[i].how == PROTO_TIME_NOW) {
				*sec = now.tv_sec;
				*ns = (uint32_t)now.tv_nsec;
			}
		}
		known = true;
	}
	pthread_mutex_unlock(&w->lock);
	wnode_put(w);
	return known;
}

/* ---- the operations -------------------------------------------------------- */

static int files_getattr(struct sbx *sb, const char *rel, struct stat *st,
			 struct fuse_file_info *fi)
{
	struct proto_attr a;
	int rc;

	(void)fi;
	if (pending_attr(sb, rel, &a)) {
		sbfs_attr_to_stat(sb, &a, st);
		return 0;
	}
	flush_path(sb, rel);
	if (!cache_get(sb->fs->cache, sb->id, rel, &a, NULL)) {
		if (listed_absent(sb, rel))
			return -ENOENT;
		/* A directory's times and links count the files this mount
		 * made in it. */
		flush_new_children(sb, rel);
		rc = stat_remote(sb, rel, &a);
		if (rc < 0)
			return rc;
	}
	pending_mode(sb, rel, &a);
	sbfs_attr_to_stat(sb, &a, st);
	return 0;
}

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
	size_t i;

	for (i = 0; i < nm->n; i++)
		free(nm->v[i]);
	free(nm->v);
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
		return fail(sb, "list", rel, &err);
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

static void free_dirents(struct proto_dirent *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].target);
	}
	free(v);
}

static int files_readdir(struct sbx *sb, const char *rel, void *buf,
			 fuse_fill_dir_t filler, off_t off,
			 struct fuse_file_info *fi, enum fuse_readdir_flags fl)
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
	flush_tree(sb, rel);
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
			rc = fail(sb, "list", rel, &err);
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
				free_dirents(all, nall);
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
		free_dirents(all, nall);
	return rc;
}

/* Decide whether the kernel may keep pages of rel (close-to-open). */
static int revalidate(struct sbx *sb, const char *rel, struct handle *h,
		      struct fuse_file_info *fi)
{
	char cached[PROTO_ETAG_MAX], now[PROTO_ETAG_MAX];
	struct proto_attr a;
	int rc;

	fi->keep_cache = 0;
	if (!cache_get_content(sb->fs->cache, sb->id, rel, cached))
		return 0;
	/* The sandbox tells its changes, and every change it had told when
	 * it last answered is applied: a change of the contents would have
	 * forgotten the validator (doc/internals/cache.md). */
	if (sbfs_events_caught_up(sb, SBFS_EVENTS_CATCH_UP_MS)) {
		fi->keep_cache = 1;
		snprintf(h->etag, sizeof(h->etag), "%s", cached);
		return 0;
	}
	rc = stat_remote(sb, rel, &a);
	if (rc < 0)
		return rc;
	proto_attr_etag(&a, now);
	if (strcmp(now, cached) == 0) {
		fi->keep_cache = 1;
		snprintf(h->etag, sizeof(h->etag), "%s", now);
		if (h->ra != NULL)
			ra_observe(h->ra, now, a.size);
	} else {
		cache_forget_content(sb->fs->cache, sb->id, rel);
	}
	return 0;
}

static int files_open(struct sbx *sb, const char *rel,
		      struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	struct handle *h;
	int rc;

	if (sb->fs->o.ro && (acc != O_RDONLY || (fi->flags & O_TRUNC)))
		return -EROFS;
	/* Close-to-open: a new descriptor sees what the open ones wrote
	 * (and a file this mount has not created yet comes into being). */
	flush_path(sb, rel);
	{
		struct proto_attr a;

		if (cache_get_access(sb->fs->cache, sb->id, rel, &a)) {
			/* FIFOs, sockets and devices of the sandbox cannot be
			 * opened from the host: refused here, never blocking
			 * (SEMANTICS.md). */
			if (a.type != PROTO_FT_FILE)
				return -ENXIO;
			/* Writes go to the agent later, by path: refuse now
			 * what they would be refused then (no write bit for
			 * anyone), as open(2) would. */
			if (acc != O_RDONLY && (a.perm & 0222) == 0)
				return -EACCES;
		}
	}
	if (fi->flags & O_TRUNC) {
		struct proto_ext_req req;
		struct proto_attr a;

		memset(&req, 0, sizeof(req));
		req.path = (char *)rel;
		req.has_size = true;
		req.size = 0;
		rc = ext_op(sb, "truncate", rel, &req, &a);
		path_changed(sb, rel);
		if (rc < 0)
			return rc;
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
		cache_forget_content(sb->fs->cache, sb->id, rel);
		fi->keep_cache = 0;
		h = handle_new(sb, rel, fi->flags);
	} else {
		h = handle_new(sb, rel, fi->flags);
		rc = revalidate(sb, rel, h, fi);
		if (rc < 0)
			goto fail;
		/* Pages the kernel keeps need no contents: nothing to
		 * read ahead for them. */
		if (acc == O_RDONLY && sb->ext_contents && !fi->keep_cache)
			prefetch_opened(sb->fs, sb->id, rel);
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
fail:
	handle_close(h);
	return rc;
}

/*
 * Attributes for a file this mount is about to create: what the agent will
 * report, as far as it is known here (the owner is the parent's). The
 * agent's own arrive with the first upload.
 */
static void planned_attr(struct sbx *sb, const char *rel, uint32_t perm,
			 struct proto_attr *a)
{
	char parent[PATH_MAX_BYTES + 1];
	struct proto_attr pa;
	struct timespec now;

	memset(a, 0, sizeof(*a));
	a->type = PROTO_FT_FILE;
	a->perm = perm;
	a->nlink = 1;
	a->uid = (uint32_t)sb->fs->uid;
	a->gid = (uint32_t)sb->fs->gid;
	path_parent(rel, parent, sizeof(parent));
	if (cache_get_access(sb->fs->cache, sb->id, parent, &pa)) {
		a->uid = pa.uid;
		a->gid = pa.gid;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	a->atime = a->mtime = a->ctime = now.tv_sec;
	a->atime_ns = a->mtime_ns = a->ctime_ns = (uint32_t)now.tv_nsec;
}

/*
 * May the agent make a name in rel's parent? From the parent's cached mode
 * and owner and whom the agent's file routes act as (its health); false
 * when either is unknown, and then the create is asked for at once, so
 * that a refusal comes back from open(2) with its errno.
 */
static bool parent_writable(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];
	struct proto_attr pa;
	uint32_t bits;

	if (!sb->health.ext_has_ids)
		return false;
	path_parent(rel, parent, sizeof(parent));
	if (!cache_get_access(sb->fs->cache, sb->id, parent, &pa) ||
	    pa.type != PROTO_FT_DIR)
		return false;
	if (sb->health.ext_uid == 0 || sb->health.ext_owner_access)
		return true;
	if (pa.uid == sb->health.ext_uid)
		bits = pa.perm >> 6;
	else if (pa.gid == sb->health.ext_gid)
		bits = pa.perm >> 3;
	else
		bits = pa.perm;
	return (bits & 03) == 03;
}

static int files_create(struct sbx *sb, const char *rel, mode_t mode,
			struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	struct proto_attr a;
	struct handle *h;
	int rc = 0;

	bool deferred = (mode & 0200) == 0;
	/* A name the parent's listing does not hold, in a directory the
	 * agent may write, is created with its first upload, at the latest
	 * when it is closed: a new file costs one request, not two. */
	bool later = sb->ext_create_write && !sb->fs->o.ro &&
		     listed_absent(sb, rel) && parent_writable(sb, rel);

	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	req.has_mode = true;
	/* The agent opens the path for every write: a file created without
	 * owner write (git's objects, cp of read-only files) is created
	 * writable and gets its mode when the last descriptor closes. */
	req.mode = (mode & 07777) | (deferred ? 0600 : 0);
	req.exclusive = (fi->flags & O_EXCL) != 0;
	req.truncate = (fi->flags & O_TRUNC) != 0;
	if (later)
		planned_attr(sb, rel, req.mode, &a);
	else
		rc = ext_op(sb, "create", rel, &req, &a);
	if (rc < 0)
		return rc;
	if (req.truncate)
		path_changed(sb, rel);
	h = handle_new(sb, rel, fi->flags);
	pthread_mutex_lock(&h->w->lock);
	if (later) {
		h->w->mk_pending = true;
		h->w->mk.mode = req.mode;
		h->w->mk.exclusive = req.exclusive;
		h->w->planned = a;
		wnode_dirtied(h->w);
		h->w->off = 0;
		h->w->append = (fi->flags & O_APPEND) != 0;
	}
	if (deferred) {
		h->w->has_final_mode = true;
		h->w->final_mode = mode & 07777;
		a.perm = mode & 07777;
	}
	pthread_mutex_unlock(&h->w->lock);
	cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	cache_forget_content(sb->fs->cache, sb->id, rel);
	listing_add(sb, rel, PROTO_FT_FILE);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 0;
	return 0;
}

/* One ranged read of the agent's file: *got bytes (fewer than size only
 * at the end of the file), their version and the file's size. */
static int read_direct(struct sbx *sb, const char *rel, char *buf, size_t size,
		       uint64_t off, size_t *got, char *etag, uint64_t *full)
{
	struct sbx_error err;
	int rc;

	sbx_error_clear(&err);
	etag[0] = '\0';
	*full = UINT64_MAX;
	*got = 0;
	rc = ac_read_range(sb->fs->t, sb->id, rel, off, size, NULL, buf, got,
			   etag, full, &err);
	if (rc < 0)
		return fail(sb, "read", rel, &err);
	return 0;
}

/*
 * Serve a read from contents read ahead with the file's directory, when
 * there are some (the whole file, of one version): -EAGAIN when not (the
 * read goes on as usual). h->lock held.
 */
static int read_prefetched(struct sbx *sb, struct handle *h, const char *rel,
			   char *buf, size_t size, uint64_t off)
{
	char etag[PROTO_ETAG_MAX];
	char *data = NULL;
	size_t len = 0, n;

	if (!h->pf_tried && !(h->flags & O_TRUNC) &&
	    (h->flags & O_ACCMODE) == O_RDONLY && sb->ext_contents) {
		h->pf_tried = true;
		if (prefetch_take(sb->fs, sb->id, rel, &data, &len, etag)) {
			h->pf_data = data;
			h->pf_len = len;
			snprintf(h->etag, sizeof(h->etag), "%s", etag);
		}
	}
	h->pf_tried = true;
	if (h->pf_data == NULL)
		return -EAGAIN;
	if (off + size > h->pf_len) {
		struct proto_attr a;
		char now[PROTO_ETAG_MAX];

		/* Up to the body's end, or past it: that end is the file's
		 * only while the mount still holds the body's version (a
		 * file that grew since, as under tail -f, is read from the
		 * agent, exactly). */
		if (cache_get(sb->fs->cache, sb->id, rel, &a, NULL))
			proto_attr_etag(&a, now);
		else
			now[0] = '\0';
		if (strcmp(now, h->etag) != 0) {
			free(h->pf_data);
			h->pf_data = NULL;
			h->pf_len = 0;
			return -EAGAIN;
		}
		if (off >= h->pf_len)
			return 0;
	}
	n = h->pf_len - (size_t)off;
	if (n > size)
		n = size;
	memcpy(buf, h->pf_data + off, n);
	return (int)n;
}

/*
 * Read [off, off + size) exactly: what the readahead window holds of its
 * start, the rest directly, both of one version of the file. h->lock is
 * not held (readers of one file read in parallel).
 */
static int read_exact(struct sbx *sb, struct handle *h, const char *rel,
		      char *buf, size_t size, uint64_t off, char *etag)
{
	char dtag[PROTO_ETAG_MAX];
	uint64_t full;
	size_t done = 0, got;
	bool eof = false;
	int rc;

	etag[0] = '\0';
	if (h->ra != NULL)
		done = ra_read(h->ra, buf, size, off, &eof, etag);
	if (eof || done == size)
		return (int)done;
	rc = read_direct(sb, rel, buf + done, size - done, off + done, &got,
			 dtag, &full);
	if (rc < 0)
		return rc;
	if (done > 0 && strcmp(etag, dtag) != 0) {
		/* The file changed between the window's bytes and these:
		 * one answer for the whole range instead. */
		done = 0;
		rc = read_direct(sb, rel, buf, size, off, &got, dtag, &full);
		if (rc < 0)
			return rc;
	}
	if (h->ra != NULL)
		ra_observe(h->ra, dtag, full);
	snprintf(etag, PROTO_ETAG_MAX, "%s", dtag);
	return (int)(done + got);
}

static int files_read(struct sbx *sb, const char *rel, char *buf, size_t size,
		      off_t off, struct fuse_file_info *fi)
{
	struct handle *h = fh(fi);
	char etag[PROTO_ETAG_MAX];
	int rc;

	if (h == NULL)
		return -EBADF;
	if (off < 0)
		return -EINVAL;
	if (size > INT_MAX)
		size = INT_MAX;
	/* A reader sees its own writes. */
	flush_path(sb, rel);
	pthread_mutex_lock(&h->lock);
	handle_sync(h);
	rc = read_prefetched(sb, h, rel, buf, size, (uint64_t)off);
	if (rc != -EAGAIN)
		snprintf(etag, sizeof(etag), "%s", h->etag);
	pthread_mutex_unlock(&h->lock);
	if (rc == -EAGAIN)
		rc = read_exact(sb, h, rel, buf, size, (uint64_t)off, etag);
	if (rc >= 0 && etag[0] != '\0') {
		pthread_mutex_lock(&h->lock);
		snprintf(h->etag, sizeof(h->etag), "%s", etag);
		pthread_mutex_unlock(&h->lock);
		cache_set_content(sb->fs->cache, sb->id, rel, etag);
	}
	return rc;
}

static int files_write(struct sbx *sb, const char *rel, const char *buf,
		       size_t size, off_t off, struct fuse_file_info *fi)
{
	struct handle *h = fh(fi);
	struct proto_attr la;
	struct wnode *w;
	size_t max;
	bool append, linked;
	int rc = 0;

	if (h == NULL)
		return -EBADF;
	if (sb->fs->o.ro)
		return -EROFS;
	if (size > INT_MAX)
		return -EINVAL;
	w = h->w;
	/* The kernel writing back mapped pages writes them where they are,
	 * whatever the descriptor's O_APPEND. */
	append = (h->flags & O_APPEND) != 0 && !fi->writepage;
	max = sb->ext_max_write > 0 && sb->ext_max_write < WNODE_EXTENT_MAX
		      ? (size_t)sb->ext_max_write
		      : WNODE_EXTENT_MAX;
	linked = cache_get_access(sb->fs->cache, sb->id, rel, &la) &&
		 la.nlink > 1 && la.type == PROTO_FT_FILE;
	pthread_mutex_lock(&w->lock);
	/* No write succeeds past bytes this open file lost. */
	rc = handle_error(h);
	if (rc < 0)
		goto out;
	if (w->dirty && (w->has_times || w->append != append ||
			 (!append && (uint64_t)off != w->off + w->data.len) ||
			 w->data.len + size > max)) {
		(void)wnode_flush_locked(sb, w);
		rc = handle_error(h);
		if (rc < 0)
			goto out;
	}
	if (!w->dirty) {
		w->off = (uint64_t)off;
		w->append = append;
	}
	if (size > max) {
		/* Larger than an extent: send it as it comes. */
		struct proto_attr a;
		struct sbx_error err;

		sbx_error_clear(&err);
		rc = ac_write_range(sb->fs->t, sb->id, rel,
				    append ? UINT64_MAX : (uint64_t)off, buf,
				    size, NULL, NULL, &a, &err);
		wnode_changed(w);
		if (rc < 0) {
			rc = fail(sb, "write", rel, &err);
			wnode_lost(w, rc);
			rc = handle_error(h);
			goto out;
		}
		links_changed(sb, rel, &a);
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
		rc = (int)size;
		goto out;
	}
	rc = buf_append(&w->data, buf, size);
	if (rc < 0)
		goto out;
	wnode_dirtied(w);
	wnode_changed(w);
	rc = (int)size;
	/* Our own pages and attributes are about to change. */
	cache_forget(sb->fs->cache, sb->id, rel);
	if (linked || sb->fs->o.write_window_ms == 0) {
		/* A file with other names is written through at once: a
		 * reader of another name flushes only that name. So is
		 * every file with no gathering window. */
		(void)wnode_flush_locked(sb, w);
		rc = handle_error(h);
		if (rc == 0)
			rc = (int)size;
	}
out:
	pthread_mutex_unlock(&w->lock);
	if (rc > 0)
		cache_forget_content(sb->fs->cache, sb->id, rel);
	return rc;
}

/* Send the file's gathered bytes; then this open file's sticky error. */
static int flush_handle(struct sbx *sb, struct handle *h)
{
	int rc;

	pthread_mutex_lock(&h->w->lock);
	(void)wnode_flush_locked(sb, h->w);
	rc = handle_error(h);
	pthread_mutex_unlock(&h->w->lock);
	return rc;
}

static int files_flush(struct sbx *sb, const char *rel,
		       struct fuse_file_info *fi)
{
	struct handle *h = fh(fi);

	if (h == NULL) {
		flush_path(sb, rel);
		return 0;
	}
	return flush_handle(sb, h);
}

static int files_release(struct sbx *sb, const char *rel,
			 struct fuse_file_info *fi)
{
	struct handle *h = fh(fi);
	int rc;

	if (h == NULL)
		return 0;
	(void)rel;
	pthread_mutex_lock(&h->w->lock);
	(void)wnode_flush_locked(sb, h->w);
	rc = handle_error(h);
	if (h->w->opens == 1) {
		int mrc = apply_final_mode(sb, h->w);

		if (rc == 0)
			rc = mrc;
	}
	pthread_mutex_unlock(&h->w->lock);
	handle_close(h);
	fi->fh = 0;
	return rc;
}

static int files_fsync(struct sbx *sb, const char *rel, int datasync,
		       struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	struct handle *h = fh(fi);
	int rc;

	(void)datasync;
	if (h != NULL) {
		rc = flush_handle(sb, h);
		if (rc < 0)
			return rc;
	} else {
		flush_path(sb, rel);
	}
	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	return ext_op(sb, "fsync", rel, &req, NULL);
}

static int files_mkdir(struct sbx *sb, const char *rel, mode_t mode)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	req.has_mode = true;
	req.mode = mode & 07777;
	rc = ext_op(sb, "mkdir", rel, &req, &a);
	if (rc == 0) {
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
		listing_add(sb, rel, PROTO_FT_DIR);
		/* Just made: its listing is known to be empty. */
		cache_dir_put(sb->fs->cache, sb->id, rel, NULL, NULL, 0);
	}
	return rc;
}

static int files_unlink(struct sbx *sb, const char *rel)
{
	struct proto_ext_req req;
	struct proto_attr before;
	struct wnode *w;
	bool never_made = false, known;
	int rc;

	known = cache_get_access(sb->fs->cache, sb->id, rel, &before);
	/* Pending bytes of a removed file would only recreate it (or fail):
	 * descriptors still open write into nothing, as on a local file. */
	w = wnode_find(sb->fs->writes, sb, rel);
	if (w != NULL) {
		pthread_mutex_lock(&w->lock);
		never_made = w->mk_pending;
		w->mk_pending = false;
		wnode_orphan(w);
		buf_reset(&w->data);
		w->dirty = false;
		w->has_times = false;
		w->has_final_mode = false;
		wnode_changed(w);
		pthread_mutex_unlock(&w->lock);
		wnode_put(w);
	}
	if (never_made) {
		rc = 0;
	} else {
		memset(&req, 0, sizeof(req));
		req.path = (char *)rel;
		rc = ext_op(sb, "unlink", rel, &req, NULL);
	}
	if (rc == 0 && known)
		links_changed(sb, rel, &before);
	if (rc == 0)
		listing_remove(sb, rel);
	cache_forget(sb->fs->cache, sb->id, rel);
	cache_forget_content(sb->fs->cache, sb->id, rel);
	return rc;
}

static int files_rmdir(struct sbx *sb, const char *rel)
{
	struct proto_ext_req req;
	int rc;

	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	rc = ext_op(sb, "rmdir", rel, &req, NULL);
	if (rc == 0)
		listing_remove(sb, rel);
	cache_forget_tree(sb->fs->cache, sb->id, rel);
	return rc;
}

static int files_rename(struct sbx *sb, const char *from, const char *to,
			unsigned int flags)
{
	struct proto_ext_req req;
	int rc;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	flush_tree(sb, from);
	flush_tree(sb, to);
	memset(&req, 0, sizeof(req));
	req.path = (char *)from;
	req.to = (char *)to;
	req.noreplace = (flags & RENAME_NOREPLACE) != 0;
	req.exchange = (flags & RENAME_EXCHANGE) != 0;
	rc = ext_op(sb, "rename", from, &req, NULL);
	if (rc == 0) {
		struct proto_attr a;
		enum proto_ftype t = PROTO_FT_UNKNOWN;

		if (cache_get(sb->fs->cache, sb->id, from, &a, NULL))
			t = a.type;
		if (req.exchange || t == PROTO_FT_UNKNOWN) {
			listing_forget_parent(sb, from);
			listing_forget_parent(sb, to);
		} else {
			listing_remove(sb, from);
			listing_add(sb, to, t);
		}
	}
	cache_forget_tree(sb->fs->cache, sb->id, from);
	cache_forget_tree(sb->fs->cache, sb->id, to);
	if (rc == 0) {
		/* What was at `to` is replaced (or swapped): open files of
		 * either name read afresh. */
		path_changed(sb, to);
		path_changed(sb, from);
		if (req.exchange) {
			/* "\001" never starts a path component. */
			wnodes_rekey(sb->fs->writes, sb, from, "\001");
			wnodes_rekey(sb->fs->writes, sb, to, from);
			wnodes_rekey(sb->fs->writes, sb, "\001", to);
		} else {
			wnodes_rekey(sb->fs->writes, sb, from, to);
		}
	}
	return rc;
}

static int files_link(struct sbx *sb, const char *from, const char *to)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	flush_path(sb, from);
	memset(&req, 0, sizeof(req));
	req.path = (char *)from;
	req.to = (char *)to;
	rc = ext_op(sb, "link", to, &req, &a);
	cache_forget(sb->fs->cache, sb->id, from);
	if (rc == 0) {
		links_changed(sb, to, &a);
		sbfs_kernel_forget(sb->fs, sb->id, from);
		cache_put(sb->fs->cache, sb->id, to, &a, NULL);
		listing_add(sb, to, a.type);
	}
	return rc;
}

static int files_symlink(struct sbx *sb, const char *target, const char *rel)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	req.target = (char *)target;
	rc = ext_op(sb, "symlink", rel, &req, &a);
	if (rc == 0) {
		cache_put(sb->fs->cache, sb->id, rel, &a, target);
		listing_add(sb, rel, PROTO_FT_SYMLINK);
	}
	return rc;
}

static int files_readlink(struct sbx *sb, const char *rel, char *buf,
			  size_t size)
{
	struct proto_attr a;
	struct sbx_error err;
	char *target = NULL, *shown;
	int rc;

	if (size == 0)
		return -EINVAL;
	if (!cache_get(sb->fs->cache, sb->id, rel, &a, &target) ||
	    target == NULL) {
		free(target);
		target = NULL;
		sbx_error_clear(&err);
		rc = ac_readlink(sb->fs->t, sb->id, rel, &target, &err);
		if (rc < 0)
			return fail(sb, "readlink", rel, &err);
	}
	shown = sbfs_link_show(sb->fs, rel, target);
	/* Cut to the buffer, as readlink(2) does. */
	snprintf(buf, size, "%s", shown);
	free(shown);
	free(target);
	return 0;
}

static int files_chmod(struct sbx *sb, const char *rel, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	struct wnode *w;

	(void)fi;
	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	req.has_mode = true;
	req.mode = mode & 07777;
	w = wnode_find(sb->fs->writes, sb, rel);
	if (w != NULL) {
		pthread_mutex_lock(&w->lock);
		if (w->opens > 0) {
			/* Open descriptors keep writing after a chmod that
			 * takes write away: send their bytes, and keep the
			 * owner's write bit until the last close. */
			(void)wnode_flush_locked(sb, w);
			w->has_final_mode = (mode & 0200) == 0;
			w->final_mode = mode & 07777;
			if (w->has_final_mode)
				req.mode |= 0600;
		}
		rc = ext_op(sb, "chmod", rel, &req, &a);
		if (rc == 0 && w->has_final_mode)
			a.perm = mode & 07777;
		pthread_mutex_unlock(&w->lock);
		wnode_put(w);
	} else {
		rc = ext_op(sb, "chmod", rel, &req, &a);
	}
	if (rc == 0) {
		links_changed(sb, rel, &a);
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	} else {
		cache_forget(sb->fs->cache, sb->id, rel);
	}
	return rc;
}

static int files_truncate(struct sbx *sb, const char *rel, off_t size,
			  struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	(void)fi;
	if (size < 0)
		return -EINVAL;
	flush_path(sb, rel);
	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	req.has_size = true;
	req.size = (uint64_t)size;
	rc = ext_op(sb, "truncate", rel, &req, &a);
	/* Every open file reads the new size and bytes at once. */
	path_changed(sb, rel);
	cache_forget_content(sb->fs->cache, sb->id, rel);
	if (rc == 0) {
		links_changed(sb, rel, &a);
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	} else {
		cache_forget(sb->fs->cache, sb->id, rel);
	}
	return rc;
}

static void to_proto_time(const struct timespec *ts, struct proto_time *t)
{
	if (ts->tv_nsec == UTIME_NOW) {
		t->how = PROTO_TIME_NOW;
	} else if (ts->tv_nsec == UTIME_OMIT) {
		t->how = PROTO_TIME_OMIT;
	} else {
		t->how = PROTO_TIME_SET;
		t->sec = ts->tv_sec;
		t->nsec = (uint32_t)ts->tv_nsec;
	}
}

static int files_utimens(struct sbx *sb, const char *rel,
			 const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	(void)fi;
	/* An agent that does not advertise version 2 ignores times given
	 * with a write: send them on their own there. */
	if (tv != NULL && !sb->fs->o.ro && sb->ext_tree) {
		struct wnode *w = wnode_find(sb->fs->writes, sb, rel);
		bool merged = false;

		/* Bytes are pending (a writer that sets times right after
		 * them): the times ride along with the bytes. */
		if (w != NULL) {
			pthread_mutex_lock(&w->lock);
			if (w->dirty) {
				to_proto_time(&tv[0], &w->times[0]);
				to_proto_time(&tv[1], &w->times[1]);
				w->has_times = true;
				merged = true;
			}
			pthread_mutex_unlock(&w->lock);
			wnode_put(w);
		}
		if (merged) {
			cache_forget(sb->fs->cache, sb->id, rel);
			return 0;
		}
	}
	/* A later upload of pending bytes would move mtime again, and so
	 * would the creation of a new file in a directory. */
	flush_path(sb, rel);
	flush_new_children(sb, rel);
	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	/* The kernel already followed the caller's symlinks: the path names
	 * the object itself, which may be a symlink (lutimes). */
	req.nofollow = true;
	if (tv == NULL) {
		req.atime.how = PROTO_TIME_NOW;
		req.mtime.how = PROTO_TIME_NOW;
	} else {
		to_proto_time(&tv[0], &req.atime);
		to_proto_time(&tv[1], &req.mtime);
	}
	rc = ext_op(sb, "utimens", rel, &req, &a);
	if (rc == 0) {
		links_changed(sb, rel, &a);
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	} else {
		cache_forget(sb->fs->cache, sb->id, rel);
	}
	return rc;
}

static int files_statfs(struct sbx *sb, const char *rel, struct statvfs *st)
{
	struct proto_statfs s;
	struct sbx_error err;
	int rc;

	sbx_error_clear(&err);
	rc = ac_statfs(sb->fs->t, sb->id, &s, &err);
	if (rc < 0)
		return fail(sb, "statfs", rel, &err);
	memset(st, 0, sizeof(*st));
	st->f_bsize = s.bsize;
	st->f_frsize = s.frsize;
	st->f_blocks = s.blocks;
	st->f_bfree = s.bfree;
	st->f_bavail = s.bavail;
	st->f_files = s.files;
	st->f_ffree = s.ffree;
	st->f_favail = s.ffree;
	st->f_namemax = s.namemax;
	return 0;
}

const struct fs_tree_ops fs_files_ops = {
	.getattr = files_getattr,
	.readdir = files_readdir,
	.open = files_open,
	.create = files_create,
	.read = files_read,
	.write = files_write,
	.flush = files_flush,
	.release = files_release,
	.fsync = files_fsync,
	.mkdir = files_mkdir,
	.unlink = files_unlink,
	.rmdir = files_rmdir,
	.rename = files_rename,
	.link = files_link,
	.symlink = files_symlink,
	.readlink = files_readlink,
	.chmod = files_chmod,
	.truncate = files_truncate,
	.utimens = files_utimens,
	.statfs = files_statfs,
};
