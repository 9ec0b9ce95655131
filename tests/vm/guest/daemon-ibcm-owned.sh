#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: rdmacm-mux refuses to start when ib_cm owns the CM class: it must
# exit with status 3 (EXIT_CM_OWNED, daemon/core/main.c) and say in one line
# that ib_cm holds it and what to do. It leaves ib_cm unloaded.
# vm-needs: rdmacm-mux
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
vm_need rdmacm-mux

vm_check "modprobe ib_cm" modprobe ib_cm
timeout 20 rdmacm-mux -d rxe0 -p 1 -s "$VM_SOCK_PREFIX" >/tmp/mux.out 2>&1
rc=$?
cat /tmp/mux.out
vm_check "rdmacm-mux exits 3 when ib_cm is loaded (got $rc)" [ "$rc" -eq 3 ]
vm_check "one line names ib_cm as the owner, and the remedy" \
	grep -q 'already owned on rxe0 port 1 by ib_cm, .*start rdmacm-mux before ib_cm loads.*unload ib_cm and its users' /tmp/mux.out
vm_check "rmmod ib_cm" rmmod ib_cm
vm_finish
