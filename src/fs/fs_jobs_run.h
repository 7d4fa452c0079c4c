/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs_run: what the parts of exec and jobs/ share that needs the
 * mount (fs_jobs_i.h has the FUSE-free records): fs_jobs.c (the job files
 * and the agent's listing), fs_exec.c (exec, starting a job) and
 * fs_jobs_poll.c (the pollers).
 *
 * Thread-safety: any thread. A sandbox's job table (struct fs_jobs)
 * guards itself with js->lock, a job with j->lock; functions say which
 * lock they need. Errors are negative errnos, logged once.
 */
#ifndef SBFS_FS_JOBS_RUN_H
#define SBFS_FS_JOBS_RUN_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>

#include "client/sbx_error.h"
#include "fs/fs_i.h"
#include "fs/fs_jobs_i.h"

/* A blocked read wakes this often to notice an interrupted request. */
#define WAIT_SLICE_MS 200

/* sb's job table, made on first use. */
struct fs_jobs *fs_jobs_of(struct sbx *sb);
/* Wait on the job's condition variable (j->lock held) for at most ms. */
void fs_job_wait(struct fs_job *j, long ms);
/* sbfs_fail's errno as a negative value, whichever sign it comes with
 * (-EIO when it gives none). */
int fs_jobs_fail(struct sbfs *fs, const char *id, const char *op,
		 const char *path, const struct sbx_error *err);
/* The agent answered that it does not know the job. */
bool fs_job_not_found(const struct sbx_error *e);

/* Follow j (started here, or adopted and not followed yet) with a poller
 * thread of its own, which holds a reference until it ends. A thread
 * that cannot start leaves the job unknown (logged). */
void fs_jobs_poller_start(struct fs_jobs *js, struct fs_job *j);
/* Follow an adopted job and wait, within the mount's timeout, until the
 * agent has said how it is (an adopted job that ended long ago would
 * otherwise read as running). -EINTR when the caller gave up. */
int fs_jobs_follow(struct fs_jobs *js, struct fs_job *j);

#endif
