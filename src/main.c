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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fuse.h>
#include <fuse_lowlevel.h>

#include "common/log.h"
#include "fs/fs.h"

/* Kernel readahead for a sequential reader of a mount (KiB). */
#define SBFS_READAHEAD_KB 4096

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cmd;
	struct fuse_loop_config *loop = NULL;
	struct sbfs_opts o;
	struct sbfs *fs = NULL;
	struct fuse *fuse = NULL;
	struct sbx_error err;
	char text[1024];
	int rc, status = 1;

	signal(SIGPIPE, SIG_IGN);
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
	if (o.debug)
		log_set_level(LOG_LEVEL_DEBUG);
	else if (getenv("SANDBOXFS_LOG_LEVEL") != NULL &&
		 strcmp(getenv("SANDBOXFS_LOG_LEVEL"), "info") == 0)
		log_set_level(LOG_LEVEL_INFO);

	sbx_error_clear(&err);
	if (sbfs_new(&o, &fs, &err) < 0) {
		fprintf(stderr, "sandboxfs: %s\n", err.reason);
		goto out;
	}
	fuse = fuse_new(&args, fs_operations(), sizeof(struct fuse_operations),
			fs);
	if (fuse == NULL)
		goto out;
	if (fuse_mount(fuse, cmd.mountpoint) != 0)
		goto out;
	sbfs_tune_mount(cmd.mountpoint, SBFS_READAHEAD_KB);
	if (fuse_daemonize(cmd.foreground) != 0)
		goto unmount;
	if (!cmd.foreground)
		log_use_syslog(true);
	if (fuse_set_signal_handlers(fuse_get_session(fuse)) != 0)
		goto unmount;
	if (cmd.singlethread) {
		rc = fuse_loop(fuse);
	} else {
		loop = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(loop, (unsigned)cmd.clone_fd);
		/* Blocked readers of running jobs hold threads: allow many. */
		fuse_loop_cfg_set_max_threads(
			loop, cmd.max_threads > 10 && cmd.max_threads <= 100000
				      ? cmd.max_threads
				      : 64);
		fuse_loop_cfg_set_idle_threads(loop, cmd.max_idle_threads);
		rc = fuse_loop_mt(fuse, loop);
	}
	status = rc == 0 ? 0 : 1;
	fuse_remove_signal_handlers(fuse_get_session(fuse));
unmount:
	fuse_unmount(fuse);
out:
	if (loop != NULL)
		fuse_loop_cfg_destroy(loop);
	if (fuse != NULL)
		fuse_destroy(fuse);
	sbfs_free(fs);
	free(cmd.mountpoint);
	sbfs_opts_cleanup(&o);
	fuse_opt_free_args(&args);
	(void)text;
	return status;
}
