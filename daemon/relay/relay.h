/* SPDX-License-Identifier: MIT */
/*
 * The relay: the glue between the umad port, the clients and the sessions.
 *
 * It answers client requests (REG, UNREG, MAD, and the extension ops),
 * validates and rewrites outbound MADs (relay-tx.c), routes inbound MADs
 * to the right client (relay-rx.c), holds the session table
 * (daemon/sessions/) and runs its timers, and counts everything.
 * Everything runs on the caller's sd-event loop; a MAD whose write may
 * wait (RoCE address resolution, up to 1 s in the kernel) goes to the
 * senders (daemon/send/, umad-sender.h) and is answered when they are
 * done. What the relay builds on is chosen by its configuration: the
 * port's operations (umad-port.h), the senders' workers and the clock.
 */
#ifndef RDMACM_MUX_RELAY_H
#define RDMACM_MUX_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "cm-codec.h"
#include "relay-counters.h"
#include "session-table.h"
#include "umad-port.h"
#include "umad-sender.h"
#include "util.h"
#include "vm-table.h"

/*
 * What a relay is made with. relay_config_init() gives every field its
 * default: the one place the daemon's defaults are written (its options
 * start from them, rdmacm-mux --help shows them). A field is used as it
 * is: 0 is a value, meaning what its comment says where it means
 * anything.
 */
typedef struct RelayConfig {
	uint32_t max_clients;
	uint32_t max_clients_per_uid; /* connections of one uid (0: half of max_clients) */
	uint32_t register_timeout_ms; /* a connection with no GID by then is closed (0: never) */
	uint32_t max_gids;     /* per client */
	uint32_t max_sessions; /* per client: sessions it starts or has established */
	uint32_t max_half_open;	 /* per client: peer-started sessions not yet established */
	uint32_t max_half_open_per_peer; /* per client and peer GID (or LID) */
	uint32_t max_total_half_open;	 /* daemon-wide */
	uint32_t max_total_sessions;	 /* daemon-wide: bounds the table's memory */
	uint32_t max_slow_sends; /* per client: MADs waiting for a sender */
	uint32_t senders;	 /* senders (workers) wanted */
	uint32_t send_fast_ms;	 /* a destination that took a write stays fast this long */
	uint32_t send_fail_ms;	 /* one that did not answer fails at once this long */
	uint32_t send_timeout_ms; /* a sender's write that takes longer is stopped */
	uint32_t max_send_queue;  /* MADs queued for the senders or being written, in all */
	/* The senders' workers (sender-pool.h's in the daemon), required. */
	const UmadSendWorkersOps *send_workers;
	void *send_workers_arg;
	/* The relay's clock (.now NULL: the event loop's). */
	UsecClock clock;
	uint32_t max_queued;   /* per client: inbound MAD frames waiting */
	uint32_t max_pending;  /* per client: responses waiting before input pauses */
	uint32_t max_bad_frames; /* consecutive bad frames before disconnect */
	uint32_t timeouts_ms[SESSION_TIMER_COUNT];
	bool require_port_gid; /* REG only of GIDs the port has */
	FILE *trace;	       /* a line per relayed or dropped MAD, or NULL */
} RelayConfig;

typedef struct Relay Relay;

/* One MAD that crossed the daemon, or was refused or dropped. */
typedef struct RelayEvent {
	const char *dev;
	int port;
	uint64_t realtime_usec;
	bool rx;	      /* from the wire towards a client */
	const char *drop;     /* why it was refused or dropped; NULL if relayed */
	uint32_t client_id;   /* 0 when no client is involved */
	int client_pid;
	uint16_t attr;
	uint32_t client_comm_id; /* the client's comm id (SIDR: request id), 0 if none */
	uint32_t wire_id;	 /* the daemon's id for it on the wire, 0 if none */
	uint64_t tid;		 /* as on the wire */
	const uint8_t *local_gid;  /* our client's GID, or NULL */
	const uint8_t *remote_gid; /* the other end's GID, or NULL */
	const struct rdmacm_mux_umad_hdr *hdr; /* the umad header, as sent or received */
	const uint8_t *mad;	/* the MAD as on the wire, mad_len bytes */
	size_t mad_len;
} RelayEvent;

typedef void (*RelayEventFn)(void *userdata, const RelayEvent *ev);

/* Sinks see every event (trace, pcap, admin tool). */
void relay_add_event_sink(Relay *r, RelayEventFn fn, void *userdata);
void relay_remove_event_sink(Relay *r, RelayEventFn fn, void *userdata);
/* One human-readable line for @ev, without a newline. */
void relay_format_event(const RelayEvent *ev, char *buf, size_t len);

/* Fill @cfg with every default (send_workers, clock and trace unset). */
void relay_config_init(RelayConfig *cfg);

/**
 * relay_new() - start relaying on @port (taken over) within @event.
 * Return: 0 or a negative errno (-EINVAL without cfg->send_workers).
 */
int relay_new(sd_event *event, UmadPort *port, const RelayConfig *cfg, Relay **ret);
void relay_free(Relay *r);

/**
 * relay_add_client() - serve a newly accepted connection (fd taken over).
 * Return: 0; -EUSERS when the client limit is reached (fd closed).
 */
int relay_add_client(Relay *r, int fd);

uint32_t relay_client_count(const Relay *r);
uint32_t relay_gid_count(const Relay *r);
uint32_t relay_session_count(const Relay *r);
const RelayCounters *relay_counters(const Relay *r);
size_t relay_session_memory(const Relay *r);
/* MADs with the senders, not written yet. */
uint32_t relay_sender_queued(const Relay *r);
/* MADs the senders wrote since this process started. */
uint64_t relay_sender_written(const Relay *r);
/* The senders' numbers: live and wanted, timeouts, failed starts. */
void relay_sender_stats(const Relay *r, UmadSenderStats *ret);

typedef struct RelayClient RelayClient;
typedef struct Session Session;

/* What the control socket may know of a client: a read-only snapshot. */
typedef struct RelayClientInfo {
	uint32_t id;
	const VmEntry *vm; /* the VM whose socket it came in on, or NULL */
	struct ucred cred;
	const char *comm;
	uint64_t connected_usec; /* monotonic */
	const uint8_t *gids; /* n_gids GIDs, GID_LEN bytes each */
	uint32_t n_gids;
	uint32_t queued;   /* frames waiting to be written to it */
	uint32_t sessions; /* live sessions */
	uint64_t caps;	   /* extension capabilities granted */
	bool hello_done;   /* it used the extension handshake */
	struct rdmacm_mux_client_stats stats;
} RelayClientInfo;

/* Walk the clients and the sessions, for status output. The info and the
 * session are valid only during the call. */
void relay_foreach_client(const Relay *r, void (*fn)(void *userdata, const RelayClientInfo *c),
			  void *userdata);
void relay_foreach_session(const Relay *r, void (*fn)(void *userdata, const Session *s),
			   void *userdata);
const UmadPort *relay_port(const Relay *r);

/**
 * relay_stop_sends() - stop the senders: the writes in flight get
 * @wait_ms to finish, those still unfinished then answer -ETIMEDOUT, and
 * the MADs still queued -EAGAIN (counted, and the responses queued). A
 * later MAD whose write might wait answers -EAGAIN. For a stop or a
 * hand-off, before the last counters and the clients' last flush.
 * Idempotent.
 */
void relay_stop_sends(Relay *r, unsigned wait_ms);
/**
 * relay_resume_sends() - new senders after relay_stop_sends(), for a
 * hand-off that did not happen after all (a re-execution that failed).
 * The daemon's: the relay driver's stand-ins cannot start again.
 * Return: 0, or a negative errno (not logged: the caller says what it
 * means; the stopped senders stay, and MADs that need one answer EAGAIN).
 */
int relay_resume_sends(Relay *r);

/* Whether the relay ended the event loop itself (the port went away:
 * -ENODEV, or kept failing: -EIO), having logged why. */
bool relay_ended_loop(const Relay *r);

/* Print every counter, one per line, to @f. */
void relay_dump_counters(const Relay *r, FILE *f);

/* ---- VMs (relay-vms.c) ---- */

/**
 * Which VM a connection belongs to, from the socket it came in on. Return:
 * 0 with *@ret set (NULL: the shared socket), or a negative errno to refuse
 * it (the socket of a VM that is gone).
 */
typedef int (*RelayVmOfFn)(void *userdata, int fd, VmEntry **ret);

typedef struct RelayVms {
	VmTable *table;	     /* not owned; outlives the relay */
	VmGidPolicy policy;  /* for the shared socket */
	uint32_t max_clients; /* connections per VM */
	uint32_t state_room;  /* bytes the VMs' state may take in the hand-off state */
	/* The owner and group of a VM's socket whose assignment names none
	 * (the daemon's): vm_spec_admits() for VMs whose socket changed. */
	uint32_t own_uid, own_gid;
	RelayVmOfFn vm_of;
	void *userdata;
} RelayVms;

/**
 * relay_set_vms() - check every registration against @vms's assignments
 * from now on, and count per VM. Call before any client is added (also
 * before relay_handoff_start()). Without it, any client may register any
 * GID nobody holds, as before.
 */
void relay_set_vms(Relay *r, const RelayVms *vms);
/**
 * relay_vms_changed() - the assignments changed (a VM added, set or
 * removed): the clients of a VM whose socket's owner, group or mode
 * changed (VmEntry.recheck_peers) are disconnected unless the socket
 * would let them in now; every other client keeps only the GIDs it may
 * hold now, and the sessions of the GIDs it loses go with them (logged
 * per GID).
 * Return: the GIDs taken back (those of disconnected clients too).
 */
unsigned relay_vms_changed(Relay *r);
/**
 * relay_drop_vm_clients() - disconnect every client of @vm (it is being
 * removed), freeing their GIDs and sessions.
 * Return: how many.
 */
unsigned relay_drop_vm_clients(Relay *r, const VmEntry *vm);

#endif /* RDMACM_MUX_RELAY_H */
