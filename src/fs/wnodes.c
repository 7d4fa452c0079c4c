/* SPDX-License-Identifier: MIT */
/*
 * wnodes: the table of a mount's write state and the gathering window's
 * flusher (see wnodes.h). The list is short (the files open for writing),
 * so it is a plain list; the flusher wakes every tick and sends what is
 * older than the window, through the owner's flush function.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "fs/wnodes.h"

/* How often the flusher looks, at most. */
#define FLUSHER_TICK_MS 100

struct wnodes {
	pthread_mutex_t lock;
	struct wnode *list;
	long window_ms;
	wnode_flush_fn *flush;
	void *ctx;
	/* The flusher, started by the first gathered byte. */
	pthread_mutex_t flusher_lock;
	pthread_cond_t flusher_cond;
	bool running;
	bool stop;
	pthread_t tid;
};

int wnodes_new(long window_ms, wnode_flush_fn *flush, void *ctx,
	       struct wnodes **out)
{
	struct wnodes *t = xcalloc(1, sizeof(*t));

	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->flusher_lock, NULL);
	clock_cond_init(&t->flusher_cond);
	t->window_ms = window_ms > 0 ? window_ms : 0;
	t->flush = flush;
	t->ctx = ctx;
	*out = t;
	return 0;
}

long wnodes_window_ms(const struct wnodes *t)
{
	return t->window_ms;
}

/* ---- nodes ---------------------------------------------------------------- */

static struct wnode *lookup(struct wnodes *t, const void *owner,
			    const char *rel)
{
	struct wnode *w;

	for (w = t->list; w != NULL; w = w->next)
		if (!w->orphan && w->owner == owner && strcmp(w->rel, rel) == 0)
			return w;
	return NULL;
}

struct wnode *wnode_get(struct wnodes *t, const void *owner, const char *rel)
{
	struct wnode *w;

	pthread_mutex_lock(&t->lock);
	w = lookup(t, owner, rel);
	if (w == NULL) {
		w = xcalloc(1, sizeof(*w));
		w->tab = t;
		w->owner = owner;
		w->rel = xstrdup(rel);
		pthread_mutex_init(&w->lock, NULL);
		buf_init(&w->data, WNODE_EXTENT_MAX);
		w->next = t->list;
		t->list = w;
	}
	w->refs++;
	pthread_mutex_unlock(&t->lock);
	return w;
}

struct wnode *wnode_find(struct wnodes *t, const void *owner, const char *rel)
{
	struct wnode *w;

	pthread_mutex_lock(&t->lock);
	w = lookup(t, owner, rel);
	if (w != NULL)
		w->refs++;
	pthread_mutex_unlock(&t->lock);
	return w;
}

void wnode_put(struct wnode *w)
{
	struct wnodes *t = w->tab;
	struct wnode **pp;

	pthread_mutex_lock(&t->lock);
	if (--w->refs > 0) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	for (pp = &t->list; *pp != w; pp = &(*pp)->next)
		;
	*pp = w->next;
	pthread_mutex_unlock(&t->lock);
	buf_cleanup(&w->data);
	pthread_mutex_destroy(&w->lock);
	free(w->rel);
	free(w);
}

char *wnode_rel(struct wnode *w)
{
	char *rel;

	pthread_mutex_lock(&w->tab->lock);
	rel = xstrdup(w->rel);
	pthread_mutex_unlock(&w->tab->lock);
	return rel;
}

void wnode_changed(struct wnode *w)
{
	atomic_fetch_add(&w->gen, 1);
}

void wnode_lost(struct wnode *w, int rc)
{
	w->err_gen++;
	w->err = rc < 0 ? rc : -EIO;
}

void wnode_orphan(struct wnode *w)
{
	pthread_mutex_lock(&w->tab->lock);
	w->orphan = true;
	pthread_mutex_unlock(&w->tab->lock);
}

size_t wnodes_pick(struct wnodes *t, wnode_pick_fn *pick, const void *arg,
		   struct wnode ***out)
{
	struct wnode *w, **v = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&t->lock);
	for (w = t->list; w != NULL; w = w->next) {
		if (!pick(w, arg))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			v = xrealloc(v, cap * sizeof(*v));
		}
		w->refs++;
		v[n++] = w;
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	return n;
}

void wnodes_put(struct wnode **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		wnode_put(v[i]);
	free(v);
}

void wnodes_rekey(struct wnodes *t, const void *owner, const char *from,
		  const char *to)
{
	size_t n = strlen(from);
	struct wnode *w;

	pthread_mutex_lock(&t->lock);
	for (w = t->list; w != NULL; w = w->next) {
		if (w->owner != owner || w->orphan)
			continue;
		if (strncmp(w->rel, from, n) == 0 &&
		    (w->rel[n] == '\0' || w->rel[n] == '/')) {
			char *nrel = xasprintf("%s%s", to, w->rel + n);

			free(w->rel);
			w->rel = nrel;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

/* ---- the gathering window -------------------------------------------------- */

struct old_pick {
	long long now;
	long window_ms;
	bool all;
};

static bool pick_old(const struct wnode *w, const void *arg)
{
	const struct old_pick *o = arg;

	return w->dirty && (o->all || o->now - w->dirty_ms >= o->window_ms);
}

void wnodes_flush_old(struct wnodes *t, bool all)
{
	struct old_pick o = {clock_mono_ms(), t->window_ms, all};
	struct wnode **v;
	size_t i, n = wnodes_pick(t, pick_old, &o, &v);

	for (i = 0; i < n; i++) {
		struct wnode *w = v[i];

		/* A writer holding the node is about to send it anyway. */
		if (!all && pthread_mutex_trylock(&w->lock) != 0)
			continue;
		if (all)
			pthread_mutex_lock(&w->lock);
		if (pick_old(w, &o))
			(void)t->flush(t->ctx, w);
		pthread_mutex_unlock(&w->lock);
	}
	wnodes_put(v, n);
}

static void *flusher_main(void *arg)
{
	struct wnodes *t = arg;

	pthread_mutex_lock(&t->flusher_lock);
	while (!t->stop) {
		struct timespec ts;
		long tick = t->window_ms / 4;

		if (tick > FLUSHER_TICK_MS)
			tick = FLUSHER_TICK_MS;
		if (tick < 10)
			tick = 10;
		clock_deadline_in(&ts, tick);
		pthread_cond_timedwait(&t->flusher_cond, &t->flusher_lock, &ts);
		if (t->stop)
			break;
		pthread_mutex_unlock(&t->flusher_lock);
		wnodes_flush_old(t, false);
		pthread_mutex_lock(&t->flusher_lock);
	}
	pthread_mutex_unlock(&t->flusher_lock);
	return NULL;
}

void wnode_dirtied(struct wnode *w)
{
	struct wnodes *t = w->tab;

	if (!w->dirty)
		w->dirty_ms = clock_mono_ms();
	w->dirty = true;
	if (t->window_ms == 0)
		return;
	pthread_mutex_lock(&t->flusher_lock);
	if (!t->running && !t->stop) {
		if (pthread_create(&t->tid, NULL, flusher_main, t) == 0)
			t->running = true;
		else
			log_warn("the write flusher could not start: gathered "
				 "bytes wait for close or fsync");
	}
	pthread_mutex_unlock(&t->flusher_lock);
}

void wnodes_free(struct wnodes *t)
{
	bool joined;

	if (t == NULL)
		return;
	pthread_mutex_lock(&t->flusher_lock);
	t->stop = true;
	joined = t->running;
	t->running = false;
	pthread_cond_broadcast(&t->flusher_cond);
	pthread_mutex_unlock(&t->flusher_lock);
	if (joined)
		pthread_join(t->tid, NULL);
	/* What files still open at the unmount gathered is sent now. */
	wnodes_flush_old(t, true);
	/* Nodes of files left open belong to their handles, which the
	 * kernel will never release now: they are left, unreachable. */
	pthread_cond_destroy(&t->flusher_cond);
	pthread_mutex_destroy(&t->flusher_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
