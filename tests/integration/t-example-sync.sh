#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-example-sync: examples/sandbox-sync against a real mount: the local
# tree arrives in files/DIR (and files removed locally are removed there),
# the command runs in DIR, its output is printed and its exit code is the
# script's; usage and errors; --watch brings back what changes in DIR
# inside the sandbox, as its events tell, and stops cleanly on SIGTERM.

. "$(dirname "$0")/lib.sh"

need_fuse
need_cmd rsync

EX=$SBFS_SRCDIR/examples/sandbox-sync
[ -f "$EX" ] || hard_error "$EX is missing"

sbx_create box
sbx_start box
B=$(sbx_root box)
mount_fs

mkdir -p "$TMP/proj/src"
printf 'hello from the project\n' >"$TMP/proj/README"
# shellcheck disable=SC2016 # a script for the sandbox
printf '#!/bin/sh\necho "built $(cat README | wc -l) line(s)"\necho "warning: none" >&2\nexit 3\n' \
	>"$TMP/proj/build.sh"
chmod 755 "$TMP/proj/build.sh"
printf 'x\n' >"$TMP/proj/src/old.c"

# ---- usage and errors -------------------------------------------------------------------
with_timeout 10 sh "$EX" >/dev/null 2>"$TMP/err"
assert_eq 2 "$?" "exit status without arguments"
grep -q '^usage: sandbox-sync \[--watch\] SRC MOUNT SANDBOX DIR' "$TMP/err" || fail "no usage line"
with_timeout 10 sh "$EX" "$TMP/proj" "$MNT" nosuch work >/dev/null 2>"$TMP/err"
assert_eq 2 "$?" "exit status for a missing sandbox"
grep -q 'no such sandbox' "$TMP/err" || fail "error for a missing sandbox: $(cat "$TMP/err")"
with_timeout 10 sh "$EX" "$TMP/proj" "$MNT" box ../up >/dev/null 2>"$TMP/err"
assert_eq 2 "$?" "exit status for DIR with .."
with_timeout 10 sh "$EX" "$TMP/nosuchdir" "$MNT" box work >/dev/null 2>"$TMP/err"
assert_eq 2 "$?" "exit status for a missing SRC"

# ---- copy only --------------------------------------------------------------------------
with_timeout 120 sh "$EX" "$TMP/proj" "$MNT" box work >"$TMP/out" 2>"$TMP/err"
assert_eq 0 "$?" "exit status of a copy without a command: $(cat "$TMP/err")"
with_timeout 60 diff -r "$TMP/proj" "$B/work" >"$TMP/diff" 2>&1 ||
	fail "the copy differs: $(cat "$TMP/diff")"

# ---- copy and run ------------------------------------------------------------------------
rm "$TMP/proj/src/old.c"
printf 'int x;\n' >"$TMP/proj/src/new.c"
with_timeout 120 sh "$EX" "$TMP/proj" "$MNT" box work './build.sh && echo unreachable' \
	>"$TMP/out" 2>"$TMP/err"
assert_eq 3 "$?" "the job's exit code"
assert_content "$TMP/out" "built 1 line(s)" "the job's output"
grep -q '^warning: none$' "$TMP/err" || fail "the job's stderr: $(cat "$TMP/err")"
[ -e "$B/work/src/old.c" ] && fail "a file removed locally is still in the sandbox"
assert_content "$B/work/src/new.c" "int x;" "a new file in the sandbox"
with_timeout 120 sh "$EX" "$TMP/proj" "$MNT" box work 'ls src; exit 0' >"$TMP/out" 2>&1
assert_eq 0 "$?" "exit 0"
assert_content "$TMP/out" new.c "a job runs in DIR"
assert_eq "$(printf 'cd %swork%s && ls src; exit 0' "'" "'")" \
	"$(with_timeout 30 sed -n 's/.*"-c", *"\(.*\)"\].*/\1/p' "$MNT/box/jobs/latest/cmd")" \
	"the command line the job ran"

# ---- --watch ------------------------------------------------------------------------------
# (not under with_timeout: the signal is the script's own)
sh "$EX" --watch "$TMP/proj" "$MNT" box work \
	'printf "made by the job\n" >out.txt' >"$TMP/watch.out" 2>"$TMP/watch.err" &
watcher=$!
wait_for 30 test -e "$TMP/proj/out.txt" || fail "--watch: the job's output did not come back"
assert_content "$TMP/proj/out.txt" "made by the job" "--watch: the job's output"
# A change made inside the sandbox afterwards (as another job would).
printf 'later\n' >"$B/work/later.txt"
wait_for 10 test -e "$TMP/proj/later.txt" || fail "--watch: a later change did not come back"
assert_content "$TMP/proj/later.txt" "later" "--watch: a later change"
grep -q '"path":"/work/later.txt"' "$TMP/watch.out" ||
	fail "--watch: the change was not printed: $(cat "$TMP/watch.out")"
# Outside DIR: not followed.
printf 'elsewhere\n' >"$B/elsewhere.txt"
sleep 1
[ -e "$TMP/proj/elsewhere.txt" ] && fail "--watch: a file outside DIR came back"
grep -q elsewhere "$TMP/watch.out" && fail "--watch: a change outside DIR was printed"
kill -TERM "$watcher"
wait "$watcher"
assert_eq 0 "$?" "--watch: the exit status after SIGTERM"

finish
