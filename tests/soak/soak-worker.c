/* SPDX-License-Identifier: MIT */
/*
 * Soak worker: one forked process that plays the CMs of a range of client
 * slots, each a librdmacm-mux handle with its own GID. In run mode every
 * client starts exchanges in a loop (REQ/REP/RTU/DREQ/DREP, REQ answered
 * by REJ, SIDR_REQ/SIDR_REP) with random peers, answers the exchanges its
 * peers start, retransmits on timeout as a real CM does (the fabric drops,
 * duplicates, delays and reorders MADs), and disconnects and reconnects at
 * random. The orchestrator SIGKILLs whole workers mid-handshake.
 *
 * Every MAD a client receives is checked for misrouting:
 *  - the daemon's local GID and the "to" GID the sender stamped into the
 *    MAD's private data (bytes 240..255) are the client's own GID, and the
 *    "from" GID (bytes 224..239) is the sender address the daemon reports;
 *  - a REJ or MRA with RemoteCommID 0 refers to a REQ this client got;
 *  - any other MAD carries in its RemoteCommID (SIDR_REP: RequestID) one of
 *    this incarnation's own comm ids, which are (slot, incarnation, seq)
 *    tagged, so a MAD meant for another client or for an earlier
 *    incarnation of the same slot cannot pass.
 */
#include "soak.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MAX_CONN 12
#define RECENT_REQS 64
#define SERVICE_ACCEPT 0x01064e20u
#define SERVICE_REJECT 0x01064e21u
#define OFF_FROM 224
#define OFF_TO 240
#define TIMEWAIT_MS 1000
#define MAX_SEQ 60000

enum conn_state {
	C_FREE,
	A_REQ_SENT,
	A_ESTABLISHED,
	A_DREQ_SENT,
	A_SIDR_SENT,
	P_REP_SENT,
	P_REJ_SENT,
	P_ESTABLISHED,
	P_DREQ_SENT,
	P_TIMEWAIT,
};

typedef struct Conn {
	uint8_t state;
	uint8_t tries;
	uint32_t my_id;	  /* our comm id (0 for a REJ of a REQ) */
	uint32_t peer_id; /* the peer's comm id as we see it */
	uint8_t peer_gid[IB_GID_LEN];
	int64_t timer; /* usec, monotonic */
	uint8_t last[256]; /* the MAD to repeat */
} Conn;

typedef struct Client {
	unsigned slot;
	uint8_t gid[IB_GID_LEN];
	struct rdmacm_mux *mux; /* NULL while disconnected */
	uint32_t tag;		/* slot << 4 | incarnation & 15 */
	uint32_t next_seq;
	int64_t next_start; /* usec: next exchange (connected) or reopen (not) */
	int64_t close_at;   /* usec: churn; 0 never */
	Conn conn[MAX_CONN];
	struct {
		uint8_t gid[IB_GID_LEN];
		uint32_t id;
	} recent[RECENT_REQS];
	unsigned n_recent;
	unsigned partner; /* holder mode */
} Client;

typedef struct Worker {
	const SoakWorkerConfig *cfg;
	SoakShared *sh;
	SoakWorkerStats *st;
	uint64_t rng;
	uint32_t tid;
	Client *c;
	unsigned n;
	int64_t now;
} Worker;

void soak_slot_gid(unsigned slot, uint8_t gid[IB_GID_LEN])
{
	memset(gid, 0, IB_GID_LEN);
	gid[10] = 0xff;
	gid[11] = 0xff;
	gid[12] = 10;
	gid[13] = (uint8_t)(1 + soak_slot_host(slot));
	gid[14] = (uint8_t)(slot >> 8);
	gid[15] = (uint8_t)slot;
}

static uint64_t rnd(Worker *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi] milliseconds, as usec. */
static int64_t rnd_ms(Worker *w, int lo, int hi)
{
	return ((int64_t)lo + (int64_t)(rnd(w) % (uint64_t)(hi - lo + 1))) * 1000;
}

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void gid_text(const uint8_t gid[IB_GID_LEN], char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len))
		g_strlcpy(buf, "?", len);
}

static void misroute(Worker *w, Client *c, const struct rdmacm_mux_inbound *in, const char *why)
{
	uint32_t i = __atomic_fetch_add(&w->sh->n_misroute_log, 1, __ATOMIC_RELAXED);
	char mine[INET6_ADDRSTRLEN], local[INET6_ADDRSTRLEN], to[INET6_ADDRSTRLEN], from[INET6_ADDRSTRLEN];
	char line[512];

	w->st->misroutes++;
	gid_text(c->gid, mine, sizeof(mine));
	gid_text(in->local_gid, local, sizeof(local));
	gid_text(in->mad + OFF_TO, to, sizeof(to));
	gid_text(in->addr.gid, from, sizeof(from));
	snprintf(line, sizeof(line),
		 "MISROUTE (%s): slot %u gid %s tag 0x%x next_seq %u got attr 0x%02x local 0x%08x "
		 "remote 0x%08x daemon-gid %s to %s from %s",
		 why, c->slot, mine, c->tag, c->next_seq, mad_attr(in->mad), mad_local(in->mad),
		 mad_remote(in->mad), local, to, from);
	if (i < SOAK_MISROUTE_LOG) {
		fprintf(stderr, "soak worker %u: %s\n", w->cfg->index, line);
		g_strlcpy(w->sh->misroute_log[i], line, SOAK_MISROUTE_LINE);
	}
}

/* Is @id one of the comm ids this incarnation handed out? */
static bool own_id(const Client *c, uint32_t id)
{
	return (id >> 16) == c->tag && (id & 0xffff) != 0 && (id & 0xffff) < c->next_seq;
}

static uint32_t new_id(Client *c)
{
	return c->tag << 16 | c->next_seq++;
}

/* ---- sending ---- */

static void client_close(Worker *w, Client *c, int64_t reopen_after);

static void send_mad(Worker *w, Client *c, const uint8_t dest[IB_GID_LEN], uint8_t mad[256])
{
	struct rdmacm_mux_mad_addr addr = { 0 };
	int r;

	memcpy(mad + OFF_FROM, c->gid, IB_GID_LEN);
	memcpy(mad + OFF_TO, dest, IB_GID_LEN);
	addr.qpn = htonl(1);
	addr.grh_present = 1;
	addr.hop_limit = 64;
	memcpy(addr.gid, dest, IB_GID_LEN);
	r = rdmacm_mux_send_mad(c->mux, c->gid, &addr, mad, 256, NULL);
	if (r == -ENOBUFS)
		return; /* too many requests in flight: as good as lost */
	if (r < 0) {
		w->st->broken++;
		client_close(w, c, rnd_ms(w, 10, 100));
	}
}

static Conn *conn_new(Client *c)
{
	for (int i = 0; i < MAX_CONN; i++)
		if (c->conn[i].state == C_FREE) {
			memset(&c->conn[i], 0, sizeof(c->conn[i]));
			return &c->conn[i];
		}
	return NULL;
}

static Conn *conn_by_id(Client *c, uint32_t my_id)
{
	for (int i = 0; i < MAX_CONN; i++)
		if (c->conn[i].state != C_FREE && c->conn[i].my_id == my_id)
			return &c->conn[i];
	return NULL;
}

static Conn *conn_by_peer(Client *c, const uint8_t gid[IB_GID_LEN], uint32_t peer_id)
{
	for (int i = 0; i < MAX_CONN; i++)
		if (c->conn[i].state >= P_REP_SENT && c->conn[i].peer_id == peer_id &&
		    memcmp(c->conn[i].peer_gid, gid, IB_GID_LEN) == 0)
			return &c->conn[i];
	return NULL;
}

/* Send @mad for @k and remember it for retransmission. */
static void conn_send(Worker *w, Client *c, Conn *k, uint8_t state, const uint8_t mad[256])
{
	k->state = state;
	k->tries = 1;
	memcpy(k->last, mad, 256);
	k->timer = w->now + (int64_t)w->cfg->rto_ms * 1000;
	send_mad(w, c, k->peer_gid, k->last);
}

static void conn_resend(Worker *w, Client *c, Conn *k)
{
	k->tries++;
	k->timer = w->now + (int64_t)w->cfg->rto_ms * 1000;
	w->st->retransmits++;
	send_mad(w, c, k->peer_gid, k->last);
}

/* ---- exchanges this client starts ---- */

static void start_exchange(Worker *w, Client *c)
{
	uint8_t mad[256], peer[IB_GID_LEN];
	unsigned slot;
	unsigned dice = (unsigned)(rnd(w) % 100);
	Conn *k;

	if (c->next_seq >= MAX_SEQ)
		return;
	if (w->cfg->holder) {
		slot = c->partner;
	} else {
		do
			slot = (unsigned)(rnd(w) % w->cfg->peer_slots);
		while (slot == c->slot);
	}
	k = conn_new(c);
	if (!k)
		return;
	soak_slot_gid(slot, peer);
	memcpy(k->peer_gid, peer, IB_GID_LEN);
	k->my_id = new_id(c);
	if (!w->cfg->holder && dice < 20) {
		mad_build(mad, CM_SIDR_REQ, k->my_id, 0, ++w->tid);
		mad_set_service_id(mad, SERVICE_ACCEPT);
		w->st->sidr_started++;
		conn_send(w, c, k, A_SIDR_SENT, mad);
		return;
	}
	mad_build_req(mad, k->my_id, c->gid, peer, ++w->tid);
	if (!w->cfg->holder && dice < 30)
		mad_set_service_id(mad, SERVICE_REJECT);
	w->st->conn_started++;
	conn_send(w, c, k, A_REQ_SENT, mad);
}

/* ---- timers ---- */

static void conn_timer(Worker *w, Client *c, Conn *k, bool quiesce)
{
	uint8_t mad[256];
	bool give_up = k->tries >= w->cfg->max_tries;

	switch (k->state) {
	case A_REQ_SENT:
		if (!give_up) {
			conn_resend(w, c, k);
			return;
		}
		/* REJ(Timeout): RemoteCommID 0, as a CM that got no REP. */
		mad_build(mad, CM_REJ, k->my_id, 0, ++w->tid);
		mad_set_rej(mad, 1, 4); /* MessageRejected: REP; Reason: Timeout */
		send_mad(w, c, k->peer_gid, mad);
		w->st->conn_gave_up++;
		k->state = C_FREE;
		return;
	case A_SIDR_SENT:
		if (!give_up) {
			conn_resend(w, c, k);
			return;
		}
		w->st->sidr_gave_up++;
		k->state = C_FREE;
		return;
	case A_ESTABLISHED:
	case P_ESTABLISHED:
		if (w->cfg->holder && !quiesce) {
			k->timer = INT64_MAX;
			return;
		}
		mad_build(mad, CM_DREQ, k->my_id, k->peer_id, ++w->tid);
		conn_send(w, c, k, k->state == A_ESTABLISHED ? A_DREQ_SENT : P_DREQ_SENT, mad);
		return;
	case A_DREQ_SENT:
	case P_DREQ_SENT:
	case P_REP_SENT:
		if (!give_up) {
			conn_resend(w, c, k);
			return;
		}
		k->state = C_FREE;
		return;
	default: /* P_REJ_SENT, P_TIMEWAIT */
		k->state = C_FREE;
		return;
	}
}

/* ---- inbound ---- */

static void remember_req(Client *c, const uint8_t gid[IB_GID_LEN], uint32_t id)
{
	unsigned i = c->n_recent++ % RECENT_REQS;

	memcpy(c->recent[i].gid, gid, IB_GID_LEN);
	c->recent[i].id = id;
}

static bool seen_req(const Client *c, const uint8_t gid[IB_GID_LEN], uint32_t id)
{
	unsigned n = MIN(c->n_recent, RECENT_REQS);

	for (unsigned i = 0; i < n; i++)
		if (c->recent[i].id == id && memcmp(c->recent[i].gid, gid, IB_GID_LEN) == 0)
			return true;
	return false;
}

/* Returns false when the MAD fails a routing check (already reported). */
static bool check_routing(Worker *w, Client *c, const struct rdmacm_mux_inbound *in)
{
	uint16_t attr = mad_attr(in->mad);

	if (in->mad_len != 256)
		return misroute(w, c, in, "length"), false;
	if (memcmp(in->local_gid, c->gid, IB_GID_LEN) != 0)
		return misroute(w, c, in, "daemon says another GID"), false;
	if (memcmp(in->mad + OFF_TO, c->gid, IB_GID_LEN) != 0)
		return misroute(w, c, in, "addressed to another GID"), false;
	if (memcmp(in->mad + OFF_FROM, in->addr.gid, IB_GID_LEN) != 0)
		return misroute(w, c, in, "sender address is not the sender"), false;
	switch (attr) {
	case CM_REQ:
	case CM_SIDR_REQ:
		return true;
	case CM_SIDR_REP:
		if (!own_id(c, mad_local(in->mad)))
			return misroute(w, c, in, "SIDR_REP RequestID is not ours"), false;
		return true;
	case CM_REJ:
	case CM_MRA:
		if (mad_remote(in->mad) == 0) {
			if (!seen_req(c, in->addr.gid, mad_local(in->mad)))
				return misroute(w, c, in, "REJ/MRA of a REQ we never got"), false;
			return true;
		}
		break;
	default:
		break;
	}
	if (!own_id(c, mad_remote(in->mad)))
		return misroute(w, c, in, "RemoteCommID is not ours"), false;
	return true;
}

static void on_req(Worker *w, Client *c, const struct rdmacm_mux_inbound *in, bool quiesce)
{
	uint32_t peer_id = mad_local(in->mad);
	Conn *k = conn_by_peer(c, in->addr.gid, peer_id);
	uint8_t mad[256];

	remember_req(c, in->addr.gid, peer_id);
	if (k) {
		/* A retransmission: our answer was lost. */
		if (k->state == P_REP_SENT || k->state == P_REJ_SENT)
			send_mad(w, c, k->peer_gid, k->last);
		return;
	}
	if (quiesce)
		return;
	k = conn_new(c);
	if (!k)
		return; /* busy: the peer retransmits or gives up */
	memcpy(k->peer_gid, in->addr.gid, IB_GID_LEN);
	k->peer_id = peer_id;
	if (mad_service_id(in->mad) == SERVICE_REJECT) {
		mad_build(mad, CM_REJ, 0, peer_id, ++w->tid);
		mad_set_rej(mad, 0, 28); /* MessageRejected: REQ; Reason: consumer defined */
		w->st->passive_rej++;
		conn_send(w, c, k, P_REJ_SENT, mad);
		k->timer = w->now + TIMEWAIT_MS * 1000;
		return;
	}
	k->my_id = new_id(c);
	mad_build(mad, CM_REP, k->my_id, peer_id, ++w->tid);
	w->st->passive_rep++;
	conn_send(w, c, k, P_REP_SENT, mad);
}

static void on_mad(Worker *w, Client *c, const struct rdmacm_mux_inbound *in, bool quiesce)
{
	uint16_t attr = mad_attr(in->mad);
	uint8_t mad[256];
	Conn *k;

	w->st->received++;
	if (!check_routing(w, c, in))
		return;
	switch (attr) {
	case CM_REQ:
		on_req(w, c, in, quiesce);
		return;
	case CM_SIDR_REQ:
		mad_build(mad, CM_SIDR_REP, mad_local(in->mad), 0, ++w->tid);
		mad_set_sidr_rep_qpn(mad, 0x03);
		w->st->sidr_answered++;
		send_mad(w, c, in->addr.gid, mad);
		return;
	case CM_SIDR_REP:
		k = conn_by_id(c, mad_local(in->mad));
		if (k && k->state == A_SIDR_SENT) {
			w->st->sidr_done++;
			k->state = C_FREE;
		}
		return;
	case CM_REJ:
		if (mad_remote(in->mad) == 0) {
			/* REJ(Timeout) from the active side of a REQ we got. */
			k = conn_by_peer(c, in->addr.gid, mad_local(in->mad));
			if (k)
				k->state = C_FREE;
			return;
		}
		k = conn_by_id(c, mad_remote(in->mad));
		if (k && k->state == A_REQ_SENT) {
			w->st->conn_rejected++;
			k->state = C_FREE;
		}
		return;
	default:
		break;
	}
	k = conn_by_id(c, mad_remote(in->mad));
	if (!k)
		return; /* a late duplicate of something finished */
	switch (attr) {
	case CM_REP:
		if (k->state == A_REQ_SENT) {
			k->peer_id = mad_local(in->mad);
			mad_build(mad, CM_RTU, k->my_id, k->peer_id, ++w->tid);
			send_mad(w, c, k->peer_gid, mad);
			memcpy(k->last, mad, 256);
			k->state = A_ESTABLISHED;
			k->timer = quiesce ? w->now : w->now + rnd_ms(w, 0, 300);
			if (w->cfg->holder)
				k->timer = INT64_MAX;
		} else if (k->state == A_ESTABLISHED) {
			send_mad(w, c, k->peer_gid, k->last); /* our RTU was lost */
		}
		return;
	case CM_RTU:
		if (k->state == P_REP_SENT) {
			w->st->passive_est++;
			k->state = P_ESTABLISHED;
			k->timer = w->cfg->holder ? INT64_MAX : w->now + rnd_ms(w, 1000, 3000);
		}
		return;
	case CM_DREQ:
		if (k->state == P_REP_SENT || k->state == P_ESTABLISHED || k->state == P_DREQ_SENT ||
		    k->state == P_TIMEWAIT || k->state == A_ESTABLISHED || k->state == A_DREQ_SENT) {
			mad_build(mad, CM_DREP, k->my_id, k->peer_id, ++w->tid);
			send_mad(w, c, k->peer_gid, mad);
			if (k->state == A_ESTABLISHED || k->state == A_DREQ_SENT)
				w->st->conn_done++;
			k->state = P_TIMEWAIT;
			k->timer = w->now + TIMEWAIT_MS * 1000;
		}
		return;
	case CM_DREP:
		if (k->state == A_DREQ_SENT) {
			w->st->conn_done++;
			k->state = C_FREE;
		} else if (k->state == P_DREQ_SENT) {
			k->state = C_FREE;
		}
		return;
	default:
		return;
	}
}

/* ---- connecting and disconnecting ---- */

static void client_close(Worker *w, Client *c, int64_t reopen_after)
{
	if (!c->mux)
		return;
	w->st->lib_dropped += rdmacm_mux_get_dropped(c->mux);
	rdmacm_mux_close(c->mux);
	c->mux = NULL;
	w->st->closes++;
	memset(c->conn, 0, sizeof(c->conn));
	c->next_start = w->now + reopen_after;
}

static void client_open(Worker *w, Client *c)
{
	const char *sock = w->cfg->socket[soak_slot_host(c->slot)];
	struct rdmacm_mux_response resp;
	uint32_t ticket, gen;
	int r;

	r = rdmacm_mux_open(sock, 0, 5000, &c->mux);
	if (r < 0) {
		fprintf(stderr, "soak worker %u: cannot open %s: %s\n", w->cfg->index, sock,
			rdmacm_mux_last_error(NULL));
		w->st->fatal = 1;
		_exit(1);
	}
	r = rdmacm_mux_register_gid(c->mux, c->gid, &ticket);
	if (r == 0)
		r = rdmacm_mux_wait(c->mux, ticket, 5000, &resp);
	if (r == 0 && resp.error == -EACCES) {
		/* The last incarnation's connection is not gone yet (we were
		 * killed a moment ago): the daemon still has its GID. */
		rdmacm_mux_close(c->mux);
		c->mux = NULL;
		w->st->open_retries++;
		c->next_start = w->now + 20000;
		return;
	}
	if (r < 0 || resp.error != 0) {
		fprintf(stderr, "soak worker %u: slot %u: REG failed: %s / %s\n", w->cfg->index,
			c->slot, g_strerror(-r), g_strerror(r < 0 ? 0 : -resp.error));
		w->st->fatal = 1;
		_exit(1);
	}
	gen = __atomic_add_fetch(&w->sh->gen[c->slot], 1, __ATOMIC_RELAXED);
	c->tag = c->slot << 4 | (gen & 15);
	c->next_seq = 1;
	c->n_recent = 0;
	memset(c->conn, 0, sizeof(c->conn));
	w->st->opens++;
	c->next_start = w->now + rnd_ms(w, 0, w->cfg->think_ms);
	c->close_at = w->cfg->holder ? 0 : w->now + rnd_ms(w, w->cfg->lifetime_ms / 4,
							    w->cfg->lifetime_ms * 7 / 4);
}

static void drain_responses(Worker *w, Client *c)
{
	struct rdmacm_mux_response resp;

	while (c->mux && rdmacm_mux_next_response(c->mux, &resp) == 0) {
		if (resp.op_code != RDMACM_MUX_OP_CODE_MAD)
			continue;
		if (resp.error == 0)
			w->st->sent++;
		else if (resp.error == -EIO)
			w->st->send_eio++;
		else if (resp.error == -ENOENT)
			w->st->send_enoent++;
		else {
			w->st->send_other++;
			w->st->send_other_last = resp.error;
		}
	}
}

static void client_io(Worker *w, Client *c, bool quiesce)
{
	struct rdmacm_mux_inbound in;
	int r = rdmacm_mux_process(c->mux);

	if (r < 0 && r != -ENOBUFS) {
		w->st->broken++;
		client_close(w, c, rnd_ms(w, 10, 100));
		return;
	}
	drain_responses(w, c);
	while (c->mux && rdmacm_mux_recv_mad(c->mux, &in) == 0)
		on_mad(w, c, &in, quiesce);
	drain_responses(w, c);
}

static void client_timers(Worker *w, Client *c, int phase)
{
	bool quiesce = phase != SOAK_PHASE_RUN;

	if (!c->mux) {
		if (!quiesce && w->now >= c->next_start)
			client_open(w, c);
		return;
	}
	if (!quiesce && c->close_at && w->now >= c->close_at) {
		/* Leave at a random moment, whatever is in flight. */
		client_close(w, c, rnd_ms(w, 0, 500));
		return;
	}
	for (int i = 0; i < MAX_CONN && c->mux; i++) {
		Conn *k = &c->conn[i];

		if (k->state == C_FREE)
			continue;
		if (quiesce && (k->state == A_ESTABLISHED || k->state == P_ESTABLISHED) &&
		    k->timer > w->now)
			k->timer = w->now; /* the application closes everything */
		if (w->now >= k->timer)
			conn_timer(w, c, k, quiesce);
	}
	if (!quiesce && c->mux && w->now >= c->next_start) {
		unsigned active = 0;

		for (int i = 0; i < MAX_CONN; i++)
			active += c->conn[i].state >= A_REQ_SENT && c->conn[i].state <= A_SIDR_SENT;
		if (w->cfg->holder) {
			/* The first attempt, or again after one that gave up. */
			if (soak_slot_host(c->slot) == 0 && active == 0)
				start_exchange(w, c);
			c->next_start = w->now + 50000;
		} else {
			if (active < 2)
				start_exchange(w, c);
			c->next_start = w->now + rnd_ms(w, 0, 2 * w->cfg->think_ms);
		}
	}
}

/* SOAK_PHASE_STATS: every open handle's own view from the daemon. */
static void report_stats(Worker *w)
{
	uint32_t clients = 0, sessions = 0, queued = 0, failed = 0;

	for (unsigned i = 0; i < w->n; i++) {
		Client *c = &w->c[i];
		struct rdmacm_mux_response resp;
		uint32_t ticket;

		if (!c->mux)
			continue;
		clients++;
		if (rdmacm_mux_query_stats(c->mux, &ticket) < 0 ||
		    rdmacm_mux_wait(c->mux, ticket, 5000, &resp) < 0 || resp.error != 0) {
			failed++;
			continue;
		}
		sessions += resp.stats.sessions;
		queued += resp.stats.queued;
		drain_responses(w, c);
	}
	w->st->stats_clients = clients;
	w->st->stats_sessions = sessions;
	w->st->stats_queued = queued;
	w->st->stats_failed = failed;
	__atomic_store_n(&w->st->stats_done, 1, __ATOMIC_RELEASE);
}

static void holder_count(Worker *w)
{
	uint32_t est = 0;

	for (unsigned i = 0; i < w->n; i++)
		for (int j = 0; j < MAX_CONN; j++) {
			uint8_t s = w->c[i].conn[j].state;

			est += s == A_ESTABLISHED || s == P_ESTABLISHED;
		}
	w->st->holder_established = est;
}

G_NORETURN void soak_worker_main(const SoakWorkerConfig *cfg, SoakShared *sh)
{
	Worker w = { .cfg = cfg, .sh = sh, .st = &sh->w[cfg->index] };
	struct pollfd *pfd;
	Client **who;
	bool stats_reported = false;

	signal(SIGPIPE, SIG_IGN);
	w.rng = cfg->seed ^ ((uint64_t)cfg->index << 32) ^ (uint64_t)getpid();
	w.n = cfg->nslots;
	w.c = g_new0(Client, w.n);
	pfd = g_new0(struct pollfd, w.n);
	who = g_new0(Client *, w.n);
	w.now = mono_us();
	for (unsigned i = 0; i < w.n; i++) {
		Client *c = &w.c[i];

		c->slot = cfg->first_slot + i;
		c->partner = c->slot + 1;
		soak_slot_gid(c->slot, c->gid);
		c->next_start = w.now + rnd_ms(&w, 0, 200);
	}

	for (;;) {
		/* A holder keeps its connections whatever the others do. */
		int phase = cfg->holder ? SOAK_PHASE_RUN
					: __atomic_load_n(&sh->phase, __ATOMIC_ACQUIRE);
		nfds_t n = 0;

		w.now = mono_us();
		for (unsigned i = 0; i < w.n; i++)
			client_timers(&w, &w.c[i], phase);
		if (cfg->holder)
			holder_count(&w);
		if (phase == SOAK_PHASE_STATS && !stats_reported) {
			report_stats(&w);
			stats_reported = true;
		}
		for (unsigned i = 0; i < w.n; i++) {
			if (!w.c[i].mux)
				continue;
			pfd[n].fd = rdmacm_mux_get_fd(w.c[i].mux);
			pfd[n].events = rdmacm_mux_get_events(w.c[i].mux);
			pfd[n].revents = 0;
			who[n++] = &w.c[i];
		}
		if (poll(pfd, n, 10) < 0 && errno != EINTR) {
			fprintf(stderr, "soak worker %u: poll: %s\n", cfg->index, g_strerror(errno));
			w.st->fatal = 1;
			_exit(1);
		}
		w.now = mono_us();
		for (nfds_t i = 0; i < n; i++)
			if (pfd[i].revents && who[i]->mux)
				client_io(&w, who[i], phase != SOAK_PHASE_RUN);
	}
}
