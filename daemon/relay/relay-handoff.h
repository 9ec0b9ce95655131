/* SPDX-License-Identifier: MIT */
/*
 * The relay's side of surviving a restart or a crash (relay-handoff.c):
 * its state in memfds (the hand-off format, handoff-format.h; the VMs'
 * state rides in it, written by daemon/vm/), its client
 * sockets in the fd store, the take-over at start (in place, or converted
 * from another version), the answers owed after a crash, the crash-loop
 * guard, and the planned hand-off at SIGTERM.
 */
#ifndef RDMACM_MUX_RELAY_HANDOFF_H
#define RDMACM_MUX_RELAY_HANDOFF_H

#include <glib.h>

#include "relay.h"

/* What a predecessor left in the fd store (or passed at a re-execution). */
typedef struct RelayHandoffFds {
	int state;	  /* "state", or -1 */
	int state_alt;	  /* "state~", or -1 */
	int sessions;	  /* "sessions", or -1 */
	int sessions_alt; /* "sessions~", or -1 */
	GHashTable *clients; /* client id -> socket fd, or NULL */
} RelayHandoffFds;

/**
 * relay_handoff_start() - from now on keep the relay's state where a
 * successor finds it: take over what a predecessor left, or start fresh.
 * Call once, right after relay_new(), before any client.
 * @fds: every fd in it is taken over (set to -1, the table emptied). Of
 *       a kind's two names, the memfd of the higher generation is read
 *       (a crash left both while a converted one replaced the other).
 * A predecessor's memfd of this format and shape is used in place; one of
 * another version (0.1.0's raw layout, another minor) is converted into a
 * fresh memfd, stored under the kind's other name before the old one is
 * removed: a crash at any step leaves a usable state. What does not hold up is dropped item
 * by item with a log line: a client, a session, an owed answer.
 * Return: 0, or a negative errno when no state could be kept (logged; the
 * relay works on without the guarantee).
 */
int relay_handoff_start(Relay *r, RelayHandoffFds *fds);

/**
 * relay_handoff_peek_vms() - the VMs' state in the state memfd of @fds
 * that relay_handoff_start() will take, read before it does (the VMs are
 * set up before their clients are taken over). Nothing is taken over.
 * Return: its bytes (daemon/vm/vm-state.h), or NULL when there are none.
 */
GBytes *relay_handoff_peek_vms(Relay *r, const RelayHandoffFds *fds);

/**
 * relay_handoff_write_vms() - keep @len bytes at @data as the VMs' state,
 * where a successor finds it (the state memfd's VMS section).
 * Return: 0; -ENODEV when no state is kept (no fd store, and no
 * re-execution under way); -ENOSPC when it does not fit the room
 * relay_set_vms() gave.
 */
int relay_handoff_write_vms(Relay *r, const void *data, size_t len);

/**
 * relay_handoff_prepare() - before a planned exit that hands over: write
 * out every client's queued frames, waiting up to @timeout_ms in all. A
 * client left with half a frame written is disconnected (it would be out
 * of step with the successor). A planned hand-off is not a crash: the
 * crash-loop guard starts over.
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
