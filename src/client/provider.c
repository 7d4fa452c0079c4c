/* SPDX-License-Identifier: MIT */
/*
 * provider: helpers shared by every provider (records, states). The
 * providers themselves live in provider_<name>.c.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto_record.h"
#include "client/provider.h"
#include "client/provider_local.h"
#ifdef HAVE_PROVIDER_AZURE
#include "client/provider_azure.h"
#endif

/* The two enums list the states in the same order. */
_Static_assert((int)PROVIDER_STATE_DELETING == (int)PROTO_RECORD_DELETING &&
		       (int)PROVIDER_STATE_RUNNING == (int)PROTO_RECORD_RUNNING,
	       "provider_state follows proto_record_state");

const char *provider_state_name(enum provider_state s)
{
	const char *name = proto_record_state_name((enum proto_record_state)s);

	return name != NULL ? name : "Unknown";
}

void provider_record_cleanup(struct provider_record *r)
{
	if (r == NULL)
		return;
	proto_labels_free(r->labels, r->nlabels);
	free(r->route_hint);
	memset(r, 0, sizeof(*r));
}

const char *provider_record_label(const struct provider_record *r,
				  const char *key)
{
	size_t i;

	for (i = 0; i < r->nlabels; i++)
		if (strcmp(r->labels[i].key, key) == 0)
			return r->labels[i].value;
	return NULL;
}

void provider_exec_result_cleanup(struct provider_exec_result *r)
{
	if (r == NULL)
		return;
	buf_cleanup(&r->out);
	buf_cleanup(&r->err);
}

void provider_free(struct provider *p)
{
	if (p != NULL && p->ops != NULL && p->ops->free != NULL)
		p->ops->free(p);
}

void provider_opts_cleanup(struct provider_opts *o)
{
	char **fields[] = {
		&o->name,
		&o->state_dir,
		&o->azure_subscription,
		&o->azure_resource_group,
		&o->azure_group,
		&o->azure_region,
		&o->azure_endpoint,
		&o->azure_token_path,
		&o->azure_config,
		&o->azure_ca_file,
		&o->azure_resolve,
		&o->azure_record_cache,
	};
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		free(*fields[i]);
		*fields[i] = NULL;
	}
}

int provider_open(const struct provider_opts *o, struct provider **out,
		  struct sbx_error *err)
{
	const char *name = o->name ? o->name : "local";

	if (strcmp(name, "local") == 0)
		return provider_local_new(o->state_dir, out, err);
#ifdef HAVE_PROVIDER_AZURE
	if (strcmp(name, "azure") == 0)
		return provider_azure_new(o, out, err);
#endif
	return sbx_error_fail(err, SBX_INVALID_INPUT, NULL, EINVAL,
			      "unknown provider '%s' (known: local%s)", name,
#ifdef HAVE_PROVIDER_AZURE
			      ", azure"
#else
			      ""
#endif
	);
}
