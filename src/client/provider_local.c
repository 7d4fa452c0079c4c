/* SPDX-License-Identifier: MIT */
/*
 * provider_local: the local provider over a state directory. Metadata only;
 * the agent protocol is the transport core's business.
 */
#include "config.h"

#include <errno.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/sigdefault.h"
#include "common/token.h"
#include "common/xalloc.h"
#include "client/child_output.h"
#include "client/local_ctl.h"
#include "client/local_ctl_i.h"
#include "client/local_state.h"
#include "client/provider_local.h"

/* A parsed record and the identity of the file it came from. */
struct cached {
	char *id;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct proto_record rec;
	struct cached *next;
};

struct local_priv {
	struct provider base;
	struct local_ctl ctl;
	uid_t owner; /* the state directory's */
	pthread_mutex_t lock;
	struct cached *cache;
};

static struct local_priv *priv_of(struct provider *p)
{
	return (struct local_priv *)p;
}

static void fail(struct sbx_error *err, int rc, const char *op, const char *id,
		 const struct local_err *le)
{
	enum sbx_code code =
		rc == -ENOENT ? SBX_COMMAND_FAILED : SBX_UNREACHABLE;

	sbx_error_set(err, code, rc == -ENOENT ? SBX_FAIL_GONE : NULL,
		      "local.%s: sandbox '%s': %s", op, id,
		      le != NULL && le->msg[0] ? le->msg : strerror(-rc));
	err->err = -rc;
	if (rc == -EBADMSG || rc == -EINVAL) {
		err->code = SBX_COMMAND_FAILED;
		err->retryable = false;
		err->err = EIO;
	}
}

/* ---- records ------------------------------------------------------------- */

static int to_provider_record(const struct proto_record *in,
			      struct provider_record *out)
{
	struct provider_record r;
	size_t i;

	memset(&r, 0, sizeof(r));
	snprintf(r.id, sizeof(r.id), "%s", in->id);
	/* The two enums list the Azure states in the same order. */
	r.state = (enum provider_state)in->state;
	if (in->nlabels > 0)
		r.labels = xcalloc(in->nlabels, sizeof(*r.labels));
	for (i = 0; i < in->nlabels; i++) {
		r.labels[i].key = xstrdup(in->labels[i].key);
		r.labels[i].value = xstrdup(in->labels[i].value);
		r.nlabels++;
	}
	if (in->agent_url != NULL)
		r.route_hint = xstrdup(in->agent_url);
	*out = r;
	return 0;
}

static void cached_free(struct cached *c)
{
	if (c == NULL)
		return;
	proto_record_cleanup(&c->rec);
	free(c->id);
	free(c);
}

/*
 * Read id's record through the cache. fn is called with the record under
 * the provider lock (so it must not block).
 */
static int with_record(struct local_priv *lp, const char *id,
		       int (*fn)(const struct proto_record *, void *),
		       void *arg, struct sbx_error *err)
{
	struct local_err le = {""};
	struct cached *c, **pp;
	struct stat st;
	char *path;
	int rc;

	if (!local_state_id_valid(id))
		return sbx_error_fail(err, SBX_INVALID_INPUT, NULL, ENOENT,
				      "'%s' is not a valid sandbox name", id);
	path = local_state_path(lp->ctl.state_dir, id, LOCAL_PATH_RECORD);
	if (stat(path, &st) < 0) {
		rc = -errno;
		free(path);
		if (rc == -ENOENT || rc == -ENOTDIR) {
			fail(err, -ENOENT, "record", id, NULL);
			return -ENOENT;
		}
		fail(err, rc, "record", id, NULL);
		return rc;
	}
	free(path);

	pthread_mutex_lock(&lp->lock);
	for (pp = &lp->cache; (c = *pp) != NULL; pp = &c->next)
		if (strcmp(c->id, id) == 0)
			break;
	if (c != NULL &&
	    (c->dev != st.st_dev || c->ino != st.st_ino ||
	     c->size != st.st_size || c->mtime.tv_sec != st.st_mtim.tv_sec ||
	     c->mtime.tv_nsec != st.st_mtim.tv_nsec)) {
		*pp = c->next;
		cached_free(c);
		c = NULL;
	}
	if (c == NULL) {
		struct proto_record rec;
		struct stat st2;

		proto_record_init(&rec);
		rc = local_state_read(lp->ctl.state_dir, id, &rec, &le);
		if (rc < 0) {
			pthread_mutex_unlock(&lp->lock);
			fail(err, rc, "record", id, &le);
			return rc;
		}
		/* Cache only when the file did not change under the read:
		 * a replacement between stat and read must not be pinned
		 * to the old identity. */
		path = local_state_path(lp->ctl.state_dir, id,
					LOCAL_PATH_RECORD);
		if (stat(path, &st2) == 0 && st2.st_ino == st.st_ino &&
		    st2.st_size == st.st_size &&
		    st2.st_mtim.tv_nsec == st.st_mtim.tv_nsec &&
		    st2.st_mtim.tv_sec == st.st_mtim.tv_sec) {
			c = xcalloc(1, sizeof(*c));
			c->id = xstrdup(id);
			c->dev = st.st_dev;
			c->ino = st.st_ino;
			c->size = st.st_size;
			c->mtime = st.st_mtim;
			c->rec = rec;
			c->next = lp->cache;
			lp->cache = c;
		} else {
			free(path);
			rc = fn(&rec, arg);
			pthread_mutex_unlock(&lp->lock);
			proto_record_cleanup(&rec);
			return rc;
		}
		free(path);
	}
	rc = fn(&c->rec, arg);
	pthread_mutex_unlock(&lp->lock);
	return rc;
}

/*
 * A record that says Running for an agent whose process died (killed,
 * crashed, the machine restarted: its lock is free) is a stopped sandbox
 * (SEMANTICS.md, "Reliability"): it is answered Stopped and without its
 * route, so the mount starts it again as it resumes any stopped sandbox,
 * and nothing is ever sent to a dead agent's old address.
 */
static bool agent_dead(struct local_priv *lp, const struct proto_record *rec)
{
	return local_ctl_agent_died(&lp->ctl, rec);
}

struct record_arg {
	struct local_priv *lp;
	struct provider_record *out;
};

static int copy_record(const struct proto_record *rec, void *arg)
{
	struct record_arg *ra = arg;
	int rc = to_provider_record(rec, ra->out);

	if (rc == 0 && agent_dead(ra->lp, rec)) {
		ra->out->state = PROVIDER_STATE_STOPPED;
		free(ra->out->route_hint);
		ra->out->route_hint = NULL;
	}
	return rc;
}

static int local_record(struct provider *p, const char *id,
			struct provider_record *out, struct sbx_error *err)
{
	struct record_arg ra = {priv_of(p), out};

	return with_record(priv_of(p), id, copy_record, &ra, err);
}

struct route_arg {
	struct local_priv *lp;
	char **url;
};

static int copy_route(const struct proto_record *rec, void *arg)
{
	struct route_arg *ra = arg;

	if (rec->agent_url == NULL || agent_dead(ra->lp, rec))
		return -EAGAIN;
	*ra->url = xstrdup(rec->agent_url);
	return 0;
}

static int local_route(struct provider *p, const char *id, char **url,
		       struct sbx_error *err)
{
	struct route_arg ra = {priv_of(p), url};
	int rc = with_record(priv_of(p), id, copy_route, &ra, err);

	if (rc == -EAGAIN) {
		/* No route yet: a stopped or booting sandbox. */
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "sandbox.agent: sandbox '%s' has no agent route "
			      "(it is not running)",
			      id);
		return -EIO;
	}
	return rc;
}

/* Loopback TCP (records other programs may write), or a Unix socket
 * inside the state directory (sandboxctl's). */
static bool local_route_allowed(struct provider *p, const char *url)
{
	return local_state_route_valid(url, NULL, NULL) ||
	       local_state_route_socket(priv_of(p)->ctl.state_dir, url, NULL,
					0);
}

/* The state directory's owner: who runs its agents (root's too). */
static int local_listener_uid(struct provider *p, uid_t *uid)
{
	*uid = priv_of(p)->owner;
	return 0;
}

static int local_credential(struct provider *p, const char *id, char **bytes,
			    size_t *len, struct sbx_error *err)
{
	struct local_priv *lp = priv_of(p);
	char *path, *data;
	ssize_t n;
	int fd, rc;

	if (!local_state_id_valid(id)) {
		fail(err, -ENOENT, "credential", id, NULL);
		return -ENOENT;
	}
	path = local_state_path(lp->ctl.state_dir, id, LOCAL_PATH_TOKEN);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	free(path);
	if (fd < 0) {
		rc = -errno;
		if (rc != -ENOENT)
			fail(err, rc, "credential", id, NULL);
		return rc;
	}
	/* One byte more than a credential, so an over-long file is seen. */
	data = xmalloc(TOKEN_CHARS + 2);
	n = read(fd, data, TOKEN_CHARS + 1);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc < 0) {
		token_wipe(data, TOKEN_CHARS + 2);
		free(data);
		fail(err, rc, "credential", id, NULL);
		return rc;
	}
	data[n] = '\0';
	*bytes = data;
	*len = (size_t)n;
	return 0;
}

static int no_op(const struct proto_record *rec, void *arg)
{
	(void)rec;
	(void)arg;
	return 0;
}

static int local_resume(struct provider *p, const char *id,
			struct sbx_error *err)
{
	struct local_err le = {""};
	struct sbx_error probe;
	int rc = local_ctl_start(&priv_of(p)->ctl, id, &le);

	/* A sandbox that is there but whose agent cannot start (a missing
	 * or broken agent program) is an error to see, not a sandbox that
	 * is gone. */
	sbx_error_clear(&probe);
	if (rc == -ENOENT &&
	    with_record(priv_of(p), id, no_op, NULL, &probe) == 0)
		rc = -EIO;
	if (rc < 0) {
		fail(err, rc, "resume", id, &le);
		err->code = SBX_COMMAND_FAILED;
		err->retryable = false;
	}
	return rc;
}

static int local_stop(struct provider *p, const char *id, struct sbx_error *err)
{
	struct local_err le = {""};
	int rc = local_ctl_stop(&priv_of(p)->ctl, id, &le);

	if (rc < 0) {
		fail(err, rc, "stop", id, &le);
		err->code = SBX_COMMAND_FAILED;
		err->retryable = false;
	}
	return rc;
}

static int local_list(struct provider *p, char ***ids, size_t *n,
		      struct sbx_error *err)
{
	int rc = local_state_list(priv_of(p)->ctl.state_dir, ids, n);

	if (rc < 0)
		fail(err, rc, "list", "*", NULL);
	return rc;
}

/* ---- native sessions ------------------------------------------------------ */

static int open_root(struct local_priv *lp, const char *id, int *fd,
		     struct sbx_error *err)
{
	char *root = local_state_path(lp->ctl.state_dir, id, LOCAL_PATH_ROOT);
	int rc = 0;

	*fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0) {
		rc = -errno;
		fail(err, rc == -ENOTDIR ? -ENOENT : rc, "native", id, NULL);
	}
	free(root);
	return rc;
}

/*
 * Open a normalised relative path beneath rootfd for reading, one
 * component at a time with O_NOFOLLOW: no symlink in any component (v1's
 * rule), and no ".." (path_normalize refused it). Written with openat
 * rather than openat2 so it also runs where openat2 is missing (older
 * kernels, valgrind). Returns a descriptor or a negative errno; a symlink
 * is -ELOOP.
 */
static int open_beneath(int rootfd, const char *rel)
{
	char comp[256];
	int dir = rootfd, fd = -1;

	for (;;) {
		size_t n = strcspn(rel, "/");
		bool last = rel[n] == '\0';

		if (n == 0 || n >= sizeof(comp)) {
			fd = -ENAMETOOLONG;
			break;
		}
		memcpy(comp, rel, n);
		comp[n] = '\0';
		fd = openat(dir, comp,
			    (last ? O_RDONLY | O_NONBLOCK | O_NOCTTY
				  : O_PATH | O_DIRECTORY) |
				    O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			/* O_NOFOLLOW on a symlink: ELOOP, or ENOTDIR for an
			 * intermediate one opened as a directory. */
			if (fd == -ENOTDIR && !last) {
				struct stat st;

				if (fstatat(dir, comp, &st,
					    AT_SYMLINK_NOFOLLOW) == 0 &&
				    S_ISLNK(st.st_mode))
					fd = -ELOOP;
			}
			break;
		}
		if (dir != rootfd)
			close(dir);
		dir = fd;
		if (last)
			return fd;
		rel += n + 1;
	}
	if (dir != rootfd)
		close(dir);
	return fd;
}

static int local_native_read(struct provider *p, const char *id,
			     const char *path, struct buf *out,
			     struct sbx_error *err)
{
	struct local_priv *lp = priv_of(p);
	struct stat st;
	enum path_verdict verdict;
	char rel[PATH_MAX_BYTES + 1];
	int rootfd = -1, fd = -1, rc;

	if (!local_state_id_valid(id)) {
		fail(err, -ENOENT, "native", id, NULL);
		return -ENOENT;
	}
	verdict = path_normalize(path, strlen(path), false, rel, sizeof(rel));
	if (verdict != PATH_OK)
		return sbx_error_fail(err, SBX_COMMAND_FAILED,
				      SBX_FAIL_AGENT_REFUSED, EACCES,
				      "sandbox.readFile: Path '%s' refused: %s",
				      path, path_verdict_reason(verdict));
	rc = open_root(lp, id, &rootfd, err);
	if (rc < 0)
		return rc;
	fd = open_beneath(rootfd, rel);
	if (fd < 0) {
		rc = fd;
		if (rc == -ELOOP) {
			sbx_error_set(err, SBX_COMMAND_FAILED,
				      SBX_FAIL_AGENT_REFUSED,
				      "sandbox.readFile: Path '%s' refused: "
				      "path leaves the session root",
				      path);
			err->err = ELOOP;
		} else {
			sbx_error_set(err, SBX_COMMAND_FAILED,
				      SBX_FAIL_AGENT_REFUSED,
				      "sandbox.readFile: %s: %s", path,
				      strerror(-rc));
			err->err = -rc;
		}
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
			      "sandbox.readFile: '%s' is not a regular file",
			      path);
		err->err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		rc = -err->err;
		goto out;
	}
	if ((uint64_t)st.st_size > PROTO_MAX_TRANSFER_BYTES) {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
			      "sandbox.readFile: '%s' is over the %lu byte "
			      "transfer limit",
			      path, (unsigned long)PROTO_MAX_TRANSFER_BYTES);
		err->err = EFBIG;
		rc = -EFBIG;
		goto out;
	}
	for (;;) {
		char chunk[65536];
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			fail(err, rc, "native", id, NULL);
			goto out;
		}
		if (n == 0)
			break;
		if (out->len + (size_t)n > PROTO_MAX_TRANSFER_BYTES)
			rc = -EFBIG;
		else
			rc = buf_append(out, chunk, (size_t)n);
		if (rc < 0) {
			sbx_error_set(err, SBX_COMMAND_FAILED,
				      SBX_FAIL_AGENT_REFUSED,
				      "sandbox.readFile: '%s' grew past the "
				      "transfer limit",
				      path);
			err->err = EFBIG;
			goto out;
		}
	}
	rc = 0;
out:
	fdio_close(fd);
	close(rootfd);
	return rc;
}

/* What a native exec needs of the record. */
struct exec_plan {
	long uid, gid;
	uint64_t pids, memory, tmp_size;
	char network[8];
};

static int copy_plan(const struct proto_record *rec, void *arg)
{
	struct exec_plan *x = arg;

	x->uid = rec->exec_uid;
	x->gid = rec->exec_gid;
	x->pids = rec->pids;
	x->memory = rec->memory;
	x->tmp_size = rec->tmp_size;
	snprintf(x->network, sizeof(x->network), "%s",
		 rec->network ? rec->network : "");
	return 0;
}

/* `sandbox-agent --run` for a native exec: confined as the record says
 * (x, doc/commands.md), the command run by /bin/sh in cwd; argv points
 * into cf and timeout. */
static void native_argv(struct local_priv *lp, const struct exec_plan *x,
			const char *command, const char *cwd,
			struct local_confine *cf, char *timeout, size_t tsize,
			const char **argv)
{
	size_t argc = 0;

	argv[argc++] = lp->ctl.agent;
	argv[argc++] = "--log-level";
	argv[argc++] = "error";
	cf->uid = x->uid > 0 ? x->uid : (long)LOCAL_CTL_DEFAULT_ID;
	cf->gid = x->gid > 0 ? x->gid : (long)LOCAL_CTL_DEFAULT_ID;
	cf->pids = x->pids;
	cf->memory = x->memory;
	cf->tmp_size = x->tmp_size;
	cf->network = x->network[0] != '\0' ? x->network : NULL;
	argc = local_confine_args(cf, argv, argc);
	/* Ours comes first: the agent's deadline is only a backstop. */
	snprintf(timeout, tsize, "%ld", PROVIDER_LOCAL_EXEC_TIMEOUT_MS + 5000);
	argv[argc++] = "--run";
	argv[argc++] = "--run-timeout";
	argv[argc++] = timeout;
	if (cwd != NULL && *cwd != '\0') {
		argv[argc++] = "--run-cwd";
		argv[argc++] = cwd;
	}
	argv[argc++] = "--";
	argv[argc++] = "/bin/sh";
	argv[argc++] = "-c";
	argv[argc++] = command;
	argv[argc] = NULL;
}

/*
 * A native session's command runs confined exactly as an agent sandbox's
 * job does (doc/commands.md, "Confinement"; sandboxctl(1)): through
 * `sandbox-agent --run` with the record's identity, limits and network,
 * which gives it the zygote's layout, its own PID namespace (nothing it
 * starts outlives it) and the sandbox's network, and passes its output
 * and exit status through.
 */
static int local_native_exec(struct provider *p, const char *id,
			     const char *command, const char *cwd,
			     struct provider_exec_result *res,
			     struct sbx_error *err)
{
	struct local_priv *lp = priv_of(p);
	struct exec_plan x;
	int outp[2] = {-1, -1}, errp[2] = {-1, -1};
	long long deadline = clock_mono_ms() + PROVIDER_LOCAL_EXEC_TIMEOUT_MS;
	const char *argv[LOCAL_ARGV_MAX];
	struct local_confine cf;
	struct child_output co;
	char timeout[24];
	char *root;
	pid_t pid;
	char *env_root = NULL;
	int rc, status = 0;

	memset(&x, 0, sizeof(x));
	x.uid = x.gid = -1;
	rc = with_record(lp, id, copy_plan, &x, err);
	if (rc < 0)
		return rc;
	if (cwd != NULL && strstr(cwd, "..") != NULL)
		return sbx_error_fail(
			err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED, EACCES,
			"sandbox.runCommand: the working directory "
			"'%s' is refused",
			cwd);
	root = local_state_path(lp->ctl.state_dir, id, LOCAL_PATH_ROOT);
	/* The session root in the environment, not on the command line
	 * (doc/security.md). */
	env_root = xasprintf("ALIEN_SANDBOX_ROOT=%s", root);
	native_argv(lp, &x, command, cwd, &cf, timeout, sizeof(timeout), argv);
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		rc = -errno;
		fail(err, rc, "exec", id, NULL);
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		fail(err, rc, "exec", id, NULL);
		goto out;
	}
	if (pid == 0) {
		char *const env[] = {env_root, NULL};

		sig_defaults();
		child_exec(argv, env, outp[1], errp[1], false);
	}
	close(outp[1]);
	close(errp[1]);
	outp[1] = errp[1] = -1;
	/* Output past the bound is dropped, as the agent's output cap drops
	 * it. */
	co = (struct child_output){{outp[0], errp[0]},
				   {&res->out, &res->err},
				   {PROVIDER_LOCAL_EXEC_OUTPUT_MAX,
				    PROVIDER_LOCAL_EXEC_OUTPUT_MAX},
				   {false, false},
				   false};
	rc = child_output_drain(&co, deadline);
	if (rc == -ETIMEDOUT)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc == -ETIMEDOUT) {
		sbx_error_set(err, SBX_COMMAND_FAILED, "timeoutExceeded",
			      "the command exceeded its %ldms timeout",
			      PROVIDER_LOCAL_EXEC_TIMEOUT_MS);
		err->err = ETIMEDOUT;
		goto out;
	}
	if (rc < 0) {
		fail(err, rc, "exec", id, NULL);
		goto out;
	}
	res->has_exit = true;
	res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	rc = 0;
out:
	child_fds_close(outp, 2);
	child_fds_close(errp, 2);
	free(env_root);
	free(root);
	return rc;
}

/* ---- lifetime ---------------------------------------------------------------- */

static void local_free(struct provider *p)
{
	struct local_priv *lp = priv_of(p);
	struct cached *c, *next;

	for (c = lp->cache; c != NULL; c = next) {
		next = c->next;
		cached_free(c);
	}
	local_ctl_cleanup(&lp->ctl);
	pthread_mutex_destroy(&lp->lock);
	free(lp);
}

static void local_home(struct provider *p, char *buf, size_t size)
{
	snprintf(buf, size, "local:%s", priv_of(p)->ctl.state_dir);
}

static int local_statfs(struct provider *p, struct statvfs *st)
{
	return statvfs(priv_of(p)->ctl.state_dir, st) < 0 ? -errno : 0;
}

static const struct provider_ops local_ops = {
	.name = "local",
	.list = local_list,
	.record = local_record,
	.route = local_route,
	.route_allowed = local_route_allowed,
	.listener_uid = local_listener_uid,
	.credential = local_credential,
	.judge = NULL,
	.resume = local_resume,
	.stop = local_stop,
	.native_read = local_native_read,
	.native_exec = local_native_exec,
	.ca_file = NULL,
	.resolve = NULL,
	.home = local_home,
	.statfs = local_statfs,
	.free = local_free,
};

int provider_local_new(const char *state_dir, struct provider **out,
		       struct sbx_error *err)
{
	struct local_err le = {""};
	struct local_priv *lp = xcalloc(1, sizeof(*lp));
	struct stat st;
	int rc;

	rc = local_ctl_init(&lp->ctl, state_dir, &le);
	if (rc < 0) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "the local state directory is unusable: %s",
			      le.msg[0] ? le.msg : strerror(-rc));
		err->err = -rc;
		free(lp);
		return rc;
	}
	if (stat(lp->ctl.state_dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    access(lp->ctl.state_dir, R_OK | X_OK) < 0) {
		rc = errno ? -errno : -ENOTDIR;
		if (rc == 0 ||
		    (stat(lp->ctl.state_dir, &st) == 0 && !S_ISDIR(st.st_mode)))
			rc = -ENOTDIR;
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "the local state directory %s is unusable: %s",
			      lp->ctl.state_dir, strerror(-rc));
		err->err = -rc;
		local_ctl_cleanup(&lp->ctl);
		free(lp);
		return rc;
	}
	lp->owner = st.st_uid;
	pthread_mutex_init(&lp->lock, NULL);
	lp->base.ops = &local_ops;
	lp->base.priv = lp;
	*out = &lp->base;
	return 0;
}
