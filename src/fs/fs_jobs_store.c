/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs_store: what the mount keeps about the jobs it started, with no
 * FUSE and no agent in sight: each stream's output (memory first, then an
 * unlinked spill file, bounded), the job records with their end state and
 * the text of their cmd, status and exit files, the parsing of what is
 * written to exec, and the per-sandbox table with its ids, jobs/latest
 * and the eviction of the oldest finished jobs. It does not poll, start or
 * cancel anything (fs_jobs.c does).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fdio.h"
#include "common/fileio.h"
#include "common/proto.h"
#include "common/xalloc.h"
#include "fs/fs_jobs_i.h"

/* ---- the output store ---------------------------------------------------- */

void fs_store_init(struct fs_store *s, const char *dir, size_t mem_max,
		   uint64_t max)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->dir = dir;
	s->mem_max = mem_max;
	s->max = max;
}

void fs_store_cleanup(struct fs_store *s)
{
	if (s == NULL)
		return;
	fdio_close(s->fd);
	free(s->mem);
	fs_store_init(s, s->dir, s->mem_max, s->max);
}

static void mem_append(struct fs_store *s, const char *p, size_t n)
{
	if (s->mem_len + n > s->mem_cap) {
		size_t cap = s->mem_cap ? s->mem_cap : 4096;

		while (cap < s->mem_len + n)
			cap *= 2;
		if (cap > s->mem_max)
			cap = s->mem_max;
		s->mem = xrealloc(s->mem, cap);
		s->mem_cap = cap;
	}
	memcpy(s->mem + s->mem_len, p, n);
	s->mem_len += n;
}

int fs_store_append(struct fs_store *s, const void *p, size_t n)
{
	const char *c = p;
	size_t take, mem_len = s->mem_len;
	int rc;

	if (n == 0)
		return 0;
	if ((uint64_t)n > s->max - s->size)
		return -EFBIG;
	/* The memory part fills first; only then does the file start, so
	 * the file holds exactly the bytes from mem_max on. */
	take = s->size < s->mem_max ? (size_t)(s->mem_max - s->size) : 0;
	if (take > n)
		take = n;
	if (take > 0) {
		mem_append(s, c, take);
		c += take;
	}
	if (n > take) {
		if (s->fd < 0) {
			rc = file_open_unlinked(s->dir, ".sandboxfs-job-");
			if (rc < 0)
				goto fail;
			s->fd = rc;
		}
		/* Whatever part reached the file is past size, so it is
		 * never read, and the next try writes it again. */
		rc = fdio_pwrite_all(s->fd, c, n - take,
				     s->size + take - s->mem_max);
		if (rc < 0)
			goto fail;
	}
	s->size += n;
	return 0;
fail:
	s->mem_len = mem_len;
	return rc;
}

int fs_store_skip(struct fs_store *s, uint64_t n)
{
	static const char zeros[4096];
	uint64_t off = s->size;

	if (n == 0)
		return 0;
	if (n > s->max - s->size)
		return -EFBIG;
	/* The memory part has no holes: it holds zeros there. */
	while (s->size < s->mem_max && n > 0) {
		size_t take = s->mem_max - s->size < sizeof(zeros)
				      ? (size_t)(s->mem_max - s->size)
				      : sizeof(zeros);

		if (take > n)
			take = (size_t)n;
		mem_append(s, zeros, take);
		s->size += take;
		n -= take;
	}
	s->size += n;
	if (s->ngaps > 0 &&
	    s->gaps[s->ngaps - 1].off + s->gaps[s->ngaps - 1].len >= off) {
		s->gaps[s->ngaps - 1].len = s->size - s->gaps[s->ngaps - 1].off;
	} else if (s->ngaps == FS_STORE_GAPS) {
		s->gaps[s->ngaps - 1].len = s->size - s->gaps[s->ngaps - 1].off;
	} else {
		s->gaps[s->ngaps].off = off;
		s->gaps[s->ngaps].len = s->size - off;
		s->ngaps++;
	}
	return 0;
}

int fs_store_read(const struct fs_store *s, void *dst, size_t n, uint64_t off,
		  size_t *got)
{
	char *d = dst;
	size_t done = 0, i;
	int rc = 0;

	if (off >= s->size) {
		*got = 0;
		return 0;
	}
	if ((uint64_t)n > s->size - off)
		n = (size_t)(s->size - off);
	for (i = 0; i < s->ngaps; i++) {
		const struct fs_gap *g = &s->gaps[i];

		if (off >= g->off && off < g->off + g->len)
			return -EIO;
		if (g->off > off && g->off - off < n)
			n = (size_t)(g->off - off);
	}
	if (off < s->mem_len) {
		size_t take = s->mem_len - (size_t)off;

		if (take > n)
			take = n;
		memcpy(d, s->mem + off, take);
		done = take;
	}
	while (done < n) {
		uint64_t at = off + done - s->mem_max;
		ssize_t r = pread(s->fd, d + done, n - done, (off_t)at);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		if (r == 0) {
			rc = -EIO;
			goto out;
		}
		done += (size_t)r;
	}
	*got = done;
out:
	return rc;
}

/* ---- commands ------------------------------------------------------------ */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

/*
 * proto_exec_req_decode requires a timeout (timeoutMs or deadlineMs); a
 * request written to exec may leave it out. Decode again with a
 * deadlineMs appended: the decoder prefers timeoutMs, and the first of
 * duplicate keys wins, so an appended field only fills in a missing (or
 * null) timeout and never overrides what the user wrote.
 */
static int decode_json(const char *p, size_t n, uint64_t default_timeout_ms,
		       struct proto_exec_req *out)
{
	struct buf b = BUF_INIT(0);
	int rc;

	rc = proto_exec_req_decode(p, n, out);
	if (rc != -EINVAL)
		goto out;
	if (n < 2 || p[n - 1] != '}')
		goto out;
	rc = buf_append(&b, p, n - 1);
	if (rc == 0)
		rc = buf_printf(&b, ",\"deadlineMs\":%" PRIu64 "}",
				default_timeout_ms);
	if (rc == 0)
		rc = proto_exec_req_decode(b.data, b.len, out);
out:
	buf_cleanup(&b);
	return rc;
}

static void say(char *why, size_t whysz, const char *text)
{
	if (why != NULL && whysz > 0)
		snprintf(why, whysz, "%s", text);
}

int fs_cmd_parse(const char *text, size_t len, uint64_t default_timeout_ms,
		 struct fs_cmd *out, char *why, size_t whysz)
{
	struct fs_cmd c;
	const char *invalid;
	int rc;

	memset(&c, 0, sizeof(c));
	while (len > 0 && is_space(text[0])) {
		text++;
		len--;
	}
	while (len > 0 && is_space(text[len - 1]))
		len--;
	if (len == 0) {
		say(why, whysz, "the request is empty");
		return -EINVAL;
	}
	if (len > FS_CMD_MAX) {
		say(why, whysz, "the request is longer than 1 MiB");
		return -EFBIG;
	}
	if (default_timeout_ms == 0)
		default_timeout_ms = 1;
	if (text[0] == '{') {
		rc = decode_json(text, len, default_timeout_ms, &c.req);
		if (rc < 0) {
			if (rc == -EBADMSG)
				say(why, whysz,
				    "the request is not valid JSON");
			else if (rc == -EFBIG)
				say(why, whysz,
				    "the JSON request has too many arguments "
				    "or environment entries");
			else if (rc == -ENOMEM)
				say(why, whysz, "out of memory");
			else
				say(why, whysz,
				    "the JSON request does not decode (it "
				    "needs \"command\", an array of strings; "
				    "\"env\" an object of strings; "
				    "\"timeoutMs\" a number)");
			if (rc != -ENOMEM)
				rc = -EINVAL;
			goto out;
		}
		invalid = proto_exec_req_validate(&c.req);
		if (invalid == NULL && (c.req.flags & PROTO_EXEC_ARG_NUL))
			invalid = "a command element holds a NUL byte";
		if (invalid == NULL && (c.req.flags & PROTO_EXEC_CWD_NUL))
			invalid = "the working directory holds a NUL byte";
		if (invalid != NULL) {
			if (why != NULL && whysz > 0)
				snprintf(why, whysz,
					 "the JSON request is invalid: %s",
					 invalid);
			rc = -EINVAL;
			goto out;
		}
	} else {
		if (memchr(text, '\0', len) != NULL) {
			say(why, whysz, "the shell script holds a NUL byte");
			rc = -EINVAL;
			goto out;
		}
		c.line = xstrndup(text, len);
		c.req.argv = xcalloc(4, sizeof(char *));
		c.req.argv[0] = xstrdup("/bin/sh");
		c.req.argv[1] = xstrdup("-c");
		c.req.argv[2] = xstrdup(c.line);
		c.req.argc = 3;
		c.req.env = xcalloc(1, sizeof(char *));
		c.req.timeout_ms = default_timeout_ms;
	}
	*out = c;
	memset(&c, 0, sizeof(c));
	rc = 0;
out:
	fs_cmd_cleanup(&c);
	return rc;
}

void fs_cmd_cleanup(struct fs_cmd *c)
{
	if (c == NULL)
		return;
	proto_exec_req_cleanup(&c->req);
	free(c->line);
	memset(c, 0, sizeof(*c));
}

static int shell_quote(struct buf *out, const char *s)
{
	int rc = buf_append_str(out, "'");

	for (; rc == 0 && *s != '\0'; s++) {
		if (*s == '\'')
			rc = buf_append_str(out, "'\\''");
		else
			rc = buf_append(out, s, 1);
	}
	if (rc == 0)
		rc = buf_append_str(out, "'");
	return rc;
}

static bool shell_name(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || isdigit((unsigned char)s[0]))
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

/* Append the n strings of v, each written by put, with sep between. */
static int put_words(struct buf *out, char *const *v, size_t n, const char *sep,
		     int (*put)(struct buf *, const char *))
{
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < n; i++) {
		if (i > 0)
			rc = buf_append_str(out, sep);
		if (rc == 0)
			rc = put(out, v[i]);
	}
	return rc;
}

int fs_cmd_shell(const struct fs_cmd *c, struct buf *out)
{
	size_t i;
	int rc = 0;

	if (c->line != NULL)
		return buf_append_str(out, c->line);
	for (i = 0; rc == 0 && i < c->req.envc; i++) {
		const char *e = c->req.env[i];
		const char *eq = strchr(e, '=');

		if (eq == NULL || !shell_name(e, (size_t)(eq - e))) {
			rc = -EINVAL;
			break;
		}
		rc = buf_append(out, e, (size_t)(eq - e) + 1);
		if (rc == 0)
			rc = shell_quote(out, eq + 1);
		if (rc == 0)
			rc = buf_append_str(out, " ");
	}
	if (rc == 0)
		rc = put_words(out, c->req.argv, c->req.argc, " ", shell_quote);
	return rc;
}

int fs_cmd_json(const struct fs_cmd *c, const struct timespec *started,
		struct buf *out)
{
	struct tm tm;
	char when[32];
	size_t i;
	int rc;

	if (gmtime_r(&started->tv_sec, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(when, sizeof(when), "1970-01-01T00:00:00Z");
	rc = buf_append_str(out, "{\"command\":[");
	if (rc == 0)
		rc = put_words(out, c->req.argv, c->req.argc, ",",
			       proto_json_string);
	if (rc == 0)
		rc = buf_append_str(out, "],\"cwd\":");
	if (rc == 0)
		rc = c->req.cwd != NULL ? proto_json_string(out, c->req.cwd)
					: buf_append_str(out, "null");
	if (rc == 0)
		rc = buf_append_str(out, ",\"env\":[");
	for (i = 0; rc == 0 && i < c->req.envc; i++) {
		const char *e = c->req.env[i];
		const char *eq = strchr(e, '=');
		char *key =
			xstrndup(e, eq != NULL ? (size_t)(eq - e) : strlen(e));

		if (i > 0)
			rc = buf_append_str(out, ",");
		if (rc == 0)
			rc = proto_json_string(out, key);
		free(key);
	}
	if (rc == 0)
		rc = buf_printf(out,
				"],\"timeoutMs\":%" PRIu64
				",\"startedAt\":\"%s\"}\n",
				c->req.timeout_ms, when);
	return rc;
}

/* ---- jobs ---------------------------------------------------------------- */

struct fs_job *fs_job_new(const char *name, const char *agent_id,
			  const char *cmd, size_t cmd_len, uint64_t timeout_ms,
			  const char *dir, size_t mem_max)
{
	struct fs_job *j = xcalloc(1, sizeof(*j));

	strlcpy_s(j->name, name, sizeof(j->name));
	strlcpy_s(j->agent_id, agent_id, sizeof(j->agent_id));
	j->cmd = xmalloc(cmd_len + 1);
	memcpy(j->cmd, cmd, cmd_len);
	j->cmd[cmd_len] = '\0';
	j->cmd_len = cmd_len;
	j->timeout_ms = timeout_ms;
	clock_gettime(CLOCK_REALTIME, &j->started);
	j->started_ms = clock_mono_ms();
	j->changed = j->started;
	j->refs = 1;
	pthread_mutex_init(&j->lock, NULL);
	clock_cond_init(&j->cond);
	j->state = FS_JOB_ST_RUNNING;
	/* Started here: known to run. An adopted job is marked otherwise. */
	j->followed = true;
	j->synced = true;
	j->last_ok_ms = j->started_ms;
	fs_store_init(&j->out, dir, mem_max, FS_STORE_MAX);
	fs_store_init(&j->err, dir, mem_max, FS_STORE_MAX);
	return j;
}

void fs_job_ref(struct fs_job *j)
{
	__atomic_add_fetch(&j->refs, 1, __ATOMIC_ACQ_REL);
}

void fs_job_unref(struct fs_job *j)
{
	if (j == NULL || __atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	fs_store_cleanup(&j->out);
	fs_store_cleanup(&j->err);
	pthread_mutex_destroy(&j->lock);
	pthread_cond_destroy(&j->cond);
	free(j->err_code);
	free(j->err_message);
	free(j->cmd);
	free(j);
}

void fs_job_end(struct fs_job *j, enum fs_job_state state, int32_t exit_code,
		const char *code, const char *message)
{
	if (j->state != FS_JOB_ST_RUNNING || state == FS_JOB_ST_RUNNING)
		return;
	j->state = state;
	j->exit_code = exit_code;
	if (state == FS_JOB_ST_FAILED) {
		j->err_code = xstrdup(code != NULL && *code ? code : "error");
		j->err_message = xstrndup(message != NULL ? message : "",
					  FS_JOB_MSG_MAX);
	}
	clock_gettime(CLOCK_REALTIME, &j->changed);
	pthread_cond_broadcast(&j->cond);
}

int fs_job_take_frame(struct fs_job *j, const struct proto_frame *f)
{
	const unsigned char *data = f->data;
	size_t len = f->len;
	struct fs_store *s;
	int rc;

	if (j->has_seq && f->seq <= j->last_seq)
		return 0;
	if (f->type == PROTO_FRAME_STDOUT)
		s = &j->out;
	else if (f->type == PROTO_FRAME_STDERR)
		s = &j->err;
	else
		return 0;
	if (f->has_off && f->off > s->size) {
		/* The agent had dropped what came before (another client
		 * had taken it, or this mount did before a remount). */
		rc = fs_store_skip(s, f->off - s->size);
		if (rc < 0)
			goto fail;
		j->truncated = true;
	} else if (f->has_off && f->off < s->size) {
		uint64_t dup = s->size - f->off;

		if (dup >= len) {
			len = 0;
		} else {
			data += dup;
			len -= (size_t)dup;
		}
	}
	rc = fs_store_append(s, data, len);
	if (rc < 0)
		goto fail;
	j->has_seq = true;
	j->last_seq = f->seq;
	j->keep_err = 0;
	if (len == 0)
		return 0;
	clock_gettime(CLOCK_REALTIME, &j->changed);
	pthread_cond_broadcast(&j->cond);
	return 1;
fail:
	j->keep_err = -rc;
	pthread_cond_broadcast(&j->cond);
	return rc;
}

bool fs_job_take_end(struct fs_job *j, const struct proto_job_poll *p)
{
	if (p->running || j->state != FS_JOB_ST_RUNNING)
		return false;
	if (p->truncated)
		j->truncated = true;
	if (p->has_bytes) {
		/* Bytes at the end this mount never got are a gap too. */
		if (p->stdout_bytes > j->out.size &&
		    fs_store_skip(&j->out, p->stdout_bytes - j->out.size) == 0)
			j->truncated = true;
		if (p->stderr_bytes > j->err.size &&
		    fs_store_skip(&j->err, p->stderr_bytes - j->err.size) == 0)
			j->truncated = true;
	}
	if (p->has_exit)
		fs_job_end(j, FS_JOB_ST_EXITED, p->exit_code, NULL, NULL);
	else if (p->has_error && p->err_code != NULL &&
		 strcmp(p->err_code, "cancelled") == 0)
		fs_job_end(j, FS_JOB_ST_CANCELLED, 0, NULL, NULL);
	else if (p->has_error)
		fs_job_end(j, FS_JOB_ST_FAILED, 0, p->err_code, p->err_message);
	else
		fs_job_end(j, FS_JOB_ST_UNKNOWN, 0, NULL, NULL);
	return true;
}

bool fs_job_apply_poll(struct fs_job *j, const struct proto_job_poll *p)
{
	bool changed = false;
	size_t i;
	int rc;

	for (i = 0; i < p->nframes; i++) {
		rc = fs_job_take_frame(j, &p->frames[i]);
		if (rc < 0)
			return changed;
		if (rc > 0)
			changed = true;
	}
	return fs_job_take_end(j, p) || changed;
}

size_t fs_job_status_line(const struct fs_job *j, char *buf, size_t size)
{
	static const char suffix[] = " (output truncated)";
	enum fs_job_state st = j->state;
	int n = 0;
	size_t len, i, room;

	if (size < 2) {
		if (size == 1)
			buf[0] = '\0';
		return 0;
	}
	/* A job the agent has not told about for too long: nobody knows. */
	if (st == FS_JOB_ST_RUNNING && j->stale)
		st = FS_JOB_ST_UNKNOWN;
	switch (st) {
	case FS_JOB_ST_RUNNING:
		n = snprintf(buf, size, "running");
		break;
	case FS_JOB_ST_EXITED:
		n = snprintf(buf, size, "exited %" PRId32, j->exit_code);
		break;
	case FS_JOB_ST_FAILED:
		n = snprintf(buf, size, "failed %s: %.*s", j->err_code,
			     (int)FS_JOB_MSG_MAX, j->err_message);
		break;
	case FS_JOB_ST_CANCELLED:
		n = snprintf(buf, size, "cancelled");
		break;
	case FS_JOB_ST_UNKNOWN:
		n = snprintf(buf, size, "unknown");
		break;
	}
	len = n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
	/* The agent's words, kept on one line and ended by one newline. */
	for (i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = ' ';
	while (len > 0 && buf[len - 1] == ' ')
		len--;
	room = size - 1 - len;
	if (j->truncated && room > sizeof(suffix)) {
		memcpy(buf + len, suffix, sizeof(suffix) - 1);
		len += sizeof(suffix) - 1;
	}
	if (len >= size - 1)
		len = size - 2;
	buf[len++] = '\n';
	buf[len] = '\0';
	return len;
}

int fs_job_exit_text(const struct fs_job *j, char *buf, size_t size)
{
	int n;

	switch (j->state) {
	case FS_JOB_ST_RUNNING:
		return j->stale ? -EIO : -EAGAIN;
	case FS_JOB_ST_EXITED:
		n = snprintf(buf, size, "%" PRId32 "\n", j->exit_code);
		return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
	case FS_JOB_ST_CANCELLED:
		return -ECANCELED;
	case FS_JOB_ST_FAILED:
	case FS_JOB_ST_UNKNOWN:
		break;
	}
	return -EIO;
}

bool fs_job_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > FS_JOB_NAME_MAX || strcmp(s, ".") == 0 ||
	    strcmp(s, "..") == 0 || strcmp(s, "latest") == 0)
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* ---- the job table ------------------------------------------------------- */

struct fs_jobs *fs_jobs_new(const char *spool_dir, size_t max, size_t mem_max)
{
	struct fs_jobs *js = xcalloc(1, sizeof(*js));
	const char *tmp = getenv("TMPDIR");

	if (spool_dir == NULL || *spool_dir == '\0')
		spool_dir = tmp != NULL && *tmp != '\0' ? tmp : "/tmp";
	js->spool_dir = xstrdup(spool_dir);
	js->max = max;
	js->mem_max = mem_max;
	pthread_mutex_init(&js->lock, NULL);
	clock_cond_init(&js->idle);
	return js;
}

void fs_jobs_destroy(struct fs_jobs *js)
{
	size_t i;

	if (js == NULL)
		return;
	for (i = 0; i < js->n; i++)
		fs_job_unref(js->v[i]);
	free(js->v);
	proto_job_list_cleanup(&js->listing);
	pthread_mutex_destroy(&js->lock);
	pthread_cond_destroy(&js->idle);
	free(js->spool_dir);
	free(js);
}

static ssize_t find_locked(struct fs_jobs *js, const char *name)
{
	size_t i;

	for (i = 0; i < js->n; i++)
		if (strcmp(js->v[i]->name, name) == 0)
			return (ssize_t)i;
	return -1;
}

/* May the table forget it? An adopted job nobody follows can be found
 * in the agent's listing again. */
static bool ended(struct fs_job *j)
{
	bool e;

	pthread_mutex_lock(&j->lock);
	e = j->state != FS_JOB_ST_RUNNING || !j->followed;
	pthread_mutex_unlock(&j->lock);
	return e;
}

static void append_locked(struct fs_jobs *js, struct fs_job *j)
{
	size_t i;

	if (js->n == js->cap) {
		js->cap = js->cap ? js->cap * 2 : 16;
		js->v = xrealloc(js->v, js->cap * sizeof(*js->v));
	}
	fs_job_ref(j);
	js->v[js->n++] = j;
	/* Never the job just added, nor jobs/latest. */
	while (js->n > js->max) {
		for (i = 0; i + 1 < js->n; i++)
			if (ended(js->v[i]) &&
			    strcmp(js->v[i]->name, js->latest) != 0)
				break;
		if (i + 1 >= js->n)
			break; /* every older job still runs: keep them */
		fs_job_unref(js->v[i]);
		memmove(&js->v[i], &js->v[i + 1],
			(js->n - i - 1) * sizeof(*js->v));
		js->n--;
	}
}

int fs_jobs_add(struct fs_jobs *js, struct fs_job *j, const char *prefix)
{
	pthread_mutex_lock(&js->lock);
	/* The name is fixed from here on: no reader has the job yet. */
	while (!fs_job_name_ok(j->name) || find_locked(js, j->name) >= 0)
		snprintf(j->name, sizeof(j->name), "%s-%lu", prefix,
			 ++js->next);
	strlcpy_s(js->latest, j->name, sizeof(js->latest));
	append_locked(js, j);
	pthread_mutex_unlock(&js->lock);
	return 0;
}

struct fs_job *fs_jobs_adopt(struct fs_jobs *js, struct fs_job *j)
{
	struct fs_job *have;
	ssize_t i;

	pthread_mutex_lock(&js->lock);
	i = find_locked(js, j->name);
	if (i >= 0) {
		have = js->v[i];
	} else {
		append_locked(js, j);
		have = j;
	}
	fs_job_ref(have);
	pthread_mutex_unlock(&js->lock);
	return have;
}

struct fs_job *fs_jobs_find(struct fs_jobs *js, const char *name)
{
	struct fs_job *j = NULL;
	ssize_t i;

	pthread_mutex_lock(&js->lock);
	if (strcmp(name, "latest") == 0)
		name = js->latest;
	i = *name != '\0' ? find_locked(js, name) : -1;
	if (i >= 0) {
		j = js->v[i];
		fs_job_ref(j);
	}
	pthread_mutex_unlock(&js->lock);
	return j;
}

bool fs_jobs_latest(struct fs_jobs *js, char *buf, size_t size)
{
	bool have;

	pthread_mutex_lock(&js->lock);
	have = js->latest[0] != '\0';
	if (have)
		strlcpy_s(buf, js->latest, size);
	pthread_mutex_unlock(&js->lock);
	return have;
}

void fs_jobs_names(struct fs_jobs *js, char ***names, size_t *n)
{
	char **v;
	size_t i;

	pthread_mutex_lock(&js->lock);
	v = xcalloc(js->n + 1, sizeof(*v));
	for (i = 0; i < js->n; i++)
		v[i] = xstrdup(js->v[i]->name);
	*n = js->n;
	pthread_mutex_unlock(&js->lock);
	*names = v;
}
