/* SPDX-License-Identifier: MIT */
/*
 * local_state: the local provider's state directory: where it is, what is
 * in it, and the two disciplines every writer follows (records are
 * replaced atomically, state transitions hold the sandbox's flock), and
 * the route rules a record's agentUrl must follow. It starts, signals and
 * contacts nothing.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/dirstream.h"
#include "common/clock.h"
#include "common/buf.h"
#include "common/fdio.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/unixurl.h"
#include "common/xalloc.h"
#include "common/strv.h"
#include "client/local_state.h"

int local_err_set(struct local_err *err, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return rc;
}

bool local_state_id_valid(const char *id)
{
	size_t i;

	if (id == NULL)
		return false;
	for (i = 0; id[i] != '\0'; i++) {
		char c = id[i];

		if (i >= LOCAL_ID_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return i > 0;
}

/* ---- the directory ------------------------------------------------------ */

/*
 * Make path absolute and lexically tidy ("//", "/./" and trailing '/'
 * removed; ".." is kept, since only the filesystem knows what it means
 * below a symlink). The result is the string agents are started with and
 * that /proc/PID/cmdline is later compared against, so one directory must
 * always yield one spelling.
 */
static int absolute(const char *path, char **out)
{
	char cwd[PATH_MAX];
	struct buf b = BUF_INIT(PATH_MAX);
	const char *p, *end;
	size_t len;
	int rc = 0;

	if (path[0] != '/') {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return -errno;
		rc = buf_append_str(&b, cwd);
	}
	for (p = path; rc == 0 && *p != '\0'; p = end) {
		while (*p == '/')
			p++;
		end = strchr(p, '/');
		if (end == NULL)
			end = p + strlen(p);
		len = (size_t)(end - p);
		if (len == 0 || (len == 1 && p[0] == '.'))
			continue;
		rc = buf_append(&b, "/", 1);
		if (rc == 0)
			rc = buf_append(&b, p, len);
	}
	if (rc == 0 && b.len == 0)
		rc = buf_append(&b, "/", 1);
	if (rc < 0) {
		buf_cleanup(&b);
		return rc == -EFBIG ? -ENAMETOOLONG : rc;
	}
	*out = buf_take(&b, NULL);
	return 0;
}

int local_state_dir_pick(const char *option, const char *env_dir,
			 const char *xdg_state_home, const char *home,
			 uid_t euid, char **out)
{
	char *joined;
	int rc;

	if (option != NULL && *option != '\0')
		return absolute(option, out);
	if (env_dir != NULL && *env_dir != '\0')
		return absolute(env_dir, out);
	if (euid == 0)
		return absolute(LOCAL_STATE_ROOT_DEFAULT, out);
	/* The XDG base directory rules ignore a relative value. */
	if (xdg_state_home != NULL && xdg_state_home[0] == '/')
		joined = xasprintf("%s/sandboxfs", xdg_state_home);
	else if (home != NULL && home[0] == '/')
		joined = xasprintf("%s/.local/state/sandboxfs", home);
	else
		return -ENOENT;
	rc = absolute(joined, out);
	free(joined);
	return rc;
}

int local_state_dir_resolve(const char *option, char **out)
{
	const char *home = getenv("HOME");
	struct passwd pw, *res = NULL;
	char pwbuf[4096];

	if ((option == NULL || *option == '\0') &&
	    (home == NULL || *home == '\0') && geteuid() != 0 &&
	    getpwuid_r(geteuid(), &pw, pwbuf, sizeof(pwbuf), &res) == 0 &&
	    res != NULL)
		home = res->pw_dir;
	return local_state_dir_pick(option, getenv("SANDBOXFS_STATE_DIR"),
				    getenv("XDG_STATE_HOME"), home, geteuid(),
				    out);
}

char *local_state_path(const char *state_dir, const char *id,
		       enum local_path which)
{
	static const char *const tail[] = {
		[LOCAL_PATH_SANDBOXES] = NULL,
		[LOCAL_PATH_DIR] = "",
		[LOCAL_PATH_RECORD] = "/sandbox.json",
		[LOCAL_PATH_ROOT] = "/root",
		[LOCAL_PATH_BOOT] = "/boot",
		[LOCAL_PATH_TOKEN] = "/boot/token",
		[LOCAL_PATH_PORT] = "/boot/port",
		[LOCAL_PATH_PID] = "/boot/pid",
		[LOCAL_PATH_LOG] = "/agent.log",
		[LOCAL_PATH_LOCK] = "/lock",
		[LOCAL_PATH_SOCKET] = "/boot/agent.sock",
		[LOCAL_PATH_AGENT_LOCK] = "/agent.lock",
	};

	if (which == LOCAL_PATH_SANDBOXES)
		return xasprintf("%s/sandboxes", state_dir);
	return xasprintf("%s/sandboxes/%s%s", state_dir, id, tail[which]);
}

/* mkdir -p; new directories get mode (parents too). */
static int mkdirs(const char *path, mode_t mode)
{
	char *tmp = xstrdup(path), *p;
	int rc = 0;

	for (p = tmp + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		{
			char save = *p;

			*p = '\0';
			if (mkdir(tmp, mode) < 0 && errno != EEXIST) {
				rc = -errno;
				break;
			}
			*p = save;
		}
		if (*p == '\0')
			break;
	}
	free(tmp);
	return rc;
}

/* chmod the file an fd (O_PATH included) holds, through /proc/self/fd:
 * never another file, whatever its name now leads to. */
static int local_state_chmod_fd(int fd, mode_t mode)
{
	char proc[64];

	/* fchmod does not take an O_PATH descriptor; the descriptor's
	 * /proc link leads to the very file it holds, never elsewhere. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return chmod(proc, mode) < 0 ? -errno : 0;
}

/* Make the directory at path owner-only (0700), never through a symlink,
 * with a notice when it was open to others. */
static int make_private(const char *path, struct local_err *err)
{
	struct stat st;
	int fd, rc = 0;

	fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		local_err_set(err, rc, "cannot open %s: %s", path,
			      strerror(-rc));
		goto out;
	}
	if ((st.st_mode & 07777) == 0700)
		goto out;
	rc = local_state_chmod_fd(fd, 0700);
	if (rc < 0) {
		local_err_set(err, rc, "cannot make %s owner-only: %s", path,
			      strerror(-rc));
		goto out;
	}
	if ((st.st_mode & 077) != 0)
		log_notice("%s was open to other users (mode %04o): it is "
			   "owner-only (0700) now",
			   path, (unsigned)(st.st_mode & 07777));
out:
	fdio_close(fd);
	return rc;
}

int local_state_secure(const char *state_dir, const char *id,
		       struct local_err *err)
{
	char *sb = local_state_path(state_dir, NULL, LOCAL_PATH_SANDBOXES);
	char *dir = id != NULL ? local_state_path(state_dir, id, LOCAL_PATH_DIR)
			       : NULL;
	int rc;

	rc = make_private(state_dir, err);
	if (rc == 0)
		rc = make_private(sb, err);
	if (rc == 0 && dir != NULL)
		rc = make_private(dir, err);
	free(sb);
	free(dir);
	return rc;
}

int local_state_prepare(const char *state_dir, struct local_err *err)
{
	char *sb = local_state_path(state_dir, NULL, LOCAL_PATH_SANDBOXES);
	int rc;

	rc = mkdirs(sb, 0700);
	if (rc < 0)
		local_err_set(err, rc, "cannot create %s: %s", sb,
			      strerror(-rc));
	else
		rc = local_state_secure(state_dir, NULL, err);
	free(sb);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int local_state_list(const char *state_dir, char ***ids, size_t *n)
{
	char *sb = local_state_path(state_dir, NULL, LOCAL_PATH_SANDBOXES);
	char **v = NULL;
	size_t count = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0;

	d = opendir(sb);
	if (d == NULL) {
		rc = errno == ENOENT ? 0 : -errno;
		goto out;
	}
	while ((de = readdir(d)) != NULL) {
		if (!local_state_id_valid(de->d_name))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
			    0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (count == cap) {
			cap = cap ? cap * 2 : 16;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[count++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (count > 1)
		qsort(v, count, sizeof(*v), cmp_str);
out:
	free(sb);
	if (rc < 0) {
		strv_free(v, count);
		return rc;
	}
	*ids = v;
	*n = count;
	return 0;
}

/* ---- records ------------------------------------------------------------ */

int local_state_read(const char *state_dir, const char *id,
		     struct proto_record *out, struct local_err *err)
{
	struct buf b = BUF_INIT(PROTO_RECORD_MAX_BYTES);
	struct proto_record rec;
	char *path = NULL, *dir = NULL;
	const char *why = NULL;
	struct stat st;
	int fd = -1, rc;

	if (!local_state_id_valid(id))
		return local_err_set(err, -EINVAL,
				     "invalid sandbox name '%s': use 1 to %d "
				     "letters, digits, '_' or '-'",
				     id ? id : "", LOCAL_ID_MAX);
	path = local_state_path(state_dir, id, LOCAL_PATH_RECORD);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		dir = local_state_path(state_dir, id, LOCAL_PATH_DIR);
		if (rc == -ENOENT && stat(dir, &st) < 0)
			local_err_set(err, rc, "no sandbox '%s' in %s", id,
				      state_dir);
		else if (rc == -ENOENT)
			local_err_set(err, rc,
				      "sandbox '%s' has no record yet (%s)", id,
				      path);
		else if (rc == -ELOOP)
			rc = local_err_set(err, -EBADMSG,
					   "corrupt record %s: a symlink",
					   path);
		else
			local_err_set(err, rc, "cannot read %s: %s", path,
				      strerror(-rc));
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = local_err_set(err, -EBADMSG,
				   "corrupt record %s: not a regular file",
				   path);
		goto out;
	}
	rc = fdio_read_buf(fd, &b, 8192);
	if (rc == -EFBIG) {
		rc = local_err_set(err, -EBADMSG,
				   "corrupt record %s: larger than %lu bytes",
				   path, PROTO_RECORD_MAX_BYTES);
		goto out;
	}
	if (rc < 0) {
		local_err_set(err, rc, "cannot read %s: %s", path,
			      strerror(-rc));
		goto out;
	}
	rc = proto_record_decode(b.data, b.len, &rec, &why);
	if (rc == -ENOMEM) {
		local_err_set(err, rc, "out of memory");
		goto out;
	}
	if (rc < 0) {
		rc = local_err_set(err, -EBADMSG, "corrupt record %s: %s", path,
				   why);
		goto out;
	}
	if (rec.state == PROTO_RECORD_UNKNOWN)
		rc = local_err_set(err, -EBADMSG,
				   "corrupt record %s: unknown \"state\"",
				   path);
	else if (strcmp(rec.id, id) != 0)
		rc = local_err_set(err, -EBADMSG,
				   "corrupt record %s: \"id\" is not the "
				   "directory's name '%s'",
				   path, id);
	if (rc < 0) {
		proto_record_cleanup(&rec);
		goto out;
	}
	*out = rec;
out:
	fdio_close(fd);
	buf_cleanup(&b);
	free(path);
	free(dir);
	return rc;
}

int local_state_write(const char *state_dir, const struct proto_record *rec,
		      struct local_err *err)
{
	struct buf b = BUF_INIT(PROTO_RECORD_MAX_BYTES);
	char *path = NULL;
	int rc;

	if (!local_state_id_valid(rec->id))
		return local_err_set(err, -EINVAL, "invalid sandbox name '%s'",
				     rec->id ? rec->id : "");
	rc = proto_record_encode(rec, &b);
	if (rc < 0) {
		local_err_set(err, rc, "cannot encode the record of '%s': %s",
			      rec->id, strerror(-rc));
		goto out;
	}
	path = local_state_path(state_dir, rec->id, LOCAL_PATH_RECORD);
	rc = file_write_atomic(path, b.data, b.len, 0600);
	if (rc < 0)
		local_err_set(err, rc, "cannot write %s: %s", path,
			      strerror(-rc));
out:
	free(path);
	buf_cleanup(&b);
	return rc;
}

/* ---- the lock ----------------------------------------------------------- */

int local_state_lock(const char *state_dir, const char *id, long timeout_ms,
		     int *fdp)
{
	char *path = local_state_path(state_dir, id, LOCAL_PATH_LOCK);
	long long deadline =
		clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	struct stat fst, pst;
	int fd = -1, rc;

	for (;;) {
		if (fd < 0) {
			fd = open(path,
				  O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
				  0600);
			if (fd < 0) {
				rc = -errno;
				goto out;
			}
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			/*
			 * rm renames the sandbox away and removes it while
			 * holding the lock: a waiter then holds a lock on a
			 * file nobody else will ever open.
			 */
			if (fstat(fd, &fst) == 0 && fst.st_nlink > 0 &&
			    stat(path, &pst) == 0 && pst.st_dev == fst.st_dev &&
			    pst.st_ino == fst.st_ino) {
				*fdp = fd;
				fd = -1;
				rc = 0;
				goto out;
			}
			close(fd);
			fd = -1;
			if (stat(path, &pst) < 0 && errno == ENOENT) {
				rc = -ENOENT;
				goto out;
			}
			continue;
		}
		if (errno != EWOULDBLOCK && errno != EINTR) {
			rc = -errno;
			goto out;
		}
		if (timeout_ms <= 0) {
			rc = -EWOULDBLOCK;
			goto out;
		}
		if (clock_mono_ms() >= deadline) {
			rc = -ETIMEDOUT;
			goto out;
		}
		usleep(20000);
	}
out:
	fdio_close(fd);
	free(path);
	return rc;
}

void local_state_unlock(int fd)
{
	fdio_close(fd);
}

/* ---- removal ------------------------------------------------------------ */

/* Deeper directories are moved up to the top instead of opened, so the
 * walk never holds more than this many descriptors. */
#define RM_DEPTH_MAX 64

struct rm_walk {
	int topfd;
	dev_t dev;
	unsigned moved;
	bool found; /* something was seen in this pass */
	char where[256]; /* the entry that failed, for the message */
};

/*
 * Open the directory name in dfd for reading, never through a symlink:
 * an O_PATH descriptor of the directory itself comes first (O_NOFOLLOW,
 * O_DIRECTORY), a directory without owner rwx is opened up through it,
 * and the directory is then read through it. Whatever is swapped in at
 * name meanwhile, only that directory is touched. -ENOTDIR or -ELOOP
 * when name is not a directory (any more), -EXDEV when it is on another
 * file system.
 */
static int open_dir_here(int dfd, const char *name, dev_t dev, int *out)
{
	struct stat st;
	int pfd, fd, rc = 0;

	pfd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (dev != 0 && st.st_dev != dev) {
		rc = -EXDEV;
		goto out;
	}
	if ((st.st_mode & S_IRWXU) != S_IRWXU) {
		rc = local_state_chmod_fd(pfd, (st.st_mode & 07777) | S_IRWXU);
		if (rc < 0)
			goto out;
	}
	fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	*out = fd;
out:
	close(pfd);
	return rc;
}

/* Move name (a directory) from dfd to a fresh ".rm-deep-N" in the top
 * directory; a name left there by an earlier, interrupted removal is
 * skipped, never replaced. */
static int rm_move_up(struct rm_walk *w, int dfd, const char *name)
{
	char to[64];

	for (;;) {
		snprintf(to, sizeof(to), ".rm-deep-%u", w->moved++);
		if (renameat2(dfd, name, w->topfd, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
}

static int rm_contents(struct rm_walk *w, int dfd, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int cfd, rc = 0;

	d = dirstream_open(dfd);
	if (d == NULL)
		return -errno;
	while (rc == 0 && (de = dirstream_next(d)) != NULL) {
		w->found = true;
		snprintf(w->where, sizeof(w->where), "%s", de->d_name);
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = -errno;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			/* A directory swapped in meanwhile stays for the
			 * next pass. */
			if (unlinkat(dfd, de->d_name, 0) < 0 &&
			    errno != ENOENT && errno != EISDIR)
				rc = -errno;
			continue;
		}
		if (st.st_dev != w->dev) {
			rc = -EXDEV;
			break;
		}
		if (depth >= RM_DEPTH_MAX) {
			rc = rm_move_up(w, dfd, de->d_name);
			continue;
		}
		rc = open_dir_here(dfd, de->d_name, w->dev, &cfd);
		if (rc == -ENOTDIR || rc == -ELOOP || rc == -ENOENT) {
			/* Replaced by a file or a symlink since the stat:
			 * the next pass removes what is there. */
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		rc = rm_contents(w, cfd, depth + 1);
		close(cfd);
		if (rc == 0 && unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0 &&
		    errno != ENOENT)
			rc = -errno;
	}
	closedir(d);
	return rc;
}

int local_state_rmtree(const char *path, struct local_err *err)
{
	struct rm_walk w;
	struct stat st;
	int rc;

	memset(&w, 0, sizeof(w));
	w.topfd = -1;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode)) {
		rc = unlink(path) < 0 ? -errno : 0;
		goto out;
	}
	w.dev = st.st_dev;
	rc = open_dir_here(AT_FDCWD, path, w.dev, &w.topfd);
	if (rc < 0)
		goto out;
	/* Directories moved up land in the top one, and entries swapped
	 * during a pass wait for the next: walk until a pass finds nothing
	 * left. */
	do {
		w.found = false;
		rc = rm_contents(&w, w.topfd, 0);
	} while (rc == 0 && w.found);
	close(w.topfd);
	if (rc == 0 && rmdir(path) < 0)
		rc = -errno;
out:
	if (rc == -EXDEV)
		local_err_set(
			err, rc,
			"cannot remove %s: '%s' is a mount point below it",
			path, w.where);
	else if (rc < 0)
		local_err_set(err, rc, "cannot remove %s (at '%s'): %s", path,
			      w.where, strerror(-rc));
	return rc;
}

/* ---- routes ------------------------------------------------------------- */

bool local_state_route_valid(const char *url, unsigned *port, bool *ipv6)
{
	static const char v4[] = "http://127.0.0.1:";
	static const char v6[] = "http://[::1]:";
	const char *p;
	unsigned long v = 0;
	bool six;
	size_t digits = 0;

	if (url == NULL)
		return false;
	if (strncmp(url, v4, sizeof(v4) - 1) == 0) {
		p = url + sizeof(v4) - 1;
		six = false;
	} else if (strncmp(url, v6, sizeof(v6) - 1) == 0) {
		p = url + sizeof(v6) - 1;
		six = true;
	} else {
		return false;
	}
	if (*p == '0')
		return false;
	while (*p >= '0' && *p <= '9' && digits < 6) {
		v = v * 10 + (unsigned long)(*p - '0');
		p++;
		digits++;
	}
	if (digits == 0 || v == 0 || v > 65535 || strcmp(p, "/") != 0)
		return false;
	if (port != NULL)
		*port = (unsigned)v;
	if (ipv6 != NULL)
		*ipv6 = six;
	return true;
}

bool local_state_route_socket(const char *state_dir, const char *url,
			      char *path, size_t size)
{
	char p[PATH_MAX];
	size_t n = strlen(state_dir);

	if (unixurl_parse(url, p, sizeof(p)) < 0)
		return false;
	/* Lexically beneath the state directory: unixurl_parse refuses
	 * "." and ".." components. */
	if (strncmp(p, state_dir, n) != 0 || p[n] != '/' ||
	    (n == 1 && state_dir[0] == '/'))
		return false;
	if (path != NULL) {
		if (strlen(p) >= size)
			return false;
		memcpy(path, p, strlen(p) + 1);
	}
	return true;
}
