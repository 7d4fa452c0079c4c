/* SPDX-License-Identifier: MIT */
/* exec: placeholder until POST /v1/exec lands. */
#include "config.h"

#include "agent/routes.h"

int agent_route_exec(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}
