#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: a MAD to an unreachable GID (on-link, nobody answers ARP) makes
# the kernel fail the send; the daemon reports the error to that client
# (pingpong: "sending REQ failed", exit 1; a QEMU client: a non-zero
# err_code in the RESP), counts it as "tx refused, send-failed", and keeps
# serving: a handshake after it works. The writes that waited were the
# sender processes': the daemon stays one thread.
# vm-needs: rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-pingpong rdmacm-mux-qemu-client

G09=$(vm_gid 10.0.0.9)

vm_mux_start muxA rxe0 || vm_finish
vm_mux_start muxB rxe1 || vm_finish
vm_pingpong b1 muxB 10.0.2.1 serve -c 1 -t 40
vm_wait_registered b1

vm_pingpong a2 muxA 10.0.1.2 connect "$G09"
vm_client_fails a2
vm_has a2 "sending REQ failed: "
vm_qemu_client q3 muxA 10.0.1.3 connect "$G09"
vm_client_fails q3
vm_has q3 "sending REQ failed: err_code -"

# The real kernel's failed writes were made by sender processes: the
# daemon is one thread with its eight senders beside it, and none died.
pid=$(cat /tmp/muxA.pid)
vm_check "muxA is one thread" [ "$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")" -eq 1 ]
kids=$(grep -l "^PPid:[[:space:]]*$pid\$" /proc/[0-9]*/status 2>/dev/null | wc -l)
vm_check "muxA has its 8 sender processes (got $kids)" [ "$kids" -eq 8 ]
vm_check "no sender process of muxA failed" sh -c '! grep -q "sender process" /tmp/muxA.err'

# The daemon is still there and serving.
vm_pingpong a1 muxA 10.0.1.1 connect "$G21"
vm_client_ok a1
vm_client_ok b1
vm_has a1 "connection 1 established with $G21"
vm_has a1 "connection 1 closed"
vm_has_n b1 1 "$(vm_rx_line REQ "$G11")"
vm_rx_only_from b1 "$G11"

vm_mux_stop muxA
vm_mux_stop muxB
vm_check "muxA counted 2 failed sends" \
	[ "$(vm_counter_row muxA 'tx refused' send-failed)" -eq 2 ]
n=$(vm_counter_problems muxA | wc -l)
vm_check "muxA has no other drop or refusal rows (got $n rows)" [ "$n" -eq 1 ]
echo "--- trace of muxA"
cat /tmp/muxA.trace
vm_check "muxA's trace shows both failed REQs" \
	[ "$(grep -c 'TX! *REQ .*  dropped: send-failed$' /tmp/muxA.trace)" -eq 2 ]
vm_check "muxA's trace names $G09 for pingpong's failed REQ" \
	grep -q "TX! *REQ .*  $(vm_gid 10.0.1.2) -> $G09  dropped: send-failed\$" /tmp/muxA.trace
vm_check "muxA logged the failed send" grep -q 'send of REQ for client .* failed' /tmp/muxA.err
vm_check_counters muxA a1 a2 q3
vm_check_counters muxB b1
vm_check_no_problems muxB
vm_check_trace_delivery /tmp/muxA.trace /tmp/gidmap
vm_finish
