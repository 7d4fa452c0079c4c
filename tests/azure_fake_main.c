/* SPDX-License-Identifier: MIT */
/*
 * azure-fake: the fake Azure of azure_fake.c as a program, in front of
 * real sandbox-agent processes on loopback, for tests/integration/
 * t-azure.sh (a full mount of provider=azure).
 *
 *   azure-fake --dir DIR --agent PATH --sandbox ID[:native|:stopped] ...
 *
 * Each agent sandbox gets DIR/sandboxes/ID/root (its session root, which
 * may be filled before the start), and, while it runs, an agent started
 * with a fresh credential and port whose URL on the fake proxy stays
 * https://ID--8971.eastus.adcproxy.io:PORT/. A ":stopped" sandbox starts
 * Stopped, with no agent: a resume through the data plane starts one (and
 * a stop stops it). A ":native" sandbox has no transport label; its root
 * is read and its commands run through the data plane's native routes.
 *
 * It writes DIR/azure.conf (the mount's azure_config), DIR/env (the
 * credential variables, as "export NAME=value" lines for the shell) and,
 * once everything is up, DIR/ready. DIR/ctl is a FIFO taking one command
 * per line, each acknowledged by a line "ok N" (N counting from 1) in
 * DIR/ctl.log:
 *
 *   reboot ID         a new boot: the agent restarted, new credential
 *                     and port, same URL
 *   label ID VALUE    set the transport label ("-" removes it)
 *   stop ID           the agent stops and the record says Stopped
 *
 * On SIGTERM or SIGINT it stops the agents and the fake, writes DIR/stats
 * ("unauthorized N", "bad_version N": data-plane calls refused for a
 * missing bearer or api-version) and exits 0.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/xalloc.h"
#include "tests/azure_fake.h"
#include "tests/sys_helpers.h"

#define MAX_SANDBOXES 16
#define NOBODY 65534

struct box {
	char *id;
	bool native;
	pid_t pid; /* the running agent, or 0 */
};

static struct {
	char *dir;
	const char *agent;
	struct azure_fake *fake;
	pthread_mutex_t mu; /* the boxes' agents */
	struct box boxes[MAX_SANDBOXES];
	size_t nboxes;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "azure-fake: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(99);
}

static char *box_path(const struct box *b, const char *name)
{
	return xasprintf("%s/sandboxes/%s/%s", g.dir, b->id, name);
}

static struct box *box_find(const char *id)
{
	size_t i;

	for (i = 0; i < g.nboxes; i++)
		if (strcmp(g.boxes[i].id, id) == 0)
			return &g.boxes[i];
	return NULL;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
		die("cannot write %s: %s", path, strerror(errno));
}

static char *read_text(const char *path)
{
	char buf[256];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return xstrdup(buf);
}

static int give_one(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (lchown(path, NOBODY, NOBODY) < 0)
		return -1;
	return 0;
}

/* Stop b's agent (SIGTERM, SIGKILL after 5 s). Under g.mu. */
static void agent_stop(struct box *b)
{
	if (b->pid <= 0)
		return;
	th_child_stop(b->pid);
	b->pid = 0;
}

/* Start a new boot of b's agent and point the proxy and the credential at
 * it. Under g.mu. */
static void agent_start(struct box *b)
{
	char *root = box_path(b, "root"), *portfile = box_path(b, "port");
	char *token = box_path(b, "token"), *log = box_path(b, "agent.log");
	char *pidfile = box_path(b, "pid"), *text, pidtext[32];
	long long deadline;
	unsigned port;

	unlink(portfile);
	/* As root, the agent does file access as nobody. */
	if (geteuid() == 0)
		nftw(root, give_one, 32, FTW_PHYS);
	b->pid = fork();
	if (b->pid < 0)
		die("fork: %s", strerror(errno));
	if (b->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execl(g.agent, g.agent, "--root", root, "--listen", "127.0.0.1",
		      "--port", "0", "--port-file", portfile, "--token-file",
		      token, "--confine", "none", (char *)NULL);
		_exit(127);
	}
	deadline = time(NULL) + 30;
	while ((text = read_text(portfile)) == NULL) {
		int status;

		if (waitpid(b->pid, &status, WNOHANG) == b->pid)
			die("the agent of %s exited at start", b->id);
		if (time(NULL) > deadline)
			die("the agent of %s did not start", b->id);
		usleep(10000);
	}
	port = (unsigned)strtoul(text, NULL, 10);
	free(text);
	azure_fake_set_agent(g.fake, b->id, port, true, NULL, 0);
	azure_fake_map_file(g.fake, b->id, AZURE_FAKE_TOKEN_PATH, token);
	snprintf(pidtext, sizeof(pidtext), "%ld\n", (long)b->pid);
	write_text(pidfile, pidtext);
	free(root);
	free(portfile);
	free(token);
	free(log);
	free(pidfile);
}

/* Inside the data plane's resume and stop: the sandbox's agent follows
 * (before the fake answers, so Running means the agent listens). */
static void lifecycle_hook(struct azure_fake *f, enum azure_fake_route r,
			   const char *id, void *arg)
{
	struct box *b;

	(void)f;
	(void)arg;
	pthread_mutex_lock(&g.mu);
	b = box_find(id);
	if (b != NULL && !b->native) {
		if (r == AZF_RESUME && b->pid == 0)
			agent_start(b);
		else if (r == AZF_STOP)
			agent_stop(b);
	}
	pthread_mutex_unlock(&g.mu);
}

static void command(const char *line, unsigned n)
{
	char verb[32], id[128], value[128], *ack;
	struct box *b;
	int fields;
	FILE *log;

	value[0] = '\0';
	fields = sscanf(line, "%31s %127s %127s", verb, id, value);
	if (fields < 2)
		die("bad command: %s", line);
	pthread_mutex_lock(&g.mu);
	b = box_find(id);
	if (b == NULL)
		die("no sandbox %s", id);
	if (strcmp(verb, "reboot") == 0) {
		agent_stop(b);
		agent_start(b);
	} else if (strcmp(verb, "stop") == 0) {
		agent_stop(b);
		azure_fake_set_state(g.fake, id, "Stopped");
	} else if (strcmp(verb, "label") == 0 && fields == 3) {
		azure_fake_set_label(g.fake, id, PROTO_TRANSPORT_LABEL,
				     strcmp(value, "-") == 0 ? NULL : value);
	} else {
		die("bad command: %s", line);
	}
	pthread_mutex_unlock(&g.mu);
	ack = xasprintf("%s/ctl.log", g.dir);
	log = fopen(ack, "a");
	if (log == NULL || fprintf(log, "ok %u\n", n) < 0 || fclose(log) != 0)
		die("cannot write %s", ack);
	free(ack);
}

static void write_settings(void)
{
	char *path = xasprintf("%s/azure.conf", g.dir), *text;

	text = xasprintf("# made by azure-fake\n"
			 "azure_subscription=%s\n"
			 "azure_resource_group=%s\n"
			 "azure_group=%s\n"
			 "azure_region=%s\n"
			 "azure_endpoint=%s\n"
			 "azure_ca_file=%s\n"
			 "azure_resolve=%s\n",
			 AZURE_FAKE_SUBSCRIPTION, AZURE_FAKE_RESOURCE_GROUP,
			 AZURE_FAKE_GROUP, AZURE_FAKE_REGION,
			 azure_fake_endpoint(g.fake),
			 azure_fake_ca_file(g.fake),
			 azure_fake_resolve(g.fake));
	write_text(path, text);
	free(path);
	free(text);
	path = xasprintf("%s/env", g.dir);
	text = xasprintf("export AZURE_TENANT_ID=%s\n"
			 "export AZURE_CLIENT_ID=%s\n"
			 "export AZURE_CLIENT_SECRET='%s'\n"
			 "export AZURE_AUTHORITY_HOST=%s\n",
			 AZURE_FAKE_TENANT, AZURE_FAKE_CLIENT_ID,
			 AZURE_FAKE_SECRET, azure_fake_authority(g.fake));
	write_text(path, text);
	chmod(path, 0600);
	free(path);
	free(text);
}

static void mkdirs(const char *path)
{
	char *tmp = xstrdup(path), *p;

	for (p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(tmp, 0755);
		*p = '/';
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		die("mkdir %s: %s", tmp, strerror(errno));
	free(tmp);
}

/* ID, ID:native or ID:stopped. */
static void add_box(const char *spec)
{
	const char *colon = strchr(spec, ':');
	struct box *b;
	char *root;

	if (g.nboxes == MAX_SANDBOXES)
		die("too many sandboxes");
	b = &g.boxes[g.nboxes++];
	b->id = colon ? xstrndup(spec, (size_t)(colon - spec)) : xstrdup(spec);
	root = box_path(b, "root");
	mkdirs(root);
	azure_fake_add(g.fake, b->id);
	if (colon != NULL && strcmp(colon, ":native") == 0) {
		b->native = true;
		azure_fake_set_label(g.fake, b->id, PROTO_TRANSPORT_LABEL,
				     NULL);
		azure_fake_set_root(g.fake, b->id, root);
	} else if (colon != NULL && strcmp(colon, ":stopped") == 0) {
		azure_fake_set_state(g.fake, b->id, "Stopped");
		/* The URL is known before the first boot. */
		azure_fake_set_agent(g.fake, b->id, 0, true, NULL, 0);
	} else if (colon != NULL) {
		die("bad sandbox %s", spec);
	} else {
		pthread_mutex_lock(&g.mu);
		agent_start(b);
		pthread_mutex_unlock(&g.mu);
	}
	free(root);
}

static void write_stats(void)
{
	char *path = xasprintf("%s/stats", g.dir);
	char text[128];

	snprintf(text, sizeof(text), "unauthorized %u\nbad_version %u\n",
		 azure_fake_unauthorized(g.fake),
		 azure_fake_bad_version(g.fake));
	write_text(path, text);
	free(path);
}

static void serve(void)
{
	char *fifo = xasprintf("%s/ctl", g.dir);
	char line[512];
	size_t len = 0;
	unsigned n = 0;
	int fd;

	if (mkfifo(fifo, 0600) < 0 && errno != EEXIST)
		die("mkfifo %s: %s", fifo, strerror(errno));
	/* Read and write, so that the FIFO never reports an end when a
	 * writer closes. */
	fd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die("open %s: %s", fifo, strerror(errno));
	while (!stopping) {
		struct pollfd pfd = {fd, POLLIN, 0};
		char c;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		while (read(fd, &c, 1) == 1) {
			if (c != '\n') {
				if (len + 1 < sizeof(line))
					line[len++] = c;
				continue;
			}
			line[len] = '\0';
			len = 0;
			if (line[0] != '\0')
				command(line, ++n);
		}
	}
	close(fd);
	free(fifo);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"dir", required_argument, NULL, 'd'},
		{"agent", required_argument, NULL, 'a'},
		{"sandbox", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	const char *specs[MAX_SANDBOXES];
	struct sigaction sa;
	char errbuf[256] = "", *ready;
	size_t nspecs = 0, i;
	int c;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'd':
			g.dir = xstrdup(optarg);
			break;
		case 'a':
			g.agent = optarg;
			break;
		case 's':
			if (nspecs == MAX_SANDBOXES)
				die("too many sandboxes");
			specs[nspecs++] = optarg;
			break;
		default:
			die("usage: azure-fake --dir DIR --agent PATH "
			    "--sandbox ID[:native|:stopped]...");
		}
	}
	if (g.dir == NULL || g.agent == NULL)
		die("usage: azure-fake --dir DIR --agent PATH "
		    "--sandbox ID[:native|:stopped]...");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	mkdirs(g.dir);
	if (azure_fake_start(g.dir, &g.fake, errbuf, sizeof(errbuf)) < 0)
		die("the fake did not start: %s", errbuf);
	azure_fake_set_hook(g.fake, AZF_RESUME, lifecycle_hook, NULL);
	azure_fake_set_hook(g.fake, AZF_STOP, lifecycle_hook, NULL);
	for (i = 0; i < nspecs; i++)
		add_box(specs[i]);
	write_settings();
	ready = xasprintf("%s/ready", g.dir);
	write_text(ready, "ready\n");
	free(ready);

	serve();

	pthread_mutex_lock(&g.mu);
	for (i = 0; i < g.nboxes; i++)
		agent_stop(&g.boxes[i]);
	pthread_mutex_unlock(&g.mu);
	write_stats();
	azure_fake_stop(g.fake);
	for (i = 0; i < g.nboxes; i++)
		free(g.boxes[i].id);
	free(g.dir);
	return 0;
}
