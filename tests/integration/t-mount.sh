#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-mount: the mount itself. Bad invocations fail at once with a clear
# message, a non-zero status and no mount left behind (a missing state
# directory, an unknown provider, a bad option value, no mountpoint);
# --help and --version; without -f sandboxfs daemonizes and
# fusermount3 -u stops it; mount(8) and df show local:STATE as the
# source; a mountpoint already mounted is refused; -o log=FILE logs there
# with times; the /etc/fstab way, mount -t fuse.sandboxfs, works through
# mount.fuse3 with fstab-only options and a local:STATE source; -o ro
# refuses every change with EROFS.

. "$(dirname "$0")/lib.sh"
programs_for_others

need_fuse

sbx_create a
sbx_start a
printf 'hello\n' >"$(sbx_root a)/hello"

# bad_mount WHAT PATTERN ARGS...: sandboxfs ARGS must fail within 10 s,
# say PATTERN, and leave nothing mounted.
bad_mount() {
	_what=$1
	_pat=$2
	shift 2
	_t0=$(now_ms)
	with_timeout 20 "$SBFS_MOUNT" "$@" >"$TMP/out" 2>"$TMP/err"
	_rc=$?
	_ms=$(($(now_ms) - _t0))
	[ "$_rc" -ne 0 ] || fail "$_what: exit status 0"
	[ "$_rc" -ne 124 ] || fail "$_what: did not return"
	[ "$_ms" -lt $((10000 * SLOW)) ] || fail "$_what: took $_ms ms"
	grep -Eq -- "$_pat" "$TMP/err" ||
		fail "$_what: the message does not match '$_pat': $(cat "$TMP/err")"
	if is_mounted "$MNT"; then
		fail "$_what: left $MNT mounted"
		fusermount3 -u -z "$MNT"
	fi
}

bad_mount "a missing state directory" "$TMP/nonexistent" \
	-f -o "state_dir=$TMP/nonexistent" "$MNT"
bad_mount "a missing state directory, daemonizing" "$TMP/nonexistent" \
	-o "state_dir=$TMP/nonexistent" "$MNT"
bad_mount "an unknown provider" "nosuchprovider" \
	-f -o "state_dir=$STATE,provider=nosuchprovider" "$MNT"
bad_mount "a bad timeout" "timeout" -f -o "state_dir=$STATE,timeout=soon" "$MNT"
bad_mount "a zero timeout" "timeout" -f -o "state_dir=$STATE,timeout=0" "$MNT"
bad_mount "no mountpoint" "mountpoint" -f -o "state_dir=$STATE"
bad_mount "a missing mountpoint" "$TMP/no-such-dir|No such file" \
	-f -o "state_dir=$STATE" "$TMP/no-such-dir"
with_timeout 10 "$SBFS_MOUNT" -f -o "state_dir=$STATE" >/dev/null 2>&1
assert_eq 2 "$?" "the exit status of a usage error"

# ---- --help, --version ---------------------------------------------------------------------
with_timeout 10 "$SBFS_MOUNT" --help >"$TMP/help" 2>&1 || fail "--help exited non-zero"
for o in state_dir timeout connect_timeout noautoresume allow_other; do
	grep -q -- "$o" "$TMP/help" || fail "--help does not mention $o"
done
with_timeout 10 "$SBFS_MOUNT" --version >"$TMP/version" 2>&1 || fail "--version exited non-zero"
grep -q '^sandboxfs [0-9]' "$TMP/version" || fail "--version: $(cat "$TMP/version")"
is_mounted "$MNT" && fail "--help or --version mounted something"

# ---- the state directory from the environment -------------------------------------------
with_timeout 20 env SANDBOXFS_STATE_DIR="$STATE" "$SBFS_MOUNT" "$MNT" 2>"$TMP/err" ||
	fail "mount with SANDBOXFS_STATE_DIR: $(cat "$TMP/err")"
if is_mounted "$MNT"; then
	assert_content "$MNT/a/files/hello" hello "a file, state from the environment"
	with_timeout 10 fusermount3 -u "$MNT" || fail "fusermount3 -u"
fi

# ---- the source, df, a mountpoint taken, a log file ----------------------------------------
sbx_create odd
sed -i 's/"native-file-v1"/"native-file-v9"/' "$STATE/sandboxes/odd/sandbox.json"
with_timeout 20 "$SBFS_MOUNT" -o "state_dir=$STATE,timeout=5,log=$TMP/daemon.log" "$MNT" \
	2>"$TMP/err" || fail "mount with a log file: $(cat "$TMP/err")"
if is_mounted "$MNT"; then
	src=$(awk -v m="$MNT" '$5 == m { for (i = 7; i < NF; i++) if ($i == "-") print $(i + 2) }' \
		/proc/self/mountinfo)
	assert_eq "local:$STATE" "$src" "the mount's source"
	assert_eq "local:$STATE" "$(df --output=source "$MNT" | sed 1d)" "df's source"
	[ "$(df --output=size "$MNT" | sed 1d | tr -d ' ')" -gt 0 ] ||
		fail "df shows no size at the top of the mount"
	with_timeout 20 "$SBFS_MOUNT" -f -o "state_dir=$STATE" "$MNT" >"$TMP/out" 2>"$TMP/err" &&
		fail "a second mount on a mounted mountpoint succeeded"
	grep -q 'already a mount point' "$TMP/err" ||
		fail "a second mount's message: $(cat "$TMP/err")"
	assert_eq 1 "$(grep -c " $MNT " /proc/self/mountinfo)" "mounts on the mountpoint"
	# A sandbox whose transport label is one this client does not know
	# fails closed, with a warning in the log file, with its time.
	assert_errno 'Protocol error' ls "$MNT/odd/files"
	wait_for 10 grep -q 'warning: sandbox odd:.*label' "$TMP/daemon.log" ||
		fail "the log file has no warning: $(cat "$TMP/daemon.log")"
	grep -Eq '^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' "$TMP/daemon.log" ||
		fail "the log file's lines have no time: $(head -n 2 "$TMP/daemon.log")"
	with_timeout 10 fusermount3 -u "$MNT" || fail "fusermount3 -u"
	wait_for 10 sh -c "! grep -q ' $MNT ' /proc/self/mountinfo"
fi
[ "$(stat -c %a "$TMP/daemon.log")" = 600 ] || fail "the log file is not 0600"

# ---- -o ro ---------------------------------------------------------------------------------
mount_fs ro
assert_content "$MNT/a/files/hello" hello "a read on a read-only mount"
assert_errno 'Read-only file system' sh -c "echo x >'$MNT/a/files/new'"
assert_errno 'Read-only file system' sh -c "echo x >>'$MNT/a/files/hello'"
assert_errno 'Read-only file system' rm "$MNT/a/files/hello"
assert_errno 'Read-only file system' mkdir "$MNT/a/files/d"
assert_content "$(sbx_root a)/hello" hello "the file after refused writes"
umount_fs

# ---- daemonized ---------------------------------------------------------------------------
# Without -f the command returns once the mount is up.
with_timeout 20 "$SBFS_MOUNT" -o "state_dir=$STATE,timeout=5" "$MNT" >"$TMP/out" 2>&1
rc=$?
assert_eq 0 "$rc" "sandboxfs without -f: exit status"
is_mounted "$MNT" || fail "sandboxfs without -f: nothing mounted"
# The daemon: the sandboxfs process serving this mountpoint.
daemon=""
for p in /proc/[0-9]*; do
	{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "sandboxfs.* $MNT" || continue
	[ "${p#/proc/}" = "$$" ] && continue
	daemon=${p#/proc/}
done
[ -n "$daemon" ] || fail "no daemon process found"
[ -n "$daemon" ] && BG_PIDS="$BG_PIDS $daemon"
assert_content "$MNT/a/files/hello" hello "a file through the daemonized mount"
with_timeout 10 fusermount3 -u "$MNT" || fail "fusermount3 -u of the daemonized mount"
if [ -n "$daemon" ]; then
	wait_gone "$daemon" 10 || fail "the daemon $daemon did not exit after fusermount3 -u"
fi
is_mounted "$MNT" && fail "still mounted after fusermount3 -u"

# ---- mount -t fuse.sandboxfs (an /etc/fstab line) ----------------------------------------
# fstab_check WHAT: the mount made by mount(8) or mount.fuse3 works and
# unmounts.
fstab_check() {
	if ! is_mounted "$MNT"; then
		fail "$1: nothing mounted"
		return
	fi
	# The type follows the " - " separator (optional fields come before).
	awk -v m="$MNT" '$5 == m { for (i = 7; i < NF; i++) if ($i == "-") print $(i + 1) }' \
		/proc/self/mountinfo >"$TMP/fstype"
	assert_content "$TMP/fstype" "$2" "$1: the file system type"
	assert_content "$MNT/a/files/hello" hello "$1: a file"
	out=$(with_timeout 30 sh -c "echo 'echo via-fstab' >'$MNT/a/exec' && cat '$MNT/a/jobs/latest/stdout'")
	assert_eq via-fstab "$out" "$1: a job"
	with_timeout 10 umount "$MNT" || fail "$1: umount"
	wait_for 10 sh -c "! awk -v m='$MNT' '\$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo" ||
		fail "$1: still mounted after umount"
}

# Options only fstab uses must be accepted.
fstab_opts="state_dir=$STATE,timeout=5,_netdev,nofail,x-systemd.automount"
if [ "$(id -u)" -ne 0 ]; then
	note "not root: mount(8) with a file system type is root's"
else
	m3=$(command -v mount.fuse3 || echo /sbin/mount.fuse3)
	[ -x "$m3" ] || skip "mount.fuse3 is not installed (package fuse3)"
	# The classic line "/path/to/sandboxfs#src  /mnt  fuse  options".
	with_timeout 30 mount -t fuse "$SBFS_MOUNT#sandboxfs" "$MNT" -o "$fstab_opts" \
		>"$TMP/out" 2>&1 || fail "mount -t fuse PROGRAM#SOURCE: $(cat "$TMP/out")"
	fstab_check "mount -t fuse" fuse.sandboxfs
	# "sandboxfs  /mnt  fuse.sandboxfs  options": mount(8) runs
	# mount.fuse3, which runs sandboxfs from PATH. mount(8) gives its
	# helpers a clean PATH, so the helper is run here as mount(8) runs
	# it, with a PATH that finds the build's sandboxfs.
	mkdir "$TMP/bin"
	ln -s "$SBFS_MOUNT" "$TMP/bin/sandboxfs"
	with_timeout 30 env PATH="$TMP/bin:$PATH" "$m3" sandboxfs "$MNT" \
		-o "rw,$fstab_opts" -t fuse.sandboxfs >"$TMP/out" 2>&1 ||
		fail "mount.fuse3 -t fuse.sandboxfs: $(cat "$TMP/out")"
	fstab_check "mount.fuse3 -t fuse.sandboxfs" fuse.sandboxfs
	# "local:/state  /mnt  fuse.sandboxfs  options": the source names
	# the state directory.
	with_timeout 30 env PATH="$TMP/bin:$PATH" "$m3" "local:$STATE" "$MNT" \
		-o "rw,timeout=5,_netdev" -t fuse.sandboxfs >"$TMP/out" 2>&1 ||
		fail "mount.fuse3 local:STATE: $(cat "$TMP/out")"
	fstab_check "mount.fuse3 local:STATE" fuse.sandboxfs
fi

# ---- a user's mount ---------------------------------------------------------
# A user mounts through fusermount3, which opens /dev/fuse as the user:
# where the device is the user's to open, the mount works; where it is
# not (a container may make it root's alone), sandboxfs says so and why.
# fusermount3 wants the user in the password database: nobody is.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1 &&
	U=$(id -u nobody 2>/dev/null); then
	chmod 0711 "$TMP"
	ud=$TMP/user
	mkdir -m 0700 "$ud" && mkdir "$ud/mnt" "$ud/state" && chown -R "$U:$U" "$ud"
	as_u() {
		with_timeout 30 setpriv --reuid="$U" --regid="$U" --clear-groups "$@"
	}
	if as_u sh -c ': <>/dev/fuse' 2>/dev/null; then
		as_u "$SBFS_MOUNT" -o "state_dir=$ud/state" "$ud/mnt" >"$TMP/out" 2>&1 ||
			fail "a user's mount: $(cat "$TMP/out")"
		is_mounted "$ud/mnt" || fail "a user's mount is not there"
		as_u fusermount3 -u "$ud/mnt" || fail "a user's unmount"
	else
		as_u "$SBFS_MOUNT" -o "state_dir=$ud/state" "$ud/mnt" >"$TMP/out" 2>&1 &&
			fail "a user's mount without /dev/fuse succeeded"
		grep -q "^sandboxfs: /dev/fuse: Permission denied: a user's mount needs it readable and writable" "$TMP/out" ||
			fail "a user's mount without /dev/fuse: $(cat "$TMP/out")"
		note "/dev/fuse is root's alone here: the refusal was checked"
	fi
fi

finish
