#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-agent-route: a sandbox's credential goes to its agent only, and the
# agent cannot be starved (doc/security.md). A second local user cannot
# put a socket where sandboxctl's agents listen; a record that names a
# socket of another user is refused before anything connects; a socket
# whose file was handed to the right user but whose listener is another
# user's is refused before a byte is sent; when an agent on a loopback
# TCP route (as another program may write) dies and another user takes
# its port, the mount sends that listener nothing. Many connections that
# trickle their headers do not keep a real client's health request from
# an answer, and ambiguous framing is answered 400.

. "$(dirname "$0")/lib.sh"

need_fuse
need_root "a second local user (setpriv)"
need_cmd setpriv
HOSTILE=$SBFS_BUILDDIR/tests/integration/hostile
programs_for_others
[ -x "$HOSTILE" ] || die "$HOSTILE is not built"

OTHER=64126
# The second user works in this test's directory.
chmod 0711 "$TMP"
AS_OTHER="setpriv --reuid=$OTHER --regid=$OTHER --clear-groups"
ODIR=$TMP/other
mkdir "$ODIR" && chown "$OTHER:$OTHER" "$ODIR" && chmod 0700 "$ODIR" ||
	hard_error "cannot make $ODIR"

# A record as another program writes it: Running at url, a credential.
write_record() {
	printf '{\n  "id": "%s",\n  "state": "Running",\n  "labels": {\n    "alienAgentTransport": "native-file-v1"\n  },\n  "agentUrl": "%s"\n}\n' \
		"$1" "$2" >"$STATE/sandboxes/$1/sandbox.json"
}
new_token() {
	head -c 32 /dev/urandom | base64 | tr -d '\n' >"$STATE/sandboxes/$1/boot/token"
	chmod 0600 "$STATE/sandboxes/$1/boot/token"
}
unix_url() {
	echo "http+unix://$(printf '%s' "$1" | sed 's#/#%2F#g')/"
}

# ---- another user's socket -------------------------------------------------------------
sbx_create f
FB=$STATE/sandboxes/f/boot
# It cannot make one where the agents listen.
assert_errno 'Permission denied' $AS_OTHER "$HOSTILE" listen "unix:$FB/agent.sock" "$ODIR/x.log"
bg $AS_OTHER "$HOSTILE" listen "unix:$ODIR/evil.sock" "$ODIR/unix.log"
wait_for 10 test -S "$ODIR/evil.sock" || die "the stand-in did not listen"
# Put there by someone who could (the owner, by mistake), it stays the
# other user's socket.
mv "$ODIR/evil.sock" "$FB/agent.sock"
new_token f
write_record f "$(unix_url "$FB/agent.sock")"
mount_fs
assert_errno 'Protocol error' ls "$MNT/f/files"
grep -q "belongs to uid $OTHER" "$LOG" || fail "the log does not say whose socket it is"
grep -q connection "$ODIR/unix.log" && fail "the mount connected to another user's socket"
# The file handed to the right user, the listener still the other's.
chown -h root:root "$FB/agent.sock"
assert_errno 'Protocol error' cat "$MNT/f/files/x"
grep -q "runs as uid $OTHER" "$LOG" || fail "the log does not say who listens"
grep -Eqi 'Authorization|Bearer|GET|POST' "$ODIR/unix.log" &&
	fail "the stand-in got a request: $(cat "$ODIR/unix.log")"
grep -qF "$(cat "$FB/token")" "$ODIR/unix.log" && fail "the stand-in got the credential"

# ---- a dead agent's TCP port, taken --------------------------------------------------------
sbx_create t
TR=$(sbx_root t)
echo hello >"$TR/hello"
chmod 0644 "$TR/hello"
# A port outside the kernel's ephemeral range: once the agent is dead, no
# connection made meanwhile (by this test or another) can be holding it
# as its local port, and the other user binds it at once.
# (dash's read takes a byte at a time, and a sysctl file read at an offset
# says end of file: cat reads it whole.)
# shellcheck disable=SC2046 # two numbers
set -- $(cat /proc/sys/net/ipv4/ip_local_port_range)
eph_low=$1
eph_high=$2
band_low=10000
band=$((eph_low - band_low))
if [ "$band" -lt 1000 ]; then
	band_low=$((eph_high + 1))
	band=$((65536 - band_low))
fi
[ "$band" -gt 0 ] || skip "no port outside the ephemeral range $eph_low-$eph_high"
tries=0
while :; do
	tries=$((tries + 1))
	[ "$tries" -le 20 ] || die "no free port outside the ephemeral range for the agent"
	port=$((band_low + $(od -An -N2 -tu2 /dev/urandom) % band))
	rm -f "$TMP/t.port"
	bg "$SBFS_AGENT" --root "$TR" --port "$port" --port-file "$TMP/t.port" \
		--token-file "$STATE/sandboxes/t/boot/token" --confine none
	apid=$BG_PID
	wait_for 10 sh -c "test -s '$TMP/t.port' || ! kill -0 $apid 2>/dev/null"
	[ -s "$TMP/t.port" ] && break
done
assert_eq "$port" "$(cat "$TMP/t.port")" "the port the agent listens on"
write_record t "http://127.0.0.1:$port/"
assert_content "$MNT/t/files/hello" hello "a read through a TCP route"
kill -KILL "$apid"
wait_gone "$apid" 5 || die "the agent did not die"
bg $AS_OTHER "$HOSTILE" listen "tcp:$port" "$ODIR/tcp.log"
wait_for 10 grep -q listening "$ODIR/tcp.log" || die "the other user could not take port $port"
assert_errno 'Protocol error' cat "$MNT/t/files/hello"
assert_errno 'Protocol error' ls "$MNT/t/files"
grep -q "runs as uid $OTHER" "$LOG" || fail "the log does not say who listens on the port"
grep -Eqi 'Authorization|Bearer|GET|POST' "$ODIR/tcp.log" &&
	fail "the port's new listener got a request: $(head -c 300 "$ODIR/tcp.log")"
grep -qF "$(cat "$STATE/sandboxes/t/boot/token")" "$ODIR/tcp.log" &&
	fail "the port's new listener got the credential"
umount_fs

# ---- slowloris, and ambiguous framing -------------------------------------------------------
sbx_create s
sbx_start s
SOCK=unix:$STATE/sandboxes/s/boot/agent.sock
# More connections than the agent serves at once (512), each trickling
# a header byte a second, for 8 s; a health request every half second.
with_timeout 60 "$HOSTILE" slowloris "$SOCK" 700 8 >"$TMP/slow" ||
	fail "slowloris: $(cat "$TMP/slow")"
worst=$(sed -n 's/^worst //p' "$TMP/slow")
note "slowloris: the slowest health answer took ${worst} ms"
assert_eq 0 "$(sed -n 's/^failed //p' "$TMP/slow")" "health requests without a 200"
[ -n "$worst" ] && [ "$worst" -lt 2000 ] || fail "health took ${worst} ms among slow clients"
framing() {
	printf "POST /v1/mkdir HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n$1\r\nc\r\n{\"path\":\"x\"}\r\n0\r\n\r\n" |
		with_timeout 20 "$HOSTILE" raw "$SOCK"
}
assert_eq "HTTP/1.1 400 Bad Request" \
	"$(framing 'Content-Length: 12\r\nTransfer-Encoding: chunked\r\n')" \
	"Content-Length with chunked"
assert_eq "HTTP/1.1 400 Bad Request" \
	"$(framing 'Content-Length: 12\r\nContent-Length: 12\r\n')" \
	"a duplicated Content-Length"
assert_eq "HTTP/1.1 400 Bad Request" \
	"$(framing 'Content-Length: 12\r\nContent-Length: 13\r\n')" \
	"conflicting Content-Lengths"
[ -e "$(sbx_root s)/x" ] && fail "a request with ambiguous framing ran"

# The refusals above are the point of this test.
allow_log 'belongs to uid|runs as uid|refused|Protocol error|EPROTO|agentTransportInvalid|not a socket'
finish
