#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Usage: check-no-test-seams.sh NM BINARY
# Fails when the daemon binary defines a symbol of the test seams (the
# relay driver with its clock and stand-in senders, the invariant checks
# and the session copies they compare, the fake umad port), and when nm
# cannot see the daemon's own symbols (a stripped binary proves nothing).
# check-no-test-names.sh checks the sources for the names of test doubles.
set -eu
nm_bin=$1
binary=$2
symbols=$("$nm_bin" --defined-only "$binary")
if ! printf '%s\n' "$symbols" | grep -qw relay_new; then
	echo "cannot see the daemon's symbols in $binary (stripped?)" >&2
	exit 1
fi
seams=$(printf '%s\n' "$symbols" | awk '{ print $NF }' |
	grep -E '^(relay_driver_|relay_check_invariants|session_table_check(_owned)?$|session_table_copy$|session_table_seed_wire_ids$|umad_port_new_fake|umad_port_fake_)' || true)
if [ -n "$seams" ]; then
	echo "test seams in the daemon binary $binary:" >&2
	printf '  %s\n' $seams >&2
	exit 1
fi
echo "no test seams in $binary"
