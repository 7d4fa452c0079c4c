/* SPDX-License-Identifier: MIT */
/*
 * watch_thread: the event watcher's thread (watch.h, watch_i.h): what the
 * kernel reports about the root's tree, turned into events.
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
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include "agent/resolve.h"
#include "agent/watch_i.h"
#include "common/clock.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/xalloc.h"

#define WATCH_MASK                                                         \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | \
	 IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |      \
	 IN_ONLYDIR | IN_EXCL_UNLINK)
/* How long an IN_MOVED_FROM waits for its IN_MOVED_TO (the kernel queues
 * them together; only another CPU's event can come between). */
#define MOVE_WAIT_MS 10
/* Directories read between looks at held requests' deadlines. */
#define WALK_CHECK 256

/* The inotify limit called name ("watches", "instances"): the user
 * namespace's, else the system's; -1 when neither can be read. */
static long inotify_limit(const char *name)
{
	char path[64], *text;
	long v = -1;

	snprintf(path, sizeof(path), "/proc/sys/user/max_inotify_%s", name);
	text = fdio_read_text(path, 31);
	if (text == NULL) {
		snprintf(path, sizeof(path), "/proc/sys/fs/inotify/max_user_%s",
			 name);
		text = fdio_read_text(path, 31);
	}
	if (text != NULL && *text != '\0')
		v = strtol(text, NULL, 10);
	free(text);
	return v;
}

/* ---- events from the thread --------------------------------------------------- */

static void emit(struct agent_events *ev, enum proto_event_type type, bool dir,
		 const char *rel, const char *to, uint64_t off)
{
	pthread_mutex_lock(&ev->lock);
	events_ring_push(
		ev, type, dir, rel, to,
		events_own_match(ev, type, rel, to, off, clock_mono_ms()));
	pthread_mutex_unlock(&ev->lock);
}

static void emit_lost(struct agent_events *ev)
{
	pthread_mutex_lock(&ev->lock);
	events_push_lost(ev);
	pthread_mutex_unlock(&ev->lock);
}

/* An event about name in n (n itself when name is NULL); off: where the
 * kernel queued it, UINT64_MAX for one the watcher found by reading. */
static void emit_at(struct agent_events *ev, enum proto_event_type type,
		    bool dir, const struct wnode *n, const char *name,
		    uint64_t off)
{
	char rel[WTREE_PATH_MAX + 1];

	/* A path no route can name: only a client that forgets everything
	 * is sure to drop what it holds about it. */
	if (!wtree_rel(n, name, rel))
		emit_lost(ev);
	else
		emit(ev, type, dir, rel, NULL, off);
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
	char rel[WTREE_PATH_MAX + 1], proc[64];
	struct wnode *stale, *known;
	struct stat st;
	int fd, wd, err;

	if (parent == NULL)
		rel[0] = '\0';
	else if (!wtree_rel(parent, name, rel))
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
	if (ev->limit > 0 && ev->tree.n >= ev->limit) {
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
	known = wtree_find_wd(&ev->tree, wd);
	if (known != NULL) {
		/* Watched already: found by reading its parent before its
		 * create was taken in; or moved here before its rename was,
		 * and then it is here now (the rename, when it comes, finds
		 * it moved); or met again (a bind mount of it). */
		close(fd);
		if (parent != NULL && known->parent != NULL &&
		    (known->parent != parent ||
		     strcmp(known->name, name) != 0) &&
		    !wtree_above(known, parent)) {
			stale = wtree_find_child(&ev->tree, parent, name);
			if (stale != NULL)
				wtree_drop(&ev->tree, stale, ev->ifd);
			wtree_detach(&ev->tree, known);
			wtree_attach(&ev->tree, known, parent, name);
		}
		return 0;
	}
	/* What was watched under that name is gone (the events that say so
	 * are still queued): this one replaces it. */
	stale = parent != NULL ? wtree_find_child(&ev->tree, parent, name)
			       : NULL;
	if (stale != NULL)
		wtree_drop(&ev->tree, stale, ev->ifd);
	*out = wtree_add(&ev->tree, parent, name, wd, st.st_dev);
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
		v = inotify_limit("watches");
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
		v = inotify_limit("instances");
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
	events_fail_locked(ev, why);
	events_release_waiters(ev, clock_mono_ms(), &replies);
	pthread_mutex_unlock(&ev->lock);
	events_send_replies(replies);
	wtree_forget(&ev->tree, NULL);
}

/* Answer the held requests that are due; call without the lock. */
static void release_due(struct agent_events *ev)
{
	struct reply *replies = NULL;

	pthread_mutex_lock(&ev->lock);
	events_release_waiters(ev, clock_mono_ms(), &replies);
	pthread_mutex_unlock(&ev->lock);
	events_send_replies(replies);
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
		fn = wtree_find_child(&ev->tree, ev->pend.parent,
				      ev->pend.name);
		if (fn != NULL)
			wtree_drop(&ev->tree, fn, ev->ifd);
	}
}

/* The pending IN_MOVED_FROM found its IN_MOVED_TO: name in tp. */
static void finish_rename(struct agent_events *ev, struct wnode *tp,
			  const char *name)
{
	char from[WTREE_PATH_MAX + 1], to[WTREE_PATH_MAX + 1];
	struct wnode *fp = ev->pend.parent, *fn, *tn;
	bool dir = ev->pend.dir;

	ev->pend.active = false;
	if (!wtree_rel(fp, ev->pend.name, from) || !wtree_rel(tp, name, to)) {
		emit_lost(ev);
		ev->rebuild = dir;
		return;
	}
	fn = dir ? wtree_find_child(&ev->tree, fp, ev->pend.name) : NULL;
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
		    wtree_find_child(&ev->tree, tp, name) == NULL) {
			wtree_attach(&ev->tree, ev->xchg.node, tp, name);
			ev->xchg.active = false;
		} else {
			ev->rebuild = true;
		}
		return;
	}
	if (!dir)
		return;
	tn = wtree_find_child(&ev->tree, tp, name);
	if (tn != NULL && tn != fn) {
		/* Over a watched directory: an exchange if its reverse comes
		 * next, else a replaced empty directory (or worse). */
		wtree_detach(&ev->tree, tn);
		ev->xchg.active = true;
		ev->xchg.node = tn;
		ev->xchg.from_parent = fp;
		ev->xchg.to_parent = tp;
		strlcpy_s(ev->xchg.from_name, ev->pend.name,
			  sizeof(ev->xchg.from_name));
		strlcpy_s(ev->xchg.to_name, name, sizeof(ev->xchg.to_name));
		ev->xchg.since = clock_mono_ms();
	}
	wtree_detach(&ev->tree, fn);
	wtree_attach(&ev->tree, fn, tp, name);
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
	n = wtree_find_wd(&ev->tree, ie->wd);
	if (ev->xchg.active && nlen == 0 && (m & IN_ATTRIB) &&
	    n == ev->xchg.node) {
		/* The link count of the directory renamed over: it was
		 * replaced (an exchange has none), and was empty. */
		wtree_drop(&ev->tree, n, -1);
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
			if (n == ev->tree.root)
				ev->fail_rc = -ENOENT;
			else
				wtree_drop(&ev->tree, n, -1);
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
		char rel[WTREE_PATH_MAX + 1];
		struct top_event top = {PROTO_EV_CREATE, rel, NULL, off};

		/* Often watched already: its parent's reading found it. */
		if (!wtree_rel(n, name, rel))
			emit_lost(ev);
		else
			ev->fail_rc = add_tree(ev, n, name, &top, true);
	} else if (m & (IN_CREATE | IN_MOVED_TO)) {
		emit_at(ev, PROTO_EV_CREATE, false, n, name, off);
	} else if (m & IN_DELETE) {
		emit_at(ev, PROTO_EV_REMOVE, dir, n, name, off);
		cn = dir ? wtree_find_child(&ev->tree, n, name) : NULL;
		if (cn != NULL)
			wtree_drop(&ev->tree, cn, -1);
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
	nold = wtree_forget(&ev->tree, &old);
	rc = add_tree(ev, NULL, "", NULL, false);
	if (rc == 0 && ev->tree.root == NULL)
		rc = -ENOENT;
	if (rc == 0)
		for (i = 0; i < nold; i++)
			if (wtree_find_wd(&ev->tree, old[i]) == NULL)
				inotify_rm_watch(ev->ifd, old[i]);
	free(old);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ev->lock);
	events_push_lost(ev);
	pthread_mutex_unlock(&ev->lock);
	log_notice("events: lost track of changes; watching %zu directories "
		   "again",
		   ev->tree.n);
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
	if (rc == 0 && ev->tree.root == NULL)
		rc = -ENOENT;
	if (rc < 0)
		return rc;
	log_info("events: watching %zu directories beneath the root (%lld ms)",
		 ev->tree.n, (long long)(clock_mono_ms() - t0));
	return 0;
}

/* The first walk is done: the thread runs, and the requests held through
 * the walk are answered once what was queued meanwhile is taken in. */
static void watch_ready(struct agent_events *ev)
{
	struct reply *replies = NULL;
	int64_t now = clock_mono_ms();
	struct waiter *w;

	pthread_mutex_lock(&ev->lock);
	ev->state = EV_RUNNING;
	ev->processed = ev->read_total;
	for (w = ev->waiters; w != NULL; w = w->next) {
		w->sync = ev->read_total + events_queued(ev);
		w->sync_deadline = w->deadline > now + SYNC_MS ? w->deadline
							       : now + SYNC_MS;
	}
	if (ev->lost_on_ready) {
		events_push_lost(ev);
		ev->lost_on_ready = false;
	}
	events_release_waiters(ev, now, &replies);
	pthread_mutex_unlock(&ev->lock);
	events_send_replies(replies);
}

/* How long the thread may sleep: until the next held request's deadline
 * or a pending rename's wait (-1: no bound). */
static int watch_timeout(struct agent_events *ev)
{
	int64_t next, now;

	pthread_mutex_lock(&ev->lock);
	next = events_waiters_next(ev);
	pthread_mutex_unlock(&ev->lock);
	if (ev->pend.active && ev->pend.since + MOVE_WAIT_MS < next)
		next = ev->pend.since + MOVE_WAIT_MS;
	if (ev->xchg.active && ev->xchg.since + MOVE_WAIT_MS < next)
		next = ev->xchg.since + MOVE_WAIT_MS;
	now = clock_mono_ms();
	return next == INT64_MAX      ? -1
	       : next <= now	      ? 0
	       : next - now > 3600000 ? 3600000
				      : (int)(next - now);
}

/* Read what the kernel queued and take it in: whether there was any. */
static bool watch_read(struct agent_events *ev)
{
	uint64_t base;
	ssize_t n;

	pthread_mutex_lock(&ev->lock);
	base = ev->read_total;
	n = read(ev->ifd, ev->rbuf, READ_BUF);
	if (n > 0)
		ev->read_total += (uint64_t)n;
	pthread_mutex_unlock(&ev->lock);
	if (n > 0) {
		process(ev, ev->rbuf, (size_t)n, base);
		return true;
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		ev->fail_rc = -errno;
	return false;
}

/* After a wake-up: a rename whose other half did not come, a rebuild,
 * a failure (false: the thread ends), and the held requests now due. */
static bool watch_settle(struct agent_events *ev, bool got)
{
	struct reply *replies = NULL;
	int64_t now = clock_mono_ms();

	if (!got && ev->pend.active && now >= ev->pend.since + MOVE_WAIT_MS)
		flush_pending(ev);
	if (!got && ev->xchg.active && now >= ev->xchg.since + MOVE_WAIT_MS)
		ev->rebuild = true;
	if (ev->rebuild && ev->fail_rc == 0)
		ev->fail_rc = rebuild(ev);
	if (ev->fail_rc == -ECANCELED)
		return false;
	if (ev->fail_rc < 0) {
		watch_fail(ev, ev->fail_rc);
		return false;
	}
	pthread_mutex_lock(&ev->lock);
	ev->processed = ev->pend.active ? ev->pend.off : ev->read_total;
	events_owns_retire(ev, now);
	events_release_waiters(ev, now, &replies);
	pthread_mutex_unlock(&ev->lock);
	events_send_replies(replies);
	return true;
}

void *events_thread_main(void *arg)
{
	struct agent_events *ev = arg;
	int rc;

	rc = watch_start(ev);
	if (rc < 0) {
		if (rc != -ECANCELED)
			watch_fail(ev, rc);
		wtree_forget(&ev->tree, NULL);
		return NULL;
	}
	watch_ready(ev);
	while (!atomic_load(&ev->stop)) {
		struct pollfd pfd[2] = {{ev->ifd, POLLIN, 0},
					{ev->wake_fd, POLLIN, 0}};
		bool got = false;

		if (poll(pfd, 2, watch_timeout(ev)) < 0 && errno != EINTR) {
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
		if (pfd[0].revents & POLLIN)
			got = watch_read(ev);
		if (!watch_settle(ev, got))
			break;
	}
	wtree_forget(&ev->tree, NULL);
	return NULL;
}
