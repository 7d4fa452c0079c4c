/* SPDX-License-Identifier: MIT */
/*
 * child_output: a child that runs a command with its output in pipes
 * (the Azure CLI, a native session's command): its exec, and its stdout
 * and stderr read to their ends into bounded buffers under a deadline.
 * Not thread-safe: one caller per struct child_output.
 */
#ifndef SBFS_CHILD_OUTPUT_H
#define SBFS_CHILD_OUTPUT_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

struct child_output {
	int fd[2]; /* the read ends of the child's stdout and stderr */
	struct buf *buf[2]; /* where each goes */
	size_t cap[2]; /* the most each keeps */
	bool over[2]; /* a chunk did not fit (under cap and the buf's max)
			 and was dropped; reading went on */
	bool wipe; /* wipe each chunk once copied: it may hold a secret */
};

/*
 * In a child between fork and exec (async-signal-safe calls only): stdin
 * from /dev/null, stdout and stderr to out and err, a process group of its
 * own (so that it can be killed whole), then argv with envp; _exit(127)
 * when any of it fails. close_others: every other descriptor past stderr
 * is closed first (close_range, where the system has it).
 */
void child_exec(const char *const *argv, char *const *envp, int out, int err,
		bool close_others) __attribute__((noreturn));

/* Close each of fds[0..n) that is open (>= 0) and mark it closed. */
void child_fds_close(int *fds, size_t n);

/* Read both descriptors until both end: 0, -ETIMEDOUT when deadline
 * (clock_mono_ms) passes first, or poll's -errno. The descriptors stay
 * open (the caller's). */
int child_output_drain(struct child_output *co, long long deadline)
	__attribute__((warn_unused_result));

#endif
