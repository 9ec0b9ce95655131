/* SPDX-License-Identifier: MIT */
/*
 * Owns what the relay derives from its counter lists (relay-counters.h):
 * the reasons' names, the stable name of every counter word, and the
 * counter dump (SIGUSR1, and at exit).
 */
#include "relay-counters.h"

#include <glib.h>
#include <inttypes.h>
#include <stdio.h>

#include "handoff-format.h"
#include "relay-internal.h"

#define RELAY_REASON_NAME(id, wire, name) name,

static const char *const relay_rx_drop_names[RX_DROP_COUNT] = {
	RELAY_RX_DROPS(RELAY_REASON_NAME)
};

static const char *const relay_tx_reject_names[TX_REJECT_COUNT] = {
	RELAY_TX_REJECTS(RELAY_REASON_NAME)
};

const char *relay_rx_drop_name(RxDrop d)
{
	return (unsigned)d < RX_DROP_COUNT ? relay_rx_drop_names[d] : "?";
}

const char *relay_tx_reject_name(TxReject d)
{
	return (unsigned)d < TX_REJECT_COUNT ? relay_tx_reject_names[d] : "?";
}

/* ---- the counters' stable names ---- */

static char relay_counter_name_buf[RELAY_COUNTER_WORDS][HANDOFF_COUNTER_NAME_LEN];
static const char *relay_counter_name_list[RELAY_COUNTER_WORDS];
static GOnce relay_counter_names_once = G_ONCE_INIT;

/* Name the word at byte @offset of RelayCounters @prefix@name. */
static void relay_counter_name_set(size_t offset, const char *prefix, const char *name)
{
	size_t i = offset / sizeof(uint64_t);

	g_snprintf(relay_counter_name_buf[i], HANDOFF_COUNTER_NAME_LEN, "%s%s", prefix, name);
	relay_counter_name_list[i] = relay_counter_name_buf[i];
}

static gpointer relay_counter_names_build(gpointer unused)
{
	unsigned n;
	/* An attribute's name is the hand-off's, which never changes. */
	const HandoffWire *attrs = handoff_wire_table(HANDOFF_ENUM_CM_ATTR, &n);

	(void)unused;
	for (unsigned i = 0; i < CM_IDX_COUNT && i < n; i++) {
		relay_counter_name_set(offsetof(RelayCounters, tx) + i * 8u, "tx.", attrs[i].name);
		relay_counter_name_set(offsetof(RelayCounters, rx) + i * 8u, "rx.", attrs[i].name);
	}
	for (unsigned i = 0; i < RX_DROP_COUNT; i++)
		relay_counter_name_set(offsetof(RelayCounters, rx_drop) + i * 8u, "rx_drop.",
				       relay_rx_drop_names[i]);
	for (unsigned i = 0; i < TX_REJECT_COUNT; i++)
		relay_counter_name_set(offsetof(RelayCounters, tx_reject) + i * 8u, "tx_reject.",
				       relay_tx_reject_names[i]);
#define RELAY_COUNTER_NAME(field, metric, label, value, help)                                \
	relay_counter_name_set(offsetof(RelayCounters, field), "", #field);
	RELAY_COUNTERS(RELAY_COUNTER_NAME)
#undef RELAY_COUNTER_NAME
	return NULL;
}

const char *const *relay_counter_names(void)
{
	g_once(&relay_counter_names_once, relay_counter_names_build, NULL);
	return relay_counter_name_list;
}

/* ---- the dump ---- */

/* "  sessions created      12": a counter's name with ' ' for '_'. */
static void relay_dump_scalar(FILE *f, const char *name, uint64_t value)
{
	char label[HANDOFF_COUNTER_NAME_LEN];

	g_strlcpy(label, name, sizeof(label));
	g_strdelimit(label, "_", ' ');
	fprintf(f, "  %-28s %10" PRIu64 "\n", label, value);
}

void relay_dump_counters(const Relay *r, FILE *f)
{
	const RelayCounters *k = r->counters;

	fprintf(f, "counters for %s port %d:\n", r->port->dev, r->port->port);
	fprintf(f, "  %-16s %10s %10s\n", "attribute", "tx", "rx");
	for (int i = 0; i < CM_IDX_COUNT; i++)
		if (k->tx[i] || k->rx[i])
			fprintf(f, "  %-16s %10" PRIu64 " %10" PRIu64 "\n",
				cm_attr_index_name((CmAttrIndex)i), k->tx[i], k->rx[i]);
	for (int i = 0; i < RX_DROP_COUNT; i++)
		if (k->rx_drop[i])
			fprintf(f, "  rx dropped, %-16s %10" PRIu64 "\n", relay_rx_drop_names[i],
				k->rx_drop[i]);
	for (int i = 0; i < TX_REJECT_COUNT; i++)
		if (k->tx_reject[i])
			fprintf(f, "  tx refused, %-16s %10" PRIu64 "\n", relay_tx_reject_names[i],
				k->tx_reject[i]);
#define RELAY_COUNTER_DUMP(field, metric, label, value, help) relay_dump_scalar(f, #field, k->field);
	RELAY_COUNTERS(RELAY_COUNTER_DUMP)
#undef RELAY_COUNTER_DUMP
	relay_dump_scalar(f, "sessions_live", session_table_count(r->sessions));
}
