#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-confine-native: a native sandbox's commands are confined exactly like
# an agent sandbox's (doc/commands.md, "Confinement"). A command written
# to its exec runs as the sandbox's own identity (as root) inside the
# sandbox's view: its root at /sandbox, its own PID namespace under
# sbfs-init, NoNewPrivs, none of the host's directories (/root, /home, the
# state directory), and it can neither read nor write another sandbox's
# root or the host's files.

. "$(dirname "$0")/lib.sh"

need_fuse

printf 'native file\n' >"$TMP/hello"
mkdir "$TMP/src"
cp "$TMP/hello" "$TMP/src/hello.txt"
sbx_create nat --native --from "$TMP/src"
sbx_start nat
sbx_create other
echo 'other data' >"$(sbx_root other)/secret"
[ "$(id -u)" -eq 0 ] && chown --reference="$(sbx_root other)" "$(sbx_root other)/secret"
echo 'host data' >"$TMP/host-file"
chmod 0666 "$TMP/host-file"
mount_fs

sbx_job nat "pwd; cat hello.txt; cat /proc/1/comm; grep NoNewPrivs /proc/self/status; id -u"
assert_eq 0 "$JOB_EXIT" "exit of the native command (stderr: $(cat "$TMP/job.err"))"
want_uid=$(id -u)
[ "$want_uid" -eq 0 ] && want_uid=$(sbx_field nat execUid)
assert_eq "$(printf '/sandbox\nnative file\nsbfs-init\nNoNewPrivs:\t1\n%s' "$want_uid")" \
	"$(cat "$TMP/job.out")" "the native command's view and identity"
[ "$(id -u)" -eq 0 ] && assert_eq true "$(sbx_field nat dynamicUser)" "the native sandbox has its own identity"

# The host and the other sandbox are out of its view: nothing to read,
# nothing to write.
sbx_job nat "ls / | tr '\\n' ' '; for p in '$STATE' '$(sbx_root other)/secret' '$TMP/host-file' /root /home; do test -e \"\$p\" && echo \"sees \$p\"; done; echo x >'$TMP/host-file' 2>/dev/null && echo wrote-host; echo x >'$(sbx_root other)/secret' 2>/dev/null && echo wrote-other; echo done"
out=$(cat "$TMP/job.out")
case $out in
*sees* | *wrote*) fail "the native command reaches the host: $out" ;;
esac
echo "$out" | grep -q 'done$' || fail "the native command did not run: $out ($(cat "$TMP/job.err"))"
echo "$out" | grep -q sandbox || fail "no /sandbox in the native command's /: $out"
assert_eq 'host data' "$(cat "$TMP/host-file")" "the host's file after the native command"
assert_eq 'other data' "$(cat "$(sbx_root other)/secret")" "the other sandbox's file after the native command"

finish
