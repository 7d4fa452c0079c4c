/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "common/numarg.h"

int numarg_uint(const char *s, unsigned long long lo, unsigned long long hi,
		unsigned long long *out)
{
	unsigned long long v;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}

int numarg_size(const char *s, unsigned long long lo, unsigned long long hi,
		unsigned long long *out)
{
	unsigned long long v, mul = 1;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -ERANGE;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1ULL << 10;
		break;
	case 'm':
	case 'M':
		mul = 1ULL << 20;
		break;
	case 'g':
	case 'G':
		mul = 1ULL << 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end != '\0' && end[1] != '\0')
		return -EINVAL;
	if (v > hi / mul || v * mul < lo || v * mul > hi)
		return -ERANGE;
	*out = v * mul;
	return 0;
}
