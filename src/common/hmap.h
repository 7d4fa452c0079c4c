/* SPDX-License-Identifier: MIT */
/*
 * hmap: an intrusive hash table with chaining, for the tables of the tree
 * whose entries already live in structs of their own (the mount's
 * attribute cache, its prefetched bodies, its node table).
 *
 * An entry embeds a struct hmap_node and is found again with
 * hmap_entry(). The caller hashes (hmap_hash_str, hmap_hash_bytes, or any
 * 64-bit value such as an id: the table mixes it before taking its low
 * bits) and compares keys: hmap_first/hmap_next walk the entries
 * whose hash is equal, and the caller keeps the one whose key is. The
 * table doubles its slots when it holds as many entries as slots, so a
 * chain stays short whatever the number of entries; it never shrinks.
 *
 * Ownership: the table owns its slot array only; entries are the
 * caller's, and hmap_cleanup frees none of them (remove or free them
 * first, e.g. while walking an eviction list of their own).
 *
 * Thread-safety: none. Each user guards its table with its own lock.
 * Errors: none; allocation aborts (xalloc.h), as every slot array is
 * sized by the caller's own entries, never by a remote peer.
 */
#ifndef SBFS_COMMON_HMAP_H
#define SBFS_COMMON_HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmap_node {
	struct hmap_node *next; /* the chain of one slot */
	uint64_t hash;
};

struct hmap {
	struct hmap_node **slot;
	size_t nslots; /* a power of two */
	size_t n; /* entries held */
};

/* The struct of type that holds node as its member. */
#define hmap_entry(node, type, member) \
	((type *)(void *)((char *)(node)-offsetof(type, member)))

/* The seed of the FNV-1a hashes below; a composite key hashes its parts
 * in turn, each call's result the next one's seed. */
#define HMAP_SEED 14695981039346656037ULL

/* An empty table of at least min_slots slots (rounded up to a power of
 * two; 0 is taken as 1). */
void hmap_init(struct hmap *m, size_t min_slots);
/* Free the slot array (not the entries); the table is empty and unusable
 * until hmap_init. NULL-safe. */
void hmap_cleanup(struct hmap *m);

/* Add node with hash. An entry of an equal key already in the table is
 * not replaced: the caller looks it up first. */
void hmap_insert(struct hmap *m, struct hmap_node *node, uint64_t hash);
/* Take node (which must be in m) out of the table. */
void hmap_remove(struct hmap *m, struct hmap_node *node);

/* The first entry whose hash is hash, or NULL; then the next one after
 * node, or NULL. The table must not change during the walk. */
struct hmap_node *hmap_first(const struct hmap *m, uint64_t hash);
struct hmap_node *hmap_next(const struct hmap_node *node, uint64_t hash);

/* Every entry, in no order: *cursor starts at 0 and prev at NULL, and
 * each call returns the entry after prev, NULL at the end. An entry may
 * be removed (and freed) once the call that was given it as prev has
 * returned; nothing else may change during the walk. */
struct hmap_node *hmap_walk(const struct hmap *m, size_t *cursor,
			    const struct hmap_node *prev);

/* Entries held. */
static inline size_t hmap_count(const struct hmap *m)
{
	return m->n;
}

/* FNV-1a over n bytes, or over a string without its NUL, from seed. */
uint64_t hmap_hash_bytes(const void *p, size_t n, uint64_t seed);
uint64_t hmap_hash_str(const char *s, uint64_t seed);

#endif
