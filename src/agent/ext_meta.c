/* SPDX-License-Identifier: MIT */
/*
 * ext_meta: the file extension's POST metadata operations
 * (doc/protocol-ext.md): create, mkdir, unlink, rmdir, rename, link,
 * symlink, chmod, truncate, utimens and fsync, each named by the last part
 * of its route's path, each with a JSON body of the same shape.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/ext_i.h"
#include "agent/fsops.h"
#include "agent/watch.h"

/* ---- POST metadata operations -------------------------------------------- */

static void to_timespec(const struct proto_time *t, struct timespec *ts)
{
	ts->tv_sec = 0;
	switch (t->how) {
	case PROTO_TIME_OMIT:
		ts->tv_nsec = UTIME_OMIT;
		break;
	case PROTO_TIME_NOW:
		ts->tv_nsec = UTIME_NOW;
		break;
	case PROTO_TIME_SET:
		ts->tv_sec = (time_t)t->sec;
		ts->tv_nsec = (long)t->nsec;
		break;
	}
}

/* The attributes after the operation, with the link text when the entry
 * it leaves is a symlink (a new one, a hard link to one, or one whose own
 * times were set). rel is the entry the operation ends on. */
static int reply_meta_attr(struct agent_req *r, const char *op,
			   const struct proto_ext_req *q, const char *rel,
			   const struct stat *st)
{
	char *target = NULL;
	int rc;

	if (!S_ISLNK(st->st_mode))
		return ext_reply_attr(r, st, NULL);
	if (strcmp(op, "symlink") == 0)
		return ext_reply_attr(r, st, q->target);
	/* Replaced since the operation: the answer just goes without it. */
	if (fsops_readlink(agent_req_agent(r), rel, &target) < 0)
		target = NULL;
	rc = ext_reply_attr(r, st, target);
	free(target);
	return rc;
}

/* Each operation: what it will change, for the event watcher (watch.h),
 * and whether it answers the attributes after it (else 204). */
static const struct meta_op {
	const char *op;
	unsigned kinds; /* of its path */
	unsigned kinds2; /* of its second path ("to") */
	bool attr;
} meta_ops[] = {
	{"create", AGENT_EV_CREATE | AGENT_EV_WRITE | AGENT_EV_ATTR, 0, true},
	/* mkdir sets the exact mode after the fact */
	{"mkdir", AGENT_EV_CREATE | AGENT_EV_ATTR, 0, true},
	{"symlink", AGENT_EV_CREATE | AGENT_EV_ATTR, 0, true},
	{"unlink", AGENT_EV_REMOVE, 0, false},
	{"rmdir", AGENT_EV_REMOVE, 0, false},
	/* An exchange is reported as two renames, one each way. */
	{"rename", AGENT_EV_RENAME, AGENT_EV_RENAME, false},
	/* The new name, and the link count of the file. */
	{"link", AGENT_EV_ATTR, AGENT_EV_CREATE, true},
	{"chmod", AGENT_EV_ATTR, 0, true},
	{"utimens", AGENT_EV_ATTR, 0, true},
	{"truncate", AGENT_EV_WRITE | AGENT_EV_ATTR, 0, true},
	{"fsync", 0, 0, false},
};

static const struct meta_op *meta_op_find(const char *op)
{
	size_t i;

	for (i = 0; i < sizeof(meta_ops) / sizeof(meta_ops[0]); i++)
		if (strcmp(meta_ops[i].op, op) == 0)
			return &meta_ops[i];
	return NULL;
}

/* A body that decodes but asks for what cannot be done: why, or NULL. */
static const char *meta_refusal(const char *op, const struct proto_ext_req *q)
{
	if (strcmp(op, "rename") == 0 && q->noreplace && q->exchange)
		return "noreplace and exchange exclude each other";
	if (strcmp(op, "symlink") == 0 && *q->target == '\0')
		return "a symlink target cannot be empty";
	return NULL;
}

/* Do the operation: 0 (st set when it answers attributes) or -errno. */
static int meta_run(const struct agent *a, const char *op,
		    const struct proto_ext_req *q, const char *rel,
		    const char *rel2, struct stat *st)
{
	struct timespec ts[2];

	if (strcmp(op, "create") == 0)
		return fsops_create(a, rel, q->mode, q->exclusive, q->truncate,
				    st);
	if (strcmp(op, "mkdir") == 0)
		return fsops_mkdir(a, rel, q->mode, st);
	if (strcmp(op, "unlink") == 0)
		return fsops_unlink(a, rel);
	if (strcmp(op, "rmdir") == 0)
		return fsops_rmdir(a, rel);
	if (strcmp(op, "fsync") == 0)
		return fsops_fsync(a, rel);
	if (strcmp(op, "rename") == 0)
		return fsops_rename(a, rel, rel2,
				    q->noreplace  ? RENAME_NOREPLACE
				    : q->exchange ? RENAME_EXCHANGE
						  : 0);
	if (strcmp(op, "link") == 0)
		return fsops_link(a, rel, rel2, st);
	if (strcmp(op, "symlink") == 0)
		return fsops_symlink(a, rel, q->target, st);
	if (strcmp(op, "chmod") == 0)
		return fsops_chmod(a, rel, q->mode, st);
	if (strcmp(op, "truncate") == 0)
		return fsops_truncate(a, rel, q->size, st);
	/* utimens: the only operation left in the route table */
	to_timespec(&q->atime, &ts[0]);
	to_timespec(&q->mtime, &ts[1]);
	return fsops_utimens(a, rel, ts, q->nofollow, st);
}

/* The body's paths, normalised into rel and rel2 (when it has "to"), and
 * how an error names them (*shown: the path, or both in both[bothsz]): 0,
 * or 1 once the request was answered (a refused path; *rc is that
 * answer's result). */
static int meta_paths(struct agent_req *r, const struct proto_ext_req *q,
		      char *rel, char *rel2, char *both, size_t bothsz,
		      const char **shown, int *rc)
{
	enum path_verdict v;

	v = ext_normalize(q->path, strlen(q->path), rel);
	if (v != PATH_OK) {
		*rc = ext_reply_refused(r, q->path, v);
		return 1;
	}
	*shown = q->path;
	if (q->to == NULL)
		return 0;
	v = ext_normalize(q->to, strlen(q->to), rel2);
	if (v != PATH_OK) {
		*rc = ext_reply_refused(r, q->to, v);
		return 1;
	}
	snprintf(both, bothsz, "%s -> %s", q->path, q->to);
	*shown = both;
	return 0;
}

int agent_route_ext_meta(struct agent_req *r)
{
	const char *op = strrchr(agent_req_path(r), '/') + 1;
	const struct meta_op *mo = meta_op_find(op);
	const struct agent *a = agent_req_agent(r);
	char rel[EXT_REL_MAX], rel2[EXT_REL_MAX], both[2 * EXT_REL_MAX + 8];
	struct proto_ext_req q;
	const char *body, *client, *why, *shown;
	uint64_t own;
	struct stat st;
	size_t len;
	int rc;

	if (mo == NULL)
		return agent_reply_empty(r, 404);
	if (!agent_req_is_json(r))
		return agent_reply_text(r, 415, AGENT_TEXT_JSON_TYPE);
	body = agent_req_body(r, &len);
	rc = proto_ext_req_decode(op, body, len, &q);
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	if (meta_paths(r, &q, rel, rel2, both, sizeof(both), &shown, &rc) != 0)
		goto out;
	if (ext_change_client(r, &client) < 0) {
		rc = ext_reply_invalid(r, EXT_TXT_BAD_CLIENT);
		goto out;
	}
	why = meta_refusal(op, &q);
	if (why != NULL) {
		rc = ext_reply_invalid(r, why);
		goto out;
	}
	own = client == NULL ? 0
			     : agent_events_own_begin(
				       a->events, client, rel, mo->kinds,
				       q.to != NULL ? rel2 : NULL,
				       strcmp(op, "rename") != 0 || q.exchange
					       ? mo->kinds2
					       : 0);
	rc = meta_run(a, op, &q, rel, rel2, &st);
	agent_events_own_end(a->events, own, rc == 0);
	if (rc < 0)
		rc = ext_reply_errno(r, rc, shown);
	else if (!mo->attr)
		rc = agent_reply_empty(r, 204);
	else
		rc = reply_meta_attr(r, op, &q, q.to != NULL ? rel2 : rel, &st);
out:
	proto_ext_req_cleanup(&q);
	return rc;
}
