/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1_text: the text of files/ without the file extension
 * (contract in fs_files_v1_i.h): the records `find -printf` prints, the
 * errno a command's diagnostics name, single-quoted shell words, and the
 * per-open buffer of whole-file reads and writes. No I/O.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_files_v1_i.h"

/* ---- find -printf records ------------------------------------------------ */

/* The type letter of "%y" as a file type; PROTO_FT_UNKNOWN for letters
 * find uses for nothing Linux has ('D' door, 'U', '?'). */
static enum proto_ftype fs_files_v1_ftype(char c)
{
	switch (c) {
	case 'f':
		return PROTO_FT_FILE;
	case 'd':
		return PROTO_FT_DIR;
	case 'l':
		return PROTO_FT_SYMLINK;
	case 'p':
		return PROTO_FT_FIFO;
	case 's':
		return PROTO_FT_SOCKET;
	case 'c':
		return PROTO_FT_CHAR;
	case 'b':
		return PROTO_FT_BLOCK;
	default:
		return PROTO_FT_UNKNOWN;
	}
}

/* Digits of base 8 or 10, nothing else, at most max. */
static bool parse_u64(const char *s, unsigned base, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++) {
		unsigned d;

		if (*s < '0' || *s >= (char)('0' + base))
			return false;
		d = (unsigned)(*s - '0');
		if (v > (max - d) / base)
			return false;
		v = v * base + d;
	}
	*out = v;
	return true;
}

/* "%T@": [-]SEC[.FRACTION]; the fraction's first nine digits are the
 * nanoseconds. */
static bool parse_time(const char *s, int64_t *sec, uint32_t *nsec)
{
	bool neg = false;
	uint64_t v = 0;
	uint32_t ns = 0;
	unsigned digits = 0;

	if (*s == '-') {
		neg = true;
		s++;
	}
	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > ((uint64_t)INT64_MAX - (unsigned)(*s - '0')) / 10)
			return false;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9')
			return false;
		for (; *s >= '0' && *s <= '9'; s++, digits++)
			if (digits < 9)
				ns = ns * 10 + (uint32_t)(*s - '0');
		for (; digits < 9; digits++)
			ns *= 10;
	}
	if (*s != '\0')
		return false;
	*sec = neg ? -(int64_t)v : (int64_t)v;
	*nsec = ns;
	return true;
}

int fs_files_v1_parse(const char *p, size_t n, size_t *pos, bool short_form,
		      struct fs_v1_rec *rec)
{
	const char *f[FS_V1_FIND_FIELDS];
	size_t nf = short_form ? FS_V1_FIND_FIELDS_SHORT : FS_V1_FIND_FIELDS;
	size_t at = *pos, i;
	struct fs_v1_rec r;
	uint64_t v[8];

	if (at >= n)
		return 0;
	for (i = 0; i < nf; i++) {
		const char *end = memchr(p + at, '\0', n - at);

		if (end == NULL)
			return -EBADMSG;
		f[i] = p + at;
		at = (size_t)(end - p) + 1;
	}
	memset(&r, 0, sizeof(r));
	if (f[0][0] == '\0' || f[0][1] != '\0')
		return -EBADMSG;
	r.attr.type = fs_files_v1_ftype(f[0][0]);
	if (short_form) {
		r.name = f[1];
		r.target = "";
		goto done;
	}
	if (!parse_u64(f[1], 8, 07777, &v[0]) ||
	    !parse_u64(f[2], 10, UINT64_MAX, &v[1]) ||
	    !parse_u64(f[3], 10, UINT64_MAX, &v[2]) ||
	    !parse_u64(f[4], 10, UINT32_MAX, &v[3]) ||
	    !parse_u64(f[5], 10, UINT32_MAX, &v[4]) ||
	    !parse_u64(f[6], 10, UINT64_MAX, &v[5]) ||
	    !parse_u64(f[7], 10, UINT64_MAX, &v[6]) ||
	    !parse_time(f[8], &r.attr.atime, &r.attr.atime_ns) ||
	    !parse_time(f[9], &r.attr.mtime, &r.attr.mtime_ns) ||
	    !parse_time(f[10], &r.attr.ctime, &r.attr.ctime_ns))
		return -EBADMSG;
	r.attr.perm = (uint32_t)v[0];
	r.attr.size = v[1];
	r.attr.nlink = v[2];
	r.attr.uid = (uint32_t)v[3];
	r.attr.gid = (uint32_t)v[4];
	r.attr.ino = v[5];
	r.attr.blocks = v[6];
	r.name = f[11];
	r.target = f[12];
done:
	*rec = r;
	*pos = at;
	return 1;
}

/* ---- diagnostics to errno ------------------------------------------------ */

#define ERRTAB_FIRST 1
#define ERRTAB_LAST 133
#define ERRTEXT_MAX 64

struct errtext {
	char text[ERRTEXT_MAX];
	size_t len;
	int err;
};

/* Other C libraries' words for the errors file commands report (musl). */
static const struct {
	int err;
	const char *text;
} errtab_extra[] = {
	{ENAMETOOLONG, "Filename too long"},
	{ELOOP, "Symbolic link loop"},
	{EXDEV, "Cross-device link"},
	{EBUSY, "Resource busy"},
	{EDQUOT, "Quota exceeded"},
	{EIO, "I/O error"},
	{EOPNOTSUPP, "Not supported"},
	{ENOMEM, "Out of memory"},
	{EMFILE, "No file descriptors available"},
};

static struct errtext errtab[ERRTAB_LAST - ERRTAB_FIRST + 1 +
			     sizeof(errtab_extra) / sizeof(errtab_extra[0])];
static size_t nerrtab;
static pthread_once_t errtab_once = PTHREAD_ONCE_INIT;

static void errtab_add(int err, const char *text)
{
	size_t len = strlen(text);

	if (len == 0 || len >= ERRTEXT_MAX ||
	    strncmp(text, "Unknown error", 13) == 0)
		return;
	memcpy(errtab[nerrtab].text, text, len + 1);
	errtab[nerrtab].len = len;
	errtab[nerrtab].err = err;
	nerrtab++;
}

static void errtab_build(void)
{
	char tmp[ERRTEXT_MAX];
	size_t i;
	int e;

	/* Copied at once: strerror's answer may live in a buffer that the
	 * next call reuses. Runs once, before any lookup. */
	for (e = ERRTAB_FIRST; e <= ERRTAB_LAST; e++) {
		snprintf(tmp, sizeof(tmp), "%s", strerror(e));
		errtab_add(e, tmp);
	}
	for (i = 0; i < sizeof(errtab_extra) / sizeof(errtab_extra[0]); i++)
		errtab_add(errtab_extra[i].err, errtab_extra[i].text);
}

/* The longest table text that ends line[0..n) after ": " (or is all of
 * it). */
static const struct errtext *match_line_end(const char *line, size_t n)
{
	const struct errtext *best = NULL;
	size_t i;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' ||
			 line[n - 1] == '.'))
		n--;
	for (i = 0; i < nerrtab; i++) {
		const struct errtext *t = &errtab[i];
		size_t start;

		if (t->len > n)
			continue;
		start = n - t->len;
		if (memcmp(line + start, t->text, t->len) != 0)
			continue;
		if (start != 0 && (start < 2 || line[start - 2] != ':' ||
				   line[start - 1] != ' '))
			continue;
		if (best == NULL || t->len > best->len)
			best = t;
	}
	return best;
}

static bool contains(const char *text, size_t len, const char *needle)
{
	return memmem(text, len, needle, strlen(needle)) != NULL;
}

int fs_files_v1_errno_from_text(const char *text, size_t len)
{
	static const struct {
		const char *phrase;
		int err;
	} phrases[] = {
		{"to a subdirectory of itself", EINVAL},
		{"not replacing", EEXIST},
		{"cannot overwrite directory", EISDIR},
		{"cannot overwrite non-directory", ENOTDIR},
	};
	const struct errtext *best = NULL;
	size_t at = 0, i;

	if (text == NULL || len == 0)
		return 0;
	pthread_once(&errtab_once, errtab_build);
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl != NULL ? (size_t)(nl - text) - at : len - at;

		best = match_line_end(text + at, n);
		if (best != NULL)
			return best->err;
		at += n + 1;
	}
	for (i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++)
		if (contains(text, len, phrases[i].phrase))
			return phrases[i].err;
	for (i = 0; i < nerrtab; i++) {
		const struct errtext *t = &errtab[i];

		if ((best == NULL || t->len > best->len) &&
		    memmem(text, len, t->text, t->len) != NULL)
			best = t;
	}
	return best != NULL ? best->err : 0;
}

int fs_files_v1_shell_quote(struct buf *out, const char *s)
{
	int rc = buf_append(out, "'", 1);

	while (rc == 0 && *s != '\0') {
		size_t n = strcspn(s, "'");

		rc = buf_append(out, s, n);
		s += n;
		if (rc == 0 && *s == '\'') {
			rc = buf_append(out, "'\\''", 4);
			s++;
		}
	}
	if (rc == 0)
		rc = buf_append(out, "'", 1);
	return rc;
}

/* ---- the per-open buffer ------------------------------------------------- */

int fs_files_v1_buf_read(const struct buf *b, char *dst, size_t size, off_t off)
{
	size_t n;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= b->len)
		return 0;
	n = b->len - (size_t)off;
	if (n > size)
		n = size;
	if (n > INT_MAX)
		n = INT_MAX;
	memcpy(dst, b->data + off, n);
	return (int)n;
}

/* Extend with zeros to end bytes. */
static int buf_zero_extend(struct buf *b, uint64_t end)
{
	size_t more = (size_t)end - b->len;
	int rc = 0;
	char *p;

	if (end <= b->len)
		return 0;
	p = buf_reserve(b, more, &rc);
	if (p == NULL)
		return rc;
	memset(p, 0, more);
	buf_commit(b, more);
	return 0;
}

static bool past_max(const struct buf *b, uint64_t end)
{
	return end > FS_V1_FILE_MAX || (b->max != 0 && end > b->max);
}

int fs_files_v1_buf_write(struct buf *b, const char *src, size_t size,
			  off_t off)
{
	uint64_t end;
	int rc;

	if (off < 0 || size > INT_MAX)
		return -EINVAL;
	if (size == 0)
		return 0;
	end = (uint64_t)off + size;
	if (past_max(b, end))
		return -EFBIG;
	rc = buf_zero_extend(b, end);
	if (rc < 0)
		return rc;
	memcpy(b->data + off, src, size);
	return (int)size;
}

int fs_files_v1_buf_truncate(struct buf *b, off_t size)
{
	if (size < 0)
		return -EINVAL;
	if (past_max(b, (uint64_t)size))
		return -EFBIG;
	if ((uint64_t)size <= b->len) {
		b->len = (size_t)size;
		if (b->data != NULL)
			b->data[b->len] = '\0';
		return 0;
	}
	return buf_zero_extend(b, (uint64_t)size);
}
