#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-jobs-stream: jobs in time. cat of a running job's stdout streams (its
# first line arrives while the job still runs, and cat ends when the job
# does); tail -f follows; a read of exit blocks until the job ends; a
# cancel written to jobs/<id>/ctl stops the job (status cancelled, exit
# ECANCELED, its processes gone).

# shellcheck disable=SC2016 # job command lines are expanded in the sandbox
. "$(dirname "$0")/lib.sh"

one_sandbox
mount_fs

# ---- cat streams ---------------------------------------------------------------------
job_start 'for i in 1 2 3 4; do echo "line $i"; sleep 1; done'
t0=$(now_ms)
with_timeout 30 cat "$S/jobs/$job/stdout" >"$TMP/stream" &
catpid=$!
wait_for 10 grep -q 'line 1' "$TMP/stream" || fail "the first line did not arrive"
t1=$(now_ms)
st=$(w cat "$S/jobs/$job/status")
assert_eq running "$st" "status when the first line arrived"
[ $((t1 - t0)) -lt 2500 ] || fail "the first line took $((t1 - t0)) ms (the job prints it at once)"
wait "$catpid" || fail "cat of a running job's stdout failed"
t2=$(now_ms)
[ $((t2 - t0)) -ge 2500 ] || fail "cat ended after $((t2 - t0)) ms, before the job could have"
assert_eq "$(printf 'line 1\nline 2\nline 3\nline 4')" "$(cat "$TMP/stream")" "the streamed output"
assert_content "$S/jobs/$job/status" "exited 0" "status after the stream"

# ---- tail -f follows -------------------------------------------------------------------
job_start 'i=1; while [ $i -le 8 ]; do echo "tick $i"; i=$((i+1)); sleep 0.5; done'
t0=$(now_ms)
# The job takes 4 s; tail's timeout leaves several seconds for a busy
# machine.
timeout 12 tail -f "$S/jobs/$job/stdout" 2>"$TMP/tail.err" | head -n 3 >"$TMP/tail"
t1=$(now_ms)
assert_eq "$(printf 'tick 1\ntick 2\ntick 3')" "$(cat "$TMP/tail")" "tail -f | head -n 3"
[ $((t1 - t0)) -lt 11900 ] || fail "tail -f did not deliver 3 lines before its timeout ($((t1 - t0)) ms)"
w cat "$S/jobs/$job/exit" >/dev/null

# ---- exit blocks until the end ------------------------------------------------------------
job_start 'sleep 2; exit 5'
t0=$(now_ms)
code=$(w cat "$S/jobs/$job/exit")
t1=$(now_ms)
assert_eq 5 "$code" "exit of 'sleep 2; exit 5'"
[ $((t1 - t0)) -ge 1500 ] || fail "reading exit returned after $((t1 - t0)) ms, before the job ended"
assert_content "$S/jobs/$job/status" "exited 5" "status"
# Two readers wait together.
job_start 'sleep 1; exit 7'
w cat "$S/jobs/$job/exit" >"$TMP/e1" &
p1=$!
w cat "$S/jobs/$job/exit" >"$TMP/e2" &
p2=$!
wait "$p1" || fail "the first waiter"
wait "$p2" || fail "the second waiter"
assert_content "$TMP/e1" 7 "first waiter"
assert_content "$TMP/e2" 7 "second waiter"
# ---- cancel -------------------------------------------------------------------------------
# A process that can be recognised from outside.
marker="sleep 61.$$"
job_start "echo started; $marker; echo not-cancelled"
wait_for 10 grep -q started "$S/jobs/$job/stdout" 2>/dev/null ||
	fail "the job to cancel did not start"
# shellcheck disable=SC2009,SC2317 # exact argv match; called by wait_for
running() {
	ps -eo args | grep -v grep | grep -qx "$marker"
}
wait_for 10 running || fail "'$marker' is not running"
assert_content "$S/jobs/$job/status" running "status before the cancel"
w sh -c "echo cancel >'$S/jobs/$job/ctl'" || fail "echo cancel > ctl"
wait_for 10 sh -c "grep -qx cancelled '$S/jobs/$job/status'" ||
	fail "status after the cancel: $(w cat "$S/jobs/$job/status")"
wait_for 10 sh -c "! ps -eo args | grep -v grep | grep -qx '$marker'" ||
	fail "'$marker' still runs after the cancel"
assert_errno 'Operation canceled' cat "$S/jobs/$job/exit"
grep -q not-cancelled "$S/jobs/$job/stdout" && fail "the cancelled job went on"
# A cancel of an ended job changes nothing.
job_start 'exit 4'
w cat "$S/jobs/$job/exit" >/dev/null
w sh -c "echo cancel >'$S/jobs/$job/ctl'" 2>/dev/null
assert_content "$S/jobs/$job/status" "exited 4" "status after a late cancel"
assert_errno 'Invalid argument' sh -c "echo bogus | dd of='$S/jobs/$job/ctl' status=none conv=notrunc"

# ---- a waiter that gives up ----------------------------------------------------------------
# Interrupted (as by ^C) while blocked in a read of exit: the read ends,
# and neither the job nor the mount is hurt.
job_start 'sleep 3; echo done'
timeout -s INT 1 cat "$S/jobs/$job/exit" >/dev/null 2>&1
assert_content "$S/jobs/$job/exit" 0 "exit after an interrupted waiter"
assert_content "$S/jobs/$job/stdout" "done" "output after an interrupted waiter"
assert_content "$S/jobs/$job/status" "exited 0" "status after an interrupted waiter"

allow_log 'INVALID|Invalid|invalid'
finish
