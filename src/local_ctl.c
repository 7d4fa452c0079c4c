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
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/token.h"
#include "common/xalloc.h"
#include "local_ctl.h"

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

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

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
		if (mkfifoat(dfd, name, 0600) < 0 ||
		    (cx->chown && fchownat(dfd, name, cx->uid, cx->gid,
					   AT_SYMLINK_NOFOLLOW) < 0) ||
		    fchmodat(dfd, name, st.st_mode & 0777, 0) < 0 ||
		    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			goto fail;
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
			       (long)getpid(), now_ms());
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
	static const struct local_create_opts none = {NULL, false, NULL, false};
	bool root_user = geteuid() == 0;
	char *dir = NULL, *root = NULL, *boot = NULL;
	struct proto_record rec;
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
	if (root_user) {
		rc = resolve_user(opts->user, &rec, err);
		if (rc < 0)
			goto out;
	}
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
	if (mkdir(dir, root_user ? 0711 : 0700) < 0) {
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
	}
	local_state_unlock(lock);
	proto_record_cleanup(&rec);
	free(dir);
	free(root);
	free(boot);
	return rc;
}

/* ---- processes ---------------------------------------------------------- */

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

/* The pid of the sandbox's agent: the record's, else the pid file's (a
 * start that was interrupted before it recorded one). */
static pid_t agent_pid(struct local_ctl *c, const struct proto_record *rec)
{
	char *path, text[32];
	long v = 0;
	ssize_t n;
	int fd;

	if (rec->agent_pid > 0)
		return (pid_t)rec->agent_pid;
	path = local_state_path(c->state_dir, rec->id, LOCAL_PATH_PID);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd < 0)
		return 0;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n > 0) {
		text[n] = '\0';
		v = strtol(text, NULL, 10);
	}
	return v > 0 && v < INT_MAX ? (pid_t)v : 0;
}

/* SIGTERM, wait up to timeout_ms, then SIGKILL and wait a little more.
 * Only ever called once local_ctl_agent_matches said yes. */
static int kill_agent(pid_t pid, long timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;

	if (kill(pid, SIGTERM) < 0)
		return errno == ESRCH ? 0 : -errno;
	while (pid_alive(pid) && now_ms() < deadline)
		sleep_ms(POLL_MS);
	if (!pid_alive(pid))
		return 0;
	log_warn("agent %ld did not stop within %ld ms: killing it", (long)pid,
		 timeout_ms);
	if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
		return -errno;
	deadline = now_ms() + 5000;
	while (pid_alive(pid) && now_ms() < deadline)
		sleep_ms(POLL_MS);
	return pid_alive(pid) ? -ETIMEDOUT : 0;
}

/* Empty boot/ (token, port, pid, and any temporary file of them). */
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

static bool port_free(unsigned port)
{
	struct sockaddr_in sa;
	int fd, one = 1;
	bool ok;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	/* The agent's server sets SO_REUSEADDR too: a port whose old
	 * connections linger in TIME_WAIT is free for it. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
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
agent_child(const char *const *argv, int logfd, int nullfd, int report,
	    long maxfd)
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
	/* Nothing of the caller's may leak into the agent: a descriptor of
	 * the sandbox's lock would hold it for the agent's lifetime. */
	close_from(3, report, maxfd);
	umask(022);
	if (chdir("/") < 0)
		goto fail;
	execv(argv[0], (char *const *)argv);
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
static int spawn_detached(const char *const *argv, const char *logpath,
			  const char *banner, pid_t *pidp,
			  struct local_err *err)
{
	struct spawn_msg m;
	struct rlimit rl;
	long long deadline = now_ms() + 10000;
	long maxfd = 1024;
	int pfd[2] = {-1, -1}, logfd = -1, nullfd = -1, status, rc = 0;
	pid_t mid, pid = 0;
	ssize_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		maxfd = rl.rlim_cur > 65536 ? 65536 : (long)rl.rlim_cur;
	logfd = open(logpath,
		     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		     0600);
	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
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
			agent_child(argv, logfd, nullfd, pfd[1], maxfd);
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
		long long left = deadline - now_ms();

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
	return rc;
}

/* ---- the health route --------------------------------------------------- */

static int wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = {fd, events, 0};
	long long left;
	int n;

	for (;;) {
		left = deadline - now_ms();
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

int local_ctl_health(const char *url, long timeout_ms, struct proto_health *out)
{
	struct buf b = BUF_INIT(HEALTH_MAX_BYTES);
	long long deadline = now_ms() + timeout_ms;
	struct sockaddr_storage ss;
	struct proto_health h;
	socklen_t slen;
	char req[160];
	unsigned port;
	bool six;
	int fd = -1, rc, soerr = 0, e;
	size_t off = 0, reqlen;
	ssize_t n;

	if (!local_state_route_valid(url, &port, &six))
		return -EPROTO;
	memset(&ss, 0, sizeof(ss));
	if (six) {
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
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, slen) < 0) {
		if (errno != EINPROGRESS) {
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
				  PROTO_VERSION, six ? "[::1]" : "127.0.0.1",
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
	buf_cleanup(&b);
	return rc;
}

/* ---- start and stop ----------------------------------------------------- */

struct boot_paths {
	char *root, *token, *port, *pid, *log;
};

static void paths_init(struct local_ctl *c, const char *id,
		       struct boot_paths *p)
{
	p->root = local_state_path(c->state_dir, id, LOCAL_PATH_ROOT);
	p->token = local_state_path(c->state_dir, id, LOCAL_PATH_TOKEN);
	p->port = local_state_path(c->state_dir, id, LOCAL_PATH_PORT);
	p->pid = local_state_path(c->state_dir, id, LOCAL_PATH_PID);
	p->log = local_state_path(c->state_dir, id, LOCAL_PATH_LOG);
}

static void paths_cleanup(struct boot_paths *p)
{
	free(p->root);
	free(p->token);
	free(p->port);
	free(p->pid);
	free(p->log);
}

static unsigned read_port_file(const char *path)
{
	char text[16];
	unsigned long v;
	char *end;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return 0;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	v = strtoul(text, &end, 10);
	if (end == text || (*end != '\0' && *end != '\n') || v == 0 ||
	    v > 65535)
		return 0;
	return (unsigned)v;
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

/* Wait for the agent's port file and a health answer. */
static int wait_ready(struct local_ctl *c, const struct boot_paths *p,
		      pid_t pid, unsigned *portp, struct local_err *err)
{
	long long deadline = now_ms() + c->start_timeout_ms;
	struct proto_health h;
	unsigned port = 0;
	char url[64];
	long left;

	for (;;) {
		if (!pid_alive(pid))
			return local_err_set(
				err, -ECHILD,
				"the agent exited at start; see %s", p->log);
		if (port == 0)
			port = read_port_file(p->port);
		left = (long)(deadline - now_ms());
		if (left <= 0)
			break;
		if (port != 0) {
			snprintf(url, sizeof(url), "http://127.0.0.1:%u/",
				 port);
			if (local_ctl_health(url, left < 1000 ? left : 1000,
					     &h) == 0) {
				*portp = port;
				return 0;
			}
		}
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

/* One boot attempt on want (0: the kernel picks): spawn, record the pid,
 * wait. On failure the agent is gone again. */
static int boot_once(struct local_ctl *c, struct proto_record *rec,
		     const struct boot_paths *p, unsigned want, unsigned *portp,
		     struct local_err *err)
{
	char portarg[16], userarg[48], *now, *banner;
	const char *argv[20];
	size_t argc = 0;
	pid_t pid = 0;
	int rc;

	snprintf(portarg, sizeof(portarg), "%u", want);
	argv[argc++] = c->agent;
	argv[argc++] = "--root";
	argv[argc++] = p->root;
	argv[argc++] = "--listen";
	argv[argc++] = "127.0.0.1";
	argv[argc++] = "--port";
	argv[argc++] = portarg;
	argv[argc++] = "--port-file";
	argv[argc++] = p->port;
	argv[argc++] = "--token-file";
	argv[argc++] = p->token;
	argv[argc++] = "--pid-file";
	argv[argc++] = p->pid;
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
	argv[argc] = NULL;

	boot_clear(c, rec->id);
	rotate_log(p->log);
	now = utc_now();
	banner = xasprintf("=== %s: boot %llu of sandbox '%s'\n", now,
			   (unsigned long long)rec->boot_count + 1, rec->id);
	rc = spawn_detached(argv, p->log, banner, &pid, err);
	free(now);
	free(banner);
	if (rc < 0)
		return rc;
	/* Recorded at once, so an interrupted start can be cleaned up. */
	rec->agent_pid = pid;
	rc = local_state_write(c->state_dir, rec, err);
	if (rc == 0)
		rc = wait_ready(c, p, pid, portp, err);
	if (rc == 0 && !token_present(p->token))
		rc = local_err_set(err, -EIO,
				   "the agent wrote no credential; see %s",
				   p->log);
	if (rc < 0 && local_ctl_agent_matches(pid, p->root))
		kill_agent(pid, c->stop_timeout_ms);
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

static int stop_locked(struct local_ctl *c, struct proto_record *rec,
		       struct local_err *err)
{
	struct boot_paths p;
	pid_t pid;
	int rc;

	rc = check_startable(rec, err);
	if (rc < 0)
		return rc;
	if (proto_record_transport(rec) == PROTO_RECORD_NATIVE) {
		if (rec->state == PROTO_RECORD_STOPPED)
			return 0;
		return record_stopped(c, rec, err);
	}
	paths_init(c, rec->id, &p);
	pid = agent_pid(c, rec);
	if (rec->state != PROTO_RECORD_STOPPED || pid > 0) {
		rec->state = PROTO_RECORD_STOPPING;
		rc = local_state_write(c->state_dir, rec, err);
		if (rc < 0)
			goto out;
	}
	if (pid > 0 && local_ctl_agent_matches(pid, p.root)) {
		rc = kill_agent(pid, c->stop_timeout_ms);
		if (rc < 0) {
			local_err_set(err, rc, "cannot stop agent %ld: %s",
				      (long)pid, strerror(-rc));
			goto out;
		}
	} else if (pid > 0 && pid_alive(pid)) {
		/* A recycled pid: someone else's process now. */
		log_debug("%s: pid %ld is not its agent; not signalled",
			  rec->id, (long)pid);
	}
	boot_clear(c, rec->id);
	rc = record_stopped(c, rec, err);
out:
	paths_cleanup(&p);
	return rc;
}

static int start_locked(struct local_ctl *c, struct proto_record *rec,
			struct local_err *err)
{
	struct boot_paths p;
	unsigned want = 0, port = 0;
	int rc, attempt;
	pid_t pid;
	char url[64];

	rc = check_startable(rec, err);
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
	pid = agent_pid(c, rec);
	if (pid > 0 && local_ctl_agent_matches(pid, p.root)) {
		if (rec->state == PROTO_RECORD_RUNNING &&
		    local_state_route_valid(rec->agent_url, NULL, NULL))
			goto out; /* already running */
		/* Left over from an interrupted transition. */
		rc = kill_agent(pid, c->stop_timeout_ms);
		if (rc < 0) {
			local_err_set(err, rc, "cannot stop agent %ld: %s",
				      (long)pid, strerror(-rc));
			goto out;
		}
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
	if (rec->port != 0 && port_free(rec->port))
		want = rec->port;
	else if (rec->port != 0)
		log_warn("%s: port %u is in use; the agent takes a new one",
			 rec->id, rec->port);
	for (attempt = 0; attempt < 2; attempt++) {
		if (err != NULL)
			err->msg[0] = '\0';
		rc = boot_once(c, rec, &p, want, &port, err);
		/* Taken between the check and the agent's bind. */
		if (rc == -ECHILD && want != 0 && !port_free(want)) {
			log_warn("%s: port %u is in use; the agent takes a "
				 "new one",
				 rec->id, want);
			want = 0;
			continue;
		}
		break;
	}
	if (rc == -ECHILD)
		rc = -EIO;
	if (rc < 0) {
		struct local_err ignored;

		boot_clear(c, rec->id);
		record_stopped(c, rec, &ignored);
		goto out;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
	if (proto_record_set_str(&rec->agent_url, url) < 0) {
		rc = local_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	rec->state = PROTO_RECORD_RUNNING;
	rec->port = port;
	rec->boot_count++;
	free(rec->started_at);
	rec->started_at = utc_now();
	rc = local_state_write(c->state_dir, rec, err);
out:
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

int local_ctl_rm(struct local_ctl *c, const char *id, bool force,
		 struct local_err *err)
{
	struct proto_record rec;
	char *root = NULL;
	int lock = -1, rc;
	bool running;
	pid_t pid;

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
		/* No record to trust: stop what the pid file names, if it
		 * is this sandbox's agent. */
		rec.id = xstrdup(id);
		pid = agent_pid(c, &rec);
		if (pid > 0 && local_ctl_agent_matches(pid, root) &&
		    (rc = kill_agent(pid, c->stop_timeout_ms)) < 0) {
			local_err_set(err, rc, "cannot stop agent %ld: %s",
				      (long)pid, strerror(-rc));
			goto out;
		}
	} else {
		pid = agent_pid(c, &rec);
		running = rec.state == PROTO_RECORD_RUNNING ||
			  rec.state == PROTO_RECORD_RESUMING ||
			  rec.state == PROTO_RECORD_STOPPING ||
			  (pid > 0 && local_ctl_agent_matches(pid, root));
		if (running && !force) {
			rc = local_err_set(err, -EBUSY,
					   "sandbox '%s' is running: stop it "
					   "first, or use rm -f",
					   id);
			goto out;
		}
		if (pid > 0 && local_ctl_agent_matches(pid, root)) {
			rc = kill_agent(pid, c->stop_timeout_ms);
			if (rc < 0) {
				local_err_set(err, rc,
					      "cannot stop agent %ld: %s",
					      (long)pid, strerror(-rc));
				goto out;
			}
		}
		rec.state = PROTO_RECORD_DELETING;
		rec.agent_pid = 0;
		rc = local_state_write(c->state_dir, &rec, err);
		if (rc < 0)
			goto out;
	}
	if (err != NULL)
		err->msg[0] = '\0';
	rc = remove_dir(c, id, err);
out:
	local_state_unlock(lock);
	proto_record_cleanup(&rec);
	free(root);
	return rc;
}

int local_ctl_status(struct local_ctl *c, const char *id,
		     struct local_status *out, struct local_err *err)
{
	struct local_status s;
	char *root;
	int rc;

	memset(&s, 0, sizeof(s));
	rc = local_state_read(c->state_dir, id, &s.rec, err);
	if (rc < 0)
		return rc;
	root = local_state_path(c->state_dir, id, LOCAL_PATH_ROOT);
	if (proto_record_transport(&s.rec) != PROTO_RECORD_NATIVE) {
		s.pid = agent_pid(c, &s.rec);
		s.alive = s.pid > 0 && local_ctl_agent_matches(s.pid, root);
	}
	if (s.rec.agent_url != NULL &&
	    local_ctl_health(s.rec.agent_url, LOCAL_CTL_HEALTH_TIMEOUT_MS,
			     &s.health) == 0)
		s.answered = true;
	free(root);
	*out = s;
	return 0;
}

void local_status_cleanup(struct local_status *s)
{
	if (s == NULL)
		return;
	proto_record_cleanup(&s->rec);
	memset(s, 0, sizeof(*s));
	proto_record_init(&s->rec);
}
