/* SPDX-License-Identifier: MIT */
/*
 * watch: change events from inotify, the ring that numbers them, and GET
 * /sandboxfs/v1/events (doc/protocol-ext.md, "Change events").
 *
 * The watcher thread keeps a tree of the directories it watches: one node
 * per inotify watch, found by watch descriptor (to name an event's path)
 * and by parent and name (to follow renames, which move a watched
 * directory and everything beneath it without a word from the kernel about
 * the descendants). A directory is watched before it is read, so an entry
 * made while it is read is either read or reported; a directory that
 * appears is reported once it is watched, and its contents as creates
 * after it, so a client that lists it on hearing of it misses nothing.
 *
 * What the kernel says, and what becomes of it:
 *   IN_CREATE                 create (a directory: once it is watched,
 *                             then its entries)
 *   IN_DELETE                 remove
 *   IN_MOVED_FROM + _TO       rename, paired by cookie; one without the
 *                             other is a remove (moved out of the root)
 *                             or a create (moved in)
 *   IN_MODIFY, IN_CLOSE_WRITE write (a file opened for writing and closed
 *                             counts: writes through mmap show only there)
 *   IN_ATTRIB                 attr
 *   IN_Q_OVERFLOW, IN_UNMOUNT, a rename the watcher cannot follow
 *                             lost: the watcher forgets its tree, watches
 *                             the root's again, then emits lost
 * A directory renamed over a watched one is followed: the kernel reports
 * the link count of the replaced one (IN_ATTRIB on it), or, for an
 * exchange, the reverse rename next.
 * A write or attr that repeats the newest event of the ring is dropped,
 * unless an answer has handed that event out already: a reader that saw
 * it must see the later change too.
 *
 * Requests are answered once the watcher has taken in every event the
 * kernel had queued when they arrived (the queue's length is read then),
 * so an answer reflects every change made before its request.
 *
 * The thread is started by the first request's handler and keeps its
 * file credentials (http.c sets them for the file routes): it reads the
 * directories the file routes can read, and opens them the way the v1
 * routes do, beneath the root with no symlink anywhere.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include "agent/http.h"
#include "agent/resolve.h"
#include "agent/routes.h"
#include "agent/watch.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/xalloc.h"

#define WATCH_MASK                                                         \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | \
	 IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |      \
	 IN_ONLYDIR | IN_EXCL_UNLINK)
/* One read of the queue. */
#define READ_BUF (64 * 1024)
/* How long an IN_MOVED_FROM waits for its IN_MOVED_TO (the kernel queues
 * them together; only another CPU's event can come between). */
#define MOVE_WAIT_MS 10
/* How long a request waits for the watcher to take in what was queued
 * when it came, at least. */
#define SYNC_MS 2000
/* Attribution records at once. */
#define OWN_MAX 4096
/* What an event costs the ring besides its strings. */
#define REC_OVERHEAD 64
/* The longest path an event carries: with its '/', PATH_MAX_BYTES on the
 * wire. */
#define EV_PATH_MAX (PATH_MAX_BYTES - 1)
/* Directories read between looks at held requests' deadlines. */
#define WALK_CHECK 256

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

/* A watched directory. */
struct wnode {
	struct wnode *parent, *child, *next, *prev; /* the tree */
	struct wnode *wd_link, *name_link; /* hash chains */
	char *name;
	size_t namelen;
	int wd;
	dev_t dev;
};

struct tab {
	struct wnode **b;
	size_t nb, n;
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
	struct tab wds, names;
	struct wnode *root;
	size_t nwatches;
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

static bool str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static long read_sysctl(const char *path)
{
	char text[32];
	long v = -1;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	if (n > 0) {
		text[n] = '\0';
		v = strtol(text, NULL, 10);
	}
	close(fd);
	return v;
}

/* ---- the ring (under the lock) -------------------------------------------- */

static struct rec *ring_at(struct agent_events *ev, size_t i)
{
	return &ev->ring[(ev->head + i) % ev->cap];
}

/* The seq of the oldest event kept (last_seq + 1 when none is). */
static uint64_t ring_first(struct agent_events *ev)
{
	return ev->count > 0 ? ring_at(ev, 0)->seq : ev->last_seq + 1;
}

static size_t rec_bytes(const struct rec *r)
{
	return REC_OVERHEAD + (r->path ? strlen(r->path) : 0) +
	       (r->to ? strlen(r->to) : 0) + (r->by ? strlen(r->by) : 0);
}

static void rec_clear(struct rec *r)
{
	free(r->path);
	free(r->to);
	free(r->by);
	memset(r, 0, sizeof(*r));
}

static void ring_push(struct agent_events *ev, enum proto_event_type type,
		      bool dir, const char *path, const char *to,
		      const char *by)
{
	struct rec r;
	size_t need;

	if (ev->count > 0 &&
	    (type == PROTO_EV_WRITE || type == PROTO_EV_ATTR)) {
		const struct rec *last = ring_at(ev, ev->count - 1);

		if (last->seq > ev->delivered && last->type == type &&
		    last->dir == dir && str_eq(last->path, path) &&
		    str_eq(last->by, by))
			return;
	}
	memset(&r, 0, sizeof(r));
	r.seq = ++ev->last_seq;
	r.type = type;
	r.dir = dir;
	r.path = path ? xstrdup(path) : NULL;
	r.to = to ? xstrdup(to) : NULL;
	r.by = by ? xstrdup(by) : NULL;
	need = rec_bytes(&r);
	while (ev->count > 0 && (ev->count == ev->cap ||
				 ev->bytes + need > AGENT_EVENTS_RING_BYTES)) {
		struct rec *old = ring_at(ev, 0);

		ev->bytes -= rec_bytes(old);
		rec_clear(old);
		ev->head = (ev->head + 1) % ev->cap;
		ev->count--;
	}
	*ring_at(ev, ev->count) = r;
	ev->count++;
	ev->bytes += need;
	if (type == PROTO_EV_LOST)
		ev->lost_seq = r.seq;
}

static void push_lost(struct agent_events *ev)
{
	ring_push(ev, PROTO_EV_LOST, false, NULL, NULL, NULL);
}

/* Whether a reader from since must be told lost: it names a seq this boot
 * never gave, events after it left the ring, or a lost came after it. */
static bool need_lost(struct agent_events *ev, uint64_t since)
{
	return since > ev->last_seq || since < ev->lost_seq ||
	       since + 1 < ring_first(ev);
}

/* The answer for since (from_now: where now is) into out. */
static int build_answer(struct agent_events *ev, bool from_now, uint64_t since,
			struct buf *out)
{
	const char *why = NULL;
	uint64_t next, s;
	size_t n = 0;
	int rc;

	rc = proto_events_begin(out, ev->a->boot_id);
	if (rc < 0)
		return rc;
	if (ev->state == EV_FAILED || (!from_now && need_lost(ev, since))) {
		struct proto_event e;

		memset(&e, 0, sizeof(e));
		e.seq = ev->last_seq;
		e.type = PROTO_EV_LOST;
		rc = proto_events_add(out, true, &e);
		next = ev->last_seq;
		if (ev->state == EV_FAILED)
			why = ev->why;
	} else if (from_now) {
		next = ev->last_seq;
	} else {
		uint64_t first = ring_first(ev);

		next = since;
		for (s = since + 1; s <= ev->last_seq && rc == 0; s++) {
			const struct rec *r = ring_at(ev, (size_t)(s - first));
			struct proto_event e;

			if (n == PROTO_EXT_EVENTS_MAX ||
			    out->len >= PROTO_EXT_EVENTS_PAGE_BYTES)
				break;
			memset(&e, 0, sizeof(e));
			e.seq = r->seq;
			e.type = r->type;
			e.dir = r->dir;
			e.path = r->path;
			e.to = r->to;
			if (r->by != NULL)
				strlcpy_s(e.by, r->by, sizeof(e.by));
			rc = proto_events_add(out, n == 0, &e);
			if (rc == 0) {
				n++;
				next = s;
			}
		}
	}
	if (rc == 0)
		rc = proto_events_end(out, next, why);
	/* From here on a repeat of the newest event is news to someone. */
	if (rc == 0 && next > ev->delivered)
		ev->delivered = next;
	return rc;
}

/* ---- held requests (under the lock) ---------------------------------------- */

/* The bytes the kernel has queued and the thread has not read yet. */
static uint64_t queued(struct agent_events *ev)
{
	int n = 0;

	if (ev->ifd < 0 || ioctl(ev->ifd, FIONREAD, &n) < 0 || n < 0)
		return 0;
	return (uint64_t)n;
}

static bool waiter_ready(struct agent_events *ev, const struct waiter *w,
			 int64_t now)
{
	if (ev->stopping || ev->state == EV_FAILED)
		return true;
	if (ev->state != EV_RUNNING)
		return now >= w->deadline;
	if (ev->processed < w->sync && now < w->sync_deadline)
		return false;
	if (w->from_now)
		return true;
	return need_lost(ev, w->since) || w->since < ev->last_seq ||
	       now >= w->deadline;
}

static struct reply *answer(struct agent_events *ev, const struct waiter *w)
{
	struct reply *r = xcalloc(1, sizeof(*r));

	/* A "now" given before the first walk ended is a point the watcher
	 * may not have covered: the walk's end says lost. */
	if (w->from_now && ev->state == EV_STARTING)
		ev->lost_on_ready = true;
	buf_init(&r->body, PROTO_EXT_EVENTS_MAX_BYTES);
	r->rc = build_answer(ev, w->from_now, w->since, &r->body);
	return r;
}

static void release_waiters(struct agent_events *ev, int64_t now,
			    struct reply **replies)
{
	struct waiter **pp = &ev->waiters;

	while (*pp != NULL) {
		struct waiter *w = *pp;
		struct reply *r;

		if (!waiter_ready(ev, w, now)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		r = answer(ev, w);
		r->d = w->d;
		r->next = *replies;
		*replies = r;
		free(w);
	}
}

static int64_t waiters_next(struct agent_events *ev)
{
	int64_t next = INT64_MAX;
	struct waiter *w;

	for (w = ev->waiters; w != NULL; w = w->next) {
		if (w->deadline < next)
			next = w->deadline;
		if (w->sync_deadline > 0 && w->sync_deadline < next)
			next = w->sync_deadline;
	}
	return next;
}

/* Send what release_waiters collected; call without the lock. */
static void send_replies(struct reply *r)
{
	while (r != NULL) {
		struct reply *next = r->next;

		if (r->rc < 0)
			agent_deferred_error(r->d, 500,
					     PROTO_ERR_OPERATION_FAILED,
					     "Agent operation 'events' failed: "
					     "%s",
					     strerror(-r->rc));
		else
			agent_deferred_json(r->d, 200, &r->body);
		buf_cleanup(&r->body);
		free(r);
		r = next;
	}
}

/* Give up for the rest of the boot: the watches go with the descriptor. */
static void fail_locked(struct agent_events *ev, const char *why)
{
	if (ev->state == EV_FAILED)
		return;
	ev->state = EV_FAILED;
	strlcpy_s(ev->why, why, sizeof(ev->why));
	if (ev->ifd >= 0) {
		close(ev->ifd);
		ev->ifd = -1;
	}
	push_lost(ev);
	log_warn("events: unavailable: %s", why);
}

static void wake(struct agent_events *ev)
{
	uint64_t one = 1;

	if (write(ev->wake_fd, &one, sizeof(one)) < 0)
		log_debug("events: cannot wake the watcher: %s",
			  strerror(errno));
}

/* ---- attribution (under the lock) ------------------------------------------ */

static unsigned kind_bit(enum proto_event_type t)
{
	switch (t) {
	case PROTO_EV_CREATE:
		return AGENT_EV_CREATE;
	case PROTO_EV_REMOVE:
		return AGENT_EV_REMOVE;
	case PROTO_EV_RENAME:
		return AGENT_EV_RENAME;
	case PROTO_EV_WRITE:
		return AGENT_EV_WRITE;
	case PROTO_EV_ATTR:
		return AGENT_EV_ATTR;
	default:
		return 0;
	}
}

/* The client whose change the event at queue position off was, or NULL:
 * none, or more than one. */
static const char *own_match(struct agent_events *ev,
			     enum proto_event_type type, const char *rel,
			     const char *to, uint64_t off, int64_t now)
{
	unsigned bit = kind_bit(type);
	const char *by = NULL;
	struct own *o;

	if (off == UINT64_MAX || bit == 0)
		return NULL;
	for (o = ev->owns; o != NULL; o = o->next) {
		bool m;

		if (off < o->start || off >= o->end || now > o->expires)
			continue;
		if (type == PROTO_EV_RENAME)
			m = ((o->kinds & bit) && str_eq(o->rel, rel) &&
			     str_eq(o->rel2, to)) ||
			    ((o->kinds2 & bit) && str_eq(o->rel2, rel) &&
			     str_eq(o->rel, to));
		else
			m = ((o->kinds & bit) && str_eq(o->rel, rel)) ||
			    ((o->kinds2 & bit) && o->rel2 != NULL &&
			     str_eq(o->rel2, rel));
		if (!m)
			continue;
		if (by != NULL && strcmp(by, o->client) != 0)
			return NULL;
		by = o->client;
	}
	return by;
}

static void own_free(struct own *o)
{
	free(o->rel);
	free(o->rel2);
	free(o);
}

/* Forget the records whose window the watcher has passed, and the old. */
static void owns_retire(struct agent_events *ev, int64_t now)
{
	struct own **pp = &ev->owns;

	while (*pp != NULL) {
		struct own *o = *pp;

		if (now <= o->expires &&
		    (o->end == UINT64_MAX || o->end > ev->processed)) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		ev->nowns--;
		own_free(o);
	}
}

uint64_t agent_events_own_begin(struct agent_events *ev, const char *client,
				const char *rel, unsigned kinds,
				const char *rel2, unsigned kinds2)
{
	struct own *o;
	uint64_t token = 0;

	if (ev == NULL || client == NULL || (kinds | kinds2) == 0)
		return 0;
	pthread_mutex_lock(&ev->lock);
	if (ev->state != EV_RUNNING || ev->nowns >= OWN_MAX)
		goto out;
	o = xcalloc(1, sizeof(*o));
	o->token = token = ++ev->next_token;
	strlcpy_s(o->client, client, sizeof(o->client));
	o->rel = xstrdup(rel);
	o->rel2 = rel2 ? xstrdup(rel2) : NULL;
	o->kinds = kinds;
	o->kinds2 = kinds2;
	o->start = ev->read_total + queued(ev);
	o->end = UINT64_MAX;
	o->expires = clock_mono_ms() + AGENT_EVENTS_OWN_MS;
	o->next = ev->owns;
	ev->owns = o;
	ev->nowns++;
out:
	pthread_mutex_unlock(&ev->lock);
	return token;
}

void agent_events_own_end(struct agent_events *ev, uint64_t token, bool done)
{
	struct own **pp;

	if (ev == NULL || token == 0)
		return;
	pthread_mutex_lock(&ev->lock);
	for (pp = &ev->owns; *pp != NULL; pp = &(*pp)->next) {
		struct own *o = *pp;

		if (o->token != token)
			continue;
		if (done) {
			o->end = ev->read_total + queued(ev);
		} else {
			*pp = o->next;
			ev->nowns--;
			own_free(o);
		}
		break;
	}
	pthread_mutex_unlock(&ev->lock);
}

/* ---- the tree of watched directories (the thread's) ------------------------ */

static size_t hash_wd(int wd, size_t nb)
{
	return ((uint32_t)wd * 2654435761U) & (nb - 1);
}

static size_t hash_name(const struct wnode *parent, const char *name,
			size_t len, size_t nb)
{
	uint64_t h = 14695981039346656037ULL;
	uintptr_t p = (uintptr_t)parent;
	size_t i;

	for (i = 0; i < sizeof(p); i++) {
		h ^= (unsigned char)(p >> (8 * i));
		h *= 1099511628211ULL;
	}
	for (i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 1099511628211ULL;
	}
	return (size_t)h & (nb - 1);
}

static struct wnode **tab_slot(struct tab *t, bool by_wd, const struct wnode *n)
{
	size_t i = by_wd ? hash_wd(n->wd, t->nb)
			 : hash_name(n->parent, n->name, n->namelen, t->nb);

	return &t->b[i];
}

static struct wnode **link_of(struct wnode *n, bool by_wd)
{
	return by_wd ? &n->wd_link : &n->name_link;
}

static void tab_insert(struct tab *t, bool by_wd, struct wnode *n);

static void tab_grow(struct tab *t, bool by_wd)
{
	struct wnode **old = t->b;
	size_t oldnb = t->nb, i;

	t->nb = oldnb ? oldnb * 2 : 1024;
	t->b = xcalloc(t->nb, sizeof(*t->b));
	t->n = 0;
	for (i = 0; i < oldnb; i++) {
		struct wnode *n = old[i];

		while (n != NULL) {
			struct wnode *next = *link_of(n, by_wd);

			tab_insert(t, by_wd, n);
			n = next;
		}
	}
	free(old);
}

static void tab_insert(struct tab *t, bool by_wd, struct wnode *n)
{
	struct wnode **slot;

	if (t->n >= t->nb)
		tab_grow(t, by_wd);
	slot = tab_slot(t, by_wd, n);
	*link_of(n, by_wd) = *slot;
	*slot = n;
	t->n++;
}

static void tab_remove(struct tab *t, bool by_wd, struct wnode *n)
{
	struct wnode **pp;

	if (t->nb == 0)
		return;
	for (pp = tab_slot(t, by_wd, n); *pp != NULL;
	     pp = link_of(*pp, by_wd)) {
		if (*pp == n) {
			*pp = *link_of(n, by_wd);
			t->n--;
			return;
		}
	}
}

static struct wnode *wd_find(struct agent_events *ev, int wd)
{
	struct wnode *n;

	if (ev->wds.nb == 0)
		return NULL;
	for (n = ev->wds.b[hash_wd(wd, ev->wds.nb)]; n != NULL; n = n->wd_link)
		if (n->wd == wd)
			return n;
	return NULL;
}

static struct wnode *child_find(struct agent_events *ev,
				const struct wnode *parent, const char *name)
{
	size_t len = strlen(name);
	struct wnode *n;

	if (ev->names.nb == 0 || parent == NULL)
		return NULL;
	for (n = ev->names.b[hash_name(parent, name, len, ev->names.nb)];
	     n != NULL; n = n->name_link)
		if (n->parent == parent && n->namelen == len &&
		    memcmp(n->name, name, len) == 0)
			return n;
	return NULL;
}

/* Give n a place: its parent's child and name. */
static void node_attach(struct agent_events *ev, struct wnode *n,
			struct wnode *parent, const char *name)
{
	free(n->name);
	n->name = xstrdup(name);
	n->namelen = strlen(name);
	n->parent = parent;
	n->prev = NULL;
	n->next = parent->child;
	if (parent->child != NULL)
		parent->child->prev = n;
	parent->child = n;
	tab_insert(&ev->names, false, n);
}

/* Take n from its place; it keeps its watch and its children. */
static void node_detach(struct agent_events *ev, struct wnode *n)
{
	if (n->parent == NULL)
		return;
	tab_remove(&ev->names, false, n);
	if (n->prev != NULL)
		n->prev->next = n->next;
	else
		n->parent->child = n->next;
	if (n->next != NULL)
		n->next->prev = n->prev;
	n->parent = n->next = n->prev = NULL;
}

static struct wnode *node_new(struct agent_events *ev, struct wnode *parent,
			      const char *name, int wd, dev_t dev)
{
	struct wnode *n = xcalloc(1, sizeof(*n));

	n->wd = wd;
	n->dev = dev;
	tab_insert(&ev->wds, true, n);
	if (parent != NULL) {
		node_attach(ev, n, parent, name);
	} else {
		n->name = xstrdup("");
		ev->root = n;
	}
	ev->nwatches++;
	return n;
}

/* Drop top and everything beneath it; rm: their watches too (a directory
 * that left the root; one removed loses its watch on its own). */
static void tree_drop(struct agent_events *ev, struct wnode *top, bool rm)
{
	struct wnode *n = top;

	for (;;) {
		struct wnode *p;
		bool last;

		while (n->child != NULL)
			n = n->child;
		p = n->parent;
		last = n == top;
		if (rm && ev->ifd >= 0)
			inotify_rm_watch(ev->ifd, n->wd);
		node_detach(ev, n);
		tab_remove(&ev->wds, true, n);
		if (n == ev->root)
			ev->root = NULL;
		free(n->name);
		free(n);
		ev->nwatches--;
		if (last)
			break;
		n = p;
	}
}

/* Forget every node, keeping the kernel's watches; *wds (may be NULL)
 * receives their descriptors. */
static size_t tree_forget(struct agent_events *ev, int **wds)
{
	size_t i, k = 0;
	int *out = NULL;

	if (wds != NULL && ev->wds.n > 0)
		out = xcalloc(ev->wds.n, sizeof(*out));
	for (i = 0; i < ev->wds.nb; i++) {
		struct wnode *n = ev->wds.b[i];

		while (n != NULL) {
			struct wnode *next = n->wd_link;

			if (out != NULL)
				out[k++] = n->wd;
			free(n->name);
			free(n);
			n = next;
		}
	}
	free(ev->wds.b);
	free(ev->names.b);
	memset(&ev->wds, 0, sizeof(ev->wds));
	memset(&ev->names, 0, sizeof(ev->names));
	ev->root = NULL;
	ev->nwatches = 0;
	if (wds != NULL)
		*wds = out;
	return k;
}

/* The path of name in n (n's own when name is NULL), relative to the
 * root, into out[EV_PATH_MAX + 1]; false when it is longer. */
static bool node_rel(const struct wnode *n, const char *name, char *out)
{
	size_t len = 0, pos, nlen = name != NULL ? strlen(name) : 0;
	const struct wnode *p;

	for (p = n; p != NULL && p->parent != NULL; p = p->parent)
		len += p->namelen + 1;
	if (name != NULL)
		len += nlen + 1;
	if (len > 0)
		len--;
	if (len > EV_PATH_MAX)
		return false;
	out[len] = '\0';
	pos = len;
	if (name != NULL) {
		pos -= nlen;
		memcpy(out + pos, name, nlen);
		if (pos > 0)
			out[--pos] = '/';
	}
	for (p = n; p != NULL && p->parent != NULL; p = p->parent) {
		pos -= p->namelen;
		memcpy(out + pos, p->name, p->namelen);
		if (pos > 0)
			out[--pos] = '/';
	}
	return true;
}

/* ---- events from the thread --------------------------------------------------- */

static void emit(struct agent_events *ev, enum proto_event_type type, bool dir,
		 const char *rel, const char *to, uint64_t off)
{
	pthread_mutex_lock(&ev->lock);
	ring_push(ev, type, dir, rel, to,
		  own_match(ev, type, rel, to, off, clock_mono_ms()));
	pthread_mutex_unlock(&ev->lock);
}

static void emit_lost(struct agent_events *ev)
{
	pthread_mutex_lock(&ev->lock);
	push_lost(ev);
	pthread_mutex_unlock(&ev->lock);
}

/* An event about name in n (n itself when name is NULL); off: where the
 * kernel queued it, UINT64_MAX for one the watcher found by reading. */
static void emit_at(struct agent_events *ev, enum proto_event_type type,
		    bool dir, const struct wnode *n, const char *name,
		    uint64_t off)
{
	char rel[EV_PATH_MAX + 1];

	/* A path no route can name: only a client that forgets everything
	 * is sure to drop what it holds about it. */
	if (!node_rel(n, name, rel))
		emit_lost(ev);
	else
		emit(ev, type, dir, rel, NULL, off);
}

/* Whether a is n or one of n's ancestors. */
static bool node_above(const struct wnode *a, const struct wnode *n)
{
	for (; n != NULL; n = n->parent)
		if (n == a)
			return true;
	return false;
}

/* File systems whose directories change without a word to inotify, or
 * that are not the sandbox's files: never watched below the root. */
static bool pseudo_fs(int fd)
{
	struct statfs s;

	if (fstatfs(fd, &s) < 0)
		return true;
	switch ((unsigned long)s.f_type) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case SECURITYFS_MAGIC:
	case BPF_FS_MAGIC:
	case DEVPTS_SUPER_MAGIC:
		return true;
	default:
		return false;
	}
}

/*
 * Watch the directory name in parent (the root when parent is NULL).
 * 1 with *out and *fdp (open, to read it) when it is watched now; 0 when
 * it is not (gone, not a directory, unreadable, a pseudo file system,
 * watched already); a negative errno when the watcher cannot go on.
 */
static int watch_dir(struct agent_events *ev, struct wnode *parent,
		     const char *name, struct wnode **out, int *fdp)
{
	char rel[EV_PATH_MAX + 1], proc[64];
	struct wnode *stale, *known;
	struct stat st;
	int fd, wd, err;

	if (parent == NULL)
		rel[0] = '\0';
	else if (!node_rel(parent, name, rel))
		return 0;
	/* No symlink anywhere: a directory swapped for a link to elsewhere
	 * between the event and now must not get the host watched. */
	fd = agent_resolve_open(ev->a, rel, O_RDONLY | O_DIRECTORY, 0,
				RESOLVE_V1);
	if (fd < 0) {
		log_debug("events: not watching '%s': %s", rel, strerror(-fd));
		return 0;
	}
	if (fstat(fd, &st) < 0 ||
	    (parent != NULL && st.st_dev != parent->dev && pseudo_fs(fd))) {
		close(fd);
		return 0;
	}
	if (ev->limit > 0 && ev->nwatches >= ev->limit) {
		close(fd);
		return -EDQUOT;
	}
	/* The descriptor names exactly the directory opened, with no second
	 * resolution of the path. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	wd = inotify_add_watch(ev->ifd, proc, WATCH_MASK);
	err = errno;
	if (wd < 0) {
		close(fd);
		if (err == ENOSPC || err == ENOMEM)
			return -err;
		if (err == ENOENT)
			return -ENXIO;
		log_debug("events: not watching '%s': %s", rel, strerror(err));
		return 0;
	}
	known = wd_find(ev, wd);
	if (known != NULL) {
		/* Watched already: found by reading its parent before its
		 * create was taken in; or moved here before its rename was,
		 * and then it is here now (the rename, when it comes, finds
		 * it moved); or met again (a bind mount of it). */
		close(fd);
		if (parent != NULL && known->parent != NULL &&
		    (known->parent != parent ||
		     strcmp(known->name, name) != 0) &&
		    !node_above(known, parent)) {
			stale = child_find(ev, parent, name);
			if (stale != NULL)
				tree_drop(ev, stale, true);
			node_detach(ev, known);
			node_attach(ev, known, parent, name);
		}
		return 0;
	}
	/* What was watched under that name is gone (the events that say so
	 * are still queued): this one replaces it. */
	stale = parent != NULL ? child_find(ev, parent, name) : NULL;
	if (stale != NULL)
		tree_drop(ev, stale, true);
	*out = node_new(ev, parent, name, wd, st.st_dev);
	*fdp = fd;
	return 1;
}

static void release_due(struct agent_events *ev);

struct walk_item {
	struct wnode *parent;
	char *name;
	bool report; /* a directory the walk found: report its create */
};

/* The event that makes a walk start (a directory created or moved in),
 * reported once the directory is watched. */
struct top_event {
	enum proto_event_type type;
	const char *rel, *to;
	uint64_t off;
};

/*
 * Watch the directory name in parent and everything beneath it, breadth
 * first. emit_creates: report each entry found as created (a directory
 * that appeared after the watcher started), after top (may be NULL).
 *
 * A directory is reported only once it is watched, so that a client that
 * lists it on hearing of it misses nothing that changes there later;
 * anything already in it is reported by reading it, after the watch.
 */
static int add_tree(struct agent_events *ev, struct wnode *parent,
		    const char *name, const struct top_event *top,
		    bool emit_creates)
{
	struct walk_item *q = xcalloc(16, sizeof(*q));
	size_t qhead = 0, qlen = 0, qcap = 16, done = 0;
	int rc = 0;

	q[qlen].parent = parent;
	q[qlen++].name = xstrdup(name);
	while (qhead < qlen && rc >= 0) {
		struct walk_item it = q[qhead++];
		struct wnode *n = NULL;
		struct dirent *de;
		DIR *d;
		int fd = -1;

		rc = watch_dir(ev, it.parent, it.name, &n, &fd);
		if (rc >= 0 && top != NULL && qhead == 1)
			emit(ev, top->type, true, top->rel, top->to, top->off);
		else if (rc >= 0 && it.report)
			emit_at(ev, PROTO_EV_CREATE, true, it.parent, it.name,
				UINT64_MAX);
		free(it.name);
		if (rc <= 0)
			continue;
		d = fdopendir(fd);
		if (d == NULL) {
			close(fd);
			continue;
		}
		while ((de = readdir(d)) != NULL) {
			bool isdir = de->d_type == DT_DIR;

			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if (de->d_type == DT_UNKNOWN) {
				struct stat st;

				isdir = fstatat(dirfd(d), de->d_name, &st,
						AT_SYMLINK_NOFOLLOW) == 0 &&
					S_ISDIR(st.st_mode);
			}
			if (!isdir) {
				if (emit_creates)
					emit_at(ev, PROTO_EV_CREATE, false, n,
						de->d_name, UINT64_MAX);
				continue;
			}
			if (qlen == qcap) {
				qcap *= 2;
				q = xrealloc(q, qcap * sizeof(*q));
			}
			q[qlen].parent = n;
			q[qlen].report = emit_creates;
			q[qlen++].name = xstrdup(de->d_name);
		}
		closedir(d);
		/* A large tree takes a while: held requests still get their
		 * answers at their deadlines, and a stop is not kept waiting. */
		if (++done % WALK_CHECK == 0) {
			release_due(ev);
			if (atomic_load(&ev->stop))
				rc = -ECANCELED;
		}
	}
	while (qhead < qlen)
		free(q[qhead++].name);
	free(q);
	return rc < 0 ? rc : 0;
}

/* Why the watcher stops, for health and the lost answer. */
static void fail_reason(int rc, size_t limit, char *why, size_t whysz)
{
	long v;

	switch (rc) {
	case -ENOSPC:
		/* The user namespace's limit, which in the initial namespace
		 * is fs.inotify.max_user_watches and in a container may be
		 * lower. */
		v = read_sysctl("/proc/sys/user/max_inotify_watches");
		if (v < 0)
			v = read_sysctl(
				"/proc/sys/fs/inotify/max_user_watches");
		snprintf(why, whysz,
			 "the inotify watch limit of %ld directories was "
			 "reached (fs.inotify.max_user_watches, or "
			 "user.max_inotify_watches in a user namespace)",
			 v);
		break;
	case -EDQUOT:
		snprintf(why, whysz,
			 "the watch limit of %zu directories was reached "
			 "(sandbox-agent --watch-limit)",
			 limit);
		break;
	case -EMFILE:
		v = read_sysctl("/proc/sys/user/max_inotify_instances");
		if (v < 0)
			v = read_sysctl(
				"/proc/sys/fs/inotify/max_user_instances");
		snprintf(why, whysz,
			 "the inotify instance limit of %ld was reached "
			 "(fs.inotify.max_user_instances, or "
			 "user.max_inotify_instances in a user namespace)",
			 v);
		break;
	case -ENXIO:
		snprintf(why, whysz,
			 "directories cannot be watched without /proc/self/fd");
		break;
	case -ENOENT:
		snprintf(why, whysz, "the session root was removed");
		break;
	default:
		snprintf(why, whysz, "inotify failed: %s", strerror(-rc));
		break;
	}
}

static void watch_fail(struct agent_events *ev, int rc)
{
	struct reply *replies = NULL;
	char why[256];

	fail_reason(rc, ev->limit, why, sizeof(why));
	pthread_mutex_lock(&ev->lock);
	fail_locked(ev, why);
	release_waiters(ev, clock_mono_ms(), &replies);
	pthread_mutex_unlock(&ev->lock);
	send_replies(replies);
	tree_forget(ev, NULL);
}

/* Answer the held requests that are due; call without the lock. */
static void release_due(struct agent_events *ev)
{
	struct reply *replies = NULL;

	pthread_mutex_lock(&ev->lock);
	release_waiters(ev, clock_mono_ms(), &replies);
	pthread_mutex_unlock(&ev->lock);
	send_replies(replies);
}

/* The pending IN_MOVED_FROM had no IN_MOVED_TO: it left the root. */
static void flush_pending(struct agent_events *ev)
{
	struct wnode *fn;

	if (!ev->pend.active)
		return;
	ev->pend.active = false;
	emit_at(ev, PROTO_EV_REMOVE, ev->pend.dir, ev->pend.parent,
		ev->pend.name, ev->pend.off);
	if (ev->pend.dir) {
		fn = child_find(ev, ev->pend.parent, ev->pend.name);
		if (fn != NULL)
			tree_drop(ev, fn, true);
	}
}

/* The pending IN_MOVED_FROM found its IN_MOVED_TO: name in tp. */
static void finish_rename(struct agent_events *ev, struct wnode *tp,
			  const char *name)
{
	char from[EV_PATH_MAX + 1], to[EV_PATH_MAX + 1];
	struct wnode *fp = ev->pend.parent, *fn, *tn;
	bool dir = ev->pend.dir;

	ev->pend.active = false;
	if (!node_rel(fp, ev->pend.name, from) || !node_rel(tp, name, to)) {
		emit_lost(ev);
		ev->rebuild = dir;
		return;
	}
	fn = dir ? child_find(ev, fp, ev->pend.name) : NULL;
	if (dir && fn == NULL && !ev->xchg.active) {
		/* Not watched where it was (unreadable then, or made and
		 * moved before its create was taken in): it is new here,
		 * and reported once watched. */
		struct top_event top = {PROTO_EV_RENAME, from, to,
					ev->pend.off};

		ev->fail_rc = add_tree(ev, tp, name, &top, true);
		return;
	}
	emit(ev, PROTO_EV_RENAME, dir, from, to, ev->pend.off);
	if (ev->xchg.active) {
		/* The second half of an exchange is the first one reversed;
		 * anything else leaves the tree unknown. */
		if (dir && fp == ev->xchg.to_parent &&
		    strcmp(ev->pend.name, ev->xchg.to_name) == 0 &&
		    tp == ev->xchg.from_parent &&
		    strcmp(name, ev->xchg.from_name) == 0 &&
		    child_find(ev, tp, name) == NULL) {
			node_attach(ev, ev->xchg.node, tp, name);
			ev->xchg.active = false;
		} else {
			ev->rebuild = true;
		}
		return;
	}
	if (!dir)
		return;
	tn = child_find(ev, tp, name);
	if (tn != NULL && tn != fn) {
		/* Over a watched directory: an exchange if its reverse comes
		 * next, else a replaced empty directory (or worse). */
		node_detach(ev, tn);
		ev->xchg.active = true;
		ev->xchg.node = tn;
		ev->xchg.from_parent = fp;
		ev->xchg.to_parent = tp;
		strlcpy_s(ev->xchg.from_name, ev->pend.name,
			  sizeof(ev->xchg.from_name));
		strlcpy_s(ev->xchg.to_name, name, sizeof(ev->xchg.to_name));
		ev->xchg.since = clock_mono_ms();
	}
	node_detach(ev, fn);
	node_attach(ev, fn, tp, name);
}

/* One event the kernel queued at position off. */
static void handle(struct agent_events *ev, const struct inotify_event *ie,
		   uint64_t off)
{
	char name[NAME_MAX_BYTES + 1];
	uint32_t m = ie->mask;
	bool dir = (m & IN_ISDIR) != 0;
	struct wnode *n, *cn;
	size_t nlen;

	if (m & IN_Q_OVERFLOW) {
		ev->rebuild = true;
		return;
	}
	nlen = ie->len > 0 ? strnlen(ie->name, ie->len) : 0;
	if (nlen > NAME_MAX_BYTES)
		nlen = NAME_MAX_BYTES;
	memcpy(name, ie->name, nlen);
	name[nlen] = '\0';
	n = wd_find(ev, ie->wd);
	if (ev->xchg.active && nlen == 0 && (m & IN_ATTRIB) &&
	    n == ev->xchg.node) {
		/* The link count of the directory renamed over: it was
		 * replaced (an exchange has none), and was empty. */
		tree_drop(ev, n, false);
		ev->xchg.active = false;
		return;
	}
	/* The moved directory's own, which follows each half. */
	if (ev->xchg.active && nlen == 0 && (m & IN_MOVE_SELF))
		return;
	if (ev->xchg.active) {
		bool from_ok = (m & IN_MOVED_FROM) && !ev->pend.active &&
			       n == ev->xchg.to_parent &&
			       strcmp(name, ev->xchg.to_name) == 0;
		bool to_ok = (m & IN_MOVED_TO) && ev->pend.active &&
			     ie->cookie == ev->pend.cookie;

		if (!from_ok && !to_ok) {
			ev->rebuild = true;
			return;
		}
	}
	if (ev->pend.active) {
		if ((m & IN_MOVED_TO) && ie->cookie == ev->pend.cookie &&
		    n != NULL && nlen > 0) {
			finish_rename(ev, n, name);
			return;
		}
		flush_pending(ev);
	}
	if (n == NULL)
		return;
	if (nlen == 0) {
		/* About the watched directory itself. */
		if (m & IN_IGNORED) {
			if (n == ev->root)
				ev->fail_rc = -ENOENT;
			else
				tree_drop(ev, n, false);
		} else if (m & IN_UNMOUNT) {
			ev->rebuild = true;
		} else if (m & IN_ATTRIB) {
			emit_at(ev, PROTO_EV_ATTR, true, n, NULL, off);
		}
		return;
	}
	if (m & IN_MOVED_FROM) {
		ev->pend.active = true;
		ev->pend.cookie = ie->cookie;
		ev->pend.parent = n;
		strlcpy_s(ev->pend.name, name, sizeof(ev->pend.name));
		ev->pend.dir = dir;
		ev->pend.off = off;
		ev->pend.since = clock_mono_ms();
		return;
	}
	if ((m & (IN_CREATE | IN_MOVED_TO)) && dir) {
		char rel[EV_PATH_MAX + 1];
		struct top_event top = {PROTO_EV_CREATE, rel, NULL, off};

		/* Often watched already: its parent's reading found it. */
		if (!node_rel(n, name, rel))
			emit_lost(ev);
		else
			ev->fail_rc = add_tree(ev, n, name, &top, true);
	} else if (m & (IN_CREATE | IN_MOVED_TO)) {
		emit_at(ev, PROTO_EV_CREATE, false, n, name, off);
	} else if (m & IN_DELETE) {
		emit_at(ev, PROTO_EV_REMOVE, dir, n, name, off);
		cn = dir ? child_find(ev, n, name) : NULL;
		if (cn != NULL)
			tree_drop(ev, cn, false);
	} else if (m & (IN_MODIFY | IN_CLOSE_WRITE)) {
		emit_at(ev, PROTO_EV_WRITE, false, n, name, off);
	} else if (m & IN_ATTRIB) {
		emit_at(ev, PROTO_EV_ATTR, dir, n, name, off);
	}
}

/*
 * The watcher no longer knows what it watches (an overflow, an unmount,
 * a rename it cannot follow): what is queued is dropped, the root's tree
 * is watched again (the kernel gives the same descriptors for directories
 * still watched; the others are removed), and a lost event tells readers
 * to forget everything - after the walk, so that nothing changed before
 * it goes unseen.
 */
static int rebuild(struct agent_events *ev)
{
	int *old = NULL;
	size_t nold, i;
	ssize_t n;
	int rc;

	ev->rebuild = false;
	ev->pend.active = false;
	ev->xchg.active = false;
	do {
		pthread_mutex_lock(&ev->lock);
		n = read(ev->ifd, ev->rbuf, READ_BUF);
		if (n > 0)
			ev->read_total += (uint64_t)n;
		pthread_mutex_unlock(&ev->lock);
	} while (n > 0);
	nold = tree_forget(ev, &old);
	rc = add_tree(ev, NULL, "", NULL, false);
	if (rc == 0 && ev->root == NULL)
		rc = -ENOENT;
	if (rc == 0)
		for (i = 0; i < nold; i++)
			if (wd_find(ev, old[i]) == NULL)
				inotify_rm_watch(ev->ifd, old[i]);
	free(old);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ev->lock);
	push_lost(ev);
	pthread_mutex_unlock(&ev->lock);
	log_notice("events: lost track of changes; watching %zu directories "
		   "again",
		   ev->nwatches);
	return 0;
}

/* Take in one read of the queue, at position base. */
static void process(struct agent_events *ev, const char *p, size_t len,
		    uint64_t base)
{
	size_t pos = 0;

	while (pos + sizeof(struct inotify_event) <= len) {
		const struct inotify_event *ie =
			(const struct inotify_event *)(const void *)(p + pos);

		if (ev->rebuild || ev->fail_rc < 0)
			return;
		handle(ev, ie, base + pos);
		pos += sizeof(*ie) + ie->len;
	}
}

/* ---- the thread ------------------------------------------------------------ */

static int watch_start(struct agent_events *ev)
{
	int64_t t0 = clock_mono_ms();
	int ifd, rc;

	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ifd < 0)
		return -errno;
	pthread_mutex_lock(&ev->lock);
	ev->ifd = ifd;
	pthread_mutex_unlock(&ev->lock);
	rc = add_tree(ev, NULL, "", NULL, false);
	if (rc == 0 && ev->root == NULL)
		rc = -ENOENT;
	if (rc < 0)
		return rc;
	log_info("events: watching %zu directories beneath the root (%lld ms)",
		 ev->nwatches, (long long)(clock_mono_ms() - t0));
	return 0;
}

static void *watch_main(void *arg)
{
	struct agent_events *ev = arg;
	struct reply *replies = NULL;
	struct waiter *w;
	int64_t now;
	int rc;

	rc = watch_start(ev);
	if (rc < 0) {
		if (rc != -ECANCELED)
			watch_fail(ev, rc);
		tree_forget(ev, NULL);
		return NULL;
	}
	pthread_mutex_lock(&ev->lock);
	now = clock_mono_ms();
	ev->state = EV_RUNNING;
	ev->processed = ev->read_total;
	/* Requests held through the walk: what was queued meanwhile is
	 * taken in before they are answered. */
	for (w = ev->waiters; w != NULL; w = w->next) {
		w->sync = ev->read_total + queued(ev);
		w->sync_deadline = w->deadline > now + SYNC_MS ? w->deadline
							       : now + SYNC_MS;
	}
	if (ev->lost_on_ready) {
		push_lost(ev);
		ev->lost_on_ready = false;
	}
	release_waiters(ev, now, &replies);
	pthread_mutex_unlock(&ev->lock);
	send_replies(replies);
	replies = NULL;

	while (!atomic_load(&ev->stop)) {
		struct pollfd pfd[2] = {{ev->ifd, POLLIN, 0},
					{ev->wake_fd, POLLIN, 0}};
		int64_t next;
		bool got = false;
		int timeout;
		ssize_t n;

		pthread_mutex_lock(&ev->lock);
		next = waiters_next(ev);
		pthread_mutex_unlock(&ev->lock);
		if (ev->pend.active && ev->pend.since + MOVE_WAIT_MS < next)
			next = ev->pend.since + MOVE_WAIT_MS;
		if (ev->xchg.active && ev->xchg.since + MOVE_WAIT_MS < next)
			next = ev->xchg.since + MOVE_WAIT_MS;
		now = clock_mono_ms();
		timeout = next == INT64_MAX	 ? -1
			  : next <= now		 ? 0
			  : next - now > 3600000 ? 3600000
						 : (int)(next - now);
		if (poll(pfd, 2, timeout) < 0 && errno != EINTR) {
			watch_fail(ev, -errno);
			break;
		}
		if (atomic_load(&ev->stop))
			break;
		if (pfd[1].revents & POLLIN) {
			uint64_t v;

			if (read(ev->wake_fd, &v, sizeof(v)) < 0)
				log_debug("events: wake: %s", strerror(errno));
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t base;

			pthread_mutex_lock(&ev->lock);
			base = ev->read_total;
			n = read(ev->ifd, ev->rbuf, READ_BUF);
			if (n > 0)
				ev->read_total += (uint64_t)n;
			pthread_mutex_unlock(&ev->lock);
			if (n > 0) {
				process(ev, ev->rbuf, (size_t)n, base);
				got = true;
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				ev->fail_rc = -errno;
			}
		}
		now = clock_mono_ms();
		if (!got && ev->pend.active &&
		    now >= ev->pend.since + MOVE_WAIT_MS)
			flush_pending(ev);
		if (!got && ev->xchg.active &&
		    now >= ev->xchg.since + MOVE_WAIT_MS)
			ev->rebuild = true;
		if (ev->rebuild && ev->fail_rc == 0)
			ev->fail_rc = rebuild(ev);
		if (ev->fail_rc == -ECANCELED)
			break;
		if (ev->fail_rc < 0) {
			watch_fail(ev, ev->fail_rc);
			break;
		}
		pthread_mutex_lock(&ev->lock);
		ev->processed = ev->pend.active ? ev->pend.off : ev->read_total;
		owns_retire(ev, now);
		release_waiters(ev, now, &replies);
		pthread_mutex_unlock(&ev->lock);
		send_replies(replies);
		replies = NULL;
	}
	tree_forget(ev, NULL);
	return NULL;
}

/* ---- the registry ------------------------------------------------------------ */

int agent_events_new(struct agent *a, struct agent_events **out)
{
	struct agent_events *ev = xcalloc(1, sizeof(*ev));

	ev->a = a;
	ev->ifd = -1;
	ev->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ev->wake_fd < 0) {
		int err = errno;

		free(ev);
		return -err;
	}
	ev->cap = a->cfg.events_ring ? a->cfg.events_ring : AGENT_EVENTS_RING;
	ev->ring = xcalloc(ev->cap, sizeof(*ev->ring));
	ev->limit = a->cfg.watch_limit;
	ev->rbuf = xmalloc(READ_BUF);
	pthread_mutex_init(&ev->lock, NULL);
	atomic_init(&ev->stop, false);
	*out = ev;
	return 0;
}

void agent_events_free(struct agent_events *ev)
{
	struct reply *replies = NULL;
	struct own *o;
	size_t i;

	if (ev == NULL)
		return;
	atomic_store(&ev->stop, true);
	wake(ev);
	if (ev->thread_started)
		pthread_join(ev->thread, NULL);
	pthread_mutex_lock(&ev->lock);
	ev->stopping = true;
	release_waiters(ev, clock_mono_ms(), &replies);
	if (ev->ifd >= 0) {
		close(ev->ifd);
		ev->ifd = -1;
	}
	pthread_mutex_unlock(&ev->lock);
	send_replies(replies);
	for (i = 0; i < ev->count; i++)
		rec_clear(ring_at(ev, i));
	while ((o = ev->owns) != NULL) {
		ev->owns = o->next;
		own_free(o);
	}
	close(ev->wake_fd);
	pthread_mutex_destroy(&ev->lock);
	free(ev->ring);
	free(ev->rbuf);
	free(ev);
}

bool agent_events_available(struct agent_events *ev, char *why, size_t whysz)
{
	bool ok;

	if (whysz > 0)
		why[0] = '\0';
	if (ev == NULL || ev->a->cfg.strict_v1)
		return false;
	pthread_mutex_lock(&ev->lock);
	ok = ev->state != EV_FAILED;
	if (!ok)
		strlcpy_s(why, ev->why, whysz);
	pthread_mutex_unlock(&ev->lock);
	return ok;
}

/* Under the lock: the first request starts the watcher. */
static void start_locked(struct agent_events *ev)
{
	char why[128];
	int rc;

	if (ev->state != EV_IDLE)
		return;
	ev->state = EV_STARTING;
	rc = pthread_create(&ev->thread, NULL, watch_main, ev);
	if (rc != 0) {
		snprintf(why, sizeof(why), "no thread for the watcher: %s",
			 strerror(rc));
		fail_locked(ev, why);
		return;
	}
	ev->thread_started = true;
}

int agent_route_events(struct agent_req *r)
{
	struct agent_events *ev = agent_req_agent(r)->events;
	const char *qs = agent_req_query(r, "since");
	struct waiter w, *held;
	struct reply *rep;
	uint64_t wait = 0;
	int64_t now = clock_mono_ms();
	int rc;

	memset(&w, 0, sizeof(w));
	if (agent_req_query_dec(r, "since", UINT64_MAX, &w.since) < 0)
		return agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
					 "Request invalid: since must be a "
					 "sequence number");
	if (agent_req_query_dec(r, "waitMs", UINT64_MAX, &wait) < 0)
		return agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
					 "Request invalid: waitMs must be a "
					 "number of milliseconds");
	if (wait > PROTO_EXT_EVENTS_MAX_WAIT_MS)
		wait = PROTO_EXT_EVENTS_MAX_WAIT_MS;
	w.from_now = qs == NULL;
	w.deadline = now + (int64_t)wait;
	pthread_mutex_lock(&ev->lock);
	start_locked(ev);
	if (ev->state == EV_RUNNING) {
		w.sync = ev->read_total + queued(ev);
		w.sync_deadline =
			w.deadline > now + SYNC_MS ? w.deadline : now + SYNC_MS;
	}
	if (waiter_ready(ev, &w, now)) {
		rep = answer(ev, &w);
		pthread_mutex_unlock(&ev->lock);
		rc = rep->rc;
		if (rc == 0)
			rc = agent_reply_json(r, 200, &rep->body);
		buf_cleanup(&rep->body);
		free(rep);
		return rc;
	}
	held = xmalloc(sizeof(*held));
	*held = w;
	held->d = agent_reply_defer(r);
	held->next = ev->waiters;
	ev->waiters = held;
	pthread_mutex_unlock(&ev->lock);
	wake(ev);
	return 0;
}
