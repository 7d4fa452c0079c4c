/* SPDX-License-Identifier: MIT */
/*
 * sigdefault: what a new program is owed by the child that execs it:
 * every signal's disposition back to the default, nothing blocked. For
 * the agent's zygote and spawners and the local provider's children.
 * Async-signal-safe, and safe in a child that shares its parent's memory
 * (not instrumented by the address sanitizer).
 */
#ifndef SBFS_COMMON_SIGDEFAULT_H
#define SBFS_COMMON_SIGDEFAULT_H

void sig_defaults(void) __attribute__((no_sanitize_address));

#endif
