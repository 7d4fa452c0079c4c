/* SPDX-License-Identifier: MIT */
/*
 * azure_helpers: what the Azure suites share (check_azure*.c): the fake
 * Azure of azure_fake.c started in a temporary directory with a provider
 * over it (client-secret credentials, the fake's CA and pinned names),
 * the provider's stats, and the check that no error carries a secret.
 * The fake is reached directly: az_env_start unsets the proxy variables.
 */
#ifndef SBFS_TEST_AZURE_HELPERS_H
#define SBFS_TEST_AZURE_HELPERS_H

#include <stddef.h>

#include "client/provider.h"
#include "client/provider_azure.h"
#include "client/sbx_error.h"
#include "client/transport.h"
#include "tests/azure_fake.h"

/* The sandbox the cases name. */
#define ID "box"
/* A string literal as (pointer, length). */
#define LIT(s) s, sizeof(s) - 1

struct az_env {
	char *dir;
	struct azure_fake *fake;
	struct provider *prov;
	char authority[256];
	char extra[4][512];
	const char *envp[12];
};

/* Start the fake (aborts the test when it cannot). */
void az_env_start(struct az_env *e);
/* "AZURE_AUTHORITY_HOST=" the fake's token endpoint, into out. */
void az_authority_env(const struct azure_fake *fake, char *out, size_t size);
/* The client-secret environment of the fake's tenant (az not on PATH)
 * into envp, with authority (az_authority_env) as its authority line. */
const char *const *az_secret_envp(const char *envp[6], const char *authority);
/* The same in e->envp, with e->authority. */
const char *const *az_secret_env(struct az_env *e);
/* The settings of a provider over fake (its names, endpoint and pins):
 * records reused for cache_ms, the credential chain reading envp,
 * trusting ca_file. */
void az_fake_config(struct provider_azure_config *cfg,
		    const struct azure_fake *fake, long cache_ms,
		    const char *const *envp, const char *ca_file);
/* A provider over the fake: records reused for cache_ms, the credential
 * chain reading envp, trusting ca_file. */
struct provider *az_env_provider_with(struct az_env *e, long cache_ms,
				      const char *const *envp,
				      const char *ca_file);
/* The same with the client secret and the fake's CA, kept in e->prov. */
struct provider *az_env_provider(struct az_env *e, long cache_ms);
/* The fake with one sandbox, ID, and a provider over it (az_env_provider). */
struct provider *az_env_box(struct az_env *e, long cache_ms);
/* Free e->prov, stop the fake, remove the directory. */
void az_env_stop(struct az_env *e);
struct provider_azure_stats az_stats(struct provider *p);
/* No reason may carry a secret: the client secret, an AAD token the fake
 * issued ("aad.N.hex") or an agent credential. */
void az_assert_clean(const struct sbx_error *err);
void az_ids_free(char **ids, size_t n);
/* One list() through p, its ids dropped: its rc, err filled. */
int az_list(struct provider *p, struct sbx_error *err);
/* The sandbox GETs the fake answered so far. */
unsigned az_record_gets(struct az_env *e);
/* One record() of id through p, which must succeed. */
void az_read_record(struct provider *p, const char *id);
/* dir/name holding text (heap path). */
char *az_write_temp(const char *dir, const char *name, const char *text);
/* A transport over p for real agents behind the fake's proxy. */
struct transport *az_agent_transport(struct provider *p);

#endif
