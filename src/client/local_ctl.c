/* SPDX-License-Identifier: MIT */
/*
 * local_ctl: create, start, stop and restart local sandboxes, and ask how
 * one is doing (the files it is made of: local_ctl_i.h). The state
 * directory's layout and disciplines are local_state's; this file holds
 * setup, the exec user and identities of their own, create, and the state
 * transitions. It never reads the credential the agent writes.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fdio.h"
#include "common/fileio.h"
#include "common/limits.h"
#include "common/proto.h"
#include "common/sleep.h"
#include "common/xalloc.h"
#include "client/local_ctl.h"
#include "client/local_ctl_i.h"

#ifndef SBFS_SBINDIR
#define SBFS_SBINDIR SBFS_BINDIR
#endif

char *local_utc_now(void)
{
	char text[32];
	time_t t = time(NULL);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return xstrdup("1970-01-01T00:00:00Z");
	return xstrdup(text);
}

/* ---- setup -------------------------------------------------------------- */

static bool executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

/* The sandbox-agent binary (heap), as local_ctl_init says. */
static char *agent_path(void)
{
	const char *env = getenv("SANDBOXFS_AGENT");
	char self[PATH_MAX], *slash, *cand;
	ssize_t n;

	if (env != NULL && *env != '\0') {
		/* The agent is started from "/": a relative path would
		 * name something else there. */
		if (env[0] != '/' && strchr(env, '/') != NULL &&
		    realpath(env, self) != NULL)
			return xstrdup(self);
		return xstrdup(env);
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash != NULL) {
			*slash = '\0';
			cand = xasprintf("%s/%s", self, LOCAL_AGENT_NAME);
			if (executable(cand))
				return cand;
			free(cand);
		}
	}
	cand = xasprintf("%s/%s", SBFS_SBINDIR, LOCAL_AGENT_NAME);
	if (executable(cand))
		return cand;
	free(cand);
	return xasprintf("%s/%s", SBFS_BINDIR, LOCAL_AGENT_NAME);
}

int local_ctl_init(struct local_ctl *c, const char *state_dir_option,
		   struct local_err *err)
{
	char *dir = NULL;
	int rc;

	rc = local_state_dir_resolve(state_dir_option, &dir);
	if (rc < 0)
		return local_err_set(err, rc,
				     "no state directory: give --state-dir, "
				     "or set SANDBOXFS_STATE_DIR or HOME");
	memset(c, 0, sizeof(*c));
	c->state_dir = dir;
	c->agent = agent_path();
	c->start_timeout_ms = LOCAL_CTL_START_TIMEOUT_MS;
	c->stop_timeout_ms = LOCAL_CTL_STOP_TIMEOUT_MS;
	c->lock_timeout_ms = LOCAL_LOCK_TIMEOUT_MS;
	return 0;
}

void local_ctl_cleanup(struct local_ctl *c)
{
	if (c == NULL)
		return;
	free(c->state_dir);
	free(c->agent);
	memset(c, 0, sizeof(*c));
}

/* ---- the exec user ------------------------------------------------------ */

static bool all_digits(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return n > 0 && n < 11;
}

/* Fill rec's execUser/execUid/execGid from NAME or UID:GID (NULL: the
 * default user). */
static int resolve_user(const char *spec, struct proto_record *rec,
			struct local_err *err)
{
	struct passwd pw, *res = NULL;
	char pwbuf[4096];
	const char *colon;
	unsigned long uid, gid;
	const char *name;

	if (spec == NULL || *spec == '\0') {
		name = LOCAL_CTL_DEFAULT_USER;
		uid = gid = LOCAL_CTL_DEFAULT_ID;
		if (getpwnam_r(name, &pw, pwbuf, sizeof(pwbuf), &res) == 0 &&
		    res != NULL) {
			uid = res->pw_uid;
			gid = res->pw_gid;
		}
	} else if ((colon = strchr(spec, ':')) != NULL &&
		   all_digits(spec, (size_t)(colon - spec)) &&
		   all_digits(colon + 1, strlen(colon + 1))) {
		uid = strtoul(spec, NULL, 10);
		gid = strtoul(colon + 1, NULL, 10);
		name = spec;
		if (getpwuid_r((uid_t)uid, &pw, pwbuf, sizeof(pwbuf), &res) ==
			    0 &&
		    res != NULL)
			name = res->pw_name;
	} else {
		if (getpwnam_r(spec, &pw, pwbuf, sizeof(pwbuf), &res) != 0 ||
		    res == NULL)
			return local_err_set(err, -ENOENT, "unknown user '%s'",
					     spec);
		name = res->pw_name;
		uid = res->pw_uid;
		gid = res->pw_gid;
	}
	if (uid == 0 || uid >= 4294967295UL || gid >= 4294967295UL)
		return local_err_set(err, -EINVAL,
				     "refusing user '%s': commands never run "
				     "as root",
				     spec ? spec : name);
	if (proto_record_set_str(&rec->exec_user, name) < 0)
		return local_err_set(err, -ENOMEM, "out of memory");
	rec->exec_uid = (long)uid;
	rec->exec_gid = (long)gid;
	return 0;
}

/* ---- identities of their own -------------------------------------------- */

/* How long a create waits for another one's allocation. */
#define DYNAMIC_LOCK_MS 10000L

static char *claim_path(unsigned long uid)
{
	return xasprintf("%s/%lu", LOCAL_CTL_DYNAMIC_REGISTRY, uid);
}

/* A small file's text (heap, NUL-terminated), or NULL. */
static char *slurp(const char *path, size_t max)
{
	char *text;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return NULL;
	text = xmalloc(max + 1);
	n = read(fd, text, max);
	close(fd);
	if (n < 0) {
		free(text);
		return NULL;
	}
	text[n] = '\0';
	return text;
}

/*
 * Is uid still the identity of the sandbox its claim names? No when the
 * claim is unreadable, its directory is gone, or its record names another
 * uid; yes while a record is missing or unreadable (a create still runs,
 * or someone must look), so a uid is never handed out twice.
 */
static bool claim_live(unsigned long uid)
{
	char *path = claim_path(uid), *dir, *rec = NULL, *text = NULL;
	struct proto_record r;
	struct stat st;
	bool live = true;

	dir = slurp(path, PATH_MAX);
	free(path);
	if (dir == NULL)
		return errno != ENOENT;
	dir[strcspn(dir, "\n")] = '\0';
	if (dir[0] != '/' || (lstat(dir, &st) < 0 && errno == ENOENT)) {
		live = false;
		goto out;
	}
	rec = xasprintf("%s/sandbox.json", dir);
	text = slurp(rec, PROTO_RECORD_MAX_BYTES);
	proto_record_init(&r);
	if (text != NULL &&
	    proto_record_decode(text, strlen(text), &r, NULL) == 0 &&
	    r.exec_uid >= 0 && (unsigned long)r.exec_uid != uid)
		live = false;
	proto_record_cleanup(&r);
out:
	free(dir);
	free(rec);
	free(text);
	return live;
}

/*
 * Does any process run as uid (its real, effective, saved or file system
 * uid, as /proc says)? A claim whose directory is gone may still have its
 * sandbox's processes running (the directory was deleted under a running
 * agent): their uid is not free until they are gone.
 */
static bool uid_running(unsigned long uid)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	bool found = false;

	if (d == NULL)
		return false;
	while (!found && (de = readdir(d)) != NULL) {
		unsigned long ids[4];
		char path[sizeof(de->d_name) + 16], *text, *line;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		text = fdio_read_text(path, 4096);
		if (text == NULL)
			continue;
		line = strstr(text, "\nUid:");
		if (line != NULL && sscanf(line + 5, "%lu %lu %lu %lu", &ids[0],
					   &ids[1], &ids[2], &ids[3]) == 4)
			found = ids[0] == uid || ids[1] == uid ||
				ids[2] == uid || ids[3] == uid;
		free(text);
	}
	closedir(d);
	return found;
}

static int lock_registry(int *out)
{
	long long deadline;
	char *path;
	int fd;

	if ((mkdir(LOCAL_STATE_ROOT_DEFAULT, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(LOCAL_CTL_DYNAMIC_REGISTRY, 0700) < 0 && errno != EEXIST))
		return -errno;
	path = xasprintf("%s/.lock", LOCAL_CTL_DYNAMIC_REGISTRY);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	free(path);
	if (fd < 0)
		return -errno;
	deadline = clock_mono_ms() + DYNAMIC_LOCK_MS;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) ||
		    clock_mono_ms() >= deadline) {
			int err = errno == EWOULDBLOCK ? ETIMEDOUT : errno;

			close(fd);
			return -err;
		}
		sleep_ms(LOCAL_POLL_MS);
	}
	*out = fd;
	return 0;
}

/*
 * Allocate the identity of the sandbox whose directory is dir: the first
 * uid of the range that no user or group of the system has, no live
 * claim holds and no process runs as, claimed for dir under the registry's lock (so concurrent
 * creates, in any state directory, never get the same one).
 */
static int alloc_identity(const char *dir, unsigned long *out,
			  struct local_err *err)
{
	struct passwd pw, *pres;
	struct group gr, *gres;
	char buf[4096], *path, *text;
	unsigned long i, uid = 0;
	int lock = -1, rc;

	rc = lock_registry(&lock);
	if (rc < 0)
		return local_err_set(err, rc, "cannot lock %s: %s",
				     LOCAL_CTL_DYNAMIC_REGISTRY, strerror(-rc));
	rc = -ENOSPC;
	for (i = 0; i < LOCAL_CTL_DYNAMIC_COUNT; i++) {
		uid = LOCAL_CTL_DYNAMIC_BASE + i;
		pres = NULL;
		gres = NULL;
		if ((getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &pres) ==
			     0 &&
		     pres != NULL) ||
		    (getgrgid_r((gid_t)uid, &gr, buf, sizeof(buf), &gres) ==
			     0 &&
		     gres != NULL) ||
		    claim_live(uid) || uid_running(uid))
			continue;
		path = claim_path(uid);
		text = xasprintf("%s\n", dir);
		rc = file_write_atomic(path, text, strlen(text), 0600);
		free(path);
		free(text);
		if (rc < 0)
			local_err_set(err, rc, "cannot claim uid %lu in %s: %s",
				      uid, LOCAL_CTL_DYNAMIC_REGISTRY,
				      strerror(-rc));
		break;
	}
	if (rc == -ENOSPC)
		local_err_set(err, rc,
			      "no identity is free: all %lu uids from %lu "
			      "belong to sandboxes",
			      LOCAL_CTL_DYNAMIC_COUNT, LOCAL_CTL_DYNAMIC_BASE);
	if (rc == 0)
		*out = uid;
	close(lock);
	return rc;
}

/* Give uid back, if its claim still names dir. */
void local_release_identity(unsigned long uid, const char *dir)
{
	char *path = claim_path(uid), *text;
	int lock = -1;

	if (lock_registry(&lock) == 0) {
		text = slurp(path, PATH_MAX);
		if (text != NULL) {
			text[strcspn(text, "\n")] = '\0';
			if (strcmp(text, dir) == 0)
				unlink(path);
		}
		free(text);
		close(lock);
	}
	free(path);
}

/* ---- create ------------------------------------------------------------- */

/* The record's limits and network: what opts asks, else the defaults. */
static int set_limits(const struct local_create_opts *opts,
		      struct proto_record *rec, struct local_err *err)
{
	if ((opts->pids != 0 && opts->pids < SBX_MIN_PIDS) ||
	    opts->pids > 4194304)
		return local_err_set(
			err, -EINVAL, "--pids: %llu is not %d to 4194304",
			(unsigned long long)opts->pids, SBX_MIN_PIDS);
	if (opts->memory != 0 && opts->memory < SBX_MIN_MEMORY)
		return local_err_set(err, -EINVAL,
				     "--memory: %llu bytes is less than 16M",
				     (unsigned long long)opts->memory);
	if (opts->tmp_size != 0 && opts->tmp_size < SBX_MIN_TMP_SIZE)
		return local_err_set(err, -EINVAL,
				     "--tmp-size: %llu bytes is less than 1M",
				     (unsigned long long)opts->tmp_size);
	if (opts->network != NULL && strcmp(opts->network, "user") != 0 &&
	    strcmp(opts->network, "none") != 0)
		return local_err_set(err, -EINVAL,
				     "--network: '%s' is not user or none",
				     opts->network);
	rec->pids = opts->pids ? opts->pids : SBX_DEFAULT_PIDS;
	rec->memory = opts->memory ? opts->memory : sbx_default_memory();
	rec->tmp_size = opts->tmp_size ? opts->tmp_size : SBX_DEFAULT_TMP_SIZE;
	if (proto_record_set_str(&rec->network,
				 opts->network ? opts->network : "user") < 0)
		return local_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

int local_ctl_create(struct local_ctl *c, const char *id,
		     const struct local_create_opts *opts,
		     struct local_err *err)
{
	return local_ctl_create_progress(c, id, opts, NULL, NULL, err);
}

int local_id_check(const char *id, struct local_err *err)
{
	if (local_state_id_valid(id))
		return 0;
	return local_err_set(err, -EINVAL,
			     "invalid sandbox name '%s': use 1 to %d letters, "
			     "digits, '_' or '-'",
			     id ? id : "", LOCAL_ID_MAX);
}

/* What a create asks, checked before anything is made; rec gets the exec
 * user asked for and the limits. */
static int create_check(const char *id, const struct local_create_opts *opts,
			bool root_user, struct proto_record *rec,
			struct local_err *err)
{
	struct stat st;
	int rc;

	rc = local_id_check(id, err);
	if (rc < 0)
		return rc;
	if (opts->user != NULL && !root_user)
		return local_err_set(err, -EPERM,
				     "--user needs root: without it, commands "
				     "run as the calling user");
	if (root_user && opts->user != NULL) {
		rc = resolve_user(opts->user, rec, err);
		if (rc < 0)
			return rc;
	}
	rc = set_limits(opts, rec, err);
	if (rc < 0)
		return rc;
	if (opts->from != NULL && stat(opts->from, &st) < 0) {
		rc = -errno;
		return local_err_set(err, rc, "cannot copy %s: %s", opts->from,
				     strerror(-rc));
	}
	if (opts->from != NULL && !S_ISDIR(st.st_mode))
		return local_err_set(err, -ENOTDIR, "%s is not a directory",
				     opts->from);
	return 0;
}

/* root/ (the exec user's when we are root) and boot/, and the copy of
 * opts->from into root/, telling fn. */
static int create_tree(struct local_ctl *c, const char *id,
		       const struct local_create_opts *opts, bool root_user,
		       const struct proto_record *rec, local_progress_fn *fn,
		       void *arg, struct local_err *err)
{
	char *root = local_state_path(c->state_dir, id, LOCAL_PATH_ROOT);
	char *boot = local_state_path(c->state_dir, id, LOCAL_PATH_BOOT);
	struct local_copy_progress nothing = {0, 0};
	int rc = 0;

	if (mkdir(root, 0755) < 0 || mkdir(boot, 0700) < 0 ||
	    (root_user &&
	     chown(root, (uid_t)rec->exec_uid, (gid_t)rec->exec_gid) < 0)) {
		rc = -errno;
		local_err_set(err, rc, "cannot create %s: %s", root,
			      strerror(-rc));
	} else if (opts->from != NULL) {
		rc = local_copy_tree(opts->from, root, root_user,
				     (uid_t)rec->exec_uid, (gid_t)rec->exec_gid,
				     fn, arg, err);
	} else if (fn != NULL) {
		rc = fn(arg, &nothing);
		if (rc < 0)
			local_err_set(err, rc, "interrupted");
	}
	free(root);
	free(boot);
	return rc;
}

int local_ctl_create_progress(struct local_ctl *c, const char *id,
			      const struct local_create_opts *opts,
			      local_progress_fn *fn, void *arg,
			      struct local_err *err)
{
	static const struct local_create_opts none;
	bool root_user = geteuid() == 0;
	struct proto_record rec;
	unsigned long dyn = 0;
	char *dir = NULL;
	int lock = -1, rc;
	bool made = false;

	proto_record_init(&rec);
	if (opts == NULL)
		opts = &none;
	rc = create_check(id, opts, root_user, &rec, err);
	if (rc < 0)
		goto out;
	rc = local_state_prepare(c->state_dir, err);
	if (rc < 0)
		goto out;
	dir = local_state_path(c->state_dir, id, LOCAL_PATH_DIR);
	if (mkdir(dir, 0700) < 0) {
		rc = -errno;
		if (rc == -EEXIST)
			local_err_set(err, rc, "sandbox '%s' already exists",
				      id);
		else
			local_err_set(err, rc, "cannot create %s: %s", dir,
				      strerror(-rc));
		goto out;
	}
	made = true;
	/* 0700 whatever the umask. */
	rc = local_state_secure(c->state_dir, id, err);
	if (rc < 0)
		goto out;
	rc = local_state_lock(c->state_dir, id, 0, &lock);
	if (rc < 0) {
		local_err_set(err, rc, "cannot lock sandbox '%s': %s", id,
			      strerror(-rc));
		goto out;
	}
	if (proto_record_set_str(&rec.id, id) < 0 ||
	    (!opts->native &&
	     proto_record_set_label(&rec, PROTO_TRANSPORT_LABEL,
				    PROTO_TRANSPORT_AGENT) < 0)) {
		rc = local_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	if (root_user && opts->user == NULL) {
		/* The sandbox's own identity, recorded before anything is
		 * made, so the claim always has a record to match. */
		rc = alloc_identity(dir, &dyn, err);
		if (rc < 0)
			goto out;
		rec.exec_uid = rec.exec_gid = (long)dyn;
		rec.dynamic_user = true;
	}
	rec.created_at = local_utc_now();
	rec.state = PROTO_RECORD_CREATING;
	rec.strict_v1 = opts->strict_v1 && !opts->native;
	rc = local_state_write(c->state_dir, &rec, err);
	if (rc == 0)
		rc = create_tree(c, id, opts, root_user, &rec, fn, arg, err);
	if (rc < 0)
		goto out;
	rec.state = PROTO_RECORD_STOPPED;
	rc = local_state_write(c->state_dir, &rec, err);
out:
	if (rc < 0 && made) {
		struct local_err ignored;

		local_remove_dir(c, id, &ignored);
		if (dyn != 0)
			local_release_identity(dyn, dir);
	}
	local_state_unlock(lock);
	proto_record_cleanup(&rec);
	free(dir);
	return rc;
}

/* ---- start and stop ----------------------------------------------------- */

static int record_stopped(struct local_ctl *c, struct proto_record *rec,
			  struct local_err *err)
{
	rec->state = PROTO_RECORD_STOPPED;
	rec->agent_pid = 0;
	if (proto_record_set_str(&rec->agent_url, NULL) < 0)
		return -ENOMEM;
	return local_state_write(c->state_dir, rec, err);
}

static int check_startable(const struct proto_record *rec,
			   struct local_err *err)
{
	const char *label = proto_record_label(rec, PROTO_TRANSPORT_LABEL);

	if (proto_record_transport(rec) == PROTO_RECORD_INVALID)
		return local_err_set(err, -EPROTO,
				     "sandbox '%s' has an unknown transport "
				     "label %s=%s",
				     rec->id, PROTO_TRANSPORT_LABEL, label);
	if (rec->state == PROTO_RECORD_CREATING ||
	    rec->state == PROTO_RECORD_DELETING)
		return local_err_set(err, -EBUSY,
				     "sandbox '%s' is %s (if that was "
				     "interrupted, remove it with rm -f)",
				     rec->id,
				     rec->state == PROTO_RECORD_CREATING
					     ? "being created"
					     : "being deleted");
	return 0;
}

static int stop_locked(struct local_ctl *c, struct proto_record *rec,
		       struct local_err *err)
{
	struct local_proc agent = LOCAL_PROC_NONE;
	bool live;
	int rc;

	rc = check_startable(rec, err);
	if (rc < 0)
		return rc;
	if (proto_record_transport(rec) == PROTO_RECORD_NATIVE) {
		if (rec->state == PROTO_RECORD_STOPPED)
			return 0;
		return record_stopped(c, rec, err);
	}
	live = local_agent_proc(c, rec, &agent) == 1;
	if (rec->state != PROTO_RECORD_STOPPED || live) {
		rec->state = PROTO_RECORD_STOPPING;
		rc = local_state_write(c->state_dir, rec, err);
		if (rc < 0)
			goto out;
	}
	if (live) {
		rc = local_stop_agent(&agent, c->stop_timeout_ms, err);
		if (rc < 0)
			goto out;
	}
	local_boot_clear(c, rec->id);
	rc = record_stopped(c, rec, err);
out:
	local_proc_close(&agent);
	return rc;
}

static int start_locked(struct local_ctl *c, struct proto_record *rec,
			struct local_err *err)
{
	struct local_proc agent = LOCAL_PROC_NONE;
	char *url = NULL;
	int rc;

	rc = check_startable(rec, err);
	if (rc < 0)
		return rc;
	rc = local_state_secure(c->state_dir, rec->id, err);
	if (rc < 0)
		return rc;
	if (proto_record_transport(rec) == PROTO_RECORD_NATIVE) {
		if (rec->state == PROTO_RECORD_RUNNING)
			return 0;
		rec->state = PROTO_RECORD_RUNNING;
		rec->boot_count++;
		free(rec->started_at);
		rec->started_at = local_utc_now();
		return local_state_write(c->state_dir, rec, err);
	}
	if (local_agent_proc(c, rec, &agent) == 1) {
		if (rec->state == PROTO_RECORD_RUNNING &&
		    rec->agent_url != NULL) {
			local_proc_close(&agent);
			goto out; /* already running */
		}
		/* Left over from an interrupted transition. */
		rc = local_stop_agent(&agent, c->stop_timeout_ms, err);
		if (rc < 0)
			goto out;
	}
	rec->state = PROTO_RECORD_RESUMING;
	rec->agent_pid = 0;
	if (proto_record_set_str(&rec->agent_url, NULL) < 0) {
		rc = local_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	rc = local_state_write(c->state_dir, rec, err);
	if (rc < 0)
		goto out;
	if (err != NULL)
		err->msg[0] = '\0';
	rc = local_boot(c, rec, &url, err);
	if (rc == -ECHILD)
		rc = -EIO;
	if (rc < 0) {
		struct local_err ignored;

		local_boot_clear(c, rec->id);
		record_stopped(c, rec, &ignored);
		goto out;
	}
	if (proto_record_set_str(&rec->agent_url, url) < 0) {
		rc = local_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	rec->state = PROTO_RECORD_RUNNING;
	/* No port: the agent listens on its socket only. */
	rec->port = 0;
	rec->boot_count++;
	free(rec->started_at);
	rec->started_at = local_utc_now();
	rc = local_state_write(c->state_dir, rec, err);
out:
	free(url);
	return rc;
}

typedef int (*locked_fn)(struct local_ctl *c, struct proto_record *rec,
			 struct local_err *err);

/* Lock, read, run fns in order, unlock. */
static int transition(struct local_ctl *c, const char *id, locked_fn first,
		      locked_fn second, struct local_err *err)
{
	struct proto_record rec;
	int lock = -1, rc;

	proto_record_init(&rec);
	rc = local_id_check(id, err);
	if (rc < 0)
		return rc;
	rc = local_state_lock(c->state_dir, id, c->lock_timeout_ms, &lock);
	if (rc == -ENOENT)
		return local_err_set(err, rc, "no sandbox '%s' in %s", id,
				     c->state_dir);
	if (rc < 0)
		return local_err_set(err, rc, "sandbox '%s' is busy (lock: %s)",
				     id, strerror(-rc));
	rc = local_state_read(c->state_dir, id, &rec, err);
	if (rc == 0)
		rc = first(c, &rec, err);
	if (rc == 0 && second != NULL)
		rc = second(c, &rec, err);
	proto_record_cleanup(&rec);
	local_state_unlock(lock);
	return rc;
}

int local_ctl_start(struct local_ctl *c, const char *id, struct local_err *err)
{
	return transition(c, id, start_locked, NULL, err);
}

int local_ctl_stop(struct local_ctl *c, const char *id, struct local_err *err)
{
	return transition(c, id, stop_locked, NULL, err);
}

int local_ctl_restart(struct local_ctl *c, const char *id,
		      struct local_err *err)
{
	return transition(c, id, stop_locked, start_locked, err);
}

/* ---- status ------------------------------------------------------------ */

int local_ctl_status(struct local_ctl *c, const char *id,
		     struct local_status *out, struct local_err *err)
{
	struct local_proc agent = LOCAL_PROC_NONE;
	struct local_status s;
	int rc;

	memset(&s, 0, sizeof(s));
	rc = local_state_read(c->state_dir, id, &s.rec, err);
	if (rc < 0)
		return rc;
	if (proto_record_transport(&s.rec) != PROTO_RECORD_NATIVE) {
		s.alive = local_agent_proc(c, &s.rec, &agent) == 1;
		s.pid = s.alive ? agent.pid : (pid_t)s.rec.agent_pid;
		local_proc_close(&agent);
		s.died = !s.alive && s.rec.state == PROTO_RECORD_RUNNING;
	}
	if (s.rec.agent_url != NULL && !s.died &&
	    local_ctl_health(s.rec.agent_url, LOCAL_CTL_HEALTH_TIMEOUT_MS,
			     &s.health) == 0)
		s.answered = true;
	*out = s;
	return 0;
}

bool local_ctl_agent_died(struct local_ctl *c, const struct proto_record *rec)
{
	return proto_record_transport(rec) == PROTO_RECORD_AGENT &&
	       rec->state == PROTO_RECORD_RUNNING &&
	       local_ctl_agent_alive(c->state_dir, rec->id, NULL) == 0;
}

void local_status_cleanup(struct local_status *s)
{
	if (s == NULL)
		return;
	proto_record_cleanup(&s->rec);
	memset(s, 0, sizeof(*s));
	proto_record_init(&s->rec);
}
