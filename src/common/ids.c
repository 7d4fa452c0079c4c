/* SPDX-License-Identifier: MIT */
/* ids: see ids.h. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "common/ids.h"

static int random_bytes(unsigned char *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = getrandom(b + got, n - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		got += (size_t)r;
	}
	return 0;
}

int ids_uuid(char out[IDS_UUID_LEN + 1])
{
	unsigned char b[16];

	if (random_bytes(b, sizeof(b)) < 0)
		return -EIO;
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, IDS_UUID_LEN + 1,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}

int ids_hex(char *out, size_t size, const char *prefix, size_t n)
{
	unsigned char b[64];
	size_t i, at;

	if (n > sizeof(b) || size == 0 || random_bytes(b, n) < 0)
		return -EIO;
	snprintf(out, size, "%s", prefix);
	at = strlen(out);
	for (i = 0; i < n && at + 2 < size; i++, at += 2)
		snprintf(out + at, size - at, "%02x", b[i]);
	return 0;
}
