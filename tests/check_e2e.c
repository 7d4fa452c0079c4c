/* SPDX-License-Identifier: MIT */
/*
 * End to end through real programs, below the mount: sandboxctl's library
 * starts real sandbox-agent processes; the local provider and the
 * transport core talk to them. What the seed's tests prove against stubs,
 * proved here against the real agent:
 *  - a restart (new credential, new port) is picked up by the next
 *    operation with exactly one new activation;
 *  - a command whose outcome is unknown (the agent dies while it runs) is
 *    reported as such and never run a second time.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/agent_client.h"
#include "common/proto_exec.h"
#include "client/local_ctl.h"
#include "client/local_state.h"
#include "client/provider_local.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "client/transport.h"

struct e2e {
	char *dir;
	char *state;
	struct local_ctl ctl;
	struct provider *prov;
	struct transport *t;
};

static void e2e_setup(struct e2e *e, const char *name)
{
	struct local_create_opts opts = {.from = NULL};
	struct transport_config cfg;
	struct local_err lerr = {""};
	struct sbx_error err;

	memset(e, 0, sizeof(*e));
	e->dir = th_tmpdir("e2e");
	/* Commands run as the exec user and must reach the session root. */
	ck_assert_int_eq(chmod(e->dir, 0711), 0);
	if (asprintf(&e->state, "%s/state", e->dir) < 0)
		ck_abort_msg("asprintf");
	ck_assert_int_eq(mkdir(e->state, 0755), 0);
	setenv("SANDBOXFS_AGENT", th_program("sandbox-agent"), 1);
	ck_assert_int_eq(local_ctl_init(&e->ctl, e->state, &lerr), 0);
	ck_assert_msg(local_ctl_create(&e->ctl, name, &opts, &lerr) == 0,
		      "create: %s", lerr.msg);
	ck_assert_msg(local_ctl_start(&e->ctl, name, &lerr) == 0, "start: %s",
		      lerr.msg);
	sbx_error_clear(&err);
	ck_assert_int_eq(provider_local_new(e->state, &e->prov, &err), 0);
	transport_config_defaults(&cfg);
	cfg.response_timeout_ms = 5000;
	cfg.ready_timeout_ms = 10000;
	ck_assert_int_eq(transport_new(e->prov, &cfg, &e->t), 0);
}

static void e2e_teardown(struct e2e *e, const char *name)
{
	struct local_err lerr = {""};

	transport_free(e->t);
	provider_free(e->prov);
	if (local_ctl_stop(&e->ctl, name, &lerr) < 0)
		fprintf(stderr, "stop: %s\n", lerr.msg);
	local_ctl_cleanup(&e->ctl);
	th_rmtree(e->dir);
	free(e->state);
	free(e->dir);
}

static char *record_field(struct e2e *e, const char *name, bool token)
{
	struct proto_record rec;
	struct local_err lerr = {""};
	char *path, *out;

	if (token) {
		path = local_state_path(e->state, name, LOCAL_PATH_TOKEN);
		out = th_read_file(path, NULL);
		free(path);
		return out;
	}
	proto_record_init(&rec);
	ck_assert_int_eq(local_state_read(e->state, name, &rec, &lerr), 0);
	out = strdup(rec.agent_url ? rec.agent_url : "");
	proto_record_cleanup(&rec);
	return out;
}

/* One operation through the core, the way the mount makes it: the
 * transport decision from a record read, then the agent request. */
static int stat_root(struct e2e *e, const char *name, struct sbx_error *err)
{
	enum transport_kind kind;
	struct proto_attr a;
	int rc;

	rc = transport_session_kind(e->t, name, TRANSPORT_OP_FILES, &kind, NULL,
				    err);
	if (rc < 0)
		return rc;
	ck_assert_int_eq(kind, TRANSPORT_AGENT);
	return ac_stat(e->t, name, "", &a, NULL, err);
}

START_TEST(restart_is_picked_up_with_one_new_activation)
{
	struct local_err lerr = {""};
	struct sbx_error err;
	struct e2e e;
	char *url1, *tok1, *url2, *tok2;
	unsigned gen;

	e2e_setup(&e, "e2e1");
	sbx_error_clear(&err);
	ck_assert_msg(stat_root(&e, "e2e1", &err) == 0, "%s", err.reason);
	gen = transport_generation(e.t, "e2e1");
	ck_assert_uint_eq(gen, 1);
	ck_assert_msg(stat_root(&e, "e2e1", &err) == 0, "%s", err.reason);
	ck_assert_uint_eq(transport_generation(e.t, "e2e1"), gen);

	url1 = record_field(&e, "e2e1", false);
	tok1 = record_field(&e, "e2e1", true);
	/* A new boot, on the same socket with a new credential. */
	ck_assert_int_eq(local_ctl_stop(&e.ctl, "e2e1", &lerr), 0);
	ck_assert_msg(local_ctl_start(&e.ctl, "e2e1", &lerr) == 0, "%s",
		      lerr.msg);
	url2 = record_field(&e, "e2e1", false);
	tok2 = record_field(&e, "e2e1", true);
	ck_assert_str_eq(url1, url2);
	ck_assert_str_ne(tok1, tok2);

	/* The cached connection's credential is refused: the next
	 * operation re-reads it and activates once. */
	sbx_error_clear(&err);
	ck_assert_msg(stat_root(&e, "e2e1", &err) == 0, "%s", err.reason);
	ck_assert_uint_eq(transport_generation(e.t, "e2e1"), gen + 1);
	ck_assert_msg(stat_root(&e, "e2e1", &err) == 0, "%s", err.reason);
	ck_assert_uint_eq(transport_generation(e.t, "e2e1"), gen + 1);

	/* And a restart with only a new credential (401,
	 * re-read, one activation). */
	ck_assert_msg(local_ctl_restart(&e.ctl, "e2e1", &lerr) == 0, "%s",
		      lerr.msg);
	free(tok1);
	tok1 = record_field(&e, "e2e1", true);
	ck_assert_str_ne(tok1, tok2);
	ck_assert_msg(stat_root(&e, "e2e1", &err) == 0, "%s", err.reason);
	ck_assert_uint_eq(transport_generation(e.t, "e2e1"), gen + 2);

	free(url1);
	free(url2);
	free(tok1);
	free(tok2);
	e2e_teardown(&e, "e2e1");
}
END_TEST

struct exec_arg {
	struct e2e *e;
	int rc;
	struct sbx_error err;
};

static void *run_exec(void *p)
{
	struct exec_arg *x = p;
	static char sh[] = "/bin/sh", c[] = "-c",
		    script[] = "echo ran >> count; sleep 30";
	char *argv[] = {sh, c, script, NULL};
	struct proto_exec_req req = {
		.argv = argv,
		.argc = 3,
		.timeout_ms = 60000,
	};
	struct ac_exit ex;

	sbx_error_clear(&x->err);
	x->rc = ac_exec(x->e->t, "e2e2", &req, NULL, NULL, &ex, &x->err);
	return NULL;
}

START_TEST(a_command_of_unknown_outcome_is_not_run_twice)
{
	struct local_status st;
	struct local_err lerr = {""};
	struct exec_arg x;
	struct sbx_error err;
	struct e2e e;
	pthread_t tid;
	char *root, *count, *text;
	long long deadline;

	e2e_setup(&e, "e2e2");
	sbx_error_clear(&err);
	ck_assert_msg(stat_root(&e, "e2e2", &err) == 0, "%s", err.reason);
	root = local_state_path(e.state, "e2e2", LOCAL_PATH_ROOT);
	if (asprintf(&count, "%s/count", root) < 0)
		ck_abort_msg("asprintf");

	memset(&x, 0, sizeof(x));
	x.e = &e;
	ck_assert_int_eq(pthread_create(&tid, NULL, run_exec, &x), 0);
	/* Wait until the command ran, then kill the agent under it. */
	deadline = th_now_ms() + 10000;
	while (access(count, F_OK) != 0) {
		ck_assert_msg(th_now_ms() < deadline,
			      "the command never ran (%d: %s)", x.rc,
			      x.err.reason);
		usleep(20000);
	}
	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(local_ctl_status(&e.ctl, "e2e2", &st, &lerr), 0);
	ck_assert(st.pid > 0);
	kill(st.pid, SIGKILL);
	local_status_cleanup(&st);
	pthread_join(tid, NULL);

	ck_assert_int_lt(x.rc, 0);
	ck_assert_str_eq(sbx_code_name(x.err.code), "SANDBOX_OUTCOME_UNKNOWN");
	ck_assert(!x.err.retryable);
	ck_assert_int_eq(sbx_error_errno(&x.err), -EIO);

	/* The agent comes back; nothing sends the command again. */
	ck_assert_msg(local_ctl_start(&e.ctl, "e2e2", &lerr) == 0, "%s",
		      lerr.msg);
	ck_assert_msg(stat_root(&e, "e2e2", &err) == 0, "%s", err.reason);
	usleep(300000);
	text = th_read_file(count, NULL);
	ck_assert_ptr_nonnull(text);
	ck_assert_str_eq(text, "ran\n");
	free(text);
	free(count);
	free(root);
	e2e_teardown(&e, "e2e2");
}
END_TEST

void e2e_cases(Suite *s)
{
	TCASE_TABLE(s, "real agents", NULL, NULL, 120,
		    restart_is_picked_up_with_one_new_activation,
		    a_command_of_unknown_outcome_is_not_run_twice);
}
