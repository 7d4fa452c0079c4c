#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-confine-limits: a sandbox's limits hold (doc/commands.md, "Limits";
# sandboxctl create --pids, --memory, --tmp-size, recorded). Processes: a
# job that starts 200 sleepers gets no more than its 64 (counted from the
# host; as root also by the sandbox's uid: at most 64 and its three
# helpers), and a fork bomb then stays under the same bound, ends, and
# leaves the host able to fork. A
# write of 64 MiB to /tmp or /dev/shm stops at the 16 MiB the temporary
# file systems have (ENOSPC). A process cannot take a 512 MiB string with a
# 256 MiB memory limit.

. "$(dirname "$0")/lib.sh"

need_fuse

sbx_create s --pids 64 --memory 256M --tmp-size 16M
sbx_start s
assert_eq 64 "$(sbx_field s pids)" "recorded pids"
assert_eq 268435456 "$(sbx_field s memory)" "recorded memory"
assert_eq 16777216 "$(sbx_field s tmpSize)" "recorded tmpSize"
uid=$(sbx_field s execUid)
grep -E 'limits: (cgroup|no cgroup)' "$(sbx_agent_log s)" | sed 's/^/# /'
mount_fs

# tasks of the sandbox, seen from the host
tasks() {
	if [ "$(id -u)" -eq 0 ]; then
		ps -L -u "$uid" -o lwp= | wc -l
	else
		echo 0
	fi
}

# ---- processes -------------------------------------------------------------------------------
m="sleep 61.$$"
# (A shell that cannot fork gives up: the loop runs in a subshell of its
# own, and what it started stays while the job runs.)
job_request s "$(printf '{"command":["sh","-c","(for i in $(seq 200); do %s & done) & exec sleep 30"],"timeoutMs":20000}' "$m")"
sleep 3
# shellcheck disable=SC2009 # the exact command line
started=$(ps -eo args | grep -cx "$m")
note "200 sleepers asked for, $started running"
if [ "$started" -ge 64 ] || [ "$started" -lt 8 ]; then
	fail "a job runs $started processes; its limit is 64"
fi
if [ "$(id -u)" -eq 0 ]; then
	n=$(tasks)
	[ "$n" -le 67 ] || fail "the sandbox holds $n tasks, over 64 and its 3 helpers"
fi
with_timeout 20 sh -c "echo cancel >'$MNT/s/jobs/$job/ctl'"
wait_for 10 sh -c "! ps -eo args | grep -qx '$m'" || {
	fail "the sleepers outlived the cancel"
	pkill -KILL -xf "$m"
}
# A fork bomb, once the bound is known to hold.
if [ "$started" -lt 64 ]; then
	job_request s '{"command":["sh","-c","b() { b | b & }; b; exec sleep 100"],"timeoutMs":5000}'
	sleep 2
	if [ "$(id -u)" -eq 0 ]; then
		n=$(tasks)
		note "the fork bomb holds $n tasks"
		[ "$n" -le 67 ] || fail "the fork bomb holds $n tasks, over 64 and the 3 helpers"
	fi
	status=$(with_timeout 30 sh -c "cat '$MNT/s/jobs/$job/stdout' >/dev/null; cat '$MNT/s/jobs/$job/status'")
	note "the fork bomb ended: $status"
	assert_ok sh -c 'true | true'
	if [ "$(id -u)" -eq 0 ]; then
		# the zygote, bubblewrap's two processes and slirp4netns
		wait_for 10 sh -c "[ \$(ps -L -u $uid -o lwp= | wc -l) -le 4 ]" ||
			fail "the fork bomb's processes remain: $(tasks)"
	fi
fi

# ---- temporary file systems -----------------------------------------------------------------
for d in /tmp /dev/shm; do
	sbx_job s "head -c 64M /dev/zero >$d/big; echo rc=\$?; stat -c %s $d/big"
	assert_eq rc=1 "$(head -n 1 "$TMP/job.out")" "the exit of a 64 MiB write to $d"
	size=$(sed -n 2p "$TMP/job.out")
	if [ -z "$size" ] || [ "$size" -gt 16777216 ] || [ "$size" -lt 15728640 ]; then
		fail "a 64 MiB write to $d left $size bytes; the file system has 16 MiB"
	fi
	grep -q 'No space left on device' "$TMP/job.err" || fail "the write to $d did not say ENOSPC: $(cat "$TMP/job.err")"
done

# ---- memory -----------------------------------------------------------------------------------
sbx_job s "awk 'BEGIN { s = \"x\"; for (i = 0; i < 29; i++) s = s s; print length(s) }'"
[ "$JOB_EXIT" != 0 ] || fail "a 512 MiB string fit in 256 MiB: $(cat "$TMP/job.out")"
sbx_job s "awk 'BEGIN { s = \"x\"; for (i = 0; i < 20; i++) s = s s; print length(s) }'"
assert_eq 1048576 "$(cat "$TMP/job.out")" "a 1 MiB string"

allow_log 'exec: refused|job .*: '
finish
