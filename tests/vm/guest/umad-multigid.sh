#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: CM MADs between several GIDs per port, through the real kernel.
# Each extra IPv4 address is a GID; a REQ sent from one of rxe0's GIDs to one
# of rxe1's must arrive with addr.gid_index = that GID's index on rxe1 and
# addr.gid = the sender's GID, and the REP back likewise. This is the network
# the daemon scenarios use for several clients per daemon.
# vm-needs: umad-probe
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
vm_need umad-probe

echo "rxe0: $(vm_gid_list rxe0)"
echo "rxe1: $(vm_gid_list rxe1)"

xfer() { # SDEV SADDR DDEV DADDR
	vm_check "$2 ($1) -> $4 ($3)" \
		umad-probe xfer "$1" "$(vm_gid "$2")" "$3" "$(vm_gid "$4")"
}

xfer rxe0 "$VM_IP0" rxe1 "$VM_IP1"
# shellcheck disable=SC2086 # one argument per address
set -- $VM_EXTRA1
for a in $VM_EXTRA0; do
	xfer rxe0 "$a" rxe1 "$1"
	shift
done
# Crossed pairs and the other direction, so that a wrong index cannot pass.
xfer rxe0 10.0.1.2 rxe1 10.0.2.4
xfer rxe0 "$VM_IP0" rxe1 10.0.2.3
xfer rxe1 10.0.2.3 rxe0 10.0.1.4
xfer rxe1 10.0.2.1 rxe0 "$VM_IP0"

# Distinct GIDs have distinct indexes.
idx=$(for a in $VM_IP1 $VM_EXTRA1; do vm_gid_index rxe1 "$a"; done | sort -u | wc -l)
vm_check "rxe1 has 5 distinct IPv4 GID indexes (got $idx)" [ "$idx" -eq 5 ]

# On-link but nobody answers ARP: the kernel fails the send (ETIMEDOUT).
vm_check "send to an unreachable GID fails" \
	umad-probe send-fail rxe0 "$(vm_gid 10.0.1.1)" "$(vm_gid 10.0.0.9)"
vm_finish
