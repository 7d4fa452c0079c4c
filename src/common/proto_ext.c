/* SPDX-License-Identifier: MIT */
/* proto_ext: placeholder until it lands. */
#include "config.h"
