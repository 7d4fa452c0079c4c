/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_zygote: the zygote that starts confined commands
 * (doc/commands.md, "The zygote"), against a real sandbox-agent confined
 * by bubblewrap: it runs commands as the exec user, reports their
 * failures, is restarted when it dies, serves many commands at once,
 * dies with the agent, and gives way to a bubblewrap per command where it
 * cannot run. Skipped, and said so, where bubblewrap is not usable.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "common/b64.h"
#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "tests/check_suites.h"
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"

/* ---- the zygote ---------------------------------------------------------- */

/* As ta_box_start, confined (by the bubblewrap at bwrap, NULL: the
 * default), with the agent's stderr in a file of the box's private
 * directory (returned in log, heap). */
static bool zbox_start(struct ta_box *b, const char *bwrap, char **log)
{
	const char *args[] = {"--confine", "bwrap", "--bwrap", bwrap, NULL};

	if (!ta_bwrap_usable()) {
		fprintf(stderr, "agent_zygote: bubblewrap is not usable here, "
				"zygote test skipped\n");
		return false;
	}
	if (bwrap == NULL)
		args[2] = NULL;
	ta_box_dirs(b, "zygote");
	ck_assert(asprintf(log, "%s/agent.log", b->parent) > 0);
	ta_box_start_logged(b, args, *log);
	return true;
}

static pid_t parent_of(pid_t pid)
{
	char id[32], stat[512];
	const char *st;

	snprintf(id, sizeof(id), "%ld", (long)pid);
	st = ta_proc_stat(id, stat, sizeof(stat));
	return st != NULL ? (pid_t)strtol(st + 2, NULL, 10) : 0;
}

/* The agent's zygote: the process below it whose second argument is
 * --zygote; 0 when there is none. */
static pid_t zygote_of(pid_t agent)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	ck_assert_ptr_nonnull(d);
	while (found == 0 && (e = readdir(d)) != NULL) {
		char cmd[512];
		pid_t pid, up;
		ssize_t n;
		int hops;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		n = ta_proc_read(e->d_name, "cmdline", cmd, sizeof(cmd));
		if (n <= 0 || (size_t)n <= strlen(cmd) + 1 ||
		    strcmp(cmd + strlen(cmd) + 1, "--zygote") != 0)
			continue;
		pid = (pid_t)strtol(e->d_name, NULL, 10);
		for (up = pid, hops = 0; up > 1 && hops < 8; hops++) {
			up = parent_of(up);
			if (up == agent)
				found = pid;
		}
	}
	closedir(d);
	return found;
}

/* zbox_start with the default bubblewrap, and its zygote's pid in *z. */
static bool zbox_start_zygote(struct ta_box *b, char **log, pid_t *z)
{
	if (!zbox_start(b, NULL, log))
		return false;
	*z = zygote_of(b->a.pid);
	ck_assert_int_gt(*z, 0);
	return true;
}

/* Wait up to ms for pid to be gone (or a zombie); true when it is. */
static bool pid_gone(pid_t pid, int ms)
{
	long long end = th_now_ms() + ms;
	char id[32], stat[512];

	snprintf(id, sizeof(id), "%ld", (long)pid);
	for (;;) {
		const char *st;

		if (ta_proc_read(id, "stat", stat, sizeof(stat)) < 0)
			return true;
		st = ta_proc_stat(id, stat, sizeof(stat));
		if (st != NULL && *st == 'Z')
			return true;
		if (th_now_ms() >= end)
			return false;
		usleep(20000);
	}
}

static uid_t uid_of(pid_t pid)
{
	char path[64];
	char *text, *p;
	uid_t uid;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	text = th_read_file(path, NULL);
	ck_assert_ptr_nonnull(text);
	p = strstr(text, "\nUid:");
	ck_assert_ptr_nonnull(p);
	uid = (uid_t)strtoul(p + 5, NULL, 10);
	free(text);
	return uid;
}

static bool log_has(const char *log, const char *s)
{
	char *text = th_read_file(log, NULL);
	bool has = text != NULL && strstr(text, s) != NULL;

	free(text);
	return has;
}

/* Stop a zbox_start agent, which must exit cleanly without the zygote
 * or bubblewrap having said anything (a sanitizer's report would come
 * that way), and free log. */
static void zbox_stop(struct ta_box *b, char *log)
{
	int status = th_agent_terminate(&b->a);
	char *text = th_read_file(log, NULL);

	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "exec: zygote: ") == NULL, "%s", text);
	free(text);
	free(log);
	ta_box_stop(b);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "sandbox-agent ended with status %d", status);
}

/* Wait up to 10 s for at least n live processes with s. */
static void procs_appear(const char *s, int n)
{
	long long end = th_now_ms() + 10000;

	while (ta_count_procs(s) < n) {
		ck_assert_msg(th_now_ms() < end, "no process with %s", s);
		usleep(20000);
	}
}

START_TEST(zygote_runs_commands)
{
	const char *n = ta_needle();
	char json[256], id[64], *log, *s;
	struct ta_frames fr;
	struct ta_box b;
	pid_t z;

	if (!zbox_start(&b, NULL, &log))
		return;
	/* The start-up probe went through it, and it runs as the exec
	 * user. */
	ck_assert(log_has(log, "started by a zygote"));
	z = zygote_of(b.a.pid);
	ck_assert_int_gt(z, 0);
	ck_assert_uint_eq(uid_of(z), ta_exec_uid());
	/* Exit codes, and signal deaths as bubblewrap reported them. */
	ta_expect_post(
		&b.a, "/v1/exec",
		"{\"command\":[\"sh\",\"-c\",\"exit 42\"],\"timeoutMs\":10000}",
		200, "{\"t\":\"exit\",\"code\":42,\"truncated\":false}\n");
	ta_expect_post(&b.a, "/v1/exec",
		       "{\"command\":[\"sh\",\"-c\",\"kill -TERM $$\"],"
		       "\"timeoutMs\":10000}",
		       200,
		       "{\"t\":\"exit\",\"code\":143,\"truncated\":false}\n");
	ta_expect_output(
		&b.a,
		"{\"command\":[\"sh\",\"-c\",\"echo out; echo err >&2; "
		"kill -9 $$\"],\"timeoutMs\":10000}",
		"out\n", 137);
	/* Only the standard descriptors; pid 1 is the command's own init,
	 * whose memory (the zygote's) it cannot read. */
	ta_expect_output(&b.a,
			 "{\"command\":[\"ls\",\"/proc/self/fd\"],"
			 "\"timeoutMs\":10000}",
			 "0\n1\n2\n3\n", 0);
	ta_expect_output(&b.a,
			 "{\"command\":[\"sh\",\"-c\",\"cat /proc/1/comm; cat "
			 "/proc/1/environ 2>/dev/null || echo hidden; grep "
			 "CapEff /proc/self/status\"],\"timeoutMs\":10000}",
			 "sbfs-init\nhidden\nCapEff:\t0000000000000000\n", 0);
	/* Each command has its own /tmp and /dev/shm... */
	ta_expect_output(
		&b.a,
		"{\"command\":[\"sh\",\"-c\",\"touch /tmp/a /dev/shm/b; "
		"ls /tmp /dev/shm\"],\"timeoutMs\":10000}",
		"/dev/shm:\nb\n\n/tmp:\na\n", 0);
	ta_expect_output(&b.a,
			 "{\"command\":[\"ls\",\"-A\",\"/tmp\",\"/dev/shm\"],"
			 "\"timeoutMs\":10000}",
			 "/dev/shm:\n\n/tmp:\n", 0);
	/* ...and cannot leave anything for the next one elsewhere. */
	ta_expect_output(
		&b.a,
		"{\"command\":[\"sh\",\"-c\",\"touch /x 2>/dev/null; echo "
		"$?; mkdir /dev/x 2>/dev/null; echo $?\"],"
		"\"timeoutMs\":10000}",
		"1\n1\n", 0);
	/* A job runs through it too; two commands do not see each other. */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	ta_job_start(&b.a, json, id);
	procs_appear(n, 1);
	ta_exec(&b.a,
		"{\"command\":[\"sh\",\"-c\",\"cat /proc/[0-9]*/cmdline | tr "
		"'\\\\000' ' '\"],\"timeoutMs\":10000}",
		&fr);
	ck_assert_int_eq(ta_last(&fr)->code, 0);
	ck_assert_ptr_nonnull(fr.out.data);
	ck_assert_ptr_null(strstr(fr.out.data, n));
	ta_frames_free(&fr);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	ta_expect_post(&b.a, "/v1/jobs/cancel", json, 200, "{}");
	ck_assert_int_eq(ta_procs_gone(n, 3000), 0);
	ta_job_start(&b.a,
		     "{\"command\":[\"sh\",\"-c\",\"echo job; exit 5\"],"
		     "\"timeoutMs\":10000}",
		     id);
	s = ta_job_poll_ended(&b.a, id, ",\"waitMs\":2000");
	ck_assert_str_eq(s,
			 "{\"running\":false,\"frames\":["
			 "{\"t\":\"stdout\",\"seq\":0,\"data\":\"am9iCg==\"}],"
			 "\"exitCode\":5,\"truncated\":false}");
	free(s);
	/* One zygote served them all, and it ends with the agent. */
	ck_assert_int_eq(zygote_of(b.a.pid), z);
	zbox_stop(&b, log);
	ck_assert(pid_gone(z, 3000));
}
END_TEST

START_TEST(zygote_spawn_failures)
{
	char path[PATH_MAX], *log;
	struct ta_box b;
	pid_t z;

	if (!zbox_start_zygote(&b, &log, &z))
		return;
	ta_expect_spawn_failed(
		&b.a, "{\"command\":[\"no-such-program\"],\"timeoutMs\":10000}",
		TA_ENOENT);
	ta_expect_spawn_failed(&b.a,
			       "{\"command\":[\"/usr\"],\"timeoutMs\":10000}",
			       TA_EACCES);
	ta_expect_spawn_failed(
		&b.a,
		"{\"command\":[\"pwd\"],\"timeoutMs\":10000,\"cwd\":"
		"\"missing\"}",
		TA_ENOENT);
	/* Found on PATH but not executable; then executable, without #!. */
	snprintf(path, sizeof(path), "%s/bin/tool", b.root);
	th_write_file(path, "echo from \"$0\" $1\n", 18);
	snprintf(path, sizeof(path), "%s/bin", b.root);
	ck_assert(chmod(path, 0755) == 0);
	ta_expect_spawn_failed(&b.a,
			       "{\"command\":[\"tool\"],\"timeoutMs\":10000,"
			       "\"env\":{\"PATH\":\"/nowhere:bin\"}}",
			       TA_EACCES);
	snprintf(path, sizeof(path), "%s/bin/tool", b.root);
	ck_assert(chmod(path, 0755) == 0);
	ta_expect_output(&b.a,
			 "{\"command\":[\"tool\",\"x\"],\"timeoutMs\":10000,"
			 "\"env\":{\"PATH\":\"/nowhere:bin\"}}",
			 "from bin/tool x\n", 0);
	ta_expect_output(&b.a,
			 "{\"command\":[\"/sandbox/bin/tool\",\"y\"],"
			 "\"timeoutMs\":10000,\"cwd\":\"bin\"}",
			 "from /sandbox/bin/tool y\n", 0);
	/* The failures cost the zygote nothing. */
	ck_assert_int_eq(zygote_of(b.a.pid), z);
	zbox_stop(&b, log);
}
END_TEST

START_TEST(zygote_killed_while_idle)
{
	struct ta_box b;
	pid_t z, z2;
	char *log;

	if (!zbox_start_zygote(&b, &log, &z))
		return;
	ck_assert(kill(z, SIGKILL) == 0);
	ck_assert(pid_gone(z, 3000));
	/* The next command starts a new one. */
	ta_expect_output(
		&b.a, "{\"command\":[\"echo\",\"again\"],\"timeoutMs\":10000}",
		"again\n", 0);
	z2 = zygote_of(b.a.pid);
	ck_assert_int_gt(z2, 0);
	ck_assert_int_ne(z2, z);
	ck_assert(log_has(log, "exec: the zygote ended"));
	zbox_stop(&b, log);
	ck_assert(pid_gone(z2, 3000));
}
END_TEST

START_TEST(zygote_killed_while_running)
{
	const char *n = ta_needle();
	char json[256], id[64], *log, *s;
	struct ta_box b;
	pid_t z;

	if (!zbox_start_zygote(&b, &log, &z))
		return;
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"echo up; sleep %s & sleep "
		 "%s\"],\"timeoutMs\":30000}",
		 n, n);
	ta_job_start(&b.a, json, id);
	procs_appear(n, 2);
	ck_assert(kill(z, SIGKILL) == 0);
	/* Its commands die with it, and their status is lost. */
	s = ta_job_poll_ended(&b.a, id, ",\"waitMs\":2000");
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":["
			    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"dXAK\"}],"
			    "\"error\":{\"code\":\"waitFailed\",\"message\":"
			    "\"No child processes (os error 10)\"}}");
	free(s);
	ck_assert_int_eq(ta_procs_gone(n, 3000), 0);
	ta_expect_output(
		&b.a, "{\"command\":[\"echo\",\"again\"],\"timeoutMs\":10000}",
		"again\n", 0);
	zbox_stop(&b, log);
}
END_TEST

struct zthread {
	struct ta_box *b;
	int k;
	int good; /* commands that answered exactly */
};

static void *zthread_main(void *arg)
{
	struct zthread *t = arg;
	int j;

	for (j = 0; j < 5; j++) {
		const char *h[] = {t->b->a.auth,
				   "Content-Type: application/json", NULL};
		char json[256], want[256], data[64], line[16], url[256];
		struct th_resp r;
		int len;

		len = snprintf(line, sizeof(line), "t%d-%d\n", t->k, j);
		b64_encode(line, (size_t)len, data);
		snprintf(json, sizeof(json),
			 "{\"command\":[\"sh\",\"-c\",\"echo t%d-%d; exit "
			 "%d\"],\"timeoutMs\":20000}",
			 t->k, j, j);
		snprintf(want, sizeof(want),
			 "{\"t\":\"stdout\",\"seq\":0,\"data\":\"%s\"}\n"
			 "{\"t\":\"exit\",\"code\":%d,\"truncated\":false}\n",
			 data, j);
		snprintf(url, sizeof(url), "%s/v1/exec", t->b->a.base);
		if (th_http_timeout("POST", url, h, json, strlen(json), 30000,
				    &r) == 0 &&
		    r.status == 200 && strcmp(ta_body(&r), want) == 0)
			t->good++;
		else
			fprintf(stderr, "zygote: t%d-%d: %ld %s\n", t->k, j,
				r.status, ta_body(&r));
		th_resp_cleanup(&r);
	}
	return NULL;
}

START_TEST(zygote_many_at_once)
{
	char ids[PROTO_MAX_JOBS][64], json[256], want[256], data[16], *log;
	struct zthread t[4];
	pthread_t th[4];
	struct ta_box b;
	int i;

	if (!zbox_start(&b, NULL, &log))
		return;
	/* Sixteen jobs and twenty execs from four clients, all at once. */
	for (i = 0; i < 4; i++) {
		t[i] = (struct zthread){&b, i, 0};
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, zthread_main, &t[i]), 0);
	}
	for (i = 0; i < PROTO_MAX_JOBS; i++) {
		snprintf(json, sizeof(json),
			 "{\"command\":[\"sh\",\"-c\",\"sleep 0.2; echo $0; "
			 "exit $0\",\"%d\"],\"timeoutMs\":20000}",
			 i);
		ta_job_start(&b.a, json, ids[i]);
	}
	for (i = 0; i < PROTO_MAX_JOBS; i++) {
		char line[8], *s;
		int len = snprintf(line, sizeof(line), "%d\n", i);

		b64_encode(line, (size_t)len, data);
		snprintf(want, sizeof(want),
			 "{\"running\":false,\"frames\":[{\"t\":\"stdout\","
			 "\"seq\":0,\"data\":\"%s\"}],\"exitCode\":%d,"
			 "\"truncated\":false}",
			 data, i);
		s = ta_job_poll_ended(&b.a, ids[i], ",\"waitMs\":2000");
		ck_assert_str_eq(s, want);
		free(s);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].good, 5);
	}
	zbox_stop(&b, log);
}
END_TEST

START_TEST(zygote_dies_with_the_agent)
{
	struct ta_box b;
	int status;
	char *log;
	pid_t z;

	if (!zbox_start_zygote(&b, &log, &z))
		return;
	/* An agent that cannot clean up: bubblewrap's --die-with-parent
	 * takes the zygote. */
	ck_assert(kill(b.a.pid, SIGKILL) == 0);
	ck_assert(waitpid(b.a.pid, &status, 0) == b.a.pid);
	b.a.pid = 0;
	ck_assert(pid_gone(z, 3000));
	th_agent_stop(&b.a);
	th_rmtree(b.parent);
	free(b.parent);
	free(b.root);
	free(log);
}
END_TEST

/* Where the zygote cannot start (here: a bubblewrap that refuses the
 * capability it needs), each command gets its own bubblewrap, as before. */
START_TEST(zygote_fallback)
{
	static const char wrapper[] =
		"#!/bin/sh\n"
		"for a in \"$@\"; do\n"
		"\t[ \"$a\" = --cap-add ] && { echo \"bwrap: no --cap-add "
		"here\" >&2; exit 1; }\n"
		"done\n"
		"exec " BWRAP_PATH " \"$@\"\n";
	char *dir, path[PATH_MAX], *log;
	struct ta_box b;

	if (!ta_bwrap_usable())
		return;
	dir = th_tmpdir("bwrap");
	ck_assert(chmod(dir, 0755) == 0);
	snprintf(path, sizeof(path), "%s/bwrap", dir);
	th_write_file(path, wrapper, strlen(wrapper));
	ck_assert(chmod(path, 0755) == 0);
	ck_assert(zbox_start(&b, path, &log));
	ck_assert(log_has(log, "no zygote for commands (bwrap: no --cap-add "
			       "here)"));
	ck_assert(log_has(log, "one bubblewrap each"));
	ck_assert_int_eq(zygote_of(b.a.pid), 0);
	ta_expect_output(
		&b.a,
		"{\"command\":[\"sh\",\"-c\",\"hostname; ls -A /tmp | wc "
		"-l; kill -9 $$\"],\"timeoutMs\":10000}",
		"sandbox\n0\n", 137);
	zbox_stop(&b, log);
	th_rmtree(dir);
	free(dir);
}
END_TEST

void agent_zygote_cases(Suite *s)
{
	TCASE_TABLE(s, "zygote", NULL, NULL, 120, zygote_runs_commands,
		    zygote_spawn_failures, zygote_killed_while_idle,
		    zygote_killed_while_running, zygote_many_at_once,
		    zygote_dies_with_the_agent, zygote_fallback);
}
