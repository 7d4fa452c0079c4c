/* SPDX-License-Identifier: MIT */
/*
 * azure_auth_i: what the files of the Entra ID credential chain share
 * (azure_auth.h is the contract).
 *
 *   azure_auth.c      the chain: the environment, the HTTP sources
 *                     (client secret, workload identity, managed
 *                     identities), the token cache
 *   azure_auth_cli.c  the Azure CLI source: az run as a child
 *
 * Thread-safety: struct azure_auth's lock is held across a fetch (one
 * token request at a time); the sources run under it.
 */
#ifndef SBFS_AZURE_AUTH_I_H
#define SBFS_AZURE_AUTH_I_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/proto_azure.h"
#include "client/azure_auth.h"
#include "client/sbx_error.h"

/* The failure kind of a credential a source refused. */
#define AZURE_AUTH_FAIL_REFUSED "azureAuthRefused"

struct azure_auth {
	pthread_mutex_t lock;
	char *scope;
	char *resource; /* the scope without "/.default", for identities */
	char **env; /* the environment snapshot (az runs with it) */
	char *tenant;
	char *client_id;
	char *client_secret;
	char *authority;
	char *federated_file;
	char *identity_endpoint;
	char *identity_header;
	char *imds;
	char *ca_file;
	char **resolve;
	long connect_ms;
	long timeout_ms;
	struct transport_http_pool *pool; /* borrowed, or NULL */
	long cli_ms;
	enum azure_auth_source kept; /* the source that worked */
	bool imds_unavailable;
	/* The cached token. */
	char *token;
	int64_t expires_on;
	int64_t retry_after; /* a failed refresh: none before this */
	unsigned gen;
};

/* ---- azure_auth.c ------------------------------------------------------------ */

/* The wall clock in seconds (tokens expire by it). */
int64_t azure_auth_now_s(void);
/* NAME's value in an environment snapshot; NULL when unset or empty. */
const char *azure_auth_env(char *const *env, const char *name);

/* ---- azure_auth_cli.c -------------------------------------------------------- */

/* A token from `az account get-access-token`. *unavailable is set when az
 * is not on the snapshot's PATH (the chain has nothing left to try). */
int azure_auth_cli(struct azure_auth *a, struct proto_azure_token *tok,
		   bool *unavailable, struct sbx_error *err)
	__attribute__((warn_unused_result));

#endif
