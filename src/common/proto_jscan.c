/* SPDX-License-Identifier: MIT */
/*
 * proto_jscan: the JSON walk of the proto_*.c files (contract in
 * proto_jscan_i.h).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/hex.h"
#include "common/proto_jscan_i.h"

void js_ws(struct jscan *s)
{
	while (s->p < s->end && (unsigned char)*s->p <= ' ')
		s->p++;
}

/*
 * At a '"': step over the string. Returns true when it holds an escaped
 * NUL. When key is not NULL it receives the decoded string if that is
 * short ASCII, else "" (no key looked for is anything else).
 */
static bool js_string_key(struct jscan *s, char key[JS_KEY_MAX])
{
	bool nul = false, keyok = key != NULL;
	size_t k = 0;

	s->p++;
	while (s->p < s->end && *s->p != '"') {
		char c = *s->p++;

		if (c == '\\' && s->p < s->end) {
			char e = *s->p++;

			c = e;
			if (e == 'u' && s->end - s->p >= 4) {
				int v = 0, i;

				for (i = 0; i < 4; i++) {
					int h = hex_digit(s->p[i]);

					v = v * 16 + (h < 0 ? 0 : h);
				}
				s->p += 4;
				if (v == 0)
					nul = true;
				if (v == 0 || v >= 0x80)
					keyok = false;
				c = (char)v;
			} else if (e == 'b') {
				c = '\b';
			} else if (e == 'f') {
				c = '\f';
			} else if (e == 'n') {
				c = '\n';
			} else if (e == 'r') {
				c = '\r';
			} else if (e == 't') {
				c = '\t';
			}
		}
		if (keyok) {
			if (k + 1 >= JS_KEY_MAX)
				keyok = false;
			else
				key[k++] = c;
		}
	}
	if (s->p < s->end)
		s->p++;
	if (key != NULL)
		key[keyok ? k : 0] = '\0';
	return nul;
}

/* At a '"': step over the string; true when it holds an escaped NUL. */
static bool js_string(struct jscan *s)
{
	return js_string_key(s, NULL);
}

/* At a container's opening bracket: step over its members or elements,
 * each nested at depth + 1. True when a string directly in it (keys
 * included) holds an escaped NUL. */
static bool js_container(struct jscan *s, unsigned depth, bool object)
{
	char close = object ? '}' : ']';
	bool nul = false;

	s->p++;
	for (;;) {
		js_ws(s);
		if (s->p >= s->end)
			return nul;
		if (*s->p == close) {
			s->p++;
			return nul;
		}
		if (*s->p == ',') {
			s->p++;
			continue;
		}
		if (object) {
			if (*s->p != '"')
				return nul;
			nul |= js_string(s);
			js_ws(s);
			if (s->p < s->end && *s->p == ':')
				s->p++;
			js_ws(s);
		}
		if (s->p < s->end && *s->p == '"')
			nul |= js_string(s);
		else
			js_skip(s, depth + 1);
	}
}

void js_skip(struct jscan *s, unsigned depth)
{
	js_ws(s);
	if (s->p >= s->end)
		return;
	if (depth > CJSON_NESTING_LIMIT) {
		s->p = s->end;
		return;
	}
	switch (*s->p) {
	case '"':
		js_string(s);
		return;
	case '{':
		js_container(s, depth, true);
		return;
	case '[':
		js_container(s, depth, false);
		return;
	default:
		/* A number or a literal. Every call moves on at least one
		 * byte, so no input can hold a walk in place. */
		s->p++;
		while (s->p < s->end && (unsigned char)*s->p > ' ' &&
		       !strchr(",]}", *s->p))
			s->p++;
	}
}

bool js_value_nul(struct jscan *s)
{
	js_ws(s);
	if (s->p >= s->end)
		return false;
	switch (*s->p) {
	case '"':
		return js_string(s);
	case '{':
		return js_container(s, 0, true);
	case '[':
		return js_container(s, 0, false);
	default:
		js_skip(s, 1);
		return false;
	}
}

int js_members(struct jscan *s, js_member_fn *fn, void *arg)
{
	char key[JS_KEY_MAX];
	int rc;

	js_ws(s);
	if (s->p >= s->end || *s->p != '{')
		return -EINVAL;
	s->p++;
	for (;;) {
		js_ws(s);
		if (s->p >= s->end)
			return -EINVAL;
		if (*s->p == '}') {
			s->p++;
			return 0;
		}
		if (*s->p == ',') {
			s->p++;
			continue;
		}
		if (*s->p != '"')
			return -EINVAL;
		js_string_key(s, key);
		js_ws(s);
		if (s->p >= s->end || *s->p != ':')
			return -EINVAL;
		s->p++;
		js_ws(s);
		rc = fn(arg, key, s);
		if (rc != 0)
			return rc;
	}
}

struct member_at {
	const char *key;
	const char *vs, *ve;
};

static int member_at(void *arg, const char *key, struct jscan *s)
{
	struct member_at *m = arg;
	bool found = strcmp(key, m->key) == 0;

	m->vs = s->p;
	js_skip(s, 1);
	m->ve = s->p;
	return found ? 1 : 0;
}

int js_member(const char *p, size_t n, const char *key, const char **vs,
	      const char **ve)
{
	struct jscan s = {p, p + n};
	struct member_at m = {key, NULL, NULL};
	int rc = js_members(&s, member_at, &m);

	if (rc == 0)
		return -ENOENT;
	if (rc < 0)
		return rc;
	*vs = m.vs;
	*ve = m.ve;
	return 0;
}
