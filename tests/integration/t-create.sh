#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-create: a new file in a directory whose listing the mount holds is
# created with its first upload (one request for its bytes, mode and
# times), at the latest when it is closed. Each case checks the backing
# root: nothing before the close, everything after it; what a second
# descriptor, stat, mv and rm see in between; an empty file; a read-only
# mode; times from tar; and an exclusive create that lost the race to the
# sandbox, which must fail at close and leave the sandbox's file alone;
# a read-only directory (root fills it, another owner is refused at
# open); and the
# gathering window, which sends bytes of a file still open.

. "$(dirname "$0")/lib.sh"

one_sandbox
# The listing a create consults is as fresh as attr_timeout: long enough
# here for a slow machine (valgrind) to get from one step to the next. So
# is the gathering window, so that "nothing before the close" holds
# however slow the machine is.
mount_fs attr_timeout=60,entry_timeout=60,write_window=60

# A directory made through the mount: its (empty) listing is known.
w mkdir "$F/d" || die "mkdir through the mount"

# One process holds the file open throughout, with one descriptor (a
# shell's redirections and dd close copies of theirs, and each close is a
# flush): perl (perl-base is part of every Debian) copies what the test
# feeds it through a FIFO, so the test decides when the bytes come and
# when the descriptor closes; a failed close is its exit status.
mkfifo "$TMP/fifo" || die "mkfifo"
# writer_start FILE [excl]
writer_start() {
	WFILE=$1
	w ls "$F/d" >/dev/null || fail "ls d"
	w perl -e '
		use Fcntl;
		my $fl = O_WRONLY | O_CREAT | ($ARGV[1] ? O_EXCL : 0);
		sysopen(my $f, $ARGV[0], $fl, 0644) or die "open: $!\n";
		while (my $n = sysread(STDIN, my $b, 65536)) {
			defined(syswrite($f, $b)) or die "write: $!\n";
		}
		close($f) or die "close: $!\n";
	' "$1" "${2:+1}" <"$TMP/fifo" 2>"$TMP/dd.err" &
	WPID=$!
	exec 4>"$TMP/fifo"
}
# writer_put TEXT SIZE: SIZE is what the mount must show for the file
# after dd wrote TEXT (stat of a file not created yet must not create it).
writer_put() {
	printf '%s' "$1" >&4
	WSIZE=$2
	wait_for 10 writer_wrote || fail "$WFILE never showed size $2"
}
writer_wrote() {
	[ "$(w stat -c %s "$WFILE" 2>/dev/null)" = "$WSIZE" ]
}
# writer_end: close; dd's exit status
writer_end() {
	exec 4>&-
	wait "$WPID"
}

# ---- bytes go with the create, at close ----------------------------------------
writer_start "$F/d/new"
writer_put 'hello' 5
[ -e "$B/d/new" ] && fail "d/new exists in the sandbox before its close"
writer_end || fail "writing d/new: $(cat "$TMP/dd.err")"
assert_content "$B/d/new" "hello" "d/new after close"
assert_eq "644" "$(stat -c %a "$B/d/new")" "mode of d/new"
assert_eq "5 regular file" "$(w stat -c '%s %F' "$F/d/new")" "stat of d/new"

# ---- a second descriptor sees what the first wrote ----------------------------
writer_start "$F/d/two"
writer_put 'abc' 3
assert_content "$F/d/two" "abc" "d/two read while open"
writer_put 'def' 6
writer_end || fail "writing d/two: $(cat "$TMP/dd.err")"
assert_content "$B/d/two" "abcdef" "d/two after close"

# ---- mv while pending ----------------------------------------------------------
writer_start "$F/d/mv1"
writer_put 'x' 1
w mv "$F/d/mv1" "$F/d/mv2" || fail "mv of a pending file"
WFILE=$F/d/mv2
writer_put 'y' 2
writer_end || fail "writing d/mv1: $(cat "$TMP/dd.err")"
[ -e "$B/d/mv1" ] && fail "d/mv1 still there after mv"
assert_content "$B/d/mv2" "xy" "d/mv2 after close"

# ---- rm while pending: nothing reaches the sandbox, no error -------------------
writer_start "$F/d/gone"
writer_put 'x' 1
w rm "$F/d/gone" || fail "rm of a pending file"
[ -e "$F/d/gone" ] && fail "d/gone still shows in the mount after rm"
printf 'y' >&4
sleep 0.3
writer_end || fail "writing a removed file: $(cat "$TMP/dd.err")"
[ -e "$B/d/gone" ] && fail "d/gone reached the sandbox after rm"
# The name is free again, for a new file.
printf 'again\n' >"$F/d/gone" || fail "create d/gone again"
assert_content "$B/d/gone" "again" "d/gone created again"

# ---- an empty file and a read-only one -----------------------------------------
w touch "$F/d/empty" || fail "touch d/empty"
assert_eq "0" "$(stat -c %s "$B/d/empty" 2>&1)" "d/empty in the sandbox"
printf 'ro' >"$TMP/ro"
chmod 0444 "$TMP/ro"
w cp "$TMP/ro" "$F/d/ro" || fail "cp of a read-only file"
assert_content "$B/d/ro" "ro" "d/ro"
assert_eq "444" "$(stat -c %a "$B/d/ro")" "mode of d/ro"

# ---- tar: bytes, modes and times, one request a file ---------------------------
mkdir -p "$TMP/src/sub"
for i in 1 2 3 4 5 6 7 8; do
	head -c $((i * 3000)) /dev/urandom >"$TMP/src/sub/f$i"
	touch -d "2001-02-0$i 03:04:05.123456789" "$TMP/src/sub/f$i"
done
chmod 0600 "$TMP/src/sub/f3"
w mkdir "$F/d/t" || fail "mkdir d/t"
(cd "$TMP/src" && tar -cf - .) | w tar -C "$F/d/t" -xf - || fail "tar x into the mount"
for i in 1 2 3 4 5 6 7 8; do
	assert_file_eq "$TMP/src/sub/f$i" "$B/d/t/sub/f$i" "sub/f$i from tar"
	assert_eq "$(stat -c '%a %Y' "$TMP/src/sub/f$i")" \
		"$(stat -c '%a %Y' "$B/d/t/sub/f$i")" "mode and mtime of sub/f$i"
done

# ---- an exclusive create that loses to the sandbox -----------------------------
# The sandbox's own file appears between dd's open (O_EXCL) and its close:
# the close must fail and the sandbox's file stay as it was.
writer_start "$F/d/race" excl
writer_put 'mine' 4
printf 'theirs\n' >"$B/d/race"
if writer_end; then
	fail "the close succeeded though the sandbox made d/race first"
else
	grep -q 'File exists' "$TMP/dd.err" ||
		fail "the writer's error: wanted 'File exists', got '$(cat "$TMP/dd.err")'"
fi
assert_content "$B/d/race" "theirs" "the sandbox's d/race"
allow_log 'd/race'

# ---- a read-only directory: what its owner may do natively -----------------------
# Root's sandbox gives root's access (a 0555 directory can be filled, as
# a native copy can be); another owner's agent may not write it, and the
# create must then fail where it was asked (open, so touch and the shell
# see EACCES), not at close, leaving nothing behind.
mkdir "$B/rodir"
chown --reference="$B" "$B/rodir"
chmod 0555 "$B/rodir"
w ls "$F/rodir" >/dev/null || fail "ls rodir"
if [ "$(id -u)" -eq 0 ]; then
	w touch "$F/rodir/x" || fail "root's touch in a 0555 directory of its sandbox"
	assert_eq "$(stat -c %u "$B")" "$(stat -c %u "$B/rodir/x" 2>&1)" \
		"owner of a file root made in rodir"
else
	assert_errno 'Permission denied' touch "$F/rodir/x"
	assert_errno 'Permission denied' sh -c "echo x >'$F/rodir/y'"
	[ -e "$B/rodir/x" ] && fail "rodir/x was made"
	assert_errno 'No such file or directory' stat "$F/rodir/x"
	allow_log 'rodir'
fi

# ---- the gathering window: bytes reach the sandbox without a close --------------
umount_fs
mount_fs write_window=1
w mkdir "$F/win" || fail "mkdir win"
writer_start "$F/win/slow"
writer_put 'early' 5
wait_for 10 test -s "$B/win/slow" ||
	fail "win/slow did not reach the sandbox within the window while open"
assert_content "$B/win/slow" "early" "win/slow while still open"
writer_end || fail "writing win/slow: $(cat "$TMP/dd.err")"

finish
