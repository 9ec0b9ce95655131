/* SPDX-License-Identifier: MIT */
/*
 * Owns the relay's core: its life cycle, the client table and the epoll
 * set of client sockets, reading and dispatching client requests (REG,
 * UNREG, MAD, HELLO, CLIENT_STATS), the responses and GID ownership.
 * The MADs themselves go through relay-tx.c (client -> wire) and
 * relay-rx.c (wire -> client); their sessions' life through
 * relay-sessions.c.
 */
#include <glib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "log.h"
#include "relay-internal.h"
#include "util.h"

/* ---- clients ---- */

void relay_next_gid_epoch(Relay *r)
{
	uint64_t step = relay_now(r) / RELAY_GID_EPOCH_USEC;

	/* Never backwards, and never the epoch 0 that fresh entries carry. */
	r->gid_epoch = MAX(r->gid_epoch, step + 1);
}

void relay_mark_dirty(Relay *r, RelayClient *c)
{
	if (c->dirty)
		return;
	c->dirty = true;
	g_ptr_array_add(r->dirty, c);
}

RelayClient *relay_client_lookup_table(Relay *r, uint32_t id)
{
	RelayClient *c = g_hash_table_lookup(r->clients, GUINT_TO_POINTER(id));

	if (c)
		r->client_cache[id & (RELAY_CLIENT_CACHE_SLOTS - 1)] = c;
	return c;
}

RelayClientGid *relay_client_find_gid(RelayClient *c, const uint8_t gid[GID_LEN])
{
	for (uint32_t i = 0; i < c->n_gids; i++)
		if (gid_equal(c->gids[i].gid, gid))
			return &c->gids[i];
	return NULL;
}

static void relay_client_free(gpointer p)
{
	RelayClient *c = p;

	client_deinit(&c->conn);
	g_free(c->gids);
	g_free(c);
}

static void relay_uid_count_add(Relay *r, uid_t uid, int delta)
{
	guint n = GPOINTER_TO_UINT(g_hash_table_lookup(r->clients_per_uid, GUINT_TO_POINTER(uid)));

	n += (guint)delta;
	if (n == 0)
		g_hash_table_remove(r->clients_per_uid, GUINT_TO_POINTER(uid));
	else
		g_hash_table_insert(r->clients_per_uid, GUINT_TO_POINTER(uid), GUINT_TO_POINTER(n));
}

/*
 * @c's socket leaves the relay's epoll set, explicitly: closing our fd
 * removes it only when no other fd shares the socket, and the fd store
 * (PID 1's copy until it takes FDSTOREREMOVE, or for good if that fails)
 * holds one. A hung-up socket left there would keep the set readable, and
 * the loop busy, with events for a client that is gone.
 */
static void relay_unwatch_client(Relay *r, RelayClient *c)
{
	GHashTableIter it;
	gpointer value;

	if (epoll_ctl(r->client_ep, EPOLL_CTL_DEL, c->conn.fd, NULL) < 0)
		log_ratelimited(LOG_WARNING, NULL, "cannot stop watching client %u: %s", c->id,
				strerror(errno));
	r->n_watched--;
	r->watched_one = 0;
	if (r->n_watched != 1)
		return;
	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		RelayClient *o = value;

		if (o != c && o->conn.fd >= 0)
			r->watched_one = o->id;
	}
}

/* @c registered its first GID, or goes: it leaves the unregistered list. */
void relay_client_registered(Relay *r, RelayClient *c)
{
	if (!c->unregistered)
		return;
	g_queue_delete_link(&r->unregistered, c->unregistered);
	c->unregistered = NULL;
}

void relay_drop_client(Relay *r, RelayClient *c, const char *why)
{
	char pid[32];
	const char *fields[] = { pid, NULL };

	snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->conn.cred.pid);
	log_structured(LOG_INFO, fields, "client %u (pid %d, %s) gone: %s; %u GIDs and %u sessions removed",
		       c->id, (int)c->conn.cred.pid, c->conn.comm, why, c->n_gids,
		       c->sessions.count);
	relay_handoff_client_gone(r, c);
	relay_vm_detach(r, c);
	for (uint32_t i = 0; i < c->n_gids; i++)
		g_hash_table_remove(r->gid_owners, c->gids[i].gid);
	session_table_remove_all(r->sessions, &c->sessions);
	if (c->dirty)
		g_ptr_array_remove_fast(r->dirty, c);
	relay_client_registered(r, c);
	if (c->conn.fd >= 0) {
		relay_unwatch_client(r, c);
		relay_uid_count_add(r, c->conn.cred.uid, -1);
	}
	if (r->client_cache[c->id & (RELAY_CLIENT_CACHE_SLOTS - 1)] == c)
		r->client_cache[c->id & (RELAY_CLIENT_CACHE_SLOTS - 1)] = NULL;
	/* Removing from the table frees the client (and closes its fd). */
	g_hash_table_remove(r->clients, GUINT_TO_POINTER(c->id));
	relay_schedule_timer(r);
}

/* EPOLLIN unless paused, EPOLLOUT while frames wait; a syscall only when
 * that changes. */
static void relay_update_events(Relay *r, RelayClient *c)
{
	struct epoll_event ev = { .data.u64 = c->id };
	int fd = c->conn.fd;

	if (fd < 0 || (size_t)fd >= r->n_fd_events)
		return;
	if (!c->reading_paused)
		ev.events |= EPOLLIN;
	/* Part of a frame waits in the socket: wake when more comes. */
	if (c->conn.input_partial)
		ev.events |= EPOLLET;
	if (client_has_output(&c->conn))
		ev.events |= EPOLLOUT;
	if (ev.events == r->fd_events[fd])
		return;
	if (epoll_ctl(r->client_ep, EPOLL_CTL_MOD, fd, &ev) == 0)
		r->fd_events[fd] = ev.events;
	else
		log_ratelimited(LOG_WARNING, NULL, "cannot update the events of client %u: %s",
				c->id, strerror(errno));
}

/* Write what is queued; returns false when the client had to go. */
static bool relay_flush_client(Relay *r, RelayClient *c)
{
	/* A client without a socket: its output waits to be taken. */
	int e = c->conn.fd >= 0 ? client_flush(&c->conn) : 0;

	if (e < 0 && e != -EAGAIN) {
		r->counters->clients_dropped++;
		relay_drop_client(r, c, e == -EPIPE || e == -ECONNRESET ? "disconnected" : "write error");
		return false;
	}
	if (c->reading_paused && relay_client_may_read(r, c)) {
		const struct rdmacm_mux_msg *buffered;

		c->reading_paused = false;
		if (client_peek_frames(&c->conn, &buffered) > 0 && r->resume_src) {
			g_array_append_val(r->resumed, c->id);
			(void)sd_event_source_set_enabled(r->resume_src, SD_EVENT_ONESHOT);
		}
	}
	relay_update_events(r, c);
	return true;
}

bool relay_client_may_read(const Relay *r, const RelayClient *c)
{
	return !client_responses_full(&c->conn) && c->slow_sends < r->cfg.max_slow_sends;
}

void relay_flush_dirty(Relay *r)
{
	while (r->dirty->len > 0) {
		RelayClient *c = g_ptr_array_steal_index_fast(r->dirty, r->dirty->len - 1);
		c->dirty = false;
		(void)relay_flush_client(r, c);
	}
}

static uint32_t relay_new_client_id(Relay *r)
{
	uint32_t id;

	do
		id = r->next_client_id++;
	while (id == 0 || g_hash_table_contains(r->clients, GUINT_TO_POINTER(id)));
	return id;
}

/* Room in the fd -> registered-events map for @fd. */
static void relay_reserve_fd_events(Relay *r, int fd)
{
	size_t n;

	if ((size_t)fd < r->n_fd_events)
		return;
	n = (size_t)fd + 1 > 2 * r->n_fd_events ? (size_t)fd + 1 : 2 * r->n_fd_events;
	r->fd_events = g_renew(uint32_t, r->fd_events, n);
	memset(r->fd_events + r->n_fd_events, 0, (n - r->n_fd_events) * sizeof(uint32_t));
	r->n_fd_events = n;
}

RelayClient *relay_client_create(Relay *r, int fd)
{
	RelayClient *c;

	if (g_hash_table_size(r->clients) >= r->cfg.max_clients) {
		r->counters->clients_refused++;
		log_ratelimited(LOG_WARNING, NULL,
				"refusing a connection: %u clients is the limit (--max-clients)",
				r->cfg.max_clients);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	c = g_new0(RelayClient, 1);
	c->handoff_slot = -1;
	c->id = relay_new_client_id(r);
	client_init(&c->conn, fd, r->cfg.max_queued, r->cfg.max_pending);
	if (fd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = c->id };
		uid_t uid = c->conn.cred.uid;

		/* One user cannot take every slot: the VMs of others must fit. */
		if (GPOINTER_TO_UINT(g_hash_table_lookup(r->clients_per_uid, GUINT_TO_POINTER(uid))) >=
		    r->cfg.max_clients_per_uid) {
			r->counters->clients_refused++;
			log_ratelimited(LOG_WARNING, NULL,
					"refusing a connection of uid %d (pid %d): it has %u, the "
					"limit per user (--max-clients-per-uid)",
					(int)uid, (int)c->conn.cred.pid, r->cfg.max_clients_per_uid);
			relay_client_free(c);
			return NULL;
		}

		/* Its VM, from the socket it came in on. */
		if (relay_vm_attach(r, c) < 0) {
			r->counters->clients_refused++;
			relay_client_free(c);
			return NULL;
		}
		if (epoll_ctl(r->client_ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			log_warning("refusing client on fd %d (pid %d): cannot watch its socket: %s",
				    fd, (int)c->conn.cred.pid, strerror(errno));
			r->counters->clients_refused++;
			relay_vm_detach(r, c);
			relay_client_free(c);
			return NULL;
		}
		/* relay_drop_client() takes it out of the set */
		relay_reserve_fd_events(r, fd);
		r->fd_events[fd] = EPOLLIN;
		r->watched_one = ++r->n_watched == 1 ? c->id : 0;
		relay_uid_count_add(r, uid, +1);
		if (r->register_timer) {
			g_queue_push_tail(&r->unregistered, c);
			c->unregistered = g_queue_peek_tail_link(&r->unregistered);
			if (r->unregistered.length == 1)
				relay_arm_register_timer(r);
		}
	} else {
		(void)relay_vm_attach(r, c); /* no socket, no VM */
	}
	g_hash_table_insert(r->clients, GUINT_TO_POINTER(c->id), c);
	r->counters->clients_accepted++;
	return c;
}

int relay_add_client(Relay *r, int fd)
{
	RelayClient *c = relay_client_create(r, fd);

	if (!c)
		return -EUSERS;
	relay_handoff_client_added(r, c);
	log_info("client %u connected on fd %d: pid %d uid %d (%s)%s%s", c->id, fd,
		 (int)c->conn.cred.pid, (int)c->conn.cred.uid, c->conn.comm,
		 c->vm ? ", VM " : "", c->vm ? c->vm->spec.name : "");
	return 0;
}

/* ---- connections that never register ---- */

/* Arm the timer for the oldest unregistered connection, or stop it. */
void relay_arm_register_timer(Relay *r)
{
	RelayClient *c = g_queue_peek_head(&r->unregistered);

	if (!c) {
		(void)sd_event_source_set_enabled(r->register_timer, SD_EVENT_OFF);
		return;
	}
	(void)sd_event_source_set_time(r->register_timer,
				       c->conn.connected_usec +
					       (uint64_t)r->cfg.register_timeout_ms * 1000);
	(void)sd_event_source_set_enabled(r->register_timer, SD_EVENT_ONESHOT);
}

/* QEMU registers its guest's GIDs as the guest adds them; a connection
 * that never registers one is not a VM, and must not hold a slot. */
static int relay_on_register_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	Relay *r = userdata;
	RelayClient *c;

	(void)s;
	while ((c = g_queue_peek_head(&r->unregistered)) &&
	       c->conn.connected_usec + (uint64_t)r->cfg.register_timeout_ms * 1000 <= usec) {
		r->counters->clients_dropped++;
		relay_drop_client(r, c, "registered no GID in time (--register-timeout)");
	}
	relay_arm_register_timer(r);
	return 0;
}

/* ---- responses ---- */

/*
 * QEMU's protocol has four positive codes and passes send failures as a
 * negative errno. Clients granted RDMACM_MUX_CAP_ERRNO get -errno always.
 */
static int32_t relay_err_code_for(uint64_t caps, int err)
{
	if (err == 0 || (caps & RDMACM_MUX_CAP_ERRNO))
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

void relay_response_frame(uint64_t caps, struct rdmacm_mux_msg *req, int err)
{
	req->hdr.msg_type = RDMACM_MUX_MSG_TYPE_RESP;
	req->hdr.err_code = relay_err_code_for(caps, err);
}

int relay_respond(Relay *r, RelayClient *c, struct rdmacm_mux_msg *req, int err)
{
	relay_response_frame(c->caps, req, err);
	if (client_queue_response(&c->conn, req) < 0) {
		/* Out of memory: this client cannot be served correctly. */
		log_error("out of memory queueing a response to client %u", c->id);
		return -ENOMEM;
	}
	c->stats.requests++;
	if (!relay_client_may_read(r, c))
		c->reading_paused = true;
	relay_mark_dirty(r, c);
	return 0;
}

/* ---- REG / UNREG ---- */

static int relay_register_gid(Relay *r, RelayClient *c, const uint8_t gid[GID_LEN])
{
	RelayClient *owner = g_hash_table_lookup(r->gid_owners, gid);
	char text[GID_STR_LEN] = "", pid[32] = "", gidf[64] = "";
	const char *fields[] = { pid, gidf, NULL };
	RelayClientGid *cg;
	int index, e;

	/* Written only when a line below can be (as UNREG does): a REG
	 * that logs nothing formats nothing. */
	if (log_get_max_level() >= LOG_WARNING) {
		snprintf(pid, sizeof(pid), "CLIENT_PID=%d", (int)c->conn.cred.pid);
		snprintf(gidf, sizeof(gidf), "GID=%s", gid_to_string(gid, text));
	}

	if (gid_is_zero(gid))
		return -EINVAL;
	/* The operator's assignment first: a GID of another VM is refused
	 * whether or not anybody holds it now. */
	e = relay_vm_check_reg(r, c, gid);
	if (e < 0)
		return e;
	if (owner == c)
		return -EEXIST;
	if (owner) {
		log_structured(LOG_WARNING, fields,
			       "client %u (pid %d) asked for GID %s, which client %u (pid %d) owns",
			       c->id, (int)c->conn.cred.pid, text, owner->id,
			       (int)owner->conn.cred.pid);
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
	relay_client_registered(r, c);
	c->gids = g_renew(RelayClientGid, c->gids, c->n_gids + 1);
	cg = &c->gids[c->n_gids++];
	memcpy(cg->gid, gid, GID_LEN);
	cg->gid_index = -1;
	cg->table_generation = 0;
	g_hash_table_insert(r->gid_owners, g_memdup2(gid, GID_LEN), c);
	relay_handoff_client_gids(r, c);
	log_structured(LOG_INFO, fields, "client %u (pid %d) registered GID %s", c->id,
		       (int)c->conn.cred.pid, text);
	return 0;
}

static int relay_unregister_gid(Relay *r, RelayClient *c, const uint8_t gid[GID_LEN])
{
	RelayClient *owner = g_hash_table_lookup(r->gid_owners, gid);
	RelayClientGid *cg;

	if (!owner)
		return -ENOENT;
	if (owner != c)
		return -EACCES;
	cg = relay_client_find_gid(c, gid);
	g_hash_table_remove(r->gid_owners, gid);
	if (log_get_max_level() >= LOG_INFO) {
		char text[GID_STR_LEN];
		log_info("client %u (pid %d) unregistered GID %s", c->id, (int)c->conn.cred.pid,
			 gid_to_string(gid, text));
	}
	if (cg) {
		*cg = c->gids[c->n_gids - 1];
		c->n_gids--;
		relay_handoff_client_gids(r, c);
	}
	return 0;
}

/* ---- extension ops ---- */

static int relay_hello(Relay *r, RelayClient *c, struct rdmacm_mux_msg *m)
{
	struct rdmacm_mux_hello h;

	if (m->umad_len < (int32_t)sizeof(h))
		return -EINVAL;
	memcpy(&h, m->umad.mad, sizeof(h));
	if (h.magic != RDMACM_MUX_HELLO_MAGIC)
		return -EINVAL;
	c->caps = h.capabilities & RDMACM_MUX_CAP_ALL;
	c->hello_done = true;
	relay_handoff_client_hello(r, c);
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

static void relay_client_stats(RelayClient *c, struct rdmacm_mux_msg *m)
{
	c->stats.gids = c->n_gids;
	c->stats.sessions = c->sessions.count;
	c->stats.queued = client_queued(&c->conn);
	memset(m->umad.mad, 0, sizeof(m->umad.mad));
	memcpy(m->umad.mad, &c->stats, sizeof(c->stats));
	m->umad_len = sizeof(c->stats);
}

/* ---- requests ---- */

bool relay_handle_request(Relay *r, RelayClient *c, struct rdmacm_mux_msg *m, uint32_t tx_hint)
{
	bool bad = false;
	int err;

	r->counters->requests++;
	if (m->hdr.msg_type != RDMACM_MUX_MSG_TYPE_REQ) {
		err = -EBADMSG;
		bad = true;
	} else {
		switch (m->hdr.op_code) {
		case RDMACM_MUX_OP_CODE_REG:
			err = relay_register_gid(r, c, m->hdr.sgid.raw);
			if (err == 0)
				r->counters->reg_ok++;
			else
				r->counters->reg_refused++;
			break;
		case RDMACM_MUX_OP_CODE_UNREG:
			err = relay_unregister_gid(r, c, m->hdr.sgid.raw);
			if (err == 0)
				r->counters->unreg_ok++;
			else
				r->counters->unreg_refused++;
			break;
		case RDMACM_MUX_OP_CODE_MAD:
			err = relay_tx_mad(r, c, m, tx_hint);
			if (err == RELAY_TX_PENDING) {
				/* answered when its sender process is done */
				c->bad_frames = 0;
				return true;
			}
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
		r->counters->bad_frames++;
		c->bad_frames++;
		log_ratelimited(LOG_NOTICE, NULL,
				"client %u (pid %d) sent a bad frame (msg_type %u, op_code %u)",
				c->id, (int)c->conn.cred.pid, m->hdr.msg_type, m->hdr.op_code);
	} else {
		c->bad_frames = 0;
	}
	(void)relay_respond(r, c, m, err); /* logged */
	if (c->bad_frames >= r->cfg.max_bad_frames) {
		/* Let the error responses reach it, then hang up. */
		if (c->conn.fd >= 0)
			(void)client_flush(&c->conn);
		r->counters->clients_dropped++;
		relay_drop_client(r, c, "too many bad frames");
		return false;
	}
	return true;
}

/* Serve one ready client: write what waits, then read and answer a batch. */
static void relay_client_io(Relay *r, RelayClient *c, uint32_t revents);

void relay_serve_client(Relay *r, RelayClient *c)
{
	relay_client_io(r, c, EPOLLIN);
}

static void relay_client_io(Relay *r, RelayClient *c, uint32_t revents)
{
	/* In the client's input buffer: valid until its next read, which
	 * comes after this frame is handled (or the client's end, after
	 * which relay_handle_request() returns false). */
	struct rdmacm_mux_msg *m;

	if ((revents & EPOLLOUT) && !relay_flush_client(r, c))
		return;
	if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	for (int n = 0; n < RELAY_CLIENT_BATCH && !c->reading_paused; n++) {
		/* The hints cover the frames buffered when they were made; a
		 * frame that needs a refill has none. */
		uint32_t hint = c->next_tx_hint < c->n_tx_hints ? c->tx_hints[c->next_tx_hint++] : 0;
		int e = client_next_frame(&c->conn, &m);

		if (e == 0) {
			/* A client with output queued is flushed at the end of
			 * this dispatch, which updates its events once, after
			 * the write: doing it here too would add EPOLLOUT and
			 * take it away again, two syscalls per batch. */
			if (!c->dirty)
				relay_update_events(r, c);
			break;
		}
		if (e < 0) {
			bool cut = client_has_partial_input(&c->conn);

			if (cut)
				r->counters->truncated_frames++;
			relay_drop_client(r, c, cut ? "disconnected in the middle of a frame"
						    : e == -EPIPE ? "disconnected"
								  : "read error");
			return;
		}
		/* Its owed record, if a pause wrote one down, goes: it is
		 * answered from here on as any request is. */
		if (c->n_owed_buffered)
			relay_handoff_buffered_taken(r, c);
		/* A refill within the batch: warm the lookups of the frames
		 * after this one when the table is big. */
		if (client_take_refill(&c->conn)) {
			c->n_tx_hints = 0;
			if (session_table_count(r->sessions) >= RELAY_WARM_SESSIONS)
				relay_tx_warm_client(r, c);
		}
		if (!relay_handle_request(r, c, m, hint))
			return;
	}
	/* Paused with requests read and not handled: they left the socket
	 * and have no answer queued, so a crash now must not lose them. */
	if (c->reading_paused)
		relay_handoff_owe_buffered(r, c);
}

/* Serve the clients that may read again and have frames buffered. */
static int relay_on_resume(sd_event_source *s, void *userdata)
{
	(void)s;
	relay_serve_resumed(userdata);
	return 0;
}

void relay_serve_resumed(Relay *r)
{
	g_autoptr(GArray) ids = r->resumed;

	r->resumed = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	r->dispatch_now = relay_now(r);
	relay_next_gid_epoch(r);
	for (guint i = 0; i < ids->len; i++) {
		RelayClient *c = relay_client_lookup(r, g_array_index(ids, uint32_t, i));

		if (!c || c->reading_paused)
			continue;
		relay_client_io(r, c, EPOLLIN);
		relay_flush_dirty(r);
	}
	relay_schedule_timer(r);
	r->dispatch_now = 0;
}

/*
 * With one client socket in the set, watched level-triggered for input,
 * the set is ready because that socket is: its events are those it is
 * watched for (an EOF or error shows in the read). The common case of one
 * VM on a host then costs one epoll_wait per wake-up, not two. An
 * edge-triggered socket (part of a frame waiting) needs its edge taken by
 * epoll_wait, or the set would stay ready.
 */
static int relay_ready_clients(Relay *r, struct epoll_event *evs)
{
	if (r->n_watched == 1) {
		RelayClient *c = relay_client_lookup(r, r->watched_one);
		int fd = c ? c->conn.fd : -1;

		if (fd >= 0 && (size_t)fd < r->n_fd_events &&
		    (r->fd_events[fd] & (EPOLLIN | EPOLLET)) == EPOLLIN) {
			evs[0].events = r->fd_events[fd];
			evs[0].data.u64 = c->id;
			return 1;
		}
	}
	return epoll_wait(r->client_ep, evs, RELAY_CLIENT_EVENTS, 0);
}

static int relay_on_clients_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	Relay *r = userdata;
	struct epoll_event evs[RELAY_CLIENT_EVENTS];
	int n;

	(void)s;
	(void)fd;
	(void)revents;
	n = relay_ready_clients(r, evs);
	r->dispatch_now = relay_now(r);
	relay_next_gid_epoch(r);
	if (session_table_count(r->sessions) >= RELAY_WARM_SESSIONS)
		relay_tx_warm_ready(r, evs, n);
	for (int i = 0; i < n; i++) {
		/* by id: serving one client may drop another (a failed flush) */
		RelayClient *c = relay_client_lookup(r, (uint32_t)evs[i].data.u64);

		if (!c)
			continue;
		relay_client_io(r, c, evs[i].events);
		relay_flush_dirty(r);
		relay_schedule_timer(r);
	}
	r->dispatch_now = 0;
	return 0;
}

/* ---- life cycle ---- */

/* A sender as the configuration says. Return: 0 or a negative errno. */
static int relay_start_sends(Relay *r, UmadSender **ret)
{
	UmadSenderConfig scfg = {
		.senders = MAX(r->cfg.senders, 1u),
		.fast_usec = (uint64_t)r->cfg.send_fast_ms * 1000,
		.fail_usec = (uint64_t)r->cfg.send_fail_ms * 1000,
		.deadline_usec = (uint64_t)r->cfg.send_timeout_ms * 1000,
		.max_queued = r->cfg.max_send_queue,
		.clock = r->clock,
		.workers = r->cfg.send_workers,
		.workers_arg = r->cfg.send_workers_arg,
	};

	return umad_sender_new(r->event, r->port, &scfg, relay_tx_on_sent, r, ret);
}

int relay_new(sd_event *event, UmadPort *port, const RelayConfig *cfg, Relay **ret)
{
	Relay *r = g_new0(Relay, 1);
	int e;

	r->client_ep = -1;
	r->sessions_fd = -1;
	r->event = sd_event_ref(event);
	r->port = port;
	r->cfg = *cfg;
	r->clock = cfg->clock.now ? cfg->clock : usec_clock_of_event(event);
	r->next_client_id = 1;
	r->counters = &r->counters_own;
	if (r->cfg.max_clients_per_uid == 0)
		r->cfg.max_clients_per_uid = MAX(r->cfg.max_clients / 2, 1u);
	r->clients_per_uid = g_hash_table_new(g_direct_hash, g_direct_equal);
	g_queue_init(&r->unregistered);
	/* A relay capped below the usual start needs no bigger table. */
	r->sessions = session_table_new_sized(cfg->timeouts_ms, r->cfg.max_total_sessions);
	r->half_open_peers = g_hash_table_new_full(relay_peer_key_hash, relay_peer_key_equal,
						   g_free, NULL);
	r->clients = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, relay_client_free);
	r->gid_owners = g_hash_table_new_full(gid_hash, gid_hash_equal, g_free, NULL);
	r->dirty = g_ptr_array_new();
	r->resumed = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	r->sinks = g_array_new(FALSE, FALSE, sizeof(RelayEventSink));
	if (cfg->trace)
		relay_add_event_sink(r, relay_text_trace_sink, cfg->trace);
	if (!r->sessions) {
		relay_free(r);
		return -ENOMEM;
	}
	session_table_set_remove_hook(r->sessions, relay_session_removed, r);
	r->client_ep = epoll_create1(EPOLL_CLOEXEC);
	if (r->client_ep < 0) {
		e = -errno;
		relay_free(r);
		return e;
	}
	/* A relay whose sends could block the loop is no relay: the workers
	 * start or it does not. They may still be starting. */
	e = relay_start_sends(r, &r->sender);
	if (e < 0) {
		relay_free(r);
		return e;
	}
	e = sd_event_add_io(event, &r->umad_io, port->fd, EPOLLIN, relay_rx_on_umad_io, r);
	if (e >= 0)
		e = sd_event_add_io(event, &r->clients_io, r->client_ep, EPOLLIN,
				    relay_on_clients_io, r);
	if (e >= 0)
		e = sd_event_add_time(event, &r->timer, CLOCK_MONOTONIC, UINT64_MAX, 1000,
				      relay_on_session_timer, r);
	if (e >= 0)
		e = sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
	if (e >= 0)
		e = sd_event_add_defer(event, &r->resume_src, relay_on_resume, r);
	if (e >= 0)
		e = sd_event_source_set_enabled(r->resume_src, SD_EVENT_OFF);
	if (e >= 0 && r->cfg.register_timeout_ms > 0) {
		e = sd_event_add_time(event, &r->register_timer, CLOCK_MONOTONIC, UINT64_MAX, 100000,
				      relay_on_register_timer, r);
		if (e >= 0)
			e = sd_event_source_set_enabled(r->register_timer, SD_EVENT_OFF);
	}
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
	/* First: its senders end, and what they had is reported while the
	 * clients are still there. */
	if (r->sender)
		relay_stop_sends(r, 0);
	umad_sender_free(r->sender);
	r->sender = NULL;
	sd_event_source_disable_unref(r->umad_io);
	sd_event_source_disable_unref(r->clients_io);
	sd_event_source_disable_unref(r->timer);
	sd_event_source_disable_unref(r->register_timer);
	sd_event_source_disable_unref(r->resume_src);
	if (r->resumed)
		g_array_free(r->resumed, TRUE);
	g_queue_clear(&r->unregistered);
	if (r->clients)
		g_hash_table_destroy(r->clients);
	if (r->clients_per_uid)
		g_hash_table_destroy(r->clients_per_uid);
	if (r->client_ep >= 0)
		close(r->client_ep);
	g_free(r->fd_events);
	g_free(r->rx_batch);
	g_free(r->rx_len);
	g_free(r->tx_warm);
	if (r->gid_owners)
		g_hash_table_destroy(r->gid_owners);
	if (r->dirty)
		g_ptr_array_free(r->dirty, TRUE);
	if (r->sinks)
		g_array_free(r->sinks, TRUE);
	/* No hook during teardown: the counts go with the relay. */
	if (r->sessions)
		session_table_set_remove_hook(r->sessions, NULL, NULL);
	session_table_free(r->sessions);
	relay_guard_free(r->guard);
	if (r->sessions_fd >= 0)
		close(r->sessions_fd);
	handoff_state_free(r->handoff);
	if (r->half_open_peers)
		g_hash_table_destroy(r->half_open_peers);
	umad_port_close(r->port);
	sd_event_unref(r->event);
	g_free(r);
}

void relay_stop_sends(Relay *r, unsigned wait_ms)
{
	umad_sender_stop(r->sender, (uint64_t)wait_ms * 1000);
}

int relay_resume_sends(Relay *r)
{
	UmadSender *s = NULL;
	int e = relay_start_sends(r, &s);

	if (e < 0)
		return e;
	umad_sender_free(r->sender);
	r->sender = s;
	return 0;
}
