#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t-jobs: starting jobs by writing to MOUNT/<sandbox>/exec, and the files
# of a job: a shell line and jobs/latest/{stdout,stderr,exit,status}; the
# job id read back from the same open file (exec 3<>exec); a JSON request
# with argv (no shell), cwd and env; non-zero exits; cmd shows argv and
# the env names but never their values; output still readable after the
# agent has forgotten the job (more jobs than it keeps); errors for bad
# commands and unknown jobs.
#
# The timing cases (streaming, tail -f, blocking exit, cancel) are in
# t-jobs-stream.sh.

# shellcheck disable=SC2016 # job command lines are expanded in the sandbox
. "$(dirname "$0")/lib.sh"

one_sandbox
mount_fs

# run CMDTEXT: start a job with one write of CMDTEXT and a newline.
run() {
	w sh -c 'printf "%s\n" "$1" >"$2"' sh "$1" "$S/exec"
}

# ---- a shell line ----------------------------------------------------------------------
# A job runs in the sandbox's root (wherever that appears inside it).
printf 'in the root\n' >"$B/marker"
chown --reference="$B" "$B/marker"
run 'echo hello; echo oops >&2; cat marker' || fail "echo > exec"
assert_content "$S/jobs/latest/exit" 0 "exit"
assert_content "$S/jobs/latest/status" "exited 0" "status"
assert_eq "$(printf 'hello\nin the root')" "$(w cat "$S/jobs/latest/stdout")" \
	"stdout"
assert_content "$S/jobs/latest/stderr" oops "stderr"
id1=$(w readlink "$S/jobs/latest")
[ -n "$id1" ] || fail "jobs/latest is not a link"
[ -d "$S/jobs/$id1" ] || fail "jobs/$id1 is not a directory"
assert_eq "cmd ctl exit status stderr stdout" \
	"$(w ls "$S/jobs/$id1" | tr '\n' ' ' | sed 's/ $//')" "the files of a job"
w ls "$S/jobs" | grep -qx "$id1" || fail "ls jobs does not list $id1"
w cat "$S/jobs/latest/cmd" >"$TMP/cmd" || fail "cat cmd"
grep -q '"command": *\["/bin/sh", *"-c", *"echo hello; echo oops >&2; cat marker"\]' "$TMP/cmd" ||
	fail "cmd does not show the argv: $(cat "$TMP/cmd")"

# A job works on the sandbox's files.
run 'echo made-by-a-job >job-output.txt' || fail "exec"
assert_content "$S/jobs/latest/exit" 0 "exit of a job writing a file"
assert_content "$B/job-output.txt" made-by-a-job "the file the job wrote, on disk"
assert_content "$S/files/job-output.txt" made-by-a-job "the file the job wrote, through the mount"

# ---- the id read back from the same open file ------------------------------------------
# shellcheck disable=SC2016 # expanded by the inner shell
w sh -c 'exec 3<>"$1" && printf "echo from-fd\n" >&3 && read -r id <&3 && echo "$id"' \
	sh "$S/exec" >"$TMP/id" 2>&1 || fail "exec 3<>exec; echo >&3; read <&3: $(cat "$TMP/id")"
id2=$(cat "$TMP/id")
[ -n "$id2" ] || fail "no id read back"
assert_ne "$id1" "$id2" "the second job's id"
assert_content "$S/jobs/$id2/stdout" from-fd "stdout of the job named by the id read back"
assert_eq "$id2" "$(w readlink "$S/jobs/latest")" "jobs/latest after the second job"

# ---- JSON requests -----------------------------------------------------------------------
run '{"command":["printf","%s\n","a b"]}' || fail "JSON argv"
assert_content "$S/jobs/latest/stdout" "a b" "argv without a shell"
assert_content "$S/jobs/latest/exit" 0 "exit of the JSON job"
mkdir "$B/wd" && chown --reference="$B" "$B/wd"
printf 'in wd\n' >"$B/wd/marker"
chown --reference="$B" "$B/wd/marker"
run '{"command":["sh","-c","cat marker; echo $GREETING"],"cwd":"wd","env":{"GREETING":"hi there","TOKEN_LIKE":"s3cr3t-value-42"}}' ||
	fail "JSON with cwd and env"
assert_eq "$(printf 'in wd\nhi there')" "$(w cat "$S/jobs/latest/stdout")" "cwd and env"
w cat "$S/jobs/latest/cmd" >"$TMP/cmd" || fail "cat cmd"
grep -q 'GREETING' "$TMP/cmd" || fail "cmd does not name the env keys: $(cat "$TMP/cmd")"
grep -q 'TOKEN_LIKE' "$TMP/cmd" || fail "cmd does not name the env keys: $(cat "$TMP/cmd")"
grep -q '"sh", *"-c"' "$TMP/cmd" || fail "cmd does not show the argv: $(cat "$TMP/cmd")"
grep -q 's3cr3t-value-42\|hi there' "$TMP/cmd" && fail "cmd shows env values: $(cat "$TMP/cmd")"
grep -q 's3cr3t-value-42' "$S/info" && fail "info shows an env value"

# ---- exit codes and failures -----------------------------------------------------------
run 'exit 3' || fail "exit 3"
assert_content "$S/jobs/latest/exit" 3 "exit of 'exit 3'"
assert_content "$S/jobs/latest/status" "exited 3" "status of 'exit 3'"
run '{"command":["false"]}' || fail "false"
assert_content "$S/jobs/latest/exit" 1 "exit of false"
assert_content "$S/jobs/latest/status" "exited 1" "status of false"
run 'kill -9 $$' || fail "a job killed by a signal"
w cat "$S/jobs/latest/exit" >/dev/null 2>&1
st=$(w cat "$S/jobs/latest/status")
case $st in
"exited 137" | "exited -9" | "failed "* | "exited 9") ;;
*) fail "status of a job killed by SIGKILL: $st" ;;
esac
run '{"command":["/no/such/program"]}'
w cat "$S/jobs/latest/exit" >/dev/null 2>&1
st=$(w cat "$S/jobs/latest/status")
case $st in
"exited 127" | "exited 126" | "failed "*) ;;
*) fail "status of a missing program: $st" ;;
esac

# Commands that cannot start: the close (which starts what was written)
# fails, no job appears, and the log says why.
latest=$(w readlink "$S/jobs/latest")
# (dd says which errno a write or close failed with; a shell's printf
# does not.)
bad_cmd() {
	assert_errno 'Invalid argument' sh -c \
		"printf '%s\n' '$1' | dd of='$S/exec' conv=notrunc status=none"
}
bad_cmd '{"command":[]}'
bad_cmd '{not json'
bad_cmd '{"command":["x"],"timeoutMs":0}'
bad_cmd '{"command":["x"],"env":{"BAD=NAME":"v"}}'
assert_errno 'Invalid argument' sh -c "printf '\n' | dd of='$S/exec' conv=notrunc status=none"
assert_eq "$latest" "$(w readlink "$S/jobs/latest")" "jobs/latest after refused commands"
grep -q 'sandbox a: exec: the request is refused: the request is empty' "$LOG" ||
	fail "the log does not say an empty request was refused"
grep -q 'sandbox a: exec: the request is refused: the request is not valid JSON' "$LOG" ||
	fail "the log does not say why bad JSON was refused"
assert_errno 'No such file or directory' cat "$S/jobs/no-such-job/stdout"
assert_errno 'No such file or directory' cat "$S/jobs/$id1/no-such-file"

# ---- output outlives the agent's memory of the job ---------------------------------------
# The agent keeps 16 jobs; the mount keeps their output.
run 'i=0; while [ $i -lt 2000 ]; do echo "first job line $i"; i=$((i+1)); done' ||
	fail "the first of many jobs"
first=$(w readlink "$S/jobs/latest")
assert_content "$S/jobs/$first/exit" 0 "exit of the first job"
n=1
while [ "$n" -le 20 ]; do
	run "echo job $n" || fail "job $n"
	assert_content "$S/jobs/latest/exit" 0 "exit of job $n"
	n=$((n + 1))
done
assert_eq 2000 "$(w cat "$S/jobs/$first/stdout" | wc -l)" "lines of an evicted job"
assert_eq "first job line 1999" "$(w tail -n 1 "$S/jobs/$first/stdout")" "the last line of an evicted job"
assert_content "$S/jobs/$first/status" "exited 0" "status of an evicted job"
assert_content "$S/jobs/latest/stdout" "job 20" "the newest job"
[ "$(w ls "$S/jobs" | grep -cv '^latest$')" -ge 22 ] || fail "jobs/ lists fewer jobs than were started"

# ---- large output --------------------------------------------------------------------------
run 'head -c 3000000 /dev/zero | tr "\0" "y"' || fail "a job with 3 MB of output"
assert_content "$S/jobs/latest/exit" 0 "exit of the large job"
assert_eq 3000000 "$(w cat "$S/jobs/latest/stdout" | wc -c)" "bytes of large output"

allow_log 'INVALID|Invalid|invalid|exec: the request is refused'
finish
