/* SPDX-License-Identifier: MIT */
/*
 * resolve: openat2 beneath the root, and per-thread file credentials.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#else
struct open_how {
	unsigned long long flags, mode, resolve;
};
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#endif

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

#include "agent/resolve.h"

int agent_resolve_open(const struct agent *a, const char *rel, int flags,
		       mode_t mode, enum resolve_mode how)
{
	struct open_how oh;
	int tries = 0;
	long fd;

	memset(&oh, 0, sizeof(oh));
	oh.flags = (unsigned long long)(flags | O_CLOEXEC);
	if (flags & (O_CREAT | O_TMPFILE))
		oh.mode = mode;
	oh.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	if (how == RESOLVE_V1)
		oh.resolve |= RESOLVE_NO_SYMLINKS;
	/* openat2 answers EAGAIN when a concurrent rename raced the
	 * resolution; a few retries settle it, a livelock must not. */
	do {
		fd = syscall(SYS_openat2, a->root_fd, *rel ? rel : ".", &oh,
			     sizeof(oh));
	} while (fd < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 16);
	if (fd < 0) {
		int err = errno;

		/* v1 refuses every symlink and every escape the same way. */
		if (how == RESOLVE_V1 && (err == EXDEV || err == ELOOP))
			return -ELOOP;
		return -err;
	}
	return (int)fd;
}

int agent_resolve_parent(const struct agent *a, const char *rel,
			 const char **name, char *scratch, size_t scratchsz,
			 enum resolve_mode how)
{
	const char *slash = strrchr(rel, '/');
	size_t plen;

	if (*rel == '\0')
		return -EINVAL;
	if (slash == NULL) {
		*name = rel;
		return agent_resolve_open(a, "", O_PATH | O_DIRECTORY, 0, how);
	}
	plen = (size_t)(slash - rel);
	if (plen + 1 > scratchsz)
		return -ENAMETOOLONG;
	memcpy(scratch, rel, plen);
	scratch[plen] = '\0';
	*name = slash + 1;
	return agent_resolve_open(a, scratch, O_PATH | O_DIRECTORY, 0, how);
}

/*
 * The agent's clients hold the per-boot credential: they are the sandbox's
 * owner, who can do anything to the session root on the host. When that
 * owner is root, the file routes keep root's access to the files
 * (overriding modes and owners, as root's own tools do), though new files
 * are the sandbox user's (fsuid): a read-only directory can be filled,
 * as rsync -a into a native copy does (SEMANTICS.md, ownership). Paths
 * stay confined beneath the root by openat2 whatever the access.
 * setfsuid dropped these from the thread's effective set; the permitted
 * set still holds them. Per thread, like the fs ids.
 */
static int owner_access(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	uint32_t want = (1U << CAP_DAC_OVERRIDE) | (1U << CAP_DAC_READ_SEARCH) |
			(1U << CAP_FOWNER);

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	if ((d[0].permitted & want) != want)
		return -1;
	d[0].effective |= want;
	return (int)syscall(SYS_capset, &h, d);
}

int agent_resolve_thread_creds(const struct agent *a)
{
	static __thread bool done;

	if (done || !a->cfg.drop_privileges)
		return 0;
	/* Supplementary groups are per thread in the kernel; the raw syscall
	 * drops them for this thread only (glibc's wrapper would change every
	 * thread). setfsgid comes before setfsuid, which may drop the
	 * capability to change it. The calls return the previous value, so
	 * read back to confirm. */
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		return -EPERM;
	setfsgid(a->cfg.exec_gid);
	setfsuid(a->cfg.exec_uid);
	if ((gid_t)setfsgid((gid_t)-1) != a->cfg.exec_gid ||
	    (uid_t)setfsuid((uid_t)-1) != a->cfg.exec_uid)
		return -EPERM;
	if (owner_access() < 0)
		return -EPERM;
	done = true;
	return 0;
}
