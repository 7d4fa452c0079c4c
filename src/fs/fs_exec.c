/* SPDX-License-Identifier: MIT */
/*
 * fs_exec: MOUNT/<sandbox>/exec (SEMANTICS.md, "Jobs"): what is written
 * through one open file is one request, started as an agent job (or, in a
 * native session, run through the provider's native exec) when the writer
 * reads the job id back or the file is flushed, and recorded in the
 * sandbox's job table (fs_jobs_store.c), its poller started
 * (fs_jobs_poll.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/agent_client.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "fs/fs_i.h"
#include "fs/fs_jobs_i.h"
#include "fs/fs_jobs_run.h"

#define DEFAULT_JOB_TIMEOUT_S 86400L
/* Largest native exec output kept per stream. */
#define NATIVE_OUTPUT_MAX PROTO_MAX_TRANSFER_BYTES

static uint64_t default_timeout_ms(const struct sbfs *fs)
{
	long s = fs->o.job_timeout_s > 0 ? fs->o.job_timeout_s
					 : DEFAULT_JOB_TIMEOUT_S;

	return (uint64_t)s * 1000;
}

/* ---- starting a command -------------------------------------------------- */

/* A job that exists only here (native, unknown), not yet in the table. */
static struct fs_job *local_job(struct fs_jobs *js, const struct buf *cj,
				uint64_t timeout_ms)
{
	return fs_job_new("", "", cj->data, cj->len, timeout_ms, js->spool_dir,
			  js->mem_max);
}

/* A command whose outcome cannot be known: recorded as such, never sent
 * again. */
static int record_unknown(struct sbx *sb, struct fs_jobs *js,
			  const struct fs_cmd *cmd, const struct buf *cj,
			  const struct sbx_error *err, struct fs_job **out)
{
	struct fs_job *j = local_job(js, cj, cmd->req.timeout_ms);

	fs_job_end(j, FS_JOB_ST_UNKNOWN, 0, NULL, NULL);
	(void)fs_jobs_add(js, j, "unknown");
	(void)fs_jobs_fail(sb->fs, sb->id, "exec", "", err);
	*out = j;
	return -EIO;
}

/*
 * The agent answered and did not start the job. A refusal of the request
 * (4xx) is logged here, as a warning naming the sandbox (sbfs_fail would
 * keep EINVAL and ENOENT to debug); the running-jobs limit is EAGAIN.
 */
static int refused(struct sbx *sb, uint64_t max_running,
		   const struct sbx_error *err)
{
	char limit[64] = "";

	if (err->status == 429) {
		if (max_running > 0)
			snprintf(limit, sizeof(limit), " of %llu",
				 (unsigned long long)max_running);
		log_warn("sandbox %s: exec: refused: the sandbox already runs "
			 "its limit%s jobs; try again when one has ended (%s)",
			 sb->id, limit, err->reason);
		return -EAGAIN;
	}
	if (err->status >= 400 && err->status < 500) {
		log_warn("sandbox %s: exec: the agent refused the request: %s",
			 sb->id, err->reason);
		return sbx_error_errno(err);
	}
	return fs_jobs_fail(sb->fs, sb->id, "exec", "", err);
}

static int exec_agent(struct sbx *sb, struct fs_jobs *js,
		      const struct fs_cmd *cmd, const struct buf *cj, bool ext,
		      uint64_t max_running, struct fs_job **out)
{
	char jid[PROTO_JOB_ID_MAX + 1];
	struct sbx_error err;
	struct fs_job *j;
	int rc;

	sbx_error_clear(&err);
	rc = ac_job_start(sb->fs->t, sb->id, &cmd->req, jid, &err);
	if (rc < 0 && err.code == SBX_OUTCOME_UNKNOWN)
		return record_unknown(sb, js, cmd, cj, &err, out);
	if (rc < 0)
		return refused(sb, max_running, &err);
	/* The agent's id names the directory when it is a safe name. */
	j = fs_job_new(fs_job_name_ok(jid) ? jid : "", jid, cj->data, cj->len,
		       cmd->req.timeout_ms, js->spool_dir, js->mem_max);
	j->ext = ext;
	j->flow = cmd->req.flow;
	(void)fs_jobs_add(js, j, "job");
	log_debug("sandbox %s: job %s started", sb->id, j->name);
	fs_jobs_poller_start(js, j);
	*out = j;
	return 0;
}

/* A failure of a command that did start (an error frame's code, such as
 * timeoutExceeded), as opposed to a refusal or a broken transport. */
static bool command_failure(const struct sbx_error *e)
{
	return e->code == SBX_COMMAND_FAILED && e->failure[0] != '\0' &&
	       strcmp(e->failure, SBX_FAIL_AGENT_REFUSED) != 0 &&
	       strcmp(e->failure, SBX_FAIL_TRANSPORT_INVALID) != 0 &&
	       strcmp(e->failure, SBX_FAIL_GONE) != 0 &&
	       strcmp(e->failure, SBX_FAIL_INVALID_REQUEST) != 0;
}

static void store_all(const struct sbx *sb, struct fs_store *s,
		      const struct buf *b)
{
	int rc = b->len > 0 ? fs_store_append(s, b->data, b->len) : 0;

	if (rc < 0)
		log_warn("sandbox %s: exec: output past what the mount can "
			 "keep is dropped (%s)",
			 sb->id, strerror(-rc));
}

static int exec_native(struct sbx *sb, struct fs_jobs *js,
		       const struct fs_cmd *cmd, const struct buf *cj,
		       struct fs_job **out)
{
	struct provider *p = sb->fs->prov;
	struct provider_exec_result res;
	struct buf line = BUF_INIT(0);
	struct sbx_error err;
	struct fs_job *j;
	int rc;

	memset(&res, 0, sizeof(res));
	buf_init(&res.out, NATIVE_OUTPUT_MAX);
	buf_init(&res.err, NATIVE_OUTPUT_MAX);
	sbx_error_clear(&err);
	if (p->ops->native_exec == NULL) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	rc = fs_cmd_shell(cmd, &line);
	if (rc < 0)
		goto out;
	rc = p->ops->native_exec(p, sb->id, line.data, cmd->req.cwd, &res,
				 &err);
	if (rc < 0 && err.code == SBX_OUTCOME_UNKNOWN) {
		rc = record_unknown(sb, js, cmd, cj, &err, out);
		goto out;
	}
	if (rc < 0 && !command_failure(&err)) {
		rc = fs_jobs_fail(sb->fs, sb->id, "exec", "", &err);
		goto out;
	}
	/* Filled and ended before anyone can see it. */
	j = local_job(js, cj, cmd->req.timeout_ms);
	store_all(sb, &j->out, &res.out);
	store_all(sb, &j->err, &res.err);
	if (rc < 0)
		fs_job_end(j, FS_JOB_ST_FAILED, 0, err.failure, err.reason);
	else if (res.has_exit)
		fs_job_end(j, FS_JOB_ST_EXITED, res.exit_code, NULL, NULL);
	else
		fs_job_end(j, FS_JOB_ST_UNKNOWN, 0, NULL, NULL);
	(void)fs_jobs_add(js, j, "native");
	*out = j;
	rc = 0;
out:
	provider_exec_result_cleanup(&res);
	buf_cleanup(&line);
	return rc;
}

/* ---- exec ---------------------------------------------------------------- */

/*
 * One open exec file: what was written through it since the last start
 * (one request, however many writes it took), and the id of the last job
 * started through it with how much of it was read.
 */
struct exec_handle {
	pthread_mutex_t lock;
	struct buf pending;
	bool overflow; /* more than FS_CMD_MAX was written: refused */
	char id[FS_JOB_NAME_MAX + 2];
	size_t id_len;
	size_t id_off;
};

static struct exec_handle *exec_handle(const struct fuse_file_info *fi)
{
	return fi != NULL ? (struct exec_handle *)(uintptr_t)fi->fh : NULL;
}

/* Start what is pending (the handle's lock held). Every refusal is
 * logged once, here or where the agent's answer is judged. */
static int exec_start(struct sbx *sb, struct exec_handle *h)
{
	struct fs_jobs *js = fs_jobs_of(sb);
	struct buf cj = BUF_INIT(0);
	struct fs_job *j = NULL;
	enum transport_kind kind;
	uint64_t max_running;
	char why[256];
	struct timespec now;
	struct fs_cmd cmd;
	size_t len;
	char *text;
	bool ext, flow;
	int rc;

	if (h->overflow) {
		h->overflow = false;
		buf_reset(&h->pending);
		log_warn("sandbox %s: exec: the request is refused: it is "
			 "longer than %lu bytes",
			 sb->id, (unsigned long)FS_CMD_MAX);
		return -EFBIG;
	}
	text = buf_take(&h->pending, &len);
	why[0] = '\0';
	rc = fs_cmd_parse(text, len, default_timeout_ms(sb->fs), &cmd, why,
			  sizeof(why));
	free(text);
	if (rc < 0) {
		log_warn("sandbox %s: exec: the request is refused: %s", sb->id,
			 why[0] ? why : strerror(-rc));
		return rc;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	rc = fs_cmd_json(&cmd, &now, &cj);
	if (rc < 0)
		goto out;
	pthread_mutex_lock(&sb->lock);
	kind = sb->kind;
	ext = sb->ext;
	flow = sb->health_known && sb->health.ext_jobs >= 1;
	max_running = sb->health.ext_max_running;
	pthread_mutex_unlock(&sb->lock);
	/* With the job extension the agent keeps all of the output. */
	cmd.req.flow = flow;
	if (kind == TRANSPORT_NATIVE)
		rc = exec_native(sb, js, &cmd, &cj, &j);
	else
		rc = exec_agent(sb, js, &cmd, &cj, ext, max_running, &j);
	if (j != NULL) {
		h->id_len =
			(size_t)snprintf(h->id, sizeof(h->id), "%s\n", j->name);
		h->id_off = 0;
		fs_job_unref(j);
	}
out:
	fs_cmd_cleanup(&cmd);
	buf_cleanup(&cj);
	return rc;
}

int fs_exec_getattr(struct sbx *sb, struct stat *st)
{
	sbfs_synth_stat(sb->fs, st, false, sbfs_control_mode(sb->fs, true), 0);
	return 0;
}

int fs_exec_open(struct sbx *sb, struct fuse_file_info *fi)
{
	struct exec_handle *h = xcalloc(1, sizeof(*h));

	(void)sb;
	pthread_mutex_init(&h->lock, NULL);
	buf_init(&h->pending, FS_CMD_MAX);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* The id read back is not the file's (empty) content. */
	fi->direct_io = 1;
	return 0;
}

/* A write only gathers: a script written line by line is one request,
 * started at the read of its id or the flush (SEMANTICS.md, "Jobs"). */
int fs_exec_write(struct sbx *sb, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);

	(void)sb;
	(void)off;
	if (h == NULL)
		return -EBADF;
	if (size > INT_MAX)
		return -EFBIG;
	pthread_mutex_lock(&h->lock);
	/* Past the bound the request is refused when it would start; the
	 * rest of it is taken and thrown away until then. */
	if (h->overflow || buf_append(&h->pending, buf, size) < 0) {
		h->overflow = true;
		buf_reset(&h->pending);
	}
	pthread_mutex_unlock(&h->lock);
	return (int)size;
}

int fs_exec_read(struct sbx *sb, char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);
	size_t n;
	int rc = 0;

	/* A stream, Plan 9 clone style: the id is read once after each
	 * start, whatever the offset (the write moved it). */
	(void)off;
	if (h == NULL)
		return -EBADF;
	pthread_mutex_lock(&h->lock);
	if (h->pending.len > 0 || h->overflow)
		rc = exec_start(sb, h);
	if (rc == 0) {
		n = h->id_len - h->id_off;
		if (n > size)
			n = size;
		memcpy(buf, h->id + h->id_off, n);
		h->id_off += n;
		rc = (int)n;
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

/* Every close flushes: what is pending starts (a close with nothing
 * pending, as a shell's closing of extra descriptors, starts nothing). */
int fs_exec_flush(struct sbx *sb, struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);
	int rc = 0;

	if (h == NULL)
		return 0;
	pthread_mutex_lock(&h->lock);
	if (h->pending.len > 0 || h->overflow)
		rc = exec_start(sb, h);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int fs_exec_release(struct sbx *sb, struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);

	(void)sb;
	if (h == NULL)
		return 0;
	buf_cleanup(&h->pending);
	pthread_mutex_destroy(&h->lock);
	free(h);
	fi->fh = 0;
	return 0;
}
