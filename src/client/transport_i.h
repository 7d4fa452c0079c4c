/* SPDX-License-Identifier: MIT */
/*
 * transport_i: what the files of the transport core share
 * (doc/internals/transport.md; transport.h is the contract).
 *
 *   transport.c          the transport object, the calling thread's
 *                        operation deadline, the sandboxes' slots and
 *                        their cached connections: fetched from the
 *                        provider (route policy, http+unix routes and
 *                        who owns their socket, the credential) and
 *                        activated (rules 2, 3)
 *   transport_send.c     one request through the rules: the first
 *                        attempt, the triage of its answer, the refresh
 *                        and the replay, the second asking under a key,
 *                        and what an answer or its absence means
 *                        (rules 4 - 6, 8)
 *   transport_session.c  the transport decision (labels, capabilities),
 *                        readiness and resume (rules 1, 7)
 *   transport_http.c     plain HTTP for the providers' control planes
 *   transport_curl.c     the curl engine (transport_curl.h), the only
 *                        file that includes libcurl
 *
 * Locking: t->lock guards the slot list; slot->lock guards the cached
 * connection and is held while a connection is fetched and activated (one
 * fetch per stale route, not one per waiting request), never while an
 * operation's own body is read; a thread waits for it no longer than its
 * operation deadline (tr_slot_lock). Each slot's pool has its own lock.
 * A struct conn is immutable once made and reference counted: the slot
 * holds one reference, each request that took it another.
 */
#ifndef SBFS_TRANSPORT_I_H
#define SBFS_TRANSPORT_I_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/proto.h"
#include "client/sbx_error.h"
#include "client/transport.h"
#include "client/transport_curl.h"

/* A cached connection: the agent's route and this boot's credential.
 * Immutable once made; shared by reference between the slot and the
 * requests that took it. */
struct conn {
	atomic_int refs;
	char *url; /* as the provider gave it: "http://127.0.0.1:4000/" */
	char *origin; /* url without its final '/', to join request paths */
	/* An http+unix route (doc/internals/transport.md, "Unix socket
	 * routes"): the socket libcurl connects to, reached through its
	 * directory held open here ("/proc/self/fd/N/NAME"), and the base
	 * request paths are joined to instead of origin. */
	char *unix_path;
	int sock_dirfd;
	char *base;
	/* Each new connection's listener must run as owner (or root). */
	bool check_owner;
	uid_t owner;
	char *token; /* 44 characters */
	char *auth; /* "Authorization: Bearer <token>" */
	/* The agent behind this connection advertised its reply cache in a
	 * health answer carried by it (doc/transport-rules.md 8.3). */
	atomic_bool keyed;
};

/* One sandbox's state. */
struct slot {
	char *id;
	pthread_mutex_t lock;
	struct conn *conn; /* NULL when empty */
	unsigned gen; /* activations so far */
	struct xfer_pool pool; /* idle handles to its agent */
	struct slot *next;
};

struct transport {
	struct provider *prov;
	struct transport_config cfg;
	pthread_mutex_t lock;
	struct slot *slots;
	pthread_mutex_t id_lock; /* client_id */
	char client_id[PROTO_CLIENT_ID_MAX + 1]; /* "" when none */
};

/* ---- the calling thread's operation (transport.c) ------------------------ */

/* The earlier of two deadlines, 0 meaning none. */
long long tr_earliest(long long a, long long b);
bool tr_op_deadline_passed(void);
/* Mark the operation as timed out and fill err: op's deadline passed
 * what (while ...). */
void tr_op_late(struct sbx_error *err, const char *op, const char *what);
void tr_op_mark_timed_out(void);
/* Whether the thread's cancel flag is raised. */
bool tr_op_cancelled(void);

/* ---- slots and connections (transport.c) ---------------------------------- */

/* Sandbox id's slot, made on first use; it lives as long as t. */
struct slot *tr_slot_get(struct transport *t, const char *id);
/* slot->lock, waited for no longer than the operation deadline: 0, or
 * -ETIMEDOUT (the operation is marked as timed out). */
int tr_slot_lock(struct slot *s) __attribute__((warn_unused_result));
/* Empty the slot only if it still holds used (a concurrent refresh is
 * never clobbered). */
void tr_slot_invalidate(struct slot *s, const struct conn *used);
/* The slot's connection, fetched and activated when it is empty: a
 * reference into *out. */
int tr_slot_connection(struct transport *t, struct slot *s, const char *id,
		       const char *op, struct conn **out, struct sbx_error *err)
	__attribute__((warn_unused_result));
/* Fetch a new connection from the provider (route, policy, credential),
 * not yet activated. Called with slot->lock held. */
int tr_fetch_connection(struct transport *t, const char *id, struct conn **out,
			struct sbx_error *err)
	__attribute__((warn_unused_result));
/* Judge the record and POST /v1/activate on conn. Called with slot->lock
 * held. */
int tr_activate_connection(struct transport *t, struct slot *s, const char *id,
			   const struct conn *conn, struct sbx_error *err)
	__attribute__((warn_unused_result));

struct conn *tr_conn_ref(struct conn *c);
void tr_conn_unref(struct conn *c);
/* Same bearer and same URL origin (the seed's matches_request). */
bool tr_conn_same(const struct conn *a, const struct conn *b);

/* ---- errors the files share (transport.c) ----------------------------------- */

void tr_invalid_route(struct sbx_error *err);
void tr_not_ready(struct sbx_error *err);
/* sandboxGone for id, and -ENOENT. */
int tr_record_gone(struct sbx_error *err, const char *op, const char *id);

/* ---- sending (transport_send.c) --------------------------------------------- */

/*
 * The rules of doc/transport-rules.md 4 - 6 and 8 for one request. When
 * answered_out is not NULL it receives a reference to the connection that
 * carried the final answer (NULL when none did).
 */
int tr_send_request(struct transport *t, struct slot *s, const char *id,
		    const struct transport_req *req,
		    struct transport_resp *resp, struct sbx_error *err,
		    struct conn **answered_out)
	__attribute__((warn_unused_result));
/* One exchange on conn without refresh or replay (the seed's
 * agent_protocol::send): activation. */
int tr_send_plain(struct transport *t, struct slot *s, const struct conn *conn,
		  const struct transport_req *req, struct transport_resp *resp,
		  struct sbx_error *err) __attribute__((warn_unused_result));

#endif
