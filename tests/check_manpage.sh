#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check_manpage: the manual pages document every option the programs take.
# Every option in the fuse_opt tables of src/fs/opts.c must appear in
# man/sandboxfs.1, every option sandbox-agent --help prints must appear in
# man/sandbox-agent.8, every command and option sandboxctl --help prints
# must appear in man/sandboxctl.1; and the pages must be clean for mandoc
# -T lint.
# An option counts as documented when the page marks it up as one: `Cm
# name` for a -o option, `Fl -name` or `Fl x` for a command line flag.
#
# Exit 0 pass, 1 fail, 99 when a file it reads is missing.

set -u

SRC=${SBFS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
AGENT=${SBFS_AGENT:-./sandbox-agent}
OPTS_C=$SRC/src/fs/opts.c
FS_MAN=$SRC/man/sandboxfs.1
AGENT_MAN=$SRC/man/sandbox-agent.8
CTL=${SBFS_CTL:-./sandboxctl}
CTL_MAN=$SRC/man/sandboxctl.1

fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

for f in "$OPTS_C" "$FS_MAN" "$AGENT_MAN" "$CTL_MAN"; do
	[ -f "$f" ] || {
		echo "ERROR: $f is missing"
		exit 99
	}
done
[ -x "$AGENT" ] || {
	echo "ERROR: $AGENT is not built"
	exit 99
}

# documented PAGE OPTION: the page marks OPTION up as an option.
documented() {
	case $2 in
	--*) pat="^\.(It |Op |.* )?Fl -${2#--}( |$)" ;;
	-*) pat="^\.(It |Op |.* )?Fl ${2#-}( |$)" ;;
	*) pat="(^|[ .])Cm ${2}( |$)" ;;
	esac
	# shellcheck disable=SC2016 # a regular expression
	grep -Eq -- "$pat" "$1"
}

# help_of PROGRAM NAME: PROGRAM --help (stdout and stderr) in $help; it
# must exit 0.
help_of() {
	"$1" --help >"${TMPDIR:-/tmp}/check_manpage.$$" 2>&1
	rc=$?
	help=$(cat "${TMPDIR:-/tmp}/check_manpage.$$")
	rm -f "${TMPDIR:-/tmp}/check_manpage.$$"
	[ "$rc" -eq 0 ] || fail "$2 --help exited $rc"
}

# all_documented PAGE NAME WHAT LIST: LIST (what NAME --help names, one a
# line) holds at least 5 WHATs, each documented in PAGE; their count in
# $count.
all_documented() {
	count=$(echo "$4" | grep -c .)
	[ "$count" -ge 5 ] || fail "found only $count ${3}s in $2 --help"
	for item in $4; do
		documented "$1" "$item" || fail "$2 $3 '$item' (--help) is not in man/${1##*/}"
	done
}

# ---- sandboxfs: the fuse_opt tables -----------------------------------------------------
# Entries look like SOPT("name=%s", field), ROPT(...), FUSE_OPT_KEY("name",
# KEY) or { "name", offset, value }; the option's name ends at '=' or '%'
# (templates such as "x-" match a prefix).
opts=$(sed -n \
	-e 's/.*\<[SR]OPT("\([^"=%]*\)[=%"].*/\1/p' \
	-e 's/.*FUSE_OPT_KEY("\([^"=%]*\)[=%"].*/\1/p' \
	-e 's/^[[:space:]]*{[[:space:]]*"\([^"=%]*\)[=%"].*/\1/p' \
	"$OPTS_C" | sort -u)
n=$(echo "$opts" | grep -c .)
[ "$n" -ge 10 ] || fail "found only $n options in $OPTS_C: is the table format new?"
for o in $opts; do
	documented "$FS_MAN" "$o" || fail "sandboxfs option '$o' (src/fs/opts.c) is not in man/sandboxfs.1"
done
echo "# sandboxfs: $n options checked"

# ---- sandboxfs: the defaults --help states are the page's ------------------------------
# "-o NAME=... (default X)" in --help (the default may be on the next
# line) must have "(default X)" within the page's entry for NAME.
FS_BIN=${SBFS_MOUNT:-./sandboxfs}
if [ -x "$FS_BIN" ]; then
	"$FS_BIN" --help 2>&1 | awk '
		/^ *-o [a-z_]+/ { if (name != "") print name, def; name = $2; sub(/=.*/, "", name); def = "" }
		/\(default [^)]*\)/ { d = $0; sub(/.*\(default /, "", d); sub(/\).*/, "", d); def = d }
		END { if (name != "") print name, def }' |
	while read -r name def; do
		[ -n "$def" ] || continue
		# The page's entry: from ".It Cm NAME" to the next ".It".
		entry=$(awk -v n="$name" '
			$0 ~ "^\\.It Cm " n "( |$)" { on = 1; print; next }
			on && /^\.It / { exit }
			on { print }' "$FS_MAN" | tr '\n' ' ')
		case $entry in
		*"(default $def)"* | *"(default $def "* | *"default $def)"*) ;;
		*) echo "FAIL: --help says $name defaults to $def; man/sandboxfs.1 does not" ;;
		esac
	done >"${TMPDIR:-/tmp}/check_defaults.$$"
	while read -r line; do
		fail "${line#FAIL: }"
	done <"${TMPDIR:-/tmp}/check_defaults.$$"
	nd=$("$FS_BIN" --help 2>&1 | grep -c '(default')
	rm -f "${TMPDIR:-/tmp}/check_defaults.$$"
	echo "# sandboxfs: $nd defaults checked against the page"
else
	fail "$FS_BIN is not built"
fi

# ---- sandbox-agent: --help --------------------------------------------------------------
help_of "$AGENT" sandbox-agent
all_documented "$AGENT_MAN" sandbox-agent option "$(echo "$help" |
	grep -Eo '(^|[[:space:],])--?[A-Za-z0-9][A-Za-z0-9-]*' |
	sed 's/^[[:space:],]*//' | sort -u)"
echo "# sandbox-agent: $count options checked"

# ---- sandboxctl: --help -------------------------------------------------------------------
# Its commands ("  NAME ..." under "commands:") must be `Cm NAME` in the
# page, and its options `Fl ...`, wherever --help names them.
if [ -x "$CTL" ]; then
	help_of "$CTL" sandboxctl
	all_documented "$CTL_MAN" sandboxctl command "$(echo "$help" |
		sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\)\( .*\)*$/\1/p' |
		sort -u)"
	cn=$count
	all_documented "$CTL_MAN" sandboxctl option "$(echo "$help" |
		grep -Eo '(^|[][[:space:],|])--?[A-Za-z0-9][A-Za-z0-9-]*' |
		sed 's/^[][[:space:],|]*//' | sort -u)"
	echo "# sandboxctl: $cn commands and $count options checked"
else
	fail "$CTL is not built"
fi

# ---- mandoc -T lint ---------------------------------------------------------------------
if command -v mandoc >/dev/null 2>&1; then
	for page in "$SRC"/man/*.[1-9]; do
		out=$(mandoc -T lint -W warning "$page" 2>&1 | grep -v 'mandoc.db')
		[ -z "$out" ] || fail "mandoc -T lint $page: $out"
	done
else
	echo "# mandoc is not installed: the pages were not linted"
fi

if [ "$fails" -ne 0 ]; then
	echo "check_manpage: $fails problem(s)"
	exit 1
fi
echo "check_manpage: all options are documented"
exit 0
