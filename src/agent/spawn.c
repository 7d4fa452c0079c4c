/* SPDX-License-Identifier: MIT */
/* spawn: placeholder until command spawning lands. */
#include "config.h"

#include "agent/spawn.h"
