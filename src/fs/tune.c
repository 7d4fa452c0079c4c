/* SPDX-License-Identifier: MIT */
/*
 * tune: kernel settings of a fresh mount that libfuse does not reach.
 *
 * The kernel caps a FUSE mount's readahead at its backing device's
 * read_ahead_kb (128 KiB by default), whatever the file system asks for
 * in its INIT answer; readahead requests of 128 KiB make a sequential
 * reader pay one FUSE round trip per 128 KiB. When we may (root), raise
 * it for this mount only, through /sys/class/bdi/MAJOR:MINOR.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fs/fs.h"

/* The device number ("MAJ:MIN") of the mount at mountpoint, read from
 * mountinfo: a stat of the mountpoint would ask the file system itself,
 * which is not serving yet. */
static int mount_dev(const char *mountpoint, char *dev, size_t size)
{
	char line[4096], mp[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int found = -ENOENT;

	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		char d[64];

		/* "id parent MAJ:MIN root mountpoint ..." */
		if (sscanf(line, "%*d %*d %63s %*s %4095s", d, mp) != 2)
			continue;
		if (strcmp(mp, mountpoint) == 0) {
			snprintf(dev, size, "%s", d);
			found = 0; /* the last match is the newest mount */
		}
	}
	fclose(f);
	return found;
}

void sbfs_tune_mount(const char *mountpoint, unsigned readahead_kb)
{
	char dev[64], path[128], val[32], *abs;
	int fd, n;

	abs = realpath(mountpoint, NULL);
	if (abs == NULL)
		return;
	if (mount_dev(abs, dev, sizeof(dev)) < 0) {
		free(abs);
		return;
	}
	free(abs);
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		log_debug("readahead stays at the kernel's default (%s: %s)",
			  path, strerror(errno));
		return;
	}
	n = snprintf(val, sizeof(val), "%u\n", readahead_kb);
	if (write(fd, val, (size_t)n) != n)
		log_debug("could not raise readahead: %s", strerror(errno));
	close(fd);
}
