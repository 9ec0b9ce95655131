# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Sourced by the scripts that write apt sources of their own from the
# host's mirrors (scripts/debian-qemu-source.sh, tests/qemu/qemu-pvrdma.sh),
# so that both find the same mirrors the same way.

# Prints the URIs of the host's apt mirrors, sorted, one a line: those of
# the deb822 files in /etc/apt/sources.list.d, or else those of the
# one-line /etc/apt/sources.list. Prints nothing when neither lists one.
apt_host_mirrors() {
	local uris
	uris=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' | sort -u) || true
	[[ -n $uris ]] || uris=$(awk '$1 == "deb" { print ($2 ~ /^\[/ ? $3 : $2) }' \
		/etc/apt/sources.list 2>/dev/null | sort -u) || true
	[[ -z $uris ]] || printf '%s\n' "$uris"
}
