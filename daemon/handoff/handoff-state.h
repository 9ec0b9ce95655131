/* SPDX-License-Identifier: MIT */
/*
 * The "state" memfd of the hand-off format (handoff-format.h): one slot
 * per client (its id, capabilities, whether it said HELLO, its GIDs), the
 * counters, the answers owed to clients, the crash-loop guard, and the
 * VMs' state (bytes daemon/vm/ writes and reads; kept twice here).
 * Written in place at every change, so that it is current even after a
 * crash; read back with every field checked, never trusted.
 *
 * A slot is written so that a crash at any point leaves it usable: a GID
 * is written before the count that covers it, a slot or an owed answer is
 * claimed (id set) only after its other fields are written.
 */
#ifndef RDMACM_MUX_HANDOFF_STATE_H
#define RDMACM_MUX_HANDOFF_STATE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "handoff-format.h"

/* What a state is made for: a fresh one has this shape, and a
 * predecessor's is used in place only when it has it too. */
typedef struct HandoffShape {
	const char *dev;
	int port;
	uint32_t n_clients; /* client slots */
	uint32_t max_gids;  /* GIDs per client */
	uint32_t n_owed;    /* owed answers, all clients together */
	uint32_t vms_bytes; /* room for the VMs' state, in each of its copies */
	/* The writer's counters: their stable names (shorter than
	 * HANDOFF_COUNTER_NAME_LEN), values in this order; the caller keeps
	 * the vector for as long as the state. A successor takes each value
	 * over by its name. */
	const char *const *counter_names;
	uint32_t n_counters;
} HandoffShape;

typedef struct HandoffState HandoffState;

/* Called for each item a take-over drops (a client, an owed answer, a
 * counter), with what it is and why. */
typedef void (*HandoffDroppedFn)(void *userdata, const char *what, const char *why);

/**
 * handoff_state_new() - a fresh state of @shape in a new memfd.
 * @pair_id: written into the header; the sessions memfd gets the same
 * Return: 0 or a negative errno.
 */
int handoff_state_new(const HandoffShape *shape, uint64_t pair_id, HandoffState **ret);

/**
 * handoff_state_adopt() - take over the state a predecessor left in @fd.
 * The caller keeps @fd whatever happens (the state keeps a copy when it
 * uses the memfd in place). Of this format and of @shape, the memfd is
 * used in place; of another minor or shape, or of 0.1.0's raw layout
 * (handoff-legacy.c), what holds up is converted into a fresh memfd
 * (*@ret_converted set), and @fd is left as it was. Each client slot,
 * owed answer or counter that does not hold up is dropped alone, and
 * passed to @dropped.
 * Return: 0; -EPROTO when @fd is not a state this version reads (another
 * major, not ours at all) or of another device or port; -EBADMSG when its
 * header does not hold up; another negative errno when it cannot be read
 * or the new memfd cannot be made. @why gets a static reason on failure.
 */
int handoff_state_adopt(int fd, const HandoffShape *shape, HandoffDroppedFn dropped,
			void *userdata, HandoffState **ret, bool *ret_converted, const char **why);
void handoff_state_free(HandoffState *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HandoffState, handoff_state_free)

int handoff_state_fd(const HandoffState *s);
uint64_t handoff_state_pair_id(const HandoffState *s);
/* What wrote it: "rdmacm-mux 0.1.0 (raw layout)" for 0.1.0's. */
const char *handoff_state_writer(const HandoffState *s);
uint32_t handoff_state_slot_count(const HandoffState *s);
/* Slot @i (0-based), or NULL past the end. */
HandoffClientSlot *handoff_state_slot(HandoffState *s, uint32_t i);
/* The counters' values, in the memfd: the shape's n_counters words, in
 * the order of its counter_names. */
uint64_t *handoff_state_counters(HandoffState *s);

/**
 * handoff_state_claim() - a free slot for client @id, cleared.
 * Return: the slot's index, or -ENOSPC.
 */
int handoff_state_claim(HandoffState *s, uint32_t id);
/* Free slot @i. */
void handoff_state_release(HandoffState *s, int i);
void handoff_state_set_hello(HandoffState *s, int i, uint64_t caps);
/* Add @flags (HANDOFF_CLIENT_F_*) to slot @i. */
void handoff_state_add_flags(HandoffState *s, int i, uint32_t flags);
/* The client's GIDs are @gids[0..@n): rewritten in the crash-safe order. */
void handoff_state_set_gids(HandoffState *s, int i, const uint8_t (*gids)[16], uint32_t n);

/**
 * handoff_state_owe() - write down that client @client_id is owed the
 * answer to @req, its @seq-th request in answer order.
 * Return: the record's index, or -ENOSPC.
 */
int handoff_state_owe(HandoffState *s, uint32_t client_id, uint64_t seq,
		      const struct rdmacm_mux_msg *req);
/* The answer of record @i was given (queued): the record goes. */
void handoff_state_owed_clear(HandoffState *s, int i);
/* Every record of client @client_id goes (it left). */
void handoff_state_owed_clear_client(HandoffState *s, uint32_t client_id);
/**
 * handoff_state_owed_take() - the records a predecessor left for client
 * @client_id, oldest first (by seq), as indexes in @ret (cleared first).
 * The caller answers each and clears it.
 */
void handoff_state_owed_take(HandoffState *s, uint32_t client_id, GArray *ret);
/* Record @i (its frame is the request to answer). */
const HandoffOwed *handoff_state_owed(HandoffState *s, int i);

/**
 * handoff_state_vms_peek() - the VMs' state in the state memfd @fd of
 * @dev and @port, read only (nothing is taken over): the VMs are set up
 * before the clients, which handoff_state_adopt() brings back.
 * Return: 0 with *@ret set, to NULL when the memfd has no VMs' state (of
 * 0.1.0, or written before VMs were kept); -EPROTO or -EBADMSG when @fd is
 * not a state handoff_state_adopt() would take, with @why.
 */
int handoff_state_vms_peek(int fd, const char *dev, int port, GBytes **ret, const char **why);
/**
 * handoff_state_vms_write() - @len bytes at @data become the VMs' state,
 * crash-safe: until the last store, a successor reads the previous one.
 * Return: 0, or -ENOSPC when they do not fit the room of the shape.
 */
int handoff_state_vms_write(HandoffState *s, const void *data, size_t len);

/* The crash-loop guard's count of unsettled starts. */
uint32_t handoff_state_guard_starts(const HandoffState *s);
void handoff_state_guard_set_starts(HandoffState *s, uint32_t n);

#endif
