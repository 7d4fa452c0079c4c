/* SPDX-License-Identifier: MIT */
/*
 * provider_azure: the Azure sandbox data plane as a struct provider.
 * Metadata and lifecycle only: the agent protocol is the transport core's
 * business, and the HTTP exchanges go through transport_http (no proxy,
 * no redirects, bounded answers, deadlines). JSON is proto_azure's.
 *
 * The record cache holds one decoded sandbox object per id, from the last
 * read or list. record() never answers from it (the transport reads the
 * record before every operation, doc/transport-rules.md 1); only
 * record_listed() does, to show sandboxes in a listing, for
 * record_cache_ms. Two flags: needs_fresh (set by resume() and stop())
 * makes the next record_listed() go out, and judgeable says the entry came
 * from record() itself, not from route()'s read or a list page, so that
 * judge() looks at the record the activation read. The data plane, native
 * sessions and the settings have files of their own (provider_azure_i.h).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/token.h"
#include "common/xalloc.h"
#include "common/strv.h"
#include "client/provider_azure.h"
#include "client/provider_azure_i.h"
#include "client/transport.h"

#define MAX_PINS 64
#define MAX_CREDENTIAL 4096
#define ID_CHARS \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

void azure_count(struct azure_priv *ap, unsigned *field)
{
	pthread_mutex_lock(&ap->lock);
	(*field)++;
	pthread_mutex_unlock(&ap->lock);
}

/* ---- records ---------------------------------------------------------- */

bool azure_id_valid(const char *id)
{
	size_t n = strlen(id);

	return n > 0 && n <= PROVIDER_ID_MAX && strspn(id, ID_CHARS) == n;
}

int azure_bad_id(const char *id, struct sbx_error *err)
{
	return sbx_error_fail(err, SBX_INVALID_INPUT, NULL, ENOENT,
			      "azure: '%.64s' is not a sandbox name", id);
}

static struct entry *entry_find(struct azure_priv *ap, const char *id)
{
	struct entry *e;

	for (e = ap->entries; e != NULL; e = e->next)
		if (strcmp(e->id, id) == 0)
			return e;
	return NULL;
}

static void entry_drop(struct azure_priv *ap, const char *id)
{
	struct entry **pp, *e;

	for (pp = &ap->entries; (e = *pp) != NULL; pp = &e->next) {
		if (strcmp(e->id, id) == 0) {
			*pp = e->next;
			proto_azure_sandbox_cleanup(&e->sb);
			free(e);
			ap->nentries--;
			return;
		}
	}
}

/* Keep a copy of sb (read from the data plane at read_ms). Under lock. */
static void entry_store(struct azure_priv *ap,
			const struct proto_azure_sandbox *sb, long long read_ms,
			bool judgeable)
{
	struct entry *e = entry_find(ap, sb->rec.id), *oldest, *it;
	struct proto_azure_sandbox copy;

	if (proto_azure_sandbox_copy(&copy, sb) < 0)
		return;
	if (e == NULL) {
		if (ap->nentries >= PROVIDER_AZURE_MAX_CACHED) {
			oldest = ap->entries;
			for (it = ap->entries; it != NULL; it = it->next)
				if (it->read_ms < oldest->read_ms)
					oldest = it;
			entry_drop(ap, oldest->id);
		}
		e = xcalloc(1, sizeof(*e));
		snprintf(e->id, sizeof(e->id), "%s", sb->rec.id);
		e->next = ap->entries;
		ap->entries = e;
		ap->nentries++;
	} else {
		proto_azure_sandbox_cleanup(&e->sb);
	}
	e->sb = copy;
	e->read_ms = read_ms;
	e->needs_fresh = false;
	e->judgeable = judgeable;
}

static void mark_stale(struct azure_priv *ap, const char *id)
{
	struct entry *e;

	pthread_mutex_lock(&ap->lock);
	e = entry_find(ap, id);
	if (e != NULL)
		e->needs_fresh = true;
	pthread_mutex_unlock(&ap->lock);
}

/* GET the sandbox object of id. -ENOENT when it is gone (and forgotten). */
static int fetch_sandbox(struct azure_priv *ap, const char *id,
			 struct proto_azure_sandbox *out, struct sbx_error *err)
{
	struct transport_resp resp;
	struct dp_req r;
	char what[128], path[128];
	const char *why = "";
	int rc;

	snprintf(what, sizeof(what), "read sandbox '%s'", id);
	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	r = azure_dp_req(what, "GET", path, PROVIDER_AZURE_MAX_RECORD,
			 PROVIDER_AZURE_TIMEOUT_MS);
	r.json = true;
	transport_resp_init(&resp);
	rc = azure_dp_call(ap, &r, &resp, err);
	if (rc == -ENOENT) {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_GONE,
			      "azure: sandbox '%s' does not exist", id);
		pthread_mutex_lock(&ap->lock);
		entry_drop(ap, id);
		pthread_mutex_unlock(&ap->lock);
		goto out;
	}
	if (rc < 0)
		goto out;
	rc = proto_azure_sandbox_decode(resp.body.data, resp.body.len, out,
					&why);
	if (rc == 0 && strcmp(out->rec.id, id) != 0) {
		proto_azure_sandbox_cleanup(out);
		why = "it names another sandbox";
		rc = -EINVAL;
	}
	if (rc < 0) {
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "azure: the data plane's record of sandbox '%s' "
			      "is malformed: %s",
			      id, why);
		rc = -EIO;
	}
out:
	transport_resp_cleanup(&resp);
	return rc;
}

/* fetch_sandbox, and the record kept in the cache as read when the fetch
 * began; judgeable: an activation may judge it without a read of its own. */
static int fetch_and_keep(struct azure_priv *ap, const char *id,
			  struct proto_azure_sandbox *out, bool judgeable,
			  struct sbx_error *err)
{
	long long now = clock_mono_ms();
	int rc;

	rc = fetch_sandbox(ap, id, out, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ap->lock);
	entry_store(ap, out, now, judgeable);
	pthread_mutex_unlock(&ap->lock);
	return 0;
}

static void to_record(const struct proto_azure_sandbox *sb,
		      struct provider_record *out)
{
	const struct proto_azure_port *port;
	struct provider_record r;
	size_t i;

	memset(&r, 0, sizeof(r));
	snprintf(r.id, sizeof(r.id), "%s", sb->rec.id);
	/* The two enums list the Azure states in the same order. */
	r.state = (enum provider_state)sb->rec.state;
	if (sb->rec.nlabels > 0)
		r.labels = xcalloc(sb->rec.nlabels, sizeof(*r.labels));
	for (i = 0; i < sb->rec.nlabels; i++) {
		r.labels[i].key = xstrdup(sb->rec.labels[i].key);
		r.labels[i].value = xstrdup(sb->rec.labels[i].value);
		r.nlabels++;
	}
	port = proto_azure_sandbox_port(sb, PROTO_AZURE_AGENT_PORT);
	if (port != NULL && port->url != NULL)
		r.route_hint = xstrdup(port->url);
	*out = r;
}

static int azure_record(struct provider *p, const char *id,
			struct provider_record *out, struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct proto_azure_sandbox sb;
	int rc;

	if (!azure_id_valid(id))
		return azure_bad_id(id, err);
	azure_count(ap, &ap->stats.record_reads);
	rc = fetch_and_keep(ap, id, &sb, true, err);
	if (rc < 0)
		return rc;
	to_record(&sb, out);
	proto_azure_sandbox_cleanup(&sb);
	return 0;
}

static int azure_record_listed(struct provider *p, const char *id,
			       struct provider_record *out,
			       struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct entry *e;

	if (!azure_id_valid(id))
		return azure_bad_id(id, err);
	pthread_mutex_lock(&ap->lock);
	e = entry_find(ap, id);
	if (e != NULL && !e->needs_fresh && ap->cache_ms > 0 &&
	    clock_mono_ms() - e->read_ms < ap->cache_ms) {
		ap->stats.record_hits++;
		to_record(&e->sb, out);
		pthread_mutex_unlock(&ap->lock);
		return 0;
	}
	pthread_mutex_unlock(&ap->lock);
	return azure_record(p, id, out, err);
}

/* ---- the agent's route and credential ---------------------------------- */

static int add_agent_port(struct azure_priv *ap, const char *id,
			  struct sbx_error *err)
{
	struct transport_resp resp;
	struct buf body = BUF_INIT(0);
	struct dp_req r;
	char what[128], path[128];
	int rc;

	rc = proto_azure_port_add_encode(PROTO_AZURE_AGENT_PORT, true, "Always",
					 &body);
	if (rc < 0) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: out of memory");
		return rc;
	}
	snprintf(what, sizeof(what), "open the agent port of sandbox '%s'", id);
	snprintf(path, sizeof(path), "/sandboxes/%s/ports/add", id);
	r = azure_dp_req(what, "POST", path, PROVIDER_AZURE_MAX_RECORD,
			 PROVIDER_AZURE_TIMEOUT_MS);
	azure_dp_json(&r, &body);
	transport_resp_init(&resp);
	azure_count(ap, &ap->stats.ports_added);
	rc = azure_dp_call(ap, &r, &resp, err);
	transport_resp_cleanup(&resp);
	buf_cleanup(&body);
	return rc;
}

static int azure_route(struct provider *p, const char *id, char **url,
		       struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	const struct proto_azure_port *port;
	struct proto_azure_sandbox sb;
	bool added = false;
	int rc;

	if (!azure_id_valid(id))
		return azure_bad_id(id, err);
	azure_count(ap, &ap->stats.routes);
	for (;;) {
		/* A route fetch comes before an activation, whose judged
		 * read must be its own: this read is not reused. */
		rc = fetch_and_keep(ap, id, &sb, false, err);
		if (rc < 0)
			return rc;
		port = proto_azure_sandbox_port(&sb, PROTO_AZURE_AGENT_PORT);
		if (port != NULL || added ||
		    sb.rec.state != PROTO_RECORD_RUNNING)
			break;
		proto_azure_sandbox_cleanup(&sb);
		rc = add_agent_port(ap, id, err);
		if (rc < 0)
			return rc;
		added = true;
	}
	if (sb.rec.state != PROTO_RECORD_RUNNING) {
		/* A stopped sandbox's proxy route leads nowhere; the record
		 * read next (fresh) lets the caller resume it. */
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: sandbox '%s' is %s, not Running: its "
			      "agent has no route",
			      id,
			      proto_record_state_name(sb.rec.state)
				      ? proto_record_state_name(sb.rec.state)
				      : "in an unknown state");
		rc = -EIO;
	} else if (port == NULL || port->url == NULL) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: sandbox '%s' has no URL for the agent "
			      "port %d yet",
			      id, PROTO_AZURE_AGENT_PORT);
		rc = -EIO;
	} else {
		*url = xstrdup(port->url);
		rc = 0;
	}
	proto_azure_sandbox_cleanup(&sb);
	return rc;
}

static bool azure_route_allowed(struct provider *p, const char *url)
{
	(void)p;
	return provider_azure_route_allowed(url);
}

static int azure_credential(struct provider *p, const char *id, char **bytes,
			    size_t *len, struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct transport_resp resp;
	char what[128];
	int rc;

	if (!azure_id_valid(id))
		return azure_bad_id(id, err);
	azure_count(ap, &ap->stats.credentials);
	snprintf(what, sizeof(what),
		 "read the agent credential of sandbox "
		 "'%s'",
		 id);
	transport_resp_init(&resp);
	rc = azure_read_file(ap, id, ap->token_path, MAX_CREDENTIAL, what,
			     &resp, err);
	if (rc == 0) {
		*len = resp.body.len;
		*bytes = xmalloc(resp.body.len + 1);
		memcpy(*bytes, resp.body.data ? resp.body.data : "",
		       resp.body.len);
		(*bytes)[resp.body.len] = '\0';
	}
	/* The answer held this boot's credential. */
	if (resp.body.data != NULL)
		token_wipe(resp.body.data, resp.body.len);
	transport_resp_cleanup(&resp);
	return rc;
}

/* ---- the judge ---------------------------------------------------------- */

static int refuse(struct sbx_error *err, const char *id, const char *why,
		  const char *detail)
{
	sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_TRANSPORT_INVALID,
		      "azure: sandbox '%s' may not be activated: its egress "
		      "policy %s%s",
		      id, why, detail ? detail : "");
	return -EPROTO;
}

static int judge_sandbox(const struct proto_azure_sandbox *sb,
			 struct sbx_error *err)
{
	const struct proto_azure_egress *eg = &sb->egress;

	if (!eg->present)
		return refuse(err, sb->rec.id, "is missing", NULL);
	if (!eg->object)
		return refuse(err, sb->rec.id, "is not an object", NULL);
	if (eg->problem != NULL)
		return refuse(err, sb->rec.id, "is malformed: ", eg->problem);
	/* A vnet connection routes the sandbox's traffic through the
	 * customer's network, whose rules are theirs: accepted. */
	if (sb->vnet != NULL)
		log_debug("azure: sandbox '%s' is connected to vnet '%s'",
			  sb->rec.id, sb->vnet);
	return 0;
}

static int azure_judge(struct provider *p, const struct provider_record *rec,
		       struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct proto_azure_sandbox sb;
	struct entry *e;
	int rc;

	if (!azure_id_valid(rec->id))
		return azure_bad_id(rec->id, err);
	pthread_mutex_lock(&ap->lock);
	ap->stats.judges++;
	e = entry_find(ap, rec->id);
	if (e != NULL && e->judgeable) {
		rc = judge_sandbox(&e->sb, err);
		pthread_mutex_unlock(&ap->lock);
		return rc;
	}
	/* The record the core read is not the one kept (a concurrent route
	 * fetch replaced it): read it again. */
	ap->stats.record_reads++;
	pthread_mutex_unlock(&ap->lock);
	rc = fetch_sandbox(ap, rec->id, &sb, err);
	if (rc < 0)
		return rc;
	rc = judge_sandbox(&sb, err);
	proto_azure_sandbox_cleanup(&sb);
	return rc;
}

/* ---- lifecycle ------------------------------------------------------------ */

static int lifecycle(struct provider *p, const char *id, const char *verb,
		     unsigned *counter, struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct transport_resp resp;
	struct dp_req r;
	char what[128], path[128];
	int rc;

	if (!azure_id_valid(id))
		return azure_bad_id(id, err);
	azure_count(ap, counter);
	snprintf(what, sizeof(what), "%s sandbox '%s'", verb, id);
	snprintf(path, sizeof(path), "/sandboxes/%s/%s", id, verb);
	r = azure_dp_req(what, "POST", path, PROVIDER_AZURE_MAX_RECORD,
			 PROVIDER_AZURE_TIMEOUT_MS);
	transport_resp_init(&resp);
	rc = azure_dp_call(ap, &r, &resp, err);
	transport_resp_cleanup(&resp);
	/* Whatever the answer, the next record must come from the data
	 * plane: the state is changing. */
	mark_stale(ap, id);
	if (rc == -ENOENT)
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_GONE,
			      "azure: %s: sandbox '%s' does not exist", verb,
			      id);
	return rc;
}

static int azure_resume(struct provider *p, const char *id,
			struct sbx_error *err)
{
	return lifecycle(p, id, "resume", &azure_priv_of(p)->stats.resumes,
			 err);
}

static int azure_stop(struct provider *p, const char *id, struct sbx_error *err)
{
	return lifecycle(p, id, "stop", &azure_priv_of(p)->stats.stops, err);
}

/* ---- list ---------------------------------------------------------------- */

/* The path and query of a nextLink, which must stay under our group on
 * the data plane's own origin: the bearer goes nowhere else. The
 * link's api-version is replaced by ours. */
static char *next_path(struct azure_priv *ap, const char *link)
{
	size_t n = strlen(ap->base_url), g = strlen(ap->group_path);
	struct buf b = BUF_INIT(8192);
	const char *rest, *q, *m;
	int rc;

	if (strncmp(link, ap->base_url, n) != 0 || link[n] != '/')
		return NULL;
	rest = link + n;
	if (strncmp(rest, ap->group_path, g) != 0 || rest[g] != '/' ||
	    !azure_url_bytes_ok(rest, "#\\"))
		return NULL;
	q = strchr(rest, '?');
	rc = buf_append(&b, rest, q ? (size_t)(q - rest) : strlen(rest));
	for (m = q ? q + 1 : NULL; rc == 0 && m != NULL && *m != '\0';) {
		size_t len = strcspn(m, "&");

		if (len > 0 && strncmp(m, "api-version=", 12) != 0) {
			rc = buf_append(&b, strchr(b.data, '?') ? "&" : "?", 1);
			if (rc == 0)
				rc = buf_append(&b, m, len);
		}
		m += len;
		if (*m == '&')
			m++;
	}
	if (rc < 0) {
		buf_cleanup(&b);
		return NULL;
	}
	return buf_take(&b, NULL);
}

/* A list page's ids into ids[n] (growing to cap), and its records into
 * the cache (read at now): to show the sandboxes in a listing, not to
 * judge them. */
static void take_page(struct azure_priv *ap,
		      const struct proto_azure_list *page, long long now,
		      char ***ids, size_t *n, size_t *cap)
{
	size_t i;

	pthread_mutex_lock(&ap->lock);
	for (i = 0; i < page->n; i++) {
		if (!azure_id_valid(page->ids[i])) {
			log_debug("azure: list: ignoring sandbox id '%.64s', "
				  "which is not a name this mount can show",
				  page->ids[i]);
			continue;
		}
		if (page->decoded[i])
			entry_store(ap, &page->records[i], now, false);
		if (*n == PROVIDER_AZURE_MAX_SANDBOXES)
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 64;
			*ids = xrealloc(*ids, *cap * sizeof(**ids));
		}
		(*ids)[(*n)++] = xstrdup(page->ids[i]);
	}
	pthread_mutex_unlock(&ap->lock);
}

static int azure_list(struct provider *p, char ***ids_out, size_t *n_out,
		      struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct transport_resp resp;
	struct proto_azure_list page;
	char **ids = NULL;
	char *path = xstrdup("/sandboxes");
	size_t n = 0, cap = 0;
	bool absolute = false;
	unsigned pages;
	const char *why = "";
	int rc = 0;

	transport_resp_init(&resp);
	for (pages = 0; path != NULL; pages++) {
		struct dp_req r;
		long long now = clock_mono_ms();

		if (pages == PROVIDER_AZURE_MAX_PAGES) {
			sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
				      "azure: list sandboxes: more than %d "
				      "pages",
				      PROVIDER_AZURE_MAX_PAGES);
			rc = -EIO;
			goto out;
		}
		r = azure_dp_req("list sandboxes", "GET", path,
				 16 * PROVIDER_AZURE_MAX_RECORD,
				 PROVIDER_AZURE_TIMEOUT_MS);
		r.absolute = absolute;
		r.json = true;
		azure_count(ap, &ap->stats.list_pages);
		rc = azure_dp_call(ap, &r, &resp, err);
		if (rc == -ENOENT) {
			sbx_error_set(err, SBX_COMMAND_FAILED, NULL,
				      "azure: list sandboxes: the sandbox "
				      "group does not exist");
			err->err = ENOENT;
		}
		if (rc < 0)
			goto out;
		rc = proto_azure_list_decode(resp.body.data, resp.body.len,
					     &page, &why);
		if (rc < 0) {
			sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
				      "azure: list sandboxes: the data plane's "
				      "answer is malformed: %s",
				      why);
			rc = -EIO;
			goto out;
		}
		take_page(ap, &page, now, &ids, &n, &cap);
		free(path);
		path = NULL;
		if (page.next_link != NULL) {
			path = next_path(ap, page.next_link);
			absolute = true;
			if (path == NULL) {
				sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
					      "azure: list sandboxes: the "
					      "nextLink leaves the sandbox "
					      "group's URL, which is refused");
				proto_azure_list_cleanup(&page);
				rc = -EIO;
				goto out;
			}
		}
		proto_azure_list_cleanup(&page);
	}
	*ids_out = ids;
	*n_out = n;
	ids = NULL;
	n = 0;
	rc = 0;
out:
	transport_resp_cleanup(&resp);
	free(path);
	strv_free(ids, n);
	return rc;
}

/* ---- the transport's options ------------------------------------------------ */

static const char *azure_ca_file(struct provider *p)
{
	return azure_priv_of(p)->ca_file;
}

static const char *const *azure_resolve(struct provider *p)
{
	return (const char *const *)azure_priv_of(p)->resolve;
}

/* ---- lifetime ------------------------------------------------------------- */

static void azure_free(struct provider *p)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct entry *e, *next;

	for (e = ap->entries; e != NULL; e = next) {
		next = e->next;
		proto_azure_sandbox_cleanup(&e->sb);
		free(e);
	}
	azure_auth_free(ap->auth);
	transport_http_pool_free(ap->pool);
	strv_free_null(ap->resolve);
	free(ap->base_url);
	free(ap->group_path);
	free(ap->token_path);
	free(ap->native_root);
	free(ap->ca_file);
	pthread_mutex_destroy(&ap->lock);
	free(ap);
}

static const struct provider_ops azure_ops = {
	.name = "azure",
	.list = azure_list,
	.record = azure_record,
	.record_listed = azure_record_listed,
	.route = azure_route,
	.route_allowed = azure_route_allowed,
	.credential = azure_credential,
	.judge = azure_judge,
	.resume = azure_resume,
	.stop = azure_stop,
	.native_read = azure_native_read,
	.native_exec = azure_native_exec,
	.ca_file = azure_ca_file,
	.resolve = azure_resolve,
	.free = azure_free,
};

static bool name_ok(const char *s, size_t max, const char *chars)
{
	size_t n = s != NULL ? strlen(s) : 0;

	return n > 0 && n <= max && strspn(s, chars) == n &&
	       strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* "host:port:addr" entries; the separators of the option are ',', ';'
 * and white space. */
static int parse_pins(const char *text, char ***out, struct sbx_error *err)
{
	char **pins = xcalloc(MAX_PINS + 1, sizeof(*pins));
	const char *p = text;
	size_t n = 0;

	while (p != NULL && *p != '\0') {
		size_t len = strcspn(p, ",; \t\r\n");
		char *pin, *c1, *c2;

		if (len > 0) {
			pin = xstrndup(p, len);
			c1 = strchr(pin, ':');
			c2 = c1 ? strchr(c1 + 1, ':') : NULL;
			if (n == MAX_PINS || c1 == NULL || c2 == NULL ||
			    c1 == pin || c2 == c1 + 1 || c2[1] == '\0' ||
			    strspn(c1 + 1, "0123456789") !=
				    (size_t)(c2 - c1 - 1)) {
				sbx_error_set(err, SBX_INVALID_INPUT, NULL,
					      "azure: azure_resolve: '%.128s' "
					      "is not host:port:address",
					      pin);
				err->err = EINVAL;
				free(pin);
				pins[n] = NULL;
				while (n > 0)
					free(pins[--n]);
				free(pins);
				return -EINVAL;
			}
			pins[n++] = pin;
		}
		p += len;
		if (*p != '\0')
			p++;
	}
	if (n == 0) {
		free(pins);
		pins = NULL;
	}
	*out = pins;
	return 0;
}

static int invalid(struct sbx_error *err, const char *what)
{
	return sbx_error_fail(err, SBX_INVALID_INPUT, NULL, EINVAL, "azure: %s",
			      what);
}

int provider_azure_open(const struct provider_azure_config *cfg,
			struct provider **out, struct sbx_error *err)
{
	struct azure_auth_config acfg;
	struct azure_priv *ap;
	const char *host;
	size_t hostlen, n;
	int rc;

	if (!name_ok(cfg->subscription, 64, ALNUM "-"))
		return invalid(err, "azure_subscription is missing or not a "
				    "subscription id");
	if (!name_ok(cfg->resource_group, 90, ALNUM "-_.()"))
		return invalid(err, "azure_resource_group is missing or not a "
				    "resource group name");
	if (!name_ok(cfg->group, 128, ALNUM "-_."))
		return invalid(err, "azure_group is missing or not a sandbox "
				    "group name");
	if (cfg->endpoint == NULL && !name_ok(cfg->region, 64, ALNUM))
		return invalid(err, "azure_region is missing or not a region "
				    "name");
	if (cfg->endpoint != NULL &&
	    !azure_https_origin(cfg->endpoint, &host, &hostlen))
		return invalid(err, "azure_endpoint is not https://HOST[:PORT] "
				    "(without user, path, query or fragment)");
	if (cfg->token_path != NULL &&
	    (cfg->token_path[0] != '/' || strlen(cfg->token_path) > 4096))
		return invalid(err, "azure_token_path is not an absolute path");
	if (cfg->native_root != NULL &&
	    (cfg->native_root[0] != '/' || strlen(cfg->native_root) > 4096 ||
	     strstr(cfg->native_root, "..") != NULL))
		return invalid(err, "azure_native_root is not an absolute "
				    "path");

	ap = xcalloc(1, sizeof(*ap));
	pthread_mutex_init(&ap->lock, NULL);
	ap->base.ops = &azure_ops;
	ap->base.priv = ap;
	if (cfg->endpoint != NULL) {
		n = strlen(cfg->endpoint);
		if (cfg->endpoint[n - 1] == '/')
			n--;
		ap->base_url = xstrndup(cfg->endpoint, n);
	} else {
		char *region = xstrdup(cfg->region);
		char *c;

		for (c = region; *c != '\0'; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		ap->base_url = xasprintf("https://management.%s."
					 "azuredevcompute.io",
					 region);
		free(region);
	}
	ap->group_path =
		xasprintf("/subscriptions/%s/resourceGroups/%s/"
			  "sandboxGroups/%s",
			  cfg->subscription, cfg->resource_group, cfg->group);
	ap->token_path = xstrdup(cfg->token_path ? cfg->token_path
						 : PROVIDER_AZURE_TOKEN_PATH);
	n = strlen(cfg->native_root ? cfg->native_root
				    : PROVIDER_AZURE_NATIVE_ROOT);
	ap->native_root =
		xstrdup(cfg->native_root ? cfg->native_root
					 : PROVIDER_AZURE_NATIVE_ROOT);
	while (n > 1 && ap->native_root[n - 1] == '/')
		ap->native_root[--n] = '\0';
	ap->ca_file = cfg->ca_file ? xstrdup(cfg->ca_file) : NULL;
	ap->cache_ms = cfg->record_cache_ms < 0 ? PROVIDER_AZURE_RECORD_CACHE_MS
						: cfg->record_cache_ms;
	ap->connect_ms =
		cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 10000;
	if (cfg->resolve != NULL) {
		rc = parse_pins(cfg->resolve, &ap->resolve, err);
		if (rc < 0)
			goto fail;
	}
	memset(&acfg, 0, sizeof(acfg));
	acfg.env = cfg->env;
	acfg.ca_file = ap->ca_file;
	acfg.resolve = (const char *const *)ap->resolve;
	acfg.connect_timeout_ms = ap->connect_ms;
	ap->pool = transport_http_pool_new();
	acfg.pool = ap->pool;
	rc = azure_auth_new(&acfg, &ap->auth, err);
	if (rc < 0)
		goto fail;
	*out = &ap->base;
	return 0;
fail:
	azure_free(&ap->base);
	return rc;
}

void provider_azure_stats(struct provider *p, struct provider_azure_stats *out)
{
	struct azure_priv *ap = azure_priv_of(p);

	pthread_mutex_lock(&ap->lock);
	*out = ap->stats;
	pthread_mutex_unlock(&ap->lock);
}

/*
 * Before anything is mounted, get an access token once: a machine with no
 * usable credential fails the mount with the reason (what the chain tried)
 * instead of mounting and answering every operation with EACCES. A token
 * endpoint that cannot be reached now (a machine still coming up) is a
 * warning: the mount goes on and tries again on use. Frees p on failure.
 */
static int preflight(struct provider *p, struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	char *auth = NULL;
	unsigned gen = 0;
	int rc;

	rc = azure_auth_header(ap->auth, &auth, &gen, err);
	token_free(auth);
	if (rc == 0)
		return 0;
	if (err->retryable) {
		log_warn("%s (mounting anyway: the credential is asked for "
			 "again on use)",
			 err->reason);
		sbx_error_clear(err);
		return 0;
	}
	provider_free(p);
	return rc;
}

int provider_azure_new(const struct provider_opts *o, struct provider **out,
		       struct sbx_error *err)
{
	struct provider_azure_settings s;
	struct provider_azure_config cfg;
	struct provider *p = NULL;
	int rc;

	rc = provider_azure_settings_load(o, NULL, &s, err);
	if (rc < 0)
		return rc;
	provider_azure_settings_config(&s, &cfg);
	cfg.connect_timeout_ms = o != NULL ? o->connect_timeout_ms : 0;
	rc = provider_azure_open(&cfg, &p, err);
	provider_azure_settings_cleanup(&s);
	if (rc == 0)
		rc = preflight(p, err);
	if (rc == 0)
		*out = p;
	return rc;
}
