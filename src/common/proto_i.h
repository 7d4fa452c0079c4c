/* SPDX-License-Identifier: MIT */
/*
 * proto_i: helpers private to the proto_*.c files, the only code that sees
 * cJSON. Each returns 0 or a negative errno as proto.h describes.
 */
#ifndef SBFS_PROTO_I_H
#define SBFS_PROTO_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/buf.h"

/* Parse exactly n bytes as one JSON value (trailing whitespace allowed).
 * NULL with *err = -EBADMSG or -ENOMEM. */
cJSON *pj_parse(const char *p, size_t n, int *err);
/* Parse and require an object at the top. */
cJSON *pj_parse_object(const char *p, size_t n, int *err);

/* Field readers. A field that is absent (or JSON null where nullable) is
 * -ENOENT when !required, -EINVAL when required; a field of the wrong type
 * is -EINVAL. String results are borrowed from the tree. */
int pj_str(const cJSON *obj, const char *key, bool required, const char **out);
int pj_u64(const cJSON *obj, const char *key, bool required, uint64_t *out);
int pj_i64(const cJSON *obj, const char *key, bool required, int64_t *out);
int pj_bool(const cJSON *obj, const char *key, bool required, bool *out);
/* A number that must be integral and within [lo, hi]. */
int pj_num_range(const cJSON *item, double lo, double hi, double *out);

/* Render a tree into out (appended, unformatted), then delete nothing. */
int pj_print(const cJSON *item, struct buf *out);

/* Copy a borrowed string to the heap; NULL stays NULL. -ENOMEM. */
int pj_dup(const char *s, char **out);

/* The array member key of obj, with a zeroed vector of as many elements
 * of elemsz bytes (*v, NULL for none; the caller frees it). Returns the
 * count, -EINVAL when the member is not an array, -EFBIG when it holds
 * more than max elements, -ENOMEM. */
int pj_array(const cJSON *obj, const char *key, size_t max, size_t elemsz,
	     const cJSON **arr, void **v);

/* The number of elements of a static array (a table of fields). */
#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* Free the heap pointers (char or unsigned char) at byte offsets
 * offs[0..noffs) of the struct at s and set them to NULL. */
void pj_strs_free(void *s, const size_t *offs, size_t noffs);
/* Set the strings at offs[0..noffs) of dst to heap copies of src's (NULL
 * stays NULL). On -ENOMEM the ones not copied are NULL, so dst's strings
 * can be freed with pj_strs_free either way. */
int pj_strs_dup(void *dst, const void *src, const size_t *offs, size_t noffs);
/* Free the heap strings at offs[0..noffs) of each of the n elements of v
 * (elemsz bytes apart), then v itself. NULL-safe. */
void pj_vec_free(void *v, size_t n, size_t elemsz, const size_t *offs,
		 size_t noffs);

/* Take out back to len bytes (a failed encode leaves no half text). */
void pj_rollback(struct buf *out, size_t len);

/* ---- the decoding of one body ------------------------------------------- */

/*
 * What pj_decode does for one kind of body: parse is pj_parse_object,
 * pj_parse_strict or one of the caller's; fill reads the tree into a
 * zeroed struct of size bytes (arg is the caller's, NULL when it needs
 * none) and returns 0 or a negative errno; cleanup (NULL when there is
 * nothing to free) frees what a failed fill left in the struct.
 * Declare one with PJ_BODY or PJ_BODY_PLAIN.
 */
struct pj_body {
	cJSON *(*parse)(const char *p, size_t n, int *err);
	int (*fill)(const cJSON *root, void *dst, void *arg);
	void (*cleanup)(void *dst);
	size_t size;
};

/* The largest struct a body is decoded into (pj_decode works on a copy
 * of that size on its stack; the macros below check each at build). */
#define PJ_BODY_MAX 1024

/* static const struct pj_body name, for a body decoded into a type that
 * holds nothing to free. */
#define PJ_BODY_PLAIN(name, type, parse_fn, fill_fn)                 \
	static const struct pj_body name = {parse_fn, fill_fn, NULL, \
					    sizeof(type)};           \
	_Static_assert(sizeof(type) <= PJ_BODY_MAX, #type " fits PJ_BODY_MAX")

/* The same for a type freed by cleanup_fn(type *): a function
 * name_cleanup calls it on what a failed fill left. */
#define PJ_BODY(name, type, parse_fn, fill_fn, cleanup_fn)                     \
	static void name##_cleanup(void *dst)                                  \
	{                                                                      \
		cleanup_fn((type *)dst);                                       \
	}                                                                      \
	static const struct pj_body name = {parse_fn, fill_fn, name##_cleanup, \
					    sizeof(type)};                     \
	_Static_assert(sizeof(type) <= PJ_BODY_MAX, #type " fits PJ_BODY_MAX")

/* Decode p[0..n) as b says: the parse's or the fill's error, or 0 with
 * the struct in out. The tree is deleted either way; out is written
 * only on success (the fill works on a copy), and what a failed fill
 * left is freed (b->cleanup). */
int pj_decode(const char *p, size_t n, const struct pj_body *b, void *arg,
	      void *out);

/* The member key of obj, NULL when it is absent or JSON null. */
const cJSON *pj_member(const cJSON *obj, const char *key);

/* ---- a small JSON writer ------------------------------------------------- */

/*
 * Appends members to an object being written into a buf, integers exact
 * (a value a JSON double cannot hold is written as a string of digits,
 * doc/protocol-ext.md). The first error sticks (later calls do nothing),
 * and jw_end() rolls the buf back to where the writer started, so a
 * failed encode leaves the caller's text intact.
 */
struct jw {
	struct buf *out;
	size_t start;
	bool first;
	int rc;
};

void jw_begin(struct jw *w, struct buf *out);
/* The same for an element of an array: a comma first unless first (a
 * failed element is rolled back with its comma). */
void jw_begin_item(struct jw *w, struct buf *out, bool first);
void jw_u64(struct jw *w, const char *key, uint64_t v);
void jw_i64(struct jw *w, const char *key, int64_t v);
void jw_str(struct jw *w, const char *key, const char *s);
void jw_bool(struct jw *w, const char *key, bool v);
/* key and text as they are (a nested value, "" to start one). */
void jw_raw(struct jw *w, const char *key, const char *text);
/* len bytes of text as they are, inside a value jw_raw began. */
void jw_append(struct jw *w, const char *text, size_t len);
/* The closing brace; the writer's result (0 or the first error). */
int jw_end(struct jw *w);

/* ---- the file extension's decoding rules (doc/protocol-ext.md) --------- */

/* Whether the text holds the escape \u0000 inside a string: cJSON would
 * cut the C string there ("a\u0000/../x" would become "a"). */
bool pj_has_nul_escape(const char *p, size_t n);
/* pj_parse_object, and -EINVAL for text with an escaped NUL. */
cJSON *pj_parse_strict(const char *p, size_t n, int *err);
/* Integer fields given as a JSON number or a string of digits ("-?digits"
 * for the signed one); the u32 one at most max. */
int pj_u64_exact(const cJSON *obj, const char *key, bool required,
		 uint64_t *out);
int pj_i64_exact(const cJSON *obj, const char *key, bool required,
		 int64_t *out);
int pj_u32_max(const cJSON *obj, const char *key, bool required, uint32_t max,
	       uint32_t *out);
/* The same of an item already found (NULL or null: absent). */
int pj_item_u64_exact(const cJSON *it, bool required, uint64_t *out);
int pj_item_i64_exact(const cJSON *it, bool required, int64_t *out);
int pj_item_u32_max(const cJSON *it, bool required, uint32_t max,
		    uint32_t *out);
/* A string member copied to the heap; absent (or null) is -EINVAL when
 * required, else 0 with *out untouched. */
int pj_str_dup(const cJSON *obj, const char *key, bool required, char **out);
/* A body of one string member, {"<key>":"<s>"} (rolled back on failure),
 * and its decoding: the text is strict (pj_parse_strict), the member is
 * required and copied to the heap, *out written only on success. */
int pj_str_body_encode(const char *key, const char *s, struct buf *out);
int pj_str_body_decode(const char *p, size_t n, const char *key, char **out);
/* An optional string member of at most max bytes (-EFBIG past it),
 * copied to the heap; absent (or null) is 0 with *out untouched. */
int pj_opt_str_max(const cJSON *obj, const char *key, size_t max, char **out);
/* An optional boolean: absent (or null) is 0 with *out untouched. */
int pj_opt_bool(const cJSON *obj, const char *key, bool *out);

/* ---- shared by the command and job bodies (proto_exec.c, proto_jobs.c) - */

/* An integral number within int32_t; -EINVAL otherwise (NULL too). */
int pj_i32(const cJSON *item, int32_t *out);

/* A JSON array of strings as a NULL-terminated vector of heap copies.
 * *out and *n hold what was copied so far even on failure (free with
 * strv_free). -EINVAL when a is not an array of strings, too_many
 * when it has more than max elements, -ENOMEM. */
int pj_str_array(const cJSON *a, size_t max, int too_many, char ***out,
		 size_t *n);
/* Append v[0..n) as a JSON array of strings; with names, each element up
 * to its first '=' (the name of a KEY=VALUE entry). */
int pj_put_strs(struct buf *out, char *const *v, size_t n, bool names);

/* The members "code":...,"message":... of an error (NULL is ""). */
int pj_put_error(struct buf *out, const char *code, const char *message);
/* The code and message of an error object, as heap copies (written only
 * on success). -EINVAL when e is not an object with both strings. */
int pj_error(const cJSON *e, char **code, char **message);

/* A frame's JSON object, without a newline (proto_exec.c), and a frame
 * object decoded: every failure is -EBADMSG (or -ENOMEM). Shared with the
 * poll answers (proto_jobs.c). */
struct proto_frame;
int pj_frame_json(const struct proto_frame *f, struct buf *out);
int pj_frame_from_json(const cJSON *obj, struct proto_frame *out);
/* Free the frames v[0..n) and v. NULL-safe. */
void pj_frames_free(struct proto_frame *v, size_t n);

#endif
