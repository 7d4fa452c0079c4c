/* SPDX-License-Identifier: MIT */
/*
 * fs_files_i: what the parts of files/ through the file extension share
 * (fs_files.c: helpers and metadata operations; fs_files_read.c: open
 * files and reads; fs_files_write.c: gathered writes and creates;
 * fs_files_list.c: listings). The table, fs_files_ops, is fs_files.c's.
 *
 * Every function takes a sandbox entered for the operation (sbfs_enter)
 * and paths relative to its session root. Errors are negative errnos; a
 * failure of a request to the agent is logged once (sbfs_fail).
 * Thread-safety: any thread. An open file (struct handle) guards its read
 * state with its own lock and its writes with its path's node lock
 * (w->lock, wnodes.h); where a function must be called with w->lock held,
 * it says so. No lock is held across a request except w->lock while a
 * node's bytes are sent (one sender per path).
 */
#ifndef SBFS_FS_FILES_I_H
#define SBFS_FS_FILES_I_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "fs/fs_i.h"
#include "fs/wnodes.h"

struct ra_stream;

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

/* ---- helpers (fs_files.c) ------------------------------------------------ */

/* The open file behind fi (NULL when fi is NULL). */
struct handle *files_fh(struct fuse_file_info *fi);
/* sbfs_fail for sb: the errno to return, logged once. */
int files_fail(struct sbx *sb, const char *op, const char *rel,
	       const struct sbx_error *err);
/* Keep the parent's cached listing in step with a change this mount made
 * (a no-op when it has none): rel appeared, with type t. The parent's
 * attributes are marked stale (its times and links moved). */
void files_listing_add(struct sbx *sb, const char *rel, enum proto_ftype t);
/* The parent's fresh listing lacks rel: it does not exist (as fresh as
 * any cached attribute), and no request is needed to say so. */
bool files_listed_absent(struct sbx *sb, const char *rel);
/* rel's attributes from the agent, remembered (a gone path forgotten). */
int files_stat_remote(struct sbx *sb, const char *rel, struct proto_attr *a);
/* One metadata operation of the extension (req's op, a of the result
 * when not NULL); -EROFS on a read-only mount. An EEXIST or ENOENT from
 * the agent drops the parent's listing, which was wrong. */
int files_ext_op(struct sbx *sb, const char *op, const char *rel,
		 struct proto_ext_req *req, struct proto_attr *a);

/* ---- the write path (fs_files_write.c) ------------------------------------ */

/* A change through rel reached a file with other names (a's link count
 * over one): their attributes and pages are forgotten, here and in the
 * kernel. a may be NULL. */
void files_links_changed(struct sbx *sb, const char *rel,
			 const struct proto_attr *a);
/* Send w's gathered extent (w->lock held). A failure is recorded as a
 * loss of its writers (files_handle_error), whoever caused the flush. */
int files_wnode_flush(struct sbx *sb, struct wnode *w);
/* Send what is gathered for rel, for everything at or below rel, or for
 * the files directly in dir, before an operation that must see it. A
 * failure is the writers', not the caller's. */
void files_flush_path(struct sbx *sb, const char *rel);
void files_flush_tree(struct sbx *sb, const char *rel);
void files_flush_new_children(struct sbx *sb, const char *dir);
/* Count a change to rel's bytes made without its node's extent (truncate,
 * rename over it): open files of rel read afresh. */
void files_path_changed(struct sbx *sb, const char *rel);
/* A mode that waits for the last close, shown as rel's mode in a. */
void files_pending_mode(struct sbx *sb, const char *rel, struct proto_attr *a);
/* The attributes of a file this mount has not created yet, from its node:
 * true when rel is one (then a is filled). */
bool files_pending_attr(struct sbx *sb, const char *rel, struct proto_attr *a);

int files_create(struct sbx *sb, const char *rel, mode_t mode,
		 struct fuse_file_info *fi);
int files_write(struct sbx *sb, const char *rel, const char *buf, size_t size,
		off_t off, struct fuse_file_info *fi);
int files_flush(struct sbx *sb, const char *rel, struct fuse_file_info *fi);
int files_release(struct sbx *sb, const char *rel, struct fuse_file_info *fi);
int files_fsync(struct sbx *sb, const char *rel, int datasync,
		struct fuse_file_info *fi);

/* ---- open files and the read path (fs_files_read.c) ------------------------ */

/* An open file of rel with open(2)'s flags: counted on rel's node, with a
 * readahead window unless write-only. */
struct handle *files_handle_new(struct sbx *sb, const char *rel, int flags);
/* Uncount and free it. */
void files_handle_close(struct handle *h);
/* h's sticky error (w->lock held): 0, or the errno of bytes it (or
 * another writer of the file) lost since it was opened. Readers are
 * never in error. */
int files_handle_error(struct handle *h);

int files_open(struct sbx *sb, const char *rel, struct fuse_file_info *fi);
int files_read(struct sbx *sb, const char *rel, char *buf, size_t size,
	       off_t off, struct fuse_file_info *fi);

/* ---- listings (fs_files_list.c) -------------------------------------------- */

int files_readdir(struct sbx *sb, const char *rel, void *buf,
		  fuse_fill_dir_t filler, off_t off, struct fuse_file_info *fi,
		  enum fuse_readdir_flags fl);

#endif
