/* SPDX-License-Identifier: MIT */
/*
 * azure_auth: the Entra ID credential chain (see azure_auth.h). HTTP goes
 * through transport_http (no redirects, bounded answers, deadlines); the
 * CLI runs as a child process with a bounded output and a deadline.
 *
 * Secrets (the client secret, the federated assertion, tokens) live in
 * heap strings that are wiped before they are freed; the request bodies
 * that carry them are wiped too. Error reasons are built from the source's
 * name, HTTP statuses and the endpoint's own error code and description,
 * scrubbed of the secret in case an endpoint ever echoed it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "client/azure_auth.h"
#include "client/azure_auth_i.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/proto_azure.h"
#include "common/strv.h"
#include "common/token.h"
#include "common/xalloc.h"
#include "client/transport.h"

extern char **environ;

#define MI_API_VERSION "2019-08-01"
#define IMDS_API_VERSION "2018-02-01"
#define IMDS_CONNECT_MS 1000L
#define JWT_BEARER "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/* "client secret", "workload identity", ... ("none"). */
static const char *source_name(enum azure_auth_source s)
{
	switch (s) {
	case AZURE_AUTH_CLIENT_SECRET:
		return "client secret";
	case AZURE_AUTH_WORKLOAD_IDENTITY:
		return "workload identity";
	case AZURE_AUTH_MANAGED_IDENTITY:
		return "managed identity";
	case AZURE_AUTH_IMDS_IDENTITY:
		return "managed identity (instance metadata)";
	case AZURE_AUTH_CLI:
		return "Azure CLI";
	case AZURE_AUTH_NONE:
		break;
	}
	return "none";
}

int64_t azure_auth_now_s(void)
{
	return (int64_t)time(NULL);
}

/* ---- the environment -------------------------------------------------- */

const char *azure_auth_env(char *const *env, const char *name)
{
	size_t n = strlen(name), i;

	for (i = 0; env != NULL && env[i] != NULL; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return env[i][n + 1] != '\0' ? env[i] + n + 1 : NULL;
	return NULL;
}

static char *dup_or_null(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

/* Free the copied environment, wiping each entry (it may hold a
 * secret). */
static void env_free(char **env)
{
	size_t i;

	for (i = 0; env != NULL && env[i] != NULL; i++)
		token_free(env[i]);
	free(env);
}

/* Tenant and client ids go into URL paths and form fields: GUIDs or
 * domain names only. */
static bool plain_name(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	return n > 0 && n <= 128 &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789.-_") == n;
}

/* An http(s) URL without user, query or fragment; a copy without a
 * trailing '/'. */
static char *endpoint_url(const char *s, bool https_only)
{
	size_t n;

	if (s == NULL)
		return NULL;
	if (strncmp(s, "https://", 8) != 0 &&
	    (https_only || strncmp(s, "http://", 7) != 0))
		return NULL;
	if (strpbrk(s, "@?# \t\r\n\\") != NULL)
		return NULL;
	n = strlen(s);
	while (n > 0 && s[n - 1] == '/')
		n--;
	return xstrndup(s, n);
}

/* ---- lifetime ---------------------------------------------------------- */

int azure_auth_new(const struct azure_auth_config *cfg, struct azure_auth **out,
		   struct sbx_error *err)
{
	struct azure_auth *a = xcalloc(1, sizeof(*a));
	const char *authority, *identity, *imds, *v;
	size_t n;

	pthread_mutex_init(&a->lock, NULL);
	a->scope = xstrdup(cfg->scope != NULL ? cfg->scope : AZURE_AUTH_SCOPE);
	n = strlen(a->scope);
	if (n > 9 && strcmp(a->scope + n - 9, "/.default") == 0)
		n -= 9;
	a->resource = xstrndup(a->scope, n);
	a->env = strv_dup_null(cfg->env != NULL ? cfg->env
						: (const char *const *)environ);
	a->ca_file = dup_or_null(cfg->ca_file);
	a->resolve = cfg->resolve != NULL ? strv_dup_null(cfg->resolve) : NULL;
	a->connect_ms =
		cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 10000;
	a->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
	a->cli_ms = cfg->cli_timeout_ms > 0 ? cfg->cli_timeout_ms : 60000;
	a->pool = cfg->pool;

	a->tenant = dup_or_null(azure_auth_env(a->env, "AZURE_TENANT_ID"));
	a->client_id = dup_or_null(azure_auth_env(a->env, "AZURE_CLIENT_ID"));
	a->client_secret =
		dup_or_null(azure_auth_env(a->env, "AZURE_CLIENT_SECRET"));
	a->federated_file = dup_or_null(
		azure_auth_env(a->env, "AZURE_FEDERATED_TOKEN_FILE"));
	a->identity_header =
		dup_or_null(azure_auth_env(a->env, "IDENTITY_HEADER"));

	authority = azure_auth_env(a->env, "AZURE_AUTHORITY_HOST");
	a->authority = endpoint_url(
		authority ? authority : AZURE_AUTH_AUTHORITY, true);
	if (a->authority == NULL) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "azure: AZURE_AUTHORITY_HOST is not an https URL "
			      "without user, query or fragment");
		goto bad;
	}
	identity = azure_auth_env(a->env, "IDENTITY_ENDPOINT");
	if (identity != NULL) {
		/* The endpoint may carry its own query in some hosts; only
		 * the scheme and the absence of a user matter here. */
		if ((strncmp(identity, "http://", 7) != 0 &&
		     strncmp(identity, "https://", 8) != 0) ||
		    strpbrk(identity, "@# \t\r\n\\") != NULL) {
			sbx_error_set(err, SBX_INVALID_INPUT, NULL,
				      "azure: IDENTITY_ENDPOINT is not an "
				      "http(s) URL");
			goto bad;
		}
		a->identity_endpoint = xstrdup(identity);
	}
	imds = azure_auth_env(a->env, "AZURE_POD_IDENTITY_AUTHORITY_HOST");
	a->imds = endpoint_url(imds ? imds : AZURE_AUTH_IMDS, false);
	if (a->imds == NULL) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "azure: AZURE_POD_IDENTITY_AUTHORITY_HOST is not "
			      "an http(s) URL");
		goto bad;
	}
	v = NULL;
	if (a->tenant != NULL && !plain_name(a->tenant))
		v = "AZURE_TENANT_ID";
	else if (a->client_id != NULL && !plain_name(a->client_id))
		v = "AZURE_CLIENT_ID";
	if (v != NULL) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "azure: %s is not a tenant or client id", v);
		goto bad;
	}
	*out = a;
	return 0;
bad:
	err->err = EINVAL;
	azure_auth_free(a);
	return -EINVAL;
}

void azure_auth_free(struct azure_auth *a)
{
	if (a == NULL)
		return;
	token_free(a->token);
	token_free(a->client_secret);
	env_free(a->env);
	strv_free_null(a->resolve);
	free(a->scope);
	free(a->resource);
	free(a->tenant);
	free(a->client_id);
	free(a->authority);
	free(a->federated_file);
	free(a->identity_endpoint);
	token_free(a->identity_header);
	free(a->imds);
	free(a->ca_file);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* ---- answers ------------------------------------------------------------ */

/* Form encoding (application/x-www-form-urlencoded, also used for URL
 * queries), unreserved bytes as they are. A member follows an '&' unless
 * it starts the buffer or a query. */
static int form_add(struct buf *b, const char *key, const char *value)
{
	int rc = 0;

	if (b->len > 0 && b->data[b->len - 1] != '?' &&
	    b->data[b->len - 1] != '&')
		rc = buf_append(b, "&", 1);
	if (rc == 0)
		rc = buf_append_str(b, key);
	if (rc == 0)
		rc = buf_append(b, "=", 1);
	if (rc == 0)
		rc = buf_append_escaped(b, value, NULL);
	return rc;
}

/* Replace every occurrence of secret in text (an endpoint must never be
 * able to make us log it). */
static void scrub(char *text, const char *secret)
{
	size_t n = secret != NULL ? strlen(secret) : 0;
	char *hit;

	if (n < 4)
		return;
	while ((hit = strstr(text, secret)) != NULL)
		memset(hit, '*', n);
}

static bool json_type(const char *ctype)
{
	return strncasecmp(ctype, "application/json", 16) == 0 &&
	       (ctype[16] == '\0' || ctype[16] == ';' || ctype[16] == ' ');
}

/*
 * Turn a token endpoint's answer into a token: 200 with a JSON token, or
 * one clear error naming the source, the status and the endpoint's error.
 */
static int take_answer(struct azure_auth *a, enum azure_auth_source src,
		       const struct transport_resp *resp,
		       struct proto_azure_token *tok, struct sbx_error *err)
{
	const char *name = source_name(src);
	char code[96], msg[320];
	const char *why = "";
	int rc;

	if (resp->status == 200) {
		if (!json_type(resp->content_type)) {
			sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
				      "azure: the %s token endpoint answered "
				      "with content type '%s', not JSON",
				      name, resp->content_type);
			return -EIO;
		}
		rc = proto_azure_token_decode(resp->body.data, resp->body.len,
					      azure_auth_now_s(), tok, &why);
		if (rc < 0) {
			sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
				      "azure: the %s token answer is "
				      "malformed: %s",
				      name, why);
			return -EIO;
		}
		return 0;
	}
	proto_azure_error_decode(resp->body.data, resp->body.len, code,
				 sizeof(code), msg, sizeof(msg));
	scrub(msg, a->client_secret);
	scrub(code, a->client_secret);
	if (resp->status >= 300 && resp->status < 400) {
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "azure: the %s token endpoint answered with a "
			      "redirect (%ld), which is refused",
			      name, resp->status);
		return -EIO;
	}
	if (resp->status >= 500 || resp->status == 429) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: the %s token endpoint failed: HTTP "
			      "%ld%s%s%s%s",
			      name, resp->status, code[0] ? " " : "", code,
			      msg[0] ? ": " : "", msg);
		return -EIO;
	}
	return sbx_error_fail(
		err, SBX_COMMAND_FAILED, AZURE_AUTH_FAIL_REFUSED, EACCES,
		"azure: the %s credential was refused: HTTP %ld%s%s%s%s", name,
		resp->status, code[0] ? " " : "", code, msg[0] ? ": " : "",
		msg);
}

static void http_failed(struct sbx_error *err, enum azure_auth_source src,
			const struct sbx_error *why)
{
	char reason[sizeof(why->reason)];

	snprintf(reason, sizeof(reason), "%s", why->reason);
	sbx_error_set(err, SBX_UNREACHABLE, NULL,
		      "azure: the %s token endpoint could not be reached: %s",
		      source_name(src), reason);
}

/* ---- the sources ------------------------------------------------------- */

/*
 * Send req to src's token endpoint (connect_ms to connect) and take its
 * answer. *unavailable (may be NULL: the metadata service only) is set
 * when the endpoint could not be reached or has no identity for us.
 */
static int token_exchange(struct azure_auth *a, enum azure_auth_source src,
			  struct transport_http_req *req, long connect_ms,
			  struct proto_azure_token *tok, bool *unavailable,
			  struct sbx_error *err)
{
	struct transport_resp resp;
	struct sbx_error herr;
	int rc;

	req->max_body = AZURE_AUTH_MAX_ANSWER;
	req->ca_file = a->ca_file;
	req->resolve = (const char *const *)a->resolve;
	req->connect_timeout_ms = connect_ms;
	req->timeout_ms = a->timeout_ms;
	req->pool = a->pool;
	transport_resp_init(&resp);
	sbx_error_clear(&herr);
	rc = transport_http(req, &resp, &herr);
	if (rc < 0) {
		if (unavailable != NULL)
			*unavailable = true;
		http_failed(err, src, &herr);
		rc = -EIO;
	} else {
		if (unavailable != NULL &&
		    (resp.status == 400 || resp.status == 404))
			*unavailable = true;
		rc = take_answer(a, src, &resp, tok, err);
	}
	if (resp.body.data != NULL)
		token_wipe(resp.body.data, resp.body.len);
	transport_resp_cleanup(&resp);
	return rc;
}

static int post_token(struct azure_auth *a, enum azure_auth_source src,
		      struct buf *form, struct proto_azure_token *tok,
		      struct sbx_error *err)
{
	static const char *const headers[] = {"Accept: application/json", NULL};
	struct transport_http_req req;
	char *url;
	int rc;

	url = xasprintf("%s/%s/oauth2/v2.0/token", a->authority, a->tenant);
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url;
	req.headers = headers;
	req.content_type = "application/x-www-form-urlencoded";
	req.body = form->data;
	req.body_len = form->len;
	rc = token_exchange(a, src, &req, a->connect_ms, tok, NULL, err);
	free(url);
	return rc;
}

static int client_secret(struct azure_auth *a, struct proto_azure_token *tok,
			 struct sbx_error *err)
{
	struct buf form = BUF_INIT(0);
	int rc;

	rc = form_add(&form, "grant_type", "client_credentials");
	if (rc == 0)
		rc = form_add(&form, "client_id", a->client_id);
	if (rc == 0)
		rc = form_add(&form, "client_secret", a->client_secret);
	if (rc == 0)
		rc = form_add(&form, "scope", a->scope);
	if (rc == 0)
		rc = post_token(a, AZURE_AUTH_CLIENT_SECRET, &form, tok, err);
	else
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: out of memory");
	if (form.data != NULL)
		token_wipe(form.data, form.len);
	buf_cleanup(&form);
	return rc;
}

int azure_auth_read_fd(int fd, struct buf *b)
{
	char chunk[4096];
	ssize_t n;
	int rc = 0;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		rc = buf_append(b, chunk, (size_t)n);
		if (rc < 0)
			break;
	}
	if (n < 0)
		rc = -errno;
	close(fd);
	token_wipe(chunk, sizeof(chunk));
	return rc;
}

/* The federated token file, read whole (bounded) and trimmed of trailing
 * whitespace. */
static int read_assertion(const char *path, char **out, struct sbx_error *err)
{
	struct buf b = BUF_INIT(AZURE_AUTH_MAX_ANSWER);
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		return sbx_error_fail(
			err, SBX_COMMAND_FAILED, AZURE_AUTH_FAIL_REFUSED,
			EACCES,
			"azure: the workload identity token file %s "
			"cannot be read: %s",
			path, strerror(-rc));
	}
	rc = azure_auth_read_fd(fd, &b);
	while (rc == 0 && b.len > 0 &&
	       strchr(" \t\r\n", b.data[b.len - 1]) != NULL)
		b.data[--b.len] = '\0';
	if (rc == 0 && (b.len == 0 || memchr(b.data, '\0', b.len) != NULL))
		rc = -EINVAL;
	if (rc < 0) {
		sbx_error_set(err, SBX_COMMAND_FAILED, AZURE_AUTH_FAIL_REFUSED,
			      "azure: the workload identity token file %s is "
			      "%s",
			      path,
			      rc == -EFBIG    ? "too large"
			      : rc == -EINVAL ? "empty or not text"
					      : strerror(-rc));
		err->err = EACCES;
		if (b.data != NULL)
			token_wipe(b.data, b.len);
		buf_cleanup(&b);
		return -EACCES;
	}
	*out = buf_take(&b, NULL);
	return 0;
}

static int workload_identity(struct azure_auth *a,
			     struct proto_azure_token *tok,
			     struct sbx_error *err)
{
	struct buf form = BUF_INIT(0);
	char *assertion = NULL;
	int rc;

	rc = read_assertion(a->federated_file, &assertion, err);
	if (rc < 0)
		return rc;
	rc = form_add(&form, "grant_type", "client_credentials");
	if (rc == 0)
		rc = form_add(&form, "client_id", a->client_id);
	if (rc == 0)
		rc = form_add(&form, "client_assertion_type", JWT_BEARER);
	if (rc == 0)
		rc = form_add(&form, "client_assertion", assertion);
	if (rc == 0)
		rc = form_add(&form, "scope", a->scope);
	if (rc == 0)
		rc = post_token(a, AZURE_AUTH_WORKLOAD_IDENTITY, &form, tok,
				err);
	else
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: out of memory");
	token_free(assertion);
	if (form.data != NULL)
		token_wipe(form.data, form.len);
	buf_cleanup(&form);
	return rc;
}

/*
 * A managed identity endpoint. *unavailable is set when the endpoint
 * could not be reached or has no identity for us (the metadata service
 * then lets the chain go on).
 */
static int managed_identity(struct azure_auth *a, enum azure_auth_source src,
			    struct proto_azure_token *tok, bool *unavailable,
			    struct sbx_error *err)
{
	struct transport_http_req req;
	struct buf url = BUF_INIT(0);
	const char *headers[3] = {"Accept: application/json", NULL, NULL};
	char *secret_header = NULL;
	bool imds = src == AZURE_AUTH_IMDS_IDENTITY;
	int rc;

	*unavailable = false;
	if (imds) {
		rc = buf_printf(&url, "%s/metadata/identity/oauth2/token?",
				a->imds);
		if (rc == 0)
			rc = form_add(&url, "api-version", IMDS_API_VERSION);
		headers[1] = "Metadata: true";
	} else {
		rc = buf_printf(&url, "%s%c", a->identity_endpoint,
				strchr(a->identity_endpoint, '?') ? '&' : '?');
		if (rc == 0)
			rc = form_add(&url, "api-version", MI_API_VERSION);
		secret_header =
			xasprintf("X-IDENTITY-HEADER: %s", a->identity_header);
		headers[1] = secret_header;
	}
	if (rc == 0)
		rc = form_add(&url, "resource", a->resource);
	if (rc == 0 && a->client_id != NULL)
		rc = form_add(&url, "client_id", a->client_id);
	if (rc < 0) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: out of memory");
		rc = -EIO;
		goto out;
	}
	memset(&req, 0, sizeof(req));
	req.method = "GET";
	req.url = url.data;
	req.headers = headers;
	/* Not on Azure (or no metadata service): the chain goes on. */
	rc = token_exchange(a, src, &req,
			    imds ? IMDS_CONNECT_MS : a->connect_ms, tok,
			    imds ? unavailable : NULL, err);
out:
	token_free(secret_header);
	buf_cleanup(&url);
	return rc;
}

/* ---- the chain ----------------------------------------------------------- */

static enum azure_auth_source configured(const struct azure_auth *a)
{
	if (a->tenant != NULL && a->client_id != NULL &&
	    a->client_secret != NULL)
		return AZURE_AUTH_CLIENT_SECRET;
	if (a->federated_file != NULL && a->client_id != NULL &&
	    a->tenant != NULL)
		return AZURE_AUTH_WORKLOAD_IDENTITY;
	if (a->identity_endpoint != NULL && a->identity_header != NULL)
		return AZURE_AUTH_MANAGED_IDENTITY;
	return AZURE_AUTH_NONE;
}

static int fetch_from(struct azure_auth *a, enum azure_auth_source src,
		      struct proto_azure_token *tok, bool *unavailable,
		      struct sbx_error *err)
{
	*unavailable = false;
	switch (src) {
	case AZURE_AUTH_CLIENT_SECRET:
		return client_secret(a, tok, err);
	case AZURE_AUTH_WORKLOAD_IDENTITY:
		return workload_identity(a, tok, err);
	case AZURE_AUTH_MANAGED_IDENTITY:
	case AZURE_AUTH_IMDS_IDENTITY:
		return managed_identity(a, src, tok, unavailable, err);
	case AZURE_AUTH_CLI:
		return azure_auth_cli(a, tok, unavailable, err);
	case AZURE_AUTH_NONE:
		break;
	}
	return -EINVAL;
}

static int fetch(struct azure_auth *a, struct proto_azure_token *tok,
		 enum azure_auth_source *used, struct sbx_error *err)
{
	enum azure_auth_source src = a->kept ? a->kept : configured(a);
	bool unavailable;
	int rc;

	if (src != AZURE_AUTH_NONE) {
		*used = src;
		return fetch_from(a, src, tok, &unavailable, err);
	}
	if (!a->imds_unavailable) {
		rc = fetch_from(a, AZURE_AUTH_IMDS_IDENTITY, tok, &unavailable,
				err);
		if (rc == 0 || !unavailable) {
			*used = AZURE_AUTH_IMDS_IDENTITY;
			return rc;
		}
		log_debug("azure: no managed identity here (%s); trying the "
			  "Azure CLI",
			  err->reason);
		a->imds_unavailable = true;
	}
	*used = AZURE_AUTH_CLI;
	rc = fetch_from(a, AZURE_AUTH_CLI, tok, &unavailable, err);
	if (rc < 0 && unavailable) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "azure: no credential: set AZURE_TENANT_ID, "
			      "AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or "
			      "AZURE_FEDERATED_TOKEN_FILE), run where a "
			      "managed identity is available, or sign in with "
			      "'az login'");
		err->err = ENOKEY;
		rc = -ENOKEY;
	}
	return rc;
}

/* Another thread may be fetching a token: wait no longer than the
 * operation deadline. */
static int lock_until_deadline(struct azure_auth *a, struct sbx_error *err)
{
	if (transport_op_lock(&a->lock) == 0)
		return 0;
	return sbx_error_fail(err, SBX_UNREACHABLE, NULL, EIO,
			      "azure: the operation's deadline passed while "
			      "another request fetched an access token");
}

int azure_auth_header(struct azure_auth *a, char **header, unsigned *gen,
		      struct sbx_error *err)
{
	struct proto_azure_token tok = {NULL, 0};
	enum azure_auth_source used = AZURE_AUTH_NONE;
	int64_t now;
	int rc;

	rc = lock_until_deadline(a, err);
	if (rc < 0)
		return rc;
	now = azure_auth_now_s();
	/* A token inside its last AZURE_AUTH_MARGIN_S is refreshed; while
	 * a refresh fails, the token serves until it really expires, and
	 * the next refresh waits AZURE_AUTH_RETRY_S (as the Azure SDKs do),
	 * so that a token endpoint's outage does not fail calls a valid
	 * token can still make (doc/transport-rules.md 10). */
	if (a->token == NULL || now >= a->expires_on - AZURE_AUTH_MARGIN_S) {
		bool usable = a->token != NULL && now < a->expires_on;

		if (usable && now < a->retry_after)
			goto use;
		rc = fetch(a, &tok, &used, err);
		if (rc < 0 && usable) {
			char text[1024];

			a->retry_after = now + AZURE_AUTH_RETRY_S;
			log_warn("azure: refreshing the access token failed; "
				 "the current one serves for %lld s more: %s",
				 (long long)(a->expires_on - now),
				 sbx_error_describe(err, text, sizeof(text)));
			sbx_error_clear(err);
			rc = 0;
			goto use;
		}
		if (rc < 0) {
			token_free(a->token);
			a->token = NULL;
			if (err->err == 0)
				err->err = EIO;
			goto out;
		}
		/* A token closer to its end than the margin still serves
		 * this request; the next one fetches again. */
		token_free(a->token);
		a->token = tok.token;
		a->expires_on = tok.expires_on;
		a->retry_after = 0;
		tok.token = NULL;
		a->gen++;
		a->kept = used;
		log_debug("azure: got an access token from the %s source, "
			  "valid for %lld s",
			  source_name(used),
			  (long long)(a->expires_on - azure_auth_now_s()));
	}
use:
	*header = xasprintf("Authorization: Bearer %s", a->token);
	if (gen != NULL)
		*gen = a->gen;
out:
	pthread_mutex_unlock(&a->lock);
	proto_azure_token_cleanup(&tok);
	return rc;
}

void azure_auth_invalidate(struct azure_auth *a, unsigned gen)
{
	pthread_mutex_lock(&a->lock);
	if (a->token != NULL && a->gen == gen) {
		token_free(a->token);
		a->token = NULL;
	}
	pthread_mutex_unlock(&a->lock);
}
