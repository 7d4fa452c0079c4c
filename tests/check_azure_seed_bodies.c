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

#define make_transport_seed_bodies_suite make_azure_seed_bodies_suite
#define suite_create(name) suite_create("azure_seed_bodies")

#include "tests/check_transport_seed_bodies.c"
