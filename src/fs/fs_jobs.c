/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs: MOUNT/<sandbox>/exec and jobs/ (design.md 2 and 3). A command
 * written to exec is started as an agent job (or, for a native session,
 * run through the provider's native exec) and recorded in the sandbox's
 * job table; one detached poller thread per running job follows it with
 * the agent's job poll, appending output to the job's store and waking
 * readers; the job files serve the store, the status and the exit code,
 * and ctl cancels.
 *
 * The records, stores and text forms are fs_jobs_store.c's; this file
 * only adds FUSE handles, blocking reads and the agent and provider calls.
 * It does not parse paths (fs.c does) or decide the transport (sandbox.c
 * did, in sbfs_enter).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_client.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "fs/fs_i.h"
#include "fs/fs_jobs_i.h"

/* A blocked read wakes this often to notice an interrupted request. */
#define WAIT_SLICE_MS 200
/* Longest long-poll asked of an agent with the extension. It is also how
 * long unmounting may wait for a poller, so it stays short: a quiet job
 * costs one request per period. */
#define LONGPOLL_MS 3000L
/* Poll period without the extension: from the minimum, doubling while
 * nothing new comes, up to the maximum. */
#define POLL_MIN_MS 50L
#define POLL_MAX_MS 1000L
/* Backoff between retries of a poll the transport called retryable. */
#define RETRY_MIN_MS 200L
#define RETRY_MAX_MS 5000L
/* A job is followed until its timeout plus this (the protocol's
 * TERMINAL_FRAME_GRACE); after that its outcome is unknown. */
#define DEADLINE_GRACE_MS 60000ULL
/* How long a cancel waits for the agent's final answer to show. */
#define CANCEL_WAIT_MS 2000L
#define DEFAULT_JOB_TIMEOUT_S 86400L
/* Largest native exec output kept per stream. */
#define NATIVE_OUTPUT_MAX PROTO_MAX_TRANSFER_BYTES

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mono_deadline(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Wait on the job's condition variable (its lock held) for at most ms. */
static void job_wait(struct fs_job *j, long ms)
{
	struct timespec ts;

	mono_deadline(&ts, ms);
	pthread_cond_timedwait(&j->cond, &j->lock, &ts);
}

/* sbfs_fail's errno as a negative value, whichever sign it comes with. */
static int fail(struct sbfs *fs, const char *id, const char *op,
		const char *path, const struct sbx_error *err)
{
	int rc = sbfs_fail(fs, id, op, path, err);

	if (rc > 0)
		rc = -rc;
	return rc < 0 ? rc : -EIO;
}

static bool job_not_found(const struct sbx_error *e)
{
	return e->status == 404 &&
	       strstr(e->reason, PROTO_ERR_JOB_NOT_FOUND ":") != NULL;
}

static struct fs_jobs *jobs_of(struct sbx *sb)
{
	struct fs_jobs *js;

	pthread_mutex_lock(&sb->lock);
	if (sb->jobs == NULL) {
		js = fs_jobs_new(sb->fs->spool_dir, FS_JOBS_MAX,
				 FS_STORE_MEM_MAX);
		js->fs = sb->fs;
		strlcpy_s(js->sbx_id, sb->id, sizeof(js->sbx_id));
		sb->jobs = js;
	}
	js = sb->jobs;
	pthread_mutex_unlock(&sb->lock);
	return js;
}

static uint64_t default_timeout_ms(const struct sbfs *fs)
{
	long s = fs->o.job_timeout_s > 0 ? fs->o.job_timeout_s
					 : DEFAULT_JOB_TIMEOUT_S;

	return (uint64_t)s * 1000;
}

/* ---- pollers ------------------------------------------------------------- */

struct poller_arg {
	struct fs_jobs *js;
	struct fs_job *job;
};

static long long job_deadline_ms(const struct fs_job *j)
{
	uint64_t lim = j->timeout_ms;

	if (lim > (uint64_t)LLONG_MAX / 4)
		return LLONG_MAX;
	return j->started_ms + (long long)(lim + DEADLINE_GRACE_MS);
}

/* Sleep up to ms, or until a cancel asks for a poll now. False when the
 * poller must stop. */
static bool poller_sleep(struct fs_job *j, long ms)
{
	struct timespec ts;
	bool go;

	mono_deadline(&ts, ms);
	pthread_mutex_lock(&j->lock);
	while (!j->stop && !j->kick)
		if (pthread_cond_timedwait(&j->cond, &j->lock, &ts) ==
		    ETIMEDOUT)
			break;
	j->kick = false;
	go = !j->stop;
	pthread_mutex_unlock(&j->lock);
	return go;
}

static void poller_end(struct fs_job *j, enum fs_job_state st)
{
	pthread_mutex_lock(&j->lock);
	fs_job_end(j, st, 0, NULL, NULL);
	pthread_mutex_unlock(&j->lock);
}

/* One poll and what it means for the job. Returns how long to sleep before
 * the next one, or -1 when following the job is over. */
static long poll_once(struct fs_jobs *js, struct fs_job *j, long wait,
		      long *interval, long *retry, long long deadline)
{
	struct proto_job_poll_req req;
	struct proto_job_poll p;
	struct sbx_error err;
	bool fresh, running, dropped;
	long long t0;
	long nap;
	int rc;

	memset(&req, 0, sizeof(req));
	strlcpy_s(req.job_id, j->agent_id, sizeof(req.job_id));
	pthread_mutex_lock(&j->lock);
	running = j->state == FS_JOB_ST_RUNNING && !j->stop;
	req.has_since = j->has_seq;
	req.since_seq = j->last_seq;
	pthread_mutex_unlock(&j->lock);
	if (!running)
		return -1;
	req.wait_ms = (uint64_t)wait;
	memset(&p, 0, sizeof(p));
	sbx_error_clear(&err);
	t0 = mono_ms();
	rc = ac_job_poll(js->fs->t, js->sbx_id, &req, &p, &err);
	if (rc == 0) {
		pthread_mutex_lock(&j->lock);
		dropped = j->out.dropped || j->err.dropped;
		fresh = fs_job_apply_poll(j, &p);
		running = j->state == FS_JOB_ST_RUNNING;
		if (!dropped && (j->out.dropped || j->err.dropped))
			log_warn("sandbox %s: job %s: output past what the "
				 "mount can keep is dropped",
				 js->sbx_id, j->name);
		pthread_mutex_unlock(&j->lock);
		proto_job_poll_cleanup(&p);
		*retry = RETRY_MIN_MS;
		if (!running)
			return -1;
		if (fresh) {
			*interval = POLL_MIN_MS;
			nap = wait > 0 ? 0 : POLL_MIN_MS;
		} else if (wait > 0 && mono_ms() - t0 >= wait / 2) {
			/* a long-poll that ran its course */
			nap = 0;
		} else {
			/* A strict v1 agent ignores the long-poll and
			 * answers at once: back off as without it. */
			nap = *interval;
			*interval = *interval * 2 > POLL_MAX_MS ? POLL_MAX_MS
								: *interval * 2;
		}
	} else if (job_not_found(&err)) {
		/* The agent lost or evicted the job (a restart, say): what
		 * was received stays readable, the end is not known. */
		log_warn("sandbox %s: job %s: the agent no longer knows it; "
			 "its status is unknown",
			 js->sbx_id, j->name);
		poller_end(j, FS_JOB_ST_UNKNOWN);
		return -1;
	} else if (err.retryable && mono_ms() < deadline) {
		char text[1024];

		log_debug("sandbox %s: job %s: poll failed, retrying: %s",
			  js->sbx_id, j->name,
			  sbx_error_describe(&err, text, sizeof(text)));
		nap = *retry;
		*retry = *retry * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : *retry * 2;
	} else {
		(void)fail(js->fs, js->sbx_id, "jobs", j->name, &err);
		poller_end(j, FS_JOB_ST_UNKNOWN);
		return -1;
	}
	if (mono_ms() >= deadline) {
		log_warn("sandbox %s: job %s: no end reported within its "
			 "timeout; its status is unknown",
			 js->sbx_id, j->name);
		poller_end(j, FS_JOB_ST_UNKNOWN);
		return -1;
	}
	return nap;
}

static void *poller_main(void *arg)
{
	struct poller_arg *pa = arg;
	struct fs_jobs *js = pa->js;
	struct fs_job *j = pa->job;
	long long deadline = job_deadline_ms(j);
	long interval = POLL_MIN_MS, retry = RETRY_MIN_MS, wait = 0, nap;

	free(pa);
	if (j->ext) {
		/* The answer must come well inside the response deadline. */
		wait = transport_response_timeout_ms(js->fs->t) / 2;
		if (wait > LONGPOLL_MS)
			wait = LONGPOLL_MS;
		if (wait < 0)
			wait = 0;
	}
	for (;;) {
		nap = poll_once(js, j, wait, &interval, &retry, deadline);
		if (nap < 0)
			break;
		if (nap > 0 && !poller_sleep(j, nap))
			break;
	}
	fs_job_unref(j);
	pthread_mutex_lock(&js->lock);
	if (--js->pollers == 0)
		pthread_cond_broadcast(&js->idle);
	pthread_mutex_unlock(&js->lock);
	return NULL;
}

static void poller_start(struct fs_jobs *js, struct fs_job *j)
{
	struct poller_arg *pa = xmalloc(sizeof(*pa));
	pthread_attr_t attr;
	pthread_t tid;
	int rc;

	pa->js = js;
	pa->job = j;
	fs_job_ref(j);
	pthread_mutex_lock(&js->lock);
	js->pollers++;
	pthread_mutex_unlock(&js->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&tid, &attr, poller_main, pa);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		return;
	log_error("sandbox %s: job %s: cannot follow it (%s); its status is "
		  "unknown",
		  js->sbx_id, j->name, strerror(rc));
	poller_end(j, FS_JOB_ST_UNKNOWN);
	fs_job_unref(j);
	free(pa);
	pthread_mutex_lock(&js->lock);
	if (--js->pollers == 0)
		pthread_cond_broadcast(&js->idle);
	pthread_mutex_unlock(&js->lock);
}

void fs_jobs_free(struct fs_jobs *js)
{
	struct timespec ts;
	size_t i;

	if (js == NULL)
		return;
	pthread_mutex_lock(&js->lock);
	js->stopping = true;
	for (i = 0; i < js->n; i++) {
		struct fs_job *j = js->v[i];

		pthread_mutex_lock(&j->lock);
		j->stop = true;
		pthread_cond_broadcast(&j->cond);
		pthread_mutex_unlock(&j->lock);
	}
	/* A poller inside a request returns within the long-poll (or the
	 * transport's deadlines); it uses the transport until then. */
	while (js->pollers > 0) {
		mono_deadline(&ts, 10000);
		if (pthread_cond_timedwait(&js->idle, &js->lock, &ts) ==
		    ETIMEDOUT)
			log_info("sandbox %s: waiting for %u job poller(s)",
				 js->sbx_id, js->pollers);
	}
	pthread_mutex_unlock(&js->lock);
	fs_jobs_destroy(js);
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
	(void)fail(sb->fs, sb->id, "exec", "", err);
	*out = j;
	return -EIO;
}

static int exec_agent(struct sbx *sb, struct fs_jobs *js,
		      const struct fs_cmd *cmd, const struct buf *cj, bool ext,
		      struct fs_job **out)
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
		return fail(sb->fs, sb->id, "exec", "", &err);
	/* The agent's id names the directory when it is a safe name. */
	j = fs_job_new(fs_job_name_ok(jid) ? jid : "", jid, cj->data, cj->len,
		       cmd->req.timeout_ms, js->spool_dir, js->mem_max);
	j->ext = ext;
	(void)fs_jobs_add(js, j, "job");
	log_debug("sandbox %s: job %s started", sb->id, j->name);
	poller_start(js, j);
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
		rc = fail(sb->fs, sb->id, "exec", "", &err);
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

/* One open exec file: the unfinished command, and the id of the last job
 * started through it with how much of it was read. */
struct exec_handle {
	pthread_mutex_t lock;
	struct buf pending;
	char id[FS_JOB_NAME_MAX + 2];
	size_t id_len;
	size_t id_off;
};

static struct exec_handle *exec_handle(const struct fuse_file_info *fi)
{
	return fi != NULL ? (struct exec_handle *)(uintptr_t)fi->fh : NULL;
}

/* Start what is pending (the handle's lock held). */
static int exec_start(struct sbx *sb, struct exec_handle *h)
{
	struct fs_jobs *js = jobs_of(sb);
	struct buf cj = BUF_INIT(0);
	struct fs_job *j = NULL;
	enum transport_kind kind;
	struct timespec now;
	struct fs_cmd cmd;
	size_t len;
	char *text;
	bool ext;
	int rc;

	text = buf_take(&h->pending, &len);
	rc = fs_cmd_parse(text, len, default_timeout_ms(sb->fs), &cmd);
	free(text);
	if (rc < 0) {
		log_debug("sandbox %s: exec: the command is refused (%s)",
			  sb->id, strerror(-rc));
		return rc;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	rc = fs_cmd_json(&cmd, &now, &cj);
	if (rc < 0)
		goto out;
	pthread_mutex_lock(&sb->lock);
	kind = sb->kind;
	ext = sb->ext;
	pthread_mutex_unlock(&sb->lock);
	if (kind == TRANSPORT_NATIVE)
		rc = exec_native(sb, js, &cmd, &cj, &j);
	else
		rc = exec_agent(sb, js, &cmd, &cj, ext, &j);
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

int fs_exec_write(struct sbx *sb, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);
	int rc;

	(void)off;
	if (h == NULL)
		return -EBADF;
	if (size > INT_MAX)
		return -EFBIG;
	pthread_mutex_lock(&h->lock);
	rc = buf_append(&h->pending, buf, size);
	if (rc < 0) {
		buf_reset(&h->pending);
		goto out;
	}
	if (size > 0 && buf[size - 1] == '\n') {
		rc = exec_start(sb, h);
		if (rc < 0)
			goto out;
	}
	rc = (int)size;
out:
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int fs_exec_read(struct sbx *sb, char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);
	size_t n;

	/* A stream, Plan 9 clone style: the id is read once after each
	 * start, whatever the offset (the write moved it). */
	(void)sb;
	(void)off;
	if (h == NULL)
		return -EBADF;
	pthread_mutex_lock(&h->lock);
	n = h->id_len - h->id_off;
	if (n > size)
		n = size;
	memcpy(buf, h->id + h->id_off, n);
	h->id_off += n;
	pthread_mutex_unlock(&h->lock);
	return (int)n;
}

int fs_exec_flush(struct sbx *sb, struct fuse_file_info *fi)
{
	struct exec_handle *h = exec_handle(fi);
	int rc = 0;

	if (h == NULL)
		return 0;
	pthread_mutex_lock(&h->lock);
	if (h->pending.len > 0)
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

/* ---- jobs/ --------------------------------------------------------------- */

/* One open job file. */
struct job_handle {
	struct fs_job *job;
	enum fs_job_file f;
	pthread_mutex_t lock; /* guards the status snapshot */
	char text[FS_JOB_MSG_MAX + 128];
	size_t len;
};

static struct job_handle *job_handle(const struct fuse_file_info *fi)
{
	return fi != NULL ? (struct job_handle *)(uintptr_t)fi->fh : NULL;
}

static void set_time(struct stat *st, const struct timespec *ts)
{
	st->st_mtim = *ts;
	st->st_ctim = *ts;
}

int fs_jobs_getattr(struct sbx *sb, const char *job, enum fs_job_file f,
		    struct stat *st)
{
	struct fs_jobs *js = jobs_of(sb);
	char name[FS_JOB_NAME_MAX + 1], text[FS_JOB_MSG_MAX + 128];
	struct fs_job *j;
	int n;

	if (job == NULL) {
		sbfs_synth_stat(sb->fs, st, true, 0555, 0);
		return 0;
	}
	if (strcmp(job, "latest") == 0 && f == FS_JOB_DIR) {
		if (!fs_jobs_latest(js, name, sizeof(name)))
			return -ENOENT;
		sbfs_synth_stat(sb->fs, st, false, 0777, (off_t)strlen(name));
		st->st_mode = S_IFLNK | 0777;
		return 0;
	}
	j = fs_jobs_find(js, job);
	if (j == NULL)
		return -ENOENT;
	pthread_mutex_lock(&j->lock);
	switch (f) {
	case FS_JOB_DIR:
		sbfs_synth_stat(sb->fs, st, true, 0555, 0);
		set_time(st, &j->started);
		break;
	case FS_JOB_CMD:
		sbfs_synth_stat(sb->fs, st, false, 0444, (off_t)j->cmd_len);
		set_time(st, &j->started);
		break;
	case FS_JOB_STDOUT:
	case FS_JOB_STDERR:
		sbfs_synth_stat(sb->fs, st, false, 0444,
				(off_t)(f == FS_JOB_STDOUT ? j->out.size
							   : j->err.size));
		set_time(st, &j->changed);
		break;
	case FS_JOB_STATUS:
		sbfs_synth_stat(
			sb->fs, st, false, 0444,
			(off_t)fs_job_status_line(j, text, sizeof(text)));
		set_time(st, &j->changed);
		break;
	case FS_JOB_EXIT:
		n = fs_job_exit_text(j, text, sizeof(text));
		sbfs_synth_stat(sb->fs, st, false, 0444, n > 0 ? n : 0);
		set_time(st, &j->changed);
		break;
	case FS_JOB_CTL:
		sbfs_synth_stat(sb->fs, st, false, sbfs_control_mode(sb->fs, false), 0);
		set_time(st, &j->started);
		break;
	}
	pthread_mutex_unlock(&j->lock);
	fs_job_unref(j);
	return 0;
}

static const char *const job_files[] = {
	"cmd", "stdout", "stderr", "status", "exit", "ctl",
};

int fs_jobs_readdir(struct sbx *sb, const char *job, void *buf,
		    fuse_fill_dir_t filler)
{
	struct fs_jobs *js = jobs_of(sb);
	char latest[FS_JOB_NAME_MAX + 1];
	struct fs_job *j;
	char **names;
	size_t i, n;

	if (job != NULL) {
		j = fs_jobs_find(js, job);
		if (j == NULL)
			return -ENOENT;
		fs_job_unref(j);
	}
	if (filler(buf, ".", NULL, 0, 0) || filler(buf, "..", NULL, 0, 0))
		return 0;
	if (job != NULL) {
		for (i = 0; i < sizeof(job_files) / sizeof(job_files[0]); i++)
			if (filler(buf, job_files[i], NULL, 0, 0))
				break;
		return 0;
	}
	fs_jobs_names(js, &names, &n);
	for (i = 0; i < n; i++)
		if (filler(buf, names[i], NULL, 0, 0))
			break;
	if (i == n && fs_jobs_latest(js, latest, sizeof(latest)))
		(void)filler(buf, "latest", NULL, 0, 0);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return 0;
}

int fs_jobs_readlink(struct sbx *sb, char *buf, size_t size)
{
	char name[FS_JOB_NAME_MAX + 1];

	if (size == 0)
		return -EINVAL;
	if (!fs_jobs_latest(jobs_of(sb), name, sizeof(name)))
		return -ENOENT;
	strlcpy_s(buf, name, size);
	return 0;
}

int fs_jobs_open(struct sbx *sb, const char *job, enum fs_job_file f,
		 struct fuse_file_info *fi)
{
	struct job_handle *h;
	struct fs_job *j;
	int acc = fi->flags & O_ACCMODE;

	if (job == NULL || f == FS_JOB_DIR)
		return -EISDIR;
	if (f == FS_JOB_CTL ? acc == O_RDONLY : acc != O_RDONLY)
		return -EACCES;
	j = fs_jobs_find(jobs_of(sb), job);
	if (j == NULL)
		return -ENOENT;
	h = xcalloc(1, sizeof(*h));
	h->job = j;
	h->f = f;
	pthread_mutex_init(&h->lock, NULL);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* Everything but cmd changes while the job runs: no page cache,
	 * and reads past the current size reach us (to block). */
	if (f == FS_JOB_CMD)
		fi->keep_cache = 1;
	else
		fi->direct_io = 1;
	return 0;
}

static int serve(const char *text, size_t len, char *buf, size_t size,
		 off_t off)
{
	size_t n;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= len)
		return 0;
	n = len - (size_t)off;
	if (n > size)
		n = size;
	memcpy(buf, text + off, n);
	return (int)n;
}

/* stdout or stderr: what is there at off, else wait while the job runs. */
static int read_stream(struct fs_job *j, bool err, char *buf, size_t size,
		       off_t off)
{
	struct fs_store *s = err ? &j->err : &j->out;
	size_t got = 0;
	int rc;

	if (off < 0)
		return -EINVAL;
	if (size > INT_MAX)
		size = INT_MAX;
	pthread_mutex_lock(&j->lock);
	while ((uint64_t)off >= s->size && j->state == FS_JOB_ST_RUNNING &&
	       !j->stop) {
		job_wait(j, WAIT_SLICE_MS);
		if (fuse_interrupted()) {
			rc = -EINTR;
			goto out;
		}
	}
	rc = fs_store_read(s, buf, size, (uint64_t)off, &got);
	if (rc == 0)
		rc = (int)got;
out:
	pthread_mutex_unlock(&j->lock);
	return rc;
}

/* exit: wait for the end. */
static int read_exit(struct fs_job *j, char *buf, size_t size, off_t off)
{
	char text[32];
	int n;

	pthread_mutex_lock(&j->lock);
	while (j->state == FS_JOB_ST_RUNNING && !j->stop) {
		job_wait(j, WAIT_SLICE_MS);
		if (fuse_interrupted()) {
			pthread_mutex_unlock(&j->lock);
			return -EINTR;
		}
	}
	n = fs_job_exit_text(j, text, sizeof(text));
	pthread_mutex_unlock(&j->lock);
	if (n == -EAGAIN)
		return -EIO; /* unmounting */
	if (n < 0)
		return n;
	return serve(text, (size_t)n, buf, size, off);
}

static int read_status(struct job_handle *h, char *buf, size_t size, off_t off)
{
	int rc;

	/* A read at 0 takes a fresh line; the rest of one read sequence
	 * comes from the same line. */
	pthread_mutex_lock(&h->lock);
	if (off == 0 || h->len == 0) {
		pthread_mutex_lock(&h->job->lock);
		h->len = fs_job_status_line(h->job, h->text, sizeof(h->text));
		pthread_mutex_unlock(&h->job->lock);
	}
	rc = serve(h->text, h->len, buf, size, off);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int fs_jobs_read(struct sbx *sb, const char *job, enum fs_job_file f, char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);

	(void)sb;
	(void)job;
	if (h == NULL)
		return -EBADF;
	switch (f) {
	case FS_JOB_CMD:
		return serve(h->job->cmd, h->job->cmd_len, buf, size, off);
	case FS_JOB_STDOUT:
		return read_stream(h->job, false, buf, size, off);
	case FS_JOB_STDERR:
		return read_stream(h->job, true, buf, size, off);
	case FS_JOB_STATUS:
		return read_status(h, buf, size, off);
	case FS_JOB_EXIT:
		return read_exit(h->job, buf, size, off);
	case FS_JOB_DIR:
		return -EISDIR;
	case FS_JOB_CTL:
		break;
	}
	return -EBADF;
}

static int job_cancel(struct sbx *sb, struct fs_job *j)
{
	struct sbx_error err;
	long long until;
	bool running;
	int rc;

	pthread_mutex_lock(&j->lock);
	running = j->state == FS_JOB_ST_RUNNING;
	pthread_mutex_unlock(&j->lock);
	/* Cancelling a job that has ended changes nothing. */
	if (!running || j->agent_id[0] == '\0')
		return 0;
	sbx_error_clear(&err);
	rc = ac_job_cancel(sb->fs->t, sb->id, j->agent_id, &err);
	if (rc < 0 && !job_not_found(&err))
		return fail(sb->fs, sb->id, "cancel", j->name, &err);
	/* The agent's final poll answer decides the status: have the
	 * poller ask now, and give it a moment so that a status read
	 * right after the cancel shows it. */
	until = mono_ms() + CANCEL_WAIT_MS;
	pthread_mutex_lock(&j->lock);
	j->kick = true;
	pthread_cond_broadcast(&j->cond);
	while (j->state == FS_JOB_ST_RUNNING && !j->stop && mono_ms() < until &&
	       !fuse_interrupted())
		job_wait(j, WAIT_SLICE_MS);
	pthread_mutex_unlock(&j->lock);
	return 0;
}

int fs_jobs_write(struct sbx *sb, const char *job, enum fs_job_file f,
		  const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);
	size_t n = size;
	int rc;

	(void)job;
	(void)off;
	if (h == NULL || f != FS_JOB_CTL)
		return -EBADF;
	if (size > INT_MAX)
		return -EINVAL;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t' || buf[n - 1] == '\r'))
		n--;
	while (n > 0 && (*buf == ' ' || *buf == '\t')) {
		buf++;
		n--;
	}
	if (n != 6 || memcmp(buf, "cancel", 6) != 0)
		return -EINVAL;
	rc = job_cancel(sb, h->job);
	return rc < 0 ? rc : (int)size;
}

int fs_jobs_release(struct sbx *sb, const char *job, enum fs_job_file f,
		    struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);

	(void)sb;
	(void)job;
	(void)f;
	if (h == NULL)
		return 0;
	fs_job_unref(h->job);
	pthread_mutex_destroy(&h->lock);
	free(h);
	fi->fh = 0;
	return 0;
}
