/* SPDX-License-Identifier: MIT */
/*
 * ll_files: the open files of the low-level API (ll_i.h): the handle the
 * kernel holds wraps the module's own and the path the file was opened
 * under; the last close removes a hidden name. Directories are in
 * ll_dirs.c.
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

/*
 * Open node ino in the module (its open counted already): its path in
 * path, the module's view in *f. A file hidden (renamed over, or removed,
 * while open) after the kernel looked it up is opened under its hidden
 * name: the open came before the change. One gone for good is ESTALE:
 * the kernel walks the path again.
 */
static int open_node(struct sbfs *fs, fuse_ino_t ino,
		     const struct fuse_file_info *fi, struct fuse_file_info *f,
		     char *path, size_t size)
{
	struct ll_moved m;
	int rc;

	ll_moved_init(fs, &m);
	for (;;) {
		*f = *fi;
		f->fh = 0;
		rc = ll_node_path(fs, ino, path, size);
		if (rc == 0)
			rc = OPS->open(path, f);
		if (ll_moved_again(fs, &m, rc))
			continue;
		/* Opened by a name the file left meanwhile, the file that
		 * has it now may be another (an atomic save's next
		 * temporary): opened again under the file's name now. A
		 * truncating open is not made twice. */
		if (rc < 0 || (fi->flags & O_TRUNC) ||
		    !ll_moved_off(fs, &m, ino, NULL, path))
			return rc;
		(void)OPS->release(path, f);
	}
}

/* The kernel's handle of a file the module opened (as *f) by path. */
static struct llfile *hand_over(struct fuse_file_info *fi,
				const struct fuse_file_info *f,
				const char *path)
{
	struct llfile *lf = file_new(f->fh, path);

	open_flags(fi, f);
	fi->fh = (uint64_t)(uintptr_t)lf;
	return lf;
}

/* An open whose answer nobody waited for (interrupted): nobody holds the
 * file. */
static void drop_open(struct sbfs *fs, fuse_ino_t ino, const char *path,
		      struct fuse_file_info *f, struct llfile *lf)
{
	(void)OPS->release(path, f);
	closed(fs, ino);
	free(lf->path);
	free(lf);
}

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f;
	struct llfile *lf;
	int rc;

	/* Counted open before its path is taken: a rename over the file
	 * from now on hides it, and a last close does not remove what is
	 * being opened. */
	inodes_open(fs->inodes, ino);
	rc = open_node(fs, ino, fi, &f, path, sizeof(path));
	if (rc < 0) {
		closed(fs, ino);
		fuse_reply_err(req, -rc);
	} else {
		lf = hand_over(fi, &f, path);
		if (fuse_reply_open(req, fi) == -ENOENT)
			drop_open(fs, ino, path, &f, lf);
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
	if (rc == 0) {
		rc = ll_make_entry(fs, parent, name, path, &f, &e);
		if (rc < 0)
			(void)OPS->release(path, &f);
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		lf = hand_over(fi, &f, path);
		inodes_open(fs->inodes, e.ino);
		if (fuse_reply_create(req, &e, fi) == -ENOENT) {
			drop_open(fs, e.ino, path, &f, lf);
			inodes_forget(fs->inodes, e.ino, 1);
		}
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
	} while (ll_moved_again(fs, &m, rc) ||
		 /* Bytes read by a path the file left meanwhile may be
		  * another file's: read again. */
		 (io->op == IO_READ && rc >= 0 &&
		  ll_moved_off(fs, &m, ino, fi, path)));
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
		uint64_t dir = inodes_stale_attr(fs->inodes, ino);

		fuse_reply_buf(req, io.in, (size_t)rc);
		/* The kernel lists the directory again instead of asking
		 * for each file's attributes (inodes_stale_attr). */
		if (dir != 0 && fs->se != NULL)
			(void)fuse_lowlevel_notify_inval_inode(fs->se, dir, 0,
							       0);
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
