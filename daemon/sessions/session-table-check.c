/* SPDX-License-Identifier: MIT */
/*
 * Owns the session table's consistency check (session_table_check()): the
 * counts against the slots, and every index against the keys its sessions
 * have. Tests, fuzzers and the relay driver call it; the daemon does not.
 */
#include <string.h>

#include "session-table-internal.h"

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
			static const uint32_t empty[64];
			uint64_t steps = 0;

			/* Most buckets are empty: skip them 64 at a time. */
			if (b % 64 == 0 && t->capacity - b >= 64 &&
			    memcmp(&buckets[c][b], empty, sizeof(empty)) == 0) {
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
