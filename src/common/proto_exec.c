/* SPDX-License-Identifier: MIT */
/*
 * proto_exec: the bodies of /v1/exec and the /v1/jobs routes
 * (doc/protocol-v1.md 3.6).
 *
 * Requests and answers are decoded with cJSON. Frames and poll answers are
 * encoded by hand: the agent must put the fields in alien's order and write
 * 64-bit numbers exactly, and a poll answer can carry megabytes of output
 * that a cJSON tree would only copy twice. Nothing here runs a command or
 * keeps job state; that is agent/spawn.c and agent/jobs.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/b64.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/proto_i.h"

/* ---- NUL detection ------------------------------------------------------
 *
 * cJSON decodes "\u0000" into a NUL byte inside its C string, so the string
 * silently ends there. The protocol treats a NUL in env as requestInvalid
 * and a NUL elsewhere as a failed spawn or an unresolvable path, so the
 * decoder must know where one was. When the raw text holds "\u0000" at all
 * (rare), it is walked once more, in the order cJSON built its tree, to see
 * which of the fields the request uses held it. The text has already been
 * accepted by cJSON, so the walk only needs to stay inside the buffer.
 */

struct jscan {
	const char *p;
	const char *end;
};

#define JS_KEY_MAX 32

/* What cJSON skips between tokens: every byte up to and including space,
 * not only JSON's four. The walk must see the same tokens cJSON saw. */
static void js_ws(struct jscan *s)
{
	while (s->p < s->end && (unsigned char)*s->p <= ' ')
		s->p++;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * At a '"': step over the string. Returns true when it holds an escaped
 * NUL. When key is not NULL it receives the decoded string if that is
 * short ASCII, else "" (no field we look for is anything else).
 */
static bool js_string(struct jscan *s, char key[JS_KEY_MAX])
{
	bool nul = false, keyok = key != NULL;
	size_t k = 0;

	s->p++;
	while (s->p < s->end && *s->p != '"') {
		char c = *s->p++;

		if (c == '\\' && s->p < s->end) {
			char e = *s->p++;

			c = e;
			if (e == 'u' && s->end - s->p >= 4) {
				int v = 0, i;

				for (i = 0; i < 4; i++) {
					int h = hexval(s->p[i]);

					v = v * 16 + (h < 0 ? 0 : h);
				}
				s->p += 4;
				if (v == 0)
					nul = true;
				if (v == 0 || v >= 0x80)
					keyok = false;
				c = (char)v;
			} else if (e == 'b') {
				c = '\b';
			} else if (e == 'f') {
				c = '\f';
			} else if (e == 'n') {
				c = '\n';
			} else if (e == 'r') {
				c = '\r';
			} else if (e == 't') {
				c = '\t';
			}
		}
		if (keyok) {
			if (k + 1 >= JS_KEY_MAX)
				keyok = false;
			else
				key[k++] = c;
		}
	}
	if (s->p < s->end)
		s->p++;
	if (key != NULL)
		key[keyok ? k : 0] = '\0';
	return nul;
}

static void js_skip(struct jscan *s, unsigned depth);

/* Step over the members of an object or the elements of an array. */
static void js_skip_container(struct jscan *s, unsigned depth, bool object)
{
	char close = object ? '}' : ']';

	s->p++;
	for (;;) {
		js_ws(s);
		if (s->p >= s->end)
			return;
		if (*s->p == close) {
			s->p++;
			return;
		}
		if (*s->p == ',') {
			s->p++;
			continue;
		}
		if (object) {
			if (*s->p != '"')
				return;
			js_string(s, NULL);
			js_ws(s);
			if (s->p < s->end && *s->p == ':')
				s->p++;
			js_ws(s);
		}
		js_skip(s, depth + 1);
	}
}

static void js_skip(struct jscan *s, unsigned depth)
{
	js_ws(s);
	if (s->p >= s->end)
		return;
	if (depth > CJSON_NESTING_LIMIT) {
		s->p = s->end;
		return;
	}
	switch (*s->p) {
	case '"':
		js_string(s, NULL);
		return;
	case '{':
		js_skip_container(s, depth, true);
		return;
	case '[':
		js_skip_container(s, depth, false);
		return;
	default:
		/* A number or a literal. Every call moves on at least one
		 * byte, so no input can hold a walk in place. */
		s->p++;
		while (s->p < s->end && (unsigned char)*s->p > ' ' &&
		       !strchr(",]}", *s->p))
			s->p++;
	}
}

/* The string at s (if it is one) holds a NUL: step over it either way. */
static bool js_value_nul(struct jscan *s)
{
	js_ws(s);
	if (s->p < s->end && *s->p == '"')
		return js_string(s, NULL);
	js_skip(s, 1);
	return false;
}

/* Over the elements of the array or members of the object at s, true when
 * any string in them (keys included) holds a NUL. */
static bool js_container_nul(struct jscan *s, bool object)
{
	char close = object ? '}' : ']';
	bool nul = false;

	js_ws(s);
	if (s->p >= s->end || *s->p != (object ? '{' : '[')) {
		js_skip(s, 1);
		return false;
	}
	s->p++;
	for (;;) {
		js_ws(s);
		if (s->p >= s->end)
			return nul;
		if (*s->p == close) {
			s->p++;
			return nul;
		}
		if (*s->p == ',') {
			s->p++;
			continue;
		}
		if (object) {
			if (*s->p != '"')
				return nul;
			nul |= js_string(s, NULL);
			js_ws(s);
			if (s->p < s->end && *s->p == ':')
				s->p++;
		}
		nul |= js_value_nul(s);
	}
}

/* Which of command, env, cwd and workingDirectory (first occurrence of
 * each, as cJSON_GetObjectItemCaseSensitive picks) hold a NUL. */
static void scan_request_nul(const char *p, size_t n, bool *arg, bool *env,
			     bool *cwd, bool *wd)
{
	struct jscan s = {p, p + n};
	bool seen_cmd = false, seen_env = false, seen_cwd = false,
	     seen_wd = false;
	char key[JS_KEY_MAX];

	js_ws(&s);
	if (s.p >= s.end || *s.p != '{')
		return;
	s.p++;
	for (;;) {
		js_ws(&s);
		if (s.p >= s.end || *s.p == '}')
			return;
		if (*s.p == ',') {
			s.p++;
			continue;
		}
		if (*s.p != '"')
			return;
		js_string(&s, key);
		js_ws(&s);
		if (s.p < s.end && *s.p == ':')
			s.p++;
		if (!seen_cmd && strcmp(key, "command") == 0) {
			seen_cmd = true;
			*arg = js_container_nul(&s, false);
		} else if (!seen_env && strcmp(key, "env") == 0) {
			seen_env = true;
			*env = js_container_nul(&s, true);
		} else if (!seen_cwd && strcmp(key, "cwd") == 0) {
			seen_cwd = true;
			*cwd = js_value_nul(&s);
		} else if (!seen_wd && strcmp(key, "workingDirectory") == 0) {
			seen_wd = true;
			*wd = js_value_nul(&s);
		} else {
			js_skip(&s, 1);
		}
	}
}

/* ---- command requests --------------------------------------------------- */

static void free_strv(char **v, size_t n)
{
	size_t i;

	if (v == NULL)
		return;
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void proto_exec_req_cleanup(struct proto_exec_req *r)
{
	if (r == NULL)
		return;
	free_strv(r->argv, r->argc);
	free_strv(r->env, r->envc);
	free(r->cwd);
	memset(r, 0, sizeof(*r));
}

static int decode_command(const cJSON *root, struct proto_exec_req *r)
{
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(root, "command");
	const cJSON *it;
	size_t n = 0;

	if (!cJSON_IsArray(cmd))
		return -EINVAL;
	cJSON_ArrayForEach(it, cmd)
	{
		if (!cJSON_IsString(it) || it->valuestring == NULL)
			return -EINVAL;
		n++;
	}
	if (n > PROTO_EXEC_MAX_ARGS)
		return -EFBIG;
	r->argv = calloc(n + 1, sizeof(char *));
	if (r->argv == NULL)
		return -ENOMEM;
	cJSON_ArrayForEach(it, cmd)
	{
		r->argv[r->argc] = strdup(it->valuestring);
		if (r->argv[r->argc] == NULL)
			return -ENOMEM;
		r->argc++;
	}
	return 0;
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
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(root, "env");
	const cJSON *it;
	size_t n = 0;
	int rc;

	if (cJSON_IsNull(env))
		env = NULL;
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

int proto_exec_req_decode(const char *p, size_t n, struct proto_exec_req *out)
{
	struct proto_exec_req r;
	bool arg_nul = false, env_nul = false, cwd_nul = false, wd_nul = false;
	bool from_wd;
	const char *s;
	cJSON *root;
	int err = 0, rc;

	root = pj_parse_object(p, n, &err);
	if (root == NULL)
		return err;
	memset(&r, 0, sizeof(r));
	rc = decode_command(root, &r);
	if (rc < 0)
		goto out;
	/* Clients since alien 3.3.1x send timeoutMs; older ones deadlineMs. */
	rc = pj_u64(root, "timeoutMs", false, &r.timeout_ms);
	if (rc == -ENOENT)
		rc = pj_u64(root, "deadlineMs", true, &r.timeout_ms);
	if (rc < 0)
		goto out;
	rc = pj_str(root, "cwd", false, &s);
	from_wd = rc == -ENOENT;
	if (from_wd)
		rc = pj_str(root, "workingDirectory", false, &s);
	if (rc == 0) {
		rc = pj_dup(s, &r.cwd);
		if (rc < 0)
			goto out;
	} else if (rc != -ENOENT) {
		goto out;
	}
	rc = decode_env(root, &r);
	if (rc < 0)
		goto out;
	r.flow = cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(root, "flowControl"));
	if (memmem(p, n, "\\u0000", 6) != NULL) {
		scan_request_nul(p, n, &arg_nul, &env_nul, &cwd_nul, &wd_nul);
		if (arg_nul)
			r.flags |= PROTO_EXEC_ARG_NUL;
		if (env_nul)
			r.flags |= PROTO_EXEC_ENV_NUL;
		/* The flag follows the spelling the value came from. */
		if (r.cwd != NULL && (from_wd ? wd_nul : cwd_nul))
			r.flags |= PROTO_EXEC_CWD_NUL;
	}
	*out = r;
	memset(&r, 0, sizeof(r));
	rc = 0;
out:
	proto_exec_req_cleanup(&r);
	cJSON_Delete(root);
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

	rc = buf_append_str(out, "{\"command\":[");
	for (i = 0; rc == 0 && i < r->argc; i++) {
		if (i > 0)
			rc = buf_append_str(out, ",");
		if (rc == 0)
			rc = proto_json_string(out, r->argv[i]);
	}
	if (rc == 0)
		rc = buf_printf(out, "],\"timeoutMs\":%" PRIu64 ",\"cwd\":",
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

static const char *frame_name(enum proto_frame_type t)
{
	switch (t) {
	case PROTO_FRAME_STDOUT:
		return "stdout";
	case PROTO_FRAME_STDERR:
		return "stderr";
	case PROTO_FRAME_EXIT:
		return "exit";
	case PROTO_FRAME_ERROR:
		return "error";
	}
	return NULL;
}

size_t proto_frame_output_len(uint64_t seq, size_t len)
{
	char num[24];

	/* {"t":"stdout","seq":N,"data":"..."}; stderr has the same length */
	return strlen("{\"t\":\"stdout\",\"seq\":,\"data\":\"\"}") +
	       (size_t)snprintf(num, sizeof(num), "%" PRIu64, seq) +
	       b64_encoded_len(len);
}

/* The frame's JSON object, without a newline. */
static int frame_json(const struct proto_frame *f, struct buf *out)
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
		rc = buf_append_str(out, "{\"t\":\"error\",\"code\":");
		if (rc == 0)
			rc = proto_json_string(out,
					       f->err_code ? f->err_code : "");
		if (rc == 0)
			rc = buf_append_str(out, ",\"message\":");
		if (rc == 0)
			rc = proto_json_string(
				out, f->err_message ? f->err_message : "");
		if (rc == 0)
			rc = buf_append_str(out, "}");
		return rc;
	}
	return -EINVAL;
}

int proto_frame_encode(const struct proto_frame *f, struct buf *out)
{
	size_t mark = out->len;
	int rc = frame_json(f, out);

	if (rc == 0)
		rc = buf_append_str(out, "\n");
	if (rc < 0 && out->data != NULL) {
		/* Leave the buffer as it was: no half frame on the wire. */
		out->len = mark;
		out->data[mark] = '\0';
	}
	return rc;
}

void proto_frame_cleanup(struct proto_frame *f)
{
	if (f == NULL)
		return;
	free(f->data);
	free(f->err_code);
	free(f->err_message);
	memset(f, 0, sizeof(*f));
}

/* Decode a frame object. Every failure is -EBADMSG (or -ENOMEM). */
static int frame_from_json(const cJSON *obj, struct proto_frame *out)
{
	struct proto_frame f;
	const char *t, *s;
	const cJSON *it;
	double v;
	long n;
	int rc = -EBADMSG;

	if (!cJSON_IsObject(obj) || pj_str(obj, "t", true, &t) < 0)
		return -EBADMSG;
	memset(&f, 0, sizeof(f));
	if (strcmp(t, "stdout") == 0 || strcmp(t, "stderr") == 0) {
		f.type = strcmp(t, "stdout") == 0 ? PROTO_FRAME_STDOUT
						  : PROTO_FRAME_STDERR;
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
	} else if (strcmp(t, "exit") == 0) {
		f.type = PROTO_FRAME_EXIT;
		it = cJSON_GetObjectItemCaseSensitive(obj, "code");
		if (pj_num_range(it, INT32_MIN, INT32_MAX, &v) < 0)
			goto out;
		f.code = (int32_t)v;
		/* Clients default a missing flag to false (doc/protocol-v1.md 3.6). */
		if (pj_bool(obj, "truncated", false, &f.truncated) == -EINVAL)
			goto out;
	} else if (strcmp(t, "error") == 0) {
		f.type = PROTO_FRAME_ERROR;
		if (pj_str(obj, "code", true, &s) < 0)
			goto out;
		rc = pj_dup(s, &f.err_code);
		if (rc < 0)
			goto out;
		rc = -EBADMSG;
		if (pj_str(obj, "message", true, &s) < 0)
			goto out;
		rc = pj_dup(s, &f.err_message);
		if (rc < 0)
			goto out;
	} else {
		goto out;
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
	rc = frame_from_json(root, out);
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

int proto_job_id_decode(const char *p, size_t n,
			char job_id[PROTO_JOB_ID_MAX + 1])
{
	char id[PROTO_JOB_ID_MAX + 1];
	cJSON *root;
	int err = 0, rc;

	root = pj_parse_object(p, n, &err);
	if (root == NULL)
		return err;
	rc = copy_job_id(root, id);
	cJSON_Delete(root);
	if (rc == 0)
		memcpy(job_id, id, sizeof(id));
	return rc;
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

int proto_job_poll_req_decode(const char *p, size_t n,
			      struct proto_job_poll_req *out)
{
	struct proto_job_poll_req r;
	cJSON *root;
	int err = 0, rc;

	root = pj_parse_object(p, n, &err);
	if (root == NULL)
		return err;
	memset(&r, 0, sizeof(r));
	rc = copy_job_id(root, r.job_id);
	if (rc < 0)
		goto out;
	rc = pj_u64(root, "sinceSeq", false, &r.since_seq);
	if (rc == 0)
		r.has_since = true;
	else if (rc != -ENOENT)
		goto out;
	rc = pj_u64(root, "waitMs", false, &r.wait_ms);
	if (rc < 0 && rc != -ENOENT)
		goto out;
	rc = pj_u64(root, "maxBytes", false, &r.max_bytes);
	if (rc < 0 && rc != -ENOENT)
		goto out;
	*out = r;
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

/* ---- poll answers -------------------------------------------------------- */

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
		rc = frame_json(f, out);
	return rc;
}

int proto_job_poll_encode_tail(const struct proto_job_poll *p, struct buf *out)
{
	int rc = buf_append_str(out, "]");

	if (rc == 0 && p->has_exit)
		rc = buf_printf(out,
				",\"exitCode\":%" PRId32 ",\"truncated\":%s",
				p->exit_code, p->truncated ? "true" : "false");
	if (rc == 0 && p->has_error) {
		rc = buf_append_str(out, ",\"error\":{\"code\":");
		if (rc == 0)
			rc = proto_json_string(out,
					       p->err_code ? p->err_code : "");
		if (rc == 0)
			rc = buf_append_str(out, ",\"message\":");
		if (rc == 0)
			rc = proto_json_string(
				out, p->err_message ? p->err_message : "");
		if (rc == 0)
			rc = buf_append_str(out, "}");
	}
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
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->nframes; i++)
		proto_frame_cleanup(&p->frames[i]);
	free(p->frames);
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

/* At an object: the value of its first member named key, as [*vs, *ve).
 * -ENOENT when there is none, -EINVAL when the text is not an object. */
static int js_member(const char *p, size_t n, const char *key, const char **vs,
		     const char **ve)
{
	struct jscan s = {p, p + n};
	char k[JS_KEY_MAX];

	js_ws(&s);
	if (s.p >= s.end || *s.p != '{')
		return -EINVAL;
	s.p++;
	for (;;) {
		js_ws(&s);
		if (s.p >= s.end)
			return -EINVAL;
		if (*s.p == '}')
			return -ENOENT;
		if (*s.p == ',') {
			s.p++;
			continue;
		}
		if (*s.p != '"')
			return -EINVAL;
		js_string(&s, k);
		js_ws(&s);
		if (s.p >= s.end || *s.p != ':')
			return -EINVAL;
		s.p++;
		js_ws(&s);
		if (strcmp(k, key) == 0) {
			*vs = s.p;
			js_skip(&s, 1);
			*ve = s.p;
			return 0;
		}
		js_skip(&s, 1);
	}
}

/* The answer without its frames: the members other than frames. */
static int poll_tail_from_json(const cJSON *root, struct proto_job_poll *r)
{
	const cJSON *it, *e;
	const char *s;
	double v;
	int rc;

	rc = pj_bool(root, "running", true, &r->running);
	if (rc < 0)
		return rc;
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "frames")))
		return -EINVAL;
	it = cJSON_GetObjectItemCaseSensitive(root, "exitCode");
	if (it != NULL && !cJSON_IsNull(it)) {
		rc = pj_num_range(it, INT32_MIN, INT32_MAX, &v);
		if (rc < 0)
			return rc;
		r->has_exit = true;
		r->exit_code = (int32_t)v;
	}
	rc = pj_bool(root, "truncated", false, &r->truncated);
	if (rc == -EINVAL)
		return rc;
	e = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (e != NULL && !cJSON_IsNull(e)) {
		if (!cJSON_IsObject(e) || pj_str(e, "code", true, &s) < 0)
			return -EINVAL;
		rc = pj_dup(s, &r->err_code);
		if (rc < 0)
			return rc;
		rc = pj_str(e, "message", true, &s);
		if (rc < 0)
			return rc;
		rc = pj_dup(s, &r->err_message);
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

int proto_job_poll_decode_each(const char *p, size_t n, proto_frame_fn *fn,
			       void *arg, struct proto_job_poll *out)
{
	struct proto_job_poll r;
	struct buf skel = BUF_INIT(0);
	const char *vs = NULL, *ve = NULL;
	struct jscan s;
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
	if (rc < 0)
		goto out;
	/* [ element (, element)* ] with nothing else between them. */
	s.p = vs + 1;
	s.end = ve;
	js_ws(&s);
	if (s.p < s.end && *s.p == ']')
		s.p++;
	else
		for (;;) {
			const char *es = s.p;
			struct proto_frame f;
			cJSON *fo;

			if (s.p >= s.end || *s.p != '{') {
				rc = -EINVAL;
				goto out;
			}
			js_skip(&s, 1);
			fo = pj_parse(es, (size_t)(s.p - es), &err);
			if (fo == NULL) {
				rc = err == -ENOMEM ? err : -EINVAL;
				goto out;
			}
			rc = frame_from_json(fo, &f);
			cJSON_Delete(fo);
			if (rc < 0) {
				if (rc != -ENOMEM)
					rc = -EINVAL;
				goto out;
			}
			if (f.type != PROTO_FRAME_STDOUT &&
			    f.type != PROTO_FRAME_STDERR) {
				proto_frame_cleanup(&f);
				rc = -EINVAL;
				goto out;
			}
			rc = fn(arg, &f);
			proto_frame_cleanup(&f);
			if (rc < 0)
				goto out;
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
			rc = -EINVAL;
			goto out;
		}
	js_ws(&s);
	if (s.p != s.end) {
		rc = -EINVAL;
		goto out;
	}
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
	size_t i;
	int rc;

	rc = proto_job_poll_decode_each(p, n, collect_frame, &l, &r);
	if (rc < 0) {
		for (i = 0; i < l.n; i++)
			proto_frame_cleanup(&l.v[i]);
		free(l.v);
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

int proto_job_list_encode_head(struct buf *out)
{
	return buf_append_str(out, "{\"jobs\":[");
}

int proto_job_list_encode_entry(const struct proto_job_info *ji, bool first,
				struct buf *out)
{
	size_t i;
	int rc = first ? 0 : buf_append_str(out, ",");

	if ((unsigned)ji->state >= sizeof(job_states) / sizeof(job_states[0]))
		return -EINVAL;
	if (rc == 0)
		rc = buf_append_str(out, "{\"jobId\":");
	if (rc == 0)
		rc = proto_json_string(out, ji->job_id);
	if (rc == 0)
		rc = buf_append_str(out, ",\"command\":[");
	for (i = 0; rc == 0 && i < ji->argc; i++) {
		if (i > 0)
			rc = buf_append_str(out, ",");
		if (rc == 0)
			rc = proto_json_string(out, ji->argv[i]);
	}
	if (rc == 0)
		rc = buf_append_str(out, "],\"cwd\":");
	if (rc == 0)
		rc = ji->cwd ? proto_json_string(out, ji->cwd)
			     : buf_append_str(out, "null");
	if (rc == 0)
		rc = buf_append_str(out, ",\"env\":[");
	for (i = 0; rc == 0 && i < ji->envc; i++) {
		const char *e = ji->env[i];
		size_t klen = strcspn(e, "=");
		char *key = strndup(e, klen);

		if (key == NULL)
			return -ENOMEM;
		if (i > 0)
			rc = buf_append_str(out, ",");
		if (rc == 0)
			rc = proto_json_string(out, key);
		free(key);
	}
	if (rc == 0)
		rc = buf_printf(
			out,
			"],\"timeoutMs\":%" PRIu64 ",\"startedAtMs\":%" PRId64
			",\"state\":\"%s\",\"flowControl\":%s",
			ji->timeout_ms, ji->started_ms, job_states[ji->state],
			ji->flow ? "true" : "false");
	if (rc == 0 && ji->state != PROTO_JOB_RUNNING)
		rc = buf_printf(out, ",\"endedAtMs\":%" PRId64, ji->ended_ms);
	if (rc == 0 && ji->state == PROTO_JOB_EXITED)
		rc = buf_printf(out, ",\"exitCode\":%" PRId32, ji->exit_code);
	if (rc == 0 && ji->state == PROTO_JOB_FAILED) {
		rc = buf_append_str(out, ",\"error\":{\"code\":");
		if (rc == 0)
			rc = proto_json_string(out, ji->err_code ? ji->err_code
								 : "");
		if (rc == 0)
			rc = buf_append_str(out, ",\"message\":");
		if (rc == 0)
			rc = proto_json_string(
				out, ji->err_message ? ji->err_message : "");
		if (rc == 0)
			rc = buf_append_str(out, "}");
	}
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}

int proto_job_list_encode_tail(bool complete, struct buf *out)
{
	return buf_printf(out, "],\"complete\":%s}",
			  complete ? "true" : "false");
}

void proto_job_info_cleanup(struct proto_job_info *ji)
{
	if (ji == NULL)
		return;
	free_strv(ji->argv, ji->argc);
	free_strv(ji->env, ji->envc);
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

/* A JSON array of strings into a NULL-terminated heap vector. */
static int str_array(const cJSON *a, size_t max, char ***out, size_t *n)
{
	const cJSON *it;
	size_t count = 0;
	char **v;

	if (!cJSON_IsArray(a))
		return -EINVAL;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsString(it) || it->valuestring == NULL)
			return -EINVAL;
		count++;
	}
	if (count > max)
		return -EINVAL;
	v = calloc(count + 1, sizeof(*v));
	if (v == NULL)
		return -ENOMEM;
	*out = v;
	*n = 0;
	cJSON_ArrayForEach(it, a)
	{
		v[*n] = strdup(it->valuestring);
		if (v[*n] == NULL)
			return -ENOMEM;
		(*n)++;
	}
	return 0;
}

static int job_info_from_json(const cJSON *o, struct proto_job_info *ji)
{
	const cJSON *e;
	const char *s;
	uint64_t u;
	int64_t t;
	double v;
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
	rc = str_array(cJSON_GetObjectItemCaseSensitive(o, "command"),
		       PROTO_EXEC_MAX_ARGS, &ji->argv, &ji->argc);
	if (rc < 0)
		return rc;
	rc = pj_str(o, "cwd", false, &s);
	if (rc == 0)
		rc = pj_dup(s, &ji->cwd);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	rc = str_array(cJSON_GetObjectItemCaseSensitive(o, "env"),
		       PROTO_EXEC_MAX_ENV, &ji->env, &ji->envc);
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
	for (u = 0; u < sizeof(job_states) / sizeof(job_states[0]); u++)
		if (strcmp(s, job_states[u]) == 0)
			break;
	if (u == sizeof(job_states) / sizeof(job_states[0]))
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
	if (ji->state == PROTO_JOB_EXITED) {
		rc = pj_num_range(
			cJSON_GetObjectItemCaseSensitive(o, "exitCode"),
			INT32_MIN, INT32_MAX, &v);
		if (rc < 0)
			return -EINVAL;
		ji->exit_code = (int32_t)v;
	} else if (ji->state == PROTO_JOB_FAILED) {
		e = cJSON_GetObjectItemCaseSensitive(o, "error");
		if (!cJSON_IsObject(e) || pj_str(e, "code", true, &s) < 0)
			return -EINVAL;
		rc = pj_dup(s, &ji->err_code);
		if (rc == 0)
			rc = pj_str(e, "message", true, &s);
		if (rc == 0)
			rc = pj_dup(s, &ji->err_message);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int proto_job_list_decode(const char *p, size_t n, struct proto_job_list *out)
{
	struct proto_job_list l;
	const cJSON *jobs, *it;
	cJSON *root;
	size_t count;
	int err = 0, rc;

	root = pj_parse_object(p, n, &err);
	if (root == NULL)
		return err;
	memset(&l, 0, sizeof(l));
	rc = -EINVAL;
	jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs");
	if (!cJSON_IsArray(jobs))
		goto out;
	rc = pj_bool(root, "complete", true, &l.complete);
	if (rc < 0)
		goto out;
	count = (size_t)cJSON_GetArraySize(jobs);
	l.jobs = calloc(count ? count : 1, sizeof(*l.jobs));
	if (l.jobs == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	cJSON_ArrayForEach(it, jobs)
	{
		rc = job_info_from_json(it, &l.jobs[l.n]);
		l.n++;
		if (rc < 0) {
			if (rc != -ENOMEM)
				rc = -EINVAL;
			goto out;
		}
	}
	*out = l;
	memset(&l, 0, sizeof(l));
	rc = 0;
out:
	proto_job_list_cleanup(&l);
	cJSON_Delete(root);
	return rc;
}
