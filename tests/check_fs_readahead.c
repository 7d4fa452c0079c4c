/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_readahead: the readahead window (src/fs/readahead.c) on its
 * own, against a simulated file whose fetches are slow, fail, or find the
 * file changed. The reader in these tests does what the mount does: it
 * takes what ra_read serves and reads the rest directly. Every test checks
 * the promise of readahead.h: the bytes served are the file's, of one
 * version, end of file is claimed only at the end, and the window never
 * decides how much a read returns.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/readahead.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

/* A file of the test: its bytes and version, guarded by lock. */
struct sim {
	pthread_mutex_t lock;
	unsigned char *data;
	size_t size;
	unsigned version;
	unsigned delay_us; /* each fetch sleeps this long */
	uint64_t fail_off; /* a window fetch at this offset fails (EIO) */
	bool fail;
	unsigned fetches;
	bool freed; /* ctx_free was called */
};

static void nap_us(unsigned us)
{
	struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Byte i of version v. */
static unsigned char byte_of(unsigned v, size_t i)
{
	return (unsigned char)((i * 131 + i / 4093 + v * 17) & 0xff);
}

static void sim_fill(struct sim *f, size_t size, unsigned version)
{
	size_t i;

	free(f->data);
	f->data = malloc(size ? size : 1);
	ck_assert_ptr_nonnull(f->data);
	for (i = 0; i < size; i++)
		f->data[i] = byte_of(version, i);
	f->size = size;
	f->version = version;
}

static void tag_of(unsigned version, char *etag)
{
	snprintf(etag, PROTO_ETAG_MAX, "\"v%u\"", version);
}

/* A ranged read of the simulated file (the agent's GET read). */
static int sim_read(struct sim *f, uint64_t off, size_t len,
		    const char *if_match, void *dst, size_t *got, char *etag,
		    uint64_t *size)
{
	char now[PROTO_ETAG_MAX];
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	tag_of(f->version, now);
	if (if_match != NULL && strcmp(if_match, now) != 0) {
		rc = -ESTALE;
	} else {
		size_t n = off >= f->size ? 0 : f->size - (size_t)off;

		if (n > len)
			n = len;
		memcpy(dst, f->data + off, n);
		*got = n;
		snprintf(etag, PROTO_ETAG_MAX, "%s", now);
		*size = f->size;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static int fetch(void *ctx, uint64_t off, size_t len, const char *if_match,
		 void *dst, size_t *got, char *etag, uint64_t *size)
{
	struct sim *f = ctx;

	if (f->delay_us > 0)
		nap_us(f->delay_us);
	pthread_mutex_lock(&f->lock);
	f->fetches++;
	pthread_mutex_unlock(&f->lock);
	/* Only the window's fetches fail: a direct read of the range works
	 * (the failure was passing). */
	if (f->fail && off == f->fail_off)
		return -EIO;
	return sim_read(f, off, len, if_match, dst, got, etag, size);
}

static void ctx_free(void *ctx)
{
	struct sim *f = ctx;

	f->freed = true;
}

static struct readahead *ra;
static struct sim sim;

static void setup(void)
{
	memset(&sim, 0, sizeof(sim));
	pthread_mutex_init(&sim.lock, NULL);
	ck_assert_int_eq(readahead_new(4, 64UL * 1024 * 1024, &ra), 0);
}

static void teardown(void)
{
	readahead_free(ra);
	ra = NULL;
	free(sim.data);
	pthread_mutex_destroy(&sim.lock);
}

/*
 * The mount's read: the window's prefix, the rest read directly, one
 * version for all (when they differ, the whole range again). Checks the
 * window's own claims on the way. Returns the bytes read and the version
 * they belong to.
 */
static size_t read_like_mount(struct ra_stream *s, unsigned char *buf,
			      size_t size, uint64_t off, unsigned *version)
{
	char tag[PROTO_ETAG_MAX], dtag[PROTO_ETAG_MAX];
	uint64_t full = UINT64_MAX;
	size_t done, got = 0;
	bool eof = false;
	unsigned v;

	done = ra_read(s, buf, size, off, &eof, tag);
	ck_assert_uint_le(done, size);
	v = 0;
	if (done > 0)
		ck_assert_int_eq(sscanf(tag, "\"v%u\"", &v), 1);
	if (eof || done == size) {
		/* End of file is claimed only where that version ends. */
		pthread_mutex_lock(&sim.lock);
		if (eof && done > 0 && v == sim.version)
			ck_assert_uint_eq(off + done, sim.size);
		if (eof && done == 0 && v == 0)
			ck_assert_uint_ge(off, sim.size);
		pthread_mutex_unlock(&sim.lock);
		*version = v;
		return done;
	}
	ck_assert_int_eq(sim_read(&sim, off + done, size - done, NULL,
				  buf + done, &got, dtag, &full),
			 0);
	if (done > 0 && strcmp(tag, dtag) != 0) {
		done = 0;
		ck_assert_int_eq(
			sim_read(&sim, off, size, NULL, buf, &got, dtag, &full),
			0);
	}
	ra_observe(s, dtag, full);
	ck_assert_int_eq(sscanf(dtag, "\"v%u\"", version), 1);
	return done + got;
}

/* Every byte of buf is byte i of version v. */
static void check_bytes(const unsigned char *buf, size_t n, uint64_t off,
			unsigned v)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (buf[i] != byte_of(v, off + i))
			ck_abort_msg("byte %llu of the read (version %u) is "
				     "wrong",
				     (unsigned long long)(off + i), v);
}

/* Read the whole file in order, in reads of rsize, as the kernel's
 * readahead does: every read is full until the end. */
static void read_all(struct ra_stream *s, size_t rsize)
{
	unsigned char *buf = malloc(rsize);
	uint64_t off = 0;
	unsigned v;

	ck_assert_ptr_nonnull(buf);
	for (;;) {
		size_t n = read_like_mount(s, buf, rsize, off, &v);
		size_t want = off >= sim.size
				      ? 0
				      : (sim.size - off < rsize ? sim.size - off
								: rsize);

		ck_assert_uint_eq(n, want);
		check_bytes(buf, n, off, v);
		if (n == 0)
			break;
		off += n;
	}
	ck_assert_uint_eq(off, sim.size);
	free(buf);
}

START_TEST(sequential_reads_are_whole)
{
	/* A size that is no multiple of anything, slow fetches: reads meet
	 * chunks that are still under way at every boundary. */
	struct ra_stream *s;

	sim_fill(&sim, 41UL * 1024 * 1024 + 12345, 1);
	sim.delay_us = 3000;
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	read_all(s, 1024 * 1024);
	ck_assert_uint_gt(sim.fetches, 3);
	ra_stream_close(s);
}
END_TEST

START_TEST(odd_read_sizes_straddle_chunks)
{
	struct ra_stream *s;

	sim_fill(&sim, 3 * RA_CHUNK + 17, 1);
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	read_all(s, 1000003);
	ra_stream_close(s);
	/* Exactly a multiple of the chunk: no false end inside. */
	sim_fill(&sim, 2 * RA_CHUNK, 2);
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	read_all(s, 131072);
	ra_stream_close(s);
}
END_TEST

/* Readers in parallel on one stream, as the kernel's async reads are. */
struct par {
	struct ra_stream *s;
	uint64_t off;
	size_t len;
};

static void *par_main(void *arg)
{
	struct par *p = arg;
	unsigned char *buf = malloc(p->len);
	unsigned v;
	size_t n;

	ck_assert_ptr_nonnull(buf);
	n = read_like_mount(p->s, buf, p->len, p->off, &v);
	ck_assert_uint_eq(n, p->len);
	check_bytes(buf, n, p->off, v);
	free(buf);
	return NULL;
}

START_TEST(parallel_reads_out_of_order)
{
	enum { N = 24 };
	struct ra_stream *s;
	struct par p[N];
	pthread_t t[N];
	unsigned i;

	unsigned char *buf = malloc(1024 * 1024);
	unsigned v;

	ck_assert_ptr_nonnull(buf);
	sim_fill(&sim, (N + 2) * 1024 * 1024 + 333, 1);
	sim.delay_us = 2000;
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	/* A sequential start, then a burst slightly out of order. */
	ck_assert_uint_eq(read_like_mount(s, buf, 1024 * 1024, 0, &v),
			  1024 * 1024);
	ck_assert_uint_eq(read_like_mount(s, buf, 1024 * 1024, 1024 * 1024, &v),
			  1024 * 1024);
	for (i = 0; i < N; i++) {
		p[i].s = s;
		p[i].off = (uint64_t)((i + 2) ^ 1) * 1024 * 1024;
		p[i].len = 1024 * 1024;
		ck_assert_int_eq(pthread_create(&t[i], NULL, par_main, &p[i]),
				 0);
	}
	for (i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	free(buf);
	ra_stream_close(s);
}
END_TEST

START_TEST(a_change_is_never_mixed_in)
{
	/* The file changes (same size, other bytes) while a reader is half
	 * way: each read is of one version, never an older one after a newer
	 * one. */
	unsigned char *buf = malloc(1024 * 1024);
	struct ra_stream *s;
	uint64_t off = 0;
	unsigned v, last = 0;
	size_t size = 24UL * 1024 * 1024;

	ck_assert_ptr_nonnull(buf);
	sim_fill(&sim, size, 1);
	sim.delay_us = 1000;
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	while (off < size) {
		size_t n;

		if (off == 9UL * 1024 * 1024) {
			pthread_mutex_lock(&sim.lock);
			sim_fill(&sim, size, 2);
			pthread_mutex_unlock(&sim.lock);
		}
		n = read_like_mount(s, buf, 1024 * 1024, off, &v);
		ck_assert_uint_eq(n, 1024 * 1024);
		check_bytes(buf, n, off, v);
		ck_assert_uint_ge(v, last);
		last = v;
		off += n;
	}
	/* The window may have held the old version to the end (each read of
	 * one version); once told of the change, it serves the new one. */
	ra_invalidate(s);
	ck_assert_uint_eq(read_like_mount(s, buf, 1024 * 1024, 0, &v),
			  1024 * 1024);
	ck_assert_uint_eq(v, 2);
	check_bytes(buf, 1024 * 1024, 0, v);
	ra_stream_close(s);
	free(buf);
}
END_TEST

START_TEST(failed_fetches_are_read_directly)
{
	/* A chunk whose fetch fails is simply not there: the reads of its
	 * range go directly and are whole. */
	struct ra_stream *s;

	sim_fill(&sim, 20UL * 1024 * 1024, 1);
	sim.fail = true;
	sim.fail_off = 2 * RA_CHUNK;
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	read_all(s, 1024 * 1024);
	ra_stream_close(s);
}
END_TEST

START_TEST(invalidate_forgets_chunks_in_flight)
{
	unsigned char *buf = malloc(1024 * 1024);
	struct ra_stream *s;
	unsigned v;
	size_t n;

	ck_assert_ptr_nonnull(buf);
	sim_fill(&sim, 16UL * 1024 * 1024, 1);
	sim.delay_us = 20000;
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	(void)read_like_mount(s, buf, 1024 * 1024, 0, &v);
	(void)read_like_mount(s, buf, 1024 * 1024, 1024 * 1024, &v);
	/* The file is truncated and refilled through the mount while
	 * chunks are under way (fetched with the old tag: stale). */
	pthread_mutex_lock(&sim.lock);
	sim_fill(&sim, 3 * 1024 * 1024, 3);
	pthread_mutex_unlock(&sim.lock);
	ra_invalidate(s);
	n = read_like_mount(s, buf, 1024 * 1024, 2 * 1024 * 1024, &v);
	ck_assert_uint_eq(n, 1024 * 1024);
	ck_assert_uint_eq(v, 3);
	check_bytes(buf, n, 2 * 1024 * 1024, v);
	n = read_like_mount(s, buf, 1024 * 1024, 3 * 1024 * 1024, &v);
	ck_assert_uint_eq(n, 0);
	ra_stream_close(s);
	free(buf);
}
END_TEST

START_TEST(budget_is_shared_and_given_back)
{
	enum { N = 8 };
	struct readahead *small;
	struct ra_stream *s[N];
	unsigned char *buf = malloc(1024 * 1024);
	unsigned i, k, v;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(readahead_new(2, 3 * RA_CHUNK, &small), 0);
	sim_fill(&sim, 32UL * 1024 * 1024, 1);
	for (i = 0; i < N; i++)
		s[i] = ra_stream_new(small, fetch, NULL, &sim);
	/* Eight sequential readers, interleaved: the window never holds
	 * more than the budget, and every read is whole. */
	for (k = 0; k < 12; k++) {
		for (i = 0; i < N; i++) {
			size_t n =
				read_like_mount(s[i], buf, 1024 * 1024,
						(uint64_t)k * 1024 * 1024, &v);

			ck_assert_uint_eq(n, 1024 * 1024);
			check_bytes(buf, n, (uint64_t)k * 1024 * 1024, v);
			ck_assert_uint_le(readahead_bytes(small), 3 * RA_CHUNK);
		}
	}
	for (i = 0; i < N; i++)
		ra_stream_close(s[i]);
	readahead_free(small);
	free(buf);
}
END_TEST

START_TEST(close_frees_the_context)
{
	struct ra_stream *s;
	unsigned char buf[4096];
	unsigned v;

	sim_fill(&sim, 10UL * 1024 * 1024, 1);
	sim.delay_us = 5000;
	s = ra_stream_new(ra, fetch, ctx_free, &sim);
	(void)read_like_mount(s, buf, sizeof(buf), 0, &v);
	(void)read_like_mount(s, buf, sizeof(buf), sizeof(buf), &v);
	ra_stream_close(s);
	/* Fetches under way hold the stream; they end within their delay. */
	nap_us(200000);
	ck_assert(sim.freed);
	ck_assert_uint_eq(readahead_bytes(ra), 0);
}
END_TEST

void fs_readahead_cases(Suite *s)
{
	TCASE_TABLE(s, "exact", setup, teardown, 120,
		    sequential_reads_are_whole, odd_read_sizes_straddle_chunks,
		    parallel_reads_out_of_order, a_change_is_never_mixed_in,
		    failed_fetches_are_read_directly,
		    invalidate_forgets_chunks_in_flight,
		    budget_is_shared_and_given_back, close_frees_the_context);
}
