/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the relay logic through relay-driver.h: no sockets, no
 * device; a fake port captures sends and MADs are injected as the kernel
 * would deliver them.
 */
#include <arpa/inet.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "relay-driver.h"
#include "relay-internal.h"
#include "umad-port-fake.h"
#include "util.h"
#include "unit-test.h"

typedef struct Fixture {
	char *sysfs;
	sd_event *event;
	Relay *relay;
	UmadBuffer sent[16];
	size_t sent_len[16];
	unsigned n_sent;
	struct rdmacm_mux_msg got[64];
	unsigned n_got;
	/* The port's GIDs at indexes 1 and 2, and a remote host's. */
	uint8_t g1[16], g2[16], peer[16];
} Fixture;

static int capture_send(void *userdata, UmadBuffer *buf, size_t len)
{
	Fixture *f = userdata;

	g_assert_cmpuint(f->n_sent, <, G_N_ELEMENTS(f->sent));
	f->sent[f->n_sent] = *buf;
	f->sent_len[f->n_sent++] = len;
	return 0;
}

static void collect(void *userdata, const struct rdmacm_mux_msg *m)
{
	Fixture *f = userdata;

	g_assert_cmpuint(f->n_got, <, G_N_ELEMENTS(f->got));
	f->got[f->n_got++] = *m;
}

static void gid(const char *text, uint8_t out[16])
{
	g_assert_cmpint(inet_pton(AF_INET6, text, out), ==, 1);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	const char *const gids[] = { UNIT_TEST_GID_LINK_LOCAL, UNIT_TEST_GID_10_0_1_1,
				     UNIT_TEST_GID_10_0_1_2, NULL };
	RelayConfig cfg;
	(void)data;

	relay_driver_config(&cfg, 8, 4, 4, 4);

	memset(f, 0, sizeof(*f));
	f->sysfs = unit_test_fake_sysfs("relay-driver-XXXXXX", "fake0", gids);
	g_assert_cmpint(relay_driver_new_fake(&cfg, capture_send, f, &f->event, &f->relay), ==, 0);
	relay_driver_set_send_at_once(f->relay, true);
	relay_driver_set_time(f->relay, 1000000);
	gid("::ffff:10.0.1.1", f->g1);
	gid("::ffff:10.0.1.2", f->g2);
	gid("::ffff:10.0.2.9", f->peer);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;

	g_assert_null(relay_check_invariants(f->relay));
	relay_driver_free_fake(f->relay, f->event);
	unit_test_remove_tree(f->sysfs);
}

static void request(Fixture *f, uint32_t client, uint32_t op, const uint8_t sgid[16],
		    const uint8_t *mad, const uint8_t dest[16])
{
	struct rdmacm_mux_msg m = { 0 };

	m.hdr.msg_type = RDMACM_MUX_MSG_TYPE_REQ;
	m.hdr.op_code = op;
	memcpy(m.hdr.sgid.raw, sgid, 16);
	if (mad) {
		m.umad_len = 256;
		memcpy(m.umad.mad, mad, 256);
		m.umad.hdr.addr.grh_present = 1;
		memcpy(m.umad.hdr.addr.gid, dest, 16);
	}
	g_assert_cmpint(relay_driver_request(f->relay, client, &m), ==, 0);
	g_assert_null(relay_check_invariants(f->relay));
}

static void cm_mad(uint8_t mad[256], uint16_t attr, uint32_t local, uint32_t remote)
{
	memset(mad, 0, 256);
	mad[0] = 1, mad[1] = 7, mad[2] = 2, mad[3] = 3;
	mad[16] = (uint8_t)(attr >> 8), mad[17] = (uint8_t)attr;
	put_be32(mad + 24, local);
	put_be32(mad + 28, remote);
}

/* A MAD from the remote @peer to the client's GID at index 1. */
static void from_wire(Fixture *f, const uint8_t peer[16], uint16_t attr, uint32_t local,
		      uint32_t remote)
{
	UmadBuffer in = { 0 };

	in.hdr.addr.grh_present = 1;
	in.hdr.addr.gid_index = 1;
	memcpy(in.hdr.addr.gid, peer, 16);
	cm_mad(in.mad, attr, local, remote);
	relay_driver_wire_mad(f->relay, &in, 256);
	g_assert_null(relay_check_invariants(f->relay));
}

/* A REQ from client @c's GID @g to @peer (its primary path's DGID too),
 * with comm id @local. */
static void send_req(Fixture *f, uint32_t c, const uint8_t g[16], const uint8_t peer[16],
		     uint32_t local)
{
	uint8_t mad[256];

	cm_mad(mad, 0x10, local, 0);
	memcpy(mad + 96, peer, 16);
	request(f, c, RDMACM_MUX_OP_CODE_MAD, g, mad, peer);
}

UNIT_FIXTURE_TEST("/relay-driver/send-and-route-back", NULL, fixture_setup, test_send_and_route_back)
{
	uint32_t c1 = relay_driver_add_client(f->relay);
	uint32_t c2 = relay_driver_add_client(f->relay);
	uint32_t wire;
	(void)data;

	request(f, c1, RDMACM_MUX_OP_CODE_REG, f->g1, NULL, NULL);
	request(f, c2, RDMACM_MUX_OP_CODE_REG, f->g2, NULL, NULL);
	g_assert_cmpuint(relay_driver_drain(f->relay, c1, collect, f), ==, 1);
	g_assert_cmpint(f->got[0].hdr.err_code, ==, 0);

	/* REQ from c1: sent from GID index 1, comm id replaced. */
	send_req(f, c1, f->g1, f->peer, 7);
	g_assert_cmpuint(f->n_sent, ==, 1);
	g_assert_cmpuint(f->sent[0].hdr.addr.gid_index, ==, 1);
	g_assert_cmpmem(f->sent[0].hdr.addr.gid, 16, f->peer, 16);
	wire = get_be32(f->sent[0].mad + 24);
	g_assert_cmpuint(wire, !=, 7);

	/* The REP for that wire id goes to c1 only, mapped back to 7. */
	from_wire(f, f->peer, 0x13, 0x99, wire);
	f->n_got = 0;
	g_assert_cmpuint(relay_driver_drain(f->relay, c1, collect, f), ==, 2);
	g_assert_cmpuint(f->got[1].hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
	g_assert_cmpuint(get_be32(f->got[1].umad.mad + 28), ==, 7);
	g_assert_cmpmem(f->got[1].hdr.sgid.raw, 16, f->g1, 16);
	f->n_got = 0;
	g_assert_cmpuint(relay_driver_drain(f->relay, c2, collect, f), ==, 1); /* its REG */
	g_assert_null(relay_check_invariants(f->relay));
}

UNIT_FIXTURE_TEST("/relay-driver/quota-and-timers", NULL, fixture_setup, test_quota_and_timers)
{
	uint32_t c = relay_driver_add_client(f->relay);
	(void)data;

	request(f, c, RDMACM_MUX_OP_CODE_REG, f->g1, NULL, NULL);
	for (uint32_t i = 1; i <= 5; i++) {
		send_req(f, c, f->g1, f->peer, i);
	}
	/* Four sessions is the quota: the fifth REQ is refused. */
	g_assert_cmpuint(f->n_sent, ==, 4);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 4);
	g_assert_cmpuint(relay_counters(f->relay)->tx_reject[TX_REJECT_SESSION_QUOTA], ==, 1);

	relay_driver_set_time(f->relay, 1000000 + 999000);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 0);
	relay_driver_set_time(f->relay, 1000000 + 1001000);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 4);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);

	relay_driver_remove_client(f->relay, c);
	g_assert_false(relay_driver_has_client(f->relay, c));
	g_assert_cmpuint(relay_gid_count(f->relay), ==, 0);
}

UNIT_FIXTURE_TEST("/relay-driver/gid-quota-and-status-packets", NULL, fixture_setup, test_gid_quota_and_status_packets)
{
	uint32_t c = relay_driver_add_client(f->relay);
	UmadBuffer in = { 0 };
	uint8_t g[16];
	(void)data;

	/* The GID quota is 4 in this fixture. */
	for (int i = 1; i <= 5; i++) {
		g_autofree char *text = g_strdup_printf("::ffff:10.0.3.%d", i);
		gid(text, g);
		request(f, c, RDMACM_MUX_OP_CODE_REG, g, NULL, NULL);
	}
	f->n_got = 0;
	g_assert_cmpuint(relay_driver_drain(f->relay, c, collect, f), ==, 5);
	for (int i = 0; i < 4; i++)
		g_assert_cmpint(f->got[i].hdr.err_code, ==, 0);
	g_assert_cmpint(f->got[4].hdr.err_code, ==, -EDQUOT);
	g_assert_cmpuint(relay_gid_count(f->relay), ==, 4);

	/* A header-only status packet (a send timeout echo) addressed to one
	 * of those GIDs is never delivered as a MAD. */
	in.hdr.status = 110;
	in.hdr.addr.grh_present = 1;
	cm_mad(in.mad, 0x10, 1, 0);
	relay_driver_wire_mad(f->relay, &in, 24);
	in.hdr.status = 0;
	relay_driver_wire_mad(f->relay, &in, 24);
	f->n_got = 0;
	g_assert_cmpuint(relay_driver_drain(f->relay, c, collect, f), ==, 0);
	g_assert_cmpuint(relay_counters(f->relay)->rx_drop[RX_DROP_STATUS], ==, 2);
}

/* The session timers remove one session at @at, and none a microsecond
 * before. */
static void expect_one_expiry_at(Fixture *f, uint64_t at)
{
	relay_driver_set_time(f->relay, at - 1);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 0);
	relay_driver_set_time(f->relay, at);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 1);
}

/* A late, duplicated or reordered RTU must not revive a closed session. */
UNIT_FIXTURE_TEST("/relay-driver/late-rtu-keeps-session-closing", NULL, fixture_setup, test_late_rtu_keeps_session_closing)
{
	uint8_t mad[256];
	uint32_t c = relay_driver_add_client(f->relay);
	UmadBuffer in = { 0 };
	uint32_t wire;
	(void)data;

	request(f, c, RDMACM_MUX_OP_CODE_REG, f->g1, NULL, NULL);
	send_req(f, c, f->g1, f->peer, 7);
	wire = get_be32(f->sent[0].mad + 24);

	from_wire(f, f->peer, 0x13, 0x99, wire); /* REP */
	cm_mad(mad, 0x15, 7, 0x99); /* DREQ from our client */
	request(f, c, RDMACM_MUX_OP_CODE_MAD, f->g1, mad, f->peer);
	cm_mad(mad, 0x14, 7, 0x99); /* its late RTU */
	request(f, c, RDMACM_MUX_OP_CODE_MAD, f->g1, mad, f->peer);
	cm_mad(in.mad, 0x14, 0x99, wire); /* and one from the wire */
	relay_driver_wire_mad(f->relay, &in, 256);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 1);

	/* The closing timer (2 s here) still removes it. */
	relay_driver_set_time(f->relay, 1000000 + 2100000);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 1);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
}

/* Take what is queued to @client; the attribute of the last MAD, or 0. */
static uint16_t drain_last_attr(Fixture *f, uint32_t client, unsigned *mads)
{
	uint16_t attr = 0;

	f->n_got = 0;
	relay_driver_drain(f->relay, client, collect, f);
	*mads = 0;
	for (unsigned i = 0; i < f->n_got; i++)
		if (f->got[i].hdr.msg_type == RDMACM_MUX_MSG_TYPE_REQ) {
			attr = (uint16_t)(f->got[i].umad.mad[16] << 8 | f->got[i].umad.mad[17]);
			(*mads)++;
		}
	return attr;
}

/*
 * The session timers in the relay's own time (fixture: handshake 1 s,
 * closing 2 s, SIDR 0.5 s): a half-open handshake goes after the
 * handshake timeout and not a microsecond before; an established session
 * stays however long it is quiet; a late DREQ still finds it, and after
 * DREQ/DREP a duplicate DREQ is still routed during the closing grace
 * and starts it again, and the grace then removes it; a SIDR query ends
 * with its answer, or after the SIDR timeout without one.
 */
UNIT_FIXTURE_TEST("/relay-driver/session-timers", NULL, fixture_setup, test_session_timers)
{
	const uint64_t t0 = 1000000, hour = 3600ull * 1000000;
	uint8_t mad[256];
	uint32_t c = relay_driver_add_client(f->relay);
	const RelayCounters *k = relay_counters(f->relay);
	unsigned mads;
	uint32_t wire;
	uint64_t t;
	(void)data;

	request(f, c, RDMACM_MUX_OP_CODE_REG, f->g1, NULL, NULL);
	drain_last_attr(f, c, &mads);

	/* A half-open handshake: gone at its timeout, not before. */
	send_req(f, c, f->g1, f->peer, 1);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 1);
	expect_one_expiry_at(f, t0 + 1000000);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
	g_assert_cmpuint(k->sessions_expired, ==, 1);

	/* Established, then quiet for ten hours: kept. */
	t = t0 + 2000000;
	relay_driver_set_time(f->relay, t);
	send_req(f, c, f->g1, f->peer, 2);
	wire = get_be32(f->sent[f->n_sent - 1].mad + 24);
	from_wire(f, f->peer, 0x13, 0x99, wire); /* REP */
	g_assert_cmpuint(drain_last_attr(f, c, &mads), ==, 0x13);
	cm_mad(mad, 0x14, 2, 0x99); /* RTU */
	request(f, c, RDMACM_MUX_OP_CODE_MAD, f->g1, mad, f->peer);
	t += 10 * hour;
	relay_driver_set_time(f->relay, t);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 0);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 1);

	/* A late DREQ finds it; after DREP the closing grace runs, and a
	 * duplicate DREQ within it is still routed and starts the grace
	 * again (it covers the f->peer's retries). */
	from_wire(f, f->peer, 0x15, 0x99, wire);
	g_assert_cmpuint(drain_last_attr(f, c, &mads), ==, 0x15);
	cm_mad(mad, 0x16, 2, 0x99); /* DREP */
	request(f, c, RDMACM_MUX_OP_CODE_MAD, f->g1, mad, f->peer);
	relay_driver_set_time(f->relay, t + 1000000);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 0);
	from_wire(f, f->peer, 0x15, 0x99, wire);
	g_assert_cmpuint(drain_last_attr(f, c, &mads), ==, 0x15);
	g_assert_cmpuint(mads, ==, 1);
	relay_driver_set_time(f->relay, t + 3000000 - 1);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 0);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 1);
	relay_driver_set_time(f->relay, t + 3000000);
	g_assert_cmpuint(relay_driver_run_timers(f->relay), ==, 1);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
	/* Gone: one more DREQ reaches nobody. */
	from_wire(f, f->peer, 0x15, 0x99, wire);
	g_assert_cmpuint(drain_last_attr(f, c, &mads), ==, 0);
	g_assert_cmpuint(k->rx_drop[RX_DROP_NO_SESSION], ==, 1);

	/* A SIDR query ends with its answer... */
	t += 4000000;
	relay_driver_set_time(f->relay, t);
	cm_mad(mad, 0x17, 3, 0);
	request(f, c, RDMACM_MUX_OP_CODE_MAD, f->g1, mad, f->peer);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 1);
	wire = get_be32(f->sent[f->n_sent - 1].mad + 24);
	from_wire(f, f->peer, 0x18, wire, 0);
	g_assert_cmpuint(drain_last_attr(f, c, &mads), ==, 0x18);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
	/* ...or at its timeout without one, not before. */
	cm_mad(mad, 0x17, 4, 0);
	request(f, c, RDMACM_MUX_OP_CODE_MAD, f->g1, mad, f->peer);
	expect_one_expiry_at(f, t + 500000);
	g_assert_cmpuint(relay_session_count(f->relay), ==, 0);
	g_assert_cmpuint(k->sessions_expired, ==, 3);
}

/* The invariant check against a relay whose state is made wrong, one
 * thing at a time behind the relay's back: each is reported, and undone,
 * the relay passes again. */
static void expect_violation(Fixture *f, const char *what)
{
	const char *bad = relay_check_invariants_cheap(f->relay);

	g_assert_nonnull(bad);
	g_assert_cmpstr(bad, ==, what);
	g_assert_cmpstr(relay_check_invariants(f->relay), ==, what);
}

UNIT_FIXTURE_TEST("/relay-driver/invariant-check-finds-corruption", NULL, fixture_setup,
		  test_invariant_check_finds_corruption)
{
	uint8_t mad[256];
	uint32_t c1 = relay_driver_add_client(f->relay);
	uint32_t c2 = relay_driver_add_client(f->relay);
	Relay *r = f->relay;
	RelayClient *k1, *k2;
	UmadBuffer in = { 0 };
	Session *s, *remote;
	GHashTableIter it;
	gpointer key, value;
	uint32_t saved;
	(void)data;

	request(f, c1, RDMACM_MUX_OP_CODE_REG, f->g1, NULL, NULL);
	request(f, c2, RDMACM_MUX_OP_CODE_REG, f->g2, NULL, NULL);
	for (uint32_t id = 7; id <= 8; id++) {
		cm_mad(mad, 0x10, id, 0);
		memcpy(mad + 96, f->peer, 16);
		request(f, c1, RDMACM_MUX_OP_CODE_MAD, f->g1, mad, f->peer);
	}
	/* A f->peer's REQ to c2: a half-open session of c2, the f->peer's share. */
	in.hdr.addr.grh_present = 1;
	in.hdr.addr.gid_index = 2;
	memcpy(in.hdr.addr.gid, f->peer, 16);
	cm_mad(in.mad, 0x10, 0x55, 0);
	memcpy(in.mad + 96, f->g2, 16);
	relay_driver_wire_mad(r, &in, 256);
	k1 = relay_client_lookup(r, c1);
	k2 = relay_client_lookup(r, c2);
	g_assert_cmpuint(k1->sessions.count, ==, 2);
	g_assert_cmpuint(k2->sessions.half_open, ==, 1);
	g_assert_null(relay_check_invariants(r));

	k1->sessions.count++;
	expect_violation(f, "a client's session list disagrees with the table");
	k1->sessions.count--;

	s = session_table_get(r->sessions, k1->sessions.head);
	s->state = SESSION_STATE_COUNT;
	expect_violation(f, "a session has a bad state or timer");
	s->state = SESSION_REQ_SENT;

	saved = s->wire_id;
	s->wire_id ^= 0x1000; /* its key changed, its index entry did not */
	expect_violation(f, "a session's wire id does not find it");
	s->wire_id = saved;

	s->client_id = c2;
	expect_violation(f, "a client's session list holds a session not its own");
	s->client_id = c1;

	s->flags |= SESSION_F_HALF_OPEN;
	expect_violation(f, "a session the client started counts as half-open");
	s->flags &= (uint8_t)~SESSION_F_HALF_OPEN;

	remote = session_table_get(r->sessions, k2->sessions.head);
	remote->flags &= (uint8_t)~SESSION_F_HALF_OPEN;
	expect_violation(f, "a client's half-open count is wrong");
	remote->flags |= SESSION_F_HALF_OPEN;

	g_hash_table_insert(r->gid_owners, g_memdup2(f->g1, 16), k2);
	expect_violation(f, "a GID's owner does not hold it");
	g_hash_table_insert(r->gid_owners, g_memdup2(f->g1, 16), k1);

	g_hash_table_remove(r->gid_owners, f->g2);
	expect_violation(f, "a client lists a GID it does not own");
	g_hash_table_insert(r->gid_owners, g_memdup2(f->g2, 16), k2);

	g_hash_table_iter_init(&it, r->half_open_peers);
	g_assert_true(g_hash_table_iter_next(&it, &key, &value));
	g_hash_table_iter_replace(&it, GUINT_TO_POINTER(GPOINTER_TO_UINT(value) + 1));
	expect_violation(f, "the peers' shares disagree with a client's half-open count");
	g_hash_table_iter_init(&it, r->half_open_peers);
	g_assert_true(g_hash_table_iter_next(&it, &key, &value));
	g_hash_table_iter_replace(&it, GUINT_TO_POINTER(GPOINTER_TO_UINT(value) - 1));

	saved = (uint32_t)r->counters->sessions_created;
	r->counters->sessions_created = 0;
	expect_violation(f, "more live sessions than were ever created");
	r->counters->sessions_created = saved;

	g_assert_null(relay_check_invariants(r));
}

UNIT_TEST_MAIN()
