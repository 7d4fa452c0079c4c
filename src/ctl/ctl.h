/* SPDX-License-Identifier: MIT */
/*
 * The sandboxctl commands that live outside main.c: exec and jobs, which
 * talk to a sandbox's agent through the transport core (the only libcurl
 * user) and the agent client. man/sandboxctl.1 is their contract with the
 * user: options, output, exit statuses.
 *
 * Each cmd_* takes the command's own argv (argv[0] is the command name),
 * prints its results and reasons itself and returns the process's exit
 * status. Single-threaded callers only: exec starts a thread of its own
 * for signals and changes the process's signal mask and dispositions.
 */
#ifndef SBFS_CTL_CTL_H
#define SBFS_CTL_CTL_H

#include <stdbool.h>

#include "agent_client.h"
#include "local_ctl.h"
#include "provider.h"
#include "transport.h"

/* exec's own exit statuses (a command's are 0 to 255 too; these are the
 * ones it documents as its own, in man/sandboxctl.1). */
#define CTL_EXEC_LOST 122 /* the job started, its end is not known */
#define CTL_EXEC_TIMEOUT 124 /* --timeout passed: the agent killed it */
#define CTL_EXEC_NOT_STARTED 125 /* nothing ran: usage, sandbox, agent */
#define CTL_EXEC_CANNOT_RUN 126 /* the program could not be executed */
#define CTL_EXEC_NOT_FOUND 127 /* the program (or directory) is missing */
#define CTL_EXEC_CANCELLED 137 /* cancelled by another client (SIGKILL) */
#define CTL_EXEC_NO_SIGNAL 255 /* a signal death without the signal */

/* The job's timeout when --timeout is not given, as the mount's
 * job_timeout (man/sandboxfs.1). */
#define CTL_EXEC_DEFAULT_TIMEOUT_S 86400L

int cmd_exec(struct local_ctl *c, int argc, char **argv);
int cmd_jobs(struct local_ctl *c, int argc, char **argv);

/* ---- talking to a local sandbox's agent ----------------------------------- */

struct ctl_session {
	struct provider *prov;
	struct transport *t;
};

/* The local provider over c's state directory and a transport whose
 * response deadline is response_ms (0: the default). On failure err holds
 * the reason. */
int ctl_session_open(struct local_ctl *c, long response_ms,
		     struct ctl_session *s, struct sbx_error *err)
	__attribute__((warn_unused_result));
void ctl_session_close(struct ctl_session *s);

#endif
