/* SPDX-License-Identifier: MIT */
/*
 * routes: the agent's one route table (method and path to handler, with
 * each route's body limit and its credential, activation and JSON
 * requirements) and the handlers it names. http.c looks a request up here
 * and enforces what the route asks before it calls the handler.
 *
 * Each handler follows the handler contract in http.h and returns 0 (a
 * reply was queued) or a negative errno (http.c then answers 500
 * AGENT_OPERATION_FAILED). The table is constant: thread-safe.
 */
#ifndef SBFS_AGENT_ROUTES_H
#define SBFS_AGENT_ROUTES_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "agent/http.h"

/* What a route asks of a request before its handler runs. */
enum {
	AGENT_RT_PUBLIC = 1 << 0, /* no credential: health, the AWS hooks */
	AGENT_RT_UNGATED = 1 << 1, /* served before activation */
	AGENT_RT_JSON = 1 << 2, /* the body must be application/json */
	AGENT_RT_EXT = 1 << 3, /* the file extension; absent with strict_v1 */
	AGENT_RT_NO_HEAD = 1 << 4, /* a GET that answers HEAD with 405 */
};

/* The largest body a route reads (http.c turns each into bytes). */
enum agent_rt_limit {
	AGENT_LIM_NONE, /* no body */
	AGENT_LIM_SMALL, /* small JSON bodies (mkdir, activate, metadata) */
	AGENT_LIM_FILES, /* PROTO_HTTP_BODY_LIMIT */
	AGENT_LIM_EXEC, /* PROTO_EXEC_MAX_BODY */
	AGENT_LIM_EXT_WRITE, /* cfg.ext_max_write */
};

struct agent_route {
	const char *method;
	const char *path;
	unsigned flags;
	enum agent_rt_limit limit;
	int (*fn)(struct agent_req *r);
};

/*
 * The route for method and path (a GET route answers HEAD too), leaving
 * out the extension's routes when strict_v1. NULL when there is none:
 * then *path_known says whether only the method is wrong, and allow[]
 * (allowsz bytes, cut to fit) lists the methods the path takes, as the
 * Allow header says them ("GET, HEAD, PUT").
 */
const struct agent_route *agent_route_find(const char *method, const char *path,
					   bool strict_v1, bool *path_known,
					   char *allow, size_t allowsz);

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
/* GET /sandboxfs/v1/jobs (the extension) */
int agent_route_jobs_list(struct agent_req *r);

/* watch.c: GET /sandboxfs/v1/events */
int agent_route_events(struct agent_req *r);

/* The file extension, /sandboxfs/v1/<op> (doc/protocol-ext.md). */
/* ext.c: attributes, a link's text, the file system's numbers, a page of
 * a directory, a subtree */
int agent_route_ext_stat(struct agent_req *r);
int agent_route_ext_readlink(struct agent_req *r);
int agent_route_ext_statfs(struct agent_req *r);
int agent_route_ext_list(struct agent_req *r);
int agent_route_ext_tree(struct agent_req *r);
/* ext_io.c: bytes of a file, a directory's small files, a write */
int agent_route_ext_read(struct agent_req *r);
int agent_route_ext_contents(struct agent_req *r);
int agent_route_ext_write(struct agent_req *r);
/* ext_meta.c: POST create, mkdir, unlink, rmdir, rename, link, symlink,
 * chmod, truncate, utimens and fsync, the operation named by the path's
 * last part */
int agent_route_ext_meta(struct agent_req *r);

#endif
