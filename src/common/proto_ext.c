/* SPDX-License-Identifier: MIT */
/*
 * proto_ext: the JSON of the sandboxfs file extension (doc/protocol-ext.md):
 * attributes, directory pages, the bodies of the metadata operations, the
 * readlink and statfs answers, and the content validator (ETag).
 *
 * Encoders write JSON text directly into a struct buf (a listing page is
 * built entry by entry, without a tree, and integers are written exactly);
 * decoders parse with cJSON and copy into the structs of proto_files.h.
 * Nothing here touches the filesystem or HTTP: the agent's ext.c and the
 * client's transport do that.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/proto_i.h"
#include "common/xalloc.h"

/* Largest integer a JSON double holds exactly: 2^53 - 1. */
#define EXACT_MAX 9007199254740991LL

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

/* ---- a small JSON writer ------------------------------------------------- */

/*
 * Appends members to an object being written into a buf. The first error
 * sticks (later calls do nothing), and jw_end() rolls the buf back to where
 * the writer started, so a failed encode leaves the caller's text intact.
 */
struct jw {
	struct buf *out;
	size_t start;
	bool first;
	int rc;
};

static void jw_begin(struct jw *w, struct buf *out)
{
	w->out = out;
	w->start = out->len;
	w->first = true;
	w->rc = buf_append(out, "{", 1);
}

static void jw_key(struct jw *w, const char *key)
{
	if (w->rc == 0 && !w->first)
		w->rc = buf_append(w->out, ",", 1);
	w->first = false;
	if (w->rc == 0)
		w->rc = buf_printf(w->out, "\"%s\":", key);
}

static void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	if (w->rc != 0)
		return;
	if (v <= (uint64_t)EXACT_MAX)
		w->rc = buf_printf(w->out, "%" PRIu64, v);
	else
		w->rc = buf_printf(w->out, "\"%" PRIu64 "\"", v);
}

static void jw_i64(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	if (w->rc != 0)
		return;
	if (v <= EXACT_MAX && v >= -EXACT_MAX)
		w->rc = buf_printf(w->out, "%" PRId64, v);
	else
		w->rc = buf_printf(w->out, "\"%" PRId64 "\"", v);
}

static void jw_str(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	if (w->rc == 0)
		w->rc = proto_json_string(w->out, s);
}

static void jw_bool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	if (w->rc == 0)
		w->rc = buf_append_str(w->out, v ? "true" : "false");
}

static void jw_raw(struct jw *w, const char *key, const char *text)
{
	jw_key(w, key);
	if (w->rc == 0)
		w->rc = buf_append_str(w->out, text);
}

static void rollback(struct buf *out, size_t len)
{
	out->len = len;
	if (out->data != NULL)
		out->data[len] = '\0';
}

static int jw_end(struct jw *w)
{
	if (w->rc == 0)
		w->rc = buf_append(w->out, "}", 1);
	if (w->rc != 0)
		rollback(w->out, w->start);
	return w->rc;
}

/* ---- decoding helpers ---------------------------------------------------- */

/*
 * True when the JSON text holds the escape \u0000 inside a string. cJSON
 * would decode it into a C string cut at the NUL, so "a\u0000/../x" would
 * silently become "a"; refusing is the only honest answer.
 */
static bool has_nul_escape(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i++) {
		if (p[i] != '\\')
			continue;
		if (p[i + 1] == 'u' && i + 5 < n &&
		    memcmp(p + i + 2, "0000", 4) == 0)
			return true;
		i++; /* the escaped character cannot start another escape */
	}
	return false;
}

static cJSON *parse_object(const char *p, size_t n, int *err)
{
	cJSON *root = pj_parse_object(p, n, err);

	if (root != NULL && has_nul_escape(p, n)) {
		cJSON_Delete(root);
		*err = -EINVAL;
		return NULL;
	}
	return root;
}

/* Digits only, no sign or space; the result must fit in a u64. */
static int digits_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0' || strlen(s) > 20)
		return -EINVAL;
	for (; *s; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* An unsigned integer field: a JSON number or a string of digits. */
static int get_u64(const cJSON *obj, const char *key, bool required,
		   uint64_t *out)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (cJSON_IsString(it) && it->valuestring != NULL)
		return digits_u64(it->valuestring, out);
	return pj_u64(obj, key, required, out);
}

/* A signed integer field: a JSON number or a string "-?digits". */
static int get_i64(const cJSON *obj, const char *key, bool required,
		   int64_t *out)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	uint64_t mag;
	bool neg;
	int rc;

	if (!cJSON_IsString(it) || it->valuestring == NULL)
		return pj_i64(obj, key, required, out);
	neg = it->valuestring[0] == '-';
	rc = digits_u64(it->valuestring + neg, &mag);
	if (rc < 0)
		return rc;
	if (neg) {
		if (mag > (uint64_t)INT64_MAX + 1)
			return -EINVAL;
		*out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN
						      : -(int64_t)mag;
	} else {
		if (mag > (uint64_t)INT64_MAX)
			return -EINVAL;
		*out = (int64_t)mag;
	}
	return 0;
}

static int get_u32(const cJSON *obj, const char *key, bool required,
		   uint32_t max, uint32_t *out)
{
	uint64_t v;
	int rc = get_u64(obj, key, required, &v);

	if (rc < 0)
		return rc;
	if (v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* ---- attributes ---------------------------------------------------------- */

static void attr_members(struct jw *w, const struct proto_attr *a)
{
	jw_str(w, "type", proto_ftype_name(a->type));
	jw_u64(w, "mode", a->perm & 07777);
	jw_u64(w, "size", a->size);
	jw_u64(w, "nlink", a->nlink);
	jw_u64(w, "uid", a->uid);
	jw_u64(w, "gid", a->gid);
	jw_u64(w, "ino", a->ino);
	jw_u64(w, "blocks", a->blocks);
	jw_u64(w, "rdev", a->rdev);
	jw_i64(w, "atime", a->atime);
	jw_u64(w, "atimeNsec", a->atime_ns);
	jw_i64(w, "mtime", a->mtime);
	jw_u64(w, "mtimeNsec", a->mtime_ns);
	jw_i64(w, "ctime", a->ctime);
	jw_u64(w, "ctimeNsec", a->ctime_ns);
}

int proto_attr_encode(const struct proto_attr *a, const char *name,
		      const char *target, struct buf *out)
{
	struct jw w;

	jw_begin(&w, out);
	if (name != NULL)
		jw_str(&w, "name", name);
	attr_members(&w, a);
	if (target != NULL)
		jw_str(&w, "target", target);
	return jw_end(&w);
}

static int attr_from_json(const cJSON *obj, struct proto_attr *out)
{
	struct proto_attr a;
	const char *type;
	int rc;

	if (!cJSON_IsObject(obj))
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	rc = pj_str(obj, "type", true, &type);
	if (rc == 0) {
		a.type = proto_ftype_from_name(type);
		rc = get_u32(obj, "mode", true, 07777, &a.perm);
	}
	if (rc == 0)
		rc = get_u64(obj, "size", true, &a.size);
	if (rc == 0)
		rc = get_u64(obj, "nlink", true, &a.nlink);
	if (rc == 0)
		rc = get_u32(obj, "uid", true, UINT32_MAX, &a.uid);
	if (rc == 0)
		rc = get_u32(obj, "gid", true, UINT32_MAX, &a.gid);
	if (rc == 0)
		rc = get_u64(obj, "ino", true, &a.ino);
	if (rc == 0)
		rc = get_u64(obj, "blocks", true, &a.blocks);
	if (rc == 0)
		rc = get_u64(obj, "rdev", true, &a.rdev);
	if (rc == 0)
		rc = get_i64(obj, "atime", true, &a.atime);
	if (rc == 0)
		rc = get_u32(obj, "atimeNsec", true, 999999999, &a.atime_ns);
	if (rc == 0)
		rc = get_i64(obj, "mtime", true, &a.mtime);
	if (rc == 0)
		rc = get_u32(obj, "mtimeNsec", true, 999999999, &a.mtime_ns);
	if (rc == 0)
		rc = get_i64(obj, "ctime", true, &a.ctime);
	if (rc == 0)
		rc = get_u32(obj, "ctimeNsec", true, 999999999, &a.ctime_ns);
	if (rc < 0)
		return -EINVAL;
	*out = a;
	return 0;
}

/* An optional string member copied to the heap (NULL when absent). */
static int opt_dup(const cJSON *obj, const char *key, char **out)
{
	const char *s;
	int rc = pj_str(obj, key, false, &s);

	if (rc == -ENOENT) {
		*out = NULL;
		return 0;
	}
	if (rc < 0)
		return rc;
	return pj_dup(s, out);
}

int proto_attr_decode(const char *p, size_t n, struct proto_attr *out,
		      char **target)
{
	struct proto_attr a;
	char *t = NULL;
	cJSON *root;
	int rc = 0;

	root = parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	rc = attr_from_json(root, &a);
	if (rc == 0 && target != NULL)
		rc = opt_dup(root, "target", &t);
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
	size_t start = out->len;
	int rc = 0;

	if (!first)
		rc = buf_append(out, ",", 1);
	if (rc == 0)
		rc = proto_attr_encode(a, name, target, out);
	if (rc != 0)
		rollback(out, start);
	return rc;
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
		rollback(out, start);
	return rc;
}

void proto_list_cleanup(struct proto_list *l)
{
	size_t i;

	if (l == NULL)
		return;
	for (i = 0; i < l->n; i++) {
		free(l->entries[i].name);
		free(l->entries[i].target);
	}
	free(l->entries);
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
		rc = opt_dup(obj, "target", &d.target);
	if (rc < 0) {
		free(d.name);
		return rc;
	}
	*out = d;
	return 0;
}

int proto_list_decode(const char *p, size_t n, struct proto_list *out)
{
	struct proto_list l;
	const cJSON *entries, *it;
	const char *next;
	cJSON *root;
	int rc = 0, count;

	memset(&l, 0, sizeof(l));
	root = parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	entries = cJSON_GetObjectItemCaseSensitive(root, "entries");
	if (!cJSON_IsArray(entries)) {
		rc = -EINVAL;
		goto out;
	}
	count = cJSON_GetArraySize(entries);
	if (count > PROTO_EXT_LIST_MAX) {
		rc = -EFBIG;
		goto out;
	}
	if (count > 0) {
		l.entries = calloc((size_t)count, sizeof(*l.entries));
		if (l.entries == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	cJSON_ArrayForEach(it, entries)
	{
		rc = dirent_from_json(it, &l.entries[l.n]);
		if (rc < 0)
			goto out;
		l.n++;
	}
	rc = pj_str(root, "next", false, &next);
	if (rc == 0) {
		if (*next == '\0' || strlen(next) > 64) {
			rc = -EINVAL;
			goto out;
		}
		rc = pj_dup(next, &l.next);
	} else if (rc == -ENOENT) {
		rc = 0;
	}
out:
	cJSON_Delete(root);
	if (rc < 0) {
		proto_list_cleanup(&l);
		return rc;
	}
	*out = l;
	return 0;
}

/* ---- subtrees ------------------------------------------------------------ */

int proto_tree_begin(struct buf *out)
{
	return buf_append_str(out, "{\"dirs\":[");
}

int proto_tree_dir(struct buf *out, bool first, const char *path,
		   const char *entries, size_t len)
{
	size_t start = out->len;
	int rc = 0;

	if (!first)
		rc = buf_append(out, ",", 1);
	if (rc == 0)
		rc = buf_append_str(out, "{\"path\":");
	if (rc == 0)
		rc = proto_json_string(out, path);
	if (rc == 0)
		rc = buf_append_str(out, ",\"entries\":[");
	if (rc == 0)
		rc = buf_append(out, entries, len);
	if (rc == 0)
		rc = buf_append_str(out, "]}");
	if (rc != 0)
		rollback(out, start);
	return rc;
}

int proto_tree_end(struct buf *out, bool complete)
{
	return buf_append_str(out, complete ? "],\"complete\":true}"
					    : "],\"complete\":false}");
}

void proto_tree_cleanup(struct proto_tree *t)
{
	size_t i, j;

	if (t == NULL)
		return;
	for (i = 0; i < t->ndirs; i++) {
		for (j = 0; j < t->dirs[i].n; j++) {
			free(t->dirs[i].entries[j].name);
			free(t->dirs[i].entries[j].target);
		}
		free(t->dirs[i].entries);
		free(t->dirs[i].path);
	}
	free(t->dirs);
	memset(t, 0, sizeof(*t));
}

/* A relative path the client may key a cache by: "" or components that
 * are each valid names. */
static bool tree_path_valid(const char *p)
{
	char comp[256];

	while (*p != '\0') {
		size_t n = strcspn(p, "/");

		if (n == 0 || n >= sizeof(comp))
			return false;
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (!path_component_valid(comp))
			return false;
		p += n;
		if (*p == '/')
			p++;
		if (*p == '\0' && p[-1] == '/')
			return false;
	}
	return true;
}

int proto_tree_decode(const char *p, size_t n, struct proto_tree *out)
{
	struct proto_tree t;
	const cJSON *dirs, *d;
	size_t total = 0;
	cJSON *root;
	int rc = 0, count;
	bool complete = false;

	memset(&t, 0, sizeof(t));
	root = parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	dirs = cJSON_GetObjectItemCaseSensitive(root, "dirs");
	if (!cJSON_IsArray(dirs)) {
		rc = -EINVAL;
		goto out;
	}
	count = cJSON_GetArraySize(dirs);
	if (count > PROTO_EXT_TREE_MAX) {
		rc = -EFBIG;
		goto out;
	}
	if (count > 0) {
		t.dirs = calloc((size_t)count, sizeof(*t.dirs));
		if (t.dirs == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	cJSON_ArrayForEach(d, dirs)
	{
		struct proto_tree_dir *td = &t.dirs[t.ndirs];
		const cJSON *entries, *it;
		const char *path;
		int ne;

		rc = pj_str(d, "path", true, &path);
		if (rc < 0)
			goto out;
		if (!tree_path_valid(path)) {
			rc = -EINVAL;
			goto out;
		}
		entries = cJSON_GetObjectItemCaseSensitive(d, "entries");
		if (!cJSON_IsArray(entries)) {
			rc = -EINVAL;
			goto out;
		}
		ne = cJSON_GetArraySize(entries);
		total += (size_t)ne;
		if (total > PROTO_EXT_TREE_MAX) {
			rc = -EFBIG;
			goto out;
		}
		rc = pj_dup(path, &td->path);
		if (rc < 0)
			goto out;
		t.ndirs++;
		if (ne > 0) {
			td->entries = calloc((size_t)ne, sizeof(*td->entries));
			if (td->entries == NULL) {
				rc = -ENOMEM;
				goto out;
			}
		}
		cJSON_ArrayForEach(it, entries)
		{
			rc = dirent_from_json(it, &td->entries[td->n]);
			if (rc < 0)
				goto out;
			td->n++;
		}
	}
	rc = pj_bool(root, "complete", true, &complete);
	if (rc < 0)
		goto out;
	t.complete = complete;
out:
	cJSON_Delete(root);
	if (rc < 0) {
		proto_tree_cleanup(&t);
		return rc;
	}
	*out = t;
	return 0;
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
	if ((want & F_EXCL) && r->exclusive)
		jw_bool(&w, "exclusive", true);
	if ((want & F_TRUNC) && r->truncate)
		jw_bool(&w, "truncate", true);
	if ((want & F_NOREPLACE) && r->noreplace)
		jw_bool(&w, "noreplace", true);
	if ((want & F_EXCHANGE) && r->exchange)
		jw_bool(&w, "exchange", true);
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
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	struct proto_time t = {PROTO_TIME_OMIT, 0, 0};
	int rc;

	if (it == NULL || cJSON_IsNull(it)) {
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
	rc = get_i64(it, "sec", true, &t.sec);
	if (rc == 0) {
		rc = get_u32(it, "nsec", false, 999999999, &t.nsec);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc < 0)
		return -EINVAL;
	*out = t;
	return 0;
}

/* A string member copied to the heap; absent is -EINVAL when required,
 * else *out stays NULL. */
static int str_field(const cJSON *obj, const char *key, bool required,
		     char **out)
{
	const char *s;
	int rc = pj_str(obj, key, required, &s);

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	return pj_dup(s, out);
}

static int bool_field(const cJSON *obj, const char *key, bool *out)
{
	int rc = pj_bool(obj, key, false, out);

	return rc == -ENOENT ? 0 : rc;
}

int proto_ext_req_decode(const char *op, const char *p, size_t n,
			 struct proto_ext_req *out)
{
	const struct op_spec *spec = op_find(op);
	struct proto_ext_req r;
	unsigned want;
	cJSON *root;
	int rc = 0;

	if (spec == NULL)
		return -EINVAL;
	root = parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	memset(&r, 0, sizeof(r));
	want = spec->required | spec->optional;
	if (want & F_FROM)
		rc = str_field(root, "from", true, &r.path);
	else
		rc = str_field(root, "path", true, &r.path);
	if (rc == 0 && (want & F_TO))
		rc = str_field(root, "to", true, &r.to);
	if (rc == 0 && (want & F_TARGET))
		rc = str_field(root, "target", true, &r.target);
	if (rc == 0 && (want & F_MODE)) {
		rc = get_u32(root, "mode", spec->required & F_MODE, 07777,
			     &r.mode);
		r.has_mode = rc == 0;
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0 && (want & F_SIZE)) {
		rc = get_u64(root, "size", spec->required & F_SIZE, &r.size);
		r.has_size = rc == 0;
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0 && (want & F_EXCL))
		rc = bool_field(root, "exclusive", &r.exclusive);
	if (rc == 0 && (want & F_TRUNC))
		rc = bool_field(root, "truncate", &r.truncate);
	if (rc == 0 && (want & F_NOREPLACE))
		rc = bool_field(root, "noreplace", &r.noreplace);
	if (rc == 0 && (want & F_EXCHANGE))
		rc = bool_field(root, "exchange", &r.exchange);
	if (rc == 0 && (want & F_NOFOLLOW))
		rc = bool_field(root, "nofollow", &r.nofollow);
	if (rc == 0 && (want & F_TIMES))
		rc = time_from_json(root, "atime", &r.atime);
	if (rc == 0 && (want & F_TIMES))
		rc = time_from_json(root, "mtime", &r.mtime);
	cJSON_Delete(root);
	if (rc < 0) {
		proto_ext_req_cleanup(&r);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	*out = r;
	return 0;
}

void proto_ext_req_cleanup(struct proto_ext_req *r)
{
	if (r == NULL)
		return;
	free(r->path);
	free(r->to);
	free(r->target);
	r->path = r->to = r->target = NULL;
}

/* ---- readlink and statfs ------------------------------------------------- */

int proto_target_encode(const char *target, struct buf *out)
{
	struct jw w;

	jw_begin(&w, out);
	jw_str(&w, "target", target);
	return jw_end(&w);
}

int proto_target_decode(const char *p, size_t n, char **target)
{
	char *t = NULL;
	cJSON *root;
	int rc = 0;

	root = parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	rc = str_field(root, "target", true, &t);
	cJSON_Delete(root);
	if (rc < 0)
		return rc;
	*target = t;
	return 0;
}

int proto_statfs_encode(const struct proto_statfs *s, struct buf *out)
{
	struct jw w;

	jw_begin(&w, out);
	jw_u64(&w, "bsize", s->bsize);
	jw_u64(&w, "frsize", s->frsize);
	jw_u64(&w, "blocks", s->blocks);
	jw_u64(&w, "bfree", s->bfree);
	jw_u64(&w, "bavail", s->bavail);
	jw_u64(&w, "files", s->files);
	jw_u64(&w, "ffree", s->ffree);
	jw_u64(&w, "namemax", s->namemax);
	return jw_end(&w);
}

int proto_statfs_decode(const char *p, size_t n, struct proto_statfs *out)
{
	struct proto_statfs s;
	cJSON *root;
	int rc = 0;

	root = parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	rc = get_u64(root, "bsize", true, &s.bsize);
	if (rc == 0)
		rc = get_u64(root, "frsize", true, &s.frsize);
	if (rc == 0)
		rc = get_u64(root, "blocks", true, &s.blocks);
	if (rc == 0)
		rc = get_u64(root, "bfree", true, &s.bfree);
	if (rc == 0)
		rc = get_u64(root, "bavail", true, &s.bavail);
	if (rc == 0)
		rc = get_u64(root, "files", true, &s.files);
	if (rc == 0)
		rc = get_u64(root, "ffree", true, &s.ffree);
	if (rc == 0)
		rc = get_u64(root, "namemax", true, &s.namemax);
	cJSON_Delete(root);
	if (rc < 0)
		return -EINVAL;
	*out = s;
	return 0;
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
		rollback(out, start);
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
	root = parse_object(p, (size_t)(nl - p), &rc);
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
		rollback(out, start);
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
	size_t start = out->len;
	struct jw w;
	int rc = 0;

	if (!first)
		rc = buf_append(out, ",", 1);
	if (rc != 0)
		return rc;
	jw_begin(&w, out);
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
	rc = jw_end(&w);
	if (rc != 0)
		rollback(out, start);
	return rc;
}

int proto_events_end(struct buf *out, uint64_t next, const char *unavailable)
{
	size_t start = out->len;
	struct jw w = {out, start, false, 0};

	w.rc = buf_append(out, "]", 1);
	jw_u64(&w, "next", next);
	if (unavailable != NULL)
		jw_str(&w, "unavailable", unavailable);
	return jw_end(&w);
}

void proto_events_cleanup(struct proto_events *e)
{
	size_t i;

	if (e == NULL)
		return;
	for (i = 0; i < e->n; i++) {
		free(e->ev[i].path);
		free(e->ev[i].to);
	}
	free(e->ev);
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
	if (s[0] != '/' || strlen(s) > PATH_MAX_BYTES ||
	    !tree_path_valid(s + 1))
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
	rc = get_u64(obj, "seq", true, &e.seq);
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
	if (rc == 0) {
		rc = pj_bool(obj, "dir", false, &e.dir);
		if (rc == -ENOENT)
			rc = 0;
	}
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

int proto_events_decode(const char *p, size_t n, struct proto_events *out)
{
	struct proto_events r;
	const cJSON *events, *it;
	const char *s;
	cJSON *root;
	bool lost = false;
	int rc = 0, count;

	memset(&r, 0, sizeof(r));
	if (n > PROTO_EXT_EVENTS_MAX_BYTES)
		return -EPROTO;
	root = parse_object(p, n, &rc);
	if (root == NULL)
		return rc == -ENOMEM ? rc : -EPROTO;
	rc = pj_str(root, "bootId", true, &s);
	if (rc == 0 && strlen(s) >= sizeof(r.boot_id))
		rc = -EINVAL;
	if (rc < 0)
		goto out;
	strlcpy_s(r.boot_id, s, sizeof(r.boot_id));
	rc = get_u64(root, "next", true, &r.next);
	if (rc < 0)
		goto out;
	rc = pj_str(root, "unavailable", false, &s);
	if (rc == 0)
		strlcpy_s(r.unavailable, s, sizeof(r.unavailable));
	else if (rc != -ENOENT)
		goto out;
	rc = 0;
	events = cJSON_GetObjectItemCaseSensitive(root, "events");
	if (!cJSON_IsArray(events)) {
		rc = -EINVAL;
		goto out;
	}
	count = cJSON_GetArraySize(events);
	if (count > PROTO_EXT_EVENTS_MAX) {
		rc = -EFBIG;
		goto out;
	}
	if (count > 0) {
		r.ev = calloc((size_t)count, sizeof(*r.ev));
		if (r.ev == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	cJSON_ArrayForEach(it, events)
	{
		struct proto_event *e = &r.ev[r.n];

		rc = event_from_json(it, e);
		if (rc < 0)
			goto out;
		r.n++;
		/* In order, and none past the point the answer says it has
		 * reached: a client resumes from next. */
		if ((r.n > 1 && e->seq <= e[-1].seq) || e->seq > r.next) {
			rc = -EINVAL;
			goto out;
		}
		if (e->type == PROTO_EV_LOST)
			lost = true;
	}
	/* A lost event makes every other one moot: the client forgets all. */
	if (lost || r.unavailable[0] != '\0') {
		size_t i;

		for (i = 0; i < r.n; i++) {
			free(r.ev[i].path);
			free(r.ev[i].to);
		}
		free(r.ev);
		r.ev = NULL;
		r.n = 0;
		r.lost = true;
	}
out:
	cJSON_Delete(root);
	if (rc < 0) {
		proto_events_cleanup(&r);
		return rc == -ENOMEM ? rc : -EPROTO;
	}
	*out = r;
	return 0;
}
