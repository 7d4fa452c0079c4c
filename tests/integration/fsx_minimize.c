/* SPDX-License-Identifier: MIT */
/*
 * fsx_minimize: --minimize: delta debugging over the steps of a worker
 * that saw a difference, each try alone in a fresh directory. (fsx_i.h: the parts of the tester)
 */
#include "config.h"

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/fsx_i.h"
#include "tests/sys_helpers.h"

/* ---- minimizing ----------------------------------------------------------- */

static char *steps_text(const uint32_t *v, size_t n)
{
	struct sbuf sb = {0};
	size_t i, j;

	for (i = 0; i < n; i = j + 1) {
		for (j = i; j + 1 < n && v[j + 1] == v[j] + 1; j++)
			;
		if (j > i)
			sb_add(&sb, "%s%u-%u", i ? "," : "", v[i], v[j]);
		else
			sb_add(&sb, "%s%u", i ? "," : "", v[i]);
	}
	return sb.p ? sb.p : strdup("");
}

struct mini {
	struct worker *w;
	enum kind kind;
	enum cat cat;
	uint64_t last;
	unsigned runs;
	unsigned char *mask;
};

/* Does the steps' sequence alone (in a fresh directory) still show the
 * difference (the same kind of step, the same kind of difference)? */
static bool mini_try(struct mini *m, const uint32_t *v, size_t n)
{
	struct worker *w = m->w;
	char sub[64];
	size_t i;
	bool hit;
	int s;

	memset(m->mask, 0, m->last + 1);
	for (i = 0; i < n; i++)
		m->mask[v[i]] = 1;
	snprintf(sub, sizeof(sub), "m%d.%u", w->idx, m->runs++);
	for (s = 0; s < 3; s++)
		if (o.root[s] != NULL)
			snprintf(w->dir[s], sizeof(w->dir[s]), "%s/%s",
				 o.root[s], sub);
	w->mask = m->mask;
	w->nops = m->last + 1;
	run(w);
	hit = w->failed && w->fail_kind == m->kind && w->fail_cat == m->cat;
	for (s = 0; s < 2; s++)
		th_rmtree(w->dir[s]);
	return hit;
}

/* Delta debugging over the steps up to the failing one (complements
 * only), worker F alone. */
void minimize(const struct worker *f)
{
	struct mini m = {0};
	struct worker *w;
	uint32_t *v = NULL, *c = NULL;
	size_t n = 0, cn, i, chunk, start, end, parts = 2;
	struct rng r;
	char *text;
	bool reduced;
	uint64_t st;

	if (f->fail_cat == C_TIMEOUT || f->fail_kind == K_SETUP)
		return;
	w = worker_new(f->idx, f->seed, NULL);
	m.mask = calloc(f->fail_step + 1, 1);
	v = calloc(f->fail_step + 1, sizeof(*v));
	c = calloc(f->fail_step + 1, sizeof(*c));
	if (w == NULL || m.mask == NULL || v == NULL || c == NULL)
		goto out;
	atomic_store(&g_watch[WORKERS_MAX], w);
	m.w = w;
	m.kind = f->fail_kind;
	m.cat = f->fail_cat;
	m.last = f->fail_step;
	w->quiet = true;
	for (st = 0; st <= f->fail_step; st++) {
		if (o.mask != NULL && !o.mask[st])
			continue;
		rng_init(&r, f->seed, st);
		if (!(o.skip & (1U << draw_kind(&r))))
			v[n++] = (uint32_t)st;
	}
	printf("fsx: minimizing the %zu steps up to step %" PRIu64
	       " of worker %d alone (at most %u runs)\n",
	       n, f->fail_step, f->idx, o.minimize);
	fflush(stdout);
	if (!mini_try(&m, v, n)) {
		printf("fsx: the difference did not recur with worker %d "
		       "alone: not minimized\n",
		       f->idx);
		goto out;
	}
	while (n >= 2 && m.runs < o.minimize) {
		chunk = (n + parts - 1) / parts;
		reduced = false;
		for (i = 0; i < parts && !reduced && m.runs < o.minimize; i++) {
			start = i * chunk;
			if (start >= n)
				break;
			end = min_u(n, start + chunk);
			cn = 0;
			memcpy(c, v, start * sizeof(*v));
			cn = start;
			memcpy(c + cn, v + end, (n - end) * sizeof(*v));
			cn += n - end;
			if (cn == 0 || !mini_try(&m, c, cn))
				continue;
			memcpy(v, c, cn * sizeof(*v));
			n = cn;
			parts = parts > 2 ? parts - 1 : 2;
			reduced = true;
			printf("fsx: minimizing: %zu steps (run %u)\n", n,
			       m.runs);
			fflush(stdout);
		}
		if (!reduced) {
			if (parts >= n)
				break;
			parts = min_u(n, parts * 2);
		}
	}
	text = steps_text(v, n);
	printf("fsx: minimized to %zu steps (%u runs): --steps %s\n"
	       "fsx: the sequence, worker %d alone:\n",
	       n, m.runs, text, f->idx);
	fflush(stdout);
	/* Once more, showing every operation and the report. */
	w->quiet = false;
	w->verbose = true;
	g_reported = 0;
	atomic_store(&g_stop, false);
	memset(m.mask, 0, m.last + 1);
	for (i = 0; i < n; i++)
		m.mask[v[i]] = 1;
	o.steps_arg = text;
	free(o.mask);
	o.mask = m.mask;
	o.seed = f->seed;
	o.workers = 1;
	o.ops = m.last + 1;
	snprintf(w->dir[MNT], sizeof(w->dir[MNT]), "%s/m%d.final", o.root[MNT],
		 f->idx);
	snprintf(w->dir[MIR], sizeof(w->dir[MIR]), "%s/m%d.final", o.root[MIR],
		 f->idx);
	if (o.root[OUT] != NULL)
		snprintf(w->dir[OUT], sizeof(w->dir[OUT]), "%s/m%d.final",
			 o.root[OUT], f->idx);
	w->idx = 0;
	w->mask = m.mask;
	w->nops = m.last + 1;
	if (run(w) == 0)
		printf("fsx: the minimized sequence passed this time (the "
		       "difference is not deterministic)\n");
	free(text);
out:
	atomic_store(&g_watch[WORKERS_MAX], NULL);
	if (m.mask != o.mask)
		free(m.mask);
	free(v);
	free(c);
	worker_free(w);
}
