/* SPDX-License-Identifier: MIT */
/*
 * dlist: links on both sides, ends known (contract in dlist.h).
 */
#include "config.h"

#include "common/dlist.h"

/* Link n in l between prev and next, neighbours (NULL: that end). */
static void link_between(struct dlist *l, struct dlist_node *n,
			 struct dlist_node *prev, struct dlist_node *next)
{
	n->prev = prev;
	n->next = next;
	if (prev != NULL)
		prev->next = n;
	else
		l->first = n;
	if (next != NULL)
		next->prev = n;
	else
		l->last = n;
	l->n++;
}

void dlist_push_front(struct dlist *l, struct dlist_node *n)
{
	link_between(l, n, NULL, l->first);
}

void dlist_push_back(struct dlist *l, struct dlist_node *n)
{
	link_between(l, n, l->last, NULL);
}

void dlist_remove(struct dlist *l, struct dlist_node *n)
{
	if (n->prev != NULL)
		n->prev->next = n->next;
	else
		l->first = n->next;
	if (n->next != NULL)
		n->next->prev = n->prev;
	else
		l->last = n->prev;
	n->prev = n->next = NULL;
	l->n--;
}

struct dlist_node *dlist_pop_front(struct dlist *l)
{
	struct dlist_node *n = l->first;

	if (n != NULL)
		dlist_remove(l, n);
	return n;
}
