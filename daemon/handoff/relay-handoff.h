/* SPDX-License-Identifier: MIT */
/*
 * The relay's side of surviving a restart or a crash (relay-handoff.c):
 * its state in memfds, its client sockets in the fd store, the take-over
 * at start and the planned hand-off at SIGTERM.
 */
#ifndef RDMACM_MUX_RELAY_HANDOFF_H
#define RDMACM_MUX_RELAY_HANDOFF_H

#include <glib.h>

#include "relay.h"

/**
 * relay_handoff_start() - from now on keep the relay's state where a
 * successor finds it: take over what a predecessor left, or start fresh.
 * Call once, right after relay_new(), before any client.
 * @state_fd: the "state" memfd from the fd store, or -1 (taken over)
 * @sessions_fd: the "sessions" memfd, or -1 (taken over)
 * @client_fds: client id -> socket fd from the store, or NULL; every fd in
 *              it is taken over and the table is emptied
 * What does not hold up is dropped with a log line; the daemon never trusts
 * it blindly.
 * Return: 0, or a negative errno when no state could be kept (logged; the
 * relay works on without the guarantee).
 */
int relay_handoff_start(Relay *r, int state_fd, int sessions_fd, GHashTable *client_fds);

/**
 * relay_handoff_prepare() - before a planned exit that hands over: write
 * out every client's queued frames, waiting up to @timeout_ms in all. A
 * client left with half a frame written is disconnected (it would be out
 * of step with the successor).
 */
void relay_handoff_prepare(Relay *r, unsigned timeout_ms);

/* Called for each fd a successor needs, with its name. */
typedef void (*RelayHandoffFdFn)(void *userdata, const char *name, int fd);

/**
 * relay_handoff_export() - the fds a new process needs to take over (the
 * state, the sessions, every client socket), for a re-execution. Without
 * a state kept so far (no fd store), it is written down now.
 */
void relay_handoff_export(Relay *r, RelayHandoffFdFn fn, void *userdata);

#endif
