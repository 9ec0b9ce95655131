#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# systemd VM test runner (tests/vm-systemd): boots Debian's stock kernel
# under qemu (TCG) with a real Debian 12 userspace (systemd 252 as PID 1,
# udev, journald, rdma-core) as an initramfs, installs this build into it
# the way a package would ("meson install --destdir" into the overlay), and
# runs guest/vmsd-check.sh from a test unit. The verdict is the
# VMTEST-RESULT line on the serial console. See README.md.
#
# --mode main:       the shipped units on rxe0/rxe1 in the exclusive mode,
#                    the example modprobe.d file copied to /etc/modprobe.d
#                    (start, READY=1, relay, journal, sandbox, stop, socket
#                    activation, ib_cm kept away).
# --mode boot-order: the install as it is (the host keeps ib_cm), with
#                    rdmacm-mux@rxe0-1.service enabled and rxe0..rxe2 made
#                    early at boot by a test unit (vmsd-links.service),
#                    booted --boots times (default 5): each time the daemon
#                    must hold rxe0 before rdma-core loads ib_cm, which takes
#                    rxe1 and rxe2. Odd boots make the devices at once, even
#                    ones only when the daemon waits for rxe0. The last boot
#                    also hot-plugs rxe3: ib_cm takes it, a daemon for it
#                    exits 3, and systemd must not spin.
# --mode pkg:        no "meson install": the Debian packages of the 0.1.0
#                    release (built from commit 1dad4e3 once per build dir),
#                    this tree's (scripts/package.sh) as a higher version, and
#                    a "future" copy of those whose daemon writes a newer
#                    hand-off format go into the guest, which installs 0.1.0
#                    with dpkg, runs the templated units, upgrades to this
#                    tree, to the future and back down under an established
#                    session, and purges (see guest/vmsd-check.sh, pkg_mode).
# --mode vms:        the install, ib_cm banned as in main; the libvirt hook of
#                    examples/libvirt, run as libvirt runs it on the example
#                    domain, gives VMs their sockets and GIDs on both units
#                    (plain for rxe0, templated for rxe1); QEMU clients
#                    connect through them, a neighbour is refused, and all of
#                    it holds across "systemctl restart"; two QEMU stand-ins
#                    confined by AppArmor in their domains' profiles reach
#                    their own sockets, not each other's (see vms_mode). The
#                    hook is Python: the host's python3 (Debian 12's, as
#                    the guest's would be) goes into the overlay with the
#                    modules it imports, rather than into the shared rootfs.
#
# Cache (outside the tree): the kernel in tests/vm's cache dir
# (kernel-<pkg>_<version>/, shared with vm-run.sh), the mmdebstrap rootfs as
# a tar (sdroot-<key>.tar) and the uncompressed cpio made from it.
#
# Exit status: 0 pass, 1 fail (a check, a hang, a panic), 77 skip (no qemu,
# no mmdebstrap, no root to build the rootfs, packages cannot be fetched),
# 2 usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../vm/vm-host-lib.sh
. "$here/../vm/vm-host-lib.sh"

# Guest packages: systemd as PID 1, udev and rdma-core (its udev rules load
# rdma_ucm, and so ib_cm, when an RDMA device appears: the race under test),
# iproute2 for veth and "rdma link", and the daemon's runtime libraries.
ROOTFS_PACKAGES=systemd,systemd-sysv,udev,kmod,iproute2,rdma-core,libibumad3,libglib2.0-0,libsystemd0
# Modules the guest needs: soft-RoCE on veth, umad and uverbs (the sandbox
# probe needs a uverbs node to be refused), and everything rdma-core's
# /etc/rdma/modules/rdma.conf loads, so that its unit succeeds without our
# modprobe.d file. crc32_generic is a hidden dependency of rdma_rxe.
GUEST_MODULES="crc32_generic rdma_rxe ib_umad ib_uverbs veth rdma_ucm ib_iser xprtrdma svcrdma autofs4 configfs"

usage() {
	cat <<EOF
usage: $0 --build-dir DIR [--mode main|boot-order|pkg|vms] [--boots N] [--timeout SECS] [--log-dir DIR] [-v]
  --build-dir DIR  a configured and built meson build dir (installed with
                   "meson install --destdir" into the guest; in mode pkg
                   only its test programs are used)
  --mode MODE      main (default), boot-order, pkg or vms, see the header of this script
  --boots N        boot-order: how many boots (default 5)
  --timeout SECS   host limit for each boot (default 480)
  --log-dir DIR    serial logs (default DIR/tests/vm-systemd/logs)
  -v               show the serial console while it runs
Cache: \${RDMACM_MUX_VM_CACHE:-\${XDG_CACHE_HOME:-\$HOME/.cache}/rdmacm-mux/vm}.
EOF
}

build_dir='' mode=main boots=5 host_timeout=480 log_dir='' verbose=0
while (($#)); do
	case $1 in
	--build-dir) build_dir=${2:?}; shift 2 ;;
	--mode) mode=${2:?}; shift 2 ;;
	--boots) boots=${2:?}; shift 2 ;;
	--timeout) host_timeout=${2:?}; shift 2 ;;
	--log-dir) log_dir=${2:?}; shift 2 ;;
	-v | --verbose) verbose=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "vmsd: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
done
[[ -n $build_dir ]] || { usage >&2; exit 2; }
[[ $mode == main || $mode == boot-order || $mode == pkg || $mode == vms ]] ||
	{ echo "vmsd: bad --mode $mode" >&2; exit 2; }
[[ $boots =~ ^[1-9][0-9]*$ ]] || { echo "vmsd: bad --boots $boots" >&2; exit 2; }
[[ $mode == boot-order ]] || boots=1
build_dir=$(cd "$build_dir" && pwd)
log_dir=${log_dir:-$build_dir/tests/vm-systemd/logs}
cache=${RDMACM_MUX_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/vm}

t_start=$SECONDS
vm_runner vmsd

# --- 1. Can this host run it? -------------------------------------------------
vm_require_qemu
vm_require_host_tools cpio depmod modprobe gzip flock meson tar
for p in tests/tools/rdmacm-mux-qemu-client tests/vm/umad-probe; do
	[[ -x $build_dir/$p ]] || die "$build_dir/$p is not built"
done
if [[ $mode == pkg ]]; then
	vm_require_host_tools dpkg-buildpackage dh dpkg-deb
	[[ -x $build_dir/examples/rdmacm-mux-pingpong ]] ||
		die "$build_dir/examples/rdmacm-mux-pingpong is not built"
fi
if [[ $mode == vms ]]; then
	[[ -x /usr/bin/python3 ]] || skip "mode vms needs the host's /usr/bin/python3 (the hook's interpreter)"
fi

mkdir -p "$cache" "$log_dir"
exec {lockfd}>"$cache/.lock"
flock "$lockfd"

# --- 2. Kernel: the same cache entry as tests/vm/vm-run.sh ---------------------
vm_fetch_kernel
kroot=$vm_kdir
kver=$(basename "$(echo "$kroot"/lib/modules/*)")
kernel_image=$kroot/boot/vmlinuz-$kver
[[ -f $kernel_image ]] || die "no kernel image $kernel_image"
# vm-run.sh leaves the uncompressed PVH ELF next to it (about 3 s faster
# under TCG); make it here too if it is missing.
if grep -qx 'CONFIG_PVH=y' "$kroot/boot/config-$kver" 2>/dev/null; then
	vm_extract_vmlinux "$kernel_image" "$kroot/vmlinux-$kver" || true
fi
[[ -f $kroot/vmlinux-$kver ]] && kernel_image=$kroot/vmlinux-$kver
t_kernel=$SECONDS

# --- 3. Rootfs: mmdebstrap -> tar (the cache), then an uncompressed cpio ------
# The key covers what decides the content: suite, packages, recipe version.
rootfs_key=$(printf '%s\n' bookworm essential "$ROOTFS_PACKAGES" sd-v1 | sha256sum | cut -c1-12)
rootfs_tar=$cache/sdroot-$rootfs_key.tar
base_cpio=$cache/sdroot-$rootfs_key.cpio
if [[ ! -f $rootfs_tar ]]; then
	command -v mmdebstrap >/dev/null ||
		skip "mmdebstrap is not installed (scripts/setup.sh installs it)"
	((EUID == 0)) || skip "building the guest rootfs needs root (mmdebstrap, device nodes)"
	# The mirrors come from the host's apt configuration, pinned to bookworm.
	uris=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' | sort -u || true)
	[[ -n $uris ]] || uris=$(awk '$1 == "deb" { print ($2 ~ /^\[/ ? $3 : $2) }' \
		/etc/apt/sources.list 2>/dev/null | sort -u || true)
	[[ -n $uris ]] || skip "no apt mirror in /etc/apt/sources.list{,.d}"
	sources=$(mktemp "${TMPDIR:-/tmp}/vmsd-sources.XXXXXX")
	while read -r u; do
		case $u in
		*security*) suites=bookworm-security ;;
		*) suites="bookworm bookworm-updates" ;;
		esac
		printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
			"$u" "$suites"
	done <<<"$uris" >"$sources"
	say "building the bookworm rootfs with mmdebstrap (once; cached as $rootfs_tar)"
	# The name must end in .tar: mmdebstrap picks its output format from it.
	rootfs_tmp=$cache/sdroot-$rootfs_key.tmp.tar
	t0=$SECONDS
	if ! vm_mmdebstrap "$ROOTFS_PACKAGES" "$rootfs_tmp" "$sources" "$cache/mmdebstrap-sdroot.log"; then
		rm -rf "$rootfs_tmp" "$sources"
		tail -n 20 "$cache/mmdebstrap-sdroot.log"
		skip "mmdebstrap failed: the guest packages cannot be had (log: $cache/mmdebstrap-sdroot.log)"
	fi
	rm -f "$sources" "$base_cpio"
	mv "$rootfs_tmp" "$rootfs_tar"
	say "rootfs built in $((SECONDS - t0)) s ($(du -h "$rootfs_tar" | cut -f1))"
	# Older rootfs versions are useless now.
	find "$cache" -maxdepth 1 -name 'sdroot-*' ! -name "sdroot-$rootfs_key.*" -exec rm -rf {} +
fi
if [[ ! -f $base_cpio ]]; then
	((EUID == 0)) || skip "unpacking the guest rootfs needs root (device nodes)"
	t0=$SECONDS
	x=$(mktemp -d "$cache/sdroot-x.XXXXXX")
	tar -C "$x" --numeric-owner -xpf "$rootfs_tar"
	# Uncompressed: the guest kernel unpacks it faster than it would gunzip it.
	(cd "$x" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --quiet --null -o -H newc) >"$base_cpio.tmp"
	rm -rf "$x"
	mv "$base_cpio.tmp" "$base_cpio"
	say "rootfs cpio made in $((SECONDS - t0)) s"
fi
exec {lockfd}>&-
t_prep=$SECONDS

# --- Mode pkg: the packages, and the same packages one version up -------------
# vmsd_repack DEB DIR VERSION [DAEMON]: DEB again, as version VERSION, into
# DIR, with DAEMON as its /usr/sbin/rdmacm-mux if given. The
# upgrade under test is dpkg's path through our maintainer scripts, which
# are the same in both: a second dpkg-buildpackage would compile the same
# code for another half minute. So the upgrade packages are these, with
# Version: (and the "(= VERSION)" dependency of -dev on the library) raised,
# and one line added to the example config, so that the postinst's
# "an unedited /etc/rdmacm-mux.conf follows the example" has work to do.
vmsd_repack() {
	local deb=$1 dir=$2 new=$3 daemon=${4:-} x old f=usr/share/rdmacm-mux/rdmacm-mux.conf
	x=$(mktemp -d "$work/repack.XXXXXX")
	dpkg-deb -R "$deb" "$x"
	old=$(sed -n 's/^Version: //p' "$x/DEBIAN/control")
	sed -i -e "s/^Version: .*/Version: $new/" -e "s/(= ${old//./\\.})/(= $new)/g" \
		"$x/DEBIAN/control"
	if [[ -f $x/$f ]]; then
		echo "# (this line came with version $new)" >>"$x/$f"
		(cd "$x" && md5sum "$f") >"$x/md5.new"
		grep -v "  $f\$" "$x/DEBIAN/md5sums" >>"$x/md5.new"
		mv "$x/md5.new" "$x/DEBIAN/md5sums"
	fi
	[[ -z $daemon ]] || vmsd_future_daemon "$x" "$daemon"
	dpkg-deb -Zgzip -z1 -b "$x" "$dir/" >/dev/null
	rm -rf "$x"
}

# vmsd_release_packages DIR: the packages of the 0.1.0 release (commit
# 1dad4e3, with its own packaging and scripts/package.sh), built once per
# build dir into $build_dir/tests/vm-systemd/debs-0.1.0 (about a minute on
# two cores) and copied to DIR. Its tree is extracted outside any git work
# tree: its package.sh copies "what git tracks" when it finds one.
REL_COMMIT=1dad4e322e7ac015247f0b356dc741ca132906d0
vmsd_release_packages() {
	local dir=$1 cache=$build_dir/tests/vm-systemd/debs-0.1.0 t0=$SECONDS src
	if [[ ! -f $cache/.done ]]; then
		git -C "$here/../.." cat-file -e "$REL_COMMIT^{commit}" 2>/dev/null ||
			die "commit $REL_COMMIT (0.1.0) is not in this clone's history: mode pkg needs a clone with full history (git fetch --unshallow)"
		src=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-0.1.0.XXXXXX")
		git -C "$here/../.." archive "$REL_COMMIT" | tar -x -C "$src"
		rm -rf "$cache"
		mkdir -p "$cache"
		if ! "$src/scripts/package.sh" --binary --nocheck --no-lintian "$cache" \
			>"$work/package-0.1.0.log" 2>&1; then
			tail -n 40 "$work/package-0.1.0.log"
			rm -rf "$src"
			die "0.1.0's scripts/package.sh failed (the log's end is above)"
		fi
		rm -rf "$src"
		touch "$cache/.done"
		say "the 0.1.0 packages made in $((SECONDS - t0)) s"
	fi
	cp "$cache"/rdmacm-mux_*.deb "$cache"/librdmacm-mux1_*.deb "$cache"/librdmacm-mux-dev_*.deb "$dir/"
}

# vmsd_future_daemon DIR BIN: an unpacked package in DIR gets BIN as its
# /usr/sbin/rdmacm-mux, md5sums to match (a vmsd_repack hook).
vmsd_future_daemon() {
	local x=$1 bin=$2 f=usr/sbin/rdmacm-mux
	install -m 0755 "$bin" "$x/$f"
	(cd "$x" && md5sum "$f") >"$x/md5.new"
	grep -v "  $f\$" "$x/DEBIAN/md5sums" >>"$x/md5.new"
	mv "$x/md5.new" "$x/DEBIAN/md5sums"
}

# vmsd_packages: the packages of 0.1.0 into the overlay's
# /opt/vmsd/debs/rel, this tree's (binary only, no tests: scripts/test.sh
# builds and lints them in full) repacked one version up into .../new, and
# the same again with the "future" daemon (the tree built with
# -Dhandoff_future: its hand-off format is a minor newer; built by the
# upgrade tests' build-daemon-version.sh, incrementally) two versions up
# into .../future. Of this tree one dpkg-buildpackage, about 25 s.
vmsd_packages() {
	local t0=$SECONDS deb version p future
	mkdir -p "$ov/opt/vmsd/debs/rel" "$ov/opt/vmsd/debs/new" "$ov/opt/vmsd/debs/future"
	vmsd_release_packages "$ov/opt/vmsd/debs/rel"
	future=$("$here/../integration/build-daemon-version.sh" "$here/../.." \
		"$build_dir/tests/integration/daemon-future" future) ||
		die "the future daemon could not be built"
	if ! "$here/../../scripts/package.sh" --binary --nocheck --no-lintian "$work/debs" \
		>"$work/package.log" 2>&1; then
		tail -n 40 "$work/package.log"
		die "scripts/package.sh failed (the log's end is above)"
	fi
	for p in rdmacm-mux librdmacm-mux1 librdmacm-mux-dev; do
		deb=$(find "$work/debs" -name "${p}_*.deb" | head -n 1)
		[[ -n $deb ]] || die "scripts/package.sh made no $p package"
		version=$(dpkg-deb -f "$deb" Version)
		vmsd_repack "$deb" "$ov/opt/vmsd/debs/new" "$version+vmsd1"
		vmsd_repack "$deb" "$ov/opt/vmsd/debs/future" "$version+vmsd2" \
			"$([[ $p == rdmacm-mux ]] && echo "$future")"
	done
	say "packages 0.1.0, $version+vmsd1 and $version+vmsd2 (future) ready in $((SECONDS - t0)) s"
	# ib_cm is kept away by the test, not by the package: whether the
	# package's modprobe.d file does that is not what this mode checks.
	mkdir -p "$ov/etc/modprobe.d"
	printf '%s\n' '# written by tests/vm-systemd (mode pkg)' 'install ib_cm /bin/false' \
		>"$ov/etc/modprobe.d/vmsd-no-ib-cm.conf"
}

# vmsd_python: the host's python3 and what the libvirt hook imports, into
# the overlay at the same paths (the host is Debian 12, like the guest),
# with the shared libraries those need that the rootfs lacks.
vmsd_python() {
	local f lib exe
	exe=$(readlink -f /usr/bin/python3)
	mkdir -p "$ov/usr/bin"
	cp -a "$exe" "$ov$exe"
	ln -sf "$(basename "$exe")" "$ov/usr/bin/python3"
	/usr/bin/python3 -c 'import sys, os, re, shutil, socket, errno, subprocess, xml.etree.ElementTree
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and f.startswith("/usr/lib/python3"):
        print(f)' | sort -u | while read -r f; do
		mkdir -p "$ov$(dirname "$f")"
		cp -L "$f" "$ov$f"
	done
	for f in "$exe" "$ov"/usr/lib/python3*/lib-dynload/*.so; do
		ldd "$f" 2>/dev/null | awk '$3 ~ /^\// { print $3 }'
	done | sort -u | while read -r lib; do
		tar -tf "$rootfs_tar" "./usr${lib#/usr}" >/dev/null 2>&1 && continue
		mkdir -p "$ov/usr/lib/x86_64-linux-gnu"
		cp -L "$lib" "$ov/usr/lib/x86_64-linux-gnu/"
	done
}

# --- 4. The overlay: modules, the installed build, the test driver ------------
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-vmsd.XXXXXX")
trap 'rm -rf "$work"' EXIT
ov=$work/overlay
mkdir -p "$ov"

# Modules with their dependencies, resolved against the unpacked kernel.
# -C /dev/null: the host's own modprobe.d (perhaps "install ib_cm
# /bin/false") must not change what goes into the guest. They go under
# usr/lib: lib is a symlink in the merged-/usr rootfs.
mdir=$ov/usr/lib/modules/$kver
mkdir -p "$mdir"
for m in $GUEST_MODULES; do
	modprobe -C /dev/null -d "$kroot" -S "$kver" --show-depends "$m" ||
		die "module $m is not in $kroot"
done | awk '$1 == "insmod" { print $2 }' | sort -u | while read -r ko; do
	rel=${ko#"$kroot"/lib/modules/"$kver"/}
	mkdir -p "$mdir/$(dirname "$rel")"
	cp "$ko" "$mdir/$rel"
done
cp "$kroot/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$mdir/"
depmod -b "$ov/usr" "$kver"

if [[ $mode == pkg ]]; then
	vmsd_packages
else
	# The package: everything "meson install" puts in place, as a .deb would.
	if ! meson install -C "$build_dir" --destdir "$ov" --no-rebuild --quiet \
		>"$work/install.log" 2>&1; then
		cat "$work/install.log" >&2
		die "meson install --destdir failed"
	fi
	for d in lib lib64 bin sbin; do
		[[ ! -e $ov/$d ]] || die "the install created /$d in the overlay; it would hide the rootfs's /$d symlink"
	done
	unit=$(find "$ov" -path '*/systemd/system/rdmacm-mux.service' | head -n 1)
	[[ -n $unit ]] || die "meson install put no rdmacm-mux.service into the overlay"
	# The config file the unit reads (EnvironmentFile=-SYSCONFDIR/rdmacm-mux.conf):
	# what an administrator writes after installing the package.
	conf=$(sed -n 's/^EnvironmentFile=-\(.*rdmacm-mux\.conf\)$/\1/p' "$unit" | head -n 1)
	[[ -n $conf ]] || die "no EnvironmentFile=-.../rdmacm-mux.conf in $unit"
	mkdir -p "$ov/$(dirname "$conf")"
	# boot-order: the plain unit is for the device hot-plugged at the end.
	conf_dev=rxe0
	[[ $mode == boot-order ]] && conf_dev=rxe3
	printf '%s\n' '# written by tests/vm-systemd' "RDMACM_MUX_DEVICE=$conf_dev" >"$ov/$conf"
fi

# Test programs, not part of the package (libc and libibumad only; the host
# is Debian 12 like the guest).
mkdir -p "$ov/opt/vmsd/bin"
cp "$build_dir/tests/tools/rdmacm-mux-qemu-client" "$build_dir/tests/vm/umad-probe" "$ov/opt/vmsd/bin/"
# Mode pkg: the build's pingpong. Its RUNPATH ($ORIGIN/../client-lib) does
# not exist in the guest, so it runs with the packaged librdmacm-mux.so.1.
[[ $mode != pkg ]] || cp "$build_dir/examples/rdmacm-mux-pingpong" "$ov/opt/vmsd/bin/"
install -m 0755 "$here/guest/vmsd-check.sh" "$ov/opt/vmsd/vmsd-check.sh"
install -m 0755 "$here/guest/vmsd-probe.sh" "$ov/opt/vmsd/probe.sh"

# The test unit, started when the boot is done, and units that only cost
# boot time on a serial-only VM, masked.
sd=$ov/etc/systemd/system
mkdir -p "$sd/multi-user.target.wants"
cp "$here/guest/vmsd-test.service" "$sd/"
ln -s ../vmsd-test.service "$sd/multi-user.target.wants/vmsd-test.service"
for u in getty-static.service getty@tty1.service serial-getty@ttyS0.service \
	systemd-update-utmp.service systemd-update-utmp-runlevel.service; do
	ln -s /dev/null "$sd/$u"
done
echo 5eb1c0de5eb1c0de5eb1c0de5eb1c0de >"$ov/etc/machine-id"
echo vmsd >"$ov/etc/hostname"
# --mode main and vms: the exclusive mode, as its example file says to set
# it up (vms: both daemons must hold their port, whatever udev loads).
if [[ $mode == main || $mode == vms ]]; then
	ban=$(find "$ov" -path '*/examples/modprobe.d/rdmacm-mux-exclusive.conf' | head -n 1)
	[[ -n $ban ]] || die "meson install put no examples/modprobe.d/rdmacm-mux-exclusive.conf"
	mkdir -p "$ov/etc/modprobe.d"
	cp "$ban" "$ov/etc/modprobe.d/"
fi
# --mode boot-order: the daemon's unit enabled the way an admin does it,
# and the test unit that makes the devices early at boot.
if [[ $mode == boot-order ]]; then
	systemctl --root="$ov" enable rdmacm-mux@rxe0-1.service >"$work/enable.log" 2>&1 ||
		{ cat "$work/enable.log" >&2; die "systemctl --root enable rdmacm-mux@rxe0-1.service failed"; }
	install -m 0755 "$here/guest/vmsd-links.sh" "$ov/opt/vmsd/links.sh"
	cp "$here/guest/vmsd-links.service" "$sd/"
	mkdir -p "$sd/sysinit.target.wants"
	ln -s ../vmsd-links.service "$sd/sysinit.target.wants/vmsd-links.service"
fi
[[ $mode != vms ]] || vmsd_python
# AppArmor's parser for the confined QEMUs of mode vms: the host's (Debian
# 12's, libc alone), not in the shared rootfs.
if [[ $mode == vms ]]; then
	aa_parser=$(command -v apparmor_parser || echo /sbin/apparmor_parser)
	[[ -x $aa_parser ]] || skip "mode vms needs the host's apparmor_parser (scripts/setup.sh installs apparmor)"
	mkdir -p "$ov/usr/sbin"
	cp -L "$aa_parser" "$ov/usr/sbin/apparmor_parser"
fi
vm_cpio "$ov" "$work/overlay.cpio.gz"
cat "$base_cpio" "$work/overlay.cpio.gz" >"$work/initrd"
t_pack=$SECONDS

# --- 5. Boot, and 6. the verdict: the guest's VMTEST-RESULT line ---------------
# (qemu's status is only a hint). boot-order boots the same image --boots
# times, each boot from scratch; any failed boot fails the run.
boot_once() {
	local b=$1 log extra='' clean result t_boot links
	log=$log_dir/vmsd-$mode.log
	if [[ $mode == boot-order ]]; then
		log=$log_dir/vmsd-$mode-$b.log
		links=early
		((b % 2)) || links=late
		extra=" vmsd.boot=$b vmsd.boots=$boots vmsd.links=$links"
		say "boot $b of $boots, devices made $links"
	fi
	say "booting $kver, mode $mode (serial log: $log)"
	qemu=(timeout --foreground -k 5 "$host_timeout"
		qemu-system-x86_64 -accel tcg -cpu max -m 2048 -smp 2
		-nographic -no-reboot -nodefaults -no-user-config -serial stdio
		-kernel "$kernel_image" -initrd "$work/initrd"
		-append "console=ttyS0 rdinit=/sbin/init panic=-1 loglevel=4 systemd.show_status=error vmsd.mode=$mode$extra")
	t_boot=$SECONDS
	vm_boot "$log" "$verbose" "${qemu[@]}"
	clean=$(tr -d '\r' <"$log")
	((verbose)) || grep -E '^(PASS|FAIL|INFO|VMTEST-)' <<<"$clean" || true
	result=$(grep -o 'VMTEST-RESULT rc=[0-9]*' <<<"$clean" | tail -n 1 | cut -d= -f2 || true)
	say "boot+checks $((SECONDS - t_boot)) s"
	if [[ -z $result ]]; then
		((verbose)) || { echo "----- serial log -----"; printf '%s\n' "$clean"; }
		if ((qrc == 124 || qrc == 137)); then
			die "the guest did not finish within ${host_timeout}s (hang)"
		fi
		die "the guest stopped without a verdict (panic or crash; qemu status $qrc)"
	fi
	if ((result != 0)); then
		((verbose)) || { echo "----- serial log -----"; printf '%s\n' "$clean"; }
		die "mode $mode${extra:+, boot $b}: $(grep -c '^FAIL' <<<"$clean" || true) check(s) failed (rc=$result)"
	fi
}

t_boot0=$SECONDS
for ((b = 1; b <= boots; b++)); do
	boot_once "$b"
done
say "timing: kernel $((t_kernel - t_start)) s, rootfs $((t_prep - t_kernel)) s, pack $((t_pack - t_prep)) s, $boots boot(s)+checks $((SECONDS - t_boot0)) s, total $((SECONDS - t_start)) s"
say "PASS: mode $mode"
