/* SPDX-License-Identifier: MIT */
/*
 * proc: what the agent's process starters share (spawn.c, zygote*.c,
 * confine.c): descriptors, pidfds, bounded reaping, and the steps a child
 * takes between fork (or clone) and exec.
 *
 * The functions marked PROC_CHILD_CODE may run in such a child: they are
 * async-signal-safe, allocate nothing and touch only the memory they are
 * given, so they also serve a child that shares its parent's address
 * space (the zygote's clones: no sanitizer bookkeeping there, it belongs
 * to the parent's thread). The others are for the parent. All are
 * thread-safe.
 */
#ifndef SBFS_AGENT_PROC_H
#define SBFS_AGENT_PROC_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stddef.h>
#include <sys/types.h>

/* Code that may run in a child sharing its parent's memory. */
#define PROC_CHILD_CODE __attribute__((no_sanitize_address))

/* Close *fd unless it is -1, and make it -1. */
void proc_close(int *fd);

/* A pidfd (close-on-exec) for pid, a child not yet reaped or the caller
 * itself; -1 with errno when the kernel has none. */
int proc_pidfd_open(pid_t pid);
/* SIGKILL the process pidfd names (a pid cannot have been reused). */
void proc_pidfd_kill(int pidfd);
/* Wait for pid, a child of ours, until deadline (clock_mono_ms), polling
 * its pidfd (-1: none, no wait); SIGKILL it past that, and reap it. Its
 * status as waitpid gives it, or -1 (also for a pid <= 0: nothing). */
int proc_reap_bounded(pid_t pid, int pidfd, long long deadline);
/* Read at most n bytes of fd into p once it is readable, waiting until
 * deadline (clock_mono_ms): how many, 0 at its end (or on a read error),
 * or -ETIMEDOUT past the deadline. */
ssize_t proc_read_bounded(int fd, void *p, size_t n, long long deadline);

/* Mark every descriptor from lowfd on close-on-exec (below maxfd when the
 * kernel cannot do it in one call). */
PROC_CHILD_CODE void proc_cloexec_from(int lowfd, int maxfd);

/* Append n bytes of s at dst[pos] (dstsz bytes, kept NUL-terminated):
 * the new length, or dstsz when it does not fit. */
PROC_CHILD_CODE size_t proc_cat(char *dst, size_t pos, size_t dstsz,
				const char *s, size_t n);
/* A regular file this user may execute? 0, or an errno. */
PROC_CHILD_CODE int proc_runnable(const char *file);

/* One candidate of a program search (a path as the command names it,
 * maybe relative): 0 with the file to run in found[foundsz], or an
 * errno. */
typedef int proc_try_fn(const void *ctx, const char *cand, char *found,
			size_t foundsz);

/*
 * Find prog as execvp would: a name with a '/' is taken as it is, anything
 * else is looked up on path, ':'-separated (an empty entry is the working
 * directory). Each candidate goes to try_cand (NULL: proc_runnable on the
 * candidate itself). 0 with found[] set, or the errno execvp would end
 * with: EACCES when a file was found but could not run, else ENOENT.
 */
PROC_CHILD_CODE int proc_find_program(const char *prog, const char *path,
				      proc_try_fn *try_cand, const void *ctx,
				      char *found, size_t foundsz);

#endif
