/* SPDX-License-Identifier: MIT */
/* fsops: confined filesystem primitives (placeholder header). */
#ifndef SBFS_AGENT_FSOPS_H
#define SBFS_AGENT_FSOPS_H
#endif
