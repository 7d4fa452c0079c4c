/* SPDX-License-Identifier: MIT */
/*
 * prefetch: the small files of a directory that a program walks (grep -r,
 * rsync, tar c, cp -r), fetched a directory at a time (GET contents) while
 * the program goes from file to file, so that each file's first read is
 * answered without a round trip of its own.
 *
 * A directory is fetched when a file in it is opened for reading within
 * the attribute timeout after the directory was listed, or when a second
 * file in it is (a single cat fetches nothing). The bodies
 * wait in a bounded store; a body is served once, to the first handle
 * that reads its file, and only while the attributes the mount holds for
 * the file (refreshed by the same answer) still name the same contents:
 * any change this mount makes to the file forgets those attributes, and
 * none is older than attr_timeout. Each mount has its own (fs->pf).
 * Thread-safe.
 */
#ifndef SBFS_FS_PREFETCH_H
#define SBFS_FS_PREFETCH_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif
#include <stdbool.h>
#include <stddef.h>

#include "common/proto_files.h"

#define PREFETCH_MAX_BYTES (64UL * 1024 * 1024) /* bodies held, all dirs */
#define PREFETCH_MAX_FILES 8192
#define PREFETCH_FILE_MAX (256UL * 1024) /* larger files are read as usual */
#define PREFETCH_ANSWER_MAX (8UL * 1024 * 1024) /* contents per request */

struct sbfs;
struct prefetch;

/* A mount's read-ahead of walked directories (its workers start on first
 * need). */
int prefetch_new(struct prefetch **out) __attribute__((warn_unused_result));
/* Before the mount goes away: no new fetches, the queued ones dropped, the
 * ones under way waited for (each is bounded by the mount's deadlines),
 * and everything held freed. NULL-safe. */
void prefetch_free(struct prefetch *pf);

/* Directory dir (in sandbox sbx) was listed: a walker lists a directory
 * before it opens the files in it, so its first open there fetches. */
void prefetch_listed(struct sbfs *fs, const char *sbx, const char *dir);

/* rel (in sandbox sbx) was opened for reading. */
void prefetch_opened(struct sbfs *fs, const char *sbx, const char *rel);

/*
 * The prefetched contents of rel, when there are some that match the
 * attributes the mount holds for it: a heap copy in *data (the caller
 * frees it), its length and its validator (PROTO_ETAG_MAX bytes). When a
 * fetch of rel's directory is under way it is waited for (as long as a
 * request may take). false otherwise.
 */
bool prefetch_take(struct sbfs *fs, const char *sbx, const char *rel,
		   char **data, size_t *len, char *etag);

/* Drop what is held for a sandbox (it was removed or restarted). */
void prefetch_drop_sandbox(struct sbfs *fs, const char *sbx);

#endif
