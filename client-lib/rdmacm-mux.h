/* SPDX-License-Identifier: MIT */
/*
 * librdmacm-mux: the client side of the rdmacm-mux daemon.
 *
 * The library speaks the daemon's frame protocol (rdmacm-mux-proto.h) over
 * the daemon's UNIX socket. It never blocks except in rdmacm_mux_open() and
 * rdmacm_mux_wait(), and it owns no thread: the caller drives it from any
 * event loop with rdmacm_mux_get_fd(), rdmacm_mux_get_events() and
 * rdmacm_mux_process(), in the manner of sd-bus.
 *
 * Requests (register, unregister, send, stats) only queue a frame and hand
 * back a ticket. The daemon answers requests in order; the library matches
 * each answer to its ticket and keeps it until rdmacm_mux_next_response() or
 * rdmacm_mux_wait() collects it. MADs that the daemon routes to this client
 * are queued separately and collected with rdmacm_mux_recv_mad(). Both queues
 * are bounded.
 *
 * Every function returns 0 (or a documented non-negative value) on success
 * and a negative errno on failure, and records a human-readable reason that
 * rdmacm_mux_last_error() returns. A handle is not thread-safe: use it from
 * one thread at a time.
 *
 * Reconnection (opt-in, RDMACM_MUX_OPEN_RECONNECT, since 1.1)
 *
 * By default a broken connection (the daemon closed it, ECONNRESET, EPIPE,
 * a protocol violation) is final: every later call returns the error that
 * broke it. With RDMACM_MUX_OPEN_RECONNECT the handle survives daemon
 * restarts instead:
 *
 * - When the connection breaks, every request that was queued or in flight
 *   completes with error -ECONNRESET: rdmacm_mux_next_response() and
 *   rdmacm_mux_wait() hand it out like any answer. Nothing is resent, because
 *   a resent CM MAD may reach the peer twice; the caller decides what to
 *   redo. Answers and MADs that arrived before the break stay collectable.
 *   Then a RDMACM_MUX_EVENT_DISCONNECTED event is queued.
 * - Until the handle is back, new requests fail with -ENOTCONN.
 * - Reconnection attempts happen only inside rdmacm_mux_process() and
 *   rdmacm_mux_wait(), never in a thread, and never block: the first comes
 *   one backoff delay after the break, each failed one doubles the delay up
 *   to a cap, and each delay is shortened by a random jitter so that many
 *   clients of one daemon do not come back in lockstep (defaults: 100 ms,
 *   doubling up to 5000 ms, up to 20% jitter; see
 *   rdmacm_mux_set_reconnect_backoff()). rdmacm_mux_get_timeout() tells an
 *   event loop when the next attempt is due, as sd_bus_get_timeout() does.
 * - An attempt connects to the same socket path, redoes the HELLO handshake
 *   (unless RDMACM_MUX_OPEN_BASE_PROTOCOL; the granted capabilities may
 *   differ from before) and registers again, in the order they were first
 *   registered, every GID whose REG succeeded and that was not passed to
 *   rdmacm_mux_unregister_gid() since. A GID the daemon now refuses (e.g.
 *   -EACCES: another client took it meanwhile) is dropped from that set and
 *   reported with a RDMACM_MUX_EVENT_GID_LOST event. A connection that
 *   breaks again during this, or a handshake that takes longer than 5 s,
 *   counts as a failed attempt. Then a RDMACM_MUX_EVENT_RECONNECTED event is
 *   queued and requests flow again.
 * - Events are collected with rdmacm_mux_next_event(), in the order they
 *   happened; check after every rdmacm_mux_process(). While 64 or more
 *   events wait uncollected, the library makes no reconnection attempt, so
 *   that its memory stays bounded; collect them.
 * - rdmacm_mux_get_fd() is then an epoll fd that stays the same for the life
 *   of the handle (the socket behind it changes with every reconnection) and
 *   becomes readable when the socket needs attention or an attempt is due,
 *   so a loop that ignores rdmacm_mux_get_timeout() still works. Add it to
 *   poll(), select() or another epoll set with POLLIN; it is not a socket.
 * - rdmacm_mux_open() itself still fails when the daemon is not there;
 *   rdmacm_mux_open_ex() with RDMACM_MUX_OPEN_ASYNC does not (below).
 *
 * Extensible calls (since 1.2)
 *
 * The structs of the 1.0 and 1.1 calls have fixed sizes, so they stay as
 * they are. The calls of 1.2 (the *_ex ones, rdmacm_mux_submit() and
 * rdmacm_mux_query_info()) take structs that can grow without a new soname,
 * in the manner of rdma-core's ibv_*_ex calls:
 * - A struct the caller fills in starts with comp_mask: the bits say which
 *   of the optional fields the caller set. The library reads no optional
 *   field whose bit is clear, and refuses bits it does not know with
 *   -EOPNOTSUPP, so a program built against a newer header learns that the
 *   library is older instead of being misread. Zero-initialise the struct.
 * - A struct the library fills in is passed with its size (sizeof as the
 *   caller was built). The library writes what it knows and zeroes the rest
 *   up to that size; its reserved[] words read as zero. Fields added later
 *   go into the reserved space or past the end, and are flagged in the
 *   struct's comp_mask, which is 0 in 1.2.
 * - A handle opened with rdmacm_mux_open_ex() may report event types that
 *   this header does not list: ignore those.
 * Check for the calls at build time with RDMACM_MUX_CHECK_VERSION(1, 2, 0)
 * or pkg-config's version (rdmacm-mux >= 1.2); a program that uses them
 * needs the RDMACM_MUX_1.2 symbol version, so an older library is refused
 * by the dynamic linker, not at the first call.
 *
 * Depends on libc only.
 */
#ifndef RDMACM_MUX_H
#define RDMACM_MUX_H

#include <stddef.h>
#include <stdint.h>

#include "rdmacm-mux-proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of this header: the library's, not the daemon's or the
 * protocol's. Since 1.2 (a header without RDMACM_MUX_VERSION_MAJOR is 1.0
 * or 1.1). Usable in #if.
 */
#define RDMACM_MUX_VERSION_MAJOR 1
#define RDMACM_MUX_VERSION_MINOR 2
#define RDMACM_MUX_VERSION_MICRO 0
/* One number that orders versions: 0x010200 for 1.2.0. */
#define RDMACM_MUX_VERSION_ENCODE(major, minor, micro)                         \
	(((major) << 16) | ((minor) << 8) | (micro))
#define RDMACM_MUX_VERSION                                                     \
	RDMACM_MUX_VERSION_ENCODE(RDMACM_MUX_VERSION_MAJOR,                    \
				  RDMACM_MUX_VERSION_MINOR,                    \
				  RDMACM_MUX_VERSION_MICRO)
/* True when this header is major.minor.micro or newer. */
#define RDMACM_MUX_CHECK_VERSION(major, minor, micro)                          \
	(RDMACM_MUX_VERSION >= RDMACM_MUX_VERSION_ENCODE(major, minor, micro))

/* An open connection to the daemon. Opaque. */
struct rdmacm_mux;

/*
 * rdmacm_mux_open() flags.
 * RDMACM_MUX_OPEN_BASE_PROTOCOL: skip the HELLO handshake and speak only the
 * QEMU-compatible base protocol, as QEMU itself does.
 */
#define RDMACM_MUX_OPEN_BASE_PROTOCOL (1u << 0)
/*
 * RDMACM_MUX_OPEN_RECONNECT: survive daemon restarts: reconnect with backoff,
 * redo the handshake and re-register the GIDs (see the top of this file).
 * Since 1.1; a 1.0 library refuses the flag with -EINVAL.
 */
#define RDMACM_MUX_OPEN_RECONNECT (1u << 1)
/*
 * RDMACM_MUX_OPEN_ASYNC: rdmacm_mux_open_ex() returns at once, without
 * touching the socket; the connection and the handshake happen in
 * rdmacm_mux_process(), and a RDMACM_MUX_EVENT_CONNECTED event says when
 * requests can flow. Needs RDMACM_MUX_OPEN_RECONNECT (a daemon that is not
 * there yet is one that is away). rdmacm_mux_open_ex() only; since 1.2.
 */
#define RDMACM_MUX_OPEN_ASYNC (1u << 2)

/* The most requests that may be queued, in flight or answered-but-not-yet
 * collected at any time. One more fails with -ENOBUFS. */
#define RDMACM_MUX_MAX_REQUESTS 64
/* The most inbound MADs kept until rdmacm_mux_recv_mad(); more are dropped
 * and counted (rdmacm_mux_get_dropped()). */
#define RDMACM_MUX_MAX_INBOUND 256

/* The answer to one request. */
struct rdmacm_mux_response {
	uint32_t ticket;  /* as handed out by the request function */
	uint32_t op_code; /* RDMACM_MUX_OP_CODE_* of the request */
	int error;	  /* 0, or the daemon's verdict as a negative errno */
	struct rdmacm_mux_client_stats stats; /* rdmacm_mux_query_stats() only */
};

/* A MAD that the daemon routed to this client. */
struct rdmacm_mux_inbound {
	uint8_t local_gid[16];		 /* our registered GID it was routed by */
	struct rdmacm_mux_mad_addr addr; /* the sender, as the kernel saw it */
	uint32_t mad_len;		 /* bytes used in mad[], 24..256 */
	uint8_t mad[RDMACM_MUX_MAD_SIZE];
};

/* Kinds of rdmacm_mux_event (RDMACM_MUX_OPEN_RECONNECT only). */
enum rdmacm_mux_event_type {
	/* The connection broke; in-flight requests completed with
	 * -ECONNRESET; reconnection attempts start. */
	RDMACM_MUX_EVENT_DISCONNECTED = 1,
	/* While reconnecting, the daemon refused to register a GID again; it
	 * is no longer registered and will not be retried. */
	RDMACM_MUX_EVENT_GID_LOST = 2,
	/* Connected, handshake done and GIDs registered again: requests
	 * flow. Follows the GID_LOST events of the same reconnection. */
	RDMACM_MUX_EVENT_RECONNECTED = 3,
	/* Since 1.2, handles opened with RDMACM_MUX_OPEN_ASYNC: the first
	 * connection is up, handshake done; requests flow. */
	RDMACM_MUX_EVENT_CONNECTED = 4,
	/* Since 1.2, handles opened with rdmacm_mux_open_ex() and
	 * RDMACM_MUX_OPEN_RECONNECT: a connection attempt failed (the socket
	 * is not there, the daemon refused or hung up during the handshake,
	 * or took more than 5 s for it); the next one follows after the
	 * event's retry_ms. */
	RDMACM_MUX_EVENT_ATTEMPT_FAILED = 5,
};

/* Something that happened to the connection, from rdmacm_mux_next_event(). */
struct rdmacm_mux_event {
	uint32_t type;		  /* RDMACM_MUX_EVENT_* */
	int error;		  /* DISCONNECTED: why (-ECONNRESET, -EPIPE,
				   * -EPROTO, ...); GID_LOST: the daemon's
				   * answer to the REG (-EACCES, -EDQUOT, ...);
				   * RECONNECTED: 0 */
	uint8_t gid[16];	  /* GID_LOST: the GID; else zero */
	uint32_t requests_failed; /* DISCONNECTED: requests that completed
				   * with -ECONNRESET */
	uint32_t attempts;	  /* RECONNECTED: connection attempts it took */
	uint32_t gids_registered; /* RECONNECTED: GIDs registered again */
	uint32_t gids_failed;	  /* RECONNECTED: GIDs lost (GID_LOST events) */
};

/**
 * rdmacm_mux_open() - connect to the daemon
 * @socket_path: the daemon's socket, e.g. "/var/run/rdmacm-mux-rxe0-1"
 * @flags:       0, or RDMACM_MUX_OPEN_BASE_PROTOCOL and/or
 *               RDMACM_MUX_OPEN_RECONNECT
 * @timeout_ms:  limit for connecting plus the handshake; negative: no limit
 * @ret:         the new handle
 *
 * Connects and, unless @flags says otherwise, negotiates the extension
 * capabilities with a HELLO request. A daemon that does not know HELLO (the
 * old QEMU mux) answers EINVAL; the handle then stays in base mode, which is
 * not an error. The socket is CLOEXEC and non-blocking once this returns.
 * On failure rdmacm_mux_last_error(NULL) tells why, in this thread.
 *
 * Return: 0, or a negative errno (-ENOENT, -ECONNREFUSED, -ETIMEDOUT, ...).
 */
int rdmacm_mux_open(const char *socket_path, unsigned flags, int timeout_ms,
		    struct rdmacm_mux **ret);

/**
 * rdmacm_mux_close() - disconnect and free the handle
 * @m: the handle, or NULL
 *
 * Unanswered requests and uncollected MADs are discarded. The daemon drops
 * every GID this connection registered.
 */
void rdmacm_mux_close(struct rdmacm_mux *m);

/* For __attribute__((cleanup(rdmacm_mux_closep))). */
static inline void rdmacm_mux_closep(struct rdmacm_mux **m)
{
	rdmacm_mux_close(*m);
}

/**
 * rdmacm_mux_get_fd() - the fd to watch in the caller's event loop
 *
 * The daemon socket; with RDMACM_MUX_OPEN_RECONNECT an epoll fd that stays
 * the same across reconnections (see the top of this file).
 * Return: the fd (owned by the handle), or -EINVAL.
 */
int rdmacm_mux_get_fd(const struct rdmacm_mux *m);

/**
 * rdmacm_mux_get_events() - the poll events the handle waits for
 * Return: POLLIN, plus POLLOUT while output is queued (always POLLIN alone
 * with RDMACM_MUX_OPEN_RECONNECT); -EINVAL for NULL.
 */
short rdmacm_mux_get_events(const struct rdmacm_mux *m);

/**
 * rdmacm_mux_process() - do the socket I/O that is possible now
 *
 * Writes queued output, reads what the daemon sent and sorts whole frames
 * into the response and inbound queues. Never blocks. Call it when the fd
 * is ready for rdmacm_mux_get_events(), and with RDMACM_MUX_OPEN_RECONNECT
 * also when rdmacm_mux_get_timeout() expired: it then also drives the
 * reconnection, and queues events for rdmacm_mux_next_event().
 *
 * Return: the number of frames received (0 if none); -ENOBUFS once after
 * inbound MADs had to be dropped (the handle stays usable); without
 * RDMACM_MUX_OPEN_RECONNECT -ECONNRESET, -EPIPE, -EPROTO, ... when the
 * connection is unusable, and then for every later call that needs it (with
 * it, a broken connection is an event, not an error).
 */
int rdmacm_mux_process(struct rdmacm_mux *m);

/**
 * rdmacm_mux_get_capabilities() - extension capabilities the daemon granted
 * Return: RDMACM_MUX_CAP_* bits; 0 in base mode or for NULL.
 */
uint64_t rdmacm_mux_get_capabilities(const struct rdmacm_mux *m);

/**
 * rdmacm_mux_get_dropped() - inbound MADs dropped because the queue was full
 * Return: the count since open; 0 for NULL.
 */
uint64_t rdmacm_mux_get_dropped(const struct rdmacm_mux *m);

/**
 * rdmacm_mux_register_gid() - claim a GID: the daemon routes MADs for it here
 * @gid:        16 bytes, network order
 * @ret_ticket: the request's ticket (>= 1, increasing), or NULL
 *
 * Queues the request; the answer's error is -EEXIST if this connection has
 * the GID already, -EACCES if another client owns it. With
 * RDMACM_MUX_OPEN_RECONNECT a GID whose answer is 0 (or -EEXIST) is
 * registered again after each reconnection until it is unregistered.
 * Return: 0, or a negative errno (-EINVAL, -ENOBUFS, -ENOTCONN while
 * reconnecting, -ENOMEM, or the connection's).
 */
int rdmacm_mux_register_gid(struct rdmacm_mux *m, const uint8_t gid[16],
			    uint32_t *ret_ticket);

/**
 * rdmacm_mux_unregister_gid() - give a GID back
 *
 * As rdmacm_mux_register_gid(). The answer's error is -ENOENT if nobody owns
 * the GID, -EACCES if another client does. With RDMACM_MUX_OPEN_RECONNECT the
 * GID leaves the set that reconnection registers again as soon as this is
 * called, whatever the answer, and also when the call itself fails with
 * -ENOTCONN (while reconnecting: the daemon forgot the GID with the old
 * connection) or -ENOBUFS (since 1.1.1; 1.1.0 kept the GID then).
 */
int rdmacm_mux_unregister_gid(struct rdmacm_mux *m, const uint8_t gid[16],
			      uint32_t *ret_ticket);

/**
 * rdmacm_mux_send_mad() - send a CM MAD to the fabric
 * @sgid:    the source GID; must be one this connection registered
 * @addr:    destination: gid, qpn (network order, 1 for CM), lid, sl,
 *           pkey_index, hop_limit, traffic_class, flow_label, grh_present.
 *           gid_index is ignored: the daemon picks it from the port's table.
 * @mad:     the MAD, network order, starting with the 24-byte MAD header
 * @mad_len: 24..256
 * @ret_ticket: the request's ticket, or NULL
 *
 * Return: 0, or a negative errno (-EINVAL, -ENOBUFS, or the connection's).
 */
int rdmacm_mux_send_mad(struct rdmacm_mux *m, const uint8_t sgid[16],
			const struct rdmacm_mux_mad_addr *addr, const void *mad,
			size_t mad_len, uint32_t *ret_ticket);

/**
 * rdmacm_mux_query_stats() - ask the daemon for this connection's counters
 *
 * The answer carries them in rdmacm_mux_response.stats.
 * Return: 0; -EOPNOTSUPP unless RDMACM_MUX_CAP_CLIENT_STATS was granted; or
 * as rdmacm_mux_register_gid().
 */
int rdmacm_mux_query_stats(struct rdmacm_mux *m, uint32_t *ret_ticket);

/**
 * rdmacm_mux_next_response() - collect the oldest answered request
 *
 * Does no I/O; call rdmacm_mux_process() first.
 * Return: 0 and *@ret filled; -EAGAIN when no answer is waiting; the
 * connection's error once it failed and nothing is left to collect.
 */
int rdmacm_mux_next_response(struct rdmacm_mux *m,
			     struct rdmacm_mux_response *ret);

/**
 * rdmacm_mux_recv_mad() - collect the oldest queued inbound MAD
 *
 * Does no I/O and never blocks; call rdmacm_mux_process() first.
 * Return: 0 and *@ret filled; -EAGAIN when none is queued; the connection's
 * error once it failed and nothing is left to collect.
 */
int rdmacm_mux_recv_mad(struct rdmacm_mux *m, struct rdmacm_mux_inbound *ret);

/**
 * rdmacm_mux_wait() - block until one request is answered
 * @ticket:     as handed out by a request function
 * @timeout_ms: negative: no limit
 * @ret:        the answer (its error field holds the daemon's verdict)
 *
 * Inbound MADs and other answers that arrive meanwhile are queued for
 * rdmacm_mux_recv_mad() and rdmacm_mux_next_response().
 * Return: 0 (with RDMACM_MUX_OPEN_RECONNECT also when the connection broke:
 * the answer's error is then -ECONNRESET); -ETIMEDOUT (the request stays
 * pending); -ENOENT for a ticket that is not pending; or the connection's
 * error.
 */
int rdmacm_mux_wait(struct rdmacm_mux *m, uint32_t ticket, int timeout_ms,
		    struct rdmacm_mux_response *ret);

/**
 * rdmacm_mux_set_reconnect_backoff() - tune the delays between attempts
 * @initial_ms:     delay before the first attempt after a break, 1..3600000
 * @max_ms:         the cap for the doubling delay, @initial_ms..3600000
 * @jitter_percent: 0..100: each delay is shortened by a random amount of up
 *                  to this share of it (0: exact delays)
 *
 * The delay before attempt n (1-based) of one outage is
 * min(@initial_ms * 2^(n-1), @max_ms), minus the jitter. Takes effect from
 * the next delay the library computes. Since 1.1.
 * Return: 0; -EINVAL for values out of range; -EOPNOTSUPP unless the handle
 * was opened with RDMACM_MUX_OPEN_RECONNECT.
 */
int rdmacm_mux_set_reconnect_backoff(struct rdmacm_mux *m, uint32_t initial_ms,
				     uint32_t max_ms, uint32_t jitter_percent);

/**
 * rdmacm_mux_get_timeout() - how long the caller's poll may sleep
 * @ret_timeout_ms: milliseconds until rdmacm_mux_process() has timed work
 *                  to do (the next reconnection attempt, or the end of the
 *                  reconnection handshake's time limit), 0 if it is due
 *                  now, -1 for none. Usable as poll()'s timeout as it is.
 *
 * Always -1 without RDMACM_MUX_OPEN_RECONNECT and while connected. Since 1.1.
 * Return: 0, or -EINVAL.
 */
int rdmacm_mux_get_timeout(const struct rdmacm_mux *m, int *ret_timeout_ms);

/**
 * rdmacm_mux_next_event() - collect the oldest connection event
 *
 * Does no I/O; events are queued by rdmacm_mux_process() and
 * rdmacm_mux_wait(), in order: DISCONNECTED, then zero or more GID_LOST,
 * then RECONNECTED, and so on for each outage. Since 1.1. A handle opened
 * with rdmacm_mux_open_ex() also gets an ATTEMPT_FAILED for each failed
 * attempt (GID_LOST events before one are final all the same), and one
 * opened with RDMACM_MUX_OPEN_ASYNC starts with ATTEMPT_FAILED events and
 * a CONNECTED instead of an outage; their other fields are
 * rdmacm_mux_next_event_ex()'s.
 * Return: 0 and *@ret filled; -EAGAIN when none is waiting (always, without
 * RDMACM_MUX_OPEN_RECONNECT, until the connection fails; then its error).
 */
int rdmacm_mux_next_event(struct rdmacm_mux *m, struct rdmacm_mux_event *ret);

/* ---- since 1.2: extensible calls (see the top of this file) ---- */

/**
 * rdmacm_mux_version() - the version of the library that is running
 *
 * For logs, and for behaviour that a micro release fixed. Which calls
 * exist is settled at build time (RDMACM_MUX_CHECK_VERSION, pkg-config) and
 * by the symbol versions, not by this.
 * Return: RDMACM_MUX_VERSION_ENCODE(major, minor, micro) of the library.
 */
uint32_t rdmacm_mux_version(void);

/* rdmacm_mux_open_attr.comp_mask: the optional fields that are set. */
#define RDMACM_MUX_OPEN_ATTR_BACKOFF (1u << 0) /* backoff_* */

/* What rdmacm_mux_open_ex() opens. Zero-initialise it. */
struct rdmacm_mux_open_attr {
	uint32_t comp_mask; /* RDMACM_MUX_OPEN_ATTR_* */
	uint32_t flags;	    /* RDMACM_MUX_OPEN_* */
	const char *socket_path;
	/* Without RDMACM_MUX_OPEN_ASYNC: limit for connecting plus the
	 * handshake, negative for none, as rdmacm_mux_open()'s. Ignored
	 * with it. */
	int32_t timeout_ms;
	/* RDMACM_MUX_OPEN_ATTR_BACKOFF (needs RDMACM_MUX_OPEN_RECONNECT):
	 * as rdmacm_mux_set_reconnect_backoff(), from the first delay on. */
	uint32_t backoff_initial_ms;
	uint32_t backoff_max_ms;
	uint32_t backoff_jitter_percent;
};

/**
 * rdmacm_mux_open_ex() - open a handle, perhaps without blocking
 * @attr: the socket, flags and options
 * @ret:  the new handle
 *
 * Without RDMACM_MUX_OPEN_ASYNC, as rdmacm_mux_open(). With it (and
 * RDMACM_MUX_OPEN_RECONNECT, which it needs) it never blocks and never
 * fails for want of a daemon: the handle starts where a reconnecting one is
 * after a break, minus the DISCONNECTED event. The first attempt is due at
 * once (the fd is readable), a failed one is reported with
 * RDMACM_MUX_EVENT_ATTEMPT_FAILED and retried with the backoff, and the
 * first success with RDMACM_MUX_EVENT_CONNECTED; until then requests fail
 * with -ENOTCONN. The fd is the epoll fd from the start.
 *
 * A handle opened here reports the events of 1.2 (CONNECTED,
 * ATTEMPT_FAILED) and may report later ones; one from rdmacm_mux_open()
 * keeps 1.1's set. Since 1.2.
 * Return: 0, or a negative errno: -EINVAL for a bad argument or flag, or
 * RDMACM_MUX_OPEN_ASYNC without RDMACM_MUX_OPEN_RECONNECT; -EOPNOTSUPP for
 * comp_mask bits this library does not know; -ENAMETOOLONG; -ENOMEM; and
 * without RDMACM_MUX_OPEN_ASYNC rdmacm_mux_open()'s.
 */
int rdmacm_mux_open_ex(const struct rdmacm_mux_open_attr *attr,
		       struct rdmacm_mux **ret);

/* One request for rdmacm_mux_submit(). Zero-initialise it. */
struct rdmacm_mux_request {
	uint32_t comp_mask; /* none defined yet: 0 */
	uint32_t op_code;   /* RDMACM_MUX_OP_CODE_REG, _UNREG, _MAD or
			     * _CLIENT_STATS */
	uint64_t user_data; /* anything; handed back with the answer */
	uint8_t gid[16];    /* REG, UNREG: the GID; MAD: the source GID */
	const struct rdmacm_mux_mad_addr *addr; /* MAD: the destination */
	const void *mad;			/* MAD: the MAD */
	uint32_t mad_len;			/* MAD: 24..256 */
};

/**
 * rdmacm_mux_submit() - queue any request, with a value for its answer
 * @req:        what to ask; its user_data comes back in the answer's
 * @ret_ticket: the request's ticket, or NULL
 *
 * The same as rdmacm_mux_register_gid(), rdmacm_mux_unregister_gid(),
 * rdmacm_mux_send_mad() or rdmacm_mux_query_stats() with the same
 * arguments, reconnection semantics included; user_data lets an event loop
 * find its context from the answer without a table of tickets. The answer
 * carries user_data in rdmacm_mux_next_response_ex() and
 * rdmacm_mux_wait_ex(); the 1.0 calls collect it without. Since 1.2.
 * Return: 0, or a negative errno as the call it stands for; -EINVAL for an
 * unknown op_code; -EOPNOTSUPP for comp_mask bits this library does not
 * know.
 */
int rdmacm_mux_submit(struct rdmacm_mux *m,
		      const struct rdmacm_mux_request *req,
		      uint32_t *ret_ticket);

/* The answer to one request, from rdmacm_mux_next_response_ex() and
 * rdmacm_mux_wait_ex(). Its layout is the same on every ABI. */
struct rdmacm_mux_response_ex {
	uint32_t comp_mask; /* out: fields added after 1.2 that are valid */
	uint32_t ticket;
	uint32_t op_code; /* RDMACM_MUX_OP_CODE_* of the request */
	int32_t error;	  /* 0, or the daemon's verdict as a negative errno */
	uint64_t user_data; /* rdmacm_mux_submit()'s; 0 for the 1.0 calls */
	/* CLIENT_STATS answered with error 0: this connection's counters
	 * (as struct rdmacm_mux_client_stats; ones the daemon did not send
	 * read as 0). Otherwise 0. */
	uint64_t tx_mads;
	uint64_t tx_rejected;
	uint64_t rx_mads;
	uint64_t rx_dropped;
	uint64_t requests;
	uint32_t gids;
	uint32_t sessions;
	uint32_t queued;
	uint32_t reserved0;
	uint64_t reserved[8];
};

/**
 * rdmacm_mux_next_response_ex() - rdmacm_mux_next_response(), extensible
 * @ret_size: sizeof(*@ret) as the caller was built
 *
 * Since 1.2. Return: as rdmacm_mux_next_response(); -EINVAL for a NULL
 * @ret or a @ret_size smaller than 1.2's struct.
 */
int rdmacm_mux_next_response_ex(struct rdmacm_mux *m,
				struct rdmacm_mux_response_ex *ret,
				size_t ret_size);

/**
 * rdmacm_mux_wait_ex() - rdmacm_mux_wait(), extensible
 * @ret_size: sizeof(*@ret) as the caller was built
 *
 * Since 1.2. Return: as rdmacm_mux_wait(); -EINVAL for a NULL @ret or a
 * @ret_size smaller than 1.2's struct.
 */
int rdmacm_mux_wait_ex(struct rdmacm_mux *m, uint32_t ticket, int timeout_ms,
		       struct rdmacm_mux_response_ex *ret, size_t ret_size);

/* A MAD the daemon routed to this client, from rdmacm_mux_recv_mad_ex(). */
struct rdmacm_mux_inbound_ex {
	uint32_t comp_mask; /* out: fields added after 1.2 that are valid */
	uint32_t mad_len;   /* bytes used in mad[], 24..256 */
	uint8_t local_gid[16]; /* our registered GID it was routed by */
	/* The sender, as the kernel saw it (its ib_mad_addr, a fixed ABI). */
	struct rdmacm_mux_mad_addr addr;
	uint8_t mad[RDMACM_MUX_MAD_SIZE];
	uint32_t reserved0;
	uint64_t reserved[8];
};

/**
 * rdmacm_mux_recv_mad_ex() - rdmacm_mux_recv_mad(), extensible
 * @ret_size: sizeof(*@ret) as the caller was built
 *
 * Since 1.2. Return: as rdmacm_mux_recv_mad(); -EINVAL for a NULL @ret or
 * a @ret_size smaller than 1.2's struct.
 */
int rdmacm_mux_recv_mad_ex(struct rdmacm_mux *m,
			   struct rdmacm_mux_inbound_ex *ret, size_t ret_size);

/* A connection event, from rdmacm_mux_next_event_ex(). */
struct rdmacm_mux_event_ex {
	uint32_t comp_mask; /* out: fields added after 1.2 that are valid */
	uint32_t type;	    /* RDMACM_MUX_EVENT_*; ignore unknown ones */
	int32_t error;	    /* DISCONNECTED, ATTEMPT_FAILED: why; GID_LOST:
			     * the daemon's answer to the REG; else 0 */
	uint32_t attempts;  /* CONNECTED, RECONNECTED: connection attempts it
			     * took; ATTEMPT_FAILED: attempts so far */
	uint8_t gid[16];    /* GID_LOST: the GID; else zero */
	uint32_t requests_failed; /* DISCONNECTED: requests that completed
				   * with -ECONNRESET */
	uint32_t gids_registered; /* RECONNECTED: GIDs registered again */
	uint32_t gids_failed;	  /* RECONNECTED: GIDs lost (GID_LOST) */
	/* DISCONNECTED, ATTEMPT_FAILED: milliseconds until the next attempt
	 * (the backoff delay, jitter included); else -1 */
	int32_t retry_ms;
	/* CONNECTED, RECONNECTED: the capabilities the daemon granted (as
	 * rdmacm_mux_get_capabilities() then); else 0 */
	uint64_t capabilities;
	uint64_t reserved[8];
};

/**
 * rdmacm_mux_next_event_ex() - rdmacm_mux_next_event(), extensible
 * @ret_size: sizeof(*@ret) as the caller was built
 *
 * The same events in the same order, with more said about each.
 * Since 1.2. Return: as rdmacm_mux_next_event(); -EINVAL for a NULL @ret
 * or a @ret_size smaller than 1.2's struct.
 */
int rdmacm_mux_next_event_ex(struct rdmacm_mux *m,
			     struct rdmacm_mux_event_ex *ret, size_t ret_size);

/* rdmacm_mux_info.state */
enum rdmacm_mux_state {
	/* Requests flow. */
	RDMACM_MUX_STATE_CONNECTED = 1,
	/* RDMACM_MUX_OPEN_RECONNECT: no connection, or one whose handshake
	 * or re-registration is not done; requests fail with -ENOTCONN. */
	RDMACM_MUX_STATE_CONNECTING = 2,
	/* Without RDMACM_MUX_OPEN_RECONNECT: the connection failed for good;
	 * error says why. */
	RDMACM_MUX_STATE_BROKEN = 3,
};

/* A snapshot of the handle, from rdmacm_mux_query_info(). */
struct rdmacm_mux_info {
	uint32_t comp_mask; /* out: fields added after 1.2 that are valid */
	uint32_t state;	    /* RDMACM_MUX_STATE_* */
	int32_t error;	    /* BROKEN: the connection's error; CONNECTING:
			     * why the last attempt failed or the connection
			     * broke, 0 before the first attempt; else 0 */
	uint32_t attempts;  /* CONNECTING: attempts made in this outage */
	uint64_t capabilities; /* as rdmacm_mux_get_capabilities() */
	/* The daemon's quotas for this client, from the last HELLO answer;
	 * 0 when unknown (base protocol, QEMU's mux) */
	uint32_t max_gids;
	uint32_t max_sessions;
	uint32_t max_queued;
	uint32_t gids;	   /* RECONNECT: the GIDs a reconnection registers
			    * again; else 0 */
	uint32_t requests; /* queued, in flight or answered, not collected */
	uint32_t inbound;  /* MADs waiting for rdmacm_mux_recv_mad() */
	uint32_t events;   /* events waiting for rdmacm_mux_next_event() */
	uint32_t reserved0;
	uint64_t dropped;    /* as rdmacm_mux_get_dropped() */
	uint64_t reconnects; /* RECONNECTED events queued since open */
	uint64_t reserved[8];
};

/**
 * rdmacm_mux_query_info() - the handle's state, quotas and counters
 * @ret_size: sizeof(*@ret) as the caller was built
 *
 * Does no I/O. Since 1.2.
 * Return: 0; -EINVAL for a NULL @m or @ret, or a @ret_size smaller than
 * 1.2's struct.
 */
int rdmacm_mux_query_info(const struct rdmacm_mux *m,
			  struct rdmacm_mux_info *ret, size_t ret_size);

/*
 * Released layouts: programs built against them run with this library, so
 * they never change (test-old-clients runs such programs). The 1.0 answer
 * follows the ABI's alignment of the wire's stats; pinned where it is 8.
 */
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_inbound) == 320,
			 "rdmacm_mux_inbound (1.0)");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_inbound, mad_len) == 60,
			 "rdmacm_mux_inbound.mad_len (1.0)");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_response, error) == 8,
			 "rdmacm_mux_response.error (1.0)");
#ifdef RDMACM_MUX_FRAME_SIZE_EXPECTED
#if RDMACM_MUX_FRAME_SIZE_EXPECTED == 360
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_response) == 72,
			 "rdmacm_mux_response (1.0)");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_response, stats) == 16,
			 "rdmacm_mux_response.stats (1.0)");
#endif
#endif
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_event) == 40,
			 "rdmacm_mux_event (1.1)");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_event, gids_failed) == 36,
			 "rdmacm_mux_event.gids_failed (1.1)");

/* The layouts of 1.2, the same on every ABI (the input structs hold
 * pointers and follow the ABI). Never change them: grow into reserved[]. */
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_response_ex) == 144,
			 "rdmacm_mux_response_ex");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_response_ex, user_data) == 16,
			 "rdmacm_mux_response_ex.user_data");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_response_ex, reserved) == 80,
			 "rdmacm_mux_response_ex.reserved");
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_inbound_ex) == 392,
			 "rdmacm_mux_inbound_ex");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_inbound_ex, addr) == 24,
			 "rdmacm_mux_inbound_ex.addr");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_inbound_ex, reserved) == 328,
			 "rdmacm_mux_inbound_ex.reserved");
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_event_ex) == 120,
			 "rdmacm_mux_event_ex");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_event_ex, capabilities) == 48,
			 "rdmacm_mux_event_ex.capabilities");
RDMACM_MUX_STATIC_ASSERT(sizeof(struct rdmacm_mux_info) == 136,
			 "rdmacm_mux_info");
RDMACM_MUX_STATIC_ASSERT(offsetof(struct rdmacm_mux_info, dropped) == 56,
			 "rdmacm_mux_info.dropped");

/**
 * rdmacm_mux_last_error() - why the last failing call on @m failed
 *
 * With @m NULL: why the last rdmacm_mux_open() in this thread failed.
 * Return: a string owned by the library, valid until the next call; "" when
 * nothing failed yet.
 */
const char *rdmacm_mux_last_error(const struct rdmacm_mux *m);

#ifdef __cplusplus
}
#endif

#endif /* RDMACM_MUX_H */
