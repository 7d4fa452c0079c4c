/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs: MOUNT/<sandbox>/exec and jobs/ (SEMANTICS.md,
 * SEMANTICS.md "Jobs"). What is written to exec through one open file is
 * one request, started as an agent job (or, for a native session, run
 * through the provider's native exec) when the writer reads the job id
 * back or the file is flushed, and recorded in the sandbox's job table.
 * jobs/ shows the table and, with the agent's job extension, every job the
 * agent keeps (a job found there is adopted on first look). One detached
 * poller thread per followed job collects its output with the agent's job
 * poll, appending it to the job's store and waking readers; while the
 * agent does not answer for longer than the mount's timeout, the job is
 * stale and blocked readers fail. The job files serve the store, the
 * status and the exit code, and ctl cancels.
 *
 * The records, stores and text forms are fs_jobs_store.c's; this file
 * only adds the job files (FUSE handles, blocking reads) and the agent's
 * listing; exec and starting a job are fs_exec.c's, the pollers
 * fs_jobs_poll.c's (fs_jobs_run.h joins them).
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

#include "client/agent_client.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "common/strv.h"
#include "fs/fs_i.h"
#include "fs/fs_jobs_i.h"
#include "fs/fs_jobs_run.h"

/* How long a cancel waits for the agent's final answer to show. */
#define CANCEL_WAIT_MS 2000L
/* How long the agent's job listing is used before it is asked again. */
#define LISTING_MS 1000LL

/* Wait on the job's condition variable (its lock held) for at most ms. */
void fs_job_wait(struct fs_job *j, long ms)
{
	struct timespec ts;

	clock_deadline_in(&ts, ms);
	pthread_cond_timedwait(&j->cond, &j->lock, &ts);
}

/* sbfs_fail's errno as a negative value, whichever sign it comes with. */
int fs_jobs_fail(struct sbfs *fs, const char *id, const char *op,
		 const char *path, const struct sbx_error *err)
{
	int rc = sbfs_fail(fs, id, op, path, err);

	if (rc > 0)
		rc = -rc;
	return rc < 0 ? rc : -EIO;
}

bool fs_job_not_found(const struct sbx_error *e)
{
	return e->status == 404 &&
	       strstr(e->reason, PROTO_ERR_JOB_NOT_FOUND ":") != NULL;
}

struct fs_jobs *fs_jobs_of(struct sbx *sb)
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

/* ---- the agent's job extension ------------------------------------------- */

/*
 * Does the sandbox's agent speak the job extension (flow control, the
 * listing, the running-jobs limit)? From the health the mount holds for
 * the current connection, else one health request, whose answer is kept
 * for that connection. A stopped sandbox has no route, so asking never
 * resumes it; an agent that cannot be reached is taken as not speaking
 * it for now.
 */
static bool agent_jobs_ext(struct sbx *sb, struct fs_jobs *js)
{
	struct transport *t = sb->fs->t;
	unsigned gen = transport_generation(t, sb->id);
	struct proto_health h;
	struct sbx_error err;
	bool known = false, v = false;
	char text[1024];

	pthread_mutex_lock(&sb->lock);
	if (sb->kind != TRANSPORT_AGENT) {
		known = true;
	} else if (sb->health_known && sb->health_gen == gen) {
		known = true;
		v = sb->health.ext_jobs >= 1;
	}
	pthread_mutex_unlock(&sb->lock);
	if (known)
		return v;
	pthread_mutex_lock(&js->lock);
	known = js->ext_known && js->ext_gen == gen;
	v = js->ext_jobs;
	pthread_mutex_unlock(&js->lock);
	if (known)
		return v;
	sbx_error_clear(&err);
	if (ac_health(t, sb->id, &h, &err) < 0) {
		log_debug("sandbox %s: jobs: the agent's health: %s", sb->id,
			  sbx_error_describe(&err, text, sizeof(text)));
		return false;
	}
	v = h.ext_jobs >= 1;
	pthread_mutex_lock(&js->lock);
	js->ext_known = true;
	js->ext_gen = transport_generation(t, sb->id);
	js->ext_jobs = v;
	pthread_mutex_unlock(&js->lock);
	return v;
}

/* The agent's listing, at most LISTING_MS old, in js->listing. False when
 * the agent cannot list its jobs now (then only the table is shown). */
static bool listing_fresh(struct sbx *sb, struct fs_jobs *js)
{
	struct proto_job_list l;
	struct sbx_error err;
	char text[1024];
	bool fresh;

	pthread_mutex_lock(&js->lock);
	fresh = js->listing_ms != 0 &&
		clock_mono_ms() - js->listing_ms < LISTING_MS;
	pthread_mutex_unlock(&js->lock);
	if (fresh)
		return true;
	if (!agent_jobs_ext(sb, js))
		return false;
	memset(&l, 0, sizeof(l));
	sbx_error_clear(&err);
	if (ac_job_list(sb->fs->t, sb->id, &l, &err) < 0) {
		log_debug("sandbox %s: jobs: the agent's listing: %s", sb->id,
			  sbx_error_describe(&err, text, sizeof(text)));
		return false;
	}
	pthread_mutex_lock(&js->lock);
	proto_job_list_cleanup(&js->listing);
	js->listing = l;
	js->listing_ms = clock_mono_ms();
	pthread_mutex_unlock(&js->lock);
	return true;
}

/* A job of the agent's listing as this mount records it: not followed
 * yet, its state unknown until a poll says. */
static struct fs_job *adopted_job(struct fs_jobs *js,
				  const struct proto_job_info *ji)
{
	struct buf cj = BUF_INIT(0);
	struct timespec started;
	long long ago;
	struct fs_cmd c;
	struct fs_job *j;

	memset(&c, 0, sizeof(c));
	c.req.argv = ji->argv;
	c.req.argc = ji->argc;
	c.req.cwd = ji->cwd;
	c.req.env = ji->env;
	c.req.envc = ji->envc;
	c.req.timeout_ms = ji->timeout_ms;
	started.tv_sec = (time_t)(ji->started_ms / 1000);
	started.tv_nsec = (long)(ji->started_ms % 1000) * 1000000L;
	if (fs_cmd_json(&c, &started, &cj) < 0)
		buf_reset(&cj);
	j = fs_job_new(ji->job_id, ji->job_id, cj.data ? cj.data : "", cj.len,
		       ji->timeout_ms, js->spool_dir, js->mem_max);
	buf_cleanup(&cj);
	j->ext = true;
	j->flow = ji->flow;
	j->adopted = true;
	j->followed = false;
	j->synced = false;
	j->started = started;
	j->changed = started;
	/* Its deadline counts from when it started, not from now. */
	ago = clock_wall_ms() - ji->started_ms;
	if (ago > 0 && ago < j->started_ms)
		j->started_ms -= ago;
	return j;
}

/*
 * The job named name: the table's, else one of the agent's listing,
 * adopted into the table. A reference for the caller, or NULL.
 */
static struct fs_job *lookup(struct sbx *sb, struct fs_jobs *js,
			     const char *name)
{
	struct fs_job *j = fs_jobs_find(js, name), *have;
	size_t i;

	if (j != NULL || strcmp(name, "latest") == 0 || !fs_job_name_ok(name))
		return j;
	if (!listing_fresh(sb, js))
		return NULL;
	pthread_mutex_lock(&js->lock);
	for (i = 0; i < js->listing.n; i++) {
		if (strcmp(js->listing.jobs[i].job_id, name) == 0) {
			j = adopted_job(js, &js->listing.jobs[i]);
			break;
		}
	}
	pthread_mutex_unlock(&js->lock);
	if (j == NULL)
		return NULL;
	have = fs_jobs_adopt(js, j);
	fs_job_unref(j);
	return have;
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

/* Files whose contents depend on what the agent says of the job. */
static bool followed_file(enum fs_job_file f)
{
	return f != FS_JOB_DIR && f != FS_JOB_CMD;
}

int fs_jobs_getattr(struct sbx *sb, const char *job, enum fs_job_file f,
		    struct stat *st)
{
	struct fs_jobs *js = fs_jobs_of(sb);
	char name[FS_JOB_NAME_MAX + 1], text[FS_JOB_MSG_MAX + 128];
	struct fs_job *j;
	int n, rc;

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
	j = lookup(sb, js, job);
	if (j == NULL)
		return -ENOENT;
	if (followed_file(f) && f != FS_JOB_CTL) {
		rc = fs_jobs_follow(js, j);
		if (rc < 0) {
			fs_job_unref(j);
			return rc;
		}
	}
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
		sbfs_synth_stat(sb->fs, st, false,
				sbfs_control_mode(sb->fs, false), 0);
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
	struct fs_jobs *js = fs_jobs_of(sb);
	char latest[FS_JOB_NAME_MAX + 1];
	struct fs_job *j;
	char **names;
	size_t i, k, n;

	if (job != NULL) {
		j = lookup(sb, js, job);
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
			goto out;
	/* The agent's jobs this mount has not looked at yet. */
	if (listing_fresh(sb, js)) {
		bool full = false;

		pthread_mutex_lock(&js->lock);
		for (k = 0; !full && k < js->listing.n; k++) {
			const char *id = js->listing.jobs[k].job_id;
			bool have = !fs_job_name_ok(id);

			for (i = 0; !have && i < n; i++)
				have = strcmp(names[i], id) == 0;
			if (!have)
				full = filler(buf, id, NULL, 0, 0) != 0;
		}
		pthread_mutex_unlock(&js->lock);
		if (full)
			goto out;
	}
	if (fs_jobs_latest(js, latest, sizeof(latest)))
		(void)filler(buf, "latest", NULL, 0, 0);
out:
	strv_free(names, n);
	return 0;
}

int fs_jobs_readlink(struct sbx *sb, char *buf, size_t size)
{
	char name[FS_JOB_NAME_MAX + 1];

	if (size == 0)
		return -EINVAL;
	if (!fs_jobs_latest(fs_jobs_of(sb), name, sizeof(name)))
		return -ENOENT;
	strlcpy_s(buf, name, size);
	return 0;
}

int fs_jobs_open(struct sbx *sb, const char *job, enum fs_job_file f,
		 struct fuse_file_info *fi)
{
	struct fs_jobs *js = fs_jobs_of(sb);
	struct job_handle *h;
	struct fs_job *j;
	int acc = fi->flags & O_ACCMODE, rc;

	if (job == NULL || f == FS_JOB_DIR)
		return -EISDIR;
	if (f == FS_JOB_CTL ? acc == O_RDONLY : acc != O_RDONLY)
		return -EACCES;
	j = lookup(sb, js, job);
	if (j == NULL)
		return -ENOENT;
	if (followed_file(f)) {
		rc = fs_jobs_follow(js, j);
		if (rc < 0) {
			fs_job_unref(j);
			return rc;
		}
	}
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

/*
 * stdout or stderr: what is there at off, else wait while the job runs.
 * A reader at the end never waits on what cannot come: output the mount
 * could not keep is an error (ENOSPC, EDQUOT as they are, anything else
 * EIO), never the end of a shorter file, and so is an agent silent for
 * longer than the mount's timeout.
 */
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
	       !j->stop && !j->stale && j->keep_err == 0) {
		fs_job_wait(j, WAIT_SLICE_MS);
		if (sbfs_interrupted()) {
			rc = -EINTR;
			goto out;
		}
	}
	if ((uint64_t)off >= s->size && j->keep_err != 0) {
		rc = j->keep_err == ENOSPC || j->keep_err == EDQUOT
			     ? -j->keep_err
			     : -EIO;
		goto out;
	}
	if ((uint64_t)off >= s->size && j->state == FS_JOB_ST_RUNNING &&
	    j->stale) {
		rc = -EIO;
		goto out;
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
	while (j->state == FS_JOB_ST_RUNNING && !j->stop && !j->stale) {
		fs_job_wait(j, WAIT_SLICE_MS);
		if (sbfs_interrupted()) {
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

/*
 * A job that ended made its changes to the files before its end reached
 * this mount: before the end is shown, the change events the agent had
 * by then are applied, so that what a reader does next (stat, cat of the
 * job's output file) sees them (doc/internals/cache.md).
 */
static void settle(struct sbx *sb, struct fs_job *j)
{
	bool first;

	pthread_mutex_lock(&j->lock);
	first = j->state != FS_JOB_ST_RUNNING && !j->settled;
	if (first)
		j->settled = true;
	pthread_mutex_unlock(&j->lock);
	if (first)
		(void)sbfs_events_sync(sb, SBFS_EVENTS_SETTLE_MS);
}

int fs_jobs_read(struct sbx *sb, const char *job, enum fs_job_file f, char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);
	int rc;

	(void)job;
	if (h == NULL)
		return -EBADF;
	switch (f) {
	case FS_JOB_CMD:
		return serve(h->job->cmd, h->job->cmd_len, buf, size, off);
	case FS_JOB_STDOUT:
		rc = read_stream(h->job, false, buf, size, off);
		break;
	case FS_JOB_STDERR:
		rc = read_stream(h->job, true, buf, size, off);
		break;
	case FS_JOB_STATUS:
		rc = read_status(h, buf, size, off);
		break;
	case FS_JOB_EXIT:
		rc = read_exit(h->job, buf, size, off);
		break;
	case FS_JOB_DIR:
		return -EISDIR;
	default:
		return -EBADF;
	}
	settle(sb, h->job);
	return rc;
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
	if (rc < 0 && !fs_job_not_found(&err))
		return fs_jobs_fail(sb->fs, sb->id, "cancel", j->name, &err);
	/* The agent's final poll answer decides the status: have the
	 * poller ask now, and give it a moment so that a status read
	 * right after the cancel shows it. */
	until = clock_mono_ms() + CANCEL_WAIT_MS;
	pthread_mutex_lock(&j->lock);
	j->kick = true;
	pthread_cond_broadcast(&j->cond);
	while (j->state == FS_JOB_ST_RUNNING && !j->stop &&
	       clock_mono_ms() < until && !sbfs_interrupted())
		fs_job_wait(j, WAIT_SLICE_MS);
	pthread_mutex_unlock(&j->lock);
	return 0;
}

int fs_jobs_write(struct sbx *sb, const char *job, enum fs_job_file f,
		  const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct job_handle *h = job_handle(fi);
	int rc;

	(void)job;
	(void)off;
	if (h == NULL || f != FS_JOB_CTL)
		return -EBADF;
	if (size > INT_MAX)
		return -EINVAL;
	if (!sbfs_ctl_word(buf, size, "cancel"))
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
