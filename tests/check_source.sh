#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check_source: the rules of the tree that the compiler alone does not
# check (doc/internals/architecture.md):
#  - no layer includes a layer it may not see: a header of src/client,
#    src/agent, src/fs and src/ctl compiled with another layer's flags
#    must stop the build (tried here for every pair);
#  - each library's headers only where the layers say: libcurl in
#    src/client/transport_curl.c, cJSON in src/common/proto*.c, libmicrohttpd
#    in src/agent/http*.c and http_i.h (the server), FUSE in src/fs/;
#  - no function that cannot be bounded or is not reentrant (strcpy,
#    strcat, sprintf, vsprintf, gets, system, popen, tmpnam, mktemp,
#    strtok, asctime, ctime, gmtime, localtime);
#  - comments and docs cite what the repository holds (doc/, the man
#    pages), not the texts the project was made from (design.md,
#    protocol.md, shared/), which are not part of it;
#  - every C file formatted by .clang-format (when clang-format is
#    installed; CI installs it).

set -u
SRC=${SBFS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${SBFS_BUILDDIR:-.}
CC=${CC:-cc}
failed=0

fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}

# ---- layers ---------------------------------------------------------------------
# layer: the -D flags it is compiled with (Makefile.am, SEE_*)
flags_of() {
	case $1 in
	common) echo "" ;;
	client) echo "-DSBFS_SEE_CLIENT" ;;
	agent) echo "-DSBFS_SEE_AGENT" ;;
	fs) echo "-DSBFS_SEE_CLIENT -DSBFS_SEE_FS" ;;
	ctl) echo "-DSBFS_SEE_CLIENT -DSBFS_SEE_CTL" ;;
	esac
}
# may LAYER see TARGET?
sees() {
	[ "$1" = "$2" ] && return 0
	case "$1:$2" in
	*:common | fs:client | ctl:client) return 0 ;;
	esac
	return 1
}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pairs=0
for from in common client agent fs ctl; do
	for to in client agent fs ctl; do
		# One header of the target layer stands for all of them.
		h=$(cd "$SRC/src" && ls "$to"/*.h | head -n 1)
		printf '#include "config.h"\n#include "%s"\n' "$h" >"$tmp/t.c"
		# shellcheck disable=SC2046 # a word list
		if "$CC" -fsyntax-only -I"$SRC/src" -I"$SRC" -I"$BUILD" \
			$(flags_of "$from") $(pkg-config --cflags fuse3 libcurl \
				libmicrohttpd libcjson 2>/dev/null) \
			"$tmp/t.c" >"$tmp/out" 2>&1; then
			sees "$from" "$to" || fail "src/$from builds with $h included: layers are not enforced"
		else
			sees "$from" "$to" && fail "src/$from cannot include $h: $(head -n 3 "$tmp/out")"
			if ! sees "$from" "$to" && ! grep -q "is not seen from this layer" "$tmp/out"; then
				fail "src/$from including $h failed for another reason: $(head -n 3 "$tmp/out")"
			fi
		fi
		pairs=$((pairs + 1))
	done
done
echo "# layers: $pairs pairs tried"
# ... and every header of a layer carries its layer's guard.
for layer in client agent fs ctl; do
	macro=SBFS_SEE_$(echo "$layer" | tr a-z A-Z)
	for h in "$SRC/src/$layer"/*.h; do
		grep -q "^#ifndef $macro\$" "$h" ||
			fail "src/$layer/$(basename "$h") lacks #ifndef $macro / #error (it would be seen from any layer)"
	done
done

# ---- where each library's headers may be included ----------------------------------
# only PATTERN FILES...: the files of src/ that include PATTERN are among FILES
only() {
	pat=$1
	shift
	grep -rlE "#include <($pat)" "$SRC/src" | sed "s|^$SRC/||" | sort >"$tmp/got"
	for f in "$@"; do echo "$f"; done | sort >"$tmp/allowed"
	extra=$(comm -23 "$tmp/got" "$tmp/allowed")
	[ -z "$extra" ] || fail "<$pat> included outside its place: $extra"
}
only 'curl/' src/client/transport_curl.c
only 'cjson/' $(cd "$SRC" && ls src/common/proto*.c src/common/proto_i.h)
only 'microhttpd.h' src/agent/http.c src/agent/http_i.h src/agent/http_access.c \
	src/agent/http_reply.c src/agent/http_cache.c
only 'fuse' $(cd "$SRC" && ls src/fs/*.c src/fs/*.h)

# ---- forbidden functions ----------------------------------------------------------------
bad=$(grep -rnE '(^|[^_a-zA-Z0-9.>])(strcpy|strcat|sprintf|vsprintf|gets|system|popen|tmpnam|mktemp|strtok|asctime|ctime|gmtime|localtime)[[:space:]]*\(' \
	"$SRC/src" --include='*.c' --include='*.h' | grep -v '^[^:]*:[0-9]*:[[:space:]]*/\?\*')
[ -z "$bad" ] || fail "forbidden functions: $(echo "$bad" | sed "s|$SRC/||" | head -n 5)"

# ---- citations --------------------------------------------------------------------------------
bad=$(grep -rnE '(^|[^-a-z])(design|protocol)\.md|shared/(seed|design|protocol|style)' \
	"$SRC/src" "$SRC/tests" "$SRC/bench" "$SRC/doc" "$SRC/man" "$SRC"/*.md 2>/dev/null |
	grep -v '^[^:]*check_source\.sh:')
[ -z "$bad" ] || fail "citations of texts outside the repository: $(echo "$bad" | sed "s|$SRC/||" | head -n 5)"

# ---- formatting -----------------------------------------------------------------------------
if command -v clang-format >/dev/null 2>&1; then
	n=0
	for f in $(cd "$SRC" && git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c' 2>/dev/null ||
		find src tests bench -name '*.[ch]'); do
		n=$((n + 1))
		clang-format --style=file:"$SRC/.clang-format" --dry-run --Werror "$SRC/$f" >/dev/null 2>&1 ||
			fail "$f is not formatted (clang-format -i $f)"
	done
	echo "# formatting: $n files"
else
	echo "# clang-format is not installed: formatting not checked"
	[ "${SBFS_REQUIRE_FORMAT:-0}" = 1 ] && fail "clang-format is required here"
fi

[ "$failed" -eq 0 ] || {
	echo "check_source: $failed problem(s)"
	exit 1
}
echo "check_source: the tree keeps its rules"
