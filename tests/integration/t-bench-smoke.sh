#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-bench-smoke: the benchmark's small variant (bench/smoke) runs through:
# two sandboxes (extension and strict v1), an sshd and sshfs on loopback,
# the delay proxy, the visibility probe (a mount with and one without
# change events), and every workload gives a number for every target,
# with every answer of sandboxfs and native checked against the native
# directory's (a wrong one fails this test). Then bench/run --self-test
# spoils every answer of sandboxfs on purpose and must catch each of them.
# Speed is not judged. It needs root and FUSE (skips without them, fails
# with SBFS_REQUIRE_FUSE=1), and sshfs and openssh-server, which CI
# installs: without them it fails, saying so.

. "$(dirname "$0")/lib.sh"

need_fuse
need_root "bench/run starts an sshd and mounts sshfs as root"
# The benchmark's ssh user reads its keys in a work directory under $TMP.
chmod 0711 "$TMP"
for _c in sshfs ssh ssh-keygen rsync /usr/sbin/sshd; do
	command -v "$_c" >/dev/null 2>&1 ||
		die "$_c is not installed: scripts/install-deps --bench installs it"
done
for _p in delay-proxy vis-probe; do
	[ -x "$SBFS_BUILDDIR/bench/$_p" ] ||
		die "$SBFS_BUILDDIR/bench/$_p is not built"
done

# bench/run uses the build under test (SBFS_BUILDDIR), never one of its own.
with_timeout 1500 sh "$SBFS_SRCDIR/bench/smoke" \
	>"$TMP/smoke.out" 2>&1
rc=$?
sed 's/^/# /' "$TMP/smoke.out"
[ "$rc" -eq 0 ] || fail "bench/smoke failed (exit $rc)"
finish
