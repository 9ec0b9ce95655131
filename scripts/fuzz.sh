#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Runs the libFuzzer targets (tests/fuzz) for a longer time than the test
# suite does, each from its seed corpus, keeping what they find in a scratch
# corpus outside the tree, and prints libFuzzer's final statistics and a
# summary: executions, coverage (cov: edges, ft: features), corpus size.
# Builds build-fuzz (clang, ASan+UBSan, -Dfuzz=enabled) first.
#
# Usage: scripts/fuzz.sh [SECONDS] [FUZZER...]
#   SECONDS   per fuzzer, default 600
#   FUZZER    cm-codec frames relay client-lib handoff vms (default: all, one by one)
# Environment: FUZZ_BUILD_DIR (build-fuzz), FUZZ_WORK_DIR (scratch corpora
# and logs, default /var/tmp/rdmacm-mux-fuzz). A crash is kept in
# $FUZZ_WORK_DIR/fuzz-artifacts/; copy it to tests/fuzz/regressions/<fuzzer>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
(($# > 0)) && shift
fuzzers=("$@")
((${#fuzzers[@]})) || fuzzers=(cm-codec frames relay client-lib handoff vms)
build=${FUZZ_BUILD_DIR:-build-fuzz}
work=${FUZZ_WORK_DIR:-/var/tmp/rdmacm-mux-fuzz}
src=$PWD

if [[ -f $build/build.ninja ]]; then
	meson setup --reconfigure "$build" >/dev/null
else
	CC=clang meson setup "$build" -Dfuzz=enabled -Db_sanitize=address,undefined \
		-Db_lundef=false >/dev/null
fi
ninja -C "$build" "${fuzzers[@]/#/tests/fuzz/fuzz-}"

mkdir -p "$work"
summary=()
rc=0
for f in "${fuzzers[@]}"; do
	log=$work/$f.log
	echo "== fuzz-$f for ${seconds}s (log: $log, corpus: $work/$f)"
	set +e
	(cd "$work" && "$src/tests/fuzz/run-fuzzer.sh" libfuzzer "$src/$build/tests/fuzz/fuzz-$f" \
		"$src/tests/fuzz/corpus/$f" "$src/tests/fuzz/regressions/$f" "$seconds" \
		"$work/$f") 2>&1 | tee "$log"
	frc=${PIPESTATUS[0]}
	set -e
	((frc == 0)) || rc=1
	done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) corp: \([^ ]*\).*/cov \1, ft \2, corpus \3/p' \
		<<<"$done_line")
	summary+=("$(printf '%-11s %s executions, %s%s' "$f" "${execs:-?}" "${cov:-no stats}" \
		"$( ((frc == 0)) || echo ', FAILED')")")
done
echo "== summary (${seconds}s each)"
printf '%s\n' "${summary[@]}"
exit "$rc"
