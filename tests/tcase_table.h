/* SPDX-License-Identifier: MIT */
/*
 * tcase_table: a Check test case made from a list of tests, so that a
 * suite function names its cases and their tests and says nothing else.
 */
#ifndef SBFS_TEST_TCASE_TABLE_H
#define SBFS_TEST_TCASE_TABLE_H

#include <check.h>

/*
 * Add to s a test case called name with tests (NULL-terminated), each run
 * between setup and teardown (checked fixtures; both NULL: none), within
 * timeout_s seconds (0: Check's default). The case is returned, for an
 * unchecked fixture or loop tests.
 */
TCase *tcase_table(Suite *s, const char *name, SFun setup, SFun teardown,
		   int timeout_s, const TTest *const *tests);

/* The same with the tests listed. */
#define TCASE_TABLE(s, name, setup, teardown, timeout_s, ...) \
	tcase_table(s, name, setup, teardown, timeout_s,      \
		    (const TTest *const[]){__VA_ARGS__, NULL})

#endif
