#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: CM agent registration on the real kernel. One Send-mask CM agent
# per port; a second is refused with EINVAL, in the same process and from
# another process; the class is free again once the owner is gone.
# vm-needs: umad-probe
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
vm_need umad-probe

vm_check "ib_cm is not loaded" eval '! vm_module_loaded ib_cm'
vm_check "register/refuse/re-register on rxe0" umad-probe register rxe0 1
vm_check "register/refuse/re-register on rxe1" umad-probe register rxe1 1

# Another process holds rxe0's CM class until its stdin closes.
mkfifo /tmp/hold.in
umad-probe hold rxe0 1 </tmp/hold.in >/tmp/hold.out 2>&1 &
holder=$!
exec 3>/tmp/hold.in
if vm_wait_grep /tmp/hold.out holding 10; then
	vm_check_rxe0_held "another process"
else
	vm_fail "holder did not register: $(cat /tmp/hold.out)"
fi
exec 3>&-
wait "$holder"
vm_check "rxe0 free again after the holder exits" umad-probe register rxe0 1
rm -f /tmp/hold.in /tmp/hold.out
vm_finish
