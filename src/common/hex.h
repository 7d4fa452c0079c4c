/* SPDX-License-Identifier: MIT */
/*
 * hex: the value of one hexadecimal digit, for the decoders of
 * percent-escapes (unixurl.c) and of JSON's \uXXXX (proto_*.c).
 *
 * Pure; thread-safe.
 */
#ifndef SBFS_COMMON_HEX_H
#define SBFS_COMMON_HEX_H

/* 0..15 for 0-9, a-f and A-F; -1 for any other character. */
int hex_digit(char c);

#endif
