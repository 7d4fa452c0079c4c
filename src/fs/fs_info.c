/* SPDX-License-Identifier: MIT */
/*
 * fs_info: MOUNT/<sandbox>/info and MOUNT/<sandbox>/ctl (SEMANTICS.md).
 * info is a JSON description of the sandbox (id, state, transport,
 * labels, capabilities, boot id, route) made from a fresh provider record
 * and what the mount knows of the agent, built when the file is opened
 * and served from the open file. ctl takes "resume", "stop" and "refresh".
 *
 * Nothing here reads or shows a credential: the route is the provider's
 * recorded agent URL with any user part, query and fragment removed.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "fs/fs_i.h"

/* An open info file: its content, made at open. */
struct info_handle {
	struct buf data;
};

/*
 * info's size is 0, as /proc files show theirs: the content is made when
 * the file is opened (a provider read), and served with direct_io, so
 * reads go on to the end whatever the size. Making it in getattr too
 * would cost a second provider read for every stat (ls -l of the
 * sandbox's directory) and still not be the size of what a later open
 * returns, as the state may change in between.
 */
int fs_info_getattr(struct sbx *sb, bool ctl, struct stat *st)
{
	sbfs_synth_stat(sb->fs, st, false,
			ctl ? sbfs_control_mode(sb->fs, false) : 0444, 0);
	return 0;
}

/* The route without what could carry a secret (user info, query,
 * fragment): scheme://host[:port]/path. NULL when it is not a URL. */
static char *route_public(const char *url)
{
	const char *auth, *host, *path, *p;
	size_t alen, plen;

	p = strstr(url, "://");
	if (p == NULL)
		return NULL;
	auth = p + 3;
	alen = strcspn(auth, "/?#");
	host = auth;
	for (p = auth; p < auth + alen; p++)
		if (*p == '@')
			host = p + 1;
	path = auth + alen;
	plen = strcspn(path, "?#");
	return xasprintf("%.*s%.*s%.*s", (int)(auth - url), url,
			 (int)(auth + alen - host), host, (int)plen, path);
}

static int json_str_or_null(struct buf *out, const char *s)
{
	return s != NULL ? proto_json_string(out, s)
			 : buf_append_str(out, "null");
}

/* A piece of info's JSON: literal text, then a string value (null when
 * there is none). */
struct json_part {
	const char *text;
	const char *value;
};

/* Append n parts in order; 0, or what the first that fails returns. */
static int json_parts(struct buf *out, const struct json_part *parts, size_t n)
{
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < n; i++) {
		rc = buf_append_str(out, parts[i].text);
		if (rc == 0)
			rc = json_str_or_null(out, parts[i].value);
	}
	return rc;
}

/* The last warning of a sandbox, as info shows it. */
struct last_error {
	bool has;
	struct timespec at;
	char op[32];
	char text[1024];
};

/* info's member lastError: the sandbox's last warning, or null. */
static int last_error_json(const struct last_error *le, struct buf *out)
{
	char stamp[32];
	const struct json_part parts[] = {
		{",\n  \"lastError\": {\n    \"time\": ", stamp},
		{",\n    \"operation\": ", le->op},
		{",\n    \"message\": ", le->text},
	};
	struct tm tm;
	int rc;

	if (!le->has)
		return buf_append_str(out, ",\n  \"lastError\": null");
	gmtime_r(&le->at.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	rc = json_parts(out, parts, sizeof(parts) / sizeof(parts[0]));
	return rc == 0 ? buf_append_str(out, "\n  }") : rc;
}

static int info_json(const struct provider_record *rec, bool agent, bool files,
		     const char *boot_id, const char *route,
		     const struct last_error *le, struct buf *out)
{
	const struct json_part head[] = {
		{"{\n  \"id\": ", rec->id},
		{",\n  \"state\": ", provider_state_name(rec->state)},
		{",\n  \"transport\": ", agent ? "agent" : "native"},
	};
	const struct json_part tail[] = {
		{",\n  \"bootId\": ", boot_id},
		{",\n  \"route\": ", route},
	};
	size_t i;
	int rc;

	rc = json_parts(out, head, sizeof(head) / sizeof(head[0]));
	if (rc == 0)
		rc = buf_append_str(out, ",\n  \"labels\": {");
	for (i = 0; rc == 0 && i < rec->nlabels; i++) {
		const struct json_part label[] = {
			{i > 0 ? ",\n    " : "\n    ", rec->labels[i].key},
			{": ", rec->labels[i].value},
		};

		rc = json_parts(out, label, 2);
	}
	if (rc == 0)
		rc = buf_append_str(out, rec->nlabels > 0 ? "\n  }" : "}");
	/* Jobs and supervisor isolation follow the transport, as the
	 * binding's session capabilities do (doc/transport-rules.md 1). */
	if (rc == 0)
		rc = buf_printf(out,
				",\n  \"capabilities\": {\n"
				"    \"jobs\": %s,\n"
				"    \"files\": %s,\n"
				"    \"supervisorIsolation\": %s\n  }",
				agent ? "true" : "false",
				files ? "true" : "false",
				agent ? "true" : "false");
	if (rc == 0)
		rc = json_parts(out, tail, sizeof(tail) / sizeof(tail[0]));
	if (rc == 0)
		rc = last_error_json(le, out);
	return rc == 0 ? buf_append_str(out, "\n}\n") : rc;
}

static int info_build(struct sbx *sb, struct buf *out)
{
	struct provider *p = sb->fs->prov;
	struct provider_record rec;
	enum transport_kind kind;
	struct proto_health h;
	struct sbx_error err;
	struct last_error le;
	char *route = NULL;
	bool known, ext, agent;
	int rc;

	memset(&rec, 0, sizeof(rec));
	sbx_error_clear(&err);
	rc = p->ops->record(p, sb->id, &rec, &err);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "info", "", &err);
	pthread_mutex_lock(&sb->lock);
	le.has = sb->has_last_error;
	le.at = sb->last_error_at;
	snprintf(le.op, sizeof(le.op), "%s", sb->last_error_op);
	snprintf(le.text, sizeof(le.text), "%s", sb->last_error);
	pthread_mutex_unlock(&sb->lock);
	rc = transport_kind_of(&rec, &kind, &err);
	if (rc < 0) {
		rc = sbfs_fail(sb->fs, sb->id, "info", "", &err);
		goto out;
	}
	agent = kind == TRANSPORT_AGENT;
	pthread_mutex_lock(&sb->lock);
	h = sb->health;
	known = sb->health_known;
	ext = sb->ext;
	pthread_mutex_unlock(&sb->lock);
	if (agent && rec.route_hint != NULL)
		route = route_public(rec.route_hint);
	rc = info_json(&rec, agent, agent && known && ext,
		       agent && known && h.boot_id[0] != '\0' ? h.boot_id
							      : NULL,
		       route, &le, out);
out:
	free(route);
	provider_record_cleanup(&rec);
	return rc;
}

int fs_info_open(struct sbx *sb, bool ctl, struct fuse_file_info *fi)
{
	struct info_handle *h;
	int acc = fi->flags & O_ACCMODE;
	int rc;

	if (ctl) {
		if (acc == O_RDONLY)
			return -EACCES;
		fi->fh = 0;
		fi->direct_io = 1;
		return 0;
	}
	if (acc != O_RDONLY)
		return -EACCES;
	h = xcalloc(1, sizeof(*h));
	buf_init(&h->data, 1024 * 1024);
	rc = info_build(sb, &h->data);
	if (rc < 0) {
		buf_cleanup(&h->data);
		free(h);
		return rc;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 1;
	return 0;
}

int fs_info_read(struct sbx *sb, bool ctl, char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct info_handle *h =
		fi != NULL ? (struct info_handle *)(uintptr_t)fi->fh : NULL;
	size_t n;

	(void)sb;
	if (ctl || h == NULL)
		return -EBADF;
	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= h->data.len)
		return 0;
	n = h->data.len - (size_t)off;
	if (n > size)
		n = size;
	if (n > INT_MAX)
		n = INT_MAX;
	memcpy(buf, h->data.data + off, n);
	return (int)n;
}

static int ctl_stop(struct sbx *sb)
{
	struct provider *p = sb->fs->prov;
	struct sbx_error err;
	int rc;

	if (p->ops->stop == NULL)
		return -EOPNOTSUPP;
	sbx_error_clear(&err);
	log_info("sandbox %s: stopping it (ctl)", sb->id);
	rc = p->ops->stop(p, sb->id, &err);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "stop", "", &err);
	sbfs_refresh(sb->fs, sb);
	return 0;
}

static int ctl_resume(struct sbx *sb)
{
	struct proto_health h;
	struct sbx_error err;
	int rc;

	memset(&h, 0, sizeof(h));
	sbx_error_clear(&err);
	log_info("sandbox %s: resuming it (ctl)", sb->id);
	rc = transport_resume(sb->fs->t, sb->id, &h, &err);
	if (rc < 0)
		return sbfs_fail(sb->fs, sb->id, "resume", "", &err);
	return 0;
}

bool sbfs_ctl_word(const char *buf, size_t size, const char *word)
{
	size_t n = size;

	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t' || buf[n - 1] == '\r'))
		n--;
	while (n > 0 && (*buf == ' ' || *buf == '\t')) {
		buf++;
		n--;
	}
	return n == strlen(word) && memcmp(buf, word, n) == 0;
}

int fs_info_write(struct sbx *sb, bool ctl, const char *buf, size_t size,
		  off_t off, struct fuse_file_info *fi)
{
	int rc;

	(void)off;
	(void)fi;
	if (!ctl)
		return -EBADF;
	if (size > INT_MAX)
		return -EINVAL;
	if (sbfs_ctl_word(buf, size, "resume")) {
		rc = ctl_resume(sb);
	} else if (sbfs_ctl_word(buf, size, "stop")) {
		rc = ctl_stop(sb);
	} else if (sbfs_ctl_word(buf, size, "refresh")) {
		sbfs_refresh(sb->fs, sb);
		rc = 0;
	} else {
		rc = -EINVAL;
	}
	return rc < 0 ? rc : (int)size;
}

int fs_info_release(struct sbx *sb, bool ctl, struct fuse_file_info *fi)
{
	struct info_handle *h =
		fi != NULL ? (struct info_handle *)(uintptr_t)fi->fh : NULL;

	(void)sb;
	if (ctl || h == NULL)
		return 0;
	buf_cleanup(&h->data);
	free(h);
	fi->fh = 0;
	return 0;
}
