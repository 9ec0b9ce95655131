/* SPDX-License-Identifier: MIT */
/*
 * Owns the VMs' assignments (vm-table.h): the entries, the index from an
 * exact GID to its VM, the prefixes, the overlap rule and the verdict on
 * each registration.
 */
#include "vm-table.h"

#include <errno.h>
#include <string.h>

#include "util.h"

struct VmTable {
	uint32_t max_vms;
	GHashTable *by_name; /* name -> VmEntry* (owned) */
	GHashTable *by_gid;  /* exact GID (the entry's bytes) -> VmEntry* */
	VmCounters unassigned;
};

static void vm_entry_free(gpointer p)
{
	VmEntry *vm = p;

	g_free(vm->source);
	g_free(vm);
}

VmTable *vm_table_new(uint32_t max_vms)
{
	VmTable *t = g_new0(VmTable, 1);

	t->max_vms = max_vms;
	t->by_name = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, vm_entry_free);
	t->by_gid = g_hash_table_new(gid_hash, gid_hash_equal);
	return t;
}

void vm_table_free(VmTable *t)
{
	if (!t)
		return;
	g_hash_table_destroy(t->by_gid);
	g_hash_table_destroy(t->by_name);
	g_free(t);
}

uint32_t vm_table_count(const VmTable *t)
{
	return g_hash_table_size(t->by_name);
}

uint32_t vm_table_max(const VmTable *t)
{
	return t->max_vms;
}

VmEntry *vm_table_find(const VmTable *t, const char *name)
{
	return g_hash_table_lookup(t->by_name, name);
}

static gint vm_entry_cmp(gconstpointer a, gconstpointer b)
{
	const VmEntry *x = *(VmEntry *const *)a, *y = *(VmEntry *const *)b;

	return strcmp(x->spec.name, y->spec.name);
}

GPtrArray *vm_table_list(const VmTable *t)
{
	GPtrArray *list = g_ptr_array_sized_new(g_hash_table_size(t->by_name));
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, t->by_name);
	while (g_hash_table_iter_next(&it, NULL, &value))
		g_ptr_array_add(list, value);
	g_ptr_array_sort(list, vm_entry_cmp);
	return list;
}

VmCounters *vm_table_unassigned(VmTable *t)
{
	return &t->unassigned;
}

VmEntry *vm_table_gid_vm(const VmTable *t, const uint8_t gid[GID_LEN])
{
	VmEntry *vm = g_hash_table_lookup(t->by_gid, gid);
	GHashTableIter it;
	gpointer value;

	if (vm)
		return vm;
	/* Prefixes: a registration's cost, never a MAD's; VMs are few. */
	g_hash_table_iter_init(&it, t->by_name);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		vm = value;
		for (uint32_t i = 0; i < vm->spec.n_prefixes; i++)
			if (vm_prefix_contains(&vm->spec.prefixes[i], gid))
				return vm;
	}
	return NULL;
}

/* What of @spec meets @other, in @err; true when something does. */
static bool vm_spec_meets(const VmSpec *spec, const VmSpec *other, GString *err)
{
	char a[GID_STR_LEN], pa[50], pb[50];

	for (uint32_t i = 0; i < spec->n_gids; i++)
		if (vm_spec_has_gid(other, spec->gids[i])) {
			g_string_append_printf(err, "GID %s is assigned to VM %s already",
					       gid_to_string(spec->gids[i], a), other->name);
			return true;
		}
	for (uint32_t i = 0; i < spec->n_prefixes; i++) {
		const VmPrefix *p = &spec->prefixes[i];

		for (uint32_t k = 0; k < other->n_gids; k++)
			if (vm_prefix_contains(p, other->gids[k])) {
				g_string_append_printf(err, "prefix %s holds GID %s of VM %s",
						       vm_prefix_to_string(p, pa),
						       gid_to_string(other->gids[k], a), other->name);
				return true;
			}
		for (uint32_t k = 0; k < other->n_prefixes; k++)
			if (vm_prefix_overlaps(p, &other->prefixes[k])) {
				g_string_append_printf(err, "prefix %s meets prefix %s of VM %s",
						       vm_prefix_to_string(p, pa),
						       vm_prefix_to_string(&other->prefixes[k], pb),
						       other->name);
				return true;
			}
	}
	return false;
}

int vm_table_check(const VmTable *t, const VmSpec *spec, const VmEntry *except, GString *err)
{
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, t->by_name);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		const VmEntry *other = value;

		if (other != except && vm_spec_meets(spec, &other->spec, err))
			return -EADDRINUSE;
	}
	return 0;
}

static void vm_index(VmTable *t, VmEntry *vm, bool insert)
{
	for (uint32_t i = 0; i < vm->spec.n_gids; i++) {
		if (insert)
			g_hash_table_insert(t->by_gid, vm->spec.gids[i], vm);
		else
			g_hash_table_remove(t->by_gid, vm->spec.gids[i]);
	}
}

int vm_table_add(VmTable *t, const VmSpec *spec, const char *source, GString *err,
		 VmEntry **ret)
{
	VmEntry *vm;
	int r;

	if (vm_table_find(t, spec->name)) {
		g_string_append_printf(err, "VM %s exists already", spec->name);
		return -EEXIST;
	}
	if (vm_table_count(t) >= t->max_vms) {
		g_string_append_printf(err, "%u VMs is the limit (--max-vms)", t->max_vms);
		return -ENOSPC;
	}
	r = vm_table_check(t, spec, NULL, err);
	if (r < 0)
		return r;
	vm = g_new0(VmEntry, 1);
	vm->spec = *spec;
	vm->source = g_strdup(source);
	g_hash_table_insert(t->by_name, vm->spec.name, vm);
	vm_index(t, vm, true);
	*ret = vm;
	return 0;
}

int vm_table_replace(VmTable *t, VmEntry *vm, const VmSpec *spec, const char *source,
		     GString *err)
{
	int r = vm_table_check(t, spec, vm, err);

	if (r < 0)
		return r;
	vm_index(t, vm, false);
	memcpy(vm->spec.gids, spec->gids, sizeof(vm->spec.gids));
	vm->spec.n_gids = spec->n_gids;
	memcpy(vm->spec.prefixes, spec->prefixes, sizeof(vm->spec.prefixes));
	vm->spec.n_prefixes = spec->n_prefixes;
	vm->spec.owner = spec->owner;
	vm->spec.group = spec->group;
	vm->spec.mode = spec->mode;
	memcpy(vm->spec.domain, spec->domain, sizeof(vm->spec.domain));
	g_free(vm->source);
	vm->source = g_strdup(source);
	vm_index(t, vm, true);
	return 0;
}

void vm_table_remove(VmTable *t, VmEntry *vm)
{
	vm_index(t, vm, false);
	g_hash_table_remove(t->by_name, vm->spec.name);
}

VmRefusal vm_table_may_register(const VmTable *t, const VmEntry *vm, const uint8_t gid[GID_LEN],
				VmGidPolicy policy, bool on_port)
{
	const VmEntry *holder = vm_table_gid_vm(t, gid);

	if (vm) {
		if (holder == vm)
			return VM_REFUSAL_COUNT;
		return holder ? VM_REFUSAL_OTHER_VM : VM_REFUSAL_NOT_ASSIGNED;
	}
	if (holder)
		return VM_REFUSAL_OTHER_VM;
	if (policy == VM_GID_POLICY_ASSIGNED)
		return on_port ? VM_REFUSAL_UNASSIGNED : VM_REFUSAL_NOT_ON_PORT;
	return VM_REFUSAL_COUNT;
}

/* ---- names ---- */

const char *vm_cm_group_name(VmCmGroup g)
{
	static const char *const names[VM_CM_GROUP_COUNT] = {
		[VM_CM_TX_MSGS] = "cm_tx_msgs",
		[VM_CM_TX_RETRIES] = "cm_tx_retries",
		[VM_CM_RX_MSGS] = "cm_rx_msgs",
		[VM_CM_RX_DUPLICATES] = "cm_rx_duplicates",
	};

	return (unsigned)g < VM_CM_GROUP_COUNT ? names[g] : "unknown";
}

const char *vm_cm_attr_name(CmAttrIndex i)
{
	/* The file names under the kernel's counter groups. */
	static const char *const names[CM_IDX_COUNT] = {
		[CM_IDX_REQ] = "req",		[CM_IDX_MRA] = "mra",
		[CM_IDX_REJ] = "rej",		[CM_IDX_REP] = "rep",
		[CM_IDX_RTU] = "rtu",		[CM_IDX_DREQ] = "dreq",
		[CM_IDX_DREP] = "drep",		[CM_IDX_SIDR_REQ] = "sidr_req",
		[CM_IDX_SIDR_REP] = "sidr_rep", [CM_IDX_LAP] = "lap",
		[CM_IDX_APR] = "apr",		[CM_IDX_OTHER] = "other",
	};

	return (unsigned)i < CM_IDX_COUNT ? names[i] : "other";
}

const char *vm_refusal_name(VmRefusal r)
{
	static const char *const names[VM_REFUSAL_COUNT] = {
		[VM_REFUSAL_NOT_ASSIGNED] = "not-assigned",
		[VM_REFUSAL_OTHER_VM] = "other-vm",
		[VM_REFUSAL_UNASSIGNED] = "unassigned",
		[VM_REFUSAL_NOT_ON_PORT] = "not-on-port",
	};

	return (unsigned)r < VM_REFUSAL_COUNT ? names[r] : "unknown";
}

const char *vm_gid_policy_name(VmGidPolicy p)
{
	return p == VM_GID_POLICY_ASSIGNED ? "assigned" : "open";
}

int vm_gid_policy_from_string(const char *s, VmGidPolicy *ret)
{
	if (strcmp(s, "open") == 0)
		*ret = VM_GID_POLICY_OPEN;
	else if (strcmp(s, "assigned") == 0)
		*ret = VM_GID_POLICY_ASSIGNED;
	else
		return -EINVAL;
	return 0;
}
