/* SPDX-License-Identifier: MIT */
/*
 * The port's GID table, read from sysfs.
 *
 * libibumad does not expose GID tables, so we read
 * $SYSFS_PATH/class/infiniband/DEV/ports/N/gids/K (and gid_attrs/types/K),
 * as rdma-core's tools do. SYSFS_PATH (default /sys) moves the root; the
 * simulated fabric writes the same tree, so tests run this very code.
 * Where the entries come from is a source chosen when the table is made:
 * sysfs (gid_table_open()), or another (gid_table_new(): the in-process
 * tests' port keeps its table in memory).
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

/* Where a table's entries come from. */
typedef struct GidTableSource {
	/* Entries in the table (its highest index + 1), or a negative errno. */
	int (*count)(void *userdata);
	/* Entry @index now in @gid (all zero when empty); @expect is what the
	 * table holds for it (a source may compare rather than parse).
	 * Return: 0, or a negative errno (the entry reads as empty). */
	int (*read)(void *userdata, unsigned index, const uint8_t expect[GID_LEN],
		    uint8_t gid[GID_LEN]);
	/* Entry @index's type (GID_TYPE_UNKNOWN when it cannot be read). */
	GidType (*type)(void *userdata, unsigned index);
	/* Free @userdata (or NULL). */
	void (*free)(void *userdata);
	void *userdata;
} GidTableSource;

/* The source whose functions are named after the op they fill, on @data:
 * GID_TABLE_SOURCE(gid_sysfs, fs) takes gid_sysfs_count, ... */
#define GID_TABLE_SOURCE(prefix, data)                                                \
	{ .count = prefix##_count, .read = prefix##_read, .type = prefix##_type, \
	  .free = prefix##_free, .userdata = (data) }

/**
 * gid_table_open() - read the GID table of @dev port @port from sysfs.
 * Return: 0, or a negative errno (-ENOENT: no such sysfs directory).
 */
int gid_table_open(const char *dev, int port, GidTable **ret);
/**
 * gid_table_new() - a table whose entries come from @src (its userdata is
 * the table's from now on, freed with it, also on failure).
 * Return: 0 or a negative errno.
 */
int gid_table_new(const GidTableSource *src, GidTable **ret);
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
 * gid_table_get() - the GID at @index now: the entry is re-read from its
 * source unless that was done in @epoch already.
 * Return: the GID (valid until the next call), or NULL for an empty entry.
 */
const uint8_t *gid_table_get(GidTable *t, unsigned index, uint64_t epoch);
/* The GID at @index as last read (gid_table_reload() reads them all), or
 * NULL for an empty entry; for checks that are no send's and need no
 * epoch. */
const uint8_t *gid_table_peek(const GidTable *t, unsigned index);
/* Whether @index holds @gid now (re-read as gid_table_get() does). */
bool gid_table_holds(GidTable *t, unsigned index, const uint8_t gid[GID_LEN], uint64_t epoch);

/*
 * The umad ABI (and the kernel's address handles) carry a GID index in 8
 * bits, so only the first 256 entries can be named in a send, and a
 * received index is the real one modulo 256.
 */
#define GID_TABLE_UMAD_INDEXES 256

/* Whether @gid (not the zero GID) sits at an index whose low 8 bits are
 * @index8. */
bool gid_table_matches_index8(GidTable *t, const uint8_t gid[GID_LEN], uint8_t index8);

unsigned gid_table_size(const GidTable *t);
/* Bumped on every reload that changed the table. */
unsigned gid_table_generation(const GidTable *t);

#endif /* RDMACM_MUX_GID_TABLE_H */
