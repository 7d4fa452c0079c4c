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
 *
 * This file has the helpers every part shares and the metadata operations;
 * the read path is fs_files_read.c, the write path fs_files_write.c, the
 * listings fs_files_list.c (fs_files_i.h joins them).
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

/* ---- helpers -------------------------------------------------------------- */

struct handle *files_fh(struct fuse_file_info *fi)
{
	return fi != NULL ? (struct handle *)(uintptr_t)fi->fh : NULL;
}

int files_fail(struct sbx *sb, const char *op, const char *rel,
	       const struct sbx_error *err)
{
	return sbfs_fail(sb->fs, sb->id, op, rel, err);
}

/*
 * Keep the parent's cached listing in step with a change this mount made
 * (a no-op when the parent has no listing cached).
 */
void files_listing_add(struct sbx *sb, const char *rel, enum proto_ftype t)
{
	char parent[PATH_MAX_BYTES + 1];
	const char *name = path_parent(rel, parent, sizeof(parent));

	cache_dir_add(sb->fs->cache, sb->id, parent, name, t);
	/* The directory's own times and link count moved: its next stat
	 * asks the agent. */
	cache_touch(sb->fs->cache, sb->id, parent);
}

/* rel went: out of its parent's cached listing (as files_listing_add). */
static void files_listing_remove(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];
	const char *name = path_parent(rel, parent, sizeof(parent));

	cache_dir_remove(sb->fs->cache, sb->id, parent, name);
	cache_touch(sb->fs->cache, sb->id, parent);
}

/* rel is not known any more: its parent's whole listing goes. */
static void files_listing_forget_parent(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];

	path_parent(rel, parent, sizeof(parent));
	cache_dir_forget(sb->fs->cache, sb->id, parent);
	cache_touch(sb->fs->cache, sb->id, parent);
}

/* A name the parent's fresh listing does not hold does not exist (as
 * fresh as any cached attribute): no round trip for it. */
bool files_listed_absent(struct sbx *sb, const char *rel)
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

int files_stat_remote(struct sbx *sb, const char *rel, struct proto_attr *a)
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
		return files_fail(sb, "stat", rel, &err);
	}
	cache_put_seen(sb->fs->cache, sb->id, rel, a, target, mark);
	free(target);
	return 0;
}

int files_ext_op(struct sbx *sb, const char *op, const char *rel,
		 struct proto_ext_req *req, struct proto_attr *a)
{
	struct sbx_error err;
	int rc;

	if (sb->fs->o.ro)
		return -EROFS;
	sbx_error_clear(&err);
	rc = ac_ext_op(sb->fs->t, sb->id, op, req, a, &err);
	if (rc < 0) {
		rc = files_fail(sb, op, rel, &err);
		/* The agent knows better than our listing. */
		if (rc == -EEXIST || rc == -ENOENT)
			files_listing_forget_parent(sb, rel);
		return rc;
	}
	return 0;
}

/* ---- the operations -------------------------------------------------------- */

/* After a change of rel that answered a (when rc is 0): the answer is
 * kept, other names of the file forgotten; after a failure, what was held
 * of rel is forgotten. rc. */
static int changed(struct sbx *sb, const char *rel, int rc,
		   const struct proto_attr *a)
{
	if (rc == 0) {
		files_links_changed(sb, rel, a);
		cache_put(sb->fs->cache, sb->id, rel, a, NULL);
	} else {
		cache_forget(sb->fs->cache, sb->id, rel);
	}
	return rc;
}

static int files_getattr(struct sbx *sb, const char *rel, struct stat *st,
			 struct fuse_file_info *fi)
{
	struct proto_attr a;
	int rc;

	(void)fi;
	if (files_pending_attr(sb, rel, &a)) {
		sbfs_attr_to_stat(sb, &a, st);
		return 0;
	}
	files_flush_path(sb, rel);
	if (!cache_get(sb->fs->cache, sb->id, rel, &a, NULL)) {
		if (files_listed_absent(sb, rel))
			return -ENOENT;
		/* A directory's times and links count the files this mount
		 * made in it. */
		files_flush_new_children(sb, rel);
		rc = files_stat_remote(sb, rel, &a);
		if (rc < 0)
			return rc;
	}
	files_pending_mode(sb, rel, &a);
	sbfs_attr_to_stat(sb, &a, st);
	return 0;
}

static int files_mkdir(struct sbx *sb, const char *rel, mode_t mode)
{
	struct proto_attr a;
	int rc;
	struct proto_ext_req req = {
		.path = (char *)rel, .has_mode = true, .mode = mode & 07777};

	rc = files_ext_op(sb, "mkdir", rel, &req, &a);
	if (rc == 0) {
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
		files_listing_add(sb, rel, PROTO_FT_DIR);
		/* Just made: its listing is known to be empty. */
		cache_dir_put(sb->fs->cache, sb->id, rel, NULL, NULL, 0);
	}
	return rc;
}

/* The file of node w is gone from its name (removed, or replaced by a
 * rename): pending bytes of it would only recreate it (or fail), and
 * descriptors still open write into nothing, as on a local file; the
 * name is free for the node of whatever takes it. Whether the file was
 * never made in the sandbox. Puts w. */
static bool files_node_gone(struct wnode *w)
{
	bool never_made;

	if (w == NULL)
		return false;
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
	return never_made;
}

static int files_unlink(struct sbx *sb, const char *rel)
{
	struct proto_ext_req req;
	struct proto_attr before;
	bool never_made, known;
	int rc;

	known = cache_get_access(sb->fs->cache, sb->id, rel, &before);
	never_made = files_node_gone(wnode_find(sb->fs->writes, sb, rel));
	if (never_made) {
		rc = 0;
	} else {
		memset(&req, 0, sizeof(req));
		req.path = (char *)rel;
		rc = files_ext_op(sb, "unlink", rel, &req, NULL);
	}
	if (rc == 0 && known)
		files_links_changed(sb, rel, &before);
	if (rc == 0)
		files_listing_remove(sb, rel);
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
	rc = files_ext_op(sb, "rmdir", rel, &req, NULL);
	if (rc == 0)
		files_listing_remove(sb, rel);
	cache_forget_tree(sb->fs->cache, sb->id, rel);
	return rc;
}

static int files_rename(struct sbx *sb, const char *from, const char *to,
			unsigned int flags)
{
	struct proto_ext_req req;
	struct proto_attr fa, ta;
	struct wnode *replaced = NULL;
	bool from_known, same;
	int rc;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	files_flush_tree(sb, from);
	files_flush_tree(sb, to);
	from_known = cache_get(sb->fs->cache, sb->id, from, &fa, NULL);
	/* Two names of one file: rename does nothing (rename(2)). */
	same = strcmp(from, to) == 0 ||
	       (from_known && fa.ino != 0 &&
		cache_get(sb->fs->cache, sb->id, to, &ta, NULL) &&
		fa.ino == ta.ino);
	/* The node of the file the rename replaces, taken before: a node
	 * made for the name once the rename is done (an open of the moved
	 * file by its new name) is not that file's. */
	if (!(flags & RENAME_EXCHANGE) && !same)
		replaced = wnode_find(sb->fs->writes, sb, to);
	memset(&req, 0, sizeof(req));
	req.path = (char *)from;
	req.to = (char *)to;
	req.noreplace = (flags & RENAME_NOREPLACE) != 0;
	req.exchange = (flags & RENAME_EXCHANGE) != 0;
	rc = files_ext_op(sb, "rename", from, &req, NULL);
	if (rc == 0) {
		enum proto_ftype t = from_known ? fa.type : PROTO_FT_UNKNOWN;

		if (req.exchange || t == PROTO_FT_UNKNOWN) {
			files_listing_forget_parent(sb, from);
			files_listing_forget_parent(sb, to);
		} else {
			files_listing_remove(sb, from);
			files_listing_add(sb, to, t);
		}
	}
	cache_forget_tree(sb->fs->cache, sb->id, from);
	cache_forget_tree(sb->fs->cache, sb->id, to);
	if (rc == 0) {
		/* What was at `to` is replaced (or swapped): open files of
		 * either name read afresh. */
		files_path_changed(sb, to);
		files_path_changed(sb, from);
		if (req.exchange) {
			/* "\001" never starts a path component. */
			wnodes_rekey(sb->fs->writes, sb, from, "\001");
			wnodes_rekey(sb->fs->writes, sb, to, from);
			wnodes_rekey(sb->fs->writes, sb, "\001", to);
		} else {
			/* The file the name had is gone: its node leaves
			 * the name to the moved file's (a stat of the name
			 * must see the moved file's pending bytes). */
			(void)files_node_gone(replaced);
			replaced = NULL;
			wnodes_rekey(sb->fs->writes, sb, from, to);
		}
	}
	if (replaced != NULL)
		wnode_put(replaced);
	return rc;
}

static int files_link(struct sbx *sb, const char *from, const char *to)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	files_flush_path(sb, from);
	memset(&req, 0, sizeof(req));
	req.path = (char *)from;
	req.to = (char *)to;
	rc = files_ext_op(sb, "link", to, &req, &a);
	cache_forget(sb->fs->cache, sb->id, from);
	if (rc == 0) {
		files_links_changed(sb, to, &a);
		sbfs_kernel_forget(sb->fs, sb->id, from);
		cache_put(sb->fs->cache, sb->id, to, &a, NULL);
		files_listing_add(sb, to, a.type);
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
	rc = files_ext_op(sb, "symlink", rel, &req, &a);
	if (rc == 0) {
		cache_put(sb->fs->cache, sb->id, rel, &a, target);
		files_listing_add(sb, rel, PROTO_FT_SYMLINK);
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
			return files_fail(sb, "readlink", rel, &err);
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
			(void)files_wnode_flush(sb, w);
			w->has_final_mode = (mode & 0200) == 0;
			w->final_mode = mode & 07777;
			if (w->has_final_mode)
				req.mode |= 0600;
		}
		rc = files_ext_op(sb, "chmod", rel, &req, &a);
		if (rc == 0 && w->has_final_mode)
			a.perm = mode & 07777;
		pthread_mutex_unlock(&w->lock);
		wnode_put(w);
	} else {
		rc = files_ext_op(sb, "chmod", rel, &req, &a);
	}
	return changed(sb, rel, rc, &a);
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
	files_flush_path(sb, rel);
	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	req.has_size = true;
	req.size = (uint64_t)size;
	rc = files_ext_op(sb, "truncate", rel, &req, &a);
	/* Every open file reads the new size and bytes at once. */
	files_path_changed(sb, rel);
	cache_forget_content(sb->fs->cache, sb->id, rel);
	return changed(sb, rel, rc, &a);
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
	files_flush_path(sb, rel);
	files_flush_new_children(sb, rel);
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
	rc = files_ext_op(sb, "utimens", rel, &req, &a);
	return changed(sb, rel, rc, &a);
}

static int files_statfs(struct sbx *sb, const char *rel, struct statvfs *st)
{
	struct proto_statfs s;
	struct sbx_error err;
	int rc;

	sbx_error_clear(&err);
	rc = ac_statfs(sb->fs->t, sb->id, &s, &err);
	if (rc < 0)
		return files_fail(sb, "statfs", rel, &err);
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
