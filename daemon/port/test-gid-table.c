/* SPDX-License-Identifier: MIT */
/* Unit tests of the sysfs GID table reader, on a tree made in a temp dir
 * and pointed to by SYSFS_PATH, the same way the simulated fabric does. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "gid-table.h"
#include "util.h"
#include "unit-test.h"

typedef struct Fixture {
	char *root;
	char *port_dir;
} Fixture;

static void write_entry(Fixture *f, unsigned k, const char *gid_sysfs, const char *type)
{
	g_autofree char *gp = g_strdup_printf("%s/gids/%u", f->port_dir, k);
	g_autofree char *tp = g_strdup_printf("%s/gid_attrs/types/%u", f->port_dir, k);

	g_assert_true(g_file_set_contents(gp, gid_sysfs, -1, NULL));
	if (type)
		g_assert_true(g_file_set_contents(tp, type, -1, NULL));
	else
		g_unlink(tp);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	f->root = g_dir_make_tmp("gidtable-XXXXXX", NULL);
	f->port_dir = g_strdup_printf("%s/class/infiniband/simX/ports/1", f->root);
	g_autofree char *gids = g_strdup_printf("%s/gids", f->port_dir);
	g_autofree char *types = g_strdup_printf("%s/gid_attrs/types", f->port_dir);
	g_assert_cmpint(g_mkdir_with_parents(gids, 0755), ==, 0);
	g_assert_cmpint(g_mkdir_with_parents(types, 0755), ==, 0);
	/* The kernel's format: eight groups of four hex digits. */
	write_entry(f, 0, "fe80:0000:0000:0000:0000:0000:0000:000a\n", "RoCE v2\n");
	write_entry(f, 1, "0000:0000:0000:0000:0000:ffff:0a00:0001\n", "IB/RoCE v1\n");
	write_entry(f, 2, "0000:0000:0000:0000:0000:ffff:0a00:0001\n", "RoCE v2\n");
	write_entry(f, 3, "0000:0000:0000:0000:0000:0000:0000:0000\n", NULL);
	g_setenv("SYSFS_PATH", f->root, TRUE);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	unit_test_remove_tree(f->root);
	g_free(f->port_dir);
}

UNIT_FIXTURE_TEST("/gid-table/read", NULL, fixture_setup, test_reads_and_prefers_roce_v2)
{
	g_autoptr(GidTable) t = NULL;
	uint8_t gid[16];
	(void)f;
	(void)data;

	g_assert_cmpint(gid_table_open("simX", 1, &t), ==, 0);
	g_assert_cmpuint(gid_table_size(t), ==, 4);
	g_assert_cmpint(gid_from_string("::ffff:10.0.0.1", gid), ==, 0);
	/* v1 and v2 entries of one address: send from the v2 one. */
	g_assert_cmpint(gid_table_find(t, gid), ==, 2);
	g_assert_cmpint(gid_from_string("fe80::a", gid), ==, 0);
	g_assert_cmpint(gid_table_find(t, gid), ==, 0);
	g_assert_nonnull(gid_table_get(t, 2, 1));
	g_assert_cmpmem(gid_table_get(t, 1, 1), 16, gid_table_get(t, 2, 1), 16);
	g_assert_null(gid_table_get(t, 3, 1)); /* an empty entry */
	g_assert_null(gid_table_get(t, 99, 1));
}

UNIT_FIXTURE_TEST("/gid-table/reload-on-miss", NULL, fixture_setup, test_reloads_on_miss)
{
	g_autoptr(GidTable) t = NULL;
	uint8_t gid[16];
	unsigned gen;
	(void)data;

	g_assert_cmpint(gid_table_open("simX", 1, &t), ==, 0);
	gen = gid_table_generation(t);
	g_assert_cmpint(gid_from_string("::ffff:10.0.1.7", gid), ==, 0);
	g_assert_cmpint(gid_table_find(t, gid), ==, -ENOENT);

	/* An address appears (an IP was added); a miss re-reads the table
	 * once the minimum interval has passed. */
	write_entry(f, 3, "0000:0000:0000:0000:0000:ffff:0a00:0107\n", "RoCE v2\n");
	g_usleep(GID_TABLE_RELOAD_MIN_USEC + 10000);
	g_assert_cmpint(gid_table_find(t, gid), ==, 3);
	g_assert_cmpuint(gid_table_generation(t), !=, gen);
}

/* An address moves: another GID takes the index of one that went. The
 * entry is re-read once per epoch, so the next epoch sees it, the index
 * lookup follows, and the old GID is found where it went. */
UNIT_FIXTURE_TEST("/gid-table/entry-reread-per-epoch", NULL, fixture_setup, test_entry_reread_per_epoch)
{
	g_autoptr(GidTable) t = NULL;
	uint8_t x[16], y[16];
	unsigned gen;
	(void)data;

	g_assert_cmpint(gid_table_open("simX", 1, &t), ==, 0);
	g_assert_cmpint(gid_from_string("::ffff:10.0.0.1", x), ==, 0);
	g_assert_cmpint(gid_from_string("::ffff:10.0.9.9", y), ==, 0);
	g_assert_true(gid_table_holds(t, 2, x, 1));
	gen = gid_table_generation(t);

	write_entry(f, 2, "0000:0000:0000:0000:0000:ffff:0a00:0909\n", "RoCE v2\n");
	write_entry(f, 3, "0000:0000:0000:0000:0000:ffff:0a00:0001\n", "RoCE v2\n");
	/* Within the epoch the entry was read in, no file is read again. */
	g_assert_true(gid_table_holds(t, 2, x, 1));
	/* The next epoch re-reads it: Y now, and the whole table follows. */
	g_assert_false(gid_table_holds(t, 2, x, 2));
	g_assert_true(gid_table_holds(t, 2, y, 2));
	g_assert_cmpmem(gid_table_get(t, 2, 2), 16, y, 16);
	g_assert_cmpuint(gid_table_generation(t), !=, gen);
	g_assert_cmpint(gid_table_find(t, y), ==, 2);
	g_assert_cmpint(gid_table_find(t, x), ==, 3); /* the v2 entry it moved to */

	/* An entry that empties is seen empty in the next epoch. */
	write_entry(f, 3, "0000:0000:0000:0000:0000:0000:0000:0000\n", NULL);
	g_assert_nonnull(gid_table_get(t, 3, 2));
	g_assert_null(gid_table_get(t, 3, 3));
}

UNIT_FIXTURE_TEST("/gid-table/missing-port", NULL, fixture_setup, test_missing_port)
{
	GidTable *t = NULL;
	(void)f;
	(void)data;

	g_assert_cmpint(gid_table_open("simX", 2, &t), ==, -ENOENT);
	g_assert_null(t);
}

/*
 * A table past the 256 indexes a umad header carries (soft-RoCE has 1024):
 * a received index names entries 2, 258, 514...; a GID found at one of
 * them matches, and the zero GID never does, though the empty entries
 * read as zero (a REQ whose RemotePortGID is zero was routed to "::").
 */
UNIT_FIXTURE_TEST("/gid-table/index8", NULL, fixture_setup, test_index8)
{
	g_autoptr(GidTable) t = NULL;
	uint8_t gid[16], zero[16] = { 0 };
	(void)data;

	for (unsigned k = 4; k < 600; k++)
		write_entry(f, k, "0000:0000:0000:0000:0000:0000:0000:0000\n", NULL);
	write_entry(f, 514, "0000:0000:0000:0000:0000:ffff:0a00:0202\n", "RoCE v2\n");
	g_assert_cmpint(gid_table_open("simX", 1, &t), ==, 0);
	g_assert_cmpuint(gid_table_size(t), ==, 600);
	g_assert_cmpint(gid_from_string("::ffff:10.0.2.2", gid), ==, 0);
	g_assert_true(gid_table_matches_index8(t, gid, 2));
	g_assert_false(gid_table_matches_index8(t, gid, 3));
	g_assert_false(gid_table_matches_index8(t, zero, 3));
	g_assert_false(gid_table_matches_index8(t, zero, 2));
}

UNIT_TEST_MAIN()
