/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer for what the VMs' assignments are read from (daemon/vm/): an
 * operator's vms.d file, the control socket's "vm add/set" arguments, and
 * the state a predecessor left (vm-state.h). Byte 0 picks which (modulo
 * 4: file, arguments, state with its checksum made right first, so that
 * mutations reach the records, and state as it is); the rest is the input.
 *
 * Properties: nothing crashes or reads past the input (the buffers are
 * exact-size copies, so ASan sees it); a refused input says why and leaves
 * the spec as it was; an accepted one is a spec every rule holds for; an
 * accepted assignment goes into a table that already holds VMs only if it
 * shares no GID with them, and then owns every GID it names; a state read
 * back becomes a table whose own state reads back to the same VMs, specs
 * and counters, with nothing dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz-support.h"
#include "util.h"
#include "vm-state.h"

/* More than any state the fuzzer makes can name. */
#define FUZZ_MAX_VMS 4096

static int fuzz_resolve(const char *name, bool group, uint32_t *ret)
{
	if (strcmp(name, group ? "kvm" : "libvirt-qemu") != 0)
		return -ENOENT;
	*ret = group ? 104 : 64055;
	return 0;
}

/* Everything a spec that passed a parser must be. */
static void check_spec(const VmSpec *s)
{
	g_autoptr(GString) err = g_string_new(NULL);

	fuzz_check(vm_spec_check(s, err) == 0, "accepted a spec that fails its check: %s", err->str);
	fuzz_check(s->n_gids <= VM_MAX_GIDS && s->n_prefixes <= VM_MAX_PREFIXES, "too many");
	for (uint32_t i = 0; i < s->n_gids; i++) {
		fuzz_check(!gid_is_zero(s->gids[i]), "a zero GID");
		for (uint32_t k = 0; k < i; k++)
			fuzz_check(!gid_equal(s->gids[i], s->gids[k]), "a GID twice");
		fuzz_check(vm_spec_has_gid(s, s->gids[i]), "a GID the spec does not have");
	}
	for (uint32_t i = 0; i < s->n_prefixes; i++) {
		const VmPrefix *p = &s->prefixes[i];

		fuzz_check(p->len >= VM_PREFIX_MIN_LEN && p->len <= 128, "prefix length %u", p->len);
		for (unsigned bit = p->len; bit < 128; bit++)
			fuzz_check(!(p->gid[bit / 8] & (0x80u >> (bit % 8))), "bits past the prefix");
		fuzz_check(vm_prefix_contains(p, p->gid), "a prefix without its own base");
	}
	fuzz_check(s->mode == VM_ID_NONE || s->mode <= 0777, "mode %o", s->mode);
}

/* A table with two VMs, and @s added to it if it fits. */
static void check_table_add(const VmSpec *s)
{
	static const char *const a_args[] = { "gid=fe80::1", "prefix=::ffff:10.0.1.0/120", NULL };
	static const char *const b_args[] = { "gid=fe80::2", "prefix=2001:db8::/32", NULL };
	g_autoptr(VmTable) t = vm_table_new(3);
	g_autoptr(GString) err = g_string_new(NULL);
	VmEntry *vm = NULL, *a = NULL;
	unsigned given;
	VmSpec other;

	fuzz_check(vm_spec_parse_args("a", a_args, 2, &other, &given, err) == 0, "a");
	fuzz_check(vm_table_add(t, &other, NULL, err, &a) == 0, "a: %s", err->str);
	fuzz_check(vm_spec_parse_args("b", b_args, 2, &other, &given, err) == 0, "b");
	fuzz_check(vm_table_add(t, &other, NULL, err, &vm) == 0, "b: %s", err->str);
	vm = NULL;
	if (vm_table_add(t, s, NULL, err, &vm) < 0) {
		fuzz_check(err->len > 0, "refused without a word");
		fuzz_check(vm_table_count(t) == 2, "a refused add changed the table");
		return;
	}
	for (uint32_t i = 0; i < s->n_gids; i++)
		fuzz_check(vm_table_gid_vm(t, s->gids[i]) == vm, "an added VM does not own its GID");
	for (uint32_t i = 0; i < s->n_prefixes; i++)
		fuzz_check(vm_table_gid_vm(t, s->prefixes[i].gid) == vm,
			   "an added VM does not own its prefix");
	/* The others keep theirs. */
	fuzz_check(vm_table_gid_vm(t, a->spec.gids[0]) == a, "a lost its GID");
	fuzz_check(vm_table_may_register(t, vm, a->spec.gids[0], VM_GID_POLICY_OPEN, true) ==
			   VM_REFUSAL_OTHER_VM,
		   "a VM may register another's GID");
	vm_table_remove(t, vm);
	for (uint32_t i = 0; i < s->n_gids; i++)
		fuzz_check(vm_table_gid_vm(t, s->gids[i]) == NULL, "a removed VM's GID has an owner");
}

static void fuzz_conf(const uint8_t *data, size_t size)
{
	g_autoptr(GString) err = g_string_new(NULL);
	VmSpec s, before;

	memset(&s, 0xa5, sizeof(s));
	before = s;
	if (vm_spec_parse_conf("fuzz", (const char *)data, size, fuzz_resolve, &s, err) < 0) {
		fuzz_check(err->len > 0, "a refused file without a word");
		fuzz_check(memcmp(&s, &before, sizeof(s)) == 0, "a refused file changed the spec");
		return;
	}
	check_spec(&s);
	check_table_add(&s);
}

static void fuzz_args(const uint8_t *data, size_t size)
{
	g_autofree char *text = g_strndup((const char *)data, size);
	g_auto(GStrv) args = g_strsplit_set(text, " \n", VM_MAX_GIDS + VM_MAX_PREFIXES + 8);
	g_autoptr(GString) err = g_string_new(NULL);
	unsigned given = 0;
	VmSpec s, base;

	memset(&s, 0x3c, sizeof(s));
	base = s;
	if (vm_spec_parse_args("fuzz", (const char *const *)args, g_strv_length(args), &s, &given,
			       err) < 0) {
		fuzz_check(g_str_has_prefix(err->str, "argument "), "an error naming no argument: %s",
			   err->str);
		fuzz_check(memcmp(&s, &base, sizeof(s)) == 0, "refused arguments changed the spec");
		return;
	}
	/* vm set on top of a VM that holds up. */
	vm_spec_init(&base, "fuzz");
	memset(base.gids[0], 0, GID_LEN);
	base.gids[0][15] = 0x99;
	base.n_gids = 1;
	vm_spec_apply(&base, &s, given);
	if (vm_spec_check(&base, err) == 0) {
		check_spec(&base);
		check_table_add(&base);
	}
}

/* Make the checksum of a state that has a header match its records. */
static void fix_checksum(uint8_t *data, size_t size)
{
	uint32_t header, records, h = 2166136261u;

	if (size < 48)
		return;
	header = (uint32_t)data[12] | (uint32_t)data[13] << 8 | (uint32_t)data[14] << 16 |
		 (uint32_t)data[15] << 24;
	records = (uint32_t)data[16] | (uint32_t)data[17] << 8 | (uint32_t)data[18] << 16 |
		  (uint32_t)data[19] << 24;
	if (header > size || records > size - header)
		return;
	for (uint32_t i = 0; i < records; i++)
		h = (h ^ data[header + i]) * 16777619u;
	for (int i = 0; i < 4; i++)
		data[20 + i] = (uint8_t)(h >> (8 * i));
}

static void fuzz_state(const uint8_t *data, size_t size)
{
	g_autoptr(GString) err = g_string_new(NULL);
	g_autoptr(VmState) s = NULL, again = NULL;
	g_autoptr(VmTable) t = NULL;
	g_autoptr(GBytes) bytes = NULL;
	const uint8_t *p;
	size_t len;

	if (vm_state_read(data, size, &s, err) < 0) {
		fuzz_check(err->len > 0 && !s, "a refused state without a word");
		return;
	}
	t = vm_table_new(FUZZ_MAX_VMS);
	*vm_table_unassigned(t) = s->unassigned;
	for (guint i = 0; i < s->vms->len; i++) {
		VmStateVm *v = &g_array_index(s->vms, VmStateVm, i);
		VmEntry *vm;

		check_spec(&v->spec);
		fuzz_check(!v->source || v->source[0] == '/', "a source that is not absolute");
		g_string_truncate(err, 0);
		if (vm_table_add(t, &v->spec, v->source, err, &vm) == 0)
			vm->counters = v->counters;
	}
	bytes = vm_state_write(t, s->sequence + 1, "fuzz");
	p = g_bytes_get_data(bytes, &len);
	g_string_truncate(err, 0);
	fuzz_check(vm_state_read(p, len, &again, err) == 0, "our own state refused: %s", err->str);
	fuzz_check(again->dropped->len == 0, "our own state dropped %s",
		   again->dropped->len ? (const char *)again->dropped->pdata[0] : "");
	fuzz_check(again->vms->len == vm_table_count(t), "%u VMs written, %u read",
		   vm_table_count(t), again->vms->len);
	fuzz_check(memcmp(&again->unassigned, vm_table_unassigned(t), sizeof(VmCounters)) == 0,
		   "the unassigned counters changed");
	for (guint i = 0; i < again->vms->len; i++) {
		const VmStateVm *v = &g_array_index(again->vms, VmStateVm, i);
		const VmEntry *vm = vm_table_find(t, v->spec.name);

		fuzz_check(vm && memcmp(&vm->spec, &v->spec, sizeof(VmSpec)) == 0,
			   "VM %s came back different", v->spec.name);
		fuzz_check(memcmp(&vm->counters, &v->counters, sizeof(VmCounters)) == 0,
			   "VM %s's counters came back different", v->spec.name);
		fuzz_check(!vm->source == !v->source &&
				   (!vm->source || strcmp(vm->source, v->source) == 0),
			   "VM %s's source came back different", v->spec.name);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size == 0)
		return 0;
	/* An exact-size copy: a read past the input is a read past the heap
	 * block. */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		abort();
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 4) {
	case 0:
		fuzz_conf(copy, size - 1);
		break;
	case 1:
		fuzz_args(copy, size - 1);
		break;
	case 2:
		fix_checksum(copy, size - 1);
		fuzz_state(copy, size - 1);
		break;
	default:
		fuzz_state(copy, size - 1);
		break;
	}
	free(copy);
	return 0;
}
