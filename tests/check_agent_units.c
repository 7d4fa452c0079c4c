/* SPDX-License-Identifier: MIT */
/*
 * The agent's modules that need no running agent: its command line and
 * environment (options.h, man/sandbox-agent.8), who its commands run as,
 * the route table (routes.h), and the number arguments of src/common
 * (numarg.h).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/options.h"
#include "agent/routes.h"
#include "agent/watch.h"
#include "common/numarg.h"
#include "common/proto.h"
#include "tests/agent_helpers.h"
#include "tests/tcase_table.h"
#include "tests/check_suites.h"

static const char *const env_names[] = {
	"ALIEN_SANDBOX_ROOT",	    "ALIEN_SANDBOX_PORT",
	"ALIEN_SANDBOX_OUTPUT_CAP", "SANDBOX_AGENT_TOKEN_FILE",
	"ALIEN_SANDBOX_EXEC_UID",   "ALIEN_SANDBOX_EXEC_GID",
};

static void clear_env(void)
{
	size_t i;

	for (i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
		unsetenv(env_names[i]);
}

/* Parse "sandbox-agent" and the NULL-terminated args; the outcome. */
static int parse(struct agent_options *o, char *err, size_t errsz, ...)
{
	char *argv[64];
	int argc = 0;
	va_list ap;
	char *a;

	argv[argc++] = (char *)"sandbox-agent";
	va_start(ap, errsz);
	while ((a = va_arg(ap, char *)) != NULL && argc < 63)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return agent_options_parse(argc, argv, o, err, errsz);
}

/* The option (one argument) is refused with exactly want. */
static void refused(const char *opt, const char *arg, const char *want)
{
	struct agent_options o;
	char err[256];

	ck_assert_int_eq(parse(&o, err, sizeof(err), opt, arg, (char *)NULL),
			 -EINVAL);
	ck_assert_str_eq(err, want);
}

START_TEST(options_defaults)
{
	struct agent_options o;
	char err[256];

	ck_assert_int_eq(parse(&o, err, sizeof(err), (char *)NULL),
			 AGENT_OPTS_SERVE);
	ck_assert_str_eq(err, "");
	ck_assert_ptr_null(o.root);
	ck_assert_str_eq(o.cfg.listen_host, "127.0.0.1");
	ck_assert_uint_eq(o.cfg.port, AGENT_DEFAULT_PORT);
	ck_assert_str_eq(o.cfg.token_file, AGENT_DEFAULT_TOKEN_FILE);
	ck_assert_int_eq(o.cfg.confine, AGENT_CONFINE_AUTO);
	ck_assert_int_eq(o.cfg.network, AGENT_NET_USER);
	ck_assert_uint_eq(o.cfg.output_cap, PROTO_DEFAULT_OUTPUT_CAP);
	ck_assert_uint_eq(o.cfg.ext_max_write, AGENT_DEFAULT_EXT_MAX_WRITE);
	ck_assert_uint_ge(o.cfg.threads, 4);
	ck_assert_int_eq(o.level, LOG_LEVEL_INFO);
	ck_assert(!o.run && !o.use_syslog && !o.cfg.strict_v1);
	ck_assert_uint_eq(o.run_timeout_ms, AGENT_DEFAULT_RUN_TIMEOUT_MS);
	/* 0 takes the module's own default */
	ck_assert_uint_eq(o.cfg.max_connections, 0);
	ck_assert_uint_eq(o.cfg.events_ring, 0);
}
END_TEST

START_TEST(options_each_kind)
{
	struct agent_options o;
	char err[256];

	ck_assert_int_eq(parse(&o, err, sizeof(err), "--root", "/r", "--port",
			       "0", "--threads", "8", "--output-cap", "4K",
			       "--job-window", "2M", "--confine", "none",
			       "--network", "none", "--log-level", "debug",
			       "--strict-v1", "--activated", "--syslog",
			       "--socket", "/run/a.sock", "--events-ring", "16",
			       "--watch-limit", "4294967296", "--pids", "16",
			       "--idle-timeout", "5", "--spool-dir", "/sp",
			       (char *)NULL),
			 AGENT_OPTS_SERVE);
	ck_assert_str_eq(o.root, "/r");
	ck_assert_uint_eq(o.cfg.port, 0);
	ck_assert_uint_eq(o.cfg.threads, 8);
	ck_assert_uint_eq(o.cfg.output_cap, 4096);
	ck_assert_uint_eq(o.cfg.job_window, 2ULL << 20);
	ck_assert_int_eq(o.cfg.confine, AGENT_CONFINE_NONE);
	ck_assert_int_eq(o.cfg.network, AGENT_NET_NONE);
	ck_assert_int_eq(o.level, LOG_LEVEL_DEBUG);
	ck_assert(o.cfg.strict_v1 && o.cfg.activated_at_start && o.use_syslog);
	ck_assert_str_eq(o.cfg.socket_path, "/run/a.sock");
	ck_assert_uint_eq(o.cfg.events_ring, AGENT_EVENTS_RING_MIN);
	ck_assert_uint_eq(o.cfg.watch_limit, 1ULL << 32);
	ck_assert_uint_eq(o.cfg.pids_max, 16);
	ck_assert_uint_eq(o.cfg.idle_timeout_s, 5);
	ck_assert_str_eq(o.cfg.spool_dir, "/sp");
}
END_TEST

START_TEST(options_refused_as_worded)
{
	refused("--port", "70000", "--port: bad port '70000'");
	refused("--output-cap", "4T", "--output-cap: bad size '4T'");
	refused("--threads", "0", "--threads: '0' is not 1 to 1024");
	refused("--pids", "15", "--pids: '15' is not 16 to 4194304");
	refused("--events-ring", "15",
		"--events-ring: '15' is not 16 to 1048576");
	refused("--memory", "1M", "--memory: '1M' is not a size from 16M");
	refused("--ext-max-write", "2G",
		"--ext-max-write: '2G' is not 1 to 1G");
	refused("--idle-timeout", "86401",
		"--idle-timeout: '86401' is not 1 to 86400 seconds");
	refused("--confine", "maybe",
		"--confine: 'maybe' is not auto, bwrap or none");
	refused("--log-level", "loud",
		"--log-level: 'loud' is not error, warn, info or debug");
	refused("--socket", "", "--socket: an empty path");
	refused("--job-retention", "x",
		"--job-retention: 'x' is not a number of seconds from 1");
}
END_TEST

START_TEST(options_environment)
{
	struct agent_options o;
	char err[256];

	setenv("ALIEN_SANDBOX_ROOT", "/env-root", 1);
	setenv("ALIEN_SANDBOX_PORT", "1234", 1);
	setenv("ALIEN_SANDBOX_OUTPUT_CAP", "2M", 1);
	setenv("SANDBOX_AGENT_TOKEN_FILE", "/env-token", 1);
	ck_assert_int_eq(parse(&o, err, sizeof(err), (char *)NULL),
			 AGENT_OPTS_SERVE);
	ck_assert_str_eq(o.root, "/env-root");
	ck_assert_uint_eq(o.cfg.port, 1234);
	ck_assert_uint_eq(o.cfg.output_cap, 2UL << 20);
	ck_assert_str_eq(o.cfg.token_file, "/env-token");
	/* the options win */
	ck_assert_int_eq(parse(&o, err, sizeof(err), "--port", "99", "--root",
			       "/opt-root", (char *)NULL),
			 AGENT_OPTS_SERVE);
	ck_assert_uint_eq(o.cfg.port, 99);
	ck_assert_str_eq(o.root, "/opt-root");
	setenv("ALIEN_SANDBOX_PORT", "port", 1);
	ck_assert_int_eq(parse(&o, err, sizeof(err), (char *)NULL), -EINVAL);
	ck_assert_str_eq(err, "ALIEN_SANDBOX_PORT: bad port 'port'");
	clear_env();
}
END_TEST

START_TEST(options_run_help_and_the_rest)
{
	struct agent_options o;
	char err[256];

	ck_assert_int_eq(parse(&o, err, sizeof(err), "--run", "--run-timeout",
			       "5", "--", "ls", "-l", (char *)NULL),
			 AGENT_OPTS_SERVE);
	ck_assert(o.run);
	ck_assert_uint_eq(o.run_timeout_ms, 5);
	ck_assert_int_eq(o.cmd, 5);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "--run", (char *)NULL),
			 -EINVAL);
	ck_assert_str_eq(err,
			 "--run: the command to run is missing (after --)");
	ck_assert_int_eq(parse(&o, err, sizeof(err), "extra", (char *)NULL),
			 -EINVAL);
	ck_assert_str_eq(err, "unexpected argument 'extra'");
	/* getopt says what it does not know; the caller prints the usage */
	ck_assert_int_eq(
		parse(&o, err, sizeof(err), "--frobnicate", (char *)NULL),
		-EINVAL);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(parse(&o, err, sizeof(err), "-h", (char *)NULL),
			 AGENT_OPTS_HELP);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "--version", (char *)NULL),
			 AGENT_OPTS_VERSION);
}
END_TEST

START_TEST(exec_user_as_root_and_not)
{
	struct agent_config cfg;
	char err[256];

	memset(&cfg, 0, sizeof(cfg));
	ck_assert_int_eq(
		agent_options_exec_user(NULL, &cfg, 0, 0, 0, err, sizeof(err)),
		0);
	ck_assert_uint_eq(cfg.exec_uid, AGENT_NOBODY);
	ck_assert_uint_eq(cfg.exec_gid, AGENT_NOBODY);
	ck_assert(cfg.drop_privileges);
	ck_assert_int_eq(agent_options_exec_user("1234:5678", &cfg, 0, 0, 0,
						 err, sizeof(err)),
			 0);
	ck_assert_uint_eq(cfg.exec_uid, 1234);
	ck_assert_uint_eq(cfg.exec_gid, 5678);
	ck_assert_int_eq(
		agent_options_exec_user("0:5", &cfg, 0, 0, 0, err, sizeof(err)),
		-EINVAL);
	ck_assert_str_eq(err, "refusing to run commands as uid or gid 0");
	ck_assert_int_eq(agent_options_exec_user("no-such-user-here", &cfg, 0,
						 0, 0, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "--exec-user: unknown user 'no-such-user-here'");

	/* not root: its own ids, which --exec-user may only repeat */
	ck_assert_int_eq(agent_options_exec_user(NULL, &cfg, 1000, 1000, 1001,
						 err, sizeof(err)),
			 0);
	ck_assert_uint_eq(cfg.exec_uid, 1000);
	ck_assert_uint_eq(cfg.exec_gid, 1001);
	ck_assert(!cfg.drop_privileges);
	ck_assert_int_eq(agent_options_exec_user("1000:1001", &cfg, 1000, 1000,
						 1001, err, sizeof(err)),
			 0);
	ck_assert_int_eq(agent_options_exec_user("1234", &cfg, 1000, 1000, 1001,
						 err, sizeof(err)),
			 -EINVAL);

	/* the original agent's environment */
	setenv("ALIEN_SANDBOX_EXEC_UID", "77", 1);
	setenv("ALIEN_SANDBOX_EXEC_GID", "88", 1);
	ck_assert_int_eq(
		agent_options_exec_user(NULL, &cfg, 0, 0, 0, err, sizeof(err)),
		0);
	ck_assert_uint_eq(cfg.exec_uid, 77);
	ck_assert_uint_eq(cfg.exec_gid, 88);
	unsetenv("ALIEN_SANDBOX_EXEC_GID");
	ck_assert_int_eq(
		agent_options_exec_user(NULL, &cfg, 0, 0, 0, err, sizeof(err)),
		-EINVAL);
	ck_assert_str_eq(err, "ALIEN_SANDBOX_EXEC_GID: bad gid ''");
	clear_env();
}
END_TEST

START_TEST(routes_one_table)
{
	const struct agent_route *rt;
	char allow[64];
	bool known;

	rt = agent_route_find("GET", "/v1/health", false, &known, allow,
			      sizeof(allow));
	ck_assert_ptr_nonnull(rt);
	ck_assert(rt->flags & AGENT_RT_PUBLIC);
	ck_assert_ptr_eq(rt->fn, agent_route_health);
	/* a GET route answers HEAD */
	rt = agent_route_find("HEAD", "/v1/files", false, &known, allow,
			      sizeof(allow));
	ck_assert_ptr_eq(rt->fn, agent_route_files_get);
	/* the wrong method: the path is known, Allow lists its methods */
	rt = agent_route_find("DELETE", "/v1/files", false, &known, allow,
			      sizeof(allow));
	ck_assert_ptr_null(rt);
	ck_assert(known);
	ck_assert_str_eq(allow, "GET, HEAD, PUT");
	rt = agent_route_find("GET", "/v1/nothing", false, &known, allow,
			      sizeof(allow));
	ck_assert(rt == NULL && !known);
	ck_assert_str_eq(allow, "");
	/* the extension: one handler per operation, none with strict v1 */
	rt = agent_route_find("POST", "/sandboxfs/v1/rename", false, &known,
			      allow, sizeof(allow));
	ck_assert_ptr_eq(rt->fn, agent_route_ext_meta);
	ck_assert(rt->flags & AGENT_RT_JSON);
	rt = agent_route_find("GET", "/sandboxfs/v1/stat", false, &known, allow,
			      sizeof(allow));
	ck_assert_ptr_eq(rt->fn, agent_route_ext_stat);
	ck_assert(rt->flags & AGENT_RT_NO_HEAD);
	rt = agent_route_find("GET", "/sandboxfs/v1/stat", true, &known, allow,
			      sizeof(allow));
	ck_assert(rt == NULL && !known);
	/* an Allow list cut to fit its buffer stays a string */
	rt = agent_route_find("DELETE", "/v1/files", false, &known, allow, 6);
	ck_assert_str_eq(allow, "GET, ");
}
END_TEST

START_TEST(number_arguments)
{
	unsigned long long v = 0;

	ck_assert_int_eq(numarg_uint("42", 0, 100, &v), 0);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(numarg_uint("101", 0, 100, &v), -ERANGE);
	ck_assert_int_eq(numarg_uint("4x", 0, 100, &v), -ERANGE);
	ck_assert_int_eq(numarg_uint("-1", 0, 100, &v), -EINVAL);
	ck_assert_int_eq(numarg_uint(NULL, 0, 100, &v), -EINVAL);
	ck_assert_int_eq(numarg_size("3k", 0, 1ULL << 40, &v), 0);
	ck_assert_uint_eq(v, 3072);
	ck_assert_int_eq(numarg_size("2G", 0, 1ULL << 40, &v), 0);
	ck_assert_uint_eq(v, 2ULL << 30);
	ck_assert_int_eq(numarg_size("1KB", 0, 1ULL << 40, &v), -EINVAL);
	ck_assert_int_eq(numarg_size("1T", 0, 1ULL << 40, &v), -EINVAL);
	ck_assert_int_eq(numarg_size("2M", 0, 1ULL << 20, &v), -ERANGE);
	ck_assert_int_eq(numarg_size("1M", 2ULL << 20, 1ULL << 40, &v),
			 -ERANGE);
}
END_TEST

void agent_units_cases(Suite *s)
{
	TCASE_TABLE(s, "options", clear_env, clear_env, 0, options_defaults,
		    options_each_kind, options_refused_as_worded,
		    options_environment, options_run_help_and_the_rest,
		    exec_user_as_root_and_not);
	TCASE_TABLE(s, "tables", NULL, NULL, 0, routes_one_table,
		    number_arguments);
}
