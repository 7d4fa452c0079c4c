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
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs.h"
#include "fs/fs_i.h"
#include "fs/inodes.h"

/* A mount path: "/<id>/files" and a sandbox path, with room to spare. */
#define LL_PATH_MAX (PATH_MAX_BYTES + PROVIDER_ID_MAX + 64)

/* readdir's d_ino for a name the kernel has no node of (libfuse's). */
#define LL_UNKNOWN_INO 0xffffffffu

/* ---- the request of this thread --------------------------------------- */

struct ll_req {
	fuse_req_t req;
	struct sbfs *fs;
	pid_t pid;
};

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

static struct sbfs *begin(fuse_req_t req, struct ll_req *r)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	r->req = req;
	r->fs = fuse_req_userdata(req);
	r->pid = ctx != NULL ? ctx->pid : 0;
	cur = r;
	return r->fs;
}

static void end(void)
{
	cur = NULL;
}

#define OPS (fs_operations())

/* ---- open files and directories --------------------------------------- */

/*
 * What the kernel holds as a file handle: the module's own handle and the
 * path the file was opened under, which routes a release when the name is
 * gone (a file whose name was removed by someone else).
 */
struct llfile {
	uint64_t fh;
	char *path;
};

struct dent {
	char *name;
	struct stat st;
	bool plus;
};

struct lldir {
	struct llfile f;
	pthread_mutex_t lock;
	struct dent *e;
	size_t n, cap;
	bool filled;
	uint64_t mark; /* the cache's mark when listed */
};

/* The module's view of an open file: fi with the module's handle. */
static struct fuse_file_info inner(const struct fuse_file_info *fi)
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
static int node_path(struct sbfs *fs, fuse_ino_t ino, char *buf, size_t size)
{
	int rc = inodes_path_flags(fs->inodes, ino, INODES_DETACHED_OK, buf,
				   size);

	return rc == -ENOENT ? -ESTALE : rc;
}

/* A name in parent, for a lookup or a change: parent must still have its
 * own name. ESTALE makes the kernel walk the path again, as for NFS. */
static int node_child_path(struct sbfs *fs, fuse_ino_t parent, const char *name,
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
static int file_path(struct sbfs *fs, fuse_ino_t ino,
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

/* ---- entries ------------------------------------------------------------- */

static void entry_times(struct sbfs *fs, const char *path, uint64_t mark,
			struct fuse_entry_param *e)
{
	double neg;

	sbfs_timeouts(fs, path, mark, &e->entry_timeout, &e->attr_timeout,
		      &neg);
}

/*
 * The entry of path (name in parent) after a lookup or a change that made
 * it: attributes from the module, and one counted lookup.
 */
static int make_entry(struct sbfs *fs, fuse_ino_t parent, const char *name,
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
	e->attr.st_ino = ino;
	entry_times(fs, path, mark, e);
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
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_entry_param e;
	uint64_t mark = cache_mark(fs->cache);
	double neg = 0, t;
	int rc = node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0)
		rc = make_entry(fs, parent, name, path, NULL, &e);
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
	end();
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

static void ll_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char buf[LL_PATH_MAX];
	struct fuse_file_info f;
	struct stat st;
	const char *path = buf;
	uint64_t mark = cache_mark(fs->cache);
	int rc = 0;

	if (fi != NULL) {
		f = inner(fi);
		rc = file_path(fs, ino, fi, buf, sizeof(buf));
	} else {
		rc = node_path(fs, ino, buf, sizeof(buf));
	}
	memset(&st, 0, sizeof(st));
	if (rc == 0)
		rc = OPS->getattr(path, &st, fi != NULL ? &f : NULL);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		st.st_ino = ino;
		fuse_reply_attr(req, &st, attr_time(fs, path, mark));
	}
	end();
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char buf[LL_PATH_MAX];
	struct fuse_file_info f, *fp = NULL;
	const char *path = buf;
	struct stat st;
	uint64_t mark = cache_mark(fs->cache);
	int rc = 0;

	if (fi != NULL) {
		f = inner(fi);
		fp = &f;
		rc = file_path(fs, ino, fi, buf, sizeof(buf));
	} else {
		rc = node_path(fs, ino, buf, sizeof(buf));
	}
	/* In the order of chmod(1), chown(1), truncate(1) and touch(1),
	 * as libfuse's path API did. */
	if (rc == 0 && (to_set & FUSE_SET_ATTR_MODE))
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
		rc = OPS->utimens(path, tv, fp);
	}
	memset(&st, 0, sizeof(st));
	if (rc == 0)
		rc = OPS->getattr(path, &st, fp);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		st.st_ino = ino;
		fuse_reply_attr(req, &st, attr_time(fs, path, mark));
	}
	end();
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX], target[PATH_MAX_BYTES + 1];
	int rc = node_path(fs, ino, path, sizeof(path));

	if (rc == 0)
		rc = OPS->readlink(path, target, sizeof(target));
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
	end();
}

/* After a change that made name in parent: answer its entry. */
static void made(struct sbfs *fs, fuse_req_t req, fuse_ino_t parent,
		 const char *name, const char *path, int rc)
{
	struct fuse_entry_param e;

	if (rc == 0)
		rc = make_entry(fs, parent, name, path, NULL, &e);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_entry(fs, req, &e);
}

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0)
		rc = OPS->mknod(path, mode, rdev);
	made(fs, req, parent, name, path, rc);
	end();
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0)
		rc = OPS->mkdir(path, mode);
	made(fs, req, parent, name, path, rc);
	end();
}

static void ll_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		       const char *name)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0)
		rc = OPS->symlink(target, path);
	made(fs, req, parent, name, path, rc);
	end();
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char from[LL_PATH_MAX], to[LL_PATH_MAX];
	int rc = node_path(fs, ino, from, sizeof(from));

	if (rc == 0)
		rc = node_child_path(fs, newparent, newname, to, sizeof(to));
	if (rc == 0)
		rc = OPS->link(from, to);
	made(fs, req, newparent, newname, to, rc);
	end();
}

/*
 * A file that loses its name while open keeps serving its descriptors
 * under a hidden name in the same directory until the last closes (then
 * closed() removes it), as libfuse's path API did (SEMANTICS.md).
 *
 * hide() moves name in parent there when it is open. The caller holds
 * fs->hide_lock, so that a last close either happened before (nothing
 * to hide) or sees the hidden name. 1 when hidden, 0 when not open, or a
 * negative errno.
 */
static int hide(struct sbfs *fs, fuse_ino_t parent, const char *name)
{
	static unsigned counter;
	char path[LL_PATH_MAX], hidden_path[LL_PATH_MAX], hidden[64];
	uint64_t ino = inodes_open_child(fs->inodes, parent, name);
	int rc;

	if (ino == 0)
		return 0;
	snprintf(hidden, sizeof(hidden), ".fuse_hidden%08" PRIx64 "%08x", ino,
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	rc = node_child_path(fs, parent, name, path, sizeof(path));
	if (rc == 0)
		rc = node_child_path(fs, parent, hidden, hidden_path,
				     sizeof(hidden_path));
	if (rc == 0)
		rc = OPS->rename(path, hidden_path, RENAME_NOREPLACE);
	if (rc < 0)
		return rc;
	inodes_rename(fs->inodes, parent, name, parent, hidden, false);
	inodes_hide(fs->inodes, ino);
	return 1;
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0) {
		pthread_mutex_lock(&fs->hide_lock);
		rc = hide(fs, parent, name);
		pthread_mutex_unlock(&fs->hide_lock);
		/* Not open, or it could not be hidden: removed at once. */
		if (rc != 1)
			rc = OPS->unlink(path);
		else
			rc = 0;
	}
	if (rc == 0)
		inodes_remove(fs->inodes, parent, name);
	fuse_reply_err(req, -rc);
	end();
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	int rc = node_child_path(fs, parent, name, path, sizeof(path));

	if (rc == 0)
		rc = OPS->rmdir(path);
	if (rc == 0)
		inodes_remove(fs->inodes, parent, name);
	fuse_reply_err(req, -rc);
	end();
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
		rc = hide(fs, parent, name);
		/* Not hidden: the old file must still leave the source. */
		if (rc != 1 && OPS->unlink(from) == 0)
			inodes_remove(fs->inodes, parent, name);
		return 1;
	}
	(void)hide(fs, newparent, newname);
	return 0;
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char from[LL_PATH_MAX], to[LL_PATH_MAX];
	int rc = node_child_path(fs, parent, name, from, sizeof(from));

	if (rc == 0)
		rc = node_child_path(fs, newparent, newname, to, sizeof(to));
	if (rc == 0 && flags == 0) {
		pthread_mutex_lock(&fs->hide_lock);
		rc = rename_over_open(fs, parent, name, newparent, newname,
				      from, to);
		pthread_mutex_unlock(&fs->hide_lock);
		if (rc == 1) {
			fuse_reply_err(req, 0);
			end();
			return;
		}
	}
	if (rc == 0)
		rc = OPS->rename(from, to, flags);
	if (rc == 0)
		inodes_rename(fs->inodes, parent, name, newparent, newname,
			      (flags & RENAME_EXCHANGE) != 0);
	fuse_reply_err(req, -rc);
	end();
}

static struct llfile *file_new(uint64_t fh, const char *path)
{
	struct llfile *f = xcalloc(1, sizeof(*f));

	f->fh = fh;
	f->path = xstrdup(path);
	return f;
}

/* What the module said of an open file, for the kernel. */
static void open_flags(struct fuse_file_info *fi,
		       const struct fuse_file_info *f)
{
	fi->direct_io = f->direct_io;
	fi->keep_cache = f->keep_cache;
	fi->nonseekable = f->nonseekable;
	fi->cache_readdir = f->cache_readdir;
	fi->noflush = f->noflush;
}

/* The last close of ino: a hidden name goes now. */
static void closed(struct sbfs *fs, fuse_ino_t ino)
{
	char path[LL_PATH_MAX];
	uint64_t parent;

	pthread_mutex_lock(&fs->hide_lock);
	if (inodes_close(fs->inodes, ino, path, sizeof(path), &parent) &&
	    OPS->unlink(path) == 0 && fs->se != NULL)
		/* The kernel did not see this unlink: its listing of the
		 * directory (kept across readers) must go. */
		(void)fuse_lowlevel_notify_inval_inode(fs->se, parent, 0, 0);
	pthread_mutex_unlock(&fs->hide_lock);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f = *fi;
	struct llfile *lf;
	int rc;

	f.fh = 0;
	/* Counted open before its path is taken: a rename over the file
	 * from now on hides it, and a last close does not remove what is
	 * being opened. */
	inodes_open(fs->inodes, ino);
	/* A file that lost its name while open (hidden) is only for the
	 * descriptors it had: ESTALE makes the kernel walk the path again
	 * and open what has the name now. */
	rc = inodes_path_flags(fs->inodes, ino,
			       INODES_DETACHED_OK | INODES_NOT_HIDDEN, path,
			       sizeof(path));
	if (rc == -ENOENT)
		rc = -ESTALE;
	if (rc == 0)
		rc = OPS->open(path, &f);
	if (rc < 0) {
		closed(fs, ino);
		fuse_reply_err(req, -rc);
		end();
		return;
	}
	lf = file_new(f.fh, path);
	open_flags(fi, &f);
	fi->fh = (uint64_t)(uintptr_t)lf;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* The open was interrupted: nobody holds the file. */
		(void)OPS->release(path, &f);
		closed(fs, ino);
		free(lf->path);
		free(lf);
	}
	end();
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f = *fi;
	struct fuse_entry_param e;
	struct llfile *lf;
	int rc = node_child_path(fs, parent, name, path, sizeof(path));

	f.fh = 0;
	if (rc == 0)
		rc = OPS->create(path, mode, &f);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		end();
		return;
	}
	rc = make_entry(fs, parent, name, path, &f, &e);
	if (rc < 0) {
		(void)OPS->release(path, &f);
		fuse_reply_err(req, -rc);
		end();
		return;
	}
	lf = file_new(f.fh, path);
	open_flags(fi, &f);
	fi->fh = (uint64_t)(uintptr_t)lf;
	inodes_open(fs->inodes, e.ino);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		(void)OPS->release(path, &f);
		closed(fs, e.ino);
		inodes_forget(fs->inodes, e.ino, 1);
		free(lf->path);
		free(lf);
	}
	end();
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char buf[LL_PATH_MAX];
	struct fuse_file_info f = inner(fi);
	char *data = malloc(size > 0 ? size : 1);
	int rc = file_path(fs, ino, fi, buf, sizeof(buf));

	if (data == NULL) {
		fuse_reply_err(req, ENOMEM);
		end();
		return;
	}
	if (rc == 0)
		rc = OPS->read(buf, data, size, off, &f);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, data, (size_t)rc);
	free(data);
	end();
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *data,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char buf[LL_PATH_MAX];
	struct fuse_file_info f = inner(fi);
	int rc = file_path(fs, ino, fi, buf, sizeof(buf));

	if (rc == 0)
		rc = OPS->write(buf, data, size, off, &f);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, (size_t)rc);
	end();
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char buf[LL_PATH_MAX];
	struct fuse_file_info f = inner(fi);
	int rc = file_path(fs, ino, fi, buf, sizeof(buf));

	if (rc == 0)
		rc = OPS->flush(buf, &f);
	fuse_reply_err(req, -rc);
	end();
}

static void ll_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char buf[LL_PATH_MAX];
	struct llfile *lf = (struct llfile *)(uintptr_t)fi->fh;
	struct fuse_file_info f = inner(fi);
	const char *path = (file_path(fs, ino, fi, buf, sizeof(buf)), buf);

	(void)OPS->release(path, &f);
	closed(fs, ino);
	free(lf->path);
	free(lf);
	fuse_reply_err(req, 0);
	end();
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char buf[LL_PATH_MAX];
	struct fuse_file_info f = inner(fi);
	int rc = file_path(fs, ino, fi, buf, sizeof(buf));

	if (rc == 0)
		rc = OPS->fsync(buf, datasync, &f);
	fuse_reply_err(req, -rc);
	end();
}

/* ---- directories ---------------------------------------------------------- */

static int dir_fill(void *buf, const char *name, const struct stat *st,
		    off_t off, enum fuse_fill_dir_flags flags)
{
	struct lldir *d = buf;
	struct dent *e;

	(void)off;
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 64;
		d->e = xrealloc(d->e, d->cap * sizeof(*d->e));
	}
	e = &d->e[d->n++];
	e->name = xstrdup(name);
	e->plus = st != NULL && (flags & FUSE_FILL_DIR_PLUS);
	if (st != NULL)
		e->st = *st;
	else
		memset(&e->st, 0, sizeof(e->st));
	return 0;
}

static void dir_clear(struct lldir *d)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		free(d->e[i].name);
	d->n = 0;
	d->filled = false;
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f = *fi;
	struct lldir *d;
	int rc = node_path(fs, ino, path, sizeof(path));

	f.fh = 0;
	if (rc == 0)
		rc = OPS->opendir(path, &f);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		end();
		return;
	}
	d = xcalloc(1, sizeof(*d));
	d->f.fh = f.fh;
	d->f.path = xstrdup(path);
	pthread_mutex_init(&d->lock, NULL);
	open_flags(fi, &f);
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		(void)OPS->releasedir(path, &f);
		pthread_mutex_destroy(&d->lock);
		free(d->f.path);
		free(d);
	}
	end();
}

/* Add entries from k on into buf: plain dirents, or with plus the entries
 * the kernel makes dentries of (each one a counted lookup). The size. */
static size_t dir_answer(struct sbfs *fs, fuse_req_t req, fuse_ino_t ino,
			 const char *path, struct lldir *d, size_t k, bool plus,
			 char *buf, size_t size)
{
	uint64_t mark = d->mark;
	size_t used = 0;

	for (; k < d->n; k++) {
		struct dent *de = &d->e[k];
		bool dots = strcmp(de->name, ".") == 0 ||
			    strcmp(de->name, "..") == 0;
		size_t need;

		if (!plus) {
			struct stat st = de->st;
			uint64_t known =
				dots ? 0
				     : inodes_peek(fs->inodes, ino, de->name);

			st.st_ino = known != 0 ? known : LL_UNKNOWN_INO;
			need = fuse_add_direntry(req, buf + used, size - used,
						 de->name, &st, (off_t)k + 1);
		} else {
			struct fuse_entry_param e;
			char child[LL_PATH_MAX];

			memset(&e, 0, sizeof(e));
			e.attr = de->st;
			need = fuse_add_direntry_plus(req, NULL, 0, de->name,
						      NULL, 0);
			if (need > size - used)
				break;
			/* "." and "..", and a name without attributes, make
			 * no dentry: node id 0 (and no lookup counted). */
			if (de->plus && !dots &&
			    node_child_path(fs, ino, de->name, child,
					    sizeof(child)) == 0 &&
			    inodes_lookup(fs->inodes, ino, de->name, &e.ino) ==
				    0) {
				e.attr.st_ino = e.ino;
				entry_times(fs, child, mark, &e);
			} else {
				e.attr.st_ino = LL_UNKNOWN_INO;
			}
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, de->name, &e,
						      (off_t)k + 1);
		}
		if (need > size - used)
			break;
		used += need;
	}
	(void)path;
	return used;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi, bool plus)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	struct lldir *d = (struct lldir *)(uintptr_t)fi->fh;
	struct fuse_file_info f = inner(fi);
	char path[LL_PATH_MAX];
	char *buf;
	size_t used;
	int rc = file_path(fs, ino, fi, path, sizeof(path));

	buf = malloc(size > 0 ? size : 1);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		end();
		return;
	}
	pthread_mutex_lock(&d->lock);
	/* A reader starting over (or seeking past the end) lists again. */
	if (rc == 0 && (off == 0 || !d->filled || (size_t)off > d->n)) {
		dir_clear(d);
		d->mark = cache_mark(fs->cache);
		rc = OPS->readdir(path, d, dir_fill, 0, &f,
				  plus ? FUSE_READDIR_PLUS : 0);
		d->filled = rc == 0;
		if ((size_t)off > d->n)
			off = (off_t)d->n;
	}
	if (rc < 0) {
		pthread_mutex_unlock(&d->lock);
		fuse_reply_err(req, -rc);
	} else {
		used = dir_answer(fs, req, ino, path, d, (size_t)off, plus, buf,
				  size);
		pthread_mutex_unlock(&d->lock);
		/* An answer nobody waits for leaks the lookups of its
		 * entries, as libfuse's path API does: the kernel gets the
		 * same names again at its next lookup. */
		fuse_reply_buf(req, buf, used);
	}
	free(buf);
	end();
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	struct lldir *d = (struct lldir *)(uintptr_t)fi->fh;
	struct fuse_file_info f = inner(fi);
	char pbuf[LL_PATH_MAX];
	const char *path = (file_path(fs, ino, fi, pbuf, sizeof(pbuf)), pbuf);

	(void)OPS->releasedir(path, &f);
	dir_clear(d);
	free(d->e);
	pthread_mutex_destroy(&d->lock);
	free(d->f.path);
	free(d);
	fuse_reply_err(req, 0);
	end();
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ll_req r;
	struct sbfs *fs = begin(req, &r);
	char path[LL_PATH_MAX];
	struct statvfs st;
	int rc = node_path(fs, ino, path, sizeof(path));

	memset(&st, 0, sizeof(st));
	if (rc < 0)
		snprintf(path, sizeof(path), "/");
	rc = OPS->statfs(path, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_statfs(req, &st);
	end();
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
	.releasedir = ll_releasedir,
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
	if ((what & SBFS_KERNEL_NEW_NAME) && known)
		what &= ~SBFS_KERNEL_NAME;
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
