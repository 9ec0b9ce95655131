#!/bin/sh
# SPDX-License-Identifier: MIT
#
# build-daemon-version.sh SRCDIR OUTDIR KIND
#
# Builds the daemon of another version for the upgrade tests and prints
# the path of its binary. KIND is one of
#   0.1.0   the release operators run (commit 1dad4e3), from SRCDIR's git
#           history: built once per OUTDIR, reused after
#   future  this tree with -Dhandoff_future=true (a hand-off format one
#           minor newer): an incremental build each time, so it follows
#           the tree
# Only the daemon is built (ninja daemon/rdmacm-mux), under a lock, so
# that tests running at once share one build.
set -eu

src=$1
out=$2
kind=$3
OLD_COMMIT=1dad4e322e7ac015247f0b356dc741ca132906d0

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

setup_and_build() {
	srcdir=$1
	shift
	if [ ! -f "$out/build/build.ninja" ]; then
		meson setup "$out/build" "$srcdir" --buildtype=debugoptimized \
			-Dfuzz=disabled -Dman=disabled "$@" >"$out/setup.log" 2>&1 || {
			cat "$out/setup.log" >&2
			exit 1
		}
	fi
	ninja -C "$out/build" daemon/rdmacm-mux >"$out/build.log" 2>&1 || {
		cat "$out/build.log" >&2
		exit 1
	}
}

case $kind in
0.1.0)
	if [ ! -f "$out/.done" ]; then
		if ! git -C "$src" cat-file -e "$OLD_COMMIT^{commit}" 2>/dev/null; then
			echo "build-daemon-version.sh: commit $OLD_COMMIT (0.1.0) is not in the" \
				"history of $src: the upgrade tests need a clone with full history" \
				"(git fetch --unshallow)" >&2
			exit 1
		fi
		rm -rf "$out/src" "$out/build"
		mkdir -p "$out/src"
		git -C "$src" archive "$OLD_COMMIT" | tar -x -C "$out/src"
		setup_and_build "$out/src"
		touch "$out/.done"
	fi
	;;
future)
	setup_and_build "$src" -Dhandoff_future=true
	;;
*)
	echo "build-daemon-version.sh: unknown kind $kind" >&2
	exit 2
	;;
esac
echo "$out/build/daemon/rdmacm-mux"
