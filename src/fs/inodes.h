/* SPDX-License-Identifier: MIT */
/*
 * inodes: the mount's table of FUSE node ids (doc/internals/cache.md).
 *
 * The kernel names files by node id; the rest of the mount names them by
 * path. This table holds, for every node id the kernel knows, its parent
 * and its name, so that a path can be made for each request, and it
 * counts the kernel's lookups so that an id lives exactly as long as the
 * kernel may still use it (FUSE's lookup/forget contract).
 *
 * - A node is made by the first lookup of (parent, name) and keeps its id
 *   across renames. Ids are never reused while the mount lives (64 bits),
 *   so the kernel's generation number is always 0.
 * - A name that is unlinked or renamed over leaves its node detached:
 *   nobody finds it by name, it has no path (-ENOENT) unless asked with
 *   INODES_DETACHED_OK (then the path it had), and it lives until the
 *   kernel forgets it.
 * - Each name is its own node: two hard links of one file are two ids, as
 *   the kernel is told by every LINK reply.
 * - A node stays while it has lookups, children or open files; the root
 *   (INODES_ROOT) always.
 *
 * Thread-safety: every function takes the table's lock; a path is made
 * in one piece under it, so a concurrent rename gives the old path or the
 * new, never a mix. Limits: paths longer than size fail with -ENAMETOOLONG.
 */
#ifndef SBFS_INODES_H
#define SBFS_INODES_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INODES_ROOT 1

struct inodes;

struct inodes *inodes_new(void);
void inodes_free(struct inodes *t);

/* The path of ino ("/" for the root, "/a/b" below) into buf. -ENOENT when
 * the id is unknown or detached. */
int inodes_path(struct inodes *t, uint64_t ino, char *buf, size_t size);

/* inodes_path with flags: INODES_DETACHED_OK gives a detached node (or
 * one below a detached directory) the path it had, and a hidden node
 * after its last close (the hidden name removed) the path it had before
 * it was hidden. A hidden node has its hidden name until its last close. */
#define INODES_DETACHED_OK 1u
int inodes_path_flags(struct inodes *t, uint64_t ino, unsigned flags, char *buf,
		      size_t size);

/* The path of name in the directory parent (not detached). */
int inodes_child_path(struct inodes *t, uint64_t parent, const char *name,
		      char *buf, size_t size);

/* Count one kernel lookup of name in parent and give its id, made when
 * new. -ENOENT when parent is unknown or detached. */
int inodes_lookup(struct inodes *t, uint64_t parent, const char *name,
		  uint64_t *ino);

/* The id of name in parent without counting a lookup; 0 when none. */
uint64_t inodes_peek(struct inodes *t, uint64_t parent, const char *name);

/* The kernel forgets n lookups of ino. */
void inodes_forget(struct inodes *t, uint64_t ino, uint64_t n);

/* name in parent is gone (unlink, rmdir): its node is detached. */
void inodes_remove(struct inodes *t, uint64_t parent, const char *name);

/* The file of ino is the sandbox's inode number fino (0: unknown, kept as
 * it was), changed last at ctime_ns (nanoseconds since the epoch; 0:
 * unknown). The two tell one file from another: a file made after
 * another was removed may get its inode number at once, never its change
 * time of before. A node with open files keeps the number it has: another
 * number under its name is another file (the change events settle it). */
void inodes_set_fino(struct inodes *t, uint64_t ino, uint64_t fino,
		     int64_t ctime_ns);

/* The node of name in parent when some file of it is open: its sandbox
 * inode number (0 when unknown or not open) and change time (0 when
 * unknown), and its id in *ino. */
uint64_t inodes_open_fino(struct inodes *t, uint64_t parent, const char *name,
			  uint64_t *ino, int64_t *ctime_ns);

/* name in parent went away in the sandbox while a file of it was open:
 * its node is detached and stale (every path of it is -ESTALE), so that
 * its descriptors do not reach a file that takes the name later. */
void inodes_vanish(struct inodes *t, uint64_t parent, const char *name);

/* name in parent is now newname in newparent (what was there before is
 * detached); with exchange, the two names swap nodes. */
void inodes_rename(struct inodes *t, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, bool exchange);

/* Open files of a node. inodes_close says whether the last one closed on
 * a node that inodes_hide renamed, and gives its path and its directory
 * then, so that the caller removes it. */
void inodes_open(struct inodes *t, uint64_t ino);
bool inodes_close(struct inodes *t, uint64_t ino, char *path, size_t size,
		  uint64_t *parent);

/* The kernel dropped ino's attributes on its own (it does after every
 * read it was answered: the access time may have changed, see
 * doc/internals/cache.md), so that the next stat of it asks again: its
 * directory is marked, and its id given when it was not marked yet (0
 * otherwise: the kernel was told once). inodes_relisted clears the mark
 * of directory ino: its entries are being listed to the kernel with
 * their attributes. */
uint64_t inodes_stale_attr(struct inodes *t, uint64_t ino);
void inodes_relisted(struct inodes *t, uint64_t ino);

/* The node of name in parent, when some file of it is open: its id. */
uint64_t inodes_open_child(struct inodes *t, uint64_t parent, const char *name);

/* Mark ino as a file unlinked (or renamed over) while open, now under a
 * hidden name; former is the path that was its name ("/a/b"). */
void inodes_hide(struct inodes *t, uint64_t ino, const char *former);

/* The node of an absolute path ("/a/b") and its parent, when the kernel
 * knows it; -ENOENT when not. */
int inodes_find(struct inodes *t, const char *path, uint64_t *ino,
		uint64_t *parent);

/* The ids of the nodes below path (an absolute path the kernel knows),
 * at most max of them, detached ones too; how many. For forgetting a
 * subtree. */
size_t inodes_below(struct inodes *t, const char *path, uint64_t *ids,
		    size_t max);

/* How many nodes the table holds, the root included. */
size_t inodes_count(struct inodes *t);

#endif
