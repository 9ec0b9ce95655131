#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Real-kernel test runner (tests/vm): boots Debian's stock kernel under
# qemu (TCG) with soft-RoCE and runs guest scenarios (guest/<name>.sh) in
# one boot. It fetches and caches the kernel and a base initramfs outside
# the source tree, packs this project's binaries into a per-run overlay,
# and reads the verdict from the serial console. See README.md.
#
# Exit status: 0 all scenarios passed, 1 a failure (including a guest hang
# or panic), 77 skipped (qemu cannot run, or no kernel package), 2 usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=vm-host-lib.sh
. "$here/vm-host-lib.sh"

# Project programs a scenario may ask for with a "# vm-needs: NAME..." line,
# and where meson builds them, relative to the build dir. They are installed
# in the guest as /usr/bin/NAME. Add new test clients here.
declare -A VM_PROGRAMS=(
	[umad-probe]=tests/vm/umad-probe
	[fd-store-keeper]=tests/vm/fd-store-keeper
	[rdmacm-mux]=daemon/rdmacm-mux
	[rdmacm-mux-pingpong]=examples/rdmacm-mux-pingpong
	[rdmacm-mux-qemu-client]=tests/tools/rdmacm-mux-qemu-client
	[rdmacm-muxctl]=tools/rdmacm-muxctl
)

usage() {
	cat <<EOF
usage: $0 --build-dir DIR [options] SCENARIO...
  --build-dir DIR          meson build dir holding the project's programs
  --timeout SECS           host limit for the whole VM run (default 300)
  --scenario-timeout SECS  guest limit for each scenario (default 90)
  --log-dir DIR            where serial logs go (default DIR/tests/vm/logs)
  -v, --verbose            show the serial console while it runs
  --list                   list the scenarios and exit
Scenarios are the files $here/guest/<name>.sh; they run in one boot, in the
order given. Cache: \${RDMACM_MUX_VM_CACHE:-\${XDG_CACHE_HOME:-\$HOME/.cache}/rdmacm-mux/vm}.
RDMACM_MUX_VM_KROOT=DIR uses an already unpacked kernel package instead of apt.
RDMACM_MUX_VM_QEMU_ARGS adds qemu arguments (word-split), for debugging.
EOF
}

build_dir='' host_timeout=300 scenario_timeout=90 log_dir='' verbose=0
scenarios=()
while (($#)); do
	case $1 in
	--build-dir) build_dir=${2:?}; shift 2 ;;
	--timeout) host_timeout=${2:?}; shift 2 ;;
	--scenario-timeout) scenario_timeout=${2:?}; shift 2 ;;
	--log-dir) log_dir=${2:?}; shift 2 ;;
	-v | --verbose) verbose=1; shift ;;
	--list)
		for f in "$here"/guest/*.sh; do basename "$f" .sh; done
		exit 0 ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "vm: unknown option $1" >&2; usage >&2; exit 2 ;;
	*) scenarios+=("$1"); shift ;;
	esac
done
if [[ -z $build_dir ]] || ((${#scenarios[@]} == 0)); then
	usage >&2
	exit 2
fi
build_dir=$(cd "$build_dir" && pwd)
log_dir=${log_dir:-$build_dir/tests/vm/logs}
cache=${RDMACM_MUX_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmacm-mux/vm}

t_start=$SECONDS
vm_runner vm

# --- 1. Can this host run the VM at all? -----------------------------------
vm_require_qemu
vm_require_host_tools busybox cpio depmod modinfo gzip ldd flock

# --- 2. Scenarios and the programs they need --------------------------------
declare -A needed=()
runnable=() broken=()
for s in "${scenarios[@]}"; do
	f=$here/guest/$s.sh
	[[ -f $f ]] || die "no such scenario: $s (see --list)"
	ok=1
	read -r -a wants <<<"$(sed -n 's/^# vm-needs://p' "$f" | tr '\n' ' ')"
	for p in "${wants[@]}"; do
		rel=${VM_PROGRAMS[$p]:-}
		if [[ -z $rel ]]; then
			echo "vm: scenario $s needs '$p', which is not in VM_PROGRAMS" >&2
			ok=0
		elif [[ ! -x $build_dir/$rel ]]; then
			echo "vm: scenario $s needs $build_dir/$rel, which is not built" >&2
			ok=0
		else
			needed[$p]=$build_dir/$rel
		fi
	done
	if ((ok)); then runnable+=("$s"); else broken+=("$s"); fi
done
((${#runnable[@]})) || die "no scenario can run: ${broken[*]}"

# --- 3. Kernel (cached per package version) and base initramfs --------------
mkdir -p "$cache" "$log_dir"
exec {lockfd}>"$cache/.lock"
flock "$lockfd"

# A newer kernel replaces the older ones (and their bases).
fetch_kernel() {
	vm_fetch_kernel
	kroot=$vm_kdir
	[[ -n ${vm_kpkg:-} ]] || return 0
	local k
	k=$(basename "$(echo "$kroot"/lib/modules/*)")
	find "$cache" -mindepth 1 -maxdepth 1 \( -name 'kernel-*' -o -name 'base-*' \) \
		! -path "$kroot" ! -name "base-$k-*" -exec rm -rf {} +
}

if [[ -n ${RDMACM_MUX_VM_KROOT:-} ]]; then
	kroot=$RDMACM_MUX_VM_KROOT
else
	fetch_kernel
fi
kver=$(basename "$(echo "$kroot"/lib/modules/*)")
vmlinuz=$kroot/boot/vmlinuz-$kver
[[ -f $vmlinuz ]] || die "no kernel image $vmlinuz"
# Under TCG, the bzImage spends about 3 s decompressing itself. When the kernel
# has PVH support, qemu can boot the uncompressed ELF directly, so unpack it once
# (the payload is an xz stream inside the bzImage).
kernel_image=$vmlinuz
if [[ -z ${RDMACM_MUX_VM_KROOT:-} ]] && command -v xz >/dev/null &&
	grep -qx 'CONFIG_PVH=y' "$kroot/boot/config-$kver" 2>/dev/null; then
	vmlinux=$kroot/vmlinux-$kver
	vm_extract_vmlinux "$vmlinuz" "$vmlinux" || true
	if [[ -f $vmlinux ]]; then kernel_image=$vmlinux; fi
fi

# The base depends on the kernel, the base builder and the host tools in it.
mapfile -t rdma_app < <(vm_rdma_app_files)
base_key=$(cat "$here/vm-mkbase.sh" "$here/vm-host-lib.sh" \
	"$(command -v busybox)" /usr/sbin/ip /usr/bin/rdma "${rdma_app[@]}" |
	sha256sum | cut -c1-12)
base=$cache/base-$kver-$base_key.cpio.gz
if [[ ! -f $base ]]; then
	say "building the base initramfs (once per kernel and tool set)"
	"$here/vm-mkbase.sh" "$kroot" "$kver" "$base"
	# Old bases for this kernel are useless now.
	find "$cache" -maxdepth 1 -name "base-$kver-*.cpio.gz" ! -path "$base" -delete
fi
exec {lockfd}>&-
t_prep=$SECONDS

# --- 4. Per-run overlay: guest scripts and the project's programs ----------
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-mux-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
ov=$work/overlay
mkdir -p "$ov/vm/scenarios" "$ov/usr/bin"
cp "$here/guest-init" "$ov/init"
chmod 755 "$ov/init"
cp "$here/guest-setup.sh" "$here/guest-lib.sh" "$ov/vm/"
for s in "${runnable[@]}"; do cp "$here/guest/$s.sh" "$ov/vm/scenarios/"; done
for p in "${!needed[@]}"; do
	vm_put_elf "$ov" "${needed[$p]}" "usr/bin/$p" ||
		die "cannot pack ${needed[$p]}"
done
vm_cpio "$ov" "$work/overlay.cpio.gz"
cat "$base" "$work/overlay.cpio.gz" >"$work/initrd"

# --- 5. Boot ------------------------------------------------------------------
name=$(IFS=+; echo "${runnable[*]}")
((${#name} <= 100)) || name=${name:0:100}
log=$log_dir/$name.log
list=$(IFS=,; echo "${runnable[*]}")
say "booting $kver with: ${runnable[*]} (serial log: $log)"
# shellcheck disable=SC2054 # the commas belong to qemu's option syntax
qemu=(timeout --foreground -k 5 "$host_timeout"
	qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 1
	-nographic -no-reboot -nodefaults -no-user-config -serial stdio
	-device isa-debug-exit,iobase=0xf4,iosize=0x04
	-kernel "$kernel_image" -initrd "$work/initrd"
	-append "console=ttyS0 panic=-1 oops=panic loglevel=4 vmtest=$list vmtimeout=$scenario_timeout")
read -r -a extra <<<"${RDMACM_MUX_VM_QEMU_ARGS:-}"
qemu+=("${extra[@]}")
t_boot=$SECONDS
vm_boot "$log" "$verbose" "${qemu[@]}"
t_end=$SECONDS

# --- 6. Verdict from the serial markers (qemu's status is only a hint) ------
clean=$(tr -d '\r' <"$log")
show_log() {
	echo "----- serial log ($log) -----"
	printf '%s\n' "$clean"
	echo "----- end of serial log -----"
}
failed=0
result=$(grep -o 'VMTEST-RESULT rc=[0-9]*' <<<"$clean" | tail -n 1 | cut -d= -f2 || true)
if [[ -z $result ]]; then
	failed=1
	if ((qrc == 124 || qrc == 137)); then
		echo "vm: FAIL: the guest did not finish within ${host_timeout}s (hang)" >&2
	else
		echo "vm: FAIL: the guest stopped without a verdict (panic or crash; qemu status $qrc)" >&2
	fi
fi
for s in "${runnable[@]}"; do
	m=$(grep -o "VMTEST-SCENARIO $s rc=[0-9]* secs=[0-9.]*" <<<"$clean" | tail -n 1 || true)
	if [[ -z $m ]]; then
		echo "vm: FAIL $s (no result)"
		failed=1
	elif [[ $m == *" rc=0 "* ]]; then
		echo "vm: PASS $s (${m##*secs=} s)"
	else
		echo "vm: FAIL $s (${m#*"$s "})"
		failed=1
	fi
done
for s in "${broken[@]}"; do
	echo "vm: FAIL $s (a program it needs is not built; see above)"
	failed=1
done
if [[ -n $result ]] && ((result != 0)) && ((!failed)); then
	echo "vm: FAIL: the guest reported rc=$result"
	failed=1
fi
say "timing: prepare $((t_prep - t_start)) s, boot+run $((t_end - t_boot)) s, total $((t_end - t_start)) s"
if ((failed)); then
	((verbose)) || show_log
	exit 1
fi
exit 0
