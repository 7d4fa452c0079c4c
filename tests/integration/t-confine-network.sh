#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-confine-network: a sandbox has a network of its own (doc/commands.md,
# "Network"). The test runs in a network namespace it makes, with
# services on the loopback (standing for the host's sshd and agents), on
# a non-loopback address of the host (198.18.0.1) and on the cloud
# metadata address (169.254.169.254). A job of a sandbox with user-mode
# networking reaches none of the loopback services (neither through its
# own 127.0.0.1 nor through slirp4netns's 10.0.2.2) nor the metadata
# address, but does reach the non-loopback one; a sandbox created with
# --network none has its loopback only.

if [ -z "${SBFS_IN_NETNS:-}" ] && [ "$(id -u)" -eq 0 ] &&
	command -v unshare >/dev/null 2>&1; then
	SBFS_IN_NETNS=1
	export SBFS_IN_NETNS
	exec unshare --net -- /bin/sh "$0" "$@"
fi

. "$(dirname "$0")/lib.sh"

need_fuse
need_root "a network namespace of the test's own"
need_cmd ip
[ -x "$SBFS_PROBE" ] || skip "$SBFS_PROBE is not built"
[ -n "${SBFS_IN_NETNS:-}" ] || skip "unshare --net is not available"

ip link set lo up || hard_error "lo up"
ip addr add 198.18.0.1/32 dev lo || hard_error "198.18.0.1"
ip addr add 169.254.169.254/32 dev lo || hard_error "169.254.169.254"

listen() {
	bg "$SBFS_PROBE" listen "$1" "$2" "$3" 600 >"$TMP/listen.$2" 2>&1
	wait_for 10 grep -q listening "$TMP/listen.$2" || die "no listener on $1:$2"
}
listen 127.0.0.1 2222 host-loopback-service
listen 198.18.0.1 3333 local-service
listen 169.254.169.254 80 metadata-service
assert_eq "connected: host-loopback-service" "$("$SBFS_PROBE" connect 127.0.0.1 2222)" \
	"the loopback service from the host"

# A probe built with AddressSanitizer reserves terabytes of address
# space at start, which a sandbox's default memory limit (an rlimit
# where there is no cgroup) refuses: such a build's sandboxes get room.
room=
grep -q __asan_init "$SBFS_PROBE" 2>/dev/null && room="--memory 65536G"
# shellcheck disable=SC2086 # room is empty or two words
sbx_create u $room
# shellcheck disable=SC2086
sbx_create n --network none $room
assert_eq none "$(sbx_field n network)" "the record of --network none"
for s in u n; do
	cp "$SBFS_PROBE" "$(sbx_root $s)/probe"
	chown --reference="$(sbx_root $s)" "$(sbx_root $s)/probe"
	sbx_start $s
done
mount_fs

probe_in() {
	sbx_job "$1" "./probe connect $2 $3"
	cat "$TMP/job.out"
}

# ---- user-mode networking ---------------------------------------------------------------------
got=$(probe_in u 127.0.0.1 2222)
assert_eq "error: ECONNREFUSED" "$got" "the sandbox's 127.0.0.1:2222"
got=$(probe_in u 10.0.2.2 2222)
case $got in
error:*) ;;
*) fail "slirp4netns's host address reaches the host's loopback: $got" ;;
esac
got=$(probe_in u 169.254.169.254 80)
assert_eq "error: EHOSTUNREACH" "$got" "the metadata address"
if command -v slirp4netns >/dev/null 2>&1; then
	assert_eq "connected: local-service" "$(probe_in u 198.18.0.1 3333)" \
		"a non-loopback address of the host through user-mode networking"
	grep -q 'network: user-mode (slirp4netns)' "$(sbx_agent_log u)" ||
		fail "the agent does not say it uses user-mode networking"
else
	note "slirp4netns is not installed: outbound connections not checked"
	grep -q 'commands have no network' "$(sbx_agent_log u)" ||
		fail "the agent does not say its commands have no network"
fi

# ---- none -------------------------------------------------------------------------------------
assert_eq "error: ENETUNREACH" "$(probe_in n 198.18.0.1 3333)" "--network none to the host's address"
assert_eq "error: ECONNREFUSED" "$(probe_in n 127.0.0.1 2222)" "--network none to the loopback"
sbx_job n "grep -c : /proc/net/dev; grep -o '^ *lo:' /proc/net/dev | tr -d ' '"
assert_eq "$(printf '1\nlo:')" "$(cat "$TMP/job.out")" "--network none's interfaces"

finish
