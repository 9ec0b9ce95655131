#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Shared guest setup for the VM scenarios (run once per boot by guest-init):
# loads soft-RoCE and umad (never ib_cm), builds the veth pair with its
# extra IPv4 addresses, routes and neighbours, creates rxe0 on veth0 and
# rxe1 on veth1, and waits until every IPv4-mapped GID is in the tables.
# The addresses are listed in guest-lib.sh.
set -eu
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. /vm/guest-lib.sh

# crc32_generic first: rxe allocates the crc32 shash.
for m in crc32_generic rdma_rxe ib_umad veth; do
	modprobe "$m"
done
[ -e /sys/class/infiniband_mad/abi_version ] ||
	vm_die "ib_umad is not loaded (no /sys/class/infiniband_mad/abi_version)"

# Both veth ends live in one netns and all addresses are local, so the
# receiving end must accept local sources. Set "default" before
# the veth pair exists so it inherits, and set the devices explicitly too.
conf() { echo "$2" >"/proc/sys/net/ipv4/conf/$1/$3"; }
for i in all default; do
	conf "$i" 1 accept_local
	conf "$i" 0 rp_filter
done

$IP link set lo up
$IP link add veth0 type veth peer name veth1
for i in veth0 veth1; do
	conf "$i" 1 accept_local
	conf "$i" 0 rp_filter
done
$IP addr add "$VM_IP0/24" dev veth0
$IP addr add "$VM_IP1/24" dev veth1
for a in $VM_EXTRA0; do $IP addr add "$a/32" dev veth0; done
for a in $VM_EXTRA1; do $IP addr add "$a/32" dev veth1; done
$IP link set veth0 up
$IP link set veth1 up

# rxe routes with oif = its netdev. A lookup bound to veth0 skips the local
# route (it is on veth1) and needs a main-table route out of veth0: the /24
# gives that for 10.0.0.0/24, and these give it for the extra /32s.
$IP route add "$VM_NET_EXTRA1" dev veth0
$IP route add "$VM_NET_EXTRA0" dev veth1

# Pre-seed the neighbours so the first MAD does not wait for ARP.
mac0=$(cat /sys/class/net/veth0/address)
mac1=$(cat /sys/class/net/veth1/address)
for a in $VM_IP1 $VM_EXTRA1; do
	$IP neigh replace "$a" lladdr "$mac1" dev veth0 nud permanent
done
for a in $VM_IP0 $VM_EXTRA0; do
	$IP neigh replace "$a" lladdr "$mac0" dev veth1 nud permanent
done

$RDMA link add rxe0 type rxe netdev veth0
$RDMA link add rxe1 type rxe netdev veth1

# shellcheck disable=SC2086 # word splitting of the address lists is wanted
{
	vm_wait_gids rxe0 $VM_IP0 $VM_EXTRA0
	vm_wait_gids rxe1 $VM_IP1 $VM_EXTRA1
}
$RDMA link show
echo "guest-setup: rxe0 GIDs: $(vm_gid_list rxe0)"
echo "guest-setup: rxe1 GIDs: $(vm_gid_list rxe1)"
