/* SPDX-License-Identifier: MIT */
/*
 * files: the v1 file routes (doc/protocol-v1.md 3.3-3.5 and 5): GET /v1/files
 * reads a whole regular file (at most 32 MiB) as base64 JSON, PUT
 * /v1/files writes one (creating its parents), POST /v1/mkdir is mkdir -p.
 *
 * Every path is normalised lexically (path.c) and opened beneath the
 * session root with agent_resolve_open(RESOLVE_V1): a symlink anywhere in
 * the path, or an escape, is refused. Nothing here follows a symlink or
 * reads a non-regular file. Directory listing, stat, ranges and the other
 * metadata operations are the file extension's (ext.c), not v1's.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/resolve.h"
#include "agent/routes.h"
#include "common/buf.h"
#include "common/fdio.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/xalloc.h"

#define MAX_BYTES PROTO_MAX_TRANSFER_BYTES
/* Read and encoded a piece at a time: a multiple of 3, about 1 MiB. */
#define READ_CHUNK (3UL * 349525)

/* An OS error as the original agent words one (Rust's io::Error). */
static const char *os_error(int err, char *buf, size_t sz)
{
	snprintf(buf, sz, "%s (os error %d)", strerror(err), err);
	return buf;
}

static int reply_refused(struct agent_req *r, const char *p, const char *reason)
{
	return agent_reply_error(r, 400, PROTO_ERR_PATH_REFUSED,
				 "Path '%s' refused: %s", p, reason);
}

static int reply_invalid(struct agent_req *r, const char *what, const char *p)
{
	return agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
				 "Request invalid: '%s' %s", p, what);
}

static int reply_not_found(struct agent_req *r, const char *p)
{
	return agent_reply_error(r, 404, PROTO_ERR_PATH_NOT_FOUND,
				 "No such file in the sandbox: %s", p);
}

static int reply_failed(struct agent_req *r, const char *op, int err)
{
	char why[128];

	return agent_reply_error(r, 500, PROTO_ERR_OPERATION_FAILED,
				 "Agent operation '%s' failed: %s", op,
				 os_error(err, why, sizeof(why)));
}

/*
 * Normalise p[n] into rel. Returns 0, or a negative value after queueing
 * the refusal (the reply's own result when that failed, else -EACCES).
 */
static int check_path(struct agent_req *r, const char *p, size_t n, char *rel,
		      size_t relsz)
{
	enum path_verdict v = path_normalize(p, n, false, rel, relsz);
	int rc;

	if (v == PATH_OK)
		return 0;
	rc = reply_refused(r, p, path_verdict_reason(v));
	return rc < 0 ? rc : -EACCES;
}

/* The answer for an open (or mkdir -p) that failed with err beneath the
 * root: a symlink or escape, a missing file, a non-regular file, or a
 * path the resolver could not walk. */
static int reply_open_error(struct agent_req *r, const char *p, int err)
{
	char why[160], os[128];

	switch (err) {
	case ELOOP:
	case EXDEV:
		return reply_refused(r, p, "path leaves the session root");
	case ENOENT:
	case ENOTDIR:
		return reply_not_found(r, p);
	case EISDIR:
	case ENXIO:
		return reply_invalid(r, "is not a regular file", p);
	default:
		snprintf(why, sizeof(why), "path could not be resolved: %s",
			 os_error(err, os, sizeof(os)));
		return reply_refused(r, p, why);
	}
}

/*
 * Read fd to its end and append its base64 answer to out, a piece at a
 * time: no copy of the whole file is held besides the answer itself.
 * st_size is only a hint (the file may grow or shrink while it is read);
 * what counts is what the reads return. Returns 0, -EFBIG when the file
 * holds more than the limit, or a negative errno.
 */
static int encode_file(int fd, size_t hint, struct buf *out)
{
	unsigned char *chunk = xmalloc(READ_CHUNK);
	size_t total = 0;
	int err = 0, rc;

	if (buf_reserve(out, proto_file_contents_size(hint), &err) == NULL) {
		rc = err;
		goto out;
	}
	rc = proto_file_contents_begin(out);
	while (rc == 0) {
		size_t fill = 0;
		ssize_t n = 1;

		/* A whole chunk (a multiple of 3) unless the file ends. */
		while (fill < READ_CHUNK && n > 0) {
			n = read(fd, chunk + fill, READ_CHUNK - fill);
			if (n < 0 && errno == EINTR)
				n = 1;
			else if (n < 0)
				rc = -errno;
			else
				fill += (size_t)n;
		}
		if (rc < 0)
			break;
		total += fill;
		if (total > MAX_BYTES) {
			rc = -EFBIG;
			break;
		}
		rc = proto_file_contents_add(out, chunk, fill);
		if (fill < READ_CHUNK)
			break;
	}
	if (rc == 0)
		rc = proto_file_contents_end(out);
out:
	free(chunk);
	return rc;
}

int agent_route_files_get(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	struct buf out = BUF_INIT(proto_file_contents_size(MAX_BYTES));
	char rel[PATH_MAX_BYTES + 1];
	struct stat st;
	const char *p;
	size_t n;
	int fd = -1, rc;

	p = agent_req_query_n(r, "path", &n);
	if (p == NULL)
		return agent_reply_text(r, 400,
					"Failed to deserialize query string: "
					"missing field `path`");
	rc = check_path(r, p, n, rel, sizeof(rel));
	if (rc < 0)
		return rc == -EACCES ? 0 : rc;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	fd = agent_resolve_open(a, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0,
				RESOLVE_V1);
	if (fd < 0) {
		rc = reply_open_error(r, p, -fd);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = reply_failed(r, "readFile", errno);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = reply_invalid(r, "is not a regular file", p);
		goto out;
	}
	if ((unsigned long long)st.st_size > MAX_BYTES) {
		rc = reply_invalid(
			r, "is over the 33554432 byte transfer limit", p);
		goto out;
	}
	rc = encode_file(fd, (size_t)st.st_size, &out);
	if (rc == -EFBIG) {
		rc = reply_invalid(
			r, "is over the 33554432 byte transfer limit", p);
		goto out;
	}
	if (rc < 0) {
		rc = reply_failed(r, "readFile", -rc);
		goto out;
	}
	rc = agent_reply_json(r, 200, &out);
out:
	fdio_close(fd);
	buf_cleanup(&out);
	return rc;
}

/*
 * mkdir -p of rel's first `upto` bytes, one component at a time, each
 * created (0777 before the umask) in a parent opened beneath the root
 * without following symlinks. On failure *bad_len is how much of rel was
 * being made. Returns 0, -ELOOP (a symlink or escape on the way),
 * -ENOTDIR (something on the way is not a directory) or a negative errno.
 */
static int mkdir_p(const struct agent *a, const char *rel, size_t upto,
		   size_t *bad_len)
{
	char prefix[PATH_MAX_BYTES + 1], scratch[PATH_MAX_BYTES + 1];
	size_t end = 0;
	int rc = 0;

	if (upto >= sizeof(prefix))
		return -ENAMETOOLONG;
	while (end < upto) {
		const char *name;
		struct stat st;
		int pfd;

		end += strcspn(rel + end, "/");
		if (end > upto)
			end = upto;
		memcpy(prefix, rel, end);
		prefix[end] = '\0';
		*bad_len = end;
		pfd = agent_resolve_parent(a, prefix, &name, scratch,
					   sizeof(scratch), RESOLVE_V1);
		if (pfd < 0)
			return pfd;
		if (mkdirat(pfd, name, 0777) < 0) {
			rc = -errno;
			if (rc == -EEXIST) {
				if (fstatat(pfd, name, &st,
					    AT_SYMLINK_NOFOLLOW) < 0)
					rc = -errno;
				else if (S_ISLNK(st.st_mode))
					rc = -ELOOP;
				else if (!S_ISDIR(st.st_mode))
					rc = -ENOTDIR;
				else
					rc = 0;
			}
		}
		close(pfd);
		if (rc < 0)
			return rc;
		end++; /* past the '/' */
	}
	return 0;
}

/* The answer for a failed mkdir_p of path p (rel normalised). */
static int reply_mkdir_error(struct agent_req *r, const char *p,
			     const char *rel, size_t bad_len, int err)
{
	char part[PATH_MAX_BYTES + 1];

	snprintf(part, sizeof(part), "%.*s", (int)bad_len, rel);
	switch (err) {
	case ELOOP:
	case EXDEV:
		return reply_refused(r, p, "path leaves the session root");
	case ENOTDIR:
		return reply_invalid(r, "is not a directory", part);
	default:
		return reply_failed(r, "mkdir", err);
	}
}

int agent_route_files_put(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	struct proto_file_write w = {NULL, NULL, 0};
	char rel[PATH_MAX_BYTES + 1], why[96] = "";
	const char *body, *slash;
	struct stat st;
	size_t len, bad = 0;
	bool created = true;
	int fd = -1, rc;

	body = agent_req_body(r, &len);
	rc = proto_file_write_decode_why(body, len, &w, why, sizeof(why));
	if (rc == -EILSEQ)
		return agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
					 "Request invalid: contents are not "
					 "valid base64: %s",
					 why);
	if (rc == -EFBIG)
		return agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
					 "Request invalid: %zu bytes exceeds "
					 "the 33554432 byte transfer limit",
					 w.len);
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	rc = check_path(r, w.path, strlen(w.path), rel, sizeof(rel));
	if (rc < 0) {
		rc = rc == -EACCES ? 0 : rc;
		goto out;
	}
	slash = strrchr(rel, '/');
	if (slash != NULL) {
		rc = mkdir_p(a, rel, (size_t)(slash - rel), &bad);
		if (rc < 0) {
			rc = reply_mkdir_error(r, w.path, rel, bad, -rc);
			goto out;
		}
	}
	/*
	 * Create exclusively first so a new file gets 0666 (before the
	 * umask); an existing one is opened as it is. It is truncated only
	 * once known to be a regular file, so a FIFO or device is never
	 * touched beyond the open (which O_NONBLOCK keeps from waiting).
	 */
	fd = agent_resolve_open(a, rel,
				O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
					O_NONBLOCK | O_NOCTTY,
				0666, RESOLVE_V1);
	if (fd == -EEXIST) {
		created = false;
		fd = agent_resolve_open(
			a, rel, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
			0, RESOLVE_V1);
	}
	if (fd < 0) {
		rc = reply_open_error(r, w.path, -fd);
		fd = -1;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = reply_failed(r, "writeFile", errno);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = reply_invalid(r, "is not a regular file", w.path);
		goto out;
	}
	if (!created && ftruncate(fd, 0) < 0) {
		rc = reply_failed(r, "writeFile", errno);
		goto out;
	}
	rc = fdio_write_all(fd, w.data, w.len);
	if (rc == 0 && close(fd) < 0)
		rc = -errno;
	else if (rc < 0)
		close(fd);
	fd = -1;
	if (rc < 0) {
		rc = reply_failed(r, "writeFile", -rc);
		goto out;
	}
	rc = agent_reply_empty(r, 204);
out:
	fdio_close(fd);
	proto_file_write_cleanup(&w);
	return rc;
}

int agent_route_mkdir(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	char rel[PATH_MAX_BYTES + 1];
	const char *body;
	char *path = NULL;
	size_t len, bad = 0;
	int rc;

	body = agent_req_body(r, &len);
	rc = proto_path_decode(body, len, &path);
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	rc = check_path(r, path, strlen(path), rel, sizeof(rel));
	if (rc < 0) {
		rc = rc == -EACCES ? 0 : rc;
		goto out;
	}
	rc = mkdir_p(a, rel, strlen(rel), &bad);
	if (rc < 0)
		rc = reply_mkdir_error(r, path, rel, bad, -rc);
	else
		rc = agent_reply_empty(r, 204);
out:
	free(path);
	return rc;
}
