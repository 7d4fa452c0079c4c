/* SPDX-License-Identifier: MIT */
/* The Check suites of check_sandboxfs, listed in suites.def. */
#ifndef SBFS_CHECK_SUITES_H
#define SBFS_CHECK_SUITES_H

#include <check.h>

#define SUITE(fn) Suite *fn(void);
#include "suites.def"
#undef SUITE

#endif
