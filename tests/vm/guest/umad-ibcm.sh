#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Scenario: with the kernel's own CM (ib_cm) loaded, nobody else can take the
# CM class with a Send mask; after ib_cm is unloaded, the class is free again.
# It leaves ib_cm unloaded, so later scenarios in the same boot are unaffected.
# vm-needs: umad-probe
# shellcheck source-path=SCRIPTDIR source=../guest-lib.sh
. /vm/guest-lib.sh
vm_need umad-probe

vm_check "modprobe ib_cm" modprobe ib_cm
vm_check "ib_cm is loaded" vm_module_loaded ib_cm
vm_check "rxe0 owned by ib_cm: EINVAL" umad-probe expect-owned rxe0 1
vm_check "rxe1 owned by ib_cm: EINVAL" umad-probe expect-owned rxe1 1
vm_check "rmmod ib_cm" rmmod ib_cm
vm_check "rxe0 free after rmmod ib_cm" umad-probe register rxe0 1
vm_finish
