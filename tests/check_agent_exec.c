/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_exec: POST /v1/exec against a real sandbox-agent on
 * loopback, with exact answers: frames and their seq numbers, output
 * cutting and the cap, timeouts and client hang-ups that must leave no
 * process behind, the command's environment, stdin and working directory,
 * and bubblewrap confinement. The zygote and the jobs have suites of their
 * own (check_agent_zygote.c, check_agent_jobs.c); the agents they run on
 * are agent_helpers.h's boxes.
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

/* ---- exec ---------------------------------------------------------------- */

/* Run the exec request json on a: exactly n frames into fr, the first
 * nout of them stdout frames numbered 0 to nout - 1. */
static void exec_frames(const struct th_agent *a, const char *json, size_t n,
			size_t nout, struct ta_frames *fr)
{
	size_t i;

	ta_exec(a, json, fr);
	ck_assert_uint_eq(fr->n, n);
	for (i = 0; i < nout; i++) {
		ck_assert_int_eq(fr->f[i].type, PROTO_FRAME_STDOUT);
		ck_assert_uint_eq(fr->f[i].seq, i);
	}
}

START_TEST(exec_echo_exact)
{
	ta_expect_post(&ta_fx.a, "/v1/exec",
		       "{\"command\":[\"echo\",\"hello\"],\"timeoutMs\":5000}",
		       200,
		       "{\"t\":\"stdout\",\"seq\":0,\"data\":\"aGVsbG8K\"}\n"
		       "{\"t\":\"exit\",\"code\":0,\"truncated\":false}\n");
	/* The legacy field names run the same command. */
	ta_expect_post(&ta_fx.a, "/v1/exec",
		       "{\"command\":[\"echo\",\"hello\"],\"deadlineMs\":5000,"
		       "\"workingDirectory\":null,\"env\":{},\"unknown\":[1]}",
		       200,
		       "{\"t\":\"stdout\",\"seq\":0,\"data\":\"aGVsbG8K\"}\n"
		       "{\"t\":\"exit\",\"code\":0,\"truncated\":false}\n");
}
END_TEST

START_TEST(exec_lines_and_seq)
{
	struct ta_frames fr;

	exec_frames(&ta_fx.a,
		    "{\"command\":[\"printf\",\"a\\nbb\\nccc\"],\"timeoutMs\":"
		    "5000}",
		    4, 3, &fr);
	/* One frame per line, the newline kept; the unfinished last line
	 * comes at the end of the stream. */
	ck_assert_mem_eq(fr.f[0].data, "a\n", 2);
	ck_assert_uint_eq(fr.f[0].len, 2);
	ck_assert_mem_eq(fr.f[1].data, "bb\n", 3);
	ck_assert_uint_eq(fr.f[2].len, 3);
	ck_assert_mem_eq(fr.f[2].data, "ccc", 3);
	ta_frames_free(&fr);
}
END_TEST

START_TEST(exec_one_counter_both_streams)
{
	struct ta_frames fr;
	bool seen[6] = {false};
	size_t i;

	ta_exec(&ta_fx.a,
		"{\"command\":[\"sh\",\"-c\",\"echo o1; echo e1 >&2; sleep "
		"0.1; "
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
	ck_assert_int_eq(ta_last(&fr)->type, PROTO_FRAME_EXIT);
	ck_assert_int_eq(ta_last(&fr)->code, 7);
	ck_assert(!ta_last(&fr)->truncated);
	ta_frames_free(&fr);
}
END_TEST

START_TEST(exec_long_line_cut)
{
	struct ta_frames fr;
	size_t i;

	/* 200 KiB without a newline: three 64 KiB frames and the rest. */
	exec_frames(&ta_fx.a,
		    "{\"command\":[\"sh\",\"-c\",\"head -c 204800 /dev/zero | "
		    "tr '\\\\000' a\"],\"timeoutMs\":10000}",
		    5, 4, &fr);
	for (i = 0; i < 4; i++) {
		ck_assert_uint_eq(fr.f[i].len, i < 3 ? 65536 : 204800 - 196608);
		ck_assert_int_eq(fr.f[i].data[0], 'a');
		ck_assert_int_eq(fr.f[i].data[fr.f[i].len - 1], 'a');
	}
	ck_assert_int_eq(ta_last(&fr)->code, 0);
	ck_assert(!ta_last(&fr)->truncated);
	ta_frames_free(&fr);
}
END_TEST

START_TEST(exec_exit_code_and_signal)
{
	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[\"sh\",\"-c\",\"exit 42\"],\"timeoutMs\":5000}",
		200, "{\"t\":\"exit\",\"code\":42,\"truncated\":false}\n");
	/* Killed by a signal: no exit status, so -1. */
	ta_expect_post(&ta_fx.a, "/v1/exec",
		       "{\"command\":[\"sh\",\"-c\",\"kill -9 "
		       "$$\"],\"timeoutMs\":5000}",
		       200,
		       "{\"t\":\"exit\",\"code\":-1,\"truncated\":false}\n");
}
END_TEST

START_TEST(exec_spawn_failed)
{
	ta_expect_spawn_failed(
		&ta_fx.a,
		"{\"command\":[\"no-such-program-here\"],\"timeoutMs\":5000}",
		TA_ENOENT);
	ta_expect_spawn_failed(
		&ta_fx.a,
		"{\"command\":[\"/no/such/program\"],\"timeoutMs\":5000}",
		TA_ENOENT);
	/* A directory on PATH is not a program. */
	ta_expect_spawn_failed(&ta_fx.a,
			       "{\"command\":[\"/tmp\"],\"timeoutMs\":5000}",
			       TA_EACCES);
}
END_TEST

START_TEST(exec_program_lookup)
{
	char path[PATH_MAX];

	/* No #! line: run by /bin/sh, as execvp does. */
	snprintf(path, sizeof(path), "%s/bin/tool", ta_fx.root);
	th_write_file(path, "echo from \"$0\" $1\n", 18);
	ck_assert(chmod(path, 0755) == 0);
	ta_expect_output(
		&ta_fx.a,
		"{\"command\":[\"bin/tool\",\"x\"],\"timeoutMs\":5000}",
		"from bin/tool x\n", 0);
	/* A relative PATH entry is taken from the working directory. */
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"tool\",\"y\"],\"timeoutMs\":5000,"
			 "\"env\":{\"PATH\":\"/nonexistent:bin\"}}",
			 "from bin/tool y\n", 0);
	/* Not executable: found but refused. */
	ck_assert(chmod(path, 0644) == 0);
	ta_expect_spawn_failed(&ta_fx.a,
			       "{\"command\":[\"tool\"],\"timeoutMs\":5000,"
			       "\"env\":{\"PATH\":\"bin\"}}",
			       TA_EACCES);
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
	ta_expect_post(&ta_fx.a, "/v1/exec",
		       "{\"command\":[],\"timeoutMs\":5000}", 200, want);
	snprintf(want, sizeof(want),
		 "%sa command must carry a non-zero deadline\"}\n", pre);
	ta_expect_post(&ta_fx.a, "/v1/exec",
		       "{\"command\":[\"true\"],\"timeoutMs\":0}", 200, want);
	snprintf(want, sizeof(want),
		 "%san environment entry contains a NUL byte\"}\n", pre);
	ta_expect_post(&ta_fx.a, "/v1/exec",
		       "{\"command\":[\"true\"],\"timeoutMs\":5,"
		       "\"env\":{\"A\":\"x\\u0000y\"}}",
		       200, want);
	snprintf(want, sizeof(want),
		 "%san environment name must be non-empty and contain no "
		 "'='\"}\n",
		 pre);
	ta_expect_post(&ta_fx.a, "/v1/exec",
		       "{\"command\":[\"true\"],\"timeoutMs\":5,\"env\":{\"A="
		       "B\":\"x\"}"
		       "}",
		       200, want);
}
END_TEST

START_TEST(exec_environment_cleared)
{
	struct th_resp r;

	ta_expect_output(
		&ta_fx.a,
		"{\"command\":[\"env\"],\"timeoutMs\":5000,"
		"\"env\":{\"A\":\"1\",\"B\":\"two words\"}}",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		"/sbin:/bin\nA=1\nB=two words\n",
		0);
	/* The request's PATH replaces the default one, and is searched. */
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"env\"],\"timeoutMs\":5000,"
			 "\"env\":{\"PATH\":\"/usr/bin:/bin\"}}",
			 "PATH=/usr/bin:/bin\n", 0);
	ta_expect_spawn_failed(&ta_fx.a,
			       "{\"command\":[\"env\"],\"timeoutMs\":5000,"
			       "\"env\":{\"PATH\":\"/nonexistent\"}}",
			       TA_ENOENT);
	/* The agent's own environment does not leak. */
	ta_post(&ta_fx.a, "/v1/exec",
		"{\"command\":[\"sh\",\"-c\",\"echo ${HOME-unset} "
		"${SBFS_AGENT-unset}\"],\"timeoutMs\":5000}",
		&r);
	ck_assert(strstr(ta_body(&r), "dW5zZXQgdW5zZXQK") != NULL);
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(exec_stdin_and_identity)
{
	char want[32];

	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"readlink\",\"/proc/self/fd/0\"],"
			 "\"timeoutMs\":5000}",
			 "/dev/null\n", 0);
	/* A reader of stdin gets end of file at once. */
	ta_expect_output(&ta_fx.a, "{\"command\":[\"cat\"],\"timeoutMs\":5000}",
			 "", 0);
	/* Nothing but the three standard descriptors is open. */
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"ls\",\"/proc/self/fd\"],"
			 "\"timeoutMs\":5000}",
			 "0\n1\n2\n3\n", 0);
	snprintf(want, sizeof(want), "%u\n", (unsigned)ta_exec_uid());
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"id\",\"-u\"],\"timeoutMs\":5000}",
			 want, 0);
	/* Its own session: it leads its process group. */
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"sh\",\"-c\",\"test $(ps -o pgid= $$) "
			 "-eq $$ && test $(ps -o sid= $$) -eq $$ && echo "
			 "leader\"],\"timeoutMs\":5000}",
			 "leader\n", 0);
}
END_TEST

START_TEST(exec_working_directory)
{
	char *canon = realpath(ta_fx.root, NULL), path[PATH_MAX];
	char want[PATH_MAX + 8];

	ck_assert_ptr_nonnull(canon);
	snprintf(path, sizeof(path), "%s/sub/dir", ta_fx.root);
	th_write_file(strcat(path, "/f"), "x", 1);
	snprintf(path, sizeof(path), "%s/link", ta_fx.root);
	ck_assert(symlink("sub", path) == 0);

	snprintf(want, sizeof(want), "%s\n", canon);
	ta_expect_output(&ta_fx.a, "{\"command\":[\"pwd\"],\"timeoutMs\":5000}",
			 want, 0);
	ta_expect_output(
		&ta_fx.a,
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"/\"}",
		want, 0);
	snprintf(want, sizeof(want), "%s/sub/dir\n", canon);
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
			 "\"cwd\":\"/sub/./dir/\"}",
			 want, 0);
	/* A symlink that stays beneath the root is followed. */
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
			 "\"cwd\":\"link/dir\"}",
			 want, 0);
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"ls\"],\"timeoutMs\":5000,"
			 "\"workingDirectory\":\"sub/dir\"}",
			 "f\n", 0);
	/* A directory that does not exist passes resolution and fails the
	 * spawn. */
	ta_expect_spawn_failed(
		&ta_fx.a,
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"link/"
		"new\"}",
		TA_ENOENT);
	free(canon);
}
END_TEST

START_TEST(exec_working_directory_refused)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/out", ta_fx.root);
	ck_assert(symlink(ta_fx.parent, path) == 0);
	snprintf(path, sizeof(path), "%s/dangling", ta_fx.root);
	ck_assert(symlink("/nonexistent-sbfs-target", path) == 0);

	ta_expect_post_text(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"../x\"}",
		400,
		"PATH_REFUSED: Path '../x' refused: path traverses "
		"upward");

	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"out\"}",
		400,
		"PATH_REFUSED: Path 'out' refused: path escapes the session "
		"root");
	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
		"\"workingDirectory\":\"out/x\"}",
		400,
		"PATH_REFUSED: Path 'out/x' refused: path escapes the session "
		"root");
	/* Through the same link back into the root is inside. */
	ta_expect_spawn_failed(&ta_fx.a,
			       "{\"command\":[\"pwd\"],\"timeoutMs\":5000,"
			       "\"cwd\":\"out/root/nothing\"}",
			       TA_ENOENT);
	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":\"\"}", 400,
		"PATH_REFUSED: Path '' refused: path is empty");
	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[\"pwd\"],\"timeoutMs\":5000,\"cwd\":"
		"\"dangling\"}",
		400,
		"PATH_REFUSED: Path 'dangling' refused: path could not be "
		"resolved: No such file or directory (os error 2)");
	/* Refused before validation: nothing is streamed. */
	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[],\"timeoutMs\":0,\"cwd\":\"..\"}", 400,
		"PATH_REFUSED: Path '..' refused: path traverses upward");
}
END_TEST

START_TEST(exec_timeout_kills_the_group)
{
	const char *n = ta_needle();
	char json[256];
	long long t0;

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"sleep %s & echo started; "
		 "sleep %s\"],\"timeoutMs\":500}",
		 n, n);
	t0 = th_now_ms();
	ta_expect_post(
		&ta_fx.a, "/v1/exec", json, 200,
		"{\"t\":\"stdout\",\"seq\":0,\"data\":\"c3RhcnRlZAo=\"}\n"
		"{\"t\":\"error\",\"code\":\"timeoutExceeded\",\"message\":"
		"\"exceeded its 500ms timeout\"}\n");
	ck_assert_int_ge(th_now_ms() - t0, 450);
	ck_assert_int_lt(th_now_ms() - t0, 5000);
	/* The background child went with its group. */
	ck_assert_int_eq(ta_procs_gone(n, 2000), 0);
}
END_TEST

START_TEST(exec_client_gone_kills)
{
	const char *h[] = {ta_fx.a.auth, "Content-Type: application/json",
			   NULL};
	static const char json[] =
		"{\"command\":[\"sh\",\"-c\",\"echo hi; sleep 2; touch "
		"marker\"],\"timeoutMs\":30000}";
	char url[256];
	struct th_resp r;

	snprintf(url, sizeof(url), "%s/v1/exec", ta_fx.a.base);
	ck_assert_int_eq(
		th_http_timeout("POST", url, h, json, strlen(json), 700, &r),
		-1);
	th_resp_cleanup(&r);
	usleep(3000000);
	ck_assert(!ta_exists(ta_fx.root, "marker"));
	/* And the agent serves on. */
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"echo\",\"ok\"],\"timeoutMs\":5000}",
			 "ok\n", 0);
}
END_TEST

/* Send a request and read nothing back for stall_ms: the agent's writer
 * is blocked, and the deadline must still kill the command. */
START_TEST(exec_timeout_while_client_stalls)
{
	const char *n = ta_needle();
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
		       ta_fx.a.auth, strlen(json), json);
	sa.sin_port = htons((uint16_t)ta_fx.a.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert(fd >= 0);
	ck_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ck_assert(send(fd, req, (size_t)len, MSG_NOSIGNAL) == len);
	usleep(300000);
	ck_assert_int_ge(ta_count_procs(n), 1);
	/* Killed at the deadline although nobody reads the stream. */
	ck_assert_int_eq(ta_procs_gone(n, 3000), 0);
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
	ta_expect_post(&ta_fx.a, "/v1/exec", "not json", 400,
		       "Failed to parse the request body as JSON");
	ta_expect_post(&ta_fx.a, "/v1/exec", "{\"command\":[\"echo\"", 400,
		       "Failed to parse the request body as JSON");
	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":\"echo hi\",\"timeoutMs\":5}", 422,
		"Failed to deserialize the JSON body into the target type");
	ta_expect_post(
		&ta_fx.a, "/v1/exec", "{\"command\":[\"echo\"]}", 422,
		"Failed to deserialize the JSON body into the target type");
	ta_expect_post(
		&ta_fx.a, "/v1/exec", "[\"echo\"]", 422,
		"Failed to deserialize the JSON body into the target type");
	ta_expect_post(
		&ta_fx.a, "/v1/exec",
		"{\"command\":[\"echo\",1],\"timeoutMs\":5}", 422,
		"Failed to deserialize the JSON body into the target type");
	ta_expect_output(&ta_fx.a,
			 "{\"command\":[\"echo\",\"ok\"],\"timeoutMs\":5000}",
			 "ok\n", 0);
}
END_TEST

START_TEST(exec_output_cap)
{
	const char *extra[] = {"--output-cap", "100", NULL};
	struct ta_frames fr;
	struct ta_box b;
	size_t i;

	ta_box_start(&b, extra);
	/* 30 lines of 11 bytes: nine fit in 100 bytes, the other 21 are
	 * dropped but keep their seq; stderr has its own cap. The command
	 * runs to its end regardless. */
	exec_frames(
		&b.a,
		"{\"command\":[\"sh\",\"-c\",\"i=0; while [ $i -lt 30 ]; do "
		"echo 0123456789; i=$((i+1)); done; echo e >&2; touch "
		"done\"],\"timeoutMs\":10000}",
		11, 9, &fr);
	for (i = 0; i < 9; i++)
		ck_assert_uint_eq(fr.f[i].len, 11);
	ck_assert_int_eq(fr.f[9].type, PROTO_FRAME_STDERR);
	ck_assert_uint_eq(fr.f[9].seq, 30);
	ck_assert_mem_eq(fr.f[9].data, "e\n", 2);
	ck_assert_int_eq(ta_last(&fr)->type, PROTO_FRAME_EXIT);
	ck_assert_int_eq(ta_last(&fr)->code, 0);
	ck_assert(ta_last(&fr)->truncated);
	ck_assert(ta_exists(b.root, "done"));
	ta_frames_free(&fr);
	ta_box_stop(&b);
}
END_TEST

/* ---- bubblewrap ---------------------------------------------------------- */

static bool start_confined(struct ta_box *b)
{
	const char *extra[] = {"--confine", "bwrap", NULL};

	if (!ta_bwrap_usable()) {
		fprintf(stderr, "agent_exec: bubblewrap is not usable here, "
				"confinement test skipped\n");
		return false;
	}
	ta_box_start(b, extra);
	return true;
}

START_TEST(bwrap_identity_and_view)
{
	char want[64], path[PATH_MAX];
	struct ta_box b;

	if (!start_confined(&b))
		return;
	snprintf(path, sizeof(path), "%s/sub/hello.txt", b.root);
	th_write_file(path, "hi\n", 3);
	snprintf(path, sizeof(path), "%s/sub", b.root);
	chmod(path, 0777);
	snprintf(want, sizeof(want), "%u\n/sandbox\nsandbox\nhi\n",
		 (unsigned)ta_exec_uid());
	ta_expect_output(
		&b.a,
		"{\"command\":[\"sh\",\"-c\",\"id -u; pwd; hostname; cat "
		"sub/hello.txt\"],\"timeoutMs\":10000}",
		want, 0);
	ta_expect_output(&b.a,
			 "{\"command\":[\"sh\",\"-c\",\"pwd; ls; touch made\"],"
			 "\"timeoutMs\":10000,\"cwd\":\"sub\"}",
			 "/sandbox/sub\nhello.txt\n", 0);
	/* What the command writes is in the root. */
	ck_assert(ta_exists(b.root, "sub/made"));
	/* The environment is still PATH and the request's, plus the PWD
	 * that bubblewrap sets when it changes directory. */
	ta_expect_output(
		&b.a,
		"{\"command\":[\"env\"],\"timeoutMs\":10000,"
		"\"env\":{\"A\":\"1\"},\"cwd\":\"sub\"}",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		"/sbin:/bin\nA=1\nPWD=/sandbox/sub\n",
		0);
	ta_box_stop(&b);
}
END_TEST

START_TEST(bwrap_hides_the_host)
{
	char json[1024], path[PATH_MAX];
	struct ta_frames fr;
	struct ta_box b;

	if (!start_confined(&b))
		return;
	snprintf(path, sizeof(path), "%s/secret", b.parent);
	th_write_file(path, "s", 1);
	chmod(path, 0644);

	/* Not the credential... */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"cat\",\"%s\"],\"timeoutMs\":10000}",
		 b.a.token_file);
	ta_exec(&b.a, json, &fr);
	ck_assert_int_eq(ta_last(&fr)->code, 1);
	ck_assert_ptr_null(fr.out.data);
	ck_assert_ptr_nonnull(strstr(fr.err.data, "No such file"));
	ta_frames_free(&fr);
	/* ...nor the directory above the root, by either name... */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"cat\",\"%s/secret\"],\"timeoutMs\":10000}",
		 b.parent);
	ta_exec(&b.a, json, &fr);
	ck_assert_int_eq(ta_last(&fr)->code, 1);
	ck_assert_ptr_null(fr.out.data);
	ta_frames_free(&fr);
	ta_exec(&b.a,
		"{\"command\":[\"ls\",\"-a\",\"..\"],\"timeoutMs\":10000}",
		&fr);
	ck_assert_int_eq(ta_last(&fr)->code, 0);
	ck_assert_ptr_nonnull(strstr(fr.out.data, "\nsandbox\n"));
	ck_assert_ptr_nonnull(strstr(fr.out.data, "\nusr\n"));
	ck_assert_ptr_null(strstr(fr.out.data, "secret"));
	ck_assert_ptr_null(strstr(fr.out.data, "token"));
	ta_frames_free(&fr);
	/* ...nor the rest of the host. */
	ta_expect_output(
		&b.a,
		"{\"command\":[\"sh\",\"-c\",\"for d in /root /home /var "
		"/work /run /opt /srv /mnt; do test -e $d && echo $d; "
		"done; ls /tmp | wc -l\"],\"timeoutMs\":10000}",
		"0\n", 0);
	/* The system is read-only. */
	ta_expect_output(&b.a,
			 "{\"command\":[\"sh\",\"-c\",\"touch /usr/x /etc/x "
			 "2>/dev/null; echo $?\"],\"timeoutMs\":10000}",
			 "1\n", 0);
	ta_box_stop(&b);
}
END_TEST

START_TEST(bwrap_timeout_kills_everything)
{
	const char *n1, *n2;
	struct ta_frames fr;
	char json[512];
	struct ta_box b;

	if (!start_confined(&b))
		return;
	n1 = ta_needle();
	n2 = ta_needle();
	/* One child in the group, one that left it with setsid. */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"sleep %s & setsid sleep %s & "
		 "sleep %s\"],\"timeoutMs\":700}",
		 n1, n2, n1);
	ta_exec(&b.a, json, &fr);
	ck_assert_int_eq(ta_last(&fr)->type, PROTO_FRAME_ERROR);
	ck_assert_str_eq(ta_last(&fr)->err_code, "timeoutExceeded");
	ck_assert_str_eq(ta_last(&fr)->err_message,
			 "exceeded its 700ms timeout");
	ta_frames_free(&fr);
	ck_assert_int_eq(ta_procs_gone(n1, 3000), 0);
	ck_assert_int_eq(ta_procs_gone(n2, 3000), 0);
	/* A killed command reaches us as bubblewrap's exit status. */
	ta_expect_output(&b.a,
			 "{\"command\":[\"sh\",\"-c\",\"kill -9 $$\"],"
			 "\"timeoutMs\":10000}",
			 "", 137);
	/* A missing program is found missing before bubblewrap runs, in
	 * the view the command would have had. */
	ta_expect_spawn_failed(
		&b.a, "{\"command\":[\"no-such-program\"],\"timeoutMs\":10000}",
		TA_ENOENT);
	ta_expect_spawn_failed(&b.a,
			       "{\"command\":[\"/tmp/x\"],\"timeoutMs\":10000,"
			       "\"env\":{\"PATH\":\"/sandbox\"}}",
			       TA_ENOENT);
	ta_box_stop(&b);
}
END_TEST

void agent_exec_cases(Suite *s)
{
	TCASE_TABLE(s, "exec", ta_setup, ta_teardown, 60, exec_echo_exact,
		    exec_lines_and_seq, exec_one_counter_both_streams,
		    exec_long_line_cut, exec_exit_code_and_signal,
		    exec_spawn_failed, exec_program_lookup,
		    exec_request_invalid_is_a_frame, exec_environment_cleared,
		    exec_stdin_and_identity, exec_working_directory,
		    exec_working_directory_refused,
		    exec_timeout_kills_the_group, exec_client_gone_kills,
		    exec_timeout_while_client_stalls, exec_malformed_bodies);
	TCASE_TABLE(s, "cap", NULL, NULL, 60, exec_output_cap);
	TCASE_TABLE(s, "bwrap", NULL, NULL, 60, bwrap_identity_and_view,
		    bwrap_hides_the_host, bwrap_timeout_kills_everything);
}
