/* SPDX-License-Identifier: MIT */
/*
 * The suite "local_records": the local provider's records as JSON
 * (sandbox.json, common/proto_record): exact round trips, every state,
 * an Azure object, what is refused, labels, lists and status.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_record.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"

static const char full_record[] =
	"{\n"
	"  \"id\": \"demo\",\n"
	"  \"state\": \"Running\",\n"
	"  \"labels\": {\n"
	"    \"alienAgentTransport\": \"native-file-v1\",\n"
	"    \"team\": \"a \\\"b\\\"\"\n"
	"  },\n"
	"  \"agentUrl\": \"http://127.0.0.1:40123/\",\n"
	"  \"agentPid\": 4242,\n"
	"  \"port\": 40123,\n"
	"  \"execUser\": \"nobody\",\n"
	"  \"execUid\": 65534,\n"
	"  \"execGid\": 65534,\n"
	"  \"createdAt\": \"2024-05-01T10:00:00Z\",\n"
	"  \"startedAt\": \"2024-05-01T10:00:05Z\",\n"
	"  \"bootCount\": 3\n"
	"}\n";

/* Decode text into r, which encodes back to the same bytes (stable). */
static void decode_stable(const char *text, struct proto_record *r)
{
	struct buf b = BUF_INIT(0);
	const char *why = NULL;

	ck_assert_int_eq(proto_record_decode(text, strlen(text), r, &why), 0);
	ck_assert_int_eq(proto_record_encode(r, &b), 0);
	ck_assert_str_eq(b.data, text);
	buf_cleanup(&b);
}

START_TEST(record_roundtrip_exact)
{
	struct proto_record r;

	decode_stable(full_record, &r);
	ck_assert_str_eq(r.id, "demo");
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert_uint_eq(r.nlabels, 2);
	ck_assert_str_eq(proto_record_label(&r, "alienAgentTransport"),
			 "native-file-v1");
	ck_assert_str_eq(proto_record_label(&r, "team"), "a \"b\"");
	ck_assert_ptr_null(proto_record_label(&r, "nope"));
	ck_assert_str_eq(r.agent_url, "http://127.0.0.1:40123/");
	ck_assert_int_eq(r.agent_pid, 4242);
	ck_assert_uint_eq(r.port, 40123);
	ck_assert_str_eq(r.exec_user, "nobody");
	ck_assert_int_eq(r.exec_uid, 65534);
	ck_assert_int_eq(r.exec_gid, 65534);
	ck_assert_str_eq(r.created_at, "2024-05-01T10:00:00Z");
	ck_assert_str_eq(r.started_at, "2024-05-01T10:00:05Z");
	ck_assert_uint_eq(r.boot_count, 3);
	ck_assert_int_eq(proto_record_transport(&r), PROTO_RECORD_AGENT);
	proto_record_cleanup(&r);
}
END_TEST

START_TEST(record_minimal_encoding)
{
	struct buf b = BUF_INIT(0);
	struct proto_record r;

	proto_record_init(&r);
	ck_assert_int_eq(proto_record_encode(&r, &b), -EINVAL); /* no id */
	ck_assert_int_eq(proto_record_set_str(&r.id, "x"), 0);
	ck_assert_int_eq(proto_record_encode(&r, &b), -EINVAL); /* state */
	ck_assert_uint_eq(b.len, 0);
	r.state = PROTO_RECORD_STOPPED;
	ck_assert_int_eq(proto_record_encode(&r, &b), 0);
	ck_assert_str_eq(b.data, "{\n"
				 "  \"id\": \"x\",\n"
				 "  \"state\": \"Stopped\",\n"
				 "  \"labels\": {},\n"
				 "  \"bootCount\": 0\n"
				 "}\n");
	ck_assert_int_eq(proto_record_transport(&r), PROTO_RECORD_NATIVE);
	buf_cleanup(&b);
	proto_record_cleanup(&r);
}
END_TEST

START_TEST(record_every_state)
{
	static const char *const names[] = {"Creating", "Running",   "Stopping",
					    "Stopped",	"Suspended", "Resuming",
					    "Deleting"};
	struct buf b = BUF_INIT(0);
	struct proto_record r;
	char text[128];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		enum proto_record_state s = proto_record_state_parse(names[i]);

		ck_assert_int_ne(s, PROTO_RECORD_UNKNOWN);
		ck_assert_str_eq(proto_record_state_name(s), names[i]);
		snprintf(text, sizeof(text), "{\"id\":\"s\",\"state\":\"%s\"}",
			 names[i]);
		ck_assert_int_eq(
			proto_record_decode(text, strlen(text), &r, NULL), 0);
		ck_assert_int_eq(r.state, s);
		buf_reset(&b);
		ck_assert_int_eq(proto_record_encode(&r, &b), 0);
		snprintf(text, sizeof(text), "\"state\": \"%s\"", names[i]);
		ck_assert_ptr_nonnull(strstr(b.data, text));
		proto_record_cleanup(&r);
	}
	/* The parse is exact. */
	ck_assert_int_eq(proto_record_state_parse("running"),
			 PROTO_RECORD_UNKNOWN);
	ck_assert_int_eq(proto_record_state_parse("Failed"),
			 PROTO_RECORD_UNKNOWN);
	ck_assert_ptr_null(proto_record_state_name(PROTO_RECORD_UNKNOWN));
	/* A state from a newer provider decodes, but cannot be encoded. */
	snprintf(text, sizeof(text), "{\"id\":\"s\",\"state\":\"Zz\"}");
	ck_assert_int_eq(proto_record_decode(text, strlen(text), &r, NULL), 0);
	ck_assert_int_eq(r.state, PROTO_RECORD_UNKNOWN);
	ck_assert_int_eq(proto_record_encode(&r, &b), -EINVAL);
	proto_record_cleanup(&r);
	buf_cleanup(&b);
}
END_TEST

START_TEST(record_azure_object)
{
	/* An Azure data-plane sandbox object: only id, state and labels
	 * matter; the rest is ignored. */
	static const char azure[] =
		"{\"id\":\"sbx-1\",\"state\":\"Suspended\","
		"\"labels\":{\"alienAgentTransport\":\"native-file-v1\","
		"\"owner\":\"me\"},"
		"\"egressPolicy\":{\"defaultAction\":\"Deny\",\"hostRules\":"
		"[{\"pattern\":\"*.example.com\",\"action\":\"Allow\"}],"
		"\"trafficInspection\":\"None\"},"
		"\"vnetConnectionName\":null,"
		"\"ports\":[{\"port\":8971,\"url\":"
		"\"https://sbx-1--8971.westus.adcproxy.io\","
		"\"auth\":{\"anonymous\":false},\"activationMode\":\"x\"}],"
		"\"resources\":{\"cpu\":1,\"memory\":\"2Gi\"},\"port\":null}";
	struct proto_record r;

	ck_assert_int_eq(proto_record_decode(azure, strlen(azure), &r, NULL),
			 0);
	ck_assert_str_eq(r.id, "sbx-1");
	ck_assert_int_eq(r.state, PROTO_RECORD_SUSPENDED);
	ck_assert_uint_eq(r.nlabels, 2);
	ck_assert_str_eq(proto_record_label(&r, "owner"), "me");
	ck_assert_ptr_null(r.agent_url);
	ck_assert_uint_eq(r.port, 0);
	ck_assert_int_eq(r.exec_uid, -1);
	proto_record_cleanup(&r);
}
END_TEST

static void expect_bad(const char *text, int rc, const char *why_part)
{
	struct proto_record r;
	const char *why = NULL;

	proto_record_init(&r);
	ck_assert_int_eq(proto_record_decode(text, strlen(text), &r, &why), rc);
	ck_assert_msg(why != NULL && strstr(why, why_part) != NULL,
		      "%s: why '%s', wanted '%s'", text, why ? why : "(null)",
		      why_part);
	/* Nothing was written on failure. */
	ck_assert_ptr_null(r.id);
}

START_TEST(record_rejects)
{
	expect_bad("{\"id\":\"x\",\"state\":", -EBADMSG, "not valid JSON");
	expect_bad("[]", -EBADMSG, "not a JSON object");
	expect_bad("{\"id\":\"x\"} junk", -EBADMSG, "JSON");
	expect_bad("{\"state\":\"Running\"}", -EINVAL, "\"id\"");
	expect_bad("{\"id\":\"\",\"state\":\"Running\"}", -EINVAL, "\"id\"");
	expect_bad("{\"id\":7,\"state\":\"Running\"}", -EINVAL, "\"id\"");
	expect_bad("{\"id\":\"x\"}", -EINVAL, "\"state\"");
	expect_bad("{\"id\":\"x\",\"state\":1}", -EINVAL, "\"state\"");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"labels\":[]}",
		   -EINVAL, "labels");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"labels\":{\"a\":1}}",
		   -EINVAL, "label");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"labels\":"
		   "{\"alienAgentTransport\":\"native-file-v1\","
		   "\"alienAgentTransport\":\"x\"}}",
		   -EINVAL, "twice");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"port\":70000}",
		   -EINVAL, "port");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"agentPid\":-1}",
		   -EINVAL, "agentPid");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"agentUrl\":5}",
		   -EINVAL, "agentUrl");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"execUid\":1.5}",
		   -EINVAL, "execUid");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"bootCount\":-2}",
		   -EINVAL, "bootCount");
}
END_TEST

/* An identity of its own, its limits and its network. */
static const char confined_record[] =
	"{\n"
	"  \"id\": \"box\",\n"
	"  \"state\": \"Stopped\",\n"
	"  \"labels\": {\n"
	"    \"alienAgentTransport\": \"native-file-v1\"\n"
	"  },\n"
	"  \"execUid\": 2113929216,\n"
	"  \"execGid\": 2113929216,\n"
	"  \"dynamicUser\": true,\n"
	"  \"bootCount\": 0,\n"
	"  \"pids\": 64,\n"
	"  \"memory\": 268435456,\n"
	"  \"tmpSize\": 16777216,\n"
	"  \"network\": \"none\"\n"
	"}\n";

START_TEST(record_confinement)
{
	struct proto_record r;

	decode_stable(confined_record, &r);
	ck_assert_int_eq(r.exec_uid, 2113929216L);
	ck_assert(r.dynamic_user);
	ck_assert_uint_eq(r.pids, 64);
	ck_assert_uint_eq(r.memory, 268435456);
	ck_assert_uint_eq(r.tmp_size, 16777216);
	ck_assert_str_eq(r.network, "none");
	proto_record_cleanup(&r);
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"network\":\"host\"}",
		   -EINVAL, "network");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"pids\":0}", -EINVAL,
		   "pids");
	expect_bad("{\"id\":\"x\",\"state\":\"Running\",\"dynamicUser\":1}",
		   -EINVAL, "dynamicUser");
}
END_TEST

START_TEST(record_labels_and_lists)
{
	struct buf b = BUF_INIT(0);
	struct proto_record r[2];
	struct proto_health h;

	proto_record_init(&r[0]);
	proto_record_init(&r[1]);
	ck_assert_int_eq(proto_record_set_str(&r[0].id, "a"), 0);
	ck_assert_int_eq(proto_record_set_str(&r[1].id, "b"), 0);
	r[0].state = PROTO_RECORD_RUNNING;
	r[1].state = PROTO_RECORD_STOPPED;
	ck_assert_int_eq(
		proto_record_set_label(&r[0], PROTO_TRANSPORT_LABEL, "other"),
		0);
	ck_assert_int_eq(proto_record_transport(&r[0]), PROTO_RECORD_INVALID);
	ck_assert_int_eq(proto_record_set_label(&r[0], PROTO_TRANSPORT_LABEL,
						PROTO_TRANSPORT_AGENT),
			 0);
	ck_assert_uint_eq(r[0].nlabels, 1);
	ck_assert_int_eq(proto_record_transport(&r[0]), PROTO_RECORD_AGENT);
	ck_assert_int_eq(proto_record_set_label(&r[0], "k", "v"), 0);
	ck_assert_int_eq(
		proto_record_set_label(&r[0], PROTO_TRANSPORT_LABEL, NULL), 0);
	ck_assert_uint_eq(r[0].nlabels, 1);
	ck_assert_str_eq(proto_record_label(&r[0], "k"), "v");
	ck_assert_int_eq(proto_record_transport(&r[0]), PROTO_RECORD_NATIVE);

	ck_assert_int_eq(proto_record_encode_list(r, 2, &b), 0);
	ck_assert_str_eq(b.data, "[\n"
				 "  {\n"
				 "    \"id\": \"a\",\n"
				 "    \"state\": \"Running\",\n"
				 "    \"labels\": {\n"
				 "      \"k\": \"v\"\n"
				 "    },\n"
				 "    \"bootCount\": 0\n"
				 "  },\n"
				 "  {\n"
				 "    \"id\": \"b\",\n"
				 "    \"state\": \"Stopped\",\n"
				 "    \"labels\": {},\n"
				 "    \"bootCount\": 0\n"
				 "  }\n"
				 "]\n");
	buf_reset(&b);
	ck_assert_int_eq(proto_record_encode_list(r, 0, &b), 0);
	ck_assert_str_eq(b.data, "[]\n");
	buf_reset(&b);
	ck_assert_int_eq(proto_record_encode_status(&r[1], false, NULL, &b), 0);
	ck_assert_ptr_nonnull(strstr(b.data, "\"agentAlive\": false,\n"
					     "  \"health\": null\n}"));
	buf_reset(&b);
	memset(&h, 0, sizeof(h));
	h.protocol_version = 1;
	strcpy(h.status, "ready");
	strcpy(h.boot_id, "b-1");
	ck_assert_int_eq(proto_record_encode_status(&r[1], true, &h, &b), 0);
	ck_assert_ptr_nonnull(strstr(b.data, "\"agentAlive\": true,\n"
					     "  \"health\": {\n"
					     "    \"protocolVersion\": 1,\n"
					     "    \"status\": \"ready\",\n"
					     "    \"bootId\": \"b-1\"\n"
					     "  }\n}\n"));
	buf_cleanup(&b);
	proto_record_cleanup(&r[0]);
	proto_record_cleanup(&r[1]);
}
END_TEST

void local_records_cases(Suite *s)
{
	TCASE_TABLE(s, "records", NULL, NULL, 0, record_roundtrip_exact,
		    record_minimal_encoding, record_confinement,
		    record_every_state, record_azure_object, record_rejects,
		    record_labels_and_lists);
}
