/* SPDX-License-Identifier: MIT */
/*
 * spawn: how the agent's commands run (spawn.h), decided once at start-up:
 * confined or not, bubblewrap's fixed layout, who a child becomes and
 * within which limits, and whether the zygote (zygote.h) starts them or a
 * bubblewrap each; and a request's working directory. Starting one
 * command is spawn_cmd.c's, reading its output spawn_run.c's.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/spawn_i.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/xalloc.h"
#include "common/strv.h"

/* How long the start-up probe may take. */
#define PROBE_TIMEOUT_MS 10000

/* ---- small helpers ------------------------------------------------------- */

int64_t agent_deadline(uint64_t ms)
{
	int64_t now = clock_mono_ms();

	if (ms > (uint64_t)(INT64_MAX - now))
		return INT64_MAX;
	return now + (int64_t)ms;
}

void agent_errno_text(int err, char *out, size_t outsz)
{
	char text[128];
	const char *s = strerror_r(err, text, sizeof(text));

	snprintf(out, outsz, "%s (os error %d)", s, err);
}

/* ---- the working directory ----------------------------------------------- */

int agent_spawn_cwd(const struct agent_spawner *sp, const char *cwd,
		    bool has_nul, char **rel, char *reason, size_t reasonsz)
{
	size_t rootlen = strlen(sp->root), n;
	char *norm = NULL, *joined = NULL, *canon = NULL;
	const char *rest;
	enum path_verdict v;
	struct stat st;
	char *cut;
	int rc = -EACCES;

	if (cwd == NULL) {
		*rel = xstrdup("");
		return 0;
	}
	n = strlen(cwd);
	if (n == 0) {
		/* "" is not the root here, whatever the file routes say. */
		snprintf(reason, reasonsz, "%s",
			 path_verdict_reason(PATH_EMPTY));
		return -EACCES;
	}
	norm = xmalloc(n + 1);
	v = path_normalize(cwd, n, true, norm, n + 1);
	if (v != PATH_OK) {
		snprintf(reason, reasonsz, "%s", path_verdict_reason(v));
		goto out;
	}
	if (has_nul) {
		/* What canonicalising a path with a NUL reports in Rust. */
		snprintf(reason, reasonsz,
			 "path could not be resolved: file name contained an "
			 "unexpected NUL byte");
		goto out;
	}
	joined = xasprintf("%s%s%s", sp->root, *norm ? "/" : "", norm);
	/* The deepest ancestor that exists, a dangling symlink included
	 * (lstat): canonicalising that one refuses it rather than letting a
	 * later write go through it. The root itself always exists. */
	cut = joined + strlen(joined);
	while (lstat(joined, &st) < 0 && cut > joined + rootlen) {
		while (cut > joined + rootlen && *cut != '/')
			cut--;
		*cut = '\0';
	}
	canon = realpath(joined, NULL);
	if (canon == NULL) {
		char text[160];

		agent_errno_text(errno, text, sizeof(text));
		snprintf(reason, reasonsz, "path could not be resolved: %s",
			 text);
		goto out;
	}
	if (strncmp(canon, sp->root, rootlen) != 0 ||
	    (canon[rootlen] != '\0' && canon[rootlen] != '/')) {
		snprintf(reason, reasonsz, "path escapes the session root");
		goto out;
	}
	/* What did not exist yet follows the canonical part unchanged. */
	rest = norm;
	if (strlen(joined) > rootlen)
		rest += strlen(joined) - rootlen - 1;
	while (*rest == '/')
		rest++;
	if (canon[rootlen] == '\0')
		*rel = xstrdup(rest);
	else if (*rest == '\0')
		*rel = xstrdup(canon + rootlen + 1);
	else
		*rel = xasprintf("%s/%s", canon + rootlen + 1, rest);
	rc = 0;
out:
	free(norm);
	free(joined);
	free(canon);
	return rc;
}

/* ---- start-up ------------------------------------------------------------ */

static void push(struct agent_spawner *sp, const char *s)
{
	sp->bwrap_head = xrealloc(sp->bwrap_head,
				  (sp->bwrap_headc + 1) * sizeof(char *));
	sp->bwrap_head[sp->bwrap_headc++] = xstrdup(s);
}

/*
 * The fixed part of the layout: the system read-only, the top-level
 * directories that are symlinks on the host (merged /usr) as the same
 * symlinks, fresh /proc, /dev and a bounded /tmp, and every namespace
 * unshared, the network's included (confine.h attaches it). Nothing else
 * of the host is visible.
 */
static void build_bwrap_head(struct agent_spawner *sp)
{
	static const char *const top[] = {"/bin",   "/sbin",  "/lib",
					  "/lib64", "/lib32", "/libx32"};
	struct stat st;
	size_t i;

	push(sp, sp->bwrap);
	push(sp, "--unshare-all");
	push(sp, "--die-with-parent");
	push(sp, "--hostname");
	push(sp, "sandbox");
	push(sp, "--ro-bind");
	push(sp, "/usr");
	push(sp, "/usr");
	push(sp, "--ro-bind");
	push(sp, "/etc");
	push(sp, "/etc");
	for (i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
		char target[PATH_MAX];
		ssize_t n;

		if (lstat(top[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(top[i], target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			push(sp, "--symlink");
			push(sp, target);
			push(sp, top[i]);
		} else if (S_ISDIR(st.st_mode)) {
			push(sp, "--ro-bind");
			push(sp, top[i]);
			push(sp, top[i]);
		}
	}
	push(sp, "--proc");
	push(sp, "/proc");
	push(sp, "--dev");
	push(sp, "/dev");
	push(sp, "--size");
	push(sp, sp->tmp_arg);
	push(sp, "--tmpfs");
	push(sp, "/tmp");
	/* A resolver configuration reached through a symlink out of /etc
	 * (systemd-resolved's) is shown at its target, whose directory the
	 * view must have. */
	if (sp->resolv_dest != NULL &&
	    strncmp(sp->resolv_dest, "/etc/", 5) != 0 &&
	    strncmp(sp->resolv_dest, "/usr/", 5) != 0) {
		char *dir = xstrdup(sp->resolv_dest),
		     *slash = strrchr(dir, '/');

		if (slash != NULL && slash != dir) {
			*slash = '\0';
			push(sp, "--dir");
			push(sp, dir);
		}
		free(dir);
	}
}

/* Where the view's resolver configuration is, for the one user-mode
 * networking needs; NULL when the host has none to replace. */
static char *resolv_target(void)
{
	struct stat st;

	if (lstat("/etc/resolv.conf", &st) < 0)
		return NULL;
	if (!S_ISLNK(st.st_mode))
		return S_ISREG(st.st_mode) ? xstrdup("/etc/resolv.conf") : NULL;
	return realpath("/etc/resolv.conf", NULL);
}

/* Collects the probe's stderr for the log. */
static int probe_output(void *ctx, enum proto_frame_type stream, uint64_t seq,
			const unsigned char *p, size_t n)
{
	struct buf *b = ctx;

	(void)seq;
	if (stream == PROTO_FRAME_STDERR && buf_append(b, p, n) < 0)
		return 0;
	return 0;
}

/* Run `true` confined, as commands will run. 0 when it worked. */
static int probe(struct agent_spawner *sp, char *why, size_t whysz)
{
	static char true_arg[] = "true";
	char *argv[] = {true_arg, NULL};
	struct proto_exec_req req = {
		argv, 1, PROBE_TIMEOUT_MS, NULL, NULL, 0, 0, false};
	struct buf err = BUF_INIT(512);
	struct agent_run_sink sink = {probe_output, &err, -1, false};
	struct agent_run_result res;
	char msg[AGENT_SPAWN_MSG_MAX];
	struct agent_cmd c;
	int rc;

	if (access(sp->bwrap, X_OK) < 0) {
		snprintf(why, whysz, "%s is not executable", sp->bwrap);
		return -ENOTSUP;
	}
	rc = agent_spawn(sp, &req, "", &c, msg);
	if (rc < 0) {
		snprintf(why, whysz, "%s", msg);
		return -ENOTSUP;
	}
	agent_run(&c, PROBE_TIMEOUT_MS, 4096, &sink, &res);
	agent_cmd_reap(&c);
	rc = 0;
	if (res.end != AGENT_RUN_EXITED || res.code != 0) {
		while (err.len > 0 && err.data[err.len - 1] == '\n')
			err.data[--err.len] = '\0';
		if (res.end == AGENT_RUN_EXITED)
			snprintf(why, whysz, "exit %" PRId32 "%s%s", res.code,
				 err.len ? ": " : "", err.len ? err.data : "");
		else
			snprintf(why, whysz, "%s: %s",
				 res.err_code ? res.err_code : "stopped",
				 res.message);
		rc = -ENOTSUP;
	}
	buf_cleanup(&err);
	return rc;
}

/*
 * Start the zygote and run the probe through it. When either fails the
 * classic path (one bubblewrap per command) is tried next, so a machine
 * where the zygote cannot work (no CAP_SYS_ADMIN for it in bubblewrap's
 * user namespace, an agent binary the exec user may not execute) keeps
 * the confinement it had.
 */
static int start_zygote(struct agent_spawner *sp, char *why, size_t whysz)
{
	struct agent_zygote_config zc = {
		sp->bwrap_head,	 sp->bwrap_headc, &sp->box, &sp->net,
		sp->resolv_dest, sp->tmp_size,	  sp->pids, sp->data,
	};
	int rc;

	if (access(sp->bwrap, X_OK) < 0) {
		snprintf(why, whysz, "%s is not executable", sp->bwrap);
		return -ENOTSUP;
	}
	rc = agent_zygote_new(&zc, &sp->zygote, why, whysz);
	if (rc == 0)
		rc = probe(sp, why, whysz);
	if (rc < 0) {
		log_info("exec: no zygote for commands (%s)", why);
		agent_zygote_free(sp->zygote);
		sp->zygote = NULL;
	}
	return rc;
}

static char *dir_of(const char *path)
{
	char *d = xstrdup(path), *slash = strrchr(d, '/');

	if (slash != NULL && slash != d)
		*slash = '\0';
	return d;
}

static void setup_keep(struct agent_spawner *sp)
{
	size_t n;

	agent_box_keep_system(sp->keep,
			      sizeof(sp->keep) / sizeof(sp->keep[0]) - 3);
	for (n = 0; sp->keep[n] != NULL; n++)
		;
	sp->keep_bwrap = dir_of(sp->bwrap);
	sp->keep[n++] = sp->keep_bwrap;
	if (sp->resolv_dest != NULL) {
		sp->keep_resolv = dir_of(sp->resolv_dest);
		sp->keep[n++] = sp->keep_resolv;
	}
	sp->keep[n] = NULL;
}

/*
 * Who a child becomes and within which limits (doc/commands.md,
 * "Limits"): the sandbox's cgroup when cgroup v2 can be used, else
 * RLIMIT_DATA for memory; RLIMIT_NPROC is the zygote's own (in the
 * sandbox's user namespace), or, for a bubblewrap per command, set
 * before it when the agent is root (the sandbox's uid is its own).
 */
static void setup_box(struct agent_spawner *sp)
{
	const struct agent_config *cfg = &sp->a->cfg;
	char why[AGENT_SPAWN_MSG_MAX + 64];

	memset(&sp->box, 0, sizeof(sp->box));
	sp->box.keep = sp->keep;
	sp->box.drop = cfg->drop_privileges;
	sp->box.uid = cfg->exec_uid;
	sp->box.gid = cfg->exec_gid;
	sp->box.root_fd = sp->a->root_fd;
	sp->box.root = sp->root;
	sp->box.cg_procs_fd = -1;
	if (!sp->confined) {
		sp->box_each = sp->box;
		return;
	}
	sp->box.stage = cfg->drop_privileges;
	if (agent_cgroup_open(cfg, sp->a->root_fd, &sp->cg, why, sizeof(why)) ==
	    0) {
		sp->box.cg_procs_fd = agent_cgroup_procs_fd(sp->cg);
		log_info("limits: cgroup %s: pids.max %llu, memory.max %llu; "
			 "/tmp and /dev/shm %llu bytes each",
			 agent_cgroup_path(sp->cg),
			 (unsigned long long)sp->pids,
			 (unsigned long long)sp->memory,
			 (unsigned long long)sp->tmp_size);
	} else {
		sp->data = sp->memory;
		log_info("limits: no cgroup (%s); RLIMIT_NPROC %llu, "
			 "RLIMIT_DATA %llu; /tmp and /dev/shm %llu bytes each",
			 why, (unsigned long long)sp->pids,
			 (unsigned long long)sp->memory,
			 (unsigned long long)sp->tmp_size);
	}
	/* A bubblewrap per command: its limits are set before it, and
	 * inherited. The zygote gives its commands theirs itself. */
	sp->box_each = sp->box;
	sp->box_each.data = sp->data;
	if (cfg->drop_privileges)
		sp->box_each.nproc = sp->pids;
}

int agent_spawner_new(const struct agent *a, struct agent_spawner **out)
{
	struct agent_spawner *sp = xcalloc(1, sizeof(*sp));
	enum agent_confine mode = a->cfg.confine;
	char why[AGENT_SPAWN_MSG_MAX + 64];
	int rc = 0;

	sp->a = a;
	sp->bwrap = a->cfg.bwrap ? a->cfg.bwrap : BWRAP_PATH;
	sp->pids = a->cfg.pids_max ? a->cfg.pids_max : SBX_DEFAULT_PIDS;
	sp->memory =
		a->cfg.memory_max ? a->cfg.memory_max : sbx_default_memory();
	sp->tmp_size = a->cfg.tmp_size ? a->cfg.tmp_size : SBX_DEFAULT_TMP_SIZE;
	snprintf(sp->tmp_arg, sizeof(sp->tmp_arg), "%llu",
		 (unsigned long long)sp->tmp_size);
	sp->net.mode = a->cfg.network;
	sp->net.slirp =
		a->cfg.slirp4netns ? a->cfg.slirp4netns : SLIRP4NETNS_PATH;
	sp->root = realpath(a->cfg.root, NULL);
	if (sp->root == NULL) {
		rc = -errno;
		log_error("exec: session root %s: %s", a->cfg.root,
			  strerror(errno));
		goto out;
	}
	if (mode == AGENT_CONFINE_NONE) {
		log_info("exec: commands run unconfined (--confine none)");
		setup_box(sp);
		goto out;
	}
	sp->confined = true;
	if (sp->net.mode == AGENT_NET_USER && access(sp->net.slirp, X_OK) == 0)
		sp->resolv_dest = resolv_target();
	setup_keep(sp);
	setup_box(sp);
	build_bwrap_head(sp);
	rc = start_zygote(sp, why, sizeof(why));
	if (rc == 0) {
		log_info("exec: commands run confined by bubblewrap (%s), "
			 "started by a zygote",
			 sp->bwrap);
		goto out;
	}
	rc = probe(sp, why, sizeof(why));
	if (rc == 0) {
		log_info("exec: commands run confined by bubblewrap (%s), one "
			 "bubblewrap each; they have no network",
			 sp->bwrap);
	} else if (mode == AGENT_CONFINE_AUTO) {
		log_info("exec: bubblewrap is not usable (%s); commands run "
			 "unconfined",
			 why);
		sp->confined = false;
		agent_cgroup_close(sp->cg);
		sp->cg = NULL;
		setup_box(sp);
		rc = 0;
	} else {
		log_error("exec: bubblewrap is not usable: %s", why);
	}
out:
	if (rc < 0) {
		agent_spawner_free(sp);
		return rc;
	}
	*out = sp;
	return 0;
}

void agent_spawner_free(struct agent_spawner *sp)
{
	if (sp == NULL)
		return;
	agent_zygote_free(sp->zygote);
	agent_cgroup_close(sp->cg);
	strv_free(sp->bwrap_head, sp->bwrap_headc);
	free(sp->resolv_dest);
	free(sp->keep_bwrap);
	free(sp->keep_resolv);
	free(sp->root);
	free(sp);
}
