#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: the GID registration policy on the real kernel (README "GIDs").
# By default a client may register a GID that the port does not have (QEMU
# registers a guest's GID before libvirt adds the address); sending from it
# fails with EADDRNOTAVAIL, and once the address (so the GID) appears, the
# same registration works in both directions without a restart. With
# --require-port-gid the registration itself fails with EADDRNOTAVAIL and a
# GID the port has still works.
# vm-needs: rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client

NEW=10.0.1.9 # added to veth0 during the test
G17=$(vm_gid 10.0.1.7) G18=$(vm_gid 10.0.1.8) G19=$(vm_gid $NEW)

vm_check "rxe0 has no GID for $NEW yet" [ -z "$(vm_gid_index rxe0 $NEW)" ]
vm_mux_start muxB rxe1 || vm_finish

echo "--- default policy: REG of a missing GID is accepted"
vm_mux_start muxA rxe0 || vm_finish
# QEMU registers first and waits for its guest's peers.
vm_qemu_client q9 muxA "$NEW" serve -c 1 -t 40
vm_wait_registered q9
# Sending from a GID the port does not have fails, for either kind of client.
vm_pingpong p8 muxA 10.0.1.8 connect "$G21"
vm_client_fails p8
vm_has p8 "registered $G18"
vm_has p8 "sending REQ failed: Cannot assign requested address"
vm_qemu_client q7 muxA 10.0.1.7 connect "$G21"
vm_client_fails q7
vm_has q7 "registered $G17"
vm_has q7 "sending REQ failed: err_code -99"

# The address appears (libvirt's part): the GID shows up in rxe0's table.
$IP addr add "$NEW/32" dev veth0
$IP neigh replace "$NEW" lladdr "$(cat /sys/class/net/veth0/address)" dev veth1 nud permanent
vm_wait_gids rxe0 "$NEW"
echo "PASS: rxe0 GID index of $NEW: $(vm_gid_index rxe0 $NEW)"
# q9, registered before the GID existed, now takes a connection.
vm_pingpong b1 muxB 10.0.2.1 connect "$G19"
vm_client_ok b1
vm_client_ok q9
vm_has b1 "connection 1 established with $G19"
vm_has_re b1 "<- REP +from $G19  comm $ID remote 0x00000001\$"
vm_rx_only_from b1 "$G19"
vm_has_n q9 1 "$(vm_rx_line REQ "$G21")"
vm_has q9 "connection 0x00000001 established"
vm_mux_stop muxA
vm_check_counters muxA q9 p8 q7
vm_check "muxA refused 2 sends with no-port-gid" \
	[ "$(vm_counter_row muxA 'tx refused' no-port-gid)" -eq 2 ]
n=$(vm_counter_problems muxA | wc -l)
vm_check "muxA has no other drop or refusal rows (got $n rows)" [ "$n" -eq 1 ]
vm_check "muxA: REG ok 3 refused 0" \
	[ "$(vm_counter_stat muxA 'reg ok')/$(vm_counter_stat muxA 'reg refused')" = 3/0 ]
vm_check "muxA logged the REG of a GID the port lacks" \
	grep -q "registered GID $G18, which rxe0 port 1 does not have" /tmp/muxA.err
vm_check "muxA's trace shows the refused REQs" \
	[ "$(grep -c 'TX! *REQ .*dropped: no-port-gid' /tmp/muxA.trace)" -eq 2 ]

echo "--- --require-port-gid: REG of a missing GID is refused"
vm_mux_start muxA rxe0 --require-port-gid || vm_finish
vm_pingpong p8 muxA 10.0.1.8 connect "$G21"
vm_client_fails p8
vm_has p8 "cannot register $G18: Cannot assign requested address"
vm_qemu_client q7 muxA 10.0.1.7 connect "$G21"
vm_client_fails q7
vm_has q7 "REG $G17 failed: err_code -99"
vm_pingpong b2 muxB 10.0.2.2 serve -c 1 -t 40
vm_wait_registered b2
vm_pingpong a1 muxA 10.0.1.1 connect "$G22"
vm_client_ok a1
vm_client_ok b2
vm_has a1 "connection 1 established with $G22"
vm_has_n b2 1 "$(vm_rx_line REQ "$G11")"
vm_mux_stop muxA
vm_check "muxA: REG ok 1 refused 2" \
	[ "$(vm_counter_stat muxA 'reg ok')/$(vm_counter_stat muxA 'reg refused')" = 1/2 ]
vm_check_counters muxA a1
vm_check_no_problems muxA

vm_mux_stop muxB
vm_check_counters muxB b1 b2
vm_check_no_problems muxB

$IP neigh del "$NEW" dev veth1
$IP addr del "$NEW/32" dev veth0
vm_finish
