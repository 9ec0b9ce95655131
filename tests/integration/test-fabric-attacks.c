/* SPDX-License-Identifier: MIT */
/*
 * Integration tests that play a hostile fabric host (simX, a third
 * simulated port running `umad-probe forge`) and hostile clients against
 * real daemons: forged session MADs, guessing wire ids, closing a
 * neighbour's session through loopback, REQs to an unowned GID, a GID that
 * moves in the port's table, and REQ floods. Each attack must be refused
 * and counted, and the victim's connection must finish normally.
 */
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "harness.h"
#include "unit-test.h"

#define ATTACKER_GID "::ffff:10.0.9.1"
/* Longer than the GID table's minimum re-read interval. */
#define GID_RELOAD_WAIT_USEC 150000
/* Longer than the daemon's GID epoch (RELAY_GID_EPOCH_USEC, 10 ms): an
 * entry used within the last epoch is not read again before the next. */
#define GID_EPOCH_WAIT_USEC 20000

static const char *const flood_opts[] = { "--max-queue", "32", "--max-half-open", "64",
					  "--max-half-open-per-peer", "16", "--max-sessions", "64",
					  NULL };

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *a1, *a2, *b1;
	uint8_t attacker[16]; /* the forger's own GID */
	uint8_t spoofed_b1[16]; /* b1's GID, in the forger's table too */
	uint32_t tid;
} Fixture;

/* A connection as each end sees it. */
typedef struct Conn {
	Vm *act, *pas;
	uint32_t id_act, id_pas; /* the clients' own comm ids */
	uint32_t wire_act;	 /* act's id on the wire (its daemon's) */
	uint32_t wire_pas;	 /* pas's id on the wire */
} Conn;

static void setup_with(Fixture *f, const char *const *opts_a)
{
	const char *const fabric[] = { "--preset", "two-hosts", "--roce-ca",
				       "simX=" ATTACKER_GID ",::ffff:10.0.2.1", NULL };

	f->fabric = fabric_new_args(fabric);
	hosts_start(f->fabric, opts_a, NULL, &f->da, &f->db);
	hosts_vms(f->da, f->db, "a1 a2 b1", (Vm **const[]){ &f->a1, &f->a2, &f->b1 });
	gid_parse(ATTACKER_GID, f->attacker);
	gid_parse("::ffff:10.0.2.1", f->spoofed_b1);
	f->tid = 0x9000;
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	setup_with(f, data);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hosts_free(f->fabric, f->da, f->db, (Vm *const[]){ f->a1, f->a2, f->b1 }, 3);
}

/* REQ, REP, RTU between two clients: an established connection. */
static Conn establish(Fixture *f, Vm *act, Vm *pas, uint32_t id_act, uint32_t id_pas)
{
	Conn c = { .act = act, .pas = pas, .id_act = id_act, .id_pas = id_pas };
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];

	mad_build_req(mad, id_act, act->gid, pas->gid, ++f->tid);
	vm_send_expect(act, pas, mad, &in);
	c.wire_act = mad_local(in.mad);
	mad_build(mad, CM_REP, id_pas, c.wire_act, ++f->tid);
	vm_send_expect(pas, act, mad, &in);
	c.wire_pas = mad_local(in.mad);
	g_assert_cmpuint(mad_remote(in.mad), ==, id_act);
	mad_build(mad, CM_RTU, id_act, c.wire_pas, ++f->tid);
	vm_send_expect(act, pas, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, id_pas);
	return c;
}

/* The passive side disconnects; both ends see it with their own ids. This
 * is what an attack on the connection must not have broken. */
static void finish(Fixture *f, const Conn *c)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];

	mad_build(mad, CM_DREQ, c->id_pas, c->wire_act, ++f->tid);
	vm_send_expect(c->pas, c->act, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, c->id_act);
	g_assert_cmpmem(in.addr.gid, 16, c->pas->gid, 16);
	mad_build(mad, CM_DREP, c->id_act, c->wire_pas, ++f->tid);
	vm_send_expect(c->act, c->pas, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, c->id_pas);
}

/* The next inbound MAD of @vm is @attr, to its GID @gid. */
static void expect_on(Vm *vm, const uint8_t gid[16], uint16_t attr, struct rdmacm_mux_inbound *in)
{
	g_assert_cmpint(vm_recv(vm, in, 5000), ==, 0);
	g_assert_cmphex(mad_attr(in->mad), ==, attr);
	g_assert_cmpmem(in->local_gid, 16, gid, 16);
}

/* Stop @d and return a counter of its final dump. */
static int64_t stopped_counter(Daemon *d, const char *label)
{
	g_autofree char *out = NULL;

	g_assert_cmpint(daemon_stop(d), ==, 0);
	out = daemon_output(d);
	return daemon_output_counter(out, label);
}

/*
 * Attack 1: session MADs with the victim's RemoteCommID but a made-up
 * LocalCommID, from a foreign GID or from the peer's own (spoofed) GID;
 * and a REP that would redirect the established session. None may reach
 * the client or change its session.
 */
UNIT_FIXTURE_TEST("/fabric-attacks/forged-session-mads", NULL, fixture_setup, test_forged_session_mads)
{
	Conn c = establish(f, f->a1, f->b1, 0x11, 0x22);
	static const uint16_t attrs[] = { CM_DREQ, CM_REJ, CM_DREP, CM_REP, CM_RTU, CM_MRA, CM_LAP };
	Forger *g = forger_start(f->fabric, "simX");
	g_autoptr(GArray) rx = NULL;
	uint8_t mad[256];
	unsigned sent = 0, forged = 0;
	double tx_before = daemon_metric_sum(f->da, "rdmacm_mux_mads_total", LABELS("direction", "tx"));
	(void)data;

	for (size_t i = 0; i < G_N_ELEMENTS(attrs); i++) {
		mad_build(mad, attrs[i], 0xbad00000u + (uint32_t)i, c.wire_act, ++f->tid);
		if (attrs[i] == CM_REJ)
			mad[32] = 2 << 6; /* MessageRejected: other */
		if (attrs[i] == CM_MRA)
			mad[32] = 1 << 6; /* MessageMRAed: REP */
		/* From the attacker's own GID, and from the peer's. */
		forger_send(g, f->attacker, f->a1->gid, 1, 28, mad);
		forger_send(g, f->spoofed_b1, f->a1->gid, 1, 28, mad);
		forged += 2;
	}
	rx = forger_finish(g, &sent);
	g_assert_cmpuint(sent, ==, forged);
	/* The daemon dropped every one as spoofed, and answered none of
	 * them: nothing went to the attacker. */
	daemon_wait_metric(f->da, "rdmacm_mux_rx_dropped_total", LABELS("reason", "spoofed"), forged);
	g_assert_cmpfloat(daemon_metric_sum(f->da, "rdmacm_mux_mads_total", LABELS("direction", "tx")),
			  ==, tx_before);
	daemons_wait_quiet_plus((Daemon *[]){ f->da, f->db }, 2, forged);
	vm_expect_empty(f->a1);
	vm_expect_empty(f->b1);
	/* The session still has its peer: the real disconnect works. */
	finish(f, &c);
	g_assert_cmpuint(rx->len, ==, 0);
	g_assert_cmpint(stopped_counter(f->da, "rx dropped, spoofed"), ==, forged);
}

/*
 * Attack 1, the state half: messages with the right ids that cannot arrive
 * in the session's state change nothing: a second REP with another
 * LocalCommID, an RTU before any REP, an MRA the active side sends before
 * any REP (no CM sends one), a DREP on an established session.
 */
UNIT_FIXTURE_TEST("/fabric-attacks/bad-state", NULL, fixture_setup, test_bad_state)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	uint32_t wa;
	Conn c;
	(void)data;

	/* An MRA from the REQ's sender, before any REP. */
	mad_build_req(mad, 0x31, f->a1->gid, f->b1->gid, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);
	wa = mad_local(in.mad);
	mad_build(mad, CM_MRA, 0x31, 0, ++f->tid);
	mad[32] = 2 << 6; /* MessageMRAed: other */
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, 0);
	daemon_wait_metric(f->db, "rdmacm_mux_rx_dropped_total", LABELS("reason", "bad-state"), 1);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(f->b1);
	(void)wa;

	c = establish(f, f->a2, f->b1, 0x41, 0x42);
	/* A DREP on an established session, from the real peer. */
	mad_build(mad, CM_DREP, c.id_pas, c.wire_act, ++f->tid);
	g_assert_cmpint(vm_send(c.pas, c.act->gid, mad), ==, 0);
	daemon_wait_metric(f->da, "rdmacm_mux_rx_dropped_total", LABELS("reason", "bad-state"), 1);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(c.act);
	finish(f, &c);
	g_assert_cmpint(stopped_counter(f->db, "rx dropped, bad-state"), ==, 1);
	g_assert_cmpint(stopped_counter(f->da, "rx dropped, bad-state"), ==, 1);
}

/*
 * Attack 2: wire ids an observer collects have no structure, and one of
 * them plus a spray of 32,768 DREQs around it closes nothing.
 */
UNIT_FIXTURE_TEST("/fabric-attacks/wire-ids-unpredictable", NULL, fixture_setup, test_wire_ids_unpredictable)
{
	Conn c1 = establish(f, f->a1, f->b1, 0x51, 0x52);
	Conn c2 = establish(f, f->a2, f->b1, 0x61, 0x62);
	Forger *g = forger_start(f->fabric, "simX");
	g_autoptr(GHashTable) high = g_hash_table_new(g_direct_hash, g_direct_equal);
	g_autoptr(GArray) rx = NULL;
	uint32_t first = 0;
	unsigned near = 0, sent = 0;
	uint8_t mad[256];
	double relayed;
	(void)data;

	/* a1 connects to the observer 10,000 times; the observer keeps the
	 * LocalCommID (a wire id) of each REQ. */
	for (uint32_t i = 0; i < 10000; i++) {
		mad_build_req(mad, 0x1000 + i, f->a1->gid, f->attacker, ++f->tid);
		g_assert_cmpint(vm_send(f->a1, f->attacker, mad), ==, 0);
	}
	rx = forger_finish(g, &sent);
	g_assert_cmpuint(rx->len, ==, 10000);
	for (guint i = 0; i < rx->len; i++) {
		uint32_t w = mad_local(g_array_index(rx, ForgedRx, i).mad);

		if (i == 0)
			first = w;
		g_hash_table_add(high, GUINT_TO_POINTER((w >> 16) + 1));
		near += (w > first ? w - first : first - w) < (1u << 15);
	}
	g_test_message("10000 wire ids: %u distinct high 16 bits, %u within 2^15 of the first",
		       g_hash_table_size(high), near);
	g_assert_cmpuint(g_hash_table_size(high), >, 8000);
	g_assert_cmpuint(near, <, 10);

	/* The spray: DREQs with every RemoteCommID within 2^14 of the one it
	 * saw, at both victims' GIDs. */
	g = forger_start(f->fabric, "simX");
	relayed = daemon_metric_sum(f->da, "rdmacm_mux_mads_total", LABELS("direction", "rx"));
	mad_build(mad, CM_DREQ, 0xbad1, first - 16384, ++f->tid);
	forger_send(g, f->attacker, f->a1->gid, 32768, 28, mad);
	forger_send(g, f->spoofed_b1, f->a2->gid, 32768, 28, mad);
	g_array_unref(forger_finish(g, &sent));
	g_assert_cmpuint(sent, ==, 65536);
	/* Every DREQ was dropped; none was relayed. (The 10,000 REQs went
	 * to the forger, not to a daemon.) */
	daemons_wait_quiet_plus((Daemon *[]){ f->da, f->db }, 2, 65536.0 - 10000);
	g_assert_cmpfloat(daemon_metric_sum(f->da, "rdmacm_mux_mads_total", LABELS("direction", "rx")),
			  ==, relayed);
	vm_expect_empty(f->a1);
	vm_expect_empty(f->a2);
	finish(f, &c1);
	finish(f, &c2);
}

/*
 * Attack 3: a client closes a neighbour's session through loopback: it
 * sets up a session with itself (two GIDs), then sends DREQs inside it
 * aimed at the neighbour's wire id. Refused, and the neighbour's
 * connection is untouched.
 */
UNIT_FIXTURE_TEST("/fabric-attacks/loopback-dreq", NULL, fixture_setup, test_loopback_dreq)
{
	Conn victim = establish(f, f->a2, f->b1, 0x71, 0x72);
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_inbound in;
	uint8_t g2[16], mad[256];
	uint32_t ticket, w1, w2;
	(void)data;

	gid_parse("::ffff:10.0.1.5", g2);
	g_assert_cmpint(rdmacm_mux_register_gid(f->a1->mux, g2, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(f->a1->mux, ticket, 5000, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, 0);

	/* a1's own session, G1 -> G2, through the kernel's loopback. */
	mad_build_req(mad, 0x81, f->a1->gid, g2, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, g2, mad), ==, 0);
	expect_on(f->a1, g2, CM_REQ, &in);
	w1 = mad_local(in.mad);
	mad_build(mad, CM_REP, 0x82, w1, ++f->tid);
	g_assert_cmpint(rdmacm_mux_send_mad(f->a1->mux, g2,
					    &(struct rdmacm_mux_mad_addr){ .grh_present = 1 },
					    mad, 256, &ticket),
			==, 0);
	g_assert_cmpint(rdmacm_mux_wait(f->a1->mux, ticket, 5000, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, 0);
	vm_expect(f->a1, CM_REP, &in);
	w2 = mad_local(in.mad);
	mad_build(mad, CM_RTU, 0x81, w2, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, g2, mad), ==, 0);
	expect_on(f->a1, g2, CM_RTU, &in);

	/* Inside that session, DREQs at the neighbour's wire id, to the
	 * neighbour's GID and to its own. */
	mad_build(mad, CM_DREQ, 0x81, victim.wire_act, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, f->a2->gid, mad), ==, -EACCES);
	g_assert_cmpint(vm_send(f->a1, g2, mad), ==, -EACCES);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(f->a2);
	vm_expect_empty(f->a1);
	finish(f, &victim);
	g_assert_cmpint(stopped_counter(f->da, "tx refused, spoofed"), ==, 2);
}

/*
 * Attack 4: a REQ sent to a GID of the port that no client owns, naming an
 * owned GID in its body, reaches nobody: the GRH says where it went.
 */
UNIT_FIXTURE_TEST("/fabric-attacks/req-to-unowned-gid", NULL, fixture_setup, test_req_to_unowned_gid)
{
	Forger *g = forger_start(f->fabric, "simX");
	uint8_t unowned[16], mad[256];
	unsigned sent = 0;
	(void)data;

	gid_parse("::ffff:10.0.1.8", unowned);
	mad_build_req(mad, 0x91, f->attacker, f->a1->gid, ++f->tid);
	forger_send(g, f->attacker, unowned, 1, 24, mad);
	g_array_unref(forger_finish(g, &sent));
	g_assert_cmpuint(sent, ==, 1);
	daemon_wait_metric(f->da, "rdmacm_mux_rx_dropped_total", LABELS("reason", "no-gid-owner"), 1);
	daemons_wait_quiet_plus((Daemon *[]){ f->da, f->db }, 2, 1);
	vm_expect_empty(f->a1);
	/* A connection to its own GID still reaches it. */
	Conn c = establish(f, f->b1, f->a1, 0x92, 0x93);
	finish(f, &c);
	g_assert_cmpint(stopped_counter(f->da, "rx dropped, no-gid-owner"), ==, 1);
}

/*
 * Attack 5: the host removes GID X and GID Y takes its table index (an
 * address moved). The holder of X must not send with Y as its source
 * (EADDRNOTAVAIL until X is back), and REQs to Y go to Y's owner.
 */
UNIT_FIXTURE_TEST("/fabric-attacks/gid-index-reused", NULL, fixture_setup, test_gid_index_reused)
{
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	Vm *y;
	Conn c;
	(void)data;

	/* a1 has sent from X (index 2), so the daemon knows that index. */
	c = establish(f, f->a1, f->b1, 0xa1, 0xa2);
	finish(f, &c);
	y = vm_new(f->da, "::ffff:10.0.7.7", "y"); /* not in the table yet */
	fabric_cli(f->fabric, "del-gid", (const char *const[]){ "simA", "1", "::ffff:10.0.1.1", NULL });
	fabric_cli(f->fabric, "add-gid", (const char *const[]){ "simA", "1", "::ffff:10.0.7.7", NULL });
	/* a1's last send may have checked index 2 within the last epoch. */
	g_usleep(GID_EPOCH_WAIT_USEC);

	mad_build_req(mad, 0xa3, f->a1->gid, f->b1->gid, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, -EADDRNOTAVAIL);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(f->b1);
	/* A REQ to Y, now at X's old index, reaches Y's owner only. */
	mad_build_req(mad, 0xa4, f->b1->gid, y->gid, ++f->tid);
	vm_send_expect(f->b1, y, mad, &in);
	g_assert_cmpmem(in.addr.gid, 16, f->b1->gid, 16);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(f->a1);

	/* X comes back at another index: a1 sends from it again. */
	fabric_cli(f->fabric, "add-gid", (const char *const[]){ "simA", "1", "::ffff:10.0.1.1", NULL });
	g_usleep(GID_RELOAD_WAIT_USEC);
	c = establish(f, f->a1, f->b1, 0xa5, 0xa6);
	finish(f, &c);
	vm_free(y);
}

/*
 * Attack 6: a flood of REQs with new comm ids at a client that does not
 * read. Only delivered REQs make sessions, one peer gets only its share,
 * and neither the client's own connections nor another peer's REQ are
 * blocked.
 */
UNIT_FIXTURE_TEST("/fabric-attacks/req-flood", flood_opts, fixture_setup, test_req_flood)
{
	Forger *g = forger_start(f->fabric, "simX");
	struct rdmacm_mux_client_stats st;
	struct rdmacm_mux_inbound in;
	uint8_t mad[256];
	unsigned sent = 0, got = 0, flood = 0;
	g_autofree char *out = NULL;
	Conn c;
	(void)data;

	mad_build_req(mad, 0x10000, f->attacker, f->a1->gid, ++f->tid);
	forger_send(g, f->attacker, f->a1->gid, 2000, 24, mad);
	g_array_unref(forger_finish(g, &sent));
	g_assert_cmpuint(sent, ==, 2000);
	/* The sessions a1 holds are the REQs it was given, within the
	 * attacker's share: all the daemon dealt with the flood. */
	daemons_wait_quiet_plus((Daemon *[]){ f->da, f->db }, 2, 2000);
	while (vm_recv(f->a1, &in, 0) == 0) {
		g_assert_cmphex(mad_attr(in.mad), ==, CM_REQ);
		flood++;
	}
	st = vm_stats(f->a1);
	g_test_message("after 2000 REQs from one host: a1 got %u and has %u sessions", flood,
		       st.sessions);
	g_assert_cmpuint(flood, <=, 16);
	g_assert_cmpuint(st.sessions, ==, flood);

	/* a1's own connection is not blocked... */
	c = establish(f, f->a1, f->b1, 0xb1, 0xb2);
	finish(f, &c);
	/* ...nor is another peer's (behind the queued flood). */
	mad_build_req(mad, 0xb3, f->b1->gid, f->a1->gid, ++f->tid);
	g_assert_cmpint(vm_send(f->b1, f->a1->gid, mad), ==, 0);
	daemons_wait_quiet_plus((Daemon *[]){ f->da, f->db }, 2, 2000);
	while (vm_recv(f->a1, &in, 0) == 0) {
		if (mad_attr(in.mad) == CM_REQ && !memcmp(in.addr.gid, f->b1->gid, 16))
			got++;
	}
	g_assert_cmpuint(got, ==, 1);

	g_assert_cmpint(daemon_stop(f->da), ==, 0);
	out = daemon_output(f->da);
	g_test_message("sessions created %" G_GINT64_FORMAT ", REQs delivered %" G_GINT64_FORMAT
		       ", queue-full %" G_GINT64_FORMAT ", peer-quota %" G_GINT64_FORMAT,
		       daemon_output_counter(out, "sessions created "),
		       daemon_output_attr(out, "REQ", true),
		       daemon_output_counter(out, "rx dropped, queue-full"),
		       daemon_output_counter(out, "rx dropped, peer-quota"));
	/* No session for a REQ that was dropped. */
	g_assert_cmpint(daemon_output_counter(out, "sessions created "), <=,
			daemon_output_attr(out, "REQ", true) +
				daemon_output_attr(out, "REQ", false));
	/* (A counter the dump leaves out is -1: it is 0.) */
	g_assert_cmpint(MAX(daemon_output_counter(out, "rx dropped, peer-quota"), 0) +
				MAX(daemon_output_counter(out, "rx dropped, queue-full"), 0),
			==, 2000 - flood);
}

UNIT_TEST_MAIN()
