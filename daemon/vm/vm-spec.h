/* SPDX-License-Identifier: MIT */
/*
 * What the operator assigns to one VM: its name, its GIDs (exact ones, and
 * prefixes for IPv6 ranges) and who may connect to its socket. The two
 * ways an assignment is written down, parsed and checked here, with no
 * other state, so that both can be fuzzed:
 *
 *   - a vms.d file, NAME.conf (the VM's name is the file's), lines of
 *     "key = value", '#' comments and blank lines:
 *         gid = fe80::5054:ff:fe12:3456      (repeatable)
 *         prefix = 2001:db8:1::/64           (repeatable)
 *         owner = libvirt-qemu               (user name or uid)
 *         group = kvm                        (group name or gid)
 *         mode = 0660                        (octal)
 *   - the arguments of the control socket's "vm add" and "vm set":
 *     tokens key=value with the same keys, owner and group as numbers,
 *     and one more: domain=UUID, the libvirt domain that made the VM
 *     (its hook passes it), so that another domain's hook cannot take the
 *     VM over or remove it.
 *
 * Every error names what is wrong: the line ("line 3: ...") or the
 * argument ("argument 2 'gid=zz': ..."); the caller adds the file's name.
 * A bad input changes nothing: the spec is written only when all of it
 * holds up.
 */
#ifndef RDMACM_MUX_VM_SPEC_H
#define RDMACM_MUX_VM_SPEC_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h" /* GID_LEN */

/* A VM's name: 1..VM_NAME_MAX of [A-Za-z0-9_.+-], not starting with '.'
 * or '-'. It is a file name (NAME.sock, NAME.conf) and a name in the
 * service manager's fd store, hence the short alphabet. */
#define VM_NAME_MAX 48
#define VM_MAX_GIDS 64	   /* exact GIDs per VM */
#define VM_MAX_PREFIXES 16 /* prefixes per VM */
/* Prefixes shorter than this would hand most of the GID space to one VM:
 * the parsers refuse them whatever the daemon's options. */
#define VM_PREFIX_MIN_LEN 8
/* Prefixes shorter than this are refused unless the daemon runs with
 * --allow-wide-prefix: /64 is one IPv6 subnet, what a VM's SLAAC
 * addresses need; a shorter one reaches into the addresses of others
 * (fe80::/10 holds every port's link-local GID 0, ::/8 every IPv4-mapped
 * RoCE GID). vm-host.c applies it. */
#define VM_PREFIX_FLOOR 64
/* A libvirt domain's UUID as text: 8-4-4-4-12 hex digits. */
#define VM_DOMAIN_LEN 36
/* Bounds on what the parsers read. */
#define VM_CONF_MAX_BYTES 65536
#define VM_CONF_MAX_LINE 1024

#define VM_ID_NONE UINT32_MAX /* no owner or group given */

typedef struct VmPrefix {
	uint8_t gid[GID_LEN]; /* the bits past len are zero */
	uint8_t len;	      /* VM_PREFIX_MIN_LEN..128 */
} VmPrefix;

typedef struct VmSpec {
	char name[VM_NAME_MAX + 1];
	uint8_t gids[VM_MAX_GIDS][GID_LEN]; /* distinct, none zero */
	uint32_t n_gids;
	VmPrefix prefixes[VM_MAX_PREFIXES]; /* distinct */
	uint32_t n_prefixes;
	uint32_t owner; /* the socket's owner uid, or VM_ID_NONE */
	uint32_t group; /* its group, or VM_ID_NONE */
	uint32_t mode;	/* its mode, or VM_ID_NONE for the default (0600) */
	/* The libvirt domain that made the VM, lower-case UUID text, or "". */
	char domain[VM_DOMAIN_LEN + 1];
} VmSpec;

/* A VM socket's mode when its assignment names none: its owner alone. */
#define VM_DEFAULT_MODE 0600

/* Which parts of a spec a "vm set" gives (the rest is kept). */
#define VM_SPEC_HAS_GIDS 0x1u /* any gid= or prefix=: both lists are replaced */
#define VM_SPEC_HAS_OWNER 0x2u
#define VM_SPEC_HAS_GROUP 0x4u
#define VM_SPEC_HAS_MODE 0x8u
#define VM_SPEC_HAS_DOMAIN 0x10u /* domain=: never changes a VM, only checks whose it is */

/* Resolve a user (@group false) or group name to its id; 0 or -ENOENT. */
typedef int (*VmSpecResolveFn)(const char *name, bool group, uint32_t *ret);

/* Whether @name is a valid VM name. */
bool vm_name_valid(const char *name);

/* An empty spec named @name (not checked). */
void vm_spec_init(VmSpec *spec, const char *name);

/**
 * vm_prefix_parse() - "2001:db8::/64" into @ret.
 * Return: 0, or -EINVAL with the reason in @err.
 */
int vm_prefix_parse(const char *text, VmPrefix *ret, GString *err);
/* Whether @gid lies in @p. */
bool vm_prefix_contains(const VmPrefix *p, const uint8_t gid[GID_LEN]);
/* Whether two prefixes share any GID. */
bool vm_prefix_overlaps(const VmPrefix *a, const VmPrefix *b);
/* "2001:db8::/64", in @buf (at least 50 bytes). */
const char *vm_prefix_to_string(const VmPrefix *p, char buf[50]);

/* Whether @gid is @spec's: one of its GIDs, or in one of its prefixes. */
bool vm_spec_has_gid(const VmSpec *spec, const uint8_t gid[GID_LEN]);

/**
 * vm_spec_parse_conf() - a vms.d file's @len bytes at @text, for the VM
 * @name (from the file's name), into @ret. Owner and group may be names
 * when @resolve is given.
 * Return: 0, or -EINVAL with "line N: ..." (or what is wrong with the
 * whole) appended to @err; @ret is then unchanged.
 */
int vm_spec_parse_conf(const char *name, const char *text, size_t len, VmSpecResolveFn resolve,
		       VmSpec *ret, GString *err);

/**
 * vm_spec_parse_args() - the @n key=value tokens of "vm add NAME ..." or
 * "vm set NAME ...". *@ret_given says which parts were given
 * (VM_SPEC_HAS_*). Owner and group are numbers.
 * Return: 0, or -EINVAL with "argument N 'TOKEN': ..." appended to @err
 * (N counts from 1); @ret is then unchanged.
 */
int vm_spec_parse_args(const char *name, const char *const *args, unsigned n, VmSpec *ret,
		       unsigned *ret_given, GString *err);

/* @spec with the parts of @edit that @given names (VM_SPEC_HAS_*; the
 * domain is not one of them: a VM keeps the domain that made it). */
void vm_spec_apply(VmSpec *spec, const VmSpec *edit, unsigned given);

/* Whether @text is a UUID (8-4-4-4-12 hex digits, either case). */
bool vm_domain_valid(const char *text);

/**
 * vm_spec_admits() - whether a peer of uid @uid and primary gid @gid may
 * connect to a socket made for @spec, as the kernel's permission check on
 * the socket file decides: root always; else the owner's, the group's or
 * the others' write bit, by the first class the peer is in. @own_uid and
 * @own_gid stand for an owner and a group @spec does not name (the
 * daemon's). A supplementary group cannot be seen from a connection's
 * credentials: a peer let in by one alone is not admitted.
 */
bool vm_spec_admits(const VmSpec *spec, uint32_t own_uid, uint32_t own_gid, uint32_t uid,
		    uint32_t gid);

/**
 * vm_spec_check() - what every assignment must be, however it was made:
 * a valid name and at least one GID or prefix.
 * Return: 0, or -EINVAL with the reason in @err.
 */
int vm_spec_check(const VmSpec *spec, GString *err);

#endif /* RDMACM_MUX_VM_SPEC_H */
