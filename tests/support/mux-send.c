/* SPDX-License-Identifier: MIT */
/* Owns the test programs' send-and-wait through librdmacm-mux (mux-send.h). */
#include "mux-send.h"

#include <arpa/inet.h>
#include <string.h>

int mux_send_mad_wait(struct rdmacm_mux *mux, const uint8_t sgid[16], const uint8_t dest[16],
		      const uint8_t *mad, size_t len, int timeout_ms, int *verdict)
{
	struct rdmacm_mux_mad_addr addr = { 0 };
	struct rdmacm_mux_response resp;
	uint32_t ticket;
	int r;

	addr.qpn = htonl(1);
	addr.grh_present = 1;
	addr.hop_limit = 64;
	memcpy(addr.gid, dest, sizeof(addr.gid));
	r = rdmacm_mux_send_mad(mux, sgid, &addr, mad, len, &ticket);
	if (r == 0)
		r = rdmacm_mux_wait(mux, ticket, timeout_ms, &resp);
	if (r == 0)
		*verdict = resp.error;
	return r;
}
