/* SPDX-License-Identifier: MIT */
/*
 * azure_seed_shim: the seed's scenarios (check_transport_seed*.c) through
 * the Azure provider: provider_azure talking to the fake data plane
 * (azure_fake) over TLS, with every stub agent of a scenario behind the
 * fake's TLS proxy on an *.adcproxy.io name. The production route policy,
 * certificate verification and pinned name resolution carry every
 * request.
 *
 * The scenarios' stub_provider calls are mapped onto the fake by the
 * azs_ functions below; a file that defines SBFS_AZURE_SEED_RENAME before
 * including this header gets macros renaming each stub_provider call to
 * its azs_ twin, and then includes a scenario file:
 *
 *  - set_route, set_generation, set_label, set_stopped_reads: the fake's
 *    record (the ports[] entry for 8971, the labels, "Stopped for the
 *    first n reads") and the agent's credential file;
 *  - calls(c): data-plane calls. Record reads are the GET {sandbox} calls
 *    record() and judge() make; route fetches are the same GET made by
 *    route(), so the provider's own counters split the two, and every look
 *    checks that their sum is what the fake counted. Credential reads are
 *    GET files?path=/opt/alien/agent-token; resume, stop, native exec and
 *    native reads are their routes;
 *  - never(c): such calls are counted as unexpected;
 *  - stub_agent_url(s): https://p<port>--8971.eastus.adcproxy.io:PROXY/,
 *    the fake proxy's route to that stub agent; stub_refused_url: an https
 *    URL on a port nothing listens on.
 *
 * The provider reuses no record (record cache 0), as the seed's provider
 * reads one for every call, and the fake refuses (and counts) every call
 * without the bearer or the api-version: each scenario ends by checking
 * that there was none. One scenario at a time (the proxy routes are the
 * current provider's).
 */
#ifndef SBFS_TEST_AZURE_SEED_SHIM_H
#define SBFS_TEST_AZURE_SEED_SHIM_H

#include <stddef.h>

#include "client/transport.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"

struct stub_provider *azs_provider_new(void);
void azs_provider_free(struct stub_provider *sp);
void azs_provider_set_label(struct stub_provider *sp, enum stub_label label);
void azs_provider_set_stopped_reads(struct stub_provider *sp, unsigned n);
void azs_provider_set_route(struct stub_provider *sp, const char *url);
void azs_provider_set_generation(struct stub_provider *sp, unsigned g);
void azs_provider_never(struct stub_provider *sp, enum stub_call call);
void azs_provider_set_hook(struct stub_provider *sp, enum stub_call call,
			   stub_provider_hook_fn *fn, void *arg);
unsigned azs_provider_calls(struct stub_provider *sp, enum stub_call call);
unsigned azs_provider_unexpected(struct stub_provider *sp);
void azs_provider_last_id(struct stub_provider *sp, enum stub_call call,
			  char *out, size_t size);
struct transport *azs_transport_new(struct stub_provider *sp,
				    const struct transport_config *cfg);
const char *azs_agent_url(const struct stub_agent *s);
void azs_refused_url(char *url, size_t size);

#ifdef SBFS_AZURE_SEED_RENAME
#define stub_provider_new azs_provider_new
#define stub_provider_free azs_provider_free
#define stub_provider_set_label azs_provider_set_label
#define stub_provider_set_stopped_reads azs_provider_set_stopped_reads
#define stub_provider_set_route azs_provider_set_route
#define stub_provider_set_generation azs_provider_set_generation
#define stub_provider_never azs_provider_never
#define stub_provider_set_hook azs_provider_set_hook
#define stub_provider_calls azs_provider_calls
#define stub_provider_unexpected azs_provider_unexpected
#define stub_provider_last_id azs_provider_last_id
#define stub_transport_new azs_transport_new
#define stub_agent_url azs_agent_url
#define stub_refused_url azs_refused_url
#endif

#endif
