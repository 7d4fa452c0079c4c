/* SPDX-License-Identifier: MIT */
/*
 * b64: strict RFC 4648 base64. Written here rather than taken from OpenSSL
 * because EVP_DecodeBlock accepts whitespace and unpadded input and reports
 * padding as zero bytes; the protocol wants exact lengths.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "common/b64.h"

static const char enc_tab[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int dec_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

size_t b64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

size_t b64_decoded_max(size_t n)
{
	return n / 4 * 3;
}

size_t b64_encode(const void *in, size_t n, char *out)
{
	const unsigned char *p = in;
	size_t i, o = 0;

	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 |
			     p[i + 2];

		out[o++] = enc_tab[v >> 18];
		out[o++] = enc_tab[(v >> 12) & 63];
		out[o++] = enc_tab[(v >> 6) & 63];
		out[o++] = enc_tab[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		out[o++] = enc_tab[v >> 18];
		out[o++] = enc_tab[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		out[o++] = enc_tab[v >> 18];
		out[o++] = enc_tab[(v >> 12) & 63];
		out[o++] = enc_tab[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

long b64_decode(const char *in, size_t n, void *out)
{
	const unsigned char *s = (const unsigned char *)in;
	unsigned char *q = out;
	size_t i, o = 0;

	if (n % 4 != 0)
		return -EINVAL;
	for (i = 0; i < n; i += 4) {
		int a = dec_val(s[i]), b = dec_val(s[i + 1]);
		int c, d;
		bool last = i + 4 == n;

		if (a < 0 || b < 0)
			return -EINVAL;
		if (last && s[i + 2] == '=') {
			/* "xx==": one byte; the low four bits of b must be 0. */
			if (s[i + 3] != '=' || (b & 15) != 0)
				return -EINVAL;
			q[o++] = (unsigned char)(a << 2 | b >> 4);
			break;
		}
		c = dec_val(s[i + 2]);
		if (c < 0)
			return -EINVAL;
		if (last && s[i + 3] == '=') {
			if ((c & 3) != 0)
				return -EINVAL;
			q[o++] = (unsigned char)(a << 2 | b >> 4);
			q[o++] = (unsigned char)((b & 15) << 4 | c >> 2);
			break;
		}
		d = dec_val(s[i + 3]);
		if (d < 0)
			return -EINVAL;
		q[o++] = (unsigned char)(a << 2 | b >> 4);
		q[o++] = (unsigned char)((b & 15) << 4 | c >> 2);
		q[o++] = (unsigned char)((c & 3) << 6 | d);
	}
	return (long)o;
}

bool b64_valid(const char *s, size_t n)
{
	unsigned char tmp[3];
	size_t i;

	if (n % 4 != 0)
		return false;
	for (i = 0; i < n; i += 4) {
		/* Padding is only allowed in the last block. */
		if (i + 4 < n && (s[i + 2] == '=' || s[i + 3] == '='))
			return false;
		if (b64_decode(s + i, 4, tmp) < 0)
			return false;
	}
	return true;
}
