/* SPDX-License-Identifier: MIT */
/*
 * The bench's client driver: many client connections to a relay (the
 * daemon or the probe) served from one epoll loop in the main process.
 */
#ifndef RDMACM_MUX_BENCH_DRIVER_H
#define RDMACM_MUX_BENCH_DRIVER_H

#include "bench.h"

#define CONN_IN_FRAMES 64
#define CONN_OUT_FRAMES 16

typedef struct Conn {
	int fd;
	unsigned idx;
	uint8_t gid[16];
	int gid_index;	   /* the GID's index in simA's table */
	uint32_t n_sess;   /* sessions: comm ids id_base + 1 .. id_base + n_sess */
	uint32_t id_base;  /* from driver_comm_ids(): no other client has these */
	uint32_t *peer;	   /* each session's peer comm id, from its REP (n_sess) */
	uint32_t reps;	   /* REPs seen while sessions were set up */
	uint64_t rng;
	bool slow;	   /* never reads during a run */
	bool uncounted;	   /* its inbound MADs and failed requests are in no figure */
	bool unreachable;  /* sends REQs to GIDs no port has, one at a time */
	bool unreach_busy; /* such a REQ awaits its answer */
	uint64_t unreach_sent, unreach_answered;
	bool busy;	   /* QEMU pattern: a request is outstanding */
	uint32_t events;   /* epoll mask in force */
	uint64_t sent, resp_ok, resp_err, inbound;
	size_t out_len, out_off, in_len;
	/* handshake state */
	int hs_state;
	uint32_t hs_local, hs_remote, hs_peer_wire;
	uint8_t hs_peer_gid[16];
	struct rdmacm_mux_msg tmpl;
	uint8_t out[CONN_OUT_FRAMES * FRAME_SIZE];
	uint8_t in[CONN_IN_FRAMES * FRAME_SIZE];
} Conn;

typedef enum DriveMode {
	DRIVE_TX,	/* every client writes RTUs as fast as its socket takes them */
	DRIVE_TX_PACED, /* stamped RTUs at a fixed total rate, round robin */
	DRIVE_QEMU,	/* one RTU, wait for its response, the next one */
	DRIVE_RX,	/* only read: the wire process blasts */
	DRIVE_HANDSHAKE, /* REQ/REP/RTU/DREQ/DREP between pairs of clients */
} DriveMode;

typedef struct Snap {
	uint64_t t;
	uint64_t sink;	  /* Shared.sink_count */
	uint64_t inbound; /* inbound MADs read by clients neither slow nor uncounted */
	uint64_t resp_ok;
	uint64_t cycles;  /* handshakes completed */
} Snap;

typedef struct DriveSpec {
	DriveMode mode;
	double rate;	  /* DRIVE_TX_PACED: MADs/s over all clients */
	unsigned warm_ms, run_ms, runs;
	bool latency;	  /* collect latency during the measured runs */
} DriveSpec;

typedef struct DriveOut {
	Snap snaps[MAX_RUNS + 1];
	unsigned nsnap;
	uint64_t resp_err;
	uint64_t write_errors;
	Hist lat; /* RX latency (driver side) */
} DriveOut;

typedef struct Driver {
	Shared *sh;
	int ep;
	Conn **conns;
	unsigned n;
	unsigned n_a; /* DRIVE_HANDSHAKE: conns[0..n_a) on daemon A, the rest on B */
	unsigned n_active; /* conns[0..n_active) carry sessions and send; 0: all */
	uint8_t sink_gid[16];
	uint64_t cycles;
	uint64_t write_errors;
	Hist *lat;
	bool lat_on;
	bool running; /* inside driver_run(): answers may start new requests */
} Driver;

/* Connect @n clients to @sock_path; @reg: REG GID ::ffff:10.1.(i/250).(i%250+1). */
int driver_connect(Driver *d, const char *sock_path, unsigned first, unsigned n, bool reg,
		   const uint8_t (*gids)[16], const int *gid_index);
void driver_close_all(Driver *d);
/*
 * Comm ids and TIDs: every message a client sends carries a TID no other
 * message of the run has, and every client has comm ids no other client
 * has, so that a mux that relays them as they are (QEMU's own, which routes
 * inbound MADs by comm id) gets correct traffic, not only one that remaps.
 * @n consecutive ids, never 0.
 */
uint32_t driver_comm_ids(uint32_t n);
uint64_t driver_next_tid(void);
/* Spread @total sessions evenly over the sending clients and give each
 * client its own comm ids for them (no MAD is sent). */
void driver_plan_sessions(Driver *d, uint32_t total);
/* Plan @total sessions and create them on the relay (REQs to the sink,
 * then one RTU each). */
int driver_setup_sessions(Driver *d, uint32_t total, uint64_t *errors);
/* Read until no unreachable sender awaits an answer, or @timeout_ms.
 * Return: 0, or -ETIMEDOUT. */
int driver_wait_answers(Driver *d, unsigned timeout_ms);
/* Run one load pattern; snapshots at warm-up end and after each run. */
int driver_run(Driver *d, const DriveSpec *spec, DriveOut *out);
/*
 * Move exactly @count MADs (DRIVE_TX: written by the clients, counted at the
 * sink; DRIVE_QEMU: request/response pairs; DRIVE_RX: sent by the blaster,
 * which the caller starts with Shared.blast_limit = @count) and wait until
 * they arrived or nothing moved for @quiet_ms. Return: the MADs that arrived.
 */
uint64_t driver_run_count(Driver *d, DriveMode mode, uint64_t count, unsigned quiet_ms);

#endif
