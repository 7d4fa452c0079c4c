/* SPDX-License-Identifier: MIT */
/*
 * The suite "azure_data_plane": provider_azure against the fake Azure of
 * azure_fake.c over TLS (test CA, pinned names): the data-plane calls and
 * their counts, the record cache, the judge, native sessions, and the bad
 * answers (malformed records, wrong content types, redirects, refusals,
 * a 401 refreshed once), each a clear error that carries no credential.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/agent_client.h"
#include "client/azure_auth.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/xalloc.h"
#include "client/provider_azure.h"
#include "tests/azure_fake.h"
#include "tests/azure_helpers.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "client/transport.h"

/* ---- the data plane --------------------------------------------------------- */

START_TEST(list_follows_next_links)
{
	static const char *const names[] = {"a", "b", "c", "d", "e"};
	struct az_env e;
	struct provider *p;
	struct sbx_error err;
	char **ids = NULL;
	size_t n = 0, i;

	az_env_start(&e);
	for (i = 0; i < 5; i++)
		azure_fake_add(e.fake, names[i]);
	azure_fake_add(e.fake, "not.a.name");
	azure_fake_set_page_size(e.fake, 2);
	p = az_env_provider(&e, -1);
	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->list(p, &ids, &n, &err), 0);
	/* Names the mount cannot show are left out. */
	ck_assert_uint_eq(n, 5);
	for (i = 0; i < n; i++)
		ck_assert_str_eq(ids[i], names[i]);
	az_ids_free(ids, n);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 3);
	ck_assert_uint_eq(az_stats(p).list_pages, 3);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 1);
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 0);
	ck_assert_uint_eq(azure_fake_bad_version(e.fake), 0);

	/* The listed records serve the listing, never an operation. */
	{
		struct provider_record rec;

		ck_assert_int_eq(p->ops->record_listed(p, "c", &rec, &err), 0);
		provider_record_cleanup(&rec);
		ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_GET), 0);
		ck_assert_int_eq(p->ops->record(p, "c", &rec, &err), 0);
		provider_record_cleanup(&rec);
		ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_GET), 1);
	}
	az_env_stop(&e);
}
END_TEST

START_TEST(list_refuses_a_next_link_elsewhere)
{
	static const char *const links[] = {
		"https://evil.example/subscriptions/x/sandboxes",
		"https://management.eastus.azuredevcompute.io.evil.example/x",
		"http://management.eastus.azuredevcompute.io/x",
		"/relative",
	};
	struct az_env e;
	struct provider *p;
	struct sbx_error err;
	char link[512];
	size_t i;

	az_env_start(&e);
	azure_fake_add(e.fake, "a");
	azure_fake_add(e.fake, "b");
	azure_fake_set_page_size(e.fake, 1);
	p = az_env_provider(&e, -1);
	for (i = 0; i < sizeof(links) / sizeof(links[0]) + 1; i++) {
		if (i < sizeof(links) / sizeof(links[0]))
			snprintf(link, sizeof(link), "%s", links[i]);
		else /* the same origin, another group */
			snprintf(link, sizeof(link),
				 "%s/subscriptions/other/sandboxes",
				 azure_fake_endpoint(e.fake));
		azure_fake_set_next_link(e.fake, link);
		sbx_error_clear(&err);
		ck_assert_int_eq(az_list(p, &err), -EIO);
		ck_assert_msg(strstr(err.reason, "nextLink") != NULL, "%s",
			      err.reason);
		az_assert_clean(&err);
	}
	/* Only the first pages were asked for: the bearer went nowhere
	 * else. */
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), i);
	az_env_stop(&e);
}
END_TEST

START_TEST(record_reads_state_labels_and_route)
{
	struct az_env e;
	struct provider *p;
	struct provider_record rec;
	struct sbx_error err;

	az_env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_state(e.fake, ID, "Suspended");
	azure_fake_set_label(e.fake, ID, "team", "blue");
	azure_fake_set_port_url(e.fake, ID,
				"https://box--8971.eastus.adcproxy.io/");
	p = az_env_provider(&e, 0);
	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->record(p, ID, &rec, &err), 0);
	ck_assert_str_eq(rec.id, ID);
	ck_assert_int_eq(rec.state, PROVIDER_STATE_SUSPENDED);
	ck_assert_str_eq(provider_record_label(&rec, "team"), "blue");
	ck_assert_str_eq(provider_record_label(&rec, PROTO_TRANSPORT_LABEL),
			 PROTO_TRANSPORT_AGENT);
	ck_assert_str_eq(rec.route_hint,
			 "https://box--8971.eastus.adcproxy.io/");
	provider_record_cleanup(&rec);

	/* Gone: 404 is sandboxGone / ENOENT. */
	ck_assert_int_eq(p->ops->record(p, "missing", &rec, &err), -ENOENT);
	ck_assert_str_eq(err.failure, SBX_FAIL_GONE);
	ck_assert_int_eq(sbx_error_errno(&err), -ENOENT);
	/* A name that cannot be a sandbox never reaches the data plane. */
	ck_assert_int_eq(p->ops->record(p, "../x", &rec, &err), -ENOENT);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_GET), 2);
	az_env_stop(&e);
}
END_TEST

static void read_listed(struct provider *p, const char *id)
{
	struct provider_record rec;
	struct sbx_error err;

	sbx_error_clear(&err);
	ck_assert_msg(p->ops->record_listed(p, id, &rec, &err) == 0, "%s",
		      err.reason);
	provider_record_cleanup(&rec);
}

/*
 * record() always reads the data plane (the transport decides from a
 * record read before every operation): a label changed a moment ago is
 * seen at once. Only record_listed(), which shows a sandbox in a listing,
 * reuses what a list or read returned for a while, and not after a
 * resume or a stop.
 */
START_TEST(records_are_read_every_time_listings_reuse_them)
{
	struct provider_record rec;
	struct az_env e;
	struct provider *p;
	struct sbx_error err;
	char **ids = NULL;
	size_t n = 0;

	az_env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_port_url(e.fake, ID,
				"https://box--8971.eastus.adcproxy.io/");
	p = az_env_provider(&e, -1); /* the default: 2 s */
	az_read_record(p, ID);
	az_read_record(p, ID);
	az_read_record(p, ID);
	ck_assert_uint_eq(az_record_gets(&e), 3);
	ck_assert_uint_eq(az_stats(p).record_hits, 0);
	azure_fake_set_label(e.fake, ID, PROTO_TRANSPORT_LABEL, "other-v9");
	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->record(p, ID, &rec, &err), 0);
	ck_assert_str_eq(provider_record_label(&rec, PROTO_TRANSPORT_LABEL),
			 "other-v9");
	provider_record_cleanup(&rec);
	ck_assert_uint_eq(az_record_gets(&e), 4);

	/* A listing is shown from the list's records. */
	ck_assert_int_eq(p->ops->list(p, &ids, &n, &err), 0);
	az_ids_free(ids, n);
	read_listed(p, ID);
	read_listed(p, ID);
	ck_assert_uint_eq(az_record_gets(&e), 4);
	ck_assert_uint_eq(az_stats(p).record_hits, 2);
	/* After a resume or a stop the next one is fresh, then reused. */
	ck_assert_int_eq(p->ops->stop(p, ID, &err), 0);
	read_listed(p, ID);
	ck_assert_uint_eq(az_record_gets(&e), 5);
	read_listed(p, ID);
	ck_assert_uint_eq(az_record_gets(&e), 5);
	ck_assert_int_eq(p->ops->resume(p, ID, &err), 0);
	read_listed(p, ID);
	ck_assert_uint_eq(az_record_gets(&e), 6);
	provider_free(p);

	/* With a short time, a listed record expires. */
	e.prov = az_env_provider_with(&e, 1000, az_secret_env(&e),
				      azure_fake_ca_file(e.fake));
	read_listed(e.prov, ID);
	read_listed(e.prov, ID);
	ck_assert_uint_eq(az_record_gets(&e), 7);
	usleep(1100 * 1000);
	read_listed(e.prov, ID);
	ck_assert_uint_eq(az_record_gets(&e), 8);
	provider_free(e.prov);

	/* With 0, every one goes out. */
	e.prov = az_env_provider_with(&e, 0, az_secret_env(&e),
				      azure_fake_ca_file(e.fake));
	read_listed(e.prov, ID);
	read_listed(e.prov, ID);
	ck_assert_uint_eq(az_record_gets(&e), 10);
	az_env_stop(&e);
}
END_TEST

START_TEST(route_opens_the_agent_port_when_there_is_none)
{
	struct az_env e;
	struct provider *p;
	struct sbx_error err;
	char *url = NULL;

	az_env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_add_url(e.fake, ID,
			       "https://box--8971.eastus.adcproxy.io/");
	p = az_env_provider(&e, -1);
	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->route(p, ID, &url, &err), 0);
	ck_assert_str_eq(url, "https://box--8971.eastus.adcproxy.io/");
	free(url);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_PORTS_ADD), 1);
	ck_assert_uint_eq(az_record_gets(&e), 2);
	/* Now the port is there: one read. */
	ck_assert_int_eq(p->ops->route(p, ID, &url, &err), 0);
	free(url);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_PORTS_ADD), 1);
	ck_assert_uint_eq(az_record_gets(&e), 3);
	ck_assert_uint_eq(az_stats(p).routes, 2);

	/* A stopped sandbox hands out no route (its proxy leads nowhere),
	 * and gets no port opened. */
	azure_fake_set_state(e.fake, ID, "Stopped");
	ck_assert_int_eq(p->ops->route(p, ID, &url, &err), -EIO);
	ck_assert_ptr_nonnull(strstr(err.reason, "is Stopped, not Running"));
	ck_assert(err.retryable);
	azure_fake_add(e.fake, "asleep");
	azure_fake_set_state(e.fake, "asleep", "Suspended");
	ck_assert_int_eq(p->ops->route(p, "asleep", &url, &err), -EIO);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_PORTS_ADD), 1);

	/* A port without a URL yet is "not ready", retryable. */
	azure_fake_add(e.fake, "other");
	ck_assert_int_eq(p->ops->route(p, "other", &url, &err), -EIO);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_UNREACHABLE");
	ck_assert(err.retryable);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_PORTS_ADD), 2);
	az_env_stop(&e);
}
END_TEST

START_TEST(credential_is_read_through_the_file_api)
{
	static const char cred[] =
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
	struct az_env e;
	struct provider *p;
	struct sbx_error err;
	char *bytes = NULL, path[256];
	size_t len = 0;

	p = az_env_box(&e, -1);
	sbx_error_clear(&err);
	/* Not written yet: -ENOENT, which the core reports as "not
	 * ready". */
	ck_assert_int_eq(p->ops->credential(p, ID, &bytes, &len, &err),
			 -ENOENT);
	azure_fake_set_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH, cred, 44);
	ck_assert_int_eq(p->ops->credential(p, ID, &bytes, &len, &err), 0);
	ck_assert_uint_eq(len, 44);
	ck_assert_mem_eq(bytes, cred, 44);
	free(bytes);
	azure_fake_last_path(e.fake, path, sizeof(path));
	ck_assert_str_eq(path, AZURE_FAKE_TOKEN_PATH);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_CREDENTIAL), 2);
	az_env_stop(&e);
}
END_TEST

START_TEST(judge_accepts_documented_policies_and_refuses_malformed_ones)
{
	static const struct {
		const char *egress;
		const char *vnet;
		int rc;
	} rows[] = {
		{"{\"defaultAction\":\"Deny\"}", NULL, 0},
		{"{\"defaultAction\":\"Allow\",\"hostRules\":[{\"pattern\":"
		 "\"x\",\"action\":\"Deny\"}],\"trafficInspection\":\"None\"}",
		 "vnet-1", 0},
		/* Every rule shape the data plane documents. */
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"match\":{"
		 "\"host\":\"api.x\"},\"action\":{\"type\":\"Transform\","
		 "\"headers\":[{\"name\":\"Authorization\",\"value\":"
		 "\"k\"}]}},{\"match\":{\"host\":\"old.x\"},\"action\":{"
		 "\"type\":\"Rewrite\",\"rewrite\":{\"host\":\"new.x\"}}},"
		 "{\"action\":{\"type\":\"Deny\"}},{\"match\":{\"path\":"
		 "\"/upload\",\"method\":\"POST\"},\"action\":{\"type\":"
		 "\"Deny\"}}],\"trafficInspection\":\"Full\"}",
		 NULL, 0},
		{NULL, NULL, -EPROTO},
		{"[]", NULL, -EPROTO},
		{"{}", NULL, -EPROTO},
		{"{\"defaultAction\":\"Open\"}", NULL, -EPROTO},
		{"{\"defaultAction\":\"Deny\",\"rules\":7}", "v", -EPROTO},
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"action\":{"
		 "\"type\":\"Redirect\"}}]}",
		 NULL, -EPROTO},
	};
	struct az_env e;
	struct provider *p;
	size_t i;

	p = az_env_box(&e, 0);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct provider_record rec;
		struct sbx_error err;
		int rc;

		azure_fake_set_egress(e.fake, ID, rows[i].egress);
		azure_fake_set_vnet(e.fake, ID, rows[i].vnet);
		sbx_error_clear(&err);
		ck_assert_int_eq(p->ops->record(p, ID, &rec, &err), 0);
		rc = p->ops->judge(p, &rec, &err);
		provider_record_cleanup(&rec);
		ck_assert_msg(rc == rows[i].rc, "row %zu: %d %s", i, rc,
			      err.reason);
		if (rc < 0) {
			ck_assert_str_eq(err.failure,
					 SBX_FAIL_TRANSPORT_INVALID);
			ck_assert_int_eq(sbx_error_errno(&err), -EPROTO);
			ck_assert_ptr_nonnull(strstr(err.reason, "egress"));
		}
	}
	az_env_stop(&e);
}
END_TEST

static void exec_result_init(struct provider_exec_result *res)
{
	memset(res, 0, sizeof(*res));
	buf_init(&res->out, 1024 * 1024);
	buf_init(&res->err, 64 * 1024);
}

START_TEST(native_sessions_read_and_run_through_the_data_plane)
{
	static const char blob[] = "bin\0ary\n";
	struct provider_exec_result res;
	struct buf b = BUF_INIT(1024 * 1024);
	struct sbx_error err;
	struct provider *p;
	struct az_env e;
	char *root, *path, cmd[256], cwd[256];
	unsigned calls;

	az_env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_label(e.fake, ID, PROTO_TRANSPORT_LABEL, NULL);
	root = xasprintf("%s/root", e.dir);
	path = xasprintf("%s/hello.txt", root);
	th_write_file(path, "native\n", 7);
	free(path);
	path = xasprintf("%s/dir/blob", root);
	th_write_file(path, blob, sizeof(blob) - 1);
	free(path);
	azure_fake_set_root(e.fake, ID, root);
	p = az_env_provider(&e, -1);

	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->native_read(p, ID, "hello.txt", &b, &err), 0);
	ck_assert_str_eq(b.data, "native\n");
	azure_fake_last_path(e.fake, cwd, sizeof(cwd));
	ck_assert_str_eq(cwd, "/sandbox/hello.txt");
	buf_reset(&b);
	ck_assert_int_eq(p->ops->native_read(p, ID, "/dir//blob", &b, &err), 0);
	ck_assert_uint_eq(b.len, sizeof(blob) - 1);
	ck_assert_mem_eq(b.data, blob, sizeof(blob) - 1);
	buf_reset(&b);
	ck_assert_int_eq(p->ops->native_read(p, ID, "missing", &b, &err),
			 -ENOENT);
	ck_assert_int_eq(sbx_error_errno(&err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.reason, "PATH_NOT_FOUND"));
	ck_assert_int_lt(p->ops->native_read(p, ID, "dir", &b, &err), 0);
	calls = azure_fake_calls(e.fake, AZF_FILES);
	/* Refused before any request. */
	ck_assert_int_eq(p->ops->native_read(p, ID, "../etc/passwd", &b, &err),
			 -EACCES);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_FILES), calls);
	/* A file over the caller's bound. */
	b.max = 4;
	ck_assert_int_eq(p->ops->native_read(p, ID, "hello.txt", &b, &err),
			 -EFBIG);
	ck_assert_int_eq(sbx_error_errno(&err), -EFBIG);
	buf_cleanup(&b);

	/* Output with NUL bytes, stderr and the exit code. */
	exec_result_init(&res);
	ck_assert_int_eq(p->ops->native_exec(p, ID,
					     "printf 'a\\000b'; echo err >&2; "
					     "exit 3",
					     NULL, &res, &err),
			 0);
	ck_assert_uint_eq(res.out.len, 3);
	ck_assert_mem_eq(res.out.data, "a\0b", 3);
	ck_assert_str_eq(res.err.data, "err\n");
	ck_assert(res.has_exit);
	ck_assert_int_eq(res.exit_code, 3);
	azure_fake_last_exec(e.fake, cmd, sizeof(cmd), cwd, sizeof(cwd));
	ck_assert_str_eq(cwd, "/sandbox");
	provider_exec_result_cleanup(&res);
	exec_result_init(&res);
	ck_assert_int_eq(p->ops->native_exec(p, ID, "pwd", "dir", &res, &err),
			 0);
	azure_fake_last_exec(e.fake, cmd, sizeof(cmd), cwd, sizeof(cwd));
	ck_assert_str_eq(cmd, "pwd");
	ck_assert_str_eq(cwd, "/sandbox/dir");
	ck_assert_ptr_nonnull(strstr(res.out.data, "/root/dir\n"));
	provider_exec_result_cleanup(&res);
	exec_result_init(&res);
	calls = azure_fake_calls(e.fake, AZF_EXEC);
	ck_assert_int_eq(p->ops->native_exec(p, ID, "true", "../x", &res, &err),
			 -EACCES);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_EXEC), calls);
	provider_exec_result_cleanup(&res);
	free(root);
	az_env_stop(&e);
}
END_TEST

/* ---- bad answers ------------------------------------------------------------- */

static int call_route(struct provider *p, enum azure_fake_route r,
		      struct sbx_error *err)
{
	struct provider_record rec;
	struct provider_exec_result res;
	char **ids = NULL, *bytes = NULL;
	size_t n = 0, len = 0;
	int rc;

	switch (r) {
	case AZF_LIST:
		rc = p->ops->list(p, &ids, &n, err);
		if (rc == 0)
			az_ids_free(ids, n);
		return rc;
	case AZF_GET:
		rc = p->ops->record(p, ID, &rec, err);
		if (rc == 0)
			provider_record_cleanup(&rec);
		return rc;
	case AZF_CREDENTIAL:
		rc = p->ops->credential(p, ID, &bytes, &len, err);
		free(bytes);
		return rc;
	case AZF_EXEC:
		exec_result_init(&res);
		rc = p->ops->native_exec(p, ID, "true", NULL, &res, err);
		provider_exec_result_cleanup(&res);
		return rc;
	case AZF_RESUME:
		return p->ops->resume(p, ID, err);
	case AZF_STOP:
		return p->ops->stop(p, ID, err);
	default:
		ck_abort_msg("no call for route %d", (int)r);
		return -EINVAL;
	}
}

START_TEST(bad_answers_are_clear_errors)
{
	static const char *const JSONT = "application/json";
	static const struct {
		enum azure_fake_route r;
		int status;
		const char *ctype, *body, *headers;
		enum sbx_code code;
		int err;
		const char *needle;
	} rows[] = {
		{AZF_GET, 200, JSONT, "{\"id\":\"box\"", NULL,
		 SBX_UNEXPECTED_FORMAT, EIO, "malformed: not valid JSON"},
		{AZF_GET, 200, JSONT,
		 "{\"id\":\"box\",\"state\":\"Running\","
		 "\"ports\":9}",
		 NULL, SBX_UNEXPECTED_FORMAT, EIO, "\"ports\" is not an array"},
		{AZF_GET, 200, JSONT,
		 "{\"id\":\"other\",\"state\":\"Running\"}", NULL,
		 SBX_UNEXPECTED_FORMAT, EIO, "another sandbox"},
		{AZF_GET, 200, "text/html", "<html></html>", NULL,
		 SBX_UNEXPECTED_FORMAT, EIO, "content type 'text/html'"},
		{AZF_GET, 200, NULL, "{}", NULL, SBX_UNEXPECTED_FORMAT, EIO,
		 "content type '(none)'"},
		{AZF_GET, 200, "application/jsonx", "{}", NULL,
		 SBX_UNEXPECTED_FORMAT, EIO, "not JSON"},
		{AZF_GET, 302, NULL, NULL,
		 "Location: https://evil.example/steal\r\n",
		 SBX_UNEXPECTED_FORMAT, EIO, "redirect (HTTP 302)"},
		{AZF_GET, 307, NULL, NULL,
		 "Location: https://management.eastus.azuredevcompute.io/x\r\n",
		 SBX_UNEXPECTED_FORMAT, EIO, "redirect (HTTP 307)"},
		{AZF_GET, 500, JSONT,
		 "{\"error\":{\"code\":\"InternalError\",\"message\":\"boom\"}"
		 "}",
		 NULL, SBX_UNREACHABLE, EIO, "HTTP 500 (InternalError: boom)"},
		{AZF_GET, 500, "text/plain", "you sent {{bearer}}", NULL,
		 SBX_UNREACHABLE, EIO, "(you sent *"},
		{AZF_GET, 429, NULL, "slow down", NULL, SBX_UNREACHABLE, EIO,
		 "HTTP 429 (slow down)"},
		{AZF_GET, 403, JSONT,
		 "{\"error\":{\"code\":\"AuthorizationFailed\",\"message\":"
		 "\"no\"}}",
		 NULL, SBX_COMMAND_FAILED, EACCES, "AuthorizationFailed"},
		{AZF_GET, 409, NULL, NULL, NULL, SBX_COMMAND_FAILED, EIO,
		 "HTTP 409"},
		{AZF_LIST, 200, JSONT, "{\"value\":{}}", NULL,
		 SBX_UNEXPECTED_FORMAT, EIO, "malformed"},
		{AZF_LIST, 200, "text/plain", "{\"value\":[]}", NULL,
		 SBX_UNEXPECTED_FORMAT, EIO, "content type"},
		{AZF_LIST, 301, NULL, NULL, "Location: https://x/\r\n",
		 SBX_UNEXPECTED_FORMAT, EIO, "redirect"},
		{AZF_EXEC, 200, JSONT, "{\"stdout\":", NULL,
		 SBX_OUTCOME_UNKNOWN, EIO, "may have run"},
		{AZF_EXEC, 502, NULL, NULL, NULL, SBX_OUTCOME_UNKNOWN, EIO,
		 "may have run"},
		{AZF_EXEC, 200, "text/plain", "{}", NULL, SBX_UNEXPECTED_FORMAT,
		 EIO, "content type"},
		{AZF_RESUME, 302, NULL, NULL, "Location: https://x/\r\n",
		 SBX_UNEXPECTED_FORMAT, EIO, "redirect"},
		{AZF_STOP, 503, NULL, NULL, NULL, SBX_UNREACHABLE, EIO,
		 "HTTP 503"},
		{AZF_CREDENTIAL, 500, NULL, NULL, NULL, SBX_UNREACHABLE, EIO,
		 "credential"},
		{AZF_CREDENTIAL, 301, NULL, NULL, "Location: https://x/\r\n",
		 SBX_UNEXPECTED_FORMAT, EIO, "redirect"},
	};
	struct az_env e;
	struct provider *p;
	size_t i;

	p = az_env_box(&e, 0);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct sbx_error err;
		unsigned before = azure_fake_calls(e.fake, rows[i].r);
		int rc;

		azure_fake_fail(e.fake, rows[i].r, 1, rows[i].status,
				rows[i].ctype, rows[i].body, rows[i].headers);
		sbx_error_clear(&err);
		rc = call_route(p, rows[i].r, &err);
		ck_assert_msg(rc == -rows[i].err, "row %zu: %d %s", i, rc,
			      err.reason);
		ck_assert_msg(err.code == rows[i].code, "row %zu: %s %s", i,
			      sbx_code_name(err.code), err.reason);
		ck_assert_int_eq(err.retryable,
				 rows[i].code == SBX_UNREACHABLE);
		ck_assert_msg(strstr(err.reason, rows[i].needle) != NULL,
			      "row %zu: %s", i, err.reason);
		az_assert_clean(&err);
		/* One request: no retry, no redirect followed. */
		ck_assert_uint_eq(azure_fake_calls(e.fake, rows[i].r),
				  before + 1);
	}
	ck_assert_uint_eq(az_stats(p).retried_401, 0);
	az_env_stop(&e);
}
END_TEST

START_TEST(a_401_from_the_data_plane_refreshes_the_token_once)
{
	struct sbx_error err;
	struct provider *p;
	struct az_env e;

	p = az_env_box(&e, 0);
	az_read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 1);
	/* A revoked token: refused once, then a fresh one works. */
	azure_fake_revoke_tokens(e.fake);
	az_read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 2);
	/* The refused call is counted apart (before the route). */
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 1);
	ck_assert_uint_eq(az_record_gets(&e), 2);
	ck_assert_uint_eq(az_stats(p).retried_401, 1);
	/* Refused twice: the call fails, after one retry only. */
	azure_fake_fail(e.fake, AZF_GET, 2, 401, "application/json",
			"{\"error\":{\"code\":\"InvalidAuthenticationToken\","
			"\"message\":\"expired\"}}",
			NULL);
	sbx_error_clear(&err);
	{
		struct provider_record rec;

		ck_assert_int_eq(p->ops->record(p, ID, &rec, &err), -EACCES);
	}
	ck_assert_str_eq(err.failure, "azureRefused");
	ck_assert_ptr_nonnull(strstr(err.reason, "InvalidAuthenticationToken"));
	az_assert_clean(&err);
	ck_assert_uint_eq(az_record_gets(&e), 4);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 3);
	ck_assert_uint_eq(az_stats(p).retried_401, 2);
	/* The token of the retry is kept. */
	az_read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 3);
	az_env_stop(&e);
}
END_TEST

void azure_data_plane_cases(Suite *s)
{
	TCASE_TABLE(
		s, "data_plane", NULL, NULL, 60, list_follows_next_links,
		list_refuses_a_next_link_elsewhere,
		record_reads_state_labels_and_route,
		records_are_read_every_time_listings_reuse_them,
		route_opens_the_agent_port_when_there_is_none,
		credential_is_read_through_the_file_api,
		judge_accepts_documented_policies_and_refuses_malformed_ones,
		native_sessions_read_and_run_through_the_data_plane,
		bad_answers_are_clear_errors,
		a_401_from_the_data_plane_refreshes_the_token_once);
}
