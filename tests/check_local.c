/* SPDX-License-Identifier: MIT */
/*
 * Suites for the local provider: "local" covers the pure and filesystem
 * parts (sandbox names, records as JSON, the state directory's resolution,
 * atomic record replacement, the per-sandbox lock, tree removal, route
 * rules); "local_ctl" drives the lifecycle against the real sandbox-agent
 * of the build (create, start, restart, stop, rm, --from, native sessions
 * and every error a user can meet).
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_record.h"
#include "common/token.h"
#include "common/unixurl.h"
#include "client/local_ctl.h"
#include "client/local_state.h"
#include "tests/check_suites.h"
#include "tests/helpers.h"

/* ---- names -------------------------------------------------------------- */

START_TEST(id_validation)
{
	char longest[LOCAL_ID_MAX + 2];

	ck_assert(local_state_id_valid("a"));
	ck_assert(local_state_id_valid("Demo-1_x"));
	ck_assert(local_state_id_valid("-"));
	memset(longest, 'x', sizeof(longest));
	longest[LOCAL_ID_MAX] = '\0';
	ck_assert(local_state_id_valid(longest));
	longest[LOCAL_ID_MAX] = 'x';
	longest[LOCAL_ID_MAX + 1] = '\0';
	ck_assert(!local_state_id_valid(longest));
	ck_assert(!local_state_id_valid(""));
	ck_assert(!local_state_id_valid(NULL));
	ck_assert(!local_state_id_valid("."));
	ck_assert(!local_state_id_valid(".."));
	ck_assert(!local_state_id_valid("a/b"));
	ck_assert(!local_state_id_valid("a b"));
	ck_assert(!local_state_id_valid("a.b"));
	ck_assert(!local_state_id_valid("caf\xc3\xa9"));
	ck_assert(!local_state_id_valid("a\n"));
}
END_TEST

/* ---- records ------------------------------------------------------------ */

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

START_TEST(record_roundtrip_exact)
{
	struct buf b = BUF_INIT(0);
	struct proto_record r;
	const char *why = NULL;

	ck_assert_int_eq(
		proto_record_decode(full_record, strlen(full_record), &r, &why),
		0);
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
	/* Stable: encoding what was decoded gives the same bytes. */
	ck_assert_int_eq(proto_record_encode(&r, &b), 0);
	ck_assert_str_eq(b.data, full_record);
	buf_cleanup(&b);
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
	struct buf b = BUF_INIT(0);
	struct proto_record r;
	const char *why = NULL;

	ck_assert_int_eq(proto_record_decode(confined_record,
					     strlen(confined_record), &r, &why),
			 0);
	ck_assert_int_eq(r.exec_uid, 2113929216L);
	ck_assert(r.dynamic_user);
	ck_assert_uint_eq(r.pids, 64);
	ck_assert_uint_eq(r.memory, 268435456);
	ck_assert_uint_eq(r.tmp_size, 16777216);
	ck_assert_str_eq(r.network, "none");
	ck_assert_int_eq(proto_record_encode(&r, &b), 0);
	ck_assert_str_eq(b.data, confined_record);
	buf_cleanup(&b);
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

/* ---- the state directory ------------------------------------------------ */

START_TEST(state_dir_order)
{
	char *d = NULL;

	ck_assert_int_eq(local_state_dir_pick("/opt/st/", "/env", "/xdg",
					      "/home/u", 1000, &d),
			 0);
	ck_assert_str_eq(d, "/opt/st");
	free(d);
	ck_assert_int_eq(local_state_dir_pick(NULL, "/env//x/./", "/xdg",
					      "/home/u", 1000, &d),
			 0);
	ck_assert_str_eq(d, "/env/x");
	free(d);
	ck_assert_int_eq(local_state_dir_pick("", "", "/xdg", "/home/u", 0, &d),
			 0);
	ck_assert_str_eq(d, "/var/lib/sandboxfs");
	free(d);
	ck_assert_int_eq(
		local_state_dir_pick(NULL, NULL, "/xdg", "/home/u", 1000, &d),
		0);
	ck_assert_str_eq(d, "/xdg/sandboxfs");
	free(d);
	/* A relative XDG_STATE_HOME is ignored (XDG base directory rules). */
	ck_assert_int_eq(
		local_state_dir_pick(NULL, NULL, "rel", "/home/u", 1000, &d),
		0);
	ck_assert_str_eq(d, "/home/u/.local/state/sandboxfs");
	free(d);
	ck_assert_int_eq(
		local_state_dir_pick(NULL, NULL, "", "/home/u", 1000, &d), 0);
	ck_assert_str_eq(d, "/home/u/.local/state/sandboxfs");
	free(d);
	d = NULL;
	ck_assert_int_eq(local_state_dir_pick(NULL, NULL, NULL, NULL, 1000, &d),
			 -ENOENT);
	ck_assert_ptr_null(d);
}
END_TEST

START_TEST(state_dir_relative_and_env)
{
	char cwd[PATH_MAX], want[PATH_MAX + 32];
	char *d = NULL;
	char *saved = getenv("SANDBOXFS_STATE_DIR");

	saved = saved ? strdup(saved) : NULL;
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(
		local_state_dir_pick("st/./x/", NULL, NULL, NULL, 0, &d), 0);
	snprintf(want, sizeof(want), "%s/st/x", strcmp(cwd, "/") ? cwd : "");
	ck_assert_str_eq(d, want);
	free(d);

	/* The real environment: the variable beats the per-user default,
	 * and the option beats the variable. */
	setenv("SANDBOXFS_STATE_DIR", "/from/env", 1);
	ck_assert_int_eq(local_state_dir_resolve(NULL, &d), 0);
	ck_assert_str_eq(d, "/from/env");
	free(d);
	ck_assert_int_eq(local_state_dir_resolve("/opt", &d), 0);
	ck_assert_str_eq(d, "/opt");
	free(d);
	unsetenv("SANDBOXFS_STATE_DIR");
	ck_assert_int_eq(local_state_dir_resolve(NULL, &d), 0);
	if (geteuid() == 0) {
		ck_assert_str_eq(d, "/var/lib/sandboxfs");
	} else {
		const char *xdg = getenv("XDG_STATE_HOME");

		if (xdg != NULL && xdg[0] == '/')
			snprintf(want, sizeof(want), "%s/sandboxfs", xdg);
		else
			snprintf(want, sizeof(want),
				 "%s/.local/state/sandboxfs", getenv("HOME"));
		ck_assert_str_eq(d, want);
	}
	free(d);
	if (saved != NULL)
		setenv("SANDBOXFS_STATE_DIR", saved, 1);
	free(saved);
}
END_TEST

static char *state;

static void state_setup(void)
{
	state = th_tmpdir("state");
}

static void state_teardown(void)
{
	th_rmtree(state);
	free(state);
	state = NULL;
}

/* A sandbox directory with this record text. */
static char *put_record(const char *id, const char *text)
{
	char *path = local_state_path(state, id, LOCAL_PATH_RECORD);

	th_write_file(path, text, strlen(text));
	return path;
}

static void write_labels(const char *id, enum proto_record_state s,
			 const char *label_value, int extra)
{
	struct local_err err = {""};
	struct proto_record r;
	char *dir = local_state_path(state, id, LOCAL_PATH_DIR);

	ck_assert_int_eq(local_state_prepare(state, &err), 0);
	mkdir(dir, 0700);
	free(dir);
	proto_record_init(&r);
	ck_assert_int_eq(proto_record_set_str(&r.id, id), 0);
	r.state = s;
	ck_assert_int_eq(proto_record_set_label(&r, "big", label_value), 0);
	for (int i = 0; i < extra; i++) {
		char key[16], value[1001];

		snprintf(key, sizeof(key), "k%d", i);
		memset(value, 'v', 1000);
		value[1000] = '\0';
		ck_assert_int_eq(proto_record_set_label(&r, key, value), 0);
	}
	ck_assert_int_eq(local_state_write(state, &r, &err), 0);
	proto_record_cleanup(&r);
}

static void write_simple(const char *id, enum proto_record_state s,
			 const char *label_value)
{
	write_labels(id, s, label_value, 0);
}

START_TEST(state_list_and_read)
{
	struct local_err err = {""};
	struct proto_record r;
	struct stat st;
	char **ids = NULL, *path;
	size_t n = 99;

	ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
	ck_assert_uint_eq(n, 0);
	local_state_ids_free(ids, n);

	write_simple("zeta", PROTO_RECORD_STOPPED, "1");
	write_simple("alpha", PROTO_RECORD_RUNNING, "2");
	write_simple("Mid", PROTO_RECORD_STOPPED, "3");
	ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(ids[0], "Mid");
	ck_assert_str_eq(ids[1], "alpha");
	ck_assert_str_eq(ids[2], "zeta");
	local_state_ids_free(ids, n);

	ck_assert_int_eq(local_state_read(state, "alpha", &r, &err), 0);
	ck_assert_str_eq(r.id, "alpha");
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert_str_eq(proto_record_label(&r, "big"), "2");
	proto_record_cleanup(&r);
	path = local_state_path(state, "alpha", LOCAL_PATH_RECORD);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	free(path);

	ck_assert_int_eq(local_state_read(state, "nope", &r, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no sandbox 'nope'"));
	ck_assert_int_eq(local_state_read(state, "bad/name", &r, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "invalid sandbox name"));
}
END_TEST

START_TEST(state_list_skips_strays)
{
	char **ids = NULL, *p;
	size_t n = 0;

	write_simple("ok", PROTO_RECORD_STOPPED, "1");
	p = local_state_path(state, NULL, LOCAL_PATH_SANDBOXES);
	{
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/.rm-x-1-2", p);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/bad name", p);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/afile", p);
		th_write_file(path, "x", 1);
	}
	free(p);
	ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ids[0], "ok");
	local_state_ids_free(ids, n);
}
END_TEST

static void expect_corrupt(const char *id, const char *text, const char *reason)
{
	struct local_err err = {""};
	struct proto_record r;
	char *path = put_record(id, text);

	ck_assert_int_eq(local_state_read(state, id, &r, &err), -EBADMSG);
	/* The message names the file and the reason. */
	ck_assert_msg(strstr(err.msg, path) != NULL &&
			      strstr(err.msg, reason) != NULL,
		      "message '%s' (wanted %s and '%s')", err.msg, path,
		      reason);
	free(path);
}

START_TEST(state_corrupt_records)
{
	char *path, *big;
	struct local_err err = {""};
	struct proto_record r;

	expect_corrupt("c1", "{\"id\":\"c1\",", "not valid JSON");
	expect_corrupt("c2", "", "not valid JSON");
	expect_corrupt("c3", "{\"state\":\"Running\"}", "\"id\"");
	expect_corrupt("c4", "{\"id\":\"other\",\"state\":\"Running\"}",
		       "directory's name");
	expect_corrupt("c5", "{\"id\":\"c5\",\"state\":\"Exploded\"}",
		       "unknown \"state\"");
	expect_corrupt("c6",
		       "{\"id\":\"c6\",\"state\":\"Running\","
		       "\"labels\":{\"x\":[]}}",
		       "label");

	/* Larger than any record may be. */
	big = malloc(PROTO_RECORD_MAX_BYTES + 100);
	ck_assert_ptr_nonnull(big);
	memset(big, ' ', PROTO_RECORD_MAX_BYTES + 99);
	big[PROTO_RECORD_MAX_BYTES + 99] = '\0';
	memcpy(big, "{\"id\":\"c7\",\"state\":\"Running\"}", 29);
	expect_corrupt("c7", big, "larger than");
	free(big);

	/* A symlinked record is not followed. */
	path = local_state_path(state, "c8", LOCAL_PATH_DIR);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	free(path);
	path = local_state_path(state, "c8", LOCAL_PATH_RECORD);
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);
	ck_assert_int_eq(local_state_read(state, "c8", &r, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, path));
	free(path);

	/* A directory without its record is missing, not corrupt. */
	path = local_state_path(state, "c9", LOCAL_PATH_DIR);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	free(path);
	ck_assert_int_eq(local_state_read(state, "c9", &r, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no record"));
}
END_TEST

START_TEST(state_atomic_replace)
{
	struct local_err err = {""};
	struct proto_record r;
	long long end;
	int status, reads = 0, rc;
	pid_t writer;

	write_simple("at", PROTO_RECORD_STOPPED, "s");
	writer = fork();
	ck_assert_int_ge(writer, 0);
	if (writer == 0) {
		/* Alternate a tiny and a 200 kB record for a while. */
		end = th_now_ms() + 1500;
		for (int i = 0; th_now_ms() < end; i++)
			write_labels("at", PROTO_RECORD_RUNNING,
				     i % 2 ? "s" : "l", i % 2 ? 0 : 200);
		_exit(0);
	}
	for (;;) {
		rc = local_state_read(state, "at", &r, &err);
		ck_assert_msg(rc == 0, "read %d: %s", reads, err.msg);
		ck_assert(r.nlabels == 1 || r.nlabels == 201);
		ck_assert_str_eq(proto_record_label(&r, "big"),
				 r.nlabels == 1 ? "s" : "l");
		proto_record_cleanup(&r);
		reads++;
		if (waitpid(writer, &status, WNOHANG) == writer)
			break;
	}
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_gt(reads, 20);
	/* No temporary file is left beside the record. */
	{
		char **ids = NULL;
		size_t n = 0;
		char *dir = local_state_path(state, "at", LOCAL_PATH_DIR);
		char cmd[PATH_MAX + 64];

		snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1",
			 dir);
		ck_assert_int_eq(system(cmd), 0);
		free(dir);
		ck_assert_int_eq(local_state_list(state, &ids, &n), 0);
		local_state_ids_free(ids, n);
	}
}
END_TEST

START_TEST(state_lock_exclusion)
{
	int a = -1, b = -1, status;
	long long t0;
	pid_t child;
	char *dir;

	ck_assert_int_eq(local_state_lock(state, "lk", 0, &a), -ENOENT);
	write_simple("lk", PROTO_RECORD_STOPPED, "1");
	ck_assert_int_eq(local_state_lock(state, "lk", 0, &a), 0);
	/* A second holder in this process (another descriptor) waits. */
	ck_assert_int_eq(local_state_lock(state, "lk", 0, &b), -EWOULDBLOCK);
	t0 = th_now_ms();
	ck_assert_int_eq(local_state_lock(state, "lk", 200, &b), -ETIMEDOUT);
	ck_assert_int_ge(th_now_ms() - t0, 190);
	/* So does another process, until the lock is released. */
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int fd = -1;

		/* The parent's descriptor came along with the fork: it is
		 * the parent's lock, not one to hold here. */
		close(a);
		if (local_state_lock(state, "lk", 0, &fd) != -EWOULDBLOCK)
			_exit(1);
		if (local_state_lock(state, "lk", 5000, &fd) != 0)
			_exit(2);
		local_state_unlock(fd);
		_exit(0);
	}
	usleep(300000);
	local_state_unlock(a);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(local_state_lock(state, "lk", 0, &a), 0);

	/* A sandbox removed while someone waits is gone for the waiter. */
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int fd = -1;

		close(a);
		_exit(local_state_lock(state, "lk", 5000, &fd) == -ENOENT ? 0
									  : 3);
	}
	usleep(200000);
	dir = local_state_path(state, "lk", LOCAL_PATH_DIR);
	{
		struct local_err err = {""};
		char tomb[PATH_MAX];

		snprintf(tomb, sizeof(tomb), "%s.gone", dir);
		ck_assert_int_eq(rename(dir, tomb), 0);
		ck_assert_int_eq(local_state_rmtree(tomb, &err), 0);
	}
	local_state_unlock(a);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	free(dir);
}
END_TEST

START_TEST(state_rmtree_deep)
{
	struct local_err err = {""};
	char path[8192], cwd[PATH_MAX], *outside;
	struct stat st;
	int i;

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	outside = th_tmpdir("outside");
	snprintf(path, sizeof(path), "%s/victim", outside);
	th_write_file(path, "keep", 4);
	snprintf(path, sizeof(path), "%s/tree", state);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	/* Deeper than any fixed descriptor budget, with a read-only
	 * directory and a symlink to outside on the way. */
	ck_assert_int_eq(chdir(path), 0);
	for (i = 0; i < 300; i++) {
		ck_assert_int_eq(mkdir("d", 0755), 0);
		ck_assert_int_eq(chdir("d"), 0);
		if (i == 150) {
			ck_assert_int_eq(symlink(outside, "link"), 0);
			th_write_file("f", "x", 1);
		}
	}
	ck_assert_int_eq(chdir(".."), 0);
	ck_assert_int_eq(chmod("d", 0500), 0);
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_int_eq(local_state_rmtree(path, &err), 0);
	ck_assert_int_eq(lstat(path, &st), -1);
	snprintf(path, sizeof(path), "%s/victim", outside);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(local_state_rmtree("/nonexistent/x", &err), 0);
	th_rmtree(outside);
	free(outside);
}
END_TEST

/* The state directory is owner-only whatever the umask, and an open one
 * is made so. */
START_TEST(state_owner_only)
{
	struct local_err err = {""};
	char *sb = local_state_path(state, NULL, LOCAL_PATH_SANDBOXES);
	char *dir = local_state_path(state, "o", LOCAL_PATH_DIR);
	struct stat st;
	mode_t old = umask(0);

	ck_assert_int_eq(local_state_prepare(state, &err), 0);
	umask(old);
	ck_assert_int_eq(stat(state, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(sb, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	/* Directories an older sandboxctl made 0711 (or a user opened). */
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chmod(state, 0755), 0);
	ck_assert_int_eq(chmod(sb, 0711), 0);
	ck_assert_int_eq(chmod(dir, 0711), 0);
	ck_assert_int_eq(local_state_secure(state, "o", &err), 0);
	ck_assert_int_eq(stat(state, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(sb, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	free(sb);
	free(dir);
}
END_TEST

/* A removal that failed part way (here: its ".rm-deep-N" names left
 * behind by an interrupted walk, holding files) is finished by running
 * it again. */
START_TEST(state_rmtree_retry)
{
	struct local_err err = {""};
	char path[8192], cwd[PATH_MAX];
	struct stat st;
	int i;

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	snprintf(path, sizeof(path), "%s/tree", state);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	ck_assert_int_eq(chdir(path), 0);
	for (i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), ".rm-deep-%d", i);
		ck_assert_int_eq(mkdir(name, 0755), 0);
		snprintf(name, sizeof(name), ".rm-deep-%d/f", i);
		th_write_file(name, "x", 1);
	}
	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(mkdir("d", 0755), 0);
		ck_assert_int_eq(chdir("d"), 0);
	}
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_int_eq(local_state_rmtree(path, &err), 0);
	ck_assert_int_eq(lstat(path, &st), -1);
}
END_TEST

START_TEST(route_rules)
{
	unsigned port = 0;
	bool six = true;

	ck_assert(local_state_route_valid("http://127.0.0.1:40123/", &port,
					  &six));
	ck_assert_uint_eq(port, 40123);
	ck_assert(!six);
	ck_assert(local_state_route_valid("http://[::1]:1/", &port, &six));
	ck_assert_uint_eq(port, 1);
	ck_assert(six);
	ck_assert(
		local_state_route_valid("http://127.0.0.1:65535/", NULL, NULL));
	ck_assert(!local_state_route_valid(NULL, NULL, NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1:65536/", NULL,
					   NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1:0/", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:080/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://127.0.0.1:80", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80/x", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80/?q", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80/#f", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://u@127.0.0.1:80/", NULL, NULL));
	ck_assert(
		!local_state_route_valid("https://127.0.0.1:80/", NULL, NULL));
	ck_assert(!local_state_route_valid("HTTP://127.0.0.1:80/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://localhost:80/", NULL, NULL));
	ck_assert(!local_state_route_valid("http://10.0.0.1:80/", NULL, NULL));
	ck_assert(
		!local_state_route_valid("http://127.0.0.1:80//", NULL, NULL));
}
END_TEST

START_TEST(unix_routes)
{
	char path[PATH_MAX], *url;

	/* The record format's example, both ways. */
	url = unixurl_format("/var/lib/sandboxfs/sandboxes/demo/agent.sock");
	ck_assert_str_eq(url, "http+unix://"
			      "%2Fvar%2Flib%2Fsandboxfs%2Fsandboxes%2Fdemo%"
			      "2Fagent.sock/");
	ck_assert_int_eq(unixurl_parse(url, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/var/lib/sandboxfs/sandboxes/demo/agent.sock");
	free(url);
	/* Bytes outside the unreserved set are escaped, and come back. */
	url = unixurl_format("/tmp/a b/%x/\xc3\xa9.sock");
	ck_assert_str_eq(url,
			 "http+unix://%2Ftmp%2Fa%20b%2F%25x%2F%C3%A9.sock/");
	ck_assert_int_eq(unixurl_parse(url, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/tmp/a b/%x/\xc3\xa9.sock");
	free(url);
	ck_assert_int_eq(
		unixurl_parse("http+unix://%2fs%2fa.sock/", path, sizeof(path)),
		0);
	ck_assert_str_eq(path, "/s/a.sock");
	ck_assert(unixurl_is("http+unix://x"));
	ck_assert(!unixurl_is("http://127.0.0.1:1/"));

	/* Refused: not absolute, a raw '/', no final "/", a path, a query,
	 * a fragment, a user, a NUL, bad escapes, dot components, a
	 * trailing or doubled '/', an empty host, another scheme. */
	static const char *const bad[] = {
		"http+unix://a.sock/",
		"http+unix:///tmp/a.sock/",
		"http+unix://%2Ftmp%2Fa.sock",
		"http+unix://%2Ftmp%2Fa.sock/x",
		"http+unix://%2Ftmp%2Fa.sock/?q",
		"http+unix://%2Ftmp%2Fa.sock/#f",
		"http+unix://u@%2Ftmp%2Fa.sock/",
		"http+unix://%2Ftmp%2Fa%00.sock/",
		"http+unix://%2Ftmp%2Fa%2.sock/",
		"http+unix://%2Ftmp%2Fa%zz.sock/",
		"http+unix://%2Ftmp%2F..%2Fa.sock/",
		"http+unix://%2Ftmp%2F.%2Fa.sock/",
		"http+unix://%2Ftmp%2F%2Fa.sock/",
		"http+unix://%2Ftmp%2F/",
		"http+unix://%2F/",
		"http+unix:///",
		"HTTP+UNIX://%2Ftmp%2Fa.sock/",
		"https+unix://%2Ftmp%2Fa.sock/",
		"http+unix://%2Ftmp%2Fa:1.sock/",
		NULL,
	};
	for (size_t i = 0; bad[i] != NULL; i++)
		ck_assert_msg(unixurl_parse(bad[i], path, sizeof(path)) ==
				      -EINVAL,
			      "accepted %s", bad[i]);
	ck_assert_int_eq(unixurl_parse("http+unix://%2Ftmp%2Fa.sock/", path, 6),
			 -ENAMETOOLONG);

	/* The local policy: beneath the state directory, lexically. */
	ck_assert(local_state_route_socket(
		"/st", "http+unix://%2Fst%2Fsandboxes%2Fa%2Fboot%2Fagent.sock/",
		path, sizeof(path)));
	ck_assert_str_eq(path, "/st/sandboxes/a/boot/agent.sock");
	ck_assert(!local_state_route_socket(
		"/st", "http+unix://%2Fstx%2Fagent.sock/", NULL, 0));
	ck_assert(!local_state_route_socket(
		"/st", "http+unix://%2Fst%2F..%2Fagent.sock/", NULL, 0));
	ck_assert(!local_state_route_socket("/st", "http+unix://%2Fst/", NULL,
					    0));
	ck_assert(!local_state_route_socket("/st", "http://127.0.0.1:1/", NULL,
					    0));
	ck_assert(!local_state_route_socket(
		"/st", "http+unix://%2Fvar%2Frun%2Fdocker.sock/", NULL, 0));
}
END_TEST

Suite *make_local_suite(void)
{
	Suite *s = suite_create("local");
	TCase *tc;

	tc = tcase_create("names");
	tcase_add_test(tc, id_validation);
	tcase_add_test(tc, route_rules);
	tcase_add_test(tc, unix_routes);
	suite_add_tcase(s, tc);

	tc = tcase_create("records");
	tcase_add_test(tc, record_roundtrip_exact);
	tcase_add_test(tc, record_minimal_encoding);
	tcase_add_test(tc, record_confinement);
	tcase_add_test(tc, record_every_state);
	tcase_add_test(tc, record_azure_object);
	tcase_add_test(tc, record_rejects);
	tcase_add_test(tc, record_labels_and_lists);
	suite_add_tcase(s, tc);

	tc = tcase_create("dir");
	tcase_add_test(tc, state_dir_order);
	tcase_add_test(tc, state_dir_relative_and_env);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, state_setup, state_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, state_list_and_read);
	tcase_add_test(tc, state_list_skips_strays);
	tcase_add_test(tc, state_corrupt_records);
	tcase_add_test(tc, state_atomic_replace);
	tcase_add_test(tc, state_lock_exclusion);
	tcase_add_test(tc, state_rmtree_deep);
	tcase_add_test(tc, state_rmtree_retry);
	tcase_add_test(tc, state_owner_only);
	suite_add_tcase(s, tc);
	return s;
}

/* ---- the lifecycle, against the real agent ------------------------------ */

static struct local_ctl ctl;
static char *ctl_base; /* per tcase, made by the runner process */
static char *ctl_state; /* per test, below ctl_base */

/* Stop and remove every sandbox of a state directory, then the directory. */
static void sweep_dir(const char *dir)
{
	struct local_ctl c;
	struct local_err err = {""};
	char **ids = NULL;
	size_t n = 0, i;

	if (local_ctl_init(&c, dir, &err) == 0) {
		if (local_state_list(dir, &ids, &n) == 0) {
			for (i = 0; i < n; i++)
				if (local_ctl_rm(&c, ids[i], true, &err) < 0)
					fprintf(stderr, "cleanup: %s\n",
						err.msg);
			local_state_ids_free(ids, n);
		}
		local_ctl_cleanup(&c);
	}
	th_rmtree(dir);
}

/*
 * A failed assertion ends a forked test at once, without its teardown, so
 * the tcase's unchecked teardown (run by the runner itself) sweeps every
 * test's directory again: no agent outlives the suite.
 */
static void ctl_base_setup(void)
{
	ctl_base = th_tmpdir("ctl");
}

static void ctl_base_teardown(void)
{
	struct dirent *de;
	char path[PATH_MAX];
	DIR *d = opendir(ctl_base);

	while (d != NULL && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", ctl_base, de->d_name);
		sweep_dir(path);
	}
	if (d != NULL)
		closedir(d);
	th_rmtree(ctl_base);
	free(ctl_base);
	ctl_base = NULL;
}

static void ctl_setup(void)
{
	struct local_err err = {""};

	if (asprintf(&ctl_state, "%s/t-XXXXXX", ctl_base) < 0 ||
	    mkdtemp(ctl_state) == NULL)
		ck_abort_msg("mkdtemp");
	setenv("SANDBOXFS_AGENT", th_program("sandbox-agent"), 1);
	ck_assert_int_eq(local_ctl_init(&ctl, ctl_state, &err), 0);
	ctl.stop_timeout_ms = 5000;
	ctl.start_timeout_ms = 20000;
}

static void ctl_teardown(void)
{
	local_ctl_cleanup(&ctl);
	sweep_dir(ctl_state);
	free(ctl_state);
	ctl_state = NULL;
}

static void get_record(const char *id, struct proto_record *r)
{
	struct local_err err = {""};

	ck_assert_msg(local_state_read(ctl.state_dir, id, r, &err) == 0,
		      "read %s: %s", id, err.msg);
}

static char *ctl_path(const char *id, enum local_path which)
{
	return local_state_path(ctl.state_dir, id, which);
}

/* The process is gone (or a zombie nobody reaped yet). */
static bool proc_gone(pid_t pid)
{
	char path[64], text[512], *paren;
	FILE *f;
	size_t n;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	paren = strrchr(text, ')');
	return paren != NULL && (paren[2] == 'Z' || paren[2] == 'X');
}

static void must(int rc, const struct local_err *err, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %d %s", what, rc, err->msg);
}

static long http_status(const char *url, const char *path)
{
	struct th_resp r;
	char full[256];
	long status;

	snprintf(full, sizeof(full), "%.*s%s", (int)strlen(url) - 1, url, path);
	th_http("GET", full, NULL, NULL, 0, &r);
	status = r.status;
	th_resp_cleanup(&r);
	return status;
}

START_TEST(ctl_create_and_errors)
{
	struct local_create_opts from_missing = {.from = "/nonexistent/src"};
	struct local_err err = {""};
	struct proto_record r;
	struct stat st;
	char **ids = NULL, *p;
	size_t n = 0;

	ck_assert_int_eq(local_ctl_create(&ctl, "bad name", NULL, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "invalid sandbox name"));
	must(local_ctl_create(&ctl, "box", NULL, &err), &err, "create");
	get_record("box", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_str_eq(proto_record_label(&r, PROTO_TRANSPORT_LABEL),
			 PROTO_TRANSPORT_AGENT);
	ck_assert_ptr_null(r.agent_url);
	ck_assert_ptr_nonnull(r.created_at);
	if (geteuid() == 0) {
		/* An identity of its own, from the reserved range. */
		ck_assert_int_ge(r.exec_uid, (long)LOCAL_CTL_DYNAMIC_BASE);
		ck_assert_int_lt(r.exec_uid, (long)(LOCAL_CTL_DYNAMIC_BASE +
						    LOCAL_CTL_DYNAMIC_COUNT));
		ck_assert_int_eq(r.exec_gid, r.exec_uid);
		ck_assert(r.dynamic_user);
		ck_assert_ptr_null(r.exec_user);
	} else {
		ck_assert_int_eq(r.exec_uid, -1);
		ck_assert(!r.dynamic_user);
	}
	/* The limits and the network are recorded, defaults filled in. */
	ck_assert_uint_eq(r.pids, SBX_DEFAULT_PIDS);
	ck_assert_uint_eq(r.tmp_size, SBX_DEFAULT_TMP_SIZE);
	ck_assert_uint_eq(r.memory, sbx_default_memory());
	ck_assert_str_eq(r.network, "user");
	p = ctl_path("box", LOCAL_PATH_ROOT);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	if (geteuid() == 0) {
		ck_assert_int_eq(st.st_uid, r.exec_uid);
		ck_assert_int_eq(st.st_gid, r.exec_gid);
	}
	proto_record_cleanup(&r);
	free(p);
	p = ctl_path("box", LOCAL_PATH_BOOT);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	free(p);

	err.msg[0] = '\0';
	ck_assert_int_eq(local_ctl_create(&ctl, "box", NULL, &err), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "already exists"));

	ck_assert_int_eq(local_ctl_start(&ctl, "ghost", &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no sandbox 'ghost'"));
	ck_assert_int_eq(local_ctl_stop(&ctl, "ghost", &err), -ENOENT);
	ck_assert_int_eq(local_ctl_restart(&ctl, "ghost", &err), -ENOENT);
	ck_assert_int_eq(local_ctl_rm(&ctl, "ghost", true, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no sandbox 'ghost'"));
	{
		struct local_status s;

		ck_assert_int_eq(local_ctl_status(&ctl, "ghost", &s, &err),
				 -ENOENT);
	}
	ck_assert_int_eq(local_ctl_start(&ctl, "../x", &err), -EINVAL);

	/* A failed create leaves nothing behind. */
	ck_assert_int_eq(local_ctl_create(&ctl, "nosrc", &from_missing, &err),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/src"));
	ck_assert_int_eq(local_state_list(ctl.state_dir, &ids, &n), 0);
	ck_assert_uint_eq(n, 1);
	local_state_ids_free(ids, n);

	if (geteuid() == 0) {
		struct local_create_opts u = {.user = "root"};

		ck_assert_int_eq(local_ctl_create(&ctl, "u0", &u, &err),
				 -EINVAL);
		u.user = "no-such-user-here";
		ck_assert_int_eq(local_ctl_create(&ctl, "u1", &u, &err),
				 -ENOENT);
		ck_assert_ptr_nonnull(strstr(err.msg, "unknown user"));
		u.user = "1234:4321";
		must(local_ctl_create(&ctl, "u2", &u, &err), &err, "uid:gid");
		get_record("u2", &r);
		ck_assert_int_eq(r.exec_uid, 1234);
		ck_assert_int_eq(r.exec_gid, 4321);
		proto_record_cleanup(&r);
	} else {
		struct local_create_opts u = {.user = "nobody"};

		ck_assert_int_eq(local_ctl_create(&ctl, "u0", &u, &err),
				 -EPERM);
	}
}
END_TEST

/* The claim of uid in the registry: the sandbox directory it names, or
 * NULL. */
static char *claim_of(long uid)
{
	char path[PATH_MAX], *text;

	snprintf(path, sizeof(path), "%s/%ld", LOCAL_CTL_DYNAMIC_REGISTRY, uid);
	if (access(path, F_OK) < 0)
		return NULL;
	text = th_read_file(path, NULL);
	text[strcspn(text, "\n")] = '\0';
	return text;
}

/* Root's sandboxes get identities of their own, whatever state directory
 * they are in, claimed while they exist and given back by rm. */
START_TEST(ctl_identity)
{
	struct local_create_opts o = {.pids = 64, .network = "none"};
	struct local_err err = {""};
	struct local_ctl other;
	struct proto_record r;
	char *dir2 = th_tmpdir("state2"), *claim, *d;
	long a, b, c2;

	if (geteuid() != 0)
		return; /* only root hands out identities */
	must(local_ctl_create(&ctl, "ida", &o, &err), &err, "create ida");
	must(local_ctl_create(&ctl, "idb", NULL, &err), &err, "create idb");
	get_record("ida", &r);
	a = r.exec_uid;
	ck_assert_uint_eq(r.pids, 64);
	ck_assert_str_eq(r.network, "none");
	proto_record_cleanup(&r);
	get_record("idb", &r);
	b = r.exec_uid;
	proto_record_cleanup(&r);
	ck_assert_int_ne(a, b);
	must(local_ctl_init(&other, dir2, &err), &err, "init");
	must(local_ctl_create(&other, "ida", NULL, &err), &err, "create 2");
	{
		struct proto_record r2;

		ck_assert_int_eq(
			local_state_read(other.state_dir, "ida", &r2, &err), 0);
		c2 = r2.exec_uid;
		proto_record_cleanup(&r2);
	}
	ck_assert_int_ne(c2, a);
	ck_assert_int_ne(c2, b);
	d = local_state_path(ctl.state_dir, "ida", LOCAL_PATH_DIR);
	claim = claim_of(a);
	ck_assert_ptr_nonnull(claim);
	ck_assert_str_eq(claim, d);
	free(claim);
	free(d);
	/* rm gives it back; a failed create claims nothing. */
	must(local_ctl_rm(&ctl, "idb", false, &err), &err, "rm");
	ck_assert_ptr_null(claim_of(b));
	o.pids = 3;
	ck_assert_int_eq(local_ctl_create(&ctl, "bad", &o, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--pids"));
	must(local_ctl_rm(&other, "ida", false, &err), &err, "rm 2");
	must(local_ctl_rm(&ctl, "ida", false, &err), &err, "rm a");
	ck_assert_ptr_null(claim_of(a));
	ck_assert_ptr_null(claim_of(c2));
	local_ctl_cleanup(&other);
	th_rmtree(dir2);
	free(dir2);
}
END_TEST

START_TEST(ctl_corrupt_record)
{
	struct local_err err = {""};
	struct local_status s;
	char *rec, *dir;
	struct stat st;

	must(local_ctl_create(&ctl, "bad", NULL, &err), &err, "create");
	rec = ctl_path("bad", LOCAL_PATH_RECORD);
	th_write_file(rec, "{\"id\":\"bad\",\"state\":", 20);
	ck_assert_int_eq(local_ctl_start(&ctl, "bad", &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, rec));
	ck_assert_int_eq(local_ctl_status(&ctl, "bad", &s, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, rec));
	ck_assert_int_eq(local_ctl_rm(&ctl, "bad", false, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "rm -f"));
	dir = ctl_path("bad", LOCAL_PATH_DIR);
	ck_assert_int_eq(stat(dir, &st), 0);
	must(local_ctl_rm(&ctl, "bad", true, &err), &err, "rm -f");
	ck_assert_int_eq(stat(dir, &st), -1);
	free(rec);
	free(dir);
}
END_TEST

START_TEST(ctl_native)
{
	struct local_create_opts o = {.native = true};
	struct local_err err = {""};
	struct local_status s;
	struct proto_record r;

	must(local_ctl_create(&ctl, "nat", &o, &err), &err, "create");
	get_record("nat", &r);
	ck_assert_uint_eq(r.nlabels, 0);
	ck_assert_int_eq(proto_record_transport(&r), PROTO_RECORD_NATIVE);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
	must(local_ctl_start(&ctl, "nat", &err), &err, "start");
	get_record("nat", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert_ptr_null(r.agent_url);
	ck_assert_int_eq(r.agent_pid, 0);
	ck_assert_uint_eq(r.boot_count, 1);
	proto_record_cleanup(&r);
	must(local_ctl_status(&ctl, "nat", &s, &err), &err, "status");
	ck_assert(!s.alive);
	ck_assert(!s.answered);
	local_status_cleanup(&s);
	ck_assert_int_eq(local_ctl_rm(&ctl, "nat", false, &err), -EBUSY);
	must(local_ctl_stop(&ctl, "nat", &err), &err, "stop");
	get_record("nat", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
	must(local_ctl_rm(&ctl, "nat", false, &err), &err, "rm");
}
END_TEST

static void set_times(const char *path, time_t t, bool nofollow)
{
	struct timespec ts[2] = {{t, 0}, {t, 0}};

	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts,
				   nofollow ? AT_SYMLINK_NOFOLLOW : 0),
			 0);
}

START_TEST(ctl_create_from)
{
	struct local_err err = {""};
	struct local_create_opts o = {.from = NULL};
	char *src = th_tmpdir("src"), *root, p[PATH_MAX], q[PATH_MAX];
	char target[PATH_MAX], *text;
	uid_t want_uid = geteuid();
	struct proto_record r;
	struct stat st;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/a.txt", src);
	th_write_file(p, "hello", 5);
	ck_assert_int_eq(chmod(p, 0640), 0);
	set_times(p, 1000000000, false);
	snprintf(p, sizeof(p), "%s/sub/b", src);
	th_write_file(p, "bee", 3);
	ck_assert_int_eq(chmod(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/sub/setuid", src);
	th_write_file(p, "#!/bin/sh\n", 10);
	ck_assert_int_eq(chmod(p, 04755), 0);
	snprintf(p, sizeof(p), "%s/sub/empty", src);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/link", src);
	ck_assert_int_eq(symlink("a.txt", p), 0);
	snprintf(p, sizeof(p), "%s/dangling", src);
	ck_assert_int_eq(symlink("/nonexistent/target", p), 0);
	set_times(p, 1100000000, true);
	snprintf(p, sizeof(p), "%s/fifo", src);
	ck_assert_int_eq(mkfifo(p, 0620), 0);
	ck_assert_int_eq(chmod(p, 0620), 0);
	snprintf(p, sizeof(p), "%s/sub", src);
	ck_assert_int_eq(chmod(p, 0750), 0);
	set_times(p, 1200000000, false);
	ck_assert_int_eq(chmod(src, 0751), 0);

	o.from = src;
	must(local_ctl_create(&ctl, "copy", &o, &err), &err, "create --from");
	root = ctl_path("copy", LOCAL_PATH_ROOT);
	get_record("copy", &r);
	if (geteuid() == 0)
		want_uid = (uid_t)r.exec_uid;
	proto_record_cleanup(&r);

	ck_assert_int_eq(stat(root, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0751);
	ck_assert_int_eq(st.st_uid, want_uid);
	snprintf(q, sizeof(q), "%s/a.txt", root);
	text = th_read_file(q, NULL);
	ck_assert_str_eq(text, "hello");
	free(text);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0640);
	ck_assert_int_eq(st.st_mtime, 1000000000);
	ck_assert_int_eq(st.st_uid, want_uid);
	snprintf(q, sizeof(q), "%s/sub", root);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(st.st_mtime, 1200000000);
	snprintf(q, sizeof(q), "%s/sub/b", root);
	text = th_read_file(q, NULL);
	ck_assert_str_eq(text, "bee");
	free(text);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	snprintf(q, sizeof(q), "%s/sub/setuid", root);
	ck_assert_int_eq(stat(q, &st), 0);
	/* Set-id bits do not survive the hand-over to the exec user. */
	ck_assert_int_eq(st.st_mode & 07777, geteuid() == 0 ? 0755 : 04755);
	snprintf(q, sizeof(q), "%s/sub/empty", root);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	snprintf(q, sizeof(q), "%s/link", root);
	n = readlink(q, target, sizeof(target) - 1);
	ck_assert_int_eq(n, 5);
	target[n] = '\0';
	ck_assert_str_eq(target, "a.txt");
	ck_assert_int_eq(lstat(q, &st), 0);
	ck_assert_int_eq(st.st_uid, want_uid);
	snprintf(q, sizeof(q), "%s/dangling", root);
	n = readlink(q, target, sizeof(target) - 1);
	ck_assert_int_gt(n, 0);
	target[n] = '\0';
	ck_assert_str_eq(target, "/nonexistent/target");
	ck_assert_int_eq(lstat(q, &st), 0);
	ck_assert_int_eq(st.st_mtime, 1100000000);
	snprintf(q, sizeof(q), "%s/fifo", root);
	ck_assert_int_eq(lstat(q, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0620);

	/* The source is untouched. */
	snprintf(p, sizeof(p), "%s/a.txt", src);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, geteuid());
	free(root);
	th_rmtree(src);
	free(src);
}
END_TEST

/* The token file as the agent left it; returns the credential (heap). */
static char *check_token(const char *id)
{
	char *path = ctl_path(id, LOCAL_PATH_TOKEN), *text;
	struct stat st;
	size_t len = 0;

	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	text = th_read_file(path, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(len, 44);
	ck_assert(token_valid(text, len));
	free(path);
	return text;
}

START_TEST(ctl_lifecycle)
{
	struct local_err err = {""};
	struct local_status s;
	struct proto_record r;
	char *tok1, *tok2, *tok3, *path, *text, *sock, *want;
	char got[PATH_MAX];
	pid_t pid1, pid2, pid3, holder = 0;
	struct stat st;
	int lock;

	must(local_ctl_create(&ctl, "life", NULL, &err), &err, "create");
	must(local_ctl_start(&ctl, "life", &err), &err, "start");
	get_record("life", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	/* The agent listens on its socket in the sandbox's own directory,
	 * mode 0600, and nowhere else. */
	sock = ctl_path("life", LOCAL_PATH_SOCKET);
	want = unixurl_format(sock);
	ck_assert_str_eq(r.agent_url, want);
	free(want);
	ck_assert(local_state_route_socket(ctl.state_dir, r.agent_url, got,
					   sizeof(got)));
	ck_assert_str_eq(got, sock);
	ck_assert_int_eq(lstat(sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(r.port, 0);
	ck_assert_uint_eq(r.boot_count, 1);
	ck_assert_ptr_nonnull(r.started_at);
	pid1 = (pid_t)r.agent_pid;
	ck_assert_int_gt(pid1, 0);
	/* It holds its lock, and its command line names no path of the
	 * sandbox. */
	ck_assert_int_eq(local_ctl_agent_alive(ctl.state_dir, "life", &holder),
			 1);
	ck_assert_int_eq(holder, pid1);
	path = ctl_path("life", LOCAL_PATH_ROOT);
	ck_assert(!local_ctl_agent_matches(pid1, path));
	free(path);
	tok1 = check_token("life");
	/* The record never carries the credential. */
	path = ctl_path("life", LOCAL_PATH_RECORD);
	text = th_read_file(path, NULL);
	ck_assert_ptr_null(strstr(text, tok1));
	free(text);
	free(path);
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health?version=1"), 200);
	proto_record_cleanup(&r);
	/* The agent holds none of our descriptors: the lock is free. */
	ck_assert_int_eq(local_state_lock(ctl.state_dir, "life", 0, &lock), 0);
	local_state_unlock(lock);

	must(local_ctl_status(&ctl, "life", &s, &err), &err, "status");
	ck_assert(s.alive);
	ck_assert(!s.died);
	ck_assert_int_eq(s.pid, pid1);
	ck_assert(s.answered);
	ck_assert_int_eq(s.health.protocol_version, 1);
	ck_assert_str_ne(s.health.boot_id, "");
	local_status_cleanup(&s);

	/* Starting a running sandbox changes nothing. */
	must(local_ctl_start(&ctl, "life", &err), &err, "start again");
	get_record("life", &r);
	ck_assert_int_eq(r.agent_pid, pid1);
	ck_assert_uint_eq(r.boot_count, 1);
	proto_record_cleanup(&r);

	/* Restart: a new boot and credential on the same socket. */
	must(local_ctl_restart(&ctl, "life", &err), &err, "restart");
	get_record("life", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert(
		local_state_route_socket(ctl.state_dir, r.agent_url, NULL, 0));
	pid2 = (pid_t)r.agent_pid;
	ck_assert_int_ne(pid2, pid1);
	ck_assert(proc_gone(pid1));
	ck_assert_uint_eq(r.boot_count, 2);
	tok2 = check_token("life");
	ck_assert_str_ne(tok1, tok2);
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health"), 200);
	proto_record_cleanup(&r);

	/* A socket left by an agent that died is replaced at the next
	 * start. */
	must(local_ctl_stop(&ctl, "life", &err), &err, "stop");
	ck_assert(proc_gone(pid2));
	ck_assert_int_eq(lstat(sock, &st), -1);
	must(local_ctl_start(&ctl, "life", &err), &err, "start again");
	get_record("life", &r);
	pid3 = (pid_t)r.agent_pid;
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health"), 200);
	proto_record_cleanup(&r);
	tok3 = check_token("life");
	ck_assert_str_ne(tok3, tok2);
	free(sock);

	/* Stop: agent gone, credential gone, route cleared. */
	must(local_ctl_stop(&ctl, "life", &err), &err, "stop");
	ck_assert(proc_gone(pid3));
	get_record("life", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_ptr_null(r.agent_url);
	ck_assert_int_eq(r.agent_pid, 0);
	proto_record_cleanup(&r);
	path = ctl_path("life", LOCAL_PATH_TOKEN);
	ck_assert_int_eq(lstat(path, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	free(path);
	must(local_ctl_stop(&ctl, "life", &err), &err, "stop again");
	must(local_ctl_status(&ctl, "life", &s, &err), &err, "status");
	ck_assert(!s.alive);
	ck_assert(!s.answered);
	local_status_cleanup(&s);

	/* rm: refused while running, done with force. */
	must(local_ctl_start(&ctl, "life", &err), &err, "start");
	get_record("life", &r);
	pid1 = (pid_t)r.agent_pid;
	proto_record_cleanup(&r);
	ck_assert_int_eq(local_ctl_rm(&ctl, "life", false, &err), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err.msg, "running"));
	ck_assert(!proc_gone(pid1));
	must(local_ctl_rm(&ctl, "life", true, &err), &err, "rm -f");
	ck_assert(proc_gone(pid1));
	path = ctl_path("life", LOCAL_PATH_DIR);
	ck_assert_int_eq(lstat(path, &st), -1);
	free(path);
	free(tok1);
	free(tok2);
	free(tok3);
}
END_TEST

START_TEST(ctl_stale_and_foreign_pids)
{
	struct local_err err = {""};
	struct local_status s;
	struct proto_record r;
	pid_t pid;
	long long deadline;

	must(local_ctl_create(&ctl, "stale", NULL, &err), &err, "create");
	must(local_ctl_start(&ctl, "stale", &err), &err, "start");
	get_record("stale", &r);
	pid = (pid_t)r.agent_pid;
	proto_record_cleanup(&r);
	/* The agent dies behind our back; the record still says Running. */
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	deadline = th_now_ms() + 5000;
	while (!proc_gone(pid) && th_now_ms() < deadline)
		usleep(20000);
	ck_assert(proc_gone(pid));
	/* The lock goes with the last of its threads. */
	deadline = th_now_ms() + 5000;
	while (local_ctl_agent_alive(ctl.state_dir, "stale", NULL) != 0 &&
	       th_now_ms() < deadline)
		usleep(20000);
	ck_assert_int_eq(local_ctl_agent_alive(ctl.state_dir, "stale", NULL),
			 0);
	/* Said so: Running on record, but its agent died. */
	must(local_ctl_status(&ctl, "stale", &s, &err), &err, "status");
	ck_assert(!s.alive);
	ck_assert(s.died);
	ck_assert(!s.answered);
	ck_assert(local_ctl_agent_died(&ctl, &s.rec));
	local_status_cleanup(&s);
	must(local_ctl_start(&ctl, "stale", &err), &err, "start after crash");
	get_record("stale", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_RUNNING);
	ck_assert_int_ne(r.agent_pid, pid);
	ck_assert_uint_eq(r.boot_count, 2);
	ck_assert_int_eq(http_status(r.agent_url, "/v1/health"), 200);
	pid = (pid_t)r.agent_pid;

	/* A recorded pid that is not this sandbox's agent is never
	 * signalled: here it is the test itself. */
	must(local_ctl_stop(&ctl, "stale", &err), &err, "stop");
	ck_assert(proc_gone(pid));
	r.state = PROTO_RECORD_RUNNING;
	r.agent_pid = getpid();
	must(local_state_write(ctl.state_dir, &r, &err), &err, "write");
	/* A recycled pid holds no lock: the agent counts as dead. */
	ck_assert(local_ctl_agent_died(&ctl, &r));
	proto_record_cleanup(&r);
	must(local_ctl_stop(&ctl, "stale", &err), &err, "stop foreign");
	ck_assert(!local_ctl_agent_matches(getpid(), "/"));
	get_record("stale", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
}
END_TEST

/* A stand-in agent: a script called sandbox-agent (so that stop
 * recognises it) with the given body. */
static char *fake_agent(const char *body)
{
	char *dir = th_tmpdir("fake"), *path, *text;

	if (asprintf(&path, "%s/sandbox-agent", dir) < 0 ||
	    asprintf(&text, "#!/bin/sh\n%s\n", body) < 0)
		ck_abort_msg("asprintf");
	th_write_file(path, text, strlen(text));
	ck_assert_int_eq(chmod(path, 0755), 0);
	free(text);
	free(dir);
	return path;
}

START_TEST(ctl_start_failures)
{
	struct local_err err = {""};
	struct proto_record r;
	char *log, *text, *pidfile, *dir;
	long long t0;
	pid_t pid;

	must(local_ctl_create(&ctl, "f", NULL, &err), &err, "create");
	log = ctl_path("f", LOCAL_PATH_LOG);

	/* An agent that exits at once. */
	free(ctl.agent);
	ctl.agent = fake_agent("echo 'boom: cannot start' >&2; exit 1");
	ck_assert_int_eq(local_ctl_start(&ctl, "f", &err), -EIO);
	ck_assert_ptr_nonnull(strstr(err.msg, "exited"));
	ck_assert_ptr_nonnull(strstr(err.msg, log));
	get_record("f", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_ptr_null(r.agent_url);
	proto_record_cleanup(&r);
	text = th_read_file(log, NULL);
	ck_assert_ptr_nonnull(strstr(text, "boom: cannot start"));
	free(text);
	dir = strdup(ctl.agent);
	*strrchr(dir, '/') = '\0';
	th_rmtree(dir);
	free(dir);

	/* An agent that never answers: stopped after the deadline. */
	dir = ctl_path("f", LOCAL_PATH_DIR);
	if (asprintf(&pidfile, "%s/fake.pid", dir) < 0 ||
	    asprintf(&text, "echo $$ > '%s'\nwhile :; do sleep 0.1; done",
		     pidfile) < 0)
		ck_abort_msg("asprintf");
	free(dir);
	free(ctl.agent);
	ctl.agent = fake_agent(text);
	free(text);
	ctl.start_timeout_ms = 1500;
	t0 = th_now_ms();
	ck_assert_int_eq(local_ctl_start(&ctl, "f", &err), -ETIMEDOUT);
	ck_assert_int_ge(th_now_ms() - t0, 1400);
	ck_assert_ptr_nonnull(strstr(err.msg, "did not become healthy"));
	ck_assert_ptr_nonnull(strstr(err.msg, log));
	text = th_read_file(pidfile, NULL);
	ck_assert_ptr_nonnull(text);
	pid = (pid_t)strtol(text, NULL, 10);
	free(text);
	ck_assert_int_gt(pid, 0);
	ck_assert(proc_gone(pid));
	get_record("f", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	ck_assert_int_eq(r.agent_pid, 0);
	proto_record_cleanup(&r);
	dir = strdup(ctl.agent);
	*strrchr(dir, '/') = '\0';
	th_rmtree(dir);
	free(dir);
	free(pidfile);

	/* No agent binary at all. */
	free(ctl.agent);
	ctl.agent = strdup("/nonexistent/sandbox-agent");
	ck_assert_int_eq(local_ctl_start(&ctl, "f", &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/sandbox-agent"));
	get_record("f", &r);
	ck_assert_int_eq(r.state, PROTO_RECORD_STOPPED);
	proto_record_cleanup(&r);
	free(log);
}
END_TEST

static int stop_at_once(void *arg, const struct local_copy_progress *p)
{
	(void)arg;
	(void)p;
	return -EINTR;
}

/* What a create told its progress hook; stop_after ends it (-EINTR) at
 * the first call that has seen that many bytes. */
struct progress_log {
	unsigned calls;
	struct local_copy_progress last;
	bool monotonic;
	uint64_t stop_after; /* 0: never */
};

static int log_progress(void *arg, const struct local_copy_progress *p)
{
	struct progress_log *l = arg;

	if (p->files < l->last.files || p->bytes < l->last.bytes)
		l->monotonic = false;
	l->calls++;
	l->last = *p;
	if (l->stop_after != 0 && p->bytes >= l->stop_after)
		return -EINTR;
	return 0;
}

START_TEST(ctl_create_progress)
{
	struct local_create_opts o = {.from = NULL};
	struct progress_log l = {0, {0, 0}, true, 0};
	struct local_err err = {""};
	char *src = th_tmpdir("src"), p[PATH_MAX], *dir, *sb;
	const size_t big = 2 * LOCAL_COPY_CHUNK + 12345;
	char *data = calloc(1, big);
	struct dirent *de;
	struct stat st;
	size_t left;
	DIR *d;

	ck_assert_ptr_nonnull(data);
	snprintf(p, sizeof(p), "%s/big", src);
	th_write_file(p, data, big);
	snprintf(p, sizeof(p), "%s/sub/a", src);
	th_write_file(p, "hello", 5);
	snprintf(p, sizeof(p), "%s/sub/b", src);
	th_write_file(p, "bee", 3);
	snprintf(p, sizeof(p), "%s/link", src);
	ck_assert_int_eq(symlink("big", p), 0);
	o.from = src;

	/* Every entry but the directories, and every byte of regular
	 * files; a call per chunk of the big file; the totals last. */
	must(local_ctl_create_progress(&ctl, "prog", &o, log_progress, &l,
				       &err),
	     &err, "create with progress");
	ck_assert(l.monotonic);
	ck_assert_uint_eq(l.last.files, 4);
	ck_assert_uint_eq(l.last.bytes, big + 5 + 3);
	ck_assert_uint_ge(l.calls, 4 + 3 + 1);

	/* Without --from: one call, nothing copied. */
	memset(&l, 0, sizeof(l));
	l.monotonic = true;
	must(local_ctl_create_progress(&ctl, "empty", NULL, log_progress, &l,
				       &err),
	     &err, "create without --from");
	ck_assert_uint_eq(l.calls, 1);
	ck_assert_uint_eq(l.last.files + l.last.bytes, 0);

	/* Ended in the middle of the big file: the error is the hook's and
	 * nothing of the sandbox is left, not even a tombstone. */
	memset(&l, 0, sizeof(l));
	l.stop_after = 1;
	ck_assert_int_eq(local_ctl_create_progress(&ctl, "cut", &o,
						   log_progress, &l, &err),
			 -EINTR);
	ck_assert_ptr_nonnull(strstr(err.msg, "interrupted"));
	dir = ctl_path("cut", LOCAL_PATH_DIR);
	ck_assert_int_eq(stat(dir, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	free(dir);
	sb = ctl_path(NULL, LOCAL_PATH_SANDBOXES);
	d = opendir(sb);
	ck_assert_ptr_nonnull(d);
	left = 0;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0 &&
		    strcmp(de->d_name, "prog") != 0 &&
		    strcmp(de->d_name, "empty") != 0)
			left++;
	closedir(d);
	free(sb);
	ck_assert_uint_eq(left, 0);

	/* Ended before anything was copied (no --from). */
	memset(&l, 0, sizeof(l));
	l.stop_after = 0;
	ck_assert_int_eq(local_ctl_create_progress(&ctl, "cut2", NULL,
						   stop_at_once, NULL, &err),
			 -EINTR);
	dir = ctl_path("cut2", LOCAL_PATH_DIR);
	ck_assert_int_eq(stat(dir, &st), -1);
	free(dir);
	free(data);
	th_rmtree(src);
	free(src);
}
END_TEST

Suite *make_local_ctl_suite(void)
{
	Suite *s = suite_create("local_ctl");
	TCase *tc;

	tc = tcase_create("create");
	tcase_add_unchecked_fixture(tc, ctl_base_setup, ctl_base_teardown);
	tcase_add_checked_fixture(tc, ctl_setup, ctl_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, ctl_create_and_errors);
	tcase_add_test(tc, ctl_identity);
	tcase_add_test(tc, ctl_corrupt_record);
	tcase_add_test(tc, ctl_native);
	tcase_add_test(tc, ctl_create_from);
	tcase_add_test(tc, ctl_create_progress);
	suite_add_tcase(s, tc);

	tc = tcase_create("agent");
	tcase_add_unchecked_fixture(tc, ctl_base_setup, ctl_base_teardown);
	tcase_add_checked_fixture(tc, ctl_setup, ctl_teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, ctl_lifecycle);
	tcase_add_test(tc, ctl_stale_and_foreign_pids);
	tcase_add_test(tc, ctl_start_failures);
	suite_add_tcase(s, tc);
	return s;
}
