#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-prefetch: a program that lists a directory and reads its files (grep
# -r, rsync, tar c) gets the small files' contents in one request for the
# directory (GET contents), not one request a file, and its subdirectories'
# one level ahead; a lone cat fetches no
# directory; what is served is what the sandbox holds: the right bytes, a
# change made in the sandbox once the attribute timeout passed, and this
# mount's own writes at once.

. "$(dirname "$0")/lib.sh"

# The agent's request log tells what was asked.
agent_wrapper --log-level debug
one_sandbox
ALOG=$(sbx_agent_log a)
# The walk must fit in attr_timeout (what is read ahead is good for that
# long); the waits below outlast it.
T=$((2 * SLOW))
mount_fs attr_timeout=$T,entry_timeout=$T,negative_timeout=$T

# requests ROUTE: how many the agent served (its log names the route,
# not the query).
requests() {
	grep -c "http: GET /sandboxfs/v1/$1" "$ALOG"
}

mkdir -p "$B/w/sub"
i=10
while [ "$i" -lt 40 ]; do
	head -c $((i * 97)) /dev/urandom >"$B/w/f$i"
	i=$((i + 1))
done
head -c 600000 /dev/urandom >"$B/w/big"
printf 'below\n' >"$B/w/sub/s"
ln -s f10 "$B/w/link"
# The sandbox's user owns its files.
chown -hR --reference="$B" "$B/w"

# ---- a walk: one request for the directory's small files --------------------
contents0=$(requests 'contents ')
reads0=$(requests 'read ')
w ls "$F/w" >/dev/null || fail "ls w"
for f in "$F"/w/f*; do
	w cat "$f" || fail "cat $f"
done >"$TMP/walk.mount"
for f in "$B"/w/f*; do
	cat "$f"
done >"$TMP/walk.direct"
assert_file_eq "$TMP/walk.direct" "$TMP/walk.mount" "the files read in a walk"
# w's, and w/sub's ahead of the walker (one level down): that one is
# asked for once w's answer is in, while the walker reads.
contents_since() {
	[ "$(($(requests 'contents ') - contents0))" -ge "$1" ]
}
wait_for 10 contents_since 2
assert_eq 2 "$(($(requests 'contents ') - contents0))" \
	"GET contents of w and w/sub during the walk"
assert_eq 0 "$(($(requests 'read ') - reads0))" \
	"GET read during the walk"
# The large file is read as usual, and right.
assert_file_eq "$B/w/big" "$F/w/big" "w/big"
assert_content "$F/w/link" "$(cat "$B/w/f10")" "w/link (a symlink, not prefetched)"

# ---- a walk whose listing an event made the mount forget --------------------
# A file made in the sandbox after the walker listed w2: its change event
# makes the mount forget w2's listing (it is applied before the events
# file shows it). w2/sub is still fetched ahead: the prefetch lists w2.
mkdir -p "$B/w2/sub"
for i in 1 2 3 4 5 6; do
	printf 'w2 file %d\n' "$i" >"$B/w2/f$i"
done
printf 'below2\n' >"$B/w2/sub/s"
chown -hR --reference="$B" "$B/w2"
sleep $((T + 1))
# The walker lists w2 (its glob), then the event comes, then it reads.
walk2=$(w ls -d "$F"/w2/f*) || fail "ls w2"
exec 7<"$MNT/a/events"
printf 'late\n' >"$B/w2/late"
with_timeout 10 grep -m1 -q '"/w2/late"' <&7 ||
	fail "the event of w2/late did not come"
exec 7<&-
contents0=$(requests 'contents ')
for f in $walk2; do
	w cat "$f" || fail "cat $f"
done >"$TMP/walk2.mount"
cat "$B"/w2/f* >"$TMP/walk2.direct"
assert_file_eq "$TMP/walk2.direct" "$TMP/walk2.mount" "the files of w2"
wait_for 10 contents_since 2
assert_eq 2 "$(($(requests 'contents ') - contents0))" \
	"GET contents of w2 and w2/sub after w2's listing was forgotten"

# ---- a lone cat fetches no directory ---------------------------------------
sleep $((T + 1))
contents0=$(requests 'contents ')
assert_content "$F/w/sub/s" "below" "w/sub/s"
assert_file_eq "$B/w/f11" "$F/w/f11" "w/f11 read alone"
assert_eq 0 "$(($(requests 'contents ') - contents0))" \
	"GET contents after lone reads"

# ---- a change in the sandbox shows once attr_timeout has passed -------------
sleep $((T + 1))
printf 'changed in the sandbox\n' >"$B/w/f12"
sleep $((T + 1))
w ls "$F/w" >/dev/null
w cat "$F/w/f13" >/dev/null
assert_content "$F/w/f12" "changed in the sandbox" "w/f12 after a change in the sandbox"

# ---- a file kept open sees what is appended after its prefetched body -------
# (tail -f): the body is that version's only while the mount holds it.
sleep $((T + 1))
mkdir "$B/tl"
printf 'one\n' >"$B/tl/a"
printf 'start\n' >"$B/tl/t"
chown -hR --reference="$B" "$B/tl"
w ls "$F/tl" >/dev/null
w cat "$F/tl/a" >/dev/null
exec 3<"$F/tl/t" || fail "open tl/t"
assert_eq "start" "$(cat <&3)" "tl/t from its prefetched body"
printf 'more\n' >>"$B/tl/t"
within_s=$((T * 3 + 3))
got=""
end=$(($(date +%s) + within_s))
while [ "$(date +%s)" -le "$end" ]; do
	got=$got$(cat <&3)
	[ -n "$got" ] && break
	sleep 0.2
done
exec 3<&-
assert_eq "more" "$got" "bytes appended in the sandbox, read through a descriptor opened before"

# ---- this mount's own write is read back at once ------------------------------
sleep $((T + 1))
w ls "$F/w" >/dev/null
w cat "$F/w/f14" >/dev/null
printf 'mine\n' >"$F/w/f20" || fail "write w/f20"
assert_content "$F/w/f20" "mine" "w/f20 after this mount's write"
assert_content "$B/w/f20" "mine" "w/f20 in the sandbox"

finish
