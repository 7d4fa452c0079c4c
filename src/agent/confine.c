/* SPDX-License-Identifier: MIT */
/*
 * confine: entering the box (a forked child's steps before bubblewrap),
 * the staged session root, the sandbox's cgroup and its network.
 * doc/commands.md ("Confinement", "Limits", "Network") says what they
 * give a command; this file says how.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/confine.h"
#include "agent/proc.h"
#include "agent/spawn.h"
#include "common/clock.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/sigdefault.h"
#include "common/xalloc.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

/* slirp4netns's start, until it has configured the interface. */
#define NET_READY_MS 10000
/* The route helper, and a stopping slirp4netns before SIGKILL. */
#define NET_HELPER_MS 5000
#define NET_STOP_MS 2000

/* ---- entering the box ---------------------------------------------------- */

/* Is path k itself or beneath it? */
static bool path_within(const char *path, const char *k)
{
	size_t n = strlen(k);

	if (n == 1 && k[0] == '/')
		return true;
	return strncmp(path, k, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/*
 * In a new mount namespace, detach every mount but "/", those on the
 * paths kept (and beneath them) and those above them. The namespace lives
 * as long as bubblewrap's (or slirp4netns's) process, and a copy of a
 * mount held there keeps its file system busy: a FUSE mount made on the
 * host would never see its unmount where the host's mounts do not
 * propagate (a private /). Async-signal-safe: static buffers, which are
 * the forked child's own.
 */
static int detach_others(const char *const *keep)
{
	static char text[1 << 20];
	static char *mp[8192];
	size_t len = 0, n = 0, i, k;
	ssize_t got;
	char *line;
	int fd;

	fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (len < sizeof(text) - 1 &&
	       (got = read(fd, text + len, sizeof(text) - 1 - len)) > 0)
		len += (size_t)got;
	close(fd);
	if (len >= sizeof(text) - 1) {
		errno = E2BIG;
		return -1;
	}
	text[len] = '\0';
	/* id parent major:minor root MOUNTPOINT ... */
	for (line = text; *line != '\0';) {
		char *end = strchr(line, '\n'), *f = line;

		if (end != NULL)
			*end = '\0';
		for (k = 0; k < 4 && f != NULL; k++) {
			f = strchr(f, ' ');
			if (f != NULL)
				f++;
		}
		if (f != NULL) {
			char *sp = strchr(f, ' ');

			if (sp != NULL)
				*sp = '\0';
			unescape(f);
			if (n == sizeof(mp) / sizeof(mp[0])) {
				errno = E2BIG;
				return -1;
			}
			mp[n++] = f;
		}
		if (end == NULL)
			break;
		line = end + 1;
	}
	/* Deepest first: children follow their parents in the file. A mount
	 * whose parent went first is gone with it (the call then fails). */
	for (i = n; i-- > 0;) {
		bool stay = strcmp(mp[i], "/") == 0;

		for (k = 0; !stay && keep[k] != NULL; k++)
			stay = path_within(mp[i], keep[k]) ||
			       path_within(keep[k], mp[i]);
		if (!stay)
			(void)umount2(mp[i], MNT_DETACH);
	}
	return 0;
}

/*
 * The session root at AGENT_STAGE_ROOT in a mount namespace of our own.
 * The clone is of the mount the agent opened at start (open_tree on its
 * descriptor), so nothing walks the state directory's path again; the
 * tmpfs under it exists in this namespace only, and the namespace is a
 * slave of the host's so nothing made here propagates back.
 */
static int stage_root(const struct agent_box *b)
{
	struct mount_attr attr;
	int mfd, err;

	mfd = (int)syscall(SYS_open_tree, b->root_fd, "",
			   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
				   AT_RECURSIVE);
	if (mfd < 0)
		return -1;
	/* bubblewrap binds nosuid itself; where mount_setattr is missing
	 * that remains. */
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	(void)syscall(SYS_mount_setattr, mfd, "", AT_EMPTY_PATH | AT_RECURSIVE,
		      &attr, sizeof(attr));
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
	    detach_others(b->keep) < 0 ||
	    mount("tmpfs", AGENT_STAGE_DIR, "tmpfs",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755,size=64k,nr_inodes=16") < 0 ||
	    mkdir(AGENT_STAGE_ROOT, 0755) < 0 ||
	    syscall(SYS_move_mount, mfd, "", AT_FDCWD, AGENT_STAGE_ROOT,
		    MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		err = errno;
		close(mfd);
		errno = err;
		return -1;
	}
	close(mfd);
	return 0;
}

static int set_limit(int resource, uint64_t v)
{
	struct rlimit rl;

	rl.rlim_cur = rl.rlim_max = (rlim_t)v;
	return setrlimit(resource, &rl);
}

int agent_box_enter(const struct agent_box *b, bool stage, int *step)
{
	*step = AGENT_BOX_CGROUP;
	/* "0" is the writer itself; what it starts stays in the cgroup. */
	if (b->cg_procs_fd >= 0 && write(b->cg_procs_fd, "0", 1) != 1)
		return -1;
	*step = AGENT_BOX_RLIMIT;
	if (b->nproc > 0 && set_limit(RLIMIT_NPROC, b->nproc) < 0)
		return -1;
	if (b->data > 0 && set_limit(RLIMIT_DATA, b->data) < 0)
		return -1;
	if (stage && b->stage) {
		*step = AGENT_BOX_STAGE;
		if (stage_root(b) < 0)
			return -1;
	}
	if (b->drop) {
		*step = AGENT_BOX_DROP;
		if (agent_drop_privileges(b->uid, b->gid) < 0)
			return -1;
	}
	return 0;
}

void agent_box_keep_system(const char **keep, size_t max)
{
	static const char *const sys[] = {
		"/usr",	  "/etc",   "/bin",    "/sbin", "/lib",
		"/lib64", "/lib32", "/libx32", "/proc", "/dev",
	};
	size_t i;

	for (i = 0; i < sizeof(sys) / sizeof(sys[0]) && i + 1 < max; i++)
		keep[i] = sys[i];
	keep[i] = NULL;
}

const char *agent_box_bind_source(const struct agent_box *b)
{
	return b->stage ? AGENT_STAGE_ROOT : b->root;
}

/* ---- the cgroup ------------------------------------------------------------ */

struct agent_cgroup {
	char *dir; /* the sandbox's cgroup */
	int procs_fd;
};

static int write_file(const char *dir, const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name);
	size_t len = strlen(text);
	int fd, rc = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		rc = -errno;
	close(fd);
	return rc;
}

/* Does the space-separated list in dir/name hold both controllers? */
static bool has_both(const char *dir, const char *name)
{
	char *path = xasprintf("%s/%s", dir, name), *text, *tok, *save = NULL;
	bool pids = false, memory = false;

	text = fdio_read_text(path, 8191);
	free(path);
	if (text == NULL)
		return false;
	for (tok = strtok_r(text, " \n", &save); tok != NULL;
	     tok = strtok_r(NULL, " \n", &save)) {
		pids |= strcmp(tok, "pids") == 0;
		memory |= strcmp(tok, "memory") == 0;
	}
	free(text);
	return pids && memory;
}

/* The cgroup2 mount: /sys/fs/cgroup when it is one (unified), else the
 * first one mountinfo lists (hybrid). */
static char *cgroup2_mount(void)
{
	char *text = NULL, *line, *found = NULL;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	size_t cap = 0;

	if (f == NULL)
		return NULL;
	while (getline(&text, &cap, f) > 0) {
		char *dash = strstr(text, " - ");
		char mnt[PATH_MAX];
		int i;

		if (dash == NULL || strncmp(dash + 3, "cgroup2 ", 8) != 0)
			continue;
		/* id parent major:minor root MOUNTPOINT ... */
		line = text;
		for (i = 0; i < 4 && line != NULL; i++) {
			line = strchr(line, ' ');
			if (line != NULL)
				line++;
		}
		if (line == NULL || sscanf(line, "%4095s", mnt) != 1 ||
		    strchr(mnt, '\\') != NULL)
			continue;
		if (found == NULL || strcmp(mnt, "/sys/fs/cgroup") == 0) {
			free(found);
			found = xstrdup(mnt);
		}
	}
	free(text);
	fclose(f);
	return found;
}

/* The agent's own cgroup (v2) below the mount, "" for the root. */
static char *own_cgroup(void)
{
	char *text = fdio_read_text("/proc/self/cgroup", 8191), *p, *end;
	char *out = NULL;

	if (text == NULL)
		return NULL;
	for (p = text; p != NULL && *p != '\0'; p = end ? end + 1 : NULL) {
		end = strchr(p, '\n');
		if (end != NULL)
			*end = '\0';
		if (strncmp(p, "0::/", 4) == 0) {
			out = xstrdup(p + 4);
			break;
		}
		if (end == NULL)
			break;
	}
	free(text);
	return out;
}

static int set_limits(const struct agent_config *cfg, const char *dir)
{
	char num[32];
	int rc;

	snprintf(num, sizeof(num), "%llu", (unsigned long long)cfg->pids_max);
	rc = write_file(dir, "pids.max", num);
	if (rc == 0) {
		snprintf(num, sizeof(num), "%llu",
			 (unsigned long long)cfg->memory_max);
		rc = write_file(dir, "memory.max", num);
	}
	/* Without swap accounting the file is not there, and then swap is
	 * not the sandbox's to take anyway. */
	if (rc == 0 && write_file(dir, "memory.swap.max", "0") == -EACCES)
		rc = -EACCES;
	return rc;
}

/* As root: the sandboxes' cgroup below the root of the hierarchy mnt,
 * and this sandbox's leaf in it, named by the session root (root_fd).
 * The leaf's path, or NULL with why set. */
static char *leaf_as_root(const char *mnt, int root_fd, char *why, size_t whysz)
{
	char *top = NULL, *leaf = NULL;
	struct stat st;

	if (!has_both(mnt, "cgroup.controllers")) {
		snprintf(why, whysz,
			 "the pids and memory controllers are not in %s "
			 "(bound to cgroup v1?)",
			 mnt);
		return NULL;
	}
	if (!has_both(mnt, "cgroup.subtree_control") &&
	    write_file(mnt, "cgroup.subtree_control", "+pids +memory") < 0) {
		snprintf(why, whysz, "cannot enable them in %s", mnt);
		return NULL;
	}
	top = xasprintf("%s/sandboxfs", mnt);
	if ((mkdir(top, 0755) < 0 && errno != EEXIST) ||
	    (!has_both(top, "cgroup.subtree_control") &&
	     write_file(top, "cgroup.subtree_control", "+pids +memory") < 0))
		snprintf(why, whysz, "cannot prepare %s: %s", top,
			 strerror(errno));
	else if (fstat(root_fd, &st) < 0)
		snprintf(why, whysz, "the root: %s", strerror(errno));
	else
		leaf = xasprintf("%s/root-%llx-%llx", top,
				 (unsigned long long)st.st_dev,
				 (unsigned long long)st.st_ino);
	free(top);
	return leaf;
}

/* As a user: the agent's own delegated cgroup, which the agent leaves for
 * a leaf of its own, and the sandbox's leaf beside it. The leaf's path,
 * or NULL with why set. */
static char *leaf_delegated(const char *mnt, char *why, size_t whysz)
{
	char *own = own_cgroup(), *top, *agent_leaf, *leaf = NULL;
	char pid[32];

	if (own == NULL) {
		snprintf(why, whysz, "the agent is in no cgroup v2");
		return NULL;
	}
	top = xasprintf("%s%s%s", mnt, *own ? "/" : "", own);
	agent_leaf = xasprintf("%s/cgroup.procs", top);
	if (access(top, W_OK) < 0 || access(agent_leaf, W_OK) < 0 ||
	    !has_both(top, "cgroup.controllers")) {
		snprintf(why, whysz,
			 "%s is not delegated to this user with the pids and "
			 "memory controllers",
			 top);
		goto out;
	}
	/* No process may stay in a cgroup whose controllers its children
	 * use: the agent moves into a leaf of its own. */
	free(agent_leaf);
	agent_leaf = xasprintf("%s/agent", top);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	if ((mkdir(agent_leaf, 0755) < 0 && errno != EEXIST) ||
	    write_file(agent_leaf, "cgroup.procs", pid) < 0) {
		snprintf(why, whysz, "cannot move into %s", agent_leaf);
		goto out;
	}
	if (!has_both(top, "cgroup.subtree_control") &&
	    write_file(top, "cgroup.subtree_control", "+pids +memory") < 0) {
		/* Others share the cgroup: give it back as it was. */
		(void)write_file(top, "cgroup.procs", pid);
		rmdir(agent_leaf);
		snprintf(why, whysz,
			 "%s holds other processes: the controllers cannot be "
			 "enabled below it",
			 top);
		goto out;
	}
	leaf = xasprintf("%s/sandbox", top);
out:
	free(own);
	free(top);
	free(agent_leaf);
	return leaf;
}

int agent_cgroup_open(const struct agent_config *cfg, int root_fd,
		      struct agent_cgroup **out, char *why, size_t whysz)
{
	char *mnt = cgroup2_mount(), *leaf = NULL, *procs;
	int rc = -ENOTSUP, fd;

	if (mnt == NULL) {
		snprintf(why, whysz, "no cgroup2 file system is mounted");
		return rc;
	}
	leaf = geteuid() == 0 ? leaf_as_root(mnt, root_fd, why, whysz)
			      : leaf_delegated(mnt, why, whysz);
	if (leaf == NULL)
		goto out;
	if ((mkdir(leaf, 0755) < 0 && errno != EEXIST) ||
	    set_limits(cfg, leaf) < 0) {
		snprintf(why, whysz, "cannot make %s: %s", leaf,
			 strerror(errno));
		rmdir(leaf);
		goto out;
	}
	procs = xasprintf("%s/cgroup.procs", leaf);
	fd = open(procs, O_WRONLY | O_CLOEXEC);
	free(procs);
	if (fd < 0) {
		snprintf(why, whysz, "cannot open %s/cgroup.procs: %s", leaf,
			 strerror(errno));
		rmdir(leaf);
		goto out;
	}
	*out = xcalloc(1, sizeof(**out));
	(*out)->dir = leaf;
	(*out)->procs_fd = fd;
	leaf = NULL;
	rc = 0;
out:
	free(mnt);
	free(leaf);
	return rc;
}

int agent_cgroup_procs_fd(const struct agent_cgroup *cg)
{
	return cg != NULL ? cg->procs_fd : -1;
}

const char *agent_cgroup_path(const struct agent_cgroup *cg)
{
	return cg->dir;
}

void agent_cgroup_close(struct agent_cgroup *cg)
{
	if (cg == NULL)
		return;
	close(cg->procs_fd);
	/* Empty once the zygote and its commands are gone; else it stays
	 * for the next agent of this sandbox. */
	if (rmdir(cg->dir) < 0 && errno != EBUSY)
		log_debug("limits: cannot remove %s: %s", cg->dir,
			  strerror(errno));
	free(cg->dir);
	free(cg);
}

/* ---- the network ----------------------------------------------------------- */

struct agent_net {
	pid_t pid; /* slirp4netns */
	int pidfd;
	int exit_w; /* its exit descriptor's other end */
};

/* The owner of the namespace's network: bubblewrap made the network
 * namespace in a user namespace of its own, above the one its programs
 * run in, and only that one grants the capability to change it. */
static int net_owner_fds(pid_t pid, int *netfd, int *userfd)
{
	char path[64];
	int n, u;

	snprintf(path, sizeof(path), "/proc/%ld/ns/net", (long)pid);
	n = open(path, O_RDONLY | O_CLOEXEC);
	if (n < 0)
		return -1;
	u = ioctl(n, NS_GET_USERNS);
	if (u < 0) {
		int err = errno;

		close(n);
		errno = err;
		return -1;
	}
	*netfd = n;
	*userfd = u;
	return 0;
}

/* One route of type unreachable (rtnetlink), acknowledged. */
static int add_unreachable(int nl, const char *dst, int plen, uint32_t seq)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		struct rtattr rta;
		uint32_t addr;
	} req;
	struct {
		struct nlmsghdr nh;
		struct nlmsgerr err;
		char more[64];
	} ack;
	struct sockaddr_nl to;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = RTM_NEWROUTE;
	req.nh.nlmsg_flags =
		NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
	req.nh.nlmsg_seq = seq;
	req.rt.rtm_family = AF_INET;
	req.rt.rtm_dst_len = (unsigned char)plen;
	req.rt.rtm_table = RT_TABLE_MAIN;
	req.rt.rtm_protocol = RTPROT_STATIC;
	req.rt.rtm_scope = RT_SCOPE_UNIVERSE;
	req.rt.rtm_type = RTN_UNREACHABLE;
	req.rta.rta_type = RTA_DST;
	req.rta.rta_len = RTA_LENGTH(sizeof(uint32_t));
	if (inet_pton(AF_INET, dst, &req.addr) != 1) {
		errno = EINVAL;
		return -1;
	}
	memset(&to, 0, sizeof(to));
	to.nl_family = AF_NETLINK;
	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&to,
		   sizeof(to)) != (ssize_t)sizeof(req))
		return -1;
	n = recv(nl, &ack, sizeof(ack), 0);
	if (n < (ssize_t)(sizeof(ack.nh) + sizeof(ack.err)) ||
	    ack.nh.nlmsg_type != NLMSG_ERROR) {
		errno = EPROTO;
		return -1;
	}
	if (ack.err.error != 0) {
		errno = -ack.err.error;
		return -1;
	}
	return 0;
}

/* The addresses no sandbox reaches: the link-local range (the cloud
 * metadata services at 169.254.169.254, and the hosts's own link-local
 * neighbours) and Azure's platform address. */
static const struct {
	const char *dst;
	int plen;
} blocked[] = {
	{"169.254.0.0", 16},
	{"168.63.129.16", 32},
};

/* The route helper: a child that joins the namespace's owner and network
 * and adds the routes. Exits 0, or with the errno. Async-signal-safe. */
__attribute__((noreturn)) static void route_child(const struct agent_box *b,
						  pid_t pid)
{
	struct timeval tv = {2, 0};
	int netfd, userfd, nl;
	size_t i;

	if (b->drop && agent_drop_privileges(b->uid, b->gid) < 0)
		_exit(errno ? errno : EPERM);
	if (net_owner_fds(pid, &netfd, &userfd) < 0 ||
	    setns(userfd, CLONE_NEWUSER) < 0 || setns(netfd, CLONE_NEWNET) < 0)
		_exit(errno ? errno : EPERM);
	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0)
		_exit(errno ? errno : EIO);
	setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++)
		if (add_unreachable(nl, blocked[i].dst, blocked[i].plen,
				    (uint32_t)i + 1) < 0)
			_exit(errno ? errno : EIO);
	_exit(0);
}

static int block_ranges(const struct agent_box *b, pid_t pid, char *why,
			size_t whysz)
{
	pid_t h;
	int pidfd, status;

	h = fork();
	if (h < 0) {
		snprintf(why, whysz, "fork: %s", strerror(errno));
		return -errno;
	}
	if (h == 0)
		route_child(b, pid);
	pidfd = proc_pidfd_open(h);
	status = proc_reap_bounded(h, pidfd, clock_mono_ms() + NET_HELPER_MS);
	fdio_close(pidfd);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	snprintf(why, whysz, "the unreachable routes could not be made: %s",
		 WIFEXITED(status) ? strerror(WEXITSTATUS(status))
				   : "the helper was killed");
	return WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
}

/* What slirp4netns's child needs; prepared before the fork. */
struct slirp_plan {
	const struct agent_box *b;
	pid_t pid;
	const char *const *argv;
	const char *const *keep; /* what its mount namespace keeps */
	int exit_r, ready_w, devnull;
};

/* Descriptors 3 to 6 of slirp4netns: its exit and ready descriptors,
 * then the network namespace and its owner, which it joins by the paths
 * /proc/self/fd/5 and 6. */
#define SLIRP_EXIT_FD 3
#define SLIRP_READY_FD 4
#define SLIRP_NET_FD 5
#define SLIRP_USER_FD 6

/*
 * slirp4netns opens /dev/net/tun as the exec user, which some hosts keep
 * to root (mode 0600, where no udev rule opened it). A root agent gives
 * the helper a mount namespace of its own in which /dev/net holds a node
 * of the same device that belongs to the exec user. Async-signal-safe.
 */
static int tun_for_user(const struct agent_box *b, const char *const *keep)
{
	struct stat st;

	if (stat("/dev/net/tun", &st) < 0 || !S_ISCHR(st.st_mode) ||
	    unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
	    detach_others(keep) < 0 ||
	    mount("tmpfs", "/dev/net", "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "mode=0755,size=4k,nr_inodes=4") < 0 ||
	    mknod("/dev/net/tun", S_IFCHR | 0600, st.st_rdev) < 0 ||
	    chown("/dev/net/tun", b->uid, b->gid) < 0)
		return -1;
	return 0;
}

__attribute__((noreturn)) static void slirp_child(const struct slirp_plan *p)
{
	static char *const no_env[] = {NULL};
	int netfd, userfd, step, fds[4], tmp[4], i;

	/* The agent ignores SIGPIPE and blocks SIGTERM: not its helper. */
	sig_defaults();
	/* Out of the agent's process group: a signal to it is not ours. */
	setsid();
	if ((p->b->drop && tun_for_user(p->b, p->keep) < 0) ||
	    agent_box_enter(p->b, false, &step) < 0 ||
	    net_owner_fds(p->pid, &netfd, &userfd) < 0)
		_exit(126);
	fds[0] = p->exit_r;
	fds[1] = p->ready_w;
	fds[2] = netfd;
	fds[3] = userfd;
	for (i = 0; i < 4; i++)
		if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16)) < 0)
			_exit(126);
	for (i = 0; i < 4; i++)
		if (dup2(tmp[i], SLIRP_EXIT_FD + i) < 0)
			_exit(126);
	/* What it says on success is chatter ("sent tapfd=..."), and a
	 * failure is told by its exit status. */
	if (dup2(p->devnull, 0) < 0 || dup2(p->devnull, 1) < 0 ||
	    dup2(p->devnull, 2) < 0)
		_exit(126);
	execve(p->argv[0], (char *const *)p->argv, no_env);
	_exit(127);
}

/* Whether user-mode networking can be had: 0, or an errno with why. */
static int net_usable(const struct agent_box *b, const struct agent_net_cfg *nc,
		      char *why, size_t whysz)
{
	if (nc->slirp == NULL || access(nc->slirp, X_OK) < 0) {
		snprintf(why, whysz,
			 "%s is not installed (package slirp4netns)",
			 nc->slirp ? nc->slirp : "slirp4netns");
		return -ENOENT;
	}
	if (!b->drop && access("/dev/net/tun", R_OK | W_OK) < 0) {
		snprintf(why, whysz,
			 "/dev/net/tun is not open to this user (%s), so "
			 "slirp4netns cannot make the interface",
			 strerror(errno));
		return -EACCES;
	}
	return 0;
}

/* slirp4netns's command line, its strings in the struct. */
struct slirp_args {
	char userns[32], netns[32], exitarg[32], readyarg[32];
	const char *argv[16];
};

static void slirp_args_make(const struct agent_net_cfg *nc,
			    struct slirp_args *sa)
{
	size_t argc = 0;

	snprintf(sa->exitarg, sizeof(sa->exitarg), "--exit-fd=%d",
		 SLIRP_EXIT_FD);
	snprintf(sa->readyarg, sizeof(sa->readyarg), "--ready-fd=%d",
		 SLIRP_READY_FD);
	snprintf(sa->userns, sizeof(sa->userns),
		 "--userns-path=/proc/self/fd/%d", SLIRP_USER_FD);
	snprintf(sa->netns, sizeof(sa->netns), "/proc/self/fd/%d",
		 SLIRP_NET_FD);
	sa->argv[argc++] = nc->slirp;
	sa->argv[argc++] = "--configure";
	sa->argv[argc++] = "--mtu=65520";
	sa->argv[argc++] = "--disable-host-loopback";
	/* Its own --enable-sandbox wants to be root in the user namespace
	 * it runs in, which it is not here; the filter works as any user. */
	sa->argv[argc++] = "--enable-seccomp";
	sa->argv[argc++] = sa->exitarg;
	sa->argv[argc++] = sa->readyarg;
	sa->argv[argc++] = sa->userns;
	sa->argv[argc++] = "--netns-type=path";
	sa->argv[argc++] = sa->netns;
	sa->argv[argc++] = "tap0";
	sa->argv[argc] = NULL;
}

/* Wait (bounded) for slirp4netns n to say the interface is up on its
 * ready pipe (ready_r): 0, or a negative errno with why (its death is
 * reaped). */
static int slirp_await(struct agent_net *n, int ready_r, char *why,
		       size_t whysz)
{
	int status;
	ssize_t got;
	char c = 0;

	/* It writes "1" once the interface is up; an end of file is its
	 * death. */
	got = proc_read_bounded(ready_r, &c, 1, clock_mono_ms() + NET_READY_MS);
	if (got == -ETIMEDOUT) {
		snprintf(why, whysz,
			 "slirp4netns did not configure the network "
			 "within %d ms",
			 NET_READY_MS);
		return -ETIMEDOUT;
	}
	if (got == 1)
		return 0;
	status = proc_reap_bounded(n->pid, n->pidfd,
				   clock_mono_ms() + NET_STOP_MS);
	n->pid = -1;
	snprintf(why, whysz, "slirp4netns exited at start (status %d)",
		 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return -EIO;
}

int agent_net_attach(const struct agent_box *b, const struct agent_net_cfg *nc,
		     pid_t pid, struct agent_net **out, char *why, size_t whysz)
{
	const char *keep[16];
	struct slirp_args sa;
	struct slirp_plan p;
	int exitp[2] = {-1, -1}, readyp[2] = {-1, -1}, devnull = -1;
	struct agent_net *n = NULL;
	char *dir = NULL;
	size_t nk;
	int rc;

	rc = block_ranges(b, pid, why, whysz);
	if (rc < 0 || nc->mode == AGENT_NET_NONE)
		return rc;
	rc = net_usable(b, nc, why, whysz);
	if (rc < 0)
		return rc;
	slirp_args_make(nc, &sa);
	if (pipe2(exitp, O_CLOEXEC) < 0 || pipe2(readyp, O_CLOEXEC) < 0 ||
	    (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(why, whysz, "pipe: %s", strerror(errno));
		goto out;
	}
	/* slirp4netns reads the resolver's configuration (/etc) and nothing
	 * else once it runs. */
	dir = xstrdup(nc->slirp);
	if (strrchr(dir, '/') != NULL && strrchr(dir, '/') != dir)
		*strrchr(dir, '/') = '\0';
	agent_box_keep_system(keep, sizeof(keep) / sizeof(keep[0]) - 2);
	for (nk = 0; keep[nk] != NULL; nk++)
		;
	keep[nk++] = dir;
	keep[nk] = NULL;
	memset(&p, 0, sizeof(p));
	p.b = b;
	p.pid = pid;
	p.argv = sa.argv;
	p.keep = keep;
	p.exit_r = exitp[0];
	p.ready_w = readyp[1];
	p.devnull = devnull;
	n = xcalloc(1, sizeof(*n));
	n->pidfd = -1;
	n->exit_w = -1;
	n->pid = fork();
	if (n->pid < 0) {
		rc = -errno;
		snprintf(why, whysz, "fork: %s", strerror(errno));
		goto out;
	}
	if (n->pid == 0)
		slirp_child(&p);
	n->pidfd = proc_pidfd_open(n->pid);
	n->exit_w = exitp[1];
	exitp[1] = -1;
	proc_close(&readyp[1]);
	rc = slirp_await(n, readyp[0], why, whysz);
	if (rc == 0) {
		*out = n;
		n = NULL;
	}
out:
	agent_net_detach(n);
	proc_close(&exitp[0]);
	proc_close(&exitp[1]);
	proc_close(&readyp[0]);
	proc_close(&readyp[1]);
	proc_close(&devnull);
	free(dir);
	return rc;
}

void agent_net_detach(struct agent_net *n)
{
	if (n == NULL)
		return;
	fdio_close(n->exit_w);
	if (n->pid > 0)
		proc_reap_bounded(n->pid, n->pidfd,
				  clock_mono_ms() + NET_STOP_MS);
	fdio_close(n->pidfd);
	free(n);
}
