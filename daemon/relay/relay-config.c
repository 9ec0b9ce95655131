/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's defaults (relay_config_init()): the one place where
 * the daemon's limits, timeouts and sender settings get their values. The
 * daemon's options start from them, and rdmacm-mux --help shows them.
 */
#include "relay.h"

void relay_config_init(RelayConfig *cfg)
{
	*cfg = (RelayConfig){
		.max_clients = 1024,
		.max_clients_per_uid = 0, /* half of max_clients */
		.register_timeout_ms = 15 * 60 * 1000,
		.max_gids = 32,
		.max_sessions = 16384,
		.max_half_open = 1024,
		.max_half_open_per_peer = 256,
		.max_total_half_open = 1u << 16,
		.max_total_sessions = 1u << 20,
		.max_slow_sends = 2,
		.senders = 8,
		.send_fast_ms = 1000,
		.send_fail_ms = 1000,
		/* four times the kernel's longest wait for a neighbour (1 s,
		 * rdma_resolve_ip() in the umad write) */
		.send_timeout_ms = 4000,
		.max_send_queue = 4096,
		.max_queued = 1024,
		.max_pending = 64,
		.max_bad_frames = 8,
		.timeouts_ms = { [SESSION_TIMER_HANDSHAKE] = 120000,
				 [SESSION_TIMER_CLOSING] = 150000,
				 [SESSION_TIMER_SIDR] = 60000 },
	};
}
