/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of hostile and broken clients: every attack is refused
 * with the right error, counted, and changes nothing for anybody else; a
 * client that stops reading or vanishes mid-handshake hurts nobody.
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

typedef struct Fixture {
	Fabric *fabric;
	Daemon *da, *db;
	Vm *a1, *a2, *b1, *b2;
	uint32_t tid;
} Fixture;

static void setup_with(Fixture *f, const char *const *opts)
{
	f->fabric = hosts_open(opts, opts, &f->da, &f->db);
	hosts_vms(f->da, f->db, "a1 a2 b1 b2", (Vm **const[]){ &f->a1, &f->a2, &f->b1, &f->b2 });
	f->tid = 0x5000;
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	setup_with(f, data);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	hosts_free(f->fabric, f->da, f->db, (Vm *const[]){ f->a1, f->a2, f->b1, f->b2 }, 4);
}

/* Stop @d and return its final output (trace, log, counters). */
static char *stop_output(Daemon *d)
{
	g_assert_cmpint(daemon_stop(d), ==, 0);
	return daemon_output(d);
}

/* One of the counters a daemon prints as it stops, and its value. */
typedef struct CounterWant {
	const char *label;
	int64_t want;
} CounterWant;

/* Stop @d and check the counters it prints: @c ends with a NULL label. */
static void stop_expect_counters(Daemon *d, const CounterWant *c)
{
	g_autofree char *out = stop_output(d);

	for (; c->label; c++)
		if (daemon_output_counter(out, c->label) != c->want)
			g_error("counter \"%s\" is %" G_GINT64_FORMAT ", want %" G_GINT64_FORMAT,
				c->label, daemon_output_counter(out, c->label), c->want);
}

static int reg(Vm *vm, const uint8_t gid[IB_GID_LEN], bool unreg)
{
	struct rdmacm_mux_response resp;
	uint32_t ticket;

	if (unreg)
		g_assert_cmpint(rdmacm_mux_unregister_gid(vm->mux, gid, &ticket), ==, 0);
	else
		g_assert_cmpint(rdmacm_mux_register_gid(vm->mux, gid, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(vm->mux, ticket, 5000, &resp), ==, 0);
	return resp.error;
}

/* A full, healthy handshake: proof that an attack changed nothing. */
static void healthy_handshake(Fixture *f, Vm *x, Vm *y)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	uint32_t wx, wy;

	mad_build_req(mad, 0x77, x->gid, y->gid, ++f->tid);
	vm_send_expect(x, y, mad, &in);
	wx = mad_local(in.mad);
	mad_build(mad, CM_REP, 0x88, wx, ++f->tid);
	vm_send_expect(y, x, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 0x77);
	wy = mad_local(in.mad);
	mad_build(mad, CM_RTU, 0x77, wy, ++f->tid);
	vm_send_expect(x, y, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 0x88);
}

UNIT_FIXTURE_TEST("/attacks/gid-ownership", NULL, fixture_setup, test_gid_ownership)
{
	uint8_t nobody[IB_GID_LEN];
	struct rdmacm_mux_msg m;
	int fd;
	(void)data;

	gid_parse("::ffff:10.0.1.7", nobody);
	/* Another client's GID: refused, and the owner keeps it. */
	g_assert_cmpint(reg(f->a2, f->a1->gid, false), ==, -EACCES);
	g_assert_cmpint(reg(f->a2, f->a1->gid, true), ==, -EACCES);
	g_assert_cmpint(reg(f->a2, nobody, true), ==, -ENOENT);
	g_assert_cmpint(reg(f->a1, f->a1->gid, false), ==, -EEXIST);
	/* The same through the base protocol, with QEMU's codes. */
	fd = raw_connect(f->da);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, f->a1->gid);
	g_assert_cmpint(raw_request(fd, &m), ==, RDMACM_MUX_ERR_CODE_EACCES);
	raw_frame(&m, RDMACM_MUX_OP_CODE_UNREG, f->a1->gid);
	g_assert_cmpint(raw_request(fd, &m), ==, RDMACM_MUX_ERR_CODE_EACCES);
	raw_frame(&m, RDMACM_MUX_OP_CODE_UNREG, nobody);
	g_assert_cmpint(raw_request(fd, &m), ==, RDMACM_MUX_ERR_CODE_ENOTFOUND);
	close(fd);

	healthy_handshake(f, f->a1, f->b1);
	stop_expect_counters(f->da, (const CounterWant[]){ { "  reg ok", 2 }, { "  unreg ok", 0 },
			     { "  unreg refused", 4 }, { NULL, 0 } });
}

UNIT_FIXTURE_TEST("/attacks/bad-mads", NULL, fixture_setup, test_bad_mads)
{
	uint8_t mad[256];
	struct rdmacm_mux_mad_addr addr = { .qpn = htonl(1), .grh_present = 1 };
	struct rdmacm_mux_response resp;
	struct rdmacm_mux_msg m;
	uint32_t ticket;
	int fd;
	(void)data;

	memcpy(addr.gid, f->b1->gid, IB_GID_LEN);
	/* A foreign source GID: a1 pretends to be a2. */
	mad_build_req(mad, 1, f->a2->gid, f->b1->gid, ++f->tid);
	g_assert_cmpint(rdmacm_mux_send_mad(f->a1->mux, f->a2->gid, &addr, mad, 256, &ticket), ==, 0);
	g_assert_cmpint(rdmacm_mux_wait(f->a1->mux, ticket, 5000, &resp), ==, 0);
	g_assert_cmpint(resp.error, ==, -EACCES);

	/* Not CM: the SA class, a Get, class version 1; ClassPortInfo. */
	mad_build_req(mad, 2, f->a1->gid, f->b1->gid, ++f->tid);
	mad[1] = 0x03;
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, -EPROTO);
	mad[1] = 0x07;
	mad[3] = 0x01;
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, -EPROTO);
	mad[3] = 0x03;
	mad[2] = 1;
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, -EPROTO);
	mad_build(mad, 0x0001, 0, 0, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, f->b1->gid, mad), ==, -EOPNOTSUPP);

	/* Bad umad_len, through the base protocol as a hostile QEMU would. */
	fd = raw_connect(f->da);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, (const uint8_t[IB_GID_LEN]){ [10] = 0xff, [11] = 0xff,
								   [12] = 10, [14] = 1, [15] = 5 });
	g_assert_cmpint(raw_request(fd, &m), ==, 0);
	mad_build_req(m.umad.mad, 3, m.hdr.sgid.raw, f->b1->gid, ++f->tid);
	m.hdr.op_code = RDMACM_MUX_OP_CODE_MAD;
	memcpy(m.umad.hdr.addr.gid, f->b1->gid, IB_GID_LEN);
	m.umad.hdr.addr.grh_present = 1;
	m.umad.hdr.addr.qpn = htonl(1);
	const int32_t bad_lens[] = { 300, 257, 23, 0, -64 };
	for (size_t i = 0; i < G_N_ELEMENTS(bad_lens); i++) {
		m.umad_len = bad_lens[i];
		g_assert_cmpint(raw_request(fd, &m), ==, RDMACM_MUX_ERR_CODE_EINVAL);
	}
	/* A REQ too short for its destination GID. */
	m.umad_len = 100;
	g_assert_cmpint(raw_request(fd, &m), ==, RDMACM_MUX_ERR_CODE_EINVAL);
	close(fd);

	/* None of it reached the wire: each was refused (counted below)
	 * before its answer, and the daemon wrote nothing. */
	g_assert_cmpfloat(daemon_metric_sum(f->da, "rdmacm_mux_mads_total", LABELS("direction", "tx")),
			  ==, 0);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(f->b1);
	healthy_handshake(f, f->a1, f->b1);
	stop_expect_counters(f->da, (const CounterWant[]){ { "tx refused, foreign-sgid", 1 },
			     { "tx refused, not-cm", 3 }, { "tx refused, unsupported-attr", 1 },
			     { "tx refused, bad-length", 5 }, { "tx refused, malformed", 1 },
			     { NULL, 0 } });
}

UNIT_FIXTURE_TEST("/attacks/truncated-and-garbage", NULL, fixture_setup, test_truncated_and_garbage)
{
	struct rdmacm_mux_msg m, frames[12];
	uint8_t *junk = (uint8_t *)frames;
	g_autoptr(GRand) rnd = g_rand_new_with_seed(1234);
	int fd, responses = 0, r;
	(void)data;

	/* Half a frame, then gone. */
	fd = raw_connect(f->da);
	memset(frames, 0, sizeof(frames));
	g_assert_cmpint(send(fd, junk, 100, MSG_NOSIGNAL), ==, 100);
	close(fd);

	/* Garbage: the daemon answers each bad frame, then hangs up. */
	fd = raw_connect(f->da);
	for (size_t i = 0; i < sizeof(frames); i++)
		junk[i] = (uint8_t)g_rand_int(rnd);
	for (size_t i = 0; i < G_N_ELEMENTS(frames); i++)
		frames[i].hdr.msg_type |= 0x100;
	(void)send(fd, junk, sizeof(frames), MSG_NOSIGNAL);
	while ((r = raw_recv(fd, &m, 5000)) == 0) {
		g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_RESP);
		g_assert_cmpint(m.hdr.err_code, ==, RDMACM_MUX_ERR_CODE_EINVAL);
		responses++;
	}
	g_assert_cmpint(r, ==, -EPIPE);
	g_assert_cmpint(responses, ==, 8); /* the default --max-bad-frames */
	close(fd);

	/* The daemon and everybody else are fine. */
	healthy_handshake(f, f->a1, f->b1);
	healthy_handshake(f, f->a2, f->a1);
	stop_expect_counters(f->da, (const CounterWant[]){ { "  truncated frames", 1 },
			     { "  bad frames", 8 }, { "  clients dropped", 1 }, { NULL, 0 } });
}

UNIT_FIXTURE_TEST("/attacks/hijack", NULL, fixture_setup, test_hijack)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	g_autofree char *out_a = NULL, *out_b = NULL;
	uint32_t wa;
	Vm *evil;
	(void)data;

	/* a1 asks b1 for a connection with comm id 5. */
	mad_build_req(mad, 5, f->a1->gid, f->b1->gid, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);
	wa = mad_local(in.mad);

	/* a2 uses a1's comm id: it is not in a2's namespace. */
	mad_build(mad, CM_DREQ, 5, wa, ++f->tid);
	g_assert_cmpint(vm_send(f->a2, f->b1->gid, mad), ==, -ENOENT);
	mad_build(mad, CM_RTU, 5, wa, ++f->tid);
	g_assert_cmpint(vm_send(f->a2, f->b1->gid, mad), ==, -ENOENT);
	/* b2 answers the REQ that went to b1. */
	mad_build(mad, CM_REP, 9, wa, ++f->tid);
	g_assert_cmpint(vm_send(f->b2, f->a1->gid, mad), ==, -ENOENT);
	/* a2 starts its own connection with the same comm id: it gets its
	 * own wire id, and the answers to a1 stay a1's. */
	mad_build_req(mad, 5, f->a2->gid, f->b1->gid, ++f->tid);
	vm_send_expect(f->a2, f->b1, mad, &in);
	g_assert_cmpuint(mad_local(in.mad), !=, wa);
	mad_build(mad, CM_REP, 9, wa, ++f->tid);
	vm_send_expect(f->b1, f->a1, mad, &in);
	g_assert_cmpuint(mad_remote(in.mad), ==, 5);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(f->a2);

	/* A client that takes over a GID cannot answer what came for the
	 * previous owner before it let go. */
	mad_build_req(mad, 6, f->a1->gid, f->b2->gid, ++f->tid);
	vm_send_expect(f->a1, f->b2, mad, &in);
	wa = mad_local(in.mad);
	g_assert_cmpint(reg(f->b2, f->b2->gid, true), ==, 0);
	evil = vm_new(f->db, "::ffff:10.0.2.2", "evil");
	mad_build(mad, CM_REP, 9, wa, ++f->tid);
	g_assert_cmpint(vm_send(evil, f->a1->gid, mad), ==, -EACCES);
	vm_free(evil);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(f->a1);

	out_a = stop_output(f->da);
	out_b = stop_output(f->db);
	g_assert_cmpint(daemon_output_counter(out_a, "tx refused, no-session"), ==, 2);
	g_assert_cmpint(daemon_output_counter(out_b, "tx refused, no-session"), ==, 1);
	g_assert_cmpint(daemon_output_counter(out_b, "tx refused, hijack"), ==, 1);
}

static const char *const slow_opts[] = { "--max-queue", "16", NULL };

/* A client that never reads: its queue fills and drops are counted, while
 * the others' handshakes go on. Nothing is lost silently. */
UNIT_FIXTURE_TEST("/robustness/slow-reader", slow_opts, fixture_setup, test_slow_reader)
{
	uint8_t slow_gid[IB_GID_LEN], mad[256];
	struct rdmacm_mux_msg m;
	g_autofree char *out = NULL;
	const int flood = 3000;
	int fd, got = 0, given;
	int64_t dropped;
	(void)data;

	gid_parse("::ffff:10.0.1.5", slow_gid);
	fd = raw_connect(f->da);
	raw_frame(&m, RDMACM_MUX_OP_CODE_REG, slow_gid);
	g_assert_cmpint(raw_request(fd, &m), ==, 0);

	for (int i = 0; i < flood; i++) {
		mad_build_req(mad, (uint32_t)i + 1, f->b1->gid, slow_gid, ++f->tid);
		g_assert_cmpint(vm_send(f->b1, slow_gid, mad), ==, 0);
		if (i % 500 == 0)
			healthy_handshake(f, f->a1, f->b2);
	}
	healthy_handshake(f, f->b2, f->a2);

	/* Every REQ of the flood reached the daemon, which queued it for
	 * the slow client or dropped it (a2 got one more REQ). */
	for (gint64 end = g_get_monotonic_time() + HARNESS_WAIT_MS * 1000;;) {
		g_autoptr(PromPage) page = daemon_metrics(f->da);
		double rx = prom_page_value(page, "rdmacm_mux_mads_total",
					    LABELS("attribute", "REQ", "direction", "rx"));
		double full = prom_page_value(page, "rdmacm_mux_rx_dropped_total",
					      LABELS("reason", "queue-full"));

		if (rx + full == flood + 1) {
			given = (int)rx - 1;
			break;
		}
		if (g_get_monotonic_time() > end)
			g_error("%g of %d REQs reached the daemon", rx + full - 1, flood);
		g_usleep(2000);
	}
	/* Drain what the slow client was given: all of it, and no more. */
	while (got < given) {
		g_assert_cmpint(raw_recv(fd, &m, 5000), ==, 0);
		g_assert_cmpuint(m.hdr.msg_type, ==, RDMACM_MUX_MSG_TYPE_REQ);
		got++;
	}
	daemon_wait_metric(f->da, "rdmacm_mux_client_queued_frames", NULL, 0);
	g_assert_cmpint(raw_recv(fd, &m, 0), ==, -ETIMEDOUT);
	close(fd);
	out = stop_output(f->da);
	dropped = daemon_output_counter(out, "rx dropped, queue-full");
	g_assert_cmpint(dropped, >, 0);
	g_assert_cmpint(got + dropped, ==, flood);
	g_test_message("slow reader: %d delivered, %" G_GINT64_FORMAT " dropped", got, dropped);
}

/* A client that disconnects mid-handshake: its sessions and GIDs go at
 * once, and the next client, which gets the same fd number, receives
 * none of its traffic. */
UNIT_FIXTURE_TEST("/robustness/disconnect-mid-handshake", NULL, fixture_setup, test_disconnect_mid_handshake)
{
	uint8_t mad[256];
	struct rdmacm_mux_inbound in;
	g_autofree char *out = NULL;
	uint32_t wb;
	int fd_old, fd_new;
	Vm *next;
	(void)data;

	mad_build_req(mad, 11, f->a1->gid, f->b1->gid, ++f->tid);
	vm_send_expect(f->a1, f->b1, mad, &in);
	mad_build(mad, CM_REP, 12, mad_local(in.mad), ++f->tid);
	vm_send_expect(f->b1, f->a1, mad, &in);
	wb = mad_local(in.mad);

	vm_free(f->b1);
	f->b1 = NULL;
	/* Once the daemon saw it go (had the next client come first, it
	 * would have got another fd), its GID is free at once... */
	daemon_wait_metric(f->db, "rdmacm_mux_clients", NULL, 1);
	next = vm_new(f->db, "::ffff:10.0.2.1", "next");
	fd_old = daemon_client_fd(f->db, 2);
	fd_new = daemon_client_fd(f->db, 4);
	g_assert_cmpint(fd_old, >, 0);
	g_assert_cmpint(fd_new, ==, fd_old);
	/* ...and the old session's traffic goes nowhere. */
	mad_build(mad, CM_RTU, 11, wb, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, next->gid, mad), ==, 0);
	mad_build(mad, CM_DREQ, 11, wb, ++f->tid);
	g_assert_cmpint(vm_send(f->a1, next->gid, mad), ==, 0);
	daemon_wait_metric(f->db, "rdmacm_mux_rx_dropped_total", LABELS("reason", "no-session"), 2);
	daemons_wait_quiet((Daemon *[]){ f->da, f->db }, 2);
	vm_expect_empty(next);
	healthy_handshake(f, f->a2, next);
	vm_free(next);

	out = stop_output(f->db);
	g_assert_cmpint(daemon_output_counter(out, "rx dropped, no-session"), ==, 2);
	g_assert_nonnull(strstr(out, "1 GIDs and 1 sessions removed"));
}


UNIT_TEST_MAIN()
