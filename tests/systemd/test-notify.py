#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# The daemon's sd_notify contract, checked against a fake NOTIFY_SOCKET (a
# datagram socket in a temp dir that this test reads, with SO_PASSCRED so
# that every message's sender pid is known). The daemon runs on the
# simulated fabric. Checks, in order of the messages:
#   READY=1 first, and only once the socket accepts connections; STATUS=
#   next; WATCHDOG=1 at the period WATCHDOG_USEC asks for; STOPPING=1 after
#   SIGTERM and nothing after it; every message from the daemon's own pid.
# And the sd_watchdog_enabled() rules: WATCHDOG_PID naming the daemon (or
# absent) enables the pings, WATCHDOG_PID naming another process disables
# them. The watchdog is fed only while the loop turns: a loop held up
# inside a call (the simulated kernel's `stall`) stops the pings, although
# the daemon's other threads run on. And a daemon that fails to start
# never sends READY=1.
#
# Environment (set by meson): RDMACM_MUX_BIN UMAD_SIM_LIB UMAD_SIM_CLI.
import contextlib
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

DAEMON = os.environ["RDMACM_MUX_BIN"]
STATUS_RE = re.compile(r"^STATUS=\d+ clients, \d+ GIDs, \d+ sessions; "
                       r"MADs relayed: \d+ sent, \d+ received$")
# sd-event pings at 1/2 to 3/4 of the period: at 1 s a ping is late only
# after 250 ms off the CPU, which a loaded 2-CPU machine does not do (at
# 0.2 s, 50 ms was enough to fail); still several pings per run of 3 s.
WATCHDOG_USEC = 1000000

results = []


def reap(proc, notify):
    """Kill the daemon if a check left it running, and close its socket."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    notify.close()


def check(cond, what):
    results.append((bool(cond), what))
    print(("ok " if cond else "not ok ") + f"{len(results)} - {what}", flush=True)
    return cond


# Linux's SO_TIMESTAMPNS (Python names only SO_TIMESTAMP's neighbours).
SO_TIMESTAMPNS = 35


class Notify:
    """A fake NOTIFY_SOCKET: collects (time, pid, line) per message. The time
    is the kernel's (CLOCK_REALTIME, compare with time.time()): when the
    daemon sent it, not when this test, maybe starved of CPU, read it."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind(path)
        self.msgs = []

    def read(self, timeout):
        """Waits up to timeout s for one datagram; returns its lines or []."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return []
        data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12) + socket.CMSG_SPACE(16))
        pid = None
        now = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", payload[:16])
                now = sec + nsec / 1e9
        if now is None:
            raise RuntimeError("the notify socket gave no SCM_TIMESTAMPNS")
        lines = [l for l in data.decode().split("\n") if l]
        for l in lines:
            self.msgs.append((now, pid, l))
        return lines

    def wait_for(self, pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for l in self.read(end - time.monotonic()):
                if pred(l):
                    return l
        return None

    def close(self):
        self.sock.close()


def daemon_env(fabric, notify_path, extra):
    env = dict(os.environ)
    for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
              "LISTEN_PID", "JOURNAL_STREAM"):
        env.pop(k, None)
    env.update({
        "LD_PRELOAD": os.environ["UMAD_SIM_LIB"],
        "UMAD_SIM_FABRIC": fabric,
        "SYSFS_PATH": os.path.join(fabric, "sys"),
        "NOTIFY_SOCKET": notify_path,
    })
    env.update(extra)
    return env


def run_daemon(tmp, fabric, name, extra_env, wrap_pid=False, device="simA"):
    notify = Notify(os.path.join(tmp, name + ".notify"))
    sock = os.path.join(tmp, name + ".sock")
    argv = [DAEMON, "-d", device, "--socket", sock]
    if wrap_pid:
        # WATCHDOG_PID must be the daemon's own pid: the shell exports its
        # pid and execs the daemon, which keeps it.
        argv = ["/bin/sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$@"',
                "sh"] + argv
    log = open(os.path.join(tmp, name + ".log"), "w+")
    proc = subprocess.Popen(argv, env=daemon_env(fabric, notify.path, extra_env),
                            stdout=subprocess.DEVNULL, stderr=log)
    return proc, notify, sock, log


def stop(proc, notify):
    proc.send_signal(signal.SIGTERM)
    stopping = notify.wait_for(lambda l: l == "STOPPING=1", 5)
    rc = proc.wait(timeout=10)
    # Whatever is still queued arrived before the daemon exited.
    while notify.read(0.2):
        pass
    return stopping, rc


def full_contract(tmp, fabric, name, wrap_pid):
    extra = {"WATCHDOG_USEC": str(WATCHDOG_USEC)}
    proc, notify, sock, log = run_daemon(tmp, fabric, name, extra, wrap_pid)
    try:
        ready = notify.wait_for(lambda l: l == "READY=1", 10)
        check(ready, f"{name}: READY=1 arrives")
        # Right now, before anything else: the socket must take a client.
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.connect(sock)
            connected = True
        except OSError as e:
            connected = False
            print(f"# connect after READY=1: {e}")
        check(connected, f"{name}: the socket accepts a connection as soon as READY=1 arrives")

        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:
            notify.read(0.1)
        # The periodic STATUS (every 2 s) counts our client.
        live = notify.wait_for(lambda l: l.startswith("STATUS=1 clients"), 5)
        check(live, f"{name}: a later STATUS= counts the connected client")
        c.close()

        stopping, rc = stop(proc, notify)
        check(stopping, f"{name}: STOPPING=1 after SIGTERM")
        check(rc == 0, f"{name}: exit status 0 after SIGTERM (got {rc})")

        lines = [m[2] for m in notify.msgs]
        # The fd store (FDSTORE=1/FDSTOREREMOVE=1 with FDNAME=) is its own
        # stream: the sockets it bound, its state, each client while it is
        # connected. The life-cycle messages are checked without it.
        store = [l for l in lines if l.split("=")[0] in ("FDSTORE", "FDSTOREREMOVE", "FDNAME")]
        lines = [l for l in lines if l not in store]
        stored = [n[len("FDNAME="):] for p, n in zip(store, store[1:])
                  if p == "FDSTORE=1" and n.startswith("FDNAME=")]
        removed = [n[len("FDNAME="):] for p, n in zip(store, store[1:])
                   if p == "FDSTOREREMOVE=1" and n.startswith("FDNAME=")]
        # The umad fd first (its CM agent lives on in the store), then the
        # bound sockets (control before main: a client that finds the
        # daemon serving finds its control socket) and the state.
        check(stored[:5] == ["umad.1.0.simA", "control", "main", "state", "sessions"],
              f"{name}: the umad fd, the bound sockets and the state go to the fd store "
              f"first ({stored[:5]})")
        check(stored[5:] == ["client.1"] and removed == ["client.1"],
              f"{name}: the client's socket is stored while it is connected ({stored[5:]}, "
              f"removed {removed})")
        print(f"# first messages: {lines[:4]}")
        pids = {m[1] for m in notify.msgs}
        check(pids == {proc.pid}, f"{name}: every message comes from the daemon's pid ({pids} vs {proc.pid})")
        check(lines and lines[0] == "READY=1", f"{name}: READY=1 is the first message")
        check(lines.count("READY=1") == 1, f"{name}: READY=1 is sent once")
        status = [i for i, l in enumerate(lines) if l.startswith("STATUS=")]
        check(status and status[0] == 1 and STATUS_RE.match(lines[1]),
              f"{name}: STATUS= with the counters follows READY=1 ({lines[1] if len(lines) > 1 else None})")
        dog = [i for i, l in enumerate(lines) if l == "WATCHDOG=1"]
        check(dog and dog[0] > status[0], f"{name}: WATCHDOG=1 comes after READY=1 and STATUS=")
        check(lines[-1] == "STOPPING=1" and lines.count("STOPPING=1") == 1,
              f"{name}: STOPPING=1 is the last message, sent once")
        # Pings while the daemon ran at least 3 s: at most WATCHDOG_USEC apart.
        times = [m[0] for m in notify.msgs if m[2] == "WATCHDOG=1"]
        gaps = [b - a for a, b in zip(times, times[1:])]
        check(len(times) >= 3 and max(gaps) < WATCHDOG_USEC / 1e6,
              f"{name}: {len(times)} WATCHDOG=1, largest gap {max(gaps) if gaps else 0:.3f} s "
              f"< {WATCHDOG_USEC / 1e6} s")
        unknown = [l for l in lines if not (l in ("READY=1", "WATCHDOG=1", "STOPPING=1")
                                            or STATUS_RE.match(l))]
        check(not unknown, f"{name}: no unexpected messages {unknown}")
    finally:
        reap(proc, notify)
        log.seek(0)
        if not all(r[0] for r in results):
            sys.stdout.write("# daemon log:\n" + "".join("# " + l for l in log))
        log.close()


@contextlib.contextmanager
def watched_daemon(tmp, fabric, name, extra):
    """A daemon run that must send READY=1 first and, when the block is
    done, STOPPING=1 on SIGTERM and exit 0; killed and closed whatever
    happens. Yields the daemon and its notify socket."""
    proc, notify, _, log = run_daemon(tmp, fabric, name, extra)
    try:
        check(notify.wait_for(lambda l: l == "READY=1", 10), f"{name}: READY=1 arrives")
        yield proc, notify
        stopping, rc = stop(proc, notify)
        check(stopping and rc == 0, f"{name}: STOPPING=1 and exit 0")
    finally:
        reap(proc, notify)
        log.close()


def watchdog_disabled(tmp, fabric):
    # WATCHDOG_PID names some other process: sd_watchdog_enabled() says no.
    extra = {"WATCHDOG_USEC": str(WATCHDOG_USEC), "WATCHDOG_PID": "1"}
    with watched_daemon(tmp, fabric, "foreign-pid", extra) as (_, notify):
        dog = notify.wait_for(lambda l: l == "WATCHDOG=1", 4 * WATCHDOG_USEC / 1e6)
        check(dog is None, "foreign-pid: no WATCHDOG=1 when WATCHDOG_PID is another process")


def watchdog_stalled_loop(tmp, fabric):
    # The loop is held inside umad_recv() for 1.5 s: no WATCHDOG=1 may come
    # in that time (systemd would kill such a daemon, as it should), and
    # the pings resume when the loop turns again.
    extra = {"WATCHDOG_USEC": str(WATCHDOG_USEC)}
    with watched_daemon(tmp, fabric, "stalled", extra) as (_, notify):
        check(notify.wait_for(lambda l: l == "WATCHDOG=1", 2), "stalled: WATCHDOG=1 before the stall")
        t_stall = time.time()
        subprocess.run([os.environ["UMAD_SIM_CLI"], "stall", fabric, "simA", "1", "1500"],
                       check=True, stdout=subprocess.DEVNULL)
        # Until a ping comes from after the stall (or 20 s pass: a daemon
        # that never pings again fails below).
        t_end = time.monotonic() + 20.0
        while time.monotonic() < t_end:
            notify.read(0.1)
            if any(m[2] == "WATCHDOG=1" and m[0] > t_stall + 1.5 for m in notify.msgs):
                break
        times = [m[0] for m in notify.msgs if m[2] == "WATCHDOG=1"]
        gaps = [b - a for a, b in zip(times, times[1:]) if b > t_stall]
        check(gaps and max(gaps) >= 1.3,
              f"stalled: no WATCHDOG=1 while the loop is held up (largest gap "
              f"{max(gaps) if gaps else 0:.3f} s, the stall 1.5 s)")
        check(times and times[-1] > t_stall + 1.5,
              "stalled: WATCHDOG=1 again once the loop turns")


def failures(tmp, fabric):
    # No such device: exit 4, and READY=1 must never be sent.
    proc, notify, sock, log = run_daemon(tmp, fabric, "nodev", {}, device="nosuchdev")
    rc = proc.wait(timeout=10)
    while notify.read(0.2):
        pass
    check(rc == 4, f"nodev: exit status 4 for a missing device (got {rc})")
    check(not any(m[2] == "READY=1" for m in notify.msgs), "nodev: no READY=1")
    notify.close()
    log.close()

    # A second daemon on a port whose CM class is owned: exit 3, no READY=1.
    first, n1, _, l1 = run_daemon(tmp, fabric, "owner", {})
    try:
        check(n1.wait_for(lambda l: l == "READY=1", 10), "owner: the first daemon is ready")
        proc, notify, sock, log = run_daemon(tmp, fabric, "second", {})
        rc = proc.wait(timeout=10)
        while notify.read(0.2):
            pass
        check(rc == 3, f"second: exit status 3 when the CM class is owned (got {rc})")
        check(not any(m[2] == "READY=1" for m in notify.msgs), "second: no READY=1")
        log.seek(0)
        text = log.read()
        check("already owned" in text, "second: the log says the CM class is already owned")
        check("not by ib_cm: another rdmacm-mux" in text,
              "second: ... and that another rdmacm-mux, not ib_cm, holds it")
        notify.close()
        log.close()
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=10)
        n1.close()
        l1.close()


def main():
    tmp = tempfile.mkdtemp(prefix="rdmacm-mux-notify.")
    try:
        fabric = os.path.join(tmp, "fabric")
        subprocess.run([os.environ["UMAD_SIM_CLI"], "create", fabric, "--preset", "two-hosts"],
                       check=True, stdout=subprocess.DEVNULL)
        full_contract(tmp, fabric, "no-pid", wrap_pid=False)
        full_contract(tmp, fabric, "own-pid", wrap_pid=True)
        watchdog_disabled(tmp, fabric)
        watchdog_stalled_loop(tmp, fabric)
        failures(tmp, fabric)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # TAP: the "not ok" lines carry the verdict (meson counts them as FAIL).
    print(f"1..{len(results)}")
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
