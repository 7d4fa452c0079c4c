/* SPDX-License-Identifier: MIT */
/*
 * sandbox-agent: the per-boot credential and the process's life: take the
 * options (options.h), open the session root, write a fresh credential,
 * start the job registry and the HTTP server, then wait for SIGTERM or
 * SIGINT and shut down in order. Everything the agent does for a request
 * lives in the library (http.c and the route modules), not here.
 *
 * A restart is a new boot: a new credential, a new boot id, and the agent
 * starts unactivated again.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/http.h"
#include "agent/jobs.h"
#include "agent/options.h"
#include "agent/spawn.h"
#include "agent/watch.h"
#include "agent/zygote.h"
#include "common/fdio.h"
#include "common/fileio.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/token.h"
#include "common/xalloc.h"

/* mkdir -p of path's parent directories, each new one 0700. */
static int make_parents(const char *path)
{
	char dir[PATH_MAX];
	char *p;

	if (strlcpy_s(dir, path, sizeof(dir)) >= sizeof(dir))
		return -ENAMETOOLONG;
	p = strrchr(dir, '/');
	if (p == NULL || p == dir)
		return 0;
	*p = '\0';
	for (p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void die_usage(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

/* A configuration error: one line on stderr, exit 1. */
static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("sandbox-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* --run: the command's output goes where the agent's own does. */
static int run_output(void *ctx, enum proto_frame_type stream, uint64_t seq,
		      const unsigned char *p, size_t n)
{
	int rc = fdio_write_all(stream == PROTO_FRAME_STDERR ? 2 : 1, p, n);

	(void)ctx;
	(void)seq;
	/* A sink's error stops the command: one nobody reads runs on. */
	return rc < 0 ? 0 : rc;
}

/*
 * --run: one command, confined and limited exactly as the agent's jobs
 * are (its own zygote, network and cgroup), its output passed through and
 * its exit status returned: 0 to 255 as the command's (128 + a signal),
 * 124 for the timeout, 125 when it could not be run or waited for, 126
 * for a working directory refused. The local provider's native sessions
 * run their commands this way.
 */
static int run_once(const struct agent *a, const struct agent_options *cl,
		    char **cmd, size_t cmdc)
{
	struct proto_exec_req req = {
		cmd, cmdc, cl->run_timeout_ms, NULL, NULL, 0, 0, false};
	struct agent_run_sink sink = {run_output, NULL, -1, true};
	char reason[AGENT_SPAWN_MSG_MAX], *rel = NULL;
	struct agent_spawner *sp = NULL;
	struct agent_run_result res;
	struct agent_cmd c;
	int rc, status = 125;

	rc = agent_spawner_new(a, &sp);
	if (rc < 0) {
		fprintf(stderr, "sandbox-agent: commands cannot be run here\n");
		return 125;
	}
	if (agent_spawn_cwd(sp, cl->run_cwd, false, &rel, reason,
			    sizeof(reason)) < 0) {
		fprintf(stderr,
			"sandbox-agent: the working directory '%s' is "
			"refused: %s\n",
			cl->run_cwd, reason);
		status = 126;
		goto out;
	}
	if (agent_spawn(sp, &req, rel, &c, reason) < 0) {
		fprintf(stderr, "sandbox-agent: %s: %s\n", cmd[0], reason);
		goto out;
	}
	agent_run(&c, cl->run_timeout_ms, SIZE_MAX, &sink, &res);
	agent_cmd_reap(&c);
	if (res.end == AGENT_RUN_EXITED)
		status = res.code < 0 ? 128 + SIGKILL : res.code & 0xff;
	else if (res.end == AGENT_RUN_TIMEOUT)
		status = 124;
	if (res.end != AGENT_RUN_EXITED)
		fprintf(stderr, "sandbox-agent: %s: %s\n",
			res.err_code ? res.err_code : "stopped", res.message);
out:
	free(rel);
	agent_spawner_free(sp);
	return status;
}

/*
 * Hold a POSIX write lock on path for the rest of the process's life
 * (doc/security.md, "A dead agent"): whoever finds it locked knows an
 * agent of this sandbox lives, and F_GETLK names its pid; the kernel
 * drops it when the process dies, however it dies. The lock is not
 * inherited by the commands the agent forks. A lock held by another
 * process is -EBUSY with its pid in *holder.
 */
static int hold_lock(const char *path, pid_t *holder)
{
	struct flock fl;
	int fd, rc;

	rc = make_parents(path);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_SETLK, &fl) == 0)
		return 0; /* the descriptor stays open: the lock with it */
	rc = errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	*holder = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK
			  ? fl.l_pid
			  : 0;
	close(fd);
	return rc;
}

/* Each connection takes two descriptors (the library's and the one the
 * agent shuts it down by): raise the soft limit as far as allowed. */
static void raise_nofile(const struct agent_config *cfg)
{
	rlim_t want = 2 * (rlim_t)(cfg->max_connections > 0
					   ? cfg->max_connections
					   : AGENT_HTTP_MAX_CONNECTIONS) +
		      256;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want
			      ? want
			      : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		log_warn("only %lu descriptors: fewer connections than "
			 "--max-connections may be served",
			 (unsigned long)rl.rlim_cur);
}

/* The command line, or the process ends: usage, version, or an error. */
static void parse_or_exit(int argc, char **argv, struct agent_options *o)
{
	char err[512];
	int rc = agent_options_parse(argc, argv, o, err, sizeof(err));

	switch (rc) {
	case AGENT_OPTS_SERVE:
		return;
	case AGENT_OPTS_HELP:
		agent_options_usage(stdout);
		exit(0);
	case AGENT_OPTS_VERSION:
		printf("sandbox-agent %s (agent protocol v%d)\n",
		       PACKAGE_VERSION, PROTO_VERSION);
		exit(0);
	default:
		if (err[0] == '\0') {
			agent_options_usage(stderr);
			exit(1);
		}
		die_usage("%s", err);
	}
}

/* The session root (*root its canonical path), who acts in it, and the
 * descriptor everything reaches it by. */
static void open_root(struct agent *a, const struct agent_options *o,
		      char **root)
{
	struct agent_config *cfg = &a->cfg;
	char err[512];
	struct stat st;

	if (o->root == NULL || *o->root == '\0')
		die_usage("%s", "--root (or ALIEN_SANDBOX_ROOT) is required");
	*root = realpath(o->root, NULL);
	if (*root == NULL || stat(*root, &st) < 0 || !S_ISDIR(st.st_mode))
		die_usage("the root '%s' is not a directory", o->root);
	cfg->root = *root;
	if (agent_options_exec_user(o->exec_user, cfg, geteuid(), getuid(),
				    getgid(), err, sizeof(err)) < 0)
		die_usage("%s", err);
	if (cfg->confine == AGENT_CONFINE_BWRAP && access(cfg->bwrap, X_OK) < 0)
		die_usage("--confine bwrap: no usable bubblewrap at '%s'",
			  cfg->bwrap);
	/* Opened now, as whoever started the agent: what runs as the exec
	 * user reaches the root through this descriptor (the file routes,
	 * and the bind confine.h stages), never through the path, whose
	 * directories may be closed to that user. */
	a->root_fd = open(*root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (a->root_fd < 0)
		die_usage("cannot open the root '%s'", *root);
}

/* The lock file, then the credential: fresh every start, written before
 * the port is published so whoever waits for the port can read it. */
static void take_lock_and_credential(struct agent *a,
				     const struct agent_options *o)
{
	const struct agent_config *cfg = &a->cfg;
	int rc;

	/* The lock first: a second agent for the same sandbox must not
	 * overwrite the first one's credential. */
	if (o->lock_file != NULL) {
		pid_t holder = 0;

		rc = hold_lock(o->lock_file, &holder);
		if (rc == -EBUSY)
			die_usage("another agent (pid %ld) holds the lock file "
				  "'%s'",
				  (long)holder, o->lock_file);
		if (rc < 0)
			die_usage("cannot lock '%s': %s", o->lock_file,
				  strerror(-rc));
	}
	raise_nofile(cfg);
	if (token_generate(a->token) < 0)
		die_usage("%s", "no randomness for the credential");
	rc = make_parents(cfg->token_file);
	if (rc == 0)
		rc = token_write_file(cfg->token_file, a->token);
	if (rc < 0)
		die_usage("cannot write the credential file '%s': %s",
			  cfg->token_file, strerror(-rc));
}

/* The job registry, the change events and the HTTP server; *port the
 * bound port (0 on a Unix socket). */
static void start_or_exit(struct agent *a, unsigned *port)
{
	const struct agent_config *cfg = &a->cfg;
	int rc;

	rc = agent_jobs_new(a, &a->jobs);
	if (rc < 0)
		die_usage("cannot start the job registry: %s", strerror(-rc));
	rc = agent_events_new(a, &a->events);
	if (rc < 0)
		die_usage("cannot make the change events: %s", strerror(-rc));
	rc = agent_http_start(a, port);
	if (rc == -EADDRINUSE && cfg->socket_path != NULL)
		die_usage("socket '%s' is in use", cfg->socket_path);
	if (rc == -EADDRINUSE)
		die_usage("port %u is in use", cfg->port);
	if (rc < 0 && cfg->socket_path != NULL)
		die_usage("cannot listen on socket '%s': %s", cfg->socket_path,
			  strerror(-rc));
	if (rc < 0)
		die_usage("cannot listen on %s port %u: %s", cfg->listen_host,
			  cfg->port, strerror(-rc));
}

static void stop_all(struct agent *a)
{
	agent_http_stop(a);
	agent_events_free(a->events);
	agent_jobs_free(a->jobs);
}

/* The pid and port files, and the line that says where the agent is. */
static void publish(struct agent *a, const struct agent_options *o,
		    unsigned port)
{
	const struct agent_config *cfg = &a->cfg;
	char num[32];
	int rc;

	if (o->pid_file != NULL) {
		snprintf(num, sizeof(num), "%ld\n", (long)getpid());
		if (file_write_atomic(o->pid_file, num, strlen(num), 0644) < 0)
			log_warn("cannot write the pid file '%s'", o->pid_file);
	}
	if (cfg->port_file != NULL && cfg->socket_path == NULL) {
		snprintf(num, sizeof(num), "%u\n", port);
		rc = file_write_atomic(cfg->port_file, num, strlen(num), 0644);
		if (rc < 0) {
			stop_all(a);
			die_usage("cannot write the port file '%s': %s",
				  cfg->port_file, strerror(-rc));
		}
	}
	if (cfg->socket_path != NULL)
		log_info("listening on socket %s, root %s, boot %s%s",
			 cfg->socket_path, cfg->root, a->boot_id,
			 cfg->strict_v1 ? ", protocol v1 only" : "");
	else
		log_info("listening on %s port %u, root %s, boot %s%s",
			 cfg->listen_host, port, cfg->root, a->boot_id,
			 cfg->strict_v1 ? ", protocol v1 only" : "");
}

int main(int argc, char **argv)
{
	static struct agent agent;
	static struct agent_options o;
	struct agent *a = &agent;
	char *root = NULL;
	sigset_t sigs;
	unsigned port = 0;
	int rc, sig;

	/* Internal: the process that starts confined commands (zygote.h). */
	if (argc > 1 && strcmp(argv[1], AGENT_ZYGOTE_ARG) == 0)
		return agent_zygote_main(argc, argv);
	parse_or_exit(argc, argv, &o);
	a->cfg = o.cfg;
	log_init("sandbox-agent", o.level);
	if (o.use_syslog)
		log_use_syslog(true);
	open_root(a, &o, &root);
	if (o.run) {
		signal(SIGPIPE, SIG_IGN);
		rc = run_once(a, &o, argv + o.cmd, (size_t)(argc - o.cmd));
		close(a->root_fd);
		free(root);
		return rc;
	}
	if (ids_uuid(a->boot_id) < 0)
		die_usage("%s", "no randomness for the boot id");
	atomic_init(&a->activated, a->cfg.activated_at_start);
	take_lock_and_credential(a, &o);

	/* Signals are taken with sigwait below; block them before any
	 * thread starts so every thread inherits the mask (a command's
	 * process must reset it before exec). SIGPIPE: a client that goes
	 * away is an error return, not a death. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	start_or_exit(a, &port);
	publish(a, &o, port);
	for (;;) {
		struct timespec ts = {60, 0};

		sig = sigtimedwait(&sigs, NULL, &ts);
		if (sig == SIGTERM || sig == SIGINT)
			break;
	}
	log_info("stopping on signal %d", sig);
	stop_all(a);
	if (o.pid_file != NULL)
		unlink(o.pid_file);
	if (a->cfg.port_file != NULL && a->cfg.socket_path == NULL)
		unlink(a->cfg.port_file);
	close(a->root_fd);
	token_wipe(a->token, sizeof(a->token));
	free(root);
	return 0;
}
