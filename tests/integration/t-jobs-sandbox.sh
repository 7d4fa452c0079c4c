#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-jobs-sandbox: jobs belong to the sandbox, and a request is one job.
# A script written line by line is one job (cd then pwd prints the
# subdirectory); an empty request is refused at close and logged. 30
# quick jobs in a row all start. At the agent's running-jobs limit exec
# fails with EAGAIN and the log names the limit. A stopped agent
# (SIGSTOP) makes blocked readers of stdout and exit fail within the
# mount's timeout and status say unknown; SIGCONT brings it all back. A
# job started before an unmount is listed, readable and cancellable after
# the remount, and the unmount says it keeps running.

# shellcheck disable=SC2016 # job command lines are expanded in the sandbox
. "$(dirname "$0")/lib.sh"

one_sandbox
mkdir "$B/sub" && chown --reference="$B" "$B/sub"
mount_fs

njobs() {
	w ls "$S/jobs" | grep -cv '^latest$'
}

# ---- a script is one job -------------------------------------------------------------
n0=$(njobs)
# Two writes through one open file (the shell's printf writes each
# command's output at once), closed once.
w sh -c '{ printf "cd sub\n"; printf "pwd\n"; } >"$1"' sh "$S/exec" ||
	fail "a script written line by line"
assert_eq "sub" "$(basename "$(w cat "$S/jobs/latest/stdout")")" "pwd after cd, written line by line"
assert_eq $((n0 + 1)) "$(njobs)" "jobs after a two-line script"
if command -v bash >/dev/null 2>&1; then
	w bash -c 'printf "cd sub\npwd\n" >"$1"' bash "$S/exec" || fail "bash printf > exec"
	assert_eq "sub" "$(basename "$(w cat "$S/jobs/latest/stdout")")" "bash's printf 'cd sub\npwd\n'"
	assert_eq $((n0 + 2)) "$(njobs)" "jobs after bash's printf"
fi
w sh -c 'cat >"$1" <<EOF
cd sub
pwd
EOF' sh "$S/exec" || fail "cat <<EOF > exec"
assert_eq "sub" "$(basename "$(w cat "$S/jobs/latest/stdout")")" "a here-document"
# The id read back starts the job: what was written before the read.
# (The writes go to the shell's own standard output, which is exec: a
# redirection per command would close a copy of the file after each one,
# and each close starts what is pending.)
w sh -c 'exec 4>&1 1<>"$1"; printf "echo one\n"; printf "echo two\n"; read -r id <&1; echo "$id" >&4' \
	sh "$S/exec" >"$TMP/id" || fail "two writes, then the id"
assert_eq "$(printf 'one\ntwo')" "$(w cat "$S/jobs/$(cat "$TMP/id")/stdout")" "the job started by reading its id"
# An empty request starts nothing: the close fails with EINVAL.
latest=$(w readlink "$S/jobs/latest")
assert_errno 'Invalid argument' sh -c "printf '\n' | dd of='$S/exec' status=none"
assert_eq "$latest" "$(w readlink "$S/jobs/latest")" "jobs/latest after an empty request"
grep -q 'sandbox a: exec: the request is refused: the request is empty' "$LOG" ||
	fail "the log does not say why the empty request was refused"

# ---- 30 quick jobs in a row -------------------------------------------------------------
# Each takes a second, so they all run at once: under alien's registry
# of 16 jobs (running, or ended and not yet polled) the 17th would fail.
n1=$(njobs)
i=1
while [ "$i" -le 30 ]; do
	# dd reports a failed close; a shell's redirection does not.
	printf 'sleep 1; echo quick %s\n' "$i" >"$TMP/cmd"
	w dd if="$TMP/cmd" of="$S/exec" status=none 2>"$TMP/dd.err" ||
		fail "quick job $i: $(cat "$TMP/dd.err")"
	i=$((i + 1))
done
assert_content "$S/jobs/latest/stdout" "quick 30" "the last quick job"
assert_eq $((n1 + 30)) "$(njobs)" "jobs after 30 quick ones"

# ---- a stopped agent ---------------------------------------------------------------------
job_start 'i=0; while :; do echo "tick $i"; i=$((i+1)); sleep 0.5; done'
wait_for 10 grep -q 'tick 1' "$S/jobs/$job/stdout" || fail "the ticking job does not tick"
pid=$(sbx_agent_pid a)
[ -n "$pid" ] || die "no agent pid"
with_timeout 60 cat "$S/jobs/$job/stdout" >"$TMP/out1" 2>"$TMP/out1.err" &
r1=$!
with_timeout 60 cat "$S/jobs/$job/exit" >"$TMP/exit1" 2>"$TMP/exit1.err" &
r2=$!
sleep 1
t0=$(now_ms)
kill -STOP "$pid"
wait "$r1"
rc1=$?
t1=$(now_ms)
wait "$r2"
rc2=$?
t2=$(now_ms)
if [ "$rc1" -eq 0 ] || ! grep -q 'Input/output error' "$TMP/out1.err"; then
	fail "a blocked reader of stdout of a stopped agent: exit $rc1, $(cat "$TMP/out1.err")"
fi
if [ "$rc2" -eq 0 ] || ! grep -q 'Input/output error' "$TMP/exit1.err"; then
	fail "a blocked reader of exit of a stopped agent: exit $rc2, $(cat "$TMP/exit1.err")"
fi
# timeout=5: within it and a few seconds.
[ $((t1 - t0)) -lt 15000 ] || fail "the stdout reader failed after $((t1 - t0)) ms"
[ $((t2 - t0)) -lt 15000 ] || fail "the exit reader failed after $((t2 - t0)) ms"
note "readers failed $((t1 - t0)) and $((t2 - t0)) ms after SIGSTOP"
assert_content "$S/jobs/$job/status" unknown "status while the agent is stopped"
assert_errno 'Input/output error' cat "$S/jobs/$job/exit"
kill -CONT "$pid"
wait_for 20 sh -c "grep -qx running '$S/jobs/$job/status'" ||
	fail "status after SIGCONT: $(w cat "$S/jobs/$job/status")"
# (A running job's stdout has no end to read to: its size tells.)
before=$(w stat -c %s "$S/jobs/$job/stdout")
wait_for 10 sh -c "[ \$(stat -c %s '$S/jobs/$job/stdout') -gt $((before + 20)) ]" ||
	fail "the job's output does not grow after SIGCONT"
w sh -c "echo cancel >'$S/jobs/$job/ctl'" || fail "cancel the ticking job"
assert_content "$S/jobs/$job/status" cancelled "status after the cancel"

# ---- jobs outlive the mount --------------------------------------------------------------
marker="sleep 67.$$"
job_start "echo before-umount; $marker; echo after"
kept=$job
job_start 'echo finished-before; exit 4'
done4=$job
assert_content "$S/jobs/$done4/exit" 4 "exit of the finished job"
wait_for 10 grep -q before-umount "$S/jobs/$kept/stdout" || fail "the long job did not start"
umount_fs
grep -q 'sandbox a: 1 job still running keeps running in the sandbox; after a remount' "$LOG" ||
	fail "the unmount does not say the job keeps running: $(tail -n 3 "$LOG")"
# shellcheck disable=SC2009 # exact argv match
ps -eo args | grep -v grep | grep -qx "$marker" || fail "the job stopped with the mount"
mount_fs
w ls "$S/jobs" >"$TMP/ls"
grep -qx "$kept" "$TMP/ls" || fail "jobs/ after a remount does not list the running job: $(cat "$TMP/ls")"
grep -qx "$done4" "$TMP/ls" || fail "jobs/ after a remount does not list the finished job"
assert_eq before-umount "$(w head -n 1 "$S/jobs/$kept/stdout")" "stdout of a job started before the remount"
assert_content "$S/jobs/$kept/status" running "status of a job started before the remount"
grep -q "$marker" "$S/jobs/$kept/cmd" || fail "cmd after a remount: $(w cat "$S/jobs/$kept/cmd")"
assert_content "$S/jobs/$done4/exit" 4 "exit of a job that ended before the remount"
assert_content "$S/jobs/$done4/stdout" finished-before "stdout of a job that ended before the remount"
w sh -c "echo cancel >'$S/jobs/$kept/ctl'" || fail "cancel after a remount"
assert_content "$S/jobs/$kept/status" cancelled "status after a cancel after the remount"
# shellcheck disable=SC2009 # exact argv match
wait_for 10 sh -c "! ps -eo args | grep -v grep | grep -qx '$marker'" ||
	fail "'$marker' still runs after the cancel"


# ---- the running-jobs limit ----------------------------------------------------------------
agent_wrapper --max-running-jobs 2
sbx_create b
sbx_start b
SB=$MNT/b
wait_for 10 test -d "$SB" || die "$SB does not appear"
w sh -c "echo 'sleep 120' >'$SB/exec'" || fail "first job in b"
w sh -c "echo 'sleep 120' >'$SB/exec'" || fail "second job in b"
assert_errno 'Resource temporarily unavailable' sh -c "echo 'sleep 1' | dd of='$SB/exec' status=none"
grep -q 'sandbox b: exec: refused: the sandbox already runs its limit of 2 jobs' "$LOG" ||
	fail "the log does not name the limit: $(grep 'sandbox b' "$LOG" | tail -n 3)"
for j in $(w ls "$SB/jobs" | grep -v '^latest$'); do
	w sh -c "echo cancel >'$SB/jobs/$j/ctl'"
done
# A job that ended makes room.
printf 'echo room\n' >"$TMP/cmd"
w dd if="$TMP/cmd" of="$SB/exec" status=none 2>"$TMP/dd.err" || fail "a job after the others ended: $(cat "$TMP/dd.err")"
assert_content "$SB/jobs/latest/stdout" room "the job after the others ended"

allow_log 'the agent has not answered|exec: the request is refused|exec: refused: the sandbox already runs'
finish
