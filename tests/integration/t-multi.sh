#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-multi: several sandboxes in one mount. ls MOUNT shows each; each has
# its own files and its own jobs; a rename or link between them is EXDEV;
# a sandbox created while mounted appears; one removed while mounted
# (sandboxctl rm -f) gives ENOENT under its directory while the other
# keeps working.

. "$(dirname "$0")/lib.sh"

need_fuse

sbx_create one
sbx_create two
sbx_start one
sbx_start two
mount_fs list_cache=0

assert_eq "one two" "$(w ls "$MNT" | tr '\n' ' ' | sed 's/ $//')" "ls MOUNT"
printf 'I am one\n' | w tee "$MNT/one/files/who" >/dev/null || fail "write one/who"
printf 'I am two\n' | w tee "$MNT/two/files/who" >/dev/null || fail "write two/who"
assert_content "$(sbx_root one)/who" "I am one" "one's file on disk"
assert_content "$(sbx_root two)/who" "I am two" "two's file on disk"
assert_content "$MNT/one/files/who" "I am one" "one's file"
assert_content "$MNT/two/files/who" "I am two" "two's file"
w grep -q '"id": *"one"' "$MNT/one/info" || fail "one's info"
w grep -q '"id": *"two"' "$MNT/two/info" || fail "two's info"

# Jobs run in their own sandbox.
w sh -c "echo 'cat who' >'$MNT/one/exec'" || fail "exec in one"
w sh -c "echo 'cat who' >'$MNT/two/exec'" || fail "exec in two"
assert_content "$MNT/one/jobs/latest/stdout" "I am one" "a job of one"
assert_content "$MNT/two/jobs/latest/stdout" "I am two" "a job of two"
assert_ne "$(w readlink "$MNT/one/jobs/latest")" "" "one's latest job"
w ls "$MNT/two/jobs" | grep -qx "$(w readlink "$MNT/one/jobs/latest")" &&
	fail "two lists one's job"

# Nothing moves between sandboxes by rename or link.
# (rename(2) itself: mv would fall back to a copy.)
# shellcheck disable=SC2016 # perl code
assert_errno 'Invalid cross-device link' perl -e 'rename($ARGV[0], $ARGV[1]) or die "rename: $!\n"' \
	"$MNT/one/files/who" "$MNT/two/files/moved"
[ -e "$(sbx_root one)/who" ] || fail "a refused rename lost the file"
[ -e "$(sbx_root two)/moved" ] && fail "a file moved between sandboxes"
assert_errno 'Invalid cross-device link' ln "$MNT/one/files/who" "$MNT/two/files/hard"
# mv falls back to copying, which works.
assert_ok mv "$MNT/one/files/who" "$MNT/two/files/from-one"
assert_content "$(sbx_root two)/from-one" "I am one" "mv between sandboxes (a copy)"
[ -e "$(sbx_root one)/who" ] && fail "mv between sandboxes left the source"

# ---- a sandbox created while mounted ------------------------------------------------------
sbx_create three
sbx_start three
assert_eq "one three two" "$(w ls "$MNT" | tr '\n' ' ' | sed 's/ $//')" "ls MOUNT after a create"
printf 'three\n' | w tee "$MNT/three/files/x" >/dev/null || fail "write into the new sandbox"
assert_content "$(sbx_root three)/x" three "the new sandbox's file on disk"

# ---- a sandbox removed while mounted ------------------------------------------------------
# An open file and a current directory in it, as a shell would have.
exec 7<"$MNT/two/files/who" || fail "open two/who"
ctl rm -f two >/dev/null || fail "sandboxctl rm -f two"
[ -e "$STATE/sandboxes/two" ] && fail "rm -f left the sandbox's directory"
# Names may be entry_timeout (1 s) old.
sleep 1.2
assert_errno 'No such file or directory' ls "$MNT/two/files"
assert_errno 'No such file or directory' cat "$MNT/two/files/from-one"
assert_errno 'No such file or directory' cat "$MNT/two/info"
assert_errno 'No such file or directory' sh -c "echo x | dd of='$MNT/two/exec' status=none conv=notrunc"
assert_errno 'No such file or directory' stat "$MNT/two"
exec 7<&-
assert_eq "one three" "$(w ls "$MNT" | tr '\n' ' ' | sed 's/ $//')" "ls MOUNT after rm -f two"
printf 'still here\n' | w tee "$MNT/one/files/after" >/dev/null || fail "write into one after two went"
assert_content "$(sbx_root one)/after" "still here" "one still works"
w sh -c "echo 'echo fine' >'$MNT/one/exec'" || fail "exec in one after two went"
assert_content "$MNT/one/jobs/latest/stdout" fine "a job in one after two went"
# A new sandbox under the old name is a new sandbox.
sbx_create two
sleep 1.2
assert_ok ls -A "$MNT/two/files" &&
	assert_eq "" "$(cat "$TMP/assert.out")" "the files of a new sandbox with an old name"
assert_errno 'No such file or directory' cat "$MNT/two/files/from-one"

allow_log 'gone|No such|ENOENT|not found|NOT_FOUND'
finish
