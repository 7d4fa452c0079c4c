#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-confine-statedir: a state directory works wherever its user can write
# it, whatever the modes of the directories above (sandboxctl(1)). As
# root, under two directories of mode 0700 (as /root is, and as mktemp -d
# makes them): the quick start (a sandbox from a tree, mounted, a file
# read, a job's output) works, and so does a native sandbox's command.
# As an unprivileged user (setpriv, a uid without an entry, a home of
# mode 0700): a sandbox is created and started under that home and a job
# runs through its agent. (That user cannot mount here when /dev/fuse is
# root's alone; the agent is then asked directly.)

. "$(dirname "$0")/lib.sh"
programs_for_others

need_fuse

# $TMP is 0700 (lib.sh); one more private level, as /root/<checkout>.
mkdir -m 0700 "$TMP/private"
STATE=$TMP/private/state
mkdir -p "$TMP/src/sub"
printf 'Hello from a sandbox.\n' >"$TMP/src/hello.txt"
printf 'echo from a script\n' >"$TMP/src/sub/run.sh"
sbx_create demo --from "$TMP/src"
sbx_start demo
sbx_create nat --native --from "$TMP/src"
sbx_start nat
mount_fs

assert_content "$MNT/demo/files/hello.txt" "Hello from a sandbox." "a file of the quick start"
sbx_job demo 'echo "job ran in $(pwd)"; cat hello.txt; sh sub/run.sh'
assert_eq 0 "$JOB_EXIT" "exit of the quick start's job (stderr: $(cat "$TMP/job.err"))"
assert_eq "$(printf 'job ran in /sandbox\nHello from a sandbox.\nfrom a script')" \
	"$(cat "$TMP/job.out")" "output of the quick start's job"
sbx_job nat 'cat hello.txt'
assert_eq "Hello from a sandbox." "$(cat "$TMP/job.out")" "a native sandbox's command"
umount_fs

# ---- as a user, under a home of mode 0700 ------------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
	note "not root: no other user to become"
elif ! command -v setpriv >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	note "setpriv or curl is missing: the unprivileged part is not run"
else
	U=64125
	# Root's part is done: its directory only has to lead to the home,
	# which is the user's and private.
	chmod 0711 "$TMP"
	base=$TMP/home
	mkdir -m 0711 "$base"
	home=$base/user
	mkdir -m 0700 "$home"
	cp -r "$TMP/src" "$home/src"
	chown -R "$U:$U" "$home"
	as_user() {
		with_timeout 60 env HOME="$home" SANDBOXFS_AGENT="$SBFS_AGENT" \
			setpriv --reuid="$U" --regid="$U" --clear-groups "$@"
	}
	ustate=$home/.local/state/sandboxfs
	as_user "$SBFS_CTL" create mine --from "$home/src" >/dev/null || fail "create as the user"
	as_user "$SBFS_CTL" start mine >/dev/null ||
		fail "start as the user: $(tail -n 5 "$ustate/sandboxes/mine/agent.log")"
	sock=$ustate/sandboxes/mine/boot/agent.sock
	token=$(cat "$ustate/sandboxes/mine/boot/token" 2>/dev/null)
	if [ -S "$sock" ] && [ -n "$token" ]; then
		url=http://agent
		curl -s -o /dev/null --unix-socket "$sock" -X POST -H "Authorization: Bearer $token" "$url/v1/activate"
		curl -s -N --unix-socket "$sock" -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
			-d '{"command":["sh","-c","cat hello.txt; id -u"],"timeoutMs":20000}' \
			"$url/v1/exec" >"$TMP/user.exec"
		got=$(sed -n 's/.*"data":"\([^"]*\)".*/\1/p' "$TMP/user.exec" | while read -r d; do
			printf '%s' "$d" | base64 -d
		done)
		assert_eq "$(printf 'Hello from a sandbox.\n%s' "$U")" "$got" "a job of the user's sandbox"
		grep -q '"t":"exit","code":0' "$TMP/user.exec" ||
			fail "the user's job did not exit 0: $(cat "$TMP/user.exec")"
	else
		fail "the user's agent made no socket or token"
	fi
	if (setpriv --reuid="$U" --regid="$U" --clear-groups sh -c ': <>/dev/fuse') 2>/dev/null; then
		note "the user could mount too; the mount is checked as root above"
	else
		note "/dev/fuse is root's alone here: the user's sandbox is checked through its agent"
	fi
	as_user "$SBFS_CTL" rm -f mine >/dev/null || fail "rm as the user"
fi

finish
