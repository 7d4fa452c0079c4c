/* SPDX-License-Identifier: MIT */
/*
 * options: sandbox-agent's command line (man/sandbox-agent.8) and the
 * ALIEN_SANDBOX_* environment of the original agent, turned into the
 * agent's configuration (agent.h) and what main.c does with the rest.
 *
 * Nothing here exits, prints or touches the agent: the caller reports an
 * error and decides. Not thread-safe (getopt_long's state is global).
 */
#ifndef SBFS_AGENT_OPTIONS_H
#define SBFS_AGENT_OPTIONS_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "common/log.h"

/* The defaults the options start from (sandbox-agent(8)). */
#define AGENT_DEFAULT_PORT 8971
#define AGENT_DEFAULT_TOKEN_FILE "/opt/alien/agent-token"
#define AGENT_DEFAULT_EXT_MAX_WRITE (16UL * 1024 * 1024)
#define AGENT_DEFAULT_RUN_TIMEOUT_MS 60000
/* Who commands run as when root starts the agent without --exec-user. */
#define AGENT_NOBODY 65534

struct agent_options {
	struct agent_config cfg; /* cfg.root is not set: see root */
	const char *root; /* --root, else ALIEN_SANDBOX_ROOT; NULL */
	const char *pid_file;
	const char *lock_file;
	const char *exec_user; /* --exec-user as given, NULL */
	enum log_level level;
	bool use_syslog;
	bool run; /* --run: one command, then exit */
	const char *run_cwd;
	uint64_t run_timeout_ms;
	int cmd; /* --run: the command's index in argv */
};

enum agent_options_outcome {
	AGENT_OPTS_SERVE = 0, /* o is complete */
	AGENT_OPTS_HELP, /* -h: print agent_options_usage to stdout */
	AGENT_OPTS_VERSION, /* -V */
};

/*
 * Parse argv (the environment first: ALIEN_SANDBOX_ROOT, _PORT and
 * _OUTPUT_CAP, SANDBOX_AGENT_TOKEN_FILE, which options override) into o,
 * every field not given taking its default. Returns an
 * agent_options_outcome, or -EINVAL with a one-line reason in
 * err[errsz] ("--port: bad port '70000'"), or an empty err for an option
 * getopt does not know (it said so on stderr: print the usage). Strings
 * in o point into argv or the environment.
 */
int agent_options_parse(int argc, char **argv, struct agent_options *o,
			char *err, size_t errsz);

/*
 * Who commands run as, and who file access happens as, for an agent of
 * effective uid euid and real ids uid, gid: as root, exec_user (--exec-user:
 * "NAME", "UID", "NAME:GROUP" or "UID:GID", a user alone taking its
 * primary group), else ALIEN_SANDBOX_EXEC_UID and _GID, else nobody, never
 * uid or gid 0, with privileges dropped; otherwise the agent's own ids,
 * which exec_user may only repeat. Sets cfg->exec_uid, exec_gid and
 * drop_privileges, or returns -EINVAL with err set.
 */
int agent_options_exec_user(const char *exec_user, struct agent_config *cfg,
			    uid_t euid, uid_t uid, gid_t gid, char *err,
			    size_t errsz);

void agent_options_usage(FILE *f);

#endif
