/* SPDX-License-Identifier: MIT */
/*
 * The suite "local_ctl": the local provider's lifecycle against the real
 * sandbox-agent of the build (create, start, restart, stop, rm, --from,
 * native sessions and every error a user can meet). Its pure and
 * filesystem parts are check_local.c's.
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
#include "common/token.h"
#include "common/unixurl.h"
#include "common/strv.h"
#include "client/local_ctl.h"
#include "client/local_state.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

/* ---- the lifecycle, against the real agent ------------------------------ */

static struct local_ctl ctl;
static char *ctl_base; /* per tcase, made by the runner process */
static char *ctl_state; /* per test, below ctl_base */

/* Stop and remove every sandbox of a state directory, then the directory. */
static void sweep_dir(const char *dir)
{
	struct local_ctl c;
	struct local_err err = {""};
	char **ids = NULL;
	size_t n = 0, i;

	if (local_ctl_init(&c, dir, &err) == 0) {
		if (local_state_list(dir, &ids, &n) == 0) {
			for (i = 0; i < n; i++)
				if (local_ctl_rm(&c, ids[i], true, &err) < 0)
					fprintf(stderr, "cleanup: %s\n",
						err.msg);
			strv_free(ids, n);
		}
		local_ctl_cleanup(&c);
	}
	th_rmtree(dir);
}

/*
 * A failed assertion ends a forked test at once, without its teardown, so
 * the tcase's unchecked teardown (run by the runner itself) sweeps every
 * test's directory again: no agent outlives the suite.
 */
static void ctl_base_setup(void)
{
	ctl_base = th_tmpdir("ctl");
}

static void ctl_base_teardown(void)
{
	struct dirent *de;
	char path[PATH_MAX];
	DIR *d = opendir(ctl_base);

	while (d != NULL && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", ctl_base, de->d_name);
		sweep_dir(path);
	}
	if (d != NULL)
		closedir(d);
	th_rmtree_free(ctl_base);
	ctl_base = NULL;
}

static void ctl_setup(void)
{
	struct local_err err = {""};

	if (asprintf(&ctl_state, "%s/t-XXXXXX", ctl_base) < 0 ||
	    mkdtemp(ctl_state) == NULL)
		ck_abort_msg("mkdtemp");
	setenv("SANDBOXFS_AGENT", th_program("sandbox-agent"), 1);
	ck_assert_int_eq(local_ctl_init(&ctl, ctl_state, &err), 0);
	ctl.stop_timeout_ms = 5000;
	ctl.start_timeout_ms = 20000;
}

static void ctl_teardown(void)
{
	local_ctl_cleanup(&ctl);
	sweep_dir(ctl_state);
	free(ctl_state);
	ctl_state = NULL;
}

static void get_record(const char *id, struct proto_record *r)
{
	struct local_err err = {""};

	ck_assert_msg(local_state_read(ctl.state_dir, id, r, &err) == 0,
		      "read %s: %s", id, err.msg);
}

static char *ctl_path(const char *id, enum local_path which)
{
	return local_state_path(ctl.state_dir, id, which);
}

/* The process is gone (or a zombie nobody reaped yet). */
static bool proc_gone(pid_t pid)
{
	char path[64], text[512], *paren;
	FILE *f;
	size_t n;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	paren = strrchr(text, ')');
	return paren != NULL && (paren[2] == 'Z' || paren[2] == 'X');
}

static void must(int rc, const struct local_err *err, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %d %s", what, rc, err->msg);
}

static long http_status(const char *url, const char *path)
{
	struct th_resp r;
	char full[256];
	long status;

	snprintf(full, sizeof(full), "%.*s%s", (int)strlen(url) - 1, url, path);
	th_http("GET", full, NULL, NULL, 0, &r);
	status = r.status;
	th_resp_cleanup(&r);
	return status;
}

START_TEST(ctl_create_and_errors)
{
	struct local_create_opts from_missing = {.from = "/nonexistent/src"};
	struct local_err err = {""};
	struct proto_record r;
	struct stat st;
	char **ids = NULL, *p;
	size_t n = 0;

	ck_assert_int_eq(local_ctl_create(&ctl, "bad name", NULL, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "invalid sandbox name"));
	must(local_ctl_create(&ctl, "box", NULL, &err), &err, "create");
	get_record("box", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_str_eq(proto_record_label(&r, PROTO_TRANSPORT_LABEL),
			 PROTO_TRANSPORT_AGENT);
	ck_assert_ptr_null(r.agent_url);
	ck_assert_ptr_nonnull(r.created_at);
	if (geteuid() == 0) {
		/* An identity of its own, from the reserved range. */
		ck_assert_int_ge(r.exec_uid, (long)LOCAL_CTL_DYNAMIC_BASE);
		ck_assert_int_lt(r.exec_uid, (long)(LOCAL_CTL_DYNAMIC_BASE +
						    LOCAL_CTL_DYNAMIC_COUNT));
		ck_assert_int_eq(r.exec_gid, r.exec_uid);
		ck_assert(r.dynamic_user);
		ck_assert_ptr_null(r.exec_user);
	} else {
		ck_assert_int_eq(r.exec_uid, -1);
		ck_assert(!r.dynamic_user);
	}
	/* The limits and the network are recorded, defaults filled in. */
	ck_assert_uint_eq(r.pids, SBX_DEFAULT_PIDS);
	ck_assert_uint_eq(r.tmp_size, SBX_DEFAULT_TMP_SIZE);
	ck_assert_uint_eq(r.memory, sbx_default_memory());
	ck_assert_str_eq(r.network, "user");
	p = ctl_path("box", LOCAL_PATH_ROOT);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	if (geteuid() == 0) {
		ck_assert_int_eq(st.st_uid, r.exec_uid);
		ck_assert_int_eq(st.st_gid, r.exec_gid);
	}
	proto_record_cleanup(&r);
	free(p);
	p = ctl_path("box", LOCAL_PATH_BOOT);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	free(p);

	err.msg[0] = '\0';
	ck_assert_int_eq(local_ctl_create(&ctl, "box", NULL, &err), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "already exists"));

	ck_assert_int_eq(local_ctl_start(&ctl, "ghost", &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no sandbox 'ghost'"));
	ck_assert_int_eq(local_ctl_stop(&ctl, "ghost", &err), -ENOENT);
	ck_assert_int_eq(local_ctl_restart(&ctl, "ghost", &err), -ENOENT);
	ck_assert_int_eq(local_ctl_rm(&ctl, "ghost", true, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no sandbox 'ghost'"));
	{
		struct local_status s;

		ck_assert_int_eq(local_ctl_status(&ctl, "ghost", &s, &err),
				 -ENOENT);
	}
	ck_assert_int_eq(local_ctl_start(&ctl, "../x", &err), -EINVAL);

	/* A failed create leaves nothing behind. */
	ck_assert_int_eq(local_ctl_create(&ctl, "nosrc", &from_missing, &err),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/src"));
	ck_assert_int_eq(local_state_list(ctl.state_dir, &ids, &n), 0);
	ck_assert_uint_eq(n, 1);
	strv_free(ids, n);

	if (geteuid() == 0) {
		struct local_create_opts u = {.user = "root"};

		ck_assert_int_eq(local_ctl_create(&ctl, "u0", &u, &err),
				 -EINVAL);
		u.user = "no-such-user-here";
		ck_assert_int_eq(local_ctl_create(&ctl, "u1", &u, &err),
				 -ENOENT);
		ck_assert_ptr_nonnull(strstr(err.msg, "unknown user"));
		u.user = "1234:4321";
		must(local_ctl_create(&ctl, "u2", &u, &err), &err, "uid:gid");
		get_record("u2", &r);
		ck_assert_int_eq(r.exec_uid, 1234);
		ck_assert_int_eq(r.exec_gid, 4321);
		proto_record_cleanup(&r);
	} else {
		struct local_create_opts u = {.user = "nobody"};

		ck_assert_int_eq(local_ctl_create(&ctl, "u0", &u, &err),
				 -EPERM);
	}
}
END_TEST

/* The claim of uid in the registry: the sandbox directory it names, or
 * NULL. */
static char *claim_of(long uid)
{
	char path[PATH_MAX], *text;

	snprintf(path, sizeof(path), "%s/%ld", LOCAL_CTL_DYNAMIC_REGISTRY, uid);
	if (access(path, F_OK) < 0)
		return NULL;
	text = th_read_file(path, NULL);
	text[strcspn(text, "\n")] = '\0';
	return text;
}

/* Root's sandboxes get identities of their own, whatever state directory
 * they are in, claimed while they exist and given back by rm. */
START_TEST(ctl_identity)
{
	struct local_create_opts o = {.pids = 64, .network = "none"};
	struct local_err err = {""};
	struct local_ctl other;
	struct proto_record r;
	char *dir2 = th_tmpdir("state2"), *claim, *d;
	long a, b, c2;

	if (geteuid() != 0)
		return; /* only root hands out identities */
	must(local_ctl_create(&ctl, "ida", &o, &err), &err, "create ida");
	must(local_ctl_create(&ctl, "idb", NULL, &err), &err, "create idb");
	get_record("ida", &r);
	a = r.exec_uid;
	ck_assert_uint_eq(r.pids, 64);
	ck_assert_str_eq(r.network, "none");
	proto_record_cleanup(&r);
	get_record("idb", &r);
	b = r.exec_uid;
	proto_record_cleanup(&r);
	ck_assert_int_ne(a, b);
	must(local_ctl_init(&other, dir2, &err), &err, "init");
	must(local_ctl_create(&other, "ida", NULL, &err), &err, "create 2");
	{
		struct proto_record r2;

		ck_assert_int_eq(
			local_state_read(other.state_dir, "ida", &r2, &err), 0);
		c2 = r2.exec_uid;
		proto_record_cleanup(&r2);
	}
	ck_assert_int_ne(c2, a);
	ck_assert_int_ne(c2, b);
	d = local_state_path(ctl.state_dir, "ida", LOCAL_PATH_DIR);
	claim = claim_of(a);
	ck_assert_ptr_nonnull(claim);
	ck_assert_str_eq(claim, d);
	free(claim);
	free(d);
	/* rm gives it back; a failed create claims nothing. */
	must(local_ctl_rm(&ctl, "idb", false, &err), &err, "rm");
	ck_assert_ptr_null(claim_of(b));
	o.pids = 3;
	ck_assert_int_eq(local_ctl_create(&ctl, "bad", &o, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--pids"));
	must(local_ctl_rm(&other, "ida", false, &err), &err, "rm 2");
	must(local_ctl_rm(&ctl, "ida", false, &err), &err, "rm a");
	ck_assert_ptr_null(claim_of(a));
	ck_assert_ptr_null(claim_of(c2));
	local_ctl_cleanup(&other);
	th_rmtree_free(dir2);
}
END_TEST

START_TEST(ctl_corrupt_record)
{
	struct local_err err = {""};
	struct local_status s;
	char *rec, *dir;
	struct stat st;

	must(local_ctl_create(&ctl, "bad", NULL, &err), &err, "create");
	rec = ctl_path("bad", LOCAL_PATH_RECORD);
	th_write_file(rec, "{\"id\":\"bad\",\"state\":", 20);
	ck_assert_int_eq(local_ctl_start(&ctl, "bad", &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, rec));
	ck_assert_int_eq(local_ctl_status(&ctl, "bad", &s, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, rec));
	ck_assert_int_eq(local_ctl_rm(&ctl, "bad", false, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "rm -f"));
	dir = ctl_path("bad", LOCAL_PATH_DIR);
	ck_assert_int_eq(stat(dir, &st), 0);
	must(local_ctl_rm(&ctl, "bad", true, &err), &err, "rm -f");
	ck_assert_int_eq(stat(dir, &st), -1);
	free(rec);
	free(dir);
}
END_TEST

START_TEST(ctl_native)
{
	struct local_create_opts o = {.native = true};
	struct local_err err = {""};
	struct local_status s;
	struct proto_record r;

	must(local_ctl_create(&ctl, "nat", &o, &err), &err, "create");
	get_record("nat", &r);
	ck_assert_uint_eq(r.nlabels, 0);
	ck_assert_int_eq(proto_record_transport(&r), PROTO_RECORD_NATIVE);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
	must(local_ctl_start(&ctl, "nat", &err), &err, "start");
	get_record("nat", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert_ptr_null(r.agent_url);
	ck_assert_int_eq(r.agent_pid, 0);
	ck_assert_uint_eq(r.boot_count, 1);
	proto_record_cleanup(&r);
	must(local_ctl_status(&ctl, "nat", &s, &err), &err, "status");
	ck_assert(!s.alive);
	ck_assert(!s.answered);
	local_status_cleanup(&s);
	ck_assert_int_eq(local_ctl_rm(&ctl, "nat", false, &err), -EBUSY);
	must(local_ctl_stop(&ctl, "nat", &err), &err, "stop");
	get_record("nat", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
	must(local_ctl_rm(&ctl, "nat", false, &err), &err, "rm");
}
END_TEST

static void set_times(const char *path, time_t t, bool nofollow)
{
	struct timespec ts[2] = {{t, 0}, {t, 0}};

	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts,
				   nofollow ? AT_SYMLINK_NOFOLLOW : 0),
			 0);
}

/* The copy root/rel holds want; its stat in *st. */
static void copied_text(const char *root, const char *rel, const char *want,
			struct stat *st)
{
	char q[PATH_MAX], *text;

	snprintf(q, sizeof(q), "%s/%s", root, rel);
	text = th_read_file(q, NULL);
	ck_assert_str_eq(text, want);
	free(text);
	ck_assert_int_eq(stat(q, st), 0);
}

/* The copy root/rel is a symbolic link to want; its lstat in *st. */
static void copied_link(const char *root, const char *rel, const char *want,
			struct stat *st)
{
	char q[PATH_MAX], target[PATH_MAX];
	ssize_t n;

	snprintf(q, sizeof(q), "%s/%s", root, rel);
	n = readlink(q, target, sizeof(target) - 1);
	ck_assert_int_eq(n, (ssize_t)strlen(want));
	target[n] = '\0';
	ck_assert_str_eq(target, want);
	ck_assert_int_eq(lstat(q, st), 0);
}

START_TEST(ctl_create_from)
{
	struct local_err err = {""};
	struct local_create_opts o = {.from = NULL};
	char *src = th_tmpdir("src"), *root, p[PATH_MAX], q[PATH_MAX];
	uid_t want_uid = geteuid();
	struct proto_record r;
	struct stat st;

	snprintf(p, sizeof(p), "%s/a.txt", src);
	th_write_file(p, "hello", 5);
	ck_assert_int_eq(chmod(p, 0640), 0);
	set_times(p, 1000000000, false);
	snprintf(p, sizeof(p), "%s/sub/b", src);
	th_write_file(p, "bee", 3);
	ck_assert_int_eq(chmod(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/sub/setuid", src);
	th_write_file(p, "#!/bin/sh\n", 10);
	ck_assert_int_eq(chmod(p, 04755), 0);
	snprintf(p, sizeof(p), "%s/sub/empty", src);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/link", src);
	ck_assert_int_eq(symlink("a.txt", p), 0);
	snprintf(p, sizeof(p), "%s/dangling", src);
	ck_assert_int_eq(symlink("/nonexistent/target", p), 0);
	set_times(p, 1100000000, true);
	snprintf(p, sizeof(p), "%s/fifo", src);
	ck_assert_int_eq(mkfifo(p, 0620), 0);
	ck_assert_int_eq(chmod(p, 0620), 0);
	snprintf(p, sizeof(p), "%s/sub", src);
	ck_assert_int_eq(chmod(p, 0750), 0);
	set_times(p, 1200000000, false);
	ck_assert_int_eq(chmod(src, 0751), 0);

	o.from = src;
	must(local_ctl_create(&ctl, "copy", &o, &err), &err, "create --from");
	root = ctl_path("copy", LOCAL_PATH_ROOT);
	get_record("copy", &r);
	if (geteuid() == 0)
		want_uid = (uid_t)r.exec_uid;
	proto_record_cleanup(&r);

	ck_assert_int_eq(stat(root, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0751);
	ck_assert_int_eq(st.st_uid, want_uid);
	copied_text(root, "a.txt", "hello", &st);
	ck_assert_int_eq(st.st_mode & 07777, 0640);
	ck_assert_int_eq(st.st_mtime, 1000000000);
	ck_assert_int_eq(st.st_uid, want_uid);
	snprintf(q, sizeof(q), "%s/sub", root);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(st.st_mtime, 1200000000);
	copied_text(root, "sub/b", "bee", &st);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	snprintf(q, sizeof(q), "%s/sub/setuid", root);
	ck_assert_int_eq(stat(q, &st), 0);
	/* Set-id bits do not survive the hand-over to the exec user. */
	ck_assert_int_eq(st.st_mode & 07777, geteuid() == 0 ? 0755 : 04755);
	snprintf(q, sizeof(q), "%s/sub/empty", root);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	copied_link(root, "link", "a.txt", &st);
	ck_assert_int_eq(st.st_uid, want_uid);
	copied_link(root, "dangling", "/nonexistent/target", &st);
	ck_assert_int_eq(st.st_mtime, 1100000000);
	snprintf(q, sizeof(q), "%s/fifo", root);
	ck_assert_int_eq(lstat(q, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0620);

	/* The source is untouched. */
	snprintf(p, sizeof(p), "%s/a.txt", src);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, geteuid());
	free(root);
	th_rmtree_free(src);
}
END_TEST

/* The token file as the agent left it; returns the credential (heap). */
static char *check_token(const char *id)
{
	char *path = ctl_path(id, LOCAL_PATH_TOKEN), *text;
	struct stat st;
	size_t len = 0;

	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	text = th_read_file(path, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(len, 44);
	ck_assert(token_valid(text, len));
	free(path);
	return text;
}

START_TEST(ctl_lifecycle)
{
	struct local_err err = {""};
	struct local_status s;
	struct proto_record r;
	char *tok1, *tok2, *tok3, *path, *text, *sock, *want;
	char got[PATH_MAX];
	pid_t pid1, pid2, pid3, holder = 0;
	struct stat st;
	int lock;

	must(local_ctl_create(&ctl, "life", NULL, &err), &err, "create");
	must(local_ctl_start(&ctl, "life", &err), &err, "start");
	get_record("life", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	/* The agent listens on its socket in the sandbox's own directory,
	 * mode 0600, and nowhere else. */
	sock = ctl_path("life", LOCAL_PATH_SOCKET);
	want = unixurl_format(sock);
	ck_assert_str_eq(r.agent_url, want);
	free(want);
	ck_assert(local_state_route_socket(ctl.state_dir, r.agent_url, got,
					   sizeof(got)));
	ck_assert_str_eq(got, sock);
	ck_assert_int_eq(lstat(sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(r.port, 0);
	ck_assert_uint_eq(r.boot_count, 1);
	ck_assert_ptr_nonnull(r.started_at);
	pid1 = (pid_t)r.agent_pid;
	ck_assert_int_gt(pid1, 0);
	/* It holds its lock, and its command line names no path of the
	 * sandbox. */
	ck_assert_int_eq(local_ctl_agent_alive(ctl.state_dir, "life", &holder),
			 1);
	ck_assert_int_eq(holder, pid1);
	path = ctl_path("life", LOCAL_PATH_ROOT);
	ck_assert(!local_ctl_agent_matches(pid1, path));
	free(path);
	tok1 = check_token("life");
	/* The record never carries the credential. */
	path = ctl_path("life", LOCAL_PATH_RECORD);
	text = th_read_file(path, NULL);
	ck_assert_ptr_null(strstr(text, tok1));
	free(text);
	free(path);
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health?version=1"), 200);
	proto_record_cleanup(&r);
	/* The agent holds none of our descriptors: the lock is free. */
	ck_assert_int_eq(local_state_lock(ctl.state_dir, "life", 0, &lock), 0);
	local_state_unlock(lock);

	must(local_ctl_status(&ctl, "life", &s, &err), &err, "status");
	ck_assert(s.alive);
	ck_assert(!s.died);
	ck_assert_int_eq(s.pid, pid1);
	ck_assert(s.answered);
	ck_assert_int_eq(s.health.protocol_version, 1);
	ck_assert_str_ne(s.health.boot_id, "");
	local_status_cleanup(&s);

	/* Starting a running sandbox changes nothing. */
	must(local_ctl_start(&ctl, "life", &err), &err, "start again");
	get_record("life", &r);
	ck_assert_int_eq(r.agent_pid, pid1);
	ck_assert_uint_eq(r.boot_count, 1);
	proto_record_cleanup(&r);

	/* Restart: a new boot and credential on the same socket. */
	must(local_ctl_restart(&ctl, "life", &err), &err, "restart");
	get_record("life", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert(
		local_state_route_socket(ctl.state_dir, r.agent_url, NULL, 0));
	pid2 = (pid_t)r.agent_pid;
	ck_assert_int_ne(pid2, pid1);
	ck_assert(proc_gone(pid1));
	ck_assert_uint_eq(r.boot_count, 2);
	tok2 = check_token("life");
	ck_assert_str_ne(tok1, tok2);
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health"), 200);
	proto_record_cleanup(&r);

	/* A socket left by an agent that died is replaced at the next
	 * start. */
	must(local_ctl_stop(&ctl, "life", &err), &err, "stop");
	ck_assert(proc_gone(pid2));
	ck_assert_int_eq(lstat(sock, &st), -1);
	must(local_ctl_start(&ctl, "life", &err), &err, "start again");
	get_record("life", &r);
	pid3 = (pid_t)r.agent_pid;
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health"), 200);
	proto_record_cleanup(&r);
	tok3 = check_token("life");
	ck_assert_str_ne(tok3, tok2);
	free(sock);

	/* Stop: agent gone, credential gone, route cleared. */
	must(local_ctl_stop(&ctl, "life", &err), &err, "stop");
	ck_assert(proc_gone(pid3));
	get_record("life", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_ptr_null(r.agent_url);
	ck_assert_int_eq(r.agent_pid, 0);
	proto_record_cleanup(&r);
	path = ctl_path("life", LOCAL_PATH_TOKEN);
	ck_assert_int_eq(lstat(path, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	free(path);
	must(local_ctl_stop(&ctl, "life", &err), &err, "stop again");
	must(local_ctl_status(&ctl, "life", &s, &err), &err, "status");
	ck_assert(!s.alive);
	ck_assert(!s.answered);
	local_status_cleanup(&s);

	/* rm: refused while running, done with force. */
	must(local_ctl_start(&ctl, "life", &err), &err, "start");
	get_record("life", &r);
	pid1 = (pid_t)r.agent_pid;
	proto_record_cleanup(&r);
	ck_assert_int_eq(local_ctl_rm(&ctl, "life", false, &err), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err.msg, "running"));
	ck_assert(!proc_gone(pid1));
	must(local_ctl_rm(&ctl, "life", true, &err), &err, "rm -f");
	ck_assert(proc_gone(pid1));
	path = ctl_path("life", LOCAL_PATH_DIR);
	ck_assert_int_eq(lstat(path, &st), -1);
	free(path);
	free(tok1);
	free(tok2);
	free(tok3);
}
END_TEST

START_TEST(ctl_stale_and_foreign_pids)
{
	struct local_err err = {""};
	struct local_status s;
	struct proto_record r;
	pid_t pid;
	long long deadline;

	must(local_ctl_create(&ctl, "stale", NULL, &err), &err, "create");
	must(local_ctl_start(&ctl, "stale", &err), &err, "start");
	get_record("stale", &r);
	pid = (pid_t)r.agent_pid;
	proto_record_cleanup(&r);
	/* The agent dies behind our back; the record still says Running. */
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	deadline = th_now_ms() + 5000;
	while (!proc_gone(pid) && th_now_ms() < deadline)
		usleep(20000);
	ck_assert(proc_gone(pid));
	/* The lock goes with the last of its threads. */
	deadline = th_now_ms() + 5000;
	while (local_ctl_agent_alive(ctl.state_dir, "stale", NULL) != 0 &&
	       th_now_ms() < deadline)
		usleep(20000);
	ck_assert_int_eq(local_ctl_agent_alive(ctl.state_dir, "stale", NULL),
			 0);
	/* Said so: Running on record, but its agent died. */
	must(local_ctl_status(&ctl, "stale", &s, &err), &err, "status");
	ck_assert(!s.alive);
	ck_assert(s.died);
	ck_assert(!s.answered);
	ck_assert(local_ctl_agent_died(&ctl, &s.rec));
	local_status_cleanup(&s);
	must(local_ctl_start(&ctl, "stale", &err), &err, "start after crash");
	get_record("stale", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert_int_ne(r.agent_pid, pid);
	ck_assert_uint_eq(r.boot_count, 2);
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health"), 200);
	pid = (pid_t)r.agent_pid;

	/* A recorded pid that is not this sandbox's agent is never
	 * signalled: here it is the test itself. */
	must(local_ctl_stop(&ctl, "stale", &err), &err, "stop");
	ck_assert(proc_gone(pid));
	r.state = PROTO_RECORD_RUNNING;
	r.agent_pid = getpid();
	must(local_state_write(ctl.state_dir, &r, &err), &err, "write");
	/* A recycled pid holds no lock: the agent counts as dead. */
	ck_assert(local_ctl_agent_died(&ctl, &r));
	proto_record_cleanup(&r);
	must(local_ctl_stop(&ctl, "stale", &err), &err, "stop foreign");
	ck_assert(!local_ctl_agent_matches(getpid(), "/"));
	get_record("stale", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
}
END_TEST

/* A stand-in agent: a script called sandbox-agent (so that stop
 * recognises it) with the given body. */
static char *fake_agent(const char *body)
{
	char *dir = th_tmpdir("fake"), *path, *text;

	if (asprintf(&path, "%s/sandbox-agent", dir) < 0 ||
	    asprintf(&text, "#!/bin/sh\n%s\n", body) < 0)
		ck_abort_msg("asprintf");
	th_write_file(path, text, strlen(text));
	ck_assert_int_eq(chmod(path, 0755), 0);
	free(text);
	free(dir);
	return path;
}

START_TEST(ctl_start_failures)
{
	struct local_err err = {""};
	struct proto_record r;
	char *log, *text, *pidfile, *dir;
	long long t0;
	pid_t pid;

	must(local_ctl_create(&ctl, "f", NULL, &err), &err, "create");
	log = ctl_path("f", LOCAL_PATH_LOG);

	/* An agent that exits at once. */
	free(ctl.agent);
	ctl.agent = fake_agent("echo 'boom: cannot start' >&2; exit 1");
	ck_assert_int_eq(local_ctl_start(&ctl, "f", &err), -EIO);
	ck_assert_ptr_nonnull(strstr(err.msg, "exited"));
	ck_assert_ptr_nonnull(strstr(err.msg, log));
	get_record("f", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_ptr_null(r.agent_url);
	proto_record_cleanup(&r);
	text = th_read_file(log, NULL);
	ck_assert_ptr_nonnull(strstr(text, "boom: cannot start"));
	free(text);
	dir = strdup(ctl.agent);
	*strrchr(dir, '/') = '\0';
	th_rmtree_free(dir);

	/* An agent that never answers: stopped after the deadline. */
	dir = ctl_path("f", LOCAL_PATH_DIR);
	if (asprintf(&pidfile, "%s/fake.pid", dir) < 0 ||
	    asprintf(&text, "echo $$ > '%s'\nwhile :; do sleep 0.1; done",
		     pidfile) < 0)
		ck_abort_msg("asprintf");
	free(dir);
	free(ctl.agent);
	ctl.agent = fake_agent(text);
	free(text);
	ctl.start_timeout_ms = 1500;
	t0 = th_now_ms();
	ck_assert_int_eq(local_ctl_start(&ctl, "f", &err), -ETIMEDOUT);
	ck_assert_int_ge(th_now_ms() - t0, 1400);
	ck_assert_ptr_nonnull(strstr(err.msg, "did not become healthy"));
	ck_assert_ptr_nonnull(strstr(err.msg, log));
	text = th_read_file(pidfile, NULL);
	ck_assert_ptr_nonnull(text);
	pid = (pid_t)strtol(text, NULL, 10);
	free(text);
	ck_assert_int_gt(pid, 0);
	ck_assert(proc_gone(pid));
	get_record("f", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_int_eq(r.agent_pid, 0);
	proto_record_cleanup(&r);
	dir = strdup(ctl.agent);
	*strrchr(dir, '/') = '\0';
	th_rmtree_free(dir);
	free(pidfile);

	/* No agent binary at all. */
	free(ctl.agent);
	ctl.agent = strdup("/nonexistent/sandbox-agent");
	ck_assert_int_eq(local_ctl_start(&ctl, "f", &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/sandbox-agent"));
	get_record("f", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
	free(log);
}
END_TEST

static int stop_at_once(void *arg, const struct local_copy_progress *p)
{
	(void)arg;
	(void)p;
	return -EINTR;
}

/* What a create told its progress hook; stop_after ends it (-EINTR) at
 * the first call that has seen that many bytes. */
struct progress_log {
	unsigned calls;
	struct local_copy_progress last;
	bool monotonic;
	uint64_t stop_after; /* 0: never */
};

static int log_progress(void *arg, const struct local_copy_progress *p)
{
	struct progress_log *l = arg;

	if (p->files < l->last.files || p->bytes < l->last.bytes)
		l->monotonic = false;
	l->calls++;
	l->last = *p;
	if (l->stop_after != 0 && p->bytes >= l->stop_after)
		return -EINTR;
	return 0;
}

START_TEST(ctl_create_progress)
{
	struct local_create_opts o = {.from = NULL};
	struct progress_log l = {0, {0, 0}, true, 0};
	struct local_err err = {""};
	char *src = th_tmpdir("src"), p[PATH_MAX], *dir, *sb;
	const size_t big = 2 * LOCAL_COPY_CHUNK + 12345;
	char *data = calloc(1, big);
	struct dirent *de;
	struct stat st;
	size_t left;
	DIR *d;

	ck_assert_ptr_nonnull(data);
	snprintf(p, sizeof(p), "%s/big", src);
	th_write_file(p, data, big);
	snprintf(p, sizeof(p), "%s/sub/a", src);
	th_write_file(p, "hello", 5);
	snprintf(p, sizeof(p), "%s/sub/b", src);
	th_write_file(p, "bee", 3);
	snprintf(p, sizeof(p), "%s/link", src);
	ck_assert_int_eq(symlink("big", p), 0);
	o.from = src;

	/* Every entry but the directories, and every byte of regular
	 * files; a call per chunk of the big file; the totals last. */
	must(local_ctl_create_progress(&ctl, "prog", &o, log_progress, &l,
				       &err),
	     &err, "create with progress");
	ck_assert(l.monotonic);
	ck_assert_uint_eq(l.last.files, 4);
	ck_assert_uint_eq(l.last.bytes, big + 5 + 3);
	ck_assert_uint_ge(l.calls, 4 + 3 + 1);

	/* Without --from: one call, nothing copied. */
	memset(&l, 0, sizeof(l));
	l.monotonic = true;
	must(local_ctl_create_progress(&ctl, "empty", NULL, log_progress, &l,
				       &err),
	     &err, "create without --from");
	ck_assert_uint_eq(l.calls, 1);
	ck_assert_uint_eq(l.last.files + l.last.bytes, 0);

	/* Ended in the middle of the big file: the error is the hook's and
	 * nothing of the sandbox is left, not even a tombstone. */
	memset(&l, 0, sizeof(l));
	l.stop_after = 1;
	ck_assert_int_eq(local_ctl_create_progress(&ctl, "cut", &o,
						   log_progress, &l, &err),
			 -EINTR);
	ck_assert_ptr_nonnull(strstr(err.msg, "interrupted"));
	dir = ctl_path("cut", LOCAL_PATH_DIR);
	ck_assert_int_eq(stat(dir, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	free(dir);
	sb = ctl_path(NULL, LOCAL_PATH_SANDBOXES);
	d = opendir(sb);
	ck_assert_ptr_nonnull(d);
	left = 0;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0 &&
		    strcmp(de->d_name, "prog") != 0 &&
		    strcmp(de->d_name, "empty") != 0)
			left++;
	closedir(d);
	free(sb);
	ck_assert_uint_eq(left, 0);

	/* Ended before anything was copied (no --from). */
	memset(&l, 0, sizeof(l));
	l.stop_after = 0;
	ck_assert_int_eq(local_ctl_create_progress(&ctl, "cut2", NULL,
						   stop_at_once, NULL, &err),
			 -EINTR);
	dir = ctl_path("cut2", LOCAL_PATH_DIR);
	ck_assert_int_eq(stat(dir, &st), -1);
	free(dir);
	free(data);
	th_rmtree_free(src);
}
END_TEST

void local_ctl_cases(Suite *s)
{
	TCase *tc;

	tc = TCASE_TABLE(s, "create", ctl_setup, ctl_teardown, 60,
			 ctl_create_and_errors, ctl_identity,
			 ctl_corrupt_record, ctl_native, ctl_create_from,
			 ctl_create_progress);
	tcase_add_unchecked_fixture(tc, ctl_base_setup, ctl_base_teardown);
	tc = TCASE_TABLE(s, "agent", ctl_setup, ctl_teardown, 180,
			 ctl_lifecycle, ctl_stale_and_foreign_pids,
			 ctl_start_failures);
	tcase_add_unchecked_fixture(tc, ctl_base_setup, ctl_base_teardown);
}
