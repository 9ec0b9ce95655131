/* SPDX-License-Identifier: MIT */
/*
 * Owns the protocol logic: client requests, GID ownership, outbound MAD
 * validation and rewriting, inbound routing, sessions and counters.
 *
 * Routing (DESIGN §4):
 *   REQ, SIDR_REQ         by the destination GID: the local GID-table entry
 *                         the kernel reports in addr.gid_index (the REQ's
 *                         Primary RemotePortGID, or the cma_hdr address of
 *                         a SIDR_REQ, when there is no GRH)
 *   REP RTU DREQ DREP MRA LAP APR REJ
 *                         by RemoteCommID, which is a wire id we chose; a
 *                         REJ or MRA with RemoteCommID 0 by the sender's
 *                         LocalCommID and GID, remembered from its REQ
 *   SIDR_REP              by RequestID (a wire id)
 *
 * Comm ids: every LocalCommID (SIDR: RequestID) a client sends is
 * replaced by a daemon-unique wire id, and mapped back on the way in, so
 * no client can see or steer another's traffic by picking its ids. The
 * low 32 bits of the TID of a message that starts an exchange (REQ, DREQ,
 * LAP, SIDR_REQ) become the wire id too: two clients that use the same
 * TIDs would otherwise collide in the kernel's duplicate-send check.
 */
#include "relay.h"
#include "relay-driver.h"

#include <arpa/inet.h>
#include <glib.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "client.h"
#include "log.h"
#include "util.h"

#define UMAD_BATCH 256	 /* inbound MADs per wake-up, for fairness */
#define CLIENT_BATCH 64	 /* client frames per wake-up, for fairness */
#define QP1_QKEY 0x80010000u
#define RECV_ERRORS_FATAL 1000 /* consecutive umad read failures */
#define DEFAULT_HOP_LIMIT 64
#define CLIENT_CACHE_SLOTS 256 /* a power of two */
#define CLIENT_EVENTS 64 /* ready client sockets served per dispatch */
/* From this many sessions on, a batch warms its lookups first (see
 * session_table_warm_wire_ids()); below, the table sits in the cache. */
#define WARM_SESSIONS 65536u

/* The keys tx_continue() will look up, collected for one warming pass
 * (see session_table_warm_client_comm_ids()). */
typedef struct TxWarmKeys {
	uint32_t client_ids[CLIENT_EVENTS * CLIENT_INPUT_FRAMES];
	uint32_t comm_ids[CLIENT_EVENTS * CLIENT_INPUT_FRAMES];
	uint32_t found[CLIENT_EVENTS * CLIENT_INPUT_FRAMES];
	uint32_t *hint[CLIENT_EVENTS * CLIENT_INPUT_FRAMES]; /* where found[i] goes */
	unsigned n;
} TxWarmKeys;

/* relay_deliver() zeroes a frame in parts: no padding before the MAD. */
_Static_assert(offsetof(struct rdmacm_mux_msg, umad.hdr) + sizeof(struct rdmacm_mux_umad_hdr) ==
		       offsetof(struct rdmacm_mux_msg, umad.mad),
	       "the MAD follows the umad header");

struct Relay {
	sd_event *event;
	UmadPort *port;
	RelayConfig cfg;
	SessionTable *sessions;
	GHashTable *clients;	/* id -> Client* (owned) */
	GHashTable *gid_owners; /* 16-byte GID (owned key) -> Client* */
	sd_event_source *umad_io;
	/* Client sockets are in an epoll set of ours, itself one event source:
	 * one sd-event dispatch serves every client that is ready, instead of
	 * one dispatch (and one epoll_wait) per client and wake-up. */
	int client_ep;
	sd_event_source *clients_io;
	uint32_t *fd_events; /* events registered for each client fd */
	size_t n_fd_events;
	UmadBuffer *rx_batch; /* UMAD_BATCH received MADs, delivered together */
	size_t *rx_len;
	sd_event_source *timer;
	uint64_t timer_armed_at;
	GPtrArray *dirty; /* clients with frames to flush at the end of a batch */
	GArray *sinks;	  /* EventSink */
	uint64_t driver_now; /* relay-driver.h: a caller-set clock, 0 if unused */
	uint64_t dispatch_now; /* sd_event_now() of the dispatch under way, 0 outside */
	/* id -> client for the per-MAD paths, in front of @clients: slot id % N,
	 * checked against the id, cleared when the client goes */
	Client *client_cache[CLIENT_CACHE_SLOTS];
	unsigned recv_errors_in_a_row;
	uint32_t next_client_id;
	RelayCounters counters;
	TxWarmKeys tx_warm; /* 20 KiB: kept off the stack */
	uint32_t tx_hint; /* the warm pass's session for the frame being handled */
};

static const char *const rx_drop_names[RX_DROP_COUNT] = {
	[RX_DROP_STATUS] = "status-packet",
	[RX_DROP_NOT_CM] = "not-cm",
	[RX_DROP_UNSUPPORTED] = "unsupported-attr",
	[RX_DROP_MALFORMED] = "malformed",
	[RX_DROP_NO_OWNER] = "no-gid-owner",
	[RX_DROP_NO_SESSION] = "no-session",
	[RX_DROP_QUEUE_FULL] = "queue-full",
	[RX_DROP_SESSION_QUOTA] = "session-quota",
};

static const char *const tx_reject_names[TX_REJECT_COUNT] = {
	[TX_REJECT_BAD_LENGTH] = "bad-length",
	[TX_REJECT_NOT_CM] = "not-cm",
	[TX_REJECT_UNSUPPORTED] = "unsupported-attr",
	[TX_REJECT_MALFORMED] = "malformed",
	[TX_REJECT_FOREIGN_SGID] = "foreign-sgid",
	[TX_REJECT_NO_SESSION] = "no-session",
	[TX_REJECT_HIJACK] = "hijack",
	[TX_REJECT_SESSION_QUOTA] = "session-quota",
	[TX_REJECT_NO_DESTINATION] = "no-destination",
	[TX_REJECT_NO_PORT_GID] = "no-port-gid",
	[TX_REJECT_SEND_FAILED] = "send-failed",
};

const char *rx_drop_name(RxDrop d)
{
	return (unsigned)d < RX_DROP_COUNT ? rx_drop_names[d] : "?";
}

const char *tx_reject_name(TxReject d)
{
	return (unsigned)d < TX_REJECT_COUNT ? tx_reject_names[d] : "?";
}

/* The loop's notion of now; sd_event_now fails before the first run. */
static uint64_t relay_now(const Relay *r)
{
	uint64_t now;

	if (r->driver_now)
		return r->driver_now;
	/* sd_event_now() is the same for the whole of one dispatch */
	if (r->dispatch_now)
		return r->dispatch_now;
	if (sd_event_now(r->event, CLOCK_MONOTONIC, &now) < 0)
		now = now_usec();
	return now;
}

/* ---- events ---- */

typedef struct EventSink {
	RelayEventFn fn;
	void *userdata;
} EventSink;

void relay_format_event(const RelayEvent *ev, char *buf, size_t len)
{
	char a[GID_STR_LEN], b[GID_STR_LEN], name[16], client[16], ids[64];
	const uint8_t *from = ev->rx ? ev->remote_gid : ev->local_gid;
	const uint8_t *to = ev->rx ? ev->local_gid : ev->remote_gid;

	if (ev->client_id)
		snprintf(client, sizeof(client), "%u", ev->client_id);
	else
		snprintf(client, sizeof(client), "-");
	if (ev->rx)
		snprintf(ids, sizeof(ids), "wire 0x%08x -> comm 0x%08x", ev->wire_id,
			 ev->client_comm_id);
	else
		snprintf(ids, sizeof(ids), "comm 0x%08x -> wire 0x%08x", ev->client_comm_id,
			 ev->wire_id);
	snprintf(buf, len, "[%s:%d] %s%-3s %-8s client %-4s %s  tid 0x%016" PRIx64 "  %s -> %s%s%s",
		 ev->dev, ev->port, ev->rx ? "RX" : "TX", ev->drop ? "!" : "",
		 cm_attr_name(ev->attr, name), client, ids, ev->tid,
		 from ? gid_to_string(from, a) : "?", to ? gid_to_string(to, b) : "?",
		 ev->drop ? "  dropped: " : "", ev->drop ? ev->drop : "");
}

static void text_trace_sink(void *userdata, const RelayEvent *ev)
{
	FILE *f = userdata;
	char line[512];

	relay_format_event(ev, line, sizeof(line));
	fprintf(f, "%s\n", line);
	fflush(f);
}

int relay_add_event_sink(Relay *r, RelayEventFn fn, void *userdata)
{
	EventSink sink = { fn, userdata };

	g_array_append_val(r->sinks, sink);
	return 0;
}

void relay_remove_event_sink(Relay *r, RelayEventFn fn, void *userdata)
{
	for (guint i = 0; i < r->sinks->len; i++) {
		EventSink *s = &g_array_index(r->sinks, EventSink, i);
		if (s->fn == fn && s->userdata == userdata) {
			g_array_remove_index(r->sinks, i);
			return;
		}
	}
}

static void relay_emit(Relay *r, RelayEvent *ev, const Client *c)
{
	if (r->sinks->len == 0)
		return;
	ev->dev = r->port->dev;
	ev->port = r->port->port;
	ev->realtime_usec = (uint64_t)g_get_real_time();
	if (c) {
		ev->client_id = c->id;
		ev->client_pid = (int)c->cred.pid;
	}
	if (ev->mad && ev->mad_len >= 16)
		ev->tid = get_be64(ev->mad + 8);
	/* A sink may remove itself (a trace reader that went away). */
	for (guint i = r->sinks->len; i > 0; i--) {
		EventSink s = g_array_index(r->sinks, EventSink, i - 1);
		s.fn(s.userdata, ev);
	}
}

/* ---- clients ---- */

static void relay_mark_dirty(Relay *r, Client *c)
{
	if (c->dirty)
		return;
	c->dirty = true;
	g_ptr_array_add(r->dirty, c);
}

/* The live client with @id, or NULL. */
static Client *relay_client(Relay *r, uint32_t id)
{
	Client **slot = &r->client_cache[id & (CLIENT_CACHE_SLOTS - 1)];
	Client *c = *slot;

	if (c && c->id == id)
		return c;
	c = g_hash_table_lookup(r->clients, GUINT_TO_POINTER(id));
	if (c)
		*slot = c;
	return c;
}

static SessionList *session_owner(void *userdata, uint32_t client_id)
{
	Relay *r = userdata;
	Client *c = relay_client(r, client_id);

	return c ? &c->sessions : NULL;
}

static void relay_schedule_timer(Relay *r)
{
	uint64_t now = relay_now(r), at;

	if (!r->timer || r->driver_now)
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

static void relay_drop_client(Relay *r, Client *c, const char *why)
{
	char pid[32];
	const char *fields[] = { pid, NULL };

	snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->cred.pid);
	log_structured(LOG_INFO, fields, "client %u (pid %d, %s) gone: %s; %u GIDs and %u sessions removed",
		       c->id, (int)c->cred.pid, c->comm, why, c->n_gids, c->sessions.count);
	for (uint32_t i = 0; i < c->n_gids; i++)
		g_hash_table_remove(r->gid_owners, c->gids[i].gid);
	session_table_remove_all(r->sessions, &c->sessions);
	if (c->dirty)
		g_ptr_array_remove_fast(r->dirty, c);
	if (r->client_cache[c->id & (CLIENT_CACHE_SLOTS - 1)] == c)
		r->client_cache[c->id & (CLIENT_CACHE_SLOTS - 1)] = NULL;
	/* Removing from the table frees the client (and closes its fd). */
	g_hash_table_remove(r->clients, GUINT_TO_POINTER(c->id));
	relay_schedule_timer(r);
}

/* EPOLLIN unless paused, EPOLLOUT while frames wait; a syscall only when
 * that changes. */
static void relay_update_events(Relay *r, Client *c)
{
	struct epoll_event ev = { .data.u64 = c->id };

	if (c->fd < 0 || (size_t)c->fd >= r->n_fd_events)
		return;
	if (!c->reading_paused)
		ev.events |= EPOLLIN;
	if (client_queued(c) > 0)
		ev.events |= EPOLLOUT;
	if (ev.events == r->fd_events[c->fd])
		return;
	if (epoll_ctl(r->client_ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		r->fd_events[c->fd] = ev.events;
}

/* Write what is queued; returns false when the client had to go. */
static bool relay_flush_client(Relay *r, Client *c)
{
	int e;

	if (c->fd < 0) /* a relay-driver client: its output waits to be drained */
		return true;
	e = client_flush(c);

	if (e < 0 && e != -EAGAIN) {
		r->counters.clients_dropped++;
		relay_drop_client(r, c, e == -EPIPE || e == -ECONNRESET ? "disconnected" : "write error");
		return false;
	}
	if (c->reading_paused && !client_responses_full(c))
		c->reading_paused = false;
	relay_update_events(r, c);
	return true;
}

static void relay_flush_dirty(Relay *r)
{
	while (r->dirty->len > 0) {
		Client *c = g_ptr_array_steal_index_fast(r->dirty, r->dirty->len - 1);
		c->dirty = false;
		(void)relay_flush_client(r, c);
	}
}

/* ---- responses ---- */

/*
 * QEMU's protocol has four positive codes and passes send failures as a
 * negative errno. Clients granted RDMACM_MUX_CAP_ERRNO get -errno always.
 */
static int32_t err_code_for(const Client *c, int err)
{
	if (err == 0 || (c->caps & RDMACM_MUX_CAP_ERRNO))
		return err;
	switch (err) {
	case -EINVAL:
	case -EMSGSIZE:
	case -EPROTO:
	case -EBADMSG:
	case -EOPNOTSUPP:
		return RDMACM_MUX_ERR_CODE_EINVAL;
	case -EEXIST:
		return RDMACM_MUX_ERR_CODE_EEXIST;
	case -EACCES:
	case -EPERM:
		return RDMACM_MUX_ERR_CODE_EACCES;
	case -ENOENT:
		return RDMACM_MUX_ERR_CODE_ENOTFOUND;
	default:
		return err;
	}
}

static void relay_respond(Relay *r, Client *c, struct rdmacm_mux_msg *req, int err)
{
	req->hdr.msg_type = RDMACM_MUX_MSG_TYPE_RESP;
	req->hdr.err_code = err_code_for(c, err);
	if (client_queue_response(c, req) < 0) {
		/* Out of memory: this client cannot be served correctly. */
		log_error("out of memory queueing a response to client %u", c->id);
		return;
	}
	c->stats.requests++;
	if (client_responses_full(c))
		c->reading_paused = true;
	relay_mark_dirty(r, c);
}

/* ---- REG / UNREG ---- */

static ClientGid *client_find_gid(Client *c, const uint8_t gid[16])
{
	for (uint32_t i = 0; i < c->n_gids; i++)
		if (gid_equal(c->gids[i].gid, gid))
			return &c->gids[i];
	return NULL;
}

static int relay_register_gid(Relay *r, Client *c, const uint8_t gid[16])
{
	Client *owner = g_hash_table_lookup(r->gid_owners, gid);
	char text[GID_STR_LEN], pid[32], gidf[64];
	const char *fields[] = { pid, gidf, NULL };
	int index;

	snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->cred.pid);
	snprintf(gidf, sizeof(gidf), "GID=%s", gid_to_string(gid, text));

	if (gid_is_zero(gid))
		return -EINVAL;
	if (owner == c)
		return -EEXIST;
	if (owner) {
		log_structured(LOG_WARNING, fields,
			       "client %u (pid %d) asked for GID %s, which client %u (pid %d) owns",
			       c->id, (int)c->cred.pid, text, owner->id, (int)owner->cred.pid);
		return -EACCES;
	}
	if (c->n_gids >= r->cfg.max_gids)
		return -EDQUOT;
	index = gid_table_find(r->port->gids, gid);
	if (index >= GID_TABLE_UMAD_INDEXES) {
		log_structured(LOG_WARNING, fields,
			       "client %u registered GID %s, at index %d of %s port %d: past the "
			       "256 entries a umad send can name, so it cannot send from it",
			       c->id, text, index, r->port->dev, r->port->port);
		if (r->cfg.require_port_gid)
			return -EADDRNOTAVAIL;
	} else if (index < 0) {
		if (r->cfg.require_port_gid)
			return -EADDRNOTAVAIL;
		/* QEMU registers a guest GID before libvirt adds the address
		 * to the host netdev, so a missing GID is normal for a while. */
		log_structured(LOG_INFO, fields,
			       "client %u registered GID %s, which %s port %d does not have (yet)",
			       c->id, text, r->port->dev, r->port->port);
	}
	c->gids = g_renew(ClientGid, c->gids, c->n_gids + 1);
	memcpy(c->gids[c->n_gids].gid, gid, 16);
	c->gids[c->n_gids].gid_index = -1;
	c->gids[c->n_gids].table_generation = 0;
	c->n_gids++;
	g_hash_table_insert(r->gid_owners, g_memdup2(gid, 16), c);
	log_structured(LOG_INFO, fields, "client %u (pid %d) registered GID %s", c->id,
		       (int)c->cred.pid, text);
	return 0;
}

static int relay_unregister_gid(Relay *r, Client *c, const uint8_t gid[16])
{
	Client *owner = g_hash_table_lookup(r->gid_owners, gid);
	ClientGid *cg;

	if (!owner)
		return -ENOENT;
	if (owner != c)
		return -EACCES;
	cg = client_find_gid(c, gid);
	g_hash_table_remove(r->gid_owners, gid);
	if (log_get_max_level() >= LOG_INFO) {
		char text[GID_STR_LEN];
		log_info("client %u (pid %d) unregistered GID %s", c->id, (int)c->cred.pid,
			 gid_to_string(gid, text));
	}
	if (cg) {
		*cg = c->gids[c->n_gids - 1];
		c->n_gids--;
	}
	return 0;
}

/* ---- outbound MADs ---- */

typedef struct TxContext {
	Client *client;
	UmadBuffer *buf;
	size_t len;
	uint16_t attr;
	const uint8_t *sgid;
	uint8_t dest[16];    /* destination GID, zero when unknown */
	bool dest_explicit;  /* the client gave a destination other than itself */
	uint32_t client_id_field; /* the client's comm id / request id */
	uint32_t wire_id;	  /* what went on the wire */
	uint32_t handle;
	bool created; /* this request created the session */
	TxReject reject;
} TxContext;

static int tx_fail(TxContext *t, TxReject why, int err)
{
	t->reject = why;
	return err;
}

/* Fill in the destination from the session when the client gave none. */
static void tx_dest_from_session(TxContext *t, const Session *s)
{
	if (!t->dest_explicit && s && !gid_is_zero(s->peer_gid))
		memcpy(t->dest, s->peer_gid, 16);
}

static uint32_t tx_new_session(Relay *r, TxContext *t, SessionState state, uint64_t now)
{
	Client *c = t->client;
	uint32_t h;

	if (c->sessions.count >= r->cfg.max_sessions)
		return 0;
	h = session_table_add(r->sessions, &c->sessions, c->id, state, now);
	if (h) {
		r->counters.sessions_created++;
		c->stats.sessions = c->sessions.count;
	}
	return h;
}

/* Move a session to CLOSING and (re)arm its removal timer. */
static void session_close(Relay *r, uint32_t h, uint64_t now)
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
static void session_advance(Relay *r, uint32_t h, uint16_t attr, bool rx, uint64_t now)
{
	Session *s = session_table_get(r->sessions, h);

	if (!s)
		return;
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
		break;
	case CM_ATTR_DREQ:
	case CM_ATTR_DREP:
	case CM_ATTR_REJ:
		session_close(r, h, now);
		break;
	case CM_ATTR_MRA:
		if (s->state != SESSION_ESTABLISHED && s->state != SESSION_CLOSING)
			session_table_arm(r->sessions, h, SESSION_TIMER_HANDSHAKE, now);
		break;
	default: /* LAP, APR: no change */
		break;
	}
}

/* REQ and SIDR_REQ from our client: a session it starts. */
static int tx_start(Relay *r, TxContext *t, uint64_t now)
{
	bool sidr = t->attr == CM_ATTR_SIDR_REQ;
	uint8_t *mad = t->buf->mad;
	uint32_t h;
	Session *s;

	t->client_id_field = sidr ? cm_get_sidr_request_id(mad) : cm_get_local_comm_id(mad);
	if (t->client_id_field == 0)
		return tx_fail(t, TX_REJECT_MALFORMED, -EINVAL);

	h = session_table_lookup_client_comm_id(r->sessions, t->client->id, t->client_id_field);
	s = session_table_get(r->sessions, h);
	if (s && s->state != (sidr ? SESSION_SIDR_SENT : SESSION_REQ_SENT)) {
		/* Not a retransmission: the client reuses the id of a finished
		 * session for a new one. The old one is dead to it. */
		session_table_remove(r->sessions, &t->client->sessions, h);
		h = 0;
	}
	if (!h) {
		h = tx_new_session(r, t, sidr ? SESSION_SIDR_SENT : SESSION_REQ_SENT, now);
		if (!h)
			return tx_fail(t, TX_REJECT_SESSION_QUOTA, -EDQUOT);
		session_table_set_client_comm_id(r->sessions, h, t->client_id_field);
		session_table_assign_wire_id(r->sessions, h);
		t->created = true;
	}
	s = session_table_get(r->sessions, h);
	if (!s)
		return tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	if (!t->dest_explicit) {
		/* QEMU puts its own GID in addr.gid (its bug C1): take the
		 * destination from the message itself. */
		if (!sidr)
			memcpy(t->dest, cm_req_remote_gid(mad), 16);
		else if (cm_cma_dst_gid(mad, t->len, t->dest) < 0)
			memset(t->dest, 0, 16);
	}
	/* A retransmission keeps the GID its session started from. */
	if (t->created)
		memcpy(s->local_gid, t->sgid, 16);
	if (!gid_is_zero(t->dest))
		memcpy(s->peer_gid, t->dest, 16);
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
static int tx_answer_req(Relay *r, TxContext *t, uint64_t now)
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
		return tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	if (s->client_id != t->client->id)
		return tx_fail(t, TX_REJECT_HIJACK, -EACCES);
	if (local && s->client_comm_id == 0) {
		old = session_table_lookup_client_comm_id(r->sessions, t->client->id, local);
		if (old && old != h)
			session_table_remove(r->sessions, &t->client->sessions, old);
		session_table_set_client_comm_id(r->sessions, h, local);
		session_table_assign_wire_id(r->sessions, h);
	} else if (local && s->client_comm_id != local) {
		return tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	}
	tx_dest_from_session(t, s);
	t->handle = h;
	t->wire_id = s->wire_id;
	if (local)
		cm_set_local_comm_id(mad, s->wire_id);
	session_advance(r, h, t->attr, false, now);
	return 0;
}

/* Every other message of a session our client is part of. */
static int tx_continue(Relay *r, TxContext *t, uint64_t now)
{
	uint8_t *mad = t->buf->mad;
	uint32_t local = cm_get_local_comm_id(mad);
	uint32_t h;
	Session *s;

	t->client_id_field = local;
	/* The warm pass's find, if the table still says so: (client, comm
	 * id) is unique among live sessions, so then it is the lookup's. */
	h = r->tx_hint;
	s = session_table_get(r->sessions, h);
	if (!s || s->client_id != t->client->id || s->client_comm_id != local || !local)
		h = local ? session_table_lookup_client_comm_id(r->sessions, t->client->id, local) : 0;
	if (!h)
		return tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	s = session_table_get(r->sessions, h);
	if (!s)
		return tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	tx_dest_from_session(t, s);
	t->handle = h;
	t->wire_id = s->wire_id;
	cm_set_local_comm_id(mad, s->wire_id);
	/* Messages that start an exchange carry the wire id in their TID. */
	if (t->attr == CM_ATTR_DREQ || t->attr == CM_ATTR_LAP)
		cm_set_tid_low(mad, s->wire_id);
	session_advance(r, h, t->attr, false, now);
	return 0;
}

/* SIDR_REP from our client: answers a peer's SIDR_REQ routed to it. */
static int tx_sidr_rep(Relay *r, TxContext *t, uint64_t now)
{
	uint32_t request_id = cm_get_sidr_request_id(t->buf->mad);
	uint32_t h = session_table_lookup_peer(r->sessions, request_id, t->sgid,
					       t->dest_explicit ? t->dest : NULL);
	Session *s;

	t->client_id_field = request_id;
	t->wire_id = request_id;
	if (!h)
		return tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	s = session_table_get(r->sessions, h);
	if (!s)
		return tx_fail(t, TX_REJECT_NO_SESSION, -ENOENT);
	if (s->client_id != t->client->id)
		return tx_fail(t, TX_REJECT_HIJACK, -EACCES);
	tx_dest_from_session(t, s);
	t->handle = h;
	/* Keep it for the SIDR timeout: the peer may repeat its query. */
	session_table_arm(r->sessions, h, SESSION_TIMER_SIDR, now);
	return 0;
}

static int tx_route(Relay *r, TxContext *t, uint64_t now)
{
	switch (t->attr) {
	case CM_ATTR_REQ:
	case CM_ATTR_SIDR_REQ:
		return tx_start(r, t, now);
	case CM_ATTR_REP:
		return tx_answer_req(r, t, now);
	case CM_ATTR_MRA:
		if (cm_mra_msg_mraed(t->buf->mad) == CM_MSG_REQ)
			return tx_answer_req(r, t, now);
		return tx_continue(r, t, now);
	case CM_ATTR_REJ:
		/* A REJ of a REQ that came to us may have no LocalCommID yet. */
		if (cm_rej_msg_rejected(t->buf->mad) == CM_MSG_REQ &&
		    cm_get_remote_comm_id(t->buf->mad) != 0)
			return tx_answer_req(r, t, now);
		return tx_continue(r, t, now);
	case CM_ATTR_SIDR_REP:
		return tx_sidr_rep(r, t, now);
	default:
		return tx_continue(r, t, now);
	}
}

static int relay_send_mad(Relay *r, Client *c, const struct rdmacm_mux_msg *req)
{
	UmadBuffer buf;
	TxContext t = { .client = c, .buf = &buf };
	struct rdmacm_mux_mad_addr *a = &buf.hdr.addr;
	uint64_t now = relay_now(r);
	ClientGid *cg;
	int gid_index, err;

	t.sgid = req->hdr.sgid.raw;

	if (req->umad_len < RDMACM_MUX_MAD_HDR_SIZE || req->umad_len > RDMACM_MUX_MAD_SIZE) {
		err = tx_fail(&t, TX_REJECT_BAD_LENGTH, -EMSGSIZE);
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
	/* A GID has one owner, and it is in the owner's list (and only
	 * there): the short list answers what gid_owners would. */
	cg = client_find_gid(c, t.sgid);
	if (!cg) {
		err = tx_fail(&t, TX_REJECT_FOREIGN_SGID, -EACCES);
		goto refused;
	}

	buf.hdr = req->umad.hdr;
	memcpy(buf.mad, req->umad.mad, t.len);
	memcpy(t.dest, a->gid, 16);
	t.dest_explicit = !gid_is_zero(t.dest) && !gid_equal(t.dest, t.sgid);
	if (!t.dest_explicit) {
		memset(t.dest, 0, 16);
		if (!c->c1_logged && !gid_is_zero(a->gid)) {
			c->c1_logged = true;
			log_info("client %u (pid %d) puts its own GID in addr.gid, as QEMU does; "
				 "taking destinations from the CM messages and sessions",
				 c->id, (int)c->cred.pid);
		}
	}

	err = tx_route(r, &t, now);
	if (err < 0)
		goto refused;

	/* The address: the daemon decides gid_index and the QP, never the client. */
	a->qpn = htonl(1);
	a->qkey = htonl(QP1_QKEY);
	buf.hdr.agent_id = 0;
	buf.hdr.status = 0;
	buf.hdr.timeout_ms = 0;
	buf.hdr.retries = 0;
	buf.hdr.length = 0;
	if (r->port->roce || a->grh_present) {
		unsigned generation = gid_table_generation(r->port->gids);

		if (gid_is_zero(t.dest)) {
			err = tx_fail(&t, TX_REJECT_NO_DESTINATION, -EDESTADDRREQ);
			goto refused;
		}
		/* The index found last time holds while the table is the same
		 * (every reload that changes an entry bumps the generation). */
		if (cg->gid_index >= 0 && cg->table_generation == generation)
			gid_index = cg->gid_index;
		else
			gid_index = gid_table_find(r->port->gids, t.sgid);
		/* An index the umad header cannot carry would be cut to 8
		 * bits and send from another client's GID. */
		if (gid_index < 0 || gid_index >= GID_TABLE_UMAD_INDEXES) {
			err = tx_fail(&t, TX_REJECT_NO_PORT_GID, -EADDRNOTAVAIL);
			goto refused;
		}
		cg->gid_index = gid_index;
		cg->table_generation = gid_table_generation(r->port->gids);
		a->grh_present = 1;
		a->gid_index = (uint8_t)gid_index;
		memcpy(a->gid, t.dest, 16);
		if (a->hop_limit == 0)
			a->hop_limit = DEFAULT_HOP_LIMIT;
	} else {
		a->gid_index = 0;
	}

	err = umad_port_send(r->port, &buf, t.len);
	if (err < 0) {
		t.reject = TX_REJECT_SEND_FAILED;
		log_ratelimited(LOG_WARNING, NULL, "send of %s for client %u failed: %s",
				cm_attr_index_name(cm_attr_to_index(t.attr)), c->id, strerror(-err));
		goto refused;
	}

	r->counters.tx[cm_attr_to_index(t.attr)]++;
	c->stats.tx_mads++;
	relay_emit(r, &(RelayEvent){ .attr = t.attr, .client_comm_id = t.client_id_field,
				     .wire_id = t.wire_id, .local_gid = t.sgid, .remote_gid = t.dest,
				     .hdr = &buf.hdr, .mad = buf.mad, .mad_len = t.len },
		   c);
	return 0;

refused:
	/* A session whose first message never reached the wire would only
	 * wait for its timer; a retransmission keeps the session it is for. */
	if (t.created)
		session_table_remove(r->sessions, &c->sessions, t.handle);
	r->counters.tx_reject[t.reject]++;
	c->stats.tx_rejected++;
	if (log_get_max_level() >= LOG_NOTICE) {
		char pid[32], gidf[64], comm[32], attrf[32], text[GID_STR_LEN], name[16];
		const char *fields[] = { pid, gidf, comm, attrf, NULL };

		snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->cred.pid);
		snprintf(gidf, sizeof(gidf), "GID=%s", gid_to_string(t.sgid, text));
		snprintf(comm, sizeof(comm), "COMM_ID=0x%08x", t.client_id_field);
		snprintf(attrf, sizeof(attrf), "ATTR=%s", cm_attr_name(t.attr, name));
		log_ratelimited(LOG_NOTICE, fields, "refused a MAD from client %u (pid %d): %s (%s)",
				c->id, (int)c->cred.pid, tx_reject_name(t.reject), strerror(-err));
	}
	relay_emit(r, &(RelayEvent){ .drop = tx_reject_name(t.reject), .attr = t.attr,
				     .client_comm_id = t.client_id_field, .wire_id = t.wire_id,
				     .local_gid = t.sgid,
				     .remote_gid = gid_is_zero(t.dest) ? NULL : t.dest,
				     .hdr = &req->umad.hdr, .mad = req->umad.mad,
				     .mad_len = t.len },
		   c);
	return err;
}

/* ---- extension ops ---- */

static int relay_hello(Relay *r, Client *c, struct rdmacm_mux_msg *m)
{
	struct rdmacm_mux_hello h;

	if (m->umad_len < (int32_t)sizeof(h))
		return -EINVAL;
	memcpy(&h, m->umad.mad, sizeof(h));
	if (h.magic != RDMACM_MUX_HELLO_MAGIC)
		return -EINVAL;
	c->caps = h.capabilities & RDMACM_MUX_CAP_ALL;
	c->hello_done = true;
	memset(&h, 0, sizeof(h));
	h.magic = RDMACM_MUX_HELLO_MAGIC;
	h.version_major = RDMACM_MUX_PROTO_VERSION_MAJOR;
	h.version_minor = RDMACM_MUX_PROTO_VERSION_MINOR;
	h.capabilities = c->caps;
	h.max_gids = r->cfg.max_gids;
	h.max_sessions = r->cfg.max_sessions;
	h.max_queued = r->cfg.max_queued;
	memset(m->umad.mad, 0, sizeof(m->umad.mad));
	memcpy(m->umad.mad, &h, sizeof(h));
	m->umad_len = sizeof(h);
	return 0;
}

static void relay_client_stats(Client *c, struct rdmacm_mux_msg *m)
{
	c->stats.gids = c->n_gids;
	c->stats.sessions = c->sessions.count;
	c->stats.queued = client_queued(c);
	memset(m->umad.mad, 0, sizeof(m->umad.mad));
	memcpy(m->umad.mad, &c->stats, sizeof(c->stats));
	m->umad_len = sizeof(c->stats);
}

/* ---- requests ---- */

/* Returns false when the client was disconnected. */
static bool relay_handle_request(Relay *r, Client *c, struct rdmacm_mux_msg *m)
{
	int err;
	bool bad = false;

	r->counters.requests++;
	if (m->hdr.msg_type != RDMACM_MUX_MSG_TYPE_REQ) {
		err = -EBADMSG;
		bad = true;
	} else {
		switch (m->hdr.op_code) {
		case RDMACM_MUX_OP_CODE_REG:
			err = relay_register_gid(r, c, m->hdr.sgid.raw);
			if (err == 0)
				r->counters.reg_ok++;
			else
				r->counters.reg_refused++;
			break;
		case RDMACM_MUX_OP_CODE_UNREG:
			err = relay_unregister_gid(r, c, m->hdr.sgid.raw);
			if (err == 0)
				r->counters.unreg_ok++;
			else
				r->counters.unreg_refused++;
			break;
		case RDMACM_MUX_OP_CODE_MAD:
			err = relay_send_mad(r, c, m);
			break;
		case RDMACM_MUX_OP_CODE_HELLO:
			err = relay_hello(r, c, m);
			bad = err < 0;
			break;
		case RDMACM_MUX_OP_CODE_CLIENT_STATS:
			if (c->caps & RDMACM_MUX_CAP_CLIENT_STATS) {
				relay_client_stats(c, m);
				err = 0;
				break;
			}
			/* not negotiated, so unknown to this client */
			__attribute__((fallthrough));
		default:
			err = -EOPNOTSUPP;
			bad = true;
			break;
		}
	}

	if (bad) {
		r->counters.bad_frames++;
		c->bad_frames++;
		log_ratelimited(LOG_NOTICE, NULL,
				"client %u (pid %d) sent a bad frame (msg_type %u, op_code %u)",
				c->id, (int)c->cred.pid, m->hdr.msg_type, m->hdr.op_code);
	} else {
		c->bad_frames = 0;
	}
	relay_respond(r, c, m, err);
	if (c->bad_frames >= r->cfg.max_bad_frames) {
		/* Let the error responses reach it, then hang up. */
		(void)client_flush(c);
		r->counters.clients_dropped++;
		relay_drop_client(r, c, "too many bad frames");
		return false;
	}
	return true;
}

/* Warm the collected keys; each frame keeps the session found for it. */
static void tx_warm_keys(Relay *r, TxWarmKeys *k)
{
	session_table_warm_client_comm_ids(r->sessions, k->client_ids, k->comm_ids, k->n, k->found);
	for (unsigned i = 0; i < k->n; i++)
		*k->hint[i] = k->found[i];
}

/* Add the keys of the frames @c has buffered. */
static void tx_warm_collect(TxWarmKeys *k, Client *c)
{
	for (size_t off = c->in_off; off + RDMACM_MUX_FRAME_SIZE <= c->in_len;
	     off += RDMACM_MUX_FRAME_SIZE) {
		const uint8_t *f = c->in + off;
		const uint8_t *mad = f + offsetof(struct rdmacm_mux_msg, umad.mad);
		uint32_t op, local;
		int32_t len;
		uint16_t attr;

		memcpy(&op, f + offsetof(struct rdmacm_mux_msg, hdr.op_code), sizeof(op));
		memcpy(&len, f + offsetof(struct rdmacm_mux_msg, umad_len), sizeof(len));
		if (op != RDMACM_MUX_OP_CODE_MAD || len < 32)
			continue;
		attr = get_be16(mad + 16);
		if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ || attr == CM_ATTR_SIDR_REP)
			continue;
		local = cm_get_local_comm_id(mad);
		if (local && k->n < G_N_ELEMENTS(k->comm_ids)) {
			k->client_ids[k->n] = c->id;
			k->comm_ids[k->n] = local;
			k->hint[k->n++] = &c->in_hint[off / RDMACM_MUX_FRAME_SIZE];
		}
	}
	c->input_fresh = false;
}

static void tx_warm(Relay *r, Client *c)
{
	TxWarmKeys *k = &r->tx_warm;

	k->n = 0;
	tx_warm_collect(k, c);
	tx_warm_keys(r, k);
}

static void client_io(Relay *r, Client *c, uint32_t revents)
{
	struct rdmacm_mux_msg m;

	if (revents & EPOLLOUT) {
		if (!relay_flush_client(r, c))
			return;
	}
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		for (int n = 0; n < CLIENT_BATCH && !c->reading_paused; n++) {
			/* a frame buffered already may have a hint; a refill clears them */
			uint32_t hint = c->in_len - c->in_off >= RDMACM_MUX_FRAME_SIZE
						? c->in_hint[c->in_off / RDMACM_MUX_FRAME_SIZE]
						: 0;
			int e = client_read_frame(c, &m);
			bool ok;

			if (e == 0)
				break;
			if (e < 0) {
				bool cut = client_has_partial_input(c);

				if (cut)
					r->counters.truncated_frames++;
				relay_drop_client(r, c, cut ? "disconnected in the middle of a frame"
							    : e == -EPIPE ? "disconnected"
									  : "read error");
				relay_flush_dirty(r);
				relay_schedule_timer(r);
				return;
			}
			/* a refill within the batch: one client's frames only */
			if (c->input_fresh && session_table_count(r->sessions) >= WARM_SESSIONS)
				tx_warm(r, c);
			r->tx_hint = hint;
			ok = relay_handle_request(r, c, &m);
			r->tx_hint = 0;
			if (!ok) {
				relay_flush_dirty(r);
				relay_schedule_timer(r);
				return;
			}
		}
	}
	relay_flush_dirty(r);
	relay_schedule_timer(r);
}

/*
 * In a big table every lookup misses the cache. One client's read is at
 * most CLIENT_INPUT_FRAMES frames, so read every ready client first and
 * warm all their lookups together, as umad_io() does for inbound MADs.
 */
static void tx_warm_ready(Relay *r, const struct epoll_event *evs, int n)
{
	TxWarmKeys *k = &r->tx_warm;

	k->n = 0;
	for (int i = 0; i < n; i++) {
		Client *c = relay_client(r, (uint32_t)evs[i].data.u64);

		if (!c || !(evs[i].events & EPOLLIN) || c->reading_paused)
			continue;
		/* an error is kept for client_read_frame(), after the frames */
		(void)client_fill_input(c);
		if (c->input_fresh)
			tx_warm_collect(k, c);
	}
	tx_warm_keys(r, k);
}

static int on_clients_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	Relay *r = userdata;
	struct epoll_event evs[CLIENT_EVENTS];
	int n;

	(void)s;
	(void)fd;
	(void)revents;
	n = epoll_wait(r->client_ep, evs, CLIENT_EVENTS, 0);
	r->dispatch_now = relay_now(r);
	if (session_table_count(r->sessions) >= WARM_SESSIONS)
		tx_warm_ready(r, evs, n);
	for (int i = 0; i < n; i++) {
		/* by id: serving one client may drop another (a failed flush) */
		Client *c = relay_client(r, (uint32_t)evs[i].data.u64);

		if (c)
			client_io(r, c, evs[i].events);
	}
	r->dispatch_now = 0;
	return 0;
}

int relay_add_client(Relay *r, int fd)
{
	Client *c;
	uint32_t id;
	int e;

	if (g_hash_table_size(r->clients) >= r->cfg.max_clients) {
		r->counters.clients_refused++;
		log_ratelimited(LOG_WARNING, NULL,
				"refusing a connection: %u clients is the limit (--max-clients)",
				r->cfg.max_clients);
		close(fd);
		return -EUSERS;
	}
	do
		id = r->next_client_id++;
	while (id == 0 || g_hash_table_contains(r->clients, GUINT_TO_POINTER(id)));

	c = client_new(id, fd, r->cfg.max_queued, r->cfg.max_pending);
	c->owner = r;
	if ((size_t)fd >= r->n_fd_events) {
		size_t n = (size_t)fd + 1 > 2 * r->n_fd_events ? (size_t)fd + 1 : 2 * r->n_fd_events;

		r->fd_events = g_renew(uint32_t, r->fd_events, n);
		memset(r->fd_events + r->n_fd_events, 0, (n - r->n_fd_events) * sizeof(uint32_t));
		r->n_fd_events = n;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = id };

		e = epoll_ctl(r->client_ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
	}
	if (e < 0) {
		client_free(c);
		return e;
	}
	/* closing the fd (client_free) takes it out of the set */
	r->fd_events[fd] = EPOLLIN;
	g_hash_table_insert(r->clients, GUINT_TO_POINTER(id), c);
	r->counters.clients_accepted++;
	log_info("client %u connected on fd %d: pid %d uid %d (%s)", id, fd, (int)c->cred.pid,
		 (int)c->cred.uid, c->comm);
	return 0;
}

/* ---- inbound MADs ---- */

typedef struct RxRoute {
	Client *client;
	const uint8_t *local_gid;
	uint8_t local_gid_copy[16]; /* when the session goes away on delivery */
	uint32_t handle;
	RxDrop drop;
	uint32_t wire_id;
	uint32_t client_comm_id;
} RxRoute;

/* The local GID a MAD was addressed to, as far as the header tells. */
/*
 * The local GID a MAD was addressed to, as far as the header tells.
 * @hint is a GID the message itself names as its destination (a REQ's
 * RemotePortGID, a SIDR_REQ's cma_hdr address), or NULL: the kernel
 * reports the index in 8 bits, so in a table of more than 256 entries
 * the entry at that index may be another one with the same low bits.
 */
static const uint8_t *rx_local_gid(Relay *r, const UmadBuffer *buf, const uint8_t *hint)
{
	GidTable *t = r->port->gids;
	uint8_t index8 = buf->hdr.addr.gid_index;

	if (!buf->hdr.addr.grh_present)
		return NULL;
	if (hint && gid_table_size(t) > GID_TABLE_UMAD_INDEXES &&
	    gid_table_matches_index8(t, hint, index8))
		return hint;
	return gid_table_get(t, index8);
}

static bool rx_route_new(Relay *r, UmadBuffer *buf, size_t len, uint16_t attr, uint64_t now,
			 RxRoute *rt)
{
	const uint8_t *peer_gid = buf->hdr.addr.gid;
	uint8_t fallback[16];
	bool sidr = attr == CM_ATTR_SIDR_REQ;
	bool named = sidr ? cm_cma_dst_gid(buf->mad, len, fallback) == 0 : true;
	const uint8_t *hint = !named ? NULL : sidr ? fallback : cm_req_remote_gid(buf->mad);
	const uint8_t *local = rx_local_gid(r, buf, hint);
	uint32_t peer_id = sidr ? cm_get_sidr_request_id(buf->mad) : cm_get_local_comm_id(buf->mad);
	Client *c;
	uint32_t h;

	/* Without a GRH (IB, LID routed) the message names the target. */
	if (!local || !g_hash_table_contains(r->gid_owners, local))
		local = hint;
	c = local ? g_hash_table_lookup(r->gid_owners, local) : NULL;
	rt->wire_id = peer_id;
	if (local) {
		/* @local may point at @fallback on this stack frame. */
		memcpy(rt->local_gid_copy, local, 16);
		rt->local_gid = local = rt->local_gid_copy;
	}
	if (!c) {
		rt->drop = RX_DROP_NO_OWNER;
		return false;
	}

	h = session_table_lookup_peer(r->sessions, peer_id, local,
				      buf->hdr.addr.grh_present ? peer_gid : NULL);
	if (!h) {
		if (c->sessions.count >= r->cfg.max_sessions) {
			rt->drop = RX_DROP_SESSION_QUOTA;
			rt->client = c;
			return false;
		}
		h = session_table_add(r->sessions, &c->sessions, c->id,
				      sidr ? SESSION_SIDR_RCVD : SESSION_REQ_RCVD, now);
		if (!h) {
			rt->drop = RX_DROP_SESSION_QUOTA;
			return false;
		}
		r->counters.sessions_created++;
		session_table_set_peer(r->sessions, h, peer_id, local,
				       buf->hdr.addr.grh_present ? peer_gid : NULL);
	}
	/* A repeated REQ re-arms the timer of the session it started. */
	{
		Session *s = session_table_get(r->sessions, h);
		if (!s) {
			rt->drop = RX_DROP_NO_SESSION;
			return false;
		}
		if (s->state == SESSION_REQ_RCVD || s->state == SESSION_SIDR_RCVD)
			session_table_arm(r->sessions, h,
					  sidr ? SESSION_TIMER_SIDR : SESSION_TIMER_HANDSHAKE, now);
		c = relay_client(r, s->client_id);
		rt->local_gid = s->local_gid;
	}
	rt->client = c;
	rt->handle = h;
	if (!c)
		rt->drop = RX_DROP_NO_SESSION; /* cannot happen: sessions go with clients */
	return c != NULL;
}

static bool rx_route_session(Relay *r, UmadBuffer *buf, uint16_t attr, uint64_t now,
			     RxRoute *rt)
{
	uint8_t *mad = buf->mad;
	bool sidr = attr == CM_ATTR_SIDR_REP;
	uint32_t wire = sidr ? cm_get_sidr_request_id(mad) : cm_get_remote_comm_id(mad);
	uint32_t h = 0;
	Session *s;

	if (wire != 0) {
		h = session_table_lookup_wire_id(r->sessions, wire);
	} else if (attr == CM_ATTR_REJ || attr == CM_ATTR_MRA) {
		/* REJ(Timeout) or an MRA of a REQ: the sender's own comm id,
		 * remembered from its REQ, plus who it is. */
		const uint8_t *local = rx_local_gid(r, buf, NULL);
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
	rt->client = relay_client(r, s->client_id);
	if (!rt->client) {
		rt->drop = RX_DROP_NO_SESSION;
		return false;
	}
	rt->handle = h;
	rt->local_gid = s->local_gid;
	rt->client_comm_id = s->client_comm_id;

	if (sidr) {
		cm_set_sidr_request_id(mad, s->client_comm_id);
		memcpy(rt->local_gid_copy, s->local_gid, 16);
		rt->local_gid = rt->local_gid_copy;
		/* The query is answered; the session has done its job. */
		session_table_remove(r->sessions, &rt->client->sessions, h);
		rt->handle = 0;
		return true;
	}
	if (wire != 0)
		cm_set_remote_comm_id(mad, s->client_comm_id);

	/* Learn the peer's comm id from its REP, so that its REJ(Timeout)
	 * or MRA without our id can still be matched. */
	if (attr == CM_ATTR_REP) {
		/* Through the table: the peer comm id is an index key. */
		session_table_set_peer(r->sessions, h, cm_get_local_comm_id(mad), s->local_gid,
				       buf->hdr.addr.grh_present ? buf->hdr.addr.gid : NULL);
	}
	session_advance(r, h, attr, true, now);
	return true;
}

static void relay_deliver(Relay *r, UmadBuffer *buf, size_t len)
{
	struct rdmacm_mux_msg m;
	RxRoute rt = { .drop = RX_DROP_COUNT };
	uint8_t wire_mad[RDMACM_MUX_MAD_SIZE];
	RelayEvent ev = { .rx = true, .hdr = &buf->hdr, .mad = wire_mad, .mad_len = len,
			  .remote_gid = buf->hdr.addr.gid };
	uint16_t attr = 0;
	uint64_t now;
	int e;
	bool ok;

	if (buf->hdr.status != 0 || len <= RDMACM_MUX_MAD_HDR_SIZE) {
		r->counters.rx_drop[RX_DROP_STATUS]++;
		return;
	}
	/* Sinks see the MAD as it was on the wire, before any rewrite. */
	if (r->sinks->len)
		memcpy(wire_mad, buf->mad, len);
	e = cm_mad_check(buf->mad, len, &attr);
	ev.attr = attr;
	if (e < 0) {
		RxDrop d = e == -EPROTO ? RX_DROP_NOT_CM
			   : e == -EOPNOTSUPP ? RX_DROP_UNSUPPORTED
					       : RX_DROP_MALFORMED;
		r->counters.rx_drop[d]++;
		ev.drop = rx_drop_name(d);
		relay_emit(r, &ev, NULL);
		return;
	}

	now = relay_now(r);
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ)
		ok = rx_route_new(r, buf, len, attr, now, &rt);
	else
		ok = rx_route_session(r, buf, attr, now, &rt);
	ev.wire_id = rt.wire_id;
	ev.client_comm_id = rt.client_comm_id;
	ev.local_gid = rt.local_gid;
	if (!ok) {
		r->counters.rx_drop[rt.drop]++;
		ev.drop = rx_drop_name(rt.drop);
		relay_emit(r, &ev, rt.client);
		return;
	}

	/* Build the frame from zero: nothing stale may reach a client. Every
	 * byte is written once: zeros up to the umad header (padding too),
	 * the header and the MAD copied, zeros after the MAD to the end. */
	memset(&m, 0, offsetof(struct rdmacm_mux_msg, umad));
	m.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m.hdr.op_code = RDMACM_MUX_OP_CODE_MAD;
	memcpy(m.hdr.sgid.raw, rt.local_gid, 16);
	m.umad_len = (int32_t)len;
	memcpy(&m.umad.hdr, &buf->hdr, sizeof(m.umad.hdr));
	memcpy(m.umad.mad, buf->mad, len);
	/* the rest of the MAD and the frame's tail padding */
	memset(m.umad.mad + len, 0, sizeof(m) - offsetof(struct rdmacm_mux_msg, umad.mad) - len);

	if (client_queue_mad(rt.client, &m) < 0) {
		r->counters.rx_drop[RX_DROP_QUEUE_FULL]++;
		rt.client->stats.rx_dropped++;
		ev.drop = rx_drop_name(RX_DROP_QUEUE_FULL);
		relay_emit(r, &ev, rt.client);
		return;
	}
	r->counters.rx[cm_attr_to_index(attr)]++;
	rt.client->stats.rx_mads++;
	relay_mark_dirty(r, rt.client);
	relay_emit(r, &ev, rt.client);
}

/* The wire id rx_route_session() will look up for an inbound MAD, or 0. */
static uint32_t rx_session_key(const UmadBuffer *buf, size_t len)
{
	uint16_t attr;

	if (buf->hdr.status != 0 || len < 32)
		return 0;
	attr = get_be16(buf->mad + 16);
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ || attr == CM_ATTR_SIDR_REP)
		return 0;
	return cm_get_remote_comm_id(buf->mad);
}

static void umad_io(Relay *r)
{
	int n = 0, e = 0;

	/* Take the batch first, then route it: in a big table the lookups'
	 * cache misses then overlap (session_table_warm_wire_ids()), instead of one per MAD. */
	while (n < UMAD_BATCH) {
		size_t len = 0;

		e = umad_port_recv(r->port, &r->rx_batch[n], &len);
		if (e < 0)
			break;
		r->recv_errors_in_a_row = 0;
		r->rx_len[n++] = len;
	}
	if (n > 1 && session_table_count(r->sessions) >= WARM_SESSIONS) {
		uint32_t keys[UMAD_BATCH];
		unsigned k = 0;

		for (int i = 0; i < n; i++) {
			keys[k] = rx_session_key(&r->rx_batch[i], r->rx_len[i]);
			k += keys[k] != 0;
		}
		session_table_warm_wire_ids(r->sessions, keys, k);
	}
	for (int i = 0; i < n; i++)
		relay_deliver(r, &r->rx_batch[i], r->rx_len[i]);

	if (e == -EIO || e == -ENODEV || e == -ENXIO) {
		log_error("the umad device of %s port %d went away (%s): exiting so "
			  "that it can be restarted when the device is back",
			  r->port->dev, r->port->port, strerror(-e));
		(void)sd_event_exit(r->event, -ENODEV);
		return;
	}
	if (e < 0 && e != -EAGAIN) {
		r->counters.recv_errors++;
		/* A port that fails every read would keep the loop busy
		 * forever: give up and let systemd restart us. */
		if (++r->recv_errors_in_a_row >= RECV_ERRORS_FATAL) {
			log_error("receiving from %s port %d failed %u times in a row (%s): "
				  "exiting", r->port->dev, r->port->port,
				  r->recv_errors_in_a_row, strerror(-e));
			(void)sd_event_exit(r->event, -EIO);
			return;
		}
		log_ratelimited(LOG_WARNING, NULL, "receiving from %s port %d failed: %s",
				r->port->dev, r->port->port, strerror(-e));
	}
	relay_flush_dirty(r);
	relay_schedule_timer(r);
}

static int on_umad_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	Relay *r = userdata;

	(void)s;
	(void)fd;
	(void)revents;
	r->dispatch_now = relay_now(r);
	umad_io(r);
	r->dispatch_now = 0;
	return 0;
}

static int on_session_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	Relay *r = userdata;
	unsigned n;

	(void)s;
	r->timer_armed_at = 0;
	n = session_table_expire(r->sessions, usec, session_owner, r);
	r->counters.sessions_expired += n;
	if (n)
		log_debug("%u sessions expired", n);
	relay_schedule_timer(r);
	return 0;
}

/* ---- life cycle ---- */

static void client_free_cb(gpointer p)
{
	client_free(p);
}

int relay_new(sd_event *event, UmadPort *port, const RelayConfig *cfg, Relay **ret)
{
	Relay *r = g_new0(Relay, 1);
	int e;

	r->client_ep = -1;
	r->rx_batch = g_new(UmadBuffer, UMAD_BATCH);
	r->rx_len = g_new(size_t, UMAD_BATCH);
	r->event = sd_event_ref(event);
	r->port = port;
	r->cfg = *cfg;
	if (r->cfg.max_pending == 0)
		r->cfg.max_pending = 64;
	if (r->cfg.max_bad_frames == 0)
		r->cfg.max_bad_frames = 8;
	r->next_client_id = 1;
	r->sessions = session_table_new(cfg->timeouts_ms);
	r->clients = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, client_free_cb);
	r->gid_owners = g_hash_table_new_full(gid_hash, gid_hash_equal, g_free, NULL);
	r->dirty = g_ptr_array_new();
	r->sinks = g_array_new(FALSE, FALSE, sizeof(EventSink));
	if (cfg->trace)
		relay_add_event_sink(r, text_trace_sink, cfg->trace);
	if (!r->sessions) {
		relay_free(r);
		return -ENOMEM;
	}
	r->client_ep = epoll_create1(EPOLL_CLOEXEC);
	if (r->client_ep < 0) {
		e = -errno;
		relay_free(r);
		return e;
	}
	e = sd_event_add_io(event, &r->umad_io, port->fd, EPOLLIN, on_umad_io, r);
	if (e >= 0)
		e = sd_event_add_io(event, &r->clients_io, r->client_ep, EPOLLIN, on_clients_io, r);
	if (e >= 0)
		e = sd_event_add_time(event, &r->timer, CLOCK_MONOTONIC, UINT64_MAX, 1000,
				      on_session_timer, r);
	if (e >= 0)
		e = sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
	if (e < 0) {
		relay_free(r);
		return e;
	}
	*ret = r;
	return 0;
}

void relay_free(Relay *r)
{
	if (!r)
		return;
	sd_event_source_disable_unref(r->umad_io);
	sd_event_source_disable_unref(r->clients_io);
	sd_event_source_disable_unref(r->timer);
	if (r->clients)
		g_hash_table_destroy(r->clients);
	if (r->client_ep >= 0)
		close(r->client_ep);
	g_free(r->fd_events);
	g_free(r->rx_batch);
	g_free(r->rx_len);
	if (r->gid_owners)
		g_hash_table_destroy(r->gid_owners);
	if (r->dirty)
		g_ptr_array_free(r->dirty, TRUE);
	if (r->sinks)
		g_array_free(r->sinks, TRUE);
	session_table_free(r->sessions);
	umad_port_close(r->port);
	sd_event_unref(r->event);
	g_free(r);
}

void relay_foreach_client(const Relay *r, void (*fn)(void *userdata, const Client *c),
			  void *userdata)
{
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value))
		fn(userdata, value);
}

void relay_foreach_session(const Relay *r, void (*fn)(void *userdata, const Session *s),
			   void *userdata)
{
	session_table_foreach(r->sessions, fn, userdata);
}

const UmadPort *relay_port(const Relay *r)
{
	return r->port;
}

uint32_t relay_client_count(const Relay *r)
{
	return g_hash_table_size(r->clients);
}

uint32_t relay_gid_count(const Relay *r)
{
	return g_hash_table_size(r->gid_owners);
}

uint32_t relay_session_count(const Relay *r)
{
	return session_table_count(r->sessions);
}

size_t relay_session_memory(const Relay *r)
{
	return session_table_memory(r->sessions);
}

const RelayCounters *relay_counters(const Relay *r)
{
	return &r->counters;
}

void relay_dump_counters(const Relay *r, FILE *f)
{
	const RelayCounters *k = &r->counters;

	fprintf(f, "counters for %s port %d:\n", r->port->dev, r->port->port);
	fprintf(f, "  %-16s %10s %10s\n", "attribute", "tx", "rx");
	for (int i = 0; i < CM_IDX_COUNT; i++)
		if (k->tx[i] || k->rx[i])
			fprintf(f, "  %-16s %10" PRIu64 " %10" PRIu64 "\n",
				cm_attr_index_name((enum cm_attr_index)i), k->tx[i], k->rx[i]);
	for (int i = 0; i < RX_DROP_COUNT; i++)
		if (k->rx_drop[i])
			fprintf(f, "  rx dropped, %-16s %10" PRIu64 "\n", rx_drop_names[i], k->rx_drop[i]);
	for (int i = 0; i < TX_REJECT_COUNT; i++)
		if (k->tx_reject[i])
			fprintf(f, "  tx refused, %-16s %10" PRIu64 "\n", tx_reject_names[i],
				k->tx_reject[i]);
	fprintf(f, "  requests %" PRIu64 ", REG ok %" PRIu64 " refused %" PRIu64
		   ", UNREG ok %" PRIu64 " refused %" PRIu64 ", bad frames %" PRIu64
		   ", truncated frames %" PRIu64 "\n",
		k->requests, k->reg_ok, k->reg_refused, k->unreg_ok, k->unreg_refused,
		k->bad_frames, k->truncated_frames);
	fprintf(f, "  clients accepted %" PRIu64 " refused %" PRIu64 " dropped %" PRIu64
		   ", sessions created %" PRIu64 " expired %" PRIu64 " live %u\n",
		k->clients_accepted, k->clients_refused, k->clients_dropped,
		k->sessions_created, k->sessions_expired, session_table_count(r->sessions));
}

/* ---- relay-driver.h ---- */

void relay_driver_set_time(Relay *r, uint64_t now)
{
	r->driver_now = now ? now : 1;
}

void relay_driver_seed_wire_ids(Relay *r, uint32_t seed)
{
	session_table_seed_wire_ids(r->sessions, seed, seed * 2654435761u);
}

static uint32_t relay_new_client_id(Relay *r)
{
	uint32_t id;

	do
		id = r->next_client_id++;
	while (id == 0 || g_hash_table_contains(r->clients, GUINT_TO_POINTER(id)));
	return id;
}

uint32_t relay_driver_add_client(Relay *r)
{
	Client *c;
	uint32_t id;

	if (g_hash_table_size(r->clients) >= r->cfg.max_clients)
		return 0;
	id = relay_new_client_id(r);
	c = client_new(id, -1, r->cfg.max_queued, r->cfg.max_pending);
	c->owner = r;
	g_hash_table_insert(r->clients, GUINT_TO_POINTER(id), c);
	r->counters.clients_accepted++;
	return id;
}

bool relay_driver_has_client(const Relay *r, uint32_t client_id)
{
	return g_hash_table_contains(r->clients, GUINT_TO_POINTER(client_id));
}

void relay_driver_remove_client(Relay *r, uint32_t client_id)
{
	Client *c = g_hash_table_lookup(r->clients, GUINT_TO_POINTER(client_id));

	if (c)
		relay_drop_client(r, c, "removed by the driver");
}

int relay_driver_request(Relay *r, uint32_t client_id, const struct rdmacm_mux_msg *m)
{
	Client *c = g_hash_table_lookup(r->clients, GUINT_TO_POINTER(client_id));
	struct rdmacm_mux_msg copy = *m;

	if (!c)
		return -ENOENT;
	(void)relay_handle_request(r, c, &copy);
	relay_flush_dirty(r);
	return 0;
}

void relay_driver_wire_mad(Relay *r, const UmadBuffer *buf, size_t mad_len)
{
	UmadBuffer copy = *buf;

	if (mad_len > RDMACM_MUX_MAD_SIZE)
		mad_len = RDMACM_MUX_MAD_SIZE;
	relay_deliver(r, &copy, mad_len);
	relay_flush_dirty(r);
}

unsigned relay_driver_drain(Relay *r, uint32_t client_id,
			    void (*fn)(void *userdata, const struct rdmacm_mux_msg *m),
			    void *userdata)
{
	Client *c = g_hash_table_lookup(r->clients, GUINT_TO_POINTER(client_id));
	unsigned n = 0;

	if (!c)
		return 0;
	n = client_drain(c, fn, userdata);
	if (c->reading_paused && !client_responses_full(c))
		c->reading_paused = false;
	return n;
}

unsigned relay_driver_run_timers(Relay *r)
{
	unsigned n = session_table_expire(r->sessions, relay_now(r), session_owner, r);

	r->counters.sessions_expired += n;
	return n;
}

typedef struct InvariantCheck {
	Relay *r;
	GHashTable *wire_ids;
	GHashTable *per_client;
	const char *violation;
} InvariantCheck;

static void check_session(void *userdata, const Session *s)
{
	InvariantCheck *k = userdata;
	Client *c = g_hash_table_lookup(k->r->clients, GUINT_TO_POINTER(s->client_id));
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
}

const char *relay_check_invariants(Relay *r)
{
	InvariantCheck k = { .r = r };
	GHashTableIter it;
	gpointer key, value;
	uint64_t sessions_listed = 0;

	k.wire_ids = g_hash_table_new(g_direct_hash, g_direct_equal);
	k.per_client = g_hash_table_new(g_direct_hash, g_direct_equal);
	session_table_foreach(r->sessions, check_session, &k);

	g_hash_table_iter_init(&it, r->clients);
	while (!k.violation && g_hash_table_iter_next(&it, &key, &value)) {
		Client *c = value;
		guint counted = GPOINTER_TO_UINT(g_hash_table_lookup(k.per_client, key));

		if (c->sessions.count != counted)
			k.violation = "a client's session list disagrees with the table";
		else if (c->sessions.count > r->cfg.max_sessions)
			k.violation = "a client is over its session quota";
		else if (c->n_gids > r->cfg.max_gids)
			k.violation = "a client is over its GID quota";
		else if (c->mad.len > c->mad.max)
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
		Client *c = value;

		if (!g_hash_table_contains(r->clients, GUINT_TO_POINTER(c->id)) ||
		    !client_find_gid(c, key))
			k.violation = "a GID's owner does not hold it";
	}
	if (!k.violation && sessions_listed != session_table_count(r->sessions))
		k.violation = "the session count disagrees with the client lists";
	if (!k.violation)
		k.violation = session_table_check(r->sessions);
	if (!k.violation && r->counters.sessions_created < session_table_count(r->sessions))
		k.violation = "more live sessions than were ever created";
	g_hash_table_unref(k.wire_ids);
	g_hash_table_unref(k.per_client);
	return k.violation;
}
