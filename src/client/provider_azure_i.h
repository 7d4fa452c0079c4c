/* SPDX-License-Identifier: MIT */
/*
 * provider_azure_i: what the files of the Azure provider share
 * (provider_azure.h is the contract).
 *
 *   provider_azure.c           the provider: records and their cache,
 *                              the agent's route and credential, the
 *                              judge, resume and stop, list, opening
 *   provider_azure_dp.c        the data plane: URLs and their policy,
 *                              one call with its bearer and its errors
 *   provider_azure_native.c    native sessions: files and commands
 *                              through the data plane
 *   provider_azure_settings.c  the settings as sandboxfs takes them
 *
 * Thread-safety: struct azure_priv's lock guards its record cache and
 * stats; everything else in it is read-only once opened.
 */
#ifndef SBFS_PROVIDER_AZURE_I_H
#define SBFS_PROVIDER_AZURE_I_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/proto_azure.h"
#include "client/azure_auth.h"
#include "client/provider.h"
#include "client/provider_azure.h"
#include "client/sbx_error.h"
#include "client/transport.h"

#define AZURE_FAIL_REFUSED "azureRefused"

/* A sandbox object as the last read or list gave it. */
struct entry {
	char id[PROVIDER_ID_MAX + 1];
	struct proto_azure_sandbox sb;
	long long read_ms;
	bool needs_fresh;
	bool judgeable;
	struct entry *next;
};

struct azure_priv {
	struct provider base;
	char *base_url; /* "https://host[:port]", no trailing '/' */
	char *group_path; /* "/subscriptions/.../sandboxGroups/G" */
	char *token_path;
	char *native_root; /* no trailing '/' (but "/" itself) */
	char *ca_file;
	char **resolve; /* NULL-terminated, or NULL */
	long cache_ms;
	long connect_ms;
	struct azure_auth *auth;
	/* The data plane's and the token endpoints' kept-alive connections. */
	struct transport_http_pool *pool;
	pthread_mutex_t lock; /* entries, nentries, stats */
	struct entry *entries;
	size_t nentries;
	struct provider_azure_stats stats;
};

static inline struct azure_priv *azure_priv_of(struct provider *p)
{
	return (struct azure_priv *)p;
}

/* ---- provider_azure.c ------------------------------------------------------ */

/* One more of a stats field. */
void azure_count(struct azure_priv *ap, unsigned *field);
/* Whether id can name a sandbox here. */
bool azure_id_valid(const char *id);
/* SBX_INVALID_INPUT for an id that is not a sandbox name: -ENOENT. */
int azure_bad_id(const char *id, struct sbx_error *err);

/* ---- provider_azure_dp.c --------------------------------------------------- */

/* "https://host[:port][/]" split: the host is host[0..*hostlen) (no user,
 * IP literal, query or fragment; a path of "/" or none). */
bool azure_https_origin(const char *url, const char **host, size_t *hostlen);
/* Whether every byte of s is printable ASCII and none of bad's. */
bool azure_url_bytes_ok(const char *s, const char *bad);

/* One data-plane call. */
struct dp_req {
	const char *what; /* "read sandbox 'x'", for reasons */
	const char *method;
	/* The path after the group path ("/sandboxes/x"), or with absolute
	 * the whole path and query (a nextLink). */
	const char *path;
	bool absolute;
	const char *query; /* more query members, encoded, or NULL */
	const char *content_type;
	const void *body;
	size_t body_len;
	size_t max_body;
	bool json; /* a 2xx answer must be application/json */
	bool may_run; /* a command: an unanswered call may have run */
	long timeout_ms;
};

/* A call named what (for reasons): method on path (after the group
 * path), its answer bounded by max_body within timeout_ms; the rest
 * zero. */
struct dp_req azure_dp_req(const char *what, const char *method,
			   const char *path, size_t max_body, long timeout_ms);
/* r's body: the JSON in body (borrowed). */
void azure_dp_json(struct dp_req *r, const struct buf *body);

/*
 * One data-plane exchange with the bearer, retried once with a fresh
 * token after a 401. Returns 0 for a 2xx answer (resp filled), -ENOENT for
 * a 404 (err says gone; the caller may say more), or another negative
 * errno with err filled.
 */
int azure_dp_call(struct azure_priv *ap, const struct dp_req *r,
		  struct transport_resp *resp, struct sbx_error *err)
	__attribute__((warn_unused_result));
/* GET {sandbox}/files?path=P into resp, at most max bytes; what names the
 * call in reasons. */
int azure_read_file(struct azure_priv *ap, const char *id, const char *path,
		    size_t max, const char *what, struct transport_resp *resp,
		    struct sbx_error *err) __attribute__((warn_unused_result));

/* ---- provider_azure_settings.c --------------------------------------------- */

/* cfg from s: its strings point into s, which must outlive it; the rest of
 * cfg is zero. */
void provider_azure_settings_config(const struct provider_azure_settings *s,
				    struct provider_azure_config *cfg);

/* ---- provider_azure_native.c ----------------------------------------------- */

/* The provider_ops of native sessions. */
int azure_native_read(struct provider *p, const char *id, const char *path,
		      struct buf *out, struct sbx_error *err);
int azure_native_exec(struct provider *p, const char *id, const char *command,
		      const char *cwd, struct provider_exec_result *res,
		      struct sbx_error *err);

#endif
