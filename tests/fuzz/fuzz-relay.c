/* SPDX-License-Identifier: MIT */
/*
 * Stateful fuzzer of the whole relay (daemon/relay/relay-driver.h). The input is
 * a program; each step is one event, and after every step that acted on the
 * relay (an ADD refused at the client limit does not) the relay's own
 * invariants (relay_check_invariants_cheap(), and the whole
 * relay_check_invariants() every 16th time, at the start and at the end)
 * and this harness's model must hold. The relay is the process's, reset
 * between inputs (fuzz-support.h); check-isolation.sh shows that an input
 * runs the same alone and after others.
 *
 * Program (a byte that runs out reads as 0):
 *   op % 17:
 *    0 ADD                    connect a virtual client
 *    1 REMOVE c               client c disconnects
 *    2 REG c g / 3 UNREG c g  register / unregister GID g
 *    4 MAD c g d a l r f [x]  client c sends attribute a from GID g to d,
 *                             LocalCommID (SIDR: RequestID) from l,
 *                             RemoteCommID from r, flags f (see fuzz_mad_build)
 *    5 WIRE a l r f h p [x]   a MAD arrives: header h, from peer GID p
 *    6 TIME t                 advance the clock, run the timers
 *    7 DRAIN c                take client c's queued frames
 *    8 RAW c <360 bytes>      client c sends a raw frame
 *    9 HELLO c caps           extension handshake (bit 7: bad magic)
 *   10 STATS c                CLIENT_STATS request
 *   11 FAIL n                 the next n%4 sends fail (-EIO)
 *   12 RAWWIRE h len <bytes>  a raw wire MAD of len bytes
 *   13 FORGE s a v            a hostile host aims attribute a at live
 *                             session s (by position), with one thing
 *                             wrong (v % 5): nothing, the sender's
 *                             LocalCommID, its GID, the local GID it
 *                             arrives on, or RemoteCommID 0 (found by
 *                             the peer's id instead)
 *   14 SEND i h e             the write i (by position) a sender has in
 *                             flight ends (h % 4): written (the port's
 *                             send decides, FAIL included), failed with
 *                             an errno picked by e, its sender lost, or
 *                             stopped at its deadline
 *   15 SENDERS n              n % 3 senders are live; bit 2: writes stay
 *                             in flight until a SEND (else they are
 *                             written as they are handed over)
 *   16 HANDOFF                a planned restart: the senders stop, the
 *                             frames not read are refused; the program
 *                             ends
 *   c: client by position; g, d, p: GID pool index (gid_pool); a: attribute
 *   table; l, r: comm id selectors that reuse ids seen on the wire and by
 *   the clients, so that routing hits live sessions (see pick_id).
 *
 * The model knows every client, the GIDs it owns and ever owned, its
 * outstanding requests and its capabilities, and checks from the outside:
 *   - exactly one response per request, in request order, echoing op_code,
 *     whether the MAD was written at once, by a sender later, or cut short
 *     by a hand-off, and whether the client read in between; when the
 *     program ends every request has been answered;
 *   - REG/UNREG answers match GID ownership (EEXIST/EACCES/ENOENT/EDQUOT);
 *     a MAD refused for length, header or foreign sgid says so, as does one
 *     whose sender's write failed, was lost or stopped (EIO, ETIMEDOUT), a
 *     write cut short by a hand-off (ETIMEDOUT) and a frame the hand-off
 *     found unread (EAGAIN); every answer is in the err_code dialect the
 *     client had when it sent the request, by PROTOCOL.md's table
 *     (protocol-err-codes.h: the document, not the daemon's code);
 *   - a MAD request answered OK went to the wire exactly once, a refused
 *     one not at all; what went out left the request's MAD untouched but
 *     for LocalCommID/RequestID and the TID's low half, used QPN 1, a GID
 *     index whose GID is the sgid, and an sgid the client owned when it
 *     sent the MAD (each MAD request carries a serial in the TID's high
 *     half, which the relay never touches, to be told apart on the wire);
 *   - an inbound MAD frame carries a MAD that was injected (and delivers
 *     it to one client only), with comm ids changed only at 24..31, an
 *     sgid the client owns or owned, a RemoteCommID (SIDR: RequestID) of
 *     the client's own when the wire carried one of ours, zeroed bytes
 *     past umad_len, and the header as the kernel reported it;
 *   - the client limit and bad-frame disconnects happen when they should;
 *   - a wire MAD the relay drops (for any reason but a full queue) leaves
 *     every session exactly as it was, and a forged one that names the
 *     wrong sender GID or local GID, or the wrong LocalCommID once the
 *     peer's is known, is dropped.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cm-mad.h"
#include "fuzz-support.h"
#include "protocol-err-codes.h"
#include "util.h"

#define MAX_CLIENTS 5
#define MAX_GIDS 3
#define MAX_SESSIONS 6
#define MAX_QUEUED 4
#define MAX_PENDING 6
#define MAX_BAD 4
#define HISTORY 32
#define INJECTED 64 /* MADs remembered: clients queue at most MAX_QUEUED each */

#define MAX_TOTAL_SESSIONS 32 /* below the clients' quotas: the daemon-wide cap is reached */
#define MAX_TOTAL_HALF_OPEN 16
/* Live sessions the quotas allow: each client's, or the daemon's cap. */
#define LIVE_SESSIONS MAX_TOTAL_SESSIONS
#define EVENT_SHAPES 4096 /* event shapes formatted (event_shape_new()): half of it */
#define REQ_COPIES 1024 /* MAD requests remembered for their sends' checks */

enum { OP_ADD, OP_REMOVE, OP_REG, OP_UNREG, OP_MAD, OP_WIRE, OP_TIME, OP_DRAIN, OP_RAW,
       OP_HELLO, OP_STATS, OP_FAIL, OP_RAWWIRE, OP_FORGE, OP_SEND, OP_SENDERS, OP_HANDOFF,
       OP_COUNT };

/* 0-3: the port's GIDs; 4: local but not on the port; 5-7: peers; 8: zero. */
static const uint8_t gid_pool[10][IB_GID_LEN] = {
	{ 0xfe, 0x80, [15] = 0x01 },
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 1 },
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 2 },
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 3 },
	{ [10] = 0xff, [11] = 0xff, 10, 0, 1, 9 },
	{ [10] = 0xff, [11] = 0xff, 10, 0, 2, 1 },
	{ [10] = 0xff, [11] = 0xff, 10, 0, 2, 2 },
	{ [10] = 0xff, [11] = 0xff, 10, 0, 2, 3 },
	{ 0 },
	{ 0xfe, 0x80, [15] = 0x02 },
};

/* gid_is_zero() without memcmp() (see fuzz_same()). */
static bool zero_gid(const uint8_t gid[IB_GID_LEN])
{
	return fuzz_same(gid, gid_pool[8], IB_GID_LEN);
}

static const uint16_t attrs[] = {
	CM_ATTR_REQ,  CM_ATTR_REP,	CM_ATTR_RTU,	  CM_ATTR_DREQ, CM_ATTR_DREP,
	CM_ATTR_REJ,  CM_ATTR_MRA,	CM_ATTR_SIDR_REQ, CM_ATTR_SIDR_REP, CM_ATTR_LAP,
	CM_ATTR_APR,  CM_ATTR_REQ,	CM_ATTR_REP,	  CM_ATTR_CLASS_PORT_INFO, 0x0020,
};

typedef struct Pending {
	uint32_t op;
	uint32_t serial; /* MAD requests: in the TID's high half */
	bool known;  /* expected err_code computed */
	int32_t err; /* expected err_code */
	bool mad_ok_means_sent;
	bool sent;	/* a write of it went through */
	unsigned sends; /* writes of it, through or not */
	bool errno_dialect; /* CAP_ERRNO was in force when it was sent */
} Pending;

/* A MAD request as sent, for the checks of its write, which may come
 * long after (a sender's). Serials start over with each input: a copy
 * counts only in the input that made it. */
typedef struct ReqCopy {
	uint64_t input; /* Fuzz.input when it was made */
	uint32_t serial;
	bool sgid_owned; /* the sender owned the sgid when it sent it */
	size_t len;
	uint8_t sgid[IB_GID_LEN];
	uint8_t mad[256];
} ReqCopy;

static ReqCopy req_copies[REQ_COPIES];

/* A client as the model knows it. The arrays are read only below their
 * counts, so a slot is reused by clearing what comes before them. */
typedef struct MClient {
	bool live; /* in use (client_pool) */
	uint32_t id;
	uint64_t caps;
	unsigned bad;
	unsigned n_owned;
	unsigned n_ever;
	unsigned n_ids;
	unsigned n_pending;
	uint8_t owned[MAX_GIDS][IB_GID_LEN];
	uint8_t ever[HISTORY][IB_GID_LEN];
	uint32_t ids[HISTORY]; /* comm ids / request ids this client sent */
	Pending pending[256];
} MClient;

/* The clients' slots (8 KiB each): taken and given back, not allocated
 * and cleared for every client of every input. */
static MClient client_pool[MAX_CLIENTS];

static MClient *model_add(uint32_t id)
{
	for (unsigned i = 0; i < MAX_CLIENTS; i++) {
		MClient *c = &client_pool[i];

		if (!c->live) {
			memset(c, 0, offsetof(MClient, owned));
			c->live = true;
			c->id = id;
			return c;
		}
	}
	abort(); /* the model never holds more than MAX_CLIENTS */
}

/* An event's shape as far as its formatting goes (event_shape_new());
 * bits 0 says the entry is taken. */
typedef struct EventShape {
	const char *drop;
	uint16_t attr;
	uint8_t bits;
} EventShape;

typedef struct Injected {
	bool used;
	size_t len;
	UmadBuffer buf;
} Injected;

typedef struct Fuzz {
	const uint8_t *p;
	size_t n;
	Relay *relay;
	uint64_t now;
	MClient *clients[MAX_CLIENTS];
	unsigned n_clients;
	unsigned fail_sends;
	unsigned sends;	     /* writes on the port during the current request */
	uint32_t next_serial; /* of MAD requests */
	/* ids seen: wire ids our sends used, ids clients saw inbound */
	uint32_t wire_ids[HISTORY];
	unsigned n_wire_ids;
	uint32_t seen_ids[HISTORY];
	unsigned n_seen_ids;
	unsigned n_inj;
	MClient *draining;
	const char *last_drop; /* the latest event's drop reason, or NULL */
	uint64_t input;	       /* inputs run by this process, this one included */
	unsigned events;       /* events seen */
	uint64_t checked_actions; /* relay_driver_actions() at the last check */
	unsigned checks;
	bool trace;	       /* FUZZ_TRACE set: each step and MAD on stderr */
	/* Last: not cleared between inputs (85 KiB; each is written whole
	 * before it is read). */
	Injected inj[INJECTED];
} Fuzz;

static uint8_t u8(Fuzz *f)
{
	if (f->n == 0)
		return 0;
	f->n--;
	return *f->p++;
}

static uint32_t u32(Fuzz *f)
{
	uint32_t v = u8(f);

	v = v << 8 | u8(f);
	v = v << 8 | u8(f);
	return v << 8 | u8(f);
}

static void remember(uint32_t *ring, unsigned *n, uint32_t v)
{
	if (v)
		ring[(*n)++ % HISTORY] = v;
}

static bool in_ring(const uint32_t *ring, unsigned n, uint32_t v)
{
	for (unsigned i = 0; i < n && i < HISTORY; i++)
		if (ring[i] == v)
			return true;
	return false;
}

static uint32_t pick_ring(const uint32_t *ring, unsigned n, uint8_t s)
{
	unsigned have = n < HISTORY ? n : HISTORY;

	return have ? ring[s % have] : 1;
}

/* A comm id: zero, small, one our sends used, one a client saw, raw. */
static uint32_t pick_id(Fuzz *f, MClient *c, uint8_t s)
{
	switch (s & 7) {
	case 0:
		return 0;
	case 1:
	case 2:
		return 1 + (s >> 3 & 3);
	case 3:
	case 4:
		return pick_ring(f->wire_ids, f->n_wire_ids, s >> 3);
	case 5:
		if (c)
			return pick_ring(c->ids, c->n_ids, s >> 3);
		return pick_ring(f->seen_ids, f->n_seen_ids, s >> 3);
	case 6:
		return pick_ring(f->seen_ids, f->n_seen_ids, s >> 3);
	default:
		return u32(f);
	}
}

static MClient *pick_client(Fuzz *f, uint8_t s)
{
	return f->n_clients ? f->clients[s % f->n_clients] : NULL;
}

static const uint8_t *pick_gid(uint8_t s)
{
	return gid_pool[s % 10];
}

static size_t attr_min_len(uint16_t attr)
{
	switch (attr) {
	case CM_ATTR_REQ:
		return 112;
	case CM_ATTR_REJ:
		return 36;
	case CM_ATTR_SIDR_REQ:
	case CM_ATTR_SIDR_REP:
		return 28;
	default:
		return 33;
	}
}

/*
 * Build a MAD. flags f: bits 0-1 MessageRejected/MRAed; bit 2 REJ reason
 * Timeout; bit 3 a wrong method; bit 4 (wire) a non-zero status;
 * bits 5-7 length: 0-3 full, 4 the attribute's minimum, 5 one short,
 * 6 just the header, 7 from the next byte.
 */
static size_t fuzz_mad_build(Fuzz *f, uint8_t *mad, uint16_t attr, uint32_t local,
			     uint32_t remote, uint8_t flags, const uint8_t *dest)
{
	size_t len;

	mad_build(mad, attr, local, remote, 0x1100000022000000ull | (uint8_t)local);
	if (flags & 8)
		mad[3] = 0x81; /* a wrong method: a response */
	/* REJ MessageRejected, MRA MessageMRAed; the same bits in the others */
	mad[32] = (uint8_t)((flags & 3) << 6);
	if (attr == CM_ATTR_REJ)
		mad_set_rej(mad, flags & 3, (flags & 4) ? CM_REJ_REASON_TIMEOUT : 28);
	if (attr == CM_ATTR_REQ) {
		mad_set_req_gids(mad, gid_pool[1], dest);
		/* rdma_cm's cma_hdr, IPv4 */
		mad[CM_OFF_REQ_PRIVATE + 1] = 0x40;
		memcpy(mad + CM_OFF_REQ_PRIVATE + 32, dest + 12, 4);
	}
	if (attr == CM_ATTR_SIDR_REQ) {
		mad[CM_OFF_SIDR_REQ_PRIVATE + 1] = (flags & 4) ? 0x60 : 0x40;
		memcpy(mad + CM_OFF_SIDR_REQ_PRIVATE + 20, dest, IB_GID_LEN);
	}
	switch (flags >> 5) {
	case 4:
		len = attr_min_len(attr);
		break;
	case 5:
		len = attr_min_len(attr) - 1;
		break;
	case 6:
		len = 24;
		break;
	case 7:
		len = 24 + u8(f);
		break;
	default:
		len = 256;
		break;
	}
	return len > 256 ? 256 : len;
}

/* ---- the model ---- */

/* The err_code for @err in a dialect: PROTOCOL.md's table. */
static int32_t dialect_of(bool errno_dialect, int err)
{
	if (err == 0 || errno_dialect)
		return err;
	for (size_t i = 0; i < sizeof(protocol_err_codes) / sizeof(protocol_err_codes[0]); i++)
		if (protocol_err_codes[i].errnum == -err)
			return protocol_err_codes[i].code;
	return err;
}

static int32_t dialect(const MClient *c, int err)
{
	return dialect_of(c->caps & RDMACM_MUX_CAP_ERRNO, err);
}

/* The request of @c with @serial that is not answered yet, or NULL. */
static Pending *pending_of(MClient *c, uint32_t serial)
{
	for (unsigned i = 0; serial && i < c->n_pending; i++)
		if (c->pending[i].serial == serial)
			return &c->pending[i];
	return NULL;
}

/* The MAD request with @serial not answered yet, of any client. */
static Pending *find_pending(Fuzz *f, uint32_t serial, MClient **owner)
{
	for (unsigned i = 0; i < f->n_clients; i++) {
		Pending *p = pending_of(f->clients[i], serial);

		if (p) {
			if (owner)
				*owner = f->clients[i];
			return p;
		}
	}
	return NULL;
}

static MClient *gid_owner(Fuzz *f, const uint8_t gid[IB_GID_LEN], unsigned *slot)
{
	for (unsigned i = 0; i < f->n_clients; i++)
		for (unsigned j = 0; j < f->clients[i]->n_owned; j++)
			if (fuzz_same(f->clients[i]->owned[j], gid, IB_GID_LEN)) {
				if (slot)
					*slot = j;
				return f->clients[i];
			}
	return NULL;
}

static void model_drop(Fuzz *f, MClient *c)
{
	for (unsigned i = 0; i < f->n_clients; i++)
		if (f->clients[i] == c) {
			f->clients[i] = f->clients[--f->n_clients];
			break;
		}
	c->live = false;
}

static void check_invariants(Fuzz *f, const char *step, bool deep)
{
	const char *bad = deep ? relay_check_invariants(f->relay)
			       : relay_check_invariants_cheap(f->relay);

	fuzz_check(bad == NULL, "after %s: relay invariant: %s", step, bad);
	fuzz_check(relay_client_count(f->relay) == f->n_clients, "after %s: %u clients, model %u",
		   step, relay_client_count(f->relay), f->n_clients);
	{
		unsigned gids = 0;

		for (unsigned i = 0; i < f->n_clients; i++)
			gids += f->clients[i]->n_owned;
		fuzz_check(relay_gid_count(f->relay) == gids, "after %s: %u GIDs, model %u", step,
			   relay_gid_count(f->relay), gids);
	}
}

/* ---- hooks ---- */

/* A write on the port: at once while a request is handled, or by a
 * sender later; the serial in the TID's high half says whose it is. */
static int on_send(void *userdata, UmadBuffer *buf, size_t len)
{
	Fuzz *f = userdata;
	uint32_t serial = get_be32(buf->mad + 8);
	const ReqCopy *q = &req_copies[serial % REQ_COPIES];
	Pending *p = find_pending(f, serial, NULL);
	uint16_t attr;
	int gid_index = buf->hdr.addr.gid_index;

	f->sends++;
	fuzz_check(serial != 0 && q->serial == serial && q->input == f->input,
		   "a write of a MAD no request sent (TID %08x)",
		   serial);
	fuzz_check(len == q->len, "sent %zu bytes of a %zu-byte MAD", len, q->len);
	fuzz_check(buf->hdr.addr.qpn == htobe32(1), "sent to QPN %u", be32toh(buf->hdr.addr.qpn));
	fuzz_check(buf->hdr.addr.grh_present == 1, "RoCE send without a GRH");
	fuzz_check(gid_index < FUZZ_PORT_GIDS &&
			   fuzz_same(fuzz_port_gid[gid_index], q->sgid, IB_GID_LEN),
		   "sent from GID index %d, not the sgid's", gid_index);
	fuzz_check(q->sgid_owned, "sent from a GID its client did not own");
	fuzz_check(!zero_gid(buf->hdr.addr.gid), "sent to the zero GID");
	fuzz_check(fuzz_same(buf->mad, q->mad, 12) && fuzz_same(buf->mad + 16, q->mad + 16, 8) &&
			   fuzz_same(buf->mad + 28, q->mad + 28, len - 28),
		   "the relay changed MAD bytes it must not touch");
	attr = cm_mad_attr(buf->mad);
	if (f->trace)
		fprintf(stderr, "  write serial %u attr 0x%x ids 0x%x 0x%x\n", serial, attr,
			get_be32(buf->mad + 24), get_be32(buf->mad + 28));
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ)
		fuzz_check(get_be32(buf->mad + 24) != 0, "a new session went out with id 0");
	/* The peer answers with these: our wire ids. */
	if (attr != CM_ATTR_SIDR_REP)
		remember(f->wire_ids, &f->n_wire_ids, get_be32(buf->mad + 24));
	if (p)
		fuzz_check(++p->sends == 1, "a request's MAD was written %u times", p->sends);
	if (f->fail_sends) {
		f->fail_sends--;
		return -EIO;
	}
	if (p)
		p->sent = true;
	return 0;
}

/*
 * Whether @ev is the first of its shape: what decides relay_format_event()'s
 * path through its code (direction, drop reason, attribute or "one it
 * has no name for", which of its parts are there). The rest of an event is numbers and GIDs printed by
 * fixed formats into a bounded buffer. Kept for the process: replayed
 * alone, an input formats every shape it makes, so a crash in the
 * formatting still reproduces.
 */
static bool event_shape_new(const RelayEvent *ev)
{
	static EventShape seen[EVENT_SHAPES];
	static unsigned n_seen;
	/* An attribute the formatter has no name for is printed in hex. */
	bool named = cm_attr_to_index(ev->attr) != CM_IDX_OTHER ||
		     ev->attr == CM_ATTR_CLASS_PORT_INFO;
	EventShape k = {
		.drop = ev->drop,
		.attr = named ? ev->attr : 0xffff,
		.bits = (uint8_t)(1 | ev->rx << 1 | (ev->client_id != 0) << 2 |
				  (ev->local_gid != NULL) << 3 | (ev->remote_gid != NULL) << 4),
	};
	unsigned i = (unsigned)(((uintptr_t)k.drop >> 3) * 31 + k.attr * 7 + k.bits) % EVENT_SHAPES;

	if (n_seen >= EVENT_SHAPES / 2)
		return true; /* a full set: every event is formatted */
	for (; seen[i].bits; i = (i + 1) % EVENT_SHAPES)
		if (seen[i].drop == k.drop && seen[i].attr == k.attr && seen[i].bits == k.bits)
			return false;
	seen[i] = k;
	n_seen++;
	return true;
}

static void on_event(void *userdata, const RelayEvent *ev)
{
	Fuzz *f = userdata;
	char line[512];

	fuzz_check(ev->mad_len <= 256, "event with mad_len %zu", ev->mad_len);
	/* The trace's formatting is checked once per shape of event:
	 * printing every one cost a quarter of each input. */
	if (event_shape_new(ev))
		relay_format_event(ev, line, sizeof(line));
	f->last_drop = ev->drop;
	f->events++;
}

static void on_frame(void *userdata, const struct rdmacm_mux_msg *m)
{
	Fuzz *f = userdata;
	MClient *c = f->draining;
	static const uint8_t zero[256];

	if (m->hdr.msg_type == RDMACM_MUX_MSG_TYPE_RESP) {
		Pending *p;

		fuzz_check(c->n_pending > 0, "client %u: a response with no request", c->id);
		p = &c->pending[0];
		fuzz_check(m->hdr.op_code == p->op, "client %u: answer op 0x%x to request op 0x%x",
			   c->id, m->hdr.op_code, p->op);
		if (p->known)
			fuzz_check(m->hdr.err_code == p->err,
				   "client %u: op 0x%x answered %d, expected %d", c->id, p->op,
				   m->hdr.err_code, p->err);
		if (p->mad_ok_means_sent)
			fuzz_check((m->hdr.err_code == 0) == p->sent && p->sends <= 1,
				   "client %u: MAD answered %d but %s", c->id, m->hdr.err_code,
				   p->sent ? "it was sent" : "nothing was sent");
		if (!p->errno_dialect || m->hdr.op_code == RDMACM_MUX_OP_CODE_HELLO)
			fuzz_check(m->hdr.err_code <= 4 && m->hdr.err_code >= -4095,
				   "err_code %d", m->hdr.err_code);
		else
			fuzz_check(m->hdr.err_code <= 0 && m->hdr.err_code >= -4095,
				   "CAP_ERRNO client got err_code %d", m->hdr.err_code);
		memmove(&c->pending[0], &c->pending[1], (c->n_pending - 1) * sizeof(c->pending[0]));
		c->n_pending--;
		return;
	}

	fuzz_check(m->hdr.msg_type == RDMACM_MUX_MSG_TYPE_REQ &&
			   m->hdr.op_code == RDMACM_MUX_OP_CODE_MAD && m->hdr.err_code == 0,
		   "inbound frame type %u op 0x%x err %d", m->hdr.msg_type, m->hdr.op_code,
		   m->hdr.err_code);
	fuzz_check(m->umad_len > 24 && m->umad_len <= 256, "inbound umad_len %d", m->umad_len);
	fuzz_check(fuzz_same(m->umad.mad + m->umad_len, zero, (size_t)(256 - m->umad_len)),
		   "inbound frame has bytes past umad_len");
	{
		bool ever = false;

		for (unsigned i = 0; i < c->n_ever && i < HISTORY; i++)
			ever |= fuzz_same(c->ever[i], m->hdr.sgid.raw, IB_GID_LEN);
		fuzz_check(ever || c->n_ever > HISTORY,
			   "client %u got a MAD for a GID it never owned", c->id);
	}
	/* Which injected MAD is it? Bytes other than the comm ids must match. */
	{
		size_t len = (size_t)m->umad_len;
		Injected *hit = NULL;
		uint16_t attr = cm_mad_attr(m->umad.mad);
		/* The relay may rewrite only the RemoteCommID (SIDR: the
		 * RequestID); a LocalCommID is the peer's and stays. */
		bool sidr = attr == CM_ATTR_SIDR_REQ || attr == CM_ATTR_SIDR_REP;
		size_t skip = sidr ? 24 : 28, keep = skip + 4;

		if (f->trace)
			fprintf(stderr, "  client %u reads attr 0x%x ids 0x%x 0x%x\n", c->id, attr,
				get_be32(m->umad.mad + 24), get_be32(m->umad.mad + 28));

		for (unsigned i = 0; i < INJECTED && i < f->n_inj; i++) {
			Injected *in = &f->inj[i];

			if (in->len != len || !fuzz_same(&in->buf.hdr, &m->umad.hdr, sizeof(in->buf.hdr)) ||
			    !fuzz_same(in->buf.mad, m->umad.mad, skip) ||
			    (len > keep && !fuzz_same(in->buf.mad + keep, m->umad.mad + keep, len - keep)))
				continue;
			/* Prefer unused, then an unchanged id: identical MADs
			 * that differ only in the rewritten id are ambiguous. */
			if (!hit || (hit->used && !in->used) ||
			    (hit->used == in->used &&
			     !fuzz_same(hit->buf.mad + skip, m->umad.mad + skip, 4) &&
			     fuzz_same(in->buf.mad + skip, m->umad.mad + skip, 4)))
				hit = in;
		}
		fuzz_check(hit != NULL || f->n_inj > INJECTED,
			   "client %u got a MAD that never arrived", c->id);
		if (!hit)
			return;
		fuzz_check(f->n_inj > INJECTED || !hit->used,
			   "client %u got a MAD that was already delivered", c->id);
		hit->used = true;
		if (attr == CM_ATTR_SIDR_REP) {
			fuzz_check(in_ring(c->ids, c->n_ids, get_be32(m->umad.mad + 24)) ||
					   c->n_ids > HISTORY,
				   "client %u: SIDR_REP with a RequestID it never used", c->id);
		} else if (attr != CM_ATTR_REQ && attr != CM_ATTR_SIDR_REQ &&
			   get_be32(hit->buf.mad + 28) != 0) {
			uint32_t remote = get_be32(m->umad.mad + 28);
			/* A REJ or MRA with RemoteCommID 0 passes unchanged
			 * (routed by the sender's id): once the ring of
			 * injected MADs wrapped, its copy may be gone and an
			 * older one, the same but for that id, match. */
			bool stale = remote == 0 && f->n_inj > INJECTED &&
				     (attr == CM_ATTR_REJ || attr == CM_ATTR_MRA);

			fuzz_check(in_ring(c->ids, c->n_ids, remote) || c->n_ids > HISTORY || stale,
				   "client %u: attribute 0x%x for wire id 0x%x: RemoteCommID 0x%x is none of its own",
				   c->id, attr, get_be32(hit->buf.mad + 28), remote);
		}
	}
	remember(f->seen_ids, &f->n_seen_ids, get_be32(m->umad.mad + 24));
	remember(f->seen_ids, &f->n_seen_ids, get_be32(m->umad.mad + 28));
}

/* ---- steps ---- */

/* The client reads all it can. What stays unanswered is what the relay
 * did not read yet, and, behind a MAD with a sender, what waits for its
 * answer. */
static void drain(Fuzz *f, MClient *c)
{
	unsigned unread;

	/* Frames read during a drain are answered after it: again, until
	 * nothing more comes (each round reads frames, so this ends). */
	f->draining = c;
	while (relay_driver_drain(f->relay, c->id, on_frame, f) > 0 &&
	       relay_driver_has_client(f->relay, c->id))
		;
	f->draining = NULL;
	if (!relay_driver_has_client(f->relay, c->id))
		return;
	unread = relay_driver_client_unread(f->relay, c->id);
	if (relay_driver_client_waiting(f->relay, c->id) == 0)
		fuzz_check(c->n_pending == unread,
			   "client %u: %u requests unanswered after a drain, %u unread", c->id,
			   c->n_pending, unread);
	else
		fuzz_check(c->n_pending > unread, "client %u: a MAD with a sender and no request",
			   c->id);
}

/* The id a client's MAD claims as its own, kept before routing: a session
 * may take it even when the send fails later. */
static void note_client_id(MClient *c, const struct rdmacm_mux_msg *m)
{
	uint16_t attr;

	if (m->umad_len < 24 || m->umad_len > 256 ||
	    cm_mad_check(m->umad.mad, (size_t)m->umad_len, &attr) < 0 || attr == CM_ATTR_SIDR_REP)
		return;
	remember(c->ids, &c->n_ids, get_be32(m->umad.mad + 24));
}

/* Whether the relay reads @c's next frame at once (it reads its answers
 * first if it must). Requests other than MADs are sent only then: what
 * they change is the model's at once. */
static bool client_reads(Fuzz *f, MClient *c)
{
	if (relay_driver_client_paused(f->relay, c->id))
		drain(f, c);
	return !relay_driver_client_paused(f->relay, c->id) &&
	       relay_driver_client_unread(f->relay, c->id) == 0;
}

/* Give a MAD request frame its serial (in the TID's high half) and keep
 * a copy for the checks of its write. */
static void stamp_mad(Fuzz *f, MClient *c, struct rdmacm_mux_msg *m, Pending *p)
{
	ReqCopy *q;

	p->serial = ++f->next_serial;
	put_be32(m->umad.mad + 8, p->serial);
	q = &req_copies[p->serial % REQ_COPIES];
	q->input = f->input;
	q->serial = p->serial;
	q->sgid_owned = gid_owner(f, m->hdr.sgid.raw, NULL) == c;
	q->len = m->umad_len >= 0 && m->umad_len <= 256 ? (size_t)m->umad_len : 0;
	memcpy(q->sgid, m->hdr.sgid.raw, IB_GID_LEN);
	memcpy(q->mad, m->umad.mad, 256);
}

/*
 * One request from client @c; @p says what the answer must be. A client
 * the relay stopped reading reads its answers first; one still not read
 * then (its MADs are with the senders) gets MAD requests only, which wait
 * unread as in a socket: handled later, they change nothing the model
 * knows but what their own answers say. Return: whether it was sent.
 */
static bool request(Fuzz *f, MClient *c, struct rdmacm_mux_msg *m, Pending p, bool bad)
{
	bool mad = !bad && m->hdr.msg_type == RDMACM_MUX_MSG_TYPE_REQ &&
		   m->hdr.op_code == RDMACM_MUX_OP_CODE_MAD;
	unsigned idx;
	int e;

	fuzz_check(relay_driver_has_client(f->relay, c->id), "client %u is gone from the relay",
		   c->id);
	fuzz_check(mad || client_reads(f, c), "a request other than a MAD to a client not read");
	if (mad) {
		note_client_id(c, m);
		stamp_mad(f, c, m, &p);
	}
	p.errno_dialect = c->caps & RDMACM_MUX_CAP_ERRNO;
	idx = c->n_pending++;
	c->pending[idx] = p;
	f->sends = 0;
	e = relay_driver_request(f->relay, c->id, m);
	if (e == -EAGAIN) {
		/* As many frames unread as a socket would hold: not sent. */
		c->n_pending--;
		return false;
	}
	fuzz_check(e == 0, "request to a live client");
	if (!p.mad_ok_means_sent)
		fuzz_check(f->sends == 0, "a non-MAD request sent a MAD");

	c->bad = bad ? c->bad + 1 : 0;
	if (c->bad >= MAX_BAD) {
		fuzz_check(!relay_driver_has_client(f->relay, c->id),
			   "client %u kept after %u bad frames", c->id, c->bad);
		model_drop(f, c);
	} else {
		fuzz_check(relay_driver_has_client(f->relay, c->id),
			   "client %u dropped after %u bad frames", c->id, c->bad);
	}
	return true;
}

static void step_reg(Fuzz *f, MClient *c, const uint8_t *gid, bool reg)
{
	struct rdmacm_mux_msg m = { .hdr.op_code = reg ? RDMACM_MUX_OP_CODE_REG
						       : RDMACM_MUX_OP_CODE_UNREG };
	unsigned slot = 0;
	MClient *owner = gid_owner(f, gid, &slot);
	Pending p = { .op = m.hdr.op_code, .known = true };
	int err;

	if (!client_reads(f, c))
		return;
	memcpy(m.hdr.sgid.raw, gid, IB_GID_LEN);
	if (reg) {
		err = zero_gid(gid) ? -EINVAL
		      : owner == c	? -EEXIST
		      : owner		? -EACCES
		      : c->n_owned >= MAX_GIDS ? -EDQUOT
					       : 0;
		if (err == 0) {
			memcpy(c->owned[c->n_owned++], gid, IB_GID_LEN);
			memcpy(c->ever[c->n_ever++ % HISTORY], gid, IB_GID_LEN);
		}
	} else {
		err = !owner ? -ENOENT : owner != c ? -EACCES : 0;
		if (err == 0)
			memcpy(c->owned[slot], c->owned[--c->n_owned], IB_GID_LEN);
	}
	p.err = dialect(c, err);
	request(f, c, &m, p, false);
}

static void step_mad(Fuzz *f, MClient *c)
{
	struct rdmacm_mux_msg m = { .hdr.op_code = RDMACM_MUX_OP_CODE_MAD };
	const uint8_t *sgid = pick_gid(u8(f));
	uint8_t dsel = u8(f);
	uint16_t attr = attrs[u8(f) % (sizeof(attrs) / sizeof(attrs[0]))];
	uint32_t local = pick_id(f, c, u8(f));
	uint32_t remote = pick_id(f, c, u8(f));
	uint8_t flags = u8(f);
	const uint8_t *dest = (dsel & 0x80) ? sgid : pick_gid(dsel);
	Pending p = { .op = RDMACM_MUX_OP_CODE_MAD, .mad_ok_means_sent = true };
	size_t len;
	int e;

	memcpy(m.hdr.sgid.raw, sgid, IB_GID_LEN);
	len = fuzz_mad_build(f, m.umad.mad, attr, local, remote, flags,
			(dsel & 0x40) ? pick_gid(dsel >> 2) : dest);
	m.umad_len = (int32_t)len;
	m.umad.hdr.addr.grh_present = 1;
	m.umad.hdr.addr.gid_index = 7; /* must be ignored */
	m.umad.hdr.addr.qpn = htobe32(9); /* must be replaced */
	memcpy(m.umad.hdr.addr.gid, dest, IB_GID_LEN);
	/* What the answer must be, as far as it is decided before routing. */
	e = cm_mad_check(m.umad.mad, len, NULL);
	if (f->trace)
		fprintf(stderr, "  client %u MAD attr 0x%x ids 0x%x 0x%x\n", c->id, attr, local,
			remote);
	if (e < 0) {
		p.known = true;
		p.err = dialect(c, e);
	} else if (gid_owner(f, sgid, NULL) != c) {
		p.known = true;
		p.err = dialect(c, -EACCES);
	}
	request(f, c, &m, p, false);
}

/* The live sessions at one moment, in the table's order (which a dropped
 * MAD cannot change: it neither makes nor frees a slot). */
typedef struct Snapshot {
	unsigned n;
	Session s[LIVE_SESSIONS];
} Snapshot;

static void sessions_now(Fuzz *f, Snapshot *snap)
{
	snap->n = relay_driver_sessions(f->relay, snap->s, LIVE_SESSIONS);
	fuzz_check(snap->n <= LIVE_SESSIONS, "more live sessions than the quotas allow");
}

/* Whether a drop reason is the full queue's. The relay's names are its
 * table's strings: a pointer compares them (strcmp() would go through
 * libFuzzer's hook, which takes the harness's strings for the input's). */
static bool queue_full(const char *drop)
{
	return drop == relay_rx_drop_name(RX_DROP_QUEUE_FULL);
}

/*
 * A MAD arrives from the wire. Returns the drop reason, or NULL. A MAD the
 * relay drops must leave every session as it was: no peer, state, id or
 * timer may change because of a MAD that did not pass (a full queue is
 * the one exception: the MAD passed, only the client could not take it).
 */
static const char *inject(Fuzz *f, Injected *in)
{
	static Snapshot before, after;
	unsigned events = f->events;

	sessions_now(f, &before);
	f->last_drop = NULL;
	relay_driver_wire_mad(f->relay, &in->buf, in->len);
	if (f->events == events || !f->last_drop || queue_full(f->last_drop))
		return f->events == events ? "silent" : f->last_drop;
	sessions_now(f, &after);
	fuzz_check(after.n == before.n && fuzz_same(after.s, before.s, before.n * sizeof(Session)),
		   "a wire MAD dropped as %s changed the sessions (%u -> %u)", f->last_drop,
		   before.n, after.n);
	return f->last_drop;
}

static void step_wire(Fuzz *f, bool raw)
{
	Injected *in = &f->inj[f->n_inj++ % INJECTED];
	UmadBuffer *b = &in->buf;
	uint8_t h, psel;

	memset(in, 0, sizeof(*in));
	if (raw) {
		h = u8(f);
		in->len = u8(f) + 1u;
		for (size_t i = 0; i < in->len; i++)
			b->mad[i] = u8(f);
		psel = h >> 4;
	} else {
		uint16_t attr = attrs[u8(f) % (sizeof(attrs) / sizeof(attrs[0]))];
		uint32_t local = pick_id(f, NULL, u8(f));
		uint32_t remote = pick_id(f, NULL, u8(f));
		uint8_t flags = u8(f);

		h = u8(f);
		psel = u8(f);
		/* A REQ names its target: one of ours, by the header's GID. */
		in->len = fuzz_mad_build(f, b->mad, attr, local, remote, flags,
				    gid_pool[(h >> 1 & 7) % 5]);
		if (flags & 0x10)
			b->hdr.status = 0x0c;
	}
	b->hdr.addr.qpn = htobe32(1);
	b->hdr.addr.grh_present = h & 1;
	b->hdr.addr.gid_index = (h >> 1) & 7;
	b->hdr.length = (uint32_t)(in->len + 64);
	memcpy(b->hdr.addr.gid, pick_gid(psel), IB_GID_LEN);
	if (f->trace)
		fprintf(stderr, "  wire attr 0x%x ids 0x%x 0x%x: %s\n", cm_mad_attr(b->mad),
			get_be32(b->mad + 24), get_be32(b->mad + 28), inject(f, in) ?: "delivered");
	else
		inject(f, in);
}

static void step_raw(Fuzz *f, MClient *c)
{
	struct rdmacm_mux_msg m;
	uint8_t *bytes = (uint8_t *)&m;
	Pending p;
	bool bad;

	for (size_t i = 0; i < sizeof(m); i++)
		bytes[i] = u8(f);
	p = (Pending){ .op = m.hdr.op_code };
	bad = m.hdr.msg_type != RDMACM_MUX_MSG_TYPE_REQ;
	if ((bad || m.hdr.op_code != RDMACM_MUX_OP_CODE_MAD) && !client_reads(f, c))
		return;
	if (!bad) {
		switch (m.hdr.op_code) {
		case RDMACM_MUX_OP_CODE_REG:
		case RDMACM_MUX_OP_CODE_UNREG:
			step_reg(f, c, m.hdr.sgid.raw, m.hdr.op_code == RDMACM_MUX_OP_CODE_REG);
			return;
		case RDMACM_MUX_OP_CODE_MAD:
			p.mad_ok_means_sent = true;
			if (m.umad_len < 24 || m.umad_len > 256) {
				p.known = true;
				p.err = dialect(c, -EMSGSIZE);
			} else {
				int e = cm_mad_check(m.umad.mad, (size_t)m.umad_len, NULL);

				if (e < 0 || gid_owner(f, m.hdr.sgid.raw, NULL) != c) {
					p.known = true;
					p.err = dialect(c, e < 0 ? e : -EACCES);
				}
			}
			break;
		case RDMACM_MUX_OP_CODE_HELLO:
			if (m.umad_len >= 32) {
				uint32_t magic;

				memcpy(&magic, m.umad.mad, 4);
				bad = magic != RDMACM_MUX_HELLO_MAGIC;
			} else {
				bad = true;
			}
			if (!bad) {
				uint64_t caps;

				memcpy(&caps, m.umad.mad + 8, 8);
				c->caps = caps & RDMACM_MUX_CAP_ALL;
			}
			break;
		case RDMACM_MUX_OP_CODE_CLIENT_STATS:
			bad = !(c->caps & RDMACM_MUX_CAP_CLIENT_STATS);
			break;
		default:
			bad = true;
			break;
		}
	}
	if (bad) {
		p.known = true;
		p.err = dialect(c, m.hdr.msg_type != RDMACM_MUX_MSG_TYPE_REQ ? -EBADMSG
					  : m.hdr.op_code == RDMACM_MUX_OP_CODE_HELLO ? -EINVAL
										   : -EOPNOTSUPP);
	}
	request(f, c, &m, p, bad);
}

/* The index of @gid in the fake port's table, or -1. */
static int port_index(const uint8_t gid[16])
{
	for (int i = 0; i < FUZZ_PORT_GIDS; i++)
		if (fuzz_same(fuzz_port_gid[i], gid, 16))
			return i;
	return -1;
}

/* FORGE: a hostile host that knows a live session's wire id (it saw it)
 * aims a message at it, with one thing wrong, or none. */
static void step_forge(Fuzz *f)
{
	static Snapshot live;
	uint8_t sel = u8(f), asel = u8(f), what = u8(f) % 5;
	uint16_t attr = attrs[asel % 11];
	Injected *in;
	const Session *s;
	UmadBuffer *b;
	const char *drop;
	int index;
	bool wrong_sender, wrong_pair;

	sessions_now(f, &live);
	if (live.n == 0)
		return;
	s = &live.s[sel % live.n];
	index = port_index(s->local_gid);
	if (index < 0 || s->wire_id == 0)
		return;
	in = &f->inj[f->n_inj++ % INJECTED];
	memset(in, 0, sizeof(*in));
	b = &in->buf;
	in->len = fuzz_mad_build(f, b->mad, attr, s->peer_comm_id ^ (what == 1 ? 0x5a5a : 0),
				 what == 4 ? 0 : s->wire_id, (uint8_t)(asel >> 4 & 7), s->local_gid);
	if (attr == CM_ATTR_SIDR_REP)
		put_be32(b->mad + 24, s->wire_id);
	b->hdr.addr.qpn = htobe32(1);
	b->hdr.addr.grh_present = 1;
	b->hdr.addr.gid_index = (uint8_t)(what == 3 ? (index + 1) % FUZZ_PORT_GIDS : index);
	b->hdr.length = (uint32_t)(in->len + 64);
	memcpy(b->hdr.addr.gid, zero_gid(s->peer_gid) ? gid_pool[5] : s->peer_gid, IB_GID_LEN);
	if (what == 2)
		b->hdr.addr.gid[15] ^= 0x40;
	drop = inject(f, in);
	/* A wrong GID is refused whenever the session knows the right one; a
	 * wrong LocalCommID once the peer's is known and the message carries
	 * it (a REJ or MRA of a REQ, and REPs, are matched before it is). */
	/* (A REQ from another host, or to another GID, is simply a new
	 * connection, so only session messages count here.) */
	wrong_sender = attr != CM_ATTR_REQ && attr != CM_ATTR_SIDR_REQ &&
		       (what == 3 || (what == 2 && !zero_gid(s->peer_gid)));
	wrong_pair = what == 1 && s->peer_comm_id != 0 && attr != CM_ATTR_SIDR_REP &&
		     attr != CM_ATTR_SIDR_REQ && attr != CM_ATTR_REQ;
	if (wrong_sender || wrong_pair)
		fuzz_check(drop && !queue_full(drop),
			   "a forged %s (%s wrong) at a %s session was %s",
			   cm_attr_name(attr, (char[16]){ 0 }),
			   what == 1 ? "LocalCommID" : what == 2 ? "sender GID" : "local GID",
			   session_state_name((SessionState)s->state), drop ? drop : "delivered");
}

static void step_hello(Fuzz *f, MClient *c, uint8_t caps)
{
	struct rdmacm_mux_msg m = { .hdr.op_code = RDMACM_MUX_OP_CODE_HELLO, .umad_len = 32 };
	struct rdmacm_mux_hello h = {
		.magic = (caps & 0x80) ? 0x12345678u : RDMACM_MUX_HELLO_MAGIC,
		.version_major = 1,
		.capabilities = caps & 0x7f,
	};
	Pending p = { .op = m.hdr.op_code, .known = true };
	bool bad = caps & 0x80;

	if (!client_reads(f, c))
		return;
	memcpy(m.umad.mad, &h, sizeof(h));
	/* The answer is in the dialect in force before the request. */
	p.err = bad ? dialect(c, -EINVAL) : 0;
	if (!bad)
		c->caps = h.capabilities & RDMACM_MUX_CAP_ALL;
	request(f, c, &m, p, bad);
}

static void step_stats(Fuzz *f, MClient *c)
{
	struct rdmacm_mux_msg m = { .hdr.op_code = RDMACM_MUX_OP_CODE_CLIENT_STATS };
	bool ok = c->caps & RDMACM_MUX_CAP_CLIENT_STATS;
	Pending p = { .op = m.hdr.op_code, .known = true, .err = ok ? 0 : dialect(c, -EOPNOTSUPP) };

	if (!client_reads(f, c))
		return;
	request(f, c, &m, p, !ok);
}

/* The errnos a SEND step fails a write with, e picking one (or any). */
static int send_errno(uint8_t e)
{
	static const int common[] = { EIO,    EINVAL, ENODATA, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH,
				      EACCES, EPERM,  EPROTO,  ENOENT,    EMSGSIZE,     EAGAIN };

	return -(e < 128 ? common[e % (sizeof(common) / sizeof(common[0]))] : 1 + e % 133);
}

/* SEND: the write i in flight ends; its answer, when it is one the model
 * can tell, is known from here. */
static void step_send(Fuzz *f, uint8_t i, uint8_t how, uint8_t e)
{
	unsigned n = relay_driver_sends_in_flight(f->relay);
	const UmadBuffer *buf;
	RelayDriverSendEnd end = (RelayDriverSendEnd)(how % 4);
	MClient *c = NULL;
	Pending *p;
	int err = send_errno(e);

	if (n == 0)
		return;
	buf = relay_driver_send_peek(f->relay, i % n, NULL);
	p = find_pending(f, get_be32(buf->mad + 8), &c);
	if (p && end != RELAY_DRIVER_SEND_WRITE) {
		p->known = true;
		p->err = dialect_of(p->errno_dialect, end == RELAY_DRIVER_SEND_FAIL ? err
						      : end == RELAY_DRIVER_SEND_LOSE ? -EIO
										     : -ETIMEDOUT);
	}
	fuzz_check(relay_driver_send_end(f->relay, i % n, end, err) == 0, "ending write %u", i % n);
}

/* HANDOFF: a write still in flight is answered ETIMEDOUT, a frame not
 * read EAGAIN; every request is answered before the program ends. */
static void step_handoff(Fuzz *f)
{
	for (unsigned i = 0; i < relay_driver_sends_in_flight(f->relay); i++) {
		const UmadBuffer *buf = relay_driver_send_peek(f->relay, i, NULL);
		Pending *p = find_pending(f, get_be32(buf->mad + 8), NULL);

		if (p) {
			p->known = true;
			p->err = dialect_of(p->errno_dialect, -ETIMEDOUT);
		}
	}
	for (unsigned i = 0; i < f->n_clients; i++) {
		MClient *c = f->clients[i];
		unsigned unread = relay_driver_client_unread(f->relay, c->id);

		fuzz_check(unread <= c->n_pending, "client %u: more frames unread than sent", c->id);
		for (unsigned k = c->n_pending - unread; k < c->n_pending; k++) {
			c->pending[k].known = true;
			c->pending[k].err = dialect_of(c->pending[k].errno_dialect, -EAGAIN);
		}
	}
	relay_driver_handoff(f->relay);
	fuzz_check(relay_sender_queued(f->relay) == 0, "MADs left with the senders at a hand-off");
}

/*
 * The end of a program: every write in flight is written and every client
 * reads until nothing is left (which may hand the senders more MADs, read
 * meanwhile); then no request may be unanswered.
 */
static void finish(Fuzz *f)
{
	for (unsigned round = 0; round < 4 * CLIENT_INPUT_FRAMES; round++) {
		bool more = false;

		while (relay_driver_sends_in_flight(f->relay) > 0)
			fuzz_check(relay_driver_send_end(f->relay, 0, RELAY_DRIVER_SEND_WRITE, 0) == 0,
				   "ending a write");
		for (unsigned i = 0; i < f->n_clients; i++) {
			drain(f, f->clients[i]);
			more |= f->clients[i]->n_pending > 0;
		}
		if (!more && relay_driver_sends_in_flight(f->relay) == 0)
			break;
	}
	for (unsigned i = 0; i < f->n_clients; i++)
		fuzz_check(f->clients[i]->n_pending == 0, "client %u: %u requests never answered",
			   f->clients[i]->id, f->clients[i]->n_pending);
}

/* The fuzzer's limits; a client's half-open budgets are its session
 * budget, and no register timeout. */
static void configure(RelayConfig *cfg)
{
	relay_driver_config(cfg, MAX_CLIENTS, MAX_GIDS, MAX_SESSIONS, MAX_QUEUED);
	cfg->timeouts_ms[SESSION_TIMER_CLOSING] = 4000;
	cfg->max_half_open = cfg->max_half_open_per_peer = MAX_SESSIONS;
	cfg->max_pending = MAX_PENDING, cfg->max_bad_frames = MAX_BAD;
	cfg->max_total_sessions = MAX_TOTAL_SESSIONS;
	cfg->max_total_half_open = MAX_TOTAL_HALF_OPEN;
	cfg->register_timeout_ms = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[OP_COUNT] = {
		"ADD",	   "REMOVE", "REG",  "UNREG", "MAD",	 "WIRE",    "TIME",    "DRAIN", "RAW",
		"HELLO",   "STATS",  "FAIL", "RAWWIRE", "FORGE", "SEND", "SENDERS", "HANDOFF",
	};
	/* The steps that take a client (by position) and nothing more. */
	static void (*const client_steps[OP_COUNT])(Fuzz *f, MClient *c) = {
		[OP_MAD] = step_mad, [OP_DRAIN] = drain, [OP_RAW] = step_raw,
		[OP_STATS] = step_stats,
	};
	static Fuzz state;
	static const FuzzRelaySetup setup = {
		.configure = configure,
		.senders = 2,
		.send = on_send,
		.sink = on_event,
		.userdata = &state,
	};
	static uint64_t inputs;
	Fuzz *f = &state;
	unsigned steps = 0;
	bool handed_off = false;

	memset(f, 0, offsetof(Fuzz, inj));
	f->input = ++inputs;
	f->trace = getenv("FUZZ_TRACE") != NULL;
	/* Nothing of the input's count in the trace: an input's trace is the
	 * same whatever ran before it (check-isolation.sh compares). */
	if (f->trace)
		fprintf(stderr, "input: %zu bytes\n", size);
	f->p = data;
	f->n = size;
	f->now = 1000000;
	f->relay = fuzz_relay_begin(&setup);
	/* Until a SENDERS step says otherwise, the senders write what they
	 * are handed at once. */
	relay_driver_set_send_at_once(f->relay, true);
	/* A relay reset for this input is as new (check-isolation.sh shows
	 * that no trace of the inputs before it is left). */
	fuzz_check(relay_session_count(f->relay) == 0, "a reset relay with sessions");
	check_invariants(f, "the start", true);
	f->checked_actions = relay_driver_actions(f->relay);

	while (f->n > 0 && steps++ < 4096 && !handed_off) {
		uint8_t op = u8(f) % OP_COUNT;
		MClient *c = NULL;

		if (f->trace)
			fprintf(stderr, "step %u: %s\n", steps, names[op]);

		switch (op) {
		case OP_ADD: {
			uint32_t id = relay_driver_add_client(f->relay);

			if (f->n_clients >= MAX_CLIENTS) {
				fuzz_check(id == 0, "a client beyond the limit was accepted");
				/* A refusal counts itself (clients_refused) and
				 * changes nothing an invariant is about: no check
				 * for it. Nearly half the steps of a grown corpus
				 * are such ADDs (a zero byte is one); whatever one
				 * broke, the next step's check would find. */
				if (relay_driver_actions(f->relay) == f->checked_actions + 1)
					f->checked_actions++;
				break;
			}
			fuzz_check(id != 0, "a client below the limit was refused");
			c = model_add(id);
			f->clients[f->n_clients++] = c;
			break;
		}
		case OP_REMOVE:
			c = pick_client(f, u8(f));
			if (c) {
				relay_driver_remove_client(f->relay, c->id);
				model_drop(f, c);
			}
			break;
		case OP_REG:
		case OP_UNREG: {
			uint8_t s = u8(f);

			c = pick_client(f, s);
			if (c)
				step_reg(f, c, pick_gid(u8(f)), op == OP_REG);
			break;
		}
		case OP_MAD:
		case OP_DRAIN:
		case OP_RAW:
		case OP_STATS:
			c = pick_client(f, u8(f));
			if (c)
				client_steps[op](f, c);
			break;
		case OP_WIRE:
		case OP_RAWWIRE:
			step_wire(f, op == OP_RAWWIRE);
			break;
		case OP_FORGE:
			step_forge(f);
			break;
		case OP_TIME: {
			uint8_t t = u8(f);
			uint64_t ms = t < 128 ? t * 16u : (t - 127u) * 1000u;

			f->now += ms * 1000u;
			relay_driver_set_time(f->relay, f->now);
			(void)relay_driver_run_timers(f->relay);
			break;
		}
		case OP_HELLO: {
			uint8_t s = u8(f);

			c = pick_client(f, s);
			if (c)
				step_hello(f, c, u8(f));
			break;
		}
		case OP_SEND: {
			uint8_t i = u8(f), how = u8(f);

			step_send(f, i, how, u8(f));
			break;
		}
		case OP_SENDERS: {
			uint8_t n = u8(f);

			relay_driver_set_send_at_once(f->relay, !(n & 4));
			relay_driver_set_senders(f->relay, n % 3);
			break;
		}
		case OP_HANDOFF:
			step_handoff(f);
			handed_off = true;
			break;
		default: /* OP_FAIL */
			f->fail_sends = u8(f) % 4;
			break;
		}
		/* After every step that acted on the relay (one that did not
		 * leaves it, and the model, as the last check found them); the
		 * session table's own sweep costs its capacity: now and then. */
		if (relay_driver_actions(f->relay) != f->checked_actions) {
			f->checked_actions = relay_driver_actions(f->relay);
			check_invariants(f, names[op], ++f->checks % 16 == 0);
		}
	}

	finish(f);
	check_invariants(f, "the end", true);
	while (f->n_clients)
		model_drop(f, f->clients[0]);
	fuzz_relay_end(f->relay);
	return 0;
}
