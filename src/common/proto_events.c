/* SPDX-License-Identifier: MIT */
/*
 * proto_events: the answer of the extension's change events, GET events
 * (doc/protocol-ext.md, "Change events"): encoded piece by piece by the
 * agent, decoded whole by the mount, whose caches it empties.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/proto_i.h"
#include "common/xalloc.h"

/* ---- change events ------------------------------------------------------- */

static const char *const event_names[] = {
	[PROTO_EV_OTHER] = "other",   [PROTO_EV_CREATE] = "create",
	[PROTO_EV_REMOVE] = "remove", [PROTO_EV_RENAME] = "rename",
	[PROTO_EV_WRITE] = "write",   [PROTO_EV_ATTR] = "attr",
	[PROTO_EV_LOST] = "lost",
};

#define NEVENTS (sizeof(event_names) / sizeof(event_names[0]))

const char *proto_event_type_name(enum proto_event_type t)
{
	if ((unsigned)t >= NEVENTS)
		return event_names[PROTO_EV_OTHER];
	return event_names[t];
}

static enum proto_event_type event_type_from_name(const char *s)
{
	size_t i;

	for (i = 1; i < NEVENTS; i++)
		if (strcmp(event_names[i], s) == 0)
			return (enum proto_event_type)i;
	return PROTO_EV_OTHER;
}

int proto_events_begin(struct buf *out, const char *boot_id)
{
	size_t start = out->len;
	int rc = buf_append_str(out, "{\"bootId\":");

	if (rc == 0)
		rc = proto_json_string(out, boot_id);
	if (rc == 0)
		rc = buf_append_str(out, ",\"events\":[");
	if (rc != 0)
		pj_rollback(out, start);
	return rc;
}

/* A relative path as the wire has it: "/" and the path. */
static void jw_path(struct jw *w, const char *key, const char *rel)
{
	size_t n = strlen(rel);
	char *abs;

	if (w->rc != 0)
		return;
	abs = malloc(n + 2);
	if (abs == NULL) {
		w->rc = -ENOMEM;
		return;
	}
	abs[0] = '/';
	memcpy(abs + 1, rel, n + 1);
	jw_str(w, key, abs);
	free(abs);
}

int proto_events_add(struct buf *out, bool first, const struct proto_event *e)
{
	struct jw w;

	jw_begin_item(&w, out, first);
	jw_u64(&w, "seq", e->seq);
	jw_str(&w, "type", proto_event_type_name(e->type));
	if (e->type != PROTO_EV_LOST) {
		jw_path(&w, "path", e->path != NULL ? e->path : "");
		if (e->to != NULL)
			jw_path(&w, "to", e->to);
		jw_bool(&w, "dir", e->dir);
		if (e->by[0] != '\0')
			jw_str(&w, "by", e->by);
	}
	return jw_end(&w);
}

int proto_events_end(struct buf *out, uint64_t next, const char *unavailable)
{
	size_t start = out->len;
	struct jw w = {out, start, false, 0};

	jw_append(&w, "]", 1);
	jw_u64(&w, "next", next);
	if (unavailable != NULL)
		jw_str(&w, "unavailable", unavailable);
	return jw_end(&w);
}

/* The heap strings of an event. */
static const size_t event_strs[] = {offsetof(struct proto_event, path),
				    offsetof(struct proto_event, to)};

static void events_free(struct proto_event *ev, size_t n)
{
	pj_vec_free(ev, n, sizeof(*ev), event_strs, NFIELDS(event_strs));
}

void proto_events_cleanup(struct proto_events *e)
{
	if (e == NULL)
		return;
	events_free(e->ev, e->n);
	memset(e, 0, sizeof(*e));
}

/* A wire path ("/" or "/a/b", canonical, at most 4096 bytes) as the
 * relative path the client keys its caches by. */
static int event_path(const cJSON *obj, const char *key, char **out)
{
	const char *s;
	int rc = pj_str(obj, key, true, &s);

	if (rc < 0)
		return rc;
	if (s[0] != '/' || strlen(s) > PATH_MAX_BYTES || !path_rel_valid(s + 1))
		return -EINVAL;
	return pj_dup(s + 1, out);
}

static int event_from_json(const cJSON *obj, struct proto_event *out)
{
	struct proto_event e;
	const char *type, *by;
	int rc;

	if (!cJSON_IsObject(obj))
		return -EINVAL;
	memset(&e, 0, sizeof(e));
	rc = pj_u64_exact(obj, "seq", true, &e.seq);
	if (rc == 0)
		rc = pj_str(obj, "type", true, &type);
	if (rc < 0)
		return rc;
	e.type = event_type_from_name(type);
	if (e.type == PROTO_EV_LOST) {
		*out = e;
		return 0;
	}
	rc = event_path(obj, "path", &e.path);
	if (rc == 0 && e.type == PROTO_EV_RENAME)
		rc = event_path(obj, "to", &e.to);
	if (rc == 0)
		rc = pj_opt_bool(obj, "dir", &e.dir);
	if (rc == 0) {
		rc = pj_str(obj, "by", false, &by);
		if (rc == 0 && proto_client_id_valid(by))
			strlcpy_s(e.by, by, sizeof(e.by));
		else if (rc == 0)
			rc = -EINVAL;
		else if (rc == -ENOENT)
			rc = 0;
	}
	if (rc < 0) {
		free(e.path);
		free(e.to);
		return rc;
	}
	*out = e;
	return 0;
}

/* An events answer's members into r (proto_events_decode). */
static int events_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_events *r = dst;
	const cJSON *events, *it;
	const char *s;
	bool lost = false;
	int rc;

	rc = pj_str(root, "bootId", true, &s);
	if (rc == 0 && strlen(s) >= sizeof(r->boot_id))
		rc = -EINVAL;
	if (rc < 0)
		return rc;
	strlcpy_s(r->boot_id, s, sizeof(r->boot_id));
	rc = pj_u64_exact(root, "next", true, &r->next);
	if (rc < 0)
		return rc;
	rc = pj_str(root, "unavailable", false, &s);
	if (rc == 0)
		strlcpy_s(r->unavailable, s, sizeof(r->unavailable));
	else if (rc != -ENOENT)
		return rc;
	rc = pj_array(root, "events", PROTO_EXT_EVENTS_MAX, sizeof(*r->ev),
		      &events, (void **)&r->ev);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(it, events)
	{
		struct proto_event *e = &r->ev[r->n];

		rc = event_from_json(it, e);
		if (rc < 0)
			return rc;
		r->n++;
		/* In order, and none past the point the answer says it has
		 * reached: a client resumes from next. */
		if ((r->n > 1 && e->seq <= e[-1].seq) || e->seq > r->next)
			return -EINVAL;
		if (e->type == PROTO_EV_LOST)
			lost = true;
	}
	/* A lost event makes every other one moot: the client forgets all. */
	if (lost || r->unavailable[0] != '\0') {
		events_free(r->ev, r->n);
		r->ev = NULL;
		r->n = 0;
		r->lost = true;
	}
	return 0;
}

PJ_BODY(events_body, struct proto_events, pj_parse_strict, events_fill,
	proto_events_cleanup);

int proto_events_decode(const char *p, size_t n, struct proto_events *out)
{
	int rc;

	if (n > PROTO_EXT_EVENTS_MAX_BYTES)
		return -EPROTO;
	rc = pj_decode(p, n, &events_body, NULL, out);
	return rc == -ENOMEM || rc == 0 ? rc : -EPROTO;
}
