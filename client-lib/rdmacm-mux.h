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

/* An open connection to the daemon. Opaque. */
struct rdmacm_mux;

/*
 * rdmacm_mux_open() flags.
 * RDMACM_MUX_OPEN_BASE_PROTOCOL: skip the HELLO handshake and speak only the
 * QEMU-compatible base protocol, as QEMU itself does.
 */
#define RDMACM_MUX_OPEN_BASE_PROTOCOL (1u << 0)

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

/**
 * rdmacm_mux_open() - connect to the daemon
 * @socket_path: the daemon's socket, e.g. "/var/run/rdmacm-mux-rxe0-1"
 * @flags:       0 or RDMACM_MUX_OPEN_BASE_PROTOCOL
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
 * rdmacm_mux_get_fd() - the socket to watch in the caller's event loop
 * Return: the fd (owned by the handle), or -EINVAL.
 */
int rdmacm_mux_get_fd(const struct rdmacm_mux *m);

/**
 * rdmacm_mux_get_events() - the poll events the handle waits for
 * Return: POLLIN, plus POLLOUT while output is queued; -EINVAL for NULL.
 */
short rdmacm_mux_get_events(const struct rdmacm_mux *m);

/**
 * rdmacm_mux_process() - do the socket I/O that is possible now
 *
 * Writes queued output, reads what the daemon sent and sorts whole frames
 * into the response and inbound queues. Never blocks. Call it when the fd
 * is ready for rdmacm_mux_get_events().
 *
 * Return: the number of frames received (0 if none); -ENOBUFS once after
 * inbound MADs had to be dropped (the handle stays usable); -ECONNRESET,
 * -EPIPE, -EPROTO, ... when the connection is unusable, and then for every
 * later call that needs it.
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
 * the GID already, -EACCES if another client owns it.
 * Return: 0, or a negative errno (-EINVAL, -ENOBUFS, or the connection's).
 */
int rdmacm_mux_register_gid(struct rdmacm_mux *m, const uint8_t gid[16],
			    uint32_t *ret_ticket);

/**
 * rdmacm_mux_unregister_gid() - give a GID back
 *
 * As rdmacm_mux_register_gid(). The answer's error is -ENOENT if nobody owns
 * the GID, -EACCES if another client does.
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
 * Return: 0; -ETIMEDOUT (the request stays pending); -ENOENT for a ticket
 * that is not pending; or the connection's error.
 */
int rdmacm_mux_wait(struct rdmacm_mux *m, uint32_t ticket, int timeout_ms,
		    struct rdmacm_mux_response *ret);

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
