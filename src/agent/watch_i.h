/* SPDX-License-Identifier: MIT */
/*
 * watch_i: what the two halves of the event watcher share (watch.h): the
 * registry, its ring, the held requests and the attribution records,
 * under the lock (watch.c); and the watcher thread that turns what inotify
 * says into events (watch_thread.c), with its tree of watched directories
 * (watch_tree.h). The functions named "under the lock" want ev->lock held.
 */
#ifndef SBFS_AGENT_WATCH_I_H
#define SBFS_AGENT_WATCH_I_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/http.h"
#include "agent/watch.h"
#include "agent/watch_tree.h"
#include "common/buf.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"

/* One read of the queue. */
#define READ_BUF (64 * 1024)
/* How long a request waits for the watcher to take in what was queued
 * when it came, at least. */
#define SYNC_MS 2000

enum ev_state {
	EV_IDLE = 0, /* nobody asked yet */
	EV_STARTING, /* the first walk runs */
	EV_RUNNING,
	EV_FAILED, /* for the rest of the boot */
};

/* One event in the ring. */
struct rec {
	uint64_t seq;
	enum proto_event_type type;
	bool dir;
	char *path, *to, *by;
};

/* A request held for events, for the watcher to catch up, or for it to
 * start. */
struct waiter {
	struct waiter *next;
	struct agent_deferred *d;
	bool from_now; /* no since: the answer is where now is */
	uint64_t since;
	uint64_t sync; /* the queue position the watcher must reach */
	int64_t deadline; /* waitMs */
	int64_t sync_deadline;
};

/* A change a file route makes for a client (watch.h, attribution). */
struct own {
	struct own *next;
	uint64_t token;
	char client[PROTO_CLIENT_ID_MAX + 1];
	char *rel, *rel2;
	unsigned kinds, kinds2;
	uint64_t start, end; /* queue positions; end UINT64_MAX meanwhile */
	int64_t expires;
};

/* An answer built under the lock, sent after it. */
struct reply {
	struct reply *next;
	struct agent_deferred *d;
	struct buf body;
	int rc;
};

struct agent_events {
	struct agent *a;
	pthread_mutex_t lock;
	enum ev_state state;
	char why[256]; /* EV_FAILED: the reason */
	bool stopping;
	atomic_bool stop; /* the thread's: leave now */
	pthread_t thread;
	bool thread_started;
	int wake_fd; /* eventfd: a new held request, or stop */
	int ifd; /* inotify; -1 unless starting or running */

	/* The ring: count events from head, oldest first. */
	struct rec *ring;
	size_t cap, head, count, bytes;
	uint64_t last_seq; /* the newest seq given, 0 before the first */
	uint64_t lost_seq; /* the newest lost event's */
	uint64_t delivered; /* the newest seq an answer reached */
	bool lost_on_ready; /* an answer said "now" before the first walk */
	struct waiter *waiters;

	/* Attribution, and the queue position it is measured in. */
	struct own *owns;
	size_t nowns;
	uint64_t next_token;
	uint64_t read_total; /* bytes the thread has read from the queue */
	uint64_t processed; /* of them, the events taken in */

	/* The thread's alone. */
	struct wtree tree;
	size_t limit; /* --watch-limit, 0: the kernel's only */
	char *rbuf;
	bool rebuild;
	int fail_rc;
	struct {
		bool active;
		uint32_t cookie;
		struct wnode *parent;
		char name[NAME_MAX_BYTES + 1];
		bool dir;
		uint64_t off;
		int64_t since;
	} pend; /* an IN_MOVED_FROM waiting for its IN_MOVED_TO */
	struct {
		bool active;
		struct wnode *node; /* the directory renamed over */
		struct wnode *from_parent, *to_parent;
		char from_name[NAME_MAX_BYTES + 1];
		char to_name[NAME_MAX_BYTES + 1];
		int64_t since;
	} xchg; /* the first half of a directory exchange */
};

/* ---- the ring, the held requests and attribution (watch.c) ------------- */

/* Under the lock: a new event at the ring's head; a write or attr that
 * repeats the newest undelivered one is dropped. */
void events_ring_push(struct agent_events *ev, enum proto_event_type type,
		      bool dir, const char *path, const char *to,
		      const char *by);
/* Under the lock: a lost event. */
void events_push_lost(struct agent_events *ev);
/* Under the lock: the bytes the kernel has queued and the thread has not
 * read yet. */
uint64_t events_queued(struct agent_events *ev);
/* Under the lock: take the held requests that may be answered at now
 * (their answers, built, go on *out for events_send_replies). */
void events_release_waiters(struct agent_events *ev, int64_t now,
			    struct reply **out);
/* Under the lock: the earliest deadline of a held request; INT64_MAX. */
int64_t events_waiters_next(struct agent_events *ev);
/* Send built answers (no lock held), and free them. */
void events_send_replies(struct reply *r);
/* Under the lock: the watcher stops for the rest of the boot. */
void events_fail_locked(struct agent_events *ev, const char *why);
/* Under the lock: the client an event queued at off was made for, or
 * NULL (watch.h, attribution). */
const char *events_own_match(struct agent_events *ev,
			     enum proto_event_type type, const char *rel,
			     const char *to, uint64_t off, int64_t now);
/* Under the lock: forget the records past their time. */
void events_owns_retire(struct agent_events *ev, int64_t now);

/* ---- the thread (watch_thread.c) ----------------------------------------- */

/* The watcher thread's body; arg is the registry. */
void *events_thread_main(void *arg);

#endif
