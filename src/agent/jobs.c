/* SPDX-License-Identifier: MIT */
/* jobs: placeholder until the job registry lands. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "agent/jobs.h"
#include "agent/routes.h"

struct agent_jobs {
	int unused;
};

int agent_jobs_new(struct agent *a, struct agent_jobs **out)
{
	(void)a;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void agent_jobs_free(struct agent_jobs *j)
{
	free(j);
}

int agent_route_jobs_start(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}

int agent_route_jobs_poll(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}

int agent_route_jobs_cancel(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}
