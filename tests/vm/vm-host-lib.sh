# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Host-side helpers for building the VM test initramfs (tests/vm): copying
# an ELF with the shared libraries ldd reports, and packing a cpio archive.
# Also fetches and caches Debian's kernel. Sourced by vm-mkbase.sh,
# vm-run.sh, tests/vm-systemd/vmsd-run.sh and tests/qemu/qemu-pvrdma.sh.

# The path a host file gets in the guest's merged-/usr root: /lib64/x goes
# to usr/lib64/x (the base has lib64 -> usr/lib64), /lib/x to usr/lib/x, and
# any other path is kept as it is (minus the leading slash). An overlay must
# never carry a top-level lib, lib64, bin or sbin directory: it would clash
# with the base's symlinks.
vm_guest_path() {
	local p=${1#/}
	case $p in
	lib/* | lib64/* | bin/* | sbin/*) p=usr/$p ;;
	esac
	printf '%s\n' "$p"
}

# vm_copy_file ROOT SRC [DEST]: copies SRC (dereferenced) to ROOT/DEST,
# where DEST defaults to SRC's guest path.
vm_copy_file() {
	local root=$1 src=$2 dest=${3:-}
	[[ -n $dest ]] || dest=$(vm_guest_path "$src")
	mkdir -p "$root/$(dirname "$dest")"
	cp -L "$src" "$root/$dest"
}

# vm_put_elf ROOT SRC [DEST]: copies a dynamically linked ELF and every
# library ldd resolves for it. A library ldd cannot find is an error. A
# library outside the system directories (a build tree's own library,
# found through RUNPATH $ORIGIN/..., which means nothing in the guest) goes
# to /usr/lib/x86_64-linux-gnu, which is on the guest's library path.
vm_put_elf() {
	local root=$1 src=$2 dest=${3:-} out lib
	vm_copy_file "$root" "$src" "$dest"
	if ! out=$(ldd "$src" 2>&1); then
		# Static executables: nothing more to copy.
		[[ $out == *"not a dynamic executable"* ]] && return 0
		echo "vm: ldd $src failed: $out" >&2
		return 1
	fi
	if [[ $out == *"not found"* ]]; then
		echo "vm: $src has unresolved libraries:" >&2
		grep 'not found' <<<"$out" >&2
		return 1
	fi
	while read -r lib; do
		case $lib in
		'') ;;
		/lib/* | /lib64/* | /usr/lib/* | /usr/lib64/*) vm_copy_file "$root" "$lib" ;;
		*) vm_copy_file "$root" "$lib" "usr/lib/x86_64-linux-gnu/${lib##*/}" ;;
		esac
	done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3; next }
		$1 ~ /^\// { print $1 }' <<<"$out")
}

# The host's own rdma_cm application that the base image carries (for
# host-cm-coexist): rping from rdmacm-utils, and what is loaded by name,
# which ldd does not show: libibverbs' rxe provider and that provider's
# driver file, and libgcc_s, which glibc loads for a thread's exit. Prints
# the ones this host has (scripts/setup.sh installs them); without them
# the base is made anyway, and the scenario fails.
vm_rdma_app_files() {
	local f
	for f in /usr/bin/rping /etc/libibverbs.d/rxe.driver \
		/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so \
		/usr/lib/x86_64-linux-gnu/libgcc_s.so.1; do
		[[ -e $f ]] && echo "$f"
	done
	return 0
}

# vm_cpio DIR OUT: packs DIR into a gzip-compressed newc archive, OUT.
vm_cpio() {
	local dir=$1 out=$2
	(cd "$dir" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --quiet --null -o -H newc -R 0:0) | gzip -1 >"$out.tmp"
	mv "$out.tmp" "$out"
}

# ---- every runner's messages ------------------------------------------------
# vm_runner NAME: say, skip and die print "NAME: ..."; skip exits 77 (meson's
# SKIP), die exits 1. The helpers below call them too.
vm_runner_name=vm
vm_runner() {
	vm_runner_name=$1
}
say() { echo "$vm_runner_name: $*"; }
skip() {
	echo "$vm_runner_name: SKIP: $*"
	exit 77
}
die() {
	echo "$vm_runner_name: FAIL: $*" >&2
	exit 1
}

# Skips unless every host tool named is installed.
vm_require_host_tools() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null ||
			skip "host tool '$tool' is missing (scripts/setup.sh installs it)"
	done
}

# Calls skip() (exit 77) unless qemu-system-x86_64 is installed
# and can start here: a host that cannot run qemu skips, it never passes.
vm_require_qemu() {
	local qerr
	command -v qemu-system-x86_64 >/dev/null ||
		skip "qemu-system-x86_64 is not installed (scripts/setup.sh installs it)"
	if ! qerr=$(timeout 30 qemu-system-x86_64 -accel tcg -machine none \
		-nodefaults -display none -monitor stdio -S <<<quit 2>&1); then
		skip "qemu-system-x86_64 cannot start: ${qerr:-no output}"
	fi
}

# ---- Debian's kernel, fetched from its package and cached ------------------
# The callers set $cache (their cache directory).

# The linux-image package that linux-image-amd64 depends on, or nothing.
vm_kernel_pkg() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }' || true
}

# Sets vm_kpkg and vm_kver (the package and its version) and vm_kdir, the
# cache entry $cache/kernel-PKG_VERSION. Without apt lists it runs
# apt-get update once (as root); offline it falls back to the newest
# complete cache entry and returns 1 with vm_kpkg empty. Skips when
# neither works.
vm_resolve_kernel() {
	vm_kpkg=$(vm_kernel_pkg)
	if [[ -z $vm_kpkg ]] && ((EUID == 0)); then
		say "apt-cache cannot resolve linux-image-amd64; running apt-get update"
		apt-get update -q >"$cache/apt-update.log" 2>&1 || true
		vm_kpkg=$(vm_kernel_pkg)
	fi
	if [[ -z $vm_kpkg ]]; then
		vm_kdir=$(find "$cache" -maxdepth 2 -name .complete -path '*/kernel-*' \
			-printf '%T@ %h\n' 2>/dev/null | sort -n | tail -n 1 | cut -d' ' -f2-)
		[[ -n $vm_kdir ]] ||
			skip "cannot resolve the kernel package behind linux-image-amd64 (apt lists missing?)"
		say "using cached kernel $vm_kdir (apt cannot resolve linux-image-amd64)"
		return 1
	fi
	vm_kver=$(apt-cache show --no-all-versions "$vm_kpkg" 2>/dev/null |
		awk '/^Version:/ { print $2; exit }' || true)
	[[ -n $vm_kver ]] || skip "apt-cache shows no version of $vm_kpkg"
	vm_kdir=$cache/kernel-${vm_kpkg}_${vm_kver//:/%}
}

# apt-get download PKG... into DIR (apt's sandbox user must be able to
# write there); the log goes to $cache/apt-download.log.
vm_apt_download() {
	local dir=$1
	shift
	if ((EUID == 0)) && id _apt >/dev/null 2>&1; then chown _apt "$dir"; fi
	(cd "$dir" && apt-get download -q "$@") >"$cache/apt-download.log" 2>&1
}

# Unpacks the kernel image package DEB into ROOT, with the modules.dep the
# package does not ship.
vm_unpack_kernel() {
	local deb=$1 root=$2 k
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	k=$(basename "$(echo "$root"/lib/modules/*)")
	depmod -b "$root" "$k"
}

# Resolves the kernel and, unless cached already, downloads and unpacks it
# into vm_kdir (marked complete only once whole).
vm_fetch_kernel() {
	local tmp
	vm_resolve_kernel || return 0
	[[ -f $vm_kdir/.complete ]] && return 0
	say "fetching $vm_kpkg $vm_kver (once; cached in $vm_kdir)"
	tmp=$(mktemp -d "$cache/fetch.XXXXXX")
	if ! vm_apt_download "$tmp" "$vm_kpkg=$vm_kver"; then
		rm -rf "$tmp"
		skip "cannot download $vm_kpkg: $(tail -n 3 "$cache/apt-download.log")"
	fi
	vm_unpack_kernel "$tmp"/*.deb "$tmp/root"
	touch "$tmp/root/.complete"
	rm -rf "$vm_kdir"
	mv "$tmp/root" "$vm_kdir"
	rm -rf "$tmp"
}

# Writes OUT, the uncompressed ELF inside the bzImage VMLINUZ (an xz
# stream), unless it exists. Under TCG the bzImage spends seconds
# decompressing itself; a kernel with PVH support boots the ELF directly.
# Returns 1 when it cannot be had.
vm_extract_vmlinux() {
	local vmlinuz=$1 out=$2 off
	[[ -f $out ]] && return 0
	command -v xz >/dev/null || return 1
	off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -n 1 | cut -d: -f1 || true)
	if [[ -n $off ]] &&
		xz -dc --single-stream <(tail -c +$((off + 1)) "$vmlinuz") >"$out.tmp" 2>/dev/null &&
		[[ $(head -c 4 "$out.tmp") == $'\x7fELF' ]]; then
		mv "$out.tmp" "$out"
		return 0
	fi
	rm -f "$out.tmp"
	return 1
}

# Boot the qemu command line "$@" with no stdin; its output goes to the
# file $1, and to stdout too when $2 is 1. Sets qrc to qemu's status.
# shellcheck disable=SC2034 # qrc is the runner's
vm_boot() {
	local log=$1 verbose=$2
	shift 2
	set +e
	if ((verbose)); then
		"$@" </dev/null 2>&1 | tee "$log"
		qrc=${PIPESTATUS[0]}
	else
		"$@" </dev/null >"$log" 2>&1
		qrc=$?
	fi
	set -e
}

# A bookworm rootfs at $2 of the "essential" set plus the packages $1
# (comma-separated), without man pages, locales, docs or info, from the
# sources list $3; mmdebstrap's output goes to $4. Returns its status.
vm_mmdebstrap() {
	mmdebstrap --quiet --variant=essential --include="$1" \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		bookworm "$2" "$3" >"$4" 2>&1
}
