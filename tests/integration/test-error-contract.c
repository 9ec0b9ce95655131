/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the error contract: a failure is logged once,
 * where it is handled, at the level its handler gives it. The listening
 * sockets' setup says what failed and its caller logs it: the main socket
 * is fatal (one error line, exit 1), the control socket optional (one
 * warning line, the daemon serves on), and so is a VM's (one error line).
 */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "unit-test.h"

typedef struct Fixture {
	Fabric *fabric;
	Daemon *d;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	f->fabric = fabric_new("two-hosts");
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hosts_free(f->fabric, f->d, NULL, NULL, 0);
}

/* The lines of @d's output that hold @needle. */
static GPtrArray *lines_with(const Daemon *d, const char *needle)
{
	g_autofree char *out = daemon_output(d);
	g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
	GPtrArray *hits = g_ptr_array_new_with_free_func(g_free);

	for (char **l = lines; *l; l++)
		if (strstr(*l, needle))
			g_ptr_array_add(hits, g_strdup(*l));
	return hits;
}

/* A directory where the control socket goes: the daemon serves without
 * it, and says so once, as a warning. */
UNIT_FIXTURE_TEST("/error-contract/control-socket-unusable", NULL, fixture_setup,
		  test_control_socket_unusable)
{
	g_autofree char *ctl = g_strdup_printf("%s/mux-simA-1.ctl", f->fabric->dir);
	g_autoptr(GPtrArray) hits = NULL;
	(void)data;

	g_assert_cmpint(g_mkdir(ctl, 0700), ==, 0);
	f->d = daemon_start(f->fabric, "simA", NULL);
	hits = lines_with(f->d, ctl);
	g_assert_cmpuint(hits->len, ==, 1);
	g_assert_nonnull(strstr(hits->pdata[0], "rdmacm-mux: warning: "));
	g_assert_nonnull(strstr(hits->pdata[0], "exists and is not a socket"));
	g_assert_nonnull(strstr(hits->pdata[0], "running without the control socket"));
	g_assert_cmpint(daemon_stop(f->d), ==, 0);
	g_assert_cmpint(g_rmdir(ctl), ==, 0);
}

/* A directory where the main socket goes: one error line, exit 1. */
UNIT_FIXTURE_TEST("/error-contract/main-socket-unusable", NULL, fixture_setup,
		  test_main_socket_unusable)
{
	g_autofree char *sock = g_strdup_printf("%s/mux-simA-1", f->fabric->dir);
	g_autoptr(GPtrArray) hits = NULL;
	g_autoptr(GPtrArray) errors = NULL;
	(void)data;

	g_assert_cmpint(g_mkdir(sock, 0700), ==, 0);
	f->d = daemon_launch(f->fabric, "simA", NULL);
	g_assert_cmpint(daemon_wait_exit(f->d, 20000), ==, 1);
	hits = lines_with(f->d, sock);
	errors = lines_with(f->d, "rdmacm-mux: error: ");
	g_assert_cmpuint(hits->len, ==, 1);
	g_assert_cmpuint(errors->len, ==, 1);
	g_assert_nonnull(strstr(hits->pdata[0], "rdmacm-mux: error: "));
	g_assert_nonnull(strstr(hits->pdata[0], "exists and is not a socket"));
	g_assert_cmpint(g_rmdir(sock), ==, 0);
}

/*
 * A VM whose socket cannot be bound at start (its path is too long for a
 * UNIX socket): one error line, which says why and what it means, and the
 * daemon serves on.
 */
UNIT_FIXTURE_TEST("/error-contract/vm-socket-unusable", NULL, fixture_setup,
		  test_vm_socket_unusable)
{
	g_autofree char *vms = g_strdup_printf("%s/vms.d", f->fabric->dir);
	g_autofree char *conf = g_strdup_printf("%s/far.conf", vms);
	g_autofree char *far = g_strdup_printf("%s/%0120d", f->fabric->dir, 0);
	g_autofree char *vms_opt = g_strdup_printf("--vms-dir=%s", vms);
	g_autofree char *dir_opt = g_strdup_printf("--vm-dir=%s", far);
	g_autofree char *out = NULL;
	g_autoptr(GPtrArray) errors = NULL;
	(void)data;

	g_assert_cmpint(g_mkdir(vms, 0755), ==, 0);
	g_assert_true(g_file_set_contents(conf, "gid = ::ffff:10.0.1.5\n", -1, NULL));
	f->d = daemon_start(f->fabric, "simA", (const char *const[]){ vms_opt, dir_opt, NULL });
	/* Said before the daemon says it serves (after the VMs, run()). */
	for (int i = 0; i < 2000 && !(out && strstr(out, "serving simA port 1")); i++) {
		g_free(out);
		out = daemon_output(f->d);
		g_usleep(10000);
	}
	g_assert_nonnull(strstr(out, "serving simA port 1"));
	errors = lines_with(f->d, "rdmacm-mux: error: ");
	g_assert_cmpuint(errors->len, ==, 1);
	g_assert_nonnull(strstr(errors->pdata[0], "VM far has no socket"));
	g_assert_nonnull(strstr(errors->pdata[0], "is too long"));
	g_assert_cmpint(daemon_stop(f->d), ==, 0);
	g_assert_cmpint(g_unlink(conf), ==, 0);
	g_assert_cmpint(g_rmdir(vms), ==, 0);
}

UNIT_TEST_MAIN()
