#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-tree: whole trees through the mount. tar extracts a few hundred files
# (directories, sizes from empty to 200 KiB, symbolic links, modes, times)
# into files/, and the result must equal the source (diff -r, and the
# modes and times tar set); tar reads it back out the same. Then git:
# init, add, commit, a second commit, log, status and fsck inside files/,
# which exercises lock files (O_EXCL), renames over existing files, fsync
# and many small writes.

. "$(dirname "$0")/lib.sh"

need_cmd tar git
one_sandbox
mount_fs

# ---- a source tree ------------------------------------------------------------------
src=$TMP/src/proj
mkdir -p "$src"
i=0
while [ "$i" -lt 20 ]; do
	mkdir -p "$src/dir$i/sub"
	j=0
	while [ "$j" -lt 15 ]; do
		# Sizes 0 .. ~200 KiB, some of them not multiples of anything.
		n=$(((i * 7919 + j * 104729) % 204800))
		[ "$j" -eq 0 ] && n=0
		head -c "$n" /dev/urandom >"$src/dir$i/f$j.bin"
		j=$((j + 1))
	done
	printf 'text %d\n' "$i" >"$src/dir$i/sub/readme.txt"
	chmod 0600 "$src/dir$i/f1.bin"
	chmod 0755 "$src/dir$i/f2.bin"
	ln -s ../f3.bin "$src/dir$i/sub/link"
	touch -d "@$((1000000000 + i))" "$src/dir$i/f4.bin"
	i=$((i + 1))
done
ln -s ../nowhere "$src/dir0/sub/dangling"
count=$(find "$src" | wc -l)
[ "$count" -gt 300 ] || hard_error "the source tree has only $count entries"
# POSIX (pax) format: times with nanoseconds.
(cd "$TMP/src" && tar --format=posix -cf "$TMP/proj.tar" proj) || hard_error "tar -c"

# ---- tar x into the mount -----------------------------------------------------------
start=$(now_ms)
with_timeout 300 tar -xf "$TMP/proj.tar" -C "$F" || fail "tar -x into the mount"
note "tar -x of $count entries: $(($(now_ms) - start)) ms"
with_timeout 120 diff -r --no-dereference "$src" "$F/proj" >"$TMP/diff" 2>&1 ||
	fail "diff -r source vs mount: $(head -n 20 "$TMP/diff")"
with_timeout 120 diff -r --no-dereference "$src" "$B/proj" >"$TMP/diff" 2>&1 ||
	fail "diff -r source vs backing root: $(head -n 20 "$TMP/diff")"
# What diff does not look at: modes, link targets, mtimes.
listing() {
	(cd "$1" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort)
}
mtimes_of() {
	(cd "$1" && find . -type f -printf '%p %T@\n' | LC_ALL=C sort)
}
listing "$src" >"$TMP/l.src"
listing "$B/proj" >"$TMP/l.back"
diff "$TMP/l.src" "$TMP/l.back" >"$TMP/diff" ||
	fail "modes or links differ on disk: $(head -n 20 "$TMP/diff")"
with_timeout 120 sh -c "cd '$F/proj' && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort" \
	>"$TMP/l.mnt" || fail "find through the mount"
diff "$TMP/l.src" "$TMP/l.mnt" >"$TMP/diff" ||
	fail "modes or links differ through the mount: $(head -n 20 "$TMP/diff")"
mtimes_of "$src" >"$TMP/t.src"
mtimes_of "$B/proj" >"$TMP/t.back"
diff "$TMP/t.src" "$TMP/t.back" >"$TMP/diff" ||
	fail "mtimes differ on disk: $(head -n 10 "$TMP/diff")"

# ---- tar c out of the mount -------------------------------------------------------------
with_timeout 300 tar -cf "$TMP/back.tar" -C "$F" proj || fail "tar -c out of the mount"
mkdir "$TMP/out"
tar -xf "$TMP/back.tar" -C "$TMP/out" || fail "tar -x of the copy"
diff -r --no-dereference "$src" "$TMP/out/proj" >"$TMP/diff" 2>&1 ||
	fail "the tree read back differs: $(head -n 20 "$TMP/diff")"

# rm -r of the whole tree.
with_timeout 120 rm -r "$F/proj" || fail "rm -r"
[ -e "$B/proj" ] && fail "rm -r left $B/proj"

# ---- git ------------------------------------------------------------------------------
# The files belong to the sandbox's user, not to this one: git must be
# told that the repository is safe. Nothing from the user's own
# configuration plays a part.
cat >"$TMP/gitconfig" <<EOF
[user]
	name = Sandbox Test
	email = test@example.invalid
[safe]
	directory = *
[init]
	defaultBranch = main
[gc]
	auto = 0
EOF
GIT_CONFIG_GLOBAL=$TMP/gitconfig
GIT_CONFIG_NOSYSTEM=1
HOME=$TMP
export GIT_CONFIG_GLOBAL GIT_CONFIG_NOSYSTEM HOME

repo=$F/repo
g() {
	with_timeout 120 git -C "$repo" "$@"
}
with_timeout 60 git init -q "$repo" || fail "git init"
[ -f "$B/repo/.git/HEAD" ] || fail "git init: no .git/HEAD on disk"
with_timeout 30 sh -c "printf 'first\n' >'$repo/a.txt'" || fail "write a.txt"
with_timeout 30 mkdir -p "$repo/src" || fail "mkdir src"
with_timeout 30 sh -c "printf 'int main(void) { return 0; }\n' >'$repo/src/main.c'" ||
	fail "write src/main.c"
with_timeout 60 cp "$TMP/proj.tar" "$repo/blob.tar" || fail "cp blob.tar"
# The checks after the first commit mean something only when it worked.
git_rest() {
	with_timeout 30 sh -c "printf 'second\n' >>'$repo/a.txt'" || fail "append to a.txt"
	g mv src/main.c src/prog.c || fail "git mv"
	g commit -q -a -m "second commit" || fail "git commit -a"
	assert_eq "second commit
first commit" "$(g log --format=%s)" "git log"
	assert_eq "" "$(g status --porcelain)" "git status after the commits"
	g fsck --strict >"$TMP/fsck" 2>&1 || fail "git fsck: $(head -n 10 "$TMP/fsck")"
	# The same repository read directly from the backing root.
	assert_eq "second commit
first commit" "$(with_timeout 60 git -C "$B/repo" log --format=%s)" "git log on disk"
	assert_eq "$(g rev-parse HEAD)" "$(git -C "$B/repo" rev-parse HEAD)" "HEAD on disk"
	assert_eq "$(printf 'first\nsecond')" "$(g show HEAD:a.txt)" "git show"
	g checkout -q HEAD~1 -- a.txt || fail "git checkout of an old version"
	assert_content "$B/repo/a.txt" first "the checked-out file on disk"
	[ -e "$repo/.git/index.lock" ] && fail "a stale index.lock"
}
if ! g add -A 2>"$TMP/git.err"; then
	fail "git add: $(cat "$TMP/git.err")"
elif ! g commit -q -m "first commit" 2>"$TMP/git.err"; then
	fail "git commit: $(cat "$TMP/git.err")"
else
	git_rest
fi

finish
