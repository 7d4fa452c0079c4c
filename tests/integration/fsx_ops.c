/* SPDX-License-Identifier: MIT */
/*
 * fsx_ops: the open files and their descriptors on both sides, and the
 * operations made through the mount and in the mirror (read, write,
 * truncate, rename, mmap, copy_file_range, ...). (fsx_i.h: the parts of the tester)
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/integration/fsx_i.h"

static __thread sigjmp_buf *volatile t_bus;

/* ---- objects and descriptors ---------------------------------------------- */

static unsigned nfds(const struct obj *ob)
{
	unsigned k, n = 0;

	for (k = 0; k < POOL; k++)
		n += ob->f[k].fd[MIR] >= 0;
	return n;
}

struct obj *name_obj(struct worker *w, int n)
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
void unname(struct worker *w, int n)
{
	struct obj *ob = name_obj(w, n);

	if (ob != NULL)
		ob->name = -1;
	w->name_obj[n] = -1;
}

uint64_t mir_size(const struct xfd *x)
{
	struct stat st;

	return fstat(x->fd[MIR], &st) < 0 ? 0 : (uint64_t)st.st_size;
}

static uint64_t mir_pos(const struct xfd *x)
{
	off_t p = lseek(x->fd[MIR], 0, SEEK_CUR);

	return p < 0 ? 0 : (uint64_t)p;
}

bool xclose(struct worker *w, struct obj *ob, int k)
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
bool orphan_room(struct worker *w)
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

static bool op_truncate(struct worker *w, struct rng *r, enum kind kind)
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
	begin_op(w, kind, "truncate %s len=%" PRIu64 " (size %" PRIu64 ")",
		 names[n], len, size);
	for (s = 0; s < 2; s++) {
		path_of(w, s, names[n], p, sizeof(p));
		set(&res[s], truncate(p, (off_t)len));
	}
	if (!end_op(w, res))
		return false;
	return post(w, name_obj(w, n), name_obj(w, n), n, n);
}

static bool op_ftruncate(struct worker *w, struct rng *r, enum kind kind)
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
	begin_op(w, kind, "ftruncate %s len=%" PRIu64 " (size %" PRIu64 ")",
		 fd_text(ob, k, t, sizeof(t)), len, size);
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++)
		set(&res[s], ftruncate(x->fd[s], (off_t)len));
	if (!end_op(w, res))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static bool op_rename(struct worker *w, struct rng *r, enum kind kind)
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
	begin_op(w, kind, "rename %s -> %s", names[a], names[b]);
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

static bool op_unlink(struct worker *w, struct rng *r, enum kind kind)
{
	struct res res[2];
	char p[PATH_MAX];
	struct obj *ob;
	int n = (int)rnd(r, NNAMES), s;

	if (name_obj(w, n) != NULL && !orphan_room(w))
		return false;
	ob = name_obj(w, n);
	begin_op(w, kind, "unlink %s", names[n]);
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

static bool op_create(struct worker *w, struct rng *r, enum kind kind)
{
	int n = (int)rnd(r, NNAMES);
	int flags = O_CREAT | (pct(r, 80) ? O_RDWR : O_WRONLY);

	if (pct(r, 40))
		flags |= O_EXCL;
	if (pct(r, 30))
		flags |= O_TRUNC;
	return open_name(w, r, n, flags, kind, NULL);
}

static bool op_reopen(struct worker *w, struct rng *r, enum kind kind)
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
	return open_name(w, r, n, draw_flags(r, false), kind, NULL);
}

static bool op_close(struct worker *w, struct rng *r, enum kind kind)
{
	struct obj *ob = NULL;
	bool ok = true;
	int k = 0;

	(void)kind;
	if (pick_fd(w, r, &ob, &k, &ok, W_ANY) == NULL)
		return ok;
	return xclose(w, ob, k);
}

static bool op_lseek(struct worker *w, struct rng *r, enum kind kind)
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
	begin_op(w, kind, "lseek %s %lld %s (size %" PRIu64 ")",
		 fd_text(ob, k, t, sizeof(t)), off, whence_text[whence],
		 mir_size(x));
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++)
		set(&res[s], lseek(x->fd[s], off, whence));
	if (!end_op(w, res))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

static bool op_fsync(struct worker *w, struct rng *r, enum kind kind)
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
	begin_op(w, kind, "%s %s", data ? "fdatasync" : "fsync",
		 fd_text(ob, k, t, sizeof(t)));
	for (s = 0; s < 2 && !lost_skip(w, x, NULL, s, res); s++)
		set(&res[s], data ? fdatasync(x->fd[s]) : fsync(x->fd[s]));
	if (!end_op(w, res))
		return false;
	return post(w, ob, ob, ob->name, ob->name);
}

void on_sigbus(int sig)
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

static bool op_copy(struct worker *w, struct rng *r, enum kind kind)
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
	begin_op(w, kind,
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

/* What runs a step of each drawn kind; each is given the kind drawn. */
static bool (*const steps[NDRAWN])(struct worker *w, struct rng *r,
				   enum kind kind) = {
	[K_READ] = op_read,
	[K_PREAD] = op_read,
	[K_WRITE] = op_write,
	[K_PWRITE] = op_write,
	[K_APPEND] = op_write,
	[K_TRUNCATE] = op_truncate,
	[K_FTRUNCATE] = op_ftruncate,
	[K_RENAME] = op_rename,
	[K_MMAP_READ] = op_mmap,
	[K_MMAP_WRITE] = op_mmap,
	[K_COPY] = op_copy,
	[K_FSYNC] = op_fsync,
	[K_REOPEN] = op_reopen,
	[K_CLOSE] = op_close,
	[K_UNLINK] = op_unlink,
	[K_CREATE] = op_create,
	[K_LSEEK] = op_lseek,
	[K_OUT_WRITE... K_OUT_UTIMES] = op_outside,
};

bool one_step(struct worker *w, struct rng *r, enum kind kind)
{
	if ((unsigned)kind >= NDRAWN)
		return true;
	return steps[kind](w, r, kind);
}
