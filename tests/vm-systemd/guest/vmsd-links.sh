#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vmsd-links.service (tests/vm-systemd, mode boot-order): three soft-RoCE
# devices, rxe0 on veth0 (for rdmacm-mux@rxe0-1, which the test enables),
# rxe1 on veth1 and rxe2 on veth2 (for ib_cm), and veth3 spare (the last
# boot hot-plugs rxe3 on it). With vmsd.links=late on the kernel command
# line it first waits (up to 20 s) until the daemon says it is waiting for
# rxe0, so that the boot takes the daemon's --wait-for-device path; with
# vmsd.links=early it makes them at once, before or after the daemon
# starts. Each step is logged to the journal.
set -u
IP=/usr/sbin/ip
unit=rdmacm-mux@rxe0-1.service

if grep -q 'vmsd\.links=late' /proc/cmdline; then
	for _ in $(seq 200); do
		[[ $(systemctl show -P StatusText $unit) == "waiting for rxe0 port 1" ]] && break
		sleep 0.1
	done
	echo "vmsd-links: $unit says: $(systemctl show -P StatusText $unit)"
fi
for m in crc32_generic rdma_rxe veth; do
	modprobe "$m" || echo "vmsd-links: modprobe $m failed"
done
$IP link add veth0 type veth peer name veth1
$IP link add veth2 type veth peer name veth3
for i in veth0 veth1 veth2 veth3; do
	$IP link set "$i" up
done
for d in 0 1 2; do
	rdma link add rxe$d type rxe netdev veth$d
done
echo "vmsd-links: made rxe0 rxe1 rxe2"
