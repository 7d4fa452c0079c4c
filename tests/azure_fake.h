/* SPDX-License-Identifier: MIT */
/*
 * azure_fake: a fake Azure on loopback, for the Azure provider's tests and
 * the azure-fake program. It speaks the real request and response shapes
 * over TLS, with certificates made at start-up by a test CA, so that the
 * provider's production checks (https, host names, certificate
 * verification) run unchanged:
 *
 *  - the data plane (https://management.<region>.azuredevcompute.io:PORT)
 *    and the Entra ID token endpoint (https://login.microsoftonline.com:
 *    PORT, the same port) on one libmicrohttpd TLS daemon, told apart by
 *    the Host header. Every data-plane call must carry the api-version and
 *    the bearer of a token the endpoint issued (or azure_fake_accept_token
 *    registered); other calls are refused (400/401) and counted;
 *  - the agents' proxy (https://<name>.<region>.adcproxy.io:PORT): a
 *    TLS-terminating TCP relay (OpenSSL) that picks the backend
 *    (127.0.0.1:port, a plain-HTTP agent) by the TLS server name, as
 *    Azure's proxy sits in front of a sandbox's port.
 *
 * Curl reaches them through pinned name resolution (azure_fake_resolve)
 * and trusts them through azure_fake_ca_file.
 *
 * Sandboxes are scripted: state, labels, egress policy, vnet, the agent
 * port's URL, files (in memory, a host file for the agent's credential, or
 * a host directory as the native session root, where executeShellCommand
 * also runs /bin/sh -c), "Stopped for the first n reads", gone. Faults are
 * scripted per route (the next n answers: any status, content type, body
 * and extra headers, e.g. a redirect or a malformed record), as are token
 * endpoint refusals and revoked tokens ("401 once"). Calls are counted per
 * route, with the last sandbox id, and a hook can run inside a route.
 *
 * It is a test fixture: no Check calls (it also runs in the azure-fake
 * program); functions that can fail return 0 or a negative errno and write
 * a reason into errbuf. Thread-safe: the servers run on their own threads;
 * every setter and counter takes the fake's lock.
 */
#ifndef SBFS_TEST_AZURE_FAKE_H
#define SBFS_TEST_AZURE_FAKE_H

#include <stdbool.h>
#include <stddef.h>

/* What the fake expects of its clients. */
#define AZURE_FAKE_SUBSCRIPTION "00000000-0000-4000-8000-000000000001"
#define AZURE_FAKE_RESOURCE_GROUP "rg-sandboxfs"
#define AZURE_FAKE_GROUP "sbfs-group"
#define AZURE_FAKE_REGION "eastus"
#define AZURE_FAKE_TENANT "00000000-0000-4000-8000-0000000000aa"
#define AZURE_FAKE_CLIENT_ID "00000000-0000-4000-8000-0000000000bb"
#define AZURE_FAKE_SECRET "fake~client.secret-Qw3rty"
#define AZURE_FAKE_ASSERTION "eyJhbGciOiJub25lIn0.eyJzdWIiOiJmYWtlIn0.sig"
#define AZURE_FAKE_SCOPE "https://dynamicsessions.io/.default"
#define AZURE_FAKE_TOKEN_PATH "/opt/alien/agent-token"
#define AZURE_FAKE_NATIVE_ROOT "/sandbox"

enum azure_fake_route {
	AZF_LIST = 0, /* GET {group}/sandboxes */
	AZF_GET, /* GET {group}/sandboxes/{id} */
	AZF_CREDENTIAL, /* GET {sandbox}/files?path=<the token path> */
	AZF_FILES, /* GET {sandbox}/files?path=<anything else> */
	AZF_EXEC, /* POST {sandbox}/executeShellCommand */
	AZF_RESUME, /* POST {sandbox}/resume */
	AZF_STOP, /* POST {sandbox}/stop */
	AZF_PORTS_ADD, /* POST {sandbox}/ports/add */
	AZF_TOKEN, /* POST /{tenant}/oauth2/v2.0/token */
	AZF_ROUTES
};

struct azure_fake;

/* Called inside a route (without the fake's lock) with the sandbox id
 * ("" for list and token). */
typedef void azure_fake_hook_fn(struct azure_fake *f, enum azure_fake_route r,
				const char *id, void *arg);

/*
 * Start the fake: make the test CA and a server certificate for the three
 * host names (the CA's PEM goes to dir/ca.pem), start the TLS daemon and
 * the proxy on 127.0.0.1 with kernel-chosen ports.
 */
int azure_fake_start(const char *dir, struct azure_fake **out, char *errbuf,
		     size_t errsz);
/* Stop both servers (joining every thread) and free. NULL-safe. */
void azure_fake_stop(struct azure_fake *f);

/* Borrowed strings, valid until stop. */
const char *azure_fake_ca_file(const struct azure_fake *f);
/* "https://management.eastus.azuredevcompute.io:PORT" */
const char *azure_fake_endpoint(const struct azure_fake *f);
/* "https://login.microsoftonline.com:PORT" */
const char *azure_fake_authority(const struct azure_fake *f);
/* The pins for curl: the two names above and "*:PROXYPORT:127.0.0.1",
 * comma separated. */
const char *azure_fake_resolve(const struct azure_fake *f);
unsigned azure_fake_proxy_port(const struct azure_fake *f);
/* The PEM of the server certificate and its key (for more TLS
 * servers in tests). */
const char *azure_fake_cert_pem(const struct azure_fake *f);
const char *azure_fake_key_pem(const struct azure_fake *f);

/* ---- the proxy ------------------------------------------------------------ */

/* Relay TLS connections for host (the SNI name, case-insensitive) to
 * 127.0.0.1:port (0 removes the route). */
void azure_fake_proxy_route(struct azure_fake *f, const char *host,
			    unsigned port);
/* Connections the proxy accepted for host so far. */
unsigned azure_fake_proxy_accepts(struct azure_fake *f, const char *host);

/* ---- sandboxes -------------------------------------------------------------- */

/* A Running sandbox with the agent label, the egress policy
 * {"defaultAction":"Deny"}, no vnet and no ports. Replaces one of the same
 * id. */
void azure_fake_add(struct azure_fake *f, const char *id);
void azure_fake_remove(struct azure_fake *f, const char *id);
/* "Running", "Stopped" ... (resume sets Running, stop sets Stopped). */
void azure_fake_set_state(struct azure_fake *f, const char *id,
			  const char *state);
/* The state the last record read reported. */
void azure_fake_get_state(struct azure_fake *f, const char *id, char *out,
			  size_t size);
/* A label; value NULL removes it. */
void azure_fake_set_label(struct azure_fake *f, const char *id, const char *key,
			  const char *value);
/* The egressPolicy member as raw JSON; NULL leaves it out. */
void azure_fake_set_egress(struct azure_fake *f, const char *id,
			   const char *json);
void azure_fake_set_vnet(struct azure_fake *f, const char *id,
			 const char *name);
/* The ports[] entry for 8971 with this URL; NULL: no entry (a ports/add
 * then adds one whose URL is add_url, see below). */
void azure_fake_set_port_url(struct azure_fake *f, const char *id,
			     const char *url);
/* The URL a ports/add gives the agent port (NULL: no URL yet). */
void azure_fake_set_add_url(struct azure_fake *f, const char *id,
			    const char *url);
/* Route https://<id>--8971.<region>.adcproxy.io:PROXYPORT/ to a plain
 * agent at 127.0.0.1:port and make it the record's agent port URL (or,
 * with open false, what ports/add will give). Copies the URL into
 * url[size] when url is not NULL. */
void azure_fake_set_agent(struct azure_fake *f, const char *id, unsigned port,
			  bool open, char *url, size_t size);
/* The next n record reads (GET) report Stopped whatever the state. */
void azure_fake_set_stopped_reads(struct azure_fake *f, const char *id,
				  unsigned n);
/* The record of id is answered as this raw body (NULL: normal). */
void azure_fake_set_raw_record(struct azure_fake *f, const char *id,
			       const char *body);
/* A file at an absolute sandbox path (data NULL removes it). */
void azure_fake_set_file(struct azure_fake *f, const char *id, const char *path,
			 const void *data, size_t n);
/* A file at an absolute sandbox path is read from a host file. */
void azure_fake_map_file(struct azure_fake *f, const char *id, const char *path,
			 const char *host_path);
/* The native root (/sandbox) is this host directory: files under it
 * are read from it, and executeShellCommand runs there. */
void azure_fake_set_root(struct azure_fake *f, const char *id, const char *dir);
/* Sandboxes per list page (0: all in one), and a nextLink to send
 * instead of the real one (NULL: the real one). */
void azure_fake_set_page_size(struct azure_fake *f, unsigned n);
void azure_fake_set_next_link(struct azure_fake *f, const char *link);

/* ---- tokens ------------------------------------------------------------------ */

/* A bearer token the data plane accepts from now on (e.g. one a fake
 * managed identity endpoint or CLI handed out). */
void azure_fake_accept_token(struct azure_fake *f, const char *token);
/* Revoke every token issued so far: the next data-plane call with one
 * gets 401 (a fresh token from the endpoint works). */
void azure_fake_revoke_tokens(struct azure_fake *f);
/* Lifetime of the tokens the endpoint issues (default 3599 s). */
void azure_fake_set_token_lifetime(struct azure_fake *f, long seconds);
/* The last form body the token endpoint got (it holds the secret or the
 * assertion: only tests look at it). */
void azure_fake_last_token_form(struct azure_fake *f, char *out, size_t size);

/* ---- faults and counters ---------------------------------------------------- */

/*
 * The next times answers of route r (after the bearer check) are this:
 * status, content type (NULL: none), body (NULL: empty) and extra header
 * lines "Name: value\r\n..." (NULL: none).
 */
void azure_fake_fail(struct azure_fake *f, enum azure_fake_route r,
		     unsigned times, int status, const char *ctype,
		     const char *body, const char *headers);
void azure_fake_set_hook(struct azure_fake *f, enum azure_fake_route r,
			 azure_fake_hook_fn *fn, void *arg);

unsigned azure_fake_calls(struct azure_fake *f, enum azure_fake_route r);
/* The id of the last call of r into out[size] ("" when none). */
void azure_fake_last_id(struct azure_fake *f, enum azure_fake_route r,
			char *out, size_t size);
/* Data-plane calls refused for a missing or unknown bearer. */
unsigned azure_fake_unauthorized(struct azure_fake *f);
/* Data-plane calls refused for a missing or wrong api-version. */
unsigned azure_fake_bad_version(struct azure_fake *f);
/* The last executeShellCommand body and files?path= value. */
void azure_fake_last_exec(struct azure_fake *f, char *command, size_t csize,
			  char *cwd, size_t wsize);
void azure_fake_last_path(struct azure_fake *f, char *out, size_t size);

#endif
