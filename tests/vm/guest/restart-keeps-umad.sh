#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: the daemon restarts under a service manager's fd store
# (fd-store-keeper stands in for systemd, which the guest lacks). Its umad
# fd is kept there, so its CM agent stays registered while no daemon runs,
# and the kernel queues the MADs that come for it: a REQ that the peer host
# sends in that gap reaches the client after the restart (a QEMU-protocol
# client, which never reconnects), and the new daemon registers nothing.
# A daemon that does not keep its umad fd fails this: at its exit the
# kernel unregisters the agent, drops the REQ for want of one, and the
# client never sees it.
# vm-needs: rdmacm-mux rdmacm-mux-qemu-client umad-probe fd-store-keeper
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
# -u but not -e: every check runs and reports, vm_finish gives the verdict.
set -u
vm_need rdmacm-mux rdmacm-mux-qemu-client umad-probe fd-store-keeper

echo "$VM_SOCK_PREFIX-rxe0-1" >/tmp/muxA.sock
fd-store-keeper /tmp/keeper.notify /tmp/muxA.trace /tmp/muxA.err \
	rdmacm-mux -d rxe0 -p 1 -s "$VM_SOCK_PREFIX" --trace >/tmp/keeper.out 2>&1 &
keeper=$!
echo "$keeper" >/tmp/keeper.pid
vm_check "the daemon under the keeper is ready" vm_wait_grep /tmp/keeper.out '^ready 1$' 20
vm_check "its umad fd is in the store" vm_wait_grep /tmp/keeper.out '^stored umad\.1\.0\.rxe0$' 5
vm_qemu_client q1 muxA 10.0.1.1 serve -c 2 -t 60
vm_wait_registered q1
# Before the gap, the same REQ reaches q1 (the baseline the gap is held to).
vm_check "the peer's REQ before the gap went out" umad-probe send rxe1 "$G21" "$G11" 0x4710
vm_check "q1 got the REQ the peer sent before the gap" \
	vm_wait_grep /tmp/q1.out "$(vm_rx_line REQ "$G21" 0x00004710)" 20

# The gap: a planned hand-off (SIGTERM); the client's socket, its state
# and the umad fd stay in the store, and no daemon runs.
kill -USR1 "$keeper"
vm_check "the daemon handed off and exited 0" vm_wait_grep /tmp/keeper.out '^exited 0$' 20
vm_check "the umad fd stayed in the store" sh -c '! grep -q "^removed umad" /tmp/keeper.out'
vm_check "the peer's REQ went out while no daemon ran" \
	umad-probe send rxe1 "$G21" "$G11" 0x4711
# Start again, with what the store holds.
kill -HUP "$keeper"
vm_check "the daemon is back" vm_wait_grep /tmp/keeper.out '^ready 2$' 20
vm_check "q1 got the REQ the peer sent in the gap" \
	vm_wait_grep /tmp/q1.out "$(vm_rx_line REQ "$G21" 0x00004711)" 20
vm_check "the new daemon took the CM agent over, registering nothing" \
	grep -q 'took over the CM agent 0 on rxe0 port 1' /tmp/muxA.err
vm_check "q1 kept its connection (no protocol error)" \
	sh -c '! grep -q "PROTOCOL ERROR" /tmp/q1.out'

kill -TERM "$keeper"
wait "$keeper"
echo "--- keeper"
cat /tmp/keeper.out
echo "--- daemon muxA: log and counters"
cat /tmp/muxA.err
echo "--- trace of muxA"
cat /tmp/muxA.trace
echo "--- q1"
cat /tmp/q1.out
vm_finish
