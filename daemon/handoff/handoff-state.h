/* SPDX-License-Identifier: MIT */
/*
 * The clients' state a successor takes over, in a memfd kept in the fd
 * store: one fixed slot per client (its id, capabilities, whether it said
 * HELLO, its GIDs) and the counters. Written in place at every change, so
 * that it is current even after a crash; read back with every field
 * checked, never trusted.
 *
 * A slot is written so that a crash at any point leaves it usable: a GID
 * is written before the count that covers it, and a slot is claimed (id
 * set) only after its other fields are cleared.
 */
#ifndef RDMACM_MUX_HANDOFF_STATE_H
#define RDMACM_MUX_HANDOFF_STATE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* Bumped whenever the layout changes; a successor refuses another. */
#define HANDOFF_STATE_VERSION 1u

#define HANDOFF_F_HELLO 0x1u
#define HANDOFF_F_C1_LOGGED 0x2u /* its "own GID in addr.gid" was logged */

typedef struct HandoffSlot {
	uint32_t id; /* 0: free */
	uint32_t flags;
	uint64_t caps;
	uint32_t n_gids;
	uint32_t reserved;
	uint8_t gids[][16]; /* max_gids of them */
} HandoffSlot;

typedef struct HandoffState HandoffState;

/**
 * handoff_state_new() - a fresh state for @dev port @port with @n_slots
 * slots of @max_gids GIDs, in a new memfd.
 * @counters_size: bytes kept for the counters (handoff_state_counters())
 */
int handoff_state_new(const char *dev, int port, uint32_t n_slots, uint32_t max_gids,
		      size_t counters_size, HandoffState **ret);
/**
 * handoff_state_adopt() - take over the state a predecessor left in @fd
 * (the fd is taken over). Refused (-EPROTO, with a log line saying why)
 * when it is of another version or layout, or of another device or port.
 * Slots that do not hold up are cleared (*@ret_cleared counts them).
 */
int handoff_state_adopt(int fd, const char *dev, int port, uint32_t max_gids,
			size_t counters_size, uint32_t *ret_cleared, HandoffState **ret);
void handoff_state_free(HandoffState *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HandoffState, handoff_state_free)

int handoff_state_fd(const HandoffState *s);
uint32_t handoff_state_slot_count(const HandoffState *s);
/* Slot @i (0-based), or NULL past the end. */
HandoffSlot *handoff_state_slot(HandoffState *s, uint32_t i);
/* The counters' bytes, in the memfd. */
void *handoff_state_counters(HandoffState *s);

/**
 * handoff_state_claim() - a free slot for client @id, cleared.
 * Return: the slot's index, or -ENOSPC.
 */
int handoff_state_claim(HandoffState *s, uint32_t id);
/* Free slot @i. */
void handoff_state_release(HandoffState *s, int i);
void handoff_state_set_hello(HandoffState *s, int i, uint64_t caps);
/* Add @flags (HANDOFF_F_*) to slot @i. */
void handoff_state_add_flags(HandoffState *s, int i, uint32_t flags);
/* The client's GIDs are @gids[0..@n): rewritten in the crash-safe order. */
void handoff_state_set_gids(HandoffState *s, int i, const uint8_t (*gids)[16], uint32_t n);

#endif
