/* SPDX-License-Identifier: MIT */
/*
 * prefetch: directories' small files read ahead, one request a directory.
 *
 * State, under one mutex:
 *  - a direct-mapped table of recently opened directories, each SEEN (one
 *    file opened), FETCHING (a worker is asking the agent) or DONE;
 *  - the bodies that arrived, in a hash table by (sandbox, path)
 *    (common/hmap.h), with a FIFO (common/dlist.h) for eviction past PREFETCH_MAX_BYTES or PREFETCH_MAX_FILES;
 *  - a queue of directories to fetch, for PREFETCH_WORKERS threads.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/agent_client.h"
#include "common/clock.h"
#include "common/dlist.h"
#include "common/hmap.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_i.h"
#include "fs/prefetch.h"

#define DIR_SLOTS 256
#define PREFETCH_WORKERS 2
#define QUEUE_MAX 64
#define SUBDIRS_AHEAD 8 /* of a walked directory, fetched next */
#define LIST_SUBDIRS_PAGE 1024 /* entries asked for to find them */

enum dir_state { DIR_FREE = 0, DIR_SEEN, DIR_FETCHING, DIR_DONE };

struct dir_rec {
	char *sbx;
	char *dir;
	enum dir_state state;
	uint64_t first; /* hash of the first file opened (SEEN); 0: the
			   directory was listed */
	long long stamp_ms; /* when SEEN or DONE began */
};

struct body {
	char *key; /* "sbx\0rel" */
	size_t keylen;
	char *data;
	size_t len;
	char etag[PROTO_ETAG_MAX];
	struct hmap_node node; /* in pf->bodies, by key */
	struct dlist_node fifo; /* in pf->fifo */
};

struct job {
	struct sbfs *fs;
	char *sbx;
	char *dir;
	bool ahead; /* a subdirectory of a walked one: fetches no further */
	bool listed; /* the walker listed it (prefetch_listed) */
	struct dlist_node link; /* in pf->queue */
};

/* A mount's read-ahead of walked directories: everything under lock. */
struct prefetch {
	pthread_mutex_t lock;
	pthread_cond_t done; /* a fetch ended, or a body arrived */
	pthread_cond_t work; /* a job queued, or stopping */
	pthread_t threads[PREFETCH_WORKERS];
	unsigned nthreads; /* workers started */
	struct dir_rec dirs[DIR_SLOTS];
	struct hmap bodies;
	struct dlist fifo; /* the bodies, oldest first */
	size_t held_bytes;
	struct dlist queue; /* the jobs, first queued first */
	unsigned active; /* jobs a worker is on */
	bool stopping;
};

static uint64_t key_hash(const char *sbx, const char *rel)
{
	return hmap_hash_str(rel,
			     hmap_hash_bytes(sbx, strlen(sbx) + 1, HMAP_SEED));
}

static long long window_ms(const struct sbfs *fs)
{
	return (long long)(fs->o.attr_timeout * 1000.0);
}

/* ---- the store (pf->lock held) ------------------------------------------ */

static char *make_key(const char *sbx, const char *rel, size_t *len)
{
	size_t a = strlen(sbx) + 1, b = strlen(rel);
	char *k = xmalloc(a + b + 1);

	memcpy(k, sbx, a);
	memcpy(k + a, rel, b + 1);
	*len = a + b;
	return k;
}

static struct body *body_find(struct prefetch *pf, const char *key,
			      size_t keylen)
{
	uint64_t h = hmap_hash_bytes(key, keylen, HMAP_SEED);
	struct hmap_node *n;

	for (n = hmap_first(&pf->bodies, h); n != NULL; n = hmap_next(n, h)) {
		struct body *b = hmap_entry(n, struct body, node);

		if (b->keylen == keylen && memcmp(b->key, key, keylen) == 0)
			return b;
	}
	return NULL;
}

/* Unlink b from the table and the FIFO and free it. */
static void body_remove(struct prefetch *pf, struct body *b, bool keep_data)
{
	hmap_remove(&pf->bodies, &b->node);
	dlist_remove(&pf->fifo, &b->fifo);
	pf->held_bytes -= b->len;
	if (!keep_data)
		free(b->data);
	free(b->key);
	free(b);
}

static void evict_oldest(struct prefetch *pf)
{
	body_remove(pf, dlist_item(pf->fifo.first, struct body, fifo), false);
}

static void body_put(struct prefetch *pf, const char *sbx, const char *rel,
		     const void *data, size_t len, const char *etag)
{
	struct body *b;
	size_t keylen;
	char *key = make_key(sbx, rel, &keylen);

	b = body_find(pf, key, keylen);
	if (b != NULL)
		body_remove(pf, b, false);
	while (pf->fifo.first != NULL &&
	       (pf->held_bytes + len > PREFETCH_MAX_BYTES ||
		pf->fifo.n + 1 > PREFETCH_MAX_FILES))
		evict_oldest(pf);
	b = xcalloc(1, sizeof(*b));
	b->key = key;
	b->keylen = keylen;
	b->data = xmalloc(len > 0 ? len : 1);
	memcpy(b->data, data, len);
	b->len = len;
	snprintf(b->etag, sizeof(b->etag), "%s", etag);
	hmap_insert(&pf->bodies, &b->node,
		    hmap_hash_bytes(key, keylen, HMAP_SEED));
	dlist_push_back(&pf->fifo, &b->fifo);
	pf->held_bytes += len;
}

/* ---- the workers ----------------------------------------------------------- */

struct fetch {
	struct sbfs *fs;
	const char *sbx;
	const char *dir;
	uint64_t mark; /* the cache's mark when the answer was asked for */
};

static int fetched_one(void *ud, const char *name, const struct proto_attr *a,
		       const void *data, size_t len)
{
	struct fetch *f = ud;
	struct prefetch *pf = f->fs->pf;
	char *rel = path_join(f->dir, name);
	char etag[PROTO_ETAG_MAX];

	/* The answer's attributes are the freshest the mount has (unless
	 * the mount changed the file since): a read takes the body only
	 * while they are still the ones held. */
	cache_put_seen(f->fs->cache, f->sbx, rel, a, NULL, f->mark);
	proto_attr_etag(a, etag);
	pthread_mutex_lock(&pf->lock);
	body_put(pf, f->sbx, rel, data, len, etag);
	/* The answer arrives a file at a time: a reader waiting for this
	 * one goes on now. */
	pthread_cond_broadcast(&pf->done);
	pthread_mutex_unlock(&pf->lock);
	free(rel);
	return 0;
}

static struct dir_rec *dir_slot(struct prefetch *pf, const char *sbx,
				const char *dir)
{
	uint64_t h = key_hash(sbx, dir);

	return &pf->dirs[h % DIR_SLOTS];
}

static bool dir_is(const struct dir_rec *d, const char *sbx, const char *dir)
{
	return d->state != DIR_FREE && strcmp(d->sbx, sbx) == 0 &&
	       strcmp(d->dir, dir) == 0;
}

/* dir is being fetched, or was less than win ms ago (pf->lock held). */
static bool dir_busy(const struct dir_rec *d, const char *sbx, const char *dir,
		     long long now, long long win)
{
	return dir_is(d, sbx, dir) &&
	       (d->state == DIR_FETCHING ||
		(d->state == DIR_DONE && now - d->stamp_ms < win));
}

/* Make d dir's record, taking the slot from another directory's when it
 * must (pf->lock held). */
static void dir_claim(struct dir_rec *d, const char *sbx, const char *dir)
{
	if (dir_is(d, sbx, dir))
		return;
	free(d->sbx);
	free(d->dir);
	d->sbx = xstrdup(sbx);
	d->dir = xstrdup(dir);
}

/* dir was listed (first 0) or its file first opened (pf->lock held). */
static void dir_seen(struct dir_rec *d, const char *sbx, const char *dir,
		     uint64_t first, long long now)
{
	dir_claim(d, sbx, dir);
	d->state = DIR_SEEN;
	d->first = first;
	d->stamp_ms = now;
}

/* Queue a fetch of dir and mark it FETCHING (pf->lock held). */
static bool enqueue(struct sbfs *fs, const char *sbx, const char *dir,
		    bool ahead, bool listed)
{
	struct prefetch *pf = fs->pf;
	struct dir_rec *d = dir_slot(pf, sbx, dir);
	struct job *j;

	if (pf->queue.n >= QUEUE_MAX || pf->stopping)
		return false;
	/* Another directory's fetch under way keeps its slot. */
	if (!dir_is(d, sbx, dir) && d->state == DIR_FETCHING)
		return false;
	dir_claim(d, sbx, dir);
	d->state = DIR_FETCHING;
	j = xcalloc(1, sizeof(*j));
	j->fs = fs;
	j->sbx = xstrdup(sbx);
	j->dir = xstrdup(dir);
	j->ahead = ahead;
	j->listed = listed;
	dlist_push_back(&pf->queue, &j->link);
	pthread_cond_signal(&pf->work);
	return true;
}

struct subdirs {
	char *names[SUBDIRS_AHEAD];
	size_t n;
};

static void collect_subdir(void *ud, const char *name, enum proto_ftype type)
{
	struct subdirs *sd = ud;

	if (type == PROTO_FT_DIR && sd->n < SUBDIRS_AHEAD)
		sd->names[sd->n++] = xstrdup(name);
}

/* dir's subdirectories from the agent (its first page of entries), when
 * the walker listed it but the mount holds the listing no more: a change
 * event since made the mount forget it. */
static int list_subdirs(struct sbfs *fs, const char *sbx, const char *dir,
			struct subdirs *sd)
{
	struct proto_list page;
	struct sbx_error err;
	size_t i;
	int rc;

	memset(&page, 0, sizeof(page));
	sbx_error_clear(&err);
	rc = ac_list(fs->t, sbx, dir, NULL, LIST_SUBDIRS_PAGE, &page, &err);
	for (i = 0; rc == 0 && i < page.n; i++)
		collect_subdir(sd, page.entries[i].name,
			       page.entries[i].attr.type);
	proto_list_cleanup(&page);
	return rc;
}

/*
 * A walker that reads a directory's files goes into its subdirectories
 * next: fetch the first few of them ahead, so that their files (and the
 * agent's disk) are ready when it gets there. Only one level: what the
 * walker does not reach is not fetched further.
 */
static void fetch_subdirs_ahead(struct sbfs *fs, const char *sbx,
				const char *dir, bool listed)
{
	long long now = clock_mono_ms(), win = window_ms(fs);
	struct prefetch *pf = fs->pf;
	struct subdirs sd;
	size_t i;

	sd.n = 0;
	if (!cache_dir_each(fs->cache, sbx, dir, collect_subdir, &sd) &&
	    (!listed || list_subdirs(fs, sbx, dir, &sd) < 0))
		return;
	pthread_mutex_lock(&pf->lock);
	for (i = 0; i < sd.n; i++) {
		char *sub = path_join(dir, sd.names[i]);
		struct dir_rec *d = dir_slot(pf, sbx, sub);

		if (!dir_busy(d, sbx, sub, now, win))
			enqueue(fs, sbx, sub, true, false);
		free(sub);
		free(sd.names[i]);
	}
	pthread_mutex_unlock(&pf->lock);
}

static void *pf_worker(void *arg)
{
	struct prefetch *pf = arg;

	for (;;) {
		struct sbx_error err;
		struct fetch f;
		struct dir_rec *d;
		struct job *j;
		int rc;

		pthread_mutex_lock(&pf->lock);
		while (pf->queue.first == NULL && !pf->stopping)
			pthread_cond_wait(&pf->work, &pf->lock);
		if (pf->queue.first == NULL) {
			pthread_mutex_unlock(&pf->lock);
			break;
		}
		j = dlist_item(pf->queue.first, struct job, link);
		dlist_remove(&pf->queue, &j->link);
		pf->active++;
		pthread_mutex_unlock(&pf->lock);

		f.fs = j->fs;
		f.sbx = j->sbx;
		f.dir = j->dir;
		f.mark = cache_mark(j->fs->cache);
		sbx_error_clear(&err);
		rc = ac_contents(j->fs->t, j->sbx, j->dir, PREFETCH_FILE_MAX,
				 PREFETCH_ANSWER_MAX, fetched_one, &f, &err);
		if (rc < 0)
			log_debug("sandbox %s: reading %s ahead: %s", j->sbx,
				  *j->dir ? j->dir : ".", err.reason);
		else if (!j->ahead)
			fetch_subdirs_ahead(j->fs, j->sbx, j->dir, j->listed);

		pthread_mutex_lock(&pf->lock);
		d = dir_slot(pf, j->sbx, j->dir);
		if (dir_is(d, j->sbx, j->dir) && d->state == DIR_FETCHING) {
			d->state = DIR_DONE;
			d->stamp_ms = clock_mono_ms();
		}
		pf->active--;
		pthread_cond_broadcast(&pf->done);
		pthread_mutex_unlock(&pf->lock);
		free(j->sbx);
		free(j->dir);
		free(j);
	}
	return NULL;
}

/* Start the workers on first need (pf->lock held). */
static void start_workers(struct prefetch *pf)
{
	unsigned i;

	if (pf->nthreads > 0 || pf->stopping)
		return;
	for (i = 0; i < PREFETCH_WORKERS; i++)
		if (pthread_create(&pf->threads[pf->nthreads], NULL, pf_worker,
				   pf) == 0)
			pf->nthreads++;
}

int prefetch_new(struct prefetch **out)
{
	struct prefetch *pf = xcalloc(1, sizeof(*pf));

	pthread_mutex_init(&pf->lock, NULL);
	clock_cond_init(&pf->done);
	pthread_cond_init(&pf->work, NULL);
	hmap_init(&pf->bodies, 256);
	*out = pf;
	return 0;
}

/* ---- the interface ----------------------------------------------------------- */

void prefetch_listed(struct sbfs *fs, const char *sbx, const char *dir)
{
	long long now = clock_mono_ms(), win = window_ms(fs);
	struct prefetch *pf = fs->pf;
	struct dir_rec *d;

	if (win <= 0)
		return;
	pthread_mutex_lock(&pf->lock);
	d = dir_slot(pf, sbx, dir);
	if (!dir_busy(d, sbx, dir, now, win))
		dir_seen(d, sbx, dir, 0, now);
	pthread_mutex_unlock(&pf->lock);
}

void prefetch_opened(struct sbfs *fs, const char *sbx, const char *rel)
{
	char dir[PATH_MAX_BYTES + 1];
	uint64_t me = key_hash(sbx, rel) | 1; /* never 0 */
	long long now = clock_mono_ms(), win = window_ms(fs);
	struct prefetch *pf = fs->pf;
	struct dir_rec *d;

	if (win <= 0)
		return;
	path_parent(rel, dir, sizeof(dir));
	pthread_mutex_lock(&pf->lock);
	start_workers(pf);
	d = dir_slot(pf, sbx, dir);
	if (pf->nthreads == 0 || dir_busy(d, sbx, dir, now, win)) {
		/* Nothing to do. */
	} else if (!dir_is(d, sbx, dir) || d->state != DIR_SEEN ||
		   now - d->stamp_ms >= win || d->first == me) {
		/* The first file of a walk, perhaps: remember it. */
		dir_seen(d, sbx, dir, me, now);
	} else {
		/* A file of a directory just listed, or a second one: a
		 * walk. */
		enqueue(fs, sbx, dir, false, d->first == 0);
	}
	pthread_mutex_unlock(&pf->lock);
}

bool prefetch_take(struct sbfs *fs, const char *sbx, const char *rel,
		   char **data, size_t *len, char *etag)
{
	char dir[PATH_MAX_BYTES + 1], now_tag[PROTO_ETAG_MAX];
	struct proto_attr a;
	struct body *b;
	struct timespec until;
	struct prefetch *pf = fs->pf;
	struct dir_rec *d;
	size_t keylen;
	char *key;
	bool ok = false;

	if (pf->nthreads == 0)
		return false;
	/* Too large to be in an answer: nothing to wait for. */
	if (cache_get(fs->cache, sbx, rel, &a, NULL) &&
	    a.size > PREFETCH_FILE_MAX)
		return false;
	path_parent(rel, dir, sizeof(dir));
	key = make_key(sbx, rel, &keylen);
	clock_deadline_in(&until,
			  (fs->o.timeout_s > 0 ? fs->o.timeout_s : 60) * 1000);
	pthread_mutex_lock(&pf->lock);
	d = dir_slot(pf, sbx, dir);
	/* The file's body may be on its way: waiting costs less than
	 * asking for it again. */
	while (dir_is(d, sbx, dir) && d->state == DIR_FETCHING &&
	       body_find(pf, key, keylen) == NULL) {
		if (pthread_cond_timedwait(&pf->done, &pf->lock, &until) != 0)
			break;
	}
	b = body_find(pf, key, keylen);
	if (b != NULL) {
		*data = b->data;
		*len = b->len;
		snprintf(etag, PROTO_ETAG_MAX, "%s", b->etag);
		body_remove(pf, b, true);
		ok = true;
	}
	pthread_mutex_unlock(&pf->lock);
	free(key);
	if (!ok)
		return false;
	/* Only while the attributes held still describe these contents. */
	if (cache_get(fs->cache, sbx, rel, &a, NULL)) {
		proto_attr_etag(&a, now_tag);
		if (strcmp(now_tag, etag) == 0 && a.size == *len)
			return true;
	}
	free(*data);
	*data = NULL;
	return false;
}

void prefetch_drop_sandbox(struct sbfs *fs, const char *sbx)
{
	struct prefetch *pf = fs->pf;
	size_t n = strlen(sbx) + 1;
	struct dlist_node *l, *next;

	pthread_mutex_lock(&pf->lock);
	for (l = pf->fifo.first; l != NULL; l = next) {
		struct body *b = dlist_item(l, struct body, fifo);

		next = l->next;
		if (b->keylen >= n && memcmp(b->key, sbx, n) == 0)
			body_remove(pf, b, false);
	}
	pthread_mutex_unlock(&pf->lock);
}

void prefetch_free(struct prefetch *pf)
{
	struct dlist_node *l;
	unsigned i;

	if (pf == NULL)
		return;
	pthread_mutex_lock(&pf->lock);
	pf->stopping = true;
	while ((l = dlist_pop_front(&pf->queue)) != NULL) {
		struct job *j = dlist_item(l, struct job, link);

		free(j->sbx);
		free(j->dir);
		free(j);
	}
	pthread_cond_broadcast(&pf->work);
	pthread_mutex_unlock(&pf->lock);
	/* A worker inside a fetch returns within the fetch's deadline. */
	for (i = 0; i < pf->nthreads; i++)
		pthread_join(pf->threads[i], NULL);
	while (pf->fifo.first != NULL)
		evict_oldest(pf);
	hmap_cleanup(&pf->bodies);
	for (i = 0; i < DIR_SLOTS; i++) {
		free(pf->dirs[i].sbx);
		free(pf->dirs[i].dir);
	}
	pthread_cond_destroy(&pf->work);
	pthread_cond_destroy(&pf->done);
	pthread_mutex_destroy(&pf->lock);
	free(pf);
}
