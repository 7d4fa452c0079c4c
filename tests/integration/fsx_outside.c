/* SPDX-License-Identifier: MIT */
/*
 * fsx_outside: the changes made inside the sandbox (--outside) and in
 * the mirror, the looks until the mount shows them, what --outside
 * needs, and how long the changes took to show. (fsx_i.h: the parts of the tester)
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/fsx_i.h"

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
	int s;

	len = min_u(len, CHUNK);
	for (s = 0; s < 2; s++)
		set(&res[s], pread(fd[s], w->b[s], len, (off_t)off));
	if (!same(res)) {
		sb_add(why, "  pread %s off=%" PRIu64 " len=%" PRIu64 "\n",
		       what, off, len);
		res_lines(why, res);
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
	int s;

	for (s = 0; s < 2; s++)
		set_size(&res[s], fd[s]);
	if (!same(res)) {
		sb_add(why, "  fstat %s: size\n", what);
		res_lines(why, res);
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

	stat_both(w, names[n], st, res);
	if (!same(res)) {
		sb_add(why, "  stat %s\n", names[n]);
		res_lines(why, res);
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
		if (l[s].n > 1)
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
	char what[80];
	struct res res[2];
	uint64_t size;
	int fd[2], s;
	bool ok = false;

	open_both(w, names[n], fd, res);
	snprintf(what, sizeof(what), "%s opened afresh", names[n]);
	if (!same(res)) {
		sb_add(why, "  open %s\n", what);
		res_lines(why, res);
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
bool op_outside(struct worker *w, struct rng *r, enum kind kind)
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

/* ---- what --outside needs ------------------------------------------------ */

/* --outside must name MOUNTDIR as the sandbox's root holds it: a file
 * made through the mount must be there. Its owner's are the files made
 * there. 0, or 2 (said why). */
int check_outside(void)
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
void print_shown(struct worker *const *ws, unsigned n)
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
		if (ws[i]->nshown == 0)
			continue; /* shown may be NULL */
		memcpy(v + k, ws[i]->shown, ws[i]->nshown * sizeof(*v));
		k += ws[i]->nshown;
	}
	if (total > 1)
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
