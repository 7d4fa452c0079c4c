#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-strict-v1-walk: without the file extension, every attribute is a
# command run in the sandbox. A walk that stats each entry of a directory
# whose attributes have timed out (a second `ls -lR`, an `rsync` of an
# unchanged tree: the kernel keeps the names, and asks for each entry's
# attributes again) must list the directory once rather than run a stat
# command per entry, and still answer what the sandbox holds now.

. "$(dirname "$0")/lib.sh"

# The agent's request log counts the commands.
agent_wrapper --log-level debug
one_sandbox v1 --strict-v1
ALOG=$(sbx_agent_log v1)
mount_fs attr_timeout=1,entry_timeout=1,negative_timeout=1

commands() {
	grep -c 'http: POST /v1/exec ' "$ALOG"
}

# Mode, size, mtime in seconds, name and link target of each entry of a
# directory, as ls -l gives them (link counts and owners are the mount's).
listing() {
	LC_ALL=C w ls -l --time-style=+%s "$1" |
		awk 'NR > 1 { print $1, $5, $6, $7, $8, $9 }'
}

mkdir "$B/d"
i=0
while [ $i -lt 100 ]; do
	printf '%s\n' "$i" >"$B/d/f$i"
	i=$((i + 1))
done
ln -s f1 "$B/d/link"
chmod 600 "$B/d/f3"
chown -R --reference="$B" "$B/d"

assert_eq "$(listing "$B/d")" "$(listing "$F/d")" "ls -l, the first time"

# Past the attribute timeout, a file's contents change in the sandbox (its
# directory does not: the kernel keeps the names it listed).
sleep 1.5
printf 'longer than before\n' >"$B/d/f5"
touch -d @1600000000 "$B/d/f9"
n0=$(commands)
assert_eq "$(listing "$B/d")" "$(listing "$F/d")" \
	"ls -l after the attributes timed out"
n=$(($(commands) - n0))
note "ls -l of 101 entries after the timeout: $n commands"
[ "$n" -le 6 ] || fail "ls -l of 101 entries ran $n commands in the sandbox"
# The size the listing gave is the one reads stop at: the whole new text.
w cat "$F/d/f5" >"$TMP/f5" || fail "cat f5"
assert_file_eq "$B/d/f5" "$TMP/f5" "f5 read after it grew"

# A lone stat past the timeout is the sandbox's answer of now.
sleep 1.5
printf 'x\n' >"$B/d/f5"
assert_eq 2 "$(w stat -c %s "$F/d/f5")" "the size of a file changed since"
assert_errno "No such file or directory" stat "$F/d/absent"

# The same across a tree, as ls -lR shows it.
mkdir -p "$B/t/a/b" "$B/t/c"
for d in "$B/t" "$B/t/a" "$B/t/a/b" "$B/t/c"; do
	for k in 1 2 3 4 5 6 7 8; do printf '%s\n' "$d$k" >"$d/g$k"; done
done
chown -R --reference="$B" "$B/t"
(cd "$B" && LC_ALL=C ls -lR --time-style=+%s t) >"$TMP/native"
w sh -c "cd '$F' && LC_ALL=C ls -lR --time-style=+%s t" >"$TMP/cold" ||
	fail "ls -lR, the first time"
sleep 1.5
w sh -c "cd '$F' && LC_ALL=C ls -lR --time-style=+%s t" >"$TMP/warm" ||
	fail "ls -lR after the timeout"
# Link counts, owners and block totals are the mount's own.
for f in native cold warm; do
	awk '$1 == "total" { next } NF >= 7 { print $1, $5, $6, $7, $8, $9; next } { print }' \
		"$TMP/$f" >"$TMP/$f.cut"
done
assert_file_eq "$TMP/native.cut" "$TMP/cold.cut" "ls -lR, the first time"
assert_file_eq "$TMP/native.cut" "$TMP/warm.cut" "ls -lR after the timeout"

finish
