/* SPDX-License-Identifier: MIT */
/*
 * fsops: confined filesystem primitives for the file extension. Paths are
 * resolved beneath the root by resolve.c; the operation itself is one *at()
 * call on the parent (last component not followed) or on a descriptor of
 * the resolved target. No HTTP, no JSON, no logging: errors go back as
 * negative errno values for ext.c to word.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "agent/fsops.h"
#include "agent/resolve.h"
#include "common/fdio.h"
#include "common/path.h"
#include "common/xalloc.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#endif

/* Room for a normalised path and its terminator. */
#define SCRATCH (PATH_MAX_BYTES + 1)
/* getdents64 batch. */
#define DENTS_BYTES 65536

/* The kernel's struct linux_dirent64. */
struct dent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* The resolver reports an escape as EXDEV; keep it apart from the EXDEV of
 * a cross-device rename or link. */
static int escaped(int rc)
{
	return rc == -EXDEV ? -FSOPS_ESCAPED : rc;
}

static int open_beneath(const struct agent *a, const char *rel, int flags,
			mode_t mode)
{
	return escaped(agent_resolve_open(a, rel, flags, mode, RESOLVE_EXT));
}

static int open_parent(const struct agent *a, const char *rel,
		       const char **name, char *scratch)
{
	return escaped(agent_resolve_parent(a, rel, name, scratch, SCRATCH,
					    RESOLVE_EXT));
}

static int close_keep_errno(int fd, int rc)
{
	fdio_close(fd);
	return rc;
}

/* The text of the symlink name in dirfd (heap). */
static int read_link(int dirfd, const char *name, char **out)
{
	char *buf = xmalloc(PATH_MAX);
	ssize_t n;
	int rc = 0;

	n = readlinkat(dirfd, name, buf, PATH_MAX);
	if (n < 0) {
		rc = -errno;
		goto out;
	}
	/* Linux never stores a target of PATH_MAX bytes or more; a full
	 * buffer would mean the text was cut. */
	if (n >= PATH_MAX) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	buf[n] = '\0';
	*out = xstrdup(buf);
out:
	free(buf);
	return rc;
}

/*
 * What a file made or changed through the extension never gets: the
 * set-user-id and set-group-id bits (doc/protocol-ext.md, create and
 * chmod). Nothing a sandbox makes then runs with its owner's privileges
 * for anyone outside the sandbox, whatever reaches it. They are dropped,
 * not refused, so that copying a tree in (tar, cp -p, rsync -a) works.
 */
#define NO_PRIV ((mode_t)(S_ISUID | S_ISGID))

/*
 * chmod a file given by any descriptor, O_PATH included, so a file need
 * not be readable or writable to change its mode. fchmodat2 (Linux 6.6)
 * takes an empty path; older kernels go through the descriptor's magic
 * link, which names exactly the file already resolved.
 */
static int fd_chmod(int fd, mode_t mode)
{
	char proc[64];

	if (syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
		return -errno;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return chmod(proc, mode) == 0 ? 0 : -errno;
}

/* utimensat on a descriptor of the file itself (O_PATH allowed). */
static int fd_utimens(int fd, const struct timespec ts[2])
{
	char proc[64];

	if (utimensat(fd, "", ts, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOENT)
		return -errno;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return utimensat(AT_FDCWD, proc, ts, 0) == 0 ? 0 : -errno;
}

static int fstat_into(int fd, struct stat *st)
{
	return fstat(fd, st) == 0 ? 0 : -errno;
}

/* The end of an operation that answers the attributes after it: fd is
 * closed, and *st is s when rc is 0. rc. */
static int close_with(int fd, int rc, const struct stat *s, struct stat *st)
{
	close(fd);
	if (rc == 0)
		*st = *s;
	return rc;
}

/* The same, with the attributes of fd itself, unless rc says it failed. */
static int close_with_stat(int fd, int rc, struct stat *st)
{
	struct stat s;

	if (rc == 0)
		rc = fstat_into(fd, &s);
	return close_with(fd, rc, &s, st);
}

/* ---- stat and readlink --------------------------------------------------- */

int fsops_stat(const struct agent *a, const char *rel, struct stat *st,
	       char **target)
{
	char scratch[SCRATCH];
	const char *name;
	struct stat s;
	char *t = NULL;
	int pfd, rc = 0;

	if (*rel == '\0') {
		if (fstat(a->root_fd, &s) < 0)
			return -errno;
		*st = s;
		if (target != NULL)
			*target = NULL;
		return 0;
	}
	pfd = open_parent(a, rel, &name, scratch);
	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, name, &s, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = -errno;
		goto out;
	}
	if (S_ISLNK(s.st_mode) && target != NULL) {
		rc = read_link(pfd, name, &t);
		if (rc < 0)
			goto out;
	}
	*st = s;
	if (target != NULL)
		*target = t;
out:
	close(pfd);
	return rc;
}

int fsops_readlink(const struct agent *a, const char *rel, char **target)
{
	char scratch[SCRATCH];
	const char *name;
	int pfd, rc;

	if (*rel == '\0')
		return -EINVAL;
	pfd = open_parent(a, rel, &name, scratch);
	if (pfd < 0)
		return pfd;
	rc = read_link(pfd, name, target);
	close(pfd);
	return rc;
}

/* ---- contents ------------------------------------------------------------ */

/* The error for a descriptor that is not a regular file. */
static int not_regular(const struct stat *st)
{
	return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
}

/* fd's attributes into *s: 0 when it is a regular file, else -errno. */
static int fstat_regular(int fd, struct stat *s)
{
	int rc = fstat_into(fd, s);

	if (rc == 0 && !S_ISREG(s->st_mode))
		rc = not_regular(s);
	return rc;
}

/* rel opened (access: O_RDONLY or O_WRONLY) as a regular file: the
 * descriptor with *s its attributes, or -errno (nothing left open). */
static int open_regular(const struct agent *a, const char *rel, int access,
			struct stat *s)
{
	int fd, rc;

	fd = open_beneath(a, rel, access | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		return fd;
	rc = fstat_regular(fd, s);
	if (rc < 0)
		return close_keep_errno(fd, rc);
	return fd;
}

int fsops_open_read(const struct agent *a, const char *rel, struct stat *st)
{
	struct stat s;
	int fd;

	fd = open_regular(a, rel, O_RDONLY, &s);
	if (fd >= 0)
		*st = s;
	return fd;
}

/*
 * Open rel for writing, creating it with exactly mode when absent: O_CREAT
 * with O_EXCL first, so that a file this call made is known and gets its
 * mode. When something exists and that is allowed, open it as it is; if it
 * vanished in between, try again. A dangling symlink looks like both
 * (EEXIST, then ENOENT): the last attempt then lets open(2) create the
 * link's target, as the kernel would. Returns the descriptor.
 */
static int open_created(const struct agent *a, const char *rel, int flags,
			mode_t mode, bool exclusive, bool truncate)
{
	const int base = O_WRONLY | O_NONBLOCK | O_NOCTTY | flags;
	const int trunc = truncate ? O_TRUNC : 0;
	bool created = false;
	int fd = -ENOENT, attempt;

	mode &= 07777;
	if (*rel == '\0')
		return exclusive ? -EEXIST : -EISDIR;
	for (attempt = 0; attempt < 3; attempt++) {
		fd = open_beneath(a, rel, base | O_CREAT | O_EXCL, mode);
		if (fd >= 0) {
			created = true;
			break;
		}
		if (fd != -EEXIST || exclusive)
			return fd;
		fd = open_beneath(a, rel, base | trunc, 0);
		if (fd != -ENOENT)
			break;
	}
	if (fd == -ENOENT)
		fd = open_beneath(a, rel, base | O_CREAT | trunc,
				  mode & ~NO_PRIV);
	if (fd < 0)
		return fd;
	if (created && fchmod(fd, mode & ~NO_PRIV) < 0)
		return close_keep_errno(fd, -errno);
	return fd;
}

int fsops_write(const struct agent *a, const char *rel, uint64_t off,
		bool append, const void *p, size_t n, const struct fsops_mk *mk,
		const struct timespec *times, struct stat *st)
{
	const char *src = p;
	struct stat s;
	size_t done = 0;
	int fd, rc;

	if (!append && off > (uint64_t)INT64_MAX)
		return -EFBIG;
	if (mk != NULL)
		fd = open_created(a, rel, append ? O_APPEND : 0, mk->mode,
				  mk->exclusive, false);
	else
		fd = open_beneath(a, rel,
				  O_WRONLY | O_NONBLOCK | O_NOCTTY |
					  (append ? O_APPEND : 0),
				  0);
	if (fd < 0)
		return fd;
	rc = fstat_regular(fd, &s);
	while (rc == 0 && done < n) {
		ssize_t w;

		/* pwrite on an O_APPEND descriptor appends anyway on Linux;
		 * write says what is meant. */
		if (append)
			w = write(fd, src + done, n - done);
		else
			w = pwrite(fd, src + done, n - done,
				   (off_t)(off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			rc = -errno;
		else if (w == 0)
			rc = -EIO;
		else
			done += (size_t)w;
	}
	/* The times come last: the write itself moved mtime. */
	if (rc == 0 && times != NULL && futimens(fd, times) < 0)
		rc = -errno;
	return close_with_stat(fd, rc, st);
}

int fsops_create(const struct agent *a, const char *rel, mode_t mode,
		 bool exclusive, bool truncate, struct stat *st)
{
	int fd;

	fd = open_created(a, rel, 0, mode, exclusive, truncate);
	if (fd < 0)
		return fd;
	return close_with_stat(fd, 0, st);
}

int fsops_truncate(const struct agent *a, const char *rel, uint64_t size,
		   struct stat *st)
{
	struct stat s;
	int fd, rc;

	if (size > (uint64_t)INT64_MAX)
		return -EFBIG;
	fd = open_regular(a, rel, O_WRONLY, &s);
	if (fd < 0)
		return fd;
	rc = ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
	return close_with_stat(fd, rc, st);
}

int fsops_fsync(const struct agent *a, const char *rel)
{
	int fd, rc = 0;

	fd = open_beneath(a, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	/* A write-only file can still be synced through a write open. */
	if (fd == -EACCES) {
		int wfd = open_beneath(a, rel, O_WRONLY | O_NONBLOCK | O_NOCTTY,
				       0);

		if (wfd >= 0)
			fd = wfd;
	}
	if (fd < 0)
		return fd;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* ---- metadata ------------------------------------------------------------ */

int fsops_mkdir(const struct agent *a, const char *rel, mode_t mode,
		struct stat *st)
{
	char scratch[SCRATCH];
	const char *name;
	struct stat s;
	int pfd, dfd = -1, rc = 0;

	mode &= 07777 & ~S_ISUID; /* a directory keeps set-group-id */
	if (*rel == '\0')
		return -EEXIST;
	pfd = open_parent(a, rel, &name, scratch);
	if (pfd < 0)
		return pfd;
	if (mkdirat(pfd, name, mode) < 0) {
		rc = -errno;
		goto out;
	}
	/* name is one component (never "." or ".."), and O_NOFOLLOW keeps a
	 * symlink swapped in since mkdirat from redirecting the chmod. */
	dfd = openat(pfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		goto out;
	}
	rc = fd_chmod(dfd, mode);
	if (rc == 0)
		rc = fstat_into(dfd, &s);
	if (rc == 0)
		*st = s;
out:
	fdio_close(dfd);
	close(pfd);
	return rc;
}

static int remove_at(const struct agent *a, const char *rel, int flags)
{
	char scratch[SCRATCH];
	const char *name;
	int pfd, rc = 0;

	pfd = open_parent(a, rel, &name, scratch);
	if (pfd < 0)
		return pfd;
	if (unlinkat(pfd, name, flags) < 0)
		rc = -errno;
	close(pfd);
	return rc;
}

int fsops_unlink(const struct agent *a, const char *rel)
{
	if (*rel == '\0')
		return -EISDIR;
	return remove_at(a, rel, 0);
}

int fsops_rmdir(const struct agent *a, const char *rel)
{
	if (*rel == '\0')
		return -EBUSY;
	return remove_at(a, rel, AT_REMOVEDIR);
}

/* Two names, each beneath its parent: both parents open (closed with
 * parents_close), or a negative errno with neither. */
struct two_parents {
	char s1[SCRATCH], s2[SCRATCH];
	const char *n1, *n2;
	int p1, p2;
};

static int parents_open(const struct agent *a, const char *from, const char *to,
			struct two_parents *tp)
{
	tp->p1 = open_parent(a, from, &tp->n1, tp->s1);
	if (tp->p1 < 0)
		return tp->p1;
	tp->p2 = open_parent(a, to, &tp->n2, tp->s2);
	if (tp->p2 < 0) {
		close(tp->p1);
		return tp->p2;
	}
	return 0;
}

static void parents_close(struct two_parents *tp)
{
	close(tp->p1);
	close(tp->p2);
}

int fsops_rename(const struct agent *a, const char *from, const char *to,
		 unsigned flags)
{
	struct two_parents tp;
	int rc;

	if (*from == '\0' || *to == '\0')
		return -EBUSY;
	rc = parents_open(a, from, to, &tp);
	if (rc < 0)
		return rc;
	if (renameat2(tp.p1, tp.n1, tp.p2, tp.n2, flags) < 0)
		rc = -errno;
	parents_close(&tp);
	return rc;
}

int fsops_link(const struct agent *a, const char *from, const char *to,
	       struct stat *st)
{
	struct two_parents tp;
	struct stat s;
	int rc;

	if (*from == '\0')
		return -EPERM;
	if (*to == '\0')
		return -EEXIST;
	rc = parents_open(a, from, to, &tp);
	if (rc < 0)
		return rc;
	if (linkat(tp.p1, tp.n1, tp.p2, tp.n2, 0) < 0 ||
	    fstatat(tp.p2, tp.n2, &s, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	else
		*st = s;
	parents_close(&tp);
	return rc;
}

int fsops_symlink(const struct agent *a, const char *rel, const char *target,
		  struct stat *st)
{
	char scratch[SCRATCH];
	const char *name;
	struct stat s;
	int pfd, rc = 0;

	if (*rel == '\0')
		return -EEXIST;
	pfd = open_parent(a, rel, &name, scratch);
	if (pfd < 0)
		return pfd;
	if (symlinkat(target, pfd, name) < 0 ||
	    fstatat(pfd, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	else
		*st = s;
	close(pfd);
	return rc;
}

int fsops_chmod(const struct agent *a, const char *rel, mode_t mode,
		struct stat *st)
{
	struct stat s;
	int fd, rc;

	fd = open_beneath(a, rel, O_PATH, 0);
	if (fd < 0)
		return fd;
	rc = fstat_into(fd, &s);
	/* A directory keeps its set-group-id (its new entries' group),
	 * which runs nothing. */
	if (rc == 0)
		rc = fd_chmod(
			fd, mode & 07777 &
				    ~(S_ISDIR(s.st_mode) ? S_ISUID : NO_PRIV));
	return close_with_stat(fd, rc, st);
}

int fsops_utimens(const struct agent *a, const char *rel,
		  const struct timespec ts[2], bool nofollow, struct stat *st)
{
	char scratch[SCRATCH];
	const char *name;
	struct stat s;
	int fd, rc = 0;

	if (nofollow && *rel != '\0') {
		fd = open_parent(a, rel, &name, scratch);
		if (fd < 0)
			return fd;
		if (utimensat(fd, name, ts, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fstatat(fd, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
			rc = -errno;
	} else {
		fd = open_beneath(a, rel, O_PATH, 0);
		if (fd < 0)
			return fd;
		rc = fd_utimens(fd, ts);
		if (rc == 0)
			rc = fstat_into(fd, &s);
	}
	return close_with(fd, rc, &s, st);
}

int fsops_statfs(const struct agent *a, struct statfs *out)
{
	struct statfs s;

	if (fstatfs(a->root_fd, &s) < 0)
		return -errno;
	*out = s;
	return 0;
}

/* ---- listing ------------------------------------------------------------- */

/* The file type a directory entry's d_type names (0: unknown). */
static mode_t dtype_mode(unsigned char t)
{
	static const struct {
		unsigned char dtype;
		mode_t mode;
	} types[] = {
		{DT_REG, S_IFREG},  {DT_DIR, S_IFDIR},	 {DT_LNK, S_IFLNK},
		{DT_FIFO, S_IFIFO}, {DT_SOCK, S_IFSOCK}, {DT_CHR, S_IFCHR},
		{DT_BLK, S_IFBLK},
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].dtype == t)
			return types[i].mode;
	return 0;
}

/* Hand one entry to fn: 0 taken or skipped (it vanished), FSOPS_LIST_FULL,
 * or a negative errno from fn. */
static int list_one(int dfd, const struct dent64 *d, fsops_entry_fn fn,
		    void *ud)
{
	struct stat st;
	char *target = NULL;
	int rc;

	if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		/* Listed but not stat'able (a mount point of another user's
		 * FUSE filesystem, say): the name is still worth showing. */
		memset(&st, 0, sizeof(st));
		st.st_mode = dtype_mode(d->d_type);
		st.st_ino = d->d_ino;
	}
	/* A symlink replaced since the fstatat just goes without its text. */
	if (S_ISLNK(st.st_mode) && read_link(dfd, d->d_name, &target) < 0)
		target = NULL;
	rc = fn(ud, d->d_name, &st, target);
	free(target);
	if (rc == 0 || rc == FSOPS_LIST_FULL || rc < 0)
		return rc;
	return -EINVAL;
}

int fsops_list(const struct agent *a, const char *rel, int64_t cursor,
	       fsops_entry_fn fn, void *ud, bool *more, int64_t *next)
{
	char *dents = NULL;
	int64_t last = cursor;
	bool full = false;
	int fd, rc = 0;

	fd = open_beneath(a, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
	if (fd < 0)
		return fd;
	/* The cookie is the d_off of the last entry sent: seeking to it
	 * resumes right after that entry (how NFS servers page readdir). */
	if (cursor != 0 && lseek(fd, (off_t)cursor, SEEK_SET) < 0) {
		rc = -errno;
		goto out;
	}
	dents = xmalloc(DENTS_BYTES);
	while (!full) {
		long n = syscall(SYS_getdents64, fd, dents, DENTS_BYTES);
		long pos;

		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		for (pos = 0; pos < n;) {
			const struct dent64 *d = (const void *)(dents + pos);
			const char *nm = d->d_name;

			pos += d->d_reclen;
			if (strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0) {
				rc = list_one(fd, d, fn, ud);
				if (rc < 0)
					goto out;
				if (rc == FSOPS_LIST_FULL) {
					rc = 0;
					full = true;
					break;
				}
			}
			last = d->d_off;
		}
	}
	/* A cookie that does not move (0, or where this page began) would
	 * send a client round the same page for ever: fail instead. */
	if (full && (last == cursor || last == 0)) {
		rc = -EOVERFLOW;
		goto out;
	}
	*more = full;
	*next = full ? last : 0;
out:
	free(dents);
	close(fd);
	return rc;
}

/* Read one whole small file into buf (max_file bytes): its length, or
 * -1 when it is to be passed over. */
static ssize_t read_small(int dfd, const char *name, const struct stat *seen,
			  size_t max_file, char *buf, struct stat *st)
{
	struct stat after;
	size_t got = 0;
	int fd;

	fd = openat(dfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) ||
	    st->st_ino != seen->st_ino || st->st_dev != seen->st_dev ||
	    (uint64_t)st->st_size > max_file)
		goto skip;
	while (got < (size_t)st->st_size) {
		ssize_t n = pread(fd, buf + got, (size_t)st->st_size - got,
				  (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto skip;
		got += (size_t)n;
	}
	/* Changed while read: the client reads it on its own. */
	if (fstat(fd, &after) < 0 || after.st_size != st->st_size ||
	    after.st_mtim.tv_sec != st->st_mtim.tv_sec ||
	    after.st_mtim.tv_nsec != st->st_mtim.tv_nsec)
		goto skip;
	close(fd);
	return (ssize_t)got;
skip:
	close(fd);
	return -1;
}

int fsops_contents_open(const struct agent *a, const char *rel)
{
	return open_beneath(a, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
}

int fsops_contents_fd(int fd, size_t max_file, fsops_body_fn fn, void *ud)
{
	char *dents = NULL, *body = NULL;
	int rc = 0;

	dents = xmalloc(DENTS_BYTES);
	body = xmalloc(max_file > 0 ? max_file : 1);
	for (;;) {
		long n = syscall(SYS_getdents64, fd, dents, DENTS_BYTES);
		long pos;

		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		for (pos = 0; pos < n;) {
			const struct dent64 *d = (const void *)(dents + pos);
			struct stat seen, st;
			ssize_t len;

			pos += d->d_reclen;
			if (d->d_type != DT_REG && d->d_type != DT_UNKNOWN)
				continue;
			if (fstatat(fd, d->d_name, &seen, AT_SYMLINK_NOFOLLOW) <
				    0 ||
			    !S_ISREG(seen.st_mode) ||
			    (uint64_t)seen.st_size > max_file)
				continue;
			len = read_small(fd, d->d_name, &seen, max_file, body,
					 &st);
			if (len < 0)
				continue;
			rc = fn(ud, d->d_name, &st, body, (size_t)len);
			if (rc != 0)
				goto out;
		}
	}
out:
	if (rc == FSOPS_LIST_FULL)
		rc = 0;
	free(body);
	free(dents);
	close(fd);
	return rc;
}
