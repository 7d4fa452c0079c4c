/* SPDX-License-Identifier: MIT */
/*
 * cache: bounded maps (attributes, content validators, listings, the
 * mount's own changes), each a hash table (common/hmap.h) and an LRU
 * list. Expiry is checked on lookup.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/hmap.h"
#include "common/xalloc.h"
#include "fs/cache.h"

struct entry {
	char *key; /* "<sbx>/<rel>" */
	size_t sbxlen; /* length of the sandbox part */
	long long stamp_ms; /* when stored */
	bool stale; /* attr: times and links moved since (cache_touch) */
	struct proto_attr attr;
	char *target;
	char etag[PROTO_ETAG_MAX];
	struct dirlist *dl;
	uint64_t changed; /* changes: the count at the path's last change */
	struct hmap_node node; /* in its map's table, by key */
	struct entry *lprev, *lnext;
};

struct map {
	struct hmap table;
	size_t max;
	struct entry *lru_head; /* most recent */
	struct entry *lru_tail;
};

/* The names of one directory: a blob of NUL-terminated names, their
 * types (PROTO_FT_UNKNOWN + removed marks a name taken away), and an open
 * addressing index over them. */
#define DIRNAME_GONE 0xff

struct dirlist {
	char *blob;
	size_t bloblen, blobcap;
	uint32_t *off; /* offset of each name in blob */
	unsigned char *type;
	size_t n, cap;
	uint32_t *index; /* slots: 0 = empty, else entry + 1 */
	size_t nslots;
};

struct cache {
	pthread_mutex_t lock;
	long long ttl_ms;
	/* Sandboxes whose attributes and listings live longer (or
	 * shorter) than ttl_ms: those whose changes are told (events). */
	struct ttl_override {
		char *sbx;
		long long ttl_ms;
		long long since_ms; /* entries stored before: ttl_ms of the
				       cache */
	} * ov;
	size_t nov;
	/* Told of every attribute kept (cache_on_put). */
	void (*on_put)(void *ud, const char *sbx, const char *rel,
		       const struct proto_attr *a);
	void *on_put_ud;
	struct map attrs;
	struct map content;
	struct map dirs; /* entry->dl */
	/* This mount's own changes: the count so far, the count at each
	 * path's last change (entry->changed), and a floor under which every
	 * answer is old (a subtree forgotten, a change record dropped). An
	 * answer asked for at mark is kept only when nothing of its path
	 * changed since (cache_mark). */
	uint64_t seq;
	uint64_t floor;
	struct map changes;
};

/* How long an entry of key's sandbox stored at stamp_ms stays fresh
 * (c->lock held); a stamp of -1 asks for the ttl of a new entry. */
static long long ttl_for(const struct cache *c, const char *key, size_t sbxlen,
			 long long stamp_ms)
{
	size_t i;

	for (i = 0; i < c->nov; i++) {
		if (strlen(c->ov[i].sbx) == sbxlen &&
		    strncmp(c->ov[i].sbx, key, sbxlen) == 0)
			return stamp_ms < 0 || stamp_ms > c->ov[i].since_ms
				       ? c->ov[i].ttl_ms
				       : c->ttl_ms;
	}
	return c->ttl_ms;
}

static char *make_key(const char *sbx, const char *rel, size_t *sbxlen)
{
	*sbxlen = strlen(sbx);
	return xasprintf("%s/%s", sbx, rel);
}

static void map_init(struct map *m, size_t max)
{
	hmap_init(&m->table, 64);
	m->max = max;
}

static void lru_unlink(struct map *m, struct entry *e)
{
	if (e->lprev)
		e->lprev->lnext = e->lnext;
	else
		m->lru_head = e->lnext;
	if (e->lnext)
		e->lnext->lprev = e->lprev;
	else
		m->lru_tail = e->lprev;
	e->lprev = e->lnext = NULL;
}

static void lru_push(struct map *m, struct entry *e)
{
	e->lprev = NULL;
	e->lnext = m->lru_head;
	if (m->lru_head)
		m->lru_head->lprev = e;
	m->lru_head = e;
	if (m->lru_tail == NULL)
		m->lru_tail = e;
}

static void dirlist_free(struct dirlist *d)
{
	if (d == NULL)
		return;
	free(d->blob);
	free(d->off);
	free(d->type);
	free(d->index);
	free(d);
}

static void entry_free(struct entry *e)
{
	free(e->key);
	free(e->target);
	dirlist_free(e->dl);
	free(e);
}

static void map_remove(struct map *m, struct entry *e)
{
	hmap_remove(&m->table, &e->node);
	lru_unlink(m, e);
	entry_free(e);
}

static struct entry *map_find_hashed(struct map *m, const char *key, uint64_t h)
{
	struct hmap_node *n;

	for (n = hmap_first(&m->table, h); n != NULL; n = hmap_next(n, h)) {
		struct entry *e = hmap_entry(n, struct entry, node);

		if (strcmp(e->key, key) == 0)
			return e;
	}
	return NULL;
}

static struct entry *map_find(struct map *m, const char *key)
{
	return map_find_hashed(m, key, hmap_hash_str(key, HMAP_SEED));
}

/* Find or make the entry for key; key is taken. */
static struct entry *map_upsert(struct map *m, char *key, size_t sbxlen)
{
	uint64_t h = hmap_hash_str(key, HMAP_SEED);
	struct entry *e = map_find_hashed(m, key, h);

	if (e != NULL) {
		free(key);
		lru_unlink(m, e);
		lru_push(m, e);
		return e;
	}
	if (hmap_count(&m->table) >= m->max && m->lru_tail != NULL)
		map_remove(m, m->lru_tail);
	e = xcalloc(1, sizeof(*e));
	e->key = key;
	e->sbxlen = sbxlen;
	hmap_insert(&m->table, &e->node, h);
	lru_push(m, e);
	return e;
}

static void map_clear(struct map *m)
{
	while (m->lru_head != NULL)
		map_remove(m, m->lru_head);
	hmap_cleanup(&m->table);
}

/* Remove every entry whose key is `prefix` or starts with `prefix/`; with
 * sbx_only, every entry of the sandbox named by prefix. */
static void map_remove_prefix(struct map *m, const char *prefix)
{
	size_t n = strlen(prefix);
	struct entry *e, *next;

	for (e = m->lru_head; e != NULL; e = next) {
		next = e->lnext;
		if (strncmp(e->key, prefix, n) == 0 &&
		    (e->key[n] == '\0' || e->key[n] == '/'))
			map_remove(m, e);
	}
}

int cache_new(double ttl_s, struct cache **out)
{
	struct cache *c = xcalloc(1, sizeof(*c));

	pthread_mutex_init(&c->lock, NULL);
	c->ttl_ms = ttl_s > 0 ? (long long)(ttl_s * 1000.0) : 0;
	map_init(&c->attrs, CACHE_MAX_ATTRS);
	map_init(&c->content, CACHE_MAX_CONTENT);
	map_init(&c->dirs, CACHE_MAX_DIRS);
	map_init(&c->changes, CACHE_MAX_CHANGES);
	*out = c;
	return 0;
}

/* Count a change of key (c->lock held; key is borrowed). */
static void changed_key(struct cache *c, const char *key, size_t sbxlen)
{
	struct entry *e;

	c->seq++;
	if (hmap_count(&c->changes.table) >= c->changes.max &&
	    c->changes.lru_tail != NULL) {
		/* The oldest record goes: answers older than it can no
		 * longer be judged one by one. */
		if (c->changes.lru_tail->changed > c->floor)
			c->floor = c->changes.lru_tail->changed;
		map_remove(&c->changes, c->changes.lru_tail);
	}
	e = map_upsert(&c->changes, xstrdup(key), sbxlen);
	e->changed = c->seq;
}

/* May an answer asked for at mark be kept for key? (c->lock held) */
static bool still_true(struct cache *c, const char *key, uint64_t mark)
{
	struct entry *e;

	if (mark < c->floor)
		return false;
	e = map_find(&c->changes, key);
	return e == NULL || e->changed <= mark;
}

uint64_t cache_mark(struct cache *c)
{
	uint64_t m;

	pthread_mutex_lock(&c->lock);
	m = c->seq;
	pthread_mutex_unlock(&c->lock);
	return m;
}

void cache_free(struct cache *c)
{
	if (c == NULL)
		return;
	map_clear(&c->attrs);
	map_clear(&c->content);
	map_clear(&c->dirs);
	map_clear(&c->changes);
	while (c->nov > 0)
		free(c->ov[--c->nov].sbx);
	free(c->ov);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void attr_put(struct cache *c, const char *sbx, const char *rel,
		     const struct proto_attr *a, const char *target, bool seen,
		     uint64_t mark)
{
	struct entry *e;
	size_t sbxlen;
	char *key;

	key = make_key(sbx, rel, &sbxlen);
	pthread_mutex_lock(&c->lock);
	if (ttl_for(c, key, sbxlen, -1) == 0 ||
	    (seen && !still_true(c, key, mark))) {
		pthread_mutex_unlock(&c->lock);
		free(key);
		return;
	}
	if (!seen)
		changed_key(c, key, sbxlen);
	e = map_upsert(&c->attrs, key, sbxlen);
	e->attr = *a;
	e->stamp_ms = clock_mono_ms();
	e->stale = false;
	free(e->target);
	e->target = target ? xstrdup(target) : NULL;
	pthread_mutex_unlock(&c->lock);
	if (c->on_put != NULL)
		c->on_put(c->on_put_ud, sbx, rel, a);
}

void cache_on_put(struct cache *c,
		  void (*fn)(void *ud, const char *sbx, const char *rel,
			     const struct proto_attr *a),
		  void *ud)
{
	c->on_put = fn;
	c->on_put_ud = ud;
}

void cache_put(struct cache *c, const char *sbx, const char *rel,
	       const struct proto_attr *a, const char *target)
{
	attr_put(c, sbx, rel, a, target, false, 0);
}

void cache_put_seen(struct cache *c, const char *sbx, const char *rel,
		    const struct proto_attr *a, const char *target,
		    uint64_t mark)
{
	attr_put(c, sbx, rel, a, target, true, mark);
}

static bool attr_get(struct cache *c, const char *sbx, const char *rel,
		     struct proto_attr *a, char **target, bool stale_ok)
{
	struct entry *e;
	size_t sbxlen;
	char *key;
	bool found = false;

	key = make_key(sbx, rel, &sbxlen);
	pthread_mutex_lock(&c->lock);
	e = map_find(&c->attrs, key);
	if (e != NULL && clock_mono_ms() - e->stamp_ms >=
				 ttl_for(c, key, sbxlen, e->stamp_ms)) {
		map_remove(&c->attrs, e);
		e = NULL;
	}
	if (e != NULL && e->stale && !stale_ok)
		e = NULL;
	if (e != NULL) {
		lru_unlink(&c->attrs, e);
		lru_push(&c->attrs, e);
		*a = e->attr;
		if (target != NULL)
			*target = e->target ? xstrdup(e->target) : NULL;
		found = true;
	}
	pthread_mutex_unlock(&c->lock);
	free(key);
	return found;
}

bool cache_get(struct cache *c, const char *sbx, const char *rel,
	       struct proto_attr *a, char **target)
{
	return attr_get(c, sbx, rel, a, target, false);
}

bool cache_get_access(struct cache *c, const char *sbx, const char *rel,
		      struct proto_attr *a)
{
	return attr_get(c, sbx, rel, a, NULL, true);
}

/* rel changed: counted, and its attributes marked stale or dropped. */
static void attr_changed(struct cache *c, const char *sbx, const char *rel,
			 bool drop)
{
	struct entry *e;
	size_t sbxlen;
	char *key = make_key(sbx, rel, &sbxlen);

	pthread_mutex_lock(&c->lock);
	changed_key(c, key, sbxlen);
	e = map_find(&c->attrs, key);
	if (e != NULL && drop)
		map_remove(&c->attrs, e);
	else if (e != NULL)
		e->stale = true;
	pthread_mutex_unlock(&c->lock);
	free(key);
}

void cache_touch(struct cache *c, const char *sbx, const char *rel)
{
	attr_changed(c, sbx, rel, false);
}

void cache_forget(struct cache *c, const char *sbx, const char *rel)
{
	attr_changed(c, sbx, rel, true);
}

void cache_forget_tree(struct cache *c, const char *sbx, const char *rel)
{
	size_t sbxlen;
	char *key = make_key(sbx, rel, &sbxlen);

	/* The root "" makes "sbx/": strip the slash so the prefix matches
	 * "sbx/..." entries through the separator rule. */
	if (*rel == '\0')
		key[sbxlen] = '\0';
	pthread_mutex_lock(&c->lock);
	map_remove_prefix(&c->attrs, key);
	map_remove_prefix(&c->content, key);
	map_remove_prefix(&c->dirs, key);
	/* A whole subtree: every answer under way is older. */
	c->floor = ++c->seq;
	pthread_mutex_unlock(&c->lock);
	free(key);
}

size_t cache_forget_ino(struct cache *c, const char *sbx, uint64_t ino,
			char ***rels)
{
	size_t sbxlen = strlen(sbx), n = 0, cap = 0;
	struct entry *e, *next;
	char **v = NULL;

	pthread_mutex_lock(&c->lock);
	for (e = c->attrs.lru_head; e != NULL; e = next) {
		next = e->lnext;
		if (e->attr.ino != ino || e->sbxlen != sbxlen ||
		    strncmp(e->key, sbx, sbxlen) != 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 4;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[n++] = xstrdup(e->key + sbxlen + 1);
		changed_key(c, e->key, sbxlen);
		map_remove(&c->attrs, e);
	}
	pthread_mutex_unlock(&c->lock);
	*rels = v;
	return n;
}

void cache_drop_sandbox(struct cache *c, const char *sbx)
{
	cache_forget_tree(c, sbx, "");
}

void cache_sandbox_ttl(struct cache *c, const char *sbx, double ttl_s)
{
	long long ms = ttl_s > 0 ? (long long)(ttl_s * 1000.0) : 0;
	size_t i;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->nov && strcmp(c->ov[i].sbx, sbx) != 0; i++)
		;
	if (i == c->nov) {
		c->ov = xrealloc(c->ov, (c->nov + 1) * sizeof(*c->ov));
		c->ov[c->nov].sbx = xstrdup(sbx);
		c->nov++;
	}
	c->ov[i].ttl_ms = ms;
	c->ov[i].since_ms = clock_mono_ms();
	pthread_mutex_unlock(&c->lock);
}

bool cache_changed_since(struct cache *c, const char *sbx, const char *rel,
			 uint64_t mark)
{
	size_t sbxlen;
	char *key = make_key(sbx, rel, &sbxlen);
	bool changed;

	pthread_mutex_lock(&c->lock);
	changed = !still_true(c, key, mark);
	pthread_mutex_unlock(&c->lock);
	free(key);
	return changed;
}

void cache_set_content(struct cache *c, const char *sbx, const char *rel,
		       const char *etag)
{
	struct entry *e;
	size_t sbxlen;
	char *key = make_key(sbx, rel, &sbxlen);

	pthread_mutex_lock(&c->lock);
	e = map_upsert(&c->content, key, sbxlen);
	snprintf(e->etag, sizeof(e->etag), "%s", etag);
	e->stamp_ms = clock_mono_ms();
	pthread_mutex_unlock(&c->lock);
}

bool cache_get_content(struct cache *c, const char *sbx, const char *rel,
		       char *etag)
{
	struct entry *e;
	size_t sbxlen;
	char *key = make_key(sbx, rel, &sbxlen);
	bool found = false;

	pthread_mutex_lock(&c->lock);
	e = map_find(&c->content, key);
	if (e != NULL) {
		snprintf(etag, PROTO_ETAG_MAX, "%s", e->etag);
		found = true;
	}
	pthread_mutex_unlock(&c->lock);
	free(key);
	return found;
}

void cache_forget_content(struct cache *c, const char *sbx, const char *rel)
{
	struct entry *e;
	size_t sbxlen;
	char *key = make_key(sbx, rel, &sbxlen);

	pthread_mutex_lock(&c->lock);
	e = map_find(&c->content, key);
	if (e != NULL)
		map_remove(&c->content, e);
	pthread_mutex_unlock(&c->lock);
	free(key);
}

/* ---- directory listings ------------------------------------------------ */

static size_t dl_slot(const struct dirlist *d, const char *name)
{
	return (size_t)hmap_hash_str(name, HMAP_SEED) & (d->nslots - 1);
}

static void dl_reindex(struct dirlist *d, size_t want)
{
	size_t i, slots = 16;

	while (slots < want * 2)
		slots <<= 1;
	free(d->index);
	d->index = xcalloc(slots, sizeof(*d->index));
	d->nslots = slots;
	for (i = 0; i < d->n; i++) {
		size_t s = dl_slot(d, d->blob + d->off[i]);

		while (d->index[s] != 0)
			s = (s + 1) & (d->nslots - 1);
		d->index[s] = (uint32_t)i + 1;
	}
}

/* The entry index of name, or -1. */
static long dl_find(const struct dirlist *d, const char *name)
{
	size_t s;

	if (d->nslots == 0)
		return -1;
	for (s = dl_slot(d, name); d->index[s] != 0;
	     s = (s + 1) & (d->nslots - 1)) {
		uint32_t i = d->index[s] - 1;

		if (strcmp(d->blob + d->off[i], name) == 0)
			return (long)i;
	}
	return -1;
}

static void dl_append(struct dirlist *d, const char *name, unsigned char type)
{
	size_t len = strlen(name) + 1;
	long i = dl_find(d, name);

	if (i >= 0) {
		d->type[i] = type;
		return;
	}
	if (d->bloblen + len > d->blobcap) {
		d->blobcap = (d->blobcap + len) * 2;
		d->blob = xrealloc(d->blob, d->blobcap);
	}
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		d->off = xrealloc(d->off, d->cap * sizeof(*d->off));
		d->type = xrealloc(d->type, d->cap * sizeof(*d->type));
	}
	memcpy(d->blob + d->bloblen, name, len);
	d->off[d->n] = (uint32_t)d->bloblen;
	d->type[d->n] = type;
	d->bloblen += len;
	d->n++;
	if (d->n * 2 > d->nslots) {
		dl_reindex(d, d->n);
	} else {
		size_t s = dl_slot(d, name);

		while (d->index[s] != 0)
			s = (s + 1) & (d->nslots - 1);
		d->index[s] = (uint32_t)d->n;
	}
}

static char *dir_key(const char *sbx, const char *dir)
{
	return xasprintf("%s/%s", sbx, dir);
}

/* A fresh listing (c->lock held), or NULL (an expired one is dropped). */
static struct dirlist *dl_get(struct cache *c, const char *key)
{
	struct entry *e = map_find(&c->dirs, key);

	if (e == NULL)
		return NULL;
	if (clock_mono_ms() - e->stamp_ms >=
	    ttl_for(c, key, e->sbxlen, e->stamp_ms)) {
		map_remove(&c->dirs, e);
		return NULL;
	}
	return e->dl;
}

static void dir_put(struct cache *c, const char *sbx, const char *dir,
		    const char *const *names, const enum proto_ftype *types,
		    size_t n, bool seen, uint64_t mark)
{
	struct dirlist *d;
	struct entry *e;
	char *key;
	size_t i;

	d = xcalloc(1, sizeof(*d));
	dl_reindex(d, n);
	for (i = 0; i < n; i++)
		dl_append(d, names[i], (unsigned char)types[i]);
	key = dir_key(sbx, dir);
	pthread_mutex_lock(&c->lock);
	if (ttl_for(c, key, strlen(sbx), -1) == 0 ||
	    (seen && !still_true(c, key, mark))) {
		pthread_mutex_unlock(&c->lock);
		free(key);
		dirlist_free(d);
		return;
	}
	if (!seen)
		changed_key(c, key, strlen(sbx));
	e = map_upsert(&c->dirs, key, strlen(sbx));
	dirlist_free(e->dl);
	e->dl = d;
	e->stamp_ms = clock_mono_ms();
	pthread_mutex_unlock(&c->lock);
}

void cache_dir_put(struct cache *c, const char *sbx, const char *dir,
		   const char *const *names, const enum proto_ftype *types,
		   size_t n)
{
	dir_put(c, sbx, dir, names, types, n, false, 0);
}

void cache_dir_put_seen(struct cache *c, const char *sbx, const char *dir,
			const char *const *names, const enum proto_ftype *types,
			size_t n, uint64_t mark)
{
	dir_put(c, sbx, dir, names, types, n, true, mark);
}

bool cache_dir_each(struct cache *c, const char *sbx, const char *dir,
		    void (*fn)(void *ud, const char *name,
			       enum proto_ftype type),
		    void *ud)
{
	char *key = dir_key(sbx, dir);
	struct dirlist *d;
	size_t i;

	pthread_mutex_lock(&c->lock);
	d = dl_get(c, key);
	if (d != NULL)
		for (i = 0; i < d->n; i++)
			if (d->type[i] != DIRNAME_GONE)
				fn(ud, d->blob + d->off[i],
				   (enum proto_ftype)d->type[i]);
	pthread_mutex_unlock(&c->lock);
	free(key);
	return d != NULL;
}

bool cache_dir_lookup(struct cache *c, const char *sbx, const char *dir,
		      const char *name, bool *present)
{
	char *key = dir_key(sbx, dir);
	struct dirlist *d;
	long i;

	pthread_mutex_lock(&c->lock);
	d = dl_get(c, key);
	if (d != NULL) {
		i = dl_find(d, name);
		*present = i >= 0 && d->type[i] != DIRNAME_GONE;
	}
	pthread_mutex_unlock(&c->lock);
	free(key);
	return d != NULL;
}

void cache_dir_add(struct cache *c, const char *sbx, const char *dir,
		   const char *name, enum proto_ftype type)
{
	char *key = dir_key(sbx, dir);
	struct dirlist *d;

	pthread_mutex_lock(&c->lock);
	changed_key(c, key, strlen(sbx));
	d = dl_get(c, key);
	if (d != NULL)
		dl_append(d, name, (unsigned char)type);
	pthread_mutex_unlock(&c->lock);
	free(key);
}

void cache_dir_remove(struct cache *c, const char *sbx, const char *dir,
		      const char *name)
{
	char *key = dir_key(sbx, dir);
	struct dirlist *d;
	long i;

	pthread_mutex_lock(&c->lock);
	changed_key(c, key, strlen(sbx));
	d = dl_get(c, key);
	if (d != NULL && (i = dl_find(d, name)) >= 0)
		d->type[i] = DIRNAME_GONE;
	pthread_mutex_unlock(&c->lock);
	free(key);
}

void cache_dir_forget(struct cache *c, const char *sbx, const char *dir)
{
	char *key = dir_key(sbx, dir);
	struct entry *e;

	pthread_mutex_lock(&c->lock);
	changed_key(c, key, strlen(sbx));
	e = map_find(&c->dirs, key);
	if (e != NULL)
		map_remove(&c->dirs, e);
	pthread_mutex_unlock(&c->lock);
	free(key);
}
