/* SPDX-License-Identifier: MIT */
/*
 * provider_azure: the Azure provider (doc/azure.md), over the Azure
 * sandbox data plane (doc/transport-rules.md 10) at
 * https://management.<region>.azuredevcompute.io, with Entra ID tokens
 * from azure_auth for the scope https://dynamicsessions.io/.default.
 *
 * Every call carries ?api-version=2026-02-01-preview and the bearer; a 401
 * drops the token and retries that call once. Under the group path
 * /subscriptions/{sub}/resourceGroups/{rg}/sandboxGroups/{group}:
 *
 *   list         GET  {group}/sandboxes           (nextLink pages, bounded)
 *   record       GET  {group}/sandboxes/{id}      (404: gone)
 *   route        the record's ports[] entry for 8971; when there is none,
 *                POST {sandbox}/ports/add, then the record again
 *   credential   GET  {sandbox}/files?path={token path}   (404: -ENOENT)
 *   resume/stop  POST {sandbox}/resume, POST {sandbox}/stop
 *   native_read  GET  {sandbox}/files?path={native root}/{path}
 *   native_exec  POST {sandbox}/executeShellCommand
 *
 * Redirects are refused (a 3xx is an error), a JSON answer must say
 * application/json, and a malformed record is an error; each failure is
 * one sbx_error whose reason names the call and the data plane's status
 * and error, never a token (the caller logs it once).
 *
 * record() always reads the data plane: the transport decides from a
 * record read before every operation (doc/transport-rules.md 1).
 * record_listed(), which only shows a sandbox in a listing, reuses what
 * the last list or read returned for record_cache_ms (default 2 s), except
 * after a resume or stop made through the provider.
 *
 * The route policy (route_allowed): https, a host ending in .adcproxy.io
 * or .azurecontainerapps.io (with a label before it), an optional port, no
 * user or password, no query, no fragment, and the path "/" (or none).
 * The judge refuses to activate a sandbox whose egressPolicy is missing,
 * is not an object, or departs from the documented shape (defaultAction
 * Allow or Deny, well-formed hostRules and rules, a known
 * trafficInspection); a vnetConnectionName is accepted.
 *
 * Thread-safe.
 */
#ifndef SBFS_PROVIDER_AZURE_H
#define SBFS_PROVIDER_AZURE_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>

#include "client/provider.h"

#define PROVIDER_AZURE_TOKEN_PATH "/opt/alien/agent-token"
#define PROVIDER_AZURE_NATIVE_ROOT "/sandbox"
#define PROVIDER_AZURE_RECORD_CACHE_MS 2000L
#define PROVIDER_AZURE_TIMEOUT_MS 60000L /* one JSON call */
#define PROVIDER_AZURE_FILE_TIMEOUT_MS 300000L /* a 32 MiB file read */
#define PROVIDER_AZURE_EXEC_TIMEOUT_MS 300000L /* executeShellCommand */
#define PROVIDER_AZURE_MAX_PAGES 64 /* list pages followed */
#define PROVIDER_AZURE_MAX_SANDBOXES 10000 /* ids listed in all */
#define PROVIDER_AZURE_MAX_RECORD (1024UL * 1024)
#define PROVIDER_AZURE_MAX_CACHED 4096 /* records kept */

/* What the provider is opened with. Strings are copied. */
struct provider_azure_config {
	const char *subscription;
	const char *resource_group;
	const char *group;
	const char *region;
	/* The data-plane base URL, "https://host[:port]"; NULL: the
	 * regional one. */
	const char *endpoint;
	const char *token_path; /* NULL: PROVIDER_AZURE_TOKEN_PATH */
	const char *native_root; /* NULL: PROVIDER_AZURE_NATIVE_ROOT */
	const char *ca_file; /* extra trust for every HTTPS peer */
	/* Pinned name resolution for every peer: "host:port:addr" entries
	 * separated by commas, semicolons or white space. */
	const char *resolve;
	long record_cache_ms; /* listings only; < 0: the default;
				      0: no reuse */
	long connect_timeout_ms; /* <= 0: 10000 */
	/* The environment the credential chain reads (azure_auth.h); NULL:
	 * the process's. */
	const char *const *env;
};

/*
 * Open the provider. Checks the settings (names that fit a URL path, an
 * https endpoint, absolute paths, well-formed pins) and the credential
 * chain's variables, without any request: errors are SBX_INVALID_INPUT
 * (-EINVAL) naming the setting.
 */
int provider_azure_open(const struct provider_azure_config *cfg,
			struct provider **out, struct sbx_error *err)
	__attribute__((warn_unused_result));

/* The settings as sandboxfs takes them (sandboxfs(1), doc/azure.md):
 * -o options win, then the azure_config file, then the environment. */
struct provider_azure_settings {
	char *subscription;
	char *resource_group;
	char *group;
	char *region;
	char *endpoint;
	char *token_path;
	char *native_root;
	char *ca_file;
	char *resolve;
	long record_cache_ms; /* -1 when unset */
};

/*
 * Gather the settings from o (its azure_* fields; o may be NULL), the file
 * o->azure_config names (key=value lines, '#' comments) and env
 * (AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, SANDBOXFS_AZURE_GROUP,
 * SANDBOXFS_AZURE_REGION; "NAME=value" strings, NULL: the process's). A
 * file that cannot be read, a line that is not key=value, an unknown key,
 * a bad number or a required setting that is missing is
 * SBX_INVALID_INPUT (-EINVAL) naming it.
 */
int provider_azure_settings_load(const struct provider_opts *o,
				 const char *const *env,
				 struct provider_azure_settings *out,
				 struct sbx_error *err)
	__attribute__((warn_unused_result));
void provider_azure_settings_cleanup(struct provider_azure_settings *s);

/* provider_azure_settings_load + provider_azure_open, for provider_open. */
int provider_azure_new(const struct provider_opts *o, struct provider **out,
		       struct sbx_error *err)
	__attribute__((warn_unused_result));

/* The route policy (see above), for any URL string. */
bool provider_azure_route_allowed(const char *url);

/* Data-plane calls made, by purpose (diagnostics and tests). */
struct provider_azure_stats {
	unsigned list_pages;
	unsigned record_reads; /* record() and judge() reads that went out */
	unsigned record_hits; /* record_listed() answered from the cache */
	unsigned routes; /* route() calls (one record read each, plus
				  the read after a ports/add) */
	unsigned ports_added;
	unsigned credentials;
	unsigned judges;
	unsigned resumes;
	unsigned stops;
	unsigned native_reads;
	unsigned native_execs;
	unsigned retried_401; /* calls retried with a fresh token */
};

/* p must be an Azure provider. */
void provider_azure_stats(struct provider *p, struct provider_azure_stats *out);

#endif
