/* SPDX-License-Identifier: MIT */
/* proto_files: placeholder until it lands. */
#include "config.h"
