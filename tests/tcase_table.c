/* SPDX-License-Identifier: MIT */
/* tcase_table: see tcase_table.h. */
#include "config.h"

#include "tests/tcase_table.h"

TCase *tcase_table(Suite *s, const char *name, SFun setup, SFun teardown,
		   int timeout_s, const TTest *const *tests)
{
	TCase *tc = tcase_create(name);
	size_t i;

	if (setup != NULL || teardown != NULL)
		tcase_add_checked_fixture(tc, setup, teardown);
	if (timeout_s > 0)
		tcase_set_timeout(tc, timeout_s);
	for (i = 0; tests[i] != NULL; i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(s, tc);
	return tc;
}
