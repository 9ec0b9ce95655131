/* SPDX-License-Identifier: MIT */
/*
 * A client connection as transport: the socket, input framing, the output
 * queues, and the peer's credentials. Nothing here knows the protocol's
 * meaning; the relay embeds a Client in its own per-client state.
 *
 * The socket carries fixed-size frames with no length prefix. Input is
 * taken from the socket only in whole frames (FIONREAD), so that no byte of
 * a frame is ever held only in this process: a successor after a crash or
 * a restart finds the client's stream in step. Output goes through two
 * bounded queues: responses first, then inbound MADs. A response may
 * overtake inbound MADs that are still queued (never a frame half
 * written), which is what QEMU needs: it reads the response with one
 * blocking read right after its request. Responses are never dropped; when
 * too many are pending the relay stops reading that client instead.
 * Inbound MADs are dropped (and counted by the caller) when their queue is
 * full, so a client that stops reading never holds anybody else up.
 */
#ifndef RDMACM_MUX_CLIENT_H
#define RDMACM_MUX_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rdmacm-mux-proto.h"

/*
 * Frames one read may take in (and the relay may look at ahead of time).
 * The buffer starts at CLIENT_INPUT_FRAMES_FIRST and grows to this when a
 * read finds more waiting than fits: a QEMU, which waits for each answer,
 * keeps the small one; a busy client has 64 frames taken per recv() and
 * their 64 responses written in one sendmsg().
 */
#define CLIENT_INPUT_FRAMES 64
#define CLIENT_INPUT_FRAMES_FIRST 4

typedef struct FrameQueue {
	struct rdmacm_mux_msg *frames;
	uint32_t cap;  /* allocated slots, grows on demand */
	uint32_t head; /* index of the oldest frame */
	uint32_t len;
	uint32_t max;	  /* quota */
	uint64_t popped;  /* frames taken from the head so far */
	uint32_t reserved; /* responses kept a place for (client_reserve_response()) */
} FrameQueue;

typedef struct Client {
	int fd; /* -1 for a client without a socket (the relay driver's) */
	struct ucred cred;
	char comm[32];
	uint64_t connected_usec;

	/* Whole frames sit at multiples of the frame size from the start. */
	struct rdmacm_mux_msg *in;
	uint32_t in_cap; /* frames in[] holds, CLIENT_INPUT_FRAMES at most */
	size_t in_len;	 /* bytes in in[] */
	size_t in_off; /* bytes of in[] already handed out */
	bool input_drained;  /* the last recv() did not fill the buffer */
	bool input_refilled; /* frames came in since client_take_refill() */
	int in_error;	     /* the socket's end (-EPIPE) or error, once seen */
	bool in_cut;	     /* it ended with part of a frame in the socket */
	/* Part of a frame waits in the socket: level-triggered readiness would
	 * wake the loop for it without end (the relay watches edges then). */
	bool input_partial;

	FrameQueue resp;
	FrameQueue mad;
	int out_src;	/* queue whose head is partly written: 0, 1 resp, 2 mad */
	size_t out_off; /* bytes of that frame already written */
} Client;

/**
 * client_init() - set up @c for @fd (taken over; -1 for none) and read the
 * peer's credentials (SO_PEERCRED) and command name.
 * @max_queued: inbound MAD frames that may wait before drops
 * @max_pending: responses the relay lets wait before it pauses input
 */
void client_init(Client *c, int fd, uint32_t max_queued, uint32_t max_pending);
/* Close the fd and free the queues. */
void client_deinit(Client *c);

/**
 * client_next_frame() - the next whole frame from the socket: *@frame
 * points into @c's input buffer, and stays valid until the next call of
 * client_next_frame() or client_fill_input() on @c, or @c's end; the
 * caller may change it (a response is built over its request). The
 * relay's path for every frame a client sends.
 * Return: 1 with *@frame set; 0 when no whole frame is available now;
 * -EPIPE at end of stream (client_has_partial_input() tells whether a
 * frame was cut short); another negative errno on a socket error.
 */
int client_next_frame(Client *c, struct rdmacm_mux_msg **frame);
/**
 * client_fill_input() - read from the socket unless a whole frame is
 * buffered already; client_next_frame() does this when it needs to, the
 * relay ahead of time to see several clients' frames at once.
 * Return: 0 (whatever was read, possibly nothing), or the error
 * client_next_frame() will return once the buffered frames are used up.
 */
int client_fill_input(Client *c);
/* True when part of a frame is buffered (a cut-off frame at EOF). */
bool client_has_partial_input(const Client *c);
/**
 * client_peek_frames() - the whole frames buffered and not yet read, in
 * order, without consuming them.
 * Return: their number; *@ret points at the first (valid until the next
 * read or fill).
 */
unsigned client_peek_frames(const Client *c, const struct rdmacm_mux_msg **ret);
/* Whether a read brought in new frames since the last call (and clear it). */
bool client_take_refill(Client *c);

/* Queue a response (never fails for want of space; grows to its quota,
 * which the relay enforces by pausing input). Return: 0 or -ENOMEM. */
int client_queue_response(Client *c, const struct rdmacm_mux_msg *m);
/**
 * client_reserve_response() - keep the next response's place, for a
 * request whose answer comes later (a MAD still being sent). Responses
 * after it wait for it, and so do inbound MADs, so the order a client sees
 * is the order of its requests.
 * Return: 0 with *@token set, or -ENOMEM.
 */
int client_reserve_response(Client *c, uint64_t *token);
/* Put the response @m in the place @token kept. */
void client_fill_response(Client *c, uint64_t token, const struct rdmacm_mux_msg *m);
/* Whether any frame may be written now. */
bool client_has_output(Client *c);
/**
 * client_queue_mad_slot() - queue an inbound MAD that the caller writes
 * into *@slot, whole, before anything else touches @c (the relay builds
 * each inbound frame in its place: one copy of it less per MAD).
 * Return: 0, -ENOBUFS when the queue is full, or -ENOMEM.
 */
int client_queue_mad_slot(Client *c, struct rdmacm_mux_msg **slot);
bool client_responses_full(const Client *c);

/**
 * client_flush() - write queued frames without blocking.
 * Return: 0 when everything was written, -EAGAIN when frames remain,
 * another negative errno when the peer is gone.
 */
int client_flush(Client *c);
/* Frames waiting to be written: responses and inbound MADs. */
uint32_t client_queued(const Client *c);
/* Inbound MAD frames waiting, and the queue's quota. */
uint32_t client_queued_mads(const Client *c);
uint32_t client_mad_quota(const Client *c);

/* Hand every frame that may be written now to @fn, in writing order, and
 * take it off its queue (for clients without a socket); a reserved
 * response stops it, as it stops client_flush(). Return: the number of
 * frames. */
unsigned client_drain(Client *c, void (*fn)(void *userdata, const struct rdmacm_mux_msg *m),
		      void *userdata);

#endif /* RDMACM_MUX_CLIENT_H */
