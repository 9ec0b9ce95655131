/* SPDX-License-Identifier: MIT */
/*
 * Owns what makes the relay survive its own process: the clients' state
 * and the session table in memfds, every client socket in the service
 * manager's fd store, taking all of it over at start (converting another
 * version's), the answers owed to clients, and the planned hand-off at
 * SIGTERM. A take-over starts the crash-loop guard (relay-guard.c).
 *
 * What a crash costs: at most the MADs in flight. Every request a client
 * waits on is answered by the successor, whether a sender had its MAD or
 * it was read and not handled while the client's reading was paused. A
 * planned restart or upgrade answers every request it took in (those it
 * did not handle with EAGAIN), and no client sees its socket close.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff-fd-store.h"
#include "handoff-sessions.h"
#include "log.h"
#include "relay-guard.h"
#include "relay-handoff.h"
#include "relay-internal.h"
#include "util.h"

static void relay_handoff_sync_gids(Relay *r, RelayClient *c)
{
	g_autofree uint8_t *gids = NULL;

	if (!r->handoff || c->handoff_slot < 0)
		return;
	gids = g_malloc((size_t)MAX(c->n_gids, 1u) * GID_LEN);
	for (uint32_t i = 0; i < c->n_gids; i++)
		memcpy(gids + (size_t)i * GID_LEN, c->gids[i].gid, GID_LEN);
	handoff_state_set_gids(r->handoff, c->handoff_slot, (const uint8_t(*)[16])(void *)gids,
			       c->n_gids);
}

void relay_handoff_client_gids(Relay *r, RelayClient *c)
{
	relay_handoff_sync_gids(r, c);
}

void relay_handoff_client_hello(Relay *r, RelayClient *c)
{
	if (r->handoff && c->handoff_slot >= 0)
		handoff_state_set_hello(r->handoff, c->handoff_slot, c->caps);
}

void relay_handoff_client_c1_logged(Relay *r, RelayClient *c)
{
	if (r->handoff && c->handoff_slot >= 0)
		handoff_state_add_flags(r->handoff, c->handoff_slot, HANDOFF_CLIENT_F_C1_LOGGED);
}

void relay_handoff_client_added(Relay *r, RelayClient *c)
{
	char name[32];

	c->handoff_slot = -1;
	if (!r->handoff || c->conn.fd < 0)
		return;
	/* The slot first: a crash before the fd is stored leaves a slot
	 * without a socket, which the successor frees. */
	c->handoff_slot = handoff_state_claim(r->handoff, c->id);
	if (c->handoff_slot < 0) {
		log_ratelimited(LOG_WARNING, NULL,
				"no hand-off slot for client %u: a restart would disconnect it",
				c->id);
		return;
	}
	if (fd_store_put(fd_store_client_name(c->id, name), c->conn.fd) < 0) {
		handoff_state_release(r->handoff, c->handoff_slot);
		c->handoff_slot = -1;
	}
}

void relay_handoff_client_gone(Relay *r, RelayClient *c)
{
	char name[32];
	int e;

	if (!r->handoff || c->handoff_slot < 0)
		return;
	/* The socket first: a crash in between leaves a slot without a
	 * socket, never a socket that a successor would serve as this client. */
	e = fd_store_remove(fd_store_client_name(c->id, name));
	if (e < 0 && c->conn.fd >= 0) {
		/* The store keeps its copy: closing ours would not end the
		 * connection. Shut it down, so the client sees it end now. */
		log_warning("client %u: cannot take its socket out of the fd store (%s); "
			    "shutting the connection down",
			    c->id, strerror(-e));
		(void)shutdown(c->conn.fd, SHUT_RDWR);
	}
	handoff_state_owed_clear_client(r->handoff, c->id);
	handoff_state_release(r->handoff, c->handoff_slot);
	c->handoff_slot = -1;
}

/* ---- answers owed ---- */

int relay_handoff_owe(Relay *r, RelayClient *c, uint64_t seq, const struct rdmacm_mux_msg *req)
{
	int i;

	if (!r->handoff || c->handoff_slot < 0)
		return -1;
	i = handoff_state_owe(r->handoff, c->id, seq, req);
	if (i < 0)
		log_ratelimited(LOG_WARNING, NULL,
				"no room to write down the answer owed to client %u: a crash now "
				"would leave it waiting",
				c->id);
	return i;
}

void relay_handoff_owed_answered(Relay *r, int owed)
{
	if (r->handoff && owed >= 0)
		handoff_state_owed_clear(r->handoff, owed);
}

void relay_handoff_owe_buffered(Relay *r, RelayClient *c)
{
	const struct rdmacm_mux_msg *frames;
	unsigned n = client_peek_frames(&c->conn, &frames);
	/* Their answers would come after every frame queued now. */
	uint64_t seq = c->conn.resp.popped + c->conn.resp.len;

	if (!r->handoff || c->handoff_slot < 0 || n <= c->n_owed_buffered)
		return;
	/* Frames come in only once the buffer is empty, and then no record is
	 * left: the new ones follow the recorded ones. */
	if (c->n_owed_buffered == 0)
		c->owed_buffered_head = 0;
	for (unsigned i = c->n_owed_buffered; i < n; i++) {
		unsigned at = c->owed_buffered_head + i;

		if (at >= G_N_ELEMENTS(c->owed_buffered))
			break;
		c->owed_buffered[at] = relay_handoff_owe(r, c, seq + i, &frames[i]);
		c->n_owed_buffered++;
	}
}

void relay_handoff_buffered_taken(Relay *r, RelayClient *c)
{
	if (c->n_owed_buffered == 0)
		return;
	relay_handoff_owed_answered(r, c->owed_buffered[c->owed_buffered_head]);
	c->owed_buffered_head++;
	c->n_owed_buffered--;
}

/* ---- taking over ---- */

/* The answer a request gets when the process that took it ended without
 * answering (a crash): it may or may not have been sent, and sending a CM
 * MAD again is what the CM does on a lost one anyway. PROTOCOL.md. */
#define RELAY_HANDOFF_OWED_ERR (-EAGAIN)
/* Items dropped at a take-over logged one by one; past this, counted. */
#define RELAY_HANDOFF_DROP_LOG_MAX 32u

/* The owed section's room for its records, at most. */
#define RELAY_HANDOFF_OWED_MAX_BYTES (256u << 20)

/* Answers a crash may leave owed: a client's slow sends and the requests
 * it has read and not handled (its input buffer), within a bound. */
static uint32_t relay_handoff_owed_room(const Relay *r)
{
	uint64_t n = (uint64_t)r->cfg.max_clients *
		     (MAX(r->cfg.max_slow_sends, 1u) + CLIENT_INPUT_FRAMES);

	return (uint32_t)MIN(n, RELAY_HANDOFF_OWED_MAX_BYTES / sizeof(HandoffOwed));
}

static HandoffShape relay_handoff_shape(const Relay *r)
{
	return (HandoffShape){ .dev = r->port->dev,
			       .port = r->port->port,
			       .n_clients = r->cfg.max_clients,
			       .max_gids = r->cfg.max_gids,
			       .n_owed = relay_handoff_owed_room(r),
			       .vms_bytes = r->vms.state_room,
			       .counter_names = relay_counter_names(),
			       .n_counters = RELAY_COUNTER_WORDS };
}

static uint64_t relay_handoff_new_pair_id(void)
{
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = now_usec() ^ ((uint64_t)getpid() << 40);
	return id;
}

/* A kind of hand-off memfd in the store: its two names, and which one the
 * memfd read came under. */
typedef struct RelayHandoffKind {
	const char *names[2];
	int found;  /* the name of the memfd read, or -1 */
	bool stale; /* the other name held a memfd too (closed) */
} RelayHandoffKind;

/*
 * Of a kind's two memfds (@fds[0] under its name, @fds[1] under the other;
 * taken over, set to -1), the one to read: the higher generation, which
 * a crash during a conversion left beside its source. The other is closed.
 */
static int relay_handoff_pick(int *fds[2], uint32_t kind, RelayHandoffKind *k)
{
	int64_t g[2];

	for (int i = 0; i < 2; i++)
		g[i] = *fds[i] >= 0 ? handoff_memfd_generation(*fds[i], kind) : INT64_MIN;
	k->found = *fds[0] < 0 && *fds[1] < 0 ? -1 : g[1] > g[0] ? 1 : 0;
	k->stale = *fds[0] >= 0 && *fds[1] >= 0;
	if (k->found < 0)
		return -1;
	if (k->stale)
		close(*fds[!k->found]);
	{
		int fd = *fds[k->found];

		*fds[0] = *fds[1] = -1;
		return fd;
	}
}

GBytes *relay_handoff_peek_vms(Relay *r, const RelayHandoffFds *fds)
{
	int64_t g0 = fds->state >= 0 ? handoff_memfd_generation(fds->state, HANDOFF_KIND_STATE)
				     : INT64_MIN,
		g1 = fds->state_alt >= 0
			     ? handoff_memfd_generation(fds->state_alt, HANDOFF_KIND_STATE)
			     : INT64_MIN;
	/* The one relay_handoff_pick() will take. */
	int fd = fds->state < 0 && fds->state_alt < 0 ? -1 : g1 > g0 ? fds->state_alt : fds->state;
	GBytes *b = NULL;

	/* A state that is refused is said so once, by relay_handoff_start(). */
	if (fd >= 0)
		(void)handoff_state_vms_peek(fd, r->port->dev, r->port->port, &b, NULL);
	return b;
}

int relay_handoff_write_vms(Relay *r, const void *data, size_t len)
{
	if (!r->handoff)
		return -ENODEV;
	return handoff_state_vms_write(r->handoff, data, len);
}

static void relay_handoff_store_remove(const char *name)
{
	int e = fd_store_remove(name);

	if (e < 0)
		log_warning("cannot take %s out of the fd store: %s", name, strerror(-e));
}

/*
 * The store keeps @fd for kind @k from now on. The memfd read, used in
 * place (@in_place), stays where it is. A new one (converted) goes under
 * the name the memfd read did not come under, and only then is that one
 * removed: whatever step a crash picks, the store holds a usable memfd,
 * and of two the successor reads the higher generation, the new one. The
 * store never gets one file under two names (systemd keeps one copy of a
 * file, and would drop both with either name).
 */
static void relay_handoff_store_keep(const RelayHandoffKind *k, int fd, bool in_place)
{
	int target = k->found < 0 ? 0 : !k->found;

	if (in_place) {
		if (k->stale)
			relay_handoff_store_remove(k->names[!k->found]);
		return;
	}
	if (k->stale)
		relay_handoff_store_remove(k->names[target]);
	if (fd_store_put(k->names[target], fd) < 0)
		return; /* logged; the old one stays, and is read next time */
	if (k->found >= 0)
		relay_handoff_store_remove(k->names[k->found]);
}

/* Kind @k has nothing usable in the store: @fd, new, takes its place. */
static void relay_handoff_store_fresh(const RelayHandoffKind *k, int fd)
{
	if (k->found >= 0 || k->stale) {
		relay_handoff_store_remove(k->names[0]);
		relay_handoff_store_remove(k->names[1]);
	}
	(void)fd_store_put(k->names[0], fd);
}

typedef struct RelayHandoffDrops {
	unsigned n;
} RelayHandoffDrops;

static void relay_handoff_dropped(void *userdata, const char *what, const char *why)
{
	RelayHandoffDrops *d = userdata;

	if (++d->n <= RELAY_HANDOFF_DROP_LOG_MAX)
		log_notice("not taken over from the previous process: %s (%s)", what, why);
}

typedef struct RelayHandoffSessionDrops {
	Relay *relay;
	RelayHandoffDrops drops;
} RelayHandoffSessionDrops;

static SessionList *relay_handoff_session_owner(void *userdata, uint32_t client_id)
{
	return relay_session_owner(((RelayHandoffSessionDrops *)userdata)->relay, client_id);
}

static void relay_handoff_session_dropped(void *userdata, const Session *s, const char *why)
{
	RelayHandoffSessionDrops *d = userdata;
	char what[80];

	g_snprintf(what, sizeof(what), "a session of client %u (wire id 0x%08x, %s)", s->client_id,
		   s->wire_id, session_state_name((SessionState)s->state));
	relay_handoff_dropped(&d->drops, what, why);
}

/* A fresh table in a new memfd, kept in the store for kind @k. */
static SessionTable *relay_handoff_fresh_sessions(Relay *r, const SessionFileOwner *owner,
						  const RelayHandoffKind *k)
{
	SessionTable *t = NULL;
	int fd = memfd_create("rdmacm-mux-sessions", MFD_CLOEXEC);
	int e = fd < 0 ? -errno : session_table_new_in(r->cfg.timeouts_ms, fd, owner, &t);

	if (e < 0) {
		log_warning("cannot keep the sessions in a memfd (%s): a restart would lose them",
			    strerror(-e));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	r->sessions_fd = fd;
	relay_handoff_store_fresh(k, fd);
	return t;
}

/* The sessions a predecessor left (unless @drop), or a fresh table. */
static void relay_handoff_sessions(Relay *r, RelayHandoffFds *fds, bool drop)
{
	SessionFileOwner owner = { r->port->dev, r->port->port, handoff_state_pair_id(r->handoff),
				   0 };
	RelayHandoffSessionDrops d = { .relay = r };
	RelayHandoffKind k = { { FD_STORE_SESSIONS, FD_STORE_SESSIONS_ALT }, -1, false };
	int *both[2] = { &fds->sessions, &fds->sessions_alt };
	SessionTable *t = NULL;
	const char *why = "?";
	int fd = relay_handoff_pick(both, HANDOFF_KIND_SESSIONS, &k);
	int table_fd = -1, e;

	if (fd >= 0 && !drop) {
		e = handoff_sessions_adopt(fd, &owner, r->cfg.timeouts_ms, relay_now(r),
					   relay_handoff_session_owner,
					   relay_handoff_session_dropped, &d, &t, &table_fd, &why);
		if (e < 0) {
			log_warning("cannot take over the sessions: %s (%s); starting with none", why,
				    strerror(-e));
		} else if (table_fd == fd) {
			r->sessions_fd = fd;
			relay_handoff_store_keep(&k, fd, true);
			fd = -1;
		} else {
			log_info("converted the previous process's sessions into this version's "
				 "format");
			r->sessions_fd = table_fd;
			relay_handoff_store_keep(&k, table_fd, false);
		}
	}
	if (fd >= 0)
		close(fd);
	if (t) {
		log_info("took over %u sessions", session_table_count(t));
		if (d.drops.n)
			log_notice("%u sessions of the previous process were not taken over "
				   "(their client is gone, or they did not hold up)",
				   d.drops.n);
		r->counters->handoff_items_dropped += d.drops.n;
	} else {
		t = relay_handoff_fresh_sessions(r, &owner, &k);
		if (!t)
			return;
	}
	session_table_set_remove_hook(r->sessions, NULL, NULL);
	session_table_free(r->sessions);
	r->sessions = t;
	session_table_set_remove_hook(r->sessions, relay_session_removed, r);
	relay_recount_half_open_peers(r);
	relay_schedule_timer(r);
}

/*
 * Answer each request the predecessor took from @c and did not answer (it
 * ended without a hand-off while a sender had them), oldest first, before
 * anything else goes to @c: a client reads its answers in request order.
 */
static void relay_handoff_answer_owed(Relay *r, RelayClient *c)
{
	g_autoptr(GArray) owed = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	unsigned answered = 0;

	handoff_state_owed_take(r->handoff, c->id, owed);
	for (guint k = 0; k < owed->len; k++) {
		int i = (int)g_array_index(owed, uint32_t, k);
		struct rdmacm_mux_msg m = handoff_state_owed(r->handoff, i)->frame;

		if (relay_respond(r, c, &m, RELAY_HANDOFF_OWED_ERR) == 0)
			answered++;
		handoff_state_owed_clear(r->handoff, i);
	}
	if (answered) {
		r->counters->handoff_owed_answered += answered;
		log_notice("client %u (pid %d): %u requests the previous process ended without "
			   "answering are answered %s now, to be sent again",
			   c->id, (int)c->conn.cred.pid, answered, strerror(-RELAY_HANDOFF_OWED_ERR));
		/* Now, not with the next MAD that wakes the loop: a QEMU waits
		 * for this answer and may send nothing else until it has it. */
		relay_flush_dirty(r);
	}
}

/*
 * Take the socket the store keeps as client @id's out of it, for a client
 * that is not served. When the store does not let it go, its copy would
 * keep the connection open and the client would wait on nobody: shut it
 * down through @fd (-1: no fd left to do it with).
 */
static void relay_handoff_unstore(uint32_t id, int fd)
{
	char name[32];
	int e = fd_store_remove(fd_store_client_name(id, name));

	if (e == 0)
		return;
	log_warning("%s: cannot take it out of the fd store (%s); %s", name, strerror(-e),
		    fd >= 0 ? "shutting the connection down" : "it stays open until the store lets go");
	if (fd >= 0)
		(void)shutdown(fd, SHUT_RDWR);
}

/* Client @slot's socket is back: serve it with its GIDs and capabilities.
 * Return: whether it is served (else it was refused, and its slot freed). */
static bool relay_handoff_restore_client(Relay *r, uint32_t i, int fd)
{
	HandoffClientSlot *slot = handoff_state_slot(r->handoff, i);
	uint32_t id = slot->id;
	/* A refusal closes @fd; this copy is what a refused client's socket is
	 * shut down with, should the store keep its own copy. */
	int spare = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	RelayClient *c;

	r->next_client_id = id;
	c = relay_client_create(r, fd);
	if (!c || c->id != id) {
		/* Refused (limits changed): it gets EOF, as it would now. */
		if (c)
			relay_drop_client(r, c, "could not keep its id across the restart");
		relay_handoff_unstore(id, spare);
		if (spare >= 0)
			close(spare);
		handoff_state_owed_clear_client(r->handoff, id);
		handoff_state_release(r->handoff, (int)i);
		return false;
	}
	if (spare >= 0)
		close(spare);
	c->handoff_slot = (int)i;
	if (slot->flags & HANDOFF_CLIENT_F_HELLO) {
		c->hello_done = true;
		c->caps = slot->caps & RDMACM_MUX_CAP_ALL;
	}
	c->c1_logged = slot->flags & HANDOFF_CLIENT_F_C1_LOGGED;
	for (uint32_t k = 0; k < slot->n_gids && c->n_gids < r->cfg.max_gids; k++) {
		RelayClientGid *cg;

		if (g_hash_table_contains(r->gid_owners, slot->gids[k]))
			continue; /* another client's now: the first one keeps it */
		c->gids = g_renew(RelayClientGid, c->gids, c->n_gids + 1);
		cg = &c->gids[c->n_gids++];
		memcpy(cg->gid, slot->gids[k], GID_LEN);
		cg->gid_index = -1;
		cg->table_generation = 0;
		g_hash_table_insert(r->gid_owners, g_memdup2(cg->gid, GID_LEN), c);
	}
	if (c->n_gids != slot->n_gids)
		relay_handoff_sync_gids(r, c);
	if (c->n_gids > 0)
		relay_client_registered(r, c);
	log_info("client %u is back on fd %d: pid %d, %u GIDs", c->id, fd, (int)c->conn.cred.pid,
		 c->n_gids);
	relay_handoff_answer_owed(r, c);
	return true;
}

/* ---- the crash-loop guard ---- */

/* MADs relayed so far, either way: the crash-loop guard's sign of
 * progress (relay-guard.h). */
static uint64_t relay_handoff_relayed(void *userdata)
{
	const Relay *r = userdata;
	uint64_t n = 0;

	for (unsigned i = 0; i < CM_IDX_COUNT; i++)
		n += r->counters->tx[i] + r->counters->rx[i];
	return n;
}

/* ---- the start ---- */

/* Close every client socket of @clients and take it out of the store:
 * their state could not be taken over. */
static void relay_handoff_disconnect_all(GHashTable *clients)
{
	GHashTableIter it;
	gpointer key, value;

	if (!clients || g_hash_table_size(clients) == 0)
		return;
	log_warning("disconnecting the %u clients of the previous process: their state could "
		    "not be taken over",
		    g_hash_table_size(clients));
	g_hash_table_iter_init(&it, clients);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		char name[32];
		int fd = GPOINTER_TO_INT(value);
		int e = fd_store_remove(fd_store_client_name(GPOINTER_TO_UINT(key), name));

		/* The store's copy would keep the connection open. */
		if (e < 0)
			(void)shutdown(fd, SHUT_RDWR);
		close(fd);
	}
	g_hash_table_remove_all(clients);
}

int relay_handoff_start(Relay *r, RelayHandoffFds *fds)
{
	HandoffShape shape = relay_handoff_shape(r);
	RelayHandoffDrops drops = { 0 };
	uint32_t cleared = 0, restored = 0, max_id = 0;
	RelayHandoffKind k = { { FD_STORE_STATE, FD_STORE_STATE_ALT }, -1, false };
	int *both[2] = { &fds->state, &fds->state_alt };
	bool converted = false, adopted = false, trip = false;
	const char *why = NULL;
	GHashTableIter it;
	gpointer key, value;
	int state_fd = relay_handoff_pick(both, HANDOFF_KIND_STATE, &k);
	int e;

	if (state_fd >= 0) {
		e = handoff_state_adopt(state_fd, &shape, relay_handoff_dropped, &drops, &r->handoff,
					&converted, &why);
		if (e == 0) {
			adopted = true;
			log_info("took over the state %s left (%s)", handoff_state_writer(r->handoff),
				 converted ? "converted into this version's format" : "in place");
			relay_handoff_store_keep(&k, handoff_state_fd(r->handoff), !converted);
		} else {
			log_warning("cannot take over the previous process's state: %s (%s); this "
				    "daemon reads version %u.x and 0.1.0's; starting clean",
				    why ? why : "?", strerror(-e), HANDOFF_MAJOR);
		}
		close(state_fd);
	}
	if (!adopted) {
		e = handoff_state_new(&shape, relay_handoff_new_pair_id(), &r->handoff);
		if (e < 0) {
			log_warning("cannot create the hand-off state: %s; a restart would lose "
				    "every client",
				    strerror(-e));
			relay_handoff_disconnect_all(fds->clients);
			return e;
		}
		relay_handoff_store_fresh(&k, handoff_state_fd(r->handoff));
		/* Sockets whose state is refused: starting clean means their
		 * clients see EOF and register anew, not that they are served
		 * as strangers. */
		relay_handoff_disconnect_all(fds->clients);
		/* Sessions without their clients mean nothing. */
		if (fds->sessions >= 0 || fds->sessions_alt >= 0) {
			relay_handoff_store_remove(FD_STORE_SESSIONS);
			relay_handoff_store_remove(FD_STORE_SESSIONS_ALT);
		}
		if (fds->sessions >= 0)
			close(fds->sessions);
		if (fds->sessions_alt >= 0)
			close(fds->sessions_alt);
		fds->sessions = fds->sessions_alt = -1;
		/* What was counted so far goes on in the state. */
		memcpy(handoff_state_counters(r->handoff), r->counters, sizeof(RelayCounters));
	}
	/* Taken over, counting goes on where the predecessor stopped. */
	r->counters = (RelayCounters *)(void *)handoff_state_counters(r->handoff);
	r->counters->handoff_items_dropped += drops.n;
	if (drops.n > RELAY_HANDOFF_DROP_LOG_MAX)
		log_notice("%u items of the previous process's state were not taken over",
			   drops.n);
	if (adopted)
		r->guard = relay_guard_new(r->event, r->handoff, relay_handoff_relayed, r, &trip);
	if (trip)
		r->counters->handoff_guard_trips++;

	for (uint32_t i = 0; i < handoff_state_slot_count(r->handoff); i++) {
		HandoffClientSlot *slot = handoff_state_slot(r->handoff, i);
		gpointer fd;

		if (!slot->id)
			continue;
		if (!fds->clients ||
		    !g_hash_table_lookup_extended(fds->clients, GUINT_TO_POINTER(slot->id), NULL,
						  &fd)) {
			/* Gone (its socket was closed before the crash). */
			handoff_state_owed_clear_client(r->handoff, slot->id);
			handoff_state_release(r->handoff, (int)i);
			cleared++;
			continue;
		}
		g_hash_table_remove(fds->clients, GUINT_TO_POINTER(slot->id));
		max_id = MAX(max_id, slot->id);
		if (relay_handoff_restore_client(r, i, GPOINTER_TO_INT(fd)))
			restored++;
	}
	r->next_client_id = max_id + 1;
	/* Sockets without a slot: stored, but their client was not written
	 * down yet. They are new clients now. */
	if (fds->clients) {
		g_hash_table_iter_init(&it, fds->clients);
		while (g_hash_table_iter_next(&it, &key, &value)) {
			char name[32];
			int fd = GPOINTER_TO_INT(value);
			int gone = fd_store_remove(fd_store_client_name(GPOINTER_TO_UINT(key), name));

			/* Still stored under its old name, it would stay open
			 * through the store's copy after this process let it
			 * go (systemd keeps a file under its first name only). */
			if (gone < 0) {
				log_warning("%s: cannot take it out of the fd store (%s); shutting "
					    "the connection down",
					    name, strerror(-gone));
				(void)shutdown(fd, SHUT_RDWR);
				close(fd);
				continue;
			}
			(void)relay_add_client(r, fd);
		}
		g_hash_table_remove_all(fds->clients);
	}
	relay_handoff_sessions(r, fds, trip);
	if (restored || cleared)
		log_info("took over %u clients from the previous process (%u slots cleared)",
			 restored, cleared);
	return 0;
}

/* ---- planned hand-off ---- */

/*
 * Requests this process took from @c's socket and did not handle (its
 * reading was paused behind slow sends or a full queue, or its turn to be
 * served again had not come): the successor reads the socket, not this
 * buffer. Each is answered -EAGAIN, so that the client sends it again, to
 * the successor, at once rather than after its own timeout.
 */
static void relay_handoff_refuse_buffered(Relay *r, RelayClient *c)
{
	const struct rdmacm_mux_msg *peeked;
	unsigned n = client_peek_frames(&c->conn, &peeked), refused = 0;
	struct rdmacm_mux_msg *m;

	/* Only what is buffered: client_next_frame() reads no more while a
	 * whole frame is. */
	while (refused < n && client_next_frame(&c->conn, &m) == 1) {
		relay_handoff_buffered_taken(r, c);
		if (relay_respond(r, c, m, -EAGAIN) < 0)
			break;
		refused++;
	}
	if (refused > 0)
		log_notice("client %u (pid %d): %u requests it sent were not handled before the "
			   "restart; they are answered EAGAIN, to be sent again",
			   c->id, (int)c->conn.cred.pid, refused);
}

void relay_handoff_prepare(Relay *r, unsigned timeout_ms)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;
	GHashTableIter it;
	gpointer value;
	GPtrArray *cut = g_ptr_array_new();

	/* Planned: whatever the successor does with the state, this start
	 * did not crash on it. */
	relay_guard_settle(r->guard, "a planned hand-off");

	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value))
		relay_handoff_refuse_buffered(r, value);

	/* What is queued goes out now, within the time we have: the
	 * successor knows nothing of this process's queues. */
	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		RelayClient *c = value;

		while (c->conn.fd >= 0 && client_has_output(&c->conn)) {
			uint64_t now = now_usec();
			struct pollfd p = { .fd = c->conn.fd, .events = POLLOUT };
			int e = client_flush(&c->conn);

			if (e < 0 && e != -EAGAIN)
				break;
			if (!client_has_output(&c->conn) || now >= deadline)
				break;
			(void)poll(&p, 1, (int)MIN((deadline - now + 999) / 1000, 100u));
		}
		/* Half a frame written: a successor would write the next frame
		 * into the middle of it. The client is better off seeing EOF. */
		if (c->conn.out_off > 0)
			g_ptr_array_add(cut, c);
	}
	for (guint i = 0; i < cut->len; i++) {
		RelayClient *c = cut->pdata[i];

		log_warning("client %u (pid %d) did not take a whole frame before the restart: "
			    "it is disconnected rather than left out of step",
			    c->id, (int)c->conn.cred.pid);
		relay_drop_client(r, c, "half a frame written at the hand-off");
	}
	g_ptr_array_free(cut, TRUE);
}

/* ---- re-execution ---- */

void relay_handoff_export(Relay *r, RelayHandoffFdFn fn, void *userdata)
{
	GHashTableIter it;
	gpointer value;
	char name[32];

	if (!r->handoff) {
		/* Nothing kept so far (no fd store): write it all down now. */
		int fd = memfd_create("rdmacm-mux-sessions", MFD_CLOEXEC);

		HandoffShape shape = relay_handoff_shape(r);
		SessionFileOwner owner = { r->port->dev, r->port->port, relay_handoff_new_pair_id() };

		if (handoff_state_new(&shape, owner.pair_id, &r->handoff) < 0 || fd < 0 ||
		    session_table_save(r->sessions, fd, &owner) < 0) {
			log_warning("cannot write the state down for the new process: it starts "
				    "without the clients' GIDs and sessions");
			if (fd >= 0)
				close(fd);
		} else {
			r->sessions_fd = fd;
			memcpy(handoff_state_counters(r->handoff), r->counters,
			       sizeof(RelayCounters));
			g_hash_table_iter_init(&it, r->clients);
			while (g_hash_table_iter_next(&it, NULL, &value)) {
				RelayClient *c = value;

				if (c->conn.fd < 0)
					continue;
				c->handoff_slot = handoff_state_claim(r->handoff, c->id);
				if (c->hello_done)
					relay_handoff_client_hello(r, c);
				if (c->c1_logged)
					relay_handoff_client_c1_logged(r, c);
				relay_handoff_sync_gids(r, c);
			}
		}
	}
	if (r->handoff && r->sessions_fd >= 0) {
		fn(userdata, FD_STORE_STATE, handoff_state_fd(r->handoff));
		fn(userdata, FD_STORE_SESSIONS, r->sessions_fd);
	}
	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		RelayClient *c = value;

		if (c->conn.fd >= 0 && c->handoff_slot >= 0)
			fn(userdata, fd_store_client_name(c->id, name), c->conn.fd);
	}
}
