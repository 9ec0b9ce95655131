/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's sessions as the relay sees them: creating one for a
 * client's REQ or for a peer's (with the half-open budgets per client, per
 * peer GID and in all), their state through the handshake and teardown,
 * and the loop's one timer, armed for the table's earliest deadline. The
 * table, its indexes, wire ids and timer lists are daemon/sessions/'s.
 */
#include <glib.h>
#include <string.h>

#include "log.h"
#include "relay-internal.h"
#include "util.h"

SessionList *relay_session_owner(void *userdata, uint32_t client_id)
{
	Relay *r = userdata;
	RelayClient *c = relay_client_lookup(r, client_id);

	return c ? &c->sessions : NULL;
}

void relay_schedule_timer(Relay *r)
{
	uint64_t now = relay_now(r), at;

	if (!r->timer)
		return;
	at = session_table_next_deadline(r->sessions, now);
	if (at == UINT64_MAX) {
		(void)sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
		r->timer_armed_at = 0;
		return;
	}
	if (at == r->timer_armed_at)
		return;
	r->timer_armed_at = at;
	(void)sd_event_source_set_time(r->timer, at);
	(void)sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
}

/* Whose share of a client's half-open budget a session uses. */
typedef struct RelayPeerKey {
	uint32_t client_id;
	uint16_t lid;
	uint16_t zero;
	uint8_t gid[GID_LEN];
} RelayPeerKey;

guint relay_peer_key_hash(gconstpointer p)
{
	const RelayPeerKey *k = p;

	return gid_hash(k->gid) ^ (k->client_id * 2654435761u) ^ k->lid;
}

gboolean relay_peer_key_equal(gconstpointer a, gconstpointer b)
{
	return memcmp(a, b, sizeof(RelayPeerKey)) == 0;
}

static RelayPeerKey relay_peer_key(uint32_t client_id, const uint8_t *peer_gid, uint16_t peer_lid)
{
	RelayPeerKey k = { .client_id = client_id };

	if (peer_gid && !gid_is_zero(peer_gid))
		memcpy(k.gid, peer_gid, GID_LEN);
	else
		k.lid = peer_lid;
	return k;
}

static unsigned relay_peer_half_open(const Relay *r, const RelayPeerKey *k)
{
	return GPOINTER_TO_UINT(g_hash_table_lookup(r->half_open_peers, k));
}

static void relay_peer_half_open_add(Relay *r, const RelayPeerKey *k, int delta)
{
	unsigned n = relay_peer_half_open(r, k) + (unsigned)delta;

	if (n == 0)
		g_hash_table_remove(r->half_open_peers, k);
	else /* an existing key stays, the copy is freed */
		g_hash_table_insert(r->half_open_peers, g_memdup2(k, sizeof(*k)), GUINT_TO_POINTER(n));
}

/* The session table's removal hook: a half-open session gives its peer's
 * share back, however it goes. */
void relay_session_removed(void *userdata, const Session *s)
{
	Relay *r = userdata;

	if (s->flags & SESSION_F_HALF_OPEN) {
		RelayPeerKey k = relay_peer_key(s->client_id, s->peer_gid, s->peer_lid);

		relay_peer_half_open_add(r, &k, -1);
	}
}

static void relay_recount_one(void *userdata, const Session *s)
{
	Relay *r = userdata;

	if (s->flags & SESSION_F_HALF_OPEN) {
		RelayPeerKey k = relay_peer_key(s->client_id, s->peer_gid, s->peer_lid);

		relay_peer_half_open_add(r, &k, +1);
	}
}

void relay_recount_half_open_peers(Relay *r)
{
	g_hash_table_remove_all(r->half_open_peers);
	session_table_foreach(r->sessions, relay_recount_one, r);
}

uint32_t relay_session_new(Relay *r, RelayClient *c, SessionState state, uint64_t now)
{
	uint32_t h;

	/* The client's own budget leaves out what peers started with it and
	 * has not been established yet: a flood of REQs cannot use it up. */
	if (c->sessions.count - c->sessions.half_open >= r->cfg.max_sessions ||
	    session_table_count(r->sessions) >= r->cfg.max_total_sessions)
		return 0;
	h = session_table_add(r->sessions, &c->sessions, c->id, state, now);
	if (h) {
		r->counters->sessions_created++;
		c->stats.sessions = c->sessions.count;
	}
	return h;
}

RxDrop relay_session_check_remote(Relay *r, const RelayClient *c, const uint8_t *peer_gid,
				  uint16_t peer_lid)
{
	RelayPeerKey k = relay_peer_key(c->id, peer_gid, peer_lid);

	if (session_table_count(r->sessions) >= r->cfg.max_total_sessions)
		return RX_DROP_SESSION_QUOTA;
	/* Its half-open budget, and room for the session once established:
	 * a client holds at most max_sessions + max_half_open. */
	if (c->sessions.half_open >= r->cfg.max_half_open ||
	    c->sessions.count >= r->cfg.max_sessions + r->cfg.max_half_open ||
	    session_table_half_open_count(r->sessions) >= r->cfg.max_total_half_open)
		return RX_DROP_HALF_OPEN_QUOTA;
	if (relay_peer_half_open(r, &k) >= r->cfg.max_half_open_per_peer)
		return RX_DROP_PEER_QUOTA;
	return RX_DROP_COUNT;
}

uint32_t relay_session_new_remote(Relay *r, RelayClient *c, SessionState state,
				  const uint8_t *peer_gid, uint16_t peer_lid, uint64_t now)
{
	RelayPeerKey k = relay_peer_key(c->id, peer_gid, peer_lid);
	uint32_t h = session_table_add(r->sessions, &c->sessions, c->id, state, now);
	Session *s = session_table_get(r->sessions, h);

	if (!s)
		return 0;
	s->flags |= SESSION_F_REMOTE;
	if (peer_gid)
		memcpy(s->peer_gid, peer_gid, GID_LEN);
	s->peer_lid = peer_lid;
	session_table_set_half_open(r->sessions, &c->sessions, h, true);
	relay_peer_half_open_add(r, &k, +1);
	r->counters->sessions_created++;
	c->stats.sessions = c->sessions.count;
	return h;
}

/* A peer-started session that is established leaves the half-open budget. */
static void relay_session_established(Relay *r, uint32_t h)
{
	Session *s = session_table_get(r->sessions, h);
	RelayClient *c;

	if (!s || !(s->flags & SESSION_F_HALF_OPEN))
		return;
	c = relay_client_lookup(r, s->client_id);
	if (!c)
		return;
	RelayPeerKey k = relay_peer_key(s->client_id, s->peer_gid, s->peer_lid);
	relay_peer_half_open_add(r, &k, -1);
	session_table_set_half_open(r->sessions, &c->sessions, h, false);
}

/* Move a session to CLOSING and (re)arm its removal timer. */
static void relay_session_close(Relay *r, uint32_t h, uint64_t now)
{
	Session *s = session_table_get(r->sessions, h);

	if (!s)
		return;
	s->state = SESSION_CLOSING;
	session_table_arm(r->sessions, h, SESSION_TIMER_CLOSING, now);
}

/*
 * The state change a message makes to its session, the same whichever
 * way it goes: RTU establishes (no timer: an established connection is
 * quiet for hours), DREQ/DREP/REJ start the removal timer (re-armed by
 * duplicates), REP and MRA re-arm the handshake timer.
 */
void relay_session_advance(Relay *r, uint32_t h, Session *s, uint16_t attr, bool rx,
			   uint64_t now)
{
	/* A closing session stays closing: a late, duplicated or reordered
	 * RTU, REP or MRA must not bring it back, or it would live for as
	 * long as its client. Only the disconnect messages re-arm it. */
	if (s->state == SESSION_CLOSING && attr != CM_ATTR_DREQ && attr != CM_ATTR_DREP &&
	    attr != CM_ATTR_REJ)
		return;
	/* The common case: an RTU (or repeat) on an established session. */
	if (attr == CM_ATTR_RTU && s->state == SESSION_ESTABLISHED && s->timer == SESSION_TIMER_NONE)
		return;
	switch (attr) {
	case CM_ATTR_REP:
		s->state = rx ? SESSION_REP_RCVD : SESSION_REP_SENT;
		session_table_arm(r->sessions, h, SESSION_TIMER_HANDSHAKE, now);
		break;
	case CM_ATTR_RTU:
		s->state = SESSION_ESTABLISHED;
		session_table_arm(r->sessions, h, SESSION_TIMER_NONE, now);
		relay_session_established(r, h);
		break;
	case CM_ATTR_DREQ:
	case CM_ATTR_DREP:
	case CM_ATTR_REJ:
		relay_session_close(r, h, now);
		break;
	case CM_ATTR_MRA:
		if (s->state != SESSION_ESTABLISHED && s->state != SESSION_CLOSING)
			session_table_arm(r->sessions, h, SESSION_TIMER_HANDSHAKE, now);
		break;
	default: /* LAP, APR: no change */
		break;
	}
}

int relay_on_session_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	Relay *r = userdata;
	unsigned n;

	(void)s;
	r->timer_armed_at = 0;
	n = session_table_expire(r->sessions, usec, relay_session_owner, r);
	r->counters->sessions_expired += n;
	if (n)
		log_debug("%u sessions expired", n);
	relay_schedule_timer(r);
	return 0;
}

/* Run the session timers up to relay_now(). */
unsigned relay_expire_sessions(Relay *r)
{
	unsigned n = session_table_expire(r->sessions, relay_now(r), relay_session_owner, r);

	r->counters->sessions_expired += n;
	return n;
}

