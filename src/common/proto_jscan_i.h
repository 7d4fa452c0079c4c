/* SPDX-License-Identifier: MIT */
/*
 * proto_jscan_i: a walk over JSON text that sees the tokens cJSON sees,
 * private to the proto_*.c files. It finds what a cJSON tree cannot say:
 * which strings held an escaped NUL (cJSON cuts the C string there), and
 * where a member's value lies in the text (to decode a large answer one
 * piece at a time).
 *
 * The walk skips what cJSON skips between tokens (every byte up to and
 * including space, not only JSON's four), only ever moves forward and
 * never reads past end, whatever the bytes: on text cJSON would refuse it
 * stops somewhere without judging it (js_members excepted, which says
 * -EINVAL). Nesting deeper than cJSON's limit ends the walk.
 *
 * Pure; thread-safe (the state is the caller's struct jscan).
 */
#ifndef SBFS_PROTO_JSCAN_I_H
#define SBFS_PROTO_JSCAN_I_H

#include <stdbool.h>
#include <stddef.h>

/* The text still to walk: [p, end). */
struct jscan {
	const char *p;
	const char *end;
};

/* The longest key js_members reports (with its NUL); longer keys, and
 * keys that are not plain ASCII, are reported as "". */
#define JS_KEY_MAX 32

/* Step over what cJSON skips between tokens. */
void js_ws(struct jscan *s);

/* Step over one value (any type) at s, nested at depth. */
void js_skip(struct jscan *s, unsigned depth);

/* Step over the value at s; true when it is a string, or an array or an
 * object with a string directly in it (keys included), that holds an
 * escaped NUL. Values nested deeper are stepped over unjudged. */
bool js_value_nul(struct jscan *s);

/*
 * At an object: call fn for each member in order, with its key and s at
 * its value (after the colon and what follows it); fn steps over the
 * value (js_skip, js_value_nul) and returns 0 to go on, anything else to
 * stop the walk there. Returns 0 at the closing brace, what fn returned
 * when it stopped the walk, or -EINVAL when the text is not an object
 * (or ends before it does).
 */
typedef int js_member_fn(void *arg, const char *key, struct jscan *s);
int js_members(struct jscan *s, js_member_fn *fn, void *arg);

/* At an object: the value of its first member named key, as [*vs, *ve).
 * -ENOENT when there is none, -EINVAL when the text is not an object. */
int js_member(const char *p, size_t n, const char *key, const char **vs,
	      const char **ve);

#endif
