/* SPDX-License-Identifier: MIT */
/*
 * sandbox-agent: the command line, the per-boot credential and the
 * process's life: parse options (and the ALIEN_SANDBOX_* environment of
 * the original agent), open the session root, write a fresh credential,
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
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/confine.h"
#include "agent/http.h"
#include "agent/jobs.h"
#include "agent/spawn.h"
#include "agent/watch.h"
#include "agent/zygote.h"
#include "common/fileio.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/token.h"
#include "common/xalloc.h"

#define DEFAULT_PORT 8971
#define DEFAULT_TOKEN_FILE "/opt/alien/agent-token"
#define DEFAULT_EXT_MAX_WRITE (16UL * 1024 * 1024)
#define MAX_EXT_WRITE (1UL << 30)
#define NOBODY 65534

enum {
	OPT_ROOT = 256,
	OPT_LISTEN,
	OPT_PORT,
	OPT_PORT_FILE,
	OPT_PID_FILE,
	OPT_TOKEN_FILE,
	OPT_EXEC_USER,
	OPT_CONFINE,
	OPT_BWRAP,
	OPT_OUTPUT_CAP,
	OPT_STRICT_V1,
	OPT_THREADS,
	OPT_EXT_MAX_WRITE,
	OPT_ACTIVATED,
	OPT_LOG_LEVEL,
	OPT_SYSLOG,
	OPT_MAX_RUNNING_JOBS,
	OPT_JOB_WINDOW,
	OPT_JOB_RETENTION,
	OPT_JOB_RETENTION_COUNT,
	OPT_JOB_RETENTION_BYTES,
	OPT_SPOOL_DIR,
	OPT_PIDS,
	OPT_MEMORY,
	OPT_TMP_SIZE,
	OPT_NETWORK,
	OPT_SLIRP4NETNS,
	OPT_RUN,
	OPT_RUN_CWD,
	OPT_RUN_TIMEOUT,
	OPT_SOCKET,
	OPT_LOCK_FILE,
	OPT_MAX_CONNECTIONS,
	OPT_IDLE_TIMEOUT,
	OPT_REQUEST_TIMEOUT,
	OPT_WATCH_LIMIT,
	OPT_EVENTS_RING,
};

static const struct option options[] = {
	{"root", required_argument, NULL, OPT_ROOT},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"port", required_argument, NULL, OPT_PORT},
	{"port-file", required_argument, NULL, OPT_PORT_FILE},
	{"pid-file", required_argument, NULL, OPT_PID_FILE},
	{"token-file", required_argument, NULL, OPT_TOKEN_FILE},
	{"exec-user", required_argument, NULL, OPT_EXEC_USER},
	{"confine", required_argument, NULL, OPT_CONFINE},
	{"bwrap", required_argument, NULL, OPT_BWRAP},
	{"output-cap", required_argument, NULL, OPT_OUTPUT_CAP},
	{"strict-v1", no_argument, NULL, OPT_STRICT_V1},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"ext-max-write", required_argument, NULL, OPT_EXT_MAX_WRITE},
	{"activated", no_argument, NULL, OPT_ACTIVATED},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"syslog", no_argument, NULL, OPT_SYSLOG},
	{"max-running-jobs", required_argument, NULL, OPT_MAX_RUNNING_JOBS},
	{"job-window", required_argument, NULL, OPT_JOB_WINDOW},
	{"job-retention", required_argument, NULL, OPT_JOB_RETENTION},
	{"job-retention-count", required_argument, NULL,
	 OPT_JOB_RETENTION_COUNT},
	{"job-retention-bytes", required_argument, NULL,
	 OPT_JOB_RETENTION_BYTES},
	{"spool-dir", required_argument, NULL, OPT_SPOOL_DIR},
	{"pids", required_argument, NULL, OPT_PIDS},
	{"memory", required_argument, NULL, OPT_MEMORY},
	{"tmp-size", required_argument, NULL, OPT_TMP_SIZE},
	{"network", required_argument, NULL, OPT_NETWORK},
	{"slirp4netns", required_argument, NULL, OPT_SLIRP4NETNS},
	{"run", no_argument, NULL, OPT_RUN},
	{"run-cwd", required_argument, NULL, OPT_RUN_CWD},
	{"run-timeout", required_argument, NULL, OPT_RUN_TIMEOUT},
	{"socket", required_argument, NULL, OPT_SOCKET},
	{"lock-file", required_argument, NULL, OPT_LOCK_FILE},
	{"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
	{"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
	{"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
	{"watch-limit", required_argument, NULL, OPT_WATCH_LIMIT},
	{"events-ring", required_argument, NULL, OPT_EVENTS_RING},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fputs("usage: sandbox-agent --root DIR [options]\n"
	      "       sandbox-agent --root DIR [options] --run [--run-cwd DIR] "
	      "[--run-timeout MS] -- COMMAND [ARGS]\n"
	      "\n"
	      "  --root DIR              session root (ALIEN_SANDBOX_ROOT)\n"
	      "  --listen ADDR           address to listen on (127.0.0.1)\n"
	      "  --port N                port, 0 = any (ALIEN_SANDBOX_PORT, "
	      "8971)\n"
	      "  --port-file FILE        write the bound port here\n"
	      "  --socket PATH           listen on a Unix socket (mode 0600) "
	      "instead\n"
	      "  --lock-file FILE        hold a lock on FILE for the agent's "
	      "life\n"
	      "  --max-connections N     connections at once (512)\n"
	      "  --idle-timeout SECONDS  wait for a request line at most this "
	      "(60)\n"
	      "  --request-timeout SECONDS  receive a request's headers and "
	      "body\n"
	      "                          within this (60)\n"
	      "  --pid-file FILE         write the process id here\n"
	      "  --token-file FILE       per-boot credential "
	      "(SANDBOX_AGENT_TOKEN_FILE,\n"
	      "                          " DEFAULT_TOKEN_FILE ")\n"
	      "  --exec-user NAME|UID:GID  user for commands and files\n"
	      "                          (ALIEN_SANDBOX_EXEC_UID/_GID; root: "
	      "65534:65534)\n"
	      "  --confine auto|bwrap|none  command confinement (auto)\n"
	      "  --bwrap PATH            bubblewrap binary (" BWRAP_PATH ")\n"
	      "  --pids N                tasks of the sandbox's commands "
	      "(1024)\n"
	      "  --memory BYTES          memory of the sandbox's commands "
	      "(half "
	      "the RAM)\n"
	      "  --tmp-size BYTES        each command's /tmp and /dev/shm "
	      "(256M)\n"
	      "  --network user|none     the sandbox's network (user: "
	      "slirp4netns)\n"
	      "  --slirp4netns PATH      user-mode networking "
	      "(" SLIRP4NETNS_PATH ")\n"
	      "  --output-cap BYTES      kept output per stream "
	      "(ALIEN_SANDBOX_OUTPUT_CAP, 4M)\n"
	      "  --strict-v1             serve protocol v1 only, no file "
	      "extension\n"
	      "  --threads N             HTTP worker threads (max(4, 2 x "
	      "CPUs))\n"
	      "  --ext-max-write BYTES   largest extension write body (16M)\n"
	      "  --max-running-jobs N    jobs running at once (64)\n"
	      "  --job-window BYTES      output kept per flow-controlled job "
	      "(16M)\n"
	      "  --job-retention SECONDS how long a finished job is kept "
	      "(86400)\n"
	      "  --job-retention-count N finished jobs kept (1000)\n"
	      "  --job-retention-bytes BYTES  output kept by all jobs (1G)\n"
	      "  --spool-dir DIR         where job output spills (TMPDIR, "
	      "/tmp)\n"
	      "  --run -- COMMAND        run one command confined, pass its "
	      "output and exit\n"
	      "                          status through (--run-cwd, "
	      "--run-timeout 60000)\n"
	      "  --watch-limit N         directories the change events watch "
	      "at most\n"
	      "                          (none: fs.inotify.max_user_watches)\n"
	      "  --events-ring N         change events kept (65536)\n"
	      "  --activated             start activated\n"
	      "  --log-level LEVEL       error, warn, info (default) or debug\n"
	      "  --syslog                log to syslog instead of stderr\n"
	      "  -h, --help              this text\n"
	      "  -V, --version           the version\n",
	      f);
}

/* A decimal number in [lo, hi]. */
static int parse_uint(const char *s, unsigned long long lo,
		      unsigned long long hi, unsigned long long *out)
{
	unsigned long long v;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}

/* A byte count: decimal with an optional K, M or G (binary) suffix. */
static int parse_size(const char *s, unsigned long long lo,
		      unsigned long long hi, unsigned long long *out)
{
	unsigned long long v, mul = 1;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -ERANGE;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1ULL << 10;
		break;
	case 'm':
	case 'M':
		mul = 1ULL << 20;
		break;
	case 'g':
	case 'G':
		mul = 1ULL << 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end != '\0' && end[1] != '\0')
		return -EINVAL;
	if (v > hi / mul || v * mul < lo || v * mul > hi)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

static int parse_id(const char *s, bool group, unsigned long *out)
{
	unsigned long long v;

	if (parse_uint(s, 0, 0xfffffffeULL, &v) == 0) {
		*out = (unsigned long)v;
		return 0;
	}
	if (group) {
		struct group *gr = getgrnam(s);

		if (gr == NULL)
			return -ENOENT;
		*out = gr->gr_gid;
	} else {
		struct passwd *pw = getpwnam(s);

		if (pw == NULL)
			return -ENOENT;
		*out = pw->pw_uid;
	}
	return 0;
}

/* "NAME", "UID", "NAME:GROUP" or "UID:GID". A user alone takes its
 * primary group (its own number when it has no passwd entry). */
static int parse_exec_user(const char *spec, uid_t *uid, gid_t *gid)
{
	const char *colon = strchr(spec, ':');
	unsigned long u, g;
	char user[256];
	int rc;

	if (colon != NULL) {
		if ((size_t)(colon - spec) >= sizeof(user))
			return -ENAMETOOLONG;
		memcpy(user, spec, (size_t)(colon - spec));
		user[colon - spec] = '\0';
	} else {
		strlcpy_s(user, spec, sizeof(user));
	}
	rc = parse_id(user, false, &u);
	if (rc < 0)
		return rc;
	if (colon != NULL) {
		rc = parse_id(colon + 1, true, &g);
		if (rc < 0)
			return rc;
	} else {
		struct passwd *pw = getpwuid((uid_t)u);

		g = pw != NULL ? pw->pw_gid : u;
	}
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

static int make_boot_id(char out[40])
{
	unsigned char u[16];

	if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u))
		return -EIO;
	u[6] = (unsigned char)((u[6] & 0x0f) | 0x40); /* version 4 */
	u[8] = (unsigned char)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(out, 40,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		 u[10], u[11], u[12], u[13], u[14], u[15]);
	return 0;
}

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

struct cmdline {
	const char *root;
	const char *pid_file;
	const char *lock_file;
	const char *exec_user;
	bool exec_user_env;
	enum log_level level;
	bool use_syslog;
	bool run; /* --run: one command, then exit */
	const char *run_cwd;
	uint64_t run_timeout_ms;
};

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

static void parse_args(int argc, char **argv, struct agent_config *cfg,
		       struct cmdline *cl)
{
	unsigned long long v;
	const char *env;
	long cpus;
	int c;

	memset(cl, 0, sizeof(*cl));
	cl->level = LOG_LEVEL_INFO;
	cfg->listen_host = "127.0.0.1";
	cfg->port = DEFAULT_PORT;
	cfg->token_file = DEFAULT_TOKEN_FILE;
	cfg->confine = AGENT_CONFINE_AUTO;
	cfg->bwrap = BWRAP_PATH;
	cfg->output_cap = PROTO_DEFAULT_OUTPUT_CAP;
	cfg->ext_max_write = DEFAULT_EXT_MAX_WRITE;
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cfg->threads = cpus > 2 ? (unsigned)(2 * cpus) : 4;

	/* The environment first, so options override it. */
	cl->root = getenv("ALIEN_SANDBOX_ROOT");
	env = getenv("ALIEN_SANDBOX_PORT");
	if (env != NULL && *env != '\0') {
		if (parse_uint(env, 0, 65535, &v) < 0)
			die_usage("ALIEN_SANDBOX_PORT: bad port '%s'", env);
		cfg->port = (unsigned)v;
	}
	env = getenv("SANDBOX_AGENT_TOKEN_FILE");
	if (env != NULL && *env != '\0')
		cfg->token_file = env;
	env = getenv("ALIEN_SANDBOX_OUTPUT_CAP");
	if (env != NULL && *env != '\0') {
		if (parse_size(env, 0, 1ULL << 40, &v) < 0)
			die_usage("ALIEN_SANDBOX_OUTPUT_CAP: bad size '%s'",
				  env);
		cfg->output_cap = (size_t)v;
	}

	while ((c = getopt_long(argc, argv, "hV", options, NULL)) != -1) {
		switch (c) {
		case OPT_ROOT:
			cl->root = optarg;
			break;
		case OPT_LISTEN:
			cfg->listen_host = optarg;
			break;
		case OPT_PORT:
			if (parse_uint(optarg, 0, 65535, &v) < 0)
				die_usage("--port: bad port '%s'", optarg);
			cfg->port = (unsigned)v;
			break;
		case OPT_PORT_FILE:
			cfg->port_file = optarg;
			break;
		case OPT_PID_FILE:
			cl->pid_file = optarg;
			break;
		case OPT_TOKEN_FILE:
			cfg->token_file = optarg;
			break;
		case OPT_EXEC_USER:
			cl->exec_user = optarg;
			break;
		case OPT_CONFINE:
			if (strcmp(optarg, "auto") == 0)
				cfg->confine = AGENT_CONFINE_AUTO;
			else if (strcmp(optarg, "bwrap") == 0)
				cfg->confine = AGENT_CONFINE_BWRAP;
			else if (strcmp(optarg, "none") == 0)
				cfg->confine = AGENT_CONFINE_NONE;
			else
				die_usage("--confine: '%s' is not auto, bwrap "
					  "or none",
					  optarg);
			break;
		case OPT_BWRAP:
			cfg->bwrap = optarg;
			break;
		case OPT_OUTPUT_CAP:
			if (parse_size(optarg, 0, 1ULL << 40, &v) < 0)
				die_usage("--output-cap: bad size '%s'",
					  optarg);
			cfg->output_cap = (size_t)v;
			break;
		case OPT_STRICT_V1:
			cfg->strict_v1 = true;
			break;
		case OPT_THREADS:
			if (parse_uint(optarg, 1, 1024, &v) < 0)
				die_usage("--threads: '%s' is not 1 to 1024",
					  optarg);
			cfg->threads = (unsigned)v;
			break;
		case OPT_EXT_MAX_WRITE:
			if (parse_size(optarg, 1, MAX_EXT_WRITE, &v) < 0)
				die_usage("--ext-max-write: '%s' is not 1 to "
					  "1G",
					  optarg);
			cfg->ext_max_write = (size_t)v;
			break;
		case OPT_ACTIVATED:
			cfg->activated_at_start = true;
			break;
		case OPT_LOG_LEVEL:
			if (strcmp(optarg, "error") == 0)
				cl->level = LOG_LEVEL_ERROR;
			else if (strcmp(optarg, "warn") == 0)
				cl->level = LOG_LEVEL_WARN;
			else if (strcmp(optarg, "info") == 0)
				cl->level = LOG_LEVEL_INFO;
			else if (strcmp(optarg, "debug") == 0)
				cl->level = LOG_LEVEL_DEBUG;
			else
				die_usage("--log-level: '%s' is not error, "
					  "warn, info or debug",
					  optarg);
			break;
		case OPT_SYSLOG:
			cl->use_syslog = true;
			break;
		case OPT_MAX_RUNNING_JOBS:
			if (parse_uint(optarg, 1, 65536, &v) < 0)
				die_usage("--max-running-jobs: '%s' is not 1 "
					  "to 65536",
					  optarg);
			cfg->max_running_jobs = (unsigned)v;
			break;
		case OPT_JOB_WINDOW:
			if (parse_size(optarg, 1ULL << 20, 1ULL << 40, &v) < 0)
				die_usage("--job-window: '%s' is not 1M to "
					  "1024G",
					  optarg);
			cfg->job_window = v;
			break;
		case OPT_JOB_RETENTION:
			if (parse_uint(optarg, 1, 100ULL * 365 * 86400, &v) < 0)
				die_usage("--job-retention: '%s' is not a "
					  "number of seconds from 1",
					  optarg);
			cfg->job_retention_s = v;
			break;
		case OPT_JOB_RETENTION_COUNT:
			if (parse_uint(optarg, 1, 1000000, &v) < 0)
				die_usage(
					"--job-retention-count: '%s' is not 1 "
					"to 1000000",
					optarg);
			cfg->job_retention_count = (size_t)v;
			break;
		case OPT_JOB_RETENTION_BYTES:
			if (parse_size(optarg, 1, 1ULL << 50, &v) < 0)
				die_usage("--job-retention-bytes: bad size "
					  "'%s'",
					  optarg);
			cfg->job_retention_bytes = v;
			break;
		case OPT_SPOOL_DIR:
			cfg->spool_dir = optarg;
			break;
		case OPT_PIDS:
			if (parse_uint(optarg, SBX_MIN_PIDS, 4194304, &v) < 0)
				die_usage("--pids: '%s' is not %d to 4194304",
					  optarg, SBX_MIN_PIDS);
			cfg->pids_max = v;
			break;
		case OPT_MEMORY:
			if (parse_size(optarg, SBX_MIN_MEMORY, 1ULL << 50, &v) <
			    0)
				die_usage("--memory: '%s' is not a size from "
					  "16M",
					  optarg);
			cfg->memory_max = v;
			break;
		case OPT_TMP_SIZE:
			if (parse_size(optarg, SBX_MIN_TMP_SIZE, 1ULL << 50,
				       &v) < 0)
				die_usage("--tmp-size: '%s' is not a size from "
					  "1M",
					  optarg);
			cfg->tmp_size = v;
			break;
		case OPT_NETWORK:
			if (strcmp(optarg, "user") == 0)
				cfg->network = AGENT_NET_USER;
			else if (strcmp(optarg, "none") == 0)
				cfg->network = AGENT_NET_NONE;
			else
				die_usage("--network: '%s' is not user or none",
					  optarg);
			break;
		case OPT_SLIRP4NETNS:
			cfg->slirp4netns = optarg;
			break;
		case OPT_RUN:
			cl->run = true;
			break;
		case OPT_RUN_CWD:
			cl->run_cwd = optarg;
			break;
		case OPT_RUN_TIMEOUT:
			if (parse_uint(optarg, 1, 100ULL * 365 * 86400000, &v) <
			    0)
				die_usage("--run-timeout: '%s' is not a number "
					  "of milliseconds from 1",
					  optarg);
			cl->run_timeout_ms = v;
			break;
		case OPT_SOCKET:
			if (*optarg == '\0')
				die_usage("%s", "--socket: an empty path");
			cfg->socket_path = optarg;
			break;
		case OPT_LOCK_FILE:
			cl->lock_file = optarg;
			break;
		case OPT_MAX_CONNECTIONS:
			if (parse_uint(optarg, 1, 65536, &v) < 0)
				die_usage("--max-connections: '%s' is not 1 to "
					  "65536",
					  optarg);
			cfg->max_connections = (unsigned)v;
			break;
		case OPT_IDLE_TIMEOUT:
			if (parse_uint(optarg, 1, 86400, &v) < 0)
				die_usage("--idle-timeout: '%s' is not 1 to "
					  "86400 seconds",
					  optarg);
			cfg->idle_timeout_s = (unsigned)v;
			break;
		case OPT_REQUEST_TIMEOUT:
			if (parse_uint(optarg, 1, 86400, &v) < 0)
				die_usage("--request-timeout: '%s' is not 1 to "
					  "86400 seconds",
					  optarg);
			cfg->request_timeout_s = (unsigned)v;
			break;
		case OPT_WATCH_LIMIT:
			if (parse_uint(optarg, 1, 1ULL << 32, &v) < 0)
				die_usage("--watch-limit: '%s' is not 1 to "
					  "4294967296",
					  optarg);
			cfg->watch_limit = (size_t)v;
			break;
		case OPT_EVENTS_RING:
			if (parse_uint(optarg, AGENT_EVENTS_RING_MIN,
				       AGENT_EVENTS_RING_MAX, &v) < 0)
				die_usage("--events-ring: '%s' is not %u to %u",
					  optarg, AGENT_EVENTS_RING_MIN,
					  AGENT_EVENTS_RING_MAX);
			cfg->events_ring = (size_t)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("sandbox-agent %s (agent protocol v%d)\n",
			       PACKAGE_VERSION, PROTO_VERSION);
			exit(0);
		default:
			usage(stderr);
			exit(1);
		}
	}
	if (cl->run && optind >= argc)
		die_usage("%s",
			  "--run: the command to run is missing (after --)");
	if (!cl->run && optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (cl->run_timeout_ms == 0)
		cl->run_timeout_ms = 60000;
}

/* --run: the command's output goes where the agent's own does. */
static int run_output(void *ctx, enum proto_frame_type stream, uint64_t seq,
		      const unsigned char *p, size_t n)
{
	int fd = stream == PROTO_FRAME_STDERR ? 2 : 1;

	(void)ctx;
	(void)seq;
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 0; /* nobody reads: the command runs on */
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * --run: one command, confined and limited exactly as the agent's jobs
 * are (its own zygote, network and cgroup), its output passed through and
 * its exit status returned: 0 to 255 as the command's (128 + a signal),
 * 124 for the timeout, 125 when it could not be run or waited for, 126
 * for a working directory refused. The local provider's native sessions
 * run their commands this way.
 */
static int run_once(const struct agent *a, const struct cmdline *cl, char **cmd,
		    size_t cmdc)
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
 * Who commands run as, and who file access happens as. As root: the
 * given user (default nobody), never uid or gid 0. Otherwise the agent's
 * own user, since it cannot become anyone else.
 */
static void resolve_exec_user(struct agent_config *cfg,
			      const struct cmdline *cl)
{
	const char *env_uid = getenv("ALIEN_SANDBOX_EXEC_UID");
	const char *env_gid = getenv("ALIEN_SANDBOX_EXEC_GID");
	bool given = false;
	uid_t uid = NOBODY;
	gid_t gid = NOBODY;

	if (cl->exec_user != NULL) {
		if (parse_exec_user(cl->exec_user, &uid, &gid) < 0)
			die_usage("--exec-user: unknown user '%s'",
				  cl->exec_user);
		given = true;
	} else if ((env_uid != NULL && *env_uid != '\0') ||
		   (env_gid != NULL && *env_gid != '\0')) {
		unsigned long long v;

		if (env_uid == NULL ||
		    parse_uint(env_uid, 0, 0xfffffffeULL, &v) < 0)
			die_usage("ALIEN_SANDBOX_EXEC_UID: bad uid '%s'",
				  env_uid ? env_uid : "");
		uid = (uid_t)v;
		if (env_gid == NULL ||
		    parse_uint(env_gid, 0, 0xfffffffeULL, &v) < 0)
			die_usage("ALIEN_SANDBOX_EXEC_GID: bad gid '%s'",
				  env_gid ? env_gid : "");
		gid = (gid_t)v;
		given = true;
	}
	if (geteuid() == 0) {
		if (uid == 0 || gid == 0)
			die_usage("%s", "refusing to run commands as uid or "
					"gid 0");
		cfg->drop_privileges = true;
	} else {
		if (given && (uid != getuid() || gid != getgid()))
			die_usage("%s", "not running as root: commands run as "
					"the agent's own user, so --exec-user "
					"must be absent or name it");
		uid = getuid();
		gid = getgid();
		cfg->drop_privileges = false;
	}
	cfg->exec_uid = uid;
	cfg->exec_gid = gid;
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

int main(int argc, char **argv)
{
	static struct agent agent;
	struct agent *a = &agent;
	struct agent_config *cfg = &a->cfg;
	struct cmdline cl;
	char *root = NULL, num[32];
	struct stat st;
	sigset_t sigs;
	unsigned port = 0;
	int rc, sig;

	/* Internal: the process that starts confined commands (zygote.h). */
	if (argc > 1 && strcmp(argv[1], AGENT_ZYGOTE_ARG) == 0)
		return agent_zygote_main(argc, argv);
	parse_args(argc, argv, cfg, &cl);
	log_init("sandbox-agent", cl.level);
	if (cl.use_syslog)
		log_use_syslog(true);

	if (cl.root == NULL || *cl.root == '\0')
		die_usage("%s", "--root (or ALIEN_SANDBOX_ROOT) is required");
	root = realpath(cl.root, NULL);
	if (root == NULL || stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
		die_usage("the root '%s' is not a directory", cl.root);
	cfg->root = root;
	resolve_exec_user(cfg, &cl);
	if (cfg->confine == AGENT_CONFINE_BWRAP && access(cfg->bwrap, X_OK) < 0)
		die_usage("--confine bwrap: no usable bubblewrap at '%s'",
			  cfg->bwrap);

	/* Opened now, as whoever started the agent: what runs as the exec
	 * user reaches the root through this descriptor (the file routes,
	 * and the bind confine.h stages), never through the path, whose
	 * directories may be closed to that user. */
	a->root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (a->root_fd < 0)
		die_usage("cannot open the root '%s'", root);
	if (cl.run) {
		signal(SIGPIPE, SIG_IGN);
		rc = run_once(a, &cl, argv + optind, (size_t)(argc - optind));
		close(a->root_fd);
		free(root);
		return rc;
	}
	if (make_boot_id(a->boot_id) < 0)
		die_usage("%s", "no randomness for the boot id");
	atomic_init(&a->activated, cfg->activated_at_start);

	/* The lock first: a second agent for the same sandbox must not
	 * overwrite the first one's credential. */
	if (cl.lock_file != NULL) {
		pid_t holder = 0;

		rc = hold_lock(cl.lock_file, &holder);
		if (rc == -EBUSY)
			die_usage("another agent (pid %ld) holds the lock file "
				  "'%s'",
				  (long)holder, cl.lock_file);
		if (rc < 0)
			die_usage("cannot lock '%s': %s", cl.lock_file,
				  strerror(-rc));
	}
	raise_nofile(cfg);

	/* The credential: fresh every start, written before the port is
	 * published so whoever waits for the port can read it. */
	if (token_generate(a->token) < 0)
		die_usage("%s", "no randomness for the credential");
	rc = make_parents(cfg->token_file);
	if (rc == 0)
		rc = token_write_file(cfg->token_file, a->token);
	if (rc < 0) {
		fprintf(stderr,
			"sandbox-agent: cannot write the credential "
			"file '%s': %s\n",
			cfg->token_file, strerror(-rc));
		exit(1);
	}

	/* Signals are taken with sigwait below; block them before any
	 * thread starts so every thread inherits the mask (a command's
	 * process must reset it before exec). SIGPIPE: a client that goes
	 * away is an error return, not a death. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	rc = agent_jobs_new(a, &a->jobs);
	if (rc < 0) {
		fprintf(stderr,
			"sandbox-agent: cannot start the job registry: "
			"%s\n",
			strerror(-rc));
		exit(1);
	}
	rc = agent_events_new(a, &a->events);
	if (rc < 0) {
		fprintf(stderr,
			"sandbox-agent: cannot make the change events: %s\n",
			strerror(-rc));
		exit(1);
	}
	rc = agent_http_start(a, &port);
	if (rc == -EADDRINUSE && cfg->socket_path != NULL) {
		fprintf(stderr, "sandbox-agent: socket '%s' is in use\n",
			cfg->socket_path);
		exit(1);
	}
	if (rc == -EADDRINUSE) {
		fprintf(stderr, "sandbox-agent: port %u is in use\n",
			cfg->port);
		exit(1);
	}
	if (rc < 0 && cfg->socket_path != NULL) {
		fprintf(stderr,
			"sandbox-agent: cannot listen on socket '%s': %s\n",
			cfg->socket_path, strerror(-rc));
		exit(1);
	}
	if (rc < 0) {
		fprintf(stderr,
			"sandbox-agent: cannot listen on %s port %u: "
			"%s\n",
			cfg->listen_host, cfg->port, strerror(-rc));
		exit(1);
	}
	if (cl.pid_file != NULL) {
		snprintf(num, sizeof(num), "%ld\n", (long)getpid());
		if (file_write_atomic(cl.pid_file, num, strlen(num), 0644) < 0)
			log_warn("cannot write the pid file '%s'", cl.pid_file);
	}
	if (cfg->port_file != NULL && cfg->socket_path == NULL) {
		snprintf(num, sizeof(num), "%u\n", port);
		rc = file_write_atomic(cfg->port_file, num, strlen(num), 0644);
		if (rc < 0) {
			fprintf(stderr,
				"sandbox-agent: cannot write the port "
				"file '%s': %s\n",
				cfg->port_file, strerror(-rc));
			agent_http_stop(a);
			agent_events_free(a->events);
			agent_jobs_free(a->jobs);
			exit(1);
		}
	}
	if (cfg->socket_path != NULL)
		log_info("listening on socket %s, root %s, boot %s%s",
			 cfg->socket_path, root, a->boot_id,
			 cfg->strict_v1 ? ", protocol v1 only" : "");
	else
		log_info("listening on %s port %u, root %s, boot %s%s",
			 cfg->listen_host, port, root, a->boot_id,
			 cfg->strict_v1 ? ", protocol v1 only" : "");

	for (;;) {
		struct timespec ts = {60, 0};

		sig = sigtimedwait(&sigs, NULL, &ts);
		if (sig == SIGTERM || sig == SIGINT)
			break;
	}
	log_info("stopping on signal %d", sig);
	agent_http_stop(a);
	agent_events_free(a->events);
	agent_jobs_free(a->jobs);
	if (cl.pid_file != NULL)
		unlink(cl.pid_file);
	if (cfg->port_file != NULL && cfg->socket_path == NULL)
		unlink(cfg->port_file);
	close(a->root_fd);
	token_wipe(a->token, sizeof(a->token));
	free(root);
	return 0;
}
