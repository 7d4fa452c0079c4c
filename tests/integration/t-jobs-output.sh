#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-jobs-output: no job output is lost on the way to a reader. A job that
# writes 64 MiB of pseudo-random bytes (its sha256 on stderr) reads back
# byte for byte; `yes | head -c 200000000` gives exactly 200,000,000
# bytes with the right checksum, while the mount's resident set stays
# under 128 MiB (the agent's 4 MiB cap would have kept 4 MiB of it); a
# spill directory that fills up gives the reader an error, never a
# shorter file, and once there is room again the rest arrives, whole.

. "$(dirname "$0")/lib.sh"

need_fuse
need_cmd sha256sum

sbx_create a
sbx_start a
S=$MNT/a

w() {
	with_timeout 300 "$@"
}

rss() {
	awk -v k="$1:" '$1 == k { print $2 }' "/proc/$MOUNT_PID/status"
}

mount_fs

# ---- 64 MiB of pseudo-random bytes -------------------------------------------------
# shellcheck disable=SC2016 # expanded in the sandbox
job_start 'f=.rand.$$; head -c 67108864 /dev/urandom >$f && sha256sum <$f | cut -d" " -f1 >&2 && cat $f; rm -f $f'
assert_content "$S/jobs/$job/exit" 0 "exit of the 64 MiB job"
assert_content "$S/jobs/$job/status" "exited 0" "status of the 64 MiB job"
want=$(w cat "$S/jobs/$job/stderr")
[ ${#want} -eq 64 ] || fail "the job's own sha256: '$want'"
got=$(w sha256sum <"$S/jobs/$job/stdout" | cut -d' ' -f1)
assert_eq "$want" "$got" "sha256 of the 64 MiB read back"
assert_eq 67108864 "$(w wc -c <"$S/jobs/$job/stdout")" "bytes of the 64 MiB job"

# ---- 200,000,000 bytes of y ----------------------------------------------------------
want=$(yes | head -c 200000000 | sha256sum | cut -d' ' -f1)
job_start 'yes | head -c 200000000'
# Read while the job runs: the reader follows the collection.
w sha256sum <"$S/jobs/$job/stdout" >"$TMP/yes.sum" || fail "reading the yes job"
assert_eq "$want" "$(cut -d' ' -f1 "$TMP/yes.sum")" "sha256 of yes | head -c 200000000"
assert_eq 200000000 "$(w wc -c <"$S/jobs/$job/stdout")" "bytes of yes | head -c 200000000"
assert_content "$S/jobs/$job/status" "exited 0" "status of the yes job"
hwm=$(rss VmHWM)
note "the mount's VmHWM after 264 MiB of job output: $hwm kB"
if bounds_apply; then
	[ "$hwm" -lt $((128 * 1024)) ] || fail "the mount's peak resident set is $hwm kB"
fi
umount_fs

# ---- a spill directory that fills up -----------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
	note "not root: the full spill directory case needs a tmpfs of its own"
	finish
fi
small=$TMP/small
mkdir "$small"
mount -t tmpfs -o size=1m,mode=1777 sbfs-small "$small" || die "mount a tmpfs on $small"
# The agent runs already (with the test's TMPDIR); only the mount's
# output spills to the small directory.
_tmpdir=$TMPDIR
TMPDIR=$small
export TMPDIR
mount_fs
TMPDIR=$_tmpdir
export TMPDIR
job_start 'head -c 3000000 /dev/zero | tr "\0" y; echo end-of-output'
# A reader gets what was kept, then the error: not a short file.
with_timeout 60 cat "$S/jobs/$job/stdout" >"$TMP/short" 2>"$TMP/short.err"
rc=$?
[ "$rc" -ne 0 ] || fail "cat of output the mount could not keep exited 0 ($(wc -c <"$TMP/short") bytes)"
grep -Eq 'No space left on device|Input/output error' "$TMP/short.err" ||
	fail "cat said: $(cat "$TMP/short.err")"
[ "$(wc -c <"$TMP/short")" -lt 3000000 ] || fail "cat read everything from a full spill directory"
assert_content "$S/jobs/$job/status" running "status while the output waits"
# Room again: nothing was lost, the agent kept what the mount did not take.
mount -o remount,size=64m "$small" || fail "grow $small"
assert_content "$S/jobs/$job/exit" 0 "exit once the output could be kept"
assert_eq 3000014 "$(w wc -c <"$S/jobs/$job/stdout")" "bytes after the spill directory had room"
assert_eq end-of-output "$(w tail -c 14 "$S/jobs/$job/stdout")" "the end of the output"
assert_eq 0 "$(w head -c 3000000 "$S/jobs/$job/stdout" | tr -d y | wc -c)" \
	"bytes of the first 3,000,000 that are not y"
umount_fs
umount "$small" || fail "umount $small"

allow_log 'its output cannot be kept|No space left on device'
finish
