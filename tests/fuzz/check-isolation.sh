#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Checks that fuzz-relay's inputs do not leak into each other: an input
# replayed after all the others leaves the same trace (FUZZ_TRACE: every
# step, MAD and write) as the input replayed alone. The harness keeps some
# of its memory from input to input (its tables of requests and clients,
# the event shapes it formatted); a fuzzer whose inputs depend on the
# ones before finds crashes that do not reproduce.
#   check-isolation.sh replay|libfuzzer BINARY CORPUS REGRESSIONS
set -euo pipefail

mode=$1 bin=$2
shift 2
inputs=()
for d in "$@"; do
	[[ -d $d ]] || continue
	while IFS= read -r -d '' f; do
		inputs+=("$f")
	done < <(find "$d" -type f ! -name '*.md' ! -name '.*' -print0 | sort -z)
done
((${#inputs[@]} >= 2)) || {
	echo "check-isolation: fewer than two inputs" >&2
	exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-isolation-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The harness's lines only (libFuzzer adds its own on the same stream).
trace() {
	local args=()
	# (libFuzzer runs an input twice when it suspects a leak: not here.)
	[[ $mode == libfuzzer ]] && args=(-runs=1 -detect_leaks=0)
	FUZZ_TRACE=1 "$bin" "${args[@]}" "$@" 2>&1 >/dev/null |
		grep -E '^(input: |step [0-9]+: |  )' || true
}

# All of them in one process, then each input's part of that trace on
# its own, in order.
trace "${inputs[@]}" >"$tmp/all"
awk -v dir="$tmp" '/^input: / { n++ } { print > (dir "/after." n) }' "$tmp/all"
n=$(grep -c '^input: ' "$tmp/all" || true)
if ((n != ${#inputs[@]})); then
	echo "check-isolation: $n traces for ${#inputs[@]} inputs" >&2
	exit 1
fi

bad=0
for i in "${!inputs[@]}"; do
	trace "${inputs[$i]}" >"$tmp/alone"
	if ! cmp -s "$tmp/alone" "$tmp/after.$((i + 1))"; then
		echo "check-isolation: ${inputs[$i]} does not replay the same after the others:" >&2
		diff "$tmp/alone" "$tmp/after.$((i + 1))" | head -20 >&2
		bad=1
	fi
done
((bad == 0)) || exit 1
echo "check-isolation: ${#inputs[@]} inputs replay the same alone and after the others"
