#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-events: the sandbox tells the mount what changed, so its caches are
# long and still true. With cache_timeout far longer than the test, every
# change made inside the sandbox (here: straight in its root, as a job
# would) must show through the mount within a couple of seconds: a new
# size through stat, new contents of a file whose pages the kernel holds,
# a name that appeared where a lookup had failed, a name that went, a
# rename. A job's changes are seen as soon as its end is. A restarted
# agent makes the mount forget what it held. MOUNT/<sb>/events gives one
# JSON line per change. The same steps with -o noevents (and the same
# long timeouts) show old answers: the events are what made them fresh.

. "$(dirname "$0")/lib.sh"

one_sandbox

# within SECONDS CMD...: CMD succeeds within SECONDS.
within() {
	_s=$1
	shift
	wait_for "$_s" "$@"
}

size_is() {
	[ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ]
}

content_is() {
	[ "$(cat "$1" 2>/dev/null)" = "$2" ]
}

# Long caches: anything fresh here comes from the events.
LONG=attr_timeout=600,entry_timeout=600,negative_timeout=600,cache_timeout=600

# ---- with events ------------------------------------------------------------

printf 'one\n' >"$B/f"
mkdir "$B/d"
# Its info lines say when the mount follows the events and when it drops
# what it holds.
SANDBOXFS_LOG_LEVEL=info mount_fs "$LONG"
# The mount follows the sandbox's events from its first visit.
assert_content "$F/f" "one" "first read"
assert_errno "No such file or directory" stat "$F/later"
ls "$F/d" >/dev/null
# ...from the point where the agent watches the whole tree: nothing was
# lost at the start, so nothing the mount had just learnt is dropped (a
# create then costs one request, not two).
within 3 grep -q "change events followed" "$LOG" || fail "the mount never followed the events"
sleep 0.5
grep -q "change events lost" "$LOG" && fail "events were lost at the start: $(grep 'change events' "$LOG")"

printf 'one two three\n' >"$B/f"
within 3 size_is "$F/f" 14 || fail "a size changed inside the sandbox was not seen through stat"
within 3 content_is "$F/f" "one two three" ||
	fail "contents changed inside the sandbox were not read (pages kept)"

printf 'x\n' >"$B/later"
within 3 test -e "$F/later" || fail "a name made inside the sandbox stayed missing (negative entry)"
within 3 sh -c "ls '$F' | grep -qx later" || fail "a listing did not show the new name"

rm "$B/later"
within 3 sh -c "! test -e '$F/later'" || fail "a name removed inside the sandbox stayed"

printf 'in d\n' >"$B/d/g"
within 3 sh -c "ls '$F/d' | grep -qx g" || fail "a listing of a subdirectory missed a new file"
mv "$B/d" "$B/d2"
within 3 sh -c "! test -e '$F/d' && test -e '$F/d2/g'" || fail "a rename inside the sandbox was not seen"
assert_content "$F/d2/g" "in d" "a file under the renamed directory"

# A job's changes are there when its end is: a file a job made, read
# (its pages kept), then rewritten by another job, read right after that
# job's end.
job() {
	w sh -c 'printf "%s\n" "$1" >"$2"' sh "$1" "$S/exec" || fail "starting a job"
	assert_eq 0 "$(w cat "$S/jobs/latest/exit")" "the exit of job: $1"
}
job 'printf "first job\n" >jobfile'
within 3 content_is "$F/jobfile" "first job" || fail "a job's new file"
assert_content "$F/jobfile" "first job" "read twice"
job 'printf "second job, longer\n" >jobfile'
assert_content "$F/jobfile" "second job, longer" "the file a job wrote, read right after its end"

# The stream for users: the lines of changes made after the open.
w timeout 4 cat "$S/events" >"$TMP/events" 2>"$TMP/events.err" &
reader=$!
sleep 1
printf 'e\n' >"$B/ev-file"
mkdir "$B/ev-dir"
mv "$B/ev-file" "$B/ev-dir/moved"
wait "$reader"
grep -q '"type":"create","path":"/ev-file","dir":false' "$TMP/events" ||
	fail "events: no create of /ev-file: $(cat "$TMP/events" "$TMP/events.err")"
grep -q '"type":"create","path":"/ev-dir","dir":true' "$TMP/events" ||
	fail "events: no create of /ev-dir: $(cat "$TMP/events")"
grep -q '"type":"rename","path":"/ev-file","to":"/ev-dir/moved"' "$TMP/events" ||
	fail "events: no rename: $(cat "$TMP/events")"
grep -v -q '^{.*}$' "$TMP/events" && fail "events: a line that is not one JSON object: $(cat "$TMP/events")"

# A file open through the mount, removed in the sandbox and made again
# under its name: ext4 often gives the new file the freed inode number at
# once (tried a few times until it does). The descriptor must not read the
# new file (it fails, ESTALE: the old file cannot be reached through the
# agent any more); the name shows the new file.
_reused=0
for _try in 1 2 3 4 5 6 7 8; do
	head -c 1000 /dev/zero | tr '\0' A >"$B/reuse$_try"
	within 3 test -s "$F/reuse$_try" || fail "a file made in the sandbox"
	exec 7<"$F/reuse$_try"
	_old_ino=$(stat -c %i "$B/reuse$_try")
	rm "$B/reuse$_try"
	printf 'BBBBBBBBBB' >"$B/reuse$_try"
	if [ "$(stat -c %i "$B/reuse$_try")" = "$_old_ino" ]; then
		_reused=1
		within 3 content_is "$F/reuse$_try" "BBBBBBBBBB" ||
			fail "a file made again in the sandbox"
		if cat <&7 >"$TMP/reuse.out" 2>"$TMP/reuse.err"; then
			fail "a descriptor of a removed file read the file made after it under a reused inode number: $(head -c 20 "$TMP/reuse.out")"
		fi
		grep -q "Stale file handle" "$TMP/reuse.err" ||
			fail "a descriptor of a removed file: $(cat "$TMP/reuse.err")"
	fi
	exec 7<&-
	[ "$_reused" = 1 ] && break
done
[ "$_reused" = 1 ] ||
	note "no new file got a freed inode number here: reuse not exercised"


# A restarted agent: whatever it had told is forgotten; the new one is
# followed.
ctl restart a >/dev/null || fail "restart"
printf 'after restart\n' >"$B/f"
within 5 content_is "$F/f" "after restart" || fail "a change after the agent restarted was not seen"
printf 'and again\n' >"$B/f"
within 3 content_is "$F/f" "and again" || fail "events were not followed again after the restart"
umount_fs

# ---- without events: the same long timeouts keep old answers --------------

printf 'old\n' >"$B/h"
mount_fs "$LONG,noevents"
assert_content "$F/h" "old" "first read"
# The mount's own caches hold the listing and the attributes (the
# kernel's may be dropped by a test that drops caches meanwhile).
ls "$F" >/dev/null
assert_errno "No such file or directory" stat "$F/nothere"
printf 'new and longer\n' >"$B/h"
printf 'x\n' >"$B/nothere"
sleep 3
assert_eq 4 "$(stat -c %s "$F/h")" "noevents: the size is the cached one"
assert_errno "No such file or directory" stat "$F/nothere"
assert_errno "Operation not supported" cat "$S/events"
umount_fs

finish
