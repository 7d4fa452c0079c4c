/* SPDX-License-Identifier: MIT */
/*
 * ll: the mount as the FUSE low-level API sees it. The kernel names files
 * by node id; this file keeps the ids (inodes.c), makes the path of each
 * request and hands it to the path operations of fs.c, and answers with
 * the timeouts, handles and directory streams the kernel keeps. Why the
 * low-level API and not libfuse's path API: doc/internals/cache.md.
 *
 * What libfuse's path API did for the mount and is kept here:
 * - a name unlinked (or renamed over) while a descriptor of it is open is
 *   renamed to a hidden name (".fuse_hidden..."), removed at the last
 *   close (SEMANTICS.md);
 * - a directory is listed once per reader, at offset 0, and served from
 *   that snapshot at increasing offsets;
 * - an answer the kernel no longer waits for (an interrupted request)
 *   gives back what it counted (lookups, open files).
 *
 * This file has the requests on names and nodes and the table; open files
 * and directory streams are ll_files.c's (ll_i.h joins them).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs.h"
#include "fs/fs_i.h"
#include "fs/inodes.h"
#include "fs/ll_i.h"

/* ---- the request of this thread --------------------------------------- */

static __thread const struct ll_req *cur;

struct sbfs *sbfs_current(void)
{
	return cur != NULL ? cur->fs : NULL;
}

pid_t sbfs_caller_pid(void)
{
	return cur != NULL ? cur->pid : 0;
}

bool sbfs_interrupted(void)
{
	return cur != NULL && fuse_req_interrupted(cur->req);
}

struct sbfs *ll_begin(fuse_req_t req, struct ll_req *r)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	r->req = req;
	r->fs = fuse_req_userdata(req);
	r->pid = ctx != NULL ? ctx->pid : 0;
	cur = r;
	return r->fs;
}

void ll_end(void)
{
	cur = NULL;
}

/* ---- paths ------------------------------------------------------------------ */

/* The module's view of an open file: fi with the module's handle. */
struct fuse_file_info ll_inner(const struct fuse_file_info *fi)
{
	struct fuse_file_info f = *fi;

	f.fh = ((struct llfile *)(uintptr_t)fi->fh)->fh;
	return f;
}

/*
 * The path of a node the kernel names, for an operation that names it by
 * id (stat, open, chmod, opendir): its name now or, when another request
 * renamed something over it or removed it since the kernel looked it up,
 * the name it had. The operation then finds what has that name now (or
 * nothing), as if it had come a moment later: an atomic replacement never
 * shows a reader a missing file.
 */
int ll_node_path(struct sbfs *fs, fuse_ino_t ino, char *buf, size_t size)
{
	int rc = inodes_path_flags(fs->inodes, ino, INODES_DETACHED_OK, buf,
				   size);

	return rc == -ENOENT ? -ESTALE : rc;
}

/* A name in parent, for a lookup or a change: parent must still have its
 * own name. ESTALE makes the kernel walk the path again, as for NFS. */
int ll_node_child_path(struct sbfs *fs, fuse_ino_t parent, const char *name,
		       char *buf, size_t size)
{
	int rc = inodes_child_path(fs->inodes, parent, name, buf, size);

	return rc == -ENOENT ? -ESTALE : rc;
}

/*
 * The path of an open file for its I/O: its name now, else (its name was
 * renamed over or removed while it was being opened, or it could not be
 * hidden) the name it was opened by: the file that has that name.
 */
int ll_file_path(struct sbfs *fs, fuse_ino_t ino,
		 const struct fuse_file_info *fi, char *buf, size_t size)
{
	const struct llfile *lf = (const struct llfile *)(uintptr_t)fi->fh;
	int rc = inodes_path(fs->inodes, ino, buf, size);

	if (rc == -ENOENT) {
		snprintf(buf, size, "%s", lf->path);
		rc = 0;
	}
	return rc;
}

const char *ll_release_path(struct sbfs *fs, fuse_ino_t ino,
			    const struct fuse_file_info *fi, char *buf,
			    size_t size)
{
	const struct llfile *lf = (const struct llfile *)(uintptr_t)fi->fh;

	/* A stale file still goes back to the module that holds it. */
	if (ll_file_path(fs, ino, fi, buf, size) < 0)
		snprintf(buf, size, "%s", lf->path);
	return buf;
}

/* ---- entries ------------------------------------------------------------- */

int64_t ll_ctime_ns(const struct stat *st)
{
	return (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

int64_t sbfs_attr_ctime_ns(const struct proto_attr *a)
{
	return a->ctime * 1000000000 + (int64_t)a->ctime_ns;
}

void ll_entry_times(struct sbfs *fs, const char *path, uint64_t mark,
		    struct fuse_entry_param *e)
{
	double neg;

	sbfs_timeouts(fs, path, mark, &e->entry_timeout, &e->attr_timeout,
		      &neg);
}

/* ---- name changes in flight (ll_i.h) ---------------------------------------- */

static void ll_names_begin(struct sbfs *fs)
{
	pthread_mutex_lock(&fs->names_lock);
	fs->names_busy++;
	__atomic_add_fetch(&fs->names_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fs->names_lock);
}

static void ll_names_end(struct sbfs *fs)
{
	pthread_mutex_lock(&fs->names_lock);
	fs->names_busy--;
	__atomic_add_fetch(&fs->names_gen, 1, __ATOMIC_RELEASE);
	if (fs->names_busy == 0)
		pthread_cond_broadcast(&fs->names_idle);
	pthread_mutex_unlock(&fs->names_lock);
}

void ll_moved_init(struct sbfs *fs, struct ll_moved *m)
{
	/* On every read and write: no lock, only the generation (changed
	 * under names_lock, read here atomically). */
	m->gen = __atomic_load_n(&fs->names_gen, __ATOMIC_ACQUIRE);
	m->tries = 0;
}

bool ll_moved_since(struct sbfs *fs, struct ll_moved *m)
{
	struct timespec until;

	if (m->tries >= LL_MOVED_TRIES)
		return false;
	/* The common case, on every answered read and stat: nothing
	 * changed and nothing is in flight, seen without the lock. */
	if (__atomic_load_n(&fs->names_gen, __ATOMIC_ACQUIRE) == m->gen &&
	    __atomic_load_n(&fs->names_busy, __ATOMIC_ACQUIRE) == 0)
		return false;
	pthread_mutex_lock(&fs->names_lock);
	if (fs->names_gen == m->gen && fs->names_busy == 0) {
		pthread_mutex_unlock(&fs->names_lock);
		return false;
	}
	clock_deadline_in(&until, 1000);
	while (fs->names_busy > 0 &&
	       pthread_cond_timedwait(&fs->names_idle, &fs->names_lock,
				      &until) == 0)
		;
	m->gen = fs->names_gen;
	pthread_mutex_unlock(&fs->names_lock);
	m->tries++;
	return true;
}

bool ll_moved_again(struct sbfs *fs, struct ll_moved *m, int rc)
{
	return rc == -ENOENT && ll_moved_since(fs, m);
}

bool ll_moved_off(struct sbfs *fs, struct ll_moved *m, fuse_ino_t ino,
		  const struct fuse_file_info *fi, const char *path)
{
	char now[LL_PATH_MAX];
	int rc;

	if (!ll_moved_since(fs, m))
		return false;
	rc = fi != NULL ? ll_file_path(fs, ino, fi, now, sizeof(now))
			: ll_node_path(fs, ino, now, sizeof(now));
	return rc == 0 && strcmp(now, path) != 0;
}

/*
 * The entry of path (name in parent) after a lookup or a change that made
 * it: attributes from the module, and one counted lookup.
 */
int ll_make_entry(struct sbfs *fs, fuse_ino_t parent, const char *name,
		  const char *path, struct fuse_file_info *fi,
		  struct fuse_entry_param *e)
{
	uint64_t mark = cache_mark(fs->cache), ino;
	int rc;

	memset(e, 0, sizeof(*e));
	rc = OPS->getattr(path, &e->attr, fi);
	if (rc < 0)
		return rc;
	rc = inodes_lookup(fs->inodes, parent, name, &ino);
	if (rc < 0)
		return rc;
	e->ino = ino;
	inodes_set_fino(fs->inodes, ino, e->attr.st_ino, ll_ctime_ns(&e->attr));
	e->attr.st_ino = ino;
	ll_entry_times(fs, path, mark, e);
	return 0;
}

static double attr_time(struct sbfs *fs, const char *path, uint64_t mark)
{
	double entry, attr, neg;

	sbfs_timeouts(fs, path, mark, &entry, &attr, &neg);
	return attr;
}

/* Answer an entry; an answer nobody waits for any more gives the lookup
 * back. */
static void reply_entry(struct sbfs *fs, fuse_req_t req,
			const struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) == -ENOENT)
		inodes_forget(fs->inodes, e->ino, 1);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_entry_param e;
	uint64_t mark = cache_mark(fs->cache);
	double neg = 0, t;
	int rc = ll_node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0)
		rc = ll_make_entry(fs, parent, name, path, NULL, &e);
	if (rc == -ENOENT)
		sbfs_timeouts(fs, path, mark, &t, &t, &neg);
	if (rc == -ENOENT && neg > 0) {
		/* A name that is not there is remembered too. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = neg;
		fuse_reply_entry(req, &e);
	} else if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		reply_entry(fs, req, &e);
	}
	ll_end();
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct sbfs *fs = fuse_req_userdata(req);

	inodes_forget(fs->inodes, ino, nlookup);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct sbfs *fs = fuse_req_userdata(req);
	size_t i;

	for (i = 0; i < count; i++)
		inodes_forget(fs->inodes, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* The path of ino for an attribute request: the open file's when fi is
 * given (then *fp is the module's view of it, in *f), else the node's. */
static int attr_path(struct sbfs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		     char *buf, size_t size, struct fuse_file_info *f,
		     struct fuse_file_info **fp)
{
	*fp = NULL;
	if (fi == NULL)
		return ll_node_path(fs, ino, buf, size);
	*f = ll_inner(fi);
	*fp = f;
	return ll_file_path(fs, ino, fi, buf, size);
}

/* Answer ino's attributes, or rc when it is an error already; the path
 * (in path) resolved again (ll_moved_again) when it moves under the
 * request. */
static void reply_attr(struct sbfs *fs, fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi, char *path, size_t size,
		       struct ll_moved *m, uint64_t mark, int rc)
{
	struct fuse_file_info f, *fp = NULL;
	struct stat st;

	memset(&st, 0, sizeof(st));
	while (rc == 0) {
		rc = attr_path(fs, ino, fi, path, size, &f, &fp);
		if (rc == 0)
			rc = OPS->getattr(path, &st, fp);
		/* Answered for a path the node left meanwhile (another file
		 * may have it now): asked again. */
		if (ll_moved_again(fs, m, rc) ||
		    (rc == 0 && ll_moved_off(fs, m, ino, fi, path)))
			rc = 0;
		else
			break;
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		inodes_set_fino(fs->inodes, ino, st.st_ino, ll_ctime_ns(&st));
		st.st_ino = ino;
		fuse_reply_attr(req, &st, attr_time(fs, path, mark));
	}
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	uint64_t mark = cache_mark(fs->cache);
	struct ll_moved m;

	ll_moved_init(fs, &m);
	reply_attr(fs, req, ino, fi, path, sizeof(path), &m, mark, 0);
	ll_end();
}

/* The times a setattr sets (UTIME_OMIT for the one it does not). */
static void setattr_times(const struct stat *attr, int to_set,
			  struct timespec tv[2])
{
	tv[0].tv_sec = 0;
	tv[0].tv_nsec = UTIME_OMIT;
	tv[1] = tv[0];
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		tv[0].tv_nsec = UTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		tv[0] = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		tv[1].tv_nsec = UTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		tv[1] = attr->st_mtim;
}

/* Apply a setattr to path, in the order of chmod(1), chown(1),
 * truncate(1) and touch(1), as libfuse's path API did. */
static int setattr_apply(const char *path, const struct stat *attr, int to_set,
			 struct fuse_file_info *fp)
{
	int rc = 0;

	if (to_set & FUSE_SET_ATTR_MODE)
		rc = OPS->chmod(path, attr->st_mode, fp);
	if (rc == 0 && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		rc = OPS->chown(
			path,
			(to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1,
			(to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1,
			fp);
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		rc = OPS->truncate(path, attr->st_size, fp);
	if (rc == 0 && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2];

		setattr_times(attr, to_set, tv);
		rc = OPS->utimens(path, tv, fp);
	}
	return rc;
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f, *fp;
	uint64_t mark = cache_mark(fs->cache);
	struct ll_moved m;
	int rc;

	ll_moved_init(fs, &m);
	do {
		rc = attr_path(fs, ino, fi, path, sizeof(path), &f, &fp);
		if (rc == 0)
			rc = setattr_apply(path, attr, to_set, fp);
	} while (ll_moved_again(fs, &m, rc));
	reply_attr(fs, req, ino, fi, path, sizeof(path), &m, mark, rc);
	ll_end();
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX], target[PATH_MAX_BYTES + 1];
	int rc = ll_node_path(fs, ino, path, sizeof(path));

	if (rc == 0)
		rc = OPS->readlink(path, target, sizeof(target));
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
	ll_end();
}

/* After a change that made name in parent: answer its entry. */
static void made(struct sbfs *fs, fuse_req_t req, fuse_ino_t parent,
		 const char *name, const char *path, int rc)
{
	struct fuse_entry_param e;

	if (rc == 0)
		rc = ll_make_entry(fs, parent, name, path, NULL, &e);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_entry(fs, req, &e);
}

/* What a request makes in its parent. */
enum make_kind { MAKE_NODE, MAKE_DIR, MAKE_SYMLINK };

/* Make name in parent (a node of mode and rdev, a directory of mode, or a
 * symbolic link to target) and answer its entry. */
static void make_in(fuse_req_t req, fuse_ino_t parent, const char *name,
		    enum make_kind kind, mode_t mode, dev_t rdev,
		    const char *target)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = ll_node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0 && kind == MAKE_NODE)
		rc = OPS->mknod(path, mode, rdev);
	else if (rc == 0 && kind == MAKE_DIR)
		rc = OPS->mkdir(path, mode);
	else if (rc == 0)
		rc = OPS->symlink(target, path);
	made(fs, req, parent, name, path, rc);
	ll_end();
}

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	make_in(req, parent, name, MAKE_NODE, mode, rdev, NULL);
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make_in(req, parent, name, MAKE_DIR, mode, 0, NULL);
}

static void ll_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		       const char *name)
{
	make_in(req, parent, name, MAKE_SYMLINK, 0, 0, target);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char from[LL_PATH_MAX], to[LL_PATH_MAX];
	int rc = ll_node_path(fs, ino, from, sizeof(from));

	if (rc == 0)
		rc = ll_node_child_path(fs, newparent, newname, to, sizeof(to));
	if (rc == 0)
		rc = OPS->link(from, to);
	made(fs, req, newparent, newname, to, rc);
	ll_end();
}

/*
 * A file that loses its name while open keeps serving its descriptors
 * under a hidden name in the same directory until the last closes (then
 * closed() removes it), as libfuse's path API did (SEMANTICS.md).
 *
 * hide() moves name in parent there when it is open. The caller holds
 * fs->hide_lock, so that a last close either happened before (nothing
 * to hide) or sees the hidden name. former is the path the file had
 * (NULL: name's in parent): an open that looked the file up before the
 * change but comes after the last close opens what has that path then,
 * as one that came a moment later would. 1 when hidden, 0 when not open,
 * or a negative errno.
 */
static int hide(struct sbfs *fs, fuse_ino_t parent, const char *name,
		const char *former)
{
	static unsigned counter;
	char path[LL_PATH_MAX], hidden_path[LL_PATH_MAX], hidden[64];
	uint64_t ino = inodes_open_child(fs->inodes, parent, name);
	int rc;

	if (ino == 0)
		return 0;
	snprintf(hidden, sizeof(hidden), ".fuse_hidden%08" PRIx64 "%08x", ino,
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	rc = ll_node_child_path(fs, parent, name, path, sizeof(path));
	if (rc == 0)
		rc = ll_node_child_path(fs, parent, hidden, hidden_path,
					sizeof(hidden_path));
	if (rc == 0)
		rc = OPS->rename(path, hidden_path, RENAME_NOREPLACE);
	if (rc < 0)
		return rc;
	inodes_rename(fs->inodes, parent, name, parent, hidden, false);
	inodes_hide(fs->inodes, ino, former != NULL ? former : path);
	return 1;
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = ll_node_child_path(fs, parent, name, path, sizeof(path));

	ll_names_begin(fs);
	if (rc == 0) {
		pthread_mutex_lock(&fs->hide_lock);
		rc = hide(fs, parent, name, NULL);
		pthread_mutex_unlock(&fs->hide_lock);
		/* Not open, or it could not be hidden: removed at once. */
		if (rc != 1)
			rc = OPS->unlink(path);
		else
			rc = 0;
	}
	if (rc == 0)
		inodes_remove(fs->inodes, parent, name);
	ll_names_end(fs);
	fuse_reply_err(req, -rc);
	ll_end();
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = ll_node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0)
		rc = OPS->rmdir(path);
	if (rc == 0)
		inodes_remove(fs->inodes, parent, name);
	fuse_reply_err(req, -rc);
	ll_end();
}

/*
 * Rename over a name whose file is open. Its descriptors keep it under a
 * hidden name, and the target name must never be missing for anyone else
 * (an atomic replacement stays atomic): the two files swap names in one
 * step (RENAME_EXCHANGE), then the old file leaves the source name for a
 * hidden one. Where the sandbox cannot swap, the old file is hidden
 * first. 1 when done here, 0 when a plain rename should run.
 */
static int rename_over_open(struct sbfs *fs, fuse_ino_t parent,
			    const char *name, fuse_ino_t newparent,
			    const char *newname, const char *from,
			    const char *to)
{
	struct stat st;
	int rc;

	if (inodes_open_child(fs->inodes, newparent, newname) == 0 ||
	    inodes_peek(fs->inodes, parent, name) ==
		    inodes_peek(fs->inodes, newparent, newname))
		return 0;
	/* A directory over a file must fail as a rename does. */
	if (OPS->getattr(from, &st, NULL) < 0 || S_ISDIR(st.st_mode))
		return 0;
	rc = OPS->rename(from, to, RENAME_EXCHANGE);
	if (rc == 0) {
		inodes_rename(fs->inodes, parent, name, newparent, newname,
			      true);
		rc = hide(fs, parent, name, to);
		/* Not hidden: the old file must still leave the source. */
		if (rc != 1 && OPS->unlink(from) == 0)
			inodes_remove(fs->inodes, parent, name);
		return 1;
	}
	(void)hide(fs, newparent, newname, NULL);
	return 0;
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char from[LL_PATH_MAX], to[LL_PATH_MAX];
	int rc = ll_node_child_path(fs, parent, name, from, sizeof(from));

	if (rc == 0)
		rc = ll_node_child_path(fs, newparent, newname, to, sizeof(to));
	ll_names_begin(fs);
	if (rc == 0 && flags == 0) {
		pthread_mutex_lock(&fs->hide_lock);
		rc = rename_over_open(fs, parent, name, newparent, newname,
				      from, to);
		pthread_mutex_unlock(&fs->hide_lock);
	}
	if (rc == 1) {
		rc = 0;
	} else {
		if (rc == 0)
			rc = OPS->rename(from, to, flags);
		if (rc == 0)
			inodes_rename(fs->inodes, parent, name, newparent,
				      newname, (flags & RENAME_EXCHANGE) != 0);
	}
	ll_names_end(fs);
	fuse_reply_err(req, -rc);
	ll_end();
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct statvfs st;
	int rc = ll_node_path(fs, ino, path, sizeof(path));

	memset(&st, 0, sizeof(st));
	if (rc < 0)
		snprintf(path, sizeof(path), "/");
	rc = OPS->statfs(path, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_statfs(req, &st);
	ll_end();
}

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	sbfs_conn_init(userdata, conn);
}

static const struct fuse_lowlevel_ops ll_ops = {
	.init = ll_init,
	.lookup = ll_lookup,
	.forget = ll_forget,
	.forget_multi = ll_forget_multi,
	.getattr = ll_getattr,
	.setattr = ll_setattr,
	.readlink = ll_readlink,
	.mknod = ll_mknod,
	.mkdir = ll_mkdir,
	.unlink = ll_unlink,
	.rmdir = ll_rmdir,
	.symlink = ll_symlink,
	.rename = ll_rename,
	.link = ll_link,
	.open = ll_open,
	.read = ll_read,
	.write = ll_write,
	.flush = ll_flush,
	.release = ll_release,
	.fsync = ll_fsync,
	.opendir = ll_opendir,
	.readdir = ll_readdir,
	.readdirplus = ll_readdirplus,
	.statfs = ll_statfs,
	.create = ll_create,
};

struct fuse_session *sbfs_session_new(struct sbfs *fs, struct fuse_args *args)
{
	fs->se = fuse_session_new(args, &ll_ops, sizeof(ll_ops), fs);
	return fs->se;
}

void sbfs_kernel_changed(struct sbfs *fs, const char *id, const char *rel,
			 unsigned what)
{
	char path[LL_PATH_MAX];
	uint64_t ino, parent;
	const char *name;

	bool known;

	if (fs->se == NULL)
		return;
	snprintf(path, sizeof(path), "/%s/files%s%s", id, *rel ? "/" : "", rel);
	name = strrchr(path, '/') + 1;
	/* -ENOENT from the kernel: it holds nothing of it. */
	known = inodes_find(fs->inodes, path, &ino, &parent) == 0;
	if (known && (what & (SBFS_KERNEL_ATTR | SBFS_KERNEL_DATA)))
		(void)fuse_lowlevel_notify_inval_inode(
			fs->se, ino, (what & SBFS_KERNEL_DATA) ? 0 : -1, 0);
	if (!(what & (SBFS_KERNEL_NAME | SBFS_KERNEL_NEW_NAME)) || *rel == '\0')
		return;
	/* A name that appeared: a negative entry of it must go; a node the
	 * kernel knows by it keeps its entry. */
	if (what & SBFS_KERNEL_NEW_NAME)
		what = known ? what & ~SBFS_KERNEL_NAME
			     : what | SBFS_KERNEL_NAME;
	/* The name (a negative entry too) in its directory, and the
	 * directory's attributes and the listing the kernel keeps. */
	path[name - path - 1] = '\0';
	if (inodes_find(fs->inodes, path, &parent, &ino) == 0) {
		if (what & SBFS_KERNEL_NAME)
			(void)fuse_lowlevel_notify_inval_entry(
				fs->se, parent, name, strlen(name));
		(void)fuse_lowlevel_notify_inval_inode(fs->se, parent, 0, 0);
	}
}

/* The node of files/<rel> in sandbox id: its id and its directory's; 0
 * when the kernel knows none. */
static uint64_t node_of(struct sbfs *fs, const char *id, const char *rel,
			uint64_t *parent, const char **name, char *path,
			size_t size)
{
	uint64_t ino;

	snprintf(path, size, "/%s/files%s%s", id, *rel ? "/" : "", rel);
	*name = strrchr(path, '/') + 1;
	if (*rel == '\0' || inodes_find(fs->inodes, path, &ino, parent) < 0)
		return 0;
	return ino;
}

uint64_t sbfs_nodes_open_fino(struct sbfs *fs, const char *id, const char *rel,
			      int64_t *ctime_ns)
{
	char path[LL_PATH_MAX];
	const char *name;
	uint64_t parent, ino;

	*ctime_ns = 0;
	if (node_of(fs, id, rel, &parent, &name, path, sizeof(path)) == 0)
		return 0;
	return inodes_open_fino(fs->inodes, parent, name, &ino, ctime_ns);
}

void sbfs_nodes_learn(void *ud, const char *id, const char *rel,
		      const struct proto_attr *a)
{
	struct sbfs *fs = ud;
	char path[LL_PATH_MAX];
	const char *name;
	uint64_t parent, ino;

	ino = node_of(fs, id, rel, &parent, &name, path, sizeof(path));
	if (ino != 0)
		inodes_set_fino(fs->inodes, ino, a->ino, sbfs_attr_ctime_ns(a));
}

uint64_t sbfs_names_quiet(struct sbfs *fs)
{
	struct timespec until;
	uint64_t gen;

	clock_deadline_in(&until, 1000);
	pthread_mutex_lock(&fs->names_lock);
	while (fs->names_busy > 0 &&
	       pthread_cond_timedwait(&fs->names_idle, &fs->names_lock,
				      &until) == 0)
		;
	gen = fs->names_gen;
	pthread_mutex_unlock(&fs->names_lock);
	return gen;
}

bool sbfs_names_hold(struct sbfs *fs, uint64_t gen)
{
	pthread_mutex_lock(&fs->names_lock);
	if (fs->names_gen == gen && fs->names_busy == 0)
		return true;
	pthread_mutex_unlock(&fs->names_lock);
	return false;
}

void sbfs_names_release(struct sbfs *fs)
{
	pthread_mutex_unlock(&fs->names_lock);
}

uint64_t sbfs_nodes_vanish(struct sbfs *fs, const char *id, const char *rel)
{
	char path[LL_PATH_MAX];
	const char *name;
	uint64_t parent, ino;

	ino = node_of(fs, id, rel, &parent, &name, path, sizeof(path));
	if (ino != 0)
		inodes_vanish(fs->inodes, parent, name);
	return ino;
}

void sbfs_nodes_vanished(struct sbfs *fs, uint64_t ino)
{
	/* Its pages too: a read served from them would be half of the old
	 * file and then the stale error. */
	if (ino != 0 && fs->se != NULL)
		(void)fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}

void sbfs_nodes_move(struct sbfs *fs, const char *id, const char *from,
		     const char *to)
{
	char fpath[LL_PATH_MAX], tpath[LL_PATH_MAX], tdir[LL_PATH_MAX];
	const char *fname, *tname;
	uint64_t fparent, tparent, unused;

	if (node_of(fs, id, from, &fparent, &fname, fpath, sizeof(fpath)) == 0)
		return;
	snprintf(tpath, sizeof(tpath), "/%s/files%s%s", id, *to ? "/" : "", to);
	tname = strrchr(tpath, '/') + 1;
	snprintf(tdir, sizeof(tdir), "%.*s", (int)(tname - tpath - 1), tpath);
	/* The kernel does not know the new directory: the node goes with
	 * its old name (its open files go stale, as for a removal). */
	if (inodes_find(fs->inodes, tdir, &tparent, &unused) < 0) {
		inodes_vanish(fs->inodes, fparent, fname);
		return;
	}
	inodes_rename(fs->inodes, fparent, fname, tparent, tname, false);
}

void sbfs_kernel_forget(struct sbfs *fs, const char *id, const char *rel)
{
	sbfs_kernel_changed(fs, id, rel, SBFS_KERNEL_ATTR | SBFS_KERNEL_DATA);
}

void sbfs_kernel_forget_sandbox(struct sbfs *fs, const char *id)
{
	char path[LL_PATH_MAX];
	uint64_t files, sbx, *ids;
	size_t i, n, max;

	if (fs->se == NULL)
		return;
	snprintf(path, sizeof(path), "/%s/files", id);
	if (inodes_find(fs->inodes, path, &files, &sbx) < 0)
		return;
	/* Every node below files/ (their attributes and pages: open files
	 * keep their nodes), then the names, all at once. */
	max = inodes_count(fs->inodes) + 64;
	ids = xmalloc(max * sizeof(*ids));
	n = inodes_below(fs->inodes, path, ids, max);
	for (i = 0; i < n; i++)
		(void)fuse_lowlevel_notify_inval_inode(fs->se, ids[i], 0, 0);
	free(ids);
	(void)fuse_lowlevel_notify_inval_inode(fs->se, files, 0, 0);
	(void)fuse_lowlevel_notify_inval_entry(fs->se, sbx, "files", 5);
}
