/* SPDX-License-Identifier: MIT */
/*
 * The suite "local": the local provider's pure and filesystem parts
 * (sandbox names, the state directory's resolution, atomic record
 * replacement, the per-sandbox lock, tree removal, route rules). Its
 * records as JSON are check_local_records.c's, its lifecycle
 * check_local_ctl.c's.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_record.h"
#include "common/strv.h"
#include "common/token.h"
#include "common/unixurl.h"
#include "client/local_ctl.h"
#include "client/local_state.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

/* ---- names -------------------------------------------------------------- */

START_TEST(id_validation)
{
	static const char *const refused[] = {
		"", NULL, ".", "..", "a/b", "a b", "a.b", "caf\xc3\xa9", "a\n"};
	char longest[LOCAL_ID_MAX + 2];
	size_t i;

	ck_assert(local_state_id_valid("a"));
	ck_assert(local_state_id_valid("Demo-1_x"));
	ck_assert(local_state_id_valid("-"));
	memset(longest, 'x', sizeof(longest));
	longest[LOCAL_ID_MAX] = '\0';
	ck_assert(local_state_id_valid(longest));
	longest[LOCAL_ID_MAX] = 'x';
	longest[LOCAL_ID_MAX + 1] = '\0';
	ck_assert(!local_state_id_valid(longest));
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		ck_assert_msg(!local_state_id_valid(refused[i]), "row %zu", i);
}
END_TEST

/* ---- the state directory ------------------------------------------------ */

START_TEST(state_dir_order)
{
	char *d = NULL;

	ck_assert_int_eq(local_state_dir_pick("/opt/st/", "/env", "/xdg",
					      "/home/u", 1000, &d),
			 0);
	ck_assert_str_eq(d, "/opt/st");
	free(d);
	ck_assert_int_eq(local_state_dir_pick(NULL, "/env//x/./", "/xdg",
					      "/home/u", 1000, &d),
			 0);
	ck_assert_str_eq(d, "/env/x");
	free(d);
	ck_assert_int_eq(local_state_dir_pick("", "", "/xdg", "/home/u", 0, &d),
			 0);
	ck_assert_str_eq(d, "/var/lib/sandboxfs");
	free(d);
	ck_assert_int_eq(
		local_state_dir_pick(NULL, NULL, "/xdg", "/home/u", 1000, &d),
		0);
	ck_assert_str_eq(d, "/xdg/sandboxfs");
	free(d);
	/* A relative XDG_STATE_HOME is ignored (XDG base directory rules). */
	ck_assert_int_eq(
		local_state_dir_pick(NULL, NULL, "rel", "/home/u", 1000, &d),
		0);
	ck_assert_str_eq(d, "/home/u/.local/state/sandboxfs");
	free(d);
	ck_assert_int_eq(
		local_state_dir_pick(NULL, NULL, "", "/home/u", 1000, &d), 0);
	ck_assert_str_eq(d, "/home/u/.local/state/sandboxfs");
	free(d);
	d = NULL;
	ck_assert_int_eq(local_state_dir_pick(NULL, NULL, NULL, NULL, 1000, &d),
			 -ENOENT);
	ck_assert_ptr_null(d);
}
END_TEST

START_TEST(state_dir_relative_and_env)
{
	char cwd[PATH_MAX], want[PATH_MAX + 32];
	char *d = NULL;
	char *saved = getenv("SANDBOXFS_STATE_DIR");

	saved = saved ? strdup(saved) : NULL;
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(
		local_state_dir_pick("st/./x/", NULL, NULL, NULL, 0, &d), 0);
	snprintf(want, sizeof(want), "%s/st/x", strcmp(cwd, "/") ? cwd : "");
	ck_assert_str_eq(d, want);
	free(d);

	/* The real environment: the variable beats the per-user default,
	 * and the option beats the variable. */
	setenv("SANDBOXFS_STATE_DIR", "/from/env", 1);
	ck_assert_int_eq(local_state_dir_resolve(NULL, &d), 0);
	ck_assert_str_eq(d, "/from/env");
	free(d);
	ck_assert_int_eq(local_state_dir_resolve("/opt", &d), 0);
	ck_assert_str_eq(d, "/opt");
	free(d);
	unsetenv("SANDBOXFS_STATE_DIR");
	ck_assert_int_eq(local_state_dir_resolve(NULL, &d), 0);
	if (geteuid() == 0) {
		ck_assert_str_eq(d, "/var/lib/sandboxfs");
	} else {
		const char *xdg = getenv("XDG_STATE_HOME");

		if (xdg != NULL && xdg[0] == '/')
			snprintf(want, sizeof(want), "%s/sandboxfs", xdg);
		else
			snprintf(want, sizeof(want),
				 "%s/.local/state/sandboxfs", getenv("HOME"));
		ck_assert_str_eq(d, want);
	}
	free(d);
	if (saved != NULL)
		setenv("SANDBOXFS_STATE_DIR", saved, 1);
	free(saved);
}
END_TEST

static char *state;

static void state_setup(void)
{
	state = th_tmpdir("state");
}

static void state_teardown(void)
{
	th_rmtree_free(state);
	state = NULL;
}

/* A sandbox directory with this record text. */
static char *put_record(const char *id, const char *text)
{
	char *path = local_state_path(state, id, LOCAL_PATH_RECORD);

	th_write_file(path, text, strlen(text));
	return path;
}

static void write_labels(const char *id, enum proto_record_state s,
			 const char *label_value, int extra)
{
	struct local_err err = {""};
	struct proto_record r;
	char *dir = local_state_path(state, id, LOCAL_PATH_DIR);

	ck_assert_int_eq(local_state_prepare(state, &err), 0);
	mkdir(dir, 0700);
	free(dir);
	proto_record_init(&r);
	ck_assert_int_eq(proto_record_set_str(&r.id, id), 0);
	r.state = s;
	ck_assert_int_eq(proto_record_set_label(&r, "big", label_value), 0);
	for (int i = 0; i < extra; i++) {
		char key[16], value[1001];

		snprintf(key, sizeof(key), "k%d", i);
		memset(value, 'v', 1000);
		value[1000] = '\0';
		ck_assert_int_eq(proto_record_set_label(&r, key, value), 0);
	}
	ck_assert_int_eq(local_state_write(state, &r, &err), 0);
	proto_record_cleanup(&r);
}

static void write_simple(const char *id, enum proto_record_state s,
			 const char *label_value)
{
	write_labels(id, s, label_value, 0);
}

START_TEST(state_list_and_read)
{
	struct local_err err = {""};
	struct proto_record r;
	struct stat st;
	char **ids = NULL, *path;
	size_t n = 99;

	ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
	ck_assert_uint_eq(n, 0);
	strv_free(ids, n);

	write_simple("zeta", PROTO_RECORD_STOPPED, "1");
	write_simple("alpha", PROTO_RECORD_RUNNING, "2");
	write_simple("Mid", PROTO_RECORD_STOPPED, "3");
	ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(ids[0], "Mid");
	ck_assert_str_eq(ids[1], "alpha");
	ck_assert_str_eq(ids[2], "zeta");
	strv_free(ids, n);

	ck_assert_int_eq(local_state_read(state, "alpha", &r, &err), 0);
	ck_assert_str_eq(r.id, "alpha");
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert_str_eq(proto_record_label(&r, "big"), "2");
	proto_record_cleanup(&r);
	path = local_state_path(state, "alpha", LOCAL_PATH_RECORD);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	free(path);

	ck_assert_int_eq(local_state_read(state, "nope", &r, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no sandbox 'nope'"));
	ck_assert_int_eq(local_state_read(state, "bad/name", &r, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "invalid sandbox name"));
}
END_TEST

START_TEST(state_list_skips_strays)
{
	char **ids = NULL, *p;
	size_t n = 0;

	write_simple("ok", PROTO_RECORD_STOPPED, "1");
	p = local_state_path(state, NULL, LOCAL_PATH_SANDBOXES);
	{
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/.rm-x-1-2", p);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/bad name", p);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/afile", p);
		th_write_file(path, "x", 1);
	}
	free(p);
	ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ids[0], "ok");
	strv_free(ids, n);
}
END_TEST

static void expect_corrupt(const char *id, const char *text, const char *reason)
{
	struct local_err err = {""};
	struct proto_record r;
	char *path = put_record(id, text);

	ck_assert_int_eq(local_state_read(state, id, &r, &err), -EBADMSG);
	/* The message names the file and the reason. */
	ck_assert_msg(strstr(err.msg, path) != NULL &&
			      strstr(err.msg, reason) != NULL,
		      "message '%s' (wanted %s and '%s')", err.msg, path,
		      reason);
	free(path);
}

START_TEST(state_corrupt_records)
{
	char *path, *big;
	struct local_err err = {""};
	struct proto_record r;

	expect_corrupt("c1", "{\"id\":\"c1\",", "not valid JSON");
	expect_corrupt("c2", "", "not valid JSON");
	expect_corrupt("c3", "{\"state\":\"Running\"}", "\"id\"");
	expect_corrupt("c4", "{\"id\":\"other\",\"state\":\"Running\"}",
		       "directory's name");
	expect_corrupt("c5", "{\"id\":\"c5\",\"state\":\"Exploded\"}",
		       "unknown \"state\"");
	expect_corrupt("c6",
		       "{\"id\":\"c6\",\"state\":\"Running\","
		       "\"labels\":{\"x\":[]}}",
		       "label");

	/* Larger than any record may be. */
	big = malloc(PROTO_RECORD_MAX_BYTES + 100);
	ck_assert_ptr_nonnull(big);
	memset(big, ' ', PROTO_RECORD_MAX_BYTES + 99);
	big[PROTO_RECORD_MAX_BYTES + 99] = '\0';
	memcpy(big, "{\"id\":\"c7\",\"state\":\"Running\"}", 29);
	expect_corrupt("c7", big, "larger than");
	free(big);

	/* A symlinked record is not followed. */
	path = local_state_path(state, "c8", LOCAL_PATH_DIR);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	free(path);
	path = local_state_path(state, "c8", LOCAL_PATH_RECORD);
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);
	ck_assert_int_eq(local_state_read(state, "c8", &r, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, path));
	free(path);

	/* A directory without its record is missing, not corrupt. */
	path = local_state_path(state, "c9", LOCAL_PATH_DIR);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	free(path);
	ck_assert_int_eq(local_state_read(state, "c9", &r, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no record"));
}
END_TEST

START_TEST(state_atomic_replace)
{
	struct local_err err = {""};
	struct proto_record r;
	long long end;
	int status, reads = 0, rc;
	pid_t writer;

	write_simple("at", PROTO_RECORD_STOPPED, "s");
	writer = fork();
	ck_assert_int_ge(writer, 0);
	if (writer == 0) {
		/* Alternate a tiny and a 200 kB record for a while. */
		end = th_now_ms() + 1500;
		for (int i = 0; th_now_ms() < end; i++)
			write_labels("at", PROTO_RECORD_RUNNING,
				     i % 2 ? "s" : "l", i % 2 ? 0 : 200);
		_exit(0);
	}
	for (;;) {
		rc = local_state_read(state, "at", &r, &err);
		ck_assert_msg(rc == 0, "read %d: %s", reads, err.msg);
		ck_assert(r.nlabels == 1 || r.nlabels == 201);
		ck_assert_str_eq(proto_record_label(&r, "big"),
				 r.nlabels == 1 ? "s" : "l");
		proto_record_cleanup(&r);
		reads++;
		if (waitpid(writer, &status, WNOHANG) == writer)
			break;
	}
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_gt(reads, 20);
	/* No temporary file is left beside the record. */
	{
		char **ids = NULL;
		size_t n = 0;
		char *dir = local_state_path(state, "at", LOCAL_PATH_DIR);
		char cmd[PATH_MAX + 64];

		snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1",
			 dir);
		ck_assert_int_eq(system(cmd), 0);
		free(dir);
		ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
		strv_free(ids, n);
	}
}
END_TEST

START_TEST(state_lock_exclusion)
{
	int a = -1, b = -1, status;
	long long t0;
	pid_t child;
	char *dir;

	ck_assert_int_eq(local_state_lock(state, "lk", 0, &a), -ENOENT);
	write_simple("lk", PROTO_RECORD_STOPPED, "1");
	ck_assert_int_eq(local_state_lock(state, "lk", 0, &a), 0);
	/* A second holder in this process (another descriptor) waits. */
	ck_assert_int_eq(local_state_lock(state, "lk", 0, &b), -EWOULDBLOCK);
	t0 = th_now_ms();
	ck_assert_int_eq(local_state_lock(state, "lk", 200, &b), -ETIMEDOUT);
	ck_assert_int_ge(th_now_ms() - t0, 190);
	/* So does another process, until the lock is released. */
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int fd = -1;

		/* The parent's descriptor came along with the fork: it is
		 * the parent's lock, not one to hold here. */
		close(a);
		if (local_state_lock(state, "lk", 0, &fd) != -EWOULDBLOCK)
			_exit(1);
		if (local_state_lock(state, "lk", 5000, &fd) != 0)
			_exit(2);
		local_state_unlock(fd);
		_exit(0);
	}
	usleep(300000);
	local_state_unlock(a);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(local_state_lock(state, "lk", 0, &a), 0);

	/* A sandbox removed while someone waits is gone for the waiter. */
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int fd = -1;

		close(a);
		_exit(local_state_lock(state, "lk", 5000, &fd) == -ENOENT ? 0
									  : 3);
	}
	usleep(200000);
	dir = local_state_path(state, "lk", LOCAL_PATH_DIR);
	{
		struct local_err err = {""};
		char tomb[PATH_MAX];

		snprintf(tomb, sizeof(tomb), "%s.gone", dir);
		ck_assert_int_eq(rename(dir, tomb), 0);
		ck_assert_int_eq(local_state_rmtree(tomb, &err), 0);
	}
	local_state_unlock(a);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	free(dir);
}
END_TEST

START_TEST(state_rmtree_deep)
{
	struct local_err err = {""};
	char path[8192], cwd[PATH_MAX], *outside;
	struct stat st;
	int i;

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	outside = th_tmpdir("outside");
	snprintf(path, sizeof(path), "%s/victim", outside);
	th_write_file(path, "keep", 4);
	snprintf(path, sizeof(path), "%s/tree", state);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	/* Deeper than any fixed descriptor budget, with a read-only
	 * directory and a symlink to outside on the way. */
	ck_assert_int_eq(chdir(path), 0);
	for (i = 0; i < 300; i++) {
		ck_assert_int_eq(mkdir("d", 0755), 0);
		ck_assert_int_eq(chdir("d"), 0);
		if (i == 150) {
			ck_assert_int_eq(symlink(outside, "link"), 0);
			th_write_file("f", "x", 1);
		}
	}
	ck_assert_int_eq(chdir(".."), 0);
	ck_assert_int_eq(chmod("d", 0500), 0);
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_int_eq(local_state_rmtree(path, &err), 0);
	ck_assert_int_eq(lstat(path, &st), -1);
	snprintf(path, sizeof(path), "%s/victim", outside);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(local_state_rmtree("/nonexistent/x", &err), 0);
	th_rmtree_free(outside);
}
END_TEST

/* The state directory is owner-only whatever the umask, and an open one
 * is made so. */
START_TEST(state_owner_only)
{
	struct local_err err = {""};
	char *sb = local_state_path(state, NULL, LOCAL_PATH_SANDBOXES);
	char *dir = local_state_path(state, "o", LOCAL_PATH_DIR);
	struct stat st;
	mode_t old = umask(0);

	ck_assert_int_eq(local_state_prepare(state, &err), 0);
	umask(old);
	ck_assert_int_eq(stat(state, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(sb, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	/* Directories an older sandboxctl made 0711 (or a user opened). */
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chmod(state, 0755), 0);
	ck_assert_int_eq(chmod(sb, 0711), 0);
	ck_assert_int_eq(chmod(dir, 0711), 0);
	ck_assert_int_eq(local_state_secure(state, "o", &err), 0);
	ck_assert_int_eq(stat(state, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(sb, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	free(sb);
	free(dir);
}
END_TEST

/* A removal that failed part way (here: its ".rm-deep-N" names left
 * behind by an interrupted walk, holding files) is finished by running
 * it again. */
START_TEST(state_rmtree_retry)
{
	struct local_err err = {""};
	char path[8192], cwd[PATH_MAX];
	struct stat st;
	int i;

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	snprintf(path, sizeof(path), "%s/tree", state);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	ck_assert_int_eq(chdir(path), 0);
	for (i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), ".rm-deep-%d", i);
		ck_assert_int_eq(mkdir(name, 0755), 0);
		snprintf(name, sizeof(name), ".rm-deep-%d/f", i);
		th_write_file(name, "x", 1);
	}
	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(mkdir("d", 0755), 0);
		ck_assert_int_eq(chdir("d"), 0);
	}
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_int_eq(local_state_rmtree(path, &err), 0);
	ck_assert_int_eq(lstat(path, &st), -1);
}
END_TEST

START_TEST(route_rules)
{
	unsigned port = 0;
	bool six = true;

	ck_assert(local_state_route_valid("http://127.0.0.1:40123/", &port,
					  &six));
	ck_assert_uint_eq(port, 40123);
	ck_assert(!six);
	ck_assert(local_state_route_valid("http://[::1]:1/", &port, &six));
	ck_assert_uint_eq(port, 1);
	ck_assert(six);
	ck_assert(
		local_state_route_valid("http://127.0.0.1:65535/", NULL, NULL));
	ck_assert(!local_state_route_valid(NULL, NULL, NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1:65536/", NULL,
					   NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1:0/", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:080/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1:80", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80/x", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80/?q", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80/#f", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://u@127.0.0.1:80/", NULL, NULL));
	ck_assert(
		!local_state_route_valid("https://127.0.0.1:80/", NULL, NULL));
	ck_assert(!local_state_route_valid("HTTP://127.0.0.1:80/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://localhost:80/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://10.0.0.1:80/", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80//", NULL, NULL));
}
END_TEST

START_TEST(unix_routes)
{
	char path[PATH_MAX], *url;

	/* The record format's example, both ways. */
	url = unixurl_format("/var/lib/sandboxfs/sandboxes/demo/agent.sock");
	ck_assert_str_eq(url, "http+unix://"
			      "%2Fvar%2Flib%2Fsandboxfs%2Fsandboxes%2Fdemo%"
			      "2Fagent.sock/");
	ck_assert_int_eq(unixurl_parse(url, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/var/lib/sandboxfs/sandboxes/demo/agent.sock");
	free(url);
	/* Bytes outside the unreserved set are escaped, and come back. */
	url = unixurl_format("/tmp/a b/%x/\xc3\xa9.sock");
	ck_assert_str_eq(url,
			 "http+unix://%2Ftmp%2Fa%20b%2F%25x%2F%C3%A9.sock/");
	ck_assert_int_eq(unixurl_parse(url, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/tmp/a b/%x/\xc3\xa9.sock");
	free(url);
	ck_assert_int_eq(
		unixurl_parse("http+unix://%2fs%2fa.sock/", path, sizeof(path)),
		0);
	ck_assert_str_eq(path, "/s/a.sock");
	ck_assert(unixurl_is("http+unix://x"));
	ck_assert(!unixurl_is("http://127.0.0.1:1/"));

	/* Refused: not absolute, a raw '/', no final "/", a path, a query,
	 * a fragment, a user, a NUL, bad escapes, dot components, a
	 * trailing or doubled '/', an empty host, another scheme. */
	static const char *const bad[] = {
		"http+unix://a.sock/",
		"http+unix:///tmp/a.sock/",
		"http+unix://%2Ftmp%2Fa.sock",
		"http+unix://%2Ftmp%2Fa.sock/x",
		"http+unix://%2Ftmp%2Fa.sock/?q",
		"http+unix://%2Ftmp%2Fa.sock/#f",
		"http+unix://u@%2Ftmp%2Fa.sock/",
		"http+unix://%2Ftmp%2Fa%00.sock/",
		"http+unix://%2Ftmp%2Fa%2.sock/",
		"http+unix://%2Ftmp%2Fa%zz.sock/",
		"http+unix://%2Ftmp%2F..%2Fa.sock/",
		"http+unix://%2Ftmp%2F.%2Fa.sock/",
		"http+unix://%2Ftmp%2F%2Fa.sock/",
		"http+unix://%2Ftmp%2F/",
		"http+unix://%2F/",
		"http+unix:///",
		"HTTP+UNIX://%2Ftmp%2Fa.sock/",
		"https+unix://%2Ftmp%2Fa.sock/",
		"http+unix://%2Ftmp%2Fa:1.sock/",
		NULL,
	};
	for (size_t i = 0; bad[i] != NULL; i++)
		ck_assert_msg(unixurl_parse(bad[i], path, sizeof(path)) ==
				      -EINVAL,
			      "accepted %s", bad[i]);
	ck_assert_int_eq(unixurl_parse("http+unix://%2Ftmp%2Fa.sock/", path, 6),
			 -ENAMETOOLONG);

	/* The local policy: beneath the state directory, lexically. */
	ck_assert(local_state_route_socket(
		"/st", "http+unix://%2Fst%2Fsandboxes%2Fa%2Fboot%2Fagent.sock/",
		path, sizeof(path)));
	ck_assert_str_eq(path, "/st/sandboxes/a/boot/agent.sock");
	ck_assert(!local_state_route_socket(
		"/st", "http+unix://%2Fstx%2Fagent.sock/", NULL, 0));
	ck_assert(!local_state_route_socket(
		"/st", "http+unix://%2Fst%2F..%2Fagent.sock/", NULL, 0));
	ck_assert(!local_state_route_socket("/st", "http+unix://%2Fst/", NULL,
					    0));
	ck_assert(!local_state_route_socket("/st", "http://127.0.0.1:1/", NULL,
					    0));
	ck_assert(!local_state_route_socket(
		"/st", "http+unix://%2Fvar%2Frun%2Fdocker.sock/", NULL, 0));
}
END_TEST

void local_cases(Suite *s)
{
	TCASE_TABLE(s, "names", NULL, NULL, 0, id_validation, route_rules,
		    unix_routes);
	TCASE_TABLE(s, "dir", NULL, NULL, 0, state_dir_order,
		    state_dir_relative_and_env);
	TCASE_TABLE(s, "files", state_setup, state_teardown, 30,
		    state_list_and_read, state_list_skips_strays,
		    state_corrupt_records, state_atomic_replace,
		    state_lock_exclusion, state_rmtree_deep, state_rmtree_retry,
		    state_owner_only);
}
