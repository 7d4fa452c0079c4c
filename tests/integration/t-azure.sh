#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-azure: a full mount with provider=azure against the fake Azure of
# tests/azure-fake: a TLS data plane and token endpoint and a TLS proxy in
# front of real sandbox-agent processes, reached with the production
# checks (https, Azure host names, certificate verification) through a
# test CA and pinned name resolution. The mount gets its settings from an
# azure_config file and its credential (a client secret) from the
# environment.
#
# Scenarios: the list of sandboxes; a read and ENOENT; a job; a new boot
# (new credential and port behind the same URL) between two operations; a
# stopped sandbox resumed on first access (its agent starts when the data
# plane is asked to resume it), also right after it was stopped under the
# mount (the record is read before every operation); a legacy (native) session read and listed
# through the data plane; an unknown transport label refused with EPROTO.
# Every data-plane call must have carried the bearer and the api-version,
# and the daemon's log must hold no credential.

# shellcheck disable=SC2016 # job command lines are expanded in the sandbox
. "$(dirname "$0")/lib.sh"

need_fuse
FAKE=$SBFS_BUILDDIR/tests/azure-fake
[ -x "$FAKE" ] || skip "$FAKE is not built"
# The fake is reached directly: a proxy from the caller's environment would
# be used for the data plane (as the Azure SDKs do) and cannot reach it.
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy \
	NO_PROXY no_proxy

FD=$TMP/azure
for _b in alpha beta nat odd; do
	mkdir -p "$FD/sandboxes/$_b/root"
done
printf 'hello from alpha\n' >"$FD/sandboxes/alpha/root/hello.txt"
printf 'beta was asleep\n' >"$FD/sandboxes/beta/root/b.txt"
printf 'native text\n' >"$FD/sandboxes/nat/root/n.txt"
mkdir "$FD/sandboxes/nat/root/sub"
printf 'deeper\n' >"$FD/sandboxes/nat/root/sub/d.txt"

# shellcheck disable=SC2086 # VALGRIND_CMD is a word list
bg $VALGRIND_CMD "$FAKE" --dir "$FD" --agent "$SBFS_AGENT" \
	--sandbox alpha --sandbox beta:stopped --sandbox nat:native \
	--sandbox odd >"$TMP/fake.log" 2>&1
FAKE_PID=$BG_PID
wait_for 60 test -f "$FD/ready" || {
	cat "$TMP/fake.log"
	hard_error "the fake Azure did not start"
}
# The credential chain's variables (a client secret) for the mount.
# shellcheck disable=SC1091
. "$FD/env"

ctl_n=0
# fake_ctl COMMAND...: one control command, waited for.
fake_ctl() {
	ctl_n=$((ctl_n + 1))
	echo "$*" >"$FD/ctl"
	wait_for 60 grep -qx "ok $ctl_n" "$FD/ctl.log" ||
		die "the fake did not do: $*"
}

fake_ctl label odd carrier-pigeon-v9
# The settings come from the file; the listing's record cache from an
# option (it never serves an operation inside a sandbox).
mount_fs "provider=azure,azure_config=$FD/azure.conf,azure_record_cache=5"

# ---- the list --------------------------------------------------------------------------------
assert_eq "alpha beta nat odd" "$(w ls "$MNT" | tr '\n' ' ' | sed 's/ $//')" "ls"

# ---- read and ENOENT --------------------------------------------------------------------------
assert_content "$MNT/alpha/files/hello.txt" "hello from alpha" "a read"
assert_errno 'No such file or directory' cat "$MNT/alpha/files/missing"
assert_errno 'No such file or directory' ls "$MNT/nobody-here"
w cat "$MNT/alpha/info" >"$TMP/info" || fail "cat info"
grep -q '"transport": *"agent"' "$TMP/info" || fail "info: $(cat "$TMP/info")"
grep -q 'adcproxy.io' "$TMP/info" || fail "info names no route: $(cat "$TMP/info")"

# ---- a job ------------------------------------------------------------------------------------
w sh -c 'printf "%s\n" "$1" >"$2"' sh 'echo job-out; cat hello.txt' \
	"$MNT/alpha/exec" || fail "echo > exec"
assert_content "$MNT/alpha/jobs/latest/exit" 0 "a job's exit"
assert_eq "$(printf 'job-out\nhello from alpha')" \
	"$(w cat "$MNT/alpha/jobs/latest/stdout")" "a job's stdout"

# ---- a new boot between two operations ---------------------------------------------------------
pid1=$(cat "$FD/sandboxes/alpha/pid")
fake_ctl reboot alpha
pid2=$(cat "$FD/sandboxes/alpha/pid")
assert_ne "$pid1" "$pid2" "the agent after a reboot"
assert_content "$MNT/alpha/files/hello.txt" "hello from alpha" "a read after a new boot"
printf 'written after the boot\n' >"$TMP/w"
w cp "$TMP/w" "$MNT/alpha/files/new.txt" || fail "a write after a new boot"
assert_content "$FD/sandboxes/alpha/root/new.txt" "written after the boot" \
	"the written file on disk"

# ---- a stopped sandbox, resumed on first access --------------------------------------------------
[ -f "$FD/sandboxes/beta/pid" ] && fail "beta has an agent before its resume"
assert_content "$MNT/beta/files/b.txt" "beta was asleep" "a read that resumes"
[ -f "$FD/sandboxes/beta/pid" ] || fail "beta was not resumed through the data plane"
w cat "$MNT/beta/info" >"$TMP/info" || fail "cat beta/info"
grep -q '"state": *"Running"' "$TMP/info" || fail "beta info: $(cat "$TMP/info")"
# Stopped under the mount, then used at once: every operation reads the
# record first, so the mount resumes it (azure_record_cache, 5 s here, only
# serves listings).
w ls "$MNT" >/dev/null || fail "ls of the mount"
fake_ctl stop alpha
assert_content "$MNT/alpha/files/hello.txt" "hello from alpha" \
	"a read of a sandbox stopped under the mount"

# ---- a native (legacy) session --------------------------------------------------------------------
w cat "$MNT/nat/info" >"$TMP/info" || fail "cat nat/info"
grep -q '"transport": *"native"' "$TMP/info" || fail "nat info: $(cat "$TMP/info")"
assert_content "$MNT/nat/files/n.txt" "native text" "a native read"
assert_content "$MNT/nat/files/sub/d.txt" "deeper" "a native read below"
assert_eq "n.txt sub" "$(w ls "$MNT/nat/files" | tr '\n' ' ' | sed 's/ $//')" \
	"a native listing"
assert_errno 'No such file or directory' cat "$MNT/nat/files/missing"

# ---- an unknown transport label ---------------------------------------------------------------------
assert_errno 'Protocol error' ls "$MNT/odd/files"
assert_errno 'Protocol error' cat "$MNT/odd/files/x"
# The others keep working.
assert_content "$MNT/alpha/files/hello.txt" "hello from alpha" "alpha after the refusal"

allow_log 'sandbox odd: .*agentTransportInvalid|carrier-pigeon|EPROTO|Protocol error'
allow_log 'sandbox (alpha|nat): .*(PATH_NOT_FOUND|No such file|missing)'
umount_fs

# ---- no credential at all: the mount says why and mounts nothing -----------------------------
# No secret, no workload identity, a managed-identity endpoint that is not
# there, no Azure CLI on PATH.
mkdir "$TMP/empty-bin"
with_timeout 30 env -u AZURE_CLIENT_SECRET -u AZURE_CLIENT_ID -u AZURE_TENANT_ID \
	-u AZURE_FEDERATED_TOKEN_FILE -u IDENTITY_ENDPOINT \
	AZURE_POD_IDENTITY_AUTHORITY_HOST=http://127.0.0.1:9 PATH="$TMP/empty-bin" \
	"$SBFS_MOUNT" -f -o "provider=azure,azure_config=$FD/azure.conf" "$MNT" \
	>"$TMP/nocred.out" 2>"$TMP/nocred.err"
assert_eq 1 "$?" "the exit status of a mount without any credential"
grep -q 'no credential: set AZURE_TENANT_ID' "$TMP/nocred.err" ||
	fail "a mount without a credential does not say why: $(cat "$TMP/nocred.err")"
is_mounted "$MNT" && fail "a mount without a credential mounted something"

# ---- what the fake saw, and what the log holds ------------------------------------------------------
kill -TERM "$FAKE_PID"
wait_gone "$FAKE_PID" 30 || fail "the fake did not stop"
assert_content "$FD/stats" "$(printf 'unauthorized 0\nbad_version 0')" \
	"data-plane calls without the bearer or the api-version"
if grep -q "$AZURE_CLIENT_SECRET" "$LOG" || grep -q 'aad\.[0-9]' "$LOG" ||
	grep -qi 'bearer [A-Za-z0-9+/]' "$LOG"; then
	fail "the daemon's log holds a credential"
fi
finish
