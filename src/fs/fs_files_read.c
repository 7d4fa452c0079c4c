/* SPDX-License-Identifier: MIT */
/*
 * fs_files_read: the read path of files/ through the file extension
 * (fs_files_i.h): open files and their readahead windows (readahead.h),
 * close-to-open revalidation at open, and exact reads from the window,
 * the prefetched contents (prefetch.h) or the agent.
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

/* ---- open files ------------------------------------------------------------ */

/* This open file's sticky error (w->lock held): 0, or the errno of bytes
 * it (or another writer of the file) lost since it was opened. Readers
 * are never in error. */
int files_handle_error(struct handle *h)
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

struct handle *files_handle_new(struct sbx *sb, const char *rel, int flags)
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

void files_handle_close(struct handle *h)
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

/* ---- the operations -------------------------------------------------------- */

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
	rc = files_stat_remote(sb, rel, &a);
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

int files_open(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	struct handle *h;
	int rc;

	if (sb->fs->o.ro && (acc != O_RDONLY || (fi->flags & O_TRUNC)))
		return -EROFS;
	/* Close-to-open: a new descriptor sees what the open ones wrote
	 * (and a file this mount has not created yet comes into being). */
	files_flush_path(sb, rel);
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
		struct proto_attr a;
		struct proto_ext_req req = {
			.path = (char *)rel, .has_size = true, .size = 0};

		rc = files_ext_op(sb, "truncate", rel, &req, &a);
		files_path_changed(sb, rel);
		if (rc < 0)
			return rc;
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
		cache_forget_content(sb->fs->cache, sb->id, rel);
		fi->keep_cache = 0;
		h = files_handle_new(sb, rel, fi->flags);
	} else {
		h = files_handle_new(sb, rel, fi->flags);
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
	files_handle_close(h);
	return rc;
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
		return files_fail(sb, "read", rel, &err);
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

int files_read(struct sbx *sb, const char *rel, char *buf, size_t size,
	       off_t off, struct fuse_file_info *fi)
{
	struct handle *h = files_fh(fi);
	char etag[PROTO_ETAG_MAX];
	int rc;

	if (h == NULL)
		return -EBADF;
	if (off < 0)
		return -EINVAL;
	if (size > INT_MAX)
		size = INT_MAX;
	/* A reader sees its own writes. */
	files_flush_path(sb, rel);
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
