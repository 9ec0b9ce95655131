/* SPDX-License-Identifier: MIT */
/*
 * Send-and-wait through librdmacm-mux, for test programs: one CM MAD from a
 * registered GID to a destination, and the daemon's verdict on it. libc and
 * the client library only (the QEMU test's responder runs in a bare guest).
 */
#ifndef RDMACM_MUX_TEST_MUX_SEND_H
#define RDMACM_MUX_TEST_MUX_SEND_H

#include <stddef.h>
#include <stdint.h>

#include "rdmacm-mux.h"

/**
 * mux_send_mad_wait() - send @mad from @sgid to @dest (QPN 1, a GRH with
 * hop limit 64) and wait for the daemon's answer.
 * @mux: a connected handle that registered @sgid
 * @sgid: the sender's GID
 * @dest: the destination GID
 * @mad: the MAD, @len bytes
 * @timeout_ms: how long to wait for the answer
 * @verdict: out: the daemon's verdict (0, or a negative errno)
 *
 * Return: 0 when the request went out and was answered (*verdict says how),
 * or the library's negative errno from sending or waiting.
 */
int mux_send_mad_wait(struct rdmacm_mux *mux, const uint8_t sgid[16], const uint8_t dest[16],
		      const uint8_t *mad, size_t len, int timeout_ms, int *verdict);

#endif
