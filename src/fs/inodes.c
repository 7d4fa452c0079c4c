/* SPDX-License-Identifier: MIT */
/*
 * inodes: node ids and names, two hash tables over one set of nodes (by
 * id, and by parent and name). Contract in inodes.h.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "fs/inodes.h"

struct inode {
	struct inode *id_next; /* chain of the id table */
	struct inode *name_next; /* chain of the name table (when named) */
	uint64_t ino;
	uint64_t nlookup;
	struct inode *parent; /* NULL: the root */
	char *name; /* NULL: the root */
	size_t nchildren; /* nodes whose parent this is */
	unsigned nopen;
	bool hidden; /* unlinked while open: remove at the last close */
	bool detached; /* its name is gone: out of the name table */
	bool removed; /* its hidden name too: no path at all */
};

struct table {
	struct inode **slot;
	size_t nslots; /* a power of two */
	size_t n;
};

struct inodes {
	pthread_mutex_t lock;
	struct table ids;
	struct table names;
	uint64_t next_ino;
	struct inode *root;
};

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static uint64_t name_hash(const struct inode *parent, const char *name)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uintptr_t)parent;

	while (*name != '\0')
		h = (h ^ (unsigned char)*name++) * 1099511628211ULL;
	return mix(h);
}

static struct inode **id_slot(struct inodes *t, uint64_t ino)
{
	return &t->ids.slot[mix(ino) & (t->ids.nslots - 1)];
}

static struct inode **name_slot(struct inodes *t, const struct inode *parent,
				const char *name)
{
	return &t->names.slot[name_hash(parent, name) & (t->names.nslots - 1)];
}

/* Double a table's slots when it holds as many nodes as slots. */
static void grow(struct inodes *t, struct table *tab, bool by_name)
{
	struct inode **old = tab->slot;
	size_t i, n = tab->nslots;

	if (tab->n < tab->nslots)
		return;
	tab->nslots *= 2;
	tab->slot = xcalloc(tab->nslots, sizeof(*tab->slot));
	for (i = 0; i < n; i++) {
		struct inode *e = old[i], *next;

		for (; e != NULL; e = next) {
			struct inode **s;

			if (by_name) {
				next = e->name_next;
				s = name_slot(t, e->parent, e->name);
				e->name_next = *s;
			} else {
				next = e->id_next;
				s = id_slot(t, e->ino);
				e->id_next = *s;
			}
			*s = e;
		}
	}
	free(old);
}

static struct inode *by_id(struct inodes *t, uint64_t ino)
{
	struct inode *e = *id_slot(t, ino);

	while (e != NULL && e->ino != ino)
		e = e->id_next;
	return e;
}

static struct inode *by_name(struct inodes *t, const struct inode *parent,
			     const char *name)
{
	struct inode *e = *name_slot(t, parent, name);

	while (e != NULL && (e->parent != parent || strcmp(e->name, name) != 0))
		e = e->name_next;
	return e;
}

static void name_link(struct inodes *t, struct inode *e, struct inode *parent,
		      char *name)
{
	struct inode **s;

	e->parent = parent;
	e->name = name;
	parent->nchildren++;
	grow(t, &t->names, true);
	s = name_slot(t, parent, name);
	e->name_next = *s;
	*s = e;
	t->names.n++;
}

static void maybe_free(struct inodes *t, struct inode *e);

/* Take e out of the name table (a detached node is not in it). */
static void hash_remove(struct inodes *t, struct inode *e)
{
	struct inode **s;

	if (e->detached) {
		e->detached = false;
		return;
	}
	s = name_slot(t, e->parent, e->name);
	while (*s != e)
		s = &(*s)->name_next;
	*s = e->name_next;
	e->name_next = NULL;
	t->names.n--;
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
	e->name_next = NULL;
	parent->nchildren--;
	maybe_free(t, parent);
}

/* Free e when nothing holds it any more (never the root). */
static void maybe_free(struct inodes *t, struct inode *e)
{
	struct inode **s;

	if (e == t->root || e->nlookup > 0 || e->nchildren > 0 || e->nopen > 0)
		return;
	s = id_slot(t, e->ino);
	while (*s != e)
		s = &(*s)->id_next;
	*s = e->id_next;
	t->ids.n--;
	name_unlink(t, e);
	free(e);
}

struct inodes *inodes_new(void)
{
	struct inodes *t = xcalloc(1, sizeof(*t));

	pthread_mutex_init(&t->lock, NULL);
	t->ids.nslots = 1024;
	t->ids.slot = xcalloc(t->ids.nslots, sizeof(*t->ids.slot));
	t->names.nslots = 1024;
	t->names.slot = xcalloc(t->names.nslots, sizeof(*t->names.slot));
	t->root = xcalloc(1, sizeof(*t->root));
	t->root->ino = INODES_ROOT;
	t->next_ino = INODES_ROOT + 1;
	*id_slot(t, INODES_ROOT) = t->root;
	t->ids.n = 1;
	return t;
}

void inodes_free(struct inodes *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->ids.nslots; i++) {
		struct inode *e = t->ids.slot[i], *next;

		for (; e != NULL; e = next) {
			next = e->id_next;
			free(e->name);
			free(e);
		}
	}
	free(t->ids.slot);
	free(t->names.slot);
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
	if (e != NULL && !(e->hidden && (flags & INODES_NOT_HIDDEN)))
		rc = path_of(t, e, buf, size,
			     (flags & INODES_DETACHED_OK) != 0);
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
		struct inode **s;

		e = xcalloc(1, sizeof(*e));
		e->ino = t->next_ino++;
		grow(t, &t->ids, false);
		s = id_slot(t, e->ino);
		e->id_next = *s;
		*s = e;
		t->ids.n++;
		name_link(t, e, p, xstrdup(name));
	}
	e->nlookup++;
	*ino = e->ino;
	rc = 0;
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

uint64_t inodes_peek(struct inodes *t, uint64_t parent, const char *name)
{
	struct inode *p, *e = NULL;
	uint64_t ino = 0;

	pthread_mutex_lock(&t->lock);
	p = by_id(t, parent);
	if (p != NULL)
		e = by_name(t, p, name);
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
	struct inode *p, *e = NULL;
	uint64_t ino = 0;

	pthread_mutex_lock(&t->lock);
	p = by_id(t, parent);
	if (p != NULL)
		e = by_name(t, p, name);
	if (e != NULL && e->nopen > 0)
		ino = e->ino;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

void inodes_hide(struct inodes *t, uint64_t ino)
{
	struct inode *e;

	pthread_mutex_lock(&t->lock);
	e = by_id(t, ino);
	if (e != NULL)
		e->hidden = true;
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
	struct inode *e, *p;
	size_t i, n = 0;

	if (inodes_find(t, path, &top, &parent) < 0)
		return 0;
	pthread_mutex_lock(&t->lock);
	/* Every node whose chain of parents reaches top: a walk up from
	 * each, as deep as the tree. */
	for (i = 0; i < t->ids.nslots && n < max; i++) {
		for (e = t->ids.slot[i]; e != NULL && n < max; e = e->id_next) {
			for (p = e->parent; p != NULL && p->ino != top;
			     p = p->parent)
				;
			if (p != NULL)
				ids[n++] = e->ino;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t inodes_count(struct inodes *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = t->ids.n;
	pthread_mutex_unlock(&t->lock);
	return n;
}
