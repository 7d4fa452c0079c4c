# SPDX-License-Identifier: MIT
#
# lib.sh: the verbs of the real-mount tests (sourced by every t-*.sh).
# It gives each test a private directory (state directory, mountpoint,
# logs) under $TMPDIR, makes and drives local sandboxes through the
# build's sandboxctl, mounts the build's sandboxfs in the foreground with
# its log kept, unmounts it and checks that it exited 0 and logged nothing
# unexpected, and cleans everything up from an EXIT trap whatever happens.
# It does not judge the file system: the tests do, with the assert verbs.
#
# Results follow automake's harness: exit 0 pass, 1 fail, 77 skip (the
# reason is printed), 99 hard error. With SBFS_REQUIRE_FUSE=1 (CI) a test
# never skips: what would skip fails instead.
#
# Environment: SBFS_BUILDDIR, SBFS_SRCDIR, SBFS_MOUNT, SBFS_CTL, SBFS_AGENT
# (set by `make check`), SANDBOXFS_VALGRIND=1 (run the daemon under
# valgrind; SANDBOXFS_VALGRIND_AGENT=1 too: the agents as well, with a
# valgrind that knows openat2), SBFS_TEST_TIMEOUT (seconds for a whole
# test, default 1800; a test may set it before sourcing this file),
# SBFS_KEEP=1 (keep the test's directory after a failure).
#
# Every command that touches the mount must go through with_timeout: a
# hung mount must fail the test, never hang it. The whole test also runs
# under timeout(1) as a backstop.

set -u

T=$(basename "$0" .sh)

# The backstop: re-run this test under timeout(1), which signals the
# test's whole process group when the test overruns.
if [ -z "${SBFS_UNDER_TIMEOUT:-}" ] && command -v timeout >/dev/null 2>&1; then
	SBFS_UNDER_TIMEOUT=1
	export SBFS_UNDER_TIMEOUT
	_limit=${SBFS_TEST_TIMEOUT:-1800}
	[ "${SANDBOXFS_VALGRIND:-0}" = 1 ] && _limit=$((_limit * 4))
	exec timeout -k 10 "$_limit" /bin/sh "$0" "$@"
fi

# ---- programs and paths ------------------------------------------------------

_here=$(cd "$(dirname "$0")" && pwd)
SBFS_SRCDIR=${SBFS_SRCDIR:-$(cd "$_here/../.." && pwd)}
SBFS_BUILDDIR=${SBFS_BUILDDIR:-$(pwd)}
SBFS_MOUNT=${SBFS_MOUNT:-$SBFS_BUILDDIR/sandboxfs}
SBFS_CTL=${SBFS_CTL:-$SBFS_BUILDDIR/sandboxctl}
SBFS_AGENT=${SBFS_AGENT:-$SBFS_BUILDDIR/sandbox-agent}
SBFS_SYSCALLS=${SBFS_SYSCALLS:-$SBFS_BUILDDIR/tests/integration/syscalls}
SBFS_PROBE=${SBFS_PROBE:-$SBFS_BUILDDIR/tests/integration/confine-probe}
export SBFS_SRCDIR SBFS_BUILDDIR SBFS_MOUNT SBFS_CTL SBFS_AGENT

# Deadlines scale under valgrind.
SLOW=1
[ "${SANDBOXFS_VALGRIND:-0}" = 1 ] && SLOW=8

VALGRIND_CMD=""
if [ "${SANDBOXFS_VALGRIND:-0}" = 1 ]; then
	VALGRIND_CMD="valgrind -q --error-exitcode=98 --leak-check=full"
	VALGRIND_CMD="$VALGRIND_CMD --errors-for-leak-kinds=definite"
	VALGRIND_CMD="$VALGRIND_CMD --show-leak-kinds=definite"
	VALGRIND_CMD="$VALGRIND_CMD --child-silent-after-fork=yes"
	if [ -f "$SBFS_SRCDIR/tests/valgrind.supp" ]; then
		VALGRIND_CMD="$VALGRIND_CMD --suppressions=$SBFS_SRCDIR/tests/valgrind.supp"
	fi
fi

# An ASan/UBSan build reports through these (a plain build ignores them).
ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
if [ -z "${LSAN_OPTIONS:-}" ] && [ -f "$SBFS_SRCDIR/tests/lsan.supp" ]; then
	LSAN_OPTIONS=suppressions=$SBFS_SRCDIR/tests/lsan.supp
	export LSAN_OPTIONS
fi
export ASAN_OPTIONS UBSAN_OPTIONS

# ---- results -------------------------------------------------------------------

fails=0

note() {
	echo "# $*"
}

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# A failure the test cannot go on after.
die() {
	echo "FAIL: $*"
	fails=$((fails + 1))
	exit 1
}

# A setup problem that is nobody's test result.
hard_error() {
	echo "ERROR: $*"
	exit 99
}

skip() {
	if [ "${SBFS_REQUIRE_FUSE:-0}" = 1 ]; then
		echo "FAIL: $* (SBFS_REQUIRE_FUSE=1: not skipping)"
		exit 1
	fi
	echo "SKIP: $*"
	exit 77
}

# End the test: check the daemon's log, report.
finish() {
	[ -n "$MOUNT_PID" ] && umount_fs
	[ -f "$LOG" ] && check_log "$LOG"
	check_agent_logs
	if [ "$fails" -ne 0 ]; then
		echo "$T: $fails check(s) failed"
		exit 1
	fi
	echo "$T: all checks passed"
	exit 0
}

# ---- the private directory and the cleanup ------------------------------------

MOUNT_PID=""
BG_PIDS=""
ALLOW_LOG=""

_base=${TMPDIR:-/tmp}
TMP=$(mktemp -d "$_base/sbfs-$T.XXXXXX") || hard_error "mktemp in $_base failed"
# Private, as mktemp made it: no sandbox may need to search the
# directories above its state directory.
chmod 0700 "$TMP"
STATE=$TMP/state
MNT=$TMP/mnt
LOG=$TMP/sandboxfs.log
mkdir "$MNT" "$TMP/tmp" || hard_error "cannot make $MNT"
chmod 1777 "$TMP/tmp"
TMPDIR=$TMP/tmp
export TMPDIR

# The mount resumes sandboxes itself: it must start the build's agent.
SANDBOXFS_AGENT=$SBFS_AGENT
export SANDBOXFS_AGENT
unset SANDBOXFS_STATE_DIR

# programs_for_others: the build's programs, and the test's own helper
# programs named by HOSTILE and SBFS_PROBE, where another user can run
# them. A build in a private home (a clone in /root, 0700) is out of
# another user's reach: they are copied into a directory of their own
# under /tmp (removed at exit), and the variables point there. Call it
# before agent_wrapper.
PROGRAMS_DIR=""
programs_for_others() {
	setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$SBFS_CTL" \
		2>/dev/null && return 0
	PROGRAMS_DIR=$(mktemp -d "${_base:-/tmp}/sbfs-programs.XXXXXX") ||
		hard_error "mktemp for the programs"
	chmod 0755 "$PROGRAMS_DIR"
	for _v in SBFS_CTL SBFS_AGENT SBFS_MOUNT SBFS_PROBE SBFS_SYSCALLS HOSTILE; do
		eval "_p=\${$_v:-}"
		[ -n "$_p" ] && [ -f "$_p" ] || continue
		cp "$_p" "$PROGRAMS_DIR/" || hard_error "cannot copy $_p"
		eval "$_v=\$PROGRAMS_DIR/\$(basename \"\$_p\")"
	done
	chmod -R a+rX "$PROGRAMS_DIR"
	SANDBOXFS_AGENT=$SBFS_AGENT
	export SBFS_CTL SBFS_AGENT SBFS_MOUNT SANDBOXFS_AGENT
}

_proc_state() {
	# The state letter of a process; empty when it is gone. comm may
	# hold spaces and parentheses: the state follows the last ')'.
	[ -r "/proc/$1/stat" ] || return 0
	sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null
}

# True while process $1 runs (a zombie has ended).
alive() {
	case $(_proc_state "$1") in
	"" | Z | X) return 1 ;;
	*) return 0 ;;
	esac
}

# Wait up to $2 seconds for process $1 to end.
wait_gone() {
	_end=$(($(date +%s) + $2))
	while alive "$1"; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.1
	done
	return 0
}

# reap PID SECONDS WHAT: wait for the test's child PID to end within
# SECONDS, else fail WHAT and kill it; returns the child's exit status.
reap() {
	if ! wait_gone "$1" "$2"; then
		fail "$3"
		kill -KILL "$1"
	fi
	wait "$1"
}

# bounds_apply: whether the mount's memory bounds mean anything here (not
# under valgrind, not with AddressSanitizer, whose quarantine keeps freed
# blocks); says so when they do not.
bounds_apply() {
	if [ "${SANDBOXFS_VALGRIND:-0}" = 1 ]; then
		note "under valgrind: the bound is not checked"
		return 1
	fi
	if ldd "$SBFS_MOUNT" 2>/dev/null | grep -q libasan; then
		note "built with AddressSanitizer: the bound is not checked"
		return 1
	fi
	return 0
}

is_mounted() {
	awk -v m="${1:-$MNT}" '$5 == m { found = 1 } END { exit !found }' \
		/proc/self/mountinfo
}

_cleanup() {
	_rc=$?
	set +e
	# Whoever reads the output may be gone: cleaning up matters more.
	trap '' PIPE
	if is_mounted "$MNT"; then
		fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	if [ -n "$MOUNT_PID" ] && alive "$MOUNT_PID"; then
		kill -TERM "$MOUNT_PID" 2>/dev/null
		wait_gone "$MOUNT_PID" 5 || kill -KILL "$MOUNT_PID" 2>/dev/null
	fi
	for _p in $BG_PIDS; do
		kill -CONT "$_p" 2>/dev/null
		kill -TERM "$_p" 2>/dev/null
		wait_gone "$_p" 5 || kill -KILL "$_p" 2>/dev/null
	done
	if [ -d "$STATE/sandboxes" ]; then
		for _d in "$STATE"/sandboxes/*; do
			[ -d "$_d" ] || continue
			# A stopped (SIGSTOP) agent cannot take SIGTERM.
			_p=$(cat "$_d/boot/pid" 2>/dev/null)
			[ -n "$_p" ] && kill -CONT "$_p" 2>/dev/null
			timeout 30 "$SBFS_CTL" --state-dir "$STATE" stop \
				"${_d##*/}" >/dev/null 2>&1
		done
	fi
	if is_mounted "$MNT"; then
		echo "# $MNT is still mounted: $TMP is left in place"
	elif [ "$_rc" -ne 0 ] && [ "$_rc" -ne 77 ] &&
		[ "${SBFS_KEEP:-0}" = 1 ]; then
		echo "# kept $TMP"
	else
		rm -rf --one-file-system "$TMP"
	fi
	[ -z "$PROGRAMS_DIR" ] || rm -rf "$PROGRAMS_DIR"
	if [ "$_rc" -ne 0 ] && [ "$_rc" -ne 77 ] && [ -f "$LOG" ]; then
		# The daemon's last words explain most failures.
		echo "# the last lines of the sandboxfs log:"
		tail -n 20 "$LOG" 2>/dev/null | sed 's/^/#   /'
	fi
	exit "$_rc"
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
# A reader of the output that went away (| head) must not kill the test
# before its cleanup.
trap 'exit 141' PIPE

# ---- prerequisites -------------------------------------------------------------

need_cmd() {
	for _c in "$@"; do
		command -v "$_c" >/dev/null 2>&1 || skip "$_c is not installed"
	done
}

need_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root ($*)"
}

# Can this process mount a FUSE file system? Skips with the reason when
# not (fails with SBFS_REQUIRE_FUSE=1).
need_fuse() {
	for _p in "$SBFS_MOUNT" "$SBFS_CTL" "$SBFS_AGENT"; do
		[ -x "$_p" ] || skip "$_p is not built"
	done
	[ -r /proc/self/mountinfo ] || skip "no /proc/self/mountinfo"
	[ -c /dev/fuse ] || skip "/dev/fuse is missing (modprobe fuse)"
	command -v fusermount3 >/dev/null 2>&1 ||
		skip "fusermount3 is not installed (package fuse3)"
	# Opening the device is what a mount does first.
	if ! (: <>/dev/fuse) 2>/dev/null; then
		skip "/dev/fuse cannot be opened by uid $(id -u)"
	fi
	if [ "$(id -u)" -ne 0 ]; then
		# Without root the mount goes through the setuid helper.
		_fm=$(command -v fusermount3)
		[ -u "$_fm" ] || skip "not root and $_fm is not setuid root"
	fi
	[ "${SANDBOXFS_VALGRIND:-0}" = 1 ] && need_cmd valgrind
	"$SBFS_MOUNT" --version >/dev/null 2>&1 || die "$SBFS_MOUNT --version failed"
}

# ---- utilities -------------------------------------------------------------------

# with_timeout SECONDS CMD...: run CMD, killed after SECONDS (scaled under
# valgrind); a timeout says so and returns 124.
with_timeout() {
	_s=$(($1 * SLOW))
	shift
	timeout -k 5 "$_s" "$@"
	_rc=$?
	[ "$_rc" -eq 124 ] || [ "$_rc" -eq 137 ] &&
		echo "# timed out after ${_s}s: $*" >&2
	return "$_rc"
}

# Milliseconds since the epoch.
now_ms() {
	date +%s%3N
}

# wait_for SECONDS CMD...: poll CMD until it succeeds.
wait_for() {
	_end=$(($(date +%s) + $1 * SLOW))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.1
	done
	return 0
}

# Start CMD in the background, killed at cleanup. Sets BG_PID.
bg() {
	"$@" &
	BG_PID=$!
	BG_PIDS="$BG_PIDS $BG_PID"
}

# ---- asserts -----------------------------------------------------------------

assert_eq() {
	[ "$1" = "$2" ] || fail "${3:-value}: wanted '$1', got '$2'"
}

assert_ne() {
	[ "$1" != "$2" ] || fail "${3:-value}: got '$2', wanted anything else"
}

# assert_file_eq A B [WHAT]: same bytes.
assert_file_eq() {
	if ! with_timeout 30 cmp "$1" "$2"; then
		fail "${3:-files} differ: $1 $2"
	fi
}

# assert_content FILE TEXT [WHAT]: FILE holds exactly TEXT (a trailing
# newline of FILE is ignored, as $(cat) does).
assert_content() {
	_got=$(with_timeout 20 cat "$1" 2>&1)
	[ "$_got" = "$2" ] || fail "${3:-$1}: wanted '$2', got '$_got'"
}

# assert_errno PATTERN CMD...: CMD must fail and say PATTERN (an extended
# regular expression, such as 'No such file or directory' or
# 'Permission denied|Operation not permitted') on standard error.
assert_errno() {
	_pat=$1
	shift
	with_timeout 30 "$@" >"$TMP/assert.out" 2>"$TMP/assert.err"
	_rc=$?
	if [ "$_rc" -eq 0 ]; then
		fail "'$*' succeeded; wanted: $_pat"
	elif ! grep -Eq -- "$_pat" "$TMP/assert.err"; then
		fail "'$*' (exit $_rc) said '$(head -c 300 "$TMP/assert.err")'; wanted: $_pat"
	fi
}

# assert_ok CMD...: CMD must succeed.
assert_ok() {
	if ! with_timeout 60 "$@" >"$TMP/assert.out" 2>"$TMP/assert.err"; then
		fail "'$*' failed: $(head -c 300 "$TMP/assert.err")"
		return 1
	fi
	return 0
}

# ---- sandboxes -----------------------------------------------------------------

ctl() {
	with_timeout 60 "$SBFS_CTL" --state-dir "$STATE" "$@"
}

# sbx_create NAME [--from DIR] [--native]
sbx_create() {
	ctl create "$@" >/dev/null || die "sandboxctl create $* failed"
}

sbx_start() {
	ctl start "$1" >/dev/null || die "sandboxctl start $1 failed"
}

sbx_stop() {
	ctl stop "$1" >/dev/null || die "sandboxctl stop $1 failed"
}

sbx_restart() {
	ctl restart "$1" >/dev/null || die "sandboxctl restart $1 failed"
}

# The backing root of a sandbox (its session root on disk).
sbx_root() {
	echo "$STATE/sandboxes/$1/root"
}

# One string or number member of a sandbox's record ("" when absent).
sbx_field() {
	sed -n "s/^  \"$2\": \"*\([^\",]*\)\"*,*$/\1/p" \
		"$STATE/sandboxes/$1/sandbox.json" 2>/dev/null
}

sbx_agent_pid() {
	sbx_field "$1" agentPid
}

sbx_agent_log() {
	echo "$STATE/sandboxes/$1/agent.log"
}

# sbx_job NAME TEXT: run TEXT (a shell command line) as a job of sandbox
# NAME through the mount, wait for its end. Its id in JOB, its output in
# $TMP/job.out and $TMP/job.err, its exit code (else its status line) in
# JOB_EXIT. A native sandbox runs it at once (its exec is synchronous).
sbx_job() {
	printf '%s\n' "$2" >"$TMP/job.cmd"
	if ! with_timeout 120 dd if="$TMP/job.cmd" of="$MNT/$1/exec" \
		conv=notrunc status=none 2>"$TMP/job.start"; then
		fail "job '$2' in $1 did not start: $(cat "$TMP/job.start")"
		JOB="" JOB_EXIT=""
		: >"$TMP/job.out"
		: >"$TMP/job.err"
		return 1
	fi
	JOB=$(with_timeout 20 readlink "$MNT/$1/jobs/latest")
	with_timeout 120 cat "$MNT/$1/jobs/$JOB/stdout" >"$TMP/job.out" 2>/dev/null
	with_timeout 30 cat "$MNT/$1/jobs/$JOB/stderr" >"$TMP/job.err" 2>/dev/null
	JOB_EXIT=$(with_timeout 30 cat "$MNT/$1/jobs/$JOB/exit" 2>/dev/null) ||
		JOB_EXIT=$(with_timeout 10 cat "$MNT/$1/jobs/$JOB/status")
	return 0
}

# one_sandbox [NAME [CREATE-OPTIONS...]]: FUSE is needed; sandbox NAME (a
# by default) is created and started. B is its root on disk, S its
# directory in the mount and F its files/ there. The mount is the test's
# (mount_fs), so that it may prepare the sandbox first.
# shellcheck disable=SC2120 # tests pass arguments
one_sandbox() {
	need_fuse
	_sb=${1:-a}
	[ $# -gt 0 ] && shift
	sbx_create "$_sb" "$@"
	sbx_start "$_sb"
	# shellcheck disable=SC2034 # B and F are the tests'
	B=$(sbx_root "$_sb")
	S=$MNT/$_sb
	# shellcheck disable=SC2034
	F=$S/files
}

# w CMD...: CMD on the mount, killed after 60 s (scaled under valgrind).
w() {
	with_timeout 60 "$@"
}

# job_start SCRIPT: start SCRIPT as a job of $S the way a program does
# (one descriptor of exec: write the script, read the id back); the id in
# job.
job_start() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	job=$(w sh -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && read -r id <&3 && echo "$id"' \
		sh "$S/exec" "$1") || fail "start '$1'"
	[ -n "$job" ] || die "no job id for '$1'"
}

# replacer FILE COUNT [PAD]: in the background, replace FILE COUNT times
# the way editors save (write .atomic.tmp in its directory, rename it
# over FILE); version N reads "version N" (and " PAD" when given). The
# writer's pid in writer.
replacer() {
	_tmp=$(dirname "$1")/.atomic.tmp
	(
		_i=1
		while [ "$_i" -le "$2" ]; do
			printf 'version %d%s\n' "$_i" "${3:+ $3}" >"$_tmp" &&
				mv "$_tmp" "$1" || exit 1
			_i=$((_i + 1))
		done
	) &
	writer=$!
}

# job_request NAME JSON: start the JSON request (doc/protocol-v1.md 3.6)
# as a job of sandbox NAME through the mount; its id in job.
job_request() {
	printf '%s\n' "$2" >"$TMP/req"
	with_timeout 20 dd if="$TMP/req" of="$MNT/$1/exec" conv=notrunc \
		status=none || fail "start the job $2"
	job=$(with_timeout 10 readlink "$MNT/$1/jobs/latest")
}

# agent_wrapper ARGS...: sandboxctl and the mount start, from now on, the
# build's agent with ARGS added (the wrapper is named sandbox-agent, so
# sandboxctl still recognises its agents). Under valgrind the wrapper runs
# it there too.
# shellcheck disable=SC2120 # tests pass arguments
agent_wrapper() {
	mkdir -p "$TMP/agent-bin"
	{
		echo '#!/bin/sh'
		if [ "${SANDBOXFS_VALGRIND_AGENT:-0}" = 1 ]; then
			printf 'exec %s %s' "$VALGRIND_CMD" "$SBFS_AGENT"
		else
			printf 'exec %s' "$SBFS_AGENT"
		fi
		for _a in "$@"; do
			printf " '%s'" "$_a"
		done
		printf ' "$@"\n'
	} >"$TMP/agent-bin/sandbox-agent"
	chmod 0755 "$TMP/agent-bin/sandbox-agent"
	SANDBOXFS_AGENT=$TMP/agent-bin/sandbox-agent
	export SANDBOXFS_AGENT
}
# The agent needs openat2(2), which valgrind 3.19 does not know (it
# answers ENOSYS): the agents run under valgrind only when asked apart.
if [ -n "$VALGRIND_CMD" ] && [ "${SANDBOXFS_VALGRIND_AGENT:-0}" = 1 ]; then
	# shellcheck disable=SC2119 # no extra arguments here
	agent_wrapper
fi

# ---- the mount -------------------------------------------------------------------

# mount_fs [-d] [OPTIONS]: mount the state directory's sandboxes at $MNT,
# in the foreground, in the background of this shell (MOUNT_PID), with
# its output in $LOG, and wait until the mount is there. OPTIONS are
# added to state_dir, timeout=5 and connect_timeout=2 (later ones win).
mount_fs() {
	_dbg=""
	if [ "${1:-}" = "-d" ]; then
		_dbg=-d
		shift
	fi
	[ -z "$MOUNT_PID" ] || die "mount_fs: $MNT is already mounted"
	_opts="state_dir=$STATE,timeout=5,connect_timeout=2${1:+,$1}"
	echo "=== mount -o $_opts" >>"$LOG"
	# shellcheck disable=SC2086 # VALGRIND_CMD is a word list
	$VALGRIND_CMD "$SBFS_MOUNT" -f $_dbg -o "$_opts" "$MNT" >>"$LOG" 2>&1 &
	MOUNT_PID=$!
	wait_mounted 10 || {
		cat "$LOG"
		die "sandboxfs did not mount $MNT"
	}
}

# wait_mounted [SECONDS]: until $MNT is in /proc/self/mountinfo; fails
# early when the daemon exited.
wait_mounted() {
	_end=$(($(date +%s) + ${1:-10} * SLOW))
	until is_mounted "$MNT"; do
		if [ -n "$MOUNT_PID" ] && ! alive "$MOUNT_PID"; then
			echo "# sandboxfs exited before mounting"
			return 1
		fi
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
	return 0
}

# umount_fs: unmount (lazily when a plain unmount fails), wait for the
# daemon and check that it exited 0.
umount_fs() {
	[ -n "$MOUNT_PID" ] || return 0
	if is_mounted "$MNT"; then
		if ! with_timeout 10 fusermount3 -u "$MNT" 2>"$TMP/umount.err"; then
			fail "fusermount3 -u: $(cat "$TMP/umount.err")"
			with_timeout 10 fusermount3 -u -z "$MNT"
		fi
	fi
	if ! wait_gone "$MOUNT_PID" $((20 * SLOW)); then
		fail "sandboxfs (pid $MOUNT_PID) did not exit after the unmount"
		kill -KILL "$MOUNT_PID" 2>/dev/null
	fi
	wait "$MOUNT_PID"
	_rc=$?
	MOUNT_PID=""
	[ "$_rc" -eq 0 ] || fail "sandboxfs exited with status $_rc"
	is_mounted "$MNT" && fail "$MNT is still mounted"
	return 0
}

# ---- logs ------------------------------------------------------------------------

# allow_log REGEX: lines of the daemon's log matching REGEX (extended) are
# expected by this test.
allow_log() {
	ALLOW_LOG="${ALLOW_LOG:+$ALLOW_LOG|}$1"
}

_bad_lines() {
	# Sanitizers and valgrind, always.
	grep -E '==[0-9]+==|ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|SUMMARY: [A-Za-z]*Sanitizer' "$1"
	# Errors and warnings, but not the daemon's debug and info lines
	# (with -d), libfuse's request trace, nor this file's own "=== "
	# markers.
	grep -Ei 'error|warning' "$1" |
		grep -Ev '^=== |^[a-z-]+: (debug|info): |^ *unique: [0-9]+, (error|success)' |
		grep -Ev "${ALLOW_LOG:-^\$^}" |
		grep -Ev '==[0-9]+==|Sanitizer|runtime error:'
}

# check_log [FILE]: fail for each unexpected line of FILE (the daemon's log).
check_log() {
	_f=${1:-$LOG}
	_bad=$(_bad_lines "$_f")
	if [ -n "$_bad" ]; then
		fail "unexpected lines in $(basename "$_f"):"
		echo "$_bad" | head -n 40 | sed 's/^/  | /'
	fi
}

# The agents' logs: sanitizer and valgrind reports only (what an agent
# warns about depends on what a test provokes).
check_agent_logs() {
	[ -d "$STATE/sandboxes" ] || return 0
	for _f in "$STATE"/sandboxes/*/agent.log "$TMP"/agent-*.log; do
		[ -f "$_f" ] || continue
		_bad=$(grep -E '==[0-9]+==|ERROR: [A-Za-z]*Sanitizer|runtime error:' "$_f")
		if [ -n "$_bad" ]; then
			fail "sanitizer or valgrind output in $_f:"
			echo "$_bad" | head -n 40 | sed 's/^/  | /'
		fi
	done
}
