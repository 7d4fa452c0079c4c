/* SPDX-License-Identifier: MIT */
/*
 * transport_session: the transport decision for a sandbox (its label,
 * doc/transport-rules.md 1) and its capabilities, and the lifecycle of a
 * session as the transport sees it (rules 7): waiting until the agent is
 * ready, and resuming a stopped sandbox.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/sleep.h"
#include "client/transport.h"
#include "client/transport_i.h"

/* ---- the transport decision -------------------------------------------------- */

int transport_kind_of(const struct provider_record *rec,
		      enum transport_kind *kind, struct sbx_error *err)
{
	const char *label = provider_record_label(rec, PROTO_TRANSPORT_LABEL);

	/* Only authenticated provider metadata decides; an unknown version
	 * fails closed. */
	if (label == NULL) {
		*kind = TRANSPORT_NATIVE;
		return 0;
	}
	if (strcmp(label, PROTO_TRANSPORT_AGENT) == 0) {
		*kind = TRANSPORT_AGENT;
		return 0;
	}
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
		      "the sandbox's %s label is '%.64s', a transport this "
		      "client does not know (refused)",
		      PROTO_TRANSPORT_LABEL, label);
	return -EPROTO;
}

int transport_session_kind(struct transport *t, const char *id, const char *op,
			   enum transport_kind *kind,
			   struct provider_record *rec_out,
			   struct sbx_error *err)
{
	struct provider_record rec;
	int rc;

	sbx_error_clear(err);
	memset(&rec, 0, sizeof(rec));
	rc = t->prov->ops->record(t->prov, id, &rec, err);
	if (rc == -ENOENT)
		return tr_record_gone(err, op, id);
	if (rc < 0)
		return rc;
	rc = transport_kind_of(&rec, kind, err);
	if (rc == 0 && rec_out != NULL) {
		*rec_out = rec;
		return 0;
	}
	provider_record_cleanup(&rec);
	return rc;
}

struct transport_caps transport_default_caps(const struct transport *t)
{
	struct transport_caps c = {
		.jobs = t->cfg.new_sessions_use_agent,
		.supervisor_isolation = t->cfg.new_sessions_use_agent,
	};

	return c;
}

int transport_session_caps(struct transport *t, const char *id,
			   struct transport_caps *caps, struct sbx_error *err)
{
	enum transport_kind kind;
	int rc;

	rc = transport_session_kind(t, id, TRANSPORT_OP_AGENT, &kind, NULL,
				    err);
	if (rc < 0)
		return rc;
	caps->jobs = kind == TRANSPORT_AGENT;
	caps->supervisor_isolation = kind == TRANSPORT_AGENT;
	return 0;
}

/* ---- readiness and resume ------------------------------------------------------ */

/*
 * Bound everything done on this thread for the next timeout_ms (and by
 * the operation's deadline, when it is earlier): the fetch, activation and
 * record reads of a wait as well as its probes. Returns the new deadline;
 * *saved gets the operation's, put back with transport_op_set_deadline.
 */
static long long op_bound(long timeout_ms, long long *saved)
{
	long long d;

	*saved = transport_op_deadline();
	d = tr_earliest(clock_mono_ms() + timeout_ms, *saved);
	transport_op_set_deadline(d);
	return d;
}

/* One readiness probe: health through the normal request path. */
static int ready_probe(struct transport *t, struct slot *s, const char *id,
		       long long deadline, struct proto_health *health,
		       struct sbx_error *err)
{
	struct transport_req req = {
		.op = TRANSPORT_OP_HEALTH,
		.cls = TRANSPORT_SAFE,
		.method = "GET",
		.path = "/v1/health?version=1",
		.max_body = 64 * 1024,
	};
	struct transport_resp resp;
	struct conn *answered = NULL;
	int rc;

	req.deadline_ms = (long)(deadline - clock_mono_ms());
	if (req.deadline_ms < 1)
		req.deadline_ms = 1;
	transport_resp_init(&resp);
	rc = tr_send_request(t, s, id, &req, &resp, err, &answered);
	if (rc < 0)
		goto out;
	rc = proto_health_decode(resp.body.data, resp.body.len, health);
	if (rc < 0) {
		tr_not_ready(err);
		rc = -EIO;
		goto out;
	}
	if (proto_health_ready(health)) {
		rc = 0;
		goto out;
	}
	if (health->protocol_version == PROTO_VERSION &&
	    strcmp(health->status, PROTO_STATUS_AWAITING) == 0 &&
	    answered != NULL) {
		/* Health is public and cannot reject a previous boot's
		 * credential: a fresh boot at the same URL needs a new
		 * credential and a policy-checked activation. Only the
		 * connection that carried this answer is dropped, never one
		 * a concurrent refresh put in its place. */
		tr_slot_invalidate(s, answered);
	}
	tr_not_ready(err);
	rc = -EIO;
out:
	tr_conn_unref(answered);
	transport_resp_cleanup(&resp);
	return rc;
}

/* One poll of poll_bounded: 0 done, 1 not yet, or a negative errno that
 * ends the wait (err set). */
typedef int poll_fn(struct transport *t, const char *id, long long deadline,
		    void *arg, struct sbx_error *err);

/*
 * Poll until done or failed, every ready_interval_ms within timeout_ms
 * (op_bound: the polls' own requests are bounded by it too); a pause
 * ends at the deadline at the latest. Returns the last poll's
 * result, or 1 when the deadline passed first (the operation is then
 * marked timed out; the caller says why in err).
 */
static int poll_bounded(struct transport *t, const char *id, long timeout_ms,
			poll_fn *poll, void *arg, struct sbx_error *err)
{
	long long saved, deadline, now;
	long pause;
	int rc;

	deadline = op_bound(timeout_ms, &saved);
	for (;;) {
		rc = poll(t, id, deadline, arg, err);
		if (rc <= 0)
			break;
		now = clock_mono_ms();
		if (now >= deadline) {
			tr_op_mark_timed_out();
			break;
		}
		pause = t->cfg.ready_interval_ms;
		if (deadline - now < pause)
			pause = (long)(deadline - now);
		sleep_ms(pause);
	}
	transport_op_set_deadline(saved);
	return rc;
}

/* What a readiness wait probes, and the health it read. */
struct ready_wait {
	struct slot *s;
	struct proto_health health;
};

/* A readiness poll (poll_fn): one probe, again while it may yet succeed;
 * arg is the ready_wait. */
static int ready_poll(struct transport *t, const char *id, long long deadline,
		      void *arg, struct sbx_error *err)
{
	struct ready_wait *w = arg;
	int rc;

	memset(&w->health, 0, sizeof(w->health));
	sbx_error_clear(err);
	rc = ready_probe(t, w->s, id, deadline, &w->health, err);
	if (rc < 0 && err->retryable)
		return 1;
	return rc;
}

int transport_wait_ready(struct transport *t, const char *id,
			 struct proto_health *health_out, struct sbx_error *err)
{
	struct ready_wait w = {.s = tr_slot_get(t, id)};
	int rc;

	/* The readiness deadline bounds everything the probes do: waiting
	 * for the slot, the provider's fetch, the activation (rules 7). */
	rc = poll_bounded(t, id, t->cfg.ready_timeout_ms, ready_poll, &w, err);
	if (rc > 0) {
		tr_not_ready(err);
		rc = -EIO;
	}
	if (rc == 0 && health_out != NULL)
		*health_out = w.health;
	return rc;
}

static bool state_asleep(enum provider_state st)
{
	return st == PROVIDER_STATE_STOPPED || st == PROVIDER_STATE_SUSPENDED;
}

/* A poll of the record until Running (poll_fn); arg is the state last
 * read. */
static int running_poll(struct transport *t, const char *id, long long deadline,
			void *arg, struct sbx_error *err)
{
	enum provider_state *st = arg;
	struct provider_record rec;
	int rc;

	(void)deadline;
	memset(&rec, 0, sizeof(rec));
	rc = t->prov->ops->record(t->prov, id, &rec, err);
	if (rc == -ENOENT)
		return tr_record_gone(err, "sandbox.resume", id);
	if (rc < 0)
		return rc;
	*st = rec.state;
	provider_record_cleanup(&rec);
	if (*st == PROVIDER_STATE_RUNNING)
		return 0;
	if (*st == PROVIDER_STATE_DELETING)
		return tr_record_gone(err, "sandbox.resume", id);
	return 1;
}

static int wait_running(struct transport *t, const char *id,
			struct sbx_error *err)
{
	enum provider_state st = PROVIDER_STATE_UNKNOWN;
	int rc;

	/* The record reads are bounded by the same deadline. */
	rc = poll_bounded(t, id, t->cfg.running_timeout_ms, running_poll, &st,
			  err);
	if (rc > 0) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "sandbox.resume: sandbox '%s' did not "
			      "reach Running (still %s)",
			      id, provider_state_name(st));
		rc = -EIO;
	}
	return rc;
}

int transport_resume(struct transport *t, const char *id,
		     struct proto_health *health_out, struct sbx_error *err)
{
	struct provider *p = t->prov;
	struct provider_record rec;
	enum transport_kind kind;
	struct sbx_error stop_err;
	bool woke = false;
	int rc_stop;
	char text[1024];
	int rc;

	sbx_error_clear(err);
	memset(&rec, 0, sizeof(rec));
	rc = p->ops->record(p, id, &rec, err);
	if (rc == -ENOENT)
		return tr_record_gone(err, "sandbox.resume", id);
	if (rc < 0)
		goto fail;
	if (state_asleep(rec.state)) {
		rc = p->ops->resume(p, id, err);
		if (rc < 0)
			goto fail;
		woke = true;
		rc = wait_running(t, id, err);
		if (rc < 0)
			goto fail;
	}
	/* The label decides, from a fresh read; an unknown label fails
	 * closed before any route or credential is fetched. */
	rc = transport_session_kind(t, id, "sandbox.resume", &kind, NULL, err);
	if (rc < 0)
		goto fail;
	if (kind == TRANSPORT_AGENT) {
		rc = transport_wait_ready(t, id, health_out, err);
		if (rc < 0)
			goto fail;
	} else if (health_out != NULL) {
		memset(health_out, 0, sizeof(*health_out));
	}
	provider_record_cleanup(&rec);
	return 0;
fail:
	provider_record_cleanup(&rec);
	if (woke) {
		long long saved = transport_op_deadline();

		/* Stop (never delete) only the sandbox this call woke, even
		 * when the caller's deadline is what ended the resume: the
		 * stop request has its own. */
		transport_op_set_deadline(0);
		sbx_error_clear(&stop_err);
		rc_stop = p->ops->stop(p, id, &stop_err);
		transport_op_set_deadline(saved);
		if (rc_stop < 0)
			log_warn("sandbox %s: could not stop it again after a "
				 "failed resume: %s",
				 id,
				 sbx_error_describe(&stop_err, text,
						    sizeof(text)));
	}
	sbx_error_describe(err, text, sizeof(text));
	if (err->code != SBX_COMMAND_FAILED || err->retryable) {
		int e = err->err;
		char failure[sizeof(err->failure)];

		snprintf(failure, sizeof(failure), "%s", err->failure);
		sbx_error_set(err, SBX_COMMAND_FAILED,
			      failure[0] ? failure : NULL, "sandbox.resume: %s",
			      text);
		err->err = e ? e : EIO;
	}
	return rc < 0 ? rc : -EIO;
}
