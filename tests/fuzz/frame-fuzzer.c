/* SPDX-License-Identifier: MIT */
/*
 * frame-fuzzer: the decoders a client runs on what an agent sends back for
 * commands (the NDJSON splitter, output frames, job poll answers, the
 * extension's job listing) and for change events, and the ones the agent
 * runs on command requests and poll requests. Besides not crashing, every
 * input must give the same lines however it is cut into reads, and
 * whatever decodes must survive encode-then-decode unchanged.
 *
 * Built as a libFuzzer target with --enable-fuzzing. Otherwise the same
 * file is linked with the main() of replay.c, which runs every file of the
 * corpus as a `make check` test.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/proto_files.h"
#include "tests/fuzz/replay.h"

/* Its corpus, and the name in FAIL's messages (replay.h). */
const char fuzz_corpus[] = "frame";

static bool str_same(const char *a, const char *b)
{
	return (a == NULL && b == NULL) ||
	       (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The first n strings of a and b are the same. */
static bool strv_same(char *const *a, char *const *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

static bool frame_same(const struct proto_frame *a, const struct proto_frame *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case PROTO_FRAME_STDOUT:
	case PROTO_FRAME_STDERR:
		return a->seq == b->seq && a->len == b->len &&
		       a->has_off == b->has_off &&
		       (!a->has_off || a->off == b->off) &&
		       (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
	case PROTO_FRAME_EXIT:
		return a->code == b->code && a->truncated == b->truncated;
	case PROTO_FRAME_ERROR:
		return str_same(a->err_code, b->err_code) &&
		       str_same(a->err_message, b->err_message);
	}
	return false;
}

/* A decoded frame, encoded and decoded again, is the same frame. */
static void frame_roundtrip(const struct proto_frame *f)
{
	struct buf b = BUF_INIT(0);
	struct proto_frame g;

	if (proto_frame_encode(f, &b) < 0)
		FAIL("a decoded frame does not encode");
	if (b.len == 0 || b.data[b.len - 1] != '\n')
		FAIL("an encoded frame is not one line");
	if (memchr(b.data, '\n', b.len - 1) != NULL)
		FAIL("an encoded frame holds a newline");
	if (proto_frame_decode(b.data, b.len - 1, &g) < 0)
		FAIL("an encoded frame does not decode");
	if (!frame_same(f, &g))
		FAIL("a frame changed on the way round");
	proto_frame_cleanup(&g);
	buf_cleanup(&b);
}

/* Split data into lines, fed in pieces of the given sizes (0: all at
 * once); the lines, each followed by '\n', go to out. */
static int split(const uint8_t *data, size_t size, unsigned step,
		 struct buf *out)
{
	struct proto_ndjson s;
	const char *line;
	size_t off = 0, len, n = 1;
	int rc = 0;

	proto_ndjson_init(&s);
	while (off < size && rc == 0) {
		size_t take = step ? n : size - off;

		if (take > size - off)
			take = size - off;
		rc = proto_ndjson_feed(&s, data + off, take);
		off += take;
		if (step)
			n = n % step + 1;
		while (rc == 0 && proto_ndjson_next(&s, &line, &len) == 1) {
			if (len == 0 || memchr(line, '\n', len) != NULL)
				FAIL("the splitter gave a bad line");
			if (buf_append(out, line, len) < 0 ||
			    buf_append(out, "\n", 1) < 0)
				FAIL("out of memory");
		}
	}
	proto_ndjson_cleanup(&s);
	return rc;
}

static void fuzz_ndjson(const uint8_t *data, size_t size)
{
	struct buf whole = BUF_INIT(0), pieces = BUF_INIT(0);
	int a = split(data, size, 0, &whole);
	int b = split(data, size, 7, &pieces);
	size_t off = 0;

	if ((a < 0) != (b < 0))
		FAIL("cutting the input changed the splitter's verdict");
	if (a == 0 &&
	    (whole.len != pieces.len ||
	     (whole.len && memcmp(whole.data, pieces.data, whole.len) != 0)))
		FAIL("cutting the input changed the lines");
	while (a == 0 && off < whole.len) {
		char *nl = memchr(whole.data + off, '\n', whole.len - off);
		size_t len = (size_t)(nl - (whole.data + off));
		struct proto_frame f;

		if (proto_frame_decode(whole.data + off, len, &f) == 0) {
			frame_roundtrip(&f);
			proto_frame_cleanup(&f);
		}
		off += len + 1;
	}
	buf_cleanup(&whole);
	buf_cleanup(&pieces);
}

static void fuzz_poll_answer(const uint8_t *data, size_t size)
{
	struct proto_job_poll p, q;
	struct buf b = BUF_INIT(0);
	size_t i;

	if (proto_job_poll_decode((const char *)data, size, &p) < 0)
		return;
	if (proto_job_poll_encode(&p, &b) < 0)
		FAIL("a decoded poll answer does not encode");
	if (proto_job_poll_decode(b.data, b.len, &q) < 0)
		FAIL("an encoded poll answer does not decode");
	if (p.running != q.running || p.nframes != q.nframes ||
	    p.has_exit != q.has_exit || p.has_error != q.has_error)
		FAIL("a poll answer changed on the way round");
	/* truncated is written only with an exit code. */
	if (p.has_exit &&
	    (p.exit_code != q.exit_code || p.truncated != q.truncated))
		FAIL("a poll answer's ending changed");
	if (p.has_error && (!str_same(p.err_code, q.err_code) ||
			    !str_same(p.err_message, q.err_message)))
		FAIL("a poll answer's error changed");
	if (p.has_bytes != q.has_bytes ||
	    (p.has_bytes && (p.stdout_bytes != q.stdout_bytes ||
			     p.stderr_bytes != q.stderr_bytes)))
		FAIL("a poll answer's byte counts changed");
	for (i = 0; i < p.nframes; i++)
		if (!frame_same(&p.frames[i], &q.frames[i]))
			FAIL("a poll answer's frame changed");
	proto_job_poll_cleanup(&p);
	proto_job_poll_cleanup(&q);
	buf_cleanup(&b);
}

static void fuzz_requests(const uint8_t *data, size_t size)
{
	char id[PROTO_JOB_ID_MAX + 1];
	struct proto_exec_req r, s;
	struct proto_job_poll_req pr, ps;
	struct buf b = BUF_INIT(0);

	if (proto_job_id_decode((const char *)data, size, id) == 0 &&
	    strlen(id) > PROTO_JOB_ID_MAX)
		FAIL("a job id passed its bound");
	if (proto_job_poll_req_decode((const char *)data, size, &pr) == 0) {
		if (proto_job_poll_req_encode(&pr, &b) < 0 ||
		    proto_job_poll_req_decode(b.data, b.len, &ps) < 0)
			FAIL("a poll request does not go round");
		if (strcmp(pr.job_id, ps.job_id) != 0 ||
		    pr.has_since != ps.has_since ||
		    (pr.has_since && pr.since_seq != ps.since_seq) ||
		    pr.wait_ms != ps.wait_ms || pr.max_bytes != ps.max_bytes)
			FAIL("a poll request changed on the way round");
		buf_reset(&b);
	}
	if (proto_exec_req_decode((const char *)data, size, &r) < 0) {
		buf_cleanup(&b);
		return;
	}
	(void)proto_exec_req_validate(&r);
	/* Strings cut at a NUL, and keys with '=', cannot go round. */
	if (r.flags == 0) {
		if (proto_exec_req_encode(&r, &b) < 0 ||
		    proto_exec_req_decode(b.data, b.len, &s) < 0)
			FAIL("a command request does not go round");
		if (r.argc != s.argc || r.envc != s.envc ||
		    r.timeout_ms != s.timeout_ms || !str_same(r.cwd, s.cwd) ||
		    r.flow != s.flow)
			FAIL("a command request changed on the way round");
		if (!strv_same(r.argv, s.argv, r.argc))
			FAIL("an argument changed on the way round");
		if (!strv_same(r.env, s.env, r.envc))
			FAIL("an env entry changed on the way round");
		proto_exec_req_cleanup(&s);
	}
	proto_exec_req_cleanup(&r);
	buf_cleanup(&b);
}

/* A decoded job listing, encoded and decoded again, is the same. */
static void fuzz_job_list(const uint8_t *data, size_t size)
{
	struct proto_job_list l, m;
	struct buf b = BUF_INIT(0);
	size_t i, k;

	if (proto_job_list_decode((const char *)data, size, &l) < 0)
		return;
	if (proto_job_list_encode_head(&b) < 0)
		FAIL("out of memory");
	for (i = 0; i < l.n; i++)
		if (proto_job_list_encode_entry(&l.jobs[i], i == 0, &b) < 0)
			FAIL("a decoded listing entry does not encode");
	if (proto_job_list_encode_tail(l.complete, &b) < 0 ||
	    proto_job_list_decode(b.data, b.len, &m) < 0)
		FAIL("an encoded listing does not decode");
	if (l.n != m.n || l.complete != m.complete)
		FAIL("a listing changed on the way round");
	for (i = 0; i < l.n; i++) {
		const struct proto_job_info *x = &l.jobs[i], *y = &m.jobs[i];

		if (strcmp(x->job_id, y->job_id) != 0 || x->argc != y->argc ||
		    x->envc != y->envc || x->state != y->state ||
		    x->timeout_ms != y->timeout_ms ||
		    x->started_ms != y->started_ms || x->flow != y->flow ||
		    !str_same(x->cwd, y->cwd) ||
		    (x->state == PROTO_JOB_EXITED &&
		     x->exit_code != y->exit_code) ||
		    (x->state == PROTO_JOB_FAILED &&
		     (!str_same(x->err_code, y->err_code) ||
		      !str_same(x->err_message, y->err_message))))
			FAIL("a listing entry changed on the way round");
		if (!strv_same(x->argv, y->argv, x->argc))
			FAIL("a listed argument changed");
		if (!strv_same(x->env, y->env, x->envc))
			FAIL("a listed env name changed");
		for (k = 0; k < y->envc; k++)
			if (strchr(y->env[k], '=') != NULL)
				FAIL("a listed env name holds '='");
	}
	proto_job_list_cleanup(&l);
	proto_job_list_cleanup(&m);
	buf_cleanup(&b);
}

/* A change events answer that decodes encodes to one that decodes the
 * same (a lost answer to a lost answer). */
static void fuzz_events(const uint8_t *data, size_t size)
{
	struct proto_events e, g;
	struct buf b = BUF_INIT(0);
	size_t i;
	int rc;

	if (proto_events_decode((const char *)data, size, &e) < 0)
		return;
	rc = proto_events_begin(&b, e.boot_id);
	if (e.lost) {
		struct proto_event lost;

		memset(&lost, 0, sizeof(lost));
		lost.seq = e.next;
		lost.type = PROTO_EV_LOST;
		if (rc == 0)
			rc = proto_events_add(&b, true, &lost);
	}
	for (i = 0; i < e.n && rc == 0; i++)
		rc = proto_events_add(&b, i == 0, &e.ev[i]);
	if (rc == 0)
		rc = proto_events_end(&b, e.next,
				      e.unavailable[0] ? e.unavailable : NULL);
	if (rc < 0)
		FAIL("decoded events do not encode");
	if (proto_events_decode(b.data, b.len, &g) < 0)
		FAIL("encoded events do not decode");
	if (g.n != e.n || g.next != e.next || g.lost != e.lost ||
	    strcmp(g.boot_id, e.boot_id) != 0 ||
	    strcmp(g.unavailable, e.unavailable) != 0)
		FAIL("events changed on the way round");
	for (i = 0; i < e.n; i++)
		if (g.ev[i].seq != e.ev[i].seq ||
		    (g.ev[i].type != e.ev[i].type &&
		     e.ev[i].type != PROTO_EV_OTHER) ||
		    g.ev[i].dir != e.ev[i].dir ||
		    !str_same(g.ev[i].path, e.ev[i].path) ||
		    !str_same(g.ev[i].to, e.ev[i].to) ||
		    strcmp(g.ev[i].by, e.ev[i].by) != 0)
			FAIL("an event changed on the way round");
	proto_events_cleanup(&g);
	proto_events_cleanup(&e);
	buf_cleanup(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_ndjson(data, size);
	fuzz_poll_answer(data, size);
	fuzz_requests(data, size);
	fuzz_job_list(data, size);
	fuzz_events(data, size);
	return 0;
}
