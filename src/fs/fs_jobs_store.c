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
	if (s->fd >= 0)
		close(s->fd);
	free(s->mem);
	fs_store_init(s, s->dir, s->mem_max, s->max);
}

/* An unlinked file in dir: O_TMPFILE where the filesystem has it, else a
 * named file removed at once. Either way nothing is left behind. */
static int spill_open(const char *dir)
{
	char *tmpl;
	int fd, rc;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	tmpl = xasprintf("%s/.sandboxfs-job-XXXXXX", dir);
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	unlink(tmpl);
	rc = fd;
out:
	free(tmpl);
	return rc;
}

static int pwrite_all(int fd, const char *p, size_t n, uint64_t off)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
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
	uint64_t left;
	size_t take;
	int rc = 0;

	if (s->dropped)
		return -EFBIG;
	if (n == 0)
		return 0;
	left = s->size < s->max ? s->max - s->size : 0;
	if ((uint64_t)n > left) {
		rc = -EFBIG;
		n = (size_t)left;
	}
	/* The memory part fills first; only then does the file start, so
	 * the file holds exactly the bytes from mem_max on. */
	take = s->mem_len < s->mem_max ? s->mem_max - s->mem_len : 0;
	if (take > n)
		take = n;
	if (take > 0) {
		mem_append(s, c, take);
		s->size += take;
		c += take;
		n -= take;
	}
	if (n > 0) {
		int wrc;

		if (s->fd < 0) {
			wrc = spill_open(s->dir);
			if (wrc < 0) {
				rc = wrc;
				goto out;
			}
			s->fd = wrc;
		}
		wrc = pwrite_all(s->fd, c, n, s->size - s->mem_max);
		if (wrc < 0) {
			/* Whatever part of the chunk reached the file is
			 * not counted, so it is never read. */
			rc = wrc;
			goto out;
		}
		s->size += n;
	}
out:
	if (rc < 0)
		s->dropped = true;
	return rc;
}

int fs_store_read(const struct fs_store *s, void *dst, size_t n, uint64_t off,
		  size_t *got)
{
	char *d = dst;
	size_t done = 0;
	int rc = 0;

	if (off >= s->size) {
		*got = 0;
		return 0;
	}
	if ((uint64_t)n > s->size - off)
		n = (size_t)(s->size - off);
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

int fs_cmd_parse(const char *text, size_t len, uint64_t default_timeout_ms,
		 struct fs_cmd *out)
{
	struct fs_cmd c;
	int rc;

	memset(&c, 0, sizeof(c));
	while (len > 0 && is_space(text[0])) {
		text++;
		len--;
	}
	while (len > 0 && is_space(text[len - 1]))
		len--;
	if (len == 0)
		return -EINVAL;
	if (len > FS_CMD_MAX)
		return -EFBIG;
	if (default_timeout_ms == 0)
		default_timeout_ms = 1;
	if (text[0] == '{') {
		rc = decode_json(text, len, default_timeout_ms, &c.req);
		if (rc < 0) {
			if (rc != -ENOMEM)
				rc = -EINVAL;
			goto out;
		}
		if (proto_exec_req_validate(&c.req) != NULL ||
		    (c.req.flags & (PROTO_EXEC_ARG_NUL | PROTO_EXEC_CWD_NUL))) {
			rc = -EINVAL;
			goto out;
		}
	} else {
		if (memchr(text, '\0', len) != NULL) {
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
	for (i = 0; rc == 0 && i < c->req.argc; i++) {
		if (i > 0)
			rc = buf_append_str(out, " ");
		if (rc == 0)
			rc = shell_quote(out, c->req.argv[i]);
	}
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
	for (i = 0; rc == 0 && i < c->req.argc; i++) {
		if (i > 0)
			rc = buf_append_str(out, ",");
		if (rc == 0)
			rc = proto_json_string(out, c->req.argv[i]);
	}
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
	pthread_condattr_t ca;
	struct timespec now;

	strlcpy_s(j->name, name, sizeof(j->name));
	strlcpy_s(j->agent_id, agent_id, sizeof(j->agent_id));
	j->cmd = xmalloc(cmd_len + 1);
	memcpy(j->cmd, cmd, cmd_len);
	j->cmd[cmd_len] = '\0';
	j->cmd_len = cmd_len;
	j->timeout_ms = timeout_ms;
	clock_gettime(CLOCK_REALTIME, &j->started);
	clock_gettime(CLOCK_MONOTONIC, &now);
	j->started_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	j->changed = j->started;
	j->refs = 1;
	pthread_mutex_init(&j->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->cond, &ca);
	pthread_condattr_destroy(&ca);
	j->state = FS_JOB_ST_RUNNING;
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

bool fs_job_apply_poll(struct fs_job *j, const struct proto_job_poll *p)
{
	bool changed = false;
	size_t i;

	for (i = 0; i < p->nframes; i++) {
		const struct proto_frame *f = &p->frames[i];
		struct fs_store *s;

		if (j->has_seq && f->seq <= j->last_seq)
			continue;
		if (f->type == PROTO_FRAME_STDOUT)
			s = &j->out;
		else if (f->type == PROTO_FRAME_STDERR)
			s = &j->err;
		else
			continue;
		j->has_seq = true;
		j->last_seq = f->seq;
		/* A refused append marks the store as dropped; the rest of
		 * the job still follows. */
		if (fs_store_append(s, f->data, f->len) == 0 && f->len > 0)
			changed = true;
	}
	if (changed)
		clock_gettime(CLOCK_REALTIME, &j->changed);
	if (!p->running && j->state == FS_JOB_ST_RUNNING) {
		j->truncated = p->truncated;
		if (p->has_exit)
			fs_job_end(j, FS_JOB_ST_EXITED, p->exit_code, NULL,
				   NULL);
		else if (p->has_error && p->err_code != NULL &&
			 strcmp(p->err_code, "cancelled") == 0)
			fs_job_end(j, FS_JOB_ST_CANCELLED, 0, NULL, NULL);
		else if (p->has_error)
			fs_job_end(j, FS_JOB_ST_FAILED, 0, p->err_code,
				   p->err_message);
		else
			fs_job_end(j, FS_JOB_ST_UNKNOWN, 0, NULL, NULL);
		changed = true;
	} else if (changed) {
		pthread_cond_broadcast(&j->cond);
	}
	return changed;
}

size_t fs_job_status_line(const struct fs_job *j, char *buf, size_t size)
{
	int n = 0;
	size_t len, i;

	if (size < 2) {
		if (size == 1)
			buf[0] = '\0';
		return 0;
	}
	switch (j->state) {
	case FS_JOB_ST_RUNNING:
		n = snprintf(buf, size, "running\n");
		break;
	case FS_JOB_ST_EXITED:
		n = snprintf(buf, size, "exited %" PRId32 "\n", j->exit_code);
		break;
	case FS_JOB_ST_FAILED:
		n = snprintf(buf, size, "failed %s: %.*s", j->err_code,
			     (int)FS_JOB_MSG_MAX, j->err_message);
		break;
	case FS_JOB_ST_CANCELLED:
		n = snprintf(buf, size, "cancelled\n");
		break;
	case FS_JOB_ST_UNKNOWN:
		n = snprintf(buf, size, "unknown\n");
		break;
	}
	len = n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
	if (j->state != FS_JOB_ST_FAILED)
		return len;
	/* The agent's words, kept on one line and ended by one newline. */
	for (i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = ' ';
	while (len > 0 && buf[len - 1] == ' ')
		len--;
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
		return -EAGAIN;
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
	pthread_condattr_t ca;

	if (spool_dir == NULL || *spool_dir == '\0')
		spool_dir = tmp != NULL && *tmp != '\0' ? tmp : "/tmp";
	js->spool_dir = xstrdup(spool_dir);
	js->max = max;
	js->mem_max = mem_max;
	pthread_mutex_init(&js->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&js->idle, &ca);
	pthread_condattr_destroy(&ca);
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

static bool ended(struct fs_job *j)
{
	bool e;

	pthread_mutex_lock(&j->lock);
	e = j->state != FS_JOB_ST_RUNNING;
	pthread_mutex_unlock(&j->lock);
	return e;
}

int fs_jobs_add(struct fs_jobs *js, struct fs_job *j, const char *prefix)
{
	size_t i;

	pthread_mutex_lock(&js->lock);
	/* The name is fixed from here on: no reader has the job yet. */
	while (!fs_job_name_ok(j->name) || find_locked(js, j->name) >= 0)
		snprintf(j->name, sizeof(j->name), "%s-%lu", prefix,
			 ++js->next);
	if (js->n == js->cap) {
		js->cap = js->cap ? js->cap * 2 : 16;
		js->v = xrealloc(js->v, js->cap * sizeof(*js->v));
	}
	fs_job_ref(j);
	js->v[js->n++] = j;
	strlcpy_s(js->latest, j->name, sizeof(js->latest));
	while (js->n > js->max) {
		for (i = 0; i + 1 < js->n; i++)
			if (ended(js->v[i]))
				break;
		if (i + 1 >= js->n)
			break; /* every older job still runs: keep them */
		fs_job_unref(js->v[i]);
		memmove(&js->v[i], &js->v[i + 1],
			(js->n - i - 1) * sizeof(*js->v));
		js->n--;
	}
	pthread_mutex_unlock(&js->lock);
	return 0;
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
