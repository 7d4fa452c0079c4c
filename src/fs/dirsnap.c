/* SPDX-License-Identifier: MIT */
/*
 * dirsnap: the listings readers are part way through (dirsnap.h). The
 * table is a list in use order, newest first: it holds a few dozen
 * snapshots at most, each found by its directory and generation.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "fs/dirsnap.h"

/* Generations live in bits 32 to 62 of an offset (0 is "none"). */
#define GEN_MAX 0x7fffffffu
#define INDEX_MASK 0xffffffffull

struct dirsnaps {
	pthread_mutex_t lock;
	struct dirsnap *list; /* most recently used first */
	size_t count, entries;
	size_t max_snaps, max_entries;
	uint32_t gen;
};

struct dirsnaps *dirsnaps_new(size_t max_snaps, size_t max_entries)
{
	struct dirsnaps *t = xcalloc(1, sizeof(*t));

	pthread_mutex_init(&t->lock, NULL);
	t->max_snaps = max_snaps;
	t->max_entries = max_entries;
	return t;
}

void dirsnap_drop(struct dirsnap *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		free(s->e[i].name);
	free(s->e);
	free(s);
}

void dirsnaps_free(struct dirsnaps *t)
{
	struct dirsnap *s, *next;

	if (t == NULL)
		return;
	for (s = t->list; s != NULL; s = next) {
		next = s->next;
		dirsnap_drop(s);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

struct dirsnap *dirsnap_begin(uint64_t ino, uint64_t mark)
{
	struct dirsnap *s = xcalloc(1, sizeof(*s));

	s->ino = ino;
	s->mark = mark;
	return s;
}

void dirsnap_add(struct dirsnap *s, const char *name, const struct stat *st,
		 bool plus)
{
	struct dirsnap_entry *e;

	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->e = xrealloc(s->e, s->cap * sizeof(*s->e));
	}
	e = &s->e[s->n++];
	e->name = xstrdup(name);
	e->plus = st != NULL && plus;
	if (st != NULL)
		e->st = *st;
	else
		memset(&e->st, 0, sizeof(e->st));
}

/* Unlink *link's snapshot from the list (lock held). */
static struct dirsnap *unlink_at(struct dirsnaps *t, struct dirsnap **link)
{
	struct dirsnap *s = *link;

	*link = s->next;
	s->next = NULL;
	t->count--;
	t->entries -= s->n;
	return s;
}

/* Free what is done and nobody holds, then the least recently used
 * snapshots nobody holds while over the bounds (lock held). */
static void trim(struct dirsnaps *t)
{
	struct dirsnap **link, **victim;

	for (link = &t->list; *link != NULL;) {
		if ((*link)->done && (*link)->refs == 0)
			dirsnap_drop(unlink_at(t, link));
		else
			link = &(*link)->next;
	}
	while (t->count > t->max_snaps || t->entries > t->max_entries) {
		victim = NULL;
		for (link = &t->list; *link != NULL; link = &(*link)->next)
			if ((*link)->refs == 0)
				victim = link; /* the last such: least recent */
		if (victim == NULL)
			break;
		dirsnap_drop(unlink_at(t, victim));
	}
}

void dirsnaps_publish(struct dirsnaps *t, struct dirsnap *s)
{
	pthread_mutex_lock(&t->lock);
	t->gen = t->gen >= GEN_MAX ? 1 : t->gen + 1;
	s->gen = t->gen;
	s->refs = 1;
	s->next = t->list;
	t->list = s;
	t->count++;
	t->entries += s->n;
	trim(t);
	pthread_mutex_unlock(&t->lock);
}

struct dirsnap *dirsnaps_get(struct dirsnaps *t, uint64_t ino, uint32_t gen)
{
	struct dirsnap **link, *s = NULL;

	if (gen == 0)
		return NULL;
	pthread_mutex_lock(&t->lock);
	for (link = &t->list; *link != NULL; link = &(*link)->next) {
		if ((*link)->ino == ino && (*link)->gen == gen) {
			/* To the front: the list stays in use order. */
			s = *link;
			*link = s->next;
			s->next = t->list;
			t->list = s;
			s->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return s;
}

void dirsnaps_put(struct dirsnaps *t, struct dirsnap *s, bool done)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&t->lock);
	if (s->refs > 0)
		s->refs--;
	if (done)
		s->done = true;
	trim(t);
	pthread_mutex_unlock(&t->lock);
}

size_t dirsnaps_count(struct dirsnaps *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}

uint64_t dirsnap_off(const struct dirsnap *s, size_t k)
{
	return ((uint64_t)s->gen << 32) | ((uint64_t)k + 1);
}

void dirsnap_parse(uint64_t off, uint32_t *gen, size_t *next)
{
	*gen = (uint32_t)((off >> 32) & GEN_MAX);
	*next = (size_t)(off & INDEX_MASK);
}
