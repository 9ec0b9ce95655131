#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Socket activation without systemd as PID 1: systemd-socket-activate
# listens on a path, starts rdmacm-mux (on the simulated fabric) at the
# first connect and passes it the listening socket through LISTEN_FDS, as
# rdmacm-mux@.socket and rdmacm-mux-control@.socket do (the main socket and
# the control socket, named "main" and "control"). Checks that the daemon
# serves a full CM handshake between two rdmacm-mux-pingpong clients on the
# main socket and answers "status" on the control socket, that it took the
# passed sockets instead of binding its own, that it leaves the socket files
# alone when it stops, and that it refuses two unnamed sockets.
#
# Environment (set by meson): RDMACM_MUX_BIN UMAD_SIM_LIB UMAD_SIM_CLI
# PINGPONG_BIN.
set -euo pipefail

if ! command -v systemd-socket-activate >/dev/null; then
	echo "SKIP: systemd-socket-activate is not installed"
	exit 77
fi

# shellcheck source-path=SCRIPTDIR source=../../scripts/lib-cleanup.sh
. "$(dirname "$0")/../../scripts/lib-cleanup.sh"
tmp=$(mktemp -d)
cleanup_dir=$tmp

fail() {
	echo "not ok: $*" >&2
	for f in "$tmp"/*.log; do
		[[ -f $f ]] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

"$UMAD_SIM_CLI" create "$tmp/fabric" --preset two-hosts >/dev/null
sim_env=(-E "LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$UMAD_SIM_LIB"
	-E "UMAD_SIM_FABRIC=$tmp/fabric" -E "SYSFS_PATH=$tmp/fabric/sys")
# systemd-socket-activate passes on only what -E names: a sanitizer build
# needs its options in the daemon too.
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
	[[ -n ${!v:-} ]] && sim_env+=(-E "$v=${!v}")
done

# Start the daemon on simA under systemd-socket-activate with the
# listening options "${@:3}" and its stderr in $1, and wait (5 s at most)
# until $2, a socket it listens on, is there. Sets $activated to its pid.
# --socket names a path the daemon would bind if it ignored LISTEN_FDS (and
# PATH.ctl, its control socket, if it ignored the one named "control").
activate() {
	local log=$1 socket=$2
	shift 2
	systemd-socket-activate "$@" "${sim_env[@]}" \
		"$RDMACM_MUX_BIN" -d simA --socket "$tmp/self-bound" 2>"$log" &
	activated=$!
	pids+=("$activated")
	for _ in $(seq 100); do
		[[ -S $socket ]] && break
		sleep 0.05
	done
}

activate "$tmp/daemon.log" "$tmp/sock" -l "$tmp/sock" -l "$tmp/sock.ctl" --fdname=main:control
daemon=$activated
[[ -S $tmp/sock ]] || fail "systemd-socket-activate did not listen on $tmp/sock"
grep -q 'serving' "$tmp/daemon.log" && fail "the daemon started before the first connect"
echo "ok: listening, daemon not started yet"

# The server's connect starts the daemon; its registration must succeed.
"$PINGPONG_BIN" -n server -S "$tmp/sock" -g ::ffff:10.0.1.4 serve -c 1 \
	>"$tmp/server.log" 2>&1 &
server=$!
pids+=("$server")
for _ in $(seq 100); do
	grep -q 'registered' "$tmp/server.log" && break
	sleep 0.05
done
grep -q 'registered ::ffff:10.0.1.4' "$tmp/server.log" ||
	fail "the server client did not register through the activated daemon"
echo "ok: first connect started the daemon and a client registered"

"$PINGPONG_BIN" -n client -S "$tmp/sock" -g ::ffff:10.0.1.1 connect ::ffff:10.0.1.4 \
	>"$tmp/client.log" 2>&1 || fail "the CM handshake through the activated daemon failed"
wait "$server" || fail "the server client failed"
grep -q 'established' "$tmp/client.log" || fail "the client saw no established connection"
grep -q 'closed' "$tmp/client.log" || fail "the client saw no disconnect"
echo "ok: REQ/REP/RTU and DREQ/DREP between two clients on the passed socket"

grep -q 'serving the socket passed by systemd' "$tmp/daemon.log" ||
	fail "the daemon did not say it serves the passed socket"
[[ -e $tmp/self-bound ]] && fail "the daemon bound $tmp/self-bound itself"
[[ -e $tmp/self-bound.ctl ]] && fail "the daemon bound its own control socket"
echo "ok: the daemon served the passed socket and bound none of its own"

# The control socket that was passed answers (one command per connection).
status=$(python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b"status\n")
out = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    out += b
print(out.decode())' "$tmp/sock.ctl") || fail "the passed control socket did not answer"
grep -q simA <<<"$status" || fail "status on the control socket does not name simA: $status"
grep -q '^error' <<<"$status" && fail "status on the control socket failed: $status"
echo "ok: the passed control socket answers status"

kill -TERM "$daemon"
rc=0
wait "$daemon" || rc=$?
((rc == 0)) || fail "the daemon exited $rc after SIGTERM"
[[ -S $tmp/sock && -S $tmp/sock.ctl ]] || fail "the daemon removed a socket it did not create"
echo "ok: clean exit on SIGTERM, the passed sockets left in place"

# Two unnamed sockets: two main sockets, which the daemon must refuse.
activate "$tmp/two.log" "$tmp/sock3" -l "$tmp/sock2" -l "$tmp/sock3"
two=$activated
# Any connect starts it; it must exit 1 without accepting.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' \
	"$tmp/sock2" 2>/dev/null || true
rc=0
wait "$two" || rc=$?
((rc == 1)) || fail "with two sockets the daemon exited $rc, not 1"
grep -q 'systemd passed two main sockets' "$tmp/two.log" || fail "no message about two main sockets"
echo "ok: two unnamed passed sockets are refused (exit 1)"
