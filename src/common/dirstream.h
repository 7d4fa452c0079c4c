/* SPDX-License-Identifier: MIT */
/*
 * dirstream: a directory stream over a directory descriptor the caller
 * keeps. Thread-safe.
 */
#ifndef SBFS_COMMON_DIRSTREAM_H
#define SBFS_COMMON_DIRSTREAM_H

#include <dirent.h>

/* A stream of fd's entries from the first one, reading a duplicate of fd
 * (fd stays open and the caller's; closedir() the stream). NULL with
 * errno set. */
DIR *dirstream_open(int fd);
/* The stream's next entry but "." and "..", or NULL at its end. */
struct dirent *dirstream_next(DIR *d);

#endif
