/* SPDX-License-Identifier: MIT */
/* fsops: placeholder until the file extension lands. */
#include "config.h"

#include "agent/fsops.h"
