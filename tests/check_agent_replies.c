/* SPDX-License-Identifier: MIT */
/*
 * The agent's reply cache (doc/protocol-ext.md, "Idempotency keys"),
 * against a real sandbox-agent on loopback: a repeated key gets the first
 * answer back without running again; a repeat that comes while the first
 * runs waits for it, up to its bound; the key reused for another request is
 * refused; entries are bounded in number and bytes and expire; health
 * advertises the cache, and a strict v1 agent has none.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/http.h"
#include "common/proto.h"
#include "tests/check_suites.h"
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"

/* An agent (agent_helpers.h's box) with the reply cache as cache_spec
 * says (NULL: its defaults). */
static void box_start(struct ta_box *b, const char *cache_spec,
		      const char *const *extra)
{
	if (cache_spec != NULL)
		setenv("SANDBOX_AGENT_REPLY_CACHE", cache_spec, 1);
	else
		unsetenv("SANDBOX_AGENT_REPLY_CACHE");
	ta_box_start(b, extra);
}

/* A POST with a JSON body and, when key is set, an Idempotency-Key. */
static void post(struct ta_box *b, const char *path, const char *key,
		 const char *json, struct th_resp *r)
{
	char keyline[128], url[256];
	const char *h[4] = {b->a.auth, "Content-Type: application/json", NULL,
			    NULL};

	if (key != NULL) {
		snprintf(keyline, sizeof(keyline), "%s: %s",
			 PROTO_HDR_IDEMPOTENCY_KEY, key);
		h[2] = keyline;
	}
	snprintf(url, sizeof(url), "%s%s", b->a.base, path);
	th_http("POST", url, h, json, strlen(json), r);
}

static bool replayed(const struct th_resp *r)
{
	char *v = th_resp_header(r, PROTO_HDR_REPLAYED);
	bool yes = v != NULL && strcmp(v, "true") == 0;

	free(v);
	return yes;
}

static bool body_starts(const struct th_resp *r, const char *prefix)
{
	return r->body.data != NULL &&
	       strncmp(r->body.data, prefix, strlen(prefix)) == 0;
}

/* Whether an answer must be replayed from the cache or be a fresh run. */
enum replay { EITHER, FRESH, REPLAYED };

/* Post json under key to b's path, expect the status (0: any), how it was
 * answered and a body that starts with prefix (NULL: any), then free the
 * answer. */
static void post_expect(struct ta_box *b, const char *path, const char *key,
			const char *json, long status, enum replay how,
			const char *prefix)
{
	struct th_resp r;

	post(b, path, key, json, &r);
	if (status != 0)
		ck_assert_int_eq(r.status, status);
	if (how != EITHER)
		ck_assert(replayed(&r) == (how == REPLAYED));
	if (prefix != NULL)
		ck_assert(body_starts(&r, prefix));
	th_resp_cleanup(&r);
}

static void mkdir_json(char *out, size_t size, const char *path)
{
	snprintf(out, size, "{\"path\":\"%s\",\"mode\":493}", path);
}

/*
 * A keyed mkdir repeated: the second gets the first's status and body,
 * marked as replayed, and does not run (a third request under a new key
 * finds the directory there). Health advertises the cache.
 */
START_TEST(a_repeated_key_gets_the_first_answer)
{
	struct th_resp r1, r2, r3, h;
	struct ta_box b;
	char json[128], url[256];
	struct stat st;

	box_start(&b, NULL, NULL);
	ta_health_get(&b.a, "", &h);
	ck_assert_ptr_nonnull(strstr(h.body.data, "\"replyCache\":1"));
	th_resp_cleanup(&h);

	mkdir_json(json, sizeof(json), "d");
	post(&b, "/sandboxfs/v1/mkdir", "key-1", json, &r1);
	ck_assert_int_eq(r1.status, 200);
	ck_assert(!replayed(&r1));
	post(&b, "/sandboxfs/v1/mkdir", "key-1", json, &r2);
	ck_assert_int_eq(r2.status, 200);
	ck_assert(replayed(&r2));
	ck_assert_uint_eq(r2.body.len, r1.body.len);
	ck_assert_mem_eq(r2.body.data, r1.body.data, r1.body.len);
	post(&b, "/sandboxfs/v1/mkdir", "key-2", json, &r3);
	ck_assert_int_eq(r3.status, 409);
	ck_assert(body_starts(&r3, "FS_ERROR: EEXIST"));
	snprintf(url, sizeof(url), "%s/d", b.root);
	ck_assert_int_eq(stat(url, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	th_resp_cleanup(&r1);
	th_resp_cleanup(&r2);
	th_resp_cleanup(&r3);

	/* A refusal is an answer too: kept and given back. */
	post(&b, "/sandboxfs/v1/mkdir", "key-2", json, &r1);
	ck_assert_int_eq(r1.status, 409);
	ck_assert(replayed(&r1));
	ck_assert(body_starts(&r1, "FS_ERROR: EEXIST"));
	th_resp_cleanup(&r1);

	/* A GET ignores the header. */
	ta_box_stop(&b);
}
END_TEST

/*
 * The key used for another request (another body, another path) is
 * refused with 422 IDEMPOTENCY_KEY_REUSED and nothing runs; a key the
 * agent cannot take is 400.
 */
START_TEST(a_key_reused_for_another_request_is_refused)
{
	struct ta_box b;
	char json[128], path[256];
	struct stat st;

	box_start(&b, NULL, NULL);
	mkdir_json(json, sizeof(json), "a");
	post_expect(&b, "/sandboxfs/v1/mkdir", "same", json, 200, EITHER, NULL);
	mkdir_json(json, sizeof(json), "b");
	post_expect(&b, "/sandboxfs/v1/mkdir", "same", json, 422, EITHER,
		    PROTO_ERR_KEY_REUSED ": ");
	snprintf(path, sizeof(path), "%s/b", b.root);
	ck_assert_int_lt(stat(path, &st), 0);
	post_expect(&b, "/sandboxfs/v1/rmdir", "same", "{\"path\":\"a\"}", 422,
		    EITHER, NULL);
	snprintf(path, sizeof(path), "%s/a", b.root);
	ck_assert_int_eq(stat(path, &st), 0);

	post_expect(&b, "/sandboxfs/v1/mkdir", "no spaces", json, 400, EITHER,
		    PROTO_ERR_REQUEST_INVALID ": ");
	ta_box_stop(&b);
}
END_TEST

struct exec_call {
	struct ta_box *b;
	const char *key;
	const char *json;
	struct th_resp r;
	long long elapsed;
};

static void *exec_main(void *arg)
{
	struct exec_call *c = arg;
	long long t0 = th_now_ms();

	post(c->b, "/v1/exec", c->key, c->json, &c->r);
	c->elapsed = th_now_ms() - t0;
	return NULL;
}

/* Two deliveries c1 and c2 of json under key to b: c1 is posted from the
 * thread returned, which has had 300 ms to start it; c2 is the caller's
 * to post. */
static pthread_t first_of_two(struct exec_call *c1, struct exec_call *c2,
			      struct ta_box *b, const char *key,
			      const char *json)
{
	pthread_t t;

	memset(c1, 0, sizeof(*c1));
	memset(c2, 0, sizeof(*c2));
	c1->b = c2->b = b;
	c1->key = c2->key = key;
	c1->json = c2->json = json;
	ck_assert_int_eq(pthread_create(&t, NULL, exec_main, c1), 0);
	usleep(300 * 1000);
	return t;
}

static unsigned lines_in(const char *path)
{
	size_t len = 0, i;
	unsigned n = 0;
	char *text = th_read_file(path, &len);

	for (i = 0; text != NULL && i < len; i++)
		n += text[i] == '\n';
	free(text);
	return n;
}

/* The command that appends to b's root/runs has run n times. */
static void expect_runs(const struct ta_box *b, unsigned n)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/runs", b->root);
	ck_assert_uint_eq(lines_in(path), n);
}

/* The two deliveries c1 and c2 to b ran the command once; their answers
 * are freed and b is stopped. */
static void ran_once_then_stop(struct ta_box *b, struct exec_call *c1,
			       struct exec_call *c2)
{
	expect_runs(b, 1);
	th_resp_cleanup(&c1->r);
	th_resp_cleanup(&c2->r);
	ta_box_stop(b);
}

/*
 * Two deliveries of one keyed command, the second while the first runs
 * (a second and a half): the second waits and gets the same output
 * stream, replayed; the command ran once.
 */
START_TEST(a_repeat_during_the_first_run_waits_for_it)
{
	static const char json[] =
		"{\"command\":[\"sh\",\"-c\",\"echo run >> runs; sleep 1.5; "
		"echo finished\"],\"timeoutMs\":20000}";
	struct exec_call c1, c2;
	pthread_t t1, t2;
	struct ta_box b;

	box_start(&b, NULL, NULL);
	t1 = first_of_two(&c1, &c2, &b, "exec-1", json);
	ck_assert_int_eq(pthread_create(&t2, NULL, exec_main, &c2), 0);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);

	ck_assert_int_eq(c1.r.status, 200);
	ck_assert_int_eq(c2.r.status, 200);
	ck_assert(!replayed(&c1.r));
	ck_assert(replayed(&c2.r));
	ck_assert_uint_eq(c1.r.body.len, c2.r.body.len);
	ck_assert_mem_eq(c1.r.body.data, c2.r.body.data, c1.r.body.len);
	ck_assert_ptr_nonnull(strstr(c2.r.body.data, "\"t\":\"exit\""));
	ck_assert_msg(c2.elapsed >= 900, "%lld ms", c2.elapsed);
	ran_once_then_stop(&b, &c1, &c2);
}
END_TEST

/*
 * A repeat waits at most wait_ms (here 500 ms, checked about once a
 * second) and then hears 409 REQUEST_IN_PROGRESS; the first run goes on
 * and is not repeated.
 */
START_TEST(a_repeat_waits_no_longer_than_its_bound)
{
	static const char json[] =
		"{\"command\":[\"sh\",\"-c\",\"echo run >> runs; sleep 4\"],"
		"\"timeoutMs\":20000}";
	struct exec_call c1, c2;
	pthread_t t1;
	struct ta_box b;

	box_start(&b, "wait=500", NULL);
	t1 = first_of_two(&c1, &c2, &b, "exec-2", json);
	exec_main(&c2);
	ck_assert_int_eq(c2.r.status, 409);
	ck_assert(body_starts(&c2.r, PROTO_ERR_IN_PROGRESS ": "));
	ck_assert_msg(c2.elapsed >= 400 && c2.elapsed < 3000, "%lld ms",
		      c2.elapsed);
	pthread_join(t1, NULL);
	ck_assert_int_eq(c1.r.status, 200);
	ran_once_then_stop(&b, &c1, &c2);
}
END_TEST

/*
 * Bounds: with room for two entries, the oldest of three is forgotten (its
 * key runs again, and finds its directory there); an answer over the
 * per-entry bound is remembered as run but not kept (409 REPLY_NOT_KEPT,
 * and nothing runs again).
 */
START_TEST(entries_are_bounded_in_number_and_bytes)
{
	struct th_resp r;
	struct ta_box b;
	char json[128];

	box_start(&b, "entries=2,entry=64", NULL);
	post_expect(&b, "/sandboxfs/v1/unlink", "k1", "{\"path\":\"x\"}", 404,
		    EITHER, NULL);
	post_expect(&b, "/sandboxfs/v1/unlink", "k2", "{\"path\":\"y\"}", 0,
		    EITHER, NULL);
	post_expect(&b, "/sandboxfs/v1/unlink", "k3", "{\"path\":\"z\"}", 0,
		    EITHER, NULL);
	/* k3 is still kept: replayed. */
	post_expect(&b, "/sandboxfs/v1/unlink", "k3", "{\"path\":\"z\"}", 0,
		    REPLAYED, NULL);
	/* k1 was forgotten: it runs again (not replayed). */
	post_expect(&b, "/sandboxfs/v1/unlink", "k1", "{\"path\":\"x\"}", 404,
		    FRESH, NULL);

	/* An attribute answer is well over 64 bytes. */
	mkdir_json(json, sizeof(json), "big");
	post(&b, "/sandboxfs/v1/mkdir", "k4", json, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_gt(r.body.len, 64);
	th_resp_cleanup(&r);
	post_expect(&b, "/sandboxfs/v1/mkdir", "k4", json, 409, EITHER,
		    PROTO_ERR_REPLY_NOT_KEPT ": ");
	ta_box_stop(&b);
}
END_TEST

/* A finished entry expires (ttl 300 ms): its key then runs again. */
START_TEST(entries_expire)
{
	struct ta_box b;
	char json[128];

	box_start(&b, "ttl=300", NULL);
	mkdir_json(json, sizeof(json), "e");
	post_expect(&b, "/sandboxfs/v1/mkdir", "k", json, 200, EITHER, NULL);
	post_expect(&b, "/sandboxfs/v1/mkdir", "k", json, 200, REPLAYED, NULL);
	usleep(2500 * 1000);
	post_expect(&b, "/sandboxfs/v1/mkdir", "k", json, 409, FRESH,
		    "FS_ERROR: EEXIST");
	ta_box_stop(&b);
}
END_TEST

/*
 * A strict v1 agent (alien's protocol exactly) has no reply cache: health
 * does not advertise it, and a repeated key runs the command again.
 */
START_TEST(strict_v1_has_no_reply_cache)
{
	static const char *const strict[] = {"--strict-v1", NULL};
	static const char json[] =
		"{\"command\":[\"sh\",\"-c\",\"echo run >> runs\"],"
		"\"timeoutMs\":20000}";
	struct th_resp h;
	struct ta_box b;

	box_start(&b, NULL, strict);
	ta_health_get(&b.a, "", &h);
	ck_assert_ptr_null(strstr(h.body.data, "replyCache"));
	th_resp_cleanup(&h);
	post_expect(&b, "/v1/exec", "k", json, 200, EITHER, NULL);
	post_expect(&b, "/v1/exec", "k", json, 200, FRESH, NULL);
	expect_runs(&b, 2);
	ta_box_stop(&b);
}
END_TEST

/* The knob's syntax. */
START_TEST(reply_cache_limits_parse)
{
	struct agent_reply_cache_limits l;

	agent_reply_cache_defaults(&l);
	ck_assert_uint_eq(l.entries, 4096);
	ck_assert_uint_eq(l.bytes, 16UL * 1024 * 1024);
	ck_assert_int_eq(agent_reply_cache_parse("entries=2,ttl=300", &l), 0);
	ck_assert_uint_eq(l.entries, 2);
	ck_assert_int_eq(l.ttl_ms, 300);
	ck_assert_uint_eq(l.bytes, 16UL * 1024 * 1024);
	ck_assert_int_eq(agent_reply_cache_parse("wait=1,entry=9,bytes=7", &l),
			 0);
	ck_assert_int_eq(l.wait_ms, 1);
	ck_assert_uint_eq(l.entry, 9);
	ck_assert_uint_eq(l.bytes, 7);
	ck_assert_int_eq(agent_reply_cache_parse("entries", &l), -EINVAL);
	ck_assert_int_eq(agent_reply_cache_parse("size=3", &l), -EINVAL);
	ck_assert_int_eq(agent_reply_cache_parse("ttl=x", &l), -EINVAL);
	ck_assert_int_eq(agent_reply_cache_parse("ttl=1,", &l), 0);
	ck_assert_uint_eq(l.entries, 2);
}
END_TEST

void agent_replies_cases(Suite *s)
{
	TCASE_TABLE(s, "reply_cache", NULL, NULL, 60,
		    a_repeated_key_gets_the_first_answer,
		    a_key_reused_for_another_request_is_refused,
		    a_repeat_during_the_first_run_waits_for_it,
		    a_repeat_waits_no_longer_than_its_bound,
		    entries_are_bounded_in_number_and_bytes, entries_expire,
		    strict_v1_has_no_reply_cache, reply_cache_limits_parse);
}
