/* SPDX-License-Identifier: MIT */
/*
 * Owns what the relay shows those who watch it (the control socket, the
 * metrics page, sd_notify's status): its counts, its counters, the
 * senders' numbers, and read-only walks of its clients and sessions.
 */
#include <string.h>

#include "relay-internal.h"

void relay_foreach_client(const Relay *r, void (*fn)(void *userdata, const RelayClientInfo *c),
			  void *userdata)
{
	g_autofree uint8_t *gids = NULL;
	uint32_t room = 0;
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, r->clients);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		const RelayClient *c = value;
		RelayClientInfo info = {
			.id = c->id,
			.vm = c->vm,
			.cred = c->conn.cred,
			.comm = c->conn.comm,
			.connected_usec = c->conn.connected_usec,
			.n_gids = c->n_gids,
			.queued = client_queued(&c->conn),
			.sessions = c->sessions.count,
			.caps = c->caps,
			.hello_done = c->hello_done,
			.stats = c->stats,
		};

		if (c->n_gids > room) {
			room = c->n_gids;
			gids = g_realloc_n(gids, room, GID_LEN);
		}
		for (uint32_t i = 0; i < c->n_gids; i++)
			memcpy(gids + (size_t)i * GID_LEN, c->gids[i].gid, GID_LEN);
		info.gids = gids;
		fn(userdata, &info);
	}
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

uint32_t relay_sender_queued(const Relay *r)
{
	return umad_sender_pending(r->sender);
}

uint64_t relay_sender_written(const Relay *r)
{
	UmadSenderStats st;

	umad_sender_stats(r->sender, &st);
	return st.written;
}

void relay_sender_stats(const Relay *r, UmadSenderStats *ret)
{
	umad_sender_stats(r->sender, ret);
}

bool relay_ended_loop(const Relay *r)
{
	return r->ended_loop;
}

const RelayCounters *relay_counters(const Relay *r)
{
	return r->counters;
}
