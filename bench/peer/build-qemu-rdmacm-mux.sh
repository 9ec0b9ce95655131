#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds QEMU's own contrib/rdmacm-mux, unmodified, from Debian 12's qemu
# source package (7.2, Debian's patches applied, none of which touches it),
# for rdmacm-mux-bench's peer rows. Nothing of QEMU's is kept in this tree:
# the source comes from scripts/debian-qemu-source.sh (deb-src through a
# private apt directory) and the binary is cached. Prints the binary's path
# as the last line on stdout; everything else goes to stderr.
#
# The mux's headers need QEMU's configured tree (config-host.h and the
# generated qapi and trace headers), so this configures a tools-only build
# (~15-45 s) and asks ninja for that one target and what it needs (~10 s).
#
# usage: bench/peer/build-qemu-rdmacm-mux.sh [--cached] [--offline]
#   --cached   build nothing and fetch nothing: print a cached binary, or
#              exit 77 when there is none (the bench's smoke test uses this)
#   --offline  passed to debian-qemu-source.sh (no apt-get update)
# Cache: ${RDMACM_MUX_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu-rdmacm-mux}
#   KEY/rdmacm-mux   the binary; KEY hashes the source version and the
#                    configure options; KEY/.complete holds the version
# Needs (scripts/setup.sh): dpkg-dev, gcc, meson, ninja-build, libglib2.0-dev,
# zlib1g-dev, libibumad-dev, libibverbs-dev, librdmacm-dev.
# Exit status: 0 ok, 1 failure, 2 usage, 77 nothing to run: --cached and no
# build cached, or no source to build from.
set -euo pipefail

cached_only=0
offline=()
while (($#)); do
	case $1 in
	--cached) cached_only=1 ;;
	--offline) offline=(--offline) ;;
	-h | --help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-qemu-rdmacm-mux: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

say() { echo "build-qemu-rdmacm-mux: $*" >&2; }
die() { say "$*"; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# Tools only: no emulator, no user mode; the mux needs rdma (libibumad)
# and pvrdma, which is what enables it.
CONFIGURE=(--without-default-features --disable-system --disable-user --enable-tools
	--enable-rdma --enable-pvrdma --disable-docs)

cache=${RDMACM_MUX_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu-rdmacm-mux}
mkdir -p "$cache"
exec {lockfd}>"$cache/.lock"
flock "$lockfd"

if ((cached_only)); then
	# The newest complete build; the version is not checked (that would
	# need apt): a new Debian qemu is picked up by the next build without
	# --cached.
	newest=$(find "$cache" -mindepth 2 -maxdepth 2 -name .complete -printf '%T@ %h\n' 2>/dev/null |
		sort -n | tail -n 1 | cut -d' ' -f2-)
	if [[ -n $newest && -x $newest/rdmacm-mux ]]; then
		echo "$newest/rdmacm-mux"
		exit 0
	fi
	say "no build in $cache (run without --cached to build one)"
	exit 77
fi

# No source (no mirror reachable, nothing cached) is not a failure of the
# build: 77 lets the bench skip its peer rows and carry on.
if ! src=$("$top/scripts/debian-qemu-source.sh" "${offline[@]}" | tail -n 1) || [[ -z $src ]]; then
	say "Debian's qemu source cannot be had: no peer to build"
	exit 77
fi
version=$(cat "$src/../.complete")
key=$( { echo "$version"; printf '%s\n' "${CONFIGURE[@]}"; } | sha256sum | cut -c1-16)
out=$cache/$key
if [[ -f $out/.complete && -x $out/rdmacm-mux ]]; then
	echo "$out/rdmacm-mux"
	exit 0
fi
# Leftovers of a build that was killed (we hold the lock: none runs).
find "$cache" -mindepth 1 -maxdepth 1 -name 'build.*' -exec rm -rf {} +

say "building contrib/rdmacm-mux of Debian's qemu $version (once; cached in $out)"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$SECONDS
# An out-of-tree build: the cached source is only read.
mkdir "$work/build"
if ! (cd "$work/build" && "$src/configure" "${CONFIGURE[@]}" &&
	ninja contrib/rdmacm-mux/rdmacm-mux) >"$work/build.log" 2>&1; then
	tail -n 30 "$work/build.log" >&2
	cp "$work/build.log" "$cache/last-failed-build.log"
	die "the build failed (the whole log: $cache/last-failed-build.log)"
fi
mkdir "$work/out"
cp "$work/build/contrib/rdmacm-mux/rdmacm-mux" "$work/out/rdmacm-mux"
printf '%s\n' "${CONFIGURE[@]}" >"$work/out/configure-options"
echo "$version" >"$work/out/.complete"
rm -rf "$out"
mv "$work/out" "$out"
say "built in $((SECONDS - t0)) s"
echo "$out/rdmacm-mux"
