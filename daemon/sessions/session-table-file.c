/* SPDX-License-Identifier: MIT */
/*
 * Owns the session table's file: taking over the table a predecessor kept
 * in a memfd (nothing in it trusted), and writing a table that was not
 * kept in one into a memfd for a successor.
 */
#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Whether slot @s holds a session this table could have written. */
static bool slot_plausible(const Session *s)
{
	uint8_t in = s->flags & (SESSION_F_IN_WIRE | SESSION_F_IN_CLIENT | SESSION_F_IN_PEER);

	if (s->flags & ~(SESSION_F_IN_WIRE | SESSION_F_IN_CLIENT | SESSION_F_IN_PEER |
			 SESSION_F_REMOTE | SESSION_F_HALF_OPEN | SESSION_F_LIVE))
		return false;
	if (s->state >= SESSION_STATE_COUNT || s->timer >= SESSION_TIMER_COUNT)
		return false;
	if (((in & SESSION_F_IN_WIRE) && s->wire_id == 0) ||
	    ((in & SESSION_F_IN_CLIENT) && s->client_comm_id == 0))
		return false;
	return !(s->flags & SESSION_F_HALF_OPEN) || (s->flags & SESSION_F_REMOTE);
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

int session_table_adopt(const uint32_t timeouts_ms[SESSION_TIMER_COUNT], int fd, uint64_t now,
			SessionOwnerFn owner_of, void *userdata, uint32_t *ret_dropped,
			SessionTable **ret)
{
	SessionFileHeader h;
	struct stat st;
	SessionTable *t;
	size_t index_bytes;
	GArray *timers[TIMER_LISTS];
	uint32_t dropped = 0, now_ms = ms_ticks(now);
	void *map;

	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || fstat(fd, &st) < 0)
		return -EINVAL;
	if (memcmp(h.magic, SESSION_FILE_MAGIC, sizeof(h.magic)) != 0 ||
	    h.version != SESSION_FILE_VERSION || h.session_size != sizeof(Session) ||
	    h.capacity < INITIAL_CAPACITY || h.capacity > (1u << 30) ||
	    (h.capacity & (h.capacity - 1)) || h.used > h.capacity ||
	    (uint64_t)st.st_size < SESSION_FILE_HEADER + (uint64_t)h.capacity * sizeof(Session))
		return -EINVAL;
	t = session_table_new_empty(timeouts_ms, fd);
	if (!t)
		return -ENOMEM;
	t->file_bytes = SESSION_FILE_HEADER + (size_t)h.capacity * sizeof(Session);
	map = mmap(NULL, t->file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	index_bytes = (size_t)h.capacity * sizeof(uint32_t);
	if (map == MAP_FAILED) {
		t->fd = -1;
		session_table_free(t);
		return -ENOMEM;
	}
	t->file = map;
	t->slots = session_file_slots(map);
	t->capacity = h.capacity;
	t->used = h.used;
	t->clock_ms = now_ms;
	t->wire_buckets = session_table_alloc_array(index_bytes);
	t->client_buckets = session_table_alloc_array(index_bytes);
	t->peer_buckets = session_table_alloc_array(index_bytes);
	if (!t->wire_buckets || !t->client_buckets || !t->peer_buckets) {
		t->fd = -1;
		session_table_free(t);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < TIMER_LISTS; k++)
		timers[k] = g_array_new(FALSE, FALSE, sizeof(TimerEntry));

	/* Slot by slot: a session whose owner is back and whose fields and
	 * keys hold up is kept, with its timer; a tombstone keeps its id;
	 * anything else becomes a free slot. */
	for (uint32_t i = t->used; i >= 1; i--) {
		Session *s = slot(t, i);
		SessionList *owner = NULL;
		bool keep = false, tomb = false;

		if (s->flags == (SESSION_F_IN_WIRE | SESSION_F_TOMB) && s->wire_id != 0) {
			tomb = !key_taken(t, i, CHAIN_WIRE);
		} else if ((s->flags & SESSION_F_LIVE) && slot_plausible(s)) {
			owner = owner_of(userdata, s->client_id);
			keep = owner && !((s->flags & SESSION_F_IN_WIRE) && key_taken(t, i, CHAIN_WIRE)) &&
			       !((s->flags & SESSION_F_IN_CLIENT) && key_taken(t, i, CHAIN_CLIENT));
		}
		if (tomb || keep) {
			TimerEntry e = { (int32_t)(s->deadline_ms - now_ms), i };
			unsigned kind = tomb ? TIMER_TOMB : s->timer;

			s->next_wire = s->next_client = s->next_peer = 0;
			s->timer_prev = s->timer_next = 0;
			s->owner_prev = s->owner_next = 0;
			s->timer = SESSION_TIMER_NONE;
			if (s->flags & SESSION_F_IN_WIRE)
				session_table_index_update(t, i, CHAIN_WIRE, true);
			if (s->flags & SESSION_F_IN_CLIENT)
				session_table_index_update(t, i, CHAIN_CLIENT, true);
			if (s->flags & SESSION_F_IN_PEER)
				session_table_index_update(t, i, CHAIN_PEER, true);
			if (kind != SESSION_TIMER_NONE)
				g_array_append_val(timers[kind], e);
		}
		if (tomb) {
			t->tombs++;
			continue;
		}
		if (!keep) {
			if (s->flags & SESSION_F_LIVE)
				dropped++;
			session_table_slot_release(t, i);
			continue;
		}
		s->owner_next = owner->head;
		if (owner->head)
			slot(t, owner->head)->owner_prev = i;
		owner->head = i;
		owner->count++;
		t->live++;
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
	if (ret_dropped)
		*ret_dropped = dropped;
	*ret = t;
	return 0;
}

int session_table_save(const SessionTable *t, int fd)
{
	SessionFileHeader h = { .version = SESSION_FILE_VERSION,
				.session_size = sizeof(Session),
				.capacity = MAX(t->capacity, INITIAL_CAPACITY),
				.used = t->used };
	size_t bytes = (size_t)t->used * sizeof(Session);
	const uint8_t *p = (const uint8_t *)t->slots;
	off_t off = SESSION_FILE_HEADER;
	int r;

	memcpy(h.magic, SESSION_FILE_MAGIC, sizeof(h.magic));
	if (ftruncate(fd, 0) < 0 ||
	    ftruncate(fd, (off_t)(SESSION_FILE_HEADER + (size_t)h.capacity * sizeof(Session))) < 0)
		return -errno;
	r = fd_write_all(fd, &h, sizeof(h), 0);
	return r < 0 ? r : fd_write_all(fd, p, bytes, off);
}
