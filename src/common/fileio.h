/* SPDX-License-Identifier: MIT */
/*
 * fileio: writing a small file whole or not at all: a temporary file in
 * the same directory, written, synced, given its mode, then renamed over
 * the name, and the directory synced. A reader sees the old contents or
 * the new, never a part; a crash leaves at most the temporary
 * (".<name>.XXXXXX", a name of its own for each writer). And the
 * opposite: a scratch file that never has a name anyone can see.
 */
#ifndef SBFS_COMMON_FILEIO_H
#define SBFS_COMMON_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/* Write len bytes of data to path with mode (exactly: the umask and an
 * inherited ACL do not widen or narrow it). 0 or -errno. */
int file_write_atomic(const char *path, const void *data, size_t len,
		      mode_t mode) __attribute__((warn_unused_result));
/* A new file in dir, open for reading and writing (close-on-exec, mode
 * 0600), that no name reaches: O_TMPFILE where dir's file system has it,
 * else a file named dir/<prefix>XXXXXX, removed at once (a crash between
 * the two can leave it). The descriptor, or -errno. */
int file_open_unlinked(const char *dir, const char *prefix)
	__attribute__((warn_unused_result));

#endif
