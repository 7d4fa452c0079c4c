/* SPDX-License-Identifier: MIT */
/*
 * agent_client: typed agent operations over transport_send. Each function
 * builds the request with the proto module, names the operation and its
 * class (doc/transport-rules.md 8: safe to repeat, a change, a command)
 * for the transport, and decodes the answer. The requests whose answer is
 * buffered are one table (struct call) and one path (call()); the
 * streamed ones (exec, contents, read_range) and the raw write have
 * their own.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/agent_client.h"
#include "common/log.h"

#define EXT_PREFIX "/sandboxfs/v1/"
#define SMALL_ANSWER (64UL * 1024)
#define LIST_ANSWER (16UL * 1024 * 1024)
#define POLL_ANSWER (24UL * 1024 * 1024)
/* A command's terminal frame may come this long after its own timeout
 * (doc/transport-rules.md 9, the seed's TERMINAL_FRAME_GRACE). */
#define TERMINAL_FRAME_GRACE_MS 60000LL
/* The extension's job listing, named for errors and logs. */
#define AC_OP_JOB_LIST "sandbox.jobList"
/* The change events, named for errors and logs. */
#define AC_OP_EVENTS "sandbox.events"

/* "<route>?path=<escaped>" (plus extra, already encoded, when given). */
static int path_query(struct buf *out, const char *route, const char *path,
		      const char *extra)
{
	int rc = buf_printf(out, "%s?path=", route);

	if (rc == 0)
		rc = buf_append_escaped(out, path, "/");
	if (rc == 0 && extra != NULL)
		rc = buf_append_str(out, extra);
	return rc;
}

static void bad_answer(struct sbx_error *err, const char *op, int rc)
{
	sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
		      "%s: the agent's answer could not be decoded (%s)", op,
		      strerror(-rc));
	err->err = EIO;
}

static void local_failure(struct sbx_error *err, const char *op, int rc)
{
	sbx_error_set(err, SBX_INVALID_INPUT, NULL,
		      "%s: the request could not be built (%s)", op,
		      strerror(-rc));
	err->err = -rc;
}

static void outcome_unknown(struct sbx_error *err, const char *op,
			    const char *why)
{
	sbx_error_set(err, SBX_OUTCOME_UNKNOWN, NULL,
		      "Sandbox operation '%s' did not report its outcome and "
		      "may have taken effect: %s",
		      op, why);
}

/* An answer that cannot be decoded, but asking again may bring one that
 * can (a poll, events): retryable. */
static int undecodable(struct sbx_error *err, const char *op, int rc)
{
	sbx_error_set(err, SBX_UNREACHABLE, NULL,
		      "%s: the answer could not be decoded (%s)", op,
		      strerror(-rc));
	return -EIO;
}

/* ---- the buffered requests ----------------------------------------------- */

/* A 2xx answer on its way to what the caller asked for. */
struct answer {
	const struct transport_resp *resp;
	const char *data; /* its body */
	size_t len;
	void *out; /* the caller's */
	const char *op;
	struct sbx_error *err;
};

/* What a 2xx answer becomes in a->out: 0, or a negative errno with err
 * filled. */
typedef int answer_fn(struct answer *a);

/* A decoder's result: what it failed with is an answer this client cannot
 * use. */
static int decoded(struct answer *a, int rc)
{
	if (rc < 0)
		bad_answer(a->err, a->op, rc);
	return rc;
}

/* One kind of request whose answer is buffered (small JSON or nothing). */
struct call {
	const char *op; /* TRANSPORT_OP_*: errors and logs */
	enum transport_class cls; /* doc/transport-rules.md 8 */
	const char *method;
	size_t max_answer;
	bool tag_client; /* a change of the files: names this client */
	answer_fn *answer; /* NULL: the answer is not read */
};

/*
 * Send c to sandbox id: to path (with its query), with body as JSON (NULL:
 * none), and hand a 2xx answer to c->answer with out (NULL: not read).
 * built < 0 says building the path or body failed: nothing is sent.
 */
static int call(struct transport *t, const char *id, const struct call *c,
		int built, const char *path, const struct buf *body, void *out,
		struct sbx_error *err)
{
	struct transport_resp resp;
	struct transport_req req = {
		.op = c->op,
		.cls = c->cls,
		.method = c->method,
		.path = path,
		.content_type = body != NULL ? "application/json" : NULL,
		.body = body != NULL ? body->data : NULL,
		.body_len = body != NULL ? body->len : 0,
		.max_body = c->max_answer,
		.tag_client = c->tag_client,
	};
	struct answer a = {&resp, NULL, 0, out, c->op, err};
	int rc;

	if (built < 0) {
		local_failure(err, c->op, built);
		return built;
	}
	transport_resp_init(&resp);
	rc = transport_send(t, id, &req, &resp, err);
	if (rc == 0 && c->answer != NULL && out != NULL) {
		a.data = resp.body.data;
		a.len = resp.body.len;
		rc = c->answer(&a);
	}
	transport_resp_cleanup(&resp);
	return rc;
}

/* GET of an extension route about path: "<route>?path=<escaped>" and
 * what extra adds to the query (encoded already; may be NULL). */
static int ext_get(struct transport *t, const char *id, const struct call *c,
		   const char *route, const char *path, const char *extra,
		   void *out, struct sbx_error *err)
{
	struct buf q = BUF_INIT(0);
	int rc = path_query(&q, route, path, extra);

	rc = call(t, id, c, rc, q.data, NULL, out, err);
	buf_cleanup(&q);
	return rc;
}

static int health_answer(struct answer *a)
{
	return decoded(a, proto_health_decode(a->data, a->len, a->out));
}

/* A v1 file read into a caller's buffer. */
struct file_out {
	struct buf *buf;
	const char *path;
};

static int file_answer(struct answer *a)
{
	struct file_out *f = a->out;
	int rc = proto_file_contents_decode(a->data, a->len, f->buf);

	if (rc != -EFBIG)
		return decoded(a, rc);
	return sbx_error_fail(
		a->err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED, EFBIG,
		"%s: '%s' is larger than the buffer allows", a->op, f->path);
}

static int job_id_answer(struct answer *a)
{
	if (proto_job_id_decode(a->data, a->len, a->out) == 0)
		return 0;
	outcome_unknown(a->err, a->op, "the answer carried no readable jobId");
	return -EIO;
}

/* ac_job_poll_each's frames, handed on one at a time. */
struct poll_each {
	ac_frame_fn *fn;
	void *arg;
	int rc; /* what fn returned, when it stopped us */
	struct proto_job_poll *out;
};

static int poll_each_frame(void *arg, const struct proto_frame *f)
{
	struct poll_each *pe = arg;
	int rc = pe->fn(pe->arg, f);

	if (rc < 0)
		pe->rc = rc;
	return rc;
}

static int poll_each_answer(struct answer *a)
{
	struct poll_each *pe = a->out;
	int rc = proto_job_poll_decode_each(a->data, a->len, poll_each_frame,
					    pe, pe->out);

	if (rc < 0 && pe->rc != 0)
		return pe->rc; /* the caller's fn stopped: err stays clear */
	return rc < 0 ? undecodable(a->err, a->op, rc) : 0;
}

static int job_list_answer(struct answer *a)
{
	return decoded(a, proto_job_list_decode(a->data, a->len, a->out));
}

/* Attributes, and the target of a symbolic link when target is set. */
struct attr_out {
	struct proto_attr *attr;
	char **target;
};

static int attr_answer(struct answer *a)
{
	struct attr_out *o = a->out;

	return decoded(a,
		       proto_attr_decode(a->data, a->len, o->attr, o->target));
}

/* A metadata operation's attributes: none in a 204 or an empty body. */
static int op_attr_answer(struct answer *a)
{
	struct attr_out *o = a->out;

	if (a->resp->status == 204 || a->len == 0) {
		memset(o->attr, 0, sizeof(*o->attr));
		return 0;
	}
	return attr_answer(a);
}

static int list_answer(struct answer *a)
{
	return decoded(a, proto_list_decode(a->data, a->len, a->out));
}

static int tree_answer(struct answer *a)
{
	return decoded(a, proto_tree_decode(a->data, a->len, a->out));
}

static int target_answer(struct answer *a)
{
	return decoded(a, proto_target_decode(a->data, a->len, a->out));
}

static int statfs_answer(struct answer *a)
{
	return decoded(a, proto_statfs_decode(a->data, a->len, a->out));
}

/* Change events since a point of one boot (ac_events). */
struct events_out {
	const char *boot_id;
	uint64_t since;
	struct proto_events *out;
};

static int events_answer(struct answer *a)
{
	struct events_out *eo = a->out;
	struct proto_events ev;
	int rc;

	rc = proto_events_decode(a->data, a->len, &ev);
	if (rc < 0)
		return undecodable(a->err, a->op, rc);
	/* Another boot's seqs do not follow since: whatever happened
	 * between the boots is unknown. */
	if (eo->since != AC_EVENTS_NOW && eo->boot_id != NULL &&
	    *eo->boot_id != '\0' && strcmp(eo->boot_id, ev.boot_id) != 0) {
		struct proto_events dropped = ev;

		ev.ev = NULL;
		ev.n = 0;
		ev.lost = true;
		proto_events_cleanup(&dropped);
	}
	*eo->out = ev;
	return 0;
}

/* The buffered requests, one line each: name, class, method, the most an
 * answer may hold, whether it names this client, and what its answer
 * becomes. */
/* clang-format off */
static const struct call
	c_health = {TRANSPORT_OP_HEALTH, TRANSPORT_SAFE, "GET",
		SMALL_ANSWER, false, health_answer},
	/* base64 of 32 MiB plus the JSON around it */
	c_read_file = {TRANSPORT_OP_READ, TRANSPORT_SAFE, "GET",
		PROTO_HTTP_BODY_LIMIT, false, file_answer},
	c_write_file = {TRANSPORT_OP_WRITE, TRANSPORT_CHANGE, "PUT",
		SMALL_ANSWER, false, NULL},
	c_mkdir_p = {TRANSPORT_OP_WRITE, TRANSPORT_CHANGE, "POST",
		SMALL_ANSWER, false, NULL},
	c_job_start = {TRANSPORT_OP_JOB_START, TRANSPORT_COMMAND, "POST",
		SMALL_ANSWER, false, job_id_answer},
	c_job_poll_each = {TRANSPORT_OP_JOB_POLL, TRANSPORT_SAFE, "POST",
		POLL_ANSWER, false, poll_each_answer},
	c_job_list = {AC_OP_JOB_LIST, TRANSPORT_SAFE, "GET",
		PROTO_JOB_LIST_MAX_BYTES, false, job_list_answer},
	c_job_cancel = {TRANSPORT_OP_JOB_CANCEL, TRANSPORT_CHANGE, "POST",
		SMALL_ANSWER, false, NULL},
	c_stat = {TRANSPORT_OP_FILES, TRANSPORT_SAFE, "GET",
		SMALL_ANSWER, false, attr_answer},
	c_list = {TRANSPORT_OP_FILES, TRANSPORT_SAFE, "GET",
		LIST_ANSWER, false, list_answer},
	c_tree = {TRANSPORT_OP_FILES, TRANSPORT_SAFE, "GET",
		PROTO_EXT_TREE_MAX_BYTES, false, tree_answer},
	/* the extension's metadata changes name this client */
	c_ext_op = {TRANSPORT_OP_FILES, TRANSPORT_CHANGE, "POST",
		SMALL_ANSWER, true, op_attr_answer},
	c_readlink = {TRANSPORT_OP_FILES, TRANSPORT_SAFE, "GET",
		SMALL_ANSWER, false, target_answer},
	c_statfs = {TRANSPORT_OP_FILES, TRANSPORT_SAFE, "GET",
		SMALL_ANSWER, false, statfs_answer},
	c_events = {AC_OP_EVENTS, TRANSPORT_SAFE, "GET",
		PROTO_EXT_EVENTS_MAX_BYTES, false, events_answer};
/* clang-format on */

/* ---- v1 ---------------------------------------------------------------- */

int ac_health(struct transport *t, const char *id, struct proto_health *h,
	      struct sbx_error *err)
{
	return call(t, id, &c_health, 0, "/v1/health?version=1", NULL, h, err);
}

int ac_read_file(struct transport *t, const char *id, const char *path,
		 struct buf *out, struct sbx_error *err)
{
	struct file_out f = {out, path};
	struct buf q = BUF_INIT(0);
	int rc = path_query(&q, "/v1/files", path, NULL);

	rc = call(t, id, &c_read_file, rc, q.data, NULL, &f, err);
	buf_cleanup(&q);
	return rc;
}

int ac_write_file(struct transport *t, const char *id, const char *path,
		  const void *data, size_t len, struct sbx_error *err)
{
	struct buf body = BUF_INIT(PROTO_HTTP_BODY_LIMIT);
	int rc;

	if (len > PROTO_MAX_TRANSFER_BYTES)
		return sbx_error_fail(err, SBX_COMMAND_FAILED,
				      SBX_FAIL_AGENT_REFUSED, EFBIG,
				      "%s: %zu bytes exceeds the %lu byte "
				      "transfer limit",
				      TRANSPORT_OP_WRITE, len,
				      (unsigned long)PROTO_MAX_TRANSFER_BYTES);
	rc = proto_file_write_encode(path, data, len, &body);
	rc = call(t, id, &c_write_file, rc, "/v1/files", &body, NULL, err);
	buf_cleanup(&body);
	return rc;
}

int ac_mkdir_p(struct transport *t, const char *id, const char *path,
	       struct sbx_error *err)
{
	struct buf body = BUF_INIT(0);
	int rc = proto_path_encode(path, &body);

	rc = call(t, id, &c_mkdir_p, rc, "/v1/mkdir", &body, NULL, err);
	buf_cleanup(&body);
	return rc;
}

/* ---- commands ------------------------------------------------------------ */

struct exec_stream {
	struct proto_ndjson split;
	ac_frame_fn *cb;
	void *arg;
	struct ac_exit *exit;
	bool terminal;
	bool bad; /* a frame could not be decoded */
	int cb_err; /* the caller's callback stopped us */
	struct proto_frame error_frame;
	bool have_error_frame;
};

static int exec_sink(void *arg, const void *data, size_t len)
{
	struct exec_stream *s = arg;
	const char *line;
	size_t n;
	int rc;

	rc = proto_ndjson_feed(&s->split, data, len);
	if (rc < 0) {
		s->bad = true;
		return rc;
	}
	while (proto_ndjson_next(&s->split, &line, &n) == 1) {
		struct proto_frame f;

		if (s->terminal) {
			/* Exactly one terminal frame, and it is last. */
			s->bad = true;
			return -EBADMSG;
		}
		rc = proto_frame_decode(line, n, &f);
		if (rc < 0) {
			s->bad = true;
			return -EBADMSG;
		}
		switch (f.type) {
		case PROTO_FRAME_STDOUT:
		case PROTO_FRAME_STDERR:
			rc = s->cb != NULL ? s->cb(s->arg, &f) : 0;
			proto_frame_cleanup(&f);
			if (rc < 0) {
				s->cb_err = rc;
				return rc;
			}
			break;
		case PROTO_FRAME_EXIT:
			s->terminal = true;
			s->exit->exited = true;
			s->exit->code = f.code;
			s->exit->truncated = f.truncated;
			proto_frame_cleanup(&f);
			break;
		case PROTO_FRAME_ERROR:
			s->terminal = true;
			s->error_frame = f;
			s->have_error_frame = true;
			break;
		}
	}
	return 0;
}

int ac_exec(struct transport *t, const char *id,
	    const struct proto_exec_req *ereq, ac_frame_fn *cb, void *arg,
	    struct ac_exit *exit, struct sbx_error *err)
{
	struct exec_stream s;
	struct transport_resp resp;
	struct buf body = BUF_INIT(PROTO_EXEC_MAX_BODY);
	struct transport_req req = {
		.op = TRANSPORT_OP_EXEC,
		.cls = TRANSPORT_COMMAND,
		.method = "POST",
		.path = "/v1/exec",
		.content_type = "application/json",
		.sink = exec_sink,
		.idle_timeout_ms = -1,
	};
	uint64_t limit;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(exit, 0, sizeof(*exit));
	proto_ndjson_init(&s.split);
	s.cb = cb;
	s.arg = arg;
	s.exit = exit;
	transport_resp_init(&resp);
	rc = proto_exec_req_encode(ereq, &body);
	if (rc < 0) {
		local_failure(err, TRANSPORT_OP_EXEC, rc);
		goto out;
	}
	limit = ereq->timeout_ms > (uint64_t)(INT64_MAX / 2)
			? (uint64_t)(INT64_MAX / 2)
			: ereq->timeout_ms;
	/* A command runs as long as its own timeout: its exchange is not
	 * bound by the response deadline or by the operation's
	 * (doc/transport-rules.md 9). */
	req.deadline_ms =
		(long)(limit + TERMINAL_FRAME_GRACE_MS > (uint64_t)LONG_MAX
			       ? LONG_MAX
			       : limit + TERMINAL_FRAME_GRACE_MS);
	req.outlives_op = true;
	req.body = body.data;
	req.body_len = body.len;
	req.sink_arg = &s;
	rc = transport_send(t, id, &req, &resp, err);
	if (rc < 0) {
		if (s.cb_err != 0) {
			rc = s.cb_err;
		} else if (s.bad) {
			outcome_unknown(
				err, TRANSPORT_OP_EXEC,
				"the output stream could not be decoded");
			rc = -EIO;
		}
		goto out;
	}
	if (!s.terminal || proto_ndjson_partial(&s.split)) {
		outcome_unknown(err, TRANSPORT_OP_EXEC,
				"the output stream ended without a terminal "
				"frame");
		rc = -EIO;
		goto out;
	}
	if (s.have_error_frame) {
		sbx_error_set(err, SBX_COMMAND_FAILED,
			      s.error_frame.err_code ? s.error_frame.err_code
						     : "error",
			      "%s",
			      s.error_frame.err_message
				      ? s.error_frame.err_message
				      : "the command failed");
		err->err = EIO;
		rc = -EIO;
	}
out:
	if (s.have_error_frame)
		proto_frame_cleanup(&s.error_frame);
	proto_ndjson_cleanup(&s.split);
	transport_resp_cleanup(&resp);
	buf_cleanup(&body);
	return rc;
}

int ac_job_start(struct transport *t, const char *id,
		 const struct proto_exec_req *ereq,
		 char job_id[PROTO_JOB_ID_MAX + 1], struct sbx_error *err)
{
	struct buf body = BUF_INIT(PROTO_EXEC_MAX_BODY);
	int rc = proto_exec_req_encode(ereq, &body);

	rc = call(t, id, &c_job_start, rc, "/v1/jobs/start", &body, job_id,
		  err);
	buf_cleanup(&body);
	return rc;
}

int ac_job_poll_each(struct transport *t, const char *id,
		     const struct proto_job_poll_req *preq, ac_frame_fn *fn,
		     void *arg, struct proto_job_poll *out,
		     struct sbx_error *err)
{
	struct poll_each pe = {fn, arg, 0, out};
	struct buf body = BUF_INIT(0);
	int rc = proto_job_poll_req_encode(preq, &body);

	rc = call(t, id, &c_job_poll_each, rc, "/v1/jobs/poll", &body, &pe,
		  err);
	buf_cleanup(&body);
	return rc;
}

int ac_job_list(struct transport *t, const char *id, struct proto_job_list *out,
		struct sbx_error *err)
{
	return call(t, id, &c_job_list, 0, EXT_PREFIX "jobs", NULL, out, err);
}

int ac_job_cancel(struct transport *t, const char *id, const char *job_id,
		  struct sbx_error *err)
{
	struct buf body = BUF_INIT(0);
	int rc = proto_job_id_encode(job_id, &body);

	rc = call(t, id, &c_job_cancel, rc, "/v1/jobs/cancel", &body, NULL,
		  err);
	buf_cleanup(&body);
	return rc;
}

/* ---- the file extension ---------------------------------------------------- */

int ac_stat(struct transport *t, const char *id, const char *path,
	    struct proto_attr *attr, char **target, struct sbx_error *err)
{
	struct attr_out a = {attr, target};

	return ext_get(t, id, &c_stat, EXT_PREFIX "stat", path, NULL, &a, err);
}

int ac_list(struct transport *t, const char *id, const char *path,
	    const char *cursor, unsigned limit, struct proto_list *out,
	    struct sbx_error *err)
{
	struct buf q = BUF_INIT(0);
	int rc = path_query(&q, EXT_PREFIX "list", path, NULL);

	if (rc == 0 && limit > 0)
		rc = buf_printf(&q, "&limit=%u", limit);
	if (rc == 0 && cursor != NULL)
		rc = buf_append_str(&q, "&cursor=");
	if (rc == 0 && cursor != NULL)
		rc = buf_append_escaped(&q, cursor, "/");
	rc = call(t, id, &c_list, rc, q.data, NULL, out, err);
	buf_cleanup(&q);
	return rc;
}

int ac_tree(struct transport *t, const char *id, const char *path,
	    unsigned max_entries, struct proto_tree *out, struct sbx_error *err)
{
	char extra[32];

	snprintf(extra, sizeof(extra), "&maxEntries=%u", max_entries);
	return ext_get(t, id, &c_tree, EXT_PREFIX "tree", path,
		       max_entries > 0 ? extra : NULL, out, err);
}

/* Records of a contents answer, handed on as each one is whole. */
struct contents_sink {
	struct buf pending; /* bytes of the record under way */
	bool have_head;
	struct proto_dirent ent; /* its attribute line, once whole */
	size_t head;
	size_t total, limit; /* bytes seen, and the most allowed */
	ac_contents_fn fn;
	void *ud;
};

static int contents_sink_cb(void *arg, const void *data, size_t len)
{
	struct contents_sink *cs = arg;
	int rc;

	if (len > cs->limit - cs->total)
		return -EFBIG;
	cs->total += len;
	rc = buf_append(&cs->pending, data, len);
	if (rc < 0)
		return rc;
	for (;;) {
		size_t whole;

		if (!cs->have_head) {
			memset(&cs->ent, 0, sizeof(cs->ent));
			rc = proto_contents_head(cs->pending.data,
						 cs->pending.len, &cs->ent,
						 &cs->head);
			if (rc <= 0)
				return rc;
			cs->have_head = true;
		}
		whole = cs->head + (size_t)cs->ent.attr.size;
		if (cs->pending.len < whole)
			return 0;
		rc = cs->fn(cs->ud, cs->ent.name, &cs->ent.attr,
			    cs->pending.data + cs->head,
			    (size_t)cs->ent.attr.size);
		free(cs->ent.name);
		cs->ent.name = NULL;
		cs->have_head = false;
		if (rc < 0)
			return rc;
		memmove(cs->pending.data, cs->pending.data + whole,
			cs->pending.len - whole);
		cs->pending.len -= whole;
	}
}

int ac_contents(struct transport *t, const char *id, const char *dir,
		size_t max_file, size_t max_bytes, ac_contents_fn fn, void *ud,
		struct sbx_error *err)
{
	struct contents_sink cs;
	struct transport_resp resp;
	struct buf q = BUF_INIT(0);
	struct transport_req req = {
		.op = TRANSPORT_OP_FILES,
		.cls = TRANSPORT_SAFE,
		.method = "GET",
		.sink = contents_sink_cb,
	};
	int rc;

	if (max_bytes == 0 || max_bytes > PROTO_EXT_CONTENTS_BYTES_MAX)
		max_bytes = PROTO_EXT_CONTENTS_BYTES_DEFAULT;
	if (max_file == 0 || max_file > PROTO_EXT_CONTENTS_FILE_MAX)
		max_file = PROTO_EXT_CONTENTS_FILE_MAX;
	memset(&cs, 0, sizeof(cs));
	/* One record at a time: its line and its bytes. */
	buf_init(&cs.pending, PROTO_EXT_CONTENTS_LINE_MAX + 1 + max_file);
	cs.limit = max_bytes + PROTO_EXT_CONTENTS_FILES_MAX *
				       (PROTO_EXT_CONTENTS_LINE_MAX + 1);
	cs.fn = fn;
	cs.ud = ud;
	req.sink_arg = &cs;
	transport_resp_init(&resp);
	rc = path_query(&q, EXT_PREFIX "contents", dir, NULL);
	if (rc == 0)
		rc = buf_printf(&q, "&maxFile=%zu&maxBytes=%zu", max_file,
				max_bytes);
	if (rc < 0) {
		local_failure(err, TRANSPORT_OP_FILES, rc);
		goto out;
	}
	req.path = q.data;
	rc = transport_send(t, id, &req, &resp, err);
	if (rc == 0 && (cs.have_head || cs.pending.len > 0)) {
		/* The answer ended inside a record. */
		rc = -EINVAL;
		bad_answer(err, TRANSPORT_OP_FILES, rc);
	}
out:
	free(cs.ent.name);
	buf_cleanup(&cs.pending);
	transport_resp_cleanup(&resp);
	buf_cleanup(&q);
	return rc;
}

struct range_sink {
	unsigned char *dst;
	size_t cap;
	size_t got;
};

static int range_sink_cb(void *arg, const void *data, size_t len)
{
	struct range_sink *r = arg;

	if (len > r->cap - r->got)
		return -EFBIG;
	memcpy(r->dst + r->got, data, len);
	r->got += len;
	return 0;
}

int ac_read_range(struct transport *t, const char *id, const char *path,
		  uint64_t off, size_t len, const char *if_match, void *dst,
		  size_t *got, char *etag, uint64_t *size,
		  struct sbx_error *err)
{
	struct range_sink sink = {dst, len, 0};
	struct transport_resp resp;
	struct buf q = BUF_INIT(0);
	char range[80], match[PROTO_ETAG_MAX + 16];
	const char *headers[3] = {NULL, NULL, NULL};
	struct transport_req req = {
		.op = TRANSPORT_OP_READ,
		.cls = TRANSPORT_SAFE,
		.method = "GET",
		.sink = range_sink_cb,
		.sink_arg = &sink,
		.headers = headers,
	};
	int rc;

	transport_resp_init(&resp);
	if (len == 0) {
		*got = 0;
		return 0;
	}
	rc = path_query(&q, EXT_PREFIX "read", path, NULL);
	if (rc < 0) {
		local_failure(err, TRANSPORT_OP_READ, rc);
		goto out;
	}
	snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-%" PRIu64, off,
		 off + len - 1);
	headers[0] = range;
	if (if_match != NULL && *if_match != '\0') {
		snprintf(match, sizeof(match), "If-Match: %s", if_match);
		headers[1] = match;
	}
	req.path = q.data;
	rc = transport_send(t, id, &req, &resp, err);
	if (rc < 0 && strcmp(err->failure, SBX_FAIL_BODY_CUT) == 0) {
		/* The file changed under the answer: its new bytes, once. */
		sbx_error_clear(err);
		transport_resp_cleanup(&resp);
		transport_resp_init(&resp);
		sink.got = 0;
		rc = transport_send(t, id, &req, &resp, err);
	}
	if (rc < 0) {
		/* A range starting at or past the end is an empty read. */
		if (resp.status == 416) {
			sbx_error_clear(err);
			sink.got = 0;
			rc = 0;
			goto done;
		}
		goto out;
	}
	if (resp.status == 200 && off > 0) {
		/* An agent that ignored the range sent the file from 0. */
		bad_answer(err, TRANSPORT_OP_READ, -EPROTO);
		rc = -EIO;
		goto out;
	}
done:
	*got = sink.got;
	if (etag != NULL)
		snprintf(etag, PROTO_ETAG_MAX, "%s", resp.etag);
	if (size != NULL)
		*size = resp.full_size;
out:
	transport_resp_cleanup(&resp);
	buf_cleanup(&q);
	return rc;
}

/* "&atime=SEC.NSEC" (or now, omit) for a write's times. */
static int time_arg(struct buf *q, const char *name, const struct proto_time *t)
{
	switch (t->how) {
	case PROTO_TIME_NOW:
		return buf_printf(q, "&%s=now", name);
	case PROTO_TIME_SET:
		return buf_printf(q, "&%s=%" PRId64 ".%09u", name, t->sec,
				  (unsigned)t->nsec);
	default:
		return 0;
	}
}

int ac_write_range(struct transport *t, const char *id, const char *path,
		   uint64_t off, const void *data, size_t len,
		   const struct ac_create *mk, const struct proto_time *times,
		   struct proto_attr *attr, struct sbx_error *err)
{
	struct transport_resp resp;
	struct buf q = BUF_INIT(0);
	char extra[80];
	struct transport_req req = {
		.op = TRANSPORT_OP_WRITE,
		.cls = TRANSPORT_CHANGE,
		.method = "PUT",
		.content_type = "application/octet-stream",
		.body = data,
		.body_len = len,
		.max_body = SMALL_ANSWER,
		.tag_client = true,
	};
	int rc;

	transport_resp_init(&resp);
	if (off == UINT64_MAX)
		snprintf(extra, sizeof(extra), "&append=1");
	else
		snprintf(extra, sizeof(extra), "&offset=%" PRIu64, off);
	if (mk != NULL) {
		size_t n = strlen(extra);

		snprintf(extra + n, sizeof(extra) - n, "&create=%o%s",
			 (unsigned)(mk->mode & 07777),
			 mk->exclusive ? "&exclusive=1" : "");
	}
	rc = path_query(&q, EXT_PREFIX "write", path, extra);
	if (rc == 0 && times != NULL)
		rc = time_arg(&q, "atime", &times[0]);
	if (rc == 0 && times != NULL)
		rc = time_arg(&q, "mtime", &times[1]);
	if (rc < 0) {
		local_failure(err, TRANSPORT_OP_WRITE, rc);
		goto out;
	}
	req.path = q.data;
	rc = transport_send(t, id, &req, &resp, err);
	if (rc == 0 && attr != NULL) {
		rc = proto_attr_decode(resp.body.data, resp.body.len, attr,
				       NULL);
		if (rc < 0)
			bad_answer(err, TRANSPORT_OP_WRITE, rc);
	}
out:
	transport_resp_cleanup(&resp);
	buf_cleanup(&q);
	return rc;
}

int ac_ext_op(struct transport *t, const char *id, const char *op,
	      const struct proto_ext_req *ereq, struct proto_attr *attr,
	      struct sbx_error *err)
{
	struct attr_out a = {attr, NULL};
	struct buf body = BUF_INIT(0);
	char path[64];
	int rc;

	snprintf(path, sizeof(path), EXT_PREFIX "%s", op);
	rc = proto_ext_req_encode(op, ereq, &body);
	rc = call(t, id, &c_ext_op, rc, path, &body, attr != NULL ? &a : NULL,
		  err);
	buf_cleanup(&body);
	return rc;
}

int ac_readlink(struct transport *t, const char *id, const char *path,
		char **target, struct sbx_error *err)
{
	return ext_get(t, id, &c_readlink, EXT_PREFIX "readlink", path, NULL,
		       target, err);
}

int ac_statfs(struct transport *t, const char *id, struct proto_statfs *out,
	      struct sbx_error *err)
{
	return call(t, id, &c_statfs, 0, EXT_PREFIX "statfs", NULL, out, err);
}

/* ---- change events --------------------------------------------------------- */

int ac_events(struct transport *t, const char *id, const char *boot_id,
	      uint64_t since, long wait_ms, struct proto_events *out,
	      struct sbx_error *err)
{
	long deadline = transport_response_timeout_ms(t);
	long margin = deadline / 4 > 1000 ? deadline / 4 : 1000;
	struct events_out eo = {boot_id, since, out};
	char path[96];

	/* The answer's headers come when the wait ends: it must end well
	 * inside the response deadline. */
	if (wait_ms > PROTO_EXT_EVENTS_MAX_WAIT_MS)
		wait_ms = PROTO_EXT_EVENTS_MAX_WAIT_MS;
	if (wait_ms > deadline - margin)
		wait_ms = deadline - margin;
	if (wait_ms < 0)
		wait_ms = 0;
	if (since == AC_EVENTS_NOW)
		snprintf(path, sizeof(path), EXT_PREFIX "events?waitMs=%ld",
			 wait_ms);
	else
		snprintf(path, sizeof(path),
			 EXT_PREFIX "events?since=%" PRIu64 "&waitMs=%ld",
			 since, wait_ms);
	return call(t, id, &c_events, 0, path, NULL, &eo, err);
}
