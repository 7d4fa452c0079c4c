/* SPDX-License-Identifier: MIT */
/*
 * The Azure provider: proto_azure's decoders, the route policy and the
 * settings (pure), then provider_azure and azure_auth against the fake
 * Azure of azure_fake.c over TLS (test CA, pinned names): the data-plane
 * calls and their counts, the record cache, the judge, native sessions,
 * every credential source, and the bad answers (malformed records, wrong
 * content types, redirects, refusals, 401 refreshed once), each a clear
 * error that carries no credential. Last, real sandbox-agents behind the
 * fake's TLS proxy through the transport core.
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
#include "tests/check_suites.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "client/transport.h"

#define ID "box"
/* A string literal as (pointer, length). */
#define LIT(s) s, sizeof(s) - 1

/* ---- proto_azure ------------------------------------------------------- */

static const char FULL_RECORD[] =
	"{\"id\":\"box\",\"state\":\"Running\","
	"\"labels\":{\"alienAgentTransport\":\"native-file-v1\",\"a\":\"b\"},"
	"\"egressPolicy\":{\"defaultAction\":\"Deny\","
	"\"hostRules\":[{\"pattern\":\"*.pypi.org\",\"action\":\"Allow\"}],"
	"\"rules\":[{\"match\":{\"host\":\"github.com\"},"
	"\"action\":{\"type\":\"Allow\"}}],\"trafficInspection\":\"Full\"},"
	"\"vnetConnectionName\":\"vnet-1\","
	"\"ports\":[{\"port\":8080,\"url\":null},"
	"{\"port\":8971,\"url\":\"https://box--8971.eastus.adcproxy.io/\","
	"\"auth\":{\"anonymous\":true},\"activationMode\":\"Always\","
	"\"protocol\":\"http\"}],\"unknown\":{\"nested\":[1,2]}}";

START_TEST(sandbox_decode_reads_every_field)
{
	struct proto_azure_sandbox s;
	const struct proto_azure_port *p;
	const char *why = NULL;

	ck_assert_int_eq(proto_azure_sandbox_decode(
				 FULL_RECORD, strlen(FULL_RECORD), &s, &why),
			 0);
	ck_assert_str_eq(s.rec.id, "box");
	ck_assert_int_eq(s.rec.state, PROTO_RECORD_RUNNING);
	ck_assert_str_eq(proto_record_label(&s.rec, "a"), "b");
	ck_assert_uint_eq(s.nports, 2);
	ck_assert_ptr_null(s.ports[0].url);
	ck_assert_int_eq(s.ports[0].anonymous, -1);
	p = proto_azure_sandbox_port(&s, 8971);
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->url, "https://box--8971.eastus.adcproxy.io/");
	ck_assert_int_eq(p->anonymous, 1);
	ck_assert_str_eq(p->activation_mode, "Always");
	ck_assert_str_eq(p->protocol, "http");
	ck_assert_ptr_null(proto_azure_sandbox_port(&s, 22));
	ck_assert(s.egress.present && s.egress.object);
	ck_assert_str_eq(s.egress.default_action, "Deny");
	ck_assert_str_eq(s.egress.traffic_inspection, "Full");
	ck_assert_uint_eq(s.egress.nhost_rules, 1);
	ck_assert_uint_eq(s.egress.nrules, 1);
	ck_assert_ptr_null(s.egress.problem);
	ck_assert_str_eq(s.vnet, "vnet-1");
	proto_azure_sandbox_cleanup(&s);
}
END_TEST

START_TEST(sandbox_decode_refuses_malformed_records)
{
	static const struct {
		const char *json;
		int rc;
		const char *why;
	} rows[] = {
		{"not json", -EBADMSG, "JSON"},
		{"[1]", -EBADMSG, "object"},
		{"{\"state\":\"Running\"}", -EINVAL, "\"id\""},
		{"{\"id\":\"x\"}", -EINVAL, "\"state\""},
		{"{\"id\":\"x\",\"state\":\"Running\",\"labels\":[]}", -EINVAL,
		 "labels"},
		{"{\"id\":\"x\",\"state\":\"Running\",\"ports\":{}}", -EINVAL,
		 "\"ports\" is not an array"},
		{"{\"id\":\"x\",\"state\":\"Running\",\"ports\":[7]}", -EINVAL,
		 "not an object"},
		{"{\"id\":\"x\",\"state\":\"Running\",\"ports\":[{\"port\":"
		 "70000}]}",
		 -EINVAL, "port number"},
		{"{\"id\":\"x\",\"state\":\"Running\",\"ports\":[{\"port\":"
		 "8971,\"url\":5}]}",
		 -EINVAL, "url"},
		{"{\"id\":\"x\",\"state\":\"Running\",\"ports\":[{\"port\":"
		 "8971,\"auth\":{\"anonymous\":\"yes\"}}]}",
		 -EINVAL, "anonymous"},
		{"{\"id\":\"x\",\"state\":\"Running\","
		 "\"vnetConnectionName\":3}",
		 -EINVAL, "vnetConnectionName"},
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct proto_azure_sandbox s;
		const char *why = NULL;
		int rc = proto_azure_sandbox_decode(
			rows[i].json, strlen(rows[i].json), &s, &why);

		ck_assert_msg(rc == rows[i].rc, "row %zu: %d", i, rc);
		ck_assert_msg(why != NULL && strstr(why, rows[i].why) != NULL,
			      "row %zu: %s", i, why ? why : "(null)");
	}
}
END_TEST

START_TEST(egress_policy_is_described_not_judged)
{
	static const struct {
		const char *egress; /* NULL: absent */
		bool present, object;
		const char *problem; /* NULL: well formed */
	} rows[] = {
		{NULL, false, false, NULL},
		{"null", false, false, NULL},
		{"\"Deny\"", true, false, "not an object"},
		{"{}", true, true, "no defaultAction"},
		{"{\"defaultAction\":\"Maybe\"}", true, true, "neither Allow"},
		{"{\"defaultAction\":1}", true, true, "not a string"},
		{"{\"defaultAction\":\"Allow\",\"hostRules\":[{\"pattern\":"
		 "\"x\",\"action\":\"Block\"}]}",
		 true, true, "hostRules entry's action"},
		{"{\"defaultAction\":\"Allow\",\"hostRules\":{}}", true, true,
		 "hostRules is not an array"},
		/* Rules match on host, path or method, or on nothing at
		 * all, and may transform or rewrite what they match. */
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"match\":{},"
		 "\"action\":{\"type\":\"Allow\"}}]}",
		 true, true, NULL},
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"action\":{"
		 "\"type\":\"Transform\",\"headers\":[{\"name\":\"A\","
		 "\"value\":\"b\"}]}}]}",
		 true, true, NULL},
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"match\":{"
		 "\"path\":\"/v1/*\",\"method\":\"GET\"},\"action\":{"
		 "\"type\":\"Rewrite\",\"rewrite\":{\"host\":\"h\"}}}]}",
		 true, true, NULL},
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"match\":{"
		 "\"host\":\"a\"},\"action\":{\"type\":\"Block\"}}]}",
		 true, true, "action.type"},
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"match\":{"
		 "\"host\":\"a\"}}]}",
		 true, true, "action.type"},
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"match\":\"a\","
		 "\"action\":{\"type\":\"Allow\"}}]}",
		 true, true, "match is not an object"},
		{"{\"defaultAction\":\"Deny\",\"rules\":[{\"match\":{"
		 "\"host\":1},\"action\":{\"type\":\"Allow\"}}]}",
		 true, true, "not a string"},
		{"{\"defaultAction\":\"Deny\",\"trafficInspection\":\"Some\"}",
		 true, true, "trafficInspection"},
		{"{\"defaultAction\":\"Allow\",\"trafficInspection\":null}",
		 true, true, NULL},
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct proto_azure_sandbox s;
		char json[1024];

		if (rows[i].egress != NULL)
			snprintf(json, sizeof(json),
				 "{\"id\":\"x\",\"state\":\"Running\","
				 "\"egressPolicy\":%s}",
				 rows[i].egress);
		else
			snprintf(json, sizeof(json),
				 "{\"id\":\"x\",\"state\":\"Running\"}");
		ck_assert_int_eq(proto_azure_sandbox_decode(json, strlen(json),
							    &s, NULL),
				 0);
		ck_assert_msg(s.egress.present == rows[i].present &&
				      s.egress.object == rows[i].object,
			      "row %zu", i);
		if (rows[i].problem == NULL)
			ck_assert_msg(s.egress.problem == NULL, "row %zu: %s",
				      i, s.egress.problem);
		else
			ck_assert_msg(s.egress.problem != NULL &&
					      strstr(s.egress.problem,
						     rows[i].problem) != NULL,
				      "row %zu: %s", i,
				      s.egress.problem ? s.egress.problem
						       : "(null)");
		proto_azure_sandbox_cleanup(&s);
	}
}
END_TEST

START_TEST(list_decode_keeps_odd_records_by_id)
{
	static const char page[] =
		"{\"value\":[{\"id\":\"a\",\"state\":\"Running\"},"
		"{\"id\":\"b\",\"labels\":7}],"
		"\"nextLink\":\"https://x/next\"}";
	struct proto_azure_list l;
	const char *why = NULL;

	ck_assert_int_eq(proto_azure_list_decode(page, strlen(page), &l, &why),
			 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.ids[0], "a");
	ck_assert_str_eq(l.ids[1], "b");
	ck_assert(l.decoded[0]);
	ck_assert(!l.decoded[1]);
	ck_assert_str_eq(l.next_link, "https://x/next");
	proto_azure_list_cleanup(&l);

	ck_assert_int_eq(proto_azure_list_decode(LIT("{\"value\":[],"
						     "\"nextLink\":\"\"}"),
						 &l, &why),
			 0);
	ck_assert_uint_eq(l.n, 0);
	ck_assert_ptr_null(l.next_link);
	proto_azure_list_cleanup(&l);

	ck_assert_int_eq(
		proto_azure_list_decode(LIT("{\"values\":[]}"), &l, &why),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "\"value\""));
	ck_assert_int_eq(proto_azure_list_decode(LIT("{\"value\":[{\"state\":"
						     "\"Running\"}]}"),
						 &l, &why),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "no id"));
	ck_assert_int_eq(
		proto_azure_list_decode(LIT("{\"value\":[],\"nextLink\":"
					    "4}"),
					&l, &why),
		-EINVAL);
}
END_TEST

START_TEST(exec_decode_keeps_every_byte)
{
	static const char answer[] =
		"{\"x\":{\"deep\":[true,false,null,-1.5e3,\"s\\\"\"]},"
		"\"stdout\":\"a\\u0000b\\n\\ud83d\\ude00\\t\\\"\\\\\\/\","
		"\"stderr\":\"err \\u00e9\",\"exitCode\":3}";
	struct proto_azure_exec e;
	const char *why = NULL;

	proto_azure_exec_init(&e, 0, 0);
	ck_assert_int_eq(
		proto_azure_exec_decode(answer, strlen(answer), &e, &why), 0);
	ck_assert_uint_eq(e.out.len, 12);
	ck_assert_mem_eq(e.out.data, "a\0b\n\xf0\x9f\x98\x80\t\"\\/", 12);
	ck_assert_str_eq(e.err.data, "err \xc3\xa9");
	ck_assert(e.has_exit);
	ck_assert_int_eq(e.exit_code, 3);
	ck_assert(!e.truncated);

	/* No exit code; null streams. */
	ck_assert_int_eq(proto_azure_exec_decode(LIT("{\"stdout\":null,"
						     "\"exitCode\":null}"),
						 &e, &why),
			 0);
	ck_assert(!e.has_exit);
	ck_assert_uint_eq(e.out.len, 0);
	proto_azure_exec_cleanup(&e);

	/* Output past the caller's bound is dropped and said so. */
	proto_azure_exec_init(&e, 4, 4);
	ck_assert_int_eq(proto_azure_exec_decode(LIT("{\"stdout\":\"123456\","
						     "\"exitCode\":0}"),
						 &e, &why),
			 0);
	ck_assert(e.truncated);
	ck_assert_uint_le(e.out.len, 4);
	proto_azure_exec_cleanup(&e);

	proto_azure_exec_init(&e, 0, 0);
	ck_assert_int_eq(proto_azure_exec_decode(LIT("{\"stdout\":\"a\","
						     "\"stdout\":\"b\"}"),
						 &e, &why),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "twice"));
	ck_assert_int_eq(
		proto_azure_exec_decode(LIT("{\"exitCode\":1.5}"), &e, &why),
		-EINVAL);
	ck_assert_int_eq(proto_azure_exec_decode(
				 LIT("{\"exitCode\":4294967296}"), &e, &why),
			 -EINVAL);
	ck_assert_int_eq(
		proto_azure_exec_decode(LIT("{\"stdout\":\"a\""), &e, &why),
		-EBADMSG);
	ck_assert_int_eq(
		proto_azure_exec_decode(LIT("{\"stdout\":\"\x01\"}"), &e, &why),
		-EINVAL);
	ck_assert_int_eq(proto_azure_exec_decode(LIT("[]"), &e, &why),
			 -EBADMSG);
	ck_assert_int_eq(proto_azure_exec_decode(LIT("{} x"), &e, &why),
			 -EBADMSG);
	proto_azure_exec_cleanup(&e);
}
END_TEST

START_TEST(token_decode_reads_every_source)
{
	struct proto_azure_token t;
	const char *why = NULL;
	struct tm tm;
	time_t when;

	ck_assert_int_eq(
		proto_azure_token_decode(LIT("{\"access_token\":\"abc\","
					     "\"expires_in\":3599}"),
					 1000, &t, &why),
		0);
	ck_assert_str_eq(t.token, "abc");
	ck_assert_int_eq(t.expires_on, 4599);
	proto_azure_token_cleanup(&t);
	/* Managed identity: strings of digits. */
	ck_assert_int_eq(
		proto_azure_token_decode(LIT("{\"access_token\":\"abc\","
					     "\"expires_on\":\"1700000000\","
					     "\"expires_in\":\"5\"}"),
					 1000, &t, &why),
		0);
	ck_assert_int_eq(t.expires_on, 1700000000);
	proto_azure_token_cleanup(&t);
	/* The CLI: local time. */
	ck_assert_int_eq(proto_azure_token_decode(
				 LIT("{\"accessToken\":\"cli\",\"expiresOn\":"
				     "\"2030-01-02 03:04:05.123456\"}"),
				 1000, &t, &why),
			 0);
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = 130;
	tm.tm_mon = 0;
	tm.tm_mday = 2;
	tm.tm_hour = 3;
	tm.tm_min = 4;
	tm.tm_sec = 5;
	tm.tm_isdst = -1;
	when = mktime(&tm);
	ck_assert_int_eq(t.expires_on, (int64_t)when);
	proto_azure_token_cleanup(&t);

	ck_assert_int_eq(
		proto_azure_token_decode(LIT("{\"access_token\":\"abc\"}"), 0,
					 &t, &why),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "expiry"));
	ck_assert_int_eq(
		proto_azure_token_decode(LIT("{\"access_token\":\"a b\","
					     "\"expires_in\":1}"),
					 0, &t, &why),
		-EINVAL);
	ck_assert_int_eq(
		proto_azure_token_decode(LIT("{\"access_token\":\"a\\r\\n"
					     "X: y\",\"expires_in\":1}"),
					 0, &t, &why),
		-EINVAL);
	ck_assert_int_eq(proto_azure_token_decode(LIT("{\"expires_in\":1}"), 0,
						  &t, &why),
			 -EINVAL);
	ck_assert_int_eq(
		proto_azure_token_decode(LIT("{\"access_token\":\"a\","
					     "\"expires_in\":\"soon\"}"),
					 0, &t, &why),
		-EINVAL);
}
END_TEST

START_TEST(error_bodies_of_both_services)
{
	char code[32], msg[64];

	ck_assert(proto_azure_error_decode(
		LIT("{\"error\":{\"code\":\"SandboxNotFound\",\"message\":"
		    "\"gone\\n"
		    "now\"}}"),
		code, sizeof(code), msg, sizeof(msg)));
	ck_assert_str_eq(code, "SandboxNotFound");
	ck_assert_str_eq(msg, "gone now");
	ck_assert(proto_azure_error_decode(
		LIT("{\"error\":\"invalid_client\",\"error_description\":"
		    "\"AADSTS7000215: bad\"}"),
		code, sizeof(code), msg, sizeof(msg)));
	ck_assert_str_eq(code, "invalid_client");
	ck_assert_str_eq(msg, "AADSTS7000215: bad");
	ck_assert(!proto_azure_error_decode(LIT("<html>"), code, sizeof(code),
					    msg, sizeof(msg)));
	ck_assert_str_eq(code, "");
}
END_TEST

START_TEST(requests_encode_and_decode)
{
	struct buf b = BUF_INIT(0);
	char *cmd = NULL, *cwd = NULL, *mode = NULL;
	unsigned port = 0;
	bool anon = false;

	ck_assert_int_eq(
		proto_azure_exec_req_encode("echo \"hi\"", "/sandbox", &b), 0);
	ck_assert_str_eq(b.data, "{\"command\":\"echo \\\"hi\\\"\","
				 "\"workingDirectory\":\"/sandbox\"}");
	ck_assert_int_eq(proto_azure_exec_req_decode(b.data, b.len, &cmd, &cwd),
			 0);
	ck_assert_str_eq(cmd, "echo \"hi\"");
	ck_assert_str_eq(cwd, "/sandbox");
	free(cmd);
	free(cwd);
	buf_reset(&b);
	ck_assert_int_eq(proto_azure_port_add_encode(8971, true, "Always", &b),
			 0);
	ck_assert_str_eq(b.data, "{\"port\":8971,\"auth\":{\"anonymous\":true},"
				 "\"activationMode\":\"Always\"}");
	ck_assert_int_eq(
		proto_azure_port_add_decode(b.data, b.len, &port, &anon, &mode),
		0);
	ck_assert_uint_eq(port, 8971);
	ck_assert(anon);
	ck_assert_str_eq(mode, "Always");
	free(mode);
	buf_cleanup(&b);
}
END_TEST

/* ---- the route policy and the settings --------------------------------- */

START_TEST(route_policy)
{
	static const struct {
		const char *url;
		bool allowed;
	} rows[] = {
		{"https://box--8971.eastus.adcproxy.io/", true},
		{"https://box--8971.eastus.adcproxy.io", true},
		{"https://box--8971.eastus.adcproxy.io:4443/", true},
		{"https://app.nice-sea-1.westeurope.azurecontainerapps.io/",
		 true},
		{"https://BOX.EASTUS.ADCPROXY.IO/", true},
		{"http://box--8971.eastus.adcproxy.io/", false},
		{"HTTPS://box.adcproxy.io/", false},
		{"https://adcproxy.io/", false},
		{"https://.adcproxy.io/", false},
		{"https://evil.com/", false},
		{"https://box.adcproxy.io.evil.com/", false},
		{"https://boxadcproxy.io/", false},
		{"https://box.adcproxy.io./", false},
		{"https://user@box.adcproxy.io/", false},
		{"https://user:pw@box.adcproxy.io/", false},
		{"https://:pw@box.adcproxy.io/", false},
		{"https://@box.adcproxy.io/", false},
		{"https://box.adcproxy.io/?a=b", false},
		{"https://box.adcproxy.io/?", false},
		{"https://box.adcproxy.io/#x", false},
		{"https://box.adcproxy.io?x", false},
		{"https://box.adcproxy.io/v1/", false},
		{"https://box.adcproxy.io//", false},
		{"https://box.adcproxy.io:0/", false},
		{"https://box.adcproxy.io:99999/", false},
		{"https://box.adcproxy.io:/", false},
		{"https://box.adcproxy.io:44a/", false},
		{"https://[::1]/", false},
		{"https://127.0.0.1/", false},
		{"https://box%2eadcproxy.io/", false},
		{"https://box.adcproxy.io/ ", false},
		{"https://bo x.adcproxy.io/", false},
		{"https://box..adcproxy.io/", false},
		{"https://box.adcproxy.io\\@evil.com/", false},
		{"", false},
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_msg(provider_azure_route_allowed(rows[i].url) ==
				      rows[i].allowed,
			      "%s", rows[i].url);
	ck_assert(!provider_azure_route_allowed(NULL));
}
END_TEST

static char *write_temp(const char *dir, const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name);

	th_write_file(path, text, strlen(text));
	return path;
}

START_TEST(settings_options_win_then_file_then_environment)
{
	const char *env[] = {"AZURE_SUBSCRIPTION_ID=sub-env",
			     "AZURE_RESOURCE_GROUP=rg-env",
			     "SANDBOXFS_AZURE_GROUP=group-env",
			     "SANDBOXFS_AZURE_REGION=region-env", NULL};
	char *dir = th_tmpdir("azset");
	char *file = write_temp(dir, "azure.conf",
				"# the group\n"
				"  azure_resource_group = rg-file  \n"
				"\n"
				"azure_group=group-file\n"
				"azure_resolve=a:1:127.0.0.1,b:2:127.0.0.1\n"
				"azure_record_cache=0.5\n"
				"azure_native_root=/work\n");
	struct provider_azure_settings s;
	struct provider_opts o;
	struct sbx_error err;

	memset(&o, 0, sizeof(o));
	o.azure_config = file;
	o.azure_group = (char *)"group-opt";
	sbx_error_clear(&err);
	ck_assert_int_eq(provider_azure_settings_load(&o, env, &s, &err), 0);
	ck_assert_str_eq(s.subscription, "sub-env");
	ck_assert_str_eq(s.resource_group, "rg-file");
	ck_assert_str_eq(s.group, "group-opt");
	ck_assert_str_eq(s.region, "region-env");
	ck_assert_str_eq(s.resolve, "a:1:127.0.0.1,b:2:127.0.0.1");
	ck_assert_str_eq(s.native_root, "/work");
	ck_assert_int_eq(s.record_cache_ms, 500);
	provider_azure_settings_cleanup(&s);

	/* An option overrides the file's cache time too. */
	o.azure_record_cache = (char *)"3";
	ck_assert_int_eq(provider_azure_settings_load(&o, env, &s, &err), 0);
	ck_assert_int_eq(s.record_cache_ms, 3000);
	provider_azure_settings_cleanup(&s);
	o.azure_record_cache = (char *)"soon";
	ck_assert_int_eq(provider_azure_settings_load(&o, env, &s, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.reason, "azure_record_cache"));
	o.azure_record_cache = NULL;

	th_rmtree(dir);
	free(dir);
	free(file);
}
END_TEST

START_TEST(settings_errors_name_the_problem)
{
	static const struct {
		const char *text;
		const char *needle;
	} rows[] = {
		{"azure_group\n", ":1: not key=value"},
		{"\n# c\nazure_colour=blue\n",
		 ":3: unknown key 'azure_colour'"},
		{"azure_record_cache=-1\n", "not a number of seconds"},
	};
	const char *empty[] = {NULL};
	char *dir = th_tmpdir("azset");
	struct provider_azure_settings s;
	struct provider_opts o;
	struct sbx_error err;
	size_t i;

	memset(&o, 0, sizeof(o));
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char *file = write_temp(dir, "bad.conf", rows[i].text);

		o.azure_config = file;
		sbx_error_clear(&err);
		ck_assert_int_eq(
			provider_azure_settings_load(&o, empty, &s, &err),
			-EINVAL);
		ck_assert_msg(strstr(err.reason, rows[i].needle) != NULL,
			      "row %zu: %s", i, err.reason);
		free(file);
	}
	o.azure_config = (char *)"/nonexistent/azure.conf";
	ck_assert_int_eq(provider_azure_settings_load(&o, empty, &s, &err),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.reason, "/nonexistent/azure.conf"));
	o.azure_config = NULL;
	o.azure_group = (char *)"g";
	ck_assert_int_eq(provider_azure_settings_load(&o, empty, &s, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.reason, "azure_subscription "
						 "azure_resource_group "
						 "azure_region"));
	ck_assert_ptr_null(strstr(err.reason, " azure_group"));
	th_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(open_checks_each_setting)
{
	static const struct {
		const char *sub, *rg, *group, *region, *endpoint, *resolve;
		const char *needle;
	} rows[] = {
		{"s/../x", "rg", "g", "eastus", NULL, NULL,
		 "azure_subscription"},
		{"s", "rg?x", "g", "eastus", NULL, NULL,
		 "azure_resource_group"},
		{"s", "rg", "..", "eastus", NULL, NULL, "azure_group"},
		{"s", "rg", "g", "east-us/", NULL, NULL, "azure_region"},
		{"s", "rg", "g", NULL,
		 "http://management.eastus."
		 "azuredevcompute.io",
		 NULL, "azure_endpoint"},
		{"s", "rg", "g", NULL, "https://h/path", NULL,
		 "azure_endpoint"},
		{"s", "rg", "g", "eastus", NULL, "h:1", "azure_resolve"},
		{"s", "rg", "g", "eastus", NULL, "h:x:1.2.3.4",
		 "azure_resolve"},
	};
	const char *env[] = {"PATH=/nonexistent", NULL};
	struct provider_azure_config cfg;
	struct provider *p = NULL;
	struct sbx_error err;
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		memset(&cfg, 0, sizeof(cfg));
		cfg.subscription = rows[i].sub;
		cfg.resource_group = rows[i].rg;
		cfg.group = rows[i].group;
		cfg.region = rows[i].region;
		cfg.endpoint = rows[i].endpoint;
		cfg.resolve = rows[i].resolve;
		cfg.record_cache_ms = -1;
		cfg.env = env;
		sbx_error_clear(&err);
		ck_assert_int_eq(provider_azure_open(&cfg, &p, &err), -EINVAL);
		ck_assert_str_eq(sbx_code_name(err.code), "INVALID_INPUT");
		ck_assert_msg(strstr(err.reason, rows[i].needle) != NULL,
			      "row %zu: %s", i, err.reason);
	}
	/* A well-formed set opens without any request. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.subscription = "s";
	cfg.resource_group = "rg.(x)";
	cfg.group = "g";
	cfg.region = "EastUS";
	cfg.resolve = "h:1:127.0.0.1; *:2:[::1]";
	cfg.record_cache_ms = -1;
	cfg.env = env;
	ck_assert_int_eq(provider_azure_open(&cfg, &p, &err), 0);
	ck_assert_str_eq(p->ops->resolve(p)[0], "h:1:127.0.0.1");
	ck_assert_str_eq(p->ops->resolve(p)[1], "*:2:[::1]");
	ck_assert_ptr_null(p->ops->resolve(p)[2]);
	ck_assert_ptr_null(p->ops->ca_file(p));
	provider_free(p);
}
END_TEST

/* ---- against the fake ------------------------------------------------------- */

struct env {
	char *dir;
	struct azure_fake *fake;
	struct provider *prov;
	char authority[256];
	char extra[4][512];
	const char *envp[12];
};

static void env_start(struct env *e)
{
	char errbuf[256] = "";

	memset(e, 0, sizeof(*e));
	/* The fake is reached directly unless a case sets a proxy. */
	unsetenv("HTTPS_PROXY");
	unsetenv("https_proxy");
	unsetenv("ALL_PROXY");
	unsetenv("all_proxy");
	unsetenv("NO_PROXY");
	unsetenv("no_proxy");
	e->dir = th_tmpdir("azure");
	ck_assert_msg(
		azure_fake_start(e->dir, &e->fake, errbuf, sizeof(errbuf)) == 0,
		"the fake Azure did not start: %s", errbuf);
	snprintf(e->authority, sizeof(e->authority), "AZURE_AUTHORITY_HOST=%s",
		 azure_fake_authority(e->fake));
}

/* The client-secret environment, with extra "NAME=value" lines. */
static const char *const *secret_env(struct env *e)
{
	e->envp[0] = "AZURE_TENANT_ID=" AZURE_FAKE_TENANT;
	e->envp[1] = "AZURE_CLIENT_ID=" AZURE_FAKE_CLIENT_ID;
	e->envp[2] = "AZURE_CLIENT_SECRET=" AZURE_FAKE_SECRET;
	e->envp[3] = e->authority;
	e->envp[4] = "PATH=/nonexistent";
	e->envp[5] = NULL;
	return e->envp;
}

static struct provider *env_provider_with(struct env *e, long cache_ms,
					  const char *const *envp,
					  const char *ca_file)
{
	struct provider_azure_config cfg;
	struct provider *p = NULL;
	struct sbx_error err;
	int rc;

	memset(&cfg, 0, sizeof(cfg));
	cfg.subscription = AZURE_FAKE_SUBSCRIPTION;
	cfg.resource_group = AZURE_FAKE_RESOURCE_GROUP;
	cfg.group = AZURE_FAKE_GROUP;
	cfg.region = AZURE_FAKE_REGION;
	cfg.endpoint = azure_fake_endpoint(e->fake);
	cfg.ca_file = ca_file;
	cfg.resolve = azure_fake_resolve(e->fake);
	cfg.record_cache_ms = cache_ms;
	cfg.connect_timeout_ms = 2000;
	cfg.env = envp;
	sbx_error_clear(&err);
	rc = provider_azure_open(&cfg, &p, &err);
	ck_assert_msg(rc == 0, "provider_azure_open: %s", err.reason);
	return p;
}

static struct provider *env_provider(struct env *e, long cache_ms)
{
	e->prov = env_provider_with(e, cache_ms, secret_env(e),
				    azure_fake_ca_file(e->fake));
	return e->prov;
}

static void env_stop(struct env *e)
{
	provider_free(e->prov);
	azure_fake_stop(e->fake);
	th_rmtree(e->dir);
	free(e->dir);
}

static struct provider_azure_stats stats(struct provider *p)
{
	struct provider_azure_stats st;

	provider_azure_stats(p, &st);
	return st;
}

/* No reason may carry a secret: the client secret, an AAD token the fake
 * issued ("aad.N.hex") or an agent credential. */
static void assert_clean(const struct sbx_error *err)
{
	char text[1024];

	sbx_error_describe(err, text, sizeof(text));
	ck_assert_msg(strstr(text, AZURE_FAKE_SECRET) == NULL, "%s", text);
	ck_assert_msg(strstr(text, "aad.") == NULL, "%s", text);
	ck_assert_msg(strstr(text, "Bearer") == NULL, "%s", text);
	ck_assert_msg(strstr(text, AZURE_FAKE_ASSERTION) == NULL, "%s", text);
}

static void ids_free(char **ids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

START_TEST(list_follows_next_links)
{
	static const char *const names[] = {"a", "b", "c", "d", "e"};
	struct env e;
	struct provider *p;
	struct sbx_error err;
	char **ids = NULL;
	size_t n = 0, i;

	env_start(&e);
	for (i = 0; i < 5; i++)
		azure_fake_add(e.fake, names[i]);
	azure_fake_add(e.fake, "not.a.name");
	azure_fake_set_page_size(e.fake, 2);
	p = env_provider(&e, -1);
	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->list(p, &ids, &n, &err), 0);
	/* Names the mount cannot show are left out. */
	ck_assert_uint_eq(n, 5);
	for (i = 0; i < n; i++)
		ck_assert_str_eq(ids[i], names[i]);
	ids_free(ids, n);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 3);
	ck_assert_uint_eq(stats(p).list_pages, 3);
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
	env_stop(&e);
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
	struct env e;
	struct provider *p;
	struct sbx_error err;
	char **ids = NULL, link[512];
	size_t n = 0, i;

	env_start(&e);
	azure_fake_add(e.fake, "a");
	azure_fake_add(e.fake, "b");
	azure_fake_set_page_size(e.fake, 1);
	p = env_provider(&e, -1);
	for (i = 0; i < sizeof(links) / sizeof(links[0]) + 1; i++) {
		if (i < sizeof(links) / sizeof(links[0]))
			snprintf(link, sizeof(link), "%s", links[i]);
		else /* the same origin, another group */
			snprintf(link, sizeof(link),
				 "%s/subscriptions/other/sandboxes",
				 azure_fake_endpoint(e.fake));
		azure_fake_set_next_link(e.fake, link);
		sbx_error_clear(&err);
		ck_assert_int_eq(p->ops->list(p, &ids, &n, &err), -EIO);
		ck_assert_msg(strstr(err.reason, "nextLink") != NULL, "%s",
			      err.reason);
		assert_clean(&err);
	}
	/* Only the first pages were asked for: the bearer went nowhere
	 * else. */
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), i);
	env_stop(&e);
}
END_TEST

START_TEST(record_reads_state_labels_and_route)
{
	struct env e;
	struct provider *p;
	struct provider_record rec;
	struct sbx_error err;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_state(e.fake, ID, "Suspended");
	azure_fake_set_label(e.fake, ID, "team", "blue");
	azure_fake_set_port_url(e.fake, ID,
				"https://box--8971.eastus.adcproxy.io/");
	p = env_provider(&e, 0);
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
	env_stop(&e);
}
END_TEST

static unsigned gets(struct env *e)
{
	return azure_fake_calls(e->fake, AZF_GET);
}

static void read_record(struct provider *p, const char *id)
{
	struct provider_record rec;
	struct sbx_error err;

	sbx_error_clear(&err);
	ck_assert_msg(p->ops->record(p, id, &rec, &err) == 0, "%s", err.reason);
	provider_record_cleanup(&rec);
}

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
	struct env e;
	struct provider *p;
	struct sbx_error err;
	char **ids = NULL;
	size_t n = 0;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_port_url(e.fake, ID,
				"https://box--8971.eastus.adcproxy.io/");
	p = env_provider(&e, -1); /* the default: 2 s */
	read_record(p, ID);
	read_record(p, ID);
	read_record(p, ID);
	ck_assert_uint_eq(gets(&e), 3);
	ck_assert_uint_eq(stats(p).record_hits, 0);
	azure_fake_set_label(e.fake, ID, PROTO_TRANSPORT_LABEL, "other-v9");
	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->record(p, ID, &rec, &err), 0);
	ck_assert_str_eq(provider_record_label(&rec, PROTO_TRANSPORT_LABEL),
			 "other-v9");
	provider_record_cleanup(&rec);
	ck_assert_uint_eq(gets(&e), 4);

	/* A listing is shown from the list's records. */
	ck_assert_int_eq(p->ops->list(p, &ids, &n, &err), 0);
	ids_free(ids, n);
	read_listed(p, ID);
	read_listed(p, ID);
	ck_assert_uint_eq(gets(&e), 4);
	ck_assert_uint_eq(stats(p).record_hits, 2);
	/* After a resume or a stop the next one is fresh, then reused. */
	ck_assert_int_eq(p->ops->stop(p, ID, &err), 0);
	read_listed(p, ID);
	ck_assert_uint_eq(gets(&e), 5);
	read_listed(p, ID);
	ck_assert_uint_eq(gets(&e), 5);
	ck_assert_int_eq(p->ops->resume(p, ID, &err), 0);
	read_listed(p, ID);
	ck_assert_uint_eq(gets(&e), 6);
	provider_free(p);

	/* With a short time, a listed record expires. */
	e.prov = env_provider_with(&e, 1000, secret_env(&e),
				   azure_fake_ca_file(e.fake));
	read_listed(e.prov, ID);
	read_listed(e.prov, ID);
	ck_assert_uint_eq(gets(&e), 7);
	usleep(1100 * 1000);
	read_listed(e.prov, ID);
	ck_assert_uint_eq(gets(&e), 8);
	provider_free(e.prov);

	/* With 0, every one goes out. */
	e.prov = env_provider_with(&e, 0, secret_env(&e),
				   azure_fake_ca_file(e.fake));
	read_listed(e.prov, ID);
	read_listed(e.prov, ID);
	ck_assert_uint_eq(gets(&e), 10);
	env_stop(&e);
}
END_TEST

START_TEST(route_opens_the_agent_port_when_there_is_none)
{
	struct env e;
	struct provider *p;
	struct sbx_error err;
	char *url = NULL;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_add_url(e.fake, ID,
			       "https://box--8971.eastus.adcproxy.io/");
	p = env_provider(&e, -1);
	sbx_error_clear(&err);
	ck_assert_int_eq(p->ops->route(p, ID, &url, &err), 0);
	ck_assert_str_eq(url, "https://box--8971.eastus.adcproxy.io/");
	free(url);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_PORTS_ADD), 1);
	ck_assert_uint_eq(gets(&e), 2);
	/* Now the port is there: one read. */
	ck_assert_int_eq(p->ops->route(p, ID, &url, &err), 0);
	free(url);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_PORTS_ADD), 1);
	ck_assert_uint_eq(gets(&e), 3);
	ck_assert_uint_eq(stats(p).routes, 2);

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
	env_stop(&e);
}
END_TEST

START_TEST(credential_is_read_through_the_file_api)
{
	static const char cred[] =
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
	struct env e;
	struct provider *p;
	struct sbx_error err;
	char *bytes = NULL, path[256];
	size_t len = 0;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	p = env_provider(&e, -1);
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
	env_stop(&e);
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
	struct env e;
	struct provider *p;
	size_t i;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	p = env_provider(&e, 0);
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
	env_stop(&e);
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
	struct env e;
	char *root, *path, cmd[256], cwd[256];
	unsigned calls;

	env_start(&e);
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
	p = env_provider(&e, -1);

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
	env_stop(&e);
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
			ids_free(ids, n);
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
	struct env e;
	struct provider *p;
	size_t i;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	p = env_provider(&e, 0);
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
		assert_clean(&err);
		/* One request: no retry, no redirect followed. */
		ck_assert_uint_eq(azure_fake_calls(e.fake, rows[i].r),
				  before + 1);
	}
	ck_assert_uint_eq(stats(p).retried_401, 0);
	env_stop(&e);
}
END_TEST

START_TEST(a_401_from_the_data_plane_refreshes_the_token_once)
{
	struct sbx_error err;
	struct provider *p;
	struct env e;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	p = env_provider(&e, 0);
	read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 1);
	/* A revoked token: refused once, then a fresh one works. */
	azure_fake_revoke_tokens(e.fake);
	read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 2);
	/* The refused call is counted apart (before the route). */
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 1);
	ck_assert_uint_eq(gets(&e), 2);
	ck_assert_uint_eq(stats(p).retried_401, 1);
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
	assert_clean(&err);
	ck_assert_uint_eq(gets(&e), 4);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 3);
	ck_assert_uint_eq(stats(p).retried_401, 2);
	/* The token of the retry is kept. */
	read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 3);
	env_stop(&e);
}
END_TEST

START_TEST(tokens_are_cached_until_five_minutes_before_expiry)
{
	struct provider *p;
	struct env e;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	p = env_provider(&e, 0);
	read_record(p, ID);
	read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 1);
	provider_free(p);
	/* A token that ends within the margin serves its call only. */
	azure_fake_set_token_lifetime(e.fake, AZURE_AUTH_MARGIN_S - 10);
	e.prov = env_provider_with(&e, 0, secret_env(&e),
				   azure_fake_ca_file(e.fake));
	read_record(e.prov, ID);
	read_record(e.prov, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 3);

	/* A refresh that fails keeps the still-valid token: the call goes
	 * through with it, and the next refresh waits a while. */
	azure_fake_fail(e.fake, AZF_TOKEN, 5, 503, "application/json",
			"{\"error\":\"temporarily_unavailable\"}", NULL);
	read_record(e.prov, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 4);
	read_record(e.prov, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 4);
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 0);
	env_stop(&e);
}
END_TEST

START_TEST(token_endpoint_errors_are_clear_and_carry_no_secret)
{
	static const struct {
		int status;
		const char *ctype, *body, *headers;
		enum sbx_code code;
		const char *needle;
	} rows[] = {
		{500, "application/json",
		 "{\"error\":\"temporarily_unavailable\",\"error_description\":"
		 "\"AADSTS50001: try later\"}",
		 NULL, SBX_UNREACHABLE,
		 "HTTP 500 temporarily_unavailable: AADSTS50001: try later"},
		{200, "text/html", "<html>", NULL, SBX_UNEXPECTED_FORMAT,
		 "content type 'text/html'"},
		{200, "application/json", "{\"access_token\":\"aad.1.x\"}",
		 NULL, SBX_UNEXPECTED_FORMAT,
		 "malformed: it carries no expiry"},
		{302, NULL, NULL, "Location: https://evil.example/\r\n",
		 SBX_UNEXPECTED_FORMAT, "redirect"},
		{400, "application/json",
		 "{\"error\":\"invalid_request\",\"error_description\":"
		 "\"echo fake~client.secret-Qw3rty\"}",
		 NULL, SBX_COMMAND_FAILED, "invalid_request: echo ****"},
	};
	const char *wrong[7];
	struct sbx_error err;
	struct provider *p;
	struct env e;
	char **ids = NULL;
	size_t n = 0, i;

	env_start(&e);
	p = env_provider(&e, -1);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		azure_fake_fail(e.fake, AZF_TOKEN, 1, rows[i].status,
				rows[i].ctype, rows[i].body, rows[i].headers);
		sbx_error_clear(&err);
		ck_assert_int_lt(p->ops->list(p, &ids, &n, &err), 0);
		ck_assert_msg(err.code == rows[i].code, "row %zu: %s", i,
			      err.reason);
		ck_assert_msg(strstr(err.reason, rows[i].needle) != NULL,
			      "row %zu: %s", i, err.reason);
		ck_assert_ptr_nonnull(strstr(err.reason, "client secret"));
		assert_clean(&err);
	}
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 0);

	/* A wrong secret: refused, said clearly, not repeated. */
	wrong[0] = "AZURE_TENANT_ID=" AZURE_FAKE_TENANT;
	wrong[1] = "AZURE_CLIENT_ID=" AZURE_FAKE_CLIENT_ID;
	wrong[2] = "AZURE_CLIENT_SECRET=not-the-secret-4711";
	wrong[3] = e.authority;
	wrong[4] = "PATH=/nonexistent";
	wrong[5] = NULL;
	provider_free(p);
	e.prov = env_provider_with(&e, -1, wrong, azure_fake_ca_file(e.fake));
	sbx_error_clear(&err);
	ck_assert_int_eq(e.prov->ops->list(e.prov, &ids, &n, &err), -EACCES);
	ck_assert_str_eq(err.failure, "azureAuthRefused");
	ck_assert_int_eq(sbx_error_errno(&err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "invalid_client: "
						 "AADSTS7000215"));
	ck_assert_ptr_null(strstr(err.reason, "not-the-secret-4711"));
	assert_clean(&err);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 0);
	env_stop(&e);
}
END_TEST

START_TEST(workload_identity_posts_the_federated_assertion)
{
	const char *envp[7];
	char form[2048], fedvar[512];
	struct sbx_error err;
	struct env e;
	char **ids = NULL, *file;
	size_t n = 0;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	file = write_temp(e.dir, "federated", AZURE_FAKE_ASSERTION "\n");
	snprintf(fedvar, sizeof(fedvar), "AZURE_FEDERATED_TOKEN_FILE=%s", file);
	envp[0] = "AZURE_TENANT_ID=" AZURE_FAKE_TENANT;
	envp[1] = "AZURE_CLIENT_ID=" AZURE_FAKE_CLIENT_ID;
	envp[2] = fedvar;
	envp[3] = e.authority;
	envp[4] = "PATH=/nonexistent";
	envp[5] = NULL;
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	sbx_error_clear(&err);
	ck_assert_int_eq(e.prov->ops->list(e.prov, &ids, &n, &err), 0);
	ids_free(ids, n);
	azure_fake_last_token_form(e.fake, form, sizeof(form));
	ck_assert_ptr_nonnull(strstr(form, "client_assertion_type=urn%3Aietf%3A"
					   "params%3Aoauth%3Aclient-assertion-"
					   "type%3Ajwt-bearer"));
	ck_assert_ptr_nonnull(
		strstr(form, "client_assertion=" AZURE_FAKE_ASSERTION "&"));
	ck_assert_ptr_nonnull(strstr(form, "scope=https%3A%2F%2Fdynamicsessions"
					   ".io%2F.default"));
	ck_assert_ptr_null(strstr(form, "client_secret"));
	provider_free(e.prov);

	/* The file is re-read on every fetch: a rotated (here wrong) one
	 * is what goes out. */
	th_write_file(file, "eyJub3QiOiJpdCJ9.e30.x", 22);
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	ck_assert_int_eq(e.prov->ops->list(e.prov, &ids, &n, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "AADSTS700211"));
	ck_assert_ptr_nonnull(strstr(err.reason, "workload identity"));
	assert_clean(&err);
	provider_free(e.prov);
	unlink(file);
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	ck_assert_int_eq(e.prov->ops->list(e.prov, &ids, &n, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "cannot be read"));
	free(file);
	env_stop(&e);
}
END_TEST

struct identity {
	pthread_mutex_t mu;
	unsigned calls;
	bool header_ok;
	char target[2048];
	const char *path; /* the route served */
	const char *header; /* a header line that must be there */
	int status; /* 200: a token */
	char token[64];
};

static bool has_header(const struct stub_req *req, const char *line)
{
	const char *h = req->headers;
	size_t n = strlen(line);

	for (; h != NULL && *h != '\0'; h++)
		if (strncasecmp(h, line, n) == 0)
			return true;
	return false;
}

static enum stub_next identity_handler(struct stub_agent *s,
				       const struct stub_req *req, int fd,
				       void *arg)
{
	struct identity *id = arg;
	char body[256];
	int status;

	(void)s;
	pthread_mutex_lock(&id->mu);
	id->calls++;
	snprintf(id->target, sizeof(id->target), "%s", req->target);
	id->header_ok = has_header(req, id->header);
	status = id->status;
	pthread_mutex_unlock(&id->mu);
	if (strcmp(req->path, id->path) != 0 || !has_header(req, id->header))
		return stub_reply(fd, 400, "application/json",
				  "{\"error\":\"invalid_request\"}") == 0
			       ? STUB_KEEP_OPEN
			       : STUB_CLOSE;
	if (status != 200)
		return stub_reply(fd, status, "application/json",
				  "{\"error\":\"invalid_request\","
				  "\"error_description\":\"Identity not "
				  "found\"}") == 0
			       ? STUB_KEEP_OPEN
			       : STUB_CLOSE;
	snprintf(body, sizeof(body),
		 "{\"access_token\":\"%s\",\"expires_on\":\"%lld\","
		 "\"resource\":\"https://dynamicsessions.io\","
		 "\"token_type\":\"Bearer\"}",
		 id->token, (long long)time(NULL) + 3600);
	return stub_reply(fd, 200, "application/json", body) == 0
		       ? STUB_KEEP_OPEN
		       : STUB_CLOSE;
}

START_TEST(managed_identity_endpoint_gives_the_token)
{
	struct identity id = {.mu = PTHREAD_MUTEX_INITIALIZER,
			      .path = "/msi/token",
			      .header = "X-IDENTITY-HEADER: mi-header-value",
			      .status = 200,
			      .token = "mi.token.1"};
	char endpoint[256];
	const char *envp[6];
	struct stub_agent *s;
	struct sbx_error err;
	struct env e;
	char **ids = NULL;
	size_t n = 0;

	env_start(&e);
	azure_fake_accept_token(e.fake, "mi.token.1");
	s = stub_agent_start(identity_handler, &id);
	snprintf(endpoint, sizeof(endpoint), "IDENTITY_ENDPOINT=%smsi/token",
		 stub_agent_url(s));
	envp[0] = endpoint;
	envp[1] = "IDENTITY_HEADER=mi-header-value";
	envp[2] = "PATH=/nonexistent";
	envp[3] = NULL;
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	sbx_error_clear(&err);
	ck_assert_msg(e.prov->ops->list(e.prov, &ids, &n, &err) == 0, "%s",
		      err.reason);
	ids_free(ids, n);
	pthread_mutex_lock(&id.mu);
	ck_assert_uint_eq(id.calls, 1);
	ck_assert(id.header_ok);
	ck_assert_str_eq(id.target,
			 "/msi/token?api-version=2019-08-01&"
			 "resource=https%3A%2F%2Fdynamicsessions.io");
	pthread_mutex_unlock(&id.mu);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 0);
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 0);
	stub_agent_stop(s);
	env_stop(&e);
}
END_TEST

static char *write_fake_az(const char *dir)
{
	char *bin = xasprintf("%s/bin", dir), *az;

	mkdir(bin, 0755);
	az = write_temp(
		bin, "az",
		"#!/bin/sh\n"
		"case \"$*\" in\n"
		"'account get-access-token --scope "
		"https://dynamicsessions.io/.default --output json') ;;\n"
		"*) echo \"ERROR: unexpected arguments: $*\" >&2; "
		"exit 2 ;;\n"
		"esac\n"
		"if [ -n \"$AZ_FAIL\" ]; then\n"
		"  echo \"ERROR: Please run 'az login' to setup "
		"account.\" >&2\n"
		"  echo \"second line\" >&2\n"
		"  exit 1\n"
		"fi\n"
		"printf '{\"accessToken\":\"cli.token.1\",\"expiresOn\":"
		"\"2099-01-01 00:00:00.000000\",\"subscription\":\"s\","
		"\"tenant\":\"t\",\"tokenType\":\"Bearer\"}\\n'\n");
	ck_assert_int_eq(chmod(az, 0755), 0);
	free(az);
	return bin;
}

START_TEST(imds_then_the_cli)
{
	struct identity id = {.mu = PTHREAD_MUTEX_INITIALIZER,
			      .path = "/metadata/identity/oauth2/token",
			      .header = "Metadata: true",
			      .status = 200,
			      .token = "imds.token.1"};
	char imds[256], path[512], refused[64];
	const char *envp[6];
	struct stub_agent *s;
	struct sbx_error err;
	struct env e;
	char **ids = NULL, *bin;
	size_t n = 0;

	env_start(&e);
	azure_fake_accept_token(e.fake, "imds.token.1");
	azure_fake_accept_token(e.fake, "cli.token.1");
	bin = write_fake_az(e.dir);
	snprintf(path, sizeof(path), "PATH=%s:/usr/bin:/bin", bin);

	/* The metadata service answers: a user-assigned identity. */
	s = stub_agent_start(identity_handler, &id);
	snprintf(imds, sizeof(imds), "AZURE_POD_IDENTITY_AUTHORITY_HOST=%.*s",
		 (int)strlen(stub_agent_url(s)) - 1, stub_agent_url(s));
	envp[0] = imds;
	envp[1] = "AZURE_CLIENT_ID=" AZURE_FAKE_CLIENT_ID;
	envp[2] = path;
	envp[3] = NULL;
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	sbx_error_clear(&err);
	ck_assert_msg(e.prov->ops->list(e.prov, &ids, &n, &err) == 0, "%s",
		      err.reason);
	ids_free(ids, n);
	pthread_mutex_lock(&id.mu);
	ck_assert_uint_eq(id.calls, 1);
	ck_assert_str_eq(id.target,
			 "/metadata/identity/oauth2/token?api-version="
			 "2018-02-01&resource=https%3A%2F%2Fdynamicsessions.io&"
			 "client_id=" AZURE_FAKE_CLIENT_ID);
	pthread_mutex_unlock(&id.mu);
	provider_free(e.prov);

	/* No identity there (400): the CLI gives the token. */
	id.status = 400;
	envp[1] = path;
	envp[2] = NULL;
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	ck_assert_msg(e.prov->ops->list(e.prov, &ids, &n, &err) == 0, "%s",
		      err.reason);
	ids_free(ids, n);
	ck_assert_uint_eq(id.calls, 2);
	provider_free(e.prov);
	stub_agent_stop(s);

	/* No metadata service at all: the CLI, once; its failure is its
	 * first line. */
	stub_refused_url(refused, sizeof(refused));
	snprintf(imds, sizeof(imds), "AZURE_POD_IDENTITY_AUTHORITY_HOST=%.*s",
		 (int)strlen(refused) - 1, refused);
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	ck_assert_msg(e.prov->ops->list(e.prov, &ids, &n, &err) == 0, "%s",
		      err.reason);
	ids_free(ids, n);
	provider_free(e.prov);
	envp[2] = "AZ_FAIL=1";
	envp[3] = NULL;
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	ck_assert_int_eq(e.prov->ops->list(e.prov, &ids, &n, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "Azure CLI"));
	ck_assert_ptr_nonnull(strstr(err.reason, "Please run 'az login'"));
	ck_assert_ptr_null(strstr(err.reason, "second line"));
	provider_free(e.prov);

	/* Nothing at all: one clear error. */
	envp[1] = "PATH=/nonexistent";
	envp[2] = NULL;
	e.prov = env_provider_with(&e, -1, envp, azure_fake_ca_file(e.fake));
	ck_assert_int_eq(e.prov->ops->list(e.prov, &ids, &n, &err), -ENOKEY);
	ck_assert_ptr_nonnull(strstr(err.reason, "no credential"));
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 0);
	free(bin);
	env_stop(&e);
}
END_TEST

START_TEST(another_ca_is_not_trusted)
{
	struct azure_fake *other = NULL;
	struct sbx_error err;
	struct env e;
	char errbuf[256], *dir, **ids = NULL;
	size_t n = 0;

	env_start(&e);
	dir = th_tmpdir("azure2");
	ck_assert_msg(azure_fake_start(dir, &other, errbuf, sizeof(errbuf)) ==
			      0,
		      "%s", errbuf);
	/* The right names and addresses, the wrong trust: no exchange. */
	e.prov = env_provider_with(&e, -1, secret_env(&e),
				   azure_fake_ca_file(other));
	sbx_error_clear(&err);
	ck_assert_int_eq(e.prov->ops->list(e.prov, &ids, &n, &err), -EIO);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_UNREACHABLE");
	ck_assert_msg(strstr(err.reason, "certificate") != NULL ||
			      strstr(err.reason, "SSL") != NULL,
		      "%s", err.reason);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 0);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 0);
	azure_fake_stop(other);
	th_rmtree(dir);
	free(dir);
	env_stop(&e);
}
END_TEST

/* ---- an HTTPS proxy from the environment ------------------------------------ */

static struct transport *agent_transport(struct provider *p);

/*
 * A forward proxy that tunnels CONNECT host:port to 127.0.0.1:port (the
 * fake's names only resolve through pins) and records each target.
 */
struct tunnel {
	int fd;
	unsigned port;
	pthread_t thread;
	pthread_mutex_t mu;
	unsigned connects;
	char targets[1024];
};

struct tunnel_conn {
	struct tunnel *t;
	int client;
};

static void relay(int a, int b)
{
	char chunk[16384];

	for (;;) {
		struct pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
		int i;

		if (poll(p, 2, 10000) <= 0)
			return;
		for (i = 0; i < 2; i++) {
			ssize_t n;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(p[i].fd, chunk, sizeof(chunk));
			if (n <= 0 || write(p[1 - i].fd, chunk, (size_t)n) != n)
				return;
		}
	}
}

static void *tunnel_conn_main(void *arg)
{
	struct tunnel_conn *c = arg;
	struct sockaddr_in sa;
	char head[2048], host[512];
	size_t len = 0;
	unsigned port = 0;
	int up = -1;

	while (len + 1 < sizeof(head)) {
		ssize_t n = read(c->client, head + len, 1);

		if (n <= 0)
			goto out;
		len += (size_t)n;
		head[len] = '\0';
		if (len >= 4 && strcmp(head + len - 4, "\r\n\r\n") == 0)
			break;
	}
	if (sscanf(head, "CONNECT %511[^: ]:%u ", host, &port) != 2)
		goto out;
	pthread_mutex_lock(&c->t->mu);
	c->t->connects++;
	if (strlen(c->t->targets) + strlen(host) + 2 < sizeof(c->t->targets)) {
		strcat(c->t->targets, host);
		strcat(c->t->targets, " ");
	}
	pthread_mutex_unlock(&c->t->mu);
	up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (up < 0 || connect(up, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto out;
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	if (write(c->client, ok, sizeof(ok) - 1) != (ssize_t)sizeof(ok) - 1)
		goto out;
	relay(c->client, up);
out:
	if (up >= 0)
		close(up);
	close(c->client);
	free(c);
	return NULL;
}

static void *tunnel_main(void *arg)
{
	struct tunnel *t = arg;

	for (;;) {
		struct tunnel_conn *c;
		pthread_t th;
		int fd = accept(t->fd, NULL, NULL);

		if (fd < 0)
			return NULL;
		c = xcalloc(1, sizeof(*c));
		c->t = t;
		c->client = fd;
		if (pthread_create(&th, NULL, tunnel_conn_main, c) != 0) {
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(th);
	}
}

static void tunnel_start(struct tunnel *t)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(t->fd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(t->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(t->fd, 16), 0);
	ck_assert_int_eq(getsockname(t->fd, (struct sockaddr *)&sa, &sl), 0);
	t->port = ntohs(sa.sin_port);
	ck_assert_int_eq(pthread_create(&t->thread, NULL, tunnel_main, t), 0);
}

static void tunnel_stop(struct tunnel *t)
{
	shutdown(t->fd, SHUT_RDWR);
	pthread_join(t->thread, NULL);
	close(t->fd);
}

static unsigned tunnel_connects(struct tunnel *t, char *targets, size_t size)
{
	unsigned n;

	pthread_mutex_lock(&t->mu);
	n = t->connects;
	snprintf(targets, size, "%s", t->targets);
	pthread_mutex_unlock(&t->mu);
	return n;
}

/*
 * The data plane and Entra ID are reached through HTTPS_PROXY when it is
 * set (as the Azure SDKs do), and directly for the names NO_PROXY lists;
 * an agent behind Azure's own proxy is never reached through it.
 */
START_TEST(the_data_plane_and_entra_honour_https_proxy)
{
	struct tunnel tun;
	struct th_agent a;
	struct buf content = BUF_INIT(1024 * 1024);
	struct sbx_error err;
	struct transport *t;
	struct env e;
	char env[64], targets[1024], *path;
	unsigned before;

	env_start(&e);
	tunnel_start(&tun);
	snprintf(env, sizeof(env), "http://127.0.0.1:%u", tun.port);
	setenv("HTTPS_PROXY", env, 1);
	th_agent_start(&a, NULL, false);
	path = xasprintf("%s/hello.txt", a.root);
	th_write_file(path, "through no proxy\n", 17);
	free(path);
	th_give_to_exec_user(a.root);
	azure_fake_add(e.fake, ID);
	azure_fake_set_agent(e.fake, ID, a.port, true, NULL, 0);
	azure_fake_map_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH, a.token_file);
	env_provider(&e, -1);
	read_record(e.prov, ID);
	ck_assert_uint_ge(tunnel_connects(&tun, targets, sizeof(targets)), 1);
	ck_assert_msg(strstr(targets, "login.microsoftonline.com") != NULL &&
			      strstr(targets, "azuredevcompute.io") != NULL,
		      "%s", targets);

	/* Through the transport: data-plane calls tunnel, the agent does
	 * not. */
	t = agent_transport(e.prov);
	sbx_error_clear(&err);
	ck_assert_msg(ac_read_file(t, ID, "hello.txt", &content, &err) == 0,
		      "%s", err.reason);
	ck_assert_str_eq(content.data, "through no proxy\n");
	tunnel_connects(&tun, targets, sizeof(targets));
	ck_assert_msg(strstr(targets, "adcproxy.io") == NULL, "%s", targets);
	transport_free(t);
	provider_free(e.prov);

	/* NO_PROXY lists the names: no tunnel. */
	setenv("NO_PROXY",
	       "login.microsoftonline.com,.azuredevcompute.io,localhost", 1);
	env_provider(&e, -1);
	before = tunnel_connects(&tun, targets, sizeof(targets));
	read_record(e.prov, ID);
	ck_assert_uint_eq(tunnel_connects(&tun, targets, sizeof(targets)),
			  before);

	unsetenv("HTTPS_PROXY");
	unsetenv("NO_PROXY");
	buf_cleanup(&content);
	th_agent_stop(&a);
	tunnel_stop(&tun);
	env_stop(&e);
}
END_TEST

/* ---- agents behind the proxy ------------------------------------------------- */

static struct transport *agent_transport(struct provider *p)
{
	struct transport_config cfg;
	struct transport *t = NULL;

	transport_config_defaults(&cfg);
	cfg.response_timeout_ms = 10000;
	cfg.connect_timeout_ms = 2000;
	cfg.ready_interval_ms = 50;
	cfg.ready_timeout_ms = 10000;
	ck_assert_int_eq(transport_new(p, &cfg, &t), 0);
	return t;
}

START_TEST(a_real_agent_behind_the_proxy)
{
	struct th_agent a, b;
	struct buf content = BUF_INIT(1024 * 1024);
	struct sbx_error err;
	struct transport *t;
	struct env e;
	char url[256], host[256], *path;

	env_start(&e);
	th_agent_start(&a, NULL, false);
	path = xasprintf("%s/hello.txt", a.root);
	th_write_file(path, "hello over TLS\n", 15);
	free(path);
	th_give_to_exec_user(a.root);
	azure_fake_add(e.fake, ID);
	azure_fake_set_agent(e.fake, ID, a.port, true, url, sizeof(url));
	azure_fake_map_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH, a.token_file);
	env_provider(&e, -1);
	t = agent_transport(e.prov);

	sbx_error_clear(&err);
	ck_assert_msg(ac_read_file(t, ID, "hello.txt", &content, &err) == 0,
		      "%s", err.reason);
	ck_assert_str_eq(content.data, "hello over TLS\n");
	buf_reset(&content);
	ck_assert_int_eq(ac_read_file(t, ID, "missing", &content, &err),
			 -ENOENT);
	ck_assert_uint_eq(transport_generation(t, ID), 1);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_CREDENTIAL), 1);
	snprintf(host, sizeof(host), "%s--8971.%s.adcproxy.io", ID,
		 AZURE_FAKE_REGION);
	ck_assert_uint_ge(azure_fake_proxy_accepts(e.fake, host), 1);

	/* A new boot: new credential and port behind the same URL. The
	 * refused request is refreshed, activated and replayed. */
	th_agent_start(&b, NULL, false);
	path = xasprintf("%s/hello.txt", b.root);
	th_write_file(path, "the second boot\n", 16);
	free(path);
	th_give_to_exec_user(b.root);
	th_agent_stop(&a);
	azure_fake_set_agent(e.fake, ID, b.port, true, NULL, 0);
	azure_fake_map_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH, b.token_file);
	buf_reset(&content);
	ck_assert_msg(ac_read_file(t, ID, "hello.txt", &content, &err) == 0,
		      "%s", err.reason);
	ck_assert_str_eq(content.data, "the second boot\n");
	ck_assert_uint_eq(transport_generation(t, ID), 2);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_CREDENTIAL), 2);

	buf_cleanup(&content);
	transport_free(t);
	th_agent_stop(&b);
	env_stop(&e);
}
END_TEST

static void slow_credential(struct azure_fake *f, enum azure_fake_route r,
			    const char *id, void *arg)
{
	(void)f;
	(void)r;
	(void)id;
	(void)arg;
	usleep(3000 * 1000);
}

/*
 * The readiness deadline bounds the credential fetch it starts: a data
 * plane that takes three seconds to hand out the credential ends a wait
 * whose deadline is 800 ms at about that deadline, not after the read.
 */
START_TEST(readiness_deadline_bounds_the_credential_fetch)
{
	struct transport_config cfg;
	struct sbx_error err;
	struct transport *t = NULL;
	struct env e;
	long long t0, elapsed;
	int rc;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_agent(e.fake, ID, 1, true, NULL, 0);
	azure_fake_set_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH,
			    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 44);
	env_provider(&e, -1);
	/* A token first, so that only the credential read is slow. */
	read_record(e.prov, ID);
	azure_fake_set_hook(e.fake, AZF_CREDENTIAL, slow_credential, NULL);
	transport_config_defaults(&cfg);
	cfg.ready_timeout_ms = 800;
	cfg.ready_interval_ms = 50;
	ck_assert_int_eq(transport_new(e.prov, &cfg, &t), 0);
	sbx_error_clear(&err);
	t0 = th_now_ms();
	rc = transport_wait_ready(t, ID, NULL, &err);
	elapsed = th_now_ms() - t0;
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(elapsed >= 700 && elapsed < 2500, "%lld ms: %s", elapsed,
		      err.reason);
	ck_assert_uint_ge(azure_fake_calls(e.fake, AZF_CREDENTIAL), 1);
	transport_free(t);
	env_stop(&e);
}
END_TEST

START_TEST(routes_outside_the_policy_are_refused_before_the_credential)
{
	static const char *const urls[] = {
		"https://box--8971.eastus.adcproxy.io/?x=1",
		"https://user@box--8971.eastus.adcproxy.io/",
		"https://box--8971.eastus.example.com/",
		"http://box--8971.eastus.adcproxy.io/",
		"https://box--8971.eastus.adcproxy.io/v1",
		"https://box--8971.eastus.adcproxy.io/#f",
	};
	struct transport_resp resp;
	struct transport_req req;
	struct sbx_error err;
	struct env e;
	size_t i;

	env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH,
			    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 44);
	env_provider(&e, -1);
	memset(&req, 0, sizeof(req));
	req.op = TRANSPORT_OP_HEALTH;
	req.cls = TRANSPORT_SAFE;
	req.method = "GET";
	req.path = "/v1/health?version=1";
	for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		struct transport *t = agent_transport(e.prov);

		azure_fake_set_port_url(e.fake, ID, urls[i]);
		transport_resp_init(&resp);
		sbx_error_clear(&err);
		ck_assert_int_eq(transport_send(t, ID, &req, &resp, &err),
				 -EPROTO);
		ck_assert_str_eq(err.failure, SBX_FAIL_TRANSPORT_INVALID);
		ck_assert(!err.retryable);
		transport_resp_cleanup(&resp);
		transport_free(t);
	}
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_CREDENTIAL), 0);
	env_stop(&e);
}
END_TEST

struct counting_agent {
	pthread_mutex_t mu;
	unsigned activations;
	unsigned requests;
};

static enum stub_next counting_handler(struct stub_agent *s,
				       const struct stub_req *req, int fd,
				       void *arg)
{
	struct counting_agent *c = arg;

	(void)s;
	pthread_mutex_lock(&c->mu);
	c->requests++;
	if (strcmp(req->path, "/v1/activate") == 0)
		c->activations++;
	pthread_mutex_unlock(&c->mu);
	if (strcmp(req->path, "/v1/activate") == 0)
		return stub_reply(fd, 204, NULL, NULL) == 0 ? STUB_KEEP_OPEN
							    : STUB_CLOSE;
	return stub_reply(fd, 200, "application/json",
			  "{\"protocolVersion\":1,\"status\":\"ready\","
			  "\"imageCommand\":{\"status\":\"running\"}}") == 0
		       ? STUB_KEEP_OPEN
		       : STUB_CLOSE;
}

START_TEST(activation_is_judged_on_a_fresh_record)
{
	struct counting_agent c = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct transport_resp resp;
	struct transport_req req;
	struct stub_agent *s;
	struct sbx_error err;
	struct transport *t;
	struct env e;
	char cred[45];
	unsigned before;

	env_start(&e);
	s = stub_agent_start(counting_handler, &c);
	azure_fake_add(e.fake, ID);
	azure_fake_set_agent(e.fake, ID, stub_agent_port(s), true, NULL, 0);
	memset(cred, 'A', 43);
	cred[43] = '=';
	cred[44] = '\0';
	azure_fake_set_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH, cred, 44);
	env_provider(&e, -1);
	t = agent_transport(e.prov);
	memset(&req, 0, sizeof(req));
	req.op = TRANSPORT_OP_HEALTH;
	req.cls = TRANSPORT_SAFE;
	req.method = "GET";
	req.path = "/v1/health?version=1";

	/* A record read (cached) with a policy, then the policy is removed:
	 * the activation's own read sees that and refuses. */
	read_record(e.prov, ID);
	azure_fake_set_egress(e.fake, ID, NULL);
	before = gets(&e);
	transport_resp_init(&resp);
	sbx_error_clear(&err);
	ck_assert_int_eq(transport_send(t, ID, &req, &resp, &err), -EPROTO);
	ck_assert_str_eq(err.failure, SBX_FAIL_TRANSPORT_INVALID);
	ck_assert_msg(strstr(err.reason, "egress policy is missing") != NULL,
		      "%s", err.reason);
	transport_resp_cleanup(&resp);
	/* The route fetch and the activation's read both went out. */
	ck_assert_uint_eq(gets(&e), before + 2);
	pthread_mutex_lock(&c.mu);
	ck_assert_uint_eq(c.requests, 0);
	pthread_mutex_unlock(&c.mu);

	/* A vnet and an Allow policy are accepted. */
	azure_fake_set_egress(e.fake, ID, "{\"defaultAction\":\"Allow\"}");
	azure_fake_set_vnet(e.fake, ID, "customer-vnet");
	transport_resp_init(&resp);
	ck_assert_msg(transport_send(t, ID, &req, &resp, &err) == 0, "%s",
		      err.reason);
	ck_assert_int_eq(resp.status, 200);
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&c.mu);
	ck_assert_uint_eq(c.activations, 1);
	pthread_mutex_unlock(&c.mu);
	transport_free(t);
	stub_agent_stop(s);
	env_stop(&e);
}
END_TEST

Suite *make_azure_suite(void)
{
	Suite *s = suite_create("azure");
	TCase *tc;

	tc = tcase_create("proto");
	tcase_add_test(tc, sandbox_decode_reads_every_field);
	tcase_add_test(tc, sandbox_decode_refuses_malformed_records);
	tcase_add_test(tc, egress_policy_is_described_not_judged);
	tcase_add_test(tc, list_decode_keeps_odd_records_by_id);
	tcase_add_test(tc, exec_decode_keeps_every_byte);
	tcase_add_test(tc, token_decode_reads_every_source);
	tcase_add_test(tc, error_bodies_of_both_services);
	tcase_add_test(tc, requests_encode_and_decode);
	suite_add_tcase(s, tc);

	tc = tcase_create("settings");
	tcase_add_test(tc, route_policy);
	tcase_add_test(tc, settings_options_win_then_file_then_environment);
	tcase_add_test(tc, settings_errors_name_the_problem);
	tcase_add_test(tc, open_checks_each_setting);
	suite_add_tcase(s, tc);

	/* TLS on loopback against the fake; the slowest runs a shell and
	 * a few token sources. */
	tc = tcase_create("data_plane");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, list_follows_next_links);
	tcase_add_test(tc, list_refuses_a_next_link_elsewhere);
	tcase_add_test(tc, record_reads_state_labels_and_route);
	tcase_add_test(tc, records_are_read_every_time_listings_reuse_them);
	tcase_add_test(tc, route_opens_the_agent_port_when_there_is_none);
	tcase_add_test(tc, credential_is_read_through_the_file_api);
	tcase_add_test(
		tc,
		judge_accepts_documented_policies_and_refuses_malformed_ones);
	tcase_add_test(tc, native_sessions_read_and_run_through_the_data_plane);
	tcase_add_test(tc, bad_answers_are_clear_errors);
	tcase_add_test(tc, a_401_from_the_data_plane_refreshes_the_token_once);
	suite_add_tcase(s, tc);

	tc = tcase_create("credentials");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, tokens_are_cached_until_five_minutes_before_expiry);
	tcase_add_test(tc, token_endpoint_errors_are_clear_and_carry_no_secret);
	tcase_add_test(tc, workload_identity_posts_the_federated_assertion);
	tcase_add_test(tc, managed_identity_endpoint_gives_the_token);
	tcase_add_test(tc, imds_then_the_cli);
	tcase_add_test(tc, another_ca_is_not_trusted);
	suite_add_tcase(s, tc);

	tc = tcase_create("agents");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_real_agent_behind_the_proxy);
	tcase_add_test(tc, the_data_plane_and_entra_honour_https_proxy);
	tcase_add_test(tc, readiness_deadline_bounds_the_credential_fetch);
	tcase_add_test(
		tc,
		routes_outside_the_policy_are_refused_before_the_credential);
	tcase_add_test(tc, activation_is_judged_on_a_fresh_record);
	suite_add_tcase(s, tc);
	return s;
}
