/* SPDX-License-Identifier: MIT */
/*
 * Suite agent_jobs: the job routes (doc/protocol-v1.md 3.6,
 * doc/protocol-ext.md "Jobs") against a real sandbox-agent on loopback:
 * start, poll and replay, cancel, the registry's limits and eviction
 * (alien's and the extension's), long polls, flow control and its
 * acknowledgements, maxBytes, the listing, retention and the spool.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "common/b64.h"
#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "tests/check_suites.h"
#include "tests/agent_helpers.h"
#include "tests/helpers.h"
#include "tests/tcase_table.h"

/* ---- jobs ---------------------------------------------------------------- */

/* Start a job; its id (36 characters of a version 4 UUID) into id. */
static void start_job(const char *json, char id[64])
{
	ta_job_start(&ta_fx.a, json, id);
	ck_assert_int_eq(id[8], '-');
	ck_assert_int_eq(id[13], '-');
	ck_assert_int_eq(id[14], '4');
	ck_assert_int_eq(id[18], '-');
	ck_assert(strchr("89ab", id[19]) != NULL);
	ck_assert_int_eq(id[23], '-');
}

/* Cancel job id on a: the answer must be 200 {}. */
static void cancel_job(const struct th_agent *a, const char *id)
{
	char json[128];

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	ta_expect_post(a, "/v1/jobs/cancel", json, 200, "{}");
}

static void expect_poll(const char *id, const char *extra, long status,
			const char *want)
{
	long got;
	char *s = ta_job_poll(&ta_fx.a, id, extra, &got);

	ck_assert_msg(got == status, "poll %s: %ld %s", id, got, s);
	ck_assert_str_eq(s, want);
	free(s);
}

START_TEST(jobs_start_poll_replay)
{
	char id[64], *s;

	start_job("{\"command\":[\"sh\",\"-c\",\"echo a; echo b; echo c\"],"
		  "\"timeoutMs\":10000}",
		  id);
	s = ta_job_poll_ended(&ta_fx.a, id, NULL);
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":["
			    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"YQo=\"},"
			    "{\"t\":\"stdout\",\"seq\":1,\"data\":\"Ygo=\"},"
			    "{\"t\":\"stdout\",\"seq\":2,\"data\":\"Ywo=\"}],"
			    "\"exitCode\":0,\"truncated\":false}");
	free(s);
	/* sinceSeq is exclusive; null means from the first frame. */
	expect_poll(id, ",\"sinceSeq\":0", 200,
		    "{\"running\":false,\"frames\":["
		    "{\"t\":\"stdout\",\"seq\":1,\"data\":\"Ygo=\"},"
		    "{\"t\":\"stdout\",\"seq\":2,\"data\":\"Ywo=\"}],"
		    "\"exitCode\":0,\"truncated\":false}");
	expect_poll(id, ",\"sinceSeq\":2", 200,
		    "{\"running\":false,\"frames\":[],\"exitCode\":0,"
		    "\"truncated\":false}");
	expect_poll(id, ",\"sinceSeq\":null", 200,
		    "{\"running\":false,\"frames\":["
		    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"YQo=\"},"
		    "{\"t\":\"stdout\",\"seq\":1,\"data\":\"Ygo=\"},"
		    "{\"t\":\"stdout\",\"seq\":2,\"data\":\"Ywo=\"}],"
		    "\"exitCode\":0,\"truncated\":false}");
}
END_TEST

START_TEST(jobs_running_then_exit_code)
{
	char id[64], *s;
	long status;

	start_job("{\"command\":[\"sh\",\"-c\",\"echo x >&2; sleep 0.5; "
		  "exit 3\"],\"timeoutMs\":10000}",
		  id);
	usleep(200000);
	s = ta_job_poll(&ta_fx.a, id, NULL, &status);
	ck_assert_str_eq(s, "{\"running\":true,\"frames\":["
			    "{\"t\":\"stderr\",\"seq\":0,\"data\":\"eAo=\"}]}");
	free(s);
	s = ta_job_poll_ended(&ta_fx.a, id, ",\"sinceSeq\":0");
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"exitCode\":3,"
			    "\"truncated\":false}");
	free(s);
}
END_TEST

START_TEST(jobs_cancel)
{
	const char *n = ta_needle();
	char id[64], json[256];

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"sleep %s & sleep %s\"],"
		 "\"timeoutMs\":30000}",
		 n, n);
	start_job(json, id);
	usleep(200000);
	ck_assert_int_ge(ta_count_procs(n), 1);
	cancel_job(&ta_fx.a, id);
	ck_assert_int_eq(ta_procs_gone(n, 2000), 0);
	expect_poll(id, NULL, 200,
		    "{\"running\":false,\"frames\":[],\"error\":{\"code\":"
		    "\"cancelled\",\"message\":\"the job was cancelled\"}}");
	/* Cancelling an ended job answers {} and changes nothing. */
	cancel_job(&ta_fx.a, id);
	start_job("{\"command\":[\"true\"],\"timeoutMs\":10000}", id);
	free(ta_job_poll_ended(&ta_fx.a, id, NULL));
	cancel_job(&ta_fx.a, id);
	expect_poll(id, NULL, 200,
		    "{\"running\":false,\"frames\":[],\"exitCode\":0,"
		    "\"truncated\":false}");
}
END_TEST

START_TEST(jobs_unknown_job)
{
	ta_expect_post_text(&ta_fx.a, "/v1/jobs/poll",
			    "{\"jobId\":\"nope\",\"sinceSeq\":null}", 404,
			    "JOB_NOT_FOUND: No such job in the sandbox: "
			    "nope");
	ta_expect_post(&ta_fx.a, "/v1/jobs/cancel",
		       "{\"jobId\":\"0b7c2a44-0000-4000-8000-000000000000\"}",
		       404,
		       "JOB_NOT_FOUND: No such job in the sandbox: "
		       "0b7c2a44-0000-4000-8000-000000000000");
}
END_TEST

START_TEST(jobs_start_refusals)
{
	ta_expect_post(&ta_fx.a, "/v1/jobs/start",
		       "{\"command\":[],\"timeoutMs\":5000}", 400,
		       "REQUEST_INVALID: Request invalid: command is empty");
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/start",
		"{\"command\":[\"true\"],\"timeoutMs\":0}", 400,
		"REQUEST_INVALID: Request invalid: a command must carry a "
		"non-zero deadline");
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/start",
		"{\"command\":[\"true\"],\"timeoutMs\":5,\"env\":{\"\":\"x\"}}",
		400,
		"REQUEST_INVALID: Request invalid: an environment name must "
		"be non-empty and contain no '='");
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/start",
		"{\"command\":[\"true\"],\"timeoutMs\":5,\"cwd\":\"a/../..\"}",
		400,
		"PATH_REFUSED: Path 'a/../..' refused: path traverses "
		"upward");
	ta_expect_post(&ta_fx.a, "/v1/jobs/start", "{\"command\":[\"true\"",
		       400, "Failed to parse the request body as JSON");
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/start",
		"{\"command\":[true],\"timeoutMs\":5}", 422,
		"Failed to deserialize the JSON body into the target type");
}
END_TEST

START_TEST(jobs_failures)
{
	const char *n = ta_needle();
	char id[64], json[256], *s;

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":300}", n);
	start_job(json, id);
	s = ta_job_poll_ended(&ta_fx.a, id, NULL);
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"error\":{"
			    "\"code\":\"timeoutExceeded\",\"message\":"
			    "\"exceeded its 300ms timeout\"}}");
	free(s);
	ck_assert_int_eq(ta_procs_gone(n, 2000), 0);
	start_job("{\"command\":[\"no-such-program-here\"],\"timeoutMs\":300}",
		  id);
	s = ta_job_poll_ended(&ta_fx.a, id, NULL);
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"error\":{"
			    "\"code\":\"spawnFailed\",\"message\":"
			    "\"No such file or directory (os error 2)\"}}");
	free(s);
}
END_TEST

START_TEST(jobs_limit_and_eviction)
{
	const char *n = ta_needle();
	char ids[PROTO_MAX_JOBS][64], id[64], json[256], *s;
	struct th_resp r;
	long long end;
	int i;

	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	for (i = 0; i < PROTO_MAX_JOBS; i++)
		start_job(json, ids[i]);
	/* Sixteen running: the seventeenth is refused. */
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/start", json, 429,
		"JOB_LIMIT_REACHED: Job limit reached: the sandbox holds 16 "
		"jobs that are running or whose ending has not been polled");
	/* A finished job whose ending nobody has read is kept. */
	cancel_job(&ta_fx.a, ids[0]);
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/start", json, 429,
		"JOB_LIMIT_REACHED: Job limit reached: the sandbox holds 16 "
		"jobs that are running or whose ending has not been polled");
	/* Once a poll has delivered its ending, it makes room. */
	s = ta_job_poll_ended(&ta_fx.a, ids[0], NULL);
	free(s);
	end = th_now_ms() + 3000;
	for (;;) {
		ta_post(&ta_fx.a, "/v1/jobs/start", json, &r);
		if (r.status == 200 || th_now_ms() > end)
			break;
		th_resp_cleanup(&r);
		usleep(20000);
	}
	ck_assert_msg(r.status == 200, "%ld %s", r.status, ta_body(&r));
	th_resp_cleanup(&r);
	snprintf(id, sizeof(id), "%s", ids[0]);
	snprintf(json, sizeof(json),
		 "JOB_NOT_FOUND: No such job in the sandbox: %s", id);
	expect_poll(id, NULL, 404, json);
	/* The others still run, and the new one. */
	expect_poll(ids[1], NULL, 200, "{\"running\":true,\"frames\":[]}");
	end = th_now_ms() + 3000;
	while (ta_count_procs(n) != PROTO_MAX_JOBS && th_now_ms() < end)
		usleep(20000);
	ck_assert_int_eq(ta_count_procs(n), PROTO_MAX_JOBS);
}
END_TEST

START_TEST(jobs_long_poll)
{
	char id[64], *s;
	long long t0, dt;
	long status;

	start_job("{\"command\":[\"sh\",\"-c\",\"sleep 0.6; echo x; sleep "
		  "0.6\"],\"timeoutMs\":10000}",
		  id);
	/* Held until output arrives... */
	t0 = th_now_ms();
	s = ta_job_poll(&ta_fx.a, id, ",\"sinceSeq\":null,\"waitMs\":10000",
			&status);
	dt = th_now_ms() - t0;
	ck_assert_int_eq(status, 200);
	ck_assert_str_eq(s, "{\"running\":true,\"frames\":["
			    "{\"t\":\"stdout\",\"seq\":0,\"data\":\"eAo=\"}]}");
	ck_assert_int_ge(dt, 300);
	ck_assert_int_lt(dt, 5000);
	free(s);
	/* ...then until the end. */
	t0 = th_now_ms();
	s = ta_job_poll(&ta_fx.a, id, ",\"sinceSeq\":0,\"waitMs\":10000",
			&status);
	dt = th_now_ms() - t0;
	ck_assert_str_eq(s, "{\"running\":false,\"frames\":[],\"exitCode\":0,"
			    "\"truncated\":false}");
	ck_assert_int_ge(dt, 300);
	ck_assert_int_lt(dt, 5000);
	free(s);
	/* An ended job answers at once. */
	t0 = th_now_ms();
	free(ta_job_poll(&ta_fx.a, id, ",\"waitMs\":10000", &status));
	ck_assert_int_lt(th_now_ms() - t0, 1000);
}
END_TEST

START_TEST(jobs_long_poll_times_out)
{
	char id[64], *s;
	long long t0, dt;
	long status;

	start_job("{\"command\":[\"sleep\",\"30\"],\"timeoutMs\":30000}", id);
	t0 = th_now_ms();
	s = ta_job_poll(&ta_fx.a, id, ",\"waitMs\":700", &status);
	dt = th_now_ms() - t0;
	ck_assert_int_eq(status, 200);
	ck_assert_str_eq(s, "{\"running\":true,\"frames\":[]}");
	ck_assert_int_ge(dt, 650);
	ck_assert_int_lt(dt, 5000);
	free(s);
	/* Without waitMs the answer is immediate. */
	t0 = th_now_ms();
	s = ta_job_poll(&ta_fx.a, id, ",\"waitMs\":0", &status);
	free(s);
	ck_assert_int_lt(th_now_ms() - t0, 1000);
}
END_TEST

START_TEST(jobs_strict_v1_ignores_wait)
{
	const char *extra[] = {"--strict-v1", NULL};
	char json[256];
	struct th_resp r;
	struct ta_box b;
	long long t0;
	const char *p;
	char id[64];

	ta_box_start(&b, extra);
	ta_post(&b.a, "/v1/jobs/start",
		"{\"command\":[\"sleep\",\"30\"],\"timeoutMs\":30000}", &r);
	ck_assert_int_eq(r.status, 200);
	p = ta_body(&r);
	memcpy(id, p + 10, 36);
	id[36] = '\0';
	th_resp_cleanup(&r);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\",\"waitMs\":3000}", id);
	t0 = th_now_ms();
	ta_post(&b.a, "/v1/jobs/poll", json, &r);
	ck_assert_int_lt(th_now_ms() - t0, 1500);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(ta_body(&r), "{\"running\":true,\"frames\":[]}");
	th_resp_cleanup(&r);
	ta_box_stop(&b);
}
END_TEST

START_TEST(jobs_malformed_bodies)
{
	char id[64];

	ta_expect_post(&ta_fx.a, "/v1/jobs/poll", "{", 400,
		       "Failed to parse the request body as JSON");
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/poll", "{\"jobId\":5}", 422,
		"Failed to deserialize the JSON body into the target type");
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/poll", "{\"jobId\":\"x\",\"sinceSeq\":-2}",
		422,
		"Failed to deserialize the JSON body into the target type");
	ta_expect_post(
		&ta_fx.a, "/v1/jobs/cancel", "[]", 422,
		"Failed to deserialize the JSON body into the target type");
	ta_expect_post(&ta_fx.a, "/v1/jobs/cancel", "", 400,
		       "Failed to parse the request body as JSON");
	start_job("{\"command\":[\"echo\",\"fine\"],\"timeoutMs\":5000}", id);
	free(ta_job_poll_ended(&ta_fx.a, id, NULL));
	cancel_job(&ta_fx.a, id);
}
END_TEST

START_TEST(jobs_keep_frames_bounded)
{
	const char *extra[] = {"--output-cap", "4096", NULL};
	char json[256], id[64];
	struct proto_job_poll p;
	struct th_resp r;
	long long end;
	struct ta_box b;

	ta_box_start(&b, extra);
	/* 3000 empty lines are 3000 bytes, under the cap, but a job keeps at
	 * most cap/4 + 1024 frames per stream. */
	ta_post(&b.a, "/v1/jobs/start",
		"{\"command\":[\"sh\",\"-c\",\"i=0; while [ $i -lt 3000 ]; "
		"do echo; i=$((i+1)); done\"],\"timeoutMs\":30000}",
		&r);
	ck_assert_int_eq(r.status, 200);
	memcpy(id, ta_body(&r) + 10, 36);
	id[36] = '\0';
	th_resp_cleanup(&r);
	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	end = th_now_ms() + 15000;
	for (;;) {
		ta_post(&b.a, "/v1/jobs/poll", json, &r);
		ck_assert_int_eq(r.status, 200);
		if (strncmp(ta_body(&r), "{\"running\":false", 16) == 0)
			break;
		th_resp_cleanup(&r);
		ck_assert(th_now_ms() < end);
		usleep(30000);
	}
	ck_assert_int_eq(proto_job_poll_decode(r.body.data, r.body.len, &p), 0);
	ck_assert_uint_eq(p.nframes, 4096 / 4 + 1024);
	ck_assert_uint_eq(p.frames[p.nframes - 1].seq, p.nframes - 1);
	ck_assert(p.has_exit);
	ck_assert_int_eq(p.exit_code, 0);
	ck_assert(p.truncated);
	proto_job_poll_cleanup(&p);
	th_resp_cleanup(&r);
	ta_box_stop(&b);
}
END_TEST

/* ---- jobs: the extension ------------------------------------------------- */

static void expect_poll_on(struct ta_box *b, const char *id, long status,
			   const char *want)
{
	char json[128];

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	ta_expect_post(&b->a, "/v1/jobs/poll", json, status, want);
}

/* One poll of b's job with extra members; the decoded answer. */
static void poll_on(struct ta_box *b, const char *id, const char *extra,
		    struct proto_job_poll *p, size_t *len)
{
	char json[256];
	struct th_resp r;

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"%s}", id,
		 extra ? extra : "");
	ta_post(&b->a, "/v1/jobs/poll", json, &r);
	ck_assert_msg(r.status == 200, "poll: %ld %s", r.status, ta_body(&r));
	ck_assert_msg(proto_job_poll_decode(r.body.data, r.body.len, p) == 0,
		      "poll answer: %.200s", ta_body(&r));
	if (len != NULL)
		*len = r.body.len;
	th_resp_cleanup(&r);
}

/* Collect a flow-controlled job's output as a client does: poll from the
 * last seq taken (which acknowledges it) until the end. Frames must be
 * contiguous in each stream. Returns the last answer (the ending). */
static void collect(struct ta_box *b, const char *id, struct buf *out,
		    struct buf *err, struct proto_job_poll *end)
{
	long long until = th_now_ms() + 60000;
	bool has_since = false;
	uint64_t since = 0;
	char extra[96];

	for (;;) {
		struct proto_job_poll p;
		size_t i;

		if (has_since)
			snprintf(extra, sizeof(extra),
				 ",\"sinceSeq\":%llu,\"waitMs\":2000,"
				 "\"maxBytes\":1048576",
				 (unsigned long long)since);
		else
			snprintf(extra, sizeof(extra),
				 ",\"waitMs\":2000,\"maxBytes\":1048576");
		poll_on(b, id, extra, &p, NULL);
		for (i = 0; i < p.nframes; i++) {
			struct proto_frame *f = &p.frames[i];
			struct buf *to =
				f->type == PROTO_FRAME_STDOUT ? out : err;

			ck_assert(f->has_off);
			ck_assert_uint_eq(f->off, to->len);
			ck_assert_int_eq(buf_append(to, f->data, f->len), 0);
			since = f->seq;
			has_since = true;
		}
		if (!p.running) {
			*end = p;
			return;
		}
		proto_job_poll_cleanup(&p);
		ck_assert_msg(th_now_ms() < until, "job %s never ended", id);
	}
}

START_TEST(jobs_flow_keeps_everything)
{
	const char *extra[] = {"--job-window", "1M", NULL};
	struct buf out = BUF_INIT(0), err = BUF_INIT(0);
	struct proto_job_poll p;
	char id[64];
	size_t i;
	struct ta_box b;

	ta_box_start(&b, extra);
	/* 5 MB of output, the window 1 MiB, the cap 4 MiB: nothing may be
	 * dropped. */
	ta_job_start(&b.a,
		     "{\"command\":[\"sh\",\"-c\",\"yes abcdefghij | head -c "
		     "5000000; echo done >&2\"],\"timeoutMs\":60000,"
		     "\"flowControl\":true}",
		     id);
	/* Nobody acknowledges: the job waits with its output unread. */
	usleep(1500000);
	poll_on(&b, id, NULL, &p, NULL);
	ck_assert(p.running);
	ck_assert_uint_gt(p.nframes, 0);
	proto_job_poll_cleanup(&p);
	collect(&b, id, &out, &err, &p);
	ck_assert(p.has_exit);
	ck_assert_int_eq(p.exit_code, 0);
	ck_assert(!p.truncated);
	ck_assert(p.has_bytes);
	ck_assert_uint_eq(p.stdout_bytes, 5000000);
	ck_assert_uint_eq(p.stderr_bytes, 5);
	proto_job_poll_cleanup(&p);
	ck_assert_uint_eq(out.len, 5000000);
	for (i = 0; i < out.len; i++)
		if (out.data[i] != "abcdefghij\n"[i % 11])
			ck_abort_msg("byte %zu differs", i);
	ck_assert_str_eq(err.data, "done\n");
	buf_cleanup(&out);
	buf_cleanup(&err);
	ta_box_stop(&b);
}
END_TEST

START_TEST(jobs_flow_releases_only_acknowledged)
{
	const char *extra[] = {"--job-window", "1M", NULL};
	struct buf out = BUF_INIT(0), err = BUF_INIT(0);
	struct proto_job_poll p;
	char id[64];
	struct ta_box b;

	ta_box_start(&b, extra);
	/* Small output, acknowledged: kept all the same (no room needed). */
	ta_job_start(&b.a,
		     "{\"command\":[\"sh\",\"-c\",\"echo one; echo two\"],"
		     "\"timeoutMs\":60000,\"flowControl\":true}",
		     id);
	collect(&b, id, &out, &err, &p);
	proto_job_poll_cleanup(&p);
	poll_on(&b, id, ",\"sinceSeq\":null", &p, NULL);
	ck_assert(!p.running);
	ck_assert_uint_ge(p.nframes, 1);
	ck_assert_uint_eq(p.frames[0].off, 0);
	ck_assert_uint_eq(out.len, 8);
	ck_assert_mem_eq(out.data, "one\ntwo\n", 8);
	proto_job_poll_cleanup(&p);
	buf_reset(&out);
	buf_reset(&err);

	/* More than the window, acknowledged as it goes: the oldest went
	 * to make room, so a poll from the start begins later, and says
	 * where; the ending still gives the whole length. */
	ta_job_start(&b.a,
		     "{\"command\":[\"sh\",\"-c\",\"head -c 3000000 "
		     "/dev/zero\"],\"timeoutMs\":60000,\"flowControl\":true}",
		     id);
	collect(&b, id, &out, &err, &p);
	ck_assert_uint_eq(out.len, 3000000);
	proto_job_poll_cleanup(&p);
	poll_on(&b, id, ",\"sinceSeq\":null", &p, NULL);
	ck_assert(!p.running);
	ck_assert_uint_gt(p.nframes, 0);
	ck_assert_uint_gt(p.frames[0].off, 0);
	ck_assert_uint_le(3000000 - p.frames[0].off, 1024 * 1024);
	ck_assert(p.has_bytes);
	ck_assert_uint_eq(p.stdout_bytes, 3000000);
	proto_job_poll_cleanup(&p);
	buf_cleanup(&out);
	buf_cleanup(&err);
	ta_box_stop(&b);
}
END_TEST

START_TEST(jobs_flow_paused_job_cancel_and_timeout)
{
	const char *extra[] = {"--job-window", "1M", NULL};
	const char *n = ta_needle();
	struct proto_job_poll p;
	char id[64], json[512];
	struct ta_box b;

	ta_box_start(&b, extra);
	/* A job blocked on its output still ends at a cancel... */
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sh\",\"-c\",\"head -c 4000000 /dev/zero; "
		 "sleep %s\"],\"timeoutMs\":60000,\"flowControl\":true}",
		 n);
	ta_job_start(&b.a, json, id);
	usleep(500000);
	cancel_job(&b.a, id);
	poll_on(&b, id, ",\"sinceSeq\":999999", &p, NULL);
	ck_assert(!p.running);
	ck_assert_str_eq(p.err_code, "cancelled");
	proto_job_poll_cleanup(&p);
	ck_assert_int_eq(ta_procs_gone(n, 3000), 0);
	/* ...and at its timeout. */
	ta_job_start(&b.a,
		     "{\"command\":[\"sh\",\"-c\",\"head -c 4000000 "
		     "/dev/zero\"],\"timeoutMs\":800,\"flowControl\":true}",
		     id);
	usleep(1800000);
	poll_on(&b, id, ",\"sinceSeq\":999999", &p, NULL);
	ck_assert(!p.running);
	ck_assert_str_eq(p.err_code, "timeoutExceeded");
	proto_job_poll_cleanup(&p);
	ta_box_stop(&b);
}
END_TEST

START_TEST(jobs_max_bytes)
{
	struct proto_job_poll p;
	char id[64];
	size_t len;

	start_job("{\"command\":[\"sh\",\"-c\",\"head -c 1000000 "
		  "/dev/zero\"],\"timeoutMs\":60000,\"flowControl\":true}",
		  id);
	usleep(500000);
	/* The answer stops near maxBytes, says running, and goes on from
	 * where it stopped. */
	poll_on(&ta_fx, id, ",\"maxBytes\":100000", &p, &len);
	ck_assert(p.running);
	ck_assert_uint_ge(p.nframes, 1);
	ck_assert_uint_le(len, 100000 + 100);
	proto_job_poll_cleanup(&p);
	/* Below the least the agent takes (64 KiB), it takes the least;
	 * one frame always goes. */
	poll_on(&ta_fx, id, ",\"maxBytes\":1", &p, &len);
	ck_assert(p.running);
	ck_assert_uint_ge(p.nframes, 1);
	if (p.nframes > 1)
		ck_assert_uint_le(len, 65536 + 100);
	proto_job_poll_cleanup(&p);
	/* Without maxBytes all of it comes (under 16 MiB). */
	poll_on(&ta_fx, id, NULL, &p, &len);
	ck_assert_uint_gt(len, 1000000);
	proto_job_poll_cleanup(&p);
}
END_TEST

START_TEST(jobs_alien_style_still_truncates)
{
	const char *strict[] = {"--strict-v1", "--output-cap", "4096", NULL};
	const char *ext[] = {"--output-cap", "4096", NULL};
	struct proto_job_poll p;
	char id[64];
	struct ta_box b;
	int i;

	/* Without flowControl, or with it on a strict agent (which does not
	 * know it): alien's cap, the rest dropped, truncated. */
	for (i = 0; i < 2; i++) {
		long long until = th_now_ms() + 15000;

		ta_box_start(&b, i == 0 ? ext : strict);
		ta_job_start(
			&b.a,
			i == 0 ? "{\"command\":[\"sh\",\"-c\",\"head -c 20000 "
				 "/dev/zero\"],\"timeoutMs\":10000}"
			       : "{\"command\":[\"sh\",\"-c\",\"head -c 20000 "
				 "/dev/zero\"],\"timeoutMs\":10000,"
				 "\"flowControl\":true}",
			id);
		for (;;) {
			poll_on(&b, id, NULL, &p, NULL);
			if (!p.running)
				break;
			proto_job_poll_cleanup(&p);
			ck_assert(th_now_ms() < until);
			usleep(50000);
		}
		ck_assert(p.truncated);
		ck_assert(!p.has_bytes);
		ck_assert(p.nframes == 0 || !p.frames[0].has_off);
		proto_job_poll_cleanup(&p);
		ta_box_stop(&b);
	}
}
END_TEST

/* GET /sandboxfs/v1/jobs on b: the decoded listing. */
static void list_on(struct ta_box *b, struct proto_job_list *l)
{
	const char *h[] = {b->a.auth, NULL};
	char url[256];
	struct th_resp r;

	snprintf(url, sizeof(url), "%s/sandboxfs/v1/jobs", b->a.base);
	th_http("GET", url, h, NULL, 0, &r);
	ck_assert_msg(r.status == 200, "list: %ld %s", r.status, ta_body(&r));
	ck_assert_msg(strstr(ta_body(&r), "s3cr3t") == NULL,
		      "the listing shows an env value: %s", ta_body(&r));
	ck_assert_int_eq(proto_job_list_decode(r.body.data, r.body.len, l), 0);
	th_resp_cleanup(&r);
}

static const struct proto_job_info *listed(const struct proto_job_list *l,
					   const char *id)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->jobs[i].job_id, id) == 0)
			return &l->jobs[i];
	return NULL;
}

START_TEST(jobs_listing)
{
	const char *n = ta_needle();
	struct proto_job_list l;
	const struct proto_job_info *ji;
	char a[64], c[64], json[512];
	long long t0 = (long long)time(NULL) * 1000;
	struct th_resp r;
	const char *strict[] = {"--strict-v1", NULL};
	struct ta_box b;

	ta_mkdir_in(ta_fx.root, "sub");
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000,"
		 "\"cwd\":\"sub\",\"env\":{\"KEY\":\"s3cr3t\"},"
		 "\"flowControl\":true}",
		 n);
	start_job(json, a);
	start_job("{\"command\":[\"sh\",\"-c\",\"exit 3\"],\"timeoutMs\":"
		  "30000}",
		  c);
	free(ta_job_poll_ended(&ta_fx.a, c, NULL));
	list_on(&ta_fx, &l);
	ck_assert(l.complete);
	ck_assert_uint_eq(l.n, 2);
	/* oldest first */
	ck_assert_str_eq(l.jobs[0].job_id, a);
	ji = listed(&l, a);
	ck_assert_ptr_nonnull(ji);
	ck_assert_uint_eq(ji->argc, 2);
	ck_assert_str_eq(ji->argv[0], "sleep");
	ck_assert_str_eq(ji->cwd, "sub");
	ck_assert_uint_eq(ji->envc, 1);
	ck_assert_str_eq(ji->env[0], "KEY");
	ck_assert_uint_eq(ji->timeout_ms, 30000);
	ck_assert(ji->flow);
	ck_assert_int_eq(ji->state, PROTO_JOB_RUNNING);
	ck_assert_int_ge(ji->started_ms, t0 - 2000);
	ck_assert_int_le(ji->started_ms, t0 + 60000);
	ji = listed(&l, c);
	ck_assert_ptr_nonnull(ji);
	ck_assert_int_eq(ji->state, PROTO_JOB_EXITED);
	ck_assert_int_eq(ji->exit_code, 3);
	ck_assert(!ji->flow);
	ck_assert_ptr_null(ji->cwd);
	ck_assert_int_ge(ji->ended_ms, ji->started_ms);
	proto_job_list_cleanup(&l);
	cancel_job(&ta_fx.a, a);
	list_on(&ta_fx, &l);
	ji = listed(&l, a);
	ck_assert_ptr_nonnull(ji);
	ck_assert_int_eq(ji->state, PROTO_JOB_CANCELLED);
	proto_job_list_cleanup(&l);

	/* a strict agent has no such route */
	ta_box_start(&b, strict);
	ta_ext_req(&b.a, "GET", "jobs", NULL, NULL, NULL, 0, &r);
	ta_expect_empty(&r, 404);
	ta_box_stop(&b);
}
END_TEST

START_TEST(jobs_running_limit)
{
	const char *extra[] = {"--max-running-jobs", "2", NULL};
	const char *n = ta_needle();
	char ids[2][64], id[64], json[256];
	struct th_resp r;
	struct ta_box b;
	int i;

	ta_box_start(&b, extra);
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	ta_job_start(&b.a, json, ids[0]);
	ta_job_start(&b.a, json, ids[1]);
	ta_expect_post(
		&b.a, "/v1/jobs/start", json, 429,
		"JOB_LIMIT_REACHED: Job limit reached: the sandbox runs 2 "
		"jobs, the most it runs at once (sandbox-agent "
		"--max-running-jobs 2)");
	/* A job that ended counts no more, polled or not. */
	cancel_job(&b.a, ids[0]);
	snprintf(json, sizeof(json),
		 "{\"command\":[\"sleep\",\"%s\"],\"timeoutMs\":30000}", n);
	ta_job_start(&b.a, json, id);
	cancel_job(&b.a, id);
	/* Forty quick jobs in a row, none of them polled: each one that
	 * ends makes room (under alien's rule the seventeenth would
	 * fail). */
	for (i = 0; i < 40; i++) {
		long long until = th_now_ms() + 5000;

		for (;;) {
			ta_post(&b.a, "/v1/jobs/start",
				"{\"command\":[\"true\"],\"timeoutMs\":10000}",
				&r);
			if (r.status != 429 || th_now_ms() > until)
				break;
			th_resp_cleanup(&r);
			usleep(10000);
		}
		ck_assert_msg(r.status == 200, "job %d: %ld %s", i, r.status,
			      ta_body(&r));
		th_resp_cleanup(&r);
	}
	/* The one still running, and the finished ones, are all kept. */
	expect_poll_on(&b, ids[1], 200, "{\"running\":true,\"frames\":[]}");
	ta_box_stop(&b);
}
END_TEST

/* A poll of job id on b answers status. */
static void poll_status(struct ta_box *b, const char *id, long status)
{
	struct th_resp r;
	char json[128];

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	ta_post(&b->a, "/v1/jobs/poll", json, &r);
	ck_assert_int_eq(r.status, status);
	th_resp_cleanup(&r);
}

/* Job id on b is forgotten (a poll answers 404) within tries polls 20 ms
 * apart. */
static void forgotten_within(struct ta_box *b, const char *id, int tries)
{
	struct th_resp r;
	char json[128];
	int i;

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"}", id);
	for (i = 0; i < tries; i++) {
		ta_post(&b->a, "/v1/jobs/poll", json, &r);
		if (r.status == 404)
			break;
		th_resp_cleanup(&r);
		usleep(20000);
	}
	ck_assert_int_eq(r.status, 404);
	th_resp_cleanup(&r);
}

START_TEST(jobs_retention)
{
	const char *count[] = {"--job-retention-count", "2", NULL};
	const char *age[] = {"--job-retention", "1", NULL};
	char ids[3][64];
	struct ta_box b;
	int i;

	ta_box_start(&b, count);
	for (i = 0; i < 3; i++) {
		long long until = th_now_ms() + 10000;

		ta_job_start(&b.a,
			     "{\"command\":[\"true\"],\"timeoutMs\":10000}",
			     ids[i]);
		/* ended (and reaped) before the next one starts */
		for (;;) {
			struct proto_job_poll p;

			poll_on(&b, ids[i], NULL, &p, NULL);
			if (!p.running) {
				proto_job_poll_cleanup(&p);
				break;
			}
			proto_job_poll_cleanup(&p);
			ck_assert(th_now_ms() < until);
			usleep(20000);
		}
		usleep(100000);
	}
	/* The oldest of three finished jobs went; the last two stay. */
	forgotten_within(&b, ids[0], 100);
	poll_status(&b, ids[2], 200);
	ta_box_stop(&b);

	/* Past the retention time a finished job is forgotten. */
	ta_box_start(&b, age);
	ta_job_start(&b.a, "{\"command\":[\"true\"],\"timeoutMs\":10000}",
		     ids[0]);
	poll_status(&b, ids[0], 200);
	forgotten_within(&b, ids[0], 150);
	ta_box_stop(&b);
}
END_TEST

START_TEST(jobs_spool_outside_root)
{
	struct ta_box b;
	DIR *d;
	struct dirent *e;
	char id[64];
	struct proto_job_poll p;
	int found = 0;
	char *spool = th_tmpdir("spool");
	const char *extra[] = {"--spool-dir", spool, "--job-window", "1M",
			       NULL};

	ta_box_start(&b, extra);
	/* Output past the memory part spills, into a private directory of
	 * the spool, whose files have no name. */
	ta_job_start(&b.a,
		     "{\"command\":[\"sh\",\"-c\",\"head -c 900000 /dev/zero; "
		     "sleep 30\"],\"timeoutMs\":60000,\"flowControl\":true}",
		     id);
	usleep(800000);
	d = opendir(spool);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		char path[PATH_MAX];
		struct stat st;
		DIR *in;
		struct dirent *f;

		if (strncmp(e->d_name, "sandbox-agent.", 14) != 0)
			continue;
		found++;
		snprintf(path, sizeof(path), "%s/%s", spool, e->d_name);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_uint_eq(st.st_mode & 0777, 0700);
		in = opendir(path);
		ck_assert_ptr_nonnull(in);
		while ((f = readdir(in)) != NULL)
			ck_assert_msg(f->d_name[0] == '.' &&
					      (f->d_name[1] == '\0' ||
					       strcmp(f->d_name, "..") == 0),
				      "a named spool file: %s", f->d_name);
		closedir(in);
	}
	closedir(d);
	ck_assert_int_eq(found, 1);
	poll_on(&b, id, NULL, &p, NULL);
	ck_assert(p.running);
	proto_job_poll_cleanup(&p);
	ta_box_stop(&b);
	/* removed at exit */
	d = opendir(spool);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		ck_assert_msg(strncmp(e->d_name, "sandbox-agent.", 14) != 0,
			      "the spool directory is left: %s", e->d_name);
	closedir(d);
	th_rmtree(spool);
	free(spool);
}
END_TEST

void agent_jobs_cases(Suite *s)
{
	TCASE_TABLE(s, "jobs", ta_setup, ta_teardown, 60,
		    jobs_start_poll_replay, jobs_running_then_exit_code,
		    jobs_cancel, jobs_unknown_job, jobs_start_refusals,
		    jobs_failures, jobs_long_poll, jobs_long_poll_times_out,
		    jobs_strict_v1_ignores_wait, jobs_malformed_bodies,
		    jobs_keep_frames_bounded, jobs_max_bytes, jobs_listing);
	TCASE_TABLE(s, "jobs_strict", ta_setup_strict, ta_teardown, 60,
		    jobs_limit_and_eviction);
	TCASE_TABLE(s, "jobs_ext", NULL, NULL, 120, jobs_flow_keeps_everything,
		    jobs_flow_releases_only_acknowledged,
		    jobs_flow_paused_job_cancel_and_timeout,
		    jobs_alien_style_still_truncates, jobs_running_limit,
		    jobs_retention, jobs_spool_outside_root);
}
