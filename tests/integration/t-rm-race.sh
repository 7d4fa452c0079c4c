#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-rm-race: sandboxctl never follows a symlink it did not make when it
# changes modes or removes trees (doc/security.md, "sandboxctl"), and a
# removal that failed part way is finished by another rm. A process of a
# sandbox could swap a name for a symlink between sandboxctl's look at it
# and its next step; a preloaded library (swapshim) wins that race every
# time here: rm looks at a directory it must open up (mode 0500), which
# becomes a symlink to a directory outside; create --from makes a FIFO,
# which becomes a symlink to a file outside. What lies outside keeps its
# mode. Then a file system mounted inside a session root makes rm fail:
# the sandbox stays, listed as Deleting, with nothing renamed away, and
# rm finishes once it is unmounted.

. "$(dirname "$0")/lib.sh"

need_root "a file system mounted inside a session root, and create --from as root"
SHIM=$SBFS_BUILDDIR/tests/integration/swapshim.so
[ -f "$SHIM" ] || die "$SHIM is not built"
# A sanitized sandboxctl must accept a library loaded before its runtime.
SHIM_ASAN=${ASAN_OPTIONS}:verify_asan_link_order=0

mounted_under_tmp() {
	awk -v t="$TMP/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo
}
cleanup_mounts() {
	for _m in $(mounted_under_tmp); do
		umount -l "$_m" 2>/dev/null
	done
}

# ---- rm: the directory it opens up is swapped for a symlink --------------------------
mkdir "$TMP/outside"
echo keep >"$TMP/outside/f"
chmod 0500 "$TMP/outside"
sbx_create r
R=$(sbx_root r)
mkdir "$R/d"
echo x >"$R/d/x"
chmod 0500 "$R/d"
LD_PRELOAD=$SHIM SBFS_SWAP_STAT="d:$TMP/outside" ASAN_OPTIONS=$SHIM_ASAN \
	ctl rm r >"$TMP/out" 2>"$TMP/err" ||
	fail "rm with a symlink swapped in: $(cat "$TMP/err")"
assert_eq 500 "$(stat -c %a "$TMP/outside")" "the mode of the directory outside"
assert_content "$TMP/outside/f" keep "the file outside"
[ -e "$STATE/sandboxes/r" ] && fail "rm left $STATE/sandboxes/r"

# ---- create --from: the FIFO it made is swapped for a symlink ----------------------------
mkdir "$TMP/src" "$TMP/outside2"
mkfifo -m 0644 "$TMP/src/p"
echo secret >"$TMP/outside2/secret"
chmod 0600 "$TMP/outside2/secret"
if LD_PRELOAD=$SHIM SBFS_SWAP_FIFO="p:$TMP/outside2/secret" \
	ASAN_OPTIONS=$SHIM_ASAN ctl create c --from "$TMP/src" \
	>"$TMP/out" 2>"$TMP/err"; then
	fail "create --from went on past a FIFO replaced by a symlink"
fi
assert_eq "600 root" "$(stat -c '%a %U' "$TMP/outside2/secret")" \
	"the mode and owner of the file outside"
[ -e "$STATE/sandboxes/c" ] && fail "a failed create left $STATE/sandboxes/c"
# Without the race, the same copy works.
ctl create c --from "$TMP/src" >/dev/null || fail "create --from with a FIFO"
assert_eq "fifo 644" "$(stat -c '%F %a' "$(sbx_root c)/p" | sed 's/.*fifo/fifo/')" \
	"the copied FIFO"

# ---- a failed rm, retried --------------------------------------------------------------
sbx_create r2
R2=$(sbx_root r2)
mkdir "$R2/m"
mount -t tmpfs -o size=1m sbfs-test "$R2/m" || hard_error "cannot mount a tmpfs"
echo y >"$R2/m/y"
if ctl rm r2 >"$TMP/out" 2>"$TMP/err"; then
	fail "rm went through a mount point"
fi
grep -q 'mount point' "$TMP/err" || fail "rm's error: $(cat "$TMP/err")"
ctl ls >"$TMP/ls" || fail "ls after a failed rm"
assert_eq "Deleting" "$(awk '$1 == "r2" { print $2 }' "$TMP/ls")" \
	"r2 after a failed rm"
assert_eq "" "$(ls -A "$STATE/sandboxes" | grep '^\.rm-')" \
	"what a failed rm left renamed away"
assert_content "$R2/m/y" y "the file system mounted inside"
cleanup_mounts
ctl rm r2 >"$TMP/out" 2>"$TMP/err" || fail "rm again: $(cat "$TMP/err")"
assert_eq "c" "$(ls -A "$STATE/sandboxes")" "the sandboxes after rm finished"
ctl ls >"$TMP/ls"
grep -q '^r2 ' "$TMP/ls" && fail "r2 still listed"

cleanup_mounts
finish
