#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-dead-agent: an agent that dies (kill -9) is a stopped sandbox
# (SEMANTICS.md, Reliability). sandboxctl status and ls say it died; the
# mount's next access starts it again, as it resumes a stopped sandbox, and
# so does `echo resume > ctl`; with -o noautoresume the access is
# EHOSTDOWN, as for any stopped sandbox. A job that ran under the dead
# agent is `unknown`. The sandbox belongs to an unprivileged user, who
# starts its first agent (so that its commands, as that user, reach their
# session root); root mounts the user's state directory, and the agents
# the mount starts again are root's.

. "$(dirname "$0")/lib.sh"

need_fuse
need_root "an unprivileged user (setpriv) owning the sandbox and the mount"
need_cmd setpriv
programs_for_others

U=64127
AS_U="setpriv --reuid=$U --regid=$U --clear-groups"
# The user's state directory is in this test's directory.
chmod 0711 "$TMP"
mkdir "$STATE" && chown "$U:$U" "$STATE" || hard_error "cannot hand $STATE to uid $U"

uctl() {
	# shellcheck disable=SC2086 # a word list
	with_timeout 60 $AS_U "$SBFS_CTL" --state-dir "$STATE" "$@"
}
agent_pid() {
	ctl status a | sed -n 's/^agent: *pid \([0-9]*\), alive$/\1/p'
}
kill_agent() {
	_p=$(agent_pid)
	[ -n "$_p" ] || die "no live agent to kill: $(ctl status a)"
	kill -KILL "$_p"
	wait_gone "$_p" 5 || die "agent $_p did not die"
	wait_for 5 sh -c "'$SBFS_CTL' --state-dir '$STATE' status a | grep -q 'agent died'" ||
		fail "status after kill -9: $(ctl status a)"
	echo "$_p"
}

uctl create a >/dev/null || die "create"
uctl start a >/dev/null || die "start"
mount_fs
F=$MNT/a/files
printf 'data\n' >"$F/f" || fail "write"

# ---- a running job, then kill -9 ----------------------------------------------------------
id=$(with_timeout 30 sh -c "exec 3<>'$MNT/a/exec'; echo 'sleep 60' >&3; read id <&3; echo \$id")
[ -n "$id" ] || die "no job id"
assert_content "$MNT/a/jobs/$id/status" running "the job before the kill"
old=$(kill_agent)
ctl status a >"$TMP/status"
grep -q "^state: *Stopped (its agent died" "$TMP/status" || fail "status: $(cat "$TMP/status")"
grep -q "^agent: *pid $old, died$" "$TMP/status" || fail "status: $(cat "$TMP/status")"
ctl ls >"$TMP/ls"
assert_eq "Stopped agent - (its agent died)" \
	"$(awk '$1 == "a" { print $2, $3, $4, $5, $6, $7 }' "$TMP/ls")" "ls after kill -9"

# The next access starts it again.
assert_content "$F/f" data "a read after kill -9"
new=$(agent_pid)
[ -n "$new" ] && [ "$new" != "$old" ] || fail "no new agent after the read (old $old, now '$new')"
# The job died with its agent: unknown, never running again.
wait_for 20 sh -c "[ \"\$(cat '$MNT/a/jobs/$id/status')\" = unknown ]" ||
	fail "the dead agent's job: $(cat "$MNT/a/jobs/$id/status")"
assert_errno 'Input/output error' cat "$MNT/a/jobs/$id/exit"

# ---- resume through ctl -------------------------------------------------------------------
old=$(kill_agent)
t0=$(now_ms)
with_timeout 60 sh -c "echo resume >'$MNT/a/ctl'" || fail "echo resume > ctl after kill -9"
ms=$(($(now_ms) - t0))
note "resume through ctl after kill -9: $ms ms"
[ "$ms" -lt $((30000 * SLOW)) ] || fail "the resume took $ms ms"
new=$(agent_pid)
[ -n "$new" ] && [ "$new" != "$old" ] || fail "no new agent after resume (old $old, now '$new')"
assert_content "$F/f" data "a read after the resume"

# ---- noautoresume: a dead agent is a stopped sandbox --------------------------------------
umount_fs
mount_fs noautoresume
kill_agent >/dev/null
assert_errno 'Host is down' cat "$F/f"
assert_ok ls "$MNT/a"
with_timeout 60 sh -c "echo resume >'$MNT/a/ctl'" || fail "resume with noautoresume"
assert_content "$F/f" data "a read after an explicit resume"

allow_log 'resuming|EHOSTDOWN|is Stopped|noautoresume|outcome|unknown|did not answer|connection failed|unreachable|not running|refused|Couldn.t connect'
finish
