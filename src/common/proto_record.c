/* SPDX-License-Identifier: MIT */
/*
 * proto_record: provider records <-> JSON. Decoding is tolerant of fields
 * it does not know (an Azure sandbox object carries many) and strict about
 * the ones it reads; encoding is deterministic and indented, because the
 * local provider's sandbox.json is read by people as well as programs.
 * Nothing here touches files.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "common/proto_i.h"
#include "common/proto_record.h"

static const char *const state_names[] = {
	[PROTO_RECORD_CREATING] = "Creating",
	[PROTO_RECORD_RUNNING] = "Running",
	[PROTO_RECORD_STOPPING] = "Stopping",
	[PROTO_RECORD_STOPPED] = "Stopped",
	[PROTO_RECORD_SUSPENDED] = "Suspended",
	[PROTO_RECORD_RESUMING] = "Resuming",
	[PROTO_RECORD_DELETING] = "Deleting",
};

#define NSTATES (sizeof(state_names) / sizeof(state_names[0]))

void proto_record_init(struct proto_record *r)
{
	memset(r, 0, sizeof(*r));
	r->exec_uid = -1;
	r->exec_gid = -1;
}

/* The heap strings of a label. */
static const size_t label_strs[] = {offsetof(struct proto_label, key),
				    offsetof(struct proto_label, value)};

void proto_labels_free(struct proto_label *labels, size_t n)
{
	pj_vec_free(labels, n, sizeof(*labels), label_strs,
		    NFIELDS(label_strs));
}

const char *proto_record_state_name(enum proto_record_state s)
{
	if ((size_t)s >= NSTATES)
		return NULL;
	return state_names[s];
}

enum proto_record_state proto_record_state_parse(const char *name)
{
	size_t i;

	for (i = 1; name != NULL && i < NSTATES; i++)
		if (strcmp(name, state_names[i]) == 0)
			return (enum proto_record_state)i;
	return PROTO_RECORD_UNKNOWN;
}

const char *proto_record_label(const struct proto_record *r, const char *key)
{
	size_t i;

	for (i = 0; i < r->nlabels; i++)
		if (strcmp(r->labels[i].key, key) == 0)
			return r->labels[i].value;
	return NULL;
}

int proto_record_set_str(char **field, const char *value)
{
	char *copy = NULL;

	if (value != NULL) {
		copy = strdup(value);
		if (copy == NULL)
			return -ENOMEM;
	}
	free(*field);
	*field = copy;
	return 0;
}

int proto_record_set_label(struct proto_record *r, const char *key,
			   const char *value)
{
	struct proto_label *grown;
	char *k, *v;
	size_t i;

	for (i = 0; i < r->nlabels; i++)
		if (strcmp(r->labels[i].key, key) == 0)
			break;
	if (i < r->nlabels) {
		if (value != NULL)
			return proto_record_set_str(&r->labels[i].value, value);
		free(r->labels[i].key);
		free(r->labels[i].value);
		memmove(&r->labels[i], &r->labels[i + 1],
			(r->nlabels - i - 1) * sizeof(r->labels[0]));
		r->nlabels--;
		return 0;
	}
	if (value == NULL)
		return 0;
	k = strdup(key);
	v = strdup(value);
	grown = realloc(r->labels, (r->nlabels + 1) * sizeof(r->labels[0]));
	if (k == NULL || v == NULL || grown == NULL) {
		free(k);
		free(v);
		if (grown != NULL)
			r->labels = grown;
		return -ENOMEM;
	}
	r->labels = grown;
	r->labels[r->nlabels].key = k;
	r->labels[r->nlabels].value = v;
	r->nlabels++;
	return 0;
}

enum proto_record_transport proto_record_transport(const struct proto_record *r)
{
	const char *v = proto_record_label(r, PROTO_TRANSPORT_LABEL);

	if (v == NULL)
		return PROTO_RECORD_NATIVE;
	if (strcmp(v, PROTO_TRANSPORT_AGENT) == 0)
		return PROTO_RECORD_AGENT;
	return PROTO_RECORD_INVALID;
}

/* ---- decoding ----------------------------------------------------------- */

/* An optional integer field within [lo, hi]; *dst untouched when absent. */
static int opt_long(const cJSON *root, const char *key, double lo, double hi,
		    long *dst)
{
	const cJSON *it = pj_member(root, key);
	double v;
	int rc;

	if (it == NULL)
		return 0;
	rc = pj_num_range(it, lo, hi, &v);
	if (rc == 0)
		*dst = (long)v;
	return rc;
}

/* An optional positive count (a limit); *dst untouched when absent. */
static int opt_count(const cJSON *root, const char *key, uint64_t *dst)
{
	const cJSON *it = pj_member(root, key);
	double v;
	int rc;

	if (it == NULL)
		return 0;
	rc = pj_num_range(it, 1, 9007199254740992.0, &v);
	if (rc == 0)
		*dst = (uint64_t)v;
	return rc;
}

static int decode_labels(const cJSON *root, struct proto_record *r,
			 const char **why)
{
	const cJSON *labels = pj_member(root, "labels");
	const cJSON *it;
	int rc;

	if (labels == NULL)
		return 0;
	if (!cJSON_IsObject(labels)) {
		*why = "\"labels\" is not an object";
		return -EINVAL;
	}
	cJSON_ArrayForEach(it, labels)
	{
		if (r->nlabels >= PROTO_RECORD_MAX_LABELS) {
			*why = "too many labels";
			return -EFBIG;
		}
		if (!cJSON_IsString(it) || it->valuestring == NULL ||
		    it->string == NULL) {
			*why = "a label's value is not a string";
			return -EINVAL;
		}
		if (strlen(it->string) > PROTO_RECORD_MAX_STRING ||
		    strlen(it->valuestring) > PROTO_RECORD_MAX_STRING) {
			*why = "a label is too long";
			return -EFBIG;
		}
		/* Two values for one key (the transport selector above all)
		 * would let readers disagree about the record. */
		if (proto_record_label(r, it->string) != NULL) {
			*why = "a label key appears twice";
			return -EINVAL;
		}
		rc = proto_record_set_label(r, it->string, it->valuestring);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The optional members of a record, each absent (or null) or as its kind
 * says, in the order they are checked. */
enum field_kind {
	FIELD_STR, /* a string of at most PROTO_RECORD_MAX_STRING bytes */
	FIELD_LONG, /* an integer in [0, hi] into a long */
	FIELD_UINT, /* ... into an unsigned */
	FIELD_U64, /* a non-negative integer */
	FIELD_COUNT, /* a positive count (a limit) */
	FIELD_BOOL,
};

struct record_field {
	const char *key;
	enum field_kind kind;
	size_t off;
	double hi;
	const char *why; /* the reason when the member is not as it must be */
};

#define FIELD(key, kind, member, hi, why)                                 \
	{                                                                 \
		key, kind, offsetof(struct proto_record, member), hi, why \
	}
#define WHY_IDS "\"execUid\" or \"execGid\" is not a user id"
#define WHY_TIMES "\"createdAt\" or \"startedAt\" is not a string"
#define WHY_LIMITS "\"pids\", \"memory\" or \"tmpSize\" is not a positive count"
static const struct record_field record_fields[] = {
	FIELD("agentUrl", FIELD_STR, agent_url, 0,
	      "\"agentUrl\" is not a string"),
	FIELD("agentPid", FIELD_LONG, agent_pid, 2147483647.0,
	      "\"agentPid\" is not a process id"),
	FIELD("port", FIELD_UINT, port, 65535, "\"port\" is not a port number"),
	FIELD("execUser", FIELD_STR, exec_user, 0,
	      "\"execUser\" is not a string"),
	FIELD("execUid", FIELD_LONG, exec_uid, 4294967294.0, WHY_IDS),
	FIELD("execGid", FIELD_LONG, exec_gid, 4294967294.0, WHY_IDS),
	FIELD("createdAt", FIELD_STR, created_at, 0, WHY_TIMES),
	FIELD("startedAt", FIELD_STR, started_at, 0, WHY_TIMES),
	FIELD("bootCount", FIELD_U64, boot_count, 0,
	      "\"bootCount\" is not a count"),
	FIELD("strictV1", FIELD_BOOL, strict_v1, 0,
	      "\"strictV1\" is not a boolean"),
	FIELD("dynamicUser", FIELD_BOOL, dynamic_user, 0,
	      "\"dynamicUser\" is not a boolean"),
	FIELD("pids", FIELD_COUNT, pids, 0, WHY_LIMITS),
	FIELD("memory", FIELD_COUNT, memory, 0, WHY_LIMITS),
	FIELD("tmpSize", FIELD_COUNT, tmp_size, 0, WHY_LIMITS),
	FIELD("network", FIELD_STR, network, 0,
	      "\"network\" is not \"user\" or \"none\""),
};
#undef FIELD

/* Free what r owns (the string members of record_fields, the id and the
 * labels) and make it empty again. */
void proto_record_cleanup(struct proto_record *r)
{
	size_t i;

	if (r == NULL)
		return;
	proto_labels_free(r->labels, r->nlabels);
	free(r->id);
	for (i = 0; i < NFIELDS(record_fields); i++)
		if (record_fields[i].kind == FIELD_STR)
			pj_strs_free(r, &record_fields[i].off, 1);
	proto_record_init(r);
}

/* One optional member into r; absent leaves r's field as it is. */
static int field_from_json(const cJSON *root, const struct record_field *f,
			   struct proto_record *r)
{
	void *at = (char *)r + f->off;
	long v = 0;
	int rc;

	switch (f->kind) {
	case FIELD_STR:
		return pj_opt_str_max(root, f->key, PROTO_RECORD_MAX_STRING,
				      at);
	case FIELD_LONG:
		return opt_long(root, f->key, 0, f->hi, at);
	case FIELD_UINT:
		rc = opt_long(root, f->key, 0, f->hi, &v);
		if (rc == 0 && v != 0)
			*(unsigned *)at = (unsigned)v;
		return rc;
	case FIELD_U64:
		rc = pj_u64(root, f->key, false, at);
		return rc == -ENOENT ? 0 : rc;
	case FIELD_COUNT:
		return opt_count(root, f->key, at);
	case FIELD_BOOL:
		return pj_opt_bool(root, f->key, at);
	}
	return -EINVAL;
}

int proto_record_decode(const char *p, size_t n, struct proto_record *out,
			const char **why)
{
	const char *reason = "not a JSON object";
	struct proto_record r;
	const char *s;
	cJSON *root;
	size_t i;
	int rc = 0;

	proto_record_init(&r);
	if (n > PROTO_RECORD_MAX_BYTES) {
		reason = "larger than the record limit";
		rc = -EFBIG;
		goto out_noroot;
	}
	root = pj_parse_object(p, n, &rc);
	if (root == NULL) {
		reason =
			rc == -EBADMSG ? "not valid JSON" : "not a JSON object";
		if (rc == -EINVAL)
			rc = -EBADMSG;
		goto out_noroot;
	}
	rc = pj_str(root, "id", true, &s);
	if (rc < 0 || *s == '\0' || strlen(s) > PROTO_RECORD_MAX_STRING) {
		reason = "\"id\" is missing or not a string";
		rc = -EINVAL;
		goto out;
	}
	rc = pj_dup(s, &r.id);
	if (rc < 0)
		goto out;
	rc = pj_str(root, "state", true, &s);
	if (rc < 0) {
		reason = "\"state\" is missing or not a string";
		goto out;
	}
	r.state = proto_record_state_parse(s);
	rc = decode_labels(root, &r, &reason);
	for (i = 0; rc == 0 && i < NFIELDS(record_fields); i++) {
		reason = record_fields[i].why;
		rc = field_from_json(root, &record_fields[i], &r);
	}
	if (rc < 0)
		goto out;
	reason = "\"network\" is not \"user\" or \"none\"";
	if (r.network != NULL && strcmp(r.network, "user") != 0 &&
	    strcmp(r.network, "none") != 0)
		rc = -EINVAL;
out:
	cJSON_Delete(root);
out_noroot:
	if (rc < 0) {
		proto_record_cleanup(&r);
		if (why != NULL)
			*why = rc == -ENOMEM ? "out of memory" : reason;
		return rc;
	}
	*out = r;
	return 0;
}

/* ---- encoding ----------------------------------------------------------- */

static cJSON *record_json(const struct proto_record *r)
{
	const char *state = proto_record_state_name(r->state);
	cJSON *root, *labels;
	size_t i;
	bool ok;

	if (r->id == NULL || state == NULL)
		return NULL;
	root = cJSON_CreateObject();
	if (root == NULL)
		return NULL;
	ok = cJSON_AddStringToObject(root, "id", r->id) != NULL &&
	     cJSON_AddStringToObject(root, "state", state) != NULL;
	labels = ok ? cJSON_AddObjectToObject(root, "labels") : NULL;
	ok = labels != NULL;
	for (i = 0; ok && i < r->nlabels; i++)
		ok = cJSON_AddStringToObject(labels, r->labels[i].key,
					     r->labels[i].value) != NULL;
	if (ok && r->agent_url != NULL)
		ok = cJSON_AddStringToObject(root, "agentUrl", r->agent_url) !=
		     NULL;
	if (ok && r->agent_pid > 0)
		ok = cJSON_AddNumberToObject(root, "agentPid",
					     (double)r->agent_pid) != NULL;
	if (ok && r->port > 0)
		ok = cJSON_AddNumberToObject(root, "port", (double)r->port) !=
		     NULL;
	if (ok && r->exec_user != NULL)
		ok = cJSON_AddStringToObject(root, "execUser", r->exec_user) !=
		     NULL;
	if (ok && r->exec_uid >= 0)
		ok = cJSON_AddNumberToObject(root, "execUid",
					     (double)r->exec_uid) != NULL;
	if (ok && r->exec_gid >= 0)
		ok = cJSON_AddNumberToObject(root, "execGid",
					     (double)r->exec_gid) != NULL;
	if (ok && r->dynamic_user)
		ok = cJSON_AddBoolToObject(root, "dynamicUser", true) != NULL;
	if (ok && r->created_at != NULL)
		ok = cJSON_AddStringToObject(root, "createdAt",
					     r->created_at) != NULL;
	if (ok && r->started_at != NULL)
		ok = cJSON_AddStringToObject(root, "startedAt",
					     r->started_at) != NULL;
	if (ok)
		ok = cJSON_AddNumberToObject(root, "bootCount",
					     (double)r->boot_count) != NULL;
	if (ok && r->strict_v1)
		ok = cJSON_AddBoolToObject(root, "strictV1", true) != NULL;
	if (ok && r->pids > 0)
		ok = cJSON_AddNumberToObject(root, "pids", (double)r->pids) !=
		     NULL;
	if (ok && r->memory > 0)
		ok = cJSON_AddNumberToObject(root, "memory",
					     (double)r->memory) != NULL;
	if (ok && r->tmp_size > 0)
		ok = cJSON_AddNumberToObject(root, "tmpSize",
					     (double)r->tmp_size) != NULL;
	if (ok && r->network != NULL)
		ok = cJSON_AddStringToObject(root, "network", r->network) !=
		     NULL;
	if (!ok) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

static int indent(struct buf *out, int depth)
{
	int rc = 0;

	while (rc == 0 && depth-- > 0)
		rc = buf_append(out, "  ", 2);
	return rc;
}

/*
 * Two-space indentation and "key": value, one member per line: cJSON's own
 * formatted printer puts tabs after the colons, which reads badly in a
 * terminal. Scalars are printed by cJSON, so escaping stays its own.
 */
static int pretty(const cJSON *item, struct buf *out, int depth)
{
	const cJSON *child;
	bool obj = cJSON_IsObject(item);
	int rc;

	if (!obj && !cJSON_IsArray(item))
		return pj_print(item, out);
	if (item->child == NULL)
		return buf_append_str(out, obj ? "{}" : "[]");
	rc = buf_append_str(out, obj ? "{\n" : "[\n");
	for (child = item->child; rc == 0 && child != NULL;
	     child = child->next) {
		rc = indent(out, depth + 1);
		if (rc == 0 && obj) {
			rc = proto_json_string(out, child->string);
			if (rc == 0)
				rc = buf_append(out, ": ", 2);
		}
		if (rc == 0)
			rc = pretty(child, out, depth + 1);
		if (rc == 0)
			rc = buf_append_str(out, child->next ? ",\n" : "\n");
	}
	if (rc == 0)
		rc = indent(out, depth);
	if (rc == 0)
		rc = buf_append_str(out, obj ? "}" : "]");
	return rc;
}

static int emit(cJSON *root, struct buf *out)
{
	size_t mark = out->len;
	int rc = pretty(root, out, 0);

	if (rc == 0)
		rc = buf_append(out, "\n", 1);
	if (rc < 0) {
		/* Leave out as it was: no half record. */
		out->len = mark;
		if (out->data != NULL)
			out->data[mark] = '\0';
	}
	cJSON_Delete(root);
	return rc;
}

int proto_record_encode(const struct proto_record *r, struct buf *out)
{
	cJSON *root;

	if (r->id == NULL || proto_record_state_name(r->state) == NULL)
		return -EINVAL;
	root = record_json(r);
	if (root == NULL)
		return -ENOMEM;
	return emit(root, out);
}

int proto_record_encode_list(const struct proto_record *recs, size_t n,
			     struct buf *out)
{
	cJSON *arr = cJSON_CreateArray(), *one;
	size_t i;

	if (arr == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (recs[i].id == NULL ||
		    proto_record_state_name(recs[i].state) == NULL) {
			cJSON_Delete(arr);
			return -EINVAL;
		}
		one = record_json(&recs[i]);
		if (one == NULL || !cJSON_AddItemToArray(arr, one)) {
			cJSON_Delete(one);
			cJSON_Delete(arr);
			return -ENOMEM;
		}
	}
	return emit(arr, out);
}

int proto_record_encode_status(const struct proto_record *r, bool alive,
			       const struct proto_health *health,
			       struct buf *out)
{
	cJSON *root, *h;
	bool ok;

	if (r->id == NULL || proto_record_state_name(r->state) == NULL)
		return -EINVAL;
	root = record_json(r);
	if (root == NULL)
		return -ENOMEM;
	ok = cJSON_AddBoolToObject(root, "agentAlive", alive) != NULL;
	if (ok && health == NULL) {
		ok = cJSON_AddNullToObject(root, "health") != NULL;
	} else if (ok) {
		h = cJSON_AddObjectToObject(root, "health");
		ok = h != NULL &&
		     cJSON_AddNumberToObject(
			     h, "protocolVersion",
			     (double)health->protocol_version) &&
		     cJSON_AddStringToObject(h, "status", health->status) &&
		     cJSON_AddStringToObject(h, "bootId", health->boot_id);
	}
	if (!ok) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	return emit(root, out);
}
