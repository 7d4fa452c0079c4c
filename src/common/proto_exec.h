/* SPDX-License-Identifier: MIT */
/*
 * proto_exec: encoding of /v1/exec and /v1/jobs/... (doc/protocol-v1.md 3.6):
 * the command request (both field spellings), NDJSON output frames with an
 * incremental line splitter, and the job start/poll/cancel bodies, with
 * the members the sandboxfs extension adds to them and its job listing
 * (doc/protocol-ext.md, "Jobs").
 *
 * Error conventions as in proto.h. Thread-safe (no shared state).
 */
#ifndef SBFS_PROTO_EXEC_H
#define SBFS_PROTO_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Bounds on a decoded command request (the agent refuses more). */
#define PROTO_EXEC_MAX_ARGS 4096
#define PROTO_EXEC_MAX_ENV 1024
#define PROTO_EXEC_MAX_BODY (1024UL * 1024)

/*
 * A command request. argv and env are NULL-terminated arrays of heap
 * strings; env entries are "KEY=VALUE". cwd is NULL when absent or JSON
 * null. Decoding accepts timeoutMs or deadlineMs, and cwd or
 * workingDirectory (doc/protocol-v1.md 3.6), and ignores unknown fields.
 */
struct proto_exec_req {
	char **argv;
	size_t argc;
	uint64_t timeout_ms;
	char *cwd;
	char **env;
	size_t envc;
	unsigned flags; /* PROTO_EXEC_* below, set by decoding */
	/* "flowControl": true (the extension, job starts only): the agent
	 * keeps every byte of output and pauses the job instead of dropping
	 * any. Anything but JSON true decodes as false, as an agent that
	 * does not know the member would read it. */
	bool flow;
};

/*
 * What decoding noticed that a C string cannot carry. JSON can put a NUL
 * in a string ("\u0000"); such a string is cut at the NUL in the struct,
 * and the flag says so. An env key that is empty or holds '=' cannot be
 * told apart in "KEY=VALUE" form either. Duplicate env keys are merged,
 * the last one winning (as a JSON map decodes).
 */
#define PROTO_EXEC_ENV_NUL 0x1u /* an env key or value holds a NUL */
#define PROTO_EXEC_ENV_BADKEY 0x2u /* an env key is empty or holds '=' */
#define PROTO_EXEC_ARG_NUL 0x4u /* a command element holds a NUL */
#define PROTO_EXEC_CWD_NUL 0x8u /* the working directory holds a NUL */

/*
 * Decode a request. Shape errors (-EINVAL) are reported for what JSON
 * cannot express as the right type (command not an array of strings,
 * env values not strings, a timeout that is not a non-negative integer).
 * The protocol's semantic checks are separate: proto_exec_req_validate.
 */
int proto_exec_req_decode(const char *p, size_t n, struct proto_exec_req *out)
	__attribute__((warn_unused_result));
/* The protocol's requestInvalid checks: non-empty command, non-zero
 * timeout, no NUL in env, env keys non-empty without '='. Returns NULL when
 * valid, else a static reason text ("command is empty", ...), worded as
 * alien's agent words it. */
const char *proto_exec_req_validate(const struct proto_exec_req *r);
/* Encode as the newest client does: command, timeoutMs, cwd (null when
 * unset), env ({} when empty), then flowControl when set. */
int proto_exec_req_encode(const struct proto_exec_req *r, struct buf *out)
	__attribute__((warn_unused_result));
void proto_exec_req_cleanup(struct proto_exec_req *r);

enum proto_frame_type {
	PROTO_FRAME_STDOUT,
	PROTO_FRAME_STDERR,
	PROTO_FRAME_EXIT,
	PROTO_FRAME_ERROR,
};

/*
 * One output frame. For stdout/stderr: seq, data[len] (decoded bytes, heap),
 * and, in the poll answers of a job started with flowControl, off: where
 * data starts in its stream (the extension). For exit: code, truncated
 * (false when absent). For error: err_code and err_message (heap strings).
 */
struct proto_frame {
	enum proto_frame_type type;
	uint64_t seq;
	unsigned char *data;
	size_t len;
	bool has_off;
	uint64_t off;
	int32_t code;
	bool truncated;
	char *err_code;
	char *err_message;
};

/* Append one NDJSON line (with its '\n') for f. Fields are written in
 * alien's order: t first, then seq/data (and off when set), code/truncated
 * or code/message. */
int proto_frame_encode(const struct proto_frame *f, struct buf *out)
	__attribute__((warn_unused_result));
/* Bytes proto_frame_encode appends for a stdout/stderr frame of len data
 * bytes and this seq, without off and the '\n' (the size inside a v1 poll
 * answer). */
size_t proto_frame_output_len(uint64_t seq, size_t len);
/* Decode one line (without its '\n'). An unknown "t", a missing field or
 * bad base64 is -EBADMSG: the client must not invent frame types. */
int proto_frame_decode(const char *line, size_t n, struct proto_frame *out)
	__attribute__((warn_unused_result));
void proto_frame_cleanup(struct proto_frame *f);

/*
 * Incremental NDJSON splitter: feed bytes as they arrive (frames may be
 * split across reads), take complete lines. Empty lines are skipped.
 * A line longer than PROTO_MAX_LINE_BYTES is -EFBIG.
 */
struct proto_ndjson {
	struct buf pending;
	size_t off; /* first byte not yet handed out by _next */
	size_t scanned; /* bytes already checked for line length */
	size_t line_start; /* start of the line being checked */
	int err; /* sticky -EFBIG / -ENOMEM */
};

/* A trailing '\r' is removed from each line; a line that is then empty is
 * skipped. After an error every feed returns it again. */
void proto_ndjson_init(struct proto_ndjson *s);
void proto_ndjson_cleanup(struct proto_ndjson *s);
int proto_ndjson_feed(struct proto_ndjson *s, const void *p, size_t n)
	__attribute__((warn_unused_result));
/* Returns 1 and sets *line and *len (valid until the next feed) when a
 * complete line is ready, 0 when more input is needed. */
int proto_ndjson_next(struct proto_ndjson *s, const char **line, size_t *len);
/* True when bytes of an unfinished line are buffered (a body that ends
 * here ended mid-frame). */
bool proto_ndjson_partial(const struct proto_ndjson *s);

/* Job ids are UUIDs; anything longer than this is refused. */
#define PROTO_JOB_ID_MAX 64

/* {"jobId":"..."}: the start answer, and the cancel request. */
int proto_job_id_encode(const char *job_id, struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_id_decode(const char *p, size_t n,
			char job_id[PROTO_JOB_ID_MAX + 1])
	__attribute__((warn_unused_result));

/*
 * Poll request {"jobId","sinceSeq":N|null}. wait_ms ("waitMs") is the
 * extension's long-poll: an agent that advertises the extension holds the
 * answer up to that long (capped by the agent) until a new frame or the
 * end; max_bytes ("maxBytes") bounds the answer. A strict v1 agent ignores
 * both.
 */
struct proto_job_poll_req {
	char job_id[PROTO_JOB_ID_MAX + 1];
	bool has_since;
	uint64_t since_seq; /* exclusive */
	uint64_t wait_ms; /* 0 = answer at once */
	uint64_t max_bytes; /* 0 = the agent's own bound */
};

int proto_job_poll_req_encode(const struct proto_job_poll_req *r,
			      struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_poll_req_decode(const char *p, size_t n,
			      struct proto_job_poll_req *out)
	__attribute__((warn_unused_result));

/*
 * Poll answer: {"running":bool,"frames":[...],"exitCode"?,"truncated"?,
 * "error"?:{"code","message"},"stdoutBytes"?,"stderrBytes"?}. Optional
 * fields are omitted when unset. frames are stdout/stderr frames only.
 * The byte counts (the extension, jobs started with flowControl, in the
 * answer that reports the ending) are each stream's whole length.
 */
struct proto_job_poll {
	bool running;
	struct proto_frame *frames;
	size_t nframes;
	bool has_exit;
	int32_t exit_code;
	bool truncated;
	bool has_error;
	char *err_code;
	char *err_message;
	bool has_bytes;
	uint64_t stdout_bytes;
	uint64_t stderr_bytes;
};

int proto_job_poll_encode(const struct proto_job_poll *p, struct buf *out)
	__attribute__((warn_unused_result));
/*
 * The same answer written piece by piece, for an agent that encodes frames
 * straight from its own storage: _head, one _frame per output frame (first
 * true for the first one), then _tail, which reads every field of p except
 * frames/nframes. The result is byte-identical to proto_job_poll_encode.
 */
int proto_job_poll_encode_head(bool running, struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_poll_encode_frame(const struct proto_frame *f, bool first,
				struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_poll_encode_tail(const struct proto_job_poll *p, struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_poll_decode(const char *p, size_t n, struct proto_job_poll *out)
	__attribute__((warn_unused_result));
/*
 * Decode a poll answer without holding all of its frames: everything but
 * the frames is decoded and checked first (-EINVAL, nothing delivered),
 * then each frame is decoded and handed to fn in order (its data is freed
 * when fn returns). A frame that does not decode stops with -EINVAL after
 * the ones before it were delivered; fn returning < 0 stops with that.
 * *out (nframes 0) is written only when every frame was delivered. Peak
 * memory is one frame, not the answer's frames.
 */
typedef int proto_frame_fn(void *arg, const struct proto_frame *f);
int proto_job_poll_decode_each(const char *p, size_t n, proto_frame_fn *fn,
			       void *arg, struct proto_job_poll *out)
	__attribute__((warn_unused_result));
void proto_job_poll_cleanup(struct proto_job_poll *p);

/* ---- the extension's job listing (GET /sandboxfs/v1/jobs) ---------------- */

enum proto_job_state {
	PROTO_JOB_RUNNING = 0,
	PROTO_JOB_EXITED, /* exit_code */
	PROTO_JOB_FAILED, /* err_code, err_message */
	PROTO_JOB_CANCELLED,
};

/* A state's name on the wire ("running", "exited", "failed",
 * "cancelled"); NULL for a value outside the enum. */
const char *proto_job_state_name(enum proto_job_state s);

/*
 * One job of the listing: {"jobId","command":[...],"cwd":null|"..",
 * "env":[names],"timeoutMs","startedAtMs","state","flowControl",
 * "endedAtMs"?,"exitCode"?,"error"?:{"code","message"}}. Times are
 * milliseconds since the epoch. env entries are encoded up to their first
 * '=' (an agent passes its KEY=VALUE entries; a value never leaves it) and
 * decode as the names alone. Strings are heap copies when decoded.
 */
struct proto_job_info {
	char job_id[PROTO_JOB_ID_MAX + 1];
	char **argv;
	size_t argc;
	char *cwd; /* NULL: the session root */
	char **env;
	size_t envc;
	uint64_t timeout_ms;
	int64_t started_ms;
	enum proto_job_state state;
	int64_t ended_ms; /* when not running */
	int32_t exit_code; /* EXITED */
	char *err_code; /* FAILED */
	char *err_message;
	bool flow;
};

/* {"jobs":[...],"complete":bool}: complete is false when the agent left
 * jobs out to keep the answer under its bound. */
struct proto_job_list {
	struct proto_job_info *jobs;
	size_t n;
	bool complete;
};

/* Largest listing answer an agent sends (it stops adding jobs before). */
#define PROTO_JOB_LIST_MAX_BYTES (16UL * 1024 * 1024)

/* The listing written piece by piece: _head, one _entry per job (first
 * true for the first), _tail. */
int proto_job_list_encode_head(struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_list_encode_entry(const struct proto_job_info *ji, bool first,
				struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_list_encode_tail(bool complete, struct buf *out)
	__attribute__((warn_unused_result));
/* Decode a listing. A job id that is empty or too long, an unknown state,
 * a missing or mistyped member is -EINVAL. */
int proto_job_list_decode(const char *p, size_t n, struct proto_job_list *out)
	__attribute__((warn_unused_result));
void proto_job_list_cleanup(struct proto_job_list *l);

#endif
