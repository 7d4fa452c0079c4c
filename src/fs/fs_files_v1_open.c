/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1_open: the open files of files/ without the file extension
 * (contract in fs_files_v1_open.h): each holds the whole file in a
 * buffer, read with one whole-file GET at open and sent with one
 * whole-file PUT at flush, fsync and the last close; a registry of them by
 * path lets a stat of a file being written report the buffered size, and
 * a change of times by path wait until the buffered contents are sent.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/agent_client.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_files_v1_cmd.h"
#include "fs/fs_files_v1_i.h"
#include "fs/fs_files_v1_open.h"

/* The bound of a buffer a whole file is read into: the transfer limit,
 * plus the two bytes by which a base64 decoder's reservation (the upper
 * bound of the decoded size) may pass the bytes that decode. Writes are
 * held to FS_V1_FILE_MAX itself. */
#define LOAD_MAX (FS_V1_FILE_MAX + 2)

/* ---- open files ---------------------------------------------------------- */

struct v1_handle {
	pthread_mutex_t lock; /* guards the fields up to the registry's */
	pthread_cond_t idle; /* an upload ended */
	struct buf data;
	uint64_t gen; /* bumped by every change of data */
	uint64_t saved_gen; /* what the sandbox holds */
	uint64_t failed_gen; /* an upload of this generation failed */
	bool uploading;
	bool append;
	bool native;
	/* The registry's (the mount's list of v1 open files), guarded by
	 * fs->v1_lock. */
	struct sbfs *fs;
	char id[PROVIDER_ID_MAX + 1];
	char *rel;
	unsigned refs;
	struct dlist_node link; /* in fs->v1_open */
	bool listed;
};

static struct v1_handle *handle_new(struct sbx *sb, const char *rel,
				    bool append, bool native)
{
	struct v1_handle *h = xcalloc(1, sizeof(*h));

	pthread_mutex_init(&h->lock, NULL);
	clock_cond_init(&h->idle);
	buf_init(&h->data, LOAD_MAX);
	h->append = append;
	h->native = native;
	h->fs = sb->fs;
	snprintf(h->id, sizeof(h->id), "%s", sb->id);
	h->rel = xstrdup(rel);
	h->refs = 1;
	return h;
}

static void handle_free(struct v1_handle *h)
{
	buf_cleanup(&h->data);
	pthread_cond_destroy(&h->idle);
	pthread_mutex_destroy(&h->lock);
	free(h->rel);
	free(h);
}

static void reg_add(struct v1_handle *h)
{
	pthread_mutex_lock(&h->fs->v1_lock);
	dlist_push_front(&h->fs->v1_open, &h->link);
	h->listed = true;
	pthread_mutex_unlock(&h->fs->v1_lock);
}

/* Drop the open file's reference (and its registry entry); the last
 * reference frees it. */
static void reg_release(struct v1_handle *h)
{
	bool last;

	pthread_mutex_lock(&h->fs->v1_lock);
	if (h->listed) {
		dlist_remove(&h->fs->v1_open, &h->link);
		h->listed = false;
	}
	last = --h->refs == 0;
	pthread_mutex_unlock(&h->fs->v1_lock);
	if (last)
		handle_free(h);
}

static void reg_unref(struct v1_handle *h)
{
	bool last;

	pthread_mutex_lock(&h->fs->v1_lock);
	last = --h->refs == 0;
	pthread_mutex_unlock(&h->fs->v1_lock);
	if (last)
		handle_free(h);
}

/* FUSE passes the current path with every call: a rename of an open
 * file moves its registry entry along. */
static void reg_set_rel(struct v1_handle *h, const char *rel)
{
	pthread_mutex_lock(&h->fs->v1_lock);
	if (strcmp(h->rel, rel) != 0) {
		free(h->rel);
		h->rel = xstrdup(rel);
	}
	pthread_mutex_unlock(&h->fs->v1_lock);
}

static bool reg_match(const struct v1_handle *h, const struct sbx *sb,
		      const char *rel)
{
	return strcmp(h->id, sb->id) == 0 && strcmp(h->rel, rel) == 0;
}

static bool handle_dirty(struct v1_handle *h)
{
	return h->gen != h->saved_gen;
}

/* The size of the newest unsaved contents of rel, if an open file holds
 * some. */
static bool reg_dirty_size(const struct sbx *sb, const char *rel,
			   uint64_t *size)
{
	struct v1_handle *h;
	bool found = false;

	pthread_mutex_lock(&sb->fs->v1_lock);
	for (h = dlist_item(sb->fs->v1_open.first, struct v1_handle, link);
	     h != NULL && !found;
	     h = dlist_item(h->link.next, struct v1_handle, link)) {
		if (!reg_match(h, sb, rel))
			continue;
		pthread_mutex_lock(&h->lock);
		if (handle_dirty(h)) {
			*size = h->data.len;
			found = true;
		}
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&sb->fs->v1_lock);
	return found;
}

static struct v1_handle *handle_of(const struct fuse_file_info *fi)
{
	return fi != NULL ? (struct v1_handle *)(uintptr_t)fi->fh : NULL;
}

/* Wait for another upload of h to end (h->lock held). */
static int wait_idle(struct sbx *sb, struct v1_handle *h)
{
	struct timespec until;
	long ms = v1_cmd_timeout_ms(sb) * 2 + 10000;
	int rc = 0;

	clock_deadline_in(&until, ms);
	while (h->uploading && rc == 0)
		rc = pthread_cond_timedwait(&h->idle, &h->lock, &until);
	return h->uploading ? -ETIMEDOUT : 0;
}

/*
 * Send h's contents with one whole-file PUT when they changed since the
 * last one. The bytes are copied out first so that no lock is held during
 * the upload and writes can go on; uploads of one open file are one at a
 * time, so an older copy never lands after a newer one.
 */
static int upload(struct sbx *sb, const char *op, const char *rel,
		  struct v1_handle *h)
{
	struct buf snap = BUF_INIT(FS_V1_FILE_MAX);
	struct sbx_error err;
	uint64_t gen;
	int rc;

	pthread_mutex_lock(&h->lock);
	if (wait_idle(sb, h) < 0) {
		pthread_mutex_unlock(&h->lock);
		return v1_fail(sb, op, rel, SBX_UNREACHABLE, EIO,
			       "another upload of the file did not end");
	}
	if (!handle_dirty(h)) {
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	rc = buf_append(&snap, h->data.data, h->data.len);
	if (rc < 0) {
		pthread_mutex_unlock(&h->lock);
		return v1_fail(sb, op, rel, SBX_INVALID_INPUT, -rc,
			       "no memory for the upload");
	}
	gen = h->gen;
	h->uploading = true;
	pthread_mutex_unlock(&h->lock);

	sbx_error_clear(&err);
	rc = ac_write_file(sb->fs->t, sb->id, rel, snap.data, snap.len, &err);

	pthread_mutex_lock(&h->lock);
	h->uploading = false;
	if (rc == 0 && gen > h->saved_gen)
		h->saved_gen = gen;
	if (rc < 0)
		h->failed_gen = gen;
	pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->lock);
	buf_cleanup(&snap);
	cache_forget(sb->fs->cache, sb->id, rel);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, op, rel, &err);
	return 0;
}

/* Save what open files of rel hold before a change that a later upload
 * would undo (times). */
int v1_upload_path(struct sbx *sb, const char *op, const char *rel)
{
	struct v1_handle *found[16];
	struct v1_handle *h;
	size_t n = 0, i;
	int rc = 0, one;

	pthread_mutex_lock(&sb->fs->v1_lock);
	for (h = dlist_item(sb->fs->v1_open.first, struct v1_handle, link);
	     h != NULL && n < 16;
	     h = dlist_item(h->link.next, struct v1_handle, link)) {
		if (!reg_match(h, sb, rel) || h->native)
			continue;
		h->refs++;
		found[n++] = h;
	}
	pthread_mutex_unlock(&sb->fs->v1_lock);
	for (i = 0; i < n; i++) {
		one = upload(sb, op, rel, found[i]);
		if (rc == 0)
			rc = one;
		reg_unref(found[i]);
	}
	return rc;
}

/* The whole file into b (bounded by b->max). */
static int load(struct sbx *sb, const char *op, const char *rel, struct buf *b)
{
	struct provider *prov = sb->fs->prov;
	struct sbx_error err;
	int rc;

	sbx_error_clear(&err);
	if (v1_is_native(sb)) {
		if (prov->ops->native_read == NULL)
			return v1_fail(sb, op, rel, SBX_NOT_SUPPORTED,
				       EOPNOTSUPP,
				       "the provider reads no files in native "
				       "sessions");
		rc = prov->ops->native_read(prov, sb->id, rel, b, &err);
	} else {
		rc = ac_read_file(sb->fs->t, sb->id, rel, b, &err);
	}
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, op, rel, &err);
	return 0;
}

/*
 * A native session whose provider runs no commands can still read the
 * files it names: a path is a regular file when its contents can be read
 * (and its size is theirs). The session root is a directory.
 */
static int native_stat_by_read(struct sbx *sb, const char *rel, struct stat *st)
{
	struct buf b = BUF_INIT(LOAD_MAX);
	int rc;

	if (*rel == '\0') {
		sbfs_synth_stat(sb->fs, st, true, 0755, 0);
		return 0;
	}
	if (sb->fs->prov->ops->native_read == NULL)
		return v1_fail(
			sb, "getattr", rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
			"the provider lists no files in native sessions");
	rc = load(sb, "getattr", rel, &b);
	if (rc == 0)
		sbfs_synth_stat(sb->fs, st, false, 0444, (off_t)b.len);
	buf_cleanup(&b);
	return rc;
}

int v1_getattr(struct sbx *sb, const char *rel, struct stat *st,
	       struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	struct proto_attr a;
	uint64_t size = 0;
	bool dirty = false;
	int rc;

	if (v1_is_native(sb) && !v1_has_native_exec(sb))
		return native_stat_by_read(sb, rel, st);
	rc = v1_attr_of(sb, "getattr", rel, &a, NULL);
	if (rc < 0)
		return rc;
	sbfs_attr_to_stat(sb, &a, st);
	if (h != NULL) {
		pthread_mutex_lock(&h->lock);
		dirty = handle_dirty(h);
		size = h->data.len;
		pthread_mutex_unlock(&h->lock);
	} else {
		dirty = reg_dirty_size(sb, rel, &size);
	}
	if (dirty && a.type == PROTO_FT_FILE) {
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
	}
	return 0;
}

int v1_open(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	bool trunc = (fi->flags & O_TRUNC) != 0;
	struct v1_handle *h;
	int rc;

	if (acc != O_RDONLY || trunc) {
		rc = v1_may_change(sb);
		if (rc < 0)
			return rc;
	}
	h = handle_new(sb, rel, (fi->flags & O_APPEND) != 0, v1_is_native(sb));
	if (trunc) {
		/* Emptied: that reaches the sandbox at close even when
		 * nothing is written. */
		h->gen = 1;
	} else {
		rc = load(sb, "open", rel, &h->data);
		if (rc < 0) {
			handle_free(h);
			return rc;
		}
	}
	reg_add(h);
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

int v1_create(struct sbx *sb, const char *rel, mode_t mode,
	      struct fuse_file_info *fi)
{
	struct sbx_error err;
	struct v1_handle *h;
	int rc = v1_may_change(sb);

	if (rc < 0)
		return rc;
	/* Made at once, so that the caller's next stat finds it. */
	sbx_error_clear(&err);
	rc = ac_write_file(sb->fs->t, sb->id, rel, "", 0, &err);
	v1_forget(sb, rel, false, true);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "create", rel, &err);
	/* The agent creates files with 0666 (less its umask). */
	if ((mode & 07777) != 0666) {
		rc = v1_chmod_remote(sb, "create", rel, mode);
		if (rc < 0)
			return rc;
	}
	h = handle_new(sb, rel, (fi->flags & O_APPEND) != 0, false);
	reg_add(h);
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

int v1_read(struct sbx *sb, const char *rel, char *buf, size_t size, off_t off,
	    struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	int rc;

	(void)sb;
	(void)rel;
	if (h == NULL)
		return -EBADF;
	pthread_mutex_lock(&h->lock);
	rc = fs_files_v1_buf_read(&h->data, buf, size, off);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int v1_write(struct sbx *sb, const char *rel, const char *buf, size_t size,
	     off_t off, struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	int rc;

	if (h == NULL)
		return -EBADF;
	if (h->native)
		return -EROFS;
	reg_set_rel(h, rel);
	pthread_mutex_lock(&h->lock);
	/* Appends go to the end of what this open file holds, whatever
	 * size the kernel last heard of. */
	if (h->append)
		off = (off_t)h->data.len;
	rc = fs_files_v1_buf_write(&h->data, buf, size, off);
	if (rc > 0)
		h->gen++;
	pthread_mutex_unlock(&h->lock);
	if (rc == -EFBIG)
		log_debug("sandbox %s: write %s: past the %lu byte limit of "
			  "whole-file transfers",
			  sb->id, rel, (unsigned long)FS_V1_FILE_MAX);
	return rc;
}

int v1_flush(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);

	if (h == NULL || h->native)
		return 0;
	reg_set_rel(h, rel);
	return upload(sb, "flush", rel, h);
}

int v1_fsync(struct sbx *sb, const char *rel, int datasync,
	     struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);

	(void)datasync;
	if (h == NULL || h->native)
		return 0;
	reg_set_rel(h, rel);
	return upload(sb, "fsync", rel, h);
}

int v1_release(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	bool send;

	if (h == NULL)
		return 0;
	/* Changes made after the last flush (through a shared mapping)
	 * are sent now; a generation whose upload failed was reported to
	 * its close() and is not sent again. */
	pthread_mutex_lock(&h->lock);
	send = !h->native && handle_dirty(h) && h->failed_gen != h->gen;
	pthread_mutex_unlock(&h->lock);
	if (send)
		(void)upload(sb, "release", rel != NULL ? rel : h->rel, h);
	fi->fh = 0;
	reg_release(h);
	return 0;
}

int v1_truncate(struct sbx *sb, const char *rel, off_t size,
		struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	char bytes[24];
	const char *const truncate[] = {"truncate", "-c", "-s",
					bytes,	    "--", NULL};
	int rc = v1_may_change(sb);

	if (rc < 0)
		return rc;
	if (h != NULL) {
		/* An open file: its buffer, sent at flush. */
		reg_set_rel(h, rel);
		pthread_mutex_lock(&h->lock);
		rc = fs_files_v1_buf_truncate(&h->data, size);
		if (rc == 0)
			h->gen++;
		pthread_mutex_unlock(&h->lock);
		return rc;
	}
	if (size < 0)
		return -EINVAL;
	snprintf(bytes, sizeof(bytes), "%lld", (long long)size);
	rc = v1_change(sb, "truncate", rel, truncate, rel, NULL);
	cache_forget(sb->fs->cache, sb->id, rel);
	return rc;
}
