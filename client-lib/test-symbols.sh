#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Checks that a shared library exports exactly the symbols its linker version
# script lists, in both directions: a symbol that leaks out without being in
# the map is as much an ABI bug as a mapped symbol that went missing.
#
# usage: test-symbols.sh NM LIBRARY.so MAP.sym
set -eu

nm=$1 lib=$2 map=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols, version suffix stripped. Absolute (A) entries are
# the version nodes themselves, not symbols.
"$nm" -D --defined-only "$lib" |
	awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' |
	sort -u >"$tmp/exported"

# Every name in a "global:" section of the map (comments removed).
sed -e 's,/\*.*\*/,,' -e '/^\/\*/,/\*\//d' "$map" |
	awk '/global:/ { g = 1; next } /local:/ { g = 0; next }
	     g { gsub(/[;[:space:]]/, ""); if ($0 != "" && $0 !~ /^}/) print }' |
	sort -u >"$tmp/mapped"

if [ ! -s "$tmp/mapped" ]; then
	echo "no symbols found in $map" >&2
	exit 1
fi

if ! diff -u "$tmp/mapped" "$tmp/exported"; then
	echo "exported symbols of $lib differ from $map" >&2
	echo "(lines with - are mapped but not exported, + exported but not mapped)" >&2
	exit 1
fi
echo "$(wc -l <"$tmp/mapped") symbols, as mapped"
