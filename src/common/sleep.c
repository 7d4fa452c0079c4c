/* SPDX-License-Identifier: MIT */
/* sleep: see sleep.h. */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "common/sleep.h"

void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	if (ms <= 0)
		return;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
