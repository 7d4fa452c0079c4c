/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>

#include "common/strv.h"
#include "common/xalloc.h"

void strv_free(char **v, size_t n)
{
	size_t i;

	if (v == NULL)
		return;
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void strv_free_null(char **v)
{
	size_t i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

char **strv_dup_null(const char *const *v)
{
	size_t n = 0, i;
	char **out;

	while (v != NULL && v[n] != NULL)
		n++;
	out = xcalloc(n + 1, sizeof(*out));
	for (i = 0; i < n; i++)
		out[i] = xstrdup(v[i]);
	return out;
}
