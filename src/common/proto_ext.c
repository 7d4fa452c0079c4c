/* SPDX-License-Identifier: MIT */
/*
 * proto_ext: the JSON of the sandboxfs file extension (doc/protocol-ext.md):
 * attributes, directory pages and subtrees, the bodies of the metadata
 * operations, the readlink and statfs answers, the contents of a
 * directory's small files, and the content validator (ETag). The change
 * events are proto_events.c's.
 *
 * Encoders write JSON text directly into a struct buf (a listing page is
 * built entry by entry, without a tree, and integers are written exactly:
 * the writer of proto_i.h); decoders parse with cJSON and copy into the
 * structs of proto_files.h. Nothing here touches the filesystem or HTTP:
 * the agent's ext.c and the client's transport do that.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/proto_i.h"
#include "common/xalloc.h"

/* ---- types --------------------------------------------------------------- */

static const char *const ftype_names[] = {
	[PROTO_FT_UNKNOWN] = "unknown", [PROTO_FT_FILE] = "file",
	[PROTO_FT_DIR] = "dir",		[PROTO_FT_SYMLINK] = "symlink",
	[PROTO_FT_FIFO] = "fifo",	[PROTO_FT_SOCKET] = "socket",
	[PROTO_FT_CHAR] = "char",	[PROTO_FT_BLOCK] = "block",
};

#define NTYPES (sizeof(ftype_names) / sizeof(ftype_names[0]))

const char *proto_ftype_name(enum proto_ftype t)
{
	if ((unsigned)t >= NTYPES)
		return ftype_names[PROTO_FT_UNKNOWN];
	return ftype_names[t];
}

enum proto_ftype proto_ftype_from_name(const char *s)
{
	size_t i;

	if (s == NULL)
		return PROTO_FT_UNKNOWN;
	for (i = 1; i < NTYPES; i++)
		if (strcmp(ftype_names[i], s) == 0)
			return (enum proto_ftype)i;
	return PROTO_FT_UNKNOWN;
}

void proto_attr_etag(const struct proto_attr *a, char *out)
{
	snprintf(out, PROTO_ETAG_MAX,
		 "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 ".%" PRIx32 "\"", a->ino,
		 a->size, (uint64_t)a->mtime, a->mtime_ns);
}

/* ---- attributes ---------------------------------------------------------- */

/* The integer members of an attribute and of a statfs answer, in the
 * order they are written; read from (written to) the struct at off. */
enum num_kind {
	NUM_U64,
	NUM_I64,
	NUM_U32, /* at most max */
	NUM_MODE, /* a u32, at most 07777, written masked */
};

struct num_field {
	const char *key;
	enum num_kind kind;
	size_t off;
	uint32_t max;
};

#define ATTR(key, kind, member, max)                                \
	{                                                           \
		key, kind, offsetof(struct proto_attr, member), max \
	}
static const struct num_field attr_fields[] = {
	ATTR("mode", NUM_MODE, perm, 07777),
	ATTR("size", NUM_U64, size, 0),
	ATTR("nlink", NUM_U64, nlink, 0),
	ATTR("uid", NUM_U32, uid, UINT32_MAX),
	ATTR("gid", NUM_U32, gid, UINT32_MAX),
	ATTR("ino", NUM_U64, ino, 0),
	ATTR("blocks", NUM_U64, blocks, 0),
	ATTR("rdev", NUM_U64, rdev, 0),
	ATTR("atime", NUM_I64, atime, 0),
	ATTR("atimeNsec", NUM_U32, atime_ns, 999999999),
	ATTR("mtime", NUM_I64, mtime, 0),
	ATTR("mtimeNsec", NUM_U32, mtime_ns, 999999999),
	ATTR("ctime", NUM_I64, ctime, 0),
	ATTR("ctimeNsec", NUM_U32, ctime_ns, 999999999),
};
#undef ATTR

#define STATFS(member)                                                     \
	{                                                                  \
#member, NUM_U64, offsetof(struct proto_statfs, member), 0 \
	}
static const struct num_field statfs_fields[] = {
	STATFS(bsize),	STATFS(frsize), STATFS(blocks), STATFS(bfree),
	STATFS(bavail), STATFS(files),	STATFS(ffree),	STATFS(namemax),
};
#undef STATFS

static void nums_to_json(struct jw *w, const struct num_field *f, size_t n,
			 const void *base)
{
	const char *b = base;
	size_t i;

	for (i = 0; i < n; i++) {
		const void *at = b + f[i].off;

		switch (f[i].kind) {
		case NUM_U64:
			jw_u64(w, f[i].key, *(const uint64_t *)at);
			break;
		case NUM_I64:
			jw_i64(w, f[i].key, *(const int64_t *)at);
			break;
		case NUM_U32:
			jw_u64(w, f[i].key, *(const uint32_t *)at);
			break;
		case NUM_MODE:
			jw_u64(w, f[i].key, *(const uint32_t *)at & 07777);
			break;
		}
	}
}

/* Every field required; the first one missing or out of range fails.
 * The members are looked for where the encoder puts them (in the order
 * of f, each after the one before), then anywhere: a listing of 10,000
 * entries decodes without a search of each object per field. */
static int nums_from_json(const cJSON *obj, const struct num_field *f, size_t n,
			  void *base)
{
	const cJSON *next = obj->child, *it;
	char *b = base;
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < n; i++) {
		void *at = b + f[i].off;

		while (next != NULL && next->string != NULL &&
		       (strcmp(next->string, "name") == 0 ||
			strcmp(next->string, "type") == 0))
			next = next->next;
		if (next != NULL && next->string != NULL &&
		    strcmp(next->string, f[i].key) == 0)
			it = next;
		else
			it = cJSON_GetObjectItemCaseSensitive(obj, f[i].key);
		next = it != NULL ? it->next : NULL;
		switch (f[i].kind) {
		case NUM_U64:
			rc = pj_item_u64_exact(it, true, at);
			break;
		case NUM_I64:
			rc = pj_item_i64_exact(it, true, at);
			break;
		case NUM_U32:
		case NUM_MODE:
			rc = pj_item_u32_max(it, true, f[i].max, at);
			break;
		}
	}
	return rc;
}

/* The members of an attribute object (name and target when not NULL),
 * then its closing brace: the writer's result. */
static int attr_to_json(struct jw *w, const struct proto_attr *a,
			const char *name, const char *target)
{
	if (name != NULL)
		jw_str(w, "name", name);
	jw_str(w, "type", proto_ftype_name(a->type));
	nums_to_json(w, attr_fields, NFIELDS(attr_fields), a);
	if (target != NULL)
		jw_str(w, "target", target);
	return jw_end(w);
}

int proto_attr_encode(const struct proto_attr *a, const char *name,
		      const char *target, struct buf *out)
{
	struct jw w;

	jw_begin(&w, out);
	return attr_to_json(&w, a, name, target);
}

static int attr_from_json(const cJSON *obj, struct proto_attr *out)
{
	struct proto_attr a;
	const char *type;

	if (!cJSON_IsObject(obj))
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	if (pj_str(obj, "type", true, &type) < 0 ||
	    nums_from_json(obj, attr_fields, NFIELDS(attr_fields), &a) < 0)
		return -EINVAL;
	a.type = proto_ftype_from_name(type);
	*out = a;
	return 0;
}

int proto_attr_decode(const char *p, size_t n, struct proto_attr *out,
		      char **target)
{
	struct proto_attr a;
	char *t = NULL;
	cJSON *root;
	int rc = 0;

	root = pj_parse_strict(p, n, &rc);
	if (root == NULL)
		return rc;
	rc = attr_from_json(root, &a);
	if (rc == 0 && target != NULL)
		rc = pj_str_dup(root, "target", false, &t);
	cJSON_Delete(root);
	if (rc < 0)
		return rc;
	*out = a;
	if (target != NULL)
		*target = t;
	return 0;
}

/* ---- listing pages ------------------------------------------------------- */

int proto_list_begin(struct buf *out)
{
	return buf_append_str(out, "{\"entries\":[");
}

int proto_list_add(struct buf *out, bool first, const char *name,
		   const struct proto_attr *a, const char *target)
{
	struct jw w;

	jw_begin_item(&w, out, first);
	return attr_to_json(&w, a, name, target);
}

int proto_list_end(struct buf *out, const char *next)
{
	size_t start = out->len;
	int rc = buf_append(out, "]", 1);

	if (rc == 0 && next != NULL) {
		rc = buf_append_str(out, ",\"next\":");
		if (rc == 0)
			rc = proto_json_string(out, next);
	}
	if (rc == 0)
		rc = buf_append(out, "}", 1);
	if (rc != 0)
		pj_rollback(out, start);
	return rc;
}

/* The heap strings of an entry. */
static const size_t dirent_strs[] = {offsetof(struct proto_dirent, name),
				     offsetof(struct proto_dirent, target)};

void proto_dirents_free(struct proto_dirent *v, size_t n)
{
	pj_vec_free(v, n, sizeof(*v), dirent_strs, NFIELDS(dirent_strs));
}

void proto_list_cleanup(struct proto_list *l)
{
	if (l == NULL)
		return;
	proto_dirents_free(l->entries, l->n);
	free(l->next);
	memset(l, 0, sizeof(*l));
}

static int dirent_from_json(const cJSON *obj, struct proto_dirent *out)
{
	struct proto_dirent d;
	const char *name;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = attr_from_json(obj, &d.attr);
	if (rc < 0)
		return rc;
	rc = pj_str(obj, "name", true, &name);
	if (rc < 0)
		return rc;
	/* A hostile agent must not be able to hand the client a name that
	 * walks out of the directory it lists. */
	if (!path_component_valid(name))
		return -EINVAL;
	rc = pj_dup(name, &d.name);
	if (rc == 0)
		rc = pj_str_dup(obj, "target", false, &d.target);
	if (rc < 0) {
		free(d.name);
		return rc;
	}
	*out = d;
	return 0;
}

/* The entries of a listing into v (room for all), counted in *n. */
static int dirents_from_json(const cJSON *entries, struct proto_dirent *v,
			     size_t *n)
{
	const cJSON *it;
	int rc;

	cJSON_ArrayForEach(it, entries)
	{
		rc = dirent_from_json(it, &v[*n]);
		if (rc < 0)
			return rc;
		(*n)++;
	}
	return 0;
}

/* A listing page's members into l (proto_list_decode). */
static int list_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_list *l = dst;
	const cJSON *entries;
	const char *next;
	int rc;

	rc = pj_array(root, "entries", PROTO_EXT_LIST_MAX, sizeof(*l->entries),
		      &entries, (void **)&l->entries);
	if (rc >= 0)
		rc = dirents_from_json(entries, l->entries, &l->n);
	if (rc < 0)
		return rc;
	rc = pj_str(root, "next", false, &next);
	if (rc == -ENOENT)
		return 0;
	if (rc == 0 && (*next == '\0' || strlen(next) > 64))
		return -EINVAL;
	if (rc == 0)
		rc = pj_dup(next, &l->next);
	return rc;
}

PJ_BODY(list_body, struct proto_list, pj_parse_strict, list_fill,
	proto_list_cleanup);

int proto_list_decode(const char *p, size_t n, struct proto_list *out)
{
	return pj_decode(p, n, &list_body, NULL, out);
}

/* ---- subtrees ------------------------------------------------------------ */

int proto_tree_begin(struct buf *out)
{
	return buf_append_str(out, "{\"dirs\":[");
}

int proto_tree_dir(struct buf *out, bool first, const char *path,
		   const char *entries, size_t len)
{
	struct jw w;

	jw_begin_item(&w, out, first);
	jw_str(&w, "path", path);
	jw_raw(&w, "entries", "[");
	jw_append(&w, entries, len);
	jw_append(&w, "]", 1);
	return jw_end(&w);
}

int proto_tree_end(struct buf *out, bool complete)
{
	return buf_append_str(out, complete ? "],\"complete\":true}"
					    : "],\"complete\":false}");
}

void proto_tree_cleanup(struct proto_tree *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->ndirs; i++) {
		proto_dirents_free(t->dirs[i].entries, t->dirs[i].n);
		free(t->dirs[i].path);
	}
	free(t->dirs);
	memset(t, 0, sizeof(*t));
}

/* A subtree's members into t (proto_tree_decode). */
static int tree_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_tree *t = dst;
	const cJSON *dirs, *d;
	size_t total = 0;
	bool complete = false;
	int rc;

	rc = pj_array(root, "dirs", PROTO_EXT_TREE_MAX, sizeof(*t->dirs), &dirs,
		      (void **)&t->dirs);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(d, dirs)
	{
		struct proto_tree_dir *td = &t->dirs[t->ndirs];
		const cJSON *entries;
		const char *path;

		rc = pj_str(d, "path", true, &path);
		if (rc == 0 && !path_rel_valid(path))
			rc = -EINVAL;
		if (rc == 0)
			rc = pj_dup(path, &td->path);
		if (rc < 0)
			return rc;
		t->ndirs++;
		/* The entries of all the directories count against one
		 * bound. */
		rc = pj_array(d, "entries", PROTO_EXT_TREE_MAX - total,
			      sizeof(*td->entries), &entries,
			      (void **)&td->entries);
		if (rc < 0)
			return rc;
		total += (size_t)rc;
		rc = dirents_from_json(entries, td->entries, &td->n);
		if (rc < 0)
			return rc;
	}
	rc = pj_bool(root, "complete", true, &complete);
	if (rc < 0)
		return rc;
	t->complete = complete;
	return 0;
}

PJ_BODY(tree_body, struct proto_tree, pj_parse_strict, tree_fill,
	proto_tree_cleanup);

int proto_tree_decode(const char *p, size_t n, struct proto_tree *out)
{
	return pj_decode(p, n, &tree_body, NULL, out);
}

/* ---- operation bodies ---------------------------------------------------- */

enum {
	F_PATH = 1u << 0,
	F_FROM = 1u << 1,
	F_TO = 1u << 2,
	F_TARGET = 1u << 3,
	F_MODE = 1u << 4,
	F_SIZE = 1u << 5,
	F_EXCL = 1u << 6,
	F_TRUNC = 1u << 7,
	F_NOREPLACE = 1u << 8,
	F_EXCHANGE = 1u << 9,
	F_TIMES = 1u << 10,
	F_NOFOLLOW = 1u << 11,
};

static const struct op_spec {
	const char *op;
	unsigned required;
	unsigned optional;
} op_specs[] = {
	{"create", F_PATH | F_MODE, F_EXCL | F_TRUNC},
	{"mkdir", F_PATH | F_MODE, 0},
	{"unlink", F_PATH, 0},
	{"rmdir", F_PATH, 0},
	{"fsync", F_PATH, 0},
	{"rename", F_FROM | F_TO, F_NOREPLACE | F_EXCHANGE},
	{"link", F_FROM | F_TO, 0},
	{"symlink", F_PATH | F_TARGET, 0},
	{"chmod", F_PATH | F_MODE, 0},
	{"truncate", F_PATH | F_SIZE, 0},
	{"utimens", F_PATH, F_TIMES | F_NOFOLLOW},
};

static const struct op_spec *op_find(const char *op)
{
	size_t i;

	if (op == NULL)
		return NULL;
	for (i = 0; i < sizeof(op_specs) / sizeof(op_specs[0]); i++)
		if (strcmp(op_specs[i].op, op) == 0)
			return &op_specs[i];
	return NULL;
}

/* The boolean members a body carries only when true, each with the
 * bit that allows it and where it is in struct proto_ext_req, in the
 * order they are written (nofollow, written after the times, is apart). */
static const struct flag_member {
	unsigned bit;
	const char *key;
	size_t off;
} flag_members[] = {
	{F_EXCL, "exclusive", offsetof(struct proto_ext_req, exclusive)},
	{F_TRUNC, "truncate", offsetof(struct proto_ext_req, truncate)},
	{F_NOREPLACE, "noreplace", offsetof(struct proto_ext_req, noreplace)},
	{F_EXCHANGE, "exchange", offsetof(struct proto_ext_req, exchange)},
};

/* Write the flag members of r that want allows and that are true. */
static void flags_to_json(struct jw *w, unsigned want,
			  const struct proto_ext_req *r)
{
	const char *b = (const char *)r;
	size_t i;

	for (i = 0; i < NFIELDS(flag_members); i++)
		if ((want & flag_members[i].bit) &&
		    *(const bool *)(b + flag_members[i].off))
			jw_bool(w, flag_members[i].key, true);
}

/* Read the flag members that want allows into r (absent: untouched);
 * 0 or -EINVAL. */
static int flags_from_json(const cJSON *obj, unsigned want,
			   struct proto_ext_req *r)
{
	char *b = (char *)r;
	size_t i;
	int rc = 0;

	for (i = 0; i < NFIELDS(flag_members) && rc == 0; i++)
		if (want & flag_members[i].bit)
			rc = pj_opt_bool(obj, flag_members[i].key,
					 (bool *)(b + flag_members[i].off));
	return rc;
}

static void time_member(struct jw *w, const char *key,
			const struct proto_time *t)
{
	switch (t->how) {
	case PROTO_TIME_OMIT:
		break;
	case PROTO_TIME_NOW:
		jw_str(w, key, "now");
		break;
	case PROTO_TIME_SET: {
		struct jw inner;

		jw_raw(w, key, "");
		if (w->rc != 0)
			break;
		jw_begin(&inner, w->out);
		jw_i64(&inner, "sec", t->sec);
		jw_u64(&inner, "nsec", t->nsec);
		w->rc = jw_end(&inner);
		break;
	}
	}
}

int proto_ext_req_encode(const char *op, const struct proto_ext_req *r,
			 struct buf *out)
{
	const struct op_spec *spec = op_find(op);
	unsigned want;
	struct jw w;

	if (spec == NULL)
		return -EINVAL;
	want = spec->required | spec->optional;
	if (((spec->required & (F_PATH | F_FROM)) && r->path == NULL) ||
	    ((spec->required & F_TO) && r->to == NULL) ||
	    ((spec->required & F_TARGET) && r->target == NULL) ||
	    ((spec->required & F_MODE) && !r->has_mode) ||
	    ((spec->required & F_SIZE) && !r->has_size))
		return -EINVAL;
	if ((want & F_MODE) && r->mode > 07777)
		return -EINVAL;
	if ((want & F_TIMES) &&
	    ((r->atime.how == PROTO_TIME_SET && r->atime.nsec > 999999999) ||
	     (r->mtime.how == PROTO_TIME_SET && r->mtime.nsec > 999999999)))
		return -EINVAL;

	jw_begin(&w, out);
	jw_str(&w, (want & F_FROM) ? "from" : "path", r->path);
	if (want & F_TO)
		jw_str(&w, "to", r->to);
	if (want & F_TARGET)
		jw_str(&w, "target", r->target);
	if (want & F_MODE)
		jw_u64(&w, "mode", r->mode);
	if (want & F_SIZE)
		jw_u64(&w, "size", r->size);
	flags_to_json(&w, want, r);
	if (want & F_TIMES) {
		time_member(&w, "atime", &r->atime);
		time_member(&w, "mtime", &r->mtime);
	}
	if ((want & F_NOFOLLOW) && r->nofollow)
		jw_bool(&w, "nofollow", true);
	return jw_end(&w);
}

static int time_from_json(const cJSON *obj, const char *key,
			  struct proto_time *out)
{
	const cJSON *it = pj_member(obj, key);
	struct proto_time t = {PROTO_TIME_OMIT, 0, 0};
	int rc;

	if (it == NULL) {
		*out = t;
		return 0;
	}
	if (cJSON_IsString(it) && it->valuestring != NULL) {
		if (strcmp(it->valuestring, "now") == 0)
			t.how = PROTO_TIME_NOW;
		else if (strcmp(it->valuestring, "omit") != 0)
			return -EINVAL;
		*out = t;
		return 0;
	}
	if (!cJSON_IsObject(it))
		return -EINVAL;
	t.how = PROTO_TIME_SET;
	rc = pj_i64_exact(it, "sec", true, &t.sec);
	if (rc == 0) {
		rc = pj_u32_max(it, "nsec", false, 999999999, &t.nsec);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc < 0)
		return -EINVAL;
	*out = t;
	return 0;
}

/* The members of an operation body into r, as the op_spec at arg wants
 * them (proto_ext_req_decode); every failure but -ENOMEM is -EINVAL. */
static int ext_req_fill(const cJSON *root, void *dst, void *arg)
{
	const struct op_spec *spec = arg;
	struct proto_ext_req *r = dst;
	unsigned want = spec->required | spec->optional;
	int rc;

	if (want & F_FROM)
		rc = pj_str_dup(root, "from", true, &r->path);
	else
		rc = pj_str_dup(root, "path", true, &r->path);
	if (rc == 0 && (want & F_TO))
		rc = pj_str_dup(root, "to", true, &r->to);
	if (rc == 0 && (want & F_TARGET))
		rc = pj_str_dup(root, "target", true, &r->target);
	if (rc == 0 && (want & F_MODE)) {
		rc = pj_u32_max(root, "mode", spec->required & F_MODE, 07777,
				&r->mode);
		r->has_mode = rc == 0;
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0 && (want & F_SIZE)) {
		rc = pj_u64_exact(root, "size", spec->required & F_SIZE,
				  &r->size);
		r->has_size = rc == 0;
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0)
		rc = flags_from_json(root, want, r);
	if (rc == 0 && (want & F_NOFOLLOW))
		rc = pj_opt_bool(root, "nofollow", &r->nofollow);
	if (rc == 0 && (want & F_TIMES))
		rc = time_from_json(root, "atime", &r->atime);
	if (rc == 0 && (want & F_TIMES))
		rc = time_from_json(root, "mtime", &r->mtime);
	return rc == -ENOMEM || rc == 0 ? rc : -EINVAL;
}

PJ_BODY(ext_req_body, struct proto_ext_req, pj_parse_strict, ext_req_fill,
	proto_ext_req_cleanup);

int proto_ext_req_decode(const char *op, const char *p, size_t n,
			 struct proto_ext_req *out)
{
	const struct op_spec *spec = op_find(op);

	if (spec == NULL)
		return -EINVAL;
	return pj_decode(p, n, &ext_req_body, (void *)spec, out);
}

/* The heap strings of an operation body. */
static const size_t ext_req_strs[] = {
	offsetof(struct proto_ext_req, path),
	offsetof(struct proto_ext_req, to),
	offsetof(struct proto_ext_req, target),
};

void proto_ext_req_cleanup(struct proto_ext_req *r)
{
	if (r != NULL)
		pj_strs_free(r, ext_req_strs, NFIELDS(ext_req_strs));
}

/* ---- readlink and statfs ------------------------------------------------- */

int proto_target_encode(const char *target, struct buf *out)
{
	return pj_str_body_encode("target", target, out);
}

int proto_target_decode(const char *p, size_t n, char **target)
{
	return pj_str_body_decode(p, n, "target", target);
}

int proto_statfs_encode(const struct proto_statfs *s, struct buf *out)
{
	struct jw w;

	jw_begin(&w, out);
	nums_to_json(&w, statfs_fields, NFIELDS(statfs_fields), s);
	return jw_end(&w);
}

/* A statfs answer's members into s; every failure is -EINVAL. */
static int statfs_fill(const cJSON *root, void *dst, void *arg)
{
	int rc = nums_from_json(root, statfs_fields, NFIELDS(statfs_fields),
				dst);

	return rc < 0 ? -EINVAL : 0;
}

PJ_BODY_PLAIN(statfs_body, struct proto_statfs, pj_parse_strict, statfs_fill);

int proto_statfs_decode(const char *p, size_t n, struct proto_statfs *out)
{
	return pj_decode(p, n, &statfs_body, NULL, out);
}

/* ---- contents of a directory's small files -------------------------------- */

int proto_contents_add(struct buf *out, const char *name,
		       const struct proto_attr *a, const void *data, size_t len)
{
	size_t start = out->len;
	int rc;

	if (a->size != len)
		return -EINVAL;
	rc = proto_attr_encode(a, name, NULL, out);
	if (rc == 0)
		rc = buf_append(out, "\n", 1);
	if (rc == 0 && len > 0)
		rc = buf_append(out, data, len);
	if (rc != 0)
		pj_rollback(out, start);
	return rc;
}

int proto_contents_head(const char *p, size_t n, struct proto_dirent *ent,
			size_t *head)
{
	size_t scan = n < PROTO_EXT_CONTENTS_LINE_MAX + 1
			      ? n
			      : PROTO_EXT_CONTENTS_LINE_MAX + 1;
	const char *nl = memchr(p, '\n', scan);
	cJSON *root;
	int rc = 0;

	if (nl == NULL)
		return n > PROTO_EXT_CONTENTS_LINE_MAX ? -EINVAL : 0;
	root = pj_parse_strict(p, (size_t)(nl - p), &rc);
	if (root == NULL)
		return rc;
	rc = dirent_from_json(root, ent);
	cJSON_Delete(root);
	if (rc < 0)
		return rc;
	if (ent->attr.type != PROTO_FT_FILE || ent->target != NULL) {
		free(ent->name);
		free(ent->target);
		ent->name = ent->target = NULL;
		return -EINVAL;
	}
	*head = (size_t)(nl - p) + 1;
	return 1;
}

int proto_contents_next(const char *p, size_t n, size_t *pos,
			struct proto_dirent *ent, const char **data)
{
	size_t head = 0;
	int rc;

	if (*pos >= n)
		return 0;
	rc = proto_contents_head(p + *pos, n - *pos, ent, &head);
	if (rc == 0)
		return -EINVAL; /* a line cut short */
	if (rc < 0)
		return rc;
	if (ent->attr.size > n - *pos - head) {
		free(ent->name);
		ent->name = NULL;
		return -EINVAL;
	}
	*data = p + *pos + head;
	*pos += head + (size_t)ent->attr.size;
	return 1;
}
