/* SPDX-License-Identifier: MIT */
/*
 * path: lexical rules for the paths the agent protocol carries
 * (doc/protocol-v1.md 5). A path names something under the session root: a leading
 * '/' is stripped, empty and '.' components are dropped, and any '..'
 * component is refused. What the path resolves to on disk (symlinks,
 * escapes) is judged by the agent with openat2; this module never touches
 * the filesystem.
 *
 * Pure functions; thread-safe. Fuzzed (tests/fuzz/path-fuzzer.c).
 */
#ifndef SBFS_PATH_H
#define SBFS_PATH_H

#include <stdbool.h>
#include <stddef.h>

#define PATH_MAX_BYTES 4096
/* The longest name of one component (NAME_MAX of Linux file systems). */
#define NAME_MAX_BYTES 255

enum path_verdict {
	PATH_OK = 0,
	PATH_EMPTY, /* "path is empty" */
	PATH_UPWARD, /* "path traverses upward" */
	PATH_BAD_BYTE, /* NUL or another byte no path may hold */
	PATH_TOO_LONG, /* longer than PATH_MAX_BYTES */
};

/* The protocol's reason text for a verdict ("path traverses upward"...). */
const char *path_verdict_reason(enum path_verdict v);

/*
 * Normalise in (n bytes, need not be NUL-terminated) into out[outsz] as a
 * relative path with single '/' separators and no '.', e.g. "/a//./b/" ->
 * "a/b". The session root itself normalises to "" and is accepted only when
 * allow_root is true (the file extension can stat and list the root; v1
 * file routes cannot). out must hold at least n + 1 bytes.
 */
enum path_verdict path_normalize(const char *in, size_t n, bool allow_root,
				 char *out, size_t outsz);

/* Split a normalised relative path into parent and last component, in
 * place: "a/b/c" -> parent "a/b", name "c"; "c" -> parent "", name "c".
 * Returns false for the root (""). */
bool path_split(char *rel, const char **parent, const char **name);

/* The parent of a relative path into out[size] ("" for a top-level name;
 * cut to fit), and its last component (a pointer into rel). */
const char *path_parent(const char *rel, char *out, size_t size);

/* dir + "/" + name, or name when dir is "" (the root): a heap string
 * (allocation aborts, xalloc.h). */
char *path_join(const char *dir, const char *name);

/* True when rel is a relative path a cache may be keyed by: "" (the
 * root) or valid components (path_component_valid) joined by single
 * '/', without a leading or trailing one. */
bool path_rel_valid(const char *rel);

/* True when name is one valid component: not empty, not "." or "..", no
 * '/' and no NUL, at most 255 bytes. */
bool path_component_valid(const char *name);

#endif
