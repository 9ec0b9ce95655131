#!/bin/sh
# SPDX-License-Identifier: MIT
#
# What a program built against the packages gets, checked on the .debs that
# scripts/package.sh left in OUTDIR, unpacked into a temporary directory:
# pkg-config --modversion rdmacm-mux is the library's version (the .so's
# name and the header's RDMACM_MUX_VERSION_* say the same), each call has
# its page name, and the example of librdmacm-mux(3), as librdmacm-mux-dev
# ships it, builds against the unpacked headers and library and runs with
# them (to its usage message: it needs a daemon for more).
#
# usage: check-dev.sh OUTDIR
set -eu

out=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

fail() {
	echo "package: check-dev: $*" >&2
	exit 1
}

for p in librdmacm-mux1 librdmacm-mux-dev; do
	deb=$(find "$out" -maxdepth 1 -name "${p}_*.deb" | head -n 1)
	[ -n "$deb" ] || fail "no ${p}_*.deb in $out"
	dpkg-deb -x "$deb" "$root"
done

pc=$(find "$root" -name rdmacm-mux.pc | head -n 1)
[ -n "$pc" ] || fail "librdmacm-mux-dev has no rdmacm-mux.pc"
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_LIBDIR="$(dirname "$pc")"
export PKG_CONFIG_SYSROOT_DIR="$root"
modversion=$(pkg-config --modversion rdmacm-mux)
so=$(find "$root" -name 'librdmacm-mux.so.1.*' | head -n 1)
[ "${so##*/librdmacm-mux.so.}" = "$modversion" ] ||
	fail "pkg-config says $modversion, the library is ${so##*/}"
h=$(find "$root" -name rdmacm-mux.h | head -n 1)
header=$(awk '/^#define RDMACM_MUX_VERSION_(MAJOR|MINOR|MICRO) / { v = v (v ? "." : "") $3 } END { print v }' "$h")
[ "$header" = "$modversion" ] || fail "pkg-config says $modversion, rdmacm-mux.h $header"
echo "package: check-dev: rdmacm-mux.pc, the .so and rdmacm-mux.h say $modversion"

find "$root" -name 'rdmacm_mux_open_ex.3*' | grep -q . ||
	fail "librdmacm-mux-dev has no page name rdmacm_mux_open_ex(3)"

example=$(find "$root" -path '*/examples/rdmacm-mux-watch.c*' | head -n 1)
[ -n "$example" ] || fail "librdmacm-mux-dev ships no examples/rdmacm-mux-watch.c"
case $example in
*.gz) gzip -dc "$example" >"$tmp/watch.c" ;;
*) cp "$example" "$tmp/watch.c" ;;
esac
# shellcheck disable=SC2046 # pkg-config's output is a word list
cc -std=gnu11 -Wall -Werror -o "$tmp/watch" "$tmp/watch.c" \
	$(pkg-config --cflags --libs rdmacm-mux) ||
	fail "the packaged example does not build against the packages"
status=0
LD_LIBRARY_PATH=$(dirname "$so") "$tmp/watch" >"$tmp/watch.out" 2>&1 || status=$?
[ "$status" = 2 ] && grep -q '^usage: rdmacm-mux-watch' "$tmp/watch.out" ||
	fail "the packaged example did not run (status $status): $(cat "$tmp/watch.out")"
echo "package: check-dev: the example of librdmacm-mux(3) builds and runs against the packages"
