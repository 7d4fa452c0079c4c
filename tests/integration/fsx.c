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
 * The tester's files and what each owns: fsx_i.h.
 *
 * usage: fsx [options] MOUNTDIR MIRRORDIR (fsx -h lists the options)
 * exit: 0 both sides agreed all the way, 1 a difference, 2 a usage or
 * setup error.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/fsx_i.h"

const char *const names[NNAMES] = {"f0", "f1", "f2", "d0/f3", "d0/f4", "d1/f5"};
static const char *const dirs[NDIRS] = {"d0", "d1"};
static const char *const side_name[2] = {"mount", "mirror"};

const struct kind_info kinds[NKINDS] = {
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

struct options o = {
	.ops = 1000,
	.workers = 1,
	.max_size = 64 * MiB,
	.large_pct = 2,
	.check_every = 50,
	.op_timeout = 60,
	.outside_pct = 15,
	.settle_ms = 2000,
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_bool g_stop;
unsigned g_reported;
struct worker *_Atomic g_watch[WORKERS_MAX + 1];
size_t g_page = 4096;

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

/* A step's kind: with --outside, --outside-pct percent of them are
 * changes made in the sandbox. Without it the draws are those of a
 * tester that had no outside steps, so older seeds replay the same. */
enum kind draw_kind(struct rng *r)
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
int run(struct worker *w)
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

struct worker *worker_new(int idx, uint64_t seed, const char *sub)
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

void worker_free(struct worker *w)
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
