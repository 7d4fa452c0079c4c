/* SPDX-License-Identifier: MIT */
/*
 * azure_seed_shim: stub_provider over the fake Azure (see
 * azure_seed_shim.h), for the seed's scenarios through the Azure provider.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "common/xalloc.h"
#include "client/provider_azure.h"
#include "tests/azure_fake.h"
#include "tests/azure_helpers.h"
#include "tests/azure_seed_shim.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"
#include "client/transport.h"

#define AZS_MAX_URLS 16

struct stub_provider {
	struct azure_fake *fake;
	struct provider *prov;
	char *dir;
	unsigned never_mask;
	char refused_url[64];
	struct {
		unsigned port;
		char url[192];
	} urls[AZS_MAX_URLS];
	size_t nurls;
	stub_provider_hook_fn *hook[STUB_CALL_COUNT];
	void *hook_arg[STUB_CALL_COUNT];
};

/* The sandboxes the scenarios name. */
static const char *const azs_ids[] = {"session", "native"};
#define AZS_NIDS (sizeof(azs_ids) / sizeof(azs_ids[0]))

/* The environment the scenario's provider is made in (the agent URLs
 * need it while a scenario runs). */
static struct stub_provider *azs_current;

static enum stub_call azs_call_of(enum azure_fake_route r)
{
	switch (r) {
	case AZF_LIST:
		return STUB_CALL_LIST;
	case AZF_GET:
		return STUB_CALL_RECORD;
	case AZF_CREDENTIAL:
		return STUB_CALL_CREDENTIAL;
	case AZF_FILES:
		return STUB_CALL_NATIVE_READ;
	case AZF_EXEC:
		return STUB_CALL_NATIVE_EXEC;
	case AZF_RESUME:
		return STUB_CALL_RESUME;
	case AZF_STOP:
		return STUB_CALL_STOP;
	default:
		return STUB_CALL_COUNT;
	}
}

static void azs_fake_hook(struct azure_fake *f, enum azure_fake_route r,
			  const char *id, void *arg)
{
	struct stub_provider *sp = arg;
	enum stub_call c = azs_call_of(r);

	(void)f;
	if (c != STUB_CALL_COUNT && sp->hook[c] != NULL)
		sp->hook[c](sp, c, id, sp->hook_arg[c]);
}

/* A loopback port nothing listens on: stub_refused_url's. */
static unsigned azs_free_port(void)
{
	char url[64];
	unsigned port = 0;

	stub_refused_url(url, sizeof(url));
	ck_assert_msg(sscanf(url, "http://127.0.0.1:%u/", &port) == 1, "%s",
		      url);
	return port;
}

static void azs_set_credential(struct stub_provider *sp, unsigned g)
{
	char cred[45];
	size_t i;

	stub_provider_credential_for(g, cred);
	for (i = 0; i < AZS_NIDS; i++)
		azure_fake_set_file(sp->fake, azs_ids[i], AZURE_FAKE_TOKEN_PATH,
				    cred, strlen(cred));
}

struct stub_provider *azs_provider_new(void)
{
	struct stub_provider *sp = xcalloc(1, sizeof(*sp));
	struct provider_azure_config cfg;
	struct sbx_error err;
	char errbuf[256] = "", authority[256], resolve[768];
	const char *env[6];
	unsigned refused;
	size_t i;
	int rc;

	sp->dir = th_tmpdir("azseed");
	rc = azure_fake_start(sp->dir, &sp->fake, errbuf, sizeof(errbuf));
	ck_assert_msg(rc == 0, "the fake Azure did not start: %s", errbuf);
	for (i = 0; i < AZS_NIDS; i++)
		azure_fake_add(sp->fake, azs_ids[i]);
	for (i = 0; i < AZF_ROUTES; i++)
		azure_fake_set_hook(sp->fake, (enum azure_fake_route)i,
				    azs_fake_hook, sp);
	azs_set_credential(sp, 0);
	refused = azs_free_port();
	snprintf(sp->refused_url, sizeof(sp->refused_url),
		 "https://refused--8971.%s.adcproxy.io:%u/", AZURE_FAKE_REGION,
		 refused);
	snprintf(resolve, sizeof(resolve), "%s,*:%u:127.0.0.1",
		 azure_fake_resolve(sp->fake), refused);
	az_authority_env(sp->fake, authority, sizeof(authority));
	az_fake_config(&cfg, sp->fake, 0, az_secret_envp(env, authority),
		       azure_fake_ca_file(sp->fake));
	/* The fake's pins and the refused port's. */
	cfg.resolve = resolve;
	sbx_error_clear(&err);
	rc = provider_azure_open(&cfg, &sp->prov, &err);
	ck_assert_msg(rc == 0, "provider_azure_open: %s", err.reason);
	azs_current = sp;
	return sp;
}

void azs_provider_free(struct stub_provider *sp)
{
	unsigned unauthorized, bad_version;

	if (sp == NULL)
		return;
	unauthorized = azure_fake_unauthorized(sp->fake);
	bad_version = azure_fake_bad_version(sp->fake);
	provider_free(sp->prov);
	azure_fake_stop(sp->fake);
	th_rmtree(sp->dir);
	free(sp->dir);
	if (azs_current == sp)
		azs_current = NULL;
	free(sp);
	/* Every data-plane call carried a valid bearer and the
	 * api-version. */
	ck_assert_uint_eq(unauthorized, 0);
	ck_assert_uint_eq(bad_version, 0);
}

void azs_provider_set_label(struct stub_provider *sp, enum stub_label label)
{
	const char *v = label == STUB_LABEL_AGENT     ? PROTO_TRANSPORT_AGENT
			: label == STUB_LABEL_UNKNOWN ? "unknown"
						      : NULL;
	size_t i;

	for (i = 0; i < AZS_NIDS; i++)
		azure_fake_set_label(sp->fake, azs_ids[i],
				     PROTO_TRANSPORT_LABEL, v);
}

void azs_provider_set_stopped_reads(struct stub_provider *sp, unsigned n)
{
	azure_fake_set_stopped_reads(sp->fake, "session", n);
}

void azs_provider_set_route(struct stub_provider *sp, const char *url)
{
	size_t i;

	for (i = 0; i < AZS_NIDS; i++)
		azure_fake_set_port_url(sp->fake, azs_ids[i], url);
}

void azs_provider_set_generation(struct stub_provider *sp, unsigned g)
{
	azs_set_credential(sp, g);
}

void azs_provider_never(struct stub_provider *sp, enum stub_call call)
{
	sp->never_mask |= 1u << call;
}

void azs_provider_set_hook(struct stub_provider *sp, enum stub_call call,
			   stub_provider_hook_fn *fn, void *arg)
{
	sp->hook[call] = fn;
	sp->hook_arg[call] = arg;
}

unsigned azs_provider_calls(struct stub_provider *sp, enum stub_call call)
{
	struct provider_azure_stats st;

	provider_azure_stats(sp->prov, &st);
	/* Both ends counted the same requests. */
	ck_assert_uint_eq(azure_fake_calls(sp->fake, AZF_GET),
			  st.record_reads + st.routes + st.ports_added);
	ck_assert_uint_eq(azure_fake_calls(sp->fake, AZF_CREDENTIAL),
			  st.credentials);
	switch (call) {
	case STUB_CALL_LIST:
		return azure_fake_calls(sp->fake, AZF_LIST);
	case STUB_CALL_RECORD:
		return st.record_reads;
	case STUB_CALL_ROUTE:
		return st.routes;
	case STUB_CALL_CREDENTIAL:
		return azure_fake_calls(sp->fake, AZF_CREDENTIAL);
	case STUB_CALL_JUDGE:
		return st.judges;
	case STUB_CALL_RESUME:
		return azure_fake_calls(sp->fake, AZF_RESUME);
	case STUB_CALL_STOP:
		return azure_fake_calls(sp->fake, AZF_STOP);
	case STUB_CALL_NATIVE_READ:
		return azure_fake_calls(sp->fake, AZF_FILES);
	case STUB_CALL_NATIVE_EXEC:
		return azure_fake_calls(sp->fake, AZF_EXEC);
	default:
		return 0;
	}
}

unsigned azs_provider_unexpected(struct stub_provider *sp)
{
	unsigned c, n = 0;

	for (c = 0; c < STUB_CALL_COUNT; c++)
		if (c != STUB_CALL_ROUTE_ALLOWED &&
		    (sp->never_mask & (1u << c)))
			n += azs_provider_calls(sp, (enum stub_call)c);
	return n;
}

void azs_provider_last_id(struct stub_provider *sp, enum stub_call call,
			  char *out, size_t size)
{
	static const enum azure_fake_route routes[STUB_CALL_COUNT] = {
		[STUB_CALL_LIST] = AZF_LIST,
		[STUB_CALL_RECORD] = AZF_GET,
		[STUB_CALL_ROUTE] = AZF_GET,
		[STUB_CALL_ROUTE_ALLOWED] = AZF_GET,
		[STUB_CALL_CREDENTIAL] = AZF_CREDENTIAL,
		[STUB_CALL_JUDGE] = AZF_GET,
		[STUB_CALL_RESUME] = AZF_RESUME,
		[STUB_CALL_STOP] = AZF_STOP,
		[STUB_CALL_NATIVE_READ] = AZF_FILES,
		[STUB_CALL_NATIVE_EXEC] = AZF_EXEC,
	};

	azure_fake_last_id(sp->fake, routes[call], out, size);
}

struct transport *azs_transport_new(struct stub_provider *sp,
				    const struct transport_config *cfg)
{
	struct transport *t = NULL;

	ck_assert_int_eq(transport_new(sp->prov, cfg, &t), 0);
	return t;
}

/* The proxy's URL for a stub agent (borrowed; valid while the scenario's
 * provider lives). */
const char *azs_agent_url(const struct stub_agent *s)
{
	struct stub_provider *sp = azs_current;
	unsigned port = stub_agent_port(s);
	char host[128];
	size_t i;

	ck_assert_msg(sp != NULL, "an agent URL outside a scenario");
	for (i = 0; i < sp->nurls; i++)
		if (sp->urls[i].port == port)
			return sp->urls[i].url;
	ck_assert_uint_lt(sp->nurls, AZS_MAX_URLS);
	snprintf(host, sizeof(host), "p%u--8971.%s.adcproxy.io", port,
		 AZURE_FAKE_REGION);
	azure_fake_proxy_route(sp->fake, host, port);
	sp->urls[sp->nurls].port = port;
	snprintf(sp->urls[sp->nurls].url, sizeof(sp->urls[sp->nurls].url),
		 "https://%s:%u/", host, azure_fake_proxy_port(sp->fake));
	return sp->urls[sp->nurls++].url;
}

void azs_refused_url(char *url, size_t size)
{
	ck_assert_msg(azs_current != NULL, "a refused URL outside a scenario");
	snprintf(url, size, "%s", azs_current->refused_url);
}
