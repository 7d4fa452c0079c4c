/* SPDX-License-Identifier: MIT */
/*
 * helpers: shared test plumbing. Failures abort the current test through
 * ck_abort_msg, so callers need no error paths.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/unixurl.h"
#include "tests/helpers.h"

long long th_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *th_tmpdir(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (base == NULL || *base == '\0')
		base = "/tmp";
	if (asprintf(&path, "%s/sbfs-%s-XXXXXX", base, tag) < 0)
		ck_abort_msg("asprintf");
	if (mkdtemp(path) == NULL)
		ck_abort_msg("mkdtemp %s: %s", path, strerror(errno));
	return path;
}

void th_rmtree_free(char *path)
{
	th_rmtree(path);
	free(path);
}

static void mkparents(const char *path)
{
	char tmp[PATH_MAX];
	char *p;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(tmp, 0755);
		*p = '/';
	}
}

void th_write_file(const char *path, const void *data, size_t n)
{
	int fd;

	mkparents(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_msg(write(fd, data, n) == (ssize_t)n, "write %s", path);
	close(fd);
}

char *th_read_file(const char *path, size_t *len)
{
	struct buf b = BUF_INIT(0);
	char chunk[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		ck_assert(buf_append(&b, chunk, (size_t)n) == 0);
	close(fd);
	return buf_take(&b, len);
}

const char *th_program(const char *name)
{
	static char path[PATH_MAX];
	const char *env = NULL;
	const char *dir = getenv("SBFS_BUILDDIR");

	if (strcmp(name, "sandbox-agent") == 0)
		env = getenv("SBFS_AGENT");
	else if (strcmp(name, "sandboxctl") == 0)
		env = getenv("SBFS_CTL");
	else if (strcmp(name, "sandboxfs") == 0)
		env = getenv("SBFS_MOUNT");
	if (env != NULL && *env != '\0')
		return env;
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : ".", name);
	return path;
}

void th_agent_start(struct th_agent *a, const char *const *extra_args,
		    bool activate)
{
	th_agent_start_logged(a, extra_args, activate, NULL);
}

void th_agent_await(struct th_agent *a, const char *portfile)
{
	long long deadline;
	char *text;

	deadline = th_now_ms() + 10000;
	for (;;) {
		int status;

		text = th_read_file(portfile, NULL);
		if (text != NULL && *text != '\0')
			break;
		free(text);
		if (waitpid(a->pid, &status, WNOHANG) == a->pid)
			ck_abort_msg("sandbox-agent exited at start (%d)",
				     status);
		ck_assert_msg(th_now_ms() < deadline,
			      "sandbox-agent did not start");
		usleep(10000);
	}
	a->port = (unsigned)strtoul(text, NULL, 10);
	free(text);
	text = th_read_file(a->token_file, NULL);
	ck_assert_msg(text != NULL && strlen(text) == 44, "token file");
	memcpy(a->token, text, 45);
	free(text);
	snprintf(a->base, sizeof(a->base), "http://127.0.0.1:%u", a->port);
	snprintf(a->auth, sizeof(a->auth), "Authorization: Bearer %s",
		 a->token);
}

void th_agent_start_logged(struct th_agent *a, const char *const *extra_args,
			   bool activate, const char *log_path)
{
	const char *argv[64];
	char portfile[PATH_MAX];
	size_t argc = 0, i;
	bool confine_given = false;

	memset(a, 0, sizeof(*a));
	a->dir = th_tmpdir("agent");
	if (asprintf(&a->root, "%s/root", a->dir) < 0 ||
	    asprintf(&a->token_file, "%s/token", a->dir) < 0)
		ck_abort_msg("asprintf");
	ck_assert(mkdir(a->root, 0755) == 0);
	snprintf(portfile, sizeof(portfile), "%s/port", a->dir);

	argv[argc++] = th_program("sandbox-agent");
	argv[argc++] = "--root";
	argv[argc++] = a->root;
	argv[argc++] = "--listen";
	argv[argc++] = "127.0.0.1";
	argv[argc++] = "--port";
	argv[argc++] = "0";
	argv[argc++] = "--port-file";
	argv[argc++] = portfile;
	argv[argc++] = "--token-file";
	argv[argc++] = a->token_file;
	for (i = 0; extra_args != NULL && extra_args[i] != NULL; i++) {
		if (strcmp(extra_args[i], "--confine") == 0)
			confine_given = true;
		ck_assert(argc < 60);
		argv[argc++] = extra_args[i];
	}
	if (!confine_given) {
		argv[argc++] = "--confine";
		argv[argc++] = "none";
	}
	argv[argc] = NULL;

	a->pid = fork();
	ck_assert(a->pid >= 0);
	if (a->pid == 0) {
		if (log_path != NULL) {
			int lfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND,
				       0600);

			if (lfd < 0 || dup2(lfd, 2) < 0)
				_exit(126);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	th_agent_await(a, portfile);
	if (activate) {
		const char *h[] = {a->auth, NULL};
		struct th_resp r;
		char url[128];

		snprintf(url, sizeof(url), "%s/v1/activate", a->base);
		th_http("POST", url, h, NULL, 0, &r);
		ck_assert_msg(r.status == 204, "activate: %ld", r.status);
		th_resp_cleanup(&r);
	}
}

int th_agent_terminate(struct th_agent *a)
{
	int status = 0;

	if (a->pid > 0) {
		status = th_child_stop(a->pid);
		a->pid = 0;
	}
	return status;
}

void th_agent_stop(struct th_agent *a)
{
	th_agent_terminate(a);
	th_rmtree_free(a->dir);
	free(a->root);
	free(a->token_file);
	a->dir = a->root = a->token_file = NULL;
}

static int give_one(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (lchown(path, 65534, 65534) < 0)
		ck_abort_msg("lchown %s: %s", path, strerror(errno));
	return 0;
}

void th_give_to_exec_user(const char *path)
{
	if (geteuid() == 0)
		nftw(path, give_one, 32, FTW_PHYS);
}

static size_t collect(char *p, size_t size, size_t nmemb, void *ud)
{
	struct buf *b = ud;

	if (buf_append(b, p, size * nmemb) < 0)
		return 0;
	return size * nmemb;
}

int th_http_timeout(const char *method, const char *url,
		    const char *const *headers, const void *body, size_t len,
		    long timeout_ms, struct th_resp *out)
{
	struct curl_slist *hl = NULL;
	CURL *c = curl_easy_init();
	char *unix_url = NULL;
	CURLcode rc;
	size_t i;

	ck_assert(c != NULL);
	memset(out, 0, sizeof(*out));
	buf_init(&out->body, 0);
	buf_init(&out->headers, 0);
	for (i = 0; headers != NULL && headers[i] != NULL; i++)
		hl = curl_slist_append(hl, headers[i]);
	/* libcurl adds "Expect: 100-continue" to large bodies; the agent
	 * must cope, but tests want one round trip. */
	hl = curl_slist_append(hl, "Expect:");
	if (unixurl_is(url)) {
		/* "http+unix://ENCODED-SOCKET/path": the socket, then the
		 * request's path on it. */
		const char *host = url + strlen(UNIXURL_SCHEME);
		const char *rest = strchr(host, '/');
		char *route, sock[PATH_MAX];

		ck_assert(rest != NULL);
		ck_assert(asprintf(&route, "%.*s/", (int)(rest - url), url) >
			  0);
		ck_assert_msg(unixurl_parse(route, sock, sizeof(sock)) == 0,
			      "bad route %s", route);
		free(route);
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
		ck_assert(asprintf(&unix_url, "http://localhost%s", rest) > 0);
		url = unix_url;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &out->body);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &out->headers);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)len);
	}
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	free(unix_url);
	return rc == CURLE_OK ? 0 : -1;
}

void th_http(const char *method, const char *url, const char *const *headers,
	     const void *body, size_t len, struct th_resp *out)
{
	ck_assert_msg(th_http_timeout(method, url, headers, body, len, 30000,
				      out) == 0,
		      "%s %s: no answer", method, url);
}

char *th_resp_header(const struct th_resp *r, const char *name)
{
	size_t nl = strlen(name);
	const char *p = r->headers.data;

	while (p != NULL && *p) {
		const char *eol = strstr(p, "\r\n");
		size_t linelen = eol ? (size_t)(eol - p) : strlen(p);

		if (linelen > nl && strncasecmp(p, name, nl) == 0 &&
		    p[nl] == ':') {
			const char *v = p + nl + 1;

			while (*v == ' ')
				v++;
			return strndup(v, linelen - (size_t)(v - p));
		}
		p = eol ? eol + 2 : NULL;
	}
	return NULL;
}

void th_resp_cleanup(struct th_resp *r)
{
	buf_cleanup(&r->body);
	buf_cleanup(&r->headers);
}

void th_listener_start(struct th_listener *l, void *(*fn)(void *), void *arg)
{
	l->fd = th_listen_loopback(16, &l->port);
	ck_assert_int_ge(l->fd, 0);
	ck_assert_int_eq(pthread_create(&l->thread, NULL, fn, arg), 0);
}

void th_listener_stop(struct th_listener *l)
{
	shutdown(l->fd, SHUT_RDWR);
	pthread_join(l->thread, NULL);
	close(l->fd);
}

ssize_t th_raw(unsigned port, const void *req, size_t n, struct buf *out,
	       int timeout_ms)
{
	long long deadline = th_now_ms() + timeout_ms;
	ssize_t total = 0;
	int fd = th_connect_loopback(port);

	if (fd < 0)
		return -1;
	if (n > 0 && send(fd, req, n, MSG_NOSIGNAL) < 0) {
		close(fd);
		return total;
	}
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		long long left = deadline - th_now_ms();
		char chunk[8192];
		ssize_t got;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			break;
		got = recv(fd, chunk, sizeof(chunk), 0);
		if (got <= 0)
			break;
		if (buf_append(out, chunk, (size_t)got) < 0)
			break;
		total += got;
	}
	close(fd);
	return total;
}
