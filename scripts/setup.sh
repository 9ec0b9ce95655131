#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Installs the Debian 12 packages that rdmacm-mux needs to build, test, run
# the demo and the benchmark. Idempotent: packages already present are left
# alone, and apt is not touched at all when nothing is missing.
set -euo pipefail

packages=(
	# build
	meson ninja-build pkg-config gcc clang libc6-dev
	libibumad-dev libglib2.0-dev libsystemd-dev
	# fuzzers and sanitizers (libFuzzer and the ASan/UBSan runtimes)
	libclang-rt-14-dev
	# tests: socket activation, unit linting (rdma-core: its units, to check
	# that ours order before its module loading without a cycle), leak checks
	systemd rdma-core valgrind
	# tests: JSON of the control socket (test-only), --trace-pcap decoding
	libjson-glib-dev tshark
	# man pages (man/*.scd)
	scdoc
	# benchmark plot (bench/, --plot)
	gnuplot-nox
	# real-kernel VM tests (tests/vm): qemu under TCG and the guest tools;
	# rping (rdmacm-utils) and libibverbs' rxe provider (ibverbs-providers)
	# are the host's own rdma_cm application next to the daemon
	qemu-system-x86 busybox-static cpio kmod iproute2 rdmacm-utils ibverbs-providers
	# the bookworm rootfs of the real QEMU pvrdma test (tests/qemu) and of the
	# systemd VM test (tests/vm-systemd), and the kernel's xz payload
	mmdebstrap xz-utils
	# tests/qemu: the tools that build vmw_pvrdma.ko from Debian's linux-source
	# against unpacked headers
	make binutils libelf1 libssl3
)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	[[ $status == ii* ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	echo "setup: all ${#packages[@]} packages present"
	exit 0
fi

if ((EUID != 0)); then
	echo "setup: missing packages: ${missing[*]}" >&2
	echo "setup: run this script as root to install them" >&2
	exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
