/* SPDX-License-Identifier: MIT */
/*
 * unixurl: parse and format http+unix:// agent routes.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/hex.h"
#include "common/unixurl.h"
#include "common/xalloc.h"

static bool unreserved(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

bool unixurl_is(const char *url)
{
	return url != NULL &&
	       strncmp(url, UNIXURL_SCHEME, sizeof(UNIXURL_SCHEME) - 1) == 0;
}

/* Every component of an absolute path is a real name. */
static bool components_ok(const char *p, size_t n)
{
	size_t i = 1, start;

	if (n < 2 || p[0] != '/' || p[n - 1] == '/')
		return false;
	while (i <= n) {
		start = i;
		while (i < n && p[i] != '/')
			i++;
		if (i == start || (i - start == 1 && p[start] == '.') ||
		    (i - start == 2 && p[start] == '.' && p[start + 1] == '.'))
			return false;
		i++;
	}
	return true;
}

int unixurl_parse(const char *url, char *path, size_t size)
{
	const char *p;
	size_t n = 0;
	int hi, lo;

	if (!unixurl_is(url) || size == 0)
		return -EINVAL;
	for (p = url + sizeof(UNIXURL_SCHEME) - 1; *p != '/'; p++) {
		char c;

		if (*p == '%') {
			hi = hex_digit(p[1]);
			lo = hex_digit(hi >= 0 ? p[2] : '\0');
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			p += 2;
		} else if (unreserved(*p)) {
			c = *p;
		} else {
			return -EINVAL; /* the end of the string included */
		}
		if (c == '\0')
			return -EINVAL;
		if (n + 1 >= size)
			return -ENAMETOOLONG;
		path[n++] = c;
	}
	if (strcmp(p, "/") != 0 || !components_ok(path, n))
		return -EINVAL;
	path[n] = '\0';
	return 0;
}

char *unixurl_format(const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t pre = sizeof(UNIXURL_SCHEME) - 1, n = 0;
	const char *p;
	char *out;

	out = xmalloc(pre + 3 * strlen(path) + 2);
	memcpy(out, UNIXURL_SCHEME, pre);
	n = pre;
	for (p = path; *p != '\0'; p++) {
		if (unreserved(*p)) {
			out[n++] = *p;
		} else {
			out[n++] = '%';
			out[n++] = hex[(unsigned char)*p >> 4];
			out[n++] = hex[(unsigned char)*p & 15];
		}
	}
	out[n++] = '/';
	out[n] = '\0';
	return out;
}
