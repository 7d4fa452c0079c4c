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
#include "common/strv.h"
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
		n->jf = FS_JOB_DIR;
		if (*p == '\0')
			return 0;
		if (component(&p, n->job, sizeof(n->job)) < 0)
			return -ENOENT;
		if (strcmp(n->job, "latest") == 0 && *p == '\0') {
			n->kind = N_LATEST;
			return 0;
		}
		n->kind = N_JOB;
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

/* ---- what each kind of node does ------------------------------------------ */

/* One operation on one node: where it runs and the kernel's arguments
 * (each operation reads the ones it takes). */
struct op_call {
	struct sbfs *fs;
	struct sbx *sb;
	const struct node *n;
	struct stat *st;
	char *buf;
	const char *data;
	size_t size;
	off_t off;
	int datasync;
	struct fuse_file_info *fi;
	void *dir;
	fuse_fill_dir_t filler;
	enum fuse_readdir_flags fl;
};

typedef int node_fn(const struct op_call *c);

enum node_op {
	OP_GETATTR,
	OP_READDIR,
	OP_READLINK,
	OP_OPEN,
	OP_READ,
	OP_WRITE,
	OP_FLUSH,
	OP_RELEASE,
	OP_FSYNC,
	OP_COUNT,
};

/* Each operation's name (for the sandbox's log and errors), what it
 * answers on a kind of node that has no handler for it, and whether that
 * answer comes at once (early), before any deadline or sandbox. */
static const struct {
	const char *name;
	int none;
	bool early;
} node_ops[OP_COUNT] = {
	[OP_GETATTR] = {"getattr", -ENOENT, false},
	[OP_READDIR] = {"readdir", -ENOTDIR, false},
	[OP_READLINK] = {"readlink", -EINVAL, true},
	[OP_OPEN] = {"open", -EISDIR, true},
	[OP_READ] = {"read", -EBADF, false},
	[OP_WRITE] = {"write", -EBADF, false},
	[OP_FLUSH] = {"flush", -EBADF, false},
	[OP_RELEASE] = {"release", 0, false},
	[OP_FSYNC] = {"fsync", -EBADF, false},
};

/* An operation with nothing to do on the node (a flush or fsync of a
 * synthetic file). */
static int node_nothing(const struct op_call *c)
{
	(void)c;
	return 0;
}

/* A sandbox's directory. */
static int sbx_getattr(const struct op_call *c)
{
	sbfs_synth_stat(c->fs, c->st, true, 0555, 0);
	return 0;
}

/* A sandbox's entries: the layout's fixed names. */
static int sbx_readdir(const struct op_call *c)
{
	static const char *const entries[] = {"files", "exec", "jobs",
					      "info",  "ctl",  "events"};
	size_t i;

	c->filler(c->dir, ".", NULL, 0, 0);
	c->filler(c->dir, "..", NULL, 0, 0);
	for (i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
		c->filler(c->dir, entries[i], NULL, 0, 0);
	return 0;
}

/* files/ and below: the sandbox's tree table (fs_files or fs_files_v1). */
static int files_getattr(const struct op_call *c)
{
	if (*c->n->rel != '\0')
		return sbfs_tree_ops(c->sb)->getattr(c->sb, c->n->rel, c->st,
						     c->fi);
	/* The session root's own attributes would need the agent (and a
	 * resume); its directory is shown as the mount's. */
	sbfs_synth_stat(c->fs, c->st, true, 0755, 0);
	return 0;
}

static int files_readdir(const struct op_call *c)
{
	return sbfs_tree_ops(c->sb)->readdir(c->sb, c->n->rel, c->dir,
					     c->filler, c->off, c->fi, c->fl);
}

static int files_readlink(const struct op_call *c)
{
	return sbfs_tree_ops(c->sb)->readlink(c->sb, c->n->rel, c->buf,
					      c->size);
}

static int files_open(const struct op_call *c)
{
	int rc = *c->n->rel == '\0'
			 ? -EISDIR
			 : sbfs_tree_ops(c->sb)->open(c->sb, c->n->rel, c->fi);

	/* A reader has nothing to flush: spare close(2) a round trip
	 * (FOPEN_NOFLUSH). */
	if (rc == 0 && (c->fi->flags & O_ACCMODE) == O_RDONLY)
		c->fi->noflush = 1;
	return rc;
}

static int files_read(const struct op_call *c)
{
	return sbfs_tree_ops(c->sb)->read(c->sb, c->n->rel, c->buf, c->size,
					  c->off, c->fi);
}

static int files_write(const struct op_call *c)
{
	return sbfs_tree_ops(c->sb)->write(c->sb, c->n->rel, c->data, c->size,
					   c->off, c->fi);
}

static int files_flush(const struct op_call *c)
{
	return sbfs_tree_ops(c->sb)->flush(c->sb, c->n->rel, c->fi);
}

static int files_release(const struct op_call *c)
{
	return sbfs_tree_ops(c->sb)->release(c->sb, c->n->rel, c->fi);
}

static int files_fsync(const struct op_call *c)
{
	return sbfs_tree_ops(c->sb)->fsync(c->sb, c->n->rel, c->datasync,
					   c->fi);
}

/* exec (fs_jobs). */
static int exec_getattr(const struct op_call *c)
{
	return fs_exec_getattr(c->sb, c->st);
}

static int exec_open(const struct op_call *c)
{
	return fs_exec_open(c->sb, c->fi);
}

static int exec_read(const struct op_call *c)
{
	return fs_exec_read(c->sb, c->buf, c->size, c->off, c->fi);
}

static int exec_write(const struct op_call *c)
{
	return fs_exec_write(c->sb, c->data, c->size, c->off, c->fi);
}

static int exec_flush(const struct op_call *c)
{
	return fs_exec_flush(c->sb, c->fi);
}

static int exec_release(const struct op_call *c)
{
	return fs_exec_release(c->sb, c->fi);
}

/* jobs/, jobs/latest and jobs/<job>[/file] (fs_jobs): the job a node
 * names, none for jobs/ itself. */
static const char *job_id(const struct node *n)
{
	return n->kind == N_JOBS ? NULL : n->job;
}

static int jobs_getattr(const struct op_call *c)
{
	return fs_jobs_getattr(c->sb, job_id(c->n), c->n->jf, c->st);
}

static int jobs_readdir(const struct op_call *c)
{
	if (c->n->jf != FS_JOB_DIR)
		return -ENOTDIR;
	return fs_jobs_readdir(c->sb, job_id(c->n), c->dir, c->filler);
}

static int latest_readlink(const struct op_call *c)
{
	return fs_jobs_readlink(c->sb, c->buf, c->size);
}

static int job_open(const struct op_call *c)
{
	if (c->n->jf == FS_JOB_DIR)
		return -EISDIR;
	return fs_jobs_open(c->sb, c->n->job, c->n->jf, c->fi);
}

static int job_read(const struct op_call *c)
{
	return fs_jobs_read(c->sb, c->n->job, c->n->jf, c->buf, c->size, c->off,
			    c->fi);
}

static int job_write(const struct op_call *c)
{
	return fs_jobs_write(c->sb, c->n->job, c->n->jf, c->data, c->size,
			     c->off, c->fi);
}

static int job_release(const struct op_call *c)
{
	return fs_jobs_release(c->sb, c->n->job, c->n->jf, c->fi);
}

/* info and ctl (fs_info). */
static int info_getattr(const struct op_call *c)
{
	return fs_info_getattr(c->sb, c->n->kind == N_CTL, c->st);
}

static int info_open(const struct op_call *c)
{
	return fs_info_open(c->sb, c->n->kind == N_CTL, c->fi);
}

static int info_read(const struct op_call *c)
{
	return fs_info_read(c->sb, c->n->kind == N_CTL, c->buf, c->size, c->off,
			    c->fi);
}

static int info_write(const struct op_call *c)
{
	return fs_info_write(c->sb, c->n->kind == N_CTL, c->data, c->size,
			     c->off, c->fi);
}

static int info_release(const struct op_call *c)
{
	return fs_info_release(c->sb, c->n->kind == N_CTL, c->fi);
}

/* events (events.c); its reads wait outside any sandbox (fs_read). */
static int events_getattr(const struct op_call *c)
{
	/* The names of what changes, as private as exec's jobs
	 * (SEMANTICS.md, sharing). */
	sbfs_synth_stat(c->fs, c->st, false, c->fs->o.shared_exec ? 0444 : 0400,
			0);
	return 0;
}

static int events_open(const struct op_call *c)
{
	return fs_events_open(c->sb, c->fi);
}

static int events_release(const struct op_call *c)
{
	return fs_events_release(c->sb, c->fi);
}

/* Each kind of node's handler of each operation, in the order of enum
 * node_op; NULL: the operation's answer for the kind is node_ops[].none.
 * The root is answered by the operations themselves. */
/* clang-format off */
static node_fn *const kind_ops[][OP_COUNT] = {
	/*           getattr         readdir        readlink         open         read         write         flush          release          fsync */
	[N_SBX]    = {sbx_getattr,    sbx_readdir},
	[N_FILES]  = {files_getattr,  files_readdir, files_readlink,  files_open,  files_read,  files_write,  files_flush,   files_release,   files_fsync},
	[N_EXEC]   = {exec_getattr,   NULL,          NULL,            exec_open,   exec_read,   exec_write,   exec_flush,    exec_release,    node_nothing},
	[N_JOBS]   = {jobs_getattr,   jobs_readdir},
	[N_LATEST] = {jobs_getattr,   NULL,          latest_readlink},
	[N_JOB]    = {jobs_getattr,   jobs_readdir,  NULL,            job_open,    job_read,    job_write,    node_nothing,  job_release,     node_nothing},
	[N_INFO]   = {info_getattr,   NULL,          NULL,            info_open,   info_read,   info_write,   node_nothing,  info_release,    node_nothing},
	[N_CTL]    = {info_getattr,   NULL,          NULL,            info_open,   info_read,   info_write,   node_nothing,  info_release,    node_nothing},
	[N_EVENTS] = {events_getattr, NULL,          NULL,            events_open, NULL,        NULL,         NULL,          events_release},
};
/* clang-format on */

/* Call the handler of op for the call's node, in the sandbox c->sb. */
static int node_call(const struct op_call *c, enum node_op op)
{
	node_fn *fn = kind_ops[c->n->kind][op];

	return fn != NULL ? fn(c) : node_ops[op].none;
}

/* Run op on the call's node: start its deadline, enter the sandbox (full:
 * with the agent, else only look), call the node's handler, leave. */
static int node_run(struct op_call *c, enum node_op op, bool full)
{
	int rc;

	if (node_ops[op].early && kind_ops[c->n->kind][op] == NULL)
		return node_ops[op].none;
	op_begin(c->fs, c->n);
	rc = enter(c->fs, c->n, node_ops[op].name, full, &c->sb);
	if (rc < 0)
		return rc;
	rc = node_call(c, op);
	sbfs_leave(c->sb);
	return rc;
}

/* ---- attributes and directories ----------------------------------------- */

static int fs_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	struct node n;
	struct op_call c = {.fs = ctx_fs(), .n = &n, .st = st, .fi = fi};
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	if (n.kind == N_ROOT) {
		sbfs_synth_stat(c.fs, st, true, 0555, 0);
		return 0;
	}
	/* Only a path below files/ asks the agent. */
	return node_run(&c, OP_GETATTR, n.kind == N_FILES && *n.rel != '\0');
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

/* The root's entries: the provider's sandboxes. */
static int root_readdir(struct sbfs *fs, void *buf, fuse_fill_dir_t filler)
{
	char **ids = NULL;
	size_t i, nids = 0;
	int rc = sbfs_list(fs, &ids, &nids);

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
	strv_free(ids, nids);
	return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags fl)
{
	struct node n;
	struct op_call c = {.fs = ctx_fs(),
			    .n = &n,
			    .dir = buf,
			    .filler = filler,
			    .off = off,
			    .fi = fi,
			    .fl = fl};
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	if (n.kind == N_ROOT) {
		op_begin(c.fs, &n);
		return root_readdir(c.fs, buf, filler);
	}
	return node_run(&c, OP_READDIR, n.kind != N_SBX);
}

static int fs_readlink(const char *path, char *buf, size_t size)
{
	struct node n;
	struct op_call c = {.fs = ctx_fs(), .n = &n, .buf = buf, .size = size};
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	/* Only files/ and jobs/latest have links (early: -EINVAL). */
	return node_run(&c, OP_READLINK, true);
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

/* Run op on an open file by its path's node: info and ctl answer without
 * the agent. */
static int open_file_op(const char *path, enum node_op op, struct op_call *c)
{
	struct node n;
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	c->fs = ctx_fs();
	c->n = &n;
	return node_run(c, op, n.kind != N_INFO && n.kind != N_CTL);
}

/*
 * Open files remember which subtree they belong to, so that read, write
 * and release reach the same module whatever happened to the path.
 */
static int fs_open(const char *path, struct fuse_file_info *fi)
{
	struct op_call c = {.fi = fi};

	/* The root, a sandbox, jobs/ and jobs/latest have no open: they
	 * are directories (early: -EISDIR). */
	return open_file_op(path, OP_OPEN, &c);
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	FILES_OP("create", create(sb, n.rel, mode, fi));
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct op_call c = {.buf = buf, .size = size, .off = off, .fi = fi};
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
	return open_file_op(path, OP_READ, &c);
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct op_call c = {.data = buf, .size = size, .off = off, .fi = fi};

	return open_file_op(path, OP_WRITE, &c);
}

static int fs_flush(const char *path, struct fuse_file_info *fi)
{
	struct op_call c = {.fi = fi};

	return open_file_op(path, OP_FLUSH, &c);
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	struct node n;
	struct op_call c = {.fs = ctx_fs(), .n = &n, .fi = fi};
	int rc = fs_parse(path, &n);

	if (rc < 0)
		return rc;
	/* A release must reach its module even when the sandbox is gone or
	 * unreachable: it frees the handle. The sandbox is known to the
	 * mount, since something was opened in it. */
	op_begin(c.fs, &n);
	c.sb = sbfs_known(c.fs, n.id);
	if (c.sb == NULL) {
		log_debug("release of %s in an unknown sandbox", path);
		return 0;
	}
	rc = node_call(&c, OP_RELEASE);
	sbfs_leave(c.sb);
	return rc;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct op_call c = {.datasync = datasync, .fi = fi};

	return open_file_op(path, OP_FSYNC, &c);
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
