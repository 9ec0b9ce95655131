/* SPDX-License-Identifier: MIT */
/*
 * Whether an inbound CM MAD may act on the session it names, by the rules
 * the kernel's ib_cm applies before it lets a message touch a connection:
 *
 *   - the comm id pair: once the peer's LocalCommID is known (from its REQ,
 *     or its first REP), every message that carries one must carry it; a
 *     message that ib_cm matches with "no remote id yet" (a REP, a REJ or
 *     MRA of a REQ) only fits while it is still unknown;
 *   - who sent it: with a GRH, the session's peer GID (once known) and the
 *     local GID the session belongs to; without one, the peer's LID;
 *   - the state: a REP only while the client's REQ waits for one (later
 *     copies are repeats), an RTU only after the client's REP, a DREQ only
 *     on an established session (or one closing, as a retry), a DREP only
 *     on a closing one, an MRA only for the message it delays, LAP and APR
 *     only when established, a SIDR_REP only for a waiting SIDR_REQ.
 *
 * Pure functions over a Session and a summary of the message, so that every
 * rule is unit tested on its own (test-cm-match.c).
 */
#ifndef RDMACM_MUX_CM_MATCH_H
#define RDMACM_MUX_CM_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "cm-codec.h"
#include "session-table.h"

/* What the relay knows of an inbound message when it has found its session. */
typedef struct CmInbound {
	uint16_t attr;
	uint32_t local_comm_id;	 /* the sender's LocalCommID (not for SIDR) */
	uint32_t remote_comm_id; /* ours as the sender knows it, or 0 */
	unsigned msg_rejected;	 /* REJ: CM_MSG_* */
	uint16_t rej_reason;	 /* REJ */
	unsigned msg_mraed;	 /* MRA: CM_MSG_* */
	bool grh;		 /* the kernel reported a GRH */
	const uint8_t *sender_gid;  /* with a GRH: the sender's GID */
	const uint8_t *arrival_gid; /* with a GRH: the local GID it came to, or NULL */
	uint16_t sender_lid;	    /* without a GRH: the sender's LID (host order) */
} CmInbound;

typedef enum CmMatch {
	CM_MATCH_ADVANCE,   /* fits: deliver it and let it move the session */
	CM_MATCH_REPEAT,    /* a copy of one that came before: deliver, change nothing */
	CM_MATCH_SPOOFED,   /* not the session's peer, ids or local GID */
	CM_MATCH_BAD_STATE, /* cannot arrive in the session's state */
} CmMatch;

/**
 * cm_match_inbound() - judge @in against the session @s it names.
 *
 * A first REP (CM_MATCH_ADVANCE in SESSION_REQ_SENT) teaches the caller
 * the peer's comm id; nothing else may change who the peer is.
 */
CmMatch cm_match_inbound(const Session *s, const CmInbound *in);

/* Whether @in was sent by the session's peer to the session's local GID. */
bool cm_match_sender(const Session *s, const CmInbound *in);

#endif /* RDMACM_MUX_CM_MATCH_H */
