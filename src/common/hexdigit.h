/* SPDX-License-Identifier: MIT */
/*
 * hexdigit: the value of one hexadecimal digit, for the decoders of %XX
 * escapes. Pure, thread-safe.
 */
#ifndef SBFS_COMMON_HEXDIGIT_H
#define SBFS_COMMON_HEXDIGIT_H

/* 0 to 15 for 0-9, a-f and A-F; -1 for any other character. */
int hexdigit_value(char c);

#endif
