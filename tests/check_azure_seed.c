/* SPDX-License-Identifier: MIT */
/*
 * The seed's scenarios of check_transport_seed.c through the Azure provider
 * (azure_seed_shim.h): the file is compiled a second time here, as the
 * suite "azure_seed"; the tests keep the seed's names.
 */
#include "config.h"

#include <check.h>

#define SBFS_AZURE_SEED_RENAME
#include "tests/azure_seed_shim.h"

#define transport_seed_cases azure_seed_cases

#include "tests/check_transport_seed.c"
