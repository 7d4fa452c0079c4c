/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_v1: the pure parts of files/ without the file extension
 * (fs_files_v1.c): the find -printf record parser (every file type, names
 * with newlines, spaces, quotes, '-' and bytes that are not UTF-8,
 * compared with lstat of what the real find printed), the
 * diagnostics-to-errno table (with diagnostics of the real coreutils),
 * single-quoting of native command lines (checked by a real /bin/sh) and
 * the per-open buffer. The operations themselves are check_fs_v1_ops.c's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "fs/fs_files_v1_i.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

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

/* One field of a good record replaced: what the parser says. */
struct field_case {
	unsigned field;
	const char *value;
	int want;
};

START_TEST(parse_malformed)
{
	/* clang-format off */
	static const char cut[] = "f\0" "644\0" "1\0" "1\0" "0\0" "0\0" "1\0"
				  "0\0" "1\0" "1\0" "1\0" "name\0" "tgt";
	/* clang-format on */
	static const struct field_case cases[] = {
		{0, "f", 1},
		{0, "", -EBADMSG},
		{0, "fd", -EBADMSG},
		{1, "10000", -EBADMSG},
		{1, "8", -EBADMSG},
		{1, "", -EBADMSG},
		{2, "12a", -EBADMSG},
		{2, "-1", -EBADMSG},
		{2, "18446744073709551616", -EBADMSG},
		{2, "18446744073709551615", 1},
		{4, "4294967296", -EBADMSG},
		{5, " 1", -EBADMSG},
		{8, "", -EBADMSG},
		{8, "-", -EBADMSG},
		{8, ".5", -EBADMSG},
		{9, "1.", -EBADMSG},
		{9, "1.2.3", -EBADMSG},
		{10, "99999999999999999999", -EBADMSG},
		{10, "-9223372036854775807.5", 1},
	};
	struct fs_v1_rec r;
	size_t pos = 0, i;
	int rc;

	/* Record cut inside its last field, or after a field. */
	ck_assert_int_eq(
		fs_files_v1_parse(cut, sizeof(cut) - 1, &pos, false, &r),
		-EBADMSG);
	ck_assert_int_eq(fs_files_v1_parse(cut, 12, &pos, false, &r), -EBADMSG);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rc = parse_with(cases[i].field, cases[i].value);
		ck_assert_msg(rc == cases[i].want,
			      "field %u = '%s': %d, not %d", cases[i].field,
			      cases[i].value, rc, cases[i].want);
	}
}
END_TEST

/* The protocol's file type of the mode M; a type find does not list
 * aborts the test. */
static int ftype_of(mode_t m)
{
	static const struct {
		mode_t fmt;
		int type;
	} types[] = {
		{S_IFREG, PROTO_FT_FILE},    {S_IFDIR, PROTO_FT_DIR},
		{S_IFIFO, PROTO_FT_FIFO},    {S_IFSOCK, PROTO_FT_SOCKET},
		{S_IFLNK, PROTO_FT_SYMLINK},
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if ((m & S_IFMT) == types[i].fmt)
			return types[i].type;
	ck_abort_msg("unexpected file type");
	return -1;
}

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
	ck_assert_int_eq(r->attr.type, ftype_of(st.st_mode));
	if (!S_ISLNK(st.st_mode)) {
		ck_assert_str_eq(r->target, "");
		return;
	}
	n = readlink(path, target, sizeof(target) - 1);
	ck_assert(n >= 0);
	target[n] = '\0';
	ck_assert_str_eq(r->target, target);
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

void fs_v1_cases(Suite *s)
{
	TCASE_TABLE(s, "parse", NULL, NULL, 0, parse_every_type,
		    parse_short_form, parse_malformed, parse_real_find);
	TCASE_TABLE(s, "errno", NULL, NULL, 0, errno_table, errno_real_tools);
	TCASE_TABLE(s, "quote", NULL, NULL, 0, quote_words);
	TCASE_TABLE(s, "buffer", NULL, NULL, 0, buffer_read_write,
		    buffer_limit);
}
