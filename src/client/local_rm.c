/* SPDX-License-Identifier: MIT */
/*
 * local_rm: removing a sandbox (local_ctl_rm) and its state directory:
 * the session root first, in place, then the directory renamed out of the
 * namespace (".rm-<id>-<pid>-<ms>") and removed, and what an earlier
 * rm left renamed away
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "client/local_ctl_i.h"

int local_remove_dir(struct local_ctl *c, const char *id, struct local_err *err)
{
	char *dir = local_state_path(c->state_dir, id, LOCAL_PATH_DIR);
	char *tomb = xasprintf("%s/sandboxes/.rm-%s-%ld-%lld", c->state_dir, id,
			       (long)getpid(), clock_mono_ms());
	int rc;

	if (rename(dir, tomb) == 0)
		rc = local_state_rmtree(tomb, err);
	else
		rc = local_state_rmtree(dir, err);
	free(dir);
	free(tomb);
	return rc;
}

/* Finish removals of id that an earlier rm left as ".rm-<id>-*" (it
 * failed after the sandbox's directory was renamed away). */
static int sweep_tombs(struct local_ctl *c, const char *id, bool *found,
		       struct local_err *err)
{
	char *sb = local_state_path(c->state_dir, NULL, LOCAL_PATH_SANDBOXES);
	char *prefix = xasprintf(".rm-%s-", id);
	size_t plen = strlen(prefix);
	struct dirent *de;
	int rc = 0, r;
	DIR *d;

	d = opendir(sb);
	if (d == NULL)
		goto out;
	while ((de = readdir(d)) != NULL) {
		const char *rest = de->d_name + plen;
		char *tomb;

		/* ".rm-<id>-<pid>-<ms>": not another sandbox's whose name
		 * starts with id and a '-'. */
		if (strncmp(de->d_name, prefix, plen) != 0 ||
		    strspn(rest, "0123456789") == 0 ||
		    rest[strspn(rest, "0123456789")] != '-' ||
		    strspn(rest + strspn(rest, "0123456789") + 1,
			   "0123456789") !=
			    strlen(rest + strspn(rest, "0123456789") + 1))
			continue;
		*found = true;
		tomb = xasprintf("%s/%s", sb, de->d_name);
		r = local_state_rmtree(tomb, err);
		free(tomb);
		if (r < 0 && rc == 0)
			rc = r;
	}
	closedir(d);
out:
	free(sb);
	free(prefix);
	return rc;
}

int local_ctl_rm(struct local_ctl *c, const char *id, bool force,
		 struct local_err *err)
{
	struct proto_record rec;
	struct local_proc agent = LOCAL_PROC_NONE;
	char *root = NULL;
	int lock = -1, rc;
	bool running, live, tombs = false;

	proto_record_init(&rec);
	rc = local_id_check(id, err);
	if (rc < 0)
		return rc;
	rc = local_state_lock(c->state_dir, id, c->lock_timeout_ms, &lock);
	if (rc == -ENOENT) {
		/* Only what an earlier rm left may be there. */
		rc = sweep_tombs(c, id, &tombs, err);
		if (rc == 0 && !tombs)
			rc = local_err_set(err, -ENOENT,
					   "no sandbox '%s' in %s", id,
					   c->state_dir);
		return rc;
	}
	if (rc < 0)
		return local_err_set(err, rc, "sandbox '%s' is busy (lock: %s)",
				     id, strerror(-rc));
	root = local_state_path(c->state_dir, id, LOCAL_PATH_ROOT);
	rc = local_state_read(c->state_dir, id, &rec, err);
	if (rc < 0) {
		if (!force) {
			size_t len = err ? strlen(err->msg) : 0;

			if (err != NULL)
				snprintf(err->msg + len, sizeof(err->msg) - len,
					 " (rm -f removes it)");
			goto out;
		}
		/* No record to trust: stop the agent that holds the
		 * sandbox's agent lock, if one does. */
		rec.id = xstrdup(id);
		if (local_agent_proc(c, &rec, &agent) == 1) {
			rc = local_stop_agent(&agent, c->stop_timeout_ms, err);
			if (rc < 0)
				goto out;
		}
	} else {
		live = local_agent_proc(c, &rec, &agent) == 1;
		/* A Running agent sandbox whose agent died is stopped. */
		running = live || rec.state == PROTO_RECORD_RESUMING ||
			  rec.state == PROTO_RECORD_STOPPING ||
			  (rec.state == PROTO_RECORD_RUNNING &&
			   proto_record_transport(&rec) != PROTO_RECORD_AGENT);
		if (running && !force) {
			rc = local_err_set(err, -EBUSY,
					   "sandbox '%s' is running: stop it "
					   "first, or use rm -f",
					   id);
			goto out;
		}
		if (live) {
			rc = local_stop_agent(&agent, c->stop_timeout_ms, err);
			if (rc < 0)
				goto out;
		}
		rec.state = PROTO_RECORD_DELETING;
		rec.agent_pid = 0;
		rc = local_state_write(c->state_dir, &rec, err);
		if (rc < 0)
			goto out;
	}
	if (err != NULL)
		err->msg[0] = '\0';
	/*
	 * The session root first, in place: it is what may fail (a file
	 * system mounted below it, a file that cannot be removed), and
	 * then the sandbox stays listed as Deleting, for an rm that
	 * finishes the job.
	 */
	rc = local_state_rmtree(root, err);
	if (rc == 0)
		rc = local_remove_dir(c, id, err);
	if (rc == 0)
		rc = sweep_tombs(c, id, &tombs, err);
	if (rc == 0 && rec.dynamic_user && rec.exec_uid > 0) {
		char *dir = local_state_path(c->state_dir, id, LOCAL_PATH_DIR);

		local_release_identity((unsigned long)rec.exec_uid, dir);
		free(dir);
	}
out:
	local_proc_close(&agent);
	local_state_unlock(lock);
	proto_record_cleanup(&rec);
	free(root);
	return rc;
}
