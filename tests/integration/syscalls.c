/* SPDX-License-Identifier: MIT */
/*
 * syscalls: a POSIX semantics driver for a directory. It runs one fixed
 * sequence of system calls inside the directory it is given (which must be
 * empty) and prints one line per call: what was done and what came back
 * (a value, the bytes read, or the errno's name), then a dump of the tree
 * it left behind. Run once on a directory of a sandbox's backing root and
 * once on a directory under the mount: the two outputs must be identical.
 *
 * It prints only what both sides must agree on: no inode numbers, owners,
 * block counts, directory sizes or times it did not set itself, and no
 * permission checks (the mount's agent runs as another user than a direct
 * caller). It does not judge anything itself: the comparison is the test.
 *
 * usage: syscalls DIR      exit 0 when every step ran (whatever each
 *                          returned), 2 for a usage error, 1 when DIR is
 *                          unusable
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Bytes shown of a read before it is summarised by length and hash. */
#define SHOW_MAX 64
/* The large file: enough for several write gatherings and readaheads. */
#define BIG_SIZE (3 * 1024 * 1024 + 4097)
#define TREE_DEPTH_MAX 16

static const char *errname(int e)
{
	static char text[32];
	const char *name = strerrorname_np(e);

	if (name != NULL)
		return name;
	snprintf(text, sizeof(text), "errno %d", e);
	return text;
}

/* A result: the errno's name when r < 0, else the number. */
static void result(const char *what, long r, int e)
{
	if (r < 0)
		printf("%s: %s\n", what, errname(e));
	else
		printf("%s: %ld\n", what, r);
	fflush(stdout);
}

#define STEP(what, call)                   \
	do {                               \
		long r_;                   \
		errno = 0;                 \
		r_ = (long)(call);         \
		result((what), r_, errno); \
	} while (0)

/* FNV-1a, to summarise contents. */
static uint64_t hash(const unsigned char *p, size_t n)
{
	uint64_t h = 14695981039346656037ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* Bytes as a quoted string (escaped), or by length and hash when long. */
static void show_bytes(const char *what, const unsigned char *p, ssize_t n,
		       int e)
{
	ssize_t i;

	if (n < 0) {
		printf("%s: %s\n", what, errname(e));
		fflush(stdout);
		return;
	}
	if (n > SHOW_MAX) {
		printf("%s: %zd bytes, fnv %016" PRIx64 "\n", what, n,
		       hash(p, (size_t)n));
		fflush(stdout);
		return;
	}
	printf("%s: %zd \"", what, n);
	for (i = 0; i < n; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
			putchar(p[i]);
		else
			printf("\\x%02x", p[i]);
	}
	printf("\"\n");
	fflush(stdout);
}

/* A name fit for one output line: bytes outside printable ASCII, and the
 * backslash, as \xNN. The result is valid until the next call. */
static const char *esc(const char *s)
{
	static char out[4 * 4096 + 1];
	size_t o = 0;

	for (; *s != '\0' && o + 5 < sizeof(out); s++) {
		unsigned char c = (unsigned char)*s;

		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, sizeof(out) - o,
					      "\\x%02x", c);
	}
	out[o] = '\0';
	return out;
}

/* The short name of the file type of the mode M. */
static const char *type_name(mode_t m)
{
	static const struct {
		mode_t fmt;
		const char *name;
	} types[] = {
		{S_IFREG, "reg"},  {S_IFDIR, "dir"},   {S_IFLNK, "lnk"},
		{S_IFIFO, "fifo"}, {S_IFSOCK, "sock"}, {S_IFCHR, "chr"},
		{S_IFBLK, "blk"},
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if ((m & S_IFMT) == types[i].fmt)
			return types[i].name;
	return "unknown";
}

/* Type, permission bits, and for files the size and link count. */
static void show_stat(const char *what, const char *path, bool follow)
{
	struct stat st;
	int r = follow ? stat(path, &st) : lstat(path, &st);

	if (r < 0) {
		printf("%s: %s\n", what, errname(errno));
	} else if (S_ISDIR(st.st_mode)) {
		printf("%s: dir %04o\n", what, (unsigned)(st.st_mode & 07777));
	} else {
		printf("%s: %s %04o size %lld nlink %lu\n", what,
		       type_name(st.st_mode), (unsigned)(st.st_mode & 07777),
		       (long long)st.st_size, (unsigned long)st.st_nlink);
	}
	fflush(stdout);
}

static void show_fstat(const char *what, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		printf("%s: %s\n", what, errname(errno));
	else
		printf("%s: %s %04o size %lld\n", what, type_name(st.st_mode),
		       (unsigned)(st.st_mode & 07777), (long long)st.st_size);
	fflush(stdout);
}

/* The times this program set (an lstat: the entry itself): the mtime,
 * after the atime when ATIME. */
static void show_times(const char *what, const char *path, bool atime)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		printf("%s: %s\n", what, errname(errno));
	} else {
		printf("%s:", what);
		if (atime)
			printf(" atime %lld.%09ld",
			       (long long)st.st_atim.tv_sec,
			       st.st_atim.tv_nsec);
		printf(" mtime %lld.%09ld\n", (long long)st.st_mtim.tv_sec,
		       st.st_mtim.tv_nsec);
	}
	fflush(stdout);
}

/* open(2), printing "ok" rather than the descriptor number. */
static int xopen(const char *what, const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags | O_CLOEXEC, mode);

	if (fd < 0)
		printf("%s: %s\n", what, errname(errno));
	else
		printf("%s: ok\n", what);
	fflush(stdout);
	return fd;
}

static void xclose(const char *what, int fd)
{
	if (fd < 0)
		return;
	STEP(what, close(fd));
}

static void do_read(const char *what, int fd, size_t n)
{
	unsigned char buf[4096];
	ssize_t r;

	if (n > sizeof(buf))
		n = sizeof(buf);
	r = read(fd, buf, n);
	show_bytes(what, buf, r, errno);
}

static void do_pread(const char *what, int fd, size_t n, off_t off)
{
	unsigned char buf[4096];
	ssize_t r;

	if (n > sizeof(buf))
		n = sizeof(buf);
	r = pread(fd, buf, n, off);
	show_bytes(what, buf, r, errno);
}

/* The whole file, by path. */
static void show_file(const char *what, const char *path)
{
	unsigned char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		show_bytes(what, NULL, -1, errno);
		return;
	}
	for (;;) {
		if (cap - len < 65536) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			if (buf == NULL) {
				perror("syscalls: realloc");
				exit(1);
			}
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0) {
			show_bytes(what, NULL, -1, errno);
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	show_bytes(what, buf, (ssize_t)len, 0);
out:
	close(fd);
	free(buf);
}

static long xrenameat2(const char *from, const char *to, unsigned flags)
{
	return syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

static long write_str(int fd, const char *s)
{
	return (long)write(fd, s, strlen(s));
}

static long pwrite_str(int fd, const char *s, off_t off)
{
	return (long)pwrite(fd, s, strlen(s), off);
}

/* Make a file with the given contents (one line of output). */
static void put(const char *path, const char *data)
{
	char what[256];
	int fd;

	snprintf(what, sizeof(what), "put %s", esc(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		printf("%s: %s\n", what, errname(errno));
		fflush(stdout);
		return;
	}
	if (write_str(fd, data) != (long)strlen(data))
		printf("%s: write: %s\n", what, errname(errno));
	else if (close(fd) < 0)
		printf("%s: close: %s\n", what, errname(errno));
	else
		printf("%s: ok\n", what);
	fflush(stdout);
}

/* ---- the steps ----------------------------------------------------------- */

static void files_basic(void)
{
	int fd, fd2;

	puts("== create, write, read");
	fd = xopen("open f O_CREAT|O_EXCL|O_WRONLY 0644", "f",
		   O_CREAT | O_EXCL | O_WRONLY, 0644);
	STEP("write f hello world", write_str(fd, "hello world\n"));
	STEP("pwrite f WORLD at 6", pwrite_str(fd, "WORLD", 6));
	STEP("read on a write-only fd", read(fd, (char[8]){0}, 8));
	show_fstat("fstat f", fd);
	STEP("fsync f", fsync(fd));
	xclose("close f", fd);
	fd2 = xopen("open f O_CREAT|O_EXCL again", "f",
		    O_CREAT | O_EXCL | O_WRONLY, 0644);
	xclose("close", fd2);
	show_stat("stat f", "f", true);

	fd = xopen("open f O_RDONLY", "f", O_RDONLY, 0);
	do_read("read f 100", fd, 100);
	do_read("read f at eof", fd, 100);
	do_pread("pread f 3 at 2", fd, 3, 2);
	do_pread("pread f 10 at 11", fd, 10, 11);
	do_pread("pread f 10 past eof", fd, 10, 1000);
	STEP("write on a read-only fd", write_str(fd, "x"));
	STEP("lseek f SEEK_END", lseek(fd, 0, SEEK_END));
	xclose("close f", fd);

	puts("== O_CREAT on an existing file, modes");
	fd = xopen("open f O_CREAT|O_RDWR", "f", O_CREAT | O_RDWR, 0600);
	show_fstat("fstat f (mode unchanged)", fd);
	xclose("close f", fd);
	fd = xopen("create m600 0600", "m600", O_CREAT | O_WRONLY, 0600);
	xclose("close m600", fd);
	show_stat("stat m600", "m600", true);
	fd = xopen("create m777 0777 (umask 022)", "m777", O_CREAT | O_WRONLY,
		   0777);
	xclose("close m777", fd);
	show_stat("stat m777", "m777", true);

	puts("== writes through a descriptor the new mode does not allow");
	fd = xopen("create ro 0444", "ro", O_CREAT | O_EXCL | O_WRONLY, 0444);
	STEP("write ro", write_str(fd, "read-only file\n"));
	xclose("close ro", fd);
	show_stat("stat ro", "ro", true);
	show_file("contents ro", "ro");
	fd = xopen("create fchm 0644", "fchm", O_CREAT | O_EXCL | O_RDWR, 0644);
	STEP("write fchm", write_str(fd, "before\n"));
	STEP("fchmod fchm 0400", fchmod(fd, 0400));
	STEP("write fchm after fchmod", write_str(fd, "after\n"));
	show_fstat("fstat fchm", fd);
	xclose("close fchm", fd);
	show_file("contents fchm", "fchm");

	puts("== O_APPEND");
	fd = xopen("open f O_WRONLY|O_APPEND", "f", O_WRONLY | O_APPEND, 0);
	STEP("append tail", write_str(fd, "tail\n"));
	fd2 = xopen("open f O_WRONLY (second fd)", "f", O_WRONLY, 0);
	STEP("pwrite xx at 17 through the second fd",
	     pwrite_str(fd2, "xx", 17));
	STEP("append yy after it", write_str(fd, "yy"));
	xclose("close second fd", fd2);
	xclose("close f", fd);
	show_file("contents f", "f");

	puts("== O_TRUNC, ftruncate, truncate");
	fd = xopen("open f O_WRONLY|O_TRUNC", "f", O_WRONLY | O_TRUNC, 0);
	show_fstat("fstat f after O_TRUNC", fd);
	STEP("write new", write_str(fd, "new\n"));
	STEP("ftruncate f 10000", ftruncate(fd, 10000));
	show_fstat("fstat f", fd);
	xclose("close f", fd);
	show_stat("stat f grown", "f", true);
	fd = xopen("open f O_RDWR", "f", O_RDWR, 0);
	do_pread("pread f 10 at 9990 (zeros)", fd, 10, 9990);
	do_pread("pread f 8 at 0", fd, 8, 0);
	STEP("ftruncate f 2", ftruncate(fd, 2));
	do_pread("pread f 100 at 0", fd, 100, 0);
	STEP("ftruncate f -1", ftruncate(fd, -1));
	xclose("close f", fd);
	STEP("truncate f 5", truncate("f", 5));
	show_file("contents f", "f");
	STEP("truncate missing", truncate("missing", 5));
	STEP("truncate a directory", truncate(".", 0));

	puts("== holes and random writes");
	fd = xopen("create holes", "holes", O_CREAT | O_RDWR, 0644);
	STEP("pwrite end at 100000", pwrite_str(fd, "end", 100000));
	STEP("pwrite mid at 50000", pwrite_str(fd, "mid", 50000));
	STEP("pwrite start at 0", pwrite_str(fd, "start", 0));
	do_pread("pread 8 at 49998", fd, 8, 49998);
	show_fstat("fstat holes", fd);
	xclose("close holes", fd);
	show_file("contents holes", "holes");
}

static void files_big(void)
{
	unsigned char *buf = malloc(BIG_SIZE);
	size_t i, done;
	ssize_t r;
	int fd;

	puts("== a large file");
	if (buf == NULL) {
		perror("syscalls: malloc");
		exit(1);
	}
	for (i = 0; i < BIG_SIZE; i++)
		buf[i] = (unsigned char)((i * 7 + i / 4096) & 0xff);
	fd = xopen("create big", "big", O_CREAT | O_WRONLY | O_TRUNC, 0644);
	/* Odd-sized writes: the receiver must gather them in order. */
	for (done = 0, r = 0; done < BIG_SIZE && r >= 0; done += (size_t)r) {
		size_t n = BIG_SIZE - done < 70001 ? BIG_SIZE - done : 70001;

		r = write(fd, buf + done, n);
	}
	result("write big", r < 0 ? -1 : (long)done, errno);
	/* Then change bytes here and there, in the middle of the gathered
	 * range and behind it. */
	STEP("pwrite big at 1000000", pwrite_str(fd, "PATCH", 1000000));
	STEP("pwrite big at 10", pwrite_str(fd, "patch", 10));
	xclose("close big", fd);
	show_stat("stat big", "big", true);
	show_file("contents big", "big");
	fd = xopen("open big O_RDONLY", "big", O_RDONLY, 0);
	do_pread("pread big 16 at 999998", fd, 16, 999998);
	do_pread("pread big 16 at 3145720", fd, 16, 3145720);
	do_pread("pread big 4096 at 2097152", fd, 4096, 2097152);
	xclose("close big", fd);
	free(buf);
}

static void own_writes(void)
{
	int w, r;

	puts("== own writes are visible before close");
	w = xopen("create vis (writer)", "vis", O_CREAT | O_WRONLY | O_TRUNC,
		  0644);
	STEP("write abc", write_str(w, "abc"));
	r = xopen("open vis (reader)", "vis", O_RDONLY, 0);
	do_read("read vis", r, 100);
	show_stat("stat vis", "vis", true);
	STEP("write def", write_str(w, "def"));
	do_pread("pread vis at 0", r, 100, 0);
	xclose("close reader", r);
	xclose("close writer", w);

	puts("== unlink an open file");
	put("gone", "still here\n");
	r = xopen("open gone", "gone", O_RDONLY, 0);
	STEP("unlink gone", unlink("gone"));
	show_stat("stat gone", "gone", false);
	do_read("read the unlinked file", r, 100);
	xclose("close gone", r);
}

static void dirs(void)
{
	puts("== mkdir, rmdir");
	STEP("mkdir d 0755", mkdir("d", 0755));
	STEP("mkdir d again", mkdir("d", 0755));
	STEP("mkdir nope/x", mkdir("nope/x", 0755));
	STEP("mkdir f/x (f is a file)", mkdir("f/x", 0755));
	STEP("mkdir d/e 0700", mkdir("d/e", 0700));
	show_stat("stat d", "d", true);
	show_stat("stat d/e", "d/e", true);
	put("d/e/inner", "inner\n");
	STEP("rmdir d (not empty)", rmdir("d"));
	STEP("rmdir f (a file)", rmdir("f"));
	STEP("rmdir missing", rmdir("missing"));
	STEP("mkdir empty", mkdir("empty", 0755));
	STEP("rmdir empty", rmdir("empty"));
	show_stat("stat empty", "empty", true);
	STEP("chmod d 01777 (sticky)", chmod("d", 01777));
	show_stat("stat d", "d", true);
	STEP("chmod d 0755", chmod("d", 0755));
}

static void renames(void)
{
	puts("== rename");
	put("r1", "one\n");
	put("r2", "two\n");
	STEP("rename r1 r3", rename("r1", "r3"));
	show_stat("stat r1", "r1", true);
	show_file("contents r3", "r3");
	STEP("rename r3 over r2", rename("r3", "r2"));
	show_file("contents r2", "r2");
	show_stat("stat r3", "r3", true);
	STEP("rename missing x", rename("missing", "x"));
	STEP("rename r2 onto a directory", rename("r2", "d"));
	STEP("rename d onto a file", rename("d", "r2"));
	STEP("mkdir full", mkdir("full", 0755));
	put("full/x", "x\n");
	STEP("mkdir dd", mkdir("dd", 0755));
	STEP("rename dd onto a non-empty directory", rename("dd", "full"));
	STEP("rename d into itself", rename("d", "d/e/sub"));
	STEP("mkdir empty2", mkdir("empty2", 0755));
	STEP("rename dd onto an empty directory", rename("dd", "empty2"));
	show_stat("stat dd", "dd", true);
	STEP("rename empty2 d/e/moved", rename("empty2", "d/e/moved"));
	show_stat("stat d/e/moved", "d/e/moved", true);
	STEP("rename d/e/inner top-inner", rename("d/e/inner", "top-inner"));
	show_file("contents top-inner", "top-inner");
	put("n1", "n1\n");
	STEP("renameat2 n1 r2 NOREPLACE",
	     xrenameat2("n1", "r2", RENAME_NOREPLACE));
	STEP("renameat2 n1 n2 NOREPLACE",
	     xrenameat2("n1", "n2", RENAME_NOREPLACE));
	STEP("renameat2 n2 r2 EXCHANGE",
	     xrenameat2("n2", "r2", RENAME_EXCHANGE));
	show_file("contents n2", "n2");
	show_file("contents r2", "r2");
	STEP("renameat2 n2 missing EXCHANGE",
	     xrenameat2("n2", "missing", RENAME_EXCHANGE));
}

static void links(void)
{
	char buf[256];
	ssize_t n;
	int fd;

	puts("== hard links");
	put("h", "hard\n");
	STEP("link h h2", link("h", "h2"));
	show_stat("stat h", "h", true);
	show_stat("stat h2", "h2", true);
	STEP("link h h2 again", link("h", "h2"));
	STEP("link missing h3", link("missing", "h3"));
	STEP("link d d-link (a directory)", link("d", "d-link"));
	fd = xopen("open h2 O_WRONLY|O_APPEND", "h2", O_WRONLY | O_APPEND, 0);
	STEP("append through h2", write_str(fd, "more\n"));
	xclose("close h2", fd);
	show_file("contents h", "h");
	STEP("unlink h2", unlink("h2"));
	show_stat("stat h", "h", true);

	puts("== symbolic links");
	STEP("symlink h s", symlink("h", "s"));
	n = readlink("s", buf, sizeof(buf));
	show_bytes("readlink s", (unsigned char *)buf, n, errno);
	show_stat("lstat s", "s", false);
	show_stat("stat s", "s", true);
	show_file("contents through s", "s");
	STEP("symlink h s again", symlink("h", "s"));
	n = readlink("h", buf, sizeof(buf));
	show_bytes("readlink h (a file)", (unsigned char *)buf, n, errno);
	n = readlink("missing", buf, sizeof(buf));
	show_bytes("readlink missing", (unsigned char *)buf, n, errno);
	STEP("symlink nowhere dangling", symlink("nowhere", "dangling"));
	show_stat("lstat dangling", "dangling", false);
	show_stat("stat dangling", "dangling", true);
	fd = xopen("open dangling O_RDONLY", "dangling", O_RDONLY, 0);
	xclose("close", fd);
	STEP("symlink d sd (to a directory)", symlink("d", "sd"));
	show_stat("stat sd/e", "sd/e", true);
	show_file("contents sd/../h", "sd/../h");
	STEP("symlink d/e/../../h rel", symlink("d/e/../../h", "rel"));
	show_file("contents through rel", "rel");
	STEP("unlink s", unlink("s"));
	show_stat("stat h after unlink s", "h", true);
	STEP("rename dangling dangling2", rename("dangling", "dangling2"));
	n = readlink("dangling2", buf, sizeof(buf));
	show_bytes("readlink dangling2", (unsigned char *)buf, n, errno);
	STEP("symlink with an odd target", symlink("a b/'quote\"\\x", "odd"));
	n = readlink("odd", buf, sizeof(buf));
	show_bytes("readlink odd", (unsigned char *)buf, n, errno);
}

static void attrs(void)
{
	struct timespec tv[2];
	char longname[301];

	puts("== chmod");
	put("c", "c\n");
	STEP("chmod c 0600", chmod("c", 0600));
	show_stat("stat c", "c", true);
	STEP("chmod c 0755", chmod("c", 0755));
	show_stat("stat c", "c", true);
	STEP("chmod c 0444", chmod("c", 0444));
	show_stat("stat c", "c", true);
	STEP("chmod c 0644", chmod("c", 0644));
	STEP("chmod missing", chmod("missing", 0644));

	puts("== utimensat");
	tv[0].tv_sec = 1000000000;
	tv[0].tv_nsec = 123456789;
	tv[1].tv_sec = 1200000000;
	tv[1].tv_nsec = 987654321;
	STEP("utimensat c", utimensat(AT_FDCWD, "c", tv, 0));
	show_times("times c", "c", true);
	tv[0].tv_nsec = UTIME_OMIT;
	tv[1].tv_sec = 1300000000;
	tv[1].tv_nsec = 5;
	STEP("utimensat c mtime only", utimensat(AT_FDCWD, "c", tv, 0));
	show_times("times c", "c", true);
	tv[0].tv_sec = 1100000000;
	tv[0].tv_nsec = 0;
	tv[1].tv_nsec = UTIME_OMIT;
	STEP("utimensat c atime only", utimensat(AT_FDCWD, "c", tv, 0));
	show_times("times c", "c", true);
	STEP("symlink c sc", symlink("c", "sc"));
	tv[0].tv_sec = 900000000;
	tv[0].tv_nsec = 1;
	tv[1].tv_sec = 900000000;
	tv[1].tv_nsec = 2;
	STEP("utimensat sc AT_SYMLINK_NOFOLLOW",
	     utimensat(AT_FDCWD, "sc", tv, AT_SYMLINK_NOFOLLOW));
	show_times("mtime c (the target is unchanged)", "c", false);
	tv[1].tv_sec = 1400000000;
	tv[1].tv_nsec = 0;
	STEP("utimensat sc (follows)", utimensat(AT_FDCWD, "sc", tv, 0));
	show_times("mtime c", "c", false);
	STEP("utimensat d", utimensat(AT_FDCWD, "d", tv, 0));
	show_times("mtime d", "d", false);
	STEP("utimensat missing", utimensat(AT_FDCWD, "missing", tv, 0));

	puts("== errors of open");
	STEP("open . O_WRONLY", open(".", O_WRONLY | O_CLOEXEC));
	STEP("open missing O_RDONLY", open("missing", O_RDONLY | O_CLOEXEC));
	STEP("open f/x (f is a file)", open("f/x", O_RDONLY | O_CLOEXEC));
	STEP("open d O_RDONLY|O_DIRECTORY then close",
	     close(open("d", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
	STEP("open f O_DIRECTORY", open("f", O_RDONLY | O_DIRECTORY));
	STEP("create in a missing dir",
	     open("nope/x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	STEP("create a 300-byte name",
	     open(longname, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	STEP("unlink missing", unlink("missing"));
	STEP("unlink d (a directory)", unlink("d"));
}

static void names(void)
{
	puts("== unusual names");
	put("with space", "1\n");
	put("tab\tand\nnewline", "2\n");
	put("utf8-\xc3\xa9\xe2\x82\xac", "3\n");
	put("-dash", "4\n");
	put(".hidden", "5\n");
	put("semi;colon&amp$HOME", "6\n");
	show_file("contents with space", "with space");
	show_file("contents tab/newline", "tab\tand\nnewline");
	show_file("contents semi;colon", "semi;colon&amp$HOME");
	STEP("rename with space -> also spaced",
	     rename("with space", "also spaced"));
}

/* A file that grows and shrinks under a reader that has read it: every
 * descriptor, mapped or not, sees the new size and bytes at once, and
 * copy_file_range copies them. */
static void grow(void)
{
	unsigned char pat[0x10000];
	loff_t in = 0, out = 0;
	ssize_t total = 0, r = 0;
	size_t i;
	int fd, rd, cp;
	void *m;

	puts("== growing and shrinking a file a reader has read");
	for (i = 0; i < sizeof(pat); i++)
		pat[i] = (unsigned char)(i * 7 + 3);
	fd = xopen("open grow rw", "grow", O_RDWR | O_CREAT | O_TRUNC, 0644);
	rd = xopen("open grow ro", "grow", O_RDONLY, 0);
	if (fd < 0 || rd < 0)
		return;
	STEP("write 64 KiB", write(fd, pat, sizeof(pat)));
	/* The reader reads it all, in order, as far as the end. */
	for (i = 0; i <= sizeof(pat) / 4096; i++)
		do_read("read the file in order", rd, 4096);
	do_pread("pread the old end", rd, 4096, 0xf000);
	STEP("ftruncate to 192 KiB", ftruncate(fd, 0x30000));
	show_fstat("fstat the reader", rd);
	do_pread("pread the new part through the reader", rd, 4096, 0x20000);
	do_pread("pread across the old end", rd, 4096, 0xf800);
	m = mmap(NULL, 0x30000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		printf("mmap: %s\n", errname(errno));
	} else {
		memcpy((char *)m + 0x28000, "mapped", 6);
		STEP("msync", msync(m, 0x30000, MS_SYNC));
		show_bytes("a mapped read of the new part",
			   (unsigned char *)m + 0x2fff0, 16, 0);
		munmap(m, 0x30000);
	}
	do_pread("pread the mapped write", rd, 16, 0x28000);
	cp = xopen("open grow.copy", "grow.copy", O_RDWR | O_CREAT | O_TRUNC,
		   0644);
	while (cp >= 0 && total < 0x30000) {
		r = copy_file_range(fd, &in, cp, &out,
				    (size_t)(0x30000 - total), 0);
		if (r <= 0)
			break;
		total += r;
	}
	printf("copy_file_range: %zd of %d%s%s\n", total, 0x30000,
	       r < 0 ? ": " : "", r < 0 ? errname(errno) : "");
	xclose("close grow.copy", cp);
	show_file("the copy", "grow.copy");
	STEP("ftruncate to 100 bytes", ftruncate(fd, 100));
	show_fstat("fstat the reader after the shrink", rd);
	do_pread("pread past the new end", rd, 4096, 50);
	STEP("pwrite past the end (a hole)", pwrite(fd, "end", 3, 0x40000));
	do_pread("pread the hole's end", rd, 16, 0x3fff0);
	xclose("close grow ro", rd);
	xclose("close grow rw", fd);
	show_file("grow", "grow");
}

/* ---- the tree ------------------------------------------------------------ */

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every entry beneath path, sorted, with what the steps may not have
 * shown: type, mode, size, link target, contents. */
static void tree(const char *path, int depth)
{
	char **v = NULL, child[4096], target[4096], name[4096 * 4 + 1];
	size_t n = 0, cap = 0, i;
	struct dirent *e;
	struct stat st;
	ssize_t len;
	DIR *d;

	if (depth > TREE_DEPTH_MAX)
		return;
	d = opendir(path);
	if (d == NULL) {
		printf("tree %s: %s\n", path, errname(errno));
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			v = realloc(v, cap * sizeof(*v));
			if (v == NULL) {
				perror("syscalls: realloc");
				exit(1);
			}
		}
		v[n] = strdup(e->d_name);
		if (v[n] == NULL) {
			perror("syscalls: strdup");
			exit(1);
		}
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_names);
	for (i = 0; i < n; i++) {
		snprintf(child, sizeof(child), "%s/%s", path, v[i]);
		snprintf(name, sizeof(name), "tree %s", esc(child));
		if (lstat(child, &st) < 0) {
			printf("%s: %s\n", name, errname(errno));
		} else if (S_ISDIR(st.st_mode)) {
			printf("%s: dir %04o\n", name,
			       (unsigned)(st.st_mode & 07777));
			tree(child, depth + 1);
		} else if (S_ISLNK(st.st_mode)) {
			len = readlink(child, target, sizeof(target) - 1);
			target[len < 0 ? 0 : len] = '\0';
			printf("%s: lnk -> %s\n", name, esc(target));
		} else if (S_ISREG(st.st_mode)) {
			printf("%s: reg %04o nlink %lu\n", name,
			       (unsigned)(st.st_mode & 07777),
			       (unsigned long)st.st_nlink);
			show_file(name, child);
		} else {
			printf("%s: %s\n", name, type_name(st.st_mode));
		}
		free(v[i]);
	}
	free(v);
	fflush(stdout);
}

int main(int argc, char *argv[])
{
	DIR *d;
	struct dirent *e;

	if (argc != 2) {
		fprintf(stderr, "usage: syscalls DIR\n");
		return 2;
	}
	if (chdir(argv[1]) < 0) {
		fprintf(stderr, "syscalls: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	d = opendir(".");
	if (d == NULL) {
		fprintf(stderr, "syscalls: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0) {
			fprintf(stderr, "syscalls: %s is not empty\n", argv[1]);
			closedir(d);
			return 1;
		}
	}
	closedir(d);
	umask(022);
	/* Output is compared line by line: keep it unbuffered enough that a
	 * crash shows where. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	files_basic();
	files_big();
	own_writes();
	dirs();
	renames();
	links();
	attrs();
	names();
	grow();
	puts("== tree");
	tree(".", 0);
	return 0;
}
