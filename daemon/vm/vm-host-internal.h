/* SPDX-License-Identifier: MIT */
/*
 * What the VM host's own units share (vm-host.c, vm-host-sockets.c), and
 * nothing else includes: the VmHost, a VM's socket, and the calls between
 * the two.
 */
#ifndef RDMACM_MUX_VM_HOST_INTERNAL_H
#define RDMACM_MUX_VM_HOST_INTERNAL_H

#include "vm-host.h"

typedef struct VmSocket {
	VmHost *host;
	char *name; /* the VM's */
	char *path; /* where it is bound (the address its connections carry) */
	int fd;
	Listener *listener;
} VmSocket;

struct VmHost {
	sd_event *event;
	Relay *relay;
	VmHostConfig cfg;
	char *vm_dir;
	char *conf_dir;
	VmTable *table;
	GHashTable *sockets; /* VM name -> VmSocket* (owned) */
	GHashTable *by_path; /* socket path -> VmSocket* */
	uint64_t sequence;
	GBytes *state_bytes; /* the VMs' state last kept */
	char *main_address;  /* the shared socket's (vm_socket_address()), or NULL */
	sd_event_source *save_timer;
	bool keep_files; /* a hand-off: the successor serves the same files */
};

/* ---- vm-host-sockets.c ---- */

/* A VmSocket goes (the hash tables' free function). */
void vm_socket_free(gpointer p);
/* What @spec's socket gets: no owner named is the daemon's user, no mode
 * its owner alone (VM_DEFAULT_MODE), never a whole group by default. */
void vm_host_perms(const VmHost *h, const VmSpec *spec, ListenerPerms *ret);
/* Whether @a and @b give a socket the same owner, group and mode. */
bool vm_host_same_perms(const VmSpec *a, const VmSpec *b);
/* The VMs' directory checked as sshd's StrictModes checks a home.
 * Return: 0, or a negative errno with why in @msg. */
int vm_host_check_dir(const VmHost *h, GString *msg);
/* Bind and serve @vm's socket, stored for a successor. Return: 0, or a
 * negative errno with why in @msg. */
int vm_host_bind(VmHost *h, const VmEntry *vm, GString *msg);
/* Stop serving VM @name's socket: out of the store, its file removed
 * unless a successor serves it. */
void vm_host_unbind(VmHost *h, const char *name);
/* The address @fd is bound to, or NULL (g_free()). */
char *vm_socket_address(int fd);
/* RelayVmOfFn: the VM whose socket @fd was accepted on. */
int vm_host_vm_of(void *userdata, int fd, VmEntry **ret);
/* The listening sockets a predecessor left (name -> fd, taken over). */
void vm_host_adopt_sockets(VmHost *h, GHashTable *fds);

#endif /* RDMACM_MUX_VM_HOST_INTERNAL_H */
