/* SPDX-License-Identifier: MIT */
/*
 * events: what changed inside a sandbox, as its agent tells it
 * (doc/protocol-ext.md, "Change events"; doc/internals/cache.md).
 *
 * One thread per sandbox whose agent has change events long-polls them
 * and makes the mount's caches and the kernel's forget exactly what
 * changed. While it follows the stream the sandbox is "live": names,
 * attributes and pages are kept for -o cache_timeout instead of
 * attr_timeout, and an open keeps the kernel's pages without asking the
 * agent. Whenever the stream may have missed something (the agent said
 * "lost", restarted, or could not be reached) the sandbox's caches are
 * forgotten whole, here and in the kernel, and it is live again only once
 * the stream is followed again.
 *
 * The same events feed MOUNT/<sb>/events, one JSON line per change, read
 * like `tail -f`.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "client/agent_client.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/path.h"
#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/fs_i.h"
#include "fs/prefetch.h"

/* How long one poll is held by the agent (the transport cuts it to what
 * the response deadline allows). */
#define EV_WAIT_MS 25000
/* Waits after a failed poll: doubling from the first to the last. */
#define EV_BACKOFF_MIN_MS 250
#define EV_BACKOFF_MAX_MS 5000
/* An agent that cannot give events is asked again this rarely. */
#define EV_UNAVAILABLE_MS 60000
/* Lines MOUNT/<sb>/events keeps for slow readers. */
#define EV_LINES 8192
/* A blocked reader of MOUNT/<sb>/events looks for a signal this often. */
#define EV_READ_TICK_MS 200

struct evline {
	char *text;
	size_t len;
};

struct sbx_events {
	struct sbx *sb;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* applied moved, a line came, or stop */
	bool stop;
	int cancel; /* the poll under way gives up (transport) */
	bool live;
	uint64_t applied; /* events up to here are applied */
	uint64_t seen; /* the agent had events up to here when it last
			  answered this mount */
	char why[PROTO_EXT_EVENTS_WHY_MAX + 1]; /* unavailable, or "" */
	/* MOUNT/<sb>/events: the last EV_LINES lines, line n at n %
	 * EV_LINES */
	struct evline lines[EV_LINES];
	uint64_t nlines;
};

/* A reader of MOUNT/<sb>/events. */
struct evreader {
	uint64_t at; /* the next line */
	size_t off; /* bytes of it already read */
	bool lost; /* a "lost" line is due first */
};

/* rel's name came (appeared) or went: its directory's listing and times
 * too. */
static void name_changed(struct sbx *sb, const char *rel, bool tree,
			 bool appeared)
{
	struct sbfs *fs = sb->fs;
	char parent[PATH_MAX_BYTES];

	path_parent(rel, parent, sizeof(parent));
	if (tree)
		cache_forget_tree(fs->cache, sb->id, rel);
	else
		cache_forget(fs->cache, sb->id, rel);
	cache_forget_content(fs->cache, sb->id, rel);
	cache_dir_forget(fs->cache, sb->id, parent);
	cache_forget(fs->cache, sb->id, parent);
	sbfs_kernel_changed(
		fs, sb->id, rel,
		SBFS_KERNEL_ATTR | SBFS_KERNEL_DATA |
			(appeared ? SBFS_KERNEL_NEW_NAME : SBFS_KERNEL_NAME));
}

/* The sandbox's inode number of files/<rel> now (one stat) and its change
 * time (*ctime_ns); 0 when it is missing, or cannot be told. */
static uint64_t fino_now(struct sbx *sb, const char *rel, bool *missing,
			 int64_t *ctime_ns)
{
	struct proto_attr a;
	struct sbx_error err;
	char *target = NULL;
	int rc;

	sbx_error_clear(&err);
	rc = ac_stat(sb->fs->t, sb->id, rel, &a, &target, &err);
	free(target);
	*missing = rc == -ENOENT;
	*ctime_ns = rc == 0 ? sbfs_attr_ctime_ns(&a) : 0;
	return rc == 0 ? a.ino : 0;
}

/*
 * A name changed in the sandbox: a file open through the mount by that
 * name must still be the file the name has, or go stale (it must not
 * write into the next file of the name). Asked of the sandbox, so that a
 * change of this mount's own, told late, changes nothing; and asked again
 * when one of the mount's own ran meanwhile (fs_i.h, sbfs_names_hold).
 * With removed (the sandbox said the name's file was removed), the same
 * inode number is not enough: a file made after another was removed
 * often gets its number at once (ext4), so the change time the mount last
 * saw must match too. Not for a name that appeared or a rename's target:
 * a file of this mount's own whose event was not told as its own (the
 * agent is conservative) has a newer change time after the mount's
 * writes, and a renamed file gets one too.
 */
#define SETTLE_TRIES 3

/* One try of settling a name: what the mount and the sandbox say. */
struct settle_look {
	uint64_t gen; /* the names' generation before the look */
	uint64_t fino; /* the sandbox's inode number of the open file */
	int64_t was_ct; /* its change time as the mount last saw it */
	uint64_t now; /* the sandbox's inode number of the name now */
	int64_t now_ct; /* and its change time */
	bool missing; /* the name is gone */
};

/* Look at the file open through the mount by the name open_rel, and at
 * what the sandbox has by the name rel now; false when nothing is open
 * by open_rel. */
static bool settle_look(struct sbx *sb, const char *open_rel, const char *rel,
			struct settle_look *l)
{
	l->gen = sbfs_names_quiet(sb->fs);
	l->fino = sbfs_nodes_open_fino(sb->fs, sb->id, open_rel, &l->was_ct);
	if (l->fino == 0)
		return false;
	l->now = fino_now(sb, rel, &l->missing, &l->now_ct);
	return true;
}

static void settle_name(struct sbx *sb, const char *rel, bool removed)
{
	struct sbfs *fs = sb->fs;
	struct settle_look l;
	uint64_t ino;
	bool same;
	int i;

	for (i = 0; i < SETTLE_TRIES; i++) {
		if (!settle_look(sb, rel, rel, &l))
			return;
		same = l.now == 0 || (l.now == l.fino &&
				      (!removed || l.was_ct == 0 ||
				       l.now_ct == 0 || l.now_ct == l.was_ct));
		if (!l.missing && same)
			return;
		if (sbfs_names_hold(fs, l.gen)) {
			ino = sbfs_nodes_vanish(fs, sb->id, rel);
			sbfs_names_release(fs);
			sbfs_nodes_vanished(fs, ino);
			return;
		}
	}
}

/* from was renamed to: an open file of from follows it when it is the
 * file to has now; what to had goes stale when it was another. */
static void settle_rename(struct sbx *sb, const char *from, const char *to)
{
	struct sbfs *fs = sb->fs;
	struct settle_look l;
	uint64_t old, ino;
	int64_t ct;
	int i;

	for (i = 0; i < SETTLE_TRIES; i++) {
		if (!settle_look(sb, from, to, &l))
			break;
		if (l.now != l.fino) {
			settle_name(sb, from, false);
			break;
		}
		old = sbfs_nodes_open_fino(fs, sb->id, to, &ct);
		if (!sbfs_names_hold(fs, l.gen))
			continue;
		ino = old != 0 && old != l.now
			      ? sbfs_nodes_vanish(fs, sb->id, to)
			      : 0;
		sbfs_nodes_move(fs, sb->id, from, to);
		sbfs_files_moved(sb, from, to);
		sbfs_names_release(fs);
		sbfs_nodes_vanished(fs, ino);
		break;
	}
	settle_name(sb, to, false);
}

static void apply(struct sbx *sb, const struct proto_event *e)
{
	struct sbfs *fs = sb->fs;

	switch (e->type) {
	case PROTO_EV_WRITE:
		cache_forget(fs->cache, sb->id, e->path);
		cache_forget_content(fs->cache, sb->id, e->path);
		sbfs_files_changed(sb, e->path);
		sbfs_kernel_changed(fs, sb->id, e->path,
				    SBFS_KERNEL_ATTR | SBFS_KERNEL_DATA);
		break;
	case PROTO_EV_ATTR:
		cache_forget(fs->cache, sb->id, e->path);
		sbfs_files_changed(sb, e->path);
		sbfs_kernel_changed(fs, sb->id, e->path, SBFS_KERNEL_ATTR);
		break;
	case PROTO_EV_CREATE:
		settle_name(sb, e->path, false);
		sbfs_files_changed(sb, e->path);
		name_changed(sb, e->path, e->dir, true);
		break;
	case PROTO_EV_REMOVE:
		settle_name(sb, e->path, true);
		sbfs_files_changed(sb, e->path);
		name_changed(sb, e->path, e->dir, false);
		break;
	case PROTO_EV_RENAME:
		settle_rename(sb, e->path, e->to);
		sbfs_files_changed(sb, e->path);
		sbfs_files_changed(sb, e->to);
		name_changed(sb, e->path, true, false);
		name_changed(sb, e->to, true, false);
		break;
	default:
		/* A kind this mount does not know: the path and its
		 * directory, whole. */
		if (e->path != NULL) {
			sbfs_files_changed(sb, e->path);
			name_changed(sb, e->path, true, false);
		}
		break;
	}
}

/* Forget everything held about sb, here and in the kernel. */
static void forget_all(struct sbx *sb)
{
	cache_drop_sandbox(sb->fs->cache, sb->id);
	prefetch_drop_sandbox(sb->fs, sb->id);
	sbfs_kernel_forget_sandbox(sb->fs, sb->id);
}

/*
 * Switch between long and short caches (ev->lock not held). Going live,
 * what is held stays as short-lived as it was (it may predate the point
 * from which changes are told); from then on answers are kept long.
 * Going dark, what the kernel was told to keep long is forgotten, and the
 * mount's own entries fall back to the short timeout at once.
 */
static void set_live(struct sbx_events *ev, bool live, const char *why)
{
	struct sbx *sb = ev->sb;
	struct sbfs *fs = sb->fs;
	bool was;

	pthread_mutex_lock(&ev->lock);
	was = ev->live;
	ev->live = false;
	snprintf(ev->why, sizeof(ev->why), "%s", why != NULL ? why : "");
	pthread_mutex_unlock(&ev->lock);
	cache_sandbox_ttl(fs->cache, sb->id,
			  live ? fs->o.cache_timeout : fs->o.attr_timeout);
	if (was && !live)
		sbfs_kernel_forget_sandbox(fs, sb->id);
	if (was != live)
		log_info("sandbox %s: change events %s%s%s", sb->id,
			 live ? "followed: caches kept long"
			      : "not followed: caches timed",
			 why != NULL && *why ? ": " : "", why ? why : "");
	pthread_mutex_lock(&ev->lock);
	ev->live = live;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
}

/* One line of MOUNT/<sb>/events (ev->lock held). */
static void add_line(struct sbx_events *ev, const struct proto_event *e)
{
	struct evline *l = &ev->lines[ev->nlines % EV_LINES];
	struct buf b;

	buf_init(&b, 16384);
	if (proto_events_add(&b, true, e) < 0 || buf_append(&b, "\n", 1) < 0) {
		buf_cleanup(&b);
		return;
	}
	free(l->text);
	l->text = buf_take(&b, &l->len);
	ev->nlines++;
}

/* Wait ms unless told to stop; false when stopping. */
static bool nap(struct sbx_events *ev, long ms)
{
	struct timespec ts;
	bool go;

	clock_deadline_in(&ts, ms);
	pthread_mutex_lock(&ev->lock);
	while (!ev->stop &&
	       pthread_cond_timedwait(&ev->cond, &ev->lock, &ts) == 0)
		;
	go = !ev->stop;
	pthread_mutex_unlock(&ev->lock);
	return go;
}

static void *follow(void *arg)
{
	struct sbx_events *ev = arg;
	struct sbx *sb = ev->sb;
	struct sbfs *fs = sb->fs;
	char boot[sizeof(((struct proto_events *)0)->boot_id)] = "";
	uint64_t since = AC_EVENTS_NOW;
	long backoff = EV_BACKOFF_MIN_MS;
	bool live = false;

	transport_op_set_deadline(0);
	transport_op_set_cancel(&ev->cancel);
	for (;;) {
		struct proto_events out;
		struct sbx_error err;
		bool first = since == AC_EVENTS_NOW;
		size_t i;
		int rc;

		pthread_mutex_lock(&ev->lock);
		if (ev->stop) {
			pthread_mutex_unlock(&ev->lock);
			break;
		}
		pthread_mutex_unlock(&ev->lock);
		memset(&out, 0, sizeof(out));
		sbx_error_clear(&err);
		/* The first ("where is now") waits too: the agent then
		 * answers once its watcher covers the whole tree, and no
		 * "lost" follows to make the mount drop what it holds
		 * (doc/protocol-ext.md, "Without since"). */
		rc = ac_events(fs->t, sb->id, boot, since, EV_WAIT_MS, &out,
			       &err);
		if (rc < 0) {
			proto_events_cleanup(&out);
			if (__atomic_load_n(&ev->cancel, __ATOMIC_RELAXED))
				break;
			/* Whatever happened meanwhile went untold. */
			set_live(ev, false, err.reason);
			live = false;
			if (!nap(ev, backoff))
				break;
			backoff = backoff * 2 > EV_BACKOFF_MAX_MS
					  ? EV_BACKOFF_MAX_MS
					  : backoff * 2;
			continue;
		}
		backoff = EV_BACKOFF_MIN_MS;
		if (out.unavailable[0] != '\0') {
			set_live(ev, false, out.unavailable);
			live = false;
			proto_events_cleanup(&out);
			since = AC_EVENTS_NOW;
			boot[0] = '\0';
			if (!nap(ev, EV_UNAVAILABLE_MS))
				break;
			continue;
		}
		if (out.lost && !first) {
			log_info("sandbox %s: change events lost: forgetting "
				 "what the mount holds of it",
				 sb->id);
			forget_all(sb);
		}
		for (i = 0; i < out.n; i++) {
			const struct proto_event *e = &out.ev[i];

			if (strcmp(e->by, fs->client_id) != 0)
				apply(sb, e);
		}
		pthread_mutex_lock(&ev->lock);
		for (i = 0; i < out.n; i++)
			add_line(ev, &out.ev[i]);
		if (out.lost && !first) {
			struct proto_event lost = {.type = PROTO_EV_LOST};

			add_line(ev, &lost);
		}
		ev->applied = out.next;
		if (ev->seen < out.next)
			ev->seen = out.next;
		pthread_cond_broadcast(&ev->cond);
		pthread_mutex_unlock(&ev->lock);
		if (first || !live) {
			set_live(ev, true, NULL);
			live = true;
		}
		since = out.next;
		snprintf(boot, sizeof(boot), "%s", out.boot_id);
		proto_events_cleanup(&out);
	}
	return NULL;
}

void sbfs_events_follow(struct sbx *sb)
{
	struct sbx_events *ev;

	if (sb->fs->o.noevents)
		return;
	pthread_mutex_lock(&sb->lock);
	if (sb->events != NULL) {
		pthread_mutex_unlock(&sb->lock);
		return;
	}
	ev = xcalloc(1, sizeof(*ev));
	ev->sb = sb;
	pthread_mutex_init(&ev->lock, NULL);
	clock_cond_init(&ev->cond);
	if (pthread_create(&ev->thread, NULL, follow, ev) != 0) {
		pthread_cond_destroy(&ev->cond);
		pthread_mutex_destroy(&ev->lock);
		free(ev);
		pthread_mutex_unlock(&sb->lock);
		log_warn("sandbox %s: cannot follow its change events", sb->id);
		return;
	}
	sb->events = ev;
	pthread_mutex_unlock(&sb->lock);
}

void sbfs_events_free(struct sbx *sb)
{
	struct sbx_events *ev = sb->events;
	size_t i;

	if (ev == NULL)
		return;
	pthread_mutex_lock(&ev->lock);
	ev->stop = true;
	__atomic_store_n(&ev->cancel, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
	pthread_join(ev->thread, NULL);
	for (i = 0; i < EV_LINES; i++)
		free(ev->lines[i].text);
	pthread_cond_destroy(&ev->cond);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
	sb->events = NULL;
}

/* sb's events, when followed (sb->events is set once). */
static struct sbx_events *events_of(struct sbx *sb)
{
	struct sbx_events *ev;

	pthread_mutex_lock(&sb->lock);
	ev = sb->events;
	pthread_mutex_unlock(&sb->lock);
	return ev;
}

/* Whether sb's caches are kept long: its events are followed now. */
static bool sbfs_events_live(struct sbx *sb)
{
	struct sbx_events *ev = events_of(sb);
	bool live = false;

	if (ev != NULL) {
		pthread_mutex_lock(&ev->lock);
		live = ev->live;
		pthread_mutex_unlock(&ev->lock);
	}
	return live;
}

bool sbfs_events_caught_up(struct sbx *sb, long max_ms)
{
	struct sbx_events *ev = events_of(sb);
	struct timespec ts;
	bool ok;

	if (ev == NULL)
		return false;
	clock_deadline_in(&ts, max_ms);
	pthread_mutex_lock(&ev->lock);
	while (ev->live && ev->applied < ev->seen &&
	       pthread_cond_timedwait(&ev->cond, &ev->lock, &ts) == 0)
		;
	ok = ev->live && ev->applied >= ev->seen;
	pthread_mutex_unlock(&ev->lock);
	return ok;
}

bool sbfs_events_sync(struct sbx *sb, long max_ms)
{
	struct sbx_events *ev = events_of(sb);
	struct proto_events out;
	struct sbx_error err;
	int rc;

	if (ev == NULL || !sbfs_events_live(sb))
		return false;
	memset(&out, 0, sizeof(out));
	sbx_error_clear(&err);
	/* "Where now is" comes once the agent has taken in every change
	 * made before the request (doc/protocol-ext.md). */
	rc = ac_events(sb->fs->t, sb->id, NULL, AC_EVENTS_NOW, 0, &out, &err);
	if (rc == 0) {
		pthread_mutex_lock(&ev->lock);
		if (out.next > ev->seen)
			ev->seen = out.next;
		pthread_mutex_unlock(&ev->lock);
	}
	proto_events_cleanup(&out);
	return rc == 0 && sbfs_events_caught_up(sb, max_ms);
}

/* ---- MOUNT/<sb>/events ------------------------------------------------- */

int fs_events_open(struct sbx *sb, struct fuse_file_info *fi)
{
	struct sbx_events *ev;
	struct evreader *r;

	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EACCES;
	if (!sb->health.ext_events || sb->fs->o.noevents)
		return -EOPNOTSUPP;
	sbfs_events_follow(sb);
	ev = events_of(sb);
	if (ev == NULL)
		return -EIO;
	r = xcalloc(1, sizeof(*r));
	/* Changes from now on; the thread's first answer says where now
	 * is. */
	pthread_mutex_lock(&ev->lock);
	r->at = ev->nlines;
	pthread_mutex_unlock(&ev->lock);
	fi->fh = (uint64_t)(uintptr_t)r;
	fi->direct_io = 1;
	fi->nonseekable = 1;
	return 0;
}

int fs_events_read(struct sbx *sb, char *buf, size_t size,
		   struct fuse_file_info *fi)
{
	struct evreader *r = (struct evreader *)(uintptr_t)fi->fh;
	struct sbx_events *ev = events_of(sb);
	static const char lost_line[] = "{\"type\":\"lost\"}\n";
	size_t done = 0;

	if (ev == NULL || r == NULL)
		return -EBADF;
	pthread_mutex_lock(&ev->lock);
	while (r->at == ev->nlines && !ev->stop) {
		struct timespec ts;

		if (sbfs_interrupted()) {
			pthread_mutex_unlock(&ev->lock);
			return -EINTR;
		}
		clock_deadline_in(&ts, EV_READ_TICK_MS);
		pthread_cond_timedwait(&ev->cond, &ev->lock, &ts);
	}
	/* A reader that fell behind what is kept is told, and skips. */
	if (ev->nlines - r->at > EV_LINES) {
		r->at = ev->nlines;
		r->off = 0;
		r->lost = true;
	}
	if (r->lost && size >= sizeof(lost_line) - 1) {
		memcpy(buf, lost_line, sizeof(lost_line) - 1);
		done = sizeof(lost_line) - 1;
		r->lost = false;
	}
	while (r->at < ev->nlines && done < size) {
		const struct evline *l = &ev->lines[r->at % EV_LINES];
		size_t n = l->len - r->off;

		if (n > size - done)
			n = size - done;
		memcpy(buf + done, l->text + r->off, n);
		done += n;
		r->off += n;
		if (r->off == l->len) {
			r->at++;
			r->off = 0;
		}
	}
	pthread_mutex_unlock(&ev->lock);
	return (int)done;
}

int fs_events_release(struct sbx *sb, struct fuse_file_info *fi)
{
	(void)sb;
	free((struct evreader *)(uintptr_t)fi->fh);
	fi->fh = 0;
	return 0;
}

/* ---- the kernel's timeouts ------------------------------------------- */

void sbfs_timeouts(struct sbfs *fs, const char *path, uint64_t mark,
		   double *entry, double *attr, double *negative)
{
	char id[PROVIDER_ID_MAX + 1];
	const char *p = path + 1, *rel;
	size_t n = strcspn(p, "/");
	struct sbx *sb;

	*entry = fs->o.entry_timeout;
	*attr = fs->o.attr_timeout;
	*negative = fs->o.negative_timeout;
	if (path[0] != '/' || n == 0 || n >= sizeof(id) ||
	    strncmp(p + n, "/files", 6) != 0 ||
	    (p[n + 6] != '/' && p[n + 6] != '\0'))
		return;
	memcpy(id, p, n);
	id[n] = '\0';
	rel = p[n + 6] == '/' ? p + n + 7 : "";
	sb = sbfs_known(fs, id);
	if (sb == NULL)
		return;
	if (sbfs_events_live(sb)) {
		/* An answer that raced with a change the events told of is
		 * not kept long: the kernel would keep it past the
		 * invalidation that came first. */
		if (cache_changed_since(fs->cache, id, rel, mark)) {
			*entry = *attr = *negative = 0;
		} else {
			*entry = *attr = *negative = fs->o.cache_timeout;
		}
	}
	sbfs_leave(sb);
}
