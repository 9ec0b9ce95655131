#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds Debian 12's QEMU 7.2 with the patches in contrib/qemu/patches
# (pvrdma's mad-socket, through librdmacm-mux): fetches Debian's source
# (scripts/debian-qemu-source.sh), applies the patches to a copy and builds
# qemu-system-x86_64 only. The binary is cached, keyed by the patches, the
# Debian version and the configure options, and its path is printed as the
# last line on stdout; every other message goes to stderr.
#
# librdmacm-mux comes from pkg-config: an installed librdmacm-mux-dev, or the
# uninstalled library of a meson build of this tree (--lib-build-dir). The
# binary links it dynamically; at run time any librdmacm-mux.so.1 of 1.1 or
# later does.
#
# usage: contrib/qemu/build-qemu.sh [--lib-build-dir DIR] [--offline] [-j N]
#   --lib-build-dir DIR  a meson build dir of this tree (DIR/meson-uninstalled)
#   --offline            do not ask apt; use the cached Debian source
#   -j N                 parallel compile jobs (default: nproc)
# Cache: ${RDMACM_MUX_QEMU_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu-patched}
#   KEY/qemu-system-x86_64 and KEY/build.log, complete once KEY/.complete exists
# Exit status: 0 ok, 1 failure (the build log's tail is printed), 2 usage,
# 77 Debian's source cannot be had.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)

lib_build='' offline=() jobs=$(nproc)
while (($#)); do
	case $1 in
	--lib-build-dir) lib_build=$(cd "${2:?}" && pwd); shift 2 ;;
	--offline) offline=(--offline); shift ;;
	-j) jobs=${2:?}; shift 2 ;;
	-h | --help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-qemu: unknown argument $1" >&2; exit 2 ;;
	esac
done

say() { echo "build-qemu: $*" >&2; }

# What the build is: a tree of Debian's with Debian's own patches applied,
# then ours, configured for one target and the features the tests use
# (slirp for -netdev user, fdt which x86_64-softmmu requires).
# The firmware path is Debian's, so that the binary finds qemu-system-data's,
# seabios' and ipxe's files where Debian puts them. QEMU looks for them
# relative to its own directory (/usr/bin here): run it from /usr/bin, or
# with -L /usr/share/qemu -L /usr/share/seabios.
CONFIGURE=(--prefix=/usr --firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
	--target-list=x86_64-softmmu --without-default-features
	--enable-rdma --enable-pvrdma --enable-slirp --enable-fdt=system
	--enable-trace-backends=log --disable-docs)

src=$("$top/scripts/debian-qemu-source.sh" "${offline[@]}" | tail -n 1) || {
	say "SKIP: Debian's qemu source cannot be had"
	exit 77
}
version=$(cat "$src/../.complete")
patches=("$here"/patches/*.patch)
[[ -f ${patches[0]} ]] || { say "no patches in $here/patches"; exit 1; }

key=$( { echo "$version"; printf '%s\n' "${CONFIGURE[@]}"; cat "${patches[@]}"; } |
	sha256sum | cut -c1-16)
cache=${RDMACM_MUX_QEMU_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu-patched}
out=$cache/$key
mkdir -p "$cache"
exec {lockfd}>"$cache/.lock"
flock "$lockfd"
if [[ -f $out/.complete ]]; then
	echo "$out/qemu-system-x86_64"
	exit 0
fi
# Leftovers of a build that was killed (we hold the lock: none runs).
find "$cache" -mindepth 1 -maxdepth 1 -name 'build.*' -exec rm -rf {} +

if [[ -n $lib_build ]]; then
	export PKG_CONFIG_PATH=$lib_build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
fi
pkg-config --exists rdmacm-mux || {
	say "pkg-config finds no rdmacm-mux (install librdmacm-mux-dev or give --lib-build-dir)"
	exit 1
}

say "building qemu-system-x86_64 of Debian's qemu $version with ${#patches[@]} patches (key $key)"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$SECONDS
# A copy of hard links: patch replaces the files it changes (it writes a new
# file and renames it), so the cached source is never touched.
cp -al "$src" "$work/src"
for p in "${patches[@]}"; do
	if ! patch -d "$work/src" -p1 -f -s --no-backup-if-mismatch <"$p" >"$work/patch.log" 2>&1; then
		cat "$work/patch.log" >&2
		say "$(basename "$p") does not apply to Debian's qemu $version"
		exit 1
	fi
done
mkdir "$work/build"
log=$work/build.log
if ! (cd "$work/build" && "$work/src/configure" "${CONFIGURE[@]}" && ninja -j "$jobs" qemu-system-x86_64) \
	>"$log" 2>&1; then
	tail -n 40 "$log" >&2
	say "the build failed (the whole log: $log, kept until the next build)"
	trap - EXIT
	exit 1
fi
grep -Eq '^#define CONFIG_RDMACM_MUX( 1)?$' "$work/build/config-host.h" || {
	say "configure did not enable mad-socket (CONFIG_RDMACM_MUX): is librdmacm-mux 1.1 or later?"
	exit 1
}
mkdir -p "$work/out"
# Without its debug info: the test packs the binary into a VM image.
strip --strip-debug -o "$work/out/qemu-system-x86_64" "$work/build/qemu-system-x86_64"
cp "$log" "$work/out/build.log"
echo "$version" >"$work/out/.complete"
rm -rf "$out"
mv "$work/out" "$out"
say "built in $((SECONDS - t0)) s: $out/qemu-system-x86_64"
# Builds of other patch sets go: one is kept, the newest.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -path "$out" -exec rm -rf {} +
echo "$out/qemu-system-x86_64"
