/* SPDX-License-Identifier: MIT */
/*
 * health: GET /v1/health (doc/protocol-v1.md 3.1) and POST /v1/activate (3.2).
 *
 * Health is public and reports the protocol version, this start's boot id,
 * whether the agent has been activated, the image command's state (this
 * agent never runs one: "none") and, unless strict v1, the extensions it
 * serves: files, whom its file routes act as, jobs with the running-jobs
 * limit, change events (or why they cannot be had), and its reply cache
 * (doc/protocol-ext.md 1, 10 and "Change events"). Activation
 * only flips the gate that http.c checks; the credential was checked before
 * the handler runs. Neither route touches the filesystem.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/jobs.h"
#include "agent/routes.h"
#include "agent/watch.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/xalloc.h"

/* The "version" query: absent is fine; anything but a u32 is the query
 * extractor's 400, as in the original agent. */
static int parse_version(const char *s, unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (*s == '\0')
		return -EINVAL;
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
		if (v > 0xffffffffUL)
			return -ERANGE;
	}
	*out = v;
	return 0;
}

int agent_route_health(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	const char *q = agent_req_query(r, "version");
	struct buf out = BUF_INIT(4096);
	struct proto_health h;
	unsigned long version;
	int rc;

	if (q != NULL) {
		rc = parse_version(q, &version);
		if (rc == -EINVAL)
			return agent_reply_text(
				r, 400,
				"Failed to deserialize query string: version: "
				"invalid digit found in string");
		if (rc < 0)
			return agent_reply_text(
				r, 400,
				"Failed to deserialize query string: version: "
				"number too large to fit in target type");
		if (version != PROTO_VERSION)
			return agent_reply_error(
				r, 400, PROTO_ERR_VERSION,
				"Caller speaks sandbox agent protocol v%lu, "
				"this agent speaks v%d",
				version, PROTO_VERSION);
	}
	memset(&h, 0, sizeof(h));
	h.protocol_version = PROTO_VERSION;
	strlcpy_s(h.boot_id, a->boot_id, sizeof(h.boot_id));
	strlcpy_s(h.status,
		  atomic_load(&a->activated) ? PROTO_STATUS_READY
					     : PROTO_STATUS_AWAITING,
		  sizeof(h.status));
	strlcpy_s(h.image_status, "none", sizeof(h.image_status));
	if (!a->cfg.strict_v1) {
		h.ext_files = PROTO_EXT_FILES_VERSION;
		h.ext_max_write = a->cfg.ext_max_write;
		/* Whom the file routes act as: a client can then tell which
		 * changes the sandbox will refuse before it sends them. */
		h.ext_has_ids = true;
		h.ext_uid = a->cfg.drop_privileges ? (uint32_t)a->cfg.exec_uid
						   : (uint32_t)geteuid();
		h.ext_gid = a->cfg.drop_privileges ? (uint32_t)a->cfg.exec_gid
						   : (uint32_t)getegid();
		/* Root's agent keeps root's access to the files (resolve.c). */
		h.ext_owner_access = a->cfg.drop_privileges;
		h.ext_jobs = PROTO_EXT_JOBS_VERSION;
		h.ext_max_running = agent_jobs_max_running(a->jobs);
		if (agent_events_available(a->events, h.ext_events_why,
					   sizeof(h.ext_events_why)))
			h.ext_events = PROTO_EXT_EVENTS_VERSION;
	}
	if (agent_http_reply_cache(a))
		h.ext_reply_cache = PROTO_EXT_REPLY_CACHE_VERSION;
	rc = proto_health_encode(&h, &out);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &out);
	buf_cleanup(&out);
	return rc;
}

int agent_route_activate(struct agent_req *r)
{
	struct agent *a = agent_req_agent(r);

	/* Repeating it is harmless: the client activates once per
	 * credential it fetches, and a replayed activation must not fail. */
	if (!atomic_exchange(&a->activated, true))
		log_info("activated");
	return agent_reply_empty(r, 204);
}
