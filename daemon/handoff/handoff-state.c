/* SPDX-License-Identifier: MIT */
/*
 * Owns the layout of the clients' hand-off state in its memfd: the header
 * that says whose it is, the slots, the counters, and the checks a
 * successor makes before it believes any of it.
 */
#include "handoff-state.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define HANDOFF_MAGIC "RMUXSTAT"
#define HANDOFF_HEADER 4096u

typedef struct HandoffHeader {
	char magic[8];
	uint32_t version;
	uint32_t slot_size;
	uint32_t n_slots;
	uint32_t max_gids;
	uint32_t port;
	uint32_t counters_size;
	char dev[64];
} HandoffHeader;

struct HandoffState {
	int fd;
	void *map;
	size_t bytes;
	HandoffHeader *hdr;
	uint8_t *slots;
	size_t slot_size;
	uint32_t n_slots;
	uint32_t max_gids;
	uint32_t next_free; /* where handoff_state_claim() starts looking */
};

static size_t handoff_slot_size(uint32_t max_gids)
{
	return (sizeof(HandoffSlot) + (size_t)max_gids * 16 + 7) & ~(size_t)7;
}

static size_t handoff_bytes(uint32_t n_slots, size_t slot_size, size_t counters_size)
{
	return HANDOFF_HEADER + ((counters_size + 63) & ~(size_t)63) + (size_t)n_slots * slot_size;
}

static int handoff_map(HandoffState *s, size_t counters_size)
{
	s->map = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return -errno;
	}
	s->hdr = s->map;
	s->slots = (uint8_t *)s->map + HANDOFF_HEADER + ((counters_size + 63) & ~(size_t)63);
	return 0;
}

int handoff_state_new(const char *dev, int port, uint32_t n_slots, uint32_t max_gids,
		      size_t counters_size, HandoffState **ret)
{
	g_autoptr(HandoffState) s = g_new0(HandoffState, 1);
	int r;

	s->fd = memfd_create("rdmacm-mux-state", MFD_CLOEXEC);
	if (s->fd < 0)
		return -errno;
	s->slot_size = handoff_slot_size(max_gids);
	s->n_slots = n_slots;
	s->max_gids = max_gids;
	s->bytes = handoff_bytes(n_slots, s->slot_size, counters_size);
	if (ftruncate(s->fd, (off_t)s->bytes) < 0)
		return -errno;
	r = handoff_map(s, counters_size);
	if (r < 0)
		return r;
	memcpy(s->hdr->magic, HANDOFF_MAGIC, sizeof(s->hdr->magic));
	s->hdr->version = HANDOFF_STATE_VERSION;
	s->hdr->slot_size = (uint32_t)s->slot_size;
	s->hdr->n_slots = n_slots;
	s->hdr->max_gids = max_gids;
	s->hdr->port = (uint32_t)port;
	s->hdr->counters_size = (uint32_t)counters_size;
	g_strlcpy(s->hdr->dev, dev, sizeof(s->hdr->dev));
	*ret = g_steal_pointer(&s);
	return 0;
}

/* A slot a predecessor left: its fields in range and its GIDs distinct. */
static bool handoff_slot_holds_up(const HandoffSlot *slot, uint32_t max_gids)
{
	static const uint8_t zero[16];

	if (slot->n_gids > max_gids || (slot->flags & ~(HANDOFF_F_HELLO | HANDOFF_F_C1_LOGGED)))
		return false;
	for (uint32_t i = 0; i < slot->n_gids; i++) {
		if (memcmp(slot->gids[i], zero, 16) == 0)
			return false;
		for (uint32_t j = 0; j < i; j++)
			if (memcmp(slot->gids[i], slot->gids[j], 16) == 0)
				return false;
	}
	return true;
}

int handoff_state_adopt(int fd, const char *dev, int port, uint32_t max_gids,
			size_t counters_size, uint32_t *ret_cleared, HandoffState **ret)
{
	g_autoptr(HandoffState) s = g_new0(HandoffState, 1);
	HandoffHeader h;
	struct stat st;
	uint32_t cleared = 0;
	int r;

	s->fd = fd;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || fstat(fd, &st) < 0 ||
	    memcmp(h.magic, HANDOFF_MAGIC, sizeof(h.magic)) != 0) {
		log_warning("the hand-off state is not one of ours; starting clean");
		return -EPROTO;
	}
	if (h.version != HANDOFF_STATE_VERSION) {
		log_warning("the hand-off state is of version %u, this daemon reads version %u; "
			    "starting clean (clients must reconnect)",
			    h.version, HANDOFF_STATE_VERSION);
		return -EPROTO;
	}
	h.dev[sizeof(h.dev) - 1] = '\0';
	if (strcmp(h.dev, dev) != 0 || h.port != (uint32_t)port) {
		log_warning("the hand-off state is of %s port %u, not %s port %d; starting clean",
			    h.dev, h.port, dev, port);
		return -EPROTO;
	}
	if (h.counters_size != counters_size || h.max_gids == 0 || h.max_gids > 4096 ||
	    h.slot_size != handoff_slot_size(h.max_gids) || h.n_slots > (1u << 20) ||
	    (uint64_t)st.st_size < handoff_bytes(h.n_slots, h.slot_size, counters_size)) {
		log_warning("the hand-off state's layout does not hold up; starting clean");
		return -EPROTO;
	}
	s->slot_size = h.slot_size;
	s->n_slots = h.n_slots;
	s->max_gids = h.max_gids;
	s->bytes = handoff_bytes(h.n_slots, h.slot_size, counters_size);
	r = handoff_map(s, counters_size);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < s->n_slots; i++) {
		HandoffSlot *slot = handoff_state_slot(s, i);

		/* A client with more GIDs than this daemon allows keeps none
		 * past the limit: the REGs are refused as they would be now. */
		if (slot->id && slot->n_gids > max_gids && slot->n_gids <= s->max_gids)
			slot->n_gids = max_gids;
		if (slot->id && !handoff_slot_holds_up(slot, s->max_gids)) {
			memset(slot, 0, s->slot_size);
			cleared++;
		}
	}
	*ret_cleared = cleared;
	*ret = g_steal_pointer(&s);
	return 0;
}

void handoff_state_free(HandoffState *s)
{
	if (!s)
		return;
	if (s->map)
		munmap(s->map, s->bytes);
	if (s->fd >= 0)
		close(s->fd);
	g_free(s);
}

int handoff_state_fd(const HandoffState *s)
{
	return s->fd;
}

uint32_t handoff_state_slot_count(const HandoffState *s)
{
	return s->n_slots;
}

HandoffSlot *handoff_state_slot(HandoffState *s, uint32_t i)
{
	if (i >= s->n_slots)
		return NULL;
	return (HandoffSlot *)(void *)(s->slots + (size_t)i * s->slot_size);
}

void *handoff_state_counters(HandoffState *s)
{
	return (uint8_t *)s->map + HANDOFF_HEADER;
}

int handoff_state_claim(HandoffState *s, uint32_t id)
{
	for (uint32_t n = 0; n < s->n_slots; n++) {
		uint32_t i = (s->next_free + n) % s->n_slots;
		HandoffSlot *slot = handoff_state_slot(s, i);

		if (slot->id)
			continue;
		memset(slot, 0, s->slot_size);
		__atomic_store_n(&slot->id, id, __ATOMIC_RELEASE);
		s->next_free = (i + 1) % s->n_slots;
		return (int)i;
	}
	return -ENOSPC;
}

void handoff_state_release(HandoffState *s, int i)
{
	HandoffSlot *slot = handoff_state_slot(s, (uint32_t)i);

	if (slot)
		__atomic_store_n(&slot->id, 0, __ATOMIC_RELEASE);
}

void handoff_state_set_hello(HandoffState *s, int i, uint64_t caps)
{
	HandoffSlot *slot = handoff_state_slot(s, (uint32_t)i);

	if (!slot)
		return;
	slot->caps = caps;
	__atomic_store_n(&slot->flags, slot->flags | HANDOFF_F_HELLO, __ATOMIC_RELEASE);
}

void handoff_state_add_flags(HandoffState *s, int i, uint32_t flags)
{
	HandoffSlot *slot = handoff_state_slot(s, (uint32_t)i);

	if (slot)
		__atomic_fetch_or(&slot->flags, flags, __ATOMIC_RELEASE);
}

void handoff_state_set_gids(HandoffState *s, int i, const uint8_t (*gids)[16], uint32_t n)
{
	HandoffSlot *slot = handoff_state_slot(s, (uint32_t)i);

	if (!slot)
		return;
	n = MIN(n, s->max_gids);
	/* Shrink the count first, then write, then grow it: whatever instant
	 * a crash picks, the counted GIDs are ones the client holds. */
	__atomic_store_n(&slot->n_gids, MIN(slot->n_gids, n), __ATOMIC_RELEASE);
	for (uint32_t k = 0; k < n; k++) {
		if (memcmp(slot->gids[k], gids[k], 16) == 0)
			continue;
		/* A slot under the count changes: take it out first. */
		if (k < slot->n_gids)
			__atomic_store_n(&slot->n_gids, k, __ATOMIC_RELEASE);
		memcpy(slot->gids[k], gids[k], 16);
	}
	__atomic_store_n(&slot->n_gids, n, __ATOMIC_RELEASE);
}
