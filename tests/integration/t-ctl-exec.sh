#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-ctl-exec: sandboxctl for everyday work, without a mount, against the
# build's real agents. exec: stdout and stderr exactly as the command
# wrote them, its exit status, 128+N for a signal death, the statuses of
# its own (a missing command, a timeout, a missing sandbox); 200,000,000
# random bytes arrive byte-exact with a small resident set; the first
# line arrives while the command still runs; SIGINT and SIGTERM cancel
# the job in the sandbox and exit 130/143, and so does a reader of its
# output that goes away (exit 141); a second SIGINT leaves at once
# even when the agent does not answer; an agent that dies mid-job is exit
# 122 with the reason, not a hang; a stopped sandbox is started. jobs:
# the jobs just run, with their exit codes, as a table and as JSON. A
# strict v1 agent (no flow control, no long-poll) still gives the streams
# and the status, and output its cap dropped is exit 122.
# create: SIGINT while copying leaves no sandbox and no directory; a
# progress line on a terminal and none otherwise; a create killed with
# SIGKILL shows as Creating and rm removes it.

. "$(dirname "$0")/lib.sh"

need_cmd sha256sum script
[ -x "$SBFS_CTL" ] || skip "$SBFS_CTL is not built"
[ -x "$SBFS_AGENT" ] || skip "$SBFS_AGENT is not built"
# A background job of a script starts with SIGINT ignored, and
# sandboxctl keeps an ignored signal ignored: give it the default back.
env --default-signal=INT true 2>/dev/null ||
	skip "env --default-signal is missing (coreutils 8.31 or later)"

OUT=$TMP/out
ERR=$TMP/err

# x RC ARGS...: sandboxctl exec ARGS, expecting exit status RC; its
# stdout in $OUT, its stderr in $ERR.
x() {
	_want=$1
	shift
	with_timeout 120 "$SBFS_CTL" --state-dir "$STATE" exec "$@" >"$OUT" 2>"$ERR"
	_rc=$?
	if [ "$_rc" -ne "$_want" ]; then
		fail "exec $*: exit $_rc, wanted $_want; stderr: $(head -c 400 "$ERR")"
	fi
}

# has FILE TEXT [WHAT]: FILE holds exactly TEXT, byte for byte.
has() {
	printf '%s' "$2" >"$TMP/want"
	cmp -s "$TMP/want" "$1" ||
		fail "${3:-$1}: wanted '$(od -c "$TMP/want" | head -3)', got '$(od -c "$1" | head -3)'"
}

# The state of the job whose command is exactly $1 (JSON), from `jobs --json`.
job_json() {
	ctl jobs sb --json | tr -d '\n' | sed 's/},{"jobId"/}\n{"jobId"/g' |
		grep -F "\"command\":$1"
}

sbx_create sb
sbx_start sb
ROOT=$(sbx_root sb)

# ---- exact streams and statuses ----------------------------------------------------
x 7 sb -- sh -c 'echo out; echo err >&2; exit 7'
has "$OUT" "out
" "stdout of the echo job"
has "$ERR" "err
" "stderr of the echo job"

# Confined, the command's init reports a signal death as 128+N; an
# unconfined agent says only -1, which sandboxctl documents as 255.
if grep -q 'commands run confined' "$(sbx_agent_log sb)"; then
	x 143 sb -- sh -c 'kill -TERM $$'
	x 137 sb -- sh -c 'kill -KILL $$'
else
	note "the agent runs commands unconfined: a signal death is 255"
	x 255 sb -- sh -c 'kill -TERM $$'
fi
x 127 sb -- no-such-command-here
grep -q 'No such file or directory' "$ERR" || fail "a missing command: stderr '$(cat "$ERR")'"
x 124 sb --timeout 1 -- sleep 30
grep -q 'timed out' "$ERR" || fail "a timeout: stderr '$(cat "$ERR")'"
x 125 nosuchsandbox -- true
grep -q "no sandbox 'nosuchsandbox'" "$ERR" || fail "a missing sandbox: stderr '$(cat "$ERR")'"
x 125 sb --bogus -- true
x 0 sb -- sh -c 'mkdir -p sub && echo hello >sub/f'
x 0 sb --cwd sub --env A=1 --env=B=two -- sh -c 'cat f; echo "$A $B"'
has "$OUT" "hello
1 two
" "--cwd and --env"
# A command word that looks like an option, after --.
x 0 sb -- sh -c 'echo "$0 $1"' -n --x
has "$OUT" "-n --x
" "option-like command words"
# Standard input is not forwarded: the command's is empty.
echo 'not for the sandbox' | with_timeout 60 "$SBFS_CTL" --state-dir "$STATE" exec sb -- cat >"$OUT" 2>"$ERR"
assert_eq 0 "$?" "exit of cat with a piped stdin"
has "$OUT" "" "cat's stdin in the sandbox"

# ---- 200,000,000 random bytes, whole, with a small resident set --------------------
TIMEV=""
[ -x /usr/bin/time ] && /usr/bin/time -v true >/dev/null 2>&1 && TIMEV="/usr/bin/time -v -o $TMP/time.txt"
# shellcheck disable=SC2086 # TIMEV is a word list
with_timeout 300 $TIMEV "$SBFS_CTL" --state-dir "$STATE" exec sb -- \
	sh -c 'head -c 200000000 /dev/urandom | tee big.bin' 2>"$ERR" |
	sha256sum >"$TMP/big.sum"
got=$(cut -d' ' -f1 "$TMP/big.sum")
want=$(sha256sum <"$ROOT/big.bin" | cut -d' ' -f1)
assert_eq 200000000 "$(wc -c <"$ROOT/big.bin")" "bytes the sandbox wrote"
assert_eq "$want" "$got" "sha256 of 200,000,000 bytes through exec"
has "$ERR" "" "stderr of the big job"
rm -f "$ROOT/big.bin"
if [ -n "$TIMEV" ]; then
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$TMP/time.txt")
	note "sandboxctl's peak RSS for 200,000,000 bytes of output: $rss kB"
	if ldd "$SBFS_CTL" 2>/dev/null | grep -q libasan; then
		# ASan keeps freed blocks in its quarantine (256 MB by default).
		note "built with AddressSanitizer: the bound is not checked"
	elif [ "$rss" -ge 65536 ]; then
		fail "sandboxctl's peak RSS was $rss kB for 200 MB of output"
	fi
else
	note "/usr/bin/time is not installed: the peak RSS was not measured"
fi

# ---- streaming: the first line before the end -----------------------------------------
"$SBFS_CTL" --state-dir "$STATE" exec sb -- sh -c 'echo a; sleep 5; echo b' >"$TMP/stream" 2>"$ERR" &
sp=$!
if wait_for 20 grep -q '^a$' "$TMP/stream"; then
	t_first=$(now_ms)
	wait "$sp"
	src=$?
	t_end=$(now_ms)
	assert_eq 0 "$src" "exit of the streaming job"
	has "$TMP/stream" "a
b
" "output of the streaming job"
	[ $((t_end - t_first)) -ge 2500 ] ||
		fail "the first line came $((t_end - t_first)) ms before the end: not streamed"
else
	fail "the first line of 'echo a; sleep 5; echo b' did not arrive within 20 s"
	wait "$sp"
fi

# ---- Ctrl-C and SIGTERM cancel the job in the sandbox ----------------------------------
# start_sleep SECONDS: exec `sleep SECONDS` in sb in the background (its pid in
# ip, SIGINT not ignored) and wait until the job runs in the sandbox.
start_sleep() {
	env --default-signal=INT "$SBFS_CTL" --state-dir "$STATE" exec sb -- sleep "$1" >"$OUT" 2>"$ERR" &
	ip=$!
	wait_for 20 sh -c "pgrep -x sleep -a | grep -q ' $1\$'" ||
		fail "the job 'sleep $1' did not start"
}

# interrupt SIGNAL STATUS SECONDS: exec `sleep SECONDS`, signal it while the job
# runs, expect STATUS and a cancelled job whose process is gone.
interrupt() {
	start_sleep "$3"
	kill -"$1" "$ip"
	reap "$ip" 20 "sandboxctl did not exit within 20 s of SIG$1"
	assert_eq "$2" "$?" "exit status after SIG$1"
	wait_for 10 sh -c "! pgrep -x sleep -a | grep -q ' $3\$'" ||
		fail "'sleep $3' still runs in the sandbox after SIG$1"
	job_json "[\"sleep\",\"$3\"]" | grep -q '"state":"cancelled"' ||
		fail "the job of SIG$1 is not cancelled: $(job_json "[\"sleep\",\"$3\"]")"
}
interrupt INT 130 1001
interrupt TERM 143 1002

# A second SIGINT leaves at once, even while the cancel waits for an agent
# that does not answer (stopped here).
apid=$(sbx_agent_pid sb)
start_sleep 1003
kill -STOP "$apid"
kill -INT "$ip"
sleep 1
kill -INT "$ip"
reap "$ip" 10 "a second SIGINT did not make sandboxctl exit within 10 s"
assert_eq 130 "$?" "exit status after a second SIGINT"
kill -CONT "$apid"
# Its cancel still goes out once the agent answers again.
wait_for 40 sh -c "! pgrep -x sleep -a | grep -q ' 1003\$'" ||
	fail "'sleep 1003' still runs after the agent came back"

# A reader that goes away (| head) cancels the job, as SIGPIPE would stop
# a local writer, and the status is SIGPIPE's.
{
	with_timeout 60 "$SBFS_CTL" --state-dir "$STATE" exec sb -- yes 1005 2>"$ERR"
	echo $? >"$TMP/pipe.rc"
} | head -c 5 >"$OUT"
has "$OUT" "1005
" "the head of 'yes 1005'"
assert_eq 141 "$(cat "$TMP/pipe.rc")" "exit status when stdout's reader went away"
wait_for 10 sh -c "! pgrep -x yes -a | grep -q ' 1005\$'" ||
	fail "'yes 1005' still runs in the sandbox after its reader went away"
job_json '["yes","1005"]' | grep -q '"state":"cancelled"' ||
	fail "the job of a departed reader is not cancelled: $(job_json '["yes","1005"]')"

# ---- jobs ------------------------------------------------------------------------------------
ctl jobs sb >"$TMP/jobs" 2>"$ERR" || fail "sandboxctl jobs: $(cat "$ERR")"
head -n 1 "$TMP/jobs" | grep -Eq '^ID +STATE +EXIT +STARTED +COMMAND$' ||
	fail "jobs header: $(head -n 1 "$TMP/jobs")"
grep -Eq "^[0-9a-f-]{36}  exited +7 +[0-9-]+ [0-9:]+  sh -c 'echo out; echo err >&2; exit 7'\$" "$TMP/jobs" ||
	fail "jobs lacks the exit-7 job: $(cat "$TMP/jobs")"
grep -Eq "^[0-9a-f-]{36}  failed +timeoutExceeded +[0-9-]+ [0-9:]+  sleep 30\$" "$TMP/jobs" ||
	fail "jobs lacks the timed-out job: $(cat "$TMP/jobs")"
grep -Eq "^[0-9a-f-]{36}  cancelled +- +[0-9-]+ [0-9:]+  sleep 1001\$" "$TMP/jobs" ||
	fail "jobs lacks the cancelled job: $(cat "$TMP/jobs")"
j=$(job_json '["sh","-c","echo out; echo err >&2; exit 7"]')
case $j in
*'"state":"exited"'*'"exitCode":7'*) ;;
*) fail "jobs --json, the exit-7 job: $j" ;;
esac
ctl jobs sb --json | grep -q '"complete":true}$' || fail "jobs --json: no complete member"

# ---- an agent without flow control (strict v1) ---------------------------------------------------
sbx_create old --strict-v1
x 3 old -- sh -c 'echo hi; echo ho >&2; exit 3'
has "$OUT" "hi
" "stdout through a strict v1 agent"
has "$ERR" "ho
" "stderr through a strict v1 agent"
# Its output cap dropped the rest: that is no success.
x 122 old -- head -c 5000000 /dev/zero
grep -q 'dropped part of the output' "$ERR" || fail "a capped output: stderr '$(cat "$ERR")'"
sbx_stop old

# ---- a dead agent mid-job ---------------------------------------------------------------------
start_sleep 1004
kill -KILL "$(sbx_agent_pid sb)"
reap "$ip" 20 "sandboxctl did not notice its agent's death within 20 s"
assert_eq 122 "$?" "exit status when the agent dies mid-job"
grep -q 'agent.*gone' "$ERR" || fail "the reason for a dead agent: '$(cat "$ERR")'"

# ---- a stopped (or dead) sandbox is started ---------------------------------------------------
x 0 sb -- echo again
has "$OUT" "again
" "exec after the agent died"
sbx_stop sb
x 0 sb -- echo started
has "$OUT" "started
" "exec on a stopped sandbox"
assert_eq Running "$(sbx_field sb state)" "state after exec on a stopped sandbox"
sbx_stop sb

# ---- create: progress on a terminal only, an interrupted create leaves nothing ------------------
mkdir -p "$TMP/src/d"
for i in 1 2 3 4 5 6 7 8 9 10; do echo "$i" >"$TMP/src/d/f$i"; done
with_timeout 60 script -qfec "$SBFS_CTL --state-dir $STATE create tty1 --from $TMP/src" /dev/null >"$TMP/pty" 2>&1 ||
	fail "create under script: $(cat "$TMP/pty")"
grep -q 'tty1: copied 10 files' "$TMP/pty" || fail "no progress line on a terminal: '$(od -c "$TMP/pty" | head -5)'"
ctl create notty --from "$TMP/src" >"$OUT" 2>"$ERR" || fail "create notty: $(cat "$ERR")"
has "$ERR" "" "create's stderr when it is not a terminal"
has "$OUT" "notty: created (agent)
" "create's stdout"

# A big file whose copy takes seconds (sparse here, not in the copy).
mkdir -p "$TMP/bigsrc"
truncate -s 1G "$TMP/bigsrc/big" || hard_error "truncate"
entries() {
	ls -A "$STATE/sandboxes" | tr '\n' ' '
}
# start_create NAME: create NAME from the big file in the background (its pid
# in cp, SIGINT not ignored) and wait until the copy has begun.
start_create() {
	env --default-signal=INT "$SBFS_CTL" --state-dir "$STATE" create "$1" --from "$TMP/bigsrc" >"$OUT" 2>"$ERR" &
	cp=$!
	wait_for 30 test -e "$STATE/sandboxes/$1/root/big" || fail "the copy of the big file did not start"
}
before=$(entries)
start_create cut
kill -INT "$cp"
reap "$cp" 30 "an interrupted create did not end within 30 s"
assert_eq 130 "$?" "exit status of an interrupted create"
grep -q 'cut: interrupted' "$ERR" || fail "the interrupted create's message: '$(cat "$ERR")'"
ctl ls | grep -q '^cut ' && fail "an interrupted create is listed: $(ctl ls)"
assert_eq "$before" "$(entries)" "the state directory after an interrupted create"

# A create killed outright stays Creating, shown as such, and rm removes it.
start_create dead
kill -KILL "$cp"
wait "$cp" 2>/dev/null
ctl ls | grep -Eq '^dead +Creating ' || fail "a killed create is not listed as Creating: $(ctl ls)"
ctl status dead | grep -q '^state: *Creating$' || fail "status of a killed create: $(ctl status dead)"
ctl rm dead >"$OUT" 2>"$ERR" || fail "rm of a killed create: $(cat "$ERR")"
assert_eq "$before" "$(entries)" "the state directory after rm of a killed create"

finish
