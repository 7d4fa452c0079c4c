/* SPDX-License-Identifier: MIT */
/*
 * ll_i: what the parts of the low-level API share: ll.c (the requests on
 * names and nodes, the table), ll_files.c (open files) and ll_dirs.c
 * (directories, listed without handles).
 *
 * Each request handler runs between ll_begin and ll_end, which make it
 * the thread's current request (sbfs_current, sbfs_caller_pid,
 * sbfs_interrupted). Paths are mount paths ("/<id>/files/...") of at most
 * LL_PATH_MAX bytes, made from node ids by the node table (inodes.h).
 * Errors are negative errnos, answered to the kernel as positive ones.
 * Thread-safety: libfuse calls the handlers from many threads; the node
 * table locks itself, and fs->hide_lock orders hiding a name against the
 * last close of its file.
 */
#ifndef SBFS_FS_LL_I_H
#define SBFS_FS_LL_I_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stdint.h>

#include "common/path.h"
#include "fs/fs.h"
#include "fs/fs_i.h"

/* A mount path: "/<id>/files" and a sandbox path, with room to spare. */
#define LL_PATH_MAX (PATH_MAX_BYTES + PROVIDER_ID_MAX + 64)

/* The path operations every request ends in (fs.c). */
#define OPS (fs_operations())

/* The request a thread serves. */
struct ll_req {
	fuse_req_t req;
	struct sbfs *fs;
	pid_t pid;
};

/*
 * What the kernel holds as a file handle: the module's own handle and the
 * path the file was opened under, which routes a release when the name is
 * gone (a file whose name was removed by someone else).
 */
struct llfile {
	uint64_t fh;
	char *path;
};

/* Make req the thread's current request (r lives on the caller's stack
 * until ll_end); the mount. */
struct sbfs *ll_begin(fuse_req_t req, struct ll_req *r);
void ll_end(void);

/* The module's view of an open file: fi with the module's handle. */
struct fuse_file_info ll_inner(const struct fuse_file_info *fi);

/*
 * The path of a node the kernel names, for an operation that names it by
 * id (stat, open, chmod, opendir): its name now or, when another request
 * renamed something over it or removed it since the kernel looked it up,
 * the name it had; -ESTALE when it has none.
 */
int ll_node_path(struct sbfs *fs, fuse_ino_t ino, char *buf, size_t size);
/* A name in parent, for a lookup or a change: parent must still have its
 * own name (-ESTALE makes the kernel walk the path again, as for NFS). */
int ll_node_child_path(struct sbfs *fs, fuse_ino_t parent, const char *name,
		       char *buf, size_t size);
/* The path of an open file for its I/O: its name now, else the name it
 * was opened by; -ESTALE when it was removed in the sandbox meanwhile
 * (inodes_vanish). */
int ll_file_path(struct sbfs *fs, fuse_ino_t ino,
		 const struct fuse_file_info *fi, char *buf, size_t size);
/* The path that takes a release to the module holding the file: its path
 * now, else (gone, stale) the one it was opened by. In buf. */
const char *ll_release_path(struct sbfs *fs, fuse_ino_t ino,
			    const struct fuse_file_info *fi, char *buf,
			    size_t size);

/*
 * Operations by a node's path race with requests that change names: a
 * read resolves "a", a rename moves a to b at the agent, the read finds
 * nothing, or finds the file that took the name "a" after (an atomic
 * save's next temporary). ll_names_begin and ll_names_end bracket every
 * change of a name this mount makes (the agent's and the node table's);
 * an operation by path starts an ll_moved with ll_moved_init and, while
 * ll_moved_again says so (it answered ENOENT and a name changed since, or
 * a change was still in flight), resolves the path again and retries
 * once the changes in flight are done (at most LL_MOVED_TRIES times, each
 * wait at most a second). An answer that is not an error is only the
 * node's when its path is still the one asked: ll_moved_off says
 * whether a change ran (waiting for those in flight) and ino's path now
 * (the open file's with fi, else the node's) is not path any more; the
 * caller that can ask again (open, read, getattr) then does.
 */
#define LL_MOVED_TRIES 4
struct ll_moved {
	uint64_t gen;
	int tries;
};
void ll_moved_init(struct sbfs *fs, struct ll_moved *m);
bool ll_moved_again(struct sbfs *fs, struct ll_moved *m, int rc);
bool ll_moved_since(struct sbfs *fs, struct ll_moved *m);
bool ll_moved_off(struct sbfs *fs, struct ll_moved *m, fuse_ino_t ino,
		  const struct fuse_file_info *fi, const char *path);

/* st's change time in nanoseconds since the epoch (inodes_set_fino). */
int64_t ll_ctime_ns(const struct stat *st);

/* The kernel's timeouts of an entry of path asked for at cache mark. */
void ll_entry_times(struct sbfs *fs, const char *path, uint64_t mark,
		    struct fuse_entry_param *e);
/* The entry of path (name in parent) after a lookup or a change that made
 * it: attributes from the module, and one counted lookup. */
int ll_make_entry(struct sbfs *fs, fuse_ino_t parent, const char *name,
		  const char *path, struct fuse_file_info *fi,
		  struct fuse_entry_param *e);

/* ---- open files (ll_files.c) ----------------------------------------------- */

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi);
void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi);
void ll_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size,
	      off_t off, struct fuse_file_info *fi);
void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);

/* ---- directories (ll_dirs.c) ---------------------------------------------- */

void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);

#endif
