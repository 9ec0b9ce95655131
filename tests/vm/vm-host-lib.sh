# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Host-side helpers for building the VM test initramfs (tests/vm): copying
# an ELF with the shared libraries ldd reports, and packing a cpio archive.
# Sourced by vm-mkbase.sh and vm-run.sh.

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

# vm_cpio DIR OUT: packs DIR into a gzip-compressed newc archive, OUT.
vm_cpio() {
	local dir=$1 out=$2
	(cd "$dir" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --quiet --null -o -H newc -R 0:0) | gzip -1 >"$out.tmp"
	mv "$out.tmp" "$out"
}

# Calls the caller's skip() (exit 77) unless qemu-system-x86_64 is installed
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
