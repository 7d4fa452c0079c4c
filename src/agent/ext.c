/* SPDX-License-Identifier: MIT */
/* ext: placeholder until the file extension lands. */
#include "config.h"

#include "agent/routes.h"

int agent_route_ext(struct agent_req *r, const char *op)
{
	(void)op;
	return agent_reply_empty(r, 404);
}
