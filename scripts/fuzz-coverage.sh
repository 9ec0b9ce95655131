#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What the relay fuzzer reaches: a clang source-based coverage report of
# fuzz-relay replaying its seed corpus, its regressions and, when given,
# a corpus a fuzzing run grew (scripts/fuzz.sh keeps one in
# $FUZZ_WORK_DIR/relay). Prints the coverage of the units on the
# deferred-send path, and of each of its functions, and writes an HTML
# report.
#
# Usage: scripts/fuzz-coverage.sh [CORPUS_DIR...]
# Environment: COVERAGE_BUILD_DIR (build-coverage), COVERAGE_OUT (the
# report's directory, default $COVERAGE_BUILD_DIR/fuzz-relay-coverage).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${COVERAGE_BUILD_DIR:-build-coverage}
out=${COVERAGE_OUT:-$build/fuzz-relay-coverage}
flags='-fprofile-instr-generate -fcoverage-mapping'

if [[ ! -f $build/build.ninja ]]; then
	CC=clang meson setup "$build" -Dfuzz=disabled -Dc_args="$flags" \
		-Dc_link_args=-fprofile-instr-generate >/dev/null
fi
ninja -C "$build" tests/fuzz/fuzz-relay >/dev/null

inputs=()
for d in tests/fuzz/regressions/relay tests/fuzz/corpus/relay "$@"; do
	[[ -d $d ]] || continue
	while IFS= read -r -d '' f; do
		inputs+=("$f")
	done < <(find "$d" -type f ! -name '*.md' -print0 | sort -z)
done
rm -rf "$out"
mkdir -p "$out"
# The replaying fuzz-relay (fuzz-replay.c) runs every input in one process.
printf '%s\0' "${inputs[@]}" | LLVM_PROFILE_FILE="$out/fuzz-relay.profraw" \
	xargs -0 "$build/tests/fuzz/fuzz-relay" >/dev/null
llvm-profdata merge -sparse "$out/fuzz-relay.profraw" -o "$out/fuzz-relay.profdata"

units='relay/relay-tx.c|relay/client.c|send/umad-sender.c|send/send-policy.c|relay/relay-handoff.c'
echo "== fuzz-relay over ${#inputs[@]} inputs: the units on the deferred-send path"
llvm-cov report "$build/tests/fuzz/fuzz-relay" -instr-profile="$out/fuzz-relay.profdata" |
	grep -E "^Filename|daemon/($units)" | sed 's/   */  /g'
echo "== their functions: times run, and lines covered"
llvm-cov export "$build/tests/fuzz/fuzz-relay" -instr-profile="$out/fuzz-relay.profdata" |
	UNITS="$units" python3 -c '
import json, os, re, sys
units = re.compile(r"daemon/(" + os.environ["UNITS"] + r")$")
for fn in json.load(sys.stdin)["data"][0]["functions"]:
    if not any(units.search(f) for f in fn["filenames"]):
        continue
    lines = {r[0] for r in fn["regions"]}
    hit = {r[0] for r in fn["regions"] if r[4] > 0}
    print("%-40s %10d runs  %d/%d lines" % (fn["name"], fn["count"], len(hit), len(lines)))
'
llvm-cov show "$build/tests/fuzz/fuzz-relay" -instr-profile="$out/fuzz-relay.profdata" \
	-format=html -output-dir="$out/html"
echo "== HTML: $out/html/index.html"
