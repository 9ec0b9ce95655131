/* SPDX-License-Identifier: MIT */
/*
 * Owns the "state" memfd of the hand-off format: its sections (clients,
 * counters, owed answers, the crash-loop guard; the VMs' two copies are
 * handoff-state-vms.c's), writing them in place, and taking a
 * predecessor's over, in place when it has exactly this build's layout,
 * else converted section by section into a fresh memfd.
 */
#include "handoff-state-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff-legacy.h"
#include "log.h"
#include "util.h"

/* ---- the sections ---- */

/*
 * Each section type of the state memfd: how big it is in a fresh state of
 * a shape, whether a predecessor's entry is exactly what this build would
 * write (then the memfd may be used in place), and how to carry a
 * predecessor's over into a fresh state. A new section adds an entry here;
 * the others do not change.
 */
typedef struct HandoffSectionOps {
	uint32_t type;
	const char *name;
	/* The fresh entry of @shape (offset and length set by the caller
	 * from the length filled in here). */
	void (*shape)(const HandoffShape *shape, HandoffSection *e);
	/* Carry @src (the predecessor's entry, its bytes at @bytes) into the
	 * fresh state @s. */
	void (*convert)(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			HandoffDroppedFn dropped, void *userdata);
} HandoffSectionOps;

static size_t client_record_size(uint32_t max_gids)
{
	return HANDOFF_ALIGN8(sizeof(HandoffClientSlot) + (size_t)max_gids * 16);
}

static size_t owed_record_size(void)
{
	return HANDOFF_ALIGN8(sizeof(HandoffOwed));
}

static void clients_shape(const HandoffShape *shape, HandoffSection *e)
{
	e->record_size = (uint32_t)client_record_size(shape->max_gids);
	e->n_records = shape->n_clients;
	e->arg0 = (uint32_t)sizeof(HandoffClientSlot);
	e->arg1 = shape->max_gids;
	e->length = (uint64_t)e->record_size * e->n_records;
}

static void counters_shape(const HandoffShape *shape, HandoffSection *e)
{
	uint32_t n = shape->n_counters;

	e->arg0 = n;
	e->length = HANDOFF_ALIGN64((uint64_t)n * 8) + (uint64_t)n * HANDOFF_COUNTER_NAME_LEN;
}

static void owed_shape(const HandoffShape *shape, HandoffSection *e)
{
	e->record_size = (uint32_t)owed_record_size();
	e->n_records = shape->n_owed;
	e->arg0 = (uint32_t)sizeof(struct rdmacm_mux_msg);
	e->arg1 = 0; /* the mark: records from it on were never used */
	e->length = (uint64_t)e->record_size * e->n_records;
}

static void guard_shape(const HandoffShape *shape, HandoffSection *e)
{
	(void)shape;
	e->length = sizeof(HandoffGuard);
}


static void clients_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			    HandoffDroppedFn dropped, void *userdata);
static void counters_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			     HandoffDroppedFn dropped, void *userdata);
static void owed_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			 HandoffDroppedFn dropped, void *userdata);
static void guard_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			  HandoffDroppedFn dropped, void *userdata);

static const HandoffSectionOps section_ops[] = {
	{ HANDOFF_SECTION_CLIENTS, "clients", clients_shape, clients_convert },
	{ HANDOFF_SECTION_COUNTERS, "counters", counters_shape, counters_convert },
	{ HANDOFF_SECTION_OWED, "owed answers", owed_shape, owed_convert },
	{ HANDOFF_SECTION_GUARD, "crash-loop guard", guard_shape, guard_convert },
	{ HANDOFF_SECTION_VMS, "VMs", handoff_vms_shape, handoff_vms_convert },
};
#define N_SECTIONS G_N_ELEMENTS(section_ops)

/* ---- mapping ---- */

static HandoffState *state_alloc(void)
{
	HandoffState *s = g_new0(HandoffState, 1);

	s->fd = -1;
	s->owed_free = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	return s;
}

/* Point @s at the sections of its mapping (the layout is @shape's). */
static void state_bind(HandoffState *s, const HandoffShape *shape)
{
	uint8_t *base = s->map;

	s->hdr = s->map;
	s->sec_clients = (HandoffSection *)handoff_header_find(s->map, HANDOFF_SECTION_CLIENTS);
	s->sec_counters = (HandoffSection *)handoff_header_find(s->map, HANDOFF_SECTION_COUNTERS);
	s->sec_owed = (HandoffSection *)handoff_header_find(s->map, HANDOFF_SECTION_OWED);
	s->sec_guard = (HandoffSection *)handoff_header_find(s->map, HANDOFF_SECTION_GUARD);
	s->clients = base + s->sec_clients->offset;
	s->client_size = s->sec_clients->record_size;
	s->n_clients = s->sec_clients->n_records;
	s->max_gids = s->sec_clients->arg1;
	s->owed = base + s->sec_owed->offset;
	s->owed_size = s->sec_owed->record_size;
	s->n_owed = s->sec_owed->n_records;
	s->guard = (HandoffGuard *)(void *)(base + s->sec_guard->offset);
	s->sec_vms = (HandoffSection *)handoff_header_find(s->map, HANDOFF_SECTION_VMS);
	s->counter_names = shape->counter_names;
	s->n_counters = shape->n_counters;
	g_strlcpy(s->writer, s->hdr->writer, sizeof(s->writer));
}

static HandoffOwed *owed_at(HandoffState *s, uint32_t i)
{
	return (HandoffOwed *)(void *)(s->owed + (size_t)i * s->owed_size);
}

/* The free owed records, from the records themselves: those below the
 * mark only. The rest were never written, and reading them would fault in
 * every page of a section sized for every client's worst case. */
static void state_owed_free_rebuild(HandoffState *s)
{
	s->owed_mark = MIN(s->sec_owed->arg1, s->n_owed);
	g_array_set_size(s->owed_free, 0);
	for (uint32_t i = s->owed_mark; i-- > 0;)
		if (!owed_at(s, i)->client_id)
			g_array_append_val(s->owed_free, i);
	s->owed_used = s->owed_mark - s->owed_free->len;
}

int handoff_state_new(const HandoffShape *shape, uint64_t pair_id, HandoffState **ret)
{
	g_autoptr(HandoffState) s = state_alloc();
	HandoffSection e[N_SECTIONS];
	HandoffSection *dir;
	uint64_t off = HANDOFF_PAGE;

	for (unsigned i = 0; i < N_SECTIONS; i++) {
		e[i] = (HandoffSection){ .type = section_ops[i].type };
		section_ops[i].shape(shape, &e[i]);
		e[i].offset = off;
		off = HANDOFF_ALIGN64(off + e[i].length);
	}
	if (off > HANDOFF_STATE_MAX_BYTES)
		return -E2BIG;
	s->fd = memfd_create("rdmacm-mux-state", MFD_CLOEXEC);
	if (s->fd < 0)
		return -errno;
	s->bytes = (size_t)off;
	if (ftruncate(s->fd, (off_t)s->bytes) < 0)
		return -errno;
	s->map = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return -errno;
	}
	dir = handoff_header_init(s->map, HANDOFF_KIND_STATE, N_SECTIONS, pair_id, shape->dev,
				  shape->port);
	memcpy(dir, e, sizeof(e));
	state_bind(s, shape);
	/* Counter names, once: a reader takes the values by them. */
	for (unsigned i = 0; i < shape->n_counters; i++)
		g_strlcpy((char *)s->map + s->sec_counters->offset +
				  HANDOFF_ALIGN64((uint64_t)s->sec_counters->arg0 * 8) +
				  (size_t)i * HANDOFF_COUNTER_NAME_LEN,
			  shape->counter_names[i], HANDOFF_COUNTER_NAME_LEN);
	state_owed_free_rebuild(s);
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
	g_array_free(s->owed_free, TRUE);
	g_free(s);
}

/* ---- checks ---- */

/* A client slot a predecessor left: its fields in range and its GIDs
 * distinct and not zero. */
static bool client_slot_holds_up(const HandoffClientSlot *slot, uint32_t max_gids,
				 const char **why)
{
	static const uint8_t zero[16];

	if (slot->n_gids > max_gids) {
		*why = "more GIDs than its slot holds";
		return false;
	}
	if (slot->flags & ~HANDOFF_CLIENT_F_KNOWN) {
		*why = "flags this version does not know";
		return false;
	}
	for (uint32_t i = 0; i < slot->n_gids; i++) {
		if (memcmp(slot->gids[i], zero, 16) == 0) {
			*why = "a GID of zero";
			return false;
		}
		for (uint32_t j = 0; j < i; j++)
			if (memcmp(slot->gids[i], slot->gids[j], 16) == 0) {
				*why = "a GID twice";
				return false;
			}
	}
	return true;
}

void handoff_state_drop(HandoffDroppedFn dropped, void *userdata, const char *what,
			const char *why)
{
	if (dropped)
		dropped(userdata, what, why);
}

/* Clear the slots and owed answers of @s that do not hold up (in place,
 * or after a conversion: the same rules). */
static void state_check_items(HandoffState *s, HandoffDroppedFn dropped, void *userdata)
{
	g_autoptr(GHashTable) ids = g_hash_table_new(g_direct_hash, g_direct_equal);

	for (uint32_t i = 0; i < s->n_clients; i++) {
		HandoffClientSlot *slot = handoff_state_slot(s, i);
		const char *why = NULL;
		char what[48];

		if (!slot->id)
			continue;
		if (g_hash_table_contains(ids, GUINT_TO_POINTER(slot->id)))
			why = "a second slot with its id";
		else if (!client_slot_holds_up(slot, s->max_gids, &why))
			;
		else {
			g_hash_table_add(ids, GUINT_TO_POINTER(slot->id));
			continue;
		}
		g_snprintf(what, sizeof(what), "client %u", slot->id);
		handoff_state_drop(dropped, userdata, what, why);
		memset(slot, 0, s->client_size);
	}
	for (uint32_t i = 0; i < MIN(s->sec_owed->arg1, s->n_owed); i++) {
		HandoffOwed *o = (HandoffOwed *)(void *)(s->owed + (size_t)i * s->owed_size);
		char what[64];

		if (!o->client_id)
			continue;
		if (g_hash_table_contains(ids, GUINT_TO_POINTER(o->client_id)) &&
		    o->frame.hdr.msg_type == RDMACM_MUX_MSG_TYPE_REQ)
			continue;
		g_snprintf(what, sizeof(what), "an answer owed to client %u", o->client_id);
		handoff_state_drop(dropped, userdata, what,
		     o->frame.hdr.msg_type != RDMACM_MUX_MSG_TYPE_REQ ? "its frame is not a request"
								       : "its client has no slot");
		memset(o, 0, s->owed_size);
	}
	state_owed_free_rebuild(s);
	handoff_vms_rebuild(s);
}

/* Whether the checked header @page describes exactly the layout this
 * build writes for @shape: then it may be used in place. */
static bool state_layout_is_ours(const void *page, const HandoffShape *shape)
{
	const HandoffHeader *h = page;
	uint64_t off = HANDOFF_PAGE;

	if (h->n_sections != N_SECTIONS || h->header_size != HANDOFF_HEADER_SIZE)
		return false;
	for (unsigned i = 0; i < N_SECTIONS; i++) {
		const HandoffSection *got = (const HandoffSection *)(const void *)((const uint8_t *)page + HANDOFF_HEADER_SIZE) + i;
		HandoffSection want = { .type = section_ops[i].type };

		section_ops[i].shape(shape, &want);
		want.offset = off;
		off = HANDOFF_ALIGN64(off + want.length);
		/* The owed answers' mark moves as they are written. */
		if (want.type == HANDOFF_SECTION_OWED)
			want.arg1 = got->arg1;
		if (memcmp(got, &want, sizeof(want)) != 0)
			return false;
	}
	return true;
}

/* Whether the counter names at @bytes (of the checked entry @e) are
 * @shape's, in its order. */
static bool counter_names_are_ours(const HandoffSection *e, const uint8_t *bytes,
				   const HandoffShape *shape)
{
	const uint8_t *names = bytes + HANDOFF_ALIGN64((uint64_t)e->arg0 * 8);

	if (e->arg0 != shape->n_counters)
		return false;
	for (unsigned i = 0; i < e->arg0; i++)
		if (strncmp((const char *)names + (size_t)i * HANDOFF_COUNTER_NAME_LEN,
			    shape->counter_names[i], HANDOFF_COUNTER_NAME_LEN) != 0)
			return false;
	return true;
}

/* The counter @s keeps under @name, or -1. */
static int counter_index(const HandoffState *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_counters; i++)
		if (strcmp(s->counter_names[i], name) == 0)
			return (int)i;
	return -1;
}

/* ---- converting ---- */

static void clients_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			    HandoffDroppedFn dropped, void *userdata)
{
	uint32_t next = 0;

	/* A record must hold its fixed part and the GIDs it says it has room
	 * for; its GIDs start at arg0. */
	if (src->record_size < sizeof(HandoffClientSlot) || src->arg0 < sizeof(HandoffClientSlot) ||
	    src->arg0 % 8 || src->arg1 > 65536 ||
	    (uint64_t)src->arg0 + (uint64_t)src->arg1 * 16 > src->record_size) {
		handoff_state_drop(dropped, userdata, "every client", "the clients section's records do not hold up");
		return;
	}
	for (uint32_t i = 0; i < src->n_records; i++) {
		const uint8_t *rec = bytes + (size_t)i * src->record_size;
		HandoffClientSlot from;
		HandoffClientSlot *to;
		char what[48];

		memcpy(&from, rec, sizeof(from));
		if (!from.id)
			continue;
		g_snprintf(what, sizeof(what), "client %u", from.id);
		if (from.n_gids > src->arg1) {
			handoff_state_drop(dropped, userdata, what, "more GIDs than its slot holds");
			continue;
		}
		if (next >= s->n_clients) {
			handoff_state_drop(dropped, userdata, what, "no slot left (--max-clients is lower now)");
			continue;
		}
		to = handoff_state_slot(s, next++);
		to->id = from.id;
		/* Flags a newer writer added are not ours to keep. */
		to->flags = from.flags & HANDOFF_CLIENT_F_KNOWN;
		to->caps = from.caps;
		/* GIDs past this daemon's limit are dropped, as a REG of them
		 * would be refused now. */
		to->n_gids = MIN(from.n_gids, s->max_gids);
		memcpy(to->gids, rec + src->arg0, (size_t)to->n_gids * 16);
	}
}

static void counters_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			     HandoffDroppedFn dropped, void *userdata)
{
	uint64_t *values = handoff_state_counters(s);
	const uint8_t *names = bytes + HANDOFF_ALIGN64((uint64_t)src->arg0 * 8);
	unsigned unknown = 0;

	if (HANDOFF_ALIGN64((uint64_t)src->arg0 * 8) + (uint64_t)src->arg0 * HANDOFF_COUNTER_NAME_LEN >
	    src->length) {
		handoff_state_drop(dropped, userdata, "the counters", "their section does not hold them");
		return;
	}
	for (uint32_t i = 0; i < src->arg0; i++) {
		char name[HANDOFF_COUNTER_NAME_LEN];
		uint64_t v;
		int k;

		memcpy(name, names + (size_t)i * HANDOFF_COUNTER_NAME_LEN, sizeof(name));
		if (!memchr(name, 0, sizeof(name)))
			continue;
		k = counter_index(s, name);
		if (k < 0) {
			unknown++; /* a counter this version does not have */
			continue;
		}
		memcpy(&v, bytes + (size_t)i * 8, 8);
		/* A name twice: the first one counts. */
		if (values[k] == 0)
			values[k] = v;
	}
	if (unknown)
		log_info("the predecessor kept %u counters this version does not have; they are "
			 "not carried on",
			 unknown);
}

static void owed_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			 HandoffDroppedFn dropped, void *userdata)
{
	uint32_t next = 0;

	if (src->arg0 != sizeof(struct rdmacm_mux_msg) ||
	    src->record_size < offsetof(HandoffOwed, frame) + src->arg0) {
		if (src->n_records)
			handoff_state_drop(dropped, userdata, "the owed answers",
			     "their frames are not of this build's size");
		return;
	}
	/* Below the source's mark (a 2.0 writer's arg1): the rest was never
	 * written. */
	for (uint32_t i = 0; i < MIN(src->arg1, src->n_records); i++) {
		const uint8_t *rec = bytes + (size_t)i * src->record_size;
		HandoffOwed *to;
		uint32_t id;

		memcpy(&id, rec, 4);
		if (!id)
			continue;
		if (next >= s->n_owed) {
			handoff_state_drop(dropped, userdata, "an owed answer", "no record left for it");
			continue;
		}
		to = (HandoffOwed *)(void *)(s->owed + (size_t)next++ * s->owed_size);
		memcpy(to, rec, sizeof(*to));
		to->reserved = 0;
	}
	s->sec_owed->arg1 = next;
}

static void guard_convert(HandoffState *s, const HandoffSection *src, const uint8_t *bytes,
			  HandoffDroppedFn dropped, void *userdata)
{
	(void)dropped;
	(void)userdata;
	if (src->length >= sizeof(uint32_t))
		memcpy(&s->guard->unsettled_starts, bytes, sizeof(uint32_t));
}


/* A fresh state of @shape holding what the checked image @img (@len
 * bytes, of this major) has that this build knows. */
static int state_convert(const uint8_t *img, size_t len, const HandoffShape *shape,
			 HandoffDroppedFn dropped, void *userdata, HandoffState **ret)
{
	const HandoffHeader *h = (const HandoffHeader *)(const void *)img;
	const HandoffSection *dir = (const HandoffSection *)(const void *)(img + h->header_size);
	g_autoptr(HandoffState) s = NULL;
	int r = handoff_state_new(shape, h->pair_id, &s);

	(void)len;
	if (r < 0)
		return r;
	for (unsigned k = 0; k < N_SECTIONS; k++) {
		const HandoffSection *e = NULL;

		for (uint32_t i = 0; i < h->n_sections && !e; i++)
			if (dir[i].type == section_ops[k].type)
				e = &dir[i];
		if (e)
			section_ops[k].convert(s, e, img + e->offset, dropped, userdata);
	}
	g_strlcpy(s->writer, h->writer, sizeof(s->writer));
	/* One conversion more than its source: of the two in the store, the
	 * successor reads this one. */
	s->hdr->generation = h->generation + 1;
	state_check_items(s, dropped, userdata);
	*ret = g_steal_pointer(&s);
	return 0;
}

/* Map the state memfd @fd read-only (*@ret, *@ret_bytes long; the caller
 * unmaps it). Return: 0, or a negative errno with *@why set. */
int handoff_state_map_ro(int fd, void **ret, size_t *ret_bytes, const char **why)
{
	struct stat st;
	void *ro;

	if (fstat(fd, &st) < 0) {
		*why = "it cannot be read";
		return -errno;
	}
	if (st.st_size < (off_t)HANDOFF_PAGE || (uint64_t)st.st_size > HANDOFF_STATE_MAX_BYTES) {
		*why = "its size is not one a state has";
		return -EPROTO;
	}
	ro = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (ro == MAP_FAILED) {
		*why = "it cannot be mapped";
		return -errno;
	}
	*ret = ro;
	*ret_bytes = (size_t)st.st_size;
	return 0;
}

/* ---- taking over ---- */

int handoff_state_adopt(int fd, const HandoffShape *shape, HandoffDroppedFn dropped,
			void *userdata, HandoffState **ret, bool *ret_converted, const char **why)
{
	g_autoptr(HandoffState) s = NULL;
	g_autofree uint8_t *legacy = NULL;
	const char *dummy;
	const HandoffHeader *h;
	const HandoffSection *counters;
	size_t legacy_len = 0;
	/* Set by handoff_state_map_ro() when it succeeds; optimising compilers
	 * cannot always see that across it. */
	void *ro = NULL;
	size_t bytes = 0;
	int r;

	if (!why)
		why = &dummy;
	*ret_converted = false;
	r = handoff_state_map_ro(fd, &ro, &bytes, why);
	if (r < 0)
		return r;
	/* 0.1.0's raw layout: rewritten into an image of this format first. */
	r = handoff_legacy_state_image(ro, bytes, shape, &legacy, &legacy_len, why);
	if (r == 0) {
		munmap(ro, bytes);
		r = state_convert(legacy, legacy_len, shape, dropped, userdata, &s);
		if (r < 0) {
			*why = "a fresh memfd could not be made";
			return r;
		}
		*ret_converted = true;
		*ret = g_steal_pointer(&s);
		return 0;
	}
	if (r != -EPROTO) {
		munmap(ro, bytes);
		return r;
	}
	r = handoff_header_check(ro, bytes, bytes, HANDOFF_KIND_STATE, why);
	if (r < 0) {
		munmap(ro, bytes);
		return r;
	}
	h = ro;
	if (strcmp(h->dev, shape->dev) != 0 || h->port != (uint32_t)shape->port) {
		*why = "it is of another device or port";
		munmap(ro, bytes);
		return -EPROTO;
	}
	counters = handoff_header_find(ro, HANDOFF_SECTION_COUNTERS);
	if (!state_layout_is_ours(ro, shape) || !counters ||
	    !counter_names_are_ours(counters, (const uint8_t *)ro + counters->offset, shape)) {
		r = state_convert(ro, bytes, shape, dropped, userdata, &s);
		munmap(ro, bytes);
		if (r < 0) {
			*why = "a fresh memfd could not be made";
			return r;
		}
		*ret_converted = true;
		*ret = g_steal_pointer(&s);
		return 0;
	}
	munmap(ro, bytes);
	/* Exactly ours: used in place, through a copy of the fd. */
	s = state_alloc();
	s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (s->fd < 0) {
		*why = "its fd cannot be copied";
		return -errno;
	}
	s->bytes = bytes;
	s->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		*why = "it cannot be mapped";
		return -errno;
	}
	state_bind(s, shape);
	state_check_items(s, dropped, userdata);
	*ret = g_steal_pointer(&s);
	return 0;
}

/* ---- accessors and in-place writes ---- */

int handoff_state_fd(const HandoffState *s)
{
	return s->fd;
}

uint64_t handoff_state_pair_id(const HandoffState *s)
{
	return s->hdr->pair_id;
}

const char *handoff_state_writer(const HandoffState *s)
{
	return s->writer;
}

uint32_t handoff_state_slot_count(const HandoffState *s)
{
	return s->n_clients;
}

HandoffClientSlot *handoff_state_slot(HandoffState *s, uint32_t i)
{
	if (i >= s->n_clients)
		return NULL;
	return (HandoffClientSlot *)(void *)(s->clients + (size_t)i * s->client_size);
}

uint64_t *handoff_state_counters(HandoffState *s)
{
	return (uint64_t *)(void *)((uint8_t *)s->map + s->sec_counters->offset);
}

int handoff_state_claim(HandoffState *s, uint32_t id)
{
	for (uint32_t n = 0; n < s->n_clients; n++) {
		uint32_t i = (s->next_free + n) % s->n_clients;
		HandoffClientSlot *slot = handoff_state_slot(s, i);

		if (slot->id)
			continue;
		memset(slot, 0, s->client_size);
		__atomic_store_n(&slot->id, id, __ATOMIC_RELEASE);
		s->next_free = (i + 1) % s->n_clients;
		return (int)i;
	}
	return -ENOSPC;
}

void handoff_state_release(HandoffState *s, int i)
{
	HandoffClientSlot *slot = handoff_state_slot(s, (uint32_t)i);

	if (slot)
		__atomic_store_n(&slot->id, 0, __ATOMIC_RELEASE);
}

void handoff_state_set_hello(HandoffState *s, int i, uint64_t caps)
{
	HandoffClientSlot *slot = handoff_state_slot(s, (uint32_t)i);

	if (!slot)
		return;
	slot->caps = caps;
	__atomic_store_n(&slot->flags, slot->flags | HANDOFF_CLIENT_F_HELLO, __ATOMIC_RELEASE);
}

void handoff_state_add_flags(HandoffState *s, int i, uint32_t flags)
{
	HandoffClientSlot *slot = handoff_state_slot(s, (uint32_t)i);

	if (slot)
		__atomic_fetch_or(&slot->flags, flags, __ATOMIC_RELEASE);
}

void handoff_state_set_gids(HandoffState *s, int i, const uint8_t (*gids)[16], uint32_t n)
{
	HandoffClientSlot *slot = handoff_state_slot(s, (uint32_t)i);

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

/* ---- owed answers ---- */

const HandoffOwed *handoff_state_owed(HandoffState *s, int i)
{
	if (i < 0 || (uint32_t)i >= s->n_owed)
		return NULL;
	return (const HandoffOwed *)(const void *)(s->owed + (size_t)i * s->owed_size);
}

int handoff_state_owe(HandoffState *s, uint32_t client_id, uint64_t seq,
		      const struct rdmacm_mux_msg *req)
{
	HandoffOwed *o;
	uint32_t i;

	if (s->owed_free->len > 0) {
		i = g_array_index(s->owed_free, uint32_t, s->owed_free->len - 1);
		g_array_set_size(s->owed_free, s->owed_free->len - 1);
	} else if (s->owed_mark < s->n_owed) {
		/* The mark moves first: a successor reads every record below it. */
		i = s->owed_mark++;
		__atomic_store_n(&s->sec_owed->arg1, s->owed_mark, __ATOMIC_RELEASE);
	} else {
		return -ENOSPC;
	}
	o = owed_at(s, i);
	/* The request and its place first, the id that makes it count last. */
	memcpy(&o->frame, req, sizeof(o->frame));
	o->seq = seq;
	__atomic_store_n(&o->client_id, client_id, __ATOMIC_RELEASE);
	s->owed_used++;
	return (int)i;
}

void handoff_state_owed_clear(HandoffState *s, int i)
{
	uint32_t u = (uint32_t)i;

	if (i < 0 || u >= s->owed_mark || !owed_at(s, u)->client_id)
		return;
	__atomic_store_n(&owed_at(s, u)->client_id, 0, __ATOMIC_RELEASE);
	g_array_append_val(s->owed_free, u);
	s->owed_used--;
}

void handoff_state_owed_clear_client(HandoffState *s, uint32_t client_id)
{
	/* Every client that goes, and every one taken over, asks: with no
	 * answer owed (nearly always) nothing is scanned. */
	for (uint32_t i = 0; s->owed_used && i < s->owed_mark; i++)
		if (owed_at(s, i)->client_id == client_id)
			handoff_state_owed_clear(s, (int)i);
}

static gint owed_seq_cmp(gconstpointer a, gconstpointer b, gpointer userdata)
{
	HandoffState *s = userdata;
	uint64_t x = owed_at(s, *(const uint32_t *)a)->seq, y = owed_at(s, *(const uint32_t *)b)->seq;

	return x < y ? -1 : x > y;
}

void handoff_state_owed_take(HandoffState *s, uint32_t client_id, GArray *ret)
{
	g_array_set_size(ret, 0);
	for (uint32_t i = 0; s->owed_used && i < s->owed_mark && ret->len < s->owed_used; i++)
		if (owed_at(s, i)->client_id == client_id)
			g_array_append_val(ret, i);
	g_array_sort_with_data(ret, owed_seq_cmp, s);
}

/* ---- the crash-loop guard ---- */

uint32_t handoff_state_guard_starts(const HandoffState *s)
{
	return s->guard->unsettled_starts;
}

void handoff_state_guard_set_starts(HandoffState *s, uint32_t n)
{
	__atomic_store_n(&s->guard->unsettled_starts, n, __ATOMIC_RELEASE);
}
