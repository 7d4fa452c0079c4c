/* SPDX-License-Identifier: MIT */
/*
 * azure_fake: the fake Azure of the Azure provider's tests (see the
 * header). Three parts: a test PKI made with OpenSSL and the fake's state
 * (here), a libmicrohttpd TLS daemon for the data plane and the token
 * endpoint (azure_fake_http.c), and an OpenSSL relay for the agents'
 * proxy (azure_fake_proxy.c).
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
#include "tests/azure_fake_i.h"
#include "tests/sys_helpers.h"

void azf_say(char *errbuf, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (errbuf == NULL || errsz == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(errbuf, errsz, fmt, ap);
	va_end(ap);
}

void azf_replace(char **field, const char *value)
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
		azf_say(errbuf, errsz, "cannot write %s", f->ca_file);
		rc = -EIO;
		goto out_quiet;
	}
	rc = 0;
out:
	if (rc < 0)
		azf_say(errbuf, errsz, "the test PKI could not be made");
out_quiet:
	EVP_PKEY_free(ca_key);
	X509_free(ca);
	free(ca_pem);
	return rc;
}

/* ---- sandboxes ---------------------------------------------------------------- */

struct sbx *azf_sbx_find(struct azure_fake *f, const char *id)
{
	struct sbx *s;

	for (s = f->sandboxes; s != NULL; s = s->next)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

/* Free one label of a sandbox (already out of its list). */
static void label_free(struct label *l)
{
	free(l->key);
	free(l->value);
	free(l);
}

/* Free one file of a sandbox (already out of its list). */
static void file_free(struct file *fl)
{
	free(fl->path);
	free(fl->data);
	free(fl->host_path);
	free(fl);
}

static void sbx_free(struct sbx *s)
{
	struct label *l, *ln;
	struct file *fl, *fn;

	if (s == NULL)
		return;
	for (l = s->labels; l != NULL; l = ln) {
		ln = l->next;
		label_free(l);
	}
	for (fl = s->files; fl != NULL; fl = fn) {
		fn = fl->next;
		file_free(fl);
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
		label_free(l);
		return;
	}
	if (value == NULL)
		return;
	if (l == NULL) {
		l = xcalloc(1, sizeof(*l));
		l->key = xstrdup(key);
		*pp = l;
	}
	azf_replace(&l->value, value);
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

void azure_fake_set_state(struct azure_fake *f, const char *id,
			  const char *state)
{
	WITH_SBX(f, id, azf_replace(&s->state, state));
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
	WITH_SBX(f, id, azf_replace(&s->egress, json));
}

void azure_fake_set_vnet(struct azure_fake *f, const char *id, const char *name)
{
	WITH_SBX(f, id, azf_replace(&s->vnet, name));
}

void azure_fake_set_port_url(struct azure_fake *f, const char *id,
			     const char *url)
{
	WITH_SBX(f, id, {
		s->has_port = url != NULL;
		azf_replace(&s->port_url, url);
	});
}

void azure_fake_set_add_url(struct azure_fake *f, const char *id,
			    const char *url)
{
	WITH_SBX(f, id, azf_replace(&s->add_url, url));
}

void azure_fake_set_stopped_reads(struct azure_fake *f, const char *id,
				  unsigned n)
{
	WITH_SBX(f, id, s->stopped_reads = n);
}

void azure_fake_set_raw_record(struct azure_fake *f, const char *id,
			       const char *body)
{
	WITH_SBX(f, id, azf_replace(&s->raw, body));
}

struct file *azf_file_get(struct sbx *s, const char *path, bool create)
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
				file_free(fl);
				return;
			}
		}
		return;
	}
	fl = azf_file_get(s, path, true);
	free(fl->data);
	fl->data = NULL;
	fl->n = 0;
	azf_replace(&fl->host_path, host_path);
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
	WITH_SBX(f, id, azf_replace(&s->root, dir));
}

void azure_fake_set_page_size(struct azure_fake *f, unsigned n)
{
	th_locked_set(&f->mu, &f->page_size, &n, sizeof(n));
}

void azure_fake_set_next_link(struct azure_fake *f, const char *link)
{
	pthread_mutex_lock(&f->mu);
	azf_replace(&f->next_link, link);
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
	th_locked_set(&f->mu, &f->lifetime, &seconds, sizeof(seconds));
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
	azf_replace(&ft->ctype, ctype);
	azf_replace(&ft->body, body);
	azf_replace(&ft->headers, headers);
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
	return th_locked_uint(&f->mu, &f->calls[r]);
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
	return th_locked_uint(&f->mu, &f->unauthorized);
}

unsigned azure_fake_bad_version(struct azure_fake *f)
{
	return th_locked_uint(&f->mu, &f->bad_version);
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
		azf_say(errbuf, errsz, "libmicrohttpd has no TLS here");
		rc = -ENOTSUP;
		goto fail;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD |
			MHD_USE_THREAD_PER_CONNECTION | MHD_USE_TLS,
		0, NULL, NULL, azf_on_request, f, MHD_OPTION_SOCK_ADDR, &sin,
		MHD_OPTION_HTTPS_MEM_KEY, f->key_pem, MHD_OPTION_HTTPS_MEM_CERT,
		f->cert_pem, MHD_OPTION_NOTIFY_COMPLETED, azf_on_completed, f,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
	if (f->mhd == NULL) {
		azf_say(errbuf, errsz, "libmicrohttpd did not start");
		rc = -EIO;
		goto fail;
	}
	info = MHD_get_daemon_info(f->mhd, MHD_DAEMON_INFO_BIND_PORT);
	f->mhd_port = info != NULL ? info->port : 0;
	rc = azf_proxy_start(f, errbuf, errsz);
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
	azf_proxy_stop(f);
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
