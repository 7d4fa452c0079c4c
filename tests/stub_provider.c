/* SPDX-License-Identifier: MIT */
/*
 * stub_provider: a counting, scriptable provider for the transport tests
 * (see stub_provider.h). It answers from fields the test sets and records
 * every call; it has no sandboxes, files or processes behind it.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/b64.h"
#include "common/proto.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "tests/helpers.h"
#include "tests/stub_provider.h"

#define STUB_ID_MAX 64
#define STUB_CRED_MAX 256

struct stub_provider {
	struct provider base;

	pthread_mutex_t mu;
	pthread_cond_t cond; /* broadcast on every call */

	/* answers */
	enum stub_label label;
	enum provider_state state;
	unsigned stopped_reads;
	char *route;
	enum stub_policy policy;
	unsigned generation;
	bool literal_cred;
	char cred[STUB_CRED_MAX];
	size_t cred_len;
	int cred_errno;
	bool gone;
	int judge_errno;
	unsigned never_mask;
	stub_provider_hook_fn *hook[STUB_CALL_COUNT];
	void *hook_arg[STUB_CALL_COUNT];

	/* observations */
	unsigned calls[STUB_CALL_COUNT];
	unsigned unexpected;
	char last_id[STUB_CALL_COUNT][STUB_ID_MAX];
	char last_checked[512];
};

static struct stub_provider *sp_of(struct provider *p)
{
	return p->priv;
}

static const char *const call_names[STUB_CALL_COUNT] = {
	[STUB_CALL_LIST] = "list",
	[STUB_CALL_RECORD] = "record",
	[STUB_CALL_ROUTE] = "route",
	[STUB_CALL_ROUTE_ALLOWED] = "route_allowed",
	[STUB_CALL_CREDENTIAL] = "credential",
	[STUB_CALL_JUDGE] = "judge",
	[STUB_CALL_RESUME] = "resume",
	[STUB_CALL_STOP] = "stop",
	[STUB_CALL_NATIVE_READ] = "native_read",
	[STUB_CALL_NATIVE_EXEC] = "native_exec",
};

/*
 * Count a call and run its hook. Returns false (with err set) when the
 * test declared the call must never happen. Called without the lock.
 */
static bool enter(struct stub_provider *sp, enum stub_call call, const char *id,
		  struct sbx_error *err)
{
	stub_provider_hook_fn *hook;
	void *arg;
	bool allowed;

	pthread_mutex_lock(&sp->mu);
	sp->calls[call]++;
	snprintf(sp->last_id[call], sizeof(sp->last_id[call]), "%s",
		 id ? id : "");
	allowed = (sp->never_mask & (1u << call)) == 0;
	if (!allowed)
		sp->unexpected++;
	hook = sp->hook[call];
	arg = sp->hook_arg[call];
	pthread_cond_broadcast(&sp->cond);
	pthread_mutex_unlock(&sp->mu);
	if (!allowed) {
		if (err != NULL)
			sbx_error_set(err, SBX_COMMAND_FAILED, NULL,
				      "stub provider: unexpected %s call",
				      call_names[call]);
		return false;
	}
	if (hook != NULL)
		hook(sp, call, id, arg);
	return true;
}

/* ---- the provider operations --------------------------------------------- */

static int op_list(struct provider *p, char ***ids, size_t *n,
		   struct sbx_error *err)
{
	struct stub_provider *sp = sp_of(p);
	char **v;

	if (!enter(sp, STUB_CALL_LIST, NULL, err))
		return -EIO;
	v = xcalloc(2, sizeof(*v));
	v[0] = xstrdup("session");
	*ids = v;
	*n = 1;
	return 0;
}

static int op_record(struct provider *p, const char *id,
		     struct provider_record *out, struct sbx_error *err)
{
	struct stub_provider *sp = sp_of(p);
	struct provider_record r;
	const char *value = NULL;
	unsigned reads;
	int rc = 0;

	if (!enter(sp, STUB_CALL_RECORD, id, err))
		return -EIO;
	memset(&r, 0, sizeof(r));
	pthread_mutex_lock(&sp->mu);
	if (sp->gone) {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_GONE,
			      "sandbox '%s' does not exist", id);
		rc = -ENOENT;
		goto out;
	}
	reads = sp->calls[STUB_CALL_RECORD];
	snprintf(r.id, sizeof(r.id), "%s", id);
	r.state =
		reads <= sp->stopped_reads ? PROVIDER_STATE_STOPPED : sp->state;
	if (sp->label == STUB_LABEL_AGENT)
		value = PROTO_TRANSPORT_AGENT;
	else if (sp->label == STUB_LABEL_UNKNOWN)
		value = "unknown";
	if (value != NULL) {
		r.labels = xcalloc(1, sizeof(*r.labels));
		r.labels[0].key = xstrdup(PROTO_TRANSPORT_LABEL);
		r.labels[0].value = xstrdup(value);
		r.nlabels = 1;
	}
	if (sp->route != NULL)
		r.route_hint = xstrdup(sp->route);
	*out = r;
out:
	pthread_mutex_unlock(&sp->mu);
	return rc;
}

static int op_route(struct provider *p, const char *id, char **url,
		    struct sbx_error *err)
{
	struct stub_provider *sp = sp_of(p);
	int rc = 0;

	if (!enter(sp, STUB_CALL_ROUTE, id, err))
		return -EIO;
	pthread_mutex_lock(&sp->mu);
	if (sp->gone || sp->route == NULL) {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_GONE,
			      "sandbox '%s' has no agent route", id);
		rc = -ENOENT;
	} else {
		*url = xstrdup(sp->route);
	}
	pthread_mutex_unlock(&sp->mu);
	return rc;
}

/* "http://HOST:PORT/" exactly, HOST one of the loopback literals. */
static bool loopback_route(const char *url)
{
	static const char *const hosts[] = {"http://127.0.0.1:",
					    "http://[::1]:"};
	size_t i, n;
	const char *p;

	for (i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		n = strlen(hosts[i]);
		if (strncmp(url, hosts[i], n) != 0)
			continue;
		p = url + n;
		if (*p < '1' || *p > '9')
			return false;
		for (n = 0; *p >= '0' && *p <= '9'; p++)
			n++;
		return n <= 5 && strcmp(p, "/") == 0;
	}
	return false;
}

static bool op_route_allowed(struct provider *p, const char *url)
{
	struct stub_provider *sp = sp_of(p);
	bool ok;

	if (!enter(sp, STUB_CALL_ROUTE_ALLOWED, NULL, NULL))
		return false;
	pthread_mutex_lock(&sp->mu);
	snprintf(sp->last_checked, sizeof(sp->last_checked), "%s",
		 url ? url : "");
	ok = url != NULL && sp->policy == STUB_POLICY_LOOPBACK &&
	     loopback_route(url);
	pthread_mutex_unlock(&sp->mu);
	return ok;
}

void stub_provider_credential_for(unsigned g, char out[45])
{
	unsigned char raw[32];

	memset(raw, (int)(g & 0xff), sizeof(raw));
	b64_encode(raw, sizeof(raw), out);
}

static int op_credential(struct provider *p, const char *id, char **bytes,
			 size_t *len, struct sbx_error *err)
{
	struct stub_provider *sp = sp_of(p);
	char cred[STUB_CRED_MAX];
	size_t n;
	int rc = 0;

	if (!enter(sp, STUB_CALL_CREDENTIAL, id, err))
		return -EIO;
	pthread_mutex_lock(&sp->mu);
	if (sp->cred_errno != 0) {
		rc = sp->cred_errno;
		if (rc == -ENOENT)
			sbx_error_set(err, SBX_UNREACHABLE, NULL,
				      "the agent credential is not there yet");
		else
			sbx_error_set(err, SBX_COMMAND_FAILED, NULL,
				      "sandbox.agentCredentials failed");
		goto out;
	}
	if (sp->literal_cred) {
		n = sp->cred_len;
		memcpy(cred, sp->cred, n);
	} else {
		stub_provider_credential_for(sp->generation, cred);
		n = 44;
	}
	*bytes = xmalloc(n + 1);
	memcpy(*bytes, cred, n);
	(*bytes)[n] = '\0';
	*len = n;
out:
	pthread_mutex_unlock(&sp->mu);
	return rc;
}

static int op_judge(struct provider *p, const struct provider_record *rec,
		    struct sbx_error *err)
{
	struct stub_provider *sp = sp_of(p);
	int rc;

	if (!enter(sp, STUB_CALL_JUDGE, rec ? rec->id : NULL, err))
		return -EIO;
	pthread_mutex_lock(&sp->mu);
	rc = sp->judge_errno;
	pthread_mutex_unlock(&sp->mu);
	if (rc != 0)
		sbx_error_set(err, SBX_COMMAND_FAILED, NULL,
			      "the sandbox's network policy was refused");
	return rc;
}

static int op_resume(struct provider *p, const char *id, struct sbx_error *err)
{
	return enter(sp_of(p), STUB_CALL_RESUME, id, err) ? 0 : -EIO;
}

static int op_stop(struct provider *p, const char *id, struct sbx_error *err)
{
	return enter(sp_of(p), STUB_CALL_STOP, id, err) ? 0 : -EIO;
}

static int op_native_read(struct provider *p, const char *id, const char *path,
			  struct buf *out, struct sbx_error *err)
{
	if (!enter(sp_of(p), STUB_CALL_NATIVE_READ, id, err))
		return -EIO;
	return buf_append_str(out, "native");
}

static int op_native_exec(struct provider *p, const char *id,
			  const char *command, const char *cwd,
			  struct provider_exec_result *out,
			  struct sbx_error *err)
{
	struct provider_exec_result r;
	int rc;

	if (!enter(sp_of(p), STUB_CALL_NATIVE_EXEC, id, err))
		return -EIO;
	memset(&r, 0, sizeof(r));
	buf_init(&r.out, 4096);
	buf_init(&r.err, 4096);
	rc = buf_append_str(&r.out, "native\n");
	if (rc != 0) {
		provider_exec_result_cleanup(&r);
		return rc;
	}
	r.has_exit = true;
	r.exit_code = 0;
	*out = r;
	return 0;
}

static void op_free(struct provider *p)
{
	stub_provider_free(sp_of(p));
}

static const struct provider_ops stub_ops = {
	.name = "stub",
	.list = op_list,
	.record = op_record,
	.route = op_route,
	.route_allowed = op_route_allowed,
	.credential = op_credential,
	.judge = op_judge,
	.resume = op_resume,
	.stop = op_stop,
	.native_read = op_native_read,
	.native_exec = op_native_exec,
	.ca_file = NULL,
	.resolve = NULL,
	.free = op_free,
};

/* ---- setup --------------------------------------------------------------- */

struct stub_provider *stub_provider_new(void)
{
	struct stub_provider *sp = xcalloc(1, sizeof(*sp));

	sp->base.ops = &stub_ops;
	sp->base.priv = sp;
	sp->label = STUB_LABEL_AGENT;
	sp->state = PROVIDER_STATE_RUNNING;
	sp->policy = STUB_POLICY_LOOPBACK;
	pthread_mutex_init(&sp->mu, NULL);
	clock_cond_init(&sp->cond);
	return sp;
}

struct provider *stub_provider_base(struct stub_provider *sp)
{
	return &sp->base;
}

void stub_provider_free(struct stub_provider *sp)
{
	if (sp == NULL)
		return;
	free(sp->route);
	pthread_cond_destroy(&sp->cond);
	pthread_mutex_destroy(&sp->mu);
	free(sp);
}

void stub_provider_set_label(struct stub_provider *sp, enum stub_label label)
{
	th_locked_set(&sp->mu, &sp->label, &label, sizeof(label));
}

void stub_provider_set_stopped_reads(struct stub_provider *sp, unsigned n)
{
	th_locked_set(&sp->mu, &sp->stopped_reads, &n, sizeof(n));
}

void stub_provider_set_state(struct stub_provider *sp,
			     enum provider_state state)
{
	th_locked_set(&sp->mu, &sp->state, &state, sizeof(state));
}

void stub_provider_set_route(struct stub_provider *sp, const char *url)
{
	char *copy = url ? xstrdup(url) : NULL;

	pthread_mutex_lock(&sp->mu);
	free(sp->route);
	sp->route = copy;
	pthread_mutex_unlock(&sp->mu);
}

void stub_provider_set_policy(struct stub_provider *sp, enum stub_policy policy)
{
	th_locked_set(&sp->mu, &sp->policy, &policy, sizeof(policy));
}

void stub_provider_set_generation(struct stub_provider *sp, unsigned g)
{
	th_locked_set(&sp->mu, &sp->generation, &g, sizeof(g));
}

void stub_provider_set_credential(struct stub_provider *sp, const char *raw,
				  size_t len)
{
	ck_assert_uint_le(len, STUB_CRED_MAX);
	pthread_mutex_lock(&sp->mu);
	sp->literal_cred = raw != NULL;
	if (raw != NULL)
		memcpy(sp->cred, raw, len);
	sp->cred_len = raw ? len : 0;
	pthread_mutex_unlock(&sp->mu);
}

void stub_provider_set_credential_errno(struct stub_provider *sp, int err)
{
	th_locked_set(&sp->mu, &sp->cred_errno, &err, sizeof(err));
}

void stub_provider_set_gone(struct stub_provider *sp, bool gone)
{
	th_locked_set(&sp->mu, &sp->gone, &gone, sizeof(gone));
}

void stub_provider_set_judge_errno(struct stub_provider *sp, int err)
{
	th_locked_set(&sp->mu, &sp->judge_errno, &err, sizeof(err));
}

void stub_provider_never(struct stub_provider *sp, enum stub_call call)
{
	pthread_mutex_lock(&sp->mu);
	sp->never_mask |= 1u << call;
	pthread_mutex_unlock(&sp->mu);
}

void stub_provider_set_hook(struct stub_provider *sp, enum stub_call call,
			    stub_provider_hook_fn *fn, void *arg)
{
	pthread_mutex_lock(&sp->mu);
	sp->hook[call] = fn;
	sp->hook_arg[call] = arg;
	pthread_mutex_unlock(&sp->mu);
}

/* ---- observations -------------------------------------------------------- */

unsigned stub_provider_calls(struct stub_provider *sp, enum stub_call call)
{
	return th_locked_uint(&sp->mu, &sp->calls[call]);
}

unsigned stub_provider_unexpected(struct stub_provider *sp)
{
	return th_locked_uint(&sp->mu, &sp->unexpected);
}

void stub_provider_last_id(struct stub_provider *sp, enum stub_call call,
			   char *out, size_t size)
{
	pthread_mutex_lock(&sp->mu);
	snprintf(out, size, "%s", sp->last_id[call]);
	pthread_mutex_unlock(&sp->mu);
}

void stub_provider_last_checked_route(struct stub_provider *sp, char *out,
				      size_t size)
{
	pthread_mutex_lock(&sp->mu);
	snprintf(out, size, "%s", sp->last_checked);
	pthread_mutex_unlock(&sp->mu);
}

bool stub_provider_wait_calls(struct stub_provider *sp, enum stub_call call,
			      unsigned n, long ms)
{
	struct timespec until;
	bool reached;

	clock_deadline_in(&until, ms);
	pthread_mutex_lock(&sp->mu);
	while (sp->calls[call] < n) {
		if (pthread_cond_timedwait(&sp->cond, &sp->mu, &until) ==
		    ETIMEDOUT)
			break;
	}
	reached = sp->calls[call] >= n;
	pthread_mutex_unlock(&sp->mu);
	return reached;
}

/* ---- the transport over it ----------------------------------------------- */

void stub_transport_config(struct transport_config *cfg, long response_ms,
			   bool with_agent)
{
	transport_config_defaults(cfg);
	cfg->connect_timeout_ms = 2000;
	cfg->response_timeout_ms = response_ms;
	cfg->body_idle_timeout_ms = response_ms;
	cfg->ready_timeout_ms = 5000;
	cfg->ready_interval_ms = 50;
	cfg->running_timeout_ms = 5000;
	cfg->new_sessions_use_agent = with_agent;
}

struct transport *stub_transport_new(struct stub_provider *sp,
				     const struct transport_config *cfg)
{
	struct transport *t = NULL;

	ck_assert_int_eq(transport_new(stub_provider_base(sp), cfg, &t), 0);
	ck_assert_ptr_nonnull(t);
	return t;
}
