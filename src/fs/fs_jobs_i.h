/* SPDX-License-Identifier: MIT */
/*
 * fs_jobs_i: the parts of exec and jobs/ that need neither FUSE nor an
 * agent (fs_jobs_store.c), shared by fs_jobs.c and the unit tests: the
 * output store of one stream, the text a user writes to exec (parsed into
 * a request) and reads back (the cmd, status and exit files), how a poll
 * answer changes a job, and a sandbox's job table (ids, jobs/latest,
 * jobs found in the agent's listing, eviction).
 *
 * fs_jobs.c adds the FUSE operations, the agent and provider calls and
 * the per-job poller threads on top; nothing here talks to anything.
 */
#ifndef SBFS_FS_JOBS_I_H
#define SBFS_FS_JOBS_I_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/buf.h"
#include "common/proto_exec.h"
#include "client/provider.h"

/* Jobs kept per sandbox; past this the oldest finished ones are dropped. */
#define FS_JOBS_MAX 256
/* Bytes of each stream kept in memory; the rest spills to a file. */
#define FS_STORE_MEM_MAX (256UL * 1024)
/* Bytes kept of each stream at all: no bound of the mount's own (the
 * spill directory's space is the bound; SEMANTICS.md, "Jobs"). */
#define FS_STORE_MAX UINT64_MAX
/* Separate stretches of lost bytes a store remembers (more are merged). */
#define FS_STORE_GAPS 16
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
 * in all. Bytes are only ever appended, so what was read stays valid. A
 * stretch the mount never got (the agent had dropped it: a gap) counts in
 * size but reads fail with EIO; the rest of the stream stays readable.
 *
 * Not thread-safe: the job's lock guards its two stores.
 */
struct fs_gap {
	uint64_t off;
	uint64_t len;
};

struct fs_store {
	char *mem; /* the first bytes, up to mem_max */
	size_t mem_len;
	size_t mem_cap; /* allocated; never more than mem_max */
	size_t mem_max;
	int fd; /* the spill file, -1 until needed */
	uint64_t size; /* bytes stored (memory + file), gaps included */
	uint64_t max;
	const char *dir; /* borrowed; must outlive the store */
	struct fs_gap gaps[FS_STORE_GAPS]; /* in order */
	size_t ngaps;
};

/* An empty store. dir is borrowed. mem_max 0 spills from the first byte. */
void fs_store_init(struct fs_store *s, const char *dir, size_t mem_max,
		   uint64_t max);
/* Close the spill file and free the memory; the store is empty again.
 * NULL-safe. */
void fs_store_cleanup(struct fs_store *s);
/*
 * Append n bytes, all or none. Returns 0, or -EFBIG (past max) or a
 * negative errno from creating or writing the spill file: then nothing of
 * the n bytes is kept, and the store is as it was (an append may be tried
 * again later, when there is room).
 */
int fs_store_append(struct fs_store *s, const void *p, size_t n)
	__attribute__((warn_unused_result));
/* Count n bytes that were lost (a gap): reads of them fail with EIO. At
 * most FS_STORE_GAPS stretches are told apart; past that the new gap is
 * merged into the last one (the bytes between read as lost too). -EFBIG
 * past max. */
int fs_store_skip(struct fs_store *s, uint64_t n)
	__attribute__((warn_unused_result));
/* Copy up to n bytes at off into dst; *got receives the count (0 at or
 * past the end; a read stops short of a gap). Returns 0, -EIO for a read
 * that starts in a gap, or a negative errno from reading the file. */
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
 * Parse one request: surrounding whitespace (and the trailing newline) is
 * stripped; text starting with '{' is a JSON request (proto_exec_req
 * fields; a missing or null timeoutMs takes default_timeout_ms), anything
 * else a shell script (inner newlines kept: several lines are one
 * script). -EINVAL for an empty request, a NUL byte in a shell script, a
 * JSON request that does not decode or that the protocol would refuse
 * (empty command, zero timeout, NUL bytes, bad env names), -EFBIG past
 * FS_CMD_MAX, -ENOMEM. out is written only on success. why (may be NULL)
 * receives the reason of a refusal, for the log.
 */
int fs_cmd_parse(const char *text, size_t len, uint64_t default_timeout_ms,
		 struct fs_cmd *out, char *why, size_t whysz)
	__attribute__((warn_unused_result));
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
 * One job of the sandbox: started through this mount, or found in the
 * agent's listing (adopted: started by an earlier mount or another
 * client). Reference counted: the table, open files and the poller each
 * hold one. Fields marked "fixed" do not change once the job is in a
 * table; the others are guarded by lock, and every change is broadcast on
 * cond (a CLOCK_MONOTONIC condition variable) so that blocked readers
 * wake.
 */
struct fs_job {
	char name[FS_JOB_NAME_MAX + 1]; /* fixed once in a table */
	char agent_id[PROTO_JOB_ID_MAX + 1]; /* fixed; "" if local only */
	char *cmd; /* fixed: the cmd file */
	size_t cmd_len;
	uint64_t timeout_ms; /* fixed */
	bool ext; /* fixed: long-poll and maxBytes allowed */
	bool flow; /* fixed: started with flowControl: the agent keeps all
		      of its output for the mount */
	bool adopted; /* fixed: found in the agent's listing */
	struct timespec started; /* fixed, CLOCK_REALTIME */
	long long started_ms; /* fixed, monotonic */
	unsigned refs; /* atomic */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum fs_job_state state;
	int32_t exit_code;
	bool truncated; /* output is missing: the agent dropped it (its
			   output cap) or it was gone before this mount
			   asked (a gap) */
	bool truncated_logged;
	char *err_code;
	char *err_message;
	struct fs_store out;
	struct fs_store err;
	bool has_seq; /* last_seq is the last frame received */
	uint64_t last_seq;
	int keep_err; /* a frame could not be kept (the spill failed): its
			 errno, until one is kept; 0 */
	bool stale; /* the agent has not answered for longer than the
		       mount's timeout: the status is unknown for now */
	bool followed; /* a poller follows it, or did */
	bool settled; /* its end was shown after the change events the
			 agent had then (fs_jobs.c, settle) */
	bool synced; /* what the agent said has been taken (an adopted job
			is not known to run until then) */
	long long last_ok_ms; /* monotonic: the agent's last answer */
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
 * Take one output frame of a poll answer, if it is newer than the last one
 * taken (seq gaps are normal: the agent's cap drops frames). A frame with
 * an offset (flow control) that starts past what its stream holds leaves
 * the bytes between as a gap (the agent no longer had them); one that
 * overlaps adds only its new bytes. Returns 1 when bytes were added, 0
 * when nothing changed, or the store's negative errno: then the frame was
 * not taken (last_seq stays, so the next poll asks for it again) and
 * keep_err says why. Broadcasts what it changes.
 */
int fs_job_take_frame(struct fs_job *j, const struct proto_frame *f);
/*
 * Take the rest of a poll answer whose frames were all taken. When the
 * job no longer runs: its end, exitCode -> EXITED, error "cancelled" ->
 * CANCELLED, any other error -> FAILED, neither -> UNKNOWN; truncated; and
 * for flow control the streams' lengths (bytes the mount lacks at the end
 * are a gap). Returns true when anything changed (and then broadcasts).
 */
bool fs_job_take_end(struct fs_job *j, const struct proto_job_poll *p);
/* Both for a whole answer: every frame, then, when all were taken, the
 * end. Returns true when anything changed. */
bool fs_job_apply_poll(struct fs_job *j, const struct proto_job_poll *p);
/* The status file: "running", "exited N", "failed CODE: message",
 * "cancelled" or "unknown" (also while stale), followed by " (output
 * truncated)" when output is missing, one line with its '\n' (the message
 * is cut to one line of at most FS_JOB_MSG_MAX bytes). Returns the length
 * (at most size - 1; the text is NUL-terminated). */
size_t fs_job_status_line(const struct fs_job *j, char *buf, size_t size);
/* The exit file: "N\n" into buf and its length for an exited job;
 * -EAGAIN while it runs, -ECANCELED when cancelled, -EIO when it failed,
 * its outcome is unknown, or it is stale. */
int fs_job_exit_text(const struct fs_job *j, char *buf, size_t size);

/* True when s can name a job directory: 1..FS_JOB_NAME_MAX characters of
 * [A-Za-z0-9._-], not "." or "..", not "latest". */
bool fs_job_name_ok(const char *s);

/* ---- the job table ------------------------------------------------------- */

struct sbfs;

/*
 * A sandbox's jobs, oldest first. The table part (lock, v, n, latest,
 * next) is this module's; the rest belongs to fs_jobs.c (pollers, the
 * agent's listing). Thread-safe through lock; a job's own fields through
 * the job's lock (never take the table lock while holding a job lock).
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
	/* The agent's job extension, for the connection generation it was
	 * learnt on, and its last listing (under lock). */
	bool ext_known;
	unsigned ext_gen;
	bool ext_jobs;
	struct proto_job_list listing;
	long long listing_ms; /* monotonic; 0: none */
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
/*
 * Add j, found in the agent's listing, unless a job of that name is
 * there: returns the table's job of that name with a reference for the
 * caller (j itself when it was added; then the table holds one more).
 * jobs/latest does not change. The bound on jobs applies as in
 * fs_jobs_add; an adopted job nobody follows yet counts as ended.
 */
struct fs_job *fs_jobs_adopt(struct fs_jobs *js, struct fs_job *j);
/* The job named name ("latest" for the newest), with a reference for the
 * caller, or NULL. */
struct fs_job *fs_jobs_find(struct fs_jobs *js, const char *name);
/* Copy the newest job's name into buf[size]; false when there is none. */
bool fs_jobs_latest(struct fs_jobs *js, char *buf, size_t size);
/* The names, oldest first (heap array of heap strings; free both). */
void fs_jobs_names(struct fs_jobs *js, char ***names, size_t *n);

#endif
