#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# Writes the fuzzers' seed corpora (tests/fuzz/corpus/<fuzzer>/) from the
# CM flows the integration tests drive: active and passive connection
# set-up and teardown, SIDR, QEMU's source-GID destination, two clients
# with the same comm id, REJ(Timeout), MRA, timers, a slow reader, garbage
# frames and the HELLO/CLIENT_STATS extension; and for the relay, MADs that
# wait for a sender: written later, failed, lost, stopped, with no sender,
# a client that leaves or stops being read meanwhile, and a hand-off that
# cuts them short. The relay seeds are programs in fuzz-relay.c's step
# language; the others are raw frames and MADs.
# Deterministic: rerun after changing a harness's input format.
#   tests/fuzz/gen-seeds.py [OUTDIR]     (default: tests/fuzz/corpus)
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

ATTR = dict(REQ=0x10, MRA=0x11, REJ=0x12, REP=0x13, RTU=0x14, DREQ=0x15, DREP=0x16,
            SIDR_REQ=0x17, SIDR_REP=0x18, LAP=0x19, APR=0x1A, CPI=0x01)


def v4(a, b, c, d):
    return bytes(10) + b"\xff\xff" + bytes([a, b, c, d])


G_LOCAL1, G_LOCAL2, G_PEER = v4(10, 0, 1, 1), v4(10, 0, 1, 2), v4(10, 0, 2, 1)


def mad(attr, local=0, remote=0, dest=G_PEER, length=256, v6=False):
    m = bytearray(256)
    m[0:4] = bytes([1, 7, 2, 3])
    m[8:16] = struct.pack(">Q", 0x1122334400000000 | local)
    m[16:18] = struct.pack(">H", ATTR[attr])
    m[24:28] = struct.pack(">I", local)
    if attr not in ("SIDR_REQ", "SIDR_REP"):
        m[28:32] = struct.pack(">I", remote)
    if attr == "REQ":
        m[80:96], m[96:112] = G_LOCAL1, dest
        m[165] = 0x40
        m[164 + 32:164 + 36] = dest[12:]
    if attr == "SIDR_REQ":
        m[41] = 0x60 if v6 else 0x40
        m[40 + 20:40 + 36] = dest
    if attr == "REJ":
        m[35] = 4
    return bytes(m[:length])


def frame(msg_type=0, op=0, sgid=bytes(16), err=0, payload=b"", umad_len=None, grh=0,
          gid_index=0, dgid=bytes(16), steer=0):
    if umad_len is None:
        umad_len = len(payload)
    hdr = struct.pack("<II16si", msg_type, op, sgid, err) + bytes([steer, 0, 0, 0])
    addr = struct.pack(">IIH", 1, 0x80010000, 0) + bytes([0, 0, grh, gid_index, 64, 0]) + dgid + \
        struct.pack(">I", 0) + struct.pack("<H", 0) + bytes(6)
    f = hdr + struct.pack("<i", umad_len) + struct.pack("<IIIII", 0, 0, 0, 0, 0) + addr + \
        payload.ljust(256, b"\0") + bytes(4)
    assert len(f) == 360
    return f


def hello(caps=3, magic=0x524D5558):
    return struct.pack("<IHHQIIII", magic, 1, 0, caps, 0, 0, 0, 0)


def write(fuzzer, name, data):
    d = os.path.join(OUT, fuzzer)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- cm-codec: one MAD per attribute, and edge lengths ----
for a in ATTR:
    write("cm-codec", a.lower(), mad(a, 7, 9))
write("cm-codec", "sidr_req-v6", mad("SIDR_REQ", 7, v6=True))
write("cm-codec", "req-short", mad("REQ", 7, length=111))
write("cm-codec", "rej-min", mad("REJ", 7, 9, length=36))
write("cm-codec", "header-only", mad("RTU", length=24))

# ---- frames: 360-byte requests; byte 28 steers (client, wire) ----
REG, UNREG, MADOP, HELLO, STATS = 0, 1, 2, 0x10000, 0x10001
write("frames", "reg-req-unreg",
      frame(op=REG, sgid=v4(10, 0, 1, 3))
      + frame(op=MADOP, sgid=G_LOCAL1, payload=mad("REQ", 5), grh=1, dgid=G_PEER)
      + frame(op=UNREG, sgid=v4(10, 0, 1, 3)))
write("frames", "qemu-style-req",
      frame(op=MADOP, sgid=G_LOCAL1, payload=mad("REQ", 5), grh=1, dgid=G_LOCAL1))
write("frames", "hello-stats",
      frame(op=HELLO, payload=hello(), steer=1) + frame(op=STATS, steer=1)
      + frame(op=REG, sgid=G_LOCAL1, steer=1))
write("frames", "wire-req-then-rep",
      frame(payload=mad("REQ", 0x33, dest=G_LOCAL2), grh=1, gid_index=2, dgid=G_PEER, steer=4)
      + frame(op=MADOP, sgid=G_LOCAL2, payload=mad("REP", 4, 0x33), grh=1, dgid=G_PEER, steer=1))
write("frames", "wire-sidr",
      frame(payload=mad("SIDR_REQ", 0x44, dest=G_LOCAL1), umad_len=256, steer=4)
      + frame(op=MADOP, sgid=G_LOCAL1, payload=mad("SIDR_REP", 0x44), grh=1, dgid=G_PEER))
write("frames", "garbage", b"".join(frame(msg_type=7, op=99) for _ in range(9)))
write("frames", "bad-lengths",
      frame(op=MADOP, sgid=G_LOCAL1, payload=mad("RTU", 1), umad_len=-1)
      + frame(op=MADOP, sgid=G_LOCAL1, payload=mad("RTU", 1), umad_len=300)
      + frame(op=MADOP, sgid=G_LOCAL1, payload=mad("REQ", 1, length=100))
      + frame(op=3, steer=3))

# ---- relay: programs (see fuzz-relay.c) ----
ADD, REMOVE, REGS, UNREGS, MADS, WIRE, TIME, DRAIN, RAW, HELLOS, STATSS, FAIL, RAWWIRE, FORGE, \
    SEND, SENDERS, HANDOFF = range(17)
# SEND i h e: h 0 written, 1 failed (e picks the errno), 2 sender lost, 3 deadline
WRITTEN, FAILED, LOST, DEADLINE = range(4)
# SENDERS n: n % 3 live; + HOLD: writes stay in flight until a SEND
HOLD = 4
A = dict(REQ=0, REP=1, RTU=2, DREQ=3, DREP=4, REJ=5, MRA=6, SIDR_REQ=7, SIDR_REP=8, LAP=9, APR=10,
         CPI=13, BOGUS=14)
# GID pool: 0 fe80::1, 1-3 10.0.1.1-3 (the port), 4 10.0.1.9, 5-7 10.0.2.1-3 (peers), 8 zero
ZERO, SMALL, WIREID, OWN, SEEN = 0, lambda k: (k << 3) | 1, lambda k: (k << 3) | 3, \
    lambda k: (k << 3) | 5, lambda k: (k << 3) | 6


def cmad(c, g, d, a, l, r, f=0):
    return [MADS, c, g, d, A[a], l, r, f]


def wire(a, l, r, f=0, grh=True, gid_index=1, peer=5):
    return [WIRE, A[a], l, r, f, (1 if grh else 0) | (gid_index << 1), peer]


def prog(name, *steps):
    out = []
    for s in steps:
        out += s
    write("relay", name, bytes(out))


prog("active-connect-disconnect",
     [ADD], [REGS, 0, 1], cmad(0, 1, 5, "REQ", SMALL(0), ZERO),
     wire("REP", SMALL(1), WIREID(0)), [DRAIN, 0],
     cmad(0, 1, 5, "RTU", SMALL(0), SEEN(0)), cmad(0, 1, 5, "DREQ", SMALL(0), SEEN(0)),
     wire("DREP", SMALL(1), WIREID(0)), [DRAIN, 0], [TIME, 200], [TIME, 140])
prog("passive-accept",
     [ADD], [REGS, 0, 2], wire("REQ", SMALL(2), ZERO, gid_index=2, peer=6), [DRAIN, 0],
     cmad(0, 2, 6, "REP", SMALL(1), SEEN(0)), wire("RTU", SMALL(2), WIREID(0), gid_index=2, peer=6),
     wire("DREQ", SMALL(2), WIREID(0), gid_index=2, peer=6), [DRAIN, 0],
     cmad(0, 2, 6, "DREP", SMALL(1), SEEN(0)), [TIME, 255])
prog("sidr",
     [ADD], [REGS, 0, 1], cmad(0, 1, 5, "SIDR_REQ", SMALL(0), ZERO),
     wire("SIDR_REP", WIREID(0), ZERO), [DRAIN, 0],
     [ADD], [REGS, 1, 2], wire("SIDR_REQ", SMALL(3), ZERO, gid_index=2), [DRAIN, 1],
     cmad(1, 2, 0x80, "SIDR_REP", SEEN(1), ZERO), [TIME, 100])
prog("qemu-source-gid",
     [ADD], [REGS, 0, 1], cmad(0, 1, 0xdc, "REQ", SMALL(0), ZERO),
     wire("REP", SMALL(1), WIREID(0)), [DRAIN, 0], cmad(0, 1, 0x80, "RTU", SMALL(0), SEEN(0)))
prog("two-clients-same-comm-id",
     [ADD], [ADD], [REGS, 0, 1], [REGS, 1, 2], cmad(0, 1, 5, "REQ", SMALL(0), ZERO),
     cmad(1, 2, 6, "REQ", SMALL(0), ZERO), wire("REP", SMALL(1), WIREID(1), gid_index=2, peer=6),
     wire("REP", SMALL(1), WIREID(0)), [DRAIN, 0], [DRAIN, 1],
     cmad(1, 2, 6, "RTU", SMALL(0), SEEN(0)), [REMOVE, 0], [TIME, 255])
prog("rej-timeout-and-mra",
     [ADD], [REGS, 0, 1], wire("REQ", SMALL(1), ZERO), [DRAIN, 0],
     cmad(0, 1, 5, "MRA", SMALL(2), SEEN(0)), wire("REJ", SMALL(1), ZERO, f=4), [DRAIN, 0],
     cmad(0, 1, 5, "REQ", SMALL(3), ZERO), wire("MRA", SMALL(1), WIREID(1), f=1),
     wire("REJ", SMALL(1), WIREID(1), f=4), [DRAIN, 0])
prog("gid-ownership",
     [ADD], [ADD], [REGS, 0, 1], [REGS, 0, 1], [REGS, 1, 1], [UNREGS, 1, 1], [REGS, 0, 8],
     [REGS, 0, 4], [REGS, 0, 2], [REGS, 0, 3], [UNREGS, 0, 6], [UNREGS, 0, 1], [REGS, 1, 1],
     cmad(0, 1, 5, "REQ", SMALL(0), ZERO), [DRAIN, 0], [DRAIN, 1])
prog("hello-stats-errno",
     [ADD], [HELLOS, 0, 3], [STATSS, 0], [REGS, 0, 1], [REGS, 0, 1], [HELLOS, 0, 0x83],
     [STATSS, 0], [HELLOS, 0, 0], [STATSS, 0], [DRAIN, 0])
prog("slow-reader-and-pause",
     [ADD], [REGS, 0, 1], *[wire("REQ", SMALL(k), ZERO) for k in range(4)],
     *[wire("REQ", (k << 3) | 7, ZERO) + [0, 0, 0x10, k] for k in range(3)],
     *[[REGS, 0, 1] for _ in range(8)], [DRAIN, 0], [TIME, 255], [TIME, 255])
prog("session-quota-and-fail",
     [ADD], [REGS, 0, 1], [FAIL, 1], *[cmad(0, 1, 5, "REQ", SMALL(k), ZERO) for k in range(4)],
     *[cmad(0, 1, 5, "REQ", (k << 3) | 7, ZERO) + [0, 0, 0, 9 + k] for k in range(4)],
     [DRAIN, 0], [TIME, 70], [TIME, 255])
prog("lap-apr",
     [ADD], [REGS, 0, 1], cmad(0, 1, 5, "REQ", SMALL(0), ZERO), wire("REP", SMALL(1), WIREID(0)),
     cmad(0, 1, 5, "RTU", SMALL(0), SEEN(0)), cmad(0, 1, 5, "LAP", SMALL(0), SEEN(0)),
     wire("APR", SMALL(1), WIREID(0)), wire("LAP", SMALL(1), WIREID(0)),
     cmad(0, 1, 5, "APR", SMALL(0), SEEN(0)), [DRAIN, 0])
prog("garbage-disconnect",
     [ADD], [RAW, 0] + list(frame(msg_type=3)), [RAW, 0] + list(frame(op=77)),
     [RAW, 0] + list(frame(op=HELLO, payload=hello(magic=1))), [RAW, 0] + list(frame(op=STATS)),
     [ADD], [RAW, 0] + list(frame(op=REG, sgid=G_LOCAL1)))
prog("forged-session-mads",
     [ADD], [REGS, 0, 1], [ADD], [REGS, 1, 2], cmad(0, 1, 5, "REQ", SMALL(0), ZERO),
     wire("REP", SMALL(1), WIREID(0)), [DRAIN, 0], cmad(0, 1, 5, "RTU", SMALL(0), SEEN(0)),
     wire("REQ", SMALL(2), ZERO, gid_index=2, peer=6), [DRAIN, 1],
     *[[FORGE, s, a, v] for s in range(2) for a in (1, 2, 3, 4, 5, 6, 9) for v in range(5)],
     [DRAIN, 0], [DRAIN, 1], [TIME, 255])
prog("deferred-in-order",
     [SENDERS, 2 + HOLD], [ADD], [REGS, 0, 1], cmad(0, 1, 5, "REQ", SMALL(0), ZERO),
     [REGS, 0, 2], wire("REQ", SMALL(2), ZERO), [DRAIN, 0], [SEND, 0, WRITTEN, 0],
     wire("REP", SMALL(1), WIREID(0)), [DRAIN, 0], cmad(0, 1, 5, "RTU", SMALL(0), SEEN(0)),
     [DRAIN, 0])
prog("deferred-every-end",
     [SENDERS, 2 + HOLD], [ADD], [REGS, 0, 1], [HELLOS, 0, 1],
     cmad(0, 1, 5, "REQ", SMALL(0), ZERO), cmad(0, 1, 6, "REQ", SMALL(1), ZERO),
     [SEND, 1, FAILED, 3], [SEND, 0, LOST, 0], [DRAIN, 0],
     cmad(0, 1, 7, "REQ", SMALL(2), ZERO), cmad(0, 1, 7, "REQ", SMALL(3), ZERO),
     [SEND, 0, DEADLINE, 0], cmad(0, 1, 7, "REQ", SMALL(0), ZERO), [DRAIN, 0],
     [FAIL, 1], cmad(0, 1, 5, "SIDR_REQ", SMALL(1), ZERO), [SEND, 0, WRITTEN, 0], [DRAIN, 0])
prog("deferred-paused-reader",
     [SENDERS, 1 + HOLD], [ADD], [REGS, 0, 1], *[cmad(0, 1, 5 + k % 3, "REQ", SMALL(k), ZERO)
                                               for k in range(6)],
     [REGS, 0, 2], [SEND, 0, WRITTEN, 0], [SEND, 0, WRITTEN, 0], [DRAIN, 0], [SEND, 0, FAILED, 200],
     [DRAIN, 0], [SEND, 0, WRITTEN, 0], [DRAIN, 0])
prog("deferred-client-leaves",
     [SENDERS, 2 + HOLD], [ADD], [ADD], [REGS, 0, 1], [REGS, 1, 2],
     cmad(0, 1, 5, "REQ", SMALL(0), ZERO), cmad(1, 2, 6, "REQ", SMALL(0), ZERO), [REMOVE, 0],
     [SEND, 0, WRITTEN, 0], [SEND, 0, LOST, 0], [DRAIN, 0])
prog("deferred-no-senders",
     [ADD], [REGS, 0, 1], cmad(0, 1, 5, "REQ", SMALL(0), ZERO), [SENDERS, 0],
     cmad(0, 1, 5, "RTU", SMALL(0), ZERO), cmad(0, 1, 6, "REQ", SMALL(1), ZERO), [DRAIN, 0],
     [SENDERS, 1 + HOLD], cmad(0, 1, 6, "REQ", SMALL(2), ZERO), cmad(0, 1, 6, "REQ", SMALL(3), ZERO),
     [SENDERS, HOLD], [DRAIN, 0])
prog("handoff-cuts-sends-short",
     [SENDERS, 1 + HOLD], [ADD], [REGS, 0, 1], [ADD], [REGS, 1, 2],
     cmad(0, 1, 5, "REQ", SMALL(0), ZERO), cmad(0, 1, 6, "REQ", SMALL(1), ZERO),
     cmad(0, 1, 7, "REQ", SMALL(2), ZERO), cmad(1, 2, 5, "REQ", SMALL(0), ZERO), [HANDOFF])
prog("raw-wire",
     [ADD], [REGS, 0, 1], [RAWWIRE, 0x53, 255] + list(mad("REQ", 9, dest=G_LOCAL1)),
     [RAWWIRE, 0x00, 23] + list(mad("RTU")[:24]), [DRAIN, 0])

# ---- client-lib: byte 0 = mode; stream steps (see fuzz-client-lib.c) ----


def chunks(data):
    out = b""
    while data:
        n = min(127, len(data))
        out += bytes([n]) + data[:n]
        data = data[n:]
    return out


SUB_REG, SUB_UNREG, SUB_MAD, SUB_WAIT = 0x80, 0x81, 0x82, 0x84
write("client-lib", "responses-in-order",
      b"\0" + bytes([SUB_REG, SUB_UNREG, SUB_MAD]) + chunks(
          frame(1, REG, err=0) + frame(1, UNREG, err=4) + frame(1, MADOP, err=-5)))
write("client-lib", "inbound-between-responses",
      b"\0" + bytes([SUB_REG, SUB_MAD]) + chunks(
          frame(1, REG) + frame(0, MADOP, sgid=G_LOCAL1, payload=mad("REP", 3, 4), grh=1, dgid=G_PEER)
          + frame(1, MADOP, err=1)))
write("client-lib", "wait-and-protocol-error",
      b"\0" + bytes([SUB_REG, SUB_REG, SUB_WAIT]) + chunks(frame(1, REG) + frame(1, UNREG)))
write("client-lib", "split-frame-eof",
      b"\0" + bytes([SUB_MAD]) + chunks(frame(1, MADOP)[:200]))
write("client-lib", "handshake-grant",
      b"\1" + frame(1, HELLO, payload=hello(), umad_len=32)
      + frame(0, MADOP, sgid=G_LOCAL1, payload=mad("REQ", 1, dest=G_LOCAL1), grh=1))
write("client-lib", "handshake-old-mux", b"\1" + frame(1, HELLO, err=1))
write("client-lib", "handshake-short", b"\1" + frame(1, HELLO, payload=hello(), umad_len=8))
# 1.2: collected with the _ex calls (byte 0 bit 2), requests through
# rdmacm_mux_submit() (step bit 3), and the handshake of an ASYNC handle
# (byte 0 bit 1).
EX = 0x08
write("client-lib", "ex-responses-user-data",
      b"\4" + bytes([SUB_REG | EX, SUB_UNREG, SUB_MAD | EX]) + chunks(
          frame(1, REG, err=0) + frame(1, UNREG, err=4)
          + frame(0, MADOP, sgid=G_LOCAL1, payload=mad("REP", 3, 4), grh=1, dgid=G_PEER)
          + frame(1, MADOP, err=-5)))
write("client-lib", "ex-wait",
      b"\4" + bytes([SUB_REG | EX, SUB_REG, SUB_WAIT | EX]) + chunks(frame(1, REG) + frame(1, UNREG)))
write("client-lib", "async-grant",
      b"\2" + frame(1, HELLO, payload=hello(), umad_len=32)
      + frame(0, MADOP, sgid=G_LOCAL1, payload=mad("REQ", 1, dest=G_LOCAL1), grh=1))
write("client-lib", "async-old-mux", b"\2" + frame(1, HELLO, err=1))
write("client-lib", "async-refused", b"\2" + frame(1, HELLO, err=-13))
write("client-lib", "async-short", b"\2" + frame(1, HELLO, payload=hello(), umad_len=8))


# ---- handoff: the golden state files, whole and broken ----
# Input (fuzz-handoff.c): u32 state memfd size, u32 sessions memfd size,
# then chunks: u8 which memfd, u32 offset, u16 length, the bytes. Each
# memfd goes in as its non-zero runs.
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "handoff-golden")
HDR, ENTRY = 256, 40


def runs(which, data):
    out, i, n = b"", 0, len(data)
    while i < n:
        if data[i] == 0:
            i += 1
            continue
        j = i
        while j < n and (data[j] != 0 or data[j:j + 8].strip(b"\0")) and j - i < 0xffff:
            j += 1
        out += struct.pack("<BIH", which, i, j - i) + data[i:j]
        i = j
    return out


def handoff(state, sessions, state_size=None, sessions_size=None):
    return (struct.pack("<II", state_size or len(state), sessions_size or len(sessions))
            + runs(0, state) + runs(1, sessions))


def golden(version):
    d = os.path.join(GOLDEN, version)
    sizes = {}
    with open(os.path.join(d, "manifest")) as f:
        for line in f:
            w = line.split()
            if len(w) == 3 and w[0] == "size":
                sizes[w[1]] = int(w[2])
    with open(os.path.join(d, "state"), "rb") as f:
        state = f.read()
    with open(os.path.join(d, "sessions"), "rb") as f:
        sessions = f.read()
    return state, sessions, sizes["state"], sizes["sessions"]


def entries(img):
    n = struct.unpack_from("<I", img, 20)[0]
    return [bytearray(img[HDR + i * ENTRY:HDR + (i + 1) * ENTRY]) for i in range(n)]


def with_entries(img, es):
    img = bytearray(img)
    struct.pack_into("<I", img, 20, len(es))
    for i, e in enumerate(es):
        img[HDR + i * ENTRY:HDR + (i + 1) * ENTRY] = e
    return bytes(img)


if os.path.isdir(GOLDEN):
    st, se, sts, ses = golden("0.1.0")
    write("handoff", "v010-whole", handoff(st, se, sts, ses))
    write("handoff", "v010-truncated", handoff(st[:4096], se[:4096], 4096, 4096))
    big = bytearray(st)
    struct.pack_into("<I", big, 16, 0x100000)          # n_slots: far past the memfd
    write("handoff", "v010-oversized-slots", handoff(bytes(big), se, sts, ses))
    big = bytearray(se)
    struct.pack_into("<I", big, 20, 0x7fffffff)        # used: past the capacity
    write("handoff", "v010-oversized-sessions", handoff(st, bytes(big), sts, ses))
    dup = bytearray(st)
    dup[4096 + 512 + 56:4096 + 512 + 112] = dup[4096 + 512:4096 + 512 + 56]   # slot 1 = slot 0
    write("handoff", "v010-duplicated-client", handoff(bytes(dup), se, sts, ses))

    st, se, sts, ses = golden("0.2.0")
    write("handoff", "v020-whole", handoff(st, se, sts, ses))

    st, se, sts, ses = golden("dev-2.0")
    write("handoff", "v2-whole", handoff(st, se, sts, ses))
    write("handoff", "v2-truncated", handoff(st[:5000], se[:4096], 5000, 4096))
    es = entries(st)
    write("handoff", "v2-reordered", handoff(with_entries(st, es[::-1]), se, sts, ses))
    write("handoff", "v2-duplicated-section", handoff(with_entries(st, es + [es[0]]), se, sts, ses))
    over = [bytearray(e) for e in es]
    struct.pack_into("<Q", over[0], 16, 1 << 40)        # a section longer than the memfd
    write("handoff", "v2-oversized-section", handoff(with_entries(st, over), se, sts, ses))
    minor = bytearray(st)
    struct.pack_into("<H", minor, 10, 9)                 # a newer minor
    write("handoff", "v2-newer-minor", handoff(bytes(minor), se, sts, ses))
    pair = bytearray(se)
    pair[24] ^= 0xff                                     # another state's sessions
    write("handoff", "v2-contradictory-pair", handoff(st, bytes(pair), sts, ses))
    torn = bytearray(se)
    torn[4096 + 92:4096 + 184] = torn[4096:4096 + 92]   # two sessions with one wire id
    write("handoff", "v2-contradictory-sessions", handoff(st, bytes(torn), sts, ses))
# ---- vms: byte 0 = 0 vms.d file, 1 control arguments, 2 state (its
# checksum made right by the harness), 3 state as it is ----
write("vms", "conf-good", b"\0# web-1\ngid = fe80::5054:ff:fe12:3456\ngid = ::ffff:10.0.1.5\n"
      b"prefix = 2001:db8:1::/64\nowner = libvirt-qemu\ngroup = kvm\nmode = 0600\n")
write("vms", "conf-bad-line", b"\0gid = fe80::1\nprefix = 2001:db8::1/64\n")
write("vms", "conf-overlap", b"\0prefix = ::ffff:10.0.0.0/112\n")
write("vms", "args-good", b"\1gid=fe80::7 gid=::ffff:10.0.3.3 prefix=2001:db9::/48 owner=64055 mode=0660")
write("vms", "args-set", b"\1group=104")
write("vms", "args-bad", b"\1gid=fe80::7 colour=blue")


def field(fid, data):
    return struct.pack("<HH", fid, len(data)) + data + bytes((4 - len(data) % 4) % 4)


def record(rtype, payload):
    return struct.pack("<HHI", rtype, 0, len(payload)) + payload + bytes((8 - len(payload) % 8) % 8)


def fnv(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def vm_state(records, major=1, minor=0, seq=1):
    return (b"RMUXVMST" + struct.pack("<HHIII", major, minor, 48, len(records), fnv(records))
            + struct.pack("<Q", seq) + b"0.1.0".ljust(16, b"\0") + records)


def counter(name, value):
    return field(8, struct.pack("<Q", value) + name)


web = (field(1, b"web-1") + field(2, v4(10, 0, 1, 5)) + field(3, bytes.fromhex("20010db8000100000000000000000000") + bytes([64]))
       + field(4, struct.pack("<I", 64055)) + field(6, struct.pack("<I", 0o600))
       + field(7, b"/etc/rdmacm-mux/vms.d/web-1.conf") + counter(b"cm_tx_msgs.req", 12)
       + counter(b"gid_refused.other-vm", 3))
db = field(1, b"db") + field(2, v4(10, 0, 1, 6)) + field(99, b"a newer field")
write("vms", "state-two-vms", b"\2" + vm_state(record(1, web) + record(1, db)
                                               + record(2, counter(b"cm_rx_msgs.rep", 4))))
write("vms", "state-newer-minor", b"\2" + vm_state(record(1, db) + record(42, b"future"), minor=3))
write("vms", "state-overlap", b"\2" + vm_state(record(1, web) + record(1, field(1, b"thief") + field(2, v4(10, 0, 1, 5)))))
write("vms", "state-bad-checksum", b"\3" + vm_state(record(1, db))[:20] + b"\0\0\0\0" + vm_state(record(1, db))[24:])

# ---- handoff: a 2.0 state with the VMs' section (type 5, two copies) ----
if os.path.isdir(GOLDEN):
    st, se, sts, ses = golden("dev-2.0")
    room = 512
    rec = 16 + room
    copies = bytearray(2 * rec)
    for i, (seq, img) in enumerate([(1, vm_state(record(1, db))),
                                    (2, vm_state(record(1, web) + record(1, db), seq=2))]):
        struct.pack_into("<QI", copies, i * rec, seq, len(img))
        copies[i * rec + 16:i * rec + 16 + len(img)] = img
    vms_entry = bytearray(ENTRY)
    struct.pack_into("<IIQQII", vms_entry, 0, 5, 0, sts, len(copies), rec, 2)
    img = bytearray(with_entries(st, entries(st) + [vms_entry]))
    img += bytes(sts - len(img)) + copies
    write("handoff", "v2-vms", handoff(bytes(img), se, len(img), ses))
