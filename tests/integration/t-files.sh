#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-files: everyday tools on MOUNT/<sandbox>/files/, each result compared
# with the sandbox's backing root on disk: ls, stat (size, mode, mtime),
# cat, cp in and out, mv (a rename, over an existing file, atomic for a
# concurrent reader), rm, mkdir -p, rmdir (and ENOTEMPTY), symbolic links,
# chmod, touch -d and -m, truncate (grow, shrink), >>, dd conv=notrunc
# seek=, and an editor's save by rename (write, fsync, rename).

. "$(dirname "$0")/lib.sh"

one_sandbox
mount_fs

# The sandbox's user (who owns its root) is shown as the mounting user.
SBX_IDS="$(stat -c '%u %g' "$B")"
ME_IDS="$(id -u) $(id -g)"
as_mounted() {
	sed "s/ $SBX_IDS / $ME_IDS /"
}

# stat fields both sides must agree on: type, mode, size, links, owner
# (as the mount shows it), mtime with nanoseconds.
same_stat() {
	_m=$(w stat -c '%F %a %s %h %u %g %.9Y' "$F/$1" 2>&1)
	_b=$(stat -c '%F %a %s %h %u %g %.9Y' "$B/$1" 2>&1 | as_mounted)
	assert_eq "$_b" "$_m" "stat $1 (backing root vs mount)"
}

# ---- the layout ------------------------------------------------------------------
assert_eq "a" "$(w ls "$MNT")" "ls MOUNT"
assert_eq "ctl events exec files info jobs" "$(w ls "$MNT/a" | tr '\n' ' ' | sed 's/ $//')" \
	"ls MOUNT/a"
assert_eq "" "$(w ls -A "$F")" "ls of an empty files/"

# ---- cp in, cat, cp out ------------------------------------------------------------
head -c 5000000 /dev/urandom >"$TMP/rand"
printf 'line one\nline two\n' >"$TMP/text"
assert_ok cp "$TMP/rand" "$F/rand"
assert_ok cp "$TMP/text" "$F/text"
assert_file_eq "$TMP/rand" "$B/rand" "cp in: the backing file"
assert_file_eq "$TMP/text" "$B/text" "cp in: the backing file"
w cat "$F/rand" >"$TMP/cat.out" || fail "cat rand"
assert_file_eq "$TMP/rand" "$TMP/cat.out" "cat through the mount"
assert_ok cp "$F/rand" "$TMP/out"
assert_file_eq "$TMP/rand" "$TMP/out" "cp out"
assert_content "$F/text" "$(printf 'line one\nline two')" "cat text"
# A file written on the backing side is what the mount reads (after
# the attribute cache, default 1 s).
printf 'from the backing side\n' >"$B/direct"
sleep 1.2
assert_content "$F/direct" "from the backing side" "a file made on the backing side"

# ---- ls and stat ------------------------------------------------------------------------
assert_ok mkdir -p "$F/tree/sub/deeper"
for n in 1 2 3 4 5; do
	echo "$n" | w tee "$F/tree/f$n" >/dev/null || fail "write tree/f$n"
done
assert_ok ln -s f1 "$F/tree/link"
assert_eq "$(ls -A "$B/tree")" "$(w ls -A "$F/tree")" "ls -A tree"
assert_eq "$(cd "$B" && find tree | LC_ALL=C sort)" \
	"$(cd "$F" && w find tree | LC_ALL=C sort)" "find tree"
for p in rand text tree/f1 tree/link; do
	same_stat "$p"
done
# A directory's own attributes (links, mtime) show this mount's changes
# to its entries at once, after each kind of change (rsync -a sets a
# directory's mtime after filling it, and must find it kept).
for p in tree tree/sub; do
	same_stat "$p"
done
w touch "$F/tree/sub/new" || fail "touch tree/sub/new"
same_stat tree/sub
w mkdir "$F/tree/sub/nd" || fail "mkdir tree/sub/nd"
same_stat tree/sub
w mv "$F/tree/sub/new" "$F/tree/sub/nd/new" || fail "mv into tree/sub/nd"
same_stat tree/sub
same_stat tree/sub/nd
w ln -s new "$F/tree/sub/nd/sl" || fail "ln -s in tree/sub/nd"
same_stat tree/sub/nd
w rm "$F/tree/sub/nd/sl" "$F/tree/sub/nd/new" || fail "rm in tree/sub/nd"
same_stat tree/sub/nd
w rmdir "$F/tree/sub/nd" || fail "rmdir tree/sub/nd"
same_stat tree/sub
printf 'x\n' >"$TMP/x"
w cp "$TMP/x" "$F/tree/sub/cp" || fail "cp into tree/sub"
w touch -d '2001-01-01 00:00:00' "$F/tree/sub" || fail "touch -d tree/sub"
same_stat tree/sub
w rm "$F/tree/sub/cp" || fail "rm tree/sub/cp"
# ls -l: modes, links, owners, sizes, times and link targets alike.
# shellcheck disable=SC2012 # ls -l output is what is compared
assert_eq "$(ls -ln --time-style=+%s "$B/tree" | sed 1d | tr -s ' ' | as_mounted)" \
	"$(w ls -ln --time-style=+%s "$F/tree" | sed 1d | tr -s ' ')" "ls -ln tree"
# The sandbox's files are the mounting user's, so ownership checks such
# as git's accept them.
assert_eq "$ME_IDS" "$(w stat -c '%u %g' "$F/rand")" "owner of a sandbox file"
assert_eq "$ME_IDS" "$(w stat -c '%u %g' "$F/tree")" "owner of a sandbox directory"
w ls -l "$F/tree/link" | grep -q -- '-> f1$' || fail "ls -l does not show the link target"

# ---- mv ---------------------------------------------------------------------------
printf 'one\n' | w tee "$F/m1" >/dev/null
printf 'two\n' | w tee "$F/m2" >/dev/null
assert_ok mv "$F/m1" "$F/m3"
[ -e "$B/m1" ] && fail "mv: m1 is still on disk"
assert_content "$B/m3" "one" "mv: m3 on disk"
assert_ok mv "$F/m3" "$F/m2"
assert_content "$B/m2" "one" "mv over an existing file"
[ -e "$B/m3" ] && fail "mv over: m3 is still on disk"
assert_ok mv "$F/tree/sub" "$F/moved-sub"
[ -d "$B/moved-sub/deeper" ] || fail "mv of a directory"
assert_errno "No such file or directory" mv "$F/nothing" "$F/x"

# Atomic replacement: a reader that keeps opening the name never finds
# it missing or half written while a writer keeps renaming new versions
# over it.
printf 'version 0 %s\n' "$(head -c 3000 /dev/zero | tr '\0' x)" >"$TMP/v"
w cp "$TMP/v" "$F/atomic"
replacer "$F/atomic" 40 "$(head -c 3000 /dev/zero | tr '\0' x)"
bad=0
reads=0
end=$(($(date +%s) + 60 * SLOW))
while alive "$writer" && [ "$(date +%s)" -lt "$end" ]; do
	c=$(with_timeout 10 cat "$F/atomic" 2>&1)
	reads=$((reads + 1))
	case $c in
	"version "*x) ;;
	*)
		bad=$((bad + 1))
		note "reader saw: $(echo "$c" | head -c 80)"
		;;
	esac
done
wait "$writer" || fail "the renaming writer failed"
assert_eq 0 "$bad" "reads that saw a missing or partial file (of $reads)"
assert_content "$B/atomic" "version 40 $(head -c 3000 /dev/zero | tr '\0' x)" \
	"the last version"

# ---- rm, mkdir -p, rmdir --------------------------------------------------------------
assert_ok rm "$F/m2"
[ -e "$B/m2" ] && fail "rm: still on disk"
assert_errno "No such file or directory" rm "$F/m2"
assert_ok mkdir -p "$F/p/q/r"
[ -d "$B/p/q/r" ] || fail "mkdir -p: not on disk"
assert_ok mkdir -p "$F/p/q/r"
assert_errno "Directory not empty" rmdir "$F/p"
[ -d "$B/p/q/r" ] || fail "rmdir of a non-empty directory removed something"
assert_ok rmdir "$F/p/q/r"
[ -e "$B/p/q/r" ] && fail "rmdir: still on disk"
assert_errno "Not a directory" rmdir "$F/text"
assert_ok rm -r "$F/p"
[ -e "$B/p" ] && fail "rm -r: still on disk"

# ---- symbolic links ----------------------------------------------------------------
assert_ok ln -s text "$F/sl"
assert_ok ln -s ../text "$F/tree/up"
assert_ok ln -s no/such/target "$F/dangling"
[ -L "$B/sl" ] || fail "ln -s: no symlink on disk"
assert_eq text "$(readlink "$B/sl")" "the link on disk"
assert_eq text "$(w readlink "$F/sl")" "readlink"
assert_eq no/such/target "$(w readlink "$F/dangling")" "readlink of a dangling link"
assert_content "$F/sl" "$(printf 'line one\nline two')" "cat through a link"
assert_content "$F/tree/up" "$(printf 'line one\nline two')" "cat through ../"
assert_errno "No such file or directory" cat "$F/dangling"
w ls -l "$F" | grep -q ' sl -> text$' || fail "ls -l shows no 'sl -> text'"
assert_ok rm "$F/sl"
[ -e "$B/text" ] || fail "rm of a link removed its target"

# ---- hard links: a write through one name is read through the other --------------
printf 'hard\n' | w tee "$F/h1" >/dev/null
assert_ok ln "$F/h1" "$F/h2"
assert_eq 2 "$(stat -c %h "$B/h1")" "ln: links on disk"
assert_eq "$(stat -c %i "$B/h1")" "$(stat -c %i "$B/h2")" "ln: one inode on disk"
# Both names' attributes are now in the kernel's cache.
assert_eq "5 5" "$(w stat -c %s "$F/h1" "$F/h2" | tr '\n' ' ' | sed 's/ $//')" "sizes"
w sh -c "echo more >>'$F/h2'" || fail "append through h2"
# Each name of a hard link is its own inode to the kernel: another name's
# cached attributes may be up to attr_timeout old (SEMANTICS.md).
sleep 1.2
assert_content "$F/h1" "$(printf 'hard\nmore')" "h1 after a write through h2"
assert_ok rm "$F/h2"
assert_content "$F/h1" "$(printf 'hard\nmore')" "h1 after rm h2"

# ---- chmod ---------------------------------------------------------------------
assert_ok chmod 600 "$F/text"
assert_eq 600 "$(stat -c %a "$B/text")" "chmod 600 on disk"
assert_eq 600 "$(w stat -c %a "$F/text")" "chmod 600 through the mount"
assert_ok chmod 755 "$F/tree"
assert_eq 755 "$(stat -c %a "$B/tree")" "chmod of a directory"
assert_ok chmod u+x,g-r "$F/text"
assert_eq 700 "$(stat -c %a "$B/text")" "chmod u+x,g-r"
assert_ok chmod 644 "$F/text"

# ---- touch --------------------------------------------------------------------------
assert_ok touch -d '2001-02-03 04:05:06.123456789 UTC' "$F/text"
assert_eq 981173106.123456789 "$(stat -c %.9Y "$B/text")" "touch -d: mtime on disk"
assert_eq 981173106.123456789 "$(stat -c %.9X "$B/text")" "touch -d: atime on disk"
same_stat text
assert_ok touch -m -d @1234567890 "$F/text"
assert_eq 1234567890 "$(stat -c %Y "$B/text")" "touch -m: mtime"
assert_eq 981173106 "$(stat -c %X "$B/text")" "touch -m changed atime"
assert_ok touch "$F/new-by-touch"
[ -f "$B/new-by-touch" ] || fail "touch did not create the file"
assert_eq 0 "$(stat -c %s "$B/new-by-touch")" "a touched file's size"

# ---- truncate ---------------------------------------------------------------------
printf '0123456789' | w tee "$F/tr" >/dev/null
assert_ok truncate -s 100000 "$F/tr"
assert_eq 100000 "$(stat -c %s "$B/tr")" "truncate grow: size on disk"
assert_eq 100000 "$(w stat -c %s "$F/tr")" "truncate grow: size through the mount"
assert_eq "0123456789" "$(w head -c 10 "$F/tr")" "truncate grow: the start"
assert_eq 0 "$(w tail -c +11 "$F/tr" | tr -d '\0' | wc -c)" \
	"truncate grow: non-zero bytes after the old end"
assert_ok truncate -s 4 "$F/tr"
assert_content "$B/tr" 0123 "truncate shrink on disk"
assert_content "$F/tr" 0123 "truncate shrink through the mount"

# ---- append ------------------------------------------------------------------------
w sh -c "echo first >>'$F/app'" || fail "append 1"
w sh -c "echo second >>'$F/app'" || fail "append 2"
w sh -c "printf third >>'$F/app'" || fail "append 3"
assert_content "$B/app" "$(printf 'first\nsecond\nthird')" "appends on disk"
assert_content "$F/app" "$(printf 'first\nsecond\nthird')" "appends through the mount"

# ---- random writes -------------------------------------------------------------------
head -c 1048576 /dev/urandom >"$TMP/rw.local"
w cp "$TMP/rw.local" "$F/rw" || fail "cp rw"
for spec in "5000 XYZ" "1048570 tailpatch" "0 head" "524288 middle"; do
	off=${spec%% *}
	data=${spec#* }
	printf '%s' "$data" | dd of="$TMP/rw.local" bs=1 seek="$off" conv=notrunc status=none
	printf '%s' "$data" | w dd of="$F/rw" bs=1 seek="$off" conv=notrunc status=none ||
		fail "dd seek=$off"
done
assert_file_eq "$TMP/rw.local" "$B/rw" "random writes (on disk)"
assert_file_eq "$TMP/rw.local" "$F/rw" "random writes (through the mount)"
# Block-sized writes into the middle, past the old end.
dd if=/dev/zero of="$TMP/rw.local" bs=4096 count=3 seek=100 conv=notrunc status=none
w dd if=/dev/zero of="$F/rw" bs=4096 count=3 seek=100 conv=notrunc status=none || fail "dd bs=4096"
dd if="$TMP/rand" of="$TMP/rw.local" bs=65536 count=2 seek=20 conv=notrunc status=none
w dd if="$TMP/rand" of="$F/rw" bs=65536 count=2 seek=20 conv=notrunc status=none || fail "dd past the end"
assert_file_eq "$TMP/rw.local" "$B/rw" "block writes (on disk)"
assert_eq "$(stat -c %s "$TMP/rw.local")" "$(w stat -c %s "$F/rw")" "size after writing past the end"

# ---- an editor's save: write a temporary file, fsync it, rename it over ----------
printf 'draft 1\n' | w tee "$F/doc.txt" >/dev/null
ino1=$(stat -c %i "$B/doc.txt")
w sh -c "printf 'draft 2\n' >'$F/.doc.txt.swp'" || fail "write the temporary file"
assert_ok sync "$F/.doc.txt.swp"
assert_ok mv "$F/.doc.txt.swp" "$F/doc.txt"
assert_content "$B/doc.txt" "draft 2" "saved by rename (on disk)"
assert_content "$F/doc.txt" "draft 2" "saved by rename (through the mount)"
assert_ne "$ino1" "$(stat -c %i "$B/doc.txt")" "the saved file is a new file"
[ -e "$B/.doc.txt.swp" ] && fail "the temporary file is still there"
# The backup-copy variant (cp -p to doc~, then write in place).
assert_ok touch -d @1000000000 "$F/doc.txt"
assert_ok cp -p "$F/doc.txt" "$F/doc.txt~"
w sh -c "printf 'draft 3\n' >'$F/doc.txt'" || fail "write in place"
assert_content "$B/doc.txt~" "draft 2" "the backup copy"
assert_content "$B/doc.txt" "draft 3" "written in place"
assert_eq 1000000000 "$(stat -c %Y "$B/doc.txt~")" "cp -p kept the mtime"

# ---- df ------------------------------------------------------------------------------
w df "$F" >/dev/null || fail "df files/"

# ---- rsync -a of a tree with read-only directories, in and out ------------------
# The mounting user does what the owner of a native copy could: the tree
# copied into the mount and back out is the tree copied natively.
mkdir -p "$TMP/ro/top/sub" "$TMP/ro/top/open"
printf 'in a read-only directory\n' >"$TMP/ro/top/sub/f"
printf 'x\n' >"$TMP/ro/top/open/g"
# Old times: rsync leaves a directory's time alone when it is within the
# same second as the source's.
find "$TMP/ro" -exec touch -h -d '2001-02-03 04:05:06.123456789' {} +
chmod 0444 "$TMP/ro/top/sub/f"
chmod 0555 "$TMP/ro/top/sub" "$TMP/ro/top"
with_timeout 60 rsync -a "$TMP/ro/" "$TMP/ro-native/" || fail "rsync -a natively"
w rsync -a "$TMP/ro/" "$F/ro/" || fail "rsync -a of read-only directories into the mount"
w rsync -a "$F/ro/" "$TMP/ro-back/" || fail "rsync -a of read-only directories out of the mount"
tree_of() {
	(cd "$1" && find . -printf '%p %y %m %s %T@\n' | LC_ALL=C sort)
}
assert_eq "$(tree_of "$TMP/ro-native")" "$(tree_of "$B/ro")" "the tree rsync -a made in the sandbox"
assert_eq "$(tree_of "$TMP/ro-native")" "$(tree_of "$TMP/ro-back")" "the tree rsync -a copied back out"
chmod -R u+w "$TMP/ro" "$TMP/ro-native" "$TMP/ro-back" "$B/ro"

finish
