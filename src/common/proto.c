/* SPDX-License-Identifier: MIT */
/*
 * proto: shared JSON helpers (proto_i.h), the health answer and typed error
 * bodies. cJSON is used here and in the other proto_*.c files only.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errname.h"
#include "common/proto.h"
#include "common/proto_i.h"

/* ---- helpers ---------------------------------------------------------- */

cJSON *pj_parse(const char *p, size_t n, int *err)
{
	const char *end = NULL;
	cJSON *root;

	if (p == NULL || n == 0) {
		*err = -EBADMSG;
		return NULL;
	}
	root = cJSON_ParseWithLengthOpts(p, n, &end, 0);
	if (root == NULL) {
		*err = -EBADMSG;
		return NULL;
	}
	while (end != NULL && end < p + n && isspace((unsigned char)*end))
		end++;
	/* cJSON stops at a NUL; anything left over is not one JSON value. */
	if (end == NULL || end != p + n) {
		cJSON_Delete(root);
		*err = -EBADMSG;
		return NULL;
	}
	return root;
}

cJSON *pj_parse_object(const char *p, size_t n, int *err)
{
	cJSON *root = pj_parse(p, n, err);

	if (root != NULL && !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		*err = -EINVAL;
		return NULL;
	}
	return root;
}

const cJSON *pj_member(const cJSON *obj, const char *key)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNull(it) ? NULL : it;
}

int pj_decode(const char *p, size_t n, const struct pj_body *b, void *arg,
	      void *out)
{
	union {
		max_align_t align;
		unsigned char bytes[PJ_BODY_MAX];
	} tmp;
	cJSON *root;
	int rc = 0;

	if (b->size > sizeof(tmp))
		return -EOVERFLOW; /* a body not declared by PJ_BODY */
	root = b->parse(p, n, &rc);
	if (root == NULL)
		return rc;
	memset(&tmp, 0, b->size);
	rc = b->fill(root, &tmp, arg);
	cJSON_Delete(root);
	if (rc < 0) {
		if (b->cleanup != NULL)
			b->cleanup(&tmp);
		return rc;
	}
	memcpy(out, &tmp, b->size);
	return 0;
}

int pj_str(const cJSON *obj, const char *key, bool required, const char **out)
{
	const cJSON *it = pj_member(obj, key);

	if (it == NULL)
		return required ? -EINVAL : -ENOENT;
	if (!cJSON_IsString(it) || it->valuestring == NULL)
		return -EINVAL;
	*out = it->valuestring;
	return 0;
}

int pj_num_range(const cJSON *item, double lo, double hi, double *out)
{
	double v;

	if (!cJSON_IsNumber(item))
		return -EINVAL;
	v = item->valuedouble;
	if (!isfinite(v) || v != floor(v) || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A number item (NULL: absent): a whole non-negative or signed value. */
static int item_u64(const cJSON *it, bool required, uint64_t *out)
{
	double v;

	if (it == NULL)
		return required ? -EINVAL : -ENOENT;
	if (!cJSON_IsNumber(it))
		return -EINVAL;
	v = it->valuedouble;
	if (!isfinite(v) || v < 0 || v != floor(v))
		return -EINVAL;
	/* Clients saturate at u64::MAX, which a double cannot hold exactly. */
	*out = v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
	return 0;
}

static int item_i64(const cJSON *it, bool required, int64_t *out)
{
	double v;
	int rc;

	if (it == NULL)
		return required ? -EINVAL : -ENOENT;
	rc = pj_num_range(it, -9223372036854775808.0, 9223372036854775807.0,
			  &v);
	if (rc < 0)
		return rc;
	*out = v >= 9223372036854775807.0 ? INT64_MAX : (int64_t)v;
	return 0;
}

int pj_u64(const cJSON *obj, const char *key, bool required, uint64_t *out)
{
	return item_u64(pj_member(obj, key), required, out);
}

int pj_i64(const cJSON *obj, const char *key, bool required, int64_t *out)
{
	return item_i64(pj_member(obj, key), required, out);
}

int pj_bool(const cJSON *obj, const char *key, bool required, bool *out)
{
	const cJSON *it = pj_member(obj, key);

	if (it == NULL)
		return required ? -EINVAL : -ENOENT;
	if (!cJSON_IsBool(it))
		return -EINVAL;
	*out = cJSON_IsTrue(it);
	return 0;
}

int pj_print(const cJSON *item, struct buf *out)
{
	char *s = cJSON_PrintUnformatted(item);
	int rc;

	if (s == NULL)
		return -ENOMEM;
	rc = buf_append_str(out, s);
	cJSON_free(s);
	return rc;
}

int pj_dup(const char *s, char **out)
{
	if (s == NULL) {
		*out = NULL;
		return 0;
	}
	*out = strdup(s);
	return *out == NULL ? -ENOMEM : 0;
}

int pj_i32(const cJSON *item, int32_t *out)
{
	double v;
	int rc = pj_num_range(item, INT32_MIN, INT32_MAX, &v);

	if (rc == 0)
		*out = (int32_t)v;
	return rc;
}

/* The pointer member at byte offset off of s, read and written through
 * memcpy: a char or unsigned char pointer has void *'s representation. */
static void *member_get(const void *s, size_t off)
{
	void *p;

	memcpy(&p, (const char *)s + off, sizeof(p));
	return p;
}

static void member_set(void *s, size_t off, void *p)
{
	memcpy((char *)s + off, &p, sizeof(p));
}

void pj_strs_free(void *s, const size_t *offs, size_t noffs)
{
	size_t j;

	for (j = 0; j < noffs; j++) {
		free(member_get(s, offs[j]));
		member_set(s, offs[j], NULL);
	}
}

int pj_strs_dup(void *dst, const void *src, const size_t *offs, size_t noffs)
{
	char *copy = NULL;
	size_t j;
	int rc = 0;

	for (j = 0; j < noffs; j++)
		member_set(dst, offs[j], NULL);
	for (j = 0; rc == 0 && j < noffs; j++) {
		rc = pj_dup(member_get(src, offs[j]), &copy);
		member_set(dst, offs[j], copy);
	}
	return rc;
}

void pj_vec_free(void *v, size_t n, size_t elemsz, const size_t *offs,
		 size_t noffs)
{
	char *elem = v;
	size_t i;

	for (i = 0; elem != NULL && i < n; i++, elem += elemsz)
		pj_strs_free(elem, offs, noffs);
	free(v);
}

int pj_str_array(const cJSON *a, size_t max, int too_many, char ***out,
		 size_t *n)
{
	const cJSON *it;
	size_t count = 0;
	char **v;

	if (!cJSON_IsArray(a))
		return -EINVAL;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsString(it) || it->valuestring == NULL)
			return -EINVAL;
		count++;
	}
	if (count > max)
		return too_many;
	v = calloc(count + 1, sizeof(*v));
	if (v == NULL)
		return -ENOMEM;
	*out = v;
	*n = 0;
	cJSON_ArrayForEach(it, a)
	{
		v[*n] = strdup(it->valuestring);
		if (v[*n] == NULL)
			return -ENOMEM;
		(*n)++;
	}
	return 0;
}

int pj_put_strs(struct buf *out, char *const *v, size_t n, bool names)
{
	size_t i;
	int rc = buf_append_str(out, "[");

	for (i = 0; rc == 0 && i < n; i++) {
		char *name = NULL;

		if (i > 0)
			rc = buf_append_str(out, ",");
		if (rc == 0 && names) {
			name = strndup(v[i], strcspn(v[i], "="));
			if (name == NULL)
				return -ENOMEM;
		}
		if (rc == 0)
			rc = proto_json_string(out, names ? name : v[i]);
		free(name);
	}
	if (rc == 0)
		rc = buf_append_str(out, "]");
	return rc;
}

int pj_put_error(struct buf *out, const char *code, const char *message)
{
	int rc = buf_append_str(out, "\"code\":");

	if (rc == 0)
		rc = proto_json_string(out, code != NULL ? code : "");
	if (rc == 0)
		rc = buf_append_str(out, ",\"message\":");
	if (rc == 0)
		rc = proto_json_string(out, message != NULL ? message : "");
	return rc;
}

int pj_error(const cJSON *e, char **code, char **message)
{
	const char *c, *m;
	char *cc = NULL, *mm = NULL;
	int rc;

	if (!cJSON_IsObject(e) || pj_str(e, "code", true, &c) < 0 ||
	    pj_str(e, "message", true, &m) < 0)
		return -EINVAL;
	rc = pj_dup(c, &cc);
	if (rc == 0)
		rc = pj_dup(m, &mm);
	if (rc < 0) {
		free(cc);
		return rc;
	}
	*code = cc;
	*message = mm;
	return 0;
}

bool proto_client_id_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];

		if (i == PROTO_CLIENT_ID_MAX ||
		    !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return i > 0;
}

int proto_json_string(struct buf *out, const char *s)
{
	cJSON *str = cJSON_CreateString(s);
	int rc;

	if (str == NULL)
		return -ENOMEM;
	rc = pj_print(str, out);
	cJSON_Delete(str);
	return rc;
}

/* ---- a small JSON writer (proto_i.h) ------------------------------------ */

/* Largest integer a JSON double holds exactly: 2^53 - 1. */
#define EXACT_MAX 9007199254740991LL

void jw_begin(struct jw *w, struct buf *out)
{
	jw_begin_item(w, out, true);
}

void jw_begin_item(struct jw *w, struct buf *out, bool first)
{
	w->out = out;
	w->start = out->len;
	w->first = true;
	w->rc = first ? 0 : buf_append(out, ",", 1);
	if (w->rc == 0)
		w->rc = buf_append(out, "{", 1);
}

static void jw_key(struct jw *w, const char *key)
{
	size_t n = strlen(key);

	if (w->rc == 0 && !w->first)
		w->rc = buf_append(w->out, ",", 1);
	w->first = false;
	/* Keys are the program's own names: nothing to escape. */
	if (w->rc == 0)
		w->rc = buf_append(w->out, "\"", 1);
	if (w->rc == 0)
		w->rc = buf_append(w->out, key, n);
	if (w->rc == 0)
		w->rc = buf_append(w->out, "\":", 2);
}

/* v in decimal, with a minus sign when neg, quoted when quote (a JSON
 * double would not hold it exactly): no printf, a listing writes
 * sixteen of these per entry. */
static void jw_decimal(struct jw *w, uint64_t v, bool neg, bool quote)
{
	char tmp[24], *p = tmp + sizeof(tmp);

	if (quote)
		*--p = '"';
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	if (neg)
		*--p = '-';
	if (quote)
		*--p = '"';
	w->rc = buf_append(w->out, p, (size_t)(tmp + sizeof(tmp) - p));
}

void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	if (w->rc == 0)
		jw_decimal(w, v, false, v > (uint64_t)EXACT_MAX);
}

void jw_i64(struct jw *w, const char *key, int64_t v)
{
	/* The magnitude, INT64_MIN's too. */
	uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	jw_key(w, key);
	if (w->rc == 0)
		jw_decimal(w, mag, v<0, v> EXACT_MAX || v < -EXACT_MAX);
}

void jw_str(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	if (w->rc == 0)
		w->rc = proto_json_string(w->out, s);
}

void jw_bool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	if (w->rc == 0)
		w->rc = buf_append_str(w->out, v ? "true" : "false");
}

void jw_raw(struct jw *w, const char *key, const char *text)
{
	jw_key(w, key);
	jw_append(w, text, strlen(text));
}

void jw_append(struct jw *w, const char *text, size_t len)
{
	if (w->rc == 0)
		w->rc = buf_append(w->out, text, len);
}

void pj_rollback(struct buf *out, size_t len)
{
	out->len = len;
	if (out->data != NULL)
		out->data[len] = '\0';
}

int jw_end(struct jw *w)
{
	if (w->rc == 0)
		w->rc = buf_append(w->out, "}", 1);
	if (w->rc != 0)
		pj_rollback(w->out, w->start);
	return w->rc;
}

/* ---- integers and strings of the file extension (proto_i.h) ------------- */

/*
 * True when the JSON text holds the escape \u0000 inside a string. cJSON
 * would decode it into a C string cut at the NUL, so "a\u0000/../x" would
 * silently become "a"; refusing is the only honest answer.
 */
bool pj_has_nul_escape(const char *p, size_t n)
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

cJSON *pj_parse_strict(const char *p, size_t n, int *err)
{
	cJSON *root = pj_parse_object(p, n, err);

	if (root != NULL && pj_has_nul_escape(p, n)) {
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
int pj_u64_exact(const cJSON *obj, const char *key, bool required,
		 uint64_t *out)
{
	return pj_item_u64_exact(pj_member(obj, key), required, out);
}

int pj_item_u64_exact(const cJSON *it, bool required, uint64_t *out)
{
	if (it == NULL || cJSON_IsNull(it))
		return item_u64(NULL, required, out);
	if (cJSON_IsString(it) && it->valuestring != NULL)
		return digits_u64(it->valuestring, out);
	return item_u64(it, required, out);
}

/* A signed integer field: a JSON number or a string "-?digits". */
int pj_i64_exact(const cJSON *obj, const char *key, bool required, int64_t *out)
{
	return pj_item_i64_exact(pj_member(obj, key), required, out);
}

int pj_item_i64_exact(const cJSON *it, bool required, int64_t *out)
{
	uint64_t mag;
	bool neg;
	int rc;

	if (it == NULL || cJSON_IsNull(it))
		return item_i64(NULL, required, out);
	if (!cJSON_IsString(it) || it->valuestring == NULL)
		return item_i64(it, required, out);
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

int pj_u32_max(const cJSON *obj, const char *key, bool required, uint32_t max,
	       uint32_t *out)
{
	return pj_item_u32_max(pj_member(obj, key), required, max, out);
}

int pj_item_u32_max(const cJSON *it, bool required, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int rc = pj_item_u64_exact(it, required, &v);

	if (rc < 0)
		return rc;
	if (v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int pj_str_dup(const cJSON *obj, const char *key, bool required, char **out)
{
	const char *s;
	int rc = pj_str(obj, key, required, &s);

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	return pj_dup(s, out);
}

int pj_str_body_encode(const char *key, const char *s, struct buf *out)
{
	struct jw w;

	jw_begin(&w, out);
	jw_str(&w, key, s);
	return jw_end(&w);
}

int pj_str_body_decode(const char *p, size_t n, const char *key, char **out)
{
	char *s = NULL;
	int rc = 0;
	cJSON *root = pj_parse_strict(p, n, &rc);

	if (root == NULL)
		return rc;
	rc = pj_str_dup(root, key, true, &s);
	cJSON_Delete(root);
	if (rc == 0)
		*out = s;
	return rc;
}

int pj_opt_str_max(const cJSON *obj, const char *key, size_t max, char **out)
{
	const char *s;
	int rc = pj_str(obj, key, false, &s);

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if (strlen(s) > max)
		return -EFBIG;
	return pj_dup(s, out);
}

int pj_opt_bool(const cJSON *obj, const char *key, bool *out)
{
	int rc = pj_bool(obj, key, false, out);

	return rc == -ENOENT ? 0 : rc;
}

int pj_array(const cJSON *obj, const char *key, size_t max, size_t elemsz,
	     const cJSON **arr, void **v)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
	void *elems = NULL;
	int count;

	if (!cJSON_IsArray(a))
		return -EINVAL;
	count = cJSON_GetArraySize(a);
	if ((size_t)count > max)
		return -EFBIG;
	if (count > 0) {
		elems = calloc((size_t)count, elemsz);
		if (elems == NULL)
			return -ENOMEM;
	}
	*arr = a;
	*v = elems;
	return count;
}

/* ---- health ----------------------------------------------------------- */

int proto_health_encode(const struct proto_health *h, struct buf *out)
{
	cJSON *root = cJSON_CreateObject(), *img, *ext;
	int rc = -ENOMEM;

	if (root == NULL)
		return -ENOMEM;
	if (cJSON_AddNumberToObject(root, "protocolVersion",
				    (double)h->protocol_version) == NULL ||
	    cJSON_AddStringToObject(root, "bootId", h->boot_id) == NULL ||
	    cJSON_AddStringToObject(root, "status", h->status) == NULL)
		goto out;
	img = cJSON_AddObjectToObject(root, "imageCommand");
	if (img == NULL ||
	    cJSON_AddStringToObject(img, "status", h->image_status) == NULL)
		goto out;
	if (h->ext_files > 0 || h->ext_reply_cache > 0) {
		ext = cJSON_AddObjectToObject(root, "extensions");
		if (ext == NULL)
			goto out;
		if (h->ext_files > 0 &&
		    cJSON_AddNumberToObject(ext, PROTO_EXT_FILES,
					    (double)h->ext_files) == NULL)
			goto out;
		if (h->ext_max_write > 0 &&
		    cJSON_AddNumberToObject(ext, "maxWrite",
					    (double)h->ext_max_write) == NULL)
			goto out;
		if (h->ext_has_ids &&
		    (cJSON_AddNumberToObject(ext, "uid", (double)h->ext_uid) ==
			     NULL ||
		     cJSON_AddNumberToObject(ext, "gid", (double)h->ext_gid) ==
			     NULL))
			goto out;
		if (h->ext_owner_access &&
		    cJSON_AddBoolToObject(ext, "ownerAccess", 1) == NULL)
			goto out;
		if (h->ext_reply_cache > 0 &&
		    cJSON_AddNumberToObject(ext, PROTO_EXT_REPLY_CACHE,
					    (double)h->ext_reply_cache) == NULL)
			goto out;
		if (h->ext_jobs > 0 &&
		    cJSON_AddNumberToObject(ext, PROTO_EXT_JOBS,
					    (double)h->ext_jobs) == NULL)
			goto out;
		if (h->ext_jobs > 0 && h->ext_max_running > 0 &&
		    cJSON_AddNumberToObject(ext, "maxRunningJobs",
					    (double)h->ext_max_running) == NULL)
			goto out;
		if ((h->ext_events > 0 || h->ext_events_why[0] != '\0') &&
		    cJSON_AddNumberToObject(ext, PROTO_EXT_EVENTS,
					    (double)h->ext_events) == NULL)
			goto out;
		if (h->ext_events_why[0] != '\0' &&
		    cJSON_AddStringToObject(ext, "eventsUnavailable",
					    h->ext_events_why) == NULL)
			goto out;
	}
	rc = pj_print(root, out);
out:
	cJSON_Delete(root);
	return rc;
}

static void copy_str(char *dst, size_t dstsz, const char *src)
{
	snprintf(dst, dstsz, "%s", src ? src : "");
}

/* A health answer's members into h; what is missing or odd stays zero
 * (proto_health_decode). */
static int health_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_health *h = dst;
	const cJSON *it, *img, *ext;
	const char *s;

	it = cJSON_GetObjectItemCaseSensitive(root, "protocolVersion");
	if (cJSON_IsNumber(it) && it->valuedouble >= 0 &&
	    it->valuedouble < 1e9 && it->valuedouble == floor(it->valuedouble))
		h->protocol_version = (long)it->valuedouble;
	if (pj_str(root, "status", false, &s) == 0)
		copy_str(h->status, sizeof(h->status), s);
	if (pj_str(root, "bootId", false, &s) == 0)
		copy_str(h->boot_id, sizeof(h->boot_id), s);
	img = cJSON_GetObjectItemCaseSensitive(root, "imageCommand");
	if (cJSON_IsObject(img) && pj_str(img, "status", false, &s) == 0)
		copy_str(h->image_status, sizeof(h->image_status), s);
	ext = cJSON_GetObjectItemCaseSensitive(root, "extensions");
	if (cJSON_IsObject(ext)) {
		uint64_t v, u, g;

		if (pj_u64(ext, PROTO_EXT_FILES, false, &v) == 0 && v < 1000)
			h->ext_files = (long)v;
		if (pj_u64(ext, "maxWrite", false, &v) == 0)
			h->ext_max_write = v;
		if (pj_u64(ext, "uid", false, &u) == 0 && u < UINT32_MAX &&
		    pj_u64(ext, "gid", false, &g) == 0 && g < UINT32_MAX) {
			h->ext_has_ids = true;
			h->ext_uid = (uint32_t)u;
			h->ext_gid = (uint32_t)g;
		}
		h->ext_owner_access = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(ext, "ownerAccess"));
		if (pj_u64(ext, PROTO_EXT_REPLY_CACHE, false, &v) == 0 &&
		    v < 1000)
			h->ext_reply_cache = (long)v;
		if (pj_u64(ext, PROTO_EXT_JOBS, false, &v) == 0 && v < 1000)
			h->ext_jobs = (long)v;
		if (pj_u64(ext, "maxRunningJobs", false, &v) == 0)
			h->ext_max_running = v;
		if (pj_u64(ext, PROTO_EXT_EVENTS, false, &v) == 0 && v < 1000)
			h->ext_events = (long)v;
		if (pj_str(ext, "eventsUnavailable", false, &s) == 0)
			copy_str(h->ext_events_why, sizeof(h->ext_events_why),
				 s);
	}
	return 0;
}

PJ_BODY_PLAIN(health_body, struct proto_health, pj_parse_object, health_fill);

int proto_health_decode(const char *p, size_t n, struct proto_health *out)
{
	return pj_decode(p, n, &health_body, NULL, out);
}

bool proto_health_ready(const struct proto_health *h)
{
	return h->protocol_version == PROTO_VERSION &&
	       strcmp(h->status, PROTO_STATUS_READY) == 0 &&
	       strcmp(h->image_status, "failed") != 0;
}

/* ---- typed errors ----------------------------------------------------- */

bool proto_error_code(const char *body, size_t n, char *code, size_t codesz)
{
	size_t i;

	if (codesz > 0)
		code[0] = '\0';
	for (i = 0; i < n; i++) {
		char c = body[i];

		if (c == ':')
			break;
		if (!(isupper((unsigned char)c) || isdigit((unsigned char)c) ||
		      c == '_'))
			return false;
	}
	if (i == 0 || i == n || i >= codesz)
		return false;
	memcpy(code, body, i);
	code[i] = '\0';
	return true;
}

int proto_error_fs_errno(const char *body, size_t n)
{
	static const char prefix[] = PROTO_ERR_FS ": ";
	char name[32];
	size_t i, start = sizeof(prefix) - 1;

	if (n < start || memcmp(body, prefix, start) != 0)
		return 0;
	for (i = start; i < n && i - start < sizeof(name) - 1; i++) {
		if (body[i] == ':')
			break;
		name[i - start] = body[i];
	}
	name[i - start] = '\0';
	return errname_to_errno(name);
}
