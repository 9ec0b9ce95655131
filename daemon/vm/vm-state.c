/* SPDX-License-Identifier: MIT */
/*
 * Owns the byte format of the VMs' state (vm-state.h): writing it from a
 * VmTable, and reading it back with every length, count and value
 * checked, dropping what does not hold up one VM at a time.
 */
#include "vm-state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define VM_STATE_MAGIC "RMUXVMST"
#define VM_STATE_HEADER 48u

enum {
	VM_REC_VM = 1,
	VM_REC_UNASSIGNED = 2,
};

enum {
	VM_FIELD_NAME = 1,
	VM_FIELD_GID = 2,
	VM_FIELD_PREFIX = 3,
	VM_FIELD_OWNER = 4,
	VM_FIELD_GROUP = 5,
	VM_FIELD_MODE = 6,
	VM_FIELD_SOURCE = 7,
	VM_FIELD_COUNTER = 8,
	VM_FIELD_DOMAIN = 9,
};

/* ---- little-endian ---- */

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static uint32_t vm_state_checksum(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* ---- counters by name ---- */

gboolean vm_state_counter(unsigned i, char name[48], size_t *ret_offset)
{
	const unsigned cm = VM_CM_GROUP_COUNT * CM_IDX_COUNT;

	if (i < cm) {
		unsigned g = i / CM_IDX_COUNT, a = i % CM_IDX_COUNT;

		snprintf(name, 48, "%s.%s", vm_cm_group_name((VmCmGroup)g),
			 vm_cm_attr_name((CmAttrIndex)a));
		*ret_offset = offsetof(VmCounters, cm) + ((size_t)g * CM_IDX_COUNT + a) * 8;
		return TRUE;
	}
	i -= cm;
	if (i < VM_REFUSAL_COUNT) {
		snprintf(name, 48, "gid_refused.%s", vm_refusal_name((VmRefusal)i));
		*ret_offset = offsetof(VmCounters, gid_refused) + (size_t)i * 8;
		return TRUE;
	}
	i -= VM_REFUSAL_COUNT;
	if (i == 0) {
		snprintf(name, 48, "clients_refused");
		*ret_offset = offsetof(VmCounters, clients_refused);
		return TRUE;
	}
	return FALSE;
}

/* Every counter of VmCounters has a name above. */
G_STATIC_ASSERT(sizeof(VmCounters) ==
		8 * (VM_CM_GROUP_COUNT * CM_IDX_COUNT + VM_REFUSAL_COUNT + 1));

/* ---- writing ---- */

static void vm_put_field(GByteArray *b, uint16_t id, const void *data, size_t len)
{
	static const uint8_t zero[4];
	uint8_t head[4];

	put_le16(head, id);
	put_le16(head + 2, (uint16_t)len);
	g_byte_array_append(b, head, 4);
	g_byte_array_append(b, data, (guint)len);
	g_byte_array_append(b, zero, (guint)((4 - len % 4) % 4));
}

static void vm_put_u32(GByteArray *b, uint16_t id, uint32_t v)
{
	uint8_t data[4];

	put_le32(data, v);
	vm_put_field(b, id, data, 4);
}

static void vm_put_counters(GByteArray *b, const VmCounters *k)
{
	char name[48];
	size_t off;

	for (unsigned i = 0; vm_state_counter(i, name, &off); i++) {
		uint8_t data[8 + 48];
		uint64_t v;
		size_t n = strlen(name);

		memcpy(&v, (const uint8_t *)k + off, 8);
		if (v == 0)
			continue; /* absent reads as zero */
		put_le64(data, v);
		memcpy(data + 8, name, n);
		vm_put_field(b, VM_FIELD_COUNTER, data, 8 + n);
	}
}

static void vm_put_record(GByteArray *out, uint16_t type, const GByteArray *payload)
{
	static const uint8_t zero[8];
	uint8_t head[8] = { 0 };

	put_le16(head, type);
	put_le32(head + 4, payload->len);
	g_byte_array_append(out, head, 8);
	g_byte_array_append(out, payload->data, payload->len);
	g_byte_array_append(out, zero, (8 - payload->len % 8) % 8);
}

GBytes *vm_state_write(VmTable *t, uint64_t sequence, const char *writer)
{
	g_autoptr(GPtrArray) list = vm_table_list(t);
	GByteArray *out = g_byte_array_new();
	g_autoptr(GByteArray) p = g_byte_array_new();
	uint8_t *h;

	g_byte_array_set_size(out, VM_STATE_HEADER);
	memset(out->data, 0, VM_STATE_HEADER);
	for (guint i = 0; i < list->len; i++) {
		const VmEntry *vm = list->pdata[i];
		const VmSpec *s = &vm->spec;

		g_byte_array_set_size(p, 0);
		vm_put_field(p, VM_FIELD_NAME, s->name, strlen(s->name));
		for (uint32_t k = 0; k < s->n_gids; k++)
			vm_put_field(p, VM_FIELD_GID, s->gids[k], GID_LEN);
		for (uint32_t k = 0; k < s->n_prefixes; k++) {
			uint8_t data[GID_LEN + 1];

			memcpy(data, s->prefixes[k].gid, GID_LEN);
			data[GID_LEN] = s->prefixes[k].len;
			vm_put_field(p, VM_FIELD_PREFIX, data, sizeof(data));
		}
		if (s->owner != VM_ID_NONE)
			vm_put_u32(p, VM_FIELD_OWNER, s->owner);
		if (s->group != VM_ID_NONE)
			vm_put_u32(p, VM_FIELD_GROUP, s->group);
		if (s->mode != VM_ID_NONE)
			vm_put_u32(p, VM_FIELD_MODE, s->mode);
		/* A longer path is not one we keep: vm_state_room() counts on it. */
		if (vm->source && strlen(vm->source) <= VM_STATE_SOURCE_MAX)
			vm_put_field(p, VM_FIELD_SOURCE, vm->source, strlen(vm->source));
		if (s->domain[0])
			vm_put_field(p, VM_FIELD_DOMAIN, s->domain, strlen(s->domain));
		vm_put_counters(p, &vm->counters);
		vm_put_record(out, VM_REC_VM, p);
	}
	g_byte_array_set_size(p, 0);
	vm_put_counters(p, vm_table_unassigned(t));
	vm_put_record(out, VM_REC_UNASSIGNED, p);

	h = out->data;
	memcpy(h, VM_STATE_MAGIC, 8);
	put_le16(h + 8, VM_STATE_MAJOR);
	put_le16(h + 10, VM_STATE_MINOR);
	put_le32(h + 12, VM_STATE_HEADER);
	put_le32(h + 16, out->len - VM_STATE_HEADER);
	put_le32(h + 20, vm_state_checksum(h + VM_STATE_HEADER, out->len - VM_STATE_HEADER));
	put_le64(h + 24, sequence);
	strncpy((char *)h + 32, writer, 16);
	return g_byte_array_free_to_bytes(out);
}

/* Bytes a field of @len data bytes takes. */
static size_t vm_field_bytes(size_t len)
{
	return 4 + (len + 3) / 4 * 4;
}

size_t vm_state_room(uint32_t max_vms)
{
	size_t counters = 0, vm;
	char name[48];
	size_t off;

	for (unsigned i = 0; vm_state_counter(i, name, &off); i++)
		counters += vm_field_bytes(8 + strlen(name));
	vm = vm_field_bytes(VM_NAME_MAX) + VM_MAX_GIDS * vm_field_bytes(GID_LEN) +
	     VM_MAX_PREFIXES * vm_field_bytes(GID_LEN + 1) + 3 * vm_field_bytes(4) +
	     vm_field_bytes(VM_STATE_SOURCE_MAX) + vm_field_bytes(VM_DOMAIN_LEN) + counters;
	/* Each record: its head, its payload padded to 8. */
	return VM_STATE_HEADER + (size_t)max_vms * (8 + (vm + 7) / 8 * 8) + 8 +
	       (counters + 7) / 8 * 8;
}

/* ---- reading ---- */

void vm_state_free(VmState *s)
{
	if (!s)
		return;
	for (guint i = 0; s->vms && i < s->vms->len; i++)
		g_free(g_array_index(s->vms, VmStateVm, i).source);
	if (s->vms)
		g_array_free(s->vms, TRUE);
	if (s->dropped)
		g_ptr_array_free(s->dropped, TRUE);
	g_free(s);
}

/* A counter field into @k, by name; unknown names are skipped. */
static void vm_read_counter(const uint8_t *data, size_t len, VmCounters *k)
{
	char name[48], want[48];
	size_t off;

	if (len < 8 || len - 8 >= sizeof(name))
		return;
	memcpy(name, data + 8, len - 8);
	name[len - 8] = '\0';
	for (unsigned i = 0; vm_state_counter(i, want, &off); i++)
		if (strcmp(name, want) == 0) {
			uint64_t v = get_le64(data);

			memcpy((uint8_t *)k + off, &v, 8);
			return;
		}
}

/* A text field: printable ASCII, no NUL. */
static bool vm_read_text(const uint8_t *data, size_t len, char *out, size_t room)
{
	if (len >= room)
		return false;
	for (size_t i = 0; i < len; i++)
		if (data[i] < 0x20 || data[i] > 0x7e)
			return false;
	memcpy(out, data, len);
	out[len] = '\0';
	return true;
}

/* The fields of one VM record. Return: NULL, or why it does not hold up. */
static const char *vm_read_vm(const uint8_t *p, size_t len, VmStateVm *vm, bool unassigned)
{
	g_autoptr(GString) err = g_string_new(NULL);
	size_t pos = 0;
	bool named = false;

	vm_spec_init(&vm->spec, "");
	while (pos < len) {
		uint16_t id, n;
		const uint8_t *d;

		if (len - pos < 4)
			return "a field is cut short";
		id = get_le16(p + pos);
		n = get_le16(p + pos + 2);
		if (n > len - pos - 4)
			return "a field runs past its record";
		d = p + pos + 4;
		pos += 4 + ((size_t)n + 3) / 4 * 4;
		if (pos > len)
			pos = len;
		if (unassigned && id != VM_FIELD_COUNTER)
			continue;
		switch (id) {
		case VM_FIELD_NAME:
			if (named)
				return "it has two names";
			if (!vm_read_text(d, n, vm->spec.name, sizeof(vm->spec.name)) ||
			    !vm_name_valid(vm->spec.name))
				return "its name is not a valid VM name";
			named = true;
			break;
		case VM_FIELD_GID:
			if (n != GID_LEN || gid_is_zero(d))
				return "a GID is not 16 bytes, or is zero";
			if (vm->spec.n_gids >= VM_MAX_GIDS)
				return "it has too many GIDs";
			for (uint32_t i = 0; i < vm->spec.n_gids; i++)
				if (gid_equal(vm->spec.gids[i], d))
					return "a GID is there twice";
			memcpy(vm->spec.gids[vm->spec.n_gids++], d, GID_LEN);
			break;
		case VM_FIELD_PREFIX: {
			VmPrefix pre;

			if (n != GID_LEN + 1)
				return "a prefix is not 17 bytes";
			memcpy(pre.gid, d, GID_LEN);
			pre.len = d[GID_LEN];
			if (pre.len < VM_PREFIX_MIN_LEN || pre.len > 128)
				return "a prefix's length is out of range";
			for (unsigned bit = pre.len; bit < 128; bit++)
				if (pre.gid[bit / 8] & (0x80u >> (bit % 8)))
					return "a prefix has bits past its length";
			if (vm->spec.n_prefixes >= VM_MAX_PREFIXES)
				return "it has too many prefixes";
			for (uint32_t i = 0; i < vm->spec.n_prefixes; i++)
				if (vm->spec.prefixes[i].len == pre.len &&
				    gid_equal(vm->spec.prefixes[i].gid, pre.gid))
					return "a prefix is there twice";
			vm->spec.prefixes[vm->spec.n_prefixes++] = pre;
			break;
		}
		case VM_FIELD_OWNER:
		case VM_FIELD_GROUP:
		case VM_FIELD_MODE: {
			uint32_t v;

			if (n != 4)
				return "an owner, group or mode is not 4 bytes";
			v = get_le32(d);
			if (id == VM_FIELD_MODE && v > 0777)
				return "its mode is out of range";
			if (id == VM_FIELD_OWNER)
				vm->spec.owner = v;
			else if (id == VM_FIELD_GROUP)
				vm->spec.group = v;
			else
				vm->spec.mode = v;
			break;
		}
		case VM_FIELD_SOURCE: {
			char path[4096];

			if (vm->source || !vm_read_text(d, n, path, sizeof(path)) || path[0] != '/')
				return "its source is not an absolute path";
			vm->source = g_strdup(path);
			break;
		}
		case VM_FIELD_COUNTER:
			vm_read_counter(d, n, &vm->counters);
			break;
		case VM_FIELD_DOMAIN:
			/* The VM's owner: a domain that is not a UUID is no owner
			 * we could match, and dropping the field would leave the
			 * VM to any domain; drop the VM. */
			if (vm->spec.domain[0] ||
			    !vm_read_text(d, n, vm->spec.domain, sizeof(vm->spec.domain)) ||
			    !vm_domain_valid(vm->spec.domain))
				return "its domain is not one UUID";
			for (char *c = vm->spec.domain; *c; c++)
				*c = g_ascii_tolower(*c);
			break;
		default:
			break; /* a newer writer's field */
		}
	}
	if (unassigned)
		return NULL;
	if (!named)
		return "it has no name";
	if (vm_spec_check(&vm->spec, err) < 0)
		return "it has no GID";
	return NULL;
}

int vm_state_read(const uint8_t *data, size_t len, VmState **ret, GString *err)
{
	g_autoptr(VmState) s = g_new0(VmState, 1);
	uint32_t header, records;
	size_t pos;

	s->vms = g_array_new(FALSE, TRUE, sizeof(VmStateVm));
	s->dropped = g_ptr_array_new_with_free_func(g_free);
	if (len < VM_STATE_HEADER || memcmp(data, VM_STATE_MAGIC, 8) != 0) {
		g_string_append(err, "not a VM state (no RMUXVMST header)");
		return -EPROTO;
	}
	if (get_le16(data + 8) != VM_STATE_MAJOR) {
		g_string_append_printf(err, "a VM state of major version %u; this daemon reads %u",
				       get_le16(data + 8), VM_STATE_MAJOR);
		return -EPROTO;
	}
	header = get_le32(data + 12);
	records = get_le32(data + 16);
	if (header < VM_STATE_HEADER || header % 8 || len > VM_STATE_MAX_BYTES || header > len ||
	    records > len - header) {
		g_string_append(err, "the VM state's sizes do not hold up");
		return -EPROTO;
	}
	if (vm_state_checksum(data + header, records) != get_le32(data + 20)) {
		g_string_append(err, "the VM state's checksum does not match");
		return -EPROTO;
	}
	s->sequence = get_le64(data + 24);
	for (int i = 0; i < 16; i++) {
		char c = (char)data[32 + i];

		if (!c)
			break;
		s->writer[i] = c >= 0x20 && c <= 0x7e ? c : '?';
	}

	for (pos = 0; pos < records;) {
		const uint8_t *r = data + header + pos;
		uint16_t type;
		uint32_t n;
		VmStateVm vm;
		const char *why;

		if (records - pos < 8) {
			g_ptr_array_add(s->dropped, g_strdup("a record header is cut short"));
			break;
		}
		type = get_le16(r);
		n = get_le32(r + 4);
		if (n > records - pos - 8) {
			g_ptr_array_add(s->dropped, g_strdup("a record runs past the end"));
			break;
		}
		pos += 8 + ((size_t)n + 7) / 8 * 8;
		if (type != VM_REC_VM && type != VM_REC_UNASSIGNED)
			continue; /* a newer writer's record */
		memset(&vm, 0, sizeof(vm));
		why = vm_read_vm(r + 8, n, &vm, type == VM_REC_UNASSIGNED);
		if (!why && type == VM_REC_VM) {
			for (guint i = 0; i < s->vms->len; i++)
				if (strcmp(g_array_index(s->vms, VmStateVm, i).spec.name,
					   vm.spec.name) == 0)
					why = "its name was seen before";
		}
		if (why) {
			g_ptr_array_add(s->dropped,
					g_strdup_printf("VM %s dropped: %s",
							vm.spec.name[0] ? vm.spec.name : "(unnamed)",
							why));
			g_free(vm.source);
			continue;
		}
		if (type == VM_REC_UNASSIGNED)
			s->unassigned = vm.counters;
		else
			g_array_append_val(s->vms, vm);
	}
	*ret = g_steal_pointer(&s);
	return 0;
}
