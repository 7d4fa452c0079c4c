/* SPDX-License-Identifier: MIT */
/*
 * token: per-boot credentials from OpenSSL's CSPRNG, wiped after use.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/b64.h"
#include "common/fileio.h"
#include "common/token.h"

int token_generate(char out[TOKEN_CHARS + 1])
{
	unsigned char raw[TOKEN_RAW_BYTES];

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -EIO;
	b64_encode(raw, sizeof(raw), out);
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

bool token_valid(const char *s, size_t n)
{
	unsigned char raw[TOKEN_RAW_BYTES + 3];
	long len;

	if (s == NULL || n != TOKEN_CHARS)
		return false;
	if (memchr(s, '\0', n) != NULL)
		return false;
	len = b64_decode(s, n, raw);
	OPENSSL_cleanse(raw, sizeof(raw));
	return len == TOKEN_RAW_BYTES;
}

bool token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return false;
	return CRYPTO_memcmp(a, b, alen) == 0;
}

void token_wipe(void *p, size_t n)
{
	if (p != NULL)
		OPENSSL_cleanse(p, n);
}

void token_free(char *s)
{
	if (s == NULL)
		return;
	OPENSSL_cleanse(s, strlen(s));
	free(s);
}

int token_write_file(const char *path, const char *token)
{
	return file_write_atomic(path, token, strlen(token), 0600);
}
