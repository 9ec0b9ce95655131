#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds the base initramfs of the VM tests (tests/vm): a merged-/usr
# skeleton with busybox (static), iproute2's ip and rdma with their
# libraries, rping with libibverbs' rxe provider (vm_rdma_app_files), and
# the kernel modules the scenarios load, with their
# dependencies and a modules.dep. It holds nothing from this project, so
# vm-run.sh caches it per kernel; the project's files go in a second cpio
# that is concatenated after it.
#
# usage: vm-mkbase.sh KROOT KVER OUT.cpio.gz
#   KROOT  an unpacked linux-image .deb (KROOT/lib/modules/KVER)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=vm-host-lib.sh
. "$here/vm-host-lib.sh"

# Modules to put in the image; their dependencies are added. ib_cm and
# rdma_ucm (rdma_cm, the host's own CM user) are only there so that a
# scenario can load them on purpose: the setup never does.
MODULES=(crc32_generic rdma_rxe ib_umad ib_uverbs veth macvlan ib_cm rdma_ucm)
# Host programs to put in the image (with their libraries).
PROGRAMS=(/usr/sbin/ip /usr/bin/rdma)

(($# == 3)) || {
	echo "usage: $0 KROOT KVER OUT.cpio.gz" >&2
	exit 2
}
kroot=$1 kver=$2 out=$3
kmods=$kroot/lib/modules/$kver
[[ -d $kmods ]] || {
	echo "vm-mkbase: no $kmods" >&2
	exit 1
}

root=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-vmbase.XXXXXX")
trap 'rm -rf "$root"' EXIT

mkdir -p "$root"/usr/{bin,sbin,lib,lib64} "$root"/{dev,proc,sys,tmp,run,root,etc}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
mkdir -p "$root/var"
ln -s ../run "$root/var/run"

bb=$(command -v busybox)
if ldd "$bb" >/dev/null 2>&1; then
	echo "vm-mkbase: $bb is not static; install busybox-static" >&2
	exit 1
fi
cp "$bb" "$root/usr/bin/busybox"
# The kernel's request_module() runs /sbin/modprobe.
ln -s ../bin/busybox "$root/usr/sbin/modprobe"

for p in "${PROGRAMS[@]}"; do
	vm_put_elf "$root" "$p"
done
# rping and the rxe provider for libibverbs (ELFs, with their libraries),
# and the provider's driver file.
while read -r f; do
	case $f in
	*.driver) vm_copy_file "$root" "$f" ;;
	*) vm_put_elf "$root" "$f" ;;
	esac
done < <(vm_rdma_app_files)

# Modules, with their dependencies (modinfo depends, walked breadth-first).
declare -A seen=()
queue=("${MODULES[@]}")
while ((${#queue[@]})); do
	m=${queue[0]}
	queue=("${queue[@]:1}")
	m=${m//-/_}
	[[ -n ${seen[$m]:-} ]] && continue
	seen[$m]=1
	f=$(modinfo -b "$kroot" -k "$kver" -F filename "$m") || {
		echo "vm-mkbase: module $m not found in $kver" >&2
		exit 1
	}
	[[ $f == "(builtin)" ]] && continue
	rel=${f#"$kmods"/}
	mkdir -p "$root/usr/lib/modules/$kver/$(dirname "$rel")"
	cp "$f" "$root/usr/lib/modules/$kver/$rel"
	deps=$(modinfo -b "$kroot" -k "$kver" -F depends "$m")
	IFS=, read -r -a more <<<"$deps"
	queue+=("${more[@]}")
done
for f in modules.builtin modules.builtin.modinfo modules.order; do
	[[ -f $kmods/$f ]] && cp "$kmods/$f" "$root/usr/lib/modules/$kver/"
done
depmod -b "$root/usr" "$kver"

vm_cpio "$root" "$out"
echo "vm-mkbase: $out: ${#seen[@]} modules, $(du -k "$out" | cut -f1) KiB"
