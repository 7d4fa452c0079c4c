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
	char tmp[4096];
	size_t len = strlen(token);
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		return -errno;
	/* The umask cannot widen 0600, but an inherited ACL default could. */
	if (fchmod(fd, 0600) < 0 || write(fd, token, len) != (ssize_t)len ||
	    fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}
