/* SPDX-License-Identifier: MIT */
/*
 * The transport sandboxctl talks to agents with: the mount's own stack
 * (the local provider, the transport core, the agent client), so that a
 * route, a credential and an activation are handled as the mount handles
 * them (doc/transport-rules.md).
 */
#include "config.h"

#include <string.h>

#include "ctl/ctl.h"
#include "client/provider_local.h"

int ctl_session_open(struct local_ctl *c, long response_ms,
		     struct ctl_session *s, struct sbx_error *err)
{
	struct transport_config cfg;
	struct provider *prov = NULL;
	struct transport *t = NULL;
	int rc;

	rc = provider_local_new(c->state_dir, &prov, err);
	if (rc < 0)
		return rc;
	transport_config_defaults(&cfg);
	if (response_ms > 0) {
		cfg.response_timeout_ms = response_ms;
		cfg.body_idle_timeout_ms = response_ms;
	}
	cfg.new_sessions_use_agent = true;
	rc = transport_new(prov, &cfg, &t);
	if (rc < 0) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "cannot set up the transport: %s", strerror(-rc));
		provider_free(prov);
		return rc;
	}
	s->prov = prov;
	s->t = t;
	return 0;
}

void ctl_session_close(struct ctl_session *s)
{
	if (s == NULL)
		return;
	transport_free(s->t);
	provider_free(s->prov);
	s->t = NULL;
	s->prov = NULL;
}
