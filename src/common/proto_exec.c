/* SPDX-License-Identifier: MIT */
/* proto_exec: placeholder until it lands. */
#include "config.h"
