/* SPDX-License-Identifier: MIT */
/*
 * zygote_main: the zygote process, `sandbox-agent --zygote FD ...`
 * (zygote.h), started by the agent's side (zygote.c) inside bubblewrap.
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
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/proc.h"
#include "agent/zygote.h"
#include "agent/zygote_i.h"
#include "common/clock.h"
#include "common/fdio.h"
#include "common/sigdefault.h"
#include "common/xalloc.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

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
	struct zreq req; /* the command, its environment and cwd */
	int in_fd, out_fd, err_fd, rep_w;
	int maxfd; /* above every descriptor the zygote may have */
	char *cmd_stack; /* top of the command's stack */
	const char *tmpopts; /* the options of /tmp and /dev/shm */
	uint64_t data; /* the command's RLIMIT_DATA; 0: none */
};

PROC_CHILD_CODE static void report(const struct zplan *p, int stage, int err)
{
	struct zreport r = {stage, err ? err : EIO};

	while (write(p->rep_w, &r, sizeof(r)) < 0 && errno == EINTR)
		;
}

/* The command: pid 2 of its namespace, in its init's process group. */
PROC_CHILD_CODE static int command_main(void *arg)
{
	const struct zplan *p = arg;
	char found[PATH_MAX];
	int stage = ZST_SETUP;

	sig_defaults();
	if (dup2(p->in_fd, 0) < 0 || dup2(p->out_fd, 1) < 0 ||
	    dup2(p->err_fd, 2) < 0)
		goto fail;
	/* Everything else goes at exec, the report pipe with it: a
	 * successful exec is an empty read for the zygote. */
	proc_cloexec_from(3, p->maxfd);
	stage = ZST_CWD;
	if (chdir(p->req.cwd) < 0)
		goto fail;
	stage = ZST_EXEC;
	errno = proc_find_program(p->req.argv[0], p->req.path, NULL, NULL,
				  found, sizeof(found));
	if (errno != 0)
		goto fail;
	execve(found, p->req.argv, p->req.envp);
	if (errno == ENOEXEC) {
		/* What execvp does with a script that has no #! line. */
		p->req.sh_argv[1] = found;
		execve("/bin/sh", (char *const *)p->req.sh_argv, p->req.envp);
	}
fail:
	report(p, stage, errno);
	_exit(127);
}

/* Make the command's own instance of what must not be shared between
 * commands (bubblewrap gave each its own before); the temporary file
 * systems are bounded (doc/commands.md, "Limits"). */
PROC_CHILD_CODE static int mount_private(const struct zplan *p)
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
PROC_CHILD_CODE static int drop_caps(void)
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
PROC_CHILD_CODE static int init_main(void *arg)
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
	proc_close(&k->pidfd);
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
	int64_t deadline = clock_mono_ms() + ZSPAWN_MS;
	struct zreport r;
	size_t have = 0;
	int err = 0;

	for (;;) {
		ssize_t n = proc_read_bounded(rep_r, (char *)&r + have,
					      sizeof(r) - have, deadline);

		if (n == -ETIMEDOUT) {
			proc_pidfd_kill(pidfd);
			return ETIMEDOUT;
		}
		if (n == 0)
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
	err = zwire_request_read(fds[0], &req);
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
	p.req = req;
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
	proc_close(&rep[1]);
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
	rc = zwire_send(z->sock, &r, &pidfd, err == 0 ? 1 : 0);
	if (stack != MAP_FAILED)
		munmap(stack, stacksz);
	proc_close(&rep[0]);
	proc_close(&rep[1]);
	for (i = 0; i < nfd; i++)
		close(fds[i]);
	zwire_request_cleanup(&req);
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
	return zwire_send(z->sock, &r, NULL, 0);
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
	proc_pidfd_kill(k->pidfd);
	k->released = true;
}

/* Make a mount read-only, keeping the flags a less privileged mount
 * namespace may not change. */
static int remount_ro(const char *path)
{
	static const struct {
		unsigned long st, ms;
	} kept[] = {
		{ST_NOSUID, MS_NOSUID},		{ST_NODEV, MS_NODEV},
		{ST_NOEXEC, MS_NOEXEC},		{ST_NOATIME, MS_NOATIME},
		{ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME},
	};
	unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
	struct statvfs sv;
	size_t i;

	if (statvfs(path, &sv) < 0)
		return -1;
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (sv.f_flag & kept[i].st)
			flags |= kept[i].ms;
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
	self = proc_pidfd_open(getpid());
	rc = zwire_send(z.sock, &ready, &self, self >= 0 ? 1 : 0);
	fdio_close(self);
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
		got = zwire_recv(z.sock, &m, fds, ZM_MAX_FDS, &nfd,
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
		proc_pidfd_kill(z.kids[i].pidfd);
		proc_close(&z.kids[i].pidfd);
	}
	free(z.kids);
	free(pfd);
	free(idx);
	return rc;
}
