/* SPDX-License-Identifier: MIT */
/*
 * transport: the shared transport core (its files: transport_i.h; its
 * curl engine, transport_curl.c, is the only user of libcurl).
 *
 * It talks to every sandbox's agent for every provider, and implements the
 * client rules of doc/transport-rules.md (the seed's Azure agent
 * transport, plus what this project adds to it):
 *
 *  - the provider label decides the transport (absent: native; the agent
 *    label: agent; anything else fails closed) (rules 1);
 *  - one cached connection per sandbox (route URL + credential), fetched
 *    from the provider (route checked against the provider's policy,
 *    credential exactly 44 base64 characters of 32 bytes) and activated
 *    (record re-read and judged, POST /v1/activate) before first use
 *    (rules 2, 3);
 *  - HTTP keep-alive: pooled libcurl handles per sandbox keep their TCP
 *    connections; no proxy, no redirects;
 *  - a request is refreshed and replayed at most once, and only after a
 *    connect or TLS handshake failure, an untyped 404, or a 401 whose
 *    re-read credential changed; timeouts, broken responses and 5xx are
 *    never replayed and give an outcome-unknown error for commands and a
 *    retryable unreachable error for the others (rules 4 - 6);
 *  - typed answers (PATH_NOT_FOUND, JOB_NOT_FOUND, and the file
 *    extension's FS_ERROR) prove the agent holding the route answered: the
 *    route is kept and nothing is replayed;
 *  - every request has a class (rules 8): a safe one (a read) may reach
 *    the agent twice; one that is not safe to repeat (a change, a command)
 *    is never sent again by libcurl: it goes on a fresh connection, unless
 *    the agent advertised its reply cache, in which case it carries an
 *    Idempotency-Key, may use a kept-alive connection, and is asked once
 *    more with the same key when its first answer was lost;
 *  - error bodies are bounded at 4096 bytes and by a deadline; no lock is
 *    held while a body is read; a failed replay never pins a route;
 *  - readiness polls health every 500 ms up to 60 s (fetch and activation
 *    included) and re-activates a boot that reports
 *    awaiting-network-verification; a resume that fails stops only a
 *    sandbox this call woke (rules 7).
 *
 * Deadlines (rules 9): connect (10 s); the response deadline bounds each
 * exchange in total, headers and body (a request that legitimately takes
 * longer, a command, says so with deadline_ms and outlives_op); error
 * bodies are also bounded by it; the calling thread's operation deadline
 * (transport_op_*) bounds everything done for one filesystem operation:
 * waits for the sandbox's connection, fetch and activation, every
 * exchange, provider requests through transport_http. Nothing waits
 * without one.
 *
 * Thread-safe: any number of threads may use one transport at once.
 */
#ifndef SBFS_TRANSPORT_H
#define SBFS_TRANSPORT_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "client/provider.h"
#include "client/sbx_error.h"

/* Operation names (doc/transport-rules.md 6), used in errors and logs. */
#define TRANSPORT_OP_EXEC "sandbox.runCommand"
#define TRANSPORT_OP_JOB_START "sandbox.jobStart"
#define TRANSPORT_OP_JOB_POLL "sandbox.jobPoll"
#define TRANSPORT_OP_JOB_CANCEL "sandbox.jobCancel"
#define TRANSPORT_OP_READ "sandbox.readFile"
#define TRANSPORT_OP_WRITE "sandbox.writeFiles"
#define TRANSPORT_OP_HEALTH "sandbox.health"
#define TRANSPORT_OP_ACTIVATE "sandbox.activate"
#define TRANSPORT_OP_AGENT "sandbox.agent"
#define TRANSPORT_OP_FILES "sandbox.files" /* file extension operations */

struct transport_config {
	long connect_timeout_ms; /* default 10000 */
	long response_timeout_ms; /* one exchange in total: headers and
				      body; also bounds error bodies.
				      Default 60000 */
	long body_idle_timeout_ms; /* longest silence inside a success body
				      (matters for requests with a longer
				      deadline of their own); default
				      response_timeout_ms */
	long ready_timeout_ms; /* readiness wait, default 60000 */
	long ready_interval_ms; /* between health polls, default 500 */
	long running_timeout_ms; /* wait for Running after a resume,
				      default 120000 */
	unsigned max_idle_handles; /* pooled connections per sandbox, 16 */
	/* Whether sessions created through this binding use the agent
	 * (only reported by transport_default_caps; the per-session choice
	 * always follows the record's label). */
	bool new_sessions_use_agent;
};

/* Fill cfg with the defaults above. */
void transport_config_defaults(struct transport_config *cfg);

struct transport;

/* The provider is borrowed and must outlive the transport. */
int transport_new(struct provider *prov, const struct transport_config *cfg,
		  struct transport **out) __attribute__((warn_unused_result));
void transport_free(struct transport *t);
/* The configured response deadline (a long-poll must stay below it). */
long transport_response_timeout_ms(const struct transport *t);

/* ---- choosing the transport (doc/transport-rules.md 1) ----------------- */

enum transport_kind {
	TRANSPORT_NATIVE = 0, /* no label: the provider's native routes */
	TRANSPORT_AGENT, /* the agent label */
};

/* Pure: the decision for a record. -EPROTO (agentTransportInvalid) for
 * an unknown label value. */
int transport_kind_of(const struct provider_record *rec,
		      enum transport_kind *kind, struct sbx_error *err);

/* Read the record (one provider read) and decide. A missing sandbox is
 * SBX_COMMAND_FAILED sandboxGone (-ENOENT). rec_out may be NULL; when not,
 * it receives the record (caller cleans up). */
int transport_session_kind(struct transport *t, const char *id, const char *op,
			   enum transport_kind *kind,
			   struct provider_record *rec_out,
			   struct sbx_error *err)
	__attribute__((warn_unused_result));

struct transport_caps {
	bool jobs;
	bool supervisor_isolation;
};

/* Capabilities of new sessions through this binding. */
struct transport_caps transport_default_caps(const struct transport *t);
/* Capabilities of an existing session, from its label (one record read). */
int transport_session_caps(struct transport *t, const char *id,
			   struct transport_caps *caps, struct sbx_error *err)
	__attribute__((warn_unused_result));

/* ---- one agent request ------------------------------------------------- */

/* Receives a success body as it arrives. Return 0 to go on, or a negative
 * errno to abort the transfer (transport_send then returns it). */
typedef int transport_sink_fn(void *arg, const void *data, size_t len);

/*
 * What sending a request again would do (doc/transport-rules.md 8). The
 * zero value is the careful one: a request whose author did not think
 * about it is never sent twice.
 */
enum transport_class {
	/* Changes something in the sandbox (a write, create, rename,
	 * unlink, chmod ..., a job cancel, an activation): never sent
	 * twice unknowingly; unanswered, it is SBX_UNREACHABLE (the
	 * seed's classification of writeFiles and jobCancel). */
	TRANSPORT_CHANGE = 0,
	/* Only looks (reads, stat, listings, job polls, health): libcurl
	 * may send it again on a fresh connection when a kept-alive one
	 * turns out dead; unanswered, it is SBX_UNREACHABLE. */
	TRANSPORT_SAFE,
	/* Starts a command (exec, job start): never sent twice
	 * unknowingly; unanswered, it is SBX_OUTCOME_UNKNOWN. */
	TRANSPORT_COMMAND,
};

struct transport_req {
	const char *op; /* TRANSPORT_OP_*: logs, reasons */
	enum transport_class cls;
	const char *method; /* "GET", "POST", "PUT" */
	const char *path; /* path and query, starting with '/' */
	const char *content_type; /* of the body; NULL with no body */
	const void *body;
	size_t body_len;
	const char *const *headers; /* extra "Name: value" lines, or NULL */
	/* Success body: streamed to sink when set, else buffered in
	 * resp->body up to max_body bytes (-EFBIG past it). */
	transport_sink_fn *sink;
	void *sink_arg;
	size_t max_body;
	/* The whole exchange's limit, headers and body: 0 is the response
	 * deadline. Response headers must come within the response
	 * deadline whatever this says. */
	long deadline_ms;
	/* The request legitimately runs past the caller's operation
	 * deadline (a command with its own timeout, doc/transport-rules.md
	 * 9): only deadline_ms bounds its exchange. */
	bool outlives_op;
	long idle_timeout_ms; /* longest silence in the success body:
				     0 = the configured default, < 0 = none
				     (a command's quiet output) */
	/* A change of the sandbox's files: it names this client
	 * (transport_set_client_id) to the agent. */
	bool tag_client;
};

/* max_body when a request leaves it 0. */
#define TRANSPORT_DEFAULT_MAX_BODY (1024UL * 1024)

struct transport_resp {
	long status;
	struct buf body; /* buffered success body */
	char etag[PROTO_ETAG_MAX]; /* ETag header, "" when absent */
	char content_type[96];
	bool has_range; /* Content-Range was present */
	uint64_t range_start; /* from Content-Range */
	uint64_t full_size; /* X-Sandboxfs-Size or the range's
					   total; UINT64_MAX when unknown */
	bool replayed; /* the agent answered from its reply cache */
};

void transport_resp_init(struct transport_resp *r);
void transport_resp_cleanup(struct transport_resp *r);

/*
 * Send one request to sandbox id's agent, following every rule above:
 * fetch and activate a connection when none is cached, refresh and replay
 * at most once when allowed. Does not read the provider record unless a
 * connection must be fetched and activated (callers decide the transport
 * first with transport_session_kind).
 *
 * Returns 0 with resp filled for a 2xx answer. Otherwise a negative errno
 * (sbx_error_errno(err)) with err filled; resp->status holds the final
 * status when an agent answered.
 */
int transport_send(struct transport *t, const char *id,
		   const struct transport_req *req, struct transport_resp *resp,
		   struct sbx_error *err) __attribute__((warn_unused_result));

/*
 * Name this client to the agents (doc/protocol-ext.md, "Change events"):
 * requests sent with tag_client then carry "X-Sandboxfs-Client: id", and
 * the change events they cause carry "by": id, so that the client can
 * tell its own changes from others'. id: 1 to 64 of A-Z a-z 0-9 -
 * (-EINVAL otherwise, nothing changed), or NULL to send no name. An
 * agent without change events ignores the header, as HTTP servers do
 * unknown headers. Thread-safe; requests already under way keep what
 * they had.
 */
int transport_set_client_id(struct transport *t, const char *id)
	__attribute__((warn_unused_result));

/* ---- the calling thread's operation deadline (rules 9) ------------------ */

/*
 * A filesystem operation sets a deadline for everything done on its
 * behalf on the calling thread: transport_send (waiting for the sandbox's
 * connection, fetch, activation, each exchange unless the request
 * outlives_op), transport_wait_ready and transport_http. 0 clears it (the
 * initial state of every thread). Thread-local: other threads (a
 * readahead worker, a job poller) are not affected.
 */
long long transport_now_ms(void);
void transport_op_set_deadline(long long deadline_ms);
long long transport_op_deadline(void);
/* Whether a request made on this thread ended at a deadline (the
 * response deadline, the operation's, or a wait for the connection)
 * since the last transport_op_clear_timed_out. */
bool transport_op_timed_out(void);

/*
 * A thread that waits long on purpose (a long-poll) gives flag: once it is
 * not 0 (set from another thread), the exchange under way on this thread
 * ends within a second, as an error, and so does every later one. NULL
 * clears it. Thread-local, as the deadline.
 */
void transport_op_set_cancel(const int *flag);
void transport_op_clear_timed_out(void);

/*
 * Lock m, waiting no longer than the calling thread's operation deadline
 * (for a lock another thread may hold across a request of its own): 0, or
 * -ETIMEDOUT with m not taken. Without a deadline it waits as long as it
 * takes.
 */
int transport_op_lock(pthread_mutex_t *m) __attribute__((warn_unused_result));

/* ---- lifecycle --------------------------------------------------------- */

/*
 * Wait until the agent is ready (doc/transport-rules.md 7): health every
 * ready_interval_ms until ready_timeout_ms, fetching and activating a
 * connection as needed, and dropping the connection that carried an
 * answer whose boot reports awaiting-network-verification. The deadline
 * bounds everything, the provider's fetch and the activation included (and
 * the caller's operation deadline, when set and earlier). health_out (may
 * be NULL) receives the final answer (the extension advertisement lives
 * there).
 */
int transport_wait_ready(struct transport *t, const char *id,
			 struct proto_health *health_out, struct sbx_error *err)
	__attribute__((warn_unused_result));

/*
 * Make sure a sandbox runs and (for agent sessions) its agent is ready: read
 * the record; if Stopped or Suspended ask the provider to resume and poll
 * until Running; decide the transport (one more record read); wait for the
 * agent. A failure after this call woke the sandbox stops it again (never
 * deletes it). Failures are SBX_COMMAND_FAILED, not retryable. The waits
 * have their own deadlines (running_timeout_ms, then ready_timeout_ms);
 * the caller's operation deadline, when set, also bounds them, so a caller
 * that allows a resume clears it first.
 */
int transport_resume(struct transport *t, const char *id,
		     struct proto_health *health_out, struct sbx_error *err)
	__attribute__((warn_unused_result));

/* A counter that grows each time a new connection (route or credential)
 * is activated for sandbox id: when it changed, the agent may be a new
 * boot, whose health (and extensions) may differ. */
unsigned transport_generation(struct transport *t, const char *id);

/* Drop sandbox id's cached connection (the next request fetches and
 * activates afresh). */
void transport_forget(struct transport *t, const char *id);

/* ---- plain HTTP for providers (no agent rules) -------------------------- */

/*
 * One bounded HTTPS/HTTP exchange for provider control planes (the Azure
 * data plane and token endpoints): no redirects (a 3xx is returned as
 * such), connect and whole-exchange deadlines from the request (and the
 * calling thread's operation deadline), response body bounded by max_body.
 * Proxies come from the environment as libcurl reads it (https_proxy,
 * HTTPS_PROXY, http_proxy, NO_PROXY ...), as the Azure SDKs do (rules 10).
 * A request that is not a GET goes on a fresh connection, so libcurl never
 * sends it twice (rules 8). headers: extra "Name: value" lines (may hold an
 * Authorization header: it is never logged). Returns 0 when any HTTP
 * answer arrived (check resp->status), or a negative errno with err
 * filled: -ECONNREFUSED when the request cannot have been delivered
 * (connect or TLS handshake failure), -ETIMEDOUT at a deadline, -EFBIG,
 * -EIO.
 */
/*
 * Kept-alive connections for one owner's provider requests (a provider's
 * control plane, its token endpoints), so that a handshake is not paid per
 * call. Thread-safe; the owner frees it after its last request.
 */
struct transport_http_pool;

struct transport_http_pool *transport_http_pool_new(void);
/* Close the idle connections and free. NULL-safe. */
void transport_http_pool_free(struct transport_http_pool *p);

struct transport_http_req {
	const char *method;
	const char *url;
	const char *const *headers;
	const char *content_type;
	const void *body;
	size_t body_len;
	size_t max_body;
	const char *ca_file; /* extra trust, or NULL */
	const char *const *resolve; /* pinned resolution, or NULL */
	long connect_timeout_ms;
	long timeout_ms; /* whole exchange */
	/* Where the connection is taken from and given back to; NULL: a
	 * connection for this exchange only. */
	struct transport_http_pool *pool;
};

int transport_http(const struct transport_http_req *req,
		   struct transport_resp *resp, struct sbx_error *err)
	__attribute__((warn_unused_result));

/* ---- test hooks ---------------------------------------------------------- */

/* Seed sandbox id's cache slot with a connection (as the seed's tests do),
 * without fetching or activating. */
void transport_test_set_connection(struct transport *t, const char *id,
				   const char *url, const char *token);
/* Copy the cached connection's URL into url[size]; false when the slot is
 * empty. */
bool transport_test_cached_url(struct transport *t, const char *id, char *url,
			       size_t size);

#endif
