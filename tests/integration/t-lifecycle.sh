#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-lifecycle: the agent behind a mount changes, and the mount keeps up
# without a remount. A restart (new credential) between two operations;
# an agent killed with SIGKILL (sandboxctl status says it died, and the
# next operation starts it again, t-dead-agent.sh has more); an agent
# stopped with SIGSTOP (EIO once -o timeout has passed; SIGCONT brings it
# back). Deadlines are measured.

. "$(dirname "$0")/lib.sh"

one_sandbox
TIMEOUT=3
CONNECT=2
mount_fs "timeout=$TIMEOUT,connect_timeout=$CONNECT,attr_timeout=0,entry_timeout=0,negative_timeout=0"

token() {
	cat "$STATE/sandboxes/a/boot/token" 2>/dev/null
}

# elapsed CMD...: run CMD (with a generous hard limit); its exit status in
# $rc, its standard error in $TMP/err, the milliseconds it took in $ms.
elapsed() {
	_t0=$(now_ms)
	with_timeout 60 "$@" >/dev/null 2>"$TMP/err"
	rc=$?
	ms=$(($(now_ms) - _t0))
}

printf 'before\n' | with_timeout 30 tee "$F/f" >/dev/null || fail "first write"
assert_content "$F/f" before "read before the restart"

# ---- restart: new credential ------------------------------------------------------------
tok1=$(token)
sbx_restart a
tok2=$(token)
[ -n "$tok2" ] || fail "no credential after the restart"
assert_ne "$tok1" "$tok2" "the credential after a restart"
assert_content "$F/f" before "read after a restart"
printf 'after restart\n' | with_timeout 30 tee "$F/f" >/dev/null || fail "write after a restart"
assert_content "$B/f" "after restart" "the write after a restart, on disk"

# ---- SIGKILL: the agent comes back ----------------------------------------------------
# A killed agent is a stopped sandbox (SEMANTICS.md, Reliability): the
# next access starts it again, as it resumes any stopped sandbox.
pid=$(sbx_agent_pid a)
if [ -z "$pid" ] || ! alive "$pid"; then
	die "no agent pid for a"
fi
kill -KILL "$pid"
wait_gone "$pid" 5 || fail "the agent did not die"
wait_for 5 sh -c "'$SBFS_CTL' --state-dir '$STATE' status a | grep -q 'agent died'" ||
	fail "status after kill -9: $(ctl status a)"
elapsed cat "$F/f"
[ "$rc" -eq 0 ] || fail "a read after kill -9 failed: $(cat "$TMP/err")"
note "the first read after kill -9 (a new boot): $ms ms"
assert_content "$F/f" "after restart" "read after the agent came back"
pid2=$(sbx_agent_pid a)
assert_ne "$pid" "$pid2" "the agent's pid after it came back"
alive "$pid2" || fail "the new agent ($pid2) is not running"
printf 'back\n' | with_timeout 30 tee "$F/f" >/dev/null || fail "write after the agent came back"
assert_content "$B/f" back "the write after the agent came back, on disk"

# ---- SIGSTOP ------------------------------------------------------------------------------
pid=$(sbx_agent_pid a)
kill -STOP "$pid"
elapsed cat "$F/f"
kill -CONT "$pid"
[ "$rc" -ne 0 ] || fail "a read succeeded with the agent stopped"
grep -Eq 'Input/output error|Connection timed out' "$TMP/err" ||
	fail "read with the agent stopped: $(cat "$TMP/err")"
[ "$ms" -ge $(((TIMEOUT - 1) * 1000)) ] ||
	fail "the read failed after $ms ms, before -o timeout=$TIMEOUT"
limit=$(((TIMEOUT + CONNECT + 3) * 1000 * SLOW))
[ "$ms" -le "$limit" ] || fail "the read took $ms ms with the agent stopped (limit $limit)"
note "read with the agent stopped: failed after $ms ms"
assert_content "$F/f" back "read after SIGCONT"
kill -STOP "$pid"
elapsed sh -c "printf 'while stopped\n' >'$F/h'"
kill -CONT "$pid"
[ "$rc" -ne 0 ] || note "a write while stopped succeeded (it was sent after SIGCONT)"
[ "$ms" -le "$limit" ] || fail "the write took $ms ms with the agent stopped"
printf 'after cont\n' | with_timeout 30 tee "$F/h" >/dev/null || fail "write after SIGCONT"
assert_content "$B/h" "after cont" "a write after SIGCONT, on disk"

# The failures above are the point of this test: each is logged once.
allow_log 'did not answer|connection failed|deadline|refused|Couldn.t connect|timed out|Timeout|EIO|unreachable'
finish
