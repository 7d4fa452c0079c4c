/* SPDX-License-Identifier: MIT */
/*
 * sandbox: the mount's state and its sandboxes. Every operation on a
 * sandbox enters it here: one provider record read decides the transport
 * (doc/transport-rules.md 1), a stopped sandbox is resumed (rules 7,
 * SEMANTICS.md), and the agent's health of the current boot says whether
 * the file extension is there. Errors are turned into errnos and logged
 * once here. So is the operation deadline's fail-fast (rules 9).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "client/agent_client.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "common/strv.h"
#include "fs/cache.h"
#include "fs/dirsnap.h"
#include "fs/fs_i.h"
#include "fs/inodes.h"
#include "fs/prefetch.h"
#include "fs/readahead.h"
#include "fs/wnodes.h"

/* ---- the mount ---------------------------------------------------------- */

int sbfs_new(const struct sbfs_opts *o, struct provider *prov,
	     struct sbfs **out, struct sbx_error *err)
{
	struct transport_config cfg;
	struct sbfs *fs = xcalloc(1, sizeof(*fs));
	const char *tmp = getenv("TMPDIR");
	int rc;

	fs->o = *o;
	fs->uid = getuid();
	fs->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->start);
	pthread_mutex_init(&fs->lock, NULL);
	pthread_mutex_init(&fs->v1_lock, NULL);
	fs->spool_dir = xstrdup(tmp != NULL && *tmp == '/' ? tmp : "/tmp");
	fs->prov = prov;
	transport_config_defaults(&cfg);
	if (o->timeout_s > 0)
		cfg.response_timeout_ms = o->timeout_s * 1000;
	if (o->connect_timeout_s > 0)
		cfg.connect_timeout_ms = o->connect_timeout_s * 1000;
	rc = transport_new(fs->prov, &cfg, &fs->t);
	if (rc < 0) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "the HTTP client could not start");
		goto fail;
	}
	/* A name no other client of an agent has: the change events of
	 * this mount's own changes carry it (doc/protocol-ext.md). */
	if (ids_hex(fs->client_id, sizeof(fs->client_id), "sandboxfs-", 8) <
		    0 ||
	    transport_set_client_id(fs->t, fs->client_id) < 0)
		fs->client_id[0] = '\0';
	rc = wnodes_new(o->write_window_ms, fs_files_flush_node, fs,
			&fs->writes);
	if (rc < 0) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "the write table could not be made");
		goto fail;
	}
	rc = prefetch_new(&fs->pf);
	if (rc == 0)
		rc = readahead_new(SBFS_RA_WORKERS, SBFS_RA_BUDGET, &fs->ra);
	if (rc < 0) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "the readahead pool could not be made");
		goto fail;
	}
	fs->inodes = inodes_new();
	fs->dirs = dirsnaps_new(SBFS_DIRSNAPS_MAX, SBFS_DIRSNAP_ENTRIES_MAX);
	pthread_mutex_init(&fs->hide_lock, NULL);
	pthread_mutex_init(&fs->names_lock, NULL);
	clock_cond_init(&fs->names_idle);
	rc = cache_new(o->attr_timeout, &fs->cache);
	if (rc == 0)
		cache_on_put(fs->cache, sbfs_nodes_learn, fs);
	if (rc < 0) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "the attribute cache could not be made");
		goto fail;
	}
	*out = fs;
	return 0;
fail:
	sbfs_free(fs);
	return rc;
}

void sbfs_free(struct sbfs *fs)
{
	struct sbx *sb, *next;

	if (fs == NULL)
		return;
	/* The event threads touch every cache: they end first. */
	for (sb = fs->sandboxes; sb != NULL; sb = sb->next)
		sbfs_events_free(sb);
	prefetch_free(fs->pf);
	/* Readahead streams hold write nodes: the readahead goes first. */
	readahead_free(fs->ra);
	wnodes_free(fs->writes);
	for (sb = fs->sandboxes; sb != NULL; sb = next) {
		next = sb->next;
		fs_jobs_free(sb->jobs);
		pthread_mutex_destroy(&sb->lock);
		free(sb);
	}
	strv_free(fs->ids, fs->nids);
	transport_free(fs->t);
	provider_free(fs->prov);
	cache_free(fs->cache);
	if (fs->inodes != NULL) {
		pthread_mutex_destroy(&fs->hide_lock);
		pthread_mutex_destroy(&fs->names_lock);
		pthread_cond_destroy(&fs->names_idle);
	}
	inodes_free(fs->inodes);
	dirsnaps_free(fs->dirs);
	pthread_mutex_destroy(&fs->v1_lock);
	pthread_mutex_destroy(&fs->lock);
	free(fs->spool_dir);
	free(fs);
}

void sbfs_source(struct sbfs *fs, char *buf, size_t size)
{
	if (fs->prov->ops->home != NULL)
		fs->prov->ops->home(fs->prov, buf, size);
	else
		snprintf(buf, size, "%s", fs->prov->ops->name);
}

int sbfs_home_statfs(struct sbfs *fs, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = 4096;
	st->f_frsize = 4096;
	st->f_namemax = 255;
	if (fs->prov->ops->statfs == NULL)
		return 0;
	return fs->prov->ops->statfs(fs->prov, st);
}

static char **ids_copy(char **ids, size_t n)
{
	char **c = xcalloc(n + 1, sizeof(*c));
	size_t i;

	for (i = 0; i < n; i++)
		c[i] = xstrdup(ids[i]);
	return c;
}

int sbfs_list(struct sbfs *fs, char ***ids, size_t *n)
{
	struct sbx_error err;
	char **fresh = NULL;
	size_t nfresh = 0;
	long long now = clock_mono_ms();
	int rc;

	pthread_mutex_lock(&fs->lock);
	if (fs->ids != NULL && now - fs->ids_ms < fs->o.list_cache_ms) {
		*ids = ids_copy(fs->ids, fs->nids);
		*n = fs->nids;
		pthread_mutex_unlock(&fs->lock);
		return 0;
	}
	pthread_mutex_unlock(&fs->lock);

	sbx_error_clear(&err);
	rc = fs->prov->ops->list(fs->prov, &fresh, &nfresh, &err);
	if (rc < 0)
		return sbfs_fail(fs, "*", "list", "", &err);
	pthread_mutex_lock(&fs->lock);
	strv_free(fs->ids, fs->nids);
	fs->ids = fresh;
	fs->nids = nfresh;
	fs->ids_ms = now;
	*ids = ids_copy(fs->ids, fs->nids);
	*n = fs->nids;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

/* ---- sandboxes ------------------------------------------------------------ */

static bool id_plausible(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > PROVIDER_ID_MAX)
		return false;
	return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			  "0123456789_-") == n;
}

/* The mount's sandbox id, NULL when it knows none (fs->lock held). */
static struct sbx *sbx_find(struct sbfs *fs, const char *id)
{
	struct sbx *sb;

	for (sb = fs->sandboxes; sb != NULL; sb = sb->next)
		if (strcmp(sb->id, id) == 0)
			break;
	return sb;
}

/* The mount's sandbox id with one more reference; when the mount knows
 * none yet, made with create, else NULL. */
static struct sbx *sbx_ref(struct sbfs *fs, const char *id, bool create)
{
	struct sbx *sb;

	pthread_mutex_lock(&fs->lock);
	sb = sbx_find(fs, id);
	if (sb == NULL && create) {
		sb = xcalloc(1, sizeof(*sb));
		sb->fs = fs;
		snprintf(sb->id, sizeof(sb->id), "%s", id);
		pthread_mutex_init(&sb->lock, NULL);
		sb->next = fs->sandboxes;
		fs->sandboxes = sb;
	}
	if (sb != NULL)
		sb->refs++;
	pthread_mutex_unlock(&fs->lock);
	return sb;
}

struct sbx *sbfs_known(struct sbfs *fs, const char *id)
{
	return sbx_ref(fs, id, false);
}

void sbfs_op_begin(const struct sbfs *fs, bool bounded)
{
	transport_op_clear_timed_out();
	transport_op_set_deadline(bounded && fs->o.timeout_s > 0
					  ? transport_now_ms() +
						    fs->o.timeout_s * 1000LL
					  : 0);
}

/* The FUSE caller of this thread's operation (0 when none). */
static pid_t caller(void)
{
	return sbfs_caller_pid();
}

/* The same caller's previous operation on this sandbox ended at a deadline
 * a moment ago: the kernel asking again within the same system call. */
static bool just_late(struct sbx *sb)
{
	pid_t pid = caller();
	bool late;

	if (pid <= 0)
		return false;
	pthread_mutex_lock(&sb->lock);
	late = sb->late_pid == pid &&
	       clock_mono_ms() - sb->late_ms < SBFS_FAIL_FAST_MS;
	pthread_mutex_unlock(&sb->lock);
	return late;
}

void sbfs_leave(struct sbx *sb)
{
	pid_t pid;

	if (sb == NULL)
		return;
	if (transport_op_timed_out() && (pid = caller()) > 0) {
		pthread_mutex_lock(&sb->lock);
		sb->late_pid = pid;
		sb->late_ms = clock_mono_ms();
		pthread_mutex_unlock(&sb->lock);
	}
	/* Sandboxes stay known for the life of the mount (their jobs do);
	 * the count documents who is inside. */
	pthread_mutex_lock(&sb->fs->lock);
	sb->refs--;
	pthread_mutex_unlock(&sb->fs->lock);
}

static bool state_needs_resume(enum provider_state st)
{
	return st != PROVIDER_STATE_RUNNING;
}

/* What the agent's health of the current boot says it can do (sb->lock
 * held). */
static void take_health(struct sbfs *fs, struct sbx *sb,
			const struct proto_health *h)
{
	sb->health = *h;
	sb->health_known = true;
	/* The request may itself have activated a new connection. */
	sb->health_gen = transport_generation(fs->t, sb->id);
	sb->ext = h->ext_files >= 1;
	sb->ext_tree = h->ext_files >= 2;
	sb->ext_create_write = h->ext_files >= 3;
	sb->ext_contents = h->ext_files >= 4;
	sb->ext_max_write = h->ext_max_write;
}

/* Ask the agent's health when the boot may have changed since last time. */
static int refresh_health(struct sbfs *fs, struct sbx *sb, const char *op)
{
	struct proto_health h;
	struct sbx_error err;
	unsigned gen = transport_generation(fs->t, sb->id);
	int rc;

	pthread_mutex_lock(&sb->lock);
	if (sb->health_known && sb->health_gen == gen) {
		pthread_mutex_unlock(&sb->lock);
		return 0;
	}
	pthread_mutex_unlock(&sb->lock);

	sbx_error_clear(&err);
	rc = ac_health(fs->t, sb->id, &h, &err);
	if (rc < 0)
		return sbfs_fail(fs, sb->id, op, "", &err);
	pthread_mutex_lock(&sb->lock);
	take_health(fs, sb, &h);
	pthread_mutex_unlock(&sb->lock);
	if (h.ext_events >= 1)
		sbfs_events_follow(sb);
	return 0;
}

static int resume(struct sbfs *fs, struct sbx *sb, const char *op)
{
	bool bounded = transport_op_deadline() != 0;
	struct proto_health h;
	struct sbx_error err;
	int rc;

	sbx_error_clear(&err);
	memset(&h, 0, sizeof(h));
	log_info("sandbox %s: resuming it for %s", sb->id, op);
	/* Starting a sandbox has its own deadlines (Running, then the
	 * agent's readiness); the operation's timeout starts again after
	 * it (doc/transport-rules.md 9). */
	transport_op_set_deadline(0);
	rc = transport_resume(fs->t, sb->id, &h, &err);
	transport_op_set_deadline(bounded && fs->o.timeout_s > 0
					  ? transport_now_ms() +
						    fs->o.timeout_s * 1000LL
					  : 0);
	if (rc < 0)
		return sbfs_fail(fs, sb->id, op, "", &err);
	pthread_mutex_lock(&sb->lock);
	if (h.protocol_version == PROTO_VERSION)
		take_health(fs, sb, &h);
	pthread_mutex_unlock(&sb->lock);
	if (h.protocol_version == PROTO_VERSION && h.ext_events >= 1)
		sbfs_events_follow(sb);
	return 0;
}

static void set_kind(struct sbx *sb, enum transport_kind kind)
{
	pthread_mutex_lock(&sb->lock);
	sb->kind = kind;
	pthread_mutex_unlock(&sb->lock);
}

int sbfs_enter(struct sbfs *fs, const char *id, const char *op,
	       bool want_health, struct sbx **out)
{
	struct provider_record rec;
	enum transport_kind kind;
	struct sbx_error err;
	struct sbx *sb;
	int rc;

	if (!id_plausible(id))
		return -ENOENT;
	sb = sbx_ref(fs, id, true);
	if (just_late(sb)) {
		log_debug("sandbox %s: %s: failing at once, this caller's last "
			  "request to it ended at its deadline",
			  id, op);
		sbfs_leave(sb);
		return -EIO;
	}
	memset(&rec, 0, sizeof(rec));
	sbx_error_clear(&err);
	rc = transport_session_kind(fs->t, id, op, &kind, &rec, &err);
	if (rc < 0) {
		rc = sbfs_fail(fs, id, op, "", &err);
		goto fail;
	}
	if (rec.state == PROVIDER_STATE_DELETING) {
		rc = -ENOENT;
		goto fail;
	}
	if (state_needs_resume(rec.state)) {
		if (fs->o.noautoresume) {
			log_debug("sandbox %s: %s: it is %s and noautoresume "
				  "is set",
				  id, op, provider_state_name(rec.state));
			rc = -EHOSTDOWN;
			goto fail;
		}
		rc = resume(fs, sb, op);
		if (rc < 0)
			goto fail;
	}
	set_kind(sb, kind);
	if (want_health && kind == TRANSPORT_AGENT) {
		rc = refresh_health(fs, sb, op);
		if (rc < 0)
			goto fail;
	}
	provider_record_cleanup(&rec);
	*out = sb;
	return 0;
fail:
	provider_record_cleanup(&rec);
	sbfs_leave(sb);
	return rc;
}

/* The transport a sandbox's record names (*kind); -ENOENT when the
 * provider knows no such sandbox or it is being deleted. Only existence
 * matters here: an unknown transport label is reported by the operations
 * inside the sandbox, not by its directory. A provider may answer from
 * its listing. */
static int listed_kind(struct sbfs *fs, const char *id,
		       enum transport_kind *kind)
{
	struct provider_record rec;
	struct sbx_error err;
	int rc;

	memset(&rec, 0, sizeof(rec));
	sbx_error_clear(&err);
	rc = fs->prov->ops->record_listed != NULL
		     ? fs->prov->ops->record_listed(fs->prov, id, &rec, &err)
		     : fs->prov->ops->record(fs->prov, id, &rec, &err);
	if (rc == -ENOENT)
		return -ENOENT;
	if (rc < 0)
		return sbfs_fail(fs, id, "lookup", "", &err);
	if (rec.state == PROVIDER_STATE_DELETING)
		rc = -ENOENT;
	else if (transport_kind_of(&rec, kind, &err) < 0)
		*kind = TRANSPORT_AGENT;
	provider_record_cleanup(&rec);
	return rc;
}

int sbfs_peek(struct sbfs *fs, const char *id, struct sbx **out)
{
	enum transport_kind kind;
	int rc = id_plausible(id) ? listed_kind(fs, id, &kind) : -ENOENT;

	if (rc < 0)
		return rc;
	*out = sbx_ref(fs, id, true);
	set_kind(*out, kind);
	return 0;
}

void sbfs_refresh(struct sbfs *fs, struct sbx *sb)
{
	transport_forget(fs->t, sb->id);
	pthread_mutex_lock(&sb->lock);
	sb->health_known = false;
	pthread_mutex_unlock(&sb->lock);
	cache_drop_sandbox(fs->cache, sb->id);
	prefetch_drop_sandbox(fs, sb->id);
}

/* Outcomes an application asks about on purpose: not worth a warning. */
static bool expected_errno(int e)
{
	switch (e) {
	case ENOENT:
	case EEXIST:
	case ENOTEMPTY:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case EXDEV:
	case EINVAL:
	case ESTALE:
	case ENODATA:
	case ENOTSUP:
		return true;
	default:
		return false;
	}
}

int sbfs_fail(struct sbfs *fs, const char *id, const char *op, const char *path,
	      const struct sbx_error *err)
{
	int rc = sbx_error_errno(err);
	char text[1024];

	sbx_error_describe(err, text, sizeof(text));
	if (expected_errno(-rc)) {
		log_debug("sandbox %s: %s %s: %s", id, op, path, text);
	} else {
		struct sbx *sb = sbfs_known(fs, id);

		log_warn("sandbox %s: %s%s%s: %s", id, op, *path ? " " : "",
			 path, text);
		/* Where a user of a daemonized mount looks first: the
		 * sandbox's info file. */
		if (sb != NULL) {
			pthread_mutex_lock(&sb->lock);
			sb->has_last_error = true;
			clock_gettime(CLOCK_REALTIME, &sb->last_error_at);
			snprintf(sb->last_error_op, sizeof(sb->last_error_op),
				 "%s", op);
			snprintf(sb->last_error, sizeof(sb->last_error),
				 "%.200s%s%.800s", path, *path ? ": " : "",
				 text);
			pthread_mutex_unlock(&sb->lock);
			sbfs_leave(sb);
		}
	}
	return rc;
}

/*
 * Whether a symlink at rel (relative to the session root) whose text is
 * target would lead out of the sandbox when the kernel follows it: an
 * absolute target, or a relative one that climbs above the root.
 */
static bool sbfs_link_escapes(const char *rel, const char *target)
{
	const char *p;
	long depth = 0;

	if (target[0] == '/' || target[0] == '\0')
		return target[0] == '/';
	/* The link's own directory is depth components below the root. */
	for (p = rel; *p != '\0'; p++)
		if (*p == '/')
			depth++;
	for (p = target; *p != '\0';) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return true;
		} else if (n > 0 && !(n == 1 && p[0] == '.')) {
			depth++;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	return false;
}

/* The path components a shown link target is made of, in order. */
struct comps {
	const char **at;
	size_t *len;
	size_t n, cap;
};

/* Add the component at p, l bytes long, after the others. */
static void comps_push(struct comps *c, const char *p, size_t l)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 8;
		c->at = xrealloc(c->at, c->cap * sizeof(*c->at));
		c->len = xrealloc(c->len, c->cap * sizeof(*c->len));
	}
	c->at[c->n] = p;
	c->len[c->n++] = l;
}

char *sbfs_link_show(const struct sbfs *fs, const char *rel, const char *target)
{
	struct buf out = BUF_INIT(0);
	struct comps c = {NULL, NULL, 0, 0};
	const char *p = target;
	size_t depth = 0, i;
	int rc = 0;

	if (fs->o.raw_symlinks || !sbfs_link_escapes(rel, target))
		return xstrdup(target);
	for (i = 0; rel[i] != '\0'; i++)
		if (rel[i] == '/')
			depth++;
	if (*p == '/') {
		/* The sandbox sees its own root at SBFS_SANDBOX_ROOT; any other
		 * absolute place is taken from the root of files/. */
		size_t rl = strlen(SBFS_SANDBOX_ROOT);

		if (strncmp(p, SBFS_SANDBOX_ROOT, rl) == 0 &&
		    (p[rl] == '/' || p[rl] == '\0'))
			p += rl;
	} else {
		/* Relative: from the link's own directory. */
		const char *q = rel;

		for (i = 0; i < depth; i++) {
			size_t l = strcspn(q, "/");

			comps_push(&c, q, l);
			q += l + 1;
		}
	}
	/* Resolve . and .. by name, stopping at the root of files/. */
	while (*p != '\0') {
		size_t l = strcspn(p, "/");

		if (l == 2 && p[0] == '.' && p[1] == '.') {
			if (c.n > 0)
				c.n--;
		} else if (l > 0 && !(l == 1 && p[0] == '.')) {
			comps_push(&c, p, l);
		}
		p += l;
		while (*p == '/')
			p++;
	}
	/* Up from the link's directory to files/, then down. */
	for (i = 0; i < depth && rc == 0; i++)
		rc = buf_append_str(&out,
				    i + 1 < depth || c.n > 0 ? "../" : "..");
	for (i = 0; i < c.n && rc == 0; i++) {
		rc = buf_append(&out, c.at[i], c.len[i]);
		if (rc == 0 && i + 1 < c.n)
			rc = buf_append_str(&out, "/");
	}
	if (rc == 0 && out.len == 0)
		rc = buf_append_str(&out, ".");
	free(c.at);
	free(c.len);
	if (rc < 0) {
		/* Unbounded buffer: only memory can fail, and xalloc aborts
		 * on that; keep a safe answer anyway. */
		buf_cleanup(&out);
		return xstrdup(".");
	}
	return buf_take(&out, &i);
}

mode_t sbfs_control_mode(const struct sbfs *fs, bool readable)
{
	if (fs->o.shared_exec)
		return readable ? 0666 : 0222;
	return readable ? 0600 : 0200;
}

void sbfs_synth_stat(const struct sbfs *fs, struct stat *st, bool dir,
		     mode_t perm, off_t size)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = (dir ? S_IFDIR : S_IFREG) | perm;
	st->st_nlink = dir ? 2 : 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = size;
	st->st_blksize = 4096;
	st->st_atim = fs->start;
	st->st_mtim = fs->start;
	st->st_ctim = fs->start;
}

void sbfs_attr_to_stat(const struct sbx *sb, const struct proto_attr *a,
		       struct stat *st)
{
	mode_t type, perm = a->perm & 07777;

	switch (a->type) {
	case PROTO_FT_DIR:
		type = S_IFDIR;
		break;
	case PROTO_FT_SYMLINK:
		type = S_IFLNK;
		break;
	case PROTO_FT_SOCKET:
		type = S_IFSOCK;
		break;
	case PROTO_FT_CHAR:
		type = S_IFCHR;
		break;
	case PROTO_FT_BLOCK:
		type = S_IFBLK;
		break;
	default:
		/* A FIFO would be opened by the host's kernel as a pipe of
		 * its own, which no one in the sandbox writes to: shown as
		 * a regular file whose open is refused (SEMANTICS.md). */
		type = S_IFREG;
		break;
	}
	/* A sandbox's set-id bits never reach the host (the mount is
	 * nosuid too); a directory's set-group-id is only its group rule. */
	perm &= ~(mode_t)S_ISUID;
	if (type != S_IFDIR)
		perm &= ~(mode_t)S_ISGID;
	memset(st, 0, sizeof(*st));
	st->st_mode = type | perm;
	st->st_nlink = (nlink_t)(a->nlink ? a->nlink : 1);
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	/* The sandbox's own user is the mounting user (SEMANTICS.md,
	 * ownership): git and other ownership checks accept its files. An
	 * agent that does not say whom it acts as (strict v1) has all its
	 * files shown as the mounting user's. */
	if (sb != NULL &&
	    (!sb->health.ext_has_ids || a->uid == sb->health.ext_uid))
		st->st_uid = sb->fs->uid;
	if (sb != NULL &&
	    (!sb->health.ext_has_ids || a->gid == sb->health.ext_gid))
		st->st_gid = sb->fs->gid;
	st->st_size = a->type == PROTO_FT_FIFO ? 0 : (off_t)a->size;
	st->st_ino = (ino_t)a->ino;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_blksize = 65536;
	/* Device numbers are the sandbox's, never the host's. */
	st->st_rdev = 0;
	st->st_atim.tv_sec = a->atime;
	st->st_atim.tv_nsec = a->atime_ns;
	st->st_mtim.tv_sec = a->mtime;
	st->st_mtim.tv_nsec = a->mtime_ns;
	st->st_ctim.tv_sec = a->ctime;
	st->st_ctim.tv_nsec = a->ctime_ns;
}

const struct fs_tree_ops *sbfs_tree_ops(const struct sbx *sb)
{
	return sb->kind == TRANSPORT_AGENT && sb->ext ? &fs_files_ops
						      : &fs_files_v1_ops;
}
