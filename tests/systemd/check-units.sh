#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lints the generated systemd units with systemd-analyze, on copies whose
# ExecStart= points at the built daemon (verify checks that every command
# exists and is executable):
#   check-units.sh verify   SBINDIR DAEMON PAGE[:PAGE...]|- UNIT...
#       "systemd-analyze verify" on every unit and on one instance of each
#       template; any message at all fails. With PAGEs (the man pages this
#       build made, e.g. .../rdmacm-mux.8), the Documentation= pages are
#       looked up among them, and nowhere else.
#   check-units.sh security SBINDIR DAEMON THRESHOLD UNIT...
#       "systemd-analyze security --offline=true --threshold=THRESHOLD" on
#       each service and one template instance; prints the exposure.
#   check-units.sh boot-order SBINDIR DAEMON - UNIT...
#       our services, an instance of the template, and rdma-core's module
#       loading and rdma-hw.target in one boot transaction (a target that
#       wants them all, checked by "systemd-analyze verify"): the units
#       order themselves before rdma-core's module loading, and any ordering
#       cycle that makes (systemd would break it by dropping a job at boot)
#       fails. Exit 77 (skip) without rdma-core's units on this host.
# THRESHOLD is on systemd-analyze's 0..100 scale: 29 means exposure <= 2.9.
set -euo pipefail

mode=$1 sbindir=$2 daemon=$3 arg=$4
shift 4

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/units"

for unit in "$@"; do
	name=$(basename "$unit")
	sed "s|$sbindir/rdmacm-mux|$daemon|g" "$unit" >"$tmp/units/$name"
	if grep -q "$sbindir/rdmacm-mux" "$tmp/units/$name"; then
		echo "not ok: $name still names $sbindir/rdmacm-mux" >&2
		exit 1
	fi
done

# Every unit, plus each template as an instance, as systemctl would load it.
targets=()
for f in "$tmp"/units/*; do
	name=$(basename "$f")
	targets+=("$f")
	if [[ $name == *@.* ]]; then
		targets+=("$tmp/units/${name/@./@mlx5_0-1.}")
	fi
done

fail=0
case $mode in
verify)
	man_opt=(--man=no)
	if [[ $arg != - ]]; then
		IFS=: read -ra pages <<<"$arg"
		for p in "${pages[@]}"; do
			sec=man${p##*.}
			mkdir -p "$tmp/man/$sec"
			ln -s "$p" "$tmp/man/$sec/"
		done
		man_opt=(--man=yes)
		export MANPATH=$tmp/man
	fi
	for t in "${targets[@]}"; do
		out=$(cd "$tmp" && systemd-analyze verify "${man_opt[@]}" "$t" 2>&1) || {
			echo "not ok: verify $(basename "$t") failed:" >&2
			echo "$out" >&2
			fail=1
			continue
		}
		if [[ -n $out ]]; then
			echo "not ok: verify $(basename "$t") complained:" >&2
			echo "$out" >&2
			fail=1
			continue
		fi
		echo "ok: verify $(basename "$t")"
	done
	;;
security)
	for t in "${targets[@]}"; do
		[[ $t == *.service ]] || continue
		[[ $(basename "$t") == *@.service ]] && continue
		rc=0
		out=$(systemd-analyze security --offline=true --threshold="$arg" \
			--no-pager "$t" 2>&1) || rc=$?
		level=$(grep -o 'Overall exposure level for .*' <<<"$out" || true)
		if ((rc != 0)) || [[ -z $level ]]; then
			echo "not ok: $(basename "$t") exposure above the threshold $arg/100 (rc $rc):" >&2
			echo "$out" | grep -v '^✓' >&2
			fail=1
			continue
		fi
		echo "ok: $level"
	done
	;;
boot-order)
	rdma_units=
	for d in /lib/systemd/system /usr/lib/systemd/system; do
		[[ -f $d/rdma-load-modules@.service ]] && rdma_units=$d
	done
	if [[ -z $rdma_units ]]; then
		echo "SKIP: rdma-core's units are not installed (scripts/setup.sh installs rdma-core)"
		exit 77
	fi
	want="rdma-hw.target sysinit.target sockets.target"
	for m in rdma infiniband opa; do want="$want rdma-load-modules@$m.service"; done
	for t in "${targets[@]}"; do
		[[ $t == *.service && $(basename "$t") != *@.service ]] && want="$want $(basename "$t")"
	done
	printf '[Unit]\nDescription=a boot with rdmacm-mux and rdma-core\nWants=%s\n' "$want" \
		>"$tmp/units/boot.target"
	out=$(cd "$tmp" && SYSTEMD_UNIT_PATH=$tmp/units: systemd-analyze verify --man=no \
		"$tmp/units/boot.target" 2>&1) || true
	if grep -q 'ordering cycle' <<<"$out"; then
		echo "not ok: an ordering cycle at boot, with rdma-core's units from $rdma_units:" >&2
		grep -iE 'cycle|Found dependency|deleted' <<<"$out" >&2
		fail=1
	else
		echo "ok: no ordering cycle with $want"
	fi
	;;
*)
	echo "usage: $0 verify|security|boot-order ..." >&2
	exit 2
	;;
esac
exit "$fail"
