#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: the daemons next to the host's own CM (issue 17). Two more
# soft-RoCE devices join rxe0 and rxe1: rxe2 on veth2 (10.0.6.1) and rxe3
# on veth3 (10.0.7.1), a second veth pair. (Not macvlans of veth0/veth1:
# RoCE puts an upper device's addresses in the lower device's GID table
# too, and rdma_cm would then bind rping to rxe0 or rxe1.) muxA takes rxe0
# and muxB rxe1 while ib_cm is not loaded; then rdma_ucm is loaded, and
# with it rdma_cm and ib_cm, which must take rxe2 and rxe3 and leave rxe0
# and rxe1 alone (it skips a device whose CM class is taken). At the same
# time the host's own rdma_cm application (rping, rxe2 -> rxe3) connects
# and moves data, and pingpong clients of the daemons complete CM
# handshakes between rxe0 and rxe1. sysfs (ib_cm's counters,
# /sys/module/ib_cm) and "rdmacm-muxctl status --json" of both daemons
# must agree on who holds each port. Last, a daemon that stops leaves its
# device to nobody: ib_cm does not come back to it.
# vm-needs: rdmacm-mux rdmacm-mux-pingpong rdmacm-muxctl umad-probe
# Checks with "eval '...'" expand their variables when they run, on purpose.
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh disable=SC2016
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-pingpong rdmacm-muxctl umad-probe rping

IP2=10.0.6.1 IP3=10.0.7.1
SYS=/sys/class/infiniband

vm_check "ib_cm is not loaded yet" [ ! -d /sys/module/ib_cm ]

# veth2 and veth3: a second pair, set up as guest-setup.sh sets up the
# first (both ends in one netns: local sources accepted, a /32 route and a
# neighbour for the other end, bound to each end's own device).
conf() { echo "$3" >"/proc/sys/net/ipv4/conf/$1/$2"; }
$IP link add veth2 type veth peer name veth3
for i in veth2 veth3; do
	conf $i accept_local 1
	conf $i rp_filter 0
done
$IP addr add "$IP2/32" dev veth2
$IP addr add "$IP3/32" dev veth3
$IP link set veth2 up
$IP link set veth3 up
$IP route add "$IP3/32" dev veth2
$IP route add "$IP2/32" dev veth3
$IP neigh replace $IP3 lladdr "$(cat /sys/class/net/veth3/address)" dev veth2 nud permanent
$IP neigh replace $IP2 lladdr "$(cat /sys/class/net/veth2/address)" dev veth3 nud permanent
$RDMA link add rxe2 type rxe netdev veth2
$RDMA link add rxe3 type rxe netdev veth3
vm_wait_gids rxe2 $IP2
vm_wait_gids rxe3 $IP3

# --- the daemons first, as the units do at boot
vm_mux_start muxA rxe0 || vm_finish
vm_mux_start muxB rxe1 || vm_finish
vm_check "muxA's start line: it holds rxe0, ib_cm is not loaded" \
	grep -q 'CM class owners: rxe0:1 daemon, rxe1:1 unknown, rxe2:1 unknown, rxe3:1 unknown; ib_cm is not loaded' /tmp/muxA.err

# status_owner DAEMON DEV: the owner of DEV port 1 in DAEMON's status --json.
status_owner() {
	rdmacm-muxctl --socket "$(vm_mux_sock "$1")" status --json |
		grep -o "{\"device\":\"$2\",\"port\":1,\"owner\":\"[a-z_]*\"}" |
		sed 's/.*"owner":"\([a-z_]*\)".*/\1/'
}
vm_check "before ib_cm, muxA's status: rxe0 daemon, rxe2 unknown" \
	[ "$(status_owner muxA rxe0)/$(status_owner muxA rxe2)" = daemon/unknown ]

# --- then the host's CM, as rdma-core loads it
modprobe ib_uverbs
vm_check "modprobe rdma_ucm (rdma_cm, ib_cm)" modprobe rdma_ucm
vm_check "ib_cm is loaded" [ -d /sys/module/ib_cm ]
for d in rxe2 rxe3; do
	vm_check "ib_cm took $d (its counters are on port 1)" [ -d $SYS/$d/ports/1/cm_rx_msgs ]
done
for d in rxe0 rxe1; do
	vm_check "ib_cm left $d alone (no counters)" [ ! -e $SYS/$d/ports/1/cm_rx_msgs ]
done
dmesg | grep 'already in use' | sed 's/^/    dmesg: /'

# What sysfs says of DEV port 1, from DAEMON's point of view (it knows its
# own device): ib_cm, or not_ib_cm, as ib_cm is loaded.
sysfs_owner() {
	if [ "$2" = "$(sed -n 's/.*-\(rxe[0-9]*\)-1$/\1/p' "/tmp/$1.sock")" ]; then
		echo daemon
	elif [ -d "$SYS/$2/ports/1/cm_rx_msgs" ]; then
		echo ib_cm
	else
		echo not_ib_cm
	fi
}
for m in muxA muxB; do
	rdmacm-muxctl --socket "$(vm_mux_sock $m)" status --json >/tmp/$m.status
	vm_check "$m's status: ib_cm is loaded" grep -q '"ib_cm_loaded":true' /tmp/$m.status
	for d in rxe0 rxe1 rxe2 rxe3; do
		want=$(sysfs_owner $m $d)
		got=$(status_owner $m $d)
		vm_check "$m's status and sysfs agree on $d: $want (status: $got)" [ "$got" = "$want" ]
	done
done
rdmacm-muxctl --socket "$(vm_mux_sock muxA)" status | sed -n '/^CM class owners/,$p'
vm_check "the expected picture: rxe0 muxA's, rxe1 muxB's, rxe2 and rxe3 ib_cm's" \
	[ "$(sysfs_owner muxA rxe0) $(sysfs_owner muxB rxe1) $(sysfs_owner muxA rxe2) $(sysfs_owner muxA rxe3)" = "daemon daemon ib_cm ib_cm" ]

# --- both at once: rping over ib_cm (rxe2 -> rxe3), handshakes through
# the daemons (rxe0 <-> rxe1)
# rping under a timeout: a connection that never comes must fail the
# checks, not hang the scenario.
vm_client rps timeout 30 rping -s -a $IP3 -C 5 -V -v
vm_pingpong b1 muxB 10.0.2.1 serve -c 2 -t 40
vm_pingpong a3 muxA 10.0.1.3 serve -c 1 -t 40
vm_wait_registered b1 a3
# The client must not come before the server listens (ib_cm would reject
# it): wait for the listening cm_id.
n=0
until $RDMA resource show cm_id 2>/dev/null | grep -q LISTEN || [ $n -ge 100 ]; do
	n=$((n + 1))
	sleep 0.1
done
$RDMA resource show cm_id | sed 's/^/    /'
vm_check "rping listens on rxe3" eval '$RDMA resource show cm_id | grep -q "link rxe3/1 .*LISTEN"'
vm_client rpc timeout 30 rping -c -a $IP3 -I $IP2 -C 5 -V -v
vm_pingpong a1 muxA 10.0.1.1 connect "$G21" -c 2
vm_pingpong b3 muxB 10.0.2.3 connect "$G13"
for c in a1 b3 b1 a3; do vm_client_ok "$c"; done
vm_client_ok rpc
vm_client_ok rps
vm_has_n rpc 5 "ping data: rdma-ping-"
vm_has_n rps 5 "server ping data: rdma-ping-"
vm_has_n a1 2 "established with $G21"
vm_has a3 "connection 0x00000001 established"
vm_rx_only_from a1 "$G21"
vm_rx_only_from b3 "$G13"
vm_check "rping ran on rxe2 and rxe3: ib_cm counted its REQ and REP there" \
	eval '[ "$(cat $SYS/rxe2/ports/1/cm_tx_msgs/req)" -ge 1 ] && [ "$(cat $SYS/rxe3/ports/1/cm_tx_msgs/rep)" -ge 1 ]'
vm_stop_both_muxes
vm_check_both_traces
vm_check_counters muxA a1 a3
vm_check_counters muxB b1 b3
vm_check_no_problems muxA
vm_check_no_problems muxB

# --- a stopped daemon leaves its device to nobody
vm_check "rxe0's class is free once muxA is gone" umad-probe register rxe0 1
vm_check "... and ib_cm did not come back to rxe0" [ ! -e $SYS/rxe0/ports/1/cm_rx_msgs ]

# Leave the guest as it was: no ib_cm, no rxe2/rxe3.
for m in rdma_ucm rdma_cm iw_cm ib_cm ib_uverbs; do
	! vm_module_loaded $m || rmmod $m
done
vm_check "ib_cm and its users are unloaded" [ ! -d /sys/module/ib_cm ]
$RDMA link delete rxe2
$RDMA link delete rxe3
$IP link delete veth2
vm_finish
