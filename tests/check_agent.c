/* SPDX-License-Identifier: MIT */
/*
 * Wire tests of sandbox-agent's health and activation, credential gate,
 * routing and the v1 file routes, against a real agent on loopback: for
 * each route, status and refusal, the exact answer (status, Content-Type,
 * body). The HTTP framing, connections, the credential file and the
 * command line are suite agent_http; the file extension and the command
 * routes have their own suites.
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
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"

#define JSON "Content-Type: application/json"
#define TEXT "text/plain; charset=utf-8"
#define NOT_ACTIVATED                                                     \
	"AGENT_NOT_ACTIVATED: the agent has not been activated for this " \
	"boot"

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

	snprintf(url, sizeof(url), "%s%s", ta_ag.base, path);
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
	const char *h[] = {ta_ag.auth, JSON, NULL};

	expect(method, path, h, body, status, ctype, want);
}

/*
 * One request of a table: its query (a GET; NULL: none) or its JSON body
 * (the other methods), and the status and body of the answer.
 */
struct req_case {
	const char *arg;
	long status;
	const char *want;
};

/* expect_auth of method on route for each of the n cases, in order, every
 * answer typed ctype. */
static void expect_each(const char *method, const char *route,
			const char *ctype, const struct req_case *c, size_t n)
{
	bool get = strcmp(method, "GET") == 0;
	char path[512];
	size_t i;

	for (i = 0; i < n; i++) {
		if (get && c[i].arg != NULL)
			snprintf(path, sizeof(path), "%s?%s", route, c[i].arg);
		else
			snprintf(path, sizeof(path), "%s", route);
		expect_auth(method, path, get ? NULL : c[i].arg, c[i].status,
			    ctype, c[i].want);
	}
}

#define EXPECT_EACH(method, route, ctype, cases) \
	expect_each(method, route, ctype, cases, \
		    sizeof(cases) / sizeof(cases[0]))

static void fixture_dir(const char *rel)
{
	char *p = ta_join(ta_ag.root, rel);

	ck_assert_int_eq(mkdir(p, 0755), 0);
	th_give_to_exec_user(ta_ag.root);
	free(p);
}

static void fixture_symlink(const char *target, const char *rel)
{
	char *p = ta_join(ta_ag.root, rel);

	ck_assert_int_eq(symlink(target, p), 0);
	th_give_to_exec_user(ta_ag.root);
	free(p);
}

static char *file_contents(const char *rel, size_t *len)
{
	char *p = ta_join(ta_ag.root, rel);
	char *d = th_read_file(p, len);

	free(p);
	return d;
}

/* ---- health and activation ------------------------------------------------ */

START_TEST(health_before_activation)
{
	struct proto_health h;
	struct th_resp r;

	ta_health_get(&ta_ag, "?version=1", &r);
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
	const char *h[] = {ta_ag.auth, NULL};
	struct proto_health before, after;

	ta_health(&ta_ag, &before);
	expect("POST", "/v1/activate", h, NULL, 204, NULL, "");
	ta_health(&ta_ag, &after);
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

	th_agent_start(&other, NULL, false);
	ta_health(&ta_ag, &h1);
	ta_health(&other, &h2);
	ck_assert_str_ne(h1.boot_id, h2.boot_id);
	ck_assert_str_ne(ta_ag.token, other.token);
	th_agent_stop(&other);
}
END_TEST

START_TEST(health_strict_v1)
{
	const char *args[] = {"--strict-v1", NULL};
	struct th_agent strict;
	struct th_resp r;

	th_agent_start(&strict, args, true);
	ta_health_get(&strict, "", &r);
	ck_assert_ptr_null(strstr(r.body.data, "extensions"));
	ck_assert_ptr_nonnull(strstr(r.body.data, "\"status\":\"ready\""));
	th_resp_cleanup(&r);
	/* No extension route: the router's empty 404. */
	ta_ext_req(&strict, "GET", "stat?path=x", NULL, NULL, NULL, 0, &r);
	ta_expect_empty(&r, 404);
	th_agent_stop(&strict);
}
END_TEST

START_TEST(health_max_write_option)
{
	const char *args[] = {"--ext-max-write", "1M", NULL};
	struct th_agent other;
	struct proto_health h;

	th_agent_start(&other, args, false);
	ta_health(&other, &h);
	ck_assert_uint_eq(h.ext_max_write, 1048576);
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
	ta_expect_alive(&ta_ag);
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
		 ta_ag.token);
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
	snprintf(url, sizeof(url), "%s/a", ta_ag.root);
	ck_assert_int_eq(access(url, F_OK), -1);
	expect_auth("POST", "/v1/activate", NULL, 204, NULL, "");
	expect_auth("POST", "/v1/mkdir", "{\"path\":\"a\"}", 204, NULL, "");
	ck_assert_int_eq(access(url, F_OK), 0);
	snprintf(url, sizeof(url), "%s/v1/files?path=a", ta_ag.base);
	{
		const char *h[] = {ta_ag.auth, NULL};

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
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(wrong_method_is_empty_405)
{
	static const struct {
		const char *method, *path, *body;
	} wrong[] = {
		{"DELETE", "/v1/files", NULL},
		{"GET", "/v1/exec", NULL},
		{"POST", "/v1/health", "{}"},
		{"PUT", "/v1/mkdir", "{}"},
		{"GET", "/v1/jobs/poll", NULL},
		{"POST", "/sandboxfs/v1/stat", "{}"},
		{"DELETE", "/aws/lambda-microvms/runtime/v1/run", NULL},
	};
	struct th_resp r;
	char url[128], *allow;
	size_t i;

	for (i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
		expect_auth(wrong[i].method, wrong[i].path, wrong[i].body, 405,
			    NULL, "");
	/* Without a credential too: the route does not exist that way. */
	expect("DELETE", "/v1/files", NULL, NULL, 405, NULL, "");
	snprintf(url, sizeof(url), "%s/v1/files", ta_ag.base);
	th_http("DELETE", url, NULL, NULL, 0, &r);
	allow = th_resp_header(&r, "Allow");
	ck_assert_ptr_nonnull(allow);
	ck_assert_str_eq(allow, "GET, HEAD, PUT");
	free(allow);
	th_resp_cleanup(&r);
	ta_expect_alive(&ta_ag);
}
END_TEST

/* ---- v1 files --------------------------------------------------------------- */

START_TEST(files_read)
{
	static const struct req_case reads[] = {
		{"path=hello.txt", 200, "{\"contentsBase64\":\"aGVsbG8K\"}"},
		{"path=empty", 200, "{\"contentsBase64\":\"\"}"},
		{"path=dir/sub/deep.bin", 200,
		 "{\"contentsBase64\":\"AAECAw==\"}"},
		/* A leading '/', doubled and '.' components name the same
		 * file. */
		{"path=/dir//sub/./deep.bin", 200,
		 "{\"contentsBase64\":\"AAECAw==\"}"},
		/* Form decoding: '+' and %20 are a space. */
		{"path=a+b", 200, "{\"contentsBase64\":\"c3BhY2U=\"}"},
		{"path=a%20b", 200, "{\"contentsBase64\":\"c3BhY2U=\"}"},
	};

	/* More than one read chunk, not a multiple of 3: the answer is
	 * built a piece at a time. */
	{
		size_t n = 3 * 1024 * 1024 + 7, i, got;
		unsigned char *data = malloc(n);
		struct buf content = BUF_INIT(0);
		struct th_resp r;
		char url[256];
		const char *h[] = {ta_ag.auth, NULL};

		for (i = 0; i < n; i++)
			data[i] = (unsigned char)(i * 7919 + (i >> 11));
		ta_fixture(&ta_ag, "pieces.bin", data, n);
		snprintf(url, sizeof(url), "%s/v1/files?path=pieces.bin",
			 ta_ag.base);
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
	ta_fixture(&ta_ag, "hello.txt", "hello\n", 6);
	ta_fixture(&ta_ag, "empty", "", 0);
	ta_fixture(&ta_ag, "dir/sub/deep.bin", "\0\1\2\3", 4);
	ta_fixture(&ta_ag, "a b", "space", 5);
	EXPECT_EACH("GET", "/v1/files", "application/json", reads);
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(files_read_not_found)
{
	static const struct req_case missing[] = {
		{"path=missing", 404,
		 "PATH_NOT_FOUND: No such file in the sandbox: missing"},
		{"path=no/such/dir/f", 404,
		 "PATH_NOT_FOUND: No such file in the sandbox: no/such/dir/f"},
		{"path=file/below", 404,
		 "PATH_NOT_FOUND: No such file in the sandbox: file/below"},
	};

	ta_fixture(&ta_ag, "file", "x", 1);
	EXPECT_EACH("GET", "/v1/files", TEXT, missing);
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(files_read_bad_paths)
{
	static const struct req_case bad[] = {
		{NULL, 400,
		 "Failed to deserialize query string: missing field `path`"},
		{"other=1", 400,
		 "Failed to deserialize query string: missing field `path`"},
		{"path=", 400, "PATH_REFUSED: Path '' refused: path is empty"},
		{"path=/", 400,
		 "PATH_REFUSED: Path '/' refused: path is empty"},
		{"path=.", 400,
		 "PATH_REFUSED: Path '.' refused: path is empty"},
		{"path=..", 400,
		 "PATH_REFUSED: Path '..' refused: path traverses upward"},
		{"path=../x", 400,
		 "PATH_REFUSED: Path '../x' refused: path traverses upward"},
		{"path=/../x", 400,
		 "PATH_REFUSED: Path '/../x' refused: path traverses upward"},
		{"path=a/../../etc/passwd", 400,
		 "PATH_REFUSED: Path 'a/../../etc/passwd' refused: path "
		 "traverses upward"},
		{"path=a%2F..%2Fb", 400,
		 "PATH_REFUSED: Path 'a/../b' refused: path traverses upward"},
		/* A NUL cannot be part of a name. */
		{"path=x%00y", 400,
		 "PATH_REFUSED: Path 'x' refused: path carries a byte no path "
		 "may hold"},
	};

	EXPECT_EACH("GET", "/v1/files", TEXT, bad);
	ta_expect_alive(&ta_ag);
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
	ta_fixture(&ta_ag, "etc/passwd", "inside", 6);
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
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(files_symlinks_refused)
{
	static const struct req_case reads[] = {
		{"path=linkdir/file", 400,
		 "PATH_REFUSED: Path 'linkdir/file' refused: path leaves the "
		 "session root"},
		{"path=linkfile", 400,
		 "PATH_REFUSED: Path 'linkfile' refused: path leaves the "
		 "session root"},
		{"path=out/passwd", 400,
		 "PATH_REFUSED: Path 'out/passwd' refused: path leaves the "
		 "session root"},
		{"path=outfile", 400,
		 "PATH_REFUSED: Path 'outfile' refused: path leaves the "
		 "session "
		 "root"},
		{"path=up/etc/passwd", 400,
		 "PATH_REFUSED: Path 'up/etc/passwd' refused: path leaves the "
		 "session root"},
	};
	static const struct req_case writes[] = {
		{"{\"path\":\"linkfile\",\"contentsBase64\":\"eA==\"}", 400,
		 "PATH_REFUSED: Path 'linkfile' refused: path leaves the "
		 "session root"},
		{"{\"path\":\"linkdir/new\",\"contentsBase64\":\"eA==\"}", 400,
		 "PATH_REFUSED: Path 'linkdir/new' refused: path leaves the "
		 "session root"},
		{"{\"path\":\"out/x\",\"contentsBase64\":\"eA==\"}", 400,
		 "PATH_REFUSED: Path 'out/x' refused: path leaves the session "
		 "root"},
	};
	static const struct req_case mkdirs[] = {
		{"{\"path\":\"linkdir/sub\"}", 400,
		 "PATH_REFUSED: Path 'linkdir/sub' refused: path leaves the "
		 "session root"},
		{"{\"path\":\"out\"}", 400,
		 "PATH_REFUSED: Path 'out' refused: path leaves the session "
		 "root"},
	};

	ta_fixture(&ta_ag, "real/file", "secret", 6);
	fixture_symlink("real", "linkdir");
	fixture_symlink("real/file", "linkfile");
	fixture_symlink("/etc", "out");
	fixture_symlink("/etc/passwd", "outfile");
	fixture_symlink("../../..", "up");
	EXPECT_EACH("GET", "/v1/files", TEXT, reads);
	/* Writes and mkdir refuse them too, and leave the target alone. */
	EXPECT_EACH("PUT", "/v1/files", TEXT, writes);
	EXPECT_EACH("POST", "/v1/mkdir", TEXT, mkdirs);
	{
		size_t n;
		char *d = file_contents("real/file", &n);
		char *p = ta_join(ta_ag.root, "real/new");

		ck_assert_str_eq(d, "secret");
		ck_assert_int_eq(access(p, F_OK), -1);
		free(d);
		free(p);
	}
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(files_not_regular)
{
	char *fifo = ta_join(ta_ag.root, "fifo");
	struct th_resp r;
	char url[256];
	long long t0;

	fixture_dir("dir");
	ck_assert_int_eq(mkfifo(fifo, 0666), 0);
	th_give_to_exec_user(ta_ag.root);
	expect_auth("GET", "/v1/files?path=dir", NULL, 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'dir' is not a regular "
		    "file");
	/* A FIFO with no writer must not hang the read. */
	snprintf(url, sizeof(url), "%s/v1/files?path=fifo", ta_ag.base);
	t0 = th_now_ms();
	{
		const char *h[] = {ta_ag.auth, NULL};

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
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(files_device_node)
{
	char *dev = ta_join(ta_ag.root, "null");

	if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) < 0) {
		/* Only root can make one; nothing to test otherwise. */
		ck_assert_int_eq(errno, EPERM);
		free(dev);
		return;
	}
	th_give_to_exec_user(ta_ag.root);
	expect_auth("GET", "/v1/files?path=null", NULL, 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'null' is not a "
		    "regular file");
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"null\",\"contentsBase64\":\"eA==\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: 'null' is not a "
		    "regular file");
	free(dev);
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(files_read_limit)
{
	char *p = ta_join(ta_ag.root, "big");
	struct th_resp r;
	char url[256];
	int fd;

	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 33554433), 0);
	close(fd);
	th_give_to_exec_user(ta_ag.root);
	expect_auth("GET", "/v1/files?path=big", NULL, 400, TEXT,
		    "REQUEST_INVALID: Request invalid: 'big' is over the "
		    "33554432 byte transfer limit");
	/* Exactly the limit is fine. */
	ck_assert_int_eq(truncate(p, 33554432), 0);
	snprintf(url, sizeof(url), "%s/v1/files?path=big", ta_ag.base);
	{
		const char *h[] = {ta_ag.auth, NULL};

		th_http("GET", url, h, NULL, 0, &r);
	}
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body.len, 21 + 44739244);
	th_resp_cleanup(&r);
	free(p);
	ta_expect_alive(&ta_ag);
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
	p = ta_join(ta_ag.root, "new.txt");
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
	ta_expect_alive(&ta_ag);
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
	p = ta_join(ta_ag.root, "a/b");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0777 & ~current_umask());
	free(p);
	/* A file where a parent should be. */
	ta_fixture(&ta_ag, "plain", "p", 1);
	expect_auth("PUT", "/v1/files",
		    "{\"path\":\"plain/f\",\"contentsBase64\":\"eQ==\"}", 400,
		    TEXT,
		    "REQUEST_INVALID: Request invalid: 'plain' is not a "
		    "directory");
	ta_expect_alive(&ta_ag);
}
END_TEST

/* What the base64 decoder says of contents it refuses. */
#define BAD_B64 \
	"REQUEST_INVALID: Request invalid: contents are not valid base64: "
/* The answers to a body that is not JSON, or not the route's JSON. */
#define NOT_JSON "Failed to parse the request body as JSON"
#define WRONG_JSON "Failed to deserialize the JSON body into the target type"

START_TEST(files_write_bad_bodies)
{
	static const struct req_case bodies[] = {
		{"{\"path\":\"f\",\"contentsBase64\":\"aGV!bG8=\"}", 400,
		 BAD_B64 "Invalid symbol 33, offset 3."},
		{"{\"path\":\"f\",\"contentsBase64\":\"aGVsbG8\"}", 400,
		 BAD_B64 "Invalid padding"},
		{"{\"path\":\"f\",\"contentsBase64\":\"aGVsbG9=\"}", 400,
		 BAD_B64 "Invalid last symbol 57, offset 6."},
		{"{\"path\":\"f\",\"contentsBase64\":\"aGVs bG8=\"}", 400,
		 BAD_B64 "Invalid symbol 32, offset 4."},
		/* Not JSON, the wrong shape, the wrong content type. */
		{"{\"path\":", 400, NOT_JSON},
		{"", 400, NOT_JSON},
		{"{\"path\":\"f\"}", 422, WRONG_JSON},
		{"{\"contentsBase64\":\"\"}", 422, WRONG_JSON},
		{"{\"path\":7,\"contentsBase64\":\"\"}", 422, WRONG_JSON},
		{"[]", 422, WRONG_JSON},
		/* A NUL would silently name another file. */
		{"{\"path\":\"a\\u0000b\",\"contentsBase64\":\"\"}", 422,
		 WRONG_JSON},
	};
	/* Path refusals. */
	static const struct req_case paths[] = {
		{"{\"path\":\"../f\",\"contentsBase64\":\"\"}", 400,
		 "PATH_REFUSED: Path '../f' refused: path traverses upward"},
		{"{\"path\":\"\",\"contentsBase64\":\"\"}", 400,
		 "PATH_REFUSED: Path '' refused: path is empty"},
	};
	const char *h_text[] = {ta_ag.auth, "Content-Type: text/plain", NULL};
	const char *h_none[] = {ta_ag.auth, NULL};

	EXPECT_EACH("PUT", "/v1/files", TEXT, bodies);
	expect("PUT", "/v1/files", h_text,
	       "{\"path\":\"f\",\"contentsBase64\":\"\"}", 415, TEXT,
	       "Expected request with `Content-Type: application/json`");
	expect("PUT", "/v1/files", h_none,
	       "{\"path\":\"f\",\"contentsBase64\":\"\"}", 415, TEXT,
	       "Expected request with `Content-Type: application/json`");
	EXPECT_EACH("PUT", "/v1/files", TEXT, paths);
	{
		char *p = ta_join(ta_ag.root, "f");

		ck_assert_int_eq(access(p, F_OK), -1);
		free(p);
	}
	ta_expect_alive(&ta_ag);
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
		char *p = ta_join(ta_ag.root, "big");
		struct stat st;

		ck_assert_int_eq(stat(p, &st), 0);
		ck_assert_int_eq(st.st_size, 33554432);
		free(p);
	}
	free(raw);
	free(body);
	ta_expect_alive(&ta_ag);
}
END_TEST

START_TEST(files_mkdir)
{
	static const struct req_case refused[] = {
		{"{\"path\":\"file\"}", 400,
		 "REQUEST_INVALID: Request invalid: 'file' is not a directory"},
		{"{\"path\":\"file/sub\"}", 400,
		 "REQUEST_INVALID: Request invalid: 'file' is not a directory"},
		{"{\"path\":\"\"}", 400,
		 "PATH_REFUSED: Path '' refused: path is empty"},
		{"{\"path\":\"/\"}", 400,
		 "PATH_REFUSED: Path '/' refused: path is empty"},
		{"{\"path\":\"a/../..\"}", 400,
		 "PATH_REFUSED: Path 'a/../..' refused: path traverses upward"},
		{"{\"path\":", 400, NOT_JSON},
		{"{\"dir\":\"a\"}", 422, WRONG_JSON},
		{"{\"path\":\"a\\u0000\"}", 422, WRONG_JSON},
	};
	struct stat st;
	char *p;

	expect_auth("POST", "/v1/mkdir", "{\"path\":\"x/y/z\"}", 204, NULL, "");
	p = ta_join(ta_ag.root, "x/y/z");
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
	ta_fixture(&ta_ag, "file", "f", 1);
	EXPECT_EACH("POST", "/v1/mkdir", TEXT, refused);
	{
		const char *h[] = {ta_ag.auth, NULL};

		expect("POST", "/v1/mkdir", h, "{\"path\":\"a\"}", 415, TEXT,
		       "Expected request with `Content-Type: "
		       "application/json`");
	}
	ta_expect_alive(&ta_ag);
}
END_TEST

void agent_cases(Suite *s)
{
	TCASE_TABLE(s, "health", ta_agent_setup_unactivated, ta_agent_teardown,
		    60, health_before_activation, health_after_activation,
		    health_version_mismatch, health_new_boot_per_start,
		    health_strict_v1, health_max_write_option);
	TCASE_TABLE(s, "auth", ta_agent_setup_unactivated, ta_agent_teardown,
		    60, auth_missing_credential, auth_wrong_credential,
		    gate_before_activation, public_routes);
	TCASE_TABLE(s, "routing", ta_agent_setup, ta_agent_teardown, 60,
		    unknown_route_is_empty_404, wrong_method_is_empty_405);
	TCASE_TABLE(s, "files", ta_agent_setup, ta_agent_teardown, 120,
		    files_read, files_read_not_found, files_read_bad_paths,
		    files_absolute_paths_stay_inside, files_symlinks_refused,
		    files_not_regular, files_device_node, files_read_limit,
		    files_write, files_write_creates_parents,
		    files_write_bad_bodies, files_write_limit, files_mkdir);
}
