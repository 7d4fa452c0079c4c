#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-lifecycle: the agent behind a mount changes, and the mount keeps up
# without a remount. A restart (new credential, and a new port when the
# old one is taken) between two operations; an agent killed with SIGKILL
# (the next operation fails with EIO quickly, never hangs; sandboxctl
# start brings it back); an agent stopped with SIGSTOP (EIO once
# -o timeout has passed; SIGCONT brings it back). Deadlines are measured.

. "$(dirname "$0")/lib.sh"

need_fuse

sbx_create a
sbx_create blocker
sbx_start a
B=$(sbx_root a)
F=$MNT/a/files
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
port1=$(sbx_field a port)
sbx_restart a
tok2=$(token)
[ -n "$tok2" ] || fail "no credential after the restart"
assert_ne "$tok1" "$tok2" "the credential after a restart"
assert_content "$F/f" before "read after a restart"
printf 'after restart\n' | with_timeout 30 tee "$F/f" >/dev/null || fail "write after a restart"
assert_content "$B/f" "after restart" "the write after a restart, on disk"

# ---- restart on another port ----------------------------------------------------------------
# blocker takes a's port (through the public record: its previous port),
# so a's next boot must move.
sbx_stop a
sed "s/^  \"bootCount\"/  \"port\": $port1,\n  \"bootCount\"/" \
	"$STATE/sandboxes/blocker/sandbox.json" >"$TMP/rec" &&
	cat "$TMP/rec" >"$STATE/sandboxes/blocker/sandbox.json"
sbx_start blocker
assert_eq "$port1" "$(sbx_field blocker port)" "blocker's port"
sbx_start a
port2=$(sbx_field a port)
assert_ne "$port1" "$port2" "a's port after its port was taken"
assert_content "$F/f" "after restart" "read after a new port"
printf 'new port\n' | with_timeout 30 tee "$F/f" >/dev/null || fail "write after a new port"
assert_content "$B/f" "new port" "the write after a new port, on disk"
sbx_stop blocker

# ---- SIGKILL ----------------------------------------------------------------------------
pid=$(sbx_agent_pid a)
if [ -z "$pid" ] || ! alive "$pid"; then
	die "no agent pid for a"
fi
kill -KILL "$pid"
wait_gone "$pid" 5 || fail "the agent did not die"
elapsed cat "$F/f"
[ "$rc" -ne 0 ] || fail "a read succeeded with the agent killed"
grep -q 'Input/output error' "$TMP/err" || fail "read with the agent killed: $(cat "$TMP/err")"
limit=$(((TIMEOUT + CONNECT + 2) * 1000 * SLOW))
[ "$ms" -le "$limit" ] || fail "the read took $ms ms with the agent killed (limit $limit)"
note "read with the agent killed: EIO after $ms ms"
elapsed sh -c "echo x >'$F/g'"
[ "$rc" -ne 0 ] || fail "a write succeeded with the agent killed"
[ "$ms" -le "$limit" ] || fail "the write took $ms ms with the agent killed"
elapsed ls "$F"
[ "$rc" -ne 0 ] || fail "ls succeeded with the agent killed"
[ "$ms" -le "$limit" ] || fail "ls took $ms ms with the agent killed"
# The sandbox's own directory and the mount's root do not need the agent.
assert_ok ls "$MNT/a"
sbx_start a
assert_content "$F/f" "new port" "read after sandboxctl start"
printf 'back\n' | with_timeout 30 tee "$F/f" >/dev/null || fail "write after sandboxctl start"
assert_content "$B/f" back "the write after sandboxctl start, on disk"

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
