/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1_open: the open files of files/ without the file extension,
 * and the operations of fs_files_v1_ops that read or write their
 * contents (fs_files_v1.c has the table).
 *
 * An open file holds the whole file (32 MiB at most, FS_V1_FILE_MAX):
 * loaded at open (whole-file GET, or the provider's native_read), changed
 * in memory by write and truncate, and sent whole (PUT /v1/files) at
 * flush, fsync and the last close when it changed; an upload that failed
 * is reported to that close() and not sent again. Open files are kept in
 * a registry by (mount, sandbox, path), following renames of the path, so
 * that getattr of a path being written shows the buffered size and a
 * change of times waits for the buffered contents to be sent (a later
 * upload would set mtime again). Native sessions are read-only: writes
 * are EROFS.
 *
 * Errors are negative errnos, logged once (fs_files_v1_cmd.h).
 * Thread-safe: the registry has a lock of its own, each open file one
 * guarding its buffer, and no lock is held across an upload (uploads of
 * one file are one at a time, so an older copy never lands after a newer
 * one).
 */
#ifndef SBFS_FS_FILES_V1_OPEN_H
#define SBFS_FS_FILES_V1_OPEN_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include "fs/fs_i.h"

/* The operations of struct fs_tree_ops (fs_i.h) for v1 and native
 * sessions that concern contents. */
int v1_getattr(struct sbx *sb, const char *rel, struct stat *st,
	       struct fuse_file_info *fi);
int v1_open(struct sbx *sb, const char *rel, struct fuse_file_info *fi);
int v1_create(struct sbx *sb, const char *rel, mode_t mode,
	      struct fuse_file_info *fi);
int v1_read(struct sbx *sb, const char *rel, char *buf, size_t size, off_t off,
	    struct fuse_file_info *fi);
int v1_write(struct sbx *sb, const char *rel, const char *buf, size_t size,
	     off_t off, struct fuse_file_info *fi);
int v1_flush(struct sbx *sb, const char *rel, struct fuse_file_info *fi);
int v1_fsync(struct sbx *sb, const char *rel, int datasync,
	     struct fuse_file_info *fi);
int v1_release(struct sbx *sb, const char *rel, struct fuse_file_info *fi);
int v1_truncate(struct sbx *sb, const char *rel, off_t size,
		struct fuse_file_info *fi);

/* Send what open files of rel hold and have not sent (before a change
 * that a later upload would undo: times). The first failure. */
int v1_upload_path(struct sbx *sb, const char *op, const char *rel);

#endif
