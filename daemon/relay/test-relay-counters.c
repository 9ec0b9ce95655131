/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the counter lists (relay-counters.h): every RelayCounters
 * word has one stable name that fits the hand-off, where the lists say;
 * the reasons' wire numbers and names are unique; every counter the
 * golden hand-off files of past releases carry is still one of ours; the
 * metrics rows of one family are written as one family; and every CM
 * attribute is named wherever its counters are.
 */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "handoff-format.h"
#include "relay-counters.h"
#include "unit-test.h"
#include "vm-table.h"

/* The index of the counter named @name, or -1. */
static int counter_index(const char *name)
{
	const char *const *names = relay_counter_names();

	for (unsigned i = 0; i < RELAY_COUNTER_WORDS; i++)
		if (strcmp(names[i], name) == 0)
			return (int)i;
	return -1;
}

#define WORD(field) ((int)(offsetof(RelayCounters, field) / sizeof(uint64_t)))

UNIT_TEST("/relay-counters/names", test_names)
{
	const char *const *names = relay_counter_names();
	g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);

	for (unsigned i = 0; i < RELAY_COUNTER_WORDS; i++) {
		g_assert_nonnull(names[i]);
		g_assert_cmpuint(strlen(names[i]), >, 0);
		g_assert_cmpuint(strlen(names[i]), <, HANDOFF_COUNTER_NAME_LEN);
		if (!g_hash_table_add(seen, (gpointer)names[i]))
			g_error("the counter name %s twice", names[i]);
	}
	/* Each where the struct has it. */
	g_assert_cmpint(counter_index("tx.REQ"), ==, WORD(tx[CM_IDX_REQ]));
	g_assert_cmpint(counter_index("rx.other"), ==, WORD(rx[CM_IDX_OTHER]));
	g_assert_cmpint(counter_index("rx_drop.no-gid-owner"), ==, WORD(rx_drop[RX_DROP_NO_OWNER]));
	g_assert_cmpint(counter_index("tx_reject.hijack"), ==, WORD(tx_reject[TX_REJECT_HIJACK]));
	g_assert_cmpint(counter_index("requests"), ==, WORD(requests));
	g_assert_cmpint(counter_index("handoff_owed_answered"), ==, WORD(handoff_owed_answered));
	g_assert_cmpint(counter_index("no-such-counter"), ==, -1);
}

#define REASON_WIRE(id, wire, name) wire,
#define REASON_NAME(id, wire, name) name,

/* Wire numbers never 0 and never twice, names never twice, in a list. */
static void check_reasons(const uint32_t *wire, const char *const *name, unsigned n,
			  const char *(*name_of)(int))
{
	for (unsigned i = 0; i < n; i++) {
		g_assert_cmpuint(wire[i], >, 0);
		g_assert_cmpstr(name_of((int)i), ==, name[i]);
		for (unsigned j = 0; j < i; j++) {
			g_assert_cmpuint(wire[i], !=, wire[j]);
			g_assert_cmpstr(name[i], !=, name[j]);
		}
	}
	g_assert_cmpstr(name_of((int)n), ==, "?");
}

static const char *rx_drop_name(int i)
{
	return relay_rx_drop_name((RxDrop)i);
}

static const char *tx_reject_name(int i)
{
	return relay_tx_reject_name((TxReject)i);
}

UNIT_TEST("/relay-counters/reasons", test_reasons)
{
	static const uint32_t rx_wire[] = { RELAY_RX_DROPS(REASON_WIRE) };
	static const char *const rx_name[] = { RELAY_RX_DROPS(REASON_NAME) };
	static const uint32_t tx_wire[] = { RELAY_TX_REJECTS(REASON_WIRE) };
	static const char *const tx_name[] = { RELAY_TX_REJECTS(REASON_NAME) };

	G_STATIC_ASSERT(G_N_ELEMENTS(rx_wire) == RX_DROP_COUNT);
	G_STATIC_ASSERT(G_N_ELEMENTS(tx_wire) == TX_REJECT_COUNT);
	check_reasons(rx_wire, rx_name, RX_DROP_COUNT, rx_drop_name);
	check_reasons(tx_wire, tx_name, TX_REJECT_COUNT, tx_reject_name);
}

/* A release's hand-off carries counters by name: every name a golden
 * manifest lists must still be a counter of this build, or an upgrade
 * from that release would lose it. */
UNIT_TEST("/relay-counters/golden-names", test_golden_names)
{
	g_autoptr(GDir) d = g_dir_open(GOLDEN_DIR, 0, NULL);
	const char *release;
	unsigned checked = 0;

	g_assert_nonnull(d);
	while ((release = g_dir_read_name(d))) {
		g_autofree char *path = g_build_filename(GOLDEN_DIR, release, "manifest", NULL);
		g_autofree char *text = NULL;
		g_auto(GStrv) lines = NULL;

		if (!g_file_get_contents(path, &text, NULL, NULL))
			continue;
		lines = g_strsplit(text, "\n", -1);
		for (char **l = lines; *l; l++) {
			char name[64];

			if (sscanf(*l, "counter %63s", name) != 1)
				continue;
			if (counter_index(name) < 0)
				g_error("%s keeps the counter %s, which this build lost", release,
					name);
			checked++;
		}
	}
	g_assert_cmpuint(checked, >, 0);
}

typedef struct MetricRow {
	const char *metric, *label, *help;
} MetricRow;

#define METRIC_ROW(field, metric, label, value, help) { metric, label, help },

/* A family's rows are adjacent, its first carries the help and the others
 * none, and a family with a label has one on every row. */
UNIT_TEST("/relay-counters/metric-families", test_metric_families)
{
	static const MetricRow rows[] = { RELAY_COUNTERS(METRIC_ROW) };
	g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);

	for (size_t i = 0; i < G_N_ELEMENTS(rows); i++) {
		bool first = i == 0 || strcmp(rows[i].metric, rows[i - 1].metric) != 0;

		g_assert_true(g_str_has_prefix(rows[i].metric, "rdmacm_mux_"));
		g_assert_true(g_str_has_suffix(rows[i].metric, "_total"));
		if (first) {
			g_assert_nonnull(rows[i].help);
			if (!g_hash_table_add(done, (gpointer)rows[i].metric))
				g_error("the rows of %s are not adjacent", rows[i].metric);
		} else {
			g_assert_null(rows[i].help);
			g_assert_nonnull(rows[i].label);
			g_assert_cmpstr(rows[i].label, ==, rows[i - 1].label);
		}
	}
}

/* ARCHITECTURE.md's recipe for a CM attribute, where a table can say it:
 * its id maps to its index, and it has its codec name, the same stable
 * name in the hand-off (its tx./rx. counters'), and its VM counters' name
 * (the codec's in lower case). */
UNIT_TEST("/relay-counters/cm-attributes", test_cm_attributes)
{
	unsigned n;
	const HandoffWire *wire = handoff_wire_table(HANDOFF_ENUM_CM_ATTR, &n);

	g_assert_cmpuint(n, ==, CM_IDX_COUNT);
	for (int i = 0; i < CM_IDX_COUNT; i++) {
		const char *name = cm_attr_index_name((CmAttrIndex)i);
		g_autofree char *lower = g_ascii_strdown(name, -1);
		g_autofree char *tx = g_strdup_printf("tx.%s", name);

		g_assert_cmpstr(wire[i].name, ==, name);
		g_assert_cmpstr(vm_cm_attr_name((CmAttrIndex)i), ==, lower);
		g_assert_cmpint(counter_index(tx), ==, WORD(tx[i]));
		if (i == CM_IDX_OTHER)
			continue;
		g_assert_cmpint(cm_attr_to_index((uint16_t)(CM_ATTR_REQ + i)), ==, i);
		for (int j = 0; j < i; j++)
			g_assert_cmpstr(cm_attr_index_name((CmAttrIndex)j), !=, name);
	}
}

UNIT_TEST_MAIN()
