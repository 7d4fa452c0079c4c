/* SPDX-License-Identifier: MIT */
/*
 * fsx_i: what the files of the random differential tester share (fsx.c's
 * header says what the tester does and how to replay it):
 *
 *   fsx.c           the tables (names, kinds), the options' values, a
 *                   worker's run, the watchdog and main
 *   fsx_options.c   the command line: usage and parsing into o
 *   fsx_rng.c       the random numbers: a generator per step, sizes,
 *                   offsets and lengths
 *   fsx_check.c     results and their comparison: the report of a
 *                   difference, the replay log, the checks after a step
 *                   and the comparison of whole trees
 *   fsx_ops.c       open files and their descriptors, and the operations
 *                   made through the mount and in the mirror
 *   fsx_outside.c   the changes made inside the sandbox (--outside), the
 *                   wait for them to show through the mount, and the
 *                   figures of how long they took
 *   fsx_minimize.c  delta debugging of a failing worker's steps
 *
 * Threads: o is written by parse() before any worker starts, and by
 * minimize() once every worker is done; each struct worker belongs to
 * the thread that runs it, but for what the watchdog reads (busy_since
 * and phase, atomic; the step, the description and the replay log when
 * it gives up, and then exits). g_lock serializes the reports
 * (g_reported); g_stop and g_watch are atomic.
 *
 * Errors: the operations and checks return false after a difference (it
 * is reported by differ() and stops the run); setup errors are printed
 * and counted apart (exit 2).
 */
#ifndef SBFS_TEST_FSX_I_H
#define SBFS_TEST_FSX_I_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

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

/* A kind's name (in reports, -v and --skip) and how often it is drawn. */
struct kind_info {
	const char *name;
	unsigned weight;
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

/* The options (fsx_options.c), with their defaults (fsx.c). */
struct options {
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
};

struct rng {
	uint64_t s[4];
};

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

/* A growing text (sb_add); p is NULL until something is added. */
struct sbuf {
	char *p;
	size_t len, cap;
};

/* An entry of a listing (list_dir), and the listing. */
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

/* ---- fsx.c --------------------------------------------------------------- */

extern struct options o;
extern const char *const names[NNAMES];
extern const struct kind_info kinds[NKINDS];
extern pthread_mutex_t g_lock;
extern atomic_bool g_stop;
extern unsigned g_reported;
/* The workers the watchdog looks at (the last slot: the minimizer's). */
extern struct worker *_Atomic g_watch[WORKERS_MAX + 1];
extern size_t g_page;

/* A step's kind, drawn from its generator. */
enum kind draw_kind(struct rng *r);
/* Run the worker's steps; 0 agreed, 1 a difference, 2 a setup error. */
int run(struct worker *w);
/* A worker with its buffers, working in SUB of each root (NULL: the
 * roots themselves); NULL when out of memory. */
struct worker *worker_new(int idx, uint64_t seed, const char *sub);
/* Accepts NULL. */
void worker_free(struct worker *w);

/* ---- fsx_options.c ------------------------------------------------------- */

/* Fill o from the command line; 0, or the exit status (2, said why). */
int parse(int argc, char *argv[]);

/* ---- fsx_rng.c ----------------------------------------------------------- */

/* The generator of the step STEP of the seed SEED. */
void rng_init(struct rng *r, uint64_t seed, uint64_t step);
/* Uniform in [0, n) (0 when n is 0). */
uint64_t rnd(struct rng *r, uint64_t n);
/* True P percent of the time. */
bool pct(struct rng *r, unsigned p);
/* N random bytes at P. */
void fill(struct rng *r, unsigned char *p, size_t n);
uint64_t min_u(uint64_t a, uint64_t b);
/* A size in [1, --max-size]. */
uint64_t rsize(struct rng *r);
/* An offset for a file of SIZE bytes, at most --max-size. */
uint64_t roff(struct rng *r, uint64_t size);
/* A length to truncate a file of SIZE bytes to. */
uint64_t rlen(struct rng *r, uint64_t size);

/* ---- fsx_check.c --------------------------------------------------------- */

/* The text of each enum cat. */
extern const char *const cat_text[];

/* The errno's name ("ENOENT"); the text lives in thread-local storage. */
const char *errname(int e);
/* Monotonic clock. */
long long now_ms(void);
long long now_us(void);
bool is_outside(enum kind kind);
/* A result: R, and errno when R < 0. */
void set(struct res *res, long long r);
/* Do the results of the two sides agree? */
bool same(const struct res res[2]);
void fmt_res(const struct res *res, char *out, size_t n);
const char *flag_text(int flags, char *out, size_t n);
/* The descriptor K of OB, for reports. */
const char *fd_text(const struct obj *ob, int k, char *out, size_t n);
/* REL under the worker's directory of side S; "" when too long. */
void path_of(const struct worker *w, int s, const char *rel, char *out,
	     size_t n);
const char *type_text(mode_t m);
/* The size of the descriptor FD as a result (-1 when fstat fails). */
void set_size(struct res *res, int fd);
/* stat of REL on both sides, into ST and RES. */
void stat_both(const struct worker *w, const char *rel, struct stat st[2],
	       struct res res[2]);
/* REL opened read-only on both sides: the descriptors (or -1) in FD. */
void open_both(const struct worker *w, const char *rel, int fd[2],
	       struct res res[2]);

/* Append to SB (a failed allocation drops the text). */
__attribute__((format(printf, 2, 3))) void sb_add(struct sbuf *sb,
						  const char *fmt, ...);
/* The worker's last operations, and the command lines that replay it. */
void sb_ring(struct sbuf *sb, const struct worker *w);
void sb_replay(struct sbuf *sb, const struct worker *w, const char *steps);
/* What differs between the bytes A (the mount's) and B (the mirror's). */
void bytes_text(struct sbuf *sb, const unsigned char *a, const unsigned char *b,
		size_t n, uint64_t base, const char *what);

/* The worker's first difference: remembered, reported (unless it is
 * minimizing), and every worker stops. */
__attribute__((format(printf, 3, 4))) void differ(struct worker *w,
						  enum cat cat, const char *fmt,
						  ...);
/* The lines "  mount:  A\n  mirror: B\n" of the results RES. */
void res_lines(struct sbuf *sb, const struct res res[2]);
/* differ() with the line FMT (no newline) then res_lines() of RES. */
__attribute__((format(printf, 4, 5))) void differ_res(struct worker *w,
						      enum cat cat,
						      const struct res res[2],
						      const char *fmt, ...);
/* A line of the replay log (printed with -v). */
__attribute__((format(printf, 2, 3))) void record(struct worker *w,
						  const char *fmt, ...);
/* An operation begins: its description, kind and the watchdog's clock. */
__attribute__((format(printf, 3, 4))) void begin_op(struct worker *w,
						    enum kind kind,
						    const char *fmt, ...);
/* The results of the operation begun last: logged and compared. */
bool end_op(struct worker *w, const struct res res[2]);
/* Leave the mirror's call out after a lost descriptor failed on the
 * mount (fsx.c's header); true when left out. */
bool lost_skip(struct worker *w, const struct xfd *x, const struct xfd *y,
	       int s, struct res res[2]);
bool same_bytes(struct worker *w, const unsigned char *a,
		const unsigned char *b, size_t n, uint64_t base,
		const char *what);
/* The checks after a step: the objects and the names it touched. */
bool post(struct worker *w, const struct obj *a, const struct obj *b, int n1,
	  int n2);

/* Every entry under ROOT/REL, recursively to DEPTH_MAX; HIDE leaves out
 * the mount's .fuse_hidden names. */
void list_dir(const char *root, const char *rel, int depth, bool hide,
	      struct list *l);
void list_free(struct list *l);
/* By path, for qsort. */
int ent_cmp(const void *a, const void *b);
void ent_text(const struct ent *e, char *out, size_t n);
/* The listings and the whole contents of the worker's two trees. */
bool compare_tree(struct worker *w, const char *why);

/* ---- fsx_ops.c ----------------------------------------------------------- */

/* The open file of the name N, or NULL. */
struct obj *name_obj(struct worker *w, int n);
/* The name N no longer leads to its object. */
void unname(struct worker *w, int n);
/* The size of the mirror's file of X (0 when fstat fails). */
uint64_t mir_size(const struct xfd *x);
/* Close the descriptor K of OB on both sides, as a step. */
bool xclose(struct worker *w, struct obj *ob, int k);
/* Room for one more open file without a name (closing one). */
bool orphan_room(struct worker *w);
/* The step of KIND, drawn from R. */
bool one_step(struct worker *w, struct rng *r, enum kind kind);
/* The SIGBUS handler: a fault while touching a mapping is a result. */
void on_sigbus(int sig);

/* ---- fsx_outside.c ------------------------------------------------------- */

/* A change made inside the sandbox and in the mirror, then the wait for
 * the mount to show it. */
bool op_outside(struct worker *w, struct rng *r, enum kind kind);
/* Is --outside MOUNTDIR as the sandbox's root holds it? 0, or 2. */
int check_outside(void);
/* How long the outside changes took to show, over every worker. */
void print_shown(struct worker *const *ws, unsigned n);

/* ---- fsx_minimize.c ------------------------------------------------------ */

/* After a difference of the worker F, a small list of steps that still
 * shows it, printed with its --steps command line. */
void minimize(const struct worker *f);

#endif
