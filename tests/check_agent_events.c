/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_events: the change events (doc/protocol-ext.md, "Change
 * events"). The "wire" case changes files directly
 * in a real agent's root, as a job would, and through its file routes,
 * and checks the exact events; the "client" case goes through the
 * transport and ac_events; the "scale" case watches 100,000 directories
 * and prints how long that took and what it cost the agent. The answer's
 * encoder and decoder are suite agent_events_decode.
 *
 * The agent answers a request once it has taken in everything the kernel
 * had queued when the request came, so a test that makes its changes and
 * then asks gets all of them in one answer, and the exact sequence is
 * fixed (nothing was handed out in between to stop a repeat from being
 * folded into the event before it).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/agent_client.h"
#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "tests/check_suites.h"
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"
#include "tests/stub_provider.h"
#include "client/transport.h"

/* ---- against a real agent ----------------------------------------------- */

static struct th_agent ag;

static void wire_setup(void)
{
	th_agent_start(&ag, NULL, true);
}

static void wire_teardown(void)
{
	th_agent_stop(&ag);
}

/* GET events: since NULL for "now"; the answer decoded, with its time. */
static void events_raw(const struct th_agent *a, const char *query,
		       struct th_resp *r)
{
	const char *h[] = {a->auth, NULL};
	char url[256];

	snprintf(url, sizeof(url), "%s/sandboxfs/v1/events%s", a->base, query);
	th_http("GET", url, h, NULL, 0, r);
}

static long long get_events(const struct th_agent *a, const uint64_t *since,
			    long wait_ms, struct proto_events *out)
{
	long long t0 = th_now_ms();
	struct th_resp r;
	char q[96];

	if (since == NULL)
		snprintf(q, sizeof(q), "?waitMs=%ld", wait_ms);
	else
		snprintf(q, sizeof(q), "?since=%" PRIu64 "&waitMs=%ld", *since,
			 wait_ms);
	events_raw(a, q, &r);
	ck_assert_msg(r.status == 200, "events: %ld %s", r.status,
		      r.body.data ? r.body.data : "");
	ck_assert_int_eq(proto_events_decode(r.body.data, r.body.len, out), 0);
	th_resp_cleanup(&r);
	return th_now_ms() - t0;
}

/* Where now is, once the watcher runs. */
static uint64_t events_now(const struct th_agent *a)
{
	struct proto_events e;
	uint64_t next;

	get_events(a, NULL, 20000, &e);
	ck_assert(!e.lost);
	ck_assert_uint_eq(e.n, 0);
	next = e.next;
	proto_events_cleanup(&e);
	return next;
}

/* The events as text, one "type path[>to][/][@by]" per line. */
static char *events_text(const struct proto_events *e)
{
	struct buf b = BUF_INIT(0);
	size_t i;

	ck_assert_int_eq(buf_append_str(&b, ""), 0);
	for (i = 0; i < e->n; i++) {
		const struct proto_event *v = &e->ev[i];

		ck_assert_int_eq(buf_printf(&b, "%s /%s%s%s%s%s%s\n",
					    proto_event_type_name(v->type),
					    v->path, v->to ? " > /" : "",
					    v->to ? v->to : "",
					    v->dir ? " dir" : "",
					    v->by[0] ? " @" : "", v->by),
				 0);
	}
	return buf_take(&b, NULL);
}

static void expect_events(const struct th_agent *a, uint64_t *since,
			  const char *want)
{
	struct proto_events e;
	char *text;

	get_events(a, since, 0, &e);
	ck_assert_msg(!e.lost, "lost");
	text = events_text(&e);
	ck_assert_msg(strcmp(text, want) == 0, "events:\n%s\nwanted:\n%s", text,
		      want);
	if (e.n > 0)
		ck_assert_uint_eq(e.next, e.ev[e.n - 1].seq);
	*since = e.next;
	free(text);
	proto_events_cleanup(&e);
}

static void put(const char *path, const char *text, int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | flags, 0644);

	ck_assert_msg(fd >= 0, "open %s", path);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(close(fd), 0);
}

START_TEST(wire_files_and_dirs)
{
	char *f = ta_join(ag.root, "f"), *d = ta_join(ag.root, "d"),
	     *dg = ta_join(ag.root, "d/g");
	char *e = ta_join(ag.root, "e"), *eg = ta_join(ag.root, "e/g"),
	     *l = ta_join(ag.root, "l");
	uint64_t since = events_now(&ag);
	int i;

	put(f, "hello", O_TRUNC);
	ck_assert_int_eq(chmod(f, 0600), 0);
	/* a flood of writes with nothing between is one event */
	for (i = 0; i < 200; i++)
		put(f, "x", O_APPEND);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	/* Asking waits for the watcher to take in what came before: d is
	 * watched from here on. (Without the pause what happens in d before
	 * the watcher reaches its create is reported by reading d then, if
	 * it is still there, or not at all if it is gone.) */
	expect_events(&ag, &since,
		      "create /f\n"
		      "write /f\n"
		      "attr /f\n"
		      "write /f\n"
		      "create /d dir\n");
	ck_assert_int_eq(rename(f, dg), 0);
	ck_assert_int_eq(chmod(d, 0700), 0);
	ck_assert_int_eq(rename(d, e), 0);
	/* the moved directory's watch follows it */
	put(eg, "y", O_APPEND);
	ck_assert_int_eq(unlink(eg), 0);
	ck_assert_int_eq(rmdir(e), 0);
	ck_assert_int_eq(symlink("x", l), 0);
	expect_events(&ag, &since,
		      "rename /f > /d/g\n"
		      "attr /d dir\n"
		      "rename /d > /e dir\n"
		      "write /e/g\n"
		      "remove /e/g\n"
		      "remove /e dir\n"
		      "create /l\n");
	/* through the link: its target; a write handed out is not folded
	 * into */
	put(l, "z", O_APPEND);
	expect_events(&ag, &since, "create /x\nwrite /x\n");
	put(l, "z", O_APPEND);
	expect_events(&ag, &since, "write /x\n");
	expect_events(&ag, &since, "");
	free(f);
	free(d);
	free(dg);
	free(e);
	free(eg);
	free(l);
}
END_TEST

static void mkdirs(const char *a, const char *b)
{
	char *p = ta_join(ag.root, a), *q = ta_join(ag.root, b);

	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(mkdir(q, 0755), 0);
	free(p);
	free(q);
}

static void exchange(const char *a, const char *b)
{
	char *p = ta_join(ag.root, a), *q = ta_join(ag.root, b);

	ck_assert_int_eq(renameat2(AT_FDCWD, p, AT_FDCWD, q, RENAME_EXCHANGE),
			 0);
	free(p);
	free(q);
}

static void put_at(const char *rel)
{
	char *p = ta_join(ag.root, rel);

	put(p, "1", 0);
	free(p);
}

/* Directories renamed over directories: the watches follow, no lost. */
START_TEST(wire_exchange_and_replace)
{
	char *c = ta_join(ag.root, "c"), *e = ta_join(ag.root, "e");
	uint64_t since = events_now(&ag);

	mkdirs("a", "b");
	expect_events(&ag, &since, "create /a dir\ncreate /b dir\n");
	exchange("a", "b");
	put_at("a/in-a");
	put_at("b/in-b");
	expect_events(&ag, &since,
		      "rename /a > /b dir\n"
		      "rename /b > /a dir\n"
		      "create /a/in-a\n"
		      "write /a/in-a\n"
		      "create /b/in-b\n"
		      "write /b/in-b\n");
	/* over an empty directory, which goes */
	mkdirs("c", "e");
	expect_events(&ag, &since, "create /c dir\ncreate /e dir\n");
	ck_assert_int_eq(rename(c, e), 0);
	put_at("e/z");
	expect_events(&ag, &since,
		      "rename /c > /e dir\ncreate /e/z\nwrite /e/z\n");
	/* a file and a directory */
	put_at("f1");
	expect_events(&ag, &since, "create /f1\nwrite /f1\n");
	exchange("f1", "e");
	put_at("f1/q");
	expect_events(&ag, &since,
		      "rename /f1 > /e\n"
		      "rename /e > /f1 dir\n"
		      "create /f1/q\n"
		      "write /f1/q\n");
	free(c);
	free(e);
}
END_TEST

/* A watched directory moved into a new one before the watcher took the
 * new one's create in: it stays watched, under its new path. */
START_TEST(wire_moved_before_seen)
{
	char *old = ta_join(ag.root, "old"), *n = ta_join(ag.root, "n"),
	     *to = ta_join(ag.root, "n/old");
	uint64_t since;

	ck_assert_int_eq(mkdir(old, 0755), 0);
	since = events_now(&ag);
	ck_assert_int_eq(kill(ag.pid, SIGSTOP), 0);
	ck_assert_int_eq(mkdir(n, 0755), 0);
	ck_assert_int_eq(rename(old, to), 0);
	ck_assert_int_eq(kill(ag.pid, SIGCONT), 0);
	expect_events(&ag, &since,
		      "create /n dir\n"
		      "create /n/old dir\n"
		      "remove /old dir\n");
	put_at("n/old/x");
	expect_events(&ag, &since, "create /n/old/x\nwrite /n/old/x\n");
	free(old);
	free(n);
	free(to);
}
END_TEST

/* A directory's contents made right after it are reported, whether the
 * watcher read them or the kernel reported them. */
START_TEST(wire_new_tree_contents)
{
	static const char *const made[] = {"a",	       "a/b",  "a/b/c",
					   "a/b/c/f1", "a/f2", "a/b/c/d"};
	char *p, *text;
	struct proto_events e;
	uint64_t since = events_now(&ag);
	size_t i, k;

	for (i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		char *q = ta_join(ag.root, made[i]);

		if (strchr(made[i], 'f') != NULL)
			put(q, "1", 0);
		else
			ck_assert_int_eq(mkdir(q, 0755), 0);
		free(q);
	}
	get_events(&ag, &since, 0, &e);
	ck_assert(!e.lost);
	text = events_text(&e);
	for (i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		bool found = false, dir = strchr(made[i], 'f') == NULL;

		for (k = 0; k < e.n && !found; k++)
			found = e.ev[k].type == PROTO_EV_CREATE &&
				strcmp(e.ev[k].path, made[i]) == 0 &&
				e.ev[k].dir == dir;
		ck_assert_msg(found, "no create of %s in\n%s", made[i], text);
	}
	since = e.next;
	proto_events_cleanup(&e);
	free(text);
	/* and every new directory is watched */
	p = ta_join(ag.root, "a/b/c/d/deep");
	put(p, "2", 0);
	expect_events(&ag, &since,
		      "create /a/b/c/d/deep\nwrite /a/b/c/d/deep\n");
	free(p);
}
END_TEST

struct later {
	char *path;
	int delay_ms;
};

static void *write_later(void *arg)
{
	struct later *l = arg;

	usleep((useconds_t)l->delay_ms * 1000);
	put(l->path, "late", 0);
	return NULL;
}

START_TEST(wire_long_poll)
{
	struct later l = {ta_join(ag.root, "late"), 500};
	uint64_t since = events_now(&ag);
	struct proto_events e;
	pthread_t th;
	long long ms;

	/* early on a change */
	ck_assert_int_eq(pthread_create(&th, NULL, write_later, &l), 0);
	ms = get_events(&ag, &since, 20000, &e);
	pthread_join(th, NULL);
	ck_assert_msg(ms < 10000, "answered after %lld ms", ms);
	ck_assert_uint_ge(e.n, 1);
	ck_assert_int_eq(e.ev[0].type, PROTO_EV_CREATE);
	ck_assert_str_eq(e.ev[0].path, "late");
	/* let the write that follows the create come in */
	usleep(100000);
	since = e.ev[e.n - 1].seq;
	proto_events_cleanup(&e);
	get_events(&ag, &since, 0, &e);
	since = e.next;
	proto_events_cleanup(&e);

	/* after waitMs without one */
	ms = get_events(&ag, &since, 1500, &e);
	ck_assert_msg(ms >= 1400 && ms < 10000, "answered after %lld ms", ms);
	ck_assert(!e.lost);
	ck_assert_uint_eq(e.n, 0);
	ck_assert_uint_eq(e.next, since);
	proto_events_cleanup(&e);

	/* no since: where now is, at once */
	ms = get_events(&ag, NULL, 0, &e);
	ck_assert_msg(ms < 5000, "answered after %lld ms", ms);
	ck_assert_uint_eq(e.n, 0);
	ck_assert_uint_eq(e.next, since);
	proto_events_cleanup(&e);
	free(l.path);
}
END_TEST

START_TEST(wire_refusals)
{
	static const char *const bad[][2] = {
		{"?since=x",
		 "REQUEST_INVALID: Request invalid: since must be a sequence "
		 "number"},
		{"?since=-1",
		 "REQUEST_INVALID: Request invalid: since must be a sequence "
		 "number"},
		{"?since=18446744073709551616",
		 "REQUEST_INVALID: Request invalid: since must be a sequence "
		 "number"},
		{"?waitMs=1s",
		 "REQUEST_INVALID: Request invalid: waitMs must be a number of "
		 "milliseconds"},
	};
	const char *h[] = {ag.auth, NULL};
	struct proto_events e;
	struct th_resp r;
	uint64_t since;
	char url[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		events_raw(&ag, bad[i][0], &r);
		ck_assert_int_eq(r.status, 400);
		ck_assert_str_eq(r.body.data, bad[i][1]);
		th_resp_cleanup(&r);
	}
	/* a credential is needed, the method is GET */
	ta_ext_expect_no_credential(&ag, "events");
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/events", ag.base);
	th_http("POST", url, h, NULL, 0, &r);
	ck_assert_int_eq(r.status, 405);
	th_resp_cleanup(&r);
	/* a seq this boot never gave is lost, with where now is */
	since = events_now(&ag);
	since += 5;
	get_events(&ag, &since, 0, &e);
	ck_assert(e.lost);
	ck_assert_uint_eq(e.next, since - 5);
	proto_events_cleanup(&e);
}
END_TEST

START_TEST(wire_ring_lost)
{
	const char *args[] = {"--events-ring", "16", NULL};
	struct th_agent small;
	struct proto_events e;
	uint64_t since, zero;
	char name[64];
	int i;

	th_agent_start(&small, args, true);
	since = events_now(&small);
	zero = since;
	for (i = 0; i < 12; i++) {
		char *p;

		snprintf(name, sizeof(name), "f%d", i);
		p = ta_join(small.root, name);
		put(p, "x", 0);
		free(p);
	}
	/* 24 events: the first 8 left the ring */
	get_events(&small, &zero, 0, &e);
	ck_assert(e.lost);
	ck_assert_uint_eq(e.next, since + 24);
	ck_assert_uint_eq(e.n, 0);
	proto_events_cleanup(&e);
	/* what is still there is given */
	since += 8;
	get_events(&small, &since, 0, &e);
	ck_assert(!e.lost);
	ck_assert_uint_eq(e.n, 16);
	ck_assert_str_eq(e.ev[0].path, "f4");
	ck_assert_int_eq(e.ev[0].type, PROTO_EV_CREATE);
	proto_events_cleanup(&e);
	since -= 1;
	get_events(&small, &since, 0, &e);
	ck_assert(e.lost);
	proto_events_cleanup(&e);
	th_agent_stop(&small);
}
END_TEST

/* More events than the kernel queues while the agent cannot read them:
 * the kernel reports an overflow, the agent lost, and it goes on. */
START_TEST(wire_queue_overflow_lost)
{
	char *text =
		th_read_file("/proc/sys/fs/inotify/max_queued_events", NULL);
	long max = text != NULL ? strtol(text, NULL, 10) : 16384;
	uint64_t since = events_now(&ag), after;
	struct proto_events e;
	char name[64];
	long i;

	free(text);
	ck_assert_int_eq(kill(ag.pid, SIGSTOP), 0);
	/* two events a file: a create and a close after writing */
	for (i = 0; i < max / 2 + 500; i++) {
		char *p;

		snprintf(name, sizeof(name), "f%ld", i);
		p = ta_join(ag.root, name);
		put(p, "", 0);
		free(p);
	}
	ck_assert_int_eq(kill(ag.pid, SIGCONT), 0);
	get_events(&ag, &since, 20000, &e);
	ck_assert(e.lost);
	ck_assert_str_eq(e.unavailable, "");
	after = e.next;
	proto_events_cleanup(&e);
	/* watching again */
	text = ta_join(ag.root, "after");
	put(text, "", 0);
	expect_events(&ag, &after, "create /after\nwrite /after\n");
	free(text);
}
END_TEST

static void ext_send(const struct th_agent *a, const char *method,
		     const char *op, const char *client, const char *json,
		     long want)
{
	char url[512], hc[128];
	const char *h[4] = {a->auth, NULL, NULL, NULL};
	size_t n = 1;
	struct th_resp r;

	if (client != NULL) {
		snprintf(hc, sizeof(hc), "X-Sandboxfs-Client: %s", client);
		h[n++] = hc;
	}
	if (strcmp(method, "POST") == 0)
		h[n++] = "Content-Type: application/json";
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/%s", a->base, op);
	th_http(method, url, h, json, strlen(json), &r);
	ck_assert_msg(r.status == want, "%s: %ld %s", op, r.status,
		      r.body.data ? r.body.data : "");
	th_resp_cleanup(&r);
}

START_TEST(wire_by_client)
{
	uint64_t since;
	char *p;

	/* the fixtures' files belong to whom the routes act as */
	th_give_to_exec_user(ag.root);
	since = events_now(&ag);
	ext_send(&ag, "PUT", "write?path=w&offset=0&create=644", "mount-1",
		 "hello", 200);
	ext_send(&ag, "POST", "mkdir", "mount-1",
		 "{\"path\":\"d\",\"mode\":493}", 200);
	/* d is watched once the watcher has taken its create in (see
	 * wire_files_and_dirs) */
	expect_events(&ag, &since,
		      "create /w @mount-1\n"
		      "attr /w @mount-1\n"
		      "write /w @mount-1\n"
		      "create /d dir @mount-1\n"
		      "attr /d dir @mount-1\n");
	ext_send(&ag, "POST", "rename", "mount-2",
		 "{\"from\":\"w\",\"to\":\"d/w\"}", 204);
	ext_send(&ag, "POST", "chmod", NULL, "{\"path\":\"d/w\",\"mode\":384}",
		 200);
	p = ta_join(ag.root, "d/w");
	put(p, "direct", O_APPEND);
	ext_send(&ag, "POST", "truncate", "mount-1",
		 "{\"path\":\"d/w\",\"size\":2}", 200);
	ext_send(&ag, "POST", "unlink", "mount-1", "{\"path\":\"d/w\"}", 204);
	ext_send(&ag, "POST", "rmdir", "mount-1", "{\"path\":\"d\"}", 204);
	expect_events(&ag, &since,
		      "rename /w > /d/w @mount-2\n"
		      "attr /d/w\n"
		      "write /d/w\n"
		      "write /d/w @mount-1\n"
		      "remove /d/w @mount-1\n"
		      "remove /d dir @mount-1\n");
	/* a change that failed leaves nothing to match a later one */
	ext_send(&ag, "POST", "unlink", "mount-1", "{\"path\":\"gone\"}", 404);
	free(p);
	p = ta_join(ag.root, "gone");
	put(p, "", 0);
	ck_assert_int_eq(unlink(p), 0);
	expect_events(&ag, &since, "create /gone\nwrite /gone\nremove /gone\n");
	free(p);
	/* a malformed name is refused before anything runs */
	ext_send(&ag, "POST", "mkdir", "a_b", "{\"path\":\"n\",\"mode\":493}",
		 400);
	ext_send(&ag, "PUT", "write?path=n&offset=0&create=644", "a b", "x",
		 400);
	expect_events(&ag, &since, "");
}
END_TEST

START_TEST(wire_strict_v1_and_health)
{
	const char *args[] = {"--strict-v1", NULL};
	struct th_agent strict;
	struct proto_health h;
	struct th_resp r;

	th_agent_start(&strict, args, true);
	events_raw(&strict, "", &r);
	ta_expect_empty(&r, 404);
	events_raw(&strict, "?since=0&waitMs=1000", &r);
	ta_expect_empty(&r, 404);
	ta_health_get(&strict, "", &r);
	ck_assert_ptr_null(strstr(r.body.data, "events"));
	th_resp_cleanup(&r);
	th_agent_stop(&strict);

	/* advertised before anyone asks, and while it runs */
	ta_health(&ag, &h);
	ck_assert_int_eq(h.ext_events, PROTO_EXT_EVENTS_VERSION);
	events_now(&ag);
	ta_health(&ag, &h);
	ck_assert_int_eq(h.ext_events, PROTO_EXT_EVENTS_VERSION);
	ck_assert_str_eq(h.ext_events_why, "");
}
END_TEST

/* Directories d0 ... d<n-1> in a's root. */
static void make_dirs(const struct th_agent *a, int n)
{
	char name[16], *p;
	int i;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		p = ta_join(a->root, name);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		free(p);
	}
}

#define LIMIT_WHY                                                      \
	"the watch limit of 4 directories was reached (sandbox-agent " \
	"--watch-limit)"

/* Past its limit the watcher gives up: lost with the reason, and health
 * says events are unavailable, so clients fall back to timeouts. */
START_TEST(wire_watch_limit)
{
	const char *args[] = {"--watch-limit", "4", NULL};
	struct th_agent lim;
	struct proto_health h;
	struct proto_events e;
	struct th_resp r;
	uint64_t zero = 0;

	th_agent_start(&lim, args, true);
	make_dirs(&lim, 6);
	ta_health(&lim, &h);
	ck_assert_int_eq(h.ext_events, PROTO_EXT_EVENTS_VERSION);

	get_events(&lim, NULL, 20000, &e);
	ck_assert(e.lost);
	ck_assert_str_eq(e.unavailable, LIMIT_WHY);
	proto_events_cleanup(&e);
	get_events(&lim, &zero, 20000, &e);
	ck_assert(e.lost);
	ck_assert_str_eq(e.unavailable, LIMIT_WHY);
	proto_events_cleanup(&e);

	ta_health_get(&lim, "", &r);
	ck_assert_ptr_nonnull(strstr(r.body.data, "\"events\":0"));
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, &h), 0);
	ck_assert_int_eq(h.ext_events, 0);
	ck_assert_str_eq(h.ext_events_why, LIMIT_WHY);
	th_resp_cleanup(&r);
	/* the file routes are not affected */
	ext_send(&lim, "POST", "mkdir", "m", "{\"path\":\"n\",\"mode\":493}",
		 200);
	th_agent_stop(&lim);
}
END_TEST

/*
 * An agent in a user namespace of its own whose inotify watch limit is
 * limit: the kernel's own limit, reached without touching the machine's
 * (user.max_inotify_watches belongs to the namespace). The users are
 * mapped one to one, so the agent is root with nobody to act as; only
 * root may map them. false, with the reason printed, when that cannot be.
 */
static bool start_limited(struct th_agent *a, int limit)
{
	char portfile[512], maps[64], num[16], c = 0;
	int go[2], ready[2], fd;

	if (geteuid() != 0) {
		fprintf(stderr,
			"%s: skipped: only root can map the users of "
			"a user namespace\n",
			__func__);
		return false;
	}
	ta_agent_dirs(a, "events-limit", portfile, sizeof(portfile));
	snprintf(num, sizeof(num), "%d", limit);
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(ready), 0);
	a->pid = fork();
	ck_assert(a->pid >= 0);
	if (a->pid == 0) {
		close(go[1]);
		close(ready[0]);
		c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1 || c != 'y')
			_exit(125);
		if (read(go[0], &c, 1) != 1 || c != 'y')
			_exit(124);
		fd = open("/proc/sys/user/max_inotify_watches", O_WRONLY);
		if (fd < 0 || write(fd, num, strlen(num)) < 0)
			_exit(123);
		close(fd);
		ta_agent_exec(a, portfile, -1);
	}
	close(go[0]);
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1 || c != 'y') {
		fprintf(stderr,
			"%s: skipped: no user namespace could be made\n",
			__func__);
		close(go[1]);
		close(ready[0]);
		waitpid(a->pid, NULL, 0);
		a->pid = 0;
		return false;
	}
	close(ready[0]);
	snprintf(maps, sizeof(maps), "/proc/%ld/uid_map", (long)a->pid);
	th_write_file(maps, "0 0 65536\n", 10);
	snprintf(maps, sizeof(maps), "/proc/%ld/gid_map", (long)a->pid);
	th_write_file(maps, "0 0 65536\n", 10);
	ck_assert_int_eq(write(go[1], "y", 1), 1);
	close(go[1]);
	th_agent_await(a, portfile);
	return true;
}

#define KERNEL_LIMIT_WHY                                                \
	"the inotify watch limit of 3 directories was reached "         \
	"(fs.inotify.max_user_watches, or user.max_inotify_watches in " \
	"a user namespace)"

/* The kernel refuses a watch (ENOSPC): the same fallback, with its
 * reason. */
START_TEST(wire_kernel_watch_limit)
{
	char *host =
		th_read_file("/proc/sys/fs/inotify/max_user_watches", NULL);
	struct th_agent lim;
	struct proto_health h;
	struct proto_events e;
	char *after;

	if (!start_limited(&lim, 3)) {
		free(host);
		return;
	}
	make_dirs(&lim, 5);
	get_events(&lim, NULL, 20000, &e);
	ck_assert(e.lost);
	ck_assert_str_eq(e.unavailable, KERNEL_LIMIT_WHY);
	proto_events_cleanup(&e);
	ta_health(&lim, &h);
	ck_assert_int_eq(h.ext_events, 0);
	ck_assert_str_eq(h.ext_events_why, KERNEL_LIMIT_WHY);
	ext_send(&lim, "PUT", "write?path=f&offset=0&create=644", NULL, "x",
		 200);
	th_agent_stop(&lim);
	/* the machine's limit is as it was */
	after = th_read_file("/proc/sys/fs/inotify/max_user_watches", NULL);
	ck_assert_str_eq(after, host);
	free(after);
	free(host);
}
END_TEST

/* ---- the client ------------------------------------------------------------ */

START_TEST(client_events)
{
	struct stub_provider *sp = stub_provider_new();
	struct transport_config cfg;
	struct proto_events e, e2;
	struct proto_attr attr;
	struct ac_create mk = {0644, false};
	struct sbx_error err;
	struct transport *t;
	long long t0, ms;
	char boot[80], *p;

	th_give_to_exec_user(ag.root);
	stub_transport_config(&cfg, 5000, true);
	t = stub_transport_new(sp, &cfg);
	transport_test_set_connection(t, "s", ag.base, ag.token);
	sbx_error_clear(&err);
	ck_assert_int_eq(
		ac_events(t, "s", NULL, AC_EVENTS_NOW, 20000, &e, &err), 0);
	ck_assert(!e.lost);
	ck_assert_uint_eq(e.n, 0);
	strcpy(boot, e.boot_id);

	ck_assert_int_eq(transport_set_client_id(t, "not valid"), -EINVAL);
	ck_assert_int_eq(transport_set_client_id(t, "mount-9"), 0);
	ck_assert_int_eq(ac_write_range(t, "s", "c", 0, "abc", 3, &mk, NULL,
					&attr, &err),
			 0);
	p = ta_join(ag.root, "c");
	put(p, "d", O_APPEND);
	free(p);
	ck_assert_int_eq(ac_events(t, "s", boot, e.next, 0, &e2, &err), 0);
	ck_assert(!e2.lost);
	ck_assert_uint_eq(e2.n, 4);
	ck_assert_int_eq(e2.ev[0].type, PROTO_EV_CREATE);
	ck_assert_str_eq(e2.ev[0].path, "c");
	ck_assert_str_eq(e2.ev[0].by, "mount-9");
	ck_assert_int_eq(e2.ev[2].type, PROTO_EV_WRITE);
	ck_assert_str_eq(e2.ev[2].by, "mount-9");
	ck_assert_int_eq(e2.ev[3].type, PROTO_EV_WRITE);
	ck_assert_str_eq(e2.ev[3].by, "");
	proto_events_cleanup(&e2);

	/* no name: no by */
	ck_assert_int_eq(transport_set_client_id(t, NULL), 0);
	ck_assert_int_eq(
		ac_write_range(t, "s", "c", 0, "x", 1, NULL, NULL, NULL, &err),
		0);
	ck_assert_int_eq(ac_events(t, "s", boot, e.next + 4, 0, &e2, &err), 0);
	ck_assert_uint_eq(e2.n, 1);
	ck_assert_int_eq(e2.ev[0].type, PROTO_EV_WRITE);
	ck_assert_str_eq(e2.ev[0].by, "");
	proto_events_cleanup(&e2);

	/* an answer of another boot is lost, its events dropped */
	ck_assert_int_eq(
		ac_events(t, "s", "another-boot", e.next, 0, &e2, &err), 0);
	ck_assert(e2.lost);
	ck_assert_uint_eq(e2.n, 0);
	proto_events_cleanup(&e2);

	/* the wait is cut below the 5 s response deadline: an answer, not a
	 * timeout */
	t0 = th_now_ms();
	ck_assert_int_eq(ac_events(t, "s", boot, e.next + 5, 30000, &e2, &err),
			 0);
	ms = th_now_ms() - t0;
	ck_assert_msg(ms >= 3000 && ms < 5000, "answered after %lld ms", ms);
	ck_assert_uint_eq(e2.n, 0);
	proto_events_cleanup(&e2);
	proto_events_cleanup(&e);
	transport_free(t);
	stub_provider_free(sp);
}
END_TEST

/* ---- scale ------------------------------------------------------------------ */

static long rss_kb(pid_t pid)
{
	char path[64], *text, *line;
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	text = th_read_file(path, NULL);
	if (text == NULL)
		return -1;
	line = strstr(text, "VmRSS:");
	if (line != NULL)
		kb = strtol(line + 6, NULL, 10);
	free(text);
	return kb;
}

/*
 * An agent of its own, as nobody when the tests run as root: inotify
 * counts watches per user, and 100,000 of root's would leave little for
 * the agents other tests start meanwhile.
 */
static void start_unprivileged(struct th_agent *a)
{
	char portfile[512];
	int prog;

	ta_agent_dirs(a, "events-scale", portfile, sizeof(portfile));
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(a->dir, TA_NOBODY, TA_NOBODY), 0);
		ck_assert_int_eq(chown(a->root, TA_NOBODY, TA_NOBODY), 0);
	}
	prog = ta_agent_open();
	a->pid = fork();
	ck_assert(a->pid >= 0);
	if (a->pid == 0) {
		if (geteuid() == 0 &&
		    (setgroups(0, NULL) < 0 ||
		     setresgid(TA_NOBODY, TA_NOBODY, TA_NOBODY) < 0 ||
		     setresuid(TA_NOBODY, TA_NOBODY, TA_NOBODY) < 0))
			_exit(126);
		ta_agent_exec(a, portfile, prog);
	}
	close(prog);
	th_agent_await(a, portfile);
}

#define SCALE_TOP 100
#define SCALE_SUB 1000

START_TEST(scale_100k_directories)
{
	struct th_agent big;
	struct proto_events e;
	long rss0, rss1;
	long long ms;
	uint64_t since;
	char *p;
	int i, k;

	start_unprivileged(&big);
	for (i = 0; i < SCALE_TOP; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s/d%d", big.root, i);
		ck_assert_int_eq(mkdir(name, 0755), 0);
		for (k = 0; k < SCALE_SUB; k++) {
			snprintf(name, sizeof(name), "%s/d%d/s%d", big.root, i,
				 k);
			ck_assert_int_eq(mkdir(name, 0755), 0);
		}
	}
	rss0 = rss_kb(big.pid);
	/* no since, a long wait: the answer comes once all is watched */
	ms = get_events(&big, NULL, 30000, &e);
	rss1 = rss_kb(big.pid);
	ck_assert(!e.lost);
	since = e.next;
	proto_events_cleanup(&e);
	fprintf(stderr,
		"events scale: %d directories watched in %lld ms; agent RSS "
		"%ld kB before, %ld kB after\n",
		SCALE_TOP * SCALE_SUB + SCALE_TOP + 1, ms, rss0, rss1);
	/* the last directory is watched like the first */
	p = ta_join(big.root, "d99/s999/f");
	put(p, "x", 0);
	free(p);
	p = ta_join(big.root, "d0/s0/f");
	put(p, "x", 0);
	free(p);
	expect_events(&big, &since,
		      "create /d99/s999/f\nwrite /d99/s999/f\n"
		      "create /d0/s0/f\nwrite /d0/s0/f\n");
	th_agent_stop(&big);
}
END_TEST

void agent_events_cases(Suite *s)
{
	TCASE_TABLE(s, "wire", wire_setup, wire_teardown, 120,
		    wire_files_and_dirs, wire_new_tree_contents,
		    wire_exchange_and_replace, wire_moved_before_seen,
		    wire_long_poll, wire_refusals, wire_ring_lost,
		    wire_queue_overflow_lost, wire_by_client,
		    wire_strict_v1_and_health, wire_watch_limit,
		    wire_kernel_watch_limit, client_events);
	TCASE_TABLE(s, "scale", NULL, NULL, 300, scale_100k_directories);
}
