/* SPDX-License-Identifier: MIT */
/* proto_record: placeholder until it lands. */
#include "config.h"
