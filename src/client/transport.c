/* SPDX-License-Identifier: MIT */
/*
 * transport: the shared transport core (see transport.h for the rules it
 * implements, doc/transport-rules.md for where they come from, and
 * transport_i.h for the files it is made of). This file holds the
 * transport object, the calling thread's operation deadline, and the
 * sandboxes' slots with their cached connections: fetched from the
 * provider and activated before first use.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/token.h"
#include "common/unixurl.h"
#include "common/xalloc.h"
#include "client/transport.h"
#include "client/transport_i.h"

/* ---- the calling thread's operation deadline ------------------------------ */

/* 0: none. Set by the filesystem layer around each operation, and by the
 * readiness wait around its loop (doc/transport-rules.md 9). */
static __thread long long op_deadline;
static __thread bool op_timed_out;
/* Set: a request of this thread gives up once *op_cancel is not 0. */
static __thread const int *op_cancel;

void transport_op_set_cancel(const int *flag)
{
	op_cancel = flag;
}

long long transport_now_ms(void)
{
	return clock_mono_ms();
}

void transport_op_set_deadline(long long deadline_ms)
{
	op_deadline = deadline_ms > 0 ? deadline_ms : 0;
}

long long transport_op_deadline(void)
{
	return op_deadline;
}

bool transport_op_timed_out(void)
{
	return op_timed_out;
}

void transport_op_clear_timed_out(void)
{
	op_timed_out = false;
}

int transport_op_lock(pthread_mutex_t *m)
{
	long long d = op_deadline;
	struct timespec ts;

	if (d == 0) {
		pthread_mutex_lock(m);
		return 0;
	}
	ts.tv_sec = (time_t)(d / 1000);
	ts.tv_nsec = (long)(d % 1000) * 1000000L;
	if (pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &ts) == 0)
		return 0;
	return -ETIMEDOUT;
}

long long tr_earliest(long long a, long long b)
{
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	return a < b ? a : b;
}

bool tr_op_deadline_passed(void)
{
	return op_deadline != 0 && clock_mono_ms() >= op_deadline;
}

void tr_op_late(struct sbx_error *err, const char *op, const char *what)
{
	op_timed_out = true;
	sbx_error_set(err, SBX_UNREACHABLE, NULL,
		      "%s: the operation's deadline passed %s", op, what);
}

void tr_op_mark_timed_out(void)
{
	op_timed_out = true;
}

bool tr_op_cancelled(void)
{
	return op_cancel != NULL &&
	       __atomic_load_n(op_cancel, __ATOMIC_RELAXED) != 0;
}

/* ---- connections -------------------------------------------------------- */

void tr_conn_unref(struct conn *c)
{
	if (c == NULL || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	free(c->url);
	free(c->origin);
	free(c->unix_path);
	free(c->base);
	fdio_close(c->sock_dirfd);
	token_free(c->token);
	token_free(c->auth);
	free(c);
}

struct conn *tr_conn_ref(struct conn *c)
{
	if (c != NULL)
		atomic_fetch_add(&c->refs, 1);
	return c;
}

static struct conn *conn_new(const char *url, const char *token, size_t len)
{
	struct conn *c = xcalloc(1, sizeof(*c));
	size_t ulen = strlen(url);

	atomic_init(&c->refs, 1);
	c->sock_dirfd = -1;
	c->url = xstrdup(url);
	c->origin = xstrndup(url, ulen > 0 && url[ulen - 1] == '/' ? ulen - 1
								   : ulen);
	c->token = xstrndup(token, len);
	c->auth = xasprintf("Authorization: Bearer %s", c->token);
	atomic_init(&c->keyed, false);
	return c;
}

/* Set the credential of a connection still being made (nobody else holds
 * it yet). */
static void conn_set_token(struct conn *c, const char *token, size_t len)
{
	token_free(c->token);
	token_free(c->auth);
	c->token = xstrndup(token, len);
	c->auth = xasprintf("Authorization: Bearer %s", c->token);
}

/* The seed's matches_request: same bearer and same URL origin. */
bool tr_conn_same(const struct conn *a, const struct conn *b)
{
	return a != NULL && b != NULL && strcmp(a->origin, b->origin) == 0 &&
	       token_equal(a->token, strlen(a->token), b->token,
			   strlen(b->token));
}

/* ---- fetch and activate (doc/transport-rules.md 2, 3) ---------------------- */

void tr_invalid_route(struct sbx_error *err)
{
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
		      "the provider did not report a valid agent route and "
		      "per-boot credential");
}

void tr_not_ready(struct sbx_error *err)
{
	sbx_error_set(err, SBX_UNREACHABLE, NULL,
		      "%s: the sandbox agent is not ready", TRANSPORT_OP_AGENT);
}

int tr_record_gone(struct sbx_error *err, const char *op, const char *id)
{
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_GONE,
		      "%s: sandbox '%s' does not exist", op, id);
	return -ENOENT;
}

/*
 * An http+unix route's socket, before anything is read for it: its
 * directory is opened and held (libcurl connects through it, so the path
 * cannot be turned elsewhere meanwhile, and a path longer than a socket
 * address holds still works), and the socket there must be a socket
 * owned by the agent's user or root. conn gets the path libcurl uses.
 */
static int unix_route(struct conn *c, const char *url, struct sbx_error *err)
{
	char path[PATH_MAX], *slash;
	struct stat st;
	int rc;

	if (unixurl_parse(url, path, sizeof(path)) < 0) {
		tr_invalid_route(err);
		return -EPROTO;
	}
	slash = strrchr(path, '/');
	*slash = '\0';
	c->sock_dirfd = open(slash == path ? "/" : path,
			     O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c->sock_dirfd < 0 ||
	    fstatat(c->sock_dirfd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = -errno;
		*slash = '/';
		if (rc == -ENOENT) {
			tr_not_ready(err);
			return -EIO;
		}
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "%s: the agent's socket %s: %s",
			      TRANSPORT_OP_AGENT, path, strerror(-rc));
		return -EIO;
	}
	*slash = '/';
	if (!S_ISSOCK(st.st_mode) ||
	    (c->check_owner && st.st_uid != c->owner && st.st_uid != 0)) {
		return sbx_error_fail(
			err, SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
			EPROTO,
			"%s: %s %s %ld, not to the agent's user "
			"(uid %ld): refused, nothing was sent",
			TRANSPORT_OP_AGENT, path,
			S_ISSOCK(st.st_mode)
				? "belongs to uid"
				: "is not a socket; it belongs to uid",
			(long)st.st_uid, (long)c->owner);
	}
	c->unix_path =
		xasprintf("/proc/self/fd/%d/%s", c->sock_dirfd, slash + 1);
	if (strlen(c->unix_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return sbx_error_fail(
			err, SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
			EPROTO, "%s: the agent's socket name in %s is too long",
			TRANSPORT_OP_AGENT, url);
	c->base = xstrdup("http://localhost");
	return 0;
}

int tr_fetch_connection(struct transport *t, const char *id, struct conn **out,
			struct sbx_error *err)
{
	struct provider *p = t->prov;
	char *url = NULL, *cred = NULL;
	struct conn *c = NULL;
	bool check = false;
	uid_t owner = 0;
	size_t len = 0;
	int rc;

	rc = p->ops->route(p, id, &url, err);
	if (rc < 0)
		goto out;
	/* The URL comes from the provider; refuse unexpected origins before
	 * attaching even this sandbox-scoped credential. */
	if (url == NULL || !p->ops->route_allowed(p, url)) {
		tr_invalid_route(err);
		rc = -EPROTO;
		goto out;
	}
	if (p->ops->listener_uid != NULL &&
	    p->ops->listener_uid(p, &owner) == 0)
		check = true;
	if (unixurl_is(url)) {
		/* Checked before the credential is even read. */
		c = conn_new(url, "", 0);
		c->check_owner = check;
		c->owner = owner;
		rc = unix_route(c, url, err);
		if (rc < 0)
			goto out;
	}
	rc = p->ops->credential(p, id, &cred, &len, err);
	if (rc == -ENOENT) {
		tr_not_ready(err);
		goto out;
	}
	if (rc < 0)
		goto out;
	if (!token_valid(cred, len)) {
		tr_invalid_route(err);
		rc = -EPROTO;
		goto out;
	}
	if (c == NULL)
		c = conn_new(url, cred, len);
	else
		conn_set_token(c, cred, len);
	c->check_owner = check;
	c->owner = owner;
	*out = c;
	c = NULL;
	rc = 0;
out:
	if (cred != NULL) {
		token_wipe(cred, len);
		free(cred);
	}
	tr_conn_unref(c);
	free(url);
	return rc;
}

int tr_activate_connection(struct transport *t, struct slot *s, const char *id,
			   const struct conn *conn, struct sbx_error *err)
{
	struct provider *p = t->prov;
	struct provider_record rec;
	struct transport_resp resp;
	struct transport_req req = {
		.op = TRANSPORT_OP_ACTIVATE,
		/* It starts the image's code: never sent twice
		 * unknowingly, though the seed classifies it as
		 * unreachable when unanswered. */
		.cls = TRANSPORT_CHANGE,
		.method = "POST",
		.path = "/v1/activate",
		.max_body = 4096,
	};
	enum transport_kind kind;
	int rc;

	/* Any operation can be the first on a fresh boot, and activation
	 * starts image code: re-read and judge the record every time. */
	memset(&rec, 0, sizeof(rec));
	rc = p->ops->record(p, id, &rec, err);
	if (rc == -ENOENT)
		return tr_record_gone(err, TRANSPORT_OP_ACTIVATE, id);
	if (rc < 0)
		return rc;
	if (p->ops->judge != NULL) {
		rc = p->ops->judge(p, &rec, err);
		if (rc < 0)
			goto out;
	}
	rc = transport_kind_of(&rec, &kind, err);
	if (rc < 0)
		goto out;
	if (kind != TRANSPORT_AGENT) {
		tr_invalid_route(err);
		rc = -EPROTO;
		goto out;
	}
	transport_resp_init(&resp);
	rc = tr_send_plain(t, s, conn, &req, &resp, err);
	transport_resp_cleanup(&resp);
out:
	provider_record_cleanup(&rec);
	return rc;
}

/* ---- slots ---------------------------------------------------------------- */

struct slot *tr_slot_get(struct transport *t, const char *id)
{
	struct slot *s;

	pthread_mutex_lock(&t->lock);
	for (s = t->slots; s != NULL; s = s->next)
		if (strcmp(s->id, id) == 0)
			break;
	if (s == NULL) {
		s = xcalloc(1, sizeof(*s));
		s->id = xstrdup(id);
		pthread_mutex_init(&s->lock, NULL);
		xfer_pool_init(&s->pool, t->cfg.max_idle_handles);
		s->next = t->slots;
		t->slots = s;
	}
	pthread_mutex_unlock(&t->lock);
	return s;
}

/* Another request may hold slot->lock for a whole fetch and activation,
 * and an operation must not wait for that past its own deadline. */
int tr_slot_lock(struct slot *s)
{
	if (transport_op_lock(&s->lock) == 0)
		return 0;
	op_timed_out = true;
	return -ETIMEDOUT;
}

/* Clear the slot only if it still holds the connection the request used,
 * so a concurrent refresh is never clobbered. When the slot is busy past
 * the operation deadline, the holder is refreshing it anyway. */
void tr_slot_invalidate(struct slot *s, const struct conn *used)
{
	struct conn *old = NULL;

	if (tr_slot_lock(s) < 0)
		return;
	if (s->conn != NULL && tr_conn_same(s->conn, used)) {
		old = s->conn;
		s->conn = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	tr_conn_unref(old);
}

/* The seed's request(): the cached connection, fetched and activated when
 * the slot is empty. Returns a reference. */
int tr_slot_connection(struct transport *t, struct slot *s, const char *id,
		       const char *op, struct conn **out, struct sbx_error *err)
{
	struct conn *c = NULL;
	int rc = 0;

	if (tr_slot_lock(s) < 0) {
		tr_op_late(err, op,
			   "while another request refreshed the sandbox's "
			   "connection");
		return -EIO;
	}
	if (s->conn == NULL) {
		rc = tr_fetch_connection(t, id, &c, err);
		if (rc == 0) {
			rc = tr_activate_connection(t, s, id, c, err);
			if (rc == 0) {
				s->conn = c;
				s->gen++;
			} else {
				tr_conn_unref(c);
			}
		}
	}
	if (rc == 0)
		*out = tr_conn_ref(s->conn);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- the transport object ------------------------------------------------- */

void transport_config_defaults(struct transport_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->connect_timeout_ms = 10000;
	cfg->response_timeout_ms = 60000;
	cfg->body_idle_timeout_ms = 0;
	cfg->ready_timeout_ms = 60000;
	cfg->ready_interval_ms = 500;
	cfg->running_timeout_ms = 120000;
	cfg->max_idle_handles = 16;
	cfg->new_sessions_use_agent = true;
}

/* Every deadline cfg leaves unset (<= 0) gets its default; the idle
 * deadline inside a body defaults to the response deadline. */
static void config_fill(struct transport_config *cfg)
{
	static const size_t deadlines[] = {
		offsetof(struct transport_config, connect_timeout_ms),
		offsetof(struct transport_config, response_timeout_ms),
		offsetof(struct transport_config, ready_timeout_ms),
		offsetof(struct transport_config, ready_interval_ms),
		offsetof(struct transport_config, running_timeout_ms),
	};
	struct transport_config d;
	size_t i;

	transport_config_defaults(&d);
	for (i = 0; i < sizeof(deadlines) / sizeof(deadlines[0]); i++) {
		long *v = (long *)((char *)cfg + deadlines[i]);

		if (*v <= 0)
			*v = *(const long *)((const char *)&d + deadlines[i]);
	}
	if (cfg->body_idle_timeout_ms <= 0)
		cfg->body_idle_timeout_ms = cfg->response_timeout_ms;
}

int transport_new(struct provider *prov, const struct transport_config *cfg,
		  struct transport **out)
{
	struct transport *t;

	if (xfer_global_init() < 0)
		return -EIO;
	t = xcalloc(1, sizeof(*t));
	t->prov = prov;
	if (cfg != NULL)
		t->cfg = *cfg;
	else
		transport_config_defaults(&t->cfg);
	config_fill(&t->cfg);
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->id_lock, NULL);
	*out = t;
	return 0;
}

int transport_set_client_id(struct transport *t, const char *id)
{
	if (id != NULL && !proto_client_id_valid(id))
		return -EINVAL;
	pthread_mutex_lock(&t->id_lock);
	strlcpy_s(t->client_id, id != NULL ? id : "", sizeof(t->client_id));
	pthread_mutex_unlock(&t->id_lock);
	return 0;
}

void transport_free(struct transport *t)
{
	struct slot *s, *next;

	if (t == NULL)
		return;
	for (s = t->slots; s != NULL; s = next) {
		next = s->next;
		xfer_pool_cleanup(&s->pool);
		tr_conn_unref(s->conn);
		pthread_mutex_destroy(&s->lock);
		free(s->id);
		free(s);
	}
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->id_lock);
	free(t);
}

long transport_response_timeout_ms(const struct transport *t)
{
	return t->cfg.response_timeout_ms;
}

void transport_resp_init(struct transport_resp *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->body, 0);
	r->full_size = UINT64_MAX;
}

void transport_resp_cleanup(struct transport_resp *r)
{
	if (r != NULL)
		buf_cleanup(&r->body);
}

unsigned transport_generation(struct transport *t, const char *id)
{
	struct slot *s = tr_slot_get(t, id);
	unsigned gen;

	pthread_mutex_lock(&s->lock);
	gen = s->gen;
	pthread_mutex_unlock(&s->lock);
	return gen;
}

void transport_forget(struct transport *t, const char *id)
{
	struct slot *s = tr_slot_get(t, id);
	struct conn *old;

	pthread_mutex_lock(&s->lock);
	old = s->conn;
	s->conn = NULL;
	pthread_mutex_unlock(&s->lock);
	tr_conn_unref(old);
}

/* ---- test hooks ----------------------------------------------------------- */

void transport_test_set_connection(struct transport *t, const char *id,
				   const char *url, const char *token)
{
	struct slot *s = tr_slot_get(t, id);
	struct conn *old;

	pthread_mutex_lock(&s->lock);
	old = s->conn;
	s->conn = conn_new(url, token, strlen(token));
	pthread_mutex_unlock(&s->lock);
	tr_conn_unref(old);
}

bool transport_test_cached_url(struct transport *t, const char *id, char *url,
			       size_t size)
{
	struct slot *s = tr_slot_get(t, id);
	bool have;

	pthread_mutex_lock(&s->lock);
	have = s->conn != NULL;
	if (have)
		snprintf(url, size, "%s", s->conn->url);
	pthread_mutex_unlock(&s->lock);
	return have;
}
