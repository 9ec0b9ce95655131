/* SPDX-License-Identifier: MIT */
/* Unit tests of the session table: indexes, wire ids, timers, owners. */
#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "session-table.h"
#include "unit-test.h"

#define SEC 1000000ull

static const uint32_t timeouts[SESSION_TIMER_COUNT] = {
	[SESSION_TIMER_HANDSHAKE] = 1000,
	[SESSION_TIMER_CLOSING] = 3000,
	[SESSION_TIMER_SIDR] = 500,
};

static const uint8_t gid_a[16] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 1 };
static const uint8_t gid_b[16] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 2 };

typedef struct Owners {
	SessionList lists[4];
} Owners;

static SessionList *owner_of(void *ud, uint32_t client_id)
{
	Owners *o = ud;
	return client_id < 4 ? &o->lists[client_id] : NULL;
}

UNIT_TEST("/session-table/namespaces", test_two_clients_same_comm_id_get_distinct_wire_ids)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	uint32_t h1, h2, w1, w2;

	h1 = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 0);
	h2 = session_table_add(t, &o.lists[2], 2, SESSION_REQ_SENT, 0);
	session_table_set_client_comm_id(t, h1, 0x1234);
	session_table_set_client_comm_id(t, h2, 0x1234);
	w1 = session_table_assign_wire_id(t, h1);
	w2 = session_table_assign_wire_id(t, h2);
	g_assert_cmpuint(w1, !=, 0);
	g_assert_cmpuint(w2, !=, 0);
	g_assert_cmpuint(w1, !=, w2);
	/* Assigning again keeps the id: retransmissions map to one id. */
	g_assert_cmpuint(session_table_assign_wire_id(t, h1), ==, w1);
	/* Warming (the batch pass) reads only, found or not. */
	{
		uint32_t found[3] = { 7, 7, 7 };

		session_table_warm_client_comm_ids(t, (const uint32_t[]){ 1, 3, 2 },
						   (const uint32_t[]){ 0x1234, 0x1234, 0x1234 }, 3,
						   found);
		g_assert_cmpuint(found[0], ==, h1);
		g_assert_cmpuint(found[1], ==, 0);
		g_assert_cmpuint(found[2], ==, h2);
	}
	session_table_warm_wire_ids(t, (const uint32_t[]){ w2, 0, w1 }, 3);

	g_assert_cmpuint(session_table_lookup_client_comm_id(t, 1, 0x1234), ==, h1);
	g_assert_cmpuint(session_table_lookup_client_comm_id(t, 2, 0x1234), ==, h2);
	g_assert_cmpuint(session_table_lookup_client_comm_id(t, 3, 0x1234), ==, 0);
	g_assert_cmpuint(session_table_lookup_wire_id(t, w1), ==, h1);
	g_assert_cmpuint(session_table_lookup_wire_id(t, w2), ==, h2);
	g_assert_cmpuint(session_table_count(t), ==, 2);
}

UNIT_TEST("/session-table/peer-index", test_peer_index_matches_gid_and_optional_peer)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	uint32_t h = session_table_add(t, &o.lists[1], 1, SESSION_REQ_RCVD, 0);

	session_table_set_peer(t, h, 0xabcdef01, gid_a, gid_b);
	g_assert_cmpuint(session_table_lookup_peer(t, 0xabcdef01, gid_a, gid_b), ==, h);
	g_assert_cmpuint(session_table_lookup_peer(t, 0xabcdef01, gid_a, NULL), ==, h);
	g_assert_cmpuint(session_table_lookup_peer(t, 0xabcdef01, gid_b, NULL), ==, 0);
	g_assert_cmpuint(session_table_lookup_peer(t, 0xabcdef01, gid_a, gid_a), ==, 0);
	g_assert_cmpuint(session_table_lookup_peer(t, 0xabcdef02, gid_a, NULL), ==, 0);
}

UNIT_TEST("/session-table/remove-all", test_remove_all_scrubs_every_index)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	uint32_t wires[100];

	for (uint32_t i = 0; i < 100; i++) {
		uint32_t h = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 0);
		session_table_set_client_comm_id(t, h, i + 1);
		wires[i] = session_table_assign_wire_id(t, h);
		session_table_set_peer(t, h, 1000 + i, gid_a, gid_b);
		session_table_arm(t, h, SESSION_TIMER_HANDSHAKE, 10 * SEC);
	}
	session_table_add(t, &o.lists[2], 2, SESSION_REQ_SENT, 0);
	g_assert_cmpuint(o.lists[1].count, ==, 100);
	session_table_remove_all(t, &o.lists[1]);
	g_assert_cmpuint(o.lists[1].count, ==, 0);
	g_assert_cmpuint(o.lists[1].head, ==, 0);
	g_assert_cmpuint(session_table_count(t), ==, 1);
	for (uint32_t i = 0; i < 100; i++) {
		g_assert_cmpuint(session_table_lookup_wire_id(t, wires[i]), ==, 0);
		g_assert_cmpuint(session_table_lookup_client_comm_id(t, 1, i + 1), ==, 0);
		g_assert_cmpuint(session_table_lookup_peer(t, 1000 + i, gid_a, NULL), ==, 0);
	}
	/* No timer is left behind for removed sessions. */
	g_assert_cmpuint(session_table_next_deadline(t, 10 * SEC), ==, UINT64_MAX);
}

UNIT_TEST("/session-table/timers", test_timers_expire_in_order_and_rearm)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	uint64_t now = 100 * SEC;
	uint32_t a = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 0);
	uint32_t b = session_table_add(t, &o.lists[1], 1, SESSION_CLOSING, 0);
	uint32_t c = session_table_add(t, &o.lists[2], 2, SESSION_ESTABLISHED, 0);

	session_table_arm(t, a, SESSION_TIMER_HANDSHAKE, now);		/* +1 s */
	session_table_arm(t, b, SESSION_TIMER_CLOSING, now);		/* +3 s */
	session_table_arm(t, c, SESSION_TIMER_NONE, now);		/* never */
	g_assert_cmpuint(session_table_next_deadline(t, now), ==, now + 1 * SEC);

	/* Re-arming a (a duplicate arrived) pushes its deadline out. */
	session_table_arm(t, a, SESSION_TIMER_HANDSHAKE, now + SEC / 2);
	g_assert_cmpuint(session_table_expire(t, now + SEC, owner_of, &o), ==, 0);
	g_assert_cmpuint(session_table_expire(t, now + SEC * 3 / 2, owner_of, &o), ==, 1);
	g_assert_null(session_table_get(t, a));
	g_assert_nonnull(session_table_get(t, b));
	g_assert_cmpuint(session_table_expire(t, now + 3 * SEC, owner_of, &o), ==, 1);
	g_assert_cmpuint(o.lists[1].count, ==, 0);
	/* The established session has no timer and survives any idle time. */
	g_assert_cmpuint(session_table_expire(t, now + 3600 * SEC, owner_of, &o), ==, 0);
	g_assert_nonnull(session_table_get(t, c));
	g_assert_cmpuint(session_table_count(t), ==, 1);
}

UNIT_TEST("/session-table/timer-wraparound", test_timers_survive_tick_wraparound)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	/* 2^32 ms ticks is 49.7 days; start just before the wrap. */
	uint64_t now = (((uint64_t)1 << 32) - 200) * 1000ull;
	uint32_t h = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 0);

	session_table_arm(t, h, SESSION_TIMER_HANDSHAKE, now);
	g_assert_cmpuint(session_table_expire(t, now + SEC / 2, owner_of, &o), ==, 0);
	g_assert_cmpuint(session_table_expire(t, now + SEC, owner_of, &o), ==, 1);
}

UNIT_TEST("/session-table/growth", test_growth_keeps_every_key)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	const uint32_t n = 50000;
	g_autofree uint32_t *wires = g_new(uint32_t, n);
	GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);

	for (uint32_t i = 0; i < n; i++) {
		uint32_t h = session_table_add(t, &o.lists[i % 4], i % 4, SESSION_REQ_SENT, 0);
		g_assert_cmpuint(h, !=, 0);
		session_table_set_client_comm_id(t, h, i / 4 + 1);
		wires[i] = session_table_assign_wire_id(t, h);
		g_assert_false(g_hash_table_contains(seen, GUINT_TO_POINTER(wires[i])));
		g_hash_table_add(seen, GUINT_TO_POINTER(wires[i]));
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t h = session_table_lookup_wire_id(t, wires[i]);
		Session *s = session_table_get(t, h);
		g_assert_nonnull(s);
		g_assert_cmpuint(s->client_id, ==, i % 4);
		g_assert_cmpuint(s->client_comm_id, ==, i / 4 + 1);
		g_assert_cmpuint(session_table_lookup_client_comm_id(t, i % 4, i / 4 + 1), ==, h);
	}
	/* The memory budget: under 128 bytes per live session. */
	g_assert_cmpuint(session_table_memory(t) / n, <, 128 * 2);
	g_assert_cmpuint(sizeof(Session) + 3 * sizeof(uint32_t), <=, 128);
	g_hash_table_unref(seen);
}

/* A table made for a few live sessions starts with room for them, not
 * the usual 1024 slots, and still grows: tombstones take slots too. */
UNIT_TEST("/session-table/sized", test_sized_table_starts_small_and_grows)
{
	g_autoptr(SessionTable) usual = session_table_new(timeouts);
	g_autoptr(SessionTable) capped = session_table_new_sized(timeouts, 1u << 20);
	g_autoptr(SessionTable) t = session_table_new_sized(timeouts, 20);
	g_autoptr(SessionTable) tiny = session_table_new_sized(timeouts, 1);
	const size_t per_slot = sizeof(Session) + 3 * sizeof(uint32_t);
	Owners o = { 0 };
	uint32_t wires[200];

	/* The usual start for a big cap; 32 slots for 20; 16 at least. */
	g_assert_cmpuint(session_table_memory(capped), ==, session_table_memory(usual));
	g_assert_cmpuint(session_table_memory(usual) - session_table_memory(t), ==,
			 (1024 - 32) * per_slot);
	g_assert_cmpuint(session_table_memory(t) - session_table_memory(tiny), ==, 16 * per_slot);
	for (uint32_t i = 0; i < G_N_ELEMENTS(wires); i++) {
		uint32_t h = session_table_add(t, &o.lists[i % 4], i % 4, SESSION_REQ_SENT, 0);

		g_assert_cmpuint(h, !=, 0);
		session_table_set_client_comm_id(t, h, i + 1);
		wires[i] = session_table_assign_wire_id(t, h);
	}
	g_assert_cmpuint(session_table_memory(usual) - session_table_memory(t), ==,
			 (1024 - 256) * per_slot);
	for (uint32_t i = 0; i < G_N_ELEMENTS(wires); i++)
		g_assert_cmpuint(session_table_lookup_client_comm_id(
					 t, i % 4, i + 1),
				 ==, session_table_lookup_wire_id(t, wires[i]));
	g_assert_null(session_table_check(t));
}

UNIT_TEST("/session-table/slot-reuse", test_slot_reuse_does_not_leak_state)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	uint32_t h = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 0);
	uint32_t w, h2;
	Session *s;

	/* Without tombstones: a slot is free again as soon as its session goes
	 * (test_tombstones covers the id's reservation). */
	session_table_set_max_tombstones(t, 0);
	session_table_set_client_comm_id(t, h, 77);
	w = session_table_assign_wire_id(t, h);
	session_table_set_peer(t, h, 5, gid_a, gid_b);
	session_table_remove(t, &o.lists[1], h);
	h2 = session_table_add(t, &o.lists[2], 2, SESSION_REQ_RCVD, 0);
	g_assert_cmpuint(h2, ==, h); /* the slot is reused... */
	s = session_table_get(t, h2);
	/* ...and holds nothing of its previous owner. */
	g_assert_cmpuint(s->wire_id, ==, 0);
	g_assert_cmpuint(s->client_comm_id, ==, 0);
	g_assert_cmpuint(s->peer_comm_id, ==, 0);
	g_assert_true(s->peer_gid[15] == 0 && s->local_gid[15] == 0);
	g_assert_cmpuint(session_table_lookup_wire_id(t, w), ==, 0);
}

/* A session that goes early leaves its wire id reserved for a closing
 * period: nothing else of it, no live lookup, and no new session gets it. */
UNIT_TEST("/session-table/tombstones", test_tombstones)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	uint32_t h, w, h2, w2;

	session_table_seed_wire_ids(t, 42);
	h = session_table_add(t, &o.lists[1], 1, SESSION_ESTABLISHED, 10 * SEC);
	session_table_set_client_comm_id(t, h, 77);
	w = session_table_assign_wire_id(t, h);
	session_table_set_peer(t, h, 5, gid_a, gid_b);
	session_table_remove(t, &o.lists[1], h);
	g_assert_cmpuint(session_table_count(t), ==, 0);
	g_assert_cmpuint(session_table_tombstone_count(t), ==, 1);
	g_assert_cmpuint(session_table_lookup_wire_id(t, w), ==, 0);
	g_assert_cmpuint(session_table_lookup_client_comm_id(t, 1, 77), ==, 0);
	g_assert_cmpuint(session_table_lookup_peer(t, 5, gid_a, NULL), ==, 0);
	g_assert_null(session_table_check(t));

	/* The same sequence again offers the reserved id first: it is skipped. */
	session_table_seed_wire_ids(t, 42);
	h2 = session_table_add(t, &o.lists[2], 2, SESSION_REQ_SENT, 11 * SEC);
	g_assert_cmpuint(h2, !=, h);
	w2 = session_table_assign_wire_id(t, h2);
	g_assert_cmpuint(w2, !=, w);
	g_assert_null(session_table_check(t));

	/* After the closing period (3 s here) the id is free again. */
	g_assert_cmpuint(session_table_expire(t, 12 * SEC, owner_of, &o), ==, 0);
	g_assert_cmpuint(session_table_tombstone_count(t), ==, 1);
	g_assert_cmpuint(session_table_expire(t, 13 * SEC + 1000, owner_of, &o), ==, 0);
	g_assert_cmpuint(session_table_tombstone_count(t), ==, 0);
	session_table_remove(t, &o.lists[2], h2);
	session_table_seed_wire_ids(t, 42);
	h = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 14 * SEC);
	g_assert_cmpuint(session_table_assign_wire_id(t, h), ==, w);
	g_assert_null(session_table_check(t));

	/* The reservation is bounded: past the cap the oldest goes early. */
	session_table_set_max_tombstones(t, 1);
	g_assert_cmpuint(session_table_tombstone_count(t), ==, 1); /* h2's */
	session_table_remove(t, &o.lists[1], h);
	g_assert_cmpuint(session_table_tombstone_count(t), ==, 1);
	g_assert_null(session_table_check(t));
}

/* Ids drawn from the kernel's CSPRNG have no structure an observer could
 * use: 10,000 of them spread over (nearly) all high 16-bit values. */
UNIT_TEST("/session-table/random-wire-ids", test_wire_ids_are_random)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	g_autoptr(GHashTable) high = g_hash_table_new(g_direct_hash, g_direct_equal);
	Owners o = { 0 };

	for (unsigned i = 0; i < 10000; i++) {
		uint32_t h = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 0);
		uint32_t w = session_table_assign_wire_id(t, h);

		g_assert_cmpuint(w, !=, 0);
		g_hash_table_add(high, GUINT_TO_POINTER((w >> 16) + 1));
	}
	/* 10,000 draws of 65,536 values give about 9,300 distinct ones; a
	 * counter, or a counter XOR a key, gives one or two. */
	g_assert_cmpuint(g_hash_table_size(high), >, 8000);
	g_assert_null(session_table_check(t));
}

/* Half-open sessions are counted per owner and in total, and the counts
 * follow them out, whichever way they go. */
UNIT_TEST("/session-table/half-open-counts", test_half_open_counts)
{
	g_autoptr(SessionTable) t = session_table_new(timeouts);
	Owners o = { 0 };
	uint32_t a = session_table_add(t, &o.lists[1], 1, SESSION_REQ_RCVD, 0);
	uint32_t b = session_table_add(t, &o.lists[1], 1, SESSION_REQ_RCVD, 0);
	uint32_t c = session_table_add(t, &o.lists[2], 2, SESSION_REQ_RCVD, 0);

	session_table_set_half_open(t, &o.lists[1], a, true);
	session_table_set_half_open(t, &o.lists[1], b, true);
	session_table_set_half_open(t, &o.lists[1], b, true); /* no double count */
	session_table_set_half_open(t, &o.lists[2], c, true);
	g_assert_cmpuint(o.lists[1].half_open, ==, 2);
	g_assert_cmpuint(session_table_half_open_count(t), ==, 3);
	session_table_set_half_open(t, &o.lists[1], a, false);
	g_assert_cmpuint(o.lists[1].half_open, ==, 1);
	session_table_arm(t, c, SESSION_TIMER_HANDSHAKE, 0);
	g_assert_cmpuint(session_table_expire(t, 2 * SEC, owner_of, &o), ==, 1);
	g_assert_cmpuint(o.lists[2].half_open, ==, 0);
	session_table_remove_all(t, &o.lists[1]);
	g_assert_cmpuint(o.lists[1].half_open, ==, 0);
	g_assert_cmpuint(session_table_half_open_count(t), ==, 0);
	g_assert_null(session_table_check(t));
}

static const SessionFileOwner file_owner = { "mlx5_0", 1, 0x1234 };

/* Owners 1 and 3 come back after a restart; owner 2 does not. */
static SessionList *owner_back(void *ud, uint32_t client_id)
{
	Owners *o = ud;
	return client_id == 1 || client_id == 3 ? &o->lists[client_id] : NULL;
}

/* A table kept in a memfd is taken over by a successor: what holds up is
 * kept (keys, timers in order, owners, half-open counts, tombstones), what
 * does not is dropped, and a file that is not a table is refused. */
UNIT_TEST("/session-table/adopt", test_adopt)
{
	int fd = memfd_create("sessions", MFD_CLOEXEC);
	SessionTable *t = NULL, *u = NULL;
	Owners o = { 0 }, back = { 0 };
	uint32_t a, b, c, d, wa, wb, wd, tomb, dropped = 99;

	g_assert_cmpint(fd, >=, 0);
	g_assert_cmpint(session_table_new_in(timeouts, fd, &file_owner, &t), ==, 0);
	a = session_table_add(t, &o.lists[1], 1, SESSION_REQ_SENT, 1 * SEC);
	session_table_set_client_comm_id(t, a, 11);
	wa = session_table_assign_wire_id(t, a);
	session_table_arm(t, a, SESSION_TIMER_HANDSHAKE, 2 * SEC);
	b = session_table_add(t, &o.lists[1], 1, SESSION_ESTABLISHED, 1 * SEC);
	session_table_set_client_comm_id(t, b, 12);
	wb = session_table_assign_wire_id(t, b);
	session_table_set_peer(t, b, 77, gid_a, gid_b);
	session_table_arm(t, b, SESSION_TIMER_HANDSHAKE, 1 * SEC); /* due before a's */
	c = session_table_add(t, &o.lists[2], 2, SESSION_REQ_RCVD, 1 * SEC);
	session_table_set_peer(t, c, 78, gid_a, gid_b);
	d = session_table_add(t, &o.lists[3], 3, SESSION_REQ_RCVD, 1 * SEC);
	session_table_set_client_comm_id(t, d, 13);
	wd = session_table_assign_wire_id(t, d);
	session_table_set_half_open(t, &o.lists[3], d, true);
	session_table_get(t, d)->flags |= SESSION_F_REMOTE;
	tomb = session_table_add(t, &o.lists[1], 1, SESSION_CLOSING, 1 * SEC);
	session_table_set_client_comm_id(t, tomb, 14);
	session_table_assign_wire_id(t, tomb);
	session_table_remove(t, &o.lists[1], tomb);
	/* A crash left one slot torn. */
	session_table_get(t, d)->state = 200;
	/* The predecessor dies without a word: its memory is just gone. */
	session_table_free(t);

	g_assert_cmpint(session_table_adopt(timeouts, fd, 1500000, owner_back, NULL, &back, &dropped,
					    &u),
			==, 0);
	g_assert_cmpuint(dropped, ==, 2); /* owner 2's, and the torn one */
	g_assert_null(session_table_check(u));
	g_assert_cmpuint(session_table_count(u), ==, 2);
	g_assert_cmpuint(back.lists[1].count, ==, 2);
	g_assert_cmpuint(back.lists[3].count, ==, 0);
	g_assert_cmpuint(session_table_half_open_count(u), ==, 0);
	g_assert_cmpuint(session_table_tombstone_count(u), ==, 1);
	g_assert_cmpuint(session_table_lookup_wire_id(u, wa), ==, a);
	g_assert_cmpuint(session_table_lookup_wire_id(u, wb), ==, b);
	g_assert_cmpuint(session_table_lookup_wire_id(u, wd), ==, 0);
	g_assert_cmpuint(session_table_lookup_client_comm_id(u, 1, 12), ==, b);
	g_assert_cmpuint(session_table_lookup_peer(u, 77, gid_a, gid_b), ==, b);
	/* Timers kept their deadlines and their order: b (2 s), then a (3 s). */
	g_assert_cmpuint(session_table_next_deadline(u, 1500000), ==, 2 * SEC);
	g_assert_cmpuint(session_table_expire(u, 2 * SEC, owner_back, &back), ==, 1);
	g_assert_null(session_table_get(u, b));
	g_assert_nonnull(session_table_get(u, a));
	/* The successor goes on in the same file. */
	g_assert_cmpuint(session_table_add(u, &back.lists[1], 1, SESSION_REQ_SENT, 2 * SEC), !=, 0);
	g_assert_null(session_table_check(u));
	session_table_free(u);

	/* Garbage is refused. */
	g_assert_cmpint(ftruncate(fd, 0), ==, 0);
	g_assert_cmpint(write(fd, "not a table", 11), ==, 11);
	g_assert_cmpint(session_table_adopt(timeouts, fd, 0, owner_back, NULL, &back, NULL, &u), ==,
			-EBADMSG);
	close(fd);
}

UNIT_TEST_MAIN()
