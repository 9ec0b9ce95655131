/* SPDX-License-Identifier: MIT */
/*
 * Owns what makes the relay survive its own process: the clients' state
 * and the session table in memfds, every client socket in the service
 * manager's fd store, taking all of it over at start, and the planned
 * hand-off at SIGTERM. A crash then costs at most the MADs in flight, and
 * a planned restart or upgrade answers every request it took in (those
 * it did not handle with EAGAIN); no client sees its socket close.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fd-store.h"
#include "log.h"
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
		handoff_state_add_flags(r->handoff, c->handoff_slot, HANDOFF_F_C1_LOGGED);
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

	if (!r->handoff || c->handoff_slot < 0)
		return;
	/* The socket first: a crash in between leaves a slot without a
	 * socket, never a socket that a successor would serve as this client. */
	fd_store_remove(fd_store_client_name(c->id, name));
	handoff_state_release(r->handoff, c->handoff_slot);
	c->handoff_slot = -1;
}

/* ---- taking over ---- */

/* The sessions a predecessor left, or a fresh table in a new memfd. */
static void relay_handoff_sessions(Relay *r, int sessions_fd)
{
	SessionTable *t = NULL;
	uint32_t dropped = 0;
	int e;

	if (sessions_fd >= 0) {
		e = session_table_adopt(r->cfg.timeouts_ms, sessions_fd, relay_now(r),
					relay_session_owner, r, &dropped, &t);
		if (e == 0) {
			log_info("took over %u sessions (%u dropped: their client is gone or they "
				 "did not hold up)",
				 session_table_count(t), dropped);
			r->sessions_fd = sessions_fd;
		} else {
			log_warning("cannot take over the sessions: %s; starting with none",
				    e == -EINVAL ? "not a session table of this version" : strerror(-e));
			close(sessions_fd);
			fd_store_remove(FD_STORE_SESSIONS);
			t = NULL;
		}
	}
	if (!t) {
		int fd = memfd_create("rdmacm-mux-sessions", MFD_CLOEXEC);

		if (fd < 0 || session_table_new_in(r->cfg.timeouts_ms, fd, &t) < 0) {
			log_warning("cannot keep the sessions in a memfd: a restart would lose them");
			if (fd >= 0)
				close(fd);
			return;
		}
		r->sessions_fd = fd;
		(void)fd_store_put(FD_STORE_SESSIONS, fd);
	}
	session_table_set_remove_hook(r->sessions, NULL, NULL);
	session_table_free(r->sessions);
	r->sessions = t;
	session_table_set_remove_hook(r->sessions, relay_session_removed, r);
	relay_recount_half_open_peers(r);
	relay_schedule_timer(r);
}

/* Client @slot's socket is back: serve it with its GIDs and capabilities. */
static void relay_handoff_restore_client(Relay *r, uint32_t i, int fd)
{
	HandoffSlot *slot = handoff_state_slot(r->handoff, i);
	uint32_t id = slot->id;
	char name[32];
	RelayClient *c;

	r->next_client_id = id;
	c = relay_client_create(r, fd);
	if (!c || c->id != id) {
		/* Refused (limits changed): it gets EOF, as it would now. */
		if (c)
			relay_drop_client(r, c, "could not keep its id across the restart");
		fd_store_remove(fd_store_client_name(id, name));
		handoff_state_release(r->handoff, (int)i);
		return;
	}
	c->handoff_slot = (int)i;
	if (slot->flags & HANDOFF_F_HELLO) {
		c->hello_done = true;
		c->caps = slot->caps & RDMACM_MUX_CAP_ALL;
	}
	c->c1_logged = slot->flags & HANDOFF_F_C1_LOGGED;
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
}

int relay_handoff_start(Relay *r, int state_fd, int sessions_fd, GHashTable *client_fds)
{
	uint32_t cleared = 0, restored = 0, max_id = 0;
	GHashTableIter it;
	gpointer key, value;
	int e = -ENOENT;

	if (state_fd >= 0) {
		e = handoff_state_adopt(state_fd, r->port->dev, r->port->port, r->cfg.max_gids,
					sizeof(RelayCounters), &cleared, &r->handoff);
		if (e < 0) {
			close(state_fd);
			fd_store_remove(FD_STORE_STATE);
		}
	}
	if (e < 0) {
		e = handoff_state_new(r->port->dev, r->port->port, r->cfg.max_clients,
				      r->cfg.max_gids, sizeof(RelayCounters), &r->handoff);
		if (e < 0) {
			log_warning("cannot create the hand-off state: %s; a restart would lose "
				    "every client",
				    strerror(-e));
			return e;
		}
		(void)fd_store_put(FD_STORE_STATE, handoff_state_fd(r->handoff));
		/* Sockets whose state is refused: starting clean means their
		 * clients see EOF and register anew, not that they are served
		 * as strangers. */
		if (client_fds && g_hash_table_size(client_fds) > 0) {
			log_warning("disconnecting the %u clients of the previous process: their "
				    "state could not be taken over",
				    g_hash_table_size(client_fds));
			g_hash_table_iter_init(&it, client_fds);
			while (g_hash_table_iter_next(&it, &key, &value)) {
				char name[32];

				fd_store_remove(fd_store_client_name(GPOINTER_TO_UINT(key), name));
				close(GPOINTER_TO_INT(value));
			}
			g_hash_table_remove_all(client_fds);
		}
		/* Sessions without their clients mean nothing. */
		if (sessions_fd >= 0) {
			close(sessions_fd);
			fd_store_remove(FD_STORE_SESSIONS);
			sessions_fd = -1;
		}
		/* What was counted so far goes on in the state. */
		memcpy(handoff_state_counters(r->handoff), r->counters, sizeof(RelayCounters));
	}
	/* Taken over, counting goes on where the predecessor stopped. */
	r->counters = handoff_state_counters(r->handoff);

	for (uint32_t i = 0; i < handoff_state_slot_count(r->handoff); i++) {
		HandoffSlot *slot = handoff_state_slot(r->handoff, i);
		gpointer fd;

		if (!slot->id)
			continue;
		if (!client_fds || !g_hash_table_lookup_extended(client_fds,
								 GUINT_TO_POINTER(slot->id), NULL,
								 &fd)) {
			handoff_state_release(r->handoff, (int)i);
			cleared++;
			continue;
		}
		g_hash_table_remove(client_fds, GUINT_TO_POINTER(slot->id));
		max_id = MAX(max_id, slot->id);
		relay_handoff_restore_client(r, i, GPOINTER_TO_INT(fd));
		restored++;
	}
	r->next_client_id = max_id + 1;
	/* Sockets without a slot: stored, but their client was not written
	 * down yet. They are new clients now. */
	if (client_fds) {
		g_hash_table_iter_init(&it, client_fds);
		while (g_hash_table_iter_next(&it, &key, &value)) {
			char name[32];

			fd_store_remove(fd_store_client_name(GPOINTER_TO_UINT(key), name));
			(void)relay_add_client(r, GPOINTER_TO_INT(value));
		}
		g_hash_table_remove_all(client_fds);
	}
	relay_handoff_sessions(r, sessions_fd);
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
	while (refused < n && client_next_frame(&c->conn, &m) == 1 &&
	       relay_respond(r, c, m, -EAGAIN) == 0)
		refused++;
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

		if (handoff_state_new(r->port->dev, r->port->port, r->cfg.max_clients,
				      r->cfg.max_gids, sizeof(RelayCounters), &r->handoff) < 0 ||
		    fd < 0 || session_table_save(r->sessions, fd) < 0) {
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
