/* SPDX-License-Identifier: MIT */
/* The Check suites of check_sandboxfs, listed in suites.def. */
#ifndef SBFS_CHECK_SUITES_H
#define SBFS_CHECK_SUITES_H

#include <check.h>

#define SUITE(name) void name##_cases(Suite *s);
#include "suites.def"
#undef SUITE

#endif
