#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The live demo: two hosts on the simulated fabric, one rdmacm-mux daemon
# each, and several "VMs" (rdmacm-mux-pingpong, built on librdmacm-mux)
# that set up CM connections through them: full REQ/REP/RTU then DREQ/DREP
# across hosts and within a host, a SIDR query, and a rejected connection.
# Every MAD that crosses a daemon is traced, decoded, with its client and
# wire comm ids; the daemons print their counters when they stop.
#
# Usage: scripts/demo.sh   (builds under build/ first if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD_DIR:-build}

if [[ ! -f $build/build.ninja ]]; then
	meson setup "$build" >/dev/null
fi
ninja -C "$build" daemon/rdmacm-mux examples/rdmacm-mux-pingpong tools/rdmacm-muxctl \
	tests/sim/umad-sim tests/sim/libumad-sim.so >/dev/null

mux=$root/$build/daemon/rdmacm-mux
pingpong=$root/$build/examples/rdmacm-mux-pingpong
sim_cli=$root/$build/tests/sim/umad-sim
sim_lib=$root/$build/tests/sim/libumad-sim.so

# shellcheck source-path=SCRIPTDIR source=lib-cleanup.sh
. scripts/lib-cleanup.sh
work=$(mktemp -d /tmp/rdmacm-mux-demo.XXXXXX)
cleanup_dir=$work

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "A simulated fabric: host A (simA) and host B (simB), one RoCE port each"
"$sim_cli" create "$work/fabric" --preset two-hosts | sed 's/^/   /'

export UMAD_SIM_FABRIC=$work/fabric SYSFS_PATH=$work/fabric/sys
start_daemon() { # ca
	LD_PRELOAD=$sim_lib "$mux" -d "$1" -s "$work/mux" --trace \
		--closing-timeout 2000 2>"$work/$1.log" &
	pids+=($!)
	for _ in $(seq 100); do
		[[ -S $work/mux-$1-1 ]] && return 0
		sleep 0.05
	done
	echo "rdmacm-mux on $1 did not start:" >&2
	cat "$work/$1.log" >&2
	exit 1
}

say "Two daemons: rdmacm-mux -d simA and rdmacm-mux -d simB"
start_daemon simA
start_daemon simB
echo "   sockets: $work/mux-simA-1 and $work/mux-simB-1"

sock_a=$work/mux-simA-1
sock_b=$work/mux-simB-1
vm() { # name socket gid args...
	local name=$1 sock=$2 gid=$3
	shift 3
	"$pingpong" -n "$name" -S "$sock" -g "$gid" "$@"
}

muxctl=$root/$build/tools/rdmacm-muxctl
say "The operator assigns b1 its GID on host B: rdmacm-muxctl vm add b1 --gid ::ffff:10.0.2.1"
"$muxctl" -d simB -s "$work/mux" vm add b1 --gid ::ffff:10.0.2.1 | sed 's/^/   /'
vm_sock_b1=$sock_b.vm/b1.sock
echo "   b1 connects on its own socket, $vm_sock_b1"

say "VMs b1-b4 on host B and a4 on host A serve; b4 rejects service 0x1060bad"
vm b1 "$vm_sock_b1" ::ffff:10.0.2.1 serve -c 2 &
servers=($!)
vm b2 "$sock_b" ::ffff:10.0.2.2 serve -c 1 &
servers+=($!)
vm b3 "$sock_b" ::ffff:10.0.2.3 serve -c 1 &
servers+=($!)
vm b4 "$sock_b" ::ffff:10.0.2.4 serve -c 1 --reject 0x1060bad &
servers+=($!)
vm a4 "$sock_a" ::ffff:10.0.1.4 serve -c 1 &
servers+=($!)
sleep 0.5
status=0

say "A neighbour on host B's shared socket asks for b1's GID: refused"
if vm thief "$sock_b" ::ffff:10.0.2.1 serve -c 1 2>&1 | sed 's/^/   /'; then
	echo "   the neighbour got b1's GID" >&2
	status=1
fi

say "VMs on host A connect. Note that every VM uses comm id 1: the daemons remap them"
vm a1 "$sock_a" ::ffff:10.0.1.1 connect ::ffff:10.0.2.1 -c 2 &
clients=($!)
vm a2 "$sock_a" ::ffff:10.0.1.2 connect ::ffff:10.0.2.2 &
clients+=($!)
vm a3 "$sock_a" ::ffff:10.0.1.3 sidr ::ffff:10.0.2.3 &
clients+=($!)
vm a5 "$sock_a" ::ffff:10.0.1.5 connect ::ffff:10.0.2.4 --service 0x1060bad &
clients+=($!)
vm a6 "$sock_a" ::ffff:10.0.1.6 connect ::ffff:10.0.1.4 &
clients+=($!)
for p in "${clients[@]}" "${servers[@]}"; do
	wait "$p" || status=1
done

say "Host B's VMs: rdmacm-muxctl -d simB vms"
"$muxctl" -d simB -s "$work/mux" vms | sed 's/^/   /'

say "Stopping the daemons; their counters"
for p in "${pids[@]}"; do kill -TERM "$p"; done
for p in "${pids[@]}"; do wait "$p" || status=1; done
pids=()
for ca in simA simB; do
	sed -n '/^counters for/,$p' "$work/$ca.log" | grep -v 'shut down' | sed 's/^/   /'
done

if ((status == 0)); then
	say "Demo finished: every connection, the SIDR query and the rejection went through"
else
	say "Demo FAILED (see the output above)"
fi
exit "$status"
