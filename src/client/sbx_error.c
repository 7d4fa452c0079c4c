/* SPDX-License-Identifier: MIT */
/*
 * sbx_error: binding error codes and the one mapping from an agent's
 * refusal to an errno (SEMANTICS.md, errors).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/proto.h"
#include "client/sbx_error.h"

const char *sbx_code_name(enum sbx_code code)
{
	switch (code) {
	case SBX_OK:
		return "OK";
	case SBX_COMMAND_FAILED:
		return "SANDBOX_COMMAND_FAILED";
	case SBX_OUTCOME_UNKNOWN:
		return "SANDBOX_OUTCOME_UNKNOWN";
	case SBX_UNREACHABLE:
		return "SANDBOX_UNREACHABLE";
	case SBX_NOT_SUPPORTED:
		return "OPERATION_NOT_SUPPORTED";
	case SBX_UNEXPECTED_FORMAT:
		return "UNEXPECTED_RESPONSE_FORMAT";
	case SBX_INVALID_INPUT:
		return "INVALID_INPUT";
	}
	return "UNKNOWN";
}

void sbx_error_clear(struct sbx_error *e)
{
	memset(e, 0, sizeof(*e));
}

static int default_errno(enum sbx_code code, const char *failure)
{
	switch (code) {
	case SBX_OK:
		return 0;
	case SBX_COMMAND_FAILED:
		if (failure != NULL) {
			if (strcmp(failure, SBX_FAIL_GONE) == 0)
				return ENOENT;
			if (strcmp(failure, SBX_FAIL_TRANSPORT_INVALID) == 0)
				return EPROTO;
			if (strcmp(failure, SBX_FAIL_INVALID_REQUEST) == 0)
				return EINVAL;
			if (strcmp(failure, SBX_FAIL_AGENT_REFUSED) == 0)
				return EACCES;
		}
		return EIO;
	case SBX_NOT_SUPPORTED:
		return EOPNOTSUPP;
	case SBX_INVALID_INPUT:
		return EINVAL;
	case SBX_OUTCOME_UNKNOWN:
	case SBX_UNREACHABLE:
	case SBX_UNEXPECTED_FORMAT:
		return EIO;
	}
	return EIO;
}

static void error_vset(struct sbx_error *e, enum sbx_code code,
		       const char *failure, int errnum, const char *fmt,
		       va_list ap)
{
	e->code = code;
	e->retryable = code == SBX_UNREACHABLE;
	snprintf(e->failure, sizeof(e->failure), "%s", failure ? failure : "");
	vsnprintf(e->reason, sizeof(e->reason), fmt, ap);
	e->err = errnum > 0 ? errnum : default_errno(code, failure);
}

void sbx_error_set(struct sbx_error *e, enum sbx_code code, const char *failure,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vset(e, code, failure, 0, fmt, ap);
	va_end(ap);
}

int sbx_error_fail(struct sbx_error *e, enum sbx_code code, const char *failure,
		   int errnum, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vset(e, code, failure, errnum, fmt, ap);
	va_end(ap);
	return -e->err;
}

static bool has_prefix(const char *body, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && memcmp(body, prefix, n) == 0;
}

static bool contains(const char *body, size_t len, const char *needle)
{
	return memmem(body, len, needle, strlen(needle)) != NULL;
}

int sbx_errno_for_refusal(long status, const char *body, size_t len)
{
	int fs;

	if (body == NULL)
		len = 0;
	if (has_prefix(body, len, PROTO_ERR_PATH_NOT_FOUND ":") ||
	    has_prefix(body, len, PROTO_ERR_JOB_NOT_FOUND ":"))
		return ENOENT;
	fs = proto_error_fs_errno(body, len);
	if (fs != 0)
		return fs;
	if (has_prefix(body, len, PROTO_ERR_PATH_REFUSED ":"))
		return contains(body, len, "leaves the session root") ? ELOOP
								      : EACCES;
	if (has_prefix(body, len, PROTO_ERR_REQUEST_INVALID ":")) {
		if (contains(body, len, "not a regular file"))
			return EISDIR;
		if (contains(body, len, "transfer limit"))
			return EFBIG;
		return EINVAL;
	}
	switch (status) {
	case 401:
	case 403:
		return EACCES;
	case 404:
		return ENOENT;
	case 413:
		return EFBIG;
	default:
		return EIO;
	}
}

int sbx_error_errno(const struct sbx_error *e)
{
	if (e == NULL || e->code == SBX_OK)
		return -EIO;
	return e->err > 0 ? -e->err : -EIO;
}

const char *sbx_error_describe(const struct sbx_error *e, char *buf,
			       size_t size)
{
	if (e->failure[0] != '\0')
		snprintf(buf, size, "%s (%s): %s", sbx_code_name(e->code),
			 e->failure, e->reason);
	else
		snprintf(buf, size, "%s: %s", sbx_code_name(e->code),
			 e->reason);
	return buf;
}
