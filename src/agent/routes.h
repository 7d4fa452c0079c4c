/* SPDX-License-Identifier: MIT */
/*
 * routes: the handlers http.c dispatches to. Each follows the handler
 * contract in http.h and returns 0 (a reply was queued) or a negative errno
 * (http.c then answers 500 AGENT_OPERATION_FAILED).
 */
#ifndef SBFS_AGENT_ROUTES_H
#define SBFS_AGENT_ROUTES_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include "agent/http.h"

/* health.c */
int agent_route_health(struct agent_req *r);
int agent_route_activate(struct agent_req *r);

/* files.c (v1) */
int agent_route_files_get(struct agent_req *r);
int agent_route_files_put(struct agent_req *r);
int agent_route_mkdir(struct agent_req *r);

/* exec.c */
int agent_route_exec(struct agent_req *r);

/* jobs.c */
int agent_route_jobs_start(struct agent_req *r);
int agent_route_jobs_poll(struct agent_req *r);
int agent_route_jobs_cancel(struct agent_req *r);
/* GET /sandboxfs/v1/jobs (the extension; ext.c dispatches it) */
int agent_route_jobs_list(struct agent_req *r);

/* watch.c: GET /sandboxfs/v1/events (ext.c dispatches it) */
int agent_route_events(struct agent_req *r);

/* ext.c: one entry point per extension operation (doc/protocol-ext.md) */
int agent_route_ext(struct agent_req *r, const char *op);

#endif
