/* SPDX-License-Identifier: MIT */
/*
 * watch: change events (watch.h): the registry, the ring that numbers
 * them, the requests held for them, attribution, and GET
 * /sandboxfs/v1/events (doc/protocol-ext.md, "Change events"). The
 * watcher thread that makes them from inotify is watch_thread.c.
 *
 * Requests are answered once the watcher has taken in every event the
 * kernel had queued when they arrived (the queue's length is read then),
 * so an answer reflects every change made before its request.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "agent/routes.h"
#include "agent/watch_i.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

/* Attribution records at once. */
#define OWN_MAX 4096
/* What an event costs the ring besides its strings. */
#define REC_OVERHEAD 64

static bool str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
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

void events_ring_push(struct agent_events *ev, enum proto_event_type type,
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

void events_push_lost(struct agent_events *ev)
{
	events_ring_push(ev, PROTO_EV_LOST, false, NULL, NULL, NULL);
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
uint64_t events_queued(struct agent_events *ev)
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

void events_release_waiters(struct agent_events *ev, int64_t now,
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

int64_t events_waiters_next(struct agent_events *ev)
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
void events_send_replies(struct reply *r)
{
	while (r != NULL) {
		struct reply *next = r->next;

		if (r->rc < 0)
			agent_deferred_failed(r->d, "events", -r->rc);
		else
			agent_deferred_json(r->d, 200, &r->body);
		buf_cleanup(&r->body);
		free(r);
		r = next;
	}
}

/* Give up for the rest of the boot: the watches go with the descriptor. */
void events_fail_locked(struct agent_events *ev, const char *why)
{
	if (ev->state == EV_FAILED)
		return;
	ev->state = EV_FAILED;
	strlcpy_s(ev->why, why, sizeof(ev->why));
	if (ev->ifd >= 0) {
		close(ev->ifd);
		ev->ifd = -1;
	}
	events_push_lost(ev);
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
const char *events_own_match(struct agent_events *ev,
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
void events_owns_retire(struct agent_events *ev, int64_t now)
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
	o->start = ev->read_total + events_queued(ev);
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
			o->end = ev->read_total + events_queued(ev);
		} else {
			*pp = o->next;
			ev->nowns--;
			own_free(o);
		}
		break;
	}
	pthread_mutex_unlock(&ev->lock);
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
	events_release_waiters(ev, clock_mono_ms(), &replies);
	if (ev->ifd >= 0) {
		close(ev->ifd);
		ev->ifd = -1;
	}
	pthread_mutex_unlock(&ev->lock);
	events_send_replies(replies);
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
	rc = pthread_create(&ev->thread, NULL, events_thread_main, ev);
	if (rc != 0) {
		snprintf(why, sizeof(why), "no thread for the watcher: %s",
			 strerror(rc));
		events_fail_locked(ev, why);
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
		w.sync = ev->read_total + events_queued(ev);
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
