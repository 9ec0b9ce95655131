/* SPDX-License-Identifier: MIT */
/*
 * rdmacm-mux-bench: what its parts share. The bench is one binary that
 * forks its helpers: the wire process (umad sink and blaster on simB), the
 * limit probe (a minimal relay on simA) and the client driver (in the main
 * process). They talk through one shared anonymous mapping (Shared) and an
 * eventfd that wakes the helpers when the main process changes their mode.
 */
#ifndef RDMACM_MUX_BENCH_H
#define RDMACM_MUX_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cm-mad.h"
#include "rdmacm-mux-bytes.h"
#include "rdmacm-mux-proto.h"

#define FRAME_SIZE sizeof(struct rdmacm_mux_msg)
#define MAX_WIRE_IDS (1u << 21)
#define MAX_RUNS 16
#define BENCH_SEED 0x5eedbe4cull

#define MAD_OFF_STAMP 32 /* RTU private data: the sender's CLOCK_MONOTONIC ns */
#define QP1_QKEY 0x80010000u

/* ---- latency histogram: log-linear, 32 sub-buckets per power of two (~3%) ---- */
#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS (64u * HIST_SUB)

typedef struct Hist {
	uint64_t n;
	uint64_t b[HIST_BUCKETS];
} Hist;

void hist_reset(Hist *h);
void hist_add(Hist *h, uint64_t ns);
/* The value (ns) at quantile @q in [0,1]; 0 for an empty histogram. */
uint64_t hist_quantile(const Hist *h, double q);

/* ---- shared between the main process and its helpers ---- */
enum WireMode { WIRE_SINK = 0, WIRE_BLAST = 1, WIRE_EXIT = 2 };

typedef struct Shared {
	uint32_t wire_mode;    /* enum WireMode */
	uint32_t wire_ready;   /* the wire process registered on simB */
	uint32_t record_ids;   /* sink: keep each REQ's LocalCommID in ids[] */
	uint32_t answer_reqs;  /* sink: answer each REQ with a REP, as a peer's CM */
	uint32_t lat_on;       /* sink: collect RTU stamps into sink_lat */
	uint64_t sink_count;   /* MADs the sink took off the wire */
	uint64_t blast_sent;   /* MADs the blaster sent */
	double blast_rate;     /* MADs/s; 0: as fast as umad_send goes */
	uint8_t blast_dgid[16];
	uint32_t blast_ids;    /* blast to ids[0 .. blast_ids) */
	uint32_t probe_ready;
	uint32_t probe_route_n; /* probe: inbound MAD to client RemoteCommID mod this */
	uint64_t blast_limit;	/* blaster: stop after this many (0: no limit) */
	uint64_t probe_rx_dropped;
	Hist sink_lat;
	uint32_t n_ids;
	uint32_t ids[MAX_WIRE_IDS];
	/* The IPv4 address in each REQ's source GID (::ffff:a.b.c.d): where
	 * the blaster sends that session's MADs (they must arrive on the GID
	 * the session belongs to). */
	uint32_t id_src[MAX_WIRE_IDS];
} Shared;

/* The peer's LocalCommID of the session with wire id @w: the REPs and the
 * blaster's MADs carry it, and the clients' MADs name it (as a peer CM
 * would have chosen it, unique per session). */
#define BENCH_PEER_ID(w) ((w) ^ 0x5a5a5a5au)

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: cheap, seeded, the same sequence every run */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* The wire process (simB): sink and blaster. Never returns. */
void wire_main(Shared *sh, int ctl_fd) __attribute__((noreturn));
/* The limit probe: a minimal relay on simA serving @sock_path. Never returns.
 * @ctl_fd may be -1 (the probe ignores it). */
void probe_main(Shared *sh, int ctl_fd, const char *sock_path) __attribute__((noreturn));

/* A client GID at this index or past it cannot send: umad names it in 8 bits. */
#define UMAD_GID_INDEXES 256

#endif
