#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Runs one fuzzer for the 'fuzz' test suite and scripts/fuzz.sh.
#   run-fuzzer.sh replay    BINARY CORPUS REGRESSIONS
#   run-fuzzer.sh libfuzzer BINARY CORPUS REGRESSIONS [SECONDS] [WORKDIR]
# Both modes first replay every regression input and every seed (any crash
# or failed check fails the run). libfuzzer mode then fuzzes for SECONDS
# (default $FUZZ_SECONDS, else 20) from the seeds, writing new inputs to
# WORKDIR (default: a temporary directory that is removed), never to the
# source tree, and prints libFuzzer's final statistics. A crashing input is
# kept as fuzz-artifacts/<fuzzer>-crash-* in the current directory.
set -euo pipefail

mode=$1 bin=$2 corpus=$3 regressions=$4
seconds=${5:-${FUZZ_SECONDS:-20}}
workdir=${6:-}
name=$(basename "$bin")

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

inputs=()
for d in "$regressions" "$corpus"; do
	[[ -d $d ]] || continue
	while IFS= read -r -d '' f; do
		inputs+=("$f")
	done < <(find "$d" -type f ! -name '*.md' ! -name '.*' -print0 | sort -z)
done

echo "$name: replaying ${#inputs[@]} inputs"
if [[ $mode == replay ]]; then
	exec "$bin" "${inputs[@]}"
fi
if ((${#inputs[@]})); then
	"$bin" -runs=1 "${inputs[@]}" >/dev/null 2>"$name-replay.log" || {
		cat "$name-replay.log" >&2
		exit 1
	}
fi

cleanup=
if [[ -z $workdir ]]; then
	workdir=$(mktemp -d "${TMPDIR:-/tmp}/$name-XXXXXX")
	cleanup=$workdir
fi
trap '[[ -n $cleanup ]] && rm -rf "$cleanup"' EXIT
mkdir -p "$workdir" fuzz-artifacts
seeds=()
[[ -d $corpus ]] && seeds=("$corpus")

# FUZZ_SEED fixes libFuzzer's seed (the CI run sets it, so a red run can
# be replayed); without it every run explores afresh.
seed_args=()
[[ -n ${FUZZ_SEED:-} ]] && seed_args=(-seed="$FUZZ_SEED")

echo "$name: fuzzing for ${seconds}s${FUZZ_SEED:+ (seed $FUZZ_SEED)}"
# The per-input NEW/REDUCE/pulse lines are noise in a test log.
set +e
"$bin" "${seed_args[@]}" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
	-rss_limit_mb=2048 -max_len="${FUZZ_MAX_LEN:-4096}" \
	-artifact_prefix="fuzz-artifacts/$name-" "$workdir" "${seeds[@]}" 2>&1 |
	grep -v -e '^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\)'
rc=${PIPESTATUS[0]}
set -e
exit "$rc"
