/* SPDX-License-Identifier: MIT */
/*
 * transport-bench: requests per second through the transport core, as the
 * mount makes them (a record read and the transport decision, then one
 * agent request on a kept-alive connection), from 1 or more threads.
 *
 *   transport-bench STATE_DIR SANDBOX THREADS SECONDS [health|stat]
 *
 * Prints one line: threads, requests, seconds, requests/s, and the median
 * and 99th percentile latency in microseconds. Not a test: it judges
 * nothing.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/agent_client.h"
#include "client/provider_local.h"
#include "client/transport.h"

#define MAX_SAMPLES 2000000

struct worker {
	struct transport *t;
	const char *id;
	bool stat;
	long long until_ns;
	long count;
	long errors;
	unsigned *lat_us; /* per-request latencies */
	long nlat;
	long cap;
};

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *run(void *arg)
{
	struct worker *w = arg;

	while (now_ns() < w->until_ns) {
		struct sbx_error err;
		enum transport_kind kind;
		long long t0 = now_ns();
		int rc;

		sbx_error_clear(&err);
		/* What every mount operation pays: the record read and the
		 * decision, then the request. */
		rc = transport_session_kind(w->t, w->id, TRANSPORT_OP_FILES,
					    &kind, NULL, &err);
		if (rc == 0 && w->stat) {
			struct proto_attr a;

			rc = ac_stat(w->t, w->id, "", &a, NULL, &err);
		} else if (rc == 0) {
			struct proto_health h;

			rc = ac_health(w->t, w->id, &h, &err);
		}
		if (rc < 0)
			w->errors++;
		w->count++;
		if (w->nlat < w->cap)
			w->lat_us[w->nlat++] =
				(unsigned)((now_ns() - t0) / 1000);
	}
	return NULL;
}

static int cmp_u(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct transport_config cfg;
	struct provider *prov = NULL;
	struct transport *t = NULL;
	struct proto_health h;
	struct sbx_error err;
	struct worker *w;
	unsigned *all;
	pthread_t *tids;
	long total = 0, errors = 0, nall = 0, i;
	int threads, secs, n;
	long long start, end;

	if (argc < 5) {
		fprintf(stderr,
			"usage: %s STATE_DIR SANDBOX THREADS SECONDS "
			"[health|stat]\n",
			argv[0]);
		return 2;
	}
	threads = atoi(argv[3]);
	secs = atoi(argv[4]);
	if (threads < 1 || threads > 256 || secs < 1)
		return 2;
	sbx_error_clear(&err);
	if (provider_local_new(argv[1], &prov, &err) < 0) {
		fprintf(stderr, "transport-bench: %s\n", err.reason);
		return 1;
	}
	transport_config_defaults(&cfg);
	if (transport_new(prov, &cfg, &t) < 0)
		return 1;
	if (transport_resume(t, argv[2], &h, &err) < 0) {
		fprintf(stderr, "transport-bench: %s\n", err.reason);
		return 1;
	}
	w = calloc((size_t)threads, sizeof(*w));
	tids = calloc((size_t)threads, sizeof(*tids));
	start = now_ns();
	for (n = 0; n < threads; n++) {
		w[n].t = t;
		w[n].id = argv[2];
		w[n].stat = argc > 5 && strcmp(argv[5], "stat") == 0;
		w[n].until_ns = start + (long long)secs * 1000000000LL;
		w[n].cap = MAX_SAMPLES / threads;
		w[n].lat_us = calloc((size_t)w[n].cap, sizeof(unsigned));
		pthread_create(&tids[n], NULL, run, &w[n]);
	}
	for (n = 0; n < threads; n++) {
		pthread_join(tids[n], NULL);
		total += w[n].count;
		errors += w[n].errors;
		nall += w[n].nlat;
	}
	end = now_ns();
	all = calloc((size_t)nall + 1, sizeof(unsigned));
	for (n = 0, i = 0; n < threads; n++) {
		memcpy(all + i, w[n].lat_us,
		       (size_t)w[n].nlat * sizeof(unsigned));
		i += w[n].nlat;
		free(w[n].lat_us);
	}
	qsort(all, (size_t)nall, sizeof(unsigned), cmp_u);
	printf("%d threads: %ld requests (%ld errors) in %.2f s: %.0f req/s, "
	       "p50 %u us, p99 %u us\n",
	       threads, total, errors, (double)(end - start) / 1e9,
	       (double)total / ((double)(end - start) / 1e9),
	       nall ? all[nall / 2] : 0,
	       nall ? all[(long)((double)nall * 0.99)] : 0);
	free(all);
	free(w);
	free(tids);
	transport_free(t);
	provider_free(prov);
	return errors == 0 ? 0 : 1;
}
