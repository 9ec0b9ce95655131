#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Real QEMU pvrdma through rdmacm-mux (tests/qemu, meson suite 'qemu').
#
# Boots an outer VM (Debian's kernel + a bookworm rootfs made by mmdebstrap,
# TCG) with soft-RoCE rxe0/rxe1 on a veth pair, rdmacm-mux on each, a CM
# responder (cm-responder) behind the rxe1 daemon, and two inner guests at
# once, each with a pvrdma device on the rxe0 daemon: one under Debian's
# unmodified QEMU 7.2 (mad-chardev), one under QEMU 7.2 with the patches of
# contrib/qemu (mad-socket, librdmacm-mux), built here by
# contrib/qemu/build-qemu.sh while the rest is prepared. The guests
# (Debian's kernel, vmw_pvrdma.ko built here from linux-source) run udaddy
# (SIDR) and rdma_client (RC connect) against the responder while the outer
# VM stops and starts the rxe0 daemon. The verdict comes from the serial
# console (outer-init, inner-init).
#
# Everything foreign (kernel, headers, kernel source, rootfs packages) comes
# from Debian's packages through apt and is cached outside the tree:
#   ${RDMACM_MUX_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu}
# and the patched QEMU in build-qemu.sh's cache (rdmacm-mux/qemu-patched).
#
# Exit status: 0 pass, 1 fail, 77 skipped (qemu, the kernel, its source or
# Debian's qemu source cannot be had), 2 usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../vm/vm-host-lib.sh
. "$here/../vm/vm-host-lib.sh"
# shellcheck source-path=SCRIPTDIR source=../../scripts/lib-apt-mirrors.sh
. "$here/../../scripts/lib-apt-mirrors.sh"

usage() {
	cat <<EOF
usage: $0 --build-dir DIR [--timeout SECS] [--log-dir DIR] [-v] [--prepare-only]
  --build-dir DIR   meson build dir with daemon/rdmacm-mux, tests/qemu/cm-responder
                    and client-lib (librdmacm-mux, for the patched QEMU)
  --timeout SECS    host limit for the outer VM (default 2400)
  --log-dir DIR     where the serial log goes (default DIR/tests/qemu/logs)
  -v, --verbose     show the serial console while it runs
  --prepare-only    fetch and build the cached parts, then stop
  --judge LOG       only check the serial log LOG of an earlier run
Cache: \${RDMACM_MUX_QEMU_CACHE:-\${XDG_CACHE_HOME:-\$HOME/.cache}/rdmacm-mux/qemu}
EOF
}

build_dir='' host_timeout=2400 log_dir='' verbose=0 prepare_only=0 judge_log=''
while (($#)); do
	case $1 in
	--build-dir) build_dir=${2:?}; shift 2 ;;
	--timeout) host_timeout=${2:?}; shift 2 ;;
	--log-dir) log_dir=${2:?}; shift 2 ;;
	-v | --verbose) verbose=1; shift ;;
	--prepare-only) prepare_only=1; shift ;;
	--judge) judge_log=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "qemu: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
done
if [[ -n $judge_log ]]; then
	vm_runner qemu
	log=$judge_log qrc=0
	# shellcheck source-path=SCRIPTDIR source=qemu-verdict.sh
	. "$here/qemu-verdict.sh"
	((failed)) && exit 1
	say "PASS"
	exit 0
fi
[[ -n $build_dir ]] || { usage >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)
log_dir=${log_dir:-$build_dir/tests/qemu/logs}
cache=${RDMACM_MUX_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/qemu}

t_start=$SECONDS
vm_runner qemu

# --- 1. Host checks ------------------------------------------------------------
vm_require_qemu
for tool in mmdebstrap apt-get apt-cache dpkg-deb busybox cpio depmod modinfo \
	gzip xz make gcc readelf strip flock sha256sum; do
	command -v "$tool" >/dev/null ||
		die "host tool '$tool' is missing (run scripts/setup.sh)"
done
ldd "$(command -v busybox)" >/dev/null 2>&1 &&
	die "busybox is not static (install busybox-static: scripts/setup.sh)"
daemon=$build_dir/daemon/rdmacm-mux
responder=$build_dir/tests/qemu/cm-responder
libmux=$build_dir/client-lib/librdmacm-mux.so.1
for p in "$libmux" "$daemon" "$responder"; do
	((prepare_only)) && [[ $p != "$libmux" ]] && continue
	[[ -e $p ]] || die "$p is not built"
done

# --- 1b. The patched QEMU, built in the background --------------------------
# The build takes minutes of both cores when it is not cached; everything
# below until the outer VM boots is mostly downloads and single-threaded,
# so the two overlap. Cached, it answers at once.
mkdir -p "$log_dir"
qbuild_log=$log_dir/build-qemu.log
setsid "$here/../../contrib/qemu/build-qemu.sh" --lib-build-dir "$build_dir" \
	>"$log_dir/build-qemu.path" 2>"$qbuild_log" &
qbuild_pid=$!
trap 'kill -- -"$qbuild_pid" 2>/dev/null || true' EXIT
# Sets qemu_patched to the binary, or skips or fails the test.
wait_patched_qemu() {
	local rc=0
	wait "$qbuild_pid" || rc=$?
	trap - EXIT
	case $rc in
	0) qemu_patched=$(tail -n 1 "$log_dir/build-qemu.path") ;;
	77) skip "Debian's qemu source cannot be had: $(tail -n 3 "$qbuild_log")" ;;
	*)
		tail -n 40 "$qbuild_log" >&2
		die "building the patched QEMU failed (log: $qbuild_log)"
		;;
	esac
	[[ -x $qemu_patched ]] || die "build-qemu.sh gave no binary: $qemu_patched"
	t_qemu=$((SECONDS - t_start))
	say "patched QEMU ready ${t_qemu} s after the start: $qemu_patched"
}

mkdir -p "$cache" "$log_dir"
exec {lockfd}>"$cache/.lock"
flock "$lockfd"

# --- 2. Kernel, headers, kernel source and vmw_pvrdma.ko (cached per version) ---
# Debian's kernel has no vmw_pvrdma (CONFIG_INFINIBAND_VMWARE_PVRDMA unset), so
# the driver is built from the linux-source package of the same version,
# against the unpacked linux-headers of the kernel the guests boot.
prepare_kernel() {
	local kpkg kver_pkg dir tmp k series hpkgs
	vm_resolve_kernel || { kdir=$vm_kdir; return; }
	kpkg=$vm_kpkg kver_pkg=$vm_kver dir=$vm_kdir
	kdir=$dir
	[[ -f $dir/.complete ]] && return

	k=${kpkg#linux-image-}
	series=$(cut -d. -f1,2 <<<"$kver_pkg")
	say "fetching $kpkg, its headers and linux-source-$series $kver_pkg (once; cached in $dir)"
	tmp=$(mktemp -d "$cache/fetch.XXXXXX")
	mkdir -p "$tmp/dl"
	hpkgs=("linux-headers-$k=$kver_pkg" "linux-headers-${k%-*}-common=$kver_pkg"
		"linux-kbuild-$series=$kver_pkg")
	if ! vm_apt_download "$tmp/dl" "$kpkg=$kver_pkg" "${hpkgs[@]}"; then
		rm -rf "$tmp"
		skip "cannot download $kpkg and its headers: $(tail -n 3 "$cache/apt-download.log")"
	fi
	if ! vm_apt_download "$tmp/dl" "linux-source-$series=$kver_pkg"; then
		rm -rf "$tmp"
		skip "cannot download linux-source-$series $kver_pkg: $(tail -n 3 "$cache/apt-download.log")"
	fi
	mkdir -p "$tmp/root" "$tmp/kbuild" "$tmp/src"
	vm_unpack_kernel "$tmp"/dl/linux-image-*.deb "$tmp/root"
	for d in "$tmp"/dl/linux-headers-*.deb "$tmp"/dl/linux-kbuild-*.deb; do
		dpkg-deb -x "$d" "$tmp/kbuild"
	done
	# The arch headers include the common ones by absolute path.
	sed -i "s|^include /usr/src/|include $tmp/kbuild/usr/src/|" \
		"$tmp/kbuild/usr/src/linux-headers-$k/Makefile"
	# Only the driver's directory is taken from the 140 MB source tarball.
	dpkg-deb --fsys-tarfile "$tmp"/dl/linux-source-*.deb |
		tar -xO "./usr/src/linux-source-$series.tar.xz" | xz -dc |
		tar -x -C "$tmp/src" --wildcards "linux-source-$series/drivers/infiniband/hw/vmw_pvrdma/*"
	cp -r "$tmp/src/linux-source-$series/drivers/infiniband/hw/vmw_pvrdma" "$tmp/kmod"
	if ! make -C "$tmp/kbuild/usr/src/linux-headers-$k" M="$tmp/kmod" \
		CONFIG_INFINIBAND_VMWARE_PVRDMA=m modules >"$tmp/kmod.log" 2>&1; then
		cat "$tmp/kmod.log" >&2
		rm -rf "$tmp"
		die "building vmw_pvrdma.ko failed (log above)"
	fi
	# Without its 5 MB of debug info: the nested guest reads it slowly.
	strip --strip-debug -o "$tmp/root/vmw_pvrdma.ko" "$tmp/kmod/vmw_pvrdma.ko"
	touch "$tmp/root/.complete"
	rm -rf "$dir"
	mv "$tmp/root" "$dir"
	rm -rf "$tmp"
	# A newer kernel replaces the older ones and what was built for them.
	find "$cache" -mindepth 1 -maxdepth 1 \( -name 'kernel-*' -o -name 'inner-*.cpio*' \
		-o -name 'kmods-*' -o -name 'vmlinux-*' \) ! -path "$dir" -exec rm -rf {} +
}
prepare_kernel
kver=$(basename "$(echo "$kdir"/lib/modules/*)")
[[ -f $kdir/vmw_pvrdma.ko && -f $kdir/boot/vmlinuz-$kver ]] ||
	die "incomplete kernel cache $kdir (remove it)"

# The uncompressed ELF boots through PVH: no in-guest decompression, which
# costs about 30 s in the nested guest.
vmlinux=$kdir/vmlinux-$kver
vm_extract_vmlinux "$kdir/boot/vmlinuz-$kver" "$vmlinux" ||
	die "cannot unpack vmlinux from vmlinuz-$kver"

# --- 3. The bookworm rootfs of the outer VM (mmdebstrap, cached) ---------------
# The outer VM runs QEMU 7.2 (pvrdma was removed in 9.1), so the suite is
# pinned to bookworm whatever the host runs. The inner guest's programs
# (udaddy, rdma_client, the pvrdma verbs provider) are taken from it too.
ROOTFS_PACKAGES="qemu-system-x86,ibverbs-providers,rdmacm-utils,libibverbs1,librdmacm1,libibumad3,libglib2.0-0,libsystemd0,iproute2,kmod,busybox"
rootfs_key=$(printf '%s\n' "bookworm" "$ROOTFS_PACKAGES" "v1" | sha256sum | cut -c1-12)
rootfs_cpio=$cache/rootfs-$rootfs_key.cpio
inner_user=$cache/inner-user-$rootfs_key

# Copies ELF REL (a path inside the rootfs) and, by DT_NEEDED, every library
# it needs, from rootfs ROOT into DEST (merged /usr, libraries under
# usr/lib/x86_64-linux-gnu).
rootfs_elf() {
	local root=$1 rel=$2 dest=$3 lib f
	[[ -f $dest/${rel#/} ]] && return 0
	mkdir -p "$dest/$(dirname "${rel#/}")"
	cp -L "$root/$rel" "$dest/${rel#/}"
	for lib in $(readelf -d "$root/$rel" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		f=usr/lib/x86_64-linux-gnu/$lib
		[[ -e $root/$f ]] || { echo "qemu: $lib (for $rel) is not in the rootfs" >&2; return 1; }
		rootfs_elf "$root" "$f" "$dest"
	done
}

if [[ ! -f $rootfs_cpio || ! -d $inner_user ]]; then
	# The mirrors come from the host's apt configuration; the suites are
	# pinned to bookworm.
	src=$(mktemp "${TMPDIR:-/tmp}/rdmacm-mux-qemu-sources.XXXXXX")
	uris=$(apt_host_mirrors)
	[[ -n $uris ]] || die "no apt mirror found in /etc/apt/sources.list{,.d}"
	while read -r u; do
		case $u in
		*security*) suites="bookworm-security" ;;
		*) suites="bookworm bookworm-updates" ;;
		esac
		printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
			"$u" "$suites"
	done <<<"$uris" >"$src"
	say "building the bookworm rootfs with mmdebstrap (once; cached)"
	rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
	if ! vm_mmdebstrap "$ROOTFS_PACKAGES" "$rootfs" "$src" "$cache/mmdebstrap.log"; then
		tail -n 30 "$cache/mmdebstrap.log" >&2
		rm -rf "$rootfs" "$src"
		die "mmdebstrap failed (log above, $cache/mmdebstrap.log)"
	fi
	rm -f "$src"
	# The inner guest's userland: the two rdma_cm clients, their libraries,
	# the loader and the vmw_pvrdma verbs provider.
	rm -rf "$inner_user" "$inner_user.tmp"
	mkdir -p "$inner_user.tmp/usr/lib64" "$inner_user.tmp/etc/libibverbs.d"
	for p in /usr/bin/udaddy /usr/bin/rdma_client \
		/usr/lib/x86_64-linux-gnu/libibverbs/libvmw_pvrdma-rdmav34.so; do
		rootfs_elf "$rootfs" "$p" "$inner_user.tmp"
	done
	cp -L "$rootfs/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$inner_user.tmp/usr/lib64/"
	cp "$rootfs/etc/libibverbs.d/vmw_pvrdma.driver" "$inner_user.tmp/etc/libibverbs.d/"
	# Uncompressed: the outer kernel unpacks it faster than it would gunzip it.
	(cd "$rootfs" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --quiet --null -o -H newc -R 0:0) >"$rootfs_cpio.tmp"
	rm -rf "$rootfs"
	mv "$inner_user.tmp" "$inner_user"
	mv "$rootfs_cpio.tmp" "$rootfs_cpio"
	find "$cache" -mindepth 1 -maxdepth 1 \( -name 'rootfs-*' -o -name 'inner-user-*' \) \
		! -path "$rootfs_cpio" ! -path "$inner_user" -exec rm -rf {} +
fi

# --- 4. Kernel modules of both VMs, and the inner guest's base (cached) --------
# kmods ROOT MOD...: copies MODs and their dependencies from the cached
# kernel into ROOT/usr/lib/modules/KVER and runs depmod there.
kmods() {
	local root=$1 m f rel deps
	shift
	local -A seen=()
	local queue=("$@")
	while ((${#queue[@]})); do
		m=${queue[0]//-/_}
		queue=("${queue[@]:1}")
		[[ -n ${seen[$m]:-} ]] && continue
		seen[$m]=1
		f=$(modinfo -b "$kdir" -k "$kver" -F filename "$m") ||
			die "module $m not found in $kver"
		[[ $f == "(builtin)" ]] && continue
		rel=${f#"$kdir/lib/modules/$kver/"}
		mkdir -p "$root/usr/lib/modules/$kver/$(dirname "$rel")"
		# strip drops the appended signature too: the guests then skip
		# hashing every module, which costs seconds under nested TCG.
		strip --strip-debug -o "$root/usr/lib/modules/$kver/$rel" "$f"
		deps=$(modinfo -b "$kdir" -k "$kver" -F depends "$m")
		IFS=, read -r -a more <<<"$deps"
		queue+=("${more[@]}")
	done
	for f in modules.builtin modules.builtin.modinfo modules.order; do
		cp "$kdir/lib/modules/$kver/$f" "$root/usr/lib/modules/$kver/"
	done
}

lib_key=$(sha256sum <"$here/qemu-pvrdma.sh" | cut -c1-12)
outer_kmods=$cache/kmods-$kver-$lib_key.cpio.gz
inner_base=$cache/inner-$kver-$rootfs_key-$lib_key.cpio
vmlinux_cpio=$cache/vmlinux-$kver.cpio
if [[ ! -f $outer_kmods ]]; then
	t=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-qemu.XXXXXX")
	# Never ib_cm: the daemons own the CM class on both ports.
	kmods "$t" crc32_generic rdma_rxe ib_umad ib_uverbs veth
	depmod -b "$t/usr" "$kver"
	vm_cpio "$t" "$outer_kmods"
	rm -rf "$t"
fi
if [[ ! -f $inner_base ]]; then
	t=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-qemu.XXXXXX")
	mkdir -p "$t"/usr/{bin,sbin,lib,lib64} "$t"/{dev,proc,sys,tmp,run,root,etc}
	for d in bin sbin lib lib64; do ln -s "usr/$d" "$t/$d"; done
	cp "$(command -v busybox)" "$t/usr/bin/busybox"
	ln -s ../bin/busybox "$t/usr/sbin/modprobe"
	cp -a "$inner_user/." "$t/"
	kmods "$t" vmxnet3 ib_uverbs rdma_ucm
	mkdir -p "$t/usr/lib/modules/$kver/extra"
	strip --strip-debug -o "$t/usr/lib/modules/$kver/extra/vmw_pvrdma.ko" "$kdir/vmw_pvrdma.ko"
	depmod -b "$t/usr" "$kver"
	# Uncompressed: gunzip costs seconds in the nested guest.
	(cd "$t" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --quiet --null -o -H newc -R 0:0) >"$inner_base.tmp"
	mv "$inner_base.tmp" "$inner_base"
	rm -rf "$t"
fi
if [[ ! -f $vmlinux_cpio ]]; then
	t=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-qemu.XXXXXX")
	mkdir -p "$t/inner"
	cp "$vmlinux" "$t/inner/vmlinux"
	(cd "$t" && find . -mindepth 1 | LC_ALL=C sort |
		cpio --quiet -o -H newc -R 0:0) >"$vmlinux_cpio.tmp"
	mv "$vmlinux_cpio.tmp" "$vmlinux_cpio"
	rm -rf "$t"
fi
find "$cache" -mindepth 1 -maxdepth 1 \( -name 'kmods-*' -o -name 'inner-*.cpio*' \) \
	! -path "$outer_kmods" ! -path "$inner_base" -delete
exec {lockfd}>&-
say "prepared the VM parts in $((SECONDS - t_start)) s (kernel $kver, cache $cache)"
wait_patched_qemu
t_prep=$SECONDS
((prepare_only)) && exit 0

# --- 5. Per-run overlays: the inner initrd, the project's programs ------------
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-qemu.XXXXXX")
trap 'rm -rf "$work"' EXIT
iov=$work/inner-overlay
mkdir -p "$iov"
cp "$here/inner-init" "$iov/init"
chmod 755 "$iov/init"
vm_cpio "$iov" "$work/inner-overlay.cpio.gz"

ov=$work/overlay
mkdir -p "$ov/inner" "$ov/usr/bin"
cat "$inner_base" "$work/inner-overlay.cpio.gz" >"$ov/inner/initrd"
cp "$here/outer-init" "$ov/init"
chmod 755 "$ov/init"
vm_put_elf "$ov" "$daemon" usr/bin/rdmacm-mux || die "cannot pack $daemon"
vm_put_elf "$ov" "$responder" usr/bin/cm-responder || die "cannot pack $responder"
# The patched QEMU needs what the rootfs' QEMU needs, plus librdmacm-mux
# (which cm-responder brought along already).
vm_copy_file "$ov" "$qemu_patched" usr/bin/qemu-system-x86_64-mux
vm_copy_file "$ov" "$libmux" usr/lib/x86_64-linux-gnu/librdmacm-mux.so.1
vm_cpio "$ov" "$work/overlay.cpio.gz"
cat "$rootfs_cpio" "$vmlinux_cpio" "$outer_kmods" "$work/overlay.cpio.gz" >"$work/initrd"

# --- 6. Boot the outer VM --------------------------------------------------------
log=$log_dir/qemu-pvrdma.log
say "booting the outer VM ($kver; inside: bookworm's QEMU 7.2 and the patched one; serial log: $log)"
# shellcheck disable=SC2054 # the commas belong to qemu's option syntax
qemu=(timeout --foreground -k 5 "$host_timeout"
	qemu-system-x86_64 -accel tcg -cpu max -m 3584 -smp 2
	-nographic -no-reboot -nodefaults -no-user-config -serial stdio
	-device isa-debug-exit,iobase=0xf4,iosize=0x04
	-kernel "$vmlinux" -initrd "$work/initrd"
	-append "console=ttyS0 rdinit=/init panic=-1 oops=panic loglevel=4 mitigations=off")
t_boot=$SECONDS
# Each console line gets the host's seconds since the boot in front, so
# the log shows where the time goes (the guests' clocks drift under TCG).
stamp() {
	local t0=${EPOCHREALTIME/./} line t
	while IFS= read -r line || [[ -n $line ]]; do
		t=$(((${EPOCHREALTIME/./} - t0) / 100000))
		printf '%5d.%d %s\n' $((t / 10)) $((t % 10)) "${line%$'\r'}"
	done
}
set +e
if ((verbose)); then
	"${qemu[@]}" </dev/null 2>&1 | stamp | tee "$log"
else
	"${qemu[@]}" </dev/null 2>&1 | stamp >"$log"
fi
qrc=${PIPESTATUS[0]}
set -e
t_end=$SECONDS

# --- 7. Verdict (qemu-verdict.sh) ------------------------------------------------
# shellcheck source-path=SCRIPTDIR source=qemu-verdict.sh disable=SC2154 # it sets failed
. "$here/qemu-verdict.sh"

say "timing: prepare $((t_prep - t_start)) s (the patched QEMU ready after $t_qemu s), outer VM $((t_end - t_boot)) s, total $((t_end - t_start)) s"
if ((failed)); then
	((verbose)) || show_log
	exit 1
fi
say "PASS"
exit 0
