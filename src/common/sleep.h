/* SPDX-License-Identifier: MIT */
/*
 * sleep: a pause of some milliseconds on the calling thread, resumed
 * after a signal until the whole pause has passed (a poll between two
 * looks at something, never a wait for it). Thread-safe.
 */
#ifndef SBFS_COMMON_SLEEP_H
#define SBFS_COMMON_SLEEP_H

/* Sleep ms milliseconds (nothing when ms <= 0). */
void sleep_ms(long ms);

#endif
