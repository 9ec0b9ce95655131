#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds rdmacm-mux with gcc and with clang (warnings are errors in both)
# and runs every test suite in the gcc build: unit, sim, integration, vm
# and fuzz. Prints meson's per-test lines and its summary, then one line
# "N passed, N failed, N skipped".
#
# Usage: scripts/test.sh            (from anywhere; builds under build/)
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD_DIR:-build}
build_clang=${BUILD_DIR_CLANG:-build-clang}

configure() { # dir, env...
	local dir=$1
	shift
	if [[ -f $dir/build.ninja ]]; then
		env "$@" meson setup --reconfigure "$dir" >/dev/null
	else
		env "$@" meson setup "$dir" >/dev/null
	fi
}

echo "== build (gcc)"
configure "$build" CC=gcc
ninja -C "$build"

echo "== build (clang)"
configure "$build_clang" CC=clang
ninja -C "$build_clang"

echo "== tests"
rc=0
meson test -C "$build" --print-errorlogs --num-processes 2 || rc=$?

# One closing line that any CI can read.
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "EXPECTEDFAIL": 0, "UNEXPECTEDPASS": 0, "TIMEOUT": 0, "ERROR": 0}
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line).get("result", "ERROR")
        counts[r] = counts.get(r, 0) + 1
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"{passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
exit "$rc"
