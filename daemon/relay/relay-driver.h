/* SPDX-License-Identifier: MIT */
/*
 * Drive a Relay in-process, with no sockets, no umad device and no
 * processes: for the stateful fuzzer and unit tests of the relay logic.
 * The relay runs the same code as in the daemon; only the edges differ,
 * and they are chosen when the relay is made (relay_driver_new()):
 *   - clients are "virtual" (no fd): the frames they send wait in their
 *     input buffer as they would in a socket, and what the relay writes to
 *     them stays queued until drained;
 *   - the port is a fake (umad-port-fake.h) and wire MADs are injected;
 *   - time is the caller's (relay_driver_set_time());
 *   - the senders are stand-ins: a MAD handed to one stays "in flight"
 *     until the caller says how its write ends (relay_driver_send_end()),
 *     or a stop cuts it short.
 */
#ifndef RDMACM_MUX_RELAY_DRIVER_H
#define RDMACM_MUX_RELAY_DRIVER_H

#include "relay.h"
#include "umad-port-fake.h"

/**
 * relay_driver_new() - relay_new() with the driver's clock (starting at
 * 1 s) and @senders stand-in senders (cfg->senders is ignored).
 * Return: 0 or a negative errno.
 */
int relay_driver_new(sd_event *event, UmadPort *port, const RelayConfig *cfg, unsigned senders,
		     Relay **ret);

/*
 * The configuration of a small relay for tests: relay_config_init() with
 * @max_clients clients of @max_gids GIDs and @max_sessions sessions each,
 * @max_queued inbound MADs queued per client, and short session timers (1 s
 * handshake, 2 s closing, 0.5 s SIDR).
 */
void relay_driver_config(RelayConfig *cfg, uint32_t max_clients, uint32_t max_gids,
			 uint32_t max_sessions, uint32_t max_queued);

/**
 * relay_driver_new_fake() - the unit tests' relay: relay_driver_new() with
 * two stand-in senders, on a new event loop (*@ret_event) and a fake port
 * fake0/1 (RoCE, its GID table read from $SYSFS_PATH) whose writes go to
 * @send (umad_port_new_fake()).
 * Return: 0 or a negative errno.
 */
int relay_driver_new_fake(const RelayConfig *cfg, UmadPortFakeSendFn send, void *userdata,
			  sd_event **ret_event, Relay **ret);

/* Free what relay_driver_new_fake() made. */
void relay_driver_free_fake(Relay *r, sd_event *event);

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
 * responses (relay_driver_drain()) or a send is done. */
bool relay_driver_client_paused(Relay *r, uint32_t client_id);
/* Frames the client sent that the relay has not read yet. */
unsigned relay_driver_client_unread(Relay *r, uint32_t client_id);
/* The client's MADs with the senders: their answers' places are kept. */
unsigned relay_driver_client_waiting(Relay *r, uint32_t client_id);

/**
 * relay_driver_request() - the client sends one frame. The relay reads it
 * at once unless it stopped reading the client; then it waits, behind the
 * others, as in a socket.
 * Return: 0; -ENOENT when there is no such client; -EAGAIN when the
 * client has CLIENT_INPUT_FRAMES frames unread already (drain it first).
 */
int relay_driver_request(Relay *r, uint32_t client_id, const struct rdmacm_mux_msg *m);

/* One MAD arrives from the wire (header as the kernel fills it). */
void relay_driver_wire_mad(Relay *r, const UmadBuffer *buf, size_t mad_len);

/* Take every frame queued to a client, oldest first, in writing order
 * (responses before inbound MADs); then the relay reads the frames that
 * waited, if it may. Return: the number of frames taken. */
unsigned relay_driver_drain(Relay *r, uint32_t client_id,
			    void (*fn)(void *userdata, const struct rdmacm_mux_msg *m),
			    void *userdata);

/* Copy the live sessions, in the table's order, into @out (room for
 * @max), as relay_foreach_session() would show them. Return: how many
 * there are (may be more than @max). */
uint32_t relay_driver_sessions(Relay *r, Session *out, uint32_t max);

/* Run the session timers up to the current time. Return: sessions removed. */
unsigned relay_driver_run_timers(Relay *r);

/* ---- the stand-in senders ---- */

/* How a write in flight ends (relay_driver_send_end()). */
typedef enum RelayDriverSendEnd {
	RELAY_DRIVER_SEND_WRITE,   /* written on the port: its send decides */
	RELAY_DRIVER_SEND_FAIL,	   /* the write fails with the given errno */
	RELAY_DRIVER_SEND_LOSE,	   /* the sender dies in the middle of it */
	RELAY_DRIVER_SEND_TIMEOUT, /* past its deadline: the sender is killed */
} RelayDriverSendEnd;

/* MADs a stand-in sender has (in flight), oldest first. */
unsigned relay_driver_sends_in_flight(Relay *r);
/* The MAD of write @i in flight, as it goes on the wire, or NULL. */
const UmadBuffer *relay_driver_send_peek(Relay *r, unsigned i, size_t *mad_len);
/**
 * relay_driver_send_end() - write @i in flight ends as @how says (@err:
 * the negative errno of RELAY_DRIVER_SEND_FAIL). A lost or killed sender
 * is replaced at once, as the daemon's are.
 * Return: 0, or -ENOENT when there is no write @i.
 */
int relay_driver_send_end(Relay *r, unsigned i, RelayDriverSendEnd how, int err);
/* How many stand-in senders are live (0: none, and none on its way: a
 * MAD that would wait for one answers -EAGAIN). Writes in flight stay. */
void relay_driver_set_senders(Relay *r, unsigned live);

/* From now on a MAD handed to a sender is written at once, as by a sender
 * that never waits (@at_once), or stays in flight (the default). */
void relay_driver_set_send_at_once(Relay *r, bool at_once);

/**
 * relay_driver_handoff() - what the daemon does at a planned restart:
 * stop the senders (writes in flight answer -ETIMEDOUT, the MADs queued
 * for them -EAGAIN) and answer every frame the clients sent and the relay
 * did not read (-EAGAIN). The relay takes no more work afterwards.
 */
void relay_driver_handoff(Relay *r);

/**
 * relay_driver_reset() - bring the relay back to what relay_driver_new()
 * made, for the next run of a fuzzer without the cost of a new one: every
 * client goes (with its GIDs, sessions and queues), the session table and
 * the sender's policy are made anew, the counters, client ids and clock
 * start over, the senders are as many as at the start and hold writes in
 * flight again. What stays: the port, the event sinks, the configuration,
 * and the sizes the relay's arrays grew to.
 * Return: 0; -EBUSY when the relay cannot be brought back (after a
 * hand-off, with a write in flight or a MAD queued for the senders, or
 * with VMs, whose counters are their table's):
 * free it and make a new one; -ENOMEM.
 */
int relay_driver_reset(Relay *r);

/*
 * How many times the calls above that may change the relay were made.
 * Nothing else changes it (no event loop runs it), so a check made when
 * this count has not moved since the last one would find what it found.
 */
uint64_t relay_driver_actions(const Relay *r);

/**
 * relay_check_invariants() - verify the relay's internal consistency: every
 * session has a live owner and is on that owner's list, no wire id is
 * mapped twice, every GID has exactly one owner that lists it, queues
 * respect their quotas, and the counters agree with the tables.
 * Return: NULL, or a description of the first violation (static storage).
 */
const char *relay_check_invariants(Relay *r);
/* relay_check_invariants() but for the sweep of the session table's
 * indexes (session_table_check()), the part whose cost grows with the
 * table's capacity: what is left costs a walk of the clients and their
 * sessions, for a check after every step of a fuzzer, with the whole one
 * now and then. */
const char *relay_check_invariants_cheap(Relay *r);

#endif /* RDMACM_MUX_RELAY_DRIVER_H */
