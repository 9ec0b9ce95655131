/* SPDX-License-Identifier: MIT */
/*
 * Owns the RX path, wire -> client: MADs are received from the umad port in
 * batches, checked, routed to the client they belong to, remapped back into
 * that client's comm id space, and queued to it as QEMU-protocol frames.
 *
 * Routing:
 *   REQ, SIDR_REQ         by the destination GID: the local GID-table entry
 *                         the kernel reports in addr.gid_index (the REQ's
 *                         Primary RemotePortGID, or the cma_hdr address of
 *                         a SIDR_REQ, when there is no GRH)
 *   REP RTU DREQ DREP MRA LAP APR REJ
 *                         by RemoteCommID, which is a wire id we chose; a
 *                         REJ or MRA with RemoteCommID 0 by the sender's
 *                         LocalCommID and GID, remembered from its REQ
 *   SIDR_REP              by RequestID (a wire id)
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <string.h>

#include "cm-match.h"
#include "log.h"
#include "relay-internal.h"
#include "util.h"

#define RELAY_RX_RECV_ERRORS_FATAL 1000 /* consecutive umad read failures */

/* The frame is zeroed in parts (relay_rx_deliver()): no padding before the MAD. */
_Static_assert(offsetof(struct rdmacm_mux_msg, umad.hdr) + sizeof(struct rdmacm_mux_umad_hdr) ==
		       offsetof(struct rdmacm_mux_msg, umad.mad),
	       "the MAD follows the umad header");

typedef struct RelayRxRoute {
	RelayClient *client;
	const uint8_t *local_gid;
	uint8_t local_gid_copy[GID_LEN]; /* when the session goes away on delivery */
	uint32_t handle;
	RxDrop drop;
	uint32_t wire_id;
	uint32_t client_comm_id;
	/* A peer's new REQ or SIDR_REQ: its session is made once the MAD is
	 * queued to the client, never for one that is dropped. */
	bool create;
	SessionState create_state;
	uint32_t peer_id;
} RelayRxRoute;

/*
 * The local GID a MAD was addressed to, as far as the header tells, re-read
 * from the GID table for this epoch. @hint is a GID the caller expects
 * there (the session's, or the one a REQ names), or NULL: the kernel
 * reports the index in 8 bits, so in a table of more than 256 entries the
 * entry at that index may be another one with the same low bits.
 */
static const uint8_t *relay_rx_local_gid(Relay *r, const UmadBuffer *buf, const uint8_t *hint)
{
	GidTable *t = r->port->gids;
	uint8_t index8 = buf->hdr.addr.gid_index;

	if (!buf->hdr.addr.grh_present)
		return NULL;
	if (hint && gid_table_size(t) > GID_TABLE_UMAD_INDEXES &&
	    gid_table_matches_index8(t, hint, index8))
		return hint;
	return gid_table_get(t, index8, r->gid_epoch);
}

/* What cm_match_inbound() needs to know of a received MAD, filled in
 * place (this runs for every inbound MAD). */
static void relay_rx_inbound(Relay *r, const UmadBuffer *buf, uint16_t attr, const Session *s,
			     CmInbound *in)
{
	const uint8_t *mad = buf->mad;
	bool sidr = attr == CM_ATTR_SIDR_REQ || attr == CM_ATTR_SIDR_REP;

	in->attr = attr;
	in->local_comm_id = sidr ? 0 : cm_get_local_comm_id(mad);
	in->remote_comm_id = sidr ? 0 : cm_get_remote_comm_id(mad);
	in->grh = buf->hdr.addr.grh_present;
	in->sender_gid = buf->hdr.addr.gid;
	in->sender_lid = ntohs(buf->hdr.addr.lid);
	in->msg_rejected = attr == CM_ATTR_REJ ? cm_rej_msg_rejected(mad) : 0;
	in->rej_reason = attr == CM_ATTR_REJ ? cm_rej_reason(mad) : 0;
	in->msg_mraed = attr == CM_ATTR_MRA ? cm_mra_msg_mraed(mad) : 0;
	in->arrival_gid = in->grh ? relay_rx_local_gid(r, buf, s->local_gid) : NULL;
}

/* Apply the checks; on a refusal say why. Return: the verdict. */
static CmMatch relay_rx_match(Relay *r, const UmadBuffer *buf, uint16_t attr, const Session *s,
			      RelayRxRoute *rt)
{
	CmInbound in;
	CmMatch m;

	relay_rx_inbound(r, buf, attr, s, &in);
	m = cm_match_inbound(s, &in);

	if (m == CM_MATCH_SPOOFED)
		rt->drop = RX_DROP_SPOOFED;
	else if (m == CM_MATCH_BAD_STATE)
		rt->drop = RX_DROP_BAD_STATE;
	return m;
}

/*
 * REQ and SIDR_REQ: a peer starts a session with the owner of the local
 * GID the packet came to (the kernel's gid_index with a GRH). The GIDs the
 * message names are used only without a GRH (IB, LID routed), and never
 * override an unowned destination.
 */
static bool relay_rx_route_new(Relay *r, UmadBuffer *buf, size_t len, uint16_t attr,
			       RelayRxRoute *rt)
{
	bool grh = buf->hdr.addr.grh_present;
	const uint8_t *peer_gid = grh ? buf->hdr.addr.gid : NULL;
	uint16_t peer_lid = grh ? 0 : ntohs(buf->hdr.addr.lid);
	uint8_t named_gid[GID_LEN];
	bool sidr = attr == CM_ATTR_SIDR_REQ;
	const uint8_t *named = sidr ? (cm_cma_dst_gid(buf->mad, len, named_gid) == 0 ? named_gid
										 : NULL)
				    : cm_req_remote_gid(buf->mad);
	const uint8_t *local = grh ? relay_rx_local_gid(r, buf, named) : named;
	RelayClient *c;
	Session *s;
	uint32_t h;

	rt->peer_id = sidr ? cm_get_sidr_request_id(buf->mad) : cm_get_local_comm_id(buf->mad);
	rt->wire_id = rt->peer_id;
	if (local) {
		/* @local may point at @named_gid on this stack frame. */
		memcpy(rt->local_gid_copy, local, GID_LEN);
		rt->local_gid = local = rt->local_gid_copy;
	}
	c = local ? g_hash_table_lookup(r->gid_owners, local) : NULL;
	if (!c) {
		rt->drop = RX_DROP_NO_OWNER;
		return false;
	}

	h = session_table_lookup_peer(r->sessions, rt->peer_id, local, peer_gid);
	s = session_table_get(r->sessions, h);
	if (s) {
		/* A repeated REQ: it may only re-arm the session it started. */
		CmMatch m = relay_rx_match(r, buf, attr, s, rt);

		rt->client = relay_client_lookup(r, s->client_id);
		if (m == CM_MATCH_SPOOFED || m == CM_MATCH_BAD_STATE)
			return false;
		if (m == CM_MATCH_ADVANCE)
			session_table_arm(r->sessions, h,
					  sidr ? SESSION_TIMER_SIDR : SESSION_TIMER_HANDSHAKE,
					  relay_now(r));
		rt->local_gid = s->local_gid;
		rt->handle = h;
		if (!rt->client)
			rt->drop = RX_DROP_NO_SESSION; /* cannot happen: sessions go with clients */
		return rt->client != NULL;
	}

	rt->client = c;
	rt->drop = relay_session_check_remote(r, c, peer_gid, peer_lid);
	if (rt->drop != RX_DROP_COUNT)
		return false;
	rt->create = true;
	rt->create_state = sidr ? SESSION_SIDR_RCVD : SESSION_REQ_RCVD;
	return true;
}

/* The session a REQ was queued for, made now that it was delivered. */
static void relay_rx_create_session(Relay *r, const UmadBuffer *buf, bool sidr, RelayRxRoute *rt,
				    uint64_t now)
{
	bool grh = buf->hdr.addr.grh_present;
	uint32_t h = relay_session_new_remote(r, rt->client, rt->create_state,
					      grh ? buf->hdr.addr.gid : NULL,
					      grh ? 0 : ntohs(buf->hdr.addr.lid), now);

	if (!h) {
		log_ratelimited(LOG_WARNING, NULL, "out of memory for a session of client %u",
				rt->client->id);
		return;
	}
	session_table_set_peer(r->sessions, h, rt->peer_id, rt->local_gid, NULL);
	session_table_arm(r->sessions, h, sidr ? SESSION_TIMER_SIDR : SESSION_TIMER_HANDSHAKE, now);
	rt->handle = h;
}

/* Every other message: it names a session by the wire id we gave it. */
static bool relay_rx_route_session(Relay *r, UmadBuffer *buf, uint16_t attr, uint64_t now,
				   RelayRxRoute *rt)
{
	uint8_t *mad = buf->mad;
	bool sidr = attr == CM_ATTR_SIDR_REP;
	uint32_t wire = sidr ? cm_get_sidr_request_id(mad) : cm_get_remote_comm_id(mad);
	uint32_t h = 0;
	CmMatch m;
	Session *s;

	if (wire != 0) {
		h = session_table_lookup_wire_id(r->sessions, wire);
	} else if (attr == CM_ATTR_REJ || attr == CM_ATTR_MRA) {
		/* REJ(Timeout) before the peer knew our id: the sender's own
		 * comm id, remembered from its REQ, plus who it is. */
		const uint8_t *local = relay_rx_local_gid(r, buf, NULL);
		if (local)
			h = session_table_lookup_peer(r->sessions, cm_get_local_comm_id(mad),
						      local, buf->hdr.addr.gid);
	}
	rt->wire_id = wire;
	s = h ? session_table_get(r->sessions, h) : NULL;
	if (!s) {
		rt->drop = RX_DROP_NO_SESSION;
		return false;
	}
	rt->client = relay_client_lookup(r, s->client_id);
	rt->local_gid = s->local_gid;
	rt->client_comm_id = s->client_comm_id;
	m = relay_rx_match(r, buf, attr, s, rt);
	if (m == CM_MATCH_SPOOFED || m == CM_MATCH_BAD_STATE)
		return false;
	if (!rt->client) {
		rt->drop = RX_DROP_NO_SESSION;
		return false;
	}
	rt->handle = h;

	if (sidr) {
		cm_set_sidr_request_id(mad, s->client_comm_id);
		memcpy(rt->local_gid_copy, s->local_gid, GID_LEN);
		rt->local_gid = rt->local_gid_copy;
		/* The query is answered; the session has done its job. */
		session_table_remove(r->sessions, &rt->client->sessions, h);
		rt->handle = 0;
		return true;
	}
	if (wire != 0)
		cm_set_remote_comm_id(mad, s->client_comm_id);
	if (m == CM_MATCH_REPEAT)
		return true;
	/* The first REP: learn the peer's comm id (an index key, so through
	 * the table), so that the rest of the session is matched on the pair. */
	if (attr == CM_ATTR_REP) {
		session_table_set_peer(r->sessions, h, cm_get_local_comm_id(mad), s->local_gid,
				       buf->hdr.addr.grh_present && gid_is_zero(s->peer_gid)
					       ? buf->hdr.addr.gid
					       : NULL);
		if (!buf->hdr.addr.grh_present && s->peer_lid == 0)
			s->peer_lid = ntohs(buf->hdr.addr.lid);
	}
	relay_session_advance(r, h, s, attr, true, now);
	return true;
}

/* Tell the sinks (when there are any) what became of an inbound MAD:
 * @drop names the reason it was dropped, or is NULL. */
static void relay_rx_emit(Relay *r, const UmadBuffer *buf, const uint8_t *wire_mad, size_t len,
			  uint16_t attr, const RelayRxRoute *rt, const char *drop)
{
	RelayEvent ev = { .rx = true, .hdr = &buf->hdr, .mad = wire_mad, .mad_len = len,
			  .remote_gid = buf->hdr.addr.gid, .attr = attr, .drop = drop };

	if (r->sinks->len == 0)
		return;
	if (rt) {
		ev.wire_id = rt->wire_id;
		ev.client_comm_id = rt->client_comm_id;
		ev.local_gid = rt->local_gid;
	}
	relay_emit(r, &ev, rt ? rt->client : NULL);
}

void relay_rx_deliver(Relay *r, UmadBuffer *buf, size_t len)
{
	struct rdmacm_mux_msg *m;
	RelayRxRoute rt = { .drop = RX_DROP_COUNT };
	uint8_t wire_mad[RDMACM_MUX_MAD_SIZE];
	uint16_t attr = 0;
	uint64_t now;
	int e;
	bool ok;

	if (buf->hdr.status != 0 || len <= RDMACM_MUX_MAD_HDR_SIZE) {
		r->counters->rx_drop[RX_DROP_STATUS]++;
		return;
	}
	/* Sinks see the MAD as it was on the wire, before any rewrite. */
	if (r->sinks->len)
		memcpy(wire_mad, buf->mad, len);
	e = cm_mad_check(buf->mad, len, &attr);
	if (e < 0) {
		RxDrop d = e == -EPROTO ? RX_DROP_NOT_CM
			   : e == -EOPNOTSUPP ? RX_DROP_UNSUPPORTED
					       : RX_DROP_MALFORMED;
		r->counters->rx_drop[d]++;
		relay_rx_emit(r, buf, wire_mad, len, attr, NULL, relay_rx_drop_name(d));
		return;
	}

	now = relay_now(r);
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ)
		ok = relay_rx_route_new(r, buf, len, attr, &rt);
	else
		ok = relay_rx_route_session(r, buf, attr, now, &rt);
	if (!ok) {
		r->counters->rx_drop[rt.drop]++;
		relay_rx_emit(r, buf, wire_mad, len, attr, &rt, relay_rx_drop_name(rt.drop));
		return;
	}

	if (client_queue_mad_slot(&rt.client->conn, &m) < 0) {
		r->counters->rx_drop[RX_DROP_QUEUE_FULL]++;
		rt.client->stats.rx_dropped++;
		relay_rx_emit(r, buf, wire_mad, len, attr, &rt,
			      relay_rx_drop_name(RX_DROP_QUEUE_FULL));
		return;
	}
	/* Build the frame in its queue slot, from zero: nothing stale may
	 * reach a client. Every byte is written once: zeros up to the umad
	 * header (padding too), the header and the MAD copied, zeros after
	 * a short MAD, and the frame's tail padding. */
	memset(m, 0, offsetof(struct rdmacm_mux_msg, umad));
	m->hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m->hdr.op_code = RDMACM_MUX_OP_CODE_MAD;
	memcpy(m->hdr.sgid.raw, rt.local_gid, GID_LEN);
	m->umad_len = (int32_t)len;
	memcpy(&m->umad.hdr, &buf->hdr, sizeof(m->umad.hdr));
	memcpy(m->umad.mad, buf->mad, len);
	if (len < RDMACM_MUX_MAD_SIZE)
		memset(m->umad.mad + len, 0, RDMACM_MUX_MAD_SIZE - len);
	memset(m->umad.mad + RDMACM_MUX_MAD_SIZE, 0,
	       sizeof(*m) - offsetof(struct rdmacm_mux_msg, umad.mad) - RDMACM_MUX_MAD_SIZE);
	if (rt.create)
		relay_rx_create_session(r, buf, attr == CM_ATTR_SIDR_REQ, &rt, now);
	r->counters->rx[cm_attr_to_index(attr)]++;
	rt.client->stats.rx_mads++;
	relay_vm_count(r, rt.client, rt.handle, attr, cm_get_tid_low(buf->mad), true);
	relay_mark_dirty(r, rt.client);
	relay_rx_emit(r, buf, wire_mad, len, attr, &rt, NULL);
}

/* The wire id relay_rx_route_session() will look up for an inbound MAD, or 0. */
static uint32_t relay_rx_session_key(const UmadBuffer *buf, size_t len)
{
	uint16_t attr;

	if (buf->hdr.status != 0 || len < MAD_HDR_LEN + 8)
		return 0;
	attr = cm_mad_attr(buf->mad);
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ || attr == CM_ATTR_SIDR_REP)
		return 0;
	return cm_get_remote_comm_id(buf->mad);
}

/*
 * A read error: the device went away (exit, to be restarted), or count it.
 * Return: true when the loop is to end.
 */
static bool relay_rx_recv_failed(Relay *r, int e)
{
	if (e == -EIO || e == -ENODEV || e == -ENXIO) {
		log_error("the umad device of %s port %d went away (%s): exiting so "
			  "that it can be restarted when the device is back",
			  r->port->dev, r->port->port, strerror(-e));
		r->ended_loop = true;
		(void)sd_event_exit(r->event, -ENODEV);
		return true;
	}
	r->counters->recv_errors++;
	/* A port that fails every read would keep the loop busy forever:
	 * give up and let systemd restart us. */
	if (++r->recv_errors_in_a_row >= RELAY_RX_RECV_ERRORS_FATAL) {
		log_error("receiving from %s port %d failed %u times in a row (%s): exiting",
			  r->port->dev, r->port->port, r->recv_errors_in_a_row, strerror(-e));
		r->ended_loop = true;
		(void)sd_event_exit(r->event, -EIO);
		return true;
	}
	log_ratelimited(LOG_WARNING, NULL, "receiving from %s port %d failed: %s", r->port->dev,
			r->port->port, strerror(-e));
	return false;
}

static void relay_rx_batch(Relay *r)
{
	int n = 0, e = 0;

	if (!r->rx_batch) {
		r->rx_batch = g_new(UmadBuffer, RELAY_UMAD_BATCH);
		r->rx_len = g_new(size_t, RELAY_UMAD_BATCH);
	}
	/* Take the batch first, then route it: in a big table the lookups'
	 * cache misses then overlap (session_table_warm_wire_ids()), instead
	 * of one per MAD. */
	while (n < RELAY_UMAD_BATCH) {
		size_t len = 0;

		e = umad_port_recv(r->port, &r->rx_batch[n], &len);
		if (e < 0)
			break;
		r->recv_errors_in_a_row = 0;
		r->rx_len[n++] = len;
	}
	if (n > 1 && session_table_count(r->sessions) >= RELAY_WARM_SESSIONS) {
		uint32_t keys[RELAY_UMAD_BATCH];
		unsigned k = 0;

		for (int i = 0; i < n; i++) {
			keys[k] = relay_rx_session_key(&r->rx_batch[i], r->rx_len[i]);
			k += keys[k] != 0;
		}
		session_table_warm_wire_ids(r->sessions, keys, k);
	}
	for (int i = 0; i < n; i++)
		relay_rx_deliver(r, &r->rx_batch[i], r->rx_len[i]);
	if (e < 0 && e != -EAGAIN && relay_rx_recv_failed(r, e))
		return;
	relay_flush_dirty(r);
	relay_schedule_timer(r);
}

int relay_rx_on_umad_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	Relay *r = userdata;

	(void)s;
	(void)fd;
	(void)revents;
	r->dispatch_now = relay_now(r);
	relay_next_gid_epoch(r);
	relay_rx_batch(r);
	r->dispatch_now = 0;
	return 0;
}
