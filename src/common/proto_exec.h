/* SPDX-License-Identifier: MIT */
/*
 * proto_exec: encoding of /v1/exec and /v1/jobs/... (protocol.md 3.3, 3.7):
 * the command request (both field spellings), NDJSON output frames with an
 * incremental line splitter, and the job start/poll/cancel bodies.
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
 * workingDirectory (protocol.md 3.3), and ignores unknown fields.
 */
struct proto_exec_req {
	char **argv;
	size_t argc;
	uint64_t timeout_ms;
	char *cwd;
	char **env;
	size_t envc;
	unsigned flags; /* PROTO_EXEC_* below, set by decoding */
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
 * unset), env ({} when empty). */
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
 * One output frame. For stdout/stderr: seq, data[len] (decoded bytes, heap).
 * For exit: code, truncated (false when absent). For error: err_code and
 * err_message (heap strings).
 */
struct proto_frame {
	enum proto_frame_type type;
	uint64_t seq;
	unsigned char *data;
	size_t len;
	int32_t code;
	bool truncated;
	char *err_code;
	char *err_message;
};

/* Append one NDJSON line (with its '\n') for f. Fields are written in
 * alien's order: t first, then seq/data, code/truncated or code/message. */
int proto_frame_encode(const struct proto_frame *f, struct buf *out)
	__attribute__((warn_unused_result));
/* Bytes proto_frame_encode appends for a stdout/stderr frame of len data
 * bytes and this seq, without the '\n' (the size inside a poll answer). */
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
 * Poll request {"jobId","sinceSeq":N|null}. wait_ms is the file
 * extension's long-poll: an agent that advertises the extension holds the
 * answer up to that long (capped by the agent) until a new frame or the
 * end; a strict v1 agent ignores the field and answers at once.
 */
struct proto_job_poll_req {
	char job_id[PROTO_JOB_ID_MAX + 1];
	bool has_since;
	uint64_t since_seq; /* exclusive */
	uint64_t wait_ms; /* 0 = answer at once */
};

int proto_job_poll_req_encode(const struct proto_job_poll_req *r,
			      struct buf *out)
	__attribute__((warn_unused_result));
int proto_job_poll_req_decode(const char *p, size_t n,
			      struct proto_job_poll_req *out)
	__attribute__((warn_unused_result));

/*
 * Poll answer: {"running":bool,"frames":[...],"exitCode"?,"truncated"?,
 * "error"?:{"code","message"}}. Optional fields are omitted when unset.
 * frames are stdout/stderr frames only.
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
void proto_job_poll_cleanup(struct proto_job_poll *p);

#endif
