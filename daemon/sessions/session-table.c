/* SPDX-License-Identifier: MIT */
/* Owns CM session storage, the three lookup indexes, wire id allocation
 * and the session timers (see session-table.h for the design). */
#include "session-table-internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

Session *session_table_get(SessionTable *t, uint32_t handle)
{
	if (handle == 0 || handle > t->used)
		return NULL;
	Session *s = slot(t, handle);
	return (s->flags & SESSION_F_LIVE) ? s : NULL;
}

uint32_t session_table_count(const SessionTable *t)
{
	return t->live;
}

size_t session_table_memory(const SessionTable *t)
{
	return sizeof(*t) + (size_t)t->capacity * (sizeof(Session) + 3 * sizeof(uint32_t));
}

/* ---- index maintenance ---- */


uint32_t *session_table_chain_next(const SessionTable *t, uint32_t h, SessionChain c)
{
	Session *s = slot(t, h);

	switch (c) {
	case CHAIN_WIRE:
		return &s->next_wire;
	case CHAIN_CLIENT:
		return &s->next_client;
	default:
		return &s->next_peer;
	}
}

static void chain_insert(SessionTable *t, uint32_t *buckets, uint64_t hash, uint32_t h,
			 SessionChain c)
{
	uint32_t b = bucket_of(t, hash);

	*session_table_chain_next(t, h, c) = buckets[b];
	buckets[b] = h;
}

static void chain_remove(SessionTable *t, uint32_t *buckets, uint64_t hash, uint32_t h,
			 SessionChain c)
{
	uint32_t *link = &buckets[bucket_of(t, hash)];

	while (*link) {
		uint32_t *next = session_table_chain_next(t, *link, c);
		if (*link == h) {
			*link = *next;
			*next = 0;
			return;
		}
		link = next;
	}
}

/* Where session @h goes in index @c: the bucket array and the key's hash. */
uint32_t *session_table_index_of(const SessionTable *t, uint32_t h, SessionChain c, uint64_t *ret_hash)
{
	const Session *s = slot(t, h);

	switch (c) {
	case CHAIN_WIRE:
		*ret_hash = hash_wire(s->wire_id);
		return t->wire_buckets;
	case CHAIN_CLIENT:
		*ret_hash = hash_client(s->client_id, s->client_comm_id);
		return t->client_buckets;
	default:
		*ret_hash = hash_peer(s->peer_comm_id, s->local_gid);
		return t->peer_buckets;
	}
}

/* Link session @h into (or out of) index @c under its current key. */
void session_table_index_update(SessionTable *t, uint32_t h, SessionChain c, bool insert)
{
	uint64_t hash;
	uint32_t *buckets = session_table_index_of(t, h, c, &hash);

	if (insert)
		chain_insert(t, buckets, hash, h, c);
	else
		chain_remove(t, buckets, hash, h, c);
}

/* Rebuild every index for the current capacity (after the array grew). */
static void reindex_all(SessionTable *t)
{
	memset(t->wire_buckets, 0, t->capacity * sizeof(uint32_t));
	memset(t->client_buckets, 0, t->capacity * sizeof(uint32_t));
	memset(t->peer_buckets, 0, t->capacity * sizeof(uint32_t));
	for (uint32_t h = 1; h <= t->used; h++)
		session_table_file_slot(t, h);
}

void session_table_file_slot(SessionTable *t, uint32_t h)
{
	for (int c = CHAIN_WIRE; c <= CHAIN_PEER; c++)
		if (session_slot_indexed_in(slot(t, h), (SessionChain)c))
			session_table_index_update(t, h, (SessionChain)c, true);
}

/* Zeroed memory for @bytes; big arrays are fresh mappings with THP advice
 * (untouched pages cost nothing until used, as with calloc()). */
void *session_table_alloc_array(size_t bytes)
{
	size_t rounded = (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
	void *p;

	if (bytes < HUGE_PAGE)
		return calloc(1, bytes);
	p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* Advice, before the first touch: where THP is off it fails, and
	 * nothing changes. (Huge pages need 2 MiB alignment; most of a big
	 * mapping gets it.) */
	(void)madvise(p, rounded, MADV_HUGEPAGE);
	return p;
}

static void table_free(void *p, size_t bytes)
{
	if (!p)
		return;
	if (bytes < HUGE_PAGE)
		free(p);
	else
		munmap(p, (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1));
}

/* The slots start one page into the mapping, so they are page aligned;
 * the cast goes through void * to say so. */
Session *session_file_slots(void *map)
{
	return (Session *)(void *)((uint8_t *)map + SESSION_FILE_HEADER);
}

/* The SESSIONS entry of a sessions memfd's directory. */
HandoffSection *session_file_section(void *map)
{
	return (HandoffSection *)(void *)((uint8_t *)map + HANDOFF_HEADER_SIZE);
}

/* The slots in the memfd, now with room for @cap: the file grows and is
 * mapped again whole; what it holds stays where it is. The section's
 * length grows after the file did, so that a crash in between leaves a
 * section inside the file. Return: the slots, or NULL. */
static Session *file_map(SessionTable *t, uint32_t cap)
{
	size_t bytes = SESSION_FILE_HEADER + (size_t)cap * sizeof(Session);
	bool has_header = t->file_section != NULL;
	void *p;

	if (ftruncate(t->fd, (off_t)bytes) < 0)
		return NULL;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (t->file)
		munmap(t->file, t->file_bytes);
	t->file = p;
	t->file_bytes = bytes;
	t->file_section = has_header ? session_file_section(p) : NULL;
	if (t->file_section)
		__atomic_store_n(&t->file_section->length, (uint64_t)cap * sizeof(Session),
				 __ATOMIC_RELEASE);
	return session_file_slots(p);
}

/* Double the capacity, or give a table with none @first slots. */
static int session_table_grow_from(SessionTable *t, uint32_t first)
{
	uint32_t cap = t->capacity ? t->capacity * 2 : first;
	size_t slot_bytes = (size_t)cap * sizeof(Session), index_bytes = (size_t)cap * sizeof(uint32_t);
	Session *slots;
	uint32_t *w, *c, *p;

	if (cap == 0 || cap > (1u << 30))
		return -ENOMEM;
	/* New arrays rather than realloc(): pages that mremap() moves would
	 * stay small. The copy is what realloc() often does anyway. */
	slots = t->fd >= 0 ? file_map(t, cap) : session_table_alloc_array(slot_bytes);
	w = session_table_alloc_array(index_bytes);
	c = session_table_alloc_array(index_bytes);
	p = session_table_alloc_array(index_bytes);
	if (!slots || !w || !c || !p) {
		if (t->fd < 0)
			table_free(slots, slot_bytes);
		table_free(w, index_bytes);
		table_free(c, index_bytes);
		table_free(p, index_bytes);
		return -ENOMEM;
	}
	if (t->fd < 0) {
		if (t->used)
			memcpy(slots, t->slots, (size_t)t->used * sizeof(Session));
		table_free(t->slots, (size_t)t->capacity * sizeof(Session));
	}
	table_free(t->wire_buckets, (size_t)t->capacity * sizeof(uint32_t));
	table_free(t->client_buckets, (size_t)t->capacity * sizeof(uint32_t));
	table_free(t->peer_buckets, (size_t)t->capacity * sizeof(uint32_t));
	t->slots = slots;
	t->wire_buckets = w;
	t->client_buckets = c;
	t->peer_buckets = p;
	t->capacity = cap;
	reindex_all(t);
	return 0;
}

int session_table_grow(SessionTable *t)
{
	return session_table_grow_from(t, INITIAL_CAPACITY);
}

static void fill_random(void *ctx, void *buf, size_t len);

SessionTable *session_table_new_empty(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], int fd)
{
	SessionTable *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->fd = fd;
	memcpy(t->timeouts_ms, timeouts_ms, SESSION_TIMER_COUNT * sizeof(uint32_t));
	/* A dead session's id stays reserved for as long as a closing one. */
	t->timeouts_ms[TIMER_TOMB] = timeouts_ms[SESSION_TIMER_CLOSING];
	t->max_tombs = DEFAULT_MAX_TOMBSTONES;
	t->random_fill = fill_random;
	return t;
}

SessionTable *session_table_new(const uint32_t timeouts_ms[SESSION_TIMER_COUNT])
{
	return session_table_new_sized(timeouts_ms, UINT32_MAX);
}

SessionTable *session_table_new_sized(const uint32_t timeouts_ms[SESSION_TIMER_COUNT],
				      uint32_t max_live)
{
	SessionTable *t = session_table_new_empty(timeouts_ms, -1);
	uint32_t first = MIN_CAPACITY;

	/* Room for every session the owner may hold, up to the usual start
	 * (a power of two: the capacity is also the bucket count). */
	while (first < max_live && first < INITIAL_CAPACITY)
		first *= 2;
	if (t && session_table_grow_from(t, first) < 0) {
		session_table_free(t);
		return NULL;
	}
	return t;
}

int session_table_new_in(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], int fd,
			 const SessionFileOwner *owner, SessionTable **ret)
{
	SessionTable *t = session_table_new_empty(timeouts_ms, fd);
	HandoffSection *sec;
	int r;

	if (!t)
		return -ENOMEM;
	errno = 0;
	if (ftruncate(fd, 0) < 0 || session_table_grow(t) < 0) {
		r = errno ? -errno : -ENOMEM;
		t->fd = -1; /* the caller's */
		session_table_free(t);
		return r;
	}
	sec = handoff_header_init(t->file, HANDOFF_KIND_SESSIONS, 1, owner->pair_id, owner->dev,
				  owner->port);
	((HandoffHeader *)t->file)->generation = owner->generation;
	*sec = (HandoffSection){ .type = HANDOFF_SECTION_SESSIONS,
				 .offset = SESSION_FILE_HEADER,
				 .length = (uint64_t)t->capacity * sizeof(Session),
				 .record_size = sizeof(Session),
				 .n_records = 0 };
	t->file_section = sec;
	*ret = t;
	return 0;
}

void session_table_free(SessionTable *t)
{
	if (!t)
		return;
	if (t->file)
		munmap(t->file, t->file_bytes);
	else
		table_free(t->slots, (size_t)t->capacity * sizeof(Session));
	table_free(t->wire_buckets, (size_t)t->capacity * sizeof(uint32_t));
	table_free(t->client_buckets, (size_t)t->capacity * sizeof(uint32_t));
	table_free(t->peer_buckets, (size_t)t->capacity * sizeof(uint32_t));
	if (t->random_ctx_free)
		t->random_ctx_free(t->random_ctx);
	free(t);
}

/* ---- timers ---- */

static void timer_unlink(SessionTable *t, uint32_t h)
{
	Session *s = slot(t, h);
	unsigned k = s->timer;

	if (k == SESSION_TIMER_NONE)
		return;
	if (s->timer_prev)
		slot(t, s->timer_prev)->timer_next = s->timer_next;
	else
		t->timer_head[k] = s->timer_next;
	if (s->timer_next)
		slot(t, s->timer_next)->timer_prev = s->timer_prev;
	else
		t->timer_tail[k] = s->timer_prev;
	s->timer_prev = s->timer_next = 0;
	s->timer = SESSION_TIMER_NONE;
}

/* Append @h to the list of timer @kind, due at @deadline_ms. Appending
 * keeps each list sorted: one duration per kind, and time only grows. */
void session_table_timer_link(SessionTable *t, uint32_t h, unsigned kind, uint32_t deadline_ms)
{
	Session *s = slot(t, h);

	s->timer = (uint8_t)kind;
	s->deadline_ms = deadline_ms;
	s->timer_next = 0;
	s->timer_prev = t->timer_tail[kind];
	if (s->timer_prev)
		slot(t, s->timer_prev)->timer_next = h;
	else
		t->timer_head[kind] = h;
	t->timer_tail[kind] = h;
}

void session_table_arm(SessionTable *t, uint32_t handle, SessionTimer kind, uint64_t now)
{
	Session *s = session_table_get(t, handle);

	if (!s)
		return;
	t->clock_ms = ms_ticks(now);
	timer_unlink(t, handle);
	if (kind == SESSION_TIMER_NONE || kind >= SESSION_TIMER_COUNT)
		return;
	session_table_timer_link(t, handle, kind, t->clock_ms + t->timeouts_ms[kind]);
}

uint64_t session_table_next_deadline(const SessionTable *t, uint64_t now)
{
	uint64_t best = UINT64_MAX;
	uint32_t now_ms = ms_ticks(now);

	for (unsigned k = 1; k < SESSION_TIMER_COUNT; k++) {
		uint32_t h = t->timer_head[k];
		int32_t left;
		uint64_t at;

		if (!h)
			continue;
		left = (int32_t)(slot(t, h)->deadline_ms - now_ms);
		at = left <= 0 ? now : (now / 1000u + (uint64_t)left) * 1000u;
		if (at < best)
			best = at;
	}
	return best;
}

static void session_table_remove_slot(SessionTable *t, SessionList *owner, uint32_t h,
				      bool keep_tomb);

/* Release the oldest tombstone. */
static void tomb_release_oldest(SessionTable *t)
{
	uint32_t h = t->timer_head[TIMER_TOMB];

	if (!h)
		return;
	timer_unlink(t, h);
	session_table_index_update(t, h, CHAIN_WIRE, false);
	t->tombs--;
	session_table_slot_release(t, h);
}

/* Release the tombstones whose closing period is over. */
static void tombs_expire(SessionTable *t, uint32_t now_ms)
{
	uint32_t h;

	while ((h = t->timer_head[TIMER_TOMB]) != 0 &&
	       (int32_t)(slot(t, h)->deadline_ms - now_ms) <= 0)
		tomb_release_oldest(t);
}

unsigned session_table_expire(SessionTable *t, uint64_t now, SessionOwnerFn owner_of,
			      void *userdata)
{
	uint32_t now_ms = ms_ticks(now);
	unsigned n = 0;

	t->clock_ms = now_ms;
	for (unsigned k = 1; k < SESSION_TIMER_COUNT; k++) {
		uint32_t h;

		while ((h = t->timer_head[k]) != 0 &&
		       (int32_t)(slot(t, h)->deadline_ms - now_ms) <= 0) {
			SessionList *owner = owner_of(userdata, slot(t, h)->client_id);
			/* Its timer ran out: any retransmission for it is long
			 * over, so its wire id needs no tombstone. */
			session_table_remove_slot(t, owner, h, false);
			n++;
		}
	}
	tombs_expire(t, now_ms);
	return n;
}

/* ---- life cycle ---- */

uint32_t session_table_add(SessionTable *t, SessionList *owner, uint32_t client_id,
			   SessionState state, uint64_t now)
{
	uint32_t h;
	Session *s;

	if (t->free_head) {
		h = t->free_head;
		t->free_head = slot(t, h)->next_wire;
	} else {
		if (t->used == t->capacity && session_table_grow(t) < 0)
			return 0;
		h = ++t->used;
		/* The slot past the old count is zero (the file grew by
		 * ftruncate, or it was released): counting it first is safe. */
		if (t->file_section)
			__atomic_store_n(&t->file_section->n_records, t->used, __ATOMIC_RELEASE);
	}
	s = slot(t, h);
	memset(s, 0, sizeof(*s));
	t->clock_ms = ms_ticks(now);
	s->client_id = client_id;
	s->created_ms = t->clock_ms;
	s->state = (uint8_t)state;
	s->flags = SESSION_F_LIVE;
	session_table_owner_link(t, owner, h);
	return h;
}

/* Put slot @h on the free list. */
void session_table_slot_release(SessionTable *t, uint32_t h)
{
	Session *s = slot(t, h);

	memset(s, 0, sizeof(*s));
	s->next_wire = t->free_head;
	t->free_head = h;
}

/* Take live session @h out of chain @c's index, if it is in it: its key
 * there is about to change, or the session goes. */
static void chain_unfile(SessionTable *t, uint32_t h, SessionChain c)
{
	Session *s = slot(t, h);

	if (s->flags & session_chain_flag(c)) {
		session_table_index_update(t, h, c, false);
		s->flags &= (uint8_t)~session_chain_flag(c);
	}
}

/* File live session @h in chain @c's index under its key now. */
static void chain_file(SessionTable *t, uint32_t h, SessionChain c)
{
	slot(t, h)->flags |= session_chain_flag(c);
	session_table_index_update(t, h, c, true);
}

/*
 * Take session @h out of every index, its timer and its owner's list, and
 * scrub it. With @keep_tomb, a session that had a wire id leaves it behind
 * as a tombstone (only the id, in the wire index) for a closing period.
 */
static void session_table_remove_slot(SessionTable *t, SessionList *owner, uint32_t h,
				      bool keep_tomb)
{
	Session *s = slot(t, h);
	uint32_t wire_id = s->wire_id;

	if (t->removed)
		t->removed(t->removed_userdata, s);
	timer_unlink(t, h);
	chain_unfile(t, h, CHAIN_CLIENT);
	chain_unfile(t, h, CHAIN_PEER);
	if (s->flags & SESSION_F_HALF_OPEN) {
		if (owner)
			owner->half_open--;
		t->half_open--;
	}
	if (owner) {
		if (s->owner_prev)
			slot(t, s->owner_prev)->owner_next = s->owner_next;
		else
			owner->head = s->owner_next;
		if (s->owner_next)
			slot(t, s->owner_next)->owner_prev = s->owner_prev;
		owner->count--;
	}
	t->live--;
	if (!(s->flags & SESSION_F_IN_WIRE)) {
		session_table_slot_release(t, h);
		return;
	}
	if (!keep_tomb || t->max_tombs == 0) {
		session_table_index_update(t, h, CHAIN_WIRE, false);
		session_table_slot_release(t, h);
		return;
	}
	/* Scrub the slot so nothing of this client survives in it; only the
	 * id stays, filed in the wire index again under the same key. */
	session_table_index_update(t, h, CHAIN_WIRE, false);
	memset(s, 0, sizeof(*s));
	s->wire_id = wire_id;
	s->flags = SESSION_F_IN_WIRE | SESSION_F_TOMB;
	session_table_index_update(t, h, CHAIN_WIRE, true);
	session_table_timer_link(t, h, TIMER_TOMB, t->clock_ms + t->timeouts_ms[TIMER_TOMB]);
	if (++t->tombs > t->max_tombs)
		tomb_release_oldest(t);
}

void session_table_remove(SessionTable *t, SessionList *owner, uint32_t handle)
{
	if (session_table_get(t, handle))
		session_table_remove_slot(t, owner, handle, true);
}

void session_table_remove_all(SessionTable *t, SessionList *owner)
{
	while (owner->head)
		session_table_remove(t, owner, owner->head);
}

/* ---- keys ---- */

/* Fill @buf from the kernel's CSPRNG. getrandom() without GRND_NONBLOCK
 * blocks only until the pool is first initialised during boot. A daemon
 * that cannot get random numbers must not hand out guessable ids. */
static void fill_random(void *ctx, void *buf, size_t len)
{
	uint8_t *p = buf;

	(void)ctx;
	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			abort();
		p += n;
		len -= (size_t)n;
	}
}

void session_table_set_random_source(SessionTable *t, SessionRandomFn fill, void *ctx,
				     GDestroyNotify ctx_free)
{
	if (t->random_ctx_free)
		t->random_ctx_free(t->random_ctx);
	t->random_fill = fill;
	t->random_ctx = ctx;
	t->random_ctx_free = ctx_free;
	t->random_left = 0;
}

/* The next candidate wire id, uniformly random. */
static uint32_t next_random_id(SessionTable *t)
{
	if (t->random_left == 0) {
		t->random_fill(t->random_ctx, t->random_pool, sizeof(t->random_pool));
		t->random_left = RANDOM_POOL;
	}
	return t->random_pool[--t->random_left];
}

/* Whether @wire_id belongs to a live session or a tombstone. */
static bool wire_id_taken(const SessionTable *t, uint32_t wire_id)
{
	uint32_t h = t->wire_buckets[bucket_of(t, hash_wire(wire_id))];

	for (; h; h = slot(t, h)->next_wire)
		if (slot(t, h)->wire_id == wire_id)
			return true;
	return false;
}

uint32_t session_table_assign_wire_id(SessionTable *t, uint32_t handle)
{
	Session *s = session_table_get(t, handle);
	uint32_t id;

	if (!s)
		return 0;
	if (s->flags & SESSION_F_IN_WIRE)
		return s->wire_id;
	tombs_expire(t, t->clock_ms);
	do
		id = next_random_id(t);
	while (id == 0 || wire_id_taken(t, id));
	s->wire_id = id;
	chain_file(t, handle, CHAIN_WIRE);
	return id;
}

uint32_t session_table_tombstone_count(const SessionTable *t)
{
	return t->tombs;
}

void session_table_set_max_tombstones(SessionTable *t, uint32_t max)
{
	t->max_tombs = max;
	while (t->tombs > t->max_tombs)
		tomb_release_oldest(t);
}

void session_table_set_half_open(SessionTable *t, SessionList *owner, uint32_t handle,
				 bool half_open)
{
	Session *s = session_table_get(t, handle);

	if (!s || !!(s->flags & SESSION_F_HALF_OPEN) == half_open)
		return;
	if (half_open) {
		s->flags |= SESSION_F_HALF_OPEN;
		owner->half_open++;
		t->half_open++;
	} else {
		s->flags &= (uint8_t)~SESSION_F_HALF_OPEN;
		owner->half_open--;
		t->half_open--;
	}
}

uint32_t session_table_half_open_count(const SessionTable *t)
{
	return t->half_open;
}

void session_table_set_remove_hook(SessionTable *t, SessionRemovedFn fn, void *userdata)
{
	t->removed = fn;
	t->removed_userdata = userdata;
}

void session_table_set_client_comm_id(SessionTable *t, uint32_t handle, uint32_t comm_id)
{
	Session *s = session_table_get(t, handle);

	if (!s)
		return;
	chain_unfile(t, handle, CHAIN_CLIENT);
	s->client_comm_id = comm_id;
	chain_file(t, handle, CHAIN_CLIENT);
}

void session_table_set_peer(SessionTable *t, uint32_t handle, uint32_t peer_comm_id,
			    const uint8_t local_gid[GID_LEN], const uint8_t peer_gid[GID_LEN])
{
	Session *s = session_table_get(t, handle);

	if (!s)
		return;
	chain_unfile(t, handle, CHAIN_PEER);
	s->peer_comm_id = peer_comm_id;
	if (local_gid != s->local_gid)
		memcpy(s->local_gid, local_gid, GID_LEN);
	if (peer_gid && peer_gid != s->peer_gid)
		memcpy(s->peer_gid, peer_gid, GID_LEN);
	chain_file(t, handle, CHAIN_PEER);
}

uint32_t session_table_lookup_wire_id(SessionTable *t, uint32_t wire_id)
{
	uint32_t h = t->wire_buckets[bucket_of(t, hash_wire(wire_id))];

	/* Ids are unique among live sessions and tombstones together. */
	for (; h; h = slot(t, h)->next_wire)
		if (slot(t, h)->wire_id == wire_id)
			return (slot(t, h)->flags & SESSION_F_LIVE) ? h : 0;
	return 0;
}

uint32_t session_table_lookup_client_comm_id(SessionTable *t, uint32_t client_id,
					     uint32_t comm_id)
{
	uint32_t h = t->client_buckets[bucket_of(t, hash_client(client_id, comm_id))];

	for (; h; h = slot(t, h)->next_client) {
		const Session *s = slot(t, h);
		if (s->client_id == client_id && s->client_comm_id == comm_id)
			return h;
	}
	return 0;
}

/*
 * Warming a batch: every bucket first, then every chain, then the whole
 * session each found (88 bytes: two or three cache lines, and the route
 * reads its GIDs at the end). The loads of one stage are independent, so
 * the CPU overlaps their misses and page walks; the real lookups later,
 * one between each two syscalls, find everything cached. Two stages keep
 * a lookup's dependent loads (bucket, then slot) from limiting how many
 * are in flight. __builtin_prefetch() did far less on this kind of VM: a
 * prefetch that misses the TLB is mostly dropped.
 */
#define WARM_CHUNK 256

static void warm_session(const SessionTable *t, uint32_t h)
{
	if (h) {
		const volatile uint8_t *first = (const uint8_t *)slot(t, h);

		(void)first[0];
		(void)first[sizeof(Session) / 2];
		(void)first[sizeof(Session) - 1];
	}
}

void session_table_warm_wire_ids(SessionTable *t, const uint32_t *wire_ids, unsigned n)
{
	uint32_t heads[WARM_CHUNK];

	for (unsigned base = 0; base < n; base += WARM_CHUNK) {
		unsigned k = MIN(n - base, WARM_CHUNK);

		for (unsigned i = 0; i < k; i++)
			heads[i] = t->wire_buckets[bucket_of(t, hash_wire(wire_ids[base + i]))];
		for (unsigned i = 0; i < k; i++) {
			uint32_t h = heads[i];

			while (h && slot(t, h)->wire_id != wire_ids[base + i])
				h = slot(t, h)->next_wire;
			warm_session(t, h);
		}
	}
}

void session_table_warm_client_comm_ids(SessionTable *t, const uint32_t *client_ids,
					const uint32_t *comm_ids, unsigned n, uint32_t *found)
{
	uint32_t heads[WARM_CHUNK];

	for (unsigned base = 0; base < n; base += WARM_CHUNK) {
		unsigned k = MIN(n - base, WARM_CHUNK);

		for (unsigned i = 0; i < k; i++)
			heads[i] = t->client_buckets[bucket_of(
				t, hash_client(client_ids[base + i], comm_ids[base + i]))];
		for (unsigned i = 0; i < k; i++) {
			uint32_t h = heads[i];

			while (h && (slot(t, h)->client_id != client_ids[base + i] ||
				     slot(t, h)->client_comm_id != comm_ids[base + i]))
				h = slot(t, h)->next_client;
			warm_session(t, h);
			if (found)
				found[base + i] = h;
		}
	}
}

uint32_t session_table_lookup_peer(SessionTable *t, uint32_t peer_comm_id,
				   const uint8_t local_gid[GID_LEN], const uint8_t *peer_gid)
{
	uint32_t h = t->peer_buckets[bucket_of(t, hash_peer(peer_comm_id, local_gid))];

	for (; h; h = slot(t, h)->next_peer) {
		const Session *s = slot(t, h);
		if (s->peer_comm_id == peer_comm_id && gid_equal(s->local_gid, local_gid) &&
		    (!peer_gid || gid_equal(s->peer_gid, peer_gid)))
			return h;
	}
	return 0;
}

void session_table_foreach(const SessionTable *t,
			   void (*fn)(void *userdata, const Session *s), void *userdata)
{
	for (uint32_t h = 1; h <= t->used; h++)
		if (slot(t, h)->flags & SESSION_F_LIVE)
			fn(userdata, slot(t, h));
}

uint32_t session_age_ms(const Session *s, uint64_t now)
{
	return ms_ticks(now) - s->created_ms;
}

int64_t session_timer_left_ms(const Session *s, uint64_t now)
{
	if (s->timer == SESSION_TIMER_NONE)
		return -1;
	int32_t left = (int32_t)(s->deadline_ms - ms_ticks(now));
	return left < 0 ? 0 : left;
}

const char *session_state_name(SessionState st)
{
	static const char *const names[SESSION_STATE_COUNT] = {
		[SESSION_REQ_SENT] = "req-sent",
		[SESSION_REQ_RCVD] = "req-rcvd",
		[SESSION_REP_SENT] = "rep-sent",
		[SESSION_REP_RCVD] = "rep-rcvd",
		[SESSION_ESTABLISHED] = "established",
		[SESSION_CLOSING] = "closing",
		[SESSION_SIDR_SENT] = "sidr-sent",
		[SESSION_SIDR_RCVD] = "sidr-rcvd",
	};
	return (unsigned)st < SESSION_STATE_COUNT ? names[st] : "?";
}

const char *session_timer_name(SessionTimer k)
{
	static const char *const names[SESSION_TIMER_COUNT] = {
		[SESSION_TIMER_NONE] = "none",
		[SESSION_TIMER_HANDSHAKE] = "handshake",
		[SESSION_TIMER_CLOSING] = "closing",
		[SESSION_TIMER_SIDR] = "sidr",
	};
	return (unsigned)k < SESSION_TIMER_COUNT ? names[k] : "?";
}
