/* SPDX-License-Identifier: MIT */
/*
 * zygote: the agent's side of the zygote (zygote.h): a reader thread that
 * starts bubblewrap with the zygote inside and reads every answer, and
 * the calls that spawn, wait for and release commands. The zygote process
 * itself is zygote_main.c, the wire between them zygote_wire.c. It does
 * not decide whether commands are confined, build bubblewrap's layout, or
 * read a command's output: spawn.c does.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/proc.h"
#include "common/sigdefault.h"
#include "agent/spawn.h"
#include "agent/zygote.h"
#include "agent/zygote_i.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "common/strv.h"

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

/* Under lock: wait for a change until deadline (clock_mono_ms), a far one
 * looked at again after READER_POLL_MS. */
static void zy_timedwait(struct agent_zygote *z, int64_t deadline)
{
	int64_t left = deadline - clock_mono_ms();
	struct timespec ts;

	if (left > READER_POLL_MS)
		left = READER_POLL_MS;
	clock_deadline_in(&ts, left > 0 ? (long)left : 0);
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
		proc_close(&z->err_fd);
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
	proc_close(&z->sock);
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
	proc_reap_bounded(pid, pidfd, clock_mono_ms() + STOP_MS);
	proc_close(&pidfd);
	agent_net_detach(z->attached);
	z->attached = NULL;
	while (z->err_fd >= 0) {
		struct pollfd pfd = {z->err_fd, POLLIN, 0};

		if (poll(&pfd, 1, 200) <= 0)
			break;
		zy_stderr(z, true);
	}
	proc_close(&z->err_fd);
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

		got = zwire_recv(z->sock, &m, &fd, 1, &nfd, MSG_DONTWAIT);
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
		proc_close(&fd);
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

	sig_defaults();
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
	proc_cloexec_from(n, 65536);
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
	int64_t deadline = clock_mono_ms() + START_MS;

	for (;;) {
		struct pollfd pfd[2] = {{sock, POLLIN, 0},
					{z->err_fd, POLLIN, 0}};
		int64_t left = deadline - clock_mono_ms();
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
		got = zwire_recv(sock, &m, &fd, 1, &nfd, MSG_DONTWAIT);
		if (got == -EAGAIN)
			continue;
		if (got == 1 && m.type == ZM_READY &&
		    m.value == ZYGOTE_VERSION) {
			*self = fd;
			return 0;
		}
		proc_close(&fd);
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

/* What bubblewrap's child reported before it could exec, in why[]. */
static void start_failure(const struct agent_zygote *z,
			  const struct start_report *r, char *why, size_t whysz)
{
	char text[128];

	agent_errno_text(r->err, text, sizeof(text));
	if (r->stage == 2 && r->step == AGENT_BOX_DROP)
		snprintf(why, whysz, "dropping to uid %u gid %u failed: %s",
			 (unsigned)z->box->uid, (unsigned)z->box->gid, text);
	else if (r->stage == 2 && r->step > 0 && r->step < 5)
		snprintf(why, whysz, "%s failed: %s", box_steps[r->step], text);
	else
		snprintf(why, whysz, "starting %.64s: %s", z->argv[0], text);
}

/*
 * Fork bubblewrap with the zygote's end of the socket pair (sock) and
 * stderr (err_w), and wait (bounded) for its exec. 0 with *pid, or a
 * negative errno (-ENOTSUP with why[] set when the child said why); *pid
 * is set (a child to reap) whenever the fork happened.
 */
static int zy_fork(struct agent_zygote *z, int sock, int err_w, pid_t *pid,
		   char *why, size_t whysz)
{
	int rep[2] = {-1, -1}, exe = -1, devnull = -1, resolv = -1, rc = 0;
	struct start_report r;
	struct start_plan p;
	ssize_t got = -1;

	*pid = -1;
	if (pipe2(rep, O_CLOEXEC) < 0)
		return -errno;
	/* The running binary, whatever has happened to its path since, and
	 * whether or not the exec user may reach its directory. */
	exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (z->resolv)
		resolv = resolv_fd();
	if (exe < 0 || devnull < 0 || (z->resolv && resolv < 0)) {
		rc = -errno;
		goto out;
	}
	memset(&p, 0, sizeof(p));
	p.argv = z->argv;
	p.fds[0] = devnull;
	p.fds[1] = devnull;
	p.fds[2] = err_w;
	p.fds[3] = sock;
	p.fds[4] = exe;
	p.fds[5] = resolv;
	p.rep_w = rep[1];
	p.box = z->box;
	*pid = fork();
	if (*pid < 0) {
		rc = -errno;
		goto out;
	}
	if (*pid == 0)
		start_child(&p);
	proc_close(&rep[1]);
	/* Empty at the exec of bubblewrap; a report if it failed before. */
	if (poll(&(struct pollfd){rep[0], POLLIN, 0}, 1, START_MS) == 1) {
		do {
			got = read(rep[0], &r, sizeof(r));
		} while (got < 0 && errno == EINTR);
	}
	if (got < 0) {
		snprintf(why, whysz, "starting %.64s took too long",
			 z->argv[0]);
		rc = -ENOTSUP;
	} else if (got == (ssize_t)sizeof(r)) {
		start_failure(z, &r, why, whysz);
		rc = -ENOTSUP;
	}
out:
	proc_close(&rep[0]);
	proc_close(&rep[1]);
	proc_close(&exe);
	proc_close(&devnull);
	proc_close(&resolv);
	return rc;
}

/* A start ended: up with sock (the zygote's socket, taken) and its
 * bubblewrap, or down with rc and why. Wakes every waiter. */
static void zy_started(struct agent_zygote *z, int rc, const char *why,
		       int sock, pid_t pid, int pidfd)
{
	pthread_mutex_lock(&z->lock);
	z->starts++;
	z->start_err = rc;
	if (rc == 0) {
		z->sock = sock;
		z->bwrap_pid = pid;
		z->bwrap_pidfd = pidfd;
		z->gen++;
		z->state = Z_UP;
	} else {
		z->state = Z_DOWN;
		snprintf(z->why, sizeof(z->why), "%s", why);
	}
	pthread_cond_broadcast(&z->cond);
	pthread_mutex_unlock(&z->lock);
}

/* Start bubblewrap with the zygote inside. Reader thread only. */
static void zy_start(struct agent_zygote *z)
{
	int sv[2] = {-1, -1}, errp[2] = {-1, -1};
	int pidfd = -1, self = -1, rc;
	struct timeval tv = {SEND_TIMEOUT_S, 0};
	char why[WHY_MAX];
	pid_t pid = -1;

	why[0] = '\0';
	z->last[0] = '\0';
	z->linelen = 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(errp, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = zy_fork(z, sv[1], errp[1], &pid, why, sizeof(why));
	proc_close(&sv[1]);
	proc_close(&errp[1]);
	if (rc < 0)
		goto fail;
	z->err_fd = errp[0];
	errp[0] = -1;
	fcntl(z->err_fd, F_SETFL, O_NONBLOCK);
	/* Unreaped, so the pid names our child alone. */
	pidfd = proc_pidfd_open(pid);
	rc = zy_await_ready(z, sv[0], &self, why, sizeof(why));
	if (rc < 0)
		goto fail;
	zy_attach(z, self);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	zy_started(z, 0, NULL, sv[0], pid, pidfd);
	sv[0] = -1;
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
	proc_close(&pidfd);
	proc_close(&z->err_fd);
	zy_started(z, rc, why, -1, -1, -1);
out:
	proc_close(&sv[0]);
	proc_close(&sv[1]);
	proc_close(&errp[0]);
	proc_close(&errp[1]);
	proc_close(&self);
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
	deadline = clock_mono_ms() + 2 * START_MS;
	while (z->starts == seen && clock_mono_ms() < deadline)
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
	proc_close(&z->wake_fd);
	strv_free_null(z->argv);
	pthread_cond_destroy(&z->cond);
	pthread_mutex_destroy(&z->lock);
	pthread_mutex_destroy(&z->send_lock);
	free(z);
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
		rc = zwire_send(sock, &m, fds, nfd);
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

/* Under lock: wait until the zygote is up, asking for a start when it is
 * down. 0, -ESHUTDOWN, -ETIMEDOUT past deadline, or the failed start's
 * error. */
static int zy_await_up(struct agent_zygote *z, int64_t deadline)
{
	while (z->state != Z_UP) {
		unsigned seen = z->starts;

		if (z->stopping)
			return -ESHUTDOWN;
		if (z->state == Z_DOWN && !z->want_start) {
			z->want_start = true;
			zy_wake(z);
		}
		while (z->starts == seen && !z->stopping &&
		       clock_mono_ms() < deadline)
			zy_timedwait(z, deadline);
		if (z->state == Z_UP)
			break;
		if (z->starts != seen) {
			log_warn("exec: the zygote cannot be restarted: %s",
				 z->why);
			return z->start_err < 0 ? z->start_err : -EIO;
		}
		if (clock_mono_ms() >= deadline)
			return -ETIMEDOUT;
	}
	return 0;
}

/* Under lock: a new command of the running zygote, waiting. */
static struct agent_zygote_cmd *zy_cmd_new(struct agent_zygote *z)
{
	struct agent_zygote_cmd *c = xcalloc(1, sizeof(*c));

	c->z = z;
	c->id = ++z->next_id;
	c->gen = z->gen;
	c->state = ZC_WAITING;
	c->pidfd = -1;
	c->next = z->cmds;
	z->cmds = c;
	return c;
}

/* Send c's request (fds: the memfd and the standard descriptors) and wait
 * (bounded) for the zygote's answer. 0 once it runs (or already ended),
 * else a negative errno with c unlinked and freed. */
static int zy_spawn_cmd(struct agent_zygote *z, struct agent_zygote_cmd *c,
			int *fds)
{
	int64_t deadline;
	int rc;

	rc = zy_send(c, ZM_SPAWN, fds, 4);
	deadline = clock_mono_ms() + REPLY_MS;
	pthread_mutex_lock(&z->lock);
	if (rc < 0 && rc != -ECHILD)
		zy_kill_locked(z, c->gen);
	while (rc == 0 && c->state == ZC_WAITING && clock_mono_ms() < deadline)
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
	}
	pthread_mutex_unlock(&z->lock);
	return rc;
}

int agent_zygote_spawn(struct agent_zygote *z, char *const *argv,
		       char *const *envp, const char *cwd, int in_fd,
		       int out_fd, int err_fd, struct agent_zygote_cmd **zc,
		       pid_t *pid, int *pidfd)
{
	struct agent_zygote_cmd *c = NULL;
	int fds[4] = {-1, in_fd, out_fd, err_fd};
	pid_t p;
	int rc;

	rc = zwire_request_fd(argv, envp, cwd, &fds[0]);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&z->lock);
	rc = zy_await_up(z, clock_mono_ms() + REPLY_MS);
	if (rc == 0)
		c = zy_cmd_new(z);
	pthread_mutex_unlock(&z->lock);
	if (rc == 0)
		rc = zy_spawn_cmd(z, c, fds);
	if (rc < 0)
		goto out;
	p = pidfd_pid(c->pidfd);
	if (p <= 0) {
		int fd = c->pidfd;

		proc_pidfd_kill(fd);
		agent_zygote_release(c);
		close(fd);
		rc = -EIO;
		goto out;
	}
	*zc = c;
	*pid = p;
	*pidfd = c->pidfd;
out:
	proc_close(&fds[0]);
	return rc;
}

/* Lock z and wait up to ms while zc runs; returns with the lock held. */
static void zy_lock_until_ended(struct agent_zygote_cmd *zc, int64_t ms)
{
	struct agent_zygote *z = zc->z;
	int64_t deadline = clock_mono_ms() + ms;

	pthread_mutex_lock(&z->lock);
	while (zc->state == ZC_RUNNING && clock_mono_ms() < deadline)
		zy_timedwait(z, deadline);
}

int agent_zygote_wait(struct agent_zygote_cmd *zc, int timeout_ms,
		      int32_t *code)
{
	struct agent_zygote *z = zc->z;
	int rc;

	zy_lock_until_ended(zc, timeout_ms);
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
	bool tell;

	zy_lock_until_ended(zc, RELEASE_WAIT_MS);
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
