/* SPDX-License-Identifier: MIT */
/*
 * provider_azure_dp: the Azure sandbox data plane (provider_azure_i.h):
 * its URLs and the route policy, and one call through transport_http
 * with the bearer, its 401 retry and the errors it gives, never naming
 * the token.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/token.h"
#include "common/xalloc.h"
#include "client/provider_azure_i.h"

/* ---- URLs ------------------------------------------------------------- */

static bool ends_with_ci(const char *s, size_t n, const char *suffix)
{
	size_t m = strlen(suffix);

	return n > m && strncasecmp(s + n - m, suffix, m) == 0;
}

/* A DNS name: letters, digits, '-' and '.', no empty label. */
static bool dns_name(const char *h, size_t n)
{
	size_t i;

	if (n == 0 || n > 253 || h[0] == '.' || h[n - 1] == '.')
		return false;
	for (i = 0; i < n; i++) {
		char c = h[i];

		if (c == '.' && h[i + 1] == '.')
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* Whether every byte of s is printable ASCII (no space, no control
 * byte) and none of the bytes of bad. */
bool azure_url_bytes_ok(const char *s, const char *bad)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if ((unsigned char)s[i] <= 0x20 ||
		    (unsigned char)s[i] >= 0x7f || strchr(bad, s[i]) != NULL)
			return false;
	return true;
}

/*
 * Split "https://host[:port][/]" (nothing else after the authority: no
 * user, IP literal brackets, query or fragment, and a path of "/" or
 * none). The host is host[0..*hostlen).
 */
bool azure_https_origin(const char *url, const char **host, size_t *hostlen)
{
	const char *a, *end, *colon;

	if (url == NULL || strncmp(url, "https://", 8) != 0 ||
	    !azure_url_bytes_ok(url, "\\%"))
		return false;
	a = url + 8;
	end = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(end - a)) != NULL ||
	    memchr(a, '[', (size_t)(end - a)) != NULL)
		return false;
	colon = memchr(a, ':', (size_t)(end - a));
	if (colon != NULL) {
		size_t digits = (size_t)(end - colon - 1);
		long port;

		if (digits == 0 || digits > 5 ||
		    strspn(colon + 1, "0123456789") < digits)
			return false;
		port = strtol(colon + 1, NULL, 10);
		if (port < 1 || port > 65535)
			return false;
	} else {
		colon = end;
	}
	if (!dns_name(a, (size_t)(colon - a)))
		return false;
	/* What follows the authority: nothing, or exactly "/". */
	if (!(*end == '\0' || (end[0] == '/' && end[1] == '\0')))
		return false;
	*host = a;
	*hostlen = (size_t)(colon - a);
	return true;
}

bool provider_azure_route_allowed(const char *url)
{
	const char *host;
	size_t n;

	/* The URL comes from an authenticated provider answer; still refuse
	 * anything but the Azure proxies before a credential goes there. */
	if (!azure_https_origin(url, &host, &n))
		return false;
	return ends_with_ci(host, n, ".adcproxy.io") ||
	       ends_with_ci(host, n, ".azurecontainerapps.io");
}

/* ---- data-plane calls ---------------------------------------------------- */

static bool json_type(const char *ctype)
{
	return strncasecmp(ctype, "application/json", 16) == 0 &&
	       (ctype[16] == '\0' || ctype[16] == ';' || ctype[16] == ' ');
}

/* " (CODE: message)" from a data-plane error body, or a printable
 * snippet of it. */
static void error_detail(const struct transport_resp *resp, char *out,
			 size_t size)
{
	char code[96], msg[320], snip[160];
	size_t i, o = 0;

	out[0] = '\0';
	if (proto_azure_error_decode(resp->body.data, resp->body.len, code,
				     sizeof(code), msg, sizeof(msg))) {
		snprintf(out, size, " (%s%s%s)", code,
			 code[0] && msg[0] ? ": " : "", msg);
		return;
	}
	for (i = 0; i < resp->body.len && o + 1 < sizeof(snip); i++) {
		unsigned char c = (unsigned char)resp->body.data[i];

		snip[o++] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
	}
	snip[o] = '\0';
	if (o > 0)
		snprintf(out, size, " (%s)", snip);
}

/* Overwrite every occurrence of secret in text. */
static void scrub(char *text, const char *secret)
{
	size_t n = strlen(secret);
	char *hit;

	if (n < 4)
		return;
	while ((hit = strstr(text, secret)) != NULL)
		memset(hit, '*', n);
}

static char *dp_url(struct azure_priv *ap, const struct dp_req *r)
{
	const char *path = r->absolute ? "" : ap->group_path;
	const char *tail = r->path;
	const char *sep = strchr(tail, '?') ? "&" : "?";

	return xasprintf("%s%s%s%sapi-version=%s%s%s", ap->base_url, path, tail,
			 sep, PROTO_AZURE_API_VERSION, r->query ? "&" : "",
			 r->query ? r->query : "");
}

struct dp_req azure_dp_req(const char *what, const char *method,
			   const char *path, size_t max_body, long timeout_ms)
{
	struct dp_req r = {
		.what = what,
		.method = method,
		.path = path,
		.max_body = max_body,
		.timeout_ms = timeout_ms,
	};

	return r;
}

void azure_dp_json(struct dp_req *r, const struct buf *body)
{
	r->content_type = "application/json";
	r->body = body->data;
	r->body_len = body->len;
}

/* The exchange of r at url, with the bearer line auth. */
static void dp_request(struct azure_priv *ap, const struct dp_req *r,
		       const char *url, const char *const *headers,
		       struct transport_http_req *req)
{
	memset(req, 0, sizeof(*req));
	req->method = r->method;
	req->url = url;
	req->headers = headers;
	req->content_type = r->content_type;
	req->body = r->body;
	req->body_len = r->body_len;
	req->max_body = r->max_body;
	req->ca_file = ap->ca_file;
	req->resolve = (const char *const *)ap->resolve;
	req->connect_timeout_ms = ap->connect_ms;
	req->timeout_ms = r->timeout_ms;
	req->pool = ap->pool;
}

/* A call the data plane did not answer (transport_http's rc and why). */
static int dp_unanswered(const struct dp_req *r, int rc,
			 const struct sbx_error *why, struct sbx_error *err)
{
	if (r->may_run && rc != -ECONNREFUSED)
		sbx_error_set(err, SBX_OUTCOME_UNKNOWN, NULL,
			      "azure: %s: the data plane did not answer, the "
			      "command may have run: %s",
			      r->what, why->reason);
	else if (rc == -EFBIG)
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "azure: %s: the data plane's answer is larger "
			      "than %zu bytes",
			      r->what, r->max_body);
	else
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: %s: the data plane could not be "
			      "reached: %s",
			      r->what, why->reason);
	err->err = rc == -EFBIG ? EFBIG : EIO;
	return -err->err;
}

/*
 * r's exchange with the bearer, once more with a fresh token after a 401
 * (the token may have been revoked or rotated). 0 when an answer came
 * (resp); *auth is the bearer line of the last try.
 */
static int dp_exchange(struct azure_priv *ap, const struct dp_req *r,
		       const char *url, struct transport_resp *resp,
		       char **auth, struct sbx_error *err)
{
	const char *headers[3] = {NULL, "Accept: application/json", NULL};
	struct transport_http_req req;
	struct sbx_error herr;
	unsigned gen = 0;
	int attempt, rc = 0;

	for (attempt = 0; attempt < 2; attempt++) {
		token_free(*auth);
		*auth = NULL;
		rc = azure_auth_header(ap->auth, auth, &gen, err);
		if (rc < 0)
			return rc;
		headers[0] = *auth;
		dp_request(ap, r, url, headers, &req);
		transport_resp_cleanup(resp);
		transport_resp_init(resp);
		sbx_error_clear(&herr);
		rc = transport_http(&req, resp, &herr);
		if (rc < 0)
			return dp_unanswered(r, rc, &herr, err);
		if (resp->status != 401 || attempt == 1)
			break;
		azure_auth_invalidate(ap->auth, gen);
		azure_count(ap, &ap->stats.retried_401);
		log_debug("azure: %s: 401 from the data plane; retrying with a "
			  "new token",
			  r->what);
	}
	return 0;
}

/* What an answer that is not a 2xx means; token is the bearer sent. */
static int dp_refused(const struct dp_req *r, const struct transport_resp *resp,
		      const char *token, struct sbx_error *err)
{
	char detail[512];
	int rc = -EIO;

	error_detail(resp, detail, sizeof(detail));
	/* A body that echoes the request must not put the token in a log. */
	scrub(detail, token);
	if (resp->status >= 300 && resp->status < 400) {
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "azure: %s: the data plane answered with a "
			      "redirect (HTTP %ld), which is refused",
			      r->what, resp->status);
	} else if (resp->status == 404) {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_GONE,
			      "azure: %s: not found%s", r->what, detail);
		rc = -ENOENT;
	} else if (resp->status == 401 || resp->status == 403) {
		rc = sbx_error_fail(err, SBX_COMMAND_FAILED, AZURE_FAIL_REFUSED,
				    EACCES,
				    "azure: %s: the data plane refused the "
				    "credential: HTTP %ld%s",
				    r->what, resp->status, detail);
	} else if (resp->status >= 500 || resp->status == 429) {
		if (r->may_run)
			sbx_error_set(err, SBX_OUTCOME_UNKNOWN, NULL,
				      "azure: %s: the data plane failed, the "
				      "command may have run: HTTP %ld%s",
				      r->what, resp->status, detail);
		else
			sbx_error_set(err, SBX_UNREACHABLE, NULL,
				      "azure: %s: the data plane failed: HTTP "
				      "%ld%s",
				      r->what, resp->status, detail);
	} else {
		sbx_error_set(err, SBX_COMMAND_FAILED, NULL,
			      "azure: %s: the data plane refused it: HTTP "
			      "%ld%s",
			      r->what, resp->status, detail);
	}
	err->status = resp->status;
	return rc;
}

int azure_dp_call(struct azure_priv *ap, const struct dp_req *r,
		  struct transport_resp *resp, struct sbx_error *err)
{
	char *url = dp_url(ap, r);
	char *auth = NULL;
	int rc;

	rc = dp_exchange(ap, r, url, resp, &auth, err);
	if (rc < 0)
		goto out;
	if (resp->status < 200 || resp->status >= 300) {
		rc = dp_refused(r, resp,
				auth + strlen("Authorization: Bearer "), err);
		goto out;
	}
	if (r->json && !json_type(resp->content_type)) {
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "azure: %s: the data plane answered with "
			      "content type '%s', not JSON",
			      r->what,
			      resp->content_type[0] ? resp->content_type
						    : "(none)");
		rc = -EIO;
	}
out:
	token_free(auth);
	free(url);
	return rc;
}

/* GET {sandbox}/files?path=P into a buffer of at most max bytes. */
int azure_read_file(struct azure_priv *ap, const char *id, const char *path,
		    size_t max, const char *what, struct transport_resp *resp,
		    struct sbx_error *err)
{
	struct buf query = BUF_INIT(0);
	struct dp_req r;
	char dppath[128];
	int rc;

	rc = buf_append_str(&query, "path=");
	if (rc == 0)
		rc = buf_append_escaped(&query, path, "/");
	if (rc < 0) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: out of memory");
		buf_cleanup(&query);
		return rc;
	}
	snprintf(dppath, sizeof(dppath), "/sandboxes/%s/files", id);
	r = azure_dp_req(what, "GET", dppath, max,
			 PROVIDER_AZURE_FILE_TIMEOUT_MS);
	r.query = query.data;
	rc = azure_dp_call(ap, &r, resp, err);
	buf_cleanup(&query);
	return rc;
}
