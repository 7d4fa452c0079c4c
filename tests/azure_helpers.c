/* SPDX-License-Identifier: MIT */
/* azure_helpers: see azure_helpers.h. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "tests/azure_helpers.h"
#include "tests/helpers.h"

void az_env_start(struct az_env *e)
{
	char errbuf[256] = "";

	memset(e, 0, sizeof(*e));
	/* The fake is reached directly unless a case sets a proxy. */
	unsetenv("HTTPS_PROXY");
	unsetenv("https_proxy");
	unsetenv("ALL_PROXY");
	unsetenv("all_proxy");
	unsetenv("NO_PROXY");
	unsetenv("no_proxy");
	e->dir = th_tmpdir("azure");
	ck_assert_msg(
		azure_fake_start(e->dir, &e->fake, errbuf, sizeof(errbuf)) == 0,
		"the fake Azure did not start: %s", errbuf);
	az_authority_env(e->fake, e->authority, sizeof(e->authority));
}

void az_authority_env(const struct azure_fake *fake, char *out, size_t size)
{
	snprintf(out, size, "AZURE_AUTHORITY_HOST=%s",
		 azure_fake_authority(fake));
}

const char *const *az_secret_envp(const char *envp[6], const char *authority)
{
	envp[0] = "AZURE_TENANT_ID=" AZURE_FAKE_TENANT;
	envp[1] = "AZURE_CLIENT_ID=" AZURE_FAKE_CLIENT_ID;
	envp[2] = "AZURE_CLIENT_SECRET=" AZURE_FAKE_SECRET;
	envp[3] = authority;
	envp[4] = "PATH=/nonexistent";
	envp[5] = NULL;
	return envp;
}

/* The client-secret environment, with extra "NAME=value" lines. */
const char *const *az_secret_env(struct az_env *e)
{
	return az_secret_envp(e->envp, e->authority);
}

void az_fake_config(struct provider_azure_config *cfg,
		    const struct azure_fake *fake, long cache_ms,
		    const char *const *envp, const char *ca_file)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->subscription = AZURE_FAKE_SUBSCRIPTION;
	cfg->resource_group = AZURE_FAKE_RESOURCE_GROUP;
	cfg->group = AZURE_FAKE_GROUP;
	cfg->region = AZURE_FAKE_REGION;
	cfg->endpoint = azure_fake_endpoint(fake);
	cfg->ca_file = ca_file;
	cfg->resolve = azure_fake_resolve(fake);
	cfg->record_cache_ms = cache_ms;
	cfg->connect_timeout_ms = 2000;
	cfg->env = envp;
}

struct provider *az_env_provider_with(struct az_env *e, long cache_ms,
				      const char *const *envp,
				      const char *ca_file)
{
	struct provider_azure_config cfg;
	struct provider *p = NULL;
	struct sbx_error err;
	int rc;

	az_fake_config(&cfg, e->fake, cache_ms, envp, ca_file);
	sbx_error_clear(&err);
	rc = provider_azure_open(&cfg, &p, &err);
	ck_assert_msg(rc == 0, "provider_azure_open: %s", err.reason);
	return p;
}

struct provider *az_env_provider(struct az_env *e, long cache_ms)
{
	e->prov = az_env_provider_with(e, cache_ms, az_secret_env(e),
				       azure_fake_ca_file(e->fake));
	return e->prov;
}

void az_env_stop(struct az_env *e)
{
	provider_free(e->prov);
	azure_fake_stop(e->fake);
	th_rmtree_free(e->dir);
}

struct provider_azure_stats az_stats(struct provider *p)
{
	struct provider_azure_stats st;

	provider_azure_stats(p, &st);
	return st;
}

/* No reason may carry a secret: the client secret, an AAD token the fake
 * issued ("aad.N.hex") or an agent credential. */
void az_assert_clean(const struct sbx_error *err)
{
	char text[1024];

	sbx_error_describe(err, text, sizeof(text));
	ck_assert_msg(strstr(text, AZURE_FAKE_SECRET) == NULL, "%s", text);
	ck_assert_msg(strstr(text, "aad.") == NULL, "%s", text);
	ck_assert_msg(strstr(text, "Bearer") == NULL, "%s", text);
	ck_assert_msg(strstr(text, AZURE_FAKE_ASSERTION) == NULL, "%s", text);
}

void az_ids_free(char **ids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

char *az_write_temp(const char *dir, const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name);

	th_write_file(path, text, strlen(text));
	return path;
}

struct transport *az_agent_transport(struct provider *p)
{
	struct transport_config cfg;
	struct transport *t = NULL;

	transport_config_defaults(&cfg);
	cfg.response_timeout_ms = 10000;
	cfg.connect_timeout_ms = 2000;
	cfg.ready_interval_ms = 50;
	cfg.ready_timeout_ms = 10000;
	ck_assert_int_eq(transport_new(p, &cfg, &t), 0);
	return t;
}

void az_read_record(struct provider *p, const char *id)
{
	struct provider_record rec;
	struct sbx_error err;

	sbx_error_clear(&err);
	ck_assert_msg(p->ops->record(p, id, &rec, &err) == 0, "%s", err.reason);
	provider_record_cleanup(&rec);
}

unsigned az_record_gets(struct az_env *e)
{
	return azure_fake_calls(e->fake, AZF_GET);
}

int az_list(struct provider *p, struct sbx_error *err)
{
	char **ids = NULL;
	size_t n = 0;
	int rc;

	sbx_error_clear(err);
	rc = p->ops->list(p, &ids, &n, err);
	if (rc == 0)
		az_ids_free(ids, n);
	return rc;
}

struct provider *az_env_box(struct az_env *e, long cache_ms)
{
	az_env_start(e);
	azure_fake_add(e->fake, ID);
	return az_env_provider(e, cache_ms);
}
