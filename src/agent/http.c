/* SPDX-License-Identifier: MIT */
/* http: placeholder until the server lands. */
#include "config.h"

#include <errno.h>

#include "agent/http.h"

int agent_http_start(struct agent *a, unsigned *port_out)
{
	(void)a;
	(void)port_out;
	return -ENOSYS;
}

void agent_http_stop(struct agent *a)
{
	(void)a;
}

int agent_reply_empty(struct agent_req *r, unsigned status)
{
	(void)r;
	(void)status;
	return -ENOSYS;
}
