/* SPDX-License-Identifier: MIT */
/*
 * The VMs the operator assigned GIDs to, and the one rule they make: a GID
 * assigned to a VM is registered only by a connection of that VM, and a
 * VM's connection registers only its own GIDs. The table answers "whose is
 * this GID" and "may this connection register it"; it knows nothing of
 * sockets or clients (vm-host.h binds the VMs' sockets, the relay asks
 * before every REG).
 *
 * No two VMs share a GID: an assignment whose GIDs or prefixes meet
 * another VM's is refused, naming both. Each VM also carries its
 * counters (the kernel's ib_cm groups per attribute, and refused
 * registrations by reason), and the table those of the connections that
 * have no VM (the shared socket), so that the per-VM numbers add up to
 * the daemon's.
 */
#ifndef RDMACM_MUX_VM_TABLE_H
#define RDMACM_MUX_VM_TABLE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "cm-codec.h"
#include "vm-spec.h"

/* Who may register a GID that no VM has, through the shared socket. */
typedef enum VmGidPolicy {
	VM_GID_POLICY_OPEN,	/* anyone, first come first served (the default) */
	VM_GID_POLICY_ASSIGNED, /* nobody: every GID comes with an assignment */
} VmGidPolicy;

/* The kernel's ib_cm counter groups (/sys/class/infiniband/DEV/ports/N/). */
typedef enum VmCmGroup {
	VM_CM_TX_MSGS,	     /* MADs the VM's clients sent, retries included */
	VM_CM_TX_RETRIES,    /* of those, a MAD sent again (same TID, same session) */
	VM_CM_RX_MSGS,	     /* MADs delivered to the VM's clients, duplicates included */
	VM_CM_RX_DUPLICATES, /* of those, one its session had seen (same TID) */
	VM_CM_GROUP_COUNT,
} VmCmGroup;

/* Why a registration was refused for the assignment's sake. */
typedef enum VmRefusal {
	VM_REFUSAL_NOT_ASSIGNED, /* a VM's connection asked for a GID not its VM's */
	VM_REFUSAL_OTHER_VM,	 /* the GID is another VM's */
	VM_REFUSAL_UNASSIGNED,	 /* --gid-policy=assigned: a GID no VM has */
	VM_REFUSAL_NOT_ON_PORT,	 /* --gid-policy=assigned: a GID the port does not have */
	VM_REFUSAL_COUNT,
} VmRefusal;

typedef struct VmCounters {
	uint64_t cm[VM_CM_GROUP_COUNT][CM_IDX_COUNT];
	uint64_t gid_refused[VM_REFUSAL_COUNT];
	uint64_t clients_refused; /* connections over --max-vm-clients */
} VmCounters;

/* One VM. The table owns it; the pointer is valid until it is removed. */
typedef struct VmEntry {
	VmSpec spec;
	char *source;	  /* the vms.d file it came from, or NULL (rdmacm-muxctl) */
	uint32_t clients; /* connections now (the relay keeps this) */
	/* Its socket's owner, group or mode changed: the relay's next
	 * relay_vms_changed() closes its connections that the new ones would
	 * not let in (vm_spec_admits()), and clears this. */
	bool recheck_peers;
	VmCounters counters;
} VmEntry;

typedef struct VmTable VmTable;

/* A table for at most @max_vms VMs. */
VmTable *vm_table_new(uint32_t max_vms);
void vm_table_free(VmTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VmTable, vm_table_free)

uint32_t vm_table_count(const VmTable *t);
uint32_t vm_table_max(const VmTable *t);
VmEntry *vm_table_find(const VmTable *t, const char *name);
/* The VMs sorted by name (owned by the caller; the entries are not). */
GPtrArray *vm_table_list(const VmTable *t);
/* The counters of the connections without a VM. */
VmCounters *vm_table_unassigned(VmTable *t);

/* The VM @gid is assigned to, exactly or by a prefix, or NULL. */
VmEntry *vm_table_gid_vm(const VmTable *t, const uint8_t gid[GID_LEN]);

/**
 * vm_table_check() - whether @spec fits beside the other VMs (all but
 * @except, which it would replace): no GID or prefix of it meets theirs.
 * Return: 0, or -EADDRINUSE with the VM and the GID named in @err.
 */
int vm_table_check(const VmTable *t, const VmSpec *spec, const VmEntry *except, GString *err);

/**
 * vm_table_add() - a new VM (vm_spec_check() must pass), from @source
 * (NULL: the control socket).
 * Return: 0 with *@ret set; -EEXIST, -ENOSPC (--max-vms) or -EADDRINUSE,
 * with the reason in @err.
 */
int vm_table_add(VmTable *t, const VmSpec *spec, const char *source, GString *err,
		 VmEntry **ret);
/* Give @vm the assignment @spec (same name); as vm_table_add(). */
int vm_table_replace(VmTable *t, VmEntry *vm, const VmSpec *spec, const char *source,
		     GString *err);
/* Remove @vm (its clients must be gone). */
void vm_table_remove(VmTable *t, VmEntry *vm);

/**
 * vm_table_may_register() - whether a connection of @vm (NULL: the shared
 * socket) may register @gid under @policy. @on_port says whether the port
 * has @gid now; a VM's own GIDs are allowed before the port has them
 * (QEMU registers a guest's GID before the host's address exists).
 * Return: VM_REFUSAL_COUNT when it may, else the reason it may not.
 */
VmRefusal vm_table_may_register(const VmTable *t, const VmEntry *vm, const uint8_t gid[GID_LEN],
				VmGidPolicy policy, bool on_port);

/* Names for logs, the control socket and metrics. */
const char *vm_cm_group_name(VmCmGroup g);	   /* "cm_tx_msgs", as the kernel's */
const char *vm_cm_attr_name(CmAttrIndex i);	   /* "req", as the kernel's */
const char *vm_refusal_name(VmRefusal r);	   /* "not-assigned", ... */
const char *vm_gid_policy_name(VmGidPolicy p);	   /* "open", "assigned" */
/* "open" or "assigned"; 0 or -EINVAL. */
int vm_gid_policy_from_string(const char *s, VmGidPolicy *ret);

#endif /* RDMACM_MUX_VM_TABLE_H */
