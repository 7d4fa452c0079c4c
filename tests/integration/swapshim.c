/* SPDX-License-Identifier: MIT */
/*
 * swapshim: an LD_PRELOAD library that wins, every time, the race a
 * process of a sandbox could try to win against sandboxctl: it swaps a
 * name for a symlink between sandboxctl's look at it and its next step
 * (t-rm-race.sh).
 *
 *   SBFS_SWAP_STAT=NAME:TARGET  after an fstatat() of NAME (relative to a
 *                               directory descriptor) that found a
 *                               directory, NAME is moved to NAME.moved and
 *                               a symlink NAME -> TARGET put in its place
 *   SBFS_SWAP_FIFO=NAME:TARGET  after mkfifoat() made NAME, the FIFO is
 *                               replaced by a symlink NAME -> TARGET
 *
 * Each swap happens once per process. A test fixture, not installed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int swapped_stat, swapped_fifo;

/* NAME:TARGET from the environment variable var, when name is NAME. */
static const char *target_for(const char *var, const char *name)
{
	const char *spec = getenv(var), *colon;

	if (spec == NULL || (colon = strchr(spec, ':')) == NULL)
		return NULL;
	if (strlen(name) != (size_t)(colon - spec) ||
	    strncmp(spec, name, (size_t)(colon - spec)) != 0)
		return NULL;
	return colon + 1;
}

static void swap_in_symlink(int dfd, const char *name, const char *target,
			    int keep)
{
	char moved[4096];

	if (keep) {
		snprintf(moved, sizeof(moved), "%s.moved", name);
		renameat(dfd, name, dfd, moved);
	} else {
		unlinkat(dfd, name, 0);
	}
	symlinkat(target, dfd, name);
}

static void after_stat(int dfd, const char *name, const struct stat *st,
		       int flags, int rc)
{
	const char *target = target_for("SBFS_SWAP_STAT", name);

	if (rc == 0 && target != NULL && !swapped_stat &&
	    (flags & AT_SYMLINK_NOFOLLOW) && S_ISDIR(st->st_mode)) {
		swapped_stat = 1;
		swap_in_symlink(dfd, name, target, 1);
	}
}

int fstatat(int dfd, const char *name, struct stat *st, int flags)
{
	static int (*real)(int, const char *, struct stat *, int);
	int rc;

	if (real == NULL)
		real = (int (*)(int, const char *, struct stat *, int))dlsym(
			RTLD_NEXT, "fstatat");
	rc = real(dfd, name, st, flags);
	after_stat(dfd, name, st, flags, rc);
	return rc;
}

int mkfifoat(int dfd, const char *name, mode_t mode)
{
	static int (*real)(int, const char *, mode_t);
	const char *target = target_for("SBFS_SWAP_FIFO", name);
	int rc;

	if (real == NULL)
		real = (int (*)(int, const char *, mode_t))dlsym(RTLD_NEXT,
								 "mkfifoat");
	rc = real(dfd, name, mode);
	if (rc == 0 && target != NULL && !swapped_fifo) {
		swapped_fifo = 1;
		swap_in_symlink(dfd, name, target, 0);
	}
	return rc;
}
