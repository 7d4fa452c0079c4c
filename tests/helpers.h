/* SPDX-License-Identifier: MIT */
/*
 * helpers: what the Check suites share: temporary directories, a real
 * sandbox-agent started on loopback, a small HTTP client (libcurl, allowed
 * in tests) and raw sockets for requests no client library would send.
 */
#ifndef SBFS_TEST_HELPERS_H
#define SBFS_TEST_HELPERS_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/buf.h"
#include "tests/sys_helpers.h"

/* A fresh directory under $TMPDIR (heap path); aborts the test on failure. */
char *th_tmpdir(const char *tag);
/* th_rmtree(path), then free the string (from th_tmpdir, say). */
void th_rmtree_free(char *path);
/* Write a file (creating parents), mode 0644; aborts on failure. */
void th_write_file(const char *path, const void *data, size_t n);
/* Read a whole file into a heap buffer (NUL-terminated); NULL if missing. */
char *th_read_file(const char *path, size_t *len);

/* A program of the build (sandbox-agent, sandboxctl, sandboxfs): the
 * SBFS_AGENT / SBFS_CTL / SBFS_MOUNT environment, else ./name. */
const char *th_program(const char *name);

/* A running sandbox-agent. */
struct th_agent {
	pid_t pid;
	unsigned port;
	char *dir; /* private directory: root/, token, port */
	char *root; /* the session root */
	char *token_file;
	char token[45];
	char base[64]; /* "http://127.0.0.1:PORT" */
	char auth[80]; /* "Authorization: Bearer <token>" */
};

/*
 * Start an agent on 127.0.0.1 with a kernel-chosen port, a fresh root and
 * credential, with `--confine none` unless extra_args says otherwise.
 * extra_args: NULL-terminated extra options (may be NULL). Waits until the
 * port file appears. activate: POST /v1/activate before returning.
 */
void th_agent_start(struct th_agent *a, const char *const *extra_args,
		    bool activate);
/* As th_agent_start, with the agent's stderr sent to log_path (appended;
 * NULL keeps the runner's stderr). */
void th_agent_start_logged(struct th_agent *a, const char *const *extra_args,
			   bool activate, const char *log_path);
/* For an agent started another way (a->pid, a->token_file set): wait
 * (10 s at most) for its port file and credential and fill in port,
 * token, base and auth. */
void th_agent_await(struct th_agent *a, const char *portfile);
/* SIGTERM, wait (SIGKILL after 5 s), remove the directory. */
void th_agent_stop(struct th_agent *a);
/* SIGTERM and wait (SIGKILL after 5 s); the exit status as waitpid gives
 * it. The directory stays until th_agent_stop. */
int th_agent_terminate(struct th_agent *a);

/* When the tests run as root, the agent does file access as nobody
 * (65534:65534): hand path and everything beneath it (no symlink
 * followed) to that user so the agent can use it. No-op otherwise. */
void th_give_to_exec_user(const char *path);

struct th_resp {
	long status;
	struct buf body;
	struct buf headers; /* raw header block */
};

/*
 * One HTTP request with libcurl. headers: NULL-terminated "Name: value"
 * lines (may be NULL). body may be NULL for none. Fails the test on a
 * transport error. Free with th_resp_cleanup.
 */
void th_http(const char *method, const char *url, const char *const *headers,
	     const void *body, size_t len, struct th_resp *out);
/* As th_http but returns the CURLcode-free outcome: 0, or -1 when no
 * response arrived within timeout_ms. */
int th_http_timeout(const char *method, const char *url,
		    const char *const *headers, const void *body, size_t len,
		    long timeout_ms, struct th_resp *out);
/* A response header's value (first match, case-insensitive), heap, or NULL. */
char *th_resp_header(const struct th_resp *r, const char *name);
void th_resp_cleanup(struct th_resp *r);

/* A loopback listener and the thread that accepts on it. */
struct th_listener {
	int fd;
	unsigned port;
	pthread_t thread;
};

/* Listen on loopback (backlog 16) and start fn(arg), which accepts on
 * l->fd until that fails; the test fails when either cannot be done. */
void th_listener_start(struct th_listener *l, void *(*fn)(void *), void *arg);
/* Shut the listener down, so that its accept fails, and join its thread. */
void th_listener_stop(struct th_listener *l);

/* Send raw bytes to 127.0.0.1:port and read what comes back until the
 * peer closes or timeout_ms passes. Returns bytes read, -1 on connect
 * failure. */
ssize_t th_raw(unsigned port, const void *req, size_t n, struct buf *out,
	       int timeout_ms);

/* Monotonic milliseconds. */
long long th_now_ms(void);

#endif
