/* SPDX-License-Identifier: MIT */
/*
 * proto_azure: the Azure data plane's and token endpoints' JSON <-> C
 * structs. cJSON for everything but the exec answer, which a scanner of
 * its own reads so that output bytes survive whole (see the header).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/proto_i.h"

#define MAX_STRING PROTO_RECORD_MAX_STRING

static void say(const char **why, const char *reason)
{
	if (why != NULL)
		*why = reason;
}

static bool is_action(const char *s)
{
	return s != NULL && (strcmp(s, "Allow") == 0 || strcmp(s, "Deny") == 0);
}

/* A rules entry's action may also transform (inject headers) or rewrite
 * the destination (doc/transport-rules.md 10). */
static bool is_rule_action(const char *s)
{
	return is_action(s) || (s != NULL && (strcmp(s, "Transform") == 0 ||
					      strcmp(s, "Rewrite") == 0));
}

static const char *str_of(const cJSON *obj, const char *key)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* ---- sandboxes -------------------------------------------------------- */

static void sandbox_init(struct proto_azure_sandbox *s)
{
	memset(s, 0, sizeof(*s));
	proto_record_init(&s->rec);
}

/* The heap strings of a port, and those a sandbox holds beside its
 * record and its ports. */
static const size_t port_strs[] = {
	offsetof(struct proto_azure_port, url),
	offsetof(struct proto_azure_port, activation_mode),
	offsetof(struct proto_azure_port, protocol),
};
static const size_t sandbox_strs[] = {
	offsetof(struct proto_azure_sandbox, egress.default_action),
	offsetof(struct proto_azure_sandbox, egress.traffic_inspection),
	offsetof(struct proto_azure_sandbox, vnet),
};

void proto_azure_sandbox_cleanup(struct proto_azure_sandbox *s)
{
	if (s == NULL)
		return;
	proto_record_cleanup(&s->rec);
	pj_vec_free(s->ports, s->nports, sizeof(*s->ports), port_strs,
		    NFIELDS(port_strs));
	pj_strs_free(s, sandbox_strs, NFIELDS(sandbox_strs));
	sandbox_init(s);
}

static int decode_port(const cJSON *it, struct proto_azure_port *p,
		       const char **why)
{
	const cJSON *num, *auth;
	double v;
	bool anon;
	int rc;

	if (!cJSON_IsObject(it)) {
		say(why, "a \"ports\" entry is not an object");
		return -EINVAL;
	}
	num = cJSON_GetObjectItemCaseSensitive(it, "port");
	if (num == NULL || pj_num_range(num, 1, 65535, &v) < 0) {
		say(why, "a \"ports\" entry has no port number");
		return -EINVAL;
	}
	p->port = (unsigned)v;
	p->anonymous = -1;
	say(why, "a \"ports\" entry's url is not a string");
	rc = pj_opt_str_max(it, "url", MAX_STRING, &p->url);
	if (rc < 0)
		return rc;
	auth = pj_member(it, "auth");
	if (auth != NULL) {
		if (!cJSON_IsObject(auth)) {
			say(why, "a \"ports\" entry's auth is not an object");
			return -EINVAL;
		}
		rc = pj_bool(auth, "anonymous", false, &anon);
		if (rc == 0)
			p->anonymous = anon;
		else if (rc != -ENOENT) {
			say(why, "a \"ports\" entry's auth.anonymous is not a "
				 "boolean");
			return rc;
		}
	}
	say(why, "a \"ports\" entry's activationMode or protocol is not a "
		 "string");
	rc = pj_opt_str_max(it, "activationMode", MAX_STRING,
			    &p->activation_mode);
	if (rc == 0)
		rc = pj_opt_str_max(it, "protocol", MAX_STRING, &p->protocol);
	return rc;
}

static int decode_ports(const cJSON *root, struct proto_azure_sandbox *s,
			const char **why)
{
	const cJSON *ports = pj_member(root, "ports");
	const cJSON *it;
	int rc;

	if (ports == NULL)
		return 0;
	rc = pj_array(root, "ports", PROTO_AZURE_MAX_PORTS, sizeof(*s->ports),
		      &ports, (void **)&s->ports);
	if (rc == -EINVAL)
		say(why, "\"ports\" is not an array");
	if (rc == -EFBIG)
		say(why, "too many \"ports\" entries");
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(it, ports)
	{
		/* Counted first, so a failure frees what was filled. */
		s->nports++;
		rc = decode_port(it, &s->ports[s->nports - 1], why);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A hostRules entry: a pattern and an action of Allow or Deny. */
static const char *check_host_rule(const cJSON *it)
{
	if (!cJSON_IsObject(it) || str_of(it, "pattern") == NULL)
		return "a hostRules entry has no pattern";
	if (!is_action(str_of(it, "action")))
		return "a hostRules entry's action is neither Allow nor Deny";
	return NULL;
}

/*
 * A rules entry matches on host, path and method (each optional: a rule
 * with no match, or one on a path only, is valid) and acts with Allow,
 * Deny, Transform or Rewrite; what a Transform or Rewrite carries
 * (headers, a target) is the data plane's business.
 */
static const char *check_rule(const cJSON *it)
{
	static const char *const fields[] = {"host", "path", "method"};
	const cJSON *match, *action, *f;
	size_t i;

	if (!cJSON_IsObject(it))
		return "a rules entry is not an object";
	match = pj_member(it, "match");
	if (match != NULL) {
		if (!cJSON_IsObject(match))
			return "a rules entry's match is not an object";
		for (i = 0; i < 3; i++) {
			f = pj_member(match, fields[i]);
			if (f != NULL && !cJSON_IsString(f))
				return "a rules entry's match has a "
				       "host, path or method that is "
				       "not a string";
		}
	}
	action = cJSON_GetObjectItemCaseSensitive(it, "action");
	if (!cJSON_IsObject(action) || !is_rule_action(str_of(action, "type")))
		return "a rules entry's action.type is not Allow, "
		       "Deny, Transform or Rewrite";
	return NULL;
}

/* A list of egress rules: its problems as an array, and the check of one
 * of its entries (NULL when the entry is valid). */
struct rule_list {
	const char *not_array;
	const char *too_many;
	const char *(*check)(const cJSON *entry);
};

static const struct rule_list host_rule_list = {
	"hostRules is not an array", "hostRules has too many entries",
	check_host_rule};
static const struct rule_list rule_list = {
	"rules is not an array", "rules has too many entries", check_rule};

/* The first problem of the list rules (absent is none), counting into
 * *count the entries walked. */
static const char *check_rules(const cJSON *rules, const struct rule_list *l,
			       size_t *count)
{
	const cJSON *it;
	const char *why;

	if (rules == NULL)
		return NULL;
	if (!cJSON_IsArray(rules))
		return l->not_array;
	cJSON_ArrayForEach(it, rules)
	{
		if (++*count > PROTO_AZURE_MAX_RULES)
			return l->too_many;
		why = l->check(it);
		if (why != NULL)
			return why;
	}
	return NULL;
}

static int decode_egress(const cJSON *root, struct proto_azure_egress *e)
{
	static const char *const inspections[] = {"Full", "Partial", "Legacy",
						  "None"};
	const cJSON *pol = pj_member(root, "egressPolicy");
	const cJSON *it;
	const char *problem = NULL, *s;
	size_t i;

	if (pol == NULL)
		return 0;
	e->present = true;
	if (!cJSON_IsObject(pol)) {
		e->problem = "it is not an object";
		return 0;
	}
	e->object = true;
	it = pj_member(pol, "defaultAction");
	if (it == NULL) {
		problem = "it has no defaultAction";
	} else if (!cJSON_IsString(it)) {
		problem = "its defaultAction is not a string";
	} else {
		if (pj_dup(it->valuestring, &e->default_action) < 0)
			return -ENOMEM;
		if (!is_action(it->valuestring))
			problem = "its defaultAction is neither Allow nor Deny";
	}
	s = check_rules(pj_member(pol, "hostRules"), &host_rule_list,
			&e->nhost_rules);
	if (problem == NULL)
		problem = s;
	s = check_rules(pj_member(pol, "rules"), &rule_list, &e->nrules);
	if (problem == NULL)
		problem = s;
	it = pj_member(pol, "trafficInspection");
	if (it != NULL) {
		if (!cJSON_IsString(it)) {
			s = "its trafficInspection is not a string";
		} else {
			if (pj_dup(it->valuestring, &e->traffic_inspection) < 0)
				return -ENOMEM;
			s = "its trafficInspection is not Full, Partial, "
			    "Legacy or None";
			for (i = 0; i < 4; i++)
				if (strcmp(it->valuestring, inspections[i]) ==
				    0)
					s = NULL;
		}
		if (problem == NULL)
			problem = s;
	}
	e->problem = problem;
	return 0;
}

int proto_azure_sandbox_decode(const char *p, size_t n,
			       struct proto_azure_sandbox *out,
			       const char **why)
{
	struct proto_azure_sandbox s;
	const char *reason = "not a JSON object";
	cJSON *root = NULL;
	int rc;

	sandbox_init(&s);
	rc = proto_record_decode(p, n, &s.rec, &reason);
	if (rc < 0)
		goto out;
	root = pj_parse_object(p, n, &rc);
	if (root == NULL)
		goto out;
	rc = decode_ports(root, &s, &reason);
	if (rc < 0)
		goto out;
	reason = "\"vnetConnectionName\" is not a string";
	rc = pj_opt_str_max(root, "vnetConnectionName", MAX_STRING, &s.vnet);
	if (rc < 0)
		goto out;
	reason = "out of memory";
	rc = decode_egress(root, &s.egress);
out:
	cJSON_Delete(root);
	if (rc < 0) {
		say(why, reason);
		proto_azure_sandbox_cleanup(&s);
		return rc;
	}
	*out = s;
	return 0;
}

const struct proto_azure_port *proto_azure_sandbox_port(
	const struct proto_azure_sandbox *s, unsigned port)
{
	size_t i;

	for (i = 0; i < s->nports; i++)
		if (s->ports[i].port == port)
			return &s->ports[i];
	return NULL;
}

int proto_azure_sandbox_copy(struct proto_azure_sandbox *dst,
			     const struct proto_azure_sandbox *src)
{
	struct proto_azure_sandbox s;
	size_t i;
	int rc = 0;

	sandbox_init(&s);
	rc = pj_dup(src->rec.id, &s.rec.id);
	s.rec.state = src->rec.state;
	for (i = 0; rc == 0 && i < src->rec.nlabels; i++)
		rc = proto_record_set_label(&s.rec, src->rec.labels[i].key,
					    src->rec.labels[i].value);
	if (rc == 0 && src->nports > 0) {
		s.ports = calloc(src->nports, sizeof(*s.ports));
		if (s.ports == NULL)
			rc = -ENOMEM;
	}
	for (i = 0; rc == 0 && i < src->nports; i++) {
		const struct proto_azure_port *from = &src->ports[i];
		struct proto_azure_port *to = &s.ports[i];

		s.nports++;
		*to = *from;
		rc = pj_strs_dup(to, from, port_strs, NFIELDS(port_strs));
	}
	/* The egress policy's scalars are copied, its strings duplicated. */
	if (rc == 0) {
		s.egress = src->egress;
		rc = pj_strs_dup(&s, src, sandbox_strs, NFIELDS(sandbox_strs));
	}
	if (rc < 0) {
		proto_azure_sandbox_cleanup(&s);
		return rc;
	}
	*dst = s;
	return 0;
}

/* ---- lists ------------------------------------------------------------ */

void proto_azure_list_cleanup(struct proto_azure_list *l)
{
	size_t i;

	if (l == NULL)
		return;
	for (i = 0; i < l->n; i++) {
		free(l->ids[i]);
		proto_azure_sandbox_cleanup(&l->records[i]);
	}
	free(l->ids);
	free(l->records);
	free(l->decoded);
	free(l->next_link);
	memset(l, 0, sizeof(*l));
}

/* A body that is not a JSON object is not valid JSON here (-EBADMSG). */
static cJSON *parse_page(const char *p, size_t n, int *err)
{
	cJSON *root = pj_parse_object(p, n, err);

	if (root == NULL && *err == -EINVAL)
		*err = -EBADMSG;
	return root;
}

/* A page of the sandbox list into l; *(const char **)arg says why it
 * failed (proto_azure_list_decode). */
static int list_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_azure_list *l = dst;
	const char **reason = arg;
	const cJSON *value, *it;
	int count, rc;

	count = pj_array(root, "value", PROTO_AZURE_MAX_LIST, sizeof(*l->ids),
			 &value, (void **)&l->ids);
	*reason = count == -EINVAL  ? "\"value\" is missing or not an array"
		  : count == -EFBIG ? "the page lists too many sandboxes"
				    : "out of memory";
	if (count > 0) {
		l->records = calloc((size_t)count, sizeof(*l->records));
		l->decoded = calloc((size_t)count, sizeof(*l->decoded));
		if (l->records == NULL || l->decoded == NULL)
			count = -ENOMEM;
	}
	if (count < 0)
		return count;
	cJSON_ArrayForEach(it, value)
	{
		const char *id = str_of(it, "id");
		char *text;

		if (!cJSON_IsObject(it) || id == NULL || *id == '\0' ||
		    strlen(id) > MAX_STRING) {
			*reason = "a \"value\" entry has no id";
			return -EINVAL;
		}
		sandbox_init(&l->records[l->n]);
		l->ids[l->n] = strdup(id);
		l->n++;
		if (l->ids[l->n - 1] == NULL)
			return -ENOMEM;
		text = cJSON_PrintUnformatted(it);
		if (text == NULL)
			return -ENOMEM;
		l->decoded[l->n - 1] =
			proto_azure_sandbox_decode(text, strlen(text),
						   &l->records[l->n - 1],
						   NULL) == 0;
		cJSON_free(text);
	}
	*reason = "\"nextLink\" is not a string";
	rc = pj_opt_str_max(root, "nextLink", MAX_STRING, &l->next_link);
	if (rc == 0 && l->next_link != NULL && *l->next_link == '\0') {
		free(l->next_link);
		l->next_link = NULL;
	}
	return rc;
}

PJ_BODY(list_body, struct proto_azure_list, parse_page, list_fill,
	proto_azure_list_cleanup);

int proto_azure_list_decode(const char *p, size_t n,
			    struct proto_azure_list *out, const char **why)
{
	const char *reason = "not a JSON object";
	int rc = pj_decode(p, n, &list_body, &reason, out);

	if (rc < 0)
		say(why, reason);
	return rc;
}

/* ---- ports ------------------------------------------------------------- */

int proto_azure_port_add_encode(unsigned port, bool anonymous, const char *mode,
				struct buf *out)
{
	cJSON *root = cJSON_CreateObject(), *auth;
	int rc = -ENOMEM;

	if (root == NULL)
		return -ENOMEM;
	if (cJSON_AddNumberToObject(root, "port", port) == NULL)
		goto out;
	auth = cJSON_AddObjectToObject(root, "auth");
	if (auth == NULL ||
	    cJSON_AddBoolToObject(auth, "anonymous", anonymous) == NULL)
		goto out;
	if (cJSON_AddStringToObject(root, "activationMode", mode) == NULL)
		goto out;
	rc = pj_print(root, out);
out:
	cJSON_Delete(root);
	return rc;
}

int proto_azure_port_add_decode(const char *p, size_t n, unsigned *port,
				bool *anonymous, char **mode)
{
	const cJSON *num, *auth;
	char *m = NULL;
	bool anon = false;
	cJSON *root;
	double v = 0;
	int rc = 0;

	root = pj_parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	num = cJSON_GetObjectItemCaseSensitive(root, "port");
	rc = num == NULL ? -EINVAL : pj_num_range(num, 1, 65535, &v);
	auth = cJSON_GetObjectItemCaseSensitive(root, "auth");
	if (rc == 0 && cJSON_IsObject(auth)) {
		rc = pj_bool(auth, "anonymous", false, &anon);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0)
		rc = pj_opt_str_max(root, "activationMode", MAX_STRING, &m);
	cJSON_Delete(root);
	if (rc < 0)
		return rc;
	*port = (unsigned)v;
	*anonymous = anon;
	*mode = m;
	return 0;
}

/* ---- tokens ------------------------------------------------------------ */

void proto_azure_token_cleanup(struct proto_azure_token *t)
{
	if (t == NULL)
		return;
	if (t->token != NULL) {
		/* proto links no OpenSSL: a volatile store the compiler
		 * cannot drop. */
		volatile char *v = t->token;

		while (*v != '\0')
			*v++ = '\0';
		free(t->token);
	}
	memset(t, 0, sizeof(*t));
}

/* Seconds as a JSON number or a string of digits; -EINVAL otherwise,
 * -ENOENT when absent or null. */
static int seconds_field(const cJSON *root, const char *key, int64_t *out)
{
	const cJSON *it = pj_member(root, key);
	double v;

	if (it == NULL)
		return -ENOENT;
	if (cJSON_IsNumber(it)) {
		if (pj_num_range(it, 0, 1e12, &v) < 0)
			return -EINVAL;
		*out = (int64_t)v;
		return 0;
	}
	if (cJSON_IsString(it)) {
		const char *s = it->valuestring;
		size_t n = strlen(s);
		char *end = NULL;
		long long ll;

		if (n == 0 || n > 12 || strspn(s, "0123456789") != n)
			return -EINVAL;
		ll = strtoll(s, &end, 10);
		*out = ll;
		return 0;
	}
	return -EINVAL;
}

/* The CLI's "expiresOn": local time "YYYY-MM-DD HH:MM:SS[.frac]". */
static int local_time_field(const char *s, int64_t *out)
{
	struct tm tm;
	const char *rest;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	rest = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	if (rest == NULL)
		return -EINVAL;
	if (*rest == '.') {
		rest++;
		if (strspn(rest, "0123456789") != strlen(rest) || *rest == '\0')
			return -EINVAL;
	} else if (*rest != '\0') {
		return -EINVAL;
	}
	tm.tm_isdst = -1;
	t = mktime(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*out = (int64_t)t;
	return 0;
}

/* What a token decoding is told (now) and tells (why it failed). */
struct token_arg {
	int64_t now;
	const char *reason;
};

/* A token answer's members into t (proto_azure_token_decode). */
static int token_fill(const cJSON *root, void *dst, void *arg)
{
	struct proto_azure_token *t = dst;
	struct token_arg *a = arg;
	const char *s;
	int64_t v = 0;
	size_t i, len;
	int rc;

	rc = pj_str(root, "access_token", false, &s);
	if (rc == -ENOENT)
		rc = pj_str(root, "accessToken", false, &s);
	a->reason = "it carries no access token";
	if (rc < 0)
		return -EINVAL;
	len = strlen(s);
	a->reason = "its access token is empty, too long or not printable";
	if (len == 0 || len > PROTO_AZURE_MAX_TOKEN)
		return -EINVAL;
	/* It goes into an HTTP header: nothing but visible ASCII. */
	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return -EINVAL;
	a->reason = "its expiry is not a time";
	rc = seconds_field(root, "expires_on", &v);
	if (rc == -ENOENT) {
		rc = seconds_field(root, "expires_in", &v);
		if (rc == 0)
			v += a->now;
	}
	if (rc == -ENOENT) {
		const char *when;

		rc = pj_str(root, "expiresOn", false, &when);
		if (rc == 0)
			rc = local_time_field(when, &v);
	}
	if (rc == -ENOENT)
		a->reason = "it carries no expiry";
	if (rc < 0)
		return -EINVAL;
	t->token = strdup(s);
	if (t->token == NULL) {
		a->reason = "out of memory";
		return -ENOMEM;
	}
	t->expires_on = v;
	return 0;
}

PJ_BODY_PLAIN(token_body, struct proto_azure_token, pj_parse_object,
	      token_fill);

int proto_azure_token_decode(const char *p, size_t n, int64_t now,
			     struct proto_azure_token *out, const char **why)
{
	struct token_arg a = {now, "not a JSON object"};
	int rc = pj_decode(p, n, &token_body, &a, out);

	if (rc < 0)
		say(why, a.reason);
	return rc;
}

/* ---- error bodies -------------------------------------------------------- */

static void printable(char *dst, size_t dstsz, const char *src)
{
	size_t i, o = 0;

	if (dstsz == 0)
		return;
	for (i = 0; src != NULL && src[i] != '\0' && o + 1 < dstsz; i++) {
		unsigned char c = (unsigned char)src[i];

		if (c == '\r' || c == '\n' || c == '\t')
			c = ' ';
		dst[o++] = c >= 0x20 && c != 0x7f ? (char)c : '?';
	}
	dst[o] = '\0';
}

bool proto_azure_error_decode(const char *p, size_t n, char *code,
			      size_t codesz, char *msg, size_t msgsz)
{
	const cJSON *err;
	const char *c = NULL, *m = NULL;
	cJSON *root;
	int rc = 0;

	printable(code, codesz, "");
	printable(msg, msgsz, "");
	root = pj_parse_object(p, n, &rc);
	if (root == NULL)
		return false;
	err = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (cJSON_IsObject(err)) {
		c = str_of(err, "code");
		m = str_of(err, "message");
	} else if (cJSON_IsString(err)) {
		c = err->valuestring;
		m = str_of(root, "error_description");
	} else {
		c = str_of(root, "code");
		m = str_of(root, "message");
	}
	printable(code, codesz, c);
	printable(msg, msgsz, m);
	cJSON_Delete(root);
	return c != NULL || m != NULL;
}
