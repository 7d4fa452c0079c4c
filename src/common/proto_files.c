/* SPDX-License-Identifier: MIT */
/*
 * proto_files: the v1 file bodies (doc/protocol-v1.md 3.3-3.5): the read answer
 * {"contentsBase64"}, the write body {"path","contentsBase64"} and the
 * {"path"} body. The file extension's half of proto_files.h lives in
 * proto_ext.c and (its change events) proto_events.c.
 *
 * Whole-file contents are up to 32 MiB, so the base64 string is written by
 * hand around the encoder instead of through a cJSON string node (which
 * would copy and scan 44 MB once more); base64 never needs JSON escaping.
 * Decoding goes through cJSON like every other body.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/b64.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/proto_i.h"

static const char contents_head[] = "{\"contentsBase64\":\"";
static const char contents_tail[] = "\"}";

static bool b64_alpha(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '+' || c == '/';
}

/*
 * Say why s[n] is not strict base64, in the words of the base64 crate the
 * original agent reports with (the client only tests the code prefix).
 */
static void b64_why(const char *s, size_t n, char *why, size_t whysz)
{
	size_t i, pad = 0;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (b64_alpha(c) && pad == 0)
			continue;
		if (c == '=' && n % 4 == 0 && i >= n - 2) {
			pad++;
			continue;
		}
		snprintf(why, whysz, "Invalid symbol %u, offset %zu.", c, i);
		return;
	}
	if (n % 4 == 1) {
		snprintf(why, whysz, "Invalid input length: %zu", n);
		return;
	}
	if (n % 4 != 0 || (pad == 1 && s[n - 2] == '=')) {
		snprintf(why, whysz, "Invalid padding");
		return;
	}
	/* Only the unused low bits of the last symbol are left to blame. */
	i = n - pad - 1;
	snprintf(why, whysz, "Invalid last symbol %u, offset %zu.",
		 (unsigned char)s[i], i);
}

/* Append the base64 of data[n] to out as the JSON string value. */
static int append_b64(struct buf *out, const void *data, size_t n)
{
	size_t elen = b64_encoded_len(n);
	int err = 0;
	char *p = buf_reserve(out, elen, &err);

	if (p == NULL)
		return err;
	b64_encode(data, n, p);
	buf_commit(out, elen);
	return 0;
}

size_t proto_file_contents_size(size_t n)
{
	return sizeof(contents_head) - 1 + b64_encoded_len(n) +
	       sizeof(contents_tail) - 1;
}

int proto_file_contents_begin(struct buf *out)
{
	return buf_append_str(out, contents_head);
}

int proto_file_contents_add(struct buf *out, const void *data, size_t n)
{
	return n == 0 ? 0 : append_b64(out, data, n);
}

int proto_file_contents_end(struct buf *out)
{
	return buf_append_str(out, contents_tail);
}

int proto_file_contents_encode(const void *data, size_t n, struct buf *out)
{
	size_t mark = out->len;
	int err = 0, rc;

	/* One allocation for the whole answer. */
	if (buf_reserve(out, proto_file_contents_size(n), &err) == NULL)
		return err;
	rc = proto_file_contents_begin(out);
	if (rc == 0)
		rc = proto_file_contents_add(out, data, n);
	if (rc == 0)
		rc = proto_file_contents_end(out);
	if (rc < 0)
		pj_rollback(out, mark);
	return rc;
}

/* The contentsBase64 member of the body p[0..n) parsed as root (borrowed
 * from the tree); a text holding an escaped NUL is refused with bad. */
static int contents_member(const cJSON *root, const char *p, size_t n, int bad,
			   const char **s)
{
	int rc = pj_str(root, "contentsBase64", true, s);

	if (rc == 0 && pj_has_nul_escape(p, n))
		rc = bad;
	return rc;
}

int proto_file_contents_decode(const char *p, size_t n, struct buf *content)
{
	const char *s;
	cJSON *root;
	size_t slen, mark = content->len;
	long got;
	char *dst;
	int err = 0, rc;

	root = pj_parse_object(p, n, &err);
	if (root == NULL)
		return err;
	rc = contents_member(root, p, n, -EILSEQ, &s);
	if (rc < 0)
		goto out;
	slen = strlen(s);
	if (slen == 0) {
		rc = 0;
		goto out;
	}
	if (slen % 4 != 0) {
		rc = -EILSEQ;
		goto out;
	}
	/* Reserve for the upper bound, then trim to what decoded: a body
	 * that would pass content's max is refused before decoding. */
	dst = buf_reserve(content, b64_decoded_max(slen), &err);
	if (dst == NULL) {
		rc = err;
		goto out;
	}
	got = b64_decode(s, slen, dst);
	if (got < 0) {
		rc = -EILSEQ;
		goto out;
	}
	buf_commit(content, (size_t)got);
	rc = 0;
out:
	if (rc < 0 && content->len != mark)
		pj_rollback(content, mark);
	cJSON_Delete(root);
	return rc;
}

int proto_file_write_encode(const char *path, const void *data, size_t n,
			    struct buf *out)
{
	struct jw w;
	int err = 0;

	if (buf_reserve(out, strlen(path) * 6 + b64_encoded_len(n) + 40,
			&err) == NULL)
		return err;
	/* The writer rolls out back to where it began on failure. */
	jw_begin(&w, out);
	jw_str(&w, "path", path);
	jw_raw(&w, "contentsBase64", "\"");
	if (w.rc == 0)
		w.rc = append_b64(out, data, n);
	jw_append(&w, "\"", 1);
	return jw_end(&w);
}

int proto_file_write_decode_why(const char *p, size_t n,
				struct proto_file_write *out, char *why,
				size_t whysz)
{
	struct proto_file_write w = {NULL, NULL, 0};
	const char *path, *s;
	size_t slen;
	cJSON *root;
	long got;
	int err = 0, rc;

	root = pj_parse_object(p, n, &err);
	if (root == NULL)
		return err;
	rc = pj_str(root, "path", true, &path);
	if (rc == 0)
		rc = contents_member(root, p, n, -EINVAL, &s);
	if (rc < 0)
		goto out;
	slen = strlen(s);
	if (slen > 0) {
		w.data = malloc(b64_decoded_max(slen) + 1);
		if (w.data == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		got = slen % 4 == 0 ? b64_decode(s, slen, w.data) : -EINVAL;
		if (got < 0) {
			if (why != NULL && whysz > 0)
				b64_why(s, slen, why, whysz);
			rc = -EILSEQ;
			goto out;
		}
		w.len = (size_t)got;
	}
	if (w.len > PROTO_MAX_TRANSFER_BYTES) {
		/* The one out-param a failure writes: the size, for the
		 * "N bytes exceeds" message. */
		out->len = w.len;
		rc = -EFBIG;
		goto out;
	}
	rc = pj_dup(path, &w.path);
	if (rc < 0)
		goto out;
	*out = w;
	w.data = NULL;
	w.path = NULL;
out:
	free(w.data);
	free(w.path);
	cJSON_Delete(root);
	return rc;
}

int proto_file_write_decode(const char *p, size_t n,
			    struct proto_file_write *out)
{
	return proto_file_write_decode_why(p, n, out, NULL, 0);
}

void proto_file_write_cleanup(struct proto_file_write *w)
{
	if (w == NULL)
		return;
	free(w->path);
	free(w->data);
	memset(w, 0, sizeof(*w));
}

int proto_path_encode(const char *path, struct buf *out)
{
	return pj_str_body_encode("path", path, out);
}

int proto_path_decode(const char *p, size_t n, char **path)
{
	return pj_str_body_decode(p, n, "path", path);
}
