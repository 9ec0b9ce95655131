/* SPDX-License-Identifier: MIT */
/*
 * What the relay's own units share, and nothing else includes: the Relay
 * itself, the relay's per-client state (RelayClient, which embeds the
 * client's transport), and the calls between the units:
 *
 *   relay.c          life cycle, the client table and its epoll set,
 *                    request dispatch (REG, UNREG, HELLO, stats), responses
 *                    and GID ownership
 *   relay-sessions.c sessions as the relay sees them: creation within the
 *                    budgets, state changes, and the loop's one timer for
 *                    the table's earliest deadline
 *   relay-tx.c       client -> wire: checking, remapping and sending MADs
 *   relay-rx.c       wire -> client: receiving, routing and delivering MADs
 *   relay-events.c   event sinks and trace lines
 *   relay-config.c   the defaults (relay_config_init())
 *   relay-counters.c the counters' and reasons' names, the counter dump
 *   relay-status.c   what onlookers see: counts, counters, the senders'
 *                    numbers, walks of the clients and sessions
 *   relay-vms.c      the VMs' assignments: which VM a client is, the check
 *                    before each REG, per-VM counters
 *   relay-handoff.c  the relay's hand-off: its state kept current in the
 *                    memfds (daemon/handoff/, a storage library) and its
 *                    client sockets in the fd store, the take-over at
 *                    start, the answers owed, SIGTERM and re-execution
 *   relay-guard.c    the crash-loop guard (its own header, relay-guard.h)
 *   relay-driver.c   (tests and fuzzers only) the in-process driver, its
 *                    clock and senders, its reset, and the invariant checks
 *
 * What the relay holds but other folders own: the session table, its
 * indexes, wire ids and timer lists (daemon/sessions/), the senders that
 * write MADs away from the loop (daemon/send/, Relay.sender), the hand-off
 * state in its memfd (daemon/handoff/, Relay.handoff) and the VMs'
 * assignments (daemon/vm/, Relay.vms).
 */
#ifndef RDMACM_MUX_RELAY_INTERNAL_H
#define RDMACM_MUX_RELAY_INTERNAL_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "client.h"
#include "handoff-state.h"
#include "relay-guard.h"
#include "relay.h"
#include "umad-sender.h"
#include "util.h"

#define RELAY_UMAD_BATCH 256  /* inbound MADs per wake-up, for fairness */
#define RELAY_CLIENT_BATCH 64 /* client frames per wake-up, for fairness */
#define RELAY_CLIENT_CACHE_SLOTS 256 /* a power of two */
#define RELAY_CLIENT_EVENTS 64	      /* ready client sockets served per dispatch */
/* From this many sessions on, a batch warms its lookups first (see
 * session_table_warm_wire_ids()); below, the table sits in the cache. */
#define RELAY_WARM_SESSIONS 65536u

/* One GID a client registered, with its cached GID-table index. */
typedef struct RelayClientGid {
	uint8_t gid[GID_LEN];
	int gid_index; /* -1: not in the port's table (yet) */
	unsigned table_generation;
} RelayClientGid;

/* A consumer of RelayEvents (relay_add_event_sink()). */
typedef struct RelayEventSink {
	RelayEventFn fn;
	void *userdata;
} RelayEventSink;

/* A client as the relay sees it: its connection and its protocol state. */
struct RelayClient {
	Client conn;
	uint32_t id; /* unique among live clients; reuse is delayed 2^32 ids */
	VmEntry *vm;	 /* the VM whose socket it came in on, or NULL */
	VmCounters *vmc; /* its VM's counters, or those of clients without one */
	RelayClientGid *gids;
	uint32_t n_gids;
	SessionList sessions;
	uint64_t caps;
	bool hello_done;
	int handoff_slot; /* its slot in the hand-off state, or -1 */
	bool c1_logged;
	bool reading_paused;
	bool dirty; /* on the relay's list of clients to flush */
	unsigned bad_frames; /* consecutive */
	unsigned slow_sends; /* MADs with a sender process, their responses reserved */
	/* Requests read and not handled while reading is paused: the owed
	 * records of the first n_owed_buffered frames of the input buffer,
	 * from owed_buffered_head (relay_handoff_owe_buffered()). */
	int owed_buffered[CLIENT_INPUT_FRAMES];
	unsigned owed_buffered_head, n_owed_buffered;
	GList *unregistered; /* its link in Relay.unregistered until its first REG */
	struct rdmacm_mux_client_stats stats;
	/* The sessions the TX warm pass found for the frames buffered when it
	 * ran, in order; a hint each frame's handler checks before use. */
	uint32_t tx_hints[CLIENT_INPUT_FRAMES];
	unsigned n_tx_hints;
	unsigned next_tx_hint;
};

/* The keys relay_tx_mad() will look up, collected for one warming pass
 * (see session_table_warm_client_comm_ids()). */
typedef struct RelayTxWarmKeys {
	uint32_t client_ids[RELAY_CLIENT_EVENTS * CLIENT_INPUT_FRAMES];
	uint32_t comm_ids[RELAY_CLIENT_EVENTS * CLIENT_INPUT_FRAMES];
	uint32_t found[RELAY_CLIENT_EVENTS * CLIENT_INPUT_FRAMES];
	uint32_t *hint[RELAY_CLIENT_EVENTS * CLIENT_INPUT_FRAMES]; /* where found[i] goes */
	unsigned n;
} RelayTxWarmKeys;

struct Relay {
	sd_event *event;
	UmadPort *port;
	RelayConfig cfg;
	SessionTable *sessions;
	GHashTable *clients;	/* id -> RelayClient* (owned) */
	GHashTable *gid_owners; /* GID (owned key) -> RelayClient* */
	sd_event_source *umad_io;
	UmadSender *sender;
	/* Client sockets are in an epoll set of ours, itself one event source:
	 * one sd-event dispatch serves every client that is ready, instead of
	 * one dispatch (and one epoll_wait) per client and wake-up. */
	int client_ep;
	sd_event_source *clients_io;
	uint32_t *fd_events; /* events registered for each client fd */
	size_t n_fd_events;
	/* Client sockets in client_ep, and when there is one, whose: the
	 * set is then ready exactly when that socket is (relay.c). */
	uint32_t n_watched;
	uint32_t watched_one;
	/* RELAY_UMAD_BATCH received MADs, delivered together; made at the
	 * first receive. */
	UmadBuffer *rx_batch;
	size_t *rx_len;
	sd_event_source *timer;
	uint64_t timer_armed_at;
	GPtrArray *dirty; /* clients with frames to flush at the end of a batch */
	/* Clients that may read again with whole frames already buffered: no
	 * socket event will come for those, so a deferred source serves them. */
	GArray *resumed; /* client ids */
	sd_event_source *resume_src;
	GArray *sinks;	  /* RelayEventSink */
	UsecClock clock; /* RelayConfig's, or the loop's */
	uint64_t dispatch_now; /* the clock at the dispatch under way, 0 outside */
	/* id -> client for the per-MAD paths, in front of @clients: slot id % N,
	 * checked against the id, cleared when the client goes */
	RelayClient *client_cache[RELAY_CLIENT_CACHE_SLOTS];
	unsigned recv_errors_in_a_row;
	bool ended_loop; /* the relay ended the event loop, and said why */
	uint32_t next_client_id;
	/* The counters: in the hand-off state when there is one, so that a
	 * successor counts on (relay-handoff.c), else counters_own. */
	RelayCounters *counters;
	RelayCounters counters_own;
	GHashTable *clients_per_uid; /* uid -> connections */
	/* Connections that have not registered a GID yet, oldest first, and
	 * the timer that closes them after register_timeout_ms. */
	GQueue unregistered;
	sd_event_source *register_timer;
	/* Peer-started half-open sessions per (client, peer): RelayPeerKey ->
	 * count, for each peer's fair share of a client's budget. */
	GHashTable *half_open_peers;
	/* The GID-table entries the relay acts on are re-read once per epoch
	 * (gid-table.h): RELAY_GID_EPOCH_USEC of the loop's clock
	 * (relay_next_gid_epoch()). */
	uint64_t gid_epoch;
	/* 80 KiB, kept off the stack; made at the first warming pass (a
	 * table of RELAY_WARM_SESSIONS sessions), which most daemons never
	 * need. */
	RelayTxWarmKeys *tx_warm;
	HandoffState *handoff; /* NULL until relay_handoff_start() */
	int sessions_fd;       /* the memfd the sessions live in, or -1 */
	/* The crash-loop guard (relay-guard.h), from a take-over on. */
	RelayGuard *guard;
	/* VMs (relay-vms.c): the assignments, and the counters of clients
	 * without a VM when there are none. */
	RelayVms vms;
	VmCounters vm_none;
};

/* ---- relay-handoff.c: keeping the hand-off state current ---- */

/* A new connection (not one taken over): a slot, and its fd stored. */
void relay_handoff_client_added(Relay *r, RelayClient *c);
/* The client goes: out of the store, its slot freed. */
void relay_handoff_client_gone(Relay *r, RelayClient *c);
/* Its GIDs or its HELLO changed. */
void relay_handoff_client_gids(Relay *r, RelayClient *c);
void relay_handoff_client_hello(Relay *r, RelayClient *c);
/* Its "own GID in addr.gid" line was logged: not again after a restart. */
void relay_handoff_client_c1_logged(Relay *r, RelayClient *c);
/**
 * relay_handoff_owe() - before @req leaves the loop unanswered (a sender
 * has it, its response's place is kept), write down that @c is owed its
 * answer, @seq-th in @c's answer order: a successor after a crash gives it.
 * Return: the record, for relay_handoff_owed_answered(), or -1 (none kept).
 */
int relay_handoff_owe(Relay *r, RelayClient *c, uint64_t seq, const struct rdmacm_mux_msg *req);
/* The answer of record @owed (or -1) is queued: the record goes. */
void relay_handoff_owed_answered(Relay *r, int owed);
/**
 * relay_handoff_owe_buffered() - @c's reading paused with requests read and
 * not handled (they left the socket, no answer is queued): write down
 * that each is owed, after every answer already owed, so that a crash
 * before they are handled does not leave them unanswered.
 */
void relay_handoff_owe_buffered(Relay *r, RelayClient *c);
/* The first buffered frame of @c is being handled (or answered): its
 * record goes. */
void relay_handoff_buffered_taken(Relay *r, RelayClient *c);

/* ---- relay.c ---- */

/* The relay's notion of now (monotonic usec): one value per dispatch
 * (inline: every MAD asks). */
static inline uint64_t relay_now(const Relay *r)
{
	if (r->dispatch_now)
		return r->dispatch_now;
	return usec_clock_now(&r->clock);
}
/*
 * Start the GID epoch of a dispatch: the loop's clock in steps of
 * RELAY_GID_EPOCH_USEC. An entry is read again from sysfs at most once a
 * step, not at each of the tens of thousands of wake-ups a second under
 * load (three syscalls each); a GID that moves is seen within a step.
 * 10 ms: a VM's address takes far longer to move than that, and at 1 ms
 * a busy GID cost a thousand sysfs reads a second.
 */
#define RELAY_GID_EPOCH_USEC 10000
void relay_next_gid_epoch(Relay *r);
/* relay_client_lookup() past its cache: the table. */
RelayClient *relay_client_lookup_table(Relay *r, uint32_t id);
/* The live client with @id, or NULL (the cache inline: once per MAD). */
static inline RelayClient *relay_client_lookup(Relay *r, uint32_t id)
{
	RelayClient *c = r->client_cache[id & (RELAY_CLIENT_CACHE_SLOTS - 1)];

	return c && c->id == id ? c : relay_client_lookup_table(r, id);
}
/**
 * relay_client_create() - a new client for @fd (taken over; -1 for a
 * client without a socket), in the table and, with a socket, in the epoll
 * set. Logs what fails.
 * Return: the client, or NULL (the fd is closed).
 */
RelayClient *relay_client_create(Relay *r, int fd);
/* (Re)arm the timer that closes connections that never register a GID. */
void relay_arm_register_timer(Relay *r);
/* Remove a client, its GIDs and its sessions, and say why in the log. */
void relay_drop_client(Relay *r, RelayClient *c, const char *why);
/* The GID entry of @c for @gid, or NULL. */
RelayClientGid *relay_client_find_gid(RelayClient *c, const uint8_t gid[GID_LEN]);
/* Read and answer a batch of the frames @c sent (its socket was ready). */
void relay_serve_client(Relay *r, RelayClient *c);
/* Serve the clients that may read again with whole frames buffered (the
 * resume source's work; Relay.resumed). */
void relay_serve_resumed(Relay *r);
/* Remember that @c has frames to write at the end of the batch. */
void relay_mark_dirty(Relay *r, RelayClient *c);
/* Write what every marked client has queued. */
void relay_flush_dirty(Relay *r);
/* (Re)arm the loop's timer for the earliest session deadline. */
void relay_schedule_timer(Relay *r);
/* The session table's hooks and the session timer (relay-sessions.c). */
SessionList *relay_session_owner(void *userdata, uint32_t client_id);
void relay_session_removed(void *userdata, const Session *s);
int relay_on_session_timer(sd_event_source *s, uint64_t usec, void *userdata);
/* Count the peers' half-open shares again from the table (after a
 * take-over). */
void relay_recount_half_open_peers(Relay *r);
/* @c registered its first GID, or goes: it leaves the unregistered list. */
void relay_client_registered(Relay *r, RelayClient *c);
/* Relay.half_open_peers' key functions. */
guint relay_peer_key_hash(gconstpointer p);
gboolean relay_peer_key_equal(gconstpointer a, gconstpointer b);
/**
 * relay_handle_request() - answer one frame a client sent.
 * @tx_hint: the session the TX warm pass found for the frame, or 0
 * Return: false when the client was disconnected (too many bad frames).
 */
bool relay_handle_request(Relay *r, RelayClient *c, struct rdmacm_mux_msg *m, uint32_t tx_hint);
/* Create a session @c starts, within its own budget and the daemon's.
 * Return: the handle, or 0. */
uint32_t relay_session_new(Relay *r, RelayClient *c, SessionState state, uint64_t now);
/**
 * relay_session_check_remote() - whether a peer (@peer_gid, or @peer_lid
 * without a GRH) may start one more session with @c.
 * Return: RX_DROP_COUNT when it may, else the reason it may not.
 */
RxDrop relay_session_check_remote(Relay *r, const RelayClient *c, const uint8_t *peer_gid,
				  uint16_t peer_lid);
/* Create a session a peer starts (counted half-open until established);
 * relay_session_check_remote() said yes. Return: the handle, or 0. */
uint32_t relay_session_new_remote(Relay *r, RelayClient *c, SessionState state,
				  const uint8_t *peer_gid, uint16_t peer_lid, uint64_t now);
/* Run the session timers up to relay_now(). Return: sessions removed. */
unsigned relay_expire_sessions(Relay *r);
/* The state change message @attr makes to session @h, either direction;
 * @s is the table's session_table_get(@h) (the caller has it at hand:
 * this runs for every MAD). */
void relay_session_advance(Relay *r, uint32_t h, Session *s, uint16_t attr, bool rx,
			   uint64_t now);

/* Build the response to @req with @err in the dialect of the capabilities
 * @caps (the client's when it sent @req). */
void relay_response_frame(uint64_t caps, struct rdmacm_mux_msg *req, int err);
/* Turn @req into its response with @err and queue it for @c.
 * Return: 0, or -ENOMEM (logged). */
int relay_respond(Relay *r, RelayClient *c, struct rdmacm_mux_msg *req, int err);
/* Whether the relay reads @c's requests now (its responses and slow sends
 * are within their quotas). */
bool relay_client_may_read(const Relay *r, const RelayClient *c);

/* ---- relay-tx.c ---- */

/* relay_tx_mad(): the MAD went to a sender process; the response comes later. */
#define RELAY_TX_PENDING 1

/**
 * relay_tx_mad() - check, remap and send one MAD from @c.
 * @hint: a session the warm pass found for this frame, or 0
 * Return: 0, the negative errno for the client's response, or
 * RELAY_TX_PENDING when a sender process has it and the response's place is
 * kept (relay_tx_on_sent() fills it).
 */
int relay_tx_mad(Relay *r, RelayClient *c, const struct rdmacm_mux_msg *req, uint32_t hint);
/* The sender's report of a MAD a sender process wrote (UmadSendDoneFn). */
void relay_tx_on_sent(void *userdata, UmadSendJob *job);
/* Read every ready client's input and warm all their lookups at once. */
void relay_tx_warm_ready(Relay *r, const struct epoll_event *evs, int n);
/* Warm the lookups of the frames @c has buffered. */
void relay_tx_warm_client(Relay *r, RelayClient *c);

/* ---- relay-rx.c ---- */

/* sd-event handler of the umad fd: receive a batch and deliver it. */
int relay_rx_on_umad_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);
/* Route and deliver one received MAD (header as the kernel filled it). */
void relay_rx_deliver(Relay *r, UmadBuffer *buf, size_t len);

/* ---- relay-vms.c ---- */

/* The VM of a new connection on @fd: 0 with c->vm and c->vmc set, or a
 * negative errno (logged, counted) to refuse it. */
int relay_vm_attach(Relay *r, RelayClient *c);
/* @c goes: its VM's count of connections. */
void relay_vm_detach(Relay *r, RelayClient *c);
/**
 * relay_vm_check_reg() - whether @c may register @gid, by the VMs'
 * assignments (counted and logged when not).
 * Return: 0, -EACCES, or -EADDRNOTAVAIL (a GID the port does not have,
 * under --gid-policy=assigned).
 */
int relay_vm_check_reg(Relay *r, RelayClient *c, const uint8_t gid[GID_LEN]);
/*
 * Count a MAD of @c in its VM's ib_cm groups: @rx false for one it sent,
 * true for one delivered to it; @h its session (0: none), @tid_low the low
 * half of its TID as the client sent it (before any rewrite) or the wire
 * brought it. The same attribute with the same TID as the session's last
 * MAD that way (Session.last_tx, last_rx: in the record, which survives a
 * restart) is a retry (tx) or a duplicate (rx). The TID's high half is the
 * sending kernel's (its MAD agent's hi_tid): it changes with the agent,
 * not with the message. Every MAD comes here: a load and a store in the
 * session's record, which the MAD's path has touched already.
 */
static inline void relay_vm_count(Relay *r, RelayClient *c, uint32_t h, uint16_t attr,
				  uint32_t tid_low, bool rx)
{
	CmAttrIndex i = cm_attr_to_index(attr);
	uint32_t mark = (uint32_t)(i + 1) << 28 | (tid_low & 0x0fffffffu), *last;
	Session *s;

	c->vmc->cm[rx ? VM_CM_RX_MSGS : VM_CM_TX_MSGS][i]++;
	s = h ? session_table_get(r->sessions, h) : NULL;
	if (!s)
		return;
	last = rx ? &s->last_rx : &s->last_tx;
	if (*last == mark)
		c->vmc->cm[rx ? VM_CM_RX_DUPLICATES : VM_CM_TX_RETRIES][i]++;
	else
		*last = mark;
}

/* ---- relay-events.c ---- */

/* Hand @ev, about client @c (or NULL), to every sink. */
void relay_emit(Relay *r, RelayEvent *ev, const RelayClient *c);
/* A sink that prints one line per event to the FILE @userdata. */
void relay_text_trace_sink(void *userdata, const RelayEvent *ev);

#endif /* RDMACM_MUX_RELAY_INTERNAL_H */
