/* SPDX-License-Identifier: MIT */
/*
 * resolve: opening paths beneath the session root, and nothing above it.
 *
 * Every filesystem access the agent makes on behalf of a request goes
 * through here: openat2(2) relative to the root descriptor with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, plus RESOLVE_NO_SYMLINKS for the
 * v1 routes (doc/protocol-v1.md 5: any symlink in any component is
 * refused). The file extension follows symlinks whose target stays
 * beneath the root (doc/protocol-ext.md 3); the kernel refuses an escape
 * with EXDEV.
 *
 * Callers pass paths already normalised by path_normalize() (relative,
 * no "..").
 *
 * Thread-safe. agent_resolve_thread_creds() changes the calling thread's
 * filesystem credentials only.
 */
#ifndef SBFS_AGENT_RESOLVE_H
#define SBFS_AGENT_RESOLVE_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <sys/types.h>

#include "agent/agent.h"

enum resolve_mode {
	RESOLVE_V1 = 0, /* no symlink in any component */
	RESOLVE_EXT, /* symlinks followed while they stay beneath */
};

/*
 * openat2(root_fd, rel, flags, mode) beneath the root. rel "" opens the
 * root itself. Returns a descriptor or a negative errno; an escape or a
 * refused symlink is -ELOOP for RESOLVE_V1 and -EXDEV for RESOLVE_EXT (the
 * caller words the refusal). O_CLOEXEC is always added.
 */
int agent_resolve_open(const struct agent *a, const char *rel, int flags,
		       mode_t mode, enum resolve_mode how);

/*
 * Open the parent directory of rel (O_PATH|O_DIRECTORY) and point *name at
 * rel's last component, for the *at() calls that must not follow the last
 * component (lstat, unlink, rename, symlink...). rel must not be the root.
 * Returns the descriptor or a negative errno as agent_resolve_open.
 */
int agent_resolve_parent(const struct agent *a, const char *rel,
			 const char **name, char *scratch, size_t scratchsz,
			 enum resolve_mode how);

/*
 * When the agent runs as root with an exec user, make the calling thread
 * act on files as that user (setfsuid/setfsgid, per thread on Linux), so
 * files the agent creates belong to the user the commands run as, while
 * keeping root's access to the files (CAP_DAC_OVERRIDE,
 * CAP_DAC_READ_SEARCH, CAP_FOWNER in the thread's effective set): the
 * clients are the sandbox's owner, root. Cheap after the first call on a
 * thread. Returns 0 or -EPERM.
 */
int agent_resolve_thread_creds(const struct agent *a);

#endif
