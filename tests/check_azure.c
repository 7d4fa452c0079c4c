/* SPDX-License-Identifier: MIT */
/*
 * The suite "azure": proto_azure's decoders, the route policy and the
 * settings of the Azure provider, all pure. The provider against the fake
 * Azure is check_azure_dp.c's (the data plane), check_azure_auth.c's
 * (the credential sources) and check_azure_agents.c's (agents behind the
 * fake's proxy, and a proxy from the environment).
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

/* A text a decoder refuses: its rc, and a part of the reason (NULL: the
 * reason is not looked at). */
struct refusal {
	const char *json;
	int rc;
	const char *why;
};

START_TEST(sandbox_decode_refuses_malformed_records)
{
	static const struct refusal rows[] = {
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

/* answer decoded into e, which must succeed. */
static void exec_decode_ok(struct proto_azure_exec *e, const char *answer)
{
	const char *why = NULL;

	ck_assert_msg(
		proto_azure_exec_decode(answer, strlen(answer), e, &why) == 0,
		"%s: %s", answer, why != NULL ? why : "");
}

START_TEST(exec_decode_keeps_every_byte)
{
	static const char answer[] =
		"{\"x\":{\"deep\":[true,false,null,-1.5e3,\"s\\\"\"]},"
		"\"stdout\":\"a\\u0000b\\n\\ud83d\\ude00\\t\\\"\\\\\\/\","
		"\"stderr\":\"err \\u00e9\",\"exitCode\":3}";
	static const struct refusal bad[] = {
		{"{\"stdout\":\"a\",\"stdout\":\"b\"}", -EINVAL, "twice"},
		{"{\"exitCode\":1.5}", -EINVAL, NULL},
		{"{\"exitCode\":4294967296}", -EINVAL, NULL},
		{"{\"stdout\":\"a\"", -EBADMSG, NULL},
		{"{\"stdout\":\"\x01\"}", -EINVAL, NULL},
		{"[]", -EBADMSG, NULL},
		{"{} x", -EBADMSG, NULL},
	};
	struct proto_azure_exec e;
	const char *why = NULL;
	size_t i;

	proto_azure_exec_init(&e, 0, 0);
	exec_decode_ok(&e, answer);
	ck_assert_uint_eq(e.out.len, 12);
	ck_assert_mem_eq(e.out.data, "a\0b\n\xf0\x9f\x98\x80\t\"\\/", 12);
	ck_assert_str_eq(e.err.data, "err \xc3\xa9");
	ck_assert(e.has_exit);
	ck_assert_int_eq(e.exit_code, 3);
	ck_assert(!e.truncated);

	/* No exit code; null streams. */
	exec_decode_ok(&e, "{\"stdout\":null,\"exitCode\":null}");
	ck_assert(!e.has_exit);
	ck_assert_uint_eq(e.out.len, 0);
	proto_azure_exec_cleanup(&e);

	/* Output past the caller's bound is dropped and said so. */
	proto_azure_exec_init(&e, 4, 4);
	exec_decode_ok(&e, "{\"stdout\":\"123456\",\"exitCode\":0}");
	ck_assert(e.truncated);
	ck_assert_uint_le(e.out.len, 4);
	proto_azure_exec_cleanup(&e);

	proto_azure_exec_init(&e, 0, 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(proto_azure_exec_decode(bad[i].json,
						      strlen(bad[i].json), &e,
						      &why) == bad[i].rc,
			      "row %zu", i);
		if (bad[i].why != NULL)
			ck_assert_ptr_nonnull(strstr(why, bad[i].why));
	}
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

START_TEST(settings_options_win_then_file_then_environment)
{
	const char *env[] = {"AZURE_SUBSCRIPTION_ID=sub-env",
			     "AZURE_RESOURCE_GROUP=rg-env",
			     "SANDBOXFS_AZURE_GROUP=group-env",
			     "SANDBOXFS_AZURE_REGION=region-env", NULL};
	char *dir = th_tmpdir("azset");
	char *file = az_write_temp(dir, "azure.conf",
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

	th_rmtree_free(dir);
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
		char *file = az_write_temp(dir, "bad.conf", rows[i].text);

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
	th_rmtree_free(dir);
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

void azure_cases(Suite *s)
{
	TCASE_TABLE(s, "proto", NULL, NULL, 0, sandbox_decode_reads_every_field,
		    sandbox_decode_refuses_malformed_records,
		    egress_policy_is_described_not_judged,
		    list_decode_keeps_odd_records_by_id,
		    exec_decode_keeps_every_byte,
		    token_decode_reads_every_source,
		    error_bodies_of_both_services, requests_encode_and_decode);
	TCASE_TABLE(s, "settings", NULL, NULL, 0, route_policy,
		    settings_options_win_then_file_then_environment,
		    settings_errors_name_the_problem, open_checks_each_setting);
}
