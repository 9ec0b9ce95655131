#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: rdmacm-mux starts on rxe0 port 1, creates its socket, owns the CM
# class there (nobody else can register), leaves rxe1 alone, stops cleanly on
# SIGTERM (exit 0), and frees the class when it is gone.
# vm-needs: rdmacm-mux umad-probe
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
vm_need rdmacm-mux umad-probe

sock=$VM_SOCK_PREFIX-rxe0-1
rdmacm-mux -d rxe0 -p 1 -s "$VM_SOCK_PREFIX" >/tmp/mux.out 2>&1 &
mux=$!
if vm_wait_path "$sock" 20; then
	echo "PASS: socket $sock appeared"
	vm_check "the socket is a UNIX socket" [ -S "$sock" ]
	vm_check_rxe0_held "the daemon"
else
	vm_fail "no socket $sock after 20 s"
fi
kill -TERM "$mux" 2>/dev/null
wait "$mux"
rc=$?
echo "--- daemon output"
cat /tmp/mux.out
vm_check "the daemon exits 0 on SIGTERM (got $rc)" [ "$rc" -eq 0 ]
vm_check "rxe0 is free after the daemon exits" umad-probe register rxe0 1
vm_finish
