/* SPDX-License-Identifier: MIT */
/*
 * ids: random identifiers from the kernel's generator (getrandom(2)):
 * version 4 UUIDs in their 36-character text form (job ids,
 * Idempotency-Keys) and hex names.
 */
#ifndef SBFS_COMMON_IDS_H
#define SBFS_COMMON_IDS_H

#include <stddef.h>

#define IDS_UUID_LEN 36

/* A version 4 UUID, lower-case, into out (IDS_UUID_LEN + 1 bytes). 0, or
 * -EIO when the kernel gives no randomness. */
int ids_uuid(char out[IDS_UUID_LEN + 1]) __attribute__((warn_unused_result));

/* n random bytes as 2n lower-case hex digits after prefix, into out
 * (size bytes, cut to fit). 0 or -EIO. */
int ids_hex(char *out, size_t size, const char *prefix, size_t n)
	__attribute__((warn_unused_result));

#endif
