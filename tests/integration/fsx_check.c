/* SPDX-License-Identifier: MIT */
/*
 * fsx_check: results and their comparison: what a call returned on each
 * side, the report of the first difference with the worker's replay log
 * and command lines, the checks after a step (descriptors' sizes and
 * positions, the names' stat) and the comparison of whole trees
 * (listings and contents). (fsx_i.h: the parts of the tester)
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/fsx_i.h"

const char *const cat_text[] = {
	"the results differ",
	"the bytes differ",
	"the sizes differ",
	"the positions differ",
	"the stats differ",
	"the listings differ",
	"no answer from the mount",
	"a change made in the sandbox did not show through the mount",
};

/* ---- results ------------------------------------------------------------- */

const char *errname(int e)
{
	static __thread char text[32];
	const char *name = strerrorname_np(e);

	if (name != NULL)
		return name;
	snprintf(text, sizeof(text), "errno %d", e);
	return text;
}

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

bool is_outside(enum kind kind)
{
	return kind >= K_OUT_WRITE && kind <= K_OUT_UTIMES;
}

void set(struct res *res, long long r)
{
	res->e = r < 0 ? errno : 0;
	res->r = r;
	res->bus = false;
	res->stage = NULL;
}

bool same(const struct res res[2])
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

void fmt_res(const struct res *res, char *out, size_t n)
{
	if (res->bus)
		snprintf(out, n, "SIGBUS");
	else if (res->r < 0)
		snprintf(out, n, "-1 %s%s%s", res->stage ? res->stage : "",
			 res->stage ? ": " : "", errname(res->e));
	else
		snprintf(out, n, "%lld", res->r);
}

const char *flag_text(int flags, char *out, size_t n)
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
const char *fd_text(const struct obj *ob, int k, char *out, size_t n)
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

void path_of(const struct worker *w, int s, const char *rel, char *out,
	     size_t n)
{
	int len = snprintf(out, n, "%s%s%s", w->dir[s], *rel ? "/" : "", rel);

	/* Too long a path fails its call (ENOENT) rather than naming
	 * another. */
	if (len < 0 || (size_t)len >= n)
		out[0] = '\0';
}

void set_size(struct res *res, int fd)
{
	struct stat st;

	set(res, fstat(fd, &st) < 0 ? -1 : (long long)st.st_size);
}

void stat_both(const struct worker *w, const char *rel, struct stat st[2],
	       struct res res[2])
{
	char p[PATH_MAX];
	int s;

	for (s = 0; s < 2; s++) {
		path_of(w, s, rel, p, sizeof(p));
		set(&res[s], stat(p, &st[s]));
	}
}

void open_both(const struct worker *w, const char *rel, int fd[2],
	       struct res res[2])
{
	char p[PATH_MAX];
	int s;

	for (s = 0; s < 2; s++) {
		path_of(w, s, rel, p, sizeof(p));
		fd[s] = open(p, O_RDONLY | O_CLOEXEC);
		set(&res[s], fd[s] < 0 ? -1 : 0);
	}
}

/* ---- reports -------------------------------------------------------------- */

/* Append FMT with the arguments AP to SB (a failed allocation drops the
 * text). */
__attribute__((format(printf, 2, 0))) static void sb_vadd(struct sbuf *sb,
							  const char *fmt,
							  va_list ap)
{
	va_list aq;
	size_t cap;
	char *p;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
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
	vsnprintf(sb->p + sb->len, sb->cap - sb->len, fmt, ap);
	sb->len += (size_t)n;
}

__attribute__((format(printf, 2, 3))) void sb_add(struct sbuf *sb,
						  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sb_vadd(sb, fmt, ap);
	va_end(ap);
}

void res_lines(struct sbuf *sb, const struct res res[2])
{
	char a[96], b[96];

	fmt_res(&res[MNT], a, sizeof(a));
	fmt_res(&res[MIR], b, sizeof(b));
	sb_add(sb, "  mount:  %s\n  mirror: %s\n", a, b);
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

void sb_ring(struct sbuf *sb, const struct worker *w)
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

void sb_replay(struct sbuf *sb, const struct worker *w, const char *steps)
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
__attribute__((format(printf, 3, 4))) void differ(struct worker *w,
						  enum cat cat, const char *fmt,
						  ...)
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

__attribute__((format(printf, 4, 5))) void differ_res(struct worker *w,
						      enum cat cat,
						      const struct res res[2],
						      const char *fmt, ...)
{
	struct sbuf sb = {0};
	va_list ap;

	va_start(ap, fmt);
	sb_vadd(&sb, fmt, ap);
	va_end(ap);
	sb_add(&sb, "\n");
	res_lines(&sb, res);
	differ(w, cat, "%s", sb.p ? sb.p : "");
	free(sb.p);
}

__attribute__((format(printf, 2, 3))) void record(struct worker *w,
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

__attribute__((format(printf, 3, 4))) void begin_op(struct worker *w,
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
bool end_op(struct worker *w, const struct res res[2])
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
bool lost_skip(struct worker *w, const struct xfd *x, const struct xfd *y,
	       int s, struct res res[2])
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
void bytes_text(struct sbuf *sb, const unsigned char *a, const unsigned char *b,
		size_t n, uint64_t base, const char *what)
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
bool same_bytes(struct worker *w, const unsigned char *a,
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
/* ---- the checks after a step --------------------------------------------- */

/* Size and position of every descriptor of OB. */
static bool check_obj(struct worker *w, const struct obj *ob)
{
	struct res res[2];
	char t[160];
	int k, s;

	if (ob == NULL || !ob->used)
		return true;
	for (k = 0; k < POOL; k++) {
		if (ob->f[k].fd[MIR] < 0)
			continue;
		atomic_store(&w->phase, "fstat after the operation");
		for (s = 0; s < 2 && !lost_skip(w, &ob->f[k], NULL, s, res);
		     s++)
			set_size(&res[s], ob->f[k].fd[s]);
		if (!same(res)) {
			differ_res(w, C_SIZE, res, "  then fstat of %s: size",
				   fd_text(ob, k, t, sizeof(t)));
			return false;
		}
		for (s = 0; s < 2 && !lost_skip(w, &ob->f[k], NULL, s, res);
		     s++)
			set(&res[s], lseek(ob->f[k].fd[s], 0, SEEK_CUR));
		if (!same(res)) {
			differ_res(w, C_POS, res,
				   "  then the file position of %s",
				   fd_text(ob, k, t, sizeof(t)));
			return false;
		}
	}
	return true;
}

const char *type_text(mode_t m)
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
	struct res res[2];

	if (n < 0)
		return true;
	atomic_store(&w->phase, "stat after the operation");
	stat_both(w, names[n], st, res);
	if (!same(res)) {
		differ_res(w, C_STAT, res, "  then stat of %s", names[n]);
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
bool post(struct worker *w, const struct obj *a, const struct obj *b, int n1,
	  int n2)
{
	return check_obj(w, a) && (b == a || check_obj(w, b)) &&
	       check_name(w, n1) && (n2 == n1 || check_name(w, n2));
}
/* ---- whole trees ---------------------------------------------------------- */

int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->path,
		      ((const struct ent *)b)->path);
}

void list_free(struct list *l)
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
void list_dir(const char *root, const char *rel, int depth, bool hide,
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

void ent_text(const struct ent *e, char *out, size_t n)
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
	struct res res[2];
	uint64_t off = 0, size = 0;
	int fd[2], s;
	bool ok = false;

	atomic_store(&w->phase, "the contents check");
	open_both(w, rel, fd, res);
	if (!same(res)) {
		differ_res(w, C_RESULT, res, "  open %s for reading", rel);
		goto out;
	}
	if (fd[MIR] < 0) {
		ok = true;
		goto out;
	}
	for (s = 0; s < 2; s++)
		set_size(&res[s], fd[s]);
	if (!same(res)) {
		differ_res(w, C_SIZE, res, "  fstat %s: size", rel);
		goto out;
	}
	size = (uint64_t)res[MIR].r;
	for (;;) {
		for (s = 0; s < 2; s++)
			set(&res[s], pread(fd[s], w->b[s], CHUNK, (off_t)off));
		if (!same(res)) {
			differ_res(w, C_RESULT, res,
				   "  pread %s off=%" PRIu64
				   " len=%u (size %" PRIu64 ")",
				   rel, off, CHUNK, size);
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
		differ_res(w, C_RESULT, res, "  close %s after reading", rel);
		ok = false;
	}
	return ok;
}

/* The listing of the two trees (names, types, sizes), then the whole
 * contents of every regular file. */
bool compare_tree(struct worker *w, const char *why)
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
		if (l[s].n > 1)
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
