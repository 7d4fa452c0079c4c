#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-strict-v1: a sandbox whose agent speaks protocol v1 only
# (sandbox-agent --strict-v1, as alien's agent does: no file extension).
# The mount falls back to v1: listings and attributes through exec, whole
# files read at open and written at close. ls, stat, cat, cp, a write, mv,
# rm, mkdir and rmdir must work, and a file over the 32 MiB transfer limit
# gives EFBIG, reading and writing; a resume by the mount boots a strict
# agent again.

. "$(dirname "$0")/lib.sh"

need_fuse

# The record says so, and every boot (sandboxctl's or the mount's resume)
# starts the agent with --strict-v1.
sbx_create v1 --strict-v1
grep -q '"strictV1": *true' "$STATE/sandboxes/v1/sandbox.json" ||
	fail "the record does not say strictV1"
sbx_start v1
B=$(sbx_root v1)
F=$MNT/v1/files
mount_fs

# The agent really is strict: no extension in its health answer.
if command -v curl >/dev/null 2>&1; then
	h=$(curl -s --max-time 5 --unix-socket "$STATE/sandboxes/v1/boot/agent.sock" \
		"http://localhost/v1/health?version=1")
	case $h in
	*'"extensions"'*) fail "the strict agent advertises an extension: $h" ;;
	*'"protocolVersion":1'* | *'"protocolVersion": 1'*) ;;
	*) fail "unexpected health answer: $h" ;;
	esac
fi
w grep -q '"transport": *"agent"' "$MNT/v1/info" || fail "info does not say transport agent"

# ---- files made on the backing side, read through the mount ---------------------------
mkdir -p "$B/dir/sub"
printf 'alpha\n' >"$B/dir/a.txt"
head -c 300000 /dev/urandom >"$B/dir/blob"
ln -s a.txt "$B/dir/link"
touch -d @1500000000 "$B/dir/a.txt"
chmod 640 "$B/dir/a.txt"
chown -R --reference="$B" "$B/dir"

assert_eq "a.txt blob link sub" "$(w ls "$F/dir" | tr '\n' ' ' | sed 's/ $//')" "ls"
assert_eq "regular file 640 6 1500000000" "$(w stat -c '%F %a %s %Y' "$F/dir/a.txt")" "stat"
assert_eq "symbolic link" "$(w stat -c %F "$F/dir/link")" "stat of a link"
assert_eq a.txt "$(w readlink "$F/dir/link")" "readlink"
assert_eq directory "$(w stat -c %F "$F/dir/sub")" "stat of a directory"
assert_content "$F/dir/a.txt" alpha "cat"
w cat "$F/dir/blob" >"$TMP/blob" || fail "cat blob"
assert_file_eq "$B/dir/blob" "$TMP/blob" "cat of a 300 kB file"
assert_content "$F/dir/link" alpha "cat through a link"
assert_errno "No such file or directory" cat "$F/dir/missing"

# ---- writes ---------------------------------------------------------------------------
printf 'written through v1\n' >"$TMP/w"
assert_ok cp "$TMP/w" "$F/dir/new.txt"
assert_file_eq "$TMP/w" "$B/dir/new.txt" "cp in"
w sh -c "printf 'more\n' >>'$F/dir/new.txt'" || fail "append"
assert_content "$B/dir/new.txt" "$(printf 'written through v1\nmore')" "append on disk"
head -c 2000000 /dev/urandom >"$TMP/big-ok"
assert_ok cp "$TMP/big-ok" "$F/big-ok"
assert_file_eq "$TMP/big-ok" "$B/big-ok" "a 2 MB write"
assert_ok mv "$F/dir/new.txt" "$F/dir/renamed.txt"
[ -e "$B/dir/new.txt" ] && fail "mv left the old name"
assert_content "$B/dir/renamed.txt" "$(printf 'written through v1\nmore')" "mv"
printf 'old\n' >"$TMP/old"
assert_ok cp "$TMP/old" "$F/dir/victim"
assert_ok mv "$F/dir/renamed.txt" "$F/dir/victim"
assert_content "$B/dir/victim" "$(printf 'written through v1\nmore')" "mv over a file"
assert_ok rm "$F/dir/victim"
[ -e "$B/dir/victim" ] && fail "rm left the file"
assert_ok mkdir "$F/dir/made"
[ -d "$B/dir/made" ] || fail "mkdir"
assert_ok rmdir "$F/dir/made"
[ -e "$B/dir/made" ] && fail "rmdir"
assert_errno "Directory not empty" rmdir "$F/dir"
assert_ok chmod 600 "$F/dir/a.txt"
assert_eq 600 "$(stat -c %a "$B/dir/a.txt")" "chmod"
assert_ok truncate -s 3 "$F/dir/a.txt"
assert_content "$B/dir/a.txt" alp "truncate"

# ---- the 32 MiB limit ---------------------------------------------------------------------
# Reading a file over the limit: EFBIG, and nothing partial.
head -c $((33 * 1024 * 1024)) /dev/zero >"$B/huge"
chown --reference="$B" "$B/huge"
assert_errno "File too large" cat "$F/huge"
# Exactly at the limit still works.
head -c $((32 * 1024 * 1024)) /dev/zero >"$B/limit"
chown --reference="$B" "$B/limit"
assert_eq $((32 * 1024 * 1024)) "$(w cat "$F/limit" | wc -c)" "a file of exactly 32 MiB"
# Writing past the limit: EFBIG (at the write or at close); at most what
# fits may be on disk, as with any file size limit.
with_timeout 120 sh -c "head -c $((33 * 1024 * 1024)) /dev/zero >'$F/toobig'" \
	2>"$TMP/efbig.err"
rc=$?
[ "$rc" -ne 0 ] || fail "writing 33 MiB through v1 succeeded"
grep -q "File too large" "$TMP/efbig.err" ||
	fail "writing 33 MiB: wanted EFBIG, got: $(cat "$TMP/efbig.err")"
if [ -e "$B/toobig" ] && [ "$(stat -c %s "$B/toobig")" -gt $((32 * 1024 * 1024)) ]; then
	fail "a refused write left $(stat -c %s "$B/toobig") bytes on disk"
fi
assert_errno "File too large" truncate -s 40M "$F/big-ok"
assert_eq 2000000 "$(stat -c %s "$B/big-ok")" "the size after a refused truncate"

# ---- a resume by the mount keeps the agent strict ------------------------------------
sbx_stop v1
assert_content "$F/dir/a.txt" alp "a read that resumes the sandbox"
assert_eq Running "$(sbx_field v1 state)" "state after the resume"
tr '\0' ' ' <"/proc/$(sbx_agent_pid v1)/cmdline" | grep -q -- '--strict-v1' ||
	fail "the resumed agent is not strict: $(tr '\0' ' ' <"/proc/$(sbx_agent_pid v1)/cmdline")"

# Expected failures, logged once each.
allow_log 'EFBIG|File too large|too large|32 MiB|transfer limit|TRANSFER'
finish
