/* SPDX-License-Identifier: MIT */
/*
 * jobs: the agent's job registry (protocol.md 3.7): at most PROTO_MAX_JOBS
 * jobs, running jobs never evicted, output kept for replay by sinceSeq.
 *
 * Thread-safe.
 */
#ifndef SBFS_AGENT_JOBS_H
#define SBFS_AGENT_JOBS_H

#include "agent/agent.h"

int agent_jobs_new(struct agent *a, struct agent_jobs **out)
	__attribute__((warn_unused_result));
/* Kill every running job's process group, wait for them, free. NULL-safe. */
void agent_jobs_free(struct agent_jobs *j);

#endif
