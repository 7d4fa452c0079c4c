/* SPDX-License-Identifier: MIT */
/*
 * limits: the bounds of a local sandbox's commands (doc/commands.md,
 * "Limits"), shared by the agent, which applies them, and sandboxctl,
 * which checks and records them.
 */
#ifndef SBFS_COMMON_LIMITS_H
#define SBFS_COMMON_LIMITS_H

#include <stdint.h>

#define SBX_DEFAULT_PIDS 1024
#define SBX_DEFAULT_TMP_SIZE (256ULL << 20)
#define SBX_MIN_PIDS 16
#define SBX_MIN_MEMORY (16ULL << 20)
#define SBX_MIN_TMP_SIZE (1ULL << 20)

/* The default memory limit: half of the machine's memory (physical
 * pages), in whole MiB, at least SBX_MIN_MEMORY. */
uint64_t sbx_default_memory(void);

#endif
