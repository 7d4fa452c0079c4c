/* SPDX-License-Identifier: MIT */
/*
 * azure_fake: the fake Azure of the Azure provider's tests (see the
 * header). Three parts: a test PKI made with OpenSSL, a libmicrohttpd TLS
 * daemon for the data plane and the token endpoint, and an OpenSSL relay
 * for the agents' proxy. Answers are built by hand (the test side needs
 * no JSON library); requests are read with the provider's own decoders
 * where a body has JSON in it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/xalloc.h"
#include "tests/azure_fake.h"

#define API_VERSION "2026-02-01-preview"
#define LOGIN_HOST "login.microsoftonline.com"
#define MAX_UPLOAD (8UL * 1024 * 1024)
#define MAX_FILE (32UL * 1024 * 1024)
#define EXEC_TIMEOUT_MS 60000
#define JSON "application/json; charset=utf-8"
#define JWT_BEARER "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

struct label {
	char *key;
	char *value;
	struct label *next;
};

struct file {
	char *path;
	char *data; /* in memory, or */
	size_t n;
	char *host_path; /* read from the host */
	struct file *next;
};

struct sbx {
	char *id;
	char *state;
	struct label *labels;
	char *egress; /* raw JSON, or NULL */
	char *vnet;
	bool has_port;
	char *port_url;
	char *add_url;
	unsigned stopped_reads;
	char *raw;
	char *root;
	struct file *files;
	struct sbx *next;
};

struct route_entry {
	char *host;
	unsigned port;
	unsigned accepts;
	struct route_entry *next;
};

struct relay {
	struct azure_fake *f;
	pthread_t th;
	int cfd; /* closed (-1) by the relay's thread when it ends */
	int bfd;
	bool done;
	struct relay *next;
};

struct fault {
	unsigned times;
	int status;
	char *ctype;
	char *body;
	char *headers;
};

struct azure_fake {
	pthread_mutex_t mu;
	char *ca_file;
	char *cert_pem;
	char *key_pem;
	X509 *cert;
	EVP_PKEY *key;
	char dp_host[128];
	char endpoint[160];
	char authority[160];
	char resolve[512];
	struct MHD_Daemon *mhd;
	unsigned mhd_port;

	SSL_CTX *ctx;
	int lfd;
	unsigned proxy_port;
	pthread_t accept_th;
	bool accepting;
	bool stopping;
	struct relay *relays;
	struct route_entry *routes;

	struct sbx *sandboxes;
	char **tokens;
	size_t ntokens;
	unsigned token_seq;
	long lifetime;
	char *last_form;
	unsigned page_size;
	char *next_link;

	struct fault faults[AZF_ROUTES];
	azure_fake_hook_fn *hooks[AZF_ROUTES];
	void *hook_args[AZF_ROUTES];
	unsigned calls[AZF_ROUTES];
	char last_id[AZF_ROUTES][64];
	unsigned unauthorized;
	unsigned bad_version;
	char *last_cmd;
	char *last_cwd;
	char *last_path;
};

static void say(char *errbuf, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(char *errbuf, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (errbuf == NULL || errsz == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(errbuf, errsz, fmt, ap);
	va_end(ap);
}

static void replace(char **field, const char *value)
{
	free(*field);
	*field = value != NULL ? xstrdup(value) : NULL;
}

/* ---- the test PKI --------------------------------------------------------- */

static EVP_PKEY *make_key(void)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, NULL);
	EVP_PKEY *key = NULL;

	if (ctx == NULL || EVP_PKEY_keygen_init(ctx) <= 0 ||
	    EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) <=
		    0 ||
	    EVP_PKEY_keygen(ctx, &key) <= 0)
		key = NULL;
	EVP_PKEY_CTX_free(ctx);
	return key;
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	bool ok;

	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (ext == NULL)
		return false;
	ok = X509_add_ext(cert, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

/* A certificate for key, signed by signer (itself when issuer is NULL). */
static X509 *make_cert(EVP_PKEY *key, EVP_PKEY *signer, X509 *issuer,
		       const char *cn, const char *san)
{
	X509 *cert = X509_new();
	X509_NAME *name;
	unsigned char serial[8];
	BIGNUM *bn = NULL;
	bool ok;

	if (cert == NULL)
		return NULL;
	RAND_bytes(serial, sizeof(serial));
	serial[0] &= 0x7f;
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	ok = bn != NULL && X509_set_version(cert, 2) == 1 &&
	     BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL &&
	     X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != NULL &&
	     X509_gmtime_adj(X509_getm_notAfter(cert), 7 * 86400) != NULL &&
	     X509_set_pubkey(cert, key) == 1;
	BN_free(bn);
	name = X509_get_subject_name(cert);
	ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
					      (const unsigned char *)cn, -1, -1,
					      0) == 1;
	ok = ok && X509_set_issuer_name(
			   cert, issuer != NULL ? X509_get_subject_name(issuer)
						: name) == 1;
	if (issuer == NULL) {
		ok = ok &&
		     add_ext(cert, cert, NID_basic_constraints,
			     "critical,CA:TRUE") &&
		     add_ext(cert, cert, NID_key_usage,
			     "critical,keyCertSign,cRLSign") &&
		     add_ext(cert, cert, NID_subject_key_identifier, "hash");
	} else {
		ok = ok &&
		     add_ext(cert, issuer, NID_basic_constraints, "CA:FALSE") &&
		     add_ext(cert, issuer, NID_key_usage,
			     "critical,digitalSignature,keyEncipherment") &&
		     add_ext(cert, issuer, NID_ext_key_usage, "serverAuth") &&
		     add_ext(cert, issuer, NID_subject_alt_name, san) &&
		     add_ext(cert, issuer, NID_authority_key_identifier,
			     "keyid:always");
	}
	ok = ok && X509_sign(cert, signer, EVP_sha256()) > 0;
	if (!ok) {
		X509_free(cert);
		return NULL;
	}
	return cert;
}

static char *pem_of(X509 *cert, EVP_PKEY *key)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	long n;

	if (bio == NULL)
		return NULL;
	if ((cert != NULL && PEM_write_bio_X509(bio, cert) == 1) ||
	    (key != NULL && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0,
						     NULL, NULL) == 1)) {
		n = BIO_get_mem_data(bio, &data);
		out = xstrndup(data, (size_t)n);
	}
	BIO_free(bio);
	return out;
}

static int make_pki(struct azure_fake *f, const char *dir, char *errbuf,
		    size_t errsz)
{
	EVP_PKEY *ca_key = make_key();
	X509 *ca = NULL;
	char *ca_pem = NULL;
	char san[512];
	FILE *fp;
	int rc = -EIO;

	f->key = make_key();
	if (ca_key == NULL || f->key == NULL)
		goto out;
	ca = make_cert(ca_key, ca_key, NULL, "sandboxfs test CA", NULL);
	if (ca == NULL)
		goto out;
	snprintf(san, sizeof(san),
		 "DNS:%s,DNS:%s,DNS:*.%s.adcproxy.io,DNS:*.adcproxy.io,"
		 "DNS:*.azurecontainerapps.io",
		 f->dp_host, LOGIN_HOST, AZURE_FAKE_REGION);
	f->cert = make_cert(f->key, ca_key, ca, f->dp_host, san);
	if (f->cert == NULL)
		goto out;
	ca_pem = pem_of(ca, NULL);
	f->cert_pem = pem_of(f->cert, NULL);
	f->key_pem = pem_of(NULL, f->key);
	if (ca_pem == NULL || f->cert_pem == NULL || f->key_pem == NULL)
		goto out;
	f->ca_file = xasprintf("%s/ca.pem", dir);
	fp = fopen(f->ca_file, "w");
	if (fp == NULL || fputs(ca_pem, fp) < 0 || fclose(fp) != 0) {
		say(errbuf, errsz, "cannot write %s", f->ca_file);
		rc = -EIO;
		goto out_quiet;
	}
	rc = 0;
out:
	if (rc < 0)
		say(errbuf, errsz, "the test PKI could not be made");
out_quiet:
	EVP_PKEY_free(ca_key);
	X509_free(ca);
	free(ca_pem);
	return rc;
}

/* ---- sandboxes ---------------------------------------------------------------- */

static struct sbx *sbx_find(struct azure_fake *f, const char *id)
{
	struct sbx *s;

	for (s = f->sandboxes; s != NULL; s = s->next)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

static void sbx_free(struct sbx *s)
{
	struct label *l, *ln;
	struct file *fl, *fn;

	if (s == NULL)
		return;
	for (l = s->labels; l != NULL; l = ln) {
		ln = l->next;
		free(l->key);
		free(l->value);
		free(l);
	}
	for (fl = s->files; fl != NULL; fl = fn) {
		fn = fl->next;
		free(fl->path);
		free(fl->data);
		free(fl->host_path);
		free(fl);
	}
	free(s->id);
	free(s->state);
	free(s->egress);
	free(s->vnet);
	free(s->port_url);
	free(s->add_url);
	free(s->raw);
	free(s->root);
	free(s);
}

static void label_set(struct sbx *s, const char *key, const char *value)
{
	struct label **pp, *l;

	for (pp = &s->labels; (l = *pp) != NULL; pp = &l->next)
		if (strcmp(l->key, key) == 0)
			break;
	if (l != NULL && value == NULL) {
		*pp = l->next;
		free(l->key);
		free(l->value);
		free(l);
		return;
	}
	if (value == NULL)
		return;
	if (l == NULL) {
		l = xcalloc(1, sizeof(*l));
		l->key = xstrdup(key);
		*pp = l;
	}
	replace(&l->value, value);
}

void azure_fake_add(struct azure_fake *f, const char *id)
{
	struct sbx *s = xcalloc(1, sizeof(*s)), **pp;

	s->id = xstrdup(id);
	s->state = xstrdup("Running");
	s->egress = xstrdup("{\"defaultAction\":\"Deny\"}");
	label_set(s, PROTO_TRANSPORT_LABEL, PROTO_TRANSPORT_AGENT);
	pthread_mutex_lock(&f->mu);
	for (pp = &f->sandboxes; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->id, id) == 0) {
			struct sbx *old = *pp;

			s->next = old->next;
			*pp = s;
			sbx_free(old);
			pthread_mutex_unlock(&f->mu);
			return;
		}
	}
	*pp = s;
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_remove(struct azure_fake *f, const char *id)
{
	struct sbx **pp, *s;

	pthread_mutex_lock(&f->mu);
	for (pp = &f->sandboxes; (s = *pp) != NULL; pp = &s->next) {
		if (strcmp(s->id, id) == 0) {
			*pp = s->next;
			sbx_free(s);
			break;
		}
	}
	pthread_mutex_unlock(&f->mu);
}

/* Run body with s, sandbox id, under the lock (nothing when there is
 * none). */
#define WITH_SBX(f, id, body)                   \
	do {                                    \
		struct sbx *s;                  \
		pthread_mutex_lock(&(f)->mu);   \
		s = sbx_find((f), (id));        \
		if (s != NULL) {                \
			body;                   \
		}                               \
		pthread_mutex_unlock(&(f)->mu); \
	} while (0)

void azure_fake_set_state(struct azure_fake *f, const char *id,
			  const char *state)
{
	WITH_SBX(f, id, replace(&s->state, state));
}

void azure_fake_get_state(struct azure_fake *f, const char *id, char *out,
			  size_t size)
{
	snprintf(out, size, "%s", "");
	WITH_SBX(f, id, snprintf(out, size, "%s", s->state));
}

void azure_fake_set_label(struct azure_fake *f, const char *id, const char *key,
			  const char *value)
{
	WITH_SBX(f, id, label_set(s, key, value));
}

void azure_fake_set_egress(struct azure_fake *f, const char *id,
			   const char *json)
{
	WITH_SBX(f, id, replace(&s->egress, json));
}

void azure_fake_set_vnet(struct azure_fake *f, const char *id, const char *name)
{
	WITH_SBX(f, id, replace(&s->vnet, name));
}

void azure_fake_set_port_url(struct azure_fake *f, const char *id,
			     const char *url)
{
	WITH_SBX(f, id, {
		s->has_port = url != NULL;
		replace(&s->port_url, url);
	});
}

void azure_fake_set_add_url(struct azure_fake *f, const char *id,
			    const char *url)
{
	WITH_SBX(f, id, replace(&s->add_url, url));
}

void azure_fake_set_stopped_reads(struct azure_fake *f, const char *id,
				  unsigned n)
{
	WITH_SBX(f, id, s->stopped_reads = n);
}

void azure_fake_set_raw_record(struct azure_fake *f, const char *id,
			       const char *body)
{
	WITH_SBX(f, id, replace(&s->raw, body));
}

static struct file *file_get(struct sbx *s, const char *path, bool create)
{
	struct file *fl;

	for (fl = s->files; fl != NULL; fl = fl->next)
		if (strcmp(fl->path, path) == 0)
			return fl;
	if (!create)
		return NULL;
	fl = xcalloc(1, sizeof(*fl));
	fl->path = xstrdup(path);
	fl->next = s->files;
	s->files = fl;
	return fl;
}

static void file_set(struct sbx *s, const char *path, const void *data,
		     size_t n, const char *host_path)
{
	struct file **pp, *fl;

	if (data == NULL && host_path == NULL) {
		for (pp = &s->files; (fl = *pp) != NULL; pp = &fl->next) {
			if (strcmp(fl->path, path) == 0) {
				*pp = fl->next;
				free(fl->path);
				free(fl->data);
				free(fl->host_path);
				free(fl);
				return;
			}
		}
		return;
	}
	fl = file_get(s, path, true);
	free(fl->data);
	fl->data = NULL;
	fl->n = 0;
	replace(&fl->host_path, host_path);
	if (data != NULL) {
		fl->data = xmalloc(n + 1);
		memcpy(fl->data, data, n);
		fl->n = n;
	}
}

void azure_fake_set_file(struct azure_fake *f, const char *id, const char *path,
			 const void *data, size_t n)
{
	WITH_SBX(f, id, file_set(s, path, data, n, NULL));
}

void azure_fake_map_file(struct azure_fake *f, const char *id, const char *path,
			 const char *host_path)
{
	WITH_SBX(f, id, file_set(s, path, NULL, 0, host_path));
}

void azure_fake_set_root(struct azure_fake *f, const char *id, const char *dir)
{
	WITH_SBX(f, id, replace(&s->root, dir));
}

void azure_fake_set_page_size(struct azure_fake *f, unsigned n)
{
	pthread_mutex_lock(&f->mu);
	f->page_size = n;
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_set_next_link(struct azure_fake *f, const char *link)
{
	pthread_mutex_lock(&f->mu);
	replace(&f->next_link, link);
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_set_agent(struct azure_fake *f, const char *id, unsigned port,
			  bool open, char *url, size_t size)
{
	char host[192], u[256];

	snprintf(host, sizeof(host), "%s--%d.%s.adcproxy.io", id,
		 PROTO_AZURE_AGENT_PORT, AZURE_FAKE_REGION);
	snprintf(u, sizeof(u), "https://%s:%u/", host, f->proxy_port);
	azure_fake_proxy_route(f, host, port);
	if (open)
		azure_fake_set_port_url(f, id, u);
	else
		azure_fake_set_add_url(f, id, u);
	if (url != NULL)
		snprintf(url, size, "%s", u);
}

/* ---- tokens, faults, counters ---------------------------------------------- */

void azure_fake_accept_token(struct azure_fake *f, const char *token)
{
	pthread_mutex_lock(&f->mu);
	f->tokens = xrealloc(f->tokens, (f->ntokens + 1) * sizeof(*f->tokens));
	f->tokens[f->ntokens++] = xstrdup(token);
	pthread_mutex_unlock(&f->mu);
}

static void tokens_clear(struct azure_fake *f)
{
	size_t i;

	for (i = 0; i < f->ntokens; i++)
		free(f->tokens[i]);
	free(f->tokens);
	f->tokens = NULL;
	f->ntokens = 0;
}

void azure_fake_revoke_tokens(struct azure_fake *f)
{
	pthread_mutex_lock(&f->mu);
	tokens_clear(f);
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_set_token_lifetime(struct azure_fake *f, long seconds)
{
	pthread_mutex_lock(&f->mu);
	f->lifetime = seconds;
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_last_token_form(struct azure_fake *f, char *out, size_t size)
{
	pthread_mutex_lock(&f->mu);
	snprintf(out, size, "%s", f->last_form ? f->last_form : "");
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_fail(struct azure_fake *f, enum azure_fake_route r,
		     unsigned times, int status, const char *ctype,
		     const char *body, const char *headers)
{
	struct fault *ft = &f->faults[r];

	pthread_mutex_lock(&f->mu);
	ft->times = times;
	ft->status = status;
	replace(&ft->ctype, ctype);
	replace(&ft->body, body);
	replace(&ft->headers, headers);
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_set_hook(struct azure_fake *f, enum azure_fake_route r,
			 azure_fake_hook_fn *fn, void *arg)
{
	pthread_mutex_lock(&f->mu);
	f->hooks[r] = fn;
	f->hook_args[r] = arg;
	pthread_mutex_unlock(&f->mu);
}

unsigned azure_fake_calls(struct azure_fake *f, enum azure_fake_route r)
{
	unsigned n;

	pthread_mutex_lock(&f->mu);
	n = f->calls[r];
	pthread_mutex_unlock(&f->mu);
	return n;
}

void azure_fake_last_id(struct azure_fake *f, enum azure_fake_route r,
			char *out, size_t size)
{
	pthread_mutex_lock(&f->mu);
	snprintf(out, size, "%s", f->last_id[r]);
	pthread_mutex_unlock(&f->mu);
}

unsigned azure_fake_unauthorized(struct azure_fake *f)
{
	unsigned n;

	pthread_mutex_lock(&f->mu);
	n = f->unauthorized;
	pthread_mutex_unlock(&f->mu);
	return n;
}

unsigned azure_fake_bad_version(struct azure_fake *f)
{
	unsigned n;

	pthread_mutex_lock(&f->mu);
	n = f->bad_version;
	pthread_mutex_unlock(&f->mu);
	return n;
}

void azure_fake_last_exec(struct azure_fake *f, char *command, size_t csize,
			  char *cwd, size_t wsize)
{
	pthread_mutex_lock(&f->mu);
	snprintf(command, csize, "%s", f->last_cmd ? f->last_cmd : "");
	snprintf(cwd, wsize, "%s", f->last_cwd ? f->last_cwd : "");
	pthread_mutex_unlock(&f->mu);
}

void azure_fake_last_path(struct azure_fake *f, char *out, size_t size)
{
	pthread_mutex_lock(&f->mu);
	snprintf(out, size, "%s", f->last_path ? f->last_path : "");
	pthread_mutex_unlock(&f->mu);
}

const char *azure_fake_ca_file(const struct azure_fake *f)
{
	return f->ca_file;
}

const char *azure_fake_endpoint(const struct azure_fake *f)
{
	return f->endpoint;
}

const char *azure_fake_authority(const struct azure_fake *f)
{
	return f->authority;
}

const char *azure_fake_resolve(const struct azure_fake *f)
{
	return f->resolve;
}

unsigned azure_fake_proxy_port(const struct azure_fake *f)
{
	return f->proxy_port;
}

const char *azure_fake_cert_pem(const struct azure_fake *f)
{
	return f->cert_pem;
}

const char *azure_fake_key_pem(const struct azure_fake *f)
{
	return f->key_pem;
}

/* ---- JSON answers ----------------------------------------------------------- */

/* A JSON string of n bytes; control bytes (NUL included) as \u00XX,
 * other bytes as they are. */
static void jstr(struct buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	(void)!buf_append(b, "\"", 1);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

		if (c == '"' || c == '\\') {
			char two[2] = {'\\', (char)c};

			(void)!buf_append(b, two, 2);
		} else if (c < 0x20) {
			(void)!buf_append(b, esc, 6);
		} else {
			(void)!buf_append(b, &s[i], 1);
		}
	}
	(void)!buf_append(b, "\"", 1);
}

static void jstrz(struct buf *b, const char *s)
{
	if (s == NULL)
		(void)!buf_append_str(b, "null");
	else
		jstr(b, s, strlen(s));
}

static void record_json(const struct sbx *s, const char *state, struct buf *b)
{
	const struct label *l;

	(void)!buf_append_str(b, "{\"id\":");
	jstrz(b, s->id);
	(void)!buf_append_str(b, ",\"state\":");
	jstrz(b, state);
	(void)!buf_append_str(b, ",\"labels\":{");
	for (l = s->labels; l != NULL; l = l->next) {
		jstrz(b, l->key);
		(void)!buf_append(b, ":", 1);
		jstrz(b, l->value);
		if (l->next != NULL)
			(void)!buf_append(b, ",", 1);
	}
	(void)!buf_append_str(b, "}");
	if (s->egress != NULL)
		(void)!buf_printf(b, ",\"egressPolicy\":%s", s->egress);
	(void)!buf_append_str(b, ",\"vnetConnectionName\":");
	jstrz(b, s->vnet);
	(void)!buf_append_str(b, ",\"ports\":[");
	if (s->has_port) {
		(void)!buf_printf(
			b, "{\"port\":%d,\"url\":", PROTO_AZURE_AGENT_PORT);
		jstrz(b, s->port_url);
		(void)!buf_append_str(b, ",\"auth\":{\"anonymous\":true},"
					 "\"activationMode\":\"Always\","
					 "\"protocol\":\"http\"}");
	}
	(void)!buf_append_str(b, "]}");
}

/* ---- the HTTP daemon ------------------------------------------------------------ */

struct upload {
	struct buf body;
	bool too_big;
};

static enum MHD_Result reply(struct MHD_Connection *c, int status,
			     const char *ctype, const void *body, size_t n,
			     const char *headers)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(n, (void *)(body ? body : ""),
					    MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	if (ctype != NULL)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	while (headers != NULL && *headers != '\0') {
		size_t len = strcspn(headers, "\r\n");
		char *line = xstrndup(headers, len), *colon = strchr(line, ':');

		if (colon != NULL) {
			*colon++ = '\0';
			while (*colon == ' ')
				colon++;
			MHD_add_response_header(r, line, colon);
		}
		free(line);
		headers += len;
		while (*headers == '\r' || *headers == '\n')
			headers++;
	}
	ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_str(struct MHD_Connection *c, int status,
				 const char *ctype, const char *body)
{
	return reply(c, status, ctype, body, body ? strlen(body) : 0, NULL);
}

static enum MHD_Result reply_buf(struct MHD_Connection *c, int status,
				 const char *ctype, struct buf *b)
{
	enum MHD_Result ret = reply(c, status, ctype, b->data, b->len, NULL);

	buf_cleanup(b);
	return ret;
}

static enum MHD_Result dp_error(struct MHD_Connection *c, int status,
				const char *code, const char *message)
{
	struct buf b = BUF_INIT(0);

	(void)!buf_append_str(&b, "{\"error\":{\"code\":");
	jstrz(&b, code);
	(void)!buf_append_str(&b, ",\"message\":");
	jstrz(&b, message);
	(void)!buf_append_str(&b, "}}");
	return reply_buf(c, status, JSON, &b);
}

/* Count the call, run the hook and answer a scripted fault if one is
 * armed. Returns true when a fault answered (in *ret). */
static bool route_enter(struct azure_fake *f, struct MHD_Connection *c,
			enum azure_fake_route r, const char *id,
			enum MHD_Result *ret)
{
	struct fault ft;
	azure_fake_hook_fn *hook;
	void *arg;

	pthread_mutex_lock(&f->mu);
	f->calls[r]++;
	snprintf(f->last_id[r], sizeof(f->last_id[r]), "%s", id);
	hook = f->hooks[r];
	arg = f->hook_args[r];
	pthread_mutex_unlock(&f->mu);
	if (hook != NULL)
		hook(f, r, id, arg);
	pthread_mutex_lock(&f->mu);
	ft = f->faults[r];
	if (ft.times == 0) {
		pthread_mutex_unlock(&f->mu);
		return false;
	}
	f->faults[r].times--;
	ft.ctype = ft.ctype ? xstrdup(ft.ctype) : NULL;
	ft.body = ft.body ? xstrdup(ft.body) : NULL;
	ft.headers = ft.headers ? xstrdup(ft.headers) : NULL;
	pthread_mutex_unlock(&f->mu);
	/* "{{bearer}}" in a scripted body echoes the request's token. */
	if (ft.body != NULL && strstr(ft.body, "{{bearer}}") != NULL) {
		const char *auth = MHD_lookup_connection_value(
			c, MHD_HEADER_KIND, "Authorization");
		char *at = strstr(ft.body, "{{bearer}}"), *echo;

		*at = '\0';
		echo = xasprintf("%s%s%s", ft.body,
				 auth && strlen(auth) > 7 ? auth + 7 : "",
				 at + 10);
		free(ft.body);
		ft.body = echo;
	}
	*ret = reply(c, ft.status, ft.ctype, ft.body,
		     ft.body ? strlen(ft.body) : 0, ft.headers);
	free(ft.ctype);
	free(ft.body);
	free(ft.headers);
	return true;
}

/* --- the token endpoint --- */

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The decoded value of key in a form body (heap), or NULL. */
static char *form_get(const char *body, const char *key)
{
	size_t klen = strlen(key);
	const char *p = body;

	while (p != NULL && *p != '\0') {
		size_t len = strcspn(p, "&");

		if (len > klen && strncmp(p, key, klen) == 0 &&
		    p[klen] == '=') {
			const char *v = p + klen + 1, *end = p + len;
			char *out = xmalloc((size_t)(end - v) + 1), *o = out;

			while (v < end) {
				if (*v == '%' && end - v >= 3 &&
				    unhex(v[1]) >= 0 && unhex(v[2]) >= 0) {
					*o++ = (char)(unhex(v[1]) * 16 +
						      unhex(v[2]));
					v += 3;
				} else {
					*o++ = *v == '+' ? ' ' : *v;
					v++;
				}
			}
			*o = '\0';
			return out;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	return NULL;
}

static enum MHD_Result aad_error(struct MHD_Connection *c, int status,
				 const char *code, const char *description)
{
	struct buf b = BUF_INIT(0);

	(void)!buf_append_str(&b, "{\"error\":");
	jstrz(&b, code);
	(void)!buf_append_str(&b, ",\"error_description\":");
	jstrz(&b, description);
	(void)!buf_append_str(&b, ",\"error_codes\":[7000215]}");
	return reply_buf(c, status, JSON, &b);
}

static enum MHD_Result token_endpoint(struct azure_fake *f,
				      struct MHD_Connection *c, const char *url,
				      const char *method, struct upload *up)
{
	char expected[192], token[128], rnd[8];
	char *grant, *client, *scope, *secret, *atype, *assertion;
	const char *body = up->body.data ? up->body.data : "";
	enum MHD_Result ret;
	struct buf b = BUF_INIT(0);
	long lifetime;
	unsigned seq;

	snprintf(expected, sizeof(expected), "/%s/oauth2/v2.0/token",
		 AZURE_FAKE_TENANT);
	if (strcmp(method, "POST") != 0 || strcmp(url, expected) != 0)
		return aad_error(c, 400, "invalid_request",
				 "AADSTS90002: Tenant not found.");
	if (route_enter(f, c, AZF_TOKEN, "", &ret))
		return ret;
	pthread_mutex_lock(&f->mu);
	replace(&f->last_form, body);
	pthread_mutex_unlock(&f->mu);
	grant = form_get(body, "grant_type");
	client = form_get(body, "client_id");
	scope = form_get(body, "scope");
	secret = form_get(body, "client_secret");
	atype = form_get(body, "client_assertion_type");
	assertion = form_get(body, "client_assertion");
	if (grant == NULL || strcmp(grant, "client_credentials") != 0 ||
	    client == NULL || strcmp(client, AZURE_FAKE_CLIENT_ID) != 0 ||
	    scope == NULL || strcmp(scope, AZURE_FAKE_SCOPE) != 0) {
		ret = aad_error(c, 400, "invalid_request",
				"AADSTS900144: The request body must contain "
				"grant_type, client_id and scope.");
	} else if (secret != NULL && strcmp(secret, AZURE_FAKE_SECRET) != 0) {
		ret = aad_error(c, 401, "invalid_client",
				"AADSTS7000215: Invalid client secret "
				"provided.");
	} else if (secret == NULL &&
		   (atype == NULL || strcmp(atype, JWT_BEARER) != 0 ||
		    assertion == NULL ||
		    strcmp(assertion, AZURE_FAKE_ASSERTION) != 0)) {
		ret = aad_error(c, 401, "invalid_client",
				"AADSTS700211: No matching federated identity "
				"record found for presented assertion.");
	} else {
		RAND_bytes((unsigned char *)rnd, sizeof(rnd));
		pthread_mutex_lock(&f->mu);
		seq = ++f->token_seq;
		lifetime = f->lifetime;
		pthread_mutex_unlock(&f->mu);
		snprintf(token, sizeof(token),
			 "aad.%u.%02x%02x%02x%02x%02x%02x", seq,
			 (unsigned char)rnd[0], (unsigned char)rnd[1],
			 (unsigned char)rnd[2], (unsigned char)rnd[3],
			 (unsigned char)rnd[4], (unsigned char)rnd[5]);
		azure_fake_accept_token(f, token);
		(void)!buf_printf(
			&b,
			"{\"token_type\":\"Bearer\",\"expires_in\":%ld,"
			"\"ext_expires_in\":%ld,\"access_token\":\"%s\"}",
			lifetime, lifetime, token);
		ret = reply_buf(c, 200, JSON, &b);
	}
	free(grant);
	free(client);
	free(scope);
	free(secret);
	free(atype);
	free(assertion);
	return ret;
}

/* --- the data plane --- */

static bool bearer_ok(struct azure_fake *f, const char *auth)
{
	bool ok = false;
	size_t i;

	if (auth == NULL || strncmp(auth, "Bearer ", 7) != 0)
		return false;
	pthread_mutex_lock(&f->mu);
	for (i = 0; i < f->ntokens && !ok; i++)
		ok = strcmp(f->tokens[i], auth + 7) == 0;
	pthread_mutex_unlock(&f->mu);
	return ok;
}

static enum MHD_Result list_sandboxes(struct azure_fake *f,
				      struct MHD_Connection *c)
{
	const char *skip = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
						       "$skipToken");
	unsigned start = skip ? (unsigned)strtoul(skip, NULL, 10) : 0;
	struct buf b = BUF_INIT(0);
	struct sbx *s;
	unsigned i = 0, n = 0;
	bool more = false;

	(void)!buf_append_str(&b, "{\"value\":[");
	pthread_mutex_lock(&f->mu);
	for (s = f->sandboxes; s != NULL; s = s->next, i++) {
		if (i < start)
			continue;
		if (f->page_size > 0 && n == f->page_size) {
			more = true;
			break;
		}
		if (n++ > 0)
			(void)!buf_append(&b, ",", 1);
		record_json(s, s->state, &b);
	}
	(void)!buf_append_str(&b, "]");
	if (more && f->next_link != NULL) {
		(void)!buf_append_str(&b, ",\"nextLink\":");
		jstrz(&b, f->next_link);
	} else if (more) {
		(void)!buf_printf(&b,
				  ",\"nextLink\":\"%s/subscriptions/%s/"
				  "resourceGroups/%s/sandboxGroups/%s/"
				  "sandboxes?$skipToken=%u&api-version=%s\"",
				  f->endpoint, AZURE_FAKE_SUBSCRIPTION,
				  AZURE_FAKE_RESOURCE_GROUP, AZURE_FAKE_GROUP,
				  start + n, API_VERSION);
	}
	pthread_mutex_unlock(&f->mu);
	(void)!buf_append_str(&b, "}");
	return reply_buf(c, 200, JSON, &b);
}

static enum MHD_Result get_sandbox(struct azure_fake *f,
				   struct MHD_Connection *c, const char *id)
{
	struct buf b = BUF_INIT(0);
	struct sbx *s;

	pthread_mutex_lock(&f->mu);
	s = sbx_find(f, id);
	if (s == NULL) {
		pthread_mutex_unlock(&f->mu);
		return dp_error(c, 404, "SandboxNotFound",
				"The sandbox was not found.");
	}
	if (s->raw != NULL) {
		(void)!buf_append_str(&b, s->raw);
	} else if (s->stopped_reads > 0) {
		s->stopped_reads--;
		record_json(s, "Stopped", &b);
	} else {
		record_json(s, s->state, &b);
	}
	pthread_mutex_unlock(&f->mu);
	return reply_buf(c, 200, JSON, &b);
}

/* A host path for an absolute sandbox path under the native root, or
 * NULL (outside it, or with a ".." component). */
static char *under_root(const char *root, const char *path)
{
	size_t n = strlen(AZURE_FAKE_NATIVE_ROOT);
	const char *rest;

	if (root == NULL || strncmp(path, AZURE_FAKE_NATIVE_ROOT, n) != 0 ||
	    (path[n] != '\0' && path[n] != '/'))
		return NULL;
	rest = path + n;
	if (strstr(rest, "/../") != NULL ||
	    (strlen(rest) >= 3 && strcmp(rest + strlen(rest) - 3, "/..") == 0))
		return NULL;
	return xasprintf("%s%s", root, rest);
}

static int read_host_file(const char *path, struct buf *out)
{
	char chunk[65536];
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		rc = buf_append(out, chunk, (size_t)n);
		if (rc < 0)
			break;
	}
	if (n < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static enum MHD_Result get_file(struct azure_fake *f, struct MHD_Connection *c,
				const char *id, const char *path)
{
	struct buf b = BUF_INIT(MAX_FILE);
	struct file *fl;
	struct sbx *s;
	char *host = NULL;
	int rc = -ENOENT;

	pthread_mutex_lock(&f->mu);
	s = sbx_find(f, id);
	if (s == NULL) {
		pthread_mutex_unlock(&f->mu);
		return dp_error(c, 404, "SandboxNotFound",
				"The sandbox was not found.");
	}
	fl = file_get(s, path, false);
	if (fl != NULL && fl->data != NULL) {
		rc = buf_append(&b, fl->data, fl->n);
	} else if (fl != NULL) {
		host = xstrdup(fl->host_path);
	} else {
		host = under_root(s->root, path);
		if (host == NULL && s->root != NULL &&
		    strncmp(path, AZURE_FAKE_NATIVE_ROOT "/",
			    strlen(AZURE_FAKE_NATIVE_ROOT) + 1) == 0)
			rc = -EACCES;
	}
	pthread_mutex_unlock(&f->mu);
	if (host != NULL)
		rc = read_host_file(host, &b);
	free(host);
	if (rc == 0)
		return reply_buf(c, 200, "application/octet-stream", &b);
	buf_cleanup(&b);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return dp_error(c, 404, "FileNotFound",
				"The file was not found in the sandbox.");
	if (rc == -EISDIR)
		return dp_error(c, 400, "NotAFile", "The path is a directory.");
	if (rc == -EFBIG)
		return dp_error(c, 400, "FileTooLarge",
				"The file is larger than 32 MiB.");
	return dp_error(c, 400, "InvalidPath", strerror(-rc));
}

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* /bin/sh -c command in dir: output (bounded) and exit code. */
static int run_shell(const char *dir, const char *command, struct buf *out,
		     struct buf *err, int *code)
{
	int op[2], ep[2], status = 0;
	struct pollfd pfd[2];
	long long deadline = mono_ms() + EXEC_TIMEOUT_MS;
	int open_fds = 2;
	pid_t pid;

	if (pipe2(op, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(ep, O_CLOEXEC) < 0) {
		close(op[0]);
		close(op[1]);
		return -errno;
	}
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(op[1], 1) < 0 ||
		    dup2(ep[1], 2) < 0 || chdir(dir) < 0)
			_exit(126);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}
	close(op[1]);
	close(ep[1]);
	if (pid < 0) {
		close(op[0]);
		close(ep[0]);
		return -EAGAIN;
	}
	pfd[0].fd = op[0];
	pfd[1].fd = ep[0];
	pfd[0].events = pfd[1].events = POLLIN;
	while (open_fds > 0) {
		long long left = deadline - mono_ms();
		int i;

		if (left <= 0) {
			kill(-pid, SIGKILL);
			break;
		}
		if (poll(pfd, 2, (int)(left > 1000 ? 1000 : left)) < 0 &&
		    errno != EINTR)
			break;
		for (i = 0; i < 2; i++) {
			char chunk[16384];
			ssize_t n;

			if (pfd[i].fd < 0 || pfd[i].revents == 0)
				continue;
			n = read(pfd[i].fd, chunk, sizeof(chunk));
			if (n <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				open_fds--;
				continue;
			}
			(void)!buf_append(i == 0 ? out : err, chunk, (size_t)n);
		}
	}
	if (pfd[0].fd >= 0)
		close(pfd[0].fd);
	if (pfd[1].fd >= 0)
		close(pfd[1].fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	return 0;
}

static enum MHD_Result exec_shell(struct azure_fake *f,
				  struct MHD_Connection *c, const char *id,
				  struct upload *up)
{
	struct buf out = BUF_INIT(MAX_UPLOAD), err = BUF_INIT(MAX_UPLOAD);
	struct buf b = BUF_INIT(0);
	char *command = NULL, *cwd = NULL, *dir = NULL;
	struct sbx *s;
	int code = 0, rc;

	if (up->body.data == NULL ||
	    proto_azure_exec_req_decode(up->body.data, up->body.len, &command,
					&cwd) < 0)
		return dp_error(c, 400, "InvalidRequestBody",
				"The body is not {\"command\", "
				"\"workingDirectory\"?}.");
	pthread_mutex_lock(&f->mu);
	replace(&f->last_cmd, command);
	replace(&f->last_cwd, cwd);
	s = sbx_find(f, id);
	if (s != NULL && s->root != NULL)
		dir = under_root(s->root,
				 cwd != NULL ? cwd : AZURE_FAKE_NATIVE_ROOT);
	pthread_mutex_unlock(&f->mu);
	if (dir == NULL) {
		free(command);
		free(cwd);
		return dp_error(c, 400, "InvalidWorkingDirectory",
				"The working directory is not in the "
				"sandbox.");
	}
	rc = run_shell(dir, command, &out, &err, &code);
	free(command);
	free(cwd);
	free(dir);
	if (rc < 0) {
		buf_cleanup(&out);
		buf_cleanup(&err);
		return dp_error(c, 500, "InternalError", strerror(-rc));
	}
	(void)!buf_append_str(&b, "{\"stdout\":");
	jstr(&b, out.data ? out.data : "", out.len);
	(void)!buf_append_str(&b, ",\"stderr\":");
	jstr(&b, err.data ? err.data : "", err.len);
	(void)!buf_printf(&b, ",\"exitCode\":%d}", code);
	buf_cleanup(&out);
	buf_cleanup(&err);
	return reply_buf(c, 200, JSON, &b);
}

static enum MHD_Result lifecycle(struct azure_fake *f, struct MHD_Connection *c,
				 const char *id, const char *state)
{
	bool found = false;

	WITH_SBX(f, id, {
		replace(&s->state, state);
		found = true;
	});
	if (!found)
		return dp_error(c, 404, "SandboxNotFound",
				"The sandbox was not found.");
	return reply(c, 202, NULL, NULL, 0, NULL);
}

static enum MHD_Result add_port(struct azure_fake *f, struct MHD_Connection *c,
				const char *id, struct upload *up)
{
	unsigned port = 0;
	bool anon = false, found = false;
	char *mode = NULL;

	if (up->body.data == NULL ||
	    proto_azure_port_add_decode(up->body.data, up->body.len, &port,
					&anon, &mode) < 0 ||
	    port != PROTO_AZURE_AGENT_PORT || !anon || mode == NULL ||
	    strcmp(mode, "Always") != 0) {
		free(mode);
		return dp_error(c, 400, "InvalidRequestBody",
				"The body is not {\"port\":8971, \"auth\":"
				"{\"anonymous\":true}, \"activationMode\":"
				"\"Always\"}.");
	}
	free(mode);
	WITH_SBX(f, id, {
		s->has_port = true;
		replace(&s->port_url, s->add_url);
		found = true;
	});
	if (!found)
		return dp_error(c, 404, "SandboxNotFound",
				"The sandbox was not found.");
	return reply_str(c, 200, JSON,
			 "{\"port\":8971,\"auth\":{\"anonymous\":true},"
			 "\"activationMode\":\"Always\"}");
}

static enum MHD_Result data_plane(struct azure_fake *f,
				  struct MHD_Connection *c, const char *url,
				  const char *method, struct upload *up)
{
	const char *api = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
						      "api-version");
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       "Authorization");
	char prefix[256], id[128];
	const char *rest, *tail;
	enum MHD_Result ret;
	size_t n;

	if (api == NULL || strcmp(api, API_VERSION) != 0) {
		pthread_mutex_lock(&f->mu);
		f->bad_version++;
		pthread_mutex_unlock(&f->mu);
		return dp_error(c, 400, "InvalidApiVersion",
				"The api-version is missing or not "
				"supported.");
	}
	if (!bearer_ok(f, auth)) {
		pthread_mutex_lock(&f->mu);
		f->unauthorized++;
		pthread_mutex_unlock(&f->mu);
		return dp_error(c, 401, "InvalidAuthenticationToken",
				"The access token is missing or invalid.");
	}
	snprintf(prefix, sizeof(prefix),
		 "/subscriptions/%s/resourceGroups/%s/sandboxGroups/%s",
		 AZURE_FAKE_SUBSCRIPTION, AZURE_FAKE_RESOURCE_GROUP,
		 AZURE_FAKE_GROUP);
	n = strlen(prefix);
	if (strncmp(url, prefix, n) != 0)
		return dp_error(c, 404, "SandboxGroupNotFound",
				"The sandbox group was not found.");
	rest = url + n;
	if (strcmp(rest, "/sandboxes") == 0 && strcmp(method, "GET") == 0) {
		if (route_enter(f, c, AZF_LIST, "", &ret))
			return ret;
		return list_sandboxes(f, c);
	}
	if (strncmp(rest, "/sandboxes/", 11) != 0)
		return reply(c, 404, NULL, NULL, 0, NULL);
	rest += 11;
	n = strcspn(rest, "/");
	if (n == 0 || n >= sizeof(id))
		return reply(c, 404, NULL, NULL, 0, NULL);
	memcpy(id, rest, n);
	id[n] = '\0';
	tail = rest + n;
	if (strcmp(method, "GET") == 0 && *tail == '\0') {
		if (route_enter(f, c, AZF_GET, id, &ret))
			return ret;
		return get_sandbox(f, c, id);
	}
	if (strcmp(method, "GET") == 0 && strcmp(tail, "/files") == 0) {
		const char *path = MHD_lookup_connection_value(
			c, MHD_GET_ARGUMENT_KIND, "path");
		enum azure_fake_route r;

		if (path == NULL || path[0] != '/')
			return dp_error(c, 400, "InvalidPath",
					"path must be an absolute path.");
		r = strcmp(path, AZURE_FAKE_TOKEN_PATH) == 0 ? AZF_CREDENTIAL
							     : AZF_FILES;
		pthread_mutex_lock(&f->mu);
		replace(&f->last_path, path);
		pthread_mutex_unlock(&f->mu);
		if (route_enter(f, c, r, id, &ret))
			return ret;
		return get_file(f, c, id, path);
	}
	if (strcmp(method, "POST") != 0)
		return reply(c, 405, NULL, NULL, 0, NULL);
	if (strcmp(tail, "/executeShellCommand") == 0) {
		if (route_enter(f, c, AZF_EXEC, id, &ret))
			return ret;
		return exec_shell(f, c, id, up);
	}
	if (strcmp(tail, "/resume") == 0) {
		if (route_enter(f, c, AZF_RESUME, id, &ret))
			return ret;
		return lifecycle(f, c, id, "Running");
	}
	if (strcmp(tail, "/stop") == 0) {
		if (route_enter(f, c, AZF_STOP, id, &ret))
			return ret;
		return lifecycle(f, c, id, "Stopped");
	}
	if (strcmp(tail, "/ports/add") == 0) {
		if (route_enter(f, c, AZF_PORTS_ADD, id, &ret))
			return ret;
		return add_port(f, c, id, up);
	}
	return reply(c, 404, NULL, NULL, 0, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *data,
				  size_t *size, void **state)
{
	struct azure_fake *f = cls;
	struct upload *up = *state;
	const char *host;
	size_t n;

	(void)version;
	if (up == NULL) {
		up = xcalloc(1, sizeof(*up));
		buf_init(&up->body, MAX_UPLOAD);
		*state = up;
		return MHD_YES;
	}
	if (*size > 0) {
		if (buf_append(&up->body, data, *size) < 0)
			up->too_big = true;
		*size = 0;
		return MHD_YES;
	}
	if (up->too_big)
		return reply_str(c, 413, NULL, NULL);
	host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	if (host == NULL)
		return reply_str(c, 400, NULL, NULL);
	n = strcspn(host, ":");
	if (n == strlen(LOGIN_HOST) && strncasecmp(host, LOGIN_HOST, n) == 0)
		return token_endpoint(f, c, url, method, up);
	if (n == strlen(f->dp_host) && strncasecmp(host, f->dp_host, n) == 0)
		return data_plane(f, c, url, method, up);
	return reply_str(c, 421, NULL, NULL);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode toe)
{
	struct upload *up = *state;

	(void)cls;
	(void)c;
	(void)toe;
	if (up != NULL) {
		buf_cleanup(&up->body);
		free(up);
		*state = NULL;
	}
}

/* ---- the proxy -------------------------------------------------------------- */

void azure_fake_proxy_route(struct azure_fake *f, const char *host,
			    unsigned port)
{
	struct route_entry **pp, *r;

	pthread_mutex_lock(&f->mu);
	for (pp = &f->routes; (r = *pp) != NULL; pp = &r->next)
		if (strcasecmp(r->host, host) == 0)
			break;
	if (r == NULL && port != 0) {
		r = xcalloc(1, sizeof(*r));
		r->host = xstrdup(host);
		*pp = r;
	}
	if (r != NULL)
		r->port = port;
	pthread_mutex_unlock(&f->mu);
}

unsigned azure_fake_proxy_accepts(struct azure_fake *f, const char *host)
{
	struct route_entry *r;
	unsigned n = 0;

	pthread_mutex_lock(&f->mu);
	for (r = f->routes; r != NULL; r = r->next)
		if (strcasecmp(r->host, host) == 0)
			n = r->accepts;
	pthread_mutex_unlock(&f->mu);
	return n;
}

static int connect_loopback(unsigned port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static bool ssl_write_all(SSL *ssl, const char *p, size_t n)
{
	while (n > 0) {
		int w = SSL_write(ssl, p, (int)n);

		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void *relay_main(void *arg)
{
	struct relay *rl = arg;
	struct azure_fake *f = rl->f;
	struct route_entry *r;
	struct timeval tv = {10, 0};
	const char *host;
	unsigned port = 0;
	char buf[16384];
	int one = 1;
	SSL *ssl;

	ssl = SSL_new(f->ctx);
	if (ssl == NULL)
		goto out;
	/* The handshake has a deadline; the relay then waits in poll. Each
	 * relayed chunk goes out at once, as the agent wrote it. */
	setsockopt(rl->cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(rl->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	SSL_set_fd(ssl, rl->cfd);
	if (SSL_accept(ssl) != 1)
		goto out;
	host = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	pthread_mutex_lock(&f->mu);
	for (r = f->routes; host != NULL && r != NULL; r = r->next) {
		if (strcasecmp(r->host, host) == 0) {
			port = r->port;
			r->accepts++;
		}
	}
	pthread_mutex_unlock(&f->mu);
	if (port == 0)
		goto out;
	pthread_mutex_lock(&f->mu);
	rl->bfd = f->stopping ? -1 : connect_loopback(port);
	pthread_mutex_unlock(&f->mu);
	if (rl->bfd < 0)
		goto out;
	for (;;) {
		struct pollfd pfd[2] = {{rl->cfd, POLLIN, 0},
					{rl->bfd, POLLIN, 0}};
		bool stopping;
		int n;

		pthread_mutex_lock(&f->mu);
		stopping = f->stopping;
		pthread_mutex_unlock(&f->mu);
		if (stopping)
			break;
		if (SSL_pending(ssl) == 0 && poll(pfd, 2, 500) <= 0)
			continue;
		if (SSL_pending(ssl) > 0 ||
		    (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			n = SSL_read(ssl, buf, sizeof(buf));
			if (n <= 0)
				break;
			if (!send_all(rl->bfd, buf, (size_t)n))
				break;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t got = recv(rl->bfd, buf, sizeof(buf), 0);

			if (got <= 0) {
				/* The agent closed: so does the proxy, with a
				 * clean TLS close. */
				SSL_shutdown(ssl);
				break;
			}
			if (!ssl_write_all(ssl, buf, (size_t)got))
				break;
		}
	}
out:
	SSL_free(ssl);
	/* Closed under the lock, so that stop never shuts down a number
	 * the kernel gave to something else since. */
	pthread_mutex_lock(&f->mu);
	if (rl->bfd >= 0)
		close(rl->bfd);
	close(rl->cfd);
	rl->bfd = rl->cfd = -1;
	rl->done = true;
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* Join the relays that ended. */
static void reap_relays(struct azure_fake *f)
{
	struct relay **pp, *rl, *done = NULL;

	pthread_mutex_lock(&f->mu);
	for (pp = &f->relays; (rl = *pp) != NULL;) {
		if (rl->done) {
			*pp = rl->next;
			rl->next = done;
			done = rl;
		} else {
			pp = &rl->next;
		}
	}
	pthread_mutex_unlock(&f->mu);
	while ((rl = done) != NULL) {
		done = rl->next;
		pthread_join(rl->th, NULL);
		free(rl);
	}
}

static void *accept_main(void *arg)
{
	struct azure_fake *f = arg;

	for (;;) {
		struct relay *rl;
		int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);

		pthread_mutex_lock(&f->mu);
		if (f->stopping) {
			pthread_mutex_unlock(&f->mu);
			if (fd >= 0)
				close(fd);
			break;
		}
		pthread_mutex_unlock(&f->mu);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		reap_relays(f);
		rl = xcalloc(1, sizeof(*rl));
		rl->f = f;
		rl->cfd = fd;
		rl->bfd = -1;
		pthread_mutex_lock(&f->mu);
		rl->next = f->relays;
		f->relays = rl;
		pthread_mutex_unlock(&f->mu);
		if (pthread_create(&rl->th, NULL, relay_main, rl) != 0) {
			pthread_mutex_lock(&f->mu);
			f->relays = rl->next;
			pthread_mutex_unlock(&f->mu);
			close(fd);
			free(rl);
		}
	}
	return NULL;
}

static int start_proxy(struct azure_fake *f, char *errbuf, size_t errsz)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	f->ctx = SSL_CTX_new(TLS_server_method());
	if (f->ctx == NULL || SSL_CTX_use_certificate(f->ctx, f->cert) != 1 ||
	    SSL_CTX_use_PrivateKey(f->ctx, f->key) != 1) {
		say(errbuf, errsz, "the proxy's TLS context could not be made");
		return -EIO;
	}
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (f->lfd < 0 ||
	    bind(f->lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(f->lfd, 64) < 0 ||
	    getsockname(f->lfd, (struct sockaddr *)&sin, &len) < 0) {
		say(errbuf, errsz, "the proxy cannot listen: %s",
		    strerror(errno));
		return -EIO;
	}
	f->proxy_port = ntohs(sin.sin_port);
	if (pthread_create(&f->accept_th, NULL, accept_main, f) != 0) {
		say(errbuf, errsz, "the proxy's thread did not start");
		return -EIO;
	}
	f->accepting = true;
	return 0;
}

static void stop_proxy(struct azure_fake *f)
{
	struct relay *rl, *next;

	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	for (rl = f->relays; rl != NULL; rl = rl->next) {
		if (rl->cfd >= 0)
			shutdown(rl->cfd, SHUT_RDWR);
		if (rl->bfd >= 0)
			shutdown(rl->bfd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&f->mu);
	if (f->lfd >= 0)
		shutdown(f->lfd, SHUT_RDWR);
	if (f->accepting)
		pthread_join(f->accept_th, NULL);
	if (f->lfd >= 0)
		close(f->lfd);
	/* No relay is added after the accept thread ended. */
	for (rl = f->relays; rl != NULL; rl = next) {
		next = rl->next;
		pthread_join(rl->th, NULL);
		free(rl);
	}
	f->relays = NULL;
}

/* ---- lifetime ------------------------------------------------------------------ */

int azure_fake_start(const char *dir, struct azure_fake **out, char *errbuf,
		     size_t errsz)
{
	struct azure_fake *f = xcalloc(1, sizeof(*f));
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sin;
	int rc;

	pthread_mutex_init(&f->mu, NULL);
	f->lfd = -1;
	f->lifetime = 3599;
	snprintf(f->dp_host, sizeof(f->dp_host),
		 "management.%s.azuredevcompute.io", AZURE_FAKE_REGION);
	rc = make_pki(f, dir, errbuf, errsz);
	if (rc < 0)
		goto fail;
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		say(errbuf, errsz, "libmicrohttpd has no TLS here");
		rc = -ENOTSUP;
		goto fail;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD |
			MHD_USE_THREAD_PER_CONNECTION | MHD_USE_TLS,
		0, NULL, NULL, on_request, f, MHD_OPTION_SOCK_ADDR, &sin,
		MHD_OPTION_HTTPS_MEM_KEY, f->key_pem, MHD_OPTION_HTTPS_MEM_CERT,
		f->cert_pem, MHD_OPTION_NOTIFY_COMPLETED, on_completed, f,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
	if (f->mhd == NULL) {
		say(errbuf, errsz, "libmicrohttpd did not start");
		rc = -EIO;
		goto fail;
	}
	info = MHD_get_daemon_info(f->mhd, MHD_DAEMON_INFO_BIND_PORT);
	f->mhd_port = info != NULL ? info->port : 0;
	rc = start_proxy(f, errbuf, errsz);
	if (rc < 0)
		goto fail;
	snprintf(f->endpoint, sizeof(f->endpoint), "https://%s:%u", f->dp_host,
		 f->mhd_port);
	snprintf(f->authority, sizeof(f->authority), "https://%s:%u",
		 LOGIN_HOST, f->mhd_port);
	snprintf(f->resolve, sizeof(f->resolve),
		 "%s:%u:127.0.0.1,%s:%u:127.0.0.1,*:%u:127.0.0.1", f->dp_host,
		 f->mhd_port, LOGIN_HOST, f->mhd_port, f->proxy_port);
	*out = f;
	return 0;
fail:
	azure_fake_stop(f);
	return rc;
}

void azure_fake_stop(struct azure_fake *f)
{
	struct route_entry *r, *rn;
	struct sbx *s, *sn;
	int i;

	if (f == NULL)
		return;
	stop_proxy(f);
	if (f->mhd != NULL)
		MHD_stop_daemon(f->mhd);
	SSL_CTX_free(f->ctx);
	X509_free(f->cert);
	EVP_PKEY_free(f->key);
	for (s = f->sandboxes; s != NULL; s = sn) {
		sn = s->next;
		sbx_free(s);
	}
	for (r = f->routes; r != NULL; r = rn) {
		rn = r->next;
		free(r->host);
		free(r);
	}
	for (i = 0; i < AZF_ROUTES; i++) {
		free(f->faults[i].ctype);
		free(f->faults[i].body);
		free(f->faults[i].headers);
	}
	tokens_clear(f);
	free(f->ca_file);
	free(f->cert_pem);
	free(f->key_pem);
	free(f->last_form);
	free(f->next_link);
	free(f->last_cmd);
	free(f->last_cwd);
	free(f->last_path);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
