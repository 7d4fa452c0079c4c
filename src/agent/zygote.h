/* SPDX-License-Identifier: MIT */
/*
 * zygote: one long-lived process inside bubblewrap that starts the
 * confined commands, so that a command costs a clone and an exec instead
 * of a fork of the agent, an exec of bubblewrap and its namespace and
 * mount setup (doc/commands.md, "The zygote").
 *
 * The agent's side starts the zygote (the agent binary again, as
 * `sandbox-agent --zygote FD`) under bubblewrap with the layout the
 * spawner passes, as the exec user, from a thread of its own that lives
 * as long as the zygote object (bubblewrap's --die-with-parent follows the
 * thread that forked it). That thread also reads every answer. Requests
 * carry argv, environment and working directory in a memfd, and the three
 * standard descriptors, with SCM_RIGHTS over a SOCK_SEQPACKET pair.
 *
 * The zygote runs with its own network namespace (bubblewrap's), which
 * the agent's side attaches (confine.h) once the zygote said it is ready,
 * before any command starts; every command shares it.
 *
 * The zygote's side gives every command a PID, mount and IPC namespace of
 * its own under a small init process (so that killing the init, or its
 * process group, takes every process the command made, and each command
 * gets its own /proc, /tmp, /dev/shm and /dev/pts), answers with a pidfd
 * of that init, and reports its exit status, keeping it unreaped (so its
 * pid and process group id stay reserved) until the agent releases it.
 *
 * It knows nothing of HTTP, jobs or output framing: spawn.c calls it.
 * Thread-safe: any thread may spawn, wait and release.
 */
#ifndef SBFS_AGENT_ZYGOTE_H
#define SBFS_AGENT_ZYGOTE_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/confine.h"

/* The option that makes sandbox-agent a zygote (main.c). */
#define AGENT_ZYGOTE_ARG "--zygote"

struct agent_zygote;
struct agent_zygote_cmd;

struct agent_zygote_config {
	/* bubblewrap's fixed options, from its path (argv[0]) up to but not
	 * including the session root's bind; borrowed for the call only */
	char *const *bwrap_head;
	size_t bwrap_headc;
	/* identity, cgroup, rlimits and the staged root (confine.h); it
	 * must outlive the zygote */
	const struct agent_box *box;
	/* the network of the zygote's namespace (confine.h); NULL leaves it
	 * its loopback only. Must outlive the zygote. */
	const struct agent_net_cfg *net;
	/* NULL, or the path of the view where AGENT_NET_RESOLV is shown as
	 * the resolver configuration */
	const char *resolv_dest;
	uint64_t tmp_size; /* each command's /tmp and /dev/shm, bytes */
	uint64_t nproc; /* RLIMIT_NPROC in the sandbox's user namespace */
	uint64_t data; /* each command's RLIMIT_DATA (its init sets it); 0 */
};

/*
 * Start the reader thread and the zygote, and wait (bounded) until it
 * answers. On failure returns a negative errno (-ENOTSUP when bubblewrap
 * or the zygote refused) with the reason in why[whysz] (bubblewrap's own
 * message when it gave one).
 */
int agent_zygote_new(const struct agent_zygote_config *cfg,
		     struct agent_zygote **out, char *why, size_t whysz)
	__attribute__((warn_unused_result));
/*
 * Stop the zygote (its remaining commands are killed) and the thread.
 * Every command must have been released. NULL-safe.
 */
void agent_zygote_free(struct agent_zygote *z);

/*
 * Start argv (NULL-terminated, argv[0] looked up on envp's PATH as execvp
 * does, a file without #! run by /bin/sh) with the environment envp, in
 * cwd (a path of the sandbox's view), with in_fd, out_fd and err_fd as
 * its standard descriptors (the caller keeps and closes its own). A dead
 * zygote is restarted first. On success *zc is the command's handle (for
 * agent_zygote_wait and agent_zygote_release), *pid the pid of its init
 * in the agent's PID namespace (the command's process group id), and
 * *pidfd a pidfd of that init, readable once the command has ended (the
 * caller owns and closes it). Returns 0 or a negative errno: the
 * program's or directory's failure (-ENOENT, -EACCES, ...), -ECHILD when
 * the zygote died, -ETIMEDOUT when it did not answer in time (it is then
 * killed and restarted by the next spawn), -ESHUTDOWN when stopping.
 */
int agent_zygote_spawn(struct agent_zygote *z, char *const *argv,
		       char *const *envp, const char *cwd, int in_fd,
		       int out_fd, int err_fd, struct agent_zygote_cmd **zc,
		       pid_t *pid, int *pidfd)
	__attribute__((warn_unused_result));

/*
 * Wait up to timeout_ms for the command's exit status. 0 with *code set
 * (its exit code, or 128 + the signal that killed the command; -1 when
 * its init was killed, by a timeout or a cancel), -ETIMEDOUT, or -ECHILD
 * when the zygote died before telling (the status is lost).
 */
int agent_zygote_wait(struct agent_zygote_cmd *zc, int timeout_ms,
		      int32_t *code) __attribute__((warn_unused_result));

/*
 * Done with the command: waits (bounded) for it to have ended, then lets
 * the zygote reap it (it is killed if it still runs), which frees its pid.
 * Frees zc; the pidfd stays the caller's.
 */
void agent_zygote_release(struct agent_zygote_cmd *zc);

/*
 * The zygote's process: `sandbox-agent --zygote FD TMPSIZE NPROC DATA`, FD
 * its end of the socket pair, TMPSIZE the bytes of each command's /tmp
 * and /dev/shm, NPROC its RLIMIT_NPROC, DATA each command's RLIMIT_DATA
 * (0: none). Returns the process's exit status.
 */
int agent_zygote_main(int argc, char **argv);

#endif
