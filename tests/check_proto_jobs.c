/* SPDX-License-Identifier: MIT */
/*
 * Suite proto_jobs: the job bodies (doc/protocol-v1.md 3.6, proto_jobs.c)
 * as pure functions: job ids and the poll request and answer, with what
 * the extension adds to them (flowControl, offsets, byte counts,
 * maxBytes, frames decoded one at a time) and its job listing. The
 * requests, frames and the NDJSON splitter are check_proto_exec.c's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/proto_exec_helpers.h"

/* ---- job bodies ---------------------------------------------------------- */

START_TEST(job_id_bodies)
{
	char id[PROTO_JOB_ID_MAX + 1];
	struct buf b = BUF_INIT(0);
	char longer[PROTO_JOB_ID_MAX + 20];

	ck_assert_int_eq(proto_job_id_encode("0b7c", &b), 0);
	ck_assert_str_eq(b.data, "{\"jobId\":\"0b7c\"}");
	ck_assert_int_eq(proto_job_id_decode(b.data, b.len, id), 0);
	ck_assert_str_eq(id, "0b7c");
	buf_cleanup(&b);

	ck_assert_int_eq(proto_job_id_decode("{}", 2, id), -EINVAL);
	ck_assert_int_eq(proto_job_id_decode("{\"jobId\":3}", 11, id), -EINVAL);
	ck_assert_int_eq(proto_job_id_decode("{\"jobId\"", 8, id), -EBADMSG);
	memset(longer, 'a', sizeof(longer));
	memcpy(longer, "{\"jobId\":\"", 10);
	memcpy(longer + sizeof(longer) - 2, "\"}", 2);
	ck_assert_int_eq(proto_job_id_decode(longer, sizeof(longer), id),
			 -EFBIG);
}
END_TEST

static int pdecode(const char *json, struct proto_job_poll_req *r)
{
	return proto_job_poll_req_decode(json, strlen(json), r);
}

START_TEST(poll_request_bodies)
{
	struct proto_job_poll_req r;
	struct buf b = BUF_INIT(0);

	ck_assert_int_eq(pdecode("{\"jobId\":\"j\",\"sinceSeq\":null}", &r), 0);
	ck_assert_str_eq(r.job_id, "j");
	ck_assert(!r.has_since);
	ck_assert_uint_eq(r.wait_ms, 0);
	ck_assert_int_eq(pdecode("{\"jobId\":\"j\"}", &r), 0);
	ck_assert(!r.has_since);
	ck_assert_int_eq(pdecode("{\"jobId\":\"j\",\"sinceSeq\":0,"
				 "\"waitMs\":2500,\"x\":[]}",
				 &r),
			 0);
	ck_assert(r.has_since);
	ck_assert_uint_eq(r.since_seq, 0);
	ck_assert_uint_eq(r.wait_ms, 2500);
	ck_assert_int_eq(pdecode("{\"sinceSeq\":1}", &r), -EINVAL);
	ck_assert_int_eq(pdecode("{\"jobId\":\"j\",\"sinceSeq\":\"1\"}", &r),
			 -EINVAL);
	ck_assert_int_eq(pdecode("{\"jobId\":\"j\",\"sinceSeq\":-1}", &r),
			 -EINVAL);
	ck_assert_int_eq(pdecode("{\"jobId\":\"j\",\"waitMs\":true}", &r),
			 -EINVAL);
	ck_assert_int_eq(pdecode("{\"jobId\":", &r), -EBADMSG);

	memset(&r, 0, sizeof(r));
	strcpy(r.job_id, "j1");
	ck_assert_int_eq(proto_job_poll_req_encode(&r, &b), 0);
	ck_assert_str_eq(b.data, "{\"jobId\":\"j1\",\"sinceSeq\":null}");
	buf_reset(&b);
	r.has_since = true;
	r.since_seq = 41;
	r.wait_ms = 5000;
	ck_assert_int_eq(proto_job_poll_req_encode(&r, &b), 0);
	ck_assert_str_eq(b.data, "{\"jobId\":\"j1\",\"sinceSeq\":41,"
				 "\"waitMs\":5000}");
	buf_cleanup(&b);
}
END_TEST

START_TEST(poll_answer_encode_omits_fields)
{
	struct proto_frame frames[2];
	struct proto_job_poll p;
	struct buf b = BUF_INIT(0), inc = BUF_INIT(0);

	memset(frames, 0, sizeof(frames));
	frames[0].type = PROTO_FRAME_STDOUT;
	frames[0].seq = 0;
	frames[0].data = (unsigned char *)"a\n";
	frames[0].len = 2;
	frames[1].type = PROTO_FRAME_STDERR;
	frames[1].seq = 2;
	frames[1].data = (unsigned char *)"b\n";
	frames[1].len = 2;

	memset(&p, 0, sizeof(p));
	p.running = true;
	p.frames = frames;
	p.nframes = 2;
	ck_assert_int_eq(proto_job_poll_encode(&p, &b), 0);
	ck_assert_str_eq(b.data,
			 "{\"running\":true,\"frames\":["
			 "{\"t\":\"stdout\",\"seq\":0,\"data\":\"YQo=\"},"
			 "{\"t\":\"stderr\",\"seq\":2,\"data\":\"Ygo=\"}"
			 "]}");
	/* Piece by piece gives the same bytes. */
	ck_assert_int_eq(proto_job_poll_encode_head(true, &inc), 0);
	ck_assert_int_eq(proto_job_poll_encode_frame(&frames[0], true, &inc),
			 0);
	ck_assert_int_eq(proto_job_poll_encode_frame(&frames[1], false, &inc),
			 0);
	ck_assert_int_eq(proto_job_poll_encode_tail(&p, &inc), 0);
	ck_assert_str_eq(inc.data, b.data);
	buf_reset(&b);

	memset(&p, 0, sizeof(p));
	p.has_exit = true;
	p.exit_code = 3;
	ck_assert_int_eq(proto_job_poll_encode(&p, &b), 0);
	ck_assert_str_eq(b.data, "{\"running\":false,\"frames\":[],"
				 "\"exitCode\":3,\"truncated\":false}");
	buf_reset(&b);

	memset(&p, 0, sizeof(p));
	p.has_error = true;
	p.err_code = (char *)"cancelled";
	p.err_message = (char *)"the job was cancelled";
	ck_assert_int_eq(proto_job_poll_encode(&p, &b), 0);
	ck_assert_str_eq(b.data, "{\"running\":false,\"frames\":[],"
				 "\"error\":{\"code\":\"cancelled\","
				 "\"message\":\"the job was cancelled\"}}");

	/* Only output frames belong in a poll answer. */
	frames[0].type = PROTO_FRAME_EXIT;
	ck_assert_int_eq(proto_job_poll_encode_frame(&frames[0], true, &b),
			 -EINVAL);
	buf_cleanup(&b);
	buf_cleanup(&inc);
}
END_TEST

static int adecode(const char *json, struct proto_job_poll *p)
{
	return proto_job_poll_decode(json, strlen(json), p);
}

START_TEST(poll_answer_decode)
{
	struct proto_job_poll p;

	ck_assert_int_eq(
		adecode("{\"running\":true,\"frames\":["
			"{\"t\":\"stdout\",\"seq\":4,\"data\":\"YQo=\"}"
			"]}",
			&p),
		0);
	ck_assert(p.running);
	ck_assert_uint_eq(p.nframes, 1);
	ck_assert_uint_eq(p.frames[0].seq, 4);
	ck_assert_mem_eq(p.frames[0].data, "a\n", 2);
	ck_assert(!p.has_exit);
	ck_assert(!p.has_error);
	proto_job_poll_cleanup(&p);

	ck_assert_int_eq(adecode("{\"running\":false,\"frames\":[],"
				 "\"exitCode\":-1,\"truncated\":true}",
				 &p),
			 0);
	ck_assert(!p.running);
	ck_assert(p.has_exit);
	ck_assert_int_eq(p.exit_code, -1);
	ck_assert(p.truncated);
	proto_job_poll_cleanup(&p);

	ck_assert_int_eq(adecode("{\"running\":false,\"frames\":[],"
				 "\"error\":{\"code\":\"timeoutExceeded\","
				 "\"message\":\"m\"}}",
				 &p),
			 0);
	ck_assert(p.has_error);
	ck_assert_str_eq(p.err_code, "timeoutExceeded");
	ck_assert_str_eq(p.err_message, "m");
	proto_job_poll_cleanup(&p);

	ck_assert_int_eq(adecode("{\"frames\":[]}", &p), -EINVAL);
	ck_assert_int_eq(adecode("{\"running\":true}", &p), -EINVAL);
	ck_assert_int_eq(adecode("{\"running\":true,\"frames\":["
				 "{\"t\":\"exit\",\"code\":0}]}",
				 &p),
			 -EINVAL);
	ck_assert_int_eq(adecode("{\"running\":true,\"frames\":["
				 "{\"t\":\"nope\"}]}",
				 &p),
			 -EINVAL);
	ck_assert_int_eq(adecode("{\"running\":false,\"frames\":[],"
				 "\"error\":{\"code\":1,\"message\":\"m\"}}",
				 &p),
			 -EINVAL);
	ck_assert_int_eq(adecode("{\"running\":", &p), -EBADMSG);
}
END_TEST

/* ---- the extension's job members ------------------------------------------- */

static int ldecode(const char *json, struct proto_job_list *l)
{
	return proto_job_list_decode(json, strlen(json), l);
}

/* Decode a complete listing of one job, with no command, a timeout and a
 * start of 1, named id, with env (the inside of its JSON array) and state:
 * 0 or the error. */
static int ldecode_one(const char *id, const char *env, const char *state)
{
	struct proto_job_list l;
	char *j;
	int rc;

	if (asprintf(&j,
		     "{\"jobs\":[{\"jobId\":\"%s\",\"command\":[],\"env\":"
		     "[%s],\"timeoutMs\":1,\"startedAtMs\":1,"
		     "\"state\":\"%s\"}],\"complete\":true}",
		     id, env, state) < 0)
		ck_abort();
	rc = ldecode(j, &l);
	if (rc == 0)
		proto_job_list_cleanup(&l);
	free(j);
	return rc;
}

START_TEST(ext_flow_control_request)
{
	static char a0[] = "true";
	char *argv[] = {a0, NULL};
	struct proto_exec_req r = {argv, 1, 5000, NULL, NULL, 0, 0, true};
	struct proto_exec_req back;
	struct buf b = BUF_INIT(0);

	ck_assert_int_eq(proto_exec_req_encode(&r, &b), 0);
	ck_assert_str_eq(b.data, "{\"command\":[\"true\"],\"timeoutMs\":5000,"
				 "\"cwd\":null,\"env\":{},"
				 "\"flowControl\":true}");
	ck_assert_int_eq(proto_exec_req_decode(b.data, b.len, &back), 0);
	ck_assert(back.flow);
	proto_exec_req_cleanup(&back);
	/* Only JSON true asks for it, as an agent that does not know the
	 * member would read it: nothing else is an error. */
	te_req_ok("{\"command\":[\"x\"],\"timeoutMs\":1,"
		  "\"flowControl\":1}",
		  &back);
	ck_assert(!back.flow);
	proto_exec_req_cleanup(&back);
	te_req_ok("{\"command\":[\"x\"],\"timeoutMs\":1}", &back);
	ck_assert(!back.flow);
	proto_exec_req_cleanup(&back);
	buf_cleanup(&b);
}
END_TEST

START_TEST(ext_frame_offset)
{
	struct proto_frame g;
	struct buf b = BUF_INIT(0);
	struct proto_frame f = {.type = PROTO_FRAME_STDERR,
				.seq = 7,
				.data = (unsigned char *)"hi",
				.len = 2,
				.has_off = true,
				.off = 9007199254740991ULL};

	ck_assert_int_eq(proto_job_poll_encode_frame(&f, true, &b), 0);
	ck_assert_str_eq(b.data,
			 "{\"t\":\"stderr\",\"seq\":7,\"data\":\"aGk=\","
			 "\"off\":9007199254740991}");
	ck_assert_int_eq(proto_frame_decode(b.data, b.len, &g), 0);
	ck_assert(g.has_off);
	ck_assert_uint_eq(g.off, 9007199254740991ULL);
	proto_frame_cleanup(&g);
	te_frame_ok("{\"t\":\"stdout\",\"seq\":1,"
		    "\"data\":\"\"}",
		    &g);
	ck_assert(!g.has_off);
	proto_frame_cleanup(&g);
	ck_assert_int_eq(te_frame_decode("{\"t\":\"stdout\",\"seq\":1,"
					 "\"data\":\"\",\"off\":-1}",
					 &g),
			 -EBADMSG);
	buf_cleanup(&b);
}
END_TEST

START_TEST(ext_poll_members)
{
	struct proto_job_poll_req r;
	struct proto_job_poll p;
	struct buf b = BUF_INIT(0);

	memset(&r, 0, sizeof(r));
	strcpy(r.job_id, "j");
	r.has_since = true;
	r.since_seq = 3;
	r.wait_ms = 100;
	r.max_bytes = 4194304;
	ck_assert_int_eq(proto_job_poll_req_encode(&r, &b), 0);
	ck_assert_str_eq(b.data, "{\"jobId\":\"j\",\"sinceSeq\":3,"
				 "\"waitMs\":100,\"maxBytes\":4194304}");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(proto_job_poll_req_decode(b.data, b.len, &r), 0);
	ck_assert_uint_eq(r.max_bytes, 4194304);
	buf_reset(&b);

	memset(&p, 0, sizeof(p));
	p.has_exit = true;
	p.has_bytes = true;
	p.stdout_bytes = 200000000;
	p.stderr_bytes = 5;
	ck_assert_int_eq(proto_job_poll_encode(&p, &b), 0);
	ck_assert_str_eq(b.data, "{\"running\":false,\"frames\":[],"
				 "\"exitCode\":0,\"truncated\":false,"
				 "\"stdoutBytes\":200000000,"
				 "\"stderrBytes\":5}");
	memset(&p, 0, sizeof(p));
	ck_assert_int_eq(proto_job_poll_decode(b.data, b.len, &p), 0);
	ck_assert(p.has_bytes);
	ck_assert_uint_eq(p.stdout_bytes, 200000000);
	ck_assert_uint_eq(p.stderr_bytes, 5);
	proto_job_poll_cleanup(&p);
	/* both counts or neither */
	ck_assert_int_eq(adecode("{\"running\":false,\"frames\":"
				 "[],\"stdoutBytes\":1}",
				 &p),
			 -EINVAL);
	buf_cleanup(&b);
}
END_TEST

/* Records what the one-at-a-time decoder hands out. */
struct seen {
	int n;
	int stop_at; /* refuse this one (-1: none) */
	char text[256];
};

static int see(void *arg, const struct proto_frame *f)
{
	struct seen *s = arg;
	size_t l = strlen(s->text);

	if (s->n == s->stop_at)
		return -ENOSPC;
	snprintf(s->text + l, sizeof(s->text) - l, "%s%llu:%.*s",
		 s->n ? "," : "", (unsigned long long)f->seq, (int)f->len,
		 (const char *)f->data);
	s->n++;
	return 0;
}

static int each(const char *json, struct seen *s, struct proto_job_poll *p)
{
	return proto_job_poll_decode_each(json, strlen(json), see, s, p);
}

START_TEST(poll_decode_one_frame_at_a_time)
{
	const char *ok = " { \"x\" : {\"frames\":[1]}, \"frames\" : [ "
			 "{\"t\":\"stdout\",\"seq\":1,\"data\":\"YQ==\"} ,"
			 "{\"data\":\"Yg==\",\"seq\":2,\"t\":\"stderr\"},"
			 "{\"t\":\"stdout\",\"seq\":3,\"data\":\"Yw==\","
			 "\"off\":1}],\"running\":false,\"exitCode\":4 } ";
	struct seen s = {0, -1, ""};
	struct proto_job_poll p, untouched;

	/* In order, members in any order, whitespace anywhere, another
	 * object's frames member ignored. */
	ck_assert_int_eq(each(ok, &s, &p), 0);
	ck_assert_str_eq(s.text, "1:a,2:b,3:c");
	ck_assert(!p.running);
	ck_assert(p.has_exit);
	ck_assert_int_eq(p.exit_code, 4);
	ck_assert_uint_eq(p.nframes, 0);
	proto_job_poll_cleanup(&p);

	/* The caller stops it: its error, and no ending. */
	memset(&s, 0, sizeof(s));
	s.stop_at = 1;
	memset(&p, 0x5a, sizeof(p));
	memset(&untouched, 0x5a, sizeof(untouched));
	ck_assert_int_eq(each(ok, &s, &p), -ENOSPC);
	ck_assert_str_eq(s.text, "1:a");
	ck_assert_int_eq(memcmp(&p, &untouched, sizeof(p)), 0);

	/* The rest of the answer is checked before any frame goes. */
	memset(&s, 0, sizeof(s));
	s.stop_at = -1;
	ck_assert_int_eq(
		each("{\"running\":false,\"frames\":[{\"t\":\"stdout\","
		     "\"seq\":1,\"data\":\"YQ==\"}],\"exitCode\":"
		     "\"4\"}",
		     &s, &p),
		-EINVAL);
	ck_assert_int_eq(s.n, 0);
	/* A bad frame stops there, after the good ones before it. */
	ck_assert_int_eq(each("{\"running\":true,\"frames\":[{\"t\":\"stdout\","
			      "\"seq\":1,\"data\":\"YQ==\"},{\"t\":\"exit\","
			      "\"code\":0}]}",
			      &s, &p),
			 -EINVAL);
	ck_assert_int_eq(s.n, 1);
	/* Junk between the elements, or an unclosed array. */
	memset(&s, 0, sizeof(s));
	s.stop_at = -1;
	ck_assert_int_eq(each("{\"running\":true,\"frames\":[{\"t\":\"stdout\","
			      "\"seq\":1,\"data\":\"YQ==\"} x]}",
			      &s, &p),
			 -EINVAL);
	ck_assert_int_eq(each("{\"running\":true,\"frames\":[{\"t\":\"stdout\","
			      "\"seq\":1,\"data\":\"YQ==\"}",
			      &s, &p),
			 -EBADMSG);
	ck_assert_int_eq(each("{\"running\":true,\"frames\":{}}", &s, &p),
			 -EINVAL);
	ck_assert_int_eq(each("[]", &s, &p), -EINVAL);
	ck_assert_int_eq(each("{\"running\":tru", &s, &p), -EBADMSG);
}
END_TEST

START_TEST(job_listing_round_trip)
{
	static char a0[] = "make", a1[] = "-j2", e0[] = "CC=gcc",
		    e1[] = "TOKEN=s3cr3t", cwd[] = "src";
	char *argv[] = {a0, a1, NULL};
	char *env[] = {e0, e1, NULL};
	struct proto_job_info ji[2];
	struct proto_job_list l;
	struct buf b = BUF_INIT(0);

	memset(ji, 0, sizeof(ji));
	strcpy(ji[0].job_id, "0b7c2a44-0000-4000-8000-000000000000");
	ji[0].argv = argv;
	ji[0].argc = 2;
	ji[0].cwd = cwd;
	ji[0].env = env;
	ji[0].envc = 2;
	ji[0].timeout_ms = 60000;
	ji[0].started_ms = 1700000000123;
	ji[0].flow = true;
	strcpy(ji[1].job_id, "j2");
	ji[1].argv = argv;
	ji[1].argc = 1;
	ji[1].timeout_ms = 1;
	ji[1].started_ms = 1;
	ji[1].state = PROTO_JOB_FAILED;
	ji[1].ended_ms = 2;
	ji[1].err_code = (char *)"timeoutExceeded";
	ji[1].err_message = (char *)"exceeded its 1ms timeout";
	ck_assert_int_eq(proto_job_list_encode_head(&b), 0);
	ck_assert_int_eq(proto_job_list_encode_entry(&ji[0], true, &b), 0);
	ck_assert_int_eq(proto_job_list_encode_entry(&ji[1], false, &b), 0);
	ck_assert_int_eq(proto_job_list_encode_tail(true, &b), 0);
	/* the names of the environment, never a value */
	ck_assert_str_eq(
		b.data,
		"{\"jobs\":[{\"jobId\":\"0b7c2a44-0000-4000-8000-"
		"000000000000\","
		"\"command\":[\"make\",\"-j2\"],\"cwd\":\"src\","
		"\"env\":[\"CC\",\"TOKEN\"],\"timeoutMs\":60000,"
		"\"startedAtMs\":1700000000123,\"state\":\"running\","
		"\"flowControl\":true},"
		"{\"jobId\":\"j2\",\"command\":[\"make\"],\"cwd\":null,"
		"\"env\":[],\"timeoutMs\":1,\"startedAtMs\":1,"
		"\"state\":\"failed\",\"flowControl\":false,\"endedAtMs\":2,"
		"\"error\":{\"code\":\"timeoutExceeded\",\"message\":"
		"\"exceeded its 1ms timeout\"}}],\"complete\":true}");
	ck_assert_int_eq(proto_job_list_decode(b.data, b.len, &l), 0);
	ck_assert(l.complete);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.jobs[0].cwd, "src");
	ck_assert_uint_eq(l.jobs[0].envc, 2);
	ck_assert_str_eq(l.jobs[0].env[1], "TOKEN");
	ck_assert_int_eq(l.jobs[0].started_ms, 1700000000123);
	ck_assert(l.jobs[0].flow);
	ck_assert_int_eq(l.jobs[1].state, PROTO_JOB_FAILED);
	ck_assert_str_eq(l.jobs[1].err_message, "exceeded its 1ms timeout");
	ck_assert_ptr_null(l.jobs[1].cwd);
	proto_job_list_cleanup(&l);
	buf_cleanup(&b);

	/* Refused: a value where a name belongs, an unknown state, no
	 * id, an exited job without its code. */
	ck_assert_int_eq(ldecode_one("a", "\"A=1\"", "running"), -EINVAL);
	ck_assert_int_eq(ldecode_one("a", "", "paused"), -EINVAL);
	ck_assert_int_eq(ldecode_one("", "", "running"), -EINVAL);
	ck_assert_int_eq(ldecode_one("a", "", "exited"), -EINVAL);
	ck_assert_int_eq(ldecode("{\"jobs\":[]}", &l), -EINVAL);
}
END_TEST

void proto_jobs_cases(Suite *s)
{
	TCASE_TABLE(s, "jobs", NULL, NULL, 0, job_id_bodies,
		    poll_request_bodies, poll_answer_encode_omits_fields,
		    poll_answer_decode);
	TCASE_TABLE(s, "ext", NULL, NULL, 0, ext_flow_control_request,
		    ext_frame_offset, ext_poll_members,
		    poll_decode_one_frame_at_a_time, job_listing_round_trip);
}
