/* SPDX-License-Identifier: MIT */
/*
 * Owns the session table's file: taking over the table a predecessor kept
 * in a memfd in place (nothing in it trusted), importing the records of
 * another version's table into a new one, and writing a table that was
 * not kept in a memfd into one for a successor.
 */
#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-write.h"
#include "session-table-internal.h"
#include "util.h"

typedef struct TimerEntry {
	int32_t left; /* ms to the deadline from the time of the take-over */
	uint32_t handle;
} TimerEntry;

static int timer_entry_cmp(const void *a, const void *b)
{
	const TimerEntry *x = a, *y = b;

	return x->left < y->left ? -1 : x->left > y->left ? 1 : (x->handle > y->handle) - (x->handle < y->handle);
}

/* Whether slot @s holds a session this table could have written; if
 * not, *@why says what is wrong. */
static bool slot_plausible(const Session *s, const char **why)
{
	uint8_t in = s->flags & (SESSION_F_IN_WIRE | SESSION_F_IN_CLIENT | SESSION_F_IN_PEER);

	if (s->flags & ~(SESSION_F_IN_WIRE | SESSION_F_IN_CLIENT | SESSION_F_IN_PEER |
			 SESSION_F_REMOTE | SESSION_F_HALF_OPEN | SESSION_F_LIVE)) {
		*why = "flags this version does not know";
		return false;
	}
	/* Stored as wire numbers, which are the enums' values (asserted in
	 * handoff-format.c, whose tables have one entry per value): the
	 * range is the mapping, without a table walk per session. */
	if (s->state >= SESSION_STATE_COUNT || s->timer >= SESSION_TIMER_COUNT) {
		*why = "a state or timer this version does not know";
		return false;
	}
	if (((in & SESSION_F_IN_WIRE) && s->wire_id == 0) ||
	    ((in & SESSION_F_IN_CLIENT) && s->client_comm_id == 0) || s->client_id == 0) {
		*why = "an id of 0 where it needs one";
		return false;
	}
	if ((s->flags & SESSION_F_HALF_OPEN) && !(s->flags & SESSION_F_REMOTE)) {
		*why = "half-open but not started by a peer";
		return false;
	}
	return true;
}

/* Whether an index already holds the key @h would be filed under. */
static bool key_taken(SessionTable *t, uint32_t h, SessionChain c)
{
	const Session *s = slot(t, h);
	uint64_t hash;
	uint32_t *buckets = session_table_index_of(t, h, c, &hash);

	for (uint32_t o = buckets[bucket_of(t, hash)]; o; o = *session_table_chain_next(t, o, c)) {
		const Session *x = slot(t, o);

		if (c == CHAIN_WIRE && x->wire_id == s->wire_id)
			return true;
		if (c == CHAIN_CLIENT && x->client_id == s->client_id &&
		    x->client_comm_id == s->client_comm_id)
			return true;
	}
	return false;
}

/*
 * Take over the slots of @t (mapped, t->used set, indexes allocated and
 * empty): slot by slot, a session whose owner is back and whose fields and
 * keys hold up is kept, with its timer; a tombstone keeps its id;
 * anything else becomes a free slot. Return: the sessions dropped.
 */
static uint32_t adopt_slots(SessionTable *t, SessionOwnerFn owner_of, SessionDroppedFn dropped_fn,
			    void *userdata)
{
	GArray *timers[TIMER_LISTS];
	uint32_t dropped = 0, now_ms = t->clock_ms;

	for (unsigned k = 0; k < TIMER_LISTS; k++)
		timers[k] = g_array_new(FALSE, FALSE, sizeof(TimerEntry));
	for (uint32_t i = t->used; i >= 1; i--) {
		Session *s = slot(t, i);
		SessionList *owner = NULL;
		bool keep = false, tomb = false;
		const char *why = NULL;

		if (s->flags == (SESSION_F_IN_WIRE | SESSION_F_TOMB) && s->wire_id != 0) {
			tomb = !key_taken(t, i, CHAIN_WIRE);
		} else if ((s->flags & SESSION_F_LIVE) && slot_plausible(s, &why)) {
			owner = owner_of(userdata, s->client_id);
			if (!owner)
				why = "its client is not back";
			else if (((s->flags & SESSION_F_IN_WIRE) && key_taken(t, i, CHAIN_WIRE)) ||
				 ((s->flags & SESSION_F_IN_CLIENT) && key_taken(t, i, CHAIN_CLIENT)))
				why = "another session has its id";
			else
				keep = true;
		}
		if (tomb || keep) {
			TimerEntry e = { (int32_t)(s->deadline_ms - now_ms), i };
			unsigned kind = tomb ? TIMER_TOMB : s->timer;

			s->next_wire = s->next_client = s->next_peer = 0;
			s->timer_prev = s->timer_next = 0;
			s->owner_prev = s->owner_next = 0;
			s->timer = SESSION_TIMER_NONE;
			session_table_file_slot(t, i);
			if (kind != SESSION_TIMER_NONE)
				g_array_append_val(timers[kind], e);
		}
		if (tomb) {
			t->tombs++;
			continue;
		}
		if (!keep) {
			if (s->flags & SESSION_F_LIVE) {
				dropped++;
				if (dropped_fn)
					dropped_fn(userdata, s, why ? why : "it does not hold up");
			}
			session_table_slot_release(t, i);
			continue;
		}
		session_table_owner_link(t, owner, i);
		if (s->flags & SESSION_F_HALF_OPEN) {
			owner->half_open++;
			t->half_open++;
		}
	}
	/* Each timer list in deadline order, as arming them would have made it. */
	for (unsigned k = 0; k < TIMER_LISTS; k++) {
		if (timers[k]->len > 1)
			qsort(timers[k]->data, timers[k]->len, sizeof(TimerEntry), timer_entry_cmp);
		for (guint j = 0; j < timers[k]->len; j++) {
			uint32_t hh = g_array_index(timers[k], TimerEntry, j).handle;

			session_table_timer_link(t, hh, k, slot(t, hh)->deadline_ms);
		}
		g_array_free(timers[k], TRUE);
	}
	return dropped;
}

static bool alloc_indexes(SessionTable *t)
{
	size_t index_bytes = (size_t)t->capacity * sizeof(uint32_t);

	t->wire_buckets = session_table_alloc_array(index_bytes);
	t->client_buckets = session_table_alloc_array(index_bytes);
	t->peer_buckets = session_table_alloc_array(index_bytes);
	return t->wire_buckets && t->client_buckets && t->peer_buckets;
}

int session_table_adopt(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], int fd, uint64_t now,
			SessionOwnerFn owner_of, SessionDroppedFn dropped_fn, void *userdata,
			uint32_t *ret_dropped, SessionTable **ret)
{
	uint8_t page[HANDOFF_PAGE];
	const HandoffSection *sec;
	struct stat st;
	SessionTable *t;
	uint64_t cap;
	uint32_t dropped;
	void *map;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (pread(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page) ||
	    handoff_header_check(page, sizeof(page), (uint64_t)st.st_size, HANDOFF_KIND_SESSIONS,
				 NULL) < 0)
		return -EBADMSG;
	/* In place only as this build writes it: one section, the slots, at
	 * the directory's first entry (which growing the table updates). */
	sec = handoff_header_find(page, HANDOFF_SECTION_SESSIONS);
	if (((const HandoffHeader *)(const void *)page)->n_sections != 1 ||
	    sec != (const HandoffSection *)(const void *)(page + HANDOFF_HEADER_SIZE) ||
	    ((const HandoffHeader *)(const void *)page)->header_size != HANDOFF_HEADER_SIZE ||
	    sec->offset != SESSION_FILE_HEADER || sec->record_size != sizeof(Session))
		return -EBADMSG;
	cap = sec->length / sizeof(Session);
	if (cap < INITIAL_CAPACITY || cap > (1u << 30) || (cap & (cap - 1)) ||
	    sec->length != cap * sizeof(Session) || sec->n_records > cap)
		return -EBADMSG;
	t = session_table_new_empty(timeouts_ms, fd);
	if (!t)
		return -ENOMEM;
	t->file_bytes = SESSION_FILE_HEADER + (size_t)cap * sizeof(Session);
	map = mmap(NULL, t->file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		t->fd = -1;
		session_table_free(t);
		return -ENOMEM;
	}
	t->file = map;
	t->file_section = session_file_section(map);
	t->slots = session_file_slots(map);
	t->capacity = (uint32_t)cap;
	t->used = sec->n_records;
	t->clock_ms = ms_ticks(now);
	if (!alloc_indexes(t)) {
		t->fd = -1;
		session_table_free(t);
		return -ENOMEM;
	}
	dropped = adopt_slots(t, owner_of, dropped_fn, userdata);
	if (ret_dropped)
		*ret_dropped = dropped;
	*ret = t;
	return 0;
}

/* Make room for @n slots in a fresh table (capacity only grows). */
static int reserve_slots(SessionTable *t, uint32_t n)
{
	while (t->capacity < n) {
		uint32_t used = t->used;
		int r;

		/* grow() reindexes the used slots: none yet. */
		t->used = 0;
		r = session_table_grow(t);
		t->used = used;
		if (r < 0)
			return r;
	}
	return 0;
}

int session_table_import(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], const void *records,
			 uint32_t record_size, uint32_t n, int fd, const SessionFileOwner *owner,
			 uint64_t now, SessionOwnerFn owner_of, SessionDroppedFn dropped_fn,
			 void *userdata, uint32_t *ret_dropped, SessionTable **ret)
{
	SessionTable *t = NULL;
	size_t take = MIN((size_t)record_size, sizeof(Session));
	uint32_t dropped;
	int r;

	if (n > (1u << 30))
		return -E2BIG;
	r = session_table_new_in(timeouts_ms, fd, owner, &t);
	if (r < 0)
		return r;
	r = reserve_slots(t, n);
	if (r < 0) {
		t->fd = -1;
		session_table_free(t);
		return r;
	}
	for (uint32_t i = 0; i < n; i++)
		memcpy(&t->slots[i], (const uint8_t *)records + (size_t)i * record_size, take);
	t->used = n;
	t->clock_ms = ms_ticks(now);
	/* The indexes were made for no slot: start them over. */
	memset(t->wire_buckets, 0, (size_t)t->capacity * sizeof(uint32_t));
	memset(t->client_buckets, 0, (size_t)t->capacity * sizeof(uint32_t));
	memset(t->peer_buckets, 0, (size_t)t->capacity * sizeof(uint32_t));
	dropped = adopt_slots(t, owner_of, dropped_fn, userdata);
	__atomic_store_n(&t->file_section->n_records, t->used, __ATOMIC_RELEASE);
	if (ret_dropped)
		*ret_dropped = dropped;
	*ret = t;
	return 0;
}

int session_table_save(const SessionTable *t, int fd, const SessionFileOwner *owner)
{
	SessionTable *copy = NULL;
	int r = session_table_new_in(t->timeouts_ms, fd, owner, &copy);

	if (r < 0)
		return r;
	r = reserve_slots(copy, t->used);
	/* Written to the file, not through the mapping: the kernel fills the
	 * pages without a fault for each (the hand-off pause waits for it). */
	if (r == 0)
		r = fd_write_all(fd, t->slots, (size_t)t->used * sizeof(Session),
				 (off_t)SESSION_FILE_HEADER);
	if (r == 0 && t->used) {
		copy->used = t->used;
		copy->file_section->n_records = t->used;
	}
	copy->fd = -1; /* the caller's */
	session_table_free(copy);
	return r;
}
