#!/bin/sh
# SPDX-License-Identifier: MIT
#
# meson's wrapper around scripts/package.sh: SKIP (77) when the packaging
# tools are not installed (scripts/setup.sh installs them), otherwise
# package.sh's own verdict, then check-dev.sh's on the library packages.
# usage: run-package.sh PACKAGE_SH OUTDIR
set -eu
for t in dpkg-buildpackage dh lintian; do
	if ! command -v "$t" >/dev/null; then
		echo "package: SKIP: $t is not installed (scripts/setup.sh installs it)"
		exit 77
	fi
done
"$1" "$2"
exec "$(dirname "$0")/check-dev.sh" "$2"
