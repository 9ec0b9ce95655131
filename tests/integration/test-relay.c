/* SPDX-License-Identifier: MIT */
/*
 * Integration tests: two real rdmacm-mux daemons on a simulated two-host
 * fabric, driven by clients of the library and by raw-socket clients.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "unit-test.h"

#define NVM 4

static const char *const timers[] = { "--handshake-timeout", "2000", "--closing-timeout", "1500",
				      "--sidr-timeout", "1000", NULL };

typedef struct Counts {
	int64_t tx[0x1b];
	int64_t rx[0x1b];
} Counts;

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *a[NVM], *b[NVM];
	Counts ca, cb; /* what each daemon must have relayed */
	uint32_t tid;
} Fixture;

static const char *attr_label(uint16_t attr)
{
	static const char *const n[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ",
					 "DREP", "SIDR_REQ", "SIDR_REP", "LAP", "APR" };
	return n[attr - 0x10];
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	f->fabric = hosts_open(timers, timers, &f->da, &f->db);
	hosts_vm_pairs(f->da, f->db, NVM, 0, f->a, f->b);
	f->tid = 0x1000;
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	vms_free(f->a, NVM);
	hosts_free(f->fabric, f->da, f->db, f->b, NVM);
}

static bool on_a(Fixture *f, Vm *vm)
{
	for (int i = 0; i < NVM; i++)
		if (f->a[i] == vm)
			return true;
	return false;
}

/* Send from @from to @to and account for it in the expected counters. */
static void xfer(Fixture *f, Vm *from, Vm *to, const uint8_t mad[256], struct rdmacm_mux_inbound *in)
{
	uint16_t attr = mad_attr(mad);

	g_assert_cmpint(vm_send(from, to->gid, mad), ==, 0);
	(on_a(f, from) ? &f->ca : &f->cb)->tx[attr]++;
	vm_expect(to, attr, in);
	(on_a(f, to) ? &f->ca : &f->cb)->rx[attr]++;
	/* The receiver sees who sent it. */
	g_assert_cmpmem(in->addr.gid, IB_GID_LEN, from->gid, IB_GID_LEN);
}

/* A REQ from @act to @pas with the client comm id @ida: the wire id @pas sees. */
static uint32_t req_wire_id(Fixture *f, Vm *act, Vm *pas, uint32_t ida)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;

	mad_build_req(mad, ida, act->gid, pas->gid, ++f->tid);
	xfer(f, act, pas, mad, &in);
	return mad_local(in.mad);
}

/*
 * One connection from @act to @pas with the client comm ids @ida and @idp,
 * with an MRA, a LAP/APR pair when @extras, and the disconnect. Checks at
 * every step that each side sees its own comm ids and only the peer's
 * wire ids.
 */
static void handshake(Fixture *f, Vm *act, Vm *pas, uint32_t ida, uint32_t idp, bool extras)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t wa, wp, wmra = 0;

	mad_build_req(mad, ida, act->gid, pas->gid, ++f->tid);
	xfer(f, act, pas, mad, &in);
	wa = mad_local(in.mad);
	g_assert_cmpuint(wa, !=, 0);
	g_assert_cmpuint(mad_remote(in.mad), ==, 0);

	if (extras) {
		mad_build(mad, CM_MRA, idp, wa, ++f->tid);
		mad_set_mra(mad, 0); /* MessageMRAed: REQ */
		xfer(f, pas, act, mad, &in);
		g_assert_cmpuint(mad_remote(in.mad), ==, ida);
		wmra = mad_local(in.mad);
	}

	mad_build(mad, CM_REP, idp, wa, ++f->tid);
	xfer(f, pas, act, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, ida);
	wp = mad_local(in.mad);
	g_assert_cmpuint(wp, !=, 0);
	if (extras)
		g_assert_cmpuint(wp, ==, wmra); /* the MRA's wire id was kept */

	mad_build(mad, CM_RTU, ida, wp, ++f->tid);
	xfer(f, act, pas, mad, &in);
	g_assert_cmpuint(mad_local(in.mad), ==, wa);
	g_assert_cmpuint(mad_remote(in.mad), ==, idp);

	if (extras) {
		mad_build(mad, CM_LAP, ida, wp, ++f->tid);
		xfer(f, act, pas, mad, &in);
		g_assert_cmpuint(mad_remote(in.mad), ==, idp);
		mad_build(mad, CM_APR, idp, wa, ++f->tid);
		xfer(f, pas, act, mad, &in);
		g_assert_cmpuint(mad_remote(in.mad), ==, ida);
	}

	mad_build(mad, CM_DREQ, ida, wp, ++f->tid);
	xfer(f, act, pas, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, idp);
	mad_build(mad, CM_DREP, idp, wa, ++f->tid);
	xfer(f, pas, act, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, ida);
}

/* A REQ answered by a consumer REJ. */
static void rejected(Fixture *f, Vm *act, Vm *pas, uint32_t ida)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t wa;

	wa = req_wire_id(f, act, pas, ida);
	mad_build(mad, CM_REJ, 0, wa, ++f->tid);
	mad_set_rej(mad, 0, 28); /* MessageRejected: REQ; Reason: consumer defined */
	xfer(f, pas, act, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, ida);
	g_assert_cmpuint(in.mad[35], ==, 28);
}

/* A REQ the active side gives up on: REJ(Timeout) with RemoteCommID 0,
 * matched by the sender's own comm id and GID. (An MRA the active side
 * sent before any REP would fit no state; test-fabric-attacks checks that
 * it is dropped.) */
static void timed_out(Fixture *f, Vm *act, Vm *pas, uint32_t ida)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t wa;

	wa = req_wire_id(f, act, pas, ida);

	mad_build(mad, CM_REJ, ida, 0, ++f->tid);
	mad_set_rej(mad, 1, 4); /* MessageRejected: REP (none came); Reason: Timeout */
	xfer(f, act, pas, mad, &in);
	g_assert_cmpuint(mad_local(in.mad), ==, wa);
	g_assert_cmpuint(mad_remote(in.mad), ==, 0);
	g_assert_cmpuint(in.mad[35], ==, 4);
}

static void sidr(Fixture *f, Vm *act, Vm *pas, uint32_t request_id)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t wire;

	mad_build(mad, CM_SIDR_REQ, request_id, 0, ++f->tid);
	xfer(f, act, pas, mad, &in);
	wire = mad_local(in.mad);
	g_assert_cmpuint(wire, !=, 0);
	mad_build(mad, CM_SIDR_REP, wire, 0, ++f->tid);
	mad_set_sidr_rep_qpn(mad, 0x03);
	xfer(f, pas, act, mad, &in);
	g_assert_cmpuint(mad_local(in.mad), ==, request_id);
}

static void check_counters(Daemon *d, const Counts *c)
{
	g_autofree char *out = NULL;

	g_assert_cmpint(daemon_stop(d), ==, 0);
	out = daemon_output(d);
	for (uint16_t attr = CM_REQ; attr <= CM_APR; attr++) {
		int64_t tx = daemon_output_attr(out, attr_label(attr), false);
		int64_t rx = daemon_output_attr(out, attr_label(attr), true);

		if (c->tx[attr] == 0 && c->rx[attr] == 0) {
			g_assert_cmpint(tx, ==, -1); /* no row */
			continue;
		}
		if (tx != c->tx[attr] || rx != c->rx[attr])
			g_error("%s: %s tx %" G_GINT64_FORMAT " rx %" G_GINT64_FORMAT
				", expected %" G_GINT64_FORMAT " %" G_GINT64_FORMAT "\n%s",
				d->ca, attr_label(attr), tx, rx, c->tx[attr], c->rx[attr], out);
	}
	g_assert_null(strstr(out, "rx dropped"));
	g_assert_null(strstr(out, "tx refused"));
}

UNIT_FIXTURE_TEST("/relay/mesh", NULL, fixture_setup, test_mesh)
{
	uint32_t id = 1;
	(void)data;

	/* Every pair across the hosts, each way, with the same small comm
	 * ids on every client, as every guest kernel picks its own. */
	for (int i = 0; i < NVM; i++)
		for (int j = 0; j < NVM; j++) {
			handshake(f, f->a[i], f->b[j], 1, 1, (i + j) % 3 == 0);
			handshake(f, f->b[j], f->a[i], 2, 2, false);
		}
	/* Every pair on one host. */
	for (int i = 0; i < NVM; i++)
		for (int j = i + 1; j < NVM; j++) {
			handshake(f, f->a[i], f->a[j], 3, 3, false);
			handshake(f, f->b[i], f->b[j], 3, 3, true);
		}
	for (int i = 0; i < NVM; i++) {
		rejected(f, f->a[i], f->b[(i + 1) % NVM], 10 + id++);
		timed_out(f, f->b[i], f->a[(i + 2) % NVM], 20 + id++);
		sidr(f, f->a[i], f->b[(i + 3) % NVM], 30 + id++);
		sidr(f, f->b[i], f->b[(i + 1) % NVM], 40 + id++);
	}

	/* Nothing else reached anybody... */
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	for (int i = 0; i < NVM; i++) {
		struct rdmacm_mux_client_stats sa = vm_stats(f->a[i]);

		vm_expect_empty(f->a[i]);
		vm_expect_empty(f->b[i]);
		g_assert_cmpuint(sa.tx_rejected, ==, 0);
		g_assert_cmpuint(sa.rx_dropped, ==, 0);
	}
	/* ...and each daemon counted exactly what the clients saw. */
	check_counters(f->da, &f->ca);
	check_counters(f->db, &f->cb);
	for (uint16_t attr = CM_REQ; attr <= CM_APR; attr++)
		g_assert_cmpint(f->ca.tx[attr] + f->cb.tx[attr], >, 0);
}

/* Two clients use the same comm ids and the same TIDs at the same time,
 * towards the same passive client. */
UNIT_FIXTURE_TEST("/relay/collision/same-passive", NULL, fixture_setup, test_collision)
{
	Vm *x = f->a[0], *y = f->a[1], *p = f->b[0];
	uint8_t mad[256];
	struct rdmacm_mux_inbound in1, in2;
	uint32_t wx, wy;
	(void)data;

	mad_build_req(mad, 7, x->gid, p->gid, 0x42);
	g_assert_cmpint(vm_send(x, p->gid, mad), ==, 0);
	mad_build_req(mad, 7, y->gid, p->gid, 0x42);
	g_assert_cmpint(vm_send(y, p->gid, mad), ==, 0);
	vm_expect(p, CM_REQ, &in1);
	vm_expect(p, CM_REQ, &in2);
	wx = mad_local(in1.mad);
	wy = mad_local(in2.mad);
	g_assert_cmpuint(wx, !=, wy);
	/* The TIDs differ on the wire too (the kernel would refuse twins). */
	g_assert_cmpuint(mad_tid_low(in1.mad), !=, mad_tid_low(in2.mad));
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	for (int i = 0; i < NVM; i++) {
		vm_expect_empty(f->a[i]);
		vm_expect_empty(f->b[i]);
	}
}

/* A retransmitted REQ keeps its wire id, and so does a retransmitted REP. */
UNIT_FIXTURE_TEST("/relay/retransmission", NULL, fixture_setup, test_retransmission)
{
	Vm *x = f->a[0], *p = f->b[0];
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t w1, w2, r1, r2;
	(void)data;

	mad_build_req(mad, 21, x->gid, p->gid, 0x71);
	vm_send_expect(x, p, mad, &in);
	w1 = mad_local(in.mad);
	g_assert_cmpint(vm_send(x, p->gid, mad), ==, 0);
	vm_expect(p, CM_REQ, &in);
	w2 = mad_local(in.mad);
	g_assert_cmpuint(w1, ==, w2);

	mad_build(mad, CM_REP, 22, w1, 0x71);
	vm_send_expect(p, x, mad, &in);
	r1 = mad_local(in.mad);
	g_assert_cmpint(vm_send(p, x->gid, mad), ==, 0);
	vm_expect(x, CM_REP, &in);
	r2 = mad_local(in.mad);
	g_assert_cmpuint(r1, ==, r2);
	g_assert_cmpuint(mad_remote(in.mad), ==, 21);
}

UNIT_FIXTURE_TEST("/relay/collision/full", NULL, fixture_setup, test_collision_full)
{
	Vm *x = f->a[0], *y = f->a[1], *p = f->b[0], *q = f->b[1];
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t wx, wy, rx, ry;
	(void)data;

	/* Both send REQ with comm id 7 and TID 0x42, x to p, y to q. */
	mad_build_req(mad, 7, x->gid, p->gid, 0x42);
	g_assert_cmpint(vm_send(x, p->gid, mad), ==, 0);
	mad_build_req(mad, 7, y->gid, q->gid, 0x42);
	g_assert_cmpint(vm_send(y, q->gid, mad), ==, 0);
	vm_expect(p, CM_REQ, &in);
	wx = mad_local(in.mad);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, x->gid, IB_GID_LEN);
	vm_expect(q, CM_REQ, &in);
	wy = mad_local(in.mad);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, y->gid, IB_GID_LEN);
	g_assert_cmpuint(wx, !=, wy);

	/* Both passive sides also pick the same comm id. */
	mad_build(mad, CM_REP, 9, wx, 0x42);
	g_assert_cmpint(vm_send(p, x->gid, mad), ==, 0);
	mad_build(mad, CM_REP, 9, wy, 0x42);
	g_assert_cmpint(vm_send(q, y->gid, mad), ==, 0);
	vm_expect(x, CM_REP, &in);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, p->gid, IB_GID_LEN);
	g_assert_cmpuint(mad_remote(in.mad), ==, 7);
	rx = mad_local(in.mad);
	vm_expect(y, CM_REP, &in);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, q->gid, IB_GID_LEN);
	g_assert_cmpuint(mad_remote(in.mad), ==, 7);
	ry = mad_local(in.mad);
	g_assert_cmpuint(rx, !=, ry);

	mad_build(mad, CM_RTU, 7, rx, 0x43);
	g_assert_cmpint(vm_send(x, p->gid, mad), ==, 0);
	mad_build(mad, CM_RTU, 7, ry, 0x43);
	g_assert_cmpint(vm_send(y, q->gid, mad), ==, 0);
	vm_expect(p, CM_RTU, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 9);
	g_assert_cmpuint(mad_local(in.mad), ==, wx);
	vm_expect(q, CM_RTU, &in);
	g_assert_cmpuint(mad_local(in.mad), ==, wy);

	mad_build(mad, CM_DREQ, 7, rx, 0x44);
	g_assert_cmpint(vm_send(x, p->gid, mad), ==, 0);
	mad_build(mad, CM_DREQ, 7, ry, 0x44);
	g_assert_cmpint(vm_send(y, q->gid, mad), ==, 0);
	vm_expect(p, CM_DREQ, &in);
	g_assert_cmpuint(mad_local(in.mad), ==, wx);
	vm_expect(q, CM_DREQ, &in);
	g_assert_cmpuint(mad_local(in.mad), ==, wy);
	mad_build(mad, CM_DREP, 9, wx, 0x44);
	g_assert_cmpint(vm_send(p, x->gid, mad), ==, 0);
	mad_build(mad, CM_DREP, 9, wy, 0x44);
	g_assert_cmpint(vm_send(q, y->gid, mad), ==, 0);
	vm_expect(x, CM_DREP, &in);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, p->gid, IB_GID_LEN);
	vm_expect(y, CM_DREP, &in);
	g_assert_cmpmem(in.addr.gid, IB_GID_LEN, q->gid, IB_GID_LEN);

	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	for (int i = 0; i < NVM; i++) {
		vm_expect_empty(f->a[i]);
		vm_expect_empty(f->b[i]);
	}
}

UNIT_TEST_MAIN()
