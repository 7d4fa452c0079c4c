/* SPDX-License-Identifier: MIT */
/*
 * proto_exec: the command request of /v1/exec and a job start, the NDJSON
 * output frames and their line splitter (doc/protocol-v1.md 3.6). The
 * job bodies (ids, polls, the listing) are proto_jobs.c's.
 *
 * Requests are decoded with cJSON. Frames are encoded by hand: the agent
 * must put the fields in alien's order and write 64-bit numbers exactly.
 * Nothing here runs a command or keeps job state; that is agent/spawn.c
 * and agent/jobs.c.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/b64.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/proto_i.h"
#include "common/proto_jscan_i.h"
#include "common/strv.h"

/* ---- NUL detection ------------------------------------------------------
 *
 * cJSON decodes "\u0000" into a NUL byte inside its C string, so the string
 * silently ends there. The protocol treats a NUL in env as requestInvalid
 * and a NUL elsewhere as a failed spawn or an unresolvable path, so the
 * decoder must know where one was. When the raw text holds "\u0000" at all
 * (rare), it is walked once more (proto_jscan_i.h), in the order cJSON
 * built its tree, to see which of the fields the request uses held it.
 */

/* Which of command, env, cwd and workingDirectory (first occurrence of
 * each, as cJSON_GetObjectItemCaseSensitive picks) hold a NUL. */
struct request_nul {
	bool seen[4];
	bool nul[4];
};

static int request_member(void *arg, const char *key, struct jscan *s)
{
	static const char *const keys[] = {"command", "env", "cwd",
					   "workingDirectory"};
	struct request_nul *r = arg;
	size_t i;

	for (i = 0; i < 4; i++) {
		if (!r->seen[i] && strcmp(key, keys[i]) == 0) {
			r->seen[i] = true;
			r->nul[i] = js_value_nul(s);
			return 0;
		}
	}
	js_skip(s, 1);
	return 0;
}

/* ---- command requests --------------------------------------------------- */

void proto_exec_req_cleanup(struct proto_exec_req *r)
{
	if (r == NULL)
		return;
	strv_free(r->argv, r->argc);
	strv_free(r->env, r->envc);
	free(r->cwd);
	memset(r, 0, sizeof(*r));
}

/* Add "key=value", replacing an earlier entry with the same key. */
static int env_put(struct proto_exec_req *r, const char *key, const char *value)
{
	size_t klen = strlen(key), i;
	char *entry;

	if (asprintf(&entry, "%s=%s", key, value) < 0)
		return -ENOMEM;
	for (i = 0; i < r->envc; i++) {
		if (strncmp(r->env[i], key, klen) == 0 &&
		    r->env[i][klen] == '=') {
			free(r->env[i]);
			r->env[i] = entry;
			return 0;
		}
	}
	r->env[r->envc++] = entry;
	r->env[r->envc] = NULL;
	return 0;
}

static int decode_env(const cJSON *root, struct proto_exec_req *r)
{
	const cJSON *env = pj_member(root, "env");
	const cJSON *it;
	size_t n = 0;
	int rc;

	if (env != NULL && !cJSON_IsObject(env))
		return -EINVAL;
	if (env != NULL) {
		cJSON_ArrayForEach(it, env)
		{
			if (!cJSON_IsString(it) || it->valuestring == NULL)
				return -EINVAL;
			n++;
		}
	}
	if (n > PROTO_EXEC_MAX_ENV)
		return -EFBIG;
	r->env = calloc(n + 1, sizeof(char *));
	if (r->env == NULL)
		return -ENOMEM;
	if (n == 0)
		return 0;
	cJSON_ArrayForEach(it, env)
	{
		const char *key = it->string ? it->string : "";

		if (*key == '\0' || strchr(key, '=') != NULL)
			r->flags |= PROTO_EXEC_ENV_BADKEY;
		rc = env_put(r, key, it->valuestring);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A command request's members into r; *(bool *)arg says whether the
 * directory came as workingDirectory (proto_exec_req_decode). */
static int exec_req_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_exec_req *r = dst;
	bool *from_wd = arg;
	const char *s;
	int rc;

	rc = pj_str_array(cJSON_GetObjectItemCaseSensitive(root, "command"),
			  PROTO_EXEC_MAX_ARGS, -EFBIG, &r->argv, &r->argc);
	if (rc < 0)
		return rc;
	/* Clients since alien 3.3.1x send timeoutMs; older ones deadlineMs. */
	rc = pj_u64(root, "timeoutMs", false, &r->timeout_ms);
	if (rc == -ENOENT)
		rc = pj_u64(root, "deadlineMs", true, &r->timeout_ms);
	if (rc < 0)
		return rc;
	rc = pj_str(root, "cwd", false, &s);
	*from_wd = rc == -ENOENT;
	if (*from_wd)
		rc = pj_str(root, "workingDirectory", false, &s);
	if (rc == 0)
		rc = pj_dup(s, &r->cwd);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	rc = decode_env(root, r);
	if (rc < 0)
		return rc;
	r->flow = cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(root, "flowControl"));
	return 0;
}

PJ_BODY(exec_req_body, struct proto_exec_req, pj_parse_object, exec_req_fill,
	proto_exec_req_cleanup);

int proto_exec_req_decode(const char *p, size_t n, struct proto_exec_req *out)
{
	bool from_wd = false;
	int rc;

	rc = pj_decode(p, n, &exec_req_body, &from_wd, out);
	if (rc == 0 && memmem(p, n, "\\u0000", 6) != NULL) {
		struct request_nul nul;
		struct jscan js = {p, p + n};

		memset(&nul, 0, sizeof(nul));
		(void)js_members(&js, request_member, &nul);
		if (nul.nul[0])
			out->flags |= PROTO_EXEC_ARG_NUL;
		if (nul.nul[1])
			out->flags |= PROTO_EXEC_ENV_NUL;
		/* The flag follows the spelling the value came from. */
		if (out->cwd != NULL && nul.nul[from_wd ? 3 : 2])
			out->flags |= PROTO_EXEC_CWD_NUL;
	}
	return rc;
}

const char *proto_exec_req_validate(const struct proto_exec_req *r)
{
	if (r->argc == 0)
		return "command is empty";
	if (r->timeout_ms == 0)
		return "a command must carry a non-zero deadline";
	if (r->flags & PROTO_EXEC_ENV_NUL)
		return "an environment entry contains a NUL byte";
	if (r->flags & PROTO_EXEC_ENV_BADKEY)
		return "an environment name must be non-empty and contain no "
		       "'='";
	return NULL;
}

int proto_exec_req_encode(const struct proto_exec_req *r, struct buf *out)
{
	size_t i;
	int rc;

	rc = buf_append_str(out, "{\"command\":");
	if (rc == 0)
		rc = pj_put_strs(out, r->argv, r->argc, false);
	if (rc == 0)
		rc = buf_printf(out, ",\"timeoutMs\":%" PRIu64 ",\"cwd\":",
				r->timeout_ms);
	if (rc == 0)
		rc = r->cwd ? proto_json_string(out, r->cwd)
			    : buf_append_str(out, "null");
	if (rc == 0)
		rc = buf_append_str(out, ",\"env\":{");
	for (i = 0; rc == 0 && i < r->envc; i++) {
		const char *eq = strchr(r->env[i], '=');
		char *key;

		if (eq == NULL)
			return -EINVAL;
		key = strndup(r->env[i], (size_t)(eq - r->env[i]));
		if (key == NULL)
			return -ENOMEM;
		if (i > 0)
			rc = buf_append_str(out, ",");
		if (rc == 0)
			rc = proto_json_string(out, key);
		if (rc == 0)
			rc = buf_append_str(out, ":");
		if (rc == 0)
			rc = proto_json_string(out, eq + 1);
		free(key);
	}
	if (rc == 0)
		rc = buf_append_str(out, "}");
	if (rc == 0 && r->flow)
		rc = buf_append_str(out, ",\"flowControl\":true");
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}

/* ---- frames -------------------------------------------------------------- */

/* The "t" of each frame type, for the encoder and the decoder. */
static const char *const frame_names[] = {
	[PROTO_FRAME_STDOUT] = "stdout",
	[PROTO_FRAME_STDERR] = "stderr",
	[PROTO_FRAME_EXIT] = "exit",
	[PROTO_FRAME_ERROR] = "error",
};

static const char *frame_name(enum proto_frame_type t)
{
	return (size_t)t < NFIELDS(frame_names) ? frame_names[t] : NULL;
}

/* The frame type named t; -EBADMSG for a name that is none. */
static int frame_type(const char *t, enum proto_frame_type *out)
{
	size_t i;

	for (i = 0; i < NFIELDS(frame_names); i++)
		if (strcmp(frame_names[i], t) == 0) {
			*out = (enum proto_frame_type)i;
			return 0;
		}
	return -EBADMSG;
}

size_t proto_frame_output_len(uint64_t seq, size_t len)
{
	char num[24];

	/* {"t":"stdout","seq":N,"data":"..."}; stderr has the same length */
	return strlen("{\"t\":\"stdout\",\"seq\":,\"data\":\"\"}") +
	       (size_t)snprintf(num, sizeof(num), "%" PRIu64, seq) +
	       b64_encoded_len(len);
}

int pj_frame_json(const struct proto_frame *f, struct buf *out)
{
	const char *name = frame_name(f->type);
	size_t elen;
	char *p;
	int rc, err = 0;

	if (name == NULL)
		return -EINVAL;
	switch (f->type) {
	case PROTO_FRAME_STDOUT:
	case PROTO_FRAME_STDERR:
		rc = buf_printf(out,
				"{\"t\":\"%s\",\"seq\":%" PRIu64 ",\"data\":\"",
				name, f->seq);
		if (rc < 0)
			return rc;
		elen = b64_encoded_len(f->len);
		p = buf_reserve(out, elen + 1, &err);
		if (p == NULL)
			return err;
		b64_encode(f->data, f->len, p);
		buf_commit(out, elen);
		if (f->has_off)
			return buf_printf(out, "\",\"off\":%" PRIu64 "}",
					  f->off);
		return buf_append_str(out, "\"}");
	case PROTO_FRAME_EXIT:
		return buf_printf(out,
				  "{\"t\":\"exit\",\"code\":%" PRId32
				  ",\"truncated\":%s}",
				  f->code, f->truncated ? "true" : "false");
	case PROTO_FRAME_ERROR:
		rc = buf_append_str(out, "{\"t\":\"error\",");
		if (rc == 0)
			rc = pj_put_error(out, f->err_code, f->err_message);
		if (rc == 0)
			rc = buf_append_str(out, "}");
		return rc;
	}
	return -EINVAL;
}

int proto_frame_encode(const struct proto_frame *f, struct buf *out)
{
	size_t mark = out->len;
	int rc = pj_frame_json(f, out);

	if (rc == 0)
		rc = buf_append_str(out, "\n");
	/* Leave the buffer as it was: no half frame on the wire. */
	if (rc < 0)
		pj_rollback(out, mark);
	return rc;
}

/* The heap members of a frame. */
static const size_t frame_ptrs[] = {
	offsetof(struct proto_frame, data),
	offsetof(struct proto_frame, err_code),
	offsetof(struct proto_frame, err_message),
};

void proto_frame_cleanup(struct proto_frame *f)
{
	if (f == NULL)
		return;
	pj_strs_free(f, frame_ptrs, NFIELDS(frame_ptrs));
	memset(f, 0, sizeof(*f));
}

void pj_frames_free(struct proto_frame *v, size_t n)
{
	pj_vec_free(v, n, sizeof(*v), frame_ptrs, NFIELDS(frame_ptrs));
}

int pj_frame_from_json(const cJSON *obj, struct proto_frame *out)
{
	struct proto_frame f;
	const char *t, *s;
	long n;
	int rc = -EBADMSG;

	memset(&f, 0, sizeof(f));
	if (!cJSON_IsObject(obj) || pj_str(obj, "t", true, &t) < 0 ||
	    frame_type(t, &f.type) < 0)
		return -EBADMSG;
	switch (f.type) {
	case PROTO_FRAME_STDOUT:
	case PROTO_FRAME_STDERR:
		if (pj_u64(obj, "seq", true, &f.seq) < 0 ||
		    pj_str(obj, "data", true, &s) < 0)
			goto out;
		f.data = malloc(b64_decoded_max(strlen(s)) + 1);
		if (f.data == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		n = b64_decode(s, strlen(s), f.data);
		if (n < 0)
			goto out;
		f.len = (size_t)n;
		rc = pj_u64(obj, "off", false, &f.off);
		if (rc < 0 && rc != -ENOENT) {
			rc = -EBADMSG;
			goto out;
		}
		f.has_off = rc == 0;
		rc = -EBADMSG;
		break;
	case PROTO_FRAME_EXIT:
		if (pj_i32(cJSON_GetObjectItemCaseSensitive(obj, "code"),
			   &f.code) < 0)
			goto out;
		/* Clients default a missing flag to false (doc/protocol-v1.md 3.6). */
		if (pj_bool(obj, "truncated", false, &f.truncated) == -EINVAL)
			goto out;
		break;
	case PROTO_FRAME_ERROR:
		rc = pj_error(obj, &f.err_code, &f.err_message);
		if (rc < 0) {
			if (rc != -ENOMEM)
				rc = -EBADMSG;
			goto out;
		}
		break;
	}
	*out = f;
	memset(&f, 0, sizeof(f));
	rc = 0;
out:
	proto_frame_cleanup(&f);
	return rc;
}

int proto_frame_decode(const char *line, size_t n, struct proto_frame *out)
{
	cJSON *root;
	int err = 0, rc;

	root = pj_parse(line, n, &err);
	if (root == NULL)
		return err == -ENOMEM ? err : -EBADMSG;
	rc = pj_frame_from_json(root, out);
	cJSON_Delete(root);
	return rc;
}

/* ---- NDJSON splitting ---------------------------------------------------- */

void proto_ndjson_init(struct proto_ndjson *s)
{
	memset(s, 0, sizeof(*s));
	buf_init(&s->pending, 0);
}

void proto_ndjson_cleanup(struct proto_ndjson *s)
{
	if (s == NULL)
		return;
	buf_cleanup(&s->pending);
	s->off = s->scanned = s->line_start = 0;
}

int proto_ndjson_feed(struct proto_ndjson *s, const void *p, size_t n)
{
	const char *d;
	size_t i;
	int rc;

	if (s->err)
		return s->err;
	/* Forget the lines already handed out; what remains is at most the
	 * unfinished line plus lines the caller has not taken yet. */
	if (s->off > 0) {
		buf_consume(&s->pending, s->off);
		s->scanned -= s->off;
		s->line_start -= s->off;
		s->off = 0;
	}
	rc = buf_append(&s->pending, p, n);
	if (rc < 0) {
		s->err = rc;
		return rc;
	}
	d = s->pending.data;
	for (i = s->scanned; i < s->pending.len; i++) {
		if (d[i] != '\n')
			continue;
		if (i - s->line_start > PROTO_MAX_LINE_BYTES)
			s->err = -EFBIG;
		s->line_start = i + 1;
	}
	s->scanned = s->pending.len;
	if (s->pending.len - s->line_start > PROTO_MAX_LINE_BYTES)
		s->err = -EFBIG;
	return s->err;
}

int proto_ndjson_next(struct proto_ndjson *s, const char **line, size_t *len)
{
	while (s->off < s->scanned) {
		const char *start = s->pending.data + s->off;
		const char *nl = memchr(start, '\n', s->scanned - s->off);
		size_t n;

		if (nl == NULL)
			return 0;
		n = (size_t)(nl - start);
		s->off += n + 1;
		if (n > 0 && start[n - 1] == '\r')
			n--;
		if (n == 0)
			continue;
		*line = start;
		*len = n;
		return 1;
	}
	return 0;
}

bool proto_ndjson_partial(const struct proto_ndjson *s)
{
	return s->pending.len > s->off;
}
