#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: a third host forges DREQs. rxe2 sits on a macvlan of veth1, so
# its packets reach rxe0 the way rxe1's do, from its own address 10.0.4.1.
# Two connections through muxA (rxe0) and muxB (rxe1) stay established for
# a few seconds: qa1 (QEMU client, muxA) connected to qb1 (muxB), the active
# side on rxe0; and qb2 (QEMU client, muxB) connected to pa2 (pingpong
# server, muxA), the passive side on rxe0. rxe2 sends three DREQs at each,
# naming the session's wire comm id on rxe0 (read from muxA's trace, as an
# attacker who saw one of its MADs would know it) with a made-up
# LocalCommID. The kernel delivers them to muxA, which must drop them as
# ib_cm would (neither the sender's GID nor its comm id is the peer's),
# count them under "spoofed", answer nothing and show nothing to its
# clients; both connections then close normally with their real peers.
# vm-needs: rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client umad-probe
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client umad-probe

ATTACKER_IP=10.0.4.1
GA=$(vm_gid $ATTACKER_IP)

# The third host: a macvlan on veth1 (so its frames arrive on veth0, at
# rxe0), with its own address, a route out of it and rxe0's neighbours.
# rxe0 gets a route and a neighbour back to it, so that anything muxA
# answered would reach rxe2 (and show in forge's output).
$IP link add mv2 link veth1 type macvlan mode bridge
echo 1 >/proc/sys/net/ipv4/conf/mv2/accept_local
echo 0 >/proc/sys/net/ipv4/conf/mv2/rp_filter
$IP addr add "$ATTACKER_IP/32" dev mv2
$IP link set mv2 up
$IP route add "$VM_NET_EXTRA0" dev mv2 metric 50
for ip in 10.0.1.1 10.0.1.2; do
	$IP neigh replace $ip lladdr "$(cat /sys/class/net/veth0/address)" dev mv2 nud permanent
done
$IP route add "$ATTACKER_IP/32" dev veth0
$IP neigh replace $ATTACKER_IP lladdr "$(cat /sys/class/net/mv2/address)" dev veth0 nud permanent
$RDMA link add rxe2 type rxe netdev mv2
vm_wait_gids rxe2 $ATTACKER_IP || vm_die "rxe2 has no GID for $ATTACKER_IP"
vm_check "rxe2 is a third RDMA device with GID $GA" grep -q "0a00:0401" "$(vm_gid_dir rxe2)"/*

vm_mux_start muxA rxe0 || vm_finish
vm_mux_start muxB rxe1 || vm_finish
vm_qemu_client qb1 muxB 10.0.2.1 serve -c 1 -t 60
vm_pingpong pa2 muxA 10.0.1.2 serve -c 1 -t 60
vm_wait_registered qb1 pa2
# --hold: each active side keeps its connection established until the
# forging below is done and SIGUSR1 ends the hold (the 10 min are only a
# bound for a test that died).
vm_qemu_client qa1 muxA 10.0.1.1 connect "$G21" --hold 600000
vm_qemu_client qb2 muxB 10.0.2.2 connect "$G12" --hold 600000
vm_wait_grep /tmp/qa1.out "connection 1 established" 20 ||
	vm_die "qa1 did not connect: $(cat /tmp/qa1.out)"
vm_wait_grep /tmp/pa2.out "connection 0x00000001 established" 20 ||
	vm_die "pa2 did not accept: $(cat /tmp/pa2.out)"

# The sessions' comm ids on rxe0's wire: qa1's REQ and pa2's REP, both
# client comm id 1, each mapped to a wire id of its own by muxA.
wire_of() {
	sed -n "s/.* TX  *$1 .*comm 0x00000001 -> wire \(0x[0-9a-f]*\) .*/\1/p" /tmp/muxA.trace |
		head -n 1
}
wire_a=$(wire_of REQ)
wire_p=$(wire_of REP)
vm_check "muxA's trace names qa1's wire id ($wire_a)" [ -n "$wire_a" ]
vm_check "muxA's trace names pa2's wire id ($wire_p)" [ -n "$wire_p" ]

# forge_dreq REMOTE_COMM_ID_HEX: a DREQ (base version 1, class 7, class
# version 2, method Send; TID 0x1234; attribute 0x0015) with LocalCommID
# 0x5eed0001 (made up; forge counts it up per copy) and the given
# RemoteCommID, padded to the 256-byte MAD.
forge_dreq() {
	m=$(printf '01070203%08x%016x0015000000000000%08x%s' 0 4660 $((0x5eed0001)) "${1#0x}")
	while [ ${#m} -lt 512 ]; do m="${m}00"; done
	echo "$m"
}
{
	printf '%s %s 3 24 %s\n' "$GA" "$G11" "$(forge_dreq "$wire_a")"
	printf '%s %s 3 24 %s\n' "$GA" "$G12" "$(forge_dreq "$wire_p")"
} | umad-probe forge rxe2 500 >/tmp/forge.out 2>&1
# "forged SENT FAILED RECEIVED": the kernel sent all six, and nobody
# answered the attacker (a DREP from a victim would show up here).
vm_check "rxe2 sent 6 forged DREQs and got no answer ($(tail -n 1 /tmp/forge.out))" \
	grep -q '^forged 6 0 0$' /tmp/forge.out
# Forged while both were still established; now they may close.
vm_check "both connections were still up when the forging ended" \
	eval '! grep -q -- "-> DREQ" /tmp/qa1.out /tmp/qb2.out'
kill -USR1 "$(cat /tmp/qa1.pid)" "$(cat /tmp/qb2.pid)"

vm_client_ok qa1
vm_client_ok qb1
vm_client_ok pa2
vm_client_ok qb2
# The QEMU client fails with a PROTOCOL ERROR on an inbound MAD it does not
# expect, so a forged DREQ that reached qa1 shows as that, not as "<- DREQ".
vm_check "qa1 saw no DREQ and no stray MAD" \
	eval '! grep -q -e "<- DREQ" -e "PROTOCOL ERROR" /tmp/qa1.out'
vm_has qa1 "connection 1 closed"
vm_rx_only_from qa1 "$G21"
vm_has_re qb1 "<- DREQ +from $G11 "
vm_rx_only_from pa2 "$G22"
vm_has_n pa2 1 "<- DREQ"
vm_has_re pa2 "<- DREQ +from $G22 "
vm_has qb2 "connection 1 closed"

vm_mux_stop muxA
vm_mux_stop muxB
vm_check "muxA dropped the 6 forged DREQs as spoofed (got $(vm_counter_row muxA 'rx dropped' spoofed))" \
	[ "$(vm_counter_row muxA 'rx dropped' spoofed)" -eq 6 ]
vm_check "muxA's trace shows them dropped as spoofed" \
	[ "$(grep -c 'RX! *DREQ .*dropped: spoofed$' /tmp/muxA.trace)" -eq 6 ]
vm_check "muxA delivered no DREQ from $GA" eval "! grep -q 'RX  *DREQ .* $GA -> ' /tmp/muxA.trace"
vm_check "muxA sent nothing to $GA" eval "! grep -q 'TX.* -> $GA\$' /tmp/muxA.trace"
vm_check_counters muxA qa1 pa2
vm_check_counters muxB qb1 qb2

$RDMA link delete rxe2
$IP route del "$ATTACKER_IP/32" dev veth0
$IP neigh del $ATTACKER_IP dev veth0
$IP link delete mv2
vm_finish
