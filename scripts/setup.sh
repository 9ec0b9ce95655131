#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Installs the Debian 12 packages that rdmacm-mux needs to build, test, run
# the demo and the benchmark, and to build its own Debian packages. Idempotent: packages already present are left
# alone, and apt is not touched at all when nothing is missing.
set -euo pipefail

packages=(
	# build
	meson ninja-build pkg-config gcc clang libc6-dev
	libibumad-dev libglib2.0-dev libsystemd-dev
	# fuzzers and sanitizers (libFuzzer and the ASan/UBSan runtimes), and
	# the fuzzers' coverage report (llvm-profdata, llvm-cov)
	libclang-rt-14-dev llvm-14
	# tests: socket activation, unit linting (rdma-core: its units, to check
	# that ours order before its module loading without a cycle), leak checks
	systemd rdma-core valgrind
	# tests: the AppArmor snippet of examples/libvirt (apparmor_parser -Q)
	apparmor
	# tests: JSON of the control socket (test-only), --trace-pcap decoding
	libjson-glib-dev tshark
	# tests: `promtool check metrics` on rdmacm-muxctl metrics' page. Debian
	# ships promtool only in the server's package (about 100 MB installed;
	# the server itself is stopped again below)
	prometheus
	# scripts/test.sh --stress: the competing CPU load
	stress-ng
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
	# tests/qemu and contrib/qemu/build-qemu.sh: Debian's QEMU 7.2 patched for
	# mad-socket, qemu-system-x86_64 only (configure --without-default-features
	# --enable-rdma --enable-pvrdma --enable-slirp --enable-fdt=system); its
	# source comes through apt-get source (dpkg-dev, below). The bench's peer
	# (bench --peer), QEMU 7.2's own contrib/rdmacm-mux, is built from the same
	# source by a tools-only configure; strace counts --syscalls
	libpixman-1-dev zlib1g-dev libslirp-dev libfdt-dev libibverbs-dev librdmacm-dev
	strace
	# the Debian packages (debian/, scripts/package.sh, suite 'package' and
	# tests/vm-systemd's mode pkg): dpkg-buildpackage, debhelper, lintian
	dpkg-dev debhelper fakeroot build-essential lintian
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

# The prometheus package enables and starts its server where systemd runs;
# the tests need only promtool, not a server on port 9090. A prometheus
# that was there before this script is left alone.
if [[ " ${missing[*]} " == *" prometheus "* && -d /run/systemd/system ]]; then
	systemctl disable --now prometheus.service || true
fi
