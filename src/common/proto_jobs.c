/* SPDX-License-Identifier: MIT */
/*
 * proto_jobs: the bodies of the /v1/jobs routes (doc/protocol-v1.md 3.6)
 * and of the extension's job listing (doc/protocol-ext.md, "Jobs"): job
 * ids, poll requests and answers, the listing.
 *
 * Poll answers are encoded by hand around the frames of proto_exec.c (an
 * answer can carry megabytes of output that a cJSON tree would only copy
 * twice) and decoded a frame at a time.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/proto_i.h"
#include "common/proto_jscan_i.h"
#include "common/strv.h"

/* ---- job ids ------------------------------------------------------------- */

int proto_job_id_encode(const char *job_id, struct buf *out)
{
	int rc = buf_append_str(out, "{\"jobId\":");

	if (rc == 0)
		rc = proto_json_string(out, job_id);
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}

static int copy_job_id(const cJSON *root, char job_id[PROTO_JOB_ID_MAX + 1])
{
	const char *s;
	int rc = pj_str(root, "jobId", true, &s);

	if (rc < 0)
		return rc;
	if (strlen(s) > PROTO_JOB_ID_MAX)
		return -EFBIG;
	memcpy(job_id, s, strlen(s) + 1);
	return 0;
}

static int job_id_fill(const cJSON *root, void *dst, void *arg)
{
	return copy_job_id(root, dst);
}

PJ_BODY_PLAIN(job_id_body, char[PROTO_JOB_ID_MAX + 1], pj_parse_object,
	      job_id_fill);

int proto_job_id_decode(const char *p, size_t n,
			char job_id[PROTO_JOB_ID_MAX + 1])
{
	return pj_decode(p, n, &job_id_body, NULL, job_id);
}

/* ---- poll requests ------------------------------------------------------- */

int proto_job_poll_req_encode(const struct proto_job_poll_req *r,
			      struct buf *out)
{
	int rc = buf_append_str(out, "{\"jobId\":");

	if (rc == 0)
		rc = proto_json_string(out, r->job_id);
	if (rc == 0 && r->has_since)
		rc = buf_printf(out, ",\"sinceSeq\":%" PRIu64, r->since_seq);
	else if (rc == 0)
		rc = buf_append_str(out, ",\"sinceSeq\":null");
	if (rc == 0 && r->wait_ms > 0)
		rc = buf_printf(out, ",\"waitMs\":%" PRIu64, r->wait_ms);
	if (rc == 0 && r->max_bytes > 0)
		rc = buf_printf(out, ",\"maxBytes\":%" PRIu64, r->max_bytes);
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}

/* A poll request's members into r (proto_job_poll_req_decode). */
static int poll_req_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_job_poll_req *r = dst;
	int rc;

	rc = copy_job_id(root, r->job_id);
	if (rc < 0)
		return rc;
	rc = pj_u64(root, "sinceSeq", false, &r->since_seq);
	if (rc == 0)
		r->has_since = true;
	else if (rc != -ENOENT)
		return rc;
	rc = pj_u64(root, "waitMs", false, &r->wait_ms);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	rc = pj_u64(root, "maxBytes", false, &r->max_bytes);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	return 0;
}

PJ_BODY_PLAIN(poll_req_body, struct proto_job_poll_req, pj_parse_object,
	      poll_req_fill);

int proto_job_poll_req_decode(const char *p, size_t n,
			      struct proto_job_poll_req *out)
{
	return pj_decode(p, n, &poll_req_body, NULL, out);
}

/* ---- poll answers -------------------------------------------------------- */

/* ,"error":{"code":...,"message":...} */
static int error_member(struct buf *out, const char *code, const char *message)
{
	int rc = buf_append_str(out, ",\"error\":{");

	if (rc == 0)
		rc = pj_put_error(out, code, message);
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}

int proto_job_poll_encode_head(bool running, struct buf *out)
{
	return buf_printf(out, "{\"running\":%s,\"frames\":[",
			  running ? "true" : "false");
}

int proto_job_poll_encode_frame(const struct proto_frame *f, bool first,
				struct buf *out)
{
	int rc = 0;

	if (f->type != PROTO_FRAME_STDOUT && f->type != PROTO_FRAME_STDERR)
		return -EINVAL;
	if (!first)
		rc = buf_append_str(out, ",");
	if (rc == 0)
		rc = pj_frame_json(f, out);
	return rc;
}

int proto_job_poll_encode_tail(const struct proto_job_poll *p, struct buf *out)
{
	int rc = buf_append_str(out, "]");

	if (rc == 0 && p->has_exit)
		rc = buf_printf(out,
				",\"exitCode\":%" PRId32 ",\"truncated\":%s",
				p->exit_code, p->truncated ? "true" : "false");
	if (rc == 0 && p->has_error)
		rc = error_member(out, p->err_code, p->err_message);
	if (rc == 0 && p->has_bytes)
		rc = buf_printf(out,
				",\"stdoutBytes\":%" PRIu64
				",\"stderrBytes\":%" PRIu64,
				p->stdout_bytes, p->stderr_bytes);
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}

int proto_job_poll_encode(const struct proto_job_poll *p, struct buf *out)
{
	size_t i;
	int rc = proto_job_poll_encode_head(p->running, out);

	for (i = 0; rc == 0 && i < p->nframes; i++)
		rc = proto_job_poll_encode_frame(&p->frames[i], i == 0, out);
	if (rc == 0)
		rc = proto_job_poll_encode_tail(p, out);
	return rc;
}

void proto_job_poll_cleanup(struct proto_job_poll *p)
{
	if (p == NULL)
		return;
	pj_frames_free(p->frames, p->nframes);
	free(p->err_code);
	free(p->err_message);
	memset(p, 0, sizeof(*p));
}

/*
 * The answer is walked once with the scanner above to find the frames
 * array; everything else is decoded by cJSON from a copy with that array
 * emptied (so it is checked before any frame is delivered), and each
 * frame by cJSON from its own slice, so no tree ever holds more than one
 * frame. The walk sees the tokens cJSON sees; where the two could differ
 * (bytes between the elements), the walk is strict.
 */

/* The answer without its frames: the members other than frames. */
static int poll_tail_from_json(const cJSON *root, struct proto_job_poll *r)
{
	const cJSON *it, *e;
	int rc;

	rc = pj_bool(root, "running", true, &r->running);
	if (rc < 0)
		return rc;
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "frames")))
		return -EINVAL;
	it = pj_member(root, "exitCode");
	if (it != NULL) {
		rc = pj_i32(it, &r->exit_code);
		if (rc < 0)
			return rc;
		r->has_exit = true;
	}
	rc = pj_bool(root, "truncated", false, &r->truncated);
	if (rc == -EINVAL)
		return rc;
	e = pj_member(root, "error");
	if (e != NULL) {
		rc = pj_error(e, &r->err_code, &r->err_message);
		if (rc < 0)
			return rc;
		r->has_error = true;
	}
	rc = pj_u64(root, "stdoutBytes", false, &r->stdout_bytes);
	if (rc == 0)
		rc = pj_u64(root, "stderrBytes", true, &r->stderr_bytes);
	if (rc == 0)
		r->has_bytes = true;
	else if (rc != -ENOENT)
		return -EINVAL;
	return 0;
}

/* One frame of the array at s (a '{'), decoded and handed to fn. */
static int each_frame(struct jscan *s, proto_frame_fn *fn, void *arg)
{
	const char *es = s->p;
	struct proto_frame f;
	cJSON *fo;
	int err = 0, rc;

	if (s->p >= s->end || *s->p != '{')
		return -EINVAL;
	js_skip(s, 1);
	fo = pj_parse(es, (size_t)(s->p - es), &err);
	if (fo == NULL)
		return err == -ENOMEM ? err : -EINVAL;
	rc = pj_frame_from_json(fo, &f);
	cJSON_Delete(fo);
	if (rc < 0)
		return rc == -ENOMEM ? rc : -EINVAL;
	if (f.type != PROTO_FRAME_STDOUT && f.type != PROTO_FRAME_STDERR)
		rc = -EINVAL;
	else
		rc = fn(arg, &f);
	proto_frame_cleanup(&f);
	return rc;
}

/* The frames array [vs, ve): [ element (, element)* ] with nothing else
 * between them, each handed to fn in order. */
static int each_frames(const char *vs, const char *ve, proto_frame_fn *fn,
		       void *arg)
{
	struct jscan s = {vs + 1, ve};
	int rc;

	js_ws(&s);
	if (s.p < s.end && *s.p == ']') {
		s.p++;
	} else {
		for (;;) {
			rc = each_frame(&s, fn, arg);
			if (rc < 0)
				return rc;
			js_ws(&s);
			if (s.p < s.end && *s.p == ',') {
				s.p++;
				js_ws(&s);
				continue;
			}
			if (s.p < s.end && *s.p == ']') {
				s.p++;
				break;
			}
			return -EINVAL;
		}
	}
	js_ws(&s);
	return s.p == s.end ? 0 : -EINVAL;
}

int proto_job_poll_decode_each(const char *p, size_t n, proto_frame_fn *fn,
			       void *arg, struct proto_job_poll *out)
{
	struct proto_job_poll r;
	struct buf skel = BUF_INIT(0);
	const char *vs = NULL, *ve = NULL;
	cJSON *root = NULL;
	int err = 0, rc;

	memset(&r, 0, sizeof(r));
	rc = js_member(p, n, "frames", &vs, &ve);
	if (rc == -EINVAL) {
		/* Not an object the walk can follow: cJSON says why (not
		 * JSON, or not an object). */
		root = pj_parse_object(p, n, &err);
		rc = root == NULL ? err : -EINVAL;
		goto out;
	}
	if (rc == -ENOENT || (rc == 0 && *vs != '['))
		rc = -EINVAL;
	if (rc < 0)
		goto out;
	rc = buf_append(&skel, p, (size_t)(vs - p));
	if (rc == 0)
		rc = buf_append_str(&skel, "[]");
	if (rc == 0)
		rc = buf_append(&skel, ve, (size_t)(p + n - ve));
	if (rc < 0)
		goto out;
	root = pj_parse_object(skel.data, skel.len, &err);
	if (root == NULL) {
		rc = err;
		goto out;
	}
	rc = poll_tail_from_json(root, &r);
	if (rc == 0)
		rc = each_frames(vs, ve, fn, arg);
	if (rc < 0)
		goto out;
	*out = r;
	memset(&r, 0, sizeof(r));
	rc = 0;
out:
	proto_job_poll_cleanup(&r);
	cJSON_Delete(root);
	buf_cleanup(&skel);
	return rc;
}

/* Keeps every frame: proto_job_poll_decode on top of _each. */
struct frame_list {
	struct proto_frame *v;
	size_t n, cap;
};

static int collect_frame(void *arg, const struct proto_frame *f)
{
	struct frame_list *l = arg;
	struct proto_frame *g;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct proto_frame *v = realloc(l->v, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	g = &l->v[l->n];
	*g = *f;
	g->err_code = g->err_message = NULL;
	g->data = malloc(f->len ? f->len : 1);
	if (g->data == NULL)
		return -ENOMEM;
	if (f->len > 0)
		memcpy(g->data, f->data, f->len);
	l->n++;
	return 0;
}

int proto_job_poll_decode(const char *p, size_t n, struct proto_job_poll *out)
{
	struct frame_list l = {NULL, 0, 0};
	struct proto_job_poll r;
	int rc;

	rc = proto_job_poll_decode_each(p, n, collect_frame, &l, &r);
	if (rc < 0) {
		pj_frames_free(l.v, l.n);
		return rc;
	}
	r.frames = l.v != NULL ? l.v : calloc(1, sizeof(*r.frames));
	if (r.frames == NULL) {
		proto_job_poll_cleanup(&r);
		return -ENOMEM;
	}
	r.nframes = l.n;
	*out = r;
	return 0;
}

/* ---- the job listing ----------------------------------------------------- */

static const char *const job_states[] = {"running", "exited", "failed",
					 "cancelled"};

#define NSTATES (sizeof(job_states) / sizeof(job_states[0]))

const char *proto_job_state_name(enum proto_job_state s)
{
	return (unsigned)s < NSTATES ? job_states[s] : NULL;
}

int proto_job_list_encode_head(struct buf *out)
{
	return buf_append_str(out, "{\"jobs\":[");
}

int proto_job_list_encode_entry(const struct proto_job_info *ji, bool first,
				struct buf *out)
{
	const char *state = proto_job_state_name(ji->state);
	int rc = first ? 0 : buf_append_str(out, ",");

	if (state == NULL)
		return -EINVAL;
	if (rc == 0)
		rc = buf_append_str(out, "{\"jobId\":");
	if (rc == 0)
		rc = proto_json_string(out, ji->job_id);
	if (rc == 0)
		rc = buf_append_str(out, ",\"command\":");
	if (rc == 0)
		rc = pj_put_strs(out, ji->argv, ji->argc, false);
	if (rc == 0)
		rc = buf_append_str(out, ",\"cwd\":");
	if (rc == 0)
		rc = ji->cwd ? proto_json_string(out, ji->cwd)
			     : buf_append_str(out, "null");
	if (rc == 0)
		rc = buf_append_str(out, ",\"env\":");
	if (rc == 0)
		rc = pj_put_strs(out, ji->env, ji->envc, true);
	if (rc == 0)
		rc = buf_printf(out,
				",\"timeoutMs\":%" PRIu64
				",\"startedAtMs\":%" PRId64
				",\"state\":\"%s\",\"flowControl\":%s",
				ji->timeout_ms, ji->started_ms, state,
				ji->flow ? "true" : "false");
	if (rc == 0 && ji->state != PROTO_JOB_RUNNING)
		rc = buf_printf(out, ",\"endedAtMs\":%" PRId64, ji->ended_ms);
	if (rc == 0 && ji->state == PROTO_JOB_EXITED)
		rc = buf_printf(out, ",\"exitCode\":%" PRId32, ji->exit_code);
	if (rc == 0 && ji->state == PROTO_JOB_FAILED)
		rc = error_member(out, ji->err_code, ji->err_message);
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}

int proto_job_list_encode_tail(bool complete, struct buf *out)
{
	return buf_printf(out, "],\"complete\":%s}",
			  complete ? "true" : "false");
}

static void proto_job_info_cleanup(struct proto_job_info *ji)
{
	if (ji == NULL)
		return;
	strv_free(ji->argv, ji->argc);
	strv_free(ji->env, ji->envc);
	free(ji->cwd);
	free(ji->err_code);
	free(ji->err_message);
	memset(ji, 0, sizeof(*ji));
}

void proto_job_list_cleanup(struct proto_job_list *l)
{
	size_t i;

	if (l == NULL)
		return;
	for (i = 0; i < l->n; i++)
		proto_job_info_cleanup(&l->jobs[i]);
	free(l->jobs);
	memset(l, 0, sizeof(*l));
}

static int job_info_from_json(const cJSON *o, struct proto_job_info *ji)
{
	const char *s;
	uint64_t u;
	int64_t t;
	size_t i;
	int rc;

	if (!cJSON_IsObject(o))
		return -EINVAL;
	rc = pj_str(o, "jobId", true, &s);
	if (rc < 0)
		return rc;
	if (*s == '\0' || strlen(s) > PROTO_JOB_ID_MAX)
		return -EINVAL;
	memcpy(ji->job_id, s, strlen(s) + 1);
	rc = pj_str_array(cJSON_GetObjectItemCaseSensitive(o, "command"),
			  PROTO_EXEC_MAX_ARGS, -EINVAL, &ji->argv, &ji->argc);
	if (rc < 0)
		return rc;
	rc = pj_str(o, "cwd", false, &s);
	if (rc == 0)
		rc = pj_dup(s, &ji->cwd);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	rc = pj_str_array(cJSON_GetObjectItemCaseSensitive(o, "env"),
			  PROTO_EXEC_MAX_ENV, -EINVAL, &ji->env, &ji->envc);
	if (rc < 0)
		return rc;
	/* Names only: a value must never come out of a listing. */
	for (i = 0; i < ji->envc; i++)
		if (strchr(ji->env[i], '=') != NULL)
			return -EINVAL;
	rc = pj_u64(o, "timeoutMs", true, &ji->timeout_ms);
	if (rc < 0)
		return rc;
	rc = pj_i64(o, "startedAtMs", true, &ji->started_ms);
	if (rc < 0)
		return rc;
	rc = pj_str(o, "state", true, &s);
	if (rc < 0)
		return rc;
	for (u = 0; u < NSTATES; u++)
		if (strcmp(s, job_states[u]) == 0)
			break;
	if (u == NSTATES)
		return -EINVAL;
	ji->state = (enum proto_job_state)u;
	rc = pj_bool(o, "flowControl", false, &ji->flow);
	if (rc == -EINVAL)
		return rc;
	if (ji->state == PROTO_JOB_RUNNING)
		return 0;
	rc = pj_i64(o, "endedAtMs", false, &t);
	if (rc == 0)
		ji->ended_ms = t;
	else if (rc != -ENOENT)
		return rc;
	if (ji->state == PROTO_JOB_EXITED)
		return pj_i32(cJSON_GetObjectItemCaseSensitive(o, "exitCode"),
			      &ji->exit_code);
	if (ji->state == PROTO_JOB_FAILED)
		return pj_error(cJSON_GetObjectItemCaseSensitive(o, "error"),
				&ji->err_code, &ji->err_message);
	return 0;
}

/* A job listing's members into l (proto_job_list_decode). */
static int job_list_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_job_list *l = dst;
	const cJSON *jobs, *it;
	size_t count;
	int rc;

	jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs");
	if (!cJSON_IsArray(jobs))
		return -EINVAL;
	rc = pj_bool(root, "complete", true, &l->complete);
	if (rc < 0)
		return rc;
	count = (size_t)cJSON_GetArraySize(jobs);
	l->jobs = calloc(count ? count : 1, sizeof(*l->jobs));
	if (l->jobs == NULL)
		return -ENOMEM;
	cJSON_ArrayForEach(it, jobs)
	{
		rc = job_info_from_json(it, &l->jobs[l->n]);
		l->n++;
		if (rc < 0)
			return rc == -ENOMEM ? rc : -EINVAL;
	}
	return 0;
}

PJ_BODY(job_list_body, struct proto_job_list, pj_parse_object, job_list_fill,
	proto_job_list_cleanup);

int proto_job_list_decode(const char *p, size_t n, struct proto_job_list *out)
{
	return pj_decode(p, n, &job_list_body, NULL, out);
}
