/* SPDX-License-Identifier: MIT */
/*
 * The sandboxctl commands that live outside main.c: exec and jobs, which
 * talk to a sandbox's agent through the transport core (the only libcurl
 * user) and the agent client, and what create does around local_ctl_create
 * on a terminal and on a signal. man/sandboxctl.1 is their contract with
 * the user: options, output, exit statuses.
 *
 * Each cmd_* takes the command's own argv (argv[0] is the command name),
 * prints its results and reasons itself and returns the process's exit
 * status. Single-threaded callers only: exec starts a thread of its own
 * for signals and changes the process's signal mask and dispositions.
 */
#ifndef SBFS_CTL_CTL_H
#define SBFS_CTL_CTL_H

#ifndef SBFS_SEE_CTL
#error "src/ctl/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <signal.h>
#include <stdbool.h>

#include "client/agent_client.h"
#include "client/local_ctl.h"
#include "client/provider.h"
#include "client/transport.h"

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

/* ---- create on a terminal and on a signal -------------------------------- */

/*
 * While a create runs: SIGINT, SIGTERM and SIGHUP (those not ignored when
 * sandboxctl started) make the progress hook answer -EINTR, so that
 * local_ctl_create removes what it made; when stderr is a terminal the
 * hook also shows one line of progress there, redrawn at most 10 times a
 * second.
 */
struct ctl_create_watch {
	bool tty;
	bool shown; /* a progress line is on the terminal */
	long long next_ms; /* earliest next redraw */
	struct local_copy_progress last; /* the copy's latest figures */
	const char *name;
	struct sigaction old[3];
	bool installed[3];
};

/* Install the handlers; then pass ctl_create_watch_progress and w to
 * local_ctl_create_progress. */
void ctl_create_watch_start(struct ctl_create_watch *w, const char *name);
int ctl_create_watch_progress(void *w, const struct local_copy_progress *p);
/* Restore the handlers and end the progress line. rc is the create's
 * outcome: returns the exit status for an interrupted create (128 + the
 * signal, its reason printed), else -1. */
int ctl_create_watch_finish(struct ctl_create_watch *w, int rc);

#endif
