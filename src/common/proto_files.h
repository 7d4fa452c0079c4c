/* SPDX-License-Identifier: MIT */
/*
 * proto_files: encoding of the v1 file routes (protocol.md 3.4-3.6) and of
 * the sandboxfs file extension (doc/protocol-ext.md): attributes,
 * directory pages, and the JSON bodies of the metadata operations.
 *
 * Error conventions as in proto.h, plus: -EILSEQ for contents that are not
 * strict standard base64. Thread-safe (no shared state).
 */
#ifndef SBFS_PROTO_FILES_H
#define SBFS_PROTO_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* ---- v1 ---------------------------------------------------------------- */

/* GET /v1/files answer {"contentsBase64":"..."}. decode appends the
 * decoded bytes to content, whose max bounds them (-EFBIG). */
int proto_file_contents_encode(const void *data, size_t n, struct buf *out)
	__attribute__((warn_unused_result));
int proto_file_contents_decode(const char *p, size_t n, struct buf *content)
	__attribute__((warn_unused_result));

/* PUT /v1/files body {"path","contentsBase64"}. decode: data is heap
 * (NULL when empty); a decoded size over PROTO_MAX_TRANSFER_BYTES is
 * -EFBIG with *len set to the decoded size for the message. */
struct proto_file_write {
	char *path;
	unsigned char *data;
	size_t len;
};

int proto_file_write_encode(const char *path, const void *data, size_t n,
			    struct buf *out)
	__attribute__((warn_unused_result));
int proto_file_write_decode(const char *p, size_t n,
			    struct proto_file_write *out)
	__attribute__((warn_unused_result));
void proto_file_write_cleanup(struct proto_file_write *w);

/* {"path":"..."}: POST /v1/mkdir, and extension bodies with only a path. */
int proto_path_encode(const char *path, struct buf *out)
	__attribute__((warn_unused_result));
int proto_path_decode(const char *p, size_t n, char **path)
	__attribute__((warn_unused_result));

/* ---- the file extension -------------------------------------------------- */

enum proto_ftype {
	PROTO_FT_UNKNOWN = 0,
	PROTO_FT_FILE,    /* "file" */
	PROTO_FT_DIR,     /* "dir" */
	PROTO_FT_SYMLINK, /* "symlink" */
	PROTO_FT_FIFO,    /* "fifo" */
	PROTO_FT_SOCKET,  /* "socket" */
	PROTO_FT_CHAR,    /* "char" */
	PROTO_FT_BLOCK,   /* "block" */
};

const char *proto_ftype_name(enum proto_ftype t);
enum proto_ftype proto_ftype_from_name(const char *s);

/* Attributes (lstat of the entry). perm holds the 07777 bits only. */
struct proto_attr {
	enum proto_ftype type;
	uint32_t perm;
	uint64_t size;
	uint64_t nlink;
	uint32_t uid, gid;
	uint64_t ino;
	uint64_t blocks;   /* 512-byte units */
	uint64_t rdev;
	int64_t atime, mtime, ctime;
	uint32_t atime_ns, mtime_ns, ctime_ns;
};

/* The validator of a file's contents, identical on both sides:
 * "<ino>-<size>-<mtime>.<mtime_ns>" in lower-case hex, in double quotes
 * (an HTTP entity tag). out must hold PROTO_ETAG_MAX bytes. */
#define PROTO_ETAG_MAX 80
void proto_attr_etag(const struct proto_attr *a, char *out);

/* Append one attribute object. name and target may be NULL (omitted);
 * target is a symlink's contents. */
int proto_attr_encode(const struct proto_attr *a, const char *name,
		      const char *target, struct buf *out)
	__attribute__((warn_unused_result));
/* Decode one attribute object; *target (heap, may be NULL) when wanted. */
int proto_attr_decode(const char *p, size_t n, struct proto_attr *out,
		      char **target)
	__attribute__((warn_unused_result));

/* A directory page: {"entries":[attr objects with "name"],"next":"C"}.
 * "next" is absent on the last page. */
struct proto_dirent {
	char *name;
	char *target;      /* symlinks: the link's contents, else NULL */
	struct proto_attr attr;
};

struct proto_list {
	struct proto_dirent *entries;
	size_t n;
	char *next;        /* NULL on the last page */
};

/* Incremental encoding, so a page is built without a tree. */
int proto_list_begin(struct buf *out) __attribute__((warn_unused_result));
int proto_list_add(struct buf *out, bool first, const char *name,
		   const struct proto_attr *a, const char *target)
	__attribute__((warn_unused_result));
int proto_list_end(struct buf *out, const char *next)
	__attribute__((warn_unused_result));
int proto_list_decode(const char *p, size_t n, struct proto_list *out)
	__attribute__((warn_unused_result));
void proto_list_cleanup(struct proto_list *l);

/* A timestamp for utimens. */
enum proto_time_how {
	PROTO_TIME_OMIT = 0, /* "omit" or absent: leave unchanged */
	PROTO_TIME_NOW,      /* "now" */
	PROTO_TIME_SET,      /* {"sec":N,"nsec":N} */
};

struct proto_time {
	enum proto_time_how how;
	int64_t sec;
	uint32_t nsec;
};

/*
 * The JSON body of the extension's metadata operations. Each route reads
 * the fields it needs (doc/protocol-ext.md); encode writes the fields that
 * are set (strings non-NULL, has_* true, flags true, times not OMIT).
 *   create   path, mode, exclusive, truncate
 *   mkdir    path, mode
 *   unlink, rmdir, fsync   path
 *   rename   from (path), to, noreplace, exchange
 *   link     from (path), to
 *   symlink  path, target
 *   chmod    path, mode
 *   truncate path, size
 *   utimens  path, atime, mtime
 */
struct proto_ext_req {
	char *path;       /* "path", or "from" for rename and link */
	char *to;
	char *target;
	bool has_mode;
	uint32_t mode;
	bool has_size;
	uint64_t size;
	bool exclusive, truncate, noreplace, exchange;
	struct proto_time atime, mtime;
};

/* op names the route ("rename" and "link" use "from" for path). */
int proto_ext_req_encode(const char *op, const struct proto_ext_req *r,
			 struct buf *out) __attribute__((warn_unused_result));
int proto_ext_req_decode(const char *op, const char *p, size_t n,
			 struct proto_ext_req *out)
	__attribute__((warn_unused_result));
void proto_ext_req_cleanup(struct proto_ext_req *r);

/* readlink answer {"target":"..."}. */
int proto_target_encode(const char *target, struct buf *out)
	__attribute__((warn_unused_result));
int proto_target_decode(const char *p, size_t n, char **target)
	__attribute__((warn_unused_result));

struct proto_statfs {
	uint64_t bsize, frsize, blocks, bfree, bavail, files, ffree, namemax;
};

int proto_statfs_encode(const struct proto_statfs *s, struct buf *out)
	__attribute__((warn_unused_result));
int proto_statfs_decode(const char *p, size_t n, struct proto_statfs *out)
	__attribute__((warn_unused_result));

#endif
