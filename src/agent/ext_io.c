/* SPDX-License-Identifier: MIT */
/*
 * ext_io: the file extension's routes that move a file's bytes
 * (doc/protocol-ext.md): GET read (a range, with validators), GET
 * contents (a directory's small files in one answer, streamed) and PUT
 * write (at an offset or appended, optionally creating the file and
 * setting its times).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/ext_i.h"
#include "agent/fsops.h"
#include "agent/jobs.h"
#include "agent/watch.h"
#include "common/log.h"
#include "common/xalloc.h"

/* ---- GET read ------------------------------------------------------------ */

/*
 * "bytes=a-b", "bytes=a-" or "bytes=-n", one range only. Returns 0 with
 * the span, -ERANGE when it starts at or past the end (416), -EINVAL when
 * it is not a single byte range (refused rather than ignored: a client that
 * asked for a piece must not get a whole file it did not expect).
 */
static int parse_range(const char *h, uint64_t size, uint64_t *off,
		       uint64_t *len)
{
	uint64_t first = 0, last = UINT64_MAX;
	bool has_first = false, has_last = false;
	const char *p = h;

	while (*p == ' ' || *p == '\t')
		p++;
	if (strncasecmp(p, "bytes", 5) != 0)
		return -EINVAL;
	p += 5;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p++ != '=')
		return -EINVAL;
	while (*p == ' ' || *p == '\t')
		p++;
	for (; *p >= '0' && *p <= '9'; p++) {
		has_first = true;
		/* Saturate: a start beyond any file is simply past the end. */
		first = first > (UINT64_MAX - 9) / 10
				? UINT64_MAX
				: first * 10 + (uint64_t)(*p - '0');
	}
	if (*p++ != '-')
		return -EINVAL;
	if (*p >= '0' && *p <= '9')
		last = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		has_last = true;
		last = last > (UINT64_MAX - 9) / 10
			       ? UINT64_MAX
			       : last * 10 + (uint64_t)(*p - '0');
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '\0' || (!has_first && !has_last))
		return -EINVAL;
	if (!has_first) {
		/* suffix: the last n bytes */
		if (last == 0 || size == 0)
			return -ERANGE;
		if (last > size)
			last = size;
		*off = size - last;
		*len = last;
		return 0;
	}
	if (has_last && last < first)
		return -EINVAL;
	if (first >= size)
		return -ERANGE;
	if (last >= size)
		last = size - 1;
	*off = first;
	*len = last - first + 1;
	return 0;
}

/* If-Match / If-Range: "*" or a list of entity tags, compared strongly. */
static bool etag_matches(const char *h, const char *etag)
{
	size_t elen = strlen(etag);
	const char *p = h;

	while (*p) {
		const char *end;
		size_t n;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		end = p;
		while (*end && *end != ',')
			end++;
		n = (size_t)(end - p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if ((n == 1 && *p == '*') ||
		    (n == elen && memcmp(p, etag, n) == 0))
			return true;
		p = end;
	}
	return false;
}

/* IMF-fixdate, built by hand: strftime's names follow the locale. */
static void http_date(int64_t t, char *out, size_t outsz)
{
	static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed",
					"Thu", "Fri", "Sat"};
	static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr",
					   "May", "Jun", "Jul", "Aug",
					   "Sep", "Oct", "Nov", "Dec"};
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL) {
		snprintf(out, outsz, "Thu, 01 Jan 1970 00:00:00 GMT");
		return;
	}
	snprintf(out, outsz, "%s, %02d %s %04d %02d:%02d:%02d GMT",
		 days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12],
		 tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

int agent_route_ext_read(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	const char *raw;
	const char *range, *cond;
	char rel[EXT_REL_MAX], etag[PROTO_ETAG_MAX], date[64], sizetxt[32];
	char crange[80];
	const char *hdrs[12];
	uint64_t off = 0, len, size;
	struct proto_attr pa;
	unsigned status = 200;
	struct stat st;
	size_t h = 0;
	int fd, rc;

	raw = ext_path_arg(r, rel, &rc);
	if (raw == NULL)
		return rc;
	fd = fsops_open_read(a, rel, &st);
	if (fd < 0)
		return ext_reply_errno(r, fd, raw);
	ext_attr_from_stat(&st, &pa);
	proto_attr_etag(&pa, etag);
	size = pa.size;
	/* Both validators fail the request rather than widen it: a client
	 * reading a piece of a file it has cached must learn that the file
	 * changed, not receive a different whole file. */
	cond = agent_req_header(r, "If-Match");
	if (cond == NULL)
		cond = agent_req_header(r, "If-Range");
	if (cond != NULL && !etag_matches(cond, etag)) {
		close(fd);
		return agent_reply_error(r, 412, PROTO_ERR_FS,
					 "ESTALE: the file changed: %s", raw);
	}
	len = size;
	range = agent_req_header(r, "Range");
	if (range != NULL) {
		rc = parse_range(range, size, &off, &len);
		if (rc == -EINVAL) {
			close(fd);
			return ext_reply_invalid(r,
						 "Range is not a single byte "
						 "range");
		}
		if (rc == -ERANGE) {
			status = 416;
			off = len = 0;
			snprintf(crange, sizeof(crange), "bytes */%" PRIu64,
				 size);
		} else {
			status = 206;
			snprintf(crange, sizeof(crange),
				 "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off,
				 off + len - 1, size);
		}
		hdrs[h++] = "Content-Range";
		hdrs[h++] = crange;
	}
	http_date(pa.mtime, date, sizeof(date));
	snprintf(sizetxt, sizeof(sizetxt), "%" PRIu64, size);
	hdrs[h++] = "ETag";
	hdrs[h++] = etag;
	hdrs[h++] = "Last-Modified";
	hdrs[h++] = date;
	hdrs[h++] = PROTO_EXT_HDR_SIZE;
	hdrs[h++] = sizetxt;
	hdrs[h++] = "Accept-Ranges";
	hdrs[h++] = "bytes";
	hdrs[h] = NULL;
	return agent_reply_fd(r, status, fd, (off_t)off, len,
			      "application/octet-stream", hdrs);
}

/* ---- GET contents ---------------------------------------------------------- */

/* Records queued on a streamed answer; a writer blocks past this many. */
#define CONTENTS_STREAM_DEPTH 8

struct contents_walk {
	struct buf *out; /* the whole answer (buffered), or NULL */
	struct agent_stream *s; /* the streamed answer, or NULL */
	struct agent_jobs *jobs;
	struct buf rec; /* one record, for the stream */
	size_t max_file;
	size_t left; /* bytes of contents still allowed */
	size_t files;
	int fd; /* the directory (streamed answers) */
};

static int contents_add(void *ud, const char *name, const struct stat *st,
			const void *data, size_t len)
{
	struct contents_walk *w = ud;
	struct proto_attr pa;
	int rc;

	if (w->files == PROTO_EXT_CONTENTS_FILES_MAX)
		return FSOPS_LIST_FULL;
	/* A file over what is left ends the answer: the client reads the
	 * rest on its own, in the order it meets them. */
	if (len > w->left)
		return FSOPS_LIST_FULL;
	ext_attr_from_stat(st, &pa);
	if (w->s == NULL) {
		if (proto_contents_add(w->out, name, &pa, data, len) != 0)
			return -ENOMEM;
	} else {
		buf_reset(&w->rec);
		if (proto_contents_add(&w->rec, name, &pa, data, len) != 0)
			return -ENOMEM;
		/* -EPIPE: the client is gone; the walk stops. */
		rc = agent_stream_write(w->s, w->rec.data, w->rec.len);
		if (rc < 0)
			return rc;
	}
	w->left -= len;
	w->files++;
	return 0;
}

/* A streamed answer's writer: each file goes out as soon as it is read,
 * so the client's reader takes it while the next one is read. */
static void *contents_main(void *arg)
{
	struct contents_walk *w = arg;
	int rc;

	rc = fsops_contents_fd(w->fd, w->max_file, contents_add, w);
	if (rc < 0 && rc != -EPIPE)
		log_debug("contents: the answer ends early: %s", strerror(-rc));
	agent_stream_finish(w->s);
	agent_jobs_exec_end(w->jobs);
	buf_cleanup(&w->rec);
	free(w);
	return NULL;
}

/* Stream the answer from a thread of its own; false when that cannot be
 * (the agent is stopping, no thread): the caller answers it whole. */
static bool contents_stream(struct agent_req *r, struct contents_walk *w)
{
	pthread_attr_t attr;
	pthread_t thread;
	int rc;

	/* Counted with exec's streams: the agent waits for them to end
	 * when it stops. */
	if (agent_jobs_exec_begin(w->jobs) < 0)
		return false;
	if (agent_reply_stream(r, 200, "application/octet-stream",
			       CONTENTS_STREAM_DEPTH, &w->s) < 0) {
		agent_jobs_exec_end(w->jobs);
		w->s = NULL;
		return false;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&thread, &attr, contents_main, w);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		/* Committed already: an empty answer, the client reads the
		 * files one by one. */
		agent_stream_finish(w->s);
		agent_jobs_exec_end(w->jobs);
		close(w->fd);
		buf_cleanup(&w->rec);
		free(w);
	}
	return true;
}

int agent_route_ext_contents(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	const char *raw;
	uint64_t max_file = PROTO_EXT_CONTENTS_FILE_DEFAULT;
	uint64_t max_bytes = PROTO_EXT_CONTENTS_BYTES_DEFAULT;
	struct buf out = BUF_INIT(0);
	struct contents_walk *w;
	char rel[EXT_REL_MAX];
	int fd, rc;

	raw = ext_path_arg(r, rel, &rc);
	if (raw == NULL)
		return rc;
	if (agent_req_query_dec(r, "maxFile", PROTO_EXT_CONTENTS_FILE_MAX,
				&max_file) < 0)
		return ext_reply_invalid(r, "maxFile must be at most 1048576");
	if (agent_req_query_dec(r, "maxBytes", PROTO_EXT_CONTENTS_BYTES_MAX,
				&max_bytes) < 0)
		return ext_reply_invalid(r,
					 "maxBytes must be at most 16777216");
	if (max_file > max_bytes)
		max_file = max_bytes;
	/* The directory's own errors are answers; past this, 200. */
	fd = fsops_contents_open(a, rel);
	if (fd < 0)
		return ext_reply_errno(r, fd, raw);
	w = xcalloc(1, sizeof(*w));
	w->jobs = a->jobs;
	w->max_file = (size_t)max_file;
	w->left = (size_t)max_bytes;
	w->fd = fd;
	/* One record, its line and its bytes, at a time. */
	buf_init(&w->rec, PROTO_EXT_CONTENTS_LINE_MAX + 1 + (size_t)max_file);
	if (contents_stream(r, w))
		return 0;
	/* Whole: contents plus one attribute line a file at most. */
	buf_init(&out,
		 (size_t)max_bytes + PROTO_EXT_CONTENTS_FILES_MAX *
					     (PROTO_EXT_CONTENTS_LINE_MAX + 1));
	w->out = &out;
	rc = fsops_contents_fd(fd, (size_t)max_file, contents_add, w);
	buf_cleanup(&w->rec);
	free(w);
	if (rc < 0) {
		buf_cleanup(&out);
		if (rc == -ENOMEM)
			return rc;
		return ext_reply_errno(r, rc, raw);
	}
	return agent_reply_buf(r, 200, "application/octet-stream", &out);
}

/* ---- PUT write ----------------------------------------------------------- */

/*
 * A time given with a write (so that a writer that sets times right after
 * its data - tar, cp -p, rsync - needs one round trip, not two):
 * "SEC.NSEC" (nine digits of nanoseconds, SEC may be negative), "now" or
 * "omit"; absent is omit.
 */
static bool parse_time_arg(const char *s, struct timespec *ts)
{
	char *end = NULL;
	long long sec;
	long ns;

	ts->tv_sec = 0;
	ts->tv_nsec = UTIME_OMIT;
	if (s == NULL || strcmp(s, "omit") == 0)
		return true;
	if (strcmp(s, "now") == 0) {
		ts->tv_nsec = UTIME_NOW;
		return true;
	}
	errno = 0;
	sec = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '.')
		return false;
	s = end + 1;
	if (strlen(s) != 9 || strspn(s, "0123456789") != 9)
		return false;
	ns = strtol(s, NULL, 10);
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = ns;
	return true;
}

/* "644": one to four octal digits, at most 07777. */
static bool parse_mode_arg(const char *s, mode_t *mode)
{
	unsigned v = 0;
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		if (i == 4 || s[i] < '0' || s[i] > '7')
			return false;
		v = v * 8 + (unsigned)(s[i] - '0');
	}
	if (i == 0)
		return false;
	*mode = (mode_t)v;
	return true;
}

/* "1" or "true", "0" or "false" (absent: false, *on untouched); false
 * for anything else. */
static bool parse_flag_arg(const char *s, bool *on)
{
	if (s == NULL || strcmp(s, "0") == 0 || strcmp(s, "false") == 0)
		return true;
	if (strcmp(s, "1") != 0 && strcmp(s, "true") != 0)
		return false;
	*on = true;
	return true;
}

int agent_route_ext_write(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	const char *raw;
	const char *offs = agent_req_query(r, "offset");
	const char *app = agent_req_query(r, "append");
	const char *mks = agent_req_query(r, "create");
	const char *excl = agent_req_query(r, "exclusive");
	struct fsops_mk mk = {0, false};
	char rel[EXT_REL_MAX];
	bool append = false, has_times;
	uint64_t off = 0, own;
	const char *body, *client;
	struct timespec times[2];
	struct stat st;
	size_t len;
	int rc;

	raw = ext_path_arg(r, rel, &rc);
	if (raw == NULL)
		return rc;
	if (!parse_flag_arg(app, &append))
		return ext_reply_invalid(r, "append must be 1 or 0");
	if (offs != NULL && append)
		return ext_reply_invalid(r, "offset and append=1 exclude each "
					    "other");
	if (offs == NULL && !append)
		return ext_reply_invalid(r,
					 "a write needs offset=N or append=1");
	if (agent_req_query_dec(r, "offset", INT64_MAX, &off) < 0)
		return ext_reply_invalid(r, "offset is not a byte offset");
	if (mks != NULL && !parse_mode_arg(mks, &mk.mode))
		return ext_reply_invalid(r, "create must be octal permission "
					    "bits, at most 7777");
	if (excl != NULL && mks == NULL)
		return ext_reply_invalid(r, "exclusive needs create");
	if (!parse_flag_arg(excl, &mk.exclusive))
		return ext_reply_invalid(r, "exclusive must be 1 or 0");
	body = agent_req_body(r, &len);
	/* http.c refuses a larger body before reading it; this only keeps
	 * the contract local. */
	if (a->cfg.ext_max_write > 0 && len > a->cfg.ext_max_write)
		return agent_reply_text(r, 413, AGENT_TEXT_TOO_LARGE);
	if (!parse_time_arg(agent_req_query(r, "atime"), &times[0]) ||
	    !parse_time_arg(agent_req_query(r, "mtime"), &times[1]))
		return ext_reply_invalid(r, "atime and mtime must be SEC.NSEC, "
					    "now or omit");
	has_times = agent_req_query(r, "atime") != NULL ||
		    agent_req_query(r, "mtime") != NULL;
	if (ext_change_client(r, &client) < 0)
		return ext_reply_invalid(r, EXT_TXT_BAD_CLIENT);
	own = agent_events_own_begin(
		a->events, client, rel,
		AGENT_EV_CREATE | AGENT_EV_WRITE | AGENT_EV_ATTR, NULL, 0);
	rc = fsops_write(a, rel, off, append, body, len,
			 mks != NULL ? &mk : NULL, has_times ? times : NULL,
			 &st);
	agent_events_own_end(a->events, own, rc == 0);
	if (rc < 0)
		return ext_reply_errno(r, rc, raw);
	return ext_reply_attr(r, &st, NULL);
}
