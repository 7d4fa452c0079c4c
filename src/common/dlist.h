/* SPDX-License-Identifier: MIT */
/*
 * dlist: an intrusive doubly linked list, for the lists of the tree whose
 * entries live in structs of their own and leave from anywhere in the
 * list (connections, parked replies, entries by age).
 *
 * An entry embeds a struct dlist_node and is found again with
 * dlist_item(). A list starts zeroed (calloc or memset) and knows
 * its first and last entry and how many it holds, so an entry joins at either end and leaves
 * in constant time.
 *
 * Ownership: the list owns nothing; entries are the caller's.
 * Thread-safety: none. Each user guards its list with its own lock.
 */
#ifndef SBFS_COMMON_DLIST_H
#define SBFS_COMMON_DLIST_H

#include <stddef.h>

struct dlist_node {
	struct dlist_node *prev, *next;
};

struct dlist {
	struct dlist_node *first, *last;
	size_t n; /* entries in the list */
};

/* The struct of type that holds node as its member; NULL for a NULL node
 * (an end of the list, or past it), so a walk is
 * for (e = dlist_item(l.first, ...); e != NULL;
 *      e = dlist_item(e->member.next, ...)). */
#define dlist_item(node, type, member) \
	((type *)dlist_item_at((node), offsetof(type, member)))

/* The address offset bytes before n, or NULL for a NULL n. */
static inline void *dlist_item_at(struct dlist_node *n, size_t offset)
{
	return n != NULL ? (void *)((char *)n - offset) : NULL;
}

/* Add n (in no list) at the front or at the back of l. */
void dlist_push_front(struct dlist *l, struct dlist_node *n);
void dlist_push_back(struct dlist *l, struct dlist_node *n);
/* Take n (which must be in l) out of l; its links are cleared. */
void dlist_remove(struct dlist *l, struct dlist_node *n);
/* Take the first entry out of l and return it; NULL when l is empty. */
struct dlist_node *dlist_pop_front(struct dlist *l);

#endif
