#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: a third host forges a DREQ. rxe2 sits on a macvlan of veth1, so
# its packets reach rxe0 the way rxe1's do, from its own address 10.0.4.1.
# While qa1 (muxA, rxe0) holds an established connection with qb1 (muxB),
# rxe2 sends DREQs that name the session's wire comm id (read from muxA's
# trace) with a made-up LocalCommID. The kernel delivers them to muxA, which
# must drop them as ib_cm would (the peer's GID and comm id do not match),
# count them under "spoofed", and never show them to qa1; the connection
# then closes normally with its real peer.
# vm-needs: rdmacm-mux rdmacm-mux-qemu-client umad-probe
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-qemu-client umad-probe

ATTACKER_IP=10.0.4.1
GA=$(vm_gid $ATTACKER_IP)

# The third host: a macvlan on veth1 (so its frames arrive on veth0, at
# rxe0), with its own address, a route out of it and rxe0's neighbour.
$IP link add mv2 link veth1 type macvlan mode bridge
echo 1 >/proc/sys/net/ipv4/conf/mv2/accept_local
echo 0 >/proc/sys/net/ipv4/conf/mv2/rp_filter
$IP addr add "$ATTACKER_IP/32" dev mv2
$IP link set mv2 up
$IP route add "$VM_NET_EXTRA0" dev mv2 metric 50
$IP neigh replace 10.0.1.1 lladdr "$(cat /sys/class/net/veth0/address)" dev mv2 nud permanent
$RDMA link add rxe2 type rxe netdev mv2
vm_wait_gids rxe2 $ATTACKER_IP || vm_die "rxe2 has no GID for $ATTACKER_IP"
vm_check "rxe2 is a third RDMA device with GID $GA" grep -q "0a00:0401" "$(vm_gid_dir rxe2)"/*

vm_mux_start muxA rxe0 || vm_finish
vm_mux_start muxB rxe1 || vm_finish
vm_qemu_client qb1 muxB 10.0.2.1 serve -c 1 -t 60
vm_wait_registered qb1
vm_qemu_client qa1 muxA 10.0.1.1 connect "$G21" --hold 6000
vm_wait_grep /tmp/qa1.out "connection 1 established" 20 ||
	vm_die "qa1 did not connect: $(cat /tmp/qa1.out)"

# The session's comm id on the wire, as an attacker who saw one MAD knows it.
wire=$(sed -n 's/.* TX  *REQ .*comm 0x00000001 -> wire \(0x[0-9a-f]*\) .*/\1/p' /tmp/muxA.trace |
	head -n 1)
vm_check "muxA's trace names the session's wire id ($wire)" [ -n "$wire" ]
wire=${wire#0x}
# DREQ: base version 1, class 7, class version 2, method Send; TID; attribute
# 0x0015; LocalCommID 0x5eed0001 (made up); RemoteCommID the victim's.
mad=$(printf '01070203%08x%016x0015000000000000%08x%s' 0 4660 $((0x5eed0001)) "$wire")
while [ ${#mad} -lt 512 ]; do mad="${mad}00"; done
printf '%s %s 3 24 %s\n' "$GA" "$G11" "$mad" | umad-probe forge rxe2 500 >/tmp/forge.out 2>&1
vm_check "rxe2 sent its 3 forged DREQs ($(tail -n 1 /tmp/forge.out))" grep -q '^forged 3 0 ' /tmp/forge.out

vm_client_ok qa1
vm_client_ok qb1
vm_check "qa1 never saw a DREQ (only the DREP to its own)" eval '! grep -q "<- DREQ" /tmp/qa1.out'
vm_has qa1 "connection 1 closed"
vm_has qb1 "<- DREQ"

vm_mux_stop muxA
vm_mux_stop muxB
vm_check "muxA dropped the 3 forged DREQs as spoofed (got $(vm_counter_row muxA 'rx dropped' spoofed))" \
	[ "$(vm_counter_row muxA 'rx dropped' spoofed)" -eq 3 ]
vm_check "muxA's trace shows them dropped as spoofed" \
	[ "$(grep -c 'RX! *DREQ .*dropped: spoofed$' /tmp/muxA.trace)" -eq 3 ]
vm_check "muxA delivered no DREQ from $GA" eval "! grep -q 'RX  *DREQ .* $GA -> ' /tmp/muxA.trace"

$RDMA link delete rxe2
$IP link delete mv2
vm_finish
