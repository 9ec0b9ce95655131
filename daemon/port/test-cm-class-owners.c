/* SPDX-License-Identifier: MIT */
/* Unit tests of the CM owner scan, on sysfs trees made in a temp dir in
 * the layouts the kernel uses (6.1's, checked in tests/vm, and the older
 * class/infiniband_cm one). */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm-class-owners.h"

typedef struct Fixture {
	char *root;
} Fixture;

static void make_dir(Fixture *f, const char *rel)
{
	g_autofree char *p = g_build_filename(f->root, rel, NULL);

	g_assert_cmpint(g_mkdir_with_parents(p, 0755), ==, 0);
}

static void write_file(Fixture *f, const char *rel, const char *text)
{
	g_autofree char *p = g_build_filename(f->root, rel, NULL);
	g_autofree char *dir = g_path_get_dirname(p);

	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	g_assert_true(g_file_set_contents(p, text, -1, NULL));
}

/* A device as the kernel shows it: node_type and a directory per port,
 * each with a file the kernel always has there. */
static void add_device(Fixture *f, const char *dev, const char *node_type, unsigned ports)
{
	g_autofree char *nt = g_strdup_printf("class/infiniband/%s/node_type", dev);

	write_file(f, nt, node_type);
	for (unsigned p = 1; p <= ports; p++) {
		g_autofree char *st = g_strdup_printf("class/infiniband/%s/ports/%u/state", dev, p);

		write_file(f, st, "4: ACTIVE\n");
	}
}

/* What ib_cm adds to a port it holds (6.1: four counter groups). */
static void add_ib_cm_counters(Fixture *f, const char *dev, unsigned port)
{
	static const char *const groups[] = { "cm_rx_msgs", "cm_tx_msgs", "cm_tx_retries",
					      "cm_rx_duplicates" };

	for (size_t i = 0; i < G_N_ELEMENTS(groups); i++) {
		g_autofree char *rel = g_strdup_printf("class/infiniband/%s/ports/%u/%s/req", dev,
						       port, groups[i]);
		write_file(f, rel, "0\n");
	}
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	f->root = g_dir_make_tmp("cmowners-XXXXXX", NULL);
	g_assert_nonnull(f->root);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->root);
	(void)data;
	g_assert_cmpint(system(cmd), ==, 0);
	g_free(f->root);
}

static const CmClassPortOwner *port_at(const CmClassOwners *o, guint i)
{
	g_assert_cmpuint(i, <, o->ports->len);
	return &g_array_index(o->ports, CmClassPortOwner, i);
}

/* Each "DEV:PORT=OWNER" in @want (space-separated) is what @o says of
 * that port, OWNER as cm_class_owner_name() writes it. */
static void expect_owners(const CmClassOwners *o, const char *want)
{
	g_auto(GStrv) each = g_strsplit(want, " ", -1);

	for (size_t i = 0; each[i]; i++) {
		char dev[32], owner[32];
		int port;
		const char *got;

		g_assert_cmpint(sscanf(each[i], "%31[^:]:%d=%31s", dev, &port, owner), ==, 3);
		got = cm_class_owner_name(cm_class_owners_get(o, dev, port));
		if (strcmp(got, owner) != 0)
			g_error("%s port %d: owner %s, want %s", dev, port, got, owner);
	}
}

static void test_no_rdma_at_all(Fixture *f, gconstpointer data)
{
	g_autoptr(CmClassOwners) o = NULL;
	g_autofree char *line = NULL;
	(void)data;

	g_assert_cmpint(cm_class_owners_scan(f->root, NULL, 0, &o), ==, 0);
	g_assert_false(o->ib_cm_loaded);
	g_assert_cmpuint(o->ports->len, ==, 0);
	line = cm_class_owners_summary(o);
	g_assert_cmpstr(line, ==, "no RDMA port; ib_cm is not loaded");
}

/* ib_cm not loaded: nothing in sysfs says who holds a port, but ours. */
static void test_ib_cm_not_loaded(Fixture *f, gconstpointer data)
{
	g_autoptr(CmClassOwners) o = NULL;
	(void)data;

	add_device(f, "rxe0", "1: CA\n", 1);
	add_device(f, "rxe1", "1: CA\n", 1);
	g_assert_cmpint(cm_class_owners_scan(f->root, "rxe0", 1, &o), ==, 0);
	g_assert_false(o->ib_cm_loaded);
	g_assert_cmpuint(o->ports->len, ==, 2);
	expect_owners(o, "rxe0:1=daemon rxe1:1=unknown");
	g_assert_cmpstr(cm_class_owner_name(cm_class_owners_get(o, "rxe1", 1)), ==, "unknown");
}

/*
 * The coexistence picture: the daemon holds rxe0, ib_cm (loaded after it)
 * holds rxe1 and left mlx5_0, both of whose ports some other agent kept
 * from it, alone; iw0 is iWARP.
 */
static void test_coexistence(Fixture *f, gconstpointer data)
{
	g_autoptr(CmClassOwners) o = NULL;
	g_autofree char *line = NULL;
	(void)data;

	add_device(f, "rxe0", "1: CA\n", 1);
	add_device(f, "rxe1", "1: CA\n", 1);
	add_ib_cm_counters(f, "rxe1", 1);
	add_device(f, "mlx5_0", "1: CA\n", 2);
	add_device(f, "iw0", "4: RNIC\n", 1);
	make_dir(f, "module/ib_cm");
	g_assert_cmpint(cm_class_owners_scan(f->root, "rxe0", 1, &o), ==, 0);
	g_assert_true(o->ib_cm_loaded);
	g_assert_cmpuint(o->ports->len, ==, 5);
	expect_owners(o, "rxe0:1=daemon rxe1:1=ib_cm mlx5_0:1=not_ib_cm mlx5_0:2=not_ib_cm "
			 "iw0:1=no_cm");
	g_assert_cmpuint(cm_class_owners_device_ports(o, "mlx5_0"), ==, 2);
	g_assert_cmpuint(cm_class_owners_device_ports(o, "rxe0"), ==, 1);
	g_assert_cmpuint(cm_class_owners_device_ports(o, "nosuch"), ==, 0);
	/* A port the scan did not see. */
	g_assert_cmpint(cm_class_owners_get(o, "rxe0", 2), ==, CM_OWNER_UNKNOWN);
	line = cm_class_owners_summary(o);
	g_assert_cmpstr(line, ==,
			"iw0:1 no_cm, mlx5_0:1 not_ib_cm, mlx5_0:2 not_ib_cm, rxe0:1 daemon, "
			"rxe1:1 ib_cm; ib_cm is loaded");
}

/* The daemon's own port of a two-port device: the other port is left by
 * ib_cm too (it takes a device whole or not at all). */
static void test_whole_device(Fixture *f, gconstpointer data)
{
	g_autoptr(CmClassOwners) o = NULL;
	(void)data;

	add_device(f, "mlx5_0", "1: CA\n", 2);
	add_device(f, "mlx5_1", "1: CA\n", 2);
	add_ib_cm_counters(f, "mlx5_1", 1);
	add_ib_cm_counters(f, "mlx5_1", 2);
	make_dir(f, "module/ib_cm");
	g_assert_cmpint(cm_class_owners_scan(f->root, "mlx5_0", 2, &o), ==, 0);
	expect_owners(o, "mlx5_0:1=not_ib_cm mlx5_0:2=daemon mlx5_1:1=ib_cm mlx5_1:2=ib_cm");
}

/* Older kernels: class/infiniband_cm/DEV/PORT, and ib_cm may be built in
 * (no module/ib_cm): its counters alone say it is there. */
static void test_old_layout(Fixture *f, gconstpointer data)
{
	g_autoptr(CmClassOwners) o = NULL;
	(void)data;

	add_device(f, "mlx4_0", "1: CA\n", 2);
	add_device(f, "mlx4_1", "1: CA\n", 1);
	make_dir(f, "class/infiniband_cm/mlx4_0/1/cm_rx_msgs");
	make_dir(f, "class/infiniband_cm/mlx4_0/2/cm_rx_msgs");
	g_assert_cmpint(cm_class_owners_scan(f->root, NULL, 0, &o), ==, 0);
	g_assert_true(o->ib_cm_loaded);
	expect_owners(o, "mlx4_0:1=ib_cm mlx4_0:2=ib_cm mlx4_1:1=not_ib_cm");
}

/* Devices in natural order (rxe2 before rxe10), ports by number; names in
 * ports/ that are not port numbers are not ports. */
static void test_order_and_names(Fixture *f, gconstpointer data)
{
	g_autoptr(CmClassOwners) o = NULL;
	(void)data;

	add_device(f, "rxe10", "1: CA\n", 1);
	add_device(f, "rxe2", "1: CA\n", 2);
	write_file(f, "class/infiniband/rxe2/ports/README", "not a port\n");
	make_dir(f, "class/infiniband/rxe2/ports/0");
	make_dir(f, "class/infiniband/rxe2/ports/01");
	make_dir(f, "class/infiniband/rxe2/ports/256");
	/* A device without a readable node_type counts as a CA. */
	make_dir(f, "class/infiniband/odd0/ports/1");
	g_assert_cmpint(cm_class_owners_scan(f->root, NULL, 0, &o), ==, 0);
	g_assert_cmpuint(o->ports->len, ==, 4);
	g_assert_cmpstr(port_at(o, 0)->dev, ==, "odd0");
	g_assert_cmpstr(port_at(o, 1)->dev, ==, "rxe2");
	g_assert_cmpuint(port_at(o, 1)->port, ==, 1);
	g_assert_cmpstr(port_at(o, 2)->dev, ==, "rxe2");
	g_assert_cmpuint(port_at(o, 2)->port, ==, 2);
	g_assert_cmpstr(port_at(o, 3)->dev, ==, "rxe10");
	g_assert_cmpint(port_at(o, 0)->owner, ==, CM_OWNER_UNKNOWN);
}

/* A class/infiniband that cannot be listed is an error, not "no device". */
static void test_unreadable(Fixture *f, gconstpointer data)
{
	g_autoptr(CmClassOwners) o = NULL;
	(void)data;

	write_file(f, "class/infiniband", "not a directory\n");
	g_assert_cmpint(cm_class_owners_scan(f->root, NULL, 0, &o), ==, -ENOTDIR);
	g_assert_null(o);
}

static void test_names(void)
{
	g_assert_cmpstr(cm_class_owner_name(CM_OWNER_UNKNOWN), ==, "unknown");
	g_assert_cmpstr(cm_class_owner_name(CM_OWNER_IB_CM), ==, "ib_cm");
	g_assert_cmpstr(cm_class_owner_name(CM_OWNER_NOT_IB_CM), ==, "not_ib_cm");
	g_assert_cmpstr(cm_class_owner_name(CM_OWNER_DAEMON), ==, "daemon");
	g_assert_cmpstr(cm_class_owner_name(CM_OWNER_NO_CM), ==, "no_cm");
	for (int i = CM_OWNER_UNKNOWN; i <= CM_OWNER_NO_CM; i++)
		g_assert_nonnull(cm_class_owner_text((CmClassOwner)i));
	/* A value outside the enum (a corrupt state) reads as unknown. */
	g_assert_cmpstr(cm_class_owner_name((CmClassOwner)99), ==, "unknown");
	g_assert_cmpstr(cm_class_owner_text((CmClassOwner)99), ==,
			cm_class_owner_text(CM_OWNER_UNKNOWN));
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) \
	g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/cm-class-owners/no-rdma", test_no_rdma_at_all);
	ADD("/cm-class-owners/ib-cm-not-loaded", test_ib_cm_not_loaded);
	ADD("/cm-class-owners/coexistence", test_coexistence);
	ADD("/cm-class-owners/whole-device", test_whole_device);
	ADD("/cm-class-owners/old-layout", test_old_layout);
	ADD("/cm-class-owners/order-and-names", test_order_and_names);
	ADD("/cm-class-owners/unreadable", test_unreadable);
#undef ADD
	g_test_add_func("/cm-class-owners/names", test_names);
	return g_test_run();
}
