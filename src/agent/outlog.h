/* SPDX-License-Identifier: MIT */
/*
 * outlog: the bytes the agent keeps of one job's output (doc/commands.md,
 * "Jobs"), as a log with positions that only grow: [head, tail) is kept,
 * at most cap bytes of it. The first bytes live in a memory ring of at
 * most mem_max bytes; once more is kept at once, the log moves to a ring
 * file of cap bytes in the spool directory: an unlinked file (O_TMPFILE,
 * or a name removed at once) in the agent's private directory, never
 * beneath the session root. Dropping the oldest bytes moves head on.
 *
 * It knows nothing of records or jobs: jobs.c writes and reads its
 * records through it. Not thread-safe: the registry's lock guards it.
 */
#ifndef SBFS_AGENT_OUTLOG_H
#define SBFS_AGENT_OUTLOG_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stddef.h>
#include <stdint.h>

struct outlog {
	uint64_t head; /* first byte kept */
	uint64_t tail; /* one past the last */
	uint64_t cap; /* most bytes kept at once */
	unsigned char *mem; /* the memory ring, NULL once in the file */
	size_t mem_size; /* its size */
	size_t mem_max; /* past this the log moves to the file */
	int fd; /* the ring file, -1 while in memory */
	const char *dir; /* borrowed; NULL: memory only */
};

/* An empty log. dir (borrowed, may be NULL for memory only, mem_max is
 * then ignored) must outlive the log. */
void outlog_init(struct outlog *l, uint64_t cap, size_t mem_max,
		 const char *dir);
/* Free the memory, close the file. NULL-safe. */
void outlog_cleanup(struct outlog *l);

/*
 * Append a then b (either may be empty) as one piece. -ENOSPC when the
 * log would hold more than cap (drop first); -EFBIG when it cannot grow
 * in memory without a spool directory; a negative errno from making or
 * writing the file (the log is unchanged then, and stays usable).
 */
int outlog_append(struct outlog *l, const void *a, size_t an, const void *b,
		  size_t bn) __attribute__((warn_unused_result));
/* Copy n kept bytes at pos (head <= pos, pos + n <= tail) to dst. 0, or a
 * negative errno from reading the file. */
int outlog_read(const struct outlog *l, uint64_t pos, void *dst, size_t n)
	__attribute__((warn_unused_result));
/* Forget the bytes before pos (head <= pos <= tail). */
void outlog_drop(struct outlog *l, uint64_t pos);

/* Bytes kept. */
static inline uint64_t outlog_used(const struct outlog *l)
{
	return l->tail - l->head;
}

#endif
