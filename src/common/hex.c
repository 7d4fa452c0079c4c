/* SPDX-License-Identifier: MIT */
/*
 * hex: one hexadecimal digit's value (contract in hex.h).
 */
#include "config.h"

#include <ctype.h>
#include <string.h>

#include "common/hex.h"

int hex_digit(char c)
{
	static const char digits[] = "0123456789abcdef";
	const char *at;

	if (c == '\0')
		return -1;
	at = strchr(digits, tolower((unsigned char)c));
	return at != NULL ? (int)(at - digits) : -1;
}
