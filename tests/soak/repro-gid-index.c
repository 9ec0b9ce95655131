/* SPDX-License-Identifier: MIT */
/*
 * Reproducer for the soak's finding F2: a GID at port table index 256 or
 * more. A umad address carries gid_index in 8 bits; the relay stored the
 * index from gid_table_find() there with a (uint8_t) cast, so a client
 * whose GID sits at index 258 sent with the source GID at index 2, which
 * belongs to another client (soft-RoCE's table has 1024 entries): the
 * receiving side saw the wrong sender, and answers went to the other
 * client. The TX path's addressing (relay_tx_address(),
 * daemon/relay/relay-tx.c) now refuses an index the header cannot carry.
 *
 * A fabric whose simA port has 300 GIDs (::ffff:10.1.x.y for x.y = 0..299);
 * a1 registers the one at index 258 (::ffff:10.1.1.2), b1 on simB receives
 * a1's REQ. Exit 0 when b1 sees a1's GID as the sender (or the daemon
 * refuses the send), 1 when it sees another GID.
 */
#include <arpa/inet.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

int main(void)
{
	Fabric f = { .dir = g_dir_make_tmp("rdmacm-mux-repro-XXXXXX", NULL) };
	g_autofree char *fabric = g_build_filename(f.dir, "fabric", NULL);
	GString *gids = g_string_new("simA=");
	g_autoptr(GError) err = NULL;
	int status, rc, verdict;
	Daemon *da, *db;
	Vm *a, *b;
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	char sender[INET6_ADDRSTRLEN];

	for (int i = 0; i < 300; i++)
		g_string_append_printf(gids, "%s::ffff:10.1.%d.%d", i ? "," : "", i >> 8, i & 255);
	{
		char *argv[] = { (char *)g_getenv("UMAD_SIM_CLI"), (char *)"create", fabric,
				 (char *)"--gid-table-len", (char *)"300", (char *)"--roce-ca",
				 gids->str, (char *)"--roce-ca", (char *)"simB=::ffff:10.2.0.1",
				 NULL };

		g_assert_nonnull(argv[0]);
		g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
					   NULL, NULL, &status, &err));
		g_assert_cmpint(status, ==, 0);
	}
	da = daemon_start(&f, "simA", NULL);
	db = daemon_start(&f, "simB", NULL);
	a = vm_new(da, "::ffff:10.1.1.2", "a1"); /* index 258 */
	b = vm_new(db, "::ffff:10.2.0.1", "b1");

	mad_build_req(mad, 0x11, a->gid, b->gid, 1);
	rc = vm_send(a, b->gid, mad);
	if (rc != 0) {
		printf("ok: the daemon refused the send from index 258 (%d)\n", rc);
		verdict = 0;
	} else {
		vm_expect(b, CM_REQ, &in);
		inet_ntop(AF_INET6, in.addr.gid, sender, sizeof(sender));
		verdict = memcmp(in.addr.gid, a->gid, IB_GID_LEN) != 0;
		printf("a1 (::ffff:10.1.1.2, table index 258) sent a REQ; b1 sees it from %s: %s\n",
		       sender,
		       verdict ? "BUG: another client's GID (index 258 & 0xff = 2)" : "ok");
	}
	vm_free(a);
	vm_free(b);
	daemon_free(da);
	daemon_free(db);
	g_string_free(gids, TRUE);
	fabric_free(g_memdup2(&f, sizeof(f)));
	return verdict;
}
