/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1: MOUNT/<sandbox>/files/ without the file extension, in two
 * modes (doc/protocol-v1.md, SEMANTICS.md):
 *
 *  - agent sessions whose agent speaks strict protocol v1: listings and
 *    attributes come from `find -printf` run through /v1/exec (argv, no
 *    shell); contents are read and written whole with /v1/files into a
 *    per-open buffer (32 MiB at most); mkdir uses /v1/mkdir; every other
 *    change runs a coreutils command (rm, rmdir, mv, ln, chmod, truncate,
 *    touch) through /v1/exec;
 *  - native (legacy) sessions: the provider's native_read and native_exec
 *    (a shell command line running the same find). Native sessions are
 *    read-only here: every change is EROFS.
 *
 * A failed command's errno is recovered from its diagnostics by matching
 * strerror() texts (fs_files_v1_i.h). Commands are never retried: exec is
 * not idempotent, and an outcome the transport cannot know is EIO.
 *
 * Attributes a listing or stat returned are kept in the mount's cache for
 * the attribute timeout, so `ls -l` costs one command. Open files are kept
 * in a registry by path, so that a stat of a file being written reports
 * the buffered size and a change of times by path (futimens, cp -p) is
 * applied after the buffered contents reach the sandbox.
 *
 * It does not use the file extension (fs_files.c does), and it holds no
 * lock across a round trip to the sandbox.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "client/agent_client.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_files_v1_i.h"
#include "fs/fs_i.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* A command's stdout kept (a listing), and its stderr kept for the errno
 * and the log. */
#define OUT_MAX (32UL * 1024 * 1024)
#define ERR_KEEP 4096UL
#define CMD_ARGS 16
#define CMD_TIMEOUT_DEFAULT_MS 60000L
/* What the log shows of a command's diagnostics. */
#define REASON_MAX 300
/* The bound of a buffer a whole file is read into: the transfer limit,
 * plus the two bytes by which a base64 decoder's reservation (the upper
 * bound of the decoded size) may pass the bytes that decode. Writes are
 * held to FS_V1_FILE_MAX itself. */
#define LOAD_MAX (FS_V1_FILE_MAX + 2)
/* The marker a native command line prints after a complete output (a
 * record whose type letter find never prints). */
#define NATIVE_END "E"

/* ---- find -printf records ------------------------------------------------ */

enum proto_ftype fs_files_v1_ftype(char c)
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

/* ---- sessions ------------------------------------------------------------ */

static bool is_native(struct sbx *sb)
{
	enum transport_kind k;

	pthread_mutex_lock(&sb->lock);
	k = sb->kind;
	pthread_mutex_unlock(&sb->lock);
	return k == TRANSPORT_NATIVE;
}

static bool has_native_exec(const struct sbx *sb)
{
	return sb->fs->prov->ops->native_exec != NULL;
}

/* Changes are refused on native sessions and read-only mounts. */
static int may_change(struct sbx *sb)
{
	if (sb->fs->o.ro || is_native(sb))
		return -EROFS;
	return 0;
}

static long cmd_timeout_ms(const struct sbx *sb)
{
	return sb->fs->o.timeout_s > 0 ? sb->fs->o.timeout_s * 1000
				       : CMD_TIMEOUT_DEFAULT_MS;
}

/* A failure of this module's own making, logged once like the others. */
static int fail(struct sbx *sb, const char *op, const char *rel,
		enum sbx_code code, int e, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static int fail(struct sbx *sb, const char *op, const char *rel,
		enum sbx_code code, int e, const char *fmt, ...)
{
	struct sbx_error err;
	va_list ap;

	sbx_error_clear(&err);
	sbx_error_set(&err, code, NULL, "%s", "");
	va_start(ap, fmt);
	vsnprintf(err.reason, sizeof(err.reason), fmt, ap);
	va_end(ap);
	err.err = e;
	return sbfs_fail(sb->fs, sb->id, op, rel, &err);
}

/* The parent of a relative path ("" for a top-level name) into out. */
static void parent_of(const char *rel, char *out, size_t size)
{
	const char *slash = strrchr(rel, '/');
	size_t n = slash != NULL ? (size_t)(slash - rel) : 0;

	if (n >= size)
		n = size - 1;
	memcpy(out, rel, n);
	out[n] = '\0';
}

static void forget(struct sbx *sb, const char *rel, bool tree, bool parent)
{
	if (tree)
		cache_forget_tree(sb->fs->cache, sb->id, rel);
	else
		cache_forget(sb->fs->cache, sb->id, rel);
	if (parent) {
		char *p = xmalloc(strlen(rel) + 1);

		parent_of(rel, p, strlen(rel) + 1);
		cache_forget(sb->fs->cache, sb->id, p);
		free(p);
	}
}

/* ---- commands ------------------------------------------------------------ */

struct cmd {
	char *argv[CMD_ARGS + 1];
	size_t argc;
};

static void cmd_add(struct cmd *c, const char *s)
{
	if (c->argc >= CMD_ARGS)
		fatalx("fs_files_v1: a command has more than %d words",
		       CMD_ARGS);
	c->argv[c->argc++] = xstrdup(s);
	c->argv[c->argc] = NULL;
}

static void cmd_addf(struct cmd *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void cmd_addf(struct cmd *c, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	cmd_add(c, tmp);
}

/* A path operand: relative to the session root (the command's working
 * directory), with "./" so a name that starts with '-' is no option. */
static void cmd_add_path(struct cmd *c, const char *rel)
{
	if (*rel == '\0') {
		cmd_add(c, ".");
		return;
	}
	if (c->argc >= CMD_ARGS)
		fatalx("fs_files_v1: a command has more than %d words",
		       CMD_ARGS);
	c->argv[c->argc++] = xasprintf("./%s", rel);
	c->argv[c->argc] = NULL;
}

static void cmd_cleanup(struct cmd *c)
{
	size_t i;

	for (i = 0; i < c->argc; i++)
		free(c->argv[i]);
	c->argc = 0;
	c->argv[0] = NULL;
}

struct cmd_out {
	struct buf out; /* stdout, up to OUT_MAX */
	struct buf err; /* the first ERR_KEEP bytes of stderr */
	int code; /* exit status */
	bool cut; /* stdout is not all the command printed */
};

static void cmd_out_init(struct cmd_out *o)
{
	memset(o, 0, sizeof(*o));
	buf_init(&o->out, OUT_MAX);
	buf_init(&o->err, ERR_KEEP);
}

static void cmd_out_cleanup(struct cmd_out *o)
{
	buf_cleanup(&o->out);
	buf_cleanup(&o->err);
}

static void keep_err(struct buf *b, const void *p, size_t n)
{
	size_t room = ERR_KEEP - b->len;

	if (n > room)
		n = room;
	if (n > 0)
		(void)!buf_append(b, p, n);
}

static int on_frame(void *arg, const struct proto_frame *f)
{
	struct cmd_out *o = arg;

	if (f->type == PROTO_FRAME_STDERR) {
		keep_err(&o->err, f->data, f->len);
		return 0;
	}
	if (f->type != PROTO_FRAME_STDOUT || f->len == 0)
		return 0;
	if (buf_append(&o->out, f->data, f->len) < 0) {
		/* Stop here: the agent kills the command when the stream
		 * is dropped, and every command read this way only looks. */
		o->cut = true;
		return -EFBIG;
	}
	return 0;
}

#define RUN_COMPLETE 0x1u /* the whole stdout matters (listings, stats) */

/* The agent: argv through /v1/exec. */
static int run_agent(struct sbx *sb, const char *op, const char *rel,
		     struct cmd *c, struct cmd_out *o)
{
	static char lc_all[] = "LC_ALL=C";
	char *env[] = {lc_all, NULL};
	struct proto_exec_req req;
	struct sbx_error err;
	struct ac_exit ex;
	int rc;

	memset(&req, 0, sizeof(req));
	req.argv = c->argv;
	req.argc = c->argc;
	req.timeout_ms = (uint64_t)cmd_timeout_ms(sb);
	req.cwd = NULL;
	/* Diagnostics in the C locale: their strerror texts are matched. */
	req.env = env;
	req.envc = 1;
	sbx_error_clear(&err);
	rc = ac_exec(sb->fs->t, sb->id, &req, on_frame, o, &ex, &err);
	if (rc < 0 && o->cut)
		return -EFBIG;
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, op, rel, &err);
	o->code = ex.code;
	if (ex.truncated)
		o->cut = true;
	return 0;
}

/* A native session: a shell command line through the provider. */
static int run_native(struct sbx *sb, const char *op, const char *rel,
		      struct cmd *c, unsigned flags, struct cmd_out *o)
{
	struct provider *prov = sb->fs->prov;
	struct provider_exec_result res;
	struct buf line = BUF_INIT(0);
	struct sbx_error err;
	size_t i;
	int rc;

	if (prov->ops->native_exec == NULL)
		return fail(sb, op, rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
			    "the provider runs no commands in native "
			    "sessions");
	memset(&res, 0, sizeof(res));
	buf_init(&res.out, OUT_MAX);
	buf_init(&res.err, ERR_KEEP);
	rc = buf_append_str(&line, "LC_ALL=C");
	for (i = 0; rc == 0 && i < c->argc; i++) {
		rc = buf_append(&line, " ", 1);
		if (rc == 0)
			rc = fs_files_v1_shell_quote(&line, c->argv[i]);
	}
	/* The provider's output may be cut without a word: a marker after
	 * the command's own output says it all came. */
	if (rc == 0 && (flags & RUN_COMPLETE))
		rc = buf_append_str(&line, " && printf '" NATIVE_END "\\0'");
	if (rc < 0) {
		rc = fail(sb, op, rel, SBX_INVALID_INPUT, -rc,
			  "the command line could not be built");
		goto out;
	}
	sbx_error_clear(&err);
	rc = prov->ops->native_exec(prov, sb->id, line.data, NULL, &res, &err);
	if (rc < 0) {
		rc = sbfs_fail(sb->fs, sb->id, op, rel, &err);
		goto out;
	}
	if (!res.has_exit) {
		rc = fail(sb, op, rel, SBX_OUTCOME_UNKNOWN, EIO,
			  "%s: the command reported no exit status",
			  c->argv[0]);
		goto out;
	}
	o->code = res.exit_code;
	keep_err(&o->err, res.err.data, res.err.len);
	buf_cleanup(&o->out);
	o->out = res.out;
	memset(&res.out, 0, sizeof(res.out));
	if ((flags & RUN_COMPLETE) && o->code == 0) {
		size_t n = o->out.len;
		const char *d = o->out.data;

		if (n >= 2 && d[n - 2] == NATIVE_END[0] && d[n - 1] == '\0' &&
		    (n == 2 || d[n - 3] == '\0'))
			o->out.len -= 2;
		else
			o->cut = true;
	}
	rc = 0;
out:
	provider_exec_result_cleanup(&res);
	buf_cleanup(&line);
	return rc;
}

/*
 * Run c in the session root. Returns 0 when it ran (o->code holds its exit
 * status), -EFBIG (not logged) when RUN_COMPLETE was asked and stdout came
 * incomplete, or another negative errno (logged) when it could not run.
 */
static int run(struct sbx *sb, const char *op, const char *rel, struct cmd *c,
	       unsigned flags, struct cmd_out *o)
{
	int rc;

	if (is_native(sb))
		rc = run_native(sb, op, rel, c, flags, o);
	else
		rc = run_agent(sb, op, rel, c, o);
	if (rc == 0 && (flags & RUN_COMPLETE) && o->cut && o->code == 0)
		rc = -EFBIG;
	return rc;
}

/* A readable excerpt of the diagnostics: the first line, control bytes
 * shown as '?'. */
static void excerpt(const struct buf *b, char *out, size_t size)
{
	size_t i, n = 0;

	for (i = 0; i < b->len && n + 1 < size; i++) {
		unsigned char ch = (unsigned char)b->data[i];

		if (ch == '\n')
			break;
		out[n++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	out[n] = '\0';
}

/* A command that exited non-zero: the errno its diagnostics name. */
static int cmd_failed(struct sbx *sb, const char *op, const char *rel,
		      const struct cmd *c, const struct cmd_out *o)
{
	char why[REASON_MAX];
	int e = fs_files_v1_errno_from_text(o->err.data, o->err.len);

	excerpt(&o->err, why, sizeof(why));
	return fail(sb, op, rel, SBX_COMMAND_FAILED, e != 0 ? e : EIO,
		    "%s exited %d: %s", c->argv[0], o->code,
		    *why ? why : "(no diagnostics)");
}

/* Run a command that changes something and only reports success. */
static int run_change(struct sbx *sb, const char *op, const char *rel,
		      struct cmd *c)
{
	struct cmd_out o;
	int rc;

	cmd_out_init(&o);
	rc = run(sb, op, rel, c, 0, &o);
	if (rc == 0 && o.code != 0)
		rc = cmd_failed(sb, op, rel, c, &o);
	cmd_out_cleanup(&o);
	return rc;
}

/* ---- attributes ---------------------------------------------------------- */

static void find_cmd(struct cmd *c, const char *rel, bool list, bool short_form)
{
	cmd_add(c, "find");
	cmd_add_path(c, rel);
	if (list) {
		cmd_add(c, "-mindepth");
		cmd_add(c, "1");
		cmd_add(c, "-maxdepth");
		cmd_add(c, "1");
	} else {
		cmd_add(c, "-maxdepth");
		cmd_add(c, "0");
	}
	cmd_add(c, "-printf");
	cmd_add(c, short_form ? FS_V1_FIND_FORMAT_SHORT : FS_V1_FIND_FORMAT);
}

/* One path's attributes (lstat) from the sandbox, remembered in the
 * cache. *target (may be NULL) gets a symlink's target (heap). */
static int stat_remote(struct sbx *sb, const char *op, const char *rel,
		       struct proto_attr *a, char **target)
{
	uint64_t mark = cache_mark(sb->fs->cache);
	struct cmd c = {{NULL}, 0};
	struct cmd_out o;
	struct fs_v1_rec rec;
	size_t pos = 0;
	int rc;

	cmd_out_init(&o);
	find_cmd(&c, rel, false, false);
	rc = run(sb, op, rel, &c, RUN_COMPLETE, &o);
	if (rc == -EFBIG) {
		rc = fail(sb, op, rel, SBX_UNEXPECTED_FORMAT, EIO,
			  "find: the output was cut short");
		goto out;
	}
	if (rc < 0)
		goto out;
	if (o.code != 0) {
		rc = cmd_failed(sb, op, rel, &c, &o);
		goto out;
	}
	rc = fs_files_v1_parse(o.out.data, o.out.len, &pos, false, &rec);
	if (rc != 1 || pos != o.out.len) {
		rc = fail(sb, op, rel, SBX_UNEXPECTED_FORMAT, EIO,
			  "find printed %s",
			  rc == 1   ? "more than one record"
			  : rc == 0 ? "nothing"
				    : "a malformed record");
		goto out;
	}
	cache_put_seen(sb->fs->cache, sb->id, rel, &rec.attr,
		       rec.attr.type == PROTO_FT_SYMLINK ? rec.target : NULL,
		       mark);
	*a = rec.attr;
	if (target != NULL)
		*target = rec.attr.type == PROTO_FT_SYMLINK
				  ? xstrdup(rec.target)
				  : NULL;
	rc = 0;
out:
	cmd_cleanup(&c);
	cmd_out_cleanup(&o);
	return rc;
}

/* Attributes from the cache, else from the sandbox. */
static int attr_of(struct sbx *sb, const char *op, const char *rel,
		   struct proto_attr *a, char **target)
{
	if (cache_get(sb->fs->cache, sb->id, rel, a, target))
		return 0;
	return stat_remote(sb, op, rel, a, target);
}

/* ---- open files ---------------------------------------------------------- */

struct v1_handle {
	pthread_mutex_t lock; /* guards the fields up to the registry's */
	pthread_cond_t idle; /* an upload ended */
	struct buf data;
	uint64_t gen; /* bumped by every change of data */
	uint64_t saved_gen; /* what the sandbox holds */
	uint64_t failed_gen; /* an upload of this generation failed */
	bool uploading;
	bool append;
	bool native;
	/* The registry's, guarded by reg_lock. */
	struct sbfs *fs;
	char id[PROVIDER_ID_MAX + 1];
	char *rel;
	unsigned refs;
	struct v1_handle *prev, *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct v1_handle *reg_head;

static struct v1_handle *handle_new(struct sbx *sb, const char *rel,
				    bool append, bool native)
{
	struct v1_handle *h = xcalloc(1, sizeof(*h));

	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->idle, NULL);
	buf_init(&h->data, LOAD_MAX);
	h->append = append;
	h->native = native;
	h->fs = sb->fs;
	snprintf(h->id, sizeof(h->id), "%s", sb->id);
	h->rel = xstrdup(rel);
	h->refs = 1;
	return h;
}

static void handle_free(struct v1_handle *h)
{
	buf_cleanup(&h->data);
	pthread_cond_destroy(&h->idle);
	pthread_mutex_destroy(&h->lock);
	free(h->rel);
	free(h);
}

static void reg_add(struct v1_handle *h)
{
	pthread_mutex_lock(&reg_lock);
	h->prev = NULL;
	h->next = reg_head;
	if (reg_head != NULL)
		reg_head->prev = h;
	reg_head = h;
	pthread_mutex_unlock(&reg_lock);
}

/* Drop the open file's reference (and its registry entry); the last
 * reference frees it. */
static void reg_release(struct v1_handle *h)
{
	bool last;

	pthread_mutex_lock(&reg_lock);
	if (h->prev != NULL || reg_head == h) {
		if (h->prev != NULL)
			h->prev->next = h->next;
		else
			reg_head = h->next;
		if (h->next != NULL)
			h->next->prev = h->prev;
		h->prev = h->next = NULL;
	}
	last = --h->refs == 0;
	pthread_mutex_unlock(&reg_lock);
	if (last)
		handle_free(h);
}

static void reg_unref(struct v1_handle *h)
{
	bool last;

	pthread_mutex_lock(&reg_lock);
	last = --h->refs == 0;
	pthread_mutex_unlock(&reg_lock);
	if (last)
		handle_free(h);
}

/* FUSE passes the current path with every call: a rename of an open
 * file moves its registry entry along. */
static void reg_set_rel(struct v1_handle *h, const char *rel)
{
	pthread_mutex_lock(&reg_lock);
	if (strcmp(h->rel, rel) != 0) {
		free(h->rel);
		h->rel = xstrdup(rel);
	}
	pthread_mutex_unlock(&reg_lock);
}

static bool reg_match(const struct v1_handle *h, const struct sbx *sb,
		      const char *rel)
{
	return h->fs == sb->fs && strcmp(h->id, sb->id) == 0 &&
	       strcmp(h->rel, rel) == 0;
}

static bool handle_dirty(struct v1_handle *h)
{
	return h->gen != h->saved_gen;
}

/* The size of the newest unsaved contents of rel, if an open file holds
 * some. */
static bool reg_dirty_size(const struct sbx *sb, const char *rel,
			   uint64_t *size)
{
	struct v1_handle *h;
	bool found = false;

	pthread_mutex_lock(&reg_lock);
	for (h = reg_head; h != NULL && !found; h = h->next) {
		if (!reg_match(h, sb, rel))
			continue;
		pthread_mutex_lock(&h->lock);
		if (handle_dirty(h)) {
			*size = h->data.len;
			found = true;
		}
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&reg_lock);
	return found;
}

static struct v1_handle *handle_of(const struct fuse_file_info *fi)
{
	return fi != NULL ? (struct v1_handle *)(uintptr_t)fi->fh : NULL;
}

/* Wait for another upload of h to end (h->lock held). */
static int wait_idle(struct sbx *sb, struct v1_handle *h)
{
	struct timespec until;
	long ms = cmd_timeout_ms(sb) * 2 + 10000;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	while (h->uploading && rc == 0)
		rc = pthread_cond_timedwait(&h->idle, &h->lock, &until);
	return h->uploading ? -ETIMEDOUT : 0;
}

/*
 * Send h's contents with one whole-file PUT when they changed since the
 * last one. The bytes are copied out first so that no lock is held during
 * the upload and writes can go on; uploads of one open file are one at a
 * time, so an older copy never lands after a newer one.
 */
static int upload(struct sbx *sb, const char *op, const char *rel,
		  struct v1_handle *h)
{
	struct buf snap = BUF_INIT(FS_V1_FILE_MAX);
	struct sbx_error err;
	uint64_t gen;
	int rc;

	pthread_mutex_lock(&h->lock);
	if (wait_idle(sb, h) < 0) {
		pthread_mutex_unlock(&h->lock);
		return fail(sb, op, rel, SBX_UNREACHABLE, EIO,
			    "another upload of the file did not end");
	}
	if (!handle_dirty(h)) {
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	rc = buf_append(&snap, h->data.data, h->data.len);
	if (rc < 0) {
		pthread_mutex_unlock(&h->lock);
		return fail(sb, op, rel, SBX_INVALID_INPUT, -rc,
			    "no memory for the upload");
	}
	gen = h->gen;
	h->uploading = true;
	pthread_mutex_unlock(&h->lock);

	sbx_error_clear(&err);
	rc = ac_write_file(sb->fs->t, sb->id, rel, snap.data, snap.len, &err);

	pthread_mutex_lock(&h->lock);
	h->uploading = false;
	if (rc == 0 && gen > h->saved_gen)
		h->saved_gen = gen;
	if (rc < 0)
		h->failed_gen = gen;
	pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->lock);
	buf_cleanup(&snap);
	cache_forget(sb->fs->cache, sb->id, rel);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, op, rel, &err);
	return 0;
}

/* Save what open files of rel hold before a change that a later upload
 * would undo (times). */
static int upload_path(struct sbx *sb, const char *op, const char *rel)
{
	struct v1_handle *found[16];
	struct v1_handle *h;
	size_t n = 0, i;
	int rc = 0, one;

	pthread_mutex_lock(&reg_lock);
	for (h = reg_head; h != NULL && n < 16; h = h->next) {
		if (!reg_match(h, sb, rel) || h->native)
			continue;
		h->refs++;
		found[n++] = h;
	}
	pthread_mutex_unlock(&reg_lock);
	for (i = 0; i < n; i++) {
		one = upload(sb, op, rel, found[i]);
		if (rc == 0)
			rc = one;
		reg_unref(found[i]);
	}
	return rc;
}

/* The whole file into b (bounded by b->max). */
static int load(struct sbx *sb, const char *op, const char *rel, struct buf *b)
{
	struct provider *prov = sb->fs->prov;
	struct sbx_error err;
	int rc;

	sbx_error_clear(&err);
	if (is_native(sb)) {
		if (prov->ops->native_read == NULL)
			return fail(sb, op, rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
				    "the provider reads no files in native "
				    "sessions");
		rc = prov->ops->native_read(prov, sb->id, rel, b, &err);
	} else {
		rc = ac_read_file(sb->fs->t, sb->id, rel, b, &err);
	}
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, op, rel, &err);
	return 0;
}

/* ---- the operations ------------------------------------------------------ */

/*
 * A native session whose provider runs no commands can still read the
 * files it names: a path is a regular file when its contents can be read
 * (and its size is theirs). The session root is a directory.
 */
static int native_stat_by_read(struct sbx *sb, const char *rel, struct stat *st)
{
	struct buf b = BUF_INIT(LOAD_MAX);
	int rc;

	if (*rel == '\0') {
		sbfs_synth_stat(sb->fs, st, true, 0755, 0);
		return 0;
	}
	if (sb->fs->prov->ops->native_read == NULL)
		return fail(sb, "getattr", rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
			    "the provider lists no files in native sessions");
	rc = load(sb, "getattr", rel, &b);
	if (rc == 0)
		sbfs_synth_stat(sb->fs, st, false, 0444, (off_t)b.len);
	buf_cleanup(&b);
	return rc;
}

static int v1_getattr(struct sbx *sb, const char *rel, struct stat *st,
		      struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	struct proto_attr a;
	uint64_t size = 0;
	bool dirty = false;
	int rc;

	if (is_native(sb) && !has_native_exec(sb))
		return native_stat_by_read(sb, rel, st);
	rc = attr_of(sb, "getattr", rel, &a, NULL);
	if (rc < 0)
		return rc;
	sbfs_attr_to_stat(sb, &a, st);
	if (h != NULL) {
		pthread_mutex_lock(&h->lock);
		dirty = handle_dirty(h);
		size = h->data.len;
		pthread_mutex_unlock(&h->lock);
	} else {
		dirty = reg_dirty_size(sb, rel, &size);
	}
	if (dirty && a.type == PROTO_FT_FILE) {
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
	}
	return 0;
}

/* rel + "/" + name, or name at the root. */
static char *child_path(const char *rel, const char *name)
{
	return *rel == '\0' ? xstrdup(name) : xasprintf("%s/%s", rel, name);
}

/* A listing: the full records, or (when they are more than a command's
 * output carries) names and types only. */
static int list_dir(struct sbx *sb, const char *rel, struct cmd_out *o,
		    bool *short_form)
{
	struct cmd c = {{NULL}, 0};
	int rc;

	*short_form = false;
	find_cmd(&c, rel, true, false);
	rc = run(sb, "readdir", rel, &c, RUN_COMPLETE, o);
	if (rc == -EFBIG) {
		log_debug("sandbox %s: readdir %s: the listing is too large "
			  "with attributes, listing names only",
			  sb->id, rel);
		cmd_cleanup(&c);
		cmd_out_cleanup(o);
		cmd_out_init(o);
		*short_form = true;
		find_cmd(&c, rel, true, true);
		rc = run(sb, "readdir", rel, &c, RUN_COMPLETE, o);
		if (rc == -EFBIG)
			rc = fail(sb, "readdir", rel, SBX_COMMAND_FAILED, EFBIG,
				  "the listing is larger than a command's "
				  "output may be");
	}
	if (rc == 0 && o->code != 0) {
		/* find lists what it can and fails for entries that went
		 * away while it ran (a busy build directory): such a listing
		 * is what readdir(3) would have seen. Without output, the
		 * directory itself failed. */
		if (o->out.len > 0 && !o->cut)
			log_debug("sandbox %s: readdir %s: %s exited %d, "
				  "keeping what it listed",
				  sb->id, rel, c.argv[0], o->code);
		else
			rc = cmd_failed(sb, "readdir", rel, &c, o);
	}
	cmd_cleanup(&c);
	return rc;
}

static int v1_readdir(struct sbx *sb, const char *rel, void *buf,
		      fuse_fill_dir_t filler, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags fl)
{
	uint64_t mark = cache_mark(sb->fs->cache);
	struct cmd_out o;
	struct fs_v1_rec rec;
	size_t pos = 0;
	bool short_form;
	int rc;

	(void)off;
	(void)fi;
	if (is_native(sb) && !has_native_exec(sb))
		return fail(sb, "readdir", rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
			    "the provider lists no files in native sessions");
	cmd_out_init(&o);
	rc = list_dir(sb, rel, &o, &short_form);
	if (rc < 0)
		goto out;
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	while ((rc = fs_files_v1_parse(o.out.data, o.out.len, &pos, short_form,
				       &rec)) == 1) {
		struct stat st;
		char *child;
		bool full;

		if (!path_component_valid(rec.name)) {
			rc = -EBADMSG;
			break;
		}
		full = !short_form && rec.attr.type != PROTO_FT_UNKNOWN;
		child = child_path(rel, rec.name);
		if (full) {
			cache_put_seen(sb->fs->cache, sb->id, child, &rec.attr,
				       rec.attr.type == PROTO_FT_SYMLINK
					       ? rec.target
					       : NULL,
				       mark);
			sbfs_attr_to_stat(sb, &rec.attr, &st);
		} else {
			sbfs_attr_to_stat(sb, &rec.attr, &st);
			st.st_mode &= S_IFMT;
		}
		free(child);
		if (filler(buf, rec.name, &st, 0,
			   full && (fl & FUSE_READDIR_PLUS) ? FUSE_FILL_DIR_PLUS
							    : 0) != 0)
			break;
	}
	if (rc < 0)
		rc = fail(sb, "readdir", rel, SBX_UNEXPECTED_FORMAT, EIO,
			  "find printed a malformed record");
	else
		rc = 0;
out:
	cmd_out_cleanup(&o);
	return rc;
}

static int v1_open(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	bool trunc = (fi->flags & O_TRUNC) != 0;
	struct v1_handle *h;
	int rc;

	if (acc != O_RDONLY || trunc) {
		rc = may_change(sb);
		if (rc < 0)
			return rc;
	}
	h = handle_new(sb, rel, (fi->flags & O_APPEND) != 0, is_native(sb));
	if (trunc) {
		/* Emptied: that reaches the sandbox at close even when
		 * nothing is written. */
		h->gen = 1;
	} else {
		rc = load(sb, "open", rel, &h->data);
		if (rc < 0) {
			handle_free(h);
			return rc;
		}
	}
	reg_add(h);
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

static int chmod_remote(struct sbx *sb, const char *op, const char *rel,
			mode_t mode)
{
	struct cmd c = {{NULL}, 0};
	int rc;

	cmd_add(&c, "chmod");
	/* Five digits: GNU chmod keeps a directory's set-id bits for a
	 * shorter number, and chmod(2) does not. */
	cmd_addf(&c, "%05o", (unsigned)(mode & 07777));
	cmd_add(&c, "--");
	cmd_add_path(&c, rel);
	rc = run_change(sb, op, rel, &c);
	cmd_cleanup(&c);
	cache_forget(sb->fs->cache, sb->id, rel);
	return rc;
}

static int v1_create(struct sbx *sb, const char *rel, mode_t mode,
		     struct fuse_file_info *fi)
{
	struct sbx_error err;
	struct v1_handle *h;
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	/* Made at once, so that the caller's next stat finds it. */
	sbx_error_clear(&err);
	rc = ac_write_file(sb->fs->t, sb->id, rel, "", 0, &err);
	forget(sb, rel, false, true);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "create", rel, &err);
	/* The agent creates files with 0666 (less its umask). */
	if ((mode & 07777) != 0666) {
		rc = chmod_remote(sb, "create", rel, mode);
		if (rc < 0)
			return rc;
	}
	h = handle_new(sb, rel, (fi->flags & O_APPEND) != 0, false);
	reg_add(h);
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

static int v1_read(struct sbx *sb, const char *rel, char *buf, size_t size,
		   off_t off, struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	int rc;

	(void)sb;
	(void)rel;
	if (h == NULL)
		return -EBADF;
	pthread_mutex_lock(&h->lock);
	rc = fs_files_v1_buf_read(&h->data, buf, size, off);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static int v1_write(struct sbx *sb, const char *rel, const char *buf,
		    size_t size, off_t off, struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	int rc;

	if (h == NULL)
		return -EBADF;
	if (h->native)
		return -EROFS;
	reg_set_rel(h, rel);
	pthread_mutex_lock(&h->lock);
	/* Appends go to the end of what this open file holds, whatever
	 * size the kernel last heard of. */
	if (h->append)
		off = (off_t)h->data.len;
	rc = fs_files_v1_buf_write(&h->data, buf, size, off);
	if (rc > 0)
		h->gen++;
	pthread_mutex_unlock(&h->lock);
	if (rc == -EFBIG)
		log_debug("sandbox %s: write %s: past the %lu byte limit of "
			  "whole-file transfers",
			  sb->id, rel, (unsigned long)FS_V1_FILE_MAX);
	return rc;
}

static int v1_flush(struct sbx *sb, const char *rel, struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);

	if (h == NULL || h->native)
		return 0;
	reg_set_rel(h, rel);
	return upload(sb, "flush", rel, h);
}

static int v1_fsync(struct sbx *sb, const char *rel, int datasync,
		    struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);

	(void)datasync;
	if (h == NULL || h->native)
		return 0;
	reg_set_rel(h, rel);
	return upload(sb, "fsync", rel, h);
}

static int v1_release(struct sbx *sb, const char *rel,
		      struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	bool send;

	if (h == NULL)
		return 0;
	/* Changes made after the last flush (through a shared mapping)
	 * are sent now; a generation whose upload failed was reported to
	 * its close() and is not sent again. */
	pthread_mutex_lock(&h->lock);
	send = !h->native && handle_dirty(h) && h->failed_gen != h->gen;
	pthread_mutex_unlock(&h->lock);
	if (send)
		(void)upload(sb, "release", rel != NULL ? rel : h->rel, h);
	fi->fh = 0;
	reg_release(h);
	return 0;
}

static int v1_mkdir(struct sbx *sb, const char *rel, mode_t mode)
{
	struct proto_attr a;
	struct sbx_error err;
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	/* /v1/mkdir is mkdir -p: an existing path is no error there. */
	rc = attr_of(sb, "mkdir", rel, &a, NULL);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	sbx_error_clear(&err);
	rc = ac_mkdir_p(sb->fs->t, sb->id, rel, &err);
	forget(sb, rel, false, true);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "mkdir", rel, &err);
	/* New directories get 0777 (less the agent's umask). */
	if ((mode & 07777) != 0777)
		rc = chmod_remote(sb, "mkdir", rel, mode);
	return rc;
}

static int v1_unlink(struct sbx *sb, const char *rel)
{
	struct cmd c = {{NULL}, 0};
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	cmd_add(&c, "rm");
	cmd_add(&c, "--");
	cmd_add_path(&c, rel);
	rc = run_change(sb, "unlink", rel, &c);
	cmd_cleanup(&c);
	forget(sb, rel, false, true);
	return rc;
}

static int v1_rmdir(struct sbx *sb, const char *rel)
{
	struct cmd c = {{NULL}, 0};
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	cmd_add(&c, "rmdir");
	cmd_add(&c, "--");
	cmd_add_path(&c, rel);
	rc = run_change(sb, "rmdir", rel, &c);
	cmd_cleanup(&c);
	forget(sb, rel, true, true);
	return rc;
}

static int v1_rename(struct sbx *sb, const char *from, const char *to,
		     unsigned int flags)
{
	struct cmd c = {{NULL}, 0};
	struct cmd_out o;
	bool noreplace = (flags & RENAME_NOREPLACE) != 0;
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	if ((flags & RENAME_EXCHANGE) != 0 ||
	    (flags & ~(unsigned)RENAME_NOREPLACE) != 0)
		return -EINVAL;
	cmd_add(&c, "mv");
	if (noreplace) {
		/* mv -n skips an existing target without an error (or
		 * with "not replacing", newer coreutils): -v prints a line
		 * only for a rename it did. */
		cmd_add(&c, "-n");
		cmd_add(&c, "-v");
	}
	cmd_add(&c, "-T");
	cmd_add(&c, "--");
	cmd_add_path(&c, from);
	cmd_add_path(&c, to);
	cmd_out_init(&o);
	rc = run(sb, "rename", from, &c, 0, &o);
	if (rc == 0 && o.code != 0) {
		/* rename(2) of two links to one file does nothing and
		 * succeeds; mv calls it an error. */
		if (contains(o.err.data, o.err.len, "are the same file"))
			rc = 0;
		else
			rc = cmd_failed(sb, "rename", from, &c, &o);
	} else if (rc == 0 && noreplace && o.out.len == 0) {
		rc = -EEXIST;
	}
	cmd_out_cleanup(&o);
	cmd_cleanup(&c);
	forget(sb, from, true, true);
	forget(sb, to, true, true);
	return rc;
}

static int v1_link(struct sbx *sb, const char *from, const char *to)
{
	struct cmd c = {{NULL}, 0};
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	cmd_add(&c, "ln");
	cmd_add(&c, "-P");
	cmd_add(&c, "-T");
	cmd_add(&c, "--");
	cmd_add_path(&c, from);
	cmd_add_path(&c, to);
	rc = run_change(sb, "link", to, &c);
	cmd_cleanup(&c);
	forget(sb, from, false, false);
	forget(sb, to, false, true);
	return rc;
}

static int v1_symlink(struct sbx *sb, const char *target, const char *rel)
{
	struct cmd c = {{NULL}, 0};
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	cmd_add(&c, "ln");
	cmd_add(&c, "-s");
	cmd_add(&c, "-T");
	cmd_add(&c, "--");
	cmd_add(&c, target);
	cmd_add_path(&c, rel);
	rc = run_change(sb, "symlink", rel, &c);
	cmd_cleanup(&c);
	forget(sb, rel, false, true);
	return rc;
}

static int v1_readlink(struct sbx *sb, const char *rel, char *buf, size_t size)
{
	struct proto_attr a;
	char *target = NULL, *shown;
	size_t n;
	int rc;

	if (size == 0)
		return -EINVAL;
	if (is_native(sb) && !has_native_exec(sb))
		return fail(sb, "readlink", rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
			    "the provider lists no files in native sessions");
	rc = attr_of(sb, "readlink", rel, &a, &target);
	if (rc < 0)
		return rc;
	if (a.type != PROTO_FT_SYMLINK || target == NULL) {
		free(target);
		return -EINVAL;
	}
	shown = sbfs_link_show(sb->fs, rel, target);
	n = strlen(shown);
	if (n >= size)
		n = size - 1;
	memcpy(buf, shown, n);
	buf[n] = '\0';
	free(shown);
	free(target);
	return 0;
}

static int v1_chmod(struct sbx *sb, const char *rel, mode_t mode,
		    struct fuse_file_info *fi)
{
	int rc = may_change(sb);

	(void)fi;
	if (rc < 0)
		return rc;
	return chmod_remote(sb, "chmod", rel, mode);
}

static int v1_truncate(struct sbx *sb, const char *rel, off_t size,
		       struct fuse_file_info *fi)
{
	struct v1_handle *h = handle_of(fi);
	struct cmd c = {{NULL}, 0};
	int rc = may_change(sb);

	if (rc < 0)
		return rc;
	if (h != NULL) {
		/* An open file: its buffer, sent at flush. */
		reg_set_rel(h, rel);
		pthread_mutex_lock(&h->lock);
		rc = fs_files_v1_buf_truncate(&h->data, size);
		if (rc == 0)
			h->gen++;
		pthread_mutex_unlock(&h->lock);
		return rc;
	}
	if (size < 0)
		return -EINVAL;
	cmd_add(&c, "truncate");
	cmd_add(&c, "-c");
	cmd_add(&c, "-s");
	cmd_addf(&c, "%lld", (long long)size);
	cmd_add(&c, "--");
	cmd_add_path(&c, rel);
	rc = run_change(sb, "truncate", rel, &c);
	cmd_cleanup(&c);
	cache_forget(sb->fs->cache, sb->id, rel);
	return rc;
}

/* "@SEC.NSEC" for touch -d, exact for times before 1970 too. */
static void touch_date(const struct timespec *ts, char *out, size_t size)
{
	long long sec = (long long)ts->tv_sec;
	long nsec = ts->tv_nsec;

	if (sec < 0 && nsec > 0)
		snprintf(out, size, "@-%lld.%09ld", -(sec + 1),
			 1000000000L - nsec);
	else
		snprintf(out, size, "@%lld.%09ld", sec, nsec);
}

/* One touch -h: which is "-a", "-m" or NULL (both); ts NULL for now. */
static int touch_one(struct sbx *sb, const char *rel, const char *which,
		     const struct timespec *ts)
{
	struct cmd c = {{NULL}, 0};
	char date[48];
	int rc;

	cmd_add(&c, "touch");
	cmd_add(&c, "-h");
	if (which != NULL)
		cmd_add(&c, which);
	if (ts != NULL) {
		touch_date(ts, date, sizeof(date));
		cmd_add(&c, "-d");
		cmd_add(&c, date);
	}
	cmd_add(&c, "--");
	cmd_add_path(&c, rel);
	rc = run_change(sb, "utimens", rel, &c);
	cmd_cleanup(&c);
	return rc;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_nsec == UTIME_NOW || b->tv_nsec == UTIME_NOW)
		return a->tv_nsec == b->tv_nsec;
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static int v1_utimens(struct sbx *sb, const char *rel,
		      const struct timespec tv[2], struct fuse_file_info *fi)
{
	static const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
	const struct timespec *t = tv != NULL ? tv : now;
	bool omit_a = t[0].tv_nsec == UTIME_OMIT;
	bool omit_m = t[1].tv_nsec == UTIME_OMIT;
	int rc = may_change(sb);

	(void)fi;
	if (rc < 0)
		return rc;
	if (omit_a && omit_m)
		return 0;
	/* A later upload of buffered contents would set mtime again. */
	rc = upload_path(sb, "utimens", rel);
	if (rc < 0)
		return rc;
	if (!omit_a && !omit_m && same_time(&t[0], &t[1])) {
		rc = touch_one(sb, rel, NULL,
			       t[0].tv_nsec == UTIME_NOW ? NULL : &t[0]);
	} else {
		if (!omit_a)
			rc = touch_one(sb, rel, "-a",
				       t[0].tv_nsec == UTIME_NOW ? NULL
								 : &t[0]);
		if (rc == 0 && !omit_m)
			rc = touch_one(sb, rel, "-m",
				       t[1].tv_nsec == UTIME_NOW ? NULL
								 : &t[1]);
	}
	cache_forget(sb->fs->cache, sb->id, rel);
	return rc;
}

/* stat -f: the filesystem holding the session root. */
static int v1_statfs(struct sbx *sb, const char *rel, struct statvfs *st)
{
	struct cmd c = {{NULL}, 0};
	struct cmd_out o;
	unsigned long long v[8];
	int rc, n = 0;

	if (is_native(sb) && !has_native_exec(sb)) {
		/* Nothing to ask: a large filesystem with room to spare, as
		 * the provider's own file limits are what bind. */
		memset(st, 0, sizeof(*st));
		st->f_bsize = 4096;
		st->f_frsize = 4096;
		st->f_blocks = 1ULL << 28;
		st->f_bfree = st->f_bavail = 1ULL << 27;
		st->f_files = 1ULL << 24;
		st->f_ffree = st->f_favail = 1ULL << 23;
		st->f_namemax = 255;
		return 0;
	}
	cmd_add(&c, "stat");
	cmd_add(&c, "-f");
	cmd_add(&c, "-c");
	cmd_add(&c, "%S %s %b %f %a %c %d %l");
	cmd_add(&c, "--");
	cmd_add_path(&c, rel);
	cmd_out_init(&o);
	rc = run(sb, "statfs", rel, &c, 0, &o);
	if (rc == 0 && o.code != 0) {
		rc = cmd_failed(sb, "statfs", rel, &c, &o);
	} else if (rc == 0) {
		n = sscanf(o.out.data != NULL ? o.out.data : "",
			   "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
			   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
		if (n != 8) {
			rc = fail(sb, "statfs", rel, SBX_UNEXPECTED_FORMAT, EIO,
				  "stat -f printed no numbers");
		} else {
			memset(st, 0, sizeof(*st));
			st->f_frsize = (unsigned long)v[0];
			st->f_bsize = (unsigned long)v[1];
			st->f_blocks = (fsblkcnt_t)v[2];
			st->f_bfree = (fsblkcnt_t)v[3];
			st->f_bavail = (fsblkcnt_t)v[4];
			st->f_files = (fsfilcnt_t)v[5];
			st->f_ffree = st->f_favail = (fsfilcnt_t)v[6];
			st->f_namemax = (unsigned long)v[7];
		}
	}
	cmd_out_cleanup(&o);
	cmd_cleanup(&c);
	return rc;
}

const struct fs_tree_ops fs_files_v1_ops = {
	.getattr = v1_getattr,
	.readdir = v1_readdir,
	.open = v1_open,
	.create = v1_create,
	.read = v1_read,
	.write = v1_write,
	.flush = v1_flush,
	.release = v1_release,
	.fsync = v1_fsync,
	.mkdir = v1_mkdir,
	.unlink = v1_unlink,
	.rmdir = v1_rmdir,
	.rename = v1_rename,
	.link = v1_link,
	.symlink = v1_symlink,
	.readlink = v1_readlink,
	.chmod = v1_chmod,
	.truncate = v1_truncate,
	.utimens = v1_utimens,
	.statfs = v1_statfs,
};
