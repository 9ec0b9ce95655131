#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: raw QEMU-protocol clients (rdmacm-mux-qemu-client: 360-byte
# frames, one read for each RESP, its OWN GID in addr.gid, a wrong host
# gid_index) complete CM exchanges through two daemons on the real kernel,
# with pingpong clients and with each other, in both directions:
#   qa1 (qemu, rxe0) connect -> pb1 (pingpong, rxe1) serve
#   qa3 (qemu, rxe0) sidr 10.0.2.1 -> pb1       (destination from cma_hdr)
#   pa2 (pingpong, rxe0) connect -> qb2 (qemu, rxe1) serve
#   qa4 (qemu, rxe0) connect -> qb2             (QEMU on both ends)
#   pb3 (pingpong, rxe1) connect -> qa0 (qemu, rxe0) serve
# It asserts what relay-handshakes does (right client, right GID, right
# ids, counters), that QEMU's destination workaround is logged once per
# QEMU client, and that no QEMU client saw a frame out of place (the client
# fails on any).
# vm-needs: rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client


vm_mux_start muxA rxe0 || vm_finish
vm_mux_start muxB rxe1 || vm_finish

# --gid-index 0 is the port's fe80 GID: a daemon that used the client's
# index would send from fe80::..., and the receivers would print that.
vm_pingpong pb1 muxB 10.0.2.1 serve -c 2 -t 40
vm_qemu_client qb2 muxB 10.0.2.2 --gid-index 0 serve -c 2 -t 40
vm_qemu_client qa0 muxA 10.0.0.1 --gid-index 0 serve -c 1 -t 40
vm_wait_registered pb1 qb2 qa0
vm_qemu_client qa1 muxA 10.0.1.1 --gid-index 0 connect "$G21"
vm_qemu_client qa3 muxA 10.0.1.3 --gid-index 0 sidr 10.0.2.1
vm_pingpong pa2 muxA 10.0.1.2 connect "$G22"
vm_qemu_client qa4 muxA 10.0.1.4 --gid-index 0 connect "$G22"
vm_pingpong pb3 muxB 10.0.2.3 connect "$G01"
for c in qa1 qa3 pa2 qa4 pb3 pb1 qb2 qa0; do vm_client_ok "$c"; done
vm_stop_both_muxes

echo "--- what each client saw"
# QEMU -> pingpong: the REP names qa1's own comm id; pb1 sees qa1's GID.
vm_has qa1 "connection 1 established with $G21"
vm_has qa1 "connection 1 closed"
vm_has_re qa1 "<- REP +from $G21  comm $ID remote 0x00000001\$"
vm_has_re qa1 "<- DREP +from $G21  comm $ID remote 0x00000001\$"
vm_has qa1 "unregistered $G11"
vm_rx_only_from qa1 "$G21"
vm_has qa3 "SIDR resolved: status 0, QPN 0x000300, Q_Key 0x01234567"
vm_has qa3 "$(vm_rx_line SIDR_REP "$G21" 0x00000001)"
vm_rx_only_from qa3 "$G21"
vm_has_n pb1 1 "$(vm_rx_line REQ "$G11")"
vm_has_n pb1 1 "$(vm_rx_line SIDR_REQ "$G13")"
vm_has pb1 "connection 0x00000001 established"
vm_rx_only_from pb1 "$G11" "$G13"
# pingpong and QEMU -> QEMU: qb2's replies name no destination at all.
vm_has pa2 "connection 1 established with $G22"
vm_has pa2 "connection 1 closed"
vm_has_re pa2 "<- REP +from $G22  comm $ID remote 0x00000001\$"
vm_rx_only_from pa2 "$G22"
vm_has qa4 "connection 1 established with $G22"
vm_has qa4 "connection 1 closed"
vm_has_re qa4 "<- REP +from $G22  comm $ID remote 0x00000001\$"
vm_rx_only_from qa4 "$G22"
vm_has_n qb2 1 "$(vm_rx_line REQ "$G12")"
vm_has_n qb2 1 "$(vm_rx_line REQ "$G14")"
vm_has qb2 "connection 0x00000001 established"
vm_has qb2 "connection 0x00000002 established"
vm_rx_only_from qb2 "$G12" "$G14"
# pingpong on rxe1 -> QEMU on rxe0.
vm_has pb3 "connection 1 established with $G01"
vm_has pb3 "connection 1 closed"
vm_has_re pb3 "<- REP +from $G01  comm $ID remote 0x00000001\$"
vm_rx_only_from pb3 "$G01"
vm_has_n qa0 1 "$(vm_rx_line REQ "$G23")"
vm_has qa0 "connection 0x00000001 established"
vm_rx_only_from qa0 "$G23"

echo "--- traces, logs and counters"
vm_check_both_traces
# The workaround for QEMU's own GID in addr.gid: logged once per client.
n=$(grep -c 'puts its own GID in addr.gid' /tmp/muxA.err)
vm_check "muxA logged the QEMU workaround for its 4 QEMU clients (got $n)" [ "$n" -eq 4 ]
n=$(grep -c 'puts its own GID in addr.gid' /tmp/muxB.err)
vm_check "muxB logged the QEMU workaround for its 1 QEMU client (got $n)" [ "$n" -eq 1 ]
vm_check_counters muxA qa0 qa1 qa3 qa4 pa2
vm_check_counters muxB pb1 qb2 pb3
vm_check_no_problems muxA
vm_check_no_problems muxB
vm_check "muxA: REG ok 5, UNREG ok 4" \
	[ "$(vm_counter_stat muxA 'reg ok')/$(vm_counter_stat muxA 'unreg ok')" = 5/4 ]
vm_check "muxB: REG ok 3, UNREG ok 1" \
	[ "$(vm_counter_stat muxB 'reg ok')/$(vm_counter_stat muxB 'unreg ok')" = 3/1 ]
vm_finish
