/* SPDX-License-Identifier: MIT */
/*
 * Each VM's socket, and the VMs' life: the host binds a listening socket
 * per VM, <vm dir>/NAME.sock, with the owner, group and mode the
 * assignment names, and hands what connects there to the relay, which
 * learns the connection's VM from the socket it came in on (the kernel
 * keeps the listening socket's address with every connection it accepts:
 * getsockname() on the connection). VMs come from vms.d files at start and
 * from the control socket at any time (add, set, del), live.
 *
 * The boundary: the vm dir must be the daemon's user's and writable by
 * nobody else (else the daemon does not start: anyone who may write there
 * could put a socket of their own, or a symlink, where a VM's is); every
 * socket file is made and changed through a descriptor of the file
 * itself, never by following a path (listener_set_perms()); the owner,
 * group and mode are applied at every start, to the sockets taken over
 * too, and at every "vm set", and the connections that the new ones would
 * not let in are closed. A connection whose address is no current VM's
 * socket and not the shared socket is refused, never taken for a client
 * of the shared socket. A prefix shorter than /64, or any GID or prefix
 * that takes in the port's GID 0, is refused; "vm add" and "vm set" also
 * refuse a prefix that takes in a GID the port has now (an address the
 * host or another VM uses), naming it.
 *
 * What survives a restart, a crash or a re-execution: each VM's listening
 * socket, in the fd store as "vm.NAME" (connections waiting in its
 * backlog are served by the successor), and the assignments and per-VM
 * counters (vm-state.h) in the VMS section of the relay's hand-off state
 * (handoff-format.h), rewritten at every change and every 10 s while
 * counters move. A crash loses at most the counts of those 10 s.
 */
#ifndef RDMACM_MUX_VM_HOST_H
#define RDMACM_MUX_VM_HOST_H

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "listener.h"
#include "relay-handoff.h"
#include "relay.h"
#include "vm-table.h"

#define VM_HOST_STORE_PREFIX "vm."  /* + NAME: a VM's listening socket */
/* Default limits (rdmacm-mux --max-vms, --max-vm-clients). */
#define VM_HOST_MAX_VMS 256
#define VM_HOST_MAX_VM_CLIENTS 4

typedef struct VmHostConfig {
	const char *vm_dir;   /* where the VMs' sockets are bound */
	const char *conf_dir; /* vms.d, or NULL */
	uint32_t max_vms;
	uint32_t max_clients_per_vm;
	VmGidPolicy policy;
	gid_t default_group; /* the sockets' group unless a VM names one; -1: the daemon's */
	ListenerAllow allow; /* the main socket's allow-lists */
	unsigned retry_ms;   /* out of fds: accept again after this */
	/* The main (shared) socket, not taken over: a connection whose
	 * address is its address is the shared socket's; one whose address is
	 * neither that nor a VM's socket is nobody's and is refused. */
	int main_fd;
	bool allow_wide_prefix; /* --allow-wide-prefix: prefixes shorter than /64 */
} VmHostConfig;

typedef struct VmHost VmHost;

/* Whether an fd-store name is the host's (a VM's socket). */
bool vm_host_is_stored_name(const char *name);

/**
 * vm_host_new() - the VMs of the previous process (@state: the bytes
 * relay_handoff_peek_vms() found, or NULL; @stored: fd-store name -> fd,
 * of which the host takes its sockets out) and of @cfg->conf_dir, their
 * sockets taken over or bound, and the relay told (relay_set_vms()).
 * Call after relay_new() and before relay_handoff_start(). Whatever does
 * not hold up is dropped with a log line: a bad vms.d file leaves the VM as
 * it was; a VM whose socket cannot be bound keeps its GIDs from everyone
 * else.
 * Return: 0, or a negative errno (out of memory; logged).
 */
int vm_host_new(sd_event *event, Relay *relay, const VmHostConfig *cfg, GHashTable *stored,
		GBytes *state, VmHost **ret);
/* Stop serving the VMs' sockets; unless vm_host_handoff() came first,
 * their files are removed. NULL-safe. */
void vm_host_free(VmHost *h);
/* A planned hand-off follows: keep the state as it is now, and the
 * socket files for the successor. */
void vm_host_handoff(VmHost *h);
/* The fds a re-executed daemon needs (the sockets), with their names;
 * the state is written into the one relay_handoff_export() passed on
 * (call after it). */
void vm_host_export(VmHost *h, RelayHandoffFdFn fn, void *userdata);

VmTable *vm_host_table(const VmHost *h);
VmGidPolicy vm_host_policy(const VmHost *h);
const char *vm_host_dir(const VmHost *h);
/* Where @vm's socket is, or NULL when it has none (its bind failed). */
const char *vm_host_socket(const VmHost *h, const VmEntry *vm);

/**
 * vm_host_add() - a new VM (rdmacm-muxctl vm add): its socket bound, its
 * GIDs taken back from any client that held them. A VM of that name that
 * exists is refused (-EEXIST), naming the domain that made it.
 * Return: 0 with what was done in @msg, or a negative errno with why not
 * (and nothing changed).
 */
int vm_host_add(VmHost *h, const VmSpec *spec, GString *msg);
/* Change what @edit gives (@given: VM_SPEC_HAS_*) of the VM named there
 * (vm set); its clients lose the GIDs it no longer has, and its
 * connections that a new owner, group or mode would refuse are closed.
 * With VM_SPEC_HAS_DOMAIN, only a VM that domain made is changed (-EPERM
 * otherwise). As vm_host_add(). */
int vm_host_set(VmHost *h, const VmSpec *edit, unsigned given, GString *msg);
/* Remove VM @name (vm del): its clients are disconnected, its GIDs and
 * socket go; with @domain (or NULL), only if that domain made it. As
 * vm_host_add(). */
int vm_host_del(VmHost *h, const char *name, const char *domain, GString *msg);

#endif /* RDMACM_MUX_VM_HOST_H */
