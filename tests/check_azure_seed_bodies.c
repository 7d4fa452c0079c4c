/* SPDX-License-Identifier: MIT */
/*
 * The seed's scenarios of check_transport_seed_bodies.c through the Azure provider
 * (azure_seed_shim.h): the file is compiled a second time here, as the
 * suite "azure_seed_bodies"; the tests keep the seed's names.
 */
#include "config.h"

#include <check.h>

#define SBFS_AZURE_SEED_RENAME
#include "tests/azure_seed_shim.h"

#define transport_seed_bodies_cases azure_seed_bodies_cases

#include "tests/check_transport_seed_bodies.c"
