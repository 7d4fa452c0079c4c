/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_v1: files/ without the file extension (fs_files_v1.c). The pure
 * parts: the find -printf record parser (every file type, names with
 * newlines, spaces, quotes, '-' and bytes that are not UTF-8, compared
 * with lstat of what the real find printed), the diagnostics-to-errno
 * table (with diagnostics of the real coreutils), single-quoting of native
 * command lines (checked by a real /bin/sh) and the per-open buffer. Then
 * the operations themselves, called without FUSE: against a real
 * sandbox-agent in --strict-v1 mode (through the transport core), and
 * against native sessions (the local provider, and a provider that can
 * only read files).
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_files_v1_i.h"
#include "fs/fs_i.h"
#include "client/local_ctl.h"
#include "client/local_state.h"
#include "client/provider_local.h"
#include "tests/check_suites.h"
#include "tests/fs_helpers.h"
#include "tests/helpers.h"
#include "tests/stub_provider.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* Run argv (no shell) with LC_ALL=C in dir (may be NULL); stdout and
 * stderr into the bufs (may be NULL). Returns the exit status. */
static int run_local(const char *const *argv, const char *dir, struct buf *out,
		     struct buf *err)
{
	int po[2], pe[2], status = 0;
	pid_t pid;
	bool open_o = true, open_e = true;

	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		static char lc[] = "LC_ALL=C";
		static char path[] = "PATH=/usr/local/bin:/usr/bin:/bin";
		char *envp[] = {lc, path, NULL};

		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		if (dir != NULL && chdir(dir) < 0)
			_exit(126);
		execve(argv[0], (char *const *)argv, envp);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	while (open_o || open_e) {
		char chunk[4096];
		ssize_t n;

		if (open_o) {
			n = read(po[0], chunk, sizeof(chunk));
			if (n <= 0)
				open_o = false;
			else if (out != NULL)
				ck_assert_int_eq(
					buf_append(out, chunk, (size_t)n), 0);
			continue;
		}
		n = read(pe[0], chunk, sizeof(chunk));
		if (n <= 0)
			open_e = false;
		else if (err != NULL)
			ck_assert_int_eq(buf_append(err, chunk, (size_t)n), 0);
	}
	close(po[0]);
	close(pe[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static const char *find_bin(void)
{
	return access("/usr/bin/find", X_OK) == 0 ? "/usr/bin/find"
						  : "/bin/find";
}

static const char *tool(const char *name)
{
	static char path[64];

	snprintf(path, sizeof(path), "/usr/bin/%s", name);
	if (access(path, X_OK) != 0)
		snprintf(path, sizeof(path), "/bin/%s", name);
	return path;
}

/* ---- the record parser --------------------------------------------------- */

/* One full record, fields given in order (adjacent literals keep each
 * "\0" apart from the digits after it). */
/* clang-format off */
static const char recs[] =
	"f\0" "4755\0" "11\0" "1\0" "1000\0" "1001\0" "42\0" "8\0"
	"1700000000.1234567890\0" "1700000001.5\0" "1700000002\0"
	"new\nline\0" "\0"
	"d\0" "1777\0" "4096\0" "3\0" "0\0" "0\0" "18446744073709551615\0"
	"8\0" "0\0" "0.000000001\0" "-2.7500000000\0" "sp ace\0" "\0"
	"l\0" "777\0" "17\0" "1\0" "4294967295\0" "4294967295\0" "7\0" "0\0"
	"1\0" "1\0" "1\0" "it's \"q\"\0" "target with\nnl\0"
	"p\0" "600\0" "0\0" "1\0" "0\0" "0\0" "8\0" "0\0" "1\0" "1\0" "1\0"
	"-dash\0" "\0"
	"s\0" "755\0" "0\0" "1\0" "0\0" "0\0" "9\0" "0\0" "1\0" "1\0" "1\0"
	"\xff\xfe" "\0" "\0"
	"c\0" "666\0" "0\0" "1\0" "0\0" "0\0" "10\0" "0\0" "1\0" "1\0" "1\0"
	"null\0" "\0"
	"b\0" "660\0" "0\0" "1\0" "0\0" "6\0" "11\0" "0\0" "1\0" "1\0" "1\0"
	"sda\0" "\0"
	"D\0" "0\0" "0\0" "1\0" "0\0" "0\0" "12\0" "0\0" "1\0" "1\0" "1\0"
	"door\0" "\0";
/* clang-format on */

START_TEST(parse_every_type)
{
	static const struct {
		enum proto_ftype type;
		unsigned perm;
		const char *name;
		const char *target;
	} want[] = {
		{PROTO_FT_FILE, 04755, "new\nline", ""},
		{PROTO_FT_DIR, 01777, "sp ace", ""},
		{PROTO_FT_SYMLINK, 0777, "it's \"q\"", "target with\nnl"},
		{PROTO_FT_FIFO, 0600, "-dash", ""},
		{PROTO_FT_SOCKET, 0755, "\xff\xfe", ""},
		{PROTO_FT_CHAR, 0666, "null", ""},
		{PROTO_FT_BLOCK, 0660, "sda", ""},
		{PROTO_FT_UNKNOWN, 0, "door", ""},
	};
	struct fs_v1_rec r;
	size_t pos = 0, i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ck_assert_int_eq(fs_files_v1_parse(recs, sizeof(recs) - 1, &pos,
						   false, &r),
				 1);
		ck_assert_int_eq(r.attr.type, want[i].type);
		ck_assert_uint_eq(r.attr.perm, want[i].perm);
		ck_assert_str_eq(r.name, want[i].name);
		ck_assert_str_eq(r.target, want[i].target);
		if (i == 0) {
			ck_assert_uint_eq(r.attr.size, 11);
			ck_assert_uint_eq(r.attr.nlink, 1);
			ck_assert_uint_eq(r.attr.uid, 1000);
			ck_assert_uint_eq(r.attr.gid, 1001);
			ck_assert_uint_eq(r.attr.ino, 42);
			ck_assert_uint_eq(r.attr.blocks, 8);
			ck_assert_int_eq(r.attr.atime, 1700000000);
			ck_assert_uint_eq(r.attr.atime_ns, 123456789);
			ck_assert_int_eq(r.attr.mtime, 1700000001);
			ck_assert_uint_eq(r.attr.mtime_ns, 500000000);
			ck_assert_int_eq(r.attr.ctime, 1700000002);
			ck_assert_uint_eq(r.attr.ctime_ns, 0);
		}
		if (i == 1) {
			ck_assert_uint_eq(r.attr.ino, UINT64_MAX);
			ck_assert_uint_eq(r.attr.nlink, 3);
			ck_assert_int_eq(r.attr.atime, 0);
			ck_assert_uint_eq(r.attr.atime_ns, 0);
			ck_assert_uint_eq(r.attr.mtime_ns, 1);
			/* As GNU find prints a time before 1970. */
			ck_assert_int_eq(r.attr.ctime, -2);
			ck_assert_uint_eq(r.attr.ctime_ns, 750000000);
		}
		if (i == 2) {
			ck_assert_uint_eq(r.attr.uid, UINT32_MAX);
			ck_assert_uint_eq(r.attr.gid, UINT32_MAX);
		}
	}
	ck_assert_uint_eq(pos, sizeof(recs) - 1);
	ck_assert_int_eq(
		fs_files_v1_parse(recs, sizeof(recs) - 1, &pos, false, &r), 0);
	ck_assert_int_eq(fs_files_v1_parse("", 0, &pos, false, &r), 0);
}
END_TEST

START_TEST(parse_short_form)
{
	/* clang-format off */
	static const char s[] = "f\0" "a\nb\0" "l\0" "-x\0" "d\0" "'\0";
	/* clang-format on */
	struct fs_v1_rec r;
	size_t pos = 0;

	ck_assert_int_eq(fs_files_v1_parse(s, sizeof(s) - 1, &pos, true, &r),
			 1);
	ck_assert_int_eq(r.attr.type, PROTO_FT_FILE);
	ck_assert_str_eq(r.name, "a\nb");
	ck_assert_str_eq(r.target, "");
	ck_assert_int_eq(fs_files_v1_parse(s, sizeof(s) - 1, &pos, true, &r),
			 1);
	ck_assert_int_eq(r.attr.type, PROTO_FT_SYMLINK);
	ck_assert_str_eq(r.name, "-x");
	ck_assert_int_eq(fs_files_v1_parse(s, sizeof(s) - 1, &pos, true, &r),
			 1);
	ck_assert_int_eq(r.attr.type, PROTO_FT_DIR);
	ck_assert_str_eq(r.name, "'");
	ck_assert_int_eq(fs_files_v1_parse(s, sizeof(s) - 1, &pos, true, &r),
			 0);
	/* A full-form parse of short records runs out of fields. */
	pos = 0;
	ck_assert_int_eq(fs_files_v1_parse(s, sizeof(s) - 1, &pos, false, &r),
			 -EBADMSG);
	ck_assert_uint_eq(pos, 0);
}
END_TEST

/* A record with field i replaced by value. */
static int parse_with(unsigned i, const char *value)
{
	const char *f[FS_V1_FIND_FIELDS] = {"f", "644", "1", "1", "0", "0", "1",
					    "0", "1",	"1", "1", "n", ""};
	struct buf b = BUF_INIT(0);
	struct fs_v1_rec r;
	size_t pos = 0, k;
	int rc;

	f[i] = value;
	for (k = 0; k < FS_V1_FIND_FIELDS; k++)
		ck_assert_int_eq(buf_append(&b, f[k], strlen(f[k]) + 1), 0);
	rc = fs_files_v1_parse(b.data, b.len, &pos, false, &r);
	if (rc == 1)
		ck_assert_uint_eq(pos, b.len);
	else
		ck_assert_uint_eq(pos, 0);
	buf_cleanup(&b);
	return rc;
}

START_TEST(parse_malformed)
{
	/* clang-format off */
	static const char cut[] = "f\0" "644\0" "1\0" "1\0" "0\0" "0\0" "1\0"
				  "0\0" "1\0" "1\0" "1\0" "name\0" "tgt";
	/* clang-format on */
	struct fs_v1_rec r;
	size_t pos = 0;

	ck_assert_int_eq(parse_with(0, "f"), 1);
	/* Record cut inside its last field, or after a field. */
	ck_assert_int_eq(
		fs_files_v1_parse(cut, sizeof(cut) - 1, &pos, false, &r),
		-EBADMSG);
	ck_assert_int_eq(fs_files_v1_parse(cut, 12, &pos, false, &r), -EBADMSG);
	ck_assert_int_eq(parse_with(0, ""), -EBADMSG);
	ck_assert_int_eq(parse_with(0, "fd"), -EBADMSG);
	ck_assert_int_eq(parse_with(1, "10000"), -EBADMSG);
	ck_assert_int_eq(parse_with(1, "8"), -EBADMSG);
	ck_assert_int_eq(parse_with(1, ""), -EBADMSG);
	ck_assert_int_eq(parse_with(2, "12a"), -EBADMSG);
	ck_assert_int_eq(parse_with(2, "-1"), -EBADMSG);
	ck_assert_int_eq(parse_with(2, "18446744073709551616"), -EBADMSG);
	ck_assert_int_eq(parse_with(2, "18446744073709551615"), 1);
	ck_assert_int_eq(parse_with(4, "4294967296"), -EBADMSG);
	ck_assert_int_eq(parse_with(5, " 1"), -EBADMSG);
	ck_assert_int_eq(parse_with(8, ""), -EBADMSG);
	ck_assert_int_eq(parse_with(8, "-"), -EBADMSG);
	ck_assert_int_eq(parse_with(8, ".5"), -EBADMSG);
	ck_assert_int_eq(parse_with(9, "1."), -EBADMSG);
	ck_assert_int_eq(parse_with(9, "1.2.3"), -EBADMSG);
	ck_assert_int_eq(parse_with(10, "99999999999999999999"), -EBADMSG);
	ck_assert_int_eq(parse_with(10, "-9223372036854775807.5"), 1);
}
END_TEST

static void compare_with_lstat(const char *dir, const struct fs_v1_rec *r)
{
	char path[PATH_MAX], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, r->name);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_uint_eq(r->attr.perm, st.st_mode & 07777);
	ck_assert_uint_eq(r->attr.size, (uint64_t)st.st_size);
	ck_assert_uint_eq(r->attr.nlink, (uint64_t)st.st_nlink);
	ck_assert_uint_eq(r->attr.uid, st.st_uid);
	ck_assert_uint_eq(r->attr.gid, st.st_gid);
	ck_assert_uint_eq(r->attr.ino, (uint64_t)st.st_ino);
	ck_assert_uint_eq(r->attr.blocks, (uint64_t)st.st_blocks);
	ck_assert_int_eq(r->attr.mtime, st.st_mtim.tv_sec);
	ck_assert_uint_eq(r->attr.mtime_ns, (uint64_t)st.st_mtim.tv_nsec);
	ck_assert_int_eq(r->attr.ctime, st.st_ctim.tv_sec);
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		ck_assert_int_eq(r->attr.type, PROTO_FT_FILE);
		break;
	case S_IFDIR:
		ck_assert_int_eq(r->attr.type, PROTO_FT_DIR);
		break;
	case S_IFIFO:
		ck_assert_int_eq(r->attr.type, PROTO_FT_FIFO);
		break;
	case S_IFSOCK:
		ck_assert_int_eq(r->attr.type, PROTO_FT_SOCKET);
		break;
	case S_IFLNK:
		ck_assert_int_eq(r->attr.type, PROTO_FT_SYMLINK);
		n = readlink(path, target, sizeof(target) - 1);
		ck_assert(n >= 0);
		target[n] = '\0';
		ck_assert_str_eq(r->target, target);
		return;
	default:
		ck_abort_msg("unexpected file type");
	}
	ck_assert_str_eq(r->target, "");
}

/* What the real find prints parses to what lstat says. */
START_TEST(parse_real_find)
{
	static const char *const names[] = {
		"new\nline",	"sp ace", "it's \"q\"", "-dash",
		"\xff\xfe\x80", "file",	  "dir",	"fifo",
		"sock",		"link",	  "\\0 and %p"};
	char *dir = th_tmpdir("fsv1find");
	char path[PATH_MAX];
	struct sockaddr_un sa;
	struct timespec ts[2] = {{-1, 250000000}, {1234567890, 987654321}};
	struct buf out = BUF_INIT(0);
	struct fs_v1_rec r;
	bool seen[sizeof(names) / sizeof(names[0])] = {false};
	size_t pos = 0, count = 0, i;
	bool file_seen = false;
	int fd;

	for (i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		th_write_file(path, names[i], strlen(names[i]));
	}
	snprintf(path, sizeof(path), "%s/file", dir);
	th_write_file(path, "0123456789", 10);
	ck_assert_int_eq(chmod(path, 04751), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	snprintf(path, sizeof(path), "%s/dir", dir);
	ck_assert_int_eq(mkdir(path, 01777), 0);
	ck_assert_int_eq(chmod(path, 01777), 0);
	snprintf(path, sizeof(path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0640), 0);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/link", dir);
	ck_assert_int_eq(symlink("target with\nnewline and 'quote'", path), 0);
	snprintf(path, sizeof(path), "%s/\\0 and %%p", dir);
	th_write_file(path, "", 0);

	{
		const char *argv[] = {
			find_bin(),  dir, "-mindepth", "1",
			"-maxdepth", "1", "-printf",   FS_V1_FIND_FORMAT,
			NULL};

		ck_assert_int_eq(run_local(argv, NULL, &out, NULL), 0);
	}
	while (fs_files_v1_parse(out.data, out.len, &pos, false, &r) == 1) {
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strcmp(names[i], r.name) == 0)
				seen[i] = true;
		compare_with_lstat(dir, &r);
		if (strcmp(r.name, "file") == 0) {
			/* Set above, so not moved by anyone's reads: a time
			 * before 1970 and one after, to the nanosecond. */
			ck_assert_int_eq(r.attr.atime, -1);
			ck_assert_uint_eq(r.attr.atime_ns, 250000000);
			ck_assert_int_eq(r.attr.mtime, 1234567890);
			ck_assert_uint_eq(r.attr.mtime_ns, 987654321);
			file_seen = true;
		}
		count++;
	}
	ck_assert_uint_eq(pos, out.len);
	ck_assert_uint_eq(count, sizeof(names) / sizeof(names[0]));
	ck_assert(file_seen);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(seen[i], "%s was not listed", names[i]);

	/* One path (-maxdepth 0), relative to the directory, as "./rel". */
	buf_reset(&out);
	{
		const char *argv[] = {find_bin(), "./-dash", "-maxdepth",
				      "0",	  "-printf", FS_V1_FIND_FORMAT,
				      NULL};

		ck_assert_int_eq(run_local(argv, dir, &out, NULL), 0);
	}
	pos = 0;
	ck_assert_int_eq(fs_files_v1_parse(out.data, out.len, &pos, false, &r),
			 1);
	ck_assert_str_eq(r.name, "-dash");
	ck_assert_uint_eq(pos, out.len);
	compare_with_lstat(dir, &r);

	/* The short form. */
	buf_reset(&out);
	{
		const char *argv[] = {
			find_bin(),  ".", "-mindepth", "1",
			"-maxdepth", "1", "-printf",   FS_V1_FIND_FORMAT_SHORT,
			NULL};

		ck_assert_int_eq(run_local(argv, dir, &out, NULL), 0);
	}
	pos = 0;
	count = 0;
	while (fs_files_v1_parse(out.data, out.len, &pos, true, &r) == 1) {
		if (strcmp(r.name, "link") == 0)
			ck_assert_int_eq(r.attr.type, PROTO_FT_SYMLINK);
		if (strcmp(r.name, "sock") == 0)
			ck_assert_int_eq(r.attr.type, PROTO_FT_SOCKET);
		count++;
	}
	ck_assert_uint_eq(pos, out.len);
	ck_assert_uint_eq(count, sizeof(names) / sizeof(names[0]));
	buf_cleanup(&out);
	th_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- diagnostics to errno ------------------------------------------------ */

static int from_text(const char *s)
{
	return fs_files_v1_errno_from_text(s, strlen(s));
}

START_TEST(errno_table)
{
	ck_assert_int_eq(from_text("find: './x': No such file or directory\n"),
			 ENOENT);
	ck_assert_int_eq(from_text("rm: cannot remove './d': Is a directory\n"),
			 EISDIR);
	ck_assert_int_eq(from_text("rmdir: failed to remove './d': Directory "
				   "not empty\n"),
			 ENOTEMPTY);
	ck_assert_int_eq(from_text("rmdir: failed to remove './f': Not a "
				   "directory\n"),
			 ENOTDIR);
	ck_assert_int_eq(from_text("ln: failed to create hard link './b': "
				   "File exists\r\n"),
			 EEXIST);
	ck_assert_int_eq(from_text("chmod: changing permissions of './f': "
				   "Operation not permitted\n"),
			 EPERM);
	ck_assert_int_eq(from_text("touch: cannot touch './f': Permission "
				   "denied"),
			 EACCES);
	ck_assert_int_eq(from_text("mv: cannot move './a': Read-only file "
				   "system\n"),
			 EROFS);
	ck_assert_int_eq(from_text("x: './l': Too many levels of symbolic "
				   "links\n"),
			 ELOOP);
	/* The line's end decides, not a name that looks like an error. */
	ck_assert_int_eq(from_text("rm: cannot remove './Permission denied': "
				   "No such file or directory\n"),
			 ENOENT);
	ck_assert_int_eq(from_text("rm: cannot remove './File exists': Is a "
				   "directory\n"),
			 EISDIR);
	/* The first line that names an error wins. */
	ck_assert_int_eq(from_text("warning: something\n"
				   "rm: './a': Directory not empty\n"
				   "rm: './b': Is a directory\n"),
			 ENOTEMPTY);
	/* Diagnostics without a strerror text. */
	ck_assert_int_eq(from_text("mv: cannot move './a' to a subdirectory "
				   "of itself, './a/b'\n"),
			 EINVAL);
	ck_assert_int_eq(from_text("mv: not replacing './b'\n"), EEXIST);
	ck_assert_int_eq(from_text("mv: cannot overwrite directory './b' with "
				   "non-directory\n"),
			 EISDIR);
	ck_assert_int_eq(from_text("mv: cannot overwrite non-directory './b' "
				   "with directory './a'\n"),
			 ENOTDIR);
	/* musl's words. */
	ck_assert_int_eq(from_text("rm: can't remove 'x': Symbolic link "
				   "loop\n"),
			 ELOOP);
	ck_assert_int_eq(from_text("mv: can't rename 'a': Cross-device link\n"),
			 EXDEV);
	ck_assert_int_eq(from_text("touch: 'a': Filename too long\n"),
			 ENAMETOOLONG);
	/* Somewhere in a line, when no line ends with one. */
	ck_assert_int_eq(from_text("error (No space left on device) while "
				   "writing\n"),
			 ENOSPC);
	ck_assert_int_eq(from_text("something went wrong\n"), 0);
	ck_assert_int_eq(from_text(""), 0);
	ck_assert_int_eq(fs_files_v1_errno_from_text(NULL, 0), 0);
	/* Every errno this system names maps back to itself (or to an
	 * errno with the same text). */
	{
		int e;

		for (e = 1; e <= 133; e++) {
			char line[160];
			const char *t = strerror(e);
			int got;

			if (strncmp(t, "Unknown error", 13) == 0)
				continue;
			snprintf(line, sizeof(line), "cmd: './x': %s\n", t);
			got = from_text(line);
			ck_assert_msg(got == e || strcmp(strerror(got), t) == 0,
				      "%d (%s) came back as %d", e, t, got);
		}
	}
}
END_TEST

/* The real tools' diagnostics map to the errno the syscall would give. */
START_TEST(errno_real_tools)
{
	char *dir = th_tmpdir("fsv1err");
	char path[PATH_MAX];
	struct buf err = BUF_INIT(0);
	struct {
		const char *argv[8];
		int want;
	} cases[] = {
		{{"rm", "--", "./d", NULL}, EISDIR},
		{{"rmdir", "--", "./d", NULL}, ENOTEMPTY},
		{{"rmdir", "--", "./f", NULL}, ENOTDIR},
		{{"rm", "--", "./missing", NULL}, ENOENT},
		{{"find", "./missing", "-maxdepth", "0", NULL}, ENOENT},
		{{"ln", "-P", "-T", "--", "./f", "./g", NULL}, EEXIST},
		{{"ln", "-s", "-T", "--", "x", "./g", NULL}, EEXIST},
		{{"mv", "-T", "--", "./d", "./d/sub", NULL}, EINVAL},
		{{"mv", "-T", "--", "./d", "./f", NULL}, ENOTDIR},
		{{"mv", "-T", "--", "./f", "./d", NULL}, EISDIR},
		{{"touch", "-h", "--", "./missing", NULL}, ENOENT},
		{{"chmod", "00644", "--", "./missing", NULL}, ENOENT},
		{{"truncate", "-c", "-s", "1", "--", "./d", NULL}, EISDIR},
		{{"rmdir", "--", "./missing/x", NULL}, ENOENT},
	};
	size_t i;

	snprintf(path, sizeof(path), "%s/d/sub/x", dir);
	th_write_file(path, "x", 1);
	snprintf(path, sizeof(path), "%s/f", dir);
	th_write_file(path, "f", 1);
	snprintf(path, sizeof(path), "%s/g", dir);
	th_write_file(path, "g", 1);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code;

		cases[i].argv[0] = cases[i].argv[0][0] == 'f'
					   ? find_bin()
					   : xstrdup(tool(cases[i].argv[0]));
		buf_reset(&err);
		code = run_local(cases[i].argv, dir, NULL, &err);
		ck_assert_msg(code != 0, "%s succeeded", cases[i].argv[0]);
		ck_assert_msg(fs_files_v1_errno_from_text(err.data, err.len) ==
				      cases[i].want,
			      "%s: '%s' did not give %d", cases[i].argv[0],
			      err.data ? err.data : "", cases[i].want);
		if (cases[i].argv[0] != find_bin())
			free((char *)cases[i].argv[0]);
	}
	buf_cleanup(&err);
	th_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- shell quoting ------------------------------------------------------- */

START_TEST(quote_words)
{
	static const char *const words[] = {
		"plain",       "",	     "it's",	 "''",
		"sp ace",      "new\nline",  "$(false)", "`x`",
		"back\\slash", "\"dq\"",     "-dash",	 "\xff\xfe\x80",
		"a'b'c'",      "%y\\0%m\\0", "*?[a]",	 "!x;y&z|w>v<u",
	};
	struct buf q = BUF_INIT(0);
	size_t i;

	ck_assert_int_eq(fs_files_v1_shell_quote(&q, "it's"), 0);
	ck_assert_str_eq(q.data, "'it'\\''s'");
	buf_reset(&q);
	ck_assert_int_eq(fs_files_v1_shell_quote(&q, ""), 0);
	ck_assert_str_eq(q.data, "''");
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		struct buf out = BUF_INIT(0);
		const char *argv[] = {"/bin/sh", "-c", NULL, NULL};

		buf_reset(&q);
		ck_assert_int_eq(buf_append_str(&q, "printf '%s' "), 0);
		ck_assert_int_eq(fs_files_v1_shell_quote(&q, words[i]), 0);
		argv[2] = q.data;
		ck_assert_int_eq(run_local(argv, NULL, &out, NULL), 0);
		ck_assert_uint_eq(out.len, strlen(words[i]));
		ck_assert(out.len == 0 ||
			  memcmp(out.data, words[i], out.len) == 0);
		buf_cleanup(&out);
	}
	/* A bounded buffer reports that it is full. */
	{
		struct buf small = BUF_INIT(4);

		ck_assert_int_eq(fs_files_v1_shell_quote(&small, "abcdef"),
				 -EFBIG);
		buf_cleanup(&small);
	}
	buf_cleanup(&q);
}
END_TEST

/* ---- the per-open buffer ------------------------------------------------- */

START_TEST(buffer_read_write)
{
	struct buf b = BUF_INIT(FS_V1_FILE_MAX);
	char out[32];

	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, sizeof(out), 0), 0);
	ck_assert_int_eq(fs_files_v1_buf_write(&b, "hello", 5, 0), 5);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, 3, 1), 3);
	ck_assert(memcmp(out, "ell", 3) == 0);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, sizeof(out), 3), 2);
	ck_assert(memcmp(out, "lo", 2) == 0);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, sizeof(out), 5), 0);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, sizeof(out), 100), 0);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, 1, -1), -EINVAL);
	/* Past the end: the gap reads as zeros. */
	ck_assert_int_eq(fs_files_v1_buf_write(&b, "XY", 2, 8), 2);
	ck_assert_uint_eq(b.len, 10);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, sizeof(out), 0), 10);
	ck_assert(memcmp(out, "hello\0\0\0XY", 10) == 0);
	/* Overwrite inside, across the end. */
	ck_assert_int_eq(fs_files_v1_buf_write(&b, "abc", 3, 1), 3);
	ck_assert_int_eq(fs_files_v1_buf_write(&b, "1234", 4, 9), 4);
	ck_assert_uint_eq(b.len, 13);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, sizeof(out), 0), 13);
	ck_assert(memcmp(out, "habco\0\0\0X1234", 13) == 0);
	ck_assert_int_eq(fs_files_v1_buf_write(&b, "z", 0, 100), 0);
	ck_assert_uint_eq(b.len, 13);
	ck_assert_int_eq(fs_files_v1_buf_write(&b, "z", 1, -1), -EINVAL);
	/* Truncate down and up. */
	ck_assert_int_eq(fs_files_v1_buf_truncate(&b, 2), 0);
	ck_assert_uint_eq(b.len, 2);
	ck_assert_int_eq(fs_files_v1_buf_truncate(&b, 5), 0);
	ck_assert_int_eq(fs_files_v1_buf_read(&b, out, sizeof(out), 0), 5);
	ck_assert(memcmp(out, "ha\0\0\0", 5) == 0);
	ck_assert_int_eq(fs_files_v1_buf_truncate(&b, 0), 0);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_int_eq(fs_files_v1_buf_truncate(&b, -1), -EINVAL);
	buf_cleanup(&b);
}
END_TEST

START_TEST(buffer_limit)
{
	struct buf b = BUF_INIT(FS_V1_FILE_MAX);
	struct buf small = BUF_INIT(16);
	char out[4];

	ck_assert_uint_eq(FS_V1_FILE_MAX, 33554432UL);
	/* The last byte of 32 MiB is fine; one more is EFBIG, and nothing
	 * changes. */
	ck_assert_int_eq(
		fs_files_v1_buf_write(&b, "Z", 1, (off_t)FS_V1_FILE_MAX - 1),
		1);
	ck_assert_uint_eq(b.len, FS_V1_FILE_MAX);
	ck_assert_int_eq(
		fs_files_v1_buf_read(&b, out, 4, (off_t)FS_V1_FILE_MAX - 2), 2);
	ck_assert(memcmp(out, "\0Z", 2) == 0);
	ck_assert_int_eq(
		fs_files_v1_buf_write(&b, "Z", 1, (off_t)FS_V1_FILE_MAX),
		-EFBIG);
	ck_assert_int_eq(
		fs_files_v1_buf_write(&b, "ZZ", 2, (off_t)FS_V1_FILE_MAX - 1),
		-EFBIG);
	ck_assert_uint_eq(b.len, FS_V1_FILE_MAX);
	ck_assert_int_eq(
		fs_files_v1_buf_read(&b, out, 4, (off_t)FS_V1_FILE_MAX - 1), 1);
	ck_assert_int_eq(out[0], 'Z');
	ck_assert_int_eq(
		fs_files_v1_buf_truncate(&b, (off_t)FS_V1_FILE_MAX + 1),
		-EFBIG);
	ck_assert_uint_eq(b.len, FS_V1_FILE_MAX);
	ck_assert_int_eq(fs_files_v1_buf_truncate(&b, (off_t)FS_V1_FILE_MAX),
			 0);
	/* From empty straight past the limit. */
	ck_assert_int_eq(fs_files_v1_buf_truncate(&b, 0), 0);
	ck_assert_int_eq(
		fs_files_v1_buf_write(&b, "Z", 1, (off_t)FS_V1_FILE_MAX + 10),
		-EFBIG);
	ck_assert_uint_eq(b.len, 0);
	/* A buffer's own, smaller maximum holds too. */
	ck_assert_int_eq(fs_files_v1_buf_write(&small, "0123456789", 10, 10),
			 -EFBIG);
	ck_assert_int_eq(fs_files_v1_buf_write(&small, "012345", 6, 10), 6);
	ck_assert_int_eq(fs_files_v1_buf_truncate(&small, 17), -EFBIG);
	buf_cleanup(&small);
	buf_cleanup(&b);
}
END_TEST

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

static char *make_root(char **parent, const char *tag)
{
	char *root;

	*parent = th_tmpdir(tag);
	ck_assert_int_eq(chmod(*parent, 0711), 0);
	ck_assert(asprintf(&root, "%s/root", *parent) > 0);
	ck_assert_int_eq(mkdir(root, 0777), 0);
	ck_assert_int_eq(chmod(root, 0777), 0);
	return root;
}

static void agent_start(void)
{
	const char *args[] = {"--root", NULL, "--strict-v1", NULL};

	exec_uid = geteuid() == 0 ? 65534 : geteuid();
	agent_root = make_root(&agent_parent, "fsv1agent");
	args[1] = agent_root;
	th_agent_start(&agent, args, false);
}

static void agent_stop(void)
{
	th_agent_stop(&agent);
	th_rmtree(agent_parent);
	free(agent_parent);
	free(agent_root);
}

/* An agent that keeps 2 KiB of a command's output. */
static void small_start(void)
{
	const char *args[] = {"--root",	      NULL,   "--strict-v1",
			      "--output-cap", "2048", NULL};

	exec_uid = geteuid() == 0 ? 65534 : geteuid();
	small_root = make_root(&small_parent, "fsv1small");
	args[1] = small_root;
	th_agent_start(&small_agent, args, false);
}

static void small_stop(void)
{
	th_agent_stop(&small_agent);
	th_rmtree(small_parent);
	free(small_parent);
	free(small_root);
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

static char *slurp(const char *rel)
{
	char *s = th_read_file(on_disk(rel), NULL);

	ck_assert_msg(s != NULL, "%s is missing", rel);
	return s;
}

START_TEST(agent_write_and_list)
{
	struct fuse_file_info fi;
	struct listing l;
	struct stat st;
	char *text, buf[64];
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
	text = slurp("w/a b");
	ck_assert_str_eq(text, "hello world");
	free(text);
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

START_TEST(agent_open_modes)
{
	struct fuse_file_info fi;
	struct stat st;
	char *text, buf[64];

	put_dir("o");
	put("o/f", "hello");
	/* O_APPEND writes land at the end whatever offset comes. */
	fi_init(&fi, O_WRONLY | O_APPEND);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->write(box, "o/f", "XYZ", 3, 0, &fi), 3);
	ck_assert_int_eq(ops->flush(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->release(box, "o/f", &fi), 0);
	text = slurp("o/f");
	ck_assert_str_eq(text, "helloXYZ");
	free(text);

	/* O_RDWR: a write in the middle keeps the rest. */
	fi_init(&fi, O_RDWR);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->write(box, "o/f", "J", 1, 0, &fi), 1);
	ck_assert_int_eq(ops->read(box, "o/f", buf, sizeof(buf), 0, &fi), 8);
	ck_assert(memcmp(buf, "JelloXYZ", 8) == 0);
	/* ftruncate acts on the buffer. */
	ck_assert_int_eq(ops->truncate(box, "o/f", 4, &fi), 0);
	ck_assert_int_eq(ops->fsync(box, "o/f", 0, &fi), 0);
	text = slurp("o/f");
	ck_assert_str_eq(text, "Jell");
	free(text);
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
	fi_init(&fi, O_WRONLY);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->write(box, "o/f", "late", 4, 0, &fi), 4);
	ck_assert_int_eq(ops->release(box, "o/f", &fi), 0);
	text = slurp("o/f");
	ck_assert_str_eq(text, "late");
	free(text);

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
	fi_init(&fi, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(ops->open(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->write(box, "o/f", "small", 5, 0, &fi), 5);
	ck_assert_int_eq(ops->flush(box, "o/f", &fi), 0);
	ck_assert_int_eq(ops->release(box, "o/f", &fi), 0);
	text = slurp("o/f");
	ck_assert_str_eq(text, "small");
	free(text);
}
END_TEST

START_TEST(agent_tree_changes)
{
	struct fuse_file_info fi;
	struct listing l;
	struct stat st;
	char buf[64];
	char *text;

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
	text = slurp("t/g");
	ck_assert_str_eq(text, "content");
	free(text);
	ck_assert_int_eq(ops->getattr(box, "t/f", &st, NULL), -ENOENT);
	put("t/h", "other");
	ck_assert_int_eq(ops->rename(box, "t/h", "t/g", RENAME_NOREPLACE),
			 -EEXIST);
	text = slurp("t/h");
	ck_assert_str_eq(text, "other");
	free(text);
	ck_assert_int_eq(ops->rename(box, "t/h", "t/i", RENAME_NOREPLACE), 0);
	ck_assert_int_eq(lstat(on_disk("t/i"), &st), 0);
	ck_assert_int_eq(ops->rename(box, "t/i", "t/g", RENAME_EXCHANGE),
			 -EINVAL);
	ck_assert_int_eq(ops->rename(box, "t/d", "t/d/sub", 0), -EINVAL);
	ck_assert_int_eq(ops->rename(box, "t/missing", "t/x", 0), -ENOENT);
	/* Over a file: replaced, as rename(2) does. */
	ck_assert_int_eq(ops->rename(box, "t/i", "t/g", 0), 0);
	text = slurp("t/g");
	ck_assert_str_eq(text, "other");
	free(text);

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
	text = slurp("t/g");
	ck_assert_str_eq(text, "ot");
	free(text);
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
	text = slurp("t/-x 'y'\n");
	ck_assert_str_eq(text, "z");
	free(text);
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
	{
		char *text = slurp("f");

		ck_assert_str_eq(text, "data");
		free(text);
	}
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

Suite *make_fs_v1_suite(void)
{
	const TTest *t_parse[] = {parse_every_type, parse_short_form,
				  parse_malformed, parse_real_find, NULL};
	const TTest *t_errno[] = {errno_table, errno_real_tools, NULL};
	const TTest *t_quote[] = {quote_words, NULL};
	const TTest *t_buffer[] = {buffer_read_write, buffer_limit, NULL};
	const TTest *t_agent[] = {agent_write_and_list,
				  agent_open_modes,
				  agent_tree_changes,
				  agent_times_and_statfs,
				  agent_read_only_mount,
				  agent_concurrent_writes,
				  NULL};
	const TTest *t_agent_small_cap[] = {agent_listing_past_output_cap,
					    NULL};
	const TTest *t_native[] = {native_reads, native_is_read_only, NULL};
	const TTest *t_native_no_exec[] = {native_without_exec, NULL};
	static const struct th_fixture fx_agent = {
		agent_setup, agent_teardown, agent_start, agent_stop, 120};
	static const struct th_fixture fx_small = {small_setup, agent_teardown,
						   small_start, small_stop, 60};
	static const struct th_fixture fx_native = {
		native_setup, native_teardown, native_start, native_stop, 60};
	const struct th_case cases[] = {
		{"parse", t_parse, NULL},
		{"errno", t_errno, NULL},
		{"quote", t_quote, NULL},
		{"buffer", t_buffer, NULL},
		{"agent", t_agent, &fx_agent},
		{"agent_small_cap", t_agent_small_cap, &fx_small},
		{"native", t_native, &fx_native},
		{"native_no_exec", t_native_no_exec, NULL},
		{NULL, NULL, NULL},
	};

	return th_suite("fs_v1", cases);
}
