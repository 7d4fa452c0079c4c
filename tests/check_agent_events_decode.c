/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_events_decode: the change events' answer
 * (doc/protocol-ext.md, "Change events") as the agent encodes it and a
 * client decodes it: the exact text, its bounds, what is refused, and
 * health's members that advertise the events.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "tests/agent_helpers.h"
#include "tests/tcase_table.h"
#include "tests/check_suites.h"

#define S(lit) lit, sizeof(lit) - 1

/* ---- decoding ------------------------------------------------------------ */

static int decode_str(const char *text, struct proto_events *out)
{
	return proto_events_decode(text, strlen(text), out);
}

START_TEST(decode_round_trip)
{
	struct proto_event e[3];
	struct proto_events d;
	struct buf b = BUF_INIT(0);

	memset(e, 0, sizeof(e));
	e[0].seq = 7;
	e[0].type = PROTO_EV_CREATE;
	e[0].dir = true;
	e[0].path = (char *)"a";
	e[1].seq = 8;
	e[1].type = PROTO_EV_RENAME;
	e[1].path = (char *)"a/x \"q\"";
	e[1].to = (char *)"";
	strcpy(e[1].by, "m-1");
	e[2].seq = 9007199254740993ULL;
	e[2].type = PROTO_EV_ATTR;
	e[2].path = (char *)"";
	ck_assert_int_eq(proto_events_begin(&b, "boot-1"), 0);
	ck_assert_int_eq(proto_events_add(&b, true, &e[0]), 0);
	ck_assert_int_eq(proto_events_add(&b, false, &e[1]), 0);
	ck_assert_int_eq(proto_events_add(&b, false, &e[2]), 0);
	ck_assert_int_eq(proto_events_end(&b, 9007199254740993ULL, NULL), 0);
	ck_assert_str_eq(
		b.data,
		"{\"bootId\":\"boot-1\",\"events\":["
		"{\"seq\":7,\"type\":\"create\",\"path\":\"/a\",\"dir\":true},"
		"{\"seq\":8,\"type\":\"rename\",\"path\":\"/a/x \\\"q\\\"\","
		"\"to\":\"/\",\"dir\":false,\"by\":\"m-1\"},"
		"{\"seq\":\"9007199254740993\",\"type\":\"attr\",\"path\":\"/"
		"\","
		"\"dir\":false}],\"next\":\"9007199254740993\"}");
	ck_assert_int_eq(proto_events_decode(b.data, b.len, &d), 0);
	ck_assert_str_eq(d.boot_id, "boot-1");
	ck_assert_uint_eq(d.next, 9007199254740993ULL);
	ck_assert(!d.lost);
	ck_assert_str_eq(d.unavailable, "");
	ck_assert_uint_eq(d.n, 3);
	ck_assert_uint_eq(d.ev[0].seq, 7);
	ck_assert_int_eq(d.ev[0].type, PROTO_EV_CREATE);
	ck_assert(d.ev[0].dir);
	ck_assert_str_eq(d.ev[0].path, "a");
	ck_assert_ptr_null(d.ev[0].to);
	ck_assert_str_eq(d.ev[0].by, "");
	ck_assert_int_eq(d.ev[1].type, PROTO_EV_RENAME);
	ck_assert_str_eq(d.ev[1].path, "a/x \"q\"");
	ck_assert_str_eq(d.ev[1].to, "");
	ck_assert_str_eq(d.ev[1].by, "m-1");
	ck_assert_uint_eq(d.ev[2].seq, 9007199254740993ULL);
	ck_assert_str_eq(d.ev[2].path, "");
	proto_events_cleanup(&d);
	proto_events_cleanup(&d); /* twice is harmless */
	buf_cleanup(&b);
}
END_TEST

START_TEST(decode_lost_and_unavailable)
{
	struct proto_events d;
	struct proto_event e;
	struct buf b = BUF_INIT(0);

	ck_assert_int_eq(decode_str("{\"bootId\":\"b\",\"events\":[{\"seq\":5,"
				    "\"type\":\"lost\"}],\"next\":5}",
				    &d),
			 0);
	ck_assert(d.lost);
	ck_assert_uint_eq(d.n, 0);
	ck_assert_uint_eq(d.next, 5);
	ck_assert_str_eq(d.unavailable, "");
	proto_events_cleanup(&d);

	/* a lost event among others makes them moot */
	ck_assert_int_eq(
		decode_str(
			"{\"bootId\":\"b\",\"events\":[{\"seq\":4,\"type\":"
			"\"write\",\"path\":\"/x\",\"dir\":false},{\"seq\":5,"
			"\"type\":\"lost\"}],\"next\":5}",
			&d),
		0);
	ck_assert(d.lost);
	ck_assert_uint_eq(d.n, 0);
	proto_events_cleanup(&d);

	memset(&e, 0, sizeof(e));
	e.seq = 3;
	e.type = PROTO_EV_LOST;
	ck_assert_int_eq(proto_events_begin(&b, "b"), 0);
	ck_assert_int_eq(proto_events_add(&b, true, &e), 0);
	ck_assert_int_eq(proto_events_end(&b, 3, "the limit"), 0);
	ck_assert_str_eq(b.data, "{\"bootId\":\"b\",\"events\":[{\"seq\":3,"
				 "\"type\":\"lost\"}],\"next\":3,"
				 "\"unavailable\":\"the limit\"}");
	ck_assert_int_eq(proto_events_decode(b.data, b.len, &d), 0);
	ck_assert(d.lost);
	ck_assert_str_eq(d.unavailable, "the limit");
	proto_events_cleanup(&d);
	buf_cleanup(&b);

	/* a type this client does not know still has its path checked */
	ck_assert_int_eq(decode_str("{\"bootId\":\"b\",\"events\":[{\"seq\":1,"
				    "\"type\":\"frob\",\"path\":\"/q\"}],"
				    "\"next\":1}",
				    &d),
			 0);
	ck_assert_int_eq(d.ev[0].type, PROTO_EV_OTHER);
	ck_assert_str_eq(d.ev[0].path, "q");
	ck_assert(!d.ev[0].dir);
	proto_events_cleanup(&d);
	ck_assert_int_eq(decode_str("{\"bootId\":\"b\",\"events\":[{\"seq\":1,"
				    "\"type\":\"frob\"}],\"next\":1}",
				    &d),
			 -EPROTO);
}
END_TEST

START_TEST(decode_refusals)
{
	static const char *const bad[] = {
		"",
		"[]",
		"not json",
		"{\"events\":[],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[]}",
		"{\"bootId\":\"b\",\"next\":1}",
		"{\"bootId\":\"b\",\"events\":{},\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[],\"next\":-1}",
		"{\"bootId\":\"b\",\"events\":[],\"next\":\"1x\"}",
		"{\"bootId\":7,\"events\":[],\"next\":1}",
		/* events */
		"{\"bootId\":\"b\",\"events\":[1],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"type\":\"create\","
		"\"path\":\"/a\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,"
		"\"path\":\"/a\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\"}]"
		","
		"\"next\":1}",
		/* paths: absolute, canonical, no way up */
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"a\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a/../b\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/..\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a//b\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a/./b\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a/\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a\\u0000b\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":7}],\"next\":1}",
		/* a rename needs where it went */
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"rename\","
		"\"path\":\"/a\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"rename\","
		"\"path\":\"/a\",\"to\":\"b\"}],\"next\":1}",
		/* by is a client name */
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a\",\"by\":\"a b\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a\",\"by\":\"\"}],\"next\":1}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		"\"path\":\"/a\",\"dir\":1}],\"next\":1}",
		/* order: seqs grow, none past next */
		"{\"bootId\":\"b\",\"events\":[{\"seq\":2,\"type\":\"create\","
		"\"path\":\"/a\"},{\"seq\":2,\"type\":\"create\","
		"\"path\":\"/b\"}],\"next\":2}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":3,\"type\":\"create\","
		"\"path\":\"/a\"},{\"seq\":2,\"type\":\"create\","
		"\"path\":\"/b\"}],\"next\":3}",
		"{\"bootId\":\"b\",\"events\":[{\"seq\":3,\"type\":\"create\","
		"\"path\":\"/a\"}],\"next\":2}",
	};
	struct proto_events d;
	struct buf b = BUF_INIT(0);
	char *big;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(decode_str(bad[i], &d) == -EPROTO, "accepted %s",
			      bad[i]);

	/* a by of 64 characters is a name, 65 is not */
	big = malloc(512);
	snprintf(big, 512,
		 "{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		 "\"path\":\"/a\",\"by\":\"%064d\"}],\"next\":1}",
		 0);
	ck_assert_int_eq(decode_str(big, &d), 0);
	ck_assert_uint_eq(strlen(d.ev[0].by), 64);
	proto_events_cleanup(&d);
	snprintf(big, 512,
		 "{\"bootId\":\"b\",\"events\":[{\"seq\":1,\"type\":\"create\","
		 "\"path\":\"/a\",\"by\":\"%065d\"}],\"next\":1}",
		 0);
	ck_assert_int_eq(decode_str(big, &d), -EPROTO);
	free(big);

	/* a path of 4096 bytes with its '/' is the longest */
	for (i = 4096; i <= 4097; i++) {
		size_t k;

		ck_assert_int_eq(buf_append_str(&b,
						"{\"bootId\":\"b\",\"events\":"
						"[{\"seq\":1,\"type\":"
						"\"write\",\"path\":\""),
				 0);
		for (k = 0; k < i; k++)
			ck_assert_int_eq(
				buf_append(&b, k % 200 == 0 ? "/" : "p", 1), 0);
		ck_assert_int_eq(buf_append_str(&b, "\"}],\"next\":1}"), 0);
		ck_assert_int_eq(proto_events_decode(b.data, b.len, &d),
				 i == 4096 ? 0 : -EPROTO);
		if (i == 4096) {
			ck_assert_uint_eq(strlen(d.ev[0].path), 4095);
			proto_events_cleanup(&d);
		}
		buf_reset(&b);
	}

	/* at most PROTO_EXT_EVENTS_MAX events */
	for (i = 0; i <= PROTO_EXT_EVENTS_MAX; i++) {
		ck_assert_int_eq(
			buf_printf(&b,
				   "%s{\"seq\":%zu,\"type\":\"write\","
				   "\"path\":\"/f\"}",
				   i == 0 ? "{\"bootId\":\"b\",\"events\":["
					  : ",",
				   i + 1),
			0);
		if (i + 1 == PROTO_EXT_EVENTS_MAX) {
			struct buf ok = BUF_INIT(0);

			ck_assert_int_eq(buf_append(&ok, b.data, b.len), 0);
			ck_assert_int_eq(
				buf_printf(&ok, "],\"next\":%zu}", i + 1), 0);
			ck_assert_int_eq(
				proto_events_decode(ok.data, ok.len, &d), 0);
			ck_assert_uint_eq(d.n, PROTO_EXT_EVENTS_MAX);
			proto_events_cleanup(&d);
			buf_cleanup(&ok);
		}
	}
	ck_assert_int_eq(buf_printf(&b, "],\"next\":%zu}", i), 0);
	ck_assert_int_eq(proto_events_decode(b.data, b.len, &d), -EPROTO);
	buf_reset(&b);

	/* an answer longer than the bound is refused before parsing */
	ck_assert_int_eq(buf_append_str(&b, "{\"bootId\":\"b\",\"events\":[],"
					    "\"next\":1}"),
			 0);
	while (b.len <= PROTO_EXT_EVENTS_MAX_BYTES)
		ck_assert_int_eq(buf_append_str(&b, "                "), 0);
	ck_assert_int_eq(proto_events_decode(b.data, b.len, &d), -EPROTO);
	buf_cleanup(&b);
}
END_TEST

START_TEST(decode_health_members)
{
	struct proto_health d;
	struct buf b = BUF_INIT(0);
	struct proto_health h = {.protocol_version = 1,
				 .ext_files = PROTO_EXT_FILES_VERSION,
				 .ext_events = PROTO_EXT_EVENTS_VERSION};

	ck_assert_int_eq(proto_health_encode(&h, &b), 0);
	ck_assert_ptr_nonnull(strstr(b.data, "\"events\":1"));
	ck_assert_ptr_null(strstr(b.data, "eventsUnavailable"));
	ck_assert_int_eq(proto_health_decode(b.data, b.len, &d), 0);
	ck_assert_int_eq(d.ext_events, 1);
	ck_assert_str_eq(d.ext_events_why, "");
	buf_reset(&b);

	h.ext_events = 0;
	strcpy(h.ext_events_why, "no watches");
	ck_assert_int_eq(proto_health_encode(&h, &b), 0);
	ck_assert_ptr_nonnull(strstr(b.data,
				     "\"events\":0,\"eventsUnavailable\":\"no "
				     "watches\""));
	ck_assert_int_eq(proto_health_decode(b.data, b.len, &d), 0);
	ck_assert_int_eq(d.ext_events, 0);
	ck_assert_str_eq(d.ext_events_why, "no watches");
	buf_cleanup(&b);

	ck_assert(proto_client_id_valid("a"));
	ck_assert(proto_client_id_valid("Mount-7f3a"));
	ck_assert(!proto_client_id_valid(""));
	ck_assert(!proto_client_id_valid("a_b"));
	ck_assert(!proto_client_id_valid("a b"));
	ck_assert(proto_client_id_valid("01234567890123456789012345678901234567"
					"89012345678901234567890123"));
	ck_assert(!proto_client_id_valid("0123456789012345678901234567890123456"
					 "7890123456789012345678901234"));
}
END_TEST

void agent_events_decode_cases(Suite *s)
{
	TCASE_TABLE(s, "decode", NULL, NULL, 0, decode_round_trip,
		    decode_lost_and_unavailable, decode_refusals,
		    decode_health_members);
}
