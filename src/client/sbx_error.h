/* SPDX-License-Identifier: MIT */
/*
 * sbx_error: what a failed sandbox operation tells its caller
 * (doc/transport-rules.md 6): a binding error code, whether retrying may help, the
 * failure kind and a reason, and the errno a filesystem user sees
 * (SEMANTICS.md, errors). Produced by the transport core and the providers; the
 * FUSE layer only reads sbx_error_errno().
 *
 * The reason text never holds a credential: it is built from operation
 * names, HTTP statuses and bounded error bodies only.
 *
 * Plain data; not shared between threads.
 */
#ifndef SBFS_SBX_ERROR_H
#define SBFS_SBX_ERROR_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>

enum sbx_code {
	SBX_OK = 0,
	SBX_COMMAND_FAILED, /* SANDBOX_COMMAND_FAILED, not retryable */
	SBX_OUTCOME_UNKNOWN, /* SANDBOX_OUTCOME_UNKNOWN, not retryable */
	SBX_UNREACHABLE, /* SANDBOX_UNREACHABLE, retryable */
	SBX_NOT_SUPPORTED, /* OPERATION_NOT_SUPPORTED */
	SBX_UNEXPECTED_FORMAT, /* UNEXPECTED_RESPONSE_FORMAT */
	SBX_INVALID_INPUT, /* INVALID_INPUT */
};

/* failure kinds of SBX_COMMAND_FAILED (doc/transport-rules.md) */
#define SBX_FAIL_AGENT_REFUSED "agentRefused"
#define SBX_FAIL_TRANSPORT_INVALID "agentTransportInvalid"
#define SBX_FAIL_GONE "sandboxGone"
#define SBX_FAIL_INVALID_REQUEST "invalidRequest"
/* A safe request's 2xx answer ended before its length (the agent's file
 * shrank under it, or the connection died): asking again is safe. */
#define SBX_FAIL_BODY_CUT "answerCutOff"

struct sbx_error {
	enum sbx_code code;
	bool retryable;
	char failure[48]; /* a SBX_FAIL_* kind or an error frame's code */
	char reason[768]; /* human text, safe to log */
	long status; /* the HTTP status when an agent answered, else 0 */
	int err; /* positive errno for the user (SEMANTICS.md, errors) */
};

/* "SANDBOX_COMMAND_FAILED" ... */
const char *sbx_code_name(enum sbx_code code);

void sbx_error_clear(struct sbx_error *e);
/* Set code, failure (may be NULL) and a formatted reason; retryable
 * follows the code (only SBX_UNREACHABLE is retryable); err defaults to the
 * code's errno (see sbx_error_errno). */
void sbx_error_set(struct sbx_error *e, enum sbx_code code, const char *failure,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* sbx_error_set with the user's errno given (positive, 0: the code's), and
 * the negative errno returned: `return sbx_error_fail(err, ...);`. */
int sbx_error_fail(struct sbx_error *e, enum sbx_code code, const char *failure,
		   int errnum, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/*
 * The errno for an agent's refusal with this HTTP status and (bounded)
 * body, per SEMANTICS.md (errors): typed PATH_NOT_FOUND / JOB_NOT_FOUND -> ENOENT,
 * FS_ERROR: ENAME -> that errno, PATH_REFUSED -> EACCES (ELOOP when the
 * path leaves the session root through a symlink), REQUEST_INVALID for a
 * non-regular file -> EISDIR, over the transfer limit -> EFBIG, 401/403 ->
 * EACCES, 404 untyped -> ENOENT, 413 -> EFBIG, other 4xx -> EIO.
 */
int sbx_errno_for_refusal(long status, const char *body, size_t len);

/* The negative errno a filesystem caller returns for e (-EIO when unset). */
int sbx_error_errno(const struct sbx_error *e);

/* "<CODE> (<failure>): <reason>" into buf, for one log line. */
const char *sbx_error_describe(const struct sbx_error *e, char *buf,
			       size_t size);

#endif
