/* SPDX-License-Identifier: MIT */
/*
 * cache: what the mount remembers about files/ between operations, bounded
 * and timed:
 *  - attributes (and symlink targets) of paths, valid for the attribute
 *    timeout: filled by listings (readdir-plus) and stats, so that a stat
 *    or readlink right after a listing costs no round trip;
 *  - for files whose pages the kernel may hold, the validator (ETag) of
 *    the contents those pages came from: an open keeps the page cache only
 *    while the file's validator is unchanged.
 * Keys are (sandbox id, path relative to the session root). Entries past
 * the bounds are dropped least recently used first.
 *
 * Thread-safe (one mutex; no call blocks on I/O).
 */
#ifndef SBFS_FS_CACHE_H
#define SBFS_FS_CACHE_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto_files.h"

#define CACHE_MAX_ATTRS 65536
#define CACHE_MAX_CONTENT 16384

struct cache;

/* ttl_s: how long attributes stay valid (0 disables the attribute
 * cache; the content validators are kept regardless). */
int cache_new(double ttl_s, struct cache **out)
	__attribute__((warn_unused_result));
void cache_free(struct cache *c);

/*
 * Answers race with this mount's own changes: a stat asked before a write
 * may come back after the write's answer, with the old size. So an answer
 * that only observes (a stat, a listing) is put with the mark taken before
 * it was asked for, and dropped when its path changed through this mount
 * since (put, forget, touch, a listing change); the answers to the
 * mount's own changes (cache_put, cache_dir_put) are changes themselves.
 */
#define CACHE_MAX_CHANGES 16384
uint64_t cache_mark(struct cache *c);

/* fn is told of every attribute the cache keeps (after the cache's lock
 * is let go; not for answers dropped as older than a change). Set before
 * the cache is used. */
void cache_on_put(struct cache *c,
		  void (*fn)(void *ud, const char *sbx, const char *rel,
			     const struct proto_attr *a),
		  void *ud);

/* Remember attributes (and a symlink's target, may be NULL) that this
 * mount's own change brought. */
void cache_put(struct cache *c, const char *sbx, const char *rel,
	       const struct proto_attr *a, const char *target);
/* Remember attributes an answer asked for at mark observed, unless rel
 * changed since. */
void cache_put_seen(struct cache *c, const char *sbx, const char *rel,
		    const struct proto_attr *a, const char *target,
		    uint64_t mark);
/* Fresh attributes into *a, and (when target is not NULL) a heap copy of
 * the symlink target (NULL when none). false when unknown or expired. */
bool cache_get(struct cache *c, const char *sbx, const char *rel,
	       struct proto_attr *a, char **target);
/* The type, mode and owner of a path, also after cache_touch (within the
 * timeout): what permission decisions need. */
bool cache_get_access(struct cache *c, const char *sbx, const char *rel,
		      struct proto_attr *a);
/* A directory's entries changed through this mount: its times and link
 * count are no longer known (cache_get misses), its mode and owner still
 * are (cache_get_access). */
void cache_touch(struct cache *c, const char *sbx, const char *rel);
/* Forget one path's attributes. */
void cache_forget(struct cache *c, const char *sbx, const char *rel);
/* Forget a path and everything below it (rename or removal of a
 * directory), attributes and validators. */
void cache_forget_tree(struct cache *c, const char *sbx, const char *rel);
/* Forget the attributes of every path of sbx that has inode number ino
 * (the names of a hard-linked file, after a change through one of them).
 * *rels receives their paths (a heap array of heap strings, NULL when
 * none); returns how many. */
size_t cache_forget_ino(struct cache *c, const char *sbx, uint64_t ino,
			char ***rels);
/* Forget everything about a sandbox. */
void cache_drop_sandbox(struct cache *c, const char *sbx);

/* How long sbx's attributes and listings stored from now on stay fresh:
 * the sandbox tells its changes from now on (doc/internals/cache.md), or
 * no longer does. Those stored before keep cache_new's ttl_s (they may
 * predate what is told). Without a call: cache_new's ttl_s. */
void cache_sandbox_ttl(struct cache *c, const char *sbx, double ttl_s);

/* Whether rel changed (a put, a forget, a subtree or sandbox forgotten)
 * since mark: an answer asked for at mark must not be kept long. */
bool cache_changed_since(struct cache *c, const char *sbx, const char *rel,
			 uint64_t mark);

/*
 * Directory listings: the names in a directory, as a listing (or this
 * mount's own changes since) last showed them, valid for the attribute
 * timeout. They let readdir skip a round trip after a subtree was fetched
 * in one answer, and let a lookup of a name the listing does not hold be
 * answered "no such file" without asking the agent. Their children's
 * attributes live in the attribute cache.
 */
#define CACHE_MAX_DIRS 16384

/* Remember dir's complete listing: n names with their types (this mount
 * made it so; cache_dir_put_seen for a listing asked for at mark). */
void cache_dir_put(struct cache *c, const char *sbx, const char *dir,
		   const char *const *names, const enum proto_ftype *types,
		   size_t n);
void cache_dir_put_seen(struct cache *c, const char *sbx, const char *dir,
			const char *const *names, const enum proto_ftype *types,
			size_t n, uint64_t mark);
/* A fresh listing of dir: calls fn for each name (under the cache lock:
 * fn must not call back into the cache) and returns true; false when
 * unknown or expired. */
bool cache_dir_each(struct cache *c, const char *sbx, const char *dir,
		    void (*fn)(void *ud, const char *name,
			       enum proto_ftype type),
		    void *ud);
/* With a fresh listing of dir: true, and *present says whether name is in
 * it. false when there is none. */
bool cache_dir_lookup(struct cache *c, const char *sbx, const char *dir,
		      const char *name, bool *present);
/* Keep a listing in step with this mount's own change (no-op when dir has
 * no listing). */
void cache_dir_add(struct cache *c, const char *sbx, const char *dir,
		   const char *name, enum proto_ftype type);
void cache_dir_remove(struct cache *c, const char *sbx, const char *dir,
		      const char *name);
/* Forget dir's listing. */
void cache_dir_forget(struct cache *c, const char *sbx, const char *dir);

/* The validator of the contents the kernel's pages came from. */
void cache_set_content(struct cache *c, const char *sbx, const char *rel,
		       const char *etag);
/* true and etag (PROTO_ETAG_MAX bytes) when pages may be held. */
bool cache_get_content(struct cache *c, const char *sbx, const char *rel,
		       char *etag);
void cache_forget_content(struct cache *c, const char *sbx, const char *rel);

#endif
