/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1_i: the pure parts of files/ without the file extension
 * (fs_files_v1_text.c), used by fs_files_v1*.c and exposed for the tests:
 * the parser of the `find -printf` records that listings and stats come
 * in, the table that turns a command's diagnostics back into an errno,
 * single-quoting for native shell command lines, and the per-open file
 * buffer (whole-file reads and writes of protocol v1).
 *
 * Nothing here does I/O. Thread-safe: the errno table is built once
 * (pthread_once) and only read afterwards; everything else works on the
 * caller's data.
 */
#ifndef SBFS_FS_FILES_V1_I_H
#define SBFS_FS_FILES_V1_I_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/buf.h"
#include "common/proto_files.h"

/*
 * What `find -printf` prints per entry: type, permission bits (octal),
 * size, link count, uid, gid, inode, 512-byte blocks, atime, mtime, ctime
 * (seconds with a fraction), the name and the symlink target, each field
 * ended by a NUL. No name or target can hold a NUL, so the records parse
 * whatever bytes the names hold (newlines, quotes, non-UTF-8).
 */
#define FS_V1_FIND_FORMAT \
	"%y\\0%m\\0%s\\0%n\\0%U\\0%G\\0%i\\0%b\\0%A@\\0%T@\\0%C@\\0%f\\0%l\\0"
#define FS_V1_FIND_FIELDS 13
/* The short form, names and types only: for directories whose full
 * listing is more than a command's output may carry. */
#define FS_V1_FIND_FORMAT_SHORT "%y\\0%f\\0"
#define FS_V1_FIND_FIELDS_SHORT 2

/* One parsed record. name and target point into the parsed bytes (each
 * is NUL-terminated there); target is "" unless the entry is a symlink.
 * In the short form only attr.type, name and target ("") are set. */
struct fs_v1_rec {
	struct proto_attr attr;
	const char *name;
	const char *target;
};

/*
 * Parse the record at *pos of p[0..n) (full form, or short when short_form
 * is true). Returns 1 with *rec filled and *pos moved past the record, 0
 * when *pos == n (no more records), -EBADMSG for a record that is cut
 * short or holds a field that does not parse (a number out of range, a
 * type that is not one character, permission bits above 07777). Names are
 * not judged here.
 *
 * Times are GNU find's "%T@": the integer part is tv_sec (with its sign)
 * and the fraction is tv_nsec, so a time before 1970 reads as it was
 * printed ("-2.75" is tv_sec -2, tv_nsec 750000000).
 */
int fs_files_v1_parse(const char *p, size_t n, size_t *pos, bool short_form,
		      struct fs_v1_rec *rec)
	__attribute__((warn_unused_result));

/*
 * The errno a command's diagnostics (stderr, len bytes, need not be
 * NUL-terminated) report: the longest strerror() text (of 1..133 here,
 * plus the spellings of musl) that ends one of its lines after ": ", else
 * one that appears anywhere in it; 0 when none matches. Also knows the
 * few diagnostics of mv that carry no strerror text ("to a subdirectory
 * of itself": EINVAL, "not replacing": EEXIST, "cannot overwrite
 * directory": EISDIR, "cannot overwrite non-directory": ENOTDIR).
 */
int fs_files_v1_errno_from_text(const char *text, size_t len);

/* Append s to out as one single-quoted shell word ('it'\''s'). */
int fs_files_v1_shell_quote(struct buf *out, const char *s)
	__attribute__((warn_unused_result));

/* ---- the per-open buffer ------------------------------------------------- */

/* The most one file can hold: the protocol's whole-file transfer limit. */
#define FS_V1_FILE_MAX PROTO_MAX_TRANSFER_BYTES

/* Copy up to size bytes at off into dst; the byte count (0 at or past the
 * end), -EINVAL for a negative offset. */
int fs_files_v1_buf_read(const struct buf *b, char *dst, size_t size,
			 off_t off);
/* Write size bytes at off, growing the buffer (a gap reads as zeros).
 * Returns size, -EFBIG when the file would pass FS_V1_FILE_MAX (or b's own
 * max; nothing is written then), -EINVAL, -ENOMEM. */
int fs_files_v1_buf_write(struct buf *b, const char *src, size_t size,
			  off_t off) __attribute__((warn_unused_result));
/* Cut or extend (with zeros) to size bytes; -EFBIG past FS_V1_FILE_MAX. */
int fs_files_v1_buf_truncate(struct buf *b, off_t size)
	__attribute__((warn_unused_result));

#endif
