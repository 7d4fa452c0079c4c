/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_http: sandbox-agent's HTTP framing (limits before the body,
 * ambiguous framing, chunked bodies, keep-alive), its connections (the
 * limit and the deadlines against slow clients), the per-boot credential
 * file, and the command line's refusals and files, against a real agent.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/b64.h"
#include "common/buf.h"
#include "common/fdio.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/token.h"
#include "tests/check_suites.h"
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"

#define TOO_LARGE "Failed to buffer the request body: length limit exceeded"

/* ---- HTTP framing ---------------------------------------------------------- */

/* Send req on a fresh connection; the answer (until the server closes or
 * timeout_ms) in out. */
static void raw(const char *req, size_t n, struct buf *out, int timeout_ms)
{
	buf_init(out, 0);
	ck_assert_int_ge(th_raw(ta_ag.port, req, n, out, timeout_ms), 0);
}

/* The answer in out must begin with the status line of code. */
static void assert_status(const struct buf *out, const char *code)
{
	char want[32];

	snprintf(want, sizeof(want), "HTTP/1.1 %s ", code);
	ck_assert_msg(
		out->len > 0 && strncmp(out->data, want, strlen(want)) == 0,
		"wanted %s: %s", code, out->data ? out->data : "(nothing)");
}

/* Send "LINE HTTP/1.1" with Host and the credential, more header lines
 * (each ending in CRLF), an empty line and rest (a body, more requests);
 * the answer in out, whose status must be code (NULL: not checked). */
static void raw_auth(const char *line, const char *headers, const char *rest,
		     const char *code, struct buf *out, int timeout_ms)
{
	struct buf req = BUF_INIT(0);

	ck_assert_int_eq(buf_printf(&req,
				    "%s HTTP/1.1\r\nHost: x\r\n%s\r\n%s\r\n%s",
				    line, ta_ag.auth, headers, rest),
			 0);
	raw(req.data, req.len, out, timeout_ms);
	buf_cleanup(&req);
	if (code != NULL)
		assert_status(out, code);
}

#define CT_JSON "Content-Type: application/json\r\n"
#define CHUNKED "Transfer-Encoding: chunked\r\nConnection: close\r\n"

START_TEST(http_declared_length_over_limit)
{
	long long t0 = th_now_ms();
	struct buf out;

	/* Headers only: the 413 must come without the body being sent. */
	raw_auth("PUT /v1/files", CT_JSON "Content-Length: 44743337\r\n", "",
		 "413", &out, 5000);
	ck_assert(th_now_ms() - t0 < 4000);
	ck_assert_ptr_nonnull(strstr(
		out.data, "Content-Type: text/plain; charset=utf-8\r\n"));
	ck_assert_ptr_nonnull(strstr(out.data, "\r\n\r\n" TOO_LARGE));
	buf_cleanup(&out);
	/* A small route's limit is 64 KiB; a GET route takes no body. */
	raw_auth("POST /v1/mkdir", CT_JSON "Content-Length: 65537\r\n", "",
		 "413", &out, 5000);
	buf_cleanup(&out);
	raw_auth("GET /v1/files?path=a", "Content-Length: 10\r\n", "", "413",
		 &out, 5000);
	buf_cleanup(&out);
	/* The limit itself is fine (and is then waited for). */
	raw_auth("PUT /v1/files", CT_JSON "Content-Length: 44743336\r\n", "",
		 NULL, &out, 500);
	ck_assert_uint_eq(out.len, 0);
	buf_cleanup(&out);
	ta_expect_alive(&ta_ag);
}
END_TEST

/* A body whose end two readers could place differently is refused with
 * 400 before anything else is judged, and the connection is closed. */
START_TEST(http_ambiguous_framing)
{
	static const char *const framings[] = {
		"Content-Length: 12\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 11\r\n",
		"Content-Length: 12\r\nContent-Length: 11\r\n",
		"Content-Length: 12\r\nContent-Length: 12\r\n",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
	};
	/* Either reading of it makes a mkdir, which must not happen. */
	static const char body[] = "c\r\n{\"path\":\"x\"}\r\n0\r\n\r\n";
	struct buf out;
	char req[1024], *made = ta_join(ta_ag.root, "x");
	struct stat st;
	size_t i;
	int n;

	for (i = 0; i < sizeof(framings) / sizeof(framings[0]); i++) {
		for (int with_cred = 0; with_cred < 2; with_cred++) {
			n = snprintf(req, sizeof(req),
				     "POST /v1/mkdir HTTP/1.1\r\nHost: x\r\n"
				     "%s%s"
				     "Content-Type: application/json\r\n%s\r\n"
				     "%s",
				     with_cred ? ta_ag.auth : "",
				     with_cred ? "\r\n" : "", framings[i],
				     body);
			raw(req, (size_t)n, &out, 5000);
			ck_assert_msg(out.len > 0 &&
					      strncmp(out.data, "HTTP/1.1 400 ",
						      13) == 0,
				      "%s: %s", framings[i],
				      out.data ? out.data : "(nothing)");
			ck_assert_msg(strstr(out.data,
					     "Invalid request framing") != NULL,
				      "%s: %s", framings[i], out.data);
			buf_cleanup(&out);
			ck_assert_int_eq(lstat(made, &st), -1);
		}
	}
	/* A list for a length is no length. */
	raw_auth("POST /v1/mkdir", CT_JSON "Content-Length: 14, 14\r\n",
		 "{\"path\":\"x\"}\r\n", "400", &out, 5000);
	buf_cleanup(&out);
	ck_assert_int_eq(lstat(made, &st), -1);
	free(made);
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(http_chunked_over_limit)
{
	struct buf body = BUF_INIT(0), out;
	char chunk[4097];
	int i;

	memset(chunk, ' ', sizeof(chunk) - 1);
	chunk[sizeof(chunk) - 1] = '\0';
	/* 100 KiB of chunks against the 64 KiB limit. */
	for (i = 0; i < 25; i++)
		ck_assert_int_eq(buf_printf(&body, "1000\r\n%s\r\n", chunk), 0);
	ck_assert_int_eq(buf_append_str(&body, "0\r\n\r\n"), 0);
	raw_auth("POST /v1/mkdir", CT_JSON CHUNKED, body.data, "413", &out,
		 5000);
	ck_assert_ptr_nonnull(strstr(out.data, "\r\n\r\n" TOO_LARGE));
	buf_cleanup(&out);
	buf_cleanup(&body);
	/* A chunked body within the limit works. */
	raw_auth("POST /v1/mkdir", CT_JSON CHUNKED,
		 "5\r\n{\"pat\r\na\r\nh\":\"chunk\"\r\n1\r\n}\r\n0\r\n\r\n",
		 "204", &out, 5000);
	buf_cleanup(&out);
	{
		char *p = ta_join(ta_ag.root, "chunk");

		ck_assert_int_eq(access(p, F_OK), 0);
		free(p);
	}
	ta_expect_alive(&ta_ag);
}
END_TEST

static int count(const char *hay, const char *needle)
{
	int n = 0;

	while (hay != NULL && (hay = strstr(hay, needle)) != NULL) {
		n++;
		hay++;
	}
	return n;
}

START_TEST(http_keep_alive)
{
	struct buf out;
	char req[1024];
	int n;

	ta_fixture(&ta_ag, "k", "keep", 4);
	/* Two requests on one connection, the second closing it. */
	raw_auth("GET /v1/files?path=k", "",
		 "GET /v1/health HTTP/1.1\r\nHost: x\r\n"
		 "Connection: close\r\n\r\n",
		 NULL, &out, 5000);
	ck_assert_int_eq(count(out.data, "HTTP/1.1 200 OK\r\n"), 2);
	ck_assert_ptr_nonnull(strstr(out.data,
				     "{\"contentsBase64\":\"a2VlcA==\"}"
				     "HTTP/1.1 200"));
	buf_cleanup(&out);
	/* A refusal with a small body keeps the connection too. */
	n = snprintf(req, sizeof(req),
		     "POST /v1/mkdir HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: application/json\r\nContent-Length: 12\r\n"
		     "\r\n{\"path\":\"z\"}"
		     "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
		     "GET /v1/health HTTP/1.1\r\nHost: x\r\n"
		     "Connection: close\r\n\r\n");
	raw(req, (size_t)n, &out, 5000);
	assert_status(&out, "401");
	ck_assert_int_eq(count(out.data, "HTTP/1.1 404 "), 1);
	ck_assert_int_eq(count(out.data, "HTTP/1.1 200 OK\r\n"), 1);
	buf_cleanup(&out);
	ta_expect_alive(&ta_ag);
}
END_TEST

/* ---- the credential file ---------------------------------------------------- */

START_TEST(credential_file)
{
	struct stat st;
	char *t;
	size_t n;

	ck_assert_int_eq(stat(ta_ag.token_file, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	t = th_read_file(ta_ag.token_file, &n);
	ck_assert_uint_eq(n, 44);
	ck_assert_ptr_null(strchr(t, '\n'));
	ck_assert(token_valid(t, n));
	free(t);
}
END_TEST

START_TEST(credential_never_shown)
{
	const char *args[] = {"--log-level", "debug", NULL};
	char *dir = th_tmpdir("agent-log"), *log, *text, path[128];
	struct th_agent a2;
	size_t n;

	ck_assert(asprintf(&log, "%s/stderr", dir) > 0);
	th_agent_start_logged(&a2, args, true, log);
	/* Traffic that a careless log would echo the header of. */
	{
		const char *h[] = {a2.auth, NULL};
		struct th_resp r;
		char url[128];

		snprintf(url, sizeof(url), "%s/v1/files?path=x", a2.base);
		th_http("GET", url, h, NULL, 0, &r);
		th_resp_cleanup(&r);
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)a2.pid);
	text = th_read_file(path, &n);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_null(memmem(text, n, a2.token, 44));
	free(text);
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)a2.pid);
	text = th_read_file(path, &n);
	if (text != NULL)
		ck_assert_ptr_null(memmem(text, n, a2.token, 44));
	free(text);
	ck_assert_int_eq(th_agent_terminate(&a2), 0);
	text = th_read_file(log, &n);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text, "GET /v1/files 404"));
	ck_assert_ptr_null(memmem(text, n, a2.token, 44));
	free(text);
	th_agent_stop(&a2);
	th_rmtree(dir);
	free(dir);
	free(log);
}
END_TEST

START_TEST(credential_parent_made)
{
	char *dir = th_tmpdir("agent-tok"), *tok, *root, *portf, *text;
	const char *argv[16];
	long long deadline;
	struct stat st;
	int status;
	pid_t pid;

	ck_assert(asprintf(&root, "%s/root", dir) > 0);
	ck_assert(asprintf(&tok, "%s/a/b/token", dir) > 0);
	ck_assert(asprintf(&portf, "%s/port", dir) > 0);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	argv[0] = th_program("sandbox-agent");
	argv[1] = "--root";
	argv[2] = root;
	argv[3] = "--token-file";
	argv[4] = tok;
	argv[5] = "--port";
	argv[6] = "0";
	argv[7] = "--port-file";
	argv[8] = portf;
	argv[9] = "--confine";
	argv[10] = "none";
	argv[11] = NULL;
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = th_now_ms() + 10000;
	while ((text = th_read_file(portf, NULL)) == NULL) {
		ck_assert(th_now_ms() < deadline);
		usleep(10000);
	}
	free(text);
	ck_assert_int_eq(lstat(tok, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(st.st_size, 44);
	*strrchr(tok, '/') = '\0';
	ck_assert_int_eq(stat(tok, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	*strrchr(tok, '/') = '\0';
	ck_assert_int_eq(stat(tok, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The port file goes with the agent. */
	ck_assert_int_eq(access(portf, F_OK), -1);
	th_rmtree(dir);
	free(dir);
	free(root);
	free(tok);
	free(portf);
}
END_TEST

/* ---- the command line -------------------------------------------------------- */

START_TEST(config_errors)
{
	char *dir = th_tmpdir("agent-cfg"), *root, *file, *tok, *err, want[64];
	unsigned port;
	int status, s;

	ck_assert(asprintf(&root, "%s/root", dir) > 0);
	ck_assert(asprintf(&file, "%s/file", dir) > 0);
	ck_assert(asprintf(&tok, "%s/token", dir) > 0);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	th_write_file(file, "x", 1);
	unsetenv("ALIEN_SANDBOX_ROOT");

	{
		const char *args[] = {"--token-file", tok, NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_str_eq(err, "sandbox-agent: --root (or "
				      "ALIEN_SANDBOX_ROOT) is required\n");
		free(err);
	}
	{
		const char *args[] = {"--root", file, "--token-file", tok,
				      NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_ptr_nonnull(strstr(err, "is not a directory"));
		free(err);
	}
	{
		const char *args[] = {"--root", root, "--bogus", NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		free(err);
	}
	{
		const char *args[] = {"--root",	      root, "--port", "70000",
				      "--token-file", tok,  NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_str_eq(err,
				 "sandbox-agent: --port: bad port '70000'\n");
		free(err);
	}
	/* A port in use. */
	s = th_listen_loopback(1, &port);
	ck_assert_int_ge(s, 0);
	snprintf(want, sizeof(want), "%u", port);
	{
		/* Exactly one line: nothing else is logged at warn. */
		const char *args[] = {
			"--root",    root,   "--listen",     "127.0.0.1",
			"--port",    want,   "--token-file", tok,
			"--confine", "none", "--log-level",  "warn",
			NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		snprintf(want, sizeof(want),
			 "sandbox-agent: port %u is in use\n", port);
		ck_assert_str_eq(err, want);
		free(err);
	}
	close(s);
	if (geteuid() == 0) {
		const char *args[] = {"--root", root,		"--exec-user",
				      "0:0",	"--token-file", tok,
				      NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_str_eq(err, "sandbox-agent: refusing to run "
				      "commands as uid or gid 0\n");
		free(err);
	}
	{
		const char *args[] = {"--help", NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ck_assert_ptr_nonnull(strstr(err, "--root DIR"));
		free(err);
	}
	{
		const char *args[] = {"--version", NULL};

		status = ta_run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ck_assert_str_eq(err, "sandbox-agent " PACKAGE_VERSION
				      " (agent protocol v1)\n");
		free(err);
	}
	th_rmtree(dir);
	free(dir);
	free(root);
	free(file);
	free(tok);
}
END_TEST

START_TEST(config_files_and_exit)
{
	char *portf, *pidf, *text;
	const char *args[] = {"--pid-file", NULL, NULL};
	struct th_agent a2;
	int status;

	/* A pid file, the port file in decimal, exit 0 on SIGTERM. */
	text = th_tmpdir("agent-pid");
	ck_assert(asprintf(&pidf, "%s/pid", text) > 0);
	args[1] = pidf;
	th_agent_start(&a2, args, false);
	ck_assert(asprintf(&portf, "%s/port", a2.dir) > 0);
	{
		char *p = th_read_file(portf, NULL), want[32];

		snprintf(want, sizeof(want), "%u\n", a2.port);
		ck_assert_str_eq(p, want);
		free(p);
		p = th_read_file(pidf, NULL);
		snprintf(want, sizeof(want), "%d\n", (int)a2.pid);
		ck_assert_str_eq(p, want);
		free(p);
	}
	status = th_agent_terminate(&a2);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(access(pidf, F_OK), -1);
	th_agent_stop(&a2);
	th_rmtree(text);
	free(text);
	free(pidf);
	free(portf);
}
END_TEST

/* ---- connections ------------------------------------------------------------ */

/* A connection to the agent that has sent part of a request line and
 * headers, non-blocking (-1 when the agent refused it). */
static int slow_client(unsigned port)
{
	static const char start[] = "GET /v1/health HTTP/1.1\r\nHost: x\r\n";
	int fd = th_connect_loopback(port);

	if (fd < 0)
		return -1;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	if (send(fd, start, sizeof(start) - 1, MSG_NOSIGNAL) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One more header byte on each connection still open; how many are. */
static int trickle(int *fds, int n)
{
	int i, open = 0;
	char c;

	for (i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		/* A connection the agent closed reads as its end. */
		if (recv(fds[i], &c, 1, MSG_DONTWAIT) == 0 ||
		    send(fds[i], "X", 1, MSG_NOSIGNAL) < 0) {
			close(fds[i]);
			fds[i] = -1;
			continue;
		}
		open++;
	}
	return open;
}

static void raise_nofile(rlim_t want)
{
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur >= want)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		ck_abort_msg("RLIMIT_NOFILE's hard limit %lu is below %lu",
			     (unsigned long)rl.rlim_max, (unsigned long)want);
	rl.rlim_cur = want;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/*
 * Slowloris: more connections than the agent serves at once, each
 * trickling a header byte a second, must not keep a real client out:
 * its health request is answered at once, every time, while they go on.
 */
START_TEST(conn_slowloris_health_answers)
{
	enum { SLOW = 1100 };
	static int fds[SLOW];
	long long t0, worst = 0, end;
	struct th_resp r;
	char url[128];
	int i, opened = 0;

	raise_nofile(SLOW + 256);
	th_agent_start(&ta_ag, NULL, false);
	for (i = 0; i < SLOW; i++) {
		fds[i] = slow_client(ta_ag.port);
		opened += fds[i] >= 0;
	}
	ck_assert_int_gt(opened, 1024);
	snprintf(url, sizeof(url), "%s/v1/health", ta_ag.base);
	end = th_now_ms() + 8000;
	while (th_now_ms() < end) {
		trickle(fds, SLOW);
		t0 = th_now_ms();
		ck_assert_msg(th_http_timeout("GET", url, NULL, NULL, 0, 5000,
					      &r) == 0,
			      "health did not answer within 5 s among %d slow "
			      "connections",
			      SLOW);
		ck_assert_int_eq(r.status, 200);
		th_resp_cleanup(&r);
		if (th_now_ms() - t0 > worst)
			worst = th_now_ms() - t0;
		usleep(500 * 1000);
	}
	/* Well within a client's deadline (the mount's is 60 s). */
	ck_assert_msg(worst < 2000, "health took %lld ms", worst);
	for (i = 0; i < SLOW; i++)
		fdio_close(fds[i]);
	th_agent_stop(&ta_ag);
}
END_TEST

/* A client that trickles its request, or never sends one, is closed at
 * the agent's deadlines; one that is quick is not. */
START_TEST(conn_deadlines_close_slow_clients)
{
	static const char *const args[] = {"--request-timeout", "2",
					   "--idle-timeout", "3", NULL};
	enum { N = 8 };
	int fds[N], idle, i, open;
	long long end;
	char c;

	th_agent_start(&ta_ag, args, false);
	for (i = 0; i < N; i++)
		fds[i] = slow_client(ta_ag.port);
	idle = th_connect_loopback(ta_ag.port);
	ck_assert_int_ge(idle, 0);
	/* Within the deadline they are all served still. */
	usleep(500 * 1000);
	ck_assert_int_eq(trickle(fds, N), N);
	/* A byte every half second keeps no connection past 2 s (and the
	 * 1 s the agent looks at them). */
	end = th_now_ms() + 6000;
	do {
		usleep(500 * 1000);
		open = trickle(fds, N);
	} while (open > 0 && th_now_ms() < end);
	ck_assert_msg(open == 0, "%d trickling connections still open", open);
	/* The one that never sent anything went at its idle deadline. */
	ck_assert_int_eq(recv(idle, &c, 1, 0), 0);
	close(idle);
	ta_expect_alive(&ta_ag);
	th_agent_stop(&ta_ag);
}
END_TEST

void agent_http_cases(Suite *s)
{
	TCASE_TABLE(s, "http", ta_agent_setup, ta_agent_teardown, 60,
		    http_declared_length_over_limit, http_chunked_over_limit,
		    http_keep_alive, http_ambiguous_framing);
	TCASE_TABLE(s, "connections", NULL, NULL, 120,
		    conn_slowloris_health_answers,
		    conn_deadlines_close_slow_clients);
	TCASE_TABLE(s, "credential", ta_agent_setup_unactivated,
		    ta_agent_teardown, 60, credential_file,
		    credential_never_shown, credential_parent_made);
	TCASE_TABLE(s, "config", NULL, NULL, 60, config_errors,
		    config_files_and_exit);
}
