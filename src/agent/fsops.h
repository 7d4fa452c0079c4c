/* SPDX-License-Identifier: MIT */
/*
 * fsops: the filesystem primitives behind the file extension, confined to
 * the session root. Each one resolves its path beneath the root with
 * agent_resolve_open/_parent in RESOLVE_EXT mode (symlinks followed while
 * they stay beneath) and then makes one *at() call on the resolved
 * descriptor. Nothing here speaks HTTP or JSON: ext.c decodes requests,
 * calls these and encodes the answers.
 *
 * Conventions for every function:
 * - rel is a path normalised by path_normalize() with allow_root: relative,
 *   no "..", "" for the root itself.
 * - Return 0 (or a descriptor where said) or a negative errno, exactly as
 *   the kernel reported it, except that a path whose resolution would leave
 *   the root returns -FSOPS_ESCAPED (openat2's EXDEV, kept apart from the
 *   EXDEV a cross-device rename or link gives).
 * - The last component is not followed (lstat semantics) unless the
 *   function says it acts on the target; following is still confined.
 * - Out-params are written only on success. Descriptors are O_CLOEXEC.
 * - Operations that would replace or remove the root itself fail as the
 *   kernel fails them on "/" (EEXIST, EBUSY, EISDIR...).
 * - Files are created with the calling thread's filesystem credentials
 *   (agent_resolve_thread_creds()); nothing here changes ownership, and
 *   nothing creates device nodes, FIFOs or sockets.
 *
 * Thread-safe: no shared state beyond the agent's root descriptor.
 */
#ifndef SBFS_AGENT_FSOPS_H
#define SBFS_AGENT_FSOPS_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>

#include "agent/agent.h"

/* Not an errno: -FSOPS_ESCAPED means "the path leaves the session root".
 * Above the kernel's errno range, so it can never be mistaken for one. */
#define FSOPS_ESCAPED 4096

/* lstat. For a symlink, *target gets its text (heap) when target is not
 * NULL; otherwise *target is NULL. */
int fsops_stat(const struct agent *a, const char *rel, struct stat *st,
	       char **target) __attribute__((warn_unused_result));

/* The text of the symlink rel (heap). -EINVAL when rel is not a symlink. */
int fsops_readlink(const struct agent *a, const char *rel, char **target)
	__attribute__((warn_unused_result));

/* Open a regular file for reading (acts on the target). Opened with
 * O_NONBLOCK so that a FIFO cannot hang the caller; anything but a regular
 * file is -EISDIR (a directory) or -EINVAL. Returns the descriptor and
 * its attributes in *st. */
int fsops_open_read(const struct agent *a, const char *rel, struct stat *st)
	__attribute__((warn_unused_result));

/* How a write may create its file: absent (NULL) it never does. */
struct fsops_mk {
	mode_t mode; /* a file the write creates gets exactly this */
	bool exclusive; /* -EEXIST when anything is at the path */
};

/* Write n bytes at off (or at the end when append) into a regular file
 * (acts on the target; never truncates). The file must exist unless mk
 * says how to create it, as fsops_create does. A short write that made
 * progress is retried; *st gets the attributes after the write. times
 * (may be NULL): atime and mtime set after the bytes, as futimens(2)
 * takes them (UTIME_NOW, UTIME_OMIT).
 */
int fsops_write(const struct agent *a, const char *rel, uint64_t off,
		bool append, const void *p, size_t n, const struct fsops_mk *mk,
		const struct timespec *times, struct stat *st)
	__attribute__((warn_unused_result));

/* Create (or with !exclusive, open) a regular file; truncate empties an
 * existing one. A file this call creates gets exactly mode (07777 bits,
 * the umask does not apply). Acts on the target of a symlink, except with
 * exclusive, where an existing symlink is EEXIST as open(2) has it. */
int fsops_create(const struct agent *a, const char *rel, mode_t mode,
		 bool exclusive, bool truncate, struct stat *st)
	__attribute__((warn_unused_result));

/* One directory, exactly mode; -EEXIST when anything is there. */
int fsops_mkdir(const struct agent *a, const char *rel, mode_t mode,
		struct stat *st) __attribute__((warn_unused_result));

int fsops_unlink(const struct agent *a, const char *rel)
	__attribute__((warn_unused_result));
int fsops_rmdir(const struct agent *a, const char *rel)
	__attribute__((warn_unused_result));

/* renameat2(2). flags: 0 (atomic replace), RENAME_NOREPLACE or
 * RENAME_EXCHANGE. */
int fsops_rename(const struct agent *a, const char *from, const char *to,
		 unsigned flags) __attribute__((warn_unused_result));

/* A hard link to from (not followed: a link to a symlink links the
 * symlink) at to; *st gets the new link's attributes. */
int fsops_link(const struct agent *a, const char *from, const char *to,
	       struct stat *st) __attribute__((warn_unused_result));

/* A symlink at rel holding target as given (it may point anywhere;
 * following it is judged when it is used). */
int fsops_symlink(const struct agent *a, const char *rel, const char *target,
		  struct stat *st) __attribute__((warn_unused_result));

/* Acts on the target. */
int fsops_chmod(const struct agent *a, const char *rel, mode_t mode,
		struct stat *st) __attribute__((warn_unused_result));
/* Acts on the target; a regular file only (-EISDIR, -EINVAL). */
int fsops_truncate(const struct agent *a, const char *rel, uint64_t size,
		   struct stat *st) __attribute__((warn_unused_result));
/* utimensat(2) with UTIME_NOW / UTIME_OMIT in ts[].tv_nsec as usual.
 * Acts on the target unless nofollow (then on a symlink itself). */
int fsops_utimens(const struct agent *a, const char *rel,
		  const struct timespec ts[2], bool nofollow, struct stat *st)
	__attribute__((warn_unused_result));
/* fsync(2) a file or directory (acts on the target). */
int fsops_fsync(const struct agent *a, const char *rel)
	__attribute__((warn_unused_result));

/* fstatfs(2) of the filesystem holding the root. */
int fsops_statfs(const struct agent *a, struct statfs *out)
	__attribute__((warn_unused_result));

/*
 * Listing. fsops_list() opens the directory rel (acting on the target, as
 * opendir does), positions it at cursor (0 = the start, else a cookie this
 * function returned) and calls fn for each entry but "." and "..", with
 * its lstat attributes and, for a symlink, its text (else NULL). Entries
 * that vanish before they are stat'ed are skipped; one that cannot be
 * stat'ed for another reason is given with the type the directory reports
 * and every other attribute zero.
 *
 * fn returns 0 to take the entry and go on, FSOPS_LIST_FULL to refuse it
 * and end the page, or a negative errno to abort (returned as is). When
 * the page ends early, *more is true and *next is the cookie that resumes
 * right after the last entry taken (the getdents64 d_off, so paging a
 * directory costs one pass over it); at the end of the directory *more is
 * false. A page that ends on a cookie that would not move the client on
 * (0, or the cursor it started from) is -EOVERFLOW rather than a loop.
 */
#define FSOPS_LIST_FULL 1

typedef int (*fsops_entry_fn)(void *ud, const char *name, const struct stat *st,
			      const char *target);

int fsops_list(const struct agent *a, const char *rel, int64_t cursor,
	       fsops_entry_fn fn, void *ud, bool *more, int64_t *next)
	__attribute__((warn_unused_result));

/*
 * The small regular files directly in a directory, in directory order:
 * fsops_contents_open() opens directory rel (its errors come first, before
 * an answer is committed); fsops_contents_fd() walks it and closes fd. fn
 * gets each file's name, attributes and whole contents (at most max_file
 * bytes; larger files, other types and symlinks are passed over, as are
 * files that cannot be opened or that changed while being read). A file
 * is opened by its name in the directory, never through a symlink. The
 * walk stops when fn returns FSOPS_LIST_FULL; a negative errno from fn is
 * returned.
 */
typedef int (*fsops_body_fn)(void *ud, const char *name, const struct stat *st,
			     const void *data, size_t len);

int fsops_contents_open(const struct agent *a, const char *rel)
	__attribute__((warn_unused_result));
int fsops_contents_fd(int fd, size_t max_file, fsops_body_fn fn, void *ud)
	__attribute__((warn_unused_result));

#endif
