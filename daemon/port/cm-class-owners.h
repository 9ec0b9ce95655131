/* SPDX-License-Identifier: MIT */
/*
 * Who owns the CM class on each port of each RDMA device, as far as sysfs
 * can tell (cm-class-owners.c).
 *
 * The kernel's CM (ib_cm) registers the class on every port of each device
 * it adds, and gives each such port its counters: the directory
 * ports/N/cm_rx_msgs under class/infiniband/DEV (older kernels put them in
 * class/infiniband_cm/DEV/N instead). It adds a device whole or not at all:
 * when the class is already taken on any port of it, ib_cm leaves the whole
 * device alone, and it tries a device only when the device appears or when
 * ib_cm loads. A user-space agent (an rdmacm-mux, any umad program) leaves
 * no trace in sysfs, so a port ib_cm does not hold is free or held by such
 * an agent; only the daemon knows its own port.
 */
#ifndef RDMACM_MUX_CM_CLASS_OWNERS_H
#define RDMACM_MUX_CM_CLASS_OWNERS_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum CmClassOwner {
	CM_OWNER_UNKNOWN,   /* ib_cm is not loaded: free, or a user-space agent */
	CM_OWNER_IB_CM,	    /* ib_cm's counters are on the port */
	CM_OWNER_NOT_IB_CM, /* ib_cm is loaded and left this device alone */
	CM_OWNER_DAEMON,    /* this daemon */
	CM_OWNER_NO_CM,	    /* not an InfiniBand or RoCE port (iWARP, usNIC) */
} CmClassOwner;

typedef struct CmClassPortOwner {
	char *dev;
	uint32_t port;
	CmClassOwner owner;
} CmClassPortOwner;

typedef struct CmClassOwners {
	bool ib_cm_loaded;
	GArray *ports; /* CmClassPortOwner, by device name, then port number */
} CmClassOwners;

/**
 * cm_class_owners_scan() - read who owns the CM class on every RDMA port.
 * @sysfs_root: "/sys", or the root of a tree made the same way (tests)
 * @self_dev: the daemon's device, whose port @self_port it reports as
 *            CM_OWNER_DAEMON; NULL when the daemon holds none
 *
 * No RDMA device at all (no class/infiniband) is an empty list.
 * Return: 0, or a negative errno when a directory cannot be read.
 */
int cm_class_owners_scan(const char *sysfs_root, const char *self_dev, uint32_t self_port,
		   CmClassOwners **ret);
/* Free a scan; NULL-safe. */
void cm_class_owners_free(CmClassOwners *o);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CmClassOwners, cm_class_owners_free)

/* The owner of @dev port @port; CM_OWNER_UNKNOWN when the scan did not
 * see that port. */
CmClassOwner cm_class_owners_get(const CmClassOwners *o, const char *dev, uint32_t port);

/* How many ports of @dev the scan saw. */
unsigned cm_class_owners_device_ports(const CmClassOwners *o, const char *dev);

/* The JSON name: "unknown", "ib_cm", "not_ib_cm", "daemon", "no_cm". */
const char *cm_class_owner_name(CmClassOwner owner);

/* A few words for people: "ib_cm", "this rdmacm-mux", ... */
const char *cm_class_owner_text(CmClassOwner owner);

/**
 * cm_class_owners_summary() - one line for the journal: "DEV:PORT OWNER, ...",
 * then whether ib_cm is loaded.
 * Return: a new string (g_free()).
 */
char *cm_class_owners_summary(const CmClassOwners *o);

#endif /* RDMACM_MUX_CM_CLASS_OWNERS_H */
