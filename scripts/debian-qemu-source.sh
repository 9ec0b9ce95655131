#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Fetches Debian 12's qemu source package (deb-src, `apt-get source qemu`)
# and unpacks it, Debian's own patches applied, into a cache directory keyed
# by the package's version. Prints that source tree's path as the last line
# on stdout; every other message goes to stderr.
#
# The host's apt configuration is never touched: the deb-src entries (the
# mirrors of the host's own sources, suites pinned to bookworm, the series
# with QEMU 7.2) and apt's lists live in a private directory under the
# cache, and apt is pointed at it with -o Dir::Etc::SourceParts=... -o
# Dir::State::Lists=... (and its own package caches).
#
# Used by contrib/qemu/build-qemu.sh (the patched QEMU) and by anything that
# needs QEMU 7.2's own tree (e.g. its contrib/rdmacm-mux).
#
# usage: scripts/debian-qemu-source.sh [--offline]
#   --offline   no apt-get update: use the newest complete tree in the cache
# Cache: ${RDMACM_MUX_QEMU_SOURCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu-source}
#   apt/               the private sources.list.d, lists and package caches
#   qemu-VERSION/      the unpacked tree (VERSION with ':' as '%'), complete
#                      once qemu-VERSION/.complete exists
# Exit status: 0 ok, 1 failure, 2 usage.
set -euo pipefail

offline=0
while (($#)); do
	case $1 in
	--offline) offline=1 ;;
	-h | --help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "debian-qemu-source: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

# shellcheck source-path=SCRIPTDIR source=lib-apt-mirrors.sh
. "$(dirname "$0")/lib-apt-mirrors.sh"

say() { echo "debian-qemu-source: $*" >&2; }
die() { say "$*"; exit 1; }

cache=${RDMACM_MUX_QEMU_SOURCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu-source}
mkdir -p "$cache"
exec {lockfd}>"$cache/.lock"
flock "$lockfd"

# The newest complete tree, for --offline and for a host without a mirror.
newest_cached() {
	find "$cache" -mindepth 2 -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null |
		while read -r d; do printf '%s %s\n' "$(cat "$d/.complete")" "$d"; done |
		sort -V | tail -n 1 | cut -d' ' -f2-
}
use_cached() {
	local d
	d=$(newest_cached)
	[[ -n $d ]] || die "$1, and no source tree is cached in $cache"
	say "$1; using the cached $(basename "$d")"
	echo "$d/src"
	exit 0
}
((offline)) && use_cached "--offline"

# --- The private apt directory: deb-src for the host's mirrors ----------------
apt_dir=$cache/apt
mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
uris=$(apt_host_mirrors)
[[ -n $uris ]] || use_cached "no apt mirror in /etc/apt/sources.list{,.d}"
while read -r u; do
	# Only Debian's archive has the qemu source (the host may list others).
	case $u in
	*debian-security*) suites="bookworm-security" ;;
	*/debian | */debian/) suites="bookworm bookworm-updates" ;;
	*) continue ;;
	esac
	printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
		"$u" "$suites"
done <<<"$uris" >"$apt_dir/sources.list.d/debian-src.sources"
[[ -s $apt_dir/sources.list.d/debian-src.sources ]] ||
	use_cached "no Debian mirror among the host's apt sources"

apt_opts=(
	-o "Dir::Etc::SourceList=/dev/null"
	-o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
	-o "Dir::State::Lists=$apt_dir/lists"
	-o "Dir::Cache=$apt_dir/cache"
)
# apt downloads as its sandbox user where it exists.
if ((EUID == 0)) && id _apt >/dev/null 2>&1; then
	chown -R _apt "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
fi
if ! apt-get "${apt_opts[@]}" -q update >"$cache/apt-update.log" 2>&1; then
	tail -n 5 "$cache/apt-update.log" >&2
	use_cached "apt-get update of the private deb-src lists failed"
fi

# The version `apt-get source qemu` picks: the newest in the three suites.
version=''
while read -r v; do
	if [[ -z $version ]] || dpkg --compare-versions "$v" gt "$version"; then
		version=$v
	fi
done < <(apt-cache "${apt_opts[@]}" showsrc --only-source qemu 2>/dev/null |
	awk '/^Version:/ { print $2 }')
[[ -n $version ]] || use_cached "apt finds no qemu source package"
dir=$cache/qemu-${version//:/%}
if [[ -f $dir/.complete ]]; then
	echo "$dir/src"
	exit 0
fi

# --- Download and unpack (dpkg-source applies debian/patches) -----------------
say "fetching and unpacking Debian's qemu $version (once; cached in $dir)"
tmp=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ((EUID == 0)) && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
if ! (cd "$tmp" && apt-get "${apt_opts[@]}" -q source --download-only "qemu=$version") \
	>"$cache/apt-source.log" 2>&1; then
	tail -n 5 "$cache/apt-source.log" >&2
	die "apt-get source qemu=$version failed (log: $cache/apt-source.log)"
fi
# apt checked the files against the signed Sources index; the .dsc's own
# signature needs debian-keyring, which is not worth installing for this.
if ! dpkg-source --no-check -x "$tmp"/qemu_*.dsc "$tmp/src" >>"$cache/apt-source.log" 2>&1; then
	tail -n 5 "$cache/apt-source.log" >&2
	die "dpkg-source -x failed (log: $cache/apt-source.log)"
fi
mkdir -p "$tmp/out"
mv "$tmp/src" "$tmp/out/src"
echo "$version" >"$tmp/out/.complete"
rm -rf "$dir"
mv "$tmp/out" "$dir"
# An older version's tree goes when a newer one is complete.
find "$cache" -mindepth 1 -maxdepth 1 -name 'qemu-*' ! -path "$dir" -exec rm -rf {} +
echo "$dir/src"
