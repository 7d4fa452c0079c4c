/* SPDX-License-Identifier: MIT */
/*
 * fsx: a random differential tester for the mount, in the spirit of fsx.
 *
 * It applies seeded random sequences of file operations to a tree under a
 * directory of the mount (MOUNTDIR, such as MOUNT/<sandbox>/files/fsx)
 * and the same operations to a native mirror directory (MIRRORDIR), and
 * compares the two sides after every step. Each worker (a thread) owns
 * the subdirectory w<K> of both, with six names (f0 f1 f2 d0/f3 d0/f4
 * d1/f5), up to three descriptors open on each file at once, and up to
 * three open files whose names are gone (unlinked, or renamed over).
 *
 * The operations: read and pread at random offsets; write and pwrite,
 * past the end of file too (holes); append through O_APPEND descriptors;
 * truncate and ftruncate, growing and shrinking; rename, over an existing
 * file too; mmap reads, and mmap writes (MAP_SHARED, then msync MS_SYNC),
 * both also of a page past the end of file (SIGBUS on both sides);
 * copy_file_range between two files and within one; fsync and fdatasync;
 * lseek; close, and open again with other flags; unlink and create
 * (O_EXCL, O_TRUNC). Sizes go from 1 byte to --max-size (default 64 MiB):
 * mostly small, --large percent of them from 1 MiB up to the cap.
 *
 * After every step it compares the results and errnos of both sides, the
 * bytes read, the size (fstat) and the file position of every descriptor
 * of the files the step touched, and the stat of the names it touched;
 * every --check-every steps, at the start and at the end, the listing of
 * the worker's tree (names, types, sizes) and the whole contents of every
 * file. The first difference stops the run: it prints the seed, the step,
 * the operation and what each side returned (for bytes, the first
 * differing offset and a hex excerpt of both), the worker's last
 * operations, and the command lines that replay it. A SIGBUS on one side
 * only is a difference; an operation on the mount that takes longer than
 * --op-timeout seconds is one too: the report is printed and the process
 * exits (a request the FUSE daemon has already taken keeps the exit
 * waiting until the daemon answers or the mount is aborted, as the test
 * scripts' cleanup does).
 *
 * The names the mount keeps for open unlinked files (.fuse_hidden*,
 * SEMANTICS.md) are left out of the listings of a run; --verify-only does
 * not leave them out (after an unmount, none may be left).
 *
 * Changes made inside the sandbox (--outside DIR: MOUNTDIR as the
 * sandbox's root holds it on the host, STATE/sandboxes/<sb>/root/...).
 * --outside-pct percent of the steps (default 15) are then made in DIR,
 * natively, and in the mirror, between the mount's steps, as a job or
 * another client makes them: pwrite and append through a descriptor of
 * their own, truncate, create (exclusive, or rewriting in place like a
 * shell's `>`), replace (a file written aside and renamed over the name,
 * as editors and compilers do), rename over any name, unlink, chmod and
 * utimes, of files open through the mount too; what is made there gets
 * DIR's owner, so that the mount can still write it. Before such a change,
 * an open of the name through the mount sends what the mount gathered for
 * it. The mount promises to show the change within the time its event
 * takes (SEMANTICS.md, "Consistency"), so after each one the tester looks,
 * again and again for up to --settle-ms (default 2000), at what the change
 * touched: first the bytes and then the sizes through the descriptors
 * opened before it (the interesting case: POSIX has another process's
 * write seen by the next read), then the names' stat (with the mode or
 * mtime the change set), their directories' listings and the contents
 * through a new descriptor, until all agree with the mirror. Still
 * differing then is a difference ("a change made in the sandbox did not
 * show through the mount", with the last look). Only these looks are
 * retried: every other step is compared exactly, as always. The run ends
 * with how long the changes took to show (median, p95 and max, each up to
 * the end of the first look that agreed). On a mount without events
 * (-o noevents) with long timeouts, changes stay hidden and the run fails:
 * tests/integration/t-fsx.sh checks that too.
 *
 * A descriptor whose file was renamed or removed in DIR is lost: in the
 * mirror it keeps its file, as POSIX says, but the mount names open files
 * by path and can at best fail for it. A call through a lost descriptor
 * that fails on the mount is not made in the mirror (both sides then did
 * nothing); one that succeeds must agree with the mirror like any other,
 * so a lost descriptor that reaches the file that has its old name now is
 * a difference. --outside-close-open closes the files open under a name
 * before a rename, replacement or unlink in DIR takes it away, so that no
 * descriptor is lost.
 *
 * Replaying. Each step draws from its own generator (the seed, the worker
 * and the step number), so a run is the same for the same seed and
 * options: worker K of --seed S runs the sequence of worker 0 of
 * --seed S+K, and `fsx --seed S+K --workers 1 --ops N+1` on empty
 * directories replays worker K up to step N. --skip leaves the chosen
 * kinds out as no-ops: the other steps stay the same, so a skip shows
 * whether a kind matters to a failure. --steps runs only the listed steps
 * (the others are no-ops), and --minimize, after a difference, looks for
 * a small list of steps that still shows it (by delta debugging, worker
 * alone, each try in a fresh directory) and prints that sequence with its
 * --steps command line. -v prints every operation.
 *
 * The tester itself is checked by running it on two native directories
 * (MOUNTDIR a second native directory; with --outside, DIR is MOUNTDIR
 * itself): both sides must agree for every seed. tests/integration/t-fsx.sh
 * does that with its own seed first, then a short run on a real mount, a
 * large-file round, --verify-only of the sandbox's backing root and of the
 * mount after a remount, and a round with --outside.
 * scripts/fsx-long is the long run: rounds of several workers with a cold
 * remount and --verify-only between rounds (scripts/fsx-long -h).
 *
 * usage: fsx [options] MOUNTDIR MIRRORDIR (fsx -h lists the options)
 * exit: 0 both sides agreed all the way, 1 a difference, 2 a usage or
 * setup error.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define KiB 1024ULL
#define MiB (1024ULL * 1024ULL)
#define NNAMES 6
#define NDIRS 2
/* Descriptors open on one file at once. */
#define POOL 3
/* Open files without a name kept at once. */
#define MAX_ORPHANS 3
#define NOBJ (NNAMES + MAX_ORPHANS)
/* Operations kept for the replay log. */
#define RING 20
#define DESC_MAX 256
#define TEXT_MAX (DESC_MAX + 160)
/* Reads of the whole-contents check. */
#define CHUNK (1U << 20)
#define HEX_SHOW 16
#define WORKERS_MAX 64
#define DEPTH_MAX 16
#define SIZE_CAP (1024 * MiB)
#define MNT 0
#define MIR 1
/* The mount's directory seen in the sandbox's root (--outside). */
#define OUT 2
/* The name an outside replacement writes first, in the target's
 * directory. */
#define OUT_TMP ".fsx-outside-tmp"

static const char *const names[NNAMES] = {"f0",	   "f1",    "f2",
					  "d0/f3", "d0/f4", "d1/f5"};
static const char *const dirs[NDIRS] = {"d0", "d1"};
static const char *const side_name[2] = {"mount", "mirror"};

enum kind {
	K_READ,
	K_PREAD,
	K_WRITE,
	K_PWRITE,
	K_APPEND,
	K_TRUNCATE,
	K_FTRUNCATE,
	K_RENAME,
	K_MMAP_READ,
	K_MMAP_WRITE,
	K_COPY,
	K_FSYNC,
	K_REOPEN,
	K_CLOSE,
	K_UNLINK,
	K_CREATE,
	K_LSEEK,
	/* Changes made inside the sandbox (--outside), not through the
	 * mount. */
	K_OUT_WRITE,
	K_OUT_APPEND,
	K_OUT_TRUNCATE,
	K_OUT_CREATE,
	K_OUT_REPLACE,
	K_OUT_RENAME,
	K_OUT_UNLINK,
	K_OUT_CHMOD,
	K_OUT_UTIMES,
	NDRAWN,
	/* Not drawn: parts of other steps. */
	K_OPEN = NDRAWN,
	K_CHECK,
	K_SETUP,
	NKINDS
};

static const struct {
	const char *name;
	unsigned weight;
} kinds[NKINDS] = {
	[K_READ] = {"read", 8},
	[K_PREAD] = {"pread", 12},
	[K_WRITE] = {"write", 8},
	[K_PWRITE] = {"pwrite", 12},
	[K_APPEND] = {"append", 5},
	[K_TRUNCATE] = {"truncate", 4},
	[K_FTRUNCATE] = {"ftruncate", 6},
	[K_RENAME] = {"rename", 4},
	[K_MMAP_READ] = {"mmap_read", 5},
	[K_MMAP_WRITE] = {"mmap_write", 5},
	[K_COPY] = {"copy_file_range", 6},
	[K_FSYNC] = {"fsync", 3},
	[K_REOPEN] = {"reopen", 6},
	[K_CLOSE] = {"close", 3},
	[K_UNLINK] = {"unlink", 3},
	[K_CREATE] = {"create", 4},
	[K_LSEEK] = {"lseek", 3},
	[K_OUT_WRITE] = {"out_write", 5},
	[K_OUT_APPEND] = {"out_append", 3},
	[K_OUT_TRUNCATE] = {"out_truncate", 3},
	[K_OUT_CREATE] = {"out_create", 3},
	[K_OUT_REPLACE] = {"out_replace", 2},
	[K_OUT_RENAME] = {"out_rename", 3},
	[K_OUT_UNLINK] = {"out_unlink", 2},
	[K_OUT_CHMOD] = {"out_chmod", 2},
	[K_OUT_UTIMES] = {"out_utimes", 2},
	[K_OPEN] = {"open", 0},
	[K_CHECK] = {"check", 0},
	[K_SETUP] = {"setup", 0},
};

enum cat {
	C_RESULT,
	C_BYTES,
	C_SIZE,
	C_POS,
	C_STAT,
	C_LIST,
	C_TIMEOUT,
	C_STALE
};
static const char *const cat_text[] = {
	"the results differ",
	"the bytes differ",
	"the sizes differ",
	"the positions differ",
	"the stats differ",
	"the listings differ",
	"no answer from the mount",
	"a change made in the sandbox did not show through the mount",
};

static struct {
	uint64_t seed;
	uint64_t ops;
	unsigned workers;
	uint64_t max_size;
	unsigned large_pct;
	unsigned check_every;
	unsigned op_timeout;
	uint32_t skip;
	const char *skip_arg;
	const char *steps_arg;
	unsigned char *mask;
	unsigned minimize;
	bool verify_only;
	bool verbose;
	/* --outside: the percent of steps made there, how long a change
	 * may take to show, whether renames and unlinks there leave open
	 * files alone, and who owns what is made there. */
	unsigned outside_pct;
	unsigned settle_ms;
	bool close_open;
	uid_t out_uid;
	gid_t out_gid;
	/* MOUNTDIR, MIRRORDIR, and the --outside directory (or NULL). */
	const char *root[3];
	const char *argv0;
} o = {
	.ops = 1000,
	.workers = 1,
	.max_size = 64 * MiB,
	.large_pct = 2,
	.check_every = 50,
	.op_timeout = 60,
	.outside_pct = 15,
	.settle_ms = 2000,
};

/* ---- the random numbers --------------------------------------------------- */

struct rng {
	uint64_t s[4];
};

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Each step has its own generator: a step draws the same numbers whatever
 * the steps before it did (or whether they ran). */
static void rng_init(struct rng *r, uint64_t seed, uint64_t step)
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
static uint64_t rnd(struct rng *r, uint64_t n)
{
	if (n == 0)
		return 0;
	return (uint64_t)(((unsigned __int128)next(r) * n) >> 64);
}

static bool pct(struct rng *r, unsigned p)
{
	return rnd(r, 100) < p;
}

static void fill(struct rng *r, unsigned char *p, size_t n)
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

static uint64_t min_u(uint64_t a, uint64_t b)
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
static uint64_t rsize(struct rng *r)
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
static uint64_t roff(struct rng *r, uint64_t size)
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
static uint64_t rlen(struct rng *r, uint64_t size)
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

/* ---- the workers' state --------------------------------------------------- */

/* One descriptor of each side, opened with the same flags. A lost one's
 * file was renamed or removed inside the sandbox after the open (its
 * mirror descriptor still has it). */
struct xfd {
	int fd[2];
	int flags;
	bool lost;
};

/* An open file: its descriptors, and its name (-1 when it has none). An
 * object exists while it has a descriptor open. */
struct obj {
	bool used;
	int name;
	int was;
	unsigned id;
	struct xfd f[POOL];
};

/* What a call returned: r, or -1 and e; or a SIGBUS while touching a
 * mapping; stage names the call that failed when it is not the one the
 * operation is named after (mmap, msync). */
struct res {
	long long r;
	int e;
	bool bus;
	const char *stage;
};

struct worker {
	int idx;
	uint64_t seed;
	pthread_t th;
	char dir[3][PATH_MAX];
	struct obj obj[NOBJ];
	int name_obj[NNAMES];
	unsigned next_id;
	unsigned char *b[2];
	unsigned char *data;
	size_t bsize;
	const unsigned char *mask;
	uint64_t nops;
	/* Minimizing: remember the difference, print nothing. */
	bool quiet;
	bool verbose;
	bool hide;
	uint64_t step;
	enum kind kind;
	char desc[DESC_MAX];
	const char *_Atomic phase;
	_Atomic long long busy_since;
	struct {
		uint64_t step;
		char text[TEXT_MAX];
	} ring[RING];
	unsigned nring;
	bool failed;
	bool setup_error;
	enum kind fail_kind;
	enum cat fail_cat;
	uint64_t fail_step;
	uint64_t count[NKINDS];
	uint64_t errors[NKINDS];
	/* The call begun last failed on the mount through a lost
	 * descriptor, and was not made in the mirror. */
	bool lost_skipped;
	uint64_t lost_calls;
	/* How long each outside change took to show (microseconds). */
	uint32_t *shown;
	size_t nshown, capshown;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool g_stop;
static unsigned g_reported;
static struct worker *_Atomic g_watch[WORKERS_MAX + 1];
static size_t g_page = 4096;
static __thread sigjmp_buf *volatile t_bus;

static const char *errname(int e)
{
	static __thread char text[32];
	const char *name = strerrorname_np(e);

	if (name != NULL)
		return name;
	snprintf(text, sizeof(text), "errno %d", e);
	return text;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static bool is_outside(enum kind kind)
{
	return kind >= K_OUT_WRITE && kind <= K_OUT_UTIMES;
}

static void set(struct res *res, long long r)
{
	res->e = r < 0 ? errno : 0;
	res->r = r;
	res->bus = false;
	res->stage = NULL;
}

static bool same(const struct res res[2])
{
	if (res[0].bus || res[1].bus)
		return res[0].bus == res[1].bus;
	if (res[0].r != res[1].r)
		return false;
	if (res[0].r >= 0)
		return true;
	return res[0].e == res[1].e &&
	       (res[0].stage == res[1].stage ||
		(res[0].stage != NULL && res[1].stage != NULL &&
		 strcmp(res[0].stage, res[1].stage) == 0));
}

static void fmt_res(const struct res *res, char *out, size_t n)
{
	if (res->bus)
		snprintf(out, n, "SIGBUS");
	else if (res->r < 0)
		snprintf(out, n, "-1 %s%s%s", res->stage ? res->stage : "",
			 res->stage ? ": " : "", errname(res->e));
	else
		snprintf(out, n, "%lld", res->r);
}

static const char *flag_text(int flags, char *out, size_t n)
{
	int acc = flags & O_ACCMODE;

	snprintf(out, n, "%s%s%s%s%s",
		 acc == O_RDONLY   ? "ro"
		 : acc == O_WRONLY ? "wo"
				   : "rw",
		 flags & O_APPEND ? "+append" : "",
		 flags & O_CREAT ? "+creat" : "", flags & O_EXCL ? "+excl" : "",
		 flags & O_TRUNC ? "+trunc" : "");
	return out;
}

/* "i3:f2 fd1[rw]", or "i3:(gone, was d0/f3) fd0[ro,lost]". */
static const char *fd_text(const struct obj *ob, int k, char *out, size_t n)
{
	const char *lost = ob->f[k].lost ? ",lost" : "";
	char fl[48];

	if (ob->name >= 0)
		snprintf(out, n, "i%u:%s fd%d[%s%s]", ob->id, names[ob->name],
			 k, flag_text(ob->f[k].flags, fl, sizeof(fl)), lost);
	else
		snprintf(out, n, "i%u:(gone, was %s) fd%d[%s%s]", ob->id,
			 names[ob->was], k,
			 flag_text(ob->f[k].flags, fl, sizeof(fl)), lost);
	return out;
}

static void path_of(const struct worker *w, int s, const char *rel, char *out,
		    size_t n)
{
	int len = snprintf(out, n, "%s%s%s", w->dir[s], *rel ? "/" : "", rel);

	/* Too long a path fails its call (ENOENT) rather than naming
	 * another. */
	if (len < 0 || (size_t)len >= n)
		out[0] = '\0';
}

/* ---- reports -------------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void sb_add(struct sbuf *sb,
							 const char *fmt, ...)
{
	va_list ap;
	size_t cap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (sb->len + (size_t)n + 1 > sb->cap) {
		cap = sb->cap ? sb->cap * 2 : 4096;
		if (cap < sb->len + (size_t)n + 1)
			cap = sb->len + (size_t)n + 1;
		p = realloc(sb->p, cap);
		if (p == NULL)
			return;
		sb->p = p;
		sb->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(sb->p + sb->len, sb->cap - sb->len, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

static void sb_args(struct sbuf *sb, uint64_t seed, unsigned workers,
		    uint64_t ops, const char *steps)
{
	sb_add(sb,
	       "%s --seed %" PRIu64 " --workers %u --ops %" PRIu64
	       " --max-size %" PRIu64,
	       o.argv0, seed, workers, ops, o.max_size);
	if (o.large_pct != 2)
		sb_add(sb, " --large %u", o.large_pct);
	if (o.check_every != 50)
		sb_add(sb, " --check-every %u", o.check_every);
	if (o.skip_arg != NULL)
		sb_add(sb, " --skip %s", o.skip_arg);
	if (o.root[OUT] != NULL) {
		sb_add(sb, " --outside '%s' --outside-pct %u", o.root[OUT],
		       o.outside_pct);
		if (o.settle_ms != 2000)
			sb_add(sb, " --settle-ms %u", o.settle_ms);
		if (o.close_open)
			sb_add(sb, " --outside-close-open");
	}
	if (steps != NULL)
		sb_add(sb, " --steps %s", steps);
	sb_add(sb, " '%s' '%s'\n", o.root[MNT], o.root[MIR]);
}

static void sb_ring(struct sbuf *sb, const struct worker *w)
{
	unsigned i, n = w->nring < RING ? w->nring : RING;

	if (n == 0)
		return;
	sb_add(sb, "the last %u operations of worker %d (oldest first):\n", n,
	       w->idx);
	for (i = w->nring - n; i < w->nring; i++)
		sb_add(sb, "  #%" PRIu64 " %s\n", w->ring[i % RING].step,
		       w->ring[i % RING].text);
}

static void sb_replay(struct sbuf *sb, const struct worker *w,
		      const char *steps)
{
	if (w->idx < 0)
		return;
	sb_add(sb, "replay: ");
	sb_args(sb, o.seed, o.workers, o.ops, o.steps_arg);
	if (o.workers > 1 || w->seed != o.seed || w->step + 1 < o.ops ||
	    steps != NULL) {
		sb_add(sb, "this worker alone, on empty directories: ");
		sb_args(sb, w->seed, 1, w->step + 1,
			steps ? steps : o.steps_arg);
	}
}

/* The first difference of a worker: remembered, and reported unless the
 * worker is minimizing; it stops every worker. DETAIL is the lines that
 * say what each side did. */
__attribute__((format(printf, 3, 4))) static void differ(struct worker *w,
							 enum cat cat,
							 const char *fmt, ...)
{
	struct sbuf sb = {0};
	va_list ap;
	char *detail = NULL;

	if (w->failed)
		return;
	w->failed = true;
	w->fail_cat = cat;
	w->fail_kind = w->kind;
	w->fail_step = w->step;
	if (w->quiet)
		return;
	atomic_store(&g_stop, true);
	va_start(ap, fmt);
	if (vasprintf(&detail, fmt, ap) < 0)
		detail = NULL;
	va_end(ap);
	pthread_mutex_lock(&g_lock);
	if (g_reported++ > 0) {
		printf("fsx: worker %d also saw a difference at step %" PRIu64
		       " (%s): %s\n",
		       w->idx, w->step, cat_text[cat], w->desc);
		goto out;
	}
	if (w->idx < 0)
		sb_add(&sb, "fsx: DIFFERENCE between the trees: %s\n",
		       cat_text[cat]);
	else
		sb_add(&sb,
		       "fsx: DIFFERENCE at step %" PRIu64
		       " of worker %d (seed %" PRIu64 ", worker seed %" PRIu64
		       "): %s\n",
		       w->step, w->idx, o.seed, w->seed, cat_text[cat]);
	sb_add(&sb, "  operation: %s\n", w->desc);
	sb_add(&sb, "%s", detail ? detail : "");
	sb_ring(&sb, w);
	sb_replay(&sb, w, NULL);
	fwrite(sb.p, 1, sb.len, stdout);
	fflush(stdout);
out:
	pthread_mutex_unlock(&g_lock);
	free(sb.p);
	free(detail);
}

__attribute__((format(printf, 2, 3))) static void record(struct worker *w,
							 const char *fmt, ...)
{
	char *text = w->ring[w->nring % RING].text;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, TEXT_MAX, fmt, ap);
	va_end(ap);
	w->ring[w->nring % RING].step = w->step;
	w->nring++;
	if (w->verbose && !w->quiet)
		printf("w%d #%" PRIu64 " %s\n", w->idx, w->step, text);
}

__attribute__((format(printf, 3, 4))) static void begin_op(struct worker *w,
							   enum kind kind,
							   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->desc, sizeof(w->desc), fmt, ap);
	va_end(ap);
	w->kind = kind;
	w->count[kind]++;
	w->lost_skipped = false;
	atomic_store(&w->phase, "the operation");
	atomic_store(&w->busy_since, now_ms());
}

/* Compare the results of the operation begun last; log it. An outside
 * step's first side is the sandbox's directory, not the mount. */
static bool end_op(struct worker *w, const struct res res[2])
{
	const char *side = is_outside(w->kind) ? "sandbox" : "mount";
	char a[96], b[96];

	atomic_store(&w->phase, "the checks after the operation");
	fmt_res(&res[MNT], a, sizeof(a));
	fmt_res(&res[MIR], b, sizeof(b));
	if (res[MIR].r < 0 || res[MIR].bus)
		w->errors[w->kind]++;
	if (w->lost_skipped) {
		record(w, "%s = mount %s (lost: not made in the mirror)",
		       w->desc, a);
		return true;
	}
	if (same(res)) {
		record(w, "%s = %s", w->desc, b);
		return true;
	}
	record(w, "%s = %s %s, mirror %s", w->desc, side, a, b);
	differ(w, C_RESULT, "  %s:%s %s\n  mirror: %s\n", side,
	       is_outside(w->kind) ? "" : " ", a, b);
	return false;
}

/*
 * A call through a lost descriptor (its file renamed or removed inside
 * the sandbox) that failed on the mount is not made in the mirror, so
 * that both sides stay alike: the mount names open files by path, and
 * the most it can do for such a descriptor is fail (fsx.c's header). S is
 * the side about to be called; true (with the mount's result copied) when
 * the mirror's call is left out.
 */
static bool lost_skip(struct worker *w, const struct xfd *x,
		      const struct xfd *y, int s, struct res res[2])
{
	if (s != MIR || !((x != NULL && x->lost) || (y != NULL && y->lost)) ||
	    !(res[MNT].r < 0 || res[MNT].bus))
		return false;
	res[MIR] = res[MNT];
	w->lost_skipped = true;
	w->lost_calls++;
	return true;
}

static void hex(struct sbuf *sb, const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		sb_add(sb, "%s%02x", i ? " " : "", p[i]);
}

/* What differs between the bytes A (the mount's) and B (the mirror's) of
 * N bytes read at file offset BASE, which are not the same. */
static void bytes_text(struct sbuf *sb, const unsigned char *a,
		       const unsigned char *b, size_t n, uint64_t base,
		       const char *what)
{
	size_t i, last, ndiff = 0, show;
	bool zeros = true;

	for (i = 0; a[i] == b[i]; i++)
		;
	for (last = n - 1; a[last] == b[last]; last--)
		;
	for (size_t j = i; j <= last; j++) {
		ndiff += a[j] != b[j];
		zeros = zeros && a[j] == 0;
	}
	show = min_u(HEX_SHOW, n - i);
	sb_add(sb,
	       "  %s: %zu bytes at offset %" PRIu64
	       "; the first difference at offset %" PRIu64
	       " (byte %zu), the last at %" PRIu64 ", %zu bytes differ\n",
	       what, n, base, base + i, i, base + last, ndiff);
	sb_add(sb, "  mount  @%" PRIu64 ": ", base + i);
	hex(sb, a + i, show);
	sb_add(sb, "\n  mirror @%" PRIu64 ": ", base + i);
	hex(sb, b + i, show);
	sb_add(sb, "\n");
	if (zeros)
		sb_add(sb, "  (the mount's differing bytes are all zero)\n");
}

/* The bytes A (the mount's) and B (the mirror's) of N bytes read at file
 * offset BASE must be the same. */
static bool same_bytes(struct worker *w, const unsigned char *a,
		       const unsigned char *b, size_t n, uint64_t base,
		       const char *what)
{
	struct sbuf sb = {0};

	if (memcmp(a, b, n) == 0)
		return true;
	bytes_text(&sb, a, b, n, base, what);
	differ(w, C_BYTES, "%s", sb.p ? sb.p : "");
	free(sb.p);
	return false;
}

/* ---- objects and descriptors ---------------------------------------------- */

static unsigned nfds(const struct obj *ob)
{
	unsigned k, n = 0;

	for (k = 0; k < POOL; k++)
		n += ob->f[k].fd[MIR] >= 0;
	return n;
}

static struct obj *name_obj(struct worker *w, int n)
{
	return w->name_obj[n] < 0 ? NULL : &w->obj[w->name_obj[n]];
}

static struct obj *new_obj(struct worker *w, int name)
{
	int i, k;

	for (i = 0; i < NOBJ; i++) {
		if (w->obj[i].used)
			continue;
		w->obj[i].used = true;
		w->obj[i].name = w->obj[i].was = name;
		w->obj[i].id = w->next_id++;
		for (k = 0; k < POOL; k++)
			w->obj[i].f[k].fd[MNT] = w->obj[i].f[k].fd[MIR] = -1;
		w->name_obj[name] = i;
		return &w->obj[i];
	}
	abort(); /* orphan_room() keeps a free one */
}

static void free_obj(struct worker *w, struct obj *ob)
{
	if (ob->name >= 0)
		w->name_obj[ob->name] = -1;
	ob->used = false;
}

/* The name N no longer leads to its object (which keeps its descriptors). */
static void unname(struct worker *w, int n)
{
	struct obj *ob = name_obj(w, n);

	if (ob != NULL)
		ob->name = -1;
	w->name_obj[n] = -1;
}

static uint64_t mir_size(const struct xfd *x)
{
	struct stat st;

	return fstat(x->fd[MIR], &st) < 0 ? 0 : (uint64_t)st.st_size;
}

static uint64_t mir_pos(const struct xfd *x)
{
	off_t p = lseek(x->fd[MIR], 0, SEEK_CUR);

	return p < 0 ? 0 : (uint64_t)p;
}

/* Size and position of every descriptor of OB. */
static bool check_obj(struct worker *w, const struct obj *ob)
{
	struct res res[2];
	struct stat st;
	char a[96], b[96], t[160];
	int k, s;

	if (ob == NULL || !ob->used)
		return true;
	for (k = 0; k < POOL; k++) {
		if (ob->f[k].fd[MIR] < 0)
			continue;
		atomic_store(&w->phase, "fstat after the operation");
		for (s = 0; s < 2 && !lost_skip(w, &ob->f[k], NULL, s, res);
		     s++)
			set(&res[s], fstat(ob->f[k].fd[s], &st) < 0
					     ? -1
					     : (long long)st.st_size);
		if (!same(res)) {
			fmt_res(&res[MNT], a, sizeof(a));
			fmt_res(&res[MIR], b, sizeof(b));
			differ(w, C_SIZE,
			       "  then fstat of %s: size\n  mount:  %s\n"
			       "  mirror: %s\n",
			       fd_text(ob, k, t, sizeof(t)), a, b);
			return false;
		}
		for (s = 0; s < 2 && !lost_skip(w, &ob->f[k], NULL, s, res);
		     s++)
			set(&res[s], lseek(ob->f[k].fd[s], 0, SEEK_CUR));
		if (!same(res)) {
			fmt_res(&res[MNT], a, sizeof(a));
			fmt_res(&res[MIR], b, sizeof(b));
			differ(w, C_POS,
			       "  then the file position of %s\n"
			       "  mount:  %s\n  mirror: %s\n",
			       fd_text(ob, k, t, sizeof(t)), a, b);
			return false;
		}
	}
	return true;
}

static const char *type_text(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

/* stat of the name N on both sides: the same errno, type and size. */
static bool check_name(struct worker *w, int n)
{
	struct stat st[2];
	char p[PATH_MAX];
	struct res res[2];
	char a[96], b[96];
	int s;

	if (n < 0)
		return true;
	atomic_store(&w->phase, "stat after the operation");
	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		set(&res[s], stat(p, &st[s]));
	}
	if (!same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		differ(w, C_STAT,
		       "  then stat of %s\n  mount:  %s\n  mirror: %s\n",
		       names[n], a, b);
		return false;
	}
	if (res[MNT].r < 0)
		return true;
	if ((st[MNT].st_mode & S_IFMT) != (st[MIR].st_mode & S_IFMT) ||
	    (S_ISREG(st[MIR].st_mode) && st[MNT].st_size != st[MIR].st_size)) {
		differ(w, C_STAT,
		       "  then stat of %s\n  mount:  %s, size %lld\n"
		       "  mirror: %s, size %lld\n",
		       names[n], type_text(st[MNT].st_mode),
		       (long long)st[MNT].st_size, type_text(st[MIR].st_mode),
		       (long long)st[MIR].st_size);
		return false;
	}
	return true;
}

/* The checks after a step: the objects and the names it touched. */
static bool post(struct worker *w, const struct obj *a, const struct obj *b,
		 int n1, int n2)
{
	return check_obj(w, a) && (b == a || check_obj(w, b)) &&
	       check_name(w, n1) && (n2 == n1 || check_name(w, n2));
}

static bool xclose(struct worker *w, struct obj *ob, int k)
{
	struct res res[2];
	char t[160];
	int s, name = ob->name;
	bool ok;

	begin_op(w, K_CLOSE, "close %s", fd_text(ob, k, t, sizeof(t)));
	for (s = 0; s < 2; s++) {
		set(&res[s], close(ob->f[k].fd[s]));
		ob->f[k].fd[s] = -1;
	}
	/* Both are closed whatever the mount answered. */
	if (ob->f[k].lost && (res[MNT].r < 0 || res[MNT].bus)) {
		res[MIR] = res[MNT];
		w->lost_skipped = true;
		w->lost_calls++;
	}
	ob->f[k].lost = false;
	if (nfds(ob) == 0)
		free_obj(w, ob);
	ok = end_op(w, res);
	return ok && post(w, ob, ob, name, name);
}

/* Room for one more open file without a name. */
static bool orphan_room(struct worker *w)
{
	int i, k, n = 0, first = -1;

	for (i = 0; i < NOBJ; i++) {
		if (w->obj[i].used && w->obj[i].name < 0) {
			n++;
			if (first < 0)
				first = i;
		}
	}
	if (n < MAX_ORPHANS)
		return true;
	for (k = 0; k < POOL; k++) {
		if (w->obj[first].f[k].fd[MIR] >= 0 &&
		    !xclose(w, &w->obj[first], k))
			return false;
	}
	return true;
}

static int draw_flags(struct rng *r, bool creat)
{
	uint64_t p = rnd(r, 100);
	int flags;

	if (p < 15)
		flags = O_RDONLY;
	else if (p < 25)
		flags = O_WRONLY;
	else if (p < 80)
		flags = O_RDWR;
	else if (p < 92)
		flags = O_RDWR | O_APPEND;
	else
		flags = O_WRONLY | O_APPEND;
	if (creat && pct(r, 80))
		flags |= O_CREAT;
	if ((flags & O_ACCMODE) != O_RDONLY && pct(r, 4))
		flags |= O_TRUNC;
	return flags;
}

/* Open the name N with FLAGS on both sides, as one more descriptor of its
 * object (closing one first when it has POOL). *kp: its slot. */
static bool open_name(struct worker *w, struct rng *r, int n, int flags,
		      enum kind kind, int *kp)
{
	struct obj *ob = name_obj(w, n);
	struct res res[2];
	char p[PATH_MAX], fl[48];
	int fd[2], k, s;
	unsigned id;

	if (ob != NULL && nfds(ob) == POOL) {
		if (!xclose(w, ob, (int)rnd(r, POOL)))
			return false;
		ob = name_obj(w, n);
	}
	k = 0;
	id = w->next_id;
	if (ob != NULL) {
		id = ob->id;
		while (ob->f[k].fd[MIR] >= 0)
			k++;
	}
	begin_op(w, kind, "open %s %s as i%u fd%d", names[n],
		 flag_text(flags, fl, sizeof(fl)), id, k);
	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		fd[s] = open(p, flags | O_CLOEXEC, 0644);
		/* The descriptor numbers of the sides may differ. */
		set(&res[s], fd[s] < 0 ? -1 : 0);
	}
	if (!end_op(w, res)) {
		for (s = 0; s < 2; s++)
			if (fd[s] >= 0)
				close(fd[s]);
		return false;
	}
	if (fd[MIR] < 0)
		return post(w, NULL, NULL, n, n);
	if (ob == NULL)
		ob = new_obj(w, n);
	ob->f[k].fd[MNT] = fd[MNT];
	ob->f[k].fd[MIR] = fd[MIR];
	ob->f[k].flags = flags;
	ob->f[k].lost = false;
	if (kp != NULL)
		*kp = k;
	return post(w, ob, ob, n, n);
}

/* What a step needs of its descriptor. */
enum want { W_ANY = 0, W_READ = 1, W_WRITE = 2, W_NOAPPEND = 4 };

static bool fits(int flags, unsigned want)
{
	int acc = flags & O_ACCMODE;

	return (!(want & W_READ) || acc != O_WRONLY) &&
	       (!(want & W_WRITE) || acc != O_RDONLY) &&
	       (!(want & W_NOAPPEND) || !(flags & O_APPEND));
}

/* One of OB's descriptors: four times in five one that fits WANT (when
 * there is one; the others fail alike, EBADF and such). */
static int pick_slot(struct rng *r, const struct obj *ob, unsigned want)
{
	int k, all[POOL], good[POOL], na = 0, ng = 0;

	for (k = 0; k < POOL; k++) {
		if (ob->f[k].fd[MIR] < 0)
			continue;
		all[na++] = k;
		if (fits(ob->f[k].flags, want))
			good[ng++] = k;
	}
	if (ng > 0 && pct(r, 80))
		return good[rnd(r, (uint64_t)ng)];
	return all[rnd(r, (uint64_t)na)];
}

/* The descriptor a step works on: one of an open file without a name a
 * fifth of the time (when there is one), else one of a random name's
 * file. NULL when that name has none open: the step then opens one
 * (creating the file most times). */
static struct xfd *pick_fd(struct worker *w, struct rng *r, struct obj **obp,
			   int *kp, bool *ok, unsigned want)
{
	int orph[NOBJ], no = 0, i, k, n;
	struct obj *ob;

	for (i = 0; i < NOBJ; i++)
		if (w->obj[i].used && w->obj[i].name < 0)
			orph[no++] = i;
	if (no > 0 && pct(r, 20)) {
		ob = &w->obj[orph[rnd(r, (uint64_t)no)]];
	} else {
		n = (int)rnd(r, NNAMES);
		ob = name_obj(w, n);
		if (ob == NULL) {
			*ok = open_name(w, r, n, draw_flags(r, true), K_OPEN,
					NULL);
			return NULL;
		}
	}
	k = pick_slot(r, ob, want);
	*obp = ob;
	*kp = k;
	return &ob->f[k];
}

/* ---- the operations ------------------------------------------------------- */

static bool op_read(struct worker *w, struct rng *r, enum kind kind)
{
	struct obj *ob = NULL;
	struct xfd *x;
	struct res res[2];
	uint64_t size, len, off;
	char t[160];
	bool ok = true;
	int k = 0, s;

	x = pick_fd(w, r, &ob, &k, &ok, W_READ);
	if (x == NULL)
		return ok;
	size = mir_size(x);
	len = rsize(r);
	off = kind == K_PREAD ? roff(r, size) : mir_pos(x);
	begin_op(w, kind,
		 "%s %s %s=%" PRIu64 " len=%" PRIu64 " (size %" PRIu64 ")",
		 kinds[kind].name, fd_text(ob, k, t, sizeof(t)),
		 kind == K_PREAD ? "off" : "pos", off, len, size);
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++) {
		if (kind == K_PREAD)
			set(&res[s], pread(x->fd[s], w->b[s], len, (off_t)off));
		else
			set(&res[s], read(x->fd[s], w->b[s], len));
	}
	if (!end_op(w, res))
		return false;
	if (!w->lost_skipped && res[MIR].r > 0 &&
	    !same_bytes(w, w->b[MNT], w->b[MIR], (size_t)res[MIR].r, off,
			"read"))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static bool op_write(struct worker *w, struct rng *r, enum kind kind)
{
	struct obj *ob = NULL;
	struct xfd *x = NULL;
	struct res res[2];
	uint64_t size, len, off, at;
	char t[160];
	bool ok = true;
	int k = 0, n, s;

	if (kind == K_APPEND) {
		n = (int)rnd(r, NNAMES);
		ob = name_obj(w, n);
		for (k = 0; ob != NULL && k < POOL; k++)
			if (ob->f[k].fd[MIR] >= 0 &&
			    (ob->f[k].flags & O_APPEND))
				break;
		if (ob == NULL || k == POOL) {
			k = -1;
			if (!open_name(w, r, n,
				       (pct(r, 50) ? O_WRONLY : O_RDWR) |
					       O_APPEND | O_CREAT,
				       K_OPEN, &k))
				return false;
			ob = name_obj(w, n);
			if (ob == NULL || k < 0)
				return true;
		}
		x = &ob->f[k];
	} else {
		x = pick_fd(w, r, &ob, &k, &ok, W_WRITE);
		if (x == NULL)
			return ok;
	}
	size = mir_size(x);
	off = kind == K_PWRITE ? roff(r, size) : mir_pos(x);
	/* Appends go to the end whatever the offset (pwrite too). */
	at = x->flags & O_APPEND ? size : off;
	len = rsize(r);
	len = at >= o.max_size ? 0 : min_u(len, o.max_size - at);
	fill(r, w->data, len);
	begin_op(w, kind,
		 "%s %s %s=%" PRIu64 " len=%" PRIu64 " (size %" PRIu64 ")",
		 kinds[kind].name, fd_text(ob, k, t, sizeof(t)),
		 kind == K_PWRITE ? "off" : "pos", off, len, size);
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++) {
		if (kind == K_PWRITE)
			set(&res[s],
			    pwrite(x->fd[s], w->data, len, (off_t)off));
		else
			set(&res[s], write(x->fd[s], w->data, len));
	}
	if (!end_op(w, res))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static bool op_truncate(struct worker *w, struct rng *r)
{
	struct res res[2];
	struct stat st;
	char p[PATH_MAX];
	uint64_t size = 0, len;
	int n = (int)rnd(r, NNAMES), s;

	path_of(w, MIR, names[n], p, sizeof(p));
	if (stat(p, &st) == 0)
		size = (uint64_t)st.st_size;
	len = rlen(r, size);
	begin_op(w, K_TRUNCATE,
		 "truncate %s len=%" PRIu64 " (size %" PRIu64 ")", names[n],
		 len, size);
	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		set(&res[s], truncate(p, (off_t)len));
	}
	if (!end_op(w, res))
		return false;
	return post(w, name_obj(w, n), name_obj(w, n), n, n);
}

static bool op_ftruncate(struct worker *w, struct rng *r)
{
	struct obj *ob = NULL;
	struct xfd *x;
	struct res res[2];
	uint64_t size, len;
	char t[160];
	bool ok = true;
	int k = 0, s;

	x = pick_fd(w, r, &ob, &k, &ok, W_WRITE);
	if (x == NULL)
		return ok;
	size = mir_size(x);
	len = rlen(r, size);
	begin_op(w, K_FTRUNCATE,
		 "ftruncate %s len=%" PRIu64 " (size %" PRIu64 ")",
		 fd_text(ob, k, t, sizeof(t)), len, size);
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++)
		set(&res[s], ftruncate(x->fd[s], (off_t)len));
	if (!end_op(w, res))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static bool op_rename(struct worker *w, struct rng *r)
{
	struct res res[2];
	char p[PATH_MAX], q[PATH_MAX];
	struct obj *moved, *gone;
	int a = (int)rnd(r, NNAMES);
	int b = pct(r, 5) ? a : (int)rnd(r, NNAMES);
	int s;

	if (a != b && name_obj(w, b) != NULL && !orphan_room(w))
		return false;
	moved = name_obj(w, a);
	gone = a != b ? name_obj(w, b) : NULL;
	begin_op(w, K_RENAME, "rename %s -> %s", names[a], names[b]);
	for (s = 0; s < 2; s++) {
		path_of(w, s, names[a], p, sizeof(p));
		path_of(w, s, names[b], q, sizeof(q));
		set(&res[s], rename(p, q));
	}
	if (!end_op(w, res))
		return false;
	if (res[MIR].r == 0 && a != b) {
		unname(w, b);
		if (moved != NULL) {
			moved->name = moved->was = b;
			w->name_obj[b] = w->name_obj[a];
			w->name_obj[a] = -1;
		}
	}
	return post(w, moved, gone, a, b);
}

static bool op_unlink(struct worker *w, struct rng *r)
{
	struct res res[2];
	char p[PATH_MAX];
	struct obj *ob;
	int n = (int)rnd(r, NNAMES), s;

	if (name_obj(w, n) != NULL && !orphan_room(w))
		return false;
	ob = name_obj(w, n);
	begin_op(w, K_UNLINK, "unlink %s", names[n]);
	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		set(&res[s], unlink(p));
	}
	if (!end_op(w, res))
		return false;
	if (res[MIR].r == 0)
		unname(w, n);
	return post(w, ob, ob, n, n);
}

static bool op_create(struct worker *w, struct rng *r)
{
	int n = (int)rnd(r, NNAMES);
	int flags = O_CREAT | (pct(r, 80) ? O_RDWR : O_WRONLY);

	if (pct(r, 40))
		flags |= O_EXCL;
	if (pct(r, 30))
		flags |= O_TRUNC;
	return open_name(w, r, n, flags, K_CREATE, NULL);
}

static bool op_reopen(struct worker *w, struct rng *r)
{
	int n = (int)rnd(r, NNAMES), k;
	struct obj *ob = name_obj(w, n);
	uint64_t j;

	if (ob != NULL && (nfds(ob) == POOL || pct(r, 50))) {
		j = rnd(r, nfds(ob));
		for (k = 0; k < POOL; k++)
			if (ob->f[k].fd[MIR] >= 0 && j-- == 0)
				break;
		if (!xclose(w, ob, k))
			return false;
	}
	return open_name(w, r, n, draw_flags(r, false), K_REOPEN, NULL);
}

static bool op_close(struct worker *w, struct rng *r)
{
	struct obj *ob = NULL;
	bool ok = true;
	int k = 0;

	if (pick_fd(w, r, &ob, &k, &ok, W_ANY) == NULL)
		return ok;
	return xclose(w, ob, k);
}

static bool op_lseek(struct worker *w, struct rng *r)
{
	static const char *const whence_text[] = {"SEEK_SET", "SEEK_CUR",
						  "SEEK_END"};
	struct obj *ob = NULL;
	struct xfd *x;
	struct res res[2];
	long long off;
	char t[160];
	bool ok = true;
	int k = 0, s, whence;

	x = pick_fd(w, r, &ob, &k, &ok, W_ANY);
	if (x == NULL)
		return ok;
	switch (rnd(r, 4)) {
	case 0:
	case 1:
		whence = SEEK_SET;
		off = (long long)roff(r, mir_size(x));
		break;
	case 2:
		whence = SEEK_CUR;
		off = (long long)rsize(r) * (pct(r, 50) ? -1 : 1);
		break;
	default:
		whence = SEEK_END;
		off = pct(r, 50) ? -(long long)rnd(r, 4097)
				 : (long long)rsize(r) - 1;
		break;
	}
	begin_op(w, K_LSEEK, "lseek %s %lld %s (size %" PRIu64 ")",
		 fd_text(ob, k, t, sizeof(t)), off, whence_text[whence],
		 mir_size(x));
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++)
		set(&res[s], lseek(x->fd[s], off, whence));
	if (!end_op(w, res))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static bool op_fsync(struct worker *w, struct rng *r)
{
	struct obj *ob = NULL;
	struct xfd *x;
	struct res res[2];
	char t[160];
	bool ok = true, data;
	int k = 0, s;

	x = pick_fd(w, r, &ob, &k, &ok, W_ANY);
	if (x == NULL)
		return ok;
	data = pct(r, 30);
	begin_op(w, K_FSYNC, "%s %s", data ? "fdatasync" : "fsync",
		 fd_text(ob, k, t, sizeof(t)));
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++)
		set(&res[s], data ? fdatasync(x->fd[s]) : fsync(x->fd[s]));
	if (!end_op(w, res))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static void on_sigbus(int sig)
{
	sigjmp_buf *jb = t_bus;

	if (jb != NULL)
		siglongjmp(*jb, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* LEN bytes at SKIP in a shared mapping of MLEN bytes at MOFF: copied to
 * BUF, or from BUF and msync-ed. A SIGBUS is a result. */
static void map_io(int fd, bool wr, off_t moff, size_t mlen, size_t skip,
		   size_t len, unsigned char *buf, struct res *res)
{
	unsigned char *p;
	sigjmp_buf jb;

	p = mmap(NULL, mlen, wr ? PROT_READ | PROT_WRITE : PROT_READ,
		 MAP_SHARED, fd, moff);
	if (p == MAP_FAILED) {
		set(res, -1);
		res->stage = "mmap";
		return;
	}
	if (sigsetjmp(jb, 1) == 0) {
		t_bus = &jb;
		if (wr)
			memcpy(p + skip, buf, len);
		else
			memcpy(buf, p + skip, len);
		t_bus = NULL;
		if (wr && msync(p, mlen, MS_SYNC) < 0) {
			set(res, -1);
			res->stage = "msync";
		} else {
			set(res, (long long)len);
		}
	} else {
		t_bus = NULL;
		set(res, -1);
		res->bus = true;
	}
	munmap(p, mlen);
}

static bool op_mmap(struct worker *w, struct rng *r, enum kind kind)
{
	struct obj *ob = NULL;
	struct xfd *x;
	struct res res[2];
	uint64_t size, eof_page, off, len, moff;
	bool wr = kind == K_MMAP_WRITE, ok = true;
	char t[160];
	int k = 0, s;

	x = pick_fd(w, r, &ob, &k, &ok, wr ? W_READ | W_WRITE : W_READ);
	if (x == NULL)
		return ok;
	size = mir_size(x);
	eof_page = (size + g_page - 1) / g_page * g_page;
	if (size == 0 || pct(r, wr ? 3 : 5)) {
		/* A page wholly past the end of file: SIGBUS on both. */
		off = eof_page + rnd(r, g_page);
		len = 1 + rnd(r, g_page);
	} else if (wr) {
		off = rnd(r, size);
		len = min_u(rsize(r), size - off);
	} else {
		/* Within the file, or its last page's tail (zeros). */
		off = pct(r, 70) ? rnd(r, size) : size - min_u(size, rsize(r));
		len = min_u(rsize(r), eof_page - off);
	}
	moff = off / g_page * g_page;
	if (wr)
		fill(r, w->data, len);
	begin_op(w, kind,
		 "%s %s off=%" PRIu64 " len=%" PRIu64 " (size %" PRIu64 ")",
		 kinds[kind].name, fd_text(ob, k, t, sizeof(t)), off, len,
		 size);
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++)
		map_io(x->fd[s], wr, (off_t)moff, off - moff + len, off - moff,
		       len, wr ? w->data : w->b[s], &res[s]);
	if (!end_op(w, res))
		return false;
	if (!wr && !w->lost_skipped && res[MIR].r > 0 &&
	    !same_bytes(w, w->b[MNT], w->b[MIR], len, off, "mapped bytes"))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static bool op_copy(struct worker *w, struct rng *r)
{
	struct obj *oa = NULL, *ob = NULL;
	struct xfd *xa, *xb;
	struct res res[2];
	uint64_t off_in, off_out, len;
	loff_t oi, oo;
	char t[160], u[160];
	bool ok = true, use_pos;
	int ka = 0, kb = 0, s;

	xa = pick_fd(w, r, &oa, &ka, &ok, W_READ);
	if (xa == NULL)
		return ok;
	if (pct(r, 30)) {
		ob = oa;
		kb = pick_slot(r, ob, W_WRITE | W_NOAPPEND);
		xb = &ob->f[kb];
	} else {
		xb = pick_fd(w, r, &ob, &kb, &ok, W_WRITE | W_NOAPPEND);
		if (xb == NULL)
			return ok;
	}
	use_pos = pct(r, 15);
	len = rsize(r);
	if (use_pos) {
		off_in = mir_pos(xa);
		off_out = mir_pos(xb);
	} else {
		off_in = roff(r, mir_size(xa));
		off_out = roff(r, mir_size(xb));
		if (oa == ob && pct(r, 70)) {
			/* Within one file: ranges apart (an overlap is
			 * EINVAL). */
			if (off_in >= len && pct(r, 50))
				off_out = rnd(r, off_in - len + 1);
			else
				off_out = off_in + len + rnd(r, 4096);
		}
	}
	len = off_out >= o.max_size ? 0 : min_u(len, o.max_size - off_out);
	begin_op(w, K_COPY,
		 "copy_file_range %s %s=%" PRIu64 " -> %s %s=%" PRIu64
		 " len=%" PRIu64 " (sizes %" PRIu64 ", %" PRIu64 ")",
		 fd_text(oa, ka, t, sizeof(t)), use_pos ? "pos" : "off", off_in,
		 fd_text(ob, kb, u, sizeof(u)), use_pos ? "pos" : "off",
		 off_out, len, mir_size(xa), mir_size(xb));
	for (s = 0; s < 2 && !lost_skip(w, xa, xb, s, res); s++) {
		oi = (loff_t)off_in;
		oo = (loff_t)off_out;
		set(&res[s],
		    copy_file_range(xa->fd[s], use_pos ? NULL : &oi, xb->fd[s],
				    use_pos ? NULL : &oo, len, 0));
	}
	if (!end_op(w, res))
		return false;
	return post(w, oa, ob, oa->name, ob->name);
}

/* ---- whole trees ---------------------------------------------------------- */

struct ent {
	char *path;
	mode_t type;
	long long size;
	int err;
};

struct list {
	struct ent *v;
	size_t n, cap;
	int err;
};

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->path,
		      ((const struct ent *)b)->path);
}

static void list_free(struct list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static bool list_push(struct list *l, const char *path, const struct stat *st,
		      int err)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct ent *v = realloc(l->v, cap * sizeof(*v));

		if (v == NULL)
			return false;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].path = strdup(path);
	l->v[l->n].type = err ? 0 : st->st_mode & S_IFMT;
	l->v[l->n].size = err ? 0 : (long long)st->st_size;
	l->v[l->n].err = err;
	l->n++;
	return true;
}

/* Every entry under ROOT/REL, recursively; an unreadable directory sets
 * l->err (the first errno). */
static void list_dir(const char *root, const char *rel, int depth, bool hide,
		     struct list *l)
{
	char p[PATH_MAX], child[PATH_MAX], cp[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d;

	snprintf(p, sizeof(p), "%s%s%s", root, *rel ? "/" : "", rel);
	d = opendir(p);
	if (d == NULL) {
		if (l->err == 0)
			l->err = errno;
		return;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (de == NULL) {
			if (errno != 0 && l->err == 0)
				l->err = errno;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (hide && strncmp(de->d_name, ".fuse_hidden", 12) == 0)
			continue;
		if (snprintf(child, sizeof(child), "%s%s%s", rel,
			     *rel ? "/" : "",
			     de->d_name) >= (int)sizeof(child) ||
		    snprintf(cp, sizeof(cp), "%s/%s", root, child) >=
			    (int)sizeof(cp)) {
			list_push(l, child, NULL, ENAMETOOLONG);
			continue;
		}
		if (lstat(cp, &st) < 0) {
			list_push(l, child, NULL, errno);
			continue;
		}
		list_push(l, child, &st, 0);
		if (S_ISDIR(st.st_mode) && depth < DEPTH_MAX)
			list_dir(root, child, depth + 1, hide, l);
	}
	closedir(d);
}

static void ent_text(const struct ent *e, char *out, size_t n)
{
	if (e->err)
		snprintf(out, n, "%s (lstat: %s)", e->path, errname(e->err));
	else if (S_ISREG(e->type))
		snprintf(out, n, "%s (file, %lld bytes)", e->path, e->size);
	else
		snprintf(out, n, "%s (%s)", e->path, type_text(e->type));
}

static bool ent_same(const struct ent *a, const struct ent *b)
{
	return a->err == b->err && a->type == b->type &&
	       (!S_ISREG(a->type) || a->size == b->size);
}

/* The whole contents of the regular file REL, through fresh descriptors. */
static bool compare_file(struct worker *w, const char *rel)
{
	char p[PATH_MAX], a[96], b[96];
	struct res res[2];
	struct stat st;
	uint64_t off = 0, size = 0;
	int fd[2] = {-1, -1}, s;
	bool ok = false;

	atomic_store(&w->phase, "the contents check");
	for (s = 0; s < 2; s++) {
		path_of(w, s, rel, p, sizeof(p));
		fd[s] = open(p, O_RDONLY | O_CLOEXEC);
		set(&res[s], fd[s] < 0 ? -1 : 0);
	}
	if (!same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		differ(w, C_RESULT,
		       "  open %s for reading\n  mount:  %s\n  mirror: %s\n",
		       rel, a, b);
		goto out;
	}
	if (fd[MIR] < 0) {
		ok = true;
		goto out;
	}
	for (s = 0; s < 2; s++)
		set(&res[s],
		    fstat(fd[s], &st) < 0 ? -1 : (long long)st.st_size);
	if (!same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		differ(w, C_SIZE,
		       "  fstat %s: size\n  mount:  %s\n  mirror: %s\n", rel, a,
		       b);
		goto out;
	}
	size = (uint64_t)res[MIR].r;
	for (;;) {
		for (s = 0; s < 2; s++)
			set(&res[s], pread(fd[s], w->b[s], CHUNK, (off_t)off));
		if (!same(res)) {
			fmt_res(&res[MNT], a, sizeof(a));
			fmt_res(&res[MIR], b, sizeof(b));
			differ(w, C_RESULT,
			       "  pread %s off=%" PRIu64
			       " len=%u (size %" PRIu64
			       ")\n  mount:  %s\n  mirror: %s\n",
			       rel, off, CHUNK, size, a, b);
			goto out;
		}
		if (res[MIR].r <= 0)
			break;
		if (!same_bytes(w, w->b[MNT], w->b[MIR], (size_t)res[MIR].r,
				off, rel))
			goto out;
		off += (uint64_t)res[MIR].r;
		/* Bounded even if both sides kept answering. */
		if (off > size + 2ULL * CHUNK) {
			differ(w, C_RESULT,
			       "  %s: both sides read past its size %" PRIu64
			       "\n",
			       rel, size);
			goto out;
		}
	}
	/* Both at the end, or both failing alike. */
	ok = true;
out:
	for (s = 0; s < 2; s++)
		set(&res[s], fd[s] < 0 ? 0 : close(fd[s]));
	if (ok && !same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		differ(w, C_RESULT,
		       "  close %s after reading\n  mount:  %s\n  mirror: %s\n",
		       rel, a, b);
		ok = false;
	}
	return ok;
}

/* The listing of the two trees (names, types, sizes), then the whole
 * contents of every regular file. */
static bool compare_tree(struct worker *w, const char *why)
{
	struct list l[2] = {{0}, {0}};
	char a[PATH_MAX + 64], b[PATH_MAX + 64];
	size_t i = 0, j = 0;
	bool ok = false;
	int s;

	begin_op(w, K_CHECK, "check %s: listing and contents of %s", why,
		 w->idx < 0 ? "the trees" : "the worker's tree");
	atomic_store(&w->phase, "the listing");
	for (s = 0; s < 2; s++) {
		list_dir(w->dir[s], "", 0, w->hide, &l[s]);
		qsort(l[s].v, l[s].n, sizeof(struct ent), ent_cmp);
	}
	if (l[MNT].err != l[MIR].err) {
		differ(w, C_LIST,
		       "  listing the tree\n  mount:  %s\n  mirror: %s\n",
		       l[MNT].err ? errname(l[MNT].err) : "ok",
		       l[MIR].err ? errname(l[MIR].err) : "ok");
		goto out;
	}
	while (i < l[MNT].n || j < l[MIR].n) {
		int c = i == l[MNT].n ? 1
			: j == l[MIR].n
				? -1
				: strcmp(l[MNT].v[i].path, l[MIR].v[j].path);

		if (c == 0 && ent_same(&l[MNT].v[i], &l[MIR].v[j])) {
			i++;
			j++;
			continue;
		}
		if (c <= 0)
			ent_text(&l[MNT].v[i], a, sizeof(a));
		if (c >= 0)
			ent_text(&l[MIR].v[j], b, sizeof(b));
		differ(w, C_LIST, "  mount:  %s\n  mirror: %s\n",
		       c <= 0 ? a : "(nothing there)",
		       c >= 0 ? b : "(nothing there)");
		goto out;
	}
	for (j = 0; j < l[MIR].n; j++) {
		if (S_ISREG(l[MIR].v[j].type) &&
		    !compare_file(w, l[MIR].v[j].path))
			goto out;
	}
	record(w, "%s: %zu entries agree", w->desc, l[MIR].n);
	ok = true;
out:
	list_free(&l[MNT]);
	list_free(&l[MIR]);
	return ok;
}

/* ---- changes made inside the sandbox (--outside) --------------------------- */

/* An outside change: its kind and what it was drawn to do. */
struct outop {
	enum kind kind;
	int a, b;
	uint64_t off, len;
	mode_t mode;
	bool trunc;
	struct timespec times[2];
};

/* What an outside change touched: what the wait for it looks at. */
struct touched {
	int name[2];
	int nname;
	bool dirs; /* the listings of the names' directories */
	bool mode; /* the permission bits of the names */
	bool mtime; /* their modification times */
	bool contents; /* their contents through a fresh descriptor */
	uint64_t off, len; /* the range written (len 0: none) */
};

/* Permission bits for an outside chmod or create: the owner can always
 * read and write (the mount refuses to open for writing a file nobody may
 * write, which root's mirror would open). */
static mode_t draw_mode(struct rng *r)
{
	return (mode_t)(0600 | rnd(r, 0200));
}

/* A file made outside is the directory owner's, as the sandbox's own
 * files are, so that the mount can still write it. */
static int own(int s, int fd)
{
	if (s != OUT || (o.out_uid == geteuid() && o.out_gid == getegid()))
		return 0;
	return fchown(fd, o.out_uid, o.out_gid);
}

/* Write all N bytes of the data buffer to fd. */
static long long write_all(int fd, const unsigned char *p, uint64_t n)
{
	uint64_t done = 0;
	ssize_t k;

	while (done < n) {
		k = write(fd, p + done, n - done);
		if (k < 0)
			return -1;
		if (k == 0) {
			errno = EIO;
			return -1;
		}
		done += (uint64_t)k;
	}
	return (long long)done;
}

/* A file made outside: exclusively, else (op->trunc) rewritten in place
 * like a shell's `>`. At P, the bytes of the data buffer. */
static void out_make(struct worker *w, int s, const struct outop *op,
		     const char *p, bool trunc, struct res *res)
{
	bool made = true;
	int fd;

	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && trunc) {
		made = false;
		fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
	}
	if (fd < 0) {
		set(res, -1);
		res->stage = "open";
		return;
	}
	if (made && own(s, fd) < 0) {
		set(res, -1);
		res->stage = "fchown";
	} else if (made && fchmod(fd, op->mode) < 0) {
		set(res, -1);
		res->stage = "fchmod";
	} else {
		set(res, write_all(fd, w->data, op->len));
		if (res->r < 0)
			res->stage = "write";
	}
	if (close(fd) < 0 && res->r >= 0) {
		set(res, -1);
		res->stage = "close";
	}
}

/* The change OP made on side S (OUT: the sandbox's directory, natively;
 * MIR: the mirror). */
static void out_do(struct worker *w, int s, const struct outop *op,
		   struct res *res)
{
	char p[PATH_MAX], q[PATH_MAX], tmp[64];
	const char *slash;
	int fd;

	path_of(w, s, names[op->a], p, sizeof(p));
	path_of(w, s, names[op->b], q, sizeof(q));
	set(res, 0);
	switch (op->kind) {
	case K_OUT_WRITE:
	case K_OUT_APPEND:
		fd = open(p, O_WRONLY | O_CLOEXEC |
				     (op->kind == K_OUT_APPEND ? O_APPEND : 0));
		if (fd < 0) {
			set(res, -1);
			res->stage = "open";
			break;
		}
		if (op->kind == K_OUT_APPEND)
			set(res, write_all(fd, w->data, op->len));
		else
			set(res, pwrite(fd, w->data, op->len, (off_t)op->off));
		if (res->r < 0)
			res->stage = "write";
		if (close(fd) < 0 && res->r >= 0) {
			set(res, -1);
			res->stage = "close";
		}
		break;
	case K_OUT_TRUNCATE:
		set(res, truncate(p, (off_t)op->len));
		break;
	case K_OUT_CREATE:
		out_make(w, s, op, p, op->trunc, res);
		break;
	case K_OUT_REPLACE:
		/* Written aside, then renamed over the name: how editors,
		 * compilers and package managers replace a file. */
		slash = strrchr(names[op->a], '/');
		snprintf(tmp, sizeof(tmp), "%.*s%s",
			 slash ? (int)(slash - names[op->a] + 1) : 0,
			 names[op->a], OUT_TMP);
		path_of(w, s, tmp, q, sizeof(q));
		unlink(q);
		out_make(w, s, op, q, false, res);
		if (res->r >= 0 && rename(q, p) < 0) {
			set(res, -1);
			res->stage = "rename";
		}
		if (res->r < 0)
			unlink(q);
		break;
	case K_OUT_RENAME:
		set(res, rename(p, q));
		break;
	case K_OUT_UNLINK:
		set(res, unlink(p));
		break;
	case K_OUT_CHMOD:
		set(res, chmod(p, op->mode));
		break;
	case K_OUT_UTIMES:
		set(res, utimensat(AT_FDCWD, p, op->times, 0));
		break;
	default:
		break;
	}
}

/* Every descriptor of OB is lost on the mount's side: its file was
 * renamed or removed inside the sandbox. */
static void lose(struct obj *ob)
{
	int k;

	for (k = 0; ob != NULL && k < POOL; k++)
		if (ob->f[k].fd[MIR] >= 0)
			ob->f[k].lost = true;
}

/* Close every descriptor of OB (NULL: none), through xclose. */
static bool close_obj(struct worker *w, struct obj *ob)
{
	int k;

	for (k = 0; ob != NULL && ob->used && k < POOL; k++)
		if (ob->f[k].fd[MIR] >= 0 && !xclose(w, ob, k))
			return false;
	return true;
}

/* What the mount gathered for the name N, and a create it deferred,
 * reach the sandbox before a change is made there: otherwise their
 * upload, later, would race with it. An open of the name sends them
 * (SEMANTICS.md, close-to-open), without the disk flush an fsync would
 * cost the sandbox. */
static bool flush_name(struct worker *w, int n)
{
	struct obj *ob = name_obj(w, n);
	struct res res[2];
	char p[PATH_MAX];
	int fd, s;

	if (ob == NULL)
		return true;
	begin_op(w, K_OPEN,
		 "open and close %s (before a change in the "
		 "sandbox)",
		 names[n]);
	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		fd = open(p, O_RDONLY | O_CLOEXEC);
		set(&res[s], fd);
		if (fd >= 0) {
			set(&res[s], close(fd));
			if (res[s].r < 0)
				res[s].stage = "close";
		}
	}
	return end_op(w, res);
}

/* pread of LEN bytes at OFF through the two descriptors FD; false with
 * what differs in WHY. */
static bool probe_read(struct worker *w, const int fd[2], uint64_t off,
		       uint64_t len, const char *what, struct sbuf *why)
{
	struct res res[2];
	char a[96], b[96];
	int s;

	len = min_u(len, CHUNK);
	for (s = 0; s < 2; s++)
		set(&res[s], pread(fd[s], w->b[s], len, (off_t)off));
	if (!same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		sb_add(why,
		       "  pread %s off=%" PRIu64 " len=%" PRIu64
		       "\n  mount:  %s\n  mirror: %s\n",
		       what, off, len, a, b);
		return false;
	}
	if (res[MIR].r > 0 &&
	    memcmp(w->b[MNT], w->b[MIR], (size_t)res[MIR].r) != 0) {
		bytes_text(why, w->b[MNT], w->b[MIR], (size_t)res[MIR].r, off,
			   what);
		return false;
	}
	return true;
}

/* The bytes of a file through the descriptors FD (sizes known alike):
 * whole up to CHUNK, else the range written and the last page. */
static bool probe_bytes(struct worker *w, const int fd[2], uint64_t size,
			const struct touched *t, const char *what,
			struct sbuf *why)
{
	if (size < CHUNK)
		return probe_read(w, fd, 0, size + 1, what, why);
	if (t->len > 0 && !probe_read(w, fd, t->off, t->len, what, why))
		return false;
	return probe_read(w, fd, size - min_u(size, g_page), g_page + 1, what,
			  why);
}

/* The size of a file through the descriptors FD; false with what differs
 * in WHY. */
static bool probe_size(const int fd[2], const char *what, uint64_t *size,
		       struct sbuf *why)
{
	struct res res[2];
	struct stat st;
	char a[96], b[96];
	int s;

	for (s = 0; s < 2; s++)
		set(&res[s],
		    fstat(fd[s], &st) < 0 ? -1 : (long long)st.st_size);
	if (!same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		sb_add(why, "  fstat %s: size\n  mount:  %s\n  mirror: %s\n",
		       what, a, b);
		return false;
	}
	*size = res[MIR].r < 0 ? 0 : (uint64_t)res[MIR].r;
	return true;
}

/* The descriptors of OB opened before the change (not lost): their
 * bytes, then their sizes. The bytes come first: an fstat could make the
 * kernel drop pages that a missed invalidation left. */
static bool probe_obj(struct worker *w, const struct obj *ob,
		      const struct touched *t, struct sbuf *why)
{
	char what[160];
	uint64_t size;
	int k;

	for (k = 0; ob != NULL && k < POOL; k++) {
		const struct xfd *x = &ob->f[k];

		if (x->fd[MIR] < 0 || x->lost)
			continue;
		fd_text(ob, k, what, sizeof(what));
		size = mir_size(x);
		if ((x->flags & O_ACCMODE) != O_WRONLY &&
		    !probe_bytes(w, x->fd, size, t, what, why))
			return false;
		if (!probe_size(x->fd, what, &size, why))
			return false;
	}
	return true;
}

/* stat of the name N: errno, type, size, and the mode or mtime when the
 * change set them. */
static bool probe_name(struct worker *w, int n, const struct touched *t,
		       struct sbuf *why)
{
	struct stat st[2];
	struct res res[2];
	char p[PATH_MAX], a[96], b[96];
	int s;

	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		set(&res[s], stat(p, &st[s]));
	}
	if (!same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		sb_add(why, "  stat %s\n  mount:  %s\n  mirror: %s\n", names[n],
		       a, b);
		return false;
	}
	if (res[MIR].r < 0)
		return true;
	if ((st[MNT].st_mode & S_IFMT) != (st[MIR].st_mode & S_IFMT) ||
	    st[MNT].st_size != st[MIR].st_size ||
	    (t->mode &&
	     (st[MNT].st_mode & 07777) != (st[MIR].st_mode & 07777)) ||
	    (t->mtime &&
	     (st[MNT].st_mtim.tv_sec != st[MIR].st_mtim.tv_sec ||
	      st[MNT].st_mtim.tv_nsec != st[MIR].st_mtim.tv_nsec))) {
		sb_add(why,
		       "  stat %s\n"
		       "  mount:  %s, size %lld, mode %04o, mtime %lld.%09ld\n"
		       "  mirror: %s, size %lld, mode %04o, mtime %lld.%09ld\n",
		       names[n], type_text(st[MNT].st_mode),
		       (long long)st[MNT].st_size,
		       (unsigned)(st[MNT].st_mode & 07777),
		       (long long)st[MNT].st_mtim.tv_sec,
		       st[MNT].st_mtim.tv_nsec, type_text(st[MIR].st_mode),
		       (long long)st[MIR].st_size,
		       (unsigned)(st[MIR].st_mode & 07777),
		       (long long)st[MIR].st_mtim.tv_sec,
		       st[MIR].st_mtim.tv_nsec);
		return false;
	}
	return true;
}

/* The names and types in the directory of the name N. */
static bool probe_dir(struct worker *w, int n, struct sbuf *why)
{
	struct list l[2] = {{0}, {0}};
	const char *slash = strrchr(names[n], '/');
	char rel[64], a[PATH_MAX + 64], b[PATH_MAX + 64];
	size_t i;
	bool ok = false;
	int s;

	snprintf(rel, sizeof(rel), "%.*s", slash ? (int)(slash - names[n]) : 0,
		 names[n]);
	for (s = 0; s < 2; s++) {
		/* That directory alone: no deeper. */
		list_dir(w->dir[s], rel, DEPTH_MAX, true, &l[s]);
		qsort(l[s].v, l[s].n, sizeof(struct ent), ent_cmp);
	}
	if (l[MNT].err != l[MIR].err) {
		sb_add(why, "  listing %s\n  mount:  %s\n  mirror: %s\n",
		       *rel ? rel : ".",
		       l[MNT].err ? errname(l[MNT].err) : "ok",
		       l[MIR].err ? errname(l[MIR].err) : "ok");
		goto out;
	}
	for (i = 0; i < l[MNT].n || i < l[MIR].n; i++) {
		if (i < l[MNT].n && i < l[MIR].n &&
		    strcmp(l[MNT].v[i].path, l[MIR].v[i].path) == 0 &&
		    l[MNT].v[i].type == l[MIR].v[i].type)
			continue;
		if (i < l[MNT].n)
			ent_text(&l[MNT].v[i], a, sizeof(a));
		if (i < l[MIR].n)
			ent_text(&l[MIR].v[i], b, sizeof(b));
		sb_add(why, "  listing %s\n  mount:  %s\n  mirror: %s\n",
		       *rel ? rel : ".", i < l[MNT].n ? a : "(nothing there)",
		       i < l[MIR].n ? b : "(nothing there)");
		goto out;
	}
	ok = true;
out:
	list_free(&l[MNT]);
	list_free(&l[MIR]);
	return ok;
}

/* The contents of the name N through a new descriptor (close-to-open). */
static bool probe_fresh(struct worker *w, int n, const struct touched *t,
			struct sbuf *why)
{
	char p[PATH_MAX], a[96], b[96], what[80];
	struct res res[2];
	uint64_t size;
	int fd[2], s;
	bool ok = false;

	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		fd[s] = open(p, O_RDONLY | O_CLOEXEC);
		set(&res[s], fd[s] < 0 ? -1 : 0);
	}
	snprintf(what, sizeof(what), "%s opened afresh", names[n]);
	if (!same(res)) {
		fmt_res(&res[MNT], a, sizeof(a));
		fmt_res(&res[MIR], b, sizeof(b));
		sb_add(why, "  open %s\n  mount:  %s\n  mirror: %s\n", what, a,
		       b);
	} else {
		ok = fd[MIR] < 0 || (probe_size(fd, what, &size, why) &&
				     probe_bytes(w, fd, size, t, what, why));
	}
	for (s = 0; s < 2; s++)
		if (fd[s] >= 0)
			close(fd[s]);
	return ok;
}

/* One look at what the change touched, through the mount and in the
 * mirror. The descriptors opened before it come first, a new one last:
 * an open that does not keep the kernel's pages drops them for every
 * descriptor of the file. */
static bool probe(struct worker *w, const struct touched *t, struct sbuf *why)
{
	int i;

	for (i = 0; i < t->nname; i++)
		if (!probe_obj(w, name_obj(w, t->name[i]), t, why))
			return false;
	for (i = 0; i < t->nname; i++)
		if (!probe_name(w, t->name[i], t, why))
			return false;
	for (i = 0; t->dirs && i < t->nname; i++)
		if (!probe_dir(w, t->name[i], why))
			return false;
	for (i = 0; t->contents && i < t->nname; i++)
		if (!probe_fresh(w, t->name[i], t, why))
			return false;
	return true;
}

/* Wait, at most --settle-ms, until the mount shows the change made at
 * T0 (microseconds); how long it took is kept for the figures. Not
 * showing it by then is a difference. */
static bool settle(struct worker *w, const struct touched *t, long long t0)
{
	struct sbuf why = {0};
	long long took;
	uint32_t *v;
	unsigned tries = 0;
	bool ok;

	atomic_store(&w->phase, "the wait for the change to show through "
				"the mount");
	for (;;) {
		/* Each look is bounded by --op-timeout, not the wait. */
		atomic_store(&w->busy_since, now_ms());
		free(why.p);
		memset(&why, 0, sizeof(why));
		tries++;
		ok = probe(w, t, &why);
		took = now_us() - t0;
		if (ok || took >= (long long)o.settle_ms * 1000)
			break;
		usleep(1000);
	}
	if (!ok) {
		record(w, "%s: not shown through the mount within %u ms",
		       w->desc, o.settle_ms);
		differ(w, C_STALE,
		       "  not shown through the mount within %u ms "
		       "(--settle-ms; %u looks); the last look:\n%s",
		       o.settle_ms, tries, why.p ? why.p : "");
		free(why.p);
		return false;
	}
	free(why.p);
	if (w->nshown == w->capshown) {
		size_t cap = w->capshown ? w->capshown * 2 : 256;

		v = realloc(w->shown, cap * sizeof(*v));
		if (v != NULL) {
			w->shown = v;
			w->capshown = cap;
		}
	}
	if (w->nshown < w->capshown)
		w->shown[w->nshown++] =
			(uint32_t)min_u((uint64_t)took, UINT32_MAX);
	record(w, "%s: shown through the mount after %.1f ms", w->desc,
	       (double)took / 1000);
	return true;
}

/* A random time: seconds between 2001 and 2033, any nanoseconds. */
static struct timespec draw_time(struct rng *r)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(1000000000 + rnd(r, 1000000000));
	ts.tv_nsec = (long)rnd(r, 1000000000);
	return ts;
}

/* A change made inside the sandbox (its directory seen from the host,
 * natively) and in the mirror, then a wait until the mount shows it. */
static bool op_outside(struct worker *w, struct rng *r, enum kind kind)
{
	struct outop op = {.kind = kind};
	struct touched t = {.nname = 1};
	struct obj *moved, *gone;
	struct res res[2];
	char p[PATH_MAX], desc[96] = "";
	uint64_t size = 0;
	struct stat st;
	long long t0;

	op.a = op.b = (int)rnd(r, NNAMES);
	path_of(w, MIR, names[op.a], p, sizeof(p));
	if (stat(p, &st) == 0)
		size = (uint64_t)st.st_size;
	t.name[0] = op.a;
	switch (kind) {
	case K_OUT_WRITE:
		op.off = roff(r, size);
		op.len = op.off >= o.max_size
				 ? 0
				 : min_u(rsize(r), o.max_size - op.off);
		snprintf(desc, sizeof(desc),
			 " off=%" PRIu64 " len=%" PRIu64 " (size %" PRIu64 ")",
			 op.off, op.len, size);
		t.off = op.off;
		t.len = op.len;
		t.contents = true;
		break;
	case K_OUT_APPEND:
		op.len = size >= o.max_size
				 ? 0
				 : min_u(rsize(r), o.max_size - size);
		snprintf(desc, sizeof(desc),
			 " len=%" PRIu64 " (size %" PRIu64 ")", op.len, size);
		t.off = size;
		t.len = op.len;
		t.contents = true;
		break;
	case K_OUT_TRUNCATE:
		op.len = rlen(r, size);
		snprintf(desc, sizeof(desc),
			 " len=%" PRIu64 " (size %" PRIu64 ")", op.len, size);
		t.off = min_u(op.len, size);
		t.len = (op.len > size ? op.len - size : size - op.len) + 1;
		t.contents = true;
		break;
	case K_OUT_CREATE:
	case K_OUT_REPLACE:
		op.trunc = kind == K_OUT_CREATE && pct(r, 40);
		op.mode = draw_mode(r);
		op.len = pct(r, 10) ? 0 : rsize(r);
		snprintf(desc, sizeof(desc), "%s mode=%04o len=%" PRIu64,
			 op.trunc ? " (or rewrite)" : "", (unsigned)op.mode,
			 op.len);
		t.off = 0;
		t.len = op.len;
		t.dirs = t.mode = t.contents = true;
		break;
	case K_OUT_RENAME:
		op.b = (op.a + 1 + (int)rnd(r, NNAMES - 1)) % NNAMES;
		snprintf(desc, sizeof(desc), " -> %s", names[op.b]);
		t.name[1] = op.b;
		t.nname = 2;
		t.dirs = t.contents = true;
		break;
	case K_OUT_UNLINK:
		t.dirs = true;
		break;
	case K_OUT_CHMOD:
		op.mode = draw_mode(r);
		snprintf(desc, sizeof(desc), " %04o", (unsigned)op.mode);
		t.mode = true;
		break;
	case K_OUT_UTIMES:
		op.times[0] = draw_time(r);
		op.times[1] = draw_time(r);
		snprintf(desc, sizeof(desc), " mtime=%lld.%09ld",
			 (long long)op.times[1].tv_sec, op.times[1].tv_nsec);
		t.mtime = true;
		break;
	default:
		return true;
	}
	if (op.len > 0)
		fill(r, w->data, op.len);
	/* What the change takes a name from. */
	moved = kind == K_OUT_RENAME ? name_obj(w, op.a) : NULL;
	gone = kind == K_OUT_RENAME ? name_obj(w, op.b)
	       : kind == K_OUT_UNLINK || kind == K_OUT_REPLACE
		       ? name_obj(w, op.a)
		       : NULL;
	if (o.close_open && (!close_obj(w, moved) || !close_obj(w, gone)))
		return false;
	if (o.close_open)
		moved = gone = NULL;
	/* (Room is made by closing a nameless file: MOVED and GONE stay.) */
	if (gone != NULL && !orphan_room(w))
		return false;
	if (!flush_name(w, op.a) || (op.b != op.a && !flush_name(w, op.b)))
		return false;
	begin_op(w, kind, "outside: %s %s%s", kinds[kind].name + 4, names[op.a],
		 desc);
	out_do(w, OUT, &op, &res[MNT]);
	out_do(w, MIR, &op, &res[MIR]);
	t0 = now_us();
	if (!end_op(w, res))
		return false;
	if (res[MIR].r < 0)
		return true;
	/* In the mirror, open descriptors follow their files; on the
	 * mount, they are lost. */
	if (gone != NULL) {
		lose(gone);
		unname(w, kind == K_OUT_RENAME ? op.b : op.a);
	}
	if (moved != NULL) {
		lose(moved);
		moved->name = moved->was = op.b;
		w->name_obj[op.b] = w->name_obj[op.a];
		w->name_obj[op.a] = -1;
	}
	return settle(w, &t, t0);
}

/* ---- a worker's run ------------------------------------------------------- */

static void close_all(struct worker *w)
{
	int i, k, s;

	for (i = 0; i < NOBJ; i++) {
		for (k = 0; w->obj[i].used && k < POOL; k++)
			for (s = 0; s < 2; s++)
				if (w->obj[i].f[k].fd[s] >= 0)
					close(w->obj[i].f[k].fd[s]);
		w->obj[i].used = false;
	}
	for (i = 0; i < NNAMES; i++)
		w->name_obj[i] = -1;
}

/* The worker's directory and its subdirectories on both sides. */
static bool setup(struct worker *w)
{
	char rel[64], p[PATH_MAX], a[96], b[96];
	struct res res[2];
	int i, s;

	for (i = -1; i < NDIRS; i++) {
		snprintf(rel, sizeof(rel), "%s", i < 0 ? "" : dirs[i]);
		begin_op(w, K_SETUP, "mkdir %s", i < 0 ? "." : rel);
		for (s = 0; s < 2; s++) {
			path_of(w, s, rel, p, sizeof(p));
			set(&res[s], mkdir(p, 0755));
			if (res[s].r < 0 && res[s].e == EEXIST)
				set(&res[s], 0);
		}
		if (res[MIR].r < 0) {
			fmt_res(&res[MIR], b, sizeof(b));
			fprintf(stderr, "fsx: mkdir %s in the mirror: %s\n",
				rel, b);
			w->setup_error = true;
			return false;
		}
		if (!same(res)) {
			fmt_res(&res[MNT], a, sizeof(a));
			fmt_res(&res[MIR], b, sizeof(b));
			record(w, "%s = mount %s, mirror %s", w->desc, a, b);
			differ(w, C_RESULT, "  mount:  %s\n  mirror: %s\n", a,
			       b);
			return false;
		}
	}
	return true;
}

static bool one_step(struct worker *w, struct rng *r, enum kind kind)
{
	switch (kind) {
	case K_READ:
	case K_PREAD:
		return op_read(w, r, kind);
	case K_WRITE:
	case K_PWRITE:
	case K_APPEND:
		return op_write(w, r, kind);
	case K_TRUNCATE:
		return op_truncate(w, r);
	case K_FTRUNCATE:
		return op_ftruncate(w, r);
	case K_RENAME:
		return op_rename(w, r);
	case K_MMAP_READ:
	case K_MMAP_WRITE:
		return op_mmap(w, r, kind);
	case K_COPY:
		return op_copy(w, r);
	case K_FSYNC:
		return op_fsync(w, r);
	case K_REOPEN:
		return op_reopen(w, r);
	case K_CLOSE:
		return op_close(w, r);
	case K_UNLINK:
		return op_unlink(w, r);
	case K_CREATE:
		return op_create(w, r);
	case K_LSEEK:
		return op_lseek(w, r);
	case K_OUT_WRITE:
	case K_OUT_APPEND:
	case K_OUT_TRUNCATE:
	case K_OUT_CREATE:
	case K_OUT_REPLACE:
	case K_OUT_RENAME:
	case K_OUT_UNLINK:
	case K_OUT_CHMOD:
	case K_OUT_UTIMES:
		return op_outside(w, r, kind);
	default:
		return true;
	}
}

/* A step's kind: with --outside, --outside-pct percent of them are
 * changes made in the sandbox. Without it the draws are those of a
 * tester that had no outside steps, so older seeds replay the same. */
static enum kind draw_kind(struct rng *r)
{
	unsigned total = 0, i, first = 0, end = K_OUT_WRITE;
	uint64_t x;

	if (o.root[OUT] != NULL && pct(r, o.outside_pct)) {
		first = K_OUT_WRITE;
		end = NDRAWN;
	}
	for (i = first; i < end; i++)
		total += kinds[i].weight;
	x = rnd(r, total);
	for (i = first; i < end; i++) {
		if (x < kinds[i].weight)
			return (enum kind)i;
		x -= kinds[i].weight;
	}
	return K_READ;
}

static bool stopped(const struct worker *w)
{
	return w->failed || (!w->quiet && atomic_load(&g_stop));
}

/* Run the worker's steps; 0 agreed, 1 a difference, 2 a setup error. */
static int run(struct worker *w)
{
	struct rng r;
	enum kind kind;
	int i, k;

	w->failed = w->setup_error = false;
	w->nring = 0;
	w->next_id = 0;
	for (i = 0; i < NNAMES; i++)
		w->name_obj[i] = -1;
	for (i = 0; i < NOBJ; i++)
		w->obj[i].used = false;
	w->step = 0;
	if (!setup(w) || !compare_tree(w, "before the first step"))
		goto out;
	for (w->step = 0; w->step < w->nops && !stopped(w); w->step++) {
		if (w->mask == NULL || w->mask[w->step]) {
			rng_init(&r, w->seed, w->step);
			kind = draw_kind(&r);
			if (!(o.skip & (1U << kind)) && !one_step(w, &r, kind))
				break;
		}
		if ((w->step + 1) % o.check_every == 0 && !stopped(w) &&
		    !compare_tree(w, "every --check-every steps"))
			break;
		atomic_store(&w->busy_since, 0);
	}
	if (stopped(w))
		goto out;
	w->step = w->nops;
	if (!compare_tree(w, "after the last step"))
		goto out;
	for (i = 0; i < NOBJ; i++)
		for (k = 0; w->obj[i].used && k < POOL; k++)
			if (w->obj[i].f[k].fd[MIR] >= 0 &&
			    !xclose(w, &w->obj[i], k))
				goto out;
	compare_tree(w, "after closing every descriptor");
out:
	atomic_store(&w->busy_since, 0);
	close_all(w);
	return w->setup_error ? 2 : w->failed ? 1 : 0;
}

static void *worker_main(void *arg)
{
	run(arg);
	return NULL;
}

static struct worker *worker_new(int idx, uint64_t seed, const char *sub)
{
	struct worker *w = calloc(1, sizeof(*w));
	int s;

	if (w == NULL)
		return NULL;
	w->idx = idx;
	w->seed = seed;
	w->nops = o.ops;
	w->mask = o.mask;
	w->verbose = o.verbose;
	w->hide = true;
	w->bsize = (size_t)o.max_size + 2 * g_page;
	if (w->bsize < CHUNK)
		w->bsize = CHUNK;
	for (s = 0; s < 3; s++) {
		if (o.root[s] == NULL)
			continue;
		if (sub != NULL)
			snprintf(w->dir[s], sizeof(w->dir[s]), "%s/%s",
				 o.root[s], sub);
		else
			snprintf(w->dir[s], sizeof(w->dir[s]), "%s", o.root[s]);
	}
	for (s = 0; s < 2; s++)
		w->b[s] = malloc(w->bsize);
	w->data = malloc(w->bsize);
	if (w->b[0] == NULL || w->b[1] == NULL || w->data == NULL) {
		free(w->b[0]);
		free(w->b[1]);
		free(w->data);
		free(w);
		return NULL;
	}
	return w;
}

static void worker_free(struct worker *w)
{
	if (w == NULL)
		return;
	free(w->b[0]);
	free(w->b[1]);
	free(w->data);
	free(w->shown);
	free(w);
}

/* ---- the watchdog --------------------------------------------------------- */

/* An operation on the mount that takes longer than --op-timeout ends the
 * run: the report is printed and the process exits (fsx.c's header says
 * what a hung daemon does to the exit). */
static void *watchdog(void *arg)
{
	struct sbuf sb = {0};
	long long t, now;
	struct worker *w;
	size_t i;

	(void)arg;
	for (;;) {
		sleep(1);
		now = now_ms();
		for (i = 0; i <= WORKERS_MAX; i++) {
			w = atomic_load(&g_watch[i]);
			if (w == NULL)
				continue;
			t = atomic_load(&w->busy_since);
			if (t == 0 || now - t < (long long)o.op_timeout * 1000)
				continue;
			pthread_mutex_lock(&g_lock);
			sb_add(&sb,
			       "fsx: DIFFERENCE at step %" PRIu64
			       " of worker %d (seed %" PRIu64
			       ", worker seed %" PRIu64 "): %s within %u s\n",
			       w->step, w->idx, o.seed, w->seed,
			       cat_text[C_TIMEOUT], o.op_timeout);
			sb_add(&sb, "  operation: %s\n  (during %s)\n", w->desc,
			       atomic_load(&w->phase));
			sb_ring(&sb, w);
			sb_replay(&sb, w, NULL);
			fwrite(sb.p, 1, sb.len, stdout);
			fflush(stdout);
			_exit(1);
		}
	}
	return NULL;
}

/* ---- minimizing ----------------------------------------------------------- */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

static void rm_tree(const char *p)
{
	nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

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
		rm_tree(w->dir[s]);
	return hit;
}

/* Delta debugging over the steps up to the failing one (complements
 * only), worker F alone. */
static void minimize(const struct worker *f)
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

/* ---- what --outside needs ------------------------------------------------ */

/* --outside must name MOUNTDIR as the sandbox's root holds it: a file
 * made through the mount must be there. Its owner's are the files made
 * there. 0, or 2 (said why). */
static int check_outside(void)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct stat st;
	int fd, rc = 2;

	if (stat(o.root[OUT], &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "fsx: --outside %s is not a directory\n",
			o.root[OUT]);
		return 2;
	}
	o.out_uid = st.st_uid;
	o.out_gid = st.st_gid;
	if (geteuid() != 0 && st.st_uid != geteuid()) {
		fprintf(stderr,
			"fsx: --outside %s is uid %u's: files made there "
			"could not be given to it (run as root)\n",
			o.root[OUT], (unsigned)st.st_uid);
		return 2;
	}
	snprintf(a, sizeof(a), "%s/.fsx-outside-check.%d", o.root[MNT],
		 (int)getpid());
	snprintf(b, sizeof(b), "%s/.fsx-outside-check.%d", o.root[OUT],
		 (int)getpid());
	fd = open(a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "fsx: cannot make %s: %s\n", a,
			strerror(errno));
		return 2;
	}
	/* The close sends a create the mount deferred (SEMANTICS.md). */
	if (close(fd) == 0 && stat(b, &st) == 0)
		rc = 0;
	else
		fprintf(stderr,
			"fsx: --outside %s does not hold what %s holds: it "
			"must be that directory as the sandbox's root has it "
			"on the host\n",
			o.root[OUT], o.root[MNT]);
	unlink(a);
	return rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* How long the changes made outside took to show through the mount, over
 * every worker. */
static void print_shown(struct worker *const *ws, unsigned n)
{
	size_t total = 0, i, k;
	uint32_t *v;
	uint64_t lost = 0;

	for (i = 0; i < n; i++) {
		total += ws[i]->nshown;
		lost += ws[i]->lost_calls;
	}
	if (total == 0) {
		printf("fsx: no change made in the sandbox took effect\n");
		return;
	}
	v = malloc(total * sizeof(*v));
	if (v == NULL)
		return;
	for (i = 0, k = 0; i < n; i++) {
		memcpy(v + k, ws[i]->shown, ws[i]->nshown * sizeof(*v));
		k += ws[i]->nshown;
	}
	qsort(v, total, sizeof(*v), cmp_u32);
	printf("fsx: %zu changes made in the sandbox showed through the mount "
	       "after: median %.1f ms, p95 %.1f ms, max %.1f ms "
	       "(--settle-ms %u)\n",
	       total, v[total / 2] / 1000.0,
	       v[(total * 95 + 99) / 100 - 1] / 1000.0, v[total - 1] / 1000.0,
	       o.settle_ms);
	if (lost > 0)
		printf("fsx: %" PRIu64 " calls through descriptors whose file "
		       "was renamed or removed in the sandbox failed on the "
		       "mount, and were left out of the mirror\n",
		       lost);
	free(v);
}

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

static int parse(int argc, char *argv[])
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
	uint64_t v;
	int c;

	o.argv0 = argv[0];
	while ((c = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		v = 0;
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
		case OPT_WORKERS:
			if (!parse_u64(optarg, &v, false) || v < 1 ||
			    v > WORKERS_MAX)
				goto bad;
			o.workers = (unsigned)v;
			break;
		case OPT_MAX_SIZE:
			if (!parse_u64(optarg, &o.max_size, true) ||
			    o.max_size < 1 || o.max_size > SIZE_CAP)
				goto bad;
			break;
		case OPT_LARGE:
			if (!parse_u64(optarg, &v, false) || v > 100)
				goto bad;
			o.large_pct = (unsigned)v;
			break;
		case OPT_CHECK_EVERY:
			if (!parse_u64(optarg, &v, false) || v < 1 ||
			    v > UINT32_MAX)
				goto bad;
			o.check_every = (unsigned)v;
			break;
		case OPT_OP_TIMEOUT:
			if (!parse_u64(optarg, &v, false) || v < 1 || v > 86400)
				goto bad;
			o.op_timeout = (unsigned)v;
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
			if (optarg != NULL && (!parse_u64(optarg, &v, false) ||
					       v < 1 || v > 100000))
				goto bad;
			if (optarg != NULL)
				o.minimize = (unsigned)v;
			break;
		case OPT_VERIFY_ONLY:
			o.verify_only = true;
			break;
		case OPT_OUTSIDE:
			o.root[OUT] = optarg;
			break;
		case OPT_OUTSIDE_PCT:
			if (!parse_u64(optarg, &v, false) || v > 100)
				goto bad;
			o.outside_pct = (unsigned)v;
			break;
		case OPT_SETTLE_MS:
			if (!parse_u64(optarg, &v, false) || v < 1 ||
			    v > 600000)
				goto bad;
			o.settle_ms = (unsigned)v;
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

int main(int argc, char *argv[])
{
	struct worker *ws[WORKERS_MAX] = {0};
	struct sigaction sa;
	pthread_t dog;
	struct stat st;
	long long t0;
	unsigned i, k;
	int rc, s, status = 0;
	char sub[32];
	long pg;

	rc = parse(argc, argv);
	if (rc != 0)
		return rc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	pg = sysconf(_SC_PAGESIZE);
	if (pg > 0)
		g_page = (size_t)pg;
	for (s = 0; s < 2; s++) {
		if (stat(o.root[s], &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr,
				"fsx: %s (the %s side) is not a "
				"directory\n",
				o.root[s], side_name[s]);
			return 2;
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	if (pthread_create(&dog, NULL, watchdog, NULL) != 0) {
		fprintf(stderr, "fsx: cannot start the watchdog\n");
		return 2;
	}
	t0 = now_ms();

	if (o.verify_only) {
		ws[0] = worker_new(-1, 0, NULL);
		if (ws[0] == NULL) {
			fprintf(stderr, "fsx: out of memory\n");
			return 2;
		}
		ws[0]->hide = false;
		atomic_store(&g_watch[0], ws[0]);
		printf("fsx: --verify-only %s %s\n", o.root[MNT], o.root[MIR]);
		if (!compare_tree(ws[0], "--verify-only")) {
			status = 1;
		} else {
			printf("fsx: the trees agree (%.1f s)\n",
			       (double)(now_ms() - t0) / 1000);
		}
		atomic_store(&g_watch[0], NULL);
		worker_free(ws[0]);
		return status;
	}

	if (o.root[OUT] != NULL && check_outside() != 0)
		return 2;
	printf("fsx: seed %" PRIu64 " (worker K: seed %" PRIu64
	       "+K), %u worker(s) x %" PRIu64 " ops, sizes up to %" PRIu64
	       ", large %u%%%s%s\n",
	       o.seed, o.seed, o.workers, o.ops, o.max_size, o.large_pct,
	       o.skip_arg ? ", skipping " : "", o.skip_arg ? o.skip_arg : "");
	if (o.root[OUT] != NULL)
		printf("fsx: %u%% of the steps change %s in the sandbox (%s), "
		       "shown through the mount within %u ms%s\n",
		       o.outside_pct, o.root[MNT], o.root[OUT], o.settle_ms,
		       o.close_open ? "; files are closed before they lose "
				      "their names there"
				    : "");
	for (i = 0; i < o.workers; i++) {
		snprintf(sub, sizeof(sub), "w%u", i);
		ws[i] = worker_new((int)i, o.seed + i, sub);
		if (ws[i] == NULL) {
			fprintf(stderr, "fsx: out of memory for worker %u\n",
				i);
			return 2;
		}
		atomic_store(&g_watch[i], ws[i]);
	}
	for (i = 0; i < o.workers; i++) {
		if (pthread_create(&ws[i]->th, NULL, worker_main, ws[i]) != 0) {
			fprintf(stderr, "fsx: cannot start worker %u\n", i);
			return 2;
		}
	}
	for (i = 0; i < o.workers; i++)
		pthread_join(ws[i]->th, NULL);
	for (i = 0; i < o.workers; i++) {
		atomic_store(&g_watch[i], NULL);
		if (ws[i]->setup_error)
			status = 2;
		else if (ws[i]->failed && status == 0)
			status = 1;
	}
	if (o.root[OUT] != NULL)
		print_shown(ws, o.workers);
	if (status == 0) {
		/* Every worker's tree at once, and whatever else is there. */
		ws[0]->idx = -1;
		snprintf(ws[0]->dir[MNT], PATH_MAX, "%s", o.root[MNT]);
		snprintf(ws[0]->dir[MIR], PATH_MAX, "%s", o.root[MIR]);
		ws[0]->nring = 0;
		atomic_store(&g_watch[0], ws[0]);
		if (!compare_tree(ws[0], "of the whole trees at the end"))
			status = 1;
		atomic_store(&g_watch[0], NULL);
		ws[0]->idx = 0;
	}
	if (status == 0) {
		printf("fsx: the mount and the mirror agreed: seed %" PRIu64
		       ", %u worker(s) x %" PRIu64 " ops (%.1f s)\n",
		       o.seed, o.workers, o.ops,
		       (double)(now_ms() - t0) / 1000);
		printf("fsx: operations run (of which failed alike):");
		for (k = 0; k < NKINDS; k++) {
			uint64_t n = 0, e = 0;

			if (o.root[OUT] == NULL && is_outside((enum kind)k))
				continue;
			for (i = 0; i < o.workers; i++) {
				n += ws[i]->count[k];
				e += ws[i]->errors[k];
			}
			printf(" %s %" PRIu64 " (%" PRIu64 ")", kinds[k].name,
			       n, e);
		}
		printf("\n");
	} else if (status == 1 && o.minimize > 0) {
		for (i = 0; i < o.workers; i++) {
			if (ws[i]->failed) {
				minimize(ws[i]);
				break;
			}
		}
	}
	for (i = 0; i < o.workers; i++)
		worker_free(ws[i]);
	free(o.mask);
	return status;
}
