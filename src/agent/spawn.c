/* SPDX-License-Identifier: MIT */
/*
 * spawn: fork/exec of one command, its confinement, and the loop that
 * frames its output (protocol.md 3.3). Between fork and exec the child runs
 * only async-signal-safe code on memory the parent prepared: the process
 * that forks has many threads, and one of them may hold the malloc lock.
 * Confined commands are started by the zygote (zygote.c) when it works,
 * else each by a bubblewrap of its own.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "agent/confine.h"
#include "agent/spawn.h"
#include "agent/zygote.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/xalloc.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* How long the start-up probe may take. */
#define PROBE_TIMEOUT_MS 10000
/* Without a pidfd, how often the loop looks for the leader's exit. */
#define EXIT_POLL_MS 50
/* How long the zygote may take to tell an exit status its pidfd shows. */
#define ZYGOTE_STATUS_MS 5000

struct agent_spawner {
	const struct agent *a;
	char *root; /* canonical session root */
	bool confined;
	const char *bwrap;
	/* bubblewrap's options up to the session root bind, fixed at start */
	char **bwrap_head;
	size_t bwrap_headc;
	struct agent_zygote *zygote; /* NULL: one bubblewrap per command */
	/* How a child enters the sandbox (confine.h): the zygote's, and the
	 * one of a bubblewrap per command, which also sets RLIMIT_NPROC
	 * before bubblewrap (its user namespace is the command's own). */
	struct agent_box box;
	struct agent_box box_each;
	struct agent_cgroup *cg; /* NULL: rlimits only */
	struct agent_net_cfg net;
	char *resolv_dest; /* NULL: the host's resolver configuration */
	/* What a staged namespace keeps: the system's directories, and
	 * those of bubblewrap and of the resolver configuration. */
	const char *keep[16];
	char *keep_bwrap, *keep_resolv;
	uint64_t pids, memory, tmp_size;
	uint64_t data; /* RLIMIT_DATA of each command; 0: the cgroup's */
	char tmp_arg[24]; /* tmp_size in decimal, for bubblewrap */
};

/* ---- small helpers ------------------------------------------------------- */

int64_t agent_deadline(uint64_t ms)
{
	int64_t now = clock_mono_ms();

	if (ms > (uint64_t)(INT64_MAX - now))
		return INT64_MAX;
	return now + (int64_t)ms;
}

void agent_errno_text(int err, char *out, size_t outsz)
{
	char text[128];
	const char *s = strerror_r(err, text, sizeof(text));

	snprintf(out, outsz, "%s (os error %d)", s, err);
}

/* ---- the working directory ----------------------------------------------- */

int agent_spawn_cwd(const struct agent_spawner *sp, const char *cwd,
		    bool has_nul, char **rel, char *reason, size_t reasonsz)
{
	size_t rootlen = strlen(sp->root), n;
	char *norm = NULL, *joined = NULL, *canon = NULL;
	const char *rest;
	enum path_verdict v;
	struct stat st;
	char *cut;
	int rc = -EACCES;

	if (cwd == NULL) {
		*rel = xstrdup("");
		return 0;
	}
	n = strlen(cwd);
	if (n == 0) {
		/* "" is not the root here, whatever the file routes say. */
		snprintf(reason, reasonsz, "%s",
			 path_verdict_reason(PATH_EMPTY));
		return -EACCES;
	}
	norm = xmalloc(n + 1);
	v = path_normalize(cwd, n, true, norm, n + 1);
	if (v != PATH_OK) {
		snprintf(reason, reasonsz, "%s", path_verdict_reason(v));
		goto out;
	}
	if (has_nul) {
		/* What canonicalising a path with a NUL reports in Rust. */
		snprintf(reason, reasonsz,
			 "path could not be resolved: file name contained an "
			 "unexpected NUL byte");
		goto out;
	}
	joined = xasprintf("%s%s%s", sp->root, *norm ? "/" : "", norm);
	/* The deepest ancestor that exists, a dangling symlink included
	 * (lstat): canonicalising that one refuses it rather than letting a
	 * later write go through it. The root itself always exists. */
	cut = joined + strlen(joined);
	while (lstat(joined, &st) < 0 && cut > joined + rootlen) {
		while (cut > joined + rootlen && *cut != '/')
			cut--;
		*cut = '\0';
	}
	canon = realpath(joined, NULL);
	if (canon == NULL) {
		char text[160];

		agent_errno_text(errno, text, sizeof(text));
		snprintf(reason, reasonsz, "path could not be resolved: %s",
			 text);
		goto out;
	}
	if (strncmp(canon, sp->root, rootlen) != 0 ||
	    (canon[rootlen] != '\0' && canon[rootlen] != '/')) {
		snprintf(reason, reasonsz, "path escapes the session root");
		goto out;
	}
	/* What did not exist yet follows the canonical part unchanged. */
	rest = norm;
	if (strlen(joined) > rootlen)
		rest += strlen(joined) - rootlen - 1;
	while (*rest == '/')
		rest++;
	if (canon[rootlen] == '\0')
		*rel = xstrdup(rest);
	else if (*rest == '\0')
		*rel = xstrdup(canon + rootlen + 1);
	else
		*rel = xasprintf("%s/%s", canon + rootlen + 1, rest);
	rc = 0;
out:
	free(norm);
	free(joined);
	free(canon);
	return rc;
}

/* ---- the child ----------------------------------------------------------- */

/* Everything the child needs, prepared by the parent. */
struct plan {
	const char *program; /* the request's argv[0] */
	const char *const *argv; /* what execve runs: argv or bwrap's */
	const char **sh_argv; /* unconfined ENOEXEC fallback */
	char *const *envp;
	const char *path; /* PATH of envp */
	/* The working directory and the session root as this child sees
	 * them: the staged root (confine.h) when a root agent confines, else
	 * the root's own path. */
	const char *host_cwd;
	const char *box_cwd; /* "/sandbox/..." when confined */
	const char *root;
	const char *bwrap; /* NULL when unconfined */
	const struct agent_box *box;
	int devnull, out_w, err_w, report_w;
};

enum stage {
	STAGE_SETUP = 1,
	STAGE_DROP,
	STAGE_CWD,
	STAGE_EXEC,
};

struct report {
	int stage;
	int step; /* STAGE_DROP: enum agent_box_step */
	int err;
};

static size_t cat(char *dst, size_t pos, size_t dstsz, const char *s, size_t n)
{
	if (pos >= dstsz || n >= dstsz - pos)
		return dstsz;
	memcpy(dst + pos, s, n);
	dst[pos + n] = '\0';
	return pos + n;
}

/*
 * Lexically normalise an absolute path of the sandbox's view in place
 * ("." and ".." resolved), as the kernel would walk it without symlinks.
 */
static void box_normalize(char *p)
{
	char *r = p, *w = p;

	while (*r) {
		char *start;
		size_t len;

		while (*r == '/')
			r++;
		start = r;
		while (*r && *r != '/')
			r++;
		len = (size_t)(r - start);
		if (len == 0 || (len == 1 && start[0] == '.'))
			continue;
		if (len == 2 && start[0] == '.' && start[1] == '.') {
			while (w > p && *--w != '/')
				;
			continue;
		}
		*w++ = '/';
		memmove(w, start, len);
		w += len;
	}
	if (w == p)
		*w++ = '/';
	*w = '\0';
}

/*
 * Map a path of the sandbox's view to the host path that shows the same
 * file: /sandbox is the session root, the system directories are bound at
 * their own place, and nothing else is visible. Returns false when the
 * path is not visible inside.
 */
static bool box_to_host(const struct plan *p, const char *box, char *host,
			size_t hostsz)
{
	static const char *const same[] = {
		"/usr", "/etc",	  "/bin",   "/sbin",
		"/lib", "/lib64", "/lib32", "/libx32",
	};
	size_t sl = strlen(AGENT_SANDBOX_DIR), i;

	if (strncmp(box, AGENT_SANDBOX_DIR, sl) == 0 &&
	    (box[sl] == '\0' || box[sl] == '/')) {
		size_t pos = cat(host, 0, hostsz, p->root, strlen(p->root));

		return cat(host, pos, hostsz, box + sl, strlen(box + sl)) <
		       hostsz;
	}
	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		size_t l = strlen(same[i]);

		if (strncmp(box, same[i], l) == 0 &&
		    (box[l] == '\0' || box[l] == '/'))
			return cat(host, 0, hostsz, box, strlen(box)) < hostsz;
	}
	return false;
}

/* Is the file a regular file this user may execute? 0, or an errno. */
static int runnable(const char *host)
{
	struct stat st;

	if (stat(host, &st) < 0)
		return errno;
	if (!S_ISREG(st.st_mode))
		return EACCES;
	return access(host, X_OK) == 0 ? 0 : errno;
}

/* One candidate (a path as the command would name it, maybe relative):
 * 0 and the host path in host[], or an errno. */
static int try_candidate(const struct plan *p, const char *cand, char *host,
			 size_t hostsz)
{
	char box[PATH_MAX];
	size_t pos = 0;

	if (p->bwrap == NULL) {
		if (cat(host, 0, hostsz, cand, strlen(cand)) >= hostsz)
			return ENAMETOOLONG;
		return runnable(host);
	}
	if (cand[0] != '/') {
		pos = cat(box, 0, sizeof(box), p->box_cwd, strlen(p->box_cwd));
		pos = cat(box, pos, sizeof(box), "/", 1);
	}
	if (cat(box, pos, sizeof(box), cand, strlen(cand)) >= sizeof(box))
		return ENAMETOOLONG;
	box_normalize(box);
	if (!box_to_host(p, box, host, hostsz))
		return ENOENT;
	return runnable(host);
}

/*
 * Find the program as execvp would, in the view the command will have: a
 * name with a '/' is taken as it is, anything else is looked up on PATH
 * (an empty entry is the working directory). 0 with host[] set, or the
 * errno execvp would end with.
 */
static int find_program(const struct plan *p, char *host, size_t hostsz)
{
	const char *dir = p->path ? p->path : AGENT_DEFAULT_PATH;
	size_t plen = strlen(p->program);
	int err, last = ENOENT;

	if (plen == 0)
		return ENOENT;
	if (strchr(p->program, '/') != NULL)
		return try_candidate(p, p->program, host, hostsz);
	for (;;) {
		const char *end = strchr(dir, ':');
		size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
		char cand[PATH_MAX];
		size_t pos;

		pos = dlen ? cat(cand, 0, sizeof(cand), dir, dlen)
			   : cat(cand, 0, sizeof(cand), ".", 1);
		pos = cat(cand, pos, sizeof(cand), "/", 1);
		pos = cat(cand, pos, sizeof(cand), p->program, plen);
		if (pos < sizeof(cand)) {
			err = try_candidate(p, cand, host, hostsz);
			if (err == 0)
				return 0;
			/* execvp reports EACCES when a file was found but
			 * could not be run, ENOENT when nothing was. */
			if (err == EACCES)
				last = EACCES;
		}
		if (end == NULL)
			return last;
		dir = end + 1;
	}
}

int agent_drop_privileges(uid_t uid, gid_t gid)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;

	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		return -1;
	if (getresuid(&r, &e, &s) < 0 || getresgid(&rg, &eg, &sg) < 0 ||
	    r != uid || e != uid || s != uid || rg != gid || eg != gid ||
	    sg != gid || getgroups(0, NULL) != 0) {
		errno = EPERM;
		return -1;
	}
	/* Refuse rather than run wide: a drop the kernel did not make final
	 * would let the command become root again. */
	if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

static void mark_cloexec_from(int lowfd)
{
	long max = sysconf(_SC_OPEN_MAX);
	int fd;

	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U,
		    CLOSE_RANGE_CLOEXEC) == 0)
		return;
	if (max < 0 || max > 65536)
		max = 65536;
	for (fd = lowfd; fd < max; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
}

__attribute__((noreturn)) static void child(const struct plan *p)
{
	struct report rep = {STAGE_SETUP, 0, 0};
	struct sigaction sa;
	char found[PATH_MAX];
	sigset_t none;
	int sig, step = 0, cwd = -1;

	/* The agent's dispositions and mask are its own business. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* A new session is a new process group that the timeout and the
	 * cancel kill as one, and it has no controlling terminal. */
	if (setsid() < 0 || dup2(p->devnull, 0) < 0 || dup2(p->out_w, 1) < 0 ||
	    dup2(p->err_w, 2) < 0)
		goto fail;
	/* Every descriptor past stderr goes at exec, the report pipe with
	 * them: a successful exec is an empty read on the parent's side. */
	mark_cloexec_from(3);

	/* Unconfined, the directory is opened before the drop (the exec
	 * user may not search the state directory above the root) and
	 * entered after it, so that it is judged with the user's rights. */
	rep.stage = STAGE_CWD;
	if (p->bwrap == NULL &&
	    (cwd = open(p->host_cwd, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto fail;
	rep.stage = STAGE_DROP;
	if (agent_box_enter(p->box, p->bwrap != NULL, &step) < 0) {
		rep.step = step;
		goto fail;
	}
	/* When confined this only checks it, bubblewrap changes into it. */
	rep.stage = STAGE_CWD;
	if (cwd >= 0 ? fchdir(cwd) < 0 : chdir(p->host_cwd) < 0)
		goto fail;
	rep.stage = STAGE_EXEC;
	errno = find_program(p, found, sizeof(found));
	if (errno != 0)
		goto fail;
	if (p->bwrap != NULL) {
		execve(p->bwrap, (char *const *)p->argv, p->envp);
		goto fail;
	}
	/* bubblewrap sets this itself, and a setuid bubblewrap must not be
	 * stopped by it. */
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	execve(found, (char *const *)p->argv, p->envp);
	if (errno == ENOEXEC) {
		/* What execvp does with a script that has no #! line. */
		p->sh_argv[1] = found;
		execve("/bin/sh", (char *const *)p->sh_argv, p->envp);
	}
fail:
	rep.err = errno ? errno : EIO;
	while (write(p->report_w, &rep, sizeof(rep)) < 0 && errno == EINTR)
		;
	_exit(127);
}

/* ---- starting a command ------------------------------------------------- */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The command's environment: PATH, then the request's entries, a later
 * key replacing an earlier one. Sets *path to PATH's value. */
static char **build_env(const struct proto_exec_req *req, const char **path)
{
	char **env = xcalloc(req->envc + 2, sizeof(char *));
	size_t n = 0, i, j;

	env[n++] = xstrdup("PATH=" AGENT_DEFAULT_PATH);
	for (i = 0; i < req->envc; i++) {
		const char *eq = strchr(req->env[i], '=');
		size_t klen = eq ? (size_t)(eq - req->env[i]) + 1 : 0;

		for (j = 0; j < n && klen > 0; j++)
			if (strncmp(env[j], req->env[i], klen) == 0)
				break;
		if (klen > 0 && j < n) {
			free(env[j]);
			env[j] = xstrdup(req->env[i]);
		} else {
			env[n++] = xstrdup(req->env[i]);
		}
	}
	env[n] = NULL;
	*path = env[0] + 5;
	for (i = 0; i < n; i++)
		if (strncmp(env[i], "PATH=", 5) == 0)
			*path = env[i] + 5;
	return env;
}

static void free_strv(char **v)
{
	size_t i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* bubblewrap's command line for this spawn (the strings are borrowed). */
static const char **bwrap_argv(const struct agent_spawner *sp,
			       const struct proto_exec_req *req,
			       const char *box_cwd)
{
	const char **v =
		xcalloc(sp->bwrap_headc + req->argc + 16, sizeof(char *));
	size_t n = 0, i;

	for (i = 0; i < sp->bwrap_headc; i++)
		v[n++] = sp->bwrap_head[i];
	v[n++] = "--bind";
	v[n++] = agent_box_bind_source(&sp->box_each);
	v[n++] = AGENT_SANDBOX_DIR;
	/* The command's own /dev/shm, bounded; nothing else of the view
	 * bubblewrap made (its root, /dev) is writable. */
	v[n++] = "--size";
	v[n++] = sp->tmp_arg;
	v[n++] = "--tmpfs";
	v[n++] = "/dev/shm";
	v[n++] = "--remount-ro";
	v[n++] = "/";
	v[n++] = "--remount-ro";
	v[n++] = "/dev";
	v[n++] = "--chdir";
	v[n++] = box_cwd;
	v[n++] = "--";
	for (i = 0; i < req->argc; i++)
		v[n++] = req->argv[i];
	v[n] = NULL;
	return v;
}

static int pipe_pair(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	/* Only our end: the command's end stays blocking. */
	if (fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
		int err = errno;

		close(fds[0]);
		close(fds[1]);
		return -err;
	}
	return 0;
}

/*
 * Start a confined command through the zygote. Its environment also gets
 * the PWD that bubblewrap set when it started each command (in place of a
 * PWD the request gave, else last).
 */
static int spawn_zygote(const struct agent_spawner *sp,
			const struct proto_exec_req *req, const char *cwd_rel,
			struct agent_cmd *out)
{
	struct agent_cmd c = {
		.pid = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1};
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, devnull = -1, rc;
	char *box_cwd, **envp, *pwd;
	const char *path;
	size_t i;

	box_cwd = xasprintf(AGENT_SANDBOX_DIR "%s%s", *cwd_rel ? "/" : "",
			    cwd_rel);
	envp = build_env(req, &path);
	pwd = xasprintf("PWD=%s", box_cwd);
	for (i = 0; envp[i] != NULL && strncmp(envp[i], "PWD=", 4) != 0; i++)
		;
	if (envp[i] != NULL) {
		free(envp[i]);
		envp[i] = pwd;
	} else {
		envp = xrealloc(envp, (i + 2) * sizeof(char *));
		envp[i] = pwd;
		envp[i + 1] = NULL;
	}
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0) {
		rc = -errno;
		goto out;
	}
	rc = pipe_pair(outp);
	if (rc == 0)
		rc = pipe_pair(errp);
	if (rc < 0)
		goto out;
	rc = agent_zygote_spawn(sp->zygote, req->argv, envp, box_cwd, devnull,
				outp[1], errp[1], &c.zc, &c.pid, &c.pidfd);
	if (rc < 0)
		goto out;
	c.out_fd = outp[0];
	c.err_fd = errp[0];
	outp[0] = errp[0] = -1;
	*out = c;
out:
	close_fd(&devnull);
	close_fd(&outp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	free_strv(envp);
	free(box_cwd);
	return rc;
}

int agent_spawn(const struct agent_spawner *sp,
		const struct proto_exec_req *req, const char *cwd_rel,
		struct agent_cmd *out, char msg[AGENT_SPAWN_MSG_MAX])
{
	const struct agent_config *cfg = &sp->a->cfg;
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, rep[2] = {-1, -1};
	struct agent_cmd c = {
		.pid = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1};
	char *host_cwd = NULL, *box_cwd = NULL;
	const char **argv = NULL, **sh_argv = NULL;
	char **envp = NULL;
	struct report r;
	struct plan p;
	ssize_t got;
	size_t i;
	int rc, devnull = -1;

	msg[0] = '\0';
	if (req->argc == 0 || (req->flags & PROTO_EXEC_ARG_NUL)) {
		/* What Rust's Command says about a NUL in an argument. */
		snprintf(msg, AGENT_SPAWN_MSG_MAX,
			 "nul byte found in provided data");
		return -EINVAL;
	}
	if (sp->zygote != NULL) {
		rc = spawn_zygote(sp, req, cwd_rel, out);
		if (rc < 0)
			agent_errno_text(-rc, msg, AGENT_SPAWN_MSG_MAX);
		return rc;
	}
	memset(&p, 0, sizeof(p));
	p.root = sp->confined ? agent_box_bind_source(&sp->box_each) : sp->root;
	host_cwd = xasprintf("%s%s%s", p.root, *cwd_rel ? "/" : "", cwd_rel);
	envp = build_env(req, &p.path);
	sh_argv = xcalloc(req->argc + 2, sizeof(char *));
	sh_argv[0] = "/bin/sh";
	for (i = 1; i < req->argc; i++)
		sh_argv[i + 1] = req->argv[i];
	p.program = req->argv[0];
	p.sh_argv = sh_argv;
	p.envp = envp;
	p.host_cwd = host_cwd;
	p.box = &sp->box_each;
	if (sp->confined) {
		box_cwd = xasprintf(AGENT_SANDBOX_DIR "%s%s",
				    *cwd_rel ? "/" : "", cwd_rel);
		argv = bwrap_argv(sp, req, box_cwd);
		p.argv = argv;
		p.box_cwd = box_cwd;
		p.bwrap = sp->bwrap;
	} else {
		p.argv = (const char *const *)req->argv;
	}

	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0) {
		rc = -errno;
		goto fail;
	}
	rc = pipe_pair(outp);
	if (rc == 0)
		rc = pipe_pair(errp);
	if (rc == 0 && pipe2(rep, O_CLOEXEC) < 0)
		rc = -errno;
	if (rc < 0)
		goto fail;
	p.devnull = devnull;
	p.out_w = outp[1];
	p.err_w = errp[1];
	p.report_w = rep[1];

	c.pid = fork();
	if (c.pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (c.pid == 0)
		child(&p);
	close_fd(&rep[1]);
	close_fd(&outp[1]);
	close_fd(&errp[1]);
	do {
		got = read(rep[0], &r, sizeof(r));
	} while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof(r)) {
		rc = -r.err;
		if (r.stage == STAGE_DROP && r.step == AGENT_BOX_DROP) {
			agent_errno_text(r.err, msg, AGENT_SPAWN_MSG_MAX);
			log_warn("exec: dropping to uid %u gid %u failed: %s",
				 (unsigned)cfg->exec_uid,
				 (unsigned)cfg->exec_gid, msg);
		} else if (r.stage == STAGE_DROP) {
			agent_errno_text(r.err, msg, AGENT_SPAWN_MSG_MAX);
			log_warn("exec: entering the sandbox failed (step %d): "
				 "%s",
				 r.step, msg);
		}
		while (waitpid(c.pid, NULL, 0) < 0 && errno == EINTR)
			;
		c.pid = -1;
		goto fail;
	}
	/* The leader has not been reaped, so its pid names it alone. */
	c.pidfd = (int)syscall(SYS_pidfd_open, c.pid, 0);
	if (c.pidfd >= 0)
		fcntl(c.pidfd, F_SETFD, FD_CLOEXEC);
	c.out_fd = outp[0];
	c.err_fd = errp[0];
	outp[0] = errp[0] = -1;
	*out = c;
	rc = 0;
	goto out;
fail:
	agent_errno_text(-rc, msg, AGENT_SPAWN_MSG_MAX);
out:
	close_fd(&devnull);
	close_fd(&outp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&rep[0]);
	close_fd(&rep[1]);
	free(host_cwd);
	free(box_cwd);
	free_strv(envp);
	free(argv);
	free(sh_argv);
	return rc;
}

void agent_cmd_kill(const struct agent_cmd *c)
{
	if (c->zc != NULL) {
		/* Its init: the kernel then kills every process of the
		 * command's PID namespace, and a pidfd cannot name a pid
		 * that was reused. */
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		return;
	}
	if (c->pid > 0)
		kill(-c->pid, SIGKILL);
}

void agent_cmd_reap(struct agent_cmd *c)
{
	if (c->zc != NULL) {
		agent_zygote_release(c->zc);
		c->zc = NULL;
		c->pid = -1;
	}
	if (c->pid > 0) {
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
		c->pid = -1;
	}
	close_fd(&c->out_fd);
	close_fd(&c->err_fd);
	close_fd(&c->pidfd);
}

/* ---- the output loop ----------------------------------------------------- */

struct stream {
	int *fd;
	enum proto_frame_type type;
	unsigned char *buf; /* PROTO_MAX_FRAME_BYTES */
	size_t have;
	size_t kept;
};

struct run {
	const struct agent_run_sink *sink;
	size_t cap;
	int64_t deadline;
	uint64_t seq;
	bool truncated;
	int read_err; /* first pipe read error */
};

/* One frame: it takes a seq even when the cap drops it. Returns 0, the
 * sink's refusal, or -ETIMEDOUT when the sink held us past the deadline. */
static int emit(struct run *run, struct stream *st, const unsigned char *p,
		size_t n)
{
	uint64_t seq = run->seq++;
	int rc;

	if (st->kept + n > run->cap) {
		run->truncated = true;
		return 0;
	}
	st->kept += n;
	rc = run->sink->output(run->sink->ctx, st->type, seq, p, n);
	if (rc < 0)
		return rc;
	return clock_mono_ms() >= run->deadline ? -ETIMEDOUT : 0;
}

/* Read what the pipe has and emit every complete line, or a full
 * PROTO_MAX_FRAME_BYTES chunk, or the rest at the end of the stream. */
static int drain(struct run *run, struct stream *st)
{
	size_t start = 0, i, end;
	ssize_t n;
	int rc;

	n = read(*st->fd, st->buf + st->have, PROTO_MAX_FRAME_BYTES - st->have);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		/* The partial line is not output that happened in full. */
		if (run->read_err == 0)
			run->read_err = errno;
		close_fd(st->fd);
		return 0;
	}
	if (n == 0) {
		close_fd(st->fd);
		if (st->have == 0)
			return 0;
		rc = emit(run, st, st->buf, st->have);
		st->have = 0;
		return rc;
	}
	end = st->have + (size_t)n;
	if (run->sink->chunks) {
		st->have = 0;
		return emit(run, st, st->buf, end);
	}
	for (i = st->have; i < end; i++) {
		if (st->buf[i] != '\n')
			continue;
		rc = emit(run, st, st->buf + start, i + 1 - start);
		if (rc < 0)
			return rc;
		start = i + 1;
	}
	if (start > 0)
		memmove(st->buf, st->buf + start, end - start);
	st->have = end - start;
	if (st->have == PROTO_MAX_FRAME_BYTES) {
		st->have = 0;
		return emit(run, st, st->buf, PROTO_MAX_FRAME_BYTES);
	}
	return 0;
}

/* Has the leader exited? Looks without reaping. 0, or an errno. */
static int check_exit(struct agent_cmd *c)
{
	siginfo_t si;

	if (c->zc != NULL) {
		int32_t code;
		int rc;

		/* Its pidfd says it has: the zygote tells how. */
		rc = agent_zygote_wait(c->zc, ZYGOTE_STATUS_MS, &code);
		if (rc < 0)
			return -rc;
		c->exited = true;
		c->code = code;
		return 0;
	}

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == EINTR ? 0 : errno;
	if (si.si_pid != c->pid)
		return 0;
	c->exited = true;
	c->code = si.si_code == CLD_EXITED ? si.si_status : -1;
	return 0;
}

void agent_run(struct agent_cmd *c, uint64_t timeout_ms, size_t cap,
	       const struct agent_run_sink *sink, struct agent_run_result *res)
{
	struct run run = {sink, cap, agent_deadline(timeout_ms), 0, false, 0};
	struct stream st[2] = {
		{&c->out_fd, PROTO_FRAME_STDOUT, NULL, 0, 0},
		{&c->err_fd, PROTO_FRAME_STDERR, NULL, 0, 0},
	};
	int rc = 0, err, i;

	memset(res, 0, sizeof(*res));
	st[0].buf = xmalloc(PROTO_MAX_FRAME_BYTES);
	st[1].buf = xmalloc(PROTO_MAX_FRAME_BYTES);
	for (;;) {
		struct pollfd pfd[4];
		int nfd = 0, wait_ms, sidx[2] = {-1, -1}, stop = -1, pid = -1;
		int64_t left;

		if (c->exited && c->out_fd < 0 && c->err_fd < 0)
			break;
		left = run.deadline - clock_mono_ms();
		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		for (i = 0; i < 2; i++) {
			if (*st[i].fd < 0)
				continue;
			sidx[i] = nfd;
			pfd[nfd++] = (struct pollfd){*st[i].fd, POLLIN, 0};
		}
		if (sink->stop_fd >= 0) {
			stop = nfd;
			pfd[nfd++] = (struct pollfd){sink->stop_fd, POLLIN, 0};
		}
		if (!c->exited && c->pidfd >= 0) {
			pid = nfd;
			pfd[nfd++] = (struct pollfd){c->pidfd, POLLIN, 0};
		}
		wait_ms = left > INT_MAX ? INT_MAX : (int)left;
		if (!c->exited && c->pidfd < 0 && wait_ms > EXIT_POLL_MS)
			wait_ms = EXIT_POLL_MS;
		if (poll(pfd, (nfds_t)nfd, wait_ms) < 0 && errno != EINTR) {
			rc = -errno;
			res->err_code = "waitFailed";
			break;
		}
		if (stop >= 0 && pfd[stop].revents) {
			rc = -ECANCELED;
			break;
		}
		if (!c->exited && (c->pidfd < 0 || pfd[pid].revents)) {
			err = check_exit(c);
			if (err != 0) {
				rc = -err;
				res->err_code = "waitFailed";
				break;
			}
		}
		for (i = 0; i < 2 && rc == 0; i++)
			if (sidx[i] >= 0 && pfd[sidx[i]].revents)
				rc = drain(&run, &st[i]);
		if (rc < 0)
			break;
	}
	free(st[0].buf);
	free(st[1].buf);
	res->truncated = run.truncated;
	if (rc == 0 && run.read_err != 0) {
		res->end = AGENT_RUN_READ_FAILED;
		res->err_code = "outputReadFailed";
		agent_errno_text(run.read_err, res->message,
				 sizeof(res->message));
	} else if (rc == 0) {
		res->end = AGENT_RUN_EXITED;
		res->code = c->code;
	} else if (rc == -ETIMEDOUT) {
		agent_cmd_kill(c);
		res->end = AGENT_RUN_TIMEOUT;
		res->err_code = "timeoutExceeded";
		snprintf(res->message, sizeof(res->message),
			 "exceeded its %" PRIu64 "ms timeout", timeout_ms);
	} else if (res->err_code != NULL) {
		agent_cmd_kill(c);
		res->end = AGENT_RUN_WAIT_FAILED;
		agent_errno_text(-rc, res->message, sizeof(res->message));
	} else {
		agent_cmd_kill(c);
		res->end = AGENT_RUN_STOPPED;
	}
}

/* ---- start-up ------------------------------------------------------------ */

static void push(struct agent_spawner *sp, const char *s)
{
	sp->bwrap_head = xrealloc(sp->bwrap_head,
				  (sp->bwrap_headc + 1) * sizeof(char *));
	sp->bwrap_head[sp->bwrap_headc++] = xstrdup(s);
}

/*
 * The fixed part of the layout: the system read-only, the top-level
 * directories that are symlinks on the host (merged /usr) as the same
 * symlinks, fresh /proc, /dev and a bounded /tmp, and every namespace
 * unshared, the network's included (confine.h attaches it). Nothing else
 * of the host is visible.
 */
static void build_bwrap_head(struct agent_spawner *sp)
{
	static const char *const top[] = {"/bin",   "/sbin",  "/lib",
					  "/lib64", "/lib32", "/libx32"};
	struct stat st;
	size_t i;

	push(sp, sp->bwrap);
	push(sp, "--unshare-all");
	push(sp, "--die-with-parent");
	push(sp, "--hostname");
	push(sp, "sandbox");
	push(sp, "--ro-bind");
	push(sp, "/usr");
	push(sp, "/usr");
	push(sp, "--ro-bind");
	push(sp, "/etc");
	push(sp, "/etc");
	for (i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
		char target[PATH_MAX];
		ssize_t n;

		if (lstat(top[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(top[i], target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			push(sp, "--symlink");
			push(sp, target);
			push(sp, top[i]);
		} else if (S_ISDIR(st.st_mode)) {
			push(sp, "--ro-bind");
			push(sp, top[i]);
			push(sp, top[i]);
		}
	}
	push(sp, "--proc");
	push(sp, "/proc");
	push(sp, "--dev");
	push(sp, "/dev");
	push(sp, "--size");
	push(sp, sp->tmp_arg);
	push(sp, "--tmpfs");
	push(sp, "/tmp");
	/* A resolver configuration reached through a symlink out of /etc
	 * (systemd-resolved's) is shown at its target, whose directory the
	 * view must have. */
	if (sp->resolv_dest != NULL &&
	    strncmp(sp->resolv_dest, "/etc/", 5) != 0 &&
	    strncmp(sp->resolv_dest, "/usr/", 5) != 0) {
		char *dir = xstrdup(sp->resolv_dest),
		     *slash = strrchr(dir, '/');

		if (slash != NULL && slash != dir) {
			*slash = '\0';
			push(sp, "--dir");
			push(sp, dir);
		}
		free(dir);
	}
}

/* Where the view's resolver configuration is, for the one user-mode
 * networking needs; NULL when the host has none to replace. */
static char *resolv_target(void)
{
	struct stat st;

	if (lstat("/etc/resolv.conf", &st) < 0)
		return NULL;
	if (!S_ISLNK(st.st_mode))
		return S_ISREG(st.st_mode) ? xstrdup("/etc/resolv.conf") : NULL;
	return realpath("/etc/resolv.conf", NULL);
}

/* Collects the probe's stderr for the log. */
static int probe_output(void *ctx, enum proto_frame_type stream, uint64_t seq,
			const unsigned char *p, size_t n)
{
	struct buf *b = ctx;

	(void)seq;
	if (stream == PROTO_FRAME_STDERR && buf_append(b, p, n) < 0)
		return 0;
	return 0;
}

/* Run `true` confined, as commands will run. 0 when it worked. */
static int probe(struct agent_spawner *sp, char *why, size_t whysz)
{
	static char true_arg[] = "true";
	char *argv[] = {true_arg, NULL};
	struct proto_exec_req req = {
		argv, 1, PROBE_TIMEOUT_MS, NULL, NULL, 0, 0, false};
	struct buf err = BUF_INIT(512);
	struct agent_run_sink sink = {probe_output, &err, -1, false};
	struct agent_run_result res;
	char msg[AGENT_SPAWN_MSG_MAX];
	struct agent_cmd c;
	int rc;

	if (access(sp->bwrap, X_OK) < 0) {
		snprintf(why, whysz, "%s is not executable", sp->bwrap);
		return -ENOTSUP;
	}
	rc = agent_spawn(sp, &req, "", &c, msg);
	if (rc < 0) {
		snprintf(why, whysz, "%s", msg);
		return -ENOTSUP;
	}
	agent_run(&c, PROBE_TIMEOUT_MS, 4096, &sink, &res);
	agent_cmd_reap(&c);
	rc = 0;
	if (res.end != AGENT_RUN_EXITED || res.code != 0) {
		while (err.len > 0 && err.data[err.len - 1] == '\n')
			err.data[--err.len] = '\0';
		if (res.end == AGENT_RUN_EXITED)
			snprintf(why, whysz, "exit %" PRId32 "%s%s", res.code,
				 err.len ? ": " : "", err.len ? err.data : "");
		else
			snprintf(why, whysz, "%s: %s",
				 res.err_code ? res.err_code : "stopped",
				 res.message);
		rc = -ENOTSUP;
	}
	buf_cleanup(&err);
	return rc;
}

/*
 * Start the zygote and run the probe through it. When either fails the
 * classic path (one bubblewrap per command) is tried next, so a machine
 * where the zygote cannot work (no CAP_SYS_ADMIN for it in bubblewrap's
 * user namespace, an agent binary the exec user may not execute) keeps
 * the confinement it had.
 */
static int start_zygote(struct agent_spawner *sp, char *why, size_t whysz)
{
	struct agent_zygote_config zc = {
		sp->bwrap_head,	 sp->bwrap_headc, &sp->box, &sp->net,
		sp->resolv_dest, sp->tmp_size,	  sp->pids, sp->data,
	};
	int rc;

	if (access(sp->bwrap, X_OK) < 0) {
		snprintf(why, whysz, "%s is not executable", sp->bwrap);
		return -ENOTSUP;
	}
	rc = agent_zygote_new(&zc, &sp->zygote, why, whysz);
	if (rc == 0)
		rc = probe(sp, why, whysz);
	if (rc < 0) {
		log_info("exec: no zygote for commands (%s)", why);
		agent_zygote_free(sp->zygote);
		sp->zygote = NULL;
	}
	return rc;
}

static char *dir_of(const char *path)
{
	char *d = xstrdup(path), *slash = strrchr(d, '/');

	if (slash != NULL && slash != d)
		*slash = '\0';
	return d;
}

static void setup_keep(struct agent_spawner *sp)
{
	size_t n;

	agent_box_keep_system(sp->keep,
			      sizeof(sp->keep) / sizeof(sp->keep[0]) - 3);
	for (n = 0; sp->keep[n] != NULL; n++)
		;
	sp->keep_bwrap = dir_of(sp->bwrap);
	sp->keep[n++] = sp->keep_bwrap;
	if (sp->resolv_dest != NULL) {
		sp->keep_resolv = dir_of(sp->resolv_dest);
		sp->keep[n++] = sp->keep_resolv;
	}
	sp->keep[n] = NULL;
}

/*
 * Who a child becomes and within which limits (doc/commands.md,
 * "Limits"): the sandbox's cgroup when cgroup v2 can be used, else
 * RLIMIT_DATA for memory; RLIMIT_NPROC is the zygote's own (in the
 * sandbox's user namespace), or, for a bubblewrap per command, set
 * before it when the agent is root (the sandbox's uid is its own).
 */
static void setup_box(struct agent_spawner *sp)
{
	const struct agent_config *cfg = &sp->a->cfg;
	char why[AGENT_SPAWN_MSG_MAX + 64];

	memset(&sp->box, 0, sizeof(sp->box));
	sp->box.keep = sp->keep;
	sp->box.drop = cfg->drop_privileges;
	sp->box.uid = cfg->exec_uid;
	sp->box.gid = cfg->exec_gid;
	sp->box.root_fd = sp->a->root_fd;
	sp->box.root = sp->root;
	sp->box.cg_procs_fd = -1;
	if (!sp->confined) {
		sp->box_each = sp->box;
		return;
	}
	sp->box.stage = cfg->drop_privileges;
	if (agent_cgroup_open(cfg, sp->a->root_fd, &sp->cg, why, sizeof(why)) ==
	    0) {
		sp->box.cg_procs_fd = agent_cgroup_procs_fd(sp->cg);
		log_info("limits: cgroup %s: pids.max %llu, memory.max %llu; "
			 "/tmp and /dev/shm %llu bytes each",
			 agent_cgroup_path(sp->cg),
			 (unsigned long long)sp->pids,
			 (unsigned long long)sp->memory,
			 (unsigned long long)sp->tmp_size);
	} else {
		sp->data = sp->memory;
		log_info("limits: no cgroup (%s); RLIMIT_NPROC %llu, "
			 "RLIMIT_DATA %llu; /tmp and /dev/shm %llu bytes each",
			 why, (unsigned long long)sp->pids,
			 (unsigned long long)sp->memory,
			 (unsigned long long)sp->tmp_size);
	}
	/* A bubblewrap per command: its limits are set before it, and
	 * inherited. The zygote gives its commands theirs itself. */
	sp->box_each = sp->box;
	sp->box_each.data = sp->data;
	if (cfg->drop_privileges)
		sp->box_each.nproc = sp->pids;
}

int agent_spawner_new(const struct agent *a, struct agent_spawner **out)
{
	struct agent_spawner *sp = xcalloc(1, sizeof(*sp));
	enum agent_confine mode = a->cfg.confine;
	char why[AGENT_SPAWN_MSG_MAX + 64];
	int rc = 0;

	sp->a = a;
	sp->bwrap = a->cfg.bwrap ? a->cfg.bwrap : BWRAP_PATH;
	sp->pids = a->cfg.pids_max ? a->cfg.pids_max : SBX_DEFAULT_PIDS;
	sp->memory =
		a->cfg.memory_max ? a->cfg.memory_max : sbx_default_memory();
	sp->tmp_size = a->cfg.tmp_size ? a->cfg.tmp_size : SBX_DEFAULT_TMP_SIZE;
	snprintf(sp->tmp_arg, sizeof(sp->tmp_arg), "%llu",
		 (unsigned long long)sp->tmp_size);
	sp->net.mode = a->cfg.network;
	sp->net.slirp =
		a->cfg.slirp4netns ? a->cfg.slirp4netns : SLIRP4NETNS_PATH;
	sp->root = realpath(a->cfg.root, NULL);
	if (sp->root == NULL) {
		rc = -errno;
		log_error("exec: session root %s: %s", a->cfg.root,
			  strerror(errno));
		goto out;
	}
	if (mode == AGENT_CONFINE_NONE) {
		log_info("exec: commands run unconfined (--confine none)");
		setup_box(sp);
		goto out;
	}
	sp->confined = true;
	if (sp->net.mode == AGENT_NET_USER && access(sp->net.slirp, X_OK) == 0)
		sp->resolv_dest = resolv_target();
	setup_keep(sp);
	setup_box(sp);
	build_bwrap_head(sp);
	rc = start_zygote(sp, why, sizeof(why));
	if (rc == 0) {
		log_info("exec: commands run confined by bubblewrap (%s), "
			 "started by a zygote",
			 sp->bwrap);
		goto out;
	}
	rc = probe(sp, why, sizeof(why));
	if (rc == 0) {
		log_info("exec: commands run confined by bubblewrap (%s), one "
			 "bubblewrap each; they have no network",
			 sp->bwrap);
	} else if (mode == AGENT_CONFINE_AUTO) {
		log_info("exec: bubblewrap is not usable (%s); commands run "
			 "unconfined",
			 why);
		sp->confined = false;
		agent_cgroup_close(sp->cg);
		sp->cg = NULL;
		setup_box(sp);
		rc = 0;
	} else {
		log_error("exec: bubblewrap is not usable: %s", why);
	}
out:
	if (rc < 0) {
		agent_spawner_free(sp);
		return rc;
	}
	*out = sp;
	return 0;
}

void agent_spawner_free(struct agent_spawner *sp)
{
	size_t i;

	if (sp == NULL)
		return;
	agent_zygote_free(sp->zygote);
	agent_cgroup_close(sp->cg);
	for (i = 0; i < sp->bwrap_headc; i++)
		free(sp->bwrap_head[i]);
	free(sp->bwrap_head);
	free(sp->resolv_dest);
	free(sp->keep_bwrap);
	free(sp->keep_resolv);
	free(sp->root);
	free(sp);
}

bool agent_spawner_confined(const struct agent_spawner *sp)
{
	return sp->confined;
}
