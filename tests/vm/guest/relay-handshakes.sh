#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: CM handshakes through two daemons on the real kernel. One
# daemon on rxe0 and one on rxe1, each with several pingpong clients that
# each own a real GID of that port. Concurrently: two full connections
# a1 -> b1, one a2 -> b2, a REJ (a0 -> b2 with the service b2 rejects), a
# SIDR query a4 -> b1, and a connection the other way, b3 -> a3. Every
# active client starts at comm id 1, so their ids collide in each daemon.
#
# It asserts that each MAD reaches exactly the client that owns the
# destination GID, as received from the sender's own GID (so the daemon
# chose that GID's gid_index), with the wire id the sender's daemon traced;
# that each reply carries the receiver's own comm id; that wire ids are
# distinct and differ from the clients' ids; and that both daemons' counter
# dumps agree with what the clients printed, with no drops or refusals.
# vm-needs: rdmacm-mux rdmacm-mux-pingpong
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-pingpong

REJECT=0x10600ff

vm_mux_start muxA rxe0 || vm_finish
vm_mux_start muxB rxe1 || vm_finish

# Passive sides first.
vm_pingpong b1 muxB 10.0.2.1 serve -c 3 -t 40
vm_pingpong b2 muxB 10.0.2.2 serve -c 2 --reject "$REJECT" -t 40
vm_pingpong a3 muxA 10.0.1.3 serve -c 1 -t 40
vm_wait_registered b1 b2 a3
# Then every active side at once.
vm_pingpong a1 muxA 10.0.1.1 connect "$G21" -c 2
vm_pingpong a2 muxA 10.0.1.2 connect "$G22"
vm_pingpong a0 muxA 10.0.0.1 connect "$G22" --service "$REJECT"
vm_pingpong a4 muxA 10.0.1.4 sidr "$G21"
vm_pingpong b3 muxB 10.0.2.3 connect "$G13"
for c in a1 a2 a0 a4 b3 b1 b2 a3; do vm_client_ok "$c"; done
vm_stop_both_muxes

echo "--- what each client saw"
# a1: two connections to b1; each REP names a1's own comm id.
vm_has_n a1 2 "established with $G21"
vm_has a1 "connection 1 closed"
vm_has a1 "connection 2 closed"
vm_has_re a1 "<- REP +from $G21  comm $ID remote 0x00000001\$"
vm_has_re a1 "<- REP +from $G21  comm $ID remote 0x00000002\$"
vm_has_re a1 "<- DREP +from $G21  comm $ID remote 0x00000002\$"
vm_rx_only_from a1 "$G21"
# a2: one connection to b2.
vm_has a2 "connection 1 established with $G22"
vm_has a2 "connection 1 closed"
vm_has_re a2 "<- REP +from $G22  comm $ID remote 0x00000001\$"
vm_rx_only_from a2 "$G22"
# a0: rejected by b2 (reason 8, invalid service id), for a0's own comm id.
vm_has a0 "connection 1 rejected, reason 8"
vm_has_re a0 "<- REJ +from $G22  comm $ID remote 0x00000001\$"
vm_rx_only_from a0 "$G22"
# a4: SIDR answered by b1, the RequestID mapped back to a4's own.
vm_has a4 "SIDR resolved: status 0, QPN 0x000300, Q_Key 0x01234567"
vm_has a4 "$(vm_rx_line SIDR_REP "$G21" 0x00000001)"
vm_rx_only_from a4 "$G21"
# b1: two REQs from a1's GID, one SIDR_REQ from a4's; each RTU names the
# comm id b1 chose in its REP (1 and 2).
vm_has_n b1 2 "$(vm_rx_line REQ "$G11")"
vm_has_n b1 1 "$(vm_rx_line SIDR_REQ "$G14")"
vm_has b1 "connection 0x00000001 established"
vm_has b1 "connection 0x00000002 established"
vm_rx_only_from b1 "$G11" "$G14"
# b2: the REQs of a2 and a0, from their own GIDs.
vm_has_n b2 1 "$(vm_rx_line REQ "$G12")"
vm_has_n b2 1 "$(vm_rx_line REQ "$G01")"
vm_has b2 "connection 0x00000001 established"
vm_rx_only_from b2 "$G12" "$G01"
# The other direction: b3 (rxe1) -> a3 (rxe0).
vm_has b3 "connection 1 established with $G13"
vm_has b3 "connection 1 closed"
vm_has_re b3 "<- REP +from $G13  comm $ID remote 0x00000001\$"
vm_rx_only_from b3 "$G13"
vm_has_n a3 1 "$(vm_rx_line REQ "$G23")"
vm_has a3 "connection 0x00000001 established"
vm_rx_only_from a3 "$G23"

echo "--- traces against the clients"
vm_check_both_traces
# a0, a1, a2 and a4 all used id 1 on muxA: four clients, four sessions.
n=$(awk '$2 == "TX" && ($3 == "REQ" || $3 == "SIDR_REQ") && $7 == "0x00000001" { print $5 }' \
	/tmp/muxA.trace | sort -u | wc -l)
vm_check "muxA carried comm id 1 for 4 different clients (got $n)" [ "$n" -eq 4 ]
# Each REQ left from its client's GID toward the GID it named.
for p in "$G11 $G21" "$G12 $G22" "$G01 $G22"; do
	vm_check "muxA traced TX REQ $p" \
		grep -qE "^\[rxe0:1\] TX +REQ .*  ${p% *} -> ${p#* }\$" /tmp/muxA.trace
done

echo "--- counters against the clients"
vm_check_counters muxA a0 a1 a2 a3 a4
vm_check_counters muxB b1 b2 b3
vm_check_no_problems muxA
vm_check_no_problems muxB
for a in REQ REP RTU REJ DREQ DREP SIDR_REQ SIDR_REP; do
	vm_check "$a: muxA tx = muxB rx" [ "$(vm_counter muxA $a tx)" -eq "$(vm_counter muxB $a rx)" ]
	vm_check "$a: muxB tx = muxA rx" [ "$(vm_counter muxB $a tx)" -eq "$(vm_counter muxA $a rx)" ]
done
vm_check "muxA: REG ok 5" [ "$(vm_counter_stat muxA 'reg ok')" = 5 ]
vm_check "muxB: REG ok 3" [ "$(vm_counter_stat muxB 'reg ok')" = 3 ]
if vm_no_retries a0 a1 a2 a3 a4 b1 b2 b3; then
	# ATTR tx rx: REQ a1 x2, a2, a0 | REP a3 | RTU, DREQ a1 x2, a2 | DREP a3;
	# received: b3's REQ, RTU, DREQ; REP, DREP for a1 x2, a2; b2's REJ.
	for x in "REQ 4 1" "REP 1 3" "RTU 3 1" "REJ 0 1" "DREQ 3 1" "DREP 1 3" \
		"SIDR_REQ 1 0" "SIDR_REP 0 1"; do
		# shellcheck disable=SC2086 # split into ATTR TX RX
		set -- $x
		got="$(vm_counter muxA "$1" tx)/$(vm_counter muxA "$1" rx)"
		vm_check "muxA $1 tx/rx: $2/$3 (got $got)" [ "$got" = "$2/$3" ]
	done
else
	echo "NOTE: a client repeated a MAD; exact totals skipped (the sums above still hold)"
fi
vm_finish
