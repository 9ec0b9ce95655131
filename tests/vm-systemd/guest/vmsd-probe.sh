#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Sandbox probe of tests/vm-systemd. vmsd-check.sh runs it inside
# rdmacm-mux.service's cgroup (its device filter) and mount namespace (its
# private /dev): it opens device nodes read-write and prints one line each,
# "PATH: ok", "PATH: absent" or "PATH: <error>", then tries to write into
# /dev/infiniband and /usr.
echo "cgroup $(cat /proc/self/cgroup)"
for d in /dev/infiniband/umad0 /dev/infiniband/umad1 /dev/infiniband/uverbs0 \
	/dev/infiniband/uverbs1 /dev/infiniband/issm0 /dev/infiniband/issm1 \
	/dev/null /dev/ttyS0 /dev/mem; do
	if [ ! -e "$d" ]; then
		echo "$d: absent"
	elif err=$({ : 3<>"$d"; } 2>&1); then
		echo "$d: ok"
	else
		echo "$d: ${err##*: }"
	fi
done
if err=$(touch /dev/infiniband/probe 2>&1); then
	echo "touch: ok (writable!)"
else
	echo "touch: ${err##*: }"
fi
# ProtectSystem=strict: the units start in early boot now, which
# systemd-analyze security gives no credit for; the sandbox still holds.
if err=$(touch /usr/probe 2>&1); then
	rm -f /usr/probe
	echo "touch /usr: ok (writable!)"
else
	echo "touch /usr: ${err##*: }"
fi
