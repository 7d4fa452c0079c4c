/* SPDX-License-Identifier: MIT */
/*
 * local_spawn: the processes of local sandboxes (local_ctl_i.h): an agent
 * is held by a pidfd where the kernel has them, whether it lives is asked
 * of the lock it holds on agent.lock (never of a pid alone), stopping is
 * SIGTERM then SIGKILL, and starting is a double fork whose grandchild
 * runs only async-signal-safe code until exec (the caller may be the
 * threaded mount).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/sigdefault.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/sleep.h"
#include "client/local_ctl_i.h"

int local_pidfd_open(pid_t pid)
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

bool local_proc_alive(const struct local_proc *p)
{
	struct pollfd pfd = {p->pidfd, POLLIN, 0};

	if (p->pidfd < 0)
		return pid_alive(p->pid);
	/* A pidfd is readable once its process has exited. */
	return poll(&pfd, 1, 0) == 0;
}

static int proc_signal(const struct local_proc *p, int sig)
{
	if (p->pidfd >= 0 ? sys_pidfd_send_signal(p->pidfd, sig) < 0
			  : kill(p->pid, sig) < 0)
		return errno == ESRCH ? 0 : -errno;
	return 0;
}

static void proc_wait_gone(const struct local_proc *p, long long deadline)
{
	while (local_proc_alive(p) && clock_mono_ms() < deadline)
		sleep_ms(LOCAL_POLL_MS);
}

/* SIGTERM, wait up to timeout_ms, then SIGKILL and wait a little more. */
int local_proc_kill(const struct local_proc *p, long timeout_ms)
{
	int rc = proc_signal(p, SIGTERM);

	if (rc < 0)
		return rc;
	proc_wait_gone(p, clock_mono_ms() + timeout_ms);
	if (!local_proc_alive(p))
		return 0;
	log_warn("agent %ld did not stop within %ld ms: killing it",
		 (long)p->pid, timeout_ms);
	rc = proc_signal(p, SIGKILL);
	if (rc < 0)
		return rc;
	proc_wait_gone(p, clock_mono_ms() + 5000);
	return local_proc_alive(p) ? -ETIMEDOUT : 0;
}

void local_proc_close(struct local_proc *p)
{
	fdio_close(p->pidfd);
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
	/* What could be read is enough: a failed read leaves less to match. */
	(void)fdio_read_buf(fd, &b, 4096);
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
		if (strcmp(base, LOCAL_AGENT_NAME) == 0)
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
int local_agent_proc(struct local_ctl *c, const struct proto_record *rec,
		     struct local_proc *out)
{
	char *path =
		local_state_path(c->state_dir, rec->id, LOCAL_PATH_AGENT_LOCK);
	char *root = NULL;
	struct local_proc p = LOCAL_PROC_NONE;
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
		p.pidfd = local_pidfd_open(h);
		if (p.pidfd < 0 && errno != ENOSYS)
			goto out; /* it is gone already */
		if (lock_holder(path) != h) {
			local_proc_close(&p);
			goto out; /* it died between the two looks */
		}
		found = 1;
		goto out;
	}
	if (h != -ENOENT || rec->agent_pid <= 0)
		goto out;
	root = local_state_path(c->state_dir, rec->id, LOCAL_PATH_ROOT);
	p.pid = (pid_t)rec->agent_pid;
	p.pidfd = local_pidfd_open(p.pid);
	if ((p.pidfd >= 0 || errno == ENOSYS) &&
	    local_ctl_agent_matches(p.pid, root)) {
		found = 1;
		goto out;
	}
	local_proc_close(&p);
out:
	if (found)
		*out = p;
	free(path);
	free(root);
	return found;
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

	sig_defaults();
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

/* What a spawn holds open: the report pipe, the log, /dev/null, and the
 * directory the agent starts in. */
struct spawn_fds {
	int pfd[2];
	int logfd;
	int nullfd;
	int dirfd;
};

static void spawn_fds_close(struct spawn_fds *f)
{
	int *fds[] = {&f->pfd[0], &f->pfd[1], &f->logfd, &f->nullfd, &f->dirfd};
	size_t i;

	for (i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

static int spawn_fds_open(struct spawn_fds *f, const char *dir,
			  const char *logpath, struct local_err *err)
{
	int rc;

	f->logfd = open(logpath,
			O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
			0600);
	f->nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	f->dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (f->dirfd < 0) {
		rc = -errno;
		return local_err_set(err, rc, "cannot open %s: %s", dir,
				     strerror(-rc));
	}
	if (f->logfd < 0 || f->nullfd < 0 || pipe2(f->pfd, O_CLOEXEC) < 0) {
		rc = -errno;
		return local_err_set(err, rc, "cannot open %s: %s", logpath,
				     strerror(-rc));
	}
	return 0;
}

/* Read what the middle process and the grandchild report, until end of
 * file (the exec happened) or the deadline: the grandchild's pid, or why
 * it could not be made or run. */
static int spawn_report(int fd, long long deadline, const char *what,
			pid_t *pidp, struct local_err *err)
{
	struct spawn_msg m;
	pid_t pid = 0;
	int rc = 0;
	ssize_t n;

	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		long long left = deadline - clock_mono_ms();

		if (left <= 0) {
			rc = -ETIMEDOUT;
			local_err_set(err, rc, "%s did not start", what);
			break;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		n = read(fd, &m, sizeof(m));
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
	if (rc == 0)
		*pidp = pid;
	return rc;
}

/*
 * Start argv detached: fork, setsid, fork again, so the agent is nobody's
 * child and outlives the caller. A CLOEXEC pipe brings back the
 * grandchild's pid (from the middle process) and an exec failure (from
 * the grandchild); end of file means the exec happened.
 */
int local_spawn_detached(const char *const *argv, char *const *envp,
			 const char *dir, const char *logpath,
			 const char *banner, pid_t *pidp, struct local_err *err)
{
	struct spawn_fds f = {{-1, -1}, -1, -1, -1};
	long long deadline = clock_mono_ms() + 10000;
	struct spawn_msg m;
	struct rlimit rl;
	long maxfd = 1024;
	int rc, status;
	pid_t mid;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		maxfd = rl.rlim_cur > 65536 ? 65536 : (long)rl.rlim_cur;
	rc = spawn_fds_open(&f, dir, logpath, err);
	if (rc < 0)
		goto out;
	/* The agent's own lines carry no date: mark where each boot
	 * begins. A log we cannot write to is no reason not to start. */
	if (write(f.logfd, banner, strlen(banner)) < 0)
		log_debug("cannot write to %s: %s", logpath, strerror(errno));
	mid = fork();
	if (mid < 0) {
		rc = -errno;
		local_err_set(err, rc, "fork: %s", strerror(-rc));
		goto out;
	}
	if (mid == 0) {
		pid_t g;

		close(f.pfd[0]);
		if (setsid() < 0)
			_exit(126);
		g = fork();
		if (g == 0)
			agent_child(argv, envp, f.dirfd, f.logfd, f.nullfd,
				    f.pfd[1], maxfd);
		m.kind = g > 0 ? SPAWN_PID : SPAWN_ERRNO;
		m.value = g > 0 ? (int)g : errno;
		if (write(f.pfd[1], &m, sizeof(m)) < 0)
			_exit(126);
		_exit(0);
	}
	close(f.pfd[1]);
	f.pfd[1] = -1;
	while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
		;
	rc = spawn_report(f.pfd[0], deadline, argv[0], pidp, err);
	if (rc < 0 && err != NULL && err->msg[0] == '\0')
		local_err_set(err, rc, "cannot run %s: %s", argv[0],
			      strerror(-rc));
out:
	spawn_fds_close(&f);
	return rc;
}

int local_stop_agent(struct local_proc *agent, long timeout_ms,
		     struct local_err *err)
{
	int rc = local_proc_kill(agent, timeout_ms);

	if (rc < 0)
		local_err_set(err, rc, "cannot stop agent %ld: %s",
			      (long)agent->pid, strerror(-rc));
	local_proc_close(agent);
	return rc;
}
