#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-sandboxctl: every sandboxctl command through the command line, against
# the real sandbox-agent of the build, in a private state directory:
# outputs, exit codes, the files of the state directory (owner-only, the
# agent's socket), an agent that died, and the errors a user meets (bad
# names, duplicates, missing sandboxes, corrupt records, an agent that does
# not start).
#
# Exit 0 = pass, 1 = fail, 77 = skipped (the reason is printed).

set -u

CTL=${SBFS_CTL:-./sandboxctl}
AGENT=${SBFS_AGENT:-./sandbox-agent}

skip() {
	echo "SKIP: $*"
	exit 77
}

[ -x "$CTL" ] || skip "sandboxctl is not built ($CTL)"
[ -x "$AGENT" ] || skip "sandbox-agent is not built ($AGENT)"
"$AGENT" --help >/dev/null 2>&1 || skip "$AGENT does not run"
SANDBOXFS_AGENT=$AGENT
export SANDBOXFS_AGENT

TMP=$(mktemp -d "${TMPDIR:-/tmp}/t-sandboxctl.XXXXXX") || exit 99
STATE=$TMP/state
OUT=$TMP/out
ERR=$TMP/err

# shellcheck disable=SC2317 # called through the trap
cleanup() {
	for d in "$STATE"/sandboxes/*; do
		[ -d "$d" ] || continue
		SANDBOXFS_AGENT=$AGENT "$CTL" --state-dir "$STATE" \
			rm -f "${d##*/}" >/dev/null 2>&1
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# ctl RC ARGS...: run sandboxctl, expect exit status RC.
ctl() {
	want=$1
	shift
	"$CTL" --state-dir "$STATE" "$@" >"$OUT" 2>"$ERR"
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "sandboxctl $* exited $rc, wanted $want"
		sed 's/^/  out: /' "$OUT"
		sed 's/^/  err: /' "$ERR"
	fi
}

has_out() {
	grep -q -- "$1" "$OUT" || {
		fail "stdout lacks '$1'"
		sed 's/^/  out: /' "$OUT"
	}
}

has_err() {
	grep -q -- "$1" "$ERR" || {
		fail "stderr lacks '$1'"
		sed 's/^/  err: /' "$ERR"
	}
}

# One JSON number or string field of a record file.
field() {
	sed -n "s/^  \"$2\": \"*\([^\",]*\)\"*,*$/\1/p" "$STATE/sandboxes/$1/sandbox.json"
}

gone() {
	[ ! -e "/proc/$1" ] || grep -q '^[0-9]* (.*) [ZX]' "/proc/$1/stat"
}

sb=$STATE/sandboxes

# ---- usage errors: exit 2 -------------------------------------------------
"$CTL" >/dev/null 2>&1
[ $? -eq 2 ] || fail "no command: not exit 2"
ctl 2 bogus
has_err "unknown command 'bogus'"
ctl 2 start
has_err "a sandbox NAME is needed"
ctl 2 start 'bad name'
has_err "invalid sandbox name 'bad name'"
ctl 2 create ../escape
ctl 2 ls extra
ctl 2 rm --nope x
ctl 0 --help
has_out "create NAME"

# ---- create, ls -----------------------------------------------------------
ctl 0 ls
[ "$(cat "$OUT")" = "NAME  STATE  TRANSPORT  URL" ] || fail "empty ls: $(cat "$OUT")"
ctl 0 ls --json
[ "$(cat "$OUT")" = "[]" ] || fail "empty ls --json: $(cat "$OUT")"
ctl 0 create demo
has_out "demo: created (agent)"
ctl 0 create nat --native
has_out "nat: created (native)"
ctl 1 create demo
has_err "sandbox 'demo' already exists"
ctl 1 create nosrc --from "$TMP/nonexistent"
[ ! -e "$sb/nosrc" ] || fail "a failed create left $sb/nosrc"
grep -q '"alienAgentTransport": "native-file-v1"' "$sb/demo/sandbox.json" ||
	fail "demo has no transport label"
grep -q '"labels": {}' "$sb/nat/sandbox.json" || fail "nat has labels"
[ "$(field demo state)" = Stopped ] || fail "new demo is not Stopped"
[ "$(stat -c %a "$sb/demo/boot")" = 700 ] || fail "boot/ is not 0700"

mkdir -p "$TMP/src/sub"
printf 'hello' >"$TMP/src/sub/f"
chmod 640 "$TMP/src/sub/f"
ln -s sub/f "$TMP/src/link"
ctl 0 create copy --from "$TMP/src"
[ "$(cat "$sb/copy/root/sub/f")" = hello ] || fail "--from: content"
[ "$(stat -c %a "$sb/copy/root/sub/f")" = 640 ] || fail "--from: mode"
[ "$(readlink "$sb/copy/root/link")" = sub/f ] || fail "--from: symlink"

# ---- start ----------------------------------------------------------------
ctl 0 start demo
sock=$sb/demo/boot/agent.sock
url=http+unix://$(printf '%s' "$sock" | sed 's#/#%2F#g')/
has_out "demo: running at $url"
[ "$(field demo state)" = Running ] || fail "demo is not Running"
[ "$(field demo agentUrl)" = "$url" ] || fail "agentUrl is not $url"
[ -z "$(field demo port)" ] || fail "a socket agent has a port: $(field demo port)"
[ -S "$sock" ] || fail "no socket at $sock"
[ "$(stat -c %a "$sock")" = 600 ] || fail "socket mode $(stat -c %a "$sock")"
for d in "$STATE" "$sb" "$sb/demo"; do
	[ "$(stat -c %a "$d")" = 700 ] || fail "$d has mode $(stat -c %a "$d")"
done
tok=$sb/demo/boot/token
[ "$(stat -c %a "$tok")" = 600 ] || fail "token mode $(stat -c %a "$tok")"
[ "$(wc -c <"$tok")" -eq 44 ] || fail "token is not 44 bytes"
token1=$(cat "$tok")
pid1=$(field demo agentPid)
gone "$pid1" && fail "agent $pid1 is not running"
# No path of the sandbox, and nothing secret, on its command line.
cmdline=$(tr '\0' ' ' <"/proc/$pid1/cmdline")
case $cmdline in
*"$STATE"* | *"$token1"*) fail "the agent's command line: $cmdline" ;;
esac
if command -v curl >/dev/null 2>&1; then
	code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" \
		"http://localhost/v1/health?version=1")
	[ "$code" = 200 ] || fail "health answered $code"
fi

ctl 0 ls
line=$(awk '$1 == "demo" { print $2, $3, $4 }' "$OUT")
[ "$line" = "Running agent $url" ] || fail "ls row: $line"
head -1 "$OUT" | grep -q '^NAME  *STATE  *TRANSPORT  *URL$' || fail "ls header"
ctl 0 ls --json
has_out '"id": "demo"'
has_out '"id": "nat"'
grep -q -- "$token1" "$OUT" && fail "ls --json shows the credential"

ctl 0 status demo
has_out "^state: *Running$"
has_out "^agent: *pid $pid1, alive$"
has_out "^health: *awaiting-network-verification\|^health: *ready"
ctl 0 status demo --json
has_out '"agentAlive": true'
has_out '"protocolVersion": 1'
grep -q -- "$token1" "$OUT" && fail "status --json shows the credential"

ctl 0 start demo
[ "$(field demo agentPid)" = "$pid1" ] || fail "a second start made a new boot"

# ---- restart: new credential, same socket ---------------------------------
ctl 0 restart demo
has_out "demo: running at $url"
[ "$(cat "$tok")" != "$token1" ] || fail "restart kept the credential"
gone "$pid1" || fail "restart left agent $pid1 running"
[ "$(field demo bootCount)" = 2 ] || fail "bootCount after restart"

# ---- rm is refused while running ------------------------------------------
ctl 1 rm demo
has_err "sandbox 'demo' is running"
[ -d "$sb/demo" ] || fail "rm removed a running sandbox"

# ---- stop -----------------------------------------------------------------
pid2=$(field demo agentPid)
ctl 0 stop demo
has_out "demo: stopped"
gone "$pid2" || fail "stop left agent $pid2 running"
[ ! -e "$tok" ] || fail "stop left the token"
[ "$(field demo state)" = Stopped ] || fail "demo is not Stopped"
grep -q agentUrl "$sb/demo/sandbox.json" && fail "stop kept agentUrl"
ctl 0 status demo
has_out "^url: *-$"
ctl 0 stop demo

# ---- an agent that died: said so, started again -----------------------------
ctl 0 start demo
pid3=$(field demo agentPid)
kill -KILL "$pid3"
n=0
while ! gone "$pid3" && [ $n -lt 50 ]; do
	sleep 0.1
	n=$((n + 1))
done
n=0
until "$CTL" --state-dir "$STATE" status demo | grep -q "agent died" || [ $n -ge 50 ]; do
	sleep 0.1
	n=$((n + 1))
done
ctl 0 status demo
has_out "^state: *Stopped (its agent died"
has_out "^agent: *pid $pid3, died$"
ctl 0 status demo --json
has_out '"state": "Stopped"'
has_out '"agentAlive": false'
ctl 0 ls
[ "$(awk '$1 == "demo" { print $2, $3, $4, $5, $6, $7 }' "$OUT")" = "Stopped agent - (its agent died)" ] ||
	fail "ls row after kill -9: $(cat "$OUT")"
ctl 0 rm demo
has_out "demo: removed"
ctl 0 create demo
ctl 0 start demo

# ---- rm -f ----------------------------------------------------------------
pid3=$(field demo agentPid)
ctl 0 rm -f demo
has_out "demo: removed"
[ ! -e "$sb/demo" ] || fail "rm -f left $sb/demo"
gone "$pid3" || fail "rm -f left agent $pid3 running"

# ---- native sessions --------------------------------------------------------
ctl 0 start nat
has_out "nat: running (native)"
[ "$(field nat state)" = Running ] || fail "nat is not Running"
grep -q agentUrl "$sb/nat/sandbox.json" && fail "nat has an agentUrl"
ctl 0 ls
[ "$(awk '$1 == "nat" { print $2, $3, $4 }' "$OUT")" = "Running native -" ] ||
	fail "ls row for nat"
ctl 0 stop nat

# ---- missing and corrupt ------------------------------------------------------
for cmd in start stop restart status rm; do
	ctl 1 $cmd nope
	has_err "no sandbox 'nope'"
done
echo '{"id": "nat", "state": ' >"$sb/nat/sandbox.json"
ctl 1 status nat
has_err "corrupt record $sb/nat/sandbox.json"
ctl 1 start nat
has_err "corrupt record $sb/nat/sandbox.json"
ctl 1 ls
has_err "corrupt record $sb/nat/sandbox.json"
has_out "copy"
ctl 1 rm nat
has_err "rm -f"
ctl 0 rm --force nat
[ ! -e "$sb/nat" ] || fail "rm --force left a corrupt sandbox"

# ---- an agent that does not start ---------------------------------------------
mkdir "$TMP/bad"
printf '#!/bin/sh\necho "cannot start: broken on purpose" >&2\nexit 1\n' >"$TMP/bad/sandbox-agent"
chmod 755 "$TMP/bad/sandbox-agent"
SANDBOXFS_AGENT=$TMP/bad/sandbox-agent
ctl 1 start copy
SANDBOXFS_AGENT=$AGENT
has_err "agent.log"
grep -q "broken on purpose" "$sb/copy/agent.log" || fail "agent.log lacks the agent's words"
[ "$(field copy state)" = Stopped ] || fail "a failed start is not Stopped"
ctl 0 rm copy

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all sandboxctl checks passed"
exit 0
