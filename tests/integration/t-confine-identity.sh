#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-confine-identity: two of root's sandboxes do not share an identity
# (sandboxctl(1), "Identity"). Each gets a uid and gid of its own from the
# reserved range, recorded, owning its session root, and its commands run
# as that uid. Attacked as before: a process of the host running as
# sandbox a's uid (what a set-uid copy made inside a would give a local
# user) cannot write sandbox b's root, signal b's zygote or trace b's
# command; from inside a, b's root and processes are not even visible.
# Concurrent creates in two state directories get distinct identities,
# and rm gives an identity back.

. "$(dirname "$0")/lib.sh"

need_fuse
need_root "identities of their own are root's"
need_cmd setpriv
programs_for_others
[ -x "$SBFS_PROBE" ] || skip "$SBFS_PROBE is not built"

# The directories above the roots stay searchable here: what must stop
# the attacker is the identity, not a closed path.
chmod 0711 "$TMP"

sbx_create a
sbx_create b
sbx_start a
sbx_start b
ua=$(sbx_field a execUid)
ub=$(sbx_field b execUid)
note "identities: a $ua, b $ub"
assert_ne "$ua" "$ub" "the two sandboxes' uids"
for u in "$ua" "$ub"; do
	if [ "$u" -lt 2113929216 ] || [ "$u" -ge $((2113929216 + 65536)) ]; then
		fail "uid $u is not in the reserved range"
	fi
done
assert_eq "$ua" "$(sbx_field a execGid)" "a's gid"
assert_eq true "$(sbx_field a dynamicUser)" "a's record says dynamicUser"
assert_eq "$ua:$ua" "$(stat -c %u:%g "$(sbx_root a)")" "owner of a's root"
assert_eq "$ub:$ub" "$(stat -c %u:%g "$(sbx_root b)")" "owner of b's root"
grep -qx "$STATE/sandboxes/a" "/var/lib/sandboxfs/uids/$ua" ||
	fail "no claim of $ua for sandbox a in /var/lib/sandboxfs/uids"
echo 'b data' >"$(sbx_root b)/data"
chown "$ub:$ub" "$(sbx_root b)/data"
cp "$SBFS_PROBE" "$(sbx_root a)/probe"
chown "$ua:$ua" "$(sbx_root a)/probe"

mount_fs

# ---- the commands run as the sandbox's identity ---------------------------------------
sbx_job a 'id -u; id -g'
assert_eq "$(printf '%s\n%s' "$ua" "$ua")" "$(cat "$TMP/job.out")" "ids of a's command"
sbx_job b 'id -u'
assert_eq "$ub" "$(cat "$TMP/job.out")" "uid of b's command"

# ---- b's processes: a zygote, and a command that stays ----------------------------------
marker="sleep 345.$$"
with_timeout 20 sh -c "echo '$marker' >'$MNT/b/exec'" || fail "start a long job in b"
wait_for 10 sh -c "ps -eo args | grep -qx '$marker'" || fail "b's job does not run"
bcmd=$(ps -eo pid=,args= | awk -v m="$marker" '{p=$1; $1=""; sub(/^ /, "")} $0 == m {print p}' | head -n 1)
bzyg=$(ps -eo pid=,uid=,comm= | awk -v u="$ub" '$2 == u && $3 == "sbfs-zygote" {print $1}' | head -n 1)
[ -n "$bcmd" ] && [ -n "$bzyg" ] || die "b's command ($bcmd) or zygote ($bzyg) not found"
note "b's zygote is pid $bzyg, its command pid $bcmd"

# ---- the attack from the host, as a's uid ------------------------------------------------
as_a() {
	with_timeout 20 setpriv --reuid="$ua" --regid="$ua" --clear-groups "$@"
}
if as_a sh -c "echo owned >'$(sbx_root b)/data'" 2>/dev/null; then
	fail "a's uid wrote into b's root"
fi
assert_eq 'b data' "$(cat "$(sbx_root b)/data")" "b's file after a's write"
if as_a touch "$(sbx_root b)/planted" 2>/dev/null; then
	fail "a's uid created a file in b's root"
fi
assert_eq "error: EPERM" "$(as_a "$SBFS_PROBE" signal "$bzyg")" "a's uid signals b's zygote"
assert_eq "error: EPERM" "$(as_a "$SBFS_PROBE" signal "$bcmd")" "a's uid signals b's command"
assert_eq "error: EPERM" "$(as_a "$SBFS_PROBE" ptrace "$bcmd")" "a's uid traces b's command"
assert_eq "error: EPERM" "$(as_a "$SBFS_PROBE" ptrace "$bzyg")" "a's uid traces b's zygote"

# ---- the same from inside a ----------------------------------------------------------------
sbx_job a "ls '$(sbx_root b)' 2>&1; ./probe signal $bzyg; ./probe ptrace $bcmd; ls /proc | grep -c '^[0-9]'"
out=$(cat "$TMP/job.out")
case $out in
*"b data"* | *data*) fail "a's command lists b's root: $out" ;;
esac
echo "$out" | grep -q 'No such file or directory' || fail "a's command sees b's root path: $out"
[ "$(echo "$out" | sed -n 2p)" != signalled ] || fail "a's command signals b's zygote: $out"
[ "$(echo "$out" | sed -n 3p)" != attached ] || fail "a's command traces b's command: $out"
# Its init, the shell, ls and grep: nothing of b, nor of the host.
[ "$(echo "$out" | tail -n 1)" -le 6 ] || fail "a's command sees $(echo "$out" | tail -n 1) processes"
w_cancel() {
	for j in $(with_timeout 20 ls "$MNT/b/jobs" | grep -v '^latest$'); do
		with_timeout 20 sh -c "echo cancel >'$MNT/b/jobs/$j/ctl'" 2>/dev/null
	done
}
w_cancel
umount_fs

# ---- concurrent creates in two state directories ----------------------------------------------
S2=$TMP/state2
i=1
while [ "$i" -le 4 ]; do
	with_timeout 60 "$SBFS_CTL" --state-dir "$STATE" create "c$i" >/dev/null &
	with_timeout 60 "$SBFS_CTL" --state-dir "$S2" create "c$i" >/dev/null &
	i=$((i + 1))
done
wait
uids=$(for d in "$STATE"/sandboxes/* "$S2"/sandboxes/*; do
	sed -n 's/^  "execUid": \([0-9]*\),$/\1/p' "$d/sandbox.json"
done | sort)
assert_eq 10 "$(echo "$uids" | wc -l)" "records with a uid (a, b and 8 concurrent creates)"
assert_eq 10 "$(echo "$uids" | sort -u | wc -l)" "distinct uids among them"

# ---- a state directory deleted under a running sandbox ----------------------------------------
# Its claim names a directory that is gone, but its agent's processes
# still run as its uid: a new sandbox must not get that uid.
S3=$TMP/state3
with_timeout 60 "$SBFS_CTL" --state-dir "$S3" create gone >/dev/null || fail "create gone"
with_timeout 60 "$SBFS_CTL" --state-dir "$S3" start gone >/dev/null || fail "start gone"
ug=$(sed -n 's/^  "execUid": \([0-9]*\),$/\1/p' "$S3/sandboxes/gone/sandbox.json")
gpid=$(cat "$S3/sandboxes/gone/boot/pid")
[ -n "$(ps -o pid= -u "$ug")" ] || fail "no process runs as gone's uid $ug"
rm -rf "$S3"
sbx_create fresh
uf=$(sbx_field fresh execUid)
assert_ne "$ug" "$uf" "the uid of a sandbox made while a deleted one's processes run"
kill -KILL "$gpid" 2>/dev/null
wait_for 10 sh -c "[ -z \"\$(ps -o pid= -u $ug)\" ]" ||
	fail "gone's processes outlived its agent"
ctl rm -f fresh >/dev/null || fail "rm fresh"

# ---- rm gives it back -------------------------------------------------------------------------
ctl rm -f b >/dev/null || fail "rm b"
[ -e "/var/lib/sandboxfs/uids/$ub" ] && fail "b's claim is still there after rm"
for d in "$S2"/sandboxes/* "$STATE"/sandboxes/c*; do
	with_timeout 30 "$SBFS_CTL" --state-dir "${d%/sandboxes/*}" rm -f "${d##*/}" >/dev/null ||
		fail "rm ${d##*/}"
done

finish
