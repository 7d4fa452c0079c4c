/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "agent/watch_tree.h"
#include "common/xalloc.h"

static size_t hash_wd(int wd, size_t nb)
{
	return ((uint32_t)wd * 2654435761U) & (nb - 1);
}

static size_t hash_name(const struct wnode *parent, const char *name,
			size_t len, size_t nb)
{
	uint64_t h = 14695981039346656037ULL;
	uintptr_t p = (uintptr_t)parent;
	size_t i;

	for (i = 0; i < sizeof(p); i++) {
		h ^= (unsigned char)(p >> (8 * i));
		h *= 1099511628211ULL;
	}
	for (i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 1099511628211ULL;
	}
	return (size_t)h & (nb - 1);
}

static struct wnode **tab_slot(struct wtab *t, bool by_wd,
			       const struct wnode *n)
{
	size_t i = by_wd ? hash_wd(n->wd, t->nb)
			 : hash_name(n->parent, n->name, n->namelen, t->nb);

	return &t->b[i];
}

static struct wnode **link_of(struct wnode *n, bool by_wd)
{
	return by_wd ? &n->wd_link : &n->name_link;
}

static void tab_insert(struct wtab *t, bool by_wd, struct wnode *n);

static void tab_grow(struct wtab *t, bool by_wd)
{
	struct wnode **old = t->b;
	size_t oldnb = t->nb, i;

	t->nb = oldnb ? oldnb * 2 : 1024;
	t->b = xcalloc(t->nb, sizeof(*t->b));
	t->n = 0;
	for (i = 0; i < oldnb; i++) {
		struct wnode *n = old[i];

		while (n != NULL) {
			struct wnode *next = *link_of(n, by_wd);

			tab_insert(t, by_wd, n);
			n = next;
		}
	}
	free(old);
}

static void tab_insert(struct wtab *t, bool by_wd, struct wnode *n)
{
	struct wnode **slot;

	if (t->n >= t->nb)
		tab_grow(t, by_wd);
	slot = tab_slot(t, by_wd, n);
	*link_of(n, by_wd) = *slot;
	*slot = n;
	t->n++;
}

static void tab_remove(struct wtab *t, bool by_wd, struct wnode *n)
{
	struct wnode **pp;

	if (t->nb == 0)
		return;
	for (pp = tab_slot(t, by_wd, n); *pp != NULL;
	     pp = link_of(*pp, by_wd)) {
		if (*pp == n) {
			*pp = *link_of(n, by_wd);
			t->n--;
			return;
		}
	}
}

struct wnode *wtree_find_wd(struct wtree *t, int wd)
{
	struct wnode *n;

	if (t->wds.nb == 0)
		return NULL;
	for (n = t->wds.b[hash_wd(wd, t->wds.nb)]; n != NULL; n = n->wd_link)
		if (n->wd == wd)
			return n;
	return NULL;
}

struct wnode *wtree_find_child(struct wtree *t, const struct wnode *parent,
			       const char *name)
{
	size_t len = strlen(name);
	struct wnode *n;

	if (t->names.nb == 0 || parent == NULL)
		return NULL;
	for (n = t->names.b[hash_name(parent, name, len, t->names.nb)];
	     n != NULL; n = n->name_link)
		if (n->parent == parent && n->namelen == len &&
		    memcmp(n->name, name, len) == 0)
			return n;
	return NULL;
}

void wtree_attach(struct wtree *t, struct wnode *n, struct wnode *parent,
		  const char *name)
{
	free(n->name);
	n->name = xstrdup(name);
	n->namelen = strlen(name);
	n->parent = parent;
	n->prev = NULL;
	n->next = parent->child;
	if (parent->child != NULL)
		parent->child->prev = n;
	parent->child = n;
	tab_insert(&t->names, false, n);
}

void wtree_detach(struct wtree *t, struct wnode *n)
{
	if (n->parent == NULL)
		return;
	tab_remove(&t->names, false, n);
	if (n->prev != NULL)
		n->prev->next = n->next;
	else
		n->parent->child = n->next;
	if (n->next != NULL)
		n->next->prev = n->prev;
	n->parent = n->next = n->prev = NULL;
}

struct wnode *wtree_add(struct wtree *t, struct wnode *parent, const char *name,
			int wd, dev_t dev)
{
	struct wnode *n = xcalloc(1, sizeof(*n));

	n->wd = wd;
	n->dev = dev;
	tab_insert(&t->wds, true, n);
	if (parent != NULL) {
		wtree_attach(t, n, parent, name);
	} else {
		n->name = xstrdup("");
		t->root = n;
	}
	t->n++;
	return n;
}

void wtree_drop(struct wtree *t, struct wnode *top, int ifd)
{
	struct wnode *n = top;

	for (;;) {
		struct wnode *p;
		bool last;

		while (n->child != NULL)
			n = n->child;
		p = n->parent;
		last = n == top;
		if (ifd >= 0)
			inotify_rm_watch(ifd, n->wd);
		wtree_detach(t, n);
		tab_remove(&t->wds, true, n);
		if (n == t->root)
			t->root = NULL;
		free(n->name);
		free(n);
		t->n--;
		if (last)
			break;
		n = p;
	}
}

size_t wtree_forget(struct wtree *t, int **wds)
{
	size_t i, k = 0;
	int *out = NULL;

	if (wds != NULL && t->wds.n > 0)
		out = xcalloc(t->wds.n, sizeof(*out));
	for (i = 0; i < t->wds.nb; i++) {
		struct wnode *n = t->wds.b[i];

		while (n != NULL) {
			struct wnode *next = n->wd_link;

			if (out != NULL)
				out[k++] = n->wd;
			free(n->name);
			free(n);
			n = next;
		}
	}
	free(t->wds.b);
	free(t->names.b);
	memset(&t->wds, 0, sizeof(t->wds));
	memset(&t->names, 0, sizeof(t->names));
	t->root = NULL;
	t->n = 0;
	if (wds != NULL)
		*wds = out;
	return k;
}

bool wtree_rel(const struct wnode *n, const char *name, char *out)
{
	size_t len = 0, pos, nlen = name != NULL ? strlen(name) : 0;
	const struct wnode *p;

	for (p = n; p != NULL && p->parent != NULL; p = p->parent)
		len += p->namelen + 1;
	if (name != NULL)
		len += nlen + 1;
	if (len > 0)
		len--;
	if (len > WTREE_PATH_MAX)
		return false;
	out[len] = '\0';
	pos = len;
	if (name != NULL) {
		pos -= nlen;
		memcpy(out + pos, name, nlen);
		if (pos > 0)
			out[--pos] = '/';
	}
	for (p = n; p != NULL && p->parent != NULL; p = p->parent) {
		pos -= p->namelen;
		memcpy(out + pos, p->name, p->namelen);
		if (pos > 0)
			out[--pos] = '/';
	}
	return true;
}

bool wtree_above(const struct wnode *a, const struct wnode *n)
{
	for (; n != NULL; n = n->parent)
		if (n == a)
			return true;
	return false;
}
