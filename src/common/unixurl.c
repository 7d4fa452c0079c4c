/* SPDX-License-Identifier: MIT */
/*
 * unixurl: parse and format http+unix:// agent routes.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/buf.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/unixurl.h"

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
	struct buf b = BUF_INIT(0);

	/* '/' is not kept: the path is the URL's host part. */
	if (buf_append_str(&b, UNIXURL_SCHEME) < 0 ||
	    buf_append_escaped(&b, path, NULL) < 0 ||
	    buf_append_str(&b, "/") < 0)
		fatalx("out of memory");
	return buf_take(&b, NULL);
}
