/* SPDX-License-Identifier: MIT */
/*
 * ll_files: the open files and directory streams of the low-level API
 * (ll_i.h): the handle the kernel holds wraps the module's own and the
 * path the file was opened under; the last close removes a hidden name;
 * a directory is listed once per reader, at offset 0, and served from
 * that snapshot at increasing offsets.
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
#include "fs/ll_i.h"

/* readdir's d_ino for a name the kernel has no node of (libfuse's). */
#define LL_UNKNOWN_INO 0xffffffffu

/* ---- open files ------------------------------------------------------------ */

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

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f = *fi;
	struct ll_moved m;
	struct llfile *lf;
	int rc;

	f.fh = 0;
	/* Counted open before its path is taken: a rename over the file
	 * from now on hides it, and a last close does not remove what is
	 * being opened. */
	inodes_open(fs->inodes, ino);
	ll_moved_init(fs, &m);
	do {
		/* A file that lost its name while open (hidden) is only for
		 * the descriptors it had: ESTALE makes the kernel walk the
		 * path again and open what has the name now. */
		rc = inodes_path_flags(fs->inodes, ino,
				       INODES_DETACHED_OK | INODES_NOT_HIDDEN,
				       path, sizeof(path));
		if (rc == -ENOENT)
			rc = -ESTALE;
		if (rc == 0)
			rc = OPS->open(path, &f);
	} while (ll_moved_again(fs, &m, rc));
	if (rc < 0) {
		closed(fs, ino);
		fuse_reply_err(req, -rc);
		ll_end();
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
	ll_end();
}

void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f = *fi;
	struct fuse_entry_param e;
	struct llfile *lf;
	int rc = ll_node_child_path(fs, parent, name, path, sizeof(path));

	f.fh = 0;
	if (rc == 0)
		rc = OPS->create(path, mode, &f);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		ll_end();
		return;
	}
	rc = ll_make_entry(fs, parent, name, path, &f, &e);
	if (rc < 0) {
		(void)OPS->release(path, &f);
		fuse_reply_err(req, -rc);
		ll_end();
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
	ll_end();
}

/* One I/O of an open file, by its path. */
enum io_op { IO_READ, IO_WRITE, IO_FLUSH, IO_FSYNC };
struct io {
	enum io_op op;
	char *in; /* read */
	const char *out; /* write */
	size_t size;
	off_t off;
	int datasync;
};

/* io on the open file ino: the bytes read or written, 0, or -errno;
 * asked again under the file's new name when a rename moved it
 * meanwhile (ll_moved_again). */
static int file_io(struct sbfs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		   const struct io *io)
{
	struct fuse_file_info f = ll_inner(fi);
	char path[LL_PATH_MAX];
	struct ll_moved m;
	int rc;

	ll_moved_init(fs, &m);
	do {
		rc = ll_file_path(fs, ino, fi, path, sizeof(path));
		if (rc < 0)
			continue;
		switch (io->op) {
		case IO_READ:
			rc = OPS->read(path, io->in, io->size, io->off, &f);
			break;
		case IO_WRITE:
			rc = OPS->write(path, io->out, io->size, io->off, &f);
			break;
		case IO_FLUSH:
			rc = OPS->flush(path, &f);
			break;
		case IO_FSYNC:
			rc = OPS->fsync(path, io->datasync, &f);
			break;
		}
	} while (ll_moved_again(fs, &m, rc));
	return rc;
}

void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	struct io io = {IO_READ, malloc(size > 0 ? size : 1), NULL, size, off,
			0};
	int rc = io.in != NULL ? file_io(fs, ino, fi, &io) : -ENOMEM;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		inodes_stale_attr(fs->inodes, ino);
		fuse_reply_buf(req, io.in, (size_t)rc);
	}
	free(io.in);
	ll_end();
}

void ll_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size,
	      off_t off, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	struct io io = {IO_WRITE, NULL, data, size, off, 0};
	int rc = file_io(fs, ino, fi, &io);

	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, (size_t)rc);
	ll_end();
}

void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	struct io io = {IO_FLUSH, NULL, NULL, 0, 0, 0};

	fuse_reply_err(req, -file_io(fs, ino, fi, &io));
	ll_end();
}

void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char buf[LL_PATH_MAX];
	struct llfile *lf = (struct llfile *)(uintptr_t)fi->fh;
	struct fuse_file_info f = ll_inner(fi);
	const char *path = ll_release_path(fs, ino, fi, buf, sizeof(buf));

	(void)OPS->release(path, &f);
	closed(fs, ino);
	free(lf->path);
	free(lf);
	fuse_reply_err(req, 0);
	ll_end();
}

void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	struct io io = {IO_FSYNC, NULL, NULL, 0, 0, datasync};

	fuse_reply_err(req, -file_io(fs, ino, fi, &io));
	ll_end();
}

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

void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f = *fi;
	struct lldir *d;
	int rc = ll_node_path(fs, ino, path, sizeof(path));

	f.fh = 0;
	if (rc == 0)
		rc = OPS->opendir(path, &f);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		ll_end();
		return;
	}
	/* A kept listing the kernel would serve without asking leaves the
	 * attributes it dropped after reads of the entries (access time)
	 * to one getattr each; listed again, they come back with it. */
	if (f.cache_readdir && inodes_relist(fs->inodes, ino, false))
		f.cache_readdir = 0;
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
	ll_end();
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
			    ll_node_child_path(fs, ino, de->name, child,
					       sizeof(child)) == 0 &&
			    inodes_lookup(fs->inodes, ino, de->name, &e.ino) ==
				    0) {
				inodes_set_fino(fs->inodes, e.ino,
						e.attr.st_ino);
				e.attr.st_ino = e.ino;
				ll_entry_times(fs, child, mark, &e);
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
	struct sbfs *fs = ll_begin(req, &r);
	struct lldir *d = (struct lldir *)(uintptr_t)fi->fh;
	struct fuse_file_info f = ll_inner(fi);
	char path[LL_PATH_MAX];
	char *buf;
	size_t used;
	int rc = ll_file_path(fs, ino, fi, path, sizeof(path));

	buf = malloc(size > 0 ? size : 1);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		ll_end();
		return;
	}
	pthread_mutex_lock(&d->lock);
	/* A reader starting over (or seeking past the end) lists again. */
	if (rc == 0 && (off == 0 || !d->filled || (size_t)off > d->n)) {
		dir_clear(d);
		d->mark = cache_mark(fs->cache);
		if (plus && off == 0)
			(void)inodes_relist(fs->inodes, ino, true);
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
	ll_end();
}

void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	struct lldir *d = (struct lldir *)(uintptr_t)fi->fh;
	struct fuse_file_info f = ll_inner(fi);
	char pbuf[LL_PATH_MAX];
	const char *path = ll_release_path(fs, ino, fi, pbuf, sizeof(pbuf));

	(void)OPS->releasedir(path, &f);
	dir_clear(d);
	free(d->e);
	pthread_mutex_destroy(&d->lock);
	free(d->f.path);
	free(d);
	fuse_reply_err(req, 0);
	ll_end();
}
