/* SPDX-License-Identifier: MIT */
/* clock: see clock.h. */
#include "config.h"

#include "common/clock.h"

/* The test seam (clock.h): NULL in every program. */
static long long (*source)(void);

static long long real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long clock_mono_ms(void)
{
	long long (*fn)(void) = __atomic_load_n(&source, __ATOMIC_ACQUIRE);

	return fn != NULL ? fn() : real_ms();
}

long long clock_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void clock_deadline_in(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void clock_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
}

void clock_set_source(long long (*fn)(void))
{
	__atomic_store_n(&source, fn, __ATOMIC_RELEASE);
}
