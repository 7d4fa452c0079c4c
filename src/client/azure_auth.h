/* SPDX-License-Identifier: MIT */
/*
 * azure_auth: Microsoft Entra ID access tokens for the Azure sandbox data
 * plane, got the way Azure tools get them. The credential chain, in order:
 *
 *  1. a client secret: AZURE_TENANT_ID, AZURE_CLIENT_ID and
 *     AZURE_CLIENT_SECRET -> POST {authority}/{tenant}/oauth2/v2.0/token
 *     (grant_type=client_credentials), the authority being
 *     https://login.microsoftonline.com or $AZURE_AUTHORITY_HOST;
 *  2. workload identity: AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID and
 *     AZURE_TENANT_ID -> the same endpoint with the file's contents as a
 *     client assertion (re-read on every fetch: the file rotates);
 *  3. a managed identity: $IDENTITY_ENDPOINT with X-IDENTITY-HEADER:
 *     $IDENTITY_HEADER (App Service and Container Apps), else the instance
 *     metadata service (http://169.254.169.254, or
 *     $AZURE_POD_IDENTITY_AUTHORITY_HOST) with Metadata: true and a 1 s
 *     connect deadline; AZURE_CLIENT_ID, when set, picks a user-assigned
 *     identity;
 *  4. the Azure CLI: `az account get-access-token --scope SCOPE -o json`,
 *     run with fork and exec (no shell) under a deadline.
 *
 * A source whose variables are set is the one used, and its errors are
 * final. The metadata service is only probed when nothing above is set;
 * when it cannot be reached (or has no identity) the CLI is tried. The
 * first source that gives a token is kept for later fetches.
 *
 * Tokens are cached until AZURE_AUTH_MARGIN_S seconds before they expire,
 * then refreshed; when a refresh fails, the token still serves until it
 * expires (the failure is logged) and the next refresh waits
 * AZURE_AUTH_RETRY_S. They are wiped when dropped, never logged and never
 * put on a command line. A caller that got 401 from the data plane with a
 * token drops it with azure_auth_invalidate and asks again (once): that
 * token is never used again. A thread waits for another's fetch no longer
 * than its operation deadline (transport.h). Every failure is one
 * sbx_error whose reason names the source, the endpoint's status and its
 * error code and description, never a secret, assertion or token.
 *
 * It knows nothing about sandboxes. Thread-safe: fetches are serialised
 * (one token request at a time per azure_auth).
 */
#ifndef SBFS_AZURE_AUTH_H
#define SBFS_AZURE_AUTH_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "client/sbx_error.h"

#define AZURE_AUTH_SCOPE "https://dynamicsessions.io/.default"
#define AZURE_AUTH_AUTHORITY "https://login.microsoftonline.com"
#define AZURE_AUTH_IMDS "http://169.254.169.254"
#define AZURE_AUTH_MARGIN_S 300
#define AZURE_AUTH_RETRY_S 30
/* Largest token answer, federated token file and CLI output read. */
#define AZURE_AUTH_MAX_ANSWER (64UL * 1024)

enum azure_auth_source {
	AZURE_AUTH_NONE = 0,
	AZURE_AUTH_CLIENT_SECRET,
	AZURE_AUTH_WORKLOAD_IDENTITY,
	AZURE_AUTH_MANAGED_IDENTITY, /* $IDENTITY_ENDPOINT */
	AZURE_AUTH_IMDS_IDENTITY, /* the instance metadata service */
	AZURE_AUTH_CLI,
};

struct azure_auth_config {
	const char *scope; /* NULL: AZURE_AUTH_SCOPE */
	/* The environment to read the variables above (and PATH for az)
	 * from, as "NAME=value" strings, NULL-terminated; NULL: the
	 * process's. Copied at azure_auth_new; az also runs with it. */
	const char *const *env;
	const char *ca_file; /* extra trust for HTTPS token endpoints */
	const char *const *resolve; /* pinned name resolution, or NULL */
	long connect_timeout_ms; /* token endpoints, default 10000 */
	long timeout_ms; /* one token request, default 30000 */
	long cli_timeout_ms; /* az, default 60000 */
	/* Kept-alive connections to the token endpoints (borrowed: it
	 * outlives the chain), or NULL: a connection per request. */
	struct transport_http_pool *pool;
};

struct azure_auth;

/*
 * Make a credential chain from cfg (borrowed strings are copied). Checks
 * what can be checked without a request: an authority or identity
 * endpoint that is not an http(s) URL, a tenant that is not a tenant name,
 * is SBX_INVALID_INPUT (-EINVAL).
 */
int azure_auth_new(const struct azure_auth_config *cfg, struct azure_auth **out,
		   struct sbx_error *err) __attribute__((warn_unused_result));
/* Wipe the cached token and free. NULL-safe. */
void azure_auth_free(struct azure_auth *a);

/*
 * An "Authorization: Bearer <token>" header line for a data-plane request
 * (heap; the caller wipes and frees it with token_free), from the cache or
 * a fresh fetch. *gen (may be NULL) identifies the token for
 * azure_auth_invalidate. Failures: SBX_UNREACHABLE (-EIO, retryable) when
 * a token endpoint could not be reached or failed on its side,
 * SBX_COMMAND_FAILED "azureAuthRefused" (-EACCES) when it refused the
 * credential, SBX_INVALID_INPUT (-ENOKEY) when no source is available.
 */
int azure_auth_header(struct azure_auth *a, char **header, unsigned *gen,
		      struct sbx_error *err)
	__attribute__((warn_unused_result));

/* Drop the cached token if it is still generation gen (a data-plane 401
 * refused it), so the next azure_auth_header fetches a new one. */
void azure_auth_invalidate(struct azure_auth *a, unsigned gen);

struct buf;

/* The rest of fd read into b (at most b->max bytes: -EFBIG past them),
 * fd closed and the bytes on the stack wiped: 0 or -errno. The reader of
 * the federated token file, and of the settings file (a secret may sit in
 * either). */
int azure_auth_read_fd(int fd, struct buf *b)
	__attribute__((warn_unused_result));

#endif
