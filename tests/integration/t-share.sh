#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-share: a shared mount shares only what its owner allows (SEMANTICS.md,
# sharing). With allow_other, a second local user is checked by the kernel
# against the modes shown (default_permissions is implied): it may read
# what the modes let it read, may not write the owner's files, start jobs
# or stop the sandbox; shared_exec opens exec to it. nosuid and nodev are
# always in force (suid and dev from mount(8) are dropped), no set-id bit
# or device number of the sandbox is shown, and the sandbox's FIFO is
# refused at open instead of blocking.

. "$(dirname "$0")/lib.sh"
programs_for_others

need_fuse
need_root "a second local user (setpriv) and allow_other"
need_cmd setpriv

# A uid nobody uses on this machine: allow_other looks at the number only.
# It must reach the mount point, which is in this test's directory.
OTHER=64123
chmod 0711 "$TMP"
AS_OTHER="setpriv --reuid=$OTHER --regid=$OTHER --clear-groups"
as_other() {
	# shellcheck disable=SC2086 # a word list
	with_timeout 20 $AS_OTHER "$@"
}

sbx_create a
sbx_start a
B=$(sbx_root a)
F=$MNT/a/files
echo 'owner data' >"$B/own"
chmod 0644 "$B/own"
echo 'secret' >"$B/private"
chmod 0600 "$B/private"
mkfifo "$B/fifo"
cp /bin/true "$B/suidprog"
chmod 4755 "$B/suidprog"
chown --reference="$B" "$B/own" "$B/private" "$B/fifo" "$B/suidprog"

mount_options() {
	awk -v m="$MNT" '$5 == m { print $6 }' /proc/self/mountinfo
}

# ---- allow_other: the kernel checks the other user -------------------------------
mount_fs allow_other
case ",$(mount_options)," in
*,nosuid,*) ;;
*) fail "the mount is not nosuid: $(mount_options)" ;;
esac
case ",$(mount_options)," in
*,nodev,*) ;;
*) fail "the mount is not nodev: $(mount_options)" ;;
esac
assert_eq "owner data" "$(as_other cat "$F/own" 2>&1)" "the other user reads a 0644 file"
assert_errno 'Permission denied' $AS_OTHER cat "$F/private"
assert_errno 'Permission denied' $AS_OTHER sh -c "echo x >>'$F/own'"
assert_errno 'Permission denied' $AS_OTHER touch "$F/new-by-other"
assert_errno 'Permission denied' $AS_OTHER sh -c "echo true >'$MNT/a/exec'"
assert_errno 'Permission denied' $AS_OTHER sh -c "echo stop >'$MNT/a/ctl'"
assert_eq "owner data" "$(cat "$B/own")" "own after the other user's attempts"
[ -e "$B/new-by-other" ] && fail "the other user made a file"
# The owner starts a job; the other user cannot cancel it.
echo 'sleep 30' >"$MNT/a/exec" || fail "the owner's exec"
assert_errno 'Permission denied' $AS_OTHER sh -c "echo cancel >'$MNT/a/jobs/latest/ctl'"
echo cancel >"$MNT/a/jobs/latest/ctl" || fail "the owner's cancel"
assert_eq "600 200" "$(stat -c %a "$MNT/a/exec") $(stat -c %a "$MNT/a/ctl")" \
	"modes of exec and ctl"

# ---- nothing of the sandbox's set-id bits, devices or FIFOs --------------------------
assert_eq 755 "$(stat -c %a "$F/suidprog")" "the mode shown of a set-uid file"
assert_eq "regular empty file" "$(stat -c %F "$F/fifo")" "a FIFO as shown"
start=$(date +%s)
assert_errno 'No such device or address' cat "$F/fifo"
[ $(($(date +%s) - start)) -lt 5 ] || fail "opening the sandbox's FIFO took long"

# ---- suid and dev are dropped; shared_exec opens exec and ctl ------------------------
umount_fs
mount_fs allow_other,suid,dev,shared_exec
case ",$(mount_options)," in
*,nosuid,*nodev,* | *,nodev,*nosuid,*) ;;
*) fail "-o suid,dev made the mount $(mount_options)" ;;
esac
assert_eq "666 222" "$(stat -c %a "$MNT/a/exec") $(stat -c %a "$MNT/a/ctl")" \
	"modes of exec and ctl with shared_exec"
as_other sh -c "echo 'echo from-other' >'$MNT/a/exec'" ||
	fail "the other user's exec with shared_exec"
assert_content "$MNT/a/jobs/latest/stdout" from-other "the other user's job"
# Files stay the owner's.
assert_errno 'Permission denied' $AS_OTHER sh -c "echo x >>'$F/own'"

allow_log 'cancelled|fifo'
finish
