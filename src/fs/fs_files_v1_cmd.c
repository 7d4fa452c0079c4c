/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1_cmd: commands run in a session of files/ without the file
 * extension, and what they answer (contract in fs_files_v1_cmd.h).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/agent_client.h"
#include "common/clock.h"
#include "common/hmap.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_files_v1_cmd.h"
#include "fs/fs_files_v1_i.h"

/* A command's stdout kept (a listing), and its stderr kept for the errno
 * and the log. */
#define OUT_MAX (32UL * 1024 * 1024)
#define ERR_KEEP 4096UL
#define CMD_TIMEOUT_DEFAULT_MS 60000L
/* What the log shows of a command's diagnostics. */
#define REASON_MAX 300
/* The marker a native command line prints after a complete output (a
 * record whose type letter find never prints). */
#define NATIVE_END "E"

/* ---- sessions ------------------------------------------------------------ */

bool v1_is_native(struct sbx *sb)
{
	enum transport_kind k;

	pthread_mutex_lock(&sb->lock);
	k = sb->kind;
	pthread_mutex_unlock(&sb->lock);
	return k == TRANSPORT_NATIVE;
}

bool v1_has_native_exec(const struct sbx *sb)
{
	return sb->fs->prov->ops->native_exec != NULL;
}

/* Changes are refused on native sessions and read-only mounts. */
int v1_may_change(struct sbx *sb)
{
	if (sb->fs->o.ro || v1_is_native(sb))
		return -EROFS;
	return 0;
}

long v1_cmd_timeout_ms(const struct sbx *sb)
{
	return sb->fs->o.timeout_s > 0 ? sb->fs->o.timeout_s * 1000
				       : CMD_TIMEOUT_DEFAULT_MS;
}

int v1_fail(struct sbx *sb, const char *op, const char *rel, enum sbx_code code,
	    int e, const char *fmt, ...)
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

void v1_forget(struct sbx *sb, const char *rel, bool tree, bool parent)
{
	if (tree)
		cache_forget_tree(sb->fs->cache, sb->id, rel);
	else
		cache_forget(sb->fs->cache, sb->id, rel);
	if (parent) {
		char *p = xmalloc(strlen(rel) + 1);

		path_parent(rel, p, strlen(rel) + 1);
		cache_forget(sb->fs->cache, sb->id, p);
		free(p);
	}
}

/* ---- commands ------------------------------------------------------------ */

void v1_cmd_add(struct cmd *c, const char *s)
{
	if (c->argc >= CMD_ARGS)
		fatalx("fs_files_v1: a command has more than %d words",
		       CMD_ARGS);
	c->argv[c->argc++] = xstrdup(s);
	c->argv[c->argc] = NULL;
}

/* A path operand: relative to the session root (the command's working
 * directory), with "./" so a name that starts with '-' is no option. */
void v1_cmd_add_path(struct cmd *c, const char *rel)
{
	if (*rel == '\0') {
		v1_cmd_add(c, ".");
		return;
	}
	if (c->argc >= CMD_ARGS)
		fatalx("fs_files_v1: a command has more than %d words",
		       CMD_ARGS);
	c->argv[c->argc++] = xasprintf("./%s", rel);
	c->argv[c->argc] = NULL;
}

void v1_cmd_cleanup(struct cmd *c)
{
	size_t i;

	for (i = 0; i < c->argc; i++)
		free(c->argv[i]);
	c->argc = 0;
	c->argv[0] = NULL;
}

void v1_cmd_out_init(struct cmd_out *o)
{
	memset(o, 0, sizeof(*o));
	buf_init(&o->out, OUT_MAX);
	buf_init(&o->err, ERR_KEEP);
}

void v1_cmd_out_cleanup(struct cmd_out *o)
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

/* The agent: argv through /v1/exec. */
static int run_agent(struct sbx *sb, const char *op, const char *rel,
		     struct cmd *c, struct cmd_out *o)
{
	static char lc_all[] = "LC_ALL=C";
	char *env[] = {lc_all, NULL};
	struct sbx_error err;
	struct ac_exit ex;
	int rc;
	struct proto_exec_req req = {.argv = c->argv,
				     .argc = c->argc,
				     .timeout_ms =
					     (uint64_t)v1_cmd_timeout_ms(sb)};

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
		return v1_fail(sb, op, rel, SBX_NOT_SUPPORTED, EOPNOTSUPP,
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
		rc = v1_fail(sb, op, rel, SBX_INVALID_INPUT, -rc,
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
		rc = v1_fail(sb, op, rel, SBX_OUTCOME_UNKNOWN, EIO,
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
int v1_run(struct sbx *sb, const char *op, const char *rel, struct cmd *c,
	   unsigned flags, struct cmd_out *o)
{
	int rc;

	if (v1_is_native(sb))
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
int v1_cmd_failed(struct sbx *sb, const char *op, const char *rel,
		  const struct cmd *c, const struct cmd_out *o)
{
	char why[REASON_MAX];
	int e = fs_files_v1_errno_from_text(o->err.data, o->err.len);

	excerpt(&o->err, why, sizeof(why));
	return v1_fail(sb, op, rel, SBX_COMMAND_FAILED, e != 0 ? e : EIO,
		       "%s exited %d: %s", c->argv[0], o->code,
		       *why ? why : "(no diagnostics)");
}

/* Run a command that changes something and only reports success. */
static int run_change(struct sbx *sb, const char *op, const char *rel,
		      struct cmd *c)
{
	struct cmd_out o;
	int rc;

	v1_cmd_out_init(&o);
	rc = v1_run(sb, op, rel, c, 0, &o);
	if (rc == 0 && o.code != 0)
		rc = v1_cmd_failed(sb, op, rel, c, &o);
	v1_cmd_out_cleanup(&o);
	return rc;
}

int v1_change(struct sbx *sb, const char *op, const char *rel,
	      const char *const *words, const char *path1, const char *path2)
{
	struct cmd c = {{NULL}, 0};
	int rc;

	for (; *words != NULL; words++)
		v1_cmd_add(&c, *words);
	if (path1 != NULL)
		v1_cmd_add_path(&c, path1);
	if (path2 != NULL)
		v1_cmd_add_path(&c, path2);
	rc = run_change(sb, op, rel, &c);
	v1_cmd_cleanup(&c);
	return rc;
}

int v1_chmod_remote(struct sbx *sb, const char *op, const char *rel,
		    mode_t mode)
{
	char digits[8];
	const char *const chmod[] = {"chmod", digits, "--", NULL};
	int rc;

	/* Five digits: GNU chmod keeps a directory's set-id bits for a
	 * shorter number, and chmod(2) does not. */
	snprintf(digits, sizeof(digits), "%05o", (unsigned)(mode & 07777));
	rc = v1_change(sb, op, rel, chmod, rel, NULL);
	cache_forget(sb->fs->cache, sb->id, rel);
	return rc;
}

/* ---- attributes ---------------------------------------------------------- */

void v1_find_cmd(struct cmd *c, const char *rel, bool list, bool short_form)
{
	v1_cmd_add(c, "find");
	v1_cmd_add_path(c, rel);
	if (list) {
		v1_cmd_add(c, "-mindepth");
		v1_cmd_add(c, "1");
		v1_cmd_add(c, "-maxdepth");
		v1_cmd_add(c, "1");
	} else {
		v1_cmd_add(c, "-maxdepth");
		v1_cmd_add(c, "0");
	}
	v1_cmd_add(c, "-printf");
	v1_cmd_add(c, short_form ? FS_V1_FIND_FORMAT_SHORT : FS_V1_FIND_FORMAT);
}

void v1_cache_put(struct sbx *sb, const char *rel, const struct fs_v1_rec *rec,
		  uint64_t mark)
{
	cache_put_seen(sb->fs->cache, sb->id, rel, &rec->attr,
		       rec->attr.type == PROTO_FT_SYMLINK ? rec->target : NULL,
		       mark);
}

/* A find of full records: the command, what it printed, the cache's
 * mark from before it ran, and where the next record starts. */
struct find_run {
	struct cmd c;
	struct cmd_out o;
	uint64_t mark;
	size_t pos;
};

/* Run find of rel (list: of its entries) into f. v1_run's answer; f is
 * to be cleaned up either way. */
static int find_run(struct sbx *sb, const char *op, const char *rel, bool list,
		    struct find_run *f)
{
	*f = (struct find_run){.c = {{NULL}, 0},
			       .mark = cache_mark(sb->fs->cache)};
	v1_cmd_out_init(&f->o);
	v1_find_cmd(&f->c, rel, list, false);
	return v1_run(sb, op, rel, &f->c, RUN_COMPLETE, &f->o);
}

/* The next record of f: 1, 0 at the end, -EBADMSG (fs_files_v1_parse). */
static int find_next(struct find_run *f, struct fs_v1_rec *rec)
{
	return fs_files_v1_parse(f->o.out.data, f->o.out.len, &f->pos, false,
				 rec);
}

static void find_run_cleanup(struct find_run *f)
{
	v1_cmd_cleanup(&f->c);
	v1_cmd_out_cleanup(&f->o);
}

/* One path's attributes (lstat) from the sandbox, remembered in the
 * cache. *target (may be NULL) gets a symlink's target (heap). */
static int stat_remote(struct sbx *sb, const char *op, const char *rel,
		       struct proto_attr *a, char **target)
{
	struct find_run f;
	struct fs_v1_rec rec;
	int rc;

	rc = find_run(sb, op, rel, false, &f);
	if (rc == -EFBIG) {
		rc = v1_fail(sb, op, rel, SBX_UNEXPECTED_FORMAT, EIO,
			     "find: the output was cut short");
		goto out;
	}
	if (rc < 0)
		goto out;
	if (f.o.code != 0) {
		rc = v1_cmd_failed(sb, op, rel, &f.c, &f.o);
		goto out;
	}
	rc = find_next(&f, &rec);
	if (rc != 1 || f.pos != f.o.out.len) {
		rc = v1_fail(sb, op, rel, SBX_UNEXPECTED_FORMAT, EIO,
			     "find printed %s",
			     rc == 1   ? "more than one record"
			     : rc == 0 ? "nothing"
				       : "a malformed record");
		goto out;
	}
	v1_cache_put(sb, rel, &rec, f.mark);
	*a = rec.attr;
	if (target != NULL)
		*target = rec.attr.type == PROTO_FT_SYMLINK
				  ? xstrdup(rec.target)
				  : NULL;
	rc = 0;
out:
	find_run_cleanup(&f);
	return rc;
}

/*
 * Whether an attribute miss in directory dir lists dir: the second miss
 * in a row there does, and then not again until the attributes it gave
 * have timed out. A walk that stats every entry of a directory whose
 * attributes timed out (the second `ls -lR`, `rsync` of an unchanged
 * tree) costs two commands a directory instead of one an entry; a lone
 * stat costs one.
 */
static bool miss_lists_dir(struct sbx *sb, const char *dir)
{
	uint64_t h = hmap_hash_str(dir, 0);
	long long now = clock_mono_ms();
	long long ttl = (long long)(sb->fs->o.attr_timeout * 1000);
	bool list = false;

	if (ttl <= 0)
		return false; /* nothing is kept: a listing would serve none */
	pthread_mutex_lock(&sb->lock);
	if (sb->v1_miss_dir != h) {
		sb->v1_miss_dir = h;
		sb->v1_miss_listed_ms = 0;
	} else if (sb->v1_miss_listed_ms == 0 ||
		   now - sb->v1_miss_listed_ms >= ttl) {
		sb->v1_miss_listed_ms = now;
		list = true;
	}
	pthread_mutex_unlock(&sb->lock);
	return list;
}

/* List dir with its entries' attributes into the cache, for a miss: 0,
 * or -EAGAIN when it gave nothing to use (too large for full records, a
 * find that failed or printed what does not parse: the stat says why),
 * or the error of a command that could not run (logged). */
static int list_for_miss(struct sbx *sb, const char *op, const char *dir)
{
	struct find_run f;
	struct fs_v1_rec rec;
	int rc;

	rc = find_run(sb, op, dir, true, &f);
	if (rc == -EFBIG || (rc == 0 && (f.o.code != 0 || f.o.cut)))
		rc = -EAGAIN;
	if (rc < 0)
		goto out;
	while ((rc = find_next(&f, &rec)) == 1) {
		char *child;

		if (!path_component_valid(rec.name)) {
			rc = -EBADMSG;
			break;
		}
		if (rec.attr.type == PROTO_FT_UNKNOWN)
			continue;
		child = path_join(dir, rec.name);
		v1_cache_put(sb, child, &rec, f.mark);
		free(child);
	}
	if (rc < 0)
		rc = -EAGAIN; /* a record that does not parse */
out:
	find_run_cleanup(&f);
	return rc;
}

/* Attributes from the cache, else from the sandbox: a listing of rel's
 * directory (miss_lists_dir) or a stat of rel. */
int v1_attr_of(struct sbx *sb, const char *op, const char *rel,
	       struct proto_attr *a, char **target)
{
	const char *dir, *name;
	char *copy;
	int rc = -EAGAIN;

	if (cache_get(sb->fs->cache, sb->id, rel, a, target))
		return 0;
	copy = xstrdup(rel);
	if (path_split(copy, &dir, &name) &&
	    (!v1_is_native(sb) || v1_has_native_exec(sb)) &&
	    miss_lists_dir(sb, dir))
		rc = list_for_miss(sb, op, dir);
	free(copy);
	if (rc == 0 && cache_get(sb->fs->cache, sb->id, rel, a, target))
		return 0;
	if (rc < 0 && rc != -EAGAIN)
		return rc;
	return stat_remote(sb, op, rel, a, target);
}
