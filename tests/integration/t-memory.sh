#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-memory: the daemon's memory stays bounded under a long grep -r (5000
# files, about 40 MB, read twice): its resident set (VmRSS, and the peak
# VmHWM) from /proc/PID/status stays under a generous bound, and grep
# finds exactly the files it should. Also ls -lR and find over the tree
# give what the backing root gives.

. "$(dirname "$0")/lib.sh"

BOUND_KB=$((200 * 1024))

one_sandbox

# 50 directories of 100 files of 8 KiB; every 100th file holds the needle.
chunk=$(head -c 8000 /dev/zero | tr '\0' 'q')
d=0
while [ "$d" -lt 50 ]; do
	mkdir -p "$B/tree/d$d"
	f=0
	while [ "$f" -lt 100 ]; do
		printf '%s\n' "$chunk" >"$B/tree/d$d/f$f.txt"
		f=$((f + 1))
	done
	echo "needle in d$d" >>"$B/tree/d$d/f7.txt"
	d=$((d + 1))
done
chown -R --reference="$B" "$B/tree"
assert_eq 5000 "$(find "$B/tree" -type f | wc -l)" "files made"

mount_fs

rss() {
	awk -v k="$1:" '$1 == k { print $2 }' "/proc/$MOUNT_PID/status"
}

# sample_rss FILE: the daemon's VmRSS every 0.2 s while $busy runs.
sample_rss() {
	while alive "$busy"; do
		rss VmRSS >>"$1"
		sleep 0.2
	done
}

note "VmRSS at the start: $(rss VmRSS) kB"
for round in 1 2; do
	t0=$(now_ms)
	with_timeout 300 grep -rl needle "$F/tree" >"$TMP/found" 2>"$TMP/grep.err" &
	busy=$!
	sample_rss "$TMP/rss.$round"
	wait "$busy"
	rc=$?
	assert_eq 0 "$rc" "grep -r exit status (round $round): $(cat "$TMP/grep.err")"
	assert_eq 50 "$(wc -l <"$TMP/found")" "files grep -r found (round $round)"
	max=$(sort -n "$TMP/rss.$round" | tail -n 1)
	note "grep -r round $round: $(($(now_ms) - t0)) ms, VmRSS at most ${max:-?} kB"
done
(cd "$B" && find tree | LC_ALL=C sort) >"$TMP/find.b"
(cd "$F" && with_timeout 300 find tree | LC_ALL=C sort) >"$TMP/find.m"
assert_file_eq "$TMP/find.b" "$TMP/find.m" "find over the tree"
with_timeout 300 ls -lR "$F/tree" >"$TMP/lsR" || fail "ls -lR"
assert_eq 5000 "$(grep -c '^-' "$TMP/lsR")" "files ls -lR lists"

hwm=$(rss VmHWM)
now=$(rss VmRSS)
note "VmRSS $now kB, VmHWM $hwm kB (bound $BOUND_KB kB)"
if bounds_apply; then
	[ "$hwm" -lt "$BOUND_KB" ] || fail "the daemon's peak resident set is $hwm kB"
	[ "$now" -lt "$BOUND_KB" ] || fail "the daemon's resident set is $now kB"
fi

finish
