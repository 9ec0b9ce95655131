/* SPDX-License-Identifier: MIT */
/*
 * Session table: CM sessions, comm id remapping, and their timers.
 *
 * A session is one CM connection (or SIDR query) of one client. The daemon
 * gives each session it originates a daemon-unique "wire id" that replaces
 * the client's LocalCommID on the wire (the mlx4 SR-IOV scheme), so every
 * client has its own comm id namespace.
 *
 * Wire ids are drawn at random (getrandom()), never 0 and unique among the
 * live sessions, so a peer that sees some of them learns nothing about the
 * others. The id of a session that goes away before its closing period is
 * over stays reserved as a tombstone for that period (up to a bound), so a
 * late retransmission for it can never reach a newer session.
 *
 * Three indexes, all O(1):
 *   wire id                       -> session (RX routing by RemoteCommID)
 *   (client id, client comm id)   -> session (TX: retransmissions, RTU...)
 *   (peer comm id, local GID)     -> session (a peer's REQ/SIDR_REQ: its
 *                                    duplicates, our client's REP/REJ/MRA,
 *                                    and REJ/MRA with RemoteCommID 0)
 *
 * Memory matters (a host can hold a million sessions): sessions live in
 * one growable array and are named by a 32-bit handle (index + 1, 0 means
 * none); the indexes are chained hash tables of 32-bit handles; timers are
 * one FIFO list per timer kind, which is sorted by deadline for free
 * because every timer of a kind has the same duration. No allocation
 * happens per session except when the array doubles.
 *
 * Time is passed in by the caller (monotonic microseconds), which keeps the
 * table pure and lets tests step time. Deadlines are kept as 32-bit
 * millisecond ticks compared with wrap-around arithmetic, so timers up to
 * 24 days work for any uptime.
 *
 * A Session pointer is valid only until the next session_table_add().
 */
#ifndef RDMACM_MUX_SESSION_TABLE_H
#define RDMACM_MUX_SESSION_TABLE_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h" /* GID_LEN */

/*
 * The values of SessionState and SessionTimer are stored in the session
 * records as they are: they are the hand-off format's wire numbers
 * (handoff-format.c asserts each one). Never renumber a value; a new one
 * takes the next number.
 */
typedef enum SessionState {
	SESSION_REQ_SENT = 0,	 /* our client sent a REQ */
	SESSION_REQ_RCVD = 1,	 /* a peer's REQ went to our client */
	SESSION_REP_SENT = 2,	 /* our client answered with REP */
	SESSION_REP_RCVD = 3,	 /* the peer answered our client's REQ */
	SESSION_ESTABLISHED = 4, /* RTU seen: quiet for hours, no timer */
	SESSION_CLOSING = 5,	 /* DREQ, DREP or REJ seen: removal pending */
	SESSION_SIDR_SENT = 6,	 /* our client's SIDR_REQ */
	SESSION_SIDR_RCVD = 7,	 /* a peer's SIDR_REQ went to our client */
	SESSION_STATE_COUNT,
} SessionState;

typedef enum SessionTimer {
	SESSION_TIMER_NONE = 0,
	SESSION_TIMER_HANDSHAKE = 1, /* idle timer of a half-open handshake */
	SESSION_TIMER_CLOSING = 2,   /* removal after DREQ/DREP/REJ */
	SESSION_TIMER_SIDR = 3,	     /* a SIDR query's lifetime */
	SESSION_TIMER_COUNT,
} SessionTimer;

/* Session.flags (wire values too) */
#define SESSION_F_IN_WIRE 0x01	 /* in the wire id index */
#define SESSION_F_IN_CLIENT 0x02 /* in the (client, comm id) index */
#define SESSION_F_IN_PEER 0x04	 /* in the (peer comm id, local GID) index */
#define SESSION_F_REMOTE 0x08	 /* started by a peer's REQ or SIDR_REQ */
#define SESSION_F_HALF_OPEN 0x10 /* counted in its owner's half_open */
#define SESSION_F_TOMB 0x40	 /* a dead session's reserved wire id */
#define SESSION_F_LIVE 0x80

/*
 * A session, and its record in the hand-off format's SESSIONS section
 * (handoff-format.h): the table's slots are the memfd's bytes, written in
 * place, so this struct is the record. Its layout is fixed (asserted
 * below); a new field is appended, with its offset asserted, and reads as
 * zero from a record an older writer left.
 *
 *   off size field            off size field
 *     0  4 wire_id             52  1 state (SessionState)
 *     4  4 client_comm_id      53  1 timer (SessionTimer)
 *     8  4 peer_comm_id        54  1 flags (SESSION_F_*)
 *    12  4 client_id           55  1 reserved
 *    16  4 deadline_ms         56  2 peer_lid
 *    20  4 created_ms          58  2 reserved2
 *    24 28 next_wire .. owner_next: the writer's own links (hash chains,
 *          timer and owner lists); a reader ignores and rebuilds them
 *    60 16 local_gid           76 16 peer_gid
 *
 * deadline_ms and created_ms are CLOCK_MONOTONIC milliseconds (mod 2^32):
 * the same clock in every process of one boot.
 */
typedef struct Session {
	uint32_t wire_id;	 /* 0 until assigned */
	uint32_t client_comm_id; /* 0 until the client used one */
	uint32_t peer_comm_id;	 /* 0 until known */
	uint32_t client_id;
	uint32_t deadline_ms; /* table ticks, valid while timer != NONE */
	uint32_t created_ms;  /* table ticks, for the admin tool's "age" */
	uint32_t next_wire, next_client, next_peer; /* hash chains */
	uint32_t timer_prev, timer_next;
	uint32_t owner_prev, owner_next;
	uint8_t state;	/* SessionState */
	uint8_t timer;	/* SessionTimer */
	uint8_t flags;	/* SESSION_F_* */
	uint8_t reserved;
	uint16_t peer_lid; /* the peer's LID (no GRH: IB), 0 if unknown */
	uint16_t reserved2;
	uint8_t local_gid[GID_LEN]; /* our client's GID in this session */
	uint8_t peer_gid[GID_LEN];  /* the remote end's GID, zero if unknown */
	/* The last MAD each way (the client's, the peer's), for the ib_cm
	 * groups' retries and duplicates (relay-vms): the attribute's index + 1
	 * in the top 4 bits, the TID's low 28 bits below. 0: none seen, as a
	 * record of format 2.0 reads. */
	uint32_t last_tx;
	uint32_t last_rx;
#ifdef RDMACM_MUX_HANDOFF_FUTURE
	uint32_t future_field; /* the test-only "future" build's appended field */
#endif
} Session;

#define SESSION_ASSERT_FIELD(field, off, size)                                           \
	_Static_assert(offsetof(Session, field) == (off) &&                              \
			       sizeof(((Session *)0)->field) == (size),                  \
		       "Session." #field " is at " #off ", " #size " bytes")
SESSION_ASSERT_FIELD(wire_id, 0, 4);
SESSION_ASSERT_FIELD(client_comm_id, 4, 4);
SESSION_ASSERT_FIELD(peer_comm_id, 8, 4);
SESSION_ASSERT_FIELD(client_id, 12, 4);
SESSION_ASSERT_FIELD(deadline_ms, 16, 4);
SESSION_ASSERT_FIELD(created_ms, 20, 4);
SESSION_ASSERT_FIELD(next_wire, 24, 4);
SESSION_ASSERT_FIELD(owner_next, 48, 4);
SESSION_ASSERT_FIELD(state, 52, 1);
SESSION_ASSERT_FIELD(timer, 53, 1);
SESSION_ASSERT_FIELD(flags, 54, 1);
SESSION_ASSERT_FIELD(peer_lid, 56, 2);
SESSION_ASSERT_FIELD(local_gid, 60, 16);
SESSION_ASSERT_FIELD(peer_gid, 76, 16);
SESSION_ASSERT_FIELD(last_tx, 92, 4);
SESSION_ASSERT_FIELD(last_rx, 96, 4);
#ifdef RDMACM_MUX_HANDOFF_FUTURE
SESSION_ASSERT_FIELD(future_field, 100, 4);
_Static_assert(sizeof(Session) == 104, "a future session record is 104 bytes");
#else
_Static_assert(sizeof(Session) == 100, "a session record is 100 bytes");
#endif

/* The per-client list of sessions; the client owns it. */
typedef struct SessionList {
	uint32_t head;
	uint32_t count;
	uint32_t half_open; /* sessions with SESSION_F_HALF_OPEN */
} SessionList;

typedef struct SessionTable SessionTable;

/* Called for every session a timer removes; returns its owner's list. */
typedef SessionList *(*SessionOwnerFn)(void *userdata, uint32_t client_id);
/* Called for every live session that goes, however, before it is scrubbed. */
typedef void (*SessionRemovedFn)(void *userdata, const Session *s);

/**
 * session_table_new() - create an empty table.
 * @timeouts_ms: duration of each SessionTimer kind, in milliseconds
 *               (index SESSION_TIMER_NONE is ignored); each < 2^31
 */
SessionTable *session_table_new(const uint32_t timeouts_ms[SESSION_TIMER_COUNT]);
/* session_table_new() for an owner that holds at most @max_live live
 * sessions: it starts with room for them (at least 16, at most the usual
 * 1024 slots) and grows as any table does (tombstones take slots too). */
SessionTable *session_table_new_sized(const uint32_t timeouts_ms[SESSION_TIMER_COUNT],
				      uint32_t max_live);
/* Whose sessions memfd it is: written into its header (handoff-format.h). */
typedef struct SessionFileOwner {
	const char *dev;
	int port;
	uint64_t pair_id;    /* the same as the state memfd's */
	uint64_t generation; /* handoff-format.h: conversions that made it */
} SessionFileOwner;

/* Called for each session a take-over drops, with the reason. */
typedef void (*SessionDroppedFn)(void *userdata, const Session *s, const char *why);

/**
 * session_table_new_in() - an empty table whose sessions live in the memfd
 * @fd (truncated first; the caller keeps the fd), in the hand-off format's
 * sessions layout, so that a successor can take them over
 * (session_table_adopt()) even after a crash.
 * Return: 0 or a negative errno.
 */
int session_table_new_in(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], int fd,
			 const SessionFileOwner *owner, SessionTable **ret);
/**
 * session_table_adopt() - take over, in place, the table a predecessor
 * kept in @fd (the caller keeps the fd). Nothing in the file is trusted:
 * every session must hold up (flags, state, timer, unique keys) and have
 * an owner, which @owner_of gives by client id (NULL: the client is not
 * back, the session goes); the indexes, timer lists, owner lists and
 * counts are rebuilt. @now (monotonic usec) is the time of the take-over.
 * Each session dropped is passed to @dropped (may be NULL) with why.
 * Return: 0 with *@ret_dropped the sessions dropped; -EBADMSG for a memfd
 * whose header, section or record size is not exactly this build's (the
 * caller converts it with session_table_import()); -ENOMEM; another
 * negative errno when it cannot be mapped.
 */
int session_table_adopt(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], int fd, uint64_t now,
			SessionOwnerFn owner_of, SessionDroppedFn dropped, void *userdata,
			uint32_t *ret_dropped, SessionTable **ret);
/**
 * session_table_import() - a new table in the memfd @fd (as
 * session_table_new_in()) made of @n records of @record_size bytes at
 * @records, written by another version: each record's first
 * min(@record_size, sizeof(Session)) bytes are taken, the rest of the
 * session is zero. Then taken over as session_table_adopt() does, with
 * the same checks. The caller keeps @fd.
 * Return: 0 or a negative errno.
 */
int session_table_import(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], const void *records,
			 uint32_t record_size, uint32_t n, int fd, const SessionFileOwner *owner,
			 uint64_t now, SessionOwnerFn owner_of, SessionDroppedFn dropped,
			 void *userdata, uint32_t *ret_dropped, SessionTable **ret);
/**
 * session_table_save() - write @t into the memfd @fd in the layout
 * session_table_adopt() reads: for a successor of a table that was not
 * kept in a memfd.
 * Return: 0 or a negative errno.
 */
int session_table_save(const SessionTable *t, int fd, const SessionFileOwner *owner);
void session_table_free(SessionTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SessionTable, session_table_free)

Session *session_table_get(SessionTable *t, uint32_t handle);
uint32_t session_table_count(const SessionTable *t);
/* Bytes the table holds (array + indexes), for the benchmark and status. */
size_t session_table_memory(const SessionTable *t);

/**
 * session_table_add() - create a session owned by @client_id.
 *
 * Return: the handle (> 0), or 0 when memory ran out.
 */
uint32_t session_table_add(SessionTable *t, SessionList *owner, uint32_t client_id,
			   SessionState state, uint64_t now);

/* Remove one session from every index, its timer and its owner's list. */
void session_table_remove(SessionTable *t, SessionList *owner, uint32_t handle);
/* Remove all of a client's sessions (the client left). */
void session_table_remove_all(SessionTable *t, SessionList *owner);

/* Fills @len bytes at @buf with the random bits wire ids are drawn from. */
typedef void (*SessionRandomFn)(void *ctx, void *buf, size_t len);
/**
 * session_table_set_random_source() - draw @t's wire ids from @fill (with
 * @ctx, freed by @ctx_free with the table or the next source) instead of
 * the kernel's CSPRNG. Chosen where the table is made, before any id is
 * drawn: tests and fuzzers use it for reproducible ids
 * (session_table_seed_wire_ids(), session-table-check.c); the daemon
 * never does.
 */
void session_table_set_random_source(SessionTable *t, SessionRandomFn fill, void *ctx,
				     GDestroyNotify ctx_free);
/* Make wire ids reproducible (fuzzers, tests): a sequence from @seed
 * instead of getrandom(). A test seam: session-table-check.c. */
void session_table_seed_wire_ids(SessionTable *t, uint64_t seed);

/* Give session @handle a fresh wire id (random, never 0, never live and
 * never a tombstone's), or keep the one it has. Return: the id, or 0. */
uint32_t session_table_assign_wire_id(SessionTable *t, uint32_t handle);
/* Reserved wire ids of sessions gone before their closing period ended. */
uint32_t session_table_tombstone_count(const SessionTable *t);
/* At most @max tombstones: past it the oldest is released early. */
void session_table_set_max_tombstones(SessionTable *t, uint32_t max);

/**
 * session_table_set_half_open() - count session @handle (of @owner) as a
 * peer-initiated half-open session, or stop counting it.
 */
void session_table_set_half_open(SessionTable *t, SessionList *owner, uint32_t handle,
				 bool half_open);
/* Half-open sessions of every owner. */
uint32_t session_table_half_open_count(const SessionTable *t);
/* Call @fn for every live session that goes (removed or expired). */
void session_table_set_remove_hook(SessionTable *t, SessionRemovedFn fn, void *userdata);
void session_table_set_client_comm_id(SessionTable *t, uint32_t handle, uint32_t comm_id);
void session_table_set_peer(SessionTable *t, uint32_t handle, uint32_t peer_comm_id,
			    const uint8_t local_gid[GID_LEN], const uint8_t peer_gid[GID_LEN]);

uint32_t session_table_lookup_wire_id(SessionTable *t, uint32_t wire_id);
uint32_t session_table_lookup_client_comm_id(SessionTable *t, uint32_t client_id,
					     uint32_t comm_id);
/**
 * session_table_lookup_peer() - find the session of a peer's comm id.
 * @peer_gid: the peer's GID, or NULL when the caller does not know it
 *            (QEMU clients never tell us their destination)
 */
uint32_t session_table_lookup_peer(SessionTable *t, uint32_t peer_comm_id,
				   const uint8_t local_gid[GID_LEN], const uint8_t *peer_gid);

/*
 * For a batch of lookups in a big table: do their loads first, all
 * together, so that the cache misses overlap instead of coming one per
 * message between the batch's syscalls. They change nothing; keys that
 * are in no session are fine. @found (may be NULL) gets each key's
 * handle, or 0: a hint, valid only while the table is unchanged.
 */
void session_table_warm_wire_ids(SessionTable *t, const uint32_t *wire_ids, unsigned n);
void session_table_warm_client_comm_ids(SessionTable *t, const uint32_t *client_ids,
					const uint32_t *comm_ids, unsigned n, uint32_t *found);

/* (Re)arm a session's timer of @kind from @now (usec); NONE disarms it. */
void session_table_arm(SessionTable *t, uint32_t handle, SessionTimer kind, uint64_t now);

/* Monotonic time (usec) of the earliest deadline, or UINT64_MAX. */
uint64_t session_table_next_deadline(const SessionTable *t, uint64_t now);

/**
 * session_table_expire() - remove every session whose timer ran out.
 * Return: the number removed.
 */
unsigned session_table_expire(SessionTable *t, uint64_t now, SessionOwnerFn owner_of,
			      void *userdata);

/* Call @fn for every live session, in no particular order. */
void session_table_foreach(const SessionTable *t,
			   void (*fn)(void *userdata, const Session *s), void *userdata);
/* Milliseconds since @s was created, and until its timer fires (or -1). */
uint32_t session_age_ms(const Session *s, uint64_t now);
int64_t session_timer_left_ms(const Session *s, uint64_t now);

/**
 * session_table_check() - verify the indexes: every chain ends, holds only
 * live sessions filed under their current key, and each index holds each
 * session that claims to be in it exactly once. For fuzzers and tests.
 * Return: NULL, or what is wrong (static storage).
 */
const char *session_table_check(const SessionTable *t);
/**
 * session_table_check_owned() - verify the list @l of client @client_id:
 * each entry a live session of that client that its wire id and client
 * comm id find (and so no other session has either), in a valid state
 * and timer, half-open only when a peer started it; the list as long as
 * its count, with as many half-open entries as its half-open count. For
 * fuzzers and tests.
 * Return: NULL, or what is wrong (static storage).
 */
const char *session_table_check_owned(const SessionTable *t, const SessionList *l,
				      uint32_t client_id);
/* Copy the live sessions, in slot order, into @out (room for @max).
 * For fuzzers and tests. Return: how many there are (may be > @max). */
uint32_t session_table_copy(const SessionTable *t, Session *out, uint32_t max);

const char *session_state_name(SessionState s);
const char *session_timer_name(SessionTimer k);

#endif /* RDMACM_MUX_SESSION_TABLE_H */
