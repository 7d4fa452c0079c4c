/* SPDX-License-Identifier: MIT */
/* limits: see limits.h. */
#include "config.h"

#include <unistd.h>

#include "common/limits.h"

uint64_t sbx_default_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long psz = sysconf(_SC_PAGESIZE);
	uint64_t half;

	if (pages <= 0 || psz <= 0)
		return 4ULL << 30;
	half = (uint64_t)pages * (uint64_t)psz / 2;
	half &= ~((1ULL << 20) - 1);
	return half < SBX_MIN_MEMORY ? SBX_MIN_MEMORY : half;
}
