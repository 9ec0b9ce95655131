/* SPDX-License-Identifier: MIT */
/*
 * Fault soak: what the orchestrator (soak.c), the client worker processes
 * (soak-worker.c) and the daemon/proc helpers (soak-daemon.c) share.
 *
 * Workers are forked children that each drive a few dozen librdmacm-mux
 * handles ("slots"). Everything a worker must not lose when the
 * orchestrator SIGKILLs it lives in one MAP_SHARED page set (SoakShared):
 * its counters, the incarnation number of every slot and the misroute log.
 */
#ifndef RDMACM_MUX_SOAK_H
#define RDMACM_MUX_SOAK_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SOAK_MAX_WORKERS 256
/* A slot's comm ids are (slot << 20 | incarnation << 16 | seq): 12 bits of
 * slot make every client's ids distinguishable from every other's. */
#define SOAK_MAX_SLOTS 4096
#define SOAK_MISROUTE_LOG 32
#define SOAK_MISROUTE_LINE 320

enum soak_phase {
	SOAK_PHASE_RUN,	    /* handshakes in a loop, churn */
	SOAK_PHASE_QUIESCE, /* no new exchanges; close what is open; stay connected */
	SOAK_PHASE_STATS,   /* query every open handle's stats once, then idle */
};

typedef struct SoakWorkerStats {
	/* requests */
	uint64_t sent;	      /* MADs the daemon accepted */
	uint64_t send_eio;    /* refused with -EIO: the fabric's injected send errors */
	uint64_t send_enoent; /* refused: no session (it expired or the peer is gone) */
	uint64_t send_other;  /* any other refusal: a failure */
	int32_t send_other_last;
	uint64_t retransmits;
	/* inbound */
	uint64_t received;
	uint64_t lib_dropped; /* inbound MADs the library had to drop */
	uint64_t misroutes;
	/* exchanges */
	uint64_t conn_started, conn_done, conn_rejected, conn_gave_up;
	uint64_t sidr_started, sidr_done, sidr_gave_up;
	uint64_t passive_rep, passive_rej, passive_est, sidr_answered;
	/* churn */
	uint64_t opens, closes, open_retries, broken;
	/* SOAK_PHASE_STATS answers, valid once stats_done is set */
	uint32_t stats_done;
	uint32_t stats_clients, stats_sessions, stats_queued, stats_failed;
	/* holder workers: connections established on both ends */
	uint32_t holder_established;
	uint32_t fatal; /* the worker gave up (it also exits with status 1) */
} SoakWorkerStats;

typedef struct SoakShared {
	volatile int phase;
	uint32_t gen[SOAK_MAX_SLOTS];
	SoakWorkerStats w[SOAK_MAX_WORKERS];
	uint32_t n_misroute_log;
	char misroute_log[SOAK_MISROUTE_LOG][SOAK_MISROUTE_LINE];
} SoakShared;

typedef struct SoakWorkerConfig {
	unsigned index;	      /* into SoakShared.w */
	unsigned first_slot;  /* this worker's slots: first_slot .. + nslots */
	unsigned nslots;
	unsigned peer_slots;  /* run mode: peers are drawn from 0 .. peer_slots */
	bool holder;	      /* pairs (even slot -> odd slot): connect once, hold */
	const char *socket[2]; /* the daemons of host 0 (simA) and host 1 (simB) */
	uint64_t seed;
	int rto_ms;	      /* retransmission timeout, as a CM's */
	int max_tries;
	int think_ms;	      /* mean pause between a client's exchanges */
	int lifetime_ms;      /* mean lifetime of a client connection (churn) */
} SoakWorkerConfig;

/* Slots alternate hosts: even on simA, odd on simB. */
static inline unsigned soak_slot_host(unsigned slot)
{
	return slot & 1;
}

/* ::ffff:10.(1 + host).(slot >> 8).(slot & 255) */
void soak_slot_gid(unsigned slot, uint8_t gid[16]);

/* Runs a worker until it is killed. */
G_NORETURN void soak_worker_main(const SoakWorkerConfig *cfg, SoakShared *sh);

/* ---- soak-daemon.c ---- */

typedef struct SoakDaemon {
	char *ca;
	char *socket;
	char *log;
	char **argv;
	char **envp;
	GPid pid;
	int exit_status; /* after soak_daemon_stop() */
} SoakDaemon;

/* Start rdmacm-mux on @ca port 1 of the fabric in @fabric_dir, socket under
 * @dir, output to @dir/daemon-CA.log, with @extra options (no --trace). */
SoakDaemon *soak_daemon_start(const char *dir, const char *fabric_dir, const char *ca,
			      const char *const *extra);
/* Is it still running? Sets exit_status if it exited. */
bool soak_daemon_alive(SoakDaemon *d);
/* SIGUSR1, then the counter dump it printed (NULL when none came). */
char *soak_daemon_dump(SoakDaemon *d, int timeout_ms);
/* SIGTERM and wait; returns the exit status or 128 + signal. */
int soak_daemon_stop(SoakDaemon *d);
void soak_daemon_free(SoakDaemon *d);
char *soak_daemon_output(const SoakDaemon *d);
/* The last counter dump in @output, or NULL. */
const char *soak_last_dump(const char *output);
/* "label N" inside one dump; -1 when absent. */
int64_t soak_dump_value(const char *dump, const char *label);

/* /proc: VmRSS in kB; -1 when the process is gone. */
long soak_proc_rss_kb(pid_t pid);
/* The open fds of @pid by kind: sockets (listening socket, client
 * connections, journal), files under @fabric_dir (the simulated fabric's
 * FIFOs: the sim opens a peer port's FIFO on the first MAD to it and keeps
 * it) and everything else. -1 when the process is gone. */
typedef struct SoakFds {
	int total, sockets, fabric, other;
} SoakFds;
int soak_proc_fds(pid_t pid, const char *fabric_dir, SoakFds *out);

/* Replays the fabric's fault generator for @sends sends of @port_salt
 * ("simA/1") under @spec and counts each decision. */
typedef struct SoakFaultTally {
	uint64_t sends, failed, dropped, duplicated, reordered, delayed;
	uint64_t arrivals; /* MADs the receivers got: dropped 0, duplicated 2 */
} SoakFaultTally;
int soak_fault_replay(const char *spec, const char *port_salt, uint64_t sends,
		      SoakFaultTally *out);

#endif
