/* SPDX-License-Identifier: MIT */
/*
 * stub_provider: a struct provider (provider.h) for the transport tests.
 * It plays the part of the seed's mocked Azure data plane: every call is
 * counted (record, route, credential, judge, resume, stop, native read and
 * exec ...), and what it answers is set by the test: the transport label,
 * the state each record read reports ("Stopped for the first two reads,
 * then Running"), the route URL, the per-boot credential (by default the
 * standard base64 of 32 bytes of the value of a generation the test can
 * change), whether the sandbox is gone, and hooks run inside a call (to
 * wake a waiting test thread).
 *
 * Each seed expectation has a C form: times(n) is
 * stub_provider_calls(sp, call) == n after the scenario, and never() is
 * stub_provider_never(sp, call): such a call then fails at once (so a
 * scenario cannot hang on it) and is counted by stub_provider_unexpected,
 * which the test asserts to be 0.
 *
 * It serves one sandbox at a time (the seed's "session"); any id is
 * accepted and the last id of each call is kept for assertions. It never
 * contacts anything.
 *
 * Thread-safe: the transport calls it from many threads; every field is
 * under one mutex, and the setters may be used while calls run.
 */
#ifndef SBFS_TEST_STUB_PROVIDER_H
#define SBFS_TEST_STUB_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>

#include "client/provider.h"
#include "client/transport.h"

enum stub_call {
	STUB_CALL_LIST = 0,
	STUB_CALL_RECORD,
	STUB_CALL_ROUTE,
	STUB_CALL_ROUTE_ALLOWED,
	STUB_CALL_CREDENTIAL,
	STUB_CALL_JUDGE,
	STUB_CALL_RESUME,
	STUB_CALL_STOP,
	STUB_CALL_NATIVE_READ,
	STUB_CALL_NATIVE_EXEC,
	STUB_CALL_COUNT
};

/* The transport label the records carry. */
enum stub_label {
	STUB_LABEL_NONE = 0, /* absent: a native (legacy) session */
	STUB_LABEL_AGENT, /* "native-file-v1" */
	STUB_LABEL_UNKNOWN, /* "unknown": must fail closed */
};

/* The route policy route_allowed applies. */
enum stub_policy {
	/* http://127.0.0.1:PORT/ or http://[::1]:PORT/, exactly: the local
	 * provider's policy (man/sandboxctl.1, the record). */
	STUB_POLICY_LOOPBACK = 0,
	STUB_POLICY_REFUSE_ALL,
};

struct stub_provider;

/* Called inside the named call, with the provider's lock released. */
typedef void stub_provider_hook_fn(struct stub_provider *sp,
				   enum stub_call call, const char *id,
				   void *arg);

/*
 * A provider whose records carry the agent label, report Running, route to
 * nothing (set one with stub_provider_set_route) and whose credential is
 * generation 0. Aborts the test on failure.
 */
struct stub_provider *stub_provider_new(void);
/* The struct provider to hand to transport_new (borrowed). */
struct provider *stub_provider_base(struct stub_provider *sp);
/* Free (also reachable through provider_free on the base). NULL-safe. */
void stub_provider_free(struct stub_provider *sp);

/* ---- what it answers ---------------------------------------------------- */

void stub_provider_set_label(struct stub_provider *sp, enum stub_label label);
/* The first n record reads report Stopped, later ones the base state. */
void stub_provider_set_stopped_reads(struct stub_provider *sp, unsigned n);
void stub_provider_set_state(struct stub_provider *sp,
			     enum provider_state state);
/* Route URL (copied); NULL makes route() fail with -ENOENT. */
void stub_provider_set_route(struct stub_provider *sp, const char *url);
void stub_provider_set_policy(struct stub_provider *sp,
			      enum stub_policy policy);
/* The credential becomes base64 of 32 bytes of value (g & 0xff). */
void stub_provider_set_generation(struct stub_provider *sp, unsigned g);
/* A literal credential instead (len bytes, copied); NULL returns to the
 * generation's. */
void stub_provider_set_credential(struct stub_provider *sp, const char *raw,
				  size_t len);
/* credential() fails with this negative errno (0: answers again). -ENOENT
 * is "not there yet". */
void stub_provider_set_credential_errno(struct stub_provider *sp, int err);
/* record() of a gone sandbox fails with -ENOENT (sandboxGone). */
void stub_provider_set_gone(struct stub_provider *sp, bool gone);
/* judge() refuses with this negative errno (0: accepts). */
void stub_provider_set_judge_errno(struct stub_provider *sp, int err);
/* A call the scenario must never make (see the header comment). */
void stub_provider_never(struct stub_provider *sp, enum stub_call call);
/* Run fn(sp, call, id, arg) inside every such call (NULL removes). */
void stub_provider_set_hook(struct stub_provider *sp, enum stub_call call,
			    stub_provider_hook_fn *fn, void *arg);

/* The credential for generation g (44 characters and a NUL). */
void stub_provider_credential_for(unsigned g, char out[45]);

/* ---- what it saw ------------------------------------------------------- */

unsigned stub_provider_calls(struct stub_provider *sp, enum stub_call call);
/* Calls that a stub_provider_never forbade. */
unsigned stub_provider_unexpected(struct stub_provider *sp);
/* The id of the last such call ("" when none) into out[size]. */
void stub_provider_last_id(struct stub_provider *sp, enum stub_call call,
			   char *out, size_t size);
/* The last URL given to route_allowed ("" when none). */
void stub_provider_last_checked_route(struct stub_provider *sp, char *out,
				      size_t size);
/* Wait until the call was made at least n times; false after ms. */
bool stub_provider_wait_calls(struct stub_provider *sp, enum stub_call call,
			      unsigned n, long ms);

/* ---- the transport the tests build over it ------------------------------ */

/*
 * Test defaults: response (header) and error-body deadline response_ms
 * (the seed's AGENT_RESPONSE_TIMEOUT is 200 ms in tests), the same idle
 * deadline inside bodies, a 2 s connect deadline, readiness polled every
 * 50 ms for at most 5 s, Running awaited at most 5 s. new_sessions_use_agent
 * is the seed's with_agent(x).
 */
void stub_transport_config(struct transport_config *cfg, long response_ms,
			   bool with_agent);
/* transport_new over sp with cfg; aborts the test on failure. */
struct transport *stub_transport_new(struct stub_provider *sp,
				     const struct transport_config *cfg);

#endif
