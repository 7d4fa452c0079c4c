/* SPDX-License-Identifier: MIT */
/*
 * local_copy: the copy of a tree into a new session root (see
 * local_copy_tree in local_ctl_i.h): entry by entry through descriptors,
 * nothing followed through a symlink, progress told as it goes
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dirstream.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "client/local_ctl_i.h"

/* Deepest tree create --from copies (each level holds three descriptors). */
#define COPY_DEPTH_MAX 128

struct copy {
	bool chown; /* running as root: hand everything over */
	uid_t uid;
	gid_t gid;
	char rel[PATH_MAX]; /* the entry being copied, for messages */
	local_progress_fn *progress; /* may be NULL */
	void *progress_arg;
	struct local_copy_progress done;
};

/* Tell the caller how far the copy is; it may end the create. */
static int copy_progress(struct copy *cx)
{
	if (cx->progress == NULL)
		return 0;
	return cx->progress(cx->progress_arg, &cx->done);
}

static int copy_data(struct copy *cx, int in, int out)
{
	const size_t chunk = 128 * 1024;
	size_t since = 0;
	char *mem = NULL;
	ssize_t n;
	int rc = 0;

	/* copy_file_range shares extents where it can; it is not there on
	 * every kernel and filesystem pair, so fall back to read/write.
	 * Chunks keep progress calls (and an interruption) within
	 * LOCAL_COPY_CHUNK of each other. */
	for (;;) {
		n = copy_file_range(in, NULL, out, NULL, LOCAL_COPY_CHUNK, 0);
		if (n > 0) {
			cx->done.bytes += (uint64_t)n;
			rc = copy_progress(cx);
			if (rc < 0)
				goto out;
			continue;
		}
		if (n == 0)
			goto out;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL &&
		    errno != EOPNOTSUPP && errno != EPERM) {
			rc = -errno;
			goto out;
		}
		break;
	}
	mem = xmalloc(chunk);
	for (;;) {
		n = read(in, mem, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		cx->done.bytes += (uint64_t)n;
		since += (size_t)n;
		if (since >= LOCAL_COPY_CHUNK) {
			since = 0;
			rc = copy_progress(cx);
			if (rc < 0)
				goto out;
		}
		rc = fdio_write_all(out, mem, (size_t)n);
		if (rc < 0)
			goto out;
	}
out:
	free(mem);
	return rc;
}

/* Owner, then mode (a chown may clear set-id bits), then times. */
static int finish_fd(struct copy *cx, int fd, const struct stat *st)
{
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	mode_t mode = st->st_mode & 07777;

	if (cx->chown && !S_ISDIR(st->st_mode))
		mode &= (mode_t) ~(S_ISUID | S_ISGID);
	if (cx->chown && fchown(fd, cx->uid, cx->gid) < 0)
		return -errno;
	if (fchmod(fd, mode) < 0 || futimens(fd, ts) < 0)
		return -errno;
	return 0;
}

static int copy_entry(struct copy *cx, int sfd, int dfd, const char *name,
		      int depth);

static int copy_dir(struct copy *cx, int sfd, int dfd, int depth)
{
	struct dirent *de;
	size_t mark = strlen(cx->rel);
	int rc = 0;
	DIR *d;

	d = dirstream_open(sfd);
	if (d == NULL)
		return -errno;
	while (rc == 0 && (de = dirstream_next(d)) != NULL) {
		snprintf(cx->rel + mark, sizeof(cx->rel) - mark, "%s%s",
			 mark ? "/" : "", de->d_name);
		rc = copy_entry(cx, sfd, dfd, de->d_name, depth);
		if (rc == 0)
			cx->rel[mark] = '\0';
	}
	closedir(d);
	return rc;
}

static int copy_entry(struct copy *cx, int sfd, int dfd, const char *name,
		      int depth)
{
	struct timespec ts[2];
	char target[PATH_MAX];
	struct stat st, st2;
	int in = -1, out = -1, rc = 0;
	ssize_t n;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR:
		if (depth >= COPY_DEPTH_MAX)
			return -ELOOP;
		in = openat(sfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0 || mkdirat(dfd, name, 0700) < 0)
			goto fail;
		out = openat(dfd, name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (out < 0)
			goto fail;
		rc = copy_dir(cx, in, out, depth + 1);
		if (rc == 0)
			rc = finish_fd(cx, out, &st);
		break;
	case S_IFREG:
		in = openat(sfd, name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (in < 0 || fstat(in, &st2) < 0)
			goto fail;
		if (!S_ISREG(st2.st_mode)) {
			rc = -EAGAIN; /* replaced while we looked */
			break;
		}
		out = openat(dfd, name,
			     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				     O_CLOEXEC,
			     0600);
		if (out < 0)
			goto fail;
		rc = copy_data(cx, in, out);
		if (rc == 0)
			rc = finish_fd(cx, out, &st2);
		break;
	case S_IFLNK:
		n = readlinkat(sfd, name, target, sizeof(target) - 1);
		if (n < 0)
			goto fail;
		target[n] = '\0';
		if (symlinkat(target, dfd, name) < 0 ||
		    (cx->chown && fchownat(dfd, name, cx->uid, cx->gid,
					   AT_SYMLINK_NOFOLLOW) < 0) ||
		    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			goto fail;
		break;
	case S_IFIFO:
		/* Owner, mode and times through a descriptor of the FIFO
		 * just made: a symlink swapped in for it is never
		 * followed (reading end, non-blocking: the open does not
		 * wait for a writer). */
		if (mkfifoat(dfd, name, 0600) < 0)
			goto fail;
		out = openat(dfd, name,
			     O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		if (out < 0 || fstat(out, &st2) < 0)
			goto fail;
		if (!S_ISFIFO(st2.st_mode)) {
			rc = -EAGAIN; /* replaced while we made it */
			break;
		}
		rc = finish_fd(cx, out, &st);
		break;
	default:
		/* A device node or socket has no business in a session
		 * root, and the agent would refuse it anyway. */
		log_warn("not copying '%s': a device or socket", cx->rel);
		break;
	}
	if (rc == 0 && !S_ISDIR(st.st_mode)) {
		cx->done.files++;
		rc = copy_progress(cx);
	}
	goto out;
fail:
	rc = -errno;
out:
	fdio_close(in);
	fdio_close(out);
	return rc;
}

int local_copy_tree(const char *from, const char *to, bool chown_to, uid_t uid,
		    gid_t gid, local_progress_fn *fn, void *arg,
		    struct local_err *err)
{
	struct copy cx = {.chown = chown_to,
			  .uid = uid,
			  .gid = gid,
			  .progress = fn,
			  .progress_arg = arg};
	struct stat st;
	int sfd = -1, dfd = -1, rc;

	sfd = open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0 || fstat(sfd, &st) < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot copy %s: %s", from,
			      strerror(-rc));
		goto out;
	}
	dfd = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot open %s: %s", to, strerror(-rc));
		goto out;
	}
	rc = copy_dir(&cx, sfd, dfd, 0);
	if (rc == 0)
		rc = finish_fd(&cx, dfd, &st);
	if (rc == 0)
		rc = copy_progress(&cx); /* the totals, last */
	if (rc == -ELOOP)
		local_err_set(err, rc,
			      "cannot copy %s/%s: deeper than %d directories",
			      from, cx.rel, COPY_DEPTH_MAX);
	else if (rc == -EINTR)
		local_err_set(err, rc, "interrupted while copying %s/%s", from,
			      cx.rel);
	else if (rc < 0)
		local_err_set(err, rc, "cannot copy %s/%s: %s", from, cx.rel,
			      strerror(-rc));
out:
	fdio_close(sfd);
	fdio_close(dfd);
	return rc;
}
