/* SPDX-License-Identifier: MIT */
/*
 * Drive a Relay in-process, with no sockets and no umad device: for the
 * stateful fuzzer and unit tests of the relay logic. The relay runs the
 * same code as in the daemon; only the edges are replaced: clients are
 * "virtual" (no fd: their output stays queued until drained), the port is
 * a fake (umad_port_new_fake), wire MADs are injected, and time is set by
 * the caller.
 */
#ifndef RDMACM_MUX_RELAY_DRIVER_H
#define RDMACM_MUX_RELAY_DRIVER_H

#include "relay.h"

/* Use @now (monotonic usec) as the relay's clock from now on. */
void relay_driver_set_time(Relay *r, uint64_t now);

/* Make wire ids reproducible from @seed (they are random otherwise). */
void relay_driver_seed_wire_ids(Relay *r, uint32_t seed);

/* A client with no socket. Return: its id (> 0), or 0 at the limit. */
uint32_t relay_driver_add_client(Relay *r);
/* The client leaves (as on disconnect). */
void relay_driver_remove_client(Relay *r, uint32_t client_id);
/* Whether the client is still connected (bad frames can drop it). */
bool relay_driver_has_client(const Relay *r, uint32_t client_id);
/* Whether the relay stopped reading the client until it reads its
 * responses (relay_driver_drain()). */
bool relay_driver_client_paused(Relay *r, uint32_t client_id);

/**
 * relay_driver_request() - the client sends one frame.
 * Return: 0, or -ENOENT when there is no such client.
 */
int relay_driver_request(Relay *r, uint32_t client_id, const struct rdmacm_mux_msg *m);

/* One MAD arrives from the wire (header as the kernel fills it). */
void relay_driver_wire_mad(Relay *r, const UmadBuffer *buf, size_t mad_len);

/* Take every frame queued to a client, oldest first, in writing order
 * (responses before inbound MADs). Return: the number of frames. */
unsigned relay_driver_drain(Relay *r, uint32_t client_id,
			    void (*fn)(void *userdata, const struct rdmacm_mux_msg *m),
			    void *userdata);

/* Run the session timers up to the current time. Return: sessions removed. */
unsigned relay_driver_run_timers(Relay *r);

/**
 * relay_check_invariants() - verify the relay's internal consistency: every
 * session has a live owner and is on that owner's list, no wire id is
 * mapped twice, every GID has exactly one owner that lists it, queues
 * respect their quotas, and the counters agree with the tables.
 * Return: NULL, or a description of the first violation (static storage).
 */
const char *relay_check_invariants(Relay *r);

#endif /* RDMACM_MUX_RELAY_DRIVER_H */
