#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-fsx: the random differential tester (fsx.c) on a real mount, with fixed
# seeds so that a failure replays. First the tester checks itself: the same
# runs on two native directories must agree. Then, on a local sandbox's
# mount with the default options, the same operations go to a directory of
# the mount and to a native mirror, compared after every step: 2000 steps
# of 2 workers with sizes up to 4 MiB, then a round of large files (up to
# 48 MiB, a quarter of the sizes over 1 MiB). When both agreed, after the
# unmount the sandbox's backing root must hold what the mirror holds, and
# after a remount the mount must show it again (fsx --verify-only).
#
# A difference prints fsx's report: the seed, the step, the operation,
# what each side returned, the last operations and the command that
# replays it on any mount (fsx.c says how to replay and minimize).

SBFS_TEST_TIMEOUT=${SBFS_TEST_TIMEOUT:-900}
. "$(dirname "$0")/lib.sh"

need_fuse
FSX=${SBFS_FSX:-$SBFS_BUILDDIR/tests/integration/fsx}
[ -x "$FSX" ] || skip "$FSX is not built (make check builds it)"

SMALL="--seed 1 --ops 2000 --workers 2 --max-size 4M"
LARGE="--seed 7 --ops 200 --workers 1 --max-size 48M --large 25"

# run_fsx WHAT ARGS...: run fsx, show its output, fail when it found a
# difference (exit 1) or could not run (exit 2).
run_fsx() {
	_what=$1
	shift
	with_timeout 300 "$FSX" --op-timeout 60 "$@" >"$TMP/fsx.out" 2>&1
	_fsx_rc=$?
	sed 's/^/# /' "$TMP/fsx.out"
	case $_fsx_rc in
	0) return 0 ;;
	1) fail "$_what: the two sides differ (fsx's report above)" ;;
	*) fail "$_what: fsx exited with status $_fsx_rc" ;;
	esac
	return 1
}

# ---- the tester on two native directories -----------------------------------
mkdir "$TMP/self" "$TMP/self/a" "$TMP/self/b" "$TMP/self/c" "$TMP/self/d" ||
	hard_error "mkdir in $TMP"
# shellcheck disable=SC2086 # word lists
run_fsx "the self-check, $SMALL" $SMALL "$TMP/self/a" "$TMP/self/b" ||
	die "fsx disagrees with itself on native directories: a bug of the tester"
# shellcheck disable=SC2086
run_fsx "the self-check, $LARGE" $LARGE "$TMP/self/c" "$TMP/self/d" ||
	die "fsx disagrees with itself on native directories: a bug of the tester"
rm -rf "$TMP/self"

# ---- the mount ------------------------------------------------------------------
sbx_create a
sbx_start a
mount_fs
F=$MNT/a/files/fsx
M=$TMP/mirror
with_timeout 30 mkdir "$F" "$F/small" "$F/large" || die "mkdir through the mount"
mkdir "$M" "$M/small" "$M/large" || hard_error "mkdir $M"

agreed=1
# shellcheck disable=SC2086
run_fsx "small files ($SMALL)" $SMALL "$F/small" "$M/small" || agreed=0
# shellcheck disable=SC2086
run_fsx "large files ($LARGE)" $LARGE "$F/large" "$M/large" || agreed=0
umount_fs

# A run that found a difference stopped with its operation done on one
# side only: the trees then differ by it, and comparing them again would
# only repeat it.
if [ "$agreed" -eq 0 ]; then
	note "the trees are not compared after the unmount: the runs above already differ"
	finish
fi

# What reached the sandbox: its backing root, read directly.
run_fsx "the backing root after the unmount" --verify-only \
	"$(sbx_root a)/fsx" "$M"

# And through a fresh mount (nothing cached).
mount_fs
run_fsx "the mount after a remount" --verify-only "$F" "$M"

# ---- changes made inside the sandbox ------------------------------------------
# A fifth of the steps are made in the sandbox's root on the host (fsx
# --outside), between the mount's steps, as a job or another client makes
# them: writes, appends, truncates, replacements, renames, unlinks, chmod
# and utimes, of files open through the mount too. The mount follows the
# sandbox's change events and keeps its caches for minutes, so each change
# must show through the mount within fsx's --settle-ms (2 s; events take
# milliseconds), through the descriptors opened before it as well; every
# other step is compared exactly. The same seed on a mount without events
# and with a 60 s attr_timeout must see a change stay hidden: that the
# round can fail is what makes its passing mean something.
# Files open through the mount may lose their names in the sandbox: a
# descriptor then follows its file when it was renamed, and fails (ESTALE)
# when the name went or now names another file; fsx accepts the failure
# (a call that succeeds must still agree).
OUTSIDE="--seed 3 --ops 1000 --workers 2 --max-size 1M --outside-pct 20"
# The tester first checks itself: on native directories (the outside
# directory is MOUNTDIR itself) both sides must agree.
mkdir "$TMP/self" "$TMP/self/a" "$TMP/self/b" || hard_error "mkdir in $TMP"
# shellcheck disable=SC2086 # word lists
run_fsx "the self-check, $OUTSIDE" $OUTSIDE --outside "$TMP/self/a" \
	"$TMP/self/a" "$TMP/self/b" ||
	die "fsx --outside disagrees with itself on native directories: a bug of the tester"
rm -rf "$TMP/self"
with_timeout 30 mkdir "$F/outside" "$F/outside-noevents" ||
	die "mkdir through the mount"
mkdir "$M/outside" "$M/outside-noevents" || hard_error "mkdir $M"
# shellcheck disable=SC2086
run_fsx "changes made in the sandbox ($OUTSIDE)" $OUTSIDE \
	--outside "$(sbx_root a)/fsx/outside" "$F/outside" "$M/outside"
# Sequences that once differed, as fsx --minimize left them. Seed 200: a
# file open here whose name is replaced in the sandbox, then renamed over
# by a file made here and opened before it: the stat after a write through
# the moved file saw the old file's write state (size 0).
for _seq in "--seed 200 --ops 307 --max-size 4M --steps 281-283,285-286,300,302-303,306"; do
	_d=$(echo "$_seq" | sed 's/^--seed \([0-9]*\).*/seq\1/')
	with_timeout 30 mkdir "$F/$_d" || die "mkdir through the mount"
	mkdir "$M/$_d" || hard_error "mkdir $M"
	# shellcheck disable=SC2086
	run_fsx "a sequence that once differed ($_seq)" $_seq --workers 1 \
		--outside-pct 15 --outside "$(sbx_root a)/fsx/$_d" "$F/$_d" "$M/$_d"
done
umount_fs

mount_fs noevents,attr_timeout=60
# shellcheck disable=SC2086
with_timeout 300 "$FSX" --op-timeout 60 $OUTSIDE \
	--outside "$(sbx_root a)/fsx/outside-noevents" \
	"$F/outside-noevents" "$M/outside-noevents" >"$TMP/fsx.out" 2>&1
_fsx_rc=$?
sed 's/^/# /' "$TMP/fsx.out"
if [ "$_fsx_rc" -ne 1 ] ||
	! grep -q "a change made in the sandbox did not show through the mount" \
		"$TMP/fsx.out"; then
	fail "without events and with attr_timeout=60, fsx --outside (exit $_fsx_rc) did not report a change that stayed hidden"
fi

finish
