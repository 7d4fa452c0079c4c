/* SPDX-License-Identifier: MIT */
/*
 * ext_i: what the files of the file extension's routes share
 * (doc/protocol-ext.md): ext.c (stat, readlink, statfs, list, tree),
 * ext_io.c (read, contents, write) and ext_meta.c (the POST metadata
 * operations). Each handler decodes the query or body, normalises the
 * path by the v1 rules, calls fsops primitives and encodes the answer.
 * Authentication, activation, body limits and thread credentials are
 * http.c's; the filesystem work and its confinement are fsops.c's.
 *
 * Errors: ENOENT is the typed 404 PATH_NOT_FOUND that v1 sends (clients
 * keep the route and never replay on it); any other errno is 409
 * "FS_ERROR: <ENAME>: <text>: <path>" with the errno's name, never its
 * number; a path that leaves the root is FS_ERROR ELOOP.
 *
 * The routes that change something tell the event watcher what they are
 * about to change when the request names its client (X-Sandboxfs-Client),
 * so that the events it causes carry "by" (watch.h).
 *
 * Each function answers the request it is given or returns what it read;
 * none keeps state. Thread-safe.
 */
#ifndef SBFS_AGENT_EXT_I_H
#define SBFS_AGENT_EXT_I_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "agent/routes.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"

/* A normalised path and its terminator. */
#define EXT_REL_MAX (PATH_MAX_BYTES + 1)
/* Bound of a single attribute object or readlink answer: a name and a
 * link target, every byte escaped, and the numbers. */
#define EXT_ATTR_MAX 65536

#define EXT_TXT_BAD_CLIENT PROTO_HDR_CLIENT " must be 1 to 64 of A-Z a-z 0-9 -"

/* The answer for err (a negative errno of fsops) about the path p. */
int ext_reply_errno(struct agent_req *r, int err, const char *p);
/* 400 REQUEST_INVALID "Request invalid: <why>". */
int ext_reply_invalid(struct agent_req *r, const char *why);
/* 400 PATH_REFUSED for the path raw, refused as v says. */
int ext_reply_refused(struct agent_req *r, const char *raw,
		      enum path_verdict v);

/* The root is "" or "/"; otherwise the v1 rules, ".." refused. n counts
 * a NUL a query value may hold (%00), which is then refused. rel holds
 * EXT_REL_MAX bytes. */
enum path_verdict ext_normalize(const char *raw, size_t n, char *rel);
/*
 * The request's "path" query argument, normalised into rel (EXT_REL_MAX
 * bytes). Returns the argument as given, or NULL once the request was
 * answered (no path: v1's untyped 400; a refused one: 400 PATH_REFUSED),
 * with that answer's result in *rc.
 */
const char *ext_path_arg(struct agent_req *r, char *rel, int *rc);

void ext_attr_from_stat(const struct stat *st, struct proto_attr *pa);
/* 200 with the attributes of st (and a link's text, or NULL). */
int ext_reply_attr(struct agent_req *r, const struct stat *st,
		   const char *target);

/* The client a change is made for (X-Sandboxfs-Client): 0 with *client
 * (NULL when the request names none), or -EINVAL for a malformed name. */
int ext_change_client(struct agent_req *r, const char **client);

#endif
