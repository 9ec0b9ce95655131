# SPDX-License-Identifier: MIT
# shellcheck shell=sh disable=SC2034 # the variables are for the sourcing scripts
#
# Helpers and the address plan shared by the guest setup and the scenarios
# of the VM tests (tests/vm). Sourced with `. /vm/guest-lib.sh`; runs under
# busybox sh. Call iproute2 by full path: busybox's own `ip` applet wins
# over PATH and cannot create veth pairs (pitfall P1).

IP=/usr/sbin/ip
RDMA=/usr/bin/rdma

# Address plan. rxe0 sits on veth0, rxe1 on veth1. Each IPv4 address of a
# netdev becomes an IPv4-mapped RoCE v2 GID (::ffff:a.b.c.d) of its rxe.
VM_IP0=10.0.0.1
VM_IP1=10.0.0.2
VM_EXTRA0="10.0.1.1 10.0.1.2 10.0.1.3 10.0.1.4"
VM_EXTRA1="10.0.2.1 10.0.2.2 10.0.2.3 10.0.2.4"
VM_NET_EXTRA0=10.0.1.0/24
VM_NET_EXTRA1=10.0.2.0/24
# Where rdmacm-mux puts its sockets: -s $VM_SOCK_PREFIX gives
# $VM_SOCK_PREFIX-<dev>-<port>.
VM_SOCK_PREFIX=/run/rdmacm-mux

VM_FAILED=0

vm_die() {
	echo "FATAL: $*" >&2
	exit 1
}

# The GID of an IPv4 address, as umad-probe takes it.
vm_gid() { echo "::ffff:$1"; }

# The sysfs spelling of that GID: 0000:...:ffff:0a00:0101.
vm_sysfs_gid() {
	(
		IFS=.
		# shellcheck disable=SC2086 # split a.b.c.d into four arguments
		set -- $1
		printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' \
			"$1" "$2" "$3" "$4"
	)
}

vm_gid_dir() { echo "/sys/class/infiniband/$1/ports/1/gids"; }

# "index=gid" for each IPv4-mapped GID of DEV port 1. One grep over all
# entries: a loop of one process per entry costs seconds (pitfall P6).
vm_gid_list() {
	grep -H ':ffff:' "$(vm_gid_dir "$1")"/* 2>/dev/null |
		sed 's|.*/gids/\([0-9]*\):|\1=|' | tr '\n' ' '
}

# The GID table index of IPv4 address ADDR on DEV port 1.
vm_gid_index() {
	grep -l -x "$(vm_sysfs_gid "$2")" "$(vm_gid_dir "$1")"/* 2>/dev/null |
		head -n 1 | sed 's|.*/||'
}

# vm_wait_gids DEV ADDR...: waits up to 10 s until all are GIDs of DEV.
vm_wait_gids() {
	dev=$1
	shift
	tries=0
	while :; do
		have=$(grep -h ':ffff:' "$(vm_gid_dir "$dev")"/* 2>/dev/null || true)
		missing=
		for a in "$@"; do
			case "$have" in
			*"$(vm_sysfs_gid "$a")"*) ;;
			*) missing="$missing $a" ;;
			esac
		done
		[ -z "$missing" ] && return 0
		tries=$((tries + 1))
		[ "$tries" -lt 100 ] || vm_die "$dev: GIDs never appeared for:$missing"
		sleep 0.1
	done
}

# vm_need PROGRAM...: fails the scenario loudly when a program is missing.
vm_need() {
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 ||
			vm_die "required program '$p' is not in the guest"
	done
}

# vm_check DESCRIPTION COMMAND...: runs COMMAND, records PASS or FAIL.
vm_check() {
	desc=$1
	shift
	if "$@"; then
		echo "PASS: $desc"
	else
		echo "FAIL: $desc (exit $?): $*"
		VM_FAILED=$((VM_FAILED + 1))
	fi
}

# vm_check_fails DESCRIPTION COMMAND...: COMMAND must exit non-zero.
vm_check_fails() {
	desc=$1
	shift
	if "$@"; then
		echo "FAIL: $desc (unexpected success): $*"
		VM_FAILED=$((VM_FAILED + 1))
	else
		echo "PASS: $desc"
	fi
}

# vm_wait_path PATH SECS: waits until PATH exists (a socket, a file).
vm_wait_path() {
	n=0
	while [ ! -e "$1" ]; do
		n=$((n + 1))
		[ "$n" -le $(($2 * 10)) ] || return 1
		sleep 0.1
	done
}

# vm_wait_grep FILE PATTERN SECS: waits until FILE has a line matching.
vm_wait_grep() {
	n=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ "$n" -le $(($3 * 10)) ] || return 1
		sleep 0.1
	done
}

vm_module_loaded() { grep -q "^$1 " /proc/modules; }

# Ends a scenario: exit 0 only when every check passed.
vm_finish() {
	if [ "$VM_FAILED" -ne 0 ]; then
		echo "$VM_FAILED check(s) failed"
		exit 1
	fi
	echo "all checks passed"
	exit 0
}
