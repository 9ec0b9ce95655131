#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The AppArmor snippet for libvirt's QEMU profiles parses and compiles:
# apparmor_parser -Q (compile, load nothing) on a profile that includes it
# where Debian's libvirt-qemu abstraction does. To show the check can fail,
# a snippet with a broken rule must be refused first.
#   check-apparmor.sh SNIPPET
# Exit 77 (skip) without apparmor_parser (Debian package apparmor).
set -euo pipefail

snippet=$(realpath "$1")
parser=$(command -v apparmor_parser || true)
[[ -n $parser ]] || parser=/sbin/apparmor_parser
if [[ ! -x $parser ]]; then
	echo "SKIP: apparmor_parser is not installed (scripts/setup.sh installs apparmor)"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# profile FILE: a profile around FILE, as the abstraction includes it.
profile() {
	printf '#include <tunables/global>\nprofile rdmacm-mux-snippet-check {\n  #include "%s"\n}\n' "$1"
}

printf '/run/rdmacm-mux-*.vm/*.sock rw\n' >"$tmp/broken" # no comma
profile "$tmp/broken" >"$tmp/broken.profile"
if "$parser" -Q -K "$tmp/broken.profile" >"$tmp/out" 2>&1; then
	echo "not ok: apparmor_parser -Q accepted a broken rule; it cannot check anything here" >&2
	exit 1
fi

profile "$snippet" >"$tmp/profile"
if ! "$parser" -Q -K "$tmp/profile" >"$tmp/out" 2>&1; then
	echo "not ok: apparmor_parser -Q refused $snippet:" >&2
	cat "$tmp/out" >&2
	exit 1
fi
# It must allow what QEMU does: connect (a write) to a VM's socket under
# both units' paths; the compiled profile has these rules.
for path in /run/rdmacm-mux-mlx5_0-1.vm/web-1.sock /run/rdmacm-mux/mlx5_0-1.vm/web-1.sock; do
	glob_ok=0
	while read -r rule _; do
		# shellcheck disable=SC2053 # the rule is a glob
		[[ $path == ${rule//\{,var\/\}/} ]] && glob_ok=1
	done < <(grep -E '^/' "$snippet")
	if ((!glob_ok)); then
		echo "not ok: no rule of $snippet covers $path" >&2
		exit 1
	fi
done
echo "ok: apparmor_parser -Q accepts $(basename "$snippet"), which covers both units' VM sockets"
