/* SPDX-License-Identifier: MIT */
/*
 * numarg: numbers given on a command line or in the environment: a
 * decimal count, and a byte size with an optional binary suffix. Pure,
 * thread-safe.
 */
#ifndef SBFS_COMMON_NUMARG_H
#define SBFS_COMMON_NUMARG_H

/* A decimal number in [lo, hi]: 0 with *out, -EINVAL when s does not
 * start with a digit (or is NULL), -ERANGE when it is out of range or
 * has anything after its digits. */
int numarg_uint(const char *s, unsigned long long lo, unsigned long long hi,
		unsigned long long *out) __attribute__((warn_unused_result));

/* A byte count in [lo, hi]: decimal with an optional K, M or G (powers
 * of 1024, either case). 0 with *out, -EINVAL for anything but digits and
 * one suffix, -ERANGE out of range. */
int numarg_size(const char *s, unsigned long long lo, unsigned long long hi,
		unsigned long long *out) __attribute__((warn_unused_result));

#endif
