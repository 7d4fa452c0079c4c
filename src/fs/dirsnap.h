/* SPDX-License-Identifier: MIT */
/*
 * dirsnap: the listings of directories that readers are part way through,
 * for a mount whose directories have no open handles (the kernel's "no
 * opendir" mode: no OPENDIR, no RELEASEDIR, only READDIR at an offset;
 * doc/internals/cache.md, "Directories without handles").
 *
 * A listing from offset 0 is a snapshot: the entries of one directory as
 * they were, numbered from 0. The offset the kernel gets for entry k
 * names the snapshot and the entry after it (dirsnap_off), so that a
 * reader that comes back for more is answered from the same snapshot,
 * and sees every entry once, whatever changed meanwhile. A snapshot goes
 * when a reader reached its end, or when the table is over its bounds
 * (the least recently used first, never one a caller holds); a reader
 * whose snapshot went is answered from a new listing at the same index.
 *
 * No FUSE here: tests/check_fs_dirsnap.c tests it on its own.
 * Thread-safety: the table locks itself; a snapshot being filled is its
 * filler's only, and a published one is read-only while held.
 */
#ifndef SBFS_FS_DIRSNAP_H
#define SBFS_FS_DIRSNAP_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct dirsnap_entry {
	char *name;
	struct stat st;
	bool plus; /* st holds the entry's attributes */
};

struct dirsnap {
	uint64_t ino; /* the directory's node */
	uint32_t gen; /* 0 until published */
	uint64_t mark; /* the caller's, e.g. the cache's mark when listed */
	struct dirsnap_entry *e;
	size_t n, cap;
	/* the table's */
	unsigned refs;
	bool done;
	struct dirsnap *next;
};

struct dirsnaps;

/* A table that keeps, apart from the snapshots held, at most max_snaps
 * snapshots and max_entries entries. */
struct dirsnaps *dirsnaps_new(size_t max_snaps, size_t max_entries);
void dirsnaps_free(struct dirsnaps *t);

/* A new snapshot of ino to fill with dirsnap_add, then publish, or drop
 * with dirsnap_drop. */
struct dirsnap *dirsnap_begin(uint64_t ino, uint64_t mark);
void dirsnap_add(struct dirsnap *s, const char *name, const struct stat *st,
		 bool plus);
void dirsnap_drop(struct dirsnap *s);

/* Give s its generation and put it in the table, held by the caller. */
void dirsnaps_publish(struct dirsnaps *t, struct dirsnap *s);

/* The snapshot of ino with generation gen, held; NULL when it went. */
struct dirsnap *dirsnaps_get(struct dirsnaps *t, uint64_t ino, uint32_t gen);

/* Let go of s; with done, its reader reached the end: it goes once
 * nobody holds it. */
void dirsnaps_put(struct dirsnaps *t, struct dirsnap *s, bool done);

/* How many snapshots the table keeps (held ones too). */
size_t dirsnaps_count(struct dirsnaps *t);

/* The offset after entry k of s, and back: the generation and the index
 * of the next entry. Offset 0 parses as generation 0, index 0: a new
 * listing. */
uint64_t dirsnap_off(const struct dirsnap *s, size_t k);
void dirsnap_parse(uint64_t off, uint32_t *gen, size_t *next);

#endif
