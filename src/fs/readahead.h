/* SPDX-License-Identifier: MIT */
/*
 * readahead: a sequential reader's window of chunks fetched ahead, in
 * parallel, by a small pool of workers, under a memory budget that all the
 * streams of one pool share. It knows neither FUSE nor the agent: the
 * caller gives a fetch function (a ranged read with a validator).
 *
 * The promise that shapes it (SEMANTICS.md, "Reads are exact"): it never
 * decides how many bytes a read returns. ra_read copies the longest prefix
 * of the asked range that ready (or arriving) chunks hold and says whether
 * that prefix ends at the end of the file as the chunk's fetch saw it; the
 * caller reads whatever is left directly. A chunk that failed, went stale
 * or was never fetched is simply not there. So a read is answered in full
 * (or fails) whatever the state of the window, however many readers there
 * are, and the window's only effect is speed.
 *
 * All bytes a stream serves come from one version of the file (one entity
 * tag): chunks are fetched with If-Match of the tag the stream holds, a
 * chunk whose fetch answers "changed" empties the window, and ra_observe
 * (what a direct read saw) empties it when the tag moved. ra_invalidate
 * empties it when the caller changed the file itself.
 *
 * Thread-safe: any thread may call any function; a stream's state is
 * guarded by its own lock, the pool's queue and budget by the pool's.
 */
#ifndef SBFS_FS_READAHEAD_H
#define SBFS_FS_READAHEAD_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto_files.h"

/* A chunk: the unit of one fetch. */
#define RA_CHUNK (4UL * 1024 * 1024)
/* Chunks one stream keeps ahead at most (64 MiB). */
#define RA_WINDOW_MAX 16

/*
 * Fetch len bytes at off into dst (ctx is the stream's). if_match, when not
 * NULL, is the tag the bytes must have. Fills *got (fewer than len only at
 * the end of the file), etag (PROTO_ETAG_MAX bytes, "" when unknown) and
 * *size (the whole file's size, UINT64_MAX when unknown). Returns 0, -ESTALE
 * when the file's tag is not if_match, or another negative errno. Called on
 * a worker thread; must be bounded in time (the transport's deadlines).
 */
typedef int ra_fetch_fn(void *ctx, uint64_t off, size_t len,
			const char *if_match, void *dst, size_t *got,
			char *etag, uint64_t *size);
/* Free a stream's ctx, once nothing can fetch with it any more. */
typedef void ra_ctx_free_fn(void *ctx);

struct readahead;
struct ra_stream;

/* A pool of workers (started on first need) sharing budget bytes of chunk
 * memory. */
int readahead_new(unsigned workers, size_t budget, struct readahead **out)
	__attribute__((warn_unused_result));
/* Wait for the fetches under way, stop the workers, free. Every stream
 * must have been closed. NULL-safe. */
void readahead_free(struct readahead *ra);
/* Chunk memory in use now (for tests and figures). */
size_t readahead_bytes(struct readahead *ra);

/* A stream for one open file; ctx is passed to fetch and freed with
 * ctx_free (may be NULL) when the stream is gone. */
struct ra_stream *ra_stream_new(struct readahead *ra, ra_fetch_fn *fetch,
				ra_ctx_free_fn *ctx_free, void *ctx);
/* The caller is done: chunks in flight are dropped when they land. */
void ra_stream_close(struct ra_stream *s);

/*
 * Serve [off, off + size) from the window as far as it can, waiting for a
 * chunk under way that holds the next byte. Returns the number of bytes
 * copied to buf from off (0 when the window has nothing there; the caller
 * then reads directly). *eof is set when those bytes end where the file
 * ended for the chunk that held them. etag (PROTO_ETAG_MAX bytes) receives
 * the tag of the bytes served ("" when none were). Keeps the window filled
 * ahead of a sequential reader.
 */
size_t ra_read(struct ra_stream *s, void *buf, size_t size, uint64_t off,
	       bool *eof, char *etag);

/* What a direct read saw: the file's tag and size (UINT64_MAX: unknown).
 * A tag other than the stream's empties the window. */
void ra_observe(struct ra_stream *s, const char *etag, uint64_t size);

/* The file was changed through this mount: forget every chunk, the tag and
 * the size. */
void ra_invalidate(struct ra_stream *s);

#endif
