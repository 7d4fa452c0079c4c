/* SPDX-License-Identifier: MIT */
/*
 * fs: the fuse_operations of sandboxfs. A path is parsed into a node of
 * the layout (SEMANTICS.md):
 *
 *   /                          the provider's sandboxes
 *   /<id>                      one sandbox
 *   /<id>/files[/rel]          its session root (fs_files or fs_files_v1)
 *   /<id>/exec                 start a job (fs_jobs)
 *   /<id>/jobs[/<job>[/file]]  jobs started here, and jobs/latest
 *   /<id>/info, /<id>/ctl      (fs_info)
 *   /<id>/events               what changes in the sandbox (events.c)
 *
 * and handed to the module that owns it, inside the sandbox entered for
 * the operation. This file does no I/O of its own.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/path.h"
#include "common/proto_exec.h"
#include "fs/fs.h"
#include "fs/fs_i.h"

/* The most the kernel may read ahead for a sequential reader; it also
 * caps what tune.c can set for the mount's device. */
#define SBFS_MAX_READAHEAD (4 * 1024 * 1024)

enum node_kind {
	N_ROOT,
	N_SBX,
	N_FILES,
	N_EXEC,
	N_JOBS,
	N_LATEST,
	N_JOB,
	N_INFO,
	N_CTL,
	N_EVENTS,
};

struct node {
	enum node_kind kind;
	char id[PROVIDER_ID_MAX + 1];
	const char *rel; /* N_FILES: "" or the relative path */
	char job[PROTO_JOB_ID_MAX + 1];
	enum fs_job_file jf;
};

static struct sbfs *ctx_fs(void)
{
	return sbfs_current();
}

/* Copy one component of p into out; advance p past it and its '/'. */
static int component(const char **p, char *out, size_t size)
{
	const char *s = *p;
	size_t n = strcspn(s, "/");

	if (n == 0 || n >= size)
		return -ENOENT;
	memcpy(out, s, n);
	out[n] = '\0';
	s += n;
	while (*s == '/')
		s++;
	*p = s;
	return 0;
}

static int job_file(const char *name, enum fs_job_file *jf)
{
	static const struct {
		const char *name;
		enum fs_job_file f;
	} files[] = {
		{"cmd", FS_JOB_CMD},	   {"stdout", FS_JOB_STDOUT},
		{"stderr", FS_JOB_STDERR}, {"status", FS_JOB_STATUS},
		{"exit", FS_JOB_EXIT},	   {"ctl", FS_JOB_CTL},
	};
	size_t i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (strcmp(name, files[i].name) == 0) {
			*jf = files[i].f;
			return 0;
		}
	}
	return -ENOENT;
}

/* A path the sandbox can take: at most PATH_MAX_BYTES - 1 bytes and
 * components of at most NAME_MAX_BYTES, as on a local file system
 * (ENAMETOOLONG), checked here so that no agent is asked. */
static int rel_check(const char *rel)
{
	size_t n = 0;
	const char *p;

	for (p = rel; *p != '\0'; p++) {
		if (*p == '/') {
			n = 0;
		} else if (++n > NAME_MAX_BYTES) {
			return -ENAMETOOLONG;
		}
	}
	return p - rel >= PATH_MAX_BYTES ? -ENAMETOOLONG : 0;
}

static int fs_parse(const char *path, struct node *n)
{
	const char *p = path;
	char part[256];

	memset(n, 0, sizeof(*n));
	while (*p == '/')
		p++;
	if (*p == '\0') {
		n->kind = N_ROOT;
		return 0;
	}
	if (component(&p, n->id, sizeof(n->id)) < 0)
		return -ENOENT;
	if (*p == '\0') {
		n->kind = N_SBX;
		return 0;
	}
	if (component(&p, part, sizeof(part)) < 0)
		return -ENOENT;
	if (strcmp(part, "files") == 0) {
		n->kind = N_FILES;
		n->rel = p;
		return rel_check(p);
	}
	if (*p != '\0' && strcmp(part, "jobs") != 0)
		return -ENOENT;
	if (strcmp(part, "exec") == 0) {
		n->kind = N_EXEC;
	} else if (strcmp(part, "info") == 0) {
		n->kind = N_INFO;
	} else if (strcmp(part, "ctl") == 0) {
		n->kind = N_CTL;
	} else if (strcmp(part, "events") == 0) {
		n->kind = N_EVENTS;
	} else if (strcmp(part, "jobs") == 0) {
		n->kind = N_JOBS;
		if (*p == '\0')
			return 0;
		if (component(&p, n->job, sizeof(n->job)) < 0)
			return -ENOENT;
		if (strcmp(n->job, "latest") == 0 && *p == '\0') {
			n->kind = N_LATEST;
			return 0;
		}
		n->kind = N_JOB;
		n->jf = FS_JOB_DIR;
		if (*p == '\0')
			return 0;
		if (component(&p, part, sizeof(part)) < 0 || *p != '\0')
			return -ENOENT;
		return job_file(part, &n->jf);
	} else {
		return -ENOENT;
	}
	return 0;
}

/* How many components a path has ("/a/b" -> 2). */
static int depth(const char *path)
{
	int d = 0;

	while (*path != '\0') {
		while (*path == '/')
			path++;
		if (*path == '\0')
			break;
		d++;
		path += strcspn(path, "/");
	}
	return d;
}

/* Parse a path that an operation wants to create: above files/ the layout
 * is fixed, so a new name there is refused (EPERM), not missing. */
static int parse_new(const char *path, struct node *n)
{
	int rc = fs_parse(path, n);

	if (rc == -ENOENT && depth(path) <= 2)
		return -EPERM;
	return rc;
}

/* Enter the node's sandbox: the synthetic entries only look; files/ and
 * job activity need the agent. */
static int enter(struct sbfs *fs, const struct node *n, const char *op,
		 bool full, struct sbx **sb)
{
	/* Everything under jobs/ is held by this mount: looking at it must
	 * not resume a sandbox or wait for its agent. */
	if (full && n->kind != N_JOBS && n->kind != N_JOB &&
	    n->kind != N_LATEST)
		return sbfs_enter(fs, n->id, op, true, sb);
	return sbfs_peek(fs, n->id, sb);
}

/*
 * The operation's deadline (doc/transport-rules.md 9): -o timeout from
 * now bounds everything an operation under files/ (and on the mount's and
 * sandboxes' own entries) does, however many requests it takes. What
 * legitimately waits longer has none: reading a job's output or exit
 * (they wait for the job), starting a job (a native command runs to its
 * end), and ctl (a resume has its own deadlines); each of their requests
 * is still bounded by the response deadline.
 */
static void op_begin(struct sbfs *fs, const struct node *n)
{
	bool bounded;

	switch (n->kind) {
	case N_EXEC:
	case N_JOBS:
	case N_LATEST:
	case N_JOB:
	case N_CTL:
	case N_EVENTS:
		bounded = false;
		break;
	default:
		bounded = true;
		break;
	}
	sbfs_op_begin(fs, bounded);
}

static int not_files(const struct node *n)
{
	/* Above files/ the layout is fixed: nothing can be made there. */
	return n->kind == N_ROOT || n->kind == N_SBX ? -EPERM : -EACCES;
}

/* ---- attributes and directories ----------------------------------------- */

static int fs_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	struct sbfs *fs = ctx_fs();
	struct sbx *sb = NULL;
	struct node n;
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	if (n.kind == N_ROOT) {
		sbfs_synth_stat(fs, st, true, 0555, 0);
		return 0;
	}
	op_begin(fs, &n);
	if (n.kind == N_FILES && *n.rel != '\0') {
		rc = enter(fs, &n, "getattr", true, &sb);
		if (rc == 0)
			rc = sbfs_tree_ops(sb)->getattr(sb, n.rel, st, fi);
		sbfs_leave(sb);
		return rc;
	}
	rc = enter(fs, &n, "getattr",
		   n.kind == N_JOB || n.kind == N_JOBS || n.kind == N_LATEST,
		   &sb);
	if (rc < 0)
		return rc;
	switch (n.kind) {
	case N_SBX:
		sbfs_synth_stat(fs, st, true, 0555, 0);
		break;
	case N_FILES:
		/* The session root's own attributes would need the agent
		 * (and a resume); its directory is shown as the mount's. */
		sbfs_synth_stat(fs, st, true, 0755, 0);
		break;
	case N_EXEC:
		rc = fs_exec_getattr(sb, st);
		break;
	case N_JOBS:
		rc = fs_jobs_getattr(sb, NULL, FS_JOB_DIR, st);
		break;
	case N_LATEST:
		rc = fs_jobs_getattr(sb, "latest", FS_JOB_DIR, st);
		break;
	case N_JOB:
		rc = fs_jobs_getattr(sb, n.job, n.jf, st);
		break;
	case N_INFO:
	case N_CTL:
		rc = fs_info_getattr(sb, n.kind == N_CTL, st);
		break;
	case N_EVENTS:
		/* The names of what changes, as private as exec's jobs
		 * (SEMANTICS.md, sharing). */
		sbfs_synth_stat(fs, st, false, fs->o.shared_exec ? 0444 : 0400,
				0);
		break;
	default:
		rc = -ENOENT;
		break;
	}
	sbfs_leave(sb);
	return rc;
}

static int fs_opendir(const char *path, struct fuse_file_info *fi)
{
	struct node n;
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	fi->fh = 0;
	/* The kernel keeps every directory's entries between readers
	 * (ll_dirs.c); it is told when those of files/ change (events,
	 * this mount's own changes, or their modification time after
	 * attr_timeout). The others are dropped after each listing. */
	fi->cache_readdir = n.kind == N_FILES;
	return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags fl)
{
	static const char *const entries[] = {"files", "exec", "jobs",
					      "info",  "ctl",  "events"};
	struct sbfs *fs = ctx_fs();
	struct sbx *sb = NULL;
	struct node n;
	size_t i;
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	op_begin(fs, &n);
	if (n.kind == N_ROOT) {
		char **ids = NULL;
		size_t nids = 0;

		rc = sbfs_list(fs, &ids, &nids);
		if (rc < 0)
			return rc;
		filler(buf, ".", NULL, 0, 0);
		filler(buf, "..", NULL, 0, 0);
		for (i = 0; i < nids; i++) {
			struct stat st;

			sbfs_synth_stat(fs, &st, true, 0555, 0);
			if (filler(buf, ids[i], &st, 0, FUSE_FILL_DIR_PLUS))
				break;
		}
		sbfs_ids_free(ids, nids);
		return 0;
	}
	rc = enter(fs, &n, "readdir", n.kind != N_SBX, &sb);
	if (rc < 0)
		return rc;
	switch (n.kind) {
	case N_SBX:
		filler(buf, ".", NULL, 0, 0);
		filler(buf, "..", NULL, 0, 0);
		for (i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
			filler(buf, entries[i], NULL, 0, 0);
		break;
	case N_FILES:
		rc = sbfs_tree_ops(sb)->readdir(sb, n.rel, buf, filler, off, fi,
						fl);
		break;
	case N_JOBS:
		rc = fs_jobs_readdir(sb, NULL, buf, filler);
		break;
	case N_JOB:
		rc = n.jf == FS_JOB_DIR
			     ? fs_jobs_readdir(sb, n.job, buf, filler)
			     : -ENOTDIR;
		break;
	default:
		rc = -ENOTDIR;
		break;
	}
	sbfs_leave(sb);
	return rc;
}

static int fs_readlink(const char *path, char *buf, size_t size)
{
	struct sbfs *fs = ctx_fs();
	struct sbx *sb = NULL;
	struct node n;
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	if (n.kind != N_FILES && n.kind != N_LATEST)
		return -EINVAL;
	op_begin(fs, &n);
	rc = enter(fs, &n, "readlink", true, &sb);
	if (rc < 0)
		return rc;
	if (n.kind == N_LATEST)
		rc = fs_jobs_readlink(sb, buf, size);
	else
		rc = sbfs_tree_ops(sb)->readlink(sb, n.rel, buf, size);
	sbfs_leave(sb);
	return rc;
}

/* ---- files/ only ---------------------------------------------------------- */

/* Run a files/ operation on one path. */
#define FILES_OP(opname, call)                           \
	do {                                             \
		struct sbfs *fs = ctx_fs();              \
		struct sbx *sb = NULL;                   \
		struct node n;                           \
		int rc = parse_new(path, &n);            \
		if (rc < 0)                              \
			return rc;                       \
		if (n.kind != N_FILES || *n.rel == '\0') \
			return not_files(&n);            \
		op_begin(fs, &n);                        \
		rc = enter(fs, &n, opname, true, &sb);   \
		if (rc < 0)                              \
			return rc;                       \
		rc = sbfs_tree_ops(sb)->call;            \
		sbfs_leave(sb);                          \
		return rc;                               \
	} while (0)

static int fs_mkdir(const char *path, mode_t mode)
{
	FILES_OP("mkdir", mkdir(sb, n.rel, mode));
}

static int fs_unlink(const char *path)
{
	FILES_OP("unlink", unlink(sb, n.rel));
}

static int fs_rmdir(const char *path)
{
	FILES_OP("rmdir", rmdir(sb, n.rel));
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	FILES_OP("chmod", chmod(sb, n.rel, mode, fi));
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	FILES_OP("truncate", truncate(sb, n.rel, size, fi));
}

static int fs_utimens(const char *path, const struct timespec tv[2],
		      struct fuse_file_info *fi)
{
	FILES_OP("utimens", utimens(sb, n.rel, tv, fi));
}

static int fs_chown(const char *path, uid_t uid, gid_t gid,
		    struct fuse_file_info *fi)
{
	struct node n;
	int rc = fs_parse(path, &n);

	(void)uid;
	(void)gid;
	(void)fi;
	if (rc < 0)
		return rc;
	/* Files belong to the sandbox's user; a change of owner is
	 * accepted and ignored (SEMANTICS.md), so that tar, cp -p and
	 * rsync -a running as root do not fail on every file. */
	return n.kind == N_FILES ? 0 : -EPERM;
}

static int fs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	struct node n;
	int rc = parse_new(path, &n);

	(void)rdev;
	if (rc < 0)
		return rc;
	if (n.kind != N_FILES || *n.rel == '\0')
		return not_files(&n);
	/* Regular files come through create; FIFOs, sockets and devices
	 * are not made in a sandbox (SEMANTICS.md). */
	(void)mode;
	return -EPERM;
}

static int fs_symlink(const char *target, const char *path)
{
	FILES_OP("symlink", symlink(sb, target, n.rel));
}

/* Both paths in the same sandbox's files/. */
static int two_paths(const char *from, const char *to, struct node *a,
		     struct node *b)
{
	int rc = fs_parse(from, a);

	if (rc == 0) {
		rc = fs_parse(to, b);
		/* A target above files/ is another file system, in effect. */
		if (rc == -ENOENT && depth(to) <= 2)
			rc = -EXDEV;
	}
	if (rc < 0)
		return rc;
	if (a->kind != N_FILES || b->kind != N_FILES || *a->rel == '\0' ||
	    *b->rel == '\0')
		return a->kind == N_FILES && b->kind == N_FILES ? -EBUSY
								: -EXDEV;
	if (strcmp(a->id, b->id) != 0)
		return -EXDEV;
	return 0;
}

/* A rename (with flags) or, with link, a hard link of from to to. */
static int two_paths_op(const char *from, const char *to, unsigned int flags,
			bool link)
{
	struct sbfs *fs = ctx_fs();
	struct sbx *sb = NULL;
	struct node a, b;
	int rc = two_paths(from, to, &a, &b);

	if (rc < 0)
		return rc;
	op_begin(fs, &a);
	rc = enter(fs, &a, link ? "link" : "rename", true, &sb);
	if (rc < 0)
		return rc;
	rc = link ? sbfs_tree_ops(sb)->link(sb, a.rel, b.rel)
		  : sbfs_tree_ops(sb)->rename(sb, a.rel, b.rel, flags);
	sbfs_leave(sb);
	return rc;
}

static int fs_rename(const char *from, const char *to, unsigned int flags)
{
	return two_paths_op(from, to, flags, false);
}

static int fs_link(const char *from, const char *to)
{
	return two_paths_op(from, to, 0, true);
}

static int fs_statfs(const char *path, struct statvfs *st)
{
	struct sbfs *fs = ctx_fs();
	struct sbx *sb = NULL;
	struct node n;
	int rc = fs_parse(path, &n);

	if (rc < 0 || n.kind != N_FILES) {
		/* Above files/, df shows where the sandboxes live. */
		return sbfs_home_statfs(fs, st);
	}
	op_begin(fs, &n);
	rc = enter(fs, &n, "statfs", true, &sb);
	if (rc < 0)
		return rc;
	rc = sbfs_tree_ops(sb)->statfs(sb, n.rel, st);
	sbfs_leave(sb);
	return rc;
}

/* ---- open files ------------------------------------------------------------ */

/*
 * Open files remember which subtree they belong to, so that read, write
 * and release reach the same module whatever happened to the path.
 */
static int fs_open(const char *path, struct fuse_file_info *fi)
{
	struct sbfs *fs = ctx_fs();
	struct sbx *sb = NULL;
	struct node n;
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	switch (n.kind) {
	case N_ROOT:
	case N_SBX:
	case N_JOBS:
	case N_LATEST:
		return -EISDIR;
	default:
		break;
	}
	op_begin(fs, &n);
	rc = enter(fs, &n, "open", n.kind != N_INFO && n.kind != N_CTL, &sb);
	if (rc < 0)
		return rc;
	switch (n.kind) {
	case N_FILES:
		rc = *n.rel == '\0' ? -EISDIR
				    : sbfs_tree_ops(sb)->open(sb, n.rel, fi);
		/* A reader has nothing to flush: spare close(2) a round trip
		 * (FOPEN_NOFLUSH). */
		if (rc == 0 && (fi->flags & O_ACCMODE) == O_RDONLY)
			fi->noflush = 1;
		break;
	case N_EXEC:
		rc = fs_exec_open(sb, fi);
		break;
	case N_JOB:
		rc = n.jf == FS_JOB_DIR ? -EISDIR
					: fs_jobs_open(sb, n.job, n.jf, fi);
		break;
	case N_INFO:
	case N_CTL:
		rc = fs_info_open(sb, n.kind == N_CTL, fi);
		break;
	case N_EVENTS:
		rc = fs_events_open(sb, fi);
		break;
	default:
		rc = -ENOENT;
		break;
	}
	sbfs_leave(sb);
	return rc;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	FILES_OP("create", create(sb, n.rel, mode, fi));
}

/* Dispatch an operation on an open file by its path's node. */
#define OPEN_OP(opname, files_call, exec_call, job_call, info_call)   \
	do {                                                          \
		struct sbfs *fs = ctx_fs();                           \
		struct sbx *sb = NULL;                                \
		struct node n;                                        \
		int rc = fs_parse(path, &n);                          \
		if (rc < 0)                                           \
			return rc;                                    \
		op_begin(fs, &n);                                     \
		rc = enter(fs, &n, opname,                            \
			   n.kind != N_INFO && n.kind != N_CTL, &sb); \
		if (rc < 0)                                           \
			return rc;                                    \
		switch (n.kind) {                                     \
		case N_FILES:                                         \
			rc = sbfs_tree_ops(sb)->files_call;           \
			break;                                        \
		case N_EXEC:                                          \
			rc = exec_call;                               \
			break;                                        \
		case N_JOB:                                           \
			rc = job_call;                                \
			break;                                        \
		case N_INFO:                                          \
		case N_CTL:                                           \
			rc = info_call;                               \
			break;                                        \
		default:                                              \
			rc = -EBADF;                                  \
			break;                                        \
		}                                                     \
		sbfs_leave(sb);                                       \
		return rc;                                            \
	} while (0)

static int fs_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct node ev;

	/* A reader of events waits for changes: nothing to ask the agent,
	 * no deadline. */
	if (fs_parse(path, &ev) == 0 && ev.kind == N_EVENTS) {
		struct sbx *sb = sbfs_known(ctx_fs(), ev.id);
		int rc =
			sb != NULL ? fs_events_read(sb, buf, size, fi) : -EBADF;

		sbfs_leave(sb);
		return rc;
	}
	OPEN_OP("read", read(sb, n.rel, buf, size, off, fi),
		fs_exec_read(sb, buf, size, off, fi),
		fs_jobs_read(sb, n.job, n.jf, buf, size, off, fi),
		fs_info_read(sb, n.kind == N_CTL, buf, size, off, fi));
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	OPEN_OP("write", write(sb, n.rel, buf, size, off, fi),
		fs_exec_write(sb, buf, size, off, fi),
		fs_jobs_write(sb, n.job, n.jf, buf, size, off, fi),
		fs_info_write(sb, n.kind == N_CTL, buf, size, off, fi));
}

static int fs_flush(const char *path, struct fuse_file_info *fi)
{
	OPEN_OP("flush", flush(sb, n.rel, fi), fs_exec_flush(sb, fi), 0, 0);
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	struct sbfs *fs = ctx_fs();
	struct sbx *sb = NULL;
	struct node n;
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	/* A release must reach its module even when the sandbox is gone or
	 * unreachable: it frees the handle. The sandbox is known to the
	 * mount, since something was opened in it. */
	op_begin(fs, &n);
	sb = sbfs_known(fs, n.id);
	if (sb == NULL) {
		log_debug("release of %s in an unknown sandbox", path);
		return 0;
	}
	switch (n.kind) {
	case N_FILES:
		rc = sbfs_tree_ops(sb)->release(sb, n.rel, fi);
		break;
	case N_EXEC:
		rc = fs_exec_release(sb, fi);
		break;
	case N_JOB:
		rc = fs_jobs_release(sb, n.job, n.jf, fi);
		break;
	case N_INFO:
	case N_CTL:
		rc = fs_info_release(sb, n.kind == N_CTL, fi);
		break;
	case N_EVENTS:
		rc = fs_events_release(sb, fi);
		break;
	default:
		rc = 0;
		break;
	}
	sbfs_leave(sb);
	return rc;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	OPEN_OP("fsync", fsync(sb, n.rel, datasync, fi), 0, 0, 0);
}

/* ---- the mount ------------------------------------------------------------- */

void sbfs_conn_init(struct sbfs *fs, struct fuse_conn_info *conn)
{
	(void)fs;
	/* Large requests: 1 MiB reads and writes, deep readahead. */
	conn->max_write = 1024 * 1024;
	conn->max_readahead = SBFS_MAX_READAHEAD;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static const struct fuse_operations sbfs_ops = {
	.getattr = fs_getattr,
	.readlink = fs_readlink,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.chmod = fs_chmod,
	.chown = fs_chown,
	.truncate = fs_truncate,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.statfs = fs_statfs,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.create = fs_create,
	.utimens = fs_utimens,
};

const struct fuse_operations *fs_operations(void)
{
	return &sbfs_ops;
}
