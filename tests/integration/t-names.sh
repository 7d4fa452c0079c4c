#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-names: open files whose names change under them, as the mount's node
# table (src/fs/ll.c, src/fs/inodes.c) must serve them. A descriptor of a
# file removed, or renamed over, through the mount keeps reading and
# writing that file (under a hidden name) and the hidden name is gone from
# the sandbox once the last descriptor closes; an atomic replacement
# (write a temporary, rename it over) never shows a concurrent opener a
# missing or mixed file; a directory renamed while a file in it is open
# keeps serving the descriptor; names looked up by the thousand are
# answered alike after the kernel forgets them.

. "$(dirname "$0")/lib.sh"

one_sandbox
mount_fs

hidden_names() {
	ls -A "$1" | grep '^\.fuse_hidden' | head -3
}
no_hidden_now() {
	[ -z "$(hidden_names "$1")" ]
}
# No hidden name left in the sandbox's directory $1 once the last close
# is served: the kernel sends the release after close(2) has returned.
no_hidden() {
	wait_for 10 no_hidden_now "$1" ||
		fail "$2: hidden names left in the sandbox: $(hidden_names "$1")"
}

# The file open on descriptor 3, which lost its name through the mount,
# still has the contents $1: opened again through the descriptor
# (/proc/PID/fd/N, as a program given /dev/stdin does), as on a local file
# system, and read through it. Then closed, and its hidden name gone.
fd3_keeps() {
	got=$(cat "/proc/$$/fd/3")
	assert_eq "$1" "$got" "$2 opened again by its descriptor"
	got=$(cat <&3)
	assert_eq "$1" "$got" "$2 read through its descriptor"
	exec 3<&-
	no_hidden "$B" "$3"
}

# 1. Removed while open for reading: the descriptor reads the old bytes.
printf 'old contents\n' >"$B/r"
exec 3<"$F/r" || die "open r"
assert_ok rm "$F/r"
[ -e "$F/r" ] && fail "rm: r still there"
[ -e "$B/r" ] && fail "rm: r still in the sandbox under its name"
fd3_keeps "old contents" "a removed file" "removed while open"

# 2. Renamed over while open: the descriptor keeps the old file, the name
# shows the new one.
printf 'first\n' >"$B/x"
printf 'second\n' >"$B/y"
exec 3<"$F/x" || die "open x"
assert_ok mv "$F/y" "$F/x"
assert_content "$F/x" "second" "the name after mv over an open file"
assert_content "$B/x" "second" "the sandbox's name after mv"
fd3_keeps "first" "the replaced file" "renamed over while open"

# 3. Removed while open for writing: writes still succeed, close is clean,
# nothing is left behind.
exec 4>"$F/wfile" || die "open wfile"
printf 'one\n' >&4 || fail "write before rm"
assert_ok rm "$F/wfile"
printf 'two\n' >&4 || fail "write after rm"
exec 4>&- || fail "close after rm"
[ -e "$B/wfile" ] && fail "wfile came back"
no_hidden "$B" "removed while open for writing"

# 4. A directory renamed while a file in it is open.
mkdir -p "$B/dir1"
printf 'inside\n' >"$B/dir1/f"
exec 3<"$F/dir1/f" || die "open dir1/f"
assert_ok mv "$F/dir1" "$F/dir2"
got=$(cat <&3)
assert_eq "inside" "$got" "a file read after its directory moved"
exec 3<&-
assert_content "$F/dir2/f" "inside" "the moved file by its new path"
assert_errno "No such file or directory" stat "$F/dir1/f"

# 5. Atomic replacement against readers that keep opening the name (an
# editor's save, every version written to .atomic.tmp and renamed over):
# every read is a whole version and every size a whole version's, none
# fails. Three readers, so that one reads a version while the writer
# swaps the next one in and hides the old one; an open, a read or a stat
# that resolved the old file's path while it moved must not land on the
# next temporary (empty) or fail with ESTALE.
printf 'version 0\n' >"$B/atomic"
replacer "$F/atomic" 1000
atomic_reader() {
	while alive "$writer"; do
		c=$(w cat "$F/atomic" 2>&1)
		case $c in
		"version "[0-9]*) echo ok ;;
		*) echo "bad: $(echo "$c" | head -c 80)" ;;
		esac
		s=$(w stat -c %s "$F/atomic" 2>&1)
		case $s in
		1[0-4]) ;;
		*) echo "bad size: $(echo "$s" | head -c 80)" ;;
		esac
	done >"$1"
}
atomic_reader "$TMP/reads1" &
r1=$!
atomic_reader "$TMP/reads2" &
r2=$!
atomic_reader "$TMP/reads3" &
r3=$!
wait "$r1" "$r2" "$r3"
reads=$(cat "$TMP/reads1" "$TMP/reads2" "$TMP/reads3" | wc -l)
bad=$(cat "$TMP/reads1" "$TMP/reads2" "$TMP/reads3" | grep -c '^bad')
grep -h '^bad' "$TMP/reads1" "$TMP/reads2" "$TMP/reads3" | head -3 |
	while read -r l; do
		note "reader saw: $l"
	done
wait "$writer" || fail "the renaming writer failed"
assert_eq 0 "$bad" "reads of a name replaced atomically that failed (of $reads)"
assert_content "$F/atomic" "version 1000" "the last version"
no_hidden "$B" "atomic replacement"

# 6. Many names: the kernel forgets what it looked up (drop_caches), and
# the same names are answered alike, with the same contents.
mkdir -p "$B/many"
i=0
while [ "$i" -lt 2000 ]; do
	echo "$i" >"$B/many/f$i"
	i=$((i + 1))
done
w find "$F/many" -type f | sort >"$TMP/find1"
assert_eq 2000 "$(wc -l <"$TMP/find1")" "files found"
sync
echo 2 >/proc/sys/vm/drop_caches
w find "$F/many" -type f | sort >"$TMP/find2"
cmp -s "$TMP/find1" "$TMP/find2" || fail "a second walk after forgetting differs"
assert_content "$F/many/f1234" "1234" "a file after the kernel forgot it"

finish
