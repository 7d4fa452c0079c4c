/* SPDX-License-Identifier: MIT */
/*
 * agent: the state of one sandbox-agent process, shared by its modules.
 *
 *   http*.c    libmicrohttpd server (http_i.h lists its files): limits,
 *              auth, activation gate, replies, streamed and deferred
 *              replies, the reply cache
 *   routes.c   the route table: every route, its handler and its demands
 *   health.c   GET /v1/health, POST /v1/activate
 *   files.c    v1 file routes (GET/PUT /v1/files, POST /v1/mkdir)
 *   fsops.c    confined filesystem primitives (openat2 beneath the root)
 *   ext*.c     the file extension routes (/sandboxfs/v1/..., ext_i.h)
 *   exec.c     POST /v1/exec (NDJSON stream)
 *   jobs*.c    the job registry and its timer (jobs.c), a job's thread,
 *              output and poll answers (jobs_run.c), /v1/jobs/start|poll|
 *              cancel and the extension's listing (jobs_routes.c); jobs_i.h
 *   watch*.c   change events of the root (GET /sandboxfs/v1/events): the
 *              ring and held requests (watch.c), the inotify thread
 *              (watch_thread.c), its tree of watched directories
 *              (watch_tree.c); watch_i.h
 *   outlog.c   a job's kept output (memory, then a spool file)
 *   spawn*.c   running a command (spawn_i.h): how commands run (spawn.c),
 *              starting one (spawn_cmd.c: process group, cleared
 *              environment, privilege drop, bubblewrap), its output
 *              (spawn_run.c)
 *   zygote*.c  the zygote that starts confined commands: the agent's side
 *              (zygote.c), the process (zygote_main.c), the wire between
 *              them (zygote_wire.c, zygote_i.h)
 *   confine.c  entering the box: cgroup, limits, staged root, network
 *   proc.c     what the process starters share (pidfds, reaping, the
 *              steps between fork and exec)
 *   options.c  the command line and the original agent's environment
 *   main.c     credential file, start-up, the --run mode, shutdown
 *   resolve.c  the file credentials of the thread serving a request
 *
 * Configuration is fixed after agent_start(); the mutable parts (the
 * activation flag, the job registry) carry their own synchronisation.
 */
#ifndef SBFS_AGENT_H
#define SBFS_AGENT_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/token.h"

struct agent_jobs;
struct agent_http;
struct agent_events;

enum agent_confine {
	AGENT_CONFINE_AUTO = 0, /* bubblewrap when usable, else none (logged) */
	AGENT_CONFINE_BWRAP, /* bubblewrap or refuse to start */
	AGENT_CONFINE_NONE, /* run commands unconfined (tests, images) */
};

/* A confined sandbox's network (doc/commands.md, "Network"). */
enum agent_network {
	AGENT_NET_USER = 0, /* own namespace, user-mode networking */
	AGENT_NET_NONE, /* own namespace, loopback only */
};

struct agent_config {
	const char *root; /* session root (made absolute) */
	const char *listen_host; /* default "127.0.0.1" */
	unsigned port; /* 0 = let the kernel choose */
	const char *socket_path; /* listen here (Unix) instead of TCP */
	unsigned max_connections; /* 0: AGENT_HTTP_MAX_CONNECTIONS */
	unsigned idle_timeout_s; /* 0: AGENT_HTTP_IDLE_TIMEOUT_S */
	unsigned request_timeout_s; /* 0: AGENT_HTTP_REQUEST_TIMEOUT_S */
	const char *token_file; /* where the per-boot credential goes */
	const char *port_file; /* optional: write the bound port here */
	uid_t exec_uid; /* commands (and file access when root) */
	gid_t exec_gid;
	bool drop_privileges; /* agent runs as root: use exec_uid/gid */
	enum agent_confine confine;
	const char *bwrap; /* bubblewrap binary */
	/* Limits of the sandbox's commands (doc/commands.md, "Limits"); 0
	 * takes the default. */
	uint64_t pids_max; /* tasks */
	uint64_t memory_max; /* bytes */
	uint64_t tmp_size; /* bytes of each /tmp and /dev/shm */
	enum agent_network network;
	const char *slirp4netns; /* the user-mode networking helper */
	size_t output_cap; /* per stream, default 4 MiB */
	/* Jobs (doc/commands.md, "Jobs"); 0 takes the default. */
	unsigned max_running_jobs; /* running jobs at once */
	uint64_t job_window; /* output kept per flow-controlled job */
	uint64_t job_retention_s; /* a finished job is kept this long */
	size_t job_retention_count; /* finished jobs kept */
	uint64_t job_retention_bytes; /* output kept by all jobs */
	const char *spool_dir; /* where job output spills; NULL: TMPDIR */
	bool strict_v1; /* do not serve or advertise the extension */
	unsigned threads; /* HTTP worker threads */
	size_t ext_max_write; /* largest extension write body */
	bool activated_at_start; /* test aid: start already activated */
	/* Change events (watch.h); 0 takes the default. */
	size_t events_ring; /* events kept */
	size_t watch_limit; /* directories watched at most; 0: the kernel's
			       limit only */
};

struct agent {
	struct agent_config cfg;
	int root_fd; /* O_PATH|O_DIRECTORY of the root */
	char token[TOKEN_CHARS + 1]; /* the per-boot credential */
	char boot_id[40]; /* a fresh UUID per start */
	atomic_bool activated;
	struct agent_jobs *jobs;
	struct agent_http *http;
	struct agent_events *events;
};

#endif
