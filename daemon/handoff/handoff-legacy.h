/* SPDX-License-Identifier: MIT */
/*
 * The raw layout 0.1.0 left in its memfds (its structs' memory, version 1
 * of "RMUXSTAT" and "RMUXSESS"), read so that an upgrade from 0.1.0 keeps
 * every client and session. Frozen: 0.1.0 will never write anything else.
 */
#ifndef RDMACM_MUX_HANDOFF_LEGACY_H
#define RDMACM_MUX_HANDOFF_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "handoff-state.h"

/**
 * handoff_legacy_state_image() - 0.1.0's state (@map, @len bytes) as an
 * image of this format (its clients and counters, with 0.1.0's counter
 * names), in a new buffer *@ret of *@ret_len bytes that
 * handoff_header_check() accepts.
 * Return: 0; -EPROTO when @map is not 0.1.0's state, or is of another
 * device or port than @shape's; -EBADMSG when it is, but its layout does
 * not hold up. @why gets a static reason.
 */
int handoff_legacy_state_image(const void *map, size_t len, const HandoffShape *shape,
			       uint8_t **ret, size_t *ret_len, const char **why);

/**
 * handoff_legacy_sessions() - the session records in 0.1.0's session
 * memfd (@map, @len bytes): *@records, *@n of them, *@record_size bytes
 * each (0.1.0's Session, whose fields are at the offsets this format's
 * session records have).
 * Return: 0; -EPROTO when it is not 0.1.0's; -EBADMSG when its header
 * does not hold up.
 */
int handoff_legacy_sessions(const void *map, size_t len, const void **records,
			    uint32_t *record_size, uint32_t *n, const char **why);

#endif
