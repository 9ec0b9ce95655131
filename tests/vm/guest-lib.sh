# SPDX-License-Identifier: MIT
# shellcheck shell=sh disable=SC2034 # the variables are for the sourcing scripts
#
# Helpers and the address plan shared by the guest setup and the scenarios
# of the VM tests (tests/vm). Sourced with `. /vm/guest-lib.sh`; runs under
# busybox sh. Call iproute2 by full path: busybox's own `ip` applet wins
# over PATH and cannot create veth pairs.

IP=/usr/sbin/ip
RDMA=/usr/bin/rdma

# Address plan. rxe0 sits on veth0, rxe1 on veth1. Each IPv4 address of a
# netdev becomes an IPv4-mapped RoCE v2 GID (::ffff:a.b.c.d) of its rxe.
VM_IP0=10.0.0.1
VM_IP1=10.0.0.2
VM_EXTRA0="10.0.1.1 10.0.1.2 10.0.1.3 10.0.1.4"
VM_EXTRA1="10.0.2.1 10.0.2.2 10.0.2.3 10.0.2.4"
VM_NET_EXTRA0=10.0.1.0/24
VM_NET_EXTRA1=10.0.2.0/24
# Where rdmacm-mux puts its sockets: -s $VM_SOCK_PREFIX gives
# $VM_SOCK_PREFIX-<dev>-<port>.
VM_SOCK_PREFIX=/run/rdmacm-mux
# A comm id as the clients and the daemon's trace print it, for regexes.
ID='0x[0-9a-f]{8}'

VM_FAILED=0

vm_die() {
	echo "FATAL: $*" >&2
	exit 1
}

# The GID of an IPv4 address, as umad-probe takes it.
vm_gid() { echo "::ffff:$1"; }

# The plan's GIDs, named for the address's last two octets: G11 is
# 10.0.1.1 (rxe0), G21 is 10.0.2.1 (rxe1). For the scenarios.
# shellcheck disable=SC2034
{
	G01=$(vm_gid 10.0.0.1)
	G11=$(vm_gid 10.0.1.1) G12=$(vm_gid 10.0.1.2) G13=$(vm_gid 10.0.1.3) G14=$(vm_gid 10.0.1.4)
	G21=$(vm_gid 10.0.2.1) G22=$(vm_gid 10.0.2.2) G23=$(vm_gid 10.0.2.3)
}

# The sysfs spelling of that GID: 0000:...:ffff:0a00:0101.
vm_sysfs_gid() {
	(
		IFS=.
		# shellcheck disable=SC2086 # split a.b.c.d into four arguments
		set -- $1
		printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' \
			"$1" "$2" "$3" "$4"
	)
}

vm_gid_dir() { echo "/sys/class/infiniband/$1/ports/1/gids"; }

# "index=gid" for each IPv4-mapped GID of DEV port 1. One grep over all
# entries: a loop of one process per entry costs seconds.
vm_gid_list() {
	grep -H ':ffff:' "$(vm_gid_dir "$1")"/* 2>/dev/null |
		sed 's|.*/gids/\([0-9]*\):|\1=|' | tr '\n' ' '
}

# The GID table index of IPv4 address ADDR on DEV port 1.
vm_gid_index() {
	grep -l -x "$(vm_sysfs_gid "$2")" "$(vm_gid_dir "$1")"/* 2>/dev/null |
		head -n 1 | sed 's|.*/||'
}

# vm_wait_gids DEV ADDR...: waits up to 10 s until all are GIDs of DEV.
vm_wait_gids() {
	dev=$1
	shift
	tries=0
	while :; do
		have=$(grep -h ':ffff:' "$(vm_gid_dir "$dev")"/* 2>/dev/null || true)
		missing=
		for a in "$@"; do
			case "$have" in
			*"$(vm_sysfs_gid "$a")"*) ;;
			*) missing="$missing $a" ;;
			esac
		done
		[ -z "$missing" ] && return 0
		tries=$((tries + 1))
		[ "$tries" -lt 100 ] || vm_die "$dev: GIDs never appeared for:$missing"
		sleep 0.1
	done
}

# vm_need PROGRAM...: fails the scenario loudly when a program is missing.
vm_need() {
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 ||
			vm_die "required program '$p' is not in the guest"
	done
}

# vm_check DESCRIPTION COMMAND...: runs COMMAND, records PASS or FAIL.
vm_check() {
	desc=$1
	shift
	if "$@"; then
		echo "PASS: $desc"
	else
		echo "FAIL: $desc (exit $?): $*"
		VM_FAILED=$((VM_FAILED + 1))
	fi
}

# vm_fail MESSAGE: records a FAIL that no single command decides.
vm_fail() {
	echo "FAIL: $*"
	VM_FAILED=$((VM_FAILED + 1))
}

# vm_check_rxe0_held BY: rxe0's CM class is held (by BY, as the message
# says), rxe1's is still free to register.
vm_check_rxe0_held() {
	vm_check "rxe0's CM class is held by $1: EINVAL" umad-probe expect-owned rxe0 1
	vm_check "rxe1's is still free" umad-probe register rxe1 1
}

# vm_check_fails DESCRIPTION COMMAND...: COMMAND must exit non-zero.
vm_check_fails() {
	desc=$1
	shift
	if "$@"; then
		echo "FAIL: $desc (unexpected success): $*"
		VM_FAILED=$((VM_FAILED + 1))
	else
		echo "PASS: $desc"
	fi
}

# vm_wait_path PATH SECS: waits until PATH exists (a socket, a file).
vm_wait_path() {
	n=0
	while [ ! -e "$1" ]; do
		n=$((n + 1))
		[ "$n" -le $(($2 * 10)) ] || return 1
		sleep 0.1
	done
}

# vm_wait_grep FILE PATTERN SECS: waits until FILE has a line matching.
vm_wait_grep() {
	n=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ "$n" -le $(($3 * 10)) ] || return 1
		sleep 0.1
	done
}

vm_module_loaded() { grep -q "^$1 " /proc/modules; }

# Ends a scenario: exit 0 only when every check passed.
vm_finish() {
	if [ "$VM_FAILED" -ne 0 ]; then
		echo "$VM_FAILED check(s) failed"
		exit 1
	fi
	echo "all checks passed"
	exit 0
}

# ---- daemon scenarios: daemons, clients, traces and counters -------------
# Files live in /tmp: a daemon NAME writes its trace (stdout, --trace) to
# /tmp/NAME.trace and its log and counter dump (stderr) to /tmp/NAME.err; a
# client NAME writes stdout and stderr to /tmp/NAME.out.

# vm_mux_start NAME DEV [OPTION...]: starts rdmacm-mux --trace on DEV port 1
# and waits for its socket. Fails (and counts a failure) if none appears.
vm_mux_start() {
	name=$1 dev=$2
	shift 2
	rdmacm-mux -d "$dev" -p 1 -s "$VM_SOCK_PREFIX" --trace "$@" \
		>"/tmp/$name.trace" 2>"/tmp/$name.err" &
	echo $! >"/tmp/$name.pid"
	echo "$VM_SOCK_PREFIX-$dev-1" >"/tmp/$name.sock"
	if vm_wait_path "$VM_SOCK_PREFIX-$dev-1" 20; then
		echo "PASS: daemon $name on $dev is up"
		return 0
	fi
	echo "FAIL: daemon $name on $dev: no socket after 20 s"
	cat "/tmp/$name.err"
	VM_FAILED=$((VM_FAILED + 1))
	return 1
}

# The socket of daemon NAME.
vm_mux_sock() { cat "/tmp/$1.sock"; }

# vm_mux_stop NAME: SIGTERM; it must exit 0 and remove its socket. Shows its
# log and counters.
vm_mux_stop() {
	name=$1
	pid=$(cat "/tmp/$name.pid")
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
	echo "--- daemon $name: log and counters"
	cat "/tmp/$name.err"
	vm_check "daemon $name exits 0 on SIGTERM (got $rc)" [ "$rc" -eq 0 ]
	vm_check "daemon $name removed its socket" [ ! -e "$(vm_mux_sock "$name")" ]
}

# vm_client NAME PROGRAM ARG...: runs a client in the background.
vm_client() {
	name=$1
	shift
	"$@" >"/tmp/$name.out" 2>&1 &
	echo $! >"/tmp/$name.pid"
}

# vm_client_wait NAME: waits for client NAME; returns its exit status.
vm_client_wait() {
	wait "$(cat "/tmp/$1.pid")"
}

# vm_client_ok NAME: client NAME must exit 0; shows its output.
vm_client_ok() {
	vm_client_wait "$1"
	rc=$?
	sed 's/^/    /' "/tmp/$1.out"
	vm_check "client $1 exits 0 (got $rc)" [ "$rc" -eq 0 ]
}

# vm_client_fails NAME: client NAME must exit 1; shows its output.
vm_client_fails() {
	vm_client_wait "$1"
	rc=$?
	sed 's/^/    /' "/tmp/$1.out"
	vm_check "client $1 exits 1 (got $rc)" [ "$rc" -eq 1 ]
}

# vm_has NAME TEXT: client NAME's output has a line containing TEXT.
vm_has() {
	vm_check "$1 printed '$2'" grep -qF -- "$2" "/tmp/$1.out"
}

# vm_has_n NAME N TEXT: exactly N lines of client NAME contain TEXT.
vm_has_n() {
	n=$(grep -cF -- "$3" "/tmp/$1.out")
	vm_check "$1 printed '$3' $2 time(s) (got $n)" [ "$n" -eq "$2" ]
}

# vm_rx_only_from NAME GID...: every MAD client NAME received came from one
# of the GIDs (the receiver prints the sender's GID from the kernel's GRH).
vm_rx_only_from() {
	name=$1
	shift
	pat=$(printf '|%s' "$@")
	bad=$(grep -- '] <- ' "/tmp/$name.out" |
		grep -Ev -- " from (${pat#|})  comm " || true)
	vm_check "$name received only from $*${bad:+ (not: $bad)}" [ -z "$bad" ]
}

# vm_has_re NAME REGEX: client NAME's output has a line matching (grep -E).
vm_has_re() {
	vm_check "$1 printed /$2/" grep -qE -- "$2" "/tmp/$1.out"
}

# vm_rx_line ATTR FROM [COMM [REMOTE]]: the start of the line a client
# prints for an inbound MAD (pingpong and qemu-client print the same).
vm_rx_line() {
	printf '<- %-8s from %s  ' "$1" "$2"
	[ $# -lt 3 ] || printf 'comm %s ' "$3"
	[ $# -lt 4 ] || printf 'remote %s' "$4"
}

# vm_counter NAME ATTR tx|rx: the number in daemon NAME's counter dump (0
# when the row is absent, as the daemon omits all-zero rows).
vm_counter() {
	awk -v a="$2" -v col="$3" '
		/^counters for / { on = 1; next }
		on && $1 == a { v = (col == "tx") ? $2 : $3 }
		END { print v + 0 }' "/tmp/$1.err"
}

# vm_counter_row NAME KIND REASON: the count of daemon NAME's row
# "  KIND, REASON  N" (KIND "rx dropped" or "tx refused"), or 0.
vm_counter_row() {
	awk -v k="  $2, " -v why="$3" '
		index($0, k) == 1 {
			split(substr($0, length(k) + 1), f, " ")
			if (f[1] == why) v = f[2]
		}
		END { print v + 0 }' "/tmp/$1.err"
}

# vm_counter_stat NAME LABEL: the number on daemon NAME's counter line
# "  LABEL   N", a counter's name with spaces for '_', e.g. 'reg ok' or
# 'reg refused'; empty if none.
vm_counter_stat() {
	sed -n "/^counters for /,\$ s/^  $2  *\([0-9][0-9]*\)\$/\1/p" "/tmp/$1.err" | head -n 1
}

# vm_counter_problems NAME: daemon NAME's "rx dropped"/"tx refused" rows.
vm_counter_problems() {
	grep -E '^  (rx dropped|tx refused),' "/tmp/$1.err" || true
}

# vm_count_lines TEXT FILE...: lines containing TEXT in all FILEs.
vm_count_lines() {
	text=$1
	shift
	cat "$@" | grep -cF -- "$text" || true
}

# vm_check_counters DAEMON CLIENT...: DAEMON's per-attribute tx and rx rows
# equal what its CLIENTs printed: one "-> ATTR " line per MAD the daemon
# sent for them, one "<- ATTR " line per MAD it delivered to them.
vm_check_counters() {
	d=$1
	shift
	files=
	for c in "$@"; do files="$files /tmp/$c.out"; done
	for a in REQ REP RTU REJ MRA DREQ DREP SIDR_REQ SIDR_REP LAP APR; do
		# shellcheck disable=SC2086 # one argument per file
		{
			want_tx=$(vm_count_lines "-> $a " $files)
			want_rx=$(vm_count_lines "<- $a " $files)
		}
		got_tx=$(vm_counter "$d" "$a" tx)
		got_rx=$(vm_counter "$d" "$a" rx)
		if [ "$want_tx" -eq "$got_tx" ] && [ "$want_rx" -eq "$got_rx" ]; then
			[ "$want_tx$want_rx" = 00 ] ||
				echo "PASS: $d counters $a tx $got_tx rx $got_rx match its clients"
		else
			vm_fail "$d counters $a tx $got_tx rx $got_rx, its clients did tx $want_tx rx $want_rx"
		fi
	done
}

# vm_check_trace_delivery TRACE GIDMAP: every MAD a daemon relayed (the TX
# and RX lines of its TRACE) reached the client that owns the destination
# GID (GIDMAP lines: "GID CLIENT"), which printed it as received from the
# source GID, with the ids the trace shows. For a MAD the daemon sent: the
# LocalCommID is the wire id (SIDR_REP: the peer maps its RequestID back).
# For a MAD the daemon delivered: a REQ/SIDR_REQ keeps the peer's id, a
# SIDR_REP carries the client's own RequestID, any other MAD carries the
# client's own comm id as RemoteCommID.
vm_check_trace_delivery() {
	n=0
	bad=0
	# [dev:port] TX ATTR client N comm C -> wire W tid T SRC -> DST
	# [dev:port] RX ATTR client N wire W -> comm C tid T SRC -> DST
	while read -r _ dir attr _ _ _ f7 _ _ f10 _ _ src _ dst _; do
		case $dir in
		TX) wire=$f10 comm= ;;
		RX) wire=$f7 comm=$f10 ;;
		*) continue ;;
		esac
		owner=$(awk -v g="$dst" '$1 == g { print $2 }' "$2")
		[ -n "$owner" ] || continue
		n=$((n + 1))
		re=$(vm_rx_line "$attr" "$src" | sed 's/[.]/[.]/g')
		case $dir/$attr in
		TX/SIDR_REP) ;;
		TX/* | RX/REQ | RX/SIDR_REQ) re="${re}comm $wire " ;;
		RX/SIDR_REP) re="${re}comm $comm " ;;
		RX/*) re="${re}comm 0x[0-9a-f]{8} remote $comm\$" ;;
		esac
		if ! grep -qE -- "$re" "/tmp/$owner.out"; then
			echo "FAIL: $owner did not print /$re/ ($1: $dir $attr)"
			bad=$((bad + 1))
		fi
	done <"$1"
	[ "$n" -gt 0 ] || bad=$((bad + 1))
	vm_check "$n MADs of $1 reached their owners as traced" [ "$bad" -eq 0 ]
}

# vm_check_wire_ids TRACE: each session a client started or answered (TX
# REQ, SIDR_REQ, REP) has its own wire id, and it is not the client's id.
vm_check_wire_ids() {
	pairs=$(awk '$2 == "TX" && ($3 == "REQ" || $3 == "SIDR_REQ" || $3 == "REP") {
		print $5, $7, $10 }' "$1" | sort -u)
	n=$(echo "$pairs" | grep -c . || true)
	dups=$(echo "$pairs" | awk '{ print $3 }' | sort | uniq -d)
	same=$(echo "$pairs" | awk '$2 == $3')
	[ "$n" -gt 0 ] || dups="(no sessions in the trace)"
	vm_check "$1: $n sessions, distinct wire ids${dups:+ (reused: $dups)}" [ -z "$dups" ]
	vm_check "$1: no wire id equals its client's comm id${same:+ ($same)}" [ -z "$same" ]
}

# vm_pingpong NAME DAEMON IP ARG...: runs rdmacm-mux-pingpong as client NAME
# of daemon DAEMON with GID ::ffff:IP, and records in /tmp/gidmap that NAME
# owns that GID (for vm_check_trace_delivery).
vm_pingpong() {
	pname=$1 pd=$2 pip=$3
	shift 3
	echo "$(vm_gid "$pip") $pname" >>/tmp/gidmap
	vm_client "$pname" rdmacm-mux-pingpong -S "$(vm_mux_sock "$pd")" \
		-g "$(vm_gid "$pip")" -n "$pname" "$@"
}

# vm_qemu_client NAME DAEMON IP ARG...: the same with rdmacm-mux-qemu-client.
vm_qemu_client() {
	pname=$1 pd=$2 pip=$3
	shift 3
	echo "$(vm_gid "$pip") $pname" >>/tmp/gidmap
	vm_client "$pname" rdmacm-mux-qemu-client -S "$(vm_mux_sock "$pd")" \
		-g "$(vm_gid "$pip")" -n "$pname" "$@"
}

# vm_wait_registered NAME...: waits until each client has registered its GID.
vm_wait_registered() {
	for c in "$@"; do
		vm_wait_grep "/tmp/$c.out" '] registered ' 15 ||
			vm_die "client $c did not register: $(cat "/tmp/$c.out")"
	done
}

# vm_no_retries NAME...: true when no client had to repeat a MAD (then the
# exact per-attribute totals a scenario expects hold).
vm_no_retries() {
	for c in "$@"; do
		! grep -q 'no answer, sending' "/tmp/$c.out" || return 1
	done
}

# vm_check_no_problems DAEMON: no "rx dropped" or "tx refused" rows.
vm_check_no_problems() {
	p=$(vm_counter_problems "$1")
	vm_check "daemon $1 dropped and refused nothing${p:+ ($p)}" [ -z "$p" ]
}

# vm_cleanup: stops what a scenario left running because it ended early (a
# failure, vm_die, its timeout): every process with a pid file in /tmp
# (vm_mux_start, vm_client). It then removes the pid files, the daemons'
# sockets and the GID map. guest-init runs it after each scenario.
vm_cleanup() {
	for f in /tmp/*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -KILL "$pid" 2>/dev/null; then
			echo "cleanup: killed leftover ${f#/tmp/} (pid $pid)"
		fi
		rm -f "$f"
	done
	rm -f "$VM_SOCK_PREFIX"-*
	# Each scenario records its own clients' GIDs (vm_pingpong etc.).
	rm -f /tmp/gidmap
}

# Both daemons' traces against the clients' GID map: every MAD reached the
# GID's owner, and the wire ids are sound.
vm_check_both_traces() {
	for t in /tmp/muxA.trace /tmp/muxB.trace; do
		vm_check_trace_delivery "$t" /tmp/gidmap
		vm_check_wire_ids "$t"
	done
}

# Stop both daemons and print their traces.
vm_stop_both_muxes() {
	for m in muxA muxB; do
		vm_mux_stop "$m"
	done
	for m in muxA muxB; do
		echo "--- trace of $m"
		cat "/tmp/$m.trace"
	done
}
