/* SPDX-License-Identifier: MIT */
/*
 * The session table's insides, shared by its own units only:
 * session-table.c (storage, indexes, timers, keys), session-table-file.c
 * (taking over a predecessor's table, saving one) and
 * session-table-check.c (the consistency check).
 */
#ifndef RDMACM_MUX_SESSION_TABLE_INTERNAL_H
#define RDMACM_MUX_SESSION_TABLE_INTERNAL_H

#include <string.h>

#include "handoff-format.h"
#include "session-table.h"

#define INITIAL_CAPACITY 1024u
/* The least a table in memory starts with (session_table_new_sized()). A
 * table in a memfd starts at INITIAL_CAPACITY, and a successor takes no
 * smaller one over. */
#define MIN_CAPACITY 16u
/* Tombstones sit on a timer list of their own, after the public kinds. */
#define TIMER_TOMB SESSION_TIMER_COUNT
#define TIMER_LISTS (SESSION_TIMER_COUNT + 1)
#define DEFAULT_MAX_TOMBSTONES 65536u
#define RANDOM_POOL 256
/*
 * Arrays of this size or more ask for transparent huge pages: a lookup in a
 * table of a million sessions lands on a random page of ~100 MiB, and with
 * 4 KiB pages nearly every one is a TLB miss (and in a VM a two-level page
 * walk) on top of the cache misses.
 */
#define HUGE_PAGE (2u << 20)

/*
 * A table kept in a memfd (session_table_new_in()) is the hand-off
 * format's "sessions" memfd (handoff-format.h): a header page whose
 * directory has one SESSIONS section, and the slots from offset
 * HANDOFF_PAGE on, which are that section's records. Everything else
 * (indexes, timer lists, owner lists, counts) is derived from the slots,
 * so a successor rebuilds it (session_table_adopt()).
 */
#define SESSION_FILE_HEADER HANDOFF_PAGE

struct SessionTable {
	Session *slots;	  /* slots[handle - 1] */
	int fd;		  /* the memfd the slots live in, or -1 */
	void *file; /* its mapping, header page first; NULL without a fd */
	HandoffSection *file_section; /* the SESSIONS entry in its directory */
	size_t file_bytes;
	uint32_t capacity; /* a power of two; also the bucket count */
	uint32_t used;	   /* slots ever handed out (high-water mark) */
	uint32_t live;
	uint32_t free_head; /* free slots, chained through next_wire */
	uint32_t *wire_buckets;
	uint32_t *client_buckets;
	uint32_t *peer_buckets;
	uint32_t timer_head[TIMER_LISTS];
	uint32_t timer_tail[TIMER_LISTS];
	uint32_t timeouts_ms[TIMER_LISTS];
	uint32_t clock_ms;  /* the latest time a caller passed in, in ticks */
	uint32_t tombs;	    /* slots holding a tombstone */
	uint32_t max_tombs;
	uint32_t half_open; /* SESSION_F_HALF_OPEN sessions */
	SessionRemovedFn removed;
	void *removed_userdata;
	/* Wire ids come in batches from the pool's source: the kernel's
	 * CSPRNG unless session_table_set_random_source() chose another. */
	uint32_t random_pool[RANDOM_POOL];
	unsigned random_left;
	SessionRandomFn random_fill;
	void *random_ctx;
	GDestroyNotify random_ctx_free;
};

static inline uint32_t ms_ticks(uint64_t usec)
{
	return (uint32_t)(usec / 1000u);
}

/* A 64-bit mixer (splitmix64's finaliser): cheap and well spread. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline uint32_t bucket_of(const SessionTable *t, uint64_t hash)
{
	return (uint32_t)(hash & (t->capacity - 1));
}

static inline uint64_t hash_wire(uint32_t wire_id)
{
	return mix64(wire_id);
}

static inline uint64_t hash_client(uint32_t client_id, uint32_t comm_id)
{
	return mix64(((uint64_t)client_id << 32) | comm_id);
}

static inline uint64_t hash_peer(uint32_t peer_comm_id, const uint8_t gid[GID_LEN])
{
	uint64_t a, b;

	memcpy(&a, gid, 8);
	memcpy(&b, gid + 8, 8);
	return mix64(mix64(a ^ peer_comm_id) ^ b);
}

static inline Session *slot(const SessionTable *t, uint32_t h)
{
	return &t->slots[h - 1];
}

typedef enum SessionChain { CHAIN_WIRE, CHAIN_CLIENT, CHAIN_PEER } SessionChain;

/*
 * The one rule for which indexes a slot is filed in: a live session in
 * those its flags name, a tombstone in the wire index only. Rebuilding the
 * indexes, taking a table over and the consistency check all use it.
 */
static inline uint8_t session_chain_flag(SessionChain c)
{
	static const uint8_t flag[] = { SESSION_F_IN_WIRE, SESSION_F_IN_CLIENT, SESSION_F_IN_PEER };

	return flag[c];
}

static inline bool session_slot_indexed_in(const Session *s, SessionChain c)
{
	if (!(s->flags & session_chain_flag(c)))
		return false;
	return (s->flags & SESSION_F_LIVE) || (c == CHAIN_WIRE && (s->flags & SESSION_F_TOMB));
}

/* Count live session @h as @owner's, at the head of its list: a new
 * session and one taken over are linked the same way. */
static inline void session_table_owner_link(SessionTable *t, SessionList *owner, uint32_t h)
{
	Session *s = slot(t, h);

	s->owner_next = owner->head;
	if (owner->head)
		slot(t, owner->head)->owner_prev = h;
	owner->head = h;
	owner->count++;
	t->live++;
}

/* Where @h's link in chain @c is. */
uint32_t *session_table_chain_next(const SessionTable *t, uint32_t h, SessionChain c);
/* The buckets of chain @c and the hash of @h's key in it. */
uint32_t *session_table_index_of(const SessionTable *t, uint32_t h, SessionChain c,
				 uint64_t *ret_hash);
/* Put @h in (or take it out of) the index of chain @c. */
void session_table_index_update(SessionTable *t, uint32_t h, SessionChain c, bool insert);
void session_table_timer_link(SessionTable *t, uint32_t h, unsigned kind, uint32_t deadline_ms);
/* An index or slot array: huge pages when it is big. */
void *session_table_alloc_array(size_t bytes);
/* A table with no slots yet; @fd (or -1) is where its slots will live. */
SessionTable *session_table_new_empty(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], int fd);
/* Double the capacity (slots, file and indexes). Return: 0 or -ENOMEM. */
int session_table_grow(SessionTable *t);
/* Put slot @h on the free list. */
void session_table_slot_release(SessionTable *t, uint32_t h);
/* The slots in a memfd mapping, after its header page. */
Session *session_file_slots(void *map);
/* The SESSIONS entry of a memfd mapping's directory. */
HandoffSection *session_file_section(void *map);
/* File slot @h in every index session_slot_indexed_in() names. */
void session_table_file_slot(SessionTable *t, uint32_t h);

#endif
