/* SPDX-License-Identifier: MIT */
/*
 * The VMs' assignments and counters as a successor reads them (a restart,
 * an upgrade or a downgrade, a re-execution): a versioned, self-describing
 * byte format, independent of the structs' layout, kept as the VMS section
 * of the hand-off state (handoff-format.h; that section keeps two copies
 * and knows which one is current). All integers are little-endian.
 *
 *   header, 48 bytes
 *     0  8  magic "RMUXVMST"
 *     8  2  major version (1): a reader refuses another major
 *    10  2  minor version (1): a newer minor only adds what an older
 *           reader may skip (record types, fields); 1 added field 9
 *    12  4  header size: the records start there (a reader skips header
 *           fields it does not know)
 *    16  4  records size: bytes of records after the header
 *    20  4  checksum: FNV-1a, 32 bits, of the records
 *    24  8  sequence: counts the states the daemons wrote (for logs)
 *    32 16  writer: the writing daemon's version, NUL-padded
 *   records, each at a multiple of 8 from the header's end
 *     0  2  type
 *     2  2  flags (0)
 *     4  4  payload length
 *     8  .  payload, then zeros to the next multiple of 8
 *   record types (a reader skips a type it does not know)
 *     1  VM: the payload is fields
 *     2  the counters of connections without a VM: fields (counters only)
 *   fields, each at a multiple of 4 from the payload's start
 *     0  2  id
 *     2  2  data length
 *     4  .  data, then zeros to the next multiple of 4
 *   field ids (a reader skips an id it does not know)
 *     1  name (text)          5  group (u32)
 *     2  GID (16 bytes)       6  mode (u32)
 *     3  prefix (16-byte      7  source: the vms.d file (text; absent:
 *        GID, 1-byte length)     added through the control socket)
 *     4  owner (u32)          8  counter: u64 value, then its name (text),
 *                                e.g. "cm_tx_msgs.req",
 *                                "gid_refused.other-vm", "clients_refused"
 *                             9  domain: the libvirt domain that made the
 *                                VM, its UUID as 36 characters of text
 *                                (minor 1; absent: no domain's)
 *
 * Counters go by name, so that one added, removed or renamed costs only
 * its own value. Whatever a reader cannot take over, it drops one VM (or
 * one field) at a time, and says why.
 */
#ifndef RDMACM_MUX_VM_STATE_H
#define RDMACM_MUX_VM_STATE_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "vm-table.h"

#define VM_STATE_MAJOR 1
#define VM_STATE_MINOR 1
/* The most a reader takes: far more than VM_MAX_GIDS and the rest of
 * 4096 VMs need. */
#define VM_STATE_MAX_BYTES (64u << 20)
/* A VM's vms.d file is kept by name up to this long (a longer path is not
 * kept: the VM then outlives its file as one added by rdmacm-muxctl). */
#define VM_STATE_SOURCE_MAX 1024u

/* One VM as read. */
typedef struct VmStateVm {
	VmSpec spec;
	char *source; /* or NULL */
	VmCounters counters;
} VmStateVm;

typedef struct VmState {
	uint64_t sequence;
	char writer[17];
	GArray *vms; /* VmStateVm */
	VmCounters unassigned;
	GPtrArray *dropped; /* char*: a line for each VM or field that did not hold up */
} VmState;

/**
 * vm_state_write() - the bytes of @t's assignments and counters, as
 * state number @sequence written by version @writer.
 */
GBytes *vm_state_write(VmTable *t, uint64_t sequence, const char *writer);

/* The most bytes vm_state_write() writes for @max_vms VMs. */
size_t vm_state_room(uint32_t max_vms);

/**
 * vm_state_read() - read @len bytes at @data. Every byte is checked;
 * nothing is trusted. A VM that does not hold up (bad name, zero or
 * repeated GIDs, bad prefix, too many of either, no GID at all, a name
 * seen before) is dropped with a line in @ret->dropped; a field or a
 * counter that is unknown is skipped.
 * Return: 0 with *@ret (vm_state_free()); -EPROTO for bytes that are not
 * this format, another major version, or a header or checksum that does
 * not hold up, with the reason in @err.
 */
int vm_state_read(const uint8_t *data, size_t len, VmState **ret, GString *err);
void vm_state_free(VmState *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VmState, vm_state_free)

/* The name of counter @i of a VmCounters, and its place; for both ends
 * of the format and for tests. Return: false past the last. */
gboolean vm_state_counter(unsigned i, char name[48], size_t *ret_offset);

#endif /* RDMACM_MUX_VM_STATE_H */
