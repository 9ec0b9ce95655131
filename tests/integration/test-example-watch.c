/* SPDX-License-Identifier: MIT */
/*
 * examples/rdmacm-mux-watch.c is the code librdmacm-mux(3) shows; this runs
 * it on the real daemon and the simulated fabric, so that the page's
 * example does what the page says: started before its daemon, it connects
 * when the daemon comes (RDMACM_MUX_OPEN_ASYNC), registers its GID, prints
 * the MADs routed to it, and lives through a restart of the daemon
 * (RDMACM_MUX_OPEN_RECONNECT) with its GID registered again.
 */
#include <glib.h>
#include <string.h>

#include "harness.h"

#define OWN_GID "::ffff:10.0.1.1"

/* The peer sends the watcher a REQ, which it must print. */
static void peer_sends_req(Vm *peer, uint32_t id, Child *watch)
{
	g_autofree char *line = NULL;
	uint8_t own[IB_GID_LEN], mad[256];

	gid_parse(OWN_GID, own);
	mad_build_req(mad, id, peer->gid, own, id);
	g_assert_cmpint(vm_send(peer, own, mad), ==, 0);
	line = child_expect(watch, "MAD ");
	g_assert_cmpstr(line, ==, "MAD 0x0010 from ::ffff:10.0.2.1, 256 bytes");
}

static void test_watch(void)
{
	Fabric *f = fabric_new("two-hosts");
	Daemon *db = daemon_start(f, "simB", NULL), *da;
	Vm *peer = vm_new(db, "::ffff:10.0.2.1", "b1");
	/* Daemon A's socket, before there is a daemon A. */
	g_autofree char *sock = g_strdup_printf("%s/mux-simA-1", f->dir);
	const char *argv[] = { harness_env_bin("WATCH_BIN"), sock, OWN_GID, "2", NULL };
	Child *watch = child_spawn("watch", argv, NULL);
	g_autofree char *line = NULL;

	line = child_expect(watch, "attempt 1 failed: ");
	g_assert_true(g_str_has_prefix(line, "attempt 1 failed: No such file or directory; "
					      "next in "));
	da = daemon_start(f, "simA", NULL);
	g_free(child_expect(watch, "connected, capabilities 0x3"));
	g_free(child_expect(watch, "registered"));
	peer_sends_req(peer, 0x3a1, watch);

	daemon_kill(da);
	daemon_restart(da);
	g_free(child_expect(watch, "disconnected: "));
	g_free(g_steal_pointer(&line));
	line = child_expect(watch, "reconnected after ");
	g_assert_true(g_str_has_suffix(line, ", 1 GIDs registered again"));
	peer_sends_req(peer, 0x3a2, watch);
	/* Two MADs: it is done. */
	g_assert_cmpint(child_wait(watch), ==, 0);

	vm_free(peer);
	daemon_free(da);
	daemon_free(db);
	fabric_free(f);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/example/watch/async-reconnect", test_watch);
	return g_test_run();
}
