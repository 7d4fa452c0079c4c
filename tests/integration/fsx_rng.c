/* SPDX-License-Identifier: MIT */
/*
 * fsx_rng: the random numbers of the tester: a generator of its own for
 * each step (the seed, the worker and the step number), and the sizes,
 * offsets and lengths the steps draw. (fsx_i.h: the parts of the tester)
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "tests/integration/fsx_i.h"

/* ---- the random numbers --------------------------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Each step has its own generator: a step draws the same numbers whatever
 * the steps before it did (or whether they ran). */
void rng_init(struct rng *r, uint64_t seed, uint64_t step)
{
	uint64_t y = step;
	uint64_t x = seed ^ splitmix(&y);
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** */
static uint64_t next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t res = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

/* Uniform in [0, n). */
uint64_t rnd(struct rng *r, uint64_t n)
{
	if (n == 0)
		return 0;
	return (uint64_t)(((unsigned __int128)next(r) * n) >> 64);
}

bool pct(struct rng *r, unsigned p)
{
	return rnd(r, 100) < p;
}

void fill(struct rng *r, unsigned char *p, size_t n)
{
	uint64_t x = next(r) | 1;
	size_t i;

	for (i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

uint64_t min_u(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Uniform in [lo, hi], both capped at the largest size. */
static uint64_t range(struct rng *r, uint64_t lo, uint64_t hi)
{
	hi = min_u(hi, o.max_size);
	if (lo > hi)
		lo = 1;
	return lo + rnd(r, hi - lo + 1);
}

/* A size in [1, max-size]: mostly small, some large; a fifth of those
 * over a page are a page multiple, or one byte off it. */
uint64_t rsize(struct rng *r)
{
	uint64_t n, p;

	if (pct(r, o.large_pct)) {
		n = range(r, MiB, o.max_size);
	} else {
		p = rnd(r, 100);
		if (p < 30)
			n = range(r, 1, 64);
		else if (p < 60)
			n = range(r, 65, 4 * KiB);
		else if (p < 80)
			n = range(r, 4 * KiB + 1, 64 * KiB);
		else if (p < 94)
			n = range(r, 64 * KiB + 1, MiB);
		else
			n = range(r, MiB + 1, 8 * MiB);
	}
	if (n > 4096 && pct(r, 20))
		n = (n & ~4095ULL) - 1 + rnd(r, 3);
	return n < 1 ? 1 : min_u(n, o.max_size);
}

/* An offset for a file of SIZE bytes: within it, near its end, past it
 * (a hole), or near page and 4 MiB boundaries (the mount's readahead and
 * write gathering work in such units); at most max-size. */
uint64_t roff(struct rng *r, uint64_t size)
{
	uint64_t off, unit, d;

	switch (rnd(r, 10)) {
	case 0:
	case 1:
	case 2:
	case 3:
		off = rnd(r, size + 1);
		break;
	case 4:
		off = size - min_u(size, rsize(r));
		break;
	case 5:
		off = size + (pct(r, 30) ? 0 : rsize(r));
		break;
	case 6:
	case 7:
		unit = rnd(r, 2) ? 4096 : 4 * MiB;
		off = rnd(r, o.max_size / unit + 1) * unit;
		if (pct(r, 50)) {
			d = rnd(r, 3);
			off = off + d >= 1 ? off + d - 1 : 0;
		}
		break;
	default:
		off = rnd(r, o.max_size);
		break;
	}
	return min_u(off, o.max_size);
}

/* A length to truncate a file of SIZE bytes to. */
uint64_t rlen(struct rng *r, uint64_t size)
{
	uint64_t n;

	switch (rnd(r, 10)) {
	case 0:
		return 0;
	case 1:
	case 2:
	case 3:
		return rnd(r, size + 1);
	case 4:
	case 5:
	case 6:
		n = size + rsize(r);
		break;
	case 7:
		n = rnd(r, o.max_size / 4096 + 1) * 4096;
		break;
	default:
		n = rsize(r);
		break;
	}
	return min_u(n, o.max_size);
}
