#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Usage: check-no-test-names.sh DAEMON_DIR SEAM_FILE...
# Fails when the daemon's own sources (every .c and .h under DAEMON_DIR but
# the tests, test-*.c, and the test seams named) use a name that speaks of
# a test double: an identifier containing "fake" or "driver", in a struct, a
# field, a function, a branch. Comments and string literals are left out:
# they may well talk about the relay driver. A test seam belongs in its own
# unit (linked by tests only), chosen where the unit under test is made.
set -eu
dir=$1
shift
bad=0
for f in $(find "$dir" -name '*.[ch]' ! -name 'test-*' | sort); do
	skip=
	for seam in "$@"; do
		[ "$(basename "$f")" = "$seam" ] && skip=1
	done
	[ -n "$skip" ] && continue
	# Comments and strings out, line numbers kept.
	hits=$(perl -0777 -pe '
		s{/\*(.*?)\*/}{"\n" x ($1 =~ tr/\n//)}gse;
		s{//[^\n]*}{}g;
		s{"(?:\\.|[^"\\\n])*"}{""}g;
		s{'"'"'(?:\\.|[^'"'"'\\\n])'"'"'}{0}g;
	' "$f" | grep -inE '[A-Za-z0-9_]*(fake|driver)[A-Za-z0-9_]*' || true)
	if [ -n "$hits" ]; then
		printf '%s\n' "$hits" | sed "s|^|$f:|" >&2
		bad=1
	fi
done
if [ "$bad" -ne 0 ]; then
	echo "test names in the daemon's sources (above): a test seam goes in its own unit" >&2
	exit 1
fi
echo "no test names in the daemon's sources"
