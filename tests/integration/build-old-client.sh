#!/bin/sh
# SPDX-License-Identifier: MIT
#
# build-old-client.sh SRCDIR OUTDIR VERSION
#
# Builds, from SRCDIR's git history, librdmacm-mux as released in VERSION
# and, against that release's header and library, the programs a user of
# it would have built then: tests/integration/old-client.c (this tree's
# source, written for the 1.0 API) and, for 1.0.0, the pingpong example of
# the same commit. The old sources are taken with git show into OUTDIR at
# build time; nothing of them is kept in the tree. test-old-clients.c then
# runs the binaries against this tree's library.
#
#   OUTDIR/lib/librdmacm-mux.so.1   the old library (to link against)
#   OUTDIR/include/                 its header and the wire header
#   OUTDIR/old-client               the probe
#   OUTDIR/rdmacm-mux-pingpong      1.0.0 only: the old example
#
# Environment: CC_CMD (the compiler command), SANITIZE (meson's b_sanitize:
# the programs get it, so that they run with a sanitized library; the old
# library is only linked against, never loaded, and is built plain).
# Fails, never skips, when the history lacks the commit.
set -eu

src=$1
out=$2
version=$3

case $version in
# "Integration tests and the pingpong example": library 1.0.0 (as
# introduced in f00c971) and the first pingpong.
1.0.0) commit=39c1e2cd92d5c4fbc4f0ffd39894a27d82b173b8 ;;
# "opt-in reconnection with backoff, GID re-registration and events".
1.1.0) commit=7dde174541dfd25acf2c99028e9ed96d87370c8f ;;
*)
	echo "build-old-client.sh: unknown version $version" >&2
	exit 2
	;;
esac

if ! git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null; then
	echo "build-old-client.sh: commit $commit (librdmacm-mux $version) is not in" \
		"the history of $src: the old-client tests need a clone with full" \
		"history (git fetch --unshallow)" >&2
	exit 1
fi
# The commit is the release it stands for.
if ! git -C "$src" show "$commit:client-lib/meson.build" | grep -q "version: '$version'"; then
	echo "build-old-client.sh: $commit does not build librdmacm-mux $version" >&2
	exit 1
fi

rm -rf "$out"
mkdir -p "$out/include" "$out/lib" "$out/old-src"
for f in client-lib/rdmacm-mux.h proto/rdmacm-mux-proto.h; do
	git -C "$src" show "$commit:$f" >"$out/include/$(basename "$f")"
done
for f in client-lib/rdmacm-mux.c client-lib/librdmacm-mux.sym; do
	git -C "$src" show "$commit:$f" >"$out/old-src/$(basename "$f")"
done

# shellcheck disable=SC2086 # CC_CMD is a word list
$CC_CMD -std=gnu11 -O2 -g -D_GNU_SOURCE -fPIC -shared -fvisibility=hidden \
	-I"$out/include" -Wl,--version-script="$out/old-src/librdmacm-mux.sym" \
	-Wl,-soname,librdmacm-mux.so.1 -o "$out/lib/librdmacm-mux.so.1" \
	"$out/old-src/rdmacm-mux.c"
ln -s librdmacm-mux.so.1 "$out/lib/librdmacm-mux.so"

san=''
[ "${SANITIZE:-none}" = none ] || [ -z "${SANITIZE:-}" ] || san="-fsanitize=$SANITIZE"
# The old header first: <rdmacm-mux.h> and the wire header it includes
# come from the release; cm-mad.c needs this tree's byte helpers only.
# shellcheck disable=SC2086
$CC_CMD $san -std=gnu11 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Werror \
	-I"$out/include" -I"$src/tests/support" -I"$src/proto" \
	-o "$out/old-client" "$src/tests/integration/old-client.c" \
	"$src/tests/support/cm-mad.c" -L"$out/lib" -lrdmacm-mux

if [ "$version" = 1.0.0 ]; then
	git -C "$src" show "$commit:examples/rdmacm-mux-pingpong.c" >"$out/old-src/rdmacm-mux-pingpong.c"
	# shellcheck disable=SC2086
	$CC_CMD $san -std=gnu11 -O2 -g -D_GNU_SOURCE -I"$out/include" \
		-o "$out/rdmacm-mux-pingpong" "$out/old-src/rdmacm-mux-pingpong.c" \
		-L"$out/lib" -lrdmacm-mux
fi
echo "$out"
