/* SPDX-License-Identifier: MIT */
/*
 * options: see options.h. Most options are a number, a size, a string, a
 * flag or one of a few words stored in one field: the table below says
 * which field, in what range, and how a wrong value is worded; the few
 * others are handled by name.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/options.h"
#include "agent/watch.h"
#include "common/limits.h"
#include "common/numarg.h"
#include "common/proto.h"
#include "common/xalloc.h"

#define MAX_EXT_WRITE (1UL << 30)
#define SECONDS_100Y (100ULL * 365 * 86400)

enum kind {
	K_STR, /* the argument itself */
	K_PATH, /* the argument, not empty */
	K_FLAG, /* true */
	K_UINT, /* a decimal number in [lo, hi] */
	K_SIZE, /* a byte size in [lo, hi] */
	K_WORD, /* one of words[], stored as its index's value */
};

struct word {
	const char *name;
	int value;
};

/* clang-format off */
static const struct word confine_words[] = {
	{"auto", AGENT_CONFINE_AUTO}, {"bwrap", AGENT_CONFINE_BWRAP},
	{"none", AGENT_CONFINE_NONE}, {NULL, 0},
};
static const struct word network_words[] = {
	{"user", AGENT_NET_USER}, {"none", AGENT_NET_NONE}, {NULL, 0},
};
static const struct word level_words[] = {
	{"error", LOG_LEVEL_ERROR}, {"warn", LOG_LEVEL_WARN},
	{"info", LOG_LEVEL_INFO}, {"debug", LOG_LEVEL_DEBUG}, {NULL, 0},
};
/* clang-format on */

struct spec {
	const char *name;
	enum kind kind;
	size_t off, size; /* the field in struct agent_options */
	unsigned long long lo, hi;
	const struct word *words;
	/* A wrong value is "--NAME: 'VALUE' is not WANT" ("LO to HI" when
	 * NULL), or "--NAME: BAD 'VALUE'" when bad is set. */
	const char *want, *bad;
};

#define F(field)                               \
	offsetof(struct agent_options, field), \
		sizeof(((struct agent_options *)0)->field)
#define STR(name, field)                                      \
	{                                                     \
		name, K_STR, F(field), 0, 0, NULL, NULL, NULL \
	}
#define FLAG(name, field)                                      \
	{                                                      \
		name, K_FLAG, F(field), 0, 0, NULL, NULL, NULL \
	}
#define UINT(name, field, lo, hi, want)                          \
	{                                                        \
		name, K_UINT, F(field), lo, hi, NULL, want, NULL \
	}
#define SIZE(name, field, lo, hi, want)                          \
	{                                                        \
		name, K_SIZE, F(field), lo, hi, NULL, want, NULL \
	}
#define WORD(name, field, words, want)                          \
	{                                                       \
		name, K_WORD, F(field), 0, 0, words, want, NULL \
	}

/* The options getopt_long knows, in this order, ids from OPT_BASE. */
static const struct spec specs[] = {
	STR("root", root),
	STR("listen", cfg.listen_host),
	{"port", K_UINT, F(cfg.port), 0, 65535, NULL, NULL, "bad port"},
	STR("port-file", cfg.port_file),
	STR("pid-file", pid_file),
	STR("token-file", cfg.token_file),
	STR("exec-user", exec_user),
	WORD("confine", cfg.confine, confine_words, "auto, bwrap or none"),
	STR("bwrap", cfg.bwrap),
	{"output-cap", K_SIZE, F(cfg.output_cap), 0, 1ULL << 40, NULL, NULL,
	 "bad size"},
	FLAG("strict-v1", cfg.strict_v1),
	UINT("threads", cfg.threads, 1, 1024, NULL),
	SIZE("ext-max-write", cfg.ext_max_write, 1, MAX_EXT_WRITE, "1 to 1G"),
	FLAG("activated", cfg.activated_at_start),
	WORD("log-level", level, level_words, "error, warn, info or debug"),
	FLAG("syslog", use_syslog),
	UINT("max-running-jobs", cfg.max_running_jobs, 1, 65536, NULL),
	SIZE("job-window", cfg.job_window, 1ULL << 20, 1ULL << 40,
	     "1M to 1024G"),
	UINT("job-retention", cfg.job_retention_s, 1, SECONDS_100Y,
	     "a number of seconds from 1"),
	UINT("job-retention-count", cfg.job_retention_count, 1, 1000000, NULL),
	{"job-retention-bytes", K_SIZE, F(cfg.job_retention_bytes), 1,
	 1ULL << 50, NULL, NULL, "bad size"},
	STR("spool-dir", cfg.spool_dir),
	UINT("pids", cfg.pids_max, SBX_MIN_PIDS, 4194304, NULL),
	SIZE("memory", cfg.memory_max, SBX_MIN_MEMORY, 1ULL << 50,
	     "a size from 16M"),
	SIZE("tmp-size", cfg.tmp_size, SBX_MIN_TMP_SIZE, 1ULL << 50,
	     "a size from 1M"),
	WORD("network", cfg.network, network_words, "user or none"),
	STR("slirp4netns", cfg.slirp4netns),
	FLAG("run", run),
	STR("run-cwd", run_cwd),
	UINT("run-timeout", run_timeout_ms, 1, SECONDS_100Y * 1000,
	     "a number of milliseconds from 1"),
	{"socket", K_PATH, F(cfg.socket_path), 0, 0, NULL, NULL, NULL},
	STR("lock-file", lock_file),
	UINT("max-connections", cfg.max_connections, 1, 65536, NULL),
	UINT("idle-timeout", cfg.idle_timeout_s, 1, 86400,
	     "1 to 86400 seconds"),
	UINT("request-timeout", cfg.request_timeout_s, 1, 86400,
	     "1 to 86400 seconds"),
	UINT("watch-limit", cfg.watch_limit, 1, 1ULL << 32, NULL),
	UINT("events-ring", cfg.events_ring, AGENT_EVENTS_RING_MIN,
	     AGENT_EVENTS_RING_MAX, NULL),
};

#define NSPECS (sizeof(specs) / sizeof(specs[0]))
#define OPT_BASE 256

/* Store v in a field of size bytes (an unsigned, size_t, uint64_t, bool
 * or enum). */
static void store(void *field, size_t size, unsigned long long v)
{
	uint64_t u64 = v;
	uint32_t u32 = (uint32_t)v;
	bool b = v != 0;

	if (size == sizeof(u64))
		memcpy(field, &u64, size);
	else if (size == sizeof(u32))
		memcpy(field, &u32, size);
	else
		memcpy(field, &b, sizeof(b));
}

/* Take arg for spec sp: 0, or -EINVAL with err set. */
static int take(const struct spec *sp, const char *arg, struct agent_options *o,
		char *err, size_t errsz)
{
	void *field = (char *)o + sp->off;
	unsigned long long v = 0;
	size_t i;
	int rc = 0;

	switch (sp->kind) {
	case K_PATH:
		if (*arg == '\0') {
			snprintf(err, errsz, "--%s: an empty path", sp->name);
			return -EINVAL;
		}
		/* fall through */
	case K_STR:
		memcpy(field, &arg, sizeof(arg));
		return 0;
	case K_FLAG:
		store(field, sp->size, 1);
		return 0;
	case K_UINT:
		rc = numarg_uint(arg, sp->lo, sp->hi, &v);
		break;
	case K_SIZE:
		rc = numarg_size(arg, sp->lo, sp->hi, &v);
		break;
	case K_WORD:
		rc = -EINVAL;
		for (i = 0; sp->words[i].name != NULL; i++) {
			if (strcmp(arg, sp->words[i].name) == 0) {
				v = (unsigned long long)sp->words[i].value;
				rc = 0;
			}
		}
		break;
	}
	if (rc == 0) {
		store(field, sp->size, v);
		return 0;
	}
	if (sp->bad != NULL)
		snprintf(err, errsz, "--%s: %s '%s'", sp->name, sp->bad, arg);
	else if (sp->want != NULL)
		snprintf(err, errsz, "--%s: '%s' is not %s", sp->name, arg,
			 sp->want);
	else
		snprintf(err, errsz, "--%s: '%s' is not %llu to %llu", sp->name,
			 arg, sp->lo, sp->hi);
	return -EINVAL;
}

static void defaults(struct agent_options *o)
{
	struct agent_config *cfg = &o->cfg;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(o, 0, sizeof(*o));
	o->level = LOG_LEVEL_INFO;
	cfg->listen_host = "127.0.0.1";
	cfg->port = AGENT_DEFAULT_PORT;
	cfg->token_file = AGENT_DEFAULT_TOKEN_FILE;
	cfg->confine = AGENT_CONFINE_AUTO;
	cfg->bwrap = BWRAP_PATH;
	cfg->output_cap = PROTO_DEFAULT_OUTPUT_CAP;
	cfg->ext_max_write = AGENT_DEFAULT_EXT_MAX_WRITE;
	cfg->threads = cpus > 2 ? (unsigned)(2 * cpus) : 4;
}

/* The original agent's environment, before the options. */
static int from_env(struct agent_options *o, char *err, size_t errsz)
{
	const char *env;
	unsigned long long v;

	o->root = getenv("ALIEN_SANDBOX_ROOT");
	env = getenv("ALIEN_SANDBOX_PORT");
	if (env != NULL && *env != '\0') {
		if (numarg_uint(env, 0, 65535, &v) < 0) {
			snprintf(err, errsz,
				 "ALIEN_SANDBOX_PORT: bad port '%s'", env);
			return -EINVAL;
		}
		o->cfg.port = (unsigned)v;
	}
	env = getenv("SANDBOX_AGENT_TOKEN_FILE");
	if (env != NULL && *env != '\0')
		o->cfg.token_file = env;
	env = getenv("ALIEN_SANDBOX_OUTPUT_CAP");
	if (env != NULL && *env != '\0') {
		if (numarg_size(env, 0, 1ULL << 40, &v) < 0) {
			snprintf(err, errsz,
				 "ALIEN_SANDBOX_OUTPUT_CAP: bad size '%s'",
				 env);
			return -EINVAL;
		}
		o->cfg.output_cap = (size_t)v;
	}
	return 0;
}

int agent_options_parse(int argc, char **argv, struct agent_options *o,
			char *err, size_t errsz)
{
	struct option longs[NSPECS + 3];
	size_t i;
	int c, rc;

	err[0] = '\0';
	defaults(o);
	rc = from_env(o, err, errsz);
	if (rc < 0)
		return rc;
	for (i = 0; i < NSPECS; i++)
		longs[i] = (struct option){specs[i].name,
					   specs[i].kind == K_FLAG
						   ? no_argument
						   : required_argument,
					   NULL, OPT_BASE + (int)i};
	longs[i++] = (struct option){"help", no_argument, NULL, 'h'};
	longs[i++] = (struct option){"version", no_argument, NULL, 'V'};
	longs[i] = (struct option){NULL, 0, NULL, 0};
	optind = 0; /* a fresh scan, whoever parsed before */
	while ((c = getopt_long(argc, argv, "hV", longs, NULL)) != -1) {
		if (c == 'h')
			return AGENT_OPTS_HELP;
		if (c == 'V')
			return AGENT_OPTS_VERSION;
		if (c < OPT_BASE || c >= OPT_BASE + (int)NSPECS)
			return -EINVAL; /* getopt said what */
		rc = take(&specs[c - OPT_BASE], optarg, o, err, errsz);
		if (rc < 0)
			return rc;
	}
	if (o->run && optind >= argc) {
		snprintf(err, errsz,
			 "--run: the command to run is missing (after --)");
		return -EINVAL;
	}
	if (!o->run && optind < argc) {
		snprintf(err, errsz, "unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	o->cmd = optind;
	if (o->run_timeout_ms == 0)
		o->run_timeout_ms = AGENT_DEFAULT_RUN_TIMEOUT_MS;
	return AGENT_OPTS_SERVE;
}

static int parse_id(const char *s, bool group, unsigned long *out)
{
	unsigned long long v;

	if (numarg_uint(s, 0, 0xfffffffeULL, &v) == 0) {
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

/* ALIEN_SANDBOX_EXEC_UID and _GID: both numbers. */
static int env_ids(const char *env_uid, const char *env_gid, uid_t *uid,
		   gid_t *gid, char *err, size_t errsz)
{
	unsigned long long v;

	if (env_uid == NULL || numarg_uint(env_uid, 0, 0xfffffffeULL, &v) < 0) {
		snprintf(err, errsz, "ALIEN_SANDBOX_EXEC_UID: bad uid '%s'",
			 env_uid ? env_uid : "");
		return -EINVAL;
	}
	*uid = (uid_t)v;
	if (env_gid == NULL || numarg_uint(env_gid, 0, 0xfffffffeULL, &v) < 0) {
		snprintf(err, errsz, "ALIEN_SANDBOX_EXEC_GID: bad gid '%s'",
			 env_gid ? env_gid : "");
		return -EINVAL;
	}
	*gid = (gid_t)v;
	return 0;
}

int agent_options_exec_user(const char *exec_user, struct agent_config *cfg,
			    uid_t euid, uid_t uid, gid_t gid, char *err,
			    size_t errsz)
{
	const char *env_uid = getenv("ALIEN_SANDBOX_EXEC_UID");
	const char *env_gid = getenv("ALIEN_SANDBOX_EXEC_GID");
	uid_t u = AGENT_NOBODY;
	gid_t g = AGENT_NOBODY;
	bool given = false;

	if (exec_user != NULL) {
		if (parse_exec_user(exec_user, &u, &g) < 0) {
			snprintf(err, errsz, "--exec-user: unknown user '%s'",
				 exec_user);
			return -EINVAL;
		}
		given = true;
	} else if ((env_uid != NULL && *env_uid != '\0') ||
		   (env_gid != NULL && *env_gid != '\0')) {
		if (env_ids(env_uid, env_gid, &u, &g, err, errsz) < 0)
			return -EINVAL;
		given = true;
	}
	if (euid == 0) {
		if (u == 0 || g == 0) {
			snprintf(err, errsz,
				 "refusing to run commands as uid or gid 0");
			return -EINVAL;
		}
		cfg->drop_privileges = true;
	} else {
		if (given && (u != uid || g != gid)) {
			snprintf(err, errsz,
				 "not running as root: commands run as the "
				 "agent's own user, so --exec-user must be "
				 "absent or name it");
			return -EINVAL;
		}
		u = uid;
		g = gid;
		cfg->drop_privileges = false;
	}
	cfg->exec_uid = u;
	cfg->exec_gid = g;
	return 0;
}

void agent_options_usage(FILE *f)
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
	      "                          " AGENT_DEFAULT_TOKEN_FILE ")\n"
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
