/* SPDX-License-Identifier: MIT */
/*
 * fsx_options: the command line: usage, and the options parsed into o. (fsx_i.h: the parts of the tester)
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/fsx_i.h"

/* ---- options -------------------------------------------------------------- */

static void usage(FILE *f)
{
	unsigned i;

	fprintf(f,
		"usage: fsx [options] MOUNTDIR MIRRORDIR\n"
		"  --seed N           the seed (default: from the time; always "
		"printed)\n"
		"  --ops N            steps of each worker (default 1000)\n"
		"  --workers N        parallel workers, each in its own "
		"subdirectory w<K>\n"
		"                     (default 1, at most %d)\n"
		"  --max-size BYTES   the largest size or offset (default 64M; "
		"K, M, G)\n"
		"  --large PCT        percent of sizes from 1 MiB to the "
		"largest "
		"(default 2)\n"
		"  --check-every N    whole contents and listing every N steps "
		"(default 50)\n"
		"  --op-timeout S     an operation on the mount longer than S "
		"seconds is a\n"
		"                     difference (default 60)\n"
		"  --skip LIST        leave these kinds out (their steps are "
		"no-ops)\n"
		"  --steps LIST       run only these steps (N,N-M,...)\n"
		"  --minimize[=RUNS]  after a difference, find a small "
		"sequence "
		"that shows it\n"
		"                     (default at most 300 runs)\n"
		"  --verify-only      only compare the two trees, whole\n"
		"  --outside DIR      MOUNTDIR as the sandbox's root holds it "
		"on the host\n"
		"                     (STATE/sandboxes/<sb>/root/...): "
		"changes are also made\n"
		"                     there, between the mount's steps\n"
		"  --outside-pct N    percent of the steps made in DIR "
		"(default 15)\n"
		"  --settle-ms MS     how long a change made in DIR may take "
		"to show through\n"
		"                     the mount (default 2000)\n"
		"  --outside-close-open  before a rename, replacement or "
		"unlink in DIR, close\n"
		"                     the files open under the names it takes "
		"away\n"
		"  -v, --verbose      print every operation\n"
		"kinds for --skip:",
		WORKERS_MAX);
	for (i = 0; i < NDRAWN; i++)
		fprintf(f, " %s", kinds[i].name);
	fprintf(f, " (mmap: both mmap kinds; outside: every out_ kind)\n"
		   "exit: 0 agreed, 1 a difference, 2 a usage or setup "
		   "error\n");
}

static bool parse_u64(const char *s, uint64_t *out, bool suffix)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *s == '-')
		return false;
	if (suffix && *end != '\0' && end[1] == '\0') {
		unsigned shift = *end == 'K' || *end == 'k'   ? 10
				 : *end == 'M' || *end == 'm' ? 20
				 : *end == 'G' || *end == 'g' ? 30
							      : 0;

		if (shift == 0 || v > (ULLONG_MAX >> shift))
			return false;
		v <<= shift;
		end++;
	}
	if (*end != '\0')
		return false;
	*out = v;
	return true;
}

static bool parse_skip(const char *arg)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	bool ok = copy != NULL;
	unsigned i;

	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "mmap") == 0) {
			o.skip |= 1U << K_MMAP_READ | 1U << K_MMAP_WRITE;
			continue;
		}
		if (strcmp(tok, "outside") == 0) {
			for (i = K_OUT_WRITE; i <= K_OUT_UTIMES; i++)
				o.skip |= 1U << i;
			continue;
		}
		for (i = 0; i < NDRAWN; i++)
			if (strcmp(tok, kinds[i].name) == 0)
				break;
		if (i == NDRAWN) {
			fprintf(stderr, "fsx: --skip: unknown kind %s\n", tok);
			ok = false;
			break;
		}
		o.skip |= 1U << i;
	}
	free(copy);
	return ok;
}

static bool parse_steps(const char *arg)
{
	const char *p = arg;
	unsigned long a, b;
	char *end;

	o.mask = calloc(o.ops ? o.ops : 1, 1);
	if (o.mask == NULL)
		return false;
	while (*p != '\0') {
		errno = 0;
		a = strtoul(p, &end, 10);
		if (end == p || errno != 0)
			return false;
		b = a;
		if (*end == '-') {
			p = end + 1;
			b = strtoul(p, &end, 10);
			if (end == p || errno != 0 || b < a)
				return false;
		}
		for (; a <= b && a < o.ops; a++)
			o.mask[a] = 1;
		if (*end == ',')
			end++;
		else if (*end != '\0')
			return false;
		p = end;
	}
	return true;
}

/* A whole number from LO to HI into OUT (untouched when it is not). */
static bool parse_uint(const char *s, uint64_t lo, uint64_t hi, unsigned *out)
{
	uint64_t v;

	if (!parse_u64(s, &v, false) || v < lo || v > hi)
		return false;
	*out = (unsigned)v;
	return true;
}

enum {
	OPT_SEED = 256,
	OPT_OPS,
	OPT_WORKERS,
	OPT_MAX_SIZE,
	OPT_LARGE,
	OPT_CHECK_EVERY,
	OPT_OP_TIMEOUT,
	OPT_SKIP,
	OPT_STEPS,
	OPT_MINIMIZE,
	OPT_VERIFY_ONLY,
	OPT_OUTSIDE,
	OPT_OUTSIDE_PCT,
	OPT_SETTLE_MS,
	OPT_CLOSE_OPEN,
};

/* The options that take a whole number in a range, and their field of o. */
struct bounded_opt {
	int opt;
	uint64_t lo, hi;
	unsigned *out;
};

static const struct bounded_opt bounded[] = {
	{OPT_WORKERS, 1, WORKERS_MAX, &o.workers},
	{OPT_LARGE, 0, 100, &o.large_pct},
	{OPT_CHECK_EVERY, 1, UINT32_MAX, &o.check_every},
	{OPT_OP_TIMEOUT, 1, 86400, &o.op_timeout},
	{OPT_OUTSIDE_PCT, 0, 100, &o.outside_pct},
	{OPT_SETTLE_MS, 1, 600000, &o.settle_ms},
};

/* The row of bounded for option C, NULL when C takes no such number. */
static const struct bounded_opt *bounded_find(int c)
{
	size_t i;

	for (i = 0; i < sizeof(bounded) / sizeof(bounded[0]); i++)
		if (bounded[i].opt == c)
			return &bounded[i];
	return NULL;
}

int parse(int argc, char *argv[])
{
	static const struct option lopts[] = {
		{"seed", required_argument, NULL, OPT_SEED},
		{"ops", required_argument, NULL, OPT_OPS},
		{"workers", required_argument, NULL, OPT_WORKERS},
		{"max-size", required_argument, NULL, OPT_MAX_SIZE},
		{"large", required_argument, NULL, OPT_LARGE},
		{"check-every", required_argument, NULL, OPT_CHECK_EVERY},
		{"op-timeout", required_argument, NULL, OPT_OP_TIMEOUT},
		{"skip", required_argument, NULL, OPT_SKIP},
		{"steps", required_argument, NULL, OPT_STEPS},
		{"minimize", optional_argument, NULL, OPT_MINIMIZE},
		{"verify-only", no_argument, NULL, OPT_VERIFY_ONLY},
		{"outside", required_argument, NULL, OPT_OUTSIDE},
		{"outside-pct", required_argument, NULL, OPT_OUTSIDE_PCT},
		{"settle-ms", required_argument, NULL, OPT_SETTLE_MS},
		{"outside-close-open", no_argument, NULL, OPT_CLOSE_OPEN},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool seed_set = false;
	int c;

	o.argv0 = argv[0];
	while ((c = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		const struct bounded_opt *b = bounded_find(c);

		if (b != NULL) {
			if (!parse_uint(optarg, b->lo, b->hi, b->out))
				goto bad;
			continue;
		}
		switch (c) {
		case OPT_SEED:
			if (!parse_u64(optarg, &o.seed, false))
				goto bad;
			seed_set = true;
			break;
		case OPT_OPS:
			if (!parse_u64(optarg, &o.ops, false) ||
			    o.ops > UINT32_MAX)
				goto bad;
			break;
		case OPT_MAX_SIZE:
			if (!parse_u64(optarg, &o.max_size, true) ||
			    o.max_size < 1 || o.max_size > SIZE_CAP)
				goto bad;
			break;
		case OPT_SKIP:
			o.skip_arg = optarg;
			if (!parse_skip(optarg))
				return 2;
			break;
		case OPT_STEPS:
			o.steps_arg = optarg;
			break;
		case OPT_MINIMIZE:
			o.minimize = 300;
			if (optarg != NULL &&
			    !parse_uint(optarg, 1, 100000, &o.minimize))
				goto bad;
			break;
		case OPT_VERIFY_ONLY:
			o.verify_only = true;
			break;
		case OPT_OUTSIDE:
			o.root[OUT] = optarg;
			break;
		case OPT_CLOSE_OPEN:
			o.close_open = true;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	o.root[MNT] = argv[optind];
	o.root[MIR] = argv[optind + 1];
	/* --steps needs the final --ops. */
	if (o.steps_arg != NULL && !parse_steps(o.steps_arg)) {
		fprintf(stderr, "fsx: --steps: bad list %s\n", o.steps_arg);
		return 2;
	}
	if (!seed_set) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		o.seed = ((uint64_t)ts.tv_sec * 1000003ULL ^
			  (uint64_t)ts.tv_nsec ^ (uint64_t)getpid()) %
			 1000000000ULL;
	}
	return 0;
bad:
	fprintf(stderr, "fsx: bad value for --%s: %s\n",
		lopts[c - OPT_SEED].name, optarg);
	return 2;
}
