/* SPDX-License-Identifier: MIT */
/*
 * check_sandboxfs: the one Check runner. Every suite in suites.def is added;
 * CK_RUN_SUITE / CK_RUN_CASE select, CK_FORK=no runs in-process (valgrind).
 */
#include "config.h"

#include <signal.h>
#include <stdlib.h>

#include "common/log.h"
#include "tests/check_suites.h"

/* The suite called name, its cases added by add. */
static Suite *suite_of(const char *name, void (*add)(Suite *s))
{
	Suite *s = suite_create(name);

	add(s);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	/* A peer that closes early must fail a test, not kill the runner. */
	signal(SIGPIPE, SIG_IGN);
	log_init("check_sandboxfs",
		 getenv("SBFS_TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR);
	sr = srunner_create(NULL);
#define SUITE(name) srunner_add_suite(sr, suite_of(#name, name##_cases));
#include "tests/suites.def"
#undef SUITE
	srunner_set_tap(sr, getenv("CHECK_TAP"));
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
