/* SPDX-License-Identifier: MIT */
/*
 * readahead: the window of a sequential reader (see readahead.h for the
 * promise it keeps). A stream's chunks live in a ring indexed by their
 * offset; a chunk's buffer is taken from the pool's budget when its fetch
 * is queued and given back as soon as its bytes were all served, it was
 * found stale, or its fetch failed, so that many readers share the budget
 * instead of each sitting on a full window.
 *
 * Locking: a stream's lock guards its ring and window; the pool's lock its
 * queue, workers and budget. The order is stream, then pool. A worker
 * fetches with no lock held: a chunk being fetched belongs to its worker
 * until it lands (only its state and generation are looked at).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "fs/readahead.h"

enum chunk_state {
	CHUNK_EMPTY = 0,
	CHUNK_FETCHING,
	CHUNK_READY,
};

struct chunk {
	uint64_t off;
	size_t len; /* bytes asked for */
	size_t got; /* bytes that came (fewer at the end of the file) */
	size_t served; /* bytes copied out so far */
	uint64_t fsize; /* the file's size as the fetch saw it */
	unsigned char *data;
	enum chunk_state state;
	unsigned gen; /* the stream's generation when it was queued */
};

struct ra_stream {
	struct readahead *ra;
	ra_fetch_fn *fetch;
	ra_ctx_free_fn *ctx_free;
	void *ctx;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned refs; /* the owner's, and one per queued fetch */
	bool closed;
	unsigned gen; /* moves when every chunk must be forgotten */
	char etag[PROTO_ETAG_MAX]; /* the version the chunks hold, or "" */
	uint64_t size; /* the file's size, when size_known */
	bool size_known;
	struct chunk ring[RA_WINDOW_MAX];
	unsigned window; /* chunks to keep ahead */
	unsigned seq_hits;
	uint64_t next_off; /* where a sequential reader goes next */
};

struct ra_job {
	struct ra_stream *s;
	struct chunk *c;
	char if_match[PROTO_ETAG_MAX];
	struct ra_job *next;
};

struct readahead {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct ra_job *head, *tail;
	pthread_t *threads;
	unsigned nworkers;
	bool started;
	bool stopping;
	size_t budget;
	size_t used;
};

/* ---- the pool ------------------------------------------------------------- */

static void stream_unref(struct ra_stream *s);

/* Give back one chunk's buffer (the stream's lock held). */
static void chunk_drop(struct ra_stream *s, struct chunk *c)
{
	if (c->data != NULL) {
		free(c->data);
		c->data = NULL;
		pthread_mutex_lock(&s->ra->lock);
		s->ra->used -= RA_CHUNK;
		pthread_mutex_unlock(&s->ra->lock);
	}
	c->state = CHUNK_EMPTY;
	c->served = 0;
}

/* Forget every chunk: the ones that landed now, the ones under way when
 * they land (their generation is then old). The stream's lock held. */
static void stream_reset(struct ra_stream *s)
{
	unsigned i;

	s->gen++;
	for (i = 0; i < RA_WINDOW_MAX; i++)
		if (s->ring[i].state == CHUNK_READY)
			chunk_drop(s, &s->ring[i]);
	s->etag[0] = '\0';
	s->size_known = false;
	s->seq_hits = 0;
	s->window = 1;
	pthread_cond_broadcast(&s->cond);
}

/* A fetch landed: keep its chunk or drop it (the stream's lock held). */
static void chunk_land(struct ra_stream *s, struct chunk *c, unsigned gen,
		       int rc, size_t got, const char *etag, uint64_t size)
{
	if (gen != s->gen || s->closed) {
		chunk_drop(s, c);
		return;
	}
	if (rc == -ESTALE || (rc == 0 && s->etag[0] != '\0' &&
			      etag[0] != '\0' && strcmp(s->etag, etag) != 0)) {
		/* The file changed under the window. */
		chunk_drop(s, c);
		stream_reset(s);
		return;
	}
	if (rc < 0) {
		/* The reader's own read meets the error, if it lasts. */
		chunk_drop(s, c);
		return;
	}
	if (s->etag[0] == '\0' && etag[0] != '\0')
		snprintf(s->etag, sizeof(s->etag), "%s", etag);
	c->got = got;
	c->fsize = size != UINT64_MAX ? size
		   : got < c->len     ? c->off + got
				      : UINT64_MAX;
	if (size != UINT64_MAX) {
		s->size = size;
		s->size_known = true;
	}
	c->state = CHUNK_READY;
}

static void *worker_main(void *arg)
{
	struct readahead *ra = arg;

	pthread_mutex_lock(&ra->lock);
	for (;;) {
		struct ra_job *j;
		struct ra_stream *s;
		struct chunk *c;
		char etag[PROTO_ETAG_MAX];
		uint64_t size = UINT64_MAX, off;
		size_t got = 0, len;
		unsigned gen;
		bool skip;
		int rc;

		while (ra->head == NULL && !ra->stopping)
			pthread_cond_wait(&ra->work, &ra->lock);
		if (ra->head == NULL)
			break;
		j = ra->head;
		ra->head = j->next;
		if (ra->head == NULL)
			ra->tail = NULL;
		skip = ra->stopping;
		pthread_mutex_unlock(&ra->lock);

		s = j->s;
		c = j->c;
		pthread_mutex_lock(&s->lock);
		gen = c->gen;
		off = c->off;
		len = c->len;
		skip = skip || s->closed || gen != s->gen;
		pthread_mutex_unlock(&s->lock);
		etag[0] = '\0';
		rc = skip ? -ECANCELED
			  : s->fetch(s->ctx, off, len,
				     j->if_match[0] ? j->if_match : NULL,
				     c->data, &got, etag, &size);
		pthread_mutex_lock(&s->lock);
		chunk_land(s, c, gen, rc, got, etag, size);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		stream_unref(s);
		free(j);
		pthread_mutex_lock(&ra->lock);
	}
	pthread_mutex_unlock(&ra->lock);
	return NULL;
}

/* Start the workers on first need (the pool's lock held). */
static void pool_start(struct readahead *ra)
{
	unsigned i;

	if (ra->started)
		return;
	ra->started = true;
	ra->threads = xcalloc(ra->nworkers, sizeof(*ra->threads));
	for (i = 0; i < ra->nworkers; i++) {
		if (pthread_create(&ra->threads[i], NULL, worker_main, ra) !=
		    0) {
			log_warn("readahead: only %u of %u workers started", i,
				 ra->nworkers);
			break;
		}
	}
	ra->nworkers = i;
}

int readahead_new(unsigned workers, size_t budget, struct readahead **out)
{
	struct readahead *ra = xcalloc(1, sizeof(*ra));

	pthread_mutex_init(&ra->lock, NULL);
	pthread_cond_init(&ra->work, NULL);
	ra->nworkers = workers > 0 ? workers : 1;
	ra->budget = budget;
	*out = ra;
	return 0;
}

/* Set *flag under lock and wake every waiter on cond: the pool's workers
 * told to stop, or a stream's readers told it is closed. */
static void set_and_wake(pthread_mutex_t *lock, bool *flag,
			 pthread_cond_t *cond)
{
	pthread_mutex_lock(lock);
	*flag = true;
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(lock);
}

void readahead_free(struct readahead *ra)
{
	unsigned i;

	if (ra == NULL)
		return;
	set_and_wake(&ra->lock, &ra->stopping, &ra->work);
	/* A worker inside a fetch returns within the fetch's deadline; the
	 * queued ones are dropped unfetched. */
	for (i = 0; ra->started && i < ra->nworkers; i++)
		pthread_join(ra->threads[i], NULL);
	free(ra->threads);
	pthread_cond_destroy(&ra->work);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
}

size_t readahead_bytes(struct readahead *ra)
{
	size_t n;

	pthread_mutex_lock(&ra->lock);
	n = ra->used;
	pthread_mutex_unlock(&ra->lock);
	return n;
}

/* ---- streams --------------------------------------------------------------- */

struct ra_stream *ra_stream_new(struct readahead *ra, ra_fetch_fn *fetch,
				ra_ctx_free_fn *ctx_free, void *ctx)
{
	struct ra_stream *s = xcalloc(1, sizeof(*s));

	s->ra = ra;
	s->fetch = fetch;
	s->ctx_free = ctx_free;
	s->ctx = ctx;
	s->refs = 1;
	s->window = 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	return s;
}

static void stream_unref(struct ra_stream *s)
{
	unsigned i;

	pthread_mutex_lock(&s->lock);
	if (--s->refs > 0) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	for (i = 0; i < RA_WINDOW_MAX; i++)
		chunk_drop(s, &s->ring[i]);
	pthread_mutex_unlock(&s->lock);
	if (s->ctx_free != NULL)
		s->ctx_free(s->ctx);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void ra_stream_close(struct ra_stream *s)
{
	if (s == NULL)
		return;
	set_and_wake(&s->lock, &s->closed, &s->cond);
	stream_unref(s);
}

static struct chunk *slot_of(struct ra_stream *s, uint64_t coff)
{
	return &s->ring[(coff / RA_CHUNK) % RA_WINDOW_MAX];
}

/* Queue the fetch of the chunk at coff unless it is there or under way.
 * False when it cannot be (the slot is busy, the budget is spent, past the
 * end). The stream's lock held. */
static bool schedule(struct ra_stream *s, uint64_t coff)
{
	struct readahead *ra = s->ra;
	struct chunk *c = slot_of(s, coff);
	struct ra_job *j;
	size_t len = RA_CHUNK;

	if (s->size_known && coff >= s->size)
		return false;
	if (c->state != CHUNK_EMPTY)
		return c->off == coff && c->gen == s->gen;
	if (s->size_known && s->size - coff < len)
		len = (size_t)(s->size - coff);
	pthread_mutex_lock(&ra->lock);
	if (ra->stopping || ra->used + RA_CHUNK > ra->budget) {
		pthread_mutex_unlock(&ra->lock);
		return false;
	}
	ra->used += RA_CHUNK;
	pool_start(ra);
	pthread_mutex_unlock(&ra->lock);
	c->data = malloc(RA_CHUNK);
	if (c->data == NULL) {
		pthread_mutex_lock(&ra->lock);
		ra->used -= RA_CHUNK;
		pthread_mutex_unlock(&ra->lock);
		return false;
	}
	c->off = coff;
	c->len = len;
	c->got = 0;
	c->served = 0;
	c->fsize = UINT64_MAX;
	c->gen = s->gen;
	c->state = CHUNK_FETCHING;
	s->refs++;
	j = xcalloc(1, sizeof(*j));
	j->s = s;
	j->c = c;
	snprintf(j->if_match, sizeof(j->if_match), "%s", s->etag);
	pthread_mutex_lock(&ra->lock);
	if (ra->tail != NULL)
		ra->tail->next = j;
	else
		ra->head = j;
	ra->tail = j;
	pthread_cond_signal(&ra->work);
	pthread_mutex_unlock(&ra->lock);
	return true;
}

/* Is a read at off (of size bytes) the continuation of a sequential
 * reader? The kernel's parallel readahead may deliver a run's reads
 * slightly out of order, so "near where the last one ended" counts. The
 * stream's lock held. */
static bool sequential(struct ra_stream *s, uint64_t off, size_t size)
{
	uint64_t dist =
		off > s->next_off ? off - s->next_off : s->next_off - off;
	bool seq = (off == s->next_off && (off > 0 || s->seq_hits > 0)) ||
		   (s->seq_hits > 0 && dist <= 2 * RA_CHUNK);

	if (seq) {
		s->seq_hits++;
		if (s->seq_hits % 4 == 0 && s->window < RA_WINDOW_MAX)
			s->window *= 2;
		if (s->window > RA_WINDOW_MAX)
			s->window = RA_WINDOW_MAX;
	} else {
		/* A new run: its first read goes straight to the agent
		 * (most files are read whole by it). */
		s->seq_hits = off == 0 ? 1 : 0;
		s->window = 1;
	}
	if (off + size > s->next_off || !seq)
		s->next_off = off + size;
	return seq;
}

size_t ra_read(struct ra_stream *s, void *buf, size_t size, uint64_t off,
	       bool *eof, char *etag)
{
	size_t done = 0;
	bool seq;

	*eof = false;
	etag[0] = '\0';
	pthread_mutex_lock(&s->lock);
	if (s->closed || size == 0) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	seq = sequential(s, off, size);
	while (done < size) {
		uint64_t pos = off + done;
		uint64_t coff = pos - pos % RA_CHUNK;
		struct chunk *c = slot_of(s, coff);
		unsigned gen = s->gen, i;
		size_t in, n;

		if (seq)
			for (i = 0; i < s->window; i++)
				if (!schedule(s, coff + (uint64_t)i * RA_CHUNK))
					break;
		while (c->state == CHUNK_FETCHING && c->off == coff &&
		       c->gen == gen && !s->closed)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->gen != gen || c->state != CHUNK_READY ||
		    c->off != coff || c->gen != gen)
			break;
		if (done > 0 && strcmp(etag, s->etag) != 0)
			break;
		in = (size_t)(pos - c->off);
		if (in >= c->got) {
			/* pos is at or past the end this chunk saw. */
			*eof = c->got < c->len;
			break;
		}
		n = c->got - in;
		if (n > size - done)
			n = size - done;
		memcpy((char *)buf + done, c->data + in, n);
		if (done == 0)
			snprintf(etag, PROTO_ETAG_MAX, "%s", s->etag);
		done += n;
		c->served += n;
		if (c->fsize != UINT64_MAX && off + done >= c->fsize) {
			*eof = true;
			if (c->served >= c->got)
				chunk_drop(s, c);
			break;
		}
		if (c->served >= c->got)
			chunk_drop(s, c);
	}
	pthread_mutex_unlock(&s->lock);
	return done;
}

void ra_observe(struct ra_stream *s, const char *etag, uint64_t size)
{
	pthread_mutex_lock(&s->lock);
	if (etag[0] != '\0' && s->etag[0] != '\0' && strcmp(etag, s->etag) != 0)
		stream_reset(s);
	if (etag[0] != '\0' && s->etag[0] == '\0')
		snprintf(s->etag, sizeof(s->etag), "%s", etag);
	if (size != UINT64_MAX && strcmp(etag, s->etag) == 0) {
		s->size = size;
		s->size_known = true;
	}
	pthread_mutex_unlock(&s->lock);
}

void ra_invalidate(struct ra_stream *s)
{
	pthread_mutex_lock(&s->lock);
	stream_reset(s);
	pthread_mutex_unlock(&s->lock);
}
