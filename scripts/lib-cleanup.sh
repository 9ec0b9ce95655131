# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Sourced by scripts that start programs in the background in a temp dir
# of their own: at exit, whatever way it comes, each process in $pids is
# killed and waited for and the dir is removed. After sourcing:
#   cleanup_dir=$(mktemp -d ...)   the dir to remove
#   some-program & pids+=($!)      each process to end
pids=()
cleanup_dir=
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[[ -z $cleanup_dir ]] || rm -rf "$cleanup_dir"
}
trap cleanup EXIT
