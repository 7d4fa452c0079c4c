/* SPDX-License-Identifier: MIT */
/*
 * errname: errno values <-> their symbolic names ("ENOENT"). The file
 * extension carries errno *names* on the wire, never numbers, because the
 * numbers differ between systems.
 *
 * Pure; thread-safe.
 */
#ifndef SBFS_ERRNAME_H
#define SBFS_ERRNAME_H

/* "ENOENT" for ENOENT (positive); NULL for a value not in the table. */
const char *errname_from_errno(int err);
/* ENOENT (positive) for "ENOENT"; EIO for anything unknown. */
int errname_to_errno(const char *name);

#endif
