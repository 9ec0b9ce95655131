/* SPDX-License-Identifier: MIT */
/* Unit tests of the VMs' state format: a round trip keeps every VM and
 * counter; a newer writer's records, fields and counters are skipped; a
 * VM that does not hold up is dropped alone; a header, major version or
 * checksum that does not hold up refuses the whole. */
#include <glib.h>
#include <string.h>

#include "util.h"
#include "vm-state.h"
#include "unit-test.h"

static VmEntry *add(VmTable *t, const char *name, const char *const *args, const char *source)
{
	g_autoptr(GString) err = g_string_new(NULL);
	VmEntry *vm = NULL;
	unsigned given;
	VmSpec s;

	g_assert_cmpint(vm_spec_parse_args(name, args, g_strv_length((char **)args), &s, &given, err),
			==, 0);
	if (vm_table_add(t, &s, source, err, &vm) < 0)
		g_error("%s", err->str);
	return vm;
}

static VmTable *sample_table(void)
{
	VmTable *t = vm_table_new(8);
	VmEntry *a = add(t, "web-1",
			 (const char *const[]){ "gid=fe80::1", "gid=::ffff:10.0.1.5",
						"prefix=2001:db8:1::/64", "owner=64055", "group=104",
						"mode=0600", NULL },
			 "/etc/rdmacm-mux/vms.d/web-1.conf");
	VmEntry *b = add(t, "db",
			 (const char *const[]){ "gid=fe80::2",
						"domain=9B5D6CF8-8E9A-4B8E-9D3E-3F6C2B1A7E01", NULL },
			 NULL);

	a->counters.cm[VM_CM_TX_MSGS][CM_IDX_REQ] = 12;
	a->counters.cm[VM_CM_RX_DUPLICATES][CM_IDX_DREQ] = 3;
	a->counters.gid_refused[VM_REFUSAL_OTHER_VM] = 5;
	b->counters.clients_refused = 7;
	vm_table_unassigned(t)->cm[VM_CM_TX_RETRIES][CM_IDX_SIDR_REQ] = 9;
	return t;
}

static VmState *read_ok(const uint8_t *data, size_t len)
{
	g_autoptr(GString) err = g_string_new(NULL);
	VmState *s = NULL;

	if (vm_state_read(data, len, &s, err) < 0)
		g_error("refused: %s", err->str);
	return s;
}

UNIT_TEST("/vm-state/round-trip", test_round_trip)
{
	g_autoptr(VmTable) t = sample_table();
	g_autoptr(GBytes) bytes = vm_state_write(t, 42, "1.2.3");
	size_t len;
	const uint8_t *p = g_bytes_get_data(bytes, &len);
	g_autoptr(VmState) s = read_ok(p, len);
	const VmStateVm *db, *web;

	g_assert_cmpuint(s->sequence, ==, 42);
	g_assert_cmpstr(s->writer, ==, "1.2.3");
	g_assert_cmpuint(s->dropped->len, ==, 0);
	g_assert_cmpuint(s->vms->len, ==, 2);
	db = &g_array_index(s->vms, VmStateVm, 0);
	web = &g_array_index(s->vms, VmStateVm, 1);
	g_assert_cmpstr(db->spec.name, ==, "db");
	g_assert_null(db->source);
	g_assert_cmpuint(db->counters.clients_refused, ==, 7);
	g_assert_cmpuint(db->spec.owner, ==, VM_ID_NONE);
	/* The domain that made it comes through (field 9), in lower case. */
	g_assert_cmpstr(db->spec.domain, ==, "9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01");
	g_assert_cmpstr(web->spec.domain, ==, "");
	g_assert_cmpstr(web->spec.name, ==, "web-1");
	g_assert_cmpstr(web->source, ==, "/etc/rdmacm-mux/vms.d/web-1.conf");
	g_assert_cmpmem(&web->spec, sizeof(web->spec), &vm_table_find(t, "web-1")->spec,
			sizeof(web->spec));
	g_assert_cmpmem(&web->counters, sizeof(web->counters), &vm_table_find(t, "web-1")->counters,
			sizeof(web->counters));
	g_assert_cmpuint(s->unassigned.cm[VM_CM_TX_RETRIES][CM_IDX_SIDR_REQ], ==, 9);
}

/* The byte offset of the first record, and a helper to append one. */
#define HEADER 48

static void put16(GByteArray *b, uint16_t v)
{
	uint8_t x[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	g_byte_array_append(b, x, 2);
}

static void put32(GByteArray *b, uint32_t v)
{
	uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	g_byte_array_append(b, x, 4);
}

static void field(GByteArray *p, uint16_t id, const void *data, size_t len)
{
	static const uint8_t zero[4];

	put16(p, id);
	put16(p, (uint16_t)len);
	g_byte_array_append(p, data, (guint)len);
	g_byte_array_append(p, zero, (guint)((4 - len % 4) % 4));
}

static void record(GByteArray *out, uint16_t type, const GByteArray *p)
{
	static const uint8_t zero[8];

	put16(out, type);
	put16(out, 0);
	put32(out, p->len);
	g_byte_array_append(out, p->data, p->len);
	g_byte_array_append(out, zero, (8 - p->len % 8) % 8);
}

static uint32_t fnv(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* A state of @records with a header that holds up, version @minor. */
static GByteArray *state_of(const GByteArray *records, uint16_t major, uint16_t minor)
{
	GByteArray *b = g_byte_array_new();
	uint8_t h[HEADER] = { 0 };

	memcpy(h, "RMUXVMST", 8);
	h[8] = (uint8_t)major;
	h[10] = (uint8_t)minor;
	h[12] = HEADER;
	h[16] = (uint8_t)records->len;
	h[17] = (uint8_t)(records->len >> 8);
	{
		uint32_t c = fnv(records->data, records->len);

		for (int i = 0; i < 4; i++)
			h[20 + i] = (uint8_t)(c >> (8 * i));
	}
	memcpy(h + 32, "9.9.9-future", 12);
	g_byte_array_append(b, h, HEADER);
	g_byte_array_append(b, records->data, records->len);
	return b;
}

static void vm_fields(GByteArray *p, const char *name, const char *gid)
{
	uint8_t g[GID_LEN];

	field(p, 1, name, strlen(name));
	if (gid) {
		g_assert_cmpint(gid_from_string(gid, g), ==, 0);
		field(p, 2, g, GID_LEN);
	}
}

UNIT_TEST("/vm-state/newer-writer", test_newer_writer)
{
	g_autoptr(GByteArray) recs = g_byte_array_new();
	g_autoptr(GByteArray) p = g_byte_array_new();
	g_autoptr(GByteArray) state = NULL;
	g_autoptr(VmState) s = NULL;
	uint8_t counter[8 + 32];

	/* A VM with a field from the future and a counter this reader does
	 * not know, between ones it does. */
	vm_fields(p, "a", "fe80::1");
	field(p, 99, "something new", 13);
	memset(counter, 0, sizeof(counter));
	counter[0] = 5;
	memcpy(counter + 8, "cm_tx_msgs.req", 14);
	field(p, 8, counter, 8 + 14);
	counter[0] = 6;
	memcpy(counter + 8, "cm_tx_flying.req", 16);
	field(p, 8, counter, 8 + 16);
	record(recs, 1, p);
	/* A record type from the future. */
	g_byte_array_set_size(p, 0);
	field(p, 1, "ignored", 7);
	record(recs, 77, p);
	state = state_of(recs, 1, 7);
	s = read_ok(state->data, state->len);
	g_assert_cmpuint(s->vms->len, ==, 1);
	g_assert_cmpuint(s->dropped->len, ==, 0);
	g_assert_cmpuint(g_array_index(s->vms, VmStateVm, 0).counters.cm[VM_CM_TX_MSGS][CM_IDX_REQ],
			 ==, 5);
	g_assert_cmpstr(s->writer, ==, "9.9.9-future");
}

/* A domain that is not one UUID drops its VM (kept, it would be a VM no
 * domain's hook could claim, or one a mangled owner could); a state of
 * minor 0, written before domains, reads with none. */
UNIT_TEST("/vm-state/domain", test_domain)
{
	static const char *const bad[] = { "9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e0",
					   "9b5d6cf8x8e9a-4b8e-9d3e-3f6c2b1a7e01",
					   "9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e0g", "" };
	const char *good = "9b5d6cf8-8e9a-4b8e-9d3e-3f6c2b1a7e01";

	for (size_t i = 0; i <= G_N_ELEMENTS(bad); i++) {
		g_autoptr(GByteArray) recs = g_byte_array_new();
		g_autoptr(GByteArray) p = g_byte_array_new();
		g_autoptr(GByteArray) state = NULL;
		g_autoptr(VmState) s = NULL;

		vm_fields(p, "a", "fe80::1");
		if (i < G_N_ELEMENTS(bad)) {
			field(p, 9, bad[i], strlen(bad[i]));
		} else {
			/* Two domains: no one owner either. */
			field(p, 9, good, strlen(good));
			field(p, 9, good, strlen(good));
		}
		record(recs, 1, p);
		state = state_of(recs, 1, 1);
		s = read_ok(state->data, state->len);
		g_assert_cmpuint(s->vms->len, ==, 0);
		g_assert_cmpuint(s->dropped->len, ==, 1);
		g_assert_nonnull(strstr(g_ptr_array_index(s->dropped, 0), "domain"));
	}
	{
		g_autoptr(GByteArray) recs = g_byte_array_new();
		g_autoptr(GByteArray) p = g_byte_array_new();
		g_autoptr(GByteArray) state = NULL;
		g_autoptr(VmState) s = NULL;

		vm_fields(p, "a", "fe80::1");
		record(recs, 1, p);
		state = state_of(recs, 1, 0);
		s = read_ok(state->data, state->len);
		g_assert_cmpuint(s->vms->len, ==, 1);
		g_assert_cmpstr(g_array_index(s->vms, VmStateVm, 0).spec.domain, ==, "");
	}
}

UNIT_TEST("/vm-state/item-by-item", test_item_by_item)
{
	static const char *const bad_names[] = { "", "-x", "a/b" };
	g_autoptr(GByteArray) recs = g_byte_array_new();
	g_autoptr(GByteArray) p = g_byte_array_new();
	g_autoptr(GByteArray) state = NULL;
	g_autoptr(VmState) s = NULL;
	uint8_t zero[GID_LEN] = { 0 }, prefix[GID_LEN + 1] = { 0x20, 0x01, [GID_LEN] = 4 };

	vm_fields(p, "good1", "fe80::1");
	record(recs, 1, p);
	for (size_t i = 0; i < G_N_ELEMENTS(bad_names); i++) {
		g_byte_array_set_size(p, 0);
		vm_fields(p, bad_names[i], "fe80::9");
		record(recs, 1, p);
	}
	/* No GID; a zero GID; a GID twice; two names; a prefix too short; a
	 * name seen before. */
	g_byte_array_set_size(p, 0);
	vm_fields(p, "nogid", NULL);
	record(recs, 1, p);
	g_byte_array_set_size(p, 0);
	vm_fields(p, "zero", NULL);
	field(p, 2, zero, GID_LEN);
	record(recs, 1, p);
	g_byte_array_set_size(p, 0);
	vm_fields(p, "twice", "fe80::5");
	vm_fields(p, "", NULL);
	record(recs, 1, p);
	g_byte_array_set_size(p, 0);
	vm_fields(p, "gid-twice", "fe80::6");
	vm_fields(p, "", NULL);
	g_byte_array_set_size(p, 0);
	vm_fields(p, "gid-twice", "fe80::6");
	{
		uint8_t g[GID_LEN];

		g_assert_cmpint(gid_from_string("fe80::6", g), ==, 0);
		field(p, 2, g, GID_LEN);
	}
	record(recs, 1, p);
	g_byte_array_set_size(p, 0);
	vm_fields(p, "short-prefix", NULL);
	field(p, 3, prefix, sizeof(prefix));
	record(recs, 1, p);
	g_byte_array_set_size(p, 0);
	vm_fields(p, "good1", "fe80::7");
	record(recs, 1, p);
	/* A field that runs past its record. */
	g_byte_array_set_size(p, 0);
	put16(p, 1);
	put16(p, 200);
	record(recs, 1, p);
	g_byte_array_set_size(p, 0);
	vm_fields(p, "good2", "fe80::2");
	record(recs, 1, p);
	state = state_of(recs, 1, 0);
	s = read_ok(state->data, state->len);
	g_assert_cmpuint(s->vms->len, ==, 2);
	g_assert_cmpstr(g_array_index(s->vms, VmStateVm, 0).spec.name, ==, "good1");
	g_assert_cmpstr(g_array_index(s->vms, VmStateVm, 1).spec.name, ==, "good2");
	g_assert_cmpuint(s->dropped->len, ==, 10);
	g_assert_nonnull(strstr(s->dropped->pdata[9], "runs past"));
	for (guint i = 0; i < s->dropped->len; i++)
		g_test_message("%s", (const char *)s->dropped->pdata[i]);
}

UNIT_TEST("/vm-state/refused", test_refused)
{
	g_autoptr(VmTable) t = sample_table();
	g_autoptr(GBytes) bytes = vm_state_write(t, 1, "x");
	size_t len;
	const uint8_t *good = g_bytes_get_data(bytes, &len);
	g_autofree uint8_t *copy = g_memdup2(good, len);
	g_autoptr(GString) err = g_string_new(NULL);
	VmState *s = NULL;

	/* Cut short anywhere: the checksum or the sizes tell. */
	for (size_t n = 0; n < len; n += 7) {
		g_string_truncate(err, 0);
		g_assert_cmpint(vm_state_read(good, n, &s, err), ==, -EPROTO);
		g_assert_null(s);
	}
	/* One bit flipped in a record: the checksum tells. */
	copy[HEADER + 20] ^= 0x10;
	g_assert_cmpint(vm_state_read(copy, len, &s, err), ==, -EPROTO);
	g_assert_nonnull(strstr(err->str, "checksum"));
	memcpy(copy, good, len);
	/* Another major version. */
	copy[8] = 2;
	g_string_truncate(err, 0);
	g_assert_cmpint(vm_state_read(copy, len, &s, err), ==, -EPROTO);
	g_assert_nonnull(strstr(err->str, "major version 2"));
	memcpy(copy, good, len);
	copy[0] = 'X';
	g_assert_cmpint(vm_state_read(copy, len, &s, err), ==, -EPROTO);
	g_assert_null(s);
}

UNIT_TEST("/vm-state/counter-names", test_counter_names)
{
	g_autoptr(GHashTable) names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	char name[48];
	size_t off, covered = 0;

	/* Every counter has a name of its own, and they cover VmCounters. */
	for (unsigned i = 0; vm_state_counter(i, name, &off); i++) {
		g_assert_false(g_hash_table_contains(names, name));
		g_hash_table_add(names, g_strdup(name));
		g_assert_cmpuint(off + 8, <=, sizeof(VmCounters));
		covered += 8;
	}
	g_assert_cmpuint(covered, ==, sizeof(VmCounters));
	g_assert_true(g_hash_table_contains(names, "cm_rx_duplicates.sidr_rep"));
	g_assert_true(g_hash_table_contains(names, "gid_refused.not-on-port"));
}

/* The biggest VMs there are fit vm_state_room(), which the hand-off
 * state reserves: every GID, prefix and field given, the longest source
 * kept, every counter at its widest. A longer source is not written. */
UNIT_TEST("/vm-state/room", test_room)
{
	const uint32_t n = 3;
	g_autoptr(VmTable) t = vm_table_new(n + 1);
	g_autofree char *source = g_strnfill(VM_STATE_SOURCE_MAX, 's');
	g_autofree char *too_long = g_strnfill(VM_STATE_SOURCE_MAX + 1, 'l');
	g_autoptr(GString) err = g_string_new(NULL);
	g_autoptr(GBytes) bytes = NULL, more = NULL;
	g_autoptr(VmState) back = NULL;
	VmEntry *first = NULL;
	size_t len;
	const uint8_t *p;

	source[0] = too_long[0] = '/';
	for (uint32_t v = 0; v < n; v++) {
		VmEntry *vm = NULL;
		char name[VM_NAME_MAX + 1];
		VmSpec spec;

		/* 48 characters, the most a name has. */
		g_snprintf(name, sizeof(name), "%c%047u", 'a' + v, v);
		vm_spec_init(&spec, name);
		for (uint32_t k = 0; k < VM_MAX_GIDS; k++) {
			memset(spec.gids[k], 0xee, GID_LEN);
			spec.gids[k][0] = 0xfe;
			spec.gids[k][1] = 0x80;
			spec.gids[k][13] = (uint8_t)v;
			spec.gids[k][15] = (uint8_t)(k + 1);
		}
		spec.n_gids = VM_MAX_GIDS;
		for (uint32_t k = 0; k < VM_MAX_PREFIXES; k++) {
			memset(&spec.prefixes[k], 0, sizeof(spec.prefixes[k]));
			spec.prefixes[k].gid[0] = (uint8_t)(0x10 + v * VM_MAX_PREFIXES + k);
			spec.prefixes[k].len = VM_PREFIX_MIN_LEN;
		}
		spec.n_prefixes = VM_MAX_PREFIXES;
		spec.owner = UINT32_MAX - 1;
		spec.group = UINT32_MAX - 1;
		spec.mode = 0777;
		if (vm_table_add(t, &spec, source, err, &vm) < 0)
			g_error("%s", err->str);
		memset(&vm->counters, 0xff, sizeof(vm->counters));
		if (!first)
			first = vm;
	}
	memset(vm_table_unassigned(t), 0xff, sizeof(VmCounters));
	bytes = vm_state_write(t, UINT64_MAX, "rdmacm-mux 99.99.99");
	g_assert_cmpuint(g_bytes_get_size(bytes), <=, vm_state_room(n));
	g_assert_cmpuint(g_bytes_get_size(bytes), >, vm_state_room(n - 1));

	/* A source past the bound: the VM is written without it. */
	g_assert_cmpuint(strlen(first->spec.name), ==, VM_NAME_MAX);
	g_free(first->source);
	first->source = g_steal_pointer(&too_long);
	more = vm_state_write(t, 1, "x");
	g_assert_cmpuint(g_bytes_get_size(more), <, g_bytes_get_size(bytes));
	p = g_bytes_get_data(more, &len);
	g_assert_cmpint(vm_state_read(p, len, &back, err), ==, 0);
	for (guint i = 0; i < back->dropped->len; i++)
		g_test_message("%s", (const char *)back->dropped->pdata[i]);
	g_assert_cmpuint(back->vms->len, ==, n);
	g_assert_null(g_array_index(back->vms, VmStateVm, 0).source);
	g_assert_cmpstr(g_array_index(back->vms, VmStateVm, 1).source, ==, source);
}

UNIT_TEST_MAIN()
