#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds rdmacm-mux with gcc and with clang (warnings are errors in both;
# clang and the sanitizer builds in the background while the gcc suites
# run) and runs every test suite in the gcc build (unit, sim, integration, vm,
# soak, bench smoke, qemu, and fuzz: a replay of the fuzz corpora and
# regressions) and the unit suite in the clang build; the package suite
# (dpkg-buildpackage and lintian, scripts/package.sh) runs on its own with
# --verbose, so that the log shows the package build and every lintian
# tag. Then two sanitizer passes: the unit, integration and fuzz-replay
# suites again in a gcc ASan+UBSan build (LeakSanitizer on, UBSan fatal),
# and the libFuzzer targets for FUZZ_SECONDS (20) each in a clang
# ASan+UBSan build. Prints meson's per-test lines and summaries, then one
# line "N passed, N failed, N skipped" over all of them.
#
# Usage: scripts/test.sh            (from anywhere; builds under build/)
# SANITIZE=0 skips the sanitizer passes (a quick local run).
#
#        scripts/test.sh --stress N
# builds with gcc only and runs the unit and integration suites N times
# while stress-ng (scripts/setup.sh installs it; else plain busy loops)
# keeps two CPU hogs per core busy, so that a test whose verdict depends on
# timing shows it. Prints a verdict per round and "stress: K of N rounds
# passed"; exits non-zero unless every round passed. Each round's meson
# log is kept as build/meson-logs/stress-round-I.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

stress_rounds=0
if [[ ${1:-} == --stress ]]; then
	stress_rounds=${2:-}
	if ! [[ $stress_rounds =~ ^[1-9][0-9]*$ ]]; then
		echo "usage: $0 [--stress ROUNDS]" >&2
		exit 2
	fi
elif (($#)); then
	echo "usage: $0 [--stress ROUNDS]" >&2
	exit 2
fi

build=${BUILD_DIR:-build}
build_clang=${BUILD_DIR_CLANG:-build-clang}
build_asan=${BUILD_DIR_ASAN:-build-asan}
build_fuzz=${BUILD_DIR_FUZZ:-build-fuzz}
sanitize=${SANITIZE:-1}

# A step's heading, with the seconds since the start: the log shows where
# CI's time goes.
phase() {
	echo "== $* [${SECONDS} s]"
}

configure() { # dir, env... [-- meson options...]
	local dir=$1 envs=() opts=()
	shift
	while (($#)) && [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	(($#)) && shift
	opts=("$@")
	if [[ -f $dir/build.ninja ]]; then
		env "${envs[@]}" meson setup --reconfigure "$dir" "${opts[@]}" >/dev/null
	else
		env "${envs[@]}" meson setup "$dir" "${opts[@]}" >/dev/null
	fi
}

phase "build (gcc)"
configure "$build" CC=gcc
ninja -C "$build"

# The competing load: two CPU hogs per core, ended with this script.
load_pids=()
stop_load() {
	if ((${#load_pids[@]})); then
		kill "${load_pids[@]}" 2>/dev/null || true
		wait "${load_pids[@]}" 2>/dev/null || true
	fi
	load_pids=()
}
start_load() {
	local hogs=$(($(nproc) * 2))
	if command -v stress-ng >/dev/null; then
		stress-ng --cpu "$hogs" --quiet &
		load_pids+=($!)
		echo "== load: stress-ng --cpu $hogs (pid $!)"
	else
		for ((i = 0; i < hogs; i++)); do
			bash -c 'while :; do :; done' &
			load_pids+=($!)
		done
		echo "== load: $hogs busy loops (no stress-ng)"
	fi
}

if ((stress_rounds)); then
	trap stop_load EXIT
	start_load
	passed_rounds=0
	for ((round = 1; round <= stress_rounds; round++)); do
		start=$SECONDS
		round_rc=0
		meson test -C "$build" --no-rebuild --suite unit --suite integration \
			--num-processes 2 --logbase "stress-round-$round" >/dev/null || round_rc=$?
		verdict=$(python3 - "$build/meson-logs/stress-round-$round.json" <<'PY'
import json, sys
ok, bad = 0, []
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        if r.get("result") in ("OK", "SKIP", "EXPECTEDFAIL"):
            ok += 1
        else:
            bad.append(f'{r["name"]} ({r.get("result")})')
print(f"{ok} passed, {len(bad)} failed" + ("".join(f"\n    {b}" for b in bad)))
PY
)
		if ((round_rc == 0)); then
			passed_rounds=$((passed_rounds + 1))
			echo "stress round $round/$stress_rounds: ok ($((SECONDS - start)) s): $verdict"
		else
			echo "stress round $round/$stress_rounds: FAILED ($((SECONDS - start)) s," \
				"$build/meson-logs/stress-round-$round.txt): $verdict"
		fi
	done
	stop_load
	echo "stress: $passed_rounds of $stress_rounds rounds passed"
	((passed_rounds == stress_rounds))
	exit
fi

fuzz_targets=(tests/fuzz/fuzz-cm-codec tests/fuzz/fuzz-frames tests/fuzz/fuzz-relay
	tests/fuzz/fuzz-client-lib tests/fuzz/fuzz-handoff tests/fuzz/fuzz-vms)

# The clang tree, and the ASan+UBSan and libFuzzer ones, build in the
# background at the lowest CPU priority while the gcc tree's suites run:
# most of that time goes to VM tests that run alone (is_parallel: false)
# on one core, so the builds take the idle one instead of running after
# the tests. (The tests wait on state, not on time: scripts/test.sh
# --stress shows that a busy CPU does not change their verdicts.) Their
# output is printed once they are needed.
build_others() {
	phase "build (clang)"
	configure "$build_clang" CC=clang
	ninja -C "$build_clang"
	if ((sanitize)); then
		phase "build (gcc, ASan+UBSan)"
		configure "$build_asan" CC=gcc -- -Db_sanitize=address,undefined
		ninja -C "$build_asan"
		phase "build (clang, libFuzzer, ASan+UBSan)"
		configure "$build_fuzz" CC=clang -- -Dfuzz=enabled -Db_sanitize=address,undefined \
			-Db_lundef=false
		ninja -C "$build_fuzz" "${fuzz_targets[@]}"
	fi
}
mkdir -p "$build/meson-logs"
others_log=$build/meson-logs/other-builds.log
(
	renice -n 19 -p "$BASHPID" >/dev/null
	build_others
) >"$others_log" 2>&1 &
others_pid=$!
trap 'kill "$others_pid" 2>/dev/null || true' EXIT

phase "tests"
rc=0
meson test -C "$build" --print-errorlogs --num-processes 2 --no-suite package || rc=$?
# meson writes testlog.json afresh at each run: keep this one.
cp "$build/meson-logs/testlog.json" "$build/meson-logs/testlog-main.json"
logs=("$build/meson-logs/testlog-main.json")

phase "tests: package (dpkg-buildpackage, lintian)"
meson test -C "$build" --suite package --verbose || rc=$?
logs+=("$build/meson-logs/testlog.json")

others_rc=0
wait "$others_pid" || others_rc=$?
trap - EXIT
cat "$others_log"
if ((others_rc)); then
	echo "the builds above failed (exit $others_rc)" >&2
	exit "$others_rc"
fi

phase "tests (clang): unit"
meson test -C "$build_clang" --suite unit --print-errorlogs --num-processes 2 || rc=$?
logs+=("$build_clang/meson-logs/testlog.json")

if ((sanitize)); then
	# gcc's ASan wants its runtime first in the library list; the
	# integration harness preloads the umad sim into the daemon, so
	# relax that check (the sim interposes only umad_* functions).
	# UBSan halts on the first report; LeakSanitizer checks every
	# process at exit, the daemon included. Nothing is suppressed.
	phase "tests (ASan+UBSan+LSan): unit, integration, fuzz replay"
	ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C "$build_asan" --suite unit --suite integration --suite fuzz \
		--print-errorlogs --num-processes 2 || rc=$?
	logs+=("$build_asan/meson-logs/testlog.json")

	phase "tests: fuzzers, ${FUZZ_SECONDS:-20}s each"
	# A fixed seed: a fuzzer that finds something here finds it again
	# when the run is repeated (scripts/fuzz.sh explores afresh).
	FUZZ_SEED=${FUZZ_SEED:-1} FUZZ_SECONDS=${FUZZ_SECONDS:-20} \
		meson test -C "$build_fuzz" --suite fuzz --no-rebuild \
		--print-errorlogs --num-processes 2 || rc=$?
	logs+=("$build_fuzz/meson-logs/testlog.json")
fi

phase "done"

# One closing line that any CI can read.
python3 - "${logs[@]}" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "EXPECTEDFAIL": 0, "UNEXPECTEDPASS": 0, "TIMEOUT": 0, "ERROR": 0}
for name in sys.argv[1:]:
    with open(name) as f:
        for line in f:
            r = json.loads(line).get("result", "ERROR")
            counts[r] = counts.get(r, 0) + 1
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"{passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
exit "$rc"
