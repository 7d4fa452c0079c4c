#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-confine-lifetime: nothing a job starts outlives it (doc/commands.md,
# "Confinement"). A child that left the job's session and process group
# (setsid, its output closed) is gone once the job has exited, once the
# job was killed at its timeout, and once a native sandbox's command has
# returned.

. "$(dirname "$0")/lib.sh"

need_fuse

sbx_create a
sbx_start a
sbx_create nat --native
sbx_start nat
mount_fs

running() {
	# shellcheck disable=SC2009 # the exact command line
	ps -eo args | grep -qx "$1"
}

gone() {
	if ! wait_for 10 sh -c "! ps -eo args | grep -qx '$1'"; then
		fail "'$1' outlived $2"
		pkill -KILL -xf "$1"
	fi
}

# ---- a job that exits -----------------------------------------------------------------------
m1="sleep 991.$$"
sbx_job a "setsid $m1 </dev/null >/dev/null 2>&1 & sleep 1; ps -eo args | grep -c '^$m1\$'"
assert_eq 0 "$JOB_EXIT" "exit of the job that left a child"
assert_eq 1 "$(cat "$TMP/job.out")" "the child ran while the job did"
gone "$m1" "its job"

# ---- a job killed at its timeout --------------------------------------------------------------
m2="sleep 992.$$"
job_request a "$(printf '{"command":["sh","-c","setsid %s </dev/null >/dev/null 2>&1 & exec sleep 300"],"timeoutMs":3000}' "$m2")"
wait_for 10 running "$m2" || fail "the timed job's child did not start"
with_timeout 30 cat "$MNT/a/jobs/$job/stdout" >/dev/null
status=$(with_timeout 20 cat "$MNT/a/jobs/$job/status")
case $status in
*timeoutExceeded*) ;;
*) fail "status of the timed job: $status" ;;
esac
gone "$m2" "its job's timeout"

# ---- a native sandbox's command -----------------------------------------------------------------
m3="sleep 993.$$"
sbx_job nat "setsid $m3 </dev/null >/dev/null 2>&1 & echo started"
assert_eq started "$(cat "$TMP/job.out")" "the native command's output"
gone "$m3" "the native command"

finish
