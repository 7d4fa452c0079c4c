/* SPDX-License-Identifier: MIT */
/*
 * proto_azure: the JSON of the Azure sandbox data plane and of the Azure
 * token endpoints (doc/transport-rules.md 10, doc/azure.md), as plain C
 * structs. It decodes a
 * sandbox object (id, state and labels through proto_record, plus the
 * ports, the egress policy and the vnet connection), the list envelope
 * ({"value":[...], "nextLink"}), the native exec answer ({"stdout",
 * "stderr","exitCode"}), the token answers of Microsoft Entra ID, of the
 * managed identity endpoints and of `az account get-access-token`, and the
 * error bodies of both services; it encodes the requests the data plane
 * takes (and decodes them again, for fakes and tests).
 *
 * It does not judge anything (which routes, egress policies or tokens are
 * acceptable is provider_azure's and azure_auth's business), make requests
 * or keep state. The exec answer is read with a small scanner of its own
 * rather than cJSON, because command output may hold NUL bytes ("\u0000"),
 * which a cJSON string cannot carry (proto_azure_exec.c, with the exec
 * request; the rest is proto_azure.c).
 *
 * Conventions are proto.h's: decoders take untrusted (pointer, length)
 * input, return 0, -EBADMSG (not JSON, or not an object at the top),
 * -EINVAL (a missing or mistyped field), -EFBIG (a bound passed) or
 * -ENOMEM, write their output only on success, and say why in *why (a
 * static text; why may be NULL).
 *
 * Thread-safe (no shared state); every struct has one owner.
 */
#ifndef SBFS_PROTO_AZURE_H
#define SBFS_PROTO_AZURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/proto_record.h"

#define PROTO_AZURE_API_VERSION "2026-02-01-preview"
#define PROTO_AZURE_AGENT_PORT 8971 /* AGENT_PORT */

/* Bounds on what the decoders accept. */
#define PROTO_AZURE_MAX_PORTS 256
#define PROTO_AZURE_MAX_RULES 4096
#define PROTO_AZURE_MAX_LIST 10000 /* sandboxes in one list page */
#define PROTO_AZURE_MAX_TOKEN 16384 /* characters of one access token */

/* One entry of a record's "ports" array. */
struct proto_azure_port {
	unsigned port; /* 1..65535 */
	char *url; /* NULL when absent or null */
	int anonymous; /* auth.anonymous: 1, 0, or -1 when absent */
	char *activation_mode; /* NULL when absent */
	char *protocol; /* NULL when absent */
};

/* What a record's "egressPolicy" holds. The decoder only describes it;
 * whether a sandbox with this policy may be activated is the judge's
 * call. */
struct proto_azure_egress {
	bool present; /* there, and not null */
	bool object; /* ... and a JSON object */
	char *default_action; /* "defaultAction" when a string */
	char *traffic_inspection; /* "trafficInspection" when a string */
	size_t nhost_rules; /* entries of "hostRules" */
	size_t nrules; /* entries of "rules" */
	/* The first way the policy departs from the documented shape
	 * (doc/transport-rules.md 10: defaultAction Allow|Deny, hostRules[]
	 * of {pattern, action Allow|Deny}, rules[] of {match?:{host?, path?,
	 * method?}, action:{type Allow|Deny|Transform|Rewrite, ...}},
	 * trafficInspection Full|Partial|Legacy|None), or NULL when it does
	 * not. Static text. */
	const char *problem;
};

/* A data-plane sandbox object. */
struct proto_azure_sandbox {
	struct proto_record rec; /* id, state, labels (proto_record_decode) */
	struct proto_azure_port *ports;
	size_t nports;
	struct proto_azure_egress egress;
	char *vnet; /* "vnetConnectionName"; NULL when absent or null */
};

/* Free what s owns and make it empty again. NULL-safe. */
void proto_azure_sandbox_cleanup(struct proto_azure_sandbox *s);

/*
 * Decode one sandbox object. Required: "id" and "state" (as
 * proto_record_decode wants them); "labels" as proto_record_decode reads
 * them; "ports", when present and not null, an array of objects whose
 * "port" is an integer 1..65535, "url" a string or null, "auth" an object
 * or null whose "anonymous" is a boolean, "activationMode" and "protocol"
 * strings; "vnetConnectionName" a string or null. The egress policy never
 * fails the decode (see struct proto_azure_egress). Unknown fields are
 * ignored.
 */
int proto_azure_sandbox_decode(const char *p, size_t n,
			       struct proto_azure_sandbox *out,
			       const char **why)
	__attribute__((warn_unused_result));

/* The entry for a port, or NULL (borrowed from s). */
const struct proto_azure_port *proto_azure_sandbox_port(
	const struct proto_azure_sandbox *s, unsigned port);

/* Deep copy; -ENOMEM. */
int proto_azure_sandbox_copy(struct proto_azure_sandbox *dst,
			     const struct proto_azure_sandbox *src)
	__attribute__((warn_unused_result));

/* One page of GET {group}/sandboxes. */
struct proto_azure_list {
	char **ids; /* every entry's "id" */
	struct proto_azure_sandbox *records; /* parallel to ids */
	bool *decoded; /* records[i] is a fully decoded sandbox */
	size_t n;
	char *next_link; /* "nextLink"; NULL when absent, null or "" */
};

void proto_azure_list_cleanup(struct proto_azure_list *l);

/*
 * Decode a list page: an object whose "value" is an array of objects,
 * each with a non-empty string "id" (an entry without one fails the
 * decode). Each entry is also decoded as a sandbox object; one that does
 * not decode is kept by id with decoded[i] false, so that one odd record
 * does not hide the others. "nextLink" is a string, null or absent.
 */
int proto_azure_list_decode(const char *p, size_t n,
			    struct proto_azure_list *out, const char **why)
	__attribute__((warn_unused_result));

/* The native exec answer of POST {sandbox}/executeShellCommand. */
struct proto_azure_exec {
	struct buf out; /* "stdout" bytes; set its max before decoding */
	struct buf err; /* "stderr" bytes; likewise */
	bool truncated; /* a stream passed its buffer's max: the rest was
			    dropped */
	bool has_exit; /* "exitCode" was an integer */
	int exit_code;
};

/* Empty buffers with these maxima (0: no bound but the input's size). */
void proto_azure_exec_init(struct proto_azure_exec *e, size_t max_out,
			   size_t max_err);
void proto_azure_exec_cleanup(struct proto_azure_exec *e);

/*
 * Decode the answer into e (whose buffers are reset first): an object
 * whose "stdout" and "stderr" are strings or null (absent reads as empty)
 * and whose "exitCode" is an integer in the int32 range, or null/absent
 * (has_exit false). The strings may hold any byte, NUL included. A
 * member that appears twice fails the decode. Unknown members are
 * skipped (nesting at most 64 deep). On failure e holds nothing useful.
 */
int proto_azure_exec_decode(const char *p, size_t n, struct proto_azure_exec *e,
			    const char **why)
	__attribute__((warn_unused_result));

/* {"command": command, "workingDirectory": cwd} (cwd NULL: left out). */
int proto_azure_exec_req_encode(const char *command, const char *cwd,
				struct buf *out)
	__attribute__((warn_unused_result));
/* The other way (for fakes): heap copies; *cwd NULL when absent. */
int proto_azure_exec_req_decode(const char *p, size_t n, char **command,
				char **cwd) __attribute__((warn_unused_result));

/* {"port": port, "auth": {"anonymous": anonymous}, "activationMode":
 * mode} for POST {sandbox}/ports/add. */
int proto_azure_port_add_encode(unsigned port, bool anonymous, const char *mode,
				struct buf *out)
	__attribute__((warn_unused_result));
/* The other way (for fakes); *mode is a heap copy (NULL when absent). */
int proto_azure_port_add_decode(const char *p, size_t n, unsigned *port,
				bool *anonymous, char **mode)
	__attribute__((warn_unused_result));

/* An access token. token is a secret: proto_azure_token_cleanup wipes
 * it. */
struct proto_azure_token {
	char *token;
	int64_t expires_on; /* Unix seconds */
};

void proto_azure_token_cleanup(struct proto_azure_token *t);

/*
 * Decode a token answer of any of the credential sources: the token is
 * "access_token" (Entra ID, managed identity) or "accessToken" (the Azure
 * CLI), a non-empty string of at most PROTO_AZURE_MAX_TOKEN printable
 * characters; the expiry is the first of "expires_on" (Unix seconds, a
 * number or a string of digits), "expires_in" (seconds from now, likewise)
 * and "expiresOn" (the CLI's local time "YYYY-MM-DD HH:MM:SS[.ffffff]").
 * An answer without a usable expiry fails the decode. now: Unix seconds.
 */
int proto_azure_token_decode(const char *p, size_t n, int64_t now,
			     struct proto_azure_token *out, const char **why)
	__attribute__((warn_unused_result));

/*
 * The code and message of an error body, as the data plane
 * ({"error":{"code","message"}}) and Entra ID ({"error","error_description"})
 * send them, copied printable and bounded into code[codesz] and
 * msg[msgsz]. Returns false (both empty) when the body is neither.
 */
bool proto_azure_error_decode(const char *p, size_t n, char *code,
			      size_t codesz, char *msg, size_t msgsz);

#endif
