/* SPDX-License-Identifier: MIT */
/* proto_record: provider records (placeholder header). */
#ifndef SBFS_PROTO_RECORD_H
#define SBFS_PROTO_RECORD_H
#endif
