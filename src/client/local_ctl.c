/* SPDX-License-Identifier: MIT */
/*
 * local_ctl: create, start, stop, restart and remove local sandboxes, and
 * ask how one is doing. The state directory's layout and disciplines are
 * local_state's; this module adds processes (spawning and stopping
 * sandbox-agent), the copy of a tree into a new session root, and a tiny
 * loopback HTTP GET for the agent's health route (libcurl stays in
 * transport.c). It never reads the credential the agent writes.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/buf.h"
#include "common/fileio.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/token.h"
#include "common/unixurl.h"
#include "common/sleep.h"
#include "common/xalloc.h"
#include "client/local_ctl.h"

#ifndef SBFS_SBINDIR
#define SBFS_SBINDIR SBFS_BINDIR
#endif

#define AGENT_NAME "sandbox-agent"
/* Deepest tree create --from copies (each level holds three descriptors). */
#define COPY_DEPTH_MAX 128
/* agent.log is moved to agent.log.old at a boot when it is larger. */
#define LOG_ROTATE_BYTES (4L * 1024 * 1024)
#define HEALTH_MAX_BYTES (64 * 1024)
#define POLL_MS 50

/* RFC 3339 UTC, second resolution (heap). */
static char *utc_now(void)
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

char *local_ctl_agent_path(void)
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
			cand = xasprintf("%s/%s", self, AGENT_NAME);
			if (executable(cand))
				return cand;
			free(cand);
		}
	}
	cand = xasprintf("%s/%s", SBFS_SBINDIR, AGENT_NAME);
	if (executable(cand))
		return cand;
	free(cand);
	return xasprintf("%s/%s", SBFS_BINDIR, AGENT_NAME);
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
	c->agent = local_ctl_agent_path();
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
		sleep_ms(POLL_MS);
	}
	*out = fd;
	return 0;
}

/*
 * Allocate the identity of the sandbox whose directory is dir: the first
 * uid of the range that no user or group of the system has and no live
 * claim holds, claimed for dir under the registry's lock (so concurrent
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
		    claim_live(uid))
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
static void release_identity(unsigned long uid, const char *dir)
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

/* ---- copying a tree ----------------------------------------------------- */

struct copy {
	bool chown; /* running as root: hand everything over */
	uid_t uid;
	gid_t gid;
	char rel[PATH_MAX]; /* the entry being copied, for messages */
	local_progress_fn *progress; /* may be NULL */
	void *progress_arg;
	struct local_copy_progress done;
};

/* Tell the caller how far the copy is; it may end the create. */
static int copy_progress(struct copy *cx)
{
	if (cx->progress == NULL)
		return 0;
	return cx->progress(cx->progress_arg, &cx->done);
}

static int copy_data(struct copy *cx, int in, int out)
{
	const size_t chunk = 128 * 1024;
	size_t since = 0;
	char *mem = NULL;
	ssize_t n, w;
	int rc = 0;

	/* copy_file_range shares extents where it can; it is not there on
	 * every kernel and filesystem pair, so fall back to read/write.
	 * Chunks keep progress calls (and an interruption) within
	 * LOCAL_COPY_CHUNK of each other. */
	for (;;) {
		n = copy_file_range(in, NULL, out, NULL, LOCAL_COPY_CHUNK, 0);
		if (n > 0) {
			cx->done.bytes += (uint64_t)n;
			rc = copy_progress(cx);
			if (rc < 0)
				goto out;
			continue;
		}
		if (n == 0)
			goto out;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL &&
		    errno != EOPNOTSUPP && errno != EPERM) {
			rc = -errno;
			goto out;
		}
		break;
	}
	mem = xmalloc(chunk);
	for (;;) {
		n = read(in, mem, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		cx->done.bytes += (uint64_t)n;
		since += (size_t)n;
		if (since >= LOCAL_COPY_CHUNK) {
			since = 0;
			rc = copy_progress(cx);
			if (rc < 0)
				goto out;
		}
		for (char *p = mem; n > 0; p += w, n -= w) {
			w = write(out, p, (size_t)n);
			if (w < 0 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w < 0) {
				rc = -errno;
				goto out;
			}
		}
	}
out:
	free(mem);
	return rc;
}

/* Owner, then mode (a chown may clear set-id bits), then times. */
static int finish_fd(struct copy *cx, int fd, const struct stat *st)
{
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	mode_t mode = st->st_mode & 07777;

	if (cx->chown && !S_ISDIR(st->st_mode))
		mode &= (mode_t) ~(S_ISUID | S_ISGID);
	if (cx->chown && fchown(fd, cx->uid, cx->gid) < 0)
		return -errno;
	if (fchmod(fd, mode) < 0 || futimens(fd, ts) < 0)
		return -errno;
	return 0;
}

static int copy_entry(struct copy *cx, int sfd, int dfd, const char *name,
		      int depth);

static int copy_dir(struct copy *cx, int sfd, int dfd, int depth)
{
	struct dirent *de;
	size_t mark = strlen(cx->rel);
	int dup_fd, rc = 0;
	DIR *d;

	dup_fd = dup(sfd);
	if (dup_fd < 0)
		return -errno;
	d = fdopendir(dup_fd);
	if (d == NULL) {
		rc = -errno;
		close(dup_fd);
		return rc;
	}
	/* A dup shares the file offset: a directory read before would
	 * otherwise look empty. */
	rewinddir(d);
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(cx->rel + mark, sizeof(cx->rel) - mark, "%s%s",
			 mark ? "/" : "", de->d_name);
		rc = copy_entry(cx, sfd, dfd, de->d_name, depth);
		if (rc == 0)
			cx->rel[mark] = '\0';
	}
	closedir(d);
	return rc;
}

static int copy_entry(struct copy *cx, int sfd, int dfd, const char *name,
		      int depth)
{
	struct timespec ts[2];
	char target[PATH_MAX];
	struct stat st, st2;
	int in = -1, out = -1, rc = 0;
	ssize_t n;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR:
		if (depth >= COPY_DEPTH_MAX)
			return -ELOOP;
		in = openat(sfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0 || mkdirat(dfd, name, 0700) < 0)
			goto fail;
		out = openat(dfd, name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (out < 0)
			goto fail;
		rc = copy_dir(cx, in, out, depth + 1);
		if (rc == 0)
			rc = finish_fd(cx, out, &st);
		break;
	case S_IFREG:
		in = openat(sfd, name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (in < 0 || fstat(in, &st2) < 0)
			goto fail;
		if (!S_ISREG(st2.st_mode)) {
			rc = -EAGAIN; /* replaced while we looked */
			break;
		}
		out = openat(dfd, name,
			     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				     O_CLOEXEC,
			     0600);
		if (out < 0)
			goto fail;
		rc = copy_data(cx, in, out);
		if (rc == 0)
			rc = finish_fd(cx, out, &st2);
		break;
	case S_IFLNK:
		n = readlinkat(sfd, name, target, sizeof(target) - 1);
		if (n < 0)
			goto fail;
		target[n] = '\0';
		if (symlinkat(target, dfd, name) < 0 ||
		    (cx->chown && fchownat(dfd, name, cx->uid, cx->gid,
					   AT_SYMLINK_NOFOLLOW) < 0) ||
		    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			goto fail;
		break;
	case S_IFIFO:
		/* Owner, mode and times through a descriptor of the FIFO
		 * just made: a symlink swapped in for it is never
		 * followed (reading end, non-blocking: the open does not
		 * wait for a writer). */
		if (mkfifoat(dfd, name, 0600) < 0)
			goto fail;
		out = openat(dfd, name,
			     O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		if (out < 0 || fstat(out, &st2) < 0)
			goto fail;
		if (!S_ISFIFO(st2.st_mode)) {
			rc = -EAGAIN; /* replaced while we made it */
			break;
		}
		rc = finish_fd(cx, out, &st);
		break;
	default:
		/* A device node or socket has no business in a session
		 * root, and the agent would refuse it anyway. */
		log_warn("not copying '%s': a device or socket", cx->rel);
		break;
	}
	if (rc == 0 && !S_ISDIR(st.st_mode)) {
		cx->done.files++;
		rc = copy_progress(cx);
	}
	goto out;
fail:
	rc = -errno;
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

/* Copy the tree at from into the (empty) directory to, whose own mode and
 * times become from's. */
static int copy_tree(const char *from, const char *to, bool chown_to, uid_t uid,
		     gid_t gid, local_progress_fn *fn, void *arg,
		     struct local_err *err)
{
	struct copy cx;
	struct stat st;
	int sfd = -1, dfd = -1, rc;

	memset(&cx, 0, sizeof(cx));
	cx.progress = fn;
	cx.progress_arg = arg;
	cx.chown = chown_to;
	cx.uid = uid;
	cx.gid = gid;
	sfd = open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0 || fstat(sfd, &st) < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot copy %s: %s", from,
			      strerror(-rc));
		goto out;
	}
	dfd = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot open %s: %s", to, strerror(-rc));
		goto out;
	}
	rc = copy_dir(&cx, sfd, dfd, 0);
	if (rc == 0)
		rc = finish_fd(&cx, dfd, &st);
	if (rc == 0)
		rc = copy_progress(&cx); /* the totals, last */
	if (rc == -ELOOP)
		local_err_set(err, rc,
			      "cannot copy %s/%s: deeper than %d directories",
			      from, cx.rel, COPY_DEPTH_MAX);
	else if (rc == -EINTR)
		local_err_set(err, rc, "interrupted while copying %s/%s", from,
			      cx.rel);
	else if (rc < 0)
		local_err_set(err, rc, "cannot copy %s/%s: %s", from, cx.rel,
			      strerror(-rc));
out:
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	return rc;
}

/* ---- removing a sandbox's directory ------------------------------------- */

/* Rename the directory out of the namespace first, so nobody can open its
 * lock or record while the tree goes, then remove it. */
static int remove_dir(struct local_ctl *c, const char *id,
		      struct local_err *err)
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

int local_ctl_create_progress(struct local_ctl *c, const char *id,
			      const struct local_create_opts *opts,
			      local_progress_fn *fn, void *arg,
			      struct local_err *err)
{
	static const struct local_create_opts none;
	bool root_user = geteuid() == 0;
	char *dir = NULL, *root = NULL, *boot = NULL;
	struct proto_record rec;
	unsigned long dyn = 0;
	struct stat st;
	int lock = -1, rc;
	bool made = false;

	proto_record_init(&rec);
	if (opts == NULL)
		opts = &none;
	if (!local_state_id_valid(id)) {
		rc = local_err_set(err, -EINVAL,
				   "invalid sandbox name '%s': use 1 to %d "
				   "letters, digits, '_' or '-'",
				   id ? id : "", LOCAL_ID_MAX);
		goto out;
	}
	if (opts->user != NULL && !root_user) {
		rc = local_err_set(err, -EPERM,
				   "--user needs root: without it, commands "
				   "run as the calling user");
		goto out;
	}
	if (root_user && opts->user != NULL) {
		rc = resolve_user(opts->user, &rec, err);
		if (rc < 0)
			goto out;
	}
	rc = set_limits(opts, &rec, err);
	if (rc < 0)
		goto out;
	if (opts->from != NULL && stat(opts->from, &st) < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot copy %s: %s", opts->from,
			      strerror(-rc));
		goto out;
	}
	if (opts->from != NULL && !S_ISDIR(st.st_mode)) {
		rc = local_err_set(err, -ENOTDIR, "%s is not a directory",
				   opts->from);
		goto out;
	}
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
	rec.created_at = utc_now();
	rec.state = PROTO_RECORD_CREATING;
	rec.strict_v1 = opts->strict_v1 && !opts->native;
	rc = local_state_write(c->state_dir, &rec, err);
	if (rc < 0)
		goto out;
	root = local_state_path(c->state_dir, id, LOCAL_PATH_ROOT);
	boot = local_state_path(c->state_dir, id, LOCAL_PATH_BOOT);
	if (mkdir(root, 0755) < 0 || mkdir(boot, 0700) < 0 ||
	    (root_user &&
	     chown(root, (uid_t)rec.exec_uid, (gid_t)rec.exec_gid) < 0)) {
		rc = -errno;
		local_err_set(err, rc, "cannot create %s: %s", root,
			      strerror(-rc));
		goto out;
	}
	if (opts->from != NULL) {
		rc = copy_tree(opts->from, root, root_user, (uid_t)rec.exec_uid,
			       (gid_t)rec.exec_gid, fn, arg, err);
		if (rc < 0)
			goto out;
	}
	if (opts->from == NULL && fn != NULL) {
		struct local_copy_progress nothing = {0, 0};

		rc = fn(arg, &nothing);
		if (rc < 0) {
			local_err_set(err, rc, "interrupted");
			goto out;
		}
	}
	rec.state = PROTO_RECORD_STOPPED;
	rc = local_state_write(c->state_dir, &rec, err);
out:
	if (rc < 0 && made) {
		struct local_err ignored;

		remove_dir(c, id, &ignored);
		if (dyn != 0)
			release_identity(dyn, dir);
	}
	local_state_unlock(lock);
	proto_record_cleanup(&rec);
	free(dir);
	free(root);
	free(boot);
	return rc;
}

/* ---- processes ---------------------------------------------------------- */

static int sys_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

static int sys_pidfd_send_signal(int pidfd, int sig)
{
#ifdef SYS_pidfd_send_signal
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#else
	(void)pidfd;
	(void)sig;
	errno = ENOSYS;
	return -1;
#endif
}

/* True when pid exists and is not a zombie. A detached agent is reparented
 * to init, so it may linger as a zombie after it died. */
static bool pid_alive(pid_t pid)
{
	char path[64], text[512], *paren;
	ssize_t n;
	int fd;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	/* "pid (comm) S ...": comm may hold anything, ')' included. */
	paren = strrchr(text, ')');
	if (paren == NULL || paren[1] != ' ')
		return true;
	return paren[2] != 'Z' && paren[2] != 'X';
}

/* A process we hold: by pidfd when the kernel has them, else by pid. */
struct proc {
	pid_t pid;
	int pidfd;
};

static bool proc_alive(const struct proc *p)
{
	struct pollfd pfd = {p->pidfd, POLLIN, 0};

	if (p->pidfd < 0)
		return pid_alive(p->pid);
	/* A pidfd is readable once its process has exited. */
	return poll(&pfd, 1, 0) == 0;
}

static int proc_signal(const struct proc *p, int sig)
{
	if (p->pidfd >= 0 ? sys_pidfd_send_signal(p->pidfd, sig) < 0
			  : kill(p->pid, sig) < 0)
		return errno == ESRCH ? 0 : -errno;
	return 0;
}

static void proc_wait_gone(const struct proc *p, long long deadline)
{
	while (proc_alive(p) && clock_mono_ms() < deadline)
		sleep_ms(POLL_MS);
}

/* SIGTERM, wait up to timeout_ms, then SIGKILL and wait a little more. */
static int kill_proc(const struct proc *p, long timeout_ms)
{
	int rc = proc_signal(p, SIGTERM);

	if (rc < 0)
		return rc;
	proc_wait_gone(p, clock_mono_ms() + timeout_ms);
	if (!proc_alive(p))
		return 0;
	log_warn("agent %ld did not stop within %ld ms: killing it",
		 (long)p->pid, timeout_ms);
	rc = proc_signal(p, SIGKILL);
	if (rc < 0)
		return rc;
	proc_wait_gone(p, clock_mono_ms() + 5000);
	return proc_alive(p) ? -ETIMEDOUT : 0;
}

static void proc_close(struct proc *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->pid = 0;
}

/* The holder of the lock on path, by F_GETLK: > 0 its pid, -1 a holder
 * whose pid this process cannot see, 0 none; -ENOENT when there is no
 * such file. */
static pid_t lock_holder(const char *path)
{
	struct flock fl;
	pid_t pid = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : 0;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
		pid = fl.l_pid > 0 ? fl.l_pid : -1;
	close(fd);
	return pid;
}

int local_ctl_agent_alive(const char *state_dir, const char *id, pid_t *pid)
{
	char *path = local_state_path(state_dir, id, LOCAL_PATH_AGENT_LOCK);
	pid_t h = lock_holder(path);

	free(path);
	if (h == -ENOENT)
		return -1;
	if (pid != NULL)
		*pid = h > 0 ? h : 0;
	return h != 0;
}

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (strcmp(a, b) == 0)
		return true;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool local_ctl_agent_matches(pid_t pid, const char *root)
{
	struct buf b = BUF_INIT(64 * 1024);
	const char *arg, *end, *base;
	bool agent = false, match = false;
	char path[64];
	int fd, rc;

	if (!pid_alive(pid))
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	for (;;) {
		int e = 0;
		char *p = buf_reserve(&b, 4096, &e);
		ssize_t n;

		if (p == NULL)
			break;
		n = read(fd, p, 4096);
		if (n <= 0)
			break;
		buf_commit(&b, (size_t)n);
	}
	close(fd);
	rc = buf_append(&b, "", 1);
	if (rc < 0 || b.len < 2)
		goto out;
	/* argv: a sandbox-agent (possibly behind a wrapper such as
	 * valgrind) and then --root ROOT or --root=ROOT. */
	end = b.data + b.len;
	for (arg = b.data; arg < end && !match; arg += strlen(arg) + 1) {
		base = strrchr(arg, '/');
		base = base ? base + 1 : arg;
		if (strcmp(base, AGENT_NAME) == 0)
			agent = true;
		if (!agent)
			continue;
		if (strncmp(arg, "--root=", 7) == 0)
			match = same_file(arg + 7, root);
		else if (strcmp(arg, "--root") == 0 &&
			 arg + strlen(arg) + 1 < end)
			match = same_file(arg + strlen(arg) + 1, root);
	}
out:
	buf_cleanup(&b);
	return match;
}

/*
 * The sandbox's live agent, held by a pidfd: the process that holds its
 * agent lock (taken by pidfd while it still holds it, so a pid recycled
 * meanwhile is never signalled), or, for an agent started before agents
 * took the lock, the recorded pid when its command line is a
 * sandbox-agent serving this root. 1 and *out when there is one, else 0.
 */
static int agent_proc(struct local_ctl *c, const struct proto_record *rec,
		      struct proc *out)
{
	char *path =
		local_state_path(c->state_dir, rec->id, LOCAL_PATH_AGENT_LOCK);
	char *root = NULL;
	struct proc p = {0, -1};
	pid_t h;
	int found = 0;

	h = lock_holder(path);
	if (h > 0 && !pid_alive(h)) {
		long long until = clock_mono_ms() + 5000;

		/* Killed: its leader is a zombie while its other threads
		 * still let go of its files, the lock with them. */
		while ((h = lock_holder(path)) > 0 && clock_mono_ms() < until)
			sleep_ms(10);
	}
	if (h > 0) {
		p.pid = h;
		p.pidfd = sys_pidfd_open(h);
		if (p.pidfd < 0 && errno != ENOSYS)
			goto out; /* it is gone already */
		if (lock_holder(path) != h) {
			proc_close(&p);
			goto out; /* it died between the two looks */
		}
		found = 1;
		goto out;
	}
	if (h != -ENOENT || rec->agent_pid <= 0)
		goto out;
	root = local_state_path(c->state_dir, rec->id, LOCAL_PATH_ROOT);
	p.pid = (pid_t)rec->agent_pid;
	p.pidfd = sys_pidfd_open(p.pid);
	if ((p.pidfd >= 0 || errno == ENOSYS) &&
	    local_ctl_agent_matches(p.pid, root)) {
		found = 1;
		goto out;
	}
	proc_close(&p);
out:
	if (found)
		*out = p;
	free(path);
	free(root);
	return found;
}

/* Empty boot/ (token, pid, socket, and any temporary file of them). */
static void boot_clear(struct local_ctl *c, const char *id)
{
	char *boot = local_state_path(c->state_dir, id, LOCAL_PATH_BOOT);
	struct dirent *de;
	DIR *d = opendir(boot);

	if (d != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 &&
			    strcmp(de->d_name, "..") != 0)
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	free(boot);
}

struct spawn_msg {
	int kind; /* SPAWN_PID or SPAWN_ERRNO */
	int value;
};

#define SPAWN_PID 1
#define SPAWN_ERRNO 2

static void close_from(int lowfd, int keep, long maxfd)
{
	long fd;

#ifdef HAVE_CLOSE_RANGE
	if ((keep <= lowfd ||
	     close_range((unsigned)lowfd, (unsigned)keep - 1, 0) == 0) &&
	    close_range((unsigned)keep + 1, ~0U, 0) == 0)
		return;
#endif
	for (fd = lowfd; fd < maxfd; fd++)
		if (fd != keep)
			close((int)fd);
}

/* In the grandchild: nothing but async-signal-safe calls until exec,
 * because the caller may be a threaded program (the mount). */
static void __attribute__((noreturn))
agent_child(const char *const *argv, char *const *envp, int dirfd, int logfd,
	    int nullfd, int report, long maxfd)
{
	struct spawn_msg m = {SPAWN_ERRNO, 0};
	struct sigaction sa;
	sigset_t all;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (dup2(nullfd, STDIN_FILENO) < 0 || dup2(logfd, STDOUT_FILENO) < 0 ||
	    dup2(logfd, STDERR_FILENO) < 0)
		goto fail;
	/* The agent works in the sandbox's directory: its paths are
	 * relative there, so none of them shows on its command line. */
	if (fchdir(dirfd) < 0)
		goto fail;
	/* Nothing of the caller's may leak into the agent: a descriptor of
	 * the sandbox's lock would hold it for the agent's lifetime. */
	close_from(3, report, maxfd);
	umask(022);
	execve(argv[0], (char *const *)argv, envp);
fail:
	m.value = errno;
	if (write(report, &m, sizeof(m)) < 0)
		_exit(127);
	_exit(127);
}

/*
 * Start argv detached: fork, setsid, fork again, so the agent is nobody's
 * child and outlives the caller. A CLOEXEC pipe brings back the
 * grandchild's pid (from the middle process) and an exec failure (from
 * the grandchild); end of file means the exec happened.
 */
static int spawn_detached(const char *const *argv, char *const *envp,
			  const char *dir, const char *logpath,
			  const char *banner, pid_t *pidp,
			  struct local_err *err)
{
	struct spawn_msg m;
	struct rlimit rl;
	long long deadline = clock_mono_ms() + 10000;
	long maxfd = 1024;
	int pfd[2] = {-1, -1}, logfd = -1, nullfd = -1, dirfd = -1, status;
	int rc = 0;
	pid_t mid, pid = 0;
	ssize_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		maxfd = rl.rlim_cur > 65536 ? 65536 : (long)rl.rlim_cur;
	logfd = open(logpath,
		     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		     0600);
	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot open %s: %s", dir,
			      strerror(-rc));
		goto out;
	}
	if (logfd < 0 || nullfd < 0 || pipe2(pfd, O_CLOEXEC) < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot open %s: %s", logpath,
			      strerror(-rc));
		goto out;
	}
	/* The agent's own lines carry no date: mark where each boot
	 * begins. A log we cannot write to is no reason not to start. */
	if (write(logfd, banner, strlen(banner)) < 0)
		log_debug("cannot write to %s: %s", logpath, strerror(errno));
	mid = fork();
	if (mid < 0) {
		rc = -errno;
		local_err_set(err, rc, "fork: %s", strerror(-rc));
		goto out;
	}
	if (mid == 0) {
		pid_t g;

		close(pfd[0]);
		if (setsid() < 0)
			_exit(126);
		g = fork();
		if (g == 0)
			agent_child(argv, envp, dirfd, logfd, nullfd, pfd[1],
				    maxfd);
		m.kind = g > 0 ? SPAWN_PID : SPAWN_ERRNO;
		m.value = g > 0 ? (int)g : errno;
		if (write(pfd[1], &m, sizeof(m)) < 0)
			_exit(126);
		_exit(0);
	}
	close(pfd[1]);
	pfd[1] = -1;
	while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
		;
	for (;;) {
		struct pollfd p = {pfd[0], POLLIN, 0};
		long long left = deadline - clock_mono_ms();

		if (left <= 0) {
			rc = -ETIMEDOUT;
			local_err_set(err, rc, "%s did not start", argv[0]);
			break;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		n = read(pfd[0], &m, sizeof(m));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		if (n != sizeof(m))
			continue;
		if (m.kind == SPAWN_PID)
			pid = (pid_t)m.value;
		else
			rc = -m.value;
	}
	if (rc == 0 && pid <= 0)
		rc = -ECHILD;
	if (rc < 0 && err != NULL && err->msg[0] == '\0')
		local_err_set(err, rc, "cannot run %s: %s", argv[0],
			      strerror(-rc));
	if (rc == 0)
		*pidp = pid;
out:
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (logfd >= 0)
		close(logfd);
	if (nullfd >= 0)
		close(nullfd);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

/* ---- the health route --------------------------------------------------- */

static int wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = {fd, events, 0};
	long long left;
	int n;

	for (;;) {
		left = deadline - clock_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* Split an HTTP/1.x answer: 200 and a health body, or -EPROTO. */
static int parse_health(const char *text, size_t len, struct proto_health *out)
{
	const char *hdr_end, *body, *cl;
	size_t blen;
	long status;

	if (len < 12 || strncmp(text, "HTTP/1.", 7) != 0 || text[8] != ' ')
		return -EPROTO;
	status = strtol(text + 9, NULL, 10);
	hdr_end = strstr(text, "\r\n\r\n");
	if (status != 200 || hdr_end == NULL)
		return -EPROTO;
	body = hdr_end + 4;
	blen = len - (size_t)(body - text);
	/* The body ends where Content-Length says, if it says. */
	cl = strcasestr(text, "\r\nContent-Length:");
	if (cl != NULL && cl < hdr_end) {
		unsigned long v = strtoul(cl + 17, NULL, 10);

		if (v > blen)
			return -EPROTO;
		blen = v;
	}
	if (proto_health_decode(body, blen, out) < 0 ||
	    out->protocol_version != PROTO_VERSION)
		return -EPROTO;
	return 0;
}

/*
 * The address of a Unix socket: its path, or, when that is too long for
 * sun_path, "/proc/self/fd/N/NAME" through its directory (opened into
 * *dirfd, which the caller closes after connect).
 */
static int unix_sockaddr(const char *path, struct sockaddr_un *sa, int *dirfd)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	*dirfd = -1;
	if (strlen(path) < sizeof(sa->sun_path)) {
		memcpy(sa->sun_path, path, strlen(path) + 1);
		return 0;
	}
	if (slash == NULL)
		return -ENAMETOOLONG;
	dir = slash == path ? xstrdup("/")
			    : xstrndup(path, (size_t)(slash - path));
	*dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (*dirfd < 0)
		return -errno;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s",
		     *dirfd, slash + 1);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path)) {
		close(*dirfd);
		*dirfd = -1;
		return -ENAMETOOLONG;
	}
	return 0;
}

int local_ctl_health(const char *url, long timeout_ms, struct proto_health *out)
{
	struct buf b = BUF_INIT(HEALTH_MAX_BYTES);
	long long deadline = clock_mono_ms() + timeout_ms;
	struct sockaddr_storage ss;
	struct proto_health h;
	char req[160], sock[PATH_MAX];
	socklen_t slen;
	unsigned port = 0;
	bool six = false;
	int fd = -1, dirfd = -1, rc, soerr = 0, e;
	size_t off = 0, reqlen;
	ssize_t n;

	memset(&ss, 0, sizeof(ss));
	if (unixurl_parse(url, sock, sizeof(sock)) == 0) {
		rc = unix_sockaddr(sock, (struct sockaddr_un *)&ss, &dirfd);
		if (rc < 0)
			return rc;
		slen = sizeof(struct sockaddr_un);
	} else if (!local_state_route_valid(url, &port, &six)) {
		return -EPROTO;
	} else if (six) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		s6->sin6_addr = in6addr_loopback;
		slen = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		slen = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if (connect(fd, (struct sockaddr *)&ss, slen) < 0) {
		if (errno != EINPROGRESS && errno != EAGAIN) {
			rc = -errno;
			goto out;
		}
		rc = wait_fd(fd, POLLOUT, deadline);
		if (rc < 0)
			goto out;
		slen = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0 ||
		    soerr != 0) {
			rc = soerr ? -soerr : -errno;
			goto out;
		}
	}
	/* HTTP/1.0: the answer is not chunked and ends when the agent
	 * closes the connection. */
	reqlen = (size_t)snprintf(req, sizeof(req),
				  "GET /v1/health?version=%d HTTP/1.0\r\n"
				  "Host: %s:%u\r\n"
				  "Accept: application/json\r\n\r\n",
				  PROTO_VERSION,
				  port == 0 ? "localhost"
				  : six	    ? "[::1]"
					    : "127.0.0.1",
				  port);
	while (off < reqlen) {
		n = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN) {
			rc = wait_fd(fd, POLLOUT, deadline);
			if (rc < 0)
				goto out;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		off += (size_t)n;
	}
	for (;;) {
		char *p = buf_reserve(&b, 4096, &e);

		if (p == NULL) {
			rc = -EPROTO; /* larger than any health answer */
			goto out;
		}
		n = recv(fd, p, 4096, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			rc = wait_fd(fd, POLLIN, deadline);
			if (rc < 0)
				goto out;
			continue;
		}
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		buf_commit(&b, (size_t)n);
	}
	rc = parse_health(b.data ? b.data : "", b.len, &h);
	if (rc == 0)
		*out = h;
out:
	if (fd >= 0)
		close(fd);
	if (dirfd >= 0)
		close(dirfd);
	buf_cleanup(&b);
	return rc;
}

/* ---- start and stop ----------------------------------------------------- */

struct boot_paths {
	char *dir, *root, *token, *sock, *log;
};

static void paths_init(struct local_ctl *c, const char *id,
		       struct boot_paths *p)
{
	p->dir = local_state_path(c->state_dir, id, LOCAL_PATH_DIR);
	p->root = local_state_path(c->state_dir, id, LOCAL_PATH_ROOT);
	p->token = local_state_path(c->state_dir, id, LOCAL_PATH_TOKEN);
	p->sock = local_state_path(c->state_dir, id, LOCAL_PATH_SOCKET);
	p->log = local_state_path(c->state_dir, id, LOCAL_PATH_LOG);
}

static void paths_cleanup(struct boot_paths *p)
{
	free(p->dir);
	free(p->root);
	free(p->token);
	free(p->sock);
	free(p->log);
}

static void rotate_log(const char *log)
{
	struct stat st;
	char *old;

	if (stat(log, &st) < 0 || st.st_size < LOG_ROTATE_BYTES)
		return;
	old = xasprintf("%s.old", log);
	if (rename(log, old) < 0)
		log_debug("cannot rotate %s: %s", log, strerror(errno));
	free(old);
}

/* Wait for a health answer on the agent's socket. */
static int wait_ready(struct local_ctl *c, const struct boot_paths *p,
		      const struct proc *agent, const char *url,
		      struct local_err *err)
{
	long long deadline = clock_mono_ms() + c->start_timeout_ms;
	struct proto_health h;
	struct stat st;
	long left;

	for (;;) {
		if (!proc_alive(agent))
			return local_err_set(
				err, -ECHILD,
				"the agent exited at start; see %s", p->log);
		left = (long)(deadline - clock_mono_ms());
		if (left <= 0)
			break;
		if (lstat(p->sock, &st) == 0 &&
		    local_ctl_health(url, left < 1000 ? left : 1000, &h) == 0)
			return 0;
		sleep_ms(POLL_MS);
	}
	return local_err_set(err, -ETIMEDOUT,
			     "the agent did not become healthy within %ld ms; "
			     "see %s",
			     c->start_timeout_ms, p->log);
}

static bool token_present(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       st.st_size == TOKEN_CHARS;
}

/* The caller's environment with the session root set: the agent's
 * paths never show on its command line (doc/security.md). */
static char **agent_env(const char *root)
{
	static const char key[] = "ALIEN_SANDBOX_ROOT=";
	size_t n = 0, i, k = 0;
	char **env;

	while (environ != NULL && environ[n] != NULL)
		n++;
	env = xcalloc(n + 2, sizeof(*env));
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], key, sizeof(key) - 1) != 0)
			env[k++] = environ[i];
	env[k++] = xasprintf("%s%s", key, root);
	env[k] = NULL;
	return env;
}

static void agent_env_free(char **env)
{
	size_t n = 0;

	/* Only the last entry is ours; the others are the caller's. */
	while (env[n] != NULL)
		n++;
	if (n > 0)
		free(env[n - 1]);
	free(env);
}

/* One boot attempt: spawn, record the pid, wait. On failure the agent is
 * gone again. */
static int boot_once(struct local_ctl *c, struct proto_record *rec,
		     const struct boot_paths *p, const char *url,
		     struct local_err *err)
{
	char userarg[48], pids[24], mem[24], tmp[24], *now, *banner;
	const char *argv[40];
	struct proc agent = {0, -1};
	char **env = agent_env(p->root);
	size_t argc = 0;
	int rc;

	/* Relative to the sandbox's directory, where the agent starts. */
	argv[argc++] = c->agent;
	argv[argc++] = "--socket";
	argv[argc++] = "boot/agent.sock";
	argv[argc++] = "--token-file";
	argv[argc++] = "boot/token";
	argv[argc++] = "--pid-file";
	argv[argc++] = "boot/pid";
	argv[argc++] = "--lock-file";
	argv[argc++] = "agent.lock";
	if (geteuid() == 0) {
		snprintf(userarg, sizeof(userarg), "%ld:%ld",
			 rec->exec_uid >= 0 ? rec->exec_uid
					    : (long)LOCAL_CTL_DEFAULT_ID,
			 rec->exec_gid >= 0 ? rec->exec_gid
					    : (long)LOCAL_CTL_DEFAULT_ID);
		argv[argc++] = "--exec-user";
		argv[argc++] = userarg;
	}
	if (rec->strict_v1)
		argv[argc++] = "--strict-v1";
	/* Fail closed: a sandbox whose commands cannot be confined does not
	 * start (agent.log says why). */
	argv[argc++] = "--confine";
	argv[argc++] = "bwrap";
	if (rec->pids > 0) {
		snprintf(pids, sizeof(pids), "%llu",
			 (unsigned long long)rec->pids);
		argv[argc++] = "--pids";
		argv[argc++] = pids;
	}
	if (rec->memory > 0) {
		snprintf(mem, sizeof(mem), "%llu",
			 (unsigned long long)rec->memory);
		argv[argc++] = "--memory";
		argv[argc++] = mem;
	}
	if (rec->tmp_size > 0) {
		snprintf(tmp, sizeof(tmp), "%llu",
			 (unsigned long long)rec->tmp_size);
		argv[argc++] = "--tmp-size";
		argv[argc++] = tmp;
	}
	if (rec->network != NULL) {
		argv[argc++] = "--network";
		argv[argc++] = rec->network;
	}
	argv[argc] = NULL;

	boot_clear(c, rec->id);
	rotate_log(p->log);
	now = utc_now();
	banner = xasprintf("=== %s: boot %llu of sandbox '%s'\n", now,
			   (unsigned long long)rec->boot_count + 1, rec->id);
	rc = spawn_detached(argv, env, p->dir, p->log, banner, &agent.pid, err);
	free(now);
	free(banner);
	agent_env_free(env);
	if (rc < 0)
		return rc;
	/* Our own child's child, just started: its pid is not recycled yet.
	 * The pidfd keeps it so while we wait and, on failure, stop it. */
	agent.pidfd = sys_pidfd_open(agent.pid);
	/* Recorded at once, so an interrupted start can be cleaned up. */
	rec->agent_pid = agent.pid;
	rc = local_state_write(c->state_dir, rec, err);
	if (rc == 0)
		rc = wait_ready(c, p, &agent, url, err);
	if (rc == 0 && !token_present(p->token))
		rc = local_err_set(err, -EIO,
				   "the agent wrote no credential; see %s",
				   p->log);
	if (rc < 0 && proc_alive(&agent))
		kill_proc(&agent, c->stop_timeout_ms);
	proc_close(&agent);
	return rc;
}

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

static int stop_agent(struct proc *agent, long timeout_ms,
		      struct local_err *err)
{
	int rc = kill_proc(agent, timeout_ms);

	if (rc < 0)
		local_err_set(err, rc, "cannot stop agent %ld: %s",
			      (long)agent->pid, strerror(-rc));
	proc_close(agent);
	return rc;
}

static int stop_locked(struct local_ctl *c, struct proto_record *rec,
		       struct local_err *err)
{
	struct proc agent = {0, -1};
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
	live = agent_proc(c, rec, &agent) == 1;
	if (rec->state != PROTO_RECORD_STOPPED || live) {
		rec->state = PROTO_RECORD_STOPPING;
		rc = local_state_write(c->state_dir, rec, err);
		if (rc < 0)
			goto out;
	}
	if (live) {
		rc = stop_agent(&agent, c->stop_timeout_ms, err);
		if (rc < 0)
			goto out;
	}
	boot_clear(c, rec->id);
	rc = record_stopped(c, rec, err);
out:
	proc_close(&agent);
	return rc;
}

static int start_locked(struct local_ctl *c, struct proto_record *rec,
			struct local_err *err)
{
	struct proc agent = {0, -1};
	struct boot_paths p;
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
		rec->started_at = utc_now();
		return local_state_write(c->state_dir, rec, err);
	}
	paths_init(c, rec->id, &p);
	if (agent_proc(c, rec, &agent) == 1) {
		if (rec->state == PROTO_RECORD_RUNNING &&
		    rec->agent_url != NULL) {
			proc_close(&agent);
			goto out; /* already running */
		}
		/* Left over from an interrupted transition. */
		rc = stop_agent(&agent, c->stop_timeout_ms, err);
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
	url = unixurl_format(p.sock);
	if (err != NULL)
		err->msg[0] = '\0';
	rc = boot_once(c, rec, &p, url, err);
	if (rc == -ECHILD)
		rc = -EIO;
	if (rc < 0) {
		struct local_err ignored;

		boot_clear(c, rec->id);
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
	rec->started_at = utc_now();
	rc = local_state_write(c->state_dir, rec, err);
out:
	free(url);
	paths_cleanup(&p);
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
	if (!local_state_id_valid(id))
		return local_err_set(err, -EINVAL,
				     "invalid sandbox name '%s': use 1 to %d "
				     "letters, digits, '_' or '-'",
				     id ? id : "", LOCAL_ID_MAX);
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

/* ---- rm and status ------------------------------------------------------ */

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
	struct proc agent = {0, -1};
	char *root = NULL;
	int lock = -1, rc;
	bool running, live, tombs = false;

	proto_record_init(&rec);
	if (!local_state_id_valid(id))
		return local_err_set(err, -EINVAL,
				     "invalid sandbox name '%s': use 1 to %d "
				     "letters, digits, '_' or '-'",
				     id ? id : "", LOCAL_ID_MAX);
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
		if (agent_proc(c, &rec, &agent) == 1) {
			rc = stop_agent(&agent, c->stop_timeout_ms, err);
			if (rc < 0)
				goto out;
		}
	} else {
		live = agent_proc(c, &rec, &agent) == 1;
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
			rc = stop_agent(&agent, c->stop_timeout_ms, err);
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
		rc = remove_dir(c, id, err);
	if (rc == 0)
		rc = sweep_tombs(c, id, &tombs, err);
	if (rc == 0 && rec.dynamic_user && rec.exec_uid > 0) {
		char *dir = local_state_path(c->state_dir, id, LOCAL_PATH_DIR);

		release_identity((unsigned long)rec.exec_uid, dir);
		free(dir);
	}
out:
	proc_close(&agent);
	local_state_unlock(lock);
	proto_record_cleanup(&rec);
	free(root);
	return rc;
}

int local_ctl_status(struct local_ctl *c, const char *id,
		     struct local_status *out, struct local_err *err)
{
	struct proc agent = {0, -1};
	struct local_status s;
	int rc;

	memset(&s, 0, sizeof(s));
	rc = local_state_read(c->state_dir, id, &s.rec, err);
	if (rc < 0)
		return rc;
	if (proto_record_transport(&s.rec) != PROTO_RECORD_NATIVE) {
		s.alive = agent_proc(c, &s.rec, &agent) == 1;
		s.pid = s.alive ? agent.pid : (pid_t)s.rec.agent_pid;
		proc_close(&agent);
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
