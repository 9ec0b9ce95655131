/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer for the daemon's request validation: the input is cut into
 * 360-byte frames, each handed to the relay (relay_driver_request) as a
 * client would send it; a trailing partial frame is dropped, as the daemon
 * drops a frame cut off by a disconnect. Two virtual clients start with
 * GIDs 10.0.1.1 and 10.0.1.2 registered, so MAD frames get past the
 * ownership check. Byte 28 of each frame (padding the daemon ignores)
 * steers the harness: bits 0-1 pick the client (3 = connect a new one),
 * bit 2 delivers the frame's umad part as a wire MAD instead.
 *
 * Checked after every frame: relay_check_invariants(); exactly one
 * response per request, a RESP echoing op_code and sgid, with an err_code
 * the protocol allows; a MAD request answered OK was sent exactly once,
 * one refused was not sent; inbound MAD frames are well formed.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-support.h"

#define MAX_CLIENTS 4

typedef struct Ctx {
	Relay *relay;
	unsigned sends;
	unsigned responses;
	const struct rdmacm_mux_msg *req;
} Ctx;

static int count_send(void *userdata, UmadBuffer *buf, size_t len)
{
	Ctx *x = userdata;

	fuzz_check(len >= 24 && len <= 256, "send of %zu bytes", len);
	fuzz_check(buf->hdr.addr.qpn == htobe32(1), "send to QPN %u", be32toh(buf->hdr.addr.qpn));
	x->sends++;
	return 0;
}

static void format_event(void *userdata, const RelayEvent *ev)
{
	char line[512];

	(void)userdata;
	fuzz_check(ev->mad_len <= 256, "event with mad_len %zu", ev->mad_len);
	relay_format_event(ev, line, sizeof(line));
	fuzz_check(memchr(line, '\0', sizeof(line)) != NULL, "unterminated event line");
}

static void check_frame(void *userdata, const struct rdmacm_mux_msg *m)
{
	Ctx *x = userdata;
	static const uint8_t zero[RDMACM_MUX_MAD_SIZE];

	if (m->hdr.msg_type == RDMACM_MUX_MSG_TYPE_RESP) {
		int32_t e = m->hdr.err_code;

		fuzz_check(x->req != NULL, "a response with no request");
		fuzz_check(x->responses == 0, "two responses to one request");
		fuzz_check(m->hdr.op_code == x->req->hdr.op_code, "response op_code 0x%x to 0x%x",
			   m->hdr.op_code, x->req->hdr.op_code);
		fuzz_check(memcmp(m->hdr.sgid.raw, x->req->hdr.sgid.raw, 16) == 0,
			   "response sgid differs");
		fuzz_check(e <= 4 && e >= -4095, "err_code %d", e);
		x->responses++;
		return;
	}
	fuzz_check(m->hdr.msg_type == RDMACM_MUX_MSG_TYPE_REQ &&
			   m->hdr.op_code == RDMACM_MUX_OP_CODE_MAD && m->hdr.err_code == 0,
		   "inbound frame type %u op 0x%x", m->hdr.msg_type, m->hdr.op_code);
	fuzz_check(m->umad_len > 24 && m->umad_len <= 256, "inbound umad_len %d", m->umad_len);
	fuzz_check(memcmp(m->umad.mad + m->umad_len, zero, (size_t)(256 - m->umad_len)) == 0,
		   "inbound frame has bytes past umad_len");
}

static void add_client(Ctx *x, uint32_t *ids, unsigned *n)
{
	uint32_t id;

	if (*n >= MAX_CLIENTS)
		return;
	id = relay_driver_add_client(x->relay);
	fuzz_check(id != 0, "client refused below the limit");
	ids[(*n)++] = id;
}

static void request(Ctx *x, uint32_t id, const struct rdmacm_mux_msg *m)
{
	x->req = m;
	x->sends = 0;
	x->responses = 0;
	fuzz_check(relay_driver_request(x->relay, id, m) == 0, "request to a live client failed");
	(void)relay_driver_drain(x->relay, id, check_frame, x);
	if (relay_driver_has_client(x->relay, id) || x->responses) {
		/* A client dropped for bad frames loses its queued answers. */
		fuzz_check(x->responses == 1, "%u responses to one request", x->responses);
	}
	if (m->hdr.msg_type == RDMACM_MUX_MSG_TYPE_REQ && m->hdr.op_code == RDMACM_MUX_OP_CODE_MAD)
		fuzz_check(x->sends <= 1, "one MAD request sent %u MADs", x->sends);
	else
		fuzz_check(x->sends == 0, "a non-MAD request sent a MAD");
	x->req = NULL;
}

/* Small limits, every budget the sessions' own, no register timeout. */
static void configure(RelayConfig *cfg)
{
	relay_driver_config(cfg, MAX_CLIENTS, 4, 8, 4);
	cfg->max_half_open = cfg->max_half_open_per_peer = 8;
	cfg->max_total_sessions = cfg->max_total_half_open = UINT32_MAX;
	cfg->register_timeout_ms = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static Ctx x;
	static const FuzzRelaySetup setup = {
		.configure = configure,
		.senders = 2,
		.send = count_send,
		.sink = format_event,
		.userdata = &x,
	};
	uint32_t ids[MAX_CLIENTS];
	unsigned n = 0;
	const char *bad;

	x = (Ctx){ .relay = fuzz_relay_begin(&setup) };
	/* Frames, not timing: every write goes out as it is handed over. */
	relay_driver_set_send_at_once(x.relay, true);
	for (int i = 0; i < 2; i++) {
		struct rdmacm_mux_msg reg = { .hdr.op_code = RDMACM_MUX_OP_CODE_REG };

		add_client(&x, ids, &n);
		memcpy(reg.hdr.sgid.raw, fuzz_port_gid[1 + i], 16);
		request(&x, ids[i], &reg);
	}

	for (size_t off = 0; off + sizeof(struct rdmacm_mux_msg) <= size;
	     off += sizeof(struct rdmacm_mux_msg)) {
		struct rdmacm_mux_msg m;
		uint8_t steer = data[off + 28];

		memcpy(&m, data + off, sizeof(m));
		if (steer & 4) {
			UmadBuffer buf;
			size_t len = m.umad_len < 0 ? 0 : (size_t)m.umad_len;

			buf.hdr = m.umad.hdr;
			memcpy(buf.mad, m.umad.mad, sizeof(buf.mad));
			relay_driver_wire_mad(x.relay, &buf, len);
		} else if ((steer & 3) == 3 || n == 0) {
			add_client(&x, ids, &n);
		} else {
			unsigned i = (steer & 3) % n;

			request(&x, ids[i], &m);
			if (!relay_driver_has_client(x.relay, ids[i]))
				ids[i] = ids[--n];
		}
		bad = relay_check_invariants(x.relay);
		fuzz_check(bad == NULL, "relay invariant: %s", bad);
	}
	for (unsigned i = 0; i < n; i++)
		(void)relay_driver_drain(x.relay, ids[i], check_frame, &x);
	fuzz_relay_end(x.relay);
	return 0;
}
