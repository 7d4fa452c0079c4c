/* SPDX-License-Identifier: MIT */
/*
 * path: lexical normalisation. Deliberately string-only, so that it can be
 * fuzzed and reasoned about apart from the filesystem.
 */
#include "config.h"

#include <string.h>

#include "common/path.h"
#include "common/xalloc.h"

const char *path_verdict_reason(enum path_verdict v)
{
	switch (v) {
	case PATH_OK:
		return "path is valid";
	case PATH_EMPTY:
		return "path is empty";
	case PATH_UPWARD:
		return "path traverses upward";
	case PATH_BAD_BYTE:
		return "path carries a byte no path may hold";
	case PATH_TOO_LONG:
		return "path is too long";
	}
	return "path is invalid";
}

enum path_verdict path_normalize(const char *in, size_t n, bool allow_root,
				 char *out, size_t outsz)
{
	size_t i = 0, o = 0;

	if (outsz == 0)
		return PATH_TOO_LONG;
	out[0] = '\0';
	if (n > PATH_MAX_BYTES)
		return PATH_TOO_LONG;
	if (n == 0)
		return allow_root ? PATH_OK : PATH_EMPTY;
	if (memchr(in, '\0', n) != NULL)
		return PATH_BAD_BYTE;
	while (i < n) {
		size_t start, len;

		while (i < n && in[i] == '/')
			i++;
		start = i;
		while (i < n && in[i] != '/')
			i++;
		len = i - start;
		if (len == 0 || (len == 1 && in[start] == '.'))
			continue;
		if (len == 2 && in[start] == '.' && in[start + 1] == '.')
			return PATH_UPWARD;
		if (o + (o > 0) + len + 1 > outsz)
			return PATH_TOO_LONG;
		if (o > 0)
			out[o++] = '/';
		memcpy(out + o, in + start, len);
		o += len;
	}
	out[o] = '\0';
	if (o == 0 && !allow_root)
		return PATH_EMPTY;
	return PATH_OK;
}

bool path_split(char *rel, const char **parent, const char **name)
{
	char *slash;

	if (rel[0] == '\0')
		return false;
	slash = strrchr(rel, '/');
	if (slash == NULL) {
		*parent = "";
		*name = rel;
		return true;
	}
	*slash = '\0';
	*parent = rel;
	*name = slash + 1;
	return true;
}

bool path_component_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > NAME_MAX_BYTES)
		return false;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	return strchr(name, '/') == NULL;
}

bool path_rel_valid(const char *p)
{
	char comp[NAME_MAX_BYTES + 1];

	while (*p != '\0') {
		size_t n = strcspn(p, "/");

		if (n == 0 || n >= sizeof(comp))
			return false;
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (!path_component_valid(comp))
			return false;
		p += n;
		if (*p == '/')
			p++;
		if (*p == '\0' && p[-1] == '/')
			return false;
	}
	return true;
}

const char *path_parent(const char *rel, char *out, size_t size)
{
	const char *slash = strrchr(rel, '/');
	size_t n = slash != NULL ? (size_t)(slash - rel) : 0;

	if (size > 0) {
		if (n >= size)
			n = size - 1;
		memcpy(out, rel, n);
		out[n] = '\0';
	}
	return slash != NULL ? slash + 1 : rel;
}

char *path_join(const char *dir, const char *name)
{
	return *dir != '\0' ? xasprintf("%s/%s", dir, name) : xstrdup(name);
}
