#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-warm: what a warm walk still asks the daemon. The kernel drops a
# file's attributes after every read it was answered (the access time may
# have moved), so after a cold pass that read every file, the next
# `find -printf` or `rsync -a` (a stat that wants the access time) would ask for each file's attributes again, one
# request per file. The mount lists such a directory to the kernel again
# instead (one request per page of entries, each entry with its
# attributes): the warm pass asks a handful of getattrs, not one per file,
# and its answers are still native's. Directories have no handles: a warm
# find sends no OPENDIR or RELEASEDIR.

. "$(dirname "$0")/lib.sh"

one_sandbox

N=40
mkdir "$B/w"
i=0
while [ $i -lt $N ]; do
	head -c $((i * 37 + 1)) /dev/urandom >"$B/w/f$i"
	i=$((i + 1))
done

# Long caches, and the kernel's requests in the log (-d).
mount_fs -d attr_timeout=600,entry_timeout=600,negative_timeout=600,cache_timeout=600
ls -l "$F/w" >/dev/null || fail "first listing"
wait_for 5 grep -q "change events followed" "$LOG" ||
	fail "the mount did not follow the sandbox's events"

# The cold pass: every file read once (so the kernel was answered reads).
for f in "$F"/w/*; do
	cat "$f" >/dev/null || fail "cat $f"
done

# requests_of OP CMD...: run CMD; how many OP requests the kernel sent
# meanwhile.
requests_of() {
	_op=$1
	shift
	_from=$(($(wc -l <"$LOG") + 1))
	"$@" >"$TMP/out" || fail "$*"
	sleep 0.2
	tail -n +"$_from" "$LOG" | grep -c "opcode: $_op "
}

getattrs_of() {
	requests_of GETATTR "$@"
}

sizes() { # DIR
	(cd "$1" && find . -type f -printf '%p %s %T@\n' | sort)
}

sizes "$B/w" >"$TMP/native"
n=$(getattrs_of sizes "$F/w")
note "a walk after the cold pass: $n getattrs for $N files"
[ "$n" -lt 5 ] || fail "a walk after reads asked $n getattrs (one per file read)"
assert_file_eq "$TMP/native" "$TMP/out" "sizes and times through the mount"
n=$(getattrs_of sizes "$F/w")
[ "$n" -lt 5 ] || fail "a second walk asked $n getattrs"
assert_file_eq "$TMP/native" "$TMP/out" "sizes and times, walked again"

# Directories have no handles: a warm walk opens none through the daemon
# (the kernel opens them itself), and still lists every name.
mkdir -p "$B/w/sub/deeper"
: >"$B/w/sub/deeper/leaf"
wait_for 3 test -e "$F/w/sub/deeper/leaf" || fail "a tree made inside the sandbox"
(cd "$B" && find w | sort) >"$TMP/native"
walk() { (cd "$F" && find w | sort); }
walk >/dev/null
n=$(requests_of OPENDIR walk)
assert_eq 0 "$n" "OPENDIR requests of a warm find"
n=$(requests_of RELEASEDIR walk)
assert_eq 0 "$n" "RELEASEDIR requests of a warm find"
assert_file_eq "$TMP/native" "$TMP/out" "the names a warm find lists"

# Still true: a change inside the sandbox shows through the kept listing.
printf 'longer now\n' >"$B/w/f3"
wait_for 3 sh -c "[ \"\$(stat -c %s '$F/w/f3')\" = 11 ]" ||
	fail "a change made inside the sandbox was not seen"

umount_fs
check_log
finish
