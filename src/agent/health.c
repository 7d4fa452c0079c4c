/* SPDX-License-Identifier: MIT */
/* health: placeholder until health and activation land. */
#include "config.h"

#include "agent/routes.h"

int agent_route_health(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}

int agent_route_activate(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}
