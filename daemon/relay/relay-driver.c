/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's test seam (relay-driver.h): an in-process driver with
 * virtual clients, injected wire MADs, the caller's clock, stand-in
 * senders, and the invariant checks. Linked into unit tests and fuzzers
 * only, never into the daemon.
 */
#include "relay-driver.h"

#include <string.h>

#include "handoff-relay.h"
#include "relay-internal.h"
#include "util.h"

/* What the loop would do next: serve the clients that may read again
 * (the resume source), until none is left (each round reads frames, so
 * this ends). */
static void relay_driver_settle(Relay *r)
{
	relay_flush_dirty(r);
	while (r->resumed->len > 0)
		relay_serve_resumed(r);
}

/* ---- the clock and the stand-in senders ---- */

/* The driver's edges of one relay: its clock (the relay's UsecClock reads
 * it) and its senders (the relay's workers). Freed with the relay. */
typedef struct RelayDriverEdges {
	uint64_t now;
	unsigned wanted, live;
	bool stopped;
	bool write_at_once;
	UmadPort *port;
	UmadSendWorkerEvents events;
	GPtrArray *in_flight; /* UmadSendJob *, oldest first */
	UmadSenderStats stats;
	/* relay_check_invariants()'s scratch tables, kept from call to call
	 * (a fuzzer checks after every step). */
	GHashTable *wire_ids, *per_client, *half_open, *sums;
} RelayDriverEdges;

static uint64_t relay_driver_clock_now(void *userdata)
{
	return ((RelayDriverEdges *)userdata)->now;
}

static RelayDriverEdges *relay_driver_edges(const Relay *r)
{
	return r->clock.userdata;
}

static int relay_driver_sends_start(sd_event *event, UmadPort *port, const UmadSenderConfig *cfg,
				    const UmadSendWorkerEvents *events, void *arg, void **ret)
{
	RelayDriverEdges *d = arg;

	(void)event;
	(void)cfg;
	d->port = port;
	d->events = *events;
	*ret = d;
	return 0;
}

static bool relay_driver_sends_idle(void *w)
{
	RelayDriverEdges *d = w;

	return !d->stopped && d->in_flight->len < d->live;
}

static bool relay_driver_sends_available(void *w)
{
	RelayDriverEdges *d = w;

	return !d->stopped && d->live > 0;
}

static int relay_driver_sends_submit(void *w, UmadSendJob *job)
{
	RelayDriverEdges *d = w;

	if (!relay_driver_sends_idle(d))
		return -EBUSY;
	if (d->write_at_once) {
		int result = umad_port_send(d->port, &job->buf, job->len);

		d->stats.written++;
		d->events.done(d->events.userdata, job, result);
		return 0;
	}
	g_ptr_array_add(d->in_flight, job);
	return 0;
}

/* A stop cuts every write short that the caller did not end: a stall. */
static void relay_driver_sends_stop(void *w, uint64_t wait_usec)
{
	RelayDriverEdges *d = w;

	(void)wait_usec;
	if (d->stopped)
		return;
	d->stopped = true;
	while (d->in_flight->len > 0) {
		UmadSendJob *job = g_ptr_array_steal_index(d->in_flight, 0);

		d->stats.timeouts++;
		d->events.done(d->events.userdata, job, -ETIMEDOUT);
	}
}

static void relay_driver_sends_stats(void *w, UmadSenderStats *ret)
{
	RelayDriverEdges *d = w;

	*ret = d->stats;
	ret->wanted = d->wanted;
	ret->live = d->stopped ? 0 : d->live;
	ret->starting = 0;
}

static void relay_driver_sends_free(void *w)
{
	RelayDriverEdges *d = w;

	g_ptr_array_free(d->in_flight, TRUE);
	g_hash_table_unref(d->wire_ids);
	g_hash_table_unref(d->per_client);
	g_hash_table_unref(d->half_open);
	g_hash_table_unref(d->sums);
	g_free(d);
}

static const UmadSendWorkersOps relay_driver_sends_ops = {
	.start = relay_driver_sends_start,
	.idle = relay_driver_sends_idle,
	.available = relay_driver_sends_available,
	.submit = relay_driver_sends_submit,
	.stop = relay_driver_sends_stop,
	.stats = relay_driver_sends_stats,
	.free = relay_driver_sends_free,
};

int relay_driver_new(sd_event *event, UmadPort *port, const RelayConfig *cfg, unsigned senders,
		     Relay **ret)
{
	RelayDriverEdges *d = g_new0(RelayDriverEdges, 1);
	RelayConfig c = *cfg;
	int e;

	d->now = 1000000;
	d->wanted = d->live = senders;
	d->in_flight = g_ptr_array_new();
	d->wire_ids = g_hash_table_new(g_direct_hash, g_direct_equal);
	d->per_client = g_hash_table_new(g_direct_hash, g_direct_equal);
	d->half_open = g_hash_table_new(g_direct_hash, g_direct_equal);
	d->sums = g_hash_table_new(g_direct_hash, g_direct_equal);
	c.clock = (UsecClock){ .now = relay_driver_clock_now, .userdata = d };
	c.send_workers = &relay_driver_sends_ops;
	c.send_workers_arg = d;
	e = relay_new(event, port, &c, ret);
	/* The relay owns @d once its senders started (they free it). */
	if (e < 0 && !d->port)
		relay_driver_sends_free(d);
	return e;
}

void relay_driver_set_time(Relay *r, uint64_t now)
{
	relay_driver_edges(r)->now = now ? now : 1;
	/* A new time is a new turn of the (virtual) loop. */
	r->gid_epoch++;
}

unsigned relay_driver_sends_in_flight(Relay *r)
{
	return relay_driver_edges(r)->in_flight->len;
}

const UmadBuffer *relay_driver_send_peek(Relay *r, unsigned i, size_t *mad_len)
{
	RelayDriverEdges *d = relay_driver_edges(r);
	UmadSendJob *job;

	if (i >= d->in_flight->len)
		return NULL;
	job = g_ptr_array_index(d->in_flight, i);
	if (mad_len)
		*mad_len = job->len;
	return &job->buf;
}

int relay_driver_send_end(Relay *r, unsigned i, RelayDriverSendEnd how, int err)
{
	RelayDriverEdges *d = relay_driver_edges(r);
	UmadSendJob *job;
	int result;

	if (i >= d->in_flight->len)
		return -ENOENT;
	job = g_ptr_array_steal_index(d->in_flight, i);
	switch (how) {
	case RELAY_DRIVER_SEND_WRITE:
		result = umad_port_send(d->port, &job->buf, job->len);
		d->stats.written++;
		break;
	case RELAY_DRIVER_SEND_FAIL:
		result = err < 0 ? err : -EIO;
		d->stats.written++;
		break;
	case RELAY_DRIVER_SEND_LOSE:
		result = -EIO;
		d->stats.lost++;
		break;
	default:
		result = -ETIMEDOUT;
		d->stats.timeouts++;
		break;
	}
	d->events.done(d->events.userdata, job, result);
	relay_driver_settle(r);
	return 0;
}

void relay_driver_set_senders(Relay *r, unsigned live)
{
	RelayDriverEdges *d = relay_driver_edges(r);

	d->live = live;
	d->events.changed(d->events.userdata);
	relay_driver_settle(r);
}

void relay_driver_set_send_at_once(Relay *r, bool at_once)
{
	relay_driver_edges(r)->write_at_once = at_once;
}

void relay_driver_handoff(Relay *r)
{
	relay_stop_sends(r, 0);
	relay_handoff_prepare(r, 0);
	relay_flush_dirty(r);
	/* The loop ends here in the daemon: nothing is read any more. */
	g_array_set_size(r->resumed, 0);
}

/* ---- clients ---- */

void relay_driver_seed_wire_ids(Relay *r, uint32_t seed)
{
	session_table_seed_wire_ids(r->sessions, seed);
}

uint32_t relay_driver_add_client(Relay *r)
{
	RelayClient *c = relay_client_create(r, -1);

	return c ? c->id : 0;
}

bool relay_driver_has_client(const Relay *r, uint32_t client_id)
{
	return g_hash_table_contains(r->clients, GUINT_TO_POINTER(client_id));
}

bool relay_driver_client_paused(Relay *r, uint32_t client_id)
{
	RelayClient *c = relay_client_lookup(r, client_id);

	return c && c->reading_paused;
}

unsigned relay_driver_client_unread(Relay *r, uint32_t client_id)
{
	RelayClient *c = relay_client_lookup(r, client_id);

	return c ? (unsigned)((c->conn.in_len - c->conn.in_off) / sizeof(struct rdmacm_mux_msg)) : 0;
}

unsigned relay_driver_client_waiting(Relay *r, uint32_t client_id)
{
	RelayClient *c = relay_client_lookup(r, client_id);

	return c ? c->slow_sends : 0;
}

void relay_driver_remove_client(Relay *r, uint32_t client_id)
{
	RelayClient *c = relay_client_lookup(r, client_id);

	if (c)
		relay_drop_client(r, c, "removed by the driver");
}

/*
 * Put @m behind the frames @c sent and the relay did not read, as a
 * socket holds them: in the client's input buffer, which is all the input
 * a client without a socket has (input_drained: the relay never asks the
 * missing socket for more).
 */
static int relay_driver_push_input(Client *c, const struct rdmacm_mux_msg *m)
{
	const size_t frame = sizeof(*m);
	size_t unread = c->in_len - c->in_off;

	if (unread / frame >= CLIENT_INPUT_FRAMES)
		return -EAGAIN;
	if (c->in_off > 0) {
		memmove(c->in, (uint8_t *)c->in + c->in_off, unread);
		c->in_len = unread;
		c->in_off = 0;
	}
	if (c->in_len + frame > (size_t)c->in_cap * frame) {
		uint32_t cap = c->in_cap ? MIN(c->in_cap * 2, (uint32_t)CLIENT_INPUT_FRAMES)
					 : CLIENT_INPUT_FRAMES_FIRST;

		c->in = g_realloc(c->in, (size_t)cap * frame);
		c->in_cap = cap;
	}
	memcpy((uint8_t *)c->in + c->in_len, m, frame);
	c->in_len += frame;
	c->input_drained = true;
	return 0;
}

int relay_driver_request(Relay *r, uint32_t client_id, const struct rdmacm_mux_msg *m)
{
	RelayClient *c = relay_client_lookup(r, client_id);
	int e;

	if (!c)
		return -ENOENT;
	e = relay_driver_push_input(&c->conn, m);
	if (e < 0)
		return e;
	if (!c->reading_paused)
		relay_serve_client(r, c);
	relay_driver_settle(r);
	return 0;
}

void relay_driver_wire_mad(Relay *r, const UmadBuffer *buf, size_t mad_len)
{
	UmadBuffer copy = *buf;

	if (mad_len > RDMACM_MUX_MAD_SIZE)
		mad_len = RDMACM_MUX_MAD_SIZE;
	relay_rx_deliver(r, &copy, mad_len);
	relay_driver_settle(r);
}

unsigned relay_driver_drain(Relay *r, uint32_t client_id,
			    void (*fn)(void *userdata, const struct rdmacm_mux_msg *m),
			    void *userdata)
{
	RelayClient *c = relay_client_lookup(r, client_id);
	unsigned n;

	if (!c)
		return 0;
	n = client_drain(&c->conn, fn, userdata);
	/* The client read: what waited is read now, as the loop would. */
	relay_mark_dirty(r, c);
	relay_driver_settle(r);
	return n;
}

unsigned relay_driver_run_timers(Relay *r)
{
	return relay_expire_sessions(r);
}

typedef struct RelayInvariantCheck {
	Relay *r;
	GHashTable *wire_ids;
	GHashTable *per_client;
	GHashTable *half_open; /* client id -> its half-open sessions */
	unsigned half_open_total;
	const char *violation;
} RelayInvariantCheck;

static void relay_driver_check_session(void *userdata, const Session *s)
{
	RelayInvariantCheck *k = userdata;
	RelayClient *c = g_hash_table_lookup(k->r->clients, GUINT_TO_POINTER(s->client_id));
	guint n;

	if (k->violation)
		return;
	if (!c) {
		k->violation = "a session has no live owner";
		return;
	}
	if (s->wire_id) {
		if (g_hash_table_contains(k->wire_ids, GUINT_TO_POINTER(s->wire_id))) {
			k->violation = "a wire id is mapped twice";
			return;
		}
		g_hash_table_add(k->wire_ids, GUINT_TO_POINTER(s->wire_id));
		if (session_table_lookup_wire_id(k->r->sessions, s->wire_id) == 0) {
			k->violation = "a session's wire id does not find it";
			return;
		}
	}
	if (s->client_comm_id &&
	    !session_table_lookup_client_comm_id(k->r->sessions, s->client_id, s->client_comm_id)) {
		k->violation = "a session's client comm id does not find it";
		return;
	}
	if (s->state >= SESSION_STATE_COUNT || s->timer >= SESSION_TIMER_COUNT) {
		k->violation = "a session has a bad state or timer";
		return;
	}
	n = GPOINTER_TO_UINT(g_hash_table_lookup(k->per_client, GUINT_TO_POINTER(s->client_id)));
	g_hash_table_insert(k->per_client, GUINT_TO_POINTER(s->client_id), GUINT_TO_POINTER(n + 1));
	if (s->flags & SESSION_F_HALF_OPEN) {
		if (!(s->flags & SESSION_F_REMOTE)) {
			k->violation = "a session the client started counts as half-open";
			return;
		}
		n = GPOINTER_TO_UINT(g_hash_table_lookup(k->half_open, GUINT_TO_POINTER(s->client_id)));
		g_hash_table_insert(k->half_open, GUINT_TO_POINTER(s->client_id),
				    GUINT_TO_POINTER(n + 1));
		k->half_open_total++;
	}
}

const char *relay_check_invariants(Relay *r)
{
	const char *bad = relay_check_invariants_cheap(r);

	return bad ? bad : session_table_check(r->sessions);
}

const char *relay_check_invariants_cheap(Relay *r)
{
	RelayDriverEdges *d = relay_driver_edges(r);
	RelayInvariantCheck k = { .r = r };
	GHashTableIter it;
	gpointer key, value;
	uint64_t sessions_listed = 0;

	k.wire_ids = d->wire_ids;
	k.per_client = d->per_client;
	k.half_open = d->half_open;
	g_hash_table_remove_all(k.wire_ids);
	g_hash_table_remove_all(k.per_client);
	g_hash_table_remove_all(k.half_open);
	session_table_foreach(r->sessions, relay_driver_check_session, &k);

	g_hash_table_iter_init(&it, r->clients);
	while (!k.violation && g_hash_table_iter_next(&it, &key, &value)) {
		RelayClient *c = value;
		guint counted = GPOINTER_TO_UINT(g_hash_table_lookup(k.per_client, key));

		if (c->sessions.count != counted)
			k.violation = "a client's session list disagrees with the table";
		else if (c->sessions.count > r->cfg.max_sessions + r->cfg.max_half_open)
			k.violation = "a client is over its session quota";
		else if (c->sessions.half_open > r->cfg.max_half_open ||
			 c->sessions.half_open !=
				 GPOINTER_TO_UINT(g_hash_table_lookup(k.half_open, key)))
			k.violation = "a client's half-open count is wrong or over its quota";
		else if (c->n_gids > r->cfg.max_gids)
			k.violation = "a client is over its GID quota";
		else if (client_queued_mads(&c->conn) > client_mad_quota(&c->conn))
			k.violation = "a client's MAD queue is over its quota";
		for (uint32_t i = 0; !k.violation && i < c->n_gids; i++) {
			if (g_hash_table_lookup(r->gid_owners, c->gids[i].gid) != c)
				k.violation = "a client lists a GID it does not own";
			for (uint32_t j = i + 1; !k.violation && j < c->n_gids; j++)
				if (gid_equal(c->gids[i].gid, c->gids[j].gid))
					k.violation = "a client lists a GID twice";
		}
		sessions_listed += c->sessions.count;
	}
	g_hash_table_iter_init(&it, r->gid_owners);
	while (!k.violation && g_hash_table_iter_next(&it, &key, &value)) {
		RelayClient *c = value;

		if (!g_hash_table_contains(r->clients, GUINT_TO_POINTER(c->id)) ||
		    !relay_client_find_gid(c, key))
			k.violation = "a GID's owner does not hold it";
	}
	if (!k.violation && sessions_listed != session_table_count(r->sessions))
		k.violation = "the session count disagrees with the client lists";
	if (!k.violation && r->counters->sessions_created < session_table_count(r->sessions))
		k.violation = "more live sessions than were ever created";
	if (!k.violation && session_table_count(r->sessions) > r->cfg.max_total_sessions)
		k.violation = "more live sessions than the daemon-wide cap";
	if (!k.violation && k.half_open_total > r->cfg.max_total_half_open)
		k.violation = "more half-open sessions than the daemon-wide cap";
	/* The peers' shares of each client add up to its half-open count. */
	if (!k.violation) {
		GHashTable *sums = d->sums;

		g_hash_table_remove_all(sums);
		g_hash_table_iter_init(&it, r->half_open_peers);
		while (!k.violation && g_hash_table_iter_next(&it, &key, &value)) {
			uint32_t id;
			guint n;

			memcpy(&id, key, sizeof(id)); /* RelayPeerKey starts with it */
			if (GPOINTER_TO_UINT(value) > r->cfg.max_half_open_per_peer)
				k.violation = "a peer holds more than its share of half-open sessions";
			n = GPOINTER_TO_UINT(g_hash_table_lookup(sums, GUINT_TO_POINTER(id)));
			g_hash_table_insert(sums, GUINT_TO_POINTER(id),
					    GUINT_TO_POINTER(n + GPOINTER_TO_UINT(value)));
		}
		g_hash_table_iter_init(&it, r->clients);
		while (!k.violation && g_hash_table_iter_next(&it, &key, &value))
			if (((RelayClient *)value)->sessions.half_open !=
			    GPOINTER_TO_UINT(g_hash_table_lookup(sums, key)))
				k.violation = "the peers' shares disagree with a client's half-open count";
		if (!k.violation && g_hash_table_size(sums) > g_hash_table_size(r->clients))
			k.violation = "a peer's share belongs to no client";
	}
	return k.violation;
}
