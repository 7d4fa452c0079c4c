/* SPDX-License-Identifier: MIT */
/*
 * fs_files_write: the write path of files/ through the file extension
 * (fs_files_i.h): bytes gathered per path (wnodes.h) and sent as one
 * extent, the files this mount creates with their first upload, modes
 * that wait for the last close, and the operations create, write, flush,
 * release and fsync.
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
#include "fs/cache.h"
#include "fs/fs_files_i.h"
#include "fs/fs_i.h"
#include "fs/prefetch.h"
#include "fs/readahead.h"
#include "fs/wnodes.h"

/* ---- per-path write state (wnodes.h) ------------------------------------- */

static struct sbx *owner_sb(const struct wnode *w)
{
	return (struct sbx *)(uintptr_t)w->owner;
}

/*
 * A change through rel reached a file with other names (a link count over
 * one, in a of before or after the change): the other names' attributes
 * and pages are forgotten here and in the kernel, so that they show the
 * change at once. Each name is a file of its own to the kernel (the
 * path-based API), so this cannot be left to it.
 */
void files_links_changed(struct sbx *sb, const char *rel,
			 const struct proto_attr *a)
{
	char **v = NULL;
	size_t i, n;

	if (a == NULL || a->nlink <= 1 || a->type == PROTO_FT_DIR)
		return;
	n = cache_forget_ino(sb->fs->cache, sb->id, a->ino, &v);
	for (i = 0; i < n; i++) {
		if (strcmp(v[i], rel) != 0) {
			files_path_changed(sb, v[i]);
			cache_forget_content(sb->fs->cache, sb->id, v[i]);
			sbfs_kernel_forget(sb->fs, sb->id, v[i]);
		}
		free(v[i]);
	}
	free(v);
}

/* Send w's extent (w->lock held). A failure is recorded as a loss: the
 * writers are told (handle_error), whoever caused the flush. */
int files_wnode_flush(struct sbx *sb, struct wnode *w)
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
		files_links_changed(sb, rel, &a);
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
void files_flush_path(struct sbx *sb, const char *rel)
{
	struct wnode *w = wnode_find(sb->fs->writes, sb, rel);

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->lock);
	(void)files_wnode_flush(sb, w);
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

/* Send the nodes of sb under dir that pick chooses. */
static void flush_picked(struct sbx *sb, const char *dir, wnode_pick_fn *pick)
{
	struct tree_pick t = {sb, dir, strlen(dir)};
	struct wnode **v;
	size_t i, n = wnodes_pick(sb->fs->writes, pick, &t, &v);

	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&v[i]->lock);
		(void)files_wnode_flush(sb, v[i]);
		pthread_mutex_unlock(&v[i]->lock);
	}
	wnodes_put(v, n);
}

/* Flush every pending extent at or below rel (before a rename or removal
 * of a directory). Failures are the writers' (see flush_path). */
void files_flush_tree(struct sbx *sb, const char *rel)
{
	flush_picked(sb, rel, pick_tree);
}

/* Send what is gathered for the files directly in dir, creating those
 * this mount made and has not created yet: dir's own times and link count
 * are asked about, or its listing with its entries' sizes. */
void files_flush_new_children(struct sbx *sb, const char *dir)
{
	flush_picked(sb, dir, pick_new_child);
}

/* Count a change to rel's bytes made through this mount without its
 * node's extent (truncate, rename over it). */
void files_path_changed(struct sbx *sb, const char *rel)
{
	struct wnode *w = wnode_find(sb->fs->writes, sb, rel);

	if (w == NULL)
		return;
	wnode_changed(w);
	wnode_put(w);
}

void sbfs_files_changed(struct sbx *sb, const char *rel)
{
	files_path_changed(sb, rel);
}

void sbfs_files_moved(struct sbx *sb, const char *from, const char *to)
{
	char *gone = xasprintf("\001%s", to);

	/* What the name had goes stale with its file ("\001" never starts
	 * a path component); what is gathered for the moved file goes
	 * where the file is now. */
	wnodes_rekey(sb->fs->writes, sb, to, gone);
	wnodes_rekey(sb->fs->writes, sb, from, to);
	free(gone);
}

int fs_files_flush_node(void *ctx, struct wnode *w)
{
	(void)ctx;
	return files_wnode_flush(owner_sb(w), w);
}

/* Show a mode that waits for the last close as the file's mode. */
void files_pending_mode(struct sbx *sb, const char *rel, struct proto_attr *a)
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
	rc = files_ext_op(sb, "chmod", rel, &req, &a);
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
bool files_pending_attr(struct sbx *sb, const char *rel, struct proto_attr *a)
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

/* ---- the operations ------------------------------------------------------- */

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

int files_create(struct sbx *sb, const char *rel, mode_t mode,
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
		     files_listed_absent(sb, rel) && parent_writable(sb, rel);

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
		rc = files_ext_op(sb, "create", rel, &req, &a);
	if (rc < 0)
		return rc;
	if (req.truncate)
		files_path_changed(sb, rel);
	h = files_handle_new(sb, rel, fi->flags);
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
	files_listing_add(sb, rel, PROTO_FT_FILE);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 0;
	return 0;
}

int files_write(struct sbx *sb, const char *rel, const char *buf, size_t size,
		off_t off, struct fuse_file_info *fi)
{
	struct handle *h = files_fh(fi);
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
	rc = files_handle_error(h);
	if (rc < 0)
		goto out;
	if (w->dirty && (w->has_times || w->append != append ||
			 (!append && (uint64_t)off != w->off + w->data.len) ||
			 w->data.len + size > max)) {
		(void)files_wnode_flush(sb, w);
		rc = files_handle_error(h);
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
			rc = files_fail(sb, "write", rel, &err);
			wnode_lost(w, rc);
			rc = files_handle_error(h);
			goto out;
		}
		files_links_changed(sb, rel, &a);
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
		(void)files_wnode_flush(sb, w);
		rc = files_handle_error(h);
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
	(void)files_wnode_flush(sb, h->w);
	rc = files_handle_error(h);
	pthread_mutex_unlock(&h->w->lock);
	return rc;
}

int files_flush(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	struct handle *h = files_fh(fi);

	if (h == NULL) {
		files_flush_path(sb, rel);
		return 0;
	}
	return flush_handle(sb, h);
}

int files_release(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	struct handle *h = files_fh(fi);
	int rc;

	if (h == NULL)
		return 0;
	(void)rel;
	pthread_mutex_lock(&h->w->lock);
	(void)files_wnode_flush(sb, h->w);
	rc = files_handle_error(h);
	if (h->w->opens == 1) {
		int mrc = apply_final_mode(sb, h->w);

		if (rc == 0)
			rc = mrc;
	}
	pthread_mutex_unlock(&h->w->lock);
	files_handle_close(h);
	fi->fh = 0;
	return rc;
}

int files_fsync(struct sbx *sb, const char *rel, int datasync,
		struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	struct handle *h = files_fh(fi);
	int rc;

	(void)datasync;
	if (h != NULL) {
		rc = flush_handle(sb, h);
		if (rc < 0)
			return rc;
	} else {
		files_flush_path(sb, rel);
	}
	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	return files_ext_op(sb, "fsync", rel, &req, NULL);
}
