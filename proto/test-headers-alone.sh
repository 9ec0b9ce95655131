#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Checks that each public header compiles on its own, first in its
# translation unit and included twice, as strict C and as C++, and that the
# wire header's i386 layout pins hold (352-byte frame) when the C compiler
# can target i386 (freestanding, so no 32-bit libc is needed).
#
# usage: CC="cc" CXX="c++" test-headers-alone.sh INCDIR... -- HEADER...
# CXX may be empty: the C++ checks are then skipped, and reported as such.
set -eu

incs=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	incs="$incs -I$1"
	shift
done
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || { echo "no headers given" >&2; exit 2; }

strict="-Wall -Wextra -Wpedantic -Werror -fsyntax-only"
failed=0 checks=0

check() { # LANG-DESCRIPTION HEADER COMPILER-ARGS...
	what=$1 header=$2
	shift 2
	checks=$((checks + 1))
	if ! printf '#include "%s"\n#include "%s"\nextern int header_test;\n' \
		"$header" "$header" | "$@" $incs - 2>"$tmpdir/err"; then
		echo "FAIL: $header as $what" >&2
		cat "$tmpdir/err" >&2
		failed=$((failed + 1))
	else
		echo "ok: $header as $what"
	fi
}

tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT

for h in "$@"; do
	for std in c11 gnu11 c17; do
		# shellcheck disable=SC2086
		check "C ($std)" "$h" $CC -x c -std=$std $strict
	done
	if [ -n "${CXX:-}" ]; then
		for std in c++11 c++17 c++20; do
			# shellcheck disable=SC2086
			check "C++ ($std)" "$h" $CXX -x c++ -std=$std $strict
		done
	else
		echo "skip: $h as C++ (no C++ compiler)"
	fi
done

# The header asserts the i386 offsets itself when __i386__ is defined.
if printf 'int x;\n' | $CC -m32 -ffreestanding -x c -fsyntax-only - 2>/dev/null; then
	for h in "$@"; do
		# shellcheck disable=SC2086
		check "C (i386, freestanding)" "$h" $CC -m32 -ffreestanding -x c -std=c11 $strict
	done
else
	echo "skip: i386 layout (the C compiler cannot target i386)"
fi

echo "$checks checks, $failed failed"
[ "$failed" -eq 0 ]
