/* SPDX-License-Identifier: MIT */
/*
 * The daemon next to the host's own CM (ib_cm), on the simulated fabric,
 * whose sysfs tree the tests dress up the way ib_cm does on the real
 * kernel (its per-port counters, /sys/module/ib_cm; tests/vm checks the
 * real thing): who holds the CM class where, in the start log and in
 * "rdmacm-muxctl status"; the exit-3 message naming the holder and the
 * remedy; and --wait-for-device, which keeps a unit that starts before its
 * device from failing (and so from letting ib_cm take the device).
 */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "harness.h"
#include "unit-test.h"

typedef struct Fixture {
	Fabric *fabric;
	char *sys;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	f->fabric = fabric_new("two-hosts");
	f->sys = g_build_filename(f->fabric->dir, "fabric", "sys", NULL);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	g_free(f->sys);
	fabric_free(f->fabric);
}

static void sys_mkdir(Fixture *f, const char *rel)
{
	g_autofree char *p = g_build_filename(f->sys, rel, NULL);

	g_assert_cmpint(g_mkdir_with_parents(p, 0755), ==, 0);
}

/* What loading ib_cm does to sysfs: its module directory, and its
 * counters on each port of @ib_cm_ca (NULL: none). */
static void fake_ib_cm(Fixture *f, const char *ib_cm_ca)
{
	sys_mkdir(f, "module/ib_cm");
	if (ib_cm_ca) {
		g_autofree char *rel =
			g_strdup_printf("class/infiniband/%s/ports/1/cm_rx_msgs", ib_cm_ca);
		sys_mkdir(f, rel);
	}
}

static JsonNode *status_json(const Daemon *d)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *out = NULL, *errout = NULL;
	g_autoptr(JsonParser) p = json_parser_new();
	const char *argv[] = { harness_env_bin("RDMACM_MUXCTL_BIN"), "--socket", d->socket,
			       "status", "--json", NULL };
	int status;

	if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout,
			  &status, &err) ||
	    !g_spawn_check_wait_status(status, &err))
		g_error("rdmacm-muxctl status --json: %s\n%s", err->message, errout);
	if (!json_parser_load_from_data(p, out, -1, &err))
		g_error("status --json is not JSON (%s):\n%s", err->message, out);
	return json_node_copy(json_parser_get_root(p));
}

static char *status_text(const Daemon *d)
{
	const char *argv[] = { harness_env_bin("RDMACM_MUXCTL_BIN"), "--socket", d->socket,
			       "status", NULL };
	char *out = NULL;
	int status;

	g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
				   NULL, &status, NULL));
	g_assert_true(g_spawn_check_wait_status(status, NULL));
	return out;
}

/* The "owner" of CA port 1 in a status answer's "cm_owners" (asserts it
 * is listed once). */
static const char *owner_of(JsonNode *status, const char *ca)
{
	JsonObject *o = json_object_get_object_member(json_node_get_object(status), "cm_owners");
	JsonArray *ports = json_object_get_array_member(o, "ports");
	const char *hit = NULL;

	for (guint i = 0; i < json_array_get_length(ports); i++) {
		JsonObject *p = json_array_get_object_element(ports, i);

		if (strcmp(json_object_get_string_member(p, "device"), ca) == 0 &&
		    json_object_get_int_member(p, "port") == 1) {
			g_assert_null(hit);
			hit = json_object_get_string_member(p, "owner");
		}
	}
	g_assert_nonnull(hit);
	return hit;
}

static bool ib_cm_loaded(JsonNode *status)
{
	JsonObject *o = json_object_get_object_member(json_node_get_object(status), "cm_owners");

	return json_object_get_boolean_member(o, "ib_cm_loaded");
}

/*
 * The boot order of issue 17: the daemon takes simA while ib_cm is not
 * loaded, then ib_cm comes and takes simB; status follows each step.
 */
UNIT_FIXTURE_TEST("/host-cm/owners-in-status", NULL, fixture_setup, test_owners_in_status)
{
	Daemon *d;
	g_autoptr(JsonNode) before = NULL, after = NULL;
	g_autofree char *log = NULL, *text = NULL;
	JsonObject *owners;
	(void)data;

	d = daemon_start(f->fabric, "simA", NULL);
	log = daemon_output(d);
	g_assert_nonnull(strstr(log, "CM class owners: simA:1 daemon, simB:1 unknown; ib_cm is "
				     "not loaded"));
	/* One port: no word about the whole device. */
	g_assert_null(strstr(log, "ports: holding port"));

	before = status_json(d);
	g_assert_false(ib_cm_loaded(before));
	g_assert_cmpstr(owner_of(before, "simA"), ==, "daemon");
	g_assert_cmpstr(owner_of(before, "simB"), ==, "unknown");
	owners = json_object_get_object_member(json_node_get_object(before), "cm_owners");
	g_assert_cmpint(json_object_get_int_member(owners, "device_ports"), ==, 1);
	/* The keys that were there before cm_owners are still there. */
	g_assert_true(json_object_has_member(json_node_get_object(before), "clients"));

	fake_ib_cm(f, "simB");
	after = status_json(d);
	g_assert_true(ib_cm_loaded(after));
	g_assert_cmpstr(owner_of(after, "simA"), ==, "daemon");
	g_assert_cmpstr(owner_of(after, "simB"), ==, "ib_cm");
	text = status_text(d);
	g_assert_nonnull(strstr(text, "CM class owners (ib_cm is loaded):\n"));
	g_assert_true(g_regex_match_simple("\n  simA port 1 +this rdmacm-mux\n", text, 0, 0));
	g_assert_true(g_regex_match_simple("\n  simB port 1 +ib_cm \\(the host's CM\\)\n", text, 0,
					   0));
	g_assert_null(strstr(text, "whole device"));
	daemon_free(d);
}

/*
 * A device with two ports (a second port directory in sysfs; the fabric
 * serves port 1 alone): the start log and status say that the daemon keeps
 * ib_cm off the whole device.
 */
UNIT_FIXTURE_TEST("/host-cm/whole-device", NULL, fixture_setup, test_whole_device)
{
	Daemon *d;
	g_autoptr(JsonNode) st = NULL;
	g_autofree char *log = NULL, *text = NULL;
	JsonObject *owners;
	(void)data;

	sys_mkdir(f, "class/infiniband/simA/ports/2");
	d = daemon_start(f->fabric, "simA", NULL);
	log = daemon_output(d);
	g_assert_nonnull(strstr(log, "simA has 2 ports: holding port 1 keeps the host's ib_cm "
				     "off all of them"));
	fake_ib_cm(f, "simB");
	st = status_json(d);
	owners = json_object_get_object_member(json_node_get_object(st), "cm_owners");
	g_assert_cmpint(json_object_get_int_member(owners, "device_ports"), ==, 2);
	g_assert_cmpstr(owner_of(st, "simA"), ==, "daemon");
	text = status_text(d);
	g_assert_nonnull(strstr(text, "whole device:   simA has 2 ports; ib_cm takes a device "
				      "whole or not at all"));
	g_assert_true(g_regex_match_simple("\n  simA port 2 +not ib_cm \\(it left the device "
					   "alone\\)\n", text, 0, 0));
	daemon_free(d);
}

/* ib_cm loaded, and simB not among its devices: something else holds a
 * port of simB (here a second daemon), and status says "not ib_cm". */
UNIT_FIXTURE_TEST("/host-cm/ib-cm-left-device-alone", NULL, fixture_setup, test_ib_cm_left_device_alone)
{
	Daemon *da, *db;
	g_autoptr(JsonNode) st = NULL;
	(void)data;

	da = daemon_start(f->fabric, "simA", NULL);
	db = daemon_start(f->fabric, "simB", NULL);
	fake_ib_cm(f, NULL);
	st = status_json(da);
	g_assert_true(ib_cm_loaded(st));
	g_assert_cmpstr(owner_of(st, "simA"), ==, "daemon");
	g_assert_cmpstr(owner_of(st, "simB"), ==, "not_ib_cm");
	daemon_free(db);
	daemon_free(da);
}

/* The log line of @output that contains @needle, or NULL. */
static char *line_with(const char *output, const char *needle)
{
	g_auto(GStrv) lines = g_strsplit(output, "\n", -1);

	for (char **l = lines; *l; l++)
		if (strstr(*l, needle))
			return g_strdup(*l);
	return NULL;
}

/* Exit 3, one line naming the holder: another daemon, or ib_cm with the
 * remedy (ib_cm only lets go of a device when it is unloaded). The daemons
 * of one CA share a log file, hence the line searches. */
UNIT_FIXTURE_TEST("/host-cm/exit-3-names-the-owner", NULL, fixture_setup, test_exit_3_names_the_owner)
{
	Daemon *first, *second, *third;
	g_autofree char *out2 = NULL, *out3 = NULL, *line = NULL;
	(void)data;

	first = daemon_start(f->fabric, "simA", NULL);
	second = daemon_launch(f->fabric, "simA", NULL);
	g_assert_cmpint(daemon_wait_exit(second, 10000), ==, 3);
	out2 = daemon_output(second);
	g_assert_nonnull(strstr(out2, "the CM class is already owned on simA port 1, not by ib_cm: "
				      "another rdmacm-mux or umad program holds it"));

	/* The same refusal where sysfs shows ib_cm on simA. */
	fake_ib_cm(f, "simA");
	third = daemon_launch(f->fabric, "simA", NULL);
	g_assert_cmpint(daemon_wait_exit(third, 10000), ==, 3);
	out3 = daemon_output(third);
	line = line_with(out3, "the CM class is already owned on simA port 1 by ib_cm");
	g_assert_nonnull(line);
	/* The remedy is in that same line: one journal entry says it all. */
	g_assert_nonnull(strstr(line, "start rdmacm-mux before ib_cm loads"));
	g_assert_nonnull(strstr(line, "unload ib_cm and its users, start rdmacm-mux, then load "
				      "them again"));
	daemon_free(third);
	daemon_free(second);
	daemon_free(first);
}

/*
 * --wait-for-device: simB's sysfs entries are away (the device is not
 * there yet) when the daemon starts; it waits, and serves once they are
 * back. Without the option it exits 4 at once; with it and no device ever,
 * it exits 4 when the time is up.
 */
UNIT_FIXTURE_TEST("/host-cm/wait-for-device", NULL, fixture_setup, test_wait_for_device)
{
	g_autofree char *dev = g_build_filename(f->sys, "class", "infiniband", "simB", NULL);
	g_autofree char *away = g_strdup_printf("%s.away", dev);
	g_autofree char *out = NULL;
	Daemon *d, *quick, *never;
	gint64 t0;
	(void)data;

	g_assert_cmpint(g_rename(dev, away), ==, 0);
	quick = daemon_launch(f->fabric, "simB", NULL);
	g_assert_cmpint(daemon_wait_exit(quick, 10000), ==, 4);

	d = daemon_launch(f->fabric, "simB", (const char *const[]){ "--wait-for-device", "20", NULL });
	g_assert_false(daemon_wait_serving(d, 700));
	g_assert_cmpint(d->pid, !=, 0);
	out = daemon_output(d);
	g_assert_nonnull(strstr(out, "waiting up to 20 s for simB port 1 to appear"));
	g_assert_cmpint(g_rename(away, dev), ==, 0);
	g_assert_true(daemon_wait_serving(d, 5000));
	g_assert_cmpint(daemon_stop(d), ==, 0);

	t0 = g_get_monotonic_time();
	never = daemon_launch(f->fabric, "simZ", (const char *const[]){ "--wait-for-device", "1", NULL });
	g_assert_cmpint(daemon_wait_exit(never, 10000), ==, 4);
	g_assert_cmpint(g_get_monotonic_time() - t0, >=, 1000000);
	daemon_free(never);
	daemon_free(d);
	daemon_free(quick);
}

/* SIGTERM while waiting ends the wait: exit 0, as any stop. */
UNIT_FIXTURE_TEST("/host-cm/stop-while-waiting", NULL, fixture_setup, test_stop_while_waiting)
{
	Daemon *d;
	(void)data;

	d = daemon_launch(f->fabric, "simZ", (const char *const[]){ "--wait-for-device", "60", NULL });
	g_assert_false(daemon_wait_serving(d, 300));
	g_assert_cmpint(d->pid, !=, 0);
	g_assert_cmpint(daemon_stop(d), ==, 0);
	daemon_free(d);
}

UNIT_TEST_MAIN()
