/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1: MOUNT/<sandbox>/files/ without the file extension, in two
 * modes (doc/protocol-v1.md, SEMANTICS.md):
 *
 *  - agent sessions whose agent speaks strict protocol v1: listings and
 *    attributes come from `find -printf` run through /v1/exec (argv, no
 *    shell); contents are read and written whole with /v1/files into a
 *    per-open buffer (32 MiB at most); mkdir uses /v1/mkdir; every other
 *    change runs a coreutils command (rm, rmdir, mv, ln, chmod, truncate,
 *    touch) through /v1/exec;
 *  - native (legacy) sessions: the provider's native_read and native_exec
 *    (a shell command line running the same find). Native sessions are
 *    read-only here: every change is EROFS.
 *
 * A failed command's errno is recovered from its diagnostics by matching
 * strerror() texts (fs_files_v1_i.h). Commands are never retried: exec is
 * not idempotent, and an outcome the transport cannot know is EIO.
 *
 * Attributes a listing or stat returned are kept in the mount's cache for
 * the attribute timeout, so `ls -l` costs one command; past it, a second
 * miss in one directory lists the directory again (fs_files_v1_cmd.c),
 * so a walk whose names the kernel kept costs two commands a directory,
 * not one a file. Open files are kept
 * in a registry by path, so that a stat of a file being written reports
 * the buffered size and a change of times by path (futimens, cp -p) is
 * applied after the buffered contents reach the sandbox.
 *
 * It does not use the file extension (fs_files.c does), and it holds no
 * lock across a round trip to the sandbox. This file has the listing, the
 * metadata operations and the table; commands and attributes are
 * fs_files_v1_cmd.c's, open files and their contents fs_files_v1_open.c's,
 * the text (find records, errno table, quoting, buffers)
 * fs_files_v1_text.c's.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "client/agent_client.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_files_v1_cmd.h"
#include "fs/fs_files_v1_i.h"
#include "fs/fs_files_v1_open.h"
#include "fs/fs_i.h"

/* A listing: the full records, or (when they are more than a command's
 * output carries) names and types only. */
static int list_dir(struct sbx *sb, const char *rel, struct cmd_out *o,
		    bool *short_form)
{
	struct cmd c = {{NULL}, 0};
	int rc;

	*short_form = false;
	v1_find_cmd(&c, rel, true, false);
	rc = v1_run(sb, "readdir", rel, &c, RUN_COMPLETE, o);
	if (rc == -EFBIG) {
		log_debug("sandbox %s: readdir %s: the listing is too large "
			  "with attributes, listing names only",
			  sb->id, rel);
		v1_cmd_cleanup(&c);
		v1_cmd_out_cleanup(o);
		v1_cmd_out_init(o);
		*short_form = true;
		v1_find_cmd(&c, rel, true, true);
		rc = v1_run(sb, "readdir", rel, &c, RUN_COMPLETE, o);
		if (rc == -EFBIG)
			rc = v1_fail(sb, "readdir", rel, SBX_COMMAND_FAILED,
				     EFBIG,
				     "the listing is larger than a command's "
				     "output may be");
	}
	if (rc == 0 && o->code != 0) {
		/* find lists what it can and fails for entries that went
		 * away while it ran (a busy build directory): such a listing
		 * is what readdir(3) would have seen. Without output, the
		 * directory itself failed. */
		if (o->out.len > 0 && !o->cut)
			log_debug("sandbox %s: readdir %s: %s exited %d, "
				  "keeping what it listed",
				  sb->id, rel, c.argv[0], o->code);
		else
			rc = v1_cmd_failed(sb, "readdir", rel, &c, o);
	}
	v1_cmd_cleanup(&c);
	return rc;
}

static int v1_readdir(struct sbx *sb, const char *rel, void *buf,
		      fuse_fill_dir_t filler, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags fl)
{
	uint64_t mark = cache_mark(sb->fs->cache);
	struct cmd_out o;
	struct fs_v1_rec rec;
	size_t pos = 0;
	bool short_form;
	int rc;

	(void)off;
	(void)fi;
	if (v1_is_native(sb) && !v1_has_native_exec(sb))
		return v1_fail(
			sb, "readdir", rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
			"the provider lists no files in native sessions");
	v1_cmd_out_init(&o);
	rc = list_dir(sb, rel, &o, &short_form);
	if (rc < 0)
		goto out;
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	while ((rc = fs_files_v1_parse(o.out.data, o.out.len, &pos, short_form,
				       &rec)) == 1) {
		struct stat st;
		char *child;
		bool full;

		if (!path_component_valid(rec.name)) {
			rc = -EBADMSG;
			break;
		}
		full = !short_form && rec.attr.type != PROTO_FT_UNKNOWN;
		child = path_join(rel, rec.name);
		if (full) {
			v1_cache_put(sb, child, &rec, mark);
			sbfs_attr_to_stat(sb, &rec.attr, &st);
		} else {
			sbfs_attr_to_stat(sb, &rec.attr, &st);
			st.st_mode &= S_IFMT;
		}
		free(child);
		if (filler(buf, rec.name, &st, 0,
			   full && (fl & FUSE_READDIR_PLUS) ? FUSE_FILL_DIR_PLUS
							    : 0) != 0)
			break;
	}
	if (rc < 0)
		rc = v1_fail(sb, "readdir", rel, SBX_UNEXPECTED_FORMAT, EIO,
			     "find printed a malformed record");
	else
		rc = 0;
out:
	v1_cmd_out_cleanup(&o);
	return rc;
}

static int v1_mkdir(struct sbx *sb, const char *rel, mode_t mode)
{
	struct proto_attr a;
	struct sbx_error err;
	int rc = v1_may_change(sb);

	if (rc < 0)
		return rc;
	/* /v1/mkdir is mkdir -p: an existing path is no error there. */
	rc = v1_attr_of(sb, "mkdir", rel, &a, NULL);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	sbx_error_clear(&err);
	rc = ac_mkdir_p(sb->fs->t, sb->id, rel, &err);
	v1_forget(sb, rel, false, true);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "mkdir", rel, &err);
	/* New directories get 0777 (less the agent's umask). */
	if ((mode & 07777) != 0777)
		rc = v1_chmod_remote(sb, "mkdir", rel, mode);
	return rc;
}

/* rm or rmdir (dir) of rel; what was known of it (its subtree) and of
 * its directory is forgotten. */
static int remove_path(struct sbx *sb, const char *rel, bool dir)
{
	static const char *const rm[] = {"rm", "--", NULL};
	static const char *const rmdir[] = {"rmdir", "--", NULL};
	int rc = v1_may_change(sb);

	if (rc < 0)
		return rc;
	rc = v1_change(sb, dir ? "rmdir" : "unlink", rel, dir ? rmdir : rm, rel,
		       NULL);
	v1_forget(sb, rel, dir, true);
	return rc;
}

static int v1_unlink(struct sbx *sb, const char *rel)
{
	return remove_path(sb, rel, false);
}

static int v1_rmdir(struct sbx *sb, const char *rel)
{
	return remove_path(sb, rel, true);
}

static int v1_rename(struct sbx *sb, const char *from, const char *to,
		     unsigned int flags)
{
	struct cmd c = {{NULL}, 0};
	struct cmd_out o;
	bool noreplace = (flags & RENAME_NOREPLACE) != 0;
	int rc = v1_may_change(sb);

	if (rc < 0)
		return rc;
	if ((flags & RENAME_EXCHANGE) != 0 ||
	    (flags & ~(unsigned)RENAME_NOREPLACE) != 0)
		return -EINVAL;
	v1_cmd_add(&c, "mv");
	if (noreplace) {
		/* mv -n skips an existing target without an error (or
		 * with "not replacing", newer coreutils): -v prints a line
		 * only for a rename it did. */
		v1_cmd_add(&c, "-n");
		v1_cmd_add(&c, "-v");
	}
	v1_cmd_add(&c, "-T");
	v1_cmd_add(&c, "--");
	v1_cmd_add_path(&c, from);
	v1_cmd_add_path(&c, to);
	v1_cmd_out_init(&o);
	rc = v1_run(sb, "rename", from, &c, 0, &o);
	if (rc == 0 && o.code != 0) {
		/* rename(2) of two links to one file does nothing and
		 * succeeds; mv calls it an error. */
		if (memmem(o.err.data, o.err.len, "are the same file", 17))
			rc = 0;
		else
			rc = v1_cmd_failed(sb, "rename", from, &c, &o);
	} else if (rc == 0 && noreplace && o.out.len == 0) {
		rc = -EEXIST;
	}
	v1_cmd_out_cleanup(&o);
	v1_cmd_cleanup(&c);
	v1_forget(sb, from, true, true);
	v1_forget(sb, to, true, true);
	return rc;
}

static int v1_link(struct sbx *sb, const char *from, const char *to)
{
	static const char *const ln[] = {"ln", "-P", "-T", "--", NULL};
	int rc = v1_may_change(sb);

	if (rc < 0)
		return rc;
	rc = v1_change(sb, "link", to, ln, from, to);
	v1_forget(sb, from, false, false);
	v1_forget(sb, to, false, true);
	return rc;
}

static int v1_symlink(struct sbx *sb, const char *target, const char *rel)
{
	const char *const ln[] = {"ln", "-s", "-T", "--", target, NULL};
	int rc = v1_may_change(sb);

	if (rc < 0)
		return rc;
	rc = v1_change(sb, "symlink", rel, ln, rel, NULL);
	v1_forget(sb, rel, false, true);
	return rc;
}

static int v1_readlink(struct sbx *sb, const char *rel, char *buf, size_t size)
{
	struct proto_attr a;
	char *target = NULL, *shown;
	size_t n;
	int rc;

	if (size == 0)
		return -EINVAL;
	if (v1_is_native(sb) && !v1_has_native_exec(sb))
		return v1_fail(
			sb, "readlink", rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
			"the provider lists no files in native sessions");
	rc = v1_attr_of(sb, "readlink", rel, &a, &target);
	if (rc < 0)
		return rc;
	if (a.type != PROTO_FT_SYMLINK || target == NULL) {
		free(target);
		return -EINVAL;
	}
	shown = sbfs_link_show(sb->fs, rel, target);
	n = strlen(shown);
	if (n >= size)
		n = size - 1;
	memcpy(buf, shown, n);
	buf[n] = '\0';
	free(shown);
	free(target);
	return 0;
}

static int v1_chmod(struct sbx *sb, const char *rel, mode_t mode,
		    struct fuse_file_info *fi)
{
	int rc = v1_may_change(sb);

	(void)fi;
	if (rc < 0)
		return rc;
	return v1_chmod_remote(sb, "chmod", rel, mode);
}

/* "@SEC.NSEC" for touch -d, exact for times before 1970 too. */
static void touch_date(const struct timespec *ts, char *out, size_t size)
{
	long long sec = (long long)ts->tv_sec;
	long nsec = ts->tv_nsec;

	if (sec < 0 && nsec > 0)
		snprintf(out, size, "@-%lld.%09ld", -(sec + 1),
			 1000000000L - nsec);
	else
		snprintf(out, size, "@%lld.%09ld", sec, nsec);
}

/* One touch -h: which is "-a", "-m" or NULL (both); ts NULL for now. */
static int touch_one(struct sbx *sb, const char *rel, const char *which,
		     const struct timespec *ts)
{
	const char *words[7] = {"touch", "-h"};
	size_t n = 2;
	char date[48];

	if (which != NULL)
		words[n++] = which;
	if (ts != NULL) {
		touch_date(ts, date, sizeof(date));
		words[n++] = "-d";
		words[n++] = date;
	}
	words[n++] = "--";
	words[n] = NULL;
	return v1_change(sb, "utimens", rel, words, rel, NULL);
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_nsec == UTIME_NOW || b->tv_nsec == UTIME_NOW)
		return a->tv_nsec == b->tv_nsec;
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static int v1_utimens(struct sbx *sb, const char *rel,
		      const struct timespec tv[2], struct fuse_file_info *fi)
{
	static const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
	const struct timespec *t = tv != NULL ? tv : now;
	bool omit_a = t[0].tv_nsec == UTIME_OMIT;
	bool omit_m = t[1].tv_nsec == UTIME_OMIT;
	int rc = v1_may_change(sb);

	(void)fi;
	if (rc < 0)
		return rc;
	if (omit_a && omit_m)
		return 0;
	/* A later upload of buffered contents would set mtime again. */
	rc = v1_upload_path(sb, "utimens", rel);
	if (rc < 0)
		return rc;
	if (!omit_a && !omit_m && same_time(&t[0], &t[1])) {
		rc = touch_one(sb, rel, NULL,
			       t[0].tv_nsec == UTIME_NOW ? NULL : &t[0]);
	} else {
		if (!omit_a)
			rc = touch_one(sb, rel, "-a",
				       t[0].tv_nsec == UTIME_NOW ? NULL
								 : &t[0]);
		if (rc == 0 && !omit_m)
			rc = touch_one(sb, rel, "-m",
				       t[1].tv_nsec == UTIME_NOW ? NULL
								 : &t[1]);
	}
	cache_forget(sb->fs->cache, sb->id, rel);
	return rc;
}

/* stat -f: the filesystem holding the session root. */
static int v1_statfs(struct sbx *sb, const char *rel, struct statvfs *st)
{
	struct cmd c = {{NULL}, 0};
	struct cmd_out o;
	unsigned long long v[8];
	int rc, n = 0;

	if (v1_is_native(sb) && !v1_has_native_exec(sb)) {
		/* Nothing to ask: a large filesystem with room to spare, as
		 * the provider's own file limits are what bind. */
		memset(st, 0, sizeof(*st));
		st->f_bsize = 4096;
		st->f_frsize = 4096;
		st->f_blocks = 1ULL << 28;
		st->f_bfree = st->f_bavail = 1ULL << 27;
		st->f_files = 1ULL << 24;
		st->f_ffree = st->f_favail = 1ULL << 23;
		st->f_namemax = 255;
		return 0;
	}
	v1_cmd_add(&c, "stat");
	v1_cmd_add(&c, "-f");
	v1_cmd_add(&c, "-c");
	v1_cmd_add(&c, "%S %s %b %f %a %c %d %l");
	v1_cmd_add(&c, "--");
	v1_cmd_add_path(&c, rel);
	v1_cmd_out_init(&o);
	rc = v1_run(sb, "statfs", rel, &c, 0, &o);
	if (rc == 0 && o.code != 0) {
		rc = v1_cmd_failed(sb, "statfs", rel, &c, &o);
	} else if (rc == 0) {
		n = sscanf(o.out.data != NULL ? o.out.data : "",
			   "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
			   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
		if (n != 8) {
			rc = v1_fail(sb, "statfs", rel, SBX_UNEXPECTED_FORMAT,
				     EIO, "stat -f printed no numbers");
		} else {
			memset(st, 0, sizeof(*st));
			st->f_frsize = (unsigned long)v[0];
			st->f_bsize = (unsigned long)v[1];
			st->f_blocks = (fsblkcnt_t)v[2];
			st->f_bfree = (fsblkcnt_t)v[3];
			st->f_bavail = (fsblkcnt_t)v[4];
			st->f_files = (fsfilcnt_t)v[5];
			st->f_ffree = st->f_favail = (fsfilcnt_t)v[6];
			st->f_namemax = (unsigned long)v[7];
		}
	}
	v1_cmd_out_cleanup(&o);
	v1_cmd_cleanup(&c);
	return rc;
}

const struct fs_tree_ops fs_files_v1_ops = {
	.getattr = v1_getattr,
	.readdir = v1_readdir,
	.open = v1_open,
	.create = v1_create,
	.read = v1_read,
	.write = v1_write,
	.flush = v1_flush,
	.release = v1_release,
	.fsync = v1_fsync,
	.mkdir = v1_mkdir,
	.unlink = v1_unlink,
	.rmdir = v1_rmdir,
	.rename = v1_rename,
	.link = v1_link,
	.symlink = v1_symlink,
	.readlink = v1_readlink,
	.chmod = v1_chmod,
	.truncate = v1_truncate,
	.utimens = v1_utimens,
	.statfs = v1_statfs,
};
