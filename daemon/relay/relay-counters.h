/* SPDX-License-Identifier: MIT */
/*
 * Every counter the relay keeps, defined once, here. RelayCounters is made
 * from these lists, and so is everything that shows or keeps a counter:
 * the hand-off (each word under its stable name, relay_counter_names()),
 * the metrics page (control/metrics.c), "rdmacm-muxctl counters"
 * (control/control-answers.c), the counter dump at SIGUSR1 and at exit,
 * and the reasons in trace lines (relay-counters.c). A unit test
 * (relay/test-relay-counters.c) checks the lists themselves.
 *
 * Adding a counter: one X() line in RELAY_COUNTERS below, and its
 * increment where it happens. Adding a reason: one X() line in
 * RELAY_RX_DROPS or RELAY_TX_REJECTS, with a wire number never used
 * before. Never rename a counter or a reason, and never reuse or renumber
 * a wire number: a successor takes the counters over by name (the
 * hand-off's COUNTERS section), and scrapers know the metrics by name.
 */
#ifndef RDMACM_MUX_RELAY_COUNTERS_H
#define RDMACM_MUX_RELAY_COUNTERS_H

#include <stdint.h>

#include "cm-codec.h"

/*
 * Why an inbound MAD was not delivered: X(ID, wire number, name), one
 * RxDrop value RX_DROP_<ID> each, in this order. The name is the
 * counter's "rx_drop.<name>", the metric's reason label, and the reason a
 * trace line gives.
 */
#define RELAY_RX_DROPS(X)                                                                     \
	X(STATUS, 1, "status-packet")	    /* header-only status packet (send timeout) */    \
	X(NOT_CM, 2, "not-cm")		    /* wrong class, version or method */              \
	X(UNSUPPORTED, 3, "unsupported-attr") /* ClassPortInfo, SAP, SPR, ... */              \
	X(MALFORMED, 4, "malformed")	    /* too short for its attribute */                 \
	X(NO_OWNER, 5, "no-gid-owner")	    /* REQ/SIDR_REQ for a GID no client has */        \
	X(NO_SESSION, 6, "no-session")	    /* a comm id or request id we do not know */      \
	X(QUEUE_FULL, 7, "queue-full")	    /* the client's inbound queue is full */          \
	X(SESSION_QUOTA, 8, "session-quota") /* a new REQ when the daemon holds all it may */ \
	X(SPOOFED, 9, "spoofed")	    /* not from the session's peer, ids or local GID */ \
	X(BAD_STATE, 10, "bad-state")	    /* cannot arrive in the session's state */        \
	X(HALF_OPEN_QUOTA, 11, "half-open-quota") /* past the client's (or daemon's) budget */ \
	X(PEER_QUOTA, 12, "peer-quota")	    /* past one peer's share of that budget */        \
	RELAY_RX_DROPS_FUTURE(X)

/*
 * Why an outbound MAD was refused: X(ID, wire number, name), one TxReject
 * value TX_REJECT_<ID> each; the name as for RELAY_RX_DROPS, counted as
 * "tx_reject.<name>".
 */
#define RELAY_TX_REJECTS(X)                                                                   \
	X(BAD_LENGTH, 1, "bad-length")	       /* umad_len outside 24..256 */                  \
	X(NOT_CM, 2, "not-cm")		       /* not a CM Send MAD */                         \
	X(UNSUPPORTED, 3, "unsupported-attr")  /* an attribute we do not relay */              \
	X(MALFORMED, 4, "malformed")	       /* too short for its attribute */               \
	X(FOREIGN_SGID, 5, "foreign-sgid")     /* sgid not registered by this client */        \
	X(NO_SESSION, 6, "no-session")	       /* comm id unknown in this client's space */    \
	X(HIJACK, 7, "hijack")		       /* answers a session of another client */       \
	X(SPOOFED, 8, "spoofed")	       /* names a peer, comm id or GID not its session's */ \
	X(SESSION_QUOTA, 9, "session-quota")   /* the client is at its session quota */        \
	X(NO_DESTINATION, 10, "no-destination") /* no destination GID could be found */        \
	X(NO_PORT_GID, 11, "no-port-gid")      /* sgid is not in the port's GID table */       \
	X(SEND_FAILED, 12, "send-failed")      /* the kernel refused the send */               \
	X(SEND_BUSY, 13, "send-busy")	       /* the senders' queue is full */

/*
 * The counters that are neither per attribute nor per reason:
 * X(field, metric, label, label value, help), one uint64_t each.
 *  - field: its name in RelayCounters, in the hand-off and in
 *    "rdmacm-muxctl counters"; in the counter dump with ' ' for '_';
 *  - metric: its family on the metrics page, a sample with the label
 *    label="label value" (label NULL: the family's one sample). The
 *    samples of one family are adjacent lines here; the first one's help
 *    is the family's, the others' NULL.
 */
#define RELAY_COUNTERS(X)                                                                     \
	X(requests, "rdmacm_mux_requests_total", NULL, NULL,                                  \
	  "Frames the clients sent, good or bad.")                                             \
	X(reg_ok, "rdmacm_mux_gid_registrations_total", "result", "ok",                       \
	  "GID registrations (REG) by the clients, by result.")                                \
	X(reg_refused, "rdmacm_mux_gid_registrations_total", "result", "refused", NULL)       \
	X(unreg_ok, "rdmacm_mux_gid_unregistrations_total", "result", "ok",                   \
	  "GID unregistrations (UNREG) by the clients, by result.")                            \
	X(unreg_refused, "rdmacm_mux_gid_unregistrations_total", "result", "refused", NULL)   \
	X(bad_frames, "rdmacm_mux_bad_frames_total", NULL, NULL,                              \
	  "Frames of a type or operation the daemon does not know.")                           \
	X(truncated_frames, "rdmacm_mux_truncated_frames_total", NULL, NULL,                  \
	  "Clients that went away in the middle of a frame.")                                  \
	X(clients_accepted, "rdmacm_mux_client_connections_total", "result", "accepted",      \
	  "Connections to the main socket, by result (refused: over --max-clients or "         \
	  "--max-clients-per-uid).")                                                           \
	X(clients_refused, "rdmacm_mux_client_connections_total", "result", "refused", NULL)  \
	X(clients_dropped, "rdmacm_mux_clients_dropped_total", NULL, NULL,                    \
	  "Clients the daemon disconnected: write errors, too many bad frames, no GID "        \
	  "registered in time.")                                                               \
	X(sessions_created, "rdmacm_mux_sessions_created_total", NULL, NULL,                  \
	  "CM sessions and SIDR queries created.")                                             \
	X(sessions_expired, "rdmacm_mux_sessions_expired_total", NULL, NULL,                  \
	  "CM sessions and SIDR queries removed by their timer.")                              \
	X(recv_errors, "rdmacm_mux_umad_recv_errors_total", NULL, NULL,                       \
	  "Reads of the umad device that failed.")                                             \
	X(handoff_guard_trips, "rdmacm_mux_handoff_guard_trips_total", NULL, NULL,            \
	  "Starts that dropped the sessions they took over, after crashes in a row while "     \
	  "taking state over (the crash-loop guard).")                                         \
	X(handoff_items_dropped, "rdmacm_mux_handoff_items_dropped_total", NULL, NULL,        \
	  "Clients, sessions and owed answers a start could not take over from its "           \
	  "predecessor (each logged).")                                                        \
	X(handoff_owed_answered, "rdmacm_mux_handoff_owed_answered_total", NULL, NULL,        \
	  "Requests a crashed predecessor left unanswered, answered by this process.")         \
	RELAY_COUNTERS_FUTURE(X)

/* The test-only "future" build (meson option handoff_future) has one
 * reason and one counter more, which its hand-off carries to this build
 * and back (tests/integration/test-upgrade.c). */
#ifdef RDMACM_MUX_HANDOFF_FUTURE
#define RELAY_RX_DROPS_FUTURE(X) X(FUTURE, 13, "future-test")
#define RELAY_COUNTERS_FUTURE(X)                                                              \
	X(future_counter, "rdmacm_mux_future_test_total", NULL, NULL,                         \
	  "The test-only future build's added counter.")
#else
#define RELAY_RX_DROPS_FUTURE(X)
#define RELAY_COUNTERS_FUTURE(X)
#endif

#define RELAY_REASON_ENUM_RX(id, wire, name) RX_DROP_##id,
#define RELAY_REASON_ENUM_TX(id, wire, name) TX_REJECT_##id,
#define RELAY_COUNTER_FIELD(field, metric, label, value, help) uint64_t field;

/* Why an inbound MAD was not delivered (RELAY_RX_DROPS). */
typedef enum RxDrop { RELAY_RX_DROPS(RELAY_REASON_ENUM_RX) RX_DROP_COUNT } RxDrop;

/* Why an outbound MAD was refused (RELAY_TX_REJECTS). */
typedef enum TxReject { RELAY_TX_REJECTS(RELAY_REASON_ENUM_TX) TX_REJECT_COUNT } TxReject;

/* Every counter, each a u64 word: per CM attribute each way, per reason,
 * then RELAY_COUNTERS in their order (the hand-off's order too). */
typedef struct RelayCounters {
	uint64_t tx[CM_IDX_COUNT];
	uint64_t rx[CM_IDX_COUNT];
	uint64_t rx_drop[RX_DROP_COUNT];
	uint64_t tx_reject[TX_REJECT_COUNT];
	RELAY_COUNTERS(RELAY_COUNTER_FIELD)
} RelayCounters;

/* RelayCounters' words. */
#define RELAY_COUNTER_WORDS (sizeof(RelayCounters) / sizeof(uint64_t))

/* The name of reason @d, for counters, metrics and trace lines ("?" out
 * of range). */
const char *relay_rx_drop_name(RxDrop d);
const char *relay_tx_reject_name(TxReject d);

/**
 * relay_counter_names() - the stable name of each RelayCounters word, in
 * order: "tx.REQ", "rx.REQ", "rx_drop.spoofed", "tx_reject.hijack",
 * "requests", ...; the vector the hand-off keeps the counters under.
 * Return: RELAY_COUNTER_WORDS names, static.
 */
const char *const *relay_counter_names(void);

#endif /* RDMACM_MUX_RELAY_COUNTERS_H */
