/* SPDX-License-Identifier: MIT */
/*
 * Owns the TX path, client -> wire: a MAD a client hands over is checked
 * (length, CM class, the sender's own GID), matched to the client's session
 * (or starts one), remapped (LocalCommID or RequestID becomes the session's
 * wire id), addressed by the daemon (QP1, the GSI Q_Key, the gid_index of
 * the sender's GID, never the client's values) and sent.
 *
 * Comm ids: every LocalCommID (SIDR: RequestID) a client sends is
 * replaced by a daemon-unique wire id, and mapped back on the way in, so
 * no client can see or steer another's traffic by picking its ids. The
 * low 32 bits of the TID of a message that starts an exchange (REQ, DREQ,
 * LAP, SIDR_REQ) become the wire id too: two clients that use the same
 * TIDs would otherwise collide in the kernel's duplicate-send check.
 *
 * QEMU's wrong destination: QEMU puts its own GID in addr.gid. When a MAD's
 * addr.gid is the sender's own GID (or zero), the destination comes from
 * the REQ's Primary RemotePortGID, from rdma_cm's cma_hdr (SIDR_REQ), or
 * from the session.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <string.h>

#include "log.h"
#include "relay-internal.h"
#include "util.h"

#define RELAY_TX_DEFAULT_HOP_LIMIT 64

typedef struct RelayTxContext {
	RelayClient *client;
	UmadBuffer *buf;
	size_t len;
	uint16_t attr;
	const uint8_t *sgid;
	uint8_t dest[GID_LEN]; /* destination GID, zero when unknown */
	bool dest_explicit;    /* the client gave a destination other than itself */
	uint32_t client_id_field; /* the client's comm id / request id */
	uint32_t wire_id;	  /* what went on the wire */
	uint32_t handle;
	uint32_t hint; /* the warm pass's session for this frame, or 0 */
	uint32_t tid_low; /* the TID's low half as the client sent it, before any rewrite */
	bool created;  /* this request created the session */
	TxReject reject;
} RelayTxContext;

static int relay_tx_fail(RelayTxContext *t, TxReject why, int err)
{
	t->reject = why;
	return err;
}

/* Fill in the destination from the session when the client gave none. */
static void relay_tx_dest_from_session(RelayTxContext *t, const Session *s)
{
	if (!t->dest_explicit && s && !gid_is_zero(s->peer_gid))
		memcpy(t->dest, s->peer_gid, GID_LEN);
}

/*
 * Whether a REQ (SIDR_REQ) with the comm id of session @s is that
 * session's own, sent again: from the same GID to the same peer, while it
 * waits for its answer, or after one (a REQ the MAD layer resent while the
 * REP was on its way, which the peer's CM recognises as a duplicate).
 */
static bool relay_tx_is_resent_request(const RelayTxContext *t, const Session *s, bool sidr)
{
	if (!gid_equal(s->local_gid, t->sgid))
		return false;
	if (!gid_is_zero(t->dest) && !gid_is_zero(s->peer_gid) && !gid_equal(t->dest, s->peer_gid))
		return false;
	if (sidr)
		return s->state == SESSION_SIDR_SENT;
	return s->state == SESSION_REQ_SENT || s->state == SESSION_REP_RCVD ||
	       s->state == SESSION_ESTABLISHED;
}

/* REQ and SIDR_REQ from our client: a session it starts. */
static int relay_tx_start(Relay *r, RelayTxContext *t, uint64_t now)
{
	bool sidr = t->attr == CM_ATTR_SIDR_REQ;
	uint8_t *mad = t->buf->mad;
	uint32_t h;
	Session *s;

	t->client_id_field = sidr ? cm_get_sidr_request_id(mad) : cm_get_local_comm_id(mad);
	if (t->client_id_field == 0)
		return relay_tx_fail(t, TX_REJECT_MALFORMED, -EINVAL);
	if (!t->dest_explicit) {
		/* QEMU puts its own GID in addr.gid: take the destination from
		 * the message itself. */
		if (!sidr)
			memcpy(t->dest, cm_req_remote_gid(mad), GID_LEN);
		else if (cm_cma_dst_gid(mad, t->len, t->dest) < 0)
			memset(t->dest, 0, GID_LEN);
	}

	h = session_table_lookup_client_comm_id(r->sessions, t->client->id, t->client_id_field);
	s = session_table_get(r->sessions, h);
	if (s && !relay_tx_is_resent_request(t, s, sidr)) {
		/* The client reuses the id of a finished session (or of one
		 * from another of its GIDs, or to another peer) for a new one.
		 * The old one is dead to it. */
		session_table_remove(r->sessions, &t->client->sessions, h);
		h = 0;
	}
	if (!h) {
		h = relay_session_new(r, t->client, sidr ? SESSION_SIDR_SENT : SESSION_REQ_SENT, now);
		if (!h)
			return relay_tx_fail(t, TX_REJECT_SESSION_QUOTA, -EDQUOT);
		session_table_set_client_comm_id(r->sessions, h, t->client_id_field);
		session_table_assign_wire_id(r->sessions, h);
		t->created = true;
	}
	s = session_table_get(r->sessions, h);
	if (!s)
		return relay_tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	if (t->created) {
		memcpy(s->local_gid, t->sgid, GID_LEN);
		memcpy(s->peer_gid, t->dest, GID_LEN);
		/* LID routed (IB without a GRH): the peer is its LID. */
		if (!r->port->roce && !t->buf->hdr.addr.grh_present)
			s->peer_lid = ntohs(t->buf->hdr.addr.lid);
	} else if (gid_is_zero(t->dest)) {
		relay_tx_dest_from_session(t, s);
	}
	t->wire_id = s->wire_id;
	t->handle = h;
	if (sidr) {
		cm_set_sidr_request_id(mad, s->wire_id);
		session_table_arm(r->sessions, h, SESSION_TIMER_SIDR, now);
	} else {
		cm_set_local_comm_id(mad, s->wire_id);
		if (s->state == SESSION_REQ_SENT)
			session_table_arm(r->sessions, h, SESSION_TIMER_HANDSHAKE, now);
	}
	cm_set_tid_low(mad, s->wire_id);
	return 0;
}

/*
 * REP, MRA, or REJ from our client answering a peer's REQ: the session was
 * created when that REQ was routed to this client, under the peer's comm
 * id and the GID it was sent to. Only that client may answer it.
 */
static int relay_tx_answer_req(Relay *r, RelayTxContext *t, uint64_t now)
{
	uint8_t *mad = t->buf->mad;
	uint32_t local = cm_get_local_comm_id(mad);
	uint32_t remote = cm_get_remote_comm_id(mad);
	uint32_t h, old;
	Session *s;

	t->client_id_field = local;
	h = session_table_lookup_peer(r->sessions, remote, t->sgid,
				      t->dest_explicit ? t->dest : NULL);
	s = session_table_get(r->sessions, h);
	if (!s)
		return relay_tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	if (s->client_id != t->client->id)
		return relay_tx_fail(t, TX_REJECT_HIJACK, -EACCES);
	if (local && s->client_comm_id == 0) {
		old = session_table_lookup_client_comm_id(r->sessions, t->client->id, local);
		if (old && old != h)
			session_table_remove(r->sessions, &t->client->sessions, old);
		session_table_set_client_comm_id(r->sessions, h, local);
		session_table_assign_wire_id(r->sessions, h);
	} else if (local && s->client_comm_id != local) {
		return relay_tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	}
	relay_tx_dest_from_session(t, s);
	t->handle = h;
	t->wire_id = s->wire_id;
	if (local)
		cm_set_local_comm_id(mad, s->wire_id);
	relay_session_advance(r, h, s, t->attr, false, now);
	return 0;
}

/*
 * A client may act only on its own sessions, and only towards their peer:
 * the RemoteCommID, the destination and the source GID it names must be the
 * session's. (Before the peer's id is known, only a REJ, with RemoteCommID
 * 0, has anything to say.) Otherwise a client could aim a DREQ at another
 * session's wire id through the fabric or its own loopback.
 */
static bool relay_tx_names_own_peer(const RelayTxContext *t, const Session *s)
{
	uint32_t remote = cm_get_remote_comm_id(t->buf->mad);

	if (remote != s->peer_comm_id && !(t->attr == CM_ATTR_REJ && remote == 0))
		return false;
	if (t->dest_explicit && !gid_is_zero(s->peer_gid) && !gid_equal(t->dest, s->peer_gid))
		return false;
	return gid_equal(t->sgid, s->local_gid);
}

/* Every other message of a session our client is part of. */
static int relay_tx_continue(Relay *r, RelayTxContext *t, uint64_t now)
{
	uint8_t *mad = t->buf->mad;
	uint32_t local = cm_get_local_comm_id(mad);
	uint32_t h;
	Session *s;

	t->client_id_field = local;
	/* The warm pass's find, if the table still says so: (client, comm
	 * id) is unique among live sessions, so then it is the lookup's. */
	h = t->hint;
	s = session_table_get(r->sessions, h);
	if (!s || s->client_id != t->client->id || s->client_comm_id != local || !local) {
		h = local ? session_table_lookup_client_comm_id(r->sessions, t->client->id, local) : 0;
		s = h ? session_table_get(r->sessions, h) : NULL;
	}
	if (!s)
		return relay_tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	t->wire_id = s->wire_id;
	if (!relay_tx_names_own_peer(t, s))
		return relay_tx_fail(t, TX_REJECT_SPOOFED, -EACCES);
	relay_tx_dest_from_session(t, s);
	t->handle = h;
	cm_set_local_comm_id(mad, s->wire_id);
	/* Messages that start an exchange carry the wire id in their TID. */
	if (t->attr == CM_ATTR_DREQ || t->attr == CM_ATTR_LAP)
		cm_set_tid_low(mad, s->wire_id);
	relay_session_advance(r, h, s, t->attr, false, now);
	return 0;
}

/* SIDR_REP from our client: answers a peer's SIDR_REQ routed to it. */
static int relay_tx_sidr_rep(Relay *r, RelayTxContext *t, uint64_t now)
{
	uint32_t request_id = cm_get_sidr_request_id(t->buf->mad);
	uint32_t h = session_table_lookup_peer(r->sessions, request_id, t->sgid,
					       t->dest_explicit ? t->dest : NULL);
	Session *s;

	t->client_id_field = request_id;
	t->wire_id = request_id;
	if (!h)
		return relay_tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	s = session_table_get(r->sessions, h);
	if (!s)
		return relay_tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	if (s->client_id != t->client->id)
		return relay_tx_fail(t, TX_REJECT_HIJACK, -EACCES);
	relay_tx_dest_from_session(t, s);
	t->handle = h;
	/* Keep it for the SIDR timeout: the peer may repeat its query. */
	session_table_arm(r->sessions, h, SESSION_TIMER_SIDR, now);
	return 0;
}

static int relay_tx_route(Relay *r, RelayTxContext *t, uint64_t now)
{
	switch (t->attr) {
	case CM_ATTR_REQ:
	case CM_ATTR_SIDR_REQ:
		return relay_tx_start(r, t, now);
	case CM_ATTR_REP:
		return relay_tx_answer_req(r, t, now);
	case CM_ATTR_MRA:
		if (cm_mra_msg_mraed(t->buf->mad) == CM_MSG_REQ)
			return relay_tx_answer_req(r, t, now);
		return relay_tx_continue(r, t, now);
	case CM_ATTR_REJ:
		/* A REJ of a REQ that came to us may have no LocalCommID yet. */
		if (cm_rej_msg_rejected(t->buf->mad) == CM_MSG_REQ &&
		    cm_get_remote_comm_id(t->buf->mad) != 0)
			return relay_tx_answer_req(r, t, now);
		return relay_tx_continue(r, t, now);
	case CM_ATTR_SIDR_REP:
		return relay_tx_sidr_rep(r, t, now);
	default:
		return relay_tx_continue(r, t, now);
	}
}

/* The index of @gid in the port's table now, or a negative errno. */
static int relay_tx_find_gid(Relay *r, const uint8_t gid[GID_LEN])
{
	int index = gid_table_find(r->port->gids, gid);

	/* The lookup answers from the last reading; a stale answer is
	 * caught by re-reading the entry, which re-reads the whole table
	 * when it changed, and then the lookup is current. */
	if (index >= 0 && !gid_table_holds(r->port->gids, (unsigned)index, gid, r->gid_epoch))
		index = gid_table_find(r->port->gids, gid);
	return index;
}

/* The addressing is the daemon's: QP1, the GSI Q_Key, and on RoCE the GRH
 * with the gid_index of the sender's GID, never the client's values. */
static int relay_tx_address(Relay *r, RelayTxContext *t, RelayClientGid *cg)
{
	struct rdmacm_mux_mad_addr *a = &t->buf->hdr.addr;
	unsigned generation;
	int gid_index;

	a->qpn = htonl(1);
	a->qkey = htonl(CM_QP1_QKEY);
	t->buf->hdr.agent_id = 0;
	t->buf->hdr.status = 0;
	t->buf->hdr.timeout_ms = 0;
	t->buf->hdr.retries = 0;
	t->buf->hdr.length = 0;
	if (!r->port->roce && !a->grh_present) {
		a->gid_index = 0;
		return 0;
	}
	if (gid_is_zero(t->dest))
		return relay_tx_fail(t, TX_REJECT_NO_DESTINATION, -EDESTADDRREQ);
	/* The index found last time, if the table did not change and the
	 * entry holds the GID now (re-read once per loop iteration): the
	 * index of a GID that went may already hold another client's. */
	generation = gid_table_generation(r->port->gids);
	if (cg->gid_index >= 0 && cg->table_generation == generation &&
	    gid_table_holds(r->port->gids, (unsigned)cg->gid_index, t->sgid, r->gid_epoch))
		gid_index = cg->gid_index;
	else
		gid_index = relay_tx_find_gid(r, t->sgid);
	/* An index the umad header cannot carry would be cut to 8 bits and
	 * send from another client's GID. */
	if (gid_index < 0 || gid_index >= GID_TABLE_UMAD_INDEXES)
		return relay_tx_fail(t, TX_REJECT_NO_PORT_GID, -EADDRNOTAVAIL);
	cg->gid_index = gid_index;
	cg->table_generation = gid_table_generation(r->port->gids);
	a->grh_present = 1;
	a->gid_index = (uint8_t)gid_index;
	memcpy(a->gid, t->dest, GID_LEN);
	if (a->hop_limit == 0)
		a->hop_limit = RELAY_TX_DEFAULT_HOP_LIMIT;
	return 0;
}

/* A refused MAD: undo what it started, count it, log it (once: a failed
 * write at warning, the fabric's or the kernel's doing; a refusal of the
 * client's MAD at notice), show it. */
static void relay_tx_refused(Relay *r, RelayTxContext *t, const struct rdmacm_mux_msg *req,
			     int err)
{
	RelayClient *c = t->client;

	/* A session whose first message never reached the wire would only
	 * wait for its timer; a retransmission keeps the session it is for.
	 * (After a send by a sender process, the handle is checked to be still it.) */
	if (t->created) {
		Session *s = session_table_get(r->sessions, t->handle);

		if (s && s->client_id == c->id && s->wire_id == t->wire_id)
			session_table_remove(r->sessions, &c->sessions, t->handle);
	}
	r->counters->tx_reject[t->reject]++;
	c->stats.tx_rejected++;
	if (log_get_max_level() >= LOG_NOTICE) {
		char pid[32], gidf[64], comm[32], attrf[32], text[GID_STR_LEN], name[16];
		const char *fields[] = { pid, gidf, comm, attrf, NULL };

		snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->conn.cred.pid);
		snprintf(gidf, sizeof(gidf), "GID=%s", gid_to_string(t->sgid, text));
		snprintf(comm, sizeof(comm), "COMM_ID=0x%08x", t->client_id_field);
		snprintf(attrf, sizeof(attrf), "ATTR=%s", cm_attr_name(t->attr, name));
		if (t->reject == TX_REJECT_SEND_FAILED)
			log_ratelimited(LOG_WARNING, fields, "send of %s for client %u (pid %d) failed: %s",
					cm_attr_index_name(cm_attr_to_index(t->attr)), c->id,
					(int)c->conn.cred.pid, strerror(-err));
		else
			log_ratelimited(LOG_NOTICE, fields,
					"refused a MAD from client %u (pid %d): %s (%s)", c->id,
					(int)c->conn.cred.pid, relay_tx_reject_name(t->reject),
					strerror(-err));
	}
	relay_emit(r, &(RelayEvent){ .drop = relay_tx_reject_name(t->reject), .attr = t->attr,
				     .client_comm_id = t->client_id_field, .wire_id = t->wire_id,
				     .local_gid = t->sgid,
				     .remote_gid = gid_is_zero(t->dest) ? NULL : t->dest,
				     .hdr = &req->umad.hdr, .mad = req->umad.mad,
				     .mad_len = t->len },
		   c);
}

/* The write of a MAD is done, with @err: count it and show it, or refuse. */
static int relay_tx_sent(Relay *r, RelayTxContext *t, UmadBuffer *buf,
			 const struct rdmacm_mux_msg *req, int err)
{
	RelayClient *c = t->client;

	if (err < 0) {
		if (t->reject != TX_REJECT_SEND_BUSY)
			t->reject = TX_REJECT_SEND_FAILED;
		relay_tx_refused(r, t, req, err);
		return err;
	}
	r->counters->tx[cm_attr_to_index(t->attr)]++;
	c->stats.tx_mads++;
	relay_vm_count(r, c, t->handle, t->attr, t->tid_low, false);
	/* Most daemons have no trace reader: do not build the event. */
	if (r->sinks->len)
		relay_emit(r,
			   &(RelayEvent){ .attr = t->attr, .client_comm_id = t->client_id_field,
					  .wire_id = t->wire_id, .local_gid = t->sgid,
					  .remote_gid = t->dest, .hdr = &buf->hdr, .mad = buf->mad,
					  .mad_len = t->len },
			   c);
	return 0;
}

static int relay_tx_defer(Relay *r, RelayTxContext *t, UmadBuffer *buf,
			  const struct rdmacm_mux_msg *req);

int relay_tx_mad(Relay *r, RelayClient *c, const struct rdmacm_mux_msg *req, uint32_t hint)
{
	UmadBuffer buf;
	SendDest *dest;
	RelayTxContext t = { .client = c, .buf = &buf, .hint = hint };
	const uint8_t *addr_gid = req->umad.hdr.addr.gid;
	uint64_t now = relay_now(r);
	RelayClientGid *cg;
	int err;

	t.sgid = req->hdr.sgid.raw;
	if (req->umad_len < RDMACM_MUX_MAD_HDR_SIZE || req->umad_len > RDMACM_MUX_MAD_SIZE) {
		err = relay_tx_fail(&t, TX_REJECT_BAD_LENGTH, -EMSGSIZE);
		goto refused;
	}
	t.len = (size_t)req->umad_len;
	err = cm_mad_check(req->umad.mad, t.len, &t.attr);
	if (err < 0) {
		t.reject = err == -EPROTO      ? TX_REJECT_NOT_CM
			   : err == -EOPNOTSUPP ? TX_REJECT_UNSUPPORTED
						: TX_REJECT_MALFORMED;
		goto refused;
	}
	t.tid_low = cm_get_tid_low(req->umad.mad);
	/* A GID has one owner, and it is in the owner's list (and only
	 * there): the short list answers what gid_owners would. */
	cg = relay_client_find_gid(c, t.sgid);
	if (!cg) {
		err = relay_tx_fail(&t, TX_REJECT_FOREIGN_SGID, -EACCES);
		goto refused;
	}

	buf.hdr = req->umad.hdr;
	memcpy(buf.mad, req->umad.mad, t.len);
	t.dest_explicit = !gid_is_zero(addr_gid) && !gid_equal(addr_gid, t.sgid);
	if (t.dest_explicit) {
		memcpy(t.dest, addr_gid, GID_LEN);
	} else if (!c->c1_logged && !gid_is_zero(addr_gid)) {
		c->c1_logged = true;
		relay_handoff_client_c1_logged(r, c);
		log_info("client %u (pid %d) puts its own GID in addr.gid, as QEMU does; "
			 "taking destinations from the CM messages and sessions",
			 c->id, (int)c->conn.cred.pid);
	}

	err = relay_tx_route(r, &t, now);
	if (err == 0)
		err = relay_tx_address(r, &t, cg);
	if (err < 0)
		goto refused;
	switch ((err = umad_sender_route(r->sender, &buf, now, &dest))) {
	case SEND_ROUTE_NOW:
		err = umad_port_send(r->port, &buf, t.len);
		umad_sender_note(r->sender, dest, err, now);
		return relay_tx_sent(r, &t, &buf, req, err);
	case SEND_ROUTE_QUEUE:
		return relay_tx_defer(r, &t, &buf, req);
	default: /* it failed a moment ago: fail again at once */
		return relay_tx_sent(r, &t, &buf, req, err);
	}

refused:
	relay_tx_refused(r, &t, req, err);
	return err;
}

/* A MAD a sender process writes, and what its response needs afterwards. */
typedef struct RelayTxJob {
	UmadSendJob send; /* first: the sender hands this back */
	Relay *relay;
	uint32_t client_id;
	uint64_t caps;		    /* the client's when it sent the MAD: the answer's dialect */
	uint64_t response;	    /* the response's kept place */
	int owed;		    /* its record in the hand-off state, or -1 */
	struct rdmacm_mux_msg req;  /* echoed in the response */
	RelayTxContext t;	    /* .buf and .sgid point into this job */
} RelayTxJob;

/*
 * The MAD waits for a sender process: keep its response's place (so the
 * client's answers stay in order, and inbound MADs wait behind it), and
 * let the client send only a few such MADs at a time, so that one client
 * cannot hold many senders.
 */
static int relay_tx_defer(Relay *r, RelayTxContext *t, UmadBuffer *buf,
			  const struct rdmacm_mux_msg *req)
{
	RelayClient *c = t->client;
	RelayTxJob *job = g_new0(RelayTxJob, 1);
	int err;

	job->send.buf = *buf;
	job->send.len = t->len;
	job->relay = r;
	job->client_id = c->id;
	job->caps = c->caps;
	job->req = *req;
	job->t = *t;
	job->t.buf = &job->send.buf;
	job->t.sgid = job->req.hdr.sgid.raw;
	job->t.client = NULL;
	job->owed = -1;
	err = client_reserve_response(&c->conn, &job->response);
	if (err == 0) {
		/* Unanswered from here until the sender reports (which may be
		 * at once, inside umad_sender_queue()): a crash must not leave
		 * the client waiting for ever. */
		job->owed = relay_handoff_owe(r, c, job->response, req);
		/* Counted first: the answer may come before the queueing
		 * returns (a worker that cannot take it). */
		c->slow_sends++;
		err = umad_sender_queue(r->sender, &job->send);
		if (err < 0)
			c->slow_sends--;
	} else {
		job->response = UINT64_MAX;
	}
	if (err < 0) {
		if (err == -EAGAIN)
			t->reject = TX_REJECT_SEND_BUSY;
		if (job->response != UINT64_MAX) {
			/* Its place is kept: answer there, in order. */
			err = relay_tx_sent(r, t, buf, req, err);
			relay_response_frame(job->caps, &job->req, err);
			client_fill_response(&c->conn, job->response, &job->req);
			relay_handoff_owed_answered(r, job->owed);
			c->stats.requests++;
			relay_mark_dirty(r, c);
			g_free(job);
			return RELAY_TX_PENDING;
		}
		g_free(job);
		return relay_tx_sent(r, t, buf, req, err);
	}
	if (!relay_client_may_read(r, c))
		c->reading_paused = true;
	return RELAY_TX_PENDING;
}

void relay_tx_on_sent(void *userdata, UmadSendJob *sj)
{
	RelayTxJob *job = (RelayTxJob *)sj;
	Relay *r = userdata;
	RelayClient *c = relay_client_lookup(r, job->client_id);
	int err;

	/* Never handed to a sender (none was left, or they stopped): the
	 * senders were busy, the send did not fail. */
	if (job->send.result == -EAGAIN)
		job->t.reject = TX_REJECT_SEND_BUSY;
	/* A client that left took its sessions and its responses along; the
	 * MAD went out (or not) all the same, and is counted. */
	if (!c) {
		if (job->send.result < 0)
			r->counters->tx_reject[job->send.result == -EAGAIN ? TX_REJECT_SEND_BUSY
									 : TX_REJECT_SEND_FAILED]++;
		else
			r->counters->tx[cm_attr_to_index(job->t.attr)]++;
	} else {
		job->t.client = c;
		err = relay_tx_sent(r, &job->t, &job->send.buf, &job->req, job->send.result);
		relay_response_frame(job->caps, &job->req, err);
		client_fill_response(&c->conn, job->response, &job->req);
		relay_handoff_owed_answered(r, job->owed);
		c->stats.requests++;
		c->slow_sends--;
		relay_mark_dirty(r, c);
		relay_flush_dirty(r);
		relay_schedule_timer(r);
	}
	g_free(job);
}

/* ---- warming the lookups of a batch ---- */

/* Warm the collected keys; each frame keeps the session found for it. */
static void relay_tx_warm_keys(Relay *r, RelayTxWarmKeys *k)
{
	session_table_warm_client_comm_ids(r->sessions, k->client_ids, k->comm_ids, k->n, k->found);
	for (unsigned i = 0; i < k->n; i++)
		*k->hint[i] = k->found[i];
}

/* Add the keys of the frames @c has buffered, and start its hints over.
 * The hints cover every buffered frame, so when the next read has to
 * refill, they are used up. */
static void relay_tx_warm_collect(RelayTxWarmKeys *k, RelayClient *c)
{
	const struct rdmacm_mux_msg *frames;
	unsigned n = client_peek_frames(&c->conn, &frames);

	c->n_tx_hints = 0;
	c->next_tx_hint = 0;
	for (unsigned i = 0; i < n; i++) {
		const struct rdmacm_mux_msg *f = &frames[i];
		uint32_t local = 0;
		uint16_t attr;

		c->tx_hints[c->n_tx_hints++] = 0;
		if (f->hdr.op_code != RDMACM_MUX_OP_CODE_MAD || f->umad_len < MAD_HDR_LEN + 8)
			continue;
		attr = cm_mad_attr(f->umad.mad);
		if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ || attr == CM_ATTR_SIDR_REP)
			continue;
		local = cm_get_local_comm_id(f->umad.mad);
		if (local && k->n < G_N_ELEMENTS(k->comm_ids)) {
			k->client_ids[k->n] = c->id;
			k->comm_ids[k->n] = local;
			k->hint[k->n++] = &c->tx_hints[i];
		}
	}
}

/* The keys' buffer, made at the first pass. */
static RelayTxWarmKeys *relay_tx_warm_buffer(Relay *r)
{
	if (!r->tx_warm)
		r->tx_warm = g_new(RelayTxWarmKeys, 1);
	return r->tx_warm;
}

void relay_tx_warm_client(Relay *r, RelayClient *c)
{
	RelayTxWarmKeys *k = relay_tx_warm_buffer(r);

	k->n = 0;
	relay_tx_warm_collect(k, c);
	relay_tx_warm_keys(r, k);
}

/*
 * In a big table every lookup misses the cache. One client's read is at
 * most CLIENT_INPUT_FRAMES frames, so read every ready client first and
 * warm all their lookups together, as the RX path does for inbound MADs.
 */
void relay_tx_warm_ready(Relay *r, const struct epoll_event *evs, int n)
{
	RelayTxWarmKeys *k = relay_tx_warm_buffer(r);

	k->n = 0;
	for (int i = 0; i < n; i++) {
		RelayClient *c = relay_client_lookup(r, (uint32_t)evs[i].data.u64);

		if (!c || !(evs[i].events & EPOLLIN) || c->reading_paused)
			continue;
		/* an error is kept for client_next_frame(), after the frames */
		(void)client_fill_input(&c->conn);
		if (client_take_refill(&c->conn))
			relay_tx_warm_collect(k, c);
	}
	relay_tx_warm_keys(r, k);
}
