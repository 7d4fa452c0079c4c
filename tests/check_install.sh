#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check_install: `make install` puts everything where the documents say:
# the three programs, the man pages, README.md and SEMANTICS.md with doc/
# under the documentation directory, the examples, the systemd user unit
# (naming the installed sandboxfs) and the bash completions; and the
# completions complete: sandboxctl's commands, the sandboxes of a state
# directory and exec's command, sandboxfs's -o options.
#
# Exit 0 pass, 1 fail, 77 skip (only when bash-completion is missing and
# SBFS_REQUIRE_FUSE is not set: CI installs it).

set -u

BUILD=${SBFS_BUILDDIR:-$(pwd)}
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

dest=$(mktemp -d "${TMPDIR:-/tmp}/sbfs-install.XXXXXX") || exit 99
trap 'rm -rf "$dest"' EXIT
# The build's own prefix: files made at build time (the systemd unit)
# name the programs where the configured prefix puts them.
prefix=$(sed -n 's/^prefix = //p' "$BUILD/Makefile")
[ -n "$prefix" ] || { echo "ERROR: no prefix in $BUILD/Makefile"; exit 99; }
make -C "$BUILD" install DESTDIR="$dest" >"$dest.log" 2>&1 ||
	{ cat "$dest.log"; rm -f "$dest.log"; echo "FAIL: make install"; exit 1; }
rm -f "$dest.log"
R=$dest$prefix
for f in bin/sandboxfs bin/sandboxctl sbin/sandbox-agent \
	share/man/man1/sandboxfs.1 share/man/man1/sandboxctl.1 \
	share/man/man8/sandbox-agent.8 \
	share/doc/sandboxfs/README.md share/doc/sandboxfs/SEMANTICS.md \
	share/doc/sandboxfs/doc/protocol-v1.md share/doc/sandboxfs/doc/protocol-ext.md \
	share/doc/sandboxfs/doc/security.md \
	share/doc/sandboxfs/doc/internals/transport.md \
	share/doc/sandboxfs/examples/sandbox-backup \
	lib/systemd/user/sandboxfs.service \
	share/bash-completion/completions/sandboxctl \
	share/bash-completion/completions/sandboxfs; do
	[ -e "$R/$f" ] || fail "make install did not install $prefix/$f"
done
unit=$R/lib/systemd/user/sandboxfs.service
if [ -f "$unit" ]; then
	grep -q "^ExecStart=$prefix/bin/sandboxfs -f " "$unit" ||
		fail "the unit does not start the installed sandboxfs: $(grep ExecStart "$unit")"
	grep -q '@' "$unit" && fail "the unit has an unsubstituted @...@"
	if command -v systemd-analyze >/dev/null 2>&1; then
		out=$(systemd-analyze verify --man=no "$unit" 2>&1 | grep -v 'Failed to .*bus\|No such file' || true)
		[ -z "$out" ] || echo "# systemd-analyze: $out"
	fi
fi

# ---- the completions complete ------------------------------------------------------
BC=/usr/share/bash-completion/bash_completion
if [ ! -f "$BC" ]; then
	if [ "${SBFS_REQUIRE_FUSE:-0}" = 1 ]; then
		fail "bash-completion is not installed (scripts/install-deps installs it)"
	else
		echo "SKIP: bash-completion is not installed"
		[ "$fails" -eq 0 ] && exit 77
	fi
else
	state=$dest/state
	mkdir -p "$state/sandboxes/web" "$state/sandboxes/db"
	touch "$state/sandboxes/web/sandbox.json" "$state/sandboxes/db/sandbox.json"
	# complete PROGRAM WORDS...: what bash would offer for the last word.
	complete_words() {
		_prog=$1
		shift
		bash -c '
			. "$1"; . "$2"; shift 2
			COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
			COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
			spec=$(complete -p "$1" | sed "s/.*-F \([^ ]*\).*/\1/")
			"$spec" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
			printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "
		' sh "$BC" "$R/share/bash-completion/completions/$_prog" "$@"
	}
	got=$(complete_words sandboxctl sandboxctl st)
	[ "$got" = "start status stop " ] || fail "sandboxctl st<TAB>: '$got'"
	got=$(complete_words sandboxctl sandboxctl --state-dir "$state" start "")
	[ "$got" = "db web " ] || fail "sandboxctl start <TAB>: '$got'"
	got=$(SANDBOXFS_STATE_DIR=$state complete_words sandboxctl sandboxctl rm w)
	[ "$got" = "web " ] || fail "sandboxctl rm w<TAB>: '$got'"
	got=$(complete_words sandboxctl sandboxctl --state-dir "$state" exec --timeout 5 "")
	[ "$got" = "db web " ] || fail "sandboxctl exec --timeout 5 <TAB>: '$got'"
	got=$(complete_words sandboxctl sandboxctl exec web --t)
	[ "$got" = "--timeout " ] || fail "sandboxctl exec web --t<TAB>: '$got'"
	# After the name and "--", a command as bash completes one.
	# (a merged /usr lists a program once per PATH entry)
	got=$(complete_words sandboxctl sandboxctl exec web --cwd src -- printen 2>/dev/null |
		tr ' ' '\n' | sort -u | tr '\n' ' ')
	[ "$got" = "printenv " ] || fail "sandboxctl exec web --cwd src -- printen<TAB>: '$got'"
	got=$(complete_words sandboxctl sandboxctl jobs web --j)
	[ "$got" = "--json " ] || fail "sandboxctl jobs web --j<TAB>: '$got'"
	got=$(complete_words sandboxfs sandboxfs -o write)
	[ "$got" = "write_window= " ] || fail "sandboxfs -o write<TAB>: '$got'"
	got=$(complete_words sandboxfs sandboxfs -o ro,sym)
	[ "$got" = "ro,symlinks=raw ro,symlinks=transform " ] ||
		fail "sandboxfs -o ro,sym<TAB>: '$got'"
fi

if [ "$fails" -ne 0 ]; then
	echo "check_install: $fails problem(s)"
	exit 1
fi
echo "check_install: installed as documented"
exit 0
