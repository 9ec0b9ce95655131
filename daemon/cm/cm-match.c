/* SPDX-License-Identifier: MIT */
/* Owns the checks an inbound CM MAD must pass before it may act on a
 * session: peer, comm id pair and state, as ib_cm makes them (cm-match.h). */
#include "cm-match.h"

#include <string.h>

static bool cm_match_gid_equal(const uint8_t *a, const uint8_t *b)
{
	return memcmp(a, b, GID_LEN) == 0;
}

static bool cm_match_gid_known(const uint8_t *gid)
{
	static const uint8_t zero[GID_LEN];

	return memcmp(gid, zero, GID_LEN) != 0;
}

bool cm_match_sender(const Session *s, const CmInbound *in)
{
	if (!in->grh)
		return s->peer_lid == 0 || in->sender_lid == s->peer_lid;
	if (!in->arrival_gid || !cm_match_gid_equal(in->arrival_gid, s->local_gid))
		return false;
	return !cm_match_gid_known(s->peer_gid) || cm_match_gid_equal(in->sender_gid, s->peer_gid);
}

/* ib_cm's cm_acquire_id(RemoteCommID, LocalCommID): the pair must be the
 * session's, and a peer whose id is not known yet matches nothing. */
static bool cm_match_pair(const Session *s, const CmInbound *in)
{
	return s->peer_comm_id != 0 && in->local_comm_id == s->peer_comm_id;
}

static bool cm_match_state_in(const Session *s, unsigned mask)
{
	return (mask >> s->state) & 1u;
}

/* Sets of states, constants: the checks run for every inbound MAD. */
#define STATE_BIT(state) (1u << (state))
/* A REQ was answered with a REP, and the session is not gone yet. */
#define STATES_ANSWERED \
	(STATE_BIT(SESSION_REP_SENT) | STATE_BIT(SESSION_ESTABLISHED) | STATE_BIT(SESSION_CLOSING))
#define STATES_REP_REPEAT (STATE_BIT(SESSION_REP_RCVD) | STATE_BIT(SESSION_ESTABLISHED))
#define STATES_REQ_REJECTABLE (STATE_BIT(SESSION_REQ_SENT) | STATE_BIT(SESSION_CLOSING))
#define STATES_PAIRED_REJECTABLE                                                          \
	(STATE_BIT(SESSION_REQ_RCVD) | STATE_BIT(SESSION_REP_SENT) | STATE_BIT(SESSION_REP_RCVD) | \
	 STATE_BIT(SESSION_ESTABLISHED) | STATE_BIT(SESSION_CLOSING))

/* A peer's REQ or SIDR_REQ again (the session was found by its id and
 * GIDs): the first kind re-arms the handshake, later ones only pass. */
static CmMatch cm_match_request(const Session *s, const CmInbound *in)
{
	if (in->attr == CM_ATTR_SIDR_REQ)
		return s->state == SESSION_SIDR_RCVD ? CM_MATCH_ADVANCE : CM_MATCH_BAD_STATE;
	if (s->state == SESSION_REQ_RCVD)
		return CM_MATCH_ADVANCE;
	if (cm_match_state_in(s, STATES_ANSWERED))
		return CM_MATCH_REPEAT;
	return CM_MATCH_BAD_STATE;
}

static CmMatch cm_match_rep(const Session *s, const CmInbound *in)
{
	/* The first REP: ib_cm's acquire(RemoteCommID, 0), in REQ_SENT. */
	if (s->peer_comm_id == 0)
		return s->state == SESSION_REQ_SENT ? CM_MATCH_ADVANCE : CM_MATCH_BAD_STATE;
	if (!cm_match_pair(s, in))
		return CM_MATCH_SPOOFED;
	/* ib_cm answers a repeated REP with its RTU (or MRA) again. */
	if (cm_match_state_in(s, STATES_REP_REPEAT))
		return CM_MATCH_REPEAT;
	return CM_MATCH_BAD_STATE;
}

static CmMatch cm_match_rej(const Session *s, const CmInbound *in)
{
	/* A REJ of our client's REQ: acquire(RemoteCommID, 0). */
	if (in->msg_rejected == CM_MSG_REQ && in->remote_comm_id != 0) {
		if (s->peer_comm_id != 0)
			return CM_MATCH_SPOOFED;
		return cm_match_state_in(s, STATES_REQ_REJECTABLE)
			       ? CM_MATCH_ADVANCE
			       : CM_MATCH_BAD_STATE;
	}
	/* Any other REJ (REJ(Timeout) with RemoteCommID 0 was found by the
	 * peer's id already): the pair. */
	if (!cm_match_pair(s, in))
		return CM_MATCH_SPOOFED;
	return cm_match_state_in(s, STATES_PAIRED_REJECTABLE)
		       ? CM_MATCH_ADVANCE
		       : CM_MATCH_BAD_STATE;
}

static CmMatch cm_match_mra(const Session *s, const CmInbound *in)
{
	switch (in->msg_mraed) {
	case CM_MSG_REQ: /* acquire(RemoteCommID, 0): the client's REQ waits */
		if (s->peer_comm_id != 0)
			return CM_MATCH_SPOOFED;
		return s->state == SESSION_REQ_SENT ? CM_MATCH_ADVANCE : CM_MATCH_BAD_STATE;
	case CM_MSG_REP: /* the client's REP waits */
		if (!cm_match_pair(s, in))
			return CM_MATCH_SPOOFED;
		return s->state == SESSION_REP_SENT ? CM_MATCH_ADVANCE : CM_MATCH_BAD_STATE;
	case CM_MSG_OTHER: /* the client's LAP waits */
		if (!cm_match_pair(s, in))
			return CM_MATCH_SPOOFED;
		return s->state == SESSION_ESTABLISHED ? CM_MATCH_REPEAT : CM_MATCH_BAD_STATE;
	default:
		return CM_MATCH_BAD_STATE;
	}
}

CmMatch cm_match_inbound(const Session *s, const CmInbound *in)
{
	if (!cm_match_sender(s, in))
		return CM_MATCH_SPOOFED;
	switch (in->attr) {
	case CM_ATTR_REQ:
	case CM_ATTR_SIDR_REQ:
		return cm_match_request(s, in);
	case CM_ATTR_SIDR_REP:
		return s->state == SESSION_SIDR_SENT ? CM_MATCH_ADVANCE : CM_MATCH_BAD_STATE;
	case CM_ATTR_REP:
		return cm_match_rep(s, in);
	case CM_ATTR_REJ:
		return cm_match_rej(s, in);
	case CM_ATTR_MRA:
		return cm_match_mra(s, in);
	default:
		break;
	}
	/* RTU, DREQ, DREP, LAP, APR: acquire(RemoteCommID, LocalCommID). */
	if (!cm_match_pair(s, in))
		return CM_MATCH_SPOOFED;
	switch (in->attr) {
	case CM_ATTR_RTU:
		if (s->state == SESSION_REP_SENT)
			return CM_MATCH_ADVANCE;
		return s->state == SESSION_ESTABLISHED ? CM_MATCH_REPEAT : CM_MATCH_BAD_STATE;
	case CM_ATTR_DREQ:
		/* A DREQ may overtake the RTU (REP_SENT); on a closing session
		 * it is a retry, which re-arms the removal timer. */
		return cm_match_state_in(s, STATES_ANSWERED)
			       ? CM_MATCH_ADVANCE
			       : CM_MATCH_BAD_STATE;
	case CM_ATTR_DREP:
		return s->state == SESSION_CLOSING ? CM_MATCH_ADVANCE : CM_MATCH_BAD_STATE;
	case CM_ATTR_LAP:
	case CM_ATTR_APR:
		return s->state == SESSION_ESTABLISHED ? CM_MATCH_REPEAT : CM_MATCH_BAD_STATE;
	default:
		return CM_MATCH_BAD_STATE;
	}
}
