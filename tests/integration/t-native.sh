#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-native: a native (legacy) sandbox, one without the transport label,
# made with sandboxctl create --native. Its files are readable through the
# mount (the provider's native routes), every change is EROFS, exec runs
# the command through the provider's native exec (its output then under
# jobs/) or fails with EOPNOTSUPP, and info says transport native. Also:
# an unknown transport label fails closed with EPROTO.

. "$(dirname "$0")/lib.sh"

need_fuse

src=$TMP/src
mkdir -p "$src/dir"
printf 'native file\n' >"$src/hello.txt"
head -c 100000 /dev/urandom >"$src/dir/blob"
ln -s hello.txt "$src/link"
sbx_create nat --native --from "$src"
sbx_start nat
assert_eq Running "$(sbx_field nat state)" "the native sandbox's state"
sbx_create odd
B=$(sbx_root nat)
F=$MNT/nat/files
mount_fs

# ---- info -------------------------------------------------------------------------------
w cat "$MNT/nat/info" >"$TMP/info" || fail "cat info"
grep -q '"transport": *"native"' "$TMP/info" || fail "info does not say native: $(cat "$TMP/info")"
grep -q '"id": *"nat"' "$TMP/info" || fail "info does not name the sandbox"

# ---- reads -------------------------------------------------------------------------------
assert_eq "dir hello.txt link" "$(w ls "$F" | tr '\n' ' ' | sed 's/ $//')" "ls"
assert_content "$F/hello.txt" "native file" "cat"
w cat "$F/dir/blob" >"$TMP/blob" || fail "cat blob"
assert_file_eq "$src/dir/blob" "$TMP/blob" "a 100 kB file"
assert_eq "regular file 12" "$(w stat -c '%F %s' "$F/hello.txt")" "stat"
assert_eq hello.txt "$(w readlink "$F/link")" "readlink"
assert_errno 'No such file or directory' cat "$F/missing"

# ---- writes: EROFS ------------------------------------------------------------------------
ro='Read-only file system'
assert_errno "$ro" sh -c "echo x >'$F/new'"
assert_errno "$ro" sh -c "echo x >>'$F/hello.txt'"
assert_errno "$ro" mkdir "$F/d"
assert_errno "$ro" rm "$F/hello.txt"
assert_errno "$ro" mv "$F/hello.txt" "$F/moved"
assert_errno "$ro" chmod 600 "$F/hello.txt"
assert_errno "$ro" touch "$F/hello.txt"
assert_errno "$ro" truncate -s 0 "$F/hello.txt"
assert_errno "$ro" ln -s x "$F/newlink"
assert_content "$B/hello.txt" "native file" "the file on disk after refused writes"
[ -e "$B/new" ] && fail "a refused create left a file"

# ---- exec ---------------------------------------------------------------------------------
printf 'echo native-exec; cat hello.txt\n' >"$TMP/cmd"
if w dd if="$TMP/cmd" of="$MNT/nat/exec" conv=notrunc status=none 2>"$TMP/exec.err"; then
	note "the native exec ran the command"
	assert_content "$MNT/nat/jobs/latest/exit" 0 "exit of a native job"
	assert_eq "$(printf 'native-exec\nnative file')" \
		"$(w cat "$MNT/nat/jobs/latest/stdout")" "stdout of a native job"
else
	grep -q 'Operation not supported' "$TMP/exec.err" ||
		fail "exec on a native sandbox: wanted success or EOPNOTSUPP, got: $(cat "$TMP/exec.err")"
fi

# ---- an unknown transport label ---------------------------------------------------------------
# The record format is public: a reader refuses a label it does not know.
sed 's/"alienAgentTransport": "native-file-v1"/"alienAgentTransport": "carrier-pigeon-v9"/' \
	"$STATE/sandboxes/odd/sandbox.json" >"$TMP/rec"
grep -q carrier-pigeon "$TMP/rec" || hard_error "could not relabel the record"
cat "$TMP/rec" >"$STATE/sandboxes/odd/sandbox.json"
assert_errno 'Protocol error' ls "$MNT/odd/files"
assert_errno 'Protocol error' cat "$MNT/odd/files/x"
assert_eq Stopped "$(sbx_field odd state)" "a sandbox with an unknown label is not started"
# The others keep working.
assert_content "$F/hello.txt" "native file" "the native sandbox after the refusal"

allow_log 'sandbox odd: .*agentTransportInvalid|carrier-pigeon|transport label|EPROTO|Protocol error|read-only|EROFS'
finish
