/* SPDX-License-Identifier: MIT */
/*
 * ll_dirs: directories of the low-level API (ll_i.h), without handles.
 * The first OPENDIR is answered ENOSYS (after the module said the
 * directory can be opened): the kernel then opens every directory itself,
 * keeps each one's entries across readers (doc/internals/cache.md,
 * "Directories without handles"), and sends no OPENDIR or RELEASEDIR
 * again, two round trips per directory fewer on every walk. A listing
 * from offset 0 is a snapshot in the mount's table (dirsnap.h) that the
 * next pages come from; the directories whose entries change without the
 * kernel seeing it (the mount's root, jobs/) are made to be listed again
 * by each reader.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/cache.h"
#include "fs/dirsnap.h"
#include "fs/fs.h"
#include "fs/fs_i.h"
#include "fs/inodes.h"
#include "fs/ll_i.h"

/* readdir's d_ino for a name the kernel has no node of (libfuse's). */
#define LL_UNKNOWN_INO 0xffffffffu

void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct fuse_file_info f = *fi;
	int rc = ll_node_path(fs, ino, path, sizeof(path));

	f.fh = 0;
	if (rc == 0)
		rc = OPS->opendir(path, &f);
	/* ENOSYS: the kernel opens this one and every directory after it
	 * without asking. */
	fuse_reply_err(req, rc < 0 ? -rc : ENOSYS);
	ll_end();
}

static int dir_fill(void *buf, const char *name, const struct stat *st,
		    off_t off, enum fuse_fill_dir_flags flags)
{
	(void)off;
	dirsnap_add(buf, name, st, (flags & FUSE_FILL_DIR_PLUS) != 0);
	return 0;
}

/* A new listing of ino (at path) in the mount's table, held; or -errno. */
static int dir_list(struct sbfs *fs, fuse_ino_t ino, const char *path,
		    bool plus, bool whole, struct dirsnap **out)
{
	struct fuse_file_info f;
	struct dirsnap *s = dirsnap_begin(ino, cache_mark(fs->cache));
	int rc;

	/* Its entries come with their attributes: what the kernel
	 * dropped after reads of them comes back (inodes_stale_attr). */
	if (plus && whole)
		inodes_relisted(fs->inodes, ino);
	memset(&f, 0, sizeof(f));
	rc = OPS->readdir(path, s, dir_fill, 0, &f,
			  plus ? FUSE_READDIR_PLUS : 0);
	if (rc < 0) {
		dirsnap_drop(s);
		return rc;
	}
	dirsnaps_publish(fs->dirs, s);
	*out = s;
	return 0;
}

/* Add the entries of s from k on into buf: plain dirents, or with plus
 * the entries the kernel makes dentries of (each one a counted lookup).
 * The size. */
static size_t dir_answer(struct sbfs *fs, fuse_req_t req, fuse_ino_t ino,
			 const struct dirsnap *s, size_t k, bool plus,
			 char *buf, size_t size)
{
	size_t used = 0;

	for (; k < s->n; k++) {
		const struct dirsnap_entry *de = &s->e[k];
		off_t next = (off_t)dirsnap_off(s, k);
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
						 de->name, &st, next);
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
						e.attr.st_ino,
						ll_ctime_ns(&e.attr));
				e.attr.st_ino = e.ino;
				ll_entry_times(fs, child, s->mark, &e);
			} else {
				e.attr.st_ino = LL_UNKNOWN_INO;
			}
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, de->name, &e,
						      next);
		}
		if (need > size - used)
			break;
		used += need;
	}
	return used;
}

/* The kernel keeps what it was given of a directory until told its
 * entries changed. Those of files/ it is told of (events, this mount's own
 * changes, or their modification time after attr_timeout); the mount's
 * other directories change by what the daemon alone sees (a sandbox made,
 * a job started elsewhere): once a reader got to the end, what it was
 * given goes, and the next reader lists again. */
static void dir_ended(struct sbfs *fs, fuse_ino_t ino, const char *path)
{
	struct fuse_file_info f;

	memset(&f, 0, sizeof(f));
	if (fs->se != NULL && OPS->opendir(path, &f) == 0 && !f.cache_readdir)
		(void)fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, bool plus)
{
	struct ll_req r;
	struct sbfs *fs = ll_begin(req, &r);
	char path[LL_PATH_MAX];
	struct dirsnap *s = NULL;
	uint32_t gen;
	size_t next, used = 0;
	char *buf = malloc(size > 0 ? size : 1);
	int rc = buf != NULL ? ll_node_path(fs, ino, path, sizeof(path))
			     : -ENOMEM;

	dirsnap_parse((uint64_t)off, &gen, &next);
	if (rc == 0) {
		/* A reader that comes back gets the rest of its snapshot;
		 * one whose snapshot went, a new listing from the same
		 * index on (what changed meanwhile may show twice or not
		 * at all, as POSIX allows for a directory that changes). */
		s = dirsnaps_get(fs->dirs, ino, gen);
		if (s == NULL)
			rc = dir_list(fs, ino, path, plus, next == 0, &s);
	}
	if (rc < 0 || s == NULL) {
		fuse_reply_err(req, rc < 0 ? -rc : EIO);
	} else {
		if (next > s->n)
			next = s->n;
		used = dir_answer(fs, req, ino, s, next, plus, buf, size);
		/* An answer nobody waits for leaks the lookups of its
		 * entries, as libfuse's path API does: the kernel gets the
		 * same names again at its next lookup. */
		fuse_reply_buf(req, buf, used);
		dirsnaps_put(fs->dirs, s, used == 0);
		if (used == 0)
			dir_ended(fs, ino, path);
	}
	free(buf);
	ll_end();
}

void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, false);
}

void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, true);
}
