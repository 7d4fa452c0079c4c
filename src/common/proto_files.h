/* SPDX-License-Identifier: MIT */
/*
 * proto_files: encoding of the v1 file routes (doc/protocol-v1.md 3.3-3.5) and of
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
#include "common/proto.h"

/* ---- v1 ---------------------------------------------------------------- */

/* GET /v1/files answer {"contentsBase64":"..."}. decode appends the
 * decoded bytes to content, whose max bounds them (-EFBIG). */
int proto_file_contents_encode(const void *data, size_t n, struct buf *out)
	__attribute__((warn_unused_result));
int proto_file_contents_decode(const char *p, size_t n, struct buf *content)
	__attribute__((warn_unused_result));
/*
 * The same answer built in pieces, so a file can be encoded as it is read
 * without a copy of the whole of it: begin, then add pieces (every piece
 * but the last a multiple of 3 bytes long), then end. size() is the length
 * of the whole answer for n bytes of contents, for reserving it.
 */
size_t proto_file_contents_size(size_t n);
int proto_file_contents_begin(struct buf *out)
	__attribute__((warn_unused_result));
int proto_file_contents_add(struct buf *out, const void *data, size_t n)
	__attribute__((warn_unused_result));
int proto_file_contents_end(struct buf *out)
	__attribute__((warn_unused_result));

/* PUT /v1/files body {"path","contentsBase64"}. decode: data is heap
 * (NULL when empty); a decoded size over PROTO_MAX_TRANSFER_BYTES is
 * -EFBIG with *len set to the decoded size for the message. A string
 * field that holds U+0000 is -EINVAL (a C string would silently end there
 * and name another file); so is a path body with one. */
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
/* As proto_file_write_decode; on -EILSEQ, why[whysz] (may be NULL) says
 * what is wrong with the base64 ("Invalid symbol 33, offset 4."). */
int proto_file_write_decode_why(const char *p, size_t n,
				struct proto_file_write *out, char *why,
				size_t whysz)
	__attribute__((warn_unused_result));
void proto_file_write_cleanup(struct proto_file_write *w);

/* {"path":"..."}: POST /v1/mkdir, and extension bodies with only a path. */
int proto_path_encode(const char *path, struct buf *out)
	__attribute__((warn_unused_result));
int proto_path_decode(const char *p, size_t n, char **path)
	__attribute__((warn_unused_result));

/* ---- the file extension -------------------------------------------------- */

/*
 * Wire rules shared by every extension encoder and decoder here:
 * - Integers are exact. A value a JSON double cannot hold exactly (above
 *   2^53 - 1 in magnitude: inode numbers on overlay filesystems with xino,
 *   sizes of sparse files) is sent as a string of decimal digits; decoders
 *   accept either form for every integer field.
 * - A string that holds a NUL (the escape \u0000) is refused with -EINVAL:
 *   no path, name or link target can hold one, and cJSON would cut it.
 * - Names and targets are byte strings; bytes that are not UTF-8 pass
 *   through unchanged.
 */

#define PROTO_EXT_PREFIX "/sandboxfs/v1/"
/* Entries per listing page: default and most a client may ask for. */
#define PROTO_EXT_LIST_DEFAULT 1024
#define PROTO_EXT_LIST_MAX 8192
/* The agent closes a page once its body reaches this many bytes, so a
 * page is at most PROTO_EXT_LIST_MAX_BYTES (one entry, whose name and
 * link target are escaped, is far below the slack). */
#define PROTO_EXT_LIST_PAGE_BYTES (4UL * 1024 * 1024)
#define PROTO_EXT_LIST_MAX_BYTES (PROTO_EXT_LIST_PAGE_BYTES + 65536UL)
/* Response header of GET read: the full size of the file. */
#define PROTO_EXT_HDR_SIZE "X-Sandboxfs-Size"

enum proto_ftype {
	PROTO_FT_UNKNOWN = 0,
	PROTO_FT_FILE, /* "file" */
	PROTO_FT_DIR, /* "dir" */
	PROTO_FT_SYMLINK, /* "symlink" */
	PROTO_FT_FIFO, /* "fifo" */
	PROTO_FT_SOCKET, /* "socket" */
	PROTO_FT_CHAR, /* "char" */
	PROTO_FT_BLOCK, /* "block" */
};

/* The wire name ("file"...); "unknown" for PROTO_FT_UNKNOWN. */
const char *proto_ftype_name(enum proto_ftype t);
/* PROTO_FT_UNKNOWN for a name not in the list (a newer agent's type). */
enum proto_ftype proto_ftype_from_name(const char *s);

/* Attributes (lstat of the entry). perm holds the 07777 bits only. */
struct proto_attr {
	enum proto_ftype type;
	uint32_t perm;
	uint64_t size;
	uint64_t nlink;
	uint32_t uid, gid;
	uint64_t ino;
	uint64_t blocks; /* 512-byte units */
	uint64_t rdev;
	int64_t atime, mtime, ctime;
	uint32_t atime_ns, mtime_ns, ctime_ns;
};

/* The validator of a file's contents, identical on both sides:
 * "<ino>-<size>-<mtime>.<mtime_ns>" in lower-case hex, in double quotes
 * (an HTTP entity tag; a negative mtime is written as its 64-bit two's
 * complement). out must hold PROTO_ETAG_MAX bytes. */
#define PROTO_ETAG_MAX 80
void proto_attr_etag(const struct proto_attr *a, char *out);

/* Append one attribute object. name and target may be NULL (omitted);
 * target is a symlink's contents. On failure out is left as it was. */
int proto_attr_encode(const struct proto_attr *a, const char *name,
		      const char *target, struct buf *out)
	__attribute__((warn_unused_result));
/* Decode one attribute object; *target (heap, NULL when absent) when
 * target is not NULL. Every attribute field is required; "type" names
 * outside the list decode as PROTO_FT_UNKNOWN; "mode" must be <= 07777. */
int proto_attr_decode(const char *p, size_t n, struct proto_attr *out,
		      char **target) __attribute__((warn_unused_result));

/* A directory page: {"entries":[attr objects with "name"],"next":"C"}.
 * "next" is absent on the last page. */
struct proto_dirent {
	char *name;
	char *target; /* symlinks: the link's contents, else NULL */
	struct proto_attr attr;
};

struct proto_list {
	struct proto_dirent *entries;
	size_t n;
	char *next; /* NULL on the last page */
};

/* Incremental encoding, so a page is built without a tree. A failed add
 * leaves out as it was (the page stays well-formed up to there). */
int proto_list_begin(struct buf *out) __attribute__((warn_unused_result));
int proto_list_add(struct buf *out, bool first, const char *name,
		   const struct proto_attr *a, const char *target)
	__attribute__((warn_unused_result));
int proto_list_end(struct buf *out, const char *next)
	__attribute__((warn_unused_result));
/* Decode a page. Every name must be one valid path component (no '/',
 * not "." or "..", at most 255 bytes), else -EINVAL; more than
 * PROTO_EXT_LIST_MAX entries is -EFBIG. "next", when present, is a
 * non-empty string of at most 64 bytes. */
int proto_list_decode(const char *p, size_t n, struct proto_list *out)
	__attribute__((warn_unused_result));
void proto_list_cleanup(struct proto_list *l);
/* Free v[0..n) (names and targets) and v. NULL-safe. */
void proto_dirents_free(struct proto_dirent *v, size_t n);

/*
 * A subtree in one answer (GET tree): the listings of a directory and of
 * the directories below it, breadth first, each listing whole:
 *   {"dirs":[{"path":"","entries":[...]},{"path":"a","entries":[...]}],
 *    "complete":true}
 * "path" is relative to the directory asked for ("" is that directory);
 * entries are list entries. "complete" is false when the answer stopped
 * at its entry budget: the directories it names are whole, the others
 * are left out.
 */
#define PROTO_EXT_TREE_DEFAULT 16384 /* entries per answer */
#define PROTO_EXT_TREE_MAX 65536
#define PROTO_EXT_TREE_MAX_BYTES (32UL * 1024 * 1024)

struct proto_tree_dir {
	char *path;
	struct proto_dirent *entries;
	size_t n;
};

struct proto_tree {
	struct proto_tree_dir *dirs;
	size_t ndirs;
	bool complete;
};

/* Encoding: begin, then one dir per listing (entries is the text of its
 * entries as proto_list_add writes them, without brackets), then end. */
int proto_tree_begin(struct buf *out) __attribute__((warn_unused_result));
int proto_tree_dir(struct buf *out, bool first, const char *path,
		   const char *entries, size_t len)
	__attribute__((warn_unused_result));
int proto_tree_end(struct buf *out, bool complete)
	__attribute__((warn_unused_result));
/* Paths are checked: relative, no "..", no empty or "." component. More
 * than PROTO_EXT_TREE_MAX entries in all is -EFBIG. */
int proto_tree_decode(const char *p, size_t n, struct proto_tree *out)
	__attribute__((warn_unused_result));
void proto_tree_cleanup(struct proto_tree *t);

/*
 * The contents of a directory's small files in one answer (GET contents,
 * version 4): a sequence of records, each an attribute object with "name"
 * on one line, a newline, then exactly "size" bytes of the file.
 */
#define PROTO_EXT_CONTENTS_FILE_DEFAULT (256UL * 1024) /* maxFile */
#define PROTO_EXT_CONTENTS_FILE_MAX (1024UL * 1024)
#define PROTO_EXT_CONTENTS_BYTES_DEFAULT (8UL * 1024 * 1024) /* maxBytes */
#define PROTO_EXT_CONTENTS_BYTES_MAX (16UL * 1024 * 1024)
#define PROTO_EXT_CONTENTS_FILES_MAX 4096 /* records per answer */
#define PROTO_EXT_CONTENTS_LINE_MAX 4096 /* one record's attribute line */

/* Append one record; on failure out is left as it was. */
int proto_contents_add(struct buf *out, const char *name,
		       const struct proto_attr *a, const void *data, size_t len)
	__attribute__((warn_unused_result));
/* The record at *pos of an answer of n bytes: 1 with ent (name, attr;
 * the caller frees ent->name) and *data pointing into p at attr.size
 * bytes, *pos moved past it; 0 at the end; -EINVAL for a malformed or
 * truncated record, a record that is not a regular file, or a name that
 * is not one path component. */
int proto_contents_next(const char *p, size_t n, size_t *pos,
			struct proto_dirent *ent, const char **data)
	__attribute__((warn_unused_result));
/* The attribute line of the record that starts p (n bytes so far, as
 * they arrive): 1 with ent (the caller frees ent->name) and *head, the
 * line's length with its newline (the contents follow it); 0 when the
 * line is not all there yet; -EINVAL as proto_contents_next says. */
int proto_contents_head(const char *p, size_t n, struct proto_dirent *ent,
			size_t *head) __attribute__((warn_unused_result));

/*
 * Change events (GET events, doc/protocol-ext.md "Change events"):
 *   {"bootId":"...","events":[
 *      {"seq":7,"type":"create","path":"/a","dir":true},
 *      {"seq":8,"type":"rename","path":"/a/x","to":"/a/y","dir":false,
 *       "by":"m1"}],
 *    "next":8}
 * plus "unavailable":"<why>" when the agent cannot give events. A "lost"
 * event has no path ({"seq":N,"type":"lost"}). On the wire paths start
 * with '/' ("/" is the root); in the structs below they are relative, as
 * every other path of the client ("" is the root).
 */
#define PROTO_EXT_EVENTS_MAX 4096 /* events per answer */
/* The agent closes an answer once it reaches this many bytes (one event,
 * two escaped 4096-byte paths, is far below the slack). */
#define PROTO_EXT_EVENTS_PAGE_BYTES (4UL * 1024 * 1024)
#define PROTO_EXT_EVENTS_MAX_BYTES (PROTO_EXT_EVENTS_PAGE_BYTES + 65536UL)
/* The longest an answer is held (waitMs past it is cut to it). */
#define PROTO_EXT_EVENTS_MAX_WAIT_MS 30000
/* The longest "unavailable" text kept by the decoder (longer is cut). */
#define PROTO_EXT_EVENTS_WHY_MAX 255

enum proto_event_type {
	PROTO_EV_OTHER = 0, /* a type this client does not know */
	PROTO_EV_CREATE, /* "create": a name appeared */
	PROTO_EV_REMOVE, /* "remove": a name went away */
	PROTO_EV_RENAME, /* "rename": path moved to to */
	PROTO_EV_WRITE, /* "write": a file's contents changed */
	PROTO_EV_ATTR, /* "attr": mode, owner, times, link count */
	PROTO_EV_LOST, /* "lost": events were lost: forget everything */
};

/* The wire name; "other" for PROTO_EV_OTHER. */
const char *proto_event_type_name(enum proto_event_type t);

struct proto_event {
	uint64_t seq;
	enum proto_event_type type;
	bool dir; /* the entry is a directory */
	char *path; /* relative; NULL only for PROTO_EV_LOST */
	char *to; /* rename: where it went (relative); else NULL */
	char by[PROTO_CLIENT_ID_MAX + 1]; /* the client whose change it
					      was, "" when not known */
};

struct proto_events {
	char boot_id[80];
	uint64_t next; /* pass back as since */
	/* The answer was a lost event: forget everything cached about the
	 * sandbox and go on from next. ev is then empty. */
	bool lost;
	/* Why the agent gives no events ("" when it does): lost is then
	 * true, and asking again brings nothing new. */
	char unavailable[PROTO_EXT_EVENTS_WHY_MAX + 1];
	struct proto_event *ev; /* in seq order */
	size_t n;
};

/* Encoding, incremental as for listing pages: begin, add each event
 * (path and to relative, as in the struct; a failed add leaves out as it
 * was), then end with next and the reason events are unavailable (NULL
 * when they are not). */
int proto_events_begin(struct buf *out, const char *boot_id)
	__attribute__((warn_unused_result));
int proto_events_add(struct buf *out, bool first, const struct proto_event *e)
	__attribute__((warn_unused_result));
int proto_events_end(struct buf *out, uint64_t next, const char *unavailable)
	__attribute__((warn_unused_result));
/*
 * Decode an answer. Unlike the other decoders, every refusal is -EPROTO
 * (not JSON, a missing or mistyped member, more than PROTO_EXT_EVENTS_MAX
 * events, a path that is not absolute and canonical or is longer than
 * 4096 bytes, a rename without "to", a "by" that is not a client name,
 * seqs that do not grow or pass next); -ENOMEM otherwise. A client acts
 * on an answer whole or not at all, so there is nothing to tell apart. An
 * unknown "type" decodes as PROTO_EV_OTHER (its path is still checked).
 */
int proto_events_decode(const char *p, size_t n, struct proto_events *out)
	__attribute__((warn_unused_result));
void proto_events_cleanup(struct proto_events *e);

/* A timestamp for utimens. */
enum proto_time_how {
	PROTO_TIME_OMIT = 0, /* "omit" or absent: leave unchanged */
	PROTO_TIME_NOW, /* "now" */
	PROTO_TIME_SET, /* {"sec":N,"nsec":N}, nsec < 10^9 */
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
 * Required fields are marked *; a missing one is -EINVAL both ways.
 *   create   path*, mode*, exclusive, truncate
 *   mkdir    path*, mode*
 *   unlink, rmdir, fsync   path*
 *   rename   from* (path), to*, noreplace, exchange
 *   link     from* (path), to*
 *   symlink  path*, target*
 *   chmod    path*, mode*
 *   truncate path*, size*
 *   utimens  path*, atime, mtime, nofollow
 * mode is the 07777 bits (more is -EINVAL). Fields an operation does not
 * read are ignored when decoding, as unknown fields are. An op not in the
 * list is -EINVAL.
 */
struct proto_ext_req {
	char *path; /* "path", or "from" for rename and link */
	char *to;
	char *target;
	bool has_mode;
	uint32_t mode;
	bool has_size;
	uint64_t size;
	bool exclusive, truncate, noreplace, exchange;
	bool nofollow; /* utimens: act on a symlink itself (lutimes) */
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

/* Every field is required when decoding. */
int proto_statfs_encode(const struct proto_statfs *s, struct buf *out)
	__attribute__((warn_unused_result));
int proto_statfs_decode(const char *p, size_t n, struct proto_statfs *out)
	__attribute__((warn_unused_result));

#endif
