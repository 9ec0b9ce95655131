/* SPDX-License-Identifier: MIT */
/*
 * Owns the session table's consistency checks (session_table_check(),
 * session_table_check_owned()): the counts against the slots, every index
 * against the keys its sessions have, an owner's list against the table;
 * and the copy of the live sessions tests compare (session_table_copy()).
 * Tests, fuzzers and the relay driver call them; the daemon does not.
 * They read the slots and chains themselves: a fuzzer builds this unit
 * without coverage, so the checks cost no coverage hooks and add nothing
 * to the coverage the fuzzer steers by.
 */

#include "session-table-internal.h"

/* No chain starts in these @n buckets. A loop, not memcmp(): under a
 * fuzzer, memcmp() would feed the check's comparison to libFuzzer. */
static bool buckets_empty(const uint32_t *b, uint32_t n)
{
	uint32_t any = 0;

	for (uint32_t i = 0; i < n; i++)
		any |= b[i];
	return any == 0;
}

const char *session_table_check(const SessionTable *t)
{
	uint32_t *const buckets[] = { t->wire_buckets, t->client_buckets, t->peer_buckets };
	uint32_t live = 0, tombs = 0, half_open = 0;

	for (uint32_t h = 1; h <= t->used; h++) {
		const Session *s = slot(t, h);

		live += !!(s->flags & SESSION_F_LIVE);
		tombs += !!(s->flags & SESSION_F_TOMB);
		half_open += (s->flags & SESSION_F_LIVE) && (s->flags & SESSION_F_HALF_OPEN);
		if ((s->flags & SESSION_F_TOMB) && (s->flags & SESSION_F_LIVE))
			return "a slot is both live and a tombstone";
	}
	if (live != t->live || tombs != t->tombs || half_open != t->half_open)
		return "the table's counts disagree with its slots";
	for (int c = CHAIN_WIRE; c <= CHAIN_PEER; c++) {
		uint64_t claimed = 0, found = 0;

		for (uint32_t h = 1; h <= t->used; h++)
			claimed += session_slot_indexed_in(slot(t, h), (SessionChain)c);
		for (uint32_t b = 0; b < t->capacity; b++) {
			uint64_t steps = 0;

			/* Most buckets are empty: skip them 64 at a time. */
			if (b % 64 == 0 && t->capacity - b >= 64 && buckets_empty(&buckets[c][b], 64)) {
				b += 63;
				continue;
			}

			for (uint32_t h = buckets[c][b]; h; h = *session_table_chain_next(t, h, (SessionChain)c)) {
				uint64_t hash;

				if (h > t->used)
					return "an index chain points past the used slots";
				if (!session_slot_indexed_in(slot(t, h), (SessionChain)c))
					return "an index chain holds a session that is not in it";
				(void)session_table_index_of(t, h, (SessionChain)c, &hash);
				if (bucket_of(t, hash) != b)
					return "a session is filed under a key it no longer has";
				if (++steps > claimed)
					return "an index chain loops";
				found++;
			}
		}
		if (found != claimed)
			return "an index misses a session that claims to be in it";
	}
	return NULL;
}

/* The first live session or tombstone with wire id @id in its chain: what
 * session_table_lookup_wire_id() finds. */
static uint32_t chain_find_wire(const SessionTable *t, uint32_t id)
{
	uint32_t h = t->wire_buckets[bucket_of(t, hash_wire(id))];

	while (h && slot(t, h)->wire_id != id)
		h = slot(t, h)->next_wire;
	return h;
}

/* The first session of (@client_id, @comm_id) in its chain. */
static uint32_t chain_find_client(const SessionTable *t, uint32_t client_id, uint32_t comm_id)
{
	uint32_t h = t->client_buckets[bucket_of(t, hash_client(client_id, comm_id))];

	while (h && (slot(t, h)->client_id != client_id || slot(t, h)->client_comm_id != comm_id))
		h = slot(t, h)->next_client;
	return h;
}

const char *session_table_check_owned(const SessionTable *t, const SessionList *l,
				      uint32_t client_id)
{
	uint32_t n = 0, half_open = 0;

	for (uint32_t h = l->head; h; n++) {
		const Session *s;

		if (n >= l->count || h > t->used)
			return "a client's session list disagrees with the table";
		s = slot(t, h);
		if (!(s->flags & SESSION_F_LIVE) || s->client_id != client_id)
			return "a client's session list holds a session not its own";
		/* Found by its keys, and not another before it: no wire id
		 * or client comm id is taken twice. */
		if (s->wire_id && chain_find_wire(t, s->wire_id) != h)
			return chain_find_wire(t, s->wire_id) ? "a wire id is mapped twice"
							      : "a session's wire id does not find it";
		if (s->client_comm_id && chain_find_client(t, client_id, s->client_comm_id) != h)
			return "a session's client comm id does not find it";
		if (s->state >= SESSION_STATE_COUNT || s->timer >= SESSION_TIMER_COUNT)
			return "a session has a bad state or timer";
		if (s->flags & SESSION_F_HALF_OPEN) {
			if (!(s->flags & SESSION_F_REMOTE))
				return "a session the client started counts as half-open";
			half_open++;
		}
		h = s->owner_next;
	}
	if (n != l->count)
		return "a client's session list disagrees with the table";
	if (half_open != l->half_open)
		return "a client's half-open count is wrong";
	return NULL;
}

uint32_t session_table_copy(const SessionTable *t, Session *out, uint32_t max)
{
	uint32_t n = 0;

	for (uint32_t h = 1; h <= t->used; h++)
		if (slot(t, h)->flags & SESSION_F_LIVE) {
			if (n < max)
				out[n] = *slot(t, h);
			n++;
		}
	return n;
}

/* ---- reproducible wire ids ---- */

/* A splitmix64 sequence from the seed: every id a test sees is the same
 * run after run, and still spread over the whole space. */
static void fill_seeded(void *ctx, void *buf, size_t len)
{
	uint64_t *state = ctx;
	uint32_t *out = buf;

	for (size_t i = 0; i < len / sizeof(uint32_t); i++) {
		*state += 0x9e3779b97f4a7c15ull;
		out[i] = (uint32_t)(mix64(*state) >> 32);
	}
}

void session_table_seed_wire_ids(SessionTable *t, uint64_t seed)
{
	uint64_t *state = g_new(uint64_t, 1);

	*state = seed;
	session_table_set_random_source(t, fill_seeded, state, g_free);
}
