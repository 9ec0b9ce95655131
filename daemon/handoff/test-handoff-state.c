/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the hand-off format: the golden state files every release
 * wrote (tests/handoff-golden/) are taken over with every client, GID,
 * session and counter; a memfd of this build's layout is used in place,
 * another minor's is converted; enums and counters keep their wire names;
 * what does not hold up is dropped item by item, with exact error codes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "handoff-fd-store.h"
#include "handoff-format.h"
#include "handoff-sessions.h"
#include "handoff-state.h"
#include "vm-state.h"
#include "unit-test.h"

static const uint32_t timeouts[SESSION_TIMER_COUNT] = { 0, 30000, 10000, 10000 };

/* The writer's counters in these tests: a few, named as the relay names
 * its own (relay/test-relay-counters.c checks the relay's vector). */
enum { C_TX_REQ, C_TX_REP, C_RX_RTU, C_REQUESTS, N_TEST_COUNTERS };
static const char *const test_counters[N_TEST_COUNTERS] = {
	[C_TX_REQ] = "tx.REQ",
	[C_TX_REP] = "tx.REP",
	[C_RX_RTU] = "rx.RTU",
	[C_REQUESTS] = "requests",
};

static HandoffShape shape_of(uint32_t n_clients, uint32_t max_gids)
{
	return (HandoffShape){ .dev = "simA", .port = 1, .n_clients = n_clients,
			       .max_gids = max_gids, .n_owed = n_clients * 2,
			       .counter_names = test_counters, .n_counters = N_TEST_COUNTERS };
}

/* A memfd holding @len bytes of @data, @size bytes long. */
static int memfd_with(const void *data, size_t len, size_t size)
{
	int fd = memfd_create("test", MFD_CLOEXEC);

	g_assert_cmpint(fd, >=, 0);
	g_assert_cmpint(ftruncate(fd, (off_t)size), ==, 0);
	g_assert_cmpint(pwrite(fd, data, len, 0), ==, (ssize_t)len);
	return fd;
}

typedef struct Drops {
	unsigned n;
	char last[160];
} Drops;

static void on_dropped(void *userdata, const char *what, const char *why)
{
	Drops *d = userdata;

	d->n++;
	g_snprintf(d->last, sizeof(d->last), "%s: %s", what, why);
}

/* ---- records per minor ---- */

/*
 * The size of each record a minor of this major writes. A field added to
 * a record changes its size: without a new minor and its row here, this
 * fails (ARCHITECTURE.md, "A hand-off field").
 */
static const struct {
	unsigned minor;
	size_t session, client_fixed;
} minor_records[] = {
	{ 0, 92, 24 },
	{ 1, 100, 24 },
#ifdef RDMACM_MUX_HANDOFF_FUTURE
	{ 2, 104, 24 },
#endif
};

/* ---- the golden files ---- */

typedef struct Owners {
	SessionList lists[16];
} Owners;

static SessionList *owner_of(void *userdata, uint32_t client_id)
{
	Owners *o = userdata;

	return client_id < G_N_ELEMENTS(o->lists) ? &o->lists[client_id] : NULL;
}

static int golden_fd(const char *dir, const char *name, GHashTable *sizes)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	g_autofree char *data = NULL;
	gsize len;

	g_assert_true(g_file_get_contents(path, &data, &len, NULL));
	g_assert_true(g_hash_table_contains(sizes, name));
	return memfd_with(data, len, GPOINTER_TO_SIZE(g_hash_table_lookup(sizes, name)));
}

static HandoffClientSlot *slot_of(HandoffState *s, uint32_t id)
{
	for (uint32_t i = 0; i < handoff_state_slot_count(s); i++) {
		HandoffClientSlot *slot = handoff_state_slot(s, i);

		if (slot && slot->id == id)
			return slot;
	}
	return NULL;
}

/* Client @id's slot, which must be there. */
static HandoffClientSlot *slot_must(HandoffState *s, uint32_t id)
{
	HandoffClientSlot *slot = slot_of(s, id);

	if (!slot)
		g_error("client %u has no slot", id);
	return slot;
}

/* The minors' rows say what the releases wrote: a sessions memfd of this
 * major has its minor's record size (0.1.0's raw layout has none). */
static void check_golden_minor(int sessions_fd)
{
	uint8_t page[HANDOFF_PAGE];
	const HandoffHeader *h = (const HandoffHeader *)(const void *)page;
	const HandoffSection *e;

	g_assert_cmpint(pread(sessions_fd, page, sizeof(page), 0), ==, (ssize_t)sizeof(page));
	if (memcmp(h->magic, HANDOFF_MAGIC, sizeof(h->magic)) != 0)
		return;
	e = handoff_header_find(page, HANDOFF_SECTION_SESSIONS);
	g_assert_nonnull(e);
	g_assert_cmpuint(h->minor, <, G_N_ELEMENTS(minor_records));
	g_assert_cmpuint(e->record_size, ==, minor_records[h->minor].session);
}

/* The VMs the manifest's "vm NAME gids G,... [domain UUID]" lines list are exactly the
 * ones in the state's VMS section; a manifest without them (0.1.0's, or
 * written before VMs were kept) has no such section. */
static void check_golden_vms(int state_fd, char **lines)
{
	g_autoptr(GBytes) bytes = NULL;
	g_autoptr(VmState) vs = NULL;
	g_autoptr(GString) err = g_string_new(NULL);
	const char *why = NULL;
	unsigned listed = 0;
	int peeked;
	gsize len;
	const uint8_t *data;

	/* 0.1.0's raw layout is no state of this format: refused, no VMs. */
	peeked = handoff_state_vms_peek(state_fd, "simA", 1, &bytes, &why);
	for (char **l = lines; *l; l++) {
		g_auto(GStrv) w = g_strsplit(*l, " ", -1);
		g_auto(GStrv) gids = NULL;
		const VmStateVm *vm = NULL;

		if ((g_strv_length(w) != 4 && g_strv_length(w) != 6) || strcmp(w[0], "vm") != 0)
			continue;
		if (!vs) {
			if (peeked != 0)
				g_error("the state's VMs cannot be read: %s", why);
			g_assert_nonnull(bytes);
			data = g_bytes_get_data(bytes, &len);
			if (vm_state_read(data, len, &vs, err) != 0)
				g_error("the VMs' state does not read: %s", err->str);
			if (vs->dropped->len > 0)
				g_error("the VMs' state dropped: %s",
					(const char *)g_ptr_array_index(vs->dropped, 0));
		}
		for (guint i = 0; i < vs->vms->len && !vm; i++)
			if (strcmp(g_array_index(vs->vms, VmStateVm, i).spec.name, w[1]) == 0)
				vm = &g_array_index(vs->vms, VmStateVm, i);
		if (!vm)
			g_error("VM %s is not in the state", w[1]);
		gids = g_strsplit(w[3], ",", -1);
		g_assert_cmpuint(vm->spec.n_gids, ==, g_strv_length(gids));
		/* "domain UUID": the libvirt domain that made it (field 9). */
		if (g_strv_length(w) == 6) {
			g_assert_cmpstr(w[4], ==, "domain");
			g_assert_cmpstr(vm->spec.domain, ==, w[5]);
		} else {
			g_assert_cmpstr(vm->spec.domain, ==, "");
		}
		for (guint k = 0; gids[k]; k++) {
			uint8_t gid[16];

			g_assert_cmpint(inet_pton(AF_INET6, gids[k], gid), ==, 1);
			g_assert_cmpmem(vm->spec.gids[k], 16, gid, 16);
		}
		listed++;
	}
	if (listed == 0)
		g_assert_null(bytes);
	else
		g_assert_cmpuint(vs->vms->len, ==, listed);
}

/* Take over the files in @dir as the daemon does, and check every item
 * its manifest lists came through. */
static void check_golden(const char *dir)
{
	g_autofree char *man_path = g_build_filename(dir, "manifest", NULL);
	g_autofree char *man = NULL;
	g_auto(GStrv) lines = NULL;
	g_autoptr(GHashTable) sizes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	g_autoptr(GPtrArray) counter_names = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(HandoffState) s = NULL;
	HandoffShape shape = shape_of(8, 2);
	SessionFileOwner fo = { "simA", 1, 0 };
	SessionTable *t = NULL;
	Owners owners = { 0 };
	Drops drops = { 0 };
	const uint64_t *counters;
	unsigned clients = 0, sessions = 0;
	bool converted;
	int state_fd, sessions_fd, table_fd;

	/* The writer's --max-vms 2, where its version keeps VMs. */
	shape.vms_bytes = (uint32_t)vm_state_room(2);
	g_assert_true(g_file_get_contents(man_path, &man, NULL, NULL));
	lines = g_strsplit(man, "\n", -1);
	for (char **l = lines; *l; l++) {
		char name[32];
		size_t size;

		if (sscanf(*l, "size %31s %zu", name, &size) == 2)
			g_hash_table_insert(sizes, g_strdup(name), GSIZE_TO_POINTER(size));
		/* The counters the manifest lists are this reader's: taken
		 * over by name, whatever the writer's order. */
		if (sscanf(*l, "counter %31s", name) == 1)
			g_ptr_array_add(counter_names, g_strdup(name));
	}
	shape.counter_names = (const char *const *)counter_names->pdata;
	shape.n_counters = counter_names->len;
	g_assert_cmpuint(shape.n_counters, >, 0);
	state_fd = golden_fd(dir, "state", sizes);
	sessions_fd = golden_fd(dir, "sessions", sizes);
	check_golden_minor(sessions_fd);
	g_assert_cmpint(handoff_state_adopt(state_fd, &shape, on_dropped, &drops, &s, &converted,
					    NULL),
			==, 0);
	g_assert_cmpuint(drops.n, ==, 0);
	counters = handoff_state_counters(s);
	fo.pair_id = handoff_state_pair_id(s);
	g_assert_cmpint(handoff_sessions_adopt(sessions_fd, &fo, timeouts, 1000000, owner_of, NULL,
					       &owners, &t, &table_fd, NULL),
			==, 0);
	g_assert_null(session_table_check(t));
	for (char **l = lines; *l; l++) {
		g_auto(GStrv) w = g_strsplit(*l, " ", -1);
		guint n = g_strv_length(w);

		if (n == 6 && strcmp(w[0], "client") == 0) {
			uint32_t id = (uint32_t)strtoul(w[1], NULL, 10);
			HandoffClientSlot *slot = slot_must(s, id);
			g_auto(GStrv) gids = g_strsplit(w[5], ",", -1);

			g_assert_nonnull(slot);
			g_assert_cmpuint(!!(slot->flags & HANDOFF_CLIENT_F_HELLO), ==,
					 strtoul(w[3], NULL, 10));
			g_assert_cmpuint(slot->n_gids, ==, g_strv_length(gids));
			for (guint k = 0; gids[k]; k++) {
				uint8_t gid[16];

				g_assert_cmpint(inet_pton(AF_INET6, gids[k], gid), ==, 1);
				g_assert_cmpmem(slot->gids[k], 16, gid, 16);
			}
			clients++;
		} else if (n == 9 && strcmp(w[0], "session") == 0) {
			uint32_t client = (uint32_t)strtoul(w[2], NULL, 10);
			uint32_t comm = (uint32_t)strtoul(w[4], NULL, 16);
			uint32_t wire = (uint32_t)strtoul(w[6], NULL, 16);
			uint32_t h = session_table_lookup_client_comm_id(t, client, comm);
			Session *x = session_table_get(t, h);

			if (!x)
				g_error("no session of client %u comm 0x%x", client, comm);
			g_assert_cmpuint(x->wire_id, ==, wire);
			g_assert_cmpuint(session_table_lookup_wire_id(t, wire), ==, h);
			g_assert_cmpstr(session_state_name((SessionState)x->state), ==, w[8]);
			sessions++;
		} else if (n == 9 && strcmp(w[0], "peer-session") == 0) {
			uint8_t gid[16];
			uint32_t h;
			Session *x;

			g_assert_cmpint(inet_pton(AF_INET6, w[6], gid), ==, 1);
			h = session_table_lookup_peer(t, (uint32_t)strtoul(w[4], NULL, 16), gid,
						      NULL);
			x = session_table_get(t, h);
			if (!x)
				g_error("no peer session %s", *l);
			g_assert_cmpuint(x->client_id, ==, strtoul(w[2], NULL, 10));
			g_assert_cmpstr(session_state_name((SessionState)x->state), ==, w[8]);
			g_assert_true(x->flags & SESSION_F_HALF_OPEN);
			sessions++;
		} else if (n == 3 && strcmp(w[0], "counter") == 0) {
			guint k;

			g_assert_true(g_ptr_array_find_with_equal_func(counter_names, w[1], g_str_equal,
								       &k));
			g_assert_cmpuint(counters[k], ==, strtoull(w[2], NULL, 10));
		}
	}
	g_assert_cmpuint(clients, >=, 4);
	g_assert_cmpuint(sessions, ==, session_table_count(t));
	check_golden_vms(state_fd, lines);
	g_assert_cmpuint(owners.lists[4].half_open, ==, 1);
	session_table_free(t);
	if (table_fd != sessions_fd)
		close(table_fd);
	close(sessions_fd);
	close(state_fd);
}

/* Every release's files, and this tree's; the 0.1.0 ones must be there. */
UNIT_TEST("/handoff/golden", test_golden)
{
	g_autoptr(GDir) d = g_dir_open(GOLDEN_DIR, 0, NULL);
	const char *name;
	bool saw_010 = false;

	g_assert_nonnull(d);
	while ((name = g_dir_read_name(d))) {
		g_autofree char *dir = g_build_filename(GOLDEN_DIR, name, NULL);

		if (!g_file_test(dir, G_FILE_TEST_IS_DIR))
			continue;
		g_test_message("golden files of %s", name);
		check_golden(dir);
		saw_010 |= strcmp(name, "0.1.0") == 0;
	}
	g_assert_true(saw_010);
}

/* ---- wire numbers and names ---- */

/* Every enum value has a wire number and a name, none twice: a value added
 * without one, or a number reused, fails here. */
UNIT_TEST("/handoff/wire-tables", test_wire_tables)
{
	for (int e = 0; e < HANDOFF_ENUM_COUNT; e++) {
		unsigned n;
		const HandoffWire *t = handoff_wire_table((HandoffEnum)e, &n);

		g_assert_cmpuint(n, >, 0);
		for (unsigned i = 0; i < n; i++) {
			g_assert_nonnull(t[i].name);
			g_assert_cmpint(handoff_wire_to_enum((HandoffEnum)e, t[i].wire), ==, (int)i);
			/* Sessions store these two as they are: value is number. */
			if (e == HANDOFF_ENUM_SESSION_STATE || e == HANDOFF_ENUM_SESSION_TIMER)
				g_assert_cmpuint(t[i].wire, ==, i);
			for (unsigned j = 0; j < i; j++) {
				g_assert_cmpuint(t[i].wire, !=, t[j].wire);
				g_assert_cmpstr(t[i].name, !=, t[j].name);
			}
		}
		g_assert_cmpint(handoff_wire_to_enum((HandoffEnum)e, 0xdead), ==, -1);
	}
}

UNIT_TEST("/handoff/records-per-minor", test_records_per_minor)
{
	const size_t last = G_N_ELEMENTS(minor_records) - 1;

	g_assert_cmpuint(minor_records[last].minor, ==, HANDOFF_MINOR);
	g_assert_cmpuint(sizeof(Session), ==, minor_records[last].session);
	g_assert_cmpuint(offsetof(HandoffClientSlot, gids), ==, minor_records[last].client_fixed);
	for (size_t i = 1; i <= last; i++) {
		/* Records only grow, a minor at a time. */
		g_assert_cmpuint(minor_records[i].minor, ==, minor_records[i - 1].minor + 1);
		g_assert_cmpuint(minor_records[i].session, >=, minor_records[i - 1].session);
		g_assert_cmpuint(minor_records[i].client_fixed, >=, minor_records[i - 1].client_fixed);
	}
}

/* ---- in place, converted, refused ---- */

static void state_bytes(HandoffState *s, GByteArray *out)
{
	off_t size = lseek(handoff_state_fd(s), 0, SEEK_END);

	g_byte_array_set_size(out, (guint)size);
	g_assert_cmpint(pread(handoff_state_fd(s), out->data, (size_t)size, 0), ==, size);
}

UNIT_TEST("/handoff/in-place-and-converted", test_in_place_and_converted)
{
	HandoffShape shape = shape_of(4, 2), bigger = shape_of(6, 3);
	g_autoptr(HandoffState) s = NULL, u = NULL, v = NULL;
	const uint8_t gids[2][16] = { { 0xfe, 0x80, [15] = 1 }, { 0xfe, 0x80, [15] = 2 } };
	uint64_t *k;
	bool converted;
	int i;

	g_assert_cmpint(handoff_state_new(&shape, 77, &s), ==, 0);
	i = handoff_state_claim(s, 5);
	g_assert_cmpint(i, >=, 0);
	handoff_state_set_gids(s, i, gids, 2);
	handoff_state_set_hello(s, i, 0x3);
	k = handoff_state_counters(s);
	k[C_TX_REP] = 41;
	/* The same shape: in place, the same memfd. */
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &shape, NULL, NULL, &u, &converted,
					    NULL),
			==, 0);
	g_assert_false(converted);
	g_assert_cmpuint(handoff_state_pair_id(u), ==, 77);
	handoff_state_counters(u)[0] = 9;
	g_assert_cmpuint(k[0], ==, 9); /* one memfd: the writes are shared */
	/* Another shape: converted into a new memfd, by name and by field. */
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &bigger, NULL, NULL, &v,
					    &converted, NULL),
			==, 0);
	g_assert_true(converted);
	g_assert_cmpint(handoff_state_fd(v), !=, handoff_state_fd(s));
	g_assert_cmpuint(handoff_state_pair_id(v), ==, 77);
	g_assert_cmpuint(handoff_state_slot_count(v), ==, 6);
	g_assert_cmpuint(slot_must(v, 5)->n_gids, ==, 2);
	g_assert_cmpmem(slot_must(v, 5)->gids[1], 16, gids[1], 16);
	g_assert_cmpuint(slot_must(v, 5)->caps, ==, 0x3);
	g_assert_true(slot_must(v, 5)->flags & HANDOFF_CLIENT_F_HELLO);
	g_assert_cmpuint(handoff_state_counters(v)[C_TX_REP], ==, 41);
}

/* Counters go by name: a reader whose vector orders them otherwise, lacks
 * one and has one more converts, each value following its name. */
UNIT_TEST("/handoff/counters-by-name", test_counters_by_name)
{
	static const char *const other[] = { "requests", "rx.RTU", "tx.REP", "tx.NEW" };
	HandoffShape shape = shape_of(4, 2), reader = shape_of(4, 2);
	g_autoptr(HandoffState) s = NULL, u = NULL;
	uint64_t *k;
	bool converted;

	reader.counter_names = other;
	reader.n_counters = G_N_ELEMENTS(other);
	g_assert_cmpint(handoff_state_new(&shape, 3, &s), ==, 0);
	k = handoff_state_counters(s);
	k[C_TX_REQ] = 1;
	k[C_TX_REP] = 2;
	k[C_RX_RTU] = 3;
	k[C_REQUESTS] = 4;
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &reader, NULL, NULL, &u, &converted,
					    NULL),
			==, 0);
	g_assert_true(converted);
	k = handoff_state_counters(u);
	g_assert_cmpuint(k[0], ==, 4);
	g_assert_cmpuint(k[1], ==, 3);
	g_assert_cmpuint(k[2], ==, 2);
	g_assert_cmpuint(k[3], ==, 0);
}

/* The VMs' bytes, as the next process peeks them before it takes over. */
static GBytes *vms_peek(int fd, const HandoffShape *shape)
{
	GBytes *b = NULL;

	g_assert_cmpint(handoff_state_vms_peek(fd, shape->dev, shape->port, &b, NULL), ==, 0);
	return b;
}

static void assert_vms(int fd, const HandoffShape *shape, const char *want)
{
	g_autoptr(GBytes) b = vms_peek(fd, shape);
	const void *data;
	size_t len;

	if (!want) {
		g_assert_null(b);
		return;
	}
	g_assert_nonnull(b);
	data = g_bytes_get_data(b, &len);
	g_assert_cmpmem(data, len, want, strlen(want));
}

/* The VMs' state (HANDOFF_SECTION_VMS): kept twice, a rewrite never
 * leaves none, in place or converted it carries on, and a state without
 * the section (an older 2.0 writer's) reads as no VMs. */
UNIT_TEST("/handoff/vms", test_vms)
{
	HandoffShape shape = shape_of(4, 2), bigger = shape_of(4, 2), small = shape_of(4, 2);
	static const uint8_t big[65];
	g_autoptr(HandoffState) s = NULL, u = NULL, v = NULL, w = NULL, x = NULL, y = NULL;
	g_autoptr(GByteArray) img = g_byte_array_new();
	HandoffSection *dir, *e = NULL;
	HandoffCopy *copy;
	GBytes *none = NULL;
	Drops drops = { 0 };
	bool converted;
	int fd;

	shape.vms_bytes = 64;
	bigger.vms_bytes = 4096;
	small.vms_bytes = 0;
	g_assert_cmpint(handoff_state_new(&shape, 1, &s), ==, 0);
	assert_vms(handoff_state_fd(s), &shape, NULL);
	g_assert_cmpint(handoff_state_vms_write(s, "first", 5), ==, 0);
	assert_vms(handoff_state_fd(s), &shape, "first");
	g_assert_cmpint(handoff_state_vms_write(s, "second", 6), ==, 0);
	assert_vms(handoff_state_fd(s), &shape, "second");
	/* Past the room: refused, and the current copy stays. */
	g_assert_cmpint(handoff_state_vms_write(s, big, sizeof(big)), ==, -ENOSPC);
	assert_vms(handoff_state_fd(s), &shape, "second");
	g_assert_cmpint(handoff_state_vms_write(s, "third!", 6), ==, 0);
	/* Of another port: refused, as handoff_state_adopt() refuses it. */
	g_assert_cmpint(handoff_state_vms_peek(handoff_state_fd(s), "simA", 2, &none, NULL), ==,
			-EPROTO);
	g_assert_null(none);

	/* A rewrite cut short: the copy being written has sequence 0 until
	 * it is whole, so the other one is read. */
	state_bytes(s, img);
	dir = (HandoffSection *)(void *)(img->data + HANDOFF_HEADER_SIZE);
	for (uint32_t i = 0; i < ((HandoffHeader *)(void *)img->data)->n_sections; i++)
		if (dir[i].type == HANDOFF_SECTION_VMS)
			e = &dir[i];
	g_assert_nonnull(e);
	g_assert_cmpuint(e->n_records, ==, 2);
	g_assert_cmpuint(e->record_size, ==, sizeof(HandoffCopy) + 64);
	for (uint32_t i = 0; i < 2; i++) {
		copy = (HandoffCopy *)(void *)(img->data + e->offset + (size_t)i * e->record_size);
		if (memcmp(copy->bytes, "third!", 6) == 0) {
			copy->sequence = 0;
			memcpy(copy->bytes, "thXXX", 5);
		}
	}
	fd = memfd_with(img->data, img->len, img->len);
	assert_vms(fd, &shape, "second");
	close(fd);
	/* A copy whose length does not fit its record is not read. */
	for (uint32_t i = 0; i < 2; i++) {
		copy = (HandoffCopy *)(void *)(img->data + e->offset + (size_t)i * e->record_size);
		if (memcmp(copy->bytes, "second", 6) == 0)
			copy->length = e->record_size;
	}
	fd = memfd_with(img->data, img->len, img->len);
	assert_vms(fd, &shape, NULL);
	close(fd);

	/* A sequence at the end of its range (no writer gets there): the
	 * taker numbers it anew, and its writes count. */
	for (uint32_t i = 0; i < 2; i++) {
		copy = (HandoffCopy *)(void *)(img->data + e->offset + (size_t)i * e->record_size);
		copy->length = 6;
		copy->sequence = i ? UINT64_MAX : UINT64_MAX - 1;
		memcpy(copy->bytes, i ? "max..." : "max-1.", 6);
	}
	fd = memfd_with(img->data, img->len, img->len);
	assert_vms(fd, &shape, "max...");
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &y, &converted, NULL), ==, 0);
	g_assert_false(converted);
	assert_vms(fd, &shape, "max...");
	g_assert_cmpint(handoff_state_vms_write(y, "after", 5), ==, 0);
	assert_vms(fd, &shape, "after");
	close(fd);

	/* In place: the next process reads and writes on. */
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &shape, NULL, NULL, &u, &converted,
					    NULL),
			==, 0);
	g_assert_false(converted);
	g_assert_cmpint(handoff_state_vms_write(u, "fourth", 6), ==, 0);
	assert_vms(handoff_state_fd(s), &shape, "fourth");
	/* Another --max-vms: converted, the current copy carried over. */
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &bigger, on_dropped, &drops, &v,
					    &converted, NULL),
			==, 0);
	g_assert_true(converted);
	g_assert_cmpuint(drops.n, ==, 0);
	assert_vms(handoff_state_fd(v), &bigger, "fourth");
	g_assert_cmpint(handoff_state_vms_write(v, "fifth", 5), ==, 0);
	assert_vms(handoff_state_fd(v), &bigger, "fifth");
	/* A room too small for it: dropped, with a reason, and the rest stays. */
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &small, on_dropped, &drops, &w,
					    &converted, NULL),
			==, 0);
	g_assert_cmpuint(drops.n, ==, 1);
	g_assert_nonnull(strstr(drops.last, "the VMs' state"));
	assert_vms(handoff_state_fd(w), &small, NULL);

	/* A 2.0 state written before the section existed: an unknown type
	 * where it was. No VMs, and the rest converted. */
	state_bytes(s, img);
	dir = (HandoffSection *)(void *)(img->data + HANDOFF_HEADER_SIZE);
	for (uint32_t i = 0; i < ((HandoffHeader *)(void *)img->data)->n_sections; i++)
		if (dir[i].type == HANDOFF_SECTION_VMS)
			dir[i].type = 0x7777;
	fd = memfd_with(img->data, img->len, img->len);
	assert_vms(fd, &shape, NULL);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &x, &converted, NULL), ==, 0);
	g_assert_true(converted);
	assert_vms(handoff_state_fd(x), &shape, NULL);
	close(fd);
}

/* The caller keeps its fd whatever the answer (one owner per fd), and
 * each refusal has its own code. */
UNIT_TEST("/handoff/refused", test_refused)
{
	HandoffShape shape = shape_of(4, 2), other_port = shape_of(4, 2);
	g_autoptr(GByteArray) img = g_byte_array_new();
	g_autoptr(HandoffState) s = NULL;
	HandoffState *u = NULL;
	HandoffHeader *h;
	HandoffSection *dir;
	const char *why = NULL;
	bool converted;
	int fd;

	g_assert_cmpint(handoff_state_new(&shape, 1, &s), ==, 0);
	state_bytes(s, img);
	h = (HandoffHeader *)(void *)img->data;
	dir = (HandoffSection *)(void *)(img->data + HANDOFF_HEADER_SIZE);

	/* Not ours at all. */
	fd = memfd_with("garbage", 7, 8192);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &u, &converted, &why), ==,
			-EPROTO);
	g_assert_cmpint(fcntl(fd, F_GETFD), >=, 0);
	close(fd);
	/* Too short to be a state. */
	fd = memfd_with("RMUXHOFF", 8, 100);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &u, &converted, &why), ==,
			-EPROTO);
	close(fd);
	/* Another major. */
	h->major = HANDOFF_MAJOR + 1;
	fd = memfd_with(img->data, img->len, img->len);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &u, &converted, &why), ==,
			-EPROTO);
	g_assert_cmpstr(why, ==, "of another major version");
	g_assert_cmpint(fcntl(fd, F_GETFD), >=, 0);
	close(fd);
	h->major = HANDOFF_MAJOR;
	/* Another port. */
	other_port.port = 2;
	fd = memfd_with(img->data, img->len, img->len);
	g_assert_cmpint(handoff_state_adopt(fd, &other_port, NULL, NULL, &u, &converted, &why), ==,
			-EPROTO);
	close(fd);
	/* A section past the end of the memfd. */
	dir[0].length = img->len;
	fd = memfd_with(img->data, img->len, img->len);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &u, &converted, &why), ==,
			-EBADMSG);
	close(fd);
	/* Two sections on the same bytes. */
	dir[0].length = dir[1].length;
	dir[0].offset = dir[1].offset;
	fd = memfd_with(img->data, img->len, img->len);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &u, &converted, &why), ==,
			-EBADMSG);
	g_assert_cmpstr(why, ==, "two sections overlap");
	close(fd);
	/* A directory past the first page. */
	h->n_sections = 1000;
	fd = memfd_with(img->data, img->len, img->len);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &u, &converted, &why), ==,
			-EBADMSG);
	close(fd);
	g_assert_null(u);
}

/* A broken client goes alone: the others, and the counters, stay. */
UNIT_TEST("/handoff/item-by-item", test_item_by_item)
{
	HandoffShape shape = shape_of(4, 2);
	g_autoptr(HandoffState) s = NULL, u = NULL;
	const uint8_t good[1][16] = { { 0xfe, 0x80, [15] = 7 } };
	struct rdmacm_mux_msg req = { .hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ };
	Drops drops = { 0 };
	bool converted;
	int a, b;

	g_assert_cmpint(handoff_state_new(&shape, 1, &s), ==, 0);
	a = handoff_state_claim(s, 1);
	b = handoff_state_claim(s, 2);
	handoff_state_set_gids(s, a, good, 1);
	handoff_state_set_gids(s, b, good, 1);
	/* Client 2's GID is torn to zero, and it is owed an answer. */
	memset(handoff_state_slot(s, (uint32_t)b)->gids[0], 0, 16);
	g_assert_cmpint(handoff_state_owe(s, 2, 1, &req), >=, 0);
	g_assert_cmpint(handoff_state_owe(s, 1, 1, &req), >=, 0);
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &shape, on_dropped, &drops, &u,
					    &converted, NULL),
			==, 0);
	g_assert_cmpuint(drops.n, ==, 2); /* client 2, and the answer owed to it */
	g_assert_nonnull(slot_of(u, 1));
	g_assert_null(slot_of(u, 2));
}

/* Owed answers come back oldest first, once. */
UNIT_TEST("/handoff/owed", test_owed)
{
	HandoffShape shape = shape_of(2, 1);
	g_autoptr(HandoffState) s = NULL, u = NULL;
	g_autoptr(GArray) got = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	struct rdmacm_mux_msg req = { .hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ };
	bool converted;
	int i;

	g_assert_cmpint(handoff_state_new(&shape, 1, &s), ==, 0);
	g_assert_cmpint(handoff_state_claim(s, 3), >=, 0);
	req.umad_len = 30;
	g_assert_cmpint(handoff_state_owe(s, 3, 20, &req), >=, 0);
	req.umad_len = 10;
	i = handoff_state_owe(s, 3, 10, &req);
	g_assert_cmpint(i, >=, 0);
	/* Room for shape.n_owed (4) in all. */
	g_assert_cmpint(handoff_state_owe(s, 3, 30, &req), >=, 0);
	g_assert_cmpint(handoff_state_owe(s, 3, 40, &req), >=, 0);
	g_assert_cmpint(handoff_state_owe(s, 3, 50, &req), ==, -ENOSPC);
	handoff_state_owed_clear(s, i);
	handoff_state_owed_clear(s, i); /* twice is once */
	g_assert_cmpint(handoff_state_adopt(handoff_state_fd(s), &shape, NULL, NULL, &u, &converted,
					    NULL),
			==, 0);
	handoff_state_owed_take(u, 3, got);
	g_assert_cmpuint(got->len, ==, 3);
	g_assert_cmpuint(handoff_state_owed(u, (int)g_array_index(got, uint32_t, 0))->seq, ==, 20);
	g_assert_cmpuint(handoff_state_owed(u, (int)g_array_index(got, uint32_t, 2))->seq, ==, 40);
	handoff_state_owed_clear_client(u, 3);
	handoff_state_owed_take(u, 3, got);
	g_assert_cmpuint(got->len, ==, 0);
}

/*
 * A newer minor's state: its client records have a field more (the GIDs
 * after it), a counter and a section this build does not know. Converted:
 * the clients and known counters come through, the rest is left.
 */
UNIT_TEST("/handoff/newer-minor", test_newer_minor)
{
	enum { FIXED = 32, GIDS = 2, REC = FIXED + GIDS * 16, N = 3, NC = 2 };
	HandoffShape shape = shape_of(4, 2);
	g_autofree uint8_t *img = g_malloc0(3 * HANDOFF_PAGE);
	g_autoptr(HandoffState) u = NULL;
	HandoffSection *dir;
	uint8_t *rec, *names;
	uint64_t v;
	bool converted;
	int fd;

	dir = handoff_header_init(img, HANDOFF_KIND_STATE, 3, 5, "simA", 1);
	((HandoffHeader *)(void *)img)->minor = HANDOFF_MINOR + 7;
	dir[0] = (HandoffSection){ .type = 99, .offset = HANDOFF_PAGE, .length = 64 };
	dir[1] = (HandoffSection){ .type = HANDOFF_SECTION_CLIENTS, .offset = HANDOFF_PAGE + 64,
				   .length = N * REC, .record_size = REC, .n_records = N,
				   .arg0 = FIXED, .arg1 = GIDS };
	dir[2] = (HandoffSection){ .type = HANDOFF_SECTION_COUNTERS, .offset = 2 * HANDOFF_PAGE,
				   .length = 64 + NC * HANDOFF_COUNTER_NAME_LEN, .arg0 = NC };
	rec = img + HANDOFF_PAGE + 64 + REC; /* the second record */
	*(uint32_t *)(void *)rec = 9;			   /* id */
	*(uint32_t *)(void *)(rec + 4) = 0x1 | 0x100;	   /* HELLO, and a flag of the future */
	*(uint32_t *)(void *)(rec + 16) = 1;		   /* n_gids */
	*(uint32_t *)(void *)(rec + 24) = 0xabcd;	   /* the newer field */
	rec[FIXED] = 0xfe;				   /* its GID */
	rec[FIXED + 15] = 9;
	names = img + 2 * HANDOFF_PAGE + 64;
	strcpy((char *)names, "rx.RTU");
	strcpy((char *)names + HANDOFF_COUNTER_NAME_LEN, "rx_drop.of-the-future");
	v = 12;
	memcpy(img + 2 * HANDOFF_PAGE, &v, 8);
	memcpy(img + 2 * HANDOFF_PAGE + 8, &v, 8);
	fd = memfd_with(img, 3 * HANDOFF_PAGE, 3 * HANDOFF_PAGE);
	g_assert_cmpint(handoff_state_adopt(fd, &shape, NULL, NULL, &u, &converted, NULL), ==, 0);
	g_assert_true(converted);
	g_assert_nonnull(slot_of(u, 9));
	g_assert_cmpuint(slot_must(u, 9)->flags, ==, HANDOFF_CLIENT_F_HELLO);
	g_assert_cmpuint(slot_must(u, 9)->n_gids, ==, 1);
	g_assert_cmpuint(slot_must(u, 9)->gids[0][15], ==, 9);
	g_assert_cmpuint(handoff_state_counters(u)[C_RX_RTU], ==, 12);
	close(fd);
}

/* Session records of another size (a newer minor's, with a field more):
 * what this build knows of each comes through, checked as ever. */
UNIT_TEST("/handoff/session-records-of-another-size", test_session_records)
{
	enum { REC = sizeof(Session) + 8 };
	uint8_t recs[2][REC];
	Session s = { .wire_id = 0x1234, .client_comm_id = 7, .client_id = 3,
		      .state = SESSION_ESTABLISHED, .flags = SESSION_F_LIVE | SESSION_F_IN_WIRE |
							 SESSION_F_IN_CLIENT };
	SessionFileOwner fo = { "simA", 1, 1 };
	SessionTable *t = NULL;
	Owners owners = { 0 };
	int fd = memfd_create("s", MFD_CLOEXEC);

	memset(recs, 0xee, sizeof(recs));
	memcpy(recs[0], &s, sizeof(s));
	s.state = 0xee; /* a state of the future: this one goes */
	s.wire_id = 0x5678;
	memcpy(recs[1], &s, sizeof(s));
	g_assert_cmpint(session_table_import(timeouts, recs, REC, 2, fd, &fo, 1000000, owner_of, NULL,
					     &owners, NULL, &t),
			==, 0);
	g_assert_cmpuint(session_table_count(t), ==, 1);
	g_assert_cmpuint(session_table_lookup_wire_id(t, 0x1234), !=, 0);
	g_assert_null(session_table_check(t));
	session_table_free(t);
	close(fd);
}

/* The store's failures come back as errors, each its own (the caller
 * decides what a failed removal means: relay-handoff.c shuts the client's
 * socket down). */
UNIT_TEST("/handoff/fd-store-errors", test_fd_store_errors)
{
	int fd = memfd_create("x", MFD_CLOEXEC);

	g_unsetenv("NOTIFY_SOCKET");
	g_assert_false(fd_store_setup(true));
	g_assert_cmpint(fd_store_remove("client.1"), ==, 0); /* no store: nothing to do */
	g_assert_cmpint(fd_store_put("client.1", fd), ==, 0);
	g_setenv("NOTIFY_SOCKET", "/nonexistent/rdmacm-mux-test.sock", TRUE);
	g_assert_true(fd_store_setup(true));
	g_assert_cmpint(fd_store_remove("client.1"), ==, -ENOENT);
	g_assert_cmpint(fd_store_put("client.1", fd), ==, -ENOENT);
	g_unsetenv("NOTIFY_SOCKET");
	(void)fd_store_setup(false);
	close(fd);
}

UNIT_TEST_MAIN()
