#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-syscalls: the POSIX semantics driver (syscalls.c) run twice, once on a
# directory of the sandbox's backing root and once on a directory under
# the mount: open, read, write, pread, pwrite, ftruncate, truncate,
# O_APPEND, O_EXCL, O_TRUNC, rename (and renameat2), link, unlink, mkdir,
# rmdir, symlink, readlink, stat, chmod, utimensat, a file growing and
# shrinking under a reader (pread, mmap, copy_file_range), and the errno
# of each failing call must come out the same, line for line, with the
# caches off and with the default caches. Then the trees the runs left
# behind on disk must be the same too.

. "$(dirname "$0")/lib.sh"

[ -x "$SBFS_SYSCALLS" ] || skip "$SBFS_SYSCALLS is not built (make check builds it)"
one_sandbox
# Without caches: the comparison is of semantics, and attributes may
# otherwise be attr_timeout old (SEMANTICS.md).
mount_fs attr_timeout=0,entry_timeout=0,negative_timeout=0

# The direct run as the sandbox's user would be the same: the driver
# checks no permissions.
mkdir "$B/direct" || die "mkdir $B/direct"
with_timeout 120 "$SBFS_SYSCALLS" "$B/direct" >"$TMP/direct.out" 2>"$TMP/direct.err" ||
	die "the direct run failed: $(cat "$TMP/direct.err")"
with_timeout 30 mkdir "$MNT/a/files/mounted" || die "mkdir through the mount"
with_timeout 300 "$SBFS_SYSCALLS" "$MNT/a/files/mounted" >"$TMP/mount.out" 2>"$TMP/mount.err" ||
	fail "the run through the mount failed: $(cat "$TMP/mount.err")"

[ "$(wc -l <"$TMP/direct.out")" -gt 200 ] || fail "the direct run printed too little"
if ! diff -u "$TMP/direct.out" "$TMP/mount.out" >"$TMP/diff"; then
	fail "the mount's results differ from the backing root's:"
	head -n 120 "$TMP/diff" | sed 's/^/  /'
fi

# Again with the default caches: this process's own changes are visible
# to it at once whatever is cached (SEMANTICS.md), so nothing may differ.
umount_fs
mount_fs
with_timeout 30 mkdir "$MNT/a/files/cached" || die "mkdir through the mount"
with_timeout 300 "$SBFS_SYSCALLS" "$MNT/a/files/cached" >"$TMP/cached.out" 2>"$TMP/cached.err" ||
	fail "the run through the mount with caches failed: $(cat "$TMP/cached.err")"
if ! diff -u "$TMP/direct.out" "$TMP/cached.out" >"$TMP/diff"; then
	fail "with caches, the mount's results differ from the backing root's:"
	head -n 120 "$TMP/diff" | sed 's/^/  /'
fi

# What the mount left on disk, read directly: the same tree (the attribute
# cache plays no part here).
(cd "$B/direct" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort) >"$TMP/tree.direct"
(cd "$B/mounted" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort) >"$TMP/tree.mounted"
if ! diff -u "$TMP/tree.direct" "$TMP/tree.mounted" >"$TMP/diff"; then
	fail "the trees on disk differ:"
	head -n 60 "$TMP/diff" | sed 's/^/  /'
fi
with_timeout 60 diff -r --no-dereference "$B/direct" "$B/mounted" >"$TMP/diff" 2>&1 ||
	fail "file contents on disk differ: $(head -n 20 "$TMP/diff")"

finish
