/* SPDX-License-Identifier: MIT */
/*
 * The preload's one helper thread: it writes packets into port FIFOs later
 * than umad_send returns (timeout echoes and retransmissions, delayed MADs,
 * MADs held back for reordering). Jobs of one umad fd share an owner id.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fabric.h"

/**
 * Writes one fixed-size packet into a FIFO fd. When the FIFO is full it waits
 * up to SIM_FULL_WAIT_MS for room, as a slow receiver would make the kernel
 * queue grow, then gives up. Returns 0 or -errno.
 */
int sim_fifo_put(int fd, const void *pkt);

/** Opens a FIFO for writing; O_RDWR so that a dead reader never raises SIGPIPE. */
int sim_fifo_open_writer(const char *path);

#define SIM_FULL_WAIT_MS 200

/** Writes @pkt into @fifo after @delay_ms. */
void sim_defer_deliver(uint64_t owner, const char *fifo, const void *pkt, unsigned delay_ms);

/**
 * Arms the kernel's send timeout for a MAD sent with timeout_ms > 0: it is
 * re-sent to @dst (NULL: it went nowhere) every @timeout_ms, @retries times,
 * then @echo is written into @own_fifo. Returns -EINVAL when the same TID and
 * class are still in flight for @owner, as the kernel's duplicate check does.
 */
int sim_defer_timeout(uint64_t owner, uint64_t tid, uint8_t mclass, const char *dst,
		      const void *data, const char *own_fifo, const void *echo,
		      unsigned timeout_ms, unsigned retries);

/** A response with this TID arrived: the request neither retries nor times out. */
void sim_defer_cancel(uint64_t owner, uint64_t tid, uint8_t mclass);

/** Holds @pkt back; it goes out after the next send of @owner, or after @window_ms. */
void sim_defer_hold(uint64_t owner, const char *fifo, const void *pkt, unsigned window_ms);

/** Takes the held packet of @owner back, if any. @fifo must hold PATH_MAX bytes. */
bool sim_defer_take_held(uint64_t owner, char *fifo, void *pkt);

/** True while a send of @owner with this TID and class waits for its timeout. */
bool sim_defer_in_flight(uint64_t owner, uint64_t tid, uint8_t mclass);

/** True when @owner has a packet held back for reordering. */
bool sim_defer_has_held(uint64_t owner);

/** Drops every job of @owner (its fd was closed). */
void sim_defer_forget(uint64_t owner);
