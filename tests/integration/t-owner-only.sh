#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-owner-only: a sandbox's state and files on the host are its owner's
# alone (doc/security.md). A second local user can list neither the state
# directory nor sandboxes/, cannot reach a session root, its files, the
# agent's log, credential or socket; no process shows a path of a sandbox
# on its command line; and a state directory an older sandboxctl left open
# (0711) is made owner-only again at the next start, with a notice.

. "$(dirname "$0")/lib.sh"
programs_for_others

need_fuse
need_root "a second local user (setpriv)"
need_cmd setpriv

OTHER=64125
AS_OTHER="setpriv --reuid=$OTHER --regid=$OTHER --clear-groups"

sbx_create a
sbx_start a
mount_fs
F=$MNT/a/files
# The sandbox's private files, made through the mount as its user makes
# them (a job's output files are the same to the host).
printf 'private data\n' >"$F/private.txt" || fail "write through the mount"
mkdir "$F/work" && printf 'job output\n' >"$F/work/result" ||
	fail "mkdir and write through the mount"
chmod 0644 "$F/private.txt" "$F/work/result"
chmod 0755 "$F/work"
R=$(sbx_root a)
D=$STATE/sandboxes/a
assert_content "$R/private.txt" "private data" "the file on the host"

for d in "$STATE" "$STATE/sandboxes" "$D"; do
	assert_eq 700 "$(stat -c %a "$d")" "the mode of $d"
done
# What the second user tries: list, read, connect.
assert_errno 'Permission denied' $AS_OTHER ls "$STATE"
assert_errno 'Permission denied' $AS_OTHER ls "$STATE/sandboxes"
assert_errno 'Permission denied' $AS_OTHER ls "$D"
assert_errno 'Permission denied' $AS_OTHER ls "$R"
assert_errno 'Permission denied' $AS_OTHER cat "$R/private.txt"
assert_errno 'Permission denied' $AS_OTHER cat "$R/work/result"
assert_errno 'Permission denied' $AS_OTHER cat "$D/agent.log"
assert_errno 'Permission denied' $AS_OTHER cat "$D/boot/token"
assert_errno 'Permission denied' $AS_OTHER stat "$D/boot/agent.sock"
if command -v curl >/dev/null 2>&1; then
	code=$($AS_OTHER curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
		--unix-socket "$D/boot/agent.sock" http://localhost/v1/health)
	assert_eq 000 "$code" "the second user's request on the agent's socket"
fi

# No process's command line shows a sandbox's path, or its credential.
token=$(cat "$D/boot/token")
for c in /proc/[0-9]*/cmdline; do
	line=$(tr '\0' ' ' <"$c" 2>/dev/null) || continue
	case $line in
	*"$STATE/sandboxes"* | *"$token"*)
		fail "a command line shows a sandbox's path: ${c%/cmdline}: $line"
		;;
	esac
done
ps -eo args | grep -F "$R" | grep -v grep &&
	fail "ps shows the session root $R"

# A state directory an older sandboxctl made (0711, 0711, 0711) is made
# owner-only at the next start, and it says so.
umount_fs
sbx_stop a
chmod 0711 "$STATE" "$STATE/sandboxes" "$D"
ctl start a >"$TMP/out" 2>"$TMP/err" || fail "start: $(cat "$TMP/err")"
grep -q "owner-only" "$TMP/err" || fail "no notice of the tightened modes: $(cat "$TMP/err")"
for d in "$STATE" "$STATE/sandboxes" "$D"; do
	assert_eq 700 "$(stat -c %a "$d")" "the mode of $d after a start"
done
finish
