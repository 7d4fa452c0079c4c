/* SPDX-License-Identifier: MIT */
/*
 * ext: the file extension's answers about the tree (doc/protocol-ext.md):
 * GET stat, readlink, statfs, list (a page of a directory) and tree (a
 * subtree, breadth first); and what every extension route shares
 * (ext_i.h). GET jobs and GET events are jobs.c's and watch.c's.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/ext_i.h"
#include "agent/fsops.h"
#include "common/errname.h"
#include "common/xalloc.h"

/* The untyped rejection of a query without a path, as v1 words it. */
#define TXT_NO_PATH "Failed to deserialize query string: missing field `path`"

/* ---- replies ------------------------------------------------------------- */

int ext_reply_errno(struct agent_req *r, int err, const char *p)
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

int ext_reply_invalid(struct agent_req *r, const char *why)
{
	return agent_reply_error(r, 400, PROTO_ERR_REQUEST_INVALID,
				 "Request invalid: %s", why);
}

enum path_verdict ext_normalize(const char *raw, size_t n, char *rel)
{
	if (n == 0) {
		rel[0] = '\0';
		return PATH_OK;
	}
	return path_normalize(raw, n, true, rel, EXT_REL_MAX);
}

int ext_reply_refused(struct agent_req *r, const char *raw, enum path_verdict v)
{
	return agent_reply_error(r, 400, PROTO_ERR_PATH_REFUSED,
				 "Path '%s' refused: %s", raw,
				 path_verdict_reason(v));
}

const char *ext_path_arg(struct agent_req *r, char *rel, int *rc)
{
	size_t rawlen = 0;
	const char *raw = agent_req_query_n(r, "path", &rawlen);
	enum path_verdict v;

	if (raw == NULL) {
		*rc = agent_reply_text(r, 400, TXT_NO_PATH);
		return NULL;
	}
	v = ext_normalize(raw, rawlen, rel);
	if (v != PATH_OK) {
		*rc = ext_reply_refused(r, raw, v);
		return NULL;
	}
	return raw;
}

/* The protocol's file type for a mode's type bits. */
static enum proto_ftype ftype_of(mode_t mode)
{
	static const struct {
		mode_t ifmt;
		enum proto_ftype type;
	} types[] = {
		{S_IFREG, PROTO_FT_FILE},    {S_IFDIR, PROTO_FT_DIR},
		{S_IFLNK, PROTO_FT_SYMLINK}, {S_IFIFO, PROTO_FT_FIFO},
		{S_IFSOCK, PROTO_FT_SOCKET}, {S_IFCHR, PROTO_FT_CHAR},
		{S_IFBLK, PROTO_FT_BLOCK},
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].ifmt == (mode & S_IFMT))
			return types[i].type;
	return PROTO_FT_UNKNOWN;
}

void ext_attr_from_stat(const struct stat *st, struct proto_attr *pa)
{
	memset(pa, 0, sizeof(*pa));
	pa->type = ftype_of(st->st_mode);
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

int ext_reply_attr(struct agent_req *r, const struct stat *st,
		   const char *target)
{
	struct buf b = BUF_INIT(EXT_ATTR_MAX);
	struct proto_attr pa;
	int rc;

	ext_attr_from_stat(st, &pa);
	rc = proto_attr_encode(&pa, NULL, target, &b);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	return rc;
}

int ext_change_client(struct agent_req *r, const char **client)
{
	const char *c = agent_req_header(r, PROTO_HDR_CLIENT);

	if (c != NULL && !proto_client_id_valid(c))
		return -EINVAL;
	*client = c;
	return 0;
}

/* ---- GET stat, readlink, statfs ------------------------------------------ */

int agent_route_ext_stat(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	const char *raw;
	char rel[EXT_REL_MAX], *target = NULL;
	struct stat st;
	int rc;

	raw = ext_path_arg(r, rel, &rc);
	if (raw == NULL)
		return rc;
	rc = fsops_stat(a, rel, &st, &target);
	if (rc < 0)
		return ext_reply_errno(r, rc, raw);
	rc = ext_reply_attr(r, &st, target);
	free(target);
	return rc;
}

int agent_route_ext_readlink(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	const char *raw;
	struct buf b = BUF_INIT(EXT_ATTR_MAX);
	char rel[EXT_REL_MAX], *target = NULL;
	int rc;

	raw = ext_path_arg(r, rel, &rc);
	if (raw == NULL)
		return rc;
	rc = fsops_readlink(a, rel, &target);
	if (rc < 0)
		return ext_reply_errno(r, rc, raw);
	rc = proto_target_encode(target, &b);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &b);
	buf_cleanup(&b);
	free(target);
	return rc;
}

int agent_route_ext_statfs(struct agent_req *r)
{
	struct buf b = BUF_INIT(EXT_ATTR_MAX);
	struct proto_statfs ps;
	struct statfs s;
	int rc;

	rc = fsops_statfs(agent_req_agent(r), &s);
	if (rc < 0)
		return ext_reply_errno(r, rc, "/");
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

/* One entry of a listing, the n-th of buf b, with its attributes from st:
 * what proto_list_add returns. */
static int listing_add(struct buf *b, size_t n, const char *name,
		       const struct stat *st, const char *target)
{
	struct proto_attr pa;

	ext_attr_from_stat(st, &pa);
	return proto_list_add(b, n == 0, name, &pa, target);
}

struct page {
	struct buf b;
	size_t n, limit;
};

static int page_add(void *ud, const char *name, const struct stat *st,
		    const char *target)
{
	struct page *pg = ud;
	int rc;

	/* The byte budget keeps a page of long escaped names bounded however
	 * large the limit; the entry refused here opens the next page. */
	if (pg->n >= pg->limit || pg->b.len >= PROTO_EXT_LIST_PAGE_BYTES)
		return FSOPS_LIST_FULL;
	rc = listing_add(&pg->b, pg->n, name, st, target);
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
	const char *raw;
	const char *cur = agent_req_query(r, "cursor");
	struct page pg = {BUF_INIT(PROTO_EXT_LIST_MAX_BYTES), 0,
			  PROTO_EXT_LIST_DEFAULT};
	char rel[EXT_REL_MAX], next[32];
	uint64_t limit = PROTO_EXT_LIST_DEFAULT, cookie = 0;
	int64_t resume = 0;
	bool more = false;
	int rc;

	raw = ext_path_arg(r, rel, &rc);
	if (raw == NULL)
		return rc;
	if (agent_req_query_dec(r, "limit", PROTO_EXT_LIST_MAX, &limit) < 0 ||
	    limit < 1)
		return ext_reply_invalid(r, "limit must be from 1 to 8192");
	pg.limit = (size_t)limit;
	/* A cursor is a cookie this agent sent: a non-negative off_t. */
	if (agent_req_query_dec(r, "cursor", INT64_MAX, &cookie) < 0)
		return ext_reply_invalid(r,
					 "cursor is not one this agent sent");
	rc = proto_list_begin(&pg.b);
	if (rc < 0)
		goto out;
	rc = fsops_list(a, rel, (int64_t)cookie, page_add, &pg, &more, &resume);
	if (rc == -EINVAL && cur != NULL) {
		rc = ext_reply_invalid(r, "cursor is not one this agent sent");
		goto out;
	}
	if (rc == -ENOMEM || rc == -EFBIG)
		goto out;
	if (rc < 0) {
		rc = ext_reply_errno(r, rc, raw);
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
	int rc;

	if (w->n >= w->budget) {
		w->over = true;
		return FSOPS_LIST_FULL;
	}
	rc = listing_add(&w->dirents, w->n, name, st, target);
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

/* Directories still to list, relative to the walk's top, in order. */
struct tree_queue {
	char **v;
	size_t head, len, cap;
};

static void tree_push(struct tree_queue *q, char *sub)
{
	if (q->len == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 16;
		q->v = xrealloc(q->v, q->cap * sizeof(*q->v));
	}
	q->v[q->len++] = sub;
}

/* What listing one directory of the walk came to. */
enum tree_step {
	TREE_ADDED, /* its listing is in the answer */
	TREE_SKIPPED, /* vanished or unreadable below: left out */
	TREE_END, /* the answer ends before it */
	TREE_FAILED, /* the directory asked for: its error is the answer */
};

/*
 * List sub (relative to rel, the directory asked for) into out, within
 * the walk's budget; with TREE_FAILED, *err is the listing's error. A
 * negative errno when the answer cannot be built.
 */
static int tree_dir(const struct agent *a, const char *rel, const char *sub,
		    bool first, struct tree_walk *w, struct buf *out, int *err)
{
	char *full;
	bool more = false;
	int64_t next = 0;
	int rc;

	if (w->budget == 0)
		return TREE_END; /* spent: what is left is the client's */
	full = *rel == '\0'   ? xstrdup(sub)
	       : *sub == '\0' ? xstrdup(rel)
			      : xasprintf("%s/%s", rel, sub);
	buf_reset(&w->dirents);
	w->n = 0;
	w->over = false;
	tree_subdirs_free(w);
	rc = fsops_list(a, full, 0, tree_add, w, &more, &next);
	free(full);
	if (rc == -EOVERFLOW && !first)
		return TREE_END; /* not even its first entry fitted */
	if (rc < 0 && first) {
		*err = rc;
		return TREE_FAILED;
	}
	if (rc < 0)
		return TREE_SKIPPED;
	/* Whole listings only: the client lists this one (and what is
	 * left) itself. */
	if (w->over || more)
		return TREE_END;
	/* The answer's own bound, with room kept for its end. */
	if (out->len + w->dirents.len + strlen(sub) + 64 >
	    PROTO_EXT_TREE_MAX_BYTES)
		return TREE_END;
	rc = proto_tree_dir(out, first, sub,
			    w->dirents.data ? w->dirents.data : "",
			    w->dirents.len);
	if (rc == -EFBIG)
		return TREE_END;
	if (rc < 0)
		return rc;
	w->budget -= w->n;
	return TREE_ADDED;
}

int agent_route_ext_tree(struct agent_req *r)
{
	const struct agent *a = agent_req_agent(r);
	const char *raw;
	struct tree_walk w;
	struct buf out = BUF_INIT(PROTO_EXT_TREE_MAX_BYTES + 64);
	char rel[EXT_REL_MAX];
	struct tree_queue q = {NULL, 0, 0, 0};
	uint64_t limit = PROTO_EXT_TREE_DEFAULT;
	bool first = true, complete = true;
	size_t i;
	int rc, err = 0;

	raw = ext_path_arg(r, rel, &rc);
	if (raw == NULL)
		return rc;
	if (agent_req_query_dec(r, "maxEntries", PROTO_EXT_TREE_MAX, &limit) <
		    0 ||
	    limit < 1)
		return ext_reply_invalid(r,
					 "maxEntries must be from 1 to 65536");
	memset(&w, 0, sizeof(w));
	buf_init(&w.dirents, PROTO_EXT_LIST_MAX_BYTES);
	w.budget = (size_t)limit;
	tree_push(&q, xstrdup(""));
	rc = proto_tree_begin(&out);
	while (rc == 0 && q.head < q.len) {
		char *sub = q.v[q.head++];
		int step = tree_dir(a, rel, sub, first, &w, &out, &err);

		if (step == TREE_ADDED) {
			first = false;
			for (i = 0; i < w.nsub; i++)
				tree_push(&q,
					  *sub == '\0'
						  ? xstrdup(w.subdirs[i])
						  : xasprintf("%s/%s", sub,
							      w.subdirs[i]));
		}
		free(sub);
		if (step == TREE_FAILED) {
			rc = err == -ENOMEM || err == -EFBIG
				     ? err
				     : ext_reply_errno(r, err, raw);
			goto done;
		}
		if (step < 0)
			rc = step;
		else if (step != TREE_ADDED)
			complete = false;
		if (step == TREE_END)
			break;
	}
	if (q.head < q.len)
		complete = false;
	if (rc == 0)
		rc = proto_tree_end(&out, complete);
	if (rc == 0)
		rc = agent_reply_json(r, 200, &out);
done:
	for (i = q.head; i < q.len; i++)
		free(q.v[i]);
	free(q.v);
	tree_subdirs_free(&w);
	free(w.subdirs);
	buf_cleanup(&w.dirents);
	buf_cleanup(&out);
	return rc;
}
