#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Checks that a shared library exports exactly the symbols its linker version
# script lists, each under the version node the script puts it in, in both
# directions: a symbol that leaks out without being in the map is as much an
# ABI bug as a mapped symbol that went missing or moved to another node (a
# program built against the old node would no longer find it). With a
# Debian symbols file, that file must list the same symbol@node pairs and a
# NODE@NODE line for every node, so that the packaging follows the map.
#
# usage: test-symbols.sh NM LIBRARY.so MAP.sym [DEBIAN.symbols]
set -eu

nm=$1 lib=$2 map=$3 deb=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols as name@node (nm says name@@node for the default
# version). Absolute (A) entries are the version nodes themselves.
"$nm" -D --defined-only "$lib" |
	awk '$2 != "A" { sub(/@@/, "@", $3); print $3 }' |
	sort -u >"$tmp/exported"
"$nm" -D --defined-only "$lib" | awk '$2 == "A" { print $3 }' | sort -u >"$tmp/nodes"

# Every name in a "global:" section of the map, as name@node (comments
# removed; a node opens with "NAME {" and closes with "}").
sed -e 's,/\*.*\*/,,' -e '/^\/\*/,/\*\//d' "$map" |
	awk '/^[A-Za-z0-9_.]+[[:space:]]*\{/ { node = $1; sub(/\{.*/, "", node); g = 0; next }
	     /^[[:space:]]*\}/ { node = ""; g = 0; next }
	     /global:/ { g = 1; next }
	     /local:/ { g = 0; next }
	     g && node != "" { gsub(/[;[:space:]]/, ""); if ($0 != "") print $0 "@" node }' |
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
echo "$(wc -l <"$tmp/mapped") symbols in $(wc -l <"$tmp/nodes") version nodes, as mapped"

[ -n "$deb" ] || exit 0
# " name@node minver" lines, and a " NODE@NODE minver" line for each node.
awk '/^ / { split($1, p, "@"); if (p[1] == p[2]) print p[1] > "/dev/stderr"; else print $1 }' \
	"$deb" 2>"$tmp/deb-nodes.unsorted" | sort -u >"$tmp/deb"
sort -u "$tmp/deb-nodes.unsorted" >"$tmp/deb-nodes"
if ! diff -u "$tmp/exported" "$tmp/deb"; then
	echo "$deb lists other symbols than $lib exports" >&2
	exit 1
fi
if ! diff -u "$tmp/nodes" "$tmp/deb-nodes"; then
	echo "$deb lists other NODE@NODE lines than $lib has version nodes" >&2
	exit 1
fi
echo "$(basename "$deb") lists the same $(wc -l <"$tmp/deb") symbols and $(wc -l <"$tmp/nodes") nodes"
