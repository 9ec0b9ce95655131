/* SPDX-License-Identifier: MIT */
/*
 * What the state memfd's own units share (handoff-state.c, and
 * handoff-state-vms.c for its VMS section), and nothing else includes:
 * the HandoffState itself and the calls between them.
 */
#ifndef RDMACM_MUX_HANDOFF_STATE_INTERNAL_H
#define RDMACM_MUX_HANDOFF_STATE_INTERNAL_H

#include "handoff-state.h"

/* A state memfd bigger than this is not one of ours. */
#define HANDOFF_STATE_MAX_BYTES (1ull << 30)

struct HandoffState {
	int fd;
	void *map;
	size_t bytes;
	HandoffHeader *hdr;
	HandoffSection *sec_clients, *sec_counters, *sec_owed, *sec_guard, *sec_vms;
	uint8_t *clients;
	size_t client_size;
	uint32_t n_clients;
	uint32_t max_gids;
	uint8_t *owed;
	size_t owed_size;
	uint32_t n_owed;
	GArray *owed_free; /* indexes of free owed records below the mark, a stack */
	uint32_t owed_used; /* records in use: none, and nothing is scanned */
	uint32_t owed_mark; /* records past it were never used (the section's arg1) */
	HandoffGuard *guard;
	uint64_t vms_sequence; /* the current VMs' copy's (0: none) */
	uint32_t vms_current;  /* its index */
	uint32_t next_free; /* where handoff_state_claim() starts looking */
	const char *const *counter_names; /* the shape's */
	uint32_t n_counters;
	char writer[32];
};

/* ---- handoff-state.c ---- */

/* An item a take-over drops: told to @dropped, when there is one. */
void handoff_state_drop(HandoffDroppedFn dropped, void *userdata, const char *what,
			const char *why);
/* Map the state memfd @fd read-only (*@ret, *@ret_bytes long; the caller
 * unmaps it). Return: 0, or a negative errno with *@why set. */
int handoff_state_map_ro(int fd, void **ret, size_t *ret_bytes, const char **why);

/* ---- handoff-state-vms.c: the VMS section ---- */

/* The section's entry in a fresh state of @shape (its length, records). */
void handoff_vms_shape(const HandoffShape *shape, HandoffSection *e);
/* Carry the current copy of a predecessor's section @src (its bytes at
 * @bytes) into the fresh state @s, unless it does not fit. */
void handoff_vms_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			 HandoffDroppedFn dropped, void *userdata);
/* Which copy of @s's section is current (after a take-over). */
void handoff_vms_rebuild(HandoffState *s);

#endif /* RDMACM_MUX_HANDOFF_STATE_INTERNAL_H */
