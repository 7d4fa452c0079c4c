/* SPDX-License-Identifier: MIT */
/*
 * httpstatus: the reason phrase of an HTTP status code (RFC 9110, section
 * 15), for messages that name a status and for the test servers' status
 * lines.
 *
 * Pure; thread-safe.
 */
#ifndef SBFS_COMMON_HTTPSTATUS_H
#define SBFS_COMMON_HTTPSTATUS_H

/* "Not Found" for 404 and so on; "" for a code not listed here (a status
 * line may have an empty reason phrase). */
const char *http_status_text(long status);

#endif
