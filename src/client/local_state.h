/* SPDX-License-Identifier: MIT */
/*
 * local_state: the local provider's state directory (sandboxctl(1),
 * FILES; doc/security.md, "The state directory"), as
 * sandboxctl and the mount both see it:
 *
 *   STATE/sandboxes/<id>/sandbox.json   the record, replaced atomically
 *   STATE/sandboxes/<id>/root/          the session root
 *   STATE/sandboxes/<id>/boot/          mode 0700: token, pid, agent.sock
 *   STATE/sandboxes/<id>/agent.log      the agent's stdout and stderr
 *   STATE/sandboxes/<id>/lock           flock(2) for state transitions
 *   STATE/sandboxes/<id>/agent.lock     fcntl(2) lock the agent holds
 *
 * STATE, STATE/sandboxes and every STATE/sandboxes/<id> are owner-only
 * (0700): nothing of a sandbox is reachable on the host by another user
 * (doc/security.md).
 *
 * This module resolves the directory, validates sandbox names, builds the
 * paths, lists sandboxes, reads and writes records and takes the
 * per-sandbox lock. It starts and stops nothing (local_ctl.h does), and it
 * never reads the credential.
 *
 * Errors are negative errno values; functions that take a struct
 * local_err also leave a one-line reason there (for a person, never with a
 * credential). Thread-safe: there is no shared state, and the lock is a
 * flock on a descriptor of the caller's own, so it also excludes threads
 * of one process.
 */
#ifndef SBFS_LOCAL_STATE_H
#define SBFS_LOCAL_STATE_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/proto_record.h"

#define LOCAL_ID_MAX 63
#define LOCAL_STATE_ROOT_DEFAULT "/var/lib/sandboxfs"
/* How long a state transition waits for another one by default. */
#define LOCAL_LOCK_TIMEOUT_MS 60000L

/* A reason for a person; msg is "" until set. */
struct local_err {
	char msg[512];
};

/* Set err->msg (err may be NULL); returns rc so callers can write
 * `return local_err_set(err, -ENOENT, "...")`. */
int local_err_set(struct local_err *err, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* True when id is 1..63 characters of [A-Za-z0-9_-]. */
bool local_state_id_valid(const char *id);

/*
 * Choose the state directory from explicit inputs (any may be NULL or
 * empty = unset): option, else env_dir ($SANDBOXFS_STATE_DIR), else
 * /var/lib/sandboxfs when euid is 0, else xdg_state_home/sandboxfs when
 * xdg_state_home is absolute, else home/.local/state/sandboxfs. A relative
 * option or env_dir is taken against the current directory. Returns 0 and
 * a heap string without a trailing '/', or -ENOENT when no home is known.
 */
int local_state_dir_pick(const char *option, const char *env_dir,
			 const char *xdg_state_home, const char *home,
			 uid_t euid, char **out)
	__attribute__((warn_unused_result));
/* The same from this process's environment and user (the passwd entry
 * stands in for an unset $HOME). */
int local_state_dir_resolve(const char *option, char **out)
	__attribute__((warn_unused_result));

enum local_path {
	LOCAL_PATH_SANDBOXES, /* STATE/sandboxes (id ignored) */
	LOCAL_PATH_DIR, /* STATE/sandboxes/<id> */
	LOCAL_PATH_RECORD, /* .../sandbox.json */
	LOCAL_PATH_ROOT, /* .../root */
	LOCAL_PATH_BOOT, /* .../boot */
	LOCAL_PATH_TOKEN, /* .../boot/token */
	LOCAL_PATH_PORT, /* .../boot/port */
	LOCAL_PATH_PID, /* .../boot/pid */
	LOCAL_PATH_LOG, /* .../agent.log */
	LOCAL_PATH_LOCK, /* .../lock */
	LOCAL_PATH_SOCKET, /* .../boot/agent.sock */
	LOCAL_PATH_AGENT_LOCK, /* .../agent.lock */
};

/* A heap path (free it). id must be valid (not checked here). */
char *local_state_path(const char *state_dir, const char *id,
		       enum local_path which);

/* Create STATE and STATE/sandboxes when missing, and make both
 * owner-only (local_state_secure). */
int local_state_prepare(const char *state_dir, struct local_err *err)
	__attribute__((warn_unused_result));

/*
 * Make STATE, STATE/sandboxes and (id not NULL) STATE/sandboxes/<id>
 * owner-only, mode 0700, whatever they were: a directory that was open
 * to other users is tightened with a notice (log_notice). Symlinks are
 * never followed (a symlink there fails with -ELOOP or -ENOTDIR).
 */
int local_state_secure(const char *state_dir, const char *id,
		       struct local_err *err)
	__attribute__((warn_unused_result));

/* The sandbox names present, sorted (heap array of heap strings; free with
 * strv_free). Entries that are not valid names are skipped; a missing
 * STATE/sandboxes is an empty list. */
int local_state_list(const char *state_dir, char ***ids, size_t *n)
	__attribute__((warn_unused_result));

/*
 * Read a sandbox's record: -EINVAL for an invalid name, -ENOENT when the
 * sandbox (or its record) does not exist, -EBADMSG when sandbox.json is
 * corrupt (not JSON, a missing or mistyped field, an unknown state, an id
 * that is not the directory's name, larger than PROTO_RECORD_MAX_BYTES),
 * with err naming the file and the reason.
 */
int local_state_read(const char *state_dir, const char *id,
		     struct proto_record *out, struct local_err *err)
	__attribute__((warn_unused_result));

/* Replace the record of rec->id atomically (file_write_atomic),
 * mode 0600. The sandbox directory must exist. */
int local_state_write(const char *state_dir, const struct proto_record *rec,
		      struct local_err *err)
	__attribute__((warn_unused_result));

/*
 * Take the sandbox's lock (flock LOCK_EX on STATE/sandboxes/<id>/lock),
 * waiting up to timeout_ms (0: try once). Returns 0 and the descriptor,
 * -ENOENT when the sandbox does not exist or was removed while waiting,
 * -EWOULDBLOCK (timeout 0) or -ETIMEDOUT when someone else holds it.
 * Release with local_state_unlock (closing the descriptor also does).
 */
int local_state_lock(const char *state_dir, const char *id, long timeout_ms,
		     int *fd) __attribute__((warn_unused_result));
void local_state_unlock(int fd);

/*
 * Remove a directory tree without following symlinks and without crossing
 * into another filesystem (a mount point inside fails with -EXDEV and is
 * left alone). Any depth works: the walk holds a bounded number of
 * descriptors. Directories without owner rwx are opened up first, so an
 * unprivileged owner can remove what a sandbox made read-only; the mode
 * is changed through a descriptor of the directory itself, so an entry
 * swapped for a symlink meanwhile is never followed. A removal that
 * failed part way (an unmounted file system, a permission) can be run
 * again on the same path and finishes the job.
 */
int local_state_rmtree(const char *path, struct local_err *err)
	__attribute__((warn_unused_result));

/*
 * The local route rules (doc/transport-rules.md 2): url is exactly
 * "http://127.0.0.1:PORT/" or "http://[::1]:PORT/" with PORT 1..65535 in
 * decimal without leading zeros: path "/", no user, query or fragment.
 * On true, *port and *ipv6 (either may be NULL) tell where it points.
 */
bool local_state_route_valid(const char *url, unsigned *port, bool *ipv6);

/*
 * The local rule for a Unix socket route: url is a valid http+unix URL
 * (common/unixurl.h) whose socket lies beneath state_dir (lexically: no
 * "." or ".." components, the state directory's own spelling). On true,
 * path (when not NULL) gets the socket's path.
 */
bool local_state_route_socket(const char *state_dir, const char *url,
			      char *path, size_t size);

#endif
