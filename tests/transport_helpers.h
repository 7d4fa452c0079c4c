/* SPDX-License-Identifier: MIT */
/*
 * transport_helpers: what the transport suites share (check_transport*.c
 * and check_azure*.c): the stub agent's usual answers, a transport over a
 * stub provider and a stub agent set up and torn down in one call, and
 * the assertions every scenario ends with. The sandbox is always
 * TT_SESSION, as in the seed.
 *
 * Handlers here run on the stub agent's threads and assert nothing
 * (stub_agent.h); the tt_assert_* functions run on the test's thread.
 */
#ifndef SBFS_TEST_TRANSPORT_HELPERS_H
#define SBFS_TEST_TRANSPORT_HELPERS_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "client/sbx_error.h"
#include "client/transport.h"
#include "tests/stub_agent.h"
#include "tests/stub_provider.h"

#define TT_SESSION "session"
#define TT_TEXT "text/plain; charset=utf-8"

/* The credential of generation g (stub_provider_credential_for), in one
 * of four rotating buffers of the calling thread. */
const char *tt_cred(unsigned g);

/* ---- the stub agent's side ----------------------------------------------- */

bool tt_is(const struct stub_req *req, const char *method, const char *path);
/* After a reply: keep the connection when it went out, else close. */
enum stub_next tt_answered(int rc);
/* What an agent answers for a route it does not have: an untyped 404. */
enum stub_next tt_no_route(int fd);
/* The value of header name in a request's raw header block, into out. */
bool tt_header(const struct stub_req *req, const char *name, char *out,
	       size_t size);

/* Reads the request and never answers (until the stub stops). */
stub_handler_fn tt_silent_handler;

/* An agent whose GET /v1/health answers 200 with answer (JSON) and
 * counts the polls; anything else gets a 204. */
struct tt_health {
	pthread_mutex_t mu;
	const char *answer;
	unsigned polls;
};

stub_handler_fn tt_health_handler; /* arg: struct tt_health */

/* An agent whose POST /v1/activate answers 204 and whose other routes
 * answer 200 with body, of content type type; it counts the activations
 * and every request. */
struct tt_counting {
	pthread_mutex_t mu;
	const char *type, *body;
	unsigned activations;
	unsigned requests;
};

stub_handler_fn tt_counting_handler; /* arg: struct tt_counting */

/* A 200 whose body trickles: bytes bytes, one each gap_ms. */
struct tt_trickle {
	int bytes;
	long gap_ms;
};

stub_handler_fn tt_trickle_handler; /* arg: struct tt_trickle */

/* ---- the client's side ---------------------------------------------------- */

/* A request of class cls with a 64 KiB answer bound. */
void tt_req_init(struct transport_req *req, const char *method,
		 const char *path, const char *op, enum transport_class cls);
/* req on TT_SESSION; resp and err are initialised here, and how long the
 * exchange took goes into *elapsed when elapsed is set. */
int tt_send_req(struct transport *t, const struct transport_req *req,
		struct transport_resp *resp, long long *elapsed,
		struct sbx_error *err);
/* One request of class cls on TT_SESSION, with json as its body when it
 * is set; resp and err are initialised here. */
int tt_send(struct transport *t, const char *method, const char *path,
	    const char *op, enum transport_class cls, const char *json,
	    struct transport_resp *resp, struct sbx_error *err);
/* A GET of path on TT_SESSION (a read: safe to repeat). */
int tt_get(struct transport *t, const char *path, struct transport_resp *resp,
	   struct sbx_error *err);
/* A POST of a small command body to path on TT_SESSION (a command). */
int tt_exec_post(struct transport *t, const char *path,
		 struct transport_resp *resp, struct sbx_error *err);
/* A provider request: 64 KiB answer bound, 2 s to connect, 5 s in all,
 * json as its body when it is set. */
void tt_http_req(struct transport_http_req *hr, const char *method,
		 const char *url, const char *json);
/* transport_http of hr, resp and err initialised here. */
int tt_http_send(const struct transport_http_req *hr,
		 struct transport_resp *resp, struct sbx_error *err);
/* A transport_sink_fn appending to the struct buf at arg. */
int tt_sink_to_buf(void *arg, const void *data, size_t len);
/* Whether TT_SESSION's slot is empty / holds url. */
bool tt_slot_empty(struct transport *t);
bool tt_slot_is(struct transport *t, const char *url);
/* Wait for *flag under mu and cond (a clock_cond_init one) for at most
 * ms: its final value. */
bool tt_wait_flag(pthread_mutex_t *mu, pthread_cond_t *cond, const bool *flag,
		  long ms);
/* err's described text contains needle. */
bool tt_error_mentions(const struct sbx_error *err, const char *needle);

/* ---- a whole scenario's setting ------------------------------------------- */

/*
 * These are inline in this header, not in transport_helpers.c, so that
 * check_azure_seed.c's renaming of the stub_provider and stub_agent_url
 * calls (it compiles check_transport_seed.c a second time against the
 * Azure provider) reaches them too.
 */

struct tt_env {
	struct stub_provider *sp;
	struct stub_agent *s; /* NULL without a handler */
	struct transport *t;
};

enum {
	TT_ROUTED = 1, /* the provider's route leads to the agent */
	TT_CONNECTED = 2, /* the slot holds a connection to it (tt_cred(7)) */
	TT_ROLLBACK = 4, /* new sessions without the agent (with_agent) */
};

/* A stub provider, a stub agent serving fn(arg) when fn is set, and a
 * transport over them with the settings cfg, as flags say (TT_ROLLBACK is
 * the caller's, in cfg). */
static inline void tt_env_start_cfg(struct tt_env *e, stub_handler_fn *fn,
				    void *arg,
				    const struct transport_config *cfg,
				    unsigned flags)
{
	memset(e, 0, sizeof(*e));
	e->sp = stub_provider_new();
	if (fn != NULL)
		e->s = stub_agent_start(fn, arg);
	if (e->s != NULL && (flags & TT_ROUTED))
		stub_provider_set_route(e->sp, stub_agent_url(e->s));
	e->t = stub_transport_new(e->sp, cfg);
	if (e->s != NULL && (flags & TT_CONNECTED))
		transport_test_set_connection(e->t, TT_SESSION,
					      stub_agent_url(e->s), tt_cred(7));
}

/* tt_env_start_cfg with the stub settings of response deadline
 * response_ms (stub_transport_config). */
static inline void tt_env_start(struct tt_env *e, stub_handler_fn *fn,
				void *arg, long response_ms, unsigned flags)
{
	struct transport_config cfg;

	stub_transport_config(&cfg, response_ms, !(flags & TT_ROLLBACK));
	tt_env_start_cfg(e, fn, arg, &cfg, flags);
}

static inline void tt_env_stop(struct tt_env *e)
{
	transport_free(e->t);
	stub_agent_stop(e->s);
	stub_provider_free(e->sp);
	memset(e, 0, sizeof(*e));
}

/* The provider calls a scenario made: exactly record, route and
 * credential reads, and none it forbade. */
static inline void tt_assert_calls(struct stub_provider *sp, unsigned record,
				   unsigned route, unsigned credential)
{
	ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_RECORD), record);
	ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_ROUTE), route);
	ck_assert_uint_eq(stub_provider_calls(sp, STUB_CALL_CREDENTIAL),
			  credential);
	ck_assert_uint_eq(stub_provider_unexpected(sp), 0);
}

/* The provider's last call of kind call was for TT_SESSION. */
static inline void tt_assert_last_id(struct stub_provider *sp,
				     enum stub_call call)
{
	char id[64];

	stub_provider_last_id(sp, call, id, sizeof(id));
	ck_assert_str_eq(id, TT_SESSION);
}

#endif
