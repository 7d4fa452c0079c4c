/* SPDX-License-Identifier: MIT */
/*
 * confine: the host's side of a sandbox's confinement, around bubblewrap
 * (doc/commands.md, "Confinement", "Limits", "Network"):
 *
 *  - entering the box: what a child of the agent does between fork and
 *    the exec of bubblewrap or of a helper (join the sandbox's cgroup, set
 *    the rlimits, stage the session root, drop to the exec user);
 *  - the staged root: a root agent opened the session root before it
 *    dropped anything; the child clones that mount (open_tree) into a
 *    private mount namespace of its own at AGENT_STAGE_ROOT, under a
 *    tmpfs nobody else sees, so that bubblewrap, running as the exec user,
 *    binds it without walking the state directory's path (whose
 *    directories the exec user may not search);
 *  - the sandbox's cgroup (v2): one per sandbox under a sandboxfs subtree
 *    as root, or under a delegated subtree otherwise, holding pids.max and
 *    memory.max; none where cgroup v2 or its controllers are not there;
 *  - the sandbox's network: a network namespace that bubblewrap made,
 *    attached to user-mode networking (slirp4netns) without the host's
 *    loopback, with the link-local and cloud platform addresses
 *    unreachable.
 *
 * Thread-safe: the structures are read-only once made. The functions
 * marked async-signal-safe are for a forked child of the threaded agent.
 */
#ifndef SBFS_AGENT_CONFINE_H
#define SBFS_AGENT_CONFINE_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent.h"

/* Where a root agent's child shows the session root to bubblewrap: a
 * directory of a tmpfs mounted over AGENT_STAGE_DIR in its own mount
 * namespace only. /dev/shm is everywhere, searchable by everyone, and
 * holds nothing the child runs (a bubblewrap or wrapper under /tmp must
 * stay visible). */
#define AGENT_STAGE_DIR "/dev/shm"
#define AGENT_STAGE_ROOT "/dev/shm/sandbox"

/* What a child needs to enter the box; fixed at start, borrowed. */
struct agent_box {
	bool drop; /* the agent is root: become uid/gid */
	uid_t uid;
	gid_t gid;
	int root_fd; /* the agent's O_PATH descriptor of the session root */
	const char *root; /* its canonical path (when not staged) */
	bool stage; /* root: stage the root at AGENT_STAGE_ROOT */
	int cg_procs_fd; /* -1, or the sandbox cgroup's cgroup.procs */
	uint64_t nproc; /* RLIMIT_NPROC set before the exec; 0: none */
	uint64_t data; /* RLIMIT_DATA set before the exec; 0: none */
	/* NULL-terminated: the mounts the staged namespace keeps (with
	 * what is beneath and above them); every other one is detached
	 * (confine.c). */
	const char *const *keep;
};

/* Which step of agent_box_enter failed. */
enum agent_box_step {
	AGENT_BOX_CGROUP = 1,
	AGENT_BOX_RLIMIT,
	AGENT_BOX_STAGE,
	AGENT_BOX_DROP,
};

/*
 * In a forked child, before exec: join the cgroup, set the rlimits,
 * stage the session root (when stage_root and b->stage: a new mount
 * namespace, slave to the host's, a tmpfs at AGENT_STAGE_DIR and the root
 * at AGENT_STAGE_ROOT, nosuid and nodev), then drop to the exec user
 * (agent_drop_privileges). 0, or -1 with errno set and *step the step
 * that failed. Async-signal-safe.
 */
int agent_box_enter(const struct agent_box *b, bool stage_root, int *step);

/* The system's directories a staged namespace keeps ("/usr", "/etc", the
 * library and binary directories, "/proc", "/dev"), into keep[max] with a
 * NULL after them. */
void agent_box_keep_system(const char **keep, size_t max);

/* The path bubblewrap binds at /sandbox: AGENT_STAGE_ROOT when staged,
 * else the root's own path. */
const char *agent_box_bind_source(const struct agent_box *b);

/* ---- the cgroup ----------------------------------------------------------- */

struct agent_cgroup;

/*
 * Make the sandbox's cgroup and set pids.max and memory.max (and
 * memory.swap.max 0 where there is swap accounting): as root under
 * <cgroup2>/sandboxfs/, named after the session root's device and inode;
 * otherwise only when the agent's own cgroup is delegated to it (the
 * agent then moves itself into a leaf "agent" of it and makes a sibling
 * "sandbox"). -ENOTSUP with the reason in why when cgroup v2 cannot be
 * used here (no cgroup2 mount, a controller missing, no delegation);
 * nothing is left behind then.
 */
int agent_cgroup_open(const struct agent_config *cfg, int root_fd,
		      struct agent_cgroup **out, char *why, size_t whysz)
	__attribute__((warn_unused_result));
/* Its cgroup.procs, open for writing (the cgroup's own descriptor). */
int agent_cgroup_procs_fd(const struct agent_cgroup *cg);
/* Its directory, for the log. */
const char *agent_cgroup_path(const struct agent_cgroup *cg);
/* Close it and remove the sandbox's cgroup when it is empty. NULL-safe. */
void agent_cgroup_close(struct agent_cgroup *cg);

/* ---- the network ---------------------------------------------------------- */

/* How the sandbox's network namespace is attached. */
struct agent_net_cfg {
	enum agent_network mode;
	const char *slirp; /* slirp4netns; NULL or not executable: none */
};

/* The resolver the sandbox's /etc/resolv.conf names with user-mode
 * networking: slirp4netns's DNS forwarder. */
#define AGENT_NET_RESOLV "nameserver 10.0.2.3\n"

struct agent_net;

/*
 * Attach the network namespace of process pid (a process inside
 * bubblewrap's namespaces, such as the zygote): the link-local range
 * 169.254.0.0/16 and the cloud platform address 168.63.129.16 made
 * unreachable (routes of type unreachable, which the sandbox's processes
 * have no capability to remove), then, for AGENT_NET_USER, slirp4netns
 * started on it as the exec user (--disable-host-loopback, its seccomp
 * filter; in the sandbox's cgroup), waited for until it has configured
 * the interface (bounded).
 * On failure the namespace keeps its loopback only (fail closed):
 * -ENOENT when slirp4netns is not installed, another negative errno
 * otherwise, with the reason in why; the routes may have been made.
 */
int agent_net_attach(const struct agent_box *b, const struct agent_net_cfg *nc,
		     pid_t pid, struct agent_net **out, char *why, size_t whysz)
	__attribute__((warn_unused_result));
/* Stop slirp4netns (its exit descriptor closes; SIGKILL after a bound)
 * and reap it. NULL-safe. */
void agent_net_detach(struct agent_net *n);

#endif
