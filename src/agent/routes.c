/* SPDX-License-Identifier: MIT */
/*
 * routes: the route table. Every route of the agent is one line here;
 * doc/protocol-v1.md and doc/protocol-ext.md say what each one does.
 */
#include "config.h"

#include <string.h>

#include "agent/routes.h"
#include "common/xalloc.h"

/* The AWS Lambda MicroVM lifecycle hooks: answered, nothing done. */
static int route_aws_hook(struct agent_req *r)
{
	return agent_reply_empty(r, 200);
}

/* clang-format off */
#define AWS "/aws/lambda-microvms/runtime/v1/"
#define AWS_HOOK(method, name) \
	{ method, AWS name, AGENT_RT_PUBLIC | AGENT_RT_UNGATED, \
	  AGENT_LIM_SMALL, route_aws_hook }
#define EXT "/sandboxfs/v1/"
#define EXT_GET(op, fn) \
	{ "GET", EXT op, AGENT_RT_EXT | AGENT_RT_NO_HEAD, AGENT_LIM_NONE, fn }
#define EXT_POST(op) \
	{ "POST", EXT op, AGENT_RT_EXT | AGENT_RT_JSON, AGENT_LIM_SMALL, \
	  agent_route_ext_meta }

static const struct agent_route routes[] = {
	{ "GET", "/v1/health", AGENT_RT_PUBLIC | AGENT_RT_UNGATED, AGENT_LIM_NONE, agent_route_health },
	{ "POST", "/v1/activate", AGENT_RT_UNGATED, AGENT_LIM_SMALL, agent_route_activate },
	{ "POST", "/v1/exec", AGENT_RT_JSON, AGENT_LIM_EXEC, agent_route_exec },
	{ "GET", "/v1/files", 0, AGENT_LIM_NONE, agent_route_files_get },
	{ "PUT", "/v1/files", AGENT_RT_JSON, AGENT_LIM_FILES, agent_route_files_put },
	{ "POST", "/v1/mkdir", AGENT_RT_JSON, AGENT_LIM_SMALL, agent_route_mkdir },
	{ "POST", "/v1/jobs/start", AGENT_RT_JSON, AGENT_LIM_EXEC, agent_route_jobs_start },
	{ "POST", "/v1/jobs/poll", AGENT_RT_JSON, AGENT_LIM_EXEC, agent_route_jobs_poll },
	{ "POST", "/v1/jobs/cancel", AGENT_RT_JSON, AGENT_LIM_EXEC, agent_route_jobs_cancel },
	AWS_HOOK("GET", "ready"),	AWS_HOOK("POST", "ready"),
	AWS_HOOK("GET", "validate"),	AWS_HOOK("POST", "validate"),
	AWS_HOOK("GET", "run"),		AWS_HOOK("POST", "run"),
	AWS_HOOK("GET", "resume"),	AWS_HOOK("POST", "resume"),
	AWS_HOOK("GET", "suspend"),	AWS_HOOK("POST", "suspend"),
	AWS_HOOK("GET", "terminate"),	AWS_HOOK("POST", "terminate"),
	EXT_GET("stat", agent_route_ext_stat),
	EXT_GET("list", agent_route_ext_list),
	EXT_GET("tree", agent_route_ext_tree),
	EXT_GET("contents", agent_route_ext_contents),
	EXT_GET("read", agent_route_ext_read),
	EXT_GET("readlink", agent_route_ext_readlink),
	EXT_GET("statfs", agent_route_ext_statfs),
	EXT_GET("jobs", agent_route_jobs_list),
	EXT_GET("events", agent_route_events),
	{ "PUT", EXT "write", AGENT_RT_EXT, AGENT_LIM_EXT_WRITE, agent_route_ext_write },
	EXT_POST("truncate"),
	EXT_POST("create"),
	EXT_POST("mkdir"),
	EXT_POST("unlink"),
	EXT_POST("rmdir"),
	EXT_POST("rename"),
	EXT_POST("link"),
	EXT_POST("symlink"),
	EXT_POST("chmod"),
	EXT_POST("utimens"),
	EXT_POST("fsync"),
};
/* clang-format on */

static bool method_matches(const char *want, const char *got)
{
	/* A GET route answers HEAD too (the library drops the body). */
	return strcmp(want, got) == 0 ||
	       (strcmp(want, "GET") == 0 && strcmp(got, "HEAD") == 0);
}

/* Append ", " (unless first) and s to allow[allowsz], cut to fit. */
static void allow_add(char *allow, size_t allowsz, const char *s)
{
	size_t n = strlen(allow);

	if (n > 0) {
		strlcpy_s(allow + n, ", ", allowsz - n);
		n = strlen(allow);
	}
	strlcpy_s(allow + n, s, allowsz - n);
}

const struct agent_route *agent_route_find(const char *method, const char *path,
					   bool strict_v1, bool *path_known,
					   char *allow, size_t allowsz)
{
	size_t i;

	*path_known = false;
	allow[0] = '\0';
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct agent_route *rt = &routes[i];

		if ((rt->flags & AGENT_RT_EXT) && strict_v1)
			continue;
		if (strcmp(rt->path, path) != 0)
			continue;
		if (method_matches(rt->method, method))
			return rt;
		*path_known = true;
		allow_add(allow, allowsz, rt->method);
		if (strcmp(rt->method, "GET") == 0)
			allow_add(allow, allowsz, "HEAD");
	}
	return NULL;
}
