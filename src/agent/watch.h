/* SPDX-License-Identifier: MIT */
/*
 * watch: the change events of the session root (doc/protocol-ext.md,
 * "Change events"). A watcher thread turns what the kernel reports about
 * the root's tree into events (create, remove, rename, write, attr, each
 * with its path relative to the root and whether it is a directory), each
 * numbered by a seq that only grows within a boot, kept in a bounded ring;
 * GET /sandboxfs/v1/events hands them out, long-polling as a deferred
 * reply (no HTTP worker waits).
 *
 * Why inotify. fanotify with FAN_REPORT_DFID_NAME covers a whole file
 * system with one mark, but it needs CAP_SYS_ADMIN in the initial user
 * namespace, which the agent does not have when it runs confined, in a
 * container or unprivileged. inotify works for any user in any namespace.
 * Its cost is one watch per directory, added as directories appear and
 * dropped as they go, counted per user against
 * fs.inotify.max_user_watches (about 1 KiB of kernel memory each). When a
 * watch cannot be added (that limit, --watch-limit, no memory) or no
 * inotify instance can be made (fs.inotify.max_user_instances), the
 * watcher stops for the rest of the boot: it drops its watches, emits
 * `lost`, and health advertises "events":0 with the reason, so clients
 * fall back to their timeouts (SEMANTICS.md, "Change events").
 *
 * Lazy: nothing is watched until the first events request, so a sandbox
 * nobody watches pays nothing; from then on the watcher runs until the
 * agent stops.
 *
 * The ring keeps the last AGENT_EVENTS_RING events (--events-ring) and at
 * most AGENT_EVENTS_RING_BYTES of their paths; a reader whose since has
 * left it, a queue overflow in the kernel, and anything else that makes
 * the watcher unsure of what it saw, are answered with a single `lost`
 * event.
 *
 * Thread-safe. One mutex guards the ring, the held requests and the
 * attribution records; the tree of watched directories belongs to the
 * watcher thread alone.
 */
#ifndef SBFS_AGENT_WATCH_H
#define SBFS_AGENT_WATCH_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"

/* Events the ring keeps by default (--events-ring), and the bound on the
 * bytes of their paths. */
#define AGENT_EVENTS_RING 65536
#define AGENT_EVENTS_RING_MIN 16
#define AGENT_EVENTS_RING_MAX (1U << 20)
#define AGENT_EVENTS_RING_BYTES (16UL * 1024 * 1024)
/* How long a change a file route made for a client may still be matched
 * to the events it caused ("by"), from when the route began it. */
#define AGENT_EVENTS_OWN_MS 2000

/* The registry of events; a->cfg must be final. Nothing starts yet. */
int agent_events_new(struct agent *a, struct agent_events **out)
	__attribute__((warn_unused_result));
/* Stop the watcher, answer held requests (discarded when the HTTP server
 * has stopped, which it must have), free. NULL-safe. */
void agent_events_free(struct agent_events *ev);

/* Whether events can be given (not strict v1, the watcher has not failed);
 * when not, why[whysz] says why ("" for strict v1). */
bool agent_events_available(struct agent_events *ev, char *why, size_t whysz);

/* What a file route is about to change (a bit set). */
enum agent_event_kind {
	AGENT_EV_CREATE = 1 << 0,
	AGENT_EV_REMOVE = 1 << 1,
	AGENT_EV_RENAME = 1 << 2,
	AGENT_EV_WRITE = 1 << 3,
	AGENT_EV_ATTR = 1 << 4,
};

/*
 * Attribution ("by"). A file route that changes rel for a request that
 * named its client (X-Sandboxfs-Client, already checked with
 * proto_client_id_valid) calls _begin before the change and _end after it.
 * Events of the kinds given for rel (and of kinds2 for rel2, may be NULL)
 * that the kernel queued between the two calls carry "by": client. A
 * rename is matched as the pair rel -> rel2 (AGENT_EV_RENAME in kinds), or
 * also rel2 -> rel (AGENT_EV_RENAME in kinds2: an exchange).
 *
 * Conservative: the window is measured in the kernel's queue (its length
 * is read at both calls), so an event queued before _begin or after _end
 * is never matched; an event matched by two clients' records carries no
 * "by"; a record matches nothing AGENT_EVENTS_OWN_MS after _begin, or
 * after _end(done false). What cannot be told apart is another process's
 * change of the same path made during the route's own system call.
 *
 * _begin returns a token for _end, 0 when nothing was recorded (no client,
 * the watcher is not running); _end(0) does nothing.
 */
uint64_t agent_events_own_begin(struct agent_events *ev, const char *client,
				const char *rel, unsigned kinds,
				const char *rel2, unsigned kinds2);
void agent_events_own_end(struct agent_events *ev, uint64_t token, bool done);

#endif
