/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>

#include "common/strv.h"

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
