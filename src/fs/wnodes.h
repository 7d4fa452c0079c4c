/* SPDX-License-Identifier: MIT */
/*
 * wnodes: a mount's write state, one node per path open for writing (or
 * holding gathered bytes), and the flusher that sends gathered bytes at the
 * end of the gathering window (SEMANTICS.md, "Write errors stick"). It
 * keeps the nodes, their names across renames, the counts that tell open
 * files their cached bytes went stale or their bytes were lost, and the
 * window's timing; it does not decide what a write does nor send anything
 * itself: the owner's flush function does (fs_files.c: the agent's write).
 * Free of FUSE and of the agent, so it is tested on its own.
 *
 * Locking: the table's lock guards the list, each node's rel and refs, and
 * the orphan flag (set with both locks held); a node's own lock guards the
 * rest of it. Order: a node's lock, then the table's. The flush function
 * is called with the node's lock held. gen is atomic.
 */
#ifndef SBFS_FS_WNODES_H
#define SBFS_FS_WNODES_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/agent_client.h"
#include "common/buf.h"
#include "common/proto_files.h"

/* The largest extent of gathered bytes a node holds. */
#define WNODE_EXTENT_MAX (8UL * 1024 * 1024)

struct wnodes;

/* The write state of one path of one sandbox (owner: an opaque key the
 * table compares, the sandbox). */
struct wnode {
	struct wnodes *tab;
	const void *owner;
	char *rel; /* the table's lock (a rename changes it) */
	unsigned refs; /* the table's lock */
	pthread_mutex_t lock; /* guards everything below */
	struct buf data; /* the gathered extent */
	uint64_t off;
	bool dirty;
	bool append; /* the extent goes to the end of the file */
	long long dirty_ms; /* when the extent got its first byte */
	/* Changes made to the file's bytes or size through this mount: a
	 * reader's cached bytes are good only for the count they were read
	 * at. Atomic: counted without the lock (another name's change). */
	atomic_uint gen;
	/* Uploads that failed, and the last one's errno: a writer open at
	 * the time of a loss is told at its next write, fsync or close. */
	unsigned err_gen;
	int err;
	/* A mode that forbids the owner to write, asked for while the file
	 * is open: applied when the last descriptor closes. */
	bool has_final_mode;
	uint32_t final_mode;
	/* Times set while bytes were pending: sent with those bytes. */
	bool has_times;
	struct proto_time times[2];
	/* Made by this mount and not yet by the agent: the first upload
	 * creates it. */
	bool mk_pending;
	struct ac_create mk;
	struct proto_attr planned; /* its attributes until then */
	/* Removed while open: what is written to it goes nowhere, and the
	 * path is free for a new node. Both locks. */
	bool orphan;
	unsigned opens; /* open descriptors */
	struct wnode *next;
};

/* Send w's gathered bytes (w->lock held); a failure is the owner's to
 * record (wnode_lost). */
typedef int wnode_flush_fn(void *ctx, struct wnode *w);

/* A table whose flusher sends an extent window_ms after its first byte
 * (0: the owner sends every write at once, no flusher runs). */
int wnodes_new(long window_ms, wnode_flush_fn *flush, void *ctx,
	       struct wnodes **out) __attribute__((warn_unused_result));
/* Stop the flusher, send what every node still gathers, free the table.
 * Nodes still referenced (open files at an unmount) stay allocated and
 * must not be used. NULL-safe. */
void wnodes_free(struct wnodes *t);
long wnodes_window_ms(const struct wnodes *t);

/* The node of (owner, rel), made when there is none; a reference. */
struct wnode *wnode_get(struct wnodes *t, const void *owner, const char *rel);
/* The node of (owner, rel), with a reference, or NULL. */
struct wnode *wnode_find(struct wnodes *t, const void *owner, const char *rel);
void wnode_put(struct wnode *w);
/* A copy of the node's path as it is now. */
char *wnode_rel(struct wnode *w);
/* The file changed through this mount (any lock or none). */
void wnode_changed(struct wnode *w);
/* Bytes a writer was told were written could not be stored (w->lock
 * held): rc, or -EIO. */
void wnode_lost(struct wnode *w, int rc);
/* w now gathers bytes (w->lock held): its window starts now unless it was
 * already dirty, and the flusher runs. */
void wnode_dirtied(struct wnode *w);
/* Remove w from its path (w->lock held): a new node may take the path. */
void wnode_orphan(struct wnode *w);

/* The nodes pick chooses (called with the table's lock held), each with a
 * reference: put them back with wnodes_put. */
typedef bool wnode_pick_fn(const struct wnode *w, const void *arg);
size_t wnodes_pick(struct wnodes *t, wnode_pick_fn *pick, const void *arg,
		   struct wnode ***out);
void wnodes_put(struct wnode **v, size_t n);
/* A rename: every node of owner at or below from now lies below to. */
void wnodes_rekey(struct wnodes *t, const void *owner, const char *from,
		  const char *to);
/* Send every extent older than the window (all of them when all). */
void wnodes_flush_old(struct wnodes *t, bool all);

#endif
