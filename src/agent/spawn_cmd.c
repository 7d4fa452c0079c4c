/* SPDX-License-Identifier: MIT */
/*
 * spawn_cmd: starting one command (spawn.h, agent_spawn): through the
 * zygote, or by fork and exec in its own session and process group,
 * confined by a bubblewrap of its own when the zygote cannot run. Between
 * fork and exec the child runs only async-signal-safe code on memory the
 * parent prepared (proc.h): the process that forks has many threads, and
 * one of them may hold the malloc lock.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/proc.h"
#include "common/sigdefault.h"
#include "agent/spawn_i.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/xalloc.h"
#include "common/strv.h"

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
	int maxfd; /* above every descriptor the agent may have */
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
		size_t pos =
			proc_cat(host, 0, hostsz, p->root, strlen(p->root));

		return proc_cat(host, pos, hostsz, box + sl, strlen(box + sl)) <
		       hostsz;
	}
	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		size_t l = strlen(same[i]);

		if (strncmp(box, same[i], l) == 0 &&
		    (box[l] == '\0' || box[l] == '/'))
			return proc_cat(host, 0, hostsz, box, strlen(box)) <
			       hostsz;
	}
	return false;
}

/* One candidate (a path as the command would name it, maybe relative):
 * 0 and the host path in host[], or an errno. */
static int try_candidate(const struct plan *p, const char *cand, char *host,
			 size_t hostsz)
{
	char box[PATH_MAX];
	size_t pos = 0;

	if (p->bwrap == NULL) {
		if (proc_cat(host, 0, hostsz, cand, strlen(cand)) >= hostsz)
			return ENAMETOOLONG;
		return proc_runnable(host);
	}
	if (cand[0] != '/') {
		pos = proc_cat(box, 0, sizeof(box), p->box_cwd,
			       strlen(p->box_cwd));
		pos = proc_cat(box, pos, sizeof(box), "/", 1);
	}
	if (proc_cat(box, pos, sizeof(box), cand, strlen(cand)) >= sizeof(box))
		return ENAMETOOLONG;
	box_normalize(box);
	if (!box_to_host(p, box, host, hostsz))
		return ENOENT;
	return proc_runnable(host);
}

/* proc_find_program's candidate: try_candidate of the plan ctx. */
static int try_plan(const void *ctx, const char *cand, char *host,
		    size_t hostsz)
{
	return try_candidate(ctx, cand, host, hostsz);
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

__attribute__((noreturn)) static void child(const struct plan *p)
{
	struct report rep = {STAGE_SETUP, 0, 0};
	char found[PATH_MAX];
	int step = 0, cwd = -1;

	/* The agent's dispositions and mask are its own business. */
	sig_defaults();

	/* A new session is a new process group that the timeout and the
	 * cancel kill as one, and it has no controlling terminal. */
	if (setsid() < 0 || dup2(p->devnull, 0) < 0 || dup2(p->out_w, 1) < 0 ||
	    dup2(p->err_w, 2) < 0)
		goto fail;
	/* Every descriptor past stderr goes at exec, the report pipe with
	 * them: a successful exec is an empty read on the parent's side. */
	proc_cloexec_from(3, p->maxfd);

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
	errno = proc_find_program(p->program, p->path, try_plan, p, found,
				  sizeof(found));
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

/* bubblewrap's command line for this spawn (the strings are borrowed). */
static const char **bwrap_argv(const struct agent_spawner *sp,
			       const struct proto_exec_req *req,
			       const char *box_cwd)
{
	const char *const mid[] = {
		"--bind", agent_box_bind_source(&sp->box_each),
		AGENT_SANDBOX_DIR,
		/* The command's own /dev/shm, bounded; nothing else of the
		 * view bubblewrap made (its root, /dev) is writable. */
		"--size", sp->tmp_arg, "--tmpfs", "/dev/shm", "--remount-ro",
		"/", "--remount-ro", "/dev", "--chdir", box_cwd, "--"};
	const size_t midc = sizeof(mid) / sizeof(mid[0]);
	const char **v =
		xcalloc(sp->bwrap_headc + midc + req->argc + 1, sizeof(char *));
	size_t n = 0, i;

	for (i = 0; i < sp->bwrap_headc; i++)
		v[n++] = sp->bwrap_head[i];
	for (i = 0; i < midc; i++)
		v[n++] = mid[i];
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

/* The command's standard descriptors: /dev/null to read, and a pipe each
 * for stdout and stderr (our ends non-blocking). 0 or -errno; what was
 * opened is closed by std_close either way. */
static int std_open(int *devnull, int outp[2], int errp[2])
{
	int rc;

	*devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (*devnull < 0)
		return -errno;
	rc = pipe_pair(outp);
	if (rc == 0)
		rc = pipe_pair(errp);
	return rc;
}

static void std_close(int *devnull, int outp[2], int errp[2])
{
	proc_close(devnull);
	proc_close(&outp[0]);
	proc_close(&outp[1]);
	proc_close(&errp[0]);
	proc_close(&errp[1]);
}

/* rel, a path relative to the session root ("" for the root), in the
 * sandbox's view: "/sandbox/rel" (heap). */
static char *box_path(const char *rel)
{
	return xasprintf(AGENT_SANDBOX_DIR "%s%s", *rel ? "/" : "", rel);
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

	box_cwd = box_path(cwd_rel);
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
	rc = std_open(&devnull, outp, errp);
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
	std_close(&devnull, outp, errp);
	strv_free_null(envp);
	free(box_cwd);
	return rc;
}

/* What a plan borrows, made by plan_make, freed by plan_free. */
struct plan_bufs {
	char *host_cwd, *box_cwd;
	const char **argv, **sh_argv;
	char **envp;
};

/* The child's plan for req in cwd_rel, but for its descriptors. */
static void plan_make(const struct agent_spawner *sp,
		      const struct proto_exec_req *req, const char *cwd_rel,
		      struct plan *p, struct plan_bufs *b)
{
	long max = sysconf(_SC_OPEN_MAX);
	size_t i;

	memset(p, 0, sizeof(*p));
	memset(b, 0, sizeof(*b));
	p->root =
		sp->confined ? agent_box_bind_source(&sp->box_each) : sp->root;
	b->host_cwd =
		xasprintf("%s%s%s", p->root, *cwd_rel ? "/" : "", cwd_rel);
	b->envp = build_env(req, &p->path);
	b->sh_argv = xcalloc(req->argc + 2, sizeof(char *));
	b->sh_argv[0] = "/bin/sh";
	for (i = 1; i < req->argc; i++)
		b->sh_argv[i + 1] = req->argv[i];
	p->program = req->argv[0];
	p->sh_argv = b->sh_argv;
	p->envp = b->envp;
	p->host_cwd = b->host_cwd;
	p->box = &sp->box_each;
	p->maxfd = max < 0 || max > 65536 ? 65536 : (int)max;
	if (sp->confined) {
		b->box_cwd = box_path(cwd_rel);
		b->argv = bwrap_argv(sp, req, b->box_cwd);
		p->argv = b->argv;
		p->box_cwd = b->box_cwd;
		p->bwrap = sp->bwrap;
	} else {
		p->argv = (const char *const *)req->argv;
	}
}

static void plan_free(struct plan_bufs *b)
{
	free(b->host_cwd);
	free(b->box_cwd);
	strv_free_null(b->envp);
	free(b->argv);
	free(b->sh_argv);
}

/* The child's report of its failure: the errno to return, the message
 * in msg, and a line at warn for a failure to enter the sandbox. */
static int child_failed(const struct agent_spawner *sp, const struct report *r,
			char msg[AGENT_SPAWN_MSG_MAX])
{
	const struct agent_config *cfg = &sp->a->cfg;

	agent_errno_text(r->err, msg, AGENT_SPAWN_MSG_MAX);
	if (r->stage == STAGE_DROP && r->step == AGENT_BOX_DROP)
		log_warn("exec: dropping to uid %u gid %u failed: %s",
			 (unsigned)cfg->exec_uid, (unsigned)cfg->exec_gid, msg);
	else if (r->stage == STAGE_DROP)
		log_warn("exec: entering the sandbox failed (step %d): %s",
			 r->step, msg);
	return -r->err;
}

int agent_spawn(const struct agent_spawner *sp,
		const struct proto_exec_req *req, const char *cwd_rel,
		struct agent_cmd *out, char msg[AGENT_SPAWN_MSG_MAX])
{
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, rep[2] = {-1, -1};
	struct agent_cmd c = {
		.pid = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1};
	struct plan_bufs b;
	struct report r;
	struct plan p;
	ssize_t got;
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
	plan_make(sp, req, cwd_rel, &p, &b);
	rc = std_open(&devnull, outp, errp);
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
	proc_close(&rep[1]);
	proc_close(&outp[1]);
	proc_close(&errp[1]);
	do {
		got = read(rep[0], &r, sizeof(r));
	} while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof(r)) {
		rc = child_failed(sp, &r, msg);
		while (waitpid(c.pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto out;
	}
	/* The leader has not been reaped, so its pid names it alone. */
	c.pidfd = proc_pidfd_open(c.pid);
	c.out_fd = outp[0];
	c.err_fd = errp[0];
	outp[0] = errp[0] = -1;
	*out = c;
	rc = 0;
	goto out;
fail:
	agent_errno_text(-rc, msg, AGENT_SPAWN_MSG_MAX);
out:
	std_close(&devnull, outp, errp);
	proc_close(&rep[0]);
	proc_close(&rep[1]);
	plan_free(&b);
	return rc;
}

void agent_cmd_kill(const struct agent_cmd *c)
{
	if (c->zc != NULL) {
		/* Its init: the kernel then kills every process of the
		 * command's PID namespace, and a pidfd cannot name a pid
		 * that was reused. */
		proc_pidfd_kill(c->pidfd);
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
	proc_close(&c->out_fd);
	proc_close(&c->err_fd);
	proc_close(&c->pidfd);
}
