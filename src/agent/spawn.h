/* SPDX-License-Identifier: MIT */
/* spawn: running a command for exec and jobs (placeholder header). */
#ifndef SBFS_AGENT_SPAWN_H
#define SBFS_AGENT_SPAWN_H
#endif
