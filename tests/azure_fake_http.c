/* SPDX-License-Identifier: MIT */
/*
 * azure_fake_http: the fake Azure's libmicrohttpd TLS daemon
 * (azure_fake_i.h): the data plane's routes and the token endpoint,
 * answers built by hand (the test side needs no JSON library), requests
 * read with the provider's own decoders where a body has JSON in it.
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
#include "common/clock.h"
#include "common/fdio.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/xalloc.h"
#include "tests/azure_fake.h"
#include "tests/azure_fake_i.h"

#define API_VERSION "2026-02-01-preview"
#define MAX_UPLOAD (8UL * 1024 * 1024)
#define MAX_FILE (32UL * 1024 * 1024)
#define EXEC_TIMEOUT_MS 60000
#define JSON "application/json; charset=utf-8"
#define JWT_BEARER "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

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

/* An error answer: head, a, mid, b, tail, where a and b are JSON strings
 * and the rest JSON already. */
static enum MHD_Result reply_error(struct MHD_Connection *c, int status,
				   const char *head, const char *a,
				   const char *mid, const char *b,
				   const char *tail)
{
	struct buf out = BUF_INIT(0);

	(void)!buf_append_str(&out, head);
	jstrz(&out, a);
	(void)!buf_append_str(&out, mid);
	jstrz(&out, b);
	(void)!buf_append_str(&out, tail);
	return reply_buf(c, status, JSON, &out);
}

static enum MHD_Result dp_error(struct MHD_Connection *c, int status,
				const char *code, const char *message)
{
	return reply_error(c, status, "{\"error\":{\"code\":", code,
			   ",\"message\":", message, "}}");
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
	return reply_error(c, status, "{\"error\":", code,
			   ",\"error_description\":", description,
			   ",\"error_codes\":[7000215]}");
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
	azf_replace(&f->last_form, body);
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

/* Sandbox id with f->mu held, or NULL (f->mu not held). */
static struct sbx *sbx_locked(struct azure_fake *f, const char *id)
{
	struct sbx *s;

	pthread_mutex_lock(&f->mu);
	s = azf_sbx_find(f, id);
	if (s == NULL)
		pthread_mutex_unlock(&f->mu);
	return s;
}

static enum MHD_Result sandbox_not_found(struct MHD_Connection *c)
{
	return dp_error(c, 404, "SandboxNotFound",
			"The sandbox was not found.");
}

static enum MHD_Result get_sandbox(struct azure_fake *f,
				   struct MHD_Connection *c, const char *id)
{
	struct buf b = BUF_INIT(0);
	struct sbx *s;

	s = sbx_locked(f, id);
	if (s == NULL)
		return sandbox_not_found(c);
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

	s = sbx_locked(f, id);
	if (s == NULL)
		return sandbox_not_found(c);
	fl = azf_file_get(s, path, false);
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

/* /bin/sh -c command in dir: output (bounded) and exit code. */
static int run_shell(const char *dir, const char *command, struct buf *out,
		     struct buf *err, int *code)
{
	int op[2], ep[2], status = 0;
	struct pollfd pfd[2];
	long long deadline = clock_mono_ms() + EXEC_TIMEOUT_MS;
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
		long long left = deadline - clock_mono_ms();
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
	fdio_close(pfd[0].fd);
	fdio_close(pfd[1].fd);
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
	azf_replace(&f->last_cmd, command);
	azf_replace(&f->last_cwd, cwd);
	s = azf_sbx_find(f, id);
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
		azf_replace(&s->state, state);
		found = true;
	});
	if (!found)
		return sandbox_not_found(c);
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
		azf_replace(&s->port_url, s->add_url);
		found = true;
	});
	if (!found)
		return sandbox_not_found(c);
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
		azf_replace(&f->last_path, path);
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

enum MHD_Result azf_on_request(void *cls, struct MHD_Connection *c,
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

void azf_on_completed(void *cls, struct MHD_Connection *c, void **state,
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
