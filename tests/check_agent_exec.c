/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_exec: POST /v1/exec and the job routes against a real
 * sandbox-agent on loopback, with exact answers: frames and their seq
 * numbers, output cutting and the cap, timeouts and client hang-ups that
 * must leave no process behind, the command's environment, stdin and
 * working directory, bubblewrap confinement, and the job registry's rules.
 *
 * Each agent gets a private directory (mode 0711, so the exec user can
 * pass through but not list it) holding a session root that everyone may
 * write, because as root commands run as nobody.
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
#include "tests/helpers.h"

#define NOBODY 65534
#define MAX_FRAMES 8192

struct box {
	struct th_agent a;
	char *parent; /* private, 0711 */
	char *root; /* parent/root, 0777 */
};

static struct box fixture;

static void box_start(struct box *b, const char *const *extra)
{
	const char *args[24];
	size_t n = 0, i;

	memset(b, 0, sizeof(*b));
	b->parent = th_tmpdir("exec");
	ck_assert(chmod(b->parent, 0711) == 0);
	ck_assert(asprintf(&b->root, "%s/root", b->parent) > 0);
	ck_assert(mkdir(b->root, 0777) == 0);
	ck_assert(chmod(b->root, 0777) == 0);
	/* The later --root wins over the helper's own. */
	args[n++] = "--root";
	args[n++] = b->root;
	for (i = 0; extra != NULL && extra[i] != NULL; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	th_agent_start(&b->a, args, true);
}

/* Stop the agent, which must exit cleanly: its shutdown kills and waits
 * for every command, answers held polls and frees the registry. */
static void box_stop(struct box *b)
{
	int status = th_agent_terminate(&b->a);

	th_agent_stop(&b->a);
	th_rmtree(b->parent);
	free(b->parent);
	free(b->root);
	b->parent = b->root = NULL;
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "sandbox-agent ended with status %d", status);
}

static void setup_none(void)
{
	box_start(&fixture, NULL);
}

static void setup_strict(void)
{
	const char *extra[] = {"--strict-v1", NULL};

	box_start(&fixture, extra);
}

static void teardown(void)
{
	box_stop(&fixture);
}

static void post_to(struct box *b, const char *path, const char *json,
		    struct th_resp *r)
{
	const char *h[] = {b->a.auth, "Content-Type: application/json", NULL};
	char url[256];

	snprintf(url, sizeof(url), "%s%s", b->a.base, path);
	th_http("POST", url, h, json, strlen(json), r);
}

static void post(const char *path, const char *json, struct th_resp *r)
{
	post_to(&fixture, path, json, r);
}

/* The body as a string (NUL-terminated by buf). */
static const char *body(const struct th_resp *r)
{
	return r->body.data ? r->body.data : "";
}

static void expect_to(struct box *b, const char *path, const char *json,
		      long status, const char *want)
{
	struct th_resp r;

	post_to(b, path, json, &r);
	ck_assert_msg(r.status == status, "%s %s: %ld %s", path, json, r.status,
		      body(&r));
	ck_assert_str_eq(body(&r), want);
	th_resp_cleanup(&r);
}

static void expect(const char *path, const char *json, long status,
		   const char *want)
{
	expect_to(&fixture, path, json, status, want);
}

/* ---- frames -------------------------------------------------------------- */

struct frames {
	struct proto_frame *f;
	size_t n;
	struct buf out; /* stdout bytes */
	struct buf err; /* stderr bytes */
};

/* Parse an exec answer, checking the stream's shape: 200 NDJSON, every
 * line a frame, exactly one terminal frame and it is the last. */
static void parse_frames(const struct th_resp *r, struct frames *fr)
{
	struct proto_ndjson s;
	char *ct = th_resp_header(r, "Content-Type");
	const char *line;
	size_t len, i, terminals = 0;

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status, body(r));
	ck_assert_ptr_nonnull(ct);
	ck_assert_str_eq(ct, "application/x-ndjson");
	free(ct);
	memset(fr, 0, sizeof(*fr));
	fr->f = calloc(MAX_FRAMES, sizeof(*fr->f));
	buf_init(&fr->out, 0);
	buf_init(&fr->err, 0);
	proto_ndjson_init(&s);
	ck_assert_int_eq(proto_ndjson_feed(&s, body(r), r->body.len), 0);
	while (proto_ndjson_next(&s, &line, &len) == 1) {
		ck_assert_uint_lt(fr->n, MAX_FRAMES);
		ck_assert_msg(proto_frame_decode(line, len, &fr->f[fr->n]) == 0,
			      "bad frame: %.*s", (int)len, line);
		fr->n++;
	}
	ck_assert(!proto_ndjson_partial(&s));
	proto_ndjson_cleanup(&s);
	for (i = 0; i < fr->n; i++) {
		struct proto_frame *f = &fr->f[i];

		if (f->type == PROTO_FRAME_EXIT || f->type == PROTO_FRAME_ERROR)
			terminals++;
		else if (f->type == PROTO_FRAME_STDOUT)
			ck_assert_int_eq(buf_append(&fr->out, f->data, f->len),
					 0);
		else
			ck_assert_int_eq(buf_append(&fr->err, f->data, f->len),
					 0);
	}
	ck_assert_uint_eq(terminals, 1);
	ck_assert(fr->f[fr->n - 1].type == PROTO_FRAME_EXIT ||
		  fr->f[fr->n - 1].type == PROTO_FRAME_ERROR);
}

static void frames_free(struct frames *fr)
{
	size_t i;

	for (i = 0; i < fr->n; i++)
		proto_frame_cleanup(&fr->f[i]);
	free(fr->f);
	buf_cleanup(&fr->out);
	buf_cleanup(&fr->err);
}

static const struct proto_frame *last(const struct frames *fr)
{
	return &fr->f[fr->n - 1];
}

static void run_on(struct box *b, const char *json, struct frames *fr)
{
	struct th_resp r;

	post_to(b, "/v1/exec", json, &r);
	parse_frames(&r, fr);
	th_resp_cleanup(&r);
}

static void run(const char *json, struct frames *fr)
{
	run_on(&fixture, json, fr);
}

/* stdout must be want and the command must have exited with code. */
static void expect_output(struct box *b, const char *json, const char *want,
			  int code)
{
	struct frames fr;

	run_on(b, json, &fr);
	ck_assert_msg(last(&fr)->type == PROTO_FRAME_EXIT, "%s: %s %s", json,
		      last(&fr)->err_code ? last(&fr)->err_code : "",
		      last(&fr)->err_message ? last(&fr)->err_message : "");
	ck_assert_str_eq(fr.out.data ? fr.out.data : "", want);
	ck_assert_int_eq(last(&fr)->code, code);
	frames_free(&fr);
}

/* ---- processes ----------------------------------------------------------- */

/* A string no other process on the machine has in its command line, used
 * as a sleep duration. */
static const char *needle(void)
{
	static char s[32];
	static unsigned n;

	snprintf(s, sizeof(s), "%u.%u", 700 + n++, (unsigned)getpid() % 1000);
	return s;
}

/* Live (not zombie) processes whose command line holds s. */
static int count_procs(const char *s)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int count = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		char path[300], cmd[4096], stat[512], *rp;
		ssize_t n;
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, cmd, sizeof(cmd) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[n] = '\0';
		if (strstr(cmd, s) == NULL)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, stat, sizeof(stat) - 1);
		close(fd);
		if (n <= 0)
			continue;
		stat[n] = '\0';
		rp = strrchr(stat, ')');
		if (rp != NULL && rp[1] == ' ' && rp[2] == 'Z')
			continue;
		count++;
	}
	closedir(d);
	return count;
}

/* Wait up to ms for every process with s to be gone; the count left. */
static int procs_gone(const char *s, int ms)
{
	long long end = th_now_ms() + ms;
	int n;

	while ((n = count_procs(s)) > 0 && th_now_ms() < end)
		usleep(20000);
	return n;
}

static bool exists(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

static uid_t exec_uid(void)
{
	return geteuid() == 0 ? NOBODY : geteuid();
}

/* ---- exec ---------------------------------------------------------------- */

START_TEST(exec_echo_exact)
{
	expect("/v1/exec",
	       "{\"command\":[\"echo\",\"hello\"],\"timeoutMs\":5000}", 200,
	       "{\"t\":\"stdout\",\"seq\":0,\"data\":\"aGVsbG8K\"}\n"
	       "{\"t\":\"exit\",\"code\":0,\"truncated\":false}\n");
	/* The legacy field names run the same command. */
	expect("/v1/exec",
	       "{\"command\":[\"echo\",\"hello\"],\"deadlineMs\":5000,"
	       "\"workingDirectory\":null,\"env\":{},\"unknown\":[1]}",
	       200,
	       "{\"t\":\"stdout\",\"seq\":0,\"data\":\"aGVsbG8K\"}\n"
	       "{\"t\":\"exit\",\"code\":0,\"truncated\":false}\n");
}
END_TEST

START_TEST(exec_lines_and_seq)
{
	struct frames fr;
	size_t i;

	run("{\"command\":[\"printf\",\"a\\nbb\\nccc\"],\"timeoutMs\":5000}",
	    &fr);
	ck_assert_uint_eq(fr.n, 4);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(fr.f[i].type, PROTO_FRAME_STDOUT);
		ck_assert_uint_eq(fr.f[i].seq, i);
	}
	/* One frame per line, the newline kept; the unfinished last line
	 * comes at the end of the stream. */
	ck_assert_mem_eq(fr.f[0].data, "a\n", 2);
	ck_assert_uint_eq(fr.f[0].len, 2);
	ck_assert_mem_eq(fr.f[1].data, "bb\n", 3);
	ck_assert_uint_eq(fr.f[2].len, 3);
	ck_assert_mem_eq(fr.f[2].data, "ccc", 3);
	frames_free(&fr);
}
END_TEST

START_TEST(exec_one_counter_both_streams)
{
	struct frames fr;
	bool seen[6] = {false};
	size_t i;

	run("{\"command\":[\"sh\",\"-c\",\"echo o1; echo e1 >&2; sleep 0.1; "
	    "echo o2; echo e2 >&2; sleep 0.1; echo o3; echo e3 >&2; "
	    "exit 7\"],\"timeoutMs\":5000}",
	    &fr);
	ck_assert_uint_eq(fr.n, 7);
	for (i = 0; i < 6; i++) {
		ck_assert_uint_lt(fr.f[i].seq, 6);
		ck_assert(!seen[fr.f[i].seq]);
		seen[fr.f[i].seq] = true;
		if (i > 0)
			ck_assert_uint_gt(fr.f[i].seq, fr.f[i - 1].seq);
	}
	ck_assert_str_eq(fr.out.data, "o1\no2\no3\n");
	ck_assert_str_eq(fr.err.data, "e1\ne2\ne3\n");
	ck_assert_int_eq(last(&fr)->type, PROTO_FRAME_EXIT);
	ck_assert_int_eq(last(&fr)->code, 7);
	ck_assert(!last(&fr)->truncated);
	frames_free(&fr);
}
END_TEST

START_TEST(exec_long_line_cut)
{
	struct frames fr;
	size_t i;

	/* 200 KiB without a newline: three 64 KiB frames and the rest. */
	run("{\"command\":[\"sh\",\"-c\",\"head -c 204800 /dev/zero | "
	    "tr '\\\\000' a\"],\"timeoutMs\":10000}",
	    &fr);
	ck_assert_uint_eq(fr.n, 5);
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(fr.f[i].type, PROTO_FRAME_STDOUT);
		ck_assert_uint_eq(fr.f[i].seq, i);
		ck_assert_uint_eq(fr.f[i].len, i < 3 ? 65536 : 204800 - 196608);
		ck_assert_int_eq(fr.f[i].data[0], 'a');
		ck_assert_int_eq(fr.f[i].data[fr.f[i].len - 1], 'a');
	}
	ck_assert_int_eq(last(&fr)->code, 0);
	ck_assert(!last(&fr)->truncated);
	frames_free(&fr);
}
END_TEST

START_TEST(exec_exit_code_and_signal)
{
	expect("/v1/exec",
	       "{\"command\":[\"sh\",\"-c\",\"exit 42\"],\"timeoutMs\":5000}",
	       200, "{\"t\":\"exit\",\"code\":42,\"truncated\":false}\n");
	/* Killed by a signal: no exit status, so -1. */
	expect("/v1/exec",
	       "{\"command\":[\"sh\",\"-c\",\"kill -9 "
	       "$$\"],\"timeoutMs\":5000}",
	       200, "{\"t\":\"exit\",\"code\":-1,\"truncated\":false}\n");
}
END_TEST

START_TEST(exec_spawn_failed)
{
	expect("/v1/exec",
	       "{\"command\":[\"no-such-program-here\"],\"timeoutMs\":5000}",
	       200,
	       "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
	       "\"No such file or directory (os error 2)\"}\n");
	expect("/v1/exec",
	       "{\"command\":[\"/no/such/program\"],\"timeoutMs\":5000}", 200,
	       "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
	       "\"No such file or directory (os error 2)\"}\n");
	/* A directory on PATH is not a program. */
	expect("/v1/exec", "{\"command\":[\"/tmp\"],\"timeoutMs\":5000}", 200,
	       "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
	       "\"Permission denied (os error 13)\"}\n");
}
END_TEST

START_TEST(exec_program_lookup)
{
	char path[PATH_MAX];

	/* No #! line: run by /bin/sh, as execvp does. */
	snprintf(path, sizeof(path), "%s/bin/tool", fixture.root);
	th_write_file(path, "echo from \"$0\" $1\n", 18);
	ck_assert(chmod(path, 0755) == 0);
	expect_output(&fixture,
		      "{\"command\":[\"bin/tool\",\"x\"],\"timeoutMs\":5000}",
		      "from bin/tool x\n", 0);
	/* A relative PATH entry is taken from the working directory. */
	expect_output(&fixture,
		      "{\"command\":[\"tool\",\"y\"],\"timeoutMs\":5000,"
		      "\"env\":{\"PATH\":\"/nonexistent:bin\"}}",
		      "from bin/tool y\n", 0);
	/* Not executable: found but refused. */
	ck_assert(chmod(path, 0644) == 0);
	expect("/v1/exec",
	       "{\"command\":[\"tool\"],\"timeoutMs\":5000,"
	       "\"env\":{\"PATH\":\"bin\"}}",
	       200,
	       "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
	       "\"Permission denied (os error 13)\"}\n");
}
END_TEST

START_TEST(exec_request_invalid_is_a_frame)
{
	static const char pre[] =
		"{\"t\":\"error\",\"code\":\"requestInvalid\","
		"\"message\":\"REQUEST_INVALID: Request "
		"invalid: ";

	char want[512];

	snprintf(want, sizeof(want), "%scommand is empty\"}\n", pre);
	expect("/v1/exec", "{\"command\":[],\"timeoutMs\":5000}", 200, want);
	snprintf(want, sizeof(want),
		 "%sa command must carry a non-zero deadline\"}\n", pre);
	expect("/v1/exec", "{\"command\":[\"true\"],\"timeoutMs\":0}", 200,
	       want);
	snprintf(want, sizeof(want),
		 "%san environment entry contains a NUL byte\"}\n", pre);
	expect("/v1/exec",
	       "{\"command\":[\"true\"],\"timeoutMs\":5,"
	       "\"env\":{\"A\":\"x\\u0000y\"}}",
	       200, want);
	snprintf(want, sizeof(want),
		 "%san environment name must be non-empty and contain no "
		 "'='\"}\n",
		 pre);
	expect("/v1/exec",
	       "{\"command\":[\"true\"],\"timeoutMs\":5,\"env\":{\"A=B\":\"x\"}"
	       "}",
	       200, want);
}
END_TEST

START_TEST(exec_environment_cleared)
{
	struct th_resp r;

	expect_output(&fixture,
		      "{\"command\":[\"env\"],\"timeoutMs\":5000,"
		      "\"env\":{\"A\":\"1\",\"B\":\"two words\"}}",
		      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		      "/sbin:/bin\nA=1\nB=two words\n",
		      0);
	/* The request's PATH replaces the default one, and is searched. */
	expect_output(&fixture,
		      "{\"command\":[\"env\"],\"timeoutMs\":5000,"
		      "\"env\":{\"PATH\":\"/usr/bin:/bin\"}}",
		      "PATH=/usr/bin:/bin\n", 0);
	expect("/v1/exec",
	       "{\"command\":[\"env\"],\"timeoutMs\":5000,"
	       "\"env\":{\"PATH\":\"/nonexistent\"}}",
	       200,
	       "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
	       "\"No such file or directory (os error 2)\"}\n");
	/* The agent's own environment does not leak. */
	post("/v1/exec",
	     "{\"command\":[\"sh\",\"-c\",\"echo ${HOME-unset} "
	     "${SBFS_AGENT-unset}\"],\"timeoutMs\":5000}",
	     &r);
	ck_assert(strstr(body(&r), "dW5zZXQgdW5zZXQK") != NULL);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(exec_stdin_and_identity)
{
	char want[32];

	expect_output(&fixture,
		      "{\"command\":[\"readlink\",\"/proc/self/fd/0\"],"
		      "\"timeoutMs\":5000}",
		      "/dev/null\n", 0);
	/* A reader of stdin gets end of file at once. */
	expect_output(&fixture, "{\"command\":[\"cat\"],\"timeoutMs\":5000}",
		      "", 0);
	/* Nothing but the three standard descriptors is open. */
	expect_output(&fixture,
		      "{\"command\":[\"ls\",\"/proc/self/fd\"],"
		      "\"timeoutMs\":5000}",
		      "0\n1\n2\n3\n", 0);
	snprintf(want, sizeof(want), "%u\n", (unsigned)exec_uid());
	expect_output(&fixture,
		      "{\"command\":[\"id\",\"-u\"],\"timeoutMs\":5000}", want,
		      0);
	/* Its own session: it leads its process group. */
	expect_output(&fixture,
		      "{\"command\":[\"sh\",\"-c\",\"test $(ps -o pgid= $$) "
		      "-eq $$ && test $(ps -o sid= $$) -eq $$ && echo "
		      "leader\"],\"timeoutMs\":5000}",
		      "leader\n", 0);
}
END_TEST

START_TEST(exec_working_directory)
{
	char *canon = realpath(fixture.root, NULL), path[PATH_MAX];
	char want[PATH_MAX + 8];

	ck_assert_ptr_nonnull(canon);
	snprintf(path, sizeof(path), "%s/sub/dir", fixture.root);
	th_write_file(strcat(path, "/f"), "x", 1);
	snprintf(path, sizeof(path), "%s/link", fixture.root);
	ck_assert(symlink("sub", path) == 0);

	snprintf(want, sizeof(want), "%s\n", canon);
	expect_output(&fixture, "{\"command\":[\"pwd\"],\"timeoutMs\":5000}",
		      want, 0);
	expect_output(
		&fixture,
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"/\"}",
		want, 0);
	snprintf(want, sizeof(want), "%s/sub/dir\n", canon);
	expect_output(&fixture,
		      "{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
		      "\"cwd\":\"/sub/./dir/\"}",
		      want, 0);
	/* A symlink that stays beneath the root is followed. */
	expect_output(&fixture,
		      "{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
		      "\"cwd\":\"link/dir\"}",
		      want, 0);
	expect_output(&fixture,
		      "{\"command\":[\"ls\"],\"timeoutMs\":5000,"
		      "\"workingDirectory\":\"sub/dir\"}",
		      "f\n", 0);
	/* A directory that does not exist passes resolution and fails the
	 * spawn. */
	expect("/v1/exec",
	       "{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"link/"
	       "new\"}",
	       200,
	       "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
	       "\"No such file or directory (os error 2)\"}\n");
	free(canon);
}
END_TEST

START_TEST(exec_working_directory_refused)
{
	char path[PATH_MAX];
	struct th_resp r;
	char *ct;

	snprintf(path, sizeof(path), "%s/out", fixture.root);
	ck_assert(symlink(fixture.parent, path) == 0);
	snprintf(path, sizeof(path), "%s/dangling", fixture.root);
	ck_assert(symlink("/nonexistent-sbfs-target", path) == 0);

	post("/v1/exec",
	     "{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"../x\"}", &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert_str_eq(body(&r),
			 "PATH_REFUSED: Path '../x' refused: path traverses "
			 "upward");
	ct = th_resp_header(&r, "Content-Type");
	ck_assert_str_eq(ct, "text/plain; charset=utf-8");
	free(ct);
	th_resp_cleanup(&r);

	expect("/v1/exec",
	       "{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"out\"}",
	       400,
	       "PATH_REFUSED: Path 'out' refused: path escapes the session "
	       "root");
	expect("/v1/exec",
	       "{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
	       "\"workingDirectory\":\"out/x\"}",
	       400,
	       "PATH_REFUSED: Path 'out/x' refused: path escapes the session "
	       "root");
	/* Through the same link back into the root is inside. */
	expect("/v1/exec",
	       "{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
	       "\"cwd\":\"out/root/nothing\"}",
	       200,
	       "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
	       "\"No such file or directory (os error 2)\"}\n");
	expect("/v1/exec",
	       "{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"\"}", 400,
	       "PATH_REFUSED: Path '' refused: path is empty");
	expect("/v1/exec",
	       "{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":"
	       "\"dangling\"}",
	       400,
	       "PATH_REFUSED: Path 'dangling' refused: path could not be "
	       "resolved: No such file or directory (os error 2)");
	/* Refused before validation: nothing is streamed. */
	expect("/v1/exec", "{\"command\":[],\"timeoutMs\":0,\"cwd\":\"..\"}",
	       400, "PATH_REFUSED: Path '..' refused: path traverses upward");
}
END_TEST

START_TEST(exec_timeout_kills_the_group)
{
	const char *n = needle();
	char json[256];
	long long t0;

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"sleep %s & echo started; "
		 "sleep %s\"],\"timeoutMs\":500}",
		 n, n);
	t0 = th_now_ms();
	expect("/v1/exec", json, 200,
	       "{\"t\":\"stdout\",\"seq\":0,\"data\":\"c3RhcnRlZAo=\"}\n"
	       "{\"t\":\"error\",\"code\":\"timeoutExceeded\",\"message\":"
	       "\"exceeded its 500ms timeout\"}\n");
	ck_assert_int_ge(th_now_ms() - t0, 450);
	ck_assert_int_lt(th_now_ms() - t0, 5000);
	/* The background child went with its group. */
	ck_assert_int_eq(procs_gone(n, 2000), 0);
}
END_TEST

START_TEST(exec_client_gone_kills)
{
	const char *h[] = {fixture.a.auth, "Content-Type: application/json",
			   NULL};
	static const char json[] =
		"{\"command\":[\"sh\",\"-c\",\"echo hi; sleep 2; touch "
		"marker\"],\"timeoutMs\":30000}";
	char url[256];
	struct th_resp r;

	snprintf(url, sizeof(url), "%s/v1/exec", fixture.a.base);
	ck_assert_int_eq(
		th_http_timeout("POST", url, h, json, strlen(json), 700, &r),
		-1);
	th_resp_cleanup(&r);
	usleep(3000000);
	ck_assert(!exists(fixture.root, "marker"));
	/* And the agent serves on. */
	expect_output(&fixture,
		      "{\"command\":[\"echo\",\"ok\"],\"timeoutMs\":5000}",
		      "ok\n", 0);
}
END_TEST

/* Send a request and read nothing back for stall_ms: the agent's writer
 * is blocked, and the deadline must still kill the command. */
START_TEST(exec_timeout_while_client_stalls)
{
	const char *n = needle();
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char json[128], req[1024];
	struct buf got = BUF_INIT(0);
	long long end;
	int fd, len;

	snprintf(json, sizeof(json),
		 "{\"command\":[\"yes\",\"%s\"],\"timeoutMs\":500}", n);
	len = snprintf(req, sizeof(req),
		       "POST /v1/exec HTTP/1.1\r\nHost: x\r\n%s\r\n"
		       "Content-Type: application/json\r\n"
		       "Content-Length: %zu\r\n\r\n%s",
		       fixture.a.auth, strlen(json), json);
	sa.sin_port = htons((uint16_t)fixture.a.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert(fd >= 0);
	ck_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ck_assert(send(fd, req, (size_t)len, MSG_NOSIGNAL) == len);
	usleep(300000);
	ck_assert_int_ge(count_procs(n), 1);
	/* Killed at the deadline although nobody reads the stream. */
	ck_assert_int_eq(procs_gone(n, 3000), 0);
	end = th_now_ms() + 20000;
	while (th_now_ms() < end) {
		struct pollfd p = {fd, POLLIN, 0};
		char chunk[65536];
		ssize_t r;

		if (poll(&p, 1, 1000) <= 0)
			continue;
		r = recv(fd, chunk, sizeof(chunk), 0);
		if (r <= 0)
			break;
		ck_assert_int_eq(buf_append(&got, chunk, (size_t)r), 0);
		if (got.len > 5 && strstr(got.data + got.len - 5, "0\r\n\r\n"))
			break;
	}
	close(fd);
	ck_assert_ptr_nonnull(got.data);
	ck_assert(strncmp(got.data, "HTTP/1.1 200", 12) == 0);
	ck_assert_ptr_nonnull(strstr(got.data,
				     "{\"t\":\"error\",\"code\":"
				     "\"timeoutExceeded\",\"message\":"
				     "\"exceeded its 500ms timeout\"}\n"));
	buf_cleanup(&got);
}
END_TEST

START_TEST(exec_malformed_bodies)
{
	expect("/v1/exec", "not json", 400,
	       "Failed to parse the request body as JSON");
	expect("/v1/exec", "{\"command\":[\"echo\"", 400,
	       "Failed to parse the request body as JSON");
	expect("/v1/exec", "{\"command\":\"echo hi\",\"timeoutMs\":5}", 422,
	       "Failed to deserialize the JSON body into the target type");
	expect("/v1/exec", "{\"command\":[\"echo\"]}", 422,
	       "Failed to deserialize the JSON body into the target type");
	expect("/v1/exec", "[\"echo\"]", 422,
	       "Failed to deserialize the JSON body into the target type");
	expect("/v1/exec", "{\"command\":[\"echo\",1],\"timeoutMs\":5}", 422,
	       "Failed to deserialize the JSON body into the target type");
	expect_output(&fixture,
		      "{\"command\":[\"echo\",\"ok\"],\"timeoutMs\":5000}",
		      "ok\n", 0);
}
END_TEST

START_TEST(exec_output_cap)
{
	const char *extra[] = {"--output-cap", "100", NULL};
	struct frames fr;
	struct box b;
	size_t i;

	box_start(&b, extra);
	/* 30 lines of 11 bytes: nine fit in 100 bytes, the other 21 are
	 * dropped but keep their seq; stderr has its own cap. The command
	 * runs to its end regardless. */
	run_on(&b,
	       "{\"command\":[\"sh\",\"-c\",\"i=0; while [ $i -lt 30 ]; do "
	       "echo 0123456789; i=$((i+1)); done; echo e >&2; touch "
	       "done\"],\"timeoutMs\":10000}",
	       &fr);
	ck_assert_uint_eq(fr.n, 11);
	for (i = 0; i < 9; i++) {
		ck_assert_int_eq(fr.f[i].type, PROTO_FRAME_STDOUT);
		ck_assert_uint_eq(fr.f[i].seq, i);
		ck_assert_uint_eq(fr.f[i].len, 11);
	}
	ck_assert_int_eq(fr.f[9].type, PROTO_FRAME_STDERR);
	ck_assert_uint_eq(fr.f[9].seq, 30);
	ck_assert_mem_eq(fr.f[9].data, "e\n", 2);
	ck_assert_int_eq(last(&fr)->type, PROTO_FRAME_EXIT);
	ck_assert_int_eq(last(&fr)->code, 0);
	ck_assert(last(&fr)->truncated);
	ck_assert(exists(b.root, "done"));
	frames_free(&fr);
	box_stop(&b);
}
END_TEST

/* ---- bubblewrap ---------------------------------------------------------- */

/* Can this machine run bubblewrap as the exec user? */
static bool bwrap_usable(void)
{
	pid_t pid;
	int status;

	if (access(BWRAP_PATH, X_OK) < 0)
		return false;
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		dup2(fd, 1);
		dup2(fd, 2);
		if (geteuid() == 0 &&
		    (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 ||
		     setuid(NOBODY) < 0))
			_exit(1);
		execl(BWRAP_PATH, BWRAP_PATH, "--unshare-all", "--share-net",
		      "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		      "true", (char *)NULL);
		_exit(1);
	}
	ck_assert(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool start_confined(struct box *b)
{
	const char *extra[] = {"--confine", "bwrap", NULL};

	if (!bwrap_usable()) {
		fprintf(stderr, "agent_exec: bubblewrap is not usable here, "
				"confinement test skipped\n");
		return false;
	}
	box_start(b, extra);
	return true;
}

START_TEST(bwrap_identity_and_view)
{
	char want[64], path[PATH_MAX];
	struct box b;

	if (!start_confined(&b))
		return;
	snprintf(path, sizeof(path), "%s/sub/hello.txt", b.root);
	th_write_file(path, "hi\n", 3);
	snprintf(path, sizeof(path), "%s/sub", b.root);
	chmod(path, 0777);
	snprintf(want, sizeof(want), "%u\n/sandbox\nsandbox\nhi\n",
		 (unsigned)exec_uid());
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"id -u; pwd; hostname; cat "
		      "sub/hello.txt\"],\"timeoutMs\":10000}",
		      want, 0);
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"pwd; ls; touch made\"],"
		      "\"timeoutMs\":10000,\"cwd\":\"sub\"}",
		      "/sandbox/sub\nhello.txt\n", 0);
	/* What the command writes is in the root. */
	ck_assert(exists(b.root, "sub/made"));
	/* The environment is still PATH and the request's, plus the PWD
	 * that bubblewrap sets when it changes directory. */
	expect_output(&b,
		      "{\"command\":[\"env\"],\"timeoutMs\":10000,"
		      "\"env\":{\"A\":\"1\"},\"cwd\":\"sub\"}",
		      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		      "/sbin:/bin\nA=1\nPWD=/sandbox/sub\n",
		      0);
	box_stop(&b);
}
END_TEST

START_TEST(bwrap_hides_the_host)
{
	char json[1024], path[PATH_MAX];
	struct frames fr;
	struct box b;

	if (!start_confined(&b))
		return;
	snprintf(path, sizeof(path), "%s/secret", b.parent);
	th_write_file(path, "s", 1);
	chmod(path, 0644);

	/* Not the credential... */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"cat\",\"%s\"],\"timeoutMs\":10000}",
		 b.a.token_file);
	run_on(&b, json, &fr);
	ck_assert_int_eq(last(&fr)->code, 1);
	ck_assert_ptr_null(fr.out.data);
	ck_assert_ptr_nonnull(strstr(fr.err.data, "No such file"));
	frames_free(&fr);
	/* ...nor the directory above the root, by either name... */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"cat\",\"%s/secret\"],\"timeoutMs\":10000}",
		 b.parent);
	run_on(&b, json, &fr);
	ck_assert_int_eq(last(&fr)->code, 1);
	ck_assert_ptr_null(fr.out.data);
	frames_free(&fr);
	run_on(&b, "{\"command\":[\"ls\",\"-a\",\"..\"],\"timeoutMs\":10000}",
	       &fr);
	ck_assert_int_eq(last(&fr)->code, 0);
	ck_assert_ptr_nonnull(strstr(fr.out.data, "\nsandbox\n"));
	ck_assert_ptr_nonnull(strstr(fr.out.data, "\nusr\n"));
	ck_assert_ptr_null(strstr(fr.out.data, "secret"));
	ck_assert_ptr_null(strstr(fr.out.data, "token"));
	frames_free(&fr);
	/* ...nor the rest of the host. */
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"for d in /root /home /var "
		      "/work /run /opt /srv /mnt; do test -e $d && echo $d; "
		      "done; ls /tmp | wc -l\"],\"timeoutMs\":10000}",
		      "0\n", 0);
	/* The system is read-only. */
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"touch /usr/x /etc/x "
		      "2>/dev/null; echo $?\"],\"timeoutMs\":10000}",
		      "1\n", 0);
	box_stop(&b);
}
END_TEST

START_TEST(bwrap_timeout_kills_everything)
{
	const char *n1, *n2;
	struct frames fr;
	char json[512];
	struct box b;

	if (!start_confined(&b))
		return;
	n1 = needle();
	n2 = needle();
	/* One child in the group, one that left it with setsid. */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"sleep %s & setsid sleep %s & "
		 "sleep %s\"],\"timeoutMs\":700}",
		 n1, n2, n1);
	run_on(&b, json, &fr);
	ck_assert_int_eq(last(&fr)->type, PROTO_FRAME_ERROR);
	ck_assert_str_eq(last(&fr)->err_code, "timeoutExceeded");
	ck_assert_str_eq(last(&fr)->err_message, "exceeded its 700ms timeout");
	frames_free(&fr);
	ck_assert_int_eq(procs_gone(n1, 3000), 0);
	ck_assert_int_eq(procs_gone(n2, 3000), 0);
	/* A killed command reaches us as bubblewrap's exit status. */
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"kill -9 $$\"],"
		      "\"timeoutMs\":10000}",
		      "", 137);
	/* A missing program is found missing before bubblewrap runs, in
	 * the view the command would have had. */
	expect_to(&b, "/v1/exec",
		  "{\"command\":[\"no-such-program\"],\"timeoutMs\":10000}",
		  200,
		  "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
		  "\"No such file or directory (os error 2)\"}\n");
	expect_to(&b, "/v1/exec",
		  "{\"command\":[\"/tmp/x\"],\"timeoutMs\":10000,"
		  "\"env\":{\"PATH\":\"/sandbox\"}}",
		  200,
		  "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
		  "\"No such file or directory (os error 2)\"}\n");
	box_stop(&b);
}
END_TEST

/* ---- the zygote ---------------------------------------------------------- */

/* As box_start, confined, with the agent's stderr in a file of the
 * box's private directory (returned in log, heap). */
static bool zbox_start(struct box *b, const char *bwrap, char **log)
{
	const char *args[16];
	size_t n = 0;

	if (!bwrap_usable()) {
		fprintf(stderr, "agent_exec: bubblewrap is not usable here, "
				"zygote test skipped\n");
		return false;
	}
	memset(b, 0, sizeof(*b));
	b->parent = th_tmpdir("exec");
	ck_assert(chmod(b->parent, 0711) == 0);
	ck_assert(asprintf(&b->root, "%s/root", b->parent) > 0);
	ck_assert(mkdir(b->root, 0777) == 0);
	ck_assert(chmod(b->root, 0777) == 0);
	ck_assert(asprintf(log, "%s/agent.log", b->parent) > 0);
	args[n++] = "--root";
	args[n++] = b->root;
	args[n++] = "--confine";
	args[n++] = "bwrap";
	if (bwrap != NULL) {
		args[n++] = "--bwrap";
		args[n++] = bwrap;
	}
	args[n] = NULL;
	th_agent_start_logged(&b->a, args, true, *log);
	return true;
}

static pid_t parent_of(pid_t pid)
{
	char path[64], stat[512], *rp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	stat[n] = '\0';
	rp = strrchr(stat, ')');
	if (rp == NULL || rp[1] != ' ' || rp[2] == '\0')
		return 0;
	return (pid_t)strtol(rp + 4, NULL, 10);
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
		char path[300], cmd[512];
		pid_t pid, up;
		ssize_t n;
		int fd, hops;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, cmd, sizeof(cmd) - 1);
		close(fd);
		if (n <= 0)
			continue;
		cmd[n] = '\0';
		if ((size_t)n <= strlen(cmd) + 1 ||
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

/* Wait up to ms for pid to be gone (or a zombie); true when it is. */
static bool pid_gone(pid_t pid, int ms)
{
	long long end = th_now_ms() + ms;
	char path[64], stat[512], *rp;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	for (;;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			return true;
		n = read(fd, stat, sizeof(stat) - 1);
		close(fd);
		stat[n > 0 ? n : 0] = '\0';
		rp = strrchr(stat, ')');
		if (rp != NULL && rp[1] == ' ' && rp[2] == 'Z')
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
static void zbox_stop(struct box *b, char *log)
{
	int status = th_agent_terminate(&b->a);
	char *text = th_read_file(log, NULL);

	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "exec: zygote: ") == NULL, "%s", text);
	free(text);
	free(log);
	box_stop(b);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "sandbox-agent ended with status %d", status);
}

/* Wait up to 10 s for at least n live processes with s. */
static void procs_appear(const char *s, int n)
{
	long long end = th_now_ms() + 10000;

	while (count_procs(s) < n) {
		ck_assert_msg(th_now_ms() < end, "no process with %s", s);
		usleep(20000);
	}
}

/* Start a job on b; its id into id. */
static void zstart_job(struct box *b, const char *json, char id[64])
{
	struct th_resp r;

	post_to(b, "/v1/jobs/start", json, &r);
	ck_assert_msg(r.status == 200, "start: %ld %s", r.status, body(&r));
	ck_assert_uint_eq(strlen(body(&r)), 48);
	memcpy(id, body(&r) + 10, 36);
	id[36] = '\0';
	th_resp_cleanup(&r);
}

/* Poll a job of b with waitMs until it has ended; the answer (heap). */
static char *zpoll_ended(struct box *b, const char *id)
{
	long long end = th_now_ms() + 20000;
	char json[128];

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\",\"waitMs\":2000}", id);
	for (;;) {
		struct th_resp r;
		char *s;

		post_to(b, "/v1/jobs/poll", json, &r);
		ck_assert_msg(r.status == 200, "poll: %ld %s", r.status,
			      body(&r));
		s = buf_take(&r.body, NULL);
		th_resp_cleanup(&r);
		if (strncmp(s, "{\"running\":false", 16) == 0)
			return s;
		ck_assert_msg(th_now_ms() < end, "job %s never ended", id);
		free(s);
	}
}

START_TEST(zygote_runs_commands)
{
	const char *n = needle();
	char json[256], id[64], *log, *s;
	struct frames fr;
	struct box b;
	pid_t z;

	if (!zbox_start(&b, NULL, &log))
		return;
	/* The start-up probe went through it, and it runs as the exec
	 * user. */
	ck_assert(log_has(log, "started by a zygote"));
	z = zygote_of(b.a.pid);
	ck_assert_int_gt(z, 0);
	ck_assert_uint_eq(uid_of(z), exec_uid());
	/* Exit codes, and signal deaths as bubblewrap reported them. */
	expect_to(
		&b, "/v1/exec",
		"{\"command\":[\"sh\",\"-c\",\"exit 42\"],\"timeoutMs\":10000}",
		200, "{\"t\":\"exit\",\"code\":42,\"truncated\":false}\n");
	expect_to(&b, "/v1/exec",
		  "{\"command\":[\"sh\",\"-c\",\"kill -TERM $$\"],"
		  "\"timeoutMs\":10000}",
		  200, "{\"t\":\"exit\",\"code\":143,\"truncated\":false}\n");
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"echo out; echo err >&2; "
		      "kill -9 $$\"],\"timeoutMs\":10000}",
		      "out\n", 137);
	/* Only the standard descriptors; pid 1 is the command's own init,
	 * whose memory (the zygote's) it cannot read. */
	expect_output(&b,
		      "{\"command\":[\"ls\",\"/proc/self/fd\"],"
		      "\"timeoutMs\":10000}",
		      "0\n1\n2\n3\n", 0);
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"cat /proc/1/comm; cat "
		      "/proc/1/environ 2>/dev/null || echo hidden; grep "
		      "CapEff /proc/self/status\"],\"timeoutMs\":10000}",
		      "sbfs-init\nhidden\nCapEff:\t0000000000000000\n", 0);
	/* Each command has its own /tmp and /dev/shm... */
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"touch /tmp/a /dev/shm/b; "
		      "ls /tmp /dev/shm\"],\"timeoutMs\":10000}",
		      "/dev/shm:\nb\n\n/tmp:\na\n", 0);
	expect_output(&b,
		      "{\"command\":[\"ls\",\"-A\",\"/tmp\",\"/dev/shm\"],"
		      "\"timeoutMs\":10000}",
		      "/dev/shm:\n\n/tmp:\n", 0);
	/* ...and cannot leave anything for the next one elsewhere. */
	expect_output(
		&b,
		"{\"command\":[\"sh\",\"-c\",\"touch /x 2>/dev/null; echo "
		"$?; mkdir /dev/x 2>/dev/null; echo $?\"],"
		"\"timeoutMs\":10000}",
		"1\n1\n", 0);
	/* A job runs through it too; two commands do not see each other. */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	zstart_job(&b, json, id);
	procs_appear(n, 1);
	run_on(&b,
	       "{\"command\":[\"sh\",\"-c\",\"cat /proc/[0-9]*/cmdline | tr "
	       "'\\\\000' ' '\"],\"timeoutMs\":10000}",
	       &fr);
	ck_assert_int_eq(last(&fr)->code, 0);
	ck_assert_ptr_nonnull(fr.out.data);
	ck_assert_ptr_null(strstr(fr.out.data, n));
	frames_free(&fr);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	expect_to(&b, "/v1/jobs/cancel", json, 200, "{}");
	ck_assert_int_eq(procs_gone(n, 3000), 0);
	zstart_job(&b,
		   "{\"command\":[\"sh\",\"-c\",\"echo job; exit 5\"],"
		   "\"timeoutMs\":10000}",
		   id);
	s = zpoll_ended(&b, id);
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
	struct box b;
	pid_t z;

	if (!zbox_start(&b, NULL, &log))
		return;
	z = zygote_of(b.a.pid);
	ck_assert_int_gt(z, 0);
	expect_to(&b, "/v1/exec",
		  "{\"command\":[\"no-such-program\"],\"timeoutMs\":10000}",
		  200,
		  "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
		  "\"No such file or directory (os error 2)\"}\n");
	expect_to(&b, "/v1/exec",
		  "{\"command\":[\"/usr\"],\"timeoutMs\":10000}", 200,
		  "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
		  "\"Permission denied (os error 13)\"}\n");
	expect_to(&b, "/v1/exec",
		  "{\"command\":[\"pwd\"],\"timeoutMs\":10000,\"cwd\":"
		  "\"missing\"}",
		  200,
		  "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
		  "\"No such file or directory (os error 2)\"}\n");
	/* Found on PATH but not executable; then executable, without #!. */
	snprintf(path, sizeof(path), "%s/bin/tool", b.root);
	th_write_file(path, "echo from \"$0\" $1\n", 18);
	snprintf(path, sizeof(path), "%s/bin", b.root);
	ck_assert(chmod(path, 0755) == 0);
	expect_to(&b, "/v1/exec",
		  "{\"command\":[\"tool\"],\"timeoutMs\":10000,"
		  "\"env\":{\"PATH\":\"/nowhere:bin\"}}",
		  200,
		  "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
		  "\"Permission denied (os error 13)\"}\n");
	snprintf(path, sizeof(path), "%s/bin/tool", b.root);
	ck_assert(chmod(path, 0755) == 0);
	expect_output(&b,
		      "{\"command\":[\"tool\",\"x\"],\"timeoutMs\":10000,"
		      "\"env\":{\"PATH\":\"/nowhere:bin\"}}",
		      "from bin/tool x\n", 0);
	expect_output(&b,
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
	struct box b;
	pid_t z, z2;
	char *log;

	if (!zbox_start(&b, NULL, &log))
		return;
	z = zygote_of(b.a.pid);
	ck_assert_int_gt(z, 0);
	ck_assert(kill(z, SIGKILL) == 0);
	ck_assert(pid_gone(z, 3000));
	/* The next command starts a new one. */
	expect_output(&b,
		      "{\"command\":[\"echo\",\"again\"],\"timeoutMs\":10000}",
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
	const char *n = needle();
	char json[256], id[64], *log, *s;
	struct box b;
	pid_t z;

	if (!zbox_start(&b, NULL, &log))
		return;
	z = zygote_of(b.a.pid);
	ck_assert_int_gt(z, 0);
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"echo up; sleep %s & sleep "
		 "%s\"],\"timeoutMs\":30000}",
		 n, n);
	zstart_job(&b, json, id);
	procs_appear(n, 2);
	ck_assert(kill(z, SIGKILL) == 0);
	/* Its commands die with it, and their status is lost. */
	s = zpoll_ended(&b, id);
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":["
			    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"dXAK\"}],"
			    "\"error\":{\"code\":\"waitFailed\",\"message\":"
			    "\"No child processes (os error 10)\"}}");
	free(s);
	ck_assert_int_eq(procs_gone(n, 3000), 0);
	expect_output(&b,
		      "{\"command\":[\"echo\",\"again\"],\"timeoutMs\":10000}",
		      "again\n", 0);
	zbox_stop(&b, log);
}
END_TEST

struct zthread {
	struct box *b;
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
		    r.status == 200 && strcmp(body(&r), want) == 0)
			t->good++;
		else
			fprintf(stderr, "zygote: t%d-%d: %ld %s\n", t->k, j,
				r.status, body(&r));
		th_resp_cleanup(&r);
	}
	return NULL;
}

START_TEST(zygote_many_at_once)
{
	char ids[PROTO_MAX_JOBS][64], json[256], want[256], data[16], *log;
	struct zthread t[4];
	pthread_t th[4];
	struct box b;
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
		zstart_job(&b, json, ids[i]);
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
		s = zpoll_ended(&b, ids[i]);
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
	struct box b;
	int status;
	char *log;
	pid_t z;

	if (!zbox_start(&b, NULL, &log))
		return;
	z = zygote_of(b.a.pid);
	ck_assert_int_gt(z, 0);
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
	struct box b;

	if (!bwrap_usable())
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
	expect_output(&b,
		      "{\"command\":[\"sh\",\"-c\",\"hostname; ls -A /tmp | wc "
		      "-l; kill -9 $$\"],\"timeoutMs\":10000}",
		      "sandbox\n0\n", 137);
	zbox_stop(&b, log);
	th_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- jobs ---------------------------------------------------------------- */

/* Start a job; its id (36 characters of a version 4 UUID) into id. */
static void start_job(const char *json, char id[64])
{
	struct th_resp r;
	const char *p;

	post("/v1/jobs/start", json, &r);
	ck_assert_msg(r.status == 200, "start: %ld %s", r.status, body(&r));
	p = body(&r);
	ck_assert_uint_eq(strlen(p), 48);
	ck_assert(strncmp(p, "{\"jobId\":\"", 10) == 0);
	ck_assert_str_eq(p + 46, "\"}");
	memcpy(id, p + 10, 36);
	id[36] = '\0';
	ck_assert_int_eq(id[8], '-');
	ck_assert_int_eq(id[13], '-');
	ck_assert_int_eq(id[14], '4');
	ck_assert_int_eq(id[18], '-');
	ck_assert(strchr("89ab", id[19]) != NULL);
	ck_assert_int_eq(id[23], '-');
	th_resp_cleanup(&r);
}

/* One poll; the answer body (heap). */
static char *poll_job(const char *id, const char *extra, long *status)
{
	char json[256];
	struct th_resp r;
	char *s;

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"%s}", id,
		 extra ? extra : "");
	post("/v1/jobs/poll", json, &r);
	*status = r.status;
	s = buf_take(&r.body, NULL);
	th_resp_cleanup(&r);
	return s;
}

/* Poll (without marking anything) until the job has ended; the last
 * answer. Every answer is 200. */
static char *poll_until_ended(const char *id, const char *extra)
{
	long long end = th_now_ms() + 15000;
	long status;
	char *s;

	for (;;) {
		s = poll_job(id, extra, &status);
		ck_assert_msg(status == 200, "poll: %ld %s", status, s);
		if (strncmp(s, "{\"running\":false", 16) == 0)
			return s;
		ck_assert_msg(th_now_ms() < end, "job %s never ended", id);
		free(s);
		usleep(30000);
	}
}

static void expect_poll(const char *id, const char *extra, long status,
			const char *want)
{
	long got;
	char *s = poll_job(id, extra, &got);

	ck_assert_msg(got == status, "poll %s: %ld %s", id, got, s);
	ck_assert_str_eq(s, want);
	free(s);
}

START_TEST(jobs_start_poll_replay)
{
	char id[64], *s;

	start_job("{\"command\":[\"sh\",\"-c\",\"echo a; echo b; echo c\"],"
		  "\"timeoutMs\":10000}",
		  id);
	s = poll_until_ended(id, NULL);
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":["
			    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"YQo=\"},"
			    "{\"t\":\"stdout\",\"seq\":1,\"data\":\"Ygo=\"},"
			    "{\"t\":\"stdout\",\"seq\":2,\"data\":\"Ywo=\"}],"
			    "\"exitCode\":0,\"truncated\":false}");
	free(s);
	/* sinceSeq is exclusive; null means from the first frame. */
	expect_poll(id, ",\"sinceSeq\":0", 200,
		    "{\"running\":false,\"frames\":["
		    "{\"t\":\"stdout\",\"seq\":1,\"data\":\"Ygo=\"},"
		    "{\"t\":\"stdout\",\"seq\":2,\"data\":\"Ywo=\"}],"
		    "\"exitCode\":0,\"truncated\":false}");
	expect_poll(id, ",\"sinceSeq\":2", 200,
		    "{\"running\":false,\"frames\":[],\"exitCode\":0,"
		    "\"truncated\":false}");
	expect_poll(id, ",\"sinceSeq\":null", 200,
		    "{\"running\":false,\"frames\":["
		    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"YQo=\"},"
		    "{\"t\":\"stdout\",\"seq\":1,\"data\":\"Ygo=\"},"
		    "{\"t\":\"stdout\",\"seq\":2,\"data\":\"Ywo=\"}],"
		    "\"exitCode\":0,\"truncated\":false}");
}
END_TEST

START_TEST(jobs_running_then_exit_code)
{
	char id[64], *s;
	long status;

	start_job("{\"command\":[\"sh\",\"-c\",\"echo x >&2; sleep 0.5; "
		  "exit 3\"],\"timeoutMs\":10000}",
		  id);
	usleep(200000);
	s = poll_job(id, NULL, &status);
	ck_assert_str_eq(s, "{\"running\":true,\"frames\":["
			    "{\"t\":\"stderr\",\"seq\":0,\"data\":\"eAo=\"}]}");
	free(s);
	s = poll_until_ended(id, ",\"sinceSeq\":0");
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"exitCode\":3,"
			    "\"truncated\":false}");
	free(s);
}
END_TEST

START_TEST(jobs_cancel)
{
	const char *n = needle();
	char id[64], json[256];

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"sleep %s & sleep %s\"],"
		 "\"timeoutMs\":30000}",
		 n, n);
	start_job(json, id);
	usleep(200000);
	ck_assert_int_ge(count_procs(n), 1);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	expect("/v1/jobs/cancel", json, 200, "{}");
	ck_assert_int_eq(procs_gone(n, 2000), 0);
	expect_poll(id, NULL, 200,
		    "{\"running\":false,\"frames\":[],\"error\":{\"code\":"
		    "\"cancelled\",\"message\":\"the job was cancelled\"}}");
	/* Cancelling an ended job answers {} and changes nothing. */
	expect("/v1/jobs/cancel", json, 200, "{}");
	start_job("{\"command\":[\"true\"],\"timeoutMs\":10000}", id);
	free(poll_until_ended(id, NULL));
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	expect("/v1/jobs/cancel", json, 200, "{}");
	expect_poll(id, NULL, 200,
		    "{\"running\":false,\"frames\":[],\"exitCode\":0,"
		    "\"truncated\":false}");
}
END_TEST

START_TEST(jobs_unknown_job)
{
	struct th_resp r;
	char *ct;

	post("/v1/jobs/poll", "{\"jobId\":\"nope\",\"sinceSeq\":null}", &r);
	ck_assert_int_eq(r.status, 404);
	ck_assert_str_eq(body(&r), "JOB_NOT_FOUND: No such job in the sandbox: "
				   "nope");
	ct = th_resp_header(&r, "Content-Type");
	ck_assert_str_eq(ct, "text/plain; charset=utf-8");
	free(ct);
	th_resp_cleanup(&r);
	expect("/v1/jobs/cancel",
	       "{\"jobId\":\"0b7c2a44-0000-4000-8000-000000000000\"}", 404,
	       "JOB_NOT_FOUND: No such job in the sandbox: "
	       "0b7c2a44-0000-4000-8000-000000000000");
}
END_TEST

START_TEST(jobs_start_refusals)
{
	expect("/v1/jobs/start", "{\"command\":[],\"timeoutMs\":5000}", 400,
	       "REQUEST_INVALID: Request invalid: command is empty");
	expect("/v1/jobs/start", "{\"command\":[\"true\"],\"timeoutMs\":0}",
	       400,
	       "REQUEST_INVALID: Request invalid: a command must carry a "
	       "non-zero deadline");
	expect("/v1/jobs/start",
	       "{\"command\":[\"true\"],\"timeoutMs\":5,\"env\":{\"\":\"x\"}}",
	       400,
	       "REQUEST_INVALID: Request invalid: an environment name must "
	       "be non-empty and contain no '='");
	expect("/v1/jobs/start",
	       "{\"command\":[\"true\"],\"timeoutMs\":5,\"cwd\":\"a/../..\"}",
	       400,
	       "PATH_REFUSED: Path 'a/../..' refused: path traverses "
	       "upward");
	expect("/v1/jobs/start", "{\"command\":[\"true\"", 400,
	       "Failed to parse the request body as JSON");
	expect("/v1/jobs/start", "{\"command\":[true],\"timeoutMs\":5}", 422,
	       "Failed to deserialize the JSON body into the target type");
}
END_TEST

START_TEST(jobs_failures)
{
	const char *n = needle();
	char id[64], json[256], *s;

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":300}", n);
	start_job(json, id);
	s = poll_until_ended(id, NULL);
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"error\":{"
			    "\"code\":\"timeoutExceeded\",\"message\":"
			    "\"exceeded its 300ms timeout\"}}");
	free(s);
	ck_assert_int_eq(procs_gone(n, 2000), 0);
	start_job("{\"command\":[\"no-such-program-here\"],\"timeoutMs\":300}",
		  id);
	s = poll_until_ended(id, NULL);
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"error\":{"
			    "\"code\":\"spawnFailed\",\"message\":"
			    "\"No such file or directory (os error 2)\"}}");
	free(s);
}
END_TEST

START_TEST(jobs_limit_and_eviction)
{
	const char *n = needle();
	char ids[PROTO_MAX_JOBS][64], id[64], json[256], *s;
	struct th_resp r;
	long long end;
	int i;

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	for (i = 0; i < PROTO_MAX_JOBS; i++)
		start_job(json, ids[i]);
	/* Sixteen running: the seventeenth is refused. */
	expect("/v1/jobs/start", json, 429,
	       "JOB_LIMIT_REACHED: Job limit reached: the sandbox holds 16 "
	       "jobs that are running or whose ending has not been polled");
	/* A finished job whose ending nobody has read is kept. */
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", ids[0]);
	expect("/v1/jobs/cancel", json, 200, "{}");
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	expect("/v1/jobs/start", json, 429,
	       "JOB_LIMIT_REACHED: Job limit reached: the sandbox holds 16 "
	       "jobs that are running or whose ending has not been polled");
	/* Once a poll has delivered its ending, it makes room. */
	s = poll_until_ended(ids[0], NULL);
	free(s);
	end = th_now_ms() + 3000;
	for (;;) {
		post("/v1/jobs/start", json, &r);
		if (r.status == 200 || th_now_ms() > end)
			break;
		th_resp_cleanup(&r);
		usleep(20000);
	}
	ck_assert_msg(r.status == 200, "%ld %s", r.status, body(&r));
	th_resp_cleanup(&r);
	snprintf(id, sizeof(id), "%s", ids[0]);
	snprintf(json, sizeof(json),
		 "JOB_NOT_FOUND: No such job in the sandbox: %s", id);
	expect_poll(id, NULL, 404, json);
	/* The others still run, and the new one. */
	expect_poll(ids[1], NULL, 200, "{\"running\":true,\"frames\":[]}");
	end = th_now_ms() + 3000;
	while (count_procs(n) != PROTO_MAX_JOBS && th_now_ms() < end)
		usleep(20000);
	ck_assert_int_eq(count_procs(n), PROTO_MAX_JOBS);
}
END_TEST

START_TEST(jobs_long_poll)
{
	char id[64], *s;
	long long t0, dt;
	long status;

	start_job("{\"command\":[\"sh\",\"-c\",\"sleep 0.6; echo x; sleep "
		  "0.6\"],\"timeoutMs\":10000}",
		  id);
	/* Held until output arrives... */
	t0 = th_now_ms();
	s = poll_job(id, ",\"sinceSeq\":null,\"waitMs\":10000", &status);
	dt = th_now_ms() - t0;
	ck_assert_int_eq(status, 200);
	ck_assert_str_eq(s, "{\"running\":true,\"frames\":["
			    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"eAo=\"}]}");
	ck_assert_int_ge(dt, 300);
	ck_assert_int_lt(dt, 5000);
	free(s);
	/* ...then until the end. */
	t0 = th_now_ms();
	s = poll_job(id, ",\"sinceSeq\":0,\"waitMs\":10000", &status);
	dt = th_now_ms() - t0;
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"exitCode\":0,"
			    "\"truncated\":false}");
	ck_assert_int_ge(dt, 300);
	ck_assert_int_lt(dt, 5000);
	free(s);
	/* An ended job answers at once. */
	t0 = th_now_ms();
	free(poll_job(id, ",\"waitMs\":10000", &status));
	ck_assert_int_lt(th_now_ms() - t0, 1000);
}
END_TEST

START_TEST(jobs_long_poll_times_out)
{
	char id[64], *s;
	long long t0, dt;
	long status;

	start_job("{\"command\":[\"sleep\",\"30\"],\"timeoutMs\":30000}", id);
	t0 = th_now_ms();
	s = poll_job(id, ",\"waitMs\":700", &status);
	dt = th_now_ms() - t0;
	ck_assert_int_eq(status, 200);
	ck_assert_str_eq(s, "{\"running\":true,\"frames\":[]}");
	ck_assert_int_ge(dt, 650);
	ck_assert_int_lt(dt, 5000);
	free(s);
	/* Without waitMs the answer is immediate. */
	t0 = th_now_ms();
	s = poll_job(id, ",\"waitMs\":0", &status);
	free(s);
	ck_assert_int_lt(th_now_ms() - t0, 1000);
}
END_TEST

START_TEST(jobs_strict_v1_ignores_wait)
{
	const char *extra[] = {"--strict-v1", NULL};
	char json[256];
	struct th_resp r;
	struct box b;
	long long t0;
	const char *p;
	char id[64];

	box_start(&b, extra);
	post_to(&b, "/v1/jobs/start",
		"{\"command\":[\"sleep\",\"30\"],\"timeoutMs\":30000}", &r);
	ck_assert_int_eq(r.status, 200);
	p = body(&r);
	memcpy(id, p + 10, 36);
	id[36] = '\0';
	th_resp_cleanup(&r);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\",\"waitMs\":3000}", id);
	t0 = th_now_ms();
	post_to(&b, "/v1/jobs/poll", json, &r);
	ck_assert_int_lt(th_now_ms() - t0, 1500);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(body(&r), "{\"running\":true,\"frames\":[]}");
	th_resp_cleanup(&r);
	box_stop(&b);
}
END_TEST

START_TEST(jobs_malformed_bodies)
{
	char id[64], json[128];

	expect("/v1/jobs/poll", "{", 400,
	       "Failed to parse the request body as JSON");
	expect("/v1/jobs/poll", "{\"jobId\":5}", 422,
	       "Failed to deserialize the JSON body into the target type");
	expect("/v1/jobs/poll", "{\"jobId\":\"x\",\"sinceSeq\":-2}", 422,
	       "Failed to deserialize the JSON body into the target type");
	expect("/v1/jobs/cancel", "[]", 422,
	       "Failed to deserialize the JSON body into the target type");
	expect("/v1/jobs/cancel", "", 400,
	       "Failed to parse the request body as JSON");
	start_job("{\"command\":[\"echo\",\"fine\"],\"timeoutMs\":5000}", id);
	free(poll_until_ended(id, NULL));
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	expect("/v1/jobs/cancel", json, 200, "{}");
}
END_TEST

START_TEST(jobs_keep_frames_bounded)
{
	const char *extra[] = {"--output-cap", "4096", NULL};
	char json[256], id[64];
	struct proto_job_poll p;
	struct th_resp r;
	long long end;
	struct box b;

	box_start(&b, extra);
	/* 3000 empty lines are 3000 bytes, under the cap, but a job keeps at
	 * most cap/4 + 1024 frames per stream. */
	post_to(&b, "/v1/jobs/start",
		"{\"command\":[\"sh\",\"-c\",\"i=0; while [ $i -lt 3000 ]; "
		"do echo; i=$((i+1)); done\"],\"timeoutMs\":30000}",
		&r);
	ck_assert_int_eq(r.status, 200);
	memcpy(id, body(&r) + 10, 36);
	id[36] = '\0';
	th_resp_cleanup(&r);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	end = th_now_ms() + 15000;
	for (;;) {
		post_to(&b, "/v1/jobs/poll", json, &r);
		ck_assert_int_eq(r.status, 200);
		if (strncmp(body(&r), "{\"running\":false", 16) == 0)
			break;
		th_resp_cleanup(&r);
		ck_assert(th_now_ms() < end);
		usleep(30000);
	}
	ck_assert_int_eq(proto_job_poll_decode(r.body.data, r.body.len, &p), 0);
	ck_assert_uint_eq(p.nframes, 4096 / 4 + 1024);
	ck_assert_uint_eq(p.frames[p.nframes - 1].seq, p.nframes - 1);
	ck_assert(p.has_exit);
	ck_assert_int_eq(p.exit_code, 0);
	ck_assert(p.truncated);
	proto_job_poll_cleanup(&p);
	th_resp_cleanup(&r);
	box_stop(&b);
}
END_TEST

/* ---- jobs: the extension ------------------------------------------------- */

static void mkdir_in(const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(mkdir(path, 0777), 0);
	ck_assert_int_eq(chmod(path, 0777), 0);
}

static void expect_poll_on(struct box *b, const char *id, long status,
			   const char *want)
{
	char json[128];

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	expect_to(b, "/v1/jobs/poll", json, status, want);
}

/* Start a job on b; its id into id. */
static void start_on(struct box *b, const char *json, char id[64])
{
	struct th_resp r;

	post_to(b, "/v1/jobs/start", json, &r);
	ck_assert_msg(r.status == 200, "start: %ld %s", r.status, body(&r));
	ck_assert_uint_eq(r.body.len, 48);
	memcpy(id, body(&r) + 10, 36);
	id[36] = '\0';
	th_resp_cleanup(&r);
}

/* One poll of b's job with extra members; the decoded answer. */
static void poll_on(struct box *b, const char *id, const char *extra,
		    struct proto_job_poll *p, size_t *len)
{
	char json[256];
	struct th_resp r;

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"%s}", id,
		 extra ? extra : "");
	post_to(b, "/v1/jobs/poll", json, &r);
	ck_assert_msg(r.status == 200, "poll: %ld %s", r.status, body(&r));
	ck_assert_msg(proto_job_poll_decode(r.body.data, r.body.len, p) == 0,
		      "poll answer: %.200s", body(&r));
	if (len != NULL)
		*len = r.body.len;
	th_resp_cleanup(&r);
}

/* Collect a flow-controlled job's output as a client does: poll from the
 * last seq taken (which acknowledges it) until the end. Frames must be
 * contiguous in each stream. Returns the last answer (the ending). */
static void collect(struct box *b, const char *id, struct buf *out,
		    struct buf *err, struct proto_job_poll *end)
{
	long long until = th_now_ms() + 60000;
	bool has_since = false;
	uint64_t since = 0;
	char extra[96];

	for (;;) {
		struct proto_job_poll p;
		size_t i;

		if (has_since)
			snprintf(extra, sizeof(extra),
				 ",\"sinceSeq\":%llu,\"waitMs\":2000,"
				 "\"maxBytes\":1048576",
				 (unsigned long long)since);
		else
			snprintf(extra, sizeof(extra),
				 ",\"waitMs\":2000,\"maxBytes\":1048576");
		poll_on(b, id, extra, &p, NULL);
		for (i = 0; i < p.nframes; i++) {
			struct proto_frame *f = &p.frames[i];
			struct buf *to =
				f->type == PROTO_FRAME_STDOUT ? out : err;

			ck_assert(f->has_off);
			ck_assert_uint_eq(f->off, to->len);
			ck_assert_int_eq(buf_append(to, f->data, f->len), 0);
			since = f->seq;
			has_since = true;
		}
		if (!p.running) {
			*end = p;
			return;
		}
		proto_job_poll_cleanup(&p);
		ck_assert_msg(th_now_ms() < until, "job %s never ended", id);
	}
}

START_TEST(jobs_flow_keeps_everything)
{
	const char *extra[] = {"--job-window", "1M", NULL};
	struct buf out = BUF_INIT(0), err = BUF_INIT(0);
	struct proto_job_poll p;
	char id[64];
	size_t i;
	struct box b;

	box_start(&b, extra);
	/* 5 MB of output, the window 1 MiB, the cap 4 MiB: nothing may be
	 * dropped. */
	start_on(&b,
		 "{\"command\":[\"sh\",\"-c\",\"yes abcdefghij | head -c "
		 "5000000; echo done >&2\"],\"timeoutMs\":60000,"
		 "\"flowControl\":true}",
		 id);
	/* Nobody acknowledges: the job waits with its output unread. */
	usleep(1500000);
	poll_on(&b, id, NULL, &p, NULL);
	ck_assert(p.running);
	ck_assert_uint_gt(p.nframes, 0);
	proto_job_poll_cleanup(&p);
	collect(&b, id, &out, &err, &p);
	ck_assert(p.has_exit);
	ck_assert_int_eq(p.exit_code, 0);
	ck_assert(!p.truncated);
	ck_assert(p.has_bytes);
	ck_assert_uint_eq(p.stdout_bytes, 5000000);
	ck_assert_uint_eq(p.stderr_bytes, 5);
	proto_job_poll_cleanup(&p);
	ck_assert_uint_eq(out.len, 5000000);
	for (i = 0; i < out.len; i++)
		if (out.data[i] != "abcdefghij\n"[i % 11])
			ck_abort_msg("byte %zu differs", i);
	ck_assert_str_eq(err.data, "done\n");
	buf_cleanup(&out);
	buf_cleanup(&err);
	box_stop(&b);
}
END_TEST

START_TEST(jobs_flow_releases_only_acknowledged)
{
	const char *extra[] = {"--job-window", "1M", NULL};
	struct buf out = BUF_INIT(0), err = BUF_INIT(0);
	struct proto_job_poll p;
	char id[64];
	struct box b;

	box_start(&b, extra);
	/* Small output, acknowledged: kept all the same (no room needed). */
	start_on(&b,
		 "{\"command\":[\"sh\",\"-c\",\"echo one; echo two\"],"
		 "\"timeoutMs\":60000,\"flowControl\":true}",
		 id);
	collect(&b, id, &out, &err, &p);
	proto_job_poll_cleanup(&p);
	poll_on(&b, id, ",\"sinceSeq\":null", &p, NULL);
	ck_assert(!p.running);
	ck_assert_uint_ge(p.nframes, 1);
	ck_assert_uint_eq(p.frames[0].off, 0);
	ck_assert_uint_eq(out.len, 8);
	ck_assert_mem_eq(out.data, "one\ntwo\n", 8);
	proto_job_poll_cleanup(&p);
	buf_reset(&out);
	buf_reset(&err);

	/* More than the window, acknowledged as it goes: the oldest went
	 * to make room, so a poll from the start begins later, and says
	 * where; the ending still gives the whole length. */
	start_on(&b,
		 "{\"command\":[\"sh\",\"-c\",\"head -c 3000000 "
		 "/dev/zero\"],\"timeoutMs\":60000,\"flowControl\":true}",
		 id);
	collect(&b, id, &out, &err, &p);
	ck_assert_uint_eq(out.len, 3000000);
	proto_job_poll_cleanup(&p);
	poll_on(&b, id, ",\"sinceSeq\":null", &p, NULL);
	ck_assert(!p.running);
	ck_assert_uint_gt(p.nframes, 0);
	ck_assert_uint_gt(p.frames[0].off, 0);
	ck_assert_uint_le(3000000 - p.frames[0].off, 1024 * 1024);
	ck_assert(p.has_bytes);
	ck_assert_uint_eq(p.stdout_bytes, 3000000);
	proto_job_poll_cleanup(&p);
	buf_cleanup(&out);
	buf_cleanup(&err);
	box_stop(&b);
}
END_TEST

START_TEST(jobs_flow_paused_job_cancel_and_timeout)
{
	const char *extra[] = {"--job-window", "1M", NULL};
	const char *n = needle();
	struct proto_job_poll p;
	char id[64], json[512];
	struct box b;

	box_start(&b, extra);
	/* A job blocked on its output still ends at a cancel... */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"head -c 4000000 /dev/zero; "
		 "sleep %s\"],\"timeoutMs\":60000,\"flowControl\":true}",
		 n);
	start_on(&b, json, id);
	usleep(500000);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	expect_to(&b, "/v1/jobs/cancel", json, 200, "{}");
	poll_on(&b, id, ",\"sinceSeq\":999999", &p, NULL);
	ck_assert(!p.running);
	ck_assert_str_eq(p.err_code, "cancelled");
	proto_job_poll_cleanup(&p);
	ck_assert_int_eq(procs_gone(n, 3000), 0);
	/* ...and at its timeout. */
	start_on(&b,
		 "{\"command\":[\"sh\",\"-c\",\"head -c 4000000 "
		 "/dev/zero\"],\"timeoutMs\":800,\"flowControl\":true}",
		 id);
	usleep(1800000);
	poll_on(&b, id, ",\"sinceSeq\":999999", &p, NULL);
	ck_assert(!p.running);
	ck_assert_str_eq(p.err_code, "timeoutExceeded");
	proto_job_poll_cleanup(&p);
	box_stop(&b);
}
END_TEST

START_TEST(jobs_max_bytes)
{
	struct proto_job_poll p;
	char id[64];
	size_t len;

	start_job("{\"command\":[\"sh\",\"-c\",\"head -c 1000000 "
		  "/dev/zero\"],\"timeoutMs\":60000,\"flowControl\":true}",
		  id);
	usleep(500000);
	/* The answer stops near maxBytes, says running, and goes on from
	 * where it stopped. */
	poll_on(&fixture, id, ",\"maxBytes\":100000", &p, &len);
	ck_assert(p.running);
	ck_assert_uint_ge(p.nframes, 1);
	ck_assert_uint_le(len, 100000 + 100);
	proto_job_poll_cleanup(&p);
	/* Below the least the agent takes (64 KiB), it takes the least;
	 * one frame always goes. */
	poll_on(&fixture, id, ",\"maxBytes\":1", &p, &len);
	ck_assert(p.running);
	ck_assert_uint_ge(p.nframes, 1);
	if (p.nframes > 1)
		ck_assert_uint_le(len, 65536 + 100);
	proto_job_poll_cleanup(&p);
	/* Without maxBytes all of it comes (under 16 MiB). */
	poll_on(&fixture, id, NULL, &p, &len);
	ck_assert_uint_gt(len, 1000000);
	proto_job_poll_cleanup(&p);
}
END_TEST

START_TEST(jobs_alien_style_still_truncates)
{
	const char *strict[] = {"--strict-v1", "--output-cap", "4096", NULL};
	const char *ext[] = {"--output-cap", "4096", NULL};
	struct proto_job_poll p;
	char id[64];
	struct box b;
	int i;

	/* Without flowControl, or with it on a strict agent (which does not
	 * know it): alien's cap, the rest dropped, truncated. */
	for (i = 0; i < 2; i++) {
		long long until = th_now_ms() + 15000;

		box_start(&b, i == 0 ? ext : strict);
		start_on(&b,
			 i == 0 ? "{\"command\":[\"sh\",\"-c\",\"head -c 20000 "
				  "/dev/zero\"],\"timeoutMs\":10000}"
				: "{\"command\":[\"sh\",\"-c\",\"head -c 20000 "
				  "/dev/zero\"],\"timeoutMs\":10000,"
				  "\"flowControl\":true}",
			 id);
		for (;;) {
			poll_on(&b, id, NULL, &p, NULL);
			if (!p.running)
				break;
			proto_job_poll_cleanup(&p);
			ck_assert(th_now_ms() < until);
			usleep(50000);
		}
		ck_assert(p.truncated);
		ck_assert(!p.has_bytes);
		ck_assert(p.nframes == 0 || !p.frames[0].has_off);
		proto_job_poll_cleanup(&p);
		box_stop(&b);
	}
}
END_TEST

/* GET /sandboxfs/v1/jobs on b: the decoded listing. */
static void list_on(struct box *b, struct proto_job_list *l)
{
	const char *h[] = {b->a.auth, NULL};
	char url[256];
	struct th_resp r;

	snprintf(url, sizeof(url), "%s/sandboxfs/v1/jobs", b->a.base);
	th_http("GET", url, h, NULL, 0, &r);
	ck_assert_msg(r.status == 200, "list: %ld %s", r.status, body(&r));
	ck_assert_msg(strstr(body(&r), "s3cr3t") == NULL,
		      "the listing shows an env value: %s", body(&r));
	ck_assert_int_eq(proto_job_list_decode(r.body.data, r.body.len, l), 0);
	th_resp_cleanup(&r);
}

static const struct proto_job_info *listed(const struct proto_job_list *l,
					   const char *id)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->jobs[i].job_id, id) == 0)
			return &l->jobs[i];
	return NULL;
}

START_TEST(jobs_listing)
{
	const char *n = needle();
	struct proto_job_list l;
	const struct proto_job_info *ji;
	char a[64], c[64], json[512];
	long long t0 = (long long)time(NULL) * 1000;
	struct th_resp r;
	const char *strict[] = {"--strict-v1", NULL};
	struct box b;

	mkdir_in(fixture.root, "sub");
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000,"
		 "\"cwd\":\"sub\",\"env\":{\"KEY\":\"s3cr3t\"},"
		 "\"flowControl\":true}",
		 n);
	start_job(json, a);
	start_job("{\"command\":[\"sh\",\"-c\",\"exit 3\"],\"timeoutMs\":"
		  "30000}",
		  c);
	free(poll_until_ended(c, NULL));
	list_on(&fixture, &l);
	ck_assert(l.complete);
	ck_assert_uint_eq(l.n, 2);
	/* oldest first */
	ck_assert_str_eq(l.jobs[0].job_id, a);
	ji = listed(&l, a);
	ck_assert_ptr_nonnull(ji);
	ck_assert_uint_eq(ji->argc, 2);
	ck_assert_str_eq(ji->argv[0], "sleep");
	ck_assert_str_eq(ji->cwd, "sub");
	ck_assert_uint_eq(ji->envc, 1);
	ck_assert_str_eq(ji->env[0], "KEY");
	ck_assert_uint_eq(ji->timeout_ms, 30000);
	ck_assert(ji->flow);
	ck_assert_int_eq(ji->state, PROTO_JOB_RUNNING);
	ck_assert_int_ge(ji->started_ms, t0 - 2000);
	ck_assert_int_le(ji->started_ms, t0 + 60000);
	ji = listed(&l, c);
	ck_assert_ptr_nonnull(ji);
	ck_assert_int_eq(ji->state, PROTO_JOB_EXITED);
	ck_assert_int_eq(ji->exit_code, 3);
	ck_assert(!ji->flow);
	ck_assert_ptr_null(ji->cwd);
	ck_assert_int_ge(ji->ended_ms, ji->started_ms);
	proto_job_list_cleanup(&l);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", a);
	expect("/v1/jobs/cancel", json, 200, "{}");
	list_on(&fixture, &l);
	ji = listed(&l, a);
	ck_assert_ptr_nonnull(ji);
	ck_assert_int_eq(ji->state, PROTO_JOB_CANCELLED);
	proto_job_list_cleanup(&l);

	/* a strict agent has no such route */
	box_start(&b, strict);
	{
		const char *h[] = {b.a.auth, NULL};
		char url[256];

		snprintf(url, sizeof(url), "%s/sandboxfs/v1/jobs", b.a.base);
		th_http("GET", url, h, NULL, 0, &r);
		ck_assert_int_eq(r.status, 404);
		ck_assert_uint_eq(r.body.len, 0);
		th_resp_cleanup(&r);
	}
	box_stop(&b);
}
END_TEST

START_TEST(jobs_running_limit)
{
	const char *extra[] = {"--max-running-jobs", "2", NULL};
	const char *n = needle();
	char ids[2][64], id[64], json[256];
	struct th_resp r;
	struct box b;
	int i;

	box_start(&b, extra);
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	start_on(&b, json, ids[0]);
	start_on(&b, json, ids[1]);
	expect_to(&b, "/v1/jobs/start", json, 429,
		  "JOB_LIMIT_REACHED: Job limit reached: the sandbox runs 2 "
		  "jobs, the most it runs at once (sandbox-agent "
		  "--max-running-jobs 2)");
	/* A job that ended counts no more, polled or not. */
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", ids[0]);
	expect_to(&b, "/v1/jobs/cancel", json, 200, "{}");
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	start_on(&b, json, id);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	expect_to(&b, "/v1/jobs/cancel", json, 200, "{}");
	/* Forty quick jobs in a row, none of them polled: each one that
	 * ends makes room (under alien's rule the seventeenth would
	 * fail). */
	for (i = 0; i < 40; i++) {
		long long until = th_now_ms() + 5000;

		for (;;) {
			post_to(&b, "/v1/jobs/start",
				"{\"command\":[\"true\"],\"timeoutMs\":10000}",
				&r);
			if (r.status != 429 || th_now_ms() > until)
				break;
			th_resp_cleanup(&r);
			usleep(10000);
		}
		ck_assert_msg(r.status == 200, "job %d: %ld %s", i, r.status,
			      body(&r));
		th_resp_cleanup(&r);
	}
	/* The one still running, and the finished ones, are all kept. */
	expect_poll_on(&b, ids[1], 200, "{\"running\":true,\"frames\":[]}");
	box_stop(&b);
}
END_TEST

START_TEST(jobs_retention)
{
	const char *count[] = {"--job-retention-count", "2", NULL};
	const char *age[] = {"--job-retention", "1", NULL};
	char ids[3][64], json[256];
	struct th_resp r;
	struct box b;
	int i;

	box_start(&b, count);
	for (i = 0; i < 3; i++) {
		long long until = th_now_ms() + 10000;

		start_on(&b, "{\"command\":[\"true\"],\"timeoutMs\":10000}",
			 ids[i]);
		/* ended (and reaped) before the next one starts */
		for (;;) {
			struct proto_job_poll p;

			poll_on(&b, ids[i], NULL, &p, NULL);
			if (!p.running) {
				proto_job_poll_cleanup(&p);
				break;
			}
			proto_job_poll_cleanup(&p);
			ck_assert(th_now_ms() < until);
			usleep(20000);
		}
		usleep(100000);
	}
	/* The oldest of three finished jobs went; the last two stay. */
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", ids[0]);
	for (i = 0; i < 100; i++) {
		post_to(&b, "/v1/jobs/poll", json, &r);
		if (r.status == 404)
			break;
		th_resp_cleanup(&r);
		usleep(20000);
	}
	ck_assert_int_eq(r.status, 404);
	th_resp_cleanup(&r);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", ids[2]);
	post_to(&b, "/v1/jobs/poll", json, &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);
	box_stop(&b);

	/* Past the retention time a finished job is forgotten. */
	box_start(&b, age);
	start_on(&b, "{\"command\":[\"true\"],\"timeoutMs\":10000}", ids[0]);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", ids[0]);
	post_to(&b, "/v1/jobs/poll", json, &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);
	for (i = 0; i < 150; i++) {
		post_to(&b, "/v1/jobs/poll", json, &r);
		if (r.status == 404)
			break;
		th_resp_cleanup(&r);
		usleep(20000);
	}
	ck_assert_int_eq(r.status, 404);
	th_resp_cleanup(&r);
	box_stop(&b);
}
END_TEST

START_TEST(jobs_spool_outside_root)
{
	struct box b;
	DIR *d;
	struct dirent *e;
	char id[64];
	struct proto_job_poll p;
	int found = 0;
	char *spool = th_tmpdir("spool");
	const char *extra[] = {"--spool-dir", spool, "--job-window", "1M",
			       NULL};

	box_start(&b, extra);
	/* Output past the memory part spills, into a private directory of
	 * the spool, whose files have no name. */
	start_on(&b,
		 "{\"command\":[\"sh\",\"-c\",\"head -c 900000 /dev/zero; "
		 "sleep 30\"],\"timeoutMs\":60000,\"flowControl\":true}",
		 id);
	usleep(800000);
	d = opendir(spool);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		char path[PATH_MAX];
		struct stat st;
		DIR *in;
		struct dirent *f;

		if (strncmp(e->d_name, "sandbox-agent.", 14) != 0)
			continue;
		found++;
		snprintf(path, sizeof(path), "%s/%s", spool, e->d_name);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_uint_eq(st.st_mode & 0777, 0700);
		in = opendir(path);
		ck_assert_ptr_nonnull(in);
		while ((f = readdir(in)) != NULL)
			ck_assert_msg(f->d_name[0] == '.' &&
					      (f->d_name[1] == '\0' ||
					       strcmp(f->d_name, "..") == 0),
				      "a named spool file: %s", f->d_name);
		closedir(in);
	}
	closedir(d);
	ck_assert_int_eq(found, 1);
	poll_on(&b, id, NULL, &p, NULL);
	ck_assert(p.running);
	proto_job_poll_cleanup(&p);
	box_stop(&b);
	/* removed at exit */
	d = opendir(spool);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		ck_assert_msg(strncmp(e->d_name, "sandbox-agent.", 14) != 0,
			      "the spool directory is left: %s", e->d_name);
	closedir(d);
	th_rmtree(spool);
	free(spool);
}
END_TEST

Suite *make_agent_exec_suite(void)
{
	Suite *s = suite_create("agent_exec");
	TCase *tc;

	tc = tcase_create("exec");
	tcase_add_checked_fixture(tc, setup_none, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, exec_echo_exact);
	tcase_add_test(tc, exec_lines_and_seq);
	tcase_add_test(tc, exec_one_counter_both_streams);
	tcase_add_test(tc, exec_long_line_cut);
	tcase_add_test(tc, exec_exit_code_and_signal);
	tcase_add_test(tc, exec_spawn_failed);
	tcase_add_test(tc, exec_program_lookup);
	tcase_add_test(tc, exec_request_invalid_is_a_frame);
	tcase_add_test(tc, exec_environment_cleared);
	tcase_add_test(tc, exec_stdin_and_identity);
	tcase_add_test(tc, exec_working_directory);
	tcase_add_test(tc, exec_working_directory_refused);
	tcase_add_test(tc, exec_timeout_kills_the_group);
	tcase_add_test(tc, exec_client_gone_kills);
	tcase_add_test(tc, exec_timeout_while_client_stalls);
	tcase_add_test(tc, exec_malformed_bodies);
	suite_add_tcase(s, tc);

	tc = tcase_create("cap");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, exec_output_cap);
	suite_add_tcase(s, tc);

	tc = tcase_create("bwrap");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, bwrap_identity_and_view);
	tcase_add_test(tc, bwrap_hides_the_host);
	tcase_add_test(tc, bwrap_timeout_kills_everything);
	suite_add_tcase(s, tc);

	tc = tcase_create("zygote");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, zygote_runs_commands);
	tcase_add_test(tc, zygote_spawn_failures);
	tcase_add_test(tc, zygote_killed_while_idle);
	tcase_add_test(tc, zygote_killed_while_running);
	tcase_add_test(tc, zygote_many_at_once);
	tcase_add_test(tc, zygote_dies_with_the_agent);
	tcase_add_test(tc, zygote_fallback);
	suite_add_tcase(s, tc);

	tc = tcase_create("jobs");
	tcase_add_checked_fixture(tc, setup_none, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, jobs_start_poll_replay);
	tcase_add_test(tc, jobs_running_then_exit_code);
	tcase_add_test(tc, jobs_cancel);
	tcase_add_test(tc, jobs_unknown_job);
	tcase_add_test(tc, jobs_start_refusals);
	tcase_add_test(tc, jobs_failures);
	tcase_add_test(tc, jobs_long_poll);
	tcase_add_test(tc, jobs_long_poll_times_out);
	tcase_add_test(tc, jobs_strict_v1_ignores_wait);
	tcase_add_test(tc, jobs_malformed_bodies);
	tcase_add_test(tc, jobs_keep_frames_bounded);
	tcase_add_test(tc, jobs_max_bytes);
	tcase_add_test(tc, jobs_listing);
	suite_add_tcase(s, tc);

	tc = tcase_create("jobs_strict");
	tcase_add_checked_fixture(tc, setup_strict, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, jobs_limit_and_eviction);
	suite_add_tcase(s, tc);

	tc = tcase_create("jobs_ext");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, jobs_flow_keeps_everything);
	tcase_add_test(tc, jobs_flow_releases_only_acknowledged);
	tcase_add_test(tc, jobs_flow_paused_job_cancel_and_timeout);
	tcase_add_test(tc, jobs_alien_style_still_truncates);
	tcase_add_test(tc, jobs_running_limit);
	tcase_add_test(tc, jobs_retention);
	tcase_add_test(tc, jobs_spool_outside_root);
	suite_add_tcase(s, tc);
	return s;
}
