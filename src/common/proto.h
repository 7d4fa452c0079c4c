/* SPDX-License-Identifier: MIT */
/*
 * proto: the agent protocol's shared constants, and the parts of its
 * encoding that every route uses (health, typed error bodies).
 *
 * The proto module is the only user of cJSON in the project. It is split by
 * concern: proto.c (this header: health, errors, shared JSON helpers in
 * proto_i.h), proto_jscan.c (a walk of JSON text that sees what cJSON
 * sees, proto_jscan_i.h), proto_exec.c (command requests, NDJSON frames)
 * and proto_jobs.c (job ids, polls, the listing) behind proto_exec.h,
 * proto_files.c (v1 file bodies), proto_ext.c (the file extension) and
 * proto_events.c (its change events) behind proto_files.h,
 * proto_record.c (provider records), proto_azure.c and proto_azure_exec.c
 * (the Azure data plane). cJSON trees never leave these files: callers
 * see plain C structs.
 *
 * Decoders take (pointer, length) input that need not be NUL-terminated
 * and is never trusted. Unless a function says otherwise, decoders return
 * 0, -EBADMSG when the input is not JSON (or not the expected JSON type at
 * the top), -EINVAL when the JSON does not have the expected shape (a
 * missing or mistyped field), -EFBIG when a bound is passed, and -ENOMEM.
 * Output structs are written only on success and are freed with their
 * _cleanup function.
 *
 * Thread-safe (no shared state).
 */
#ifndef SBFS_PROTO_H
#define SBFS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define PROTO_VERSION 1

/* doc/protocol-v1.md 6 */
#define PROTO_MAX_TRANSFER_BYTES 33554432UL /* 32 MiB per file */
#define PROTO_HTTP_BODY_LIMIT 44743336UL /* (32Mi/3)*4 + 4096 */
#define PROTO_DEFAULT_OUTPUT_CAP (4UL * 1024 * 1024) /* per stream */
#define PROTO_MAX_FRAME_BYTES 65536UL /* per output frame */
#define PROTO_FRAME_CHANNEL_DEPTH 16
#define PROTO_MAX_JOBS 16
#define PROTO_ERROR_BODY_MAX 4096
/* Longest NDJSON line a decoder accepts: a 64 KiB frame in base64 plus the
 * JSON around it, with room to spare. */
#define PROTO_MAX_LINE_BYTES (256UL * 1024)

/* The provider label that selects the transport (doc/transport-rules.md 1). */
#define PROTO_TRANSPORT_LABEL "alienAgentTransport"
#define PROTO_TRANSPORT_AGENT "native-file-v1"

/* Health states (doc/protocol-v1.md 3.1). */
#define PROTO_STATUS_READY "ready"
#define PROTO_STATUS_AWAITING "awaiting-network-verification"

/* The idempotency key of a request that must not run twice, the header
 * marking an answer given from the agent's reply cache, and the longest
 * key an agent accepts (doc/protocol-ext.md). */
#define PROTO_HDR_IDEMPOTENCY_KEY "Idempotency-Key"
#define PROTO_HDR_REPLAYED "Idempotent-Replayed"
#define PROTO_KEY_MAX 64
/* The reply cache's name in the health answer, and its version. */
#define PROTO_EXT_REPLY_CACHE "replyCache"
#define PROTO_EXT_REPLY_CACHE_VERSION 1

/* The file extension's name in the health answer, and its version. */
#define PROTO_EXT_FILES "files"
#define PROTO_EXT_FILES_VERSION \
	4 /* 2: GET tree; 3: create with a write;
				    4: GET contents */

/* The job extension's name in the health answer, and its version
 * (doc/protocol-ext.md, "Jobs"): flow control, the job listing, the
 * running-jobs limit. */
#define PROTO_EXT_JOBS "jobs"
#define PROTO_EXT_JOBS_VERSION 1

/* The change events' name in the health answer, and their version
 * (doc/protocol-ext.md, "Change events"). */
#define PROTO_EXT_EVENTS "events"
#define PROTO_EXT_EVENTS_VERSION 1
/* The header a client names itself with on the extension's file routes,
 * so that the events of its own changes carry "by", and the longest name
 * (1 to 64 of A-Z a-z 0-9 -). */
#define PROTO_HDR_CLIENT "X-Sandboxfs-Client"
#define PROTO_CLIENT_ID_MAX 64

/* GET /v1/health answer. Strings are bounded copies; a field the agent
 * did not send is "" (or 0 for the numbers). */
struct proto_health {
	long protocol_version; /* 0 when absent or not a number */
	char status[48]; /* "ready", "awaiting-network-verification" */
	char image_status[32]; /* imageCommand.status */
	char boot_id[80];
	long ext_files; /* extensions.files version; 0 = none */
	uint64_t ext_max_write; /* extensions.maxWrite (bytes); 0 = unset */
	/* extensions.uid and .gid: whom the file routes act as */
	bool ext_has_ids;
	uint32_t ext_uid;
	uint32_t ext_gid;
	/* extensions.ownerAccess: the file routes have root's access to the
	 * files (the owner is root), whatever their modes */
	bool ext_owner_access;
	long ext_reply_cache; /* extensions.replyCache version; 0 = none */
	long ext_jobs; /* extensions.jobs version; 0 = none */
	uint64_t ext_max_running; /* extensions.maxRunningJobs; 0 = unset */
	long ext_events; /* extensions.events version; 0 = none */
	/* extensions.eventsUnavailable: why an agent that has change events
	 * cannot give them ("" when it can, or says nothing); encoded with
	 * "events":0 when ext_events is 0 */
	char ext_events_why[256];
};

int proto_health_encode(const struct proto_health *h, struct buf *out)
	__attribute__((warn_unused_result));
int proto_health_decode(const char *p, size_t n, struct proto_health *out)
	__attribute__((warn_unused_result));
/* The client's readiness test (doc/transport-rules.md 7). */
bool proto_health_ready(const struct proto_health *h);

/*
 * Typed error bodies: "CODE: message" (doc/protocol-v1.md 4). Codes are upper-case
 * letters, digits and '_'. The file extension adds "FS_ERROR: ENAME: text"
 * where ENAME is an errno name (see errname.h).
 */
#define PROTO_ERR_PATH_NOT_FOUND "PATH_NOT_FOUND"
#define PROTO_ERR_PATH_REFUSED "PATH_REFUSED"
#define PROTO_ERR_REQUEST_INVALID "REQUEST_INVALID"
#define PROTO_ERR_JOB_NOT_FOUND "JOB_NOT_FOUND"
#define PROTO_ERR_JOB_LIMIT "JOB_LIMIT_REACHED"
#define PROTO_ERR_VERSION "PROTOCOL_VERSION_MISMATCH"
#define PROTO_ERR_OPERATION_FAILED "AGENT_OPERATION_FAILED"
#define PROTO_ERR_NOT_ACTIVATED "AGENT_NOT_ACTIVATED"
#define PROTO_ERR_FS "FS_ERROR"
/* The reply cache's refusals (doc/protocol-ext.md, "Idempotency keys"). */
#define PROTO_ERR_KEY_REUSED "IDEMPOTENCY_KEY_REUSED"
#define PROTO_ERR_IN_PROGRESS "REQUEST_IN_PROGRESS"
#define PROTO_ERR_REPLY_NOT_KEPT "REPLY_NOT_KEPT"

/* Copy the code of a typed body into code[codesz] ("" when the body is not
 * typed). Returns true when typed. */
bool proto_error_code(const char *body, size_t n, char *code, size_t codesz);
/* For "FS_ERROR: ENAME: ...", the errno (positive) the name stands for;
 * 0 when the body is not an FS_ERROR. */
int proto_error_fs_errno(const char *body, size_t n);

/* Whether s is a client name PROTO_HDR_CLIENT may carry. */
bool proto_client_id_valid(const char *s);

/* JSON string escaping into out (appends a quoted JSON string). */
int proto_json_string(struct buf *out, const char *s)
	__attribute__((warn_unused_result));

#endif
