/* SPDX-License-Identifier: MIT */
/*
 * hmap: chained slots that double when full (contract in hmap.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "common/xalloc.h"

/* The slot of a hash: its bits mixed (murmur3's finaliser), so that ids
 * counting up and FNV hashes alike spread over the low bits. */
static size_t slot_of(const struct hmap *m, uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (size_t)h & (m->nslots - 1);
}

void hmap_init(struct hmap *m, size_t min_slots)
{
	m->nslots = 1;
	while (m->nslots < min_slots)
		m->nslots <<= 1;
	m->slot = xcalloc(m->nslots, sizeof(*m->slot));
	m->n = 0;
}

void hmap_cleanup(struct hmap *m)
{
	if (m != NULL) {
		free(m->slot);
		memset(m, 0, sizeof(*m));
	}
}

static void grow(struct hmap *m)
{
	struct hmap_node **old = m->slot;
	size_t i, n = m->nslots;

	m->nslots *= 2;
	m->slot = xcalloc(m->nslots, sizeof(*m->slot));
	for (i = 0; i < n; i++) {
		struct hmap_node *e = old[i], *next;

		for (; e != NULL; e = next) {
			struct hmap_node **s = &m->slot[slot_of(m, e->hash)];

			next = e->next;
			e->next = *s;
			*s = e;
		}
	}
	free(old);
}

void hmap_insert(struct hmap *m, struct hmap_node *node, uint64_t hash)
{
	struct hmap_node **s;

	if (m->n >= m->nslots)
		grow(m);
	node->hash = hash;
	s = &m->slot[slot_of(m, hash)];
	node->next = *s;
	*s = node;
	m->n++;
}

void hmap_remove(struct hmap *m, struct hmap_node *node)
{
	struct hmap_node **s = &m->slot[slot_of(m, node->hash)];

	while (*s != node)
		s = &(*s)->next;
	*s = node->next;
	node->next = NULL;
	m->n--;
}

struct hmap_node *hmap_first(const struct hmap *m, uint64_t hash)
{
	struct hmap_node *e = m->slot[slot_of(m, hash)];

	while (e != NULL && e->hash != hash)
		e = e->next;
	return e;
}

struct hmap_node *hmap_next(const struct hmap_node *node, uint64_t hash)
{
	struct hmap_node *e = node->next;

	while (e != NULL && e->hash != hash)
		e = e->next;
	return e;
}

struct hmap_node *hmap_walk(const struct hmap *m, size_t *cursor,
			    const struct hmap_node *prev)
{
	if (prev != NULL) {
		if (prev->next != NULL)
			return prev->next;
		(*cursor)++;
	}
	for (; *cursor < m->nslots; (*cursor)++)
		if (m->slot[*cursor] != NULL)
			return m->slot[*cursor];
	return NULL;
}

uint64_t hmap_hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		seed = (seed ^ b[i]) * 1099511628211ULL;
	return seed;
}

uint64_t hmap_hash_str(const char *s, uint64_t seed)
{
	while (*s != '\0')
		seed = (seed ^ (unsigned char)*s++) * 1099511628211ULL;
	return seed;
}
