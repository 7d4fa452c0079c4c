#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-example-grep: examples/grep-all-sandboxes finds a pattern in the files
# of every sandbox of a real mount, and only there.

. "$(dirname "$0")/lib.sh"

need_fuse

EX=$SBFS_SRCDIR/examples/grep-all-sandboxes
[ -f "$EX" ] || hard_error "$EX is missing"

mkdir -p "$TMP/s1/sub" "$TMP/s2"
printf 'nothing\nthe NEEDLE is here\n' >"$TMP/s1/sub/a.txt"
printf 'no match\n' >"$TMP/s1/b.txt"
printf 'a needle, lower case\n' >"$TMP/s2/c.txt"
sbx_create s1 --from "$TMP/s1"
sbx_create s2 --from "$TMP/s2"
sbx_start s1
sbx_start s2
mount_fs

with_timeout 10 sh "$EX" >/dev/null 2>"$TMP/err"
assert_eq 2 "$?" "exit status without arguments"
grep -q '^usage: grep-all-sandboxes PATTERN MOUNT' "$TMP/err" || fail "no usage line"

with_timeout 60 sh "$EX" NEEDLE "$MNT" >"$TMP/out" 2>"$TMP/err"
assert_eq 0 "$?" "exit status with a match: $(cat "$TMP/err")"
assert_content "$TMP/out" "$MNT/s1/files/sub/a.txt:the NEEDLE is here" "the match"
with_timeout 60 sh "$EX" needle "$MNT/" -i -l >"$TMP/out" 2>"$TMP/err"
assert_eq 0 "$?" "exit status with grep options"
assert_eq "$MNT/s1/files/sub/a.txt $MNT/s2/files/c.txt" \
	"$(LC_ALL=C sort "$TMP/out" | tr '\n' ' ' | sed 's/ $//')" "matches with -i -l"
with_timeout 60 sh "$EX" no-such-text "$MNT" >"$TMP/out" 2>&1
assert_eq 1 "$?" "exit status without a match"

finish
