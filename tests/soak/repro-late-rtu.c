/* SPDX-License-Identifier: MIT */
/*
 * Reproducer for the soak's finding F1: an RTU that arrives (or is sent)
 * after the DREQ of the same connection moves a CLOSING session back to
 * ESTABLISHED and disarms its removal timer, so the session stays until
 * its client disconnects. On a fabric that reorders or delays MADs the
 * passive side's daemon sees exactly this order (DREQ, then the late RTU).
 *
 * No faults are needed: client a1 (simA) connects to b1 (simB) with
 * REQ/REP, then sends DREQ before its RTU; b1 answers DREQ with DREP, then
 * gets the RTU (which its daemon now drops, as ib_cm would, but a late RTU
 * must not revive the sending side's session either). Once their closing
 * timers ran (the daemons' metrics show no session; the wait gives up after
 * HARNESS_WAIT_MS) both clients are idle and their sessions must be gone. Exit status 0 when they are, 1 (with the
 * numbers) when they survive. Run through meson (suite 'soak-repro'). Fixed in
 * 0d1dc53; kept as a regression test.
 */
#include <glib.h>
#include <stdio.h>

#include "harness.h"

static const char *const timers[] = { "--handshake-timeout", "1500", "--closing-timeout", "500",
				      "--sidr-timeout", "500", NULL };

int main(void)
{
	Fabric *f = fabric_new("two-hosts");
	Daemon *da = daemon_start(f, "simA", timers);
	Daemon *db = daemon_start(f, "simB", timers);
	Vm *a = vm_new(da, "::ffff:10.0.1.1", "a1");
	Vm *b = vm_new(db, "::ffff:10.0.2.1", "b1");
	struct rdmacm_mux_inbound in;
	struct rdmacm_mux_client_stats sa, sb;
	uint8_t mad[256];
	uint32_t wa, wb;
	g_autofree char *outa = NULL, *outb = NULL;
	int rc;

	mad_build_req(mad, 0x11, a->gid, b->gid, 1);
	g_assert_cmpint(vm_send(a, b->gid, mad), ==, 0);
	vm_expect(b, CM_REQ, &in);
	wa = mad_local(in.mad);
	mad_build(mad, CM_REP, 0x22, wa, 2);
	g_assert_cmpint(vm_send(b, a->gid, mad), ==, 0);
	vm_expect(a, CM_REP, &in);
	wb = mad_local(in.mad);

	/* DREQ overtakes the RTU. */
	mad_build(mad, CM_DREQ, 0x11, wb, 3);
	g_assert_cmpint(vm_send(a, b->gid, mad), ==, 0);
	vm_expect(b, CM_DREQ, &in);
	mad_build(mad, CM_DREP, 0x22, wa, 4);
	g_assert_cmpint(vm_send(b, a->gid, mad), ==, 0);
	vm_expect(a, CM_DREP, &in);
	mad_build(mad, CM_RTU, 0x11, wb, 5);
	g_assert_cmpint(vm_send(a, b->gid, mad), ==, 0);
	/* As ib_cm would, b's daemon drops an RTU on a closing session
	 * ("bad-state"), and it changes nothing there either. */
	daemon_wait_metric(db, "rdmacm_mux_rx_dropped_total", LABELS("reason", "bad-state"), 1);
	daemon_wait_metric(db, "rdmacm_mux_client_queued_frames", NULL, 0);
	vm_expect_empty(b);

	/* Both sides closed: their closing timers remove the sessions (a
	 * revived one would stay; the wait gives up after many timeouts). */
	for (gint64 end = g_get_monotonic_time() + HARNESS_WAIT_MS * 1000;
	     g_get_monotonic_time() < end;) {
		if (daemon_metric_sum(da, "rdmacm_mux_sessions", NULL) == 0 &&
		    daemon_metric_sum(db, "rdmacm_mux_sessions", NULL) == 0)
			break;
		g_usleep(10000);
	}
	sa = vm_stats(a);
	sb = vm_stats(b);
	printf("after DREQ, DREP, late RTU and the closing timeout (0.5 s): a1 has %u sessions, "
	       "b1 has %u\n",
	       sa.sessions, sb.sessions);
	daemon_stop(da);
	daemon_stop(db);
	outa = daemon_output(da);
	outb = daemon_output(db);
	printf("simA: sessions created %" G_GINT64_FORMAT " expired %" G_GINT64_FORMAT
	       "; simB: created %" G_GINT64_FORMAT " expired %" G_GINT64_FORMAT "\n",
	       daemon_output_counter(outa, "sessions created "),
	       daemon_output_counter(outa, "expired "), daemon_output_counter(outb, "sessions created "),
	       daemon_output_counter(outb, "expired "));
	rc = sa.sessions == 0 && sb.sessions == 0 ? 0 : 1;
	printf("%s\n", rc ? "BUG: a closed connection's session survives a late RTU"
			  : "ok: the sessions are gone");
	vm_free(a);
	vm_free(b);
	daemon_free(da);
	daemon_free(db);
	fabric_free(f);
	return rc;
}
