/* SPDX-License-Identifier: MIT */
/*
 * The crash-loop guard (relay-guard.c). A start that took a predecessor's
 * state over counts as unsettled until it relays a MAD or runs
 * RELAY_GUARD_SETTLE_USEC; a planned hand-off settles it too. The count
 * of unsettled starts lives in the hand-off state (its GUARD section), so
 * that it survives the crashes it counts. When RELAY_GUARD_STARTS starts
 * in a row did not settle, the state itself may be what kills them (a MAD
 * that crashes the daemon right after it takes its sessions over): that
 * start is told to drop the sessions, keeping the clients and their GIDs.
 */
#ifndef RDMACM_MUX_RELAY_GUARD_H
#define RDMACM_MUX_RELAY_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "handoff-state.h"

/* Unsettled starts after which a start drops the sessions it is given:
 * below systemd's StartLimitBurst=5 of our units. */
#define RELAY_GUARD_STARTS 3u
/* A start has settled when it relayed a MAD, or ran this long. */
#define RELAY_GUARD_SETTLE_USEC (30ull * 1000000)

typedef struct RelayGuard RelayGuard;

/* The work done so far (MADs relayed): a start whose count moved has
 * settled. */
typedef uint64_t (*RelayGuardProgressFn)(void *userdata);

/**
 * relay_guard_new() - count this start, which took @state over (kept by
 * the caller, outliving the guard), as unsettled, and watch it settle in
 * @event's loop: @progress is asked after each dispatch.
 * @ret_trip: set when this start is the one to drop the sessions (counted
 *            as handoff_guard_trips by the caller; logged here)
 * Return: the guard (it settles at once when the loop gives it no event
 * source to wait with).
 */
RelayGuard *relay_guard_new(sd_event *event, HandoffState *state, RelayGuardProgressFn progress,
			    void *userdata, bool *ret_trip);
/* This start has settled (@how, for the log), whatever it did: the count
 * starts over. NULL-safe: a start that took nothing over has no guard. */
void relay_guard_settle(RelayGuard *g, const char *how);
void relay_guard_free(RelayGuard *g);

#endif /* RDMACM_MUX_RELAY_GUARD_H */
