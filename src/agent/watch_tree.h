/* SPDX-License-Identifier: MIT */
/*
 * watch_tree: the tree of the directories the event watcher watches
 * (watch.c): one node per inotify watch, found by watch descriptor (to
 * name an event's path) and by parent and name (to follow renames, which
 * move a watched directory and everything beneath it without a word from
 * the kernel about the descendants).
 *
 * A tree belongs to one thread (the watcher's): no locking. Nodes are the
 * tree's; a pointer to one is valid until it is dropped or forgotten.
 */
#ifndef SBFS_AGENT_WATCH_TREE_H
#define SBFS_AGENT_WATCH_TREE_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/path.h"

/* The longest path an event carries: with its '/', PATH_MAX_BYTES on the
 * wire. */
#define WTREE_PATH_MAX (PATH_MAX_BYTES - 1)

/* A watched directory. */
struct wnode {
	struct wnode *parent, *child, *next, *prev; /* the tree */
	struct wnode *wd_link, *name_link; /* hash chains */
	char *name;
	size_t namelen;
	int wd;
	dev_t dev;
};

struct wtab {
	struct wnode **b;
	size_t nb, n;
};

/* All zero is an empty tree. */
struct wtree {
	struct wtab wds, names;
	struct wnode *root;
	size_t n; /* nodes, one watch each */
};

/* The node of watch descriptor wd, or NULL. */
struct wnode *wtree_find_wd(struct wtree *t, int wd);
/* parent's child called name, or NULL (also for a NULL parent). */
struct wnode *wtree_find_child(struct wtree *t, const struct wnode *parent,
			       const char *name);
/* A new node for wd: parent's child called name, or the root when parent
 * is NULL. */
struct wnode *wtree_add(struct wtree *t, struct wnode *parent, const char *name,
			int wd, dev_t dev);
/* Give n a place: parent's child called name (n has none). */
void wtree_attach(struct wtree *t, struct wnode *n, struct wnode *parent,
		  const char *name);
/* Take n from its place; it keeps its watch and its children. */
void wtree_detach(struct wtree *t, struct wnode *n);
/* Drop top and everything beneath it; with ifd >= 0 their watches too (a
 * directory that left the root; one removed loses its watch on its own). */
void wtree_drop(struct wtree *t, struct wnode *top, int ifd);
/* Forget every node, keeping the kernel's watches; *wds (may be NULL)
 * receives their descriptors (heap), the count is returned. */
size_t wtree_forget(struct wtree *t, int **wds);
/* The path of name in n (n's own when name is NULL), relative to the
 * root, into out[WTREE_PATH_MAX + 1]; false when it is longer. */
bool wtree_rel(const struct wnode *n, const char *name, char *out);
/* Whether a is n or one of n's ancestors. */
bool wtree_above(const struct wnode *a, const struct wnode *n);

#endif
