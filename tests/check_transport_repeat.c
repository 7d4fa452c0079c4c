/* SPDX-License-Identifier: MIT */
/*
 * What reaches an agent twice (doc/transport-rules.md 8). A test agent
 * that closes a connection right after reading a request, before any
 * answer byte, counts each delivery: a request safe to repeat may be
 * delivered twice (libcurl sends it again on a new connection); a change
 * or a command is delivered exactly once when the agent keeps no reply
 * cache, and its caller learns that the outcome is not known, never a
 * success; with a reply cache advertised in health, the request carries an
 * Idempotency-Key, may be delivered twice, runs once, and the caller gets
 * the true outcome, whether libcurl or the transport asked again. A TLS
 * handshake failure counts as undelivered (refresh and one replay), and
 * transport_http keeps the same rule for a provider's calls and takes its
 * proxy from the environment.
 *
 * Everything runs on loopback against stub_agent and stub_provider.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/proto.h"
#include "client/agent_client.h"
#include "client/sbx_error.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"
#include "tests/transport_helpers.h"
#include "client/transport.h"

#define MAX_IDS 16

/*
 * The test agent. Requests name an id ("?id=N"); every delivery of one is
 * counted. It drops (closes the connection without answering, after
 * "running" it) the first delivery of each id when drop_first is set. With
 * cache set it advertises a reply cache and keeps each keyed request's
 * answer: a repeated key is answered from there without running again.
 */
struct dropper {
	pthread_mutex_t mu;
	bool cache;
	bool drop_first;
	bool health_closes; /* "Connection: close" on health answers */
	const char *keyed_answer; /* instead of the kept one, when set */
	unsigned deliveries[MAX_IDS];
	unsigned runs[MAX_IDS];
	unsigned keyed[MAX_IDS]; /* deliveries that carried a key */
	char keys[MAX_IDS][PROTO_KEY_MAX + 8];
};

static enum stub_next dropper_handler(struct stub_agent *s,
				      const struct stub_req *req, int fd,
				      void *arg)
{
	struct dropper *d = arg;
	const char *q = strstr(req->target, "id=");
	char key[PROTO_KEY_MAX + 8], body[32];
	bool has_key, replay = false, drop;
	unsigned id = 0;

	(void)s;
	if (tt_is(req, "POST", "/v1/activate"))
		return tt_answered(stub_reply(fd, 204, NULL, NULL));
	if (tt_is(req, "GET", "/v1/health")) {
		char json[256];

		snprintf(json, sizeof(json),
			 "{\"protocolVersion\":1,\"status\":\"ready\","
			 "\"imageCommand\":{\"status\":\"running\"},"
			 "\"extensions\":{\"files\":4%s}}",
			 d->cache ? ",\"replyCache\":1" : "");
		if (stub_reply_head(fd, 200, "application/json",
				    (long long)strlen(json),
				    d->health_closes ? "Connection: close\r\n"
						     : NULL) != 0 ||
		    stub_send(fd, json, strlen(json)) != 0)
			return STUB_CLOSE;
		return d->health_closes ? STUB_CLOSE : STUB_KEEP_OPEN;
	}
	if (q == NULL || sscanf(q + 3, "%u", &id) != 1 || id >= MAX_IDS)
		return tt_answered(stub_reply(fd, 200, TT_TEXT, "warm"));
	has_key = tt_header(req, PROTO_HDR_IDEMPOTENCY_KEY, key, sizeof(key));
	pthread_mutex_lock(&d->mu);
	d->deliveries[id]++;
	if (has_key) {
		d->keyed[id]++;
		if (d->cache && d->keys[id][0] != '\0' &&
		    strcmp(d->keys[id], key) == 0)
			replay = true;
		else
			snprintf(d->keys[id], sizeof(d->keys[id]), "%s", key);
	}
	if (!replay)
		d->runs[id]++;
	drop = d->drop_first && d->deliveries[id] == 1;
	pthread_mutex_unlock(&d->mu);
	if (drop)
		return STUB_CLOSE;
	if (replay && d->keyed_answer != NULL)
		return tt_answered(
			stub_reply(fd, 409, TT_TEXT, d->keyed_answer));
	snprintf(body, sizeof(body), "done %u", id);
	if (replay) {
		if (stub_reply_head(fd, 200, TT_TEXT, (long long)strlen(body),
				    PROTO_HDR_REPLAYED ": true\r\n") != 0 ||
		    stub_send(fd, body, strlen(body)) != 0)
			return STUB_CLOSE;
		return STUB_KEEP_OPEN;
	}
	return tt_answered(stub_reply(fd, 200, TT_TEXT, body));
}

static unsigned count_of(struct dropper *d, const unsigned *field)
{
	return th_locked_uint(&d->mu, field);
}

static int send_id(struct transport *t, enum transport_class cls, unsigned id,
		   struct transport_resp *resp, struct sbx_error *err)
{
	char path[64];

	snprintf(path, sizeof(path), "/v1/thing?id=%u", id);
	if (cls == TRANSPORT_SAFE)
		return tt_get(t, path, resp, err);
	return tt_send(t, "POST", path,
		       cls == TRANSPORT_COMMAND ? TRANSPORT_OP_EXEC
						: TRANSPORT_OP_FILES,
		       cls, "{\"command\":[\"true\"],\"timeoutMs\":5000}", resp,
		       err);
}

/* Health through the transport: the connection learns whether the agent
 * keeps a reply cache (and is kept alive for what follows). */
static void health(struct transport *t)
{
	struct transport_req req;
	struct transport_resp resp;
	struct sbx_error err;
	int rc;

	tt_req_init(&req, "GET", "/v1/health?version=1", TRANSPORT_OP_HEALTH,
		    TRANSPORT_SAFE);
	req.max_body = 4096;
	rc = tt_send_req(t, &req, &resp, NULL, &err);
	ck_assert_msg(rc == 0, "health: %d %s", rc, err.reason);
	transport_resp_cleanup(&resp);
}

static const char *class_name(enum transport_class cls)
{
	return cls == TRANSPORT_SAFE	 ? "safe"
	       : cls == TRANSPORT_CHANGE ? "change"
					 : "command";
}

/* The classes that are not safe to repeat. */
static const enum transport_class unsafe_classes[] = {TRANSPORT_CHANGE,
						      TRANSPORT_COMMAND};

/* Send id as cls: it must succeed with "done <id>", the answer of its
 * run. Whether the answer came from the reply cache is returned. */
static bool send_done(struct transport *t, enum transport_class cls,
		      unsigned id)
{
	struct transport_resp resp;
	struct sbx_error err;
	char want[32];
	bool replayed;
	int rc;

	rc = send_id(t, cls, id, &resp, &err);
	ck_assert_msg(rc == 0, "%s: %d %s", class_name(cls), rc, err.reason);
	snprintf(want, sizeof(want), "done %u", id);
	ck_assert_str_eq(resp.body.data, want);
	replayed = resp.replayed;
	transport_resp_cleanup(&resp);
	return replayed;
}

/*
 * Run scenario once for each of the n classes, each time against a fresh
 * dropper set as init says and a transport connected to it (a
 * five-second response deadline).
 */
static void each_class(const enum transport_class *classes, size_t n,
		       const struct dropper *init,
		       void (*scenario)(struct tt_env *e, struct dropper *d,
					enum transport_class cls))
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct dropper d = *init;
		struct tt_env e;

		pthread_mutex_init(&d.mu, NULL);
		tt_env_start(&e, dropper_handler, &d, 5000, TT_CONNECTED);
		scenario(&e, &d, classes[i]);
		tt_env_stop(&e);
		pthread_mutex_destroy(&d.mu);
	}
}

/* How a request of an unsafe class fails when its outcome is not known:
 * unreachable for a change, outcome unknown for a command. */
static const char *unsafe_failure(enum transport_class cls)
{
	return cls == TRANSPORT_COMMAND ? "SANDBOX_OUTCOME_UNKNOWN"
					: "SANDBOX_UNREACHABLE";
}

static void dropped_without_cache(struct tt_env *e, struct dropper *d,
				  enum transport_class cls)
{
	struct transport_resp resp;
	struct sbx_error err;
	unsigned accepts;
	int rc;

	health(e->t);
	accepts = stub_agent_accepts(e->s);
	ck_assert_uint_eq(accepts, 1);
	rc = send_id(e->t, cls, 1, &resp, &err);
	if (cls == TRANSPORT_SAFE) {
		ck_assert_msg(rc == 0, "%s: %d %s", class_name(cls), rc,
			      err.reason);
		ck_assert_str_eq(resp.body.data, "done 1");
		ck_assert_uint_eq(count_of(d, &d->deliveries[1]), 2);
	} else {
		ck_assert_msg(rc < 0, "%s: a dropped request succeeded",
			      class_name(cls));
		ck_assert_str_eq(sbx_code_name(err.code), unsafe_failure(cls));
		ck_assert_uint_eq(count_of(d, &d->deliveries[1]), 1);
		ck_assert_uint_eq(count_of(d, &d->keyed[1]), 0);
		/* Not the kept-alive connection: a fresh one. */
		ck_assert_uint_eq(stub_agent_accepts(e->s), accepts + 1);
	}
	transport_resp_cleanup(&resp);
}

/*
 * For each class, against an agent without a reply cache: the connection
 * is kept alive by a health request, then the agent drops the first
 * delivery of the request. A read is delivered twice and succeeds; a
 * change or a command went on a fresh connection, is delivered once, and
 * fails as unreachable (change) or outcome unknown (command).
 */
START_TEST(without_a_reply_cache_nothing_unsafe_is_sent_twice)
{
	static const enum transport_class classes[] = {
		TRANSPORT_SAFE, TRANSPORT_CHANGE, TRANSPORT_COMMAND};
	const struct dropper init = {.drop_first = true};

	each_class(classes, 3, &init, dropped_without_cache);
}
END_TEST

static void resent_with_key(struct tt_env *e, struct dropper *d,
			    enum transport_class cls)
{
	struct transport_resp resp;
	struct sbx_error err;
	int rc;

	health(e->t);

	/* Undisturbed: keyed, on the same connection. */
	rc = send_id(e->t, cls, 1, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(count_of(d, &d->keyed[1]), 1);
	ck_assert_uint_eq(stub_agent_accepts(e->s), 1);

	/* The first delivery dropped on the kept-alive connection. */
	pthread_mutex_lock(&d->mu);
	d->drop_first = true;
	pthread_mutex_unlock(&d->mu);
	ck_assert(send_done(e->t, cls, 2));
	ck_assert_uint_eq(count_of(d, &d->deliveries[2]), 2);
	ck_assert_uint_eq(count_of(d, &d->keyed[2]), 2);
	ck_assert_uint_eq(count_of(d, &d->runs[2]), 1);
}

/*
 * With the reply cache advertised, a change and a command carry a key
 * and use the kept-alive connection; the agent drops their first delivery
 * and libcurl sends them again: delivered twice, run once, and the caller
 * gets the answer the first run produced.
 */
START_TEST(keyed_requests_survive_a_silent_resend)
{
	const struct dropper init = {.cache = true};

	each_class(unsafe_classes, 2, &init, resent_with_key);
}
END_TEST

static void asked_again(struct tt_env *e, struct dropper *d,
			enum transport_class cls)
{
	struct transport_resp resp;
	struct sbx_error err;
	char url[256];
	int rc;

	stub_provider_never(e->sp, STUB_CALL_ROUTE);
	health(e->t);
	ck_assert(send_done(e->t, cls, 3));
	ck_assert_uint_eq(count_of(d, &d->deliveries[3]), 2);
	ck_assert_uint_eq(count_of(d, &d->runs[3]), 1);

	/* The agent cannot tell: still unknown, route kept. */
	health(e->t);
	pthread_mutex_lock(&d->mu);
	d->keyed_answer = PROTO_ERR_IN_PROGRESS
		": the first request with this key is still running";
	pthread_mutex_unlock(&d->mu);
	rc = send_id(e->t, cls, 4, &resp, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(sbx_code_name(err.code), unsafe_failure(cls));
	ck_assert_ptr_nonnull(strstr(err.reason, PROTO_ERR_IN_PROGRESS));
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(count_of(d, &d->runs[4]), 1);
	ck_assert(
		transport_test_cached_url(e->t, TT_SESSION, url, sizeof(url)));
	ck_assert_uint_eq(stub_provider_unexpected(e->sp), 0);
}

/*
 * With the reply cache advertised and no kept-alive connection to reuse
 * (the agent closes after each health answer), the first delivery goes on
 * a fresh connection, which libcurl never retries; the transport asks
 * once more with the same key and learns the true outcome. When the agent
 * says the first attempt is still running, the outcome stays unknown for a
 * command (unreachable for a change), and the route is kept.
 */
START_TEST(the_transport_asks_again_under_the_same_key)
{
	const struct dropper init = {
		.cache = true, .drop_first = true, .health_closes = true};

	each_class(unsafe_classes, 2, &init, asked_again);
}
END_TEST

/* ---- TLS ------------------------------------------------------------------ */

/* A loopback listener that answers every connection with plain text and
 * closes it: a TLS client's handshake fails on it. */
struct plain_server {
	struct th_listener l;
	pthread_mutex_t mu;
	unsigned accepts;
	bool stop;
};

static void *plain_main(void *arg)
{
	struct plain_server *p = arg;
	static const char junk[] = "HTTP/1.1 400 Bad Request\r\n"
				   "Content-Length: 0\r\n\r\n";

	for (;;) {
		int c = accept(p->l.fd, NULL, NULL);

		if (c < 0)
			break;
		pthread_mutex_lock(&p->mu);
		p->accepts++;
		pthread_mutex_unlock(&p->mu);
		if (write(c, junk, sizeof(junk) - 1) < 0)
			(void)0;
		close(c);
	}
	return NULL;
}

static void plain_start(struct plain_server *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	th_listener_start(&p->l, plain_main, p);
}

/*
 * A cached route whose TLS handshake fails (the peer does not speak TLS)
 * cannot have received the request: like a refused connection, it is
 * refreshed and the command replayed once on the fresh route, where it
 * runs once and succeeds.
 */
START_TEST(tls_handshake_failure_refreshes_and_replays)
{
	struct dropper d = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct plain_server plain;
	char stale[64];

	plain_start(&plain);
	tt_env_start(&e, dropper_handler, &d, 5000, TT_ROUTED);
	snprintf(stale, sizeof(stale), "https://127.0.0.1:%u/", plain.l.port);
	transport_test_set_connection(e.t, TT_SESSION, stale, tt_cred(7));

	send_done(e.t, TRANSPORT_COMMAND, 5);
	ck_assert_uint_eq(count_of(&d, &d.deliveries[5]), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_ROUTE), 1);
	ck_assert_uint_eq(stub_provider_calls(e.sp, STUB_CALL_CREDENTIAL), 1);
	pthread_mutex_lock(&plain.mu);
	ck_assert_uint_ge(plain.accepts, 1);
	pthread_mutex_unlock(&plain.mu);

	transport_free(e.t);
	stub_agent_stop(e.s);
	th_listener_stop(&plain.l);
	stub_provider_free(e.sp);
}
END_TEST

/* ---- transport_http --------------------------------------------------------- */

/*
 * A provider's calls follow the same rule: after a GET kept a connection
 * alive, a POST (a resume, a command) goes on a fresh connection, so the
 * server dropping its first delivery makes it fail, never run twice; a
 * GET dropped the same way is sent again and succeeds.
 */
START_TEST(transport_http_never_sends_a_post_twice)
{
	struct dropper d = {.mu = PTHREAD_MUTEX_INITIALIZER,
			    .drop_first = true};
	struct transport_http_req hr;
	struct transport_resp resp;
	struct stub_agent *s;
	struct sbx_error err;
	char url[256];
	int rc;

	s = stub_agent_start(dropper_handler, &d);
	snprintf(url, sizeof(url), "%swarm", stub_agent_url(s));
	tt_http_req(&hr, "GET", url, NULL);
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	transport_resp_cleanup(&resp);

	snprintf(url, sizeof(url), "%sthing?id=6", stub_agent_url(s));
	tt_http_req(&hr, "POST", url, "{}");
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_int_lt(rc, 0);
	transport_resp_cleanup(&resp);
	ck_assert_uint_eq(count_of(&d, &d.deliveries[6]), 1);

	snprintf(url, sizeof(url), "%sthing?id=7", stub_agent_url(s));
	tt_http_req(&hr, "GET", url, NULL);
	rc = tt_http_send(&hr, &resp, &err);
	/* Whether the GET found a kept-alive connection depends on the
	 * shared pool; either way it succeeds, delivered once or twice. */
	if (rc < 0)
		ck_assert_uint_eq(count_of(&d, &d.deliveries[7]), 1);
	else
		ck_assert_str_eq(resp.body.data, "done 7");
	transport_resp_cleanup(&resp);

	stub_agent_stop(s);
}
END_TEST

/* A forward proxy: records the absolute targets it is asked for. */
struct proxy_seen {
	pthread_mutex_t mu;
	unsigned requests;
	char target[2048];
};

static enum stub_next proxy_handler(struct stub_agent *s,
				    const struct stub_req *req, int fd,
				    void *arg)
{
	struct proxy_seen *p = arg;

	(void)s;
	pthread_mutex_lock(&p->mu);
	p->requests++;
	snprintf(p->target, sizeof(p->target), "%s", req->target);
	pthread_mutex_unlock(&p->mu);
	return tt_answered(stub_reply(fd, 200, TT_TEXT, "via proxy"));
}

/*
 * transport_http takes its proxy from the environment (http_proxy here,
 * the Azure SDKs' behaviour) and honours NO_PROXY; an agent request never
 * goes through a proxy, whatever the environment says.
 */
START_TEST(provider_requests_use_the_environment_proxy_agents_never)
{
	struct proxy_seen p = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct dropper d = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct tt_env e;
	struct transport_http_req hr;
	struct transport_resp resp;
	struct stub_agent *proxy, *agent;
	struct sbx_error err;
	char env[128], url[256];
	int rc;

	proxy = stub_agent_start(proxy_handler, &p);
	agent = stub_agent_start(dropper_handler, &d);
	snprintf(env, sizeof(env), "http://127.0.0.1:%u",
		 stub_agent_port(proxy));
	setenv("http_proxy", env, 1);
	unsetenv("no_proxy");
	unsetenv("NO_PROXY");

	snprintf(url, sizeof(url), "%sthing?id=9", stub_agent_url(agent));
	tt_http_req(&hr, "GET", url, NULL);
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_str_eq(resp.body.data, "via proxy");
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&p.mu);
	ck_assert_uint_eq(p.requests, 1);
	ck_assert_str_eq(p.target, url);
	pthread_mutex_unlock(&p.mu);
	ck_assert_uint_eq(count_of(&d, &d.deliveries[9]), 0);

	/* NO_PROXY names the host: reached directly. */
	setenv("no_proxy", "127.0.0.1", 1);
	rc = tt_http_send(&hr, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_str_eq(resp.body.data, "done 9");
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&p.mu);
	ck_assert_uint_eq(p.requests, 1);
	pthread_mutex_unlock(&p.mu);
	unsetenv("no_proxy");

	/* The agent is reached directly. */
	tt_env_start(&e, NULL, NULL, 5000, 0);
	transport_test_set_connection(e.t, TT_SESSION, stub_agent_url(agent),
				      tt_cred(7));
	rc = send_id(e.t, TRANSPORT_SAFE, 8, &resp, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.reason);
	ck_assert_str_eq(resp.body.data, "done 8");
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&p.mu);
	ck_assert_uint_eq(p.requests, 1);
	pthread_mutex_unlock(&p.mu);

	unsetenv("http_proxy");
	transport_free(e.t);
	stub_agent_stop(agent);
	stub_agent_stop(proxy);
	stub_provider_free(e.sp);
}
END_TEST

/* A ranged read whose first answer ends before its length (the agent's
 * file shrank under it) and whose second is whole. */
static enum stub_next cut_handler(struct stub_agent *s,
				  const struct stub_req *req, int fd, void *arg)
{
	static const char head[] =
		"HTTP/1.1 206 Partial Content\r\n"
		"Content-Type: application/octet-stream\r\n"
		"Content-Range: bytes 0-99/100\r\n"
		"X-Sandboxfs-Size: 100\r\n"
		"ETag: \"v1\"\r\nContent-Length: 100\r\n\r\n";
	unsigned *reads = arg, n;
	char body[100];

	(void)s;
	n = strncmp(req->path, "/sandboxfs/v1/read", 18) == 0
		    ? __atomic_add_fetch(reads, 1, __ATOMIC_SEQ_CST)
		    : 0;
	memset(body, 'b', sizeof(body));
	if (write(fd, head, sizeof(head) - 1) < 0 ||
	    write(fd, body, n == 1 ? 10 : sizeof(body)) < 0)
		return STUB_CLOSE;
	return n == 1 ? STUB_CLOSE : STUB_KEEP_OPEN;
}

/* A safe read whose answer was cut off is asked once more (it cannot
 * have changed anything), and the reader gets the whole range. */
START_TEST(a_read_cut_off_is_asked_again)
{
	char buf[100], want[100], etag[PROTO_ETAG_MAX];
	struct sbx_error err;
	struct tt_env e;
	unsigned reads = 0;
	uint64_t size = 0;
	size_t got = 0;

	memset(want, 'b', sizeof(want));
	tt_env_start(&e, cut_handler, &reads, 2000, TT_ROUTED | TT_CONNECTED);
	sbx_error_clear(&err);
	ck_assert_int_eq(ac_read_range(e.t, TT_SESSION, "f", 0, sizeof(buf),
				       NULL, buf, &got, etag, &size, &err),
			 0);
	ck_assert_uint_eq(got, sizeof(buf));
	ck_assert(memcmp(buf, want, sizeof(buf)) == 0);
	ck_assert_uint_eq(size, 100);
	tt_env_stop(&e);
	ck_assert_uint_eq(reads, 2);
}
END_TEST

void transport_repeat_cases(Suite *s)
{
	TCASE_TABLE(s, "repeats", NULL, NULL, 60,
		    without_a_reply_cache_nothing_unsafe_is_sent_twice,
		    keyed_requests_survive_a_silent_resend,
		    the_transport_asks_again_under_the_same_key,
		    tls_handshake_failure_refreshes_and_replays,
		    transport_http_never_sends_a_post_twice,
		    provider_requests_use_the_environment_proxy_agents_never,
		    a_read_cut_off_is_asked_again);
}
