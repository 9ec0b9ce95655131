/* SPDX-License-Identifier: MIT */
/*
 * The port's GID table, read from sysfs.
 *
 * libibumad does not expose GID tables, so we read
 * $SYSFS_PATH/class/infiniband/DEV/ports/N/gids/K (and gid_attrs/types/K),
 * as rdma-core's tools do. SYSFS_PATH (default /sys) moves the root; the
 * simulated fabric writes the same tree, so tests run this very code.
 *
 * GIDs come and go with IP addresses, and when one goes another may take
 * its index at once. So the entries the relay acts on are re-read before
 * use: once per "epoch", which the caller advances every time its event
 * loop wakes up (a batch of MADs). A lookup that misses re-reads the whole
 * table (at most once per GID_TABLE_RELOAD_MIN_USEC), and so does an entry
 * found changed.
 */
#ifndef RDMACM_MUX_GID_TABLE_H
#define RDMACM_MUX_GID_TABLE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "cm-codec.h" /* GID_LEN */

#define GID_TABLE_RELOAD_MIN_USEC 100000u

typedef enum GidType {
	GID_TYPE_UNKNOWN,
	GID_TYPE_IB_ROCE_V1, /* "IB/RoCE v1" */
	GID_TYPE_ROCE_V2,    /* "RoCE v2" */
} GidType;

typedef struct GidTable GidTable;

/**
 * gid_table_open() - read the GID table of @dev port @port.
 * Return: 0, or a negative errno (-ENOENT: no such sysfs directory).
 */
int gid_table_open(const char *dev, int port, GidTable **ret);
void gid_table_free(GidTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(GidTable, gid_table_free)

/* Re-read now. Return: 0 or a negative errno. */
int gid_table_reload(GidTable *t);

/**
 * gid_table_find() - the index to send from for @gid (RoCE v2 preferred
 * when the GID has several entries). Re-reads the table on a miss.
 * Return: the index, or -ENOENT.
 */
int gid_table_find(GidTable *t, const uint8_t gid[GID_LEN]);

/**
 * gid_table_get() - the GID at @index now: the entry is re-read from sysfs
 * unless that was done in @epoch already.
 * Return: the GID (valid until the next call), or NULL for an empty entry.
 */
const uint8_t *gid_table_get(GidTable *t, unsigned index, uint64_t epoch);
/* Whether @index holds @gid now (re-read as gid_table_get() does). */
bool gid_table_holds(GidTable *t, unsigned index, const uint8_t gid[GID_LEN], uint64_t epoch);

/*
 * The umad ABI (and the kernel's address handles) carry a GID index in 8
 * bits, so only the first 256 entries can be named in a send, and a
 * received index is the real one modulo 256.
 */
#define GID_TABLE_UMAD_INDEXES 256

/* Whether @gid sits at an index whose low 8 bits are @index8. */
bool gid_table_matches_index8(GidTable *t, const uint8_t gid[GID_LEN], uint8_t index8);

unsigned gid_table_size(const GidTable *t);
/* Bumped on every reload that changed the table. */
unsigned gid_table_generation(const GidTable *t);

#endif /* RDMACM_MUX_GID_TABLE_H */
