#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-errors: the errors a user sees (SEMANTICS.md, errors). A missing
# file is ENOENT, and costs one agent request, no credential refresh and
# no replay; a symbolic link in the sandbox that leads out of it (to
# /etc/passwd, or up with ../) is shown rewritten to stay inside the
# sandbox and never shows the host's file (symlinks=raw shows it as
# stored); the synthetic files refuse to
# be written or removed; nothing can be made above files/ (EPERM); a
# directory read as a file is EISDIR, a file used as a directory ENOTDIR;
# a path near PATH_MAX is ENOENT or ENAMETOOLONG, never EIO; mkfifo and
# mknod are EPERM.

. "$(dirname "$0")/lib.sh"

# The agent's request log tells how often it was asked.
agent_wrapper --log-level debug
one_sandbox
ALOG=$(sbx_agent_log a)
# Caches off: each stat below reaches the mount.
mount_fs -d attr_timeout=0,entry_timeout=0,negative_timeout=0

# Requests the agent served, by method and route.
requests() {
	grep -c "http: $1 " "$ALOG"
}
activations() {
	grep -c 'http: POST /v1/activate ' "$ALOG"
}

# ---- ENOENT, asked once, no refresh --------------------------------------------------
printf 'here\n' | with_timeout 30 tee "$F/present" >/dev/null || fail "write present"
assert_content "$F/present" here "a file that exists"
act0=$(activations)
assert_eq 1 "$act0" "activations before the test"
stats0=$(requests 'GET /sandboxfs/v1/stat')
assert_errno "No such file or directory" stat "$F/missing"
# The agent logs a request when it is done with it, after answering.
sleep 0.5
stats1=$(requests 'GET /sandboxfs/v1/stat')
assert_eq 1 "$((stats1 - stats0))" "agent stat requests for one missing file"
for i in 1 2 3 4 5; do
	assert_errno "No such file or directory" cat "$F/missing-$i"
done
assert_errno "No such file or directory" ls "$F/no/such/dir"
assert_errno "No such file or directory" rm "$F/missing"
sleep 0.5
assert_eq "$act0" "$(activations)" "activations after ENOENTs (a refresh activates)"
assert_eq 1 "$(grep -c 'boot 1 of' "$ALOG")" "agent boots"
assert_eq 0 "$(grep -ci 'refresh' "$LOG")" "refreshes in the daemon's log"
# Still working afterwards, without a new activation.
assert_content "$F/present" here "a file after the ENOENTs"
assert_eq "$act0" "$(activations)" "activations at the end"

# ---- links that lead out: readable, never leading out ---------------------------------
# Links made inside the sandbox (as its own user would) that lead out are
# shown rewritten to stay inside files/ (SEMANTICS.md): readlink, ls -lR
# and find work on them, and following one reaches the sandbox's own file
# of that name, never the host's.
ln -s /etc/passwd "$B/abs-passwd"
ln -s ../../../../../../../../../../../../etc/passwd "$B/up-passwd"
ln -s ../../../../../../../../../../../.. "$B/up-root"
mkdir "$B/sub"
ln -s ../../../../../../../../../../../../etc "$B/sub/up-etc"
ln -s /sandbox/present "$B/sandbox-abs"
chown -h --reference="$B" "$B/abs-passwd" "$B/up-passwd" "$B/up-root" \
	"$B/sub" "$B/sub/up-etc" "$B/sandbox-abs"
host_line=$(head -n 1 /etc/passwd)
for l in abs-passwd up-passwd up-root/etc/passwd sub/up-etc/passwd; do
	with_timeout 30 cat "$F/$l" >"$TMP/leak.out" 2>"$TMP/leak.err"
	if grep -qF "$host_line" "$TMP/leak.out"; then
		fail "cat files/$l showed the host's /etc/passwd"
	elif ! grep -q 'No such file or directory' "$TMP/leak.err"; then
		fail "cat files/$l: wanted ENOENT (no etc/passwd in the sandbox), got: $(cat "$TMP/leak.out" "$TMP/leak.err")"
	fi
done
assert_eq "etc/passwd" "$(with_timeout 30 readlink "$F/abs-passwd")" "readlink abs-passwd"
assert_eq "etc/passwd" "$(with_timeout 30 readlink "$F/up-passwd")" "readlink up-passwd"
assert_eq "." "$(with_timeout 30 readlink "$F/up-root")" "readlink up-root"
assert_eq "../etc" "$(with_timeout 30 readlink "$F/sub/up-etc")" "readlink sub/up-etc"
assert_eq "present" "$(with_timeout 30 readlink "$F/sandbox-abs")" "readlink sandbox-abs"
assert_content "$F/sandbox-abs" here "a link to /sandbox/present"
# The sandbox's own etc/passwd is what they lead to.
mkdir "$B/etc"
echo "the sandbox's own" >"$B/etc/passwd"
chown -R --reference="$B" "$B/etc"
assert_content "$F/abs-passwd" "the sandbox's own" "abs-passwd leads to the sandbox's etc/passwd"
assert_content "$F/sub/up-etc/passwd" "the sandbox's own" "sub/up-etc/passwd"
assert_ok ls -lR "$F"
assert_ok find -L "$F/sub" -type f
# A link that stays inside is shown as stored.
ln -s present "$B/inside"
assert_content "$F/inside" here "a link inside the sandbox"
assert_eq "present" "$(with_timeout 30 readlink "$F/inside")" "readlink inside"

# ---- the synthetic files ---------------------------------------------------------------
assert_errno 'Permission denied|Operation not permitted' sh -c "echo x >'$MNT/a/info'"
assert_errno 'Permission denied|Operation not permitted' sh -c "echo x >>'$MNT/a/info'"
assert_errno 'Permission denied|Operation not permitted' truncate -s 0 "$MNT/a/info"
assert_errno 'Permission denied|Operation not permitted' rm -f "$MNT/a/info"
assert_errno 'Permission denied|Operation not permitted' rm -f "$MNT/a/exec"
assert_errno 'Permission denied|Operation not permitted|Device or resource busy' \
	rmdir "$MNT/a/files"
assert_errno 'Permission denied|Operation not permitted' chmod 777 "$MNT/a/info"
grep -q '"id": *"a"' "$MNT/a/info" || fail "info changed after the refused writes"

# ---- nothing is made above files/ --------------------------------------------------------
assert_errno 'Operation not permitted' mkdir "$MNT/a/newdir"
assert_errno 'Operation not permitted' mkdir "$MNT/newsandbox"
assert_errno 'Operation not permitted' touch "$MNT/a/newfile"
assert_errno 'Operation not permitted' touch "$MNT/newfile"
assert_errno 'Operation not permitted' ln -s x "$MNT/a/newlink"
assert_errno 'Operation not permitted|Invalid cross-device link' \
	mv "$F/present" "$MNT/a/present"
[ -e "$STATE/sandboxes/newsandbox" ] && fail "mkdir MOUNT/newsandbox made a sandbox"
[ -e "$B/present" ] || fail "a refused mv lost the file"

# ---- directories and files mixed up --------------------------------------------------------
assert_errno 'Is a directory' cat "$F/sub"
assert_errno 'Not a directory' ls "$F/present/x"
assert_errno 'Not a directory' cat "$F/present/x"
assert_errno 'Is a directory' cat "$MNT/a/jobs"
assert_errno 'No such file or directory' cat "$MNT/nosuchsandbox/info"
assert_errno 'No such file or directory' ls "$MNT/a/nosuchentry"

# ---- names the sandbox cannot take, and special files ------------------------------
# A path near PATH_MAX (reached by cd, so the kernel does not count the
# mountpoint) gets ENOENT or ENAMETOOLONG, as on a local file system,
# never EIO, and costs no re-activation.
act0=$(activations)
long=$(printf 'd%.0s' $(seq 1 200))
deep=$long
for i in $(seq 1 19); do
	deep=$deep/$long
done
mkdir -p "$B/$deep" || die "mkdir the deep tree"
# The sandbox's user owns its tree.
chown -R --reference="$B" "$B/$long"
for n in 40 60 80 100; do
	x=$(printf 'x%.0s' $(seq 1 "$n"))
	with_timeout 30 sh -c "cd '$F/$deep' && stat '$x'" >/dev/null 2>"$TMP/long.err"
	grep -Eq 'No such file or directory|File name too long' "$TMP/long.err" ||
		fail "stat of a ${n}-byte name near PATH_MAX: $(cut -c1-60 "$TMP/long.err")"
	with_timeout 30 sh -c "cd '$F/$deep' && mkdir '$x'" 2>"$TMP/long.err" ||
		grep -q 'File name too long' "$TMP/long.err" ||
		fail "mkdir of a ${n}-byte name near PATH_MAX: $(cut -c1-60 "$TMP/long.err")"
done
assert_errno 'File name too long' touch "$F/$(printf 'n%.0s' $(seq 1 256))"
sleep 0.5
assert_eq "$act0" "$(activations)" "activations after long paths"
assert_errno 'Operation not permitted' mkfifo "$F/fifo"
assert_errno 'Operation not permitted' mknod "$F/null" c 1 3
[ -e "$B/fifo" ] && fail "mkfifo made a FIFO in the sandbox"

# ---- symlinks=raw shows the stored targets ---------------------------------------------
umount_fs
mount_fs -d attr_timeout=0,entry_timeout=0,negative_timeout=0,symlinks=raw
assert_eq "/etc/passwd" "$(with_timeout 30 readlink "$F/abs-passwd")" "readlink abs-passwd, raw"
assert_eq "../../../../../../../../../../../../etc" \
	"$(with_timeout 30 readlink "$F/sub/up-etc")" "readlink sub/up-etc, raw"

# The errors above are expected; the debug log names them, never as
# warnings.
allow_log 'PATH_NOT_FOUND|ENOENT|No such file'
finish
