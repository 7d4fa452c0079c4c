/* SPDX-License-Identifier: MIT */
/*
 * sandboxfs: mount a provider's sandboxes. Thin on purpose: the options
 * and the file system live in the library (fs/).
 *
 * The provider and its state are made before anything is mounted, so an
 * unusable state directory or provider fails at once with a message and
 * leaves no mount behind.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "fs/fs.h"

/* Kernel readahead for a sequential reader of a mount (KiB). */
#define SBFS_READAHEAD_KB 4096

/* The mount already at path, as "TYPE SOURCE" into what; false when path
 * is no mount point. */
static bool mounted_at(const char *path, char *what, size_t size)
{
	char line[8192], mp[4096], type[256], src[4096];
	bool found = false;
	char *abs = realpath(path, NULL);
	FILE *f;

	if (abs == NULL)
		return false;
	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL) {
		free(abs);
		return false;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		char *sep = strstr(line, " - ");

		/* "id parent MAJ:MIN root MOUNTPOINT opts ... - TYPE SRC" */
		if (sep == NULL ||
		    sscanf(line, "%*d %*d %*s %*s %4095s", mp) != 1 ||
		    sscanf(sep + 3, "%255s %4095s", type, src) != 2)
			continue;
		if (strcmp(mp, abs) == 0) {
			snprintf(what, size, "%s %s", type, src);
			found = true;
		}
	}
	fclose(f);
	free(abs);
	return found;
}

/* -d logs everything; SANDBOXFS_LOG_LEVEL=info more than notices. */
static void set_log_level(bool debug)
{
	const char *level = getenv("SANDBOXFS_LOG_LEVEL");

	if (debug)
		log_set_level(LOG_LEVEL_DEBUG);
	else if (level != NULL && strcmp(level, "info") == 0)
		log_set_level(LOG_LEVEL_INFO);
}

/* mount(8) and df show where the sandboxes come from, as sshfs shows
 * user@host:path: "-o fsname=SOURCE" among libfuse's arguments. */
static int add_fsname(struct sbfs *fs, struct fuse_args *args)
{
	char src[PATH_MAX + 32], *opt = NULL, *arg;
	int rc;

	sbfs_source(fs, src, sizeof(src));
	arg = xasprintf("fsname=%s", src);
	rc = fuse_opt_add_opt_escaped(&opt, arg);
	free(arg);
	if (rc == 0) {
		arg = xasprintf("-o%s", opt);
		rc = fuse_opt_add_arg(args, arg);
		free(arg);
	}
	free(opt);
	return rc;
}

/* Serve the mounted session until it is unmounted or a signal ends it:
 * libfuse's loop's result. */
static int serve(struct fuse_session *se, const struct fuse_cmdline_opts *cmd)
{
	struct fuse_loop_config *loop;
	int rc;

	if (cmd->singlethread)
		return fuse_session_loop(se);
	loop = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(loop, (unsigned)cmd->clone_fd);
	/* Blocked readers of running jobs hold threads: allow many. */
	fuse_loop_cfg_set_max_threads(
		loop, cmd->max_threads > 10 && cmd->max_threads <= 100000
			      ? cmd->max_threads
			      : 64);
	/* libfuse's "unset" (UINT_MAX) would only draw a warning. */
	if (cmd->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(loop, cmd->max_idle_threads);
	rc = fuse_session_loop_mt(se, loop);
	fuse_loop_cfg_destroy(loop);
	return rc;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cmd;
	struct sbfs_opts o;
	struct sbfs *fs = NULL;
	struct provider *prov = NULL;
	struct fuse_session *se = NULL;
	struct sbx_error err;
	char what[4400];
	int rc, status = 1, log_fd = -1;

	signal(SIGPIPE, SIG_IGN);
	/* Buffers of a megabyte and more come and go with every read and
	 * write (libfuse's, the readahead's): glibc's sliding mmap threshold
	 * would keep them in its heaps once freed, and the daemon's resident
	 * memory would stay at the busiest moment of its life. A fixed
	 * threshold gives them back (SEMANTICS.md, memory). */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_ARENA_MAX, 4);
	log_init("sandboxfs", LOG_LEVEL_NOTICE);
	memset(&cmd, 0, sizeof(cmd));
	rc = sbfs_opts_parse(&args, &o);
	if (rc != 0) {
		status = rc > 0 ? 0 : 2;
		goto out;
	}
	if (fuse_parse_cmdline(&args, &cmd) != 0) {
		status = 2;
		goto out;
	}
	if (cmd.mountpoint == NULL) {
		fprintf(stderr, "sandboxfs: no mountpoint given\n");
		status = 2;
		goto out;
	}
	o.foreground = cmd.foreground != 0;
	o.debug = cmd.debug != 0;
	set_log_level(o.debug);
	/* A second mount over the first would hide it, and fusermount3
	 * refuses it for users with a bare "Permission denied". */
	if (mounted_at(cmd.mountpoint, what, sizeof(what))) {
		fprintf(stderr,
			"sandboxfs: %s is already a mount point (%s): unmount "
			"it first (fusermount3 -u %s)\n",
			cmd.mountpoint, what, cmd.mountpoint);
		goto out;
	}
	/* libfuse (and fusermount3) open /dev/fuse as the user: say why a
	 * user's mount cannot work here, rather than libfuse's bare
	 * "Permission denied". */
	if (geteuid() != 0 && access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr,
			"sandboxfs: /dev/fuse: %s: a user's mount needs it "
			"readable and writable (Debian's default mode is 0666; "
			"as root: chmod 0666 /dev/fuse)\n",
			strerror(errno));
		goto out;
	}
	if (o.log_file != NULL) {
		log_fd = open(o.log_file,
			      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (log_fd < 0) {
			fprintf(stderr, "sandboxfs: -o log=%s: %s\n",
				o.log_file, strerror(errno));
			goto out;
		}
		log_use_fd(log_fd);
	}

	sbx_error_clear(&err);
	if (provider_open(&o.prov, &prov, &err) < 0 ||
	    sbfs_new(&o, prov, &fs, &err) < 0) {
		fprintf(stderr, "sandboxfs: %s\n", err.reason);
		if (log_fd >= 0)
			log_error("%s", err.reason);
		goto out;
	}
	if (!o.has_fsname && add_fsname(fs, &args) < 0)
		goto out;
	se = sbfs_session_new(fs, &args);
	if (se == NULL) {
		/* libfuse said why (an option it does not know, most
		 * likely): a usage error. */
		status = 2;
		goto out;
	}
	if (fuse_session_mount(se, cmd.mountpoint) != 0)
		goto out;
	sbfs_tune_mount(cmd.mountpoint, SBFS_READAHEAD_KB);
	if (fuse_daemonize(cmd.foreground) != 0)
		goto unmount;
	if (!cmd.foreground && log_fd < 0)
		log_use_syslog(true);
	if (fuse_set_signal_handlers(se) != 0)
		goto unmount;
	status = serve(se, &cmd) == 0 ? 0 : 1;
	fuse_remove_signal_handlers(se);
unmount:
	fuse_session_unmount(se);
out:
	if (se != NULL)
		fuse_session_destroy(se);
	sbfs_free(fs);
	free(cmd.mountpoint);
	sbfs_opts_cleanup(&o);
	fuse_opt_free_args(&args);
	if (log_fd >= 0) {
		log_use_fd(-1);
		close(log_fd);
	}
	return status;
}
