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
 * Writes are gathered per open file into one extent (up to the agent's
 * largest write) and sent when the next write is not contiguous, when the
 * extent is full, and at flush (close), fsync and before any operation
 * that must see them (stat, read, truncate, rename). close() reports a
 * failed upload, so a file close() called saved is saved.
 *
 * Sequential reads are served by a readahead window of chunks fetched in
 * parallel by a small worker pool (large ranged reads), which widens as
 * the reader keeps going; random reads go straight to the agent.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "agent_client.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_i.h"
#include "fs/prefetch.h"

#define LIST_PAGE 4096
#define WRITE_EXTENT_MAX (8UL * 1024 * 1024)
#define RA_CHUNK (4UL * 1024 * 1024)
#define RA_WINDOW_MAX 16 /* chunks ahead: 64 MiB */
#define RA_WORKERS 8
#define RA_GLOBAL_MAX (512UL * 1024 * 1024)

/* ---- per-path write state ------------------------------------------------ */

/*
 * The write extent is per path (not per descriptor), so every descriptor
 * of a file and every path operation sees the same pending bytes.
 */
struct wnode {
	char *sbx;
	char *rel;
	unsigned refs; /* open handles; guarded by wnodes_lock */
	pthread_mutex_t lock; /* guards the extent */
	struct buf data;
	uint64_t off;
	bool dirty;
	bool append; /* the extent goes to the end of the file */
	/* A mode that forbids the owner to write, asked for while the file
	 * is open: the agent opens the path for each write, so it is applied
	 * when the last descriptor closes (POSIX lets an open descriptor
	 * keep writing). Guarded by lock. */
	bool has_final_mode;
	uint32_t final_mode;
	/* Times set while bytes were pending (tar's futimens right after
	 * its data): sent with those bytes, in one request. */
	bool has_times;
	struct proto_time times[2];
	/* Created by this mount and not yet by the agent: the first upload
	 * creates it (one request for a new file's bytes, times and all). */
	bool mk_pending;
	struct ac_create mk;
	struct proto_attr planned; /* its attributes until then */
	/* Removed while open: what is written to it goes nowhere, and the
	 * path is free for a new node. Set under both locks. */
	bool orphan;
	unsigned opens; /* open descriptors; guarded by lock */
	struct wnode *next;
};

static pthread_mutex_t wnodes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wnode *wnodes;

static struct wnode *wnode_get(const char *sbx, const char *rel)
{
	struct wnode *w;

	pthread_mutex_lock(&wnodes_lock);
	for (w = wnodes; w != NULL; w = w->next)
		if (!w->orphan && strcmp(w->sbx, sbx) == 0 &&
		    strcmp(w->rel, rel) == 0)
			break;
	if (w == NULL) {
		w = xcalloc(1, sizeof(*w));
		w->sbx = xstrdup(sbx);
		w->rel = xstrdup(rel);
		pthread_mutex_init(&w->lock, NULL);
		buf_init(&w->data, WRITE_EXTENT_MAX);
		w->next = wnodes;
		wnodes = w;
	}
	w->refs++;
	pthread_mutex_unlock(&wnodes_lock);
	return w;
}

static void wnode_put(struct wnode *w)
{
	struct wnode **pp;

	pthread_mutex_lock(&wnodes_lock);
	if (--w->refs > 0) {
		pthread_mutex_unlock(&wnodes_lock);
		return;
	}
	for (pp = &wnodes; *pp != w; pp = &(*pp)->next)
		;
	*pp = w->next;
	pthread_mutex_unlock(&wnodes_lock);
	buf_cleanup(&w->data);
	pthread_mutex_destroy(&w->lock);
	free(w->sbx);
	free(w->rel);
	free(w);
}

/* The open node of a path, with a reference, or NULL. */
static struct wnode *wnode_find(const char *sbx, const char *rel)
{
	struct wnode *w;

	pthread_mutex_lock(&wnodes_lock);
	for (w = wnodes; w != NULL; w = w->next)
		if (!w->orphan && strcmp(w->sbx, sbx) == 0 &&
		    strcmp(w->rel, rel) == 0)
			break;
	if (w != NULL)
		w->refs++;
	pthread_mutex_unlock(&wnodes_lock);
	return w;
}

/* Send w's extent (w->lock held). */
static int wnode_flush_locked(struct sbx *sb, struct wnode *w)
{
	struct proto_attr a;
	struct sbx_error err;
	int rc;

	if (!w->dirty)
		return 0;
	if (w->orphan) {
		buf_reset(&w->data);
		w->dirty = false;
		w->has_times = false;
		return 0;
	}
	sbx_error_clear(&err);
	rc = ac_write_range(sb->fs->t, sb->id, w->rel,
			    w->append ? UINT64_MAX : w->off, w->data.data,
			    w->data.len, w->mk_pending ? &w->mk : NULL,
			    w->has_times ? w->times : NULL, &a, &err);
	w->has_times = false;
	w->mk_pending = false;
	/* Either way the bytes are no longer ours to send again: a failed
	 * upload is reported to this flush's caller, as close(2) does. */
	buf_reset(&w->data);
	w->dirty = false;
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "write", w->rel, &err);
	cache_put(sb->fs->cache, sb->id, w->rel, &a, NULL);
	return 0;
}

/* Flush the pending extent of a path, if a descriptor holds one. */
static int flush_path(struct sbx *sb, const char *rel)
{
	struct wnode *w = wnode_find(sb->id, rel);
	int rc;

	if (w == NULL)
		return 0;
	pthread_mutex_lock(&w->lock);
	rc = wnode_flush_locked(sb, w);
	pthread_mutex_unlock(&w->lock);
	wnode_put(w);
	return rc;
}

/* Flush every pending extent at or below rel (before a rename or removal
 * of a directory), and re-key open nodes after a rename. */
static int flush_tree(struct sbx *sb, const char *rel)
{
	size_t n = strlen(rel);
	struct wnode *w;
	int rc = 0;

	for (;;) {
		struct wnode *found = NULL;

		pthread_mutex_lock(&wnodes_lock);
		for (w = wnodes; w != NULL; w = w->next) {
			if (strcmp(w->sbx, sb->id) != 0 || !w->dirty)
				continue;
			if (n == 0 ||
			    (strncmp(w->rel, rel, n) == 0 &&
			     (w->rel[n] == '\0' || w->rel[n] == '/'))) {
				found = w;
				found->refs++;
				break;
			}
		}
		pthread_mutex_unlock(&wnodes_lock);
		if (found == NULL)
			return rc;
		pthread_mutex_lock(&found->lock);
		if (wnode_flush_locked(sb, found) < 0 && rc == 0)
			rc = -EIO;
		pthread_mutex_unlock(&found->lock);
		wnode_put(found);
	}
}

static void rekey_tree(struct sbx *sb, const char *from, const char *to)
{
	size_t n = strlen(from);
	struct wnode *w;

	pthread_mutex_lock(&wnodes_lock);
	for (w = wnodes; w != NULL; w = w->next) {
		if (strcmp(w->sbx, sb->id) != 0)
			continue;
		if (strncmp(w->rel, from, n) == 0 &&
		    (w->rel[n] == '\0' || w->rel[n] == '/')) {
			char *nrel = xasprintf("%s%s", to, w->rel + n);

			free(w->rel);
			w->rel = nrel;
		}
	}
	pthread_mutex_unlock(&wnodes_lock);
}

/* ---- readahead ------------------------------------------------------------ */

enum chunk_state {
	CHUNK_EMPTY = 0,
	CHUNK_FETCHING,
	CHUNK_READY,
	CHUNK_FAILED,
};

struct chunk {
	uint64_t off;
	size_t len; /* bytes asked for */
	size_t got; /* bytes that came (short at end of file) */
	unsigned char *data;
	enum chunk_state state;
	int err;
};

struct handle;

struct ra_job {
	struct handle *h;
	struct chunk *c;
	struct ra_job *next;
};

static pthread_mutex_t ra_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ra_cond = PTHREAD_COND_INITIALIZER;
static struct ra_job *ra_head, *ra_tail;
static pthread_once_t ra_once = PTHREAD_ONCE_INIT;
static pthread_cond_t ra_idle = PTHREAD_COND_INITIALIZER;
static unsigned ra_pending; /* jobs queued or being fetched; ra_lock */
static atomic_size_t ra_bytes; /* chunk memory in use, all handles */

/* An open file. */
struct handle {
	struct sbx *sb;
	struct wnode *w;
	int flags;
	char etag[PROTO_ETAG_MAX]; /* the contents this handle reads */
	uint64_t size; /* known size (for readahead bounds) */
	bool size_known;
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t cond;
	unsigned refs; /* the handle + queued chunk jobs */
	struct chunk ring[RA_WINDOW_MAX];
	unsigned window; /* chunks to keep ahead */
	uint64_t next_off; /* where a sequential reader is */
	unsigned seq_hits;
	bool ra_off; /* readahead given up (changes) */
	bool pf_tried; /* prefetched contents looked for */
	char *pf_data; /* the whole file, prefetched (else NULL) */
	size_t pf_len;
};

static void handle_unref(struct handle *h)
{
	unsigned i;

	pthread_mutex_lock(&h->lock);
	if (--h->refs > 0) {
		pthread_mutex_unlock(&h->lock);
		return;
	}
	pthread_mutex_unlock(&h->lock);
	for (i = 0; i < RA_WINDOW_MAX; i++) {
		if (h->ring[i].data != NULL)
			atomic_fetch_sub(&ra_bytes, RA_CHUNK);
		free(h->ring[i].data);
	}
	free(h->pf_data);
	wnode_put(h->w);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static void *ra_worker(void *arg)
{
	(void)arg;
	for (;;) {
		struct ra_job *j;
		struct handle *h;
		struct chunk *c;
		struct sbx_error err;
		char etag[PROTO_ETAG_MAX];
		uint64_t size;
		size_t got = 0;
		int rc;

		pthread_mutex_lock(&ra_lock);
		while (ra_head == NULL)
			pthread_cond_wait(&ra_cond, &ra_lock);
		j = ra_head;
		ra_head = j->next;
		if (ra_head == NULL)
			ra_tail = NULL;
		pthread_mutex_unlock(&ra_lock);

		h = j->h;
		c = j->c;
		free(j);
		sbx_error_clear(&err);
		etag[0] = '\0';
		rc = ac_read_range(h->sb->fs->t, h->sb->id, h->w->rel, c->off,
				   c->len, h->etag[0] ? h->etag : NULL, c->data,
				   &got, etag, &size, &err);
		if (rc < 0)
			rc = sbfs_fail(h->sb->fs, h->sb->id, "read", h->w->rel,
				       &err);
		pthread_mutex_lock(&h->lock);
		if (rc < 0) {
			c->state = CHUNK_FAILED;
			c->err = rc;
		} else {
			c->state = CHUNK_READY;
			c->got = got;
			if (h->etag[0] == '\0' && etag[0] != '\0')
				snprintf(h->etag, sizeof(h->etag), "%s", etag);
			if (size != UINT64_MAX) {
				h->size = size;
				h->size_known = true;
			}
		}
		pthread_cond_broadcast(&h->cond);
		pthread_mutex_unlock(&h->lock);
		handle_unref(h);
		pthread_mutex_lock(&ra_lock);
		if (--ra_pending == 0)
			pthread_cond_broadcast(&ra_idle);
		pthread_mutex_unlock(&ra_lock);
	}
	return NULL;
}

static void ra_start(void)
{
	unsigned i;

	for (i = 0; i < RA_WORKERS; i++) {
		pthread_t tid;
		pthread_attr_t at;

		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&tid, &at, ra_worker, NULL) != 0)
			log_warn("readahead worker could not start");
		pthread_attr_destroy(&at);
	}
}

/* Queue a fetch of the chunk covering off (h->lock held). */
static bool ra_schedule(struct handle *h, uint64_t off)
{
	uint64_t coff = off - off % RA_CHUNK;
	struct chunk *c = &h->ring[(coff / RA_CHUNK) % RA_WINDOW_MAX];
	struct ra_job *j;
	size_t len = RA_CHUNK;

	if (h->size_known && coff >= h->size)
		return false;
	if (c->state != CHUNK_EMPTY && c->off == coff)
		return true;
	if (c->state == CHUNK_FETCHING)
		return false; /* the slot is busy with an older chunk */
	if (h->size_known && coff + len > h->size)
		len = (size_t)(h->size - coff);
	if (c->data == NULL) {
		if (atomic_load(&ra_bytes) + RA_CHUNK > RA_GLOBAL_MAX)
			return false;
		c->data = malloc(RA_CHUNK);
		if (c->data == NULL)
			return false;
		atomic_fetch_add(&ra_bytes, RA_CHUNK);
	}
	c->off = coff;
	c->len = len < RA_CHUNK ? len : RA_CHUNK;
	c->got = 0;
	c->err = 0;
	c->state = CHUNK_FETCHING;
	h->refs++;
	j = xcalloc(1, sizeof(*j));
	j->h = h;
	j->c = c;
	pthread_mutex_lock(&ra_lock);
	if (ra_tail)
		ra_tail->next = j;
	else
		ra_head = j;
	ra_tail = j;
	ra_pending++;
	pthread_cond_signal(&ra_cond);
	pthread_mutex_unlock(&ra_lock);
	return true;
}

void fs_files_shutdown(void)
{
	pthread_mutex_lock(&ra_lock);
	while (ra_pending > 0)
		pthread_cond_wait(&ra_idle, &ra_lock);
	pthread_mutex_unlock(&ra_lock);
}

/* Drop every chunk that is not being fetched (h->lock held). */
static void ra_reset(struct handle *h)
{
	unsigned i;

	for (i = 0; i < RA_WINDOW_MAX; i++)
		if (h->ring[i].state != CHUNK_FETCHING)
			h->ring[i].state = CHUNK_EMPTY;
	h->seq_hits = 0;
	h->window = 1;
}

/*
 * Serve [off, off+size) from the window when the reader is sequential.
 * Returns bytes copied (may be 0 at end of file), -EAGAIN when the
 * caller should read directly, or a negative errno.
 */
static int ra_read(struct handle *h, char *buf, size_t size, uint64_t off)
{
	size_t done = 0;
	int rc = 0;

	pthread_mutex_lock(&h->lock);
	if (h->ra_off) {
		pthread_mutex_unlock(&h->lock);
		return -EAGAIN;
	}
	/* Sequential when the read continues where the window is; the
	 * kernel's parallel readahead may deliver them slightly out of
	 * order, so "near the last end" counts too. */
	if ((off == h->next_off && (off > 0 || h->seq_hits > 0)) ||
	    (off > h->next_off && off - h->next_off <= 2 * RA_CHUNK &&
	     h->seq_hits > 0) ||
	    (off < h->next_off && h->next_off - off <= 2 * RA_CHUNK &&
	     h->seq_hits > 0)) {
		h->seq_hits++;
	} else {
		ra_reset(h);
		/* The first read of a run goes straight to the agent: most
		 * files are read whole by it. */
		h->seq_hits = off == 0 ? 1 : 0;
		h->next_off = off + size;
		pthread_mutex_unlock(&h->lock);
		return -EAGAIN;
	}
	if (h->seq_hits >= 2 && h->window < RA_WINDOW_MAX &&
	    h->seq_hits % 4 == 0)
		h->window *= 2;
	if (h->window > RA_WINDOW_MAX)
		h->window = RA_WINDOW_MAX;
	if (h->window == 0)
		h->window = 1;
	while (done < size) {
		uint64_t pos = off + done;
		uint64_t coff = pos - pos % RA_CHUNK;
		struct chunk *c = &h->ring[(coff / RA_CHUNK) % RA_WINDOW_MAX];
		unsigned i;

		if (h->size_known && pos >= h->size)
			break;
		/* Keep the window full ahead of the reader. */
		for (i = 0; i < h->window; i++)
			if (!ra_schedule(h, coff + (uint64_t)i * RA_CHUNK))
				break;
		if (c->off != coff || c->state == CHUNK_EMPTY) {
			rc = -EAGAIN;
			break;
		}
		while (c->state == CHUNK_FETCHING && c->off == coff)
			pthread_cond_wait(&h->cond, &h->lock);
		if (c->off != coff || c->state == CHUNK_EMPTY) {
			rc = -EAGAIN;
			break;
		}
		if (c->state == CHUNK_FAILED) {
			rc = c->err;
			if (rc == -ESTALE) {
				/* The file changed under the window: read it
				 * afresh, directly. */
				ra_reset(h);
				h->etag[0] = '\0';
				rc = -EAGAIN;
			}
			c->state = CHUNK_EMPTY;
			break;
		}
		{
			size_t in = (size_t)(pos - c->off);
			size_t n;

			if (in >= c->got)
				break; /* end of file inside this chunk */
			n = c->got - in;
			if (n > size - done)
				n = size - done;
			memcpy(buf + done, c->data + in, n);
			done += n;
		}
	}
	if (done > 0)
		h->next_off = off + done;
	pthread_mutex_unlock(&h->lock);
	if (done > 0)
		return (int)done;
	return rc;
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

/* dir + "/" + name, or name at the root. */
static char *child_path(const char *dir, const char *name)
{
	return *dir ? xasprintf("%s/%s", dir, name) : xstrdup(name);
}

/* Split rel into its parent (into buf) and last component. */
static const char *split_parent(const char *rel, char *buf, size_t size)
{
	const char *slash = strrchr(rel, '/');
	size_t n;

	if (slash == NULL) {
		buf[0] = '\0';
		return rel;
	}
	n = (size_t)(slash - rel);
	if (n >= size)
		n = size - 1;
	memcpy(buf, rel, n);
	buf[n] = '\0';
	return slash + 1;
}

/*
 * Keep the parent's cached listing in step with a change this mount made
 * (a no-op when the parent has no listing cached).
 */
static void listing_add(struct sbx *sb, const char *rel, enum proto_ftype t)
{
	char parent[PATH_MAX_BYTES + 1];
	const char *name = split_parent(rel, parent, sizeof(parent));

	cache_dir_add(sb->fs->cache, sb->id, parent, name, t);
}

static void listing_remove(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];
	const char *name = split_parent(rel, parent, sizeof(parent));

	cache_dir_remove(sb->fs->cache, sb->id, parent, name);
}

static void listing_forget_parent(struct sbx *sb, const char *rel)
{
	char parent[PATH_MAX_BYTES + 1];

	split_parent(rel, parent, sizeof(parent));
	cache_dir_forget(sb->fs->cache, sb->id, parent);
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
	name = split_parent(rel, parent, sizeof(parent));
	return cache_dir_lookup(sb->fs->cache, sb->id, parent, name,
				&present) &&
	       !present;
}

static int stat_remote(struct sbx *sb, const char *rel, struct proto_attr *a)
{
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
	cache_put(sb->fs->cache, sb->id, rel, a, target);
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

static struct handle *handle_new(struct sbx *sb, const char *rel, int flags)
{
	struct handle *h = xcalloc(1, sizeof(*h));

	h->sb = sb;
	h->w = wnode_get(sb->id, rel);
	pthread_mutex_lock(&h->w->lock);
	h->w->opens++;
	pthread_mutex_unlock(&h->w->lock);
	h->flags = flags;
	h->refs = 1;
	h->window = 1;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, NULL);
	return h;
}

/* Show a mode that waits for the last close as the file's mode. */
static void pending_mode(struct sbx *sb, const char *rel, struct proto_attr *a)
{
	struct wnode *w = wnode_find(sb->id, rel);

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

	if (!w->has_final_mode)
		return 0;
	w->has_final_mode = false;
	memset(&req, 0, sizeof(req));
	req.path = w->rel;
	req.has_mode = true;
	req.mode = w->final_mode;
	rc = ext_op(sb, "chmod", w->rel, &req, &a);
	if (rc == 0)
		cache_put(sb->fs->cache, sb->id, w->rel, &a, NULL);
	return rc;
}

/*
 * The attributes of a file not created yet (libfuse asks right after the
 * create and after each setattr): known here, so asking must not create it
 * ahead of its bytes.
 */
static bool pending_attr(struct sbx *sb, const char *rel, struct proto_attr *a)
{
	struct wnode *w = wnode_find(sb->id, rel);
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
		sbfs_attr_to_stat(&a, st);
		return 0;
	}
	rc = flush_path(sb, rel);
	if (rc < 0)
		return rc;
	if (!cache_get(sb->fs->cache, sb->id, rel, &a, NULL)) {
		if (listed_absent(sb, rel))
			return -ENOENT;
		rc = stat_remote(sb, rel, &a);
		if (rc < 0)
			return rc;
	}
	pending_mode(sb, rel, &a);
	sbfs_attr_to_stat(&a, st);
	return 0;
}

/* Remember one directory's whole listing: its entries' attributes and
 * its names. */
static void remember_listing(struct sbx *sb, const char *dir,
			     const struct proto_dirent *ents, size_t n)
{
	const char **names = xcalloc(n + 1, sizeof(*names));
	enum proto_ftype *types = xcalloc(n + 1, sizeof(*types));
	size_t i;

	for (i = 0; i < n; i++) {
		char *child = child_path(dir, ents[i].name);

		cache_put(sb->fs->cache, sb->id, child, &ents[i].attr,
			  ents[i].target);
		free(child);
		names[i] = ents[i].name;
		types[i] = ents[i].attr.type;
	}
	cache_dir_put(sb->fs->cache, sb->id, dir, names, types, n);
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
		char *child = child_path(rel, nm.v[i]);
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

		sbfs_attr_to_stat(&attrs[i], &st);
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
	bool present = false;
	size_t i;
	int rc, have = 0;

	if (*rel != '\0') {
		const char *name = split_parent(rel, parent, sizeof(parent));

		if (cache_dir_lookup(sb->fs->cache, sb->id, parent, name,
				     &present) &&
		    present)
			budget = TREE_BUDGET_WALK;
	}
	memset(&tree, 0, sizeof(tree));
	sbx_error_clear(&err);
	rc = ac_tree(sb->fs->t, sb->id, rel, budget, &tree, &err);
	if (rc < 0)
		return fail(sb, "list", rel, &err);
	for (i = 0; i < tree.ndirs; i++) {
		struct proto_tree_dir *d = &tree.dirs[i];
		char *dir = *d->path == '\0' ? xstrdup(rel)
			    : *rel == '\0'   ? xstrdup(d->path)
					     : xasprintf("%s/%s", rel, d->path);

		remember_listing(sb, dir, d->entries, d->n);
		if (*d->path == '\0')
			have = 1;
		free(dir);
	}
	proto_tree_cleanup(&tree);
	return have;
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
	int rc = 0;

	(void)off;
	(void)fi;
	(void)fl;
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

			sbfs_attr_to_stat(&d->attr, &st);
			filler(buf, d->name, &st, 0, FUSE_FILL_DIR_PLUS);
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
	if (rc == 0)
		remember_listing(sb, rel, all, nall);
	for (i = 0; i < nall; i++) {
		free(all[i].name);
		free(all[i].target);
	}
	free(all);
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
	rc = stat_remote(sb, rel, &a);
	if (rc < 0)
		return rc;
	proto_attr_etag(&a, now);
	h->size = a.size;
	h->size_known = true;
	if (strcmp(now, cached) == 0) {
		fi->keep_cache = 1;
		snprintf(h->etag, sizeof(h->etag), "%s", now);
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
	rc = flush_path(sb, rel);
	if (rc < 0)
		return rc;
	if (acc != O_RDONLY) {
		struct proto_attr a;

		/* Writes go to the agent later, by path: refuse now what
		 * they would be refused then (no write bit for anyone), as
		 * open(2) would. */
		if (cache_get(sb->fs->cache, sb->id, rel, &a, NULL) &&
		    (a.perm & 0222) == 0)
			return -EACCES;
	}
	h = handle_new(sb, rel, fi->flags);
	if (fi->flags & O_TRUNC) {
		struct proto_ext_req req;
		struct proto_attr a;

		memset(&req, 0, sizeof(req));
		req.path = (char *)rel;
		req.has_size = true;
		req.size = 0;
		rc = ext_op(sb, "truncate", rel, &req, &a);
		if (rc < 0)
			goto fail;
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
		cache_forget_content(sb->fs->cache, sb->id, rel);
		fi->keep_cache = 0;
	} else {
		struct proto_attr a;

		if (cache_get(sb->fs->cache, sb->id, rel, &a, NULL)) {
			h->size = a.size;
			h->size_known = true;
		}
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
	handle_unref(h);
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
	split_parent(rel, parent, sizeof(parent));
	if (cache_get(sb->fs->cache, sb->id, parent, &pa, NULL)) {
		a->uid = pa.uid;
		a->gid = pa.gid;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	a->atime = a->mtime = a->ctime = now.tv_sec;
	a->atime_ns = a->mtime_ns = a->ctime_ns = (uint32_t)now.tv_nsec;
}

static int files_create(struct sbx *sb, const char *rel, mode_t mode,
			struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	struct proto_attr a;
	struct handle *h;
	int rc = 0;

	bool deferred = (mode & 0200) == 0;
	/* A name the parent's listing does not hold is created with its
	 * first upload, at the latest when it is closed: a new file costs
	 * one request, not two. */
	bool later =
		sb->ext_create_write && !sb->fs->o.ro && listed_absent(sb, rel);

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
	h = handle_new(sb, rel, fi->flags);
	pthread_mutex_lock(&h->w->lock);
	if (later) {
		h->w->mk_pending = true;
		h->w->mk.mode = req.mode;
		h->w->mk.exclusive = req.exclusive;
		h->w->planned = a;
		h->w->dirty = true;
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
	h->size = a.size;
	h->size_known = true;
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 0;
	return 0;
}

static int read_direct(struct sbx *sb, struct handle *h, char *buf, size_t size,
		       off_t off)
{
	char etag[PROTO_ETAG_MAX];
	struct sbx_error err;
	uint64_t full = UINT64_MAX;
	size_t got = 0;
	int rc;

	sbx_error_clear(&err);
	etag[0] = '\0';
	rc = ac_read_range(sb->fs->t, sb->id, h->w->rel, (uint64_t)off, size,
			   NULL, buf, &got, etag, &full, &err);
	if (rc < 0)
		return fail(sb, "read", h->w->rel, &err);
	pthread_mutex_lock(&h->lock);
	if (etag[0] != '\0' && strcmp(etag, h->etag) != 0) {
		/* The contents changed since the window was filled. */
		if (h->etag[0] != '\0')
			ra_reset(h);
		snprintf(h->etag, sizeof(h->etag), "%s", etag);
	}
	if (full != UINT64_MAX) {
		h->size = full;
		h->size_known = true;
	}
	pthread_mutex_unlock(&h->lock);
	return (int)got;
}

/*
 * Serve a read from contents read ahead with the file's directory, when
 * there are some: -EAGAIN when not (the read goes on as usual).
 */
static int read_prefetched(struct sbx *sb, struct handle *h, const char *rel,
			   char *buf, size_t size, off_t off)
{
	char etag[PROTO_ETAG_MAX];
	char *data = NULL;
	size_t len = 0;
	bool first;
	int rc;

	pthread_mutex_lock(&h->lock);
	first = !h->pf_tried && !(h->flags & O_TRUNC) &&
		(h->flags & O_ACCMODE) == O_RDONLY && sb->ext_contents;
	h->pf_tried = true;
	pthread_mutex_unlock(&h->lock);
	if (first && prefetch_take(sb->fs, sb->id, rel, &data, &len, etag)) {
		pthread_mutex_lock(&h->lock);
		if (h->pf_data == NULL) {
			h->pf_data = data;
			h->pf_len = len;
			data = NULL;
			snprintf(h->etag, sizeof(h->etag), "%s", etag);
			h->size = len;
			h->size_known = true;
		}
		pthread_mutex_unlock(&h->lock);
		free(data);
	}
	pthread_mutex_lock(&h->lock);
	if (h->pf_data == NULL) {
		pthread_mutex_unlock(&h->lock);
		return -EAGAIN;
	}
	if ((uint64_t)off >= h->pf_len) {
		rc = 0;
	} else {
		size_t n = h->pf_len - (size_t)off;

		if (n > size)
			n = size;
		memcpy(buf, h->pf_data + off, n);
		rc = (int)n;
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static int files_read(struct sbx *sb, const char *rel, char *buf, size_t size,
		      off_t off, struct fuse_file_info *fi)
{
	struct handle *h = fh(fi);
	int rc;

	if (h == NULL)
		return -EBADF;
	/* A reader sees its own writes. */
	rc = flush_path(sb, rel);
	if (rc < 0)
		return rc;
	rc = read_prefetched(sb, h, rel, buf, size, off);
	if (rc == -EAGAIN) {
		pthread_once(&ra_once, ra_start);
		rc = ra_read(h, buf, size, (uint64_t)off);
	}
	if (rc == -EAGAIN)
		rc = read_direct(sb, h, buf, size, off);
	if (rc >= 0 && h->etag[0] != '\0')
		cache_set_content(sb->fs->cache, sb->id, rel, h->etag);
	return rc;
}

static int files_write(struct sbx *sb, const char *rel, const char *buf,
		       size_t size, off_t off, struct fuse_file_info *fi)
{
	struct handle *h = fh(fi);
	struct wnode *w;
	size_t max;
	bool append;
	int rc = 0;

	if (h == NULL)
		return -EBADF;
	if (sb->fs->o.ro)
		return -EROFS;
	w = h->w;
	append = (h->flags & O_APPEND) != 0;
	max = sb->ext_max_write > 0 && sb->ext_max_write < WRITE_EXTENT_MAX
		      ? (size_t)sb->ext_max_write
		      : WRITE_EXTENT_MAX;
	pthread_mutex_lock(&w->lock);
	if (w->dirty && (w->has_times || w->append != append ||
			 (!append && (uint64_t)off != w->off + w->data.len) ||
			 w->data.len + size > max)) {
		rc = wnode_flush_locked(sb, w);
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
		if (rc < 0) {
			rc = fail(sb, "write", rel, &err);
			goto out;
		}
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
		rc = (int)size;
		goto out;
	}
	rc = buf_append(&w->data, buf, size);
	if (rc < 0)
		goto out;
	w->dirty = true;
	rc = (int)size;
	/* Our own pages and attributes are about to change. */
	cache_forget(sb->fs->cache, sb->id, rel);
out:
	pthread_mutex_unlock(&w->lock);
	if (rc > 0) {
		pthread_mutex_lock(&h->lock);
		ra_reset(h);
		h->size_known = false;
		pthread_mutex_unlock(&h->lock);
		cache_forget_content(sb->fs->cache, sb->id, rel);
	}
	return rc;
}

static int files_flush(struct sbx *sb, const char *rel,
		       struct fuse_file_info *fi)
{
	(void)fi;
	return flush_path(sb, rel);
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
	rc = wnode_flush_locked(sb, h->w);
	if (--h->w->opens == 0) {
		int mrc = apply_final_mode(sb, h->w);

		if (rc == 0)
			rc = mrc;
	}
	pthread_mutex_unlock(&h->w->lock);
	pthread_mutex_lock(&h->lock);
	h->ra_off = true;
	pthread_mutex_unlock(&h->lock);
	handle_unref(h);
	fi->fh = 0;
	return rc;
}

static int files_fsync(struct sbx *sb, const char *rel, int datasync,
		       struct fuse_file_info *fi)
{
	struct proto_ext_req req;
	int rc;

	(void)datasync;
	(void)fi;
	rc = flush_path(sb, rel);
	if (rc < 0)
		return rc;
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
	struct wnode *w;
	bool never_made = false;
	int rc;

	/* Pending bytes of a removed file would only recreate it (or fail):
	 * descriptors still open write into nothing, as on a local file. */
	w = wnode_find(sb->id, rel);
	if (w != NULL) {
		pthread_mutex_lock(&w->lock);
		never_made = w->mk_pending;
		w->mk_pending = false;
		/* Lock order: a node's lock, then wnodes_lock. */
		pthread_mutex_lock(&wnodes_lock);
		w->orphan = true;
		pthread_mutex_unlock(&wnodes_lock);
		buf_reset(&w->data);
		w->dirty = false;
		w->has_times = false;
		w->has_final_mode = false;
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
	rc = flush_tree(sb, from);
	if (rc == 0)
		rc = flush_tree(sb, to);
	if (rc < 0)
		return rc;
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
	if (rc == 0 && !req.exchange)
		rekey_tree(sb, from, to);
	return rc;
}

static int files_link(struct sbx *sb, const char *from, const char *to)
{
	struct proto_ext_req req;
	struct proto_attr a;
	int rc;

	rc = flush_path(sb, from);
	if (rc < 0)
		return rc;
	memset(&req, 0, sizeof(req));
	req.path = (char *)from;
	req.to = (char *)to;
	rc = ext_op(sb, "link", to, &req, &a);
	cache_forget(sb->fs->cache, sb->id, from);
	if (rc == 0) {
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
	char *target = NULL;
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
	if (sbfs_link_escapes(rel, target)) {
		log_debug("sandbox %s: %s leads out of the sandbox (%s): not "
			  "followed",
			  sb->id, rel, target);
		free(target);
		return -ELOOP;
	}
	snprintf(buf, size, "%s", target);
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
	w = wnode_find(sb->id, rel);
	if (w != NULL) {
		pthread_mutex_lock(&w->lock);
		if (w->opens > 0) {
			/* Open descriptors keep writing after a chmod that
			 * takes write away: send their bytes, and keep the
			 * owner's write bit until the last close. */
			rc = wnode_flush_locked(sb, w);
			if (rc < 0)
				goto unlock;
			w->has_final_mode = (mode & 0200) == 0;
			w->final_mode = mode & 07777;
			if (w->has_final_mode)
				req.mode |= 0600;
		}
		rc = ext_op(sb, "chmod", rel, &req, &a);
		if (rc == 0 && w->has_final_mode)
			a.perm = mode & 07777;
	unlock:
		pthread_mutex_unlock(&w->lock);
		wnode_put(w);
	} else {
		rc = ext_op(sb, "chmod", rel, &req, &a);
	}
	if (rc == 0)
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	else
		cache_forget(sb->fs->cache, sb->id, rel);
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
	rc = flush_path(sb, rel);
	if (rc < 0)
		return rc;
	memset(&req, 0, sizeof(req));
	req.path = (char *)rel;
	req.has_size = true;
	req.size = (uint64_t)size;
	rc = ext_op(sb, "truncate", rel, &req, &a);
	cache_forget_content(sb->fs->cache, sb->id, rel);
	if (rc == 0)
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	else
		cache_forget(sb->fs->cache, sb->id, rel);
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
		struct wnode *w = wnode_find(sb->id, rel);
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
	/* A later upload of pending bytes would move mtime again. */
	rc = flush_path(sb, rel);
	if (rc < 0)
		return rc;
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
	if (rc == 0)
		cache_put(sb->fs->cache, sb->id, rel, &a, NULL);
	else
		cache_forget(sb->fs->cache, sb->id, rel);
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
