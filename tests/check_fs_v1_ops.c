/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_v1_ops: the operations of files/ without the file extension
 * (fs_files_v1.c), called without FUSE: against a real sandbox-agent in
 * --strict-v1 mode (through the transport core), and against native
 * sessions (the local provider, and a provider that can only read
 * files). The pure parts (record parser, errno table, quoting, the
 * per-open buffer) are check_fs_v1.c's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "fs/fs_files_v1_i.h"
#include "fs/fs_i.h"
#include "client/local_ctl.h"
#include "client/local_state.h"
#include "client/provider_local.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/fs_helpers.h"
#include "tests/helpers.h"
#include "tests/stub_provider.h"

/* ---- the operations: common fixture parts -------------------------------- */

static struct tf_mount tm;
static struct sbfs *mnt;
static struct sbx *box;
static const struct fs_tree_ops *ops = &fs_files_v1_ops;

static void mount_make(struct provider *prov, struct transport *t,
		       enum transport_kind kind)
{
	tf_mount_make(&tm, prov, t, kind, 1.0);
	mnt = tm.fs;
	box = tm.sb;
}

static void mount_free(void)
{
	tf_mount_free(&tm);
	mnt = NULL;
	box = NULL;
}

struct listing {
	size_t n;
	char *names[64];
	struct stat st[64];
	bool plus[64];
};

static int collect(void *buf, const char *name, const struct stat *st,
		   off_t off, enum fuse_fill_dir_flags fl)
{
	struct listing *l = buf;

	(void)off;
	ck_assert(l->n < 64);
	l->names[l->n] = xstrdup(name);
	if (st != NULL)
		l->st[l->n] = *st;
	else
		memset(&l->st[l->n], 0, sizeof(l->st[l->n]));
	l->plus[l->n] = (fl & FUSE_FILL_DIR_PLUS) != 0;
	l->n++;
	return 0;
}

static int list(const char *rel, struct listing *l, bool plus)
{
	memset(l, 0, sizeof(*l));
	return ops->readdir(box, rel, l, collect, 0, NULL,
			    plus ? FUSE_READDIR_PLUS : 0);
}

/* The entry called name, or -1. */
static int listed(const struct listing *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return (int)i;
	return -1;
}

static void listing_free(struct listing *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->names[i]);
	l->n = 0;
}

static void fi_init(struct fuse_file_info *fi, int flags)
{
	memset(fi, 0, sizeof(*fi));
	fi->flags = flags;
}

/* Open, read all of it (up to size - 1 bytes), release. */
static int read_all(const char *rel, char *out, size_t size)
{
	struct fuse_file_info fi;
	int rc, n;

	fi_init(&fi, O_RDONLY);
	rc = ops->open(box, rel, &fi);
	if (rc < 0)
		return rc;
	n = ops->read(box, rel, out, size - 1, 0, &fi);
	ck_assert_int_eq(ops->flush(box, rel, &fi), 0);
	ck_assert_int_eq(ops->release(box, rel, &fi), 0);
	if (n >= 0)
		out[n] = '\0';
	return n;
}

/* ---- against a strict v1 agent ------------------------------------------- */

static struct th_agent agent, small_agent;
static char *agent_parent, *agent_root, *small_parent, *small_root;
/* Who the agent's commands and file accesses run as. */
static uid_t exec_uid;

/*
 * Start a strict v1 agent a on a fresh root (*root, in the directory
 * *parent) named after tag; output_cap, when not NULL, is its
 * --output-cap.
 */
static void strict_start(struct th_agent *a, char **parent, char **root,
			 const char *tag, const char *output_cap)
{
	const char *args[] = {"--root", NULL, "--strict-v1", NULL, NULL, NULL};

	exec_uid = geteuid() == 0 ? 65534 : geteuid();
	*parent = th_tmpdir(tag);
	ck_assert_int_eq(chmod(*parent, 0711), 0);
	ck_assert(asprintf(root, "%s/root", *parent) > 0);
	ck_assert_int_eq(mkdir(*root, 0777), 0);
	ck_assert_int_eq(chmod(*root, 0777), 0);
	args[1] = *root;
	if (output_cap != NULL) {
		args[3] = "--output-cap";
		args[4] = output_cap;
	}
	th_agent_start(a, args, false);
}

static void strict_stop(struct th_agent *a, char *parent, char *root)
{
	th_agent_stop(a);
	th_rmtree(parent);
	free(parent);
	free(root);
}

static void agent_start(void)
{
	strict_start(&agent, &agent_parent, &agent_root, "fsv1agent", NULL);
}

static void agent_stop(void)
{
	strict_stop(&agent, agent_parent, agent_root);
}

/* An agent that keeps 2 KiB of a command's output. */
static void small_start(void)
{
	strict_start(&small_agent, &small_parent, &small_root, "fsv1small",
		     "2048");
}

static void small_stop(void)
{
	strict_stop(&small_agent, small_parent, small_root);
}

static const char *root_now;

static void agent_mount(const struct th_agent *a, const char *root)
{
	tf_mount_agent(&tm, a, 1.0);
	mnt = tm.fs;
	box = tm.sb;
	root_now = root;
}

static void agent_setup(void)
{
	agent_mount(&agent, agent_root);
}

static void small_setup(void)
{
	agent_mount(&small_agent, small_root);
}

static void agent_teardown(void)
{
	mount_free();
}

/* A path in the agent's root. */
static const char *on_disk(const char *rel)
{
	static char path[2][PATH_MAX];
	static int which;

	which ^= 1;
	snprintf(path[which], sizeof(path[which]), "%s/%s", root_now, rel);
	return path[which];
}

/* A fixture file made by the test, handed to the agent's user. */
static void put(const char *rel, const char *data)
{
	th_write_file(on_disk(rel), data, strlen(data));
	if (geteuid() == 0)
		ck_assert_int_eq(lchown(on_disk(rel), exec_uid, exec_uid), 0);
}

static void put_dir(const char *rel)
{
	ck_assert_int_eq(mkdir(on_disk(rel), 0755), 0);
	if (geteuid() == 0)
		ck_assert_int_eq(lchown(on_disk(rel), exec_uid, exec_uid), 0);
}

/* The file rel in the agent's root holds want. */
static void expect_on_disk(const char *rel, const char *want)
{
	char *s = th_read_file(on_disk(rel), NULL);

	ck_assert_msg(s != NULL, "%s is missing", rel);
	ck_assert_str_eq(s, want);
	free(s);
}

START_TEST(agent_write_and_list)
{
	struct fuse_file_info fi;
	struct listing l;
	struct stat st;
	char buf[64];
	int i;

	put_dir("w");
	/* create: the file exists at once, with the mode asked for. */
	fi_init(&fi, O_WRONLY | O_CREAT);
	ck_assert_int_eq(ops->create(box, "w/a b", 0640, &fi), 0);
	ck_assert_int_eq(lstat(on_disk("w/a b"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(ops->write(box, "w/a b", "hello", 5, 0, &fi), 5);
	ck_assert_int_eq(ops->write(box, "w/a b", " world", 6, 5, &fi), 6);
	/* Not sent yet, but a stat by path sees the buffered size. */
	ck_assert_int_eq(lstat(on_disk("w/a b"), &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(ops->getattr(box, "w/a b", &st, NULL), 0);
	ck_assert_int_eq(st.st_size, 11);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(ops->flush(box, "w/a b", &fi), 0);
	expect_on_disk("w/a b", "hello world");
	ck_assert_int_eq(ops->release(box, "w/a b", &fi), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);

	/* Read it back through a new open. */
	ck_assert_int_eq(read_all("w/a b", buf, sizeof(buf)), 11);
	ck_assert_str_eq(buf, "hello world");

	/* A create with 0666 needs no chmod (the agent's umask applies). */
	fi_init(&fi, O_WRONLY | O_CREAT);
	ck_assert_int_eq(ops->create(box, "w/plain", 0666, &fi), 0);
	ck_assert_int_eq(ops->release(box, "w/plain", &fi), 0);
	ck_assert_int_eq(lstat(on_disk("w/plain"), &st), 0);
	ck_assert_int_eq(st.st_size, 0);

	/* Names that need care, made on disk. */
	put("w/new\nline", "1");
	put("w/-dash", "22");
	put("w/quo'te\"", "333");
	put("w/\xff\xfe", "4444");
	ck_assert_int_eq(symlink("target with space", on_disk("w/sl")), 0);
	ck_assert_int_eq(list("w", &l, true), 0);
	ck_assert_uint_eq(l.n, 2 + 7);
	ck_assert_int_ge(listed(&l, "."), 0);
	ck_assert_int_ge(listed(&l, ".."), 0);
	i = listed(&l, "new\nline");
	ck_assert_int_ge(i, 0);
	ck_assert(l.plus[i]);
	ck_assert(S_ISREG(l.st[i].st_mode));
	ck_assert_int_eq(l.st[i].st_size, 1);
	i = listed(&l, "-dash");
	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(l.st[i].st_size, 2);
	/* A v1 agent does not say whom it acts as: its files are shown as
	 * the mounting user's (SEMANTICS.md, ownership). */
	ck_assert_int_eq(l.st[i].st_uid, getuid());
	ck_assert_int_eq(l.st[i].st_gid, getgid());
	i = listed(&l, "quo'te\"");
	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(l.st[i].st_size, 3);
	i = listed(&l, "\xff\xfe");
	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(l.st[i].st_size, 4);
	i = listed(&l, "sl");
	ck_assert_int_ge(i, 0);
	ck_assert(S_ISLNK(l.st[i].st_mode));
	i = listed(&l, "a b");
	ck_assert_int_ge(i, 0);
	ck_assert_uint_eq(l.st[i].st_mode & 07777, 0640);
	ck_assert_int_eq(l.st[i].st_size, 11);
	listing_free(&l);

	/* Without readdir-plus the entries come without the flag. */
	ck_assert_int_eq(list("w", &l, false), 0);
	i = listed(&l, "a b");
	ck_assert_int_ge(i, 0);
	ck_assert(!l.plus[i]);
	listing_free(&l);

	/* The root lists too. */
	ck_assert_int_eq(list("", &l, true), 0);
	ck_assert_int_ge(listed(&l, "w"), 0);
	listing_free(&l);

	/* readlink, from the listing's cache and from the agent. */
	ck_assert_int_eq(ops->readlink(box, "w/sl", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "target with space");
	ck_assert_int_eq(ops->readlink(box, "w/sl", buf, 7), 0);
	ck_assert_str_eq(buf, "target");
	ck_assert_int_eq(ops->readlink(box, "w/a b", buf, sizeof(buf)),
			 -EINVAL);
	ck_assert_int_eq(ops->readlink(box, "w/missing", buf, sizeof(buf)),
			 -ENOENT);

	/* getattr */
	ck_assert_int_eq(ops->getattr(box, "w/-dash", &st, NULL), 0);
	ck_assert_int_eq(st.st_size, 2);
	ck_assert_int_eq(ops->getattr(box, "w/missing", &st, NULL), -ENOENT);
	ck_assert_int_eq(ops->getattr(box, "w", &st, NULL), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(list("w/missing", &l, true), -ENOENT);
}
END_TEST

/* Open REL with FLAGS, write DATA at offset 0, flush when FLUSH, release:
 * the file on disk then holds WANT. */
static void write_release(const char *rel, int flags, const char *data,
			  bool flush, const char *want)
{
	struct fuse_file_info fi;
	int len = (int)strlen(data);

	fi_init(&fi, flags);
	ck_assert_int_eq(ops->open(box, rel, &fi), 0);
	ck_assert_int_eq(ops->write(box, rel, data, (size_t)len, 0, &fi), len);
	if (flush)
		ck_assert_int_eq(ops->flush(box, rel, &fi), 0);
	ck_assert_int_eq(ops->release(box, rel, &fi), 0);
	expect_on_disk(rel, want);
}

START_TEST(agent_open_modes)
{
	struct fuse_file_info fi;
	struct stat st;
	char buf[64];

	put_dir("o");
	put("o/f", "hello");
	/* O_APPEND writes land at the end whatever offset comes. */
	write_release("o/f", O_WRONLY | O_APPEND, "XYZ", true, "helloXYZ");

	/* O_RDWR: a write in the middle keeps the rest. */
	fi_init(&fi, O_RDWR);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->write(box, "o/f", "J", 1, 0, &fi), 1);
	ck_assert_int_eq(ops->read(box, "o/f", buf, sizeof(buf), 0, &fi), 8);
	ck_assert(memcmp(buf, "JelloXYZ", 8) == 0);
	/* ftruncate acts on the buffer. */
	ck_assert_int_eq(ops->truncate(box, "o/f", 4, &fi), 0);
	ck_assert_int_eq(ops->fsync(box, "o/f", 0, &fi), 0);
	expect_on_disk("o/f", "Jell");
	ck_assert_int_eq(ops->release(box, "o/f", &fi), 0);

	/* O_TRUNC without a write still empties the file at close. */
	fi_init(&fi, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->getattr(box, "o/f", &st, &fi), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(ops->flush(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->release(box, "o/f", &fi), 0);
	ck_assert_int_eq(lstat(on_disk("o/f"), &st), 0);
	ck_assert_int_eq(st.st_size, 0);

	/* Changes made after the last flush go out at release. */
	write_release("o/f", O_WRONLY, "late", false, "late");

	/* Errors at open. */
	fi_init(&fi, O_RDONLY);
	ck_assert_int_eq(ops->open(box, "o/missing", &fi), -ENOENT);
	ck_assert_int_eq(ops->open(box, "o", &fi), -EISDIR);
	/* Over 32 MiB: EFBIG at open, for reading and for changing. */
	ck_assert_int_eq(truncate(on_disk("o/f"), 32 * 1024 * 1024 + 1), 0);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), -EFBIG);
	fi_init(&fi, O_RDWR);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), -EFBIG);
	/* Exactly 32 MiB is fine; a write past it is EFBIG. */
	ck_assert_int_eq(truncate(on_disk("o/f"), 32 * 1024 * 1024), 0);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), 0);
	ck_assert_int_eq(
		ops->read(box, "o/f", buf, 4, 32 * 1024 * 1024 - 2, &fi), 2);
	ck_assert_int_eq(ops->write(box, "o/f", "x", 1, 32 * 1024 * 1024, &fi),
			 -EFBIG);
	ck_assert_int_eq(ops->release(box, "o/f", &fi), 0);
	/* Through O_TRUNC a large file can still be replaced. */
	ck_assert_int_eq(truncate(on_disk("o/f"), 32 * 1024 * 1024 + 1), 0);
	write_release("o/f", O_WRONLY | O_TRUNC, "small", true, "small");
}
END_TEST

START_TEST(agent_tree_changes)
{
	struct fuse_file_info fi;
	struct listing l;
	struct stat st;
	char buf[64];

	put_dir("t");
	/* mkdir: the mode asked for; an existing path is EEXIST. */
	ck_assert_int_eq(ops->mkdir(box, "t/d", 0750), 0);
	ck_assert_int_eq(lstat(on_disk("t/d"), &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(ops->mkdir(box, "t/d", 0750), -EEXIST);
	ck_assert_int_eq(ops->mkdir(box, "t/-m", 0777), 0);
	ck_assert_int_eq(lstat(on_disk("t/-m"), &st), 0);
	ck_assert(S_ISDIR(st.st_mode));

	/* A listing's cached entries do not hide a change made here. */
	ck_assert_int_eq(list("t", &l, true), 0);
	listing_free(&l);
	put("t/f", "content");
	ck_assert_int_eq(ops->getattr(box, "t/f", &st, NULL), 0);

	/* rename, plain and without replacing. */
	ck_assert_int_eq(ops->rename(box, "t/f", "t/g", 0), 0);
	ck_assert_int_eq(lstat(on_disk("t/f"), &st), -1);
	expect_on_disk("t/g", "content");
	ck_assert_int_eq(ops->getattr(box, "t/f", &st, NULL), -ENOENT);
	put("t/h", "other");
	ck_assert_int_eq(ops->rename(box, "t/h", "t/g", RENAME_NOREPLACE),
			 -EEXIST);
	expect_on_disk("t/h", "other");
	ck_assert_int_eq(ops->rename(box, "t/h", "t/i", RENAME_NOREPLACE), 0);
	ck_assert_int_eq(lstat(on_disk("t/i"), &st), 0);
	ck_assert_int_eq(ops->rename(box, "t/i", "t/g", RENAME_EXCHANGE),
			 -EINVAL);
	ck_assert_int_eq(ops->rename(box, "t/d", "t/d/sub", 0), -EINVAL);
	ck_assert_int_eq(ops->rename(box, "t/missing", "t/x", 0), -ENOENT);
	/* Over a file: replaced, as rename(2) does. */
	ck_assert_int_eq(ops->rename(box, "t/i", "t/g", 0), 0);
	expect_on_disk("t/g", "other");

	/* link and symlink. */
	ck_assert_int_eq(ops->link(box, "t/g", "t/g2"), 0);
	ck_assert_int_eq(lstat(on_disk("t/g"), &st), 0);
	ck_assert_uint_eq(st.st_nlink, 2);
	ck_assert_int_eq(ops->getattr(box, "t/g", &st, NULL), 0);
	ck_assert_uint_eq(st.st_nlink, 2);
	ck_assert_int_eq(ops->link(box, "t/g", "t/g2"), -EEXIST);
	ck_assert_int_eq(ops->symlink(box, "-target 'x'", "t/s"), 0);
	ck_assert_int_eq(readlink(on_disk("t/s"), buf, sizeof(buf)), 11);
	ck_assert(memcmp(buf, "-target 'x'", 11) == 0);
	ck_assert_int_eq(ops->readlink(box, "t/s", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "-target 'x'");
	ck_assert_int_eq(ops->symlink(box, "y", "t/s"), -EEXIST);

	/* chmod, truncate by path. */
	ck_assert_int_eq(ops->chmod(box, "t/g", 0600, NULL), 0);
	ck_assert_int_eq(lstat(on_disk("t/g"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(ops->chmod(box, "t/d", 02750, NULL), 0);
	ck_assert_int_eq(ops->chmod(box, "t/d", 0750, NULL), 0);
	ck_assert_int_eq(lstat(on_disk("t/d"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(ops->chmod(box, "t/missing", 0600, NULL), -ENOENT);
	ck_assert_int_eq(ops->truncate(box, "t/g", 2, NULL), 0);
	expect_on_disk("t/g", "ot");
	ck_assert_int_eq(ops->getattr(box, "t/g", &st, NULL), 0);
	ck_assert_int_eq(st.st_size, 2);

	/* unlink and rmdir. */
	ck_assert_int_eq(ops->unlink(box, "t/g2"), 0);
	ck_assert_int_eq(lstat(on_disk("t/g2"), &st), -1);
	ck_assert_int_eq(ops->unlink(box, "t/g2"), -ENOENT);
	ck_assert_int_eq(ops->unlink(box, "t/d"), -EISDIR);
	put("t/d/inner", "x");
	ck_assert_int_eq(ops->rmdir(box, "t/d"), -ENOTEMPTY);
	ck_assert_int_eq(ops->rmdir(box, "t/g"), -ENOTDIR);
	ck_assert_int_eq(ops->unlink(box, "t/d/inner"), 0);
	ck_assert_int_eq(ops->rmdir(box, "t/d"), 0);
	ck_assert_int_eq(lstat(on_disk("t/d"), &st), -1);
	ck_assert_int_eq(ops->getattr(box, "t/d", &st, NULL), -ENOENT);

	/* create over a name that needs care. */
	fi_init(&fi, O_WRONLY | O_CREAT);
	ck_assert_int_eq(ops->create(box, "t/-x 'y'\n", 0600, &fi), 0);
	ck_assert_int_eq(ops->write(box, "t/-x 'y'\n", "z", 1, 0, &fi), 1);
	ck_assert_int_eq(ops->release(box, "t/-x 'y'\n", &fi), 0);
	expect_on_disk("t/-x 'y'\n", "z");
}
END_TEST

START_TEST(agent_times_and_statfs)
{
	struct timespec tv[2];
	struct fuse_file_info fi;
	struct statvfs sv;
	struct stat st;

	put_dir("u");
	put("u/f", "x");
	tv[0].tv_sec = 1000;
	tv[0].tv_nsec = 500000000;
	tv[1].tv_sec = 2000;
	tv[1].tv_nsec = 250;
	ck_assert_int_eq(ops->utimens(box, "u/f", tv, NULL), 0);
	ck_assert_int_eq(lstat(on_disk("u/f"), &st), 0);
	ck_assert_int_eq(st.st_atim.tv_sec, 1000);
	ck_assert_int_eq(st.st_atim.tv_nsec, 500000000);
	ck_assert_int_eq(st.st_mtim.tv_sec, 2000);
	ck_assert_int_eq(st.st_mtim.tv_nsec, 250);
	ck_assert_int_eq(ops->getattr(box, "u/f", &st, NULL), 0);
	ck_assert_int_eq(st.st_mtim.tv_sec, 2000);
	ck_assert_int_eq(st.st_mtim.tv_nsec, 250);
	/* Only mtime; atime untouched. A time before 1970. */
	tv[0].tv_nsec = UTIME_OMIT;
	tv[1].tv_sec = -2;
	tv[1].tv_nsec = 750000000;
	ck_assert_int_eq(ops->utimens(box, "u/f", tv, NULL), 0);
	ck_assert_int_eq(lstat(on_disk("u/f"), &st), 0);
	ck_assert_int_eq(st.st_atim.tv_sec, 1000);
	ck_assert_int_eq(st.st_mtim.tv_sec, -2);
	ck_assert_int_eq(st.st_mtim.tv_nsec, 750000000);
	/* Both the same: one touch. Both now. */
	tv[0].tv_sec = tv[1].tv_sec = 3000;
	tv[0].tv_nsec = tv[1].tv_nsec = 0;
	ck_assert_int_eq(ops->utimens(box, "u/f", tv, NULL), 0);
	ck_assert_int_eq(lstat(on_disk("u/f"), &st), 0);
	ck_assert_int_eq(st.st_atim.tv_sec, 3000);
	ck_assert_int_eq(st.st_mtim.tv_sec, 3000);
	tv[0].tv_nsec = tv[1].tv_nsec = UTIME_NOW;
	ck_assert_int_eq(ops->utimens(box, "u/f", tv, NULL), 0);
	ck_assert_int_eq(lstat(on_disk("u/f"), &st), 0);
	ck_assert_int_gt(st.st_mtim.tv_sec, 1000000000);
	tv[0].tv_nsec = tv[1].tv_nsec = UTIME_OMIT;
	ck_assert_int_eq(ops->utimens(box, "u/f", tv, NULL), 0);
	/* A symlink's own times (touch -h). */
	ck_assert_int_eq(symlink("nowhere", on_disk("u/l")), 0);
	if (geteuid() == 0)
		ck_assert_int_eq(lchown(on_disk("u/l"), exec_uid, exec_uid), 0);
	tv[0].tv_sec = tv[1].tv_sec = 4000;
	tv[0].tv_nsec = tv[1].tv_nsec = 0;
	ck_assert_int_eq(ops->utimens(box, "u/l", tv, NULL), 0);
	ck_assert_int_eq(lstat(on_disk("u/l"), &st), 0);
	ck_assert_int_eq(st.st_mtim.tv_sec, 4000);
	ck_assert_int_eq(ops->utimens(box, "u/missing", tv, NULL), -ENOENT);

	/* cp -p: times set by path while the contents are still buffered
	 * must survive the close. */
	fi_init(&fi, O_WRONLY | O_CREAT);
	ck_assert_int_eq(ops->create(box, "u/cp", 0644, &fi), 0);
	ck_assert_int_eq(ops->write(box, "u/cp", "data", 4, 0, &fi), 4);
	tv[0].tv_sec = tv[1].tv_sec = 5000;
	ck_assert_int_eq(ops->utimens(box, "u/cp", tv, NULL), 0);
	ck_assert_int_eq(ops->flush(box, "u/cp", &fi), 0);
	ck_assert_int_eq(ops->release(box, "u/cp", &fi), 0);
	ck_assert_int_eq(lstat(on_disk("u/cp"), &st), 0);
	ck_assert_int_eq(st.st_size, 4);
	ck_assert_int_eq(st.st_mtim.tv_sec, 5000);

	memset(&sv, 0, sizeof(sv));
	ck_assert_int_eq(ops->statfs(box, "", &sv), 0);
	ck_assert_uint_gt(sv.f_bsize, 0);
	ck_assert_uint_gt(sv.f_blocks, 0);
	ck_assert_uint_eq(sv.f_namemax, 255);
	ck_assert_int_eq(ops->statfs(box, "u/missing", &sv), -ENOENT);
}
END_TEST

struct writer {
	struct fuse_file_info *fi;
	int index;
	int rc;
};

/* Each writer fills its own 4 KiB stripe, flushing now and then. */
static void *write_stripe(void *arg)
{
	struct writer *w = arg;
	char block[512];
	int k;

	memset(block, 'a' + w->index, sizeof(block));
	for (k = 0; k < 8 && w->rc == 0; k++) {
		off_t off = (off_t)w->index * 4096 + k * 512;

		if (ops->write(box, "c/f", block, sizeof(block), off, w->fi) !=
		    (int)sizeof(block))
			w->rc = -1;
		else if (k % 3 == 0 && ops->flush(box, "c/f", w->fi) != 0)
			w->rc = -2;
	}
	return NULL;
}

START_TEST(agent_concurrent_writes)
{
	struct fuse_file_info fi;
	struct writer w[4];
	pthread_t th[4];
	size_t len, i;
	char *text;
	int k;

	put_dir("c");
	fi_init(&fi, O_WRONLY | O_CREAT);
	ck_assert_int_eq(ops->create(box, "c/f", 0644, &fi), 0);
	for (k = 0; k < 4; k++) {
		w[k].fi = &fi;
		w[k].index = k;
		w[k].rc = 0;
		ck_assert_int_eq(
			pthread_create(&th[k], NULL, write_stripe, &w[k]), 0);
	}
	for (k = 0; k < 4; k++) {
		ck_assert_int_eq(pthread_join(th[k], NULL), 0);
		ck_assert_int_eq(w[k].rc, 0);
	}
	ck_assert_int_eq(ops->flush(box, "c/f", &fi), 0);
	ck_assert_int_eq(ops->release(box, "c/f", &fi), 0);
	text = th_read_file(on_disk("c/f"), &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(len, 4 * 4096);
	for (i = 0; i < len; i++)
		ck_assert_int_eq(text[i], 'a' + (int)(i / 4096));
	free(text);
}
END_TEST

START_TEST(agent_read_only_mount)
{
	struct fuse_file_info fi;

	put("ro", "x");
	mnt->o.ro = true;
	fi_init(&fi, O_WRONLY);
	ck_assert_int_eq(ops->open(box, "ro", &fi), -EROFS);
	ck_assert_int_eq(ops->mkdir(box, "rod", 0755), -EROFS);
	ck_assert_int_eq(ops->unlink(box, "ro"), -EROFS);
	ck_assert_int_eq(access(on_disk("ro"), F_OK), 0);
}
END_TEST

/* A listing larger than the agent's output cap comes as names only. */
START_TEST(agent_listing_past_output_cap)
{
	struct listing l;
	char name[64];
	int i, k;

	put_dir("big");
	for (i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "big/entry-with-a-long-name-%02d",
			 i);
		put(name, "x");
	}
	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(list("big", &l, true), 0);
	ck_assert_uint_eq(l.n, 42);
	for (i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "entry-with-a-long-name-%02d", i);
		k = listed(&l, name);
		ck_assert_int_ge(k, 0);
		ck_assert(!l.plus[k]);
		ck_assert(S_ISREG(l.st[k].st_mode));
	}
	listing_free(&l);
}
END_TEST

/* ---- native sessions ----------------------------------------------------- */

static char *nat_base, *nat_state, *nat_root;

static void native_start(void)
{
	struct local_err err = {""};
	struct local_create_opts o = {.native = true};
	struct local_ctl ctl;

	nat_base = th_tmpdir("fsv1nat");
	ck_assert_int_eq(chmod(nat_base, 0711), 0);
	ck_assert(asprintf(&nat_state, "%s/state", nat_base) > 0);
	ck_assert_int_eq(mkdir(nat_state, 0711), 0);
	ck_assert_msg(local_ctl_init(&ctl, nat_state, &err) == 0, "%s",
		      err.msg);
	ck_assert_msg(local_ctl_create(&ctl, "demo", &o, &err) == 0, "%s",
		      err.msg);
	ck_assert_msg(local_ctl_start(&ctl, "demo", &err) == 0, "%s", err.msg);
	local_ctl_cleanup(&ctl);
	nat_root = local_state_path(nat_state, "demo", LOCAL_PATH_ROOT);
	/* The sandbox's own identity when root made it. */
	{
		struct stat st;

		ck_assert_int_eq(stat(nat_root, &st), 0);
		exec_uid = geteuid() == 0 ? st.st_uid : geteuid();
	}
}

static void native_stop(void)
{
	th_rmtree(nat_base);
	free(nat_base);
	free(nat_state);
	free(nat_root);
}

static struct provider *nat_prov;

static void native_setup(void)
{
	struct sbx_error err;

	sbx_error_clear(&err);
	ck_assert_int_eq(provider_local_new(nat_state, &nat_prov, &err), 0);
	mount_make(nat_prov, NULL, TRANSPORT_NATIVE);
	root_now = nat_root;
}

static void native_teardown(void)
{
	mount_free();
	provider_free(nat_prov);
	nat_prov = NULL;
}

START_TEST(native_reads)
{
	struct listing l;
	struct stat st;
	struct statvfs sv;
	char buf[64];
	int i;

	put_dir("it's dir");
	put("it's dir/a 'b'", "hello");
	put("it's dir/-dash", "");
	put("it's dir/new\nline", "nl");
	ck_assert_int_eq(symlink("t'gt", on_disk("it's dir/sl")), 0);
	ck_assert_int_eq(list("it's dir", &l, true), 0);
	ck_assert_uint_eq(l.n, 6);
	i = listed(&l, "a 'b'");
	ck_assert_int_ge(i, 0);
	ck_assert(l.plus[i]);
	ck_assert_int_eq(l.st[i].st_size, 5);
	ck_assert_int_ge(listed(&l, "-dash"), 0);
	ck_assert_int_ge(listed(&l, "new\nline"), 0);
	i = listed(&l, "sl");
	ck_assert_int_ge(i, 0);
	ck_assert(S_ISLNK(l.st[i].st_mode));
	listing_free(&l);
	ck_assert_int_eq(list("", &l, true), 0);
	ck_assert_int_ge(listed(&l, "it's dir"), 0);
	listing_free(&l);

	ck_assert_int_eq(ops->getattr(box, "it's dir/new\nline", &st, NULL), 0);
	ck_assert_int_eq(st.st_size, 2);
	ck_assert_int_eq(ops->getattr(box, "it's dir/missing", &st, NULL),
			 -ENOENT);
	ck_assert_int_eq(ops->readlink(box, "it's dir/sl", buf, sizeof(buf)),
			 0);
	ck_assert_str_eq(buf, "t'gt");
	ck_assert_int_eq(read_all("it's dir/a 'b'", buf, sizeof(buf)), 5);
	ck_assert_str_eq(buf, "hello");
	ck_assert_int_eq(read_all("it's dir/missing", buf, sizeof(buf)),
			 -ENOENT);
	ck_assert_int_eq(ops->statfs(box, "", &sv), 0);
	ck_assert_uint_gt(sv.f_bsize, 0);
	ck_assert_uint_eq(sv.f_namemax, 255);
}
END_TEST

START_TEST(native_is_read_only)
{
	struct fuse_file_info fi;
	struct timespec tv[2] = {{1, 0}, {1, 0}};

	put("f", "data");
	fi_init(&fi, O_WRONLY);
	ck_assert_int_eq(ops->open(box, "f", &fi), -EROFS);
	fi_init(&fi, O_RDWR);
	ck_assert_int_eq(ops->open(box, "f", &fi), -EROFS);
	fi_init(&fi, O_RDONLY | O_TRUNC);
	ck_assert_int_eq(ops->open(box, "f", &fi), -EROFS);
	fi_init(&fi, O_WRONLY | O_CREAT);
	ck_assert_int_eq(ops->create(box, "g", 0644, &fi), -EROFS);
	ck_assert_int_eq(ops->mkdir(box, "d", 0755), -EROFS);
	ck_assert_int_eq(ops->unlink(box, "f"), -EROFS);
	ck_assert_int_eq(ops->rmdir(box, "f"), -EROFS);
	ck_assert_int_eq(ops->rename(box, "f", "h", 0), -EROFS);
	ck_assert_int_eq(ops->link(box, "f", "h"), -EROFS);
	ck_assert_int_eq(ops->symlink(box, "f", "h"), -EROFS);
	ck_assert_int_eq(ops->chmod(box, "f", 0600, NULL), -EROFS);
	ck_assert_int_eq(ops->truncate(box, "f", 0, NULL), -EROFS);
	ck_assert_int_eq(ops->utimens(box, "f", tv, NULL), -EROFS);
	ck_assert_int_eq(access(on_disk("f"), F_OK), 0);
	ck_assert_int_eq(access(on_disk("g"), F_OK), -1);
	expect_on_disk("f", "data");
}
END_TEST

/* A provider that reads files in native sessions but runs nothing. */
static int readonly_read(struct provider *p, const char *id, const char *path,
			 struct buf *out, struct sbx_error *err)
{
	(void)p;
	(void)id;
	if (strcmp(path, "known") == 0)
		return buf_append_str(out, "known contents");
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
		      "no such file: %s", path);
	err->err = ENOENT;
	return -ENOENT;
}

static const struct provider_ops readonly_ops = {
	.name = "read-only",
	.native_read = readonly_read,
};

START_TEST(native_without_exec)
{
	struct provider prov = {&readonly_ops, NULL};
	struct listing l;
	struct stat st;
	struct statvfs sv;
	char buf[64];

	mount_make(&prov, NULL, TRANSPORT_NATIVE);
	ck_assert_int_eq(ops->getattr(box, "", &st, NULL), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(list("", &l, true), -EOPNOTSUPP);
	ck_assert_uint_eq(l.n, 0);
	ck_assert_int_eq(ops->getattr(box, "known", &st, NULL), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_size, 14);
	ck_assert_int_eq(ops->getattr(box, "other", &st, NULL), -ENOENT);
	ck_assert_int_eq(read_all("known", buf, sizeof(buf)), 14);
	ck_assert_str_eq(buf, "known contents");
	ck_assert_int_eq(ops->readlink(box, "known", buf, sizeof(buf)),
			 -EOPNOTSUPP);
	ck_assert_int_eq(ops->statfs(box, "", &sv), 0);
	ck_assert_uint_gt(sv.f_blocks, 0);
	ck_assert_int_eq(ops->mkdir(box, "d", 0755), -EROFS);
	mount_free();
}
END_TEST

void fs_v1_ops_cases(Suite *s)
{
	TCase *tc;

	tc = TCASE_TABLE(s, "agent", agent_setup, agent_teardown, 120,
			 agent_write_and_list, agent_open_modes,
			 agent_tree_changes, agent_times_and_statfs,
			 agent_read_only_mount, agent_concurrent_writes);
	tcase_add_unchecked_fixture(tc, agent_start, agent_stop);
	tc = TCASE_TABLE(s, "agent_small_cap", small_setup, agent_teardown, 60,
			 agent_listing_past_output_cap);
	tcase_add_unchecked_fixture(tc, small_start, small_stop);
	tc = TCASE_TABLE(s, "native", native_setup, native_teardown, 60,
			 native_reads, native_is_read_only);
	tcase_add_unchecked_fixture(tc, native_start, native_stop);
	TCASE_TABLE(s, "native_no_exec", NULL, NULL, 0, native_without_exec);
}
