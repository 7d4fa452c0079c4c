/* SPDX-License-Identifier: MIT */
/*
 * proto_azure_exec: the Azure data plane's native exec, both ways: the
 * request {"command","workingDirectory"} and the answer {"stdout",
 * "stderr","exitCode"}, read by a strict scanner of its own so that the
 * output bytes survive whole and bounded (proto_azure.h).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/hex.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/proto_i.h"

static void say(const char **why, const char *reason)
{
	if (why != NULL)
		*why = reason;
}

/* ---- the exec answer: a scanner that keeps every byte ------------------- */

struct scan {
	const char *p;
	const char *end;
	unsigned depth;
};

#define SCAN_MAX_DEPTH 64

static void scan_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
				 *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	int i, d;

	for (i = 0; i < 4; i++) {
		d = hex_digit(p[i]);
		if (d < 0)
			return -EINVAL;
		v = v << 4 | (unsigned)d;
	}
	*out = v;
	return 0;
}

/* Append code point cp as UTF-8 to out (when out is not NULL and has
 * room; *cut records a drop). */
static void put_bytes(struct buf *out, const char *b, size_t n, bool *cut)
{
	if (out == NULL || *cut)
		return;
	if (out->max != 0 && out->len + n > out->max) {
		*cut = true;
		return;
	}
	if (buf_append(out, b, n) < 0)
		*cut = true;
}

static void put_cp(struct buf *out, unsigned cp, bool *cut)
{
	char b[4];
	size_t n;

	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	put_bytes(out, b, n, cut);
}

/* The byte a one-character JSON escape (\" \\ \/ \b \f \n \r \t) stands
 * for, or NULL when c names none of them. */
static const char *short_escape(unsigned char c)
{
	static const char names[] = "\"\\/bfnrt";
	static const char bytes[] = "\"\\/\b\f\n\r\t";
	const char *hit = c != '\0' ? strchr(names, c) : NULL;

	return hit != NULL ? &bytes[hit - names] : NULL;
}

/* A \uXXXX escape whose hex digits are at s->p, with the low half of a
 * surrogate pair when one follows, appended to out as UTF-8. */
static int scan_unicode(struct scan *s, struct buf *out, bool *cut)
{
	unsigned cp, lo;

	if (s->end - s->p < 4 || hex4(s->p, &cp) < 0)
		return -EINVAL;
	s->p += 4;
	if (cp >= 0xd800 && cp < 0xdc00 && s->end - s->p >= 6 &&
	    s->p[0] == '\\' && s->p[1] == 'u' && hex4(s->p + 2, &lo) == 0 &&
	    lo >= 0xdc00 && lo < 0xe000) {
		s->p += 6;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	} else if (cp >= 0xd800 && cp < 0xe000) {
		cp = 0xfffd;
	}
	put_cp(out, cp, cut);
	return 0;
}

/*
 * A JSON string at s->p (which must be '"'), its bytes appended to out
 * (NULL: skipped). A lone surrogate becomes U+FFFD, as decoders commonly
 * do; raw bytes are kept as they come (the data plane sends UTF-8).
 */
static int scan_string(struct scan *s, struct buf *out, bool *cut)
{
	if (s->p >= s->end || *s->p != '"')
		return -EINVAL;
	s->p++;
	while (s->p < s->end) {
		unsigned char c = (unsigned char)*s->p;
		const char *run = s->p;
		const char *esc;
		int rc;

		if (c == '"') {
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return -EINVAL;
		if (c != '\\') {
			while (s->p < s->end && *s->p != '"' && *s->p != '\\' &&
			       (unsigned char)*s->p >= 0x20)
				s->p++;
			put_bytes(out, run, (size_t)(s->p - run), cut);
			continue;
		}
		if (s->end - s->p < 2)
			return -EINVAL;
		c = (unsigned char)s->p[1];
		s->p += 2;
		if (c == 'u') {
			rc = scan_unicode(s, out, cut);
			if (rc < 0)
				return rc;
			continue;
		}
		esc = short_escape(c);
		if (esc == NULL)
			return -EINVAL;
		put_bytes(out, esc, 1, cut);
	}
	return -EINVAL;
}

/* A JSON number; its value when it is a plain integer literal. */
static int scan_number(struct scan *s, bool *integer, long long *value)
{
	const char *start = s->p;
	char text[32];
	size_t n;

	*integer = true;
	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p >= s->end || !isdigit((unsigned char)*s->p))
		return -EINVAL;
	if (*s->p == '0' && s->end - s->p > 1 &&
	    isdigit((unsigned char)s->p[1]))
		return -EINVAL;
	while (s->p < s->end && isdigit((unsigned char)*s->p))
		s->p++;
	if (s->p < s->end && *s->p == '.') {
		*integer = false;
		s->p++;
		if (s->p >= s->end || !isdigit((unsigned char)*s->p))
			return -EINVAL;
		while (s->p < s->end && isdigit((unsigned char)*s->p))
			s->p++;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		*integer = false;
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (s->p >= s->end || !isdigit((unsigned char)*s->p))
			return -EINVAL;
		while (s->p < s->end && isdigit((unsigned char)*s->p))
			s->p++;
	}
	n = (size_t)(s->p - start);
	if (*integer) {
		if (n >= sizeof(text)) {
			*integer = false;
			return 0;
		}
		memcpy(text, start, n);
		text[n] = '\0';
		errno = 0;
		*value = strtoll(text, NULL, 10);
		if (errno != 0)
			*integer = false;
	}
	return 0;
}

static int scan_literal(struct scan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return -EINVAL;
	s->p += n;
	return 0;
}

static int scan_skip(struct scan *s);

static int scan_container(struct scan *s, char close)
{
	bool object = close == '}';
	bool cut = false;
	int rc;

	if (++s->depth > SCAN_MAX_DEPTH)
		return -EFBIG;
	s->p++;
	scan_ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		s->depth--;
		return 0;
	}
	for (;;) {
		scan_ws(s);
		if (object) {
			rc = scan_string(s, NULL, &cut);
			if (rc < 0)
				return rc;
			scan_ws(s);
			if (s->p >= s->end || *s->p != ':')
				return -EINVAL;
			s->p++;
		}
		rc = scan_skip(s);
		if (rc < 0)
			return rc;
		scan_ws(s);
		if (s->p >= s->end)
			return -EINVAL;
		if (*s->p == close) {
			s->p++;
			s->depth--;
			return 0;
		}
		if (*s->p != ',')
			return -EINVAL;
		s->p++;
	}
}

static int scan_skip(struct scan *s)
{
	bool integer, cut = false;
	long long v;

	scan_ws(s);
	if (s->p >= s->end)
		return -EINVAL;
	switch (*s->p) {
	case '"':
		return scan_string(s, NULL, &cut);
	case '{':
		return scan_container(s, '}');
	case '[':
		return scan_container(s, ']');
	case 't':
		return scan_literal(s, "true");
	case 'f':
		return scan_literal(s, "false");
	case 'n':
		return scan_literal(s, "null");
	default:
		return scan_number(s, &integer, &v);
	}
}

void proto_azure_exec_init(struct proto_azure_exec *e, size_t max_out,
			   size_t max_err)
{
	memset(e, 0, sizeof(*e));
	buf_init(&e->out, max_out);
	buf_init(&e->err, max_err);
}

void proto_azure_exec_cleanup(struct proto_azure_exec *e)
{
	if (e == NULL)
		return;
	buf_cleanup(&e->out);
	buf_cleanup(&e->err);
}

/* A stream member: a string (its bytes into b) or null. */
static int scan_stream(struct scan *s, struct buf *b, bool *cut)
{
	if (s->p < s->end && *s->p == 'n')
		return scan_literal(s, "null");
	return scan_string(s, b, cut);
}

/* The members the answer is read for, each allowed once. */
static const struct exec_member {
	const char *name;
	const char *twice; /* the reason when it appears again */
	const char *bad; /* ... when its value is not what it must be */
} exec_members[] = {
	{"stdout", "\"stdout\" appears twice", "\"stdout\" is not a string"},
	{"stderr", "\"stderr\" appears twice", "\"stderr\" is not a string"},
	{"exitCode", "\"exitCode\" appears twice",
	 "\"exitCode\" is not an integer"},
};

#define NMEMBERS (sizeof(exec_members) / sizeof(exec_members[0]))

/* Which of exec_members a key is, or NMEMBERS. */
static size_t member_of(const struct buf *key, bool keycut)
{
	size_t i;

	for (i = 0; !keycut && i < NMEMBERS; i++)
		if (key->len == strlen(exec_members[i].name) &&
		    memcmp(key->data, exec_members[i].name, key->len) == 0)
			return i;
	return NMEMBERS;
}

/* exitCode: an integer within int, or null. */
static int scan_exit(struct scan *s, struct proto_azure_exec *e)
{
	bool integer;
	long long v;

	if (s->p < s->end && *s->p == 'n')
		return scan_literal(s, "null");
	if (scan_number(s, &integer, &v) < 0 || !integer || v < -2147483648LL ||
	    v > 2147483647LL)
		return -EINVAL;
	e->has_exit = true;
	e->exit_code = (int)v;
	return 0;
}

/* The value of member m at s, seen[m] counting it: 0, or -EINVAL with
 * *reason saying why. */
static int scan_member(struct scan *s, size_t m, bool seen[NMEMBERS],
		       struct proto_azure_exec *e, bool *cut,
		       const char **reason)
{
	int rc;

	*reason = exec_members[m].twice;
	if (seen[m])
		return -EINVAL;
	seen[m] = true;
	*reason = exec_members[m].bad;
	if (m == 0)
		rc = scan_stream(s, &e->out, cut);
	else if (m == 1)
		rc = scan_stream(s, &e->err, cut);
	else
		rc = scan_exit(s, e);
	return rc < 0 ? -EINVAL : 0;
}

int proto_azure_exec_decode(const char *p, size_t n, struct proto_azure_exec *e,
			    const char **why)
{
	struct scan s = {p, p + n, 0};
	bool seen[NMEMBERS] = {false};
	bool cut = false;
	struct buf key = BUF_INIT(64);
	const char *reason = "not a JSON object";
	int rc = -EBADMSG;

	buf_reset(&e->out);
	buf_reset(&e->err);
	e->truncated = false;
	e->has_exit = false;
	e->exit_code = 0;
	scan_ws(&s);
	if (s.p >= s.end || *s.p != '{')
		goto out;
	s.p++;
	scan_ws(&s);
	if (s.p < s.end && *s.p == '}') {
		s.p++;
		goto end;
	}
	for (;;) {
		bool keycut = false;
		size_t m;

		scan_ws(&s);
		buf_reset(&key);
		reason = "not valid JSON";
		rc = scan_string(&s, &key, &keycut);
		if (rc < 0)
			goto bad;
		scan_ws(&s);
		if (s.p >= s.end || *s.p != ':')
			goto bad;
		s.p++;
		scan_ws(&s);
		m = member_of(&key, keycut);
		if (m < NMEMBERS) {
			rc = scan_member(&s, m, seen, e, &cut, &reason);
			if (rc < 0)
				goto out;
		} else {
			rc = scan_skip(&s);
			if (rc < 0)
				goto bad;
		}
		scan_ws(&s);
		reason = "not valid JSON";
		if (s.p >= s.end)
			goto bad;
		if (*s.p == '}') {
			s.p++;
			break;
		}
		if (*s.p != ',')
			goto bad;
		s.p++;
	}
end:
	scan_ws(&s);
	reason = "not valid JSON";
	if (s.p != s.end)
		goto bad;
	e->truncated = cut;
	rc = 0;
	goto out;
bad:
	rc = rc == -EFBIG ? -EFBIG : -EBADMSG;
out:
	buf_cleanup(&key);
	if (rc < 0)
		say(why, reason);
	return rc;
}

/* ---- the exec request ----------------------------------------------------------- */

int proto_azure_exec_req_encode(const char *command, const char *cwd,
				struct buf *out)
{
	cJSON *root = cJSON_CreateObject();
	int rc = -ENOMEM;

	if (root == NULL)
		return -ENOMEM;
	if (cJSON_AddStringToObject(root, "command", command) == NULL)
		goto out;
	if (cwd != NULL &&
	    cJSON_AddStringToObject(root, "workingDirectory", cwd) == NULL)
		goto out;
	rc = pj_print(root, out);
out:
	cJSON_Delete(root);
	return rc;
}

int proto_azure_exec_req_decode(const char *p, size_t n, char **command,
				char **cwd)
{
	char *c = NULL, *w = NULL;
	const char *s;
	cJSON *root;
	int rc = 0;

	root = pj_parse_object(p, n, &rc);
	if (root == NULL)
		return rc;
	rc = pj_str(root, "command", true, &s);
	if (rc == 0)
		rc = pj_dup(s, &c);
	if (rc == 0)
		rc = pj_opt_str_max(root, "workingDirectory",
				    PROTO_RECORD_MAX_STRING, &w);
	cJSON_Delete(root);
	if (rc < 0) {
		free(c);
		free(w);
		return rc;
	}
	*command = c;
	*cwd = w;
	return 0;
}
