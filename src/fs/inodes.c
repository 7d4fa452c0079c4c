/* SPDX-License-Identifier: MIT */
/*
 * inodes: node ids and names, two hash tables (common/hmap.h) over one set
 * of nodes (by id, and by parent and name). Contract in inodes.h.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "common/xalloc.h"
#include "fs/inodes.h"

struct inode {
	struct hmap_node id_node; /* in the id table */
	struct hmap_node name_node; /* in the name table (when named) */
	uint64_t ino;
	uint64_t nlookup;
	struct inode *parent; /* NULL: the root */
	char *name; /* NULL: the root */
	size_t nchildren; /* nodes whose parent this is */
	unsigned nopen;
	bool hidden; /* unlinked while open: remove at the last close */
	bool detached; /* its name is gone: out of the name table */
	bool removed; /* its hidden name too: only the path it had */
	char *former; /* hidden: the path it had before (inodes_hide) */
	bool vanished; /* removed in the sandbox while open: stale */
	bool relist; /* a directory whose entries' attributes the kernel
		      * dropped since its last listing (inodes_stale_attr) */
	uint64_t fino; /* the file's inode number in the sandbox, 0: unknown */
	int64_t fctime; /* its change time in ns, 0: unknown */
};

struct inodes {
	pthread_mutex_t lock;
	struct hmap ids;
	struct hmap names;
	uint64_t next_ino;
	struct inode *root;
};

static uint64_t name_hash(const struct inode *parent, const char *name)
{
	uint64_t seed = (uint64_t)(uintptr_t)parent;

	return hmap_hash_str(name,
			     hmap_hash_bytes(&seed, sizeof(seed), HMAP_SEED));
}

/* Ids are their own hashes: the first entry of an equal hash is it. */
static struct inode *by_id(struct inodes *t, uint64_t ino)
{
	struct hmap_node *n = hmap_first(&t->ids, ino);

	return n != NULL ? hmap_entry(n, struct inode, id_node) : NULL;
}

static struct inode *by_name(struct inodes *t, const struct inode *parent,
			     const char *name)
{
	uint64_t h = name_hash(parent, name);
	struct hmap_node *n;

	for (n = hmap_first(&t->names, h); n != NULL; n = hmap_next(n, h)) {
		struct inode *e = hmap_entry(n, struct inode, name_node);

		if (e->parent == parent && strcmp(e->name, name) == 0)
			return e;
	}
	return NULL;
}

static void name_link(struct inodes *t, struct inode *e, struct inode *parent,
		      char *name)
{
	e->parent = parent;
	e->name = name;
	parent->nchildren++;
	hmap_insert(&t->names, &e->name_node, name_hash(parent, name));
}

static void maybe_free(struct inodes *t, struct inode *e);

/* Take e out of the name table (a detached node is not in it). */
static void hash_remove(struct inodes *t, struct inode *e)
{
	if (e->detached) {
		e->detached = false;
		return;
	}
	hmap_remove(&t->names, &e->name_node);
}

/* Take e out of the name table; its old parent may go with it. */
static void name_unlink(struct inodes *t, struct inode *e)
{
	struct inode *parent = e->parent;

	if (e->name == NULL)
		return;
	hash_remove(t, e);
	free(e->name);
	e->name = NULL;
	e->parent = NULL;
	parent->nchildren--;
	maybe_free(t, parent);
}

/* Free e when nothing holds it any more (never the root). */
static void maybe_free(struct inodes *t, struct inode *e)
{
	if (e == t->root || e->nlookup > 0 || e->nchildren > 0 || e->nopen > 0)
		return;
	hmap_remove(&t->ids, &e->id_node);
	name_unlink(t, e);
	free(e->former);
	free(e);
}

struct inodes *inodes_new(void)
{
	struct inodes *t = xcalloc(1, sizeof(*t));

	pthread_mutex_init(&t->lock, NULL);
	hmap_init(&t->ids, 1024);
	hmap_init(&t->names, 1024);
	t->root = xcalloc(1, sizeof(*t->root));
	t->root->ino = INODES_ROOT;
	t->next_ino = INODES_ROOT + 1;
	hmap_insert(&t->ids, &t->root->id_node, INODES_ROOT);
	return t;
}

void inodes_free(struct inodes *t)
{
	struct hmap_node *n, *next;
	size_t cursor = 0;

	if (t == NULL)
		return;
	for (n = hmap_walk(&t->ids, &cursor, NULL); n != NULL; n = next) {
		struct inode *e = hmap_entry(n, struct inode, id_node);

		next = hmap_walk(&t->ids, &cursor, n);
		free(e->name);
		free(e->former);
		free(e);
	}
	hmap_cleanup(&t->ids);
	hmap_cleanup(&t->names);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* The path of e into buf, built from its name backwards. */
static int path_of(struct inodes *t, const struct inode *e, char *buf,
		   size_t size, bool loose)
{
	size_t at = size;
	const struct inode *p;

	if (size < 2)
		return -ENAMETOOLONG;
	buf[--at] = '\0';
	for (p = e; p != t->root; p = p->parent) {
		size_t n;

		if (p->vanished)
			return -ESTALE;
		if (p->name == NULL || (p->detached && (!loose || p->removed)))
			return -ENOENT;
		n = strlen(p->name);
		if (n + 1 > at)
			return -ENAMETOOLONG;
		at -= n;
		memcpy(buf + at, p->name, n);
		buf[--at] = '/';
	}
	if (at == size - 1)
		buf[--at] = '/';
	memmove(buf, buf + at, size - at);
	return 0;
}

int inodes_path(struct inodes *t, uint64_t ino, char *buf, size_t size)
{
	return inodes_path_flags(t, ino, 0, buf, size);
}

int inodes_path_flags(struct inodes *t, uint64_t ino, unsigned flags, char *buf,
		      size_t size)
{
	struct inode *e;
	int rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL && e->removed && e->former != NULL &&
	    (flags & INODES_DETACHED_OK)) {
		rc = strlen(e->former) < size ? 0 : -ENAMETOOLONG;
		if (rc == 0)
			memcpy(buf, e->former, strlen(e->former) + 1);
	} else if (e != NULL) {
		rc = path_of(t, e, buf, size,
			     (flags & INODES_DETACHED_OK) != 0);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int inodes_child_path(struct inodes *t, uint64_t parent, const char *name,
		      char *buf, size_t size)
{
	size_t len, n = strlen(name);
	int rc = inodes_path(t, parent, buf, size);

	if (rc < 0)
		return rc;
	len = strlen(buf);
	if (len > 1)
		buf[len++] = '/';
	else
		len = 1;
	if (len + n + 1 > size)
		return -ENAMETOOLONG;
	memcpy(buf + len, name, n + 1);
	return 0;
}

int inodes_lookup(struct inodes *t, uint64_t parent, const char *name,
		  uint64_t *ino)
{
	struct inode *p, *e;
	int rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	p = by_id(t, parent);
	if (p == NULL || p->detached || (p != t->root && p->name == NULL))
		goto out;
	e = by_name(t, p, name);
	if (e == NULL) {
		e = xcalloc(1, sizeof(*e));
		e->ino = t->next_ino++;
		hmap_insert(&t->ids, &e->id_node, e->ino);
		name_link(t, e, p, xstrdup(name));
	}
	e->nlookup++;
	*ino = e->ino;
	rc = 0;
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* name in the node parent, or NULL (t->lock held). */
static struct inode *child(struct inodes *t, uint64_t parent, const char *name)
{
	struct inode *p = by_id(t, parent);

	return p != NULL ? by_name(t, p, name) : NULL;
}

uint64_t inodes_peek(struct inodes *t, uint64_t parent, const char *name)
{
	struct inode *e;
	uint64_t ino = 0;

	pthread_mutex_lock(&t->lock);
	e = child(t, parent, name);
	if (e != NULL)
		ino = e->ino;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

void inodes_forget(struct inodes *t, uint64_t ino, uint64_t n)
{
	struct inode *e;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL && e != t->root) {
		e->nlookup = n < e->nlookup ? e->nlookup - n : 0;
		maybe_free(t, e);
	}
	pthread_mutex_unlock(&t->lock);
}

/* Detach e from its name: nobody finds it by name any more, and it lives
 * on, remembering the name it had, while something holds it. */
static void detach(struct inodes *t, struct inode *e)
{
	hash_remove(t, e);
	e->detached = true;
	maybe_free(t, e);
}

void inodes_remove(struct inodes *t, uint64_t parent, const char *name)
{
	struct inode *p, *e;

	pthread_mutex_lock(&t->lock);
	p = by_id(t, parent);
	e = p != NULL ? by_name(t, p, name) : NULL;
	if (e != NULL)
		detach(t, e);
	pthread_mutex_unlock(&t->lock);
}

void inodes_set_fino(struct inodes *t, uint64_t ino, uint64_t fino,
		     int64_t ctime_ns)
{
	struct inode *e;

	if (fino == 0)
		return;
	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	/* An open file keeps the identity it was opened with: another
	 * number under its name is another file there (replaced in the
	 * sandbox), which the change events settle (inodes_vanish); taken
	 * here, it would have the descriptors read and write the new file. */
	if (e != NULL && !(e->nopen > 0 && e->fino != 0 && e->fino != fino)) {
		if (ctime_ns != 0 || e->fino != fino)
			e->fctime = ctime_ns;
		e->fino = fino;
	}
	pthread_mutex_unlock(&t->lock);
}

uint64_t inodes_open_fino(struct inodes *t, uint64_t parent, const char *name,
			  uint64_t *ino, int64_t *ctime_ns)
{
	struct inode *p, *e = NULL;
	uint64_t fino = 0;

	*ctime_ns = 0;
	pthread_mutex_lock(&t->lock);
	p = by_id(t, parent);
	if (p != NULL)
		e = by_name(t, p, name);
	if (e != NULL && e->nopen > 0) {
		fino = e->fino;
		*ctime_ns = e->fctime;
		*ino = e->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return fino;
}

void inodes_vanish(struct inodes *t, uint64_t parent, const char *name)
{
	struct inode *p, *e;

	pthread_mutex_lock(&t->lock);
	p = by_id(t, parent);
	e = p != NULL ? by_name(t, p, name) : NULL;
	if (e != NULL) {
		e->vanished = true;
		detach(t, e);
	}
	pthread_mutex_unlock(&t->lock);
}

void inodes_rename(struct inodes *t, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, bool exchange)
{
	struct inode *p, *np, *e, *target;

	pthread_mutex_lock(&t->lock);
	p = by_id(t, parent);
	np = by_id(t, newparent);
	if (p == NULL || np == NULL)
		goto out;
	e = by_name(t, p, name);
	target = by_name(t, np, newname);
	if (e == target)
		goto out;
	/* Hold both parents while names move: unlinking the last child
	 * must not free a parent that is about to get one. */
	p->nchildren++;
	np->nchildren++;
	if (exchange) {
		if (e != NULL)
			name_unlink(t, e);
		if (target != NULL)
			name_unlink(t, target);
		if (e != NULL)
			name_link(t, e, np, xstrdup(newname));
		if (target != NULL)
			name_link(t, target, p, xstrdup(name));
	} else {
		if (target != NULL)
			detach(t, target);
		if (e != NULL) {
			name_unlink(t, e);
			name_link(t, e, np, xstrdup(newname));
		}
	}
	p->nchildren--;
	np->nchildren--;
	maybe_free(t, p);
	if (np != p)
		maybe_free(t, np);
out:
	pthread_mutex_unlock(&t->lock);
}

void inodes_open(struct inodes *t, uint64_t ino)
{
	struct inode *e;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL)
		e->nopen++;
	pthread_mutex_unlock(&t->lock);
}

uint64_t inodes_stale_attr(struct inodes *t, uint64_t ino)
{
	struct inode *e;
	uint64_t dir = 0;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL && e->parent != NULL && !e->parent->relist) {
		e->parent->relist = true;
		dir = e->parent->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return dir;
}

void inodes_relisted(struct inodes *t, uint64_t ino)
{
	struct inode *e;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL)
		e->relist = false;
	pthread_mutex_unlock(&t->lock);
}

bool inodes_close(struct inodes *t, uint64_t ino, char *path, size_t size,
		  uint64_t *parent)
{
	struct inode *e;
	bool last_hidden = false;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL && e->nopen > 0) {
		e->nopen--;
		if (e->nopen == 0 && e->hidden &&
		    path_of(t, e, path, size, false) == 0) {
			last_hidden = true;
			*parent = e->parent->ino;
			e->hidden = false;
			e->removed = true;
			detach(t, e);
		} else {
			maybe_free(t, e);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return last_hidden;
}

uint64_t inodes_open_child(struct inodes *t, uint64_t parent, const char *name)
{
	struct inode *e;
	uint64_t ino = 0;

	pthread_mutex_lock(&t->lock);
	e = child(t, parent, name);
	if (e != NULL && e->nopen > 0)
		ino = e->ino;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

void inodes_hide(struct inodes *t, uint64_t ino, const char *former)
{
	struct inode *e;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL) {
		e->hidden = true;
		free(e->former);
		e->former = xstrdup(former);
	}
	pthread_mutex_unlock(&t->lock);
}

int inodes_find(struct inodes *t, const char *path, uint64_t *ino,
		uint64_t *parent)
{
	char name[256];
	struct inode *e, *p = NULL;
	int rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	e = t->root;
	while (e != NULL) {
		size_t n;

		while (*path == '/')
			path++;
		if (*path == '\0')
			break;
		n = strcspn(path, "/");
		if (n >= sizeof(name)) {
			e = NULL;
			break;
		}
		memcpy(name, path, n);
		name[n] = '\0';
		path += n;
		p = e;
		e = by_name(t, p, name);
	}
	if (e != NULL) {
		*ino = e->ino;
		*parent = p != NULL ? p->ino : 0;
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

size_t inodes_below(struct inodes *t, const char *path, uint64_t *ids,
		    size_t max)
{
	uint64_t top, parent;
	struct hmap_node *node = NULL;
	struct inode *e, *p;
	size_t cursor = 0, n = 0;

	if (inodes_find(t, path, &top, &parent) < 0)
		return 0;
	pthread_mutex_lock(&t->lock);
	/* Every node whose chain of parents reaches top: a walk up from
	 * each, as deep as the tree. */
	while (n < max && (node = hmap_walk(&t->ids, &cursor, node)) != NULL) {
		e = hmap_entry(node, struct inode, id_node);
		for (p = e->parent; p != NULL && p->ino != top; p = p->parent)
			;
		if (p != NULL)
			ids[n++] = e->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t inodes_count(struct inodes *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = hmap_count(&t->ids);
	pthread_mutex_unlock(&t->lock);
	return n;
}
