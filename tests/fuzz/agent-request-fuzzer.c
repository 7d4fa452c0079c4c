/* SPDX-License-Identifier: MIT */
/*
 * agent-request-fuzzer: everything sandbox-agent decodes from a request
 * before it touches the filesystem or runs a command: path normalisation,
 * the v1 file bodies, the command and job bodies, and the file
 * extension's metadata bodies for every operation. The same input goes to
 * each decoder. Besides not crashing or leaking, a normalised path must
 * obey the rules the confined resolver relies on, and a decoded body must
 * survive encode-then-decode unchanged.
 *
 * Built as a libFuzzer target with --enable-fuzzing. Otherwise the same
 * file is linked with the main() of replay.c, which runs every file of the
 * corpus as a `make check` test.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/proto_files.h"
#include "tests/fuzz/replay.h"

/* Its corpus, and the name in FAIL's messages (replay.h). */
const char fuzz_corpus[] = "agent-request";

static const char *const ext_ops[] = {
	"truncate", "create",  "mkdir", "unlink",  "rmdir", "rename",
	"link",	    "symlink", "chmod", "utimens", "fsync",
};

/* What the resolver assumes of a normalised path: relative, no empty,
 * "." or ".." component, no NUL, and normalising it again changes
 * nothing. */
static void check_path(const char *in, size_t n, bool allow_root)
{
	char out[PATH_MAX_BYTES + 1], again[PATH_MAX_BYTES + 1];
	enum path_verdict v;
	const char *c;
	size_t len;

	v = path_normalize(in, n, allow_root, out, sizeof(out));
	if (v != PATH_OK)
		return;
	len = strlen(out);
	if (len == 0 && !allow_root)
		FAIL("the root passed without allow_root");
	if (len > n)
		FAIL("normalising made a path longer");
	if (out[0] == '/' || (len > 0 && out[len - 1] == '/'))
		FAIL("a normalised path starts or ends with '/'");
	if (strstr(out, "//") != NULL)
		FAIL("a normalised path has an empty component");
	for (c = out; *c != '\0'; c += strcspn(c, "/"), c += *c == '/') {
		size_t cl = strcspn(c, "/");

		if ((cl == 1 && c[0] == '.') ||
		    (cl == 2 && c[0] == '.' && c[1] == '.'))
			FAIL("a normalised path has a '.' or '..' component");
	}
	/* (An empty input is refused even where the root is allowed: the
	 * root is spelt "/" or "."; so only a non-empty result is fed
	 * back.) */
	if (len > 0 && (path_normalize(out, len, allow_root, again,
				       sizeof(again)) != PATH_OK ||
			strcmp(out, again) != 0))
		FAIL("normalising twice changes the path");
}

static void check_file_write(const char *p, size_t n)
{
	struct proto_file_write w, w2;
	struct buf b = BUF_INIT(0);
	char why[96];
	int rc;

	rc = proto_file_write_decode_why(p, n, &w, why, sizeof(why));
	if (rc == -EILSEQ && why[0] == '\0')
		FAIL("bad base64 without a reason");
	if (rc < 0)
		return;
	if (w.len > PROTO_MAX_TRANSFER_BYTES)
		FAIL("a write over the transfer limit decoded");
	if (proto_file_write_encode(w.path, w.data, w.len, &b) < 0)
		FAIL("a decoded write does not encode");
	if (proto_file_write_decode(b.data, b.len, &w2) < 0)
		FAIL("an encoded write does not decode");
	if (strcmp(w.path, w2.path) != 0 || w.len != w2.len ||
	    (w.len > 0 && memcmp(w.data, w2.data, w.len) != 0))
		FAIL("a write changed through encode and decode");
	proto_file_write_cleanup(&w2);
	proto_file_write_cleanup(&w);
	buf_cleanup(&b);
}

static void check_path_body(const char *p, size_t n)
{
	struct buf b = BUF_INIT(0);
	char *path = NULL, *again = NULL;

	if (proto_path_decode(p, n, &path) < 0)
		return;
	if (proto_path_encode(path, &b) < 0 ||
	    proto_path_decode(b.data, b.len, &again) < 0 ||
	    strcmp(path, again) != 0)
		FAIL("a path body changed through encode and decode");
	/* The path goes on to the lexical rules. */
	check_path(path, strlen(path), false);
	free(path);
	free(again);
	buf_cleanup(&b);
}

static void check_contents(const char *p, size_t n)
{
	struct buf content = BUF_INIT(1024 * 1024);
	struct buf enc = BUF_INIT(0), again = BUF_INIT(1024 * 1024);

	if (proto_file_contents_decode(p, n, &content) < 0)
		goto out;
	if (proto_file_contents_encode(content.data, content.len, &enc) < 0 ||
	    proto_file_contents_decode(enc.data, enc.len, &again) < 0 ||
	    again.len != content.len ||
	    (content.len > 0 &&
	     memcmp(again.data, content.data, content.len) != 0))
		FAIL("contents changed through encode and decode");
out:
	buf_cleanup(&content);
	buf_cleanup(&enc);
	buf_cleanup(&again);
}

static void check_exec(const char *p, size_t n)
{
	struct proto_exec_req r;
	struct proto_job_poll_req poll;
	char job[PROTO_JOB_ID_MAX + 1];
	size_t i;

	if (proto_exec_req_decode(p, n, &r) == 0) {
		(void)proto_exec_req_validate(&r);
		for (i = 0; i < r.argc; i++)
			if (r.argv[i] == NULL)
				FAIL("argc counts a NULL argument");
		if (r.argv[r.argc] != NULL)
			FAIL("argv is not NULL-terminated");
		proto_exec_req_cleanup(&r);
	}
	if (proto_job_poll_req_decode(p, n, &poll) == 0 &&
	    strlen(poll.job_id) > PROTO_JOB_ID_MAX)
		FAIL("a job id over the bound decoded");
	if (proto_job_id_decode(p, n, job) == 0 &&
	    strlen(job) > PROTO_JOB_ID_MAX)
		FAIL("a job id over the bound decoded");
}

static void check_ext(const char *p, size_t n)
{
	struct proto_ext_req r;
	size_t i;

	for (i = 0; i < sizeof(ext_ops) / sizeof(ext_ops[0]); i++) {
		if (proto_ext_req_decode(ext_ops[i], p, n, &r) < 0)
			continue;
		if (r.path != NULL)
			check_path(r.path, strlen(r.path), true);
		if (r.to != NULL)
			check_path(r.to, strlen(r.to), true);
		proto_ext_req_cleanup(&r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;

	/* The input as a query path (raw bytes, NUL included). */
	check_path(p, size, false);
	check_path(p, size, true);
	/* The input as a request body. */
	check_path_body(p, size);
	check_file_write(p, size);
	check_contents(p, size);
	check_exec(p, size);
	check_ext(p, size);
	return 0;
}
