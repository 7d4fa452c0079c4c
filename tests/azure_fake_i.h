/* SPDX-License-Identifier: MIT */
/*
 * azure_fake_i: what the files of the fake Azure share (azure_fake.h is
 * the contract):
 *
 *   azure_fake.c        the state (sandboxes, files, tokens, faults,
 *                       counters), the test PKI, start and stop
 *   azure_fake_http.c   the libmicrohttpd TLS daemon: the data plane and
 *                       the token endpoint
 *   azure_fake_proxy.c  the OpenSSL relay in front of the agents
 *
 * f->mu guards the state; the daemon's and the relay's threads take it.
 */
#ifndef SBFS_TEST_AZURE_FAKE_I_H
#define SBFS_TEST_AZURE_FAKE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tests/azure_fake.h"

#define LOGIN_HOST "login.microsoftonline.com"

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

/* Run body with s, sandbox id, under the lock (nothing when there is
 * none). */
#define WITH_SBX(f, id, body)                   \
	do {                                    \
		struct sbx *s;                  \
		pthread_mutex_lock(&(f)->mu);   \
		s = azf_sbx_find((f), (id));    \
		if (s != NULL) {                \
			body;                   \
		}                               \
		pthread_mutex_unlock(&(f)->mu); \
	} while (0)

/* ---- azure_fake.c ------------------------------------------------------------ */

/* printf into errbuf (may be NULL). */
void azf_say(char *errbuf, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* *field becomes a copy of value (NULL: none). */
void azf_replace(char **field, const char *value);
/* Under f->mu. */
struct sbx *azf_sbx_find(struct azure_fake *f, const char *id);
struct file *azf_file_get(struct sbx *s, const char *path, bool create);

/* ---- azure_fake_http.c ------------------------------------------------------- */

/* The daemon's request and completion callbacks (cls: the fake). */
enum MHD_Result azf_on_request(void *cls, struct MHD_Connection *c,
			       const char *url, const char *method,
			       const char *version, const char *upload,
			       size_t *upload_size, void **state);
void azf_on_completed(void *cls, struct MHD_Connection *c, void **state,
		      enum MHD_RequestTerminationCode toe);

/* ---- azure_fake_proxy.c ------------------------------------------------------ */

int azf_proxy_start(struct azure_fake *f, char *errbuf, size_t errsz);
void azf_proxy_stop(struct azure_fake *f);

#endif
