# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# The verdict of tests/qemu: checks the serial log of a run ($log) line by
# line and phase by phase, prints "qemu: ok ..." or "qemu: FAIL ..." for
# each, and sets failed=1 if any failed. Sourced by qemu-pvrdma.sh, after a
# run or for --judge LOG; reads $log, $qrc (the outer qemu's status) and
# $host_timeout, and sets $failed for it.
# shellcheck disable=SC2154,SC2034 # the variables are qemu-pvrdma.sh's
clean=$(sed -E 's/^ *[0-9]+\.[0-9] //' "$log")
show_log() {
	echo "----- serial log ($log; host seconds since boot first) -----"
	cat "$log"
	echo "----- end of serial log -----"
}
failed=0
# check_in TEXT DESCRIPTION REGEX: a line of TEXT (the log, or a phase of
# it) matches REGEX.
check_in() {
	if grep -Eq -- "$3" <<<"$1"; then
		echo "qemu: ok   $2"
	else
		echo "qemu: FAIL $2 (no line matches /$3/)"
		failed=1
	fi
}
# check_not_in TEXT DESCRIPTION REGEX: no line of TEXT matches REGEX; a
# phase that never came is a failure, not a pass.
check_not_in() {
	local m
	if [[ -z $1 ]]; then
		echo "qemu: FAIL $2: the run never got to that phase"
		failed=1
	elif m=$(grep -E -m 3 -- "$3" <<<"$1"); then
		echo "qemu: FAIL $2:"
		printf '        %s\n' "$m"
		failed=1
	else
		echo "qemu: ok   $2"
	fi
}
check() { check_in "$clean" "$@"; }         # description, regex: in the whole log
check_not() { check_not_in "$clean" "$@"; } # description, regex: nowhere in it
check_count() { # description, regex, expected count
	local n
	n=$(grep -Ec -- "$2" <<<"$clean" || true)
	if ((n == $3)); then
		echo "qemu: ok   $1 ($n)"
	else
		echo "qemu: FAIL $1: $n lines match /$2/, expected $3"
		failed=1
	fi
}

if ! grep -q 'OUTER-RESULT' <<<"$clean"; then
	if ((qrc == 124 || qrc == 137)); then
		echo "qemu: FAIL: the outer VM did not finish within ${host_timeout}s"
	else
		echo "qemu: FAIL: the outer VM stopped without a verdict (qemu status $qrc)"
	fi
	failed=1
fi
A='^muxA\| \[rxe0:1\]' B='^muxB\| \[rxe1:1\]'
# The log in phases, cut at the outer VM's actions on the rxe0 daemon.
phase() { # FROM-regex TO-regex: the lines from the first match of FROM on,
	# before the first match of TO after it ('' for: to the end)
	awk -v from="$1" -v to="$2" 'on && to != "" && $0 ~ to { exit }
		$0 ~ from { on = 1 } on' <<<"$clean"
}
before_term=$(phase '.' 'outer: .*ACTION term: SIGTERM')
term=$(phase 'outer: .*ACTION term: SIGTERM' 'outer: .*ACTION kill:')
# Stock QEMU's guest is not waited for after term (it has no daemon any
# more): its rdma_client 3 may end while the next steps run.
after_term=$(phase 'outer: .*ACTION term: SIGTERM' '')
kill9=$(phase 'outer: .*ACTION kill:' 'outer: .*ACTION down:')
down=$(phase 'outer: .*ACTION down: SIGTERM' 'outer: .*ACTION down: the rxe0 daemon was away')
after_down=$(phase 'outer: .*ACTION down: the rxe0 daemon was away' '')
check "outer VM set up rxe0, rxe1, both daemons and the responder" '^OUTER-READY'

# remapped G TXATTR RXATTR: guest G's comm id went out under another wire
# id, and the answer came back to the guest's own id.
remapped() {
	local tx c w gid=::ffff:10\\.0\\.$1\\.15
	tx=$(grep -E -m 1 "$A TX +$2 .*$gid -> " <<<"$clean" || true)
	if [[ ! $tx =~ comm\ (0x[0-9a-f]+)\ -\>\ wire\ (0x[0-9a-f]+) ]]; then
		echo "qemu: FAIL no $2 from $gid sent by the rxe0 daemon"
		failed=1
		return
	fi
	c=${BASH_REMATCH[1]} w=${BASH_REMATCH[2]}
	if [[ $c == "$w" ]]; then
		echo "qemu: FAIL $2: comm id $c was not remapped"
		failed=1
	elif grep -Eq "$A RX +$3 .*wire $w -> comm $c " <<<"$clean"; then
		echo "qemu: ok   $2 from $gid: comm $c went out as wire $w; $3 came back to $c"
	else
		echo "qemu: FAIL no $3 for wire $w routed back to comm $c"
		failed=1
	fi
}
# cm_flows G NET: SIDR and RC through both daemons for guest G (10.0.NET.15):
# the daemon sends to the responder, not back to the guest (QEMU's own
# addr.gid quirk, or the patched QEMU's real destination).
cm_flows() {
	local g=$1 gid=::ffff:10\\.0\\.$2\\.15 peer=::ffff:10\\.0\\.0\\.2
	check "$g: SIDR_REQ sent to the responder, not back to the guest" "$A TX +SIDR_REQ .*$gid -> $peer$"
	check "$g: SIDR_REQ arrives at the rxe1 daemon" "$B RX +SIDR_REQ .*$gid -> $peer"
	remapped "$2" SIDR_REQ SIDR_REP
	check "$g: the guest's rdma_cm resolved the SIDR (ESTABLISHED)" \
		"^guest$g\\| .*cm_event_done: .*dst=10\\.0\\.0\\.2:7174 .*ESTABLISHED"
	check "$g: udaddy finished with status 0" "^guest$g\\| .*INNER-UDADDY rc=0"
	check "$g: REQ sent to the responder, not back to the guest" "$A TX +REQ .*$gid -> $peer$"
	check "$g: REQ arrives at the rxe1 daemon" "$B RX +REQ .*$gid -> $peer"
	remapped "$2" REQ REP
	check "$g: the guest's rdma_cm got the REP (CONNECT_RESPONSE)" \
		"^guest$g\\| .*cm_event_done: .*dst=10\\.0\\.0\\.2:7471 .*CONNECT_RESPONSE"
	check "$g: the guest's CM sent the RTU" "^guest$g\\| .*cm_send_rtu: .*dst=10\\.0\\.0\\.2:7471"
	check "$g: rdma_client connected" "^guest$g\\| .*INNER-RDMA-CLIENT1 connected"
}
# connected G N PHASE: rdma_client N of guest G connected, in PHASE.
connected() {
	check_in "$3" "$1: rdma_client $2 connected" "^guest$1\\| .*INNER-RDMA-CLIENT$2 connected"
}

echo "qemu: --- S: Debian's stock QEMU 7.2, mad-chardev (compatibility) ---"
check "S: QEMU realized the pvrdma device on rxe0" '^guestS\| .*rdma: Initializing device pvrdma'
check "S: QEMU came in on its VM's own socket (vms.d guestS)" \
	'^muxA\| rdmacm-mux: client [0-9]+ connected on fd [0-9]+: .*, VM guestS$'
# REG: QEMU traces each GID it adds (rdma_backend_gid_change), then its
# request to the mux and the mux's answer (rdmacm_mux_check_op_status).
regs=$(awk '/^traceS\| rdma_backend_gid_change add / { g = $4 " " $5; next }
	g != "" && /^traceS\| rdmacm_mux_check_op_status resp: msg_type=1, op_code=0,/ {
		print g, $NF; g = "" }' <<<"$clean")
for g in 'subnet=0xfe80000000000000, ifid=0x505400fffe123456 err_code=0' \
	'subnet=0xfec0000000000000, ifid=0x505400fffe123456 err_code=0' \
	'subnet=0x0, ifid=0xffff0a00020f err_code=0'; do
	if grep -qxF "$g" <<<"$regs"; then
		echo "qemu: ok   S: REG accepted: $g"
	else
		echo "qemu: FAIL S: REG not accepted: $g (QEMU saw: ${regs//$'\n'/; })"
		failed=1
	fi
done
check_not_in "$before_term" "S: no refused request or failed mux exchange before the daemon stops" \
	'^(guest|trace)S\| .*(rdmacm_mux_check_op_status resp: .*err_code=[1-9]|Failed to execute rdmacm_mux|Failed to send request)'
check_count "the daemon logs QEMU's own-GID addr.gid once: for S, never for P" \
	'^muxA\| .*puts its own GID in addr\.gid, as QEMU does' 1
cm_flows S 2
check "S: the guest's CM sent DREQ when rdma_client ended" "$A TX +DREQ .*::ffff:10\\.0\\.2\\.15 -> "
check "S: DREP routed back to QEMU" "$A RX +DREP .* -> ::ffff:10\\.0\\.2\\.15"
# hup: the daemon executes itself again between two connections; QEMU is
# not told and never registers its GIDs again.
check "the rxe0 daemon executed itself again under the running QEMUs" \
	'^muxA\| .*took over [1-9][0-9]* clients from the previous process'
connected S 2 "$before_term"
# term, the EXPECTED FAILURE: the daemon stops without an fd store (as
# systemctl stop does) and a new one starts. QEMU 7.2 never reconnects a
# chardev without reconnect= (and with it would never register its GIDs
# again): the guest's connect fails, and the new daemon never hears of S.
# This is what the patches change; if it ever connects, this test is wrong.
if grep -Eq '^guestS\| .*INNER-RDMA-CLIENT3 rc=[1-9]' <<<"$after_term" &&
	! grep -Eq '^guestS\| .*INNER-RDMA-CLIENT3 connected' <<<"$clean"; then
	echo "qemu: ok   S: EXPECTED FAILURE: after the daemon's stop and start, stock QEMU 7.2 cannot connect"
else
	echo "qemu: FAIL S: the expected failure did not happen: stock QEMU's rdma_client 3 did not fail after the restart"
	failed=1
fi
check_not_in "$after_term" "S: the new daemons never registered S's GIDs (stock QEMU does not reconnect)" \
	'^muxA\| .*registered GID ::ffff:10\.0\.2\.15'
check "S: the guest finished its steps" '^guestS\| .*INNER-DONE rc=0'

echo "qemu: --- P: QEMU 7.2 with contrib/qemu's patches, mad-socket through librdmacm-mux ---"
check "P: QEMU came in on its VM's own socket (vms.d guestP)" \
	'^muxA\| rdmacm-mux: client [0-9]+ connected on fd [0-9]+: .*, VM guestP$'
check "P: QEMU connected through librdmacm-mux" \
	'^traceP\| rdmacm_mux_lib_connected /run/rdmacm-mux-rxe0-1\.vm/guestP\.sock: '
for g in 'subnet=0xfe80000000000000, ifid=0x505400fffe123457' \
	'subnet=0xfec0000000000000, ifid=0x505400fffe123457' 'subnet=0x0, ifid=0xffff0a00030f'; do
	check_in "$before_term" "P: REG through the library accepted: $g" \
		"^traceP\\| rdmacm_mux_lib_gid reg $g err=0$"
done
check_not "P: no MAD the library could not queue, no refused GID" \
	'^traceP\| rdmacm_mux_lib_(mads_dropped|dropped) |^traceP\| rdmacm_mux_lib_gid reg .*err=-'
check_not "P: QEMU never failed a MAD (gid index, CQ)" '^guestP\| .*(Failed to get bk sgid_idx|CQ is full)'
# 1. rdma_client connects; addr.gid is the real destination (the daemon's
# own-GID line above stays at S's one).
cm_flows P 3
check_not_in "$before_term" "P: no reconnection at the daemon's re-execution (it keeps its clients)" \
	'^traceP\| rdmacm_mux_lib_reconnecting '
connected P 2 "$before_term"
# 2. SIGTERM without an fd store and a new daemon.
check_in "$term" "P: QEMU saw the daemon go (reconnecting)" \
	'^traceP\| rdmacm_mux_lib_reconnecting /run/rdmacm-mux-rxe0-1\.vm/guestP\.sock: connection lost \(-[0-9]+\), [0-9]+ requests failed; reconnects=0$'
check_in "$term" "P: QEMU reconnected to the new daemon and registered its 3 GIDs again" \
	'^traceP\| rdmacm_mux_lib_reregistered /run/rdmacm-mux-rxe0-1\.vm/guestP\.sock: back after [0-9]+ attempts, 3 GIDs registered again, 0 lost; reconnects=1 reregistrations=3$'
check_in "$term" "P: the new daemon has P's GID from the reconnection" \
	'^muxA\| .*registered GID ::ffff:10\.0\.3\.15'
connected P 3 "$term"
# 3. SIGKILL and a new daemon.
check_in "$kill9" "P: QEMU reconnected after the SIGKILL and registered its GIDs again" \
	'^traceP\| rdmacm_mux_lib_reregistered .*: back after [0-9]+ attempts, 3 GIDs registered again, 0 lost; reconnects=2 reregistrations=6$'
connected P 4 "$kill9"
# 4. No daemon for 10 s while the guest connects: the send fails at once
# (the library is not connected), the guest's CM reports it, rdma_client
# fails, the guest goes on printing; with the daemon back, it connects.
check_in "$down" "P: the REQ failed at once while the daemon was away (send error, mad_tx_err)" \
	'^traceP\| rdmacm_mux_lib_answer mad ticket=0 err=-107$'
check_in "$down" "P: rdma_client failed cleanly while the daemon was away" \
	'^guestP\| .*INNER-RDMA-CLIENT5 rc=[1-9]'
check_not "P: rdma_client 5 never connected" '^guestP\| .*INNER-RDMA-CLIENT5 connected'
ticks=$(grep -Ec '^guestP\| .*INNER-TICK [0-9]+' <<<"$down" || true)
if ((ticks >= 5)); then
	echo "qemu: ok   P: the guest kept printing while the daemon was away ($ticks ticks)"
else
	echo "qemu: FAIL P: only $ticks guest ticks while the daemon was away (expected 5 or more)"
	failed=1
fi
check_in "$after_down" "P: QEMU reconnected after 10 s without a daemon" \
	'^traceP\| rdmacm_mux_lib_reregistered .*: back after [0-9]+ attempts, 3 GIDs registered again, 0 lost; reconnects=3 reregistrations=9$'
connected P 6 "$after_down"
# 5. The library's counters in QEMU's trace.
check "P: the library's counters in QEMU's trace: 3 reconnections, 9 re-registrations" \
	'^traceP\| rdmacm_mux_lib_reregistered .* reconnects=3 reregistrations=9$'
check "P: the guest finished its steps" '^guestP\| .*INNER-DONE rc=0'

echo "qemu: --- both ---"
check_not_in "$before_term" "no MAD dropped by a daemon before the restarts" '^mux[AB]\| \[rxe[01]:1\] (TX|RX)!'
check_count "the responder saw every connection ESTABLISHED (S: 2, P: 5)" \
	'^resp\| RTU .*-> connection ESTABLISHED' 7
check "responder answered DREQs" '^resp\| DREQ .*-> DREP, connection closed'
check "both inner QEMUs passed" '^OUTER-INNER-EXIT S rc=1 P rc=1'
check "outer verdict" '^OUTER-RESULT rc=0'

