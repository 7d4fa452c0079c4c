#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-reads: reads are exact (SEMANTICS.md). A large file read cold (right
# after a mount, the page cache dropped) comes back whole, byte for byte,
# every time, by cat, cp and dd with odd block sizes, and its size seen
# through the mount never shrinks because of a read; so do many files
# read in parallel, and a file that grows inside the sandbox while a
# reader holds it open. Each result is compared with the backing file by
# checksum.

. "$(dirname "$0")/lib.sh"

one_sandbox

TRIES=${SBFS_READS_TRIES:-6}
BIG=$((200 * 1024 * 1024))
head -c "$BIG" /dev/urandom >"$B/big" || die "make big"
want=$(sha256sum <"$B/big")
mkdir "$B/par"
for i in $(seq 1 32); do
	head -c 20000000 /dev/urandom >"$B/par/f$i" || die "make par/f$i"
done
(cd "$B/par" && sha256sum f* | LC_ALL=C sort) >"$TMP/par.want"

# A cold start: a fresh mount, and (as root) no page cache anywhere.
cold() {
	[ -n "$MOUNT_PID" ] && umount_fs
	mount_fs
	[ "$(id -u)" -eq 0 ] && sync && echo 3 >/proc/sys/vm/drop_caches
	return 0
}

# ---- one large file, cold, many times ------------------------------------------
t=1
while [ "$t" -le "$TRIES" ]; do
	cold
	case $((t % 3)) in
	0) got=$(with_timeout 120 cat "$F/big" | sha256sum) ;;
	1) got=$(with_timeout 120 dd if="$F/big" bs=1000000 status=none | sha256sum) ;;
	2) with_timeout 120 cp "$F/big" "$TMP/big.copy" || fail "cp big (try $t)"
	   got=$(sha256sum <"$TMP/big.copy")
	   rm -f "$TMP/big.copy" ;;
	esac
	assert_eq "$want" "$got" "checksum of big, cold read $t"
	assert_eq "$BIG" "$(with_timeout 30 stat -c %s "$F/big")" \
		"size of big after cold read $t"
	t=$((t + 1))
done

# ---- 32 readers at once ----------------------------------------------------------
for round in 1 2; do
	cold
	pids=""
	for i in $(seq 1 32); do
		(cd "$F/par" && with_timeout 120 sha256sum "f$i" >"$TMP/par.$i") &
		pids="$pids $!"
	done
	for p in $pids; do
		wait "$p" || fail "a parallel reader failed (round $round)"
	done
	cat "$TMP"/par.[0-9]* | LC_ALL=C sort >"$TMP/par.got"
	if ! cmp -s "$TMP/par.want" "$TMP/par.got"; then
		fail "parallel readers, round $round: checksums differ"
		diff "$TMP/par.want" "$TMP/par.got" | head -n 10 | sed 's/^/  /'
	fi
	rm -f "$TMP"/par.[0-9]*
done

# ---- a file that grows in the sandbox under an open reader -------------------------
# The reader has read to the old end; bytes appended inside the sandbox
# are read by the same descriptor once its size is attr_timeout old, whole
# (the read past the old size reaches the agent).
cold
head -c 5000000 /dev/urandom >"$B/grow"
head -c 7000000 /dev/urandom >"$TMP/more"
exec 5<"$F/grow"
with_timeout 60 dd bs=1048576 count=5 iflag=fullblock status=none <&5 >"$TMP/part1" ||
	fail "first part of grow"
cat "$TMP/more" >>"$B/grow"
# The new size is seen once attributes are at most attr_timeout old.
sleep 1.2
with_timeout 60 cat <&5 >"$TMP/part2" || fail "rest of grow"
exec 5<&-
cat "$TMP/part1" "$TMP/part2" >"$TMP/grow.got"
assert_file_eq "$B/grow" "$TMP/grow.got" "grow read across its old end"

finish
