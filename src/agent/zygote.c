/* SPDX-License-Identifier: MIT */
/*
 * zygote: both sides of the process that starts confined commands. The
 * agent's side (a reader thread, start, spawn, wait, release) is at the
 * end; the zygote's side (`sandbox-agent --zygote FD`) comes first. It
 * does not decide whether commands are confined, build bubblewrap's
 * layout, or read a command's output: spawn.c does.
 *
 * Per command the zygote clones an init with CLONE_VM into new PID, mount
 * and IPC namespaces; the init mounts the command's own /proc, /tmp,
 * /dev/shm and /dev/pts, leads a new session, drops the capability it
 * inherited, and starts the command with CLONE_VM|CLONE_VFORK. Sharing
 * the address space saves two copies of the zygote's page tables (on a
 * small VM each fork costs about as much as the exec that follows), and
 * is safe because the zygote waits, blocked, until the command has
 * executed or failed and the init has closed every descriptor; from then
 * on the init touches only its own stack and the kernel.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "agent/spawn.h"
#include "agent/zygote.h"
#include "common/log.h"
#include "common/xalloc.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
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

/* Code that runs in a process sharing the zygote's memory: no sanitizer
 * bookkeeping there, it belongs to the zygote's thread. */
#define SHARED_VM_CODE __attribute__((no_sanitize_address))

/* ---- the wire between the two sides -------------------------------------- */

/* Bumped when a message changes; the agent only talks to its own. */
#define ZYGOTE_VERSION 2

enum zmsg_type {
	ZM_READY = 1, /* zygote: up; value = ZYGOTE_VERSION; fd its pidfd */
	ZM_SPAWN, /* agent: id; fds memfd, stdin, stdout, stderr */
	ZM_SPAWNED, /* zygote: id, err; fd the init's pidfd when err == 0 */
	ZM_EXITED, /* zygote: id, exited (1: value = code; 0: signal) */
	ZM_RELEASE, /* agent: id may be reaped (killed if it runs) */
};

struct zmsg {
	uint32_t type;
	int32_t err;
	uint64_t id;
	int32_t exited;
	int32_t value;
};

#define ZM_MAX_FDS 4

/* The request in the memfd: this head, then argc, envc and one more
 * (the working directory) NUL-terminated strings, nothing after. */
#define ZREQ_MAGIC 0x7a726571u
struct zreq_head {
	uint32_t magic;
	uint32_t argc;
	uint32_t envc;
	uint32_t pad;
};

/* The largest request: a request body is at most 1 MiB of JSON, and the
 * agent adds PATH and PWD. */
#define ZREQ_MAX (4UL * 1024 * 1024)
#define ZREQ_MAX_ARGS 8192
#define ZREQ_MAX_ENV 4096

static int send_zmsg(int sock, const struct zmsg *m, const int *fds, size_t nfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * ZM_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {(void *)m, sizeof(*m)};
	struct msghdr mh;
	ssize_t n;

	if (nfd > ZM_MAX_FDS)
		return -EINVAL;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfd > 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
		c = CMSG_FIRSTHDR(&mh);
		if (c == NULL)
			return -EINVAL;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfd);
	}
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	return n == (ssize_t)sizeof(*m) ? 0 : -EPROTO;
}

/*
 * One message and its descriptors (close-on-exec). 1, 0 at the peer's
 * end, -EAGAIN when none waits (flags MSG_DONTWAIT), -EPROTO for a
 * message of the wrong size or with more than maxfd descriptors (any it
 * carried are closed), or another negative errno.
 */
static int recv_zmsg(int sock, struct zmsg *m, int *fds, size_t maxfd,
		     size_t *nfd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (ZM_MAX_FDS + 4))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {m, sizeof(*m)};
	struct cmsghdr *c;
	struct msghdr mh;
	size_t got = 0, i;
	bool bad = false;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (got < maxfd)
				fds[got++] = fd;
			else {
				close(fd);
				bad = true;
			}
		}
	}
	if (bad || n != (ssize_t)sizeof(*m) ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (i = 0; i < got; i++)
			close(fds[i]);
		return -EPROTO;
	}
	*nfd = got;
	return 1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int64_t now_ms(void)
{
	return clock_mono_ms();
}

/* ---- the zygote's side: the command and its init ------------------------- */

/* Stacks of the processes that share the zygote's memory: the init keeps
 * its own until it is reaped, the command uses the other until exec. */
#define ZSTACK (64 * 1024)

/* How long an exec may take before the zygote gives up on it. */
#define ZSPAWN_MS 10000
/* How long the zygote's own sends may block on an agent that reads
 * nothing before the zygote takes the agent for gone. */
#define ZSEND_TIMEOUT_S 30
/* Live (or unreleased) commands at once. */
#define ZMAX_CHILDREN 1024

enum zstage {
	ZST_INIT = 1, /* the init's mounts, session or capabilities */
	ZST_SETUP, /* the command's descriptors */
	ZST_CWD,
	ZST_EXEC,
};

struct zreport {
	int32_t stage;
	int32_t err;
};

/* What the init and the command read; owned by the zygote, untouched by
 * it until both are done with it. */
struct zplan {
	char **argv;
	char **envp;
	const char **sh_argv; /* ENOEXEC: /bin/sh, the file, argv[1]... */
	const char *path; /* PATH of envp */
	const char *cwd;
	int in_fd, out_fd, err_fd, rep_w;
	int maxfd; /* above every descriptor the zygote may have */
	char *cmd_stack; /* top of the command's stack */
	const char *tmpopts; /* the options of /tmp and /dev/shm */
	uint64_t data; /* the command's RLIMIT_DATA; 0: none */
};

SHARED_VM_CODE static void report(const struct zplan *p, int stage, int err)
{
	struct zreport r = {stage, err ? err : EIO};

	while (write(p->rep_w, &r, sizeof(r)) < 0 && errno == EINTR)
		;
}

SHARED_VM_CODE static size_t zcat(char *dst, size_t pos, size_t dstsz,
				  const char *s, size_t n)
{
	if (pos >= dstsz || n >= dstsz - pos)
		return dstsz;
	memcpy(dst + pos, s, n);
	dst[pos + n] = '\0';
	return pos + n;
}

/* A regular file this user may execute? 0, or an errno. */
SHARED_VM_CODE static int runnable(const char *file)
{
	struct stat st;

	if (stat(file, &st) < 0)
		return errno;
	if (!S_ISREG(st.st_mode))
		return EACCES;
	return access(file, X_OK) == 0 ? 0 : errno;
}

/*
 * The program as execvp finds it, in the command's own view: a name with
 * a '/' as it is, else each PATH entry in turn (empty is the working
 * directory). 0 with found[] set, or the errno execvp would end with.
 */
SHARED_VM_CODE static int find_program(const struct zplan *p, char *found,
				       size_t foundsz)
{
	const char *prog = p->argv[0], *dir = p->path;
	size_t plen = strlen(prog);
	int err, last = ENOENT;

	if (plen == 0)
		return ENOENT;
	if (strchr(prog, '/') != NULL) {
		if (zcat(found, 0, foundsz, prog, plen) >= foundsz)
			return ENAMETOOLONG;
		return runnable(found);
	}
	for (;;) {
		const char *end = strchr(dir, ':');
		size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
		size_t pos;

		pos = dlen ? zcat(found, 0, foundsz, dir, dlen)
			   : zcat(found, 0, foundsz, ".", 1);
		pos = zcat(found, pos, foundsz, "/", 1);
		pos = zcat(found, pos, foundsz, prog, plen);
		if (pos < foundsz) {
			err = runnable(found);
			if (err == 0)
				return 0;
			/* execvp: EACCES when something was found but could
			 * not run, ENOENT when nothing was. */
			if (err == EACCES)
				last = EACCES;
		}
		if (end == NULL)
			return last;
		dir = end + 1;
	}
}

SHARED_VM_CODE static void cloexec_from(int lowfd, int maxfd)
{
	int fd;

	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U,
		    CLOSE_RANGE_CLOEXEC) == 0)
		return;
	for (fd = lowfd; fd < maxfd; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* Every disposition back to the default, nothing blocked: what a new
 * program is owed (async-signal-safe). */
SHARED_VM_CODE static void signals_to_default(void)
{
	struct sigaction sa;
	sigset_t none;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The command: pid 2 of its namespace, in its init's process group. */
SHARED_VM_CODE static int command_main(void *arg)
{
	const struct zplan *p = arg;
	char found[PATH_MAX];
	int stage = ZST_SETUP;

	signals_to_default();
	if (dup2(p->in_fd, 0) < 0 || dup2(p->out_fd, 1) < 0 ||
	    dup2(p->err_fd, 2) < 0)
		goto fail;
	/* Everything else goes at exec, the report pipe with it: a
	 * successful exec is an empty read for the zygote. */
	cloexec_from(3, p->maxfd);
	stage = ZST_CWD;
	if (chdir(p->cwd) < 0)
		goto fail;
	stage = ZST_EXEC;
	errno = find_program(p, found, sizeof(found));
	if (errno != 0)
		goto fail;
	execve(found, p->argv, p->envp);
	if (errno == ENOEXEC) {
		/* What execvp does with a script that has no #! line. */
		p->sh_argv[1] = found;
		execve("/bin/sh", (char *const *)p->sh_argv, p->envp);
	}
fail:
	report(p, stage, errno);
	_exit(127);
}

/* Make the command's own instance of what must not be shared between
 * commands (bubblewrap gave each its own before); the temporary file
 * systems are bounded (doc/commands.md, "Limits"). */
SHARED_VM_CODE static int mount_private(const struct zplan *p)
{
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) < 0 ||
	    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p->tmpopts) <
		    0 ||
	    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
		  p->tmpopts) < 0 ||
	    mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=620") < 0)
		return -1;
	return 0;
}

/* The zygote holds CAP_SYS_ADMIN of the sandbox's user namespace for the
 * namespaces and mounts above; nothing after the init keeps it. */
SHARED_VM_CODE static int drop_caps(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_capset, &h, d);
}

/*
 * The command's init: pid 1 of a new PID namespace, so that its death
 * (a SIGKILL from the agent, or the command's end) takes every process
 * of the namespace, including any that left the process group. It exits
 * with the command's status, 128 + the signal for a signal death, as
 * bubblewrap's init did.
 */
SHARED_VM_CODE static int init_main(void *arg)
{
	const struct zplan *p = arg;
	siginfo_t si;
	pid_t cmd;

	prctl(PR_SET_NAME, "sbfs-init", 0, 0, 0);
	if (mount_private(p) < 0 || setsid() < 0 || drop_caps() < 0)
		goto fail;
	/* The command's, not the zygote's: the agent's own binary may be
	 * one that reserves more than that (a sanitizer's shadow). */
	if (p->data > 0) {
		struct rlimit rl = {(rlim_t)p->data, (rlim_t)p->data};

		if (setrlimit(RLIMIT_DATA, &rl) < 0)
			goto fail;
	}
	cmd = clone(command_main, p->cmd_stack,
		    CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)p);
	if (cmd < 0)
		goto fail;
	/* The command has executed or failed. Closing the report pipe (with
	 * everything else) tells the zygote, which may then free p: nothing
	 * of it is read below. */
	if (syscall(SYS_close_range, 0U, ~0U, 0) < 0) {
		int fd, maxfd = p->maxfd;

		for (fd = 0; fd < maxfd; fd++)
			close(fd);
	}
	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED) < 0)
			_exit(127);
		if (si.si_pid == cmd)
			break;
	}
	_exit(si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status);
fail:
	report(p, ZST_INIT, errno);
	_exit(127);
}

/* ---- the zygote's side: requests and children --------------------------- */

struct zchild {
	uint64_t id;
	int pidfd; /* -1: the slot is free */
	void *stack;
	size_t stacksz;
	bool reported; /* ZM_EXITED sent: a zombie until ZM_RELEASE */
	bool released; /* nobody wants the status: reap when it ends */
};

struct zygote {
	int sock;
	int maxfd;
	char tmpopts[96]; /* each command's /tmp and /dev/shm */
	uint64_t data; /* each command's RLIMIT_DATA, 0: none */
	size_t pagesz;
	struct zchild *kids;
	size_t nkids; /* used slots, live or not */
	size_t cap;
};

struct zreq {
	char *data;
	char **argv;
	char **envp;
	const char **sh_argv;
	const char *path;
	const char *cwd;
};

static void zreq_cleanup(struct zreq *r)
{
	free(r->data);
	free(r->argv);
	free(r->envp);
	free(r->sh_argv);
	memset(r, 0, sizeof(*r));
}

/* Read and check the request in memfd. 0, or an errno for the reply. */
static int zreq_read(int memfd, struct zreq *r)
{
	struct zreq_head h;
	struct stat st;
	size_t size, off, n, i;
	char *end;

	memset(r, 0, sizeof(*r));
	if (fstat(memfd, &st) < 0)
		return errno;
	if (st.st_size < (off_t)sizeof(h) || (uint64_t)st.st_size > ZREQ_MAX)
		return E2BIG;
	size = (size_t)st.st_size;
	r->data = malloc(size + 1);
	if (r->data == NULL)
		return ENOMEM;
	for (off = 0; off < size; off += n) {
		ssize_t got =
			pread(memfd, r->data + off, size - off, (off_t)off);

		if (got < 0 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (got <= 0)
			return got < 0 ? errno : EPROTO;
		n = (size_t)got;
	}
	r->data[size] = '\0';
	memcpy(&h, r->data, sizeof(h));
	if (h.magic != ZREQ_MAGIC || h.argc == 0 || h.argc > ZREQ_MAX_ARGS ||
	    h.envc > ZREQ_MAX_ENV)
		return EPROTO;
	r->argv = calloc(h.argc + 1, sizeof(char *));
	r->envp = calloc(h.envc + 1, sizeof(char *));
	r->sh_argv = calloc(h.argc + 2, sizeof(char *));
	if (r->argv == NULL || r->envp == NULL || r->sh_argv == NULL)
		return ENOMEM;
	off = sizeof(h);
	for (i = 0; i < (size_t)h.argc + h.envc + 1; i++) {
		char *s = r->data + off;

		end = memchr(s, '\0', size - off);
		if (end == NULL)
			return EPROTO;
		if (i < h.argc)
			r->argv[i] = s;
		else if (i < (size_t)h.argc + h.envc)
			r->envp[i - h.argc] = s;
		else
			r->cwd = s;
		off = (size_t)(end - r->data) + 1;
	}
	if (off != size || r->cwd[0] != '/')
		return EPROTO;
	r->path = AGENT_DEFAULT_PATH;
	for (i = 0; i < h.envc; i++)
		if (strncmp(r->envp[i], "PATH=", 5) == 0)
			r->path = r->envp[i] + 5;
	r->sh_argv[0] = "/bin/sh";
	for (i = 0; i < h.argc; i++)
		r->sh_argv[i + 1] = r->argv[i];
	return 0;
}

static struct zchild *zfind(struct zygote *z, uint64_t id)
{
	size_t i;

	for (i = 0; i < z->nkids; i++)
		if (z->kids[i].pidfd >= 0 && z->kids[i].id == id)
			return &z->kids[i];
	return NULL;
}

static struct zchild *zslot(struct zygote *z)
{
	size_t i;

	for (i = 0; i < z->nkids; i++)
		if (z->kids[i].pidfd < 0)
			return &z->kids[i];
	if (z->nkids == z->cap) {
		size_t cap = z->cap ? z->cap * 2 : 16;
		struct zchild *k = realloc(z->kids, cap * sizeof(*k));

		if (k == NULL)
			return NULL;
		z->kids = k;
		z->cap = cap;
	}
	z->kids[z->nkids].pidfd = -1;
	return &z->kids[z->nkids++];
}

static size_t zlive(const struct zygote *z)
{
	size_t i, n = 0;

	for (i = 0; i < z->nkids; i++)
		n += z->kids[i].pidfd >= 0;
	return n;
}

/* Reaped: its stack is no longer anyone's. */
static void zfree_child(struct zchild *k)
{
	close_fd(&k->pidfd);
	if (k->stack != NULL)
		munmap(k->stack, k->stacksz);
	k->stack = NULL;
}

/*
 * Wait for the command's exec: 0 when the report pipe closed without a
 * report, else the errno it reported. Past the deadline the init is
 * killed (the kernel then takes the command) and ETIMEDOUT returned; a
 * SIGKILLed task runs no more of the code that shares our memory.
 */
static int zawait_exec(int rep_r, int pidfd)
{
	int64_t deadline = now_ms() + ZSPAWN_MS;
	struct zreport r;
	size_t have = 0;
	int err = 0;

	for (;;) {
		struct pollfd pfd = {rep_r, POLLIN, 0};
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
			return ETIMEDOUT;
		}
		n = read(rep_r, (char *)&r + have, sizeof(r) - have);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have == sizeof(r)) {
			/* Read on to the end: the init is done with the plan
			 * only once it has closed its end. */
			err = r.err > 0 ? r.err : EIO;
			have = 0;
		}
	}
	return err;
}

static int zspawn(struct zygote *z, const struct zmsg *m, int *fds, size_t nfd)
{
	struct zmsg r = {ZM_SPAWNED, 0, m->id, 0, 0};
	int rep[2] = {-1, -1}, pidfd = -1, err = 0;
	struct zchild *k = NULL;
	struct zreq req;
	struct zplan p;
	size_t stacksz = 2 * (ZSTACK + z->pagesz);
	char *stack = MAP_FAILED;
	size_t i;
	int rc;

	memset(&req, 0, sizeof(req));
	if (nfd != 4 || zfind(z, m->id) != NULL) {
		err = EPROTO;
		goto reply;
	}
	if (zlive(z) >= ZMAX_CHILDREN) {
		err = EAGAIN;
		goto reply;
	}
	err = zreq_read(fds[0], &req);
	if (err != 0)
		goto reply;
	k = zslot(z);
	stack = mmap(NULL, stacksz, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (k == NULL || stack == MAP_FAILED) {
		err = ENOMEM;
		goto reply;
	}
	/* [guard][command's stack][guard][init's stack], growing down. */
	mprotect(stack, z->pagesz, PROT_NONE);
	mprotect(stack + z->pagesz + ZSTACK, z->pagesz, PROT_NONE);
	if (pipe2(rep, O_CLOEXEC) < 0) {
		err = errno;
		goto reply;
	}
	memset(&p, 0, sizeof(p));
	p.argv = req.argv;
	p.envp = req.envp;
	p.sh_argv = req.sh_argv;
	p.path = req.path;
	p.cwd = req.cwd;
	p.in_fd = fds[1];
	p.out_fd = fds[2];
	p.err_fd = fds[3];
	p.rep_w = rep[1];
	p.maxfd = z->maxfd;
	p.cmd_stack = stack + z->pagesz + ZSTACK;
	p.tmpopts = z->tmpopts;
	p.data = z->data;
	if (clone(init_main, stack + stacksz,
		  CLONE_VM | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
			  CLONE_PIDFD | SIGCHLD,
		  &p, &pidfd) < 0) {
		err = errno;
		goto reply;
	}
	close_fd(&rep[1]);
	err = zawait_exec(rep[0], pidfd);
	if (err == ETIMEDOUT) {
		struct pollfd pfd = {pidfd, POLLIN, 0};

		/* Once the init has exited, its namespace is empty and no
		 * one reads the request; until then it stays allocated. */
		if (poll(&pfd, 1, 2000) != 1)
			memset(&req, 0, sizeof(req));
	}
	k->id = m->id;
	k->pidfd = pidfd;
	k->stack = stack;
	k->stacksz = stacksz;
	k->reported = false;
	/* A failed spawn is reaped without telling: the agent has its
	 * answer. */
	k->released = err != 0;
	stack = MAP_FAILED;
reply:
	r.err = err;
	rc = send_zmsg(z->sock, &r, &pidfd, err == 0 ? 1 : 0);
	if (stack != MAP_FAILED)
		munmap(stack, stacksz);
	close_fd(&rep[0]);
	close_fd(&rep[1]);
	for (i = 0; i < nfd; i++)
		close(fds[i]);
	zreq_cleanup(&req);
	return rc;
}

/* The init's pidfd is readable: tell its status, or reap it. */
static int zexited(struct zygote *z, struct zchild *k)
{
	struct zmsg r = {ZM_EXITED, 0, k->id, 0, 0};
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)k->pidfd, &si,
		   WEXITED | WNOHANG | (k->released ? 0 : WNOWAIT)) < 0) {
		/* Not ours any more (cannot happen): forget it. */
		zfree_child(k);
		return 0;
	}
	if (si.si_pid == 0)
		return 0;
	if (k->released) {
		zfree_child(k);
		return 0;
	}
	k->reported = true;
	r.exited = si.si_code == CLD_EXITED;
	r.value = si.si_status;
	return send_zmsg(z->sock, &r, NULL, 0);
}

static void zrelease(struct zygote *z, uint64_t id)
{
	struct zchild *k = zfind(z, id);
	siginfo_t si;

	if (k == NULL)
		return;
	if (k->reported) {
		/* A zombie: reaping it cannot block. */
		memset(&si, 0, sizeof(si));
		waitid((idtype_t)P_PIDFD, (id_t)k->pidfd, &si, WEXITED);
		zfree_child(k);
		return;
	}
	syscall(SYS_pidfd_send_signal, k->pidfd, SIGKILL, NULL, 0);
	k->released = true;
}

/* Make a mount read-only, keeping the flags a less privileged mount
 * namespace may not change. */
static int remount_ro(const char *path)
{
	unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
	struct statvfs sv;

	if (statvfs(path, &sv) < 0)
		return -1;
	if (sv.f_flag & ST_NOSUID)
		flags |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		flags |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		flags |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		flags |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		flags |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		flags |= MS_RELATIME;
	return mount(NULL, path, NULL, flags, NULL);
}

/* A decimal argument of the zygote's command line; 0 when it is not. */
static unsigned long long zarg(const char *s)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	return errno != 0 || *end != '\0' || end == s ? 0 : v;
}

/*
 * Once per zygote: descriptors, identity, the limits every command
 * inherits (RLIMIT_NPROC counts the tasks of this user namespace, which
 * are the sandbox's: doc/commands.md, "Limits"), and a mount namespace of
 * its own in which the shared parts of the view (the root and /dev, which
 * bubblewrap leaves writable) are read-only, since every command now
 * shares them.
 */
static int zsetup(struct zygote *z, char **argv)
{
	unsigned long long tmp = zarg(argv[3]), nproc = zarg(argv[4]);

	z->data = zarg(argv[5]);
	struct rlimit rl;
	char *end;
	long fd;
	int i;

	errno = 0;
	fd = strtol(argv[2], &end, 10);
	if (errno != 0 || *end != '\0' || fd < 3 || fd > INT_MAX ||
	    fcntl((int)fd, F_GETFD) < 0 || tmp == 0 || nproc == 0) {
		fprintf(stderr, "sandbox-agent: --zygote: bad arguments\n");
		return -1;
	}
	/* Inodes cost kernel memory that size does not count. */
	snprintf(z->tmpopts, sizeof(z->tmpopts),
		 "mode=0755,size=%llu,nr_inodes=%llu", tmp,
		 tmp / 4096 < 1024 ? 1024ULL : tmp / 4096);
	rl.rlim_cur = rl.rlim_max = (rlim_t)nproc;
	if (setrlimit(RLIMIT_NPROC, &rl) < 0) {
		fprintf(stderr, "sandbox-agent: zygote: RLIMIT_NPROC: %s\n",
			strerror(errno));
		return -1;
	}
	z->sock = (int)fd;
	for (i = 0; i < 3; i++)
		if (fcntl(i, F_GETFD) < 0 &&
		    open("/dev/null", i ? O_WRONLY : O_RDONLY) != i)
			return -1;
	z->maxfd = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536)
		z->maxfd = (int)rl.rlim_cur;
	/* What the agent passed to start us (its executable) goes. */
	if ((z->sock > 3 &&
	     syscall(SYS_close_range, 3U, (unsigned)z->sock - 1, 0) < 0) ||
	    syscall(SYS_close_range, (unsigned)z->sock + 1, ~0U, 0) < 0)
		for (i = 3; i < z->maxfd; i++)
			if (i != z->sock)
				close(i);
	fcntl(z->sock, F_SETFD, FD_CLOEXEC);
	z->pagesz = (size_t)sysconf(_SC_PAGESIZE);
	prctl(PR_SET_NAME, "sbfs-zygote", 0, 0, 0);
	/* Our memory is every command's init's: no one may read it. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (unshare(CLONE_NEWNS) < 0 || remount_ro("/") < 0 ||
	    remount_ro("/dev") < 0) {
		fprintf(stderr, "sandbox-agent: zygote: mount namespace: %s\n",
			strerror(errno));
		return -1;
	}
	return 0;
}

int agent_zygote_main(int argc, char **argv)
{
	struct timeval tv = {ZSEND_TIMEOUT_S, 0};
	struct zmsg ready = {ZM_READY, 0, 0, 0, ZYGOTE_VERSION};
	struct pollfd *pfd = NULL;
	size_t *idx = NULL, i;
	struct zygote z;
	int rc = 1, self;

	memset(&z, 0, sizeof(z));
	if (argc != 6 || zsetup(&z, argv) < 0)
		return 1;
	setsockopt(z.sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* Our pidfd names our network namespace to the agent, which
	 * attaches it before it sends a command. */
	self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	rc = send_zmsg(z.sock, &ready, &self, self >= 0 ? 1 : 0);
	if (self >= 0)
		close(self);
	if (rc < 0) {
		rc = 1;
		goto out;
	}
	rc = 1;
	for (;;) {
		int fds[ZM_MAX_FDS];
		size_t n = 0, nfd = 0;
		struct zmsg m;
		int got;

		free(pfd);
		free(idx);
		pfd = xcalloc(z.nkids + 1, sizeof(*pfd));
		idx = xcalloc(z.nkids + 1, sizeof(*idx));
		pfd[n++] = (struct pollfd){z.sock, POLLIN, 0};
		for (i = 0; i < z.nkids; i++) {
			if (z.kids[i].pidfd < 0 || z.kids[i].reported)
				continue;
			idx[n] = i;
			pfd[n++] = (struct pollfd){z.kids[i].pidfd, POLLIN, 0};
		}
		/* Woken by the agent or a child; the timeout only bounds
		 * the wait. */
		if (poll(pfd, (nfds_t)n, 60000) < 0 && errno != EINTR)
			goto out;
		for (i = 1; i < n; i++)
			if (pfd[i].revents != 0 &&
			    zexited(&z, &z.kids[idx[i]]) < 0)
				goto out;
		if (pfd[0].revents == 0)
			continue;
		got = recv_zmsg(z.sock, &m, fds, ZM_MAX_FDS, &nfd,
				MSG_DONTWAIT);
		if (got == -EAGAIN)
			continue;
		if (got == 0) {
			rc = 0; /* the agent closed its end: stop */
			goto out;
		}
		if (got < 0)
			goto out;
		if (m.type == ZM_SPAWN) {
			if (zspawn(&z, &m, fds, nfd) < 0)
				goto out;
			continue;
		}
		for (i = 0; i < nfd; i++)
			close(fds[i]);
		if (m.type == ZM_RELEASE)
			zrelease(&z, m.id);
	}
out:
	/* Our children die with us anyway (the namespace's init exits when
	 * we do); killing them first makes it prompt. */
	for (i = 0; i < z.nkids; i++) {
		if (z.kids[i].pidfd < 0)
			continue;
		syscall(SYS_pidfd_send_signal, z.kids[i].pidfd, SIGKILL, NULL,
			0);
		close_fd(&z.kids[i].pidfd);
	}
	free(z.kids);
	free(pfd);
	free(idx);
	return rc;
}

/* ---- the agent's side ---------------------------------------------------- */

/* bubblewrap's start and the zygote's first answer. */
#define START_MS 10000
/* A spawn's answer; longer than the zygote's own ZSPAWN_MS. */
#define REPLY_MS 15000
/* A send to a zygote that reads nothing. */
#define SEND_TIMEOUT_S 5
/* How long a stopping or dead zygote's bubblewrap gets to exit. */
#define STOP_MS 2000
/* A released command's wait for its status. */
#define RELEASE_WAIT_MS 5000
/* The reader thread's longest sleep. */
#define READER_POLL_MS 60000
#define WHY_MAX 256

enum zc_state {
	ZC_WAITING, /* sent, no answer yet */
	ZC_RUNNING, /* started: pidfd set */
	ZC_EXITED, /* code set */
	ZC_FAILED, /* err set */
	ZC_LOST, /* the zygote died before telling */
};

struct agent_zygote_cmd {
	struct agent_zygote *z;
	struct agent_zygote_cmd *next;
	uint64_t id;
	unsigned gen; /* the zygote it belongs to */
	enum zc_state state;
	int err;
	int pidfd;
	int32_t code;
};

enum z_state {
	Z_DOWN,
	Z_STARTING,
	Z_UP,
};

struct agent_zygote {
	char **argv; /* bubblewrap's command line */
	const struct agent_box *box;
	const struct agent_net_cfg *net; /* NULL: loopback only */
	bool resolv; /* AGENT_NET_RESOLV goes to bubblewrap on fd 5 */
	pthread_t thread;
	bool thread_started;
	int wake_fd;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; any change below */
	/* Held around every send and around closing the socket, never
	 * while waiting for lock's holders: taken before lock. */
	pthread_mutex_t send_lock;

	/* under lock */
	enum z_state state;
	bool stopping;
	bool want_start;
	unsigned gen; /* bumped by every start that succeeded */
	unsigned starts; /* start attempts finished */
	int start_err;
	char why[WHY_MAX];
	int sock; /* changed only by the reader thread */
	pid_t bwrap_pid;
	uint64_t next_id;
	struct agent_zygote_cmd *cmds;

	/* the reader thread's own */
	struct agent_net *attached; /* the zygote's network */
	bool net_told; /* the network's state was logged at info */
	int bwrap_pidfd;
	int err_fd; /* bubblewrap's and the zygote's stderr */
	char line[WHY_MAX];
	size_t linelen;
	char last[WHY_MAX]; /* the last complete line */
};

static void zy_timedwait(struct agent_zygote *z, int64_t deadline)
{
	struct timespec ts;

	if (deadline > INT64_MAX / 2)
		deadline = now_ms() + READER_POLL_MS;
	ts.tv_sec = (time_t)(deadline / 1000);
	ts.tv_nsec = (long)(deadline % 1000) * 1000000;
	pthread_cond_timedwait(&z->cond, &z->lock, &ts);
}

static void zy_wake(struct agent_zygote *z)
{
	uint64_t one = 1;

	if (write(z->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_debug("exec: cannot wake the zygote's reader: %s",
			  strerror(errno));
}

/* Lines of bubblewrap's and the zygote's stderr: kept for a start's
 * failure, logged once running (they are not expected then). */
static void zy_stderr(struct agent_zygote *z, bool log_them)
{
	char chunk[1024];
	ssize_t n, i;

	n = read(z->err_fd, chunk, sizeof(chunk));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close_fd(&z->err_fd);
		return;
	}
	for (i = 0; i < n; i++) {
		if (chunk[i] != '\n' && z->linelen < sizeof(z->line) - 1) {
			z->line[z->linelen++] = chunk[i];
			continue;
		}
		z->line[z->linelen] = '\0';
		if (z->linelen > 0) {
			memcpy(z->last, z->line, z->linelen + 1);
			if (log_them)
				log_warn("exec: zygote: %s", z->line);
		}
		z->linelen = 0;
	}
}

static struct agent_zygote_cmd *zy_find(struct agent_zygote *z, uint64_t id)
{
	struct agent_zygote_cmd *c;

	for (c = z->cmds; c != NULL; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

static void zy_unlink(struct agent_zygote *z, struct agent_zygote_cmd *zc)
{
	struct agent_zygote_cmd **pp;

	for (pp = &z->cmds; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == zc) {
			*pp = zc->next;
			return;
		}
	}
}

/* Wait (bounded) for the zygote's bubblewrap to exit after its socket
 * closed, killing it past STOP_MS, and reap it. */
static void zy_reap_bwrap(pid_t pid, int pidfd)
{
	struct pollfd pfd = {pidfd, POLLIN, 0};
	int64_t deadline = now_ms() + STOP_MS;

	if (pid <= 0)
		return;
	while (pidfd >= 0 && now_ms() < deadline &&
	       poll(&pfd, 1, (int)(deadline - now_ms())) < 0 && errno == EINTR)
		;
	if (waitpid(pid, NULL, WNOHANG) == pid)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/*
 * The zygote is gone (or is being stopped): every command it had not
 * reported is lost, its bubblewrap is reaped, and the next spawn starts
 * another. Reader thread only.
 */
static void zy_lose(struct agent_zygote *z, const char *reason)
{
	struct agent_zygote_cmd *c;
	bool stopping;
	pid_t pid;
	int pidfd;

	/* Senders blocked on a live but stuck zygote return now. */
	shutdown(z->sock, SHUT_RDWR);
	pthread_mutex_lock(&z->send_lock);
	pthread_mutex_lock(&z->lock);
	close_fd(&z->sock);
	z->state = Z_DOWN;
	for (c = z->cmds; c != NULL; c = c->next)
		if (c->gen == z->gen &&
		    (c->state == ZC_WAITING || c->state == ZC_RUNNING))
			c->state = ZC_LOST;
	pid = z->bwrap_pid;
	z->bwrap_pid = -1;
	pidfd = z->bwrap_pidfd;
	z->bwrap_pidfd = -1;
	stopping = z->stopping;
	pthread_cond_broadcast(&z->cond);
	pthread_mutex_unlock(&z->lock);
	pthread_mutex_unlock(&z->send_lock);
	zy_reap_bwrap(pid, pidfd);
	close_fd(&pidfd);
	agent_net_detach(z->attached);
	z->attached = NULL;
	while (z->err_fd >= 0) {
		struct pollfd pfd = {z->err_fd, POLLIN, 0};

		if (poll(&pfd, 1, 200) <= 0)
			break;
		zy_stderr(z, true);
	}
	close_fd(&z->err_fd);
	if (!stopping)
		log_warn("exec: the zygote ended (%s); commands it ran fail "
			 "with waitFailed, the next one starts a new zygote",
			 reason);
}

/* Everything the zygote said since the last look. Reader thread only. */
static void zy_read(struct agent_zygote *z)
{
	for (;;) {
		struct agent_zygote_cmd *c;
		struct zmsg m;
		size_t nfd = 0;
		int fd = -1, got;

		got = recv_zmsg(z->sock, &m, &fd, 1, &nfd, MSG_DONTWAIT);
		if (got == -EAGAIN)
			return;
		if (got <= 0) {
			zy_lose(z, got == 0 ? "it closed its end"
					    : "its messages were malformed");
			return;
		}
		pthread_mutex_lock(&z->lock);
		c = zy_find(z, m.id);
		if (m.type == ZM_SPAWNED && c != NULL &&
		    c->state == ZC_WAITING && (m.err != 0 || nfd == 1)) {
			if (m.err != 0) {
				c->state = ZC_FAILED;
				c->err = m.err > 0 ? m.err : EIO;
			} else {
				c->state = ZC_RUNNING;
				c->pidfd = fd;
				fd = -1;
			}
		} else if (m.type == ZM_EXITED && c != NULL &&
			   c->state == ZC_RUNNING) {
			c->state = ZC_EXITED;
			/* The init died of a signal only when something
			 * killed it from outside: the command has no code. */
			c->code = m.exited ? m.value : -1;
		}
		pthread_cond_broadcast(&z->cond);
		pthread_mutex_unlock(&z->lock);
		/* An answer nobody waits for any more. */
		close_fd(&fd);
	}
}

/* What the child between fork and exec of bubblewrap needs. */
struct start_plan {
	char *const *argv;
	/* become 0 to 5: null, null, stderr, socket, exe, and the resolver
	 * configuration (-1: none) */
	int fds[6];
	int rep_w;
	const struct agent_box *box;
};

struct start_report {
	int32_t stage; /* 1 descriptors, 2 the box (step), 3 exec */
	int32_t step; /* enum agent_box_step */
	int32_t err;
};

/* After fork in a process with many threads: async-signal-safe only. */
__attribute__((noreturn)) static void start_child(const struct start_plan *p)
{
	static char *const no_env[] = {NULL};
	struct start_report r = {1, 0, 0};
	int i, n, tmp[6], rep, step = 0;

	signals_to_default();
	/* Out of the way of the agent's process group and terminal. */
	setsid();
	rep = fcntl(p->rep_w, F_DUPFD_CLOEXEC, 16);
	/* The cgroup, the limits, the staged root and the user: bubblewrap
	 * starts inside all of them (confine.h). First, while the box's own
	 * descriptors are where the agent opened them. */
	r.stage = 2;
	if (agent_box_enter(p->box, true, &step) < 0) {
		r.step = step;
		goto fail;
	}
	r.stage = 1;
	n = p->fds[5] >= 0 ? 6 : 5;
	/* Moved up first: a source may sit where another one goes. */
	for (i = 0; i < n; i++)
		if ((tmp[i] = fcntl(p->fds[i], F_DUPFD_CLOEXEC, 16)) < 0)
			goto fail;
	for (i = 0; i < n; i++)
		if (dup2(tmp[i], i) < 0)
			goto fail;
	if (syscall(SYS_close_range, (unsigned)n, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		for (i = n; i < 65536; i++)
			fcntl(i, F_SETFD, FD_CLOEXEC);
	r.stage = 3;
	execve(p->argv[0], p->argv, no_env);
fail:
	r.err = errno ? errno : EIO;
	while (write(rep, &r, sizeof(r)) < 0 && errno == EINTR)
		;
	_exit(127);
}

/* Wait for READY; *self is the zygote's pidfd (-1 if it sent none). 0,
 * or -ENOTSUP with why set. */
static int zy_await_ready(struct agent_zygote *z, int sock, int *self,
			  char *why, size_t whysz)
{
	int64_t deadline = now_ms() + START_MS;

	for (;;) {
		struct pollfd pfd[2] = {{sock, POLLIN, 0},
					{z->err_fd, POLLIN, 0}};
		int64_t left = deadline - now_ms();
		struct zmsg m;
		size_t nfd = 0;
		int fd = -1, got;

		if (left <= 0 || poll(pfd, 2, (int)left) == 0) {
			snprintf(why, whysz,
				 "the zygote did not answer within "
				 "%d ms",
				 START_MS);
			return -ENOTSUP;
		}
		if (pfd[1].revents != 0)
			zy_stderr(z, false);
		if (pfd[0].revents == 0)
			continue;
		got = recv_zmsg(sock, &m, &fd, 1, &nfd, MSG_DONTWAIT);
		if (got == -EAGAIN)
			continue;
		if (got == 1 && m.type == ZM_READY &&
		    m.value == ZYGOTE_VERSION) {
			*self = fd;
			return 0;
		}
		close_fd(&fd);
		/* Whatever bubblewrap or the zygote said comes first. */
		while (z->err_fd >= 0) {
			struct pollfd e = {z->err_fd, POLLIN, 0};

			if (poll(&e, 1, 500) <= 0)
				break;
			zy_stderr(z, false);
		}
		if (z->linelen > 0) {
			z->line[z->linelen] = '\0';
			memcpy(z->last, z->line, z->linelen + 1);
		}
		if (z->last[0] != '\0')
			snprintf(why, whysz, "%s", z->last);
		else if (got == 1)
			snprintf(why, whysz,
				 "the zygote speaks another "
				 "version");
		else
			snprintf(why, whysz,
				 "bubblewrap ended before the "
				 "zygote started");
		return -ENOTSUP;
	}
}

static pid_t pidfd_pid(int pidfd);

static const char *const box_steps[] = {
	"",
	"joining the cgroup",
	"setting the limits",
	"staging the root",
	"dropping privileges",
};

/* The resolver configuration bubblewrap shows (fd 5), in a memfd. */
static int resolv_fd(void)
{
	size_t len = strlen(AGENT_NET_RESOLV);
	int fd = memfd_create("sbfs-resolv", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (write(fd, AGENT_NET_RESOLV, len) != (ssize_t)len ||
	    lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Attach the new zygote's network namespace (confine.h) before any
 * command runs in it. A failure leaves it its loopback only: commands
 * then have no network, which is said once at warn. Reader thread only.
 */
static void zy_attach(struct agent_zygote *z, int self)
{
	char why[WHY_MAX];
	pid_t pid = self >= 0 ? pidfd_pid(self) : -1;
	int rc;

	if (z->net == NULL)
		return;
	if (pid <= 0) {
		rc = -ENOSYS;
		snprintf(why, sizeof(why), "the zygote sent no pidfd");
	} else {
		rc = agent_net_attach(z->box, z->net, pid, &z->attached, why,
				      sizeof(why));
	}
	if (rc < 0 && !z->net_told)
		log_warn("exec: network: %s; commands have no network", why);
	else if (rc < 0)
		log_debug("exec: network: %s", why);
	else if (!z->net_told)
		log_info(
			"exec: network: %s",
			z->net->mode == AGENT_NET_NONE
				? "none (a loopback of the sandbox's own)"
				: "user-mode (slirp4netns), without the host's "
				  "loopback; 169.254.0.0/16 unreachable");
	z->net_told = true;
}

/* Start bubblewrap with the zygote inside. Reader thread only. */
static void zy_start(struct agent_zygote *z)
{
	int sv[2] = {-1, -1}, errp[2] = {-1, -1}, rep[2] = {-1, -1};
	int exe = -1, devnull = -1, pidfd = -1, resolv = -1, self = -1;
	int rc = 0;
	struct timeval tv = {SEND_TIMEOUT_S, 0};
	struct start_report r;
	struct start_plan p;
	char why[WHY_MAX];
	pid_t pid = -1;
	ssize_t got;

	why[0] = '\0';
	z->last[0] = '\0';
	z->linelen = 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(errp, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	/* The running binary, whatever has happened to its path since, and
	 * whether or not the exec user may reach its directory. */
	exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (z->resolv)
		resolv = resolv_fd();
	if (exe < 0 || devnull < 0 || (z->resolv && resolv < 0)) {
		rc = -errno;
		goto fail;
	}
	memset(&p, 0, sizeof(p));
	p.argv = z->argv;
	p.fds[0] = devnull;
	p.fds[1] = devnull;
	p.fds[2] = errp[1];
	p.fds[3] = sv[1];
	p.fds[4] = exe;
	p.fds[5] = resolv;
	p.rep_w = rep[1];
	p.box = z->box;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (pid == 0)
		start_child(&p);
	close_fd(&sv[1]);
	close_fd(&errp[1]);
	close_fd(&rep[1]);
	z->err_fd = errp[0];
	errp[0] = -1;
	fcntl(z->err_fd, F_SETFL, O_NONBLOCK);
	/* Unreaped, so the pid names our child alone. */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd >= 0)
		fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	/* Empty at the exec of bubblewrap; a report if it failed before. */
	got = -1;
	if (poll(&(struct pollfd){rep[0], POLLIN, 0}, 1, START_MS) == 1) {
		do {
			got = read(rep[0], &r, sizeof(r));
		} while (got < 0 && errno == EINTR);
	}
	if (got < 0) {
		snprintf(why, sizeof(why), "starting %.64s took too long",
			 z->argv[0]);
		rc = -ENOTSUP;
		goto fail;
	}
	if (got == (ssize_t)sizeof(r)) {
		char text[128];

		agent_errno_text(r.err, text, sizeof(text));
		if (r.stage == 2 && r.step == AGENT_BOX_DROP)
			snprintf(why, sizeof(why),
				 "dropping to uid %u gid %u failed: %s",
				 (unsigned)z->box->uid, (unsigned)z->box->gid,
				 text);
		else if (r.stage == 2 && r.step > 0 && r.step < 5)
			snprintf(why, sizeof(why), "%s failed: %s",
				 box_steps[r.step], text);
		else
			snprintf(why, sizeof(why), "starting %.64s: %s",
				 z->argv[0], text);
		rc = -ENOTSUP;
		goto fail;
	}
	rc = zy_await_ready(z, sv[0], &self, why, sizeof(why));
	if (rc < 0)
		goto fail;
	zy_attach(z, self);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	pthread_mutex_lock(&z->lock);
	z->sock = sv[0];
	sv[0] = -1;
	z->bwrap_pid = pid;
	z->bwrap_pidfd = pidfd;
	z->gen++;
	z->state = Z_UP;
	z->starts++;
	z->start_err = 0;
	pthread_cond_broadcast(&z->cond);
	pthread_mutex_unlock(&z->lock);
	log_debug("exec: zygote started (bubblewrap pid %ld)", (long)pid);
	goto out;
fail:
	if (why[0] == '\0')
		agent_errno_text(-rc, why, sizeof(why));
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close_fd(&pidfd);
	close_fd(&z->err_fd);
	pthread_mutex_lock(&z->lock);
	z->state = Z_DOWN;
	z->starts++;
	z->start_err = rc;
	snprintf(z->why, sizeof(z->why), "%s", why);
	pthread_cond_broadcast(&z->cond);
	pthread_mutex_unlock(&z->lock);
out:
	close_fd(&sv[0]);
	close_fd(&sv[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&rep[0]);
	close_fd(&rep[1]);
	close_fd(&exe);
	close_fd(&devnull);
	close_fd(&resolv);
	close_fd(&self);
}

/*
 * The reader thread: starts the zygote when asked (so that bubblewrap's
 * --die-with-parent follows this thread, which lives as long as the
 * zygote object), reads its answers, and notices its death.
 */
static void *zy_main(void *arg)
{
	struct agent_zygote *z = arg;

	pthread_mutex_lock(&z->lock);
	for (;;) {
		struct pollfd pfd[4];
		int n = 0, isock = -1, ierr = -1, ipid = -1;
		uint64_t v;

		if (z->stopping)
			break;
		if (z->want_start && z->state == Z_DOWN) {
			z->want_start = false;
			z->state = Z_STARTING;
			pthread_mutex_unlock(&z->lock);
			zy_start(z);
			pthread_mutex_lock(&z->lock);
			continue;
		}
		pfd[n++] = (struct pollfd){z->wake_fd, POLLIN, 0};
		if (z->sock >= 0) {
			isock = n;
			pfd[n++] = (struct pollfd){z->sock, POLLIN, 0};
		}
		if (z->err_fd >= 0) {
			ierr = n;
			pfd[n++] = (struct pollfd){z->err_fd, POLLIN, 0};
		}
		if (z->bwrap_pidfd >= 0) {
			ipid = n;
			pfd[n++] = (struct pollfd){z->bwrap_pidfd, POLLIN, 0};
		}
		pthread_mutex_unlock(&z->lock);
		if (poll(pfd, (nfds_t)n, READER_POLL_MS) > 0) {
			if (pfd[0].revents != 0 &&
			    read(z->wake_fd, &v, sizeof(v)) < 0)
				v = 0;
			if (isock >= 0 && pfd[isock].revents != 0)
				zy_read(z);
			if (ierr >= 0 && pfd[ierr].revents != 0 &&
			    z->err_fd >= 0)
				zy_stderr(z, true);
			if (ipid >= 0 && pfd[ipid].revents != 0 && z->sock >= 0)
				zy_lose(z, "its bubblewrap exited");
		}
		pthread_mutex_lock(&z->lock);
	}
	pthread_mutex_unlock(&z->lock);
	if (z->sock >= 0)
		zy_lose(z, "stopping");
	return NULL;
}

int agent_zygote_new(const struct agent_zygote_config *cfg,
		     struct agent_zygote **out, char *why, size_t whysz)
{
	static const char *const tail[] = {
		"--chdir",	  "/",	"--cap-add",
		"CAP_SYS_ADMIN",  "--", "/proc/self/fd/4",
		AGENT_ZYGOTE_ARG, "3",
	};
	struct agent_zygote *z = xcalloc(1, sizeof(*z));
	size_t n = 0, i, ntail = sizeof(tail) / sizeof(tail[0]);
	int64_t deadline;
	unsigned seen;
	int rc;

	z->argv = xcalloc(cfg->bwrap_headc + 6 + ntail + 4, sizeof(char *));
	for (i = 0; i < cfg->bwrap_headc; i++)
		z->argv[n++] = xstrdup(cfg->bwrap_head[i]);
	if (cfg->resolv_dest != NULL) {
		z->argv[n++] = xstrdup("--ro-bind-data");
		z->argv[n++] = xstrdup("5");
		z->argv[n++] = xstrdup(cfg->resolv_dest);
		z->resolv = true;
	}
	z->argv[n++] = xstrdup("--bind");
	z->argv[n++] = xstrdup(agent_box_bind_source(cfg->box));
	z->argv[n++] = xstrdup(AGENT_SANDBOX_DIR);
	for (i = 0; i < ntail; i++)
		z->argv[n++] = xstrdup(tail[i]);
	z->argv[n++] = xasprintf("%llu", (unsigned long long)cfg->tmp_size);
	z->argv[n++] = xasprintf("%llu", (unsigned long long)cfg->nproc);
	z->argv[n++] = xasprintf("%llu", (unsigned long long)cfg->data);
	z->box = cfg->box;
	z->net = cfg->net;
	z->sock = -1;
	z->err_fd = -1;
	z->bwrap_pid = -1;
	z->bwrap_pidfd = -1;
	pthread_mutex_init(&z->lock, NULL);
	pthread_mutex_init(&z->send_lock, NULL);
	clock_cond_init(&z->cond);
	z->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (z->wake_fd < 0) {
		rc = -errno;
		snprintf(why, whysz, "eventfd: %s", strerror(errno));
		goto fail;
	}
	rc = -pthread_create(&z->thread, NULL, zy_main, z);
	if (rc < 0) {
		snprintf(why, whysz, "no thread: %s", strerror(-rc));
		goto fail;
	}
	z->thread_started = true;
	pthread_mutex_lock(&z->lock);
	seen = z->starts;
	z->want_start = true;
	zy_wake(z);
	deadline = now_ms() + 2 * START_MS;
	while (z->starts == seen && now_ms() < deadline)
		zy_timedwait(z, deadline);
	rc = z->state == Z_UP ? 0 : z->start_err ? z->start_err : -ETIMEDOUT;
	if (rc < 0)
		snprintf(why, whysz, "%s",
			 z->why[0] ? z->why : "the zygote did not start");
	pthread_mutex_unlock(&z->lock);
	if (rc < 0)
		goto fail;
	*out = z;
	return 0;
fail:
	agent_zygote_free(z);
	return rc;
}

void agent_zygote_free(struct agent_zygote *z)
{
	struct agent_zygote_cmd *c;
	size_t i;

	if (z == NULL)
		return;
	if (z->thread_started) {
		pthread_mutex_lock(&z->lock);
		z->stopping = true;
		pthread_mutex_unlock(&z->lock);
		zy_wake(z);
		pthread_join(z->thread, NULL);
	}
	while ((c = z->cmds) != NULL) {
		z->cmds = c->next;
		free(c);
	}
	close_fd(&z->wake_fd);
	for (i = 0; z->argv[i] != NULL; i++)
		free(z->argv[i]);
	free(z->argv);
	pthread_cond_destroy(&z->cond);
	pthread_mutex_destroy(&z->lock);
	pthread_mutex_destroy(&z->send_lock);
	free(z);
}

/* The request in a memfd (module comment). */
static int zy_request(char *const *argv, char *const *envp, const char *cwd,
		      int *out)
{
	struct zreq_head h = {ZREQ_MAGIC, 0, 0, 0};
	size_t size = sizeof(h), off, i;
	char *data = NULL;
	int fd = -1, rc = 0;

	for (i = 0; argv[i] != NULL; i++)
		size += strlen(argv[i]) + 1;
	h.argc = (uint32_t)i;
	for (i = 0; envp[i] != NULL; i++)
		size += strlen(envp[i]) + 1;
	h.envc = (uint32_t)i;
	size += strlen(cwd) + 1;
	if (size > ZREQ_MAX || h.argc > ZREQ_MAX_ARGS || h.envc > ZREQ_MAX_ENV)
		return -E2BIG;
	data = malloc(size);
	if (data == NULL)
		return -ENOMEM;
	memcpy(data, &h, sizeof(h));
	off = sizeof(h);
	for (i = 0; argv[i] != NULL; i++) {
		memcpy(data + off, argv[i], strlen(argv[i]) + 1);
		off += strlen(argv[i]) + 1;
	}
	for (i = 0; envp[i] != NULL; i++) {
		memcpy(data + off, envp[i], strlen(envp[i]) + 1);
		off += strlen(envp[i]) + 1;
	}
	memcpy(data + off, cwd, strlen(cwd) + 1);
	fd = memfd_create("sbfs-request", MFD_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	for (off = 0; off < size;) {
		ssize_t n = write(fd, data + off, size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			goto out;
		}
		off += (size_t)n;
	}
	*out = fd;
	fd = -1;
out:
	close_fd(&fd);
	free(data);
	return rc;
}

/* The pidfd's process in our PID namespace, from its fdinfo; -1. */
static pid_t pidfd_pid(int pidfd)
{
	char path[64], text[1024], *p;
	long v;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	p = strstr(text, "\nPid:");
	if (p == NULL)
		return -1;
	v = strtol(p + 5, NULL, 10);
	return v > 0 && v <= INT_MAX ? (pid_t)v : -1;
}

/* Send one message to the zygote zc belongs to, if it still runs. */
static int zy_send(struct agent_zygote_cmd *zc, uint32_t type, int *fds,
		   size_t nfd)
{
	struct agent_zygote *z = zc->z;
	struct zmsg m = {type, 0, zc->id, 0, 0};
	int rc = -ECHILD, sock;

	pthread_mutex_lock(&z->send_lock);
	pthread_mutex_lock(&z->lock);
	sock = z->state == Z_UP && z->gen == zc->gen ? z->sock : -1;
	pthread_mutex_unlock(&z->lock);
	if (sock >= 0)
		rc = send_zmsg(sock, &m, fds, nfd);
	pthread_mutex_unlock(&z->send_lock);
	return rc;
}

/* A zygote that does not answer is killed; its death is noticed by the
 * reader like any other. Under lock. */
static void zy_kill_locked(struct agent_zygote *z, unsigned gen)
{
	if (z->state == Z_UP && z->gen == gen && z->bwrap_pid > 0) {
		log_warn("exec: the zygote does not answer; killing it");
		kill(z->bwrap_pid, SIGKILL);
	}
}

int agent_zygote_spawn(struct agent_zygote *z, char *const *argv,
		       char *const *envp, const char *cwd, int in_fd,
		       int out_fd, int err_fd, struct agent_zygote_cmd **zc,
		       pid_t *pid, int *pidfd)
{
	struct agent_zygote_cmd *c = NULL;
	int fds[4] = {-1, in_fd, out_fd, err_fd};
	int64_t deadline = now_ms() + REPLY_MS;
	pid_t p;
	int rc;

	rc = zy_request(argv, envp, cwd, &fds[0]);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&z->lock);
	while (z->state != Z_UP) {
		unsigned seen = z->starts;

		if (z->stopping) {
			rc = -ESHUTDOWN;
			break;
		}
		if (z->state == Z_DOWN && !z->want_start) {
			z->want_start = true;
			zy_wake(z);
		}
		while (z->starts == seen && !z->stopping && now_ms() < deadline)
			zy_timedwait(z, deadline);
		if (z->state == Z_UP)
			break;
		if (z->starts != seen) {
			rc = z->start_err < 0 ? z->start_err : -EIO;
			log_warn("exec: the zygote cannot be restarted: %s",
				 z->why);
			break;
		}
		if (now_ms() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	if (rc == 0) {
		c = xcalloc(1, sizeof(*c));
		c->z = z;
		c->id = ++z->next_id;
		c->gen = z->gen;
		c->state = ZC_WAITING;
		c->pidfd = -1;
		c->next = z->cmds;
		z->cmds = c;
	}
	pthread_mutex_unlock(&z->lock);
	if (rc < 0)
		goto out;

	rc = zy_send(c, ZM_SPAWN, fds, 4);
	deadline = now_ms() + REPLY_MS;
	pthread_mutex_lock(&z->lock);
	if (rc < 0 && rc != -ECHILD)
		zy_kill_locked(z, c->gen);
	while (rc == 0 && c->state == ZC_WAITING && now_ms() < deadline)
		zy_timedwait(z, deadline);
	if (rc == 0) {
		switch (c->state) {
		case ZC_RUNNING:
		case ZC_EXITED: /* and already ended */
			break;
		case ZC_FAILED:
			rc = -c->err;
			break;
		case ZC_WAITING:
			rc = -ETIMEDOUT;
			zy_kill_locked(z, c->gen);
			break;
		default:
			rc = -ECHILD;
			break;
		}
	}
	if (rc < 0) {
		zy_unlink(z, c);
		free(c);
		c = NULL;
	}
	pthread_mutex_unlock(&z->lock);
	if (rc < 0)
		goto out;
	p = pidfd_pid(c->pidfd);
	if (p <= 0) {
		int fd = c->pidfd;

		syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
		agent_zygote_release(c);
		close(fd);
		rc = -EIO;
		goto out;
	}
	*zc = c;
	*pid = p;
	*pidfd = c->pidfd;
out:
	close_fd(&fds[0]);
	return rc;
}

int agent_zygote_wait(struct agent_zygote_cmd *zc, int timeout_ms,
		      int32_t *code)
{
	struct agent_zygote *z = zc->z;
	int64_t deadline = now_ms() + timeout_ms;
	int rc;

	pthread_mutex_lock(&z->lock);
	while (zc->state == ZC_RUNNING && now_ms() < deadline)
		zy_timedwait(z, deadline);
	if (zc->state == ZC_EXITED) {
		*code = zc->code;
		rc = 0;
	} else {
		rc = zc->state == ZC_RUNNING ? -ETIMEDOUT : -ECHILD;
	}
	pthread_mutex_unlock(&z->lock);
	return rc;
}

void agent_zygote_release(struct agent_zygote_cmd *zc)
{
	struct agent_zygote *z = zc->z;
	int64_t deadline = now_ms() + RELEASE_WAIT_MS;
	bool tell;

	pthread_mutex_lock(&z->lock);
	while (zc->state == ZC_RUNNING && now_ms() < deadline)
		zy_timedwait(z, deadline);
	tell = zc->state == ZC_RUNNING || zc->state == ZC_EXITED;
	pthread_mutex_unlock(&z->lock);
	/* Reaped by the zygote from here: the pid is free again. */
	if (tell && zy_send(zc, ZM_RELEASE, NULL, 0) < 0)
		log_debug("exec: the zygote did not take a release");
	pthread_mutex_lock(&z->lock);
	zy_unlink(z, zc);
	pthread_mutex_unlock(&z->lock);
	free(zc);
}
