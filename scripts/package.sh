#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds the Debian packages (debian/) from a copy of this tree and checks
# them with lintian. The copy holds what git tracks plus untracked files
# that .gitignore does not exclude (the working tree as it is, without
# build directories), in a temporary directory: dpkg-buildpackage writes
# debian/ build directories and ../*.deb, and none of that may land in the
# source tree. The results (the .debs, the .changes and, without --binary,
# the source package) are copied to OUTDIR.
#
# usage: scripts/package.sh [--binary] [--nocheck] [--no-lintian] OUTDIR
#   --binary      dpkg-buildpackage -b (no source package); default: source
#                 and binaries, so that lintian checks the source too
#   --nocheck     DEB_BUILD_OPTIONS=nocheck: skip the unit tests that
#                 debian/rules runs during the build
#   --no-lintian  build only
#
# lintian runs on the .changes with --fail-on error,warning: a warning
# fails unless an override (debian/*.lintian-overrides, each with a comment
# that says why) covers it. Overridden and informational tags are printed
# too, so that the log shows them. Exit status: 0 ok, 2 usage, anything
# else a failure (of the build: dpkg-buildpackage's own status).
set -euo pipefail

binary=0 nocheck=0 lint=1 out=''
while (($#)); do
	case $1 in
	--binary) binary=1 ;;
	--nocheck) nocheck=1 ;;
	--no-lintian) lint=0 ;;
	-h | --help) sed -n '3,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "package: unknown option $1" >&2; exit 2 ;;
	*) [[ -z $out ]] || { echo "package: one OUTDIR only" >&2; exit 2; }; out=$1 ;;
	esac
	shift
done
[[ -n $out ]] || { echo "usage: $0 [--binary] [--nocheck] [--no-lintian] OUTDIR" >&2; exit 2; }

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for t in dpkg-buildpackage dh; do
	command -v "$t" >/dev/null || { echo "package: $t is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
((!lint)) || command -v lintian >/dev/null ||
	{ echo "package: lintian is missing (scripts/setup.sh installs it)" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-pkg.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
tree=$tmp/rdmacm-mux-${version%%-*}
mkdir "$tree"
# Files git knows of or would add, as they are in the working tree now.
# Deleted but still tracked files are skipped (tar would fail on them).
# Without git (a tree from a tarball), everything but what .gitignore names.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			[[ -e $f || -L $f ]] && printf '%s\0' "$f"
		done | tar --null -T - -cf -) | tar -C "$tree" -xf -
else
	tar -C "$src" --exclude=./.git --exclude='./build*' --exclude=./.cache \
		--exclude=./tests/vm/cache --exclude='*.o' --exclude='*.so' --exclude='*.a' \
		--exclude='*.pyc' -cf - . | tar -C "$tree" -xf -
fi

# Results of an earlier run in OUTDIR would be confusing next to these.
rm -f "$out"/rdmacm-mux_* "$out"/rdmacm-mux-dbgsym_* "$out"/librdmacm-mux*

args=(-us -uc)
((binary)) && args+=(-b)
opts=${DEB_BUILD_OPTIONS:-}
((nocheck)) && opts="${opts:+$opts }nocheck"
# debhelper builds with one job unless told otherwise.
[[ $opts == *parallel=* ]] || opts="${opts:+$opts }parallel=$(nproc)"
echo "package: dpkg-buildpackage ${args[*]} (version $version${opts:+, DEB_BUILD_OPTIONS=$opts})"
t0=$SECONDS
(cd "$tree" && DEB_BUILD_OPTIONS=$opts dpkg-buildpackage "${args[@]}")
echo "package: built in $((SECONDS - t0)) s"

changes=$(find "$tmp" -maxdepth 1 -name '*.changes' | head -n 1)
[[ -n $changes ]] || { echo "package: dpkg-buildpackage made no .changes" >&2; exit 1; }
find "$tmp" -maxdepth 1 -type f \( -name '*.deb' -o -name '*.changes' -o -name '*.buildinfo' \
	-o -name '*.dsc' -o -name '*.tar.*' \) -exec cp {} "$out/" \;
for d in "$out"/*.deb; do
	echo "package: $(basename "$d"): $(dpkg-deb -c "$d" | grep -vc '/$') files"
done

if ((lint)); then
	echo "package: lintian $(lintian --version | awk '{ print $2 }') on $(basename "$changes")"
	# As root lintian says it would rather not be; it still works.
	lintian --fail-on error,warning --display-info --show-overrides \
		"$out/$(basename "$changes")"
	echo "package: lintian: no error, no warning without an override"
fi
