/* SPDX-License-Identifier: MIT */
/*
 * sys_helpers: the plumbing the Check suites share with the test programs
 * that do not link Check (azure-fake, fsx): a value read or set under a lock,
 * loopback sockets, stopping a child and removing a tree. Nothing here asserts; errors
 * come back as -errno.
 */
#ifndef SBFS_TEST_SYS_HELPERS_H
#define SBFS_TEST_SYS_HELPERS_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

/* A socket listening on an ephemeral loopback port, backlog deep, its
 * port in *port; -errno when there is none. */
int th_listen_loopback(int backlog, unsigned *port);
/* A socket connected to port on loopback, or -errno. */
int th_connect_loopback(unsigned port);

/* *value read under mu: a counter other threads bump under that lock. */
unsigned th_locked_uint(pthread_mutex_t *mu, const unsigned *value);
/* The size bytes at value copied over field under mu: a setting other
 * threads read under that lock. */
void th_locked_set(pthread_mutex_t *mu, void *field, const void *value,
		   size_t size);

/* SIGTERM pid and reap it, with a SIGKILL when it is still there after
 * 5 s; its status as waitpid gives it. */
int th_child_stop(pid_t pid);

/* Remove the tree at path (NULL: nothing), not following links; what
 * cannot be removed stays. */
void th_rmtree(const char *path);

#endif
