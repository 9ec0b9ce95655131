/* SPDX-License-Identifier: MIT */
/* Unit tests of the inbound checks: every message kind in every session
 * state, with the right and the wrong peer, ids and local GID. */
#include <glib.h>
#include <string.h>

#include "cm-match.h"
#include "unit-test.h"

static const uint8_t local_gid[GID_LEN] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 1 };
static const uint8_t other_local[GID_LEN] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 9 };
static const uint8_t peer_gid[GID_LEN] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 2 };
static const uint8_t stranger_gid[GID_LEN] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 66 };

#define PEER_ID 0x1111u
#define OUR_ID 0x2222u

static Session session(SessionState state, uint32_t peer_id)
{
	Session s;

	memset(&s, 0, sizeof(s));
	s.state = (uint8_t)state;
	s.wire_id = OUR_ID;
	s.peer_comm_id = peer_id;
	memcpy(s.local_gid, local_gid, GID_LEN);
	memcpy(s.peer_gid, peer_gid, GID_LEN);
	return s;
}

/* A message from the peer, to our GID, with both ids right. */
static CmInbound from_peer(uint16_t attr)
{
	return (CmInbound){ .attr = attr, .local_comm_id = PEER_ID, .remote_comm_id = OUR_ID,
			    .grh = true, .sender_gid = peer_gid, .arrival_gid = local_gid };
}

static void check(SessionState state, uint32_t peer_id, CmInbound in, CmMatch want)
{
	Session s = session(state, peer_id);

	if (cm_match_inbound(&s, &in) != want)
		g_error("attr 0x%x in state %s (peer id %#x): got %d, want %d", in.attr,
			session_state_name(state), peer_id, cm_match_inbound(&s, &in), want);
}

/* One message kind, from the peer with both ids right, in a list of
 * session states: the verdict each state must give. */
typedef struct {
	SessionState state;
	CmMatch want;
} StateVerdict;

static void check_states(uint16_t attr, const StateVerdict *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		check(cases[i].state, PEER_ID, from_peer(attr), cases[i].want);
}

#define CHECK_STATES(attr, ...)                                                 \
	check_states(attr, (const StateVerdict[]){ __VA_ARGS__ },               \
		     sizeof((const StateVerdict[]){ __VA_ARGS__ }) / sizeof(StateVerdict))

UNIT_TEST("/cm-match/sender", test_sender_checks)
{
	CmInbound in = from_peer(CM_ATTR_DREQ);

	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_ADVANCE);
	in.sender_gid = stranger_gid;
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_SPOOFED);
	in = from_peer(CM_ATTR_DREQ);
	in.arrival_gid = other_local; /* sent to another GID of the port */
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_SPOOFED);
	in.arrival_gid = NULL; /* to an index that holds nothing now */
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_SPOOFED);

	/* Without a GRH (IB, LID routed): the peer's LID once known. */
	Session s = session(SESSION_ESTABLISHED, PEER_ID);
	in = (CmInbound){ .attr = CM_ATTR_DREQ, .local_comm_id = PEER_ID,
			  .remote_comm_id = OUR_ID, .sender_lid = 7 };
	g_assert_cmpint(cm_match_inbound(&s, &in), ==, CM_MATCH_ADVANCE);
	s.peer_lid = 7;
	g_assert_cmpint(cm_match_inbound(&s, &in), ==, CM_MATCH_ADVANCE);
	in.sender_lid = 8;
	g_assert_cmpint(cm_match_inbound(&s, &in), ==, CM_MATCH_SPOOFED);

	/* A peer GID not known yet (IB with a GRH): any sender passes. */
	s = session(SESSION_ESTABLISHED, PEER_ID);
	memset(s.peer_gid, 0, GID_LEN);
	in = from_peer(CM_ATTR_DREQ);
	in.sender_gid = stranger_gid;
	g_assert_cmpint(cm_match_inbound(&s, &in), ==, CM_MATCH_ADVANCE);
}

UNIT_TEST("/cm-match/comm-id-pair", test_comm_id_pair)
{
	CmInbound in = from_peer(CM_ATTR_DREQ);

	in.local_comm_id = PEER_ID + 1; /* a made-up LocalCommID */
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_SPOOFED);
	/* Before the peer's id is known, nothing that needs it matches. */
	check(SESSION_REQ_SENT, 0, from_peer(CM_ATTR_DREQ), CM_MATCH_SPOOFED);
	check(SESSION_REQ_SENT, 0, from_peer(CM_ATTR_RTU), CM_MATCH_SPOOFED);
	in = from_peer(CM_ATTR_REJ);
	in.msg_rejected = CM_MSG_OTHER;
	check(SESSION_REQ_SENT, 0, in, CM_MATCH_SPOOFED);
}

UNIT_TEST("/cm-match/rep", test_rep)
{
	CmInbound in = from_peer(CM_ATTR_REP);

	/* The first REP: only while the REQ waits. */
	check(SESSION_REQ_SENT, 0, in, CM_MATCH_ADVANCE);
	check(SESSION_ESTABLISHED, 0, in, CM_MATCH_BAD_STATE);
	check(SESSION_CLOSING, 0, in, CM_MATCH_BAD_STATE);
	check(SESSION_REQ_RCVD, 0, in, CM_MATCH_BAD_STATE);
	/* Later copies pass unchanged; another LocalCommID is a forgery. */
	check(SESSION_REP_RCVD, PEER_ID, in, CM_MATCH_REPEAT);
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_REPEAT);
	check(SESSION_CLOSING, PEER_ID, in, CM_MATCH_BAD_STATE);
	check(SESSION_REP_SENT, PEER_ID, in, CM_MATCH_BAD_STATE);
	in.local_comm_id = 0x9999;
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_SPOOFED);
	/* From a stranger, even the first REP is refused. */
	in = from_peer(CM_ATTR_REP);
	in.sender_gid = stranger_gid;
	check(SESSION_REQ_SENT, 0, in, CM_MATCH_SPOOFED);
}

UNIT_TEST("/cm-match/rtu-dreq-drep", test_rtu_dreq_drep)
{
	CHECK_STATES(CM_ATTR_RTU, { SESSION_REP_SENT, CM_MATCH_ADVANCE },
		     { SESSION_ESTABLISHED, CM_MATCH_REPEAT }, { SESSION_REQ_RCVD, CM_MATCH_BAD_STATE },
		     { SESSION_CLOSING, CM_MATCH_BAD_STATE });
	CHECK_STATES(CM_ATTR_DREQ, { SESSION_ESTABLISHED, CM_MATCH_ADVANCE },
		     { SESSION_REP_SENT, CM_MATCH_ADVANCE }, { SESSION_CLOSING, CM_MATCH_ADVANCE },
		     { SESSION_REQ_RCVD, CM_MATCH_BAD_STATE }, { SESSION_REP_RCVD, CM_MATCH_BAD_STATE });
	CHECK_STATES(CM_ATTR_DREP, { SESSION_CLOSING, CM_MATCH_ADVANCE },
		     { SESSION_ESTABLISHED, CM_MATCH_BAD_STATE });
}

UNIT_TEST("/cm-match/rej", test_rej)
{
	CmInbound in = from_peer(CM_ATTR_REJ);

	/* The peer rejects our client's REQ: its id is not known yet. */
	in.msg_rejected = CM_MSG_REQ;
	in.local_comm_id = 0;
	check(SESSION_REQ_SENT, 0, in, CM_MATCH_ADVANCE);
	check(SESSION_REQ_SENT, PEER_ID, in, CM_MATCH_SPOOFED);
	check(SESSION_ESTABLISHED, 0, in, CM_MATCH_BAD_STATE);
	/* Rejecting the client's REP, or aborting later: the pair. */
	in = from_peer(CM_ATTR_REJ);
	in.msg_rejected = CM_MSG_REP;
	check(SESSION_REP_SENT, PEER_ID, in, CM_MATCH_ADVANCE);
	check(SESSION_REQ_RCVD, PEER_ID, in, CM_MATCH_ADVANCE);
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_ADVANCE);
	check(SESSION_SIDR_SENT, PEER_ID, in, CM_MATCH_BAD_STATE);
	in.local_comm_id = 0x4444;
	check(SESSION_REP_SENT, PEER_ID, in, CM_MATCH_SPOOFED);
	/* REJ(Timeout) with RemoteCommID 0, found by the peer's own id. */
	in = from_peer(CM_ATTR_REJ);
	in.remote_comm_id = 0;
	in.msg_rejected = CM_MSG_REQ;
	in.rej_reason = CM_REJ_REASON_TIMEOUT;
	check(SESSION_REQ_RCVD, PEER_ID, in, CM_MATCH_ADVANCE);
}

UNIT_TEST("/cm-match/mra-lap-apr-sidr", test_mra_lap_apr_sidr)
{
	CmInbound in = from_peer(CM_ATTR_MRA);

	in.msg_mraed = CM_MSG_REQ;
	check(SESSION_REQ_SENT, 0, in, CM_MATCH_ADVANCE);
	check(SESSION_REQ_SENT, PEER_ID, in, CM_MATCH_SPOOFED);
	check(SESSION_ESTABLISHED, 0, in, CM_MATCH_BAD_STATE);
	in.msg_mraed = CM_MSG_REP;
	check(SESSION_REP_SENT, PEER_ID, in, CM_MATCH_ADVANCE);
	check(SESSION_REQ_SENT, PEER_ID, in, CM_MATCH_BAD_STATE);
	in.msg_mraed = CM_MSG_OTHER;
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_REPEAT);
	check(SESSION_REQ_RCVD, PEER_ID, in, CM_MATCH_BAD_STATE);
	in.msg_mraed = 3; /* reserved */
	check(SESSION_ESTABLISHED, PEER_ID, in, CM_MATCH_BAD_STATE);

	CHECK_STATES(CM_ATTR_LAP, { SESSION_ESTABLISHED, CM_MATCH_REPEAT },
		     { SESSION_REP_SENT, CM_MATCH_BAD_STATE });
	CHECK_STATES(CM_ATTR_APR, { SESSION_ESTABLISHED, CM_MATCH_REPEAT });

	check(SESSION_SIDR_SENT, 0, from_peer(CM_ATTR_SIDR_REP), CM_MATCH_ADVANCE);
	check(SESSION_ESTABLISHED, 0, from_peer(CM_ATTR_SIDR_REP), CM_MATCH_BAD_STATE);
	in = from_peer(CM_ATTR_SIDR_REP);
	in.sender_gid = stranger_gid;
	check(SESSION_SIDR_SENT, 0, in, CM_MATCH_SPOOFED);
}

UNIT_TEST("/cm-match/repeated-requests", test_repeated_requests)
{
	CHECK_STATES(CM_ATTR_REQ, { SESSION_REQ_RCVD, CM_MATCH_ADVANCE },
		     { SESSION_REP_SENT, CM_MATCH_REPEAT }, { SESSION_ESTABLISHED, CM_MATCH_REPEAT },
		     { SESSION_SIDR_RCVD, CM_MATCH_BAD_STATE });
	CHECK_STATES(CM_ATTR_SIDR_REQ, { SESSION_SIDR_RCVD, CM_MATCH_ADVANCE },
		     { SESSION_REQ_RCVD, CM_MATCH_BAD_STATE });
}

UNIT_TEST_MAIN()
