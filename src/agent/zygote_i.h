/* SPDX-License-Identifier: MIT */
/*
 * zygote_i: the wire between the agent's side of the zygote (zygote.c)
 * and the zygote process (zygote_main.c), implemented in zygote_wire.c.
 *
 * Messages are fixed-size records on a SOCK_SEQPACKET pair, with up to
 * ZM_MAX_FDS descriptors each (SCM_RIGHTS). A spawn request's argv,
 * environment and working directory travel in a memfd: a zreq_head, then
 * argc, envc and one more NUL-terminated strings, nothing after.
 *
 * The functions keep no state. Thread-safe, as long as one socket has one
 * sender and one receiver at a time.
 */
#ifndef SBFS_AGENT_ZYGOTE_I_H
#define SBFS_AGENT_ZYGOTE_I_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stddef.h>
#include <stdint.h>

/* Bumped when a message changes; the agent only talks to its own. */
#define ZYGOTE_VERSION 2

enum zmsg_type {
	ZM_READY = 1, /* zygote: up; value = ZYGOTE_VERSION; fd its pidfd */
	ZM_SPAWN, /* agent: id; fds memfd, stdin, stdout, stderr */
	ZM_SPAWNED, /* zygote: id, err; fd the init's pidfd when err == 0 */
	ZM_EXITED, /* zygote: id, exited (1: value = code; 0: signal) */
	ZM_RELEASE, /* agent: id may be reaped (killed if it runs) */
};

struct zmsg {
	uint32_t type;
	int32_t err;
	uint64_t id;
	int32_t exited;
	int32_t value;
};

#define ZM_MAX_FDS 4

/* The head of the request in the memfd. */
#define ZREQ_MAGIC 0x7a726571u
struct zreq_head {
	uint32_t magic;
	uint32_t argc;
	uint32_t envc;
	uint32_t pad;
};

/* The largest request: a request body is at most 1 MiB of JSON, and the
 * agent adds PATH and PWD. */
#define ZREQ_MAX (4UL * 1024 * 1024)
#define ZREQ_MAX_ARGS 8192
#define ZREQ_MAX_ENV 4096

/* One message and nfd descriptors (at most ZM_MAX_FDS). 0, -ETIMEDOUT when
 * the send timed out (SO_SNDTIMEO), -EPROTO for a short send, or another
 * negative errno. */
int zwire_send(int sock, const struct zmsg *m, const int *fds, size_t nfd);
/*
 * One message and its descriptors (close-on-exec). 1, 0 at the peer's
 * end, -EAGAIN when none waits (flags MSG_DONTWAIT), -EPROTO for a
 * message of the wrong size or with more than maxfd descriptors (any it
 * carried are closed), or another negative errno.
 */
int zwire_recv(int sock, struct zmsg *m, int *fds, size_t maxfd, size_t *nfd,
	       int flags);

/* The agent's side: argv and envp (NULL-terminated) and cwd as a request
 * in a new memfd (*out, close-on-exec). 0, -E2BIG past the limits above,
 * or another negative errno. */
int zwire_request_fd(char *const *argv, char *const *envp, const char *cwd,
		     int *out);

/* The zygote's side: a request read back. The strings point into data;
 * sh_argv is "/bin/sh" and argv (for a file without #!, its [1] left for
 * the file); path is envp's PATH, else AGENT_DEFAULT_PATH. */
struct zreq {
	char *data;
	char **argv;
	char **envp;
	const char **sh_argv;
	const char *path;
	const char *cwd;
};

/* Read and check the request in memfd: 0, or an errno (positive) for the
 * reply. r is to be cleaned up either way. */
int zwire_request_read(int memfd, struct zreq *r);
void zwire_request_cleanup(struct zreq *r);

#endif
