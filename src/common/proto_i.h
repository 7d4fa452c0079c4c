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

#endif
