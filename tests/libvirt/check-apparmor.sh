#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The AppArmor rule for one domain's VM socket parses and compiles:
# apparmor_parser -Q (compile, load nothing) on a domain profile, as
# libvirt's TEMPLATE.qemu makes it, with the snippet where the hook puts
# it. The snippet names web-1's socket under both units' paths and no
# other VM's: no glob in it, so a neighbour's socket matches no rule. To
# show the check can fail, a snippet with a broken rule must be refused
# first.
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

# profile FILE: a domain's profile with FILE inside, as the hook puts it.
profile() {
	printf '#include <tunables/global>\nprofile libvirt-9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01 flags=(attach_disconnected) {\n  #include "%s"\n}\n' "$1"
}

printf '"/run/rdmacm-mux-mlx5_0-1.vm/web-1.sock" rw\n' >"$tmp/broken" # no comma
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
# covered PATH: whether a rule of the snippet matches PATH (rules are
# quoted paths or globs).
covered() {
	local rule
	while read -r rule _; do
		rule=${rule//\"/}
		# shellcheck disable=SC2053 # the rule is a glob
		[[ $1 == ${rule//\{,var\/\}/} ]] && return 0
	done < <(grep -E '^ *"?/' "$snippet")
	return 1
}
for path in /run/rdmacm-mux-mlx5_0-1.vm/web-1.sock /run/rdmacm-mux/mlx5_0-1.vm/web-1.sock; do
	if ! covered "$path"; then
		echo "not ok: no rule of $snippet covers web-1's own socket $path" >&2
		exit 1
	fi
done
for path in /run/rdmacm-mux-mlx5_0-1.vm/db-1.sock /run/rdmacm-mux/mlx5_0-1.vm/db-1.sock; do
	if covered "$path"; then
		echo "not ok: a rule of $snippet covers $path, another VM's socket" >&2
		exit 1
	fi
done
echo "ok: apparmor_parser -Q accepts $(basename "$snippet") in a domain's profile; it covers web-1's socket under both units' paths, and not db-1's"
