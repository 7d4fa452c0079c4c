#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-resume: a stopped sandbox is resumed by the first operation that
# needs its agent (the record is Running again, with a new boot), while
# listing the mount or looking at the sandbox's directory resumes
# nothing; with -o noautoresume the same operation fails with EHOSTDOWN
# and the sandbox stays stopped; a resume that fails leaves the sandbox
# stopped, never removed; an agent that cannot start at all is an error
# that says why (the log, info's lastError), never an empty directory;
# the ctl file's stop and resume.

. "$(dirname "$0")/lib.sh"

need_fuse

sbx_create a --from "$(dirname "$0")"
sbx_create b
B=$(sbx_root a)
assert_eq Stopped "$(sbx_field a state)" "a new sandbox's state"

# ---- auto-resume -------------------------------------------------------------------------
mount_fs
assert_eq "a b" "$(with_timeout 30 ls "$MNT" | tr '\n' ' ' | sed 's/ $//')" "ls MOUNT"
assert_ok ls "$MNT/a"
assert_ok stat "$MNT/a/files"
assert_eq Stopped "$(sbx_field a state)" "state after ls MOUNT and ls MOUNT/a"
boots0=$(sbx_field a bootCount)
t0=$(now_ms)
assert_content "$MNT/a/files/lib.sh" "$(cat "$(dirname "$0")/lib.sh")" "a file of a stopped sandbox"
note "the first read, with a resume, took $(($(now_ms) - t0)) ms"
assert_eq Running "$(sbx_field a state)" "state after the first read"
assert_eq $((${boots0:-0} + 1)) "$(sbx_field a bootCount)" "boots after the first read"
pid=$(sbx_agent_pid a)
if [ -z "$pid" ] || ! alive "$pid"; then
	fail "no agent runs after the resume"
fi
assert_eq Stopped "$(sbx_field b state)" "the other sandbox was not resumed"
# A second operation uses the same boot.
assert_ok ls "$MNT/a/files"
assert_eq "$pid" "$(sbx_agent_pid a)" "the agent after a second operation"
# Stopped under the mount, resumed again by the next operation.
sbx_stop a
# Attributes listed a moment ago may be answered from the cache without the
# sandbox (SEMANTICS.md); opening a file always reaches it.
assert_ok cat "$MNT/a/files/t-resume.sh"
assert_eq Running "$(sbx_field a state)" "state after a stop and a read"
# A job resumes too.
sbx_stop a
with_timeout 60 sh -c "echo 'echo resumed' >'$MNT/a/exec'" || fail "exec on a stopped sandbox"
assert_content "$MNT/a/jobs/latest/stdout" resumed "the job's output"

# ---- ctl: stop and resume ------------------------------------------------------------------
with_timeout 60 sh -c "echo stop >'$MNT/a/ctl'" || fail "echo stop > ctl"
assert_eq Stopped "$(sbx_field a state)" "state after ctl stop"
alive "$pid" && fail "ctl stop left the agent running"
with_timeout 60 sh -c "echo resume >'$MNT/a/ctl'" || fail "echo resume > ctl"
assert_eq Running "$(sbx_field a state)" "state after ctl resume"
with_timeout 30 sh -c "echo refresh >'$MNT/a/ctl'" || fail "echo refresh > ctl"
assert_ok ls "$MNT/a/files"
assert_errno 'Invalid argument' sh -c "echo bogus | dd of='$MNT/a/ctl' status=none conv=notrunc"
umount_fs

# ---- noautoresume ------------------------------------------------------------------------
sbx_stop a
mount_fs noautoresume
assert_errno 'Host is down' cat "$MNT/a/files/lib.sh"
assert_errno 'Host is down' ls "$MNT/a/files"
assert_errno 'Host is down' sh -c "echo 'echo no' | dd of='$MNT/a/exec' status=none conv=notrunc"
assert_eq Stopped "$(sbx_field a state)" "state with noautoresume"
assert_ok ls "$MNT/a"
# An explicit resume still works.
with_timeout 60 sh -c "echo resume >'$MNT/a/ctl'" || fail "ctl resume with noautoresume"
assert_content "$MNT/a/files/lib.sh" "$(cat "$(dirname "$0")/lib.sh")" "read after an explicit resume"
umount_fs

# ---- a resume that fails ---------------------------------------------------------------
sbx_stop a
mkdir "$TMP/bad"
printf '#!/bin/sh\necho "refusing to start" >&2\nexit 1\n' >"$TMP/bad/sandbox-agent"
chmod 0755 "$TMP/bad/sandbox-agent"
good_agent=$SANDBOXFS_AGENT
SANDBOXFS_AGENT=$TMP/bad/sandbox-agent
mount_fs
assert_errno 'Input/output error|No such device|Host is down|Connection refused|Resource temporarily unavailable' \
	cat "$MNT/a/files/lib.sh"
assert_eq Stopped "$(sbx_field a state)" "state after a failed resume"
[ -d "$B" ] || fail "a failed resume removed the sandbox's files"
[ -f "$B/lib.sh" ] || fail "a failed resume lost a file"
assert_ok ls "$MNT"
umount_fs

# ---- an agent program that is missing: an error that says why ---------------------
# Never an empty directory: ls fails (EIO), the reason is a warning in the
# -f log, and the sandbox's info file holds it as lastError.
SANDBOXFS_AGENT=$TMP/no-such-agent
mount_fs
assert_errno 'Input/output error' ls "$MNT/a/files"
assert_errno 'Input/output error' cat "$MNT/a/files/lib.sh"
grep -q "warning: sandbox a: .*cannot run $TMP/no-such-agent" "$LOG" ||
	fail "the -f log does not say why: $(tail -n 3 "$LOG")"
with_timeout 20 cat "$MNT/a/info" >"$TMP/info" || fail "cat info"
grep -q '"lastError": {' "$TMP/info" || fail "info has no lastError: $(cat "$TMP/info")"
grep -q "cannot run $TMP/no-such-agent" "$TMP/info" ||
	fail "info's lastError does not say why: $(cat "$TMP/info")"
grep -q '"lastError": null' "$MNT/b/info" ||
	fail "a sandbox without errors has a lastError: $(cat "$MNT/b/info")"
umount_fs
SANDBOXFS_AGENT=$good_agent

allow_log 'resum|start|agent.log|refusing|did not|Host is down|EHOSTDOWN|Stopped|cannot run'
finish
