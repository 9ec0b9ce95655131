/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the hand-off reader: whatever a predecessor (or a crash, or a
 * bug) left in the "state" and "sessions" memfds, the successor must take
 * over what holds up and drop the rest, never crash: a reader that crashes
 * on its own state crash-loops every restart. Both memfds go through the
 * daemon's own path (handoff_state_vms_peek(), handoff_state_adopt(), then
 * handoff_sessions_adopt()), whichever format they claim (this one,
 * another minor, 0.1.0's raw layout), and what comes out must be
 * consistent: the VMs' state taken over is the one peeked, and is
 * written on from.
 *
 * Input: two little-endian u32, the state memfd's size and the sessions
 * memfd's (each capped at 4 MiB), then chunks that write into them: a u8
 * (bit 0: which memfd), a u32 offset, a u16 length and that many bytes.
 * A memfd is mostly zeros, so its seed is its non-zero runs: small enough
 * for the fuzzer to change every field.
 */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "handoff-sessions.h"
#include "handoff-state.h"
#include "relay-counters.h"
#include "log.h"

#define MAX_SIZE (4u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd_sized(uint32_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, MIN(size, MAX_SIZE)) < 0)
		abort();
	return fd;
}

/* Write the input's chunks into @fds (sizes @sizes). */
static void write_chunks(const uint8_t *data, size_t size, const int fds[2],
			 const uint32_t sizes[2])
{
	while (size >= 7) {
		unsigned which = data[0] & 1;
		uint32_t off, cap = MIN(sizes[which], MAX_SIZE);
		uint16_t len;

		memcpy(&off, data + 1, 4);
		memcpy(&len, data + 5, 2);
		data += 7;
		size -= 7;
		len = (uint16_t)MIN((size_t)len, size);
		if (off < cap && pwrite(fds[which], data, MIN((size_t)len, (size_t)(cap - off)), off) < 0)
			abort();
		data += len;
		size -= len;
	}
}

typedef struct Owners {
	SessionList lists[64];
	unsigned dropped;
} Owners;

static SessionList *owner_of(void *userdata, uint32_t client_id)
{
	Owners *o = userdata;

	return client_id < G_N_ELEMENTS(o->lists) ? &o->lists[client_id] : NULL;
}

static void session_dropped(void *userdata, const Session *s, const char *why)
{
	(void)s;
	if (!why)
		abort();
	((Owners *)userdata)->dropped++;
}

static void item_dropped(void *userdata, const char *what, const char *why)
{
	if (!what || !why)
		abort();
	(*(unsigned *)userdata)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t timeouts[SESSION_TIMER_COUNT] = { 0, 30000, 10000, 10000 };
	/* The relay's own counters: the daemon's reader, name for name. */
	HandoffShape shape = { .dev = "simA", .port = 1, .n_clients = 8, .max_gids = 2,
			       .n_owed = 16, .vms_bytes = 1024,
			       .counter_names = relay_counter_names(),
			       .n_counters = RELAY_COUNTER_WORDS };
	g_autoptr(GBytes) vms = NULL;
	g_autoptr(GArray) owed = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	HandoffState *s = NULL;
	SessionTable *t = NULL;
	Owners owners = { 0 };
	uint32_t sizes[2];
	unsigned drops = 0;
	bool converted;
	int fds[2], state_fd, sessions_fd, table_fd = -1;

	if (size < 8)
		return 0;
	log_setup(LOG_EMERG, false);
	memcpy(sizes, data, 8);
	fds[0] = state_fd = memfd_sized(sizes[0]);
	fds[1] = sessions_fd = memfd_sized(sizes[1]);
	write_chunks(data + 8, size - 8, fds, sizes);

	(void)handoff_state_vms_peek(state_fd, shape.dev, shape.port, &vms, NULL);
	if (vms && g_bytes_get_size(vms) > HANDOFF_VMS_MAX_BYTES)
		abort();
	if (handoff_state_adopt(state_fd, &shape, item_dropped, &drops, &s, &converted, NULL) == 0) {
		SessionFileOwner fo = { "simA", 1, handoff_state_pair_id(s) };
		const uint64_t *k = handoff_state_counters(s);
		g_autoptr(GBytes) kept = NULL, next = NULL;
		uint64_t sum = 0;

		/* The VMs' state taken over is the one peeked (unless it did
		 * not fit this shape's room), and a write goes on from it. */
		if (handoff_state_vms_peek(handoff_state_fd(s), shape.dev, shape.port, &kept,
					   NULL) < 0)
			abort();
		if (kept && (!vms || !g_bytes_equal(kept, vms)))
			abort();
		if (!kept && vms && g_bytes_get_size(vms) <= shape.vms_bytes)
			abort();
		if (handoff_state_vms_write(s, "next", 4) < 0 ||
		    handoff_state_vms_peek(handoff_state_fd(s), shape.dev, shape.port, &next,
					   NULL) < 0 ||
		    !next || g_bytes_get_size(next) != 4)
			abort();

		/* Every slot taken over holds up. */
		for (uint32_t i = 0; i < handoff_state_slot_count(s); i++) {
			const HandoffClientSlot *slot = handoff_state_slot(s, i);

			if (slot->id && slot->n_gids > shape.max_gids)
				abort();
			if (slot->id)
				handoff_state_owed_take(s, slot->id, owed);
		}
		for (unsigned i = 0; i < shape.n_counters; i++)
			sum += k[i];
		(void)sum;
		if (handoff_sessions_adopt(sessions_fd, &fo, timeouts, 5000000, owner_of,
					   session_dropped, &owners, &t, &table_fd, NULL) == 0) {
			if (session_table_check(t))
				abort();
			/* The table goes on working. */
			(void)session_table_expire(t, 3600000000ull, owner_of, &owners);
			if (session_table_check(t))
				abort();
			session_table_free(t);
			if (table_fd != sessions_fd)
				close(table_fd);
		}
		handoff_state_free(s);
	}
	close(state_fd);
	close(sessions_fd);
	return 0;
}
