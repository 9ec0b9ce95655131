/* SPDX-License-Identifier: MIT */
/*
 * A client connection: framing, the output queues, and credentials.
 *
 * The socket carries fixed-size frames with no length prefix, so input is
 * accumulated until whole frames are there. Output goes through two
 * bounded queues: responses first, then inbound MADs. A response may
 * overtake inbound MADs that are still queued (never a frame half
 * written), which is what QEMU needs: it reads the response with one
 * blocking read right after its request. Responses are never dropped; when
 * too many are pending the relay stops reading that client instead.
 * Inbound MADs are dropped (and counted) when their queue is full, so a
 * client that stops reading never holds anybody else up.
 */
#ifndef RDMACM_MUX_CLIENT_H
#define RDMACM_MUX_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rdmacm-mux-proto.h"
#include "session-table.h"

#define CLIENT_INPUT_FRAMES 16

typedef struct FrameQueue {
	struct rdmacm_mux_msg *frames;
	uint32_t cap;  /* allocated slots, grows on demand */
	uint32_t head; /* index of the oldest frame */
	uint32_t len;
	uint32_t max; /* quota */
} FrameQueue;

/* One GID a client registered, with its cached GID-table index. */
typedef struct ClientGid {
	uint8_t gid[16];
	int gid_index;		 /* -1: not in the port's table (yet) */
	unsigned table_generation;
} ClientGid;

typedef struct Client {
	uint32_t id; /* unique among live clients; reuse is delayed 2^32 ids */
	void *owner; /* the relay serving this client */
	int fd; /* in the relay's epoll set while connected */
	struct ucred cred;
	char comm[32];
	uint64_t connected_usec;

	uint8_t in[CLIENT_INPUT_FRAMES * sizeof(struct rdmacm_mux_msg)];
	size_t in_len;
	size_t in_off;
	bool input_drained; /* the last recv() did not fill the buffer */
	bool input_fresh;   /* frames came in whose lookups nobody warmed yet */
	/* the session the relay's warm pass found for the frame at in[i *
	 * frame size], 0 if none: a hint it checks before use */
	uint32_t in_hint[CLIENT_INPUT_FRAMES];
	int in_error;	    /* the socket's end (-EPIPE) or error, once seen */

	FrameQueue resp;
	FrameQueue mad;
	int out_src;	/* queue whose head is partly written: 0, 1 resp, 2 mad */
	size_t out_off; /* bytes of that frame already written */

	/* protocol state, owned by the relay */
	ClientGid *gids;
	uint32_t n_gids;
	SessionList sessions;
	uint64_t caps;
	bool hello_done;
	bool c1_logged;
	bool reading_paused;
	bool dirty; /* on the relay's list of clients to flush */
	unsigned bad_frames; /* consecutive */
	struct rdmacm_mux_client_stats stats;
} Client;

/* Allocate a client for @fd (taken over); reads SO_PEERCRED. */
Client *client_new(uint32_t id, int fd, uint32_t max_queued, uint32_t max_pending);
/* Close the fd, drop its event source, free everything. NULL-safe. */
void client_free(Client *c);

/**
 * client_read_frame() - the next whole frame from the socket.
 * Return: 1 with @out filled; 0 when no whole frame is available now;
 * -EPIPE at end of stream (in_len tells whether a frame was cut short);
 * another negative errno on a socket error.
 */
int client_read_frame(Client *c, struct rdmacm_mux_msg *out);
/**
 * client_fill_input() - read from the socket unless a whole frame is
 * buffered already; client_read_frame() does this when it needs to, the
 * relay ahead of time to see several clients' frames at once.
 * Return: 0 (whatever was read, possibly nothing), or the error
 * client_read_frame() will return once the buffered frames are used up.
 */
int client_fill_input(Client *c);
/* True when part of a frame is buffered (a cut-off frame at EOF). */
bool client_has_partial_input(const Client *c);

/* Queue a response (never fails for want of space; grows to its quota,
 * which the relay enforces by pausing input). Return: 0 or -ENOMEM. */
int client_queue_response(Client *c, const struct rdmacm_mux_msg *m);
/* Queue an inbound MAD. Return: 0, or -ENOBUFS when the queue is full. */
int client_queue_mad(Client *c, const struct rdmacm_mux_msg *m);
bool client_responses_full(const Client *c);

/**
 * client_flush() - write queued frames without blocking.
 * Return: 0 when everything was written, -EAGAIN when frames remain,
 * another negative errno when the peer is gone.
 */
int client_flush(Client *c);
uint32_t client_queued(const Client *c);

/* Hand every queued frame to @fn in writing order and empty the queues
 * (for clients without a socket). Return: the number of frames. */
unsigned client_drain(Client *c, void (*fn)(void *userdata, const struct rdmacm_mux_msg *m),
		      void *userdata);


#endif /* RDMACM_MUX_CLIENT_H */
