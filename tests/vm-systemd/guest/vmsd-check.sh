#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Guest side of tests/vm-systemd, run by vmsd-test.service once the boot is
# done. It checks rdmacm-mux as installed by "meson install" (the shipped
# units, the modules-load.d file, the config file) under real systemd, udev
# and rdma-core. The mode comes from the kernel command line
# (vmsd.mode=main|boot-order|pkg|vms); see vmsd-run.sh. main creates rxe0/rxe1 on a
# veth pair (the guest's only network) after the boot; in boot-order
# vmsd-links.service made the devices during the boot. Every check prints
# PASS/FAIL on the serial console; the last line is "VMTEST-RESULT
# rc=<failed checks>", then the guest powers off.
# Checks with "eval '...'" expand their variables when they run, on purpose:
# shellcheck disable=SC2016
set -uo pipefail
exec >/dev/ttyS0 2>&1

MODE=$(sed -n 's/.*vmsd\.mode=\([a-z-]*\).*/\1/p' /proc/cmdline)
B=/opt/vmsd/bin
IP=/usr/sbin/ip
UNIT=rdmacm-mux.service
SOCK0=/run/rdmacm-mux-rxe0-1
G11=::ffff:10.0.1.1 G12=::ffff:10.0.1.2 G21=::ffff:10.0.2.1 G22=::ffff:10.0.2.2
# A GID that no port has: a client may register it (the default policy),
# and the daemon refuses to send from it (no-port-gid).
GX=::ffff:10.0.1.9
FAILED=0
T0=$(cut -d' ' -f1 /proc/uptime)

stamp() { awk -v t0="$T0" '{ printf "%5.1f", $1 - t0 }' /proc/uptime; }
pass() { echo "PASS: [$(stamp)] $*"; }
fail() {
	echo "FAIL: [$(stamp)] $*"
	FAILED=$((FAILED + 1))
}
info() { echo "INFO: $*"; }
# check DESCRIPTION COMMAND...: COMMAND must succeed.
# Its locals have names no caller uses: "eval" runs in this scope.
check() {
	local _check_desc=$1 _check_rc
	shift
	"$@"
	_check_rc=$?
	if ((_check_rc == 0)); then
		pass "$_check_desc"
	else
		fail "$_check_desc (exit $_check_rc: $*)"
	fi
}
# matches STRING REGEX (for check, which cannot run [[ ]] itself).
matches() { [[ $1 =~ $2 ]]; }
# prop UNIT PROPERTY: one property, as "systemctl show" has it.
prop() { systemctl show -P "$2" "$1"; }
# wait_for SECS COMMAND...: polls COMMAND every 0.1 s until it succeeds.
wait_for() {
	local n=0 max=$(($1 * 10))
	shift
	until "$@"; do
		n=$((n + 1))
		((n < max)) || return 1
		sleep 0.1
	done
}
has() { grep -qF -- "$2" "$1"; }
pid_gone() { ! kill -0 "$1" 2>/dev/null; }
module_loaded() { grep -q "^$1 " /proc/modules; }
unit_ran() { [[ $(prop "$1" ActiveState) == active || $(prop "$1" ActiveState) == failed ]]; }
indent() { sed 's/^/    /'; }

# Runs on every exit, also when a bug in this script stops it early: the
# host always gets a verdict and the guest always powers off.
DONE=0
finish() {
	((DONE)) || fail "the check script stopped early (exit status $1)"
	if ((FAILED)); then
		echo "----- journal of this boot (failure) -----"
		journalctl -b -o short-monotonic --no-pager | tail -n 600
		echo "----- end of journal -----"
	fi
	echo "VMTEST-RESULT rc=$FAILED"
	systemctl --no-block poweroff
}
trap 'finish $?' EXIT

# ---- boot and fabric -----------------------------------------------------------
setup() {
	local sr m
	sr=$(timeout 120 systemctl is-system-running --wait)
	check "the boot finished with no failed unit (is-system-running: $sr)" [ "$sr" = running ]
	info "$(systemd-analyze time | head -n 1)"
	info "$(systemctl --version | head -n 1); kernel $(uname -r); mode $MODE"
	# What a package's postinst trigger does: librdmacm-mux is in the cache.
	ldconfig
	for m in crc32_generic rdma_rxe ib_umad ib_uverbs veth; do
		modprobe "$m" || fail "modprobe $m"
	done
	for i in all default; do
		echo 1 >"/proc/sys/net/ipv4/conf/$i/accept_local"
		echo 0 >"/proc/sys/net/ipv4/conf/$i/rp_filter"
	done
	$IP link add veth0 type veth peer name veth1
	for i in veth0 veth1; do
		echo 1 >"/proc/sys/net/ipv4/conf/$i/accept_local"
		echo 0 >"/proc/sys/net/ipv4/conf/$i/rp_filter"
	done
	$IP addr add 10.0.0.1/24 dev veth0
	$IP addr add 10.0.1.1/32 dev veth0
	$IP addr add 10.0.1.2/32 dev veth0
	$IP addr add 10.0.0.2/24 dev veth1
	$IP addr add 10.0.2.1/32 dev veth1
	$IP addr add 10.0.2.2/32 dev veth1
	$IP link set veth0 up
	$IP link set veth1 up
	$IP route add 10.0.2.0/24 dev veth0
	$IP route add 10.0.1.0/24 dev veth1
	for a in 10.0.0.2 10.0.2.1 10.0.2.2; do
		$IP neigh replace "$a" lladdr "$(cat /sys/class/net/veth1/address)" dev veth0 nud permanent
	done
	for a in 10.0.0.1 10.0.1.1 10.0.1.2; do
		$IP neigh replace "$a" lladdr "$(cat /sys/class/net/veth0/address)" dev veth1 nud permanent
	done
	rdma link add rxe0 type rxe netdev veth0
	rdma link add rxe1 type rxe netdev veth1
	check "rxe0 has the GIDs of 10.0.1.1-2" wait_for 10 gids_present rxe0 0a00:0101 0a00:0102
	check "rxe1 has the GIDs of 10.0.2.1-2" wait_for 10 gids_present rxe1 0a00:0201 0a00:0202
	udevadm settle
	# rdma-core's udev rules start rdma-load-modules@rdma.service for the new
	# devices (it loads rdma_ucm, and so ib_cm): let it finish first.
	check "rdma-core's udev rules ran rdma-load-modules@rdma.service" \
		wait_for 20 unit_ran rdma-load-modules@rdma.service
	info "rdma-load-modules@rdma.service: $(prop rdma-load-modules@rdma.service ActiveState)/$(prop rdma-load-modules@rdma.service Result)"
	journalctl -b -o cat --no-pager -u rdma-load-modules@rdma.service | indent
	info "RDMA modules: $(grep -oE '^(ib_[a-z]+|rdma_[a-z]+|iw_cm|ib_cm) ' /proc/modules | tr -d '\n')"
	info "$(echo /dev/infiniband/*)"
}
gids_present() {
	local dev=$1 g have
	shift
	have=$(cat /sys/class/infiniband/"$dev"/ports/1/gids/* 2>/dev/null)
	for g in "$@"; do
		[[ $have == *"ffff:$g"* ]] || return 1
	done
}

# ---- mode main -----------------------------------------------------------------
main_mode() {
	local rc out pid cg sec qx_pid qb1_pid

	echo "=== (a) the exclusive mode: the example modprobe.d file keeps ib_cm away"
	info "installed: $(prop $UNIT FragmentPath), $(prop rdmacm-mux@rxe1-1.service FragmentPath); config: $(prop $UNIT EnvironmentFiles)"
	info "modprobe.d: $(ls /etc/modprobe.d/rdmacm-mux-exclusive.conf 2>&1)"
	info "$(modprobe -c | grep -E '^install ib_cm ')"
	check "ib_cm is not loaded although rdma-core tried to load rdma_ucm" \
		eval '! module_loaded ib_cm'
	check "an explicit 'modprobe ib_cm' is refused" eval '! modprobe ib_cm 2>/dev/null'

	echo "=== the templated, socket-activated instance rdmacm-mux@rxe1-1"
	systemctl start rdmacm-mux@rxe1-1.socket
	check "rdmacm-mux@rxe1-1.socket is listening" [ "$(prop rdmacm-mux@rxe1-1.socket ActiveState)" = active ]
	check "systemd made /run/rdmacm-mux-rxe1-1" [ -S /run/rdmacm-mux-rxe1-1 ]
	check "rdmacm-mux@rxe1-1.service waits for the first connect" \
		[ "$(prop rdmacm-mux@rxe1-1.service ActiveState)" = inactive ]
	$B/rdmacm-mux-qemu-client -S /run/rdmacm-mux-rxe1-1 -g $G21 -n qb1 serve -c 2 -t 90 \
		>/tmp/qb1.out 2>&1 &
	qb1_pid=$!
	check "the first connect started rdmacm-mux@rxe1-1.service and REG worked" \
		wait_for 20 has /tmp/qb1.out "registered $G21"
	check "rdmacm-mux@rxe1-1.service is active" [ "$(prop rdmacm-mux@rxe1-1.service ActiveState)" = active ]
	check "its control socket unit came along (/run/rdmacm-mux-rxe1-1.ctl)" [ -S /run/rdmacm-mux-rxe1-1.ctl ]
	journalctl -b -o cat --no-pager -u rdmacm-mux@rxe1-1.service | grep -v '^Got \|^Received \|^Child ' | indent

	echo "=== rdmacm-mux.service (the plain unit, RDMACM_MUX_DEVICE=rxe0) and READY=1"
	systemd-analyze log-level debug
	systemctl start $UNIT
	rc=$?
	# Right after "systemctl start" returns: a QEMU client connects, does
	# REG and a whole CM handshake with qb1 on rxe1.
	$B/rdmacm-mux-qemu-client -S $SOCK0 -g $G11 -n qa1 connect $G21 >/tmp/qa1.out 2>&1
	out=$?
	systemd-analyze log-level info
	check "systemctl start $UNIT returned 0" [ "$rc" -eq 0 ]
	check "a QEMU client connected at once, REG worked and it connected to qb1 on rxe1 (exit $out)" \
		has /tmp/qa1.out "connection 1 established with $G21"
	indent </tmp/qa1.out
	out=$($B/umad-probe expect-owned rxe0 1 2>&1)
	check "the daemon owns the CM class on rxe0 ($out)" [ $? -eq 0 ]
	check "$UNIT is active (running)" [ "$(prop $UNIT ActiveState)/$(prop $UNIT SubState)" = active/running ]
	out=$(prop $UNIT StatusText)
	check "StatusText is the daemon's STATUS= line: '$out'" matches "$out" \
		'^[0-9]+ clients, [0-9]+ GIDs, [0-9]+ sessions; MADs relayed: [0-9]+ sent, [0-9]+ received$'
	journalctl -b -o cat --no-pager -u $UNIT >/tmp/start.log
	check "READY=1 came after the daemon registered the class and listened ('serving rxe0 port 1' before READY=1)" \
		ready_after_serving /tmp/start.log
	grep -E 'serving|READY=1|STATUS=|Started|ExecStartPost' /tmp/start.log | head -n 8 | indent
	check "QEMU's path /run/rdmacm-mux-rxe0-1 is the unit's symlink into its RuntimeDirectory" \
		[ "$(readlink $SOCK0)" = rdmacm-mux/rxe0-1 ]

	echo "=== rdmacm-muxctl on both daemons"
	out=$(rdmacm-muxctl --socket $SOCK0 status --json 2>&1)
	rc=$?
	check "rdmacm-muxctl --socket $SOCK0 status --json (through the .ctl symlink)" \
		eval '[ $rc -eq 0 ] && [[ $out == *rxe0* ]]'
	echo "$out" | head -n 20 | indent
	out=$(rdmacm-muxctl --socket /run/rdmacm-mux-rxe1-1 status --json 2>&1)
	rc=$?
	check "rdmacm-muxctl on the socket-activated instance (systemd's control socket)" \
		eval '[ $rc -eq 0 ] && [[ $out == *rxe1* ]]'

	echo "=== the installed client library: pingpong through rdmacm-mux.service"
	rdmacm-mux-pingpong -S $SOCK0 -g $G12 -n pa2 connect $G21 >/tmp/pa2.out 2>&1
	check "rdmacm-mux-pingpong (librdmacm-mux from the install) connected to qb1 (exit $?)" \
		has /tmp/pa2.out "connection 1 established with $G21"
	check "qb1 served both connections" wait_for 20 pid_gone "$qb1_pid"
	wait "$qb1_pid"
	rc=$?
	check "qb1 exited 0 (exit $rc) and saw both REQs" \
		eval '[ $rc -eq 0 ] && [ "$(grep -c "<- REQ " /tmp/qb1.out)" -eq 2 ]'
	indent </tmp/qb1.out

	echo "=== journal fields: a refused MAD"
	$B/rdmacm-mux-qemu-client -S $SOCK0 -g $GX -n qx connect $G21 >/tmp/qx.out 2>&1 &
	qx_pid=$!
	wait $qx_pid
	check "a QEMU client sending from a GID the port lacks is refused (err_code -99)" \
		has /tmp/qx.out "err_code -99"
	indent </tmp/qx.out
	journalctl -b --no-pager -o verbose -u $UNIT "GID=$GX" >/tmp/refused.txt
	check "journal: the refusal has GID=$GX" grep -qx "    GID=$GX" /tmp/refused.txt
	check "journal: ... ATTR=REQ" grep -qx '    ATTR=REQ' /tmp/refused.txt
	check "journal: ... COMM_ID=0x00000001" grep -qx '    COMM_ID=0x00000001' /tmp/refused.txt
	check "journal: ... CLIENT_PID=$qx_pid (the client's pid)" grep -qx "    CLIENT_PID=$qx_pid" /tmp/refused.txt
	grep -E '^    (MESSAGE|PRIORITY|SYSLOG_IDENTIFIER|GID|ATTR|COMM_ID|CLIENT_PID|_SYSTEMD_UNIT)=' /tmp/refused.txt | indent
	check "journal: qa1's entries carry CLIENT_PID=" \
		eval '[ -n "$(journalctl -b --no-pager -o cat -u $UNIT CLIENT_PID=$(client_pid qa1))" ]'

	echo "=== the sandbox: umad nodes and nothing else"
	pid=$(prop $UNIT MainPID)
	cg=$(prop $UNIT ControlGroup)
	# The sender processes start under the unit's sandbox (fork, prctl,
	# close_range, a umad fd of their own), and the daemon stays one thread.
	check "the unit's cgroup holds the daemon and its 8 senders" \
		eval '[ "$(wc -l <"/sys/fs/cgroup$cg/cgroup.procs")" -eq 9 ]'
	check "the daemon is one thread" \
		eval '[ "$(awk "/^Threads:/ {print \$2}" /proc/$pid/status)" -eq 1 ]'
	check "no sender process failed" \
		eval '! journalctl -b --no-pager -o cat -u $UNIT | grep -q "sender process"'
	# Into the unit's cgroup (its device filter) and its mount namespace
	# (its private /dev): the sandbox the running daemon has.
	sh -c 'echo $$ >"/sys/fs/cgroup$1/cgroup.procs" && exec nsenter -t "$2" -m /bin/bash "$3"' \
		probe "$cg" "$pid" /opt/vmsd/probe.sh >/tmp/probe.out 2>&1 <<<'' ||
		true
	indent </tmp/probe.out
	check "the probe ran in $cg" has /tmp/probe.out "cgroup 0::$cg"
	check "umad0 (rxe0) opens read-write" has /tmp/probe.out "/dev/infiniband/umad0: ok"
	check "umad1 (rxe1) opens read-write (every umad minor is allowed, by design)" \
		has /tmp/probe.out "/dev/infiniband/umad1: ok"
	for d in uverbs0 uverbs1 issm0 issm1; do
		check "$d is refused by the device policy" has /tmp/probe.out "/dev/infiniband/$d: Operation not permitted"
	done
	check "/dev/null opens (private /dev)" has /tmp/probe.out "/dev/null: ok"
	check "the host's /dev/ttyS0 and /dev/mem are not in the private /dev" \
		eval 'has /tmp/probe.out "/dev/ttyS0: absent" && has /tmp/probe.out "/dev/mem: absent"'
	check "/dev/infiniband is read-only" has /tmp/probe.out "touch: Read-only file system"
	check "/usr is read-only (ProtectSystem=strict holds in an early-boot unit)" \
		has /tmp/probe.out "touch /usr: Read-only file system"

	echo "=== systemd-analyze security (in the guest)"
	for u in $UNIT rdmacm-mux@rxe1-1.service; do
		sec=$(systemd-analyze security --no-pager "$u" 2>&1 | tail -n 1)
		info "$sec"
		check "$u: exposure below 3.0 (the host-side gate's threshold)" exposure_below "$sec" 3.0
	done

	restarts

	echo "=== stop"
	systemd-analyze log-level debug
	systemctl stop $UNIT
	rc=$?
	systemd-analyze log-level info
	check "systemctl stop $UNIT returned 0" [ "$rc" -eq 0 ]
	check "$UNIT: inactive, Result=success, status 0" \
		[ "$(prop $UNIT ActiveState)/$(prop $UNIT Result)/$(prop $UNIT ExecMainStatus)" = inactive/success/0 ]
	journalctl -b -o cat --no-pager -u $UNIT >/tmp/stop.log
	check "the daemon sent STOPPING=1" grep -q 'Got notification message from PID .*STOPPING=1' /tmp/stop.log
	check "the daemon logged 'shut down cleanly'" has /tmp/stop.log "shut down cleanly"
	grep -E 'STOPPING=1|shut down|Stopp|Deactivated|ExecStopPost' /tmp/stop.log | indent
	check "QEMU's symlink and the .ctl symlink are gone" eval '[ ! -e $SOCK0 ] && [ ! -L $SOCK0 ] && [ ! -L $SOCK0.ctl ]'
	check "the RuntimeDirectory /run/rdmacm-mux is gone" [ ! -e /run/rdmacm-mux ]
	out=$($B/umad-probe register rxe0 1 2>&1)
	check "the CM class on rxe0 is free again (umad-probe register: ${out%%$'\n'*})" [ $? -eq 0 ]

	systemctl stop rdmacm-mux@rxe1-1.service 2>/tmp/stop1.err
	rc=$?
	check "systemctl stop rdmacm-mux@rxe1-1.service returned 0" [ "$rc" -eq 0 ]
	indent </tmp/stop1.err
	check "... it exited 0 (Result=success)" [ "$(prop rdmacm-mux@rxe1-1.service Result)" = success ]
	check "... its socket stays with the socket unit" \
		eval '[ -S /run/rdmacm-mux-rxe1-1 ] && [ "$(prop rdmacm-mux@rxe1-1.socket ActiveState)" = active ]'
	systemctl stop rdmacm-mux@rxe1-1.socket rdmacm-mux-control@rxe1-1.socket
	check "stopping the sockets removes them (RemoveOnStop=yes)" \
		eval '[ ! -e /run/rdmacm-mux-rxe1-1 ] && [ ! -e /run/rdmacm-mux-rxe1-1.ctl ]'

	info "failed units: $(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | tr '\n' ' ')"
	check "no rdmacm-mux unit failed" eval '! systemctl list-units --failed --plain --no-legend | grep -q rdmacm-mux'
}

# A restart (systemctl restart) and a crash (kill -9, then Restart=) of the
# plain unit while raw QEMU-protocol clients, which never reconnect, hold an
# established session (with qs1) and a half-open one (its REQ waits for a
# peer that registers only after the restart, qs2-*): both finish through
# the new process, and nobody sees EOF.
restarts() {
	local how qs1_pid qs2_pid qe_pid qh_pid old new rc

	echo "=== restarts: clients, GIDs and sessions cross them"
	# A crash restarts after RestartSec= (5 s); 1 s keeps the test short.
	mkdir -p /run/systemd/system/$UNIT.d
	printf '[Service]\nRestartSec=1s\n' >/run/systemd/system/$UNIT.d/restart-sec.conf
	systemctl daemon-reload
	$B/rdmacm-mux-qemu-client -S /run/rdmacm-mux-rxe1-1 -g $G21 -n qs1 serve -c 2 -t 120 \
		>/tmp/qs1.out 2>&1 &
	qs1_pid=$!
	check "qs1 registered $G21 on the rxe1 instance" wait_for 20 has /tmp/qs1.out "registered $G21"
	for how in restart kill; do
		$B/rdmacm-mux-qemu-client -S $SOCK0 -g $G11 -n qe-$how connect $G21 --hold 8000 \
			>/tmp/qe-$how.out 2>&1 &
		qe_pid=$!
		check "$how: qe-$how's connection is established" \
			wait_for 20 has /tmp/qe-$how.out "connection 1 established"
		# Nobody owns G22 yet: the REQ goes out, the session is half-open,
		# and the client sends it again every second until qs2 answers,
		# however long the restart takes (a CM's 5 tries were spent
		# before a slow restart was done; --tries bounds a broken run).
		$B/rdmacm-mux-qemu-client -S $SOCK0 -g $G12 -n qh-$how connect $G22 --tries 300 \
			>/tmp/qh-$how.out 2>&1 &
		qh_pid=$!
		check "$how: qh-$how's REQ is out (half-open)" wait_for 10 has /tmp/qh-$how.out "-> REQ"
		old=$(prop $UNIT MainPID)
		if [ $how = restart ]; then
			systemctl restart $UNIT
			check "systemctl restart $UNIT returned 0" [ $? -eq 0 ]
		else
			kill -9 "$old"
			check "after kill -9 systemd started the daemon again" \
				wait_for 15 eval '[ "$(prop $UNIT ActiveState)" = active ] && [ "$(prop $UNIT MainPID)" != "$old" ] && [ "$(prop $UNIT MainPID)" != 0 ]'
		fi
		new=$(prop $UNIT MainPID)
		info "$how: MainPID $old -> $new, NRestarts=$(prop $UNIT NRestarts)"
		$B/rdmacm-mux-qemu-client -S /run/rdmacm-mux-rxe1-1 -g $G22 -n qs2-$how serve -c 1 -t 30 \
			>/tmp/qs2-$how.out 2>&1 &
		qs2_pid=$!
		wait "$qh_pid"
		rc=$?
		check "$how: the half-open connection finished through the new daemon (exit $rc)" \
			eval '[ $rc -eq 0 ] && has /tmp/qh-$how.out "connection 1 closed"'
		indent </tmp/qh-$how.out
		wait "$qs2_pid"
		wait "$qe_pid"
		rc=$?
		check "$how: the established connection closed through the new daemon (exit $rc)" \
			eval '[ $rc -eq 0 ] && has /tmp/qe-$how.out "connection 1 closed"'
		indent </tmp/qe-$how.out
		check "$how: the new daemon took the clients over" \
			eval 'journalctl -b -o cat --no-pager -u $UNIT _PID=$new | grep -q "took over [1-9][0-9]* clients"'
	done
	wait "$qs1_pid"
	rc=$?
	check "qs1 served both held connections (exit $rc)" [ $rc -eq 0 ]
	indent </tmp/qs1.out
	rm -r /run/systemd/system/$UNIT.d
	systemctl daemon-reload
}

# exposure_below LINE LIMIT: the "Overall exposure level for U: N ..." LINE
# has N < LIMIT.
exposure_below() {
	[[ $1 =~ exposure\ level\ for\ .*:\ ([0-9.]+) ]] &&
		awk -v s="${BASH_REMATCH[1]}" -v max="$2" 'BEGIN { exit !(s < max) }'
}

# The journal order: the daemon's "serving DEV port N" line (after umad
# registration and listen) comes before systemd's debug line for READY=1.
ready_after_serving() {
	local s r
	s=$(grep -n 'serving rxe0 port 1' "$1" | head -n 1 | cut -d: -f1)
	r=$(grep -n 'Got notification message from PID .*READY=1' "$1" | head -n 1 | cut -d: -f1)
	[[ -n $s && -n $r ]] && ((s < r))
}

# The pid qa1 had, from the daemon's log line "client N (pid P, ...) gone".
client_pid() {
	journalctl -b -o cat --no-pager -u $UNIT | sed -n 's/.*client [0-9]* (pid \([0-9]*\), rdmacm-mux-qemu.*/\1/p' | head -n 1
}

# ---- mode boot-order ------------------------------------------------------------
# Each boot: rdma-core's udev rules and module loading as shipped, no ban,
# rdmacm-mux@rxe0-1.service enabled, rxe0..rxe2 made early by
# vmsd-links.service. The daemon must hold rxe0 before rdma-core loads
# ib_cm, which then takes rxe1 and rxe2; the last boot also hot-plugs rxe3.
INST=rdmacm-mux@rxe0-1.service

# ib_cm's counters on DEV port 1: ib_cm holds it.
ib_cm_holds() { [ -d "/sys/class/infiniband/$1/ports/1/cm_rx_msgs" ]; }
# The owner of DEV port 1 in the daemon's status --json.
status_owner() {
	rdmacm-muxctl --socket /run/rdmacm-mux-rxe0-1 status --json |
		grep -o "{\"device\":\"$1\",\"port\":1,\"owner\":\"[a-z_]*\"}" |
		sed 's/.*"owner":"\([a-z_]*\)".*/\1/'
}
# The first line of this boot's journal that matches REGEX (grep -E).
journal_line() {
	journalctl -b -o cat --no-pager | grep -n -m 1 -E "$1" | cut -d: -f1
}

boot_order_mode() {
	local b n links sr d want got serving loading

	b=$(sed -n 's/.*vmsd\.boot=\([0-9]*\).*/\1/p' /proc/cmdline)
	n=$(sed -n 's/.*vmsd\.boots=\([0-9]*\).*/\1/p' /proc/cmdline)
	links=$(sed -n 's/.*vmsd\.links=\([a-z]*\).*/\1/p' /proc/cmdline)
	echo "=== boot $b of $n: rdmacm-mux@rxe0-1 before rdma-core's ib_cm (devices made $links)"
	sr=$(timeout 120 systemctl is-system-running --wait)
	check "the boot finished with no failed unit (is-system-running: $sr)" [ "$sr" = running ]
	info "$(systemd-analyze time | head -n 1)"
	check "no ordering cycle in this boot's journal" \
		eval '! journalctl -b -o cat --no-pager | grep -q "ordering cycle"'
	check "the install bans nothing (no 'install ib_cm' rule)" \
		eval '! modprobe -c | grep -q "^install ib_cm "'
	check "$INST is active (running)" [ "$(prop $INST ActiveState)/$(prop $INST SubState)" = active/running ]
	check "rdma-load-modules@rdma.service loaded rdma_ucm (Result=$(prop rdma-load-modules@rdma.service Result))" \
		eval '[ "$(prop rdma-load-modules@rdma.service Result)" = success ] && module_loaded rdma_ucm'
	check "ib_cm is loaded (/sys/module/ib_cm)" [ -d /sys/module/ib_cm ]
	# The daemon reads that in its sandbox (ProtectKernelModules=,
	# ProtectKernelTunables=): it must see the same.
	check "the daemon's mount namespace shows /sys/module/ib_cm too" \
		nsenter -t "$(prop $INST MainPID)" -m test -d /sys/module/ib_cm
	check "status --json says ib_cm is loaded" \
		eval 'rdmacm-muxctl --socket /run/rdmacm-mux-rxe0-1 status --json | grep -q "\"ib_cm_loaded\":true"'
	journalctl -b -o short-monotonic --no-pager -u $INST -u vmsd-links.service \
		-u rdma-load-modules@rdma.service | grep -vE 'Got notification|Child|Received' | indent

	# Who holds what: sysfs, and the daemon's status, port by port.
	check "the daemon holds rxe0: ib_cm left it alone" eval '! ib_cm_holds rxe0'
	for d in rxe1 rxe2; do
		check "ib_cm holds $d (its counters are on port 1)" ib_cm_holds $d
	done
	for d in rxe0 rxe1 rxe2; do
		if [ $d = rxe0 ]; then want=daemon; elif ib_cm_holds $d; then want=ib_cm; else want=not_ib_cm; fi
		got=$(status_owner $d)
		check "status --json and sysfs agree on $d: $want (status: $got)" [ "$got" = "$want" ]
	done

	# The order: the daemon held rxe0 before rdma-core started loading.
	serving=$(journal_line 'serving rxe0 port 1')
	loading=$(journal_line 'Load RDMA modules from /etc/rdma/modules/rdma.conf')
	check "the journal: 'serving rxe0 port 1' (line $serving) before rdma-load-modules@rdma starts (line $loading)" \
		eval '[ -n "$serving" ] && [ -n "$loading" ] && [ "$serving" -lt "$loading" ]'
	if [ "$links" = late ]; then
		check "the daemon started before rxe0 existed and waited for it" \
			eval 'journalctl -b -o cat --no-pager -u $INST | grep -q "waiting up to 30 s for rxe0 port 1 to appear"'
	else
		info "the daemon waited for rxe0: $(journalctl -b -o cat --no-pager -u $INST | grep -c 'waiting up to') time(s)"
	fi
	[ "$b" = "$n" ] && hotplug_checks
}

# ---- hot plug: a device that appears while ib_cm is loaded ------------------
# rxe3, made now, goes to ib_cm; the plain unit (RDMACM_MUX_DEVICE=rxe3)
# fails once with exit 3 and one line naming ib_cm and the remedy, and is not
# restarted; the socket-activated instance stops at the start limit.
hotplug_checks() {
	local rc out n1 n2 u3=rdmacm-mux@rxe3-1

	echo "=== hot plug: rxe3 appears while ib_cm is loaded"
	rdma link add rxe3 type rxe netdev veth3
	check "ib_cm took rxe3 when it appeared" wait_for 10 ib_cm_holds rxe3
	out=$($B/umad-probe expect-owned rxe3 1 2>&1)
	check "the CM class on rxe3 is taken ($out)" [ $? -eq 0 ]

	systemctl start $UNIT 2>/tmp/start.err
	rc=$?
	check "systemctl start $UNIT (RDMACM_MUX_DEVICE=rxe3) fails (exit $rc)" [ "$rc" -ne 0 ]
	indent </tmp/start.err
	check "$UNIT: failed, Result=exit-code, status 3" \
		[ "$(prop $UNIT ActiveState)/$(prop $UNIT Result)/$(prop $UNIT ExecMainStatus)" = failed/exit-code/3 ]
	# A restart that systemd scheduled would show now: the unit would be
	# activating/auto-restart with a job queued, not failed.
	check "systemd scheduled no restart of $UNIT (SubState $(prop $UNIT SubState), no job)" \
		eval '[ "$(prop $UNIT SubState)" = failed ] && ! systemctl list-jobs --no-legend | grep -qF " $UNIT "' 
	journalctl -b -o cat --no-pager -u $UNIT >/tmp/fail.log
	check "the journal names ib_cm and the remedy in one line" \
		grep -q "the CM class is already owned on rxe3 port 1 by ib_cm, .*start rdmacm-mux before ib_cm loads.*unload ib_cm and its users" /tmp/fail.log
	grep -E 'already owned|Main process|Failed' /tmp/fail.log | indent

	# The templated instance, triggered by a client that waits in the
	# socket's backlog: how often does systemd start a daemon that fails?
	systemctl start $u3.socket
	$B/rdmacm-mux-qemu-client -S /run/rdmacm-mux-rxe3-1 -g $G11 -n qa1 connect $G21 >/tmp/qa1.out 2>&1 &

	# The client waits in the backlog, so the socket triggers again after
	# each failed run, until the service's start limit (StartLimitBurst=5)
	# stops it: wait for that end state, not for a while.
	u3_gave_up() { [ "$(prop $u3.socket ActiveState)" = failed ] || [ "$(prop $u3.service Result)" = start-limit-hit ]; }
	wait_for 120 u3_gave_up
	check "systemd gave up on $u3 (socket $(prop $u3.socket ActiveState), service Result $(prop $u3.service Result))" u3_gave_up
	check "$UNIT did not restart meanwhile (NRestarts=$(prop $UNIT NRestarts))" [ "$(prop $UNIT NRestarts)" = 0 ]
	check "$UNIT is still failed" [ "$(prop $UNIT ActiveState)" = failed ]
	n1=$(journalctl -b -o cat --no-pager -u $UNIT | grep -c 'already owned')
	check "the daemon ran once ($n1 'already owned' lines)" [ "$n1" -eq 1 ]
	systemctl status --no-pager -n 0 $UNIT | indent

	n2=$(journalctl -b -o cat --no-pager -u $u3.service | grep -c 'already owned')
	info "$u3: $n2 daemon runs; service $(prop $u3.service ActiveState)/$(prop $u3.service Result), NRestarts $(prop $u3.service NRestarts); socket $(prop $u3.socket ActiveState)/$(prop $u3.socket Result)"
	check "socket activation does not spin either: at most StartLimitBurst=5 runs ($n2)" \
		[ "$n2" -ge 1 -a "$n2" -le 5 ]
	check "$u3.service ends failed" [ "$(prop $u3.service ActiveState)" = failed ]
	journalctl -b -o cat --no-pager -u $u3.service -u $u3.socket |
		grep -vE '^(Got|Received|Child|Passing|Trying|Converting|Changed|Sent|Service has no|Enqueued|Installed|Transaction|Unit|Looking)' | indent
	wait
	indent </tmp/qa1.out
	check "$INST still holds rxe0 and serves" \
		eval '[ "$(prop $INST ActiveState)" = active ] && [ "$(status_owner rxe0)" = daemon ]'
}

# ---- mode pkg ------------------------------------------------------------------
# The Debian packages, installed with dpkg: nothing enabled or started, the
# templated units relay a handshake, an upgrade (a higher version of the
# same packages) restarts both running instances while a raw QEMU client
# holds an established session, which then closes normally; a purge leaves
# no file behind, and a second install shows that a purge keeps an edited
# /etc/rdmacm-mux.conf.
PKGS=(rdmacm-mux librdmacm-mux1 librdmacm-mux-dev)
CONF=/etc/rdmacm-mux.conf
EXAMPLE=/usr/share/rdmacm-mux/rdmacm-mux.conf
# The upgrade's client keeps its session until SIGUSR1 after the upgrade,
# or at most this long (the upgrade must be done by then: checked).
HOLD_MS=400000

# Every path on the root file system but the volatile ones: what the boot,
# journald, dpkg's own bookkeeping and this script write whatever the
# package does. dpkg's info files are in: a purge must remove ours.
snapshot() {
	find / -xdev \( -path /tmp -o -path /var/tmp -o -path /var/log -o -path /var/cache/ldconfig \
		-o -path /var/lib/dpkg/triggers -o -path /var/lib/dpkg/updates \
		-o -path /var/lib/dpkg/status-old -o -path /var/lib/dpkg/available-old \
		-o -path /var/lib/systemd/timers -o -path /var/lib/systemd/random-seed \) -prune -o -print |
		LC_ALL=C sort
}
# same_files BEFORE: the root file system has exactly the paths of BEFORE
# (the differences go to the console).
same_files() {
	snapshot >/tmp/files-now
	diff "$1" /tmp/files-now | grep '^[<>]' | indent
	cmp -s "$1" /tmp/files-now
}
# no_shared_files DEB...: no file of these packages (anything but a
# directory, as the .deb has it: this rootfs's dpkg leaves out man pages
# and docs, so the file system cannot tell) is listed by another package.
no_shared_files() {
	local d files=()
	for d in "$@"; do
		mapfile -t -O "${#files[@]}" files < <(dpkg-deb -c "$d" |
			awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }')
	done
	# One query for all: "OWNER[, OWNER...]: PATH" per file.
	dpkg -S "${files[@]}" >/tmp/owners 2>&1
	info "${#files[@]} files in the packages, $(grep -c -E '^[^ ]+(, [^ ]+)+: /' /tmp/owners) listed twice"
	grep -E '^[^ ]+(, [^ ]+)+: /' /tmp/owners | indent
	[ "$(grep -c ': /' /tmp/owners)" -eq "${#files[@]}" ] && ! grep -q -E '^[^ ]+(, [^ ]+)+: /' /tmp/owners
}
conf_is_example() { cmp -s $CONF $EXAMPLE; }
status_of() { dpkg-query -W -f='${db:Status-Abbrev}' "$@" 2>/dev/null | tr -d ' '; }
version_of() { dpkg-query -W -f='${Version}' "$1"; }
no_daemon_runs() {
	local c
	for c in /proc/[0-9]*/comm; do
		[ "$(cat "$c" 2>/dev/null)" != rdmacm-mux ] || return 1
	done
}
active_units() { systemctl list-units --plain --no-legend --state=active 'rdmacm-mux*' | awk '{ print $1 }'; }
# The path of a process's binary; " (deleted)" at its end: it runs a file
# that dpkg has replaced since.
exe_of() { readlink "/proc/$1/exe"; }
# restarted_new OLD NEW: NEW is another main process than OLD, running the
# installed binary (not one that dpkg replaced).
restarted_new() { [ "$2" != 0 ] && [ "$2" != "$1" ] && [ "$(exe_of "$2")" = /usr/sbin/rdmacm-mux ]; }
# took_over UNIT PID: PID logged that it took the clients of its
# predecessor over.
took_over() {
	journalctl -b -o cat --no-pager -u "$1" _PID="$2" | grep -q 'took over [1-9][0-9]* clients'
}

# upgrade_step DIR WHAT: dpkg -i of the packages in DIR while qe holds
# its session: both instances get a new main process running the
# installed binary, which took the clients over, and qe is still there.
upgrade_step() {
	local dir=$1 what=$2 v rc i t0 old=() new=()
	v=$(dpkg-deb -f "$dir"/rdmacm-mux_*.deb Version)
	echo "=== $what: $v while qe holds an established session"
	for i in 0 1; do
		old[i]=$(prop rdmacm-mux@rxe$i-1.service MainPID)
	done
	t0=$SECONDS
	dpkg -i "$dir"/*.deb >/tmp/dpkg.log 2>&1
	rc=$?
	indent </tmp/dpkg.log
	check "dpkg -i $v returned 0 (in $((SECONDS - t0)) s)" [ "$rc" -eq 0 ]
	check "qe still holds its session (it closes it when told to, below)" kill -0 "$qe_pid"
	check "rdmacm-mux is $v now" [ "$(version_of rdmacm-mux)" = "$v" ]
	for i in 0 1; do
		new[i]=$(prop rdmacm-mux@rxe$i-1.service MainPID)
		info "rdmacm-mux@rxe$i-1: MainPID ${old[i]} -> ${new[i]} ($(exe_of "${new[i]}"))"
		check "rdmacm-mux@rxe$i-1 was restarted (a new MainPID) and runs the new binary" \
			restarted_new "${old[i]}" "${new[i]}"
		check "rdmacm-mux@rxe$i-1: the new daemon took its clients over" \
			took_over rdmacm-mux@rxe$i-1.service "${new[i]}"
		check "rdmacm-mux@rxe$i-1: the new daemon disconnected nobody" \
			eval '! journalctl -b -o cat --no-pager -u rdmacm-mux@rxe$i-1.service _PID="${new[i]}" | grep -q "disconnecting"'
	done
}

pkg_mode() {
	local rc qs1_pid qe_pid v_rel v_new v_future out

	v_rel=$(dpkg-deb -f /opt/vmsd/debs/rel/rdmacm-mux_*.deb Version)
	v_new=$(dpkg-deb -f /opt/vmsd/debs/new/rdmacm-mux_*.deb Version)
	v_future=$(dpkg-deb -f /opt/vmsd/debs/future/rdmacm-mux_*.deb Version)
	snapshot >/tmp/files-before
	info "$(wc -l </tmp/files-before) paths on the root file system before the install"

	echo "=== dpkg -i: ${PKGS[*]} $v_rel (the release)"
	dpkg -i /opt/vmsd/debs/rel/*.deb >/tmp/dpkg.log 2>&1
	rc=$?
	indent </tmp/dpkg.log
	check "dpkg -i of the three packages returned 0" [ "$rc" -eq 0 ]
	check "all three are installed ($(status_of "${PKGS[@]}"))" [ "$(status_of "${PKGS[@]}")" = iiiiii ]
	check "no file is in two packages (dpkg -S of every file in the .debs)" \
		no_shared_files /opt/vmsd/debs/rel/*.deb
	check "the postinst made $CONF from /usr/share/rdmacm-mux's example (this dpkg drops /usr/share/doc files: README.md.gz absent)" \
		eval 'conf_is_example && [ ! -e /usr/share/doc/rdmacm-mux/README.md.gz ]'
	check "rdmacm-mux.service is not enabled ($(systemctl is-enabled rdmacm-mux.service))" \
		[ "$(systemctl is-enabled rdmacm-mux.service)" = disabled ]
	check "no rdmacm-mux unit runs ($(active_units | tr '\n' ' '))" [ -z "$(active_units)" ]
	check "nothing of ours in /etc/systemd/system" \
		eval '[ -z "$(find /etc/systemd/system -name "rdmacm-mux*")" ]'
	out=$(ldd $B/rdmacm-mux-pingpong | grep librdmacm-mux)
	check "the build's pingpong runs with the packaged library ($out)" \
		matches "$out" '=> /(usr/)?lib/x86_64-linux-gnu/librdmacm-mux\.so\.1 '

	echo "=== the templated units of the package: rdmacm-mux@rxe0-1 and rdmacm-mux@rxe1-1"
	systemctl start rdmacm-mux@rxe0-1.service rdmacm-mux@rxe1-1.service
	check "systemctl start of both instances returned 0" [ $? -eq 0 ]
	$B/rdmacm-mux-qemu-client -S /run/rdmacm-mux-rxe1-1 -g $G21 -n qs1 serve -c 2 -t 400 \
		>/tmp/qs1.out 2>&1 &
	qs1_pid=$!
	check "qs1 registered $G21 on rdmacm-mux@rxe1-1" wait_for 20 has /tmp/qs1.out "registered $G21"
	$B/rdmacm-mux-pingpong -S /run/rdmacm-mux-rxe0-1 -g $G12 -n pp connect $G21 >/tmp/pp.out 2>&1
	rc=$?
	check "pingpong on rdmacm-mux@rxe0-1 connected to qs1 and closed (exit $rc)" \
		eval '[ $rc -eq 0 ] && has /tmp/pp.out "connection 1 established with $G21"'
	indent </tmp/pp.out

	$B/rdmacm-mux-qemu-client -S /run/rdmacm-mux-rxe0-1 -g $G11 -n qe connect $G21 \
		--hold $HOLD_MS >/tmp/qe.out 2>&1 &
	qe_pid=$!
	check "qe's connection is established" wait_for 20 has /tmp/qe.out "connection 1 established"
	# The release, up to this tree, up to a newer hand-off format, and
	# back down: at no step a client may notice.
	upgrade_step /opt/vmsd/debs/new "upgrade from the release"
	check "the unedited $CONF follows the example of $v_new" \
		eval 'conf_is_example && grep -q "came with version $v_new" $CONF'
	upgrade_step /opt/vmsd/debs/future "upgrade to a newer hand-off format ($v_future)"
	upgrade_step /opt/vmsd/debs/new "downgrade back"
	kill -USR1 "$qe_pid"
	wait "$qe_pid"
	rc=$?
	check "qe's session closed through the new daemon with DREQ/DREP, its socket never closed (exit $rc)" \
		eval '[ $rc -eq 0 ] && has /tmp/qe.out "connection 1 closed"'
	indent </tmp/qe.out
	wait "$qs1_pid"
	rc=$?
	check "qs1 served both connections across the upgrades (exit $rc)" \
		eval '[ $rc -eq 0 ] && [ "$(grep -c "<- REQ " /tmp/qs1.out)" -eq 2 ]'
	indent </tmp/qs1.out

	echo "=== dpkg --purge"
	dpkg --purge "${PKGS[@]}" >/tmp/dpkg.log 2>&1
	rc=$?
	indent </tmp/dpkg.log
	check "dpkg --purge returned 0" [ "$rc" -eq 0 ]
	check "no rdmacm-mux process is left" no_daemon_runs
	check "no rdmacm-mux unit is active ($(active_units | tr '\n' ' '))" [ -z "$(active_units)" ]
	check "the instances' sockets are gone" \
		eval '[ ! -e /run/rdmacm-mux-rxe0-1 ] && [ ! -e /run/rdmacm-mux-rxe1-1.ctl ]'
	check "the unedited $CONF went with the purge" [ ! -e $CONF ]
	check "after the purge the root file system has the paths it had before the install" \
		same_files /tmp/files-before

	echo "=== an edited $CONF outlives a purge"
	dpkg -i /opt/vmsd/debs/new/rdmacm-mux_*.deb >/tmp/dpkg.log 2>&1
	check "dpkg -i rdmacm-mux returned 0" [ $? -eq 0 ]
	echo 'RDMACM_MUX_DEVICE=rxe0' >>$CONF
	dpkg --purge rdmacm-mux >/tmp/dpkg.log 2>&1
	check "dpkg --purge rdmacm-mux returned 0" [ $? -eq 0 ]
	check "$CONF is still there, edit included" grep -qx 'RDMACM_MUX_DEVICE=rxe0' $CONF
	rm -f $CONF
	check "... and it was the only thing left" same_files /tmp/files-before
}

# ---- mode vms ------------------------------------------------------------------
# The libvirt hook of examples/libvirt, as libvirt runs it (/etc/libvirt/
# hooks/qemu DOMAIN OP SUBOP -, the domain's XML on stdin), on the example
# domain pointed at rxe0 (the plain unit, whose .vm directory is a link into
# its RuntimeDirectory) and at rxe1 (the templated unit, whose .vm directory
# is a RuntimeDirectory of its own). Each VM's QEMU connects on the socket
# its domain names; a neighbour under the same uid cannot take its GID; and
# "systemctl restart" of both keeps the VMs, their sockets, their GIDs and
# their established connection.
HOOK=/etc/libvirt/hooks/qemu

# domain_xml NAME DEV GID: the example domain for VM NAME on DEV, its GID.
domain_xml() {
	sed -e "s/<name>web-1</<name>$1</" -e "s|/web-1\.sock|/$1.sock|" -e "s/mlx5_0/$2/g" \
		-e "s/fe80::5054:ff:fe12:3456/$3/" -e '/::ffff:10\.0\.1\.5/d' \
		"$(find / -xdev -path '*/examples/libvirt/domain.xml' | head -n 1)"
}
# The socket path QEMU's -chardev names in the domain XML FILE.
chardev_path() { sed -n 's/.*socket,path=\([^,]*\),.*/\1/p' "$1"; }
# vm_json DEV: rdmacm-muxctl vms --json of DEV's daemon, on one line.
vm_json() { rdmacm-muxctl --socket "/run/rdmacm-mux-$1-1" vms --json; }
# vm_registered DEV NAME GID: the daemon says NAME's GID is registered.
vm_registered() {
	vm_json "$1" | grep -q "\"name\":\"$2\".*\"gid\":\"$3\",\"registered\":true"
}
inode() { stat -L -c %i "$1"; }

# --- two confined QEMUs (AppArmor) --------------------------------------------

# A stand-in for QEMU's connect() (or, with "read", an open): "connected"
# (or "read"), or the errno's name.
PROBE='import errno, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    if sys.argv[1] == "read":
        open(sys.argv[2]).read()
        print("read")
    else:
        s.connect(sys.argv[2])
        print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))'

# aa_profile UUID: a domain's profile as libvirt's virt-aa-helper makes it
# from TEMPLATE.qemu, with what the QEMU stand-in needs in place of the
# libvirt-qemu abstraction: its program and libraries, and nothing of
# /run, so that only a rule the hook writes lets it reach a socket there.
aa_profile() {
	printf '%s\n' "profile libvirt-$1 flags=(attach_disconnected) {" \
		'  /usr/** rmix,' '  /lib{,64,x86_64-linux-gnu}/** rmix,' '  /etc/ld.so.cache r,' \
		'  /dev/** rw,' '  /proc/** r,' '  /sys/** r,' '  network unix stream,' \
		'  capability setuid,' '  capability setgid,' '}'
}

# confined UUID UID WHAT PATH: the probe as uid UID in domain UUID's
# profile, as libvirt's AppArmor driver starts QEMU (aa_change_onexec).
confined() {
	sh -c '{ printf "exec %s" "$0" >/proc/self/attr/apparmor/exec ||
		 printf "exec %s" "$0" >/proc/self/attr/exec; } &&
	       exec setpriv --reuid="$1" --regid="$1" --clear-groups python3 -S -c "$2" "$3" "$4"' \
		"libvirt-$1" "$2" "$PROBE" "$3" "$4" 2>&1
}

# confined_report KIND D UID: domain aa-D's confined QEMU, as uid UID, on
# its own socket and on the neighbour's: a CONFINED-QEMU line each. Sets
# u, own and other (confined_qemus' u1, u2, p1 and p2 are seen here).
confined_report() {
	eval "u=\$u$2 own=\$p$2"
	other=$p1
	[ "$2" = 2 ] || other=$p2
	echo "CONFINED-QEMU $1 aa-$2 (libvirt-$u, uid $3): own socket $own: $(confined "$u" "$3" connect "$own")"
	echo "CONFINED-QEMU $1 aa-$2 (libvirt-$u, uid $3): neighbour's socket $other: $(confined "$u" "$3" connect "$other")"
}

# Two domains, aa-1 (rxe0's daemon) and aa-2 (rxe1's), started as libvirt
# starts them: hook prepare, the profile libvirt makes, hook start, the
# profile loaded; then each one's QEMU stand-in, confined in its own
# profile, connects to its own socket and to the other's: first with
# libvirt's default (one user for every QEMU), then with a DAC user each.
confined_qemus() {
	local t=/tmp/vms/aa u u1=11111111-2222-4333-8444-555555555501 u2=11111111-2222-4333-8444-555555555502
	local d p1 p2 own other enabled rc
	export RDMACM_MUX_APPARMOR_DIR=$t
	mkdir -p $t
	enabled=$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)
	check "AppArmor is on in this kernel (apparmor.enabled=$enabled), apparmor_parser is here" \
		eval '[ "$enabled" = Y ] && [ -d /sys/kernel/security/apparmor ] && command -v apparmor_parser'
	[ "$enabled" = Y ] || return 0
	# No prefix: web-1 and db-1 have the example's already.
	domain_xml aa-1 rxe0 fe80::5054:ff:fe00:a1 | sed -e "s/<uuid>[^<]*</<uuid>$u1</" \
		-e '/rdmacm:prefix/d' >$t/aa-1.xml
	domain_xml aa-2 rxe1 fe80::5054:ff:fe00:a2 | sed -e "s/<uuid>[^<]*</<uuid>$u2</" \
		-e '/rdmacm:prefix/d' >$t/aa-2.xml
	p1=$(chardev_path $t/aa-1.xml)
	p2=$(chardev_path $t/aa-2.xml)
	for d in 1 2; do
		eval "u=\$u$d"
		RDMACM_MUX_QEMU_USER=nobody $HOOK aa-$d prepare begin - <$t/aa-$d.xml >$t/aa-$d.hook 2>&1
		check "hook prepare for aa-$d exited 0" [ $? -eq 0 ]
		aa_profile "$u" >"$t/libvirt-$u"
		RDMACM_MUX_QEMU_USER=nobody $HOOK aa-$d start begin - <$t/aa-$d.xml >>$t/aa-$d.hook 2>&1
		check "hook start for aa-$d exited 0" [ $? -eq 0 ]
		indent <$t/aa-$d.hook
		apparmor_parser -r -K "$t/libvirt-$u" >$t/parser.out 2>&1
		check "apparmor_parser loaded libvirt-$u" [ $? -eq 0 ]
		indent <"$t/libvirt-$u"
	done
	check "both profiles are loaded, enforcing" \
		eval 'grep -q "^libvirt-$u1 (enforce)" /sys/kernel/security/apparmor/profiles &&
		      grep -q "^libvirt-$u2 (enforce)" /sys/kernel/security/apparmor/profiles'
	check "the confinement holds: aa-1's QEMU may not read /etc/hostname (EACCES)" \
		eval '[ "$(confined $u1 65534 read /etc/hostname)" = EACCES ]'

	echo "=== libvirt's default: both QEMUs run as one user (nobody)"
	for d in 1 2; do
		confined_report one-user $d 65534
	done
	check "each QEMU connects to its own socket" \
		eval '[ "$(confined $u1 65534 connect $p1)" = connected ] && [ "$(confined $u2 65534 connect $p2)" = connected ]'
	if [ "$(confined $u1 65534 connect $p2)" = connected ]; then
		info "this kernel's AppArmor ($(uname -r)) does not mediate connect() on UNIX sockets by path: the rule in a domain's profile keeps no QEMU of the same user out; a DAC user per domain does (next)"
	else
		check "AppArmor keeps aa-1's QEMU from aa-2's socket" [ "$(confined $u1 65534 connect $p2)" = EACCES ]
	fi

	echo "=== a DAC user per domain (<seclabel model='dac'>), made the socket's owner by the hook"
	for d in 1 2; do
		sed "s|</devices>|</devices><seclabel type='static' model='dac' relabel='yes'><label>+6400$d:+6400$d</label></seclabel>|" \
			$t/aa-$d.xml >$t/aa-$d-dac.xml
		$HOOK aa-$d prepare begin - <$t/aa-$d-dac.xml >$t/aa-$d.hook 2>&1
		check "hook prepare for aa-$d with a user of its own exited 0" [ $? -eq 0 ]
		indent <$t/aa-$d.hook
	done
	check "the sockets are their domains' users', mode 0600" \
		eval '[ "$(stat -L -c %u:%a $p1)" = 64001:600 ] && [ "$(stat -L -c %u:%a $p2)" = 64002:600 ]'
	for d in 1 2; do
		confined_report own-user $d 6400$d
		check "aa-$d's confined QEMU connects to its own socket" \
			eval '[ "$(confined $u 6400$d connect $own)" = connected ]'
		check "aa-$d's confined QEMU gets EACCES on the neighbour's socket" \
			eval '[ "$(confined $u 6400$d connect $other)" = EACCES ]'
	done
	for d in 1 2; do
		eval "u=\$u$d"
		$HOOK aa-$d release end - <$t/aa-$d-dac.xml >$t/aa-$d.hook 2>&1
		rc=$?
		check "hook release for aa-$d exited 0, its rule out of its profile" \
			eval '[ $rc -eq 0 ] && ! grep -q rdmacm-mux "$t/libvirt-$u"'
	done
	unset RDMACM_MUX_APPARMOR_DIR
}

vms_mode() {
	local rc out path0 path1 qe_pid qs_pid ino0 ino1 t=/tmp/vms

	echo "=== the libvirt hook, installed as $HOOK"
	mkdir -p /etc/libvirt/hooks $t
	install -m 0755 "$(find / -xdev -path '*/examples/libvirt/qemu-hook' | head -n 1)" $HOOK
	check "the hook is in place, and python3 runs it" \
		eval '[ -x $HOOK ] && python3 -c "import xml.etree.ElementTree"'
	# The example domain, for the daemons of rxe0 and rxe1.
	domain_xml web-1 rxe0 $G11 >$t/web-1.xml
	domain_xml db-1 rxe1 $G21 >$t/db-1.xml
	path0=$(chardev_path $t/web-1.xml)
	path1=$(chardev_path $t/db-1.xml)
	info "web-1's QEMU connects to $path0, db-1's to $path1"
	systemctl start $UNIT rdmacm-mux@rxe1-1.service
	check "rdmacm-mux.service (rxe0) and rdmacm-mux@rxe1-1 started" [ $? -eq 0 ]

	echo "=== prepare: libvirt is about to start web-1 and db-1"
	# QEMU runs as libvirt-qemu on Debian; this rootfs has no such user.
	for d in web-1 db-1; do
		RDMACM_MUX_QEMU_USER=nobody $HOOK $d prepare begin - <$t/$d.xml >$t/$d.hook 2>&1
		rc=$?
		check "the hook's prepare for $d exited 0" [ $rc -eq 0 ]
		indent <$t/$d.hook
	done
	check "web-1's socket is where its domain says, a link into the plain unit's RuntimeDirectory" \
		eval '[ -S $path0 ] && [ "$(readlink /run/rdmacm-mux-rxe0-1.vm)" = rdmacm-mux/rxe0-1.vm ]'
	check "db-1's socket is in the templated unit's RuntimeDirectory" \
		eval '[ -S $path1 ] && [ "$(prop rdmacm-mux@rxe1-1.service RuntimeDirectory)" = rdmacm-mux-rxe1-1.vm ]'
	check "the sockets are QEMU's user's, mode 0600" \
		eval '[ "$(stat -L -c %U:%a $path0)" = nobody:600 ] && [ "$(stat -L -c %U:%a $path1)" = nobody:600 ]'
	ino0=$(inode $path0)
	ino1=$(inode $path1)

	echo "=== web-1's QEMU connects to db-1's through their sockets"
	$B/rdmacm-mux-qemu-client -S "$path1" -g $G21 -n db-1 serve -c 2 -t 150 >$t/qs.out 2>&1 &
	qs_pid=$!
	check "db-1's QEMU registered $G21 on its socket" wait_for 20 has $t/qs.out "registered $G21"
	$B/rdmacm-mux-qemu-client -S "$path0" -g $G11 -n web-1 connect $G21 --hold 150000 \
		>$t/qe.out 2>&1 &
	qe_pid=$!
	check "web-1's connection to db-1 is established" wait_for 30 has $t/qe.out "connection 1 established"
	# A neighbour, same uid: on the shared socket, and on db-1's socket.
	$B/rdmacm-mux-qemu-client -S $SOCK0 -g $G11 -n thief connect $G21 >$t/thief.out 2>&1
	check "a client of the shared socket cannot take web-1's GID (EACCES)" \
		has $t/thief.out "REG $G11 failed: err_code 3"
	vm_json rxe0 >$t/vms0.json
	check "rdmacm-muxctl vms: web-1's GID is registered, the refusal counted" \
		eval 'vm_registered rxe0 web-1 $G11 && grep -q "\"other-vm\":1" $t/vms0.json'
	rdmacm-muxctl --socket $SOCK0 vms | indent

	echo "=== systemctl restart of both daemons"
	systemctl restart $UNIT rdmacm-mux@rxe1-1.service
	check "systemctl restart returned 0" [ $? -eq 0 ]
	check "both daemons took their VMs over" \
		eval 'journalctl -b -o cat --no-pager -u $UNIT | grep -q "took over 1 VMs" &&
		      journalctl -b -o cat --no-pager -u rdmacm-mux@rxe1-1.service | grep -q "took over 1 VMs"'
	check "the VMs kept their sockets (the same files)" \
		eval '[ "$(inode $path0)" = "$ino0" ] && [ "$(inode $path1)" = "$ino1" ]'
	check "after the restart web-1 and db-1 still hold their GIDs" \
		eval 'vm_registered rxe0 web-1 $G11 && vm_registered rxe1 db-1 $G21'
	$B/rdmacm-mux-qemu-client -S $SOCK0 -g $G11 -n thief2 connect $G21 >$t/thief2.out 2>&1
	check "after the restart the shared socket still cannot take web-1's GID" \
		has $t/thief2.out "REG $G11 failed: err_code 3"
	$B/rdmacm-mux-qemu-client -S "$path1" -g $G22 -n db-1-other connect $G11 >$t/other.out 2>&1
	check "nor may db-1's socket register a GID db-1 was not given" \
		has $t/other.out "REG $G22 failed: err_code 3"
	kill -USR1 "$qe_pid"
	wait "$qe_pid"
	rc=$?
	check "web-1's connection closed through the new daemons, its socket never closed (exit $rc)" \
		eval '[ $rc -eq 0 ] && has $t/qe.out "connection 1 closed"'
	indent <$t/qe.out
	# A new connection on web-1's socket, as after a QEMU restart.
	$B/rdmacm-mux-qemu-client -S "$path0" -g $G11 -n web-1-again connect $G21 >$t/again.out 2>&1
	check "a new QEMU on web-1's socket registers and connects" \
		has $t/again.out "connection 1 established with $G21"
	wait "$qs_pid"

	confined_qemus

	echo "=== release: libvirt is done with web-1 and db-1"
	for d in web-1 db-1; do
		RDMACM_MUX_QEMU_USER=nobody $HOOK $d release end - <$t/$d.xml >$t/$d.hook 2>&1
		check "the hook's release for $d exited 0" [ $? -eq 0 ]
		indent <$t/$d.hook
	done
	check "the VMs and their sockets are gone" \
		eval '[ ! -e $path0 ] && [ ! -e $path1 ] && ! vm_json rxe0 | grep -q web-1'
	systemctl stop $UNIT rdmacm-mux@rxe1-1.service
	check "stopped; the .vm link and directory are gone" \
		eval '[ ! -L /run/rdmacm-mux-rxe0-1.vm ] && [ ! -e /run/rdmacm-mux-rxe1-1.vm ]'
}

case $MODE in
main)
	setup
	main_mode
	;;
vms)
	setup
	vms_mode
	;;
boot-order) boot_order_mode ;;
pkg)
	setup
	pkg_mode
	;;
*) fail "unknown vmsd.mode '$MODE'" ;;
esac
DONE=1
