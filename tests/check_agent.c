/* SPDX-License-Identifier: MIT */
/*
 * Wire tests of sandbox-agent's server, health and activation, and the v1
 * file routes, against a real agent on loopback: for each route, status
 * and refusal, the exact answer (status, Content-Type, body). Also the
 * credential file, the command line's refusals and the HTTP framing
 * (limits before the body, chunked bodies, keep-alive). The file
 * extension and the command routes have their own suites.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
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
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/token.h"
#include "tests/check_suites.h"
#include "tests/helpers.h"

#define JSON "Content-Type: application/json"
#define TEXT "text/plain; charset=utf-8"
#define NOT_ACTIVATED                                                     \
	"AGENT_NOT_ACTIVATED: the agent has not been activated for this " \
	"boot"
#define TOO_LARGE "Failed to buffer the request body: length limit exceeded"

static struct th_agent ag;

/* ---- plumbing ------------------------------------------------------------ */

/*
 * One request; checks status, Content-Type (NULL: there must be none) and
 * body (NULL: not checked). headers: NULL-terminated.
 */
static void expect(const char *method, const char *path,
		   const char *const *headers, const char *body, long status,
		   const char *ctype, const char *want)
{
	struct th_resp r;
	char url[8192];
	char *ct;

	snprintf(url, sizeof(url), "%s%s", ag.base, path);
	th_http(method, url, headers, body, body ? strlen(body) : 0, &r);
	ct = th_resp_header(&r, "Content-Type");
	ck_assert_msg(r.status == status, "%s %s: status %ld, want %ld (%s)",
		      method, path, r.status, status,
		      r.body.data ? r.body.data : "");
	if (ctype == NULL)
		ck_assert_msg(ct == NULL, "%s %s: Content-Type %s", method,
			      path, ct);
	else
		ck_assert_msg(ct != NULL && strcmp(ct, ctype) == 0,
			      "%s %s: Content-Type %s, want %s", method, path,
			      ct ? ct : "(none)", ctype);
	if (want != NULL)
		ck_assert_msg(strcmp(r.body.data ? r.body.data : "", want) == 0,
			      "%s %s: body '%s', want '%s'", method, path,
			      r.body.data ? r.body.data : "", want);
	free(ct);
	th_resp_cleanup(&r);
}

/* The same with the credential and (when body) a JSON content type. */
static void expect_auth(const char *method, const char *path, const char *body,
			long status, const char *ctype, const char *want)
{
	const char *h[] = {ag.auth, JSON, NULL};

	expect(method, path, h, body, status, ctype, want);
}

static void expect_alive(void)
{
	struct th_resp r;
	char url[128];

	snprintf(url, sizeof(url), "%s/v1/health", ag.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	th_resp_cleanup(&r);
}

static char *root_path(const char *rel)
{
	char *p;

	ck_assert(asprintf(&p, "%s/%s", ag.root, rel) > 0);
	return p;
}

/* A fixture file under the root, owned by the exec user. */
static void fixture(const char *rel, const void *data, size_t n)
{
	char *p = root_path(rel);

	th_write_file(p, data, n);
	th_give_to_exec_user(ag.root);
	free(p);
}

static void fixture_dir(const char *rel)
{
	char *p = root_path(rel);

	ck_assert_int_eq(mkdir(p, 0755), 0);
	th_give_to_exec_user(ag.root);
	free(p);
}

static void fixture_symlink(const char *target, const char *rel)
{
	char *p = root_path(rel);

	ck_assert_int_eq(symlink(target, p), 0);
	th_give_to_exec_user(ag.root);
	free(p);
}

static char *file_contents(const char *rel, size_t *len)
{
	char *p = root_path(rel);
	char *d = th_read_file(p, len);

	free(p);
	return d;
}

static void start_activated(void)
{
	th_agent_start(&ag, NULL, true);
	th_give_to_exec_user(ag.root);
}

static void start_unactivated(void)
{
	th_agent_start(&ag, NULL, false);
	th_give_to_exec_user(ag.root);
}

static void stop_agent(void)
{
	th_agent_stop(&ag);
}

/* Run the agent with argv (NULL-terminated, without the program) and
 * return its exit status, its stderr in *err (heap). */
static int run_agent(const char *const *args, char **err)
{
	const char *argv[32];
	char *dir = th_tmpdir("agent-run"), *log;
	size_t i, n = 0;
	int status = -1, fd;
	long long deadline = th_now_ms() + 10000;
	pid_t pid;

	ck_assert(asprintf(&log, "%s/stderr", dir) > 0);
	argv[n++] = th_program("sandbox-agent");
	for (i = 0; args[i] != NULL && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0 || dup2(fd, 1) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (th_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			ck_abort_msg("sandbox-agent did not exit");
		}
		usleep(10000);
	}
	*err = th_read_file(log, NULL);
	th_rmtree(dir);
	free(dir);
	free(log);
	return status;
}

/* ---- health and activation ------------------------------------------------ */

START_TEST(health_before_activation)
{
	struct proto_health h;
	struct th_resp r;
	char url[128];

	snprintf(url, sizeof(url), "%s/v1/health?version=1", ag.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h), 0);
	ck_assert_int_eq(h.protocol_version, 1);
	ck_assert_str_eq(h.status, "awaiting-network-verification");
	ck_assert_str_eq(h.image_status, "none");
	ck_assert_int_eq(strlen(h.boot_id), 36);
	ck_assert_int_eq(h.ext_files, 4);
	ck_assert_uint_eq(h.ext_max_write, 16777216);
	/* Whom the file routes act as: the exec identity when the agent
	 * drops privileges, else its own. */
	ck_assert(h.ext_has_ids);
	ck_assert_int_eq(h.ext_reply_cache, 1);
	ck_assert_int_eq(h.ext_jobs, 1);
	ck_assert_uint_eq(h.ext_max_running, 64);
	ck_assert_int_eq(h.ext_events, 1);
	ck_assert(!proto_health_ready(&h));
	th_resp_cleanup(&r);
	/* The exact body, field by field. */
	{
		char want[512];

		snprintf(want, sizeof(want),
			 "{\"protocolVersion\":1,\"bootId\":\"%s\",\"status\":"
			 "\"awaiting-network-verification\",\"imageCommand\":{"
			 "\"status\":\"none\"},\"extensions\":{\"files\":4,"
			 "\"maxWrite\":16777216,\"uid\":%u,\"gid\":%u%s,"
			 "\"replyCache\":1,\"jobs\":1,\"maxRunningJobs\":64,"
			 "\"events\":1}}",
			 h.boot_id, (unsigned)h.ext_uid, (unsigned)h.ext_gid,
			 h.ext_owner_access ? ",\"ownerAccess\":true" : "");
		expect("GET", "/v1/health", NULL, NULL, 200, "application/json",
		       want);
	}
}
END_TEST

START_TEST(health_after_activation)
{
	const char *h[] = {ag.auth, NULL};
	struct proto_health before, after;
	struct th_resp r;
	char url[128];

	snprintf(url, sizeof(url), "%s/v1/health", ag.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &before),
			 0);
	th_resp_cleanup(&r);
	expect("POST", "/v1/activate", h, NULL, 204, NULL, "");
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &after),
			 0);
	th_resp_cleanup(&r);
	ck_assert_str_eq(after.status, "ready");
	ck_assert(proto_health_ready(&after));
	ck_assert_str_eq(after.boot_id, before.boot_id);
	/* Repeating the activation is harmless. */
	expect("POST", "/v1/activate", h, NULL, 204, NULL, "");
	expect("POST", "/v1/activate", h, "{}", 204, NULL, "");
}
END_TEST

START_TEST(health_version_mismatch)
{
	expect("GET", "/v1/health?version=2", NULL, NULL, 400, TEXT,
	       "PROTOCOL_VERSION_MISMATCH: Caller speaks sandbox agent "
	       "protocol v2, this agent speaks v1");
	expect("GET", "/v1/health?version=0", NULL, NULL, 400, TEXT,
	       "PROTOCOL_VERSION_MISMATCH: Caller speaks sandbox agent "
	       "protocol v0, this agent speaks v1");
	expect("GET", "/v1/health?version=x", NULL, NULL, 400, TEXT,
	       "Failed to deserialize query string: version: invalid digit "
	       "found in string");
	expect("GET", "/v1/health?version=1", NULL, NULL, 200,
	       "application/json", NULL);
	expect("HEAD", "/v1/health", NULL, NULL, 200, "application/json", "");
}
END_TEST

START_TEST(health_new_boot_per_start)
{
	struct th_agent other;
	struct proto_health h1, h2;
	struct th_resp r;
	char url[128];

	th_agent_start(&other, NULL, false);
	snprintf(url, sizeof(url), "%s/v1/health", ag.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h1), 0);
	th_resp_cleanup(&r);
	snprintf(url, sizeof(url), "%s/v1/health", other.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h2), 0);
	th_resp_cleanup(&r);
	ck_assert_str_ne(h1.boot_id, h2.boot_id);
	ck_assert_str_ne(ag.token, other.token);
	th_agent_stop(&other);
}
END_TEST

START_TEST(health_strict_v1)
{
	const char *args[] = {"--strict-v1", NULL};
	struct th_agent strict;
	struct th_resp r;
	char url[128];

	th_agent_start(&strict, args, true);
	snprintf(url, sizeof(url), "%s/v1/health", strict.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_null(strstr(r.body.data, "extensions"));
	ck_assert_ptr_nonnull(strstr(r.body.data, "\"status\":\"ready\""));
	th_resp_cleanup(&r);
	/* No extension route: the router's empty 404. */
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/stat?path=x", strict.base);
	{
		const char *h[] = {strict.auth, NULL};

		th_http("GET", url, h, NULL, 0, &r);
	}
	ck_assert_int_eq(r.status, 404);
	ck_assert_uint_eq(r.body.len, 0);
	th_resp_cleanup(&r);
	th_agent_stop(&strict);
}
END_TEST

START_TEST(health_max_write_option)
{
	const char *args[] = {"--ext-max-write", "1M", NULL};
	struct th_agent other;
	struct proto_health h;
	struct th_resp r;
	char url[128];

	th_agent_start(&other, args, false);
	snprintf(url, sizeof(url), "%s/v1/health", other.base);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h), 0);
	ck_assert_uint_eq(h.ext_max_write, 1048576);
	th_resp_cleanup(&r);
	th_agent_stop(&other);
}
END_TEST

/* ---- credential and activation gate --------------------------------------- */

/* Every route that needs the credential, with a body it would accept. */
static const struct {
	const char *method, *path, *body;
} authed[] = {
	{"POST", "/v1/activate", NULL},
	{"POST", "/v1/exec", "{\"command\":[\"true\"],\"timeoutMs\":1000}"},
	{"GET", "/v1/files?path=a", NULL},
	{"PUT", "/v1/files", "{\"path\":\"a\",\"contentsBase64\":\"\"}"},
	{"POST", "/v1/mkdir", "{\"path\":\"a\"}"},
	{"POST", "/v1/jobs/start", "{\"command\":[\"true\"],\"timeoutMs\":1}"},
	{"POST", "/v1/jobs/poll", "{\"jobId\":\"x\",\"sinceSeq\":null}"},
	{"POST", "/v1/jobs/cancel", "{\"jobId\":\"x\"}"},
	{"GET", "/sandboxfs/v1/stat?path=a", NULL},
	{"GET", "/sandboxfs/v1/list?path=", NULL},
	{"GET", "/sandboxfs/v1/read?path=a", NULL},
	{"PUT", "/sandboxfs/v1/write?path=a&offset=0", "x"},
	{"POST", "/sandboxfs/v1/unlink", "{\"path\":\"a\"}"},
};

START_TEST(auth_missing_credential)
{
	char basic[] = "Authorization: Basic dXNlcjpwYXNz";
	const char *none[] = {JSON, NULL};
	const char *wrong_scheme[] = {basic, JSON, NULL};
	size_t i;

	for (i = 0; i < sizeof(authed) / sizeof(authed[0]); i++) {
		expect(authed[i].method, authed[i].path, none, authed[i].body,
		       401, TEXT, "a credential is required");
		expect(authed[i].method, authed[i].path, wrong_scheme,
		       authed[i].body, 401, TEXT, "a credential is required");
	}
	expect_alive();
}
END_TEST

START_TEST(auth_wrong_credential)
{
	char other[TOKEN_CHARS + 1], wrong[96],
		empty[] = "Authorization: Bearer ";
	char prefix[96];
	const char *w[] = {wrong, JSON, NULL};
	const char *e[] = {empty, JSON, NULL};
	const char *p[] = {prefix, JSON, NULL};
	size_t i;

	ck_assert_int_eq(token_generate(other), 0);
	snprintf(wrong, sizeof(wrong), "Authorization: Bearer %s", other);
	/* The right token with one character missing. */
	snprintf(prefix, sizeof(prefix), "Authorization: Bearer %.43s",
		 ag.token);
	for (i = 0; i < sizeof(authed) / sizeof(authed[0]); i++) {
		expect(authed[i].method, authed[i].path, w, authed[i].body, 401,
		       TEXT, "the credential was refused");
		expect(authed[i].method, authed[i].path, e, authed[i].body, 401,
		       TEXT, "the credential was refused");
		expect(authed[i].method, authed[i].path, p, authed[i].body, 401,
		       TEXT, "the credential was refused");
	}
	/* The refusal does not activate, and the right one still works. */
	expect("GET", "/v1/health", NULL, NULL, 200, "application/json", NULL);
	expect_auth("POST", "/v1/activate", NULL, 204, NULL, "");
}
END_TEST

START_TEST(gate_before_activation)
{
	char url[128];
	struct th_resp r;
	size_t i;

	/* Every authenticated route but activate: 503, typed. */
	for (i = 1; i < sizeof(authed) / sizeof(authed[0]); i++)
		expect_auth(authed[i].method, authed[i].path, authed[i].body,
			    503, TEXT, NOT_ACTIVATED);
	/* The credential is checked first. */
	{
		const char *none[] = {JSON, NULL};

		expect("GET", "/v1/files?path=a", none, NULL, 401, TEXT,
		       "a credential is required");
	}
	/* Nothing happened: the gate came before the handler. */
	snprintf(url, sizeof(url), "%s/a", ag.root);
	ck_assert_int_eq(access(url, F_OK), -1);
	expect_auth("POST", "/v1/activate", NULL, 204, NULL, "");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"a\"}", 204, NULL, "");
	ck_assert_int_eq(access(url, F_OK), 0);
	snprintf(url, sizeof(url), "%s/v1/files?path=a", ag.base);
	{
		const char *h[] = {ag.auth, NULL};

		th_http("GET", url, h, NULL, 0, &r);
	}
	ck_assert_int_eq(r.status, 400); /* a directory, not the gate */
	th_resp_cleanup(&r);
}
END_TEST

START_TEST(public_routes)
{
	static const char *const hooks[] = {"ready",  "validate", "run",
					    "resume", "suspend",  "terminate"};
	char path[128];
	size_t i;

	for (i = 0; i < 6; i++) {
		snprintf(path, sizeof(path),
			 "/aws/lambda-microvms/runtime/v1/%s", hooks[i]);
		expect("GET", path, NULL, NULL, 200, NULL, "");
		expect("POST", path, NULL, "{}", 200, NULL, "");
	}
	expect("GET", "/v1/health", NULL, NULL, 200, "application/json", NULL);
}
END_TEST

/* ---- routing -------------------------------------------------------------- */

START_TEST(unknown_route_is_empty_404)
{
	static const char *const paths[] = {
		"/",
		"/v1",
		"/v1/",
		"/v1/health/",
		"/v1/files/x",
		"/v2/health",
		"/v1/FILES",
		"/sandboxfs/v1/nope",
		"/sandboxfs/v1",
		"/aws/lambda-microvms/runtime/v1/other",
	};
	const char *none[] = {NULL};
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		expect("GET", paths[i], none, NULL, 404, NULL, "");
		expect_auth("GET", paths[i], NULL, 404, NULL, "");
		expect_auth("POST", paths[i], "{}", 404, NULL, "");
	}
	expect_alive();
}
END_TEST

START_TEST(wrong_method_is_empty_405)
{
	struct th_resp r;
	char url[128], *allow;

	expect_auth("DELETE", "/v1/files", NULL, 405, NULL, "");
	expect_auth("GET", "/v1/exec", NULL, 405, NULL, "");
	expect_auth("POST", "/v1/health", "{}", 405, NULL, "");
	expect_auth("PUT", "/v1/mkdir", "{}", 405, NULL, "");
	expect_auth("GET", "/v1/jobs/poll", NULL, 405, NULL, "");
	expect_auth("POST", "/sandboxfs/v1/stat", "{}", 405, NULL, "");
	expect_auth("DELETE", "/aws/lambda-microvms/runtime/v1/run", NULL, 405,
		    NULL, "");
	/* Without a credential too: the route does not exist that way. */
	expect("DELETE", "/v1/files", NULL, NULL, 405, NULL, "");
	snprintf(url, sizeof(url), "%s/v1/files", ag.base);
	th_http("DELETE", url, NULL, NULL, 0, &r);
	allow = th_resp_header(&r, "Allow");
	ck_assert_ptr_nonnull(allow);
	ck_assert_str_eq(allow, "GET, HEAD, PUT");
	free(allow);
	th_resp_cleanup(&r);
	expect_alive();
}
END_TEST

/* ---- v1 files --------------------------------------------------------------- */

START_TEST(files_read)
{
	/* More than one read chunk, not a multiple of 3: the answer is
	 * built a piece at a time. */
	{
		size_t n = 3 * 1024 * 1024 + 7, i, got;
		unsigned char *data = malloc(n);
		struct buf content = BUF_INIT(0);
		struct th_resp r;
		char url[256];
		const char *h[] = {ag.auth, NULL};

		for (i = 0; i < n; i++)
			data[i] = (unsigned char)(i * 7919 + (i >> 11));
		fixture("pieces.bin", data, n);
		snprintf(url, sizeof(url), "%s/v1/files?path=pieces.bin",
			 ag.base);
		th_http("GET", url, h, NULL, 0, &r);
		ck_assert_int_eq(r.status, 200);
		ck_assert_int_eq(proto_file_contents_decode(
					 r.body.data, r.body.len, &content),
				 0);
		got = content.len;
		ck_assert_uint_eq(got, n);
		ck_assert(memcmp(content.data, data, n) == 0);
		buf_cleanup(&content);
		th_resp_cleanup(&r);
		free(data);
	}
	fixture("hello.txt", "hello\n", 6);
	fixture("empty", "", 0);
	fixture("dir/sub/deep.bin", "\0\1\2\3", 4);
	fixture("a b", "space", 5);
	expect_auth("GET", "/v1/files?path=hello.txt", NULL, 200,
		    "application/json", "{\"contentsBase64\":\"aGVsbG8K\"}");
	expect_auth("GET", "/v1/files?path=empty", NULL, 200,
		    "application/json", "{\"contentsBase64\":\"\"}");
	expect_auth("GET", "/v1/files?path=dir/sub/deep.bin", NULL, 200,
		    "application/json", "{\"contentsBase64\":\"AAECAw==\"}");
	/* A leading '/', doubled and '.' components name the same file. */
	expect_auth("GET", "/v1/files?path=/dir//sub/./deep.bin", NULL, 200,
		    "application/json", "{\"contentsBase64\":\"AAECAw==\"}");
	/* Form decoding: '+' and %20 are a space. */
	expect_auth("GET", "/v1/files?path=a+b", NULL, 200, "application/json",
		    "{\"contentsBase64\":\"c3BhY2U=\"}");
	expect_auth("GET", "/v1/files?path=a%20b", NULL, 200,
		    "application/json", "{\"contentsBase64\":\"c3BhY2U=\"}");
	expect_alive();
}
END_TEST

START_TEST(files_read_not_found)
{
	fixture("file", "x", 1);
	expect_auth("GET", "/v1/files?path=missing", NULL, 404, TEXT,
		    "PATH_NOT_FOUND: No such file in the sandbox: missing");
	expect_auth("GET", "/v1/files?path=no/such/dir/f", NULL, 404, TEXT,
		    "PATH_NOT_FOUND: No such file in the sandbox: "
		    "no/such/dir/f");
	expect_auth("GET", "/v1/files?path=file/below", NULL, 404, TEXT,
		    "PATH_NOT_FOUND: No such file in the sandbox: file/below");
	expect_alive();
}
END_TEST

START_TEST(files_read_bad_paths)
{
	expect_auth("GET", "/v1/files", NULL, 400, TEXT,
		    "Failed to deserialize query string: missing field "
		    "`path`");
	expect_auth("GET", "/v1/files?other=1", NULL, 400, TEXT,
		    "Failed to deserialize query string: missing field "
		    "`path`");
	expect_auth("GET", "/v1/files?path=", NULL, 400, TEXT,
		    "PATH_REFUSED: Path '' refused: path is empty");
	expect_auth("GET", "/v1/files?path=/", NULL, 400, TEXT,
		    "PATH_REFUSED: Path '/' refused: path is empty");
	expect_auth("GET", "/v1/files?path=.", NULL, 400, TEXT,
		    "PATH_REFUSED: Path '.' refused: path is empty");
	expect_auth("GET", "/v1/files?path=..", NULL, 400, TEXT,
		    "PATH_REFUSED: Path '..' refused: path traverses upward");
	expect_auth("GET", "/v1/files?path=../x", NULL, 400, TEXT,
		    "PATH_REFUSED: Path '../x' refused: path traverses upward");
	expect_auth("GET", "/v1/files?path=/../x", NULL, 400, TEXT,
		    "PATH_REFUSED: Path '/../x' refused: path traverses "
		    "upward");
	expect_auth("GET", "/v1/files?path=a/../../etc/passwd", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'a/../../etc/passwd' refused: path "
		    "traverses upward");
	expect_auth("GET", "/v1/files?path=a%2F..%2Fb", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'a/../b' refused: path traverses "
		    "upward");
	/* A NUL cannot be part of a name. */
	expect_auth("GET", "/v1/files?path=x%00y", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'x' refused: path carries a byte no "
		    "path may hold");
	expect_alive();
}
END_TEST

START_TEST(files_absolute_paths_stay_inside)
{
	/* "//etc/passwd" and "/etc/passwd" are root/etc/passwd. */
	expect_auth("GET", "/v1/files?path=//etc/passwd", NULL, 404, TEXT,
		    "PATH_NOT_FOUND: No such file in the sandbox: "
		    "//etc/passwd");
	expect_auth("GET", "/v1/files?path=%2Fetc%2Fpasswd", NULL, 404, TEXT,
		    "PATH_NOT_FOUND: No such file in the sandbox: "
		    "/etc/passwd");
	fixture("etc/passwd", "inside", 6);
	expect_auth("GET", "/v1/files?path=//etc/passwd", NULL, 200,
		    "application/json", "{\"contentsBase64\":\"aW5zaWRl\"}");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"//etc/passwd\",\"contentsBase64\":\"eA==\"}",
		    204, NULL, "");
	{
		size_t n;
		char *d = file_contents("etc/passwd", &n);

		ck_assert_uint_eq(n, 1);
		ck_assert_str_eq(d, "x");
		free(d);
	}
	expect_alive();
}
END_TEST

START_TEST(files_symlinks_refused)
{
	fixture("real/file", "secret", 6);
	fixture_symlink("real", "linkdir");
	fixture_symlink("real/file", "linkfile");
	fixture_symlink("/etc", "out");
	fixture_symlink("/etc/passwd", "outfile");
	fixture_symlink("../../..", "up");
	expect_auth("GET", "/v1/files?path=linkdir/file", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'linkdir/file' refused: path leaves "
		    "the session root");
	expect_auth("GET", "/v1/files?path=linkfile", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'linkfile' refused: path leaves the "
		    "session root");
	expect_auth("GET", "/v1/files?path=out/passwd", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'out/passwd' refused: path leaves the "
		    "session root");
	expect_auth("GET", "/v1/files?path=outfile", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'outfile' refused: path leaves the "
		    "session root");
	expect_auth("GET", "/v1/files?path=up/etc/passwd", NULL, 400, TEXT,
		    "PATH_REFUSED: Path 'up/etc/passwd' refused: path leaves "
		    "the session root");
	/* Writes and mkdir refuse them too, and leave the target alone. */
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"linkfile\",\"contentsBase64\":\"eA==\"}", 400,
		    TEXT,
		    "PATH_REFUSED: Path 'linkfile' refused: path leaves the "
		    "session root");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"linkdir/new\",\"contentsBase64\":\"eA==\"}",
		    400, TEXT,
		    "PATH_REFUSED: Path 'linkdir/new' refused: path leaves the "
		    "session root");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"out/x\",\"contentsBase64\":\"eA==\"}", 400,
		    TEXT,
		    "PATH_REFUSED: Path 'out/x' refused: path leaves the "
		    "session root");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"linkdir/sub\"}", 400,
		    TEXT,
		    "PATH_REFUSED: Path 'linkdir/sub' refused: path leaves the "
		    "session root");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"out\"}", 400, TEXT,
		    "PATH_REFUSED: Path 'out' refused: path leaves the session "
		    "root");
	{
		size_t n;
		char *d = file_contents("real/file", &n);
		char *p = root_path("real/new");

		ck_assert_str_eq(d, "secret");
		ck_assert_int_eq(access(p, F_OK), -1);
		free(d);
		free(p);
	}
	expect_alive();
}
END_TEST

START_TEST(files_not_regular)
{
	char *fifo = root_path("fifo");
	struct th_resp r;
	char url[256];
	long long t0;

	fixture_dir("dir");
	ck_assert_int_eq(mkfifo(fifo, 0666), 0);
	th_give_to_exec_user(ag.root);
	expect_auth("GET", "/v1/files?path=dir", NULL, 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'dir' is not a regular "
		    "file");
	/* A FIFO with no writer must not hang the read. */
	snprintf(url, sizeof(url), "%s/v1/files?path=fifo", ag.base);
	t0 = th_now_ms();
	{
		const char *h[] = {ag.auth, NULL};

		ck_assert_int_eq(
			th_http_timeout("GET", url, h, NULL, 0, 5000, &r), 0);
	}
	ck_assert_int_eq(r.status, 400);
	ck_assert_str_eq(r.body.data, "REQUEST_INVALID: Request invalid: "
				      "'fifo' is not a regular file");
	ck_assert(th_now_ms() - t0 < 4000);
	th_resp_cleanup(&r);
	/* Writing: a directory or a FIFO without a reader. */
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"dir\",\"contentsBase64\":\"eA==\"}", 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'dir' is not a regular "
		    "file");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"fifo\",\"contentsBase64\":\"eA==\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: 'fifo' is not a regular "
		    "file");
	free(fifo);
	expect_alive();
}
END_TEST

START_TEST(files_device_node)
{
	char *dev = root_path("null");

	if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) < 0) {
		/* Only root can make one; nothing to test otherwise. */
		ck_assert_int_eq(errno, EPERM);
		free(dev);
		return;
	}
	th_give_to_exec_user(ag.root);
	expect_auth("GET", "/v1/files?path=null", NULL, 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'null' is not a "
		    "regular file");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"null\",\"contentsBase64\":\"eA==\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: 'null' is not a "
		    "regular file");
	free(dev);
	expect_alive();
}
END_TEST

START_TEST(files_read_limit)
{
	char *p = root_path("big");
	struct th_resp r;
	char url[256];
	int fd;

	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 33554433), 0);
	close(fd);
	th_give_to_exec_user(ag.root);
	expect_auth("GET", "/v1/files?path=big", NULL, 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'big' is over the "
		    "33554432 byte transfer limit");
	/* Exactly the limit is fine. */
	ck_assert_int_eq(truncate(p, 33554432), 0);
	snprintf(url, sizeof(url), "%s/v1/files?path=big", ag.base);
	{
		const char *h[] = {ag.auth, NULL};

		th_http("GET", url, h, NULL, 0, &r);
	}
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body.len, 21 + 44739244);
	th_resp_cleanup(&r);
	free(p);
	expect_alive();
}
END_TEST

static unsigned current_umask(void)
{
	mode_t m = umask(0);

	umask(m);
	return (unsigned)m;
}

START_TEST(files_write)
{
	struct stat st;
	char *p, *d;
	size_t n;

	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"new.txt\",\"contentsBase64\":\"aGVsbG8=\"}",
		    204, NULL, "");
	d = file_contents("new.txt", &n);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(d, "hello");
	free(d);
	p = root_path("new.txt");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0666 & ~current_umask());
	if (geteuid() == 0) {
		ck_assert_uint_eq(st.st_uid, 65534);
		ck_assert_uint_eq(st.st_gid, 65534);
	}
	/* An existing file is truncated and keeps its mode. */
	ck_assert_int_eq(chmod(p, 0600), 0);
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"/new.txt\",\"contentsBase64\":\"eA==\"}", 204,
		    NULL, "");
	d = file_contents("new.txt", &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(d, "x");
	free(d);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	free(p);
	/* Empty contents make an empty file. */
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"new.txt\",\"contentsBase64\":\"\"}", 204, NULL,
		    "");
	d = file_contents("new.txt", &n);
	ck_assert_uint_eq(n, 0);
	free(d);
	/* Round trip through the read route; unknown fields are ignored. */
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"rt\",\"contentsBase64\":\"AAECAw==\","
		    "\"extra\":true}",
		    204, NULL, "");
	expect_auth("GET", "/v1/files?path=rt", NULL, 200, "application/json",
		    "{\"contentsBase64\":\"AAECAw==\"}");
	expect_alive();
}
END_TEST

START_TEST(files_write_creates_parents)
{
	struct stat st;
	char *p, *d;
	size_t n;

	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"a/b/c/f\",\"contentsBase64\":\"eQ==\"}", 204,
		    NULL, "");
	d = file_contents("a/b/c/f", &n);
	ck_assert_str_eq(d, "y");
	free(d);
	p = root_path("a/b");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0777 & ~current_umask());
	free(p);
	/* A file where a parent should be. */
	fixture("plain", "p", 1);
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"plain/f\",\"contentsBase64\":\"eQ==\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: 'plain' is not a "
		    "directory");
	expect_alive();
}
END_TEST

START_TEST(files_write_bad_bodies)
{
	const char *h_text[] = {ag.auth, "Content-Type: text/plain", NULL};
	const char *h_none[] = {ag.auth, NULL};

	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"f\",\"contentsBase64\":\"aGV!bG8=\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: contents are not valid "
		    "base64: Invalid symbol 33, offset 3.");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"f\",\"contentsBase64\":\"aGVsbG8\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: contents are not valid "
		    "base64: Invalid padding");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"f\",\"contentsBase64\":\"aGVsbG9=\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: contents are not valid "
		    "base64: Invalid last symbol 57, offset 6.");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"f\",\"contentsBase64\":\"aGVs bG8=\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: contents are not valid "
		    "base64: Invalid symbol 32, offset 4.");
	/* Not JSON, the wrong shape, the wrong content type. */
	expect_auth("PUT", "/v1/files", "{\"path\":", 400, TEXT,
		    "Failed to parse the request body as JSON");
	expect_auth("PUT", "/v1/files", "", 400, TEXT,
		    "Failed to parse the request body as JSON");
	expect_auth("PUT", "/v1/files", "{\"path\":\"f\"}", 422, TEXT,
		    "Failed to deserialize the JSON body into the target type");
	expect_auth("PUT", "/v1/files", "{\"contentsBase64\":\"\"}", 422, TEXT,
		    "Failed to deserialize the JSON body into the target type");
	expect_auth("PUT", "/v1/files", "{\"path\":7,\"contentsBase64\":\"\"}",
		    422, TEXT,
		    "Failed to deserialize the JSON body into the target type");
	expect_auth("PUT", "/v1/files", "[]", 422, TEXT,
		    "Failed to deserialize the JSON body into the target type");
	/* A NUL would silently name another file. */
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"a\\u0000b\",\"contentsBase64\":\"\"}", 422,
		    TEXT,
		    "Failed to deserialize the JSON body into the target type");
	expect("PUT", "/v1/files", h_text,
	       "{\"path\":\"f\",\"contentsBase64\":\"\"}", 415, TEXT,
	       "Expected request with `Content-Type: application/json`");
	expect("PUT", "/v1/files", h_none,
	       "{\"path\":\"f\",\"contentsBase64\":\"\"}", 415, TEXT,
	       "Expected request with `Content-Type: application/json`");
	/* Path refusals. */
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"../f\",\"contentsBase64\":\"\"}", 400, TEXT,
		    "PATH_REFUSED: Path '../f' refused: path traverses upward");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"\",\"contentsBase64\":\"\"}", 400, TEXT,
		    "PATH_REFUSED: Path '' refused: path is empty");
	{
		char *p = root_path("f");

		ck_assert_int_eq(access(p, F_OK), -1);
		free(p);
	}
	expect_alive();
}
END_TEST

START_TEST(files_write_limit)
{
	size_t n = 33554433, elen = b64_encoded_len(n);
	unsigned char *raw = calloc(1, n);
	char *body = malloc(elen + 64);
	size_t off;

	ck_assert_ptr_nonnull(raw);
	ck_assert_ptr_nonnull(body);
	off = (size_t)sprintf(body, "{\"path\":\"big\",\"contentsBase64\":\"");
	b64_encode(raw, n, body + off);
	strcat(body + off + elen, "\"}");
	expect_auth("PUT", "/v1/files", body, 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 33554433 bytes exceeds "
		    "the 33554432 byte transfer limit");
	/* One byte less is written. */
	off = (size_t)sprintf(body, "{\"path\":\"big\",\"contentsBase64\":\"");
	b64_encode(raw, n - 1, body + off);
	strcat(body + off + b64_encoded_len(n - 1), "\"}");
	expect_auth("PUT", "/v1/files", body, 204, NULL, "");
	{
		char *p = root_path("big");
		struct stat st;

		ck_assert_int_eq(stat(p, &st), 0);
		ck_assert_int_eq(st.st_size, 33554432);
		free(p);
	}
	free(raw);
	free(body);
	expect_alive();
}
END_TEST

START_TEST(files_mkdir)
{
	struct stat st;
	char *p;

	expect_auth("POST", "/v1/mkdir", "{\"path\":\"x/y/z\"}", 204, NULL, "");
	p = root_path("x/y/z");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0777 & ~current_umask());
	if (geteuid() == 0)
		ck_assert_uint_eq(st.st_uid, 65534);
	free(p);
	/* Idempotent, and a leading '/' is the same directory. */
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"x/y/z\"}", 204, NULL, "");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"/x/y\"}", 204, NULL, "");
	/* Refusals. */
	fixture("file", "f", 1);
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"file\"}", 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'file' is not a "
		    "directory");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"file/sub\"}", 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'file' is not a "
		    "directory");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"\"}", 400, TEXT,
		    "PATH_REFUSED: Path '' refused: path is empty");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"/\"}", 400, TEXT,
		    "PATH_REFUSED: Path '/' refused: path is empty");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"a/../..\"}", 400, TEXT,
		    "PATH_REFUSED: Path 'a/../..' refused: path traverses "
		    "upward");
	expect_auth("POST", "/v1/mkdir", "{\"path\":", 400, TEXT,
		    "Failed to parse the request body as JSON");
	expect_auth("POST", "/v1/mkdir", "{\"dir\":\"a\"}", 422, TEXT,
		    "Failed to deserialize the JSON body into the target type");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"a\\u0000\"}", 422, TEXT,
		    "Failed to deserialize the JSON body into the target type");
	{
		const char *h[] = {ag.auth, NULL};

		expect("POST", "/v1/mkdir", h, "{\"path\":\"a\"}", 415, TEXT,
		       "Expected request with `Content-Type: "
		       "application/json`");
	}
	expect_alive();
}
END_TEST

/* ---- HTTP framing ---------------------------------------------------------- */

/* Send req on a fresh connection; the answer (until the server closes or
 * timeout_ms) in out. */
static void raw(const char *req, size_t n, struct buf *out, int timeout_ms)
{
	buf_init(out, 0);
	ck_assert_int_ge(th_raw(ag.port, req, n, out, timeout_ms), 0);
}

START_TEST(http_declared_length_over_limit)
{
	struct buf out;
	char req[512];
	long long t0 = th_now_ms();
	int n;

	/* Headers only: the 413 must come without the body being sent. */
	n = snprintf(req, sizeof(req),
		     "PUT /v1/files HTTP/1.1\r\nHost: x\r\n%s\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: 44743337\r\n\r\n",
		     ag.auth);
	raw(req, (size_t)n, &out, 5000);
	ck_assert(th_now_ms() - t0 < 4000);
	ck_assert_msg(strncmp(out.data, "HTTP/1.1 413 ", 13) == 0, "%s",
		      out.data);
	ck_assert_ptr_nonnull(strstr(
		out.data, "Content-Type: text/plain; charset=utf-8\r\n"));
	ck_assert_ptr_nonnull(strstr(out.data, "\r\n\r\n" TOO_LARGE));
	buf_cleanup(&out);
	/* A small route's limit is 64 KiB; a GET route takes no body. */
	n = snprintf(req, sizeof(req),
		     "POST /v1/mkdir HTTP/1.1\r\nHost: x\r\n%s\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: 65537\r\n\r\n",
		     ag.auth);
	raw(req, (size_t)n, &out, 5000);
	ck_assert_msg(strncmp(out.data, "HTTP/1.1 413 ", 13) == 0, "%s",
		      out.data);
	buf_cleanup(&out);
	n = snprintf(req, sizeof(req),
		     "GET /v1/files?path=a HTTP/1.1\r\nHost: x\r\n%s\r\n"
		     "Content-Length: 10\r\n\r\n",
		     ag.auth);
	raw(req, (size_t)n, &out, 5000);
	ck_assert_msg(strncmp(out.data, "HTTP/1.1 413 ", 13) == 0, "%s",
		      out.data);
	buf_cleanup(&out);
	/* The limit itself is fine (and is then waited for). */
	n = snprintf(req, sizeof(req),
		     "PUT /v1/files HTTP/1.1\r\nHost: x\r\n%s\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: 44743336\r\n\r\n",
		     ag.auth);
	raw(req, (size_t)n, &out, 500);
	ck_assert_uint_eq(out.len, 0);
	buf_cleanup(&out);
	expect_alive();
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
	char req[1024], *made = root_path("x");
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
				     with_cred ? ag.auth : "",
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
	n = snprintf(req, sizeof(req),
		     "POST /v1/mkdir HTTP/1.1\r\nHost: x\r\n%s\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: 14, 14\r\n\r\n{\"path\":\"x\"}\r\n",
		     ag.auth);
	raw(req, (size_t)n, &out, 5000);
	ck_assert_msg(strncmp(out.data, "HTTP/1.1 400 ", 13) == 0, "%s",
		      out.data);
	buf_cleanup(&out);
	ck_assert_int_eq(lstat(made, &st), -1);
	free(made);
	expect_alive();
}
END_TEST

START_TEST(http_chunked_over_limit)
{
	struct buf req = BUF_INIT(0), out;
	char chunk[4097];
	int i;

	memset(chunk, ' ', sizeof(chunk) - 1);
	chunk[sizeof(chunk) - 1] = '\0';
	ck_assert_int_eq(buf_printf(&req,
				    "POST /v1/mkdir HTTP/1.1\r\nHost: x\r\n"
				    "%s\r\nContent-Type: application/json\r\n"
				    "Transfer-Encoding: chunked\r\n"
				    "Connection: close\r\n\r\n",
				    ag.auth),
			 0);
	/* 100 KiB of chunks against the 64 KiB limit. */
	for (i = 0; i < 25; i++)
		ck_assert_int_eq(buf_printf(&req, "1000\r\n%s\r\n", chunk), 0);
	ck_assert_int_eq(buf_append_str(&req, "0\r\n\r\n"), 0);
	raw(req.data, req.len, &out, 5000);
	ck_assert_msg(strncmp(out.data, "HTTP/1.1 413 ", 13) == 0, "%s",
		      out.data);
	ck_assert_ptr_nonnull(strstr(out.data, "\r\n\r\n" TOO_LARGE));
	buf_cleanup(&out);
	buf_cleanup(&req);
	/* A chunked body within the limit works. */
	buf_init(&req, 0);
	ck_assert_int_eq(buf_printf(&req,
				    "POST /v1/mkdir HTTP/1.1\r\nHost: x\r\n"
				    "%s\r\nContent-Type: application/json\r\n"
				    "Transfer-Encoding: chunked\r\n"
				    "Connection: close\r\n\r\n"
				    "5\r\n{\"pat\r\n"
				    "a\r\nh\":\"chunk\"\r\n1\r\n}\r\n0\r\n\r\n",
				    ag.auth),
			 0);
	raw(req.data, req.len, &out, 5000);
	ck_assert_msg(strncmp(out.data, "HTTP/1.1 204 ", 13) == 0, "%s",
		      out.data);
	buf_cleanup(&out);
	buf_cleanup(&req);
	{
		char *p = root_path("chunk");

		ck_assert_int_eq(access(p, F_OK), 0);
		free(p);
	}
	expect_alive();
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

	fixture("k", "keep", 4);
	/* Two requests on one connection, the second closing it. */
	n = snprintf(req, sizeof(req),
		     "GET /v1/files?path=k HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n"
		     "GET /v1/health HTTP/1.1\r\nHost: x\r\n"
		     "Connection: close\r\n\r\n",
		     ag.auth);
	raw(req, (size_t)n, &out, 5000);
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
	ck_assert_msg(strncmp(out.data, "HTTP/1.1 401 ", 13) == 0, "%s",
		      out.data);
	ck_assert_int_eq(count(out.data, "HTTP/1.1 404 "), 1);
	ck_assert_int_eq(count(out.data, "HTTP/1.1 200 OK\r\n"), 1);
	buf_cleanup(&out);
	expect_alive();
}
END_TEST

/* ---- the credential file ---------------------------------------------------- */

START_TEST(credential_file)
{
	struct stat st;
	char *t;
	size_t n;

	ck_assert_int_eq(stat(ag.token_file, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	t = th_read_file(ag.token_file, &n);
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
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int status, s;

	ck_assert(asprintf(&root, "%s/root", dir) > 0);
	ck_assert(asprintf(&file, "%s/file", dir) > 0);
	ck_assert(asprintf(&tok, "%s/token", dir) > 0);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	th_write_file(file, "x", 1);
	unsetenv("ALIEN_SANDBOX_ROOT");

	{
		const char *args[] = {"--token-file", tok, NULL};

		status = run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_str_eq(err, "sandbox-agent: --root (or "
				      "ALIEN_SANDBOX_ROOT) is required\n");
		free(err);
	}
	{
		const char *args[] = {"--root", file, "--token-file", tok,
				      NULL};

		status = run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_ptr_nonnull(strstr(err, "is not a directory"));
		free(err);
	}
	{
		const char *args[] = {"--root", root, "--bogus", NULL};

		status = run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		free(err);
	}
	{
		const char *args[] = {"--root",	      root, "--port", "70000",
				      "--token-file", tok,  NULL};

		status = run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_str_eq(err,
				 "sandbox-agent: --port: bad port '70000'\n");
		free(err);
	}
	/* A port in use. */
	s = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(s, 1), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	snprintf(want, sizeof(want), "%u", ntohs(sa.sin_port));
	{
		/* Exactly one line: nothing else is logged at warn. */
		const char *args[] = {
			"--root",    root,   "--listen",     "127.0.0.1",
			"--port",    want,   "--token-file", tok,
			"--confine", "none", "--log-level",  "warn",
			NULL};

		status = run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		snprintf(want, sizeof(want),
			 "sandbox-agent: port %u is in use\n",
			 ntohs(sa.sin_port));
		ck_assert_str_eq(err, want);
		free(err);
	}
	close(s);
	if (geteuid() == 0) {
		const char *args[] = {"--root", root,		"--exec-user",
				      "0:0",	"--token-file", tok,
				      NULL};

		status = run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		ck_assert_str_eq(err, "sandbox-agent: refusing to run "
				      "commands as uid or gid 0\n");
		free(err);
	}
	{
		const char *args[] = {"--help", NULL};

		status = run_agent(args, &err);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ck_assert_ptr_nonnull(strstr(err, "--root DIR"));
		free(err);
	}
	{
		const char *args[] = {"--version", NULL};

		status = run_agent(args, &err);
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
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
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
	th_agent_start(&ag, NULL, false);
	for (i = 0; i < SLOW; i++) {
		fds[i] = slow_client(ag.port);
		opened += fds[i] >= 0;
	}
	ck_assert_int_gt(opened, 1024);
	snprintf(url, sizeof(url), "%s/v1/health", ag.base);
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
		if (fds[i] >= 0)
			close(fds[i]);
	th_agent_stop(&ag);
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
	struct sockaddr_in sa;
	long long end;
	char c;

	th_agent_start(&ag, args, false);
	for (i = 0; i < N; i++)
		fds[i] = slow_client(ag.port);
	idle = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)ag.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(idle, (struct sockaddr *)&sa, sizeof(sa)), 0);
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
	expect_alive();
	th_agent_stop(&ag);
}
END_TEST

Suite *make_agent_suite(void)
{
	Suite *s = suite_create("agent");
	TCase *tc;

	tc = tcase_create("health");
	tcase_add_checked_fixture(tc, start_unactivated, stop_agent);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, health_before_activation);
	tcase_add_test(tc, health_after_activation);
	tcase_add_test(tc, health_version_mismatch);
	tcase_add_test(tc, health_new_boot_per_start);
	tcase_add_test(tc, health_strict_v1);
	tcase_add_test(tc, health_max_write_option);
	suite_add_tcase(s, tc);

	tc = tcase_create("auth");
	tcase_add_checked_fixture(tc, start_unactivated, stop_agent);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, auth_missing_credential);
	tcase_add_test(tc, auth_wrong_credential);
	tcase_add_test(tc, gate_before_activation);
	tcase_add_test(tc, public_routes);
	suite_add_tcase(s, tc);

	tc = tcase_create("routing");
	tcase_add_checked_fixture(tc, start_activated, stop_agent);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, unknown_route_is_empty_404);
	tcase_add_test(tc, wrong_method_is_empty_405);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, start_activated, stop_agent);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, files_read);
	tcase_add_test(tc, files_read_not_found);
	tcase_add_test(tc, files_read_bad_paths);
	tcase_add_test(tc, files_absolute_paths_stay_inside);
	tcase_add_test(tc, files_symlinks_refused);
	tcase_add_test(tc, files_not_regular);
	tcase_add_test(tc, files_device_node);
	tcase_add_test(tc, files_read_limit);
	tcase_add_test(tc, files_write);
	tcase_add_test(tc, files_write_creates_parents);
	tcase_add_test(tc, files_write_bad_bodies);
	tcase_add_test(tc, files_write_limit);
	tcase_add_test(tc, files_mkdir);
	suite_add_tcase(s, tc);

	tc = tcase_create("http");
	tcase_add_checked_fixture(tc, start_activated, stop_agent);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, http_declared_length_over_limit);
	tcase_add_test(tc, http_chunked_over_limit);
	tcase_add_test(tc, http_keep_alive);
	tcase_add_test(tc, http_ambiguous_framing);
	suite_add_tcase(s, tc);

	tc = tcase_create("connections");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, conn_slowloris_health_answers);
	tcase_add_test(tc, conn_deadlines_close_slow_clients);
	suite_add_tcase(s, tc);

	tc = tcase_create("credential");
	tcase_add_checked_fixture(tc, start_unactivated, stop_agent);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, credential_file);
	tcase_add_test(tc, credential_never_shown);
	tcase_add_test(tc, credential_parent_made);
	suite_add_tcase(s, tc);

	tc = tcase_create("config");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, config_errors);
	tcase_add_test(tc, config_files_and_exit);
	suite_add_tcase(s, tc);
	return s;
}
