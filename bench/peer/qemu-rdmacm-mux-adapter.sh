#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Runs QEMU's contrib/rdmacm-mux with rdmacm-mux's command line, so that
# rdmacm-mux-bench can start it where it starts our daemon (the peer rows).
#
# usage: qemu-rdmacm-mux-adapter.sh [rdmacm-mux options]
#   -d/--device CA, -p/--port N and --socket PATH are translated; every other
#   option of ours has no counterpart there and is dropped.
# Environment:
#   RDMACM_MUX_PEER_BIN       QEMU's rdmacm-mux binary (required)
#   RDMACM_MUX_PEER_NOSYSLOG  a shared object to preload too, e.g. the
#                             bench's no-op syslog() (the peer's best case)
#
# QEMU's mux takes a socket path prefix (-s) and listens on PREFIX-CA-PORT;
# --socket PATH becomes a symbolic link to that name (connect() follows it).
# It never removes its socket, and bind() fails on a stale one: both names
# are removed first. The adapter ends in exec, so the bench's PID, signals
# and PR_SET_PDEATHSIG reach the peer itself.
set -euo pipefail

peer=${RDMACM_MUX_PEER_BIN:?RDMACM_MUX_PEER_BIN names QEMU\'s rdmacm-mux}
ca='' port=1 sock=''
while (($#)); do
	case $1 in
	-d | --device) ca=$2; shift ;;
	--device=*) ca=${1#*=} ;;
	-p | --port) port=$2; shift ;;
	--port=*) port=${1#*=} ;;
	--socket) sock=$2; shift ;;
	--socket=*) sock=${1#*=} ;;
	# our flags without a value
	--require-port-gid | --no-fd-store | --trace | --version) ;;
	--*=*) ;;
	-*) shift ;; # one of our options with a value: no counterpart
	*) echo "qemu-rdmacm-mux-adapter: unexpected argument $1" >&2; exit 2 ;;
	esac
	shift
done
[[ -n $ca && -n $sock ]] || { echo "qemu-rdmacm-mux-adapter: need -d CA and --socket PATH" >&2; exit 2; }

prefix=$sock.qemu
rm -f -- "$sock" "$prefix-$ca-$port"
ln -s -- "$(basename -- "$prefix")-$ca-$port" "$sock"
if [[ -n ${RDMACM_MUX_PEER_NOSYSLOG:-} ]]; then
	export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$RDMACM_MUX_PEER_NOSYSLOG
fi
exec "$peer" -d "$ca" -p "$port" -s "$prefix"
