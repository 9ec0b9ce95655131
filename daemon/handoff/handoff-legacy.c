/* SPDX-License-Identifier: MIT */
/*
 * Owns reading 0.1.0's raw hand-off layout (commit 1dad4e3): the structs
 * it wrote, frozen here as they were, and their rewriting into this
 * format, so that the rest of the reader knows one format only.
 */
#include "handoff-legacy.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/random.h>

#include "handoff-format.h"

#define LEGACY_STATE_MAGIC "RMUXSTAT"
#define LEGACY_SESSIONS_MAGIC "RMUXSESS"
#define LEGACY_VERSION 1u
#define LEGACY_PAGE 4096u
#define LEGACY_SESSION_SIZE 92u /* 0.1.0's sizeof(Session) */

/* 0.1.0's HandoffHeader. */
typedef struct LegacyStateHeader {
	char magic[8];
	uint32_t version;
	uint32_t slot_size;
	uint32_t n_slots;
	uint32_t max_gids;
	uint32_t port;
	uint32_t counters_size;
	char dev[64];
} LegacyStateHeader;
_Static_assert(sizeof(LegacyStateHeader) == 96, "0.1.0's state header is 96 bytes");

/* 0.1.0's SessionFileHeader. */
typedef struct LegacySessionsHeader {
	char magic[8];
	uint32_t version;
	uint32_t session_size;
	uint32_t capacity;
	uint32_t used;
} LegacySessionsHeader;

/* 0.1.0's RelayCounters, word by word, by this format's names. */
static const char *const legacy_counter_names[] = {
	"tx.REQ", "tx.MRA", "tx.REJ", "tx.REP", "tx.RTU", "tx.DREQ", "tx.DREP", "tx.SIDR_REQ",
	"tx.SIDR_REP", "tx.LAP", "tx.APR", "tx.other",
	"rx.REQ", "rx.MRA", "rx.REJ", "rx.REP", "rx.RTU", "rx.DREQ", "rx.DREP", "rx.SIDR_REQ",
	"rx.SIDR_REP", "rx.LAP", "rx.APR", "rx.other",
	"rx_drop.status-packet", "rx_drop.not-cm", "rx_drop.unsupported-attr", "rx_drop.malformed",
	"rx_drop.no-gid-owner", "rx_drop.no-session", "rx_drop.queue-full",
	"rx_drop.session-quota", "rx_drop.spoofed", "rx_drop.bad-state",
	"rx_drop.half-open-quota", "rx_drop.peer-quota",
	"tx_reject.bad-length", "tx_reject.not-cm", "tx_reject.unsupported-attr",
	"tx_reject.malformed", "tx_reject.foreign-sgid", "tx_reject.no-session",
	"tx_reject.hijack", "tx_reject.spoofed", "tx_reject.session-quota",
	"tx_reject.no-destination", "tx_reject.no-port-gid", "tx_reject.send-failed",
	"tx_reject.send-busy",
	"requests", "reg_ok", "reg_refused", "unreg_ok", "unreg_refused", "bad_frames",
	"truncated_frames", "clients_accepted", "clients_refused", "clients_dropped",
	"sessions_created", "sessions_expired", "recv_errors",
};
#define LEGACY_COUNTERS G_N_ELEMENTS(legacy_counter_names)
_Static_assert(G_N_ELEMENTS(legacy_counter_names) == 62, "0.1.0 had 62 counters");

static uint64_t legacy_slot_size(uint32_t max_gids)
{
	return ((uint64_t)24 + (uint64_t)max_gids * 16 + 7) & ~(uint64_t)7;
}

int handoff_legacy_state_image(const void *map, size_t len, const HandoffShape *shape,
			       uint8_t **ret, size_t *ret_len, const char **why)
{
	LegacyStateHeader h;
	uint64_t slots_off, slots_bytes, clients_off, counters_off, counters_len, total;
	bool counters_ok;
	HandoffSection *dir;
	uint8_t *img;
	uint64_t pair_id = 0;
	unsigned n = 0;

	if (len < sizeof(h)) {
		*why = "not 0.1.0's state";
		return -EPROTO;
	}
	memcpy(&h, map, sizeof(h));
	if (memcmp(h.magic, LEGACY_STATE_MAGIC, sizeof(h.magic)) != 0 || h.version != LEGACY_VERSION) {
		*why = "not 0.1.0's state";
		return -EPROTO;
	}
	h.dev[sizeof(h.dev) - 1] = '\0';
	if (strcmp(h.dev, shape->dev) != 0 || h.port != (uint32_t)shape->port) {
		*why = "it is of another device or port";
		return -EPROTO;
	}
	if (h.max_gids == 0 || h.max_gids > 4096 || h.slot_size != legacy_slot_size(h.max_gids) ||
	    h.n_slots > (1u << 20) || h.counters_size > (1u << 20)) {
		*why = "its layout (0.1.0's) does not hold up";
		return -EBADMSG;
	}
	slots_off = LEGACY_PAGE + (((uint64_t)h.counters_size + 63) & ~(uint64_t)63);
	slots_bytes = (uint64_t)h.n_slots * h.slot_size;
	if (len < slots_off + slots_bytes) {
		*why = "it is shorter than its header says (0.1.0's layout)";
		return -EBADMSG;
	}
	/* Counters of another size are not 0.1.0's: the clients are still
	 * good, the counters start over. */
	counters_ok = h.counters_size == LEGACY_COUNTERS * sizeof(uint64_t);

	clients_off = HANDOFF_PAGE;
	counters_off = HANDOFF_ALIGN64(clients_off + slots_bytes);
	counters_len = counters_ok ? HANDOFF_ALIGN64(LEGACY_COUNTERS * 8u) +
					     LEGACY_COUNTERS * (uint64_t)HANDOFF_COUNTER_NAME_LEN
				   : 0;
	total = counters_off + counters_len;
	img = g_malloc0(total);
	if (getrandom(&pair_id, sizeof(pair_id), GRND_NONBLOCK) != sizeof(pair_id))
		pair_id = (uint64_t)g_get_monotonic_time();
	dir = handoff_header_init(img, HANDOFF_KIND_STATE, counters_ok ? 2 : 1, pair_id, h.dev,
				  (int)h.port);
	/* The writer said who it was only by its layout. */
	g_strlcpy(((HandoffHeader *)(void *)img)->writer, "rdmacm-mux 0.1.0 (raw layout)",
		  sizeof(((HandoffHeader *)(void *)img)->writer));
	/* 0.1.0's slot is this format's client record: id, flags, caps,
	 * n_gids, reserved, GIDs from byte 24. */
	dir[n++] = (HandoffSection){ .type = HANDOFF_SECTION_CLIENTS,
				     .offset = clients_off,
				     .length = slots_bytes,
				     .record_size = h.slot_size,
				     .n_records = h.n_slots,
				     .arg0 = 24,
				     .arg1 = h.max_gids };
	memcpy(img + clients_off, (const uint8_t *)map + slots_off, slots_bytes);
	if (counters_ok) {
		uint8_t *names = img + counters_off + HANDOFF_ALIGN64(LEGACY_COUNTERS * 8u);

		dir[n++] = (HandoffSection){ .type = HANDOFF_SECTION_COUNTERS,
					     .offset = counters_off,
					     .length = counters_len,
					     .arg0 = LEGACY_COUNTERS };
		memcpy(img + counters_off, (const uint8_t *)map + LEGACY_PAGE, LEGACY_COUNTERS * 8u);
		for (unsigned i = 0; i < LEGACY_COUNTERS; i++)
			g_strlcpy((char *)names + (size_t)i * HANDOFF_COUNTER_NAME_LEN,
				  legacy_counter_names[i], HANDOFF_COUNTER_NAME_LEN);
	}
	*ret = img;
	*ret_len = (size_t)total;
	return 0;
}

int handoff_legacy_sessions(const void *map, size_t len, const void **records,
			    uint32_t *record_size, uint32_t *n, const char **why)
{
	LegacySessionsHeader h;

	if (len < sizeof(h)) {
		*why = "not 0.1.0's session table";
		return -EPROTO;
	}
	memcpy(&h, map, sizeof(h));
	if (memcmp(h.magic, LEGACY_SESSIONS_MAGIC, sizeof(h.magic)) != 0 ||
	    h.version != LEGACY_VERSION) {
		*why = "not 0.1.0's session table";
		return -EPROTO;
	}
	if (h.session_size != LEGACY_SESSION_SIZE || h.used > h.capacity ||
	    h.capacity > (1u << 30) ||
	    len < LEGACY_PAGE + (uint64_t)h.used * LEGACY_SESSION_SIZE) {
		*why = "its layout (0.1.0's) does not hold up";
		return -EBADMSG;
	}
	*records = (const uint8_t *)map + LEGACY_PAGE;
	*record_size = LEGACY_SESSION_SIZE;
	*n = h.used;
	return 0;
}
