#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-deadline: -o timeout bounds each operation as the user sees it
# (SEMANTICS.md, Reliability; doc/transport-rules.md 9). A stat of a file
# while the agent is stopped (SIGSTOP) fails after one timeout, not two
# (the kernel asks again after a failed revalidation: that second request
# fails at once). Against an agent that answers one byte a second (a relay
# in front of it, tests/integration/trickle), ls and cat fail at the
# deadline instead of waiting for the trickle; when the agent comes back,
# the next operation works.

. "$(dirname "$0")/lib.sh"

TRICKLE=$SBFS_BUILDDIR/tests/integration/trickle
[ -x "$TRICKLE" ] || hard_error "$TRICKLE is not built"
one_sandbox
TIMEOUT=6
# Every operation asks the agent: no cache, with change events or without.
mount_fs "timeout=$TIMEOUT,attr_timeout=0,entry_timeout=0,negative_timeout=0,cache_timeout=0"

# elapsed CMD...: run CMD (with a generous hard limit); its exit status in
# $rc, its standard error in $TMP/err, the milliseconds it took in $ms.
elapsed() {
	_t0=$(now_ms)
	with_timeout 120 "$@" >/dev/null 2>"$TMP/err"
	rc=$?
	ms=$(($(now_ms) - _t0))
}

# at_deadline WHAT: the last command failed with EIO after about one
# -o timeout: not before it, and well before two.
at_deadline() {
	[ "$rc" -ne 0 ] || fail "$1 succeeded"
	grep -q 'Input/output error' "$TMP/err" || fail "$1: $(cat "$TMP/err")"
	[ "$ms" -ge $(((TIMEOUT - 1) * 1000)) ] ||
		fail "$1 failed after $ms ms, before -o timeout=$TIMEOUT"
	[ "$ms" -le $((TIMEOUT * 1500 * SLOW)) ] ||
		fail "$1 took $ms ms: more than one -o timeout=$TIMEOUT and a margin"
	note "$1: EIO after $ms ms"
}

printf 'hello\n' | with_timeout 30 tee "$F/f" >/dev/null || fail "first write"
with_timeout 30 mkdir "$F/d" || fail "mkdir"
printf 'x\n' | with_timeout 30 tee "$F/d/x" >/dev/null || fail "second write"
assert_content "$F/f" hello "a read"

# ---- a stopped agent ----------------------------------------------------------------------
pid=$(sbx_agent_pid a)
[ -n "$pid" ] && alive "$pid" || die "no agent pid for a"
kill -STOP "$pid"
elapsed stat "$F/f"
kill -CONT "$pid"
at_deadline "stat with the agent stopped"
# Another caller, once the agent is back, is not failed fast.
assert_content "$F/f" hello "a read after SIGCONT"
kill -STOP "$pid"
elapsed ls "$F/d"
kill -CONT "$pid"
at_deadline "ls with the agent stopped"
assert_eq x "$(with_timeout 30 ls "$F/d")" "ls after SIGCONT"

# ---- an agent that trickles its answers ---------------------------------------------------
url=$(sbx_field a agentUrl)
bg "$TRICKLE" "$TMP/trickle.port" "unix:$STATE/sandboxes/a/boot/agent.sock" "$TMP/slow"
wait_for 10 test -s "$TMP/trickle.port" || die "the relay did not start"
tport=$(cat "$TMP/trickle.port")
# The record's route now leads through the relay (a loopback TCP route,
# as other programs may write); the mount fetches it afresh and keeps
# using it.
rec=$STATE/sandboxes/a/sandbox.json
sed "s#$url#http://127.0.0.1:$tport/#" "$rec" >"$TMP/rec" && cat "$TMP/rec" >"$rec"
grep -q "127.0.0.1:$tport/" "$rec" || die "the record names no relay: $(cat "$rec")"
echo refresh >"$MNT/a/ctl" || fail "refresh"
assert_content "$F/f" hello "a read through the relay"
touch "$TMP/slow"
elapsed ls "$F/d"
at_deadline "ls of a trickling agent"
elapsed cat "$F/f"
at_deadline "cat of a trickling agent"
rm -f "$TMP/slow"
assert_content "$F/f" hello "a read once the agent answers again"
assert_eq x "$(with_timeout 30 ls "$F/d")" "ls once the agent answers again"

# The failures above are the point of this test.
allow_log 'did not answer|deadline|stalled|timed out|Timeout|EIO|unreachable|failing at once'
finish
