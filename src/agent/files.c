/* SPDX-License-Identifier: MIT */
/* files: placeholder until the v1 file routes land. */
#include "config.h"

#include "agent/routes.h"

int agent_route_files_get(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}

int agent_route_files_put(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}

int agent_route_mkdir(struct agent_req *r)
{
	return agent_reply_empty(r, 501);
}
