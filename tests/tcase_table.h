/* SPDX-License-Identifier: MIT */
/*
 * tcase_table: a Check test case made from a list of tests, so that a
 * suite function names its tests and says nothing else.
 */
#ifndef SBFS_TEST_TCASE_TABLE_H
#define SBFS_TEST_TCASE_TABLE_H

#include <check.h>

/* Add to s a test case called name with tests (NULL-terminated) and a
 * timeout of timeout_s seconds (0: Check's default); it is returned for
 * fixtures. */
TCase *tcase_table(Suite *s, const char *name, int timeout_s,
		   const TTest *const *tests);

#endif
