/* SPDX-License-Identifier: MIT */
/*
 * proto_record: provider records as JSON. A record names a sandbox, its
 * state (one of the Azure data plane's state strings), its labels (the
 * alienAgentTransport label selects the transport) and, for the local
 * provider, where its agent listens and how it was booted. The local
 * provider's sandbox.json is this encoding (a public contract, documented
 * in sandboxctl(1)); the decoder also reads an Azure data-plane sandbox
 * object, whose fields this module does not know (egressPolicy,
 * vnetConnectionName, ports, ...) being ignored.
 *
 * This module only converts between bytes and struct proto_record: it does
 * not read files, validate sandbox names against a provider's rules, or
 * judge agent routes (local_state.h does those for the local provider).
 *
 * Conventions are proto.h's: decoders return 0, -EBADMSG (not JSON or not
 * an object), -EINVAL (a missing or mistyped field), -EFBIG (a bound
 * passed) or -ENOMEM, and write their output only on success.
 *
 * Thread-safe (no shared state); a struct proto_record has one owner.
 */
#ifndef SBFS_PROTO_RECORD_H
#define SBFS_PROTO_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/proto.h"

/* Bounds on what a decoder accepts. */
#define PROTO_RECORD_MAX_BYTES (1024UL * 1024) /* one encoded record */
#define PROTO_RECORD_MAX_LABELS 256
#define PROTO_RECORD_MAX_STRING 4096 /* any one string field */

/* The Azure sandbox states (doc/azure.md). UNKNOWN is a state string this
 * module does not know: kept apart so that a newer provider's state fails
 * its reader's checks instead of the decode. */
enum proto_record_state {
	PROTO_RECORD_UNKNOWN = 0,
	PROTO_RECORD_CREATING,
	PROTO_RECORD_RUNNING,
	PROTO_RECORD_STOPPING,
	PROTO_RECORD_STOPPED,
	PROTO_RECORD_SUSPENDED,
	PROTO_RECORD_RESUMING,
	PROTO_RECORD_DELETING,
};

/* Which transport a record's label selects (doc/transport-rules.md 1). */
enum proto_record_transport {
	PROTO_RECORD_NATIVE = 0, /* no alienAgentTransport label */
	PROTO_RECORD_AGENT, /* alienAgentTransport=native-file-v1 */
	PROTO_RECORD_INVALID, /* any other value: fail closed */
};

struct proto_label {
	char *key;
	char *value;
};

/*
 * A record. Every pointer is a heap string owned by the record (NULL when
 * absent); set them with free() + strdup() or the setters below.
 * Numbers that are absent read as 0 (exec_uid/exec_gid: -1).
 */
struct proto_record {
	char *id; /* "id", required */
	enum proto_record_state state; /* "state", required */
	struct proto_label *labels; /* "labels", a string -> string map */
	size_t nlabels;
	char *agent_url; /* "agentUrl"; NULL = no agent route */

	/* The local provider's fields (absent in Azure objects). */
	long agent_pid; /* "agentPid" */
	unsigned port; /* "port": the last port the agent had */
	char *exec_user; /* "execUser": the name commands run as */
	long exec_uid; /* "execUid", -1 = absent */
	long exec_gid; /* "execGid", -1 = absent */
	char *created_at; /* "createdAt", RFC 3339 UTC */
	char *started_at; /* "startedAt", the last boot */
	uint64_t boot_count; /* "bootCount": boots so far */
	bool strict_v1; /* "strictV1": run the agent with --strict-v1 */
	/* "dynamicUser": execUid/execGid were allocated for this sandbox
	 * alone (sandboxctl(1), "Identity") */
	bool dynamic_user;
	/* The limits of its commands; 0 = absent (the agent's defaults). */
	uint64_t pids; /* "pids": tasks */
	uint64_t memory; /* "memory": bytes */
	uint64_t tmp_size; /* "tmpSize": bytes of each /tmp and /dev/shm */
	/* "network": "user" or "none"; NULL = absent ("user") */
	char *network;
};

/* An empty record (state UNKNOWN, uid/gid -1). */
void proto_record_init(struct proto_record *r);
/* Free everything the record owns and re-init it. NULL-safe. */
void proto_record_cleanup(struct proto_record *r);
/* Free n labels and their array. */
void proto_labels_free(struct proto_label *labels, size_t n);

/* "Running" ...; NULL for PROTO_RECORD_UNKNOWN. */
const char *proto_record_state_name(enum proto_record_state s);
/* The state for an exact (case-sensitive) name; PROTO_RECORD_UNKNOWN when
 * the name is not one of the seven. */
enum proto_record_state proto_record_state_parse(const char *name);

/* A label's value (borrowed from r), or NULL. */
const char *proto_record_label(const struct proto_record *r, const char *key);
/* Set (value != NULL) or remove (value == NULL) a label; -ENOMEM. */
int proto_record_set_label(struct proto_record *r, const char *key,
			   const char *value)
	__attribute__((warn_unused_result));
/* Replace one of the record's string fields with a copy of value (NULL
 * clears it); -ENOMEM. */
int proto_record_set_str(char **field, const char *value)
	__attribute__((warn_unused_result));
enum proto_record_transport proto_record_transport(
	const struct proto_record *r);

/*
 * Decode one record object. Unknown fields are ignored. Required: "id" (a
 * non-empty string) and "state" (a string; an unknown name decodes as
 * PROTO_RECORD_UNKNOWN). "network", when present, must be "user" or
 * "none", and the limits positive counts. "labels" may be absent or null; when present it
 * must be an object whose values are strings and whose keys are unique.
 * On failure, *why (may be NULL) points to a static text naming the
 * problem ("\"id\" is missing or not a string").
 */
int proto_record_decode(const char *p, size_t n, struct proto_record *out,
			const char **why) __attribute__((warn_unused_result));

/*
 * Encode a record as an indented JSON object followed by a newline,
 * appended to out. Fields come in a fixed order (id, state, labels,
 * agentUrl, agentPid, port, execUser, execUid, execGid, dynamicUser,
 * createdAt, startedAt, bootCount, strictV1, pids, memory, tmpSize,
 * network); absent ones are left out, labels always appear.
 * -EINVAL when the record has no id or an UNKNOWN state.
 */
int proto_record_encode(const struct proto_record *r, struct buf *out)
	__attribute__((warn_unused_result));
/* n records as an indented JSON array (and a newline). */
int proto_record_encode_list(const struct proto_record *recs, size_t n,
			     struct buf *out)
	__attribute__((warn_unused_result));
/*
 * A record with what a status query found out appended to the object:
 * "agentAlive" (bool) and "health": the agent's health answer
 * ({"protocolVersion","status","bootId"}) or null when it did not answer.
 */
int proto_record_encode_status(const struct proto_record *r, bool alive,
			       const struct proto_health *health,
			       struct buf *out)
	__attribute__((warn_unused_result));

#endif
