/* SPDX-License-Identifier: MIT */
/*
 * ext: the sandboxfs file extension's routes (/sandboxfs/v1/<op>,
 * doc/protocol-ext.md). One handler per operation: it decodes the query or
 * body, normalises the path by the v1 rules, calls one fsops primitive and
 * encodes the answer. Authentication, activation, body limits and thread
 * credentials are http.c's; the filesystem work and its confinement are
 * fsops.c's. GET jobs, the extension's job listing, is dispatched to
 * jobs.c.
 *
 * Errors: ENOENT is the typed 404 PATH_NOT_FOUND that v1 sends (clients
 * keep the route and never replay on it); any other errno is 409
 * "FS_ERROR: <ENAME>: <text>: <path>" with the errno's name, never its
 * number; a path that leaves the root is FS_ERROR ELOOP.
 *
 * The routes that change something tell the event watcher what they are
 * about to change when the request names its client (X-Sandboxfs-Client),
 * so that the events it causes carry "by" (watch.h).
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

#include "agent/fsops.h"
#include "agent/jobs.h"
#include "agent/routes.h"
#include "agent/watch.h"
#include "common/errname.h"
#include "common/log.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "common/xalloc.h"

/* A normalised path and its terminator. */
#define REL_MAX (PATH_MAX_BYTES + 1)
/* Bound of a single attribute object or readlink answer: a name and a
 * link target, every byte escaped, and the numbers. */
#define ATTR_MAX 65536

/* The untyped rejection of a query without a path, as v1 words it. */
#define TXT_NO_PATH "Failed to deserialize query string: missing field `path`"

/* ---- replies ------------------------------------------------------------- */

static int reply_errno(struct agent_req *r, int err, const char *p)
{
	const char *name;
	char text[128];

	if (err == -ENOENT)
		return agent_reply_error(r, 404, PROTO_ERR_PATH_NOT_FOUND,
					 "No such file in the sandbox: %s", p);
	if (err == -FSOPS_ESCAPED)
		return agent_reply_error(
			r, 409, PROTO_ERR_FS,
			"ELOOP: path leaves the session root: %s", p);
	name = errname_from_errno(-err);
	/* Outside the table the name is EIO, but the text still says what
	 * the kernel said. */
	return agent_reply_error(r, 409, PROTO_ERR_FS, "%s: %s: %s",
				 name != NULL ? name : "EIO",
				 strerror_r(-err, text, sizeof(text)), p);
}

static int reply_invalid(struct agent_req *r, const char *why)
{
	return agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
				 "Request invalid: %s", why);
}

/* The root is "" or "/"; otherwise the v1 rules, ".." refused. n counts
 * a NUL a query value may hold (%00), which is then refused. */
static enum path_verdict normalize(const char *raw, size_t n, char *rel)
{
	if (n == 0) {
		rel[0] = '\0';
		return PATH_OK;
	}
	return path_normalize(raw, n, true, rel, REL_MAX);
}

static int reply_refused(struct agent_req *r, const char *raw,
			 enum path_verdict v)
{
	return agent_reply_error(r, 400, PROTO_ERR_PATH_REFUSED,
				 "Path '%s' refused: %s", raw,
				 path_verdict_reason(v));
}

static void attr_from_stat(const struct stat *st, struct proto_attr *pa)
{
	memset(pa, 0, sizeof(*pa));
	switch (st->st_mode & S_IFMT) {
	case S_IFREG:
		pa->type = PROTO_FT_FILE;
		break;
	case S_IFDIR:
		pa->type = PROTO_FT_DIR;
		break;
	case S_IFLNK:
		pa->type = PROTO_FT_SYMLINK;
		break;
	case S_IFIFO:
		pa->type = PROTO_FT_FIFO;
		break;
	case S_IFSOCK:
		pa->type = PROTO_FT_SOCKET;
		break;
	case S_IFCHR:
		pa->type = PROTO_FT_CHAR;
		break;
	case S_IFBLK:
		pa->type = PROTO_FT_BLOCK;
		break;
	default:
		pa->type = PROTO_FT_UNKNOWN;
		break;
	}
	pa->perm = st->st_mode & 07777;
	pa->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
	pa->nlink = st->st_nlink;
	pa->uid = st->st_uid;
	pa->gid = st->st_gid;
	pa->ino = st->st_ino;
	pa->blocks = st->st_blocks > 0 ? (uint64_t)st->st_blocks : 0;
	pa->rdev = st->st_rdev;
	pa->atime = st->st_atim.tv_sec;
	pa->atime_ns = (uint32_t)st->st_atim.tv_nsec;
	pa->mtime = st->st_mtim.tv_sec;
	pa->mtime_ns = (uint32_t)st->st_mtim.tv_nsec;
	pa->ctime = st->st_ctim.tv_sec;
	pa->ctime_ns = (uint32_t)st->st_ctim.tv_nsec;
}

static int reply_attr(struct agent_req *r, const struct stat *st,
		      const char *target)
{
	struct buf b = BUF_INIT(ATTR_MAX);
	struct proto_attr pa;
	int rc;

	attr_from_stat(st, &pa);
	rc = proto_attr_encode(&pa, NULL, target, &b);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	return rc;
}

/* A decimal query value: digits only, at most max. */
static bool parse_dec(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s == NULL || *s == '\0' || strlen(s) > 20)
		return false;
	for (; *s; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return false;
		d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* The client a change is made for (X-Sandboxfs-Client): 0 with *client
 * (NULL when the request names none), or -EINVAL for a malformed name. */
static int change_client(struct agent_req *r, const char **client)
{
	const char *c = agent_req_header(r, PROTO_HDR_CLIENT);

	if (c != NULL && !proto_client_id_valid(c))
		return -EINVAL;
	*client = c;
	return 0;
}

#define TXT_BAD_CLIENT PROTO_HDR_CLIENT " must be 1 to 64 of A-Z a-z 0-9 -"

/* ---- GET stat, readlink, statfs ------------------------------------------ */

int agent_route_ext_stat(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	char rel[REL_MAX], *target = NULL;
	enum path_verdict v;
	struct stat st;
	int rc;

	if (raw == NULL)
		return agent_reply_text(r, 400, TXT_NO_PATH);
	v = normalize(raw, rawlen, rel);
	if (v != PATH_OK)
		return reply_refused(r, raw, v);
	rc = fsops_stat(a, rel, &st, &target);
	if (rc < 0)
		return reply_errno(r, rc, raw);
	rc = reply_attr(r, &st, target);
	free(target);
	return rc;
}

int agent_route_ext_readlink(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	struct buf b = BUF_INIT(ATTR_MAX);
	char rel[REL_MAX], *target = NULL;
	enum path_verdict v;
	int rc;

	if (raw == NULL)
		return agent_reply_text(r, 400, TXT_NO_PATH);
	v = normalize(raw, rawlen, rel);
	if (v != PATH_OK)
		return reply_refused(r, raw, v);
	rc = fsops_readlink(a, rel, &target);
	if (rc < 0)
		return reply_errno(r, rc, raw);
	rc = proto_target_encode(target, &b);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	free(target);
	return rc;
}

int agent_route_ext_statfs(struct agent_req *r)
{
	struct buf b = BUF_INIT(ATTR_MAX);
	struct proto_statfs ps;
	struct statfs s;
	int rc;

	rc = fsops_statfs(agent_req_agent(r), &s);
	if (rc < 0)
		return reply_errno(r, rc, "/");
	ps.bsize = (uint64_t)s.f_bsize;
	ps.frsize = (uint64_t)s.f_frsize;
	ps.blocks = s.f_blocks;
	ps.bfree = s.f_bfree;
	ps.bavail = s.f_bavail;
	ps.files = s.f_files;
	ps.ffree = s.f_ffree;
	ps.namemax = (uint64_t)s.f_namelen;
	rc = proto_statfs_encode(&ps, &b);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	return rc;
}

/* ---- GET list ------------------------------------------------------------ */

struct page {
	struct buf b;
	size_t n, limit;
};

static int page_add(void *ud, const char *name, const struct stat *st,
		    const char *target)
{
	struct page *pg = ud;
	struct proto_attr pa;
	int rc;

	/* The byte budget keeps a page of long escaped names bounded however
	 * large the limit; the entry refused here opens the next page. */
	if (pg->n >= pg->limit || pg->b.len >= PROTO_EXT_LIST_PAGE_BYTES)
		return FSOPS_LIST_FULL;
	attr_from_stat(st, &pa);
	rc = proto_list_add(&pg->b, pg->n == 0, name, &pa, target);
	if (rc == -EFBIG && pg->n > 0)
		return FSOPS_LIST_FULL;
	if (rc < 0)
		return rc;
	pg->n++;
	return 0;
}

int agent_route_ext_list(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	const char *lim = agent_req_query(r, "limit");
	const char *cur = agent_req_query(r, "cursor");
	struct page pg = {BUF_INIT(PROTO_EXT_LIST_MAX_BYTES), 0,
			  PROTO_EXT_LIST_DEFAULT};
	char rel[REL_MAX], next[32];
	uint64_t limit, cookie = 0;
	enum path_verdict v;
	int64_t resume = 0;
	bool more = false;
	int rc;

	if (raw == NULL)
		return agent_reply_text(r, 400, TXT_NO_PATH);
	v = normalize(raw, rawlen, rel);
	if (v != PATH_OK)
		return reply_refused(r, raw, v);
	if (lim != NULL) {
		if (!parse_dec(lim, UINT64_MAX, &limit) || limit < 1 ||
		    limit > PROTO_EXT_LIST_MAX)
			return reply_invalid(r, "limit must be from 1 to 8192");
		pg.limit = (size_t)limit;
	}
	/* A cursor is a cookie this agent sent: a non-negative off_t. */
	if (cur != NULL && !parse_dec(cur, INT64_MAX, &cookie))
		return reply_invalid(r, "cursor is not one this agent sent");
	rc = proto_list_begin(&pg.b);
	if (rc < 0)
		goto out;
	rc = fsops_list(a, rel, (int64_t)cookie, page_add, &pg, &more, &resume);
	if (rc == -EINVAL && cur != NULL) {
		rc = reply_invalid(r, "cursor is not one this agent sent");
		goto out;
	}
	if (rc == -ENOMEM || rc == -EFBIG)
		goto out;
	if (rc < 0) {
		rc = reply_errno(r, rc, raw);
		goto out;
	}
	snprintf(next, sizeof(next), "%" PRId64, resume);
	rc = proto_list_end(&pg.b, more ? next : NULL);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &pg.b);
out:
	buf_cleanup(&pg.b);
	return rc;
}

/* ---- GET tree ------------------------------------------------------------ */

/*
 * A subtree breadth first, each directory's listing whole, until the entry
 * budget: one answer replaces a listing per directory for a client that
 * walks the tree (find, ls -R, rsync, grep -r, rm -r). Only real
 * directories are descended (lstat), so a symlink never leads the walk
 * anywhere a listing of it would not.
 */
struct tree_walk {
	struct buf dirents; /* the entries of the directory being listed */
	size_t n; /* how many */
	size_t budget; /* entries the answer may still take */
	bool over; /* this directory does not fit */
	char **subdirs; /* its subdirectories, by name */
	size_t nsub, capsub;
};

static int tree_add(void *ud, const char *name, const struct stat *st,
		    const char *target)
{
	struct tree_walk *w = ud;
	struct proto_attr pa;
	int rc;

	if (w->n >= w->budget) {
		w->over = true;
		return FSOPS_LIST_FULL;
	}
	attr_from_stat(st, &pa);
	rc = proto_list_add(&w->dirents, w->n == 0, name, &pa, target);
	if (rc == -EFBIG) {
		w->over = true;
		return FSOPS_LIST_FULL;
	}
	if (rc < 0)
		return rc;
	w->n++;
	if (S_ISDIR(st->st_mode)) {
		if (w->nsub == w->capsub) {
			w->capsub = w->capsub ? w->capsub * 2 : 16;
			w->subdirs = xrealloc(w->subdirs,
					      w->capsub * sizeof(*w->subdirs));
		}
		w->subdirs[w->nsub++] = xstrdup(name);
	}
	return 0;
}

static void tree_subdirs_free(struct tree_walk *w)
{
	size_t i;

	for (i = 0; i < w->nsub; i++)
		free(w->subdirs[i]);
	w->nsub = 0;
}

int agent_route_ext_tree(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	const char *lim = agent_req_query(r, "maxEntries");
	struct tree_walk w;
	struct buf out = BUF_INIT(PROTO_EXT_TREE_MAX_BYTES + 64);
	char rel[REL_MAX];
	char **queue = NULL; /* directories to list, relative to rel */
	size_t qhead = 0, qlen = 0, qcap = 0, i;
	uint64_t limit = PROTO_EXT_TREE_DEFAULT;
	enum path_verdict v;
	bool first = true, complete = true;
	int rc;

	if (raw == NULL)
		return agent_reply_text(r, 400, TXT_NO_PATH);
	v = normalize(raw, rawlen, rel);
	if (v != PATH_OK)
		return reply_refused(r, raw, v);
	if (lim != NULL && (!parse_dec(lim, UINT64_MAX, &limit) || limit < 1 ||
			    limit > PROTO_EXT_TREE_MAX))
		return reply_invalid(r, "maxEntries must be from 1 to 65536");
	memset(&w, 0, sizeof(w));
	buf_init(&w.dirents, PROTO_EXT_LIST_MAX_BYTES);
	w.budget = (size_t)limit;
	queue = xcalloc(1, sizeof(*queue));
	queue[qlen++] = xstrdup("");
	qcap = 1;
	rc = proto_tree_begin(&out);
	while (rc == 0 && qhead < qlen) {
		char *sub = queue[qhead++];
		char *full = *rel == '\0'   ? xstrdup(sub)
			     : *sub == '\0' ? xstrdup(rel)
					    : xasprintf("%s/%s", rel, sub);
		bool more = false;
		int64_t next = 0;
		int lrc;

		if (w.budget == 0) {
			/* Spent: what is left is the client's to list. */
			complete = false;
			free(full);
			free(sub);
			break;
		}
		buf_reset(&w.dirents);
		w.n = 0;
		w.over = false;
		tree_subdirs_free(&w);
		lrc = fsops_list(a, full, 0, tree_add, &w, &more, &next);
		free(full);
		if (lrc == -EOVERFLOW && !first) {
			/* Not even its first entry fitted. */
			complete = false;
			free(sub);
			break;
		}
		if (lrc < 0 && first) {
			/* The directory asked for: its error is the answer. */
			free(sub);
			rc = lrc == -ENOMEM || lrc == -EFBIG
				     ? lrc
				     : reply_errno(r, lrc, raw);
			goto done;
		}
		if (lrc < 0) {
			/* Vanished or unreadable below: leave it out. */
			complete = false;
			free(sub);
			continue;
		}
		if (w.over || more) {
			/* Whole listings only: the client lists this one
			 * (and what is left) itself. */
			complete = false;
			free(sub);
			break;
		}
		/* The answer's own bound, with room kept for its end. */
		if (out.len + w.dirents.len + strlen(sub) + 64 >
		    PROTO_EXT_TREE_MAX_BYTES) {
			complete = false;
			free(sub);
			break;
		}
		rc = proto_tree_dir(&out, first, sub,
				    w.dirents.data ? w.dirents.data : "",
				    w.dirents.len);
		if (rc == -EFBIG) {
			complete = false;
			rc = 0;
			free(sub);
			break;
		}
		first = false;
		w.budget -= w.n;
		for (i = 0; rc == 0 && i < w.nsub; i++) {
			if (qlen == qcap) {
				qcap *= 2;
				queue = xrealloc(queue, qcap * sizeof(*queue));
			}
			queue[qlen++] = *sub == '\0' ? xstrdup(w.subdirs[i])
						     : xasprintf("%s/%s", sub,
								 w.subdirs[i]);
		}
		free(sub);
	}
	if (qhead < qlen)
		complete = false;
	if (rc == 0)
		rc = proto_tree_end(&out, complete);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &out);
done:
	for (i = qhead; i < qlen; i++)
		free(queue[i]);
	free(queue);
	tree_subdirs_free(&w);
	free(w.subdirs);
	buf_cleanup(&w.dirents);
	buf_cleanup(&out);
	return rc;
}

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
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	const char *range, *cond;
	char rel[REL_MAX], etag[PROTO_ETAG_MAX], date[64], sizetxt[32];
	char crange[80];
	const char *hdrs[12];
	uint64_t off = 0, len, size;
	struct proto_attr pa;
	enum path_verdict v;
	unsigned status = 200;
	struct stat st;
	size_t h = 0;
	int fd, rc;

	if (raw == NULL)
		return agent_reply_text(r, 400, TXT_NO_PATH);
	v = normalize(raw, rawlen, rel);
	if (v != PATH_OK)
		return reply_refused(r, raw, v);
	fd = fsops_open_read(a, rel, &st);
	if (fd < 0)
		return reply_errno(r, fd, raw);
	attr_from_stat(&st, &pa);
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
			return reply_invalid(r, "Range is not a single byte "
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
	attr_from_stat(st, &pa);
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
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	const char *mf = agent_req_query(r, "maxFile");
	const char *mb = agent_req_query(r, "maxBytes");
	uint64_t max_file = PROTO_EXT_CONTENTS_FILE_DEFAULT;
	uint64_t max_bytes = PROTO_EXT_CONTENTS_BYTES_DEFAULT;
	struct buf out = BUF_INIT(0);
	struct contents_walk *w;
	char rel[REL_MAX];
	enum path_verdict v;
	int fd, rc;

	if (raw == NULL)
		return agent_reply_text(r, 400, TXT_NO_PATH);
	v = normalize(raw, rawlen, rel);
	if (v != PATH_OK)
		return reply_refused(r, raw, v);
	if (mf != NULL && (!parse_dec(mf, UINT64_MAX, &max_file) ||
			   max_file > PROTO_EXT_CONTENTS_FILE_MAX))
		return reply_invalid(r, "maxFile must be at most 1048576");
	if (mb != NULL && (!parse_dec(mb, UINT64_MAX, &max_bytes) ||
			   max_bytes > PROTO_EXT_CONTENTS_BYTES_MAX))
		return reply_invalid(r, "maxBytes must be at most 16777216");
	if (max_file > max_bytes)
		max_file = max_bytes;
	/* The directory's own errors are answers; past this, 200. */
	fd = fsops_contents_open(a, rel);
	if (fd < 0)
		return reply_errno(r, fd, raw);
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
		return reply_errno(r, rc, raw);
	}
	return agent_reply_buf(r, 200, "application/octet-stream", &out);
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

int agent_route_ext_write(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	const char *offs = agent_req_query(r, "offset");
	const char *app = agent_req_query(r, "append");
	const char *mks = agent_req_query(r, "create");
	const char *excl = agent_req_query(r, "exclusive");
	struct fsops_mk mk = {0, false};
	char rel[REL_MAX];
	enum path_verdict v;
	bool append = false, has_times;
	uint64_t off = 0, own;
	const char *body, *client;
	struct timespec times[2];
	struct stat st;
	size_t len;
	int rc;

	if (raw == NULL)
		return agent_reply_text(r, 400, TXT_NO_PATH);
	v = normalize(raw, rawlen, rel);
	if (v != PATH_OK)
		return reply_refused(r, raw, v);
	if (app != NULL) {
		if (strcmp(app, "1") == 0 || strcmp(app, "true") == 0)
			append = true;
		else if (strcmp(app, "0") != 0 && strcmp(app, "false") != 0)
			return reply_invalid(r, "append must be 1 or 0");
	}
	if (offs != NULL && append)
		return reply_invalid(r, "offset and append=1 exclude each "
					"other");
	if (offs == NULL && !append)
		return reply_invalid(r, "a write needs offset=N or append=1");
	if (offs != NULL && !parse_dec(offs, INT64_MAX, &off))
		return reply_invalid(r, "offset is not a byte offset");
	if (mks != NULL && !parse_mode_arg(mks, &mk.mode))
		return reply_invalid(r, "create must be octal permission "
					"bits, at most 7777");
	if (excl != NULL) {
		if (mks == NULL)
			return reply_invalid(r, "exclusive needs create");
		if (strcmp(excl, "1") == 0 || strcmp(excl, "true") == 0)
			mk.exclusive = true;
		else if (strcmp(excl, "0") != 0 && strcmp(excl, "false") != 0)
			return reply_invalid(r, "exclusive must be 1 or 0");
	}
	body = agent_req_body(r, &len);
	/* http.c refuses a larger body before reading it; this only keeps
	 * the contract local. */
	if (a->cfg.ext_max_write > 0 && len > a->cfg.ext_max_write)
		return agent_reply_text(r, 413, AGENT_TEXT_TOO_LARGE);
	if (!parse_time_arg(agent_req_query(r, "atime"), &times[0]) ||
	    !parse_time_arg(agent_req_query(r, "mtime"), &times[1]))
		return reply_invalid(r, "atime and mtime must be SEC.NSEC, "
					"now or omit");
	has_times = agent_req_query(r, "atime") != NULL ||
		    agent_req_query(r, "mtime") != NULL;
	if (change_client(r, &client) < 0)
		return reply_invalid(r, TXT_BAD_CLIENT);
	own = agent_events_own_begin(
		a->events, client, rel,
		AGENT_EV_CREATE | AGENT_EV_WRITE | AGENT_EV_ATTR, NULL, 0);
	rc = fsops_write(a, rel, off, append, body, len,
			 mks != NULL ? &mk : NULL, has_times ? times : NULL,
			 &st);
	agent_events_own_end(a->events, own, rc == 0);
	if (rc < 0)
		return reply_errno(r, rc, raw);
	return reply_attr(r, &st, NULL);
}

/* ---- POST metadata operations -------------------------------------------- */

static void to_timespec(const struct proto_time *t, struct timespec *ts)
{
	ts->tv_sec = 0;
	switch (t->how) {
	case PROTO_TIME_OMIT:
		ts->tv_nsec = UTIME_OMIT;
		break;
	case PROTO_TIME_NOW:
		ts->tv_nsec = UTIME_NOW;
		break;
	case PROTO_TIME_SET:
		ts->tv_sec = (time_t)t->sec;
		ts->tv_nsec = (long)t->nsec;
		break;
	}
}

/* The attributes after the operation, with the link text when the entry
 * it leaves is a symlink (a new one, a hard link to one, or one whose own
 * times were set). rel is the entry the operation ends on. */
static int reply_meta_attr(struct agent_req *r, const char *op,
			   const struct proto_ext_req *q, const char *rel,
			   const struct stat *st)
{
	char *target = NULL;
	int rc;

	if (!S_ISLNK(st->st_mode))
		return reply_attr(r, st, NULL);
	if (strcmp(op, "symlink") == 0)
		return reply_attr(r, st, q->target);
	/* Replaced since the operation: the answer just goes without it. */
	if (fsops_readlink(agent_req_agent(r), rel, &target) < 0)
		target = NULL;
	rc = reply_attr(r, st, target);
	free(target);
	return rc;
}

/* What a metadata operation will change, for the event watcher. */
static uint64_t own_begin(const struct agent *a, const char *op,
			  const struct proto_ext_req *q, const char *client,
			  const char *rel, const char *rel2)
{
	unsigned k = 0, k2 = 0;

	if (client == NULL)
		return 0;
	if (strcmp(op, "create") == 0)
		k = AGENT_EV_CREATE | AGENT_EV_WRITE | AGENT_EV_ATTR;
	else if (strcmp(op, "mkdir") == 0 || strcmp(op, "symlink") == 0)
		/* mkdir sets the exact mode after the fact */
		k = AGENT_EV_CREATE | AGENT_EV_ATTR;
	else if (strcmp(op, "unlink") == 0 || strcmp(op, "rmdir") == 0)
		k = AGENT_EV_REMOVE;
	else if (strcmp(op, "rename") == 0)
		/* An exchange is reported as two renames, one each way. */
		k = AGENT_EV_RENAME, k2 = q->exchange ? AGENT_EV_RENAME : 0;
	else if (strcmp(op, "link") == 0)
		/* The new name, and the link count of the file. */
		k = AGENT_EV_ATTR, k2 = AGENT_EV_CREATE;
	else if (strcmp(op, "chmod") == 0 || strcmp(op, "utimens") == 0)
		k = AGENT_EV_ATTR;
	else if (strcmp(op, "truncate") == 0)
		k = AGENT_EV_WRITE | AGENT_EV_ATTR;
	return agent_events_own_begin(a->events, client, rel, k,
				      q->to != NULL ? rel2 : NULL, k2);
}

int agent_route_ext_meta(struct agent_req *r)
{
	const char *op = strrchr(agent_req_path(r), '/') + 1;
	const struct agent *a = agent_req_agent(r);
	char rel[REL_MAX], rel2[REL_MAX], both[2 * REL_MAX + 8];
	struct proto_ext_req q;
	const char *body, *shown, *client;
	uint64_t own = 0;
	struct timespec ts[2];
	enum path_verdict v;
	bool attr = true;
	unsigned flags = 0;
	struct stat st;
	size_t len;
	int rc;

	if (!agent_req_is_json(r))
		return agent_reply_text(r, 415, AGENT_TEXT_JSON_TYPE);
	body = agent_req_body(r, &len);
	rc = proto_ext_req_decode(op, body, len, &q);
	if (rc < 0)
		return agent_reply_bad_body(r, rc);
	shown = q.path;
	v = normalize(q.path, strlen(q.path), rel);
	if (v != PATH_OK) {
		rc = reply_refused(r, q.path, v);
		goto out;
	}
	if (q.to != NULL) {
		v = normalize(q.to, strlen(q.to), rel2);
		if (v != PATH_OK) {
			rc = reply_refused(r, q.to, v);
			goto out;
		}
		snprintf(both, sizeof(both), "%s -> %s", q.path, q.to);
		shown = both;
	}
	if (change_client(r, &client) < 0) {
		rc = reply_invalid(r, TXT_BAD_CLIENT);
		goto out;
	}
	own = own_begin(a, op, &q, client, rel, rel2);

	if (strcmp(op, "create") == 0) {
		rc = fsops_create(a, rel, q.mode, q.exclusive, q.truncate, &st);
	} else if (strcmp(op, "mkdir") == 0) {
		rc = fsops_mkdir(a, rel, q.mode, &st);
	} else if (strcmp(op, "unlink") == 0) {
		rc = fsops_unlink(a, rel);
		attr = false;
	} else if (strcmp(op, "rmdir") == 0) {
		rc = fsops_rmdir(a, rel);
		attr = false;
	} else if (strcmp(op, "fsync") == 0) {
		rc = fsops_fsync(a, rel);
		attr = false;
	} else if (strcmp(op, "rename") == 0) {
		if (q.noreplace && q.exchange) {
			rc = reply_invalid(r, "noreplace and exchange exclude "
					      "each other");
			goto out;
		}
		flags = q.noreplace  ? RENAME_NOREPLACE
			: q.exchange ? RENAME_EXCHANGE
				     : 0;
		rc = fsops_rename(a, rel, rel2, flags);
		attr = false;
	} else if (strcmp(op, "link") == 0) {
		rc = fsops_link(a, rel, rel2, &st);
	} else if (strcmp(op, "symlink") == 0) {
		if (*q.target == '\0') {
			rc = reply_invalid(r, "a symlink target cannot be "
					      "empty");
			goto out;
		}
		rc = fsops_symlink(a, rel, q.target, &st);
	} else if (strcmp(op, "chmod") == 0) {
		rc = fsops_chmod(a, rel, q.mode, &st);
	} else if (strcmp(op, "truncate") == 0) {
		rc = fsops_truncate(a, rel, q.size, &st);
	} else {
		/* utimens: the only operation left in the route table */
		to_timespec(&q.atime, &ts[0]);
		to_timespec(&q.mtime, &ts[1]);
		rc = fsops_utimens(a, rel, ts, q.nofollow, &st);
	}
	agent_events_own_end(a->events, own, rc == 0);
	own = 0;

	if (rc < 0)
		rc = reply_errno(r, rc, shown);
	else if (!attr)
		rc = agent_reply_empty(r, 204);
	else
		rc = reply_meta_attr(r, op, &q, q.to != NULL ? rel2 : rel, &st);
out:
	/* Refused before it ran: nothing of it is to be matched. */
	agent_events_own_end(a->events, own, false);
	proto_ext_req_cleanup(&q);
	return rc;
}
