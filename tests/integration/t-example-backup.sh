#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-example-backup: examples/sandbox-backup against a real mount of two
# sandboxes: a first snapshot equals each sandbox's files; a second one,
# after a change, holds the change while unchanged files are hard links
# into the first; latest names the newest; usage and errors.

. "$(dirname "$0")/lib.sh"

need_fuse
need_cmd rsync findmnt

EX=$SBFS_SRCDIR/examples/sandbox-backup
[ -f "$EX" ] || hard_error "$EX is missing"

mkdir -p "$TMP/src1/d" "$TMP/src2"
printf 'one\n' >"$TMP/src1/a.txt"
head -c 200000 /dev/urandom >"$TMP/src1/d/big.bin"
ln -s a.txt "$TMP/src1/link"
# Links that lead out of the sandbox: shown (and so backed up) rewritten
# to stay inside; they must not fail the backup.
ln -s /etc/hostname "$TMP/src1/out-abs"
ln -s ../../../../../etc "$TMP/src1/d/out-rel"
printf 'two\n' >"$TMP/src2/b.txt"
sbx_create s1 --from "$TMP/src1"
sbx_create s2 --from "$TMP/src2"
sbx_start s1
sbx_start s2
mount_fs
D=$TMP/backups

# ---- usage and errors ---------------------------------------------------------------------
with_timeout 10 sh "$EX" >/dev/null 2>"$TMP/err"
assert_eq 2 "$?" "exit status without arguments"
grep -q '^usage: sandbox-backup MOUNT DEST' "$TMP/err" || fail "no usage line: $(cat "$TMP/err")"
mkdir "$TMP/plain"
with_timeout 10 sh "$EX" "$TMP/plain" "$D" >/dev/null 2>"$TMP/err"
assert_eq 2 "$?" "exit status for a directory that is not a mount"
grep -q 'not a sandboxfs mount' "$TMP/err" || fail "error for a plain directory: $(cat "$TMP/err")"
[ -e "$D" ] && fail "a refused backup made $D"

# ---- the first snapshot -------------------------------------------------------------------
with_timeout 120 sh "$EX" "$MNT" "$D" >"$TMP/out" 2>"$TMP/err" ||
	fail "first backup: $(cat "$TMP/err")"
assert_eq 2 "$(wc -l <"$TMP/out")" "lines printed (one per sandbox)"
for s in s1 s2; do
	[ -L "$D/$s/latest" ] || fail "$s: no latest link"
	with_timeout 60 diff -r --no-dereference "$(sbx_root $s)" "$D/$s/latest/" >"$TMP/diff" 2>&1
	if grep -v -E 'out-abs|out-rel' "$TMP/diff" | grep -q .; then
		fail "$s: the snapshot differs: $(head -n 5 "$TMP/diff")"
	fi
done
first=$(readlink "$D/s1/latest")
assert_eq a.txt "$(readlink "$D/s1/latest/link")" "a symlink in the snapshot"
assert_eq etc/hostname "$(readlink "$D/s1/latest/out-abs")" "an absolute link in the snapshot"
assert_eq ../etc "$(readlink "$D/s1/latest/d/out-rel")" "a climbing link in the snapshot"
for p in "$D"/s1/*.partial; do
	[ -e "$p" ] && fail "a .partial directory was left: $p"
done

# ---- the second snapshot, after changes ----------------------------------------------------
sleep 1
printf 'one, changed\n' | with_timeout 30 tee "$MNT/s1/files/a.txt" >/dev/null || fail "change a.txt"
printf 'new\n' | with_timeout 30 tee "$MNT/s1/files/new.txt" >/dev/null || fail "write new.txt"
with_timeout 30 rm "$MNT/s2/files/b.txt" || fail "rm b.txt"
with_timeout 120 sh "$EX" "$MNT" "$D" >"$TMP/out" 2>"$TMP/err" ||
	fail "second backup: $(cat "$TMP/err")"
second=$(readlink "$D/s1/latest")
assert_ne "$first" "$second" "latest after the second backup"
assert_eq 2 "$(find "$D/s1" -mindepth 1 -maxdepth 1 -type d | wc -l)" "snapshots of s1"
assert_content "$D/s1/$second/a.txt" "one, changed" "the changed file in the new snapshot"
assert_content "$D/s1/$first/a.txt" one "the old snapshot is untouched"
assert_content "$D/s1/$second/new.txt" new "a new file in the new snapshot"
[ -e "$D/s2/latest/b.txt" ] && fail "a removed file is in the new snapshot"
s2first=$(find "$D/s2" -mindepth 1 -maxdepth 1 -type d | sort | head -n 1)
[ -e "$s2first/b.txt" ] || fail "the removed file is gone from the old snapshot"
# Unchanged files are shared with the previous snapshot.
assert_eq "$(stat -c %i "$D/s1/$first/d/big.bin")" "$(stat -c %i "$D/s1/$second/d/big.bin")" \
	"an unchanged file is a hard link into the previous snapshot"
assert_ne "$(stat -c %i "$D/s1/$first/a.txt")" "$(stat -c %i "$D/s1/$second/a.txt")" \
	"a changed file is a new file"

# ---- a failing sandbox does not stop the others ----------------------------------------------
umount_fs
mount_fs noautoresume
sbx_stop s2
with_timeout 120 sh "$EX" "$MNT" "$D" >"$TMP/out" 2>"$TMP/err"
assert_eq 1 "$?" "exit status when one sandbox fails"
grep -q '^s1: ' "$TMP/out" || fail "s1 was not saved when s2 failed"
grep -q 's2' "$TMP/err" || fail "the failure of s2 is not reported: $(cat "$TMP/err")"

allow_log 'Host is down|noautoresume|EHOSTDOWN'
finish
