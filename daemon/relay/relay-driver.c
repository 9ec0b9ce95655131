/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's test seam (relay-driver.h): an in-process driver with
 * virtual clients, injected wire MADs, the caller's clock, stand-in
 * senders, and the invariant checks. Linked into unit tests and fuzzers
 * only, never into the daemon.
 */
#include "relay-driver.h"

#include <string.h>

#include "relay-handoff.h"
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

/* A live client as the invariant check saw it: the peers' shares of its
 * half-open sessions are added up here. */
typedef struct RelayDriverSeen {
	const RelayClient *c;
	uint32_t shares;
} RelayDriverSeen;

/* The driver's edges of one relay: its clock (the relay's UsecClock reads
 * it) and its senders (the relay's workers). Freed with the relay. */
typedef struct RelayDriverEdges {
	uint64_t now;
	unsigned senders; /* as made (relay_driver_new()) */
	unsigned wanted, live;
	/* The senders whose workers these are: a fresh sender takes them
	 * over before the old one goes (relay_resume_sends()). */
	unsigned users;
	bool stopped;
	bool write_at_once;
	uint64_t actions; /* relay_driver_actions() */
	UmadPort *port;
	UmadSendWorkerEvents events;
	GPtrArray *in_flight; /* UmadSendJob *, oldest first */
	UmadSenderStats stats;
	/* relay_check_invariants()'s scratch array, kept from call to call
	 * (a fuzzer checks after every step). */
	RelayDriverSeen *seen;
	guint seen_cap;
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
	d->users++;
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

	if (d->users > 0 && --d->users > 0)
		return;
	g_ptr_array_free(d->in_flight, TRUE);
	g_free(d->seen);
	g_free(d);
}

static const UmadSendWorkersOps relay_driver_sends_ops = UMAD_SEND_WORKERS_OPS(relay_driver_sends);

int relay_driver_new(sd_event *event, UmadPort *port, const RelayConfig *cfg, unsigned senders,
		     Relay **ret)
{
	RelayDriverEdges *d = g_new0(RelayDriverEdges, 1);
	RelayConfig c = *cfg;
	int e;

	d->now = 1000000;
	d->senders = d->wanted = d->live = senders;
	d->in_flight = g_ptr_array_new();
	c.clock = (UsecClock){ .now = relay_driver_clock_now, .userdata = d };
	c.send_workers = &relay_driver_sends_ops;
	c.send_workers_arg = d;
	e = relay_new(event, port, &c, ret);
	/* The relay owns @d once its senders started (they free it). */
	if (e < 0 && !d->port)
		relay_driver_sends_free(d);
	return e;
}

void relay_driver_config(RelayConfig *cfg, uint32_t max_clients, uint32_t max_gids,
			 uint32_t max_sessions, uint32_t max_queued)
{
	relay_config_init(cfg);
	cfg->max_clients = max_clients;
	cfg->max_gids = max_gids;
	cfg->max_sessions = max_sessions;
	cfg->max_queued = max_queued;
	cfg->timeouts_ms[SESSION_TIMER_HANDSHAKE] = 1000;
	cfg->timeouts_ms[SESSION_TIMER_CLOSING] = 2000;
	cfg->timeouts_ms[SESSION_TIMER_SIDR] = 500;
}

int relay_driver_new_fake(const RelayConfig *cfg, UmadPortFakeSendFn send, void *userdata,
			  sd_event **ret_event, Relay **ret)
{
	sd_event *event = NULL;
	UmadPort *port = NULL;
	int e;

	e = umad_port_new_fake("fake0", 1, true, send, userdata, &port);
	if (e < 0)
		return e;
	e = sd_event_new(&event);
	if (e >= 0)
		e = relay_driver_new(event, port, cfg, 2, ret);
	else
		umad_port_close(port);
	if (e < 0) {
		sd_event_unref(event);
		return e;
	}
	*ret_event = event;
	return 0;
}

void relay_driver_free_fake(Relay *r, sd_event *event)
{
	relay_free(r);
	sd_event_unref(event);
}

void relay_driver_set_time(Relay *r, uint64_t now)
{
	relay_driver_edges(r)->actions++;
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
	d->actions++;
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
	d->actions++;
	d->events.changed(d->events.userdata);
	relay_driver_settle(r);
}

void relay_driver_set_send_at_once(Relay *r, bool at_once)
{
	relay_driver_edges(r)->actions++;
	relay_driver_edges(r)->write_at_once = at_once;
}

/* g_hash_table_find()'s predicate for the first entry there is. */
static gboolean relay_driver_any(gpointer key, gpointer value, gpointer userdata)
{
	(void)key;
	(void)value;
	(void)userdata;
	return TRUE;
}

int relay_driver_reset(Relay *r)
{
	RelayDriverEdges *d = relay_driver_edges(r);
	SessionTable *fresh;
	gpointer c;
	int e;

	/* (A relay with VMs counts in their table, which is not its own.) */
	if (d->stopped || d->in_flight->len > 0 || relay_sender_queued(r) > 0 || r->handoff ||
	    r->guard || r->vms.table)
		return -EBUSY;
	d->actions++;
	/* Its sessions, GIDs, peers' shares and queues go with each client. */
	while ((c = g_hash_table_find(r->clients, relay_driver_any, NULL)))
		relay_drop_client(r, c, "reset by the driver");
	if (g_hash_table_size(r->half_open_peers) > 0 || g_hash_table_size(r->gid_owners) > 0 ||
	    r->dirty->len > 0 || r->unregistered.length > 0)
		return -EBUSY;
	/* A table as new: its free list, tombstones, timers and wire ids
	 * would otherwise carry over (the capacity is the cap's). */
	fresh = session_table_new_sized(r->cfg.timeouts_ms, r->cfg.max_total_sessions);
	if (!fresh)
		return -ENOMEM;
	session_table_set_remove_hook(r->sessions, NULL, NULL);
	session_table_free(r->sessions);
	r->sessions = fresh;
	session_table_set_remove_hook(r->sessions, relay_session_removed, r);
	/* A sender as new: what its policy learnt of the destinations goes
	 * (the stand-in workers, @d, stay: they are the relay's clock). */
	e = relay_resume_sends(r);
	if (e < 0)
		return e;
	d->stopped = false;
	d->wanted = d->live = d->senders;
	d->write_at_once = false;
	d->stats = (UmadSenderStats){ 0 };
	d->now = 1000000;
	/* The GID epoch only grows: an entry read in an epoch of the last
	 * run is read again. */
	r->gid_epoch++;
	*r->counters = (RelayCounters){ 0 };
	r->vm_none = (VmCounters){ 0 };
	r->next_client_id = 1;
	r->recv_errors_in_a_row = 0;
	g_array_set_size(r->resumed, 0);
	relay_schedule_timer(r);
	return 0;
}

uint64_t relay_driver_actions(const Relay *r)
{
	return relay_driver_edges(r)->actions;
}

void relay_driver_handoff(Relay *r)
{
	relay_driver_edges(r)->actions++;
	relay_stop_sends(r, 0);
	relay_handoff_prepare(r, 0);
	relay_flush_dirty(r);
	/* The loop ends here in the daemon: nothing is read any more. */
	g_array_set_size(r->resumed, 0);
}

/* ---- clients ---- */

void relay_driver_seed_wire_ids(Relay *r, uint32_t seed)
{
	relay_driver_edges(r)->actions++;
	session_table_seed_wire_ids(r->sessions, seed);
}

uint32_t relay_driver_add_client(Relay *r)
{
	RelayClient *c;

	relay_driver_edges(r)->actions++;
	c = relay_client_create(r, -1);

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

	relay_driver_edges(r)->actions++;
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

	relay_driver_edges(r)->actions++;
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

	relay_driver_edges(r)->actions++;
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

	relay_driver_edges(r)->actions++;
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
	relay_driver_edges(r)->actions++;
	return relay_expire_sessions(r);
}

uint32_t relay_driver_sessions(Relay *r, Session *out, uint32_t max)
{
	return session_table_copy(r->sessions, out, max);
}

const char *relay_check_invariants(Relay *r)
{
	const char *bad = relay_check_invariants_cheap(r);

	return bad ? bad : session_table_check(r->sessions);
}

/* gid_equal() without memcmp(): in a fuzzer, every memcmp() goes through
 * the sanitizer's interceptor and libFuzzer's comparison hook, which
 * would take the checks' comparisons for the relay's. */
static bool relay_driver_same_gid(const uint8_t a[GID_LEN], const uint8_t b[GID_LEN])
{
	uint64_t x[2], y[2];

	__builtin_memcpy(x, a, GID_LEN);
	__builtin_memcpy(y, b, GID_LEN);
	return x[0] == y[0] && x[1] == y[1];
}

/* Client @c's GIDs: within quota, none listed twice. */
static const char *relay_driver_check_client_gids(Relay *r, const RelayClient *c)
{
	if (c->n_gids > r->cfg.max_gids)
		return "a client is over its GID quota";
	for (uint32_t i = 0; i < c->n_gids; i++)
		for (uint32_t j = i + 1; j < c->n_gids; j++)
			if (relay_driver_same_gid(c->gids[i].gid, c->gids[j].gid))
				return "a client lists a GID twice";
	return NULL;
}

/* One relay_check_invariants_cheap(): what it counted, and the first
 * violation it found. */
typedef struct RelayDriverCheck {
	Relay *r;
	RelayDriverEdges *d; /* its seen[]: the live clients, n_seen of them */
	guint n_seen;
	uint64_t sessions_listed, gids_listed;
	unsigned half_open;
	const char *bad;
} RelayDriverCheck;

/* The live client of @id, or with @c (when not NULL), as seen: a linear
 * search, for the driver's relays have a few clients. */
static RelayDriverSeen *relay_driver_seen(RelayDriverCheck *k, uint32_t id, const RelayClient *c)
{
	for (guint i = 0; i < k->n_seen; i++)
		if (c ? k->d->seen[i].c == c : k->d->seen[i].c->id == id)
			return &k->d->seen[i];
	return NULL;
}

static void relay_driver_check_client(gpointer key, gpointer value, gpointer userdata)
{
	RelayDriverCheck *k = userdata;
	RelayClient *c = value;

	(void)key;
	if (k->bad)
		return;
	if (k->n_seen == k->d->seen_cap) {
		k->d->seen_cap = MAX(8u, k->d->seen_cap * 2);
		k->d->seen = g_renew(RelayDriverSeen, k->d->seen, k->d->seen_cap);
	}
	k->d->seen[k->n_seen++] = (RelayDriverSeen){ c, 0 };
	k->bad = session_table_check_owned(k->r->sessions, &c->sessions, c->id);
	if (!k->bad && c->sessions.count > k->r->cfg.max_sessions + k->r->cfg.max_half_open)
		k->bad = "a client is over its session quota";
	if (!k->bad && c->sessions.half_open > k->r->cfg.max_half_open)
		k->bad = "a client is over its half-open quota";
	if (!k->bad)
		k->bad = relay_driver_check_client_gids(k->r, c);
	/* The queue's own fields: its accessors are the code under test,
	 * and a fuzzer pays for their coverage hooks. */
	if (!k->bad && c->conn.mad.len > c->conn.mad.max)
		k->bad = "a client's MAD queue is over its quota";
	k->sessions_listed += c->sessions.count;
	k->half_open += c->sessions.half_open;
	k->gids_listed += c->n_gids;
}

/*
 * A GID's owner is live and lists it. With as many GIDs listed as owned
 * (checked by the caller), that makes every listed GID owned by its
 * lister: distinct GIDs map to distinct listings, so an owner table as
 * big as the listings covers each one.
 */
static void relay_driver_check_gid_owner(gpointer key, gpointer value, gpointer userdata)
{
	RelayDriverCheck *k = userdata;
	const RelayClient *c = value;
	bool listed = false;

	if (k->bad)
		return;
	if (!relay_driver_seen(k, 0, c)) {
		k->bad = "a GID's owner does not hold it";
		return;
	}
	for (uint32_t i = 0; i < c->n_gids && !listed; i++)
		listed = relay_driver_same_gid(c->gids[i].gid, key);
	if (!listed)
		k->bad = "a GID's owner does not hold it";
}

/* A peer's share of a client's half-open sessions: within its bound, of
 * a live client, added to that client's sum. */
static void relay_driver_check_peer_share(gpointer key, gpointer value, gpointer userdata)
{
	RelayDriverCheck *k = userdata;
	RelayDriverSeen *owner;
	uint32_t id;

	if (k->bad)
		return;
	memcpy(&id, key, sizeof(id)); /* RelayPeerKey starts with it */
	if (GPOINTER_TO_UINT(value) > k->r->cfg.max_half_open_per_peer) {
		k->bad = "a peer holds more than its share of half-open sessions";
		return;
	}
	owner = relay_driver_seen(k, id, NULL);
	if (!owner)
		k->bad = "a peer's share belongs to no client";
	else
		owner->shares += GPOINTER_TO_UINT(value);
}

/*
 * One walk of the clients, and of each one's session list: no walk of the
 * table. What the lists cannot show is counted: every live session is on
 * some live client's list when the lists add up to the table's live count
 * (each entry was checked to be its client's, so none is on two); every
 * listed GID is owned by its lister when each owner lists its GIDs and
 * the listings add up to the owners (relay_driver_check_gid_owner()).
 * The tables are walked with g_hash_table_foreach(), which costs a third
 * of an iterator's steps.
 */
const char *relay_check_invariants_cheap(Relay *r)
{
	RelayDriverCheck k = { .r = r, .d = relay_driver_edges(r) };
	uint32_t live = session_table_count(r->sessions);

	/* Each client's list against the table (session_table_check_owned()
	 * reads the slots itself: no coverage hook in a fuzzer), its quotas,
	 * its GIDs and its queue. */
	g_hash_table_foreach(r->clients, relay_driver_check_client, &k);
	if (k.bad)
		return k.bad;
	if (k.sessions_listed != live)
		return "the session count disagrees with the client lists";
	if (k.gids_listed != g_hash_table_size(r->gid_owners))
		return "a client lists a GID it does not own";
	g_hash_table_foreach(r->gid_owners, relay_driver_check_gid_owner, &k);
	if (k.bad)
		return k.bad;
	if (r->counters->sessions_created < live)
		return "more live sessions than were ever created";
	if (live > r->cfg.max_total_sessions)
		return "more live sessions than the daemon-wide cap";
	if (k.half_open > r->cfg.max_total_half_open)
		return "more half-open sessions than the daemon-wide cap";
	/* The peers' shares of each client's half-open sessions add up to
	 * its half-open count (with none, there is nothing to add up). */
	if (k.half_open == 0 && g_hash_table_size(r->half_open_peers) == 0)
		return NULL;
	g_hash_table_foreach(r->half_open_peers, relay_driver_check_peer_share, &k);
	if (k.bad)
		return k.bad;
	for (guint i = 0; i < k.n_seen; i++)
		if (k.d->seen[i].c->sessions.half_open != k.d->seen[i].shares)
			return "the peers' shares disagree with a client's half-open count";
	return NULL;
}
