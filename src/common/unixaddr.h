/* SPDX-License-Identifier: MIT */
/*
 * unixaddr: the address of a Unix socket's path for bind(2) or
 * connect(2), however long the path. Thread-safe.
 */
#ifndef SBFS_COMMON_UNIXADDR_H
#define SBFS_COMMON_UNIXADDR_H

#include <sys/un.h>

/*
 * Fill sa with path. A path longer than sun_path holds is reached through
 * its directory, opened (O_PATH) into *dirfd, as "/proc/self/fd/N/NAME":
 * the caller closes *dirfd (-1 when none was opened) after its bind or
 * connect. 0, -ENAMETOOLONG when even that does not fit, or the open's
 * -errno.
 */
int unixaddr_fill(const char *path, struct sockaddr_un *sa, int *dirfd)
	__attribute__((warn_unused_result));

#endif
