/* SPDX-License-Identifier: MIT */
/*
 * fs: the sandboxfs file system as libfuse sees it, and its command line.
 * main.c parses options with sbfs_opts_parse, makes the mount's state with
 * sbfs_new (fs_i.h) before anything is mounted, and serves the session
 * sbfs_session_new makes (the low-level API: ll.c).
 */
#ifndef SBFS_FS_H
#define SBFS_FS_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <fuse.h>
#include <fuse_lowlevel.h>

#include "fs/fs_i.h"

/* The path operations of fs.c, which ll.c calls with each request's
 * path. */
const struct fuse_operations *fs_operations(void);

/* What the mount asks of the kernel's FUSE connection at its start. */
void sbfs_conn_init(struct sbfs *fs, struct fuse_conn_info *conn);

/* The FUSE session of fs (low-level API, ll.c), from the command line's
 * remaining arguments; NULL after libfuse printed why (an unknown
 * option). fs must outlive it. */
struct fuse_session *sbfs_session_new(struct sbfs *fs, struct fuse_args *args);

/*
 * Parse sandboxfs's own -o options out of args (libfuse's stay for
 * fuse_parse_cmdline and fuse_session_new), with defaults for the rest.
 * mount.fuse3's form "sandboxfs SOURCE MOUNTPOINT -o ..." is accepted: the
 * source is ignored. Returns 0, 1 when help or the version was printed
 * (exit 0), or -1 after printing a usage error.
 */
int sbfs_opts_parse(struct fuse_args *args, struct sbfs_opts *o);
void sbfs_opts_cleanup(struct sbfs_opts *o);

/* Best effort, after the mount exists and before it serves: raise the
 * kernel's readahead for this mount to readahead_kb (needs root). */
void sbfs_tune_mount(const char *mountpoint, unsigned readahead_kb);

#endif
