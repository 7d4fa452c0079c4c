/* SPDX-License-Identifier: MIT */
/*
 * fs_files_v1_cmd: what files/ without the file extension asks of a
 * session (fs_files_v1.c): a command run in the session root, through
 * the agent's /v1/exec (argv, no shell, LC_ALL=C) or, in a native
 * session, as a shell command line through the provider's native_exec;
 * the errno a failed command's diagnostics name; and the attributes of a
 * path, from `find -printf` (fs_files_v1_i.h), kept in the mount's cache.
 *
 * Commands are never retried: exec is not idempotent, and an outcome the
 * transport cannot know is EIO. Every failure is logged once, with the
 * sandbox, the operation and the path (sbfs_fail), and returned as a
 * negative errno. Thread-safe: nothing here is shared but the cache, and
 * no lock is held across a round trip.
 */
#ifndef SBFS_FS_FILES_V1_CMD_H
#define SBFS_FS_FILES_V1_CMD_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "fs/fs_i.h"

/* The most words a command has (a programming error past it: abort). */
#define CMD_ARGS 16

/* ---- the session --------------------------------------------------------- */

/* sb's last record says native (a legacy session, read-only here). */
bool v1_is_native(struct sbx *sb);
/* The provider runs commands in native sessions. */
bool v1_has_native_exec(const struct sbx *sb);
/* 0, or -EROFS on a native session or a read-only mount. */
int v1_may_change(struct sbx *sb);
/* A command's deadline: the mount's timeout. */
long v1_cmd_timeout_ms(const struct sbx *sb);
/* A failure of this module's own making (code, errno e, the reason),
 * logged once like the others; returns -e as sbfs_fail gives it. */
int v1_fail(struct sbx *sb, const char *op, const char *rel, enum sbx_code code,
	    int e, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Forget rel's cached attributes (tree: everything below it too), and
 * with parent its directory's. */
void v1_forget(struct sbx *sb, const char *rel, bool tree, bool parent);

/* ---- commands ------------------------------------------------------------ */

/* A command's words (heap copies), NULL-terminated. Start from
 * {{NULL}, 0}; v1_cmd_cleanup frees the words. */
struct cmd {
	char *argv[CMD_ARGS + 1];
	size_t argc;
};

void v1_cmd_add(struct cmd *c, const char *s);
/* A path operand: relative to the session root (the command's working
 * directory), with "./" so a name that starts with '-' is no option. */
void v1_cmd_add_path(struct cmd *c, const char *rel);
void v1_cmd_cleanup(struct cmd *c);

/* What a command gave back. */
struct cmd_out {
	struct buf out; /* stdout, up to 32 MiB */
	struct buf err; /* the first 4 KiB of stderr */
	int code; /* exit status */
	bool cut; /* stdout is not all the command printed */
};

void v1_cmd_out_init(struct cmd_out *o);
void v1_cmd_out_cleanup(struct cmd_out *o);

/* The whole stdout matters (listings, stats). */
#define RUN_COMPLETE 0x1u

/*
 * Run c in the session root. Returns 0 when it ran (o->code holds its exit
 * status), -EFBIG (not logged) when RUN_COMPLETE was asked and stdout came
 * incomplete, or another negative errno (logged) when it could not run.
 */
int v1_run(struct sbx *sb, const char *op, const char *rel, struct cmd *c,
	   unsigned flags, struct cmd_out *o);
/* A command that exited non-zero: the errno its diagnostics name (EIO
 * when none), logged with an excerpt of them. */
int v1_cmd_failed(struct sbx *sb, const char *op, const char *rel,
		  const struct cmd *c, const struct cmd_out *o);
/* Run a command that changes something and only reports success: the
 * words (NULL-terminated) followed by the path operands path1 and path2
 * (either may be NULL). */
int v1_change(struct sbx *sb, const char *op, const char *rel,
	      const char *const *words, const char *path1, const char *path2);

/* chmod of rel to mode's permission bits; its attributes are forgotten. */
int v1_chmod_remote(struct sbx *sb, const char *op, const char *rel,
		    mode_t mode);

/* ---- attributes ------------------------------------------------------------ */

struct fs_v1_rec; /* fs_files_v1_i.h */

/* Remember rec (rel's record) in the mount's cache, unless rel changed
 * after mark (cache_mark, taken before the command ran). */
void v1_cache_put(struct sbx *sb, const char *rel, const struct fs_v1_rec *rec,
		  uint64_t mark);

/* find of rel itself (list false) or of its entries, in the full record
 * format or names and types only (short_form). */
void v1_find_cmd(struct cmd *c, const char *rel, bool list, bool short_form);
/* Attributes (lstat) from the cache, else from the sandbox (then
 * remembered in the cache). *target (may be NULL) gets a symlink's target
 * (heap). */
int v1_attr_of(struct sbx *sb, const char *op, const char *rel,
	       struct proto_attr *a, char **target);

#endif
