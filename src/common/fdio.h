/* SPDX-License-Identifier: MIT */
/*
 * fdio: whole reads and writes on a descriptor, however the kernel splits
 * them (EINTR is retried), a descriptor read to its end into a buf, a
 * small file's text, and the close of a descriptor that may be none.
 * Thread-safe.
 */
#ifndef SBFS_COMMON_FDIO_H
#define SBFS_COMMON_FDIO_H

#include <stddef.h>
#include <stdint.h>

struct buf;

/* All n bytes of p to fd: 0, or -errno (-EIO when the kernel took none). */
int fdio_write_all(int fd, const void *p, size_t n)
	__attribute__((warn_unused_result));
/* All n bytes of p at offset off of fd: 0 or -errno (-EIO as above). */
int fdio_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
	__attribute__((warn_unused_result));
/* Exactly n bytes at offset off of fd into p: 0, -EIO when the file ends
 * before, or -errno. */
int fdio_pread_all(int fd, void *p, size_t n, uint64_t off)
	__attribute__((warn_unused_result));
/* Everything fd gives until its end, appended to b chunk bytes at a time
 * (each read needs room for a whole chunk under b's max): 0, or -EFBIG /
 * -ENOMEM as buf_reserve, or -errno. What was read stays in b, so a
 * caller content with part of it may ignore the result. */
int fdio_read_buf(int fd, struct buf *b, size_t chunk);
/* The first max bytes (at most) of the file at path, NUL-terminated, in
 * one read (heap; free() it); NULL with errno set on failure. For the
 * small files of /proc and /sys. */
char *fdio_read_text(const char *path, size_t max);
/* Close fd when it is a descriptor (>= 0; -1 means none), for cleanup
 * paths: errno is kept, so a caller's -errno taken before still holds. */
void fdio_close(int fd);

#endif
