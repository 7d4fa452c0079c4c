/* SPDX-License-Identifier: MIT */
/*
 * local_boot: one boot of a local sandbox's agent (local_ctl_i.h): its
 * command line (confined as the record says) and environment, its log,
 * the spawn, and the wait for its health route, asked over a plain socket
 * (local_ctl_health: libcurl stays in the transport's curl engine).
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/unixaddr.h"
#include "common/proto.h"
#include "common/sleep.h"
#include "common/token.h"
#include "common/unixurl.h"
#include "common/xalloc.h"
#include "client/local_ctl_i.h"

/* agent.log is moved to agent.log.old at a boot when it is larger. */
#define LOG_ROTATE_BYTES (4L * 1024 * 1024)
#define HEALTH_MAX_BYTES (64 * 1024)

/* ---- the health route ------------------------------------------------------- */

static int wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = {fd, events, 0};
	long long left;
	int n;

	for (;;) {
		left = deadline - clock_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* Split an HTTP/1.x answer: 200 and a health body, or -EPROTO. */
static int parse_health(const char *text, size_t len, struct proto_health *out)
{
	const char *hdr_end, *body, *cl;
	size_t blen;
	long status;

	if (len < 12 || strncmp(text, "HTTP/1.", 7) != 0 || text[8] != ' ')
		return -EPROTO;
	status = strtol(text + 9, NULL, 10);
	hdr_end = strstr(text, "\r\n\r\n");
	if (status != 200 || hdr_end == NULL)
		return -EPROTO;
	body = hdr_end + 4;
	blen = len - (size_t)(body - text);
	/* The body ends where Content-Length says, if it says. */
	cl = strcasestr(text, "\r\nContent-Length:");
	if (cl != NULL && cl < hdr_end) {
		unsigned long v = strtoul(cl + 17, NULL, 10);

		if (v > blen)
			return -EPROTO;
		blen = v;
	}
	if (proto_health_decode(body, blen, out) < 0 ||
	    out->protocol_version != PROTO_VERSION)
		return -EPROTO;
	return 0;
}

/* Where a local route's agent listens. */
struct route_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	int dirfd; /* a long socket path's directory, or -1 */
	unsigned port; /* 0 for a Unix socket */
	bool six;
};

static int route_addr(const char *url, struct route_addr *a)
{
	char sock[PATH_MAX];

	memset(a, 0, sizeof(*a));
	a->dirfd = -1;
	if (unixurl_parse(url, sock, sizeof(sock)) == 0) {
		a->len = sizeof(struct sockaddr_un);
		return unixaddr_fill(sock, (struct sockaddr_un *)&a->ss,
				     &a->dirfd);
	}
	if (!local_state_route_valid(url, &a->port, &a->six))
		return -EPROTO;
	if (a->six) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)a->port);
		s6->sin6_addr = in6addr_loopback;
		a->len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a->ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)a->port);
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->len = sizeof(*s4);
	}
	return 0;
}

/* Connect a non-blocking socket to the route by the deadline: the
 * descriptor, or a negative errno. */
static int connect_by(const struct route_addr *a, long long deadline)
{
	int fd, soerr = 0, rc;
	socklen_t slen = sizeof(soerr);

	fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len) == 0)
		return fd;
	if (errno != EINPROGRESS && errno != EAGAIN) {
		rc = -errno;
		goto fail;
	}
	rc = wait_fd(fd, POLLOUT, deadline);
	if (rc < 0)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0 ||
	    soerr != 0) {
		rc = soerr ? -soerr : -errno;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

static int send_by(int fd, const char *p, size_t len, long long deadline)
{
	size_t off = 0;
	ssize_t n;
	int rc;

	while (off < len) {
		n = send(fd, p + off, len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN) {
			rc = wait_fd(fd, POLLOUT, deadline);
			if (rc < 0)
				return rc;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		off += (size_t)n;
	}
	return 0;
}

/* Everything until the peer closes, into b (bounded: -EPROTO past it). */
static int recv_by(int fd, struct buf *b, long long deadline)
{
	int rc;

	for (;;) {
		rc = fdio_read_buf(fd, b, 4096);
		if (rc == -EFBIG)
			return -EPROTO; /* larger than any health answer */
		if (rc != -EAGAIN)
			return rc;
		rc = wait_fd(fd, POLLIN, deadline);
		if (rc < 0)
			return rc;
	}
}

int local_ctl_health(const char *url, long timeout_ms, struct proto_health *out)
{
	struct buf b = BUF_INIT(HEALTH_MAX_BYTES);
	long long deadline = clock_mono_ms() + timeout_ms;
	struct route_addr a;
	struct proto_health h;
	char req[160];
	size_t reqlen;
	int fd = -1, rc;

	rc = route_addr(url, &a);
	if (rc < 0)
		goto out;
	fd = connect_by(&a, deadline);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	/* HTTP/1.0: the answer is not chunked and ends when the agent
	 * closes the connection. */
	reqlen = (size_t)snprintf(req, sizeof(req),
				  "GET /v1/health?version=%d HTTP/1.0\r\n"
				  "Host: %s:%u\r\n"
				  "Accept: application/json\r\n\r\n",
				  PROTO_VERSION,
				  a.port == 0 ? "localhost"
				  : a.six     ? "[::1]"
					      : "127.0.0.1",
				  a.port);
	rc = send_by(fd, req, reqlen, deadline);
	if (rc == 0)
		rc = recv_by(fd, &b, deadline);
	if (rc == 0)
		rc = parse_health(b.data ? b.data : "", b.len, &h);
	if (rc == 0)
		*out = h;
out:
	fdio_close(fd);
	fdio_close(a.dirfd);
	buf_cleanup(&b);
	return rc;
}

/* ---- one boot -------------------------------------------------------------- */

struct boot_paths {
	char *dir, *root, *token, *sock, *log;
};

static void paths_init(struct local_ctl *c, const char *id,
		       struct boot_paths *p)
{
	p->dir = local_state_path(c->state_dir, id, LOCAL_PATH_DIR);
	p->root = local_state_path(c->state_dir, id, LOCAL_PATH_ROOT);
	p->token = local_state_path(c->state_dir, id, LOCAL_PATH_TOKEN);
	p->sock = local_state_path(c->state_dir, id, LOCAL_PATH_SOCKET);
	p->log = local_state_path(c->state_dir, id, LOCAL_PATH_LOG);
}

static void paths_cleanup(struct boot_paths *p)
{
	free(p->dir);
	free(p->root);
	free(p->token);
	free(p->sock);
	free(p->log);
}

static void rotate_log(const char *log)
{
	struct stat st;
	char *old;

	if (stat(log, &st) < 0 || st.st_size < LOG_ROTATE_BYTES)
		return;
	old = xasprintf("%s.old", log);
	if (rename(log, old) < 0)
		log_debug("cannot rotate %s: %s", log, strerror(errno));
	free(old);
}

/* Wait for a health answer on the agent's socket. */
static int wait_ready(struct local_ctl *c, const struct boot_paths *p,
		      const struct local_proc *agent, const char *url,
		      struct local_err *err)
{
	long long deadline = clock_mono_ms() + c->start_timeout_ms;
	struct proto_health h;
	struct stat st;
	long left;

	for (;;) {
		if (!local_proc_alive(agent))
			return local_err_set(
				err, -ECHILD,
				"the agent exited at start; see %s", p->log);
		left = (long)(deadline - clock_mono_ms());
		if (left <= 0)
			break;
		if (lstat(p->sock, &st) == 0 &&
		    local_ctl_health(url, left < 1000 ? left : 1000, &h) == 0)
			return 0;
		sleep_ms(LOCAL_POLL_MS);
	}
	return local_err_set(err, -ETIMEDOUT,
			     "the agent did not become healthy within %ld ms; "
			     "see %s",
			     c->start_timeout_ms, p->log);
}

static bool token_present(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       st.st_size == TOKEN_CHARS;
}

/* The caller's environment with the session root set: the agent's
 * paths never show on its command line (doc/security.md). */
static char **agent_env(const char *root)
{
	static const char key[] = "ALIEN_SANDBOX_ROOT=";
	size_t n = 0, i, k = 0;
	char **env;

	while (environ != NULL && environ[n] != NULL)
		n++;
	env = xcalloc(n + 2, sizeof(*env));
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], key, sizeof(key) - 1) != 0)
			env[k++] = environ[i];
	env[k++] = xasprintf("%s%s", key, root);
	env[k] = NULL;
	return env;
}

static void agent_env_free(char **env)
{
	size_t n = 0;

	/* Only the last entry is ours; the others are the caller's. */
	while (env[n] != NULL)
		n++;
	if (n > 0)
		free(env[n - 1]);
	free(env);
}

/* Append "flag value" to argv at argc when value is set (not 0), the
 * value written into text; the new argc. */
static size_t limit_arg(const char **argv, size_t argc, const char *flag,
			uint64_t value, char *text, size_t size)
{
	if (value == 0)
		return argc;
	snprintf(text, size, "%llu", (unsigned long long)value);
	argv[argc++] = flag;
	argv[argc++] = text;
	return argc;
}

size_t local_confine_args(struct local_confine *cf, const char **argv,
			  size_t argc)
{
	if (geteuid() == 0) {
		snprintf(cf->text[0], sizeof(cf->text[0]), "%ld:%ld", cf->uid,
			 cf->gid);
		argv[argc++] = "--exec-user";
		argv[argc++] = cf->text[0];
	}
	/* Fail closed: commands that cannot be confined do not run (the
	 * agent says why). */
	argv[argc++] = "--confine";
	argv[argc++] = "bwrap";
	argc = limit_arg(argv, argc, "--pids", cf->pids, cf->text[1],
			 sizeof(cf->text[1]));
	argc = limit_arg(argv, argc, "--memory", cf->memory, cf->text[2],
			 sizeof(cf->text[2]));
	argc = limit_arg(argv, argc, "--tmp-size", cf->tmp_size, cf->text[3],
			 sizeof(cf->text[3]));
	if (cf->network != NULL) {
		argv[argc++] = "--network";
		argv[argc++] = cf->network;
	}
	return argc;
}

/* The agent's command line for rec's boot, relative to the sandbox's
 * directory, where the agent starts. */
static void boot_argv(struct local_ctl *c, const struct proto_record *rec,
		      struct local_confine *cf, const char **argv)
{
	/* Its files, by option (doc/security.md). */
	static const char *const files[] = {
		"--socket",   "boot/agent.sock", "--token-file", "boot/token",
		"--pid-file", "boot/pid",	 "--lock-file",	 "agent.lock",
	};
	size_t argc = 0, i;

	argv[argc++] = c->agent;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		argv[argc++] = files[i];
	if (rec->strict_v1)
		argv[argc++] = "--strict-v1";
	cf->uid =
		rec->exec_uid >= 0 ? rec->exec_uid : (long)LOCAL_CTL_DEFAULT_ID;
	cf->gid =
		rec->exec_gid >= 0 ? rec->exec_gid : (long)LOCAL_CTL_DEFAULT_ID;
	cf->pids = rec->pids;
	cf->memory = rec->memory;
	cf->tmp_size = rec->tmp_size;
	cf->network = rec->network;
	argc = local_confine_args(cf, argv, argc);
	argv[argc] = NULL;
}

/* One boot attempt: spawn, record the pid, wait. On failure the agent is
 * gone again. */
static int boot_once(struct local_ctl *c, struct proto_record *rec,
		     const struct boot_paths *p, const char *url,
		     struct local_err *err)
{
	struct local_proc agent = LOCAL_PROC_NONE;
	char **env = agent_env(p->root);
	struct local_confine cf;
	const char *argv[LOCAL_ARGV_MAX];
	char *now, *banner;
	int rc;

	boot_argv(c, rec, &cf, argv);
	local_boot_clear(c, rec->id);
	rotate_log(p->log);
	now = local_utc_now();
	banner = xasprintf("=== %s: boot %llu of sandbox '%s'\n", now,
			   (unsigned long long)rec->boot_count + 1, rec->id);
	rc = local_spawn_detached(argv, env, p->dir, p->log, banner, &agent.pid,
				  err);
	free(now);
	free(banner);
	agent_env_free(env);
	if (rc < 0)
		return rc;
	/* Our own child's child, just started: its pid is not recycled yet.
	 * The pidfd keeps it so while we wait and, on failure, stop it. */
	agent.pidfd = local_pidfd_open(agent.pid);
	/* Recorded at once, so an interrupted start can be cleaned up. */
	rec->agent_pid = agent.pid;
	rc = local_state_write(c->state_dir, rec, err);
	if (rc == 0)
		rc = wait_ready(c, p, &agent, url, err);
	if (rc == 0 && !token_present(p->token))
		rc = local_err_set(err, -EIO,
				   "the agent wrote no credential; see %s",
				   p->log);
	if (rc < 0 && local_proc_alive(&agent))
		local_proc_kill(&agent, c->stop_timeout_ms);
	local_proc_close(&agent);
	return rc;
}

int local_boot(struct local_ctl *c, struct proto_record *rec, char **url_out,
	       struct local_err *err)
{
	struct boot_paths p;
	char *url;
	int rc;

	paths_init(c, rec->id, &p);
	url = unixurl_format(p.sock);
	rc = boot_once(c, rec, &p, url, err);
	if (rc == 0) {
		*url_out = url;
		url = NULL;
	}
	free(url);
	paths_cleanup(&p);
	return rc;
}

/* Empty boot/ (token, pid, socket, and any temporary file of them). */
void local_boot_clear(struct local_ctl *c, const char *id)
{
	char *boot = local_state_path(c->state_dir, id, LOCAL_PATH_BOOT);
	struct dirent *de;
	DIR *d = opendir(boot);

	if (d != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 &&
			    strcmp(de->d_name, "..") != 0)
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	free(boot);
}
