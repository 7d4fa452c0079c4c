/* SPDX-License-Identifier: MIT */
/* sandbox-agent: placeholder main. */
#include "config.h"

#include <stdio.h>

int main(void)
{
	fputs("sandbox-agent: not built yet\n", stderr);
	return 1;
}
