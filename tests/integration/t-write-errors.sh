#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-write-errors: write errors stick (SEMANTICS.md). A writer whose
# gathered bytes could not be stored (its agent was killed) is told at
# its next write, and from then on every write, fsync and close of that
# open file fails, also after the agent is back: the file in the sandbox
# holds what was stored before the loss and nothing after it, never a
# hole. A descriptor opened after the loss works normally.

. "$(dirname "$0")/lib.sh"

one_sandbox
mount_fs timeout=3,connect_timeout=1,write_window=1

# One process holds the file open and acts on commands from a FIFO: "w"
# writes the next 256 KiB chunk (chunk k is the letter 64+k repeated),
# "f" fsyncs, "c" closes; it prints one line per command with the
# result. perl-base is part of every Debian.
mkfifo "$TMP/cmd" || die "mkfifo"
w perl -e '
	use Fcntl;
	use IO::Handle;
	$| = 1;
	sysopen(my $f, $ARGV[0], O_WRONLY | O_CREAT | O_TRUNC, 0644)
		or die "open: $!\n";
	my $k = 0;
	while (my $c = <STDIN>) {
		chomp $c;
		if ($c eq "w") {
			$k++;
			my $r = syswrite($f, chr(64 + $k) x 262144);
			print defined($r) ? "write $k: ok\n" : "write $k: $!\n";
		} elsif ($c eq "f") {
			print $f->sync ? "fsync: ok\n" : "fsync: $!\n";
		} elsif ($c eq "c") {
			print close($f) ? "close: ok\n" : "close: $!\n";
			exit 0;
		}
	}
' "$F/log" <"$TMP/cmd" >"$TMP/writer.out" 2>"$TMP/writer.err" &
WPID=$!
exec 4>"$TMP/cmd"

# cmd C: send a command, wait for its answer line, put it in $REPLY.
n_out=0
have_lines() {
	[ "$(wc -l <"$TMP/writer.out")" -ge "$1" ]
}
cmd() {
	printf '%s\n' "$1" >&4
	n_out=$((n_out + 1))
	wait_for 30 have_lines "$n_out" ||
		die "the writer did not answer '$1': $(cat "$TMP/writer.err")"
	REPLY=$(sed -n "${n_out}p" "$TMP/writer.out")
}

for k in 1 2 3 4; do
	cmd w
	assert_eq "write $k: ok" "$REPLY" "write $k before the loss"
done
cmd f
assert_eq "fsync: ok" "$REPLY" "fsync before the loss"
assert_eq $((4 * 262144)) "$(stat -c %s "$B/log")" "stored before the loss"

# Chunk 5 is gathered (the write succeeds), then the agent dies before
# the gathering window sends it: those bytes are lost.
cmd w
assert_eq "write 5: ok" "$REPLY" "write 5 (gathered)"
pid=$(sbx_agent_pid a)
kill -KILL "$pid"
wait_gone "$pid" 10 || die "the agent did not die"
sleep 4
# The agent comes back (a new boot, a new credential).
sbx_start a

# Every later call on this open file fails; none succeeds past the loss.
for k in 6 7 8; do
	cmd w
	case $REPLY in
	"write $k: ok") fail "write $k succeeded after bytes of the file were lost" ;;
	"write $k: "*) ;;
	*) fail "write $k: unexpected answer '$REPLY'" ;;
	esac
done
cmd f
[ "$REPLY" = "fsync: ok" ] && fail "fsync succeeded after bytes of the file were lost"
cmd c
[ "$REPLY" = "close: ok" ] && fail "close succeeded after bytes of the file were lost"
note "after the loss: $(sed -n '6,$p' "$TMP/writer.out" | tr '\n' ';')"
wait "$WPID"
exec 4>&-

# The sandbox has chunks 1-4 and nothing else: no hole, no later chunk.
assert_eq $((4 * 262144)) "$(stat -c %s "$B/log")" "the file's size in the sandbox"
perl -e 'for my $k (1..4) { print chr(64 + $k) x 262144 }' >"$TMP/want"
assert_file_eq "$TMP/want" "$B/log" "the file's bytes in the sandbox"

# A new descriptor starts clean.
printf 'fresh\n' >"$TMP/fresh"
w cp "$TMP/fresh" "$F/log" || fail "a new writer after the loss"
assert_content "$B/log" "fresh" "the file after a new writer"

# The loss is logged as a warning once the agent is gone.
allow_log 'sandbox a: write log|sandbox a:'
finish
