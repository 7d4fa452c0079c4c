/* SPDX-License-Identifier: MIT */
/*
 * clock: the monotonic clock every deadline and timeout of the tree is
 * measured with, in one place, with a seam for tests.
 *
 * clock_mono_ms() is CLOCK_MONOTONIC in milliseconds, unless a test
 * installed a source of its own (clock_set_source): then that source's.
 * Condition variables that wait with a deadline use CLOCK_MONOTONIC
 * (clock_cond_init) and clock_deadline_in builds their timespec, so a
 * wait and the deadline it serves agree. Thread-safe; the source is meant
 * to be set before threads start.
 */
#ifndef SBFS_COMMON_CLOCK_H
#define SBFS_COMMON_CLOCK_H

#include <pthread.h>
#include <time.h>

long long clock_mono_ms(void);

/* CLOCK_REALTIME in milliseconds since the epoch: for times shown to
 * people or carried on the wire (a job's start), never for deadlines. Not
 * affected by clock_set_source. */
long long clock_wall_ms(void);

/* The absolute CLOCK_MONOTONIC time ms from now, for
 * pthread_cond_timedwait on a condition made by clock_cond_init (the real
 * clock: a wait is a wait). */
void clock_deadline_in(struct timespec *ts, long ms);

/* A condition variable that waits on CLOCK_MONOTONIC. */
void clock_cond_init(pthread_cond_t *cond);

/* Tests: make clock_mono_ms() return fn() (NULL: the real clock). */
void clock_set_source(long long (*fn)(void));

#endif
