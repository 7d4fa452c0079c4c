/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs_i: the parts of exec and jobs/ that need neither FUSE nor an
 * agent (fs_jobs_store.c), shared by fs_jobs.c and the unit tests: the
 * output store of one stream, the text a user writes to exec (parsed into
 * a request) and reads back (the cmd, status and exit files), and a
 * sandbox's job table (ids, jobs/latest, eviction).
 *
 * fs_jobs.c adds the FUSE operations, the agent and provider calls and
 * the per-job poller threads on top; nothing here talks to anything.
 */
#ifndef SBFS_FS_JOBS_I_H
#define SBFS_FS_JOBS_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/buf.h"
#include "common/proto_exec.h"
#include "provider.h"

/* Jobs kept per sandbox; past this the oldest finished ones are dropped. */
#define FS_JOBS_MAX 256
/* Bytes of each stream kept in memory; the rest spills to a file. */
#define FS_STORE_MEM_MAX (256UL * 1024)
/* Bytes kept of each stream at all; later output is dropped. */
#define FS_STORE_MAX (1024ULL * 1024 * 1024)
/* Longest job name (a directory under jobs/). */
#define FS_JOB_NAME_MAX PROTO_JOB_ID_MAX
/* Longest error message kept for a failed job's status line. */
#define FS_JOB_MSG_MAX 512
/* Longest command text accepted from exec. */
#define FS_CMD_MAX PROTO_EXEC_MAX_BODY

/* ---- the output store ---------------------------------------------------- */

/*
 * One stream's bytes: the first mem_max bytes in memory, the rest in an
 * unlinked temporary file in dir (created on first need), at most max bytes
 * in all. Bytes are only ever appended, so what was read stays valid.
 *
 * Not thread-safe: the job's lock guards its two stores.
 */
struct fs_store {
	char *mem; /* the first bytes, up to mem_max */
	size_t mem_len;
	size_t mem_cap; /* allocated; never more than mem_max */
	size_t mem_max;
	int fd; /* the spill file, -1 until needed */
	uint64_t size; /* bytes stored (memory + file) */
	uint64_t max;
	const char *dir; /* borrowed; must outlive the store */
	bool dropped; /* bytes were refused (max, or the spill failed);
			       every later append is refused too, so what is
			       kept has no holes */
};

/* An empty store. dir is borrowed. mem_max 0 spills from the first byte. */
void fs_store_init(struct fs_store *s, const char *dir, size_t mem_max,
		   uint64_t max);
/* Close the spill file and free the memory; the store is empty again.
 * NULL-safe. */
void fs_store_cleanup(struct fs_store *s);
/*
 * Append n bytes. Returns 0, or -EFBIG (max reached) or a negative errno
 * from creating or writing the spill file: the bytes that fit (under max,
 * or in memory) were kept and the rest dropped. After any failure
 * s->dropped is set and later appends return -EFBIG.
 */
int fs_store_append(struct fs_store *s, const void *p, size_t n)
	__attribute__((warn_unused_result));
/* Copy up to n bytes at off into dst; *got receives the count (0 at or
 * past the end). Returns 0 or a negative errno from reading the file. */
int fs_store_read(const struct fs_store *s, void *dst, size_t n, uint64_t off,
		  size_t *got) __attribute__((warn_unused_result));

/* ---- commands ------------------------------------------------------------ */

/*
 * What was written to exec, as a request. line is the shell line (run as
 * /bin/sh -c line; req.argv is then {"/bin/sh", "-c", line}), or NULL for
 * a JSON request.
 */
struct fs_cmd {
	struct proto_exec_req req;
	char *line;
};

/*
 * Parse one command: surrounding whitespace (and the trailing newline) is
 * stripped; text starting with '{' is a JSON request (proto_exec_req
 * fields; a missing or null timeoutMs takes default_timeout_ms), anything
 * else a shell line. -EINVAL for an empty command, a NUL byte in a shell
 * line, a JSON request that does not decode or that the protocol would
 * refuse (empty command, zero timeout, NUL bytes, bad env names), -EFBIG
 * past FS_CMD_MAX, -ENOMEM. out is written only on success.
 */
int fs_cmd_parse(const char *text, size_t len, uint64_t default_timeout_ms,
		 struct fs_cmd *out) __attribute__((warn_unused_result));
void fs_cmd_cleanup(struct fs_cmd *c);

/*
 * The command as one shell line, for a provider's native exec: a shell
 * line as written; a JSON request as its env assignments and argv, each
 * single-quoted ("K='v' 'prog' 'arg'"). The working directory and the
 * timeout are not part of it. -EINVAL when an env name is not a shell
 * name.
 */
int fs_cmd_shell(const struct fs_cmd *c, struct buf *out)
	__attribute__((warn_unused_result));

/*
 * The cmd file: {"command":[...],"cwd":..,"env":[keys],"timeoutMs":..,
 * "startedAt":"RFC 3339 UTC"} and a newline. Only the env names are
 * written, never their values.
 */
int fs_cmd_json(const struct fs_cmd *c, const struct timespec *started,
		struct buf *out) __attribute__((warn_unused_result));

/* ---- jobs ---------------------------------------------------------------- */

enum fs_job_state {
	FS_JOB_ST_RUNNING = 0,
	FS_JOB_ST_EXITED, /* exit_code is set */
	FS_JOB_ST_FAILED, /* err_code and err_message are set */
	FS_JOB_ST_CANCELLED,
	FS_JOB_ST_UNKNOWN, /* the outcome cannot be known */
};

/*
 * One job started through this mount. Reference counted: the table, open
 * files and the poller each hold one. Fields marked "fixed" do not change
 * after fs_job_new; the others are guarded by lock, and every change is
 * broadcast on cond (a CLOCK_MONOTONIC condition variable) so that blocked
 * readers wake.
 */
struct fs_job {
	char name[FS_JOB_NAME_MAX + 1]; /* fixed once in a table */
	char agent_id[PROTO_JOB_ID_MAX + 1]; /* fixed; "" if local only */
	char *cmd; /* fixed: the cmd file */
	size_t cmd_len;
	uint64_t timeout_ms; /* fixed */
	bool ext; /* fixed: long-poll allowed */
	struct timespec started; /* fixed, CLOCK_REALTIME */
	long long started_ms; /* fixed, monotonic */
	unsigned refs; /* atomic */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum fs_job_state state;
	int32_t exit_code;
	bool truncated; /* the agent dropped output (its output cap) */
	char *err_code;
	char *err_message;
	struct fs_store out;
	struct fs_store err;
	bool has_seq; /* last_seq is the last frame received */
	uint64_t last_seq;
	struct timespec changed; /* the last new output or the end */
	bool stop; /* the poller must return (unmount) */
	bool kick; /* the poller should poll now (cancel) */
};

/*
 * A new running job with one reference. name may be "" (the table then
 * names it); agent_id may be "" for a job that exists only here. cmd is
 * copied. dir and mem_max configure its stores (dir is borrowed).
 */
struct fs_job *fs_job_new(const char *name, const char *agent_id,
			  const char *cmd, size_t cmd_len, uint64_t timeout_ms,
			  const char *dir, size_t mem_max);
void fs_job_ref(struct fs_job *j);
/* Drop a reference; the last one frees the job. NULL-safe. */
void fs_job_unref(struct fs_job *j);

/* The rest take the job with j->lock held. */

/* End the job (no-op when it already ended): state, exit code (EXITED),
 * code and message (FAILED). Broadcasts. */
void fs_job_end(struct fs_job *j, enum fs_job_state state, int32_t exit_code,
		const char *code, const char *message);
/*
 * Take one poll answer: append the output frames that are newer than the
 * last one taken (seq gaps are normal), then, when the job no longer
 * runs, its end: exitCode -> EXITED, error "cancelled" -> CANCELLED, any
 * other error -> FAILED, neither -> UNKNOWN. Returns true when anything
 * changed (and then broadcasts).
 */
bool fs_job_apply_poll(struct fs_job *j, const struct proto_job_poll *p);
/* The status file: "running", "exited N", "failed CODE: message",
 * "cancelled" or "unknown", one line with its '\n' (the message is cut to
 * one line of at most FS_JOB_MSG_MAX bytes). Returns the length (at most
 * size - 1; the text is NUL-terminated). */
size_t fs_job_status_line(const struct fs_job *j, char *buf, size_t size);
/* The exit file: "N\n" into buf and its length for an exited job;
 * -EAGAIN while it runs, -ECANCELED when cancelled, -EIO when it failed
 * or its outcome is unknown. */
int fs_job_exit_text(const struct fs_job *j, char *buf, size_t size);

/* True when s can name a job directory: 1..FS_JOB_NAME_MAX characters of
 * [A-Za-z0-9._-], not "." or "..", not "latest". */
bool fs_job_name_ok(const char *s);

/* ---- the job table ------------------------------------------------------- */

struct sbfs;

/*
 * A sandbox's jobs, oldest first. The table part (lock, v, n, latest,
 * next) is this module's; the rest belongs to fs_jobs.c (pollers).
 * Thread-safe through lock; a job's own fields through the job's lock
 * (never take the table lock while holding a job lock).
 */
struct fs_jobs {
	pthread_mutex_t lock;
	struct fs_job **v;
	size_t n, cap;
	size_t max;
	char latest[FS_JOB_NAME_MAX + 1]; /* "" when none */
	unsigned long next; /* for generated names */
	char *spool_dir; /* where stores spill */
	size_t mem_max;

	/* fs_jobs.c */
	struct sbfs *fs;
	char sbx_id[PROVIDER_ID_MAX + 1];
	unsigned pollers; /* running poller threads */
	pthread_cond_t idle; /* pollers reached 0
					     (CLOCK_MONOTONIC) */
	bool stopping;
};

/* A new empty table. spool_dir NULL means $TMPDIR, else /tmp. max and
 * mem_max: FS_JOBS_MAX and FS_STORE_MEM_MAX outside tests. */
struct fs_jobs *fs_jobs_new(const char *spool_dir, size_t max, size_t mem_max);
/* Free the table and drop its references. No poller may run. NULL-safe. */
void fs_jobs_destroy(struct fs_jobs *js);

/*
 * Add j (the table takes its own reference) as the newest job, which
 * jobs/latest then names. When j->name is "" or already used, it is named
 * "<prefix>-<n>" (n counts up per table). Then, while the table holds more
 * than max jobs, the oldest one that has ended (and is not latest) is
 * dropped. Returns 0.
 */
int fs_jobs_add(struct fs_jobs *js, struct fs_job *j, const char *prefix);
/* The job named name ("latest" for the newest), with a reference for the
 * caller, or NULL. */
struct fs_job *fs_jobs_find(struct fs_jobs *js, const char *name);
/* Copy the newest job's name into buf[size]; false when there is none. */
bool fs_jobs_latest(struct fs_jobs *js, char *buf, size_t size);
/* The names, oldest first (heap array of heap strings; free both). */
void fs_jobs_names(struct fs_jobs *js, char ***names, size_t *n);

#endif
